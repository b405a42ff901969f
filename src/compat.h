/*
 * compat.h -- PostgreSQL version differences, in one place.
 *
 * scd2 is built and tested on PostgreSQL 15.  Code for 16-18 sits behind
 * PG_VERSION_NUM guards and is untested until a CI machine has those
 * versions.
 */
#ifndef SCD2_COMPAT_H
#define SCD2_COMPAT_H

#include "postgres.h"

#if PG_VERSION_NUM >= 160000
#include "varatt.h"
#endif

#if PG_VERSION_NUM < 150000
#error "scd2 requires PostgreSQL 15 or later (MERGE)"
#endif

/* pg_class_ownercheck became object_ownercheck in 16. */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_class.h"
#include "utils/acl.h"
#define scd2_relation_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#else
#include "utils/acl.h"
#define scd2_relation_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#endif

#endif							/* SCD2_COMPAT_H */
