/*
 * batch_log.c -- a batch logged by surrogate keys: the change log of a
 * load at its cost floor.  This file is the load's half (whether a load may,
 * and its record); history/batch_read.c reads such a batch back.
 *
 * One change-log row per written version, with the before-images probed
 * from the dimension, made a 200k-row batch on 1M keys 1.3x the same load
 * without its log (bench/RESULTS.md).  Most batches need no row of their
 * own: every row they write is either a current version they close (its
 * before-image is implied: current, the run's current valid_to, the Type 1
 * values it still has) or a current version they insert, and every one of
 * them has a surrogate key.  Such a load (eligible below) logs three
 * arrays: the surrogate keys of the rows it wrote, what it did to each
 * ("char": batch_action), and the valid_to it left (as scd2.change_log's
 * valid_to: NULL for current), in scd2.change_log_batches rows of at most
 * BATCH_CHUNK_ROWS rows each (column chunk: 0, 1, ... in the order of the
 * change table's scan; one row for most batches).  The chunks are built
 * one at a time in one pass over the change table, which also checks that
 * the load is eligible, and kept in a tuplestore (a temporary file beyond
 * work_mem) until the pass has found every row eligible: the backend holds
 * a few MB of the log whatever the batch, and a load that is not eligible
 * writes none of it.  The surrogate
 * keys of the versions it inserts are drawn from the column's sequence
 * by the classification, into the change table, and the MERGE inserts
 * them (PostgreSQL 15 and 16 have no MERGE ... RETURNING).
 *
 * The rows read back (scd2_batch_rows_sql, over the chunks' arrays one
 * after the other: scd2_batch_read): business key and valid_from
 * from the dimension by surrogate key -- no load but an order-free one
 * moves a version's valid_from or deletes a version, and the readers
 * refuse a batch followed by one (scd2_batch_require_unmoved) -- and the
 * arrays' action and valid_to; the updated rows' before-images are
 * implied.  Readers: scd2.revert writes the rows into scd2.change_log
 * before it undoes the run (history/revert.c), scd2.changes (history/changes.c),
 * dimension_at(..., known_at) (history/known_at.c), the feed of a compact first
 * load (history/compact.c).
 *
 * Eligible: the change log on and installed with the table (0.5's, with
 * its chunks: a 0.4 table logs row by row until ALTER EXTENSION scd2
 * UPDATE), not a dry run,
 * not Citus (citus_load.c logs after its writes), no column
 * added by the load; a plain table whose surrogate key is an identity or
 * serial column (its sequence, on which the owner has USAGE or UPDATE) and
 * that has no enabled BEFORE INSERT row trigger (which could change the
 * key); every change row from the fast path (classify.c) and none a
 * Type 1 update.  Otherwise the load logs one row per version
 * (history/changelog.c) -- an order-free one with the surrogate keys it drew for
 * its new versions (driver.c draws those of its general path's too), which
 * it would otherwise read back after its write.  A later order-free load
 * may move a version's valid_from or remove the version: before it does,
 * it pins the business key and valid_from of those rows in the chunks of
 * the batches that logged them (batch_pin.c: business_keys and valid_from, NULL
 * at the other rows' places), and the readers read a pinned row from
 * there (a row a later load removed is still read).  An in-order load
 * moves nothing, and logs no more than the three arrays.
 *
 * Security (docs/SECURITY.md): the change table is read, the keys drawn
 * and the dimension read back as the dimension's owner (the load's
 * security-restricted operation, or common/exec.c's for a reader); the extension
 * owner writes only the arrays, of bigint, "char" and timestamptz.  The
 * receiver of the change table's rows runs inside the owner's statement;
 * it copies those three values and builds arrays of them, nothing else.
 */
#include "scd2.h"

#include "access/table.h"
#include "access/tupdesc.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"
#include "citus/citus.h"

