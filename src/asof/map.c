/*
 * map.c -- bulk mode of scd2.asof: a compact in-memory map of the
 * dimension's visible versions, built by one walk of the as-of index and
 * searched by binary search.
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "catalog/pg_opfamily_d.h"
#include "common/int.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "portability/instr_time.h"
#include "storage/predicate.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "scd2.h"
#include "asof/asof.h"

/*
 * Bulk mode: the dimension's visible versions in memory, built by one ordered
 * walk of the as-of index (map.c).  Sorted parallel arrays, no
 * per-version structs: the business keys in index order, and per key its
 * versions, contiguous and in ascending valid_from order, from first[key] to
 * first[key + 1] - 1.  A version is its valid_from and surrogate key (each
 * 32 bits wide while the values allow it, see AsofPacked) and one bit: set
 * when its valid_to is not simply "until the next version's start" (or open,
 * for the last), in which case valid_to is in the exception arrays.
 */
#define ASOF_VT_OPEN	PG_INT64_MAX
#define ASOF_VT_NEVER	PG_INT64_MIN	/* the surrogate key is NULL */

/* int64 values kept as 32-bit offsets from base while they all fit */
typedef struct AsofPacked
{
	int64		base;
	int32	   *v32;			/* NULL once widened */
	int64	   *v64;			/* NULL until then */
} AsofPacked;

static inline int64
asof_packed_get(const AsofPacked *p, uint32 i)
{
	return p->v32 != NULL ? p->base + p->v32[i] : p->v64[i];
}

typedef enum AsofMapKeys
{
	MAP_KEYS_DATUM,				/* Datum arrays, one per key column */
	MAP_KEYS_INT,				/* one integer column: an int64 array */
	MAP_KEYS_DENSE				/* one integer column without many gaps: no
								 * key array, first[] has a slot per value
								 * from kmin to kmax */
} AsofMapKeys;

typedef struct AsofMap
{
	Size		bytes;			/* allocated for the map, in its context */
	Size		limit;			/* scd2.asof_map_memory */

	AsofMapKeys form;
	uint32		nkeys;
	uint32		maxkeys;
	Datum	   *dkeys[INDEX_MAX_KEYS];	/* MAP_KEYS_DATUM, by column */
	FmgrInfo   *cmp_arg;		/* MAP_KEYS_DATUM: column value vs argument */
	int64	   *ikeys;			/* MAP_KEYS_INT */
	bool		desc;			/* MAP_KEYS_INT: descending key column */
	int			arglen;			/* MAP_KEYS_INT / DENSE: the argument's width */
	int64		kmin;			/* MAP_KEYS_INT / DENSE: smallest and */
	int64		kmax;			/* largest key */
	uint32	   *first;			/* nkeys + 1 (DENSE: kmax - kmin + 2) */
	int64		klast;			/* DENSE, building: the last key added */
	uint32		dense_next;		/* DENSE, building: the first slot not set */

	uint32		nversions;
	uint32		maxversions;
	AsofPacked	vf;				/* valid_from (a date widened to int64) */
	AsofPacked	sk;
	uint64	   *vt_bits;		/* bit set: valid_to in the exceptions */
	uint32		nexc;
	uint32		maxexc;
	uint32	   *exc_version;	/* ascending version numbers */
	int64	   *exc_vt;			/* their valid_to, or ASOF_VT_NEVER */

	char	   *arena;			/* by-reference key values, packed */
	Size		arena_used;
	Size		arena_size;
} AsofMap;

/*
 * Bulk mode.
 *
 * After many calls under one snapshot (see setup_bulk in cache.c), the
 * call site walks the whole as-of index once, in order, with the scan's
 * snapshot (index-only where the visibility map allows, as the probe), and
 * keeps every visible version in memory (AsofMap in asof.h): the business
 * keys in index order, and for each its versions in ascending valid_from
 * order, in parallel arrays.  The walk delivers them already sorted, so the
 * build is one pass with no sort and no allocation per row.  A call is then
 * a binary search of the keys (with the index's own comparison functions,
 * so it finds what the probe's equality would) and one of the key's
 * versions, giving exactly what the probe would: the latest visible version
 * starting at or before the instant, if it is still valid then.
 *
 * Compact as the data allows:
 *   - one integer key column (int2, int4, int8 in the integer operator
 *     family): the keys as int64, compared inline; and when they have few
 *     gaps (a table of kmax - kmin + 2 offsets takes no more memory than the
 *     keys and their offsets), no key array at all, the key's value minus
 *     kmin is its slot.  When the index's first and last keys (one probe
 *     at each end) already say so, the table is built from the start, so
 *     that the build never holds the keys as int64 too (at 10M keys 120 MB
 *     that would pass the limit for a 125 MB map); else it replaces them
 *     once the walk is complete.  Any other key: a Datum array per column, values
 *     passed by reference copied into one packed arena.
 *   - valid_from and the surrogate key: 32-bit offsets from the first value
 *     while every value fits (surrogate keys from a sequence, dates), else
 *     64 bits.
 *   - valid_to: one bit per version.  A version whose valid_to is open, or
 *     at or after the next version's valid_from, is valid at any instant
 *     that finds it (the binary search returns it only for instants before
 *     the next start), so nothing more is kept; any other valid_to (a gap,
 *     a closed last version, a NULL surrogate key) goes into a short
 *     exception table.
 * So a dimension with an int key, timestamptz validity and contiguous
 * versions takes 4 bytes per key and 12 bytes and a bit per version.
 *
 * The map lives in a memory context of its own under the scan's, so it goes
 * away with the scan: at the end of the query, when the snapshot changes,
 * when the cache is rebuilt (another command or transaction), and at
 * (sub)transaction end.  Its memory (everything allocated for it, counted
 * as it grows) is bounded by scd2.asof_map_memory; when it would exceed
 * that the build is abandoned and the call site keeps probing.
 */

