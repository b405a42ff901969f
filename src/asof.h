/*
 * asof.h -- what the files of scd2.asof share: the call site's cache and
 * the bulk map's types.  asof.c is the entry point and decodes the
 * arguments; asof_cache.c builds the cache (registry row, privileges,
 * index choice), asof_keys.c its scan keys; asof_scan.c keeps the index
 * scan open and reads its entries; asof_map.c builds and searches the
 * bulk map; asof_citus.c finds the shard (or the query through Citus) a
 * call reads on a Citus cluster.
 */
#ifndef SCD2_ASOF_H
#define SCD2_ASOF_H

#include "access/genam.h"
#include "access/skey.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "storage/buf.h"
#include "utils/relcache.h"
#include "utils/resowner.h"
#include "utils/snapshot.h"


/*
 * A smaller dimension switches earlier: after rows / ASOF_BULK_ROWS_PER_CALL
 * calls, at least ASOF_BULK_MIN_CALLS.  Building the map costs about 1/40 of
 * a probe per version (bench/asof/RESULTS.md: 0.11-0.13 us per version
 * against 5 us per probe, on a dimension larger than shared_buffers), so a
 * call site that switches then has spent on probes what the map costs.
 */
#define ASOF_BULK_ROWS_PER_CALL 40
#define ASOF_BULK_MIN_CALLS 1000

/* How one key argument becomes a scan key argument. */
typedef enum KeyConv
{
	KEY_AS_IS,					/* same type, binary coercible, or cross-type op */
	KEY_INPUT,					/* untyped literal: column type's input function */
	KEY_CAST					/* implicit cast function to the column type */
} KeyConv;

typedef struct AsofKey
{
	char	   *colname;		/* dimension column */
	AttrNumber	attnum;			/* its heap attribute number */
	Oid			coltype;		/* its type */
	int32		coltypmod;
	Oid			colcollation;
	Oid			argtype;		/* type of the argument given for it */
	KeyConv		conv;
	FmgrInfo	convfn;			/* KEY_INPUT / KEY_CAST */
	Oid			convioparam;	/* KEY_INPUT */
	int			convnargs;		/* KEY_CAST: 1, 2 or 3 */
	Oid			argoutfn;		/* output function of argtype, for messages */
} AsofKey;

/*
 * Bulk mode: the dimension's visible versions in memory, built by one ordered
 * walk of the as-of index (asof_map.c).  Sorted parallel arrays, no
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

typedef enum AsofMapState
{
	MAP_NONE,					/* probing; not tried yet for this snapshot */
	MAP_READY,					/* built: look up in memory */
	MAP_ABANDONED					/* too large, or not possible: keep probing */
} AsofMapState;

struct AsofCitus;

/*
 * Everything derived from the registry for one call site, valid for one
 * dimension within one transaction and command.
 */
typedef struct AsofCache
{
	MemoryContext cxt;			/* owns this struct and what hangs off it */
	MemoryContext callcxt;		/* reset at every call */

	/* validity of the cache */
	Oid			relid;
	LocalTransactionId lxid;
	CommandId	cid;

	char	   *relname;		/* as regclass prints it */
	Oid			indexid;

	int			nkeys;
	AsofKey    *keys;
	bool		variadic_array; /* keys given as VARIADIC ARRAY[...] */
	int16		elmlen;			/* element storage of that array */
	bool		elmbyval;
	char		elmalign;

	AttrNumber	vf_attnum;
	Oid			vftype;			/* valid_from / valid_to type */
	AttrNumber	vt_attnum;		/* heap attribute numbers */
	AttrNumber	sk_attnum;
	Oid			sktype;
	AttrNumber	vt_idxatt;		/* index attribute numbers, 0 if absent */
	AttrNumber	sk_idxatt;
	bool		index_only;		/* both returnable from the index */
	ScanDirection direction;	/* latest valid_from first */

	ScanKeyData scankeys[INDEX_MAX_KEYS];	/* only sk_argument changes */

	/* bulk mode */
	double		est_rows;		/* the dimension's estimated row count */
	int64		bulk_trigger;	/* calls before building the map; 0 = never */

	/*
	 * The open scan, kept across calls (see asof_open).  Its relcache
	 * references, buffer pins and tuple descriptor references belong to a
	 * resource owner of its own.
	 */
	bool		open;
	MemoryContext opencxt;		/* the scan's memory and the map's, while open */
	MemoryContextCallback opencb;
	ResourceOwner owner;
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	Snapshot	snapshot;		/* the scan's */
	SnapshotData snap;			/* a copy of it when the scan was opened */
	TupleTableSlot *slot;
	Buffer		vmbuffer;
	dlist_node	node;			/* in open_caches while open */
	MemoryContextCallback cb;	/* closes it when the cache goes away */

	/* calls under this snapshot, and the map built from it (in opencxt) */
	int64		ncalls;
	AsofMapState map_state;
	AsofMap    *map;

	/*
	 * A Citus table (asof_citus.c): where its rows are; NULL otherwise.
	 * Its shards' caches are AsofCaches of their own (on the shard's
	 * relation and index), with citus NULL.
	 */
	struct AsofCitus *citus;
} AsofCache;

