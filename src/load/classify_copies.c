/*
 * classify_copies.c -- the fast path's classified rows (classify.c)
 * into the change table, through a receiver: one staging row, classified
 * against its key's current version, becomes its copies -- the update copy
 * that closes, deletes or updates the version, the insert copy of its new
 * version, an order-free load's remember copy of an event the dimension
 * remembers -- or, an order-free load's no-op observation of a version (a
 * staged row whose tracked, Type 1 and other columns all equal its key's
 * current version, at a later instant), an (instant, surrogate key) pair
 * kept in memory: history/arrival_memory.c stores them compactly after the change
 * log, one scd2.arrival_memory row per instant (and chunk).
 *
 * The copies are made here, in C, and not by the query: expanding each row
 * in SQL (a set-returning function, or a LATERAL VALUES and a filter) and
 * projecting every change column as a CASE of the copy cost more than the
 * classification itself once most rows were observations (an in-order
 * batch of 200,000 rows, 170,000 unchanged: ~55 ms of the order-free
 * load's extra ~75 ms, bench/RESULTS.md, issue 24).
 *
 * The query's rows (QueryColumn below): the class (FC_*, worktable.h),
 * the row's instant as the valid_from and as the valid_to type and, for an
 * observation, as the memory keeps instants (timestamptz), whether it is
 * present (not a delete), the current version's valid_from and surrogate
 * key, then the key and payload columns in the change table's order and
 * of its types.  A change row is written into the change table as
 * matview.c writes a new heap (table_tuple_insert with a bulk-insert
 * state): the table is the load's own temporary work table, without
 * indexes, constraints or triggers, and every value in the row was
 * computed by the query, as the dimension's owner; the new versions'
 * surrogate keys are drawn here (nextval_internal, with the owner's
 * privileges checked) in the order the query gives the rows.  When the
 * query runs in parallel (fast_path_plan.c) the receiver runs in the
 * leader in parallel mode, where a sequence cannot be advanced: the insert
 * copies that need a key are then kept in a tuplestore and written when
 * the executor has left parallel mode (the receiver's shutdown), their
 * keys drawn then, in the same order.
 */
#include "scd2.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "miscadmin.h"
#include "executor/tuptable.h"
#include "nodes/makefuncs.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "history/history.h"
#include "load/steps.h"
#include "load/worktable.h"

/* The query's leading columns, before the key and payload columns. */
typedef enum QueryColumn
{
	Q_CLS,						/* int4: FC_* */
	Q_T,						/* the instant, of the valid_from type */
	Q_T_VT,						/* the instant, of the valid_to type */
	Q_T_OBSERVED,				/* an observation's instant (timestamptz) */
	Q_PRESENT,					/* bool: not a delete */
	Q_DVF,						/* the current version's valid_from */
	Q_DSK,						/* int8: its surrogate key */
	Q_NCOLS
} QueryColumn;

/* The change table's leading columns (worktable.c: changes_cols). */
typedef enum ChangeColumn
{
	C_ACTION,
	C_ORIGIN,
	C_COUNTS,
	C_TVF,
	C_SK,
	C_VF,
	C_VT,
	C_CUR,
	C_SET_Y,
	C_NCOLS
} ChangeColumn;

/* A classified row's copies. */
typedef enum Copy
{
	COPY_UPDATE,				/* closes, deletes or updates the current version */
	COPY_INSERT,				/* the new version */
	COPY_REMEMBER				/* order-free: the event to remember */
} Copy;

/* The actions a copy writes (action_of). */
typedef enum CopyAction
{
	A_CLOSE, A_DELETE, A_TYPE1, A_COMPLEX, A_INSERT, A_NEW_VERSION, A_REMEMBER,
	A_NACTIONS
} CopyAction;

