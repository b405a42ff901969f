/*
 * timeline.c -- step 4b of a load: the general path for complex
 * keys.  Their timelines (existing versions, gap starts, staged rows) go
 * into the points table, window functions decide what each point keeps,
 * conflicts are errors, and the result is added to the change table.  See
 * docs/SEMANTICS.md for the rules.
 */
#include "scd2.h"

#include "executor/spi.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

/* ---------- the general path (complex keys) ---------- */

/*
 * The timeline points of every complex key: its staged rows (exact
 * duplicates collapsed), its existing versions from the one covering its
 * earliest staged instant on (read through the (key, valid_from) index, no
 * full history scan), and the gap starts after closed versions.
 */
/* (One statement, built in its SQL order: kept in one function on purpose.) */
static char *
scd2_sql_points(const Scd2Config *cfg, const char *pts, const char *keys)
{
	StringInfoData buf;
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};
	bool		first = true;

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_points, pts, true);
	appendStringInfoString(&buf, ") WITH cs AS (");
	if (cfg->snapshot)
	{
		/*
		 * Snapshot mode: a key's latest staged row is its state now.  It
		 * takes effect at the later of its own effective time and the key's
		 * last event: the end of its last version (its deletion) when it
		 * has no current version -- so a key the extract has again gets
		 * one, without rewriting history -- or the start of its current
		 * version: with the same values it is a no-op (the extract, sent
		 * again, changes nothing), with other values it conflicts there
		 * and the load is refused.
		 */
		appendStringInfo(&buf, X("SELECT CASE WHEN q.`_present AND q.`_last THEN GREATEST(q.`_t,"
								 " (SELECT COALESCE(%s, h.%s) FROM %s h WHERE "),
						 scd2_open_vt(cfg, "h"), cfg->vf.ident, cfg->dim_sql);
		scd2_append_key_join(&buf, cfg, "h", "q");
		appendStringInfo(&buf, X(" ORDER BY h.%s DESC LIMIT 1)) ELSE q.`_t END AS `_t, q.`_present, q.`_stg"),
						 cfg->vf.ident);
		scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "q.");
		scd2_append_payload_cols(&buf, cfg, "q.");
		/* the latest row, alone at its instant (else: ambiguous, below) */
		appendStringInfoString(&buf, X(" FROM (SELECT c0.*, c0.`_t OPERATOR(pg_catalog.=) pg_catalog.max(c0.`_t) OVER (PARTITION BY "));
		scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "c0.");
		appendStringInfoString(&buf, X(") AND pg_catalog.count(*) OVER (PARTITION BY "));
		scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "c0.");
		appendStringInfoString(&buf, X(", c0.`_t) OPERATOR(pg_catalog.=) 1 AS `_last FROM ("));
	}
	appendStringInfoString(&buf, "SELECT DISTINCT ON (");
	/* exact duplicates: equal in every loaded column (text form if no btree) */
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
		{
			if (groups[g][i].sortable)
				appendStringInfo(&buf, "%ss.%s", first ? "" : ", ", groups[g][i].ident);
			else
				appendStringInfo(&buf, "%sCAST(s.%s AS pg_catalog.text)", first ? "" : ", ",
								 groups[g][i].ident);
			first = false;
		}
	appendStringInfoString(&buf, X(", s.`_t, s.`_present) s.`_t, s.`_present, true AS `_stg"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	scd2_append_payload_cols(&buf, cfg, "s.");
	appendStringInfoString(&buf, " FROM ");
	scd2_append_normalized_staging(&buf, cfg);
	appendStringInfo(&buf, " s WHERE EXISTS (SELECT 1 FROM %s x WHERE ", keys);
	scd2_append_key_join(&buf, cfg, "x", "s");
	appendStringInfoString(&buf, ")");
	if (cfg->snapshot)
	{
		appendStringInfoString(&buf, ") c0) q");
		/*
		 * Keys missing from a snapshot: an absent point at effective_at, or
		 * at the start of the current version when that is later (where
		 * it conflicts: a deletion cannot end a version before it starts).
		 */
		appendStringInfo(&buf, " UNION ALL SELECT GREATEST(CAST($1 AS %s), (SELECT d.%s FROM %s d WHERE ",
						 cfg->vf.type_sql, cfg->vf.ident, cfg->dim_sql);
		scd2_append_key_join(&buf, cfg, "d", "x");
		appendStringInfo(&buf, " AND %s)), false, false", scd2_current_pred(cfg, "d"));
		scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "x.");
		scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
		scd2_append_null_cols(&buf, cfg->type1, cfg->ntype1);
		scd2_append_null_cols(&buf, cfg->other, cfg->nother);
		appendStringInfo(&buf, X(" FROM %s x WHERE x.`_snap"), keys);
	}
	appendStringInfoString(&buf, "), km AS (SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", pg_catalog.min(`_t) AS `_m FROM cs GROUP BY "));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, "), rel AS (SELECT d.*, ");
	appendStringInfo(&buf, X("%s AS `_o, km.`_m, pg_catalog.lead(d.%s) OVER (PARTITION BY "),
					 scd2_open_vt(cfg, "d"), cfg->vf.ident);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	appendStringInfo(&buf, X(" ORDER BY d.%s) AS `_nvf FROM km JOIN %s d ON "), cfg->vf.ident, cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "km");
	appendStringInfo(&buf, " WHERE d.%s >= COALESCE((SELECT d2.%s FROM %s d2 WHERE ",
					 cfg->vf.ident, cfg->vf.ident, cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d2", "km");
	appendStringInfo(&buf, X(" AND d2.%s <= km.`_m ORDER BY d2.%s DESC LIMIT 1), CAST('-infinity' AS %s))) "),
					 cfg->vf.ident, cfg->vf.ident, cfg->vf.type_sql);

	/* E points: relevant existing versions */
	appendStringInfo(&buf, X("SELECT r.%s, " WT_PRIO_VERSION ", true, r.`_o, %s, false"),
					 cfg->vf.ident, cfg->sk ? psprintf("r.%s", cfg->sk) : "NULL::pg_catalog.int8");
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "r.");
	scd2_append_payload_cols(&buf, cfg, "r.");
	appendStringInfoString(&buf, X(" FROM rel r WHERE r.`_o IS NULL OR r.`_o > r.`_m"));
	/* G points: a closed version not followed at once by another */
	appendStringInfoString(&buf, X(" UNION ALL SELECT r.`_o, " WT_PRIO_GAP ", false, NULL, NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "r.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_null_cols(&buf, cfg->type1, cfg->ntype1);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM rel r WHERE r.`_o > r.`_m AND r.`_o IS DISTINCT FROM r.`_nvf"));
	/* S points */
	appendStringInfoString(&buf, X(" UNION ALL SELECT cs.`_t, " WT_PRIO_STAGED ", cs.`_present, NULL, NULL, cs.`_stg"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "cs.");
	scd2_append_payload_cols(&buf, cfg, "cs.");
	appendStringInfoString(&buf, " FROM cs");
	return buf.data;
}

/* Two staged rows of one key at one instant with different values. */
static char *
scd2_sql_ambiguous(const Scd2Config *cfg, const char *pts)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT %s, CAST(`_t AS pg_catalog.text) FROM %s p WHERE `_prio = " WT_PRIO_STAGED " GROUP BY "),
					 scd2_key_json_sql(cfg, "p"), pts);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", `_t HAVING pg_catalog.count(*) > 1 ORDER BY "));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", `_t LIMIT 1"));
	return buf.data;
}

