/*
 * first_load.c -- the first load into an empty dimension.
 *
 * When the dimension has no rows (checked under the load's SHARE ROW
 * EXCLUSIVE lock, which no writer of the table gets past) and every
 * staging key has one row, every staging row is a new key: there is no
 * current version to probe, nothing to close, no history to split.  The
 * load then skips the classification and the change table and writes the
 * rows with one INSERT ... SELECT in business-key order.  With at least
 * SCD2_FIRST_LOAD_REBUILD_MIN_ROWS rows (and scd2.first_load_rebuild_indexes
 * on) the indexes scd2.register created (the registry's created_indexes:
 * the current-row and as-of indexes) are dropped before the insert and
 * built again afterwards, with the same definitions, names and tablespace:
 * measured on PostgreSQL 15 at its default settings, keeping an index
 * up to date row by row costs about 2.2 s per index per million rows,
 * building it afterwards 0.5-1.5 s.  DROP INDEX takes an ACCESS EXCLUSIVE
 * lock on the dimension until the load's transaction ends (README: "The
 * first load").
 *
 * Same result as the general path: the same rows (a row whose delete
 * marker is set opens nothing and counts as unchanged), metrics, audit
 * row and change feed.  The change log is the run's header alone, which
 * says that the run inserted every row the dimension has right after it
 * (history/changelog.c; one insert row per version, written from the dimension
 * after the insert, while the extension is still at 0.3); revert,
 * scd2.changes and dimension_at(..., known_at) give what the general
 * path's change log would.
 *
 * Not taken (the general path runs): a dry run, a key with several
 * staging rows, a dimension that is not a plain table, has rules, row
 * security, or a user trigger that fires on INSERT or UPDATE (a MERGE
 * fires UPDATE statement triggers too), and any database with Citus.
 *
 * Whether a key has several staging rows is a sort of every key (the
 * validation's count of distinct keys: at 10M rows and work_mem 4MB a
 * spilled sort of several seconds).  When every staging row is written
 * (no delete column) and the dimension has the unique index on its
 * business key that scd2.register made, the load leaves that check to the
 * index, which it keeps up to date or builds again anyway, as the floor
 * of a first load does: a key with several rows fails it, and the driver
 * (driver.c) rolls the first load back and takes the general path.
 */
#include "scd2.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/guc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "citus/citus.h"

/* Below this many rows the indexes are kept up to date as the rows go in. */
#define SCD2_FIRST_LOAD_REBUILD_MIN_ROWS	10000

/* An index scd2 created, to drop and build again. */
typedef struct FirstLoadIndex
{
	char	   *qualified;		/* "schema"."name" */
	char	   *definition;		/* pg_get_indexdef */
	char	   *tablespace;		/* its tablespace, "" for the database's */
	bool		unique_key;		/* unique on exactly the business key */
} FirstLoadIndex;

/*
 * Whether the dimension's own definition lets an INSERT stand in for the
 * MERGE: a plain table without rules, row security or user triggers that
 * would fire differently.
 */
static bool
plain_dimension(Oid dim_oid)
{
	Relation	rel = table_open(dim_oid, NoLock);
	bool		plain = rel->rd_rel->relkind == RELKIND_RELATION &&
		!rel->rd_rel->relhasrules && !rel->rd_rel->relrowsecurity;
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; plain && td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];

		/* the foreign keys' checks fire alike for an INSERT and a MERGE */
		if (tg->tgenabled != TRIGGER_DISABLED && !tg->tgisinternal &&
			(TRIGGER_FOR_INSERT(tg->tgtype) || TRIGGER_FOR_UPDATE(tg->tgtype)))
			plain = false;
	}
	table_close(rel, NoLock);
	return plain;
}

/* Does the dimension have a row the given snapshot sees? */
static bool
has_rows(LoadState *st, Snapshot snap)
{
	Snapshot	save = st->snap;

	st->snap = snap;
	scd2_load_exec(st, psprintf("SELECT 1 FROM %s LIMIT 1", st->cfg->dim_sql),
				   SPI_OK_SELECT, "checking whether the dimension is empty");
	st->snap = save;
	return SPI_processed > 0;
}

/*
 * Whether this load is a first load (see the file's comment), before its
 * staging rows are validated: the caller checks after that there are
 * rows, and that no key has several (or leaves that to the index,
 * scd2_first_load_index_finds_repeats).  The dimension is empty for the load's snapshot and for the latest one (in a
 * REPEATABLE READ transaction the load's snapshot can be older than the
 * lock), and no writer can add a row until the load's transaction ends.
 */
bool
scd2_first_load_applies(LoadState *st, bool dry_run)
{
	Snapshot	latest;
	bool		empty;

	if (dry_run || scd2_citus_installed() || !plain_dimension(st->cfg->dim_oid))
		return false;
	if (has_rows(st, st->snap))
		return false;
	latest = RegisterSnapshot(GetLatestSnapshot());
	empty = !has_rows(st, latest);
	UnregisterSnapshot(latest);
	return empty;
}

