/*
 * known_at.c -- scd2._known_at_undo(dimension, known_at): what
 * scd2.dimension_at(NULL::dim, at, known_at) (sql/scd2--0.4.sql) must undo,
 * in its result only, to show the dimension as the loads that finished up
 * to known_at had recorded it: from the change log of every later
 * successful load, one row per dimension row those loads wrote -- inserted
 * by one of them (absent then), or else the before-image the earliest of
 * them logged (valid_to, is_current, Type 1 columns as they were).
 *
 * A later load logged by surrogate keys (load/batch_log.c) gives its rows
 * as read back from the dimension, the before-images implied.
 *
 * A later load that was a first load into the empty dimension logged
 * compactly (changelog.c: every row the dimension had after it was one it
 * inserted) gives one row instead, business key NULL and inserted: every
 * row of the dimension is absent then.
 *
 * Refused, naming the run, when a later load cannot be undone from its
 * change log (loaded with scd2.change_log = off or before 0.3, or its
 * change log pruned), or that extended or removed versions (an order-free
 * load, load/arrival.c: the undo here restores valid_to, is_current and
 * Type 1 values only), or when a load that had finished by known_at was
 * reverted since (the rows it inserted are gone).  A load finished after
 * known_at and reverted since changed nothing that is still there.
 *
 * The caller needs SELECT on the dimension (the dimension itself is read
 * by dimension_at with the caller's rights); the change log, which PUBLIC
 * cannot read, is read as the extension owner.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/runs.h"

PG_FUNCTION_INFO_V1(scd2_known_at_undo);

/* Why the dimension as known at known_at cannot be had. */
static void
refuse(const char *dim_name, TimestampTz known_at, int64 run_id, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dimension %s as known at %s cannot be reconstructed: run %lld %s",
					dim_name, timestamptz_to_str(known_at), (long long) run_id, why),
			 errdetail("scd2.dimension_at(..., known_at) undoes, from the change log, every load of the dimension that finished after known_at."),
			 errhint("Ask for a known_at after run %lld.", (long long) run_id)));
}

/*
 * The successful loads to undo, ascending; a refusal for one that cannot
 * be undone, or for a load finished by known_at and reverted since.
 */
