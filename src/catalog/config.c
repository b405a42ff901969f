/*
 * config.c -- a registered dimension, resolved against a staging table.
 *
 * Takes the registry row of the dimension (dimensions.c), finds every column it names in
 * the dimension and in the staging table, checks types, and derives the
 * tracked / Type 1 / other column lists.  Every problem a user can cause is
 * reported here, before anything is written, with the column at fault.
 */
#include "scd2.h"

#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "commands/defrem.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "parser/parse_coerce.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "common/common.h"

static void resolve_time_column(Scd2Config *cfg, Form_pg_attribute att, const char *name);

static Form_pg_attribute
find_attribute(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

static bool
name_in_list(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp((char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

/* Describe a dimension column for SQL generation. */
static void
describe_column(Scd2Column *col, Form_pg_attribute att)
{
	TypeCacheEntry *tc;

	col->name = pstrdup(NameStr(att->attname));
	col->ident = pstrdup(quote_identifier(col->name));
	col->typid = att->atttypid;
	col->typmod = att->atttypmod;
	col->collid = att->attcollation;
	col->type_sql = format_type_extended(att->atttypid, att->atttypmod,
										 FORMAT_TYPE_TYPEMOD_GIVEN |
										 FORMAT_TYPE_FORCE_QUALIFY);
	/* " COLLATE x" only when the column's collation is not its type's */
	col->collate_sql = (!OidIsValid(att->attcollation) ||
						 att->attcollation == get_typcollation(att->atttypid)) ?
		"" : scd2_collate_sql(att->attcollation);
	tc = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR | TYPECACHE_LT_OPR);
	col->eqop = tc->eq_opr;
	col->eqop_sql = OidIsValid(tc->eq_opr) ? scd2_operator_sql(tc->eq_opr) : NULL;
	col->builtin_eq = col->eqop_sql != NULL &&
		strncmp(col->eqop_sql, "OPERATOR(pg_catalog.", 20) == 0;
	col->not_distinct_ok = OidIsValid(tc->eq_opr) &&
		func_parallel(get_opcode(tc->eq_opr)) == PROPARALLEL_SAFE &&
		!type_is_rowtype(att->atttypid);
	col->sortable = OidIsValid(tc->lt_opr);
}

/* A column registered for the dimension must still be in it. */
static Form_pg_attribute
require_dimension_column(TupleDesc desc, const char *name, const char *role,
						 const char *dim_name)
{
	Form_pg_attribute att = find_attribute(desc, name);

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("dimension %s has no column \"%s\"", dim_name, name),
				 errdetail("Column \"%s\" is registered as %s.", name, role),
				 errhint("Register the dimension again with scd2.register() after changing its columns.")));
	return att;
}

/*
 * The equality operator of a comparison type (the staging type) when a value
 * of the dimension's type can be cast back to it, so that a round trip
 * staging -> dimension -> staging shows whether the value was stored
 * unchanged; else NULL.
 */
static char *
round_trip_eqop(Oid srctype, Oid dsttype)
{
	TypeCacheEntry *tc = lookup_type_cache(srctype, TYPECACHE_EQ_OPR);

	if (!OidIsValid(tc->eq_opr) ||
		!can_coerce_type(1, &dsttype, &srctype, COERCION_EXPLICIT))
		return NULL;
	return scd2_operator_sql(tc->eq_opr);
}

/*
 * What converting a staging column to the dimension column's type can do.
 * The load stores CAST(staging AS dimension type): a value of another type
 * or typmod can fail to convert (out of range) or convert with loss
 * (varchar(n)/char(n) cut, numeric(p,s) or an integer type rounded), which
 * the load refuses before it writes (load/convert.c).  A collation alone changes no
 * value.
 */
static void
describe_conversion(Scd2Column *col, Form_pg_attribute att)
{
	char		category;
	bool		preferred;

	col->stg_type_sql = format_type_extended(att->atttypid, att->atttypmod,
											 FORMAT_TYPE_TYPEMOD_GIVEN |
											 FORMAT_TYPE_FORCE_QUALIFY);
	col->stg_type_name = format_type_with_typemod(att->atttypid, att->atttypmod);
	col->type_name = format_type_with_typemod(col->typid, col->typmod);
	get_type_category_preferred(col->typid, &category, &preferred);
	col->stg_category = category;
	/*
	 * The same type, or a binary-coercible one (varchar into text), into an
	 * unconstrained typmod cannot fail or lose.
	 */
	col->conv_check = !((att->atttypid == col->typid ||
						 IsBinaryCoercible(att->atttypid, col->typid)) &&
						(att->atttypmod == col->typmod || col->typmod < 0));
	/*
	 * A char(n) column compares as char: its trailing spaces do not count
	 * ('ab ' from a fixed-width extract fits char(2)).
	 */
	if (getBaseType(col->typid) == BPCHAROID)
		col->cmp_type_sql = "pg_catalog.bpchar";
	else
		col->cmp_type_sql = col->stg_type_sql;
	col->stg_eqop_sql = !col->conv_check ? NULL :
		round_trip_eqop(getBaseType(col->typid) == BPCHAROID ? BPCHAROID : att->atttypid, col->typid);
}

/*
 * A column the load reads from staging: it must exist there with a type
 * that can be assigned to the dimension column's type.
 */
static void
require_staging_column(TupleDesc stg, Scd2Column *col, const char *role,
					   const Scd2Config *cfg)
{
	Form_pg_attribute att = find_attribute(stg, col->name);
	Oid			srctype;

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", cfg->stg_name, col->name),
				 errdetail("Column \"%s\" is %s of dimension %s.", col->name, role, cfg->dim_name),
				 errhint("Add the column to the staging table, or register the dimension again without it.")));
	srctype = att->atttypid;
	if (srctype != col->typid &&
		!can_coerce_type(1, &srctype, (Oid *) &col->typid, COERCION_ASSIGNMENT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" has incompatible types in staging table %s and dimension %s",
						col->name, cfg->stg_name, cfg->dim_name),
				 errdetail("The staging column has type %s; the dimension column has type %s.",
						   format_type_be(srctype), format_type_be(col->typid)),
				 errhint("Cast the column in the staging table (or a view over it) to %s.",
						 format_type_be(col->typid))));
	/* no code of a role the dimension's owner does not trust (trust.c) */
	scd2_trust_staging_column(cfg->owner, cfg->stg_name, cfg->dim_name, col->name, srctype,
							  att->attcollation, col->typid, col->collid);
	col->stg_exact = srctype == col->typid && att->atttypmod == col->typmod &&
		att->attcollation == col->collid;
	describe_conversion(col, att);
}

