/*
 * arrival.c -- step 4 of a load of an order-free dimension (register's
 * order_free): the change set from the set of events, whatever their
 * batching and arrival order (docs/SEMANTICS.md, "Arrival order").
 *
 * Every staged key is recomputed from its earliest staged instant m on,
 * out of its events there:
 *   - its existing versions: the one in force just before m (fixed: it
 *     started before m) and every one starting at or after m, each an
 *     event at its valid_from with its state;
 *   - the gaps after them: a delete at a valid_to no version starts at;
 *   - the events it remembers (history/arrival_memory.c) from m on;
 *   - the staged rows (exact duplicates collapse; a delete's values are
 *     ignored).
 * At one instant a delete wins; present events must agree on the tracked
 * columns (else an error naming the key and instant), and the instant takes
 * the other columns of its first event (an existing version, a remembered
 * event, a staged row).  Walking the instants in order, one that does not
 * change the state in force is dropped (and remembered); each kept present
 * instant opens a version up to the next kept instant.  The new versions
 * are then matched to the existing ones: a run reuses the earliest existing
 * version that starts inside it (moving its valid_from earlier when a
 * late identical event precedes it: action 'extend'; shortening or closing
 * it otherwise), the other versions inside it are superseded (action
 * 'remove'), a run without one is inserted.
 *
 * That is the general way.  When the memory holds nothing as late as the
 * earliest staged event (in-order events), a key with one staging row
 * after every boundary of its history is classified on the fast path
 * instead, as for any dimension (classify.c): its row closes or opens
 * a version, or changes nothing and is remembered (a no-op observation, a
 * delete of an absent key) -- exactly what the recompute would give it,
 * at the default path's cost plus the memory's writes.
 *
 * All of it runs as the dimension's owner through the load's statement
 * runner (driver.c); the memory is read and written by the extension owner
 * (history/arrival_memory.c) through work tables it owns.  On Citus the same
 * statements read the load's local images of the staging rows and of the
 * staged keys' versions (cfg->stg_sql / dim_sql, citus_load.c), and the
 * memory is a table of the coordinator.
 */
#include "scd2.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"
#include "load/arrival.h"
#include "citus/citus.h"


/*
 * events    `_t the instant, `_present, `_src (EV_*), `_sk and `_ovt of an
 *           existing version (else NULL), `_q its sequence (a staged or
 *           remembered event of a change stream; else NULL)
 * (the timeline: arrival.h)
 */
static const WorkColumn events_cols[] = {
	{"`_t", WT_VF},
	{"`_present", WT_BOOL},
	{"`_src", WT_INT4},
	{"`_sk", WT_INT8},
	{"`_ovt", WT_VT},
	{"`_q", WT_SEQ},
};

#define partition_by scd2_partition_by

static char *remembered_select(const Scd2Config *cfg, const char *alias, const char *instant,
							   const char *present, const char *sequence);
static char *state_json_sql(const Scd2Config *cfg, const char *alias, const char *instant);

static const WorkTable wt_events = {EV_TABLE, events_cols, lengthof(events_cols), true};

/* ", CASE WHEN cond THEN alias.col END AS col" for each payload column. */
static void
append_payload_if(StringInfo buf, const Scd2Config *cfg, const char *alias, const char *cond)
{
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, ", CASE WHEN %s THEN %s.%s END AS %s", cond, alias, groups[g][i].ident,
							 groups[g][i].ident);
}

/* A NULL of the events' `_q column (the sequence's type, or int4). */
static char *
seq_null(const Scd2Config *cfg)
{
	return psprintf("CAST(NULL AS %s)", cfg->seq_type_sql ? cfg->seq_type_sql : "pg_catalog.int4");
}

/*
 * The staging rows the recompute reads: all of them, or (subset) those of
 * the keys the fast path left to it (KEYS_TABLE).
 */
static void
append_staged(StringInfo buf, const Scd2Config *cfg, bool subset)
{
	if (!subset)
	{
		scd2_append_normalized_staging(buf, cfg);
		return;
	}
	appendStringInfoString(buf, "(SELECT s9.* FROM ");
	scd2_append_normalized_staging(buf, cfg);
	appendStringInfoString(buf, " s9 WHERE EXISTS (SELECT 1 FROM " KEYS_TABLE " x WHERE ");
	scd2_append_key_join(buf, cfg, "x", "s9");
	appendStringInfoString(buf, "))");
}

