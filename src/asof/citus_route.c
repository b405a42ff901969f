/*
 * citus_route.c -- scd2.asof on a Citus cluster.
 *
 * On a Citus node a distributed or reference dimension is a shell table
 * (empty on the coordinator) whose rows live in shards: tables named
 * dim_<shardid>, with the same columns and indexes, placed on one node
 * (distributed) or on every node (reference).  So the lookup reads the
 * shard, found from Citus's metadata (citus/shards.c), which Citus 11+
 * keeps on every node:
 *
 * - reference (or single-shard) dimension: its one shard; a node with a
 *   placement (every worker, and the coordinator once it is in the
 *   metadata) probes that shard's as-of index directly, with the same
 *   probe, bulk map and visibility rules as a plain table;
 * - dimension distributed by a business key column: the key's shard is
 *   found by hashing that column as Citus does (the column type's default
 *   hash function, with its collation) and looking the hash up in the
 *   shards' ranges; when that shard has a placement here (a fact load
 *   whose source is co-located with the dimension) it is probed directly;
 * - otherwise (the shard is on another node, or the dimension is
 *   distributed by another column) the lookup runs a query through Citus
 *   on the dimension for all the versions of the key, which Citus routes
 *   to the shard; they are kept for the rest of the query while its
 *   snapshot stays the same, so a key asked for again costs no round
 *   trip.  Inside a task that Citus runs on a shard it cannot: Citus
 *   refuses to start a distributed query there, and the call errors out
 *   with a hint (scd2_asof_citus_unreachable).
 *
 * Each shard probed gets a cache of its own (cache.c), built at its
 * first call in the query, so its scan, snapshot checks and bulk map work
 * as on a plain table.  Nothing is kept across queries, or across
 * snapshots.
 *
 * The registration: scd2.dimensions lives on the coordinator (its
 * regclass values are OIDs, which differ from node to node).  Where the
 * registry has no row for a Citus table -- on a worker -- what the lookup
 * needs (business key, valid_from, valid_to, surrogate key) is read from
 * the as-of index scd2.register creates, which Citus creates on the shell
 * table on every node and on every shard: a unique btree on (business key
 * columns, valid_from) INCLUDE (surrogate key, valid_to).
 */
#include "postgres.h"

#include "access/hash.h"
#include "catalog/pg_operator.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "scd2.h"
#include "asof/asof.h"
#include "citus/citus.h"

typedef struct AsofCitus
{
	Scd2CitusShards table;
	int			distkey;		/* business key column that distributes it, -1: none */
	FmgrInfo	hashfn;			/* Citus's hash of that column's argument values */
	bool		hashable;		/* hashfn is set */
	Oid			hashcoll;
	AsofCache **shardcaches;	/* per shard, built at first use */
	bool		in_task;		/* running a Citus task: no query through Citus */

	/* the query through Citus */
	Oid			eqops[INDEX_MAX_KEYS];	/* key column = argument */
	Oid			paramtypes[INDEX_MAX_KEYS];
	FmgrInfo	paramout[INDEX_MAX_KEYS];	/* their output functions */
	SPIPlanPtr	plan;
	MemoryContextCallback cb;	/* frees the plan */

	/*
	 * The versions of the keys asked for, each read by one query, kept
	 * while the snapshot stays the same (lookup.c) and within work_mem *
	 * hash_mem_multiplier; keyed by the key values' text.
	 */
	MemoryContext keptcxt;
	HTAB	   *kept;
} AsofCitus;

/* A key's versions, in valid_from order, as the query read them. */
#define KEPT_KEY_LEN NAMEDATALEN

typedef struct KeptVersion
{
	int64		vf;				/* valid_from (a date widened) */
	int64		vt;				/* valid_to, when not open */
	int64		sk;
	bool		open;			/* valid_to NULL or infinity */
	bool		sknull;
} KeptVersion;

typedef struct KeptKey
{
	char		key[KEPT_KEY_LEN];	/* the hash key: the values' text */
	int			nversions;
	KeptVersion *versions;
} KeptKey;

/* The reset callback of the cache's memory: free the query's plan. */
static void
free_plan(void *arg)
{
	AsofCitus  *ct = (AsofCitus *) arg;

	if (ct->plan != NULL)
		SPI_freeplan(ct->plan);
	ct->plan = NULL;
}

