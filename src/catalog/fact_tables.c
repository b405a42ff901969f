/*
 * fact_tables.c -- the registry of fact tables (scd2.fact_tables):
 * every read and write of that table is here.
 *
 *   scd2._fact_validate(fact, dimension, surrogate_key_column, time_column,
 *                       maintain)
 *                      what scd2.register_fact refuses, before it makes
 *                      an index;
 *   scd2._fact_store(fact, dimension, surrogate_key_column, time_column,
 *                    maintain, created_index)
 *                      the registration, written by the extension owner
 *                      after the same checks;
 *   scd2._fact_check_sql(fact)
 *                      scd2.check_facts' query, which runs as its caller;
 *   scd2._fact_forget_dropped()
 *                      the sql_drop trigger's forgetting of fact tables;
 *   scd2_fact_read / scd2_fact_set_last_run / scd2_fact_maintained
 *                      for scd2.rekey_facts and the runs that re-key
 *                      their dimension's maintained fact tables
 *                      (history/facts.c).
 *
 * A fact registration names the dimension, the fact's column holding the
 * dimension's surrogate key and the fact's time column; the fact's
 * surrogate key names the version valid at that time (valid_from <= t <
 * valid_to), as scd2.asof keys it.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "citus/citus.h"
#include "common/common.h"

PG_FUNCTION_INFO_V1(scd2_fact_validate);
PG_FUNCTION_INFO_V1(scd2_fact_store);
PG_FUNCTION_INFO_V1(scd2_fact_check_sql);
PG_FUNCTION_INFO_V1(scd2_fact_forget_dropped);

/* The caller owns the fact table, or is a member of its owner. */
static void
require_fact_owner(Oid fact)
{
	scd2_require_relation_owner(fact, NULL,
								"Only the owner of a fact table (or a member of its owner) can register it.");
}

/* A column's type (InvalidOid: no such column). */
static Oid
column_type(Oid rel, const char *col)
{
	AttrNumber	att = get_attnum(rel, col);

	if (att == InvalidAttrNumber || att < 0)
		return InvalidOid;
	return get_atttype(rel, att);
}

/*
 * A maintained fact table is re-keyed by an UPDATE that reads the
 * dimension by business key and validity for each fact (history/facts.c):
 * on Citus that statement is not known to be planned (a fact distributed
 * by another column than the dimension's, a correlated subquery on a
 * distributed table), so a maintained registration refuses a Citus fact
 * table or dimension, naming it, rather than fail inside a load.
 */
void
scd2_fact_refuse_citus_maintained(Oid fact, Oid dim)
{
	Oid			rels[2] = {fact, dim};

	if (!scd2_citus_installed())
		return;
	for (int i = 0; i < 2; i++)
	{
		Scd2CitusTable t;

		if (scd2_citus_table(rels[i], &t) == SCD2_CITUS_NONE)
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("fact table %s cannot be maintained: %s %s is a Citus %s table",
						scd2_relation_display_name(fact), i == 0 ? "fact table" : "dimension",
						scd2_relation_display_name(rels[i]), scd2_citus_kind_name(&t)),
				 errdetail("Facts are re-keyed in the run's transaction only on tables of one node; nothing was done."),
				 errhint("Register it with scd2.register_fact(..., maintain => false) and call scd2.rekey_facts('%s') after the runs.",
						 scd2_relation_display_name(fact))));
	}
}

/*
 * The checks of a registration, against the tables as they are now: the
 * fact is a table other than the dimension, the dimension is registered
 * with a surrogate key, the fact's surrogate key column has the type of
 * the dimension's, its time column is a timestamptz, timestamp or date.
 * Fills the dimension's registration.  The caller is connected to SPI.
 */
