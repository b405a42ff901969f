/*
 * load.c -- one load of a staging table into a registered dimension.
 *
 * Order of work:
 *   1. check the caller's privileges, lock the dimension (SHARE ROW
 *      EXCLUSIVE: loads of one dimension queue up; readers, fact loads and
 *      as-of lookups do not wait), become the dimension's owner and check
 *      its privileges, resolve the configuration, create the work tables,
 *      and run the rest in a security-restricted operation (see
 *      owner_context_enter);
 *   2. take one snapshot: every statement of the load sees the same
 *      committed staging and dimension rows (a concurrent insert into the
 *      staging table is either wholly in this load or wholly not);
 *   3. validate the staging rows (NULL keys, NULL effective times);
 *   4. build the change set: the fast path for keys with one in-order row,
 *      the general timeline path for the rest (sqlgen.c);
 *   5. count it, then write it with ONE MERGE whose processed count must
 *      equal the classified writes;
 *   6. read the change feed back if the caller wants it.
 * Any error rolls back everything the load did.
 *
 * The caller is connected to SPI.
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

/*
 * Work tables of a load, in the session's temporary schema, dropped at the
 * end of a successful load (ON COMMIT DROP as well; a failed load's are
 * rolled back with it).  Names a user is unlikely to choose: a user's own
 * temporary table of that name makes the load fail at CREATE, never
 * dropped or read by it.
 */
#define KEYS_TABLE	"pg_temp.\"scd2 work: keys\""
#define CHG_TABLE	"pg_temp.\"scd2 work: changes\""
#define PTS_TABLE	"pg_temp.\"scd2 work: points\""
#define WIN_TABLE	"pg_temp.\"scd2 work: window\""

/* The role a load runs as, and what to restore (see owner_context_enter). */
typedef struct OwnerContext
{
	Oid			owner;
	Oid			save_userid;
	int			save_sec;
	int			nest;
} OwnerContext;

/* State of one load while it runs. */
typedef struct LoadState
{
	const Scd2Config *cfg;
	OwnerContext *oc;
	Snapshot	snap;
	Datum		effective_at;
	double		dim_rows;		/* planner's estimate of the dimension */
} LoadState;

/*
 * An error context without the generated statement's line (the dimension's
 * own code -- a trigger's lines -- stays), and the load's line after it.
 */
static char *
load_context(const char *context, const char *line)
{
	StringInfoData buf;
	const char *p = context;

	initStringInfo(&buf);
	while (p != NULL && *p)
	{
		const char *end = strchr(p, '\n');
		int			len = end ? (int) (end - p) : (int) strlen(p);

		if (strncmp(p, "SQL statement \"", 15) != 0)
			appendStringInfo(&buf, "%.*s\n", len, p);
		p = end ? end + 1 : NULL;
	}
	appendStringInfoString(&buf, line);
	return buf.data;
}

/*
 * Names of the dimension's partial unique indexes (the current-row index:
 * one current version per key), as a List of C strings.
 */
static List *
current_row_indexes(Oid dim_oid)
{
	Relation	rel = table_open(dim_oid, NoLock);
	List	   *indexes = RelationGetIndexList(rel);
	List	   *names = NIL;
	ListCell   *lc;

	table_close(rel, NoLock);
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));

		if (!HeapTupleIsValid(tup))
			continue;
		if (((Form_pg_index) GETSTRUCT(tup))->indisunique &&
			!heap_attisnull(tup, Anum_pg_index_indpred, NULL))
			names = lappend(names, get_rel_name(indexoid));
		ReleaseSysCache(tup);
	}
	return names;
}