/* No map is tried when the estimated rows would take more than the limit at this rate. */
#define MAP_MIN_VERSION_BYTES	8

/* The walk's state: the current key's versions, in walk order. */
typedef struct MapBuild
{
	int			n;
	int			max;
	int64	   *vf;
	int64	   *vt;
	int64	   *sk;
	bool	   *sknull;
	int16		keylen[INDEX_MAX_KEYS];	/* the index's key columns */
	bool		keybyval[INDEX_MAX_KEYS];
	char		keyalign[INDEX_MAX_KEYS];
} MapBuild;

/* An integer of 2, 4 or 8 bytes as int64. */
static inline int64
int_value(Datum d, int len)
{
	if (len == 8)
		return DatumGetInt64(d);
	if (len == 4)
		return DatumGetInt32(d);
	return DatumGetInt16(d);
}

static int
int_len(Oid type)
{
	switch (type)
	{
		case INT2OID:
			return 2;
		case INT4OID:
			return 4;
		case INT8OID:
			return 8;
	}
	return 0;
}

/*
 * The map's arrays are read at random, one key per call: with 4 kB pages
 * each lookup of a map of tens of megabytes also misses the TLB.  Ask for
 * transparent huge pages where the kernel leaves them to madvise (as
 * PostgreSQL's huge_pages does for shared memory); a hint, its failure is
 * harmless.
 */
#define MAP_HUGE_PAGE	((Size) 2 * 1024 * 1024)

static void
advise_huge(void *ptr, Size size)
{
#ifdef MADV_HUGEPAGE
	uintptr_t	start = TYPEALIGN(MAP_HUGE_PAGE, (uintptr_t) ptr);
	uintptr_t	end = TYPEALIGN_DOWN(MAP_HUGE_PAGE, (uintptr_t) ptr + size);

	if (end > start)
		(void) madvise((void *) start, end - start, MADV_HUGEPAGE);
#else
	(void) ptr;
	(void) size;
#endif
}

/*
 * Memory for the map, counted against its limit; NULL when it would go
 * over.  Growing an array counts the old and the new one, as both exist
 * while it is copied.
 */
static void *
map_alloc(AsofMap *m, MemoryContext mapcxt, Size size)
{
	void	   *ptr;

	if (m->bytes + size > m->limit)
		return NULL;
	m->bytes += size;
	ptr = MemoryContextAllocHuge(mapcxt, size);
	advise_huge(ptr, size);
	return ptr;
}

static bool
map_grow(AsofMap *m, void **ptr, Size oldsize, Size newsize)
{
	if (m->bytes + newsize > m->limit)
		return false;
	*ptr = repalloc_huge(*ptr, newsize);
	advise_huge(*ptr, newsize);
	m->bytes = m->bytes - oldsize + newsize;
	return true;
}

/* Give back an array's slack. */
static void
map_trim(AsofMap *m, void **ptr, Size oldsize, Size newsize)
{
	if (*ptr == NULL || newsize >= oldsize)
		return;
	*ptr = repalloc_huge(*ptr, Max(newsize, 1));
	m->bytes = m->bytes - oldsize + Max(newsize, 1);
}

/* Store value i of a packed array of capacity cap, widening it if needed. */
static inline bool
packed_put(AsofMap *m, MemoryContext mapcxt, AsofPacked *p, uint32 i, uint32 cap, int64 v)
{
	int64		d;

	if (p->v32 != NULL)
	{
		if (i == 0)
			p->base = v;
		if (!pg_sub_s64_overflow(v, p->base, &d) && d >= PG_INT32_MIN && d <= PG_INT32_MAX)
		{
			p->v32[i] = (int32) d;
			return true;
		}
		/* widen: every value so far as int64 */
		p->v64 = map_alloc(m, mapcxt, sizeof(int64) * cap);
		if (p->v64 == NULL)
			return false;
		for (uint32 j = 0; j < i; j++)
			p->v64[j] = p->base + p->v32[j];
		pfree(p->v32);
		m->bytes -= sizeof(int32) * cap;
		p->v32 = NULL;
	}
	p->v64[i] = v;
	return true;
}