typedef struct CopyReceiver
{
	DestReceiver pub;			/* first: a DestReceiver */
	const char *relname;		/* the change table, in pg_temp */
	ArrivalObserved *obs;		/* where the observations go, or NULL */
	int64	   *complex_rows;	/* counts the rows found late (FC_COMPLEX) */
	Oid			sk_seq;			/* draws the insert copies' surrogate keys */
	int			npayload;		/* tracked, Type 1, other columns */
	int			ntracked;
	int			ntype1;
	int			nkeys;
	Relation	rel;
	TupleTableSlot *slot;		/* a change row, in the table's own slot */
	Tuplestorestate *keyless;	/* insert copies whose keys wait for the end of parallel mode */
	TupleTableSlot *keyless_slot;	/* one of them read back */
	BulkInsertState bistate;
	CommandId	cid;
	Datum		actions[A_NACTIONS];	/* their texts (action_literals) */
} CopyReceiver;

/* The SQL literal of each action, in CopyAction's order. */
static const char *const action_literals[] = {
	WT_ACT_CLOSE, WT_ACT_DELETE, WT_ACT_TYPE1, WT_ACT_COMPLEX,
	WT_ACT_INSERT, WT_ACT_NEW_VERSION, WT_ACT_REMEMBER,
};

StaticAssertDecl(lengthof(action_literals) == A_NACTIONS, "a literal for every action");

/* The text of a SQL literal 'word' (worktable.h's WT_ACT_*). */
static Datum
literal_text(const char *literal)
{
	size_t		len = strlen(literal);

	Assert(len >= 2 && literal[0] == '\'' && literal[len - 1] == '\'');
	return PointerGetDatum(cstring_to_text_with_len(literal + 1, (int) len - 2));
}

/*
 * The query's columns must be the table's, physically: a mismatch is a
 * bug of the statement that feeds the receiver.
 */
static void
check_shape(TupleDesc query, TupleDesc table)
{
	static const Oid leading[Q_NCOLS] = {INT4OID, InvalidOid, InvalidOid, TIMESTAMPTZOID, BOOLOID,
	InvalidOid, INT8OID};
	Oid			vf = getBaseType(TupleDescAttr(table, C_VF)->atttypid);
	Oid			vt = getBaseType(TupleDescAttr(table, C_VT)->atttypid);

	if (query->natts - Q_NCOLS != table->natts - C_NCOLS)
		elog(ERROR, "scd2: the fast path gives %d columns for a change table of %d", query->natts,
			 table->natts);
	for (int i = 0; i < Q_NCOLS; i++)
	{
		Oid			want = i == Q_T || i == Q_DVF ? vf : i == Q_T_VT ? vt : leading[i];

		if (getBaseType(TupleDescAttr(query, i)->atttypid) != want)
			elog(ERROR, "scd2: column %d of the fast path is of type %u, not %u", i + 1,
				 TupleDescAttr(query, i)->atttypid, want);
	}
	for (int i = C_NCOLS; i < table->natts; i++)
	{
		Oid			q = getBaseType(TupleDescAttr(query, i - C_NCOLS + Q_NCOLS)->atttypid);
		Oid			t = getBaseType(TupleDescAttr(table, i)->atttypid);

		if (q != t)
			elog(ERROR, "scd2: column %d of the fast path is of type %u, the change table's of %u",
				 i - C_NCOLS + Q_NCOLS + 1, q, t);
	}
}

static void
copies_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	CopyReceiver *r = (CopyReceiver *) self;

	r->rel = table_openrv(makeRangeVar("pg_temp", (char *) r->relname, -1), RowExclusiveLock);
	check_shape(typeinfo, RelationGetDescr(r->rel));
	r->slot = table_slot_create(r->rel, NULL);
	r->bistate = GetBulkInsertState();
	r->cid = GetCurrentCommandId(true);
	/* a transaction id cannot be assigned in parallel mode: the inserts need one */
	(void) GetCurrentTransactionId();
	if (OidIsValid(r->sk_seq))
	{
		r->keyless = tuplestore_begin_heap(false, false, work_mem);
		r->keyless_slot = MakeSingleTupleTableSlot(RelationGetDescr(r->rel), &TTSOpsMinimalTuple);
	}
	for (int i = 0; i < A_NACTIONS; i++)
		r->actions[i] = literal_text(action_literals[i]);
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