/*
 * The collapse walk of docs/SEMANTICS.md as window functions over each
 * key's points in time order (ties: gap start, existing, staged):
 *   _keep     the point changes the state in force (E points always kept);
 *   _conflict a staged point at an existing version's start, with another
 *             state;
 *   _run      the number of kept points so far (a run = a kept point and
 *             the dropped ones after it);
 *   _l<i>     the Type 1 values of the run's last point, _lprio its kind.
 */
/*
 * create: the table's CREATE ... WITH NO DATA (which runs nothing: the
 * load creates its work tables before it enters the security-restricted
 * context, see driver.c); otherwise the INSERT that fills it.
 */
static char *
scd2_sql_window(const Scd2Config *cfg, const char *pts, const char *win, bool create)
{
	StringInfoData buf;
	char	   *part = scd2_partition_by_keys(cfg);

	initStringInfo(&buf);
	appendStringInfo(&buf, create ? "CREATE TEMP TABLE %s ON COMMIT DROP AS " : "INSERT INTO %s ", win);
	appendStringInfoString(&buf, X("WITH o AS (SELECT p.*,"
						   " pg_catalog.lag(`_present) OVER w AS `_pp, pg_catalog.lag(`_t) OVER w AS `_pt,"
						   " pg_catalog.lag(`_prio) OVER w AS `_pprio"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.lag(%s) OVER w AS `_p%d"), cfg->tracked[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM %s p WINDOW w AS (%s ORDER BY `_t, `_prio)), "), pts, part);

	appendStringInfoString(&buf,
						   X("c AS (SELECT o.*, NOT (`_present = COALESCE(`_pp, false) AND (NOT `_present OR ("));
	if (cfg->detect_timestamp)
		appendStringInfoString(&buf, "false");	/* every later instant is a change */
	else
		scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "o.", "o.", "p");
	appendStringInfoString(&buf, X("))) AS `_diff FROM o), "
						   "k AS (SELECT c.*, (`_prio = " WT_PRIO_VERSION " OR `_diff) AS `_keep,"
						   " COALESCE(`_prio = " WT_PRIO_STAGED " AND `_pprio = " WT_PRIO_VERSION " AND `_pt = `_t AND `_diff, false) AS `_conflict"
						   " FROM c), "));
	appendStringInfo(&buf, X("r AS (SELECT k.*, pg_catalog.sum(`_keep::pg_catalog.int4)"
					 " OVER (%s ORDER BY `_t, `_prio ROWS UNBOUNDED PRECEDING) AS `_run FROM k) "),
					 part);
	appendStringInfoString(&buf, X("SELECT r.*, pg_catalog.last_value(`_prio) OVER l AS `_lprio"));
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", pg_catalog.last_value(%s) OVER l AS `_l%d"), cfg->type1[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM r WINDOW l AS (%s, `_run ORDER BY `_t, `_prio"
					 " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"), part);
	if (create)
		appendStringInfoString(&buf, " WITH NO DATA");
	return buf.data;
}

/* A staged point conflicting with an existing version's start. */
static char *
scd2_sql_conflict(const Scd2Config *cfg, const char *win)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT %s, CAST(w.`_t AS pg_catalog.text) FROM %s w WHERE w.`_conflict ORDER BY "),
					 scd2_key_json_sql(cfg, "w"), win);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "w.");
	appendStringInfoString(&buf, X(", w.`_t LIMIT 1"));
	return buf.data;
}

/* The change rows of the complex keys, from the kept points. */
static char *
scd2_sql_general_changes(const Scd2Config *cfg, const char *chg, const char *win)
{
	StringInfoData buf;
	char	   *part = scd2_partition_by_keys(cfg);

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_changes, chg, true);
	appendStringInfo(&buf,
					 X(") WITH kp AS (SELECT w.*, pg_catalog.lead(`_t) OVER wk AS `_end,"
					 " pg_catalog.lead(`_present) OVER wk AS `_npresent,"
					 " pg_catalog.row_number() OVER (%s, (`_prio = " WT_PRIO_STAGED " AND `_present) ORDER BY `_t) AS `_nth"
					 " FROM %s w WHERE `_keep WINDOW wk AS (%s ORDER BY `_t, `_prio)), "),
					 part, win, part);
	appendStringInfoString(&buf, X("e AS (SELECT kp.*, (`_ovt IS NULL AND `_lprio = " WT_PRIO_STAGED " AND NOT ("));
	scd2_append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "kp.", "kp.", "l");
	appendStringInfoString(&buf, X(")) AS `_sety FROM kp WHERE `_prio = " WT_PRIO_VERSION ") "));

	/* existing rows: end moved earlier, and/or Type 1 overwrite */
	appendStringInfoString(&buf,
						   X("SELECT CASE WHEN `_end IS NOT DISTINCT FROM `_ovt THEN " WT_ACT_TYPE1
						   " WHEN `_ovt IS NOT NULL THEN " WT_ACT_SHORTEN
						   " WHEN `_npresent THEN " WT_ACT_CLOSE " ELSE " WT_ACT_DELETE " END,"
						   " " WT_ORIGIN_COMPLEX ", false, `_t, `_sk, `_t, `_end, `_end IS NULL, `_sety"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", CASE WHEN `_sety THEN `_l%d END"), i + 1);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM e WHERE `_end IS DISTINCT FROM `_ovt OR `_sety"));

	/* new versions: present staged points that were kept */
	appendStringInfo(&buf,
					 X(" UNION ALL SELECT CASE WHEN `_nth = 1 AND NOT EXISTS (SELECT 1 FROM %s d WHERE "),
					 cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "kp");
	appendStringInfoString(&buf,
						   X(") THEN " WT_ACT_INSERT " ELSE " WT_ACT_NEW_VERSION " END,"
						   " " WT_ORIGIN_COMPLEX ", false, NULL, NULL, `_t, `_end, `_end IS NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, NULL);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", `_l%d"), i + 1);
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, NULL);
	appendStringInfoString(&buf, X(" FROM kp WHERE `_prio = " WT_PRIO_STAGED " AND `_present"));
	return buf.data;
}

/*
 * Counts of the general path: distinct staged rows, kept staged rows, rows
 * whose last staged row carried a Type 1 overwrite, staging rows of
 * complex keys.
 */
static char *
scd2_sql_general_counts(const Scd2Config *cfg, const char *win, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf,
						   X("SELECT pg_catalog.count(*) FILTER (WHERE `_stg),"
					 " pg_catalog.count(*) FILTER (WHERE `_stg AND `_keep),"
					 " pg_catalog.count(*) FILTER (WHERE `_prio = " WT_PRIO_VERSION " AND `_ovt IS NULL AND `_lprio = " WT_PRIO_STAGED " AND NOT ("));
	scd2_append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "w.", "w.", "l");
	appendStringInfo(&buf, X(")), (SELECT COALESCE(pg_catalog.sum(`_n), 0)::pg_catalog.int8 FROM %s)"
					 " FROM %s w"), keys, win);
	return buf.data;
}

