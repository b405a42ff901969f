/*
 * sqlgen.c -- the SQL statements of one load, generated from a resolved
 * configuration.
 *
 * Every identifier comes from the catalogs and is quoted; every operator
 * is either pg_catalog's or named by its schema (OPERATOR(s.=)); values go
 * in as parameters ($1 is the load's effective_at).  The statements run
 * with search_path pinned to pg_catalog, pg_temp.
 *
 * The load works on four temporary tables (names passed in):
 *   keys  -- the "complex" keys: several staging rows, a late row, or a
 *            row at the very instant an existing version starts;
 *   pts   -- for complex keys: the points of their timeline (existing
 *            versions, gap starts, staged rows), see docs/SEMANTICS.md;
 *   win   -- pts with the window results (kept, run, last Type 1 values);
 *   chg   -- the change set: one row per dimension row to write.  The one
 *            MERGE reads it: an update copy carries the target row's
 *            identity (key + valid_from), an insert copy a NULL identity.
 *
 * Columns of the temporary tables that are not user columns carry the
 * load's internal prefix (scd2_t, scd2_cls, ...; see "Internal names"
 * below); user columns of the dimension are copied by name, and the
 * per-column helper values (previous value, last Type 1 value) are named
 * by position (scd2_p1, scd2_l1, ...) so no generated name can collide or
 * exceed NAMEDATALEN.
 */
#include "scd2.h"

#include "utils/builtins.h"

/* ---------- internal names ---------- */

/*
 * Internal names.  Every column the generated SQL adds to a relation of its
 * own (the work tables, the normalised staging, the CTEs and subqueries)
 * is written in the templates below as "`_name" and expands to the load's
 * prefix followed by "_name" (cfg->px, "scd2" unless a user column starts
 * with "scd2_"; config.c picks one no column of the dimension or the
 * staging table starts with).  User columns keep their own names there, so
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

static char *staging_key_json(const Scd2Config *cfg);

/* A template with internal names, expanded for this load's cfg. */
#define X(tmpl) scd2_expand_names(cfg, tmpl)

/* ---------- small builders ---------- */

/* "p.c1, p.c2" (or "c1, c2" without prefix). */
static void
append_cols(StringInfo buf, const Scd2Column *cols, int n, const char *prefix)
{
	for (int i = 0; i < n; i++)
		appendStringInfo(buf, "%s%s%s", i ? ", " : "",
						 prefix ? prefix : "", cols[i].ident);
}

/* ", p.c1, p.c2" -- the same with a leading separator when n > 0. */
static void
append_more_cols(StringInfo buf, const Scd2Column *cols, int n, const char *prefix)
{
	if (n > 0)
	{
		appendStringInfoString(buf, ", ");
		append_cols(buf, cols, n, prefix);
	}
}

/* ", CAST(NULL AS type) AS c..." */
static void
append_null_cols(StringInfo buf, const Scd2Column *cols, int n)
{
	for (int i = 0; i < n; i++)
		appendStringInfo(buf, ", CAST(NULL AS %s) AS %s", cols[i].type_sql, cols[i].ident);
}

/* ", c1 type1 COLLATE x, c2 ..." for CREATE TABLE. */
static void
append_col_defs(StringInfo buf, const Scd2Column *cols, int n)
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


/* AND of NULL-safe equalities a.c_i = b._<tag>i (positional partner). */
static void
append_eq_positional(StringInfo buf, const Scd2Config *cfg, const Scd2Column *cols, int n,
					 const char *aprefix, const char *bprefix, const char *tag)
{
	if (n == 0)
		appendStringInfoString(buf, "true");
	for (int i = 0; i < n; i++)
	{
		if (i)
			appendStringInfoString(buf, " AND ");
		append_eq(buf, &cols[i], psprintf("%s%s", aprefix, cols[i].ident),
				  psprintf("%s%s_%s%d", bprefix, cfg->px, tag, i + 1));
	}
}

/* Business-key equality a.k = b.k (keys are never NULL). */
static void
append_key_join(StringInfo buf, const Scd2Config *cfg, const char *a, const char *b)
{
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(buf, "%s%s.%s %s %s.%s", i ? " AND " : "",
						 a, cfg->keys[i].ident, cfg->keys[i].eqop_sql,
						 b, cfg->keys[i].ident);
}

/* The predicate "alias is the current version". */
static char *
current_pred(const Scd2Config *cfg, const char *alias)
{
	if (cfg->infinity)
		return psprintf("%s.%s OPERATOR(pg_catalog.=) %s",
						alias, cfg->vt.ident, cfg->current_vt);
	return psprintf("%s.%s IS NULL", alias, cfg->vt.ident);
}

/* valid_to of an existing row, with the current convention mapped to NULL. */
static char *
open_vt(const Scd2Config *cfg, const char *alias)
{
	if (cfg->infinity)
		return psprintf("NULLIF(%s.%s, %s)",
						alias, cfg->vt.ident, cfg->current_vt);
	return psprintf("%s.%s", alias, cfg->vt.ident);
}

/* The stored valid_to for a logical end (NULL = open). */
static char *
stored_vt(const Scd2Config *cfg, const char *expr)
{
	if (cfg->infinity)
		return psprintf("COALESCE(%s, %s)", expr, cfg->current_vt);
	return pstrdup(expr);
}

/*
 * The staging table normalised: columns cast to the dimension's types,
 * the effective time as _t, the delete marker folded into _present.
 */
static void
append_all_staging(StringInfo buf, const Scd2Config *cfg)
{
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};

	appendStringInfoString(buf, "(SELECT ");
	/* a column already of the exact type is read as is (no per-row cast) */
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
			if (groups[g][i].stg_exact)
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
	appendStringInfo(buf, " FROM %s s)", cfg->stg_sql);
}

/*
 * The staging rows a load classifies: all of them, or with timestamp
 * detection (dbt's timestamp strategy) only the rows later than the key's
 * history -- after the start of its latest version and not before that
 * version's end -- the others are ignored (counted as unchanged).
 */
static void
append_normalized_staging(StringInfo buf, const Scd2Config *cfg)
{
	if (!cfg->detect_timestamp)
	{
		append_all_staging(buf, cfg);
		return;
	}
	appendStringInfoString(buf, "(SELECT * FROM ");
	append_all_staging(buf, cfg);
	appendStringInfo(buf, X(" s WHERE NOT EXISTS (SELECT 1 FROM (SELECT h.%s AS `_hvf, %s AS `_hvt FROM %s h WHERE "),
					 cfg->vf.ident, open_vt(cfg, "h"), cfg->dim_sql);
	append_key_join(buf, cfg, "h", "s");
	appendStringInfo(buf, X(" ORDER BY h.%s DESC LIMIT 1) l WHERE l.`_hvf >= s.`_t OR l.`_hvt > s.`_t))"),
					 cfg->vf.ident);
}

