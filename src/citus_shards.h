/*
 * citus_shards.h -- where a Citus table's shards are, read from Citus's
 * metadata (citus_shards.c), for scd2.asof.  (How a table is distributed,
 * for the load, is citus.h's.)
 */
#ifndef SCD2_CITUS_SHARDS_H
#define SCD2_CITUS_SHARDS_H

#include "postgres.h"
#include "access/attnum.h"

/* One shard of a Citus table. */
typedef struct Scd2CitusShard
{
	int64		shardid;
	bool		hashed;			/* has a hash range: minhash..maxhash */
	int32		minhash;
	int32		maxhash;
	Oid			localrel;		/* its relation here, InvalidOid: no active placement here */
} Scd2CitusShard;

/* A Citus table: how it is distributed, and its shards in hash order. */
typedef struct Scd2CitusShards
{
	char		method;			/* pg_dist_partition.partmethod: 'h' hash, 'n' none, ... */
	char		repmodel;		/* 't' reference table, 's' ... */
	AttrNumber	distattnum;		/* distribution column, InvalidAttrNumber if none */
	int			nshards;
	Scd2CitusShard *shards;
} Scd2CitusShards;

extern bool scd2_citus_read_shards(Oid relid, MemoryContext cxt, Scd2CitusShards *out);
extern bool scd2_citus_in_task(void);

#endif							/* SCD2_CITUS_SHARDS_H */
