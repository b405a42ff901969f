/*
 * runs.h -- what the files of scd2.revert share (revert.c, run.c),
 * and scd2.rewind (rewind.c), which undoes runs with revert's code.
 */
#ifndef SCD2_REVERT_H
#define SCD2_REVERT_H

#include "scd2.h"

#include "history/history.h"

/* A run as the change log and the audit log know it. */
typedef struct Run
{
	int64		run_id;
	char	   *status;
	char	   *dim_text;		/* the audit row's dimension */
	char	   *stg_text;
	bool		has_eff;
	TimestampTz effective_at;
	bool		has_header;
	Oid			dim_oid;
	Datum		key_columns;	/* name[] */
	Datum		bookkeeping;	/* name[]: valid_from, valid_to */
	Datum		is_current;		/* name[]: is_current column, or empty */
	Datum		surrogate_key;	/* name[]: surrogate key column, or empty */
	Datum		type1_columns;	/* name[] */
	bool		logged;
	char	   *pruned_at;
	char	   *reverted_by;
	char	   *current_valid_to;	/* the registration's, as text */
	char	   *dropped_at;		/* when its dimension was dropped (0.4), or NULL */
	bool		old_type1_text; /* old_type1 holds text forms (0.4), else jsonb values */
	int64		first_load_rows;	/* a first load logged compactly (0.4): the rows it
									 * inserted, every row of the dimension right after it;
									 * -1: its rows are in scd2.change_log */
	bool		batch;			/* logged by surrogate keys (0.4,
								 * load/batch_log.c) */
} Run;

/* What revert reads of a run's change log, as arrays. */
typedef struct Logged
{
	int64		ninserted;
	Datum		ins_keys;		/* jsonb[] */
	Datum		ins_vf;			/* timestamptz[] */
	int64		nupdated;
	Datum		upd_keys;
	Datum		upd_vf;
	Datum		upd_vt;			/* old valid_to */
	Datum		upd_cur;		/* old is_current */
	Datum		upd_type1;		/* old Type 1 values, jsonb */
	int64		nrows;			/* every row: */
	Datum		all_keys;
	Datum		all_vf;
	Datum		all_vt;			/* valid_to as the run left it (NULL: current) */
	/* an order-free run's 'extend' and 'remove' rows (0.4's old_row) */
	int64		nmoved;			/* extended rows: deleted, then written back */
	Datum		mv_keys;
	Datum		mv_vf;			/* valid_from as the run left it */
	int64		nrestored;		/* extended and removed rows written back */
	Datum		rs_rows;		/* jsonb[]: each row's columns as text forms */
	/* the inferred versions a load completed in place (0.5: 'complete') */
	int64		ncompleted;		/* deleted, then written back whole */
	Datum		cp_keys;
	Datum		cp_vf;			/* valid_from as the run left it */
	Datum		cp_rows;		/* jsonb[]: the versions as they were */
} Logged;

/* run.c */
extern void scd2_revert_read_run(int64 run_id, bool read_only, Run *run);
extern void scd2_revert_require_change_log(const Run *run);
extern void scd2_revert_require_revertible(const Run *run);
extern char *scd2_revert_later_runs(const Run *run);
extern void scd2_revert_require_fresh(const Run *run, const char *dim_name);
extern char *scd2_revert_registration(const Run *run, const char *dim_name);
extern void scd2_revert_read_change_log(int64 run_id, Logged *lg);
SCD2_NORETURN_PRE extern void scd2_report_run_rows_changed(const char *dim_name, int64 run_id,
														const char *detail,
														const char *hint) SCD2_NORETURN_POST;

/*
 * SQL: whether run r of scd2.change_log_runs is a first load logged by its
 * header alone (first_load_rows, 0.4 on: read through to_jsonb).
 */
#define SCD2_RUN_COMPACT_SQL(r) \
	"(pg_catalog.to_jsonb(" r ") OPERATOR(pg_catalog.->>) 'first_load_rows') IS NOT NULL"

/*
 * SQL: the instant the run of audit row a became known -- no reader could
 * see it before (docs/SEMANTICS.md, "Known at").  Its commit timestamp
 * where track_commit_timestamp keeps one (only for a transaction id less
 * than 2^31 old, whose 32-bit form names no other); else committed_at, when
 * its transaction began to commit (0.5 on, commit_stamp.c; read through
 * to_jsonb); else, not committed yet (this transaction's own run),
 * infinity; else (written before 0.5) when it finished.
 */
