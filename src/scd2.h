/*
 * scd2.h -- shared declarations of the scd2 extension.
 */
#ifndef SCD2_H
#define SCD2_H

#include "compat.h"
#include "metrics.h"

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/palloc.h"
#include "utils/snapshot.h"

/* One column taking part in a load, resolved against both tables. */
typedef struct Scd2Column
{
	char	   *name;			/* attribute name, unquoted */
	char	   *ident;			/* quote_identifier(name) */
	Oid			typid;			/* dimension column type */
	int32		typmod;
	Oid			collid;			/* dimension column collation */
	char	   *type_sql;		/* qualified type name with typmod */
	char	   *collate_sql;	/* " COLLATE x" when it differs, else "" */
	Oid			eqop;			/* default equality operator, or Invalid */
	char	   *eqop_sql;		/* OPERATOR(schema.=) or NULL */
	bool		builtin_eq;		/* its = is pg_catalog's (resolvable by name) */
	bool		not_distinct_ok;	/* compared by scd2._not_distinct: its =
									 * calls a parallel-safe function, and it
									 * is no row type (whose IS NULL, in the
									 * SQL form, tests its fields) */
	bool		sortable;		/* has a default btree opclass */
	bool		stg_exact;		/* staging column has this type, typmod and
								 * collation: read without a CAST */
	/* How the staging value converts (config.c, for the load's checks). */
	char	   *stg_type_sql;	/* staging column's type with typmod */
	char	   *stg_type_name;	/* the same, and the dimension column's */
	char	   *type_name;		/* type, for messages */
	bool		conv_check;		/* the conversion can fail or lose data:
								 * checked before the load */
	char	   *stg_eqop_sql;	/* equality of the comparison type, when the
								 * value can be cast back to it (a round
								 * trip shows loss); else NULL */
	char	   *cmp_type_sql;	/* the comparison type: the staging type,
								 * or bpchar for a char(n) column (trailing
								 * spaces do not count) */
	char		stg_category;	/* typcategory of the dimension type */
	bool		carried;		/* not in staging: the current version's value
								 * (missing_columns = 'carry_forward') */
} Scd2Column;

/* A registered dimension resolved for one load. */
typedef struct Scd2Config
{
	Oid			dim_oid;
	Oid			stg_oid;
	char	   *dim_sql;		/* quoted qualified names */
	char	   *stg_sql;
	char	   *dim_name;		/* for messages */
	char	   *stg_name;

	Scd2Column *keys;
	int			nkeys;
	Scd2Column *tracked;
	int			ntracked;
	Scd2Column *type1;
	int			ntype1;
	Scd2Column *other;			/* shared, neither tracked nor Type 1 */
	int			nother;

	Scd2Column	vf;				/* valid_from */
	Scd2Column	vt;				/* valid_to */
	char	   *is_current;		/* quoted, or NULL */
	char	   *sk;				/* quoted, or NULL */
	bool		infinity;		/* current rows have a non-NULL valid_to, */
	char	   *current_vt;		/* this one: CAST('infinity' AS type), ... */
	bool		snapshot;		/* snapshot mode */
	bool		detect_timestamp;	/* a change is a later effective time */

	char	   *eff_col;		/* quoted staging column, or NULL */
	char	   *eff_name;		/* the same, unquoted, for messages */
	char	   *eff_type_sql;	/* its type, when not valid_from's, else NULL */
	char	   *eff_eqop_sql;	/* its type's equality (round trip check) */
	char	   *eff_cmp_type_sql;	/* its type again, as the comparison type */
	char	   *eff_type_name;	/* its type, and valid_from's, for messages */
	char	   *vf_type_name;
	char	   *del_col;		/* quoted staging column, or NULL */
	const char *extract_marker; /* scd2.apply_snapshots: del_col is its
								 * extract's delete marker, this internal
								 * column (unquoted), not a staging column;
								 * NULL otherwise */
	double		max_close_fraction; /* the partial-extract guard; < 0: none */
	bool		order_free;		/* register's order_free (load_arrival.c) */

	/*
	 * 0.4's comparison helpers, when the installed objects have them (the
	 * library can be newer: scd2_installed_function): scd2._not_distinct
	 * (fn_not_distinct.c) and the aggregate scd2._repeats (fn_repeats.c).
	 */
	bool		has_not_distinct;
	bool		has_repeats;

	List	   *filled;			/* columns this load added to the dimension,
								 * its Type 1 columns (load_schema.c) */

	char	   *px;				/* prefix of every internal column name of
								 * the generated SQL: no column of the
								 * dimension or the staging table starts
								 * with px followed by "_" (config.c) */
} Scd2Config;