/* All loaded non-key columns: tracked, Type 1, other. */
static void
append_payload_cols(StringInfo buf, const Scd2Config *cfg, const char *prefix)
{
	append_more_cols(buf, cfg->tracked, cfg->ntracked, prefix);
	append_more_cols(buf, cfg->type1, cfg->ntype1, prefix);
	append_more_cols(buf, cfg->other, cfg->nother, prefix);
}

/*
 * "INSERT INTO chg (_action, ..., keys[, payload]" -- the column list of
 * the change table; the caller closes the parenthesis.
 */
static void
append_changes_insert(StringInfo buf, const Scd2Config *cfg, const char *chg,
					  bool payload)
{
	appendStringInfo(buf,
					 X("INSERT INTO %s (`_action, `_origin, `_counts, `_tvf, `_sk, `_vf, `_vt, `_cur, `_set_y"),
					 chg);
	append_more_cols(buf, cfg->keys, cfg->nkeys, NULL);
	if (payload)
		append_payload_cols(buf, cfg, NULL);
}

/* "PARTITION BY k1, k2" */
static char *
partition_by_keys(const Scd2Config *cfg)
{
	StringInfoData part;

	initStringInfo(&part);
	appendStringInfoString(&part, "PARTITION BY ");
	append_cols(&part, cfg->keys, cfg->nkeys, NULL);
	return part.data;
}

/*
 * Whether the business key sorts cheaply: no key column is collatable, so
 * a sort compares Datums with the type's own comparator rather than the
 * locale's (PostgreSQL 15 does not abbreviate text under libc locales, and
 * sorting 200k text keys with strcoll costs more than it saves).
 */
static bool
keys_sort_cheaply(const Scd2Config *cfg)
{
	for (int i = 0; i < cfg->nkeys; i++)
		if (!cfg->keys[i].sortable || OidIsValid(cfg->keys[i].collid))
			return false;
	return true;
}

/* ---------- temporary tables ---------- */

char *
scd2_sql_create_keys(const Scd2Config *cfg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("CREATE TEMP TABLE %s (`_n pg_catalog.int8, `_snap pg_catalog.bool"), keys);
	append_col_defs(&buf, cfg->keys, cfg->nkeys);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

char *
scd2_sql_create_changes(const Scd2Config *cfg, const char *chg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf,
					 X("CREATE TEMP TABLE %s (`_action pg_catalog.text, `_origin pg_catalog.\"char\","
					 " `_counts pg_catalog.bool, `_tvf %s, `_sk pg_catalog.int8, `_vf %s, `_vt %s,"
					 " `_cur pg_catalog.bool, `_set_y pg_catalog.bool"),
					 chg, cfg->vf.type_sql, cfg->vf.type_sql, cfg->vt.type_sql);
	append_col_defs(&buf, cfg->keys, cfg->nkeys);
	append_col_defs(&buf, cfg->tracked, cfg->ntracked);
	append_col_defs(&buf, cfg->type1, cfg->ntype1);
	append_col_defs(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

char *
scd2_sql_create_points(const Scd2Config *cfg, const char *pts)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf,
					 X("CREATE TEMP TABLE %s (`_t %s, `_prio pg_catalog.int4, `_present pg_catalog.bool,"
					 " `_ovt %s, `_sk pg_catalog.int8, `_stg pg_catalog.bool"),
					 pts, cfg->vf.type_sql, cfg->vt.type_sql);
	append_col_defs(&buf, cfg->keys, cfg->nkeys);
	append_col_defs(&buf, cfg->tracked, cfg->ntracked);
	append_col_defs(&buf, cfg->type1, cfg->ntype1);
	append_col_defs(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

/* ---------- validation ---------- */

/*
 * One scan of the staging table: row count, rows with a NULL key column,
 * rows with a NULL effective time, and a fourth count that is positive
 * exactly when some key has several rows.  A plain SELECT, so PostgreSQL
 * may run it in parallel.
 *
 * A single key column of a type without collation is checked with
 * count(DISTINCT), which sorts the bare key Datums (an in-memory quicksort
 * of 200k bigints takes ~30 ms here); a grouped hash aggregate over every
 * key took 130-230 ms for the same check.  Composite and collatable keys
 * keep the grouped scan: a row-typed or locale-aware sort costs more than
 * the hash.
 */
char *
scd2_sql_validate(const Scd2Config *cfg)
{
	StringInfoData buf;
	StringInfoData nullkey;

	initStringInfo(&buf);
	if (cfg->nkeys == 1 && keys_sort_cheaply(cfg))
	{
		const char *k = cfg->keys[0].ident;

		appendStringInfo(&buf,
						 X("SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE s.%s IS NULL),"
						 " pg_catalog.count(*) FILTER (WHERE s.`_t IS NULL),"
						 " pg_catalog.count(s.%s) OPERATOR(pg_catalog.-) pg_catalog.count(DISTINCT s.%s), "),
						 k, k, k);
		if (cfg->eff_col)
			appendStringInfoString(&buf, X("pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.isfinite(s.`_t))"));
		else
			appendStringInfoString(&buf, "0");
		appendStringInfoString(&buf, " FROM ");
		append_all_staging(&buf, cfg);
		appendStringInfoString(&buf, " s");
		return buf.data;
	}

	initStringInfo(&nullkey);
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&nullkey, "%sg.%s IS NULL", i ? " OR " : "", cfg->keys[i].ident);

	appendStringInfo(&buf,
					 X("SELECT COALESCE(pg_catalog.sum(g.`_n), 0)::pg_catalog.int8,"
					 " COALESCE(pg_catalog.sum(g.`_n) FILTER (WHERE %s), 0)::pg_catalog.int8,"
					 " COALESCE(pg_catalog.sum(g.`_ne), 0)::pg_catalog.int8,"
					 " pg_catalog.count(*) FILTER (WHERE g.`_n > 1 AND NOT (%s)),"
					 " COALESCE(pg_catalog.sum(g.`_nf), 0)::pg_catalog.int8"
					 " FROM (SELECT "), nullkey.data, nullkey.data);
	append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, X(", pg_catalog.count(*) AS `_n,"
						   " pg_catalog.count(*) FILTER (WHERE s.`_t IS NULL) AS `_ne, "));
	if (cfg->eff_col)
		appendStringInfoString(&buf, X("pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.isfinite(s.`_t))"));
	else
		appendStringInfoString(&buf, "0");
	appendStringInfoString(&buf, X(" AS `_nf FROM "));
	append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, " s GROUP BY ");
	append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, ") g");
	return buf.data;
}

