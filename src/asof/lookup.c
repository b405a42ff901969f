/*-------------------------------------------------------------------------
 *
 * lookup.c
 *	  scd2.asof(dimension regclass, at timestamptz, VARIADIC business_key "any")
 *
 * Returns the surrogate key of the version of a business key that is valid
 * at an instant (valid_from <= at < valid_to; a NULL or 'infinity' valid_to
 * is open), or NULL.
 *
 * The dimension's configuration is read from scd2.dimensions once per query
 * (first call of a call site) and cached in fn_extra together with
 * everything derived from it: attribute numbers, the chosen as-of index and
 * its scan keys.  Each call then probes that index: equality on the business
 * key columns and valid_from <= at, walked from the high end, so the first
 * visible entry is the latest version that started at or before the instant.
 * When the index carries the surrogate key and valid_to (the index
 * scd2.register creates does, through INCLUDE) the probe is index-only
 * wherever the visibility map allows; otherwise it reads the heap tuple.
 *
 * Bulk mode: after scd2.asof_bulk_threshold calls under one snapshot (or
 * rows / 40 for a smaller dimension), the call site builds once a compact
 * in-memory map of the dimension's visible versions (one ordered walk of the
 * same index, same visibility rules) and answers from it: binary searches
 * in sorted arrays (map.c).  It is only built when it fits in
 * scd2.asof_map_memory, and lives as long as the open scan.  Each process
 * of a parallel query builds its own.
 *
 * Key arguments: an argument whose type is the column's type (or a domain
 * over it, or binary coercible to the index's operator class type) is used
 * as is; an argument of another type is used through a cross-type operator
 * of the index's operator family when one exists (int4 against a bigint
 * column, as the planner would do); otherwise an implicit cast to the
 * column type is applied; an untyped literal is read by the column type's
 * input function.  Anything else is a datatype_mismatch error naming the
 * column.  VARIADIC ARRAY[...] is accepted: the array's elements are the key
 * values, in business key order.  A NULL dimension, instant or key value
 * gives NULL.  When no version is valid at the instant the result is NULL,
 * or an error with scd2.asof_on_missing = error.
 *
 * The probe runs with the caller's privileges: SELECT on the dimension (or
 * on the columns read) is required, and a dimension with row-level security
 * enforced for the caller is rejected (the probe cannot apply policies), as
 * is a partitioned dimension (its indexes cannot be probed directly).
 *
 * On a Citus table the rows are in shards: citus_route.c routes each call
 * to the shard on this node or to a query through Citus.
 *
 * Known limitation: in PL/pgSQL, a simple expression such as
 * "v := scd2.asof(...)" is evaluated in a state that lives until the end of
 * the transaction, so its scan stays open until then, and DDL on that
 * dimension later in the same transaction (TRUNCATE, ALTER TABLE, CREATE
 * INDEX) fails with "cannot ... because it is being used by active queries
 * in this session".  "SELECT scd2.asof(...) INTO v" closes it at the end of
 * the statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "scd2.h"
#include "asof/asof.h"

PG_FUNCTION_INFO_V1(scd2_asof);

/* A key argument's value as its column's comparison expects it. */
static Datum
convert_key(AsofKey *k, Datum value)
{
	switch (k->conv)
	{
		case KEY_AS_IS:
			return value;
		case KEY_INPUT:
			return InputFunctionCall(&k->convfn, DatumGetCString(value),
									 k->convioparam, k->coltypmod);
		case KEY_CAST:
			if (k->convnargs == 1)
				return FunctionCall1(&k->convfn, value);
			if (k->convnargs == 2)
				return FunctionCall2(&k->convfn, value, Int32GetDatum(k->coltypmod));
			return FunctionCall3(&k->convfn, value, Int32GetDatum(k->coltypmod),
								 BoolGetDatum(false));
	}
	return value;				/* keep compiler quiet */
}