/* The action a copy of a row of class cls writes. */
static CopyAction
action_of(int cls, Copy copy)
{
	if (cls == FC_COMPLEX)
		return A_COMPLEX;		/* a placeholder: the key goes the general way */
	switch (copy)
	{
		case COPY_UPDATE:
			return cls == FC_CHANGE ? A_CLOSE : cls == FC_DELETE ? A_DELETE : A_TYPE1;
		case COPY_INSERT:
			return cls == FC_NEW ? A_INSERT : A_NEW_VERSION;
		case COPY_REMEMBER:
			return A_REMEMBER;
	}
	return A_COMPLEX;			/* keep compiler quiet */
}

/*
 * One copy of the classified row in, as a change row into the table:
 *   update copy     the version's valid_from (`_tvf, `_vf) and surrogate
 *                   key; a change or a delete ends it at the instant
 *                   (`_vt) and makes it not current; a Type 1 update sets
 *                   its Type 1 columns (`_set_y); no tracked or other
 *                   values
 *   insert copy     a new version from the instant, current, its surrogate
 *                   key drawn when the load logs by surrogate keys
 *   remember copy   the event at the instant, present or a delete
 * Every copy counts in the metrics but a change's update copy (its insert
 * copy counts the change).
 */
static void
write_copy(CopyReceiver *r, TupleTableSlot *in, int cls, Copy copy)
{
	TupleTableSlot *out = r->slot;
	Datum	   *v = out->tts_values;
	bool	   *n = out->tts_isnull;
	bool		update = copy == COPY_UPDATE;
	bool		ends = update && (cls == FC_CHANGE || cls == FC_DELETE);
	bool		keyed = copy == COPY_INSERT && OidIsValid(r->sk_seq);	/* gets a drawn key */
	int			first_valued = C_NCOLS + r->nkeys;

	ExecClearTuple(out);
	v[C_ACTION] = r->actions[action_of(cls, copy)];
	n[C_ACTION] = false;
	v[C_ORIGIN] = CharGetDatum(WT_ORIGIN_FAST[1]);
	n[C_ORIGIN] = false;
	v[C_COUNTS] = BoolGetDatum(!(update && cls == FC_CHANGE));
	n[C_COUNTS] = false;
	v[C_TVF] = in->tts_values[Q_DVF];
	n[C_TVF] = !update || in->tts_isnull[Q_DVF];
	v[C_SK] = in->tts_values[Q_DSK];
	n[C_SK] = !update || in->tts_isnull[Q_DSK];
	if (keyed && !IsInParallelMode())
	{
		v[C_SK] = Int64GetDatum(nextval_internal(r->sk_seq, true));
		n[C_SK] = false;
	}
	v[C_VF] = in->tts_values[update ? Q_DVF : Q_T];
	n[C_VF] = in->tts_isnull[update ? Q_DVF : Q_T];
	v[C_VT] = in->tts_values[Q_T_VT];
	n[C_VT] = !ends || in->tts_isnull[Q_T_VT];
	v[C_CUR] = BoolGetDatum(copy == COPY_REMEMBER ? DatumGetBool(in->tts_values[Q_PRESENT]) : !ends);
	n[C_CUR] = false;
	v[C_SET_Y] = BoolGetDatum(update && cls == FC_TYPE1);
	n[C_SET_Y] = false;

	/* the key; tracked and other values only in a version or an event, Type 1 always */
	memcpy(&v[C_NCOLS], &in->tts_values[Q_NCOLS], sizeof(Datum) * r->nkeys);
	memcpy(&n[C_NCOLS], &in->tts_isnull[Q_NCOLS], sizeof(bool) * r->nkeys);
	for (int i = 0; i < r->npayload; i++)
	{
		bool		type1 = i >= r->ntracked && i < r->ntracked + r->ntype1;

		v[first_valued + i] = in->tts_values[Q_NCOLS + r->nkeys + i];
		n[first_valued + i] = (update && !type1) || in->tts_isnull[Q_NCOLS + r->nkeys + i];
	}
	ExecStoreVirtualTuple(out);
	if (keyed && IsInParallelMode())
		tuplestore_puttupleslot(r->keyless, out);	/* its key drawn by write_keyless */
	else
		table_tuple_insert(r->rel, out, r->cid, 0, r->bistate);
}

