/*
 * convert.c -- step 3 of a load, continued: every staging value whose
 * conversion to the dimension's type can fail or lose data is checked
 * before the load, and the first one that does not fit is reported with
 * its key (a value is never cut or rounded silently).
 */
#include "scd2.h"

#include "executor/spi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "common/common.h"
#include "load/steps.h"
#include "load/runner.h"

/*
 * One staging column whose conversion to the dimension's type is checked
 * before a load (a value that does not fit is an error, never cut).
 */
typedef struct Scd2ConvItem
{
	const char *name;			/* staging column, unquoted */
	const char *ident;			/* the same, quoted */
	const char *src_type_sql;	/* staging type */
	const char *dst_type_sql;	/* dimension type */
	const char *src_type_name;	/* the same two, for messages */
	const char *dst_type_name;
	const char *eqop_sql;		/* comparison type's =, for the round trip,
								 * or NULL (only failures are detected) */
	const char *cmp_type_sql;	/* the type both sides are compared in */
	char		category;		/* typcategory of the dimension type */
	bool		effective;		/* the effective column */
} Scd2ConvItem;

/* ---------- conversions ---------- */

/*
 * The staging columns whose values must be checked before the load: the
 * effective column when its type is not valid_from's, then every key,
 * tracked, Type 1 and copied column whose type or typmod differs from the
 * dimension's.  NULL when there are none.
 */
static Scd2ConvItem *
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



/*
 * One scan of the staging table converting every checked column: per item,
 * the number of values that do not survive the round trip (or, without
 * one, the number of values converted, only to make the conversion run:
 * a value out of range fails the statement).
 */
static char *
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
static char *
scd2_sql_conv_force(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	return psprintf("SELECT pg_catalog.count(CAST(s.%s AS %s)) FROM %s s",
					item->ident, item->dst_type_sql, cfg->stg_sql);
}

/* A staging row whose value does not survive the round trip. */
static char *
scd2_sql_conv_lossy_row(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "SELECT %s, CAST(s.%s AS pg_catalog.text),"
					 " CAST(CAST(s.%s AS %s) AS pg_catalog.text) FROM %s s WHERE ",
					 scd2_staging_key_json(cfg), item->ident, item->ident, item->dst_type_sql,
					 cfg->stg_sql);
	append_lossy(&buf, item);
	appendStringInfoString(&buf, " LIMIT 1");
	return buf.data;
}

/* Every staging row's key and value as text (to find the one that fails). */
static char *
scd2_sql_conv_rows(const Scd2Config *cfg, const Scd2ConvItem *item)
{
	return psprintf("SELECT %s, CAST(s.%s AS pg_catalog.text) FROM %s s WHERE s.%s IS NOT NULL",
					scd2_staging_key_json(cfg), item->ident, cfg->stg_sql, item->ident);
}

/* The conversion of one value, given as the staging type's text ($1). */
static char *
scd2_sql_conv_one(const Scd2ConvItem *item)
{
	return psprintf("SELECT CAST(CAST(CAST($1 AS pg_catalog.text) AS %s) AS %s)",
					item->src_type_sql, item->dst_type_sql);
}

/*
 * Run a prepared read-only plan of the load in a subtransaction: true when
 * it succeeded (its result in SPI_tuptable); false when it failed with a
 * data exception (class 22: out of range, too long, invalid value) or an
 * integrity violation (class 23: a domain's constraint), whose error goes
 * to *err.  Any other error (a cancel, a timeout) goes on.
 */
static bool
load_try(LoadState *st, SPIPlanPtr plan, Datum *values, ErrorData **err)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		int			rc = SPI_execute_snapshot(plan, values, NULL, st->snap, InvalidSnapshot,
											  true, false, 0);

		if (rc != SPI_OK_SELECT)
			elog(ERROR, "scd2: checking staging values failed: %s", SPI_result_code_string(rc));
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		{
			edata->context = scd2_context_without_sql(edata->context,
										  psprintf("scd2: checking staging values (load of dimension %s from %s)",
												   st->cfg->dim_name, st->cfg->stg_name));
			ReThrowError(edata);
		}
		*err = edata;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

static SPIPlanPtr
load_prepare(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "scd2: preparing a check of staging values failed: %s",
			 SPI_result_code_string(SPI_result));
	return plan;
}

/* A staging value for a message: quoted, and at most 100 characters. */
static char *
shown_value(const char *v)
{
	int			len = pg_mbstrlen(v);

	if (len <= 100)
		return quote_literal_cstr(v);
	return psprintf("%s... (%d characters)",
					quote_literal_cstr(pnstrdup(v, pg_mbcharcliplen(v, strlen(v), 100))), len);
}