/* The first row with a NULL key or effective time, as JSON, for errdetail. */
char *
scd2_sql_bad_row(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT pg_catalog.to_jsonb(s.*)::pg_catalog.text, CASE");
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&buf, " WHEN s.%s IS NULL THEN %s", cfg->keys[i].ident,
						 quote_literal_cstr(cfg->keys[i].name));
	appendStringInfo(&buf, " END FROM %s s WHERE ", cfg->stg_sql);
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&buf, "s.%s IS NULL OR ", cfg->keys[i].ident);
	if (cfg->eff_col)
		appendStringInfo(&buf, "s.%s IS NULL", cfg->eff_col);
	else
		appendStringInfoString(&buf, "false");
	appendStringInfoString(&buf, " LIMIT 1");
	return buf.data;
}

/* A staging row whose effective time is infinity or -infinity. */
char *
scd2_sql_nonfinite_row(const Scd2Config *cfg)
{
	return psprintf("SELECT %s, CAST(s.%s AS pg_catalog.text) FROM %s s"
					" WHERE NOT pg_catalog.isfinite(CAST(s.%s AS %s)) LIMIT 1",
					staging_key_json(cfg), cfg->eff_col, cfg->stg_sql, cfg->eff_col,
					cfg->vf.type_sql);
}

/* ---------- conversions ---------- */

/*
 * The staging columns whose values must be checked before the load: the
 * effective column when its type is not valid_from's, then every key,
 * tracked, Type 1 and copied column whose type or typmod differs from the
 * dimension's.  NULL when there are none.
 */
Scd2ConvItem *
scd2_conv_items(const Scd2Config *cfg, int *n)
{
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};
	Scd2ConvItem *items = palloc0(sizeof(Scd2ConvItem) *
								  (1 + cfg->nkeys + cfg->ntracked + cfg->ntype1 + cfg->nother));
	int			k = 0;

	if (cfg->eff_col && cfg->eff_type_sql)
	{
		items[k].name = cfg->eff_name;
		items[k].ident = cfg->eff_col;
		items[k].src_type_sql = cfg->eff_type_sql;
		items[k].dst_type_sql = cfg->vf.type_sql;
		items[k].src_type_name = cfg->eff_type_name;
		items[k].dst_type_name = cfg->vf_type_name;
		items[k].eqop_sql = cfg->eff_eqop_sql;
		items[k].cmp_type_sql = cfg->eff_cmp_type_sql;
		items[k].category = 'D';
		items[k].effective = true;
		k++;
	}
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
			if (groups[g][i].conv_check)
			{
				items[k].name = groups[g][i].name;
				items[k].ident = groups[g][i].ident;
				items[k].src_type_sql = groups[g][i].stg_type_sql;
				items[k].dst_type_sql = groups[g][i].type_sql;
				items[k].src_type_name = groups[g][i].stg_type_name;
				items[k].dst_type_name = groups[g][i].type_name;
				items[k].eqop_sql = groups[g][i].stg_eqop_sql;
				items[k].cmp_type_sql = groups[g][i].cmp_type_sql;
				items[k].category = groups[g][i].stg_category;
				k++;
			}
	*n = k;
	return k > 0 ? items : NULL;
}

/*
 * "s.c IS NOT NULL AND NOT (CAST(CAST(s.c AS dim) AS cmp) = CAST(s.c AS cmp))"
 * (cmp: the staging type, or bpchar for a char(n) column).
 */
static void
append_lossy(StringInfo buf, const Scd2ConvItem *item)
{
	appendStringInfo(buf, "(s.%s IS NOT NULL AND NOT (CAST(CAST(s.%s AS %s) AS %s) %s CAST(s.%s AS %s)))",
					 item->ident, item->ident, item->dst_type_sql, item->cmp_type_sql,
					 item->eqop_sql, item->ident, item->cmp_type_sql);
}

/* The staging key as JSON, from the staging columns themselves. */
static char *
staging_key_json(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "CAST(pg_catalog.jsonb_build_object(");
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(&buf, "%s%s, s.%s", i ? ", " : "",
						 quote_literal_cstr(cfg->keys[i].name), cfg->keys[i].ident);
	appendStringInfoString(&buf, ") AS pg_catalog.text)");
	return buf.data;
}

/*
 * One scan of the staging table converting every checked column: per item,
 * the number of values that do not survive the round trip (or, without
 * one, the number of values converted, only to make the conversion run:
 * a value out of range fails the statement).
 */
char *
scd2_sql_conv_check(const Scd2Config *cfg, const Scd2ConvItem *items, int n)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	for (int i = 0; i < n; i++)
	{
		if (i)
			appendStringInfoString(&buf, ", ");
		if (items[i].eqop_sql)
		{
			appendStringInfoString(&buf, "pg_catalog.count(*) FILTER (WHERE ");
			append_lossy(&buf, &items[i]);
			appendStringInfoString(&buf, ")");
		}
		else
			appendStringInfo(&buf, "pg_catalog.count(CAST(s.%s AS %s)) OPERATOR(pg_catalog.*) 0",
							 items[i].ident, items[i].dst_type_sql);
	}
	appendStringInfo(&buf, " FROM %s s", cfg->stg_sql);
	return buf.data;
}

/* Convert one column of every staging row (it fails or it does not). */
char *
scd2_sql_conv_force(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	return psprintf("SELECT pg_catalog.count(CAST(s.%s AS %s)) FROM %s s",
					item->ident, item->dst_type_sql, cfg->stg_sql);
}

/* A staging row whose value does not survive the round trip. */
char *
scd2_sql_conv_lossy_row(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT %s, CAST(s.%s AS pg_catalog.text),"
					 " CAST(CAST(s.%s AS %s) AS pg_catalog.text) FROM %s s WHERE ",
					 staging_key_json(cfg), item->ident, item->ident, item->dst_type_sql,
					 cfg->stg_sql);
	append_lossy(&buf, item);
	appendStringInfoString(&buf, " LIMIT 1");
	return buf.data;
}

