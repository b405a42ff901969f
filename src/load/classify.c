/*
 * classify.c -- step 4 of a load: the change set.  The fast path
 * classifies every key with one in-order staging row in one statement
 * (new, change, type1, delete, return, unchanged), whose rows
 * classify_copies.c writes into the change table as it reads them; keys
 * with several rows, a late row, or a row at the very instant an existing
 * version starts are "complex" and go the general way (timeline.c).
 */
#include "scd2.h"

#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "utils/lsyscache.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

/* ---------- classification ---------- */

/* Keys with several staging rows: they go the general way. */
static char *
scd2_sql_multi_keys(const Scd2Config *cfg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_keys, keys, false);
	appendStringInfoString(&buf, ") SELECT pg_catalog.count(*), false");
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, " FROM ");
	scd2_append_normalized_staging(&buf, cfg);
	appendStringInfoString(&buf, " s GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, " HAVING pg_catalog.count(*) > 1");
	return buf.data;
}

/*
 * The staging rows of keys with exactly one row: each row counts its key's
 * rows (a window over the staging sorted by key) and the fast path keeps
 * the rows that are alone.  This used to be a NOT IN (or NOT EXISTS) on the
 * key table, which PostgreSQL hashes in memory whatever work_mem says (a
 * hashed subplan cannot spill: ~110 MB for the 1.25M keys with two rows of
 * a 10M-row batch) or, when the planner estimates that the hash would not
 * fit in hash_mem (at the default work_mem, a few hundred thousand such
 * keys), scans the whole key table again for every staging row.  The sort
 * spills to disk past work_mem, and the rows come out in key order (the
 * probe order below wants them so).
 */
static void
append_single_row_keys(StringInfo buf, const Scd2Config *cfg)
{
	appendStringInfoString(buf, X("(SELECT * FROM (SELECT s1.*, pg_catalog.count(*) OVER (PARTITION BY "));
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s1.");
	appendStringInfoString(buf, X(") AS `_nk FROM "));
	scd2_append_normalized_staging(buf, cfg);
	appendStringInfoString(buf, X(" s1) s0 WHERE s0.`_nk OPERATOR(pg_catalog.=) 1 ORDER BY "));
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s0.");
	appendStringInfoString(buf, ")");
}

/*
 * " OR <the row is a partial update>": a present row with a NULL in a
 * column of ignore_null_updates (cfg->stream), whose state is the current
 * version's with the row's values over it -- the general way's fold
 * (load/stream.c).  A key without a current version has nothing to lay
 * it over: its NULLs stay.
 */
static void
append_partial_update(StringInfo buf, const Scd2Config *cfg)
{
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};
	bool		first = true;

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
			if (groups[g][i].ignore_null)
			{
				appendStringInfo(buf, "%s c.%s IS NULL", first ? X(" OR (c.`_present AND (") : " OR",
								 groups[g][i].ident);
				first = false;
			}
	if (!first)
		appendStringInfoString(buf, "))");
}

/*
 * The fast path: every key with exactly one staging row is classified once
 * against its current version (found through the partial unique index) --
 * or, when it has none, against its latest closed version -- with a
 * NULL-safe comparison of the tracked columns.  One pass, no materialised
 * intermediate: the query gives each row's class (FC_*) with what its
 * copies need, and classify_copies.c's receiver writes them into the
 * change table (a change: its update copy and its insert copy).  A row
 * that turns out to be late, or at the very instant of an existing
 * version, becomes a 'complex' marker row; scd2_sql_move_complex() moves
 * those keys to the general path.  Unchanged rows produce nothing and are
 * counted by difference.  With exclude_keys the keys with several staging
 * rows are left out (found by counting each key's rows:
 * append_single_row_keys).
 */
