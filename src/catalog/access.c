/*
 * access.c -- step 1 of a load: the caller's and the owner's
 * privileges and the relation kinds (the row-security refusal is
 * guard.c's, the owner context the load runs in common/exec.c's).
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "nodes/parsenodes.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "catalog/registry.h"
#include "common/common.h"

/*
 * The privileges a load needs, held by role: SELECT on the staging table,
 * SELECT, INSERT and UPDATE on the dimension (SELECT for a dry run).  The
 * caller's are checked as the caller (who must not use a load to read or
 * write what it may not), the owner's as the role the load runs as (who
 * must not read a staging table only the caller may read).
 */
void
scd2_check_privileges(Oid stg_oid, Oid dim_oid, bool dry_run, Oid roleid, bool as_owner)
{
	AclMode		dim_mode = ACL_SELECT | (dry_run ? 0 : (ACL_INSERT | ACL_UPDATE));
	AclMode		missing;
	Oid			rels[2] = {stg_oid, dim_oid};

	if (pg_class_aclcheck(stg_oid, roleid, ACL_SELECT) != ACLCHECK_OK)
	{
		if (as_owner)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for staging table %s", scd2_relation_display_name(stg_oid)),
					 errdetail("The load runs as role \"%s\", the owner of dimension %s, which has no SELECT on the staging table.",
							   GetUserNameFromId(roleid, false), scd2_relation_display_name(dim_oid)),
					 errhint("Grant SELECT on %s to %s, or load from a staging table that role may read.",
							 scd2_relation_display_name(stg_oid),
							 quote_identifier(GetUserNameFromId(roleid, false)))));
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for staging table %s", scd2_relation_display_name(stg_oid)),
				 errdetail("A load reads the staging table and needs SELECT on it.")));
	}

	/*
	 * Every privilege is needed: pg_class_aclcheck() with several bits
	 * succeeds when ANY of them is held.
	 */
	missing = dim_mode & ~pg_class_aclmask(dim_oid, roleid, dim_mode, ACLMASK_ALL);
	if (missing != 0 && as_owner)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", scd2_relation_display_name(dim_oid)),
				 errdetail("The load runs as role \"%s\", the owner of the dimension, which lacks:%s%s%s.",
						   GetUserNameFromId(roleid, false),
						   (missing & ACL_SELECT) ? " SELECT" : "",
						   (missing & ACL_INSERT) ? " INSERT" : "",
						   (missing & ACL_UPDATE) ? " UPDATE" : ""),
				 errhint("Grant the owner SELECT, INSERT and UPDATE on its dimension again.")));
	if (missing != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", scd2_relation_display_name(dim_oid)),
				 errdetail("A load needs SELECT, INSERT and UPDATE on the dimension (SELECT for a dry run); missing:%s%s%s.",
						   (missing & ACL_SELECT) ? " SELECT" : "",
						   (missing & ACL_INSERT) ? " INSERT" : "",
						   (missing & ACL_UPDATE) ? " UPDATE" : "")));

	/* and USAGE on the schemas of both tables, or the load could not name them */
	for (int i = 0; i < 2; i++)
	{
		Oid			nsp = get_rel_namespace(rels[i]);

		if (scd2_namespace_aclcheck(nsp, roleid, ACL_USAGE) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for schema %s", quote_identifier(get_namespace_name(nsp))),
					 as_owner ?
					 errdetail("The load runs as role \"%s\", the owner of dimension %s, which has no USAGE on the schema of %s table %s.",
							   GetUserNameFromId(roleid, false), scd2_relation_display_name(dim_oid),
							   i == 0 ? "staging" : "dimension", scd2_relation_display_name(rels[i])) :
					 errdetail("A load needs USAGE on the schema of %s table %s.",
							   i == 0 ? "staging" : "dimension", scd2_relation_display_name(rels[i])),
					 errhint("Grant USAGE on schema %s to %s.", quote_identifier(get_namespace_name(nsp)),
							 quote_identifier(GetUserNameFromId(roleid, false)))));
	}
}

void
scd2_check_relkind(Oid relid, bool dimension)
{
	char		kind = get_rel_relkind(relid);

	if (kind == '\0')
		scd2_report_no_relation(relid);
	if (dimension && kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a table", scd2_relation_display_name(relid)),
				 errhint("A dimension must be a plain or partitioned table.")));
	if (dimension && get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("temporary table %s cannot be an scd2 dimension", scd2_relation_display_name(relid)),
				 errdetail("A temporary table vanishes with its session, and its registration would be left behind."),
				 errhint("Make the dimension a permanent (or unlogged) table.")));
}

/* The owner of a relation. */
Oid
scd2_relation_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}