static bool
packed_grow(AsofMap *m, AsofPacked *p, uint32 oldcap, uint32 newcap)
{
	if (p->v32 != NULL)
		return map_grow(m, (void **) &p->v32, sizeof(int32) * oldcap, sizeof(int32) * newcap);
	return map_grow(m, (void **) &p->v64, sizeof(int64) * oldcap, sizeof(int64) * newcap);
}

static void
packed_trim(AsofMap *m, AsofPacked *p, uint32 oldcap, uint32 n)
{
	if (p->v32 != NULL)
		map_trim(m, (void **) &p->v32, sizeof(int32) * oldcap, sizeof(int32) * n);
	else
		map_trim(m, (void **) &p->v64, sizeof(int64) * oldcap, sizeof(int64) * n);
}

/* Room for one more version. */
static inline bool
reserve_version(AsofMap *m)
{
	uint32		old = m->maxversions;
	uint32		new;

	if (m->nversions < old)
		return true;
	if (old >= PG_UINT32_MAX / 2)
		return false;
	new = old * 2;
	return packed_grow(m, &m->vf, old, new) &&
		packed_grow(m, &m->sk, old, new) &&
		map_grow(m, (void **) &m->vt_bits, sizeof(uint64) * ((old + 63) / 64),
				 sizeof(uint64) * ((new + 63) / 64)) &&
		((m->maxversions = new), true);
}

/* Record an exceptional valid_to for version v (the last one added). */
static bool
add_exception(AsofMap *m, MemoryContext mapcxt, uint32 v, int64 vt)
{
	if (m->nexc == m->maxexc)
	{
		uint32		new = m->maxexc == 0 ? 256 : m->maxexc * 2;

		if (m->maxexc >= PG_UINT32_MAX / 2)
			return false;
		if (m->maxexc == 0)
		{
			m->exc_version = map_alloc(m, mapcxt, sizeof(uint32) * new);
			m->exc_vt = map_alloc(m, mapcxt, sizeof(int64) * new);
			if (m->exc_version == NULL || m->exc_vt == NULL)
				return false;
		}
		else if (!map_grow(m, (void **) &m->exc_version, sizeof(uint32) * m->maxexc, sizeof(uint32) * new) ||
				 !map_grow(m, (void **) &m->exc_vt, sizeof(int64) * m->maxexc, sizeof(int64) * new))
			return false;
		m->maxexc = new;
	}
	m->vt_bits[v / 64] |= UINT64CONST(1) << (v % 64);
	m->exc_version[m->nexc] = v;
	m->exc_vt[m->nexc] = vt;
	m->nexc++;
	return true;
}

/*
 * The current key's versions (b, in walk order) into the map, in ascending
 * valid_from order.
 */
static bool
emit_key(AsofCache *c, AsofMap *m, MemoryContext mapcxt, MapBuild *b)
{
	int			n = b->n;
	int			w = 0;

	if (n == 0)
		return true;
	if (m->form != MAP_KEYS_DENSE)	/* (a dense slot is set when its key is added) */
		m->first[m->nkeys - 1] = m->nversions;

	/* a descending valid_from column gave them latest first */
	if (ScanDirectionIsForward(c->direction))
	{
		for (int lo = 0, hi = n - 1; lo < hi; lo++, hi--)
		{
			int64		t;
			bool		tb;

			t = b->vf[lo], b->vf[lo] = b->vf[hi], b->vf[hi] = t;
			t = b->vt[lo], b->vt[lo] = b->vt[hi], b->vt[hi] = t;
			t = b->sk[lo], b->sk[lo] = b->sk[hi], b->sk[hi] = t;
			tb = b->sknull[lo], b->sknull[lo] = b->sknull[hi], b->sknull[hi] = tb;
		}
	}

	/*
	 * The same valid_from twice (the index is not unique): keep the one the
	 * probe would find first, which is the last of them in ascending order
	 * (the last in index order when the probe walks backwards, the first
	 * when a descending index is walked forwards and reversed above).
	 */
	for (int r = 0; r < n; r++)
	{
		if (r + 1 < n && b->vf[r + 1] == b->vf[r])
			continue;
		b->vf[w] = b->vf[r];
		b->vt[w] = b->vt[r];
		b->sk[w] = b->sk[r];
		b->sknull[w] = b->sknull[r];
		w++;
	}

	for (int j = 0; j < w; j++)
	{
		uint32		v = m->nversions;
		int64		vt = b->vt[j];
		bool		exception;

		if (!reserve_version(m))
			return false;
		if (b->sknull[j])
		{
			exception = true;	/* found by the probe, but gives NULL */
			vt = ASOF_VT_NEVER;
		}
		else if (vt == ASOF_VT_OPEN)
			exception = false;
		else if (j + 1 < w)
			exception = vt < b->vf[j + 1];
		else
			exception = true;
		if (!packed_put(m, mapcxt, &m->vf, v, m->maxversions, b->vf[j]) ||
			!packed_put(m, mapcxt, &m->sk, v, m->maxversions, b->sknull[j] ? m->sk.base : b->sk[j]))
			return false;
		if (v % 64 == 0)
			m->vt_bits[v / 64] = 0;
		if (exception && !add_exception(m, mapcxt, v, vt))
			return false;
		m->nversions++;
	}
	b->n = 0;
	return true;
}

