/*
 * known.c -- whether business keys have a version in a dimension, asked
 * from C for a whole batch (load/infer.c: scd2.infer_members finds the
 * facts whose key the dimension has no version of).
 *
 * The answer comes from scd2.asof's bulk map (map.c), built at once for the
 * dimension under the active snapshot: one random read of its key slots
 * per fact, where a call of scd2.asof also converts its arguments, binary
 * searches the key's versions and reads their valid_from, valid_to bit and
 * surrogate key (1M facts: the lookup is half of scd2.asof's time, the
 * rest its call).  When no map can be built -- larger than
 * scd2.asof_map_memory, a key that needs a conversion, a partitioned
 * dimension -- there is no
 * answer from here (scd2_asof_known_begin returns NULL) and the caller
 * asks the dimension itself.
 *
 * The cache is the caller's: it reads the dimension with the current
 * user's rights (the dimension's owner, in a load) and the active
 * snapshot, which must stay the same until scd2_asof_known_end.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "scd2.h"
#include "asof/asof.h"

/*
 * A cache that answers scd2_asof_known for dimension relid and keys of
 * types keytypes[nkeys] (the key columns' own types), its map built; NULL
 * when no map can be built.
 */
AsofCache *
scd2_asof_known_begin(Oid relid, int nkeys, const Oid *keytypes)
{
	AsofCache  *c;
	ResourceOwner saved = CurrentResourceOwner;

	/* scd2.asof reads no partitioned dimension (cache.c) */
	if (get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		return NULL;
	c = scd2_asof_build_cache_for_types(CurrentMemoryContext, relid, nkeys, keytypes);

	for (int i = 0; i < c->nkeys; i++)
	{
		if (c->keys[i].conv != KEY_AS_IS)
		{
			MemoryContextDelete(c->cxt);
			return NULL;
		}
	}
	scd2_asof_open(c, GetActiveSnapshot());
	CurrentResourceOwner = c->owner;
	PG_TRY();
	{
		scd2_asof_build_map(c);
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
	if (c->map_state != MAP_READY)
	{
		scd2_asof_known_end(c);
		return NULL;
	}
	return c;
}

/*
 * Whether the business key keys[] (none NULL) has a version: ASOF_KNOWN
 * or ASOF_UNKNOWN; ASOF_NO_ANSWER once the map is gone -- the abort of a
 * subtransaction closes every open scan and frees its map (scan.c), and
 * code of the dimension's owner that runs during the caller's query (a
 * domain's CHECK in PL/pgSQL with an EXCEPTION block) may abort one.  The
 * caller then asks the dimension itself, as when no map was built.
 */
AsofKnown
scd2_asof_known(AsofCache *c, const Datum *keys)
{
	if (!c->open || c->map_state != MAP_READY || c->map == NULL)
		return ASOF_NO_ANSWER;
	for (int i = 0; i < c->nkeys; i++)
		c->scankeys[i].sk_argument = keys[i];
	return scd2_asof_map_has_key(c) ? ASOF_KNOWN : ASOF_UNKNOWN;
}

/* The cache closed and freed. */
void
scd2_asof_known_end(AsofCache *c)
{
	scd2_asof_close(c);
	MemoryContextDelete(c->cxt);
}