/* (One statement, built in its SQL order: kept in one function on purpose.) */
static char *
scd2_sql_fast_path(const Scd2Config *cfg, bool exclude_keys, bool observe, bool hook_sorts)
{
	StringInfoData buf;

	/*
	 * An order-free dimension (of = true) also classifies the rows that
	 * change nothing but must be remembered (FC_NOOP: the no-op
	 * observations and the deletes of absent keys; arrival.c moves
	 * them to the memory), and sends a present row at the very instant its
	 * key's last version ended (a delete there wins) the general way.  With
	 * observe, a no-op observation identical to its current version is
	 * FC_OBSERVED, with its instant as the memory keeps it: the receiver
	 * keeps it instead of writing it.
	 */
	bool		of = cfg->order_free;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT `_cls, `_t, CAST(`_t AS %s), %s, `_present, `_dvf, `_dsk"),
					 cfg->vt.type_sql,
					 observe ? psprintf(X("CASE WHEN `_cls = " WT_CLS_OBSERVED " THEN %s END"),
										scd2_changelog_encode_sql(cfg->vf.typid, X("`_t")))
					 : "NULL::pg_catalog.timestamptz");
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_payload_cols(&buf, cfg, NULL);

	/*
	 * The probe: the current version, else (a scalar subquery evaluated
	 * only for keys without one) the end of the latest closed version.
	 * Both subqueries are fenced (OFFSET 0) so each expression is computed
	 * once per row; unchanged rows are dropped before the receiver.
	 */
	appendStringInfoString(&buf, X(" FROM (SELECT * FROM (SELECT c.*, CASE"
						   " WHEN c.`_dvf IS NOT NULL THEN CASE"
						   "   WHEN c.`_t <= c.`_dvf"));
	append_partial_update(&buf, cfg);
	appendStringInfoString(&buf, X(" THEN " WT_CLS_COMPLEX
						   "   WHEN NOT c.`_present THEN " WT_CLS_DELETE
						   "   WHEN NOT ("));
	if (cfg->detect_timestamp)
		appendStringInfoString(&buf, "false");	/* a later row is a change */
	else
		scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "d");
	appendStringInfoString(&buf, ") THEN " WT_CLS_CHANGE " WHEN NOT (");
	scd2_append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "c.", "c.", "e");
	if (of && observe)
	{
		/*
		 * Identical to the current version, the other columns too -- but
		 * for a column that keeps the effective time, which must hold the
		 * row's instant (the memory gives the observation that value back:
		 * arrival.c, sql_observed_states).
		 */
		int			instant = scd2_instant_column(cfg);

		appendStringInfoString(&buf, X(") THEN " WT_CLS_TYPE1 " WHEN c.`_dsk IS NOT NULL"));
		scd2_append_identical_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "d", -1, true);
		scd2_append_identical_positional(&buf, cfg, cfg->type1, cfg->ntype1, "c.", "c.", "e", -1, true);
		scd2_append_identical_positional(&buf, cfg, cfg->other, cfg->nother, "c.", "c.", "o", instant, false);
		if (instant >= 0)
			appendStringInfo(&buf, X(" AND c.%s OPERATOR(pg_catalog.=) c.`_t"), cfg->other[instant].ident);
		appendStringInfoString(&buf, X(" THEN " WT_CLS_OBSERVED));
	}
	else if (of)
		appendStringInfoString(&buf, ") THEN " WT_CLS_TYPE1);
	if (of)
		appendStringInfoString(&buf,
							   X(" ELSE " WT_CLS_NOOP " END"
							   " WHEN c.`_hvt > c.`_t OR (c.`_present AND c.`_hvt = c.`_t) THEN " WT_CLS_COMPLEX
							   " WHEN NOT c.`_present THEN CASE WHEN c.`_hvt = c.`_t THEN " WT_CLS_UNCHANGED
							   "   ELSE " WT_CLS_NOOP " END"));
	else
		appendStringInfoString(&buf,
							   X(") THEN " WT_CLS_TYPE1 " ELSE " WT_CLS_UNCHANGED " END"
							   " WHEN c.`_hvt > c.`_t THEN " WT_CLS_COMPLEX
							   " WHEN NOT c.`_present THEN " WT_CLS_UNCHANGED));
	appendStringInfoString(&buf,
						   X(" WHEN c.`_hvt IS NOT NULL THEN " WT_CLS_RETURN
						   " ELSE " WT_CLS_NEW " END AS `_cls FROM (SELECT s.*, "));
	appendStringInfo(&buf, X("d.%s AS `_dvf, %s AS `_dsk"), cfg->vf.ident,
					 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk)
					 : "NULL::pg_catalog.int8");
	appendStringInfo(&buf, ", CASE WHEN d.%s IS NULL THEN (SELECT h.%s FROM %s h WHERE ",
					 cfg->vf.ident, cfg->vt.ident, cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "h", "s");
	appendStringInfo(&buf, X(" ORDER BY h.%s DESC LIMIT 1) END AS `_hvt"), cfg->vf.ident);
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", d.%s AS `_d%d"), cfg->tracked[i].ident, i + 1);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", d.%s AS `_e%d"), cfg->type1[i].ident, i + 1);
	for (int i = 0; observe && i < cfg->nother; i++)
		appendStringInfo(&buf, X(", d.%s AS `_o%d"), cfg->other[i].ident, i + 1);
	appendStringInfoString(&buf, " FROM ");
	if (exclude_keys)
		append_single_row_keys(&buf, cfg);
	else if (hook_sorts)
		scd2_append_normalized_staging(&buf, cfg);	/* sorted by fast_path_plan.c */
	else if (scd2_keys_cheap_prefix(cfg) > 0)
	{
		/*
		 * Probe in key order: consecutive probes then walk the current-row
		 * index (and, when the heap follows the key, the heap) forward
		 * instead of jumping; at 1M keys / 200k rows the sort costs ~30 ms
		 * and the probes take ~0.2 s less.  The nested loop keeps the
		 * order, so the change table -- and the MERGE that reads it -- is
		 * in key order too.  A key whose later columns are text sorts by
		 * its leading columns that sort cheaply (an (int, text) key by its
		 * int: 200k keys, 20k rows, the probes 0.7 -> 0.4 s).  (With
		 * hook_sorts the statement orders the join by that key instead and
		 * fast_path_plan.c gives the staging relation only sorted paths,
		 * which may be parallel: each process probes its share in order.)
		 */
		appendStringInfoString(&buf, "(SELECT * FROM ");
		scd2_append_normalized_staging(&buf, cfg);
		appendStringInfoString(&buf, " s0 ORDER BY ");
		scd2_append_cols(&buf, cfg->keys, scd2_keys_cheap_prefix(cfg), "s0.");
		appendStringInfoString(&buf, ")");
	}
	else
		scd2_append_normalized_staging(&buf, cfg);
	appendStringInfo(&buf, " s LEFT JOIN %s d ON ", cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "s");
	appendStringInfo(&buf, " AND %s", scd2_current_pred(cfg, "d"));
	if (hook_sorts)
	{
		appendStringInfoString(&buf, " ORDER BY ");
		scd2_append_cols(&buf, cfg->keys, scd2_keys_cheap_prefix(cfg), "s.");
	}
	appendStringInfoString(&buf, X(" OFFSET 0) c OFFSET 0) c1 WHERE `_cls <> " WT_CLS_UNCHANGED ") cls"));
	return buf.data;
}

