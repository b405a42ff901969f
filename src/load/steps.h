/*
 * steps.h -- what the files of one load share (driver.c drives the steps;
 * docs/ARCHITECTURE.md has the map).  Every statement a step generates
 * takes the resolved configuration and the work tables' names
 * (worktable.h).
 */
#ifndef SCD2_LOAD_H
#define SCD2_LOAD_H

#include "scd2.h"

#include "utils/tuplestore.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "load/runner.h"

/* What classification counted, for the metrics (step 4). */
typedef struct Scd2ClassifyCounts
{
	int64		distinct;		/* distinct staged rows of complex keys */
	int64		kept;			/* kept staged rows */
	int64		y_applied;		/* rows whose last staged row carried a
								 * Type 1 overwrite */
	int64		complex_rows;	/* staging rows of complex keys */
} Scd2ClassifyCounts;

/* progress.c: a running load's phase and counts, in pg_stat_activity */
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
extern void scd2_progress_begin(Oid dim_oid, Oid stg_oid);
extern void scd2_progress_phase(Scd2ProgressPhase phase, int64 rows_done, int64 rows_total,
								int64 changes_done, int64 changes_total);
extern void scd2_progress_count_statement(const char *sql, bool changes);
extern void scd2_progress_count_done(void);
extern void scd2_progress_end(void);

/* catalog/access.c */

/* validate.c */
extern int64 scd2_validate_staging(LoadState *st, bool *several);
extern void scd2_refuse_bad_staging(LoadState *st, int64 null_keys, int64 null_eff, int64 non_finite);
extern void scd2_validate_sequence(LoadState *st);
extern void scd2_check_before_current_valid_to(LoadState *st);

/* convert.c */
extern void scd2_check_conversions(LoadState *st);

/* classify.c */
extern void scd2_classify(LoadState *st, bool several, Scd2ClassifyCounts *cc);

/* complete.c */
extern int64 scd2_complete_inferred(LoadState *st, bool dry_run);
extern int64 scd2_classify_simple_keys(LoadState *st, bool several, struct ArrivalObserved *obs);

/* classify_copies.c (as the dimension's owner, in the fast path's statement) */
extern struct _DestReceiver *scd2_classify_copier(const Scd2Config *cfg, const char *relname, Oid sk_seq,
												  struct ArrivalObserved *obs, int64 *complex_rows);

/* timeline.c */
extern void scd2_classify_complex_keys(LoadState *st, int64 *distinct, int64 *kept,
									   int64 *y_applied, int64 *complex_rows);

/* schema.c: register's on_schema_change */
extern List *scd2_schema_evolve(const Scd2LoadRequest *req, const Scd2Registration *reg,
								 const char *dim_name, OwnerContext *oc, char **note);
extern void scd2_schema_apply_fills(Scd2Config *cfg, List *added);
extern void scd2_schema_count_fills(LoadState *st, Scd2Metrics *m);
/* arrival.c: an order-free dimension's step 4 (history/history.h) */
extern void scd2_arrival_classify(LoadState *st, bool several, Scd2ClassifyCounts *cc);
extern void scd2_arrival_draw_keys(LoadState *st);
extern void scd2_arrival_finish(LoadState *st, bool dry_run);
extern void scd2_arrival_first_load(LoadState *st);

/* citus_load.c */
extern bool scd2_citus_prepare(LoadState *st, Scd2Config *cfg);
extern void scd2_citus_fill_images(LoadState *st);
extern bool scd2_citus_write(LoadState *st, int64 total_changes, bool want_feed);

/* first_load.c */
extern bool scd2_first_load_applies(LoadState *st, bool dry_run);
extern bool scd2_first_load_index_finds_repeats(LoadState *st);
extern void scd2_first_load(LoadState *st, Scd2Metrics *m, Tuplestorestate *store,
							TupleDesc desc);

/* write.c */
/* batch_log.c */
extern Oid	scd2_batch_sequence(const LoadState *st, bool dry_run);
extern bool scd2_load_record_batch_log(LoadState *st);
extern void scd2_batch_pin_moved(LoadState *st);

extern bool scd2_write_dimension(LoadState *st, int64 total_changes,
								 Tuplestorestate *store, TupleDesc desc);
SCD2_NORETURN_PRE extern void scd2_report_unexpected_writes(const Scd2Config *cfg, int64 written,
													 int64 total_changes,
													 const char *parts) SCD2_NORETURN_POST;
extern int64 scd2_count_changes(LoadState *st, const Scd2ClassifyCounts *cc, Scd2Metrics *m);
extern void scd2_read_feed(LoadState *st, bool dry_run, Tuplestorestate *store,
						   TupleDesc desc);


/* driver.c */
extern void scd2_request_from_args(FunctionCallInfo fcinfo, Scd2LoadRequest *req);
extern void scd2_run_load(const Scd2LoadRequest *req, Scd2LoadResult *res);

/* txn.c */
extern bool scd2_call_is_nonatomic(FunctionCallInfo fcinfo);
extern ErrorData *scd2_run_in_subxact(void (*body) (void *arg), void *arg, Oid dim_oid,
									  const char *dim_name, const char *stg_name,
									  TimestampTz effective_at, TimestampTz started_at);


#endif							/* SCD2_LOAD_H */