static Scd2Column *
describe_list(List *names, TupleDesc dim, const char *role, const char *dim_name,
			  int *n)
{
	Scd2Column *cols = palloc0(sizeof(Scd2Column) * Max(list_length(names), 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, names)
		describe_column(&cols[i++],
						require_dimension_column(dim, (char *) lfirst(lc), role, dim_name));
	*n = i;
	return cols;
}

/*
 * The bookkeeping columns (validity, is_current, surrogate key) and the
 * load's conventions; returns the names no payload column may have.
 */
static List *
resolve_bookkeeping(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc dim)
{
	List	   *excluded;

	describe_column(&cfg->vf, require_dimension_column(dim, reg->valid_from, "valid_from_column", cfg->dim_name));
	describe_column(&cfg->vt, require_dimension_column(dim, reg->valid_to, "valid_to_column", cfg->dim_name));
	excluded = list_make2(reg->valid_from, reg->valid_to);
	if (reg->is_current)
	{
		require_dimension_column(dim, reg->is_current, "is_current_column", cfg->dim_name);
		cfg->is_current = pstrdup(quote_identifier(reg->is_current));
		excluded = lappend(excluded, reg->is_current);
	}
	if (reg->surrogate_key)
	{
		require_dimension_column(dim, reg->surrogate_key, "surrogate_key_column", cfg->dim_name);
		cfg->sk = pstrdup(quote_identifier(reg->surrogate_key));
		excluded = lappend(excluded, reg->surrogate_key);
	}
	if (reg->inferred_column)
	{
		/* the flag of inferred members (load/infer.c, load/complete.c) */
		require_dimension_column(dim, reg->inferred_column, "inferred_column", cfg->dim_name);
		cfg->inferred = pstrdup(quote_identifier(reg->inferred_column));
		excluded = lappend(excluded, reg->inferred_column);
	}
	/* 'null', or the canonical text of the current rows' valid_to */
	cfg->infinity = strcmp(reg->current_valid_to, "null") != 0;
	if (cfg->infinity)
		cfg->current_vt = psprintf("CAST(%s AS %s)", quote_literal_cstr(reg->current_valid_to),
								   cfg->vt.type_sql);
	cfg->snapshot = strcmp(reg->mode, "snapshot") == 0;
	cfg->detect_timestamp = strcmp(reg->detect, "timestamp") == 0;
	cfg->max_close_fraction = reg->max_close_fraction;
	cfg->order_free = reg->order_free;
	cfg->has_not_distinct = scd2_installed_function("_not_distinct", ANYOID);
	cfg->has_repeats = scd2_installed_function("_repeats", ANYELEMENTOID);

	return excluded;
}

/* Business key: must be comparable with = and indexable. */
static void
resolve_keys(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc dim, TupleDesc stg)
{
	cfg->keys = describe_list(reg->business_key, dim, "a business key column", cfg->dim_name, &cfg->nkeys);
	for (int i = 0; i < cfg->nkeys; i++)
	{
		if (cfg->keys[i].eqop_sql == NULL || !cfg->keys[i].sortable)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("business key column \"%s\" of %s has type %s, which has no btree operator class",
							cfg->keys[i].name, cfg->dim_name, format_type_be(cfg->keys[i].typid)),
					 errhint("Use a business key of a type that can be indexed with btree.")));
		require_staging_column(stg, &cfg->keys[i], "a business key column", cfg);
	}
}

