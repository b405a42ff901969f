/*
 * runner.h -- the statement runner of one load (runner.c), at the
 * bottom of the load's files: every step (load_*.c) runs its statements
 * through it, and it calls no step and not the driver (driver.c).
 */
#ifndef SCD2_LOAD_EXEC_H
#define SCD2_LOAD_EXEC_H

#include "scd2.h"

#include "datatype/timestamp.h"
#include "utils/snapshot.h"
#include "utils/tuplestore.h"

#include "common/common.h"
#include "history/history.h"

/* State of one load while it runs. */
typedef struct LoadState
{
	const Scd2Config *cfg;
	OwnerContext *oc;
	Snapshot	snap;
	bool		log_prepared;	/* the change log's work table exists
								 * (history/changelog.c) */
	int64		run_id;			/* the run id the change log reserved, which
								 * the audit row and the memory take (0: none) */
	Oid			sk_seq;			/* the surrogate key's sequence when the load
								 * may log by surrogate keys: the fast path's
								 * insert copies draw their keys from it, the
								 * MERGE the others' (batch_log.c) */
	Datum		effective_at;
	double		dim_rows;		/* planner's estimate of the dimension */
	int64		source_rows;	/* staging rows (after validation) */
	TimestampTz earliest;		/* an order-free dimension's earliest staged
								 * instant, as its memory keeps instants
								 * (timestamptz) */
	bool		no_earliest;	/* no such instant (another dimension, or no
								 * staging rows) */
	bool		arrival_remembering;	/* it has events to remember: the
										 * memory's table of them exists */
	bool		arrival_recalled;	/* it recomputed keys: their remembered
									 * events were recalled, and it may
									 * move or remove versions
									 * (SCD2_LOAD_MOVES) */
	int64		completed;		/* inferred versions it completed in place
								 * (complete.c): it logs row by row */
	bool		feed_completed; /* they go to its change feed: CMP_TABLE
								 * exists (worktable.h; complete.c fills it,
								 * write.c reads it) */
	struct ArrivalObserved *observed;	/* its fast path's no-op observations
										 * of versions (classify_copies.c),
										 * or NULL */
	/* On Citus (citus_load.c); zero otherwise. */
	int			citus;			/* the dimension's Scd2CitusKind */
	int			stg_citus;		/* the staging table's */
	const char *dim_table_sql;	/* the dimension itself (cfg->dim_sql may
								 * name its image) */
	const char *stg_table_sql;	/* the staging table itself, when imaged */
	const char *stg_join_sql;	/* the staging table, when the workers join
								 * it to the dimension's shards */
} LoadState;

/*
 * Whether the load may move a version's valid_from ('extend') or remove a
 * version ('remove'): an order-free load that recomputed keys
 * (arrival.c).  Its writes set valid_from and delete; the others'
 * only end versions and insert.
 */
#define SCD2_LOAD_MOVES(st) ((st)->cfg->order_free && (st)->arrival_recalled)

/* runner.c */
extern void scd2_load_exec(LoadState *st, const char *sql, int expected, const char *what);
extern void scd2_load_exec_args(LoadState *st, const char *sql, int nargs, const Oid *types,
								const Datum *args, int expected, const char *what);
extern void scd2_load_exec_probing(LoadState *st, double driving_rows,
								   const char *sql, int expected, const char *what);
extern void scd2_load_exec_into(LoadState *st, const char *sql, struct _DestReceiver *dest,
								const char *what);
extern void scd2_load_exec_probing_into(LoadState *st, double driving_rows, const char *sql,
										struct _DestReceiver *dest, Oid sorted_staging,
										const char *what);
extern void scd2_load_exec_parallel(LoadState *st, const char *sql, const char *what);

/* Rows a step computed, as a named relation of the load's next statements. */
typedef struct LoadRelation
{
	const char *name;			/* as the statements name it (unqualified) */
	Tuplestorestate *store;		/* its rows */
	uint64		rows;
	bool		registered;
} LoadRelation;

extern void scd2_load_register_relation(LoadRelation *rel, TupleDesc desc);
extern void scd2_load_forget_relation(LoadRelation *rel);
extern void scd2_load_record_change_log(LoadState *st, const char *sql, bool probing);
extern void scd2_load_record_inserted_keys(LoadState *st, const char *chg);
extern void scd2_store_feed(Tuplestorestate *store, TupleDesc desc);

/* memory.c: a load statement's nodes share hash_mem */
extern void scd2_memory_budget_arm(const char *sql);
extern void scd2_memory_budget_disarm(void);

/* fast_path_plan.c: the fast path's staging rows sorted under its probes */
extern void scd2_fast_path_plan_arm(Oid relid);
extern void scd2_fast_path_plan_disarm(void);

/* explain.c: scd2.explain_statement shows a statement's plan */
extern void scd2_explain_if_asked(const char *sql, const char *what, int nargs,
								  Oid *argtypes, Datum *values, Snapshot snap);

#endif							/* SCD2_LOAD_EXEC_H */