static bool
name_listed(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (name != NULL && lfirst(lc) != NULL && strcmp((char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

/*
 * In PG_CATCH of a statement of the load: the error goes on with the load
 * as its context instead of the generated statement (a constraint, trigger,
 * default or staging view of the user's fails in the load of a dimension,
 * not in SQL the user never wrote).  A syntax or internal error -- a bug
 * of scd2 -- keeps the statement.
 */
static void
load_rethrow(const LoadState *st, const char *what, MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INTERNAL_ERROR ||
		edata->sqlerrcode == ERRCODE_SYNTAX_ERROR)
		PG_RE_THROW();
	FlushErrorState();
	edata->context = load_context(edata->context,
								  psprintf("scd2: %s (load of dimension %s from %s)",
										   what, st->cfg->dim_name, st->cfg->stg_name));
	ReThrowError(edata);
}

/* Run a statement of the load: $1 = effective_at, the load's snapshot. */
static void
load_exec(LoadState *st, const char *sql, int expected, const char *what)
{
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {st->effective_at};
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		scd2_spi_exec_snap(sql, 1, argtypes, values, NULL, st->snap, expected, what);
	}
	PG_CATCH();
	{
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
}

/*
 * Run a statement with nested-loop index probes forced when the driving
 * side is small next to the dimension (driving_rows < 0: always).  Measured on PostgreSQL 15: with a
 * 48k-row change set against a 1M-row dimension the planner still picks
 * hash joins that read and hash the whole dimension (about 2x slower than
 * probing the indexes).  The settings last for this statement only.
 */
static void
load_exec_probing(LoadState *st, double driving_rows, const char *sql,
				  int expected, const char *what)
{
	int			nest = NewGUCNestLevel();

	if (driving_rows < 0 || driving_rows * 2 < st->dim_rows)
	{
		scd2_set_local("enable_hashjoin", "off");
		scd2_set_local("enable_mergejoin", "off");
		/* every probe is for a different key: a cache only costs */
		scd2_set_local("enable_memoize", "off");
	}
	load_exec(st, sql, expected, what);
	AtEOXact_GUC(true, nest);
}

/*
 * Run a read-only statement of the load (parallel query allowed, for the
 * validation scan of a large staging table when the planner finds it
 * worth it).
 */
static void
load_exec_parallel(LoadState *st, const char *sql, const char *what)
{
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {st->effective_at};
	SPIPlanPtr	plan;
	int			rc;
	MemoryContext cxt = CurrentMemoryContext;

	plan = SPI_prepare_cursor(sql, 1, argtypes, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "scd2: preparing %s failed: %s", what, SPI_result_code_string(SPI_result));
	PG_TRY();
	{
		rc = SPI_execute_snapshot(plan, values, NULL, st->snap, InvalidSnapshot, true, false, 0);
	}
	PG_CATCH();
	{
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: %s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(plan);
}

/* The planner's idea of how many rows a table has. */
static double
estimated_rows(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Form_pg_class form;
	double		rows;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	form = (Form_pg_class) GETSTRUCT(tup);
	rows = form->reltuples;
	if (rows < 0)				/* never vacuumed or analyzed */
		rows = (double) form->relpages * 100.0;
	ReleaseSysCache(tup);
	return rows;
}

/*
 * The privileges a load needs, held by role: SELECT on the staging table,
 * SELECT, INSERT and UPDATE on the dimension (SELECT for a dry run).  The
 * caller's are checked as the caller (who must not use a load to read or
 * write what it may not), the owner's as the role the load runs as (who
 * must not read a staging table only the caller may read).
 */
static void
check_privileges(Oid stg_oid, Oid dim_oid, bool dry_run, Oid roleid, bool as_owner)
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

static void
check_relkind(Oid relid, bool dimension)
{
	char		kind = get_rel_relkind(relid);

	if (kind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
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
static Oid
relation_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * Running the load as the dimension's owner, the way core runs REFRESH
 * MATERIALIZED VIEW (matview.c): first as the owner with only the role
 * switch locked (SECURITY_LOCAL_USERID_CHANGE) while the load creates its
 * temporary work tables (a security-restricted operation may not be the
 * first to create a temporary table in a session), then, before any
 * statement that runs code the owner controls (triggers, defaults,
 * constraints, index expressions, staging views), as the owner in a
 * security-restricted operation.  A new GUC nest level with a pinned
 * search_path; at the end every setting made inside it, by the load or by
 * the owner's code, is rolled back (AtEOXact_GUC(false, ...)) and the
 * caller's role and security context come back.  An error ends the
 * (sub)transaction, which restores both as well.
 */
static void
owner_context_enter(OwnerContext *oc, Oid owner)
{
	oc->owner = owner;
	GetUserIdAndSecContext(&oc->save_userid, &oc->save_sec);
	SetUserIdAndSecContext(owner, oc->save_sec | SECURITY_LOCAL_USERID_CHANGE);
	oc->nest = NewGUCNestLevel();
	scd2_restrict_search_path();
}

static void
owner_context_restrict(OwnerContext *oc)
{
	SetUserIdAndSecContext(oc->owner, oc->save_sec | SECURITY_RESTRICTED_OPERATION);
}

/*
 * Back to the owner without the restriction, only to create a work table
 * (matview.c does the same for its "diff" table).
 */
static void
owner_context_unrestrict(OwnerContext *oc)
{
	SetUserIdAndSecContext(oc->owner, oc->save_sec | SECURITY_LOCAL_USERID_CHANGE);
}

static void
owner_context_leave(OwnerContext *oc)
{
	AtEOXact_GUC(false, oc->nest);
	SetUserIdAndSecContext(oc->save_userid, oc->save_sec);
}

/*
 * Take the dimension's SHARE ROW EXCLUSIVE lock, waiting as long as
 * lock_timeout allows.  When lock_timeout expires, PostgreSQL's own
 * "canceling statement due to lock timeout" is replaced by an error that
 * says which dimension is busy and why; any other error (statement_timeout,
 * a deadlock, a cancel) goes through unchanged.
 */
static void
lock_dimension(Oid dim_oid)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	char	   *dim_name;

	if (ConditionalLockRelationOid(dim_oid, ShareRowExclusiveLock))
		return;

	dim_name = scd2_relation_display_name(dim_oid);
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
				 errdetail("The load waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						   "which another load (or a statement that locks the table) holds; nothing was loaded.",
						   GetConfigOptionByName("lock_timeout", NULL, false), dim_name),
				 errhint("Retry when the other load has finished, or raise lock_timeout.")));
	}
	PG_END_TRY();
}

/* Drop the temporary work tables (quietly: the general path's may not exist). */
static void
drop_work_tables(void)
{
	int			nest = NewGUCNestLevel();

	scd2_set_local("client_min_messages", "warning");
	scd2_spi_exec("DROP TABLE IF EXISTS " KEYS_TABLE ", " CHG_TABLE ", " PTS_TABLE ", " WIN_TABLE,
				  SPI_OK_UTILITY, "dropping work tables");
	AtEOXact_GUC(true, nest);
}

/* Temporary work tables of a load. */
static void
create_work_tables(const Scd2Config *cfg)
{
	scd2_spi_exec(scd2_sql_create_keys(cfg, KEYS_TABLE), SPI_OK_UTILITY, "creating the key table");
	scd2_spi_exec(scd2_sql_create_changes(cfg, CHG_TABLE), SPI_OK_UTILITY, "creating the change table");
}

/*
 * Step 3: NULL keys and NULL effective times are refused; the same scan
 * tells whether some key has several staging rows (*several).
 */
static int64
validate_staging(LoadState *st, bool *several)
{
	const Scd2Config *cfg = st->cfg;
	int64		rows;
	int64		null_keys;
	int64		null_eff;
	int64		non_finite;
	char	   *row;
	char	   *column;

	load_exec_parallel(st, scd2_sql_validate(cfg), "validating the staging table");
	rows = scd2_spi_int8(0, 1);
	null_keys = scd2_spi_int8(0, 2);
	null_eff = scd2_spi_int8(0, 3);
	*several = scd2_spi_int8(0, 4) > 0;
	non_finite = scd2_spi_int8(0, 5);
	if (null_keys == 0 && null_eff == 0)
	{
		if (non_finite > 0)
		{
			load_exec(st, scd2_sql_nonfinite_row(cfg), SPI_OK_SELECT, "finding a non-finite effective time");
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("effective time of key %s is not finite",
							SPI_processed > 0 ? scd2_spi_text(0, 1) : "?"),
					 errdetail("Column \"%s\" of staging table %s holds %s: a version of dimension %s must start and end at finite instants.",
							   cfg->eff_name, cfg->stg_name,
							   SPI_processed > 0 ? scd2_spi_text(0, 2) : "infinity", cfg->dim_name),
					 errhint("Fix the effective time of the %lld row(s) concerned (an open end is NULL, not infinity); nothing was loaded.",
							 (long long) non_finite)));
		}
		return rows;
	}

	load_exec(st, scd2_sql_bad_row(cfg), SPI_OK_SELECT, "finding a bad staging row");
	row = SPI_processed > 0 ? scd2_spi_text(0, 1) : "?";
	column = SPI_processed > 0 ? scd2_spi_text(0, 2) : NULL;
	if (null_keys > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("staging table %s has a NULL business key", cfg->stg_name),
				 errdetail("Column \"%s\" is NULL in row %s.", column ? column : "?", row),
				 errhint("Remove or fix the %lld row(s) with a NULL business key column; nothing was loaded.",
						 (long long) null_keys)));
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("staging table %s has a NULL effective time", cfg->stg_name),
			 errdetail("Column \"%s\" is NULL in row %s.", cfg->eff_name, row),
			 errhint("Fill in the effective time of the %lld row(s) concerned; nothing was loaded.",
					 (long long) null_eff)));
	return rows;				/* not reached */
}