/* The error for a staging value the dimension cannot store as it is. */
static void
report_misfit(const Scd2Config *cfg, const Scd2ConvItem *item, const char *key,
			  const char *value, const char *stored, ErrorData *failure)
{
	int			code;

	if (failure)
		code = failure->sqlerrcode;
	else if (item->effective || item->category == TYPCATEGORY_DATETIME)
		code = ERRCODE_DATETIME_VALUE_OUT_OF_RANGE;
	else if (item->category == TYPCATEGORY_STRING || item->category == TYPCATEGORY_BITSTRING)
		code = ERRCODE_STRING_DATA_RIGHT_TRUNCATION;
	else if (item->category == TYPCATEGORY_NUMERIC)
		code = ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE;
	else
		code = ERRCODE_DATA_EXCEPTION;

	if (item->effective)
		ereport(ERROR,
				(errcode(code),
				 errmsg("effective time of key %s does not convert exactly to %s", key, item->dst_type_name),
				 failure
				 ? errdetail("Column \"%s\" of staging table %s holds %s, which the validity columns of dimension %s cannot hold: %s.",
							 item->name, cfg->stg_name, shown_value(value), cfg->dim_name, failure->message)
				 : errdetail("Column \"%s\" of staging table %s holds %s, which the validity columns of dimension %s would hold as %s.",
							 item->name, cfg->stg_name, shown_value(value), cfg->dim_name, shown_value(stored)),
				 errhint("Effective times are never rounded: give the staging column the type of the validity columns (%s), or values they hold exactly; nothing was loaded.",
						 item->dst_type_name)));
	ereport(ERROR,
			(errcode(code),
			 errmsg("value of column \"%s\" for key %s does not fit dimension %s", item->name, key, cfg->dim_name),
			 failure
			 ? errdetail("Staging value %s (type %s) cannot be stored as %s: %s.",
						 shown_value(value), item->src_type_name, item->dst_type_name, failure->message)
			 : errdetail("Staging value %s (type %s) would be stored as %s (type %s).",
						 shown_value(value), item->src_type_name, shown_value(stored), item->dst_type_name),
			 errhint("Values are never cut or rounded: widen column \"%s\" of the dimension, or correct the staging value; nothing was loaded.",
					 item->name)));
}

/*
 * Find the staging row whose value of one column fails to convert (the
 * whole-column conversion failed): walk the rows, converting each value in
 * a subtransaction of its own.  This runs only when a load is refused.
 */
static void
find_failing_value(LoadState *st, const Scd2ConvItem *item)
{
	const Scd2Config *cfg = st->cfg;
	Oid			argtypes[1] = {TEXTOID};
	SPIPlanPtr	one = load_prepare(scd2_sql_conv_one(item), 1, argtypes);
	SPIPlanPtr	rows = load_prepare(scd2_sql_conv_rows(cfg, item), 0, NULL);
	Portal		portal;

	PushActiveSnapshot(st->snap);
	portal = SPI_cursor_open(NULL, rows, NULL, NULL, true);
	PopActiveSnapshot();
	for (;;)
	{
		uint64		n;
		char	  **keys;
		char	  **vals;

		SPI_cursor_fetch(portal, true, 1000);
		n = SPI_processed;
		if (n == 0)
			break;
		keys = palloc(sizeof(char *) * n);
		vals = palloc(sizeof(char *) * n);
		for (uint64 i = 0; i < n; i++)
		{
			keys[i] = scd2_spi_text(i, 1);
			vals[i] = scd2_spi_text(i, 2);
		}
		for (uint64 i = 0; i < n; i++)
		{
			Datum		values[1] = {CStringGetTextDatum(vals[i])};
			ErrorData  *err = NULL;

			CHECK_FOR_INTERRUPTS();
			if (!load_try(st, one, values, &err))
				report_misfit(cfg, item, keys[i], vals[i], NULL, err);
		}
	}
	SPI_cursor_close(portal);
}

/*
 * Before anything else reads the staging table: every value whose type or
 * typmod differs from the dimension column's must convert, and convert
 * exactly -- what the dimension would store must equal the staging value
 * (cast back to its type).  So varchar(n)/char(n) are never cut, numeric
 * and integer values never rounded, an effective time never moved; a
 * value out of range is an error naming the column and the key, not the
 * bare "integer out of range" of a generated statement.  Staging columns
 * of the dimension's exact types are not scanned.
 */
void
scd2_check_conversions(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	int			n;
	Scd2ConvItem *items = scd2_conv_items(cfg, &n);
	ErrorData  *err = NULL;

	if (items == NULL)
		return;
	/* this file runs its statements itself (in subtransactions): check */
	scd2_exec_require_owner(true, "checking staging values");
	if (load_try(st, load_prepare(scd2_sql_conv_check(cfg, items, n), 0, NULL), NULL, &err))
	{
		int64	   *lossy = palloc(sizeof(int64) * n);

		for (int i = 0; i < n; i++)
			lossy[i] = scd2_spi_int8(0, i + 1);
		for (int i = 0; i < n; i++)
			if (lossy[i] > 0)
			{
				scd2_load_exec(st, scd2_sql_conv_lossy_row(cfg, &items[i]), SPI_OK_SELECT,
						  "finding a staging value that does not fit");
				if (SPI_processed > 0)
					report_misfit(cfg, &items[i], scd2_spi_text(0, 1), scd2_spi_text(0, 2),
								  scd2_spi_text(0, 3), NULL);
			}
		return;
	}

	/* Some value failed to convert: which column, which row. */
	for (int i = 0; i < n; i++)
	{
		ErrorData  *colerr = NULL;

		if (!load_try(st, load_prepare(scd2_sql_conv_force(cfg, &items[i]), 0, NULL), NULL, &colerr))
			find_failing_value(st, &items[i]);
	}
	ReThrowError(err);			/* not found again: the error as it was */
}