/* The staging table's effective column: its type, and whether it converts exactly. */
static void
resolve_effective(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc stg)
{
	Form_pg_attribute att = find_attribute(stg, reg->effective_column);

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", cfg->stg_name, reg->effective_column),
				 errdetail("Column \"%s\" is the registered effective_column of dimension %s.",
						   reg->effective_column, cfg->dim_name),
				 errhint("Add the column to the staging table, or register the dimension again with another effective_column.")));
	resolve_time_column(cfg, att, reg->effective_column);
}

/*
 * A staging column of instants that become valid_from (att, named name):
 * its type, and whether it converts exactly (checked before anything is
 * written: load/convert.c, load/infer.c).
 */
static void
resolve_time_column(Scd2Config *cfg, Form_pg_attribute att, const char *name)
{
	Oid			srctype;

	srctype = att->atttypid;
	if (srctype != cfg->vf.typid &&
		!can_coerce_type(1, &srctype, &cfg->vf.typid, COERCION_ASSIGNMENT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("effective column \"%s\" of staging table %s has type %s, which cannot be assigned to %s",
						name, cfg->stg_name, format_type_be(srctype),
						format_type_be(cfg->vf.typid)),
				 errhint("Give the effective column the type of the dimension's valid_from column.")));
	scd2_trust_staging_column(cfg->owner, cfg->stg_name, cfg->dim_name, name,
							  srctype, att->attcollation, cfg->vf.typid, cfg->vf.collid);
	cfg->eff_col = pstrdup(quote_identifier(name));
	cfg->eff_name = pstrdup(name);
	/* converted exactly, or checked before the load (load/convert.c) */
	if (srctype != cfg->vf.typid ||
		(att->atttypmod != cfg->vf.typmod && cfg->vf.typmod >= 0))
	{
		cfg->eff_type_sql = format_type_extended(srctype, att->atttypmod,
												 FORMAT_TYPE_TYPEMOD_GIVEN |
												 FORMAT_TYPE_FORCE_QUALIFY);
		cfg->eff_eqop_sql = round_trip_eqop(srctype, cfg->vf.typid);
		cfg->eff_cmp_type_sql = cfg->eff_type_sql;
		cfg->eff_type_name = format_type_with_typemod(srctype, att->atttypmod);
		cfg->vf_type_name = format_type_with_typemod(cfg->vf.typid, cfg->vf.typmod);
	}
}