/* Whether the relation has an enabled BEFORE INSERT row trigger. */
static bool
has_before_insert_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];

		if (tg->tgenabled != TRIGGER_DISABLED && TRIGGER_FOR_ROW(tg->tgtype) &&
			TRIGGER_FOR_BEFORE(tg->tgtype) && TRIGGER_FOR_INSERT(tg->tgtype))
			return true;
	}
	return false;
}

/*
 * The sequence the load draws the surrogate keys of its new versions from
 * (the file's comment: what makes a load eligible, before its change
 * table is read), or InvalidOid.  Called as the dimension's owner, before
 * the classification: the fast path's insert copies draw their keys
 * (classify.c), the MERGE the other insert copies' (write.c), in
 * the order the MERGE alone drew them before, so a load that is not
 * logged by surrogate keys gives its versions the same keys as without.
 */
Oid
scd2_batch_sequence(const LoadState *st, bool dry_run)
{
	const Scd2Config *cfg = st->cfg;
	Relation	rel;
	char	   *sk_name = NULL;
	bool		ok;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	Datum		seq;

	if (dry_run || !st->log_prepared || st->citus != SCD2_CITUS_NONE || cfg->sk == NULL ||
		cfg->filled != NIL || !scd2_changelog_batch_chunked())
		return InvalidOid;
	rel = table_open(cfg->dim_oid, AccessShareLock);
	ok = rel->rd_rel->relkind == RELKIND_RELATION && !has_before_insert_trigger(rel);
	for (int a = 0; ok && a < RelationGetDescr(rel)->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), a);

		if (!att->attisdropped && strcmp(quote_identifier(NameStr(att->attname)), cfg->sk) == 0)
		{
			sk_name = pstrdup(NameStr(att->attname));
			ok = !att->attgenerated &&
				(att->atttypid == INT2OID || att->atttypid == INT4OID || att->atttypid == INT8OID);
		}
	}
	table_close(rel, AccessShareLock);
	if (!ok || sk_name == NULL)
		return InvalidOid;

	/* an identity or serial column's sequence: a catalog lookup, no user code */
	values[0] = CStringGetTextDatum(cfg->dim_sql);
	values[1] = CStringGetTextDatum(sk_name);
	scd2_exec_catalog("SELECT CAST(CAST(pg_catalog.pg_get_serial_sequence($1, $2) AS pg_catalog.regclass) AS pg_catalog.oid)",
					  2, argtypes, values, NULL, true, SPI_OK_SELECT, "finding the surrogate key's sequence");
	seq = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull ||
		pg_class_aclcheck(DatumGetObjectId(seq), GetUserId(), ACL_USAGE | ACL_UPDATE) != ACLCHECK_OK)
		return InvalidOid;
	return DatumGetObjectId(seq);
}

/*
 * The rows of one scd2.change_log_batches row, a chunk of the batch: at
 * most this many.  A chunk's three arrays take 17 bytes a row (bigint,
 * "char", timestamptz): 1.1 MB at 65,536 rows, built from buffers of as
 * much again, so that the load holds a few MB of its log at a time
 * whatever the batch -- where the arrays of the whole batch in one row
 * took about 45 bytes per written row in the backend (97 MB for 1.9M
 * rows, twice the load's bound: docs/PERFORMANCE.md, "Memory of a load").
 * A constant rather than a share of work_mem: a batch's chunks are the
 * same whatever the session's settings.  The 50k rows of RESULTS' usual
 * 200k batch are still one row.
 */
#define BATCH_CHUNK_ROWS 65536

/* The receiver of the change table's rows (batch_receive): the chunks. */
typedef struct BatchLogReceiver
{
	DestReceiver pub;			/* first: a DestReceiver */
	int64		ineligible;		/* rows that keep the load off this log */
	int64		rows;			/* eligible rows seen */
	int			n;				/* of them in the chunk being built */
	int64	   *sk;				/* its surrogate keys, */
	char	   *act;			/* action codes ("char": batch_action), */
	TimestampTz *vt;			/* valid_to as logged, */
	bool	   *vt_null;		/* NULL: current */
	MemoryContext build_cxt;	/* a chunk's arrays while they are built */
	TupleDesc	desc;			/* a chunk: surrogate_keys, actions, valid_to */
	Tuplestorestate *chunks;	/* the chunks built, in order (spilled to a
								 * temporary file beyond work_mem) */
} BatchLogReceiver;