/*
 * Citus's hash of the distribution column: the support function 1 of the
 * column type's default hash operator class.  An argument of another type
 * compared through a cross-type operator is hashed by the same family's
 * function for its own type, which the family guarantees to agree.
 */
static void
setup_hash(AsofCache *c, AsofCitus *ct, Relation index)
{
	AsofKey    *k = &c->keys[ct->distkey];
	Oid			opclass = GetDefaultOpClass(k->coltype, HASH_AM_OID);
	Oid			opfamily,
				opcintype,
				argtype,
				proc;

	if (!OidIsValid(opclass))
		return;
	opfamily = get_opclass_family(opclass);
	opcintype = get_opclass_input_type(opclass);
	argtype = c->scankeys[ct->distkey].sk_subtype;
	if (argtype == index->rd_opcintype[ct->distkey] || k->conv != KEY_AS_IS)
		argtype = opcintype;	/* the value is of the column's (opclass's) type */
	proc = get_opfamily_proc(opfamily, argtype, argtype, HASHSTANDARD_PROC);
	if (!OidIsValid(proc))
		return;
	fmgr_info_cxt(proc, &ct->hashfn, c->cxt);
	ct->hashcoll = k->colcollation;
	ct->hashable = true;
}

/*
 * After the cache is built on the dimension: is it a Citus table?  Then
 * read its shards and prepare the routing.
 */
void
scd2_asof_citus_setup(AsofCache *c)
{
	AsofCitus  *ct;
	Scd2CitusShards table;
	Relation	index;

	if (!scd2_citus_read_shards(c->relid, c->cxt, &table))
		return;

	index = index_open(c->indexid, AccessShareLock);

	ct = MemoryContextAllocZero(c->cxt, sizeof(AsofCitus));
	ct->table = table;
	ct->distkey = -1;
	ct->in_task = scd2_citus_in_task();
	ct->shardcaches = MemoryContextAllocZero(c->cxt, sizeof(AsofCache *) * Max(table.nshards, 1));
	if (table.method == 'h')
		for (int i = 0; i < c->nkeys; i++)
			if (c->keys[i].attnum == table.distattnum)
				ct->distkey = i;
	if (ct->distkey >= 0)
		setup_hash(c, ct, index);

	for (int i = 0; i < c->nkeys; i++)
	{
		Oid			opcintype = index->rd_opcintype[i];
		Oid			subtype = c->scankeys[i].sk_subtype;
		Oid			outfn;
		bool		isvarlena;

		ct->eqops[i] = get_opfamily_member(index->rd_opfamily[i], opcintype,
										   OidIsValid(subtype) ? subtype : opcintype,
										   BTEqualStrategyNumber);
		ct->paramtypes[i] = OidIsValid(subtype) && !IsPolymorphicType(subtype) ? subtype :
			c->keys[i].coltype;
		getTypeOutputInfo(ct->paramtypes[i], &outfn, &isvarlena);
		fmgr_info_cxt(outfn, &ct->paramout[i], c->cxt);
	}

	index_close(index, NoLock);

	ct->cb.func = free_plan;
	ct->cb.arg = ct;
	MemoryContextRegisterResetCallback(c->cxt, &ct->cb);
	c->citus = ct;
}

/* The shard whose hash range holds h, or -1. */
static int
find_shard(AsofCitus *ct, int32 h)
{
	int			lo = 0,
				hi = ct->table.nshards - 1;

	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;
		Scd2CitusShard *s = &ct->table.shards[mid];

		if (!s->hashed)
			return -1;
		if (h < s->minhash)
			hi = mid - 1;
		else if (h > s->maxhash)
			lo = mid + 1;
		else
			return mid;
	}
	return -1;
}

/*
 * Where this call reads (its key arguments are in c->scankeys): a local
 * shard (*target, its cache, with the scan keys copied), a query through
 * Citus, or nowhere it may (inside a task).
 */