/* Exact metrics of one load: one field per line of SCD2_METRICS. */
typedef struct Scd2Metrics
{
	SCD2_METRICS(SCD2_METRIC_FIELD)
} Scd2Metrics;

/*
 * One extract of scd2.apply_snapshots (fn_apply_snapshots.c), read from
 * its work table instead of the staging table: the first in full
 * (a snapshot-mode load), each later one as its changes since the extract
 * before, with a delete marker for every key that extract had and this
 * one lacks (an incremental load).
 */
typedef struct Scd2Extract
{
	const char *rows_sql;		/* a FROM item with the staging columns and
								 * gone_col, replacing the staging table */
	const char *gone_col;		/* its delete marker, quoted */
	const char *label;			/* "extract <time>", for messages */
	bool		full;			/* the whole extract, in snapshot mode */
	int64		rows;			/* the extract's staging rows */
	const char *snapshot_col;	/* the staging column naming the extract,
								 * unquoted: never a dimension column */
} Scd2Extract;

/* What a caller asks of one load. */
typedef struct Scd2LoadRequest
{
	Oid			stg_oid;
	Oid			dim_oid;
	TimestampTz effective_at;
	bool		dry_run;
	bool		want_feed;		/* materialize the change feed */
	const Scd2Extract *extract; /* scd2.apply_snapshots; NULL otherwise */
} Scd2LoadRequest;

/* What a load produced. */
typedef struct Scd2LoadResult
{
	Scd2Metrics metrics;
	struct Tuplestorestate *feed;	/* when requested */
	struct TupleDescData *feed_desc;
	char	   *dim_name;
	char	   *stg_name;
} Scd2LoadResult;

/*
 * Settings (scd2.c defines them all in _PG_init; these are their
 * defaults).
 */
typedef enum Scd2AsofOnMissing
{
	SCD2_ASOF_MISSING_NULL,
	SCD2_ASOF_MISSING_ERROR
} Scd2AsofOnMissing;

#define SCD2_ASOF_ON_MISSING_DEFAULT		SCD2_ASOF_MISSING_NULL
#define SCD2_ASOF_BULK_THRESHOLD_DEFAULT	20000
#define SCD2_ASOF_MAP_MEMORY_DEFAULT		131072	/* kB */
#define SCD2_CHANGE_LOG_DEFAULT				true
#define SCD2_ALLOW_EMPTY_SNAPSHOT_DEFAULT	false
#define SCD2_FIRST_LOAD_REBUILD_INDEXES_DEFAULT	true
#define SCD2_ALLOW_LARGE_CLOSE_DEFAULT		false

extern int	scd2_asof_on_missing;		/* scd2.asof_on_missing */
extern int	scd2_asof_bulk_threshold;	/* scd2.asof_bulk_threshold */
extern int	scd2_asof_map_memory;		/* scd2.asof_map_memory, kB */
extern bool scd2_change_log;			/* scd2.change_log */
extern bool scd2_allow_empty_snapshot;	/* scd2.allow_empty_snapshot */
extern bool scd2_first_load_rebuild_indexes;	/* scd2.first_load_rebuild_indexes */
extern bool scd2_allow_large_close;	/* scd2.allow_large_close */

