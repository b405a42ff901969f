/*
 * asof_map.c -- bulk mode of scd2.asof: an in-memory map of the
 * dimension's visible versions, built by one walk of the as-of index.
 */
#include "postgres.h"
#include "access/genam.h"
#include "access/nbtree.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class_d.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/nodeHash.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "portability/instr_time.h"
#include "parser/parse_coerce.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/date.h"
#include "utils/fmgroids.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "scd2.h"
#include "asof.h"

/*
 * Bulk mode.
 *
 * After many calls under one snapshot (scd2.asof_bulk_threshold, or a tenth
 * of a smaller dimension's rows), the call site walks the whole as-of index
 * once, in order, with the scan's snapshot (index-only where the visibility
 * map allows, as the probe), and keeps every visible version in memory:
 * a hash table of business keys, each with its versions in ascending
 * valid_from order.  A call is then a hash lookup and a binary search,
 * giving exactly what the probe would: the latest visible version starting
 * at or before the instant, if it is still valid then.  The map lives in the
 * scan's memory context, so it goes away with the scan: at the end of the
 * query, when the snapshot changes, when the cache is rebuilt (another
 * command or transaction), and at (sub)transaction end.  It is only built
 * when the estimated size fits in work_mem * hash_mem_multiplier, and the
 * build is abandoned (the call site keeps probing) when the real size does
 * not.
 */

/* valid_from / valid_to as int64, ordered as the btree orders them */
static inline int64
time_value(AsofCache *c, Datum d)
{
	if (c->vftype == DATEOID)
		return (int64) DatumGetDateADT(d);
	return DatumGetInt64(d);
}

static uint32
hash_key(AsofCache *c, const Datum *values, bool column_side)
{
	uint32		h = 0;

	for (int i = 0; i < c->nkeys; i++)
	{
		AsofKey    *k = &c->keys[i];
		Datum		hd;

		hd = FunctionCall1Coll(column_side ? &k->hash_col : &k->hash_arg,
							   c->scankeys[i].sk_collation, values[i]);
		h = hash_combine(h, DatumGetUInt32(hd));
	}
	return h;
}

/* Is the walk's key the current group's key (btree comparison)? */
static bool
same_key(AsofCache *c, const Datum *stored, const Datum *values)
{
	for (int i = 0; i < c->nkeys; i++)
	{
		FmgrInfo   *cmp = index_getprocinfo(c->index, i + 1, BTORDER_PROC);

		if (DatumGetInt32(FunctionCall2Coll(cmp, c->index->rd_indcollation[i],
											stored[i], values[i])) != 0)
			return false;
	}
	return true;
}

/* The versions of the last key, ascending (the walk gave them descending). */
static void
finish_key(AsofCache *c, AsofMap *m)
{
	if (ScanDirectionIsForward(c->direction) && m->nkeys > 0)
	{
		uint32		lo = MAP_KEY(m, m->nkeys - 1)->first;
		uint32		hi = m->nversions;

		while (hi > lo + 1)
		{
			AsofVersion tmp = m->versions[lo];

			m->versions[lo++] = m->versions[--hi];
			m->versions[hi] = tmp;
		}
	}
}

/* Does the map's memory stay within the limit, with "more" bytes to come? */
static bool
map_fits(MemoryContext mapcxt, Size more, Size limit)
{
	return MemoryContextMemAllocated(mapcxt, true) + more <= limit;
}

/*
 * Add one index entry (in index order) to the map.  Returns false when the
 * map outgrows the memory limit.
 */