/* The staged rows, a delete's values NULLed, exact duplicates collapsed. */
static void
append_staged_events(StringInfo buf, const Scd2Config *cfg, bool subset)
{
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};

	appendStringInfoString(buf, "SELECT DISTINCT ON (");
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, groups[g][i].sortable ? "s.%s, " : "CAST(s.%s AS pg_catalog.text), ",
							 groups[g][i].ident);
	appendStringInfo(buf, X("s.`_t, s.`_present%s) s.`_t, s.`_present, " EV_STAGED ", NULL::pg_catalog.int8, NULL, %s"),
					 cfg->seq_col ? X(", s.`_q") : "", cfg->seq_col ? X("s.`_q") : seq_null(cfg));
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, "s.");
	scd2_append_payload_cols(buf, cfg, "s.");
	appendStringInfo(buf, X(" FROM (SELECT s0.`_t, s0.`_present%s"), cfg->seq_col ? X(", s0.`_q") : "");
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, "s0.");
	append_payload_if(buf, cfg, "s0", X("s0.`_present"));
	appendStringInfoString(buf, " FROM ");
	append_staged(buf, cfg, subset);
	appendStringInfoString(buf, " s0) s");
}

/* The remembered events, their values read back from their text forms. */
static void
append_remembered_events(StringInfo buf, const Scd2Config *cfg)
{
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};

	appendStringInfo(buf, X("SELECT %s, r.present, " EV_REMEMBERED ", NULL::pg_catalog.int8, NULL, %s"),
					 scd2_changelog_decode_sql(cfg->vf.typid, "r.effective"),
					 cfg->seq_col ? psprintf("CAST(r.sequence OPERATOR(pg_catalog.#>>) '{}' AS %s)", cfg->seq_type_sql)
					 : seq_null(cfg));
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, "km.");
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, ", CAST(r.state OPERATOR(pg_catalog.->>) %s AS %s)",
							 quote_literal_cstr(groups[g][i].name), groups[g][i].type_sql);
	appendStringInfo(buf, " FROM ONLY " ARR_RECALLED_TABLE " r JOIN km ON r.business_key OPERATOR(pg_catalog.=) %s",
					 scd2_key_json_sql(cfg, "km"));
}

/*
 * "SELECT keys, `_m": every staged key and the instant it is recomputed
 * from -- its earliest staged instant; with Type 1 columns, the start of
 * the version in force at that instant, if earlier: a version takes the
 * Type 1 values of the latest event in its range (docs/SEMANTICS.md), so
 * the events of the version a late event splits are read from its start.
 */
static void
append_key_instants(StringInfo buf, const Scd2Config *cfg, bool subset)
{
	appendStringInfoString(buf, "SELECT ");
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "k0.");
	if (cfg->ntype1 > 0)
	{
		appendStringInfo(buf, X(", COALESCE((SELECT d.%s FROM %s d WHERE "), cfg->vf.ident, cfg->dim_sql);
		scd2_append_key_join(buf, cfg, "d", "k0");
		appendStringInfo(buf, X(" AND d.%s < k0.`_m0 ORDER BY d.%s DESC LIMIT 1), k0.`_m0) AS `_m"),
						 cfg->vf.ident, cfg->vf.ident);
	}
	else
		appendStringInfoString(buf, X(", k0.`_m0 AS `_m"));
	appendStringInfoString(buf, " FROM (SELECT ");
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(buf, X(", pg_catalog.min(s.`_t) AS `_m0 FROM "));
	append_staged(buf, cfg, subset);
	appendStringInfoString(buf, " s GROUP BY ");
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(buf, ") k0");
}

/*
 * The events of every staged key from its instant km.`_m on
 * (append_key_instants), and the version in force just before it.
 */
static char *
sql_events(const Scd2Config *cfg, bool subset)
{
	StringInfoData buf;
	char	   *sk = cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL::pg_catalog.int8";

	initStringInfo(&buf);
	appendStringInfoString(&buf, "INSERT INTO " EV_TABLE " (");
	for (int i = 0; i < wt_events.ncols; i++)
		appendStringInfo(&buf, "%s%s", i ? ", " : "", X(wt_events.cols[i].name));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_payload_cols(&buf, cfg, NULL);
	appendStringInfoString(&buf, ") WITH km AS (");
	append_key_instants(&buf, cfg, subset);
	appendStringInfo(&buf, X("), rel AS (SELECT d.*, km.`_m AS `_m, %s AS `_o FROM km JOIN %s d ON "),
					 scd2_open_vt(cfg, "d"), cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "km");
	appendStringInfo(&buf, X(" WHERE %s IS NULL OR %s >= km.`_m) "), scd2_open_vt(cfg, "d"), scd2_open_vt(cfg, "d"));

	/* versions: the one in force before m, and those from m on */
	appendStringInfo(&buf, X("SELECT d.%s, true, CASE WHEN d.%s < d.`_m THEN " EV_PRIOR " ELSE " EV_VERSION " END, %s, d.`_o, %s"),
					 cfg->vf.ident, cfg->vf.ident, sk, seq_null(cfg));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	scd2_append_payload_cols(&buf, cfg, "d.");
	appendStringInfoString(&buf, " FROM rel d");
	/* gaps: a version ends where none starts */
	appendStringInfo(&buf, X(" UNION ALL SELECT d.`_o, false, " EV_GAP ", NULL, NULL, %s"), seq_null(cfg));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_null_cols(&buf, cfg->type1, cfg->ntype1);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfo(&buf, X(" FROM rel d WHERE d.`_o IS NOT NULL AND NOT EXISTS (SELECT 1 FROM %s d2 WHERE "),
					 cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d2", "d");
	appendStringInfo(&buf, X(" AND d2.%s = d.`_o)"), cfg->vf.ident);
	appendStringInfoString(&buf, " UNION ALL ");
	append_remembered_events(&buf, cfg);
	appendStringInfoString(&buf, " UNION ALL ");
	append_staged_events(&buf, cfg, subset);
	return buf.data;
}

/*
 * The events per instant: `_gone (a delete is there), `_rn (1: the
 * instant's first present event, else its first event), `_f<i> that
 * event's tracked values.
 */
static char *
sql_instant_events(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, X("SELECT e.*, pg_catalog.bool_or(NOT e.`_present) OVER wi AS `_gone,"
								   " pg_catalog.row_number() OVER wo AS `_rn"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.first_value(e.%s) OVER wo AS `_f%d"), cfg->tracked[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM " EV_TABLE " e WINDOW wi AS (%s, e.`_t),"
							 " wo AS (%s, e.`_t ORDER BY NOT e.`_present, e.`_src)"), partition_by(cfg, "e"), partition_by(cfg, "e"));
	return buf.data;
}