/*
 * Run a prepared read-only plan of the load in a subtransaction: true when
 * it succeeded (its result in SPI_tuptable); false when it failed with a
 * data exception (class 22: out of range, too long, invalid value) or an
 * integrity violation (class 23: a domain's constraint), whose error goes
 * to *err.  Any other error (a cancel, a timeout) goes on.
 */
static bool
load_try(LoadState *st, SPIPlanPtr plan, Datum *values, ErrorData **err)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int			rc = SPI_execute_snapshot(plan, values, NULL, st->snap, InvalidSnapshot,
											  true, false, 0);

		if (rc != SPI_OK_SELECT)
			elog(ERROR, "scd2: checking staging values failed: %s", SPI_result_code_string(rc));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		{
			edata->context = load_context(edata->context,
										  psprintf("scd2: checking staging values (load of dimension %s from %s)",
												   st->cfg->dim_name, st->cfg->stg_name));
			ReThrowError(edata);
		}
		*err = edata;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

static SPIPlanPtr
load_prepare(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "scd2: preparing a check of staging values failed: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/* A staging value for a message: quoted, and at most 100 characters. */
static char *
shown_value(const char *v)
{
	int			len = pg_mbstrlen(v);

	if (len <= 100)
		return quote_literal_cstr(v);
	return psprintf("%s... (%d characters)",
					quote_literal_cstr(pnstrdup(v, pg_mbcharcliplen(v, strlen(v), 100))), len);
}

/* The error for a staging value the dimension cannot store as it is. */
static void
report_misfit(const Scd2Config *cfg, const Scd2ConvItem *item, const char *key,
			  const char *value, const char *stored, ErrorData *failure)
{
	int			code;

	if (failure)
		code = failure->sqlerrcode;
	else if (item->effective || item->category == TYPCATEGORY_DATETIME)
		code = ERRCODE_DATETIME_VALUE_OUT_OF_RANGE;
	else if (item->category == TYPCATEGORY_STRING || item->category == TYPCATEGORY_BITSTRING)
		code = ERRCODE_STRING_DATA_RIGHT_TRUNCATION;
	else if (item->category == TYPCATEGORY_NUMERIC)
		code = ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
	else
		code = ERRCODE_DATA_EXCEPTION;

	if (item->effective)
		ereport(ERROR,
				(errcode(code),
				 errmsg("effective time of key %s does not convert exactly to %s", key, item->dst_type_name),
				 failure
				 ? errdetail("Column \"%s\" of staging table %s holds %s, which the validity columns of dimension %s cannot hold: %s.",
							 item->name, cfg->stg_name, shown_value(value), cfg->dim_name, failure->message)
				 : errdetail("Column \"%s\" of staging table %s holds %s, which the validity columns of dimension %s would hold as %s.",
							 item->name, cfg->stg_name, shown_value(value), cfg->dim_name, shown_value(stored)),
				 errhint("Effective times are never rounded: give the staging column the type of the validity columns (%s), or values they hold exactly; nothing was loaded.",
						 item->dst_type_name)));
	ereport(ERROR,
			(errcode(code),
			 errmsg("value of column \"%s\" for key %s does not fit dimension %s", item->name, key, cfg->dim_name),
			 failure
			 ? errdetail("Staging value %s (type %s) cannot be stored as %s: %s.",
						 shown_value(value), item->src_type_name, item->dst_type_name, failure->message)
			 : errdetail("Staging value %s (type %s) would be stored as %s (type %s).",
						 shown_value(value), item->src_type_name, shown_value(stored), item->dst_type_name),
			 errhint("Values are never cut or rounded: widen column \"%s\" of the dimension, or correct the staging value; nothing was loaded.",
					 item->name)));
}

/*
 * Find the staging row whose value of one column fails to convert (the
 * whole-column conversion failed): walk the rows, converting each value in
 * a subtransaction of its own.  This runs only when a load is refused.
 */
static void
find_failing_value(LoadState *st, const Scd2ConvItem *item)
{
	const Scd2Config *cfg = st->cfg;
	Oid			argtypes[1] = {TEXTOID};
	SPIPlanPtr	one = load_prepare(scd2_sql_conv_one(item), 1, argtypes);
	SPIPlanPtr	rows = load_prepare(scd2_sql_conv_rows(cfg, item), 0, NULL);
	Portal		portal;

	PushActiveSnapshot(st->snap);
	portal = SPI_cursor_open(NULL, rows, NULL, NULL, true);
	PopActiveSnapshot();
	for (;;)
	{
		uint64		n;
		char	  **keys;
		char	  **vals;

		SPI_cursor_fetch(portal, true, 1000);
		n = SPI_processed;
		if (n == 0)
			break;
		keys = palloc(sizeof(char *) * n);
		vals = palloc(sizeof(char *) * n);
		for (uint64 i = 0; i < n; i++)
		{
			keys[i] = scd2_spi_text(i, 1);
			vals[i] = scd2_spi_text(i, 2);
		}
		for (uint64 i = 0; i < n; i++)
		{
			Datum		values[1] = {CStringGetTextDatum(vals[i])};
			ErrorData  *err = NULL;

			CHECK_FOR_INTERRUPTS();
			if (!load_try(st, one, values, &err))
				report_misfit(cfg, item, keys[i], vals[i], NULL, err);
		}
	}
	SPI_cursor_close(portal);
}

/*
 * Before anything else reads the staging table: every value whose type or
 * typmod differs from the dimension column's must convert, and convert
 * exactly -- what the dimension would store must equal the staging value
 * (cast back to its type).  So varchar(n)/char(n) are never cut, numeric
 * and integer values never rounded, an effective time never moved; a
 * value out of range is an error naming the column and the key, not the
 * bare "integer out of range" of a generated statement.  Staging columns
 * of the dimension's exact types are not scanned.
 */
static void
check_conversions(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	int			n;
	Scd2ConvItem *items = scd2_conv_items(cfg, &n);
	ErrorData  *err = NULL;

	if (items == NULL)
		return;
	if (load_try(st, load_prepare(scd2_sql_conv_check(cfg, items, n), 0, NULL), NULL, &err))
	{
		int64	   *lossy = palloc(sizeof(int64) * n);

		for (int i = 0; i < n; i++)
			lossy[i] = scd2_spi_int8(0, i + 1);
		for (int i = 0; i < n; i++)
			if (lossy[i] > 0)
			{
				load_exec(st, scd2_sql_conv_lossy_row(cfg, &items[i]), SPI_OK_SELECT,
						  "finding a staging value that does not fit");
				if (SPI_processed > 0)
					report_misfit(cfg, &items[i], scd2_spi_text(0, 1), scd2_spi_text(0, 2),
								  scd2_spi_text(0, 3), NULL);
			}
		return;
	}

	/* Some value failed to convert: which column, which row. */
	for (int i = 0; i < n; i++)
	{
		ErrorData  *colerr = NULL;

		if (!load_try(st, load_prepare(scd2_sql_conv_force(cfg, &items[i]), 0, NULL), NULL, &colerr))
			find_failing_value(st, &items[i]);
	}
	ReThrowError(err);			/* not found again: the error as it was */
}

/*
 * With a current valid_to other than NULL (infinity, '9999-12-31'), every
 * effective time must be before it: a version starting there would end
 * after the end of time, and a closed one ending there would read as
 * current.
 */
static void
check_before_current_valid_to(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;

	load_exec(st, scd2_sql_beyond_current(cfg), SPI_OK_SELECT, "checking effective times");
	if (SPI_processed == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("staging table %s has an effective time at or after the current rows' valid_to", cfg->stg_name),
			 errdetail("Dimension %s marks current rows with valid_to %s; the effective time of row %s is not before it.",
					   cfg->dim_name, cfg->current_vt, scd2_spi_text(0, 1)),
			 errhint("Fix the effective times, or register the dimension with a later current_valid_to; nothing was loaded.")));
}

