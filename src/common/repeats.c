/*
 * repeats.c -- the aggregate scd2._repeats(anyelement): how many
 * non-NULL values an earlier row already had, i.e. count(x) -
 * count(DISTINCT x).  A load's validation (load/validate.c) asks it of a
 * one-column business key, to learn whether some key has several staging
 * rows.
 *
 * count(DISTINCT x) sorts every value, spilling to disk past work_mem: at
 * the default work_mem, ~30 ms of a 200k-row batch's ~45 ms validation
 * scan (PostgreSQL 15; issue 27, bench/RESULTS.md).  This aggregate keeps
 * the values it has seen in a hash set instead -- the type's own hash
 * function and default equality, as DISTINCT's hashing would use -- and
 * counts a value found there as a repeat.  The set may take as much
 * memory as a hash aggregate (hash_mem: work_mem x hash_mem_multiplier);
 * when it would take more, or when the type has no hash function, the
 * values go into a tuplesort instead (the set's values first), which
 * spills past work_mem as count(DISTINCT) does, and the repeats there are
 * the equal neighbours after sorting.  Either way the count is exact.
 *
 * It runs inside the statement that calls it: as the dimension's owner in
 * the load's security-restricted operation.  It calls the type's hash,
 * equality and ordering functions, which may be the owner's code, and is
 * therefore PARALLEL RESTRICTED (only the leader runs it).
 */
#include "scd2.h"

#include "common/hashfn.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(scd2_repeats_add);
PG_FUNCTION_INFO_V1(scd2_repeats_final);

/* A value of the set, with its hash. */
typedef struct SeenValue
{
	Datum		value;
	uint32		hash;
	char		status;			/* simplehash's */
} SeenValue;

struct seen_hash;					/* simplehash's table, below */

typedef struct RepeatsState
{
	MemoryContext cxt;			/* the aggregate's: the set, the sort */
	MemoryContext copies;		/* the set's by-reference values */
	int16		typlen;
	bool		typbyval;
	Oid			typid;
	Oid			collation;
	FmgrInfo	eq;
	FmgrInfo	hash;			/* fn_oid invalid: the type has none */
	Oid			lt_opr;			/* for the sort */
	Size		limit;			/* hash_mem */
	struct seen_hash *set;		/* the values so far, or NULL once sorting */
	Tuplesortstate *sort;		/* or the values so far, sorted at the end */
	int64		repeats;		/* values the set already held */
} RepeatsState;

static inline uint32
value_hash(RepeatsState *rs, Datum value)
{
	return DatumGetUInt32(FunctionCall1Coll(&rs->hash, rs->collation, value));
}

static inline bool
values_equal(RepeatsState *rs, Datum a, Datum b)
{
	return DatumGetBool(FunctionCall2Coll(&rs->eq, rs->collation, a, b));
}

#define SH_PREFIX seen
#define SH_ELEMENT_TYPE SeenValue
#define SH_KEY_TYPE Datum
#define SH_KEY value
#define SH_HASH_KEY(tb, key) value_hash((RepeatsState *) (tb)->private_data, key)
#define SH_EQUAL(tb, a, b) values_equal((RepeatsState *) (tb)->private_data, a, b)
#define SH_STORE_HASH
#define SH_GET_HASH(tb, a) (a)->hash
#define SH_SCOPE static inline
#define SH_DECLARE
#define SH_DEFINE
#include "lib/simplehash.h"

/* The state of a first call: the value's type and the functions it needs. */
static RepeatsState *
repeats_start(FunctionCallInfo fcinfo, MemoryContext cxt)
{
	Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
	RepeatsState *rs = MemoryContextAllocZero(cxt, sizeof(RepeatsState));
	TypeCacheEntry *tc;

	if (!OidIsValid(typid))
		elog(ERROR, "scd2._repeats: the type of its argument is unknown");
	tc = lookup_type_cache(typid, TYPECACHE_EQ_OPR_FINFO | TYPECACHE_HASH_PROC_FINFO |
						   TYPECACHE_LT_OPR);
	if (!OidIsValid(tc->eq_opr_finfo.fn_oid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("scd2._repeats needs a type with a default equality, not %s",
						format_type_be(typid))));
	rs->cxt = cxt;
	rs->copies = AllocSetContextCreate(cxt, "scd2._repeats values", ALLOCSET_DEFAULT_SIZES);
	rs->typid = typid;
	rs->collation = PG_GET_COLLATION();
	get_typlenbyval(typid, &rs->typlen, &rs->typbyval);
	fmgr_info_copy(&rs->eq, &tc->eq_opr_finfo, cxt);
	rs->lt_opr = tc->lt_opr;
	rs->limit = get_hash_memory_limit();
	if (OidIsValid(tc->hash_proc_finfo.fn_oid))
	{
		fmgr_info_copy(&rs->hash, &tc->hash_proc_finfo, cxt);
		rs->set = seen_create(cxt, 1024, rs);
	}
	return rs;
}

