/*
 * steps.h -- what the load folder offers the others: the hooks a load
 * arms for its own statements, installed once by _PG_init (scd2.c).
 */
#ifndef SCD2_LOAD_LOAD_H
#define SCD2_LOAD_LOAD_H

/* memory.c: the ExecutorStart hook that shares hash_mem (scd2.load_memory) */
extern void scd2_memory_budget_init(void);

/* fast_path_plan.c: the fast path's planner hook */
extern void scd2_fast_path_plan_init(void);

/* progress.c: the executor hooks that count a load's rows */
extern void scd2_progress_init(void);

#endif							/* SCD2_LOAD_LOAD_H */
