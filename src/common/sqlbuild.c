/*
 * sqlbuild.c -- the small builders every generated statement of a load is
 * made of: internal names, column lists, key joins, the staging rows.
 *
 * Every identifier comes from the catalogs and is quoted; every operator
 * is either pg_catalog's or named by its schema (OPERATOR(s.=)); values go
 * in as parameters ($1 is the load's effective_at).  The statements run
 * with search_path pinned to pg_catalog, pg_temp.
 */
#include "scd2.h"

#include "access/tupdesc.h"
#include "catalog/pg_type.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "common/common.h"

/*
 * Internal names.  Every column the generated SQL adds to a relation of its
 * own (the work tables, the normalised staging, the CTEs and subqueries)
 * is written in the templates (load_*.c, load/worktable.c) as "`_name" and
 * expands to the load's prefix followed by "_name" (cfg->px, "scd2"
 * unless a user column starts with "scd2_"; scd2_choose_internal_prefix
 * below picks one no column of the dimension or the staging table starts
 * with).  User columns keep their own names there, so
 * no legal column name can be ambiguous or duplicated.  Table aliases and
 * CTE names (s, s0, d, d2, h, c, c1, cls, v, x, m, mx, cs, km, rel, r, o,
 * k, e, kp, g, p, t, w) are only ever used as qualifiers, never as bare
 * names (a whole-row reference is written s.*), so a column of the same
 * name never takes their place; window names (w, l, wk) live in their own
 * namespace.  sql-tests/load_names.sql loads a dimension with a column
 * named after each of them and after each internal column's short name.
 */
char *
scd2_expand_names(const Scd2Config *cfg, const char *tmpl)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *c = tmpl; *c; c++)
		if (*c == '`')
			appendStringInfoString(&buf, cfg->px);
		else
			appendStringInfoChar(&buf, *c);
	return buf.data;
}

/* "p.c1, p.c2" (or "c1, c2" without prefix). */
void
scd2_append_cols(StringInfo buf, const Scd2Column *cols, int n, const char *prefix)
{
	for (int i = 0; i < n; i++)
		appendStringInfo(buf, "%s%s%s", i ? ", " : "",
						 prefix ? prefix : "", cols[i].ident);
}

/* ", p.c1, p.c2" -- the same with a leading separator when n > 0. */
void
scd2_append_more_cols(StringInfo buf, const Scd2Column *cols, int n, const char *prefix)
{
	if (n > 0)
	{
		appendStringInfoString(buf, ", ");
		scd2_append_cols(buf, cols, n, prefix);
	}
}

/* ", CAST(NULL AS type) AS c..." */
void
scd2_append_null_cols(StringInfo buf, const Scd2Column *cols, int n)
{
	for (int i = 0; i < n; i++)
		appendStringInfo(buf, ", CAST(NULL AS %s) AS %s", cols[i].type_sql, cols[i].ident);
}

/* ", c1 type1 COLLATE x, c2 ..." for CREATE TABLE. */
void
scd2_append_col_defs(StringInfo buf, const Scd2Column *cols, int n)
{
	for (int i = 0; i < n; i++)
		appendStringInfo(buf, ", %s %s%s", cols[i].ident, cols[i].type_sql,
						 cols[i].collate_sql);
}

/* NULL-safe equality of two expressions of one column's type. */
static void
append_eq(StringInfo buf, const Scd2Column *col, const char *a, const char *b)
{
	if (col->eqop_sql == NULL)
		/* no equality operator (json, xml, ...): compare the text forms */
		appendStringInfo(buf,
						 "(CAST(%s AS pg_catalog.text) IS NOT DISTINCT FROM CAST(%s AS pg_catalog.text))",
						 a, b);
	else
		appendStringInfo(buf,
						 "(CASE WHEN %s IS NULL OR %s IS NULL THEN %s IS NULL AND %s IS NULL"
						 " ELSE %s %s %s END)",
						 a, b, a, b, a, col->eqop_sql, b);
}