AsofRoute
scd2_asof_citus_route(AsofCache *c, AsofCache **target)
{
	AsofCitus  *ct = c->citus;
	int			shard = -1;

	if (ct->table.nshards == 1 && !ct->table.shards[0].hashed)
		shard = 0;				/* reference, single-shard or Citus local table */
	else if (ct->distkey >= 0 && ct->hashable)
	{
		int32		h = DatumGetInt32(FunctionCall1Coll(&ct->hashfn, ct->hashcoll,
														c->scankeys[ct->distkey].sk_argument));

		shard = find_shard(ct, h);
	}

	if (shard >= 0 && OidIsValid(ct->table.shards[shard].localrel))
	{
		AsofCache  *sc = ct->shardcaches[shard];

		if (sc == NULL)
			sc = ct->shardcaches[shard] =
				scd2_asof_build_shard_cache(c, ct->table.shards[shard].localrel);
		for (int i = 0; i <= c->nkeys; i++)
			sc->scankeys[i].sk_argument = c->scankeys[i].sk_argument;
		*target = sc;
		return ASOF_ROUTE_LOCAL;
	}
	*target = NULL;
	return ct->in_task ? ASOF_ROUTE_UNREACHABLE : ASOF_ROUTE_QUERY;
}

/*
 * The error for a call scd2_asof_citus_route finds no way to answer here
 * (key: the key, as the missing-version error shows it).
 */
void
scd2_asof_citus_unreachable(AsofCache *c, const char *key)
{
	AsofCitus  *ct = c->citus;

	if (ct->table.method == 'h' && ct->distkey < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("scd2.asof cannot look up key %s of distributed dimension \"%s\" on this node",
						key, c->relname),
				 errdetail("The dimension is distributed by column \"%s\", which is not a business key column, so the key's versions may be on any shard, and a query that Citus runs on a shard cannot start another distributed query.",
						   get_attname(c->relid, ct->table.distattnum, false)),
				 errhint("Distribute the dimension by a business key column, or make it a reference table.")));
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("scd2.asof cannot look up key %s of distributed dimension \"%s\" on this node",
					key, c->relname),
			 errdetail("The key's shard has no placement on this node, and a query that Citus runs on a shard cannot start another distributed query."),
			 errhint("Distribute the fact load's source by the business key, co-located with the dimension, or make the dimension a reference table.")));
}

/*
 * The query through Citus: every version of one key, in valid_from order
 * (Citus routes it to the key's shard, or asks every shard).
 */
static SPIPlanPtr
query_plan(AsofCache *c)
{
	AsofCitus  *ct = c->citus;
	StringInfoData sql;
	Oid			relid = c->relid;
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												 get_rel_name(relid));
	const char *vf = quote_identifier(get_attname(relid, c->vf_attnum, false));
	const char *vt = quote_identifier(get_attname(relid, c->vt_attnum, false));
	const char *sk = quote_identifier(get_attname(relid, c->sk_attnum, false));
	SPIPlanPtr	plan;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT t.%s, t.%s, t.%s FROM %s t WHERE t.%s IS NOT NULL",
					 vf, vt, sk, rel, vf);
	for (int i = 0; i < c->nkeys; i++)
	{
		HeapTuple	optup = SearchSysCache1(OPEROID, ObjectIdGetDatum(ct->eqops[i]));
		Form_pg_operator op;

		if (!HeapTupleIsValid(optup))
			elog(ERROR, "cache lookup failed for operator %u", ct->eqops[i]);
		op = (Form_pg_operator) GETSTRUCT(optup);
		appendStringInfo(&sql, " AND t.%s OPERATOR(%s.%s) $%d",
						 quote_identifier(c->keys[i].colname),
						 quote_identifier(get_namespace_name(op->oprnamespace)),
						 NameStr(op->oprname), i + 1);
		ReleaseSysCache(optup);
	}
	appendStringInfo(&sql, " ORDER BY t.%s", vf);

	plan = SPI_prepare(sql.data, c->nkeys, ct->paramtypes);
	if (plan == NULL)
		elog(ERROR, "scd2: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "scd2: SPI_keepplan failed");
	return plan;
}

static bool
time_is_noend(AsofCache *c, Datum d)
{
	if (c->vftype == DATEOID)
		return DATE_IS_NOEND(DatumGetDateADT(d));
	return TIMESTAMP_IS_NOEND(DatumGetTimestamp(d));
}

/*
 * A new snapshot (or the first call): forget the kept versions, and keep
 * the snapshot's description to see it change.
 */