/* The columns of the change table's query (batch_log_sql), and their types. */
static const Oid batch_query_types[] = {BOOLOID, INT8OID, CHAROID, TIMESTAMPTZOID};

static void
batch_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	if (typeinfo->natts != lengthof(batch_query_types))
		elog(ERROR, "scd2: the change log's query gave %d columns", typeinfo->natts);
	for (int i = 0; i < typeinfo->natts; i++)
		if (TupleDescAttr(typeinfo, i)->atttypid != batch_query_types[i])
			elog(ERROR, "scd2: column %d of the change log's query is of type %u", i + 1,
				 TupleDescAttr(typeinfo, i)->atttypid);
}

/* The chunk built so far (r->n rows), into the store; the buffers emptied. */
static void
flush_chunk(BatchLogReceiver *r)
{
	MemoryContext old = MemoryContextSwitchTo(r->build_cxt);
	Datum	   *sks = palloc(sizeof(Datum) * r->n);
	Datum	   *acts = palloc(sizeof(Datum) * r->n);
	Datum	   *vts = palloc(sizeof(Datum) * r->n);
	int			dims[1] = {r->n};
	int			lbs[1] = {1};
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	for (int i = 0; i < r->n; i++)
	{
		sks[i] = Int64GetDatum(r->sk[i]);
		acts[i] = CharGetDatum(r->act[i]);
		vts[i] = r->vt_null[i] ? (Datum) 0 : TimestampTzGetDatum(r->vt[i]);
	}
	values[0] = PointerGetDatum(construct_md_array(sks, NULL, 1, dims, lbs, INT8OID, sizeof(int64),
												   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[1] = PointerGetDatum(construct_md_array(acts, NULL, 1, dims, lbs, CHAROID, 1, true,
												   TYPALIGN_CHAR));
	values[2] = PointerGetDatum(construct_md_array(vts, r->vt_null, 1, dims, lbs, TIMESTAMPTZOID,
												   sizeof(TimestampTz), FLOAT8PASSBYVAL,
												   TYPALIGN_DOUBLE));
	tuplestore_putvalues(r->chunks, r->desc, values, nulls);	/* (copied) */
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->build_cxt);
	r->n = 0;
}

/*
 * A row of the change table: an eligible one into the chunk being built;
 * at the first that is not, the scan stops (the load logs row by row).
 */
static bool
batch_receive(TupleTableSlot *slot, DestReceiver *self)
{
	BatchLogReceiver *r = (BatchLogReceiver *) self;
	bool		isnull;
	Datum		ineligible = slot_getattr(slot, 1, &isnull);

	if (isnull || DatumGetBool(ineligible))
	{
		r->ineligible++;
		return false;
	}
	/* (an eligible row has a surrogate key and an action: the query's) */
	r->sk[r->n] = DatumGetInt64(slot_getattr(slot, 2, &isnull));
	if (isnull)
		elog(ERROR, "scd2: an eligible change row has no surrogate key");
	r->act[r->n] = DatumGetChar(slot_getattr(slot, 3, &isnull));
	if (isnull)
		elog(ERROR, "scd2: an eligible change row has no action");
	r->vt[r->n] = DatumGetTimestampTz(slot_getattr(slot, 4, &r->vt_null[r->n]));
	r->rows++;
	if (++r->n == BATCH_CHUNK_ROWS)
		flush_chunk(r);
	return true;
}

static void
batch_shutdown(DestReceiver *self)
{
}

static void
batch_destroy(DestReceiver *self)
{
}

/*
 * Step 5 of a load, before its MERGE: log the batch by surrogate keys when
 * it is eligible (the file's comment; st->sk_seq: the fast path drew the
 * new versions' keys) -- in one pass over the change table as the owner,
 * which checks every row and builds the arrays chunk by chunk
 * (BATCH_CHUNK_ROWS) into a tuplestore, then the header and one
 * scd2.change_log_batches row per chunk written by the extension owner.
 * Returns false, having written nothing, when the load must log row by
 * row.
 */
bool
scd2_load_record_batch_log(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext log_cxt;
	BatchLogReceiver r;
	TupleTableSlot *slot;
	bool		logged;

	/* completed inferred versions are logged row by row (complete.c) */
	if (!OidIsValid(st->sk_seq) || st->completed > 0)
		return false;

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = batch_receive;
	r.pub.rStartup = batch_startup;
	r.pub.rShutdown = batch_shutdown;
	r.pub.rDestroy = batch_destroy;
	r.pub.mydest = DestNone;
	/* outlives the executor's memory, in which the receiver runs */
	log_cxt = AllocSetContextCreate(cxt, "scd2 batch log", ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(log_cxt);
	r.build_cxt = AllocSetContextCreate(log_cxt, "scd2 batch log chunk", ALLOCSET_DEFAULT_SIZES);
	r.sk = palloc(sizeof(int64) * BATCH_CHUNK_ROWS);
	r.act = palloc(sizeof(char) * BATCH_CHUNK_ROWS);
	r.vt = palloc(sizeof(TimestampTz) * BATCH_CHUNK_ROWS);
	r.vt_null = palloc(sizeof(bool) * BATCH_CHUNK_ROWS);
	r.desc = CreateTemplateTupleDesc(3);
	TupleDescInitEntry(r.desc, 1, "surrogate_keys", INT8ARRAYOID, -1, 0);
	TupleDescInitEntry(r.desc, 2, "actions", CHARARRAYOID, -1, 0);
	TupleDescInitEntry(r.desc, 3, "valid_to", TIMESTAMPTZARRAYOID, -1, 0);
	r.chunks = tuplestore_begin_heap(false, false, work_mem);
	MemoryContextSwitchTo(cxt);

	/*
	 * A row keeps the load off this log unless it is of the fast path, one
	 * of its four actions and has a surrogate key (IS NOT FALSE: a NULL
	 * there too).
	 */
	scd2_load_exec_into(st, psprintf(X("SELECT (`_origin <> " WT_ORIGIN_FAST
									   "   OR `_action NOT IN (" WT_ACT_INSERT ", " WT_ACT_NEW_VERSION ", " WT_ACT_CLOSE ", " WT_ACT_DELETE ")"
									   "   OR `_sk IS NULL) IS NOT FALSE,"
									   " CAST(`_sk AS pg_catalog.int8), %s, %s FROM %s c"),
									 scd2_batch_action_case_sql(X("`_action"), true),
									 scd2_changelog_encode_sql(cfg->vf.typid, X("`_vt")), CHG_TABLE),
						(DestReceiver *) &r, "recording the change log");
	MemoryContextSwitchTo(cxt);
	logged = r.ineligible == 0 && r.rows > 0;
	if (logged)
	{
		int			chunk = 0;

		if (r.n > 0)
			flush_chunk(&r);
		st->run_id = scd2_changelog_write_batch_header(cfg);
		slot = MakeSingleTupleTableSlot(r.desc, &TTSOpsMinimalTuple);
		while (tuplestore_gettupleslot(r.chunks, true, false, slot))
		{
			Datum		arrays[3];

			slot_getallattrs(slot);
			for (int i = 0; i < 3; i++)
				arrays[i] = slot->tts_values[i];
			scd2_changelog_write_batch_chunk(st->run_id, chunk++, arrays);
			MemoryContextSwitchTo(cxt); /* (SPI left its own context current) */
		}
		ExecDropSingleTupleTableSlot(slot);
	}
	tuplestore_end(r.chunks);
	MemoryContextDelete(log_cxt);
	return logged;
}