/* The staging table's delete marker: a boolean column. */
static void
resolve_delete(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc stg)
{
	Form_pg_attribute att = find_attribute(stg, reg->delete_column);

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", cfg->stg_name, reg->delete_column),
				 errdetail("Column \"%s\" is the registered delete_column of dimension %s.",
						   reg->delete_column, cfg->dim_name),
				 errhint("Add a boolean column to the staging table, or register the dimension again without delete_column.")));
	if (att->atttypid != BOOLOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("delete column \"%s\" of staging table %s has type %s, not boolean",
						reg->delete_column, cfg->stg_name, format_type_be(att->atttypid)),
				 errhint("Make the delete marker a boolean column: true deletes the key.")));
	cfg->del_col = pstrdup(quote_identifier(reg->delete_column));
}

/*
 * The staging table's sequence column (register's sequence_column): any
 * type with a default btree ordering, read as it is (it is compared, never
 * stored: a dimension column of that name is copied, not tracked).
 */
static void
resolve_sequence(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc stg)
{
	Form_pg_attribute att = find_attribute(stg, reg->sequence_column);

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", cfg->stg_name, reg->sequence_column),
				 errdetail("Column \"%s\" is the registered sequence_column of dimension %s.",
						   reg->sequence_column, cfg->dim_name),
				 errhint("Add the column that orders the events (an LSN, an offset) to the staging table, or register the dimension again without sequence_column.")));
	if (!OidIsValid(GetDefaultOpClass(att->atttypid, BTREE_AM_OID)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("sequence column \"%s\" of staging table %s has type %s, which has no btree ordering",
						reg->sequence_column, cfg->stg_name, format_type_be(att->atttypid)),
				 errhint("Give the sequence a type that sorts (bigint, numeric, pg_lsn, text, a timestamp).")));
	/* its comparisons and text forms run as the dimension's owner: trusted code only */
	scd2_trust_staging_column(cfg->owner, cfg->stg_name, cfg->dim_name, reg->sequence_column,
							  att->atttypid, att->attcollation, att->atttypid, att->attcollation);
	cfg->seq_col = pstrdup(quote_identifier(reg->sequence_column));
	cfg->seq_name = reg->sequence_column;
	cfg->seq_type_sql = format_type_extended(att->atttypid, att->atttypmod,
											 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
}

/*
 * The columns whose NULL means "unchanged", and whether the load is a
 * stream's (load/arrival.c): an order-free load with a sequence, partial
 * updates or Type 1 columns.
 */
static void
resolve_stream(Scd2Config *cfg, const Scd2Registration *reg)
{
	Scd2Column *groups[3] = {cfg->tracked, cfg->type1, cfg->other};
	int			counts[3] = {cfg->ntracked, cfg->ntype1, cfg->nother};
	bool		partial = false;

	for (int g = 0; g < 3; g++)
		for (int i = 0; i < counts[g]; i++)
			if (name_in_list(reg->ignore_null_updates, groups[g][i].name))
				partial = groups[g][i].ignore_null = true;
	cfg->stream = partial;
	scd2_config_set_stream(cfg);
}

/*
 * Whether an order-free load is a stream's: a sequence, partial updates
 * (set by resolve_stream) or Type 1 columns -- those of the registration,
 * or the columns the load adds to the dimension, its Type 1 columns
 * (load/schema.c calls this again once it has made them).
 */
