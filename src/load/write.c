/*
 * write.c -- step 5 and 6 of a load: the change counts, the ONE MERGE
 * that writes the change set (its processed count must equal the
 * classified writes), and the change feed (MERGE ... RETURNING on 17+,
 * read back from the change table before).
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/tuplestore.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

/* ---------- the write ---------- */

/*
 * The COUNTED metrics (metrics.h), each named as its metric, then the
 * fast-path rows that count as applied and every change row.
 */
#define COUNT_SQL_SET(name, how)
#define COUNT_SQL_COUNTED(name, how) \
	appendStringInfoString(&buf, "pg_catalog.count(*) FILTER (WHERE " how ") AS " #name ", ");
#define COUNT_SQL_DERIVED(name, how)
#define COUNT_SQL(name, words, shown, source, how) COUNT_SQL_##source(name, how)

static char *
sql_change_counts(const Scd2Config *cfg, const char *chg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	SCD2_METRICS(COUNT_SQL)
	appendStringInfoString(&buf, "pg_catalog.count(*) FILTER (WHERE `_origin = " WT_ORIGIN_FAST " AND `_counts)"
						   " AS fast_counted, pg_catalog.count(*) AS total FROM ");
	return psprintf("%s%s", X(buf.data), chg);
}

/*
 * The one MERGE.  Update copies match their target by business key and
 * valid_from (the as-of index, unique); insert copies carry a NULL target
 * and can never match.  An update copy that found no target is not
 * inserted: the processed count then falls short and the load fails.
 *
 * Order matters: the unique partial index on current rows is checked row
 * by row and cannot be deferred, so a key's old current row must be closed
 * before its new current version is inserted.  The source is every update
 * copy, then every insert copy (UNION ALL: an Append runs its inputs in
 * order, with no sort), and the caller runs the statement with only nested
 * loops allowed, which keep the (outer) source order.  The physical order
 * of the change table is no guide: its heap reuses free space.
 */
static char *
scd2_sql_merge(const Scd2Config *cfg, const char *chg, Oid sk_seq, bool moves)
{
	StringInfoData buf;

	initStringInfo(&buf);
	if (moves)
	{
		/*
		 * An order-free load that recomputed keys (arrival.c) also
		 * removes superseded versions and moves a version's valid_from:
		 * the removals come first, so that no row meets one the load
		 * removes in the unique indexes.
		 */
		appendStringInfo(&buf, X("MERGE INTO %s t USING (SELECT * FROM %s WHERE `_action = " WT_ACT_REMOVE
								 " UNION ALL SELECT * FROM %s WHERE `_tvf IS NOT NULL AND `_action <> " WT_ACT_REMOVE
								 " UNION ALL SELECT * FROM %s WHERE `_tvf IS NULL) s ON "),
						 cfg->dim_sql, chg, chg, chg);
		scd2_append_key_join(&buf, cfg, "t", "s");
		appendStringInfo(&buf, X(" AND t.%s %s s.`_tvf WHEN MATCHED AND s.`_action = " WT_ACT_REMOVE
								 " THEN DELETE WHEN MATCHED THEN UPDATE SET "),
						 cfg->vf.ident, cfg->vf.eqop_sql);
	}
	else
	{
		appendStringInfo(&buf, X("MERGE INTO %s t USING (SELECT * FROM %s WHERE `_tvf IS NOT NULL"
								 " UNION ALL SELECT * FROM %s WHERE `_tvf IS NULL) s ON "),
						 cfg->dim_sql, chg, chg);
		scd2_append_key_join(&buf, cfg, "t", "s");
		appendStringInfo(&buf, X(" AND t.%s %s s.`_tvf WHEN MATCHED THEN UPDATE SET "),
						 cfg->vf.ident, cfg->vf.eqop_sql);
	}
	scd2_append_update_set(&buf, cfg, moves);
	appendStringInfoString(&buf, X(" WHEN NOT MATCHED AND s.`_tvf IS NULL THEN INSERT "));
	/* surrogate keys from their sequence, some drawn already (batch_log.c) */
	scd2_append_insert_cols(&buf, cfg, sk_seq);
	appendStringInfoString(&buf, " VALUES (");
	scd2_append_insert_values(&buf, cfg, sk_seq);
	appendStringInfoString(&buf, ")");
	return buf.data;
}

/*
 * SELECT <the change feed> FROM <from> ORDER BY <its order>: one row per
 * dimension row written, in key and time order, from rows under the alias
 * c (change-table columns); sk_expr gives the surrogate key.  With
 * completed, also the inferred versions the load completed in place
 * (complete.c, CMP_TABLE): action 'complete', at their valid_from after
 * the completion, each before the other rows of its version (a later row
 * of the batch that closes it, say).
 */
static char *
feed_select(const Scd2Config *cfg, const char *from, const char *sk_expr, bool completed)
{
	StringInfoData buf;

	if (completed)
	{
		StringInfoData rows;

		initStringInfo(&rows);
		appendStringInfo(&rows, X("(SELECT c.`_action, c.`_tvf, c.`_vf, c.`_vt, CAST(%s AS pg_catalog.int8) AS `_fsk, "),
						 sk_expr);
		scd2_append_cols(&rows, cfg->keys, cfg->nkeys, "c.");
		appendStringInfo(&rows, X(" FROM %s UNION ALL SELECT " WT_ACT_COMPLETE ", x.`_vf, x.`_vf, x.`_vt, x.`_sk, "),
						 from);
		scd2_append_cols(&rows, cfg->keys, cfg->nkeys, "x.");
		appendStringInfoString(&rows, " FROM " CMP_TABLE " x) c");
		from = rows.data;
		sk_expr = X("c.`_fsk");
	}
	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT c.`_action, CAST(%s AS pg_catalog.int8), %s,"
					 " CAST(c.`_vf AS pg_catalog.timestamptz), CAST(%s AS pg_catalog.timestamptz)"
					 " FROM %s ORDER BY "),
					 sk_expr, scd2_key_json_sql(cfg, "c"), scd2_stored_vt(cfg, X("c.`_vt")), from);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "c.");
	appendStringInfoString(&buf, X(", c.`_vf, c.`_tvf IS NULL"));
	if (completed)
		appendStringInfoString(&buf, X(", c.`_action <> " WT_ACT_COMPLETE));
	return buf.data;
}

