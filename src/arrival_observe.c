/*
 * arrival_observe.c -- the fast path of an order-free load (load_classify.c)
 * through a receiver: its change rows go into the change table, and its
 * no-op observations of a version -- a staged row whose tracked, Type 1
 * and other columns all equal its key's current version, at a later
 * instant -- are kept in memory as (instant, surrogate key) pairs instead
 * of rows.  arrival_memory.c stores them compactly after the change log:
 * one scd2.arrival_memory row per instant (and chunk) holding the versions'
 * surrogate keys, where a row per observation cost as much as the load
 * itself (bench/RESULTS.md, issue 24).
 *
 * The query's rows are the change table's columns, in its order and of its
 * types, followed by two more: the observation's instant (as the memory
 * keeps instants, timestamptz) and its version's surrogate key, both NULL
 * for a change row.  A change row is written into the change table as
 * matview.c writes a new heap (table_tuple_insert with a bulk-insert
 * state): the table is the load's own temporary work table, without
 * indexes, constraints or triggers, and every value in the row was
 * computed by the query, as the dimension's owner.  Writing it here
 * instead of by INSERT ... SELECT is what keeps the observations out of
 * it: 170,000 such rows of a 200,000-row batch were written there and
 * moved out again.
 */
#include "scd2.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "tcop/dest.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "arrival.h"

typedef struct ObserveReceiver
{
	DestReceiver pub;			/* first: a DestReceiver */
	const char *relname;		/* the change table, in pg_temp */
	ArrivalObserved *obs;		/* where the observations go */
	Relation	rel;
	TupleTableSlot *slot;		/* a change row, in the table's own slot */
	BulkInsertState bistate;
	CommandId	cid;
	int			natts;			/* the change table's columns */
} ObserveReceiver;

/*
 * The query's columns must be the table's, physically: a mismatch is a
 * bug of the statement that feeds the receiver.
 */
static void
check_shape(TupleDesc query, TupleDesc table)
{
	if (query->natts != table->natts + 2)
		elog(ERROR, "scd2: the fast path gives %d columns for a change table of %d", query->natts,
			 table->natts);
	for (int i = 0; i < table->natts; i++)
	{
		Oid			q = getBaseType(TupleDescAttr(query, i)->atttypid);
		Oid			t = getBaseType(TupleDescAttr(table, i)->atttypid);

		if (q != t)
			elog(ERROR, "scd2: column %d of the fast path is of type %u, the change table's of %u",
				 i + 1, q, t);
	}
	if (TupleDescAttr(query, table->natts)->atttypid != TIMESTAMPTZOID ||
		TupleDescAttr(query, table->natts + 1)->atttypid != INT8OID)
		elog(ERROR, "scd2: the fast path's observation columns are not timestamptz and bigint");
}

static void
observe_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	ObserveReceiver *r = (ObserveReceiver *) self;

	r->rel = table_openrv(makeRangeVar("pg_temp", (char *) r->relname, -1), RowExclusiveLock);
	check_shape(typeinfo, RelationGetDescr(r->rel));
	r->natts = RelationGetDescr(r->rel)->natts;
	r->slot = table_slot_create(r->rel, NULL);
	r->bistate = GetBulkInsertState();
	r->cid = GetCurrentCommandId(true);
}

/* Keep an observation, in the load's memory context. */
static void
keep_observation(ArrivalObserved *obs, TimestampTz at, int64 sk)
{
	if (obs->n == obs->cap)
	{
		MemoryContext old = MemoryContextSwitchTo(obs->cxt);

		obs->cap = obs->cap ? obs->cap * 2 : 1024;
		obs->at = obs->at ? repalloc_huge(obs->at, sizeof(TimestampTz) * obs->cap)
			: palloc(sizeof(TimestampTz) * obs->cap);
		obs->sk = obs->sk ? repalloc_huge(obs->sk, sizeof(int64) * obs->cap)
			: palloc(sizeof(int64) * obs->cap);
		MemoryContextSwitchTo(old);
	}
	obs->at[obs->n] = at;
	obs->sk[obs->n] = sk;
	obs->n++;
}

static bool
observe_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ObserveReceiver *r = (ObserveReceiver *) self;
	TupleTableSlot *out = r->slot;

	slot_getallattrs(slot);
	if (!slot->tts_isnull[r->natts + 1])
	{
		if (slot->tts_isnull[r->natts])
			elog(ERROR, "scd2: an observation of the fast path has no instant");
		keep_observation(r->obs, DatumGetTimestampTz(slot->tts_values[r->natts]),
						 DatumGetInt64(slot->tts_values[r->natts + 1]));
		return true;
	}
	ExecClearTuple(out);
	memcpy(out->tts_values, slot->tts_values, sizeof(Datum) * r->natts);
	memcpy(out->tts_isnull, slot->tts_isnull, sizeof(bool) * r->natts);
	ExecStoreVirtualTuple(out);
	table_tuple_insert(r->rel, out, r->cid, 0, r->bistate);
	return true;
}

static void
observe_shutdown(DestReceiver *self)
{
	ObserveReceiver *r = (ObserveReceiver *) self;

	FreeBulkInsertState(r->bistate);
	table_finish_bulk_insert(r->rel, 0);
	ExecDropSingleTupleTableSlot(r->slot);
	table_close(r->rel, NoLock);
}

static void
observe_destroy(DestReceiver *self)
{
	pfree(self);
}

/*
 * A receiver of the fast path's rows: change rows into relname (a table of
 * the session's temporary schema), observations appended to obs.
 */
DestReceiver *
scd2_arrival_observer(const char *relname, ArrivalObserved *obs)
{
	ObserveReceiver *r = palloc0(sizeof(ObserveReceiver));

	r->pub.receiveSlot = observe_receive;
	r->pub.rStartup = observe_startup;
	r->pub.rShutdown = observe_shutdown;
	r->pub.rDestroy = observe_destroy;
	r->pub.mydest = DestNone;
	r->relname = relname;
	r->obs = obs;
	return (DestReceiver *) r;
}