static bool
map_add(AsofCache *c, AsofMap *m, MemoryContext mapcxt, Size limit,
		const Datum *values, const bool *isnull,
		Datum vf, bool vfnull, Datum vt, bool vtnull, Datum sk, bool sknull)
{
	AsofVersion v;
	AsofMapKey *cur = m->nkeys > 0 ? MAP_KEY(m, m->nkeys - 1) : NULL;

	/* entries the probe's scan keys can never match */
	for (int i = 0; i < c->nkeys; i++)
		if (isnull[i])
			return true;
	if (vfnull)
		return true;

	v.vf = time_value(c, vf);
	if (vtnull)
		v.vt = ASOF_VT_OPEN;
	else if (c->vftype == DATEOID)
		v.vt = DATE_IS_NOEND(DatumGetDateADT(vt)) ? ASOF_VT_OPEN : (int64) DatumGetDateADT(vt);
	else
		v.vt = DatumGetInt64(vt);	/* TIMESTAMP_IS_NOEND is ASOF_VT_OPEN */
	v.sk = sknull ? 0 : scd2_asof_sk_value(c, sk);
	if (sknull)
		v.vt = ASOF_VT_NEVER;	/* found by the probe, but gives NULL */

	if (cur == NULL || !same_key(c, cur->values, values))
	{
		TupleDesc	idesc = RelationGetDescr(c->index);
		MemoryContext oldcxt;

		finish_key(c, m);
		if (m->nkeys == m->maxkeys)
		{
			if (m->maxkeys >= PG_UINT32_MAX / 2 ||
				!map_fits(mapcxt, m->keysize * m->maxkeys, limit))
				return false;
			m->maxkeys *= 2;
			m->keys = repalloc_huge(m->keys, m->keysize * m->maxkeys);
		}
		cur = MAP_KEY(m, m->nkeys);
		m->nkeys++;
		cur->first = m->nversions;
		oldcxt = MemoryContextSwitchTo(mapcxt);
		for (int i = 0; i < c->nkeys; i++)
		{
			Form_pg_attribute att = TupleDescAttr(idesc, i);

			cur->values[i] = datumCopy(values[i], att->attbyval, att->attlen);
		}
		MemoryContextSwitchTo(oldcxt);
		cur->hash = hash_key(c, cur->values, true);
		if ((m->nkeys & 4095) == 0 && !map_fits(mapcxt, 0, limit))
			return false;
	}
	else if (m->nversions > cur->first && m->versions[m->nversions - 1].vf == v.vf)
	{
		/*
		 * The same valid_from twice (the index is not unique): keep the one
		 * the probe would find first, the last in index order when it walks
		 * backwards, the first when it walks forwards.
		 */
		if (ScanDirectionIsBackward(c->direction))
			m->versions[m->nversions - 1] = v;
		return true;
	}

	if (m->nversions == m->maxversions)
	{
		if (m->maxversions >= PG_UINT32_MAX / 2 ||
			!map_fits(mapcxt, sizeof(AsofVersion) * m->maxversions, limit))
			return false;
		m->maxversions *= 2;
		m->versions = repalloc_huge(m->versions, sizeof(AsofVersion) * m->maxversions);
	}
	m->versions[m->nversions++] = v;
	return true;
}

/* An empty map sized for the dimension's estimated rows, in mapcxt. */
static AsofMap *
map_create(AsofCache *c, MemoryContext mapcxt, Size limit)
{
	AsofMap    *m = MemoryContextAllocZero(mapcxt, sizeof(AsofMap));

	m->keysize = MAXALIGN(offsetof(AsofMapKey, values) + sizeof(Datum) * c->nkeys);
	m->maxkeys = 1024;
	m->keys = MemoryContextAllocHuge(mapcxt, m->keysize * m->maxkeys);
	m->maxversions = (uint32) Min(c->est_rows * 1.05 + 1024,
								  Min((double) (PG_UINT32_MAX / 4), (double) limit / sizeof(AsofVersion)));
	m->versions = MemoryContextAllocHuge(mapcxt, sizeof(AsofVersion) * m->maxversions);
	return m;
}

/*
 * One ordered walk of the whole as-of index into the map.  Returns false
 * when the map outgrew the limit (the walk stops there).
 */
