/*
 * batch_read.c -- a batch logged by surrogate keys (load/batch_log.c has
 * why and when), read back: the rows from the dimension by surrogate key as
 * its owner, their checks (every row there; no row of an unpinned batch
 * moved since), and several runs' rows as arrays.  Readers: scd2.revert
 * (revert.c), scd2.changes (changes.c), dimension_at(..., known_at)
 * (known_at.c), the feed of a compact first load (compact.c).
 */
#include "scd2.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"

/* What the run did to a row: the array's code and the feed's action. */
static const struct
{
	const char *code;
	const char *action;
	bool		inserted;
}			batch_action[] =
{
	{"i", "insert", true},
	{"n", "new_version", true},
	{"c", "close", false},
	{"d", "delete", false},
};

#define N_BATCH_ACTIONS lengthof(batch_action)

/* CASE expr WHEN <from> THEN <to> ...: actions to codes (to_code) or back. */
char *
scd2_batch_action_case_sql(const char *expr, bool to_code)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "CASE %s", expr);
	for (int i = 0; i < (int) N_BATCH_ACTIONS; i++)
		if (to_code)
			appendStringInfo(&buf, " WHEN '%s' THEN CAST('%s' AS pg_catalog.\"char\")",
							 batch_action[i].action, batch_action[i].code);
		else
			appendStringInfo(&buf, " WHEN CAST('%s' AS pg_catalog.\"char\") THEN '%s'",
							 batch_action[i].code, batch_action[i].action);
	appendStringInfoString(&buf, " END");
	return buf.data;
}

/* SQL: whether code expr is an inserted row's. */
static char *
inserted_sql(const char *expr)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "(%s OPERATOR(pg_catalog.=) ANY (CAST('{", expr);
	for (int i = 0, n = 0; i < (int) N_BATCH_ACTIONS; i++)
		if (batch_action[i].inserted)
			appendStringInfo(&buf, "%s%s", n++ ? "," : "", batch_action[i].code);
	appendStringInfoString(&buf, "}' AS pg_catalog.\"char\"[])))");
	return buf.data;
}

/*
 * The arrays of a run logged in several chunks (SPI holds its rows, in
 * chunk order: the arrays, their length, the chunk), one after the other
 * into b, as one row holding them would have them: the business keys and
 * valid_from of a chunk no later load pinned are NULL at its places, and
 * none at all when no chunk is pinned.  A chunk whose arrays differ in
 * length from its surrogate keys is an error naming the run.
 */
static void
concat_chunks(int64 run_id, Scd2BatchLog *b)
{
	static const Oid elem[5] = {INT8OID, CHAROID, TIMESTAMPTZOID, JSONBOID, TIMESTAMPTZOID};
	static const char *const column[5] = {"surrogate_keys", "actions", "valid_to", "business_keys", "valid_from"};
	uint64		nchunks = SPI_processed;
	int			total = 0;
	bool		isnull;

	b->pinned = false;
	for (uint64 r = 0; r < nchunks; r++)
	{
		total += (int) scd2_spi_int8(r, 6);
		(void) SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, 4, &isnull);
		b->pinned |= !isnull;
	}
	b->n = total;
	for (int c = 0; c < (b->pinned ? 5 : 3); c++)
	{
		Datum	   *values = palloc(sizeof(Datum) * Max(total, 1));
		bool	   *nulls = palloc(sizeof(bool) * Max(total, 1));
		int			at = 0;
		int16		len;
		bool		byval;
		char		align;
		int			dims[1] = {total};
		int			lbs[1] = {1};

		get_typlenbyvalalign(elem[c], &len, &byval, &align);
		for (uint64 r = 0; r < nchunks; r++)
		{
			int			rows = (int) scd2_spi_int8(r, 6);
			Datum		d = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc, c + 1, &isnull);
			ArrayType  *arr;
			Datum	   *v;
			bool	   *vn;
			int			n;

			if (isnull)			/* (a chunk not pinned: the others are NOT NULL) */
			{
				memset(nulls + at, true, sizeof(bool) * rows);
				memset(values + at, 0, sizeof(Datum) * rows);
				at += rows;
				continue;
			}
			arr = DatumGetArrayTypeP(d);
			deconstruct_array(arr, elem[c], len, byval, align, &v, &vn, &n);
			if (n != rows)
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("the change log of run %lld is inconsistent", (long long) run_id),
						 errdetail("Its chunk %lld in scd2.change_log_batches holds %d surrogate keys but %d values in column %s: it was written otherwise than by scd2.",
								   (long long) scd2_spi_int8(r, 7), rows, n, column[c]),
						 errhint("Restore that row from a backup.")));
			memcpy(values + at, v, sizeof(Datum) * n);
			memcpy(nulls + at, vn, sizeof(bool) * n);
			at += n;
			pfree(v);
			pfree(vn);
			if (byval && (Pointer) arr != DatumGetPointer(d))
				pfree(arr);		/* (a detoasted copy no value points into) */
		}
		b->arrays[c] = PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, elem[c], len, byval,
														  align));
	}
}