static Scd2Registration *
validate(Oid fact, Oid dim, const char *sk, const char *time)
{
	char	   *fname = scd2_relation_display_name(fact);
	char	   *dname = scd2_relation_display_name(dim);
	Scd2Registration *reg;
	Oid			fsk,
				dsk,
				ft;

	scd2_check_relkind(fact, false);
	scd2_check_relkind(dim, false);
	if (get_rel_relkind(fact) != RELKIND_RELATION && get_rel_relkind(fact) != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s is not a table", fname),
				 errhint("A fact table must be a plain or partitioned table.")));
	if (fact == dim)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s cannot be a fact table of itself", fname)));
	reg = scd2_registry_read(dim, dname);
	if (reg->surrogate_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimension %s has no surrogate key column", dname),
				 errdetail("A fact table holds the surrogate key of the dimension's version valid at the fact's time."),
				 errhint("Register the dimension with surrogate_key_column.")));
	/* the registered shape, from the registration just read (no second read) */
	if (reg->has_shape)
		scd2_check_registered_shape(dim, dname, reg->shape_columns, reg->shape_types,
									reg->shape_typmods);
	fsk = column_type(fact, sk);
	if (!OidIsValid(fsk))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of fact table %s does not exist", sk, fname),
				 errhint("surrogate_key_column names the fact's column holding the dimension's surrogate key.")));
	dsk = column_type(dim, reg->surrogate_key);
	if (fsk != dsk)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of fact table %s is of type %s, not %s",
						sk, fname, format_type_be(fsk), format_type_be(dsk)),
				 errdetail("It must have the type of the surrogate key column \"%s\" of dimension %s.",
						   reg->surrogate_key, dname)));
	if (fsk != INT8OID && fsk != INT4OID && fsk != INT2OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("surrogate key column \"%s\" of dimension %s is of type %s", reg->surrogate_key,
						dname, format_type_be(dsk)),
				 errdetail("Fact tables are kept for integer surrogate keys (smallint, integer, bigint).")));
	ft = column_type(fact, time);
	if (!OidIsValid(ft))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of fact table %s does not exist", time, fname),
				 errhint("time_column names the fact's column holding the instant its surrogate key is valid at.")));
	if (ft != TIMESTAMPTZOID && ft != TIMESTAMPOID && ft != DATEOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"%s\" of fact table %s is of type %s", time, fname, format_type_be(ft)),
				 errdetail("The time column of a fact table must be timestamptz, timestamp or date.")));
	return reg;
}

static void
require_args(FunctionCallInfo fcinfo, int n)
{
	static const char *const names[] = {"fact", "dimension", "surrogate_key_column", "time_column",
	"maintain"};

	for (int i = 0; i < n; i++)
		scd2_require_not_null(PG_ARGISNULL(i), names[i]);
}