/* registry.c */
/* The registry row, as text. */
typedef struct Scd2Registration
{
	List	   *business_key;
	List	   *tracked;		/* NIL with tracked_all */
	bool		tracked_all;
	List	   *type1;
	char	   *effective_column;
	char	   *delete_column;
	char	   *mode;
	char	   *valid_from;
	char	   *valid_to;
	char	   *is_current;
	char	   *surrogate_key;
	char	   *current_valid_to;
	bool		has_shape;
	Datum		shape_columns;	/* text[], oid[], int4[] */
	Datum		shape_types;
	Datum		shape_typmods;
	char	   *detect;
	double		max_close_fraction; /* < 0: no limit */
	bool		carry_forward;	/* missing_columns = 'carry_forward' */
	char	   *on_schema_change;	/* ignore, fail, append_new_columns,
									 * sync_all_columns; NULL before 0.4 */
	bool		order_free;		/* order_free (0.4) */
} Scd2Registration;

/* What scd2.asof reads of a registration. */
typedef struct Scd2AsofRegistration
{
	char	  **keys;			/* business key column names */
	int			nkeys;
	char	   *valid_from;
	char	   *valid_to;
	char	   *surrogate_key;	/* NULL: none registered */
} Scd2AsofRegistration;

/* One registered dimension, as read before the first load. */
typedef struct Scd2Target
{
	Oid			dim_oid;
	Oid			stg_oid;		/* InvalidOid: no default staging table */
	char	   *dim_name;		/* qualified, quoted as in the audit log */
	char	   *stg_name;
} Scd2Target;

extern const char *scd2_registry_shape_sql(void);
extern Scd2Registration *scd2_registry_read(Oid dim_oid, const char *dim_name);
extern bool scd2_registry_read_asof(Oid relid, const char *relname, MemoryContext cxt,
									Scd2AsofRegistration *out, bool missing_ok);
extern Scd2Target *scd2_registry_targets(int *ntargets);
extern void scd2_registry_refresh_shape(Oid dim_oid);
extern void scd2_check_registered_shape(Oid relid, const char *dim_name, Datum columns,
										Datum types, Datum typmods);

/* config.c */
extern Scd2Config *scd2_load_config(Oid dim_oid, Oid stg_oid);

/* load.c */
extern void scd2_request_from_args(FunctionCallInfo fcinfo, Scd2LoadRequest *req);
extern void scd2_run_load(const Scd2LoadRequest *req, Scd2LoadResult *res);

/* txn.c */
extern bool scd2_call_is_nonatomic(FunctionCallInfo fcinfo);
extern ErrorData *scd2_run_in_subxact(void (*body) (void *arg), void *arg,
									  const char *dim_name, const char *stg_name,
									  TimestampTz effective_at, TimestampTz started_at);

/* load_schema.c: what the last load noted about the staging table's shape */
extern const char *scd2_schema_note(const char *dim_name);

/* audit.c */
extern int64 scd2_audit_write(const char *dim_name, const char *stg_name,
							  const char *status, TimestampTz effective_at,
							  TimestampTz started_at, const Scd2Metrics *m,
							  const char *message);
extern void scd2_notice_metrics(const char *dim_name, const Scd2Metrics *m,
								bool dry_run);

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

/* snapshot_check.c */
extern void scd2_refuse_stale_snapshot(Oid dim_oid, const char *dim_name, Snapshot xact,
									   const char *what_nothing);

/* changelog.c */
extern void scd2_pin_text_forms(void);
extern bool scd2_changelog_prepare(bool dry_run);
extern char *scd2_changelog_sql(const Scd2Config *cfg, const char *chg, const char *written);
extern char *scd2_changelog_sql_first_load(const Scd2Config *cfg);
extern int64 scd2_changelog_write(const Scd2Config *cfg, bool prepared, bool keys_later);
extern void scd2_changelog_work_table(Oid role);
extern void scd2_changelog_copy_work_rows(int64 run_id);
extern bool scd2_changelog_compact_first_load(void);
extern int64 scd2_changelog_write_first_load(const Scd2Config *cfg, bool prepared, int64 inserted);
extern bool scd2_changelog_batch_installed(void);
extern int64 scd2_changelog_write_batch(const Scd2Config *cfg, const Datum *arrays);
extern char *scd2_changelog_type1_json_sql(const Scd2LoggedColumn *cols, int ncols,
										   const char *alias, bool text);
