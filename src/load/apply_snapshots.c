/*
 * apply_snapshots.c -- CALL scd2.apply_snapshots(staging, dimension,
 * snapshot_column): a staging table holding many full extracts, each row
 * tagged with its extract's time, applied as one snapshot-mode load per
 * extract, in ascending order, in one call and one transaction.
 *
 * The result is that of loading the extracts one by one (rows, validity,
 * metrics, one audit row and one revertible run per extract); what makes
 * each load small is that the extracts are compared with each other first
 * (compare_extracts: one pass over the staging table, no join of extract
 * with extract -- from a plain table filled extract by extract a stream
 * of its rows in their stored order, one hash-table entry per key
 * (extract_stream.c); else, or when that gives up, one sort of each row's
 * key, extract and two hashes of its text, window functions over it):
 *   - the first extract is loaded whole, in snapshot mode;
 *   - a later one is loaded as its changes since the extract before: a
 *     key's row is left out when the key has exactly that one row, the
 *     same in every column, in both extracts -- after the load of the
 *     extract before, the dimension holds that row's state, so loading it
 *     again changes nothing (it is counted as unchanged); a key the
 *     extract before had and this one lacks gets a delete marker; the load
 *     is incremental, with those markers and the registered delete marker
 *     as its delete marker (driver.c, use_extract).
 * The rows to load are then fetched again (fill_extracts), by ctid (TID
 * scans) from a plain table, else by key and extract, all reads of the
 * staging table in one snapshot.  Each load is scd2_run_load, with its
 * checks, guards (an empty extract, max_close_fraction), change log and
 * write path.
 *
 * An extract is one distinct value of snapshot_column (date, timestamp or
 * timestamptz; as timestamptz, the load's effective_at).  A row whose
 * every other column is NULL only marks its extract, so an empty extract
 * can be given (it is refused unless scd2.allow_empty_snapshot is on).
 * An extract older than the dimension's last load is refused, naming it.
 *
 * The staging rows are read as the dimension's owner in a
 * security-restricted operation, as a load reads them, after the caller's
 * and the owner's privileges are checked.  At top level a failed call
 * leaves one error row in the audit log, as scd2.apply does.
 */
#include "scd2.h"

#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/extract_stream.h"
#include "citus/citus.h"

PG_FUNCTION_INFO_V1(scd2_apply_snapshots);

/* The extracts, in their work table: the staging columns and these. */
#define EXTRACTS_TABLE	"pg_temp.\"scd2 work: extracts\""
/* Per later extract, the keys to load and the keys gone (compare_extracts). */
#define CHANGES_TABLE	"pg_temp.\"scd2 work: extract changes\""
#define CHANGES_RELNAME	"scd2 work: extract changes"

/* One call. */
typedef struct Snapshots
{
	Oid			stg_oid;
	Oid			dim_oid;
	const char *snap_col;		/* unquoted */
	TimestampTz started_at;
	Scd2Config *cfg;			/* the registration with the staging table */
	char	   *cols;			/* the staging columns, quoted: "a, b" */
	char	   *scols;			/* and of alias s */
	char	   *img;			/* every column but the snapshot column */
	char	   *marker;			/* "the row only marks its extract" */
	char	   *gone_cols;		/* a delete marker's columns: x.key, NULL */
	int			n;				/* extracts */
	TimestampTz *at;			/* their times, ascending */
	int64	   *rows;			/* their staging rows (markers aside) */
	int64	   *loaded;			/* their rows in the work table */
	Snapshot	snap;			/* every read of the staging table */
	bool		by_row;			/* the staging rows are fetched again by
								 * ctid (a plain table), else by key */
	Scd2Metrics sum;
	char	   *schema_note;	/* the last load's note on the staging shape */
} Snapshots;

/* The snapshot column: a column of the staging table of a temporal type. */
static void
check_snapshot_column(const Snapshots *ss)
{
	AttrNumber	att = get_attnum(ss->stg_oid, ss->snap_col);
	Oid			typ;

	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", ss->cfg->stg_name, ss->snap_col),
				 errdetail("Column \"%s\" was given as snapshot_column.", ss->snap_col),
				 errhint("Name the staging column that holds each row's extract time.")));
	typ = get_atttype(ss->stg_oid, att);
	if (typ != DATEOID && typ != TIMESTAMPOID && typ != TIMESTAMPTZOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("snapshot column \"%s\" of staging table %s has type %s",
						ss->snap_col, ss->cfg->stg_name, format_type_be(typ)),
				 errhint("The snapshot column holds each row's extract time: date, timestamp or timestamptz.")));
	for (int i = 0; i < ss->cfg->nkeys; i++)
		if (strcmp(ss->cfg->keys[i].name, ss->snap_col) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("snapshot column \"%s\" is a business key column of %s",
							ss->snap_col, ss->cfg->dim_name)));
}

