/*
 * shards.c -- where a Citus table's shards are and which of them
 * have a placement on this node, for scd2.asof; without linking against
 * Citus and without calling it when it is not installed.  How a table is
 * distributed is detect.c's (one reader of pg_dist_partition).
 *
 * Citus 11+ keeps its metadata on every node with metadata (the
 * coordinator and, synced, every worker): pg_dist_partition (how a table
 * is distributed), pg_dist_shard (its shards and their hash ranges),
 * pg_dist_placement (which node group holds each shard) and
 * pg_dist_local_group (this node's group).  A shard's table is named by
 * Citus's shard_name() (the table's name, an underscore and the shard id;
 * Citus shortens long names).  All of it is read with SPI, only when the
 * citus extension exists in this database.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/guc.h"

#include "citus/citus.h"

static int
shard_cmp(const void *a, const void *b)
{
	const Scd2CitusShard *x = a;
	const Scd2CitusShard *y = b;

	if (x->minhash != y->minhash)
		return x->minhash < y->minhash ? -1 : 1;
	return 0;
}

/*
 * Read how relid is distributed and its shards (into cxt); false when it
 * is not a Citus table or Citus is not installed.
 */
bool
scd2_citus_read_shards(Oid relid, MemoryContext cxt, Scd2CitusShards *out)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	Scd2CitusTable t;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	int			rc;

	memset(out, 0, sizeof(*out));
	if (scd2_citus_table(relid, &t) == SCD2_CITUS_NONE)
		return false;
	out->method = t.partmethod;
	out->repmodel = t.repmodel;
	out->distattnum = t.distcol;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");

	/* the shards, and the relation of each one that has a placement here */
	rc = SPI_execute_with_args(
		"SELECT s.shardid, s.shardminvalue, s.shardmaxvalue,"
		"       CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_dist_placement pl"
		"                          WHERE pl.shardid OPERATOR(pg_catalog.=) s.shardid"
		"                            AND pl.shardstate OPERATOR(pg_catalog.=) 1"
		"                            AND pl.groupid OPERATOR(pg_catalog.=)"
		"                                (SELECT g.groupid FROM pg_catalog.pg_dist_local_group g))"
		"            THEN pg_catalog.to_regclass(pg_catalog.shard_name(s.logicalrelid, s.shardid, false))"
		"       END::pg_catalog.oid"
		"  FROM pg_catalog.pg_dist_shard s"
		" WHERE s.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
		1, argtypes, values, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: reading pg_dist_shard failed: %s", SPI_result_code_string(rc));

	out->nshards = (int) SPI_processed;
	out->shards = MemoryContextAllocZero(cxt, sizeof(Scd2CitusShard) * Max(out->nshards, 1));
	desc = SPI_tuptable->tupdesc;
	for (int i = 0; i < out->nshards; i++)
	{
		Scd2CitusShard *s = &out->shards[i];
		char	   *minv,
				   *maxv;

		tup = SPI_tuptable->vals[i];
		s->shardid = DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull));
		minv = SPI_getvalue(tup, desc, 2);
		maxv = SPI_getvalue(tup, desc, 3);
		s->hashed = out->method == 'h' && minv != NULL && maxv != NULL;
		if (s->hashed)
		{
			s->minhash = pg_strtoint32(minv);
			s->maxhash = pg_strtoint32(maxv);
		}
		d = SPI_getbinval(tup, desc, 4, &isnull);
		s->localrel = isnull ? InvalidOid : DatumGetObjectId(d);
	}
	SPI_finish();

	if (out->nshards > 1)
		qsort(out->shards, out->nshards, sizeof(Scd2CitusShard), shard_cmp);
	return true;
}

/*
 * Is this backend running a task for a Citus query started on another
 * node (or this one)?  Citus names the connections it opens to run tasks
 * "citus_internal gpid=..." and refuses to start a distributed query from
 * a query on a shard.
 */
bool
scd2_citus_in_task(void)
{
	const char *appname = GetConfigOption("application_name", true, false);

	return appname != NULL && strncmp(appname, "citus_internal", 14) == 0;
}
