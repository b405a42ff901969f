/*
 * stream.c -- a change stream's events folded into one state per instant,
 * for an order-free load that remembers every event (cfg->stream:
 * register's sequence_column, ignore_null_updates, or Type 1 columns;
 * docs/SEMANTICS.md, "Change streams").  arrival.c collects the events of
 * every recomputed key into its event table and calls these; the rest of
 * its recompute (the runs, the changes, the memory) is the same for every
 * order-free load.
 *
 * The events that count at an instant are the raw ones, remembered or
 * staged; an existing version (or the gap after one) counts only where no
 * raw event is -- its state is the fold of the raw events the memory
 * already had, or, for history loaded before the dimension was a stream,
 * the only record of that instant.  They are folded in order of instant,
 * sequence (none first), presence (a delete last: at one instant without
 * a sequence the delete wins) and source (a remembered event after a
 * staged one, so an event sent again decides nothing new):
 *   - a delete, or an existing version's state, starts the fold afresh;
 *   - a present event lays its values over the state in force, except
 *     that in a column of ignore_null_updates its NULL keeps the value
 *     in force (a first event's NULL stays NULL: there is none).
 * The state of an instant is the fold after its last event.  Two events of
 * one key at one instant and one sequence (or, without a sequence, two
 * present ones with no delete there) must be the same in their tracked and
 * Type 1 columns, and with a sequence a delete and a present event there
 * are two different events: else the load fails naming the key.
 *
 * Everything here is SQL text run by the load as the dimension's owner
 * (load/runner.c).
 */
#include "scd2.h"

#include "common/common.h"
#include "load/arrival.h"

static const WorkColumn timeline_cols[] = {
	{"`_t", WT_VF},
	{"`_present", WT_BOOL},
	{"`_keep", WT_BOOL},
	{"`_run", WT_INT8},
	{"`_applied", WT_BOOL},
	{"`_hadver", WT_BOOL},
};

const WorkTable scd2_wt_arrival_timeline = {TL_TABLE, timeline_cols, lengthof(timeline_cols), true};

/* The fold's order within a key (ascending; the last event wins). */
#define FOLD_ORDER "e.`_t, e.`_q NULLS FIRST, e.`_present DESC, e.`_src DESC"
/* The same, reversed: the instant's last event first. */
#define LAST_FIRST "e.`_q DESC NULLS LAST, e.`_present, e.`_src"

/*
 * The events that count (alias e): the raw ones, and an existing
 * version's or gap's where no raw event is; `_hadv: an existing version
 * starts at the instant.
 */
static char *
counting_events(const Scd2Config *cfg)
{
	return psprintf(X("(SELECT e0.* FROM (SELECT e.*, pg_catalog.bool_or(e.`_src >= " EV_REMEMBERED ") OVER wi AS `_hasraw,"
					  " pg_catalog.bool_or(e.`_src = " EV_VERSION ") OVER wi AS `_hadv"
					  " FROM " EV_TABLE " e WINDOW wi AS (%s, e.`_t)) e0"
					  " WHERE e0.`_src >= " EV_REMEMBERED " OR NOT e0.`_hasraw)"),
					scd2_partition_by(cfg, "e"));
}

/*
 * Two different events of one key at one instant and sequence: the key
 * and the instant (a row), or none.
 */
char *
scd2_stream_sql_conflict(const Scd2Config *cfg)
{
	StringInfoData buf;
	char	   *wq = psprintf(X("%s, e.`_t, e.`_q"), scd2_partition_by(cfg, "e"));

	initStringInfo(&buf);
	appendStringInfoString(&buf, X("SELECT "));
	appendStringInfo(&buf, X("%s, CAST(c.`_t AS pg_catalog.text) FROM (SELECT e.*,"
							 " pg_catalog.bool_or(NOT e.`_present) OVER wq AS `_gone,"
							 " pg_catalog.bool_or(e.`_present) OVER wq AS `_some"),
					 scd2_key_json_sql(cfg, "c"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.first_value(e.%s) OVER wo AS `_f%d"), cfg->tracked[i].ident, i + 1);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", pg_catalog.first_value(e.%s) OVER wo AS `_y%d"), cfg->type1[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM %s e WINDOW wq AS (%s), wo AS (%s ORDER BY NOT e.`_present, e.`_src)) c WHERE "),
					 counting_events(cfg), wq, wq);
	if (cfg->seq_col)
		appendStringInfoString(&buf, X("(c.`_gone AND c.`_some) OR "));
	appendStringInfoString(&buf, X("(c.`_present AND NOT c.`_gone AND NOT ("));
	scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "f");
	if (cfg->ntype1 > 0)
	{
		appendStringInfoString(&buf, " AND ");
		scd2_append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "c.", "c.", "y");
	}
	appendStringInfoString(&buf, ")) LIMIT 1");
	return buf.data;
}

