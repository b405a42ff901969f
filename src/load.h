/*
 * load.h -- what the files of one load share (load.c drives the steps;
 * docs/ARCHITECTURE.md has the map).  Every statement a step generates
 * takes the resolved configuration and the work tables' names
 * (worktable.h).
 */
#ifndef SCD2_LOAD_H
#define SCD2_LOAD_H

#include "scd2.h"

#include "utils/tuplestore.h"

#include "worktable.h"

/* State of one load while it runs. */
typedef struct LoadState
{
	const Scd2Config *cfg;
	OwnerContext *oc;
	Snapshot	snap;
	bool		log_prepared;	/* the change log's work table exists
								 * (changelog.c) */
	Datum		effective_at;
	double		dim_rows;		/* planner's estimate of the dimension */
	int64		source_rows;	/* staging rows (after validation) */
	/* On Citus (load_citus.c); zero otherwise. */
	int			citus;			/* the dimension's Scd2CitusKind */
	int			stg_citus;		/* the staging table's */
	const char *dim_table_sql;	/* the dimension itself (cfg->dim_sql may
								 * name its image) */
	const char *stg_table_sql;	/* the staging table itself, when imaged */
	const char *stg_join_sql;	/* the staging table, when the workers join
								 * it to the dimension's shards */
} LoadState;

/* What classification counted, for the metrics (step 4). */
typedef struct Scd2ClassifyCounts
{
	int64		distinct;		/* distinct staged rows of complex keys */
	int64		kept;			/* kept staged rows */
	int64		y_applied;		/* rows whose last staged row carried a
								 * Type 1 overwrite */
	int64		complex_rows;	/* staging rows of complex keys */
} Scd2ClassifyCounts;

/* load.c */
extern void scd2_load_exec(LoadState *st, const char *sql, int expected, const char *what);
extern void scd2_load_exec_args(LoadState *st, const char *sql, int nargs, const Oid *types,
								const Datum *args, int expected, const char *what);
extern void scd2_load_exec_probing(LoadState *st, double driving_rows,
								   const char *sql, int expected, const char *what);
extern void scd2_load_exec_parallel(LoadState *st, const char *sql, const char *what);
extern void scd2_load_record_change_log(LoadState *st, const char *sql, bool probing);

/* load_memory.c: a load statement's nodes share hash_mem */
extern void scd2_memory_budget_init(void);
extern void scd2_memory_budget_arm(const char *sql);
extern void scd2_memory_budget_disarm(void);

/* load_explain.c: scd2.explain_statement shows a statement's plan */
extern void scd2_explain_init(void);
extern void scd2_explain_if_asked(const char *sql, const char *what, int nargs,
								  Oid *argtypes, Datum *values, Snapshot snap);
/* load_progress.c: a running load's phase, in pg_stat_activity */
typedef enum Scd2ProgressPhase
{
	SCD2_PROGRESS_VALIDATING,
	SCD2_PROGRESS_CLASSIFYING,
	SCD2_PROGRESS_CHANGE_LOG,
	SCD2_PROGRESS_WRITING,
	SCD2_PROGRESS_FIRST_LOAD,
	SCD2_PROGRESS_FEED,
	SCD2_PROGRESS_PHASES		/* how many */
} Scd2ProgressPhase;
extern void scd2_progress_begin(const Scd2Config *cfg, Oid dim_oid, Oid stg_oid);
extern void scd2_progress_phase(Scd2ProgressPhase phase, int64 rows_done, int64 rows_total,
								int64 changes_done, int64 changes_total);
extern void scd2_progress_end(void);

/* load_access.c */
extern void scd2_check_privileges(Oid stg_oid, Oid dim_oid, bool dry_run,
								  Oid roleid, bool as_owner);

/* load_validate.c */
extern char *scd2_sql_validate(const Scd2Config *cfg);
extern char *scd2_sql_bad_row(const Scd2Config *cfg);
extern char *scd2_sql_nonfinite_row(const Scd2Config *cfg);
extern int64 scd2_validate_staging(LoadState *st, bool *several);
extern void scd2_check_before_current_valid_to(LoadState *st);