void
scd2_config_set_stream(Scd2Config *cfg)
{
	cfg->stream = cfg->order_free && (cfg->stream || cfg->seq_col != NULL || cfg->ntype1 > 0);
}

/*
 * A dimension column a load can leave out of a new version: its default,
 * identity or generation expression fills it.
 */
static bool
filled_by_default(Form_pg_attribute att)
{
	return att->atthasdef || att->attidentity || att->attgenerated;
}

/* The names of a list, without those of another. */
static List *
names_without(List *names, List *drop)
{
	List	   *out = NIL;
	ListCell   *lc;

	foreach(lc, names)
		if (!name_in_list(drop, (char *) lfirst(lc)))
			out = lappend(out, lfirst(lc));
	return out;
}

/* The names of a list the staging table lacks. */
static List *
names_missing_from(List *names, TupleDesc stg)
{
	List	   *out = NIL;
	ListCell   *lc;

	foreach(lc, names)
		if (find_attribute(stg, (char *) lfirst(lc)) == NULL)
			out = lappend(out, lfirst(lc));
	return out;
}

/*
 * A staging table that lacks a column of the dimension (missing_columns =
 * 'error'): a new version would have it NULL where the current version
 * has a value -- an attribute erased without a word.  Refused, naming the
 * columns.
 */
static void
refuse_missing_columns(const Scd2Config *cfg, List *missing)
{
	StringInfoData names;
	ListCell   *lc;

	initStringInfo(&names);
	foreach(lc, missing)
		appendStringInfo(&names, "%s\"%s\"", names.len ? ", " : "", (char *) lfirst(lc));
	ereport(ERROR,
			(errcode(ERRCODE_UNDEFINED_COLUMN),
			 errmsg("staging table %s lacks %s %s of dimension %s", cfg->stg_name,
					list_length(missing) == 1 ? "column" : "columns", names.data, cfg->dim_name),
			 errdetail("Every new version would have %s NULL instead of the current version's value. Nothing was loaded.",
					   names.data),
			 errhint("Add the columns to the staging table (or a view over it), or register the dimension with missing_columns => 'carry_forward' to keep the current version's values for a partial extract.")));
}

/*
 * The payload: Type 1 columns as registered; tracked columns as
 * registered, or every column the staging table shares with the dimension
 * that is not a key, bookkeeping or Type 1 column; the remaining shared
 * columns are copied into new versions.  A dimension column the staging
 * table lacks (and no default fills) refuses the load, or with
 * missing_columns = 'carry_forward' is carried: copied into new versions
 * from the current version (a registered tracked or Type 1 column too,
 * which is then neither compared nor overwritten).
 */