/*
 * From the set to a sort: the set's values go into it first, and the set
 * and its values go.  A type without an ordering cannot be sorted.
 */
static void
start_sorting(RepeatsState *rs)
{
	MemoryContext old;

	if (!OidIsValid(rs->lt_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("scd2._repeats needs a type with a default ordering past hash_mem, not %s",
						format_type_be(rs->typid))));
	old = MemoryContextSwitchTo(rs->cxt);

	rs->sort = tuplesort_begin_datum(rs->typid, rs->lt_opr, rs->collation, false, work_mem,
									 NULL, TUPLESORT_NONE);
	if (rs->set != NULL)
	{
		seen_iterator it;
		SeenValue  *v;

		seen_start_iterate(rs->set, &it);
		while ((v = seen_iterate(rs->set, &it)) != NULL)
			tuplesort_putdatum(rs->sort, v->value, false);
		seen_destroy(rs->set);
		rs->set = NULL;
	}
	MemoryContextDelete(rs->copies);
	rs->copies = NULL;
	MemoryContextSwitchTo(old);
}

/* The set's memory: its buckets and the by-reference values it keeps. */
static Size
set_memory(RepeatsState *rs)
{
	return (Size) rs->set->size * sizeof(SeenValue) + MemoryContextMemAllocated(rs->copies, true);
}

/* One value into the set: a repeat if it was there (kept if it was not). */
static void
add_to_set(RepeatsState *rs, Datum value)
{
	bool		found;
	SeenValue  *v = seen_insert(rs->set, value, &found);

	if (found)
	{
		rs->repeats++;
		return;
	}
	if (!rs->typbyval)
	{
		/* the row's value lives only as long as the row */
		MemoryContext old = MemoryContextSwitchTo(rs->copies);

		v->value = datumCopy(value, rs->typbyval, rs->typlen);
		MemoryContextSwitchTo(old);
	}
	if (set_memory(rs) > rs->limit)
		start_sorting(rs);
}

Datum
scd2_repeats_add(PG_FUNCTION_ARGS)
{
	MemoryContext cxt;
	RepeatsState *rs;

	if (!AggCheckCallContext(fcinfo, &cxt))
		elog(ERROR, "scd2._repeats_add called in non-aggregate context");
	rs = PG_ARGISNULL(0) ? repeats_start(fcinfo, cxt) : (RepeatsState *) PG_GETARG_POINTER(0);
	if (!PG_ARGISNULL(1))
	{
		Datum		value = PG_GETARG_DATUM(1);

		if (rs->set == NULL && rs->sort == NULL)
			start_sorting(rs);
		/*
		 * the set allocates in its own context; what the type's hash and
		 * equality functions leave goes with the input row's context
		 */
		if (rs->set != NULL)
			add_to_set(rs, value);
		else
			tuplesort_putdatum(rs->sort, value, false);
	}
	PG_RETURN_POINTER(rs);
}

/* The repeats among the sorted values: equal neighbours. */
static int64
sorted_repeats(RepeatsState *rs)
{
	int64		repeats = 0;
	Datum		prev = (Datum) 0;
	bool		have_prev = false;
	Datum		value;
	bool		isnull;

	tuplesort_performsort(rs->sort);
	while (scd2_tuplesort_getdatum(rs->sort, &value, &isnull))
	{
		if (have_prev && values_equal(rs, prev, value))
			repeats++;
		if (have_prev && !rs->typbyval)
			pfree(DatumGetPointer(prev));
		prev = value;
		have_prev = true;
	}
	tuplesort_end(rs->sort);
	rs->sort = NULL;
	return repeats;
}

Datum
scd2_repeats_final(PG_FUNCTION_ARGS)
{
	RepeatsState *rs;

	if (!AggCheckCallContext(fcinfo, NULL))
		elog(ERROR, "scd2._repeats_final called in non-aggregate context");
	if (PG_ARGISNULL(0))
		PG_RETURN_INT64(0);		/* no rows */
	rs = (RepeatsState *) PG_GETARG_POINTER(0);
	if (rs->sort != NULL)
		rs->repeats += sorted_repeats(rs);
	PG_RETURN_INT64(rs->repeats);
}