/*
 * The arrays of a run logged by surrogate keys, as the extension owner;
 * false when the run was not (or the table is not installed).  A run
 * logged in chunks (load/batch_log.c) is read as one: its chunks' arrays
 * one after the other, in chunk order -- the order in which the load
 * wrote the rows, as one row of the whole batch held them before 0.5.
 */
bool
scd2_batch_read(int64 run_id, Scd2BatchLog *b)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};
	bool		chunked;
	bool		isnull;

	memset(b, 0, sizeof(*b));
	if (!scd2_changelog_batch_installed())
		return false;
	chunked = scd2_changelog_batch_chunked();
	scd2_exec_catalog(psprintf("SELECT b.surrogate_keys, b.actions, b.valid_to, b.business_keys, b.valid_from,"
							   "       pg_catalog.cardinality(b.surrogate_keys), %s"
							   "  FROM scd2.change_log_batches b WHERE b.run_id OPERATOR(pg_catalog.=) $1%s",
							   chunked ? "CAST(b.chunk AS pg_catalog.int8)" : "CAST(0 AS pg_catalog.int8)",
							   chunked ? " ORDER BY b.chunk" : ""),
					  1, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the change log");
	if (SPI_processed == 0)
		return false;
	if (SPI_processed > 1)
	{
		concat_chunks(run_id, b);
		return true;
	}
	for (int i = 0; i < 5; i++)
	{
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull);

		b->arrays[i] = isnull ? (Datum) 0 : datumCopy(d, false, -1);
		if (i == 3)
			b->pinned = !isnull;
	}
	b->n = scd2_spi_int8(0, 6);
	return true;
}

/* The argument types of scd2_batch_rows_sql's statement ($1..$3; pinned: $1..$5). */
const Oid	scd2_batch_argtypes[5] = {INT8ARRAYOID, CHARARRAYOID, TIMESTAMPTZARRAYOID, JSONBARRAYOID,
	TIMESTAMPTZARRAYOID};

/*
 * The rows a run logged by surrogate keys wrote, as scd2.change_log would
 * hold them, read back from the dimension (run as its owner, the arrays
 * as $1..$3): action, inserted, surrogate_key, business_key, valid_from,
 * valid_to, old_valid_to, old_is_current, old_type1 -- in the feed's
 * order (business key, valid_from, inserted).  The before-image of an
 * updated row: the run's current valid_to, is_current true, and with
 * type1_images its Type 1 values now (for a revert: the run changed none
 * and it is the newest run), else NULL (unchanged by the run).  The rows
 * a later order-free load moved or removed were pinned in the batch
 * (load/batch_pin.c: $4, $5, NULL at the other rows' places): their
 * business key and valid_from are read from there, and a row a later
 * load removed from the dimension is still read.
 */