/* Whether scd2._not_distinct compares the column (see below). */
static bool
in_not_distinct(const Scd2Config *cfg, const Scd2Column *col)
{
	return cfg->has_not_distinct && col->eqop_sql != NULL && col->not_distinct_ok;
}

/*
 * AND of NULL-safe equalities a.c_i = b._<tag>i (positional partner).  The
 * columns whose equality is a parallel-safe function are compared in one
 * call of scd2._not_distinct (per 50 columns: a call takes FUNC_MAX_ARGS) (not_distinct.c: the same result as
 * append_eq's CASE, at a fraction of its cost per row); the others (no
 * equality operator, one PostgreSQL may not run in a worker, or a row
 * type, whose IS NULL is true of a row of NULL fields) each by
 * append_eq, as are all of them while the installed objects predate 0.4.
 */
void
scd2_append_eq_positional(StringInfo buf, const Scd2Config *cfg, const Scd2Column *cols, int n,
						  const char *aprefix, const char *bprefix, const char *tag)
{
	bool		first = true;
	int			pairs = 0;		/* in the call being written */

	for (int i = 0; i < n; i++)
	{
		if (!in_not_distinct(cfg, &cols[i]))
			continue;
		if (pairs == FUNC_MAX_ARGS / 2)
		{
			appendStringInfoString(buf, ") AND ");
			pairs = 0;
		}
		appendStringInfoString(buf, pairs == 0 ? "scd2._not_distinct(" : ", ");
		appendStringInfo(buf, "%s%s, %s%s_%s%d", aprefix, cols[i].ident, bprefix, cfg->px, tag, i + 1);
		pairs++;
		first = false;
	}
	if (!first)
		appendStringInfoChar(buf, ')');
	for (int i = 0; i < n; i++)
	{
		if (in_not_distinct(cfg, &cols[i]))
			continue;
		if (!first)
			appendStringInfoString(buf, " AND ");
		append_eq(buf, &cols[i], psprintf("%s%s", aprefix, cols[i].ident),
				  psprintf("%s%s_%s%d", bprefix, cfg->px, tag, i + 1));
		first = false;
	}
	if (first)
		appendStringInfoString(buf, "true");
}

/*
 * Whether equal values of the type (by its default equality) are the same
 * value, with the same text form: then that equality tells two values
 * apart as well as their text forms do.  Not so for numeric (1.0 = 1.00),
 * floats (0 = -0), interval ('1 day' = '24 hours'), text under a
 * nondeterministic collation, and any type scd2 does not know.
 */
static bool
equality_is_identity(const Scd2Column *col)
{
	switch (col->typid)
	{
		case TEXTOID:
		case VARCHAROID:
			/* texteq: the same bytes, under a deterministic collation */
			return col->builtin_eq && OidIsValid(col->collid) &&
				get_collation_isdeterministic(col->collid);
		case BOOLOID:
		case CHAROID:
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case DATEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case UUIDOID:
			return col->builtin_eq;
		default:
			return false;
	}
}

/*
 * " AND" NULL-safe identities a.c_i = b._<tag>i (positional partner), but
 * for column skip: equal values for a type whose equality is identity
 * (none of those when known_equal: the caller has compared them by
 * equality already), else equal text forms compared byte by byte -- what
 * the arrival memory would keep of each as the text of its state
 * (load/classify.c's observations).
 */
void
scd2_append_identical_positional(StringInfo buf, const Scd2Config *cfg, const Scd2Column *cols,
								 int n, const char *aprefix, const char *bprefix, const char *tag,
								 int skip, bool known_equal)
{
	for (int i = 0; i < n; i++)
	{
		char	   *a = psprintf("%s%s", aprefix, cols[i].ident);
		char	   *b = psprintf("%s%s_%s%d", bprefix, cfg->px, tag, i + 1);
		bool		identity = equality_is_identity(&cols[i]);

		if (i == skip || (identity && known_equal))
			continue;
		appendStringInfoString(buf, " AND ");
		if (identity)
			append_eq(buf, &cols[i], a, b);
		else
			appendStringInfo(buf,
							 "(CASE WHEN %s IS NULL OR %s IS NULL THEN %s IS NULL AND %s IS NULL"
							 " ELSE CAST(%s AS pg_catalog.text) COLLATE pg_catalog.\"C\""
							 " OPERATOR(pg_catalog.=) CAST(%s AS pg_catalog.text) COLLATE pg_catalog.\"C\" END)",
							 a, b, a, b, a, b);
	}
}