/* Column comparison in index order (btree order proc, DESC columns reversed). */
static inline int
compare_col(AsofCache *c, FmgrInfo *cmp, int i, Datum a, Datum b)
{
	int32		r = DatumGetInt32(FunctionCall2Coll(cmp, c->index->rd_indcollation[i], a, b));

	if (c->index->rd_indoption[i] & INDOPTION_DESC)
		INVERT_COMPARE_RESULT(r);
	return r;
}

/* Is the walk's entry (values) of the map's last key? */
static bool
same_key(AsofCache *c, AsofMap *m, const Datum *values, int ilen)
{
	if (m->nkeys == 0)
		return false;
	if (m->form == MAP_KEYS_DENSE)
		return int_value(values[0], ilen) == m->klast;
	if (m->form == MAP_KEYS_INT)
		return int_value(values[0], ilen) == m->ikeys[m->nkeys - 1];
	for (int i = 0; i < c->nkeys; i++)
		if (compare_col(c, index_getprocinfo(c->index, i + 1, BTORDER_PROC), i,
						m->dkeys[i][m->nkeys - 1], values[i]) != 0)
			return false;
	return true;
}

/* A copy of a by-reference key value in the arena. */
static bool
arena_copy(AsofMap *m, MemoryContext mapcxt, MapBuild *b, int i, Datum value, Datum *copy)
{
	Size		len;
	Size		start = m->arena_used;

	if (b->keylen[i] == -1)
	{
		len = VARSIZE_ANY(DatumGetPointer(value));
		if (!VARATT_IS_SHORT(DatumGetPointer(value)))
			start = att_align_nominal(start, b->keyalign[i]);
	}
	else
	{
		len = b->keylen[i] == -2 ? strlen(DatumGetCString(value)) + 1 : (Size) b->keylen[i];
		start = att_align_nominal(start, b->keyalign[i]);
	}
	if (m->arena == NULL || start + len > m->arena_size)
	{
		/* a new chunk; the rest of the old one is left unused */
		Size		size = Max(m->arena_size * 2, 8192);

		size = Min(size, 1024 * 1024);
		size = Max(size, MAXALIGN(len));
		m->arena = map_alloc(m, mapcxt, size);
		if (m->arena == NULL)
			return false;
		m->arena_size = size;
		start = 0;
	}
	memcpy(m->arena + start, DatumGetPointer(value), len);
	*copy = PointerGetDatum(m->arena + start);
	m->arena_used = start + len;
	return true;
}

/* Start a new key (the walk's entry's) in the map. */
static bool
add_key(AsofCache *c, AsofMap *m, MemoryContext mapcxt, MapBuild *b,
		const Datum *values, int ilen)
{
	if (m->form == MAP_KEYS_DENSE)
	{
		int64		k = int_value(values[0], ilen);
		uint32		slot;

		/* outside the bounds probed before the walk: give up */
		if (k < m->kmin || k > m->kmax)
			return false;
		/* its slot, and those of the absent keys before it, start here */
		slot = (uint32) ((uint64) k - (uint64) m->kmin);
		while (m->dense_next <= slot)
			m->first[m->dense_next++] = m->nversions;
		m->klast = k;
		m->nkeys++;
		return true;
	}
	if (m->nkeys + 1 >= m->maxkeys)
	{
		uint32		old = m->maxkeys;
		uint32		new = old * 2;

		if (old >= PG_UINT32_MAX / 2 ||
			!map_grow(m, (void **) &m->first, sizeof(uint32) * old, sizeof(uint32) * new))
			return false;
		if (m->form == MAP_KEYS_INT)
		{
			if (!map_grow(m, (void **) &m->ikeys, sizeof(int64) * old, sizeof(int64) * new))
				return false;
		}
		else
		{
			for (int i = 0; i < c->nkeys; i++)
				if (!map_grow(m, (void **) &m->dkeys[i], sizeof(Datum) * old, sizeof(Datum) * new))
					return false;
		}
		m->maxkeys = new;
	}
	if (m->form == MAP_KEYS_INT)
	{
		int64		k = int_value(values[0], ilen);

		m->ikeys[m->nkeys] = k;
		if (m->nkeys == 0 || k < m->kmin)
			m->kmin = k;
		if (m->nkeys == 0 || k > m->kmax)
			m->kmax = k;
	}
	else
	{
		for (int i = 0; i < c->nkeys; i++)
		{
			if (b->keybyval[i])
				m->dkeys[i][m->nkeys] = values[i];
			else if (!arena_copy(m, mapcxt, b, i, values[i], &m->dkeys[i][m->nkeys]))
				return false;
		}
	}
	m->nkeys++;
	return true;
}