/* Two present events of one key at one instant that differ, no delete there. */
static char *
sql_conflict(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT %s, CAST(e.`_t AS pg_catalog.text) FROM (%s) e"
							 " WHERE e.`_present AND NOT e.`_gone AND NOT ("),
					 scd2_key_json_sql(cfg, "e"), sql_instant_events(cfg));
	scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "e.", "e.", "f");
	appendStringInfoString(&buf, ") LIMIT 1");
	return buf.data;
}

/* One row per instant, and the collapse walk over them. */
static char *
sql_timeline(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_arrival_timeline, TL_TABLE, false);
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, NULL);
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, NULL);
	appendStringInfo(&buf, X(") WITH e AS (%s), i AS (SELECT e.`_t, NOT e.`_gone AS `_live,"
							 " pg_catalog.bool_or(e.`_src = " EV_STAGED " AND e.`_present = NOT e.`_gone) OVER wi"
							 "   AND NOT pg_catalog.bool_or(e.`_src < " EV_REMEMBERED " AND e.`_present = NOT e.`_gone) OVER wi AS `_stg,"
							 " pg_catalog.bool_or(e.`_src = " EV_VERSION ") OVER wi AS `_hadver"),
					 sql_instant_events(cfg));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "e.");
	append_payload_if(&buf, cfg, "e", X("NOT e.`_gone"));
	appendStringInfo(&buf, X(", e.`_rn FROM e WINDOW wi AS (%s, e.`_t)), "), partition_by(cfg, "e"));
	appendStringInfoString(&buf, X("c AS (SELECT i.*, pg_catalog.lag(i.`_live) OVER w AS `_pp"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.lag(i.%s) OVER w AS `_p%d"), cfg->tracked[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM i WHERE i.`_rn = 1 WINDOW w AS (%s ORDER BY i.`_t)), "), partition_by(cfg, "i"));
	appendStringInfoString(&buf, X("k AS (SELECT c.*, NOT (c.`_live = COALESCE(c.`_pp, false) AND (NOT c.`_live OR ("));
	scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "p");
	appendStringInfo(&buf, X("))) AS `_keep FROM c) SELECT k.`_t, k.`_live, k.`_keep,"
							 " pg_catalog.sum(k.`_keep::pg_catalog.int4) OVER (%s ORDER BY k.`_t ROWS UNBOUNDED PRECEDING),"
							 " k.`_stg, k.`_hadver"), partition_by(cfg, "k"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "k.");
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, "k.");
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, "k.");
	appendStringInfoString(&buf, " FROM k");
	return buf.data;
}

/*
 * The change rows: the existing versions reused (extended, shortened,
 * closed), superseded (removed), and the runs without one (inserted).
 * With Type 1 columns, a run's version takes the Type 1 values of the
 * run's last instant (its latest event: docs/SEMANTICS.md), written over
 * a reused version where they differ (`_set_y; action 'type1' when its
 * range stays).
 */
static char *
sql_changes(const Scd2Config *cfg)
{
	StringInfoData buf;
	bool		y = cfg->ntype1 > 0;

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_changes, CHG_TABLE, true);
	appendStringInfo(&buf, X(") WITH runs AS (SELECT t.*, pg_catalog.lead(t.`_t) OVER w AS `_end,"
							 " pg_catalog.lead(t.`_present) OVER w AS `_npresent FROM " TL_TABLE " t"
							 " WHERE t.`_keep WINDOW w AS (%s ORDER BY t.`_t)), "), partition_by(cfg, "t"));
	if (y)
	{
		/* ry: each run's Type 1 values, of its last instant */
		appendStringInfoString(&buf, X("ry AS (SELECT DISTINCT ON ("));
		scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "t.");
		appendStringInfoString(&buf, X(", t.`_run) t.`_run"));
		scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "t.");
		for (int i = 0; i < cfg->ntype1; i++)
			appendStringInfo(&buf, X(", t.%s AS `_z%d"), cfg->type1[i].ident, i + 1);
		appendStringInfoString(&buf, X(" FROM " TL_TABLE " t WHERE t.`_run > 0 ORDER BY "));
		scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "t.");
		appendStringInfoString(&buf, X(", t.`_run, t.`_t DESC), "));
	}
	/*
	 * ver: the existing versions in the runs, `_live when the run is
	 * present and (a stream's fold may give an instant another state than
	 * the version that starts there has) its state is the version's; the
	 * first live one of a run is reused, the others are superseded
	 */
	appendStringInfoString(&buf, X("ver AS (SELECT x.*, pg_catalog.row_number() OVER (PARTITION BY "));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "x.");
	appendStringInfoString(&buf, X(", x.`_run ORDER BY NOT x.`_live, x.`_ovf) AS `_rk FROM (SELECT w.*, w.`_tpresent"));
	if (cfg->stream)
	{
		appendStringInfoString(&buf, " AND ");
		scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "w.", "w.", "w");
	}
	appendStringInfoString(&buf, X(" AS `_live FROM (SELECT e.`_t AS `_ovf, e.`_ovt, e.`_sk, t.`_run, t.`_present AS `_tpresent"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "e.");
	scd2_append_more_cols(&buf, cfg->type1, cfg->ntype1, "e.");
	if (cfg->stream)
	{
		scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, "t.");
		for (int i = 0; i < cfg->ntracked; i++)
			appendStringInfo(&buf, X(", e.%s AS `_w%d"), cfg->tracked[i].ident, i + 1);
	}
	appendStringInfoString(&buf, X(" FROM " EV_TABLE " e JOIN " TL_TABLE " t ON "));
	scd2_append_key_join(&buf, cfg, "t", "e");
	appendStringInfoString(&buf, X(" AND t.`_t = e.`_t WHERE e.`_src <= " EV_VERSION ") w) x), "
								   "reuse AS (SELECT v.*, r.`_t AS `_nvf, r.`_end, r.`_npresent"));
	if (y)
	{
		for (int i = 0; i < cfg->ntype1; i++)
			appendStringInfo(&buf, X(", z.`_z%d"), i + 1);
		appendStringInfoString(&buf, X(", NOT ("));
		scd2_append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "v.", "z.", "z");
		appendStringInfoString(&buf, X(") AS `_sety"));
	}
	else
		appendStringInfoString(&buf, X(", false AS `_sety"));
	appendStringInfoString(&buf, " FROM ver v JOIN runs r ON ");
	scd2_append_key_join(&buf, cfg, "r", "v");
	appendStringInfoString(&buf, X(" AND r.`_run = v.`_run"));
	if (y)
	{
		appendStringInfoString(&buf, " JOIN ry z ON ");
		scd2_append_key_join(&buf, cfg, "z", "v");
		appendStringInfoString(&buf, X(" AND z.`_run = v.`_run"));
	}
	appendStringInfoString(&buf, X(" WHERE v.`_live AND v.`_rk = 1) "));

	/* reused versions whose range (or Type 1 values) changed */
	appendStringInfoString(&buf, X("SELECT CASE WHEN u.`_nvf = u.`_ovf AND u.`_end IS NOT DISTINCT FROM u.`_ovt THEN " WT_ACT_TYPE1
								   " WHEN u.`_nvf = u.`_ovf AND u.`_ovt IS NULL THEN"
								   " CASE WHEN u.`_npresent THEN " WT_ACT_CLOSE " ELSE " WT_ACT_DELETE " END"
								   " WHEN u.`_nvf = u.`_ovf AND u.`_end < u.`_ovt THEN " WT_ACT_SHORTEN
								   " ELSE " WT_ACT_EXTEND " END, " WT_ORIGIN_COMPLEX ", false, u.`_ovf, u.`_sk,"
								   " u.`_nvf, u.`_end, u.`_end IS NULL, u.`_sety"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "u.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", u.`_z%d"), i + 1);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM reuse u WHERE NOT (u.`_nvf = u.`_ovf AND u.`_end IS NOT DISTINCT FROM u.`_ovt)"
								   " OR u.`_sety"));
	/* superseded versions */
	appendStringInfoString(&buf, X(" UNION ALL SELECT " WT_ACT_REMOVE ", " WT_ORIGIN_COMPLEX ", false, v.`_ovf, v.`_sk,"
								   " v.`_ovf, v.`_ovt, v.`_ovt IS NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "v.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_null_cols(&buf, cfg->type1, cfg->ntype1);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM ver v WHERE NOT (v.`_live AND v.`_rk = 1)"));
	/* present runs without an existing version: new versions */
	appendStringInfo(&buf, X(" UNION ALL SELECT CASE WHEN n.`_nth = 1 AND NOT EXISTS (SELECT 1 FROM %s d WHERE "),
					 cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "n");
	appendStringInfoString(&buf, X(") THEN " WT_ACT_INSERT " ELSE " WT_ACT_NEW_VERSION " END, " WT_ORIGIN_COMPLEX
								   ", false, NULL, NULL, n.`_t, n.`_end, n.`_end IS NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "n.");
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, "n.");
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", z.`_z%d"), i + 1);
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, "n.");
	appendStringInfo(&buf, X(" FROM (SELECT r.*, pg_catalog.row_number() OVER (%s ORDER BY r.`_t) AS `_nth"
							 " FROM runs r WHERE r.`_present AND NOT EXISTS (SELECT 1 FROM reuse u WHERE "), partition_by(cfg, "r"));
	scd2_append_key_join(&buf, cfg, "u", "r");
	appendStringInfoString(&buf, X(" AND u.`_run = r.`_run)) n"));
	if (y)
	{
		appendStringInfoString(&buf, " JOIN ry z ON ");
		scd2_append_key_join(&buf, cfg, "z", "n");
		appendStringInfoString(&buf, X(" AND z.`_run = n.`_run"));
	}
	return buf.data;
}

/* The staged keys and their earliest instants, for the memory's reads. */
static char *
sql_keys(const Scd2Config *cfg, bool subset)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO " ARR_KEYS_TABLE " (business_key, since) SELECT %s, %s FROM ("),
					 scd2_key_json_sql(cfg, "km"), scd2_changelog_encode_sql(cfg->vf.typid, X("km.`_m")));
	append_key_instants(&buf, cfg, subset);
	appendStringInfoString(&buf, ") km");
	return buf.data;
}

