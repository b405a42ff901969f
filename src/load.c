/*
 * load.c -- one load of a staging table into a registered dimension.
 *
 * Order of work:
 *   1. check privileges, lock the dimension (SHARE ROW EXCLUSIVE: loads of
 *      one dimension queue up; readers, fact loads and as-of lookups do
 *      not wait), resolve the configuration;
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
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
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

/* State of one load while it runs. */
typedef struct LoadState
{
	const Scd2Config *cfg;
	Snapshot	snap;
	Datum		effective_at;
	double		dim_rows;		/* planner's estimate of the dimension */
} LoadState;

/* Run a statement of the load: $1 = effective_at, the load's snapshot. */
static void
load_exec(LoadState *st, const char *sql, int expected, const char *what)
{
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {st->effective_at};

	scd2_spi_exec_snap(sql, 1, argtypes, values, NULL, st->snap, expected, what);
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

	plan = SPI_prepare_cursor(sql, 1, argtypes, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "scd2: preparing %s failed: %s", what, SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, values, NULL, st->snap, InvalidSnapshot, true, false, 0);
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

static void
check_privileges(Oid stg_oid, Oid dim_oid, bool dry_run)
{
	AclMode		dim_mode = ACL_SELECT | (dry_run ? 0 : (ACL_INSERT | ACL_UPDATE));
	AclMode		missing;

	if (pg_class_aclcheck(stg_oid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for staging table %s", scd2_relation_display_name(stg_oid)),
				 errdetail("A load reads the staging table and needs SELECT on it.")));

	/*
	 * Every privilege is needed: pg_class_aclcheck() with several bits
	 * succeeds when ANY of them is held.
	 */
	missing = dim_mode & ~pg_class_aclmask(dim_oid, GetUserId(), dim_mode, ACLMASK_ALL);
	if (missing != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", scd2_relation_display_name(dim_oid)),
				 errdetail("A load needs SELECT, INSERT and UPDATE on the dimension (SELECT for a dry run); missing:%s%s%s.",
						   (missing & ACL_SELECT) ? " SELECT" : "",
						   (missing & ACL_INSERT) ? " INSERT" : "",
						   (missing & ACL_UPDATE) ? " UPDATE" : "")));
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
	char	   *row;
	char	   *column;

	load_exec_parallel(st, scd2_sql_validate(cfg), "validating the staging table");
	rows = scd2_spi_int8(0, 1);
	null_keys = scd2_spi_int8(0, 2);
	null_eff = scd2_spi_int8(0, 3);
	*several = scd2_spi_int8(0, 4) > 0;
	if (null_keys == 0 && null_eff == 0)
		return rows;

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

	scd2_spi_exec(scd2_sql_create_points(cfg, PTS_TABLE), SPI_OK_UTILITY, "creating the point table");
	load_exec(st, scd2_sql_points(cfg, PTS_TABLE, KEYS_TABLE), SPI_OK_INSERT, "collecting timeline points");

	load_exec(st, scd2_sql_ambiguous(cfg, PTS_TABLE), SPI_OK_SELECT, "checking for ambiguous rows");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Staging table %s has several rows for this key with the same effective time and different values.",
						   cfg->stg_name),
				 errhint("Keep one row per key and effective time, or give the rows different effective times; nothing was loaded.")));

	load_exec(st, scd2_sql_window(cfg, PTS_TABLE, WIN_TABLE), SPI_OK_UTILITY, "ordering timeline points");

	load_exec(st, scd2_sql_conflict(cfg, WIN_TABLE), SPI_OK_SELECT, "checking for conflicts");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("change for key %s at %s conflicts with an existing version", scd2_spi_text(0, 1),
						scd2_spi_text(0, 2)),
				 errdetail("Dimension %s already has a version of this key starting at that instant, with different tracked values.",
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

/* Step 6: copy the change feed into the caller's tuplestore. */
static void
read_feed(LoadState *st, bool dry_run, Tuplestorestate *store, TupleDesc desc)
{
	load_exec(st, scd2_sql_feed(st->cfg, CHG_TABLE, dry_run), SPI_OK_SELECT, "reading the change feed");
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
	int			pin;
	bool		several;		/* some key has several staging rows */
	int64		complex_keys = 0;	/* keys that go the general way */
	int64		fast_counted;
	int64		total_changes;
	int64		distinct = 0;
	int64		kept = 0;
	int64		y_applied = 0;
	int64		complex_rows = 0;

	memset(m, 0, sizeof(*m));
	check_relkind(req->dim_oid, true);
	check_relkind(req->stg_oid, false);
	check_privileges(req->stg_oid, req->dim_oid, req->dry_run);

	/* 1. Serialise loads of this dimension; readers are not blocked. */
	lock_dimension(req->dim_oid);

	pin = scd2_pin_search_path();
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
	st.effective_at = TimestampTzGetDatum(req->effective_at);
	st.dim_rows = estimated_rows(req->dim_oid);
	CommandCounterIncrement();
	st.snap = RegisterSnapshot(GetTransactionSnapshot());

	create_work_tables(cfg);

	/* 3. */
	m->source_rows = validate_staging(&st, &several);

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
	load_exec(&st, scd2_sql_change_counts(CHG_TABLE), SPI_OK_SELECT, "counting changes");
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
	{
		/* always nested loops: they keep the source's close-first order */
		load_exec_probing(&st, -1, scd2_sql_merge(cfg, CHG_TABLE),
						  SPI_OK_MERGE, "writing the dimension");
		if ((int64) SPI_processed != total_changes)
			ereport(ERROR,
					(errcode(ERRCODE_INTERNAL_ERROR),
					 errmsg("load of %s wrote %lld rows but classified %lld",
							cfg->dim_name, (long long) SPI_processed, (long long) total_changes),
					 errdetail("The dimension changed in a way the load did not expect; everything was rolled back."),
					 errhint("Check for triggers or rules on the dimension, then retry the load.")));
	}

	/* 6. */
	if (req->want_feed)
		read_feed(&st, req->dry_run, res->feed, res->feed_desc);

	drop_work_tables();
	UnregisterSnapshot(st.snap);
	scd2_unpin(pin);
}