void
scd2_asof_citus_forget(AsofCache *c, Snapshot snapshot)
{
	AsofCitus  *ct = c->citus;
	HASHCTL		ctl;
	MemoryContext oldcxt;

	if (ct->keptcxt != NULL)
		MemoryContextDelete(ct->keptcxt);
	ct->keptcxt = AllocSetContextCreate(c->cxt, "scd2.asof kept versions", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(ct->keptcxt);
	scd2_asof_keep_snapshot(c, snapshot);
	MemoryContextSwitchTo(oldcxt);

	memset(&ctl, 0, sizeof(ctl));
	ctl.keysize = KEPT_KEY_LEN;
	ctl.entrysize = sizeof(KeptKey);
	ctl.hcxt = ct->keptcxt;
	ct->kept = hash_create("scd2.asof kept versions", 256, &ctl,
						   HASH_ELEM | HASH_STRINGS | HASH_CONTEXT);
}

/*
 * The hash key of a call's key values (in c->scankeys): their text, each
 * prefixed by its length; false when it does not fit (not kept then).
 */
static bool
kept_key(AsofCache *c, char *out)
{
	AsofCitus  *ct = c->citus;
	StringInfoData buf;
	bool		fits;

	initStringInfo(&buf);
	for (int i = 0; i < c->nkeys; i++)
	{
		char	   *v = OutputFunctionCall(&ct->paramout[i], c->scankeys[i].sk_argument);

		appendStringInfo(&buf, "%zu:%s", strlen(v), v);
	}
	fits = buf.len < KEPT_KEY_LEN;
	if (fits)
	{
		memset(out, 0, KEPT_KEY_LEN);
		memcpy(out, buf.data, buf.len);
	}
	pfree(buf.data);
	return fits;
}

/* Read the key's versions through Citus into e (in cxt). */
static void
read_versions(AsofCache *c, KeptKey *e, MemoryContext cxt)
{
	AsofCitus  *ct = c->citus;
	Datum		values[INDEX_MAX_KEYS];
	int			rc;

	for (int i = 0; i < c->nkeys; i++)
		values[i] = c->scankeys[i].sk_argument;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	if (ct->plan == NULL)
		ct->plan = query_plan(c);
	rc = SPI_execute_plan(ct->plan, values, NULL, true, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: the as-of query on dimension \"%s\" failed: %s",
			 c->relname, SPI_result_code_string(rc));
	e->nversions = (int) SPI_processed;
	e->versions = MemoryContextAlloc(cxt, sizeof(KeptVersion) * Max(e->nversions, 1));
	for (int i = 0; i < e->nversions; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		KeptVersion *v = &e->versions[i];
		bool		isnull;
		Datum		d;

		v->vf = scd2_asof_time_value(c, SPI_getbinval(tup, desc, 1, &isnull));
		d = SPI_getbinval(tup, desc, 2, &isnull);
		v->open = isnull || time_is_noend(c, d);
		v->vt = v->open ? 0 : scd2_asof_time_value(c, d);
		d = SPI_getbinval(tup, desc, 3, &v->sknull);
		v->sk = v->sknull ? 0 : scd2_asof_sk_value(c, d);
	}
	SPI_finish();
}

/*
 * A call answered through Citus: the key's versions (kept, or read now),
 * then the probe's rule (scan.c): the latest version starting at or
 * before the instant, if it is still valid then.
 */
bool
scd2_asof_citus_query(AsofCache *c, Datum atv, int64 *sk)
{
	AsofCitus  *ct = c->citus;
	char		key[KEPT_KEY_LEN];
	KeptKey		local;
	KeptKey    *volatile e = &local;
	int64		at = scd2_asof_time_value(c, atv);
	int			lo,
				hi;

	if (kept_key(c, key))
	{
		bool		found;

		/* within the memory a hash join would take, else start over */
		if (MemoryContextMemAllocated(ct->keptcxt, true) > get_hash_memory_limit())
			scd2_asof_citus_forget(c, c->snapshot);
		e = hash_search(ct->kept, key, HASH_ENTER, &found);
		if (!found)
		{
			e->nversions = 0;
			e->versions = NULL;
			PG_TRY();
			{
				read_versions(c, e, ct->keptcxt);
			}
			PG_CATCH();
			{
				hash_search(ct->kept, key, HASH_REMOVE, NULL);
				PG_RE_THROW();
			}
			PG_END_TRY();
		}
	}
	else
		read_versions(c, e, c->callcxt);

	/* the last version with valid_from <= at */
	lo = 0;
	hi = e->nversions - 1;
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (e->versions[mid].vf <= at)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	if (hi < 0)
		return false;
	if (e->versions[hi].sknull || !(e->versions[hi].open || at < e->versions[hi].vt))
		return false;
	*sk = e->versions[hi].sk;
	return true;
}