/* Every staging row's key and value as text (to find the one that fails). */
char *
scd2_sql_conv_rows(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	return psprintf("SELECT %s, CAST(s.%s AS pg_catalog.text) FROM %s s WHERE s.%s IS NOT NULL",
					staging_key_json(cfg), item->ident, cfg->stg_sql, item->ident);
}

/* The conversion of one value, given as the staging type's text ($1). */
char *
scd2_sql_conv_one(const Scd2ConvItem *item)
{
	return psprintf("SELECT CAST(CAST(CAST($1 AS pg_catalog.text) AS %s) AS %s)",
					item->src_type_sql, item->dst_type_sql);
}

/* ---------- classification ---------- */

/* Keys with several staging rows: they go the general way. */
char *
scd2_sql_multi_keys(const Scd2Config *cfg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO %s (`_n, `_snap"), keys);
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, ") SELECT pg_catalog.count(*), false");
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, " FROM ");
	append_normalized_staging(&buf, cfg);
	appendStringInfoString(&buf, " s GROUP BY ");
	append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, " HAVING pg_catalog.count(*) > 1");
	return buf.data;
}

/*
 * Leave out the keys of `keys` (several staging rows).  With built-in key
 * types a NOT IN whose subquery PostgreSQL hashes once -- the statement
 * runs with hash joins disabled, which would turn a NOT EXISTS into a
 * nested loop over both tables; other key types keep their own equality
 * operator through NOT EXISTS.
 */
static void
append_exclude_keys(StringInfo buf, const Scd2Config *cfg, const char *keys)
{
	bool		builtin = true;

	for (int i = 0; i < cfg->nkeys; i++)
		builtin = builtin && cfg->keys[i].builtin_eq;
	if (builtin)
	{
		appendStringInfoString(buf, " WHERE (");
		append_cols(buf, cfg->keys, cfg->nkeys, "s.");
		appendStringInfoString(buf, ") NOT IN (SELECT ");
		append_cols(buf, cfg->keys, cfg->nkeys, "x.");
		appendStringInfo(buf, " FROM %s x)", keys);
	}
	else
	{
		appendStringInfo(buf, " WHERE NOT EXISTS (SELECT 1 FROM %s x WHERE ", keys);
		append_key_join(buf, cfg, "x", "s");
		appendStringInfoString(buf, ")");
	}
}

/*
 * The fast path: every key with exactly one staging row is classified once
 * against its current version (found through the partial unique index) --
 * or, when it has none, against its latest closed version -- with a
 * NULL-safe comparison of the tracked columns.  One pass, no materialised
 * intermediate: each changed row expands (LATERAL VALUES) into its update
 * copy (w = 1) and/or its insert copy (w = 2).  A row that turns out to be
 * late, or at the very instant of an existing version, becomes a 'complex'
 * marker row; scd2_sql_move_complex() moves those keys to the general
 * path.  Unchanged rows produce nothing and are counted by difference.
 */
char *
scd2_sql_fast_path(const Scd2Config *cfg, const char *chg, const char *keys,
				   bool exclude_keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	append_changes_insert(&buf, cfg, chg, true);
	appendStringInfoString(&buf,
						   X(") SELECT CASE WHEN `_cls = 'complex' THEN 'complex'"
						   " WHEN `_w = 1 THEN CASE `_cls WHEN 'change' THEN 'close' ELSE `_cls END"
						   " WHEN `_cls = 'new' THEN 'insert' ELSE 'new_version' END,"
						   " 'F', NOT (`_w = 1 AND `_cls = 'change'),"
						   " CASE WHEN `_w = 1 THEN `_dvf END, CASE WHEN `_w = 1 THEN `_dsk END,"
						   " CASE WHEN `_w = 1 THEN `_dvf ELSE `_t END,"
						   " CASE WHEN `_w = 1 AND `_cls IN ('change', 'delete') THEN `_t END,"
						   " NOT (`_w = 1 AND `_cls IN ('change', 'delete')),"
						   " `_w = 1 AND `_cls = 'type1'"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", CASE WHEN `_w = 2 THEN %s END"), cfg->tracked[i].ident);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, ", %s", cfg->type1[i].ident);
	for (int i = 0; i < cfg->nother; i++)
		appendStringInfo(&buf, X(", CASE WHEN `_w = 2 THEN %s END"), cfg->other[i].ident);

	/*
	 * The probe: the current version, else (a scalar subquery evaluated
	 * only for keys without one) the end of the latest closed version.
	 * Both subqueries are fenced (OFFSET 0) so each expression is computed
	 * once per row; unchanged rows are dropped before the expansion.
	 */
	appendStringInfoString(&buf, X(" FROM (SELECT * FROM (SELECT c.*, CASE"
						   " WHEN c.`_dvf IS NOT NULL THEN CASE"
						   "   WHEN c.`_t <= c.`_dvf THEN 'complex'"
						   "   WHEN NOT c.`_present THEN 'delete'"
						   "   WHEN NOT ("));
	if (cfg->detect_timestamp)
		appendStringInfoString(&buf, "false");	/* a later row is a change */
	else
		append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "c.", "c.", "d");
	appendStringInfoString(&buf, ") THEN 'change' WHEN NOT (");
	append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "c.", "c.", "e");
	appendStringInfoString(&buf,
						   X(") THEN 'type1' ELSE 'unchanged' END"
						   " WHEN c.`_hvt > c.`_t THEN 'complex'"
						   " WHEN NOT c.`_present THEN 'unchanged'"
						   " WHEN c.`_hvt IS NOT NULL THEN 'return'"
						   " ELSE 'new' END AS `_cls FROM (SELECT s.*, "));
	appendStringInfo(&buf, X("d.%s AS `_dvf, %s AS `_dsk"), cfg->vf.ident,
					 cfg->sk ? psprintf("d.%s", cfg->sk) : "NULL::pg_catalog.int8");
	appendStringInfo(&buf, ", CASE WHEN d.%s IS NULL THEN (SELECT h.%s FROM %s h WHERE ",
					 cfg->vf.ident, cfg->vt.ident, cfg->dim_sql);
	append_key_join(&buf, cfg, "h", "s");
	appendStringInfo(&buf, X(" ORDER BY h.%s DESC LIMIT 1) END AS `_hvt"), cfg->vf.ident);
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", d.%s AS `_d%d"), cfg->tracked[i].ident, i + 1);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", d.%s AS `_e%d"), cfg->type1[i].ident, i + 1);
	appendStringInfoString(&buf, " FROM ");
	if (keys_sort_cheaply(cfg))
	{
		/*
		 * Probe in key order: consecutive probes then walk the current-row
		 * index (and, when the heap follows the key, the heap) forward
		 * instead of jumping; at 1M keys / 200k rows the sort costs ~30 ms
		 * and the probes take ~0.2 s less.  The nested loop keeps the
		 * order, so the change table -- and the MERGE that reads it -- is
		 * in key order too.
		 */
		appendStringInfoString(&buf, "(SELECT * FROM ");
		append_normalized_staging(&buf, cfg);
		appendStringInfoString(&buf, " s0 ORDER BY ");
		append_cols(&buf, cfg->keys, cfg->nkeys, "s0.");
		appendStringInfoString(&buf, ")");
	}
	else
		append_normalized_staging(&buf, cfg);
	appendStringInfo(&buf, " s LEFT JOIN %s d ON ", cfg->dim_sql);
	append_key_join(&buf, cfg, "d", "s");
	appendStringInfo(&buf, " AND %s", current_pred(cfg, "d"));
	if (exclude_keys)
		append_exclude_keys(&buf, cfg, keys);
	appendStringInfoString(&buf, X(" OFFSET 0) c OFFSET 0) c1 WHERE `_cls <> 'unchanged') cls"
						   " CROSS JOIN LATERAL (VALUES (1, cls.`_cls), (2, cls.`_cls)) AS v(`_w, `_k)"
						   " WHERE (`_w = 1 AND `_cls IN ('change', 'delete', 'type1', 'complex'))"
						   " OR (`_w = 2 AND `_cls IN ('change', 'new', 'return'))"));
	return buf.data;
}

