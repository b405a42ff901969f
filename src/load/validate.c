/*
 * validate.c -- step 3 of a load: the staging rows are checked before
 * anything is classified (NULL keys, NULL or non-finite effective times,
 * deletion flags, rows before a current version's finite valid_to).
 * convert.c checks the values' conversions to the dimension's types.
 */
#include "scd2.h"

#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"

/* ---------- validation ---------- */

/*
 * An order-free dimension's earliest staged instant, encoded as its memory
 * keeps instants (timestamptz; arrival.c asks whether the memory holds
 * anything from it on); NULL for the others.
 */
static char *
earliest_sql(const Scd2Config *cfg, const char *t)
{
	if (!cfg->order_free)
		return "NULL::pg_catalog.timestamptz";
	return scd2_changelog_encode_sql(cfg->vf.typid, psprintf("pg_catalog.min(%s)", t));
}

/*
 * One scan of the staging table: row count, rows with a NULL key column,
 * rows with a NULL effective time, a fourth count that is positive
 * exactly when some key has several rows, the non-finite effective times
 * and the earliest one (earliest_sql).  A plain SELECT, so PostgreSQL
 * may run it in parallel.
 *
 * A single key column is checked with scd2._repeats (common/repeats.c),
 * which keeps the keys in a hash set of the key type's own hash and
 * equality: ~15 ms for 200k bigints, where count(DISTINCT) sorted them in
 * ~35 ms at the default work_mem (spilling) and a grouped hash aggregate
 * over every key took 130-230 ms.  Composite keys keep the grouped scan;
 * so do collatable ones while the installed objects predate 0.4 (no
 * scd2._repeats: count(DISTINCT) would sort them with strcoll).
 */
static char *
scd2_sql_validate(const Scd2Config *cfg, bool several)
{
	StringInfoData buf;
	StringInfoData nullkey;

	initStringInfo(&buf);
	if (!several)
	{
		/* no key counted (scd2.infer_members): one plain scan */
		appendStringInfoString(&buf, "SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE ");
		for (int i = 0; i < cfg->nkeys; i++)
			appendStringInfo(&buf, "%ss.%s IS NULL", i ? " OR " : "", cfg->keys[i].ident);
		appendStringInfo(&buf, X("), pg_catalog.count(*) FILTER (WHERE s.`_t IS NULL), 0, %s, %s FROM "),
						 cfg->eff_col ? X("pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.isfinite(s.`_t))") : "0",
						 earliest_sql(cfg, X("s.`_t")));
		scd2_append_all_staging(&buf, cfg);
		appendStringInfoString(&buf, " s");
		return buf.data;
	}
	if (cfg->nkeys == 1 && (cfg->has_repeats || scd2_keys_cheap_prefix(cfg) == 1))
	{
		const char *k = cfg->keys[0].ident;

		appendStringInfo(&buf,
						 X("SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE s.%s IS NULL),"
						 " pg_catalog.count(*) FILTER (WHERE s.`_t IS NULL), %s, "),
						 k, cfg->has_repeats ? psprintf("scd2._repeats(s.%s)", k) :
						 psprintf("pg_catalog.count(s.%s) OPERATOR(pg_catalog.-) pg_catalog.count(DISTINCT s.%s)", k, k));
		if (cfg->eff_col)
			appendStringInfoString(&buf, X("pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.isfinite(s.`_t))"));
		else
			appendStringInfoString(&buf, "0");
		appendStringInfo(&buf, ", %s FROM ", earliest_sql(cfg, X("s.`_t")));
		scd2_append_all_staging(&buf, cfg);
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
					 " COALESCE(pg_catalog.sum(g.`_nf), 0)::pg_catalog.int8, %s"
					 " FROM (SELECT "), nullkey.data, nullkey.data, earliest_sql(cfg, X("g.`_m")));
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, X(", pg_catalog.count(*) AS `_n,%s"
					 " pg_catalog.count(*) FILTER (WHERE s.`_t IS NULL) AS `_ne, "),
					 cfg->order_free ? X(" pg_catalog.min(s.`_t) AS `_m,") : "");
	if (cfg->eff_col)
		appendStringInfoString(&buf, X("pg_catalog.count(*) FILTER (WHERE NOT pg_catalog.isfinite(s.`_t))"));
	else
		appendStringInfoString(&buf, "0");
	appendStringInfoString(&buf, X(" AS `_nf FROM "));
	scd2_append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, " s GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, ") g");
	return buf.data;
}