/*
 * What the key remembers from m on: every dropped instant (a no-op
 * observation, a delete of an absent key), its values as text forms (the
 * type's output function, as the owner; read back with its input).
 */
static char *
sql_remember(const Scd2Config *cfg)
{
	return psprintf(X("INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state, sequence) %s"
					  " FROM " TL_TABLE " t WHERE NOT t.`_keep"),
					remembered_select(cfg, "t", X("t.`_t"), X("t.`_present"), "NULL"));
}

/* A stream event's sequence as the memory keeps it: its text form, a JSON string. */
static char *
sequence_json_sql(const Scd2Config *cfg, const char *alias)
{
	if (cfg->seq_col == NULL)
		return "NULL::pg_catalog.jsonb";
	return psprintf(X("pg_catalog.to_jsonb(pg_catalog.format('%%s', %s.`_q))"), alias);
}

/*
 * A stream remembers every event as it came (stream.c): the recomputed
 * keys' raw events, remembered before and staged now, exact duplicates
 * once.
 */
static char *
sql_remember_stream(const Scd2Config *cfg)
{
	return psprintf(X("INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state, sequence)"
					  " SELECT DISTINCT * FROM (%s FROM " EV_TABLE " e WHERE e.`_src >= " EV_REMEMBERED ") r"),
					remembered_select(cfg, "e", X("e.`_t"), X("e.`_present"), sequence_json_sql(cfg, "e")));
}