/* Keys the fast path found late: to the general path. */
char *
scd2_sql_move_complex(const Scd2Config *cfg, const char *chg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("WITH m AS (DELETE FROM %s WHERE `_action = 'complex' RETURNING *)"
					 " INSERT INTO %s (`_n, `_snap"), chg, keys);
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, ") SELECT 1, false");
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, " FROM m");
	return buf.data;
}

/*
 * Snapshot mode: current keys missing from the extract are closed at
 * effective_at.  Keys whose current version starts at or after it go the
 * general way (second statement).
 */
char *
scd2_sql_snapshot_missing(const Scd2Config *cfg, const char *chg, const char *keys)
{
	StringInfoData buf;
	char	   *eff = psprintf("CAST($1 AS %s)", cfg->vf.type_sql);

	initStringInfo(&buf);
	appendStringInfo(&buf, "WITH m AS (SELECT d.* FROM %s d WHERE %s AND NOT EXISTS (SELECT 1 FROM ",
					 cfg->dim_sql, current_pred(cfg, "d"));
	append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, " s WHERE ");
	append_key_join(&buf, cfg, "s", "d");
	appendStringInfo(&buf, X(")), mx AS (INSERT INTO %s (`_n, `_snap"), keys);
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, ") SELECT 0, true");
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "m.");
	appendStringInfo(&buf, " FROM m WHERE m.%s >= %s) ", cfg->vf.ident, eff);
	append_changes_insert(&buf, cfg, chg, false);
	appendStringInfo(&buf, ") SELECT 'delete', 'F', false, m.%s, %s, m.%s, %s, false, false",
					 cfg->vf.ident, cfg->sk ? psprintf("m.%s", cfg->sk) : "NULL",
					 cfg->vf.ident, eff);
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "m.");
	appendStringInfo(&buf, " FROM m WHERE m.%s < %s", cfg->vf.ident, eff);
	return buf.data;
}

/* ---------- the general path (complex keys) ---------- */

/*
 * The timeline points of every complex key: its staged rows (exact
 * duplicates collapsed), its existing versions from the one covering its
 * earliest staged instant on (read through the (key, valid_from) index, no
 * full history scan), and the gap starts after closed versions.
 */