/* Add one index entry (in index order) to the map; false when it outgrows the limit. */
static bool
map_add(AsofCache *c, AsofMap *m, MemoryContext mapcxt, MapBuild *b, AsofEntry *e, int ilen)
{
	/* entries the probe's scan keys can never match */
	for (int i = 0; i < c->nkeys; i++)
		if (e->isnull[i])
			return true;
	if (e->vfnull)
		return true;

	if (!same_key(c, m, e->values, ilen))
	{
		if (!emit_key(c, m, mapcxt, b) || !add_key(c, m, mapcxt, b, e->values, ilen))
			return false;
	}
	if (b->n == b->max)
	{
		/* one key's versions, before they go into the map: counted too */
		Size		more = (Size) b->max * (3 * sizeof(int64) + sizeof(bool));

		if (b->max >= PG_INT32_MAX / 2 || m->bytes + more > m->limit)
			return false;
		m->bytes += more;
		b->max *= 2;
		b->vf = repalloc_huge(b->vf, sizeof(int64) * b->max);
		b->vt = repalloc_huge(b->vt, sizeof(int64) * b->max);
		b->sk = repalloc_huge(b->sk, sizeof(int64) * b->max);
		b->sknull = repalloc_huge(b->sknull, sizeof(bool) * b->max);
	}
	b->vf[b->n] = scd2_asof_time_value(c, e->vf);
	if (e->vtnull)
		b->vt[b->n] = ASOF_VT_OPEN;
	else if (c->vftype == DATEOID)
		b->vt[b->n] = DATE_IS_NOEND(DatumGetDateADT(e->vt)) ? ASOF_VT_OPEN : (int64) DatumGetDateADT(e->vt);
	else
		b->vt[b->n] = DatumGetInt64(e->vt);	/* TIMESTAMP_IS_NOEND is ASOF_VT_OPEN */
	b->sknull[b->n] = e->sknull;
	b->sk[b->n] = e->sknull ? 0 : scd2_asof_sk_value(c, e->sk);
	b->n++;
	return true;
}

/*
 * The smallest and largest integer key of the as-of index visible to the
 * scan's snapshot: its first entry from each end; false when there is none
 * or an end holds a NULL key.
 */
static bool
index_int_bounds(AsofCache *c, int ilen, int64 *lo, int64 *hi)
{
	bool		found = true;

	for (int end = 0; end < 2 && found; end++)
	{
		IndexScanDesc scan = scd2_index_beginscan(c->heap, c->index, c->snapshot, 0, 0);
		AsofEntry	e;

		scan->xs_want_itup = c->index_only;
		scd2_prepare_btree_scan(scan);
		index_rescan(scan, NULL, 0, NULL, 0);
		found = scd2_asof_next_entry(c, scan, end == 0 ? ForwardScanDirection : BackwardScanDirection,
									 true, false, &e) && !e.isnull[0];
		if (found)
			*(end == 0 ? lo : hi) = int_value(e.values[0], ilen);
		if (!c->index_only)
			ExecClearTuple(c->slot);
		index_endscan(scan);
	}
	return found;
}

/*
 * Whether the map of an ascending integer key is built as a table of slots
 * from the start (see "Compact as the data allows"): the index's ends give
 * kmin and kmax, and the slots take no more memory than sorted keys and
 * offsets would for the estimated rows (at least as many as keys).  Sets
 * the form, the bounds and maxkeys (the slots).
 */
static bool
dense_from_start(AsofCache *c, AsofMap *m, double est, int ilen)
{
	int64		lo,
				hi;
	uint64		range;

	if (!index_int_bounds(c, ilen, &lo, &hi) || hi < lo)
		return false;
	range = (uint64) hi - (uint64) lo;
	if (range >= PG_UINT32_MAX - 2 ||
		sizeof(uint32) * (double) (range + 2) > (sizeof(int64) + sizeof(uint32)) * Max(est, 1.0))
		return false;
	m->form = MAP_KEYS_DENSE;
	m->kmin = lo;
	m->kmax = hi;
	m->maxkeys = (uint32) (range + 2);
	m->dense_next = 0;
	return true;
}

