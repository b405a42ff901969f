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
#include "citus/citus.h"

#define EV_TABLE	"pg_temp.\"scd2 work: arrival events\""
#define TL_TABLE	"pg_temp.\"scd2 work: arrival timeline\""

/* `_src of an event: what it is, and its precedence at one instant. */
#define EV_PRIOR		"0"		/* the version in force just before m */
#define EV_VERSION		"1"		/* an existing version starting at or after m */
#define EV_GAP			"2"		/* a delete where a version ends in a gap */
#define EV_REMEMBERED	"3"		/* a remembered event */
#define EV_STAGED		"4"		/* a staged row */

/*
 * events    `_t the instant, `_present, `_src (EV_*), `_sk and `_ovt of an
 *           existing version (else NULL)
 * timeline  one row per instant: `_t, `_present (no delete there), `_keep
 *           (it changes the state in force), `_run (kept instants so far),
 *           `_applied (a staged row decides it: no existing event of that
 *           state is there), `_hadver (an existing version starts there)
 */
static const WorkColumn events_cols[] = {
	{"`_t", WT_VF},
	{"`_present", WT_BOOL},
	{"`_src", WT_INT4},
	{"`_sk", WT_INT8},
	{"`_ovt", WT_VT},
};

static const WorkColumn timeline_cols[] = {
	{"`_t", WT_VF},
	{"`_present", WT_BOOL},
	{"`_keep", WT_BOOL},
	{"`_run", WT_INT8},
	{"`_applied", WT_BOOL},
	{"`_hadver", WT_BOOL},
};

/* "PARTITION BY alias.k1, alias.k2" */
static char *
partition_by(const Scd2Config *cfg, const char *alias)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "PARTITION BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, psprintf("%s.", alias));
	return buf.data;
}

static char *remembered_select(const Scd2Config *cfg, const char *alias, const char *instant,
							   const char *present);
static char *state_json_sql(const Scd2Config *cfg, const char *alias, const char *instant);

static const WorkTable wt_events = {EV_TABLE, events_cols, lengthof(events_cols), true};
static const WorkTable wt_timeline = {TL_TABLE, timeline_cols, lengthof(timeline_cols), true};

/* ", CASE WHEN cond THEN alias.col END AS col" for each payload column. */
static void
append_payload_if(StringInfo buf, const Scd2Config *cfg, const char *alias, const char *cond)
{
	const Scd2Column *groups[2] = {cfg->tracked, cfg->other};
	int			counts[2] = {cfg->ntracked, cfg->nother};

	for (int g = 0; g < 2; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, ", CASE WHEN %s THEN %s.%s END AS %s", cond, alias, groups[g][i].ident,
							 groups[g][i].ident);
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
	const Scd2Column *groups[3] = {cfg->keys, cfg->tracked, cfg->other};
	int			counts[3] = {cfg->nkeys, cfg->ntracked, cfg->nother};

	appendStringInfoString(buf, "SELECT DISTINCT ON (");
	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, groups[g][i].sortable ? "s.%s, " : "CAST(s.%s AS pg_catalog.text), ",
							 groups[g][i].ident);
	appendStringInfoString(buf, X("s.`_t, s.`_present) s.`_t, s.`_present, " EV_STAGED ", NULL::pg_catalog.int8, NULL"));
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, "s.");
	scd2_append_more_cols(buf, cfg->tracked, cfg->ntracked, "s.");
	scd2_append_more_cols(buf, cfg->other, cfg->nother, "s.");
	appendStringInfoString(buf, X(" FROM (SELECT s0.`_t, s0.`_present"));
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
	const Scd2Column *groups[2] = {cfg->tracked, cfg->other};
	int			counts[2] = {cfg->ntracked, cfg->nother};

	appendStringInfo(buf, X("SELECT %s, r.present, " EV_REMEMBERED ", NULL::pg_catalog.int8, NULL"),
					 scd2_changelog_decode_sql(cfg->vf.typid, "r.effective"));
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, "km.");
	for (int g = 0; g < 2; g++)
		for (int i = 0; i < counts[g]; i++)
			appendStringInfo(buf, ", CAST(r.state OPERATOR(pg_catalog.->>) %s AS %s)",
							 quote_literal_cstr(groups[g][i].name), groups[g][i].type_sql);
	appendStringInfo(buf, " FROM ONLY " ARR_RECALLED_TABLE " r JOIN km ON r.business_key OPERATOR(pg_catalog.=) %s",
					 scd2_key_json_sql(cfg, "km"));
}

