/*
 * extract_stream.c -- scd2.apply_snapshots compares its extracts in one
 * pass over the staging table, with no sort: a receiver of the staging
 * rows (each its ctid, its extract, its business key and its columns)
 * keeps, per key, the last row it saw in a hash table, and
 * decides each row once the key's next row, or the end, shows whether it
 * was the key's only row of its extract and whether the next extract has
 * the key.  The decisions are those of the window functions of
 * apply_snapshots.c (compare_extracts), which sort every staging row by
 * key and extract -- at work_mem 4MB an external sort of 3,000,000 rows,
 * the larger part of the call's time -- and stay the way when this pass
 * cannot be used:
 *   - a key's rows come out of extract order (the table was not filled
 *     extract by extract, or rows were updated since: the scan reads the
 *     heap in its physical order);
 *   - a key column's type has no hash opclass whose equality is its
 *     default one (the window functions partition by that equality);
 *   - the table of keys outgrows maintenance_work_mem (126 bytes a key
 *     of one bigint, measured: 12.6 MB for 100,000 keys; 64MB holds some
 *     500,000 such keys, fewer of wider ones), as an
 *     index build would.
 * Per key the table holds the last row's extract, its ctid and hashes,
 * how many rows the key had in that extract, and whether that row is the
 * same as the key's only row of the extract before.  A row of extract n
 * is to be loaded unless n > 1, it is its key's only row of n, and it is
 * the same as its key's only row of n - 1 ("the same": the same two
 * seeded 64-bit hashes of the bytes of its columns, image_hashes -- where
 * the window version hashes the row's text, which costs the type output
 * of every column: 2.1 s of 3,000,000 rows against 0.4 s; equal bytes are
 * equal text, so no row the text would load is left out); the
 * key is gone from n + 1 when its last row of n is followed by none of
 * n + 1.  Rows without a business key are all listed (the load refuses
 * them).
 *
 * The receiver runs inside the owner's statement (scd2_exec_user_into):
 * the key types' hash and equality functions run as the dimension's owner,
 * in the security-restricted operation, like the rest of the comparison.
 * It writes only the load's work table of changes.
 */
#include "scd2.h"

#include "access/heapam.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupmacs.h"
#include "access/xact.h"
#include "common/hashfn.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/itemptr.h"
#include "tcop/dest.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "common/common.h"
#include "load/extract_stream.h"

/*
 * The columns of a staging row as the query gives them: its ctid, its
 * extract's time, its business key, then its image (every column but the
 * snapshot column).
 */
#define COL_CTID	0
#define COL_TIME	1
#define COL_KEY		2

/* How often (rows) the key table's memory is measured. */
#define MEMORY_CHECK_ROWS	4096

/* The hash table's key: the business key's values (none NULL). */
typedef struct KeyRef
{
	Datum	   *values;
} KeyRef;

/* Per key, its last row so far (its decision waits for the next row). */
typedef struct KeyEntry
{
	KeyRef		key;			/* first: the hash key */
	int32		n;				/* the row's extract, 1..n */
	int32		count;			/* the key's rows of that extract so far */
	bool		same;			/* the row is the same as the key's only row
								 * of extract n - 1 */
	uint64		h1;
	uint64		h2;
	ItemPointerData ctid;
} KeyEntry;

typedef struct ExtractStream
{
	DestReceiver pub;			/* first: a DestReceiver */
	int			nkeys;
	int			n;				/* extracts */
	const TimestampTz *at;		/* their times, ascending */
	Oid			changes_oid;
	/* the key types' hash and equality, with the columns' collations */
	FmgrInfo   *hash_fn;
	FmgrInfo   *eq_fn;
	Oid		   *coll;
	TupleDesc	desc;			/* of the query's rows */
	MemoryContext cxt;			/* the key table and its copies */
	HTAB	   *keys;
	uint64		rows;
	/* the work table of changes */
	Relation	rel;
	TupleTableSlot *out;
	BulkInsertState bistate;
	CommandId	cid;
	const char *failed;			/* why the pass gave up (NULL: it did not) */
} ExtractStream;

/* The receiver whose key table is in use (dynahash's callbacks take no argument). */
static ExtractStream *current;