/* load_convert.c */
extern Scd2ConvItem *scd2_conv_items(const Scd2Config *cfg, int *n);
extern char *scd2_sql_conv_check(const Scd2Config *cfg, const Scd2ConvItem *items, int n);
extern char *scd2_sql_conv_force(const Scd2Config *cfg, const Scd2ConvItem *item);
extern char *scd2_sql_conv_lossy_row(const Scd2Config *cfg, const Scd2ConvItem *item);
extern char *scd2_sql_conv_rows(const Scd2Config *cfg, const Scd2ConvItem *item);
extern char *scd2_sql_conv_one(const Scd2ConvItem *item);
extern void scd2_check_conversions(LoadState *st);

/* load_classify.c */
extern char *scd2_sql_multi_keys(const Scd2Config *cfg, const char *keys);
extern char *scd2_sql_fast_path(const Scd2Config *cfg, const char *chg, bool exclude_keys);
extern char *scd2_sql_move_complex(const Scd2Config *cfg, const char *chg, const char *keys);
extern char *scd2_sql_snapshot_missing(const Scd2Config *cfg, const char *chg,
									   const char *keys);

extern void scd2_classify(LoadState *st, bool several, Scd2ClassifyCounts *cc);

/* load_timeline.c */
extern char *scd2_sql_points(const Scd2Config *cfg, const char *pts, const char *keys);
extern char *scd2_sql_ambiguous(const Scd2Config *cfg, const char *pts);
extern char *scd2_sql_window(const Scd2Config *cfg, const char *pts, const char *win,
							   bool create);
extern char *scd2_sql_conflict(const Scd2Config *cfg, const char *win);
extern char *scd2_sql_general_changes(const Scd2Config *cfg, const char *chg, const char *win);
extern char *scd2_sql_general_counts(const Scd2Config *cfg, const char *win, const char *keys);
extern void scd2_classify_complex_keys(LoadState *st, int64 *distinct, int64 *kept,
									   int64 *y_applied, int64 *complex_rows);

/* load_arrival.c: an order-free dimension's step 4 (arrival.h) */
extern void scd2_arrival_classify(LoadState *st, Scd2ClassifyCounts *cc);
extern void scd2_arrival_finish(LoadState *st, bool dry_run);

/* load_citus.c */
extern bool scd2_citus_prepare(LoadState *st, Scd2Config *cfg);
extern void scd2_citus_fill_images(LoadState *st);
extern bool scd2_citus_write(LoadState *st, int64 total_changes, bool want_feed);

/* load_first.c */
extern bool scd2_first_load_applies(LoadState *st, bool dry_run, bool several);
extern void scd2_first_load(LoadState *st, Scd2Metrics *m, Tuplestorestate *store,
							TupleDesc desc);

/* load_write.c */
extern void scd2_append_update_set(StringInfo buf, const Scd2Config *cfg);
extern void scd2_append_insert_cols(StringInfo buf, const Scd2Config *cfg);
extern void scd2_append_insert_values(StringInfo buf, const Scd2Config *cfg);
extern char *scd2_key_json_sql(const Scd2Config *cfg, const char *alias);
extern char *scd2_sql_beyond_current(const Scd2Config *cfg);
extern bool scd2_write_dimension(LoadState *st, int64 total_changes,
								 Tuplestorestate *store, TupleDesc desc);
SCD2_NORETURN_PRE extern void scd2_report_unexpected_writes(const Scd2Config *cfg, int64 written,
													 int64 total_changes,
													 const char *parts) SCD2_NORETURN_POST;
extern int64 scd2_count_changes(LoadState *st, const Scd2ClassifyCounts *cc, Scd2Metrics *m);
extern void scd2_store_feed(Tuplestorestate *store, TupleDesc desc);
extern void scd2_read_feed(LoadState *st, bool dry_run, Tuplestorestate *store,
						   TupleDesc desc);

#endif							/* SCD2_LOAD_H */