/*
 * SQL pieces over the staging columns: the column lists, the row image
 * (every column but the snapshot column, as text), "only marks its
 * extract" (every other column NULL), and a delete marker's select list
 * (the business key, NULL elsewhere).
 */
static void
column_sql(Snapshots *ss)
{
	Relation	rel = relation_open(ss->stg_oid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData c,
				sc,
				im,
				mk,
				gc;

	initStringInfo(&c);
	initStringInfo(&sc);
	initStringInfo(&im);
	initStringInfo(&mk);
	initStringInfo(&gc);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);
		const char *name = NameStr(a->attname);
		const char *q = quote_identifier(name);
		bool		key = false;

		if (a->attisdropped)
			continue;
		for (int k = 0; k < ss->cfg->nkeys; k++)
			key = key || strcmp(ss->cfg->keys[k].name, name) == 0;
		appendStringInfo(&c, "%s%s", c.len ? ", " : "", q);
		appendStringInfo(&sc, "%ss.%s", sc.len ? ", " : "", q);
		appendStringInfo(&gc, "%s%s", gc.len ? ", " : "", key ? psprintf("x.%s", q) : "NULL");
		if (strcmp(name, ss->snap_col) == 0)
			continue;
		appendStringInfo(&im, "%ss.%s", im.len ? ", " : "", q);
		appendStringInfo(&mk, "%ss.%s IS NULL", mk.len ? " AND " : "", q);
	}
	relation_close(rel, NoLock);
	ss->cols = c.data;
	ss->scols = sc.data;
	ss->img = im.data;
	ss->marker = mk.data;
	ss->gone_cols = gc.data;
}

/* "k1, k2": the business key, for PARTITION BY. */
static char *
key_list(const Scd2Config *cfg, const char *alias)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&b, "%s%s%s", i ? ", " : "", alias, cfg->keys[i].ident);
	return b.data;
}

/*
 * "s.k = w.k AND ..." on the staging table's key columns, with the
 * dimension key's equality (the staging column cast to its type when it
 * is not of it, as the load compares them).
 */
static char *
key_join(const Scd2Config *cfg)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < cfg->nkeys; i++)
	{
		const Scd2Column *k = &cfg->keys[i];
		const char *eq = k->eqop_sql ? k->eqop_sql : "=";

		if (k->stg_exact)
			appendStringInfo(&b, "%ss.%s %s w.%s", i ? " AND " : "", k->ident, eq, k->ident);
		else
			appendStringInfo(&b, "%sCAST(s.%s AS %s) %s CAST(w.%s AS %s)", i ? " AND " : "",
							 k->ident, k->type_sql, eq, k->ident, k->type_sql);
	}
	return b.data;
}

/* "s.k1 IS NULL OR ...": a row the load refuses for its NULL key. */
static char *
null_key(const Scd2Config *cfg, const char *alias)
{
	StringInfoData b;

	initStringInfo(&b);
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&b, "%s%s.%s IS NULL", i ? " OR " : "", alias, cfg->keys[i].ident);
	return b.data;
}