/*
 * The other column that keeps the effective time itself (a dimension that
 * stores its staging's effective column, as dbt's updated_at): its index
 * in cfg->other, or -1.  Only of the validity's own type, so that its
 * value is the instant of the row.
 */
int
scd2_instant_column(const Scd2Config *cfg)
{
	if (cfg->eff_col == NULL)
		return -1;
	for (int i = 0; i < cfg->nother; i++)
		if (strcmp(cfg->other[i].ident, cfg->eff_col) == 0 && cfg->other[i].typid == cfg->vf.typid &&
			!cfg->other[i].carried)
			return i;
	return -1;
}

/* Business-key equality a.k = b.k (keys are never NULL). */
void
scd2_append_key_join(StringInfo buf, const Scd2Config *cfg, const char *a, const char *b)
{
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(buf, "%s%s.%s %s %s.%s", i ? " AND " : "",
						 a, cfg->keys[i].ident, cfg->keys[i].eqop_sql,
						 b, cfg->keys[i].ident);
}

/* The predicate "alias is the current version". */
char *
scd2_current_pred(const Scd2Config *cfg, const char *alias)
{
	if (cfg->infinity)
		return psprintf("%s.%s OPERATOR(pg_catalog.=) %s",
						alias, cfg->vt.ident, cfg->current_vt);
	return psprintf("%s.%s IS NULL", alias, cfg->vt.ident);
}

/* valid_to of an existing row, with the current convention mapped to NULL. */
char *
scd2_open_vt(const Scd2Config *cfg, const char *alias)
{
	if (cfg->infinity)
		return psprintf("NULLIF(%s.%s, %s)",
						alias, cfg->vt.ident, cfg->current_vt);
	return psprintf("%s.%s", alias, cfg->vt.ident);
}

/* The stored valid_to for a logical end (NULL = open). */
char *
scd2_stored_vt(const Scd2Config *cfg, const char *expr)
{
	if (cfg->infinity)
		return psprintf("COALESCE(%s, %s)", expr, cfg->current_vt);
	return pstrdup(expr);
}

/*
 * A column the staging table lacks, carried forward (missing_columns =
 * 'carry_forward'): the value of the key's current version, NULL for a
 * new key.
 */
static void
append_carried(StringInfo buf, const Scd2Config *cfg, const Scd2Column *col)
{
	appendStringInfo(buf, "(SELECT d.%s FROM %s d WHERE ", col->ident, cfg->dim_sql);
	for (int i = 0; i < cfg->nkeys; i++)
		if (cfg->keys[i].stg_exact)
			appendStringInfo(buf, "d.%s %s s.%s AND ", cfg->keys[i].ident, cfg->keys[i].eqop_sql,
							 cfg->keys[i].ident);
		else
			appendStringInfo(buf, "d.%s %s CAST(s.%s AS %s) AND ", cfg->keys[i].ident, cfg->keys[i].eqop_sql,
							 cfg->keys[i].ident, cfg->keys[i].type_sql);
	appendStringInfo(buf, "%s) AS %s, ", scd2_current_pred(cfg, "d"), col->ident);
}

/*
 * The staging table normalised: columns cast to the dimension's types,
 * the effective time as _t, the delete marker folded into _present.
 */
