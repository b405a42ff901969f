/*
 * scan.c -- the as-of index scan, kept open under its own resource
 * owner across the calls of one query and closed at the end of the query,
 * when the snapshot changes, and at (sub)transaction end (the transaction
 * callbacks); the probe of one call; and the one reader of the index's
 * entries that the probe and the bulk map (map.c) share.
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/table.h"
#include "access/visibilitymap.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "utils/memutils.h"

#include "scd2.h"
#include "asof/asof.h"

/* Caches with an open scan, closed at (sub)transaction end. */
static dlist_head open_caches = DLIST_STATIC_INIT(open_caches);
static bool callbacks_registered = false;

static void asof_opencxt_gone(void *arg);
static void scd2_asof_xact_callback(XactEvent event, void *arg);
static void scd2_asof_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									   SubTransactionId parentSubid, void *arg);

/* The (sub)transaction callbacks that close open scans, once per backend. */
void
scd2_asof_register_callbacks(void)
{
	if (!callbacks_registered)
	{
		RegisterXactCallback(scd2_asof_xact_callback, NULL);
		RegisterSubXactCallback(scd2_asof_subxact_callback, NULL);
		callbacks_registered = true;
	}
}

/* Is a version ending at valid_to (not NULL) still valid at at? */
static bool
before_valid_to(AsofCache *c, Datum at, Datum valid_to)
{
	if (c->vftype == DATEOID)
	{
		DateADT		vt = DatumGetDateADT(valid_to);

		return DATE_IS_NOEND(vt) || DatumGetDateADT(at) < vt;
	}
	else
	{
		Timestamp	vt = DatumGetTimestamp(valid_to);

		return TIMESTAMP_IS_NOEND(vt) || DatumGetTimestamp(at) < vt;
	}
}

int64
scd2_asof_sk_value(AsofCache *c, Datum d)
{
	switch (c->sktype)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/*
 * Remember the snapshot answers are read under, and what it is now (in the
 * current memory context), to see it change (lookup.c, snapshot_changed).
 */
void
scd2_asof_keep_snapshot(AsofCache *c, Snapshot snapshot)
{
	c->snapshot = snapshot;
	c->snap = *snapshot;
	c->snap.xip = palloc(sizeof(TransactionId) * Max(snapshot->xcnt, 1));
	if (snapshot->xcnt > 0)
		memcpy(c->snap.xip, snapshot->xip, sizeof(TransactionId) * snapshot->xcnt);
	c->snap.subxip = palloc(sizeof(TransactionId) * Max(snapshot->subxcnt, 1));
	if (snapshot->subxcnt > 0)
		memcpy(c->snap.subxip, snapshot->subxip, sizeof(TransactionId) * snapshot->subxcnt);
}

/*
 * Open the dimension, its as-of index and a scan of it, to be reused by the
 * following calls of this call site.
 *
 * The executor gives a plain function no end-of-query hook, so the scan is
 * kept open with resources that cannot leak into the transaction's resource
 * owners: the relcache references, buffer pins and tuple descriptor
 * references it takes go to a resource owner of our own (the locks are taken
 * in the current owner, as any relation_open would, and last until the
 * transaction ends).  It is closed when the cache's memory goes away (the end
 * of the query), when the cache is rebuilt, and at the end or abort of any
 * (sub)transaction (scd2_asof_xact_callback), whichever comes first; a closed
 * cache is rebuilt at the next call.
 */
void
scd2_asof_open(AsofCache *c, Snapshot snapshot)
{
	ResourceOwner saved = CurrentResourceOwner;
	MemoryContext oldcxt;

	LockRelationOid(c->relid, AccessShareLock);
	LockRelationOid(c->indexid, AccessShareLock);

	c->owner = ResourceOwnerCreate(NULL, "scd2.asof");
	c->open = true;
	dlist_push_head(&open_caches, &c->node);

	/*
	 * The scan's memory (and the map's) in a context of its own, freed when
	 * the scan is closed: a call site that reopens its scan at every call (a
	 * PL/pgSQL loop whose statements each take a new snapshot) stays flat.
	 */
	c->opencxt = AllocSetContextCreate(c->cxt, "scd2.asof scan", ALLOCSET_DEFAULT_SIZES);
	c->opencb.func = asof_opencxt_gone;
	c->opencb.arg = c;
	MemoryContextRegisterResetCallback(c->opencxt, &c->opencb);
	c->ncalls = 0;
	c->map_state = MAP_NONE;
	c->map = NULL;

	oldcxt = MemoryContextSwitchTo(c->opencxt);
	CurrentResourceOwner = c->owner;
	PG_TRY();
	{
		c->heap = table_open(c->relid, NoLock);
		c->index = index_open(c->indexid, NoLock);

		scd2_asof_keep_snapshot(c, snapshot);
		c->scan = scd2_index_beginscan(c->heap, c->index, c->snapshot, c->nkeys + 1, 0);
		c->scan->xs_want_itup = c->index_only;
		scd2_prepare_btree_scan(c->scan);
		c->slot = table_slot_create(c->heap, NULL);
		c->vmbuffer = InvalidBuffer;
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
		MemoryContextSwitchTo(oldcxt);
	}
	PG_END_TRY();
}

/*
 * Close the scan: release everything its resource owner holds.  Quietly:
 * this is the normal way to close it, not a leak.  Memory is left to the
 * cache's context.
 */
void
scd2_asof_close(AsofCache *c)
{
	if (!c->open)
		return;
	c->open = false;
	dlist_delete(&c->node);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_BEFORE_LOCKS, false, true);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_LOCKS, false, true);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_AFTER_LOCKS, false, true);
	ResourceOwnerDelete(c->owner);
	c->owner = NULL;
	if (c->opencxt != NULL)
		MemoryContextDelete(c->opencxt);	/* asof_opencxt_gone clears it */
	c->map = NULL;
	c->map_state = MAP_NONE;
	c->ncalls = 0;
	c->heap = NULL;
	c->index = NULL;
	c->scan = NULL;
	c->slot = NULL;
	c->vmbuffer = InvalidBuffer;
}