/* The payload columns as the fold leaves them (alias e), after a comma. */
static void
append_folded(StringInfo buf, const Scd2Config *cfg)
{
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};
	int			n = 0;

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++, n++)
		{
			if (groups[g][i].ignore_null)
				appendStringInfo(buf, X(", CASE WHEN e.`_present THEN e.`_v%d END AS %s"), n + 1, groups[g][i].ident);
			else
				appendStringInfo(buf, X(", CASE WHEN e.`_present THEN e.%s END AS %s"), groups[g][i].ident,
								 groups[g][i].ident);
		}
}

/*
 * The fold's windows (over e, the counting events with `_g, the fold's
 * segment): for each column of ignore_null_updates, `_n<i> the events
 * so far with a value there, and `_v<i> the value of the first of them
 * (the latest value: `_n<i> counts up at each).
 */
static void
append_fold_columns(StringInfo buf, const Scd2Config *cfg, bool values)
{
	const Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};
	int			n = 0;
	char	   *part = scd2_partition_by(cfg, "e");

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++, n++)
		{
			if (!groups[g][i].ignore_null)
				continue;
			if (values)
				appendStringInfo(buf, X(", pg_catalog.first_value(e.%s) OVER (%s, e.`_g, e.`_n%d ORDER BY " FOLD_ORDER ") AS `_v%d"),
								 groups[g][i].ident, part, n + 1, n + 1);
			else
				appendStringInfo(buf, X(", pg_catalog.count(e.%s) OVER (%s, e.`_g ORDER BY " FOLD_ORDER " ROWS UNBOUNDED PRECEDING) AS `_n%d"),
								 groups[g][i].ident, part, n + 1);
		}
}

/*
 * One row per instant (its last event after the fold), then the collapse
 * walk over them, into the timeline: the same columns as arrival.c's
 * timeline of an order-free load without a stream.
 */
char *
scd2_stream_sql_timeline(const Scd2Config *cfg)
{
	StringInfoData buf;
	char	   *part = scd2_partition_by(cfg, "e");

	initStringInfo(&buf);
	scd2_append_work_insert(&buf, cfg, &scd2_wt_arrival_timeline, TL_TABLE, true);
	/* e1: the segments; e2: the counts; e3: the folded values, the last event of each instant */
	appendStringInfo(&buf, X(") WITH e1 AS (SELECT e.*, pg_catalog.sum(CASE WHEN e.`_src < " EV_REMEMBERED
							 " OR NOT e.`_present THEN 1 ELSE 0 END) OVER (%s ORDER BY " FOLD_ORDER
							 " ROWS UNBOUNDED PRECEDING) AS `_g FROM %s e),"
							 " e2 AS (SELECT e.*"), part, counting_events(cfg));
	append_fold_columns(&buf, cfg, false);
	appendStringInfoString(&buf, X(" FROM e1 e), e3 AS (SELECT e.*"));
	append_fold_columns(&buf, cfg, true);
	appendStringInfo(&buf, X(", pg_catalog.row_number() OVER (%s, e.`_t ORDER BY " LAST_FIRST ") AS `_last FROM e2 e),"
							 " i AS (SELECT e.`_t, e.`_present AS `_live, e.`_src = " EV_STAGED " AS `_stg, e.`_hadv AS `_hadver"),
					 part);
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "e.");
	append_folded(&buf, cfg);
	appendStringInfoString(&buf, X(" FROM e3 e WHERE e.`_last = 1), "));
	appendStringInfoString(&buf, X("c AS (SELECT i.*, pg_catalog.lag(i.`_live) OVER w AS `_pp"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.lag(i.%s) OVER w AS `_p%d"), cfg->tracked[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM i WINDOW w AS (%s ORDER BY i.`_t)), "), scd2_partition_by(cfg, "i"));
	appendStringInfoString(&buf, X("k AS (SELECT c.*, NOT (c.`_live = COALESCE(c.`_pp, false) AND (NOT c.`_live OR ("));
	scd2_append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "p");
	appendStringInfo(&buf, X("))) AS `_keep FROM c) SELECT k.`_t, k.`_live, k.`_keep,"
							 " pg_catalog.sum(k.`_keep::pg_catalog.int4) OVER (%s ORDER BY k.`_t ROWS UNBOUNDED PRECEDING),"
							 " k.`_stg, k.`_hadver"), scd2_partition_by(cfg, "k"));
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "k.");
	scd2_append_payload_cols(&buf, cfg, "k.");
	appendStringInfoString(&buf, " FROM k");
	return buf.data;
}
