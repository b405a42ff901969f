/*
 * snapshot_check.c -- a load or a revert in a REPEATABLE READ or
 * SERIALIZABLE transaction refuses a dimension that changed after the
 * transaction's snapshot was taken.
 *
 * The load's lock (SHARE ROW EXCLUSIVE, util.c) waits for every writer of
 * the dimension, but in these isolation levels every statement still
 * reads with the transaction's first snapshot: a change committed in
 * between (another load, a revert, a hand edit) is invisible, and a load
 * classifying on that view would write a second current version, a
 * revert would undo a run that is no longer the newest.  PostgreSQL's own
 * answer to such a conflict (heap_update in REPEATABLE READ) is
 * serialization_failure, which retry logic knows: so here.
 *
 * The check, taken under the lock, when no other writer can be running:
 * every tuple of the dimension (each heap leaf partition), whether it is
 * visible to the transaction's snapshot and to the latest snapshot.  A
 * tuple one of them sees and the other does not was inserted or deleted
 * (updated) by a transaction that committed after the snapshot -- unless
 * it is this transaction's own.  One sequential pass, only in these
 * isolation levels.  Tables of another access method (and Citus shells,
 * whose rows are on the workers) are not scanned.
 */
#include "scd2.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/common.h"

/* Whether a transaction of this tuple (inserter, updater) is ours. */
static bool
written_by_us(HeapTupleHeader htup)
{
	TransactionId xmax;

	if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmin(htup)))
		return true;
	if (htup->t_infomask & HEAP_XMAX_INVALID)
		return false;
	xmax = (htup->t_infomask & HEAP_XMAX_IS_MULTI) ?
		HeapTupleGetUpdateXid(htup) : HeapTupleHeaderGetRawXmax(htup);
	return TransactionIdIsValid(xmax) && TransactionIdIsCurrentTransactionId(xmax);
}

/* Whether some tuple of a heap table is seen by one snapshot only. */
static bool
heap_changed_since(Relation rel, Snapshot xact, Snapshot latest)
{
	TableScanDesc scan = table_beginscan(rel, SnapshotAny, 0, NULL);
	HeapScanDesc hscan = (HeapScanDesc) scan;
	HeapTuple	tup;
	bool		changed = false;

	while (!changed && (tup = heap_getnext(scan, ForwardScanDirection)) != NULL)
	{
		bool		seen;
		bool		seen_now;

		LockBuffer(hscan->rs_cbuf, BUFFER_LOCK_SHARE);
		seen = HeapTupleSatisfiesVisibility(tup, xact, hscan->rs_cbuf);
		seen_now = HeapTupleSatisfiesVisibility(tup, latest, hscan->rs_cbuf);
		changed = seen != seen_now && !written_by_us(tup->t_data);
		LockBuffer(hscan->rs_cbuf, BUFFER_LOCK_UNLOCK);
	}
	table_endscan(scan);
	return changed;
}

/*
 * Refuse, with serialization_failure, when the transaction uses one
 * snapshot for all its statements and the dimension changed after it.
 * xact: the snapshot the caller reads with; what_nothing: "nothing was
 * loaded" or the like, for the detail.  The caller holds the dimension's
 * lock.
 */
void
scd2_refuse_stale_snapshot(Oid dim_oid, const char *dim_name, Snapshot xact,
						   const char *what_nothing)
{
	List	   *rels;
	ListCell   *lc;
	Snapshot	latest;
	bool		changed = false;

	if (!IsolationUsesXactSnapshot())
		return;
	latest = RegisterSnapshot(GetLatestSnapshot());
	rels = find_all_inheritors(dim_oid, AccessShareLock, NULL);
	foreach(lc, rels)
	{
		Relation	rel = table_open(lfirst_oid(lc), AccessShareLock);

		if (rel->rd_rel->relkind == RELKIND_RELATION &&
			rel->rd_tableam == GetHeapamTableAmRoutine())
			changed = heap_changed_since(rel, xact, latest);
		table_close(rel, NoLock);
		if (changed)
			break;
	}
	UnregisterSnapshot(latest);
	if (changed)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of dimension %s", dim_name),
				 errdetail("A transaction that committed after this transaction's snapshot was taken changed the dimension, and a %s transaction cannot see that change; %s.",
						   XactIsoLevel == XACT_SERIALIZABLE ? "SERIALIZABLE" : "REPEATABLE READ",
						   what_nothing),
				 errhint("Retry the transaction.")));
}
