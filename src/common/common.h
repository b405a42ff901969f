/*
 * common.h -- what the common folder offers every other: the one way
 * a statement runs (exec.c), the snapshot check (snapshot_check.c), small
 * helpers (util.c) and the builders of generated SQL (sqlbuild.c).
 */
#ifndef SCD2_COMMON_H
#define SCD2_COMMON_H

#include "scd2.h"

#include "access/tupdesc.h"
#include "lib/stringinfo.h"

/* A template with internal names, expanded for this load's cfg. */
#define X(tmpl) scd2_expand_names(cfg, tmpl)

/* util.c */
extern char *scd2_relation_display_name(Oid relid);
extern void scd2_require_relation_owner(Oid relid, const char *detail, const char *hint);
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
extern void scd2_require_not_null(bool isnull, const char *what);
SCD2_NORETURN_PRE extern void scd2_report_no_relation(Oid relid) SCD2_NORETURN_POST;

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

/* snapshot_check.c */
extern void scd2_refuse_stale_snapshot(Oid dim_oid, const char *dim_name, Snapshot xact,
									   const char *what_nothing);

/* sqlbuild.c */
extern char *scd2_choose_internal_prefix(TupleDesc dim, TupleDesc stg);
extern char *scd2_expand_names(const Scd2Config *cfg, const char *tmpl);
extern void scd2_append_cols(StringInfo buf, const Scd2Column *cols, int n,
							 const char *prefix);
extern void scd2_append_more_cols(StringInfo buf, const Scd2Column *cols, int n,
								  const char *prefix);
extern void scd2_append_null_cols(StringInfo buf, const Scd2Column *cols, int n);
extern void scd2_append_col_defs(StringInfo buf, const Scd2Column *cols, int n);
extern void scd2_append_identical_positional(StringInfo buf, const Scd2Config *cfg,
											 const Scd2Column *cols, int n, const char *aprefix,
											 const char *bprefix, const char *tag, int skip,
											 bool known_equal);
extern int	scd2_instant_column(const Scd2Config *cfg);
extern void scd2_append_eq_positional(StringInfo buf, const Scd2Config *cfg,
									  const Scd2Column *cols, int n, const char *aprefix, const char *bprefix,
									  const char *tag);
extern void scd2_append_key_join(StringInfo buf, const Scd2Config *cfg,
								 const char *a, const char *b);
extern char *scd2_current_pred(const Scd2Config *cfg, const char *alias);
extern char *scd2_open_vt(const Scd2Config *cfg, const char *alias);
extern char *scd2_stored_vt(const Scd2Config *cfg, const char *expr);
extern void scd2_append_all_staging(StringInfo buf, const Scd2Config *cfg);
extern void scd2_append_normalized_staging(StringInfo buf, const Scd2Config *cfg);
extern void scd2_append_payload_cols(StringInfo buf, const Scd2Config *cfg,
									 const char *prefix);
extern char *scd2_partition_by_keys(const Scd2Config *cfg);
extern char *scd2_partition_by(const Scd2Config *cfg, const char *alias);
extern int	scd2_keys_cheap_prefix(const Scd2Config *cfg);
extern void scd2_append_update_set(StringInfo buf, const Scd2Config *cfg, bool moves);
extern void scd2_append_insert_cols(StringInfo buf, const Scd2Config *cfg, Oid sk_seq);
extern void scd2_append_insert_values(StringInfo buf, const Scd2Config *cfg, Oid sk_seq);
extern char *scd2_key_json_sql(const Scd2Config *cfg, const char *alias);
extern char *scd2_staging_key_json(const Scd2Config *cfg);

#endif							/* SCD2_COMMON_H */
