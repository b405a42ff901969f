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
 *      the general timeline path for the rest (load_classify.c,
 *      load_timeline.c);
 *   5. count it (and refuse a load that would close more current keys
 *      than the registered max_close_fraction allows), then write it with ONE MERGE whose processed count must
 *      equal the classified writes (on Citus: closes + inserts, and the
 *      reads go to local images; load_citus.c);
 *   6. read the change feed back if the caller wants it.
 * A first load into an empty dimension does 4-6 its own way, with one
 * INSERT and the indexes built afterwards (load_first.c).
 * Any error rolls back everything the load did.
 *
 * The caller is connected to SPI.
 */
#include "scd2.h"

#include <math.h>

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

#include "citus.h"
#include "load.h"
#include "sqlbuild.h"

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
	scd2_rethrow_without_sql(cxt, psprintf("scd2: %s (load of dimension %s from %s)",
										   what, st->cfg->dim_name, st->cfg->stg_name));
}

/* Run a statement of the load: $1 = effective_at, the load's snapshot. */
void
scd2_load_exec(LoadState *st, const char *sql, int expected, const char *what)
{
	scd2_load_exec_args(st, sql, 0, NULL, NULL, expected, what);
}

/* The same with more parameters, $2 on (none NULL). */
void
scd2_load_exec_args(LoadState *st, const char *sql, int nargs, const Oid *types,
					const Datum *args, int expected, const char *what)
{
	Oid		   *argtypes = palloc(sizeof(Oid) * (nargs + 1));
	Datum	   *values = palloc(sizeof(Datum) * (nargs + 1));
	MemoryContext cxt = CurrentMemoryContext;
	int			nest = NewGUCNestLevel();

	argtypes[0] = TIMESTAMPTZOID;
	values[0] = st->effective_at;
	for (int i = 0; i < nargs; i++)
	{
		argtypes[i + 1] = types[i];
		values[i + 1] = args[i];
	}
	PG_TRY();
	{
		/* its sorts and hashes share hash_mem (load_memory.c) */
		scd2_explain_if_asked(sql, what, nargs + 1, argtypes, values, st->snap);
		scd2_memory_budget_arm(sql);
		(void) scd2_exec_user(sql, nargs + 1, argtypes, values, NULL, st->snap, false,
							  expected, what);
		scd2_memory_budget_disarm();
	}
	PG_CATCH();
	{
		scd2_memory_budget_disarm();
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nest);
}

/*
 * Run a statement with nested-loop index probes forced when the driving
 * side is small next to the dimension (driving_rows < 0: always).  Measured on PostgreSQL 15: with a
 * 48k-row change set against a 1M-row dimension the planner still picks
 * hash joins that read and hash the whole dimension (about 2x slower than
 * probing the indexes).  The settings last for this statement only.
 */
void
scd2_load_exec_probing(LoadState *st, double driving_rows, const char *sql,
				  int expected, const char *what)
{
	int			nest = NewGUCNestLevel();

	if (driving_rows < 0 || driving_rows * 2 < st->dim_rows)
	{
		scd2_set_local("enable_hashjoin", "off");
		scd2_set_local("enable_mergejoin", "off");
		/* every probe is for a different key: a cache only costs */
		scd2_set_local("enable_memoize", "off");

		/*
		 * Probe the dimension's indexes, never scan it per row: a
		 * dimension that was empty (or tiny) when last analyzed is costed
		 * as a few pages, and the MERGE into it then scanned the whole,
		 * growing heap once per source row (100k rows into an empty
		 * dimension: 158 s on PostgreSQL 15).  The work tables have no
		 * index and are still scanned.
		 */
		scd2_set_local("enable_seqscan", "off");

		/*
		 * Nor scan a materialised copy of it per row: without statistics
		 * the planner takes "valid_to IS NULL" for 0.5% of the dimension,
		 * so a Materialize of the current rows filtered against every
		 * staging row looked cheaper than the probes (20k keys, 1,500
		 * staging rows: 30M comparisons, 2.4 s instead of 60 ms).  The
		 * probe of a unique index is costed at one row whatever the
		 * statistics say.
		 */
		scd2_set_local("enable_material", "off");
	}
	scd2_load_exec(st, sql, expected, what);
	AtEOXact_GUC(true, nest);
}