/* Where a call on a Citus dimension reads (scd2_asof_citus_route). */
typedef enum AsofRoute
{
	ASOF_ROUTE_LOCAL,			/* a shard with a placement on this node */
	ASOF_ROUTE_QUERY,			/* a query through Citus on the dimension */
	ASOF_ROUTE_UNREACHABLE		/* neither: inside a task, no local placement */
} AsofRoute;

/* One index entry, as scd2_asof_next_entry reads it. */
typedef struct AsofEntry
{
	Datum		values[INDEX_MAX_KEYS]; /* business key (whole entries) */
	bool		isnull[INDEX_MAX_KEYS];
	Datum		vf,
				vt,
				sk;
	bool		vfnull,
				vtnull,
				sknull;
} AsofEntry;

/* asof.c */
extern void scd2_asof_wrong_key_count(AsofCache *c, int given);

/* asof_cache.c */
extern AsofCache *scd2_asof_build_cache(FunctionCallInfo fcinfo, AsofCache *old, Oid relid);
extern AsofCache *scd2_asof_build_shard_cache(AsofCache *parent, Oid shardrel);

/* asof_citus.c */
extern bool scd2_asof_citus_registration(Oid relid, const char *relname, MemoryContext cxt,
										 struct Scd2AsofRegistration *out);
extern void scd2_asof_citus_setup(AsofCache *c, Relation index);
extern AsofRoute scd2_asof_citus_route(AsofCache *c, AsofCache **target);
extern void scd2_asof_citus_forget(AsofCache *c, Snapshot snapshot);
extern bool scd2_asof_citus_query(AsofCache *c, Datum atv, int64 *sk);
extern void scd2_asof_citus_unreachable(AsofCache *c, const char *key);

/* asof_keys.c */
extern void scd2_asof_setup_key_args(AsofCache *c, FunctionCallInfo fcinfo, Relation index);
extern void scd2_asof_setup_valid_from_key(AsofCache *c, Relation index);

/* asof_scan.c */
extern bool scd2_asof_next_entry(AsofCache *c, IndexScanDesc scan, ScanDirection dir,
								 bool whole, bool lock_page, AsofEntry *e);
extern void scd2_asof_register_callbacks(void);
extern int64 scd2_asof_sk_value(AsofCache *c, Datum d);
extern void scd2_asof_keep_snapshot(AsofCache *c, Snapshot snapshot);
extern void scd2_asof_open(AsofCache *c, Snapshot snapshot);
extern void scd2_asof_close(AsofCache *c);
extern void scd2_asof_xact_callback(XactEvent event, void *arg);
extern void scd2_asof_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
									   SubTransactionId parentSubid, void *arg);
extern void scd2_prepare_btree_scan(IndexScanDesc scan);
extern void scd2_asof_cache_reset(void *arg);
extern bool scd2_asof_probe(AsofCache *c, Datum atv, int64 *sk);

/* asof_map.c */
extern void scd2_asof_build_map(AsofCache *c);
extern bool scd2_asof_map_lookup(AsofCache *c, Datum atv, int64 *sk);

#endif							/* SCD2_ASOF_H */