Datum
scd2_fact_validate(PG_FUNCTION_ARGS)
{
	require_args(fcinfo, 5);
	require_fact_owner(PG_GETARG_OID(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	(void) validate(PG_GETARG_OID(0), PG_GETARG_OID(1), NameStr(*PG_GETARG_NAME(2)),
					NameStr(*PG_GETARG_NAME(3)));
	if (PG_GETARG_BOOL(4))
		scd2_fact_refuse_citus_maintained(PG_GETARG_OID(0), PG_GETARG_OID(1));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * Store a registration, as the extension owner, after the same checks:
 * _fact_store is callable by PUBLIC (register_fact runs as its caller).
 * The last run seen is the dimension's newest run (or revert) now, read
 * under the dimension's lock (no load of it in progress): facts keyed
 * before are as scd2.check_facts finds them.
 */
Datum
scd2_fact_store(PG_FUNCTION_ARGS)
{
	Oid			argtypes[6] = {REGCLASSOID, REGCLASSOID, NAMEOID, NAMEOID, BOOLOID, NAMEOID};
	Datum		values[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};

	require_args(fcinfo, 5);
	require_fact_owner(PG_GETARG_OID(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	(void) validate(PG_GETARG_OID(0), PG_GETARG_OID(1), NameStr(*PG_GETARG_NAME(2)),
					NameStr(*PG_GETARG_NAME(3)));
	if (PG_GETARG_BOOL(4))
		scd2_fact_refuse_citus_maintained(PG_GETARG_OID(0), PG_GETARG_OID(1));
	for (int i = 0; i < 6; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	/* no load of the dimension in progress: its run is seen, or it follows */
	scd2_lock_dimension(PG_GETARG_OID(1), NULL,
						"scd2.register_fact waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s; nothing was registered.");
	scd2_exec_catalog("INSERT INTO scd2.fact_tables AS t (fact, dimension, surrogate_key_column,"
					  " time_column, maintain, created_index, last_run_id)"
					  " SELECT $1, $2, $3, $4, $5, $6, COALESCE(pg_catalog.max(GREATEST(r.run_id, r.reverted_by)), 0)"
					  "   FROM scd2.change_log_runs r WHERE r.dimension OPERATOR(pg_catalog.=) $2"
					  " ON CONFLICT (fact) DO UPDATE SET dimension = EXCLUDED.dimension,"
					  "  surrogate_key_column = EXCLUDED.surrogate_key_column,"
					  "  time_column = EXCLUDED.time_column, maintain = EXCLUDED.maintain,"
					  "  created_index = COALESCE(EXCLUDED.created_index, t.created_index),"
					  "  last_run_id = EXCLUDED.last_run_id,"
					  "  registered_by = EXCLUDED.registered_by, registered_at = EXCLUDED.registered_at",
					  6, argtypes, values, nulls, false, SPI_OK_INSERT, "storing the fact table's registration");
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * A fact table's registration, its tables checked again as register_fact
 * checked them (a column retyped since is refused).  The caller is
 * connected to SPI.
 */
Scd2FactRegistration *
scd2_fact_read(Oid fact)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(fact)};
	Scd2FactRegistration *f = palloc0(sizeof(Scd2FactRegistration));
	bool		isnull;

	scd2_check_relkind(fact, false);
	scd2_exec_catalog("SELECT CAST(t.dimension AS pg_catalog.oid), CAST(t.surrogate_key_column AS pg_catalog.text),"
					  " CAST(t.time_column AS pg_catalog.text), t.last_run_id, t.maintain"
					  " FROM scd2.fact_tables t WHERE t.fact OPERATOR(pg_catalog.=) $1",
					  1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the fact table's registration");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not a registered scd2 fact table", scd2_relation_display_name(fact)),
				 errhint("Register it first with scd2.register_fact(fact, dimension, surrogate_key_column, time_column).")));
	f->fact = fact;
	f->dim = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	f->sk = scd2_spi_text(0, 2);
	f->time = scd2_spi_text(0, 3);
	f->last_run = scd2_spi_int8(0, 4);
	f->maintain = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull));
	if (get_rel_relkind(f->dim) == '\0')
		scd2_report_no_relation(f->dim);
	f->dim_reg = validate(fact, f->dim, f->sk, f->time);
	return f;
}

/* The newest run (or revert) of the dimension that scd2.rekey_facts has seen. */
void
scd2_fact_set_last_run(Oid fact, int64 run_id)
{
	Oid			argtypes[2] = {REGCLASSOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(fact), Int64GetDatum(run_id)};

	scd2_exec_catalog("UPDATE scd2.fact_tables SET last_run_id = $2 WHERE fact OPERATOR(pg_catalog.=) $1",
					  2, argtypes, values, NULL, false, SPI_OK_UPDATE, "remembering the last run re-keyed");
}

/*
 * The maintained fact tables of a dimension, in OID order (NIL: none, or
 * objects older than 0.5's maintain).  The caller is connected to SPI.
 */
List *
scd2_fact_maintained(Oid dim)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(dim)};
	List	   *facts = NIL;
	bool		isnull;

	if (!scd2_installed("fact_tables", "maintain"))
		return NIL;
	scd2_exec_catalog("SELECT CAST(t.fact AS pg_catalog.oid) FROM scd2.fact_tables t"
					  " WHERE t.dimension OPERATOR(pg_catalog.=) $1 AND t.maintain"
					  " ORDER BY CAST(t.fact AS pg_catalog.oid)",
					  1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the maintained fact tables");
	for (uint64 i = 0; i < SPI_processed; i++)
		facts = lappend_oid(facts, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																  SPI_tuptable->tupdesc, 1, &isnull)));
	return facts;
}

/*
 * Called by the sql_drop event trigger (scd2._on_sql_drop, after
 * scd2._registry_forget_dropped): a fact table dropped, or whose dimension
 * was dropped, is forgotten.  No ownership check: it only removes rows
 * about tables that are gone.
 */
Datum
scd2_fact_forget_dropped(PG_FUNCTION_ARGS)
{
	int64		removed;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	removed = (int64) scd2_exec_catalog("DELETE FROM scd2.fact_tables t WHERE NOT EXISTS"
					  " (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.fact)"
					  " OR NOT EXISTS"
					  " (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.dimension)",
					  0, NULL, NULL, NULL, false, SPI_OK_DELETE, "forgetting dropped fact tables");
	SPI_finish();
	PG_RETURN_INT64(removed);
}

/*
 * a.col = b.col for every business key column, by the type's default
 * equality; positional: b's columns are named k1, k2, ... (a work query's
 * own names, which no key column's name can take from it).
 */
