/*
 * driver.c -- one load of a staging table into a registered dimension.
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
 *      the general timeline path for the rest (classify.c,
 *      timeline.c);
 *   5. count it (and refuse a load that would close more current keys
 *      than the registered max_close_fraction allows), then write it with ONE MERGE whose processed count must
 *      equal the classified writes (on Citus: closes + inserts, and the
 *      reads go to local images; citus_load.c);
 *   6. read the change feed back if the caller wants it;
 *   7. re-key the dimension's maintained fact tables (history/facts.c:
 *      checked in 1, under the lock, before anything is written).
 * A first load into an empty dimension does 4-6 its own way, with one
 * INSERT and the indexes built afterwards (first_load.c).
 * Any error rolls back everything the load did.
 *
 * The caller is connected to SPI.  scd2_run_load, first below, is the
 * load; the functions after it are its stages in that order, then the
 * refusals they raise.  Every step runs its statements through
 * runner.c and calls nothing here.
 */
#include "scd2.h"

#include <math.h>

#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"
#include "citus/citus.h"

static void check_request(const Scd2LoadRequest *req);
static void become_owner(const Scd2LoadRequest *req, OwnerContext *oc);
static void open_load(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st,
					  OwnerContext *oc);
static bool validate(const Scd2LoadRequest *req, LoadState *st, Scd2Metrics *m, bool ask_several);
static void first_load(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st);
static bool first_load_or_repeats(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st,
								  bool by_index);
static bool classify_and_write(const Scd2LoadRequest *req, Scd2LoadResult *res,
							   LoadState *st, bool several);
static void close_load(LoadState *st, OwnerContext *oc);
static double estimated_rows(Oid relid);
static void require_finite(TimestampTz effective_at);
static void refuse_empty_snapshot(const Scd2Config *cfg);
static void refuse_large_close(LoadState *st, const Scd2Metrics *m);
static void use_extract(Scd2Config *cfg, const Scd2Extract *ext);
static void use_extract_rows(Scd2Config *cfg, const Scd2Extract *ext);

/* One load (see the head of this file); res gets its metrics and feed. */
void
scd2_run_load(const Scd2LoadRequest *req, Scd2LoadResult *res)
{
	LoadState	st;
	OwnerContext oc;
	Scd2Metrics *m = &res->metrics;
	bool		first;			/* the dimension is empty: a first load */
	bool		by_index;		/* its unique index finds a repeated key */
	bool		several;		/* some key has several staging rows */
	bool		fed;			/* the write returned the feed (17+) */

	memset(m, 0, sizeof(*m));
	check_request(req);
	become_owner(req, &oc);
	open_load(req, res, &st, &oc);
	first = scd2_first_load_applies(&st, req->dry_run);
	by_index = first && scd2_first_load_index_finds_repeats(&st);
	several = validate(req, &st, m, !by_index);

	/*
	 * 4-6 of a first load into an empty dimension (first_load.c): every
	 * row is a new key, written by one INSERT without a change table; an
	 * order-free dimension then remembers what its versions do not show
	 * (arrival.c).  When the dimension's unique index stands for the
	 * check that no key has several rows, a key that has falls back to
	 * the general path, which the check then asks for.
	 */
	fed = first && !several && m->source_rows > 0 && first_load_or_repeats(req, res, &st, by_index);
	if (!fed)
	{
		if (by_index)
			(void) scd2_validate_staging(&st, &several);
		fed = classify_and_write(req, res, &st, several);
	}

	/* 6. */
	if (req->want_feed && !fed)
	{
		scd2_progress_phase(SCD2_PROGRESS_FEED, m->source_rows, m->source_rows, -1, -1);
		scd2_read_feed(&st, req->dry_run, res->feed, res->feed_desc);
	}
	res->run_id = st.run_id;
	close_load(&st, &oc);

	/*
	 * 7. The maintained fact tables re-keyed from the run's change log, as
	 * their owners, in the load's transaction (history/facts.c).
	 */
	if (!req->dry_run)
		m->facts_rekeyed = scd2_facts_maintain(req->dim_oid);
}

/* Before the lock: the instant, the relations, the caller's privileges. */
static void
check_request(const Scd2LoadRequest *req)
{
	require_finite(req->effective_at);
	scd2_check_relkind(req->dim_oid, true);
	scd2_check_relkind(req->stg_oid, false);
	/* the caller may do what the load does */
	scd2_check_privileges(req->stg_oid, req->dim_oid, req->dry_run, GetUserId(), false);
}

