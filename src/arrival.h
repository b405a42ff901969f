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

/* arrival_memory.c (as the extension owner) */
extern void scd2_arrival_memory_prepare(void);
extern bool scd2_arrival_memory_ahead(Oid dim_oid, TimestampTz since);
extern void scd2_arrival_memory_recall(Oid dim_oid);
extern void scd2_arrival_memory_store(Oid dim_oid, int64 run_id);
extern void scd2_arrival_memory_drop(void);
extern void scd2_arrival_memory_undo(Oid dim_oid, int64 run_id);

#endif							/* SCD2_ARRIVAL_H */