/*
 * The change feed read back after the MERGE: surrogate keys of inserted
 * rows are found by (key, valid_from) -- MERGE has no RETURNING before
 * PostgreSQL 17 (and a dry run writes nothing).
 */
static char *
scd2_sql_feed(const Scd2Config *cfg, const char *chg, bool dry_run, bool completed)
{
	StringInfoData from;

	if (!cfg->sk || dry_run)
		return feed_select(cfg, psprintf("%s c", chg), X("c.`_sk"), completed);
	initStringInfo(&from);
	appendStringInfo(&from, X("%s c LEFT JOIN %s d ON c.`_tvf IS NULL AND "), chg, cfg->dim_sql);
	scd2_append_key_join(&from, cfg, "d", "c");
	appendStringInfo(&from, X(" AND d.%s %s c.`_vf"), cfg->vf.ident, cfg->vf.eqop_sql);
	return feed_select(cfg, from.data, psprintf(X("COALESCE(c.`_sk, d.%s)"), cfg->sk), completed);
}

/*
 * PostgreSQL 17+: the MERGE and the change feed in one statement.  The
 * MERGE returns every change-table row it wrote with the surrogate key of
 * the dimension row as written; the feed is read from that, in the same
 * order and columns as scd2_sql_feed, without a second look at the
 * dimension.  Its row count is the MERGE's processed count, plus with
 * completed the versions the load completed before it.
 */