/*
 * Whether the fast path's staging rows are sorted by fast_path_plan.c's
 * hook, under probes that may run in parallel, instead of by a sorted
 * subquery under serial probes: when the probes are forced (the staging
 * rows fewer than half the dimension's, runner.c), the staging is a
 * plain table (never the dimension: catalog/config.c refuses that), scanned as it
 * is (its key's sorted columns not cast, no timestamp detection), neither
 * table is on Citus (whose planner plans its tables), and the rows are not
 * first counted per key.
 */
static bool
fast_path_hook_sorts(const LoadState *st, bool exclude_keys)
{
	const Scd2Config *cfg = st->cfg;
	int			prefix = scd2_keys_cheap_prefix(cfg);

	if (exclude_keys || prefix == 0 || cfg->detect_timestamp || st->citus != 0 || st->stg_citus != 0 ||
		!OidIsValid(cfg->stg_oid) || get_rel_relkind(cfg->stg_oid) != RELKIND_RELATION ||
		(double) st->source_rows * 2 >= st->dim_rows)
		return false;
	for (int i = 0; i < prefix; i++)
		if (cfg->keys[i].carried || !cfg->keys[i].stg_exact)
			return false;
	return true;
}

/* Keys the fast path found late: to the general path. */
static char *
scd2_sql_move_complex(const Scd2Config *cfg, const char *chg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("WITH m AS (DELETE FROM %s WHERE `_action = " WT_ACT_COMPLEX " RETURNING *) "), chg);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_keys, keys, false);
	appendStringInfoString(&buf, ") SELECT 1, false");
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, " FROM m");
	return buf.data;
}

/*
 * Snapshot mode: current keys missing from the extract are closed at
 * effective_at -- but for an inferred member (register's inferred_column),
 * which no extract has had yet: it stays current until a load brings its
 * record.  Keys whose current version starts at or after it go the
 * general way (second statement).
 */
