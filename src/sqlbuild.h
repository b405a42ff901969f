/*
 * sqlbuild.h -- builders of the load's generated SQL (sqlbuild.c).
 */
#ifndef SCD2_SQLBUILD_H
#define SCD2_SQLBUILD_H

#include "scd2.h"

#include "access/tupdesc.h"
#include "lib/stringinfo.h"

/* A template with internal names, expanded for this load's cfg. */
#define X(tmpl) scd2_expand_names(cfg, tmpl)

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
extern int	scd2_keys_cheap_prefix(const Scd2Config *cfg);
extern void scd2_append_update_set(StringInfo buf, const Scd2Config *cfg, bool moves);
extern void scd2_append_insert_cols(StringInfo buf, const Scd2Config *cfg, Oid sk_seq);
extern void scd2_append_insert_values(StringInfo buf, const Scd2Config *cfg, Oid sk_seq);
extern char *scd2_key_json_sql(const Scd2Config *cfg, const char *alias);
extern char *scd2_staging_key_json(const Scd2Config *cfg);

#endif							/* SCD2_SQLBUILD_H */
