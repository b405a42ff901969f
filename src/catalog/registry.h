/*
 * registry.h -- what the catalog folder offers the others: a
 * dimension's registration (every read and write of scd2.dimensions is in
 * dimensions.c), its resolved configuration (config.c), the checks every
 * entry point makes before it touches a dimension (guard.c) and the
 * caller's and owner's privileges (access.c).
 */
#ifndef SCD2_CATALOG_REGISTRY_H
#define SCD2_CATALOG_REGISTRY_H

#include "scd2.h"

#include "lib/stringinfo.h"

/* dimensions.c */
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
	char	   *inferred_column;	/* 0.5: the flag of inferred members, or
									 * NULL */
	char	   *sequence_column;	/* 0.5: the staging column that orders a
									 * key's events at one instant, or NULL */
	List	   *ignore_null_updates;	/* 0.5: the columns whose NULL means
										 * "unchanged" (names) */
	Datum		created_indexes;	/* text[]: the indexes register created,
									 * (Datum) 0 before 0.2 kept them */
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

extern Scd2Registration *scd2_registry_read(Oid dim_oid, const char *dim_name);
extern bool scd2_registry_read_asof(Oid relid, const char *relname, MemoryContext cxt,
									Scd2AsofRegistration *out, bool missing_ok);
extern Scd2Target *scd2_registry_targets(int *ntargets);
extern void scd2_registry_refresh_shape(Oid dim_oid);
extern bool scd2_registry_read_shape(Oid dim_oid, Datum *shape);
extern void scd2_registry_run_header(const Scd2Registration *reg, Datum *values, bool *nulls);
#define SCD2_REGISTRY_RUN_HEADER_COLS 7
extern char *scd2_registry_changed_since_run(int64 run_id, char **current_valid_to);
/* shape.c */
extern void scd2_check_registered_shape(Oid relid, const char *dim_name, Datum columns,
										Datum types, Datum typmods);

/* config.c */
extern Scd2Registration *scd2_load_registration(Oid dim_oid, Oid stg_oid, const char *dim_name);
extern Scd2Config *scd2_load_config(Oid dim_oid, Oid stg_oid, const Scd2Registration *reg);
extern void scd2_config_set_stream(Scd2Config *cfg);
extern Scd2Config *scd2_infer_config(Oid dim_oid, Oid stg_oid, const Scd2Registration *reg,
									 const char *time_column);

/* guard.c, access.c: what every entry point refuses before it reads or writes */
extern void scd2_refuse_row_security(Oid relid, Oid owner, const char *relkind_word,
									 const char *entry);
extern void scd2_require_registered_shape(Oid dim_oid, const char *dim_name, bool missing_ok);
extern Oid	scd2_relation_owner(Oid relid);
extern void scd2_check_relkind(Oid relid, bool dimension);

/* trust.c: whose objects a dimension's owner may run or depend on */
extern void scd2_trust_staging_relation(Oid stg_oid, Oid owner, const char *dim_name);
extern void scd2_trust_staging_column(Oid owner, const char *stg_name, const char *dim_name,
									  const char *column, Oid stgtype, Oid stgcoll,
									  Oid dimtype, Oid dimcoll);
extern void scd2_trust_staging_columns(Oid stg_oid, Oid dim_oid, Oid owner,
									   const char *stg_name, const char *dim_name);
extern void scd2_trust_new_column(Oid owner, const char *dim_name, const char *stg_name,
								  const char *column, Oid type, Oid coll);

/* access.c: the privileges a load needs, of the caller or the owner */
extern void scd2_check_privileges(Oid stg_oid, Oid dim_oid, bool dry_run,
								  Oid roleid, bool as_owner);

/* fact_tables.c: every read and write of scd2.fact_tables */
typedef struct Scd2FactRegistration
{
	Oid			fact;
	Oid			dim;
	char	   *sk;				/* the fact's surrogate key column */
	char	   *time;			/* the fact's time column */
	int64		last_run;		/* the newest run or revert rekey_facts has seen */
	bool		maintain;		/* re-keyed by every run that moves history */
	Scd2Registration *dim_reg;	/* the dimension's registration */
} Scd2FactRegistration;
extern Scd2FactRegistration *scd2_fact_read(Oid fact);
extern List *scd2_fact_maintained(Oid dim);
extern void scd2_fact_refuse_citus_maintained(Oid fact, Oid dim);
extern void scd2_fact_set_last_run(Oid fact, int64 run_id);
extern void scd2_fact_append_valid_at(StringInfo buf, const Scd2FactRegistration *f,
									  const char *dalias, const char *falias);
extern void scd2_fact_append_key_eq(StringInfo buf, const Scd2FactRegistration *f,
									const char *a, const char *b, bool positional);

#endif							/* SCD2_CATALOG_REGISTRY_H */