#define SCD2_RUN_KNOWN_SQL(a) \
	"COALESCE(CASE WHEN pg_catalog.current_setting('track_commit_timestamp') OPERATOR(pg_catalog.=) 'on'" \
	"               AND CAST(CAST(" a ".txid AS pg_catalog.text) AS pg_catalog.int8) OPERATOR(pg_catalog.>)" \
	"                   (CAST(CAST(pg_catalog.pg_snapshot_xmax(pg_catalog.pg_current_snapshot()) AS pg_catalog.text)" \
	"                         AS pg_catalog.int8) OPERATOR(pg_catalog.-) 2147483647)" \
	"          THEN pg_catalog.pg_xact_commit_timestamp(CAST(" a ".txid AS pg_catalog.xid)) END," \
	"          CAST(pg_catalog.to_jsonb(" a ") OPERATOR(pg_catalog.->>) 'committed_at' AS pg_catalog.timestamptz)," \
	"          CASE WHEN " a ".txid OPERATOR(pg_catalog.=) pg_catalog.pg_current_xact_id_if_assigned()" \
	"               THEN CAST('infinity' AS pg_catalog.timestamptz) ELSE " a ".finished_at END)"

/*
 * SQL: audit row a is of the dimension $1 (its OID) named $2 (its display
 * name), for a run without a change-log header (loaded before 0.3): by the
 * OID the row keeps (0.5 on, read through to_jsonb, which gives its regclass
 * text: compared with $1's, both printed now), by the name only when it
 * keeps none.
 */
#define SCD2_AUDIT_ROW_OF_SQL(a) \
	"CASE WHEN (pg_catalog.to_jsonb(" a ") OPERATOR(pg_catalog.->>) 'dimension_oid') IS NOT NULL" \
	"     THEN (pg_catalog.to_jsonb(" a ") OPERATOR(pg_catalog.->>) 'dimension_oid')" \
	"          OPERATOR(pg_catalog.=) CAST($1::pg_catalog.regclass AS pg_catalog.text)" \
	"     ELSE " a ".dimension OPERATOR(pg_catalog.=) $2 END"

/* compact.c */
extern void scd2_compact_first_load_feed(const Run *run, const char *dim_name,
										 const Scd2LoggedColumn *keys, int nkeys,
										 const Scd2LoggedColumn *book, const Scd2LoggedColumn *sk,
										 int nsk);

/* load/batch_log.c: a batch logged by surrogate keys (its arrays) */
typedef struct Scd2BatchLog
{
	int64		n;				/* rows the run wrote */
	Datum		arrays[5];		/* surrogate keys, actions, valid_to; with
								 * pinned, business keys and valid_from */
	bool		pinned;			/* a later order-free load moved or removed
								 * some of its rows: their business keys and
								 * valid_from are in the batch (NULL at the
								 * other rows' places) */
} Scd2BatchLog;

extern const Oid scd2_batch_argtypes[5];
extern bool scd2_batch_read(int64 run_id, Scd2BatchLog *b);
extern char *scd2_batch_rows_sql(const Run *run, const char *dim_name, bool type1_images,
								 const Scd2BatchLog *b);
extern void scd2_batch_require_rows(const Run *run, const char *dim_name, int64 found,
									const Scd2BatchLog *b);
extern void scd2_batch_require_unmoved(const Run *run, const char *dim_name, const Scd2BatchLog *b);
/* scd2_batch_collect's arrays: run, key, valid_from, inserted, old_valid_to, old_is_current */
#define SCD2_BATCH_UNDO_COLS 6
extern void scd2_batch_collect(Datum run_ids, const char *dim_name, bool inserted_only,
							   Datum *arrays);
extern uint64 scd2_batch_exec(const Run *run, const char *dim_name, const char *sql,
							  const Scd2BatchLog *b, bool read_only, int expected,
							  const char *what);

/* revert.c: one run's undo, for scd2.rewind */
extern void scd2_revert_undo(const Run *run, const char *dim_name, int64 *deleted,
							 int64 *restored);
extern void scd2_revert_check_privileges(Oid dim_oid, const char *dim_name);
extern void scd2_revert_mark_reverted(int64 run_id, int64 revert_id);

#endif							/* SCD2_REVERT_H */