/*
 * Run a read-only statement of the load (parallel query allowed, for the
 * validation scan of a large staging table when the planner finds it
 * worth it).
 */
void
scd2_load_exec_parallel(LoadState *st, const char *sql, const char *what)
{
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {st->effective_at};
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		scd2_exec_user_parallel(sql, 1, argtypes, values, st->snap, what);
	}
	PG_CATCH();
	{
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
}

/*
 * The change log of the load: its rows computed as the owner, like every
 * statement of the load (changelog.c explains why), then copied into
 * scd2.change_log by the extension owner.  probing: the rows are read by
 * (key, valid_from) probes of the dimension (the change table is not
 * analyzed, and the planner would hash the whole dimension: 0.6 s at 1M
 * keys / 20k updates, against 0.1 s for the probes).
 */
void
scd2_load_record_change_log(LoadState *st, const char *sql, bool probing)
{
	if (st->log_prepared)
	{
		int			nest = NewGUCNestLevel();

		scd2_pin_text_forms();
		if (probing)
			scd2_load_exec_probing(st, -1, sql, SPI_OK_INSERT, "recording the change log");
		else
			scd2_load_exec(st, sql, SPI_OK_INSERT, "recording the change log");
		AtEOXact_GUC(true, nest);
	}
	(void) scd2_changelog_write(st->cfg, st->log_prepared);
}

/*
 * How many rows the dimension has now, as the planner reckons it: the
 * density of its last VACUUM, ANALYZE or CREATE INDEX (100 rows a page
 * when there was none, or the table was empty then) times its size now.
 * reltuples alone is stale after loads that grew the table (a dimension
 * analyzed at 1k rows that has 200k).  A partitioned dimension has no
 * storage of its own: its reltuples (0 until it is analyzed).
 */
static double
estimated_rows(Oid relid)
{
	Relation	rel = table_open(relid, AccessShareLock);
	double		density = 100.0;
	double		rows;

	if (rel->rd_rel->reltuples >= 0 && rel->rd_rel->relpages > 0)
		density = (double) rel->rd_rel->reltuples / (double) rel->rd_rel->relpages;
	if (rel->rd_rel->relkind == RELKIND_RELATION)
		rows = density * (double) RelationGetNumberOfBlocks(rel);
	else						/* partitioned: no storage of its own */
		rows = Max(rel->rd_rel->reltuples, 0.0);
	table_close(rel, AccessShareLock);
	return rows;
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

/* effective_at starts and ends versions: it must be a finite instant. */
static void
require_finite(TimestampTz effective_at)
{
	if (TIMESTAMP_NOT_FINITE(effective_at))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("effective_at must be a finite instant"),
				 errdetail("effective_at is %s; it is the effective time of every staging row without an effective column, and of every snapshot deletion, and a version must start and end at finite instants.",
						   timestamptz_to_str(effective_at)),
				 errhint("Pass the instant the changes take effect, or leave effective_at out to load at now(); nothing was loaded.")));
}

/* A snapshot load from an empty staging table would close every key. */
static void
refuse_empty_snapshot(const Scd2Config *cfg)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("snapshot load of dimension %s from an empty staging table refused", cfg->dim_name),
			 errdetail("Staging table %s has no rows; in snapshot mode that means every key was deleted, and the load would close every current version.",
					   cfg->stg_name),
			 errhint("An empty extract is usually an upstream failure. If it really is empty, allow this load with SET LOCAL scd2.allow_empty_snapshot = on; nothing was loaded.")));
}

/*
 * The partial-extract guard (register's max_close_fraction): a load that
 * would end more current keys without a new version (its deleted count:
 * snapshot absences, delete markers) than the registered fraction of the
 * dimension's current keys is refused before it writes anything, unless
 * scd2.allow_large_close is on.  The current keys are counted only when
 * the load would close some.
 */
