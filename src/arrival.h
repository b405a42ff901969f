/*
 * arrival.h -- order-free dimensions (register's order_free, issue 24):
 * the load's recompute path (load_arrival.c) and the memory of the events
 * a dimension's versions do not show (arrival_memory.c).
 * docs/SEMANTICS.md, "Arrival order", has the rules.
 */
#ifndef SCD2_ARRIVAL_H
#define SCD2_ARRIVAL_H

#include "scd2.h"

#include "datatype/timestamp.h"

/*
 * The memory's work tables, created and owned by the extension owner (as
 * the change log's LOG_TABLE is): the dimension's owner fills KEYS and
 * REMEMBER (INSERT granted), the extension owner fills RECALLED (SELECT
 * granted) and copies REMEMBER into scd2.arrival_memory.
 *   keys      business_key jsonb, since timestamptz: the staged keys and
 *             their earliest staged instant (encoded as the change log
 *             keeps validity values)
 *   recalled  business_key, effective, present, state: the remembered
 *             events of those keys from their earliest staged instant on
 *   remember  the same columns: what the load remembers instead
 */
#define ARR_KEYS_TABLE		"pg_temp.\"scd2 work: arrival keys\""
#define ARR_RECALLED_TABLE	"pg_temp.\"scd2 work: arrival recalled\""
#define ARR_REMEMBER_TABLE	"pg_temp.\"scd2 work: arrival remember\""
/*
 * The no-op observations remembered as versions (rows of surrogate keys):
 *   versions  sk, since: the staged keys' versions that may have been
 *             observed from their key's earliest staged instant on (the
 *             dimension's owner fills it)
 *   observed  sk, effective, tid: the live observations of those versions
 *             and the memory row of each (the extension owner)
 *   states    sk, effective, business_key, state: each observation's key
 *             and state, in the memory's form (the dimension's owner)
 */
#define ARR_VERSIONS_TABLE	"pg_temp.\"scd2 work: arrival versions\""
#define ARR_OBSERVED_TABLE	"pg_temp.\"scd2 work: arrival observed\""
#define ARR_STATES_TABLE	"pg_temp.\"scd2 work: arrival states\""

/* The most surrogate keys in one row of versions (arrival_memory.c). */
#define ARRIVAL_VERSIONS_PER_ROW	8192

/*
 * The no-op observations of a version an order-free load's fast path made
 * (classify_copies.c): the instant and the version's surrogate key of
 * each, in the load's memory context; arrival_memory.c stores them as
 * scd2.arrival_memory rows of surrogate keys.
 */
typedef struct ArrivalObserved
{
	MemoryContext cxt;
	int64		remembered;		/* the events to remember it wrote as change
								 * rows (remember copies) instead */
	int64		n;
	int64		cap;
	TimestampTz *at;
	int64	   *sk;
} ArrivalObserved;

/* arrival_memory.c (as the extension owner) */
extern void scd2_arrival_memory_prepare_store(void);
extern void scd2_arrival_memory_prepare_recall(void);
extern bool scd2_arrival_memory_ahead(Oid dim_oid, TimestampTz since);
extern bool scd2_arrival_memory_has_versions(Oid dim_oid, TimestampTz since);
extern void scd2_arrival_memory_recall(Oid dim_oid);
extern uint64 scd2_arrival_memory_recall_versions(Oid dim_oid);
extern void scd2_arrival_memory_recall_observed(void);
extern void scd2_arrival_memory_store(Oid dim_oid, int64 run_id, bool recalled);
extern void scd2_arrival_memory_store_observed(Oid dim_oid, int64 run_id,
											   const ArrivalObserved *obs);
extern void scd2_arrival_memory_drop(void);
extern void scd2_arrival_memory_undo(Oid dim_oid, int64 run_id);

#endif							/* SCD2_ARRIVAL_H */
