/*
 * complete.c -- step 4 of a load, first: the inferred members the batch
 * brings the real values of are completed in place (issue 49; register's
 * inferred_column, scd2.infer_members in infer.c).
 *
 * A key whose current version is flagged inferred, and whose earliest
 * staging row (by effective time) is not a delete marker, has that
 * version overwritten with the row: every staged tracked, Type 1 and
 * copied column, the flag false, the surrogate key kept.  Its valid_from
 * stays, or moves back to the row's time when the row is effective
 * earlier -- never before the end of a version of the key that precedes
 * it, so no two versions overlap.  One UPDATE, as the dimension's owner
 * in the load's security-restricted operation, with the load's snapshot;
 * the statements that follow (the classification, the MERGE) read the
 * dimension with their command id advanced past it, and see the completed
 * version as the key's current one: the row that completed it is then
 * unchanged against it, the key's later rows are applied as usual.
 *
 * The change log keeps each completed version whole as it was (old_row,
 * action 'complete', at its valid_from after the completion), which
 * scd2.revert writes back (history/revert.c), as an order-free load's
 * 'extend' rows.  For scd2.merge's change feed each completed version
 * also goes to the completion table (CMP_TABLE, worktable.h), which the
 * feed shows as action 'complete' (write.c).  Not on Citus
 * (scd2.infer_members refuses a Citus dimension, so none has an inferred
 * member of scd2's making).  A dry run writes nothing to the dimension and
 * counts the versions it would complete (for the feed: puts them in the
 * completion table as the completion would leave them).
 */
#include "scd2.h"

#include "executor/spi.h"
#include "utils/guc.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

/* SET list of the staged columns of one group: "d.col = c.col, ...". */
static void
append_set(StringInfo buf, const Scd2Column *cols, int n)
{
	for (int i = 0; i < n; i++)
		if (!cols[i].carried)
			appendStringInfo(buf, "%s = c.%s, ", cols[i].ident, cols[i].ident);
}

/*
 * The completions: the staged keys' earliest rows (present) joined to
 * their current inferred version, with what the UPDATE and the change log
 * need: the version's valid_from (_ovf), its whole image (_old), its
 * surrogate key (_osk), and the end of the key's latest earlier version
 * (_pvt), below which valid_from never moves.
 */
static void
append_completions(StringInfo buf, const Scd2Config *cfg, bool image)
{
	appendStringInfoString(buf, "SELECT r.*, ");
	appendStringInfo(buf, X("d.%s AS `_ovf, %s AS `_old, %s AS `_osk, "
							"(SELECT pg_catalog.max(h.%s) FROM %s h WHERE "),
					 cfg->vf.ident,
					 image ? scd2_changelog_row_json_sql(cfg->dim_oid, "d") : "NULL::pg_catalog.jsonb",
					 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL::pg_catalog.int8",
					 cfg->vt.ident, cfg->dim_sql);
	scd2_append_key_join(buf, cfg, "h", "d");
	appendStringInfo(buf, X(" AND h.%s < d.%s) AS `_pvt FROM (SELECT DISTINCT ON ("),
					 cfg->vf.ident, cfg->vf.ident);
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(buf, ") s.* FROM ");
	scd2_append_all_staging(buf, cfg);
	appendStringInfoString(buf, " s ORDER BY ");
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s.");
	/* at one instant a delete marker first: it wins (the load closes the version) */
	appendStringInfo(buf, X(", s.`_t, s.`_present) r JOIN %s d ON "), cfg->dim_sql);
	scd2_append_key_join(buf, cfg, "d", "r");
	appendStringInfo(buf, X(" AND %s AND d.%s IS TRUE WHERE r.`_present"),
					 scd2_current_pred(cfg, "d"), cfg->inferred);
}

/*
 * The valid_from of a completion (alias c) of a version that starts at
 * ovf: the version's, or the record's earlier time, but never before the
 * end of the key's earlier version.
 */
static char *
completed_vf(const Scd2Config *cfg, const char *ovf)
{
	return psprintf(X("CASE WHEN c.`_t < %s THEN CASE WHEN c.`_pvt > c.`_t THEN c.`_pvt ELSE c.`_t END"
					  " ELSE %s END"), ovf, ovf);
}

/*
 * "INSERT INTO <the completion table> (...) SELECT <sk>, <vf>, <vt>, <the
 * key>": one row per completed version for the change feed, from rows
 * under alias (its key columns of the dimension's types); the caller
 * appends the FROM.
 */
static void
append_feed_insert(StringInfo buf, const Scd2Config *cfg, const char *sk, const char *vf,
				   const char *vt, const char *alias)
{
	scd2_append_work_insert(buf, cfg, &scd2_wt_completed, CMP_TABLE, false);
	appendStringInfo(buf, ") SELECT %s, %s, %s, ", sk, vf, vt);
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, psprintf("%s.", alias));
}

