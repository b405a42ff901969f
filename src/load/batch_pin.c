/*
 * batch_pin.c -- before an order-free load moves a version's
 * valid_from ('extend') or removes a version ('remove'), the batches that
 * logged that version by surrogate key (batch_log.c) get its
 * business key and valid_from as they were, which the readers of a batch
 * would otherwise read back from the dimension, where they no longer are.
 *
 * Each chunk of a batch (a row of scd2.change_log_batches) keeps them in
 * business_keys and valid_from, at the version's place in surrogate_keys,
 * NULL at the other places (NULL arrays until a first pin).  The first
 * load that moves a version pins it; a later one finds it pinned and
 * leaves it.  An in-order load moves nothing and pays nothing; a load that
 * moves versions reads the surrogate keys of every chunk of every batch
 * of its dimension still in the change log once (scd2.prune_change_log
 * bounds them), and rewrites the arrays of the chunks that hold one.
 *
 * The search is in C, a hash table of the moved versions probed with each
 * batch's keys: in SQL an array overlap compares every pair, a subscript
 * of a stored array reads the whole array each time, and the planner,
 * which cannot see how many keys an array holds, joined the places of 58k
 * keys to 3.9k pins by run alone (5M rows filtered: 0.5 s for 30 small
 * batches).
 *
 * Security (docs/SECURITY.md): the moved versions' business keys and
 * valid_from are computed from the load's change table as the dimension's
 * owner (the load's statement runner); the extension owner reads and
 * writes only scd2.change_log_batches, with those values.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

/* A moved version: its business key (jsonb) and valid_from before the load. */
typedef struct MovedVersion
{
	int64		sk;				/* hash key */
	Datum		bk;				/* jsonb, in the pinning's memory context */
	TimestampTz vf;
} MovedVersion;

/*
 * The versions the load moves or removes, from its change table, as the
 * owner: a hash table by surrogate key in cxt (NULL when there are none).
 */
static HTAB *
moved_versions(LoadState *st, MemoryContext cxt)
{
	const Scd2Config *cfg = st->cfg;
	HASHCTL		ctl;
	HTAB	   *moved;
	int			nest = NewGUCNestLevel();

	scd2_pin_text_forms();
	scd2_load_exec(st, psprintf(X("SELECT `_sk, %s, %s FROM %s c"
								  " WHERE `_action IN (" WT_ACT_EXTEND ", " WT_ACT_REMOVE ") AND `_sk IS NOT NULL"),
								scd2_key_json_sql(cfg, "c"), scd2_changelog_encode_sql(cfg->vf.typid, X("`_tvf")),
								CHG_TABLE),
				   SPI_OK_SELECT, "finding the versions the load moves");
	AtEOXact_GUC(true, nest);
	if (SPI_processed == 0)
		return NULL;

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(MovedVersion);
	ctl.hcxt = cxt;
	moved = hash_create("scd2 moved versions", (long) SPI_processed, &ctl,
						HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		bool		nulls[3];
		Datum		sk = SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &nulls[0]);
		Datum		bk = SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &nulls[1]);
		Datum		vf = SPI_getbinval(row, SPI_tuptable->tupdesc, 3, &nulls[2]);
		int64		key;
		bool		found;
		MovedVersion *v;
		MemoryContext old;

		/* (a moved version has a key and a valid_from: the query's) */
		if (nulls[0] || nulls[1] || nulls[2])
			elog(ERROR, "scd2: a version the load moves has no surrogate key, business key or valid_from");
		key = DatumGetInt64(sk);
		v = hash_search(moved, &key, HASH_ENTER, &found);
		if (found)
			continue;			/* one row per version; the first holds */
		old = MemoryContextSwitchTo(cxt);
		v->bk = datumCopy(bk, false, -1);
		MemoryContextSwitchTo(old);
		v->vf = DatumGetTimestampTz(vf);
	}
	SPI_freetuptable(SPI_tuptable);
	return moved;
}

/* A row of scd2.change_log_batches: a chunk of a batch (load/batch_log.c). */
typedef struct BatchChunk
{
	int64		run_id;
	int			chunk;			/* 0 in a 0.4 table (one row per batch) */
} BatchChunk;