/* Number of rows in a work table. */
static int64
count_rows(LoadState *st, const char *table)
{
	load_exec(st, psprintf("SELECT pg_catalog.count(*) FROM %s", table), SPI_OK_SELECT, "counting");
	return scd2_spi_int8(0, 1);
}

/*
 * Step 4b: the general timeline path for complex keys.  Fills the change
 * table; returns through *distinct, *kept, *ytype1, *complex_rows the
 * counts the metrics need.
 */
static void
classify_complex_keys(LoadState *st, int64 *distinct, int64 *kept,
					  int64 *y_applied, int64 *complex_rows)
{
	const Scd2Config *cfg = st->cfg;

	/* the general path's work tables: created outside the restriction */
	owner_context_unrestrict(st->oc);
	scd2_spi_exec(scd2_sql_create_points(cfg, PTS_TABLE), SPI_OK_UTILITY, "creating the point table");
	scd2_spi_exec(scd2_sql_window(cfg, PTS_TABLE, WIN_TABLE, true), SPI_OK_UTILITY,
				  "creating the window table");
	owner_context_restrict(st->oc);

	load_exec(st, scd2_sql_points(cfg, PTS_TABLE, KEYS_TABLE), SPI_OK_INSERT, "collecting timeline points");

	load_exec(st, scd2_sql_ambiguous(cfg, PTS_TABLE), SPI_OK_SELECT, "checking for ambiguous rows");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Staging table %s has several rows for this key with the same effective time and different values.",
						   cfg->stg_name),
				 errhint("Keep one row per key and effective time, or give the rows different effective times; nothing was loaded.")));

	load_exec(st, scd2_sql_window(cfg, PTS_TABLE, WIN_TABLE, false), SPI_OK_INSERT, "ordering timeline points");

	load_exec(st, scd2_sql_conflict(cfg, WIN_TABLE), SPI_OK_SELECT, "checking for conflicts");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("change for key %s at %s conflicts with an existing version", scd2_spi_text(0, 1),
						scd2_spi_text(0, 2)),
				 cfg->snapshot
				 ? errdetail("Dimension %s already has a version of this key starting at that instant, with different tracked values. "
							 "In snapshot mode a key's latest staging row takes effect no earlier than the start of its current version, "
							 "and a key missing from the extract is deleted no earlier than that start.",
							 cfg->dim_name)
				 : errdetail("Dimension %s already has a version of this key starting at that instant, with different tracked values.",
							 cfg->dim_name),
				 errhint("Existing versions are never rewritten: give the change a different effective time; nothing was loaded.")));

	load_exec(st, scd2_sql_general_changes(cfg, CHG_TABLE, WIN_TABLE), SPI_OK_INSERT,
			  "building changes of complex keys");
	load_exec(st, scd2_sql_general_counts(cfg, WIN_TABLE, KEYS_TABLE), SPI_OK_SELECT,
			  "counting changes of complex keys");
	*distinct = scd2_spi_int8(0, 1);
	*kept = scd2_spi_int8(0, 2);
	*y_applied = scd2_spi_int8(0, 3);
	*complex_rows = scd2_spi_int8(0, 4);
}