char *
scd2_sql_points(const Scd2Config *cfg, const char *pts, const char *keys)
{
	StringInfoData buf;
	const Scd2Column *groups[4] = {cfg->keys, cfg->tracked, cfg->type1, cfg->other};
	int			counts[4] = {cfg->nkeys, cfg->ntracked, cfg->ntype1, cfg->nother};
	bool		first = true;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("INSERT INTO %s (`_t, `_prio, `_present, `_ovt, `_sk, `_stg"), pts);
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	append_payload_cols(&buf, cfg, NULL);
	appendStringInfoString(&buf, ") WITH cs AS (");
	if (cfg->snapshot)
	{
		/*
		 * Snapshot mode: a key's latest staged row is its state now.  It
		 * takes effect at the later of its own effective time and the key's
		 * last event: the end of its last version (its deletion) when it
		 * has no current version -- so a key the extract has again gets
		 * one, without rewriting history -- or the start of its current
		 * version: with the same values it is a no-op (the extract, sent
		 * again, changes nothing), with other values it conflicts there
		 * and the load is refused.
		 */
		appendStringInfo(&buf, X("SELECT CASE WHEN q.`_present AND q.`_last THEN GREATEST(q.`_t,"
								 " (SELECT COALESCE(%s, h.%s) FROM %s h WHERE "),
						 open_vt(cfg, "h"), cfg->vf.ident, cfg->dim_sql);
		append_key_join(&buf, cfg, "h", "q");
		appendStringInfo(&buf, X(" ORDER BY h.%s DESC LIMIT 1)) ELSE q.`_t END AS `_t, q.`_present, q.`_stg"),
						 cfg->vf.ident);
		append_more_cols(&buf, cfg->keys, cfg->nkeys, "q.");
		append_payload_cols(&buf, cfg, "q.");
		/* the latest row, alone at its instant (else: ambiguous, below) */
		appendStringInfoString(&buf, X(" FROM (SELECT c0.*, c0.`_t OPERATOR(pg_catalog.=) pg_catalog.max(c0.`_t) OVER (PARTITION BY "));
		append_cols(&buf, cfg->keys, cfg->nkeys, "c0.");
		appendStringInfoString(&buf, X(") AND pg_catalog.count(*) OVER (PARTITION BY "));
		append_cols(&buf, cfg->keys, cfg->nkeys, "c0.");
		appendStringInfoString(&buf, X(", c0.`_t) OPERATOR(pg_catalog.=) 1 AS `_last FROM ("));
	}
	appendStringInfoString(&buf, "SELECT DISTINCT ON (");
	/* exact duplicates: equal in every loaded column (text form if no btree) */
	for (int g = 0; g < 4; g++)
		for (int i = 0; i < counts[g]; i++)
		{
			if (groups[g][i].sortable)
				appendStringInfo(&buf, "%ss.%s", first ? "" : ", ", groups[g][i].ident);
			else
				appendStringInfo(&buf, "%sCAST(s.%s AS pg_catalog.text)", first ? "" : ", ",
								 groups[g][i].ident);
			first = false;
		}
	appendStringInfoString(&buf, X(", s.`_t, s.`_present) s.`_t, s.`_present, true AS `_stg"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	append_payload_cols(&buf, cfg, "s.");
	appendStringInfoString(&buf, " FROM ");
	append_normalized_staging(&buf, cfg);
	appendStringInfo(&buf, " s WHERE EXISTS (SELECT 1 FROM %s x WHERE ", keys);
	append_key_join(&buf, cfg, "x", "s");
	appendStringInfoString(&buf, ")");
	if (cfg->snapshot)
	{
		appendStringInfoString(&buf, ") c0) q");
		/*
		 * Keys missing from a snapshot: an absent point at effective_at, or
		 * at the start of the current version when that is later (where
		 * it conflicts: a deletion cannot end a version before it starts).
		 */
		appendStringInfo(&buf, " UNION ALL SELECT GREATEST(CAST($1 AS %s), (SELECT d.%s FROM %s d WHERE ",
						 cfg->vf.type_sql, cfg->vf.ident, cfg->dim_sql);
		append_key_join(&buf, cfg, "d", "x");
		appendStringInfo(&buf, " AND %s)), false, false", current_pred(cfg, "d"));
		append_more_cols(&buf, cfg->keys, cfg->nkeys, "x.");
		append_null_cols(&buf, cfg->tracked, cfg->ntracked);
		append_null_cols(&buf, cfg->type1, cfg->ntype1);
		append_null_cols(&buf, cfg->other, cfg->nother);
		appendStringInfo(&buf, X(" FROM %s x WHERE x.`_snap"), keys);
	}
	appendStringInfoString(&buf, "), km AS (SELECT ");
	append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", pg_catalog.min(`_t) AS `_m FROM cs GROUP BY "));
	append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, "), rel AS (SELECT d.*, ");
	appendStringInfo(&buf, X("%s AS `_o, km.`_m, pg_catalog.lead(d.%s) OVER (PARTITION BY "),
					 open_vt(cfg, "d"), cfg->vf.ident);
	append_cols(&buf, cfg->keys, cfg->nkeys, "d.");
	appendStringInfo(&buf, X(" ORDER BY d.%s) AS `_nvf FROM km JOIN %s d ON "), cfg->vf.ident, cfg->dim_sql);
	append_key_join(&buf, cfg, "d", "km");
	appendStringInfo(&buf, " WHERE d.%s >= COALESCE((SELECT d2.%s FROM %s d2 WHERE ",
					 cfg->vf.ident, cfg->vf.ident, cfg->dim_sql);
	append_key_join(&buf, cfg, "d2", "km");
	appendStringInfo(&buf, X(" AND d2.%s <= km.`_m ORDER BY d2.%s DESC LIMIT 1), CAST('-infinity' AS %s))) "),
					 cfg->vf.ident, cfg->vf.ident, cfg->vf.type_sql);

	/* E points: relevant existing versions */
	appendStringInfo(&buf, X("SELECT r.%s, 1, true, r.`_o, %s, false"),
					 cfg->vf.ident, cfg->sk ? psprintf("r.%s", cfg->sk) : "NULL::pg_catalog.int8");
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "r.");
	append_payload_cols(&buf, cfg, "r.");
	appendStringInfoString(&buf, X(" FROM rel r WHERE r.`_o IS NULL OR r.`_o > r.`_m"));
	/* G points: a closed version not followed at once by another */
	appendStringInfoString(&buf, X(" UNION ALL SELECT r.`_o, 0, false, NULL, NULL, false"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "r.");
	append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	append_null_cols(&buf, cfg->type1, cfg->ntype1);
	append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM rel r WHERE r.`_o > r.`_m AND r.`_o IS DISTINCT FROM r.`_nvf"));
	/* S points */
	appendStringInfoString(&buf, X(" UNION ALL SELECT cs.`_t, 2, cs.`_present, NULL, NULL, cs.`_stg"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, "cs.");
	append_payload_cols(&buf, cfg, "cs.");
	appendStringInfoString(&buf, " FROM cs");
	return buf.data;
}

/* Two staged rows of one key at one instant with different values. */
char *
scd2_sql_ambiguous(const Scd2Config *cfg, const char *pts)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT %s, CAST(`_t AS pg_catalog.text) FROM %s p WHERE `_prio = 2 GROUP BY "),
					 scd2_key_json_sql(cfg, "p"), pts);
	append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", `_t HAVING pg_catalog.count(*) > 1 ORDER BY "));
	append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfoString(&buf, X(", `_t LIMIT 1"));
	return buf.data;
}

/*
 * The collapse walk of docs/SEMANTICS.md as window functions over each
 * key's points in time order (ties: gap start, existing, staged):
 *   _keep     the point changes the state in force (E points always kept);
 *   _conflict a staged point at an existing version's start, with another
 *             state;
 *   _run      the number of kept points so far (a run = a kept point and
 *             the dropped ones after it);
 *   _l<i>     the Type 1 values of the run's last point, _lprio its kind.
 */
/*
 * create: the table's CREATE ... WITH NO DATA (which runs nothing: the
 * load creates its work tables before it enters the security-restricted
 * context, see load.c); otherwise the INSERT that fills it.
 */