static void
refuse_large_close(LoadState *st, const Scd2Metrics *m)
{
	const Scd2Config *cfg = st->cfg;
	const char *dim = st->dim_table_sql ? st->dim_table_sql : cfg->dim_sql;
	int64		current;

	if (cfg->max_close_fraction < 0 || m->deleted == 0 || scd2_allow_large_close)
		return;
	scd2_load_exec(st, psprintf("SELECT pg_catalog.count(*) FROM %s d WHERE %s", dim,
								scd2_current_pred(cfg, "d")),
				   SPI_OK_SELECT, "counting the current keys");
	current = scd2_spi_int8(0, 1);
	if ((double) m->deleted <= cfg->max_close_fraction * (double) current)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("load of dimension %s would close %lld of %lld current keys, limit %g",
					cfg->dim_name, (long long) m->deleted, (long long) current, cfg->max_close_fraction),
			 errdetail("Staging table %s would end %.1f%% of the current keys without a new version (keys absent from a snapshot extract, delete markers); the registered max_close_fraction %g allows %lld. Nothing was loaded.",
					   cfg->stg_name, 100.0 * (double) m->deleted / (double) current,
					   cfg->max_close_fraction,
					   (long long) floor(cfg->max_close_fraction * (double) current)),
			 errhint("A partial extract is usually an upstream failure. If the closes are real, allow this load with SET LOCAL scd2.allow_large_close = on.")));
}

/*
 * An extract of scd2.apply_snapshots instead of the staging table (the
 * staging table's columns, privileges and checks still apply): in snapshot
 * mode when it is whole, else as changes with delete markers; messages
 * name the extract.  Its rows are read from its work table
 * (use_extract_rows), once the Citus images, which are filled from the
 * staging table, exist.
 */
static void
use_extract(Scd2Config *cfg, const Scd2Extract *ext)
{
	cfg->stg_name = psprintf("%s (%s)", cfg->stg_name, ext->label);
	cfg->snapshot = ext->full;
	cfg->del_col = pstrdup(ext->gone_col);
}

static void
use_extract_rows(Scd2Config *cfg, const Scd2Extract *ext)
{
	cfg->stg_sql = pstrdup(ext->rows_sql);
}

