/*
 * snapshot_check.c -- a load, a revert or a rewind in a REPEATABLE READ or
 * SERIALIZABLE transaction refuses a dimension whose state changed after
 * the transaction's snapshot was taken.
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
 * What such an operation reads to decide what it writes is the
 * dimension and scd2's own rows of it (watched_tables below): its
 * registration, an order-free dimension's arrival memory, which a load
 * can change without writing the dimension (a delete of an absent key,
 * an unchanged observation: issue 52), and its runs
 * (scd2.change_log_runs: every load, revert and prune writes its run's
 * row or marks it, so a change to the change log's rows --
 * scd2.change_log, scd2.change_log_batches, keyed by run -- comes with a
 * change to these).
 *
 * The check, taken under the lock, when no other writer of these can be
 * running: every tuple of the dimension (each heap leaf partition) and
 * every tuple of the watched tables naming it, whether it is visible to
 * the transaction's snapshot and to the latest snapshot.  A tuple one of
 * them sees and the other does not was inserted or deleted (updated) by a
 * transaction that committed after the snapshot -- unless it is this
 * transaction's own.  One sequential pass of the dimension, an index scan
 * (or a pass) of each watched table, only in these isolation levels.
 * Tables of another access method (and Citus shells, whose rows are on
 * the workers) are not scanned.
 */
#include "scd2.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/multixact.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "common/common.h"

/*
 * scd2's tables whose rows of a dimension (column "dimension") a load,
 * revert or rewind reads to decide what it writes, and how the refusal
 * names a change to them.  A table an older install lacks is skipped
 * (the library can be newer than the extension's objects).
 */
static const struct
{
	const char *table;
	const char *what;
}			watched_tables[] = {
	{"dimensions", "the dimension's registration (scd2.dimensions)"},
	{"arrival_memory", "the dimension's arrival memory (scd2.arrival_memory)"},
	{"change_log_runs", "the dimension's runs (scd2.change_log_runs)"},
};

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

/* Whether one snapshot only sees a tuple (in buf), and not by our doing. */
static bool
tuple_changed_since(HeapTuple tup, Buffer buf, Snapshot xact, Snapshot latest)
{
	bool		seen;
	bool		seen_now;
	bool		changed;

	LockBuffer(buf, BUFFER_LOCK_SHARE);
	seen = HeapTupleSatisfiesVisibility(tup, xact, buf);
	seen_now = HeapTupleSatisfiesVisibility(tup, latest, buf);
	changed = seen != seen_now && !written_by_us(tup->t_data);
	LockBuffer(buf, BUFFER_LOCK_UNLOCK);
	return changed;
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
		changed = tuple_changed_since(tup, hscan->rs_cbuf, xact, latest);
	table_endscan(scan);
	return changed;
}

/* Whether some tuple of the dimension's heap leaves is seen by one snapshot only. */
static bool
dimension_changed_since(Oid dim_oid, Snapshot xact, Snapshot latest)
{
	List	   *rels = find_all_inheritors(dim_oid, AccessShareLock, NULL);
	ListCell   *lc;
	bool		changed = false;

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
	return changed;
}

/*
 * A valid, non-partial index of rel whose first column is attnum, or
 * InvalidOid (the scan then reads the table).
 */
static Oid
index_leading_with(Relation rel, AttrNumber attnum)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Relation	idx = index_open(lfirst_oid(lc), AccessShareLock);

		if (idx->rd_index->indisvalid && idx->rd_index->indnkeyatts >= 1 &&
			idx->rd_index->indkey.values[0] == attnum &&
			heap_attisnull(idx->rd_indextuple, Anum_pg_index_indpred, NULL))
			found = RelationGetRelid(idx);
		index_close(idx, AccessShareLock);
		if (OidIsValid(found))
			break;
	}
	list_free(indexes);
	return found;
}

/*
 * Whether some tuple of scd2.<table> whose "dimension" is dim_oid is seen
 * by one snapshot only (false when the table is not installed).
 */
static bool
rows_changed_since(const char *table, Oid dim_oid, Snapshot xact, Snapshot latest)
{
	Oid			nsp = get_namespace_oid("scd2", true);
	Oid			relid = OidIsValid(nsp) ? get_relname_relid(table, nsp) : InvalidOid;
	AttrNumber	attnum;
	Relation	rel;
	Oid			index;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	bool		changed = false;

	if (!OidIsValid(relid) || (attnum = get_attnum(relid, "dimension")) == InvalidAttrNumber)
		return false;
	rel = table_open(relid, AccessShareLock);
	if (rel->rd_tableam != GetHeapamTableAmRoutine())
	{
		table_close(rel, AccessShareLock);
		return false;
	}
	index = index_leading_with(rel, attnum);
	ScanKeyInit(&key, attnum, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(dim_oid));
	scan = systable_beginscan(rel, index, OidIsValid(index), SnapshotAny, 1, &key);
	while (!changed && (tup = systable_getnext(scan)) != NULL)
		changed = tuple_changed_since(tup, ((BufferHeapTupleTableSlot *) scan->slot)->buffer,
									  xact, latest);
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return changed;
}

/*
 * Refuse, with serialization_failure, when the transaction uses one
 * snapshot for all its statements and the dimension, or scd2's rows of
 * it, changed after it.  xact: the snapshot the caller reads with;
 * what_nothing: "nothing was loaded" or the like, for the detail.  The
 * caller holds the dimension's lock.
 */
void
scd2_refuse_stale_snapshot(Oid dim_oid, const char *dim_name, Snapshot xact,
						   const char *what_nothing)
{
	Snapshot	latest;
	const char *changed = NULL;

	if (!IsolationUsesXactSnapshot())
		return;
	latest = RegisterSnapshot(GetLatestSnapshot());
	if (dimension_changed_since(dim_oid, xact, latest))
		changed = "the dimension";
	for (int i = 0; changed == NULL && i < lengthof(watched_tables); i++)
		if (rows_changed_since(watched_tables[i].table, dim_oid, xact, latest))
			changed = watched_tables[i].what;
	UnregisterSnapshot(latest);
	if (changed != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of dimension %s", dim_name),
				 errdetail("A transaction that committed after this transaction's snapshot was taken changed %s, and a %s transaction cannot see that change; %s.",
						   changed, XactIsoLevel == XACT_SERIALIZABLE ? "SERIALIZABLE" : "REPEATABLE READ",
						   what_nothing),
				 errhint("Retry the transaction.")));
}