extern char *scd2_changelog_sql_inserted_keys(const Scd2Config *cfg, const char *chg);
extern void scd2_changelog_store_inserted_keys(const Scd2Config *cfg, int64 expected);
extern char *scd2_changelog_key_json_sql(const Scd2LoggedColumn *keys, int nkeys, const char *alias);
extern char *scd2_changelog_encode_sql(Oid typid, const char *expr);
extern char *scd2_changelog_decode_sql(Oid typid, const char *expr);
extern Scd2LoggedColumn *scd2_changelog_columns(struct RelationData *rel, Datum names,
												int64 run_id, const char *dim_name, int *n);
extern int64 scd2_changelog_claim_run_id(const char *dim_name);
extern int64 scd2_changelog_reserved_run_id(void);

/* util.c */
extern char *scd2_relation_display_name(Oid relid);
extern void scd2_require_relation_owner(Oid relid, const char *detail);
extern char *scd2_operator_sql(Oid opno);
extern char *scd2_collate_sql(Oid collid);
extern void scd2_lock_dimension(Oid dim_oid, const char *dim_name, const char *detail_fmt);
extern int	scd2_pin_search_path(void);
extern void scd2_unpin(int nestlevel);
extern void scd2_set_local(const char *name, const char *value);
extern Oid	scd2_extension_owner(void);
extern bool scd2_installed(const char *table, const char *column);
extern bool scd2_installed_function(const char *name, Oid argtype);
extern int64 scd2_spi_int8(int row, int col);
extern char *scd2_spi_text(int row, int col);

/*
 * exec.c: the one way scd2 runs a statement (docs/SECURITY.md).  An owner
 * context: the role a statement on user data runs as, and what to restore.
 */
typedef struct OwnerContext
{
	Oid			owner;
	Oid			prev_owner;
	Oid			save_userid;
	int			save_sec;
	int			nest;
} OwnerContext;
extern void scd2_owner_enter(OwnerContext *oc, Oid owner);
extern void scd2_owner_restrict(OwnerContext *oc);
extern void scd2_owner_unrestrict(OwnerContext *oc);
extern void scd2_owner_leave(OwnerContext *oc);
extern uint64 scd2_exec_user(const char *sql, int nargs, const Oid *argtypes,
							 const Datum *values, const char *nulls, Snapshot snap,
							 bool read_only, int expected, const char *what);
extern void scd2_exec_user_parallel(const char *sql, int nargs, const Oid *argtypes,
									const Datum *values, Snapshot snap, const char *what);
extern uint64 scd2_exec_user_into(const char *sql, int nargs, const Oid *argtypes,
								  const Datum *values, Snapshot snap,
								  struct _DestReceiver *dest, bool parallel, const char *what);
extern void scd2_exec_require_owner(bool restricted, const char *what);
extern void scd2_exec_work(const char *sql, int expected, const char *what);
extern uint64 scd2_exec_catalog(const char *sql, int nargs, Oid *argtypes, Datum *values,
								const char *nulls, bool read_only, int expected,
								const char *what);
extern uint64 scd2_exec_catalog_snap(const char *sql, int nargs, Oid *argtypes, Datum *values,
									 const char *nulls, Snapshot snap, bool read_only,
									 int expected, const char *what);
extern uint64 scd2_exec_catalog_as_caller(const char *sql, int nargs, Oid *argtypes,
										  Datum *values, const char *nulls, const char *what);
extern uint64 scd2_exec_as_owner(Oid owner, const char *sql, int nargs, const Oid *argtypes,
								 const Datum *values, bool read_only, int expected,
								 const char *what, const char *context_line);
extern char *scd2_context_without_sql(const char *context, const char *line);
extern void scd2_rethrow_without_sql(MemoryContext cxt, const char *line);

/* guard.c: what every entry point refuses before it reads or writes */
extern void scd2_refuse_row_security(Oid relid, Oid owner, const char *relkind_word,
									 const char *entry);
extern void scd2_require_registered_shape(Oid dim_oid, const char *dim_name, bool missing_ok);
extern Oid	scd2_relation_owner(Oid relid);
extern void scd2_check_relkind(Oid relid, bool dimension);

#endif							/* SCD2_H */
