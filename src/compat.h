/*
 * compat.h -- PostgreSQL version differences, in one place.
 *
 * scd2 is built and tested on PostgreSQL 15 and 18 in CI; 16 and 17 take the
 * same guards (scripts/test.sh /path/to/pg_config runs the suites on them).
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

/* A tid Datum as an ItemPointer: storage/itemptr.h has it from 16 on. */
#if PG_VERSION_NUM < 160000
#define DatumGetItemPointer(X) ((ItemPointer) DatumGetPointer(X))
#endif

/* pg_class_ownercheck and pg_namespace_aclcheck became object_*check in 16. */
#if PG_VERSION_NUM >= 160000
#include "catalog/pg_class.h"
#include "catalog/pg_namespace.h"
#include "utils/acl.h"
#define scd2_relation_ownercheck(relid, roleid) \
	object_ownercheck(RelationRelationId, (relid), (roleid))
#define scd2_namespace_aclcheck(nspid, roleid, mode) \
	object_aclcheck(NamespaceRelationId, (nspid), (roleid), (mode))
#else
#include "utils/acl.h"
#define scd2_relation_ownercheck(relid, roleid) \
	pg_class_ownercheck((relid), (roleid))
#define scd2_namespace_aclcheck(nspid, roleid, mode) \
	pg_namespace_aclcheck((nspid), (roleid), (mode))
#endif

/*
 * search_path for code run on another role's behalf: 17 has core's own
 * RestrictSearchPath() (what VACUUM, ANALYZE, CREATE INDEX and REFRESH
 * MATERIALIZED VIEW use); before it, the same setting made by hand.  Call
 * after NewGUCNestLevel().
 */
#include "utils/guc.h"
#if PG_VERSION_NUM >= 170000
#define scd2_restrict_search_path() RestrictSearchPath()
#else
#define scd2_restrict_search_path() \
	((void) set_config_option("search_path", "pg_catalog, pg_temp", \
							  PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, \
							  true, 0, false))
#endif

/*
 * MERGE ... RETURNING, usable in WITH (17+): the load's MERGE returns the
 * change feed itself, with the surrogate keys of the rows as written; 15
 * and 16 read the feed back from the change table and the dimension.
 */
#define SCD2_MERGE_RETURNING (PG_VERSION_NUM >= 170000)

/* The backend's local transaction id moved into MyProc->vxid in 17. */
#if PG_VERSION_NUM >= 170000
#define SCD2_MY_LXID	(MyProc->vxid.lxid)
#else
#define SCD2_MY_LXID	(MyProc->lxid)
#endif

/* index_beginscan took the instrumentation argument in 18. */
#if PG_VERSION_NUM >= 180000
#define scd2_index_beginscan(heap, index, snap, nkeys, norderbys) \
	index_beginscan((heap), (index), (snap), NULL, (nkeys), (norderbys))
#else
#define scd2_index_beginscan(heap, index, snap, nkeys, norderbys) \
	index_beginscan((heap), (index), (snap), (nkeys), (norderbys))
#endif

/*
 * A function that does not return: 18 spells it pg_noreturn before the
 * declaration, older versions pg_attribute_noreturn() after it.
 */
#if PG_VERSION_NUM >= 180000
#define SCD2_NORETURN_PRE pg_noreturn
#define SCD2_NORETURN_POST
#else
#define SCD2_NORETURN_PRE
#define SCD2_NORETURN_POST pg_attribute_noreturn()
#endif

/*
 * A disabled plan node (enable_seqscan = off and the like) added
 * disable_cost to its path's cost before 18; 18 counts disabled nodes
 * instead, compared before the costs.
 */
#define SCD2_DISABLE_COST_IN_PATHS (PG_VERSION_NUM < 180000)

/* tuplesort_getdatum gained its copy argument in 16 (15 always copies). */
#include "utils/tuplesort.h"
#if PG_VERSION_NUM >= 160000
#define scd2_tuplesort_getdatum(state, val, isnull) \
	tuplesort_getdatum((state), true, true, (val), (isnull), NULL)
#else
#define scd2_tuplesort_getdatum(state, val, isnull) \
	tuplesort_getdatum((state), true, (val), (isnull), NULL)
#endif

#endif							/* SCD2_COMPAT_H */