static void
resolve_payload(Scd2Config *cfg, const Scd2Registration *reg, TupleDesc dim, TupleDesc stg,
				List *excluded)
{
	List	   *tracked;
	List	   *other = NIL;
	List	   *missing = NIL;
	List	   *type1 = reg->type1;
	List	   *tracked_listed = reg->tracked;
	int			nstaged;

	if (reg->carry_forward)
	{
		missing = list_concat(names_missing_from(type1, stg), names_missing_from(tracked_listed, stg));
		type1 = names_without(type1, missing);
		tracked_listed = names_without(tracked_listed, missing);
	}

	/* Type 1 columns. */
	cfg->type1 = describe_list(type1, dim, "a Type 1 column", cfg->dim_name, &cfg->ntype1);
	for (int i = 0; i < cfg->ntype1; i++)
		require_staging_column(stg, &cfg->type1[i], "a Type 1 column", cfg);
	excluded = list_concat(excluded, reg->type1);
	if (reg->delete_column)
		excluded = lappend(excluded, reg->delete_column);

	/*
	 * Tracked columns: as registered, or every column the staging table
	 * shares with the dimension that is not a key, bookkeeping or Type 1
	 * column.  The remaining shared columns are copied into new versions:
	 * among them a dimension column named like the effective column (dbt's
	 * updated_at), which is never tracked.
	 */
	tracked = reg->tracked_all ? NIL : tracked_listed;
	for (int i = 0; i < dim->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(dim, i);
		const char *name = NameStr(att->attname);

		if (att->attisdropped || att->attgenerated ||
			att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS ||
			name_in_list(excluded, name) || name_in_list(missing, name))
			continue;
		if (find_attribute(stg, name) == NULL)
		{
			/* (a registered tracked column: require_staging_column names it) */
			if (!filled_by_default(att) && !name_in_list(tracked_listed, name))
				missing = lappend(missing, pstrdup(name));
			continue;
		}
		if (reg->tracked_all &&
			!(reg->effective_column && strcmp(name, reg->effective_column) == 0) &&
			!(reg->sequence_column && strcmp(name, reg->sequence_column) == 0))
			tracked = lappend(tracked, pstrdup(name));
		else if (!name_in_list(tracked_listed, name))
			other = lappend(other, pstrdup(name));
	}
	if (tracked == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staging table %s shares no tracked column with dimension %s",
						cfg->stg_name, cfg->dim_name),
				 errdetail("A load needs at least one tracked column to detect changes."),
				 errhint("Give the staging table the dimension's attribute columns, with the same names.")));
	if (missing != NIL && !reg->carry_forward)
		refuse_missing_columns(cfg, missing);
	cfg->tracked = describe_list(tracked, dim, "a tracked column", cfg->dim_name, &cfg->ntracked);
	for (int i = 0; i < cfg->ntracked; i++)
		require_staging_column(stg, &cfg->tracked[i], "a tracked column", cfg);
	/* counted before list_concat, which extends other in place */
	nstaged = list_length(other);
	cfg->other = describe_list(list_concat(other, missing), dim, "a copied column", cfg->dim_name,
							   &cfg->nother);
	for (int i = 0; i < cfg->nother; i++)
		if (i < nstaged)
			require_staging_column(stg, &cfg->other[i], "a copied column", cfg);
		else
			cfg->other[i].carried = true;
}

/*
 * A staging table with a column named as the dimension's inferred_column:
 * the flag is the load's to set (a new version takes the column's default,
 * a completed inferred version false: load/complete.c), and a staged value
 * would be dropped without a word.  Refused, naming the column.
 */
static void
refuse_staged_flag(const Scd2Config *cfg, const char *name)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("staging table %s has column \"%s\", the inferred_column of dimension %s",
					cfg->stg_name, name, cfg->dim_name),
			 errdetail("Column \"%s\" flags the inferred members of %s; loads set it (a load that brings an inferred key's real values clears it), and never read it from staging. Nothing was loaded.",
					   name, cfg->dim_name),
			 errhint("Leave the column out of the staging table (or a view over it).")));
}

/*
 * The registration of a load of dimension dim_oid (display name dim_name)
 * from stg_oid, read once per load, with its registered shape checked; the
 * caller holds a lock on the dimension.
 */
Scd2Registration *
scd2_load_registration(Oid dim_oid, Oid stg_oid, const char *dim_name)
{
	Scd2Registration *reg = scd2_registry_read(dim_oid, dim_name);

	if (stg_oid == dim_oid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staging table cannot be the dimension itself"),
				 errdetail("Both arguments name %s.", dim_name),
				 errhint("Load the changes into a separate staging table and pass that as the first argument.")));
	if (reg->has_shape)
		scd2_check_registered_shape(dim_oid, dim_name, reg->shape_columns,
									reg->shape_types, reg->shape_typmods);
	return reg;
}

/*
 * Resolve a registered dimension (its registration from
 * scd2_load_registration) against a staging table for one load.  The
 * caller holds a lock on the dimension.
 */