char *
scd2_batch_rows_sql(const Run *run, const char *dim_name, bool type1_images, const Scd2BatchLog *b)
{
	Relation	rel = table_open(run->dim_oid, AccessShareLock);
	int			nkeys,
				nbook,
				ncur,
				nsk,
				ntype1;
	Scd2LoggedColumn *keys = scd2_changelog_columns(rel, run->key_columns, run->run_id, dim_name, &nkeys);
	Scd2LoggedColumn *book = scd2_changelog_columns(rel, run->bookkeeping, run->run_id, dim_name, &nbook);
	Scd2LoggedColumn *sk = scd2_changelog_columns(rel, run->surrogate_key, run->run_id, dim_name, &nsk);
	Scd2LoggedColumn *type1 = scd2_changelog_columns(rel, run->type1_columns, run->run_id, dim_name, &ntype1);
	char	   *open;
	char	   *key;
	char	   *vf;
	char	   *updated = psprintf("NOT %s", inserted_sql("b.a"));

	(void) scd2_changelog_columns(rel, run->is_current, run->run_id, dim_name, &ncur);
	table_close(rel, NoLock);
	if (nsk == 0)
		elog(ERROR, "scd2: run %lld was logged by surrogate keys but names none", (long long) run->run_id);
	open = strcmp(run->current_valid_to, "null") == 0 ? "NULL::pg_catalog.timestamptz" :
		scd2_changelog_encode_sql(book[1].typid, psprintf("CAST(%s AS %s)", quote_literal_cstr(run->current_valid_to),
														  format_type_be_qualified(book[1].typid)));
	key = scd2_changelog_key_json_sql(keys, nkeys, "t");
	vf = scd2_changelog_encode_sql(book[0].typid, psprintf("t.%s", book[0].ident));
	return psprintf("SELECT %s AS action, %s AS inserted, b.sk AS surrogate_key, %s AS business_key,"
					" %s AS valid_from, b.vt AS valid_to,"
					" CASE WHEN %s THEN %s END AS old_valid_to, CASE WHEN %s THEN %s END AS old_is_current,"
					" CASE WHEN %s THEN %s END AS old_type1"
					" FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)%s) AS b(sk, a, vt%s)"
					" %s %s t ON t.%s OPERATOR(pg_catalog.=) b.sk%s"
					" ORDER BY 4, 5, 2",
					scd2_batch_action_case_sql("b.a", false), inserted_sql("b.a"),
					b->pinned ? psprintf("COALESCE(b.bk, %s)", key) : key,
					b->pinned ? psprintf("COALESCE(b.vf, %s)", vf) : vf,
					updated, open, updated, ncur > 0 ? "true" : "NULL::pg_catalog.bool",
					updated, type1_images && ntype1 > 0 ?
					scd2_changelog_type1_json_sql(type1, ntype1, "t", run->old_type1_text) : "NULL::pg_catalog.jsonb",
					b->pinned ? ", pg_catalog.unnest($4), pg_catalog.unnest($5)" : "",
					b->pinned ? ", bk, vf" : "",
					b->pinned ? "LEFT JOIN" : "JOIN",
					dim_name, sk[0].ident,
					b->pinned ? psprintf(" WHERE b.bk IS NOT NULL OR t.%s IS NOT NULL", sk[0].ident) : "");
}

/* The dimension held every row the run wrote (found of b->n), or an error. */
void
scd2_batch_require_rows(const Run *run, const char *dim_name, int64 found, const Scd2BatchLog *b)
{
	if (found != b->n)
		scd2_report_run_rows_changed(dim_name, run->run_id,
									 psprintf("Run %lld logged the surrogate keys of the %lld rows it wrote; %lld of them are in the dimension: rows were deleted or their surrogate keys changed outside scd2 since.",
											  (long long) run->run_id, (long long) b->n, (long long) found),
									 "Repair the dimension by hand.");
}

