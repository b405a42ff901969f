/*
 * citus_catalog.c -- what scd2 reads of Citus's metadata, without linking
 * against Citus and without calling it when it is not installed.
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

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace_d.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "citus_catalog.h"

/* Is the citus extension installed in this database (with its catalogs)? */
static bool
citus_present(void)
{
	return OidIsValid(get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)) &&
		OidIsValid(get_extension_oid("citus", true));
}

/* Is relid a table in Citus's metadata (distributed, reference or local)? */
bool
scd2_citus_catalog_has(Oid relid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(relid)};
	bool		found;
	int			rc;

	if (!citus_present())
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	rc = SPI_execute_with_args("SELECT FROM pg_catalog.pg_dist_partition p"
							   " WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: reading pg_dist_partition failed: %s", SPI_result_code_string(rc));
	found = SPI_processed > 0;
	SPI_finish();
	return found;
}

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
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	int			rc;

	memset(out, 0, sizeof(*out));
	if (!citus_present())
		return false;
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");

	rc = SPI_execute_with_args("SELECT p.partmethod, p.repmodel, p.partkey"
							   "  FROM pg_catalog.pg_dist_partition p"
							   " WHERE p.logicalrelid OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
							   1, argtypes, values, NULL, true, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: reading pg_dist_partition failed: %s", SPI_result_code_string(rc));
	if (SPI_processed == 0)
	{
		SPI_finish();
		return false;
	}
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	out->method = DatumGetChar(SPI_getbinval(tup, desc, 1, &isnull));
	out->repmodel = DatumGetChar(SPI_getbinval(tup, desc, 2, &isnull));
	out->distattnum = InvalidAttrNumber;
	d = SPI_getbinval(tup, desc, 3, &isnull);
	if (!isnull)
	{
		/* the distribution column, as Citus stores it: a Var in node text */
		Node	   *key = stringToNode(TextDatumGetCString(d));

		if (key != NULL && IsA(key, Var))
			out->distattnum = ((Var *) key)->varattno;
	}

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