void
scd2_fact_append_key_eq(StringInfo buf, const Scd2FactRegistration *f, const char *a, const char *b,
						bool positional)
{
	int			i = 0;

	ListCell   *lc;
	bool		first = true;

	foreach(lc, f->dim_reg->business_key)
	{
		const char *col = lfirst(lc);
		Oid			dim = f->dim;
		Oid			typ = column_type(dim, col);
		TypeCacheEntry *tc = lookup_type_cache(typ, TYPECACHE_EQ_OPR);

		if (!OidIsValid(tc->eq_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("business key column \"%s\" of %s has no default equality", col,
							scd2_relation_display_name(dim))));
		i++;
		appendStringInfo(buf, "%s%s.%s %s %s.%s", first ? "" : " AND ", a, quote_identifier(col),
						 scd2_operator_sql(tc->eq_opr), b,
						 positional ? psprintf("k%d", i) : quote_identifier(col));
		first = false;
	}
}

/*
 * The version of the dimension (alias dalias) valid at the fact's time
 * (alias falias): valid_from <= t < valid_to, a NULL valid_to current,
 * the fact's time read as a timestamptz (scd2.asof's argument) and then
 * as the validity columns' type, as scd2.dimension_at compares.
 */
void
scd2_fact_append_valid_at(StringInfo buf, const Scd2FactRegistration *f, const char *dalias,
						  const char *falias)
{
	Oid			vft = column_type(f->dim, f->dim_reg->valid_from);
	char	   *t = psprintf("CAST(CAST(%s.%s AS pg_catalog.timestamptz) AS %s)", falias,
							 quote_identifier(f->time), format_type_be_qualified(vft));

	appendStringInfo(buf, "%s.%s OPERATOR(pg_catalog.<=) %s AND (%s.%s IS NULL OR %s.%s OPERATOR(pg_catalog.>) %s)",
					 dalias, quote_identifier(f->dim_reg->valid_from), t,
					 dalias, quote_identifier(f->dim_reg->valid_to), dalias,
					 quote_identifier(f->dim_reg->valid_to), t);
}

/*
 * The facts whose surrogate key is not the version valid at their time.
 * A business key's versions do not overlap, so a fact is right exactly
 * when its own version (v, by surrogate key) is valid at its time: one
 * join by surrogate key decides every fact (the filter below it, on f and
 * v alone), and only the wrong ones are joined to the version of v's
 * business key valid at their time (e), which a range join does for every
 * fact.  Columns: the fact's surrogate key, its time, the expected
 * surrogate key (NULL: no version valid then, the fact's time is NULL, or
 * its surrogate key names no version).  The caller is connected to SPI.
 */
static char *
fact_mismatch_sql(const Scd2FactRegistration *f)
{
	StringInfoData sql;
	const char *dsk = quote_identifier(f->dim_reg->surrogate_key);
	const char *fsk = quote_identifier(f->sk);
	char	   *dim = scd2_relation_display_name(f->dim);

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT f.%s AS sk, f.%s AS t, e.%s AS expected FROM %s f"
					 " LEFT JOIN %s v ON v.%s OPERATOR(pg_catalog.=) f.%s"
					 " LEFT JOIN %s e ON ",
					 fsk, quote_identifier(f->time), dsk,
					 scd2_relation_display_name(f->fact), dim, dsk, fsk, dim);
	scd2_fact_append_key_eq(&sql, f, "e", "v", false);
	appendStringInfoString(&sql, " AND ");
	scd2_fact_append_valid_at(&sql, f, "e", "f");
	appendStringInfo(&sql, " WHERE f.%s IS NOT NULL AND (", fsk);
	scd2_fact_append_valid_at(&sql, f, "v", "f");
	appendStringInfoString(&sql, ") IS NOT TRUE");
	return sql.data;
}

/*
 * scd2.check_facts' query, which the SQL function runs as its caller
 * (the caller's privileges and row-level security apply to it as to any
 * query of the caller's): the mismatches grouped by (surrogate key, time,
 * expected).
 */
Datum
scd2_fact_check_sql(PG_FUNCTION_ARGS)
{
	MemoryContext upper = CurrentMemoryContext;
	Scd2FactRegistration *f;
	char	   *sql;

	scd2_require_not_null(PG_ARGISNULL(0), "fact");
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	f = scd2_fact_read(PG_GETARG_OID(0));
	sql = psprintf("SELECT CAST(m.sk AS pg_catalog.int8), CAST(m.t AS pg_catalog.timestamptz),"
				   " CAST(m.expected AS pg_catalog.int8), pg_catalog.count(*)"
				   " FROM (%s) m GROUP BY 1, 2, 3 ORDER BY 1, 2",
				   fact_mismatch_sql(f));
	sql = MemoryContextStrdup(upper, sql);
	SPI_finish();
	PG_RETURN_TEXT_P(cstring_to_text(sql));
}