/*
 * The UPDATE; with log its change-log rows into the log's work table:
 * 'complete', the surrogate key, the key, valid_from after the completion,
 * valid_to as left (current: NULL), the before-image's valid_to and
 * is_current, and old_row, the whole version as it was; with feed the
 * completed versions into the completion table.  Its result: the rows
 * inserted into the completion table, else into the log, else a count.
 */
static char *
sql_complete(const Scd2Config *cfg, bool log, bool feed)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "WITH c AS (");
	append_completions(&buf, cfg, log);
	appendStringInfo(&buf, "), u AS (UPDATE %s d SET ", cfg->dim_sql);
	append_set(&buf, cfg->tracked, cfg->ntracked);
	append_set(&buf, cfg->type1, cfg->ntype1);
	append_set(&buf, cfg->other, cfg->nother);
	appendStringInfo(&buf, X("%s = false, %s = %s FROM c WHERE "),
					 cfg->inferred, cfg->vf.ident,
					 completed_vf(cfg, psprintf("d.%s", cfg->vf.ident)));
	scd2_append_key_join(&buf, cfg, "d", "c");
	appendStringInfo(&buf, X(" AND d.%s %s c.`_ovf RETURNING c.*, d.%s AS `_nvf, d.%s AS `_nvt)"),
					 cfg->vf.ident, cfg->vf.eqop_sql, cfg->vf.ident, cfg->vt.ident);
	if (!log && !feed)
	{
		appendStringInfoString(&buf, " SELECT pg_catalog.count(*) FROM u");
		return buf.data;
	}
	if (log)
	{
		/* a statement of its own in the WITH when the feed's insert follows */
		appendStringInfoString(&buf, feed ? ", l AS (" : " ");
		appendStringInfo(&buf,
						 X("INSERT INTO " LOG_TABLE " (" LOG_COLS_ALL ")"
						   " SELECT " WT_ACT_COMPLETE ", false, u.`_osk, %s, %s, NULL::pg_catalog.timestamptz,"
						   " %s, %s, NULL::pg_catalog.jsonb, u.`_old FROM u"),
						 scd2_key_json_sql(cfg, "u"),
						 scd2_changelog_encode_sql(cfg->vf.typid, X("u.`_nvf")),
						 scd2_changelog_encode_sql(cfg->vt.typid, X("u.`_nvt")),
						 cfg->is_current ? "true" : "NULL::pg_catalog.bool");
		if (!feed)
			return buf.data;
		appendStringInfoString(&buf, ")");
	}
	appendStringInfoString(&buf, " ");
	append_feed_insert(&buf, cfg, X("u.`_osk"), X("u.`_nvf"), X("u.`_nvt"), "u");
	appendStringInfoString(&buf, " FROM u");
	return buf.data;
}

/*
 * A dry run's completions for the change feed: each version as the
 * completion would leave it, current (valid_to NULL, as the change table
 * has an open version's).
 */
static char *
sql_dry_run_feed(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_feed_insert(&buf, cfg, X("c.`_osk"), completed_vf(cfg, X("c.`_ovf")),
					   psprintf("CAST(NULL AS %s)", cfg->vt.type_sql), "c");
	appendStringInfoString(&buf, " FROM (");
	append_completions(&buf, cfg, false);
	appendStringInfoString(&buf, ") c");
	return buf.data;
}

/*
 * Step 4, first (driver.c): complete the inferred versions the batch
 * brings values for; returns how many (metric completed).  Nothing on
 * a dimension without inferred_column, or on Citus.
 */
int64
scd2_complete_inferred(LoadState *st, bool dry_run)
{
	const Scd2Config *cfg = st->cfg;
	int			nest;
	int64		n;

	if (cfg->inferred == NULL || st->citus != 0)
		return 0;
	if (dry_run && st->feed_completed)
	{
		scd2_load_exec(st, sql_dry_run_feed(cfg), SPI_OK_INSERT, "counting the inferred members to complete");
		return (int64) SPI_processed;
	}
	if (dry_run)
	{
		StringInfoData buf;

		initStringInfo(&buf);
		appendStringInfoString(&buf, "SELECT pg_catalog.count(*) FROM (");
		append_completions(&buf, cfg, false);
		appendStringInfoString(&buf, ") c");
		scd2_load_exec(st, buf.data, SPI_OK_SELECT, "counting the inferred members to complete");
		return scd2_spi_int8(0, 1);
	}
	nest = NewGUCNestLevel();
	/* the before-images' text forms, as the change log keeps values */
	scd2_pin_text_forms();
	if (st->log_prepared || st->feed_completed)
	{
		scd2_load_exec(st, sql_complete(cfg, st->log_prepared, st->feed_completed), SPI_OK_INSERT,
					   "completing inferred members");
		n = (int64) SPI_processed;
	}
	else
	{
		scd2_load_exec(st, sql_complete(cfg, false, false), SPI_OK_SELECT, "completing inferred members");
		n = scd2_spi_int8(0, 1);
	}
	AtEOXact_GUC(true, nest);
	return n;
}