/* The extracts' times and sizes, ascending; an error for a NULL or non-finite time. */
static void
read_extracts(Snapshots *ss)
{
	const char *q = quote_identifier(ss->snap_col);

	/*
	 * A plain SELECT, so it may run in parallel: a partial aggregate per
	 * worker over the whole staging table (3M rows: 0.24 s instead of
	 * 0.44 s inside one call here).
	 */
	scd2_exec_user_parallel(psprintf("SELECT CAST(s.%s AS pg_catalog.timestamptz),"
									 "       pg_catalog.count(*) FILTER (WHERE NOT (%s))"
									 "  FROM %s s GROUP BY 1 ORDER BY 1",
									 q, ss->marker, ss->cfg->stg_sql),
							0, NULL, NULL, ss->snap, "reading the extracts");
	ss->n = (int) SPI_processed;
	ss->at = palloc(sizeof(TimestampTz) * Max(ss->n, 1));
	ss->rows = palloc(sizeof(int64) * Max(ss->n, 1));
	ss->loaded = palloc0(sizeof(int64) * Max(ss->n, 1));
	for (int i = 0; i < ss->n; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		if (isnull || TIMESTAMP_NOT_FINITE(DatumGetTimestampTz(d)))
			ereport(ERROR,
					(errcode(isnull ? ERRCODE_NULL_VALUE_NOT_ALLOWED : ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("staging table %s has rows with a %s snapshot column \"%s\"",
							ss->cfg->stg_name, isnull ? "NULL" : "non-finite", ss->snap_col),
					 errhint("Every row needs the finite time of its extract; nothing was loaded.")));
		ss->at[i] = DatumGetTimestampTz(d);
		ss->rows[i] = scd2_spi_int8(i, 2);
	}
}

/* An extract older than the dimension's last load cannot be applied after it. */
static void
refuse_older_extracts(const Snapshots *ss)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(ss->dim_oid)};
	TimestampTz last;

	scd2_exec_catalog("SELECT a.run_id, a.effective_at FROM scd2.audit_log a"
					   "  JOIN scd2.change_log_runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id"
					   " WHERE r.dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
					   "   AND a.status OPERATOR(pg_catalog.=) 'success'"
					   " ORDER BY a.effective_at DESC, a.run_id DESC LIMIT 1",
					  1, argtypes, values, NULL, false, SPI_OK_SELECT,
					  "reading the dimension's last load");
	if (ss->n == 0 || SPI_processed == 0)
		return;
	last = DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2,
											 &(bool){false}));
	if (ss->at[0] >= last)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("extract %s of staging table %s is older than the last load of dimension %s",
					timestamptz_to_str(ss->at[0]), ss->cfg->stg_name, ss->cfg->dim_name),
			 errdetail("Run %lld loaded %s at %s; extracts are applied after the loads before them, in ascending order. Nothing was loaded.",
					   (long long) scd2_spi_int8(0, 1), ss->cfg->dim_name, timestamptz_to_str(last)),
			 errhint("Leave the older extracts out, or rewind the dimension (scd2.rewind) to before them first.")));
}

/*
 * The staging rows that are no mere extract markers, each with its
 * extract's number 1..n (`_n), by a hash join with $1, the extracts'
 * times in order.
 */
static char *
numbered_rows_sql(const Snapshots *ss, const char *cols)
{
	const Scd2Config *cfg = ss->cfg;

	return psprintf(X("SELECT %s, CAST(e.`_n AS pg_catalog.int4) AS `_n"
					  "  FROM %s s JOIN pg_catalog.unnest($1) WITH ORDINALITY e(`_t, `_n)"
					  "    ON CAST(s.%s AS pg_catalog.timestamptz) OPERATOR(pg_catalog.=) e.`_t"
					  " WHERE NOT (%s)"),
					cols, cfg->stg_sql, quote_identifier(ss->snap_col), ss->marker);
}

