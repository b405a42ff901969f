/*
 * rewind.c -- scd2.rewind(dimension, to_run) and scd2.rewind(dimension,
 * to_time): undo, in one transaction, every successful load of a
 * dimension after a run (or after the last load that finished at or
 * before an instant), newest first, each exactly as scd2.revert undoes
 * it -- with revert's own code (revert.c, run.c), so every
 * refusal of revert is a refusal of rewind.
 *
 * Order of work:
 *   1. check a revert's privileges on the dimension (SELECT, INSERT,
 *      UPDATE, DELETE) and take its lock (SHARE ROW EXCLUSIVE);
 *   2. under the lock: the target run (to_time: the newest successful
 *      load that finished at or before it; none: every load is undone),
 *      which must be a run of this dimension that was not reverted, and
 *      the successful loads after it;
 *   3. read every one of those runs and refuse, before anything is
 *      written, when one cannot be reverted (revert's refusals: no or
 *      pruned change log, ...), naming the run and the reason;
 *   4. undo them newest first (each is then the newest successful load,
 *      as revert requires); rows changed by hand since are found here and
 *      roll the whole rewind back;
 *   5. one audit row for the rewind (status 'revert'), and each undone run
 *      marked reverted by it;
 *   6. the dimension's maintained fact tables re-keyed (facts.c; checked
 *      in 1, under the lock), their count into the audit row.
 * Everything happens in the caller's transaction.  The statements that
 * touch the dimension are revert's: as the dimension's owner, in a
 * security-restricted operation.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"

PG_FUNCTION_INFO_V1(scd2_rewind_to_run);
PG_FUNCTION_INFO_V1(scd2_rewind_to_time);

/* What a rewind undoes. */
typedef struct Rewind
{
	Oid			dim_oid;
	char	   *dim_name;
	int64		to_run;			/* 0: before the first load */
	char	   *target;			/* "run 41", or "2024-06-01 ... (run 41)" */
	int			nruns;
	Run		   *runs;			/* newest first */
} Rewind;

/*
 * The runs of the dimension: those its change log names, and (loaded
 * before 0.3, without a change log) those its audit rows name.
 */
#define RUNS_OF_DIMENSION \
	"  FROM scd2.audit_log a LEFT JOIN scd2.change_log_runs r" \
	"    ON r.run_id OPERATOR(pg_catalog.=) a.run_id" \
	" WHERE (r.dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass" \
	"        OR (r.run_id IS NULL AND " SCD2_AUDIT_ROW_OF_SQL("a") "))"

/* The newest successful load finished at or before t, or 0. */
static int64
run_at_time(const Rewind *rw, TimestampTz t)
{
	Oid			argtypes[3] = {OIDOID, TEXTOID, TIMESTAMPTZOID};
	Datum		values[3] = {ObjectIdGetDatum(rw->dim_oid), CStringGetTextDatum(rw->dim_name),
	TimestampTzGetDatum(t)};
	char	   *id;

	scd2_exec_catalog("SELECT pg_catalog.max(a.run_id)" RUNS_OF_DIMENSION
							  "   AND a.status OPERATOR(pg_catalog.=) 'success'"
							  "   AND " SCD2_RUN_KNOWN_SQL("a") " OPERATOR(pg_catalog.<=) $3",
							  3, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the runs of the dimension");
	id = scd2_spi_text(0, 1);
	return id ? scd2_spi_int8(0, 1) : 0;
}

/* The target run exists, is a run of this dimension, and was not reverted. */
static void
require_target(const Rewind *rw)
{
	Oid			argtypes[3] = {OIDOID, TEXTOID, INT8OID};
	Datum		values[3] = {ObjectIdGetDatum(rw->dim_oid), CStringGetTextDatum(rw->dim_name),
	Int64GetDatum(rw->to_run)};
	char	   *status;

	scd2_exec_catalog("SELECT a.status" RUNS_OF_DIMENSION
							  "   AND a.run_id OPERATOR(pg_catalog.=) $3",
							  3, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the target run");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld is not a run of dimension %s", (long long) rw->to_run, rw->dim_name),
				 errhint("The run ids of the loads of %s are in scd2.audit_log.", rw->dim_name)));
	status = scd2_spi_text(0, 1);
	if (strcmp(status, "reverted") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld of dimension %s was reverted", (long long) rw->to_run, rw->dim_name),
				 errdetail("The dimension as it was after run %lld is no longer part of its history.",
						   (long long) rw->to_run),
				 errhint("Rewind to the run before it, or to a time.")));
}