/*
 * An empty map in mapcxt, its arrays sized for the dimension's estimated
 * rows (within the limit).  NULL when even that does not fit.
 */
static AsofMap *
map_create(AsofCache *c, MemoryContext mapcxt, Size limit, int *ilen)
{
	AsofMap    *m = MemoryContextAllocZero(mapcxt, sizeof(AsofMap));
	Relation	index = c->index;
	Oid			subtype = c->scankeys[0].sk_subtype;
	double		est = Max(c->est_rows, 0);
	bool		ok = true;

	m->limit = limit;
	m->bytes = sizeof(AsofMap);

	/* one integer column in the integer operator family: int64 keys */
	*ilen = 0;
	if (c->nkeys == 1 && index->rd_opfamily[0] == INTEGER_BTREE_FAM_OID &&
		int_len(OidIsValid(subtype) ? subtype : index->rd_opcintype[0]) != 0 &&
		TupleDescAttr(RelationGetDescr(index), 0)->attbyval)
	{
		int16		len = TupleDescAttr(RelationGetDescr(index), 0)->attlen;

		if (len == 2 || len == 4 || len == 8)
		{
			*ilen = len;
			m->arglen = int_len(OidIsValid(subtype) ? subtype : index->rd_opcintype[0]);
			m->form = MAP_KEYS_INT;
			m->desc = (index->rd_indoption[0] & INDOPTION_DESC) != 0;
		}
	}
	if (m->form == MAP_KEYS_DATUM)
	{
		/* the argument's comparison with a column value, cross-type if the scan key is */
		m->cmp_arg = MemoryContextAllocZero(mapcxt, sizeof(FmgrInfo) * c->nkeys);
		for (int i = 0; i < c->nkeys; i++)
		{
			Oid			opcintype = index->rd_opcintype[i];
			Oid			st = c->scankeys[i].sk_subtype;
			Oid			proc;

			if (!OidIsValid(st) || st == opcintype)
				proc = index_getprocid(index, i + 1, BTORDER_PROC);
			else
				proc = get_opfamily_proc(index->rd_opfamily[i], opcintype, st, BTORDER_PROC);
			if (!OidIsValid(proc))
				elog(ERROR, "missing support function %d(%u,%u) in operator family %u",
					 BTORDER_PROC, opcintype, st, index->rd_opfamily[i]);
			fmgr_info_cxt(proc, &m->cmp_arg[i], mapcxt);
		}
	}

	if (m->form == MAP_KEYS_INT && !m->desc && dense_from_start(c, m, est, *ilen))
		ok = (m->first = map_alloc(m, mapcxt, sizeof(uint32) * m->maxkeys)) != NULL;
	else
	{
		m->maxkeys = (uint32) Min(Max(est / 2, 1024), (double) (limit / 64) + 1024);
		ok = (m->first = map_alloc(m, mapcxt, sizeof(uint32) * m->maxkeys)) != NULL;
		if (ok && m->form == MAP_KEYS_INT)
			ok = (m->ikeys = map_alloc(m, mapcxt, sizeof(int64) * m->maxkeys)) != NULL;
		for (int i = 0; ok && m->form == MAP_KEYS_DATUM && i < c->nkeys; i++)
			ok = (m->dkeys[i] = map_alloc(m, mapcxt, sizeof(Datum) * m->maxkeys)) != NULL;
	}

	/*
	 * Room for the estimated versions at once, if the limit has it: growing
	 * an array later needs the old and the new one at the same time.
	 */
	m->maxversions = (uint32) Min(est * 1.05 + 1024,
								  Max((double) (m->limit - Min(m->bytes, m->limit)) / (2 * sizeof(int32) + 0.125),
									  1024.0));
	if (ok)
		ok = (m->vf.v32 = map_alloc(m, mapcxt, sizeof(int32) * m->maxversions)) != NULL &&
			(m->sk.v32 = map_alloc(m, mapcxt, sizeof(int32) * m->maxversions)) != NULL &&
			(m->vt_bits = map_alloc(m, mapcxt, sizeof(uint64) * ((m->maxversions + 63) / 64))) != NULL;
	return ok ? m : NULL;
}

/*
 * One ordered walk of the whole as-of index into the map.  Returns false
 * when the map outgrew the limit (the walk stops there).
 */