Scd2Config *
scd2_load_config(Oid dim_oid, Oid stg_oid, const Scd2Registration *reg)
{
	Scd2Config *cfg = palloc0(sizeof(Scd2Config));
	Relation	dimrel;
	Relation	stgrel;
	TupleDesc	dim;
	TupleDesc	stg;
	List	   *excluded;

	cfg->reg = reg;
	cfg->dim_oid = dim_oid;
	cfg->stg_oid = stg_oid;
	cfg->dim_name = scd2_relation_display_name(dim_oid);
	cfg->stg_name = scd2_relation_display_name(stg_oid);
	/* the tables the load's SQL reads: these, or on Citus their images */
	cfg->dim_sql = cfg->dim_name;
	cfg->stg_sql = cfg->stg_name;
	cfg->owner = scd2_relation_owner(dim_oid);

	dimrel = table_open(dim_oid, AccessShareLock);
	stgrel = table_open(stg_oid, AccessShareLock);
	dim = RelationGetDescr(dimrel);
	stg = RelationGetDescr(stgrel);
	cfg->px = scd2_choose_internal_prefix(dim, stg);

	excluded = resolve_bookkeeping(cfg, reg, dim);
	if (reg->inferred_column && find_attribute(stg, reg->inferred_column) != NULL)
		refuse_staged_flag(cfg, reg->inferred_column);
	resolve_keys(cfg, reg, dim, stg);
	excluded = list_concat(excluded, reg->business_key);
	if (reg->effective_column)
		resolve_effective(cfg, reg, stg);
	if (reg->delete_column)
		resolve_delete(cfg, reg, stg);
	if (reg->sequence_column)
		resolve_sequence(cfg, reg, stg);
	resolve_payload(cfg, reg, dim, stg, excluded);
	resolve_stream(cfg, reg);

	table_close(stgrel, NoLock);
	table_close(dimrel, NoLock);
	return cfg;
}

/*
 * Resolve a registered dimension against a batch of facts for
 * scd2.infer_members (load/infer.c): the bookkeeping columns and the
 * inferred_column, the business key (in the batch under the same names,
 * each converting to the dimension's type), and the batch's time column
 * as the effective column (eff_col; its conversion to valid_from's type as
 * a load's).  No payload: the new versions' other columns take their
 * defaults.  The caller holds a lock on the dimension.
 */
Scd2Config *
scd2_infer_config(Oid dim_oid, Oid stg_oid, const Scd2Registration *reg, const char *time_column)
{
	Scd2Config *cfg = palloc0(sizeof(Scd2Config));
	Relation	dimrel;
	Relation	stgrel;
	Form_pg_attribute att;

	cfg->reg = reg;
	cfg->dim_oid = dim_oid;
	cfg->stg_oid = stg_oid;
	cfg->dim_name = scd2_relation_display_name(dim_oid);
	cfg->stg_name = scd2_relation_display_name(stg_oid);
	cfg->dim_sql = cfg->dim_name;
	cfg->stg_sql = cfg->stg_name;
	cfg->owner = scd2_relation_owner(dim_oid);

	dimrel = table_open(dim_oid, AccessShareLock);
	stgrel = table_open(stg_oid, AccessShareLock);
	cfg->px = scd2_choose_internal_prefix(RelationGetDescr(dimrel), RelationGetDescr(stgrel));
	(void) resolve_bookkeeping(cfg, reg, RelationGetDescr(dimrel));
	resolve_keys(cfg, reg, RelationGetDescr(dimrel), RelationGetDescr(stgrel));
	att = find_attribute(RelationGetDescr(stgrel), time_column);
	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staging table %s has no column \"%s\"", cfg->stg_name, time_column),
				 errdetail("Column \"%s\" is the time_column passed to scd2.infer_members: the instant of each fact.",
						   time_column),
				 errhint("Pass the name of the staging table's column that holds each fact's time.")));
	resolve_time_column(cfg, att, time_column);
	cfg->type1 = palloc0(sizeof(Scd2Column));
	cfg->tracked = palloc0(sizeof(Scd2Column));
	cfg->other = palloc0(sizeof(Scd2Column));
	table_close(stgrel, NoLock);
	table_close(dimrel, NoLock);
	return cfg;
}