/*
 * The enabled BEFORE INSERT/UPDATE row triggers of the dimension, quoted
 * and comma-separated, or NULL: a trigger that returns NULL silently skips
 * the row the load writes.
 */
static char *
skipping_triggers(Oid dim_oid)
{
	Relation	rel = table_open(dim_oid, NoLock);
	TriggerDesc *td = rel->trigdesc;
	StringInfoData names;
	int			ntrig = 0;

	initStringInfo(&names);
	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];

		if (tg->tgenabled == TRIGGER_DISABLED || !TRIGGER_FOR_ROW(tg->tgtype) ||
			!TRIGGER_FOR_BEFORE(tg->tgtype) ||
			!(TRIGGER_FOR_UPDATE(tg->tgtype) || TRIGGER_FOR_INSERT(tg->tgtype)))
			continue;
		appendStringInfo(&names, "%s%s", ntrig++ ? ", " : "", quote_identifier(tg->tgname));
	}
	table_close(rel, NoLock);
	return ntrig > 0 ? names.data : NULL;
}

/* A BEFORE row trigger skipped rows of the load. */
static void
report_skipping_trigger(const Scd2Config *cfg, const char *triggers, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
			 errmsg("a trigger on dimension %s skipped rows the load writes", cfg->dim_name),
			 errdetail("%s A BEFORE UPDATE or INSERT row trigger that returns NULL skips the row it fires for; the dimension has %s. Everything was rolled back.",
					   what, triggers),
			 errhint("Make the trigger return NEW for the load's updates and inserts (or disable it during loads), then retry the load.")));
}