/* The indexes scd2.register created on the dimension, as they are now. */
static FirstLoadIndex *
created_indexes(LoadState *st, int *n)
{
	FirstLoadIndex *idx;
	Oid			types[1] = {TEXTARRAYOID};

	/*
	 * $2 ($1 is the load's effective_at): the registry's created_indexes,
	 * from the registration the load read
	 */
	Datum		values[1] = {st->cfg->reg->created_indexes != (Datum) 0 ? st->cfg->reg->created_indexes :
	PointerGetDatum(construct_empty_array(TEXTOID))};
	bool		isnull;

	scd2_load_exec_args(st, psprintf("SELECT pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
								" OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
								" pg_catalog.pg_get_indexdef(c.oid), COALESCE(t.spcname, ''),"
								" i.indisunique AND i.indnkeyatts OPERATOR(pg_catalog.=) %d"
								" FROM pg_catalog.pg_index i"
								" JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) i.indexrelid"
								" JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
								" LEFT JOIN pg_catalog.pg_tablespace t ON t.oid OPERATOR(pg_catalog.=) c.reltablespace"
								" WHERE i.indrelid OPERATOR(pg_catalog.=) %u::pg_catalog.oid"
								" AND c.relname OPERATOR(pg_catalog.=) ANY ($2)"
								" AND i.indisvalid AND i.indisready AND NOT i.indisprimary AND NOT i.indisexclusion"
								" AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint k"
								"   WHERE k.conindid OPERATOR(pg_catalog.=) c.oid)"
								" ORDER BY c.relname",
								st->cfg->nkeys, st->cfg->dim_oid),
						1, types, values, SPI_OK_SELECT, "finding the indexes scd2 created");
	*n = (int) SPI_processed;
	idx = palloc0(sizeof(FirstLoadIndex) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		idx[i].qualified = scd2_spi_text(i, 1);
		idx[i].definition = scd2_spi_text(i, 2);
		idx[i].tablespace = scd2_spi_text(i, 3);
		idx[i].unique_key = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 4, &isnull));
	}
	return idx;
}

/*
 * Whether a key with several staging rows makes the first load fail with a
 * unique violation (see the file's comment): every staging row is written,
 * and scd2.register made a unique index on exactly the business key (the
 * current-row index; its predicate holds for every row a first load
 * writes).
 */
bool
scd2_first_load_index_finds_repeats(LoadState *st)
{
	FirstLoadIndex *idx;
	int			n;

	if (st->cfg->del_col != NULL)
		return false;
	idx = created_indexes(st, &n);
	for (int i = 0; i < n; i++)
		if (idx[i].unique_key)
			return true;
	return false;
}

/* The rows, in business-key order: INSERT ... SELECT from the staging table. */
static char *
sql_insert(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "INSERT INTO %s (", cfg->dim_sql);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_payload_cols(&buf, cfg, NULL);
	appendStringInfo(&buf, ", %s, %s", cfg->vf.ident, cfg->vt.ident);
	if (cfg->is_current)
		appendStringInfo(&buf, ", %s", cfg->is_current);
	appendStringInfoString(&buf, ") SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	scd2_append_payload_cols(&buf, cfg, "s.");
	appendStringInfo(&buf, X(", s.`_t, %s"),
					 scd2_stored_vt(cfg, psprintf("CAST(NULL AS %s)", cfg->vt.type_sql)));
	if (cfg->is_current)
		appendStringInfoString(&buf, ", true");
	appendStringInfoString(&buf, " FROM ");
	scd2_append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, X(" s WHERE s.`_present ORDER BY "));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	return buf.data;
}

/* The change feed: every row of the dimension, in the general path's order. */
static char *
sql_feed(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT " WT_ACT_INSERT ", %s, %s, CAST(d.%s AS pg_catalog.timestamptz),"
					 " CAST(d.%s AS pg_catalog.timestamptz) FROM %s d ORDER BY ",
					 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL::pg_catalog.int8",
					 scd2_key_json_sql(cfg, "d"), cfg->vf.ident, cfg->vt.ident, cfg->dim_sql);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	appendStringInfo(&buf, ", d.%s", cfg->vf.ident);
	return buf.data;
}

/* Build the indexes again, each in the tablespace it was in. */
static void
build_indexes(LoadState *st, const FirstLoadIndex *idx, int n)
{
	for (int i = 0; i < n; i++)
	{
		int			nest = NewGUCNestLevel();

		scd2_set_local("default_tablespace", idx[i].tablespace);
		scd2_load_exec(st, idx[i].definition, SPI_OK_UTILITY, "building an index again");
		AtEOXact_GUC(true, nest);
	}
}

/*
 * The first load: the rows, the indexes, the change log, the metrics and
 * (store != NULL) the change feed.
 */
void
scd2_first_load(LoadState *st, Scd2Metrics *m, Tuplestorestate *store, TupleDesc desc)
{
	const Scd2Config *cfg = st->cfg;
	FirstLoadIndex *idx = NULL;
	int			nidx = 0;
	char	   *sql;

	if (scd2_first_load_rebuild_indexes && st->source_rows >= SCD2_FIRST_LOAD_REBUILD_MIN_ROWS)
		idx = created_indexes(st, &nidx);
	for (int i = 0; i < nidx; i++)
		scd2_load_exec(st, psprintf("DROP INDEX %s", idx[i].qualified), SPI_OK_UTILITY,
					   "dropping an index for the first load");

	sql = sql_insert(cfg);
	/* the rows it inserts, in the load's progress */
	scd2_progress_count_statement(sql, true);
	scd2_load_exec(st, sql, SPI_OK_INSERT, "writing the dimension");
	scd2_progress_count_done();
	m->inserted = (int64) SPI_processed;
	m->unchanged = m->source_rows - m->inserted;

	build_indexes(st, idx, nidx);

	/* the header alone (history/changelog.c); one row per version under a 0.3 change log */
	if (scd2_changelog_compact_first_load())
		st->run_id = scd2_changelog_write_first_load(cfg, st->log_prepared, m->inserted);
	else
		scd2_load_record_change_log(st, scd2_changelog_sql_first_load(cfg), false);

	if (store != NULL)
	{
		scd2_load_exec(st, sql_feed(cfg), SPI_OK_SELECT, "reading the change feed");
		scd2_store_feed(store, desc);
	}
}