static void
asof_close_all(void)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &open_caches)
		scd2_asof_close(dlist_container(AsofCache, node, iter.cur));
}

/*
 * At the end of a transaction, and at the abort of a subtransaction (whose
 * locks are released, and which may have interrupted a call half-way), close
 * every open scan.
 */
static void
scd2_asof_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			asof_close_all();
			break;
		default:
			break;
	}
}

static void
scd2_asof_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		asof_close_all();
}

/*
 * The open scan's memory is going away: closed, or its parent (the cache's)
 * is being deleted, which deletes its children before calling
 * asof_cache_reset.
 */
static void
asof_opencxt_gone(void *arg)
{
	AsofCache  *c = (AsofCache *) arg;

	c->opencxt = NULL;
	c->map = NULL;
}

/*
 * btgettuple allocates its array of killed items lazily, in the memory
 * context current at the time, which for us is a per-call context: allocate
 * it now, with the scan.
 */
void
scd2_prepare_btree_scan(IndexScanDesc scan)
{
	BTScanOpaque so = (BTScanOpaque) scan->opaque;

	Assert(scan->indexRelation->rd_rel->relam == BTREE_AM_OID);
	if (so->killedItems == NULL)
		so->killedItems = (int *) palloc(MaxTIDsPerBTreePage * sizeof(int));
}

/* The cache's memory is going away (end of query, or rebuilt). */
void
scd2_asof_cache_reset(void *arg)
{
	scd2_asof_close((AsofCache *) arg);
}

/*
 * The next entry of an as-of index scan, as the version it points to:
 * valid_to and the surrogate key, and with whole also the business key
 * columns and valid_from.  The one reader of index entries, for the probe
 * and the bulk map.  Index-only when the index carries the columns (as
 * nodeIndexonlyscan.c: the heap is read only when the page is not
 * all-visible, and an entry without a visible tuple is skipped); else
 * through the heap tuple into c->slot.  With lock_page an all-visible
 * page read index-only is predicate-locked (the heap fetch locks the
 * tuple itself); the bulk map locks the whole relation instead.  Returns
 * false at the end of the scan.
 */