static char *
scd2_sql_merge_feed(const Scd2Config *cfg, const char *chg, Oid sk_seq, bool moves, bool completed)
{
	const char *sk = cfg->sk ? psprintf("t.%s", cfg->sk) : X("s.`_sk");

	return psprintf(X("WITH `_written AS (%s RETURNING s.*, %s AS `_written_sk) %s"),
					scd2_sql_merge(cfg, chg, sk_seq, moves), sk,
					feed_select(cfg, X("`_written c"), X("c.`_written_sk"), completed));
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

/*
 * Step 5: the one MERGE.  With a feed store on PostgreSQL 17+ the MERGE
 * returns the change feed as it writes (scd2_sql_merge_feed), which goes
 * into the store; returns whether it did.  Its errors, like every
 * statement's of the load, do not show the generated statement
 * (scd2_load_exec).  A unique violation of the current-row index when a
 * BEFORE row trigger could have skipped the close of the old current
 * version, and a processed count other than the classified one,
 * name the triggers.
 */
bool
scd2_write_dimension(LoadState *st, int64 total_changes, Tuplestorestate *store,
					 TupleDesc desc)
{
	const Scd2Config *cfg = st->cfg;
	bool		feed = SCD2_MERGE_RETURNING && store != NULL;
	char	   *triggers = skipping_triggers(cfg->dim_oid);
	MemoryContext cxt = CurrentMemoryContext;
	List	   *current_indexes = NIL;	/* names of the current-row indexes */
	char	   *sql;
	volatile int64 written = 0;

	/* looked up now: after an error the catalogs are not to be read */
	if (triggers != NULL)
		current_indexes = current_row_indexes(cfg->dim_oid);

	sql = feed ? scd2_sql_merge_feed(cfg, CHG_TABLE, st->sk_seq, SCD2_LOAD_MOVES(st), st->feed_completed) :
		scd2_sql_merge(cfg, CHG_TABLE, st->sk_seq, SCD2_LOAD_MOVES(st));
	/* the rows it writes, in the load's progress */
	scd2_progress_count_statement(sql, true);
	PG_TRY();
	{
		/* always nested loops: they keep the source's close-first order */
		scd2_load_exec_probing(st, -1, sql, feed ? SPI_OK_SELECT : SPI_OK_MERGE, "writing the dimension");
		written = (int64) SPI_processed;
		/* the feed's rows of the versions completed before (complete.c) */
		if (feed && st->feed_completed)
			written -= st->completed;
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		char	   *detail;

		MemoryContextSwitchTo(cxt);
		scd2_progress_count_done();
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
	scd2_progress_count_done();

	if (written == total_changes)
	{
		if (feed)
			scd2_store_feed(store, desc);
		return feed;
	}
	if (triggers != NULL)
		report_skipping_trigger(cfg, triggers,
								psprintf("The load classified %lld row(s) to write but wrote %lld.",
										 (long long) total_changes, (long long) written));
	scd2_report_unexpected_writes(cfg, written, total_changes, "partitions");
}

/*
 * The write step processed another number of rows than the classification
 * counted (parts: what else of the dimension to check, "partitions" or
 * "shards").
 */
void
scd2_report_unexpected_writes(const Scd2Config *cfg, int64 written, int64 total_changes,
							  const char *parts)
{
	ereport(ERROR,
			(errcode(ERRCODE_INTERNAL_ERROR),
			 errmsg("load of %s wrote %lld rows but classified %lld",
					cfg->dim_name, (long long) written, (long long) total_changes),
			 errdetail("The dimension changed in a way the load did not expect; everything was rolled back."),
			 errhint("Check for triggers or rules on the dimension (or its %s), then retry the load.", parts)));
}

/* Step 6: copy the change feed into the caller's tuplestore. */
void
scd2_read_feed(LoadState *st, bool dry_run, Tuplestorestate *store, TupleDesc desc)
{
	scd2_load_exec(st, scd2_sql_feed(st->cfg, CHG_TABLE, dry_run, st->feed_completed), SPI_OK_SELECT,
				   "reading the change feed");
	scd2_store_feed(store, desc);
}

/* The named column of the one row SPI returned, as bigint. */
static int64
count_named(const char *name)
{
	int			col = SPI_fnumber(SPI_tuptable->tupdesc, name);

	if (col <= 0)
		elog(ERROR, "scd2: the change counts have no column %s", name);
	return scd2_spi_int8(0, col);
}

#define READ_COUNT_SET(name, how)
#define READ_COUNT_COUNTED(name, how) m->name = count_named(#name);
#define READ_COUNT_DERIVED(name, how)
#define READ_COUNT(name, words, shown, source, how) READ_COUNT_##source(name, how)
#define DERIVE_SET(name, how)
#define DERIVE_COUNTED(name, how)
#define DERIVE_DERIVED(name, how) m->name = (how);
#define DERIVE(name, words, shown, source, how) DERIVE_##source(name, how)

/*
 * Step 5a: the change set's counts into the metrics (the COUNTED and
 * DERIVED ones of metrics.h); returns the number of rows the MERGE must
 * process.
 */
int64
scd2_count_changes(LoadState *st, const Scd2ClassifyCounts *cc, Scd2Metrics *m)
{
	int64		fast_counted;

	scd2_load_exec(st, sql_change_counts(st->cfg, CHG_TABLE), SPI_OK_SELECT, "counting changes");
	SCD2_METRICS(READ_COUNT)
	fast_counted = count_named("fast_counted");
	SCD2_METRICS(DERIVE)
	return count_named("total");
}