static uint32
key_hash(const void *key, Size keysize)
{
	const KeyRef *k = (const KeyRef *) key;
	uint32		h = 0;

	for (int i = 0; i < current->nkeys; i++)
		h = hash_combine(h, DatumGetUInt32(FunctionCall1Coll(&current->hash_fn[i], current->coll[i],
															 k->values[i])));
	return h;
}

static int
key_match(const void *key1, const void *key2, Size keysize)
{
	const KeyRef *a = (const KeyRef *) key1;
	const KeyRef *b = (const KeyRef *) key2;

	for (int i = 0; i < current->nkeys; i++)
		if (!DatumGetBool(FunctionCall2Coll(&current->eq_fn[i], current->coll[i],
											a->values[i], b->values[i])))
			return 1;
	return 0;
}

/*
 * The hash and equality of each key column, or false: the pass partitions
 * by the type's default equality, as the window functions do, so the hash
 * opclass must have that equality.
 */
static bool
key_functions(ExtractStream *es, TupleDesc desc)
{
	for (int i = 0; i < es->nkeys; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, COL_KEY + i);
		TypeCacheEntry *te = lookup_type_cache(a->atttypid, TYPECACHE_HASH_PROC_FINFO |
											   TYPECACHE_EQ_OPR_FINFO | TYPECACHE_HASH_OPFAMILY);

		if (!OidIsValid(te->hash_proc) || !OidIsValid(te->eq_opr) || !OidIsValid(te->hash_opf) ||
			get_opfamily_member(te->hash_opf, a->atttypid, a->atttypid,
								HTEqualStrategyNumber) != te->eq_opr)
			return false;
		fmgr_info_copy(&es->hash_fn[i], &te->hash_proc_finfo, es->cxt);
		fmgr_info_copy(&es->eq_fn[i], &te->eq_opr_finfo, es->cxt);
		es->coll[i] = a->attcollation;
	}
	return true;
}

static void
stream_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	ExtractStream *es = (ExtractStream *) self;
	HASHCTL		ctl;

	if (typeinfo->natts <= COL_KEY + es->nkeys)
		elog(ERROR, "scd2: the extract comparison got %d columns", typeinfo->natts);
	es->desc = typeinfo;
	es->hash_fn = MemoryContextAllocZero(es->cxt, sizeof(FmgrInfo) * es->nkeys);
	es->eq_fn = MemoryContextAllocZero(es->cxt, sizeof(FmgrInfo) * es->nkeys);
	es->coll = MemoryContextAllocZero(es->cxt, sizeof(Oid) * es->nkeys);
	if (!key_functions(es, typeinfo))
	{
		es->failed = "a business key type has no hash opclass with its default equality";
		return;
	}
	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(KeyRef);
	ctl.entrysize = sizeof(KeyEntry);
	ctl.hash = key_hash;
	ctl.match = key_match;
	ctl.hcxt = es->cxt;
	current = es;
	es->keys = hash_create("scd2 extract keys", 1024, &ctl,
						   HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
	es->rel = table_open(es->changes_oid, RowExclusiveLock);
	/* rows go in by table_tuple_insert: no index, trigger or constraint to keep */
	if (es->rel->rd_rel->relhasindex || es->rel->trigdesc != NULL || es->rel->rd_att->constr != NULL)
		elog(ERROR, "scd2: the work table of extract changes has an index, trigger or constraint");
	es->out = MakeSingleTupleTableSlot(RelationGetDescr(es->rel), &TTSOpsVirtual);
	es->bistate = GetBulkInsertState();
	es->cid = GetCurrentCommandId(true);
}

/* One row of the work table of changes. */
static void
emit(ExtractStream *es, const Datum *key, const bool *key_null, int32 n, ItemPointer ctid,
	 bool load, bool gone)
{
	TupleTableSlot *out = es->out;
	ItemPointerData tid = *ctid;

	ExecClearTuple(out);
	for (int i = 0; i < es->nkeys; i++)
	{
		out->tts_values[i] = key[i];
		out->tts_isnull[i] = key_null ? key_null[i] : false;
	}
	out->tts_values[es->nkeys] = Int32GetDatum(n);
	out->tts_isnull[es->nkeys] = false;
	out->tts_values[es->nkeys + 1] = PointerGetDatum(&tid);
	out->tts_isnull[es->nkeys + 1] = false;
	out->tts_values[es->nkeys + 2] = BoolGetDatum(load);
	out->tts_isnull[es->nkeys + 2] = false;
	out->tts_values[es->nkeys + 3] = BoolGetDatum(gone);
	out->tts_isnull[es->nkeys + 3] = false;
	ExecStoreVirtualTuple(out);
	table_tuple_insert(es->rel, out, es->cid, 0, es->bistate);
}