/* The successful loads after the target, newest first, read as revert reads them. */
static void
read_runs(Rewind *rw)
{
	Oid			argtypes[3] = {OIDOID, TEXTOID, INT8OID};
	Datum		values[3] = {ObjectIdGetDatum(rw->dim_oid), CStringGetTextDatum(rw->dim_name),
	Int64GetDatum(rw->to_run)};
	int64	   *ids;

	scd2_exec_catalog("SELECT a.run_id" RUNS_OF_DIMENSION
							  "   AND a.status OPERATOR(pg_catalog.=) 'success'"
							  "   AND a.run_id OPERATOR(pg_catalog.>) $3"
							  " ORDER BY a.run_id DESC",
							  3, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the runs of the dimension");
	rw->nruns = (int) SPI_processed;
	ids = palloc(sizeof(int64) * Max(rw->nruns, 1));
	for (int i = 0; i < rw->nruns; i++)
		ids[i] = scd2_spi_int8(i, 1);
	rw->runs = palloc0(sizeof(Run) * Max(rw->nruns, 1));
	for (int i = 0; i < rw->nruns; i++)
		scd2_revert_read_run(ids[i], false, &rw->runs[i]);
}

/*
 * Refuse, before anything is written, when a run cannot be reverted:
 * revert's refusal (naming the run and the reason) becomes the detail of
 * the rewind's.
 */
static void
require_revertible(const Rewind *rw)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile int i = 0;

	PG_TRY();
	{
		for (i = 0; i < rw->nruns; i++)
			scd2_revert_require_revertible(&rw->runs[i]);
	}
	PG_CATCH();
	{
		ErrorData  *e;

		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(e->sqlerrcode),
				 errmsg("cannot rewind dimension %s to %s: run %lld cannot be reverted",
						rw->dim_name, rw->target, (long long) rw->runs[i].run_id),
				 errdetail("%s%s%s Nothing was rewound.", e->message, e->detail ? ": " : ".",
						   e->detail ? e->detail : ""),
				 errhint("A rewind undoes every successful load after its target, newest first; rewind to run %lld or later, or repair by loading a corrective batch.",
						 (long long) rw->runs[i].run_id)));
	}
	PG_END_TRY();
}

/* 4 and 5; returns the number of runs undone. */
static int64
undo_runs(Rewind *rw, TimestampTz started_at)
{
	StringInfoData ids;
	int64		deleted = 0;
	int64		restored = 0;
	int64		rewind_id;
	int64		facts;
	char	   *message;
	Scd2Metrics none;

	initStringInfo(&ids);
	for (int i = 0; i < rw->nruns; i++)
	{
		int64		d;
		int64		r;

		scd2_revert_undo(&rw->runs[i], rw->dim_name, &d, &r);
		deleted += d;
		restored += r;
		appendStringInfo(&ids, "%s%lld", i ? ", " : "", (long long) rw->runs[i].run_id);
	}
	message = psprintf("rewound to %s: reverted run%s %s: %lld rows deleted, %lld rows restored",
					   rw->target, rw->nruns > 1 ? "s" : "", ids.data,
					   (long long) deleted, (long long) restored);
	memset(&none, 0, sizeof(none));
	rewind_id = scd2_audit_write(rw->dim_oid, rw->dim_name, "", "revert", started_at, started_at, &none, message, NULL, 0);
	for (int i = 0; i < rw->nruns; i++)
		scd2_revert_mark_reverted(rw->runs[i].run_id, rewind_id);
	/* the maintained fact tables follow the history back (facts.c) */
	facts = scd2_facts_maintain(rw->dim_oid);
	scd2_audit_set_facts_rekeyed(rewind_id, facts);
	ereport(NOTICE, (errmsg("scd2: %s: %s%s", rw->dim_name, message,
							facts > 0 ? psprintf(", %lld fact%s re-keyed", (long long) facts,
												 facts == 1 ? "" : "s") : "")));
	return rw->nruns;
}