void
scd2_run_load(const Scd2LoadRequest *req, Scd2LoadResult *res)
{
	LoadState	st;
	Scd2Config *cfg;
	Scd2Metrics *m = &res->metrics;
	OwnerContext oc;
	bool		several;		/* some key has several staging rows */
	Scd2ClassifyCounts cc;
	int64		total_changes;
	bool		fed = false;	/* the MERGE returned the feed (17+) */
	bool		citus;			/* a Citus table takes part (load_citus.c) */

	memset(m, 0, sizeof(*m));
	require_finite(req->effective_at);
	scd2_check_relkind(req->dim_oid, true);
	scd2_check_relkind(req->stg_oid, false);
	/* the caller may do what the load does */
	scd2_check_privileges(req->stg_oid, req->dim_oid, req->dry_run, GetUserId(), false);

	/* 1. Serialise loads of this dimension; readers are not blocked. */
	scd2_lock_dimension(req->dim_oid, NULL,
						"The load waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						"which another load (or a statement that locks the table) holds; nothing was loaded.");

	/* no row-level security the load would bypass (guard.c), under the lock */
	scd2_refuse_row_security(req->dim_oid, scd2_relation_owner(req->dim_oid), "dimension", "A load");
	scd2_refuse_row_security(req->stg_oid, scd2_relation_owner(req->dim_oid), "staging table", "A load");

	/* From here on the load runs as the dimension's owner (see above). */
	scd2_owner_enter(&oc, scd2_relation_owner(req->dim_oid));
	scd2_check_privileges(req->stg_oid, req->dim_oid, req->dry_run, oc.owner, true);

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
	if (req->extract)
		use_extract(cfg, req->extract);

	/* 2. One snapshot for every read, taken after the lock. */
	memset(&st, 0, sizeof(st));
	st.cfg = cfg;
	st.oc = &oc;
	st.effective_at = TimestampTzGetDatum(req->effective_at);
	st.dim_rows = estimated_rows(req->dim_oid);
	CommandCounterIncrement();
	st.snap = RegisterSnapshot(GetTransactionSnapshot());
	/* REPEATABLE READ, SERIALIZABLE: that snapshot must see the dimension as it is */
	scd2_refuse_stale_snapshot(req->dim_oid, cfg->dim_name, st.snap, "nothing was loaded");

	scd2_create_work_tables(cfg);
	st.log_prepared = scd2_changelog_prepare(req->dry_run);
	/* Citus: the write step, and local images of what the load reads */
	citus = scd2_citus_prepare(&st, cfg);
	scd2_owner_restrict(&oc);
	if (citus)
		scd2_citus_fill_images(&st);
	if (req->extract)
		use_extract_rows(cfg, req->extract);

	/* 3. */
	scd2_progress_begin(cfg, req->dim_oid, req->stg_oid);
	scd2_progress_phase(SCD2_PROGRESS_VALIDATING, 0, -1, -1, -1);
	scd2_check_conversions(&st);
	m->source_rows = scd2_validate_staging(&st, &several);
	st.source_rows = m->source_rows;
	if (cfg->infinity)
		scd2_check_before_current_valid_to(&st);

	if ((req->extract ? req->extract->rows == 0 : cfg->snapshot && m->source_rows == 0) &&
		!scd2_allow_empty_snapshot)
		refuse_empty_snapshot(cfg);

	/*
	 * 4-6 of a first load into an empty dimension (load_first.c): every
	 * row is a new key, written by one INSERT without a change table.
	 */
	if (!cfg->order_free && scd2_first_load_applies(&st, req->dry_run, several))
	{
		scd2_progress_phase(SCD2_PROGRESS_FIRST_LOAD, 0, m->source_rows, 0, m->source_rows);
		scd2_first_load(&st, m, req->want_feed ? res->feed : NULL, res->feed_desc);
		fed = true;
	}
	else
	{
		/* 4. Classify: the fast path, then the general path for complex keys. */
		scd2_progress_phase(SCD2_PROGRESS_CLASSIFYING, 0, m->source_rows, -1, -1);
		if (cfg->order_free)
			scd2_arrival_classify(&st, &cc);	/* load_arrival.c */
		else
			scd2_classify(&st, several, &cc);

		/* 5. Count, write, verify. */
		total_changes = scd2_count_changes(&st, &cc, m);
		if (!req->dry_run)
			refuse_large_close(&st, m);
		scd2_progress_phase(SCD2_PROGRESS_CHANGE_LOG, m->source_rows, m->source_rows, 0, total_changes);

		/*
		 * the change log (changelog.c): before-images of what the MERGE
		 * changes; on Citus after the closes and inserts, with the
		 * surrogate keys they gave (load_citus.c)
		 */
		if (st.citus != SCD2_CITUS_NONE)
		{
			scd2_progress_phase(SCD2_PROGRESS_WRITING, m->source_rows, m->source_rows, 0, total_changes);
			if (!req->dry_run && total_changes > 0)
				fed = scd2_citus_write(&st, total_changes, req->want_feed);
			if (!req->dry_run)
				scd2_load_record_change_log(&st, scd2_changelog_sql(cfg, CHG_TABLE, DIM_IMAGE), true);
		}
		else
		{
			if (!req->dry_run)
				scd2_load_record_change_log(&st, scd2_changelog_sql(cfg, CHG_TABLE, NULL), true);
			if (cfg->order_free)
				scd2_arrival_finish(&st, req->dry_run);
			scd2_progress_phase(SCD2_PROGRESS_WRITING, m->source_rows, m->source_rows, 0, total_changes);
			if (!req->dry_run && total_changes > 0)
				fed = scd2_write_dimension(&st, total_changes, req->want_feed ? res->feed : NULL,
										   res->feed_desc);
		}
	}

	/* 6. */
	if (req->want_feed && !fed)
	{
		scd2_progress_phase(SCD2_PROGRESS_FEED, m->source_rows, m->source_rows, -1, -1);
		scd2_read_feed(&st, req->dry_run, res->feed, res->feed_desc);
	}

	scd2_progress_end();
	scd2_drop_work_tables();
	UnregisterSnapshot(st.snap);
	scd2_owner_leave(&oc);
}