char *
scd2_sql_window(const Scd2Config *cfg, const char *pts, const char *win, bool create)
{
	StringInfoData buf;
	char	   *part = partition_by_keys(cfg);

	initStringInfo(&buf);
	appendStringInfo(&buf, create ? "CREATE TEMP TABLE %s ON COMMIT DROP AS " : "INSERT INTO %s ", win);
	appendStringInfoString(&buf, X("WITH o AS (SELECT p.*,"
						   " pg_catalog.lag(`_present) OVER w AS `_pp, pg_catalog.lag(`_t) OVER w AS `_pt,"
						   " pg_catalog.lag(`_prio) OVER w AS `_pprio"));
	for (int i = 0; i < cfg->ntracked; i++)
		appendStringInfo(&buf, X(", pg_catalog.lag(%s) OVER w AS `_p%d"), cfg->tracked[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM %s p WINDOW w AS (%s ORDER BY `_t, `_prio)), "), pts, part);

	appendStringInfoString(&buf,
						   X("c AS (SELECT o.*, NOT (`_present = COALESCE(`_pp, false) AND (NOT `_present OR ("));
	if (cfg->detect_timestamp)
		appendStringInfoString(&buf, "false");	/* every later instant is a change */
	else
		append_eq_positional(&buf, cfg, cfg->tracked, cfg->ntracked, "o.", "o.", "p");
	appendStringInfoString(&buf, X("))) AS `_diff FROM o), "
						   "k AS (SELECT c.*, (`_prio = 1 OR `_diff) AS `_keep,"
						   " COALESCE(`_prio = 2 AND `_pprio = 1 AND `_pt = `_t AND `_diff, false) AS `_conflict"
						   " FROM c), "));
	appendStringInfo(&buf, X("r AS (SELECT k.*, pg_catalog.sum(`_keep::pg_catalog.int4)"
					 " OVER (%s ORDER BY `_t, `_prio ROWS UNBOUNDED PRECEDING) AS `_run FROM k) "),
					 part);
	appendStringInfoString(&buf, X("SELECT r.*, pg_catalog.last_value(`_prio) OVER l AS `_lprio"));
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", pg_catalog.last_value(%s) OVER l AS `_l%d"), cfg->type1[i].ident, i + 1);
	appendStringInfo(&buf, X(" FROM r WINDOW l AS (%s, `_run ORDER BY `_t, `_prio"
					 " ROWS BETWEEN UNBOUNDED PRECEDING AND UNBOUNDED FOLLOWING)"), part);
	if (create)
		appendStringInfoString(&buf, " WITH NO DATA");
	return buf.data;
}

/* A staged point conflicting with an existing version's start. */
char *
scd2_sql_conflict(const Scd2Config *cfg, const char *win)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT %s, CAST(w.`_t AS pg_catalog.text) FROM %s w WHERE w.`_conflict ORDER BY "),
					 scd2_key_json_sql(cfg, "w"), win);
	append_cols(&buf, cfg->keys, cfg->nkeys, "w.");
	appendStringInfoString(&buf, X(", w.`_t LIMIT 1"));
	return buf.data;
}

/* The change rows of the complex keys, from the kept points. */
char *
scd2_sql_general_changes(const Scd2Config *cfg, const char *chg, const char *win)
{
	StringInfoData buf;
	char	   *part = partition_by_keys(cfg);

	initStringInfo(&buf);
	append_changes_insert(&buf, cfg, chg, true);
	appendStringInfo(&buf,
					 X(") WITH kp AS (SELECT w.*, pg_catalog.lead(`_t) OVER wk AS `_end,"
					 " pg_catalog.lead(`_present) OVER wk AS `_npresent,"
					 " pg_catalog.row_number() OVER (%s, (`_prio = 2 AND `_present) ORDER BY `_t) AS `_nth"
					 " FROM %s w WHERE `_keep WINDOW wk AS (%s ORDER BY `_t, `_prio)), "),
					 part, win, part);
	appendStringInfoString(&buf, X("e AS (SELECT kp.*, (`_ovt IS NULL AND `_lprio = 2 AND NOT ("));
	append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "kp.", "kp.", "l");
	appendStringInfoString(&buf, X(")) AS `_sety FROM kp WHERE `_prio = 1) "));

	/* existing rows: end moved earlier, and/or Type 1 overwrite */
	appendStringInfoString(&buf,
						   X("SELECT CASE WHEN `_end IS NOT DISTINCT FROM `_ovt THEN 'type1'"
						   " WHEN `_ovt IS NOT NULL THEN 'shorten'"
						   " WHEN `_npresent THEN 'close' ELSE 'delete' END,"
						   " 'C', false, `_t, `_sk, `_t, `_end, `_end IS NULL, `_sety"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	append_null_cols(&buf, cfg->tracked, cfg->ntracked);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", CASE WHEN `_sety THEN `_l%d END"), i + 1);
	append_null_cols(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, X(" FROM e WHERE `_end IS DISTINCT FROM `_ovt OR `_sety"));

	/* new versions: present staged points that were kept */
	appendStringInfo(&buf,
					 X(" UNION ALL SELECT CASE WHEN `_nth = 1 AND NOT EXISTS (SELECT 1 FROM %s d WHERE "),
					 cfg->dim_sql);
	append_key_join(&buf, cfg, "d", "kp");
	appendStringInfoString(&buf,
						   X(") THEN 'insert' ELSE 'new_version' END,"
						   " 'C', false, NULL, NULL, `_t, `_end, `_end IS NULL, false"));
	append_more_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	append_more_cols(&buf, cfg->tracked, cfg->ntracked, NULL);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", `_l%d"), i + 1);
	append_more_cols(&buf, cfg->other, cfg->nother, NULL);
	appendStringInfoString(&buf, X(" FROM kp WHERE `_prio = 2 AND `_present"));
	return buf.data;
}

/*
 * Counts of the general path: distinct staged rows, kept staged rows, rows
 * whose last staged row carried a Type 1 overwrite, staging rows of
 * complex keys.
 */
char *
scd2_sql_general_counts(const Scd2Config *cfg, const char *win, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf,
						   X("SELECT pg_catalog.count(*) FILTER (WHERE `_stg),"
					 " pg_catalog.count(*) FILTER (WHERE `_stg AND `_keep),"
					 " pg_catalog.count(*) FILTER (WHERE `_prio = 1 AND `_ovt IS NULL AND `_lprio = 2 AND NOT ("));
	append_eq_positional(&buf, cfg, cfg->type1, cfg->ntype1, "w.", "w.", "l");
	appendStringInfo(&buf, X(")), (SELECT COALESCE(pg_catalog.sum(`_n), 0)::pg_catalog.int8 FROM %s)"
					 " FROM %s w"), keys, win);
	return buf.data;
}