/* The insert copies kept during parallel mode: their keys drawn, in order, and written. */
static void
write_keyless(CopyReceiver *r)
{
	TupleTableSlot *out = r->slot;
	int			natts = RelationGetDescr(r->rel)->natts;

	if (IsInParallelMode())
		elog(ERROR, "scd2: the fast path's receiver ended in parallel mode");
	while (tuplestore_gettupleslot(r->keyless, true, false, r->keyless_slot))
	{
		slot_getallattrs(r->keyless_slot);
		ExecClearTuple(out);
		memcpy(out->tts_values, r->keyless_slot->tts_values, sizeof(Datum) * natts);
		memcpy(out->tts_isnull, r->keyless_slot->tts_isnull, sizeof(bool) * natts);
		out->tts_values[C_SK] = Int64GetDatum(nextval_internal(r->sk_seq, true));
		out->tts_isnull[C_SK] = false;
		ExecStoreVirtualTuple(out);
		table_tuple_insert(r->rel, out, r->cid, 0, r->bistate);
	}
}

static bool
copies_receive(TupleTableSlot *slot, DestReceiver *self)
{
	CopyReceiver *r = (CopyReceiver *) self;
	int			cls;

	slot_getallattrs(slot);
	cls = DatumGetInt32(slot->tts_values[Q_CLS]);
	switch (cls)
	{
		case FC_OBSERVED:
			if (r->obs == NULL || slot->tts_isnull[Q_T_OBSERVED] || slot->tts_isnull[Q_DSK])
				elog(ERROR, "scd2: an observation of the fast path has no instant, version or place");
			keep_observation(r->obs, DatumGetTimestampTz(slot->tts_values[Q_T_OBSERVED]),
							 DatumGetInt64(slot->tts_values[Q_DSK]));
			break;
		case FC_CHANGE:
			write_copy(r, slot, cls, COPY_UPDATE);
			write_copy(r, slot, cls, COPY_INSERT);
			break;
		case FC_NEW:
		case FC_RETURN:
			write_copy(r, slot, cls, COPY_INSERT);
			break;
		case FC_NOOP:
			write_copy(r, slot, cls, COPY_REMEMBER);
			if (r->obs != NULL)
				r->obs->remembered++;
			break;
		case FC_COMPLEX:
			(*r->complex_rows)++;
			write_copy(r, slot, cls, COPY_UPDATE);
			break;
		case FC_TYPE1:
		case FC_DELETE:
			write_copy(r, slot, cls, COPY_UPDATE);
			break;
		default:
			elog(ERROR, "scd2: the fast path gave a row of class %d", cls);
	}
	return true;
}

static void
copies_shutdown(DestReceiver *self)
{
	CopyReceiver *r = (CopyReceiver *) self;

	if (r->keyless != NULL)
	{
		write_keyless(r);
		tuplestore_end(r->keyless);
		ExecDropSingleTupleTableSlot(r->keyless_slot);
	}
	FreeBulkInsertState(r->bistate);
	table_finish_bulk_insert(r->rel, 0);
	ExecDropSingleTupleTableSlot(r->slot);
	table_close(r->rel, NoLock);
}

static void
copies_destroy(DestReceiver *self)
{
	pfree(self);
}

/*
 * A receiver of the fast path's classified rows for cfg: their copies into
 * relname (a table of the session's temporary schema), the insert copies'
 * surrogate keys drawn from sk_seq (when valid), an order-free load's
 * observations appended to obs, the rows found late counted in
 * *complex_rows.
 */
DestReceiver *
scd2_classify_copier(const Scd2Config *cfg, const char *relname, Oid sk_seq, ArrivalObserved *obs,
					 int64 *complex_rows)
{
	CopyReceiver *r = palloc0(sizeof(CopyReceiver));

	r->pub.receiveSlot = copies_receive;
	r->pub.rStartup = copies_startup;
	r->pub.rShutdown = copies_shutdown;
	r->pub.rDestroy = copies_destroy;
	r->pub.mydest = DestNone;
	r->relname = relname;
	r->obs = obs;
	r->complex_rows = complex_rows;
	r->sk_seq = sk_seq;
	r->nkeys = cfg->nkeys;
	r->ntracked = cfg->ntracked;
	r->ntype1 = cfg->ntype1;
	r->npayload = cfg->ntracked + cfg->ntype1 + cfg->nother;
	return (DestReceiver *) r;
}