/* The first row with a NULL key or effective time, as JSON, for errdetail. */
static char *
scd2_sql_bad_row(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	/* the row as the staging table has it: an extract's marker is ours */
	if (cfg->extract_marker)
		appendStringInfo(&buf, "SELECT (pg_catalog.to_jsonb(s.*) OPERATOR(pg_catalog.-) %s)::pg_catalog.text, CASE",
						 quote_literal_cstr(cfg->extract_marker));
	else
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
static char *
scd2_sql_nonfinite_row(const Scd2Config *cfg)
{
	return psprintf("SELECT %s, CAST(s.%s AS pg_catalog.text) FROM %s s"
					" WHERE NOT pg_catalog.isfinite(CAST(s.%s AS %s)) LIMIT 1",
					scd2_staging_key_json(cfg), cfg->eff_col, cfg->stg_sql, cfg->eff_col,
					cfg->vf.type_sql);
}

/*
 * A batch with null_keys rows of a NULL key, null_eff of a NULL effective
 * time or non_finite of an infinite one refused, naming a row of each
 * kind: nothing was loaded.  Returns when all three are 0.
 */
void
scd2_refuse_bad_staging(LoadState *st, int64 null_keys, int64 null_eff, int64 non_finite)
{
	const Scd2Config *cfg = st->cfg;
	char	   *row;
	char	   *column;

	if (null_keys == 0 && null_eff == 0)
	{
		if (non_finite > 0)
		{
			scd2_load_exec(st, scd2_sql_nonfinite_row(cfg), SPI_OK_SELECT, "finding a non-finite effective time");
			ereport(ERROR,
					(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
					 errmsg("effective time of key %s is not finite",
							SPI_processed > 0 ? scd2_spi_text(0, 1) : "?"),
					 errdetail("Column \"%s\" of staging table %s holds %s: a version of dimension %s must start and end at finite instants.",
							   cfg->eff_name, cfg->stg_name,
							   SPI_processed > 0 ? scd2_spi_text(0, 2) : "infinity", cfg->dim_name),
					 errhint("Fix the effective time of the %lld row(s) concerned (an open end is NULL, not infinity); nothing was loaded.",
							 (long long) non_finite)));
		}
		return;
	}

	scd2_load_exec(st, scd2_sql_bad_row(cfg), SPI_OK_SELECT, "finding a bad staging row");
	row = SPI_processed > 0 ? scd2_spi_text(0, 1) : "?";
	column = SPI_processed > 0 ? scd2_spi_text(0, 2) : NULL;
	if (null_keys > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("staging table %s has a NULL business key", cfg->stg_name),
				 errdetail("Column \"%s\" is NULL in row %s.", column ? column : "?", row),
				 errhint("Remove or fix the %lld row(s) with a NULL business key column; nothing was loaded.",
						 (long long) null_keys)));
	ereport(ERROR,
			(errcode(ERRCODE_NOT_NULL_VIOLATION),
			 errmsg("staging table %s has a NULL effective time", cfg->stg_name),
			 errdetail("Column \"%s\" is NULL in row %s.", cfg->eff_name, row),
			 errhint("Fill in the effective time of the %lld row(s) concerned; nothing was loaded.",
					 (long long) null_eff)));
}

/*
 * Step 3: NULL keys and NULL effective times are refused; the same scan
 * tells whether some key has several staging rows (*several; NULL: not
 * asked: a plainer scan).  Returns the number of staging rows.
 */
int64
scd2_validate_staging(LoadState *st, bool *several)
{
	const Scd2Config *cfg = st->cfg;
	int64		rows;
	int64		null_keys;
	int64		null_eff;
	int64		non_finite;

	scd2_load_exec_parallel(st, scd2_sql_validate(cfg, several != NULL), "validating the staging table");
	rows = scd2_spi_int8(0, 1);
	null_keys = scd2_spi_int8(0, 2);
	null_eff = scd2_spi_int8(0, 3);
	if (several)
		*several = scd2_spi_int8(0, 4) > 0;
	non_finite = scd2_spi_int8(0, 5);
	{
		Datum		earliest = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 6,
											 &st->no_earliest);

		st->earliest = st->no_earliest ? 0 : DatumGetTimestampTz(earliest);
	}
	scd2_refuse_bad_staging(st, null_keys, null_eff, non_finite);
	return rows;
}

/*
 * A change stream's events (load/arrival.c) each need their sequence: a
 * NULL one could not be ordered among the key's events at its instant.
 */
void
scd2_validate_sequence(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;

	if (cfg->seq_col == NULL)
		return;
	scd2_load_exec(st, psprintf("SELECT %s FROM %s s WHERE s.%s IS NULL LIMIT 1",
								scd2_staging_key_json(cfg), cfg->stg_sql, cfg->seq_col),
				   SPI_OK_SELECT, "checking the sequences");
	if (SPI_processed > 0)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("staging table %s has a NULL sequence", cfg->stg_name),
				 errdetail("Column \"%s\" is NULL for key %s.", cfg->seq_name, scd2_spi_text(0, 1)),
				 errhint("Give every event its sequence (the LSN, offset or version that orders it); nothing was loaded.")));
}

/*
 * A staging row whose effective time is at or after the current rows'
 * valid_to (e.g. '9999-12-31'), as JSON, or none: such a row would make a
 * version that ends after "forever".
 */
static char *
scd2_sql_beyond_current(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT pg_catalog.to_jsonb(s)::pg_catalog.text FROM %s s WHERE CAST(%s AS %s) >= %s LIMIT 1",
					 cfg->stg_sql, cfg->eff_col ? psprintf("s.%s", cfg->eff_col) : "$1",
					 cfg->vf.type_sql, cfg->current_vt);
	return buf.data;
}

/*
 * With a current valid_to other than NULL (infinity, '9999-12-31'), every
 * effective time must be before it: a version starting there would end
 * after the end of time, and a closed one ending there would read as
 * current.
 */
void
scd2_check_before_current_valid_to(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;

	scd2_load_exec(st, scd2_sql_beyond_current(cfg), SPI_OK_SELECT, "checking effective times");
	if (SPI_processed == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
			 errmsg("staging table %s has an effective time at or after the current rows' valid_to", cfg->stg_name),
			 errdetail("Dimension %s marks current rows with valid_to %s; the effective time of row %s is not before it.",
					   cfg->dim_name, cfg->current_vt, scd2_spi_text(0, 1)),
			 errhint("Fix the effective times, or register the dimension with a later current_valid_to; nothing was loaded.")));
}