/*
 * The key's last row of its extract, decided: loaded unless it is the
 * same as the key's only row of the extract before (never in the first
 * extract); the key is gone from the next extract when next, the
 * extract of the key's next row (n + 1 and beyond the last: none), is
 * later than that.
 */
static void
decide_last(ExtractStream *es, KeyEntry *e, int32 next)
{
	bool		load = !e->same || e->n == 1;
	bool		gone = e->n < es->n && next > e->n + 1;

	if (load || gone)
		emit(es, e->key.values, NULL, e->n, &e->ctid, load, gone);
}

/*
 * Two seeded 64-bit hashes of the row's image, in one pass over its
 * columns (a varlena detoasted once): of each column's bytes (a varlena's
 * data, a by-value Datum as stored), NULL as a constant of its own.  Two
 * rows whose images hash the same under both seeds are taken for the
 * same: equal bytes are the same value in every type, and two different
 * values collide in both with a chance of 2^-128.
 */
static void
image_hashes(const ExtractStream *es, const Datum *v, const bool *isnull, uint64 *h1, uint64 *h2)
{
	*h1 = 0;
	*h2 = 1;
	for (int i = COL_KEY + es->nkeys; i < es->desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(es->desc, i);
		const unsigned char *bytes;
		int			len;
		char		buf[sizeof(Datum)];
		struct varlena *d = NULL;

		if (isnull[i])
		{
			*h1 = hash_combine64(*h1, UINT64CONST(0x9e3779b97f4a7c15));
			*h2 = hash_combine64(*h2, UINT64CONST(0x9e3779b97f4a7c16));
			continue;
		}
		if (a->attbyval)
		{
			store_att_byval(buf, v[i], a->attlen);
			bytes = (const unsigned char *) buf;
			len = a->attlen;
		}
		else if (a->attlen == -1)
		{
			d = PG_DETOAST_DATUM_PACKED(v[i]);
			bytes = (const unsigned char *) VARDATA_ANY(d);
			len = VARSIZE_ANY_EXHDR(d);
		}
		else if (a->attlen == -2)
		{
			bytes = (const unsigned char *) DatumGetCString(v[i]);
			len = strlen(DatumGetCString(v[i]));
		}
		else
		{
			bytes = (const unsigned char *) DatumGetPointer(v[i]);
			len = a->attlen;
		}
		*h1 = hash_combine64(*h1, hash_bytes_extended(bytes, len, 0));
		*h2 = hash_combine64(*h2, hash_bytes_extended(bytes, len, 1));
		if (d != NULL && (Pointer) d != DatumGetPointer(v[i]))
			pfree(d);
	}
}

/* Extract number (1..n) of a time the extracts have. */
static int32
extract_number(const ExtractStream *es, TimestampTz t)
{
	int			lo = 0,
				hi = es->n - 1;

	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;

		if (es->at[mid] == t)
			return mid + 1;
		if (es->at[mid] < t)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	elog(ERROR, "scd2: a staging row's extract time is not among the extracts read");
	return 0;					/* keep compiler quiet */
}

/* A new key's entry keeps copies of its values in the key table's context. */
static void
keep_key(ExtractStream *es, KeyEntry *e, const Datum *values)
{
	MemoryContext old = MemoryContextSwitchTo(es->cxt);
	Datum	   *copy = palloc(sizeof(Datum) * es->nkeys);

	for (int i = 0; i < es->nkeys; i++)
	{
		Form_pg_attribute a = TupleDescAttr(es->desc, COL_KEY + i);

		if (a->attbyval)
			copy[i] = values[i];
		else if (a->attlen == -1)	/* detoasted once, not per probe */
			copy[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[i]));
		else
			copy[i] = datumCopy(values[i], false, a->attlen);
	}
	MemoryContextSwitchTo(old);
	e->key.values = copy;
	e->n = 0;
	e->count = 0;
	e->same = false;
}