/* 1. Lock the dimension, then run as its owner. */
static void
become_owner(const Scd2LoadRequest *req, OwnerContext *oc)
{
	/* Serialise loads of this dimension; readers are not blocked. */
	scd2_lock_dimension(req->dim_oid, NULL,
						"The load waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						"which another load (or a statement that locks the table) holds; nothing was loaded.");

	/* no row-level security the load would bypass (catalog/guard.c), under the lock */
	scd2_refuse_row_security(req->dim_oid, scd2_relation_owner(req->dim_oid), "dimension", "A load");
	scd2_refuse_row_security(req->stg_oid, scd2_relation_owner(req->dim_oid), "staging table", "A load");
	/* no staging view of a role the owner does not trust (trust.c) */
	scd2_trust_staging_relation(req->stg_oid, scd2_relation_owner(req->dim_oid),
								scd2_relation_display_name(req->dim_oid));
	/* what re-keying the maintained fact tables will need (history/facts.c) */
	if (!req->dry_run)
		scd2_facts_require_maintainable(req->dim_oid, "A load", true, scd2_change_log);

	/* From here on the load runs as the dimension's owner (see above). */
	scd2_owner_enter(oc, scd2_relation_owner(req->dim_oid));
	scd2_check_privileges(req->stg_oid, req->dim_oid, req->dry_run, oc->owner, true);
}

/*
 * 1-2. The configuration, the one snapshot, the work tables (and on
 * Citus the local images), then the security-restricted operation.
 */
static void
open_load(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st, OwnerContext *oc)
{
	Scd2Config *cfg;
	bool		citus;			/* a Citus table takes part (citus_load.c) */
	List	   *added;			/* columns added to the dimension (schema.c) */
	char	   *dim_name = scd2_relation_display_name(req->dim_oid);
	Scd2Registration *reg;

	/*
	 * The load's statements cost much in the planner's units (nested loops
	 * over every staging row) but evaluate simple expressions: JIT
	 * compilation took 0.4-0.9 s of a 1.3 s load at 1M keys / 200k rows on
	 * PostgreSQL 15, and saved nothing.
	 */
	scd2_set_local("jit", "off");
	/* the registration, read once and its shape checked (catalog/config.c) */
	reg = scd2_load_registration(req->dim_oid, req->stg_oid, dim_name);
	/* on_schema_change: the staging table's shape (schema.c) */
	added = scd2_schema_evolve(req, reg, dim_name, oc, &res->schema_note);
	cfg = scd2_load_config(req->dim_oid, req->stg_oid, reg);
	scd2_schema_apply_fills(cfg, added);
	res->dim_name = cfg->dim_name;
	res->stg_name = cfg->stg_name;
	if (req->extract)
		use_extract(cfg, req->extract);

	/* 2. One snapshot for every read, taken after the lock. */
	memset(st, 0, sizeof(*st));
	st->cfg = cfg;
	st->oc = oc;
	st->effective_at = TimestampTzGetDatum(req->effective_at);
	st->dim_rows = estimated_rows(req->dim_oid);
	CommandCounterIncrement();
	st->snap = RegisterSnapshot(GetTransactionSnapshot());
	/* REPEATABLE READ, SERIALIZABLE: that snapshot must see the dimension as it is */
	scd2_refuse_stale_snapshot(req->dim_oid, cfg->dim_name, st->snap, "nothing was loaded");

	scd2_create_work_tables(cfg);
	st->log_prepared = scd2_changelog_prepare(req->dry_run);
	/* Citus: the write step, and local images of what the load reads */
	citus = scd2_citus_prepare(st, cfg);
	/* the versions it completes in place, for the change feed (complete.c) */
	if (req->want_feed && cfg->inferred != NULL && st->citus == SCD2_CITUS_NONE)
	{
		scd2_create_completed_table(cfg);
		st->feed_completed = true;
	}
	scd2_owner_restrict(oc);
	if (citus)
		scd2_citus_fill_images(st);
	if (req->extract)
		use_extract_rows(cfg, req->extract);
}

/*
 * 3. The staging rows; returns whether some key has several (false when
 * not asked: a plainer scan).
 */
static bool
validate(const Scd2LoadRequest *req, LoadState *st, Scd2Metrics *m, bool ask_several)
{
	const Scd2Config *cfg = st->cfg;
	bool		several = false;

	scd2_progress_begin(req->dim_oid, req->stg_oid);
	scd2_progress_phase(SCD2_PROGRESS_VALIDATING, 0, -1, -1, -1);
	scd2_check_conversions(st);
	m->source_rows = scd2_validate_staging(st, ask_several ? &several : NULL);
	st->source_rows = m->source_rows;
	scd2_validate_sequence(st);
	if (cfg->infinity)
		scd2_check_before_current_valid_to(st);

	if ((req->extract ? req->extract->rows == 0 : cfg->snapshot && m->source_rows == 0) &&
		!scd2_allow_empty_snapshot)
		refuse_empty_snapshot(cfg);
	return several;
}

/* 4-6 of a first load (first_load.c; arrival.c for an order-free dimension). */
static void
first_load(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st)
{
	scd2_progress_phase(SCD2_PROGRESS_FIRST_LOAD, 0, res->metrics.source_rows, 0, res->metrics.source_rows);
	scd2_first_load(st, &res->metrics, req->want_feed ? res->feed : NULL, res->feed_desc);
	if (st->cfg->order_free)
		scd2_arrival_first_load(st);
}

/*
 * The first load: true when it is done.  With by_index its unique index
 * stands for the check that no key has several staging rows, and it runs
 * in a subtransaction: false when the index found a repeated key (a unique
 * violation), everything it did rolled back.  Any other error is the
 * load's.
 */
static bool
first_load_or_repeats(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st, bool by_index)
{
	MemoryContext ctx = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	Scd2Metrics before = res->metrics;
	volatile bool done = false;

	if (!by_index)
	{
		first_load(req, res, st);
		return true;
	}
	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(ctx);
	PG_TRY();
	{
		first_load(req, res, st);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(ctx);
		CurrentResourceOwner = owner;
		done = true;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(ctx);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(ctx);
		CurrentResourceOwner = owner;
		scd2_progress_count_done();
		/* (rolled back first: a caller's own subtransaction is then the current one) */
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			ReThrowError(edata);
		FreeErrorData(edata);
		res->metrics = before;
		st->run_id = 0;
	}
	PG_END_TRY();
	return done;
}

/*
 * 4-5. Classify (the fast path, then the general path for complex keys),
 * count, write, verify; returns whether the write returned the feed.
 */
static bool
classify_and_write(const Scd2LoadRequest *req, Scd2LoadResult *res, LoadState *st,
				   bool several)
{
	const Scd2Config *cfg = st->cfg;
	Scd2Metrics *m = &res->metrics;
	Scd2ClassifyCounts cc;
	int64		total_changes;
	bool		fed = false;

	/* 4. the inferred members it brings values for, completed in place (complete.c) */
	m->completed = st->completed = scd2_complete_inferred(st, req->dry_run);
	/* (a load that may log by surrogate keys draws them: batch_log.c) */
	st->sk_seq = scd2_batch_sequence(st, req->dry_run);
	scd2_progress_phase(SCD2_PROGRESS_CLASSIFYING, 0, m->source_rows, -1, -1);
	if (cfg->order_free)
		scd2_arrival_classify(st, several, &cc);	/* arrival.c */
	else
		scd2_classify(st, several, &cc);

	/* 5. Count, write, verify. */
	total_changes = scd2_count_changes(st, &cc, m);
	scd2_schema_count_fills(st, m);
	if (!req->dry_run)
		refuse_large_close(st, m);
	scd2_progress_phase(SCD2_PROGRESS_CHANGE_LOG, m->source_rows, m->source_rows, 0, total_changes);

	/* a load that moves versions pins them in the batches that logged them */
	if (SCD2_LOAD_MOVES(st) && !req->dry_run)
		scd2_batch_pin_moved(st);

	/*
	 * the change log (history/changelog.c): before-images of what the MERGE
	 * changes; on Citus after the closes and inserts, with the surrogate
	 * keys they gave (citus_load.c)
	 */
	if (st->citus != SCD2_CITUS_NONE)
	{
		scd2_progress_phase(SCD2_PROGRESS_WRITING, m->source_rows, m->source_rows, 0, total_changes);
		if (!req->dry_run && total_changes > 0)
			fed = scd2_citus_write(st, total_changes, req->want_feed);
		if (!req->dry_run)
			scd2_load_record_change_log(st, scd2_changelog_sql(cfg, CHG_TABLE, DIM_IMAGE), true);
		if (cfg->order_free)
		{
			scd2_arrival_finish(st, req->dry_run);
			if (!req->dry_run)
				scd2_load_record_inserted_keys(st, CHG_TABLE);
		}
	}
	else
	{
		if (cfg->order_free && !req->dry_run)
			scd2_arrival_draw_keys(st);
		/* by surrogate keys when the batch allows (batch_log.c) */
		if (!req->dry_run && !scd2_load_record_batch_log(st))
			scd2_load_record_change_log(st, scd2_changelog_sql(cfg, CHG_TABLE, NULL), true);
		if (cfg->order_free)
			scd2_arrival_finish(st, req->dry_run);
		scd2_progress_phase(SCD2_PROGRESS_WRITING, m->source_rows, m->source_rows, 0, total_changes);
		if (!req->dry_run && total_changes > 0)
			fed = scd2_write_dimension(st, total_changes, req->want_feed ? res->feed : NULL,
									   res->feed_desc);
		/* surrogate keys a later order-free load's extend cannot move */
		if (cfg->order_free && !req->dry_run)
			scd2_load_record_inserted_keys(st, CHG_TABLE);
	}
	return fed;
}

/* The end of the load: its work tables and snapshot go, the owner is left. */
static void
close_load(LoadState *st, OwnerContext *oc)
{
	scd2_progress_end();
	scd2_drop_work_tables();
	UnregisterSnapshot(st->snap);
	scd2_owner_leave(oc);
}

/* ---------- what the stages use ---------- */

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
	cfg->extract_marker = ext->gone_col;
}