/*
 * A rewind of dimension dim_oid: to run to_run, or (has_time) to the
 * last load finished at or before to_time.
 */
static int64
run_rewind(Oid dim_oid, int64 to_run, bool has_time, TimestampTz to_time)
{
	TimestampTz started_at = GetCurrentTimestamp();
	Rewind		rw;
	int			pin;
	int64		n;

	if (get_rel_relkind(dim_oid) == '\0')
		scd2_report_no_relation(dim_oid);
	if (has_time && TIMESTAMP_NOT_FINITE(to_time))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("to_time must be a finite instant")));
	memset(&rw, 0, sizeof(rw));
	rw.dim_oid = dim_oid;
	rw.dim_name = scd2_relation_display_name(dim_oid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();

	/* 1. */
	scd2_revert_check_privileges(dim_oid, rw.dim_name);
	scd2_refuse_row_security(dim_oid, scd2_relation_owner(dim_oid), "dimension", "scd2.rewind");
	scd2_require_registered_shape(dim_oid, rw.dim_name, true);
	scd2_lock_dimension(dim_oid, rw.dim_name,
						"The rewind waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s; nothing was rewound.");
	/* REPEATABLE READ, SERIALIZABLE: the transaction's snapshot must see the dimension as it is */
	scd2_refuse_stale_snapshot(dim_oid, rw.dim_name, GetTransactionSnapshot(), "nothing was rewound");
	/* the maintained fact tables it re-keys (facts.c) */
	scd2_facts_require_maintainable(dim_oid, "scd2.rewind", false, true);

	/*
	 * Everything from here on reads what committed before the lock was
	 * granted: a load this rewind waited for is one of its runs, and its
	 * change log (read with the active snapshot) must be seen too.
	 */
	PushActiveSnapshot(GetTransactionSnapshot());

	/* 2. */
	if (has_time)
	{
		rw.to_run = run_at_time(&rw, to_time);
		rw.target = rw.to_run > 0 ?
			psprintf("%s (run %lld)", timestamptz_to_str(to_time), (long long) rw.to_run) :
			psprintf("%s (before its first load)", timestamptz_to_str(to_time));
	}
	else
	{
		rw.to_run = to_run;
		rw.target = psprintf("run %lld", (long long) to_run);
		require_target(&rw);
	}
	read_runs(&rw);

	/* 3. */
	require_revertible(&rw);

	/* 4, 5 */
	n = rw.nruns > 0 ? undo_runs(&rw, started_at) : 0;
	if (n == 0)
		ereport(NOTICE,
				(errmsg("scd2: %s: no successful load after %s, nothing to rewind", rw.dim_name, rw.target)));

	PopActiveSnapshot();
	scd2_unpin(pin);
	SPI_finish();
	return n;
}

Datum
scd2_rewind_to_run(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension and to_run must not be NULL"),
				 errhint("Pass the run id of the last load to keep, from scd2.audit_log.")));
	PG_RETURN_INT64(run_rewind(PG_GETARG_OID(0), PG_GETARG_INT64(1), false, 0));
}

Datum
scd2_rewind_to_time(PG_FUNCTION_ARGS)
{
	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension and to_time must not be NULL"),
				 errhint("Pass the instant to rewind to: every load that finished after it is undone.")));
	PG_RETURN_INT64(run_rewind(PG_GETARG_OID(0), 0, true, PG_GETARG_TIMESTAMPTZ(1)));
}