/*
 * The events of every staged key from its earliest staged instant on
 * (km.`_m), and the version in force just before it.
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
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, NULL);
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, NULL);
	appendStringInfoString(&buf, ") WITH km AS (SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, X(", pg_catalog.min(s.`_t) AS `_m FROM "));
	append_staged(&buf, cfg, subset);
	appendStringInfoString(&buf, " s GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, X("), rel AS (SELECT d.*, km.`_m AS `_m, %s AS `_o FROM km JOIN %s d ON "),
					 scd2_open_vt(cfg, "d"), cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "km");
	appendStringInfo(&buf, X(" WHERE %s IS NULL OR %s >= km.`_m) "), scd2_open_vt(cfg, "d"), scd2_open_vt(cfg, "d"));

	/* versions: the one in force before m, and those from m on */
	appendStringInfo(&buf, X("SELECT d.%s, true, CASE WHEN d.%s < d.`_m THEN " EV_PRIOR " ELSE " EV_VERSION " END, %s, d.`_o"),
					 cfg->vf.ident, cfg->vf.ident, sk);
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	scd2_append_more_cols(&buf, cfg->tracked, cfg->ntracked, "d.");
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, "d.");
	appendStringInfoString(&buf, " FROM rel d");
	/* gaps: a version ends where none starts */
	appendStringInfoString(&buf, X(" UNION ALL SELECT d.`_o, false, " EV_GAP ", NULL, NULL"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
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
	scd2_append_work_insert(&buf, cfg, &wt_timeline, TL_TABLE, false);
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
 */
static char *
sql_changes(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_changes, CHG_TABLE, true);
	appendStringInfo(&buf, X(") WITH runs AS (SELECT t.*, pg_catalog.lead(t.`_t) OVER w AS `_end,"
							 " pg_catalog.lead(t.`_present) OVER w AS `_npresent FROM " TL_TABLE " t"
							 " WHERE t.`_keep WINDOW w AS (%s ORDER BY t.`_t)), "), partition_by(cfg, "t"));
	appendStringInfoString(&buf, X("ver AS (SELECT e.`_t AS `_ovf, e.`_ovt, e.`_sk, t.`_run, t.`_present AS `_live"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "e.");
	appendStringInfo(&buf, X(", pg_catalog.row_number() OVER (%s, t.`_run ORDER BY e.`_t) AS `_rk"
							 " FROM " EV_TABLE " e JOIN " TL_TABLE " t ON "), partition_by(cfg, "e"));
	scd2_append_key_join(&buf, cfg, "t", "e");
	appendStringInfoString(&buf, X(" AND t.`_t = e.`_t WHERE e.`_src <= " EV_VERSION "), "
								   "reuse AS (SELECT v.*, r.`_t AS `_nvf, r.`_end, r.`_npresent FROM ver v JOIN runs r ON "));
	scd2_append_key_join(&buf, cfg, "r", "v");
	appendStringInfoString(&buf, X(" AND r.`_run = v.`_run WHERE v.`_live AND v.`_rk = 1) "));

	/* reused versions whose range changed */
	appendStringInfoString(&buf, X("SELECT CASE WHEN u.`_nvf = u.`_ovf AND u.`_ovt IS NULL THEN"
								   " CASE WHEN u.`_npresent THEN " WT_ACT_CLOSE " ELSE " WT_ACT_DELETE " END"
								   " WHEN u.`_nvf = u.`_ovf AND u.`_end < u.`_ovt THEN " WT_ACT_SHORTEN
								   " ELSE " WT_ACT_EXTEND " END, " WT_ORIGIN_COMPLEX ", false, u.`_ovf, u.`_sk,"
								   " u.`_nvf, u.`_end, u.`_end IS NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "u.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM reuse u WHERE NOT (u.`_nvf = u.`_ovf AND u.`_end IS NOT DISTINCT FROM u.`_ovt)"));
	/* superseded versions */
	appendStringInfoString(&buf, X(" UNION ALL SELECT " WT_ACT_REMOVE ", " WT_ORIGIN_COMPLEX ", false, v.`_ovf, v.`_sk,"
								   " v.`_ovf, v.`_ovt, v.`_ovt IS NULL, false"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "v.");
	scd2_append_null_cols(&buf, cfg->tracked, cfg->ntracked);
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
	scd2_append_more_cols(&buf, cfg->other, cfg->nother, "n.");
	appendStringInfo(&buf, X(" FROM (SELECT r.*, pg_catalog.row_number() OVER (%s ORDER BY r.`_t) AS `_nth"
							 " FROM runs r WHERE r.`_present AND NOT EXISTS (SELECT 1 FROM reuse u WHERE "), partition_by(cfg, "r"));
	scd2_append_key_join(&buf, cfg, "u", "r");
	appendStringInfoString(&buf, X(" AND u.`_run = r.`_run)) n"));
	return buf.data;
}

/* The staged keys and their earliest instants, for the memory's reads. */
static char *
sql_keys(const Scd2Config *cfg, bool subset)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO " ARR_KEYS_TABLE " (business_key, since) SELECT %s, %s FROM "),
					 scd2_key_json_sql(cfg, "s"), scd2_changelog_encode_sql(cfg->vf.typid, X("pg_catalog.min(s.`_t)")));
	append_staged(&buf, cfg, subset);
	appendStringInfoString(&buf, " s GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
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
	return psprintf(X("INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state) %s"
					  " FROM " TL_TABLE " t WHERE NOT t.`_keep"),
					remembered_select(cfg, "t", X("t.`_t"), X("t.`_present")));
}

/*
 * "SELECT key, instant, present, state" of an event to remember (alias,
 * its instant and presence): the state of a present one is its tracked
 * and other columns' text forms, as jsonb.
 */
static char *
remembered_select(const Scd2Config *cfg, const char *alias, const char *instant, const char *present)
{
	return psprintf("SELECT %s, %s, %s, CASE WHEN %s THEN %s END",
					scd2_key_json_sql(cfg, alias), scd2_changelog_encode_sql(cfg->vf.typid, instant),
					present, present, state_json_sql(cfg, alias, NULL));
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
	const Scd2Column *groups[2] = {cfg->tracked, cfg->other};
	int			counts[2] = {cfg->ntracked, cfg->nother};
	int			instant_col = instant ? scd2_instant_column(cfg) : -1;

	initStringInfo(&state);
	for (int g = 0; g < 2; g++)
		for (int i = 0; i < counts[g]; i++)
		{
			char	   *value = (g == 1 && i == instant_col) ? pstrdup(instant)
				: psprintf("%s.%s", alias, groups[g][i].ident);

			appendStringInfo(&state, "%s%s, CASE WHEN pg_catalog.num_nonnulls(%s) OPERATOR(pg_catalog.=) 1"
							 " THEN pg_catalog.format('%%s', %s) END",
							 state.len ? ", " : "", quote_literal_cstr(groups[g][i].name), value, value);
		}
	return psprintf("pg_catalog.jsonb_build_object(%s)", state.data);
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
							 " FROM (SELECT "), cfg->sk, scd2_changelog_encode_sql(cfg->vf.typid, X("km.`_m")));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, X(", pg_catalog.min(s.`_t) AS `_m FROM "));
	append_staged(&buf, cfg, subset);
	appendStringInfoString(&buf, " s GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
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
					  " INSERT INTO " ARR_REMEMBER_TABLE " (business_key, effective, present, state) %s FROM m"),
					remembered_select(cfg, "m", X("m.`_vf"), X("m.`_cur")));
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
	scd2_exec_work(scd2_sql_create_work_table(cfg, &wt_timeline), SPI_OK_UTILITY, "creating the arrival timeline table");
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
	scd2_load_exec(st, sql_conflict(cfg), SPI_OK_SELECT, "checking for conflicting events");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("ambiguous changes for key %s at %s", scd2_spi_text(0, 1), scd2_spi_text(0, 2)),
				 errdetail("Order-free dimension %s would have two states of this key at one instant: staging table %s, an existing version or a remembered event differ in tracked columns there, and none is a delete.",
						   cfg->dim_name, cfg->stg_name),
				 errhint("Keep one state per key and effective time (a delete at that instant wins), or give the rows different effective times; nothing was loaded.")));
	scd2_load_exec(st, sql_timeline(cfg), SPI_OK_INSERT, "ordering the keys' events");
	scd2_load_exec(st, sql_changes(cfg), SPI_OK_INSERT, "building the changes of order-free keys");
	{
		int			nest = NewGUCNestLevel();

		scd2_pin_text_forms();
		scd2_load_exec(st, sql_remember(cfg), SPI_OK_INSERT, "computing the events to remember");
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
		if (cfg->sk && st->citus == SCD2_CITUS_NONE)
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
			scd2_load_exec(st, sql_remember_simple(cfg), SPI_OK_INSERT, "remembering the unchanged rows");
			AtEOXact_GUC(true, nest);
		}
		if (complex_keys > 0)
			recompute(st, true, cc);
	}
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