/* Copy the change feed rows SPI holds into the caller's tuplestore. */
static void
store_feed(Tuplestorestate *store, TupleDesc desc)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[5];
		bool		nulls[5];

		for (int c = 0; c < 5; c++)
			values[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(store, desc, values, nulls);
	}
}

/*
 * Step 5: the one MERGE.  With a feed store on PostgreSQL 17+ the MERGE
 * returns the change feed as it writes (scd2_sql_merge_feed), which goes
 * into the store; returns whether it did.  Its errors, like every
 * statement's of the load, do not show the generated statement (load_exec).  A unique violation of the current-row
 * index when a BEFORE row trigger could have skipped the close of the old
 * current version, and a processed count other than the classified one,
 * name the triggers.
 */
static bool
write_dimension(LoadState *st, int64 total_changes, Tuplestorestate *store, TupleDesc desc)
{
	const Scd2Config *cfg = st->cfg;
	bool		feed = SCD2_MERGE_RETURNING && store != NULL;
	char	   *triggers = skipping_triggers(cfg->dim_oid);
	MemoryContext cxt = CurrentMemoryContext;
	List	   *current_indexes = NIL;	/* names of the current-row indexes */
	volatile int64 written = 0;

	/* looked up now: after an error the catalogs are not to be read */
	if (triggers != NULL)
		current_indexes = current_row_indexes(cfg->dim_oid);

	PG_TRY();
	{
		/* always nested loops: they keep the source's close-first order */
		load_exec_probing(st, -1,
						  feed ? scd2_sql_merge_feed(cfg, CHG_TABLE) : scd2_sql_merge(cfg, CHG_TABLE),
						  feed ? SPI_OK_SELECT : SPI_OK_MERGE, "writing the dimension");
		written = (int64) SPI_processed;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *detail;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION || triggers == NULL ||
			!name_listed(current_indexes, edata->constraint_name))
			PG_RE_THROW();		/* with the load's context (load_exec) */
		FlushErrorState();
		detail = pstrdup(edata->detail ? edata->detail : "");
		if (strlen(detail) > 0 && detail[strlen(detail) - 1] == '.')
			detail[strlen(detail) - 1] = '\0';
		report_skipping_trigger(cfg, triggers,
								psprintf("Unique index \"%s\" refused a new current version (%s): the close of the version it replaces was skipped.",
										 edata->constraint_name, detail));
	}
	PG_END_TRY();

	if (written == total_changes)
	{
		if (feed)
			store_feed(store, desc);
		return feed;
	}
	if (triggers != NULL)
		report_skipping_trigger(cfg, triggers,
								psprintf("The load classified %lld row(s) to write but wrote %lld.",
										 (long long) total_changes, (long long) written));
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("load of %s wrote %lld rows but classified %lld",
					cfg->dim_name, (long long) written, (long long) total_changes),
			 errdetail("The dimension changed in a way the load did not expect; everything was rolled back."),
			 errhint("Check for triggers or rules on the dimension (or its partitions), then retry the load.")));
}