/*
 * ... and the staging rows of the keys the fast path classified (those
 * not in KEYS_TABLE), a delete's values left out, exact duplicates once.
 */
static char *
sql_remember_stream_staged(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state, sequence)"
							 " SELECT DISTINCT * FROM (%s FROM "),
					 remembered_select(cfg, "s", X("s.`_t"), X("s.`_present"), sequence_json_sql(cfg, "s")));
	scd2_append_normalized_staging(&buf, cfg);
	appendStringInfoString(&buf, " s WHERE NOT EXISTS (SELECT 1 FROM " KEYS_TABLE " x WHERE ");
	scd2_append_key_join(&buf, cfg, "x", "s");
	appendStringInfoString(&buf, ")) r");
	return buf.data;
}

/*
 * "SELECT key, instant, present, state, sequence" of an event to remember (alias,
 * its instant and presence): the state of a present one is its tracked
 * and other columns' text forms, as jsonb.
 */
static char *
remembered_select(const Scd2Config *cfg, const char *alias, const char *instant, const char *present,
				  const char *sequence)
{
	return psprintf("SELECT %s, %s, %s, CASE WHEN %s THEN %s END, %s",
					scd2_key_json_sql(cfg, alias), scd2_changelog_encode_sql(cfg->vf.typid, instant),
					present, present, state_json_sql(cfg, alias, NULL), sequence);
}