static Datum
runs_to_undo(Oid dim_oid, const char *dim_name, TimestampTz known_at, bool *whole)
{
	Oid			argtypes[3] = {OIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[3] = {ObjectIdGetDatum(dim_oid), CStringGetTextDatum(dim_name),
	TimestampTzGetDatum(known_at)};
	Datum	   *ids;
	int			n = 0;

	scd2_exec_catalog(
			"SELECT a.run_id, a.status, r.run_id IS NOT NULL, COALESCE(r.logged, false),"
			"       r.pruned_at IS NOT NULL, " SCD2_RUN_KNOWN_SQL("a") " OPERATOR(pg_catalog.>) $3,"
			"       (SELECT pg_catalog.min(c.action) FROM scd2.change_log c WHERE c.run_id OPERATOR(pg_catalog.=) a.run_id"
			"         AND c.action OPERATOR(pg_catalog.=) ANY ('{extend,remove,complete}'::pg_catalog.text[])),"
			"       " SCD2_RUN_COMPACT_SQL("r")
			"  FROM scd2.audit_log a LEFT JOIN scd2.change_log_runs r ON r.run_id OPERATOR(pg_catalog.=) a.run_id"
			"  LEFT JOIN scd2.audit_log v ON v.run_id OPERATOR(pg_catalog.=) r.reverted_by"
			" WHERE (r.dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass"
			"        OR (r.run_id IS NULL AND " SCD2_AUDIT_ROW_OF_SQL("a") "))"
			"   AND ((a.status OPERATOR(pg_catalog.=) 'success' AND " SCD2_RUN_KNOWN_SQL("a") " OPERATOR(pg_catalog.>) $3)"
			"        OR (a.status OPERATOR(pg_catalog.=) 'reverted' AND " SCD2_RUN_KNOWN_SQL("v") " OPERATOR(pg_catalog.>) $3))"
			" ORDER BY a.run_id",
			3, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the runs of the dimension");
	ids = palloc(sizeof(Datum) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int64		run_id = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		char	   *status = SPI_getvalue(tup, desc, 2);
		bool		header = DatumGetBool(SPI_getbinval(tup, desc, 3, &isnull));
		bool		logged = DatumGetBool(SPI_getbinval(tup, desc, 4, &isnull));
		bool		pruned = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
		bool		later = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		char	   *moved = SPI_getvalue(tup, desc, 7);	/* complete, extend, remove or NULL */
		bool		compact = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));

		if (strcmp(status, "reverted") == 0)
		{
			if (!later)
				refuse(dim_name, known_at, run_id,
					   "was reverted after it, and the rows it inserted are gone");
			continue;			/* loaded and reverted since: nothing left */
		}
		if (!header)
			refuse(dim_name, known_at, run_id, "has no change log (it was loaded before scd2 0.3)");
		if (!logged)
			refuse(dim_name, known_at, run_id, "has no change log (it was loaded with scd2.change_log = off)");
		if (pruned)
			refuse(dim_name, known_at, run_id, "has no change log any more (scd2.prune_change_log removed it)");
		/* the result undoes valid_to, is_current and Type 1 values, not a moved valid_from */
		if (moved && strcmp(moved, "complete") == 0)
			refuse(dim_name, known_at, run_id,
				   "completed inferred members in place (docs/FACTS.md, \"Early-arriving facts\")");
		if (moved)
			refuse(dim_name, known_at, run_id,
				   "extended or removed versions (an order-free load: docs/SEMANTICS.md, \"Arrival order\")");
		/* a first load logged compactly inserted every row there was after it */
		if (compact)
			*whole = true;
		ids[n++] = Int64GetDatum(run_id);
	}
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

Datum
scd2_known_at_undo(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			dim_oid;
	TimestampTz known_at;
	char	   *dim_name;
	Oid			argtypes[1 + SCD2_BATCH_UNDO_COLS] = {INT8ARRAYOID, INT8ARRAYOID, JSONBARRAYOID,
	TIMESTAMPTZARRAYOID, BOOLARRAYOID, TIMESTAMPTZARRAYOID, BOOLARRAYOID};
	Datum		values[1 + SCD2_BATCH_UNDO_COLS];
	bool		whole = false;
	int			pin;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension and known_at must not be NULL")));
	dim_oid = PG_GETARG_OID(0);
	known_at = PG_GETARG_TIMESTAMPTZ(1);
	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();
	dim_name = scd2_relation_display_name(dim_oid);
	if (pg_class_aclcheck(dim_oid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", dim_name),
				 errdetail("Reading the dimension as known at an instant needs SELECT on it.")));

	/*
	 * The change log is read as the extension owner: a caller whom a policy
	 * limits would get the before-images of rows it cannot see.
	 */
	scd2_refuse_row_security(dim_oid, InvalidOid, "dimension", "scd2.dimension_at(..., known_at)");
	values[0] = runs_to_undo(dim_oid, dim_name, known_at, &whole);
	if (whole)
	{
		/*
		 * A first load into the empty dimension is undone: the dimension
		 * as known then had no row that is there now.  One row says so
		 * (business key NULL, inserted); no other row is needed.
		 */
		Datum		row[6] = {0};
		bool		nulls[6] = {true, true, false, true, true, true};

		row[2] = BoolGetDatum(true);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
		scd2_unpin(pin);
		SPI_finish();
		return (Datum) 0;
	}
	/* the rows of the runs logged by surrogate keys (load/batch_log.c) */
	scd2_batch_collect(values[0], dim_name, false, &values[1]);

	/*
	 * The earliest later run's before-image of each row; the Type 1 values
	 * from the earliest that logged them (a batch's are implied: unchanged).
	 */
	scd2_exec_catalog(
		"SELECT DISTINCT ON (c.business_key, c.valid_from) c.business_key, c.valid_from,"
		"       pg_catalog.bool_or(c.inserted) OVER w, c.old_valid_to, c.old_is_current,"
		"       pg_catalog.first_value(c.old_type1) OVER (w ORDER BY c.old_type1 IS NULL, c.run_id)"
		"  FROM (SELECT c0.run_id, c0.business_key, c0.valid_from, c0.inserted, c0.old_valid_to,"
		"               c0.old_is_current, c0.old_type1"
		"          FROM scd2.change_log c0 WHERE c0.run_id OPERATOR(pg_catalog.=) ANY ($1)"
		"        UNION ALL SELECT u.*, NULL::pg_catalog.jsonb FROM ROWS FROM (pg_catalog.unnest($2),"
		"               pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5),"
		"               pg_catalog.unnest($6), pg_catalog.unnest($7)) AS u) c"
		" WINDOW w AS (PARTITION BY c.business_key, c.valid_from)"
		" ORDER BY c.business_key, c.valid_from, c.run_id",
		1 + SCD2_BATCH_UNDO_COLS, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the change log");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[6];
		bool		nulls[6];

		for (int c = 0; c < 6; c++)
			row[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}
	scd2_unpin(pin);
	SPI_finish();
	return (Datum) 0;
}