/* Change rows per action, and fast-path rows that count as applied. */
char *
scd2_sql_change_counts(const Scd2Config *cfg, const char *chg)
{
	return psprintf(X("SELECT pg_catalog.count(*) FILTER (WHERE `_action = 'insert'),"
					" pg_catalog.count(*) FILTER (WHERE `_action = 'new_version'),"
					" pg_catalog.count(*) FILTER (WHERE `_action = 'close'),"
					" pg_catalog.count(*) FILTER (WHERE `_action = 'delete'),"
					" pg_catalog.count(*) FILTER (WHERE `_action = 'shorten'),"
					" pg_catalog.count(*) FILTER (WHERE `_action = 'type1'),"
					" pg_catalog.count(*) FILTER (WHERE `_origin = 'F' AND `_counts),"
					" pg_catalog.count(*) FROM %s"), chg);
}

/* ---------- the write ---------- */

/*
 * The one MERGE.  Update copies match their target by business key and
 * valid_from (the as-of index, unique); insert copies carry a NULL target
 * and can never match.  An update copy that found no target is not
 * inserted: the processed count then falls short and the load fails.
 *
 * Order matters: the unique partial index on current rows is checked row
 * by row and cannot be deferred, so a key's old current row must be closed
 * before its new current version is inserted.  The source is every update
 * copy, then every insert copy (UNION ALL: an Append runs its inputs in
 * order, with no sort), and the caller runs the statement with only nested
 * loops allowed, which keep the (outer) source order.  The physical order
 * of the change table is no guide: its heap reuses free space.
 */
char *
scd2_sql_merge(const Scd2Config *cfg, const char *chg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("MERGE INTO %s t USING (SELECT * FROM %s WHERE `_tvf IS NOT NULL"
					 " UNION ALL SELECT * FROM %s WHERE `_tvf IS NULL) s ON "),
					 cfg->dim_sql, chg, chg);
	append_key_join(&buf, cfg, "t", "s");
	appendStringInfo(&buf, X(" AND t.%s %s s.`_tvf WHEN MATCHED THEN UPDATE SET %s = %s"),
					 cfg->vf.ident, cfg->vf.eqop_sql, cfg->vt.ident, stored_vt(cfg, X("s.`_vt")));
	if (cfg->is_current)
		appendStringInfo(&buf, X(", %s = s.`_cur"), cfg->is_current);
	for (int i = 0; i < cfg->ntype1; i++)
		appendStringInfo(&buf, X(", %s = CASE WHEN s.`_set_y THEN s.%s ELSE t.%s END"),
						 cfg->type1[i].ident, cfg->type1[i].ident, cfg->type1[i].ident);
	appendStringInfoString(&buf, X(" WHEN NOT MATCHED AND s.`_tvf IS NULL THEN INSERT ("));
	append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	append_payload_cols(&buf, cfg, NULL);
	appendStringInfo(&buf, ", %s, %s", cfg->vf.ident, cfg->vt.ident);
	if (cfg->is_current)
		appendStringInfo(&buf, ", %s", cfg->is_current);
	appendStringInfoString(&buf, ") VALUES (");
	append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	append_payload_cols(&buf, cfg, "s.");
	appendStringInfo(&buf, X(", s.`_vf, %s"), stored_vt(cfg, X("s.`_vt")));
	if (cfg->is_current)
		appendStringInfoString(&buf, X(", s.`_cur"));
	appendStringInfoString(&buf, ")");
	return buf.data;
}

/* jsonb_build_object('k1', a.k1, ...) */
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

/*
 * SELECT <the change feed> FROM <from> ORDER BY <its order>: one row per
 * dimension row written, in key and time order, from rows under the alias
 * c (change-table columns); sk_expr gives the surrogate key.
 */
static char *
feed_select(const Scd2Config *cfg, const char *from, const char *sk_expr)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT c.`_action, CAST(%s AS pg_catalog.int8), %s,"
					 " CAST(c.`_vf AS pg_catalog.timestamptz), CAST(%s AS pg_catalog.timestamptz)"
					 " FROM %s ORDER BY "),
					 sk_expr, scd2_key_json_sql(cfg, "c"), stored_vt(cfg, X("c.`_vt")), from);
	append_cols(&buf, cfg->keys, cfg->nkeys, "c.");
	appendStringInfoString(&buf, X(", c.`_vf, c.`_tvf IS NULL"));
	return buf.data;
}

/*
 * The change feed read back after the MERGE: surrogate keys of inserted
 * rows are found by (key, valid_from) -- MERGE has no RETURNING before
 * PostgreSQL 17 (and a dry run writes nothing).
 */
char *
scd2_sql_feed(const Scd2Config *cfg, const char *chg, bool dry_run)
{
	StringInfoData from;

	if (!cfg->sk || dry_run)
		return feed_select(cfg, psprintf("%s c", chg), X("c.`_sk"));
	initStringInfo(&from);
	appendStringInfo(&from, X("%s c LEFT JOIN %s d ON c.`_tvf IS NULL AND "), chg, cfg->dim_sql);
	append_key_join(&from, cfg, "d", "c");
	appendStringInfo(&from, X(" AND d.%s %s c.`_vf"), cfg->vf.ident, cfg->vf.eqop_sql);
	return feed_select(cfg, from.data, psprintf(X("COALESCE(c.`_sk, d.%s)"), cfg->sk));
}

/*
 * PostgreSQL 17+: the MERGE and the change feed in one statement.  The
 * MERGE returns every change-table row it wrote with the surrogate key of
 * the dimension row as written; the feed is read from that, in the same
 * order and columns as scd2_sql_feed, without a second look at the
 * dimension.  Its row count is the MERGE's processed count.
 */
char *
scd2_sql_merge_feed(const Scd2Config *cfg, const char *chg)
{
	const char *sk = cfg->sk ? psprintf("t.%s", cfg->sk) : X("s.`_sk");

	return psprintf(X("WITH `_written AS (%s RETURNING s.*, %s AS `_written_sk) %s"),
					scd2_sql_merge(cfg, chg), sk,
					feed_select(cfg, X("`_written c"), X("c.`_written_sk")));
}

/*
 * A staging row whose effective time is at or after the current rows'
 * valid_to (e.g. '9999-12-31'), as JSON, or none: such a row would make a
 * version that ends after "forever".
 */
char *
scd2_sql_beyond_current(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT pg_catalog.to_jsonb(s)::pg_catalog.text FROM %s s WHERE CAST(%s AS %s) >= %s LIMIT 1",
					 cfg->stg_sql, cfg->eff_col ? psprintf("s.%s", cfg->eff_col) : "$1",
					 cfg->vf.type_sql, cfg->current_vt);
	return buf.data;
}
