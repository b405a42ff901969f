/*
 * guard.c -- what every entry point refuses before it reads or writes a
 * dimension (docs/SECURITY.md):
 *   - row-level security it cannot honour: scd2 reads and writes as the
 *     dimension's owner, who is exempt from the table's policies, so a
 *     caller subject to them (RLS enabled, not the owner, no BYPASSRLS) is
 *     refused -- and so is every caller when the owner is subject itself
 *     (FORCE ROW LEVEL SECURITY), as scd2 would then see only part of the
 *     table;
 *   - a dimension whose registered shape changed (a validity column turned
 *     into a domain, the key retyped): the statements scd2 builds for it
 *     would run code nobody checked.
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/varlena.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "catalog/registry.h"
#include "common/common.h"

PG_FUNCTION_INFO_V1(scd2_check_dimension_read);
PG_FUNCTION_INFO_V1(scd2_may_read_dimension);
PG_FUNCTION_INFO_V1(scd2_may_read_dimension_oid);

/* RLS enabled on relid and role not exempt (owner without FORCE, BYPASSRLS). */
static bool
subject_to_row_security(Oid relid, Oid role)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		enabled;
	bool		forced;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	enabled = ((Form_pg_class) GETSTRUCT(tup))->relrowsecurity;
	forced = ((Form_pg_class) GETSTRUCT(tup))->relforcerowsecurity;
	ReleaseSysCache(tup);
	if (!enabled || has_bypassrls_privilege(role))
		return false;
	return forced || !scd2_relation_ownercheck(relid, role);
}

/*
 * Refuse entry (e.g. "scd2.revert", "A load": it starts the errdetail) on relid (relword: "dimension",
 * "staging table") when the caller is subject to its row-level security,
 * or owner (the role scd2 reads and writes it as) is.
 */
void
scd2_refuse_row_security(Oid relid, Oid owner, const char *relword, const char *entry)
{
	Oid			caller = GetUserId();
	char	   *name = scd2_relation_display_name(relid);

	if (subject_to_row_security(relid, caller))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security of %s %s applies to role \"%s\"",
						relword, name, GetUserNameFromId(caller, false)),
				 errdetail("%s works on the table as its owner, who is exempt from its policies, and cannot apply those of role \"%s\"; nothing was done.",
						   entry, GetUserNameFromId(caller, false)),
				 errhint("Run it as the table's owner or as a role with BYPASSRLS, or disable row-level security on %s.",
						 name)));
	if (OidIsValid(owner) && subject_to_row_security(relid, owner))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("row-level security of %s %s applies to its owner", relword, name),
				 errdetail("The table has FORCE ROW LEVEL SECURITY; %s runs as role \"%s\", which would see and change only the rows its policies allow; nothing was done.",
						   entry, GetUserNameFromId(owner, false)),
				 errhint("ALTER TABLE %s NO FORCE ROW LEVEL SECURITY, or grant its owner BYPASSRLS.", name)));
}

/*
 * The registered shape (dimensions.c: scd2_check_registered_shape) must still
 * be the dimension's.  A dimension that is not registered (any more)
 * passes when missing_ok.  The caller is connected to SPI.
 */
void
scd2_require_registered_shape(Oid dim_oid, const char *dim_name, bool missing_ok)
{
	Datum		shape[3];

	if (!scd2_registry_read_shape(dim_oid, shape))
	{
		if (missing_ok)
			return;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not a registered scd2 dimension", dim_name),
				 errhint("Register it first with scd2.register().")));
	}
	if (shape[0] == (Datum) 0)
		return;					/* registered before 0.3 kept shapes */
	scd2_check_registered_shape(dim_oid, dim_name, shape[0], shape[1], shape[2]);
}

/*
 * scd2._check_dimension_read(dimension): the guard of a read that runs as
 * its caller (scd2.dimension_at, the caller's own SELECT: its row-level
 * security applies as to any query of the caller): the registered shape
 * holds, so the statement casts and compares only built-in types.
 */
Datum
scd2_check_dimension_read(PG_FUNCTION_ARGS)
{
	Oid			dim_oid = PG_GETARG_OID(0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	scd2_require_registered_shape(dim_oid, scd2_relation_display_name(dim_oid), false);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * scd2._may_read_dimension(regclass) (0.5): whether the caller may SELECT
 * the dimension an audit row keeps by OID, for the audit log's row-level
 * security.  A table that no longer exists is false (the row's
 * dimension_dropped_at says so too, once the sql_drop trigger ran).
 */
Datum
scd2_may_read_dimension_oid(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	bool		missing = false;
	AclResult	acl = pg_class_aclcheck_ext(relid, GetUserId(), ACL_SELECT, &missing);

	PG_RETURN_BOOL(!missing && acl == ACLCHECK_OK);
}

/*
 * scd2._may_read_dimension(text), the policy of the audit log before 0.5
 * (kept for the older scripts' objects): whether the caller may SELECT the table
 * an audit row names (its schema-qualified, quoted name), for the audit
 * log's row-level security.  Looked up without the schema's USAGE check
 * (a role without USAGE must get false, not an error), so a table that no
 * longer exists, or a name that is not a qualified one, is false.
 */
Datum
scd2_may_read_dimension(PG_FUNCTION_ARGS)
{
	char	   *raw = text_to_cstring(PG_GETARG_TEXT_PP(0));
	List	   *names = NIL;
	Oid			nsp;
	Oid			relid;

	if (!SplitIdentifierString(raw, '.', &names) || list_length(names) != 2)
		PG_RETURN_BOOL(false);
	nsp = get_namespace_oid(linitial(names), true);
	relid = OidIsValid(nsp) ? get_relname_relid(lsecond(names), nsp) : InvalidOid;
	PG_RETURN_BOOL(OidIsValid(relid) &&
				   pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK);
}