static void
use_extract_rows(Scd2Config *cfg, const Scd2Extract *ext)
{
	cfg->stg_sql = pstrdup(ext->rows_sql);
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
 * The keys current before the load and not after it, as a count query
 * over the change table (alias c; `_vt NULL: open) and the dimension
 * (alias d): a key some close, delete, shorten or remove touches, that
 * has a current version now, and after the write has neither an open row
 * the load writes (an insert copy, or an update copy that leaves its row
 * open) nor a current version the load leaves alone.
 */
static char *
sql_keys_ended(const Scd2Config *cfg, const char *dim)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT pg_catalog.count(*) FROM (SELECT DISTINCT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "c.");
	appendStringInfo(&buf, X(" FROM " CHG_TABLE " c WHERE c.`_action IN (" WT_ACT_CLOSE ", " WT_ACT_DELETE ", "
							 WT_ACT_SHORTEN ", " WT_ACT_REMOVE ")) k"
							 " WHERE EXISTS (SELECT FROM %s d WHERE "), dim);
	scd2_append_key_join(&buf, cfg, "d", "k");
	appendStringInfo(&buf, " AND %s)", scd2_current_pred(cfg, "d"));
	appendStringInfoString(&buf, X(" AND NOT EXISTS (SELECT FROM " CHG_TABLE " c WHERE "));
	scd2_append_key_join(&buf, cfg, "c", "k");
	appendStringInfoString(&buf, X(" AND c.`_vt IS NULL AND c.`_action NOT IN (" WT_ACT_REMOVE ", "
								   WT_ACT_COMPLEX ", " WT_ACT_REMEMBER "))"));
	appendStringInfo(&buf, " AND NOT EXISTS (SELECT FROM %s d WHERE ", dim);
	scd2_append_key_join(&buf, cfg, "d", "k");
	appendStringInfo(&buf, X(" AND %s AND NOT EXISTS (SELECT FROM " CHG_TABLE " c WHERE "),
					 scd2_current_pred(cfg, "d"));
	scd2_append_key_join(&buf, cfg, "c", "d");
	appendStringInfo(&buf, X(" AND c.`_tvf %s d.%s AND c.`_action NOT IN (" WT_ACT_COMPLEX ", "
							 WT_ACT_REMEMBER ")))"),
					 cfg->vf.eqop_sql, cfg->vf.ident);
	return buf.data;
}