/* at, as a value of the valid_from column's type (as a cast would do it) */
static Datum
convert_at(AsofCache *c, TimestampTz at)
{
	switch (c->vftype)
	{
		case TIMESTAMPTZOID:
			return TimestampTzGetDatum(at);
		case TIMESTAMPOID:
			return DirectFunctionCall1(timestamptz_timestamp, TimestampTzGetDatum(at));
		case DATEOID:
			return DirectFunctionCall1(timestamptz_date, TimestampTzGetDatum(at));
	}
	elog(ERROR, "unexpected valid_from type %u", c->vftype);
	return (Datum) 0;			/* keep compiler quiet */
}

/*
 * Is this another snapshot than the open scan's (or the one a Citus
 * dimension's kept versions were read under, citus_route.c)?  Not only another address:
 * the scan's snapshot may have been freed and another one allocated at the
 * same place (a PL/pgSQL loop takes one per statement), or its command id
 * advanced in place; so compare what decides visibility too.  (The snapshot
 * is not registered: that would forbid UpdateActiveSnapshotCommandId on it.)
 */
static bool
snapshot_changed(AsofCache *c, Snapshot snapshot)
{
	Snapshot	old = &c->snap;

	return snapshot != c->snapshot ||
		snapshot->snapshot_type != old->snapshot_type ||
		snapshot->xmin != old->xmin ||
		snapshot->xmax != old->xmax ||
		snapshot->curcid != old->curcid ||
		snapshot->xcnt != old->xcnt ||
		snapshot->subxcnt != old->subxcnt ||
		snapshot->suboverflowed != old->suboverflowed ||
		snapshot->takenDuringRecovery != old->takenDuringRecovery ||
		(old->xcnt > 0 &&
		 memcmp(snapshot->xip, old->xip, sizeof(TransactionId) * old->xcnt) != 0) ||
		(old->subxcnt > 0 &&
		 memcmp(snapshot->subxip, old->subxip, sizeof(TransactionId) * old->subxcnt) != 0);
}

/*
 * Look up with the scan open (under the active snapshot): in the map when
 * there is one, else by a probe, with the scan's resource owner current;
 * the map is built on the call that reaches the trigger.
 */