static char *
scd2_sql_snapshot_missing(const Scd2Config *cfg, const char *chg, const char *keys)
{
	StringInfoData buf;
	char	   *eff = psprintf("CAST($1 AS %s)", cfg->vf.type_sql);

	initStringInfo(&buf);
	appendStringInfo(&buf, "WITH m AS (SELECT d.* FROM %s d WHERE %s%s AND NOT EXISTS (SELECT 1 FROM ",
					 cfg->dim_sql, scd2_current_pred(cfg, "d"),
					 /* an inferred member stays until its record comes (complete.c) */
					 cfg->inferred ? psprintf(" AND d.%s IS NOT TRUE", cfg->inferred) : "");
	scd2_append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, " s WHERE ");
	scd2_append_key_join(&buf, cfg, "s", "d");
	appendStringInfoString(&buf, ")), mx AS (");
	scd2_append_work_insert(&buf, cfg, &scd2_wt_keys, keys, false);
	appendStringInfoString(&buf, ") SELECT 0, true");
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "m.");
	appendStringInfo(&buf, " FROM m WHERE m.%s >= %s) ", cfg->vf.ident, eff);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_changes, chg, false);
	appendStringInfo(&buf, ") SELECT " WT_ACT_DELETE ", " WT_ORIGIN_FAST ", false, m.%s, %s, m.%s, %s, false, false",
					 cfg->vf.ident, cfg->sk ? psprintf("m.%s", cfg->sk) : "NULL",
					 cfg->vf.ident, eff);
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "m.");
	appendStringInfo(&buf, " FROM m WHERE m.%s < %s", cfg->vf.ident, eff);
	return buf.data;
}

/* Number of rows in a work table. */
static int64
count_rows(LoadState *st, const char *table)
{
	scd2_load_exec(st, psprintf("SELECT pg_catalog.count(*) FROM %s", table), SPI_OK_SELECT, "counting");
	return scd2_spi_int8(0, 1);
}

/*
 * Step 4, the keys the fast path can classify: keys with several staging
 * rows are found first (when there are any), the fast path classifies the
 * rest in one statement, and the keys whose row it found late move to the
 * general path (KEYS_TABLE).  Returns how many keys go the general way.
 */
int64
scd2_classify_simple_keys(LoadState *st, bool several, struct ArrivalObserved *obs)
{
	const Scd2Config *cfg = st->cfg;
	int64		complex_keys = 0;
	int64		late_rows = 0;
	bool		hook_sorts;
	char	   *sql;

	if (several)
	{
		scd2_load_exec(st, scd2_sql_multi_keys(cfg, KEYS_TABLE), SPI_OK_INSERT, "finding keys with several rows");
		complex_keys = (int64) SPI_processed;
	}
	hook_sorts = fast_path_hook_sorts(st, several);
	sql = scd2_sql_fast_path(cfg, several, obs != NULL, hook_sorts);
	/* the staging rows it classifies, in the load's progress */
	scd2_progress_count_statement(sql, false);
	scd2_load_exec_probing_into(st, (double) st->source_rows, sql,
								scd2_classify_copier(cfg, CHG_TABLE_RELNAME, st->sk_seq, obs, &late_rows),
								hook_sorts ? cfg->stg_oid : InvalidOid, "classifying staging rows");
	scd2_progress_count_done();
	if (late_rows == 0)
		return complex_keys;	/* nothing to move: the statement would scan the change table for nothing */
	scd2_load_exec(st, scd2_sql_move_complex(cfg, CHG_TABLE, KEYS_TABLE), SPI_OK_INSERT,
				   "moving late rows to the general path");
	if ((int64) SPI_processed != late_rows)
		elog(ERROR, "scd2: the fast path found %lld late rows, and %lld moved to the general path",
			 (long long) late_rows, (long long) SPI_processed);
	return complex_keys + late_rows;
}

/*
 * Step 4: the change set.  The fast path classifies the simple keys, a
 * snapshot closes the keys it lacks, and the general path
 * (timeline.c) handles every complex key.  *cc gets the counts the
 * metrics need.
 */
void
scd2_classify(LoadState *st, bool several, Scd2ClassifyCounts *cc)
{
	const Scd2Config *cfg = st->cfg;
	int64		complex_keys;	/* keys that go the general way */

	memset(cc, 0, sizeof(*cc));
	complex_keys = scd2_classify_simple_keys(st, several, NULL);
	if (cfg->snapshot)
		scd2_load_exec(st, scd2_sql_snapshot_missing(cfg, CHG_TABLE, KEYS_TABLE), SPI_OK_INSERT,
					   "closing keys missing from the snapshot");
	if (complex_keys > 0 || (cfg->snapshot && count_rows(st, KEYS_TABLE) > 0))
		scd2_classify_complex_keys(st, &cc->distinct, &cc->kept, &cc->y_applied,
								   &cc->complex_rows);
}
