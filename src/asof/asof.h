/*
 * asof.h -- what the files of scd2.asof share: the call site's cache and
 * the bulk map's types.  lookup.c is the entry point and decodes the
 * arguments; cache.c builds the cache (registry row, privileges,
 * index choice), keys.c its scan keys; scan.c keeps the index
 * scan open and reads its entries; map.c builds and searches the
 * bulk map; citus_route.c finds the shard (or the query through Citus) a
 * call reads on a Citus cluster.
 */
#ifndef SCD2_ASOF_H
#define SCD2_ASOF_H

#include "access/genam.h"
#include "access/skey.h"
#include "access/xact.h"
#include "catalog/pg_type_d.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "storage/buf.h"
#include "utils/date.h"
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

typedef enum AsofMapState
{
	MAP_NONE,					/* probing; not tried yet for this snapshot */
	MAP_READY,					/* built: look up in memory */
	MAP_ABANDONED					/* too large, or not possible: keep probing */
} AsofMapState;

struct AsofCitus;
struct AsofMap;

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
	struct AsofMap *map;	/* map.c */

	/*
	 * A Citus table (citus_route.c): where its rows are; NULL otherwise.
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

/* A valid_from / valid_to value as an int64 that sorts as the btree sorts it. */
static inline int64
scd2_asof_time_value(const AsofCache *c, Datum d)
{
	if (c->vftype == DATEOID)
		return (int64) DatumGetDateADT(d);
	return DatumGetInt64(d);
}

/* cache.c */
extern AsofCache *scd2_asof_build_cache(FunctionCallInfo fcinfo, Oid relid);
extern AsofCache *scd2_asof_build_cache_for_types(MemoryContext parent, Oid relid, int nkeys,
												  const Oid *keytypes);
extern AsofCache *scd2_asof_build_shard_cache(AsofCache *parent, Oid shardrel);

/* citus_route.c */
extern void scd2_asof_citus_setup(AsofCache *c);
extern AsofRoute scd2_asof_citus_route(AsofCache *c, AsofCache **target);
extern void scd2_asof_citus_forget(AsofCache *c, Snapshot snapshot);
extern bool scd2_asof_citus_query(AsofCache *c, Datum atv, int64 *sk);
extern void scd2_asof_citus_unreachable(AsofCache *c, const char *key);

/* keys.c */
extern void scd2_asof_wrong_key_count(AsofCache *c, int given);
extern void scd2_asof_setup_key_args(AsofCache *c, FunctionCallInfo fcinfo, Relation index);
extern void scd2_asof_setup_key_types(AsofCache *c, Relation index, int nkeys, const Oid *keytypes);
extern void scd2_asof_setup_valid_from_key(AsofCache *c, Relation index);

/* scan.c */
extern bool scd2_asof_next_entry(AsofCache *c, IndexScanDesc scan, ScanDirection dir,
								 bool whole, bool lock_page, AsofEntry *e);
extern void scd2_asof_register_callbacks(void);
extern int64 scd2_asof_sk_value(AsofCache *c, Datum d);
extern void scd2_asof_keep_snapshot(AsofCache *c, Snapshot snapshot);
extern void scd2_asof_open(AsofCache *c, Snapshot snapshot);
extern void scd2_asof_close(AsofCache *c);
extern void scd2_prepare_btree_scan(IndexScanDesc scan);
extern void scd2_asof_cache_reset(void *arg);
extern bool scd2_asof_probe(AsofCache *c, Datum atv, int64 *sk);

/* map.c */
extern void scd2_asof_build_map(AsofCache *c);
extern bool scd2_asof_map_lookup(AsofCache *c, Datum atv, int64 *sk);
extern bool scd2_asof_map_has_key(AsofCache *c);

/* known.c: whether business keys have a version, asked from C */
extern AsofCache *scd2_asof_known_begin(Oid relid, int nkeys, const Oid *keytypes);
typedef enum AsofKnown
{
	ASOF_UNKNOWN,
	ASOF_KNOWN,
	ASOF_NO_ANSWER				/* the map is gone (known.c) */
} AsofKnown;

extern AsofKnown scd2_asof_known(AsofCache *c, const Datum *keys);
extern void scd2_asof_known_end(AsofCache *c);

#endif							/* SCD2_ASOF_H */
