/*
 * history.h -- what the history folder offers the load: the audit
 * row and the metrics NOTICE (audit.c), the change log's format and its
 * writes as the extension owner (changelog.c), and the arrival memory of
 * order-free dimensions (arrival_memory.c; docs/SEMANTICS.md, "Arrival
 * order", has the rules).
 */
#ifndef SCD2_HISTORY_H
#define SCD2_HISTORY_H

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
/*
 * The change log's rows of one load, computed as the dimension's owner and
 * copied into scd2.change_log as the extension owner (changelog.c), who
 * creates and owns this table.
 */
#define LOG_TABLE	"pg_temp.\"scd2 work: log\""

/*
 * Its columns (and scd2.change_log's after run_id), declared once: action
 * first, then the key part (every row), the before-images (updated rows)
 * and an order-free load's whole row (0.4).  LOG_COL_* expand a part into
 * ", name type", ", name" or ", l.name".
 */
#define SCD2_LOG_KEYS(C) \
	C(inserted, bool) C(surrogate_key, int8) C(business_key, jsonb) C(valid_from, timestamptz)
#define SCD2_LOG_IMAGES(C) \
	C(valid_to, timestamptz) C(old_valid_to, timestamptz) C(old_is_current, bool) C(old_type1, jsonb)
#define SCD2_LOG_ROW(C) C(old_row, jsonb)
#define LOG_COL_DEF(name, type)	", " #name " pg_catalog." #type
#define LOG_COL_NAME(name, type)	", " #name
#define LOG_COL_OF_L(name, type)	", l." #name
/* "action, inserted, ..., valid_from", and with the before-images */
#define LOG_COLS_KEYS		"action" SCD2_LOG_KEYS(LOG_COL_NAME)
#define LOG_COLS_IMAGES		LOG_COLS_KEYS SCD2_LOG_IMAGES(LOG_COL_NAME)
#define LOG_COLS_ALL		LOG_COLS_IMAGES SCD2_LOG_ROW(LOG_COL_NAME)

/*
 * What a change row does (the load's change table's `_action, which its MERGE
 * acts on) and what the change log records (scd2.change_log.action).
 */
#define WT_ACT_INSERT		"'insert'"		/* first version of a new key */
#define WT_ACT_NEW_VERSION	"'new_version'"	/* a later version */
#define WT_ACT_CLOSE		"'close'"		/* end the version (a change follows) */
#define WT_ACT_DELETE		"'delete'"		/* end the version (deleted key) */
#define WT_ACT_SHORTEN		"'shorten'"		/* end an existing version earlier */
#define WT_ACT_TYPE1		"'type1'"		/* overwrite the Type 1 columns only */
#define WT_ACT_EXTEND		"'extend'"		/* order-free: a version's range grows
											 * (valid_from earlier, or valid_to later) */
#define WT_ACT_REMOVE		"'remove'"		/* order-free: a superseded version goes */
#define WT_ACT_COMPLETE		"'complete'"	/* an inferred member's version
											 * completed in place: values,
											 * flag, perhaps an earlier
											 * valid_from (load/complete.c;
											 * the change log alone) */
#define WT_ACT_COMPLEX		"'complex'"		/* placeholder: the key goes the
											 * general way (never written) */
#define WT_ACT_REMEMBER		"'remember'"	/* placeholder, order-free: an
											 * event to remember (never
											 * written; load/arrival.c moves
											 * it to the memory) */


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
 * (load/classify_copies.c): the instant and the version's surrogate key of
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


/* audit.c */
extern int64 scd2_audit_write(Oid dim_oid, const char *dim_name, const char *stg_name,
							  const char *status, TimestampTz effective_at,
							  TimestampTz started_at, const Scd2Metrics *m,
							  const char *message, const char *schema_note, int64 run_id);
extern void scd2_audit_set_facts_rekeyed(int64 run_id, int64 facts);
extern void scd2_notice_metrics(const char *dim_name, const Scd2Metrics *m,
								bool dry_run, const char *schema_note);

/*
 * facts.c: a dimension's maintained fact tables, re-keyed by each run that
 * moves its history (the load, revert.c, rewind.c): the checks under the
 * lock before the run writes, then the re-keying after its write.
 */
extern void scd2_facts_require_maintainable(Oid dim, const char *entry, bool load, bool logged);
extern int64 scd2_facts_maintain(Oid dim);

/* commit_stamp.c */
extern void scd2_commit_stamp_remember(int64 run_id);

/* A column named by a run's change log, found in the dimension. */
typedef struct Scd2LoggedColumn
{
	char	   *name;
	char	   *ident;
	Oid			typid;
	char	   *type_sql;		/* its type, qualified, with typmod */
	char	   *def;			/* "ident type COLLATE x" for jsonb_to_record */
	char	   *eqop_sql;		/* OPERATOR(schema.=), or NULL */
} Scd2LoggedColumn;

/* changelog.c */
extern void scd2_pin_text_forms(void);
extern bool scd2_changelog_prepare(bool dry_run);
extern char *scd2_changelog_sql(const Scd2Config *cfg, const char *chg, const char *written);
extern char *scd2_changelog_sql_first_load(const Scd2Config *cfg);
extern char *scd2_changelog_row_json_sql(Oid relid, const char *alias);
extern int64 scd2_changelog_write(const Scd2Config *cfg, bool prepared, bool keys_later);
extern void scd2_changelog_work_table(Oid role);
extern void scd2_changelog_copy_work_rows(int64 run_id);
extern bool scd2_changelog_compact_first_load(void);
extern int64 scd2_changelog_write_first_load(const Scd2Config *cfg, bool prepared, int64 inserted);
extern bool scd2_changelog_batch_installed(void);
extern bool scd2_changelog_batch_chunked(void);
extern int64 scd2_changelog_write_batch_header(const Scd2Config *cfg);
extern void scd2_changelog_write_batch_chunk(int64 run_id, int chunk, const Datum *arrays);
extern char *scd2_changelog_type1_json_sql(const Scd2LoggedColumn *cols, int ncols,
										   const char *alias, bool text);
extern char *scd2_changelog_sql_inserted_keys(const Scd2Config *cfg, const char *chg);
extern void scd2_changelog_store_inserted_keys(const Scd2Config *cfg, int64 run_id,
											   int64 expected);
extern char *scd2_changelog_key_json_sql(const Scd2LoggedColumn *keys, int nkeys, const char *alias);
extern char *scd2_changelog_encode_sql(Oid typid, const char *expr);
extern char *scd2_changelog_decode_sql(Oid typid, const char *expr);
extern Scd2LoggedColumn *scd2_changelog_columns(struct RelationData *rel, Datum names,
												int64 run_id, const char *dim_name, int *n);

/* batch_read.c: a batch's action codes ("char") to change-log actions, or back */
extern char *scd2_batch_action_case_sql(const char *expr, bool to_code);

#endif							/* SCD2_HISTORY_H */