static bool
map_fill(AsofCache *c, AsofMap *m, MemoryContext mapcxt, int ilen)
{
	MemoryContext tmpcxt;
	MemoryContext oldcxt;
	IndexScanDesc scan;
	AsofEntry	e;
	MapBuild	b;
	TupleDesc	idesc = RelationGetDescr(c->index);
	bool		ok = true;
	uint64		nentries = 0;

	b.n = 0;
	b.max = 64;
	b.vf = MemoryContextAlloc(mapcxt, sizeof(int64) * b.max);
	b.vt = MemoryContextAlloc(mapcxt, sizeof(int64) * b.max);
	b.sk = MemoryContextAlloc(mapcxt, sizeof(int64) * b.max);
	b.sknull = MemoryContextAlloc(mapcxt, sizeof(bool) * b.max);
	for (int i = 0; i < c->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(idesc, i);

		b.keylen[i] = att->attlen;
		b.keybyval[i] = att->attbyval;
		b.keyalign[i] = att->attalign;
	}

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
		if (!map_add(c, m, mapcxt, &b, &e, ilen))
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
	if (ok)
		ok = emit_key(c, m, mapcxt, &b);
	m->bytes -= (Size) (b.max - 64) * (3 * sizeof(int64) + sizeof(bool));
	pfree(b.vf);
	pfree(b.vt);
	pfree(b.sk);
	pfree(b.sknull);
	return ok;
}

/*
 * The map completed: the key offsets closed, the arrays' slack given back,
 * and integer keys without many gaps turned into a table of slots.
 */
static void
map_finish(AsofCache *c, AsofMap *m, MemoryContext mapcxt)
{
	uint32		maxv = m->maxversions;

	if (m->form == MAP_KEYS_DENSE)
	{
		/* the slots after the last key, and the end */
		uint32		nslots = (uint32) ((uint64) m->kmax - (uint64) m->kmin) + 2;

		while (m->dense_next < nslots)
			m->first[m->dense_next++] = m->nversions;
	}
	else
	{
		m->first[m->nkeys] = m->nversions;
		map_trim(m, (void **) &m->first, sizeof(uint32) * m->maxkeys, sizeof(uint32) * (m->nkeys + 1));
		if (m->form == MAP_KEYS_INT)
			map_trim(m, (void **) &m->ikeys, sizeof(int64) * m->maxkeys, sizeof(int64) * m->nkeys);
		else
			for (int i = 0; i < c->nkeys; i++)
				map_trim(m, (void **) &m->dkeys[i], sizeof(Datum) * m->maxkeys, sizeof(Datum) * m->nkeys);
		m->maxkeys = m->nkeys + 1;
	}
	packed_trim(m, &m->vf, maxv, m->nversions);
	packed_trim(m, &m->sk, maxv, m->nversions);
	map_trim(m, (void **) &m->vt_bits, sizeof(uint64) * ((maxv + 63) / 64),
			 sizeof(uint64) * ((m->nversions + 63) / 64));
	m->maxversions = m->nversions;
	if (m->nexc > 0)
	{
		map_trim(m, (void **) &m->exc_version, sizeof(uint32) * m->maxexc, sizeof(uint32) * m->nexc);
		map_trim(m, (void **) &m->exc_vt, sizeof(int64) * m->maxexc, sizeof(int64) * m->nexc);
		m->maxexc = m->nexc;
	}

	/* dense integer keys: slots instead of keys, if no larger */
	if (m->form == MAP_KEYS_INT && !m->desc && m->nkeys > 0)
	{
		uint64		range = (uint64) m->kmax - (uint64) m->kmin;
		uint32	   *slots;

		if (range < PG_UINT32_MAX - 2 &&
			sizeof(uint32) * (range + 2) <= (sizeof(int64) + sizeof(uint32)) * (uint64) m->nkeys &&
			(slots = map_alloc(m, mapcxt, sizeof(uint32) * (range + 2))) != NULL)
		{
			uint32		s = 0;

			for (uint32 i = 0; i < m->nkeys; i++)
			{
				uint32		ks = (uint32) ((uint64) m->ikeys[i] - (uint64) m->kmin);

				while (s <= ks)
					slots[s++] = m->first[i];
			}
			slots[s] = m->nversions;
			pfree(m->ikeys);
			pfree(m->first);
			m->bytes -= (sizeof(int64) + sizeof(uint32)) * m->nkeys + sizeof(uint32);
			m->ikeys = NULL;
			m->first = slots;
			m->form = MAP_KEYS_DENSE;
		}
	}
}

static const char *
form_name(AsofMapKeys form)
{
	switch (form)
	{
		case MAP_KEYS_INT:
			return "sorted integer keys";
		case MAP_KEYS_DENSE:
			return "dense integer keys";
		case MAP_KEYS_DATUM:
			break;
	}
	return "sorted keys";
}

/*
 * Build the map from the open scan's relations and snapshot, with its
 * resource owner current.  Sets c->map_state to MAP_READY or MAP_ABANDONED.
 */