/*
 * The state of a present event as the memory keeps it: its columns' text
 * forms (with instant, the column that keeps the effective time takes
 * that value: scd2_instant_column).
 */
static char *
state_json_sql(const Scd2Config *cfg, const char *alias, const char *instant)
{
	StringInfoData state;
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};
	int			instant_col = instant ? scd2_instant_column(cfg) : -1;

	int			pairs = 0;

	/* a call takes FUNC_MAX_ARGS: one object per 50 columns, concatenated */
	initStringInfo(&state);
	appendStringInfoString(&state, "(pg_catalog.jsonb_build_object(");
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
		{
			char	   *value = (g == 2 && i == instant_col) ? pstrdup(instant)
				: psprintf("%s.%s", alias, groups[g][i].ident);

			if (pairs == FUNC_MAX_ARGS / 2)
			{
				appendStringInfoString(&state, ") OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(");
				pairs = 0;
			}
			appendStringInfo(&state, "%s%s, CASE WHEN pg_catalog.num_nonnulls(%s) OPERATOR(pg_catalog.=) 1"
							 " THEN pg_catalog.format('%%s', %s) END",
							 pairs ? ", " : "", quote_literal_cstr(groups[g][i].name), value, value);
			pairs++;
		}
	appendStringInfoString(&state, "))");
	return state.data;
}

/*
 * The staged keys' versions that may have been observed from their key's
 * earliest staged instant m on: those that end after m, or are current.
 */
static char *
sql_key_versions(const Scd2Config *cfg, bool subset)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO " ARR_VERSIONS_TABLE " (sk, since) SELECT CAST(d.%s AS pg_catalog.int8), %s"
							 " FROM ("), cfg->sk, scd2_changelog_encode_sql(cfg->vf.typid, X("km.`_m")));
	append_key_instants(&buf, cfg, subset);
	appendStringInfo(&buf, ") km JOIN %s d ON ", cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "km");
	appendStringInfo(&buf, X(" WHERE %s IS NULL OR %s > km.`_m"), scd2_open_vt(cfg, "d"), scd2_open_vt(cfg, "d"));
	return buf.data;
}

/*
 * The key and state of every observation of a version, read from the
 * dimension: the version's, and the observation's own instant in the
 * column that keeps the effective time, if there is one.
 */
static char *
sql_observed_states(const Scd2Config *cfg)
{
	return psprintf("INSERT INTO " ARR_STATES_TABLE " (sk, effective, business_key, state)"
					" SELECT o.sk, o.effective, %s, %s"
					" FROM (SELECT DISTINCT o0.sk, o0.effective FROM ONLY " ARR_OBSERVED_TABLE " o0) o"
					" JOIN %s d ON d.%s = o.sk",
					scd2_key_json_sql(cfg, "d"),
					state_json_sql(cfg, "d", scd2_changelog_decode_sql(cfg->vf.typid, "o.effective")),
					cfg->dim_sql, cfg->sk);
}

/*
 * The fast path's events to remember (its WT_ACT_REMEMBER rows: `_vf the
 * instant, `_cur present), out of the change table into the memory's.
 */
static char *
sql_remember_simple(const Scd2Config *cfg)
{
	return psprintf(X("WITH m AS (DELETE FROM " CHG_TABLE " WHERE `_action = " WT_ACT_REMEMBER " RETURNING *)"
					  " INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state, sequence) %s FROM m"),
					remembered_select(cfg, "m", X("m.`_vf"), X("m.`_cur"), "NULL"));
}

/*
 * The counts of the metrics: distinct staged rows, the staged rows
 * applied -- one per instant a staged row decides that changes the state
 * in force, or that removes an existing version (a delete at its start)
 * -- and, subset, the staging rows of the keys recomputed.
 */
static char *
sql_counts(const Scd2Config *cfg, bool subset)
{
	return psprintf(X("SELECT (SELECT pg_catalog.count(*) FROM " EV_TABLE " e WHERE e.`_src = " EV_STAGED "),"
					  " (SELECT pg_catalog.count(*) FROM " TL_TABLE " t WHERE t.`_applied"
					  "   AND (t.`_keep OR (t.`_hadver AND NOT t.`_present))), %s"),
					subset ? X("(SELECT COALESCE(pg_catalog.sum(k.`_n), 0)::pg_catalog.int8 FROM " KEYS_TABLE " k)") : "0");
}

/*
 * Every staged key (or, subset, those in KEYS_TABLE) recomputed from its
 * events (see the top of the file) into the change table; *cc gets the
 * counts the metrics need.
 */