/* Step 6: copy the change feed into the caller's tuplestore. */
static void
read_feed(LoadState *st, bool dry_run, Tuplestorestate *store, TupleDesc desc)
{
	load_exec(st, scd2_sql_feed(st->cfg, CHG_TABLE, dry_run), SPI_OK_SELECT, "reading the change feed");
	store_feed(store, desc);
}

/*
 * The arguments shared by scd2.merge and scd2.apply: staging, dimension,
 * effective_at (none may be NULL).
 */
void
scd2_request_from_args(FunctionCallInfo fcinfo, Scd2LoadRequest *req)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("staging table and dimension must not be NULL")));
	if (PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("effective_at must not be NULL"),
				 errhint("Leave it out to load at now(), or pass the instant the changes take effect.")));
	memset(req, 0, sizeof(*req));
	req->stg_oid = PG_GETARG_OID(0);
	req->dim_oid = PG_GETARG_OID(1);
	req->effective_at = PG_GETARG_TIMESTAMPTZ(2);
}

void
scd2_run_load(const Scd2LoadRequest *req, Scd2LoadResult *res)
{
	LoadState	st;
	Scd2Config *cfg;
	Scd2Metrics *m = &res->metrics;
	OwnerContext oc;
	bool		several;		/* some key has several staging rows */
	int64		complex_keys = 0;	/* keys that go the general way */
	int64		fast_counted;
	int64		total_changes;
	bool		fed = false;	/* the MERGE returned the feed (17+) */
	int64		distinct = 0;
	int64		kept = 0;
	int64		y_applied = 0;
	int64		complex_rows = 0;

	memset(m, 0, sizeof(*m));
	if (TIMESTAMP_NOT_FINITE(req->effective_at))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("effective_at must be a finite instant"),
				 errdetail("effective_at is %s; it is the effective time of every staging row without an effective column, and of every snapshot deletion, and a version must start and end at finite instants.",
						   timestamptz_to_str(req->effective_at)),
				 errhint("Pass the instant the changes take effect, or leave effective_at out to load at now(); nothing was loaded.")));
	check_relkind(req->dim_oid, true);
	check_relkind(req->stg_oid, false);
	/* the caller may do what the load does */
	check_privileges(req->stg_oid, req->dim_oid, req->dry_run, GetUserId(), false);

	/* 1. Serialise loads of this dimension; readers are not blocked. */
	lock_dimension(req->dim_oid);

	/* From here on the load runs as the dimension's owner (see above). */
	owner_context_enter(&oc, relation_owner(req->dim_oid));
	check_privileges(req->stg_oid, req->dim_oid, req->dry_run, oc.owner, true);

	/*
	 * The load's statements cost much in the planner's units (nested loops
	 * over every staging row) but evaluate simple expressions: JIT
	 * compilation took 0.4-0.9 s of a 1.3 s load at 1M keys / 200k rows on
	 * PostgreSQL 15, and saved nothing.
	 */
	scd2_set_local("jit", "off");
	cfg = scd2_load_config(req->dim_oid, req->stg_oid);
	res->dim_name = cfg->dim_name;
	res->stg_name = cfg->stg_name;

	/* 2. One snapshot for every read, taken after the lock. */
	memset(&st, 0, sizeof(st));
	st.cfg = cfg;
	st.oc = &oc;
	st.effective_at = TimestampTzGetDatum(req->effective_at);
	st.dim_rows = estimated_rows(req->dim_oid);
	CommandCounterIncrement();
	st.snap = RegisterSnapshot(GetTransactionSnapshot());

	create_work_tables(cfg);
	owner_context_restrict(&oc);

	/* 3. */
	check_conversions(&st);
	m->source_rows = validate_staging(&st, &several);
	if (cfg->infinity)
		check_before_current_valid_to(&st);

	if (cfg->snapshot && m->source_rows == 0 && !scd2_allow_empty_snapshot)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("snapshot load of dimension %s from an empty staging table refused", cfg->dim_name),
				 errdetail("Staging table %s has no rows; in snapshot mode that means every key was deleted, and the load would close every current version.",
						   cfg->stg_name),
				 errhint("An empty extract is usually an upstream failure. If it really is empty, allow this load with SET LOCAL scd2.allow_empty_snapshot = on; nothing was loaded.")));

	/* 4. Classify. */
	if (several)
	{
		load_exec(&st, scd2_sql_multi_keys(cfg, KEYS_TABLE), SPI_OK_INSERT, "finding keys with several rows");
		complex_keys = (int64) SPI_processed;
	}
	load_exec_probing(&st, (double) m->source_rows,
					  scd2_sql_fast_path(cfg, CHG_TABLE, KEYS_TABLE, several),
					  SPI_OK_INSERT, "classifying staging rows");
	load_exec(&st, scd2_sql_move_complex(cfg, CHG_TABLE, KEYS_TABLE), SPI_OK_INSERT,
			  "moving late rows to the general path");
	complex_keys += (int64) SPI_processed;
	if (cfg->snapshot)
		load_exec(&st, scd2_sql_snapshot_missing(cfg, CHG_TABLE, KEYS_TABLE), SPI_OK_INSERT,
				  "closing keys missing from the snapshot");
	if (complex_keys > 0 || (cfg->snapshot && count_rows(&st, KEYS_TABLE) > 0))
		classify_complex_keys(&st, &distinct, &kept, &y_applied, &complex_rows);

	/* 5. Count, write, verify. */
	load_exec(&st, scd2_sql_change_counts(cfg, CHG_TABLE), SPI_OK_SELECT, "counting changes");
	m->inserted = scd2_spi_int8(0, 1);
	m->new_versions = scd2_spi_int8(0, 2);
	m->closed = scd2_spi_int8(0, 3);
	m->deleted = scd2_spi_int8(0, 4);
	m->shortened = scd2_spi_int8(0, 5);
	m->type1_updated = scd2_spi_int8(0, 6);
	fast_counted = scd2_spi_int8(0, 7);
	total_changes = scd2_spi_int8(0, 8);
	m->duplicates = complex_rows - distinct;
	m->unchanged = (m->source_rows - complex_rows - fast_counted) + (distinct - kept - y_applied);

	/* the change log (changelog.c): before-images of what the MERGE changes */
	if (!req->dry_run)
		(void) scd2_changelog_write(cfg, CHG_TABLE, st.snap);
	if (!req->dry_run && total_changes > 0)
		fed = write_dimension(&st, total_changes, req->want_feed ? res->feed : NULL,
							  res->feed_desc);

	/* 6. */
	if (req->want_feed && !fed)
		read_feed(&st, req->dry_run, res->feed, res->feed_desc);

	drop_work_tables();
	UnregisterSnapshot(st.snap);
	owner_context_leave(&oc);
}
