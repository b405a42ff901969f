/*
 * commit_stamp.c -- when a run became known: the committed_at of the audit
 * rows a transaction wrote, set in that transaction at its pre-commit (or at
 * PREPARE TRANSACTION), the last moment it can still write.  No reader sees
 * the run before its commit, which follows; scd2.dimension_at(..., known_at)
 * and scd2.rewind(..., to_time) go by the commit timestamp where
 * track_commit_timestamp keeps one, else by this (SCD2_RUN_KNOWN_SQL).
 */
#include "scd2.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "common/common.h"
#include "history/history.h"

/* The run ids of the audit rows this transaction wrote (TopTransactionContext). */
static List *pending_runs = NIL;
static bool callback_registered = false;

/* Stamp this transaction's runs; at most once, then forget them. */
static void
stamp_runs(void)
{
	List	   *runs = pending_runs;
	Datum	   *ids;
	int			n = 0;
	ListCell   *lc;
	Oid			argtypes[1] = {INT8ARRAYOID};
	Datum		values[1];

	pending_runs = NIL;
	if (runs == NIL || !scd2_installed("audit_log", "committed_at"))
		return;
	ids = palloc(sizeof(Datum) * list_length(runs));
	foreach(lc, runs)
		ids[n++] = Int64GetDatum(*(int64 *) lfirst(lc));
	values[0] = PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
												TYPALIGN_DOUBLE));
	/* the portals are closed by now: the statement needs a snapshot of its own */
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	/* a row a rolled-back subtransaction wrote is not there: nothing to stamp */
	scd2_exec_catalog("UPDATE scd2.audit_log SET committed_at = pg_catalog.clock_timestamp()"
					  " WHERE run_id OPERATOR(pg_catalog.=) ANY ($1)",
					  1, argtypes, values, NULL, false, SPI_OK_UPDATE, "stamping the runs' commit");
	SPI_finish();
	PopActiveSnapshot();
}

static void
commit_stamp_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			stamp_runs();
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PREPARE:
			pending_runs = NIL;	/* its memory went with the transaction */
			break;
		default:
			break;
	}
}

/* An audit row of run_id was written: stamp it when the transaction commits. */
void
scd2_commit_stamp_remember(int64 run_id)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	int64	   *id = palloc(sizeof(int64));

	*id = run_id;
	pending_runs = lappend(pending_runs, id);
	MemoryContextSwitchTo(old);
	if (!callback_registered)
	{
		RegisterXactCallback(commit_stamp_xact_callback, NULL);
		callback_registered = true;
	}
}