void
scd2_append_all_staging(StringInfo buf, const Scd2Config *cfg)
{
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};

	appendStringInfoString(buf, "(SELECT ");
	/* a column already of the exact type is read as is (no per-row cast) */
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
			if (groups[g][i].carried)
				append_carried(buf, cfg, &groups[g][i]);
			else if (groups[g][i].stg_exact)
				appendStringInfo(buf, "s.%s, ", groups[g][i].ident);
			else
				appendStringInfo(buf, "CAST(s.%s AS %s)%s AS %s, ",
								 groups[g][i].ident, groups[g][i].type_sql,
								 groups[g][i].collate_sql, groups[g][i].ident);
	if (cfg->eff_col)
		appendStringInfo(buf, X("CAST(s.%s AS %s) AS `_t, "), cfg->eff_col, cfg->vf.type_sql);
	else
		appendStringInfo(buf, X("CAST($1 AS %s) AS `_t, "), cfg->vf.type_sql);
	if (cfg->del_col)
		appendStringInfo(buf, X("NOT COALESCE(s.%s, false) AS `_present"), cfg->del_col);
	else
		appendStringInfoString(buf, X("true AS `_present"));
	/* a change stream's order at one instant (load/arrival.c) */
	if (cfg->seq_col)
		appendStringInfo(buf, X(", s.%s AS `_q"), cfg->seq_col);
	appendStringInfo(buf, " FROM %s s)", cfg->stg_sql);
}

/*
 * The staging rows a load classifies: all of them, or with timestamp
 * detection (dbt's timestamp strategy) only the rows later than the key's
 * history -- after the start of its latest version and not before that
 * version's end -- the others are ignored (counted as unchanged).
 */
void
scd2_append_normalized_staging(StringInfo buf, const Scd2Config *cfg)
{
	if (!cfg->detect_timestamp)
	{
		scd2_append_all_staging(buf, cfg);
		return;
	}
	appendStringInfoString(buf, "(SELECT * FROM ");
	scd2_append_all_staging(buf, cfg);
	appendStringInfo(buf, X(" s WHERE NOT EXISTS (SELECT 1 FROM (SELECT h.%s AS `_hvf, %s AS `_hvt FROM %s h WHERE "),
					 cfg->vf.ident, scd2_open_vt(cfg, "h"), cfg->dim_sql);
	scd2_append_key_join(buf, cfg, "h", "s");
	appendStringInfo(buf, X(" ORDER BY h.%s DESC LIMIT 1) l WHERE l.`_hvf >= s.`_t OR l.`_hvt > s.`_t))"),
					 cfg->vf.ident);
}

/* All loaded non-key columns: tracked, Type 1, other. */
void
scd2_append_payload_cols(StringInfo buf, const Scd2Config *cfg, const char *prefix)
{
	scd2_append_more_cols(buf, cfg->tracked, cfg->ntracked, prefix);
	scd2_append_more_cols(buf, cfg->type1, cfg->ntype1, prefix);
	scd2_append_more_cols(buf, cfg->other, cfg->nother, prefix);
}

/* "PARTITION BY k1, k2" */
char *
scd2_partition_by_keys(const Scd2Config *cfg)
{
	return scd2_partition_by(cfg, NULL);
}

/* "PARTITION BY alias.k1, alias.k2" (alias NULL: none) */
char *
scd2_partition_by(const Scd2Config *cfg, const char *alias)
{
	StringInfoData part;

	initStringInfo(&part);
	appendStringInfoString(&part, "PARTITION BY ");
	scd2_append_cols(&part, cfg->keys, cfg->nkeys, alias ? psprintf("%s.", alias) : NULL);
	return part.data;
}

/*
 * How many leading key columns sort cheaply: no collation, so a sort
 * compares Datums with the type's own comparator rather than the locale's
 * (PostgreSQL 15 does not abbreviate text under libc locales, and sorting
 * 200k text keys with strcoll costs more than it saves).  An (int, text)
 * key sorted by its int alone is nearly in index order, without strcoll.
 */
int
scd2_keys_cheap_prefix(const Scd2Config *cfg)
{
	int			n = 0;

	while (n < cfg->nkeys && cfg->keys[n].sortable && !OidIsValid(cfg->keys[n].collid))
		n++;
	return n;
}

/*
 * What an update copy (alias s) writes into its target row (alias t):
 * "[valid_from = ..., ]valid_to = ..., is_current = ..., type1 = ..." --
 * the MERGE's UPDATE (load/write.c) and the closes of the write step on
 * Citus (load/citus_load.c).  An order-free load (load/arrival.c) may move a
 * version's valid_from earlier ('extend'): its updates set it too (the
 * target is still matched on its old valid_from, `_tvf).
 */