static bool
run_probe(AsofCache *c, Datum atv, int64 *sk)
{
	Snapshot	snapshot = GetActiveSnapshot();
	ResourceOwner saved = CurrentResourceOwner;
	volatile bool found = false;

	if (c->open && snapshot_changed(c, snapshot))
		scd2_asof_close(c);			/* another snapshot: a new scan, no map */
	if (!c->open)
		scd2_asof_open(c, snapshot);

	if (c->map_state == MAP_READY)
		return scd2_asof_map_lookup(c, atv, sk);

	c->ncalls++;
	CurrentResourceOwner = c->owner;
	PG_TRY();
	{
		if (c->map_state == MAP_NONE && c->bulk_trigger > 0 && c->ncalls >= c->bulk_trigger)
			scd2_asof_build_map(c);
		if (c->map_state == MAP_READY)
			found = scd2_asof_map_lookup(c, atv, sk);
		else
		{
			/*
			 * In the scan's context: btree keeps what its first rescan and
			 * gettuple allocate (the index-only tuple workspace, the killed
			 * items array) for the life of the scan, and callcxt is reset
			 * before every call (valgrind: invalid writes after free).
			 */
			MemoryContext oldcxt = MemoryContextSwitchTo(c->opencxt);

			found = scd2_asof_probe(c, atv, sk);
			MemoryContextSwitchTo(oldcxt);
		}
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
	return found;
}

/* "(a, b)=(1, x)" for the missing-version error */
static char *
describe_key(AsofCache *c, Datum *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < c->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "", quote_identifier(c->keys[i].colname));
	appendStringInfoString(&buf, ")=(");
	for (int i = 0; i < c->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 c->keys[i].argtype == UNKNOWNOID ? DatumGetCString(values[i]) :
						 OidOutputFunctionCall(c->keys[i].argoutfn, values[i]));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * The business key arguments of one call into values[] (from the VARIADIC
 * array or one argument per column); false when one is NULL.
 */
static bool
key_values(FunctionCallInfo fcinfo, AsofCache *c, Datum *values)
{
	if (c->variadic_array)
	{
		ArrayType  *arr;
		bool	   *nulls;
		int			n;

		if (PG_ARGISNULL(2))
			return false;
		arr = PG_GETARG_ARRAYTYPE_P(2);
		if (ARR_NDIM(arr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("VARIADIC argument of scd2.asof must be a one-dimensional array")));
		{
			Datum	   *elems;

			deconstruct_array(arr, ARR_ELEMTYPE(arr), c->elmlen, c->elmbyval, c->elmalign,
							  &elems, &nulls, &n);
			if (n != c->nkeys)
				scd2_asof_wrong_key_count(c, n);
			for (int i = 0; i < n; i++)
			{
				if (nulls[i])
					return false;
				values[i] = elems[i];
			}
		}
	}
	else
	{
		for (int i = 0; i < c->nkeys; i++)
		{
			if (PG_ARGISNULL(i + 2))
				return false;
			values[i] = PG_GETARG_DATUM(i + 2);
		}
	}
	return true;
}

Datum
scd2_asof(PG_FUNCTION_ARGS)
{
	AsofCache  *c = (AsofCache *) fcinfo->flinfo->fn_extra;
	Oid			relid;
	TimestampTz at;
	Datum		values[INDEX_MAX_KEYS];
	Datum		atv;
	int64		sk = 0;
	bool		found;
	MemoryContext oldcxt;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	relid = PG_GETARG_OID(0);

	/* (re)build the cache on first call, another dimension, or after DDL */
	if (c == NULL || c->relid != relid || c->lxid != SCD2_MY_LXID ||
		c->cid != GetCurrentCommandId(false))
	{
		AsofCache  *fresh = scd2_asof_build_cache(fcinfo, relid);

		/* a Citus table: its rows are in shards (citus_route.c) */
		scd2_asof_citus_setup(fresh);
		/* the old cache stays usable until the new one is complete */
		if (c != NULL)
			MemoryContextDelete(c->cxt);
		c = fresh;
		fcinfo->flinfo->fn_extra = c;
	}

	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	at = PG_GETARG_TIMESTAMPTZ(1);

	MemoryContextReset(c->callcxt);
	oldcxt = MemoryContextSwitchTo(c->callcxt);

	if (!key_values(fcinfo, c, values))
	{
		MemoryContextSwitchTo(oldcxt);
		PG_RETURN_NULL();		/* a NULL key value */
	}

	for (int i = 0; i < c->nkeys; i++)
		c->scankeys[i].sk_argument = convert_key(&c->keys[i], values[i]);
	atv = convert_at(c, at);
	c->scankeys[c->nkeys].sk_argument = atv;

	if (c->citus == NULL)
		found = run_probe(c, atv, &sk);
	else
	{
		/* a Citus dimension: its shard here, or a query through Citus */
		AsofCache  *shard;

		switch (scd2_asof_citus_route(c, &shard))
		{
			case ASOF_ROUTE_LOCAL:
				found = run_probe(shard, atv, &sk);
				break;
			case ASOF_ROUTE_QUERY:
				/* its keys' versions are kept for one snapshot */
				if (snapshot_changed(c, GetActiveSnapshot()))
					scd2_asof_citus_forget(c, GetActiveSnapshot());
				found = scd2_asof_citus_query(c, atv, &sk);
				break;
			default:
				scd2_asof_citus_unreachable(c, describe_key(c, values));
				found = false;	/* not reached: it raises the error */
		}
	}

	if (!found && scd2_asof_on_missing == SCD2_ASOF_MISSING_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("no version of key %s in dimension \"%s\" is valid at %s",
						describe_key(c, values), c->relname,
						DatumGetCString(DirectFunctionCall1(timestamptz_out,
															TimestampTzGetDatum(at)))),
				 errhint("Set scd2.asof_on_missing to 'null' to get NULL for missing versions.")));

	MemoryContextSwitchTo(oldcxt);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(sk);
}