/* The chunks of the dimension's batches, as the extension owner. */
static BatchChunk *
dimension_batches(Oid dim_oid, bool chunked, MemoryContext cxt, int *n)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};
	BatchChunk *chunks;

	/* (read_only false: a snapshot taken now, as the load's own) */
	scd2_exec_catalog(psprintf("SELECT b.run_id, %s FROM scd2.change_log_batches b"
							   "  JOIN scd2.change_log_runs r ON r.run_id OPERATOR(pg_catalog.=) b.run_id"
							   " WHERE r.dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass ORDER BY 1, 2",
							   chunked ? "CAST(b.chunk AS pg_catalog.int8)" : "CAST(0 AS pg_catalog.int8)"),
					  1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the batches to pin");
	*n = (int) SPI_processed;
	chunks = MemoryContextAlloc(cxt, sizeof(BatchChunk) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		chunks[i].run_id = scd2_spi_int8(i, 1);
		chunks[i].chunk = (int) scd2_spi_int8(i, 2);
	}
	SPI_freetuptable(SPI_tuptable);
	return chunks;
}

/*
 * Column col of the row SPI holds, a one-dimensional array of type elem
 * (NULL: every place NULL), deconstructed in the current memory context
 * into nelems places; a chunk whose arrays disagree in length is an error
 * naming its run.
 */
static void
spi_array(const BatchChunk *bc, int col, Oid elem, int nelems, Datum **values, bool **nulls)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, col, &isnull);
	int16		len;
	bool		byval;
	char		align;
	int			n;

	if (isnull)
	{
		*values = palloc0(sizeof(Datum) * Max(nelems, 1));
		*nulls = palloc(sizeof(bool) * Max(nelems, 1));
		memset(*nulls, true, sizeof(bool) * Max(nelems, 1));
		return;
	}
	get_typlenbyvalalign(elem, &len, &byval, &align);
	deconstruct_array(DatumGetArrayTypeP(d), elem, len, byval, align, values, nulls, &n);
	if (n != nelems)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("the change log of run %lld is inconsistent", (long long) bc->run_id),
				 errdetail("Its chunk %d in scd2.change_log_batches holds %d surrogate keys but %d values in column %s: it was written otherwise than by scd2.",
						   bc->chunk, nelems, n, col == 2 ? "business_keys" : "valid_from"),
				 errhint("Restore that row from a backup, then retry the load; nothing was loaded.")));
}

/* A one-dimensional array of type elem from n values (copied). */
static Datum
make_array(Datum *values, bool *nulls, int n, Oid elem)
{
	int16		len;
	bool		byval;
	char		align;
	int			dims[1] = {n};
	int			lbs[1] = {1};

	get_typlenbyvalalign(elem, &len, &byval, &align);
	return PointerGetDatum(construct_md_array(values, nulls, 1, dims, lbs, elem, len, byval, align));
}

/*
 * The surrogate keys of the batch SPI holds (its first column), copied
 * out of SPI's result: *n of them, NULL places marked in *nulls.
 */