static bool
stream_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ExtractStream *es = (ExtractStream *) self;
	Datum	   *v;
	bool	   *isnull;
	int32		n;
	KeyRef		ref;
	KeyEntry   *e;
	bool		found;
	uint64		h1,
				h2;

	if (es->failed)
		return false;
	slot_getallattrs(slot);
	v = slot->tts_values;
	isnull = slot->tts_isnull;
	n = extract_number(es, DatumGetTimestampTz(v[COL_TIME]));
	for (int i = 0; i < es->nkeys; i++)
		if (isnull[COL_KEY + i])
		{
			/* no business key: listed for the load, which refuses it */
			emit(es, &v[COL_KEY], &isnull[COL_KEY], n, DatumGetItemPointer(v[COL_CTID]), true, false);
			return true;
		}
	if (++es->rows % MEMORY_CHECK_ROWS == 0 &&
		MemoryContextMemAllocated(es->cxt, true) > (Size) maintenance_work_mem * 1024)
	{
		es->failed = "its keys outgrew maintenance_work_mem";
		return false;
	}
	image_hashes(es, v, isnull, &h1, &h2);
	ref.values = &v[COL_KEY];
	current = es;
	e = (KeyEntry *) hash_search(es->keys, &ref, HASH_ENTER, &found);
	if (!found)
		keep_key(es, e, &v[COL_KEY]);
	if (e->n > n)
	{
		es->failed = "the staging rows of a key are not in extract order";
		return false;
	}
	if (e->n == n)
	{
		/* several rows of the key in one extract: each is loaded */
		emit(es, e->key.values, NULL, e->n, &e->ctid, true, false);
		e->count++;
		e->same = false;
	}
	else
	{
		if (e->n > 0)
			decide_last(es, e, n);
		e->same = e->n == n - 1 && e->count == 1 && e->h1 == h1 && e->h2 == h2;
		e->n = n;
		e->count = 1;
	}
	e->h1 = h1;
	e->h2 = h2;
	e->ctid = *DatumGetItemPointer(v[COL_CTID]);
	return true;
}

static void
stream_shutdown(DestReceiver *self)
{
	ExtractStream *es = (ExtractStream *) self;

	if (es->keys != NULL && es->failed == NULL)
	{
		HASH_SEQ_STATUS seq;
		KeyEntry   *e;

		current = es;
		hash_seq_init(&seq, es->keys);
		while ((e = (KeyEntry *) hash_seq_search(&seq)) != NULL)
			decide_last(es, e, es->n + 1);
	}
	if (es->rel != NULL)
	{
		FreeBulkInsertState(es->bistate);
		ExecDropSingleTupleTableSlot(es->out);
		table_close(es->rel, NoLock);
		es->rel = NULL;
	}
}

static void
stream_destroy(DestReceiver *self)
{
}

bool
scd2_compare_extracts_streaming(const char *sql, Snapshot snap, int nkeys, int n,
								const TimestampTz *at, Oid changes_oid, const char **why)
{
	ExtractStream es;

	memset(&es, 0, sizeof(es));
	es.pub.receiveSlot = stream_receive;
	es.pub.rStartup = stream_startup;
	es.pub.rShutdown = stream_shutdown;
	es.pub.rDestroy = stream_destroy;
	es.pub.mydest = DestNone;
	es.nkeys = nkeys;
	es.n = n;
	es.at = at;
	es.changes_oid = changes_oid;
	/* outlives the executor's memory, in which the receiver starts */
	es.cxt = AllocSetContextCreate(CurrentMemoryContext, "scd2 extract comparison",
								   ALLOCSET_DEFAULT_SIZES);
	(void) scd2_exec_user_into(sql, 0, NULL, NULL, snap, (DestReceiver *) &es, false,
								 "comparing the extracts");
	current = NULL;
	if (es.failed == NULL)
		elog(DEBUG1, "scd2.apply_snapshots compared " UINT64_FORMAT " staging rows of %ld keys in one pass, in %zu bytes",
			 es.rows, (long) hash_get_num_entries(es.keys), MemoryContextMemAllocated(es.cxt, true));
	MemoryContextDelete(es.cxt);
	*why = es.failed;
	return es.failed == NULL;
}