static bool
map_fill(AsofCache *c, AsofMap *m, MemoryContext mapcxt, Size limit)
{
	MemoryContext tmpcxt;
	MemoryContext oldcxt;
	IndexScanDesc scan;
	AsofEntry	e;
	bool		ok = true;
	uint64		nentries = 0;

	tmpcxt = AllocSetContextCreate(mapcxt, "scd2.asof map build", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(mapcxt);
	scan = scd2_index_beginscan(c->heap, c->index, c->snapshot, 0, 0);
	scan->xs_want_itup = c->index_only;
	scd2_prepare_btree_scan(scan);
	index_rescan(scan, NULL, 0, NULL, 0);

	/* the whole dimension is read: a serializable reader depends on all of it */
	PredicateLockRelation(c->heap, c->snapshot);

	MemoryContextSwitchTo(tmpcxt);
	while (scd2_asof_next_entry(c, scan, ForwardScanDirection, true, false, &e))
	{
		if (!map_add(c, m, mapcxt, limit, e.values, e.isnull, e.vf, e.vfnull,
					 e.vt, e.vtnull, e.sk, e.sknull))
		{
			ok = false;
			break;
		}
		if ((++nentries & 1023) == 0)
		{
			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(tmpcxt);
		}
	}
	if (!c->index_only)
		ExecClearTuple(c->slot);
	index_endscan(scan);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(tmpcxt);
	return ok;
}

/*
 * The map's last key closed, the arrays' slack given back, and the hash
 * table built (at most half full).  Returns false when the table would
 * not fit in the limit.
 */
static bool
map_index(AsofCache *c, AsofMap *m, MemoryContext mapcxt, Size limit)
{
	uint32		nbuckets;

	finish_key(c, m);
	m->keys = repalloc_huge(m->keys, m->keysize * Max(m->nkeys, 1));
	m->versions = repalloc_huge(m->versions, sizeof(AsofVersion) * Max(m->nversions, 1));
	nbuckets = 16;
	while (nbuckets < (uint64) m->nkeys * 2)
		nbuckets *= 2;
	if (!map_fits(mapcxt, sizeof(uint32) * nbuckets, limit))
		return false;
	m->mask = nbuckets - 1;
	m->buckets = MemoryContextAllocHuge(mapcxt, sizeof(uint32) * nbuckets);
	memset(m->buckets, 0, sizeof(uint32) * nbuckets);
	for (uint32 i = 0; i < m->nkeys; i++)
	{
		uint32		b = MAP_KEY(m, i)->hash & m->mask;

		while (m->buckets[b] != 0)
			b = (b + 1) & m->mask;
		m->buckets[b] = i + 1;
	}
	return true;
}

/*
 * Build the map from the open scan's relations and snapshot, with its
 * resource owner current.  Sets c->map_state to MAP_READY or MAP_FAILED.
 */
void
scd2_asof_build_map(AsofCache *c)
{
	Size		limit = get_hash_memory_limit();
	MemoryContext mapcxt;
	MemoryContext oldcxt;
	AsofMap    *m;
	bool		ok;
	instr_time	start;
	instr_time	duration;

	c->map_state = MAP_FAILED;	/* unless it completes */
	if (!c->bulk_ok)
		return;
	if (c->est_rows * sizeof(AsofVersion) > (double) limit)
	{
		elog(DEBUG1, "scd2.asof: dimension \"%s\" is too large for an in-memory map (about %.0f rows, limit %zu bytes)",
			 c->relname, c->est_rows, limit);
		return;
	}
	INSTR_TIME_SET_CURRENT(start);

	mapcxt = AllocSetContextCreate(c->opencxt, "scd2.asof map", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(mapcxt);
	m = map_create(c, mapcxt, limit);
	ok = map_fill(c, m, mapcxt, limit) && map_index(c, m, mapcxt, limit);
	MemoryContextSwitchTo(oldcxt);

	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	if (!ok)
	{
		elog(DEBUG1, "scd2.asof: in-memory map of dimension \"%s\" abandoned: more than %zu bytes",
			 c->relname, limit);
		MemoryContextDelete(mapcxt);
		return;
	}
	elog(DEBUG1, "scd2.asof: in-memory map of dimension \"%s\": %u keys, %u versions",
		 c->relname, m->nkeys, m->nversions);
	elog(DEBUG2, "scd2.asof: in-memory map of dimension \"%s\": %zu bytes, built in %.1f ms",
		 c->relname, MemoryContextMemAllocated(mapcxt, true), INSTR_TIME_GET_MILLISEC(duration));
	c->map = m;
	c->map_state = MAP_READY;
}

/* The bulk mode's answer for the scan keys' arguments and atv. */
bool
scd2_asof_map_lookup(AsofCache *c, Datum atv, int64 *sk)
{
	AsofMap    *m = c->map;
	Datum		values[INDEX_MAX_KEYS];
	AsofMapKey *k;
	uint32		h;
	uint32		b;
	uint32		lo,
				hi,
				first;
	int64		at;

	for (int i = 0; i < c->nkeys; i++)
		values[i] = c->scankeys[i].sk_argument;
	h = hash_key(c, values, false);
	for (b = h & m->mask;; b = (b + 1) & m->mask)
	{
		uint32		e = m->buckets[b];
		bool		match = true;

		if (e == 0)
			return false;
		k = MAP_KEY(m, e - 1);
		if (k->hash != h)
			continue;
		/* the index's equality operators, column value first, as the probe */
		for (int i = 0; i < c->nkeys && match; i++)
			match = DatumGetBool(FunctionCall2Coll(&c->scankeys[i].sk_func,
												   c->scankeys[i].sk_collation,
												   k->values[i], values[i]));
		if (match)
		{
			first = k->first;
			hi = e < m->nkeys ? MAP_KEY(m, e)->first : m->nversions;
			break;
		}
	}

	/* the last version with valid_from <= at */
	at = time_value(c, atv);
	lo = first;
	while (lo < hi)
	{
		uint32		mid = lo + (hi - lo) / 2;

		if (m->versions[mid].vf <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return false;
	if (m->versions[lo - 1].vt != ASOF_VT_OPEN && !(at < m->versions[lo - 1].vt))
		return false;
	*sk = m->versions[lo - 1].sk;
	return true;
}