static int64 *
batch_keys(int *n, bool **nulls)
{
	bool		isnull;
	Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	Datum	   *elems;
	int64	   *keys;

	*n = 0;
	if (isnull)
		return NULL;
	deconstruct_array(DatumGetArrayTypeP(d), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &elems, nulls, n);
	keys = palloc(sizeof(int64) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
		keys[i] = (*nulls)[i] ? 0 : DatumGetInt64(elems[i]);
	return keys;
}

/* The moved version at place i of a batch's keys, or NULL. */
static MovedVersion *
moved_at(const int64 *keys, const bool *nulls, int i, HTAB *moved)
{
	if (nulls[i])
		return NULL;
	return hash_search(moved, &keys[i], HASH_FIND, NULL);
}

/*
 * The chunk of a batch SPI holds (bc: its keys, business_keys,
 * valid_from), when it holds a moved version: those places pinned (a place
 * pinned already keeps its pin) and its arrays written back.  Frees SPI's
 * result; the arrays are built in the current memory context.
 */
static void
pin_batch(const BatchChunk *bc, bool chunked, HTAB *moved, MemoryContext cxt)
{
	Oid			argtypes[4] = {INT8OID, JSONBARRAYOID, TIMESTAMPTZARRAYOID, INT4OID};
	Datum		values[4] = {Int64GetDatum(bc->run_id), 0, 0, Int32GetDatum(bc->chunk)};
	int			n;
	bool	   *key_nulls;
	int64	   *keys = batch_keys(&n, &key_nulls);
	Datum	   *bks;
	bool	   *bk_nulls;
	Datum	   *vfs;
	bool	   *vf_nulls;
	bool		hit = false;

	for (int i = 0; i < n && !hit; i++)
		hit = moved_at(keys, key_nulls, i, moved) != NULL;
	if (!hit)
	{
		SPI_freetuptable(SPI_tuptable);
		return;
	}
	spi_array(bc, 2, JSONBOID, n, &bks, &bk_nulls);
	spi_array(bc, 3, TIMESTAMPTZOID, n, &vfs, &vf_nulls);
	for (int i = 0; i < n; i++)
	{
		MovedVersion *v = moved_at(keys, key_nulls, i, moved);

		if (v == NULL || !bk_nulls[i])
			continue;
		bks[i] = v->bk;
		bk_nulls[i] = false;
		vfs[i] = TimestampTzGetDatum(v->vf);
		vf_nulls[i] = false;
	}
	values[1] = make_array(bks, bk_nulls, n, JSONBOID);
	values[2] = make_array(vfs, vf_nulls, n, TIMESTAMPTZOID);
	SPI_freetuptable(SPI_tuptable);	/* (the arrays copied what they hold of it) */
	scd2_exec_catalog(chunked ?
					  "UPDATE scd2.change_log_batches b SET business_keys = $2, valid_from = $3"
					  " WHERE b.run_id OPERATOR(pg_catalog.=) $1 AND b.chunk OPERATOR(pg_catalog.=) $4" :
					  "UPDATE scd2.change_log_batches b SET business_keys = $2, valid_from = $3"
					  " WHERE b.run_id OPERATOR(pg_catalog.=) $1",
					  chunked ? 4 : 3, argtypes, values, NULL, false, SPI_OK_UPDATE,
					  "pinning the moved rows of a batch");
	MemoryContextSwitchTo(cxt); /* (SPI left its own context current) */
}

/*
 * Before the change log and the write of an order-free load that moves
 * or removes versions (driver.c, SCD2_LOAD_MOVES), whether or not it logs
 * itself: pin them in the batches of the dimension that logged them.
 *
 * Each chunk is read with a snapshot taken then (not the statement's,
 * which a load queued behind another on the dimension's lock took before
 * that one committed its batch and its pins), its arrays held as stored
 * (toasted: the business keys and valid_from are read only for a batch
 * that holds a moved version), and it is worked on in a memory context of
 * its own, made current again after every SPI call (which leaves SPI's).
 */
void
scd2_batch_pin_moved(LoadState *st)
{
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext batch_cxt;
	HTAB	   *moved;
	BatchChunk *chunks;
	int			nchunks;
	bool		chunked;

	if (st->cfg->sk == NULL || !scd2_changelog_batch_installed())
		return;
	moved = moved_versions(st, cxt);
	if (moved == NULL)
	{
		MemoryContextSwitchTo(cxt);
		return;
	}
	chunked = scd2_changelog_batch_chunked();
	chunks = dimension_batches(st->cfg->dim_oid, chunked, cxt, &nchunks);
	batch_cxt = AllocSetContextCreate(cxt, "scd2 batch to pin", ALLOCSET_DEFAULT_SIZES);
	for (int r = 0; r < nchunks; r++)
	{
		Oid			argtypes[2] = {INT8OID, INT4OID};
		Datum		values[2] = {Int64GetDatum(chunks[r].run_id), Int32GetDatum(chunks[r].chunk)};

		MemoryContextSwitchTo(batch_cxt);
		scd2_exec_catalog(chunked ?
						  "SELECT b.surrogate_keys, b.business_keys, b.valid_from FROM scd2.change_log_batches b"
						  " WHERE b.run_id OPERATOR(pg_catalog.=) $1 AND b.chunk OPERATOR(pg_catalog.=) $2" :
						  "SELECT b.surrogate_keys, b.business_keys, b.valid_from FROM scd2.change_log_batches b"
						  " WHERE b.run_id OPERATOR(pg_catalog.=) $1",
						  chunked ? 2 : 1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading a batch to pin");
		MemoryContextSwitchTo(batch_cxt);
		if (SPI_processed == 1)
			pin_batch(&chunks[r], chunked, moved, batch_cxt);	/* frees SPI's result */
		else
			SPI_freetuptable(SPI_tuptable); /* (pruned meanwhile) */
		MemoryContextReset(batch_cxt);
	}
	MemoryContextSwitchTo(cxt);
	MemoryContextDelete(batch_cxt);
	hash_destroy(moved);
}