static void
recompute(LoadState *st, bool subset, Scd2ClassifyCounts *cc)
{
	const Scd2Config *cfg = st->cfg;

	/*
	 * Its work tables, created outside the restriction (an in-order load
	 * whose keys all take the fast path needs none of them)
	 */
	scd2_owner_unrestrict(st->oc);
	scd2_arrival_memory_prepare_recall();
	scd2_exec_work(scd2_sql_create_work_table(cfg, &wt_events), SPI_OK_UTILITY, "creating the arrival event table");
	scd2_exec_work(scd2_sql_create_work_table(cfg, &scd2_wt_arrival_timeline), SPI_OK_UTILITY, "creating the arrival timeline table");
	scd2_owner_restrict(st->oc);
	st->arrival_recalled = true;

	{
		int			nest = NewGUCNestLevel();

		scd2_pin_text_forms();
		scd2_load_exec(st, sql_keys(cfg, subset), SPI_OK_INSERT, "listing the staged keys");
		scd2_arrival_memory_recall(cfg->dim_oid);
		if (cfg->sk && !st->no_earliest && scd2_arrival_memory_has_versions(cfg->dim_oid, st->earliest))
		{
			scd2_load_exec(st, sql_key_versions(cfg, subset), SPI_OK_INSERT, "listing the staged keys' versions");
			if (scd2_arrival_memory_recall_versions(cfg->dim_oid) > 0)
			{
				scd2_load_exec(st, sql_observed_states(cfg), SPI_OK_INSERT, "reading the observed versions");
				scd2_arrival_memory_recall_observed();
			}
		}
		scd2_load_exec(st, sql_events(cfg, subset), SPI_OK_INSERT, "collecting the keys' events");
		AtEOXact_GUC(true, nest);
	}
	scd2_load_exec(st, cfg->stream ? scd2_stream_sql_conflict(cfg) : sql_conflict(cfg), SPI_OK_SELECT,
				   "checking for conflicting events");
	if (SPI_processed > 0 && cfg->stream)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Order-free dimension %s would have two different events of this key at one instant%s: staging table %s or a remembered event differ there%s.",
						   cfg->dim_name, cfg->seq_col ? " and one sequence" : "", cfg->stg_name,
						   cfg->seq_col ? "" : " in tracked or Type 1 columns, and none is a delete"),
				 errhint("%s; nothing was loaded.",
						 cfg->seq_col ? psprintf("Give each event of a key at one instant its own value of \"%s\"", cfg->seq_name)
						 : "Keep one state per key and effective time (a delete at that instant wins), or give the rows different effective times")));
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Order-free dimension %s would have two states of this key at one instant: staging table %s, an existing version or a remembered event differ in tracked columns there, and none is a delete.",
						   cfg->dim_name, cfg->stg_name),
				 errhint("Keep one state per key and effective time (a delete at that instant wins), or give the rows different effective times; nothing was loaded.")));
	scd2_load_exec(st, cfg->stream ? scd2_stream_sql_timeline(cfg) : sql_timeline(cfg), SPI_OK_INSERT,
				   "ordering the keys' events");
	scd2_load_exec(st, sql_changes(cfg), SPI_OK_INSERT, "building the changes of order-free keys");
	{
		int			nest = NewGUCNestLevel();

		scd2_pin_text_forms();
		scd2_load_exec(st, cfg->stream ? sql_remember_stream(cfg) : sql_remember(cfg), SPI_OK_INSERT,
					   "computing the events to remember");
		AtEOXact_GUC(true, nest);
	}
	scd2_load_exec(st, sql_counts(cfg, subset), SPI_OK_SELECT, "counting the order-free changes");
	cc->distinct = scd2_spi_int8(0, 1);
	cc->kept = scd2_spi_int8(0, 2);
	cc->complex_rows = subset ? scd2_spi_int8(0, 3) : st->source_rows;
	scd2_exec_work("DROP TABLE " EV_TABLE ", " TL_TABLE, SPI_OK_UTILITY, "dropping the arrival work tables");
}

/*
 * The table of the events the load remembers (history/arrival_memory.c), once,
 * created outside the restriction: only a load that has such events
 * needs it (an in-order load whose unchanged rows are all observations
 * of versions has none).
 */
static void
prepare_remember(LoadState *st)
{
	if (st->arrival_remembering)
		return;
	scd2_owner_unrestrict(st->oc);
	scd2_arrival_memory_prepare_store();
	scd2_owner_restrict(st->oc);
	st->arrival_remembering = true;
}

/*
 * Step 4 of an order-free load.  When the memory holds nothing as late as
 * the earliest staged event (in-order events), the fast path classifies
 * every key with one staging row after its history, as for any dimension
 * (classify.c): what it finds unchanged, or deleted while absent, is
 * remembered; the rest (several rows, a row at or before an existing
 * version's boundary) is recomputed.  Otherwise every staged key is
 * recomputed: a remembered event may split any of them.
 */
