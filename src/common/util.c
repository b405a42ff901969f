/*
 * util.c -- small helpers shared by the load, registry and audit code:
 * pinning the search_path around dynamic SQL, statement-scoped settings,
 * the extension owner, and readers of SPI results (statements themselves
 * run through exec.c).
 */
#include "scd2.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "storage/lmgr.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"

#include "common/common.h"

/*
 * Run the generated SQL with search_path = pg_catalog, pg_temp, as core's
 * matview.c does: every object we name is schema-qualified, and nothing a
 * caller puts first on their search_path can capture a function or an
 * operator in our statements.  Returns the GUC nest level to pass to
 * scd2_unpin().
 */
int
scd2_pin_search_path(void)
{
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	return nestlevel;
}

/* Undo scd2_pin_search_path() and any scd2_set_local() made since. */
void
scd2_unpin(int nestlevel)
{
	AtEOXact_GUC(true, nestlevel);
}

/* A setting saved in the current GUC nest level (undone by scd2_unpin). */
void
scd2_set_local(const char *name, const char *value)
{
	(void) set_config_option(name, value, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

/* The role that owns the scd2 extension (and so its tables). */
Oid
scd2_extension_owner(void)
{
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	Oid			owner = InvalidOid;

	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_extname, BTEqualStrategyNumber,
				F_NAMEEQ, CStringGetDatum("scd2"));
	scan = systable_beginscan(rel, ExtensionNameIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		owner = ((Form_pg_extension) GETSTRUCT(tup))->extowner;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);

	if (!OidIsValid(owner))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"scd2\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION scd2.")));
	return owner;
}

/*
 * Whether the installed extension has scd2.table (and, column not NULL,
 * that column of it).  The library can be newer than the extension's
 * objects until ALTER EXTENSION scd2 UPDATE, and loads go on meanwhile:
 * what a later version added is looked for before it is used.
 */
bool
scd2_installed(const char *table, const char *column)
{
	Oid			nsp = get_namespace_oid("scd2", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;

	if (!OidIsValid(relid))
		return false;
	return column == NULL || get_attnum(relid, column) != InvalidAttrNumber;
}

/*
 * Whether the installed extension has the function (or aggregate)
 * scd2.name(argtype), as scd2_installed asks of a table.
 */
bool
scd2_installed_function(const char *name, Oid argtype)
{
	Oid			nsp = get_namespace_oid("scd2", true);

	return OidIsValid(nsp) &&
		SearchSysCacheExists3(PROCNAMEARGSNSP, CStringGetDatum(name),
							  PointerGetDatum(buildoidvector(&argtype, 1)), ObjectIdGetDatum(nsp));
}

/* A bigint column of the last SPI result (NULL reads as 0). */
int64
scd2_spi_int8(int row, int col)
{
	bool		isnull;
	Datum		d;

	d = SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col,
					  &isnull);
	return isnull ? 0 : DatumGetInt64(d);
}

/* A column of the last SPI result as text, or NULL. */
char *
scd2_spi_text(int row, int col)
{
	return SPI_getvalue(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col);
}

/* "schema"."table", quoted as needed. */
static char *
qualified_name(Oid relid)
{
	char	   *rel = get_rel_name(relid);
	char	   *nsp;

	if (rel == NULL)
		scd2_report_no_relation(relid);
	nsp = get_namespace_name(get_rel_namespace(relid));
	return quote_qualified_identifier(nsp, rel);
}

/*
 * The name in messages and the audit log: always schema-qualified, so a
 * row of the log names one table whatever the reader's search_path.
 */
char *
scd2_relation_display_name(Oid relid)
{
	return qualified_name(relid);
}

/*
 * An existing relation the current user owns (or is a member of the
 * owner's role of); else an error naming it, with detail saying what only
 * its owner may do.  The owner-only maintenance of a dimension (pruning its
 * change log or arrival memory, reading the memory's size) calls this.
 */
void
scd2_require_relation_owner(Oid relid, const char *detail, const char *hint)
{
	if (get_rel_relkind(relid) == '\0')
		scd2_report_no_relation(relid);
	if (!scd2_relation_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", scd2_relation_display_name(relid)),
				 detail ? errdetail("%s", detail) : 0,
				 hint ? errhint("%s", hint) : 0));
}

/* OPERATOR(schema.=) for an operator OID. */
char *
scd2_operator_sql(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *out;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	out = psprintf("OPERATOR(%s.%s)",
				   quote_identifier(get_namespace_name(op->oprnamespace)),
				   NameStr(op->oprname));
	ReleaseSysCache(tup);
	return out;
}

/* " COLLATE schema.name" of a collatable column, else "". */
char *
scd2_collate_sql(Oid collid)
{
	HeapTuple	tup;
	Form_pg_collation coll;
	char	   *out;

	if (!OidIsValid(collid))
		return "";
	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collid);
	coll = (Form_pg_collation) GETSTRUCT(tup);
	out = psprintf(" COLLATE %s",
				   quote_qualified_identifier(get_namespace_name(coll->collnamespace),
											  NameStr(coll->collname)));
	ReleaseSysCache(tup);
	return out;
}

/*
 * Take the dimension's SHARE ROW EXCLUSIVE lock, waiting as long as
 * lock_timeout allows.  When lock_timeout expires, PostgreSQL's own
 * "canceling statement due to lock timeout" is replaced by an error that
 * says which dimension is busy and why; any other error (statement_timeout,
 * a deadlock, a cancel) goes through unchanged.  Shared by the load and
 * scd2.revert: detail_fmt is the errdetail, with the lock_timeout and the
 * dimension's name as its two %s; dim_name NULL is looked up when needed.
 */
void
scd2_lock_dimension(Oid dim_oid, const char *dim_name_in, const char *detail_fmt)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	const char *volatile dim_name;

	if (ConditionalLockRelationOid(dim_oid, ShareRowExclusiveLock))
		return;

	dim_name = dim_name_in != NULL ? dim_name_in : scd2_relation_display_name(dim_oid);
	PG_TRY();
	{
		LockRelationOid(dim_oid, ShareRowExclusiveLock);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_LOCK_NOT_AVAILABLE)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
				 errmsg("dimension %s is being loaded by another session", dim_name),
				 errdetail(detail_fmt, GetConfigOptionByName("lock_timeout", NULL, false), dim_name),
				 errhint("Retry when the other load has finished, or raise lock_timeout.")));
	}
	PG_END_TRY();
}

/* An argument a SQL-callable function needs: "<what> must not be NULL". */
void
scd2_require_not_null(bool isnull, const char *what)
{
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", what)));
}

/* A relation named by an OID that no longer exists. */
void
scd2_report_no_relation(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_TABLE),
			 errmsg("relation with OID %u does not exist", relid)));
}