/*
 * Step 4b: the general timeline path for complex keys.  Fills the change
 * table; returns through *distinct, *kept, *ytype1, *complex_rows the
 * counts the metrics need.
 */
void
scd2_classify_complex_keys(LoadState *st, int64 *distinct, int64 *kept,
					  int64 *y_applied, int64 *complex_rows)
{
	const Scd2Config *cfg = st->cfg;

	/* the general path's work tables: created outside the restriction */
	scd2_owner_unrestrict(st->oc);
	scd2_exec_work(scd2_sql_create_work_table(cfg, &scd2_wt_points), SPI_OK_UTILITY, "creating the point table");
	scd2_exec_work(scd2_sql_window(cfg, PTS_TABLE, WIN_TABLE, true), SPI_OK_UTILITY,
				  "creating the window table");
	scd2_owner_restrict(st->oc);

	scd2_load_exec(st, scd2_sql_points(cfg, PTS_TABLE, KEYS_TABLE), SPI_OK_INSERT, "collecting timeline points");

	scd2_load_exec(st, scd2_sql_ambiguous(cfg, PTS_TABLE), SPI_OK_SELECT, "checking for ambiguous rows");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Staging table %s has several rows for this key with the same effective time and different values.",
						   cfg->stg_name),
				 errhint("Keep one row per key and effective time, or give the rows different effective times; nothing was loaded.")));

	scd2_load_exec(st, scd2_sql_window(cfg, PTS_TABLE, WIN_TABLE, false), SPI_OK_INSERT, "ordering timeline points");

	scd2_load_exec(st, scd2_sql_conflict(cfg, WIN_TABLE), SPI_OK_SELECT, "checking for conflicts");
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

	scd2_load_exec(st, scd2_sql_general_changes(cfg, CHG_TABLE, WIN_TABLE), SPI_OK_INSERT,
			  "building changes of complex keys");
	scd2_load_exec(st, scd2_sql_general_counts(cfg, WIN_TABLE, KEYS_TABLE), SPI_OK_SELECT,
			  "counting changes of complex keys");
	*distinct = scd2_spi_int8(0, 1);
	*kept = scd2_spi_int8(0, 2);
	*y_applied = scd2_spi_int8(0, 3);
	*complex_rows = scd2_spi_int8(0, 4);
}