bool
scd2_asof_next_entry(AsofCache *c, IndexScanDesc scan, ScanDirection dir,
					 bool whole, bool lock_page, AsofEntry *e)
{
	ItemPointer tid;

	e->vtnull = e->sknull = e->vfnull = true;
	e->vt = e->sk = e->vf = (Datum) 0;
	if (!c->index_only)
	{
		if (!index_getnext_slot(scan, dir, c->slot))
			return false;
		if (whole)
		{
			for (int i = 0; i < c->nkeys; i++)
				e->values[i] = slot_getattr(c->slot, c->keys[i].attnum, &e->isnull[i]);
			e->vf = slot_getattr(c->slot, c->vf_attnum, &e->vfnull);
		}
		e->vt = slot_getattr(c->slot, c->vt_attnum, &e->vtnull);
		e->sk = slot_getattr(c->slot, c->sk_attnum, &e->sknull);
		return true;
	}

	while ((tid = index_getnext_tid(scan, dir)) != NULL)
	{
		if (!VM_ALL_VISIBLE(c->heap, ItemPointerGetBlockNumber(tid), &c->vmbuffer))
		{
			if (!index_fetch_heap(scan, c->slot))
				continue;		/* no visible tuple, try the next entry */
			ExecClearTuple(c->slot);
			if (scan->xs_heap_continue)
				elog(ERROR, "non-MVCC snapshots are not supported by scd2.asof");
		}
		else if (lock_page)
			PredicateLockPage(c->heap, ItemPointerGetBlockNumber(tid), c->snapshot);

		if (scan->xs_itup != NULL && whole)
		{
			/* every column: one pass over the tuple (the map's walk) */
			Datum		values[INDEX_MAX_KEYS];
			bool		isnull[INDEX_MAX_KEYS];

			index_deform_tuple(scan->xs_itup, scan->xs_itupdesc, values, isnull);
			for (int i = 0; i < c->nkeys; i++)
			{
				e->values[i] = values[i];
				e->isnull[i] = isnull[i];
			}
			e->vf = values[c->nkeys];
			e->vfnull = isnull[c->nkeys];
			e->vt = values[c->vt_idxatt - 1];
			e->vtnull = isnull[c->vt_idxatt - 1];
			e->sk = values[c->sk_idxatt - 1];
			e->sknull = isnull[c->sk_idxatt - 1];
		}
		else if (scan->xs_itup != NULL)
		{
			e->vt = index_getattr(scan->xs_itup, c->vt_idxatt, scan->xs_itupdesc, &e->vtnull);
			e->sk = index_getattr(scan->xs_itup, c->sk_idxatt, scan->xs_itupdesc, &e->sknull);
		}
		else if (scan->xs_hitup != NULL)
		{
			if (whole)
			{
				for (int i = 0; i < c->nkeys; i++)
					e->values[i] = heap_getattr(scan->xs_hitup, i + 1, scan->xs_hitupdesc, &e->isnull[i]);
				e->vf = heap_getattr(scan->xs_hitup, c->nkeys + 1, scan->xs_hitupdesc, &e->vfnull);
			}
			e->vt = heap_getattr(scan->xs_hitup, c->vt_idxatt, scan->xs_hitupdesc, &e->vtnull);
			e->sk = heap_getattr(scan->xs_hitup, c->sk_idxatt, scan->xs_hitupdesc, &e->sknull);
		}
		else
			elog(ERROR, "no data returned for index-only scan");
		return true;
	}
	return false;
}

/*
 * Probe the as-of index.  Returns true and sets *sk if the latest version
 * starting at or before the instant (atv, in valid_from's type) is still
 * valid at that instant.  Runs with the scan's resource owner current.
 */
bool
scd2_asof_probe(AsofCache *c, Datum atv, int64 *sk)
{
	IndexScanDesc scan = c->scan;
	AsofEntry	e;
	bool		found;

	index_rescan(scan, c->scankeys, c->nkeys + 1, NULL, 0);
	found = scd2_asof_next_entry(c, scan, c->direction, false, true, &e);
	if (found)
		found = !e.sknull && (e.vtnull || before_valid_to(c, atv, e.vt));
	if (found)
		*sk = scd2_asof_sk_value(c, e.sk);

	/*
	 * Drop the pins on the index leaf page and the heap page until the next
	 * call, so that a paused query (a cursor) does not hold up VACUUM.  The
	 * visibility map page stays pinned.
	 */
	ExecClearTuple(c->slot);
	index_rescan(scan, NULL, 0, NULL, 0);
	return found;
}