/*
 * No successful load after the run moved or removed one of its rows that
 * is not pinned in the batch (an order-free load: load/arrival.c, which
 * pins what it moves: load/batch_pin.c), which would leave the row's
 * business key and valid_from other than the run wrote them; or an error
 * naming the later run.  This holds unless the log was written otherwise
 * (by hand, or a build that did not pin).
 */
void
scd2_batch_require_unmoved(const Run *run, const char *dim_name, const Scd2BatchLog *b)
{
	Oid			argtypes[4] = {INT8OID, OIDOID, INT8ARRAYOID, JSONBARRAYOID};
	Datum		values[4] = {Int64GetDatum(run->run_id), ObjectIdGetDatum(run->dim_oid), b->arrays[0],
	b->arrays[3]};
	char		nulls[4] = {' ', ' ', ' ', b->pinned ? ' ' : 'n'};

	scd2_exec_catalog("SELECT r.run_id FROM scd2.change_log_runs r JOIN scd2.audit_log a ON a.run_id OPERATOR(pg_catalog.=) r.run_id"
					  " WHERE r.dimension OPERATOR(pg_catalog.=) $2::pg_catalog.regclass AND r.run_id OPERATOR(pg_catalog.>) $1"
					  "   AND a.status OPERATOR(pg_catalog.=) 'success'"
					  "   AND EXISTS (SELECT FROM scd2.change_log c WHERE c.run_id OPERATOR(pg_catalog.=) r.run_id"
					  "                  AND c.action OPERATOR(pg_catalog.=) ANY (ARRAY[" WT_ACT_EXTEND ", " WT_ACT_REMOVE "])"
					  "                  AND c.surrogate_key IN (SELECT u.sk FROM ROWS FROM (pg_catalog.unnest($3),"
					  "                                pg_catalog.unnest($4)) AS u(sk, bk) WHERE u.bk IS NULL))"
					  " ORDER BY r.run_id LIMIT 1",
					  4, argtypes, values, nulls, true, SPI_OK_SELECT, "reading the later runs");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the rows run %lld wrote cannot be read back from dimension %s", (long long) run->run_id, dim_name),
				 errdetail("Run %lld logged the surrogate keys of the rows it wrote; run %lld, an order-free load after it, moved or removed versions.",
						   (long long) run->run_id, (long long) scd2_spi_int8(0, 1)),
				 errhint("Revert run %lld first.", (long long) scd2_spi_int8(0, 1))));
}

/*
 * Run the statement sql over a batch's arrays as the dimension's owner
 * (common/exec.c: its security-restricted operation), text forms pinned; what: for
 * the error context.  Returns the rows it read or wrote.
 */
uint64
scd2_batch_exec(const Run *run, const char *dim_name, const char *sql, const Scd2BatchLog *b,
				bool read_only, int expected, const char *what)
{
	int			nest = NewGUCNestLevel();
	uint64		n;

	scd2_pin_text_forms();
	n = scd2_exec_as_owner(scd2_relation_owner(run->dim_oid), sql, b->pinned ? 5 : 3, (Oid *) scd2_batch_argtypes,
						   (Datum *) b->arrays, read_only, expected, what,
						   psprintf("scd2: %s of run %lld of dimension %s", what, (long long) run->run_id,
									dim_name));
	AtEOXact_GUC(true, nest);
	return n;
}

/* A growing column of scd2_batch_collect's rows. */
typedef struct CollectColumn
{
	Oid			type;
	int			src;			/* scd2_batch_rows_sql's column; 0: the run */
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *v;
	bool	   *null;
} CollectColumn;