void
scd2_asof_build_map(AsofCache *c)
{
	Size		limit = (Size) scd2_asof_map_memory * 1024;
	MemoryContext mapcxt;
	MemoryContext oldcxt;
	AsofMap    *m;
	bool		ok;
	int			ilen;
	instr_time	start;
	instr_time	duration;

	c->map_state = MAP_ABANDONED;	/* unless it completes */
	if (c->est_rows * MAP_MIN_VERSION_BYTES > (double) limit)
	{
		elog(DEBUG1, "scd2.asof: dimension \"%s\" is too large for an in-memory map (about %.0f rows, limit %zu bytes)",
			 c->relname, c->est_rows, limit);
		return;
	}
	INSTR_TIME_SET_CURRENT(start);

	mapcxt = AllocSetContextCreate(c->opencxt, "scd2.asof map", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(mapcxt);
	m = map_create(c, mapcxt, limit, &ilen);
	ok = m != NULL && map_fill(c, m, mapcxt, ilen);
	if (ok)
		map_finish(c, m, mapcxt);
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
	elog(DEBUG1, "scd2.asof: in-memory map of dimension \"%s\": %u keys, %u versions (%s, %u with their own valid_to)",
		 c->relname, m->nkeys, m->nversions, form_name(m->form), m->nexc);
	elog(DEBUG2, "scd2.asof: in-memory map of dimension \"%s\": %zu bytes (%.1f per version), built in %.1f ms",
		 c->relname, m->bytes, m->nversions > 0 ? (double) m->bytes / m->nversions : 0.0,
		 INSTR_TIME_GET_MILLISEC(duration));
	c->map = m;
	c->map_state = MAP_READY;
}

/* The versions of the scan keys' business key: [*lo, *hi); false if none. */
static bool
find_key(AsofCache *c, AsofMap *m, uint32 *lo, uint32 *hi)
{
	uint32		l = 0,
				h = m->nkeys;

	if (m->form != MAP_KEYS_DATUM)
	{
		int64		x = int_value(c->scankeys[0].sk_argument, m->arglen);

		if (m->nkeys == 0 || x < m->kmin || x > m->kmax)
			return false;
		if (m->form == MAP_KEYS_DENSE)
		{
			uint32		s = (uint32) ((uint64) x - (uint64) m->kmin);

			*lo = m->first[s];
			*hi = m->first[s + 1];
			return *lo < *hi;
		}
		while (l < h)
		{
			uint32		mid = l + (h - l) / 2;
			int64		k = m->ikeys[mid];

			if (k == x)
			{
				*lo = m->first[mid];
				*hi = m->first[mid + 1];
				return true;
			}
			if ((k < x) != m->desc)
				l = mid + 1;
			else
				h = mid;
		}
		return false;
	}

	while (l < h)
	{
		uint32		mid = l + (h - l) / 2;
		int			r = 0;

		for (int i = 0; i < c->nkeys && r == 0; i++)
			r = compare_col(c, &m->cmp_arg[i], i, m->dkeys[i][mid], c->scankeys[i].sk_argument);
		if (r == 0)
		{
			*lo = m->first[mid];
			*hi = m->first[mid + 1];
			return true;
		}
		if (r < 0)
			l = mid + 1;
		else
			h = mid;
	}
	return false;
}

/* Whether the scan keys' business key has a version in the map. */
bool
scd2_asof_map_has_key(AsofCache *c)
{
	uint32		lo,
				hi;

	return find_key(c, c->map, &lo, &hi);
}

/* The bulk mode's answer for the scan keys' arguments and atv. */
bool
scd2_asof_map_lookup(AsofCache *c, Datum atv, int64 *sk)
{
	AsofMap    *m = c->map;
	uint32		first,
				lo,
				hi,
				v;
	int64		at;

	if (!find_key(c, m, &first, &hi))
		return false;

	/*
	 * The key's surrogate keys and valid_to bits are read after its
	 * valid_from values: ask for their cache lines now, so that the misses
	 * (random keys rarely hit the cache) overlap instead of following each
	 * other.
	 */
#if defined(__GNUC__) || defined(__clang__)
	if (m->sk.v32 != NULL)
		__builtin_prefetch(&m->sk.v32[first]);
	else
		__builtin_prefetch(&m->sk.v64[first]);
	__builtin_prefetch(&m->vt_bits[first / 64]);
#endif

	/* the last version with valid_from <= at */
	at = scd2_asof_time_value(c, atv);
	lo = first;
	while (lo < hi)
	{
		uint32		mid = lo + (hi - lo) / 2;

		if (asof_packed_get(&m->vf, mid) <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return false;
	v = lo - 1;
	if (m->vt_bits[v / 64] & (UINT64CONST(1) << (v % 64)))
	{
		uint32		l = 0,
					h = m->nexc;
		int64		vt;

		while (h - l > 1)
		{
			uint32		mid = l + (h - l) / 2;

			if (m->exc_version[mid] <= v)
				l = mid;
			else
				h = mid;
		}
		Assert(m->exc_version[l] == v);
		vt = m->exc_vt[l];
		if (vt == ASOF_VT_NEVER || !(at < vt))
			return false;
	}
	*sk = asof_packed_get(&m->sk, v);
	return true;
}