/*
 * The partial-extract guard (register's max_close_fraction): a load that
 * would leave more of the dimension's current keys without a current
 * version -- whatever ends them: snapshot absences, delete markers, an
 * order-free load's removes -- than the registered fraction of its current
 * keys is refused before it writes anything, unless
 * scd2.allow_large_close is on.  Counted only when the load ends some
 * version.
 */
static void
refuse_large_close(LoadState *st, const Scd2Metrics *m)
{
	const Scd2Config *cfg = st->cfg;
	const char *dim = st->dim_table_sql ? st->dim_table_sql : cfg->dim_sql;
	int64		ended;
	int64		current;

	if (cfg->max_close_fraction < 0 || scd2_allow_large_close ||
		m->closed + m->deleted + m->shortened + m->removed == 0)
		return;
	scd2_load_exec(st, sql_keys_ended(cfg, dim), SPI_OK_SELECT, "counting the keys the load ends");
	ended = scd2_spi_int8(0, 1);
	if (ended == 0)
		return;
	scd2_load_exec(st, psprintf("SELECT pg_catalog.count(*) FROM %s d WHERE %s", dim,
								scd2_current_pred(cfg, "d")),
				   SPI_OK_SELECT, "counting the current keys");
	current = scd2_spi_int8(0, 1);
	if ((double) ended <= cfg->max_close_fraction * (double) current)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("load of dimension %s would close %lld of %lld current keys, limit %g",
					cfg->dim_name, (long long) ended, (long long) current, cfg->max_close_fraction),
			 errdetail("Staging table %s would leave %.1f%% of the current keys without a current version (keys absent from a snapshot extract, delete markers, versions an order-free load removes); the registered max_close_fraction %g allows %lld. Nothing was loaded.",
					   cfg->stg_name, 100.0 * (double) ended / (double) current,
					   cfg->max_close_fraction,
					   (long long) floor(cfg->max_close_fraction * (double) current)),
			 errhint("A partial extract is usually an upstream failure. If the closes are real, allow this load with SET LOCAL scd2.allow_large_close = on.")));
}

/* ---------- the arguments of scd2.apply and scd2.merge ---------- */

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
