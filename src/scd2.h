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
	/* How the staging value converts (catalog/config.c, for the load's checks). */
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
	bool		ignore_null;	/* register's ignore_null_updates: an event's
								 * NULL here means "unchanged" (load/arrival.c) */
} Scd2Column;

/* A registered dimension resolved for one load. */
typedef struct Scd2Config
{
	const struct Scd2Registration *reg; /* the registration it was resolved
										 * from (catalog/registry.h) */
	Oid			dim_oid;
	Oid			stg_oid;
	Oid			owner;			/* the dimension's owner: the load runs as it */
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
	char	   *inferred;		/* register's inferred_column, quoted, or
								 * NULL: never a column a load reads from
								 * staging (catalog/config.c) */
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
	bool		order_free;		/* register's order_free (load/arrival.c) */

	/*
	 * A change stream (0.5, load/arrival.c): the staging column that orders
	 * one key's events at one instant (quoted, or NULL) and its type; and
	 * stream: an order-free load that remembers every event as it came (a
	 * sequence, partial updates or Type 1 columns need them all later).
	 */
	char	   *seq_col;
	char	   *seq_name;		/* the same, unquoted, for messages */
	char	   *seq_type_sql;
	bool		stream;

	/*
	 * 0.4's comparison helpers, when the installed objects have them (the
	 * library can be newer: scd2_installed_function): scd2._not_distinct
	 * (common/not_distinct.c) and the aggregate scd2._repeats (common/repeats.c).
	 */
	bool		has_not_distinct;
	bool		has_repeats;

	List	   *filled;			/* columns this load added to the dimension,
								 * its Type 1 columns (load/schema.c) */

	char	   *px;				/* prefix of every internal column name of
								 * the generated SQL: no column of the
								 * dimension or the staging table starts
								 * with px followed by "_" (catalog/config.c) */
} Scd2Config;

/* Exact metrics of one load: one field per line of SCD2_METRICS. */
typedef struct Scd2Metrics
{
	SCD2_METRICS(SCD2_METRIC_FIELD)
} Scd2Metrics;

/*
 * One extract of scd2.apply_snapshots (load/apply_snapshots.c), read from
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
	int64		run_id;			/* the run id its change log reserved for its
								 * audit row (0: none, the audit row draws one) */
	char	   *schema_note;	/* what the load did about the staging table's
								 * shape (schema.c), for the NOTICE and audit
								 * row; NULL: nothing to say */
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
#define SCD2_LOAD_MEMORY_DEFAULT			(-1)	/* kB; -1: hash_mem, 0: off */
#define SCD2_ALLOW_DROP_WITH_HISTORY_DEFAULT	false

extern int	scd2_asof_on_missing;		/* scd2.asof_on_missing */
extern int	scd2_asof_bulk_threshold;	/* scd2.asof_bulk_threshold */
extern int	scd2_asof_map_memory;		/* scd2.asof_map_memory, kB */
extern bool scd2_change_log;			/* scd2.change_log */
extern bool scd2_allow_empty_snapshot;	/* scd2.allow_empty_snapshot */
extern bool scd2_first_load_rebuild_indexes;	/* scd2.first_load_rebuild_indexes */
extern bool scd2_allow_large_close;	/* scd2.allow_large_close */
extern int	scd2_load_memory;			/* scd2.load_memory, kB */
extern char *scd2_explain_statement;	/* scd2.explain_statement: '' none, '*' every
										 * statement, else one step's name */
extern bool scd2_allow_drop_with_history;	/* scd2.allow_drop_with_history */

#endif							/* SCD2_H */