void
scd2_arrival_classify(LoadState *st, bool several, Scd2ClassifyCounts *cc)
{
	const Scd2Config *cfg = st->cfg;

	if (cfg->snapshot)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("order-free dimension %s cannot load a full extract", cfg->dim_name),
				 errdetail("%s is a snapshot: the state of every key now, not a set of events; scd2.apply_snapshots loads its first extract that way.",
						   cfg->stg_name),
				 errhint("Load the extracts' changes as events with a delete marker, or register the dimension without order_free; nothing was loaded.")));
	memset(cc, 0, sizeof(*cc));

	if (!st->no_earliest && scd2_arrival_memory_ahead(cfg->dim_oid, st->earliest))
	{
		prepare_remember(st);
		recompute(st, false, cc);
	}
	else
	{
		ArrivalObserved *obs = NULL;
		int64		complex_keys;
		bool		remembers;

		/*
		 * The no-op observations of versions go to the memory as surrogate
		 * keys (classify_copies.c), where the versions are the dimension's
		 * own: not on Citus, whose load reads an image of them.
		 */
		if (cfg->sk && st->citus == SCD2_CITUS_NONE && !cfg->stream)
		{
			obs = palloc0(sizeof(ArrivalObserved));
			obs->cxt = CurrentMemoryContext;
			st->observed = obs;
		}
		complex_keys = scd2_classify_simple_keys(st, several, obs);
		/* (with obs, the receiver counted the events to remember) */
		remembers = obs == NULL || obs->remembered > 0;
		if (remembers || complex_keys > 0)
			prepare_remember(st);
		if (remembers)
		{
			int			nest = NewGUCNestLevel();

			scd2_pin_text_forms();
			/* a stream remembers every staged row as it came, not only these */
			if (cfg->stream)
			{
				scd2_load_exec(st, X("DELETE FROM " CHG_TABLE " WHERE `_action = " WT_ACT_REMEMBER), SPI_OK_DELETE,
							   "leaving the unchanged rows to the stream's memory");
				scd2_load_exec(st, sql_remember_stream_staged(cfg), SPI_OK_INSERT, "remembering the staged events");
			}
			else
				scd2_load_exec(st, sql_remember_simple(cfg), SPI_OK_INSERT, "remembering the unchanged rows");
			AtEOXact_GUC(true, nest);
		}
		if (complex_keys > 0)
			recompute(st, true, cc);
	}
}

/*
 * After the first load of an order-free dimension (first_load.c, which
 * inserted a version for every staged key that is present): what its
 * versions do not show is remembered -- the deletes of keys it did not
 * have; a stream's every event as it came (stream.c) -- once its run id
 * is reserved.
 */
void
scd2_arrival_first_load(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData buf;
	int			nest;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state, sequence)"
							 " SELECT DISTINCT * FROM (%s FROM "),
					 remembered_select(cfg, "s", X("s.`_t"), X("s.`_present"), sequence_json_sql(cfg, "s")));
	scd2_append_normalized_staging(&buf, cfg);
	appendStringInfoString(&buf, cfg->stream ? " s) r" : X(" s WHERE NOT s.`_present) r"));
	prepare_remember(st);
	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	scd2_load_exec(st, buf.data, SPI_OK_INSERT, "remembering the first load's events");
	AtEOXact_GUC(true, nest);
	scd2_arrival_finish(st, false);
}

/*
 * Before the change log, when the load draws the surrogate keys of its
 * new versions (st->sk_seq: the fast path drew those of its insert
 * copies): the recomputed keys' new versions draw theirs, so that the
 * change log names every version the load inserts (the MERGE inserts the
 * keys drawn) and need not read them back after the write.
 */
void
scd2_arrival_draw_keys(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;

	if (!OidIsValid(st->sk_seq) || !st->arrival_recalled)
		return;
	scd2_load_exec(st, psprintf(X("UPDATE " CHG_TABLE " SET `_sk = pg_catalog.nextval(CAST(%u AS pg_catalog.regclass))"
								  " WHERE `_tvf IS NULL AND `_sk IS NULL"), st->sk_seq),
				   SPI_OK_UPDATE, "drawing the new versions' surrogate keys");
}

/*
 * After the change log (the run id is reserved): what the load remembers
 * replaces what it recalled, unless it is a dry run; the memory's work
 * tables go.
 */
void
scd2_arrival_finish(LoadState *st, bool dry_run)
{
	if (!dry_run)
	{
		int64		run_id = st->run_id;

		if (run_id == 0)
			elog(ERROR, "scd2: an order-free load of %s has no run id", st->cfg->dim_name);
		if (st->arrival_remembering)
			scd2_arrival_memory_store(st->cfg->dim_oid, run_id, st->arrival_recalled);
		scd2_arrival_memory_store_observed(st->cfg->dim_oid, run_id, st->observed);
	}
	if (st->arrival_remembering || st->arrival_recalled)
		scd2_arrival_memory_drop();
}
