/*
 * citus.h -- what a relation is to Citus, read from the catalog (detect.c).
 *
 * scd2 never links against Citus and reads nothing of it unless the
 * citus extension exists (the load calls no Citus function): where
 * the citus extension is not installed in the database every relation is
 * SCD2_CITUS_NONE.  Otherwise its row in pg_dist_partition (Citus's own
 * catalog table, in pg_catalog) says how it is spread over the nodes.
 */
#ifndef SCD2_CITUS_H
#define SCD2_CITUS_H

#include "postgres.h"

#include "access/attnum.h"

typedef enum Scd2CitusKind
{
	SCD2_CITUS_NONE,			/* no Citus, or a plain table of the node */
	SCD2_CITUS_DISTRIBUTED,		/* hash-distributed (partmethod 'h') */
	SCD2_CITUS_REFERENCE,		/* replicated to every node ('n', 't') */
	SCD2_CITUS_OTHER			/* append, range, single-shard, Citus local */
} Scd2CitusKind;

typedef struct Scd2CitusTable
{
	Scd2CitusKind kind;
	char		partmethod;		/* pg_dist_partition.partmethod, or 0 */
	char		repmodel;		/* pg_dist_partition.repmodel, or 0 */
	AttrNumber	distcol;		/* the distribution column (hash), or 0 */
	uint32		colocationid;	/* 0: none */
} Scd2CitusTable;

extern bool scd2_citus_installed(void);
extern Scd2CitusKind scd2_citus_table(Oid relid, Scd2CitusTable *out);
extern const char *scd2_citus_kind_name(const Scd2CitusTable *t);


/* shards.c: where a Citus table's shards are, for scd2.asof */
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

#endif							/* SCD2_CITUS_H */