/* Append row i of SPI's result, run run_id's, to the columns (n rows, room for *cap). */
static void
collect_row(CollectColumn *col, int n, int *cap, uint64 i, int64 run_id)
{
	if (n == *cap)
	{
		*cap *= 2;
		for (int c = 0; c < SCD2_BATCH_UNDO_COLS; c++)
		{
			col[c].v = repalloc(col[c].v, sizeof(Datum) * *cap);
			col[c].null = repalloc(col[c].null, sizeof(bool) * *cap);
		}
	}
	for (int c = 0; c < SCD2_BATCH_UNDO_COLS; c++)
	{
		Datum		d = Int64GetDatum(run_id);

		col[c].null[n] = false;
		if (col[c].src > 0)
			d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, col[c].src, &col[c].null[n]);
		col[c].v[n] = col[c].null[n] ? (Datum) 0 : datumCopy(d, col[c].typbyval, col[c].typlen);
	}
}

/*
 * The rows of the runs among run_ids (int8[]) that were logged by
 * surrogate keys, read back from the dimension as its owner, each run
 * checked (scd2_batch_require_rows, scd2_batch_require_unmoved): six
 * arrays -- run, business key, valid_from, inserted, and an updated row's
 * implied before-image (old_valid_to, old_is_current; its Type 1 values
 * the run did not change).  inserted_only: the inserted rows alone.
 */
void
scd2_batch_collect(Datum run_ids, const char *dim_name, bool inserted_only, Datum *arrays)
{
	CollectColumn col[SCD2_BATCH_UNDO_COLS] = {
		{INT8OID, 0}, {JSONBOID, 4}, {TIMESTAMPTZOID, 5}, {BOOLOID, 2}, {TIMESTAMPTZOID, 7}, {BOOLOID, 8}
	};
	Oid			argtypes[1] = {INT8ARRAYOID};
	Datum		values[1] = {run_ids};
	Datum	   *batches = NULL;
	int			nbatches = 0;
	int			n = 0;
	int			cap = 1024;
	int			dims[1];
	int			lbs[1] = {1};

	for (int c = 0; c < SCD2_BATCH_UNDO_COLS; c++)
	{
		get_typlenbyvalalign(col[c].type, &col[c].typlen, &col[c].typbyval, &col[c].typalign);
		col[c].v = palloc(sizeof(Datum) * cap);
		col[c].null = palloc(sizeof(bool) * cap);
	}
	if (scd2_changelog_batch_installed())
	{
		scd2_exec_catalog("SELECT DISTINCT b.run_id FROM scd2.change_log_batches b"
						  " WHERE b.run_id OPERATOR(pg_catalog.=) ANY ($1) ORDER BY b.run_id",
						  1, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the change log");
		batches = palloc(sizeof(Datum) * Max(SPI_processed, 1));
		for (uint64 i = 0; i < SPI_processed; i++)
			batches[nbatches++] = Int64GetDatum(scd2_spi_int8(i, 1));
	}
	for (int r = 0; r < nbatches; r++)
	{
		int64		run_id = DatumGetInt64(batches[r]);
		Run			run;
		Scd2BatchLog b;
		uint64		found;

		scd2_revert_read_run(run_id, true, &run);
		if (!scd2_batch_read(run_id, &b))
			elog(ERROR, "scd2: the change log of run %lld vanished", (long long) run_id);
		scd2_batch_require_unmoved(&run, dim_name, &b);
		found = scd2_batch_exec(&run, dim_name, scd2_batch_rows_sql(&run, dim_name, false, &b), &b, true,
								SPI_OK_SELECT, "reading back the rows the run wrote");
		scd2_batch_require_rows(&run, dim_name, (int64) found, &b);
		for (uint64 i = 0; i < found; i++)
		{
			bool		isnull;

			if (inserted_only &&
				!DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull)))
				continue;
			collect_row(col, n++, &cap, i, run_id);
		}
	}
	dims[0] = n;
	for (int c = 0; c < SCD2_BATCH_UNDO_COLS; c++)
		arrays[c] = PointerGetDatum(construct_md_array(col[c].v, col[c].null, 1, dims, lbs, col[c].type,
													   col[c].typlen, col[c].typbyval, col[c].typalign));
}