void
scd2_append_update_set(StringInfo buf, const Scd2Config *cfg, bool moves)
{
	if (moves)
		appendStringInfo(buf, X("%s = s.`_vf, "), cfg->vf.ident);
	appendStringInfo(buf, "%s = %s", cfg->vt.ident, scd2_stored_vt(cfg, X("s.`_vt")));
	if (cfg->is_current)
		appendStringInfo(buf, X(", %s = s.`_cur"), cfg->is_current);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(buf, X(", %s = CASE WHEN s.`_set_y THEN s.%s ELSE t.%s END"),
						 cfg->type1[i].ident, cfg->type1[i].ident, cfg->type1[i].ident);
}

/*
 * "(keys, payload, valid_from, valid_to[, is_current])": what an insert
 * writes (load/write.c's MERGE, load/citus_load.c's inserts).
 */
void
scd2_append_insert_cols(StringInfo buf, const Scd2Config *cfg, Oid sk_seq)
{
	appendStringInfoString(buf, "(");
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, NULL);
	scd2_append_payload_cols(buf, cfg, NULL);
	appendStringInfo(buf, ", %s, %s", cfg->vf.ident, cfg->vt.ident);
	if (cfg->is_current)
		appendStringInfo(buf, ", %s", cfg->is_current);
	if (OidIsValid(sk_seq))
		appendStringInfo(buf, ", %s) OVERRIDING SYSTEM VALUE", cfg->sk);
	else
		appendStringInfoString(buf, ")");
}

/* The values of those columns from an insert copy (alias s). */
void
scd2_append_insert_values(StringInfo buf, const Scd2Config *cfg, Oid sk_seq)
{
	scd2_append_cols(buf, cfg->keys, cfg->nkeys, "s.");
	scd2_append_payload_cols(buf, cfg, "s.");
	appendStringInfo(buf, X(", s.`_vf, %s"), scd2_stored_vt(cfg, X("s.`_vt")));
	if (cfg->is_current)
		appendStringInfoString(buf, X(", s.`_cur"));
	if (OidIsValid(sk_seq))
		appendStringInfo(buf, X(", COALESCE(s.`_sk, pg_catalog.nextval(CAST(%u AS pg_catalog.regclass)))"), sk_seq);
}

/*
 * jsonb_build_object('k1', a.k1, ...): the business key of the row under
 * alias as JSON, the one builder of it (the change feed, the change log,
 * the timeline's and the conversions' error details).
 */
char *
scd2_key_json_sql(const Scd2Config *cfg, const char *alias)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "pg_catalog.jsonb_build_object(");
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&buf, "%s%s, %s.%s", i ? ", " : "",
						 quote_literal_cstr(cfg->keys[i].name), alias, cfg->keys[i].ident);
	appendStringInfoString(&buf, ")");
	return buf.data;
}

/* The staging key (alias s) as JSON text, for error details. */
char *
scd2_staging_key_json(const Scd2Config *cfg)
{
	return psprintf("CAST(%s AS pg_catalog.text)", scd2_key_json_sql(cfg, "s"));
}

/* Whether some column of the relation starts with prefix. */
static bool
has_column_prefixed(TupleDesc desc, const char *prefix)
{
	size_t		len = strlen(prefix);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strncmp(NameStr(att->attname), prefix, len) == 0)
			return true;
	}
	return false;
}

/*
 * The prefix of the generated SQL's internal column names :
 * "scd2", or "scd2_2", "scd2_3", ... when a column of the dimension or the
 * staging table starts with that prefix and "_" -- so an internal name
 * never equals a user column's, whatever the user named them.
 */
char *
scd2_choose_internal_prefix(TupleDesc dim, TupleDesc stg)
{
	char	   *px = "scd2";

	for (int n = 2;; n++)
	{
		char	   *probe = psprintf("%s_", px);

		if (!has_column_prefixed(dim, probe) && !has_column_prefixed(stg, probe))
			return px;
		px = psprintf("scd2_%d", n);
	}
}