static Datum
times_array(const Snapshots *ss)
{
	Datum	   *at = palloc(sizeof(Datum) * Max(ss->n, 1));

	for (int i = 0; i < ss->n; i++)
		at[i] = TimestampTzGetDatum(ss->at[i]);
	return PointerGetDatum(construct_array(at, ss->n, TIMESTAMPTZOID, sizeof(TimestampTz),
										   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * The extracts compared by sorting, in one pass over the staging table:
 * every row, narrowed to its key, its extract, two 64-bit hashes of its
 * text (so the one sort, by key and extract, moves little) and, fetched
 * again by ctid, its ctid; then, per key in extract order (window
 * functions over that sort, no join):
 *   - a key of a later extract is to be loaded unless it has one row
 *     there, had exactly one row in the extract before, and both have the
 *     same text (the same two seeded 64-bit hashes of it: a changed row
 *     passes for unchanged only if both collide) -- after the load of the
 *     extract before, the dimension holds that row's state, so loading it
 *     again changes nothing;
 *   - a key's last row of an extract the next extract lacks the key of
 *     marks the key gone from that next extract (`_n + 1).
 * By ctid, every row to load is listed (and the rows without a business
 * key, which the load refuses); by key, a key's last row stands for its
 * rows of the extract, and fill_extracts takes the first extract and the
 * rows without a key itself.  $1: the extracts' times; $2: how many.
 */
static void
compare_extracts_sorting(Snapshots *ss)
{
	const Scd2Config *cfg = ss->cfg;
	Oid			argtypes[2] = {TIMESTAMPTZARRAYOID, INT4OID};
	Datum		values[2] = {times_array(ss), Int32GetDatum(ss->n)};
	const char *last = X("w.`_nn IS DISTINCT FROM w.`_n");
	const char *same = X("COALESCE(w.`_pn OPERATOR(pg_catalog.=) (w.`_n OPERATOR(pg_catalog.-) 1)"
						 " AND w.`_ph OPERATOR(pg_catalog.=) w.`_h AND w.`_ph2 OPERATOR(pg_catalog.=) w.`_h2"
						 " AND w.`_ppn IS DISTINCT FROM (w.`_n OPERATOR(pg_catalog.-) 1), false)");
	const char *gone = psprintf(X("(%s AND w.`_n OPERATOR(pg_catalog.<) $2"
								  " AND (w.`_nn IS NULL OR w.`_nn OPERATOR(pg_catalog.>) (w.`_n OPERATOR(pg_catalog.+) 1)))"),
								last);
	const char *nokey = psprintf("(%s)", null_key(cfg, "w"));
	char	   *load;
	char	   *where;

	if (ss->by_row)
	{
		load = psprintf(X("(%s OR w.`_n OPERATOR(pg_catalog.=) 1"
						  " OR w.`_nn OPERATOR(pg_catalog.=) w.`_n OR NOT %s)"), nokey, same);
		gone = psprintf("(NOT %s AND %s)", nokey, gone);
		where = "true";
	}
	else
	{
		load = psprintf(X("(%s AND w.`_n OPERATOR(pg_catalog.>) 1 AND NOT %s)"), last, same);
		where = psprintf("NOT (%s)", null_key(cfg, "s"));
	}
	scd2_exec_user(psprintf(X("INSERT INTO " CHANGES_TABLE " (%s, `_n, `_row, `_load, `_gone)"
							  " SELECT %s, w.`_n, w.`_row, %s, %s"
							  "   FROM (SELECT %s, h.`_n, h.`_row, h.`_h, h.`_h2,"
							  "                pg_catalog.lag(h.`_n) OVER o AS `_pn,"
							  "                pg_catalog.lag(h.`_n, 2) OVER o AS `_ppn,"
							  "                pg_catalog.lead(h.`_n) OVER o AS `_nn,"
							  "                pg_catalog.lag(h.`_h) OVER o AS `_ph,"
							  "                pg_catalog.lag(h.`_h2) OVER o AS `_ph2"
							  "           FROM (SELECT %s, h.`_n, h.`_row, pg_catalog.hashtextextended(h.`_t, 0) AS `_h,"
							  "                        pg_catalog.hashtextextended(h.`_t, 1) AS `_h2"
							  "                   FROM (SELECT %s, s.`_n, %s AS `_row,"
							  "                                CAST(ROW(%s) AS pg_catalog.text) COLLATE \"C\" AS `_t"
							  "                           FROM (%s) s WHERE %s OFFSET 0) h OFFSET 0) h"
							  "         WINDOW o AS (PARTITION BY %s ORDER BY h.`_n)) w"
							  "  WHERE %s OR %s"),
							key_list(cfg, ""), key_list(cfg, "w."), load, gone,
							key_list(cfg, "h."), key_list(cfg, "h."),
							key_list(cfg, "s."), ss->by_row ? "s.ctid" : "CAST(NULL AS pg_catalog.tid)", ss->img,
							numbered_rows_sql(ss, ss->by_row ? psprintf("%s, s.ctid", ss->scols) : ss->scols),
							where, key_list(cfg, "h."),
							load, gone),
				   2, argtypes, values, NULL, ss->snap, false, SPI_OK_INSERT,
				   "comparing the extracts");
}

/*
 * The extracts compared: in one pass over a plain staging table with no
 * sort (extract_stream.c) when its rows come extract by extract for each
 * key (a table filled extract by extract), its key types hash and its
 * keys fit in maintenance_work_mem; else -- a view, Citus, or that pass
 * gave up, and what it wrote goes -- by sorting.
 */
static void
compare_extracts(Snapshots *ss)
{
	const Scd2Config *cfg = ss->cfg;
	const char *why = NULL;
	char	   *sql;

	if (!ss->by_row)
	{
		compare_extracts_sorting(ss);
		return;
	}
	sql = psprintf("SELECT s.ctid, CAST(s.%s AS pg_catalog.timestamptz), %s, %s FROM %s s WHERE NOT (%s)",
				   quote_identifier(ss->snap_col), key_list(cfg, "s."), ss->img, cfg->stg_sql, ss->marker);
	if (scd2_compare_extracts_streaming(sql, ss->snap, cfg->nkeys, ss->n, ss->at,
										RangeVarGetRelid(makeRangeVar("pg_temp", CHANGES_RELNAME, -1),
														 RowExclusiveLock, false),
										&why))
		return;
	elog(DEBUG1, "scd2.apply_snapshots compares the extracts by sorting them: %s", why);
	scd2_exec_user("DELETE FROM " CHANGES_TABLE, 0, NULL, NULL, NULL, InvalidSnapshot, false,
				   SPI_OK_DELETE, "comparing the extracts");
	compare_extracts_sorting(ss);
}

/*
 * The work table the loads read: the rows compare_extracts chose, fetched
 * again by ctid, or by key and extract (with the first extract's rows and
 * the rows without a business key); and a delete marker for each key gone.
 */
static void
fill_extracts(Snapshots *ss)
{
	const Scd2Config *cfg = ss->cfg;
	Oid			argtypes[1] = {TIMESTAMPTZARRAYOID};
	Datum		values[1] = {times_array(ss)};
	const char *del = cfg->del_col ? psprintf("s.%s", cfg->del_col) : "false";
	char	   *rows;
	int			nest;

	scd2_exec_user("ANALYZE " CHANGES_TABLE, 0, NULL, NULL, NULL, InvalidSnapshot, false,
				   SPI_OK_UTILITY, "comparing the extracts");
	if (ss->by_row)
		rows = psprintf(X("SELECT %s, c.`_n, %s, true FROM " CHANGES_TABLE " c"
						  "  JOIN %s s ON s.ctid OPERATOR(pg_catalog.=) c.`_row WHERE c.`_load"),
						ss->scols, del, cfg->stg_sql);
	else
		rows = psprintf(X("SELECT %s, s.`_n, %s, true"
						  "   FROM (%s) s"
						  "   LEFT JOIN (SELECT * FROM " CHANGES_TABLE " c WHERE c.`_load) w"
						  "     ON %s AND s.`_n OPERATOR(pg_catalog.=) w.`_n"
						  "  WHERE s.`_n OPERATOR(pg_catalog.=) 1 OR (%s) OR w.`_n IS NOT NULL"),
						ss->scols, del, numbered_rows_sql(ss, "s.*"), key_join(cfg), null_key(cfg, "s"));
	nest = NewGUCNestLevel();
	if (ss->by_row)
	{
		/*
		 * Each row by its ctid (a TID scan per row to load), never a hash
		 * join of every staging row with the rows to load: 158,000 rows of
		 * 3,000,000 took 1.5 s that way, 0.35 s by TID.
		 */
		scd2_set_local("enable_hashjoin", "off");
		scd2_set_local("enable_mergejoin", "off");
	}
	scd2_exec_user(psprintf(X("INSERT INTO " EXTRACTS_TABLE " (%s, `_n, `_gone, `_real) %s"
							  " UNION ALL"
							  " SELECT %s, x.`_n OPERATOR(pg_catalog.+) 1, true, false FROM " CHANGES_TABLE " x WHERE x.`_gone"),
							ss->cols, rows, ss->gone_cols),
				   ss->by_row ? 0 : 1, argtypes, values, NULL, ss->snap, false, SPI_OK_INSERT,
				   "comparing the extracts");
	AtEOXact_GUC(true, nest);
	scd2_exec_user("ANALYZE " EXTRACTS_TABLE, 0, NULL, NULL, NULL, InvalidSnapshot, false,
				   SPI_OK_UTILITY, "analyzing the extracts");
	scd2_exec_user(X("SELECT `_n, pg_catalog.count(*) FILTER (WHERE `_real) FROM " EXTRACTS_TABLE " GROUP BY 1"),
				   0, NULL, NULL, NULL, InvalidSnapshot, false, SPI_OK_SELECT, "counting the extracts' rows");
	for (uint64 i = 0; i < SPI_processed; i++)
		ss->loaded[scd2_spi_int8((int) i, 1) - 1] = scd2_spi_int8((int) i, 2);
}

/*
 * The work tables, as the dimension's owner before the restriction (as a
 * load makes its own): of the staging table's columns without its
 * constraints (a delete marker is NULL beyond the key).
 */
static void
create_work_tables(const Snapshots *ss)
{
	const Scd2Config *cfg = ss->cfg;

	scd2_exec_work(psprintf("CREATE TEMP TABLE " EXTRACTS_TABLE " ON COMMIT DROP AS SELECT %s FROM %s s WITH NO DATA",
							ss->scols, cfg->stg_sql),
				   SPI_OK_UTILITY, "creating the extracts");
	scd2_exec_work(X("ALTER TABLE " EXTRACTS_TABLE " ADD COLUMN `_n pg_catalog.int4,"
					 " ADD COLUMN `_gone pg_catalog.bool, ADD COLUMN `_real pg_catalog.bool"),
				   SPI_OK_UTILITY, "creating the extracts");
	scd2_exec_work(X("CREATE INDEX ON " EXTRACTS_TABLE " (`_n)"), SPI_OK_UTILITY, "creating the extracts");
	scd2_exec_work(psprintf(X("CREATE TEMP TABLE " CHANGES_TABLE " ON COMMIT DROP AS SELECT %s,"
							  " CAST(NULL AS pg_catalog.int4) AS `_n, CAST(NULL AS pg_catalog.tid) AS `_row,"
							  " CAST(NULL AS pg_catalog.bool) AS `_load,"
							  " CAST(NULL AS pg_catalog.bool) AS `_gone"
							  " FROM %s s WITH NO DATA"),
							key_list(cfg, "s."), cfg->stg_sql),
				   SPI_OK_UTILITY, "creating the extracts");
}

/*
 * Steps before the loads, as the dimension's owner: the work table (made
 * before the restriction, as a load makes its own), then, restricted, the
 * extracts read, checked and compared.
 */
static void
prepare_extracts(Snapshots *ss)
{
	OwnerContext oc;
	const Scd2Config *cfg = ss->cfg;

	scd2_refuse_row_security(ss->dim_oid, scd2_relation_owner(ss->dim_oid), "dimension", "scd2.apply_snapshots");
	scd2_refuse_row_security(ss->stg_oid, scd2_relation_owner(ss->dim_oid), "staging table", "scd2.apply_snapshots");
	scd2_require_registered_shape(ss->dim_oid, cfg->dim_name, false);
	scd2_owner_enter(&oc, scd2_relation_owner(ss->dim_oid));
	scd2_check_privileges(ss->stg_oid, ss->dim_oid, false, oc.owner, true);
	scd2_set_local("jit", "off");	/* as a load: it saves nothing here */
	create_work_tables(ss);
	scd2_owner_restrict(&oc);

	/* one snapshot: the staging rows compared are the rows fetched again */
	CommandCounterIncrement();
	ss->snap = RegisterSnapshot(GetTransactionSnapshot());
	ss->by_row = get_rel_relkind(ss->stg_oid) == RELKIND_RELATION && !has_subclass(ss->stg_oid) &&
		scd2_citus_table(ss->stg_oid, NULL) == SCD2_CITUS_NONE;
	read_extracts(ss);
	refuse_older_extracts(ss);
	if (ss->n > 0)
	{
		compare_extracts(ss);
		fill_extracts(ss);
	}
	UnregisterSnapshot(ss->snap);
	scd2_owner_leave(&oc);
}

/* The work table is the owner's: dropped as the owner (a second call may follow). */
static void
drop_extracts(const Snapshots *ss)
{
	OwnerContext oc;

	scd2_owner_enter(&oc, scd2_relation_owner(ss->dim_oid));
	scd2_exec_work("DROP TABLE " EXTRACTS_TABLE ", " CHANGES_TABLE,
				   SPI_OK_UTILITY, "dropping the extracts");
	scd2_owner_leave(&oc);
}

/* Load extract i (0-based) and write its audit row. */
static void
load_extract(Snapshots *ss, int i)
{
	const Scd2Config *cfg = ss->cfg;	/* for X() */
	TimestampTz started_at = GetCurrentTimestamp();
	Scd2Extract ext;
	Scd2LoadRequest req;
	Scd2LoadResult res;
	Scd2Metrics *m = &res.metrics;

	memset(&ext, 0, sizeof(ext));
	ext.rows_sql = psprintf(X("(SELECT %s, `_gone FROM " EXTRACTS_TABLE " WHERE `_n OPERATOR(pg_catalog.=) %d)"),
							ss->cols, i + 1);
	ext.gone_col = X("`_gone");
	ext.label = psprintf("extract %s", timestamptz_to_str(ss->at[i]));
	ext.full = i == 0;
	ext.rows = ss->rows[i];
	ext.snapshot_col = ss->snap_col;

	memset(&req, 0, sizeof(req));
	req.stg_oid = ss->stg_oid;
	req.dim_oid = ss->dim_oid;
	req.effective_at = ss->at[i];
	req.extract = &ext;
	memset(&res, 0, sizeof(res));
	scd2_run_load(&req, &res);

	/*
	 * As loaded one by one: every row of the extract is a source row; the
	 * ones left out changed nothing (delete markers are no source rows,
	 * and each of them deleted).
	 */
	m->unchanged += ss->rows[i] - ss->loaded[i];
	m->source_rows = ss->rows[i];
	(void) scd2_audit_write(ss->dim_oid, res.dim_name, res.stg_name, "success", ss->at[i], started_at, m,
							psprintf("scd2.apply_snapshots: extract %d of %d", i + 1, ss->n),
							res.schema_note, res.run_id);
	ss->schema_note = res.schema_note;
	/* the call's totals: every metric of metrics.h */
#define ADD_METRIC(name, words, shown, source, how) ss->sum.name += m->name;
	SCD2_METRICS(ADD_METRIC)
#undef ADD_METRIC
}

/* The whole call (in a subtransaction at top level, see txn.c). */
static void
apply_snapshots_body(void *arg)
{
	Snapshots  *ss = (Snapshots *) arg;

	scd2_check_relkind(ss->dim_oid, true);
	scd2_check_relkind(ss->stg_oid, false);
	scd2_check_privileges(ss->stg_oid, ss->dim_oid, false, GetUserId(), false);
	scd2_lock_dimension(ss->dim_oid, NULL,
						"scd2.apply_snapshots waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						"which another load (or a statement that locks the table) holds; nothing was loaded.");
	/* a view of a role the owner does not trust; every column read (trust.c) */
	scd2_trust_staging_relation(ss->stg_oid, scd2_relation_owner(ss->dim_oid),
								scd2_relation_display_name(ss->dim_oid));
	ss->cfg = scd2_load_config(ss->dim_oid, ss->stg_oid,
							   scd2_load_registration(ss->dim_oid, ss->stg_oid,
													  scd2_relation_display_name(ss->dim_oid)));
	scd2_trust_staging_columns(ss->stg_oid, ss->dim_oid, ss->cfg->owner, ss->cfg->stg_name,
							   ss->cfg->dim_name);
	check_snapshot_column(ss);
	column_sql(ss);
	prepare_extracts(ss);
	for (int i = 0; i < ss->n; i++)
		load_extract(ss, i);
	drop_extracts(ss);
}

Datum
scd2_apply_snapshots(PG_FUNCTION_ARGS)
{
	bool		nonatomic = scd2_call_is_nonatomic(fcinfo);
	Snapshots	ss;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("staging table, dimension and snapshot_column must not be NULL")));
	memset(&ss, 0, sizeof(ss));
	ss.stg_oid = PG_GETARG_OID(0);
	ss.dim_oid = PG_GETARG_OID(1);
	ss.snap_col = pstrdup(NameStr(*PG_GETARG_NAME(2)));
	ss.started_at = GetCurrentTimestamp();

	if (SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	if (nonatomic)
	{
		ErrorData  *edata;

		scd2_check_relkind(ss.dim_oid, true);
		scd2_check_relkind(ss.stg_oid, false);
		edata = scd2_run_in_subxact(apply_snapshots_body, &ss, ss.dim_oid,
									scd2_relation_display_name(ss.dim_oid),
									scd2_relation_display_name(ss.stg_oid),
									ss.started_at, ss.started_at);
		if (edata != NULL)
		{
			SPI_commit();
			ReThrowError(edata);
		}
	}
	else
		apply_snapshots_body(&ss);
	if (ss.n > 0)
		scd2_notice_metrics(scd2_relation_display_name(ss.dim_oid), &ss.sum, false,
							ss.schema_note);
	else
		ereport(NOTICE,
				(errmsg("scd2: staging table %s holds no extract; nothing was loaded",
						scd2_relation_display_name(ss.stg_oid))));
	SPI_finish();
	PG_RETURN_VOID();
}
