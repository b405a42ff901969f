/*
 * changes.c -- reading and pruning the change log (changelog.c writes it):
 *   scd2.changes(run_id)                 a past run's change feed;
 *   scd2.prune_change_log(older_than, dimension)
 *                                        explicit retention.
 *
 * The change log holds dimension data (keys, Type 1 values), so PUBLIC
 * cannot read it: these functions check the caller's rights on the
 * dimension, then read or delete as the extension owner.  The feed itself
 * (the keys read back into the dimension's types, the surrogate keys of
 * inserted rows looked up in the dimension) is built as the dimension's
 * owner in a security-restricted operation (common/exec.c), never as the caller:
 * a superuser reading a run's changes runs no owner code as a superuser.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "access/table.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"
#include "citus/citus.h"

PG_FUNCTION_INFO_V1(scd2_changes);
PG_FUNCTION_INFO_V1(scd2_prune_change_log);

/*
 * The dimension of a run whose feed is read: it must still exist, and the
 * feed shows dimension rows, so the caller must be able to read them --
 * all of them: no row-level security applies (catalog/guard.c) -- and its
 * registered shape must hold.
 */
static char *
feed_dimension(Oid dim_oid, int64 run_id)
{
	char	   *dim_name;

	if (get_rel_relkind(dim_oid) == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the dimension of run %lld no longer exists", (long long) run_id)));
	dim_name = scd2_relation_display_name(dim_oid);
	if (pg_class_aclcheck(dim_oid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", dim_name),
				 errdetail("Reading the change feed of run %lld needs SELECT on its dimension.",
						   (long long) run_id)));
	scd2_refuse_row_security(dim_oid, scd2_relation_owner(dim_oid), "dimension", "scd2.changes");
	scd2_require_registered_shape(dim_oid, dim_name, true);
	return dim_name;
}

/*
 * The run's change-log rows, in the feed's order, as six arrays (action,
 * inserted, surrogate key, business key, valid_from, valid_to), read as
 * the extension owner.
 */
static void
read_logged_rows(int64 run_id, Datum *arrays)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};
	bool		isnull;

	scd2_exec_catalog(
		"SELECT COALESCE(pg_catalog.array_agg(c.action ORDER BY c.business_key, c.valid_from, c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.inserted ORDER BY c.business_key, c.valid_from, c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.surrogate_key ORDER BY c.business_key, c.valid_from, c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.business_key ORDER BY c.business_key, c.valid_from, c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from ORDER BY c.business_key, c.valid_from, c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_to ORDER BY c.business_key, c.valid_from, c.inserted), '{}')"
		"  FROM scd2.change_log c WHERE c.run_id OPERATOR(pg_catalog.=) $1",
		1, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the change log");
	for (int i = 0; i < 6; i++)
		arrays[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull),
							  false, -1);

}

/*
 * The same for a run logged by surrogate keys (load/batch_log.c): its
 * rows read back from the dimension, as the owner.
 */
static void
read_batch_rows(const Run *run, const char *dim_name, Datum *arrays)
{
	Scd2BatchLog b;
	bool		isnull;

	if (!scd2_batch_read(run->run_id, &b))
		elog(ERROR, "scd2: the change log of run %lld vanished", (long long) run->run_id);
	scd2_batch_require_unmoved(run, dim_name, &b);
	(void) scd2_batch_exec(run, dim_name,
						   psprintf("SELECT COALESCE(pg_catalog.array_agg(x.action ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" COALESCE(pg_catalog.array_agg(x.inserted ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" COALESCE(pg_catalog.array_agg(x.surrogate_key ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" COALESCE(pg_catalog.array_agg(x.business_key ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" COALESCE(pg_catalog.array_agg(x.valid_from ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" COALESCE(pg_catalog.array_agg(x.valid_to ORDER BY x.business_key, x.valid_from, x.inserted), '{}'),"
									" pg_catalog.count(*) FROM (%s) x",
									scd2_batch_rows_sql(run, dim_name, false, &b)),
						   &b, true, SPI_OK_SELECT, "reading back the rows the run wrote");
	scd2_batch_require_rows(run, dim_name, scd2_spi_int8(0, 7), &b);
	for (int i = 0; i < 6; i++)
		arrays[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull),
							  false, -1);
}

/*
 * The feed's query over the six arrays ($1..$6), run as the owner: the
 * validity values in the dimension's terms (a current row's valid_to as
 * the registration stored it, current_vt), and the surrogate keys of the
 * inserted rows read back by (key, valid_from) -- or, from_log, as the
 * load logged them (a Citus dimension: load/citus_load.c; Citus plans no
 * correlated subquery of a distributed table under a function scan).
 */
static char *
feed_sql(const char *dim_name, const char *current_vt, Scd2LoggedColumn *keys, int nkeys,
		 Scd2LoggedColumn *book, Scd2LoggedColumn *sk, int nsk, bool from_log)
{
	StringInfoData sql;
	char	   *marker;

	if (strcmp(current_vt, "null") == 0)
		marker = "NULL::pg_catalog.timestamptz";
	else
		marker = psprintf("CAST(CAST(%s AS %s) AS pg_catalog.timestamptz)", quote_literal_cstr(current_vt),
						  format_type_be_qualified(book[0].typid));
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT c.action, ");
	if (nsk > 0 && !from_log)
	{
		appendStringInfo(&sql, "COALESCE(c.sk, CASE WHEN c.ins THEN (SELECT CAST(t.%s AS pg_catalog.int8)"
						 " FROM %s t, pg_catalog.jsonb_to_record(c.k) AS s(", sk[0].ident, dim_name);
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&sql, "%s%s", i ? ", " : "", keys[i].def);
		appendStringInfoString(&sql, ") WHERE ");
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&sql, "t.%s %s s.%s AND ", keys[i].ident,
							 keys[i].eqop_sql ? keys[i].eqop_sql : "=", keys[i].ident);
		appendStringInfo(&sql, "t.%s %s %s) END), ", book[0].ident,
						 book[0].eqop_sql ? book[0].eqop_sql : "=",
						 scd2_changelog_decode_sql(book[0].typid, "c.vf"));
	}
	else
		appendStringInfoString(&sql, "c.sk, ");
	appendStringInfo(&sql, "c.k, CAST(%s AS pg_catalog.timestamptz),"
					 " CASE WHEN c.vt IS NULL THEN %s ELSE CAST(%s AS pg_catalog.timestamptz) END"
					 " FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4),"
					 " pg_catalog.unnest($5), pg_catalog.unnest($6)) WITH ORDINALITY AS c(action, ins, sk, k, vf, vt, n)"
					 " ORDER BY c.n",
					 scd2_changelog_decode_sql(book[0].typid, "c.vf"), marker,
					 scd2_changelog_decode_sql(book[0].typid, "c.vt"));
	return sql.data;
}

Datum
scd2_changes(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	int64		run_id;
	Run			run;
	char	   *dim_name;
	Relation	rel;
	Scd2LoggedColumn *keys;
	Scd2LoggedColumn *book;
	Scd2LoggedColumn *sk;
	int			nkeys;
	int			nbook;
	int			nsk;
	Datum		arrays[6];
	Oid			arrtypes[6] = {TEXTARRAYOID, BOOLARRAYOID, INT8ARRAYOID, JSONBARRAYOID,
	TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID};
	char	   *sql;
	int			pin;
	int			nest;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run_id must not be NULL")));
	run_id = PG_GETARG_INT64(0);
	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();

	/* the run, with a change log that can be read (run.c) */
	scd2_revert_read_run(run_id, true, &run);
	scd2_revert_require_change_log(&run);

	dim_name = feed_dimension(run.dim_oid, run_id);
	rel = table_open(run.dim_oid, AccessShareLock);
	keys = scd2_changelog_columns(rel, run.key_columns, run_id, dim_name, &nkeys);
	book = scd2_changelog_columns(rel, run.bookkeeping, run_id, dim_name, &nbook);
	sk = scd2_changelog_columns(rel, run.surrogate_key, run_id, dim_name, &nsk);
	table_close(rel, NoLock);

	if (run.first_load_rows >= 0)
	{
		/* a first load logged compactly: its rows from the dimension (compact.c) */
		scd2_compact_first_load_feed(&run, dim_name, keys, nkeys, book, sk, nsk);
	}
	else
	{
		if (run.batch)
			read_batch_rows(&run, dim_name, arrays);
		else
			read_logged_rows(run_id, arrays);
		/* a batch's rows carry their surrogate keys */
		sql = feed_sql(dim_name, run.current_valid_to, keys, nkeys, book, sk, nsk,
					   run.batch || scd2_citus_table(run.dim_oid, NULL) != SCD2_CITUS_NONE);
		nest = NewGUCNestLevel();
		scd2_pin_text_forms();
		(void) scd2_exec_as_owner(scd2_relation_owner(run.dim_oid), sql, 6, arrtypes, arrays, true,
								  SPI_OK_SELECT, "reading the change feed",
								  psprintf("scd2: reading the change feed of run %lld of dimension %s",
										   (long long) run_id, dim_name));
		AtEOXact_GUC(true, nest);
	}
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		row[5];
		bool		nulls[5];

		for (int c = 0; c < 5; c++)
			row[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
	}

	scd2_unpin(pin);
	SPI_finish();
	return (Datum) 0;
}


/* Delete the change log of the runs (an int8[]) and mark them pruned, as the extension owner. */
static void
prune_runs(Datum runs)
{
	Oid			rtypes[1] = {INT8ARRAYOID};
	Datum		rvalues[1] = {runs};

	scd2_exec_catalog("DELETE FROM scd2.change_log"
									 " WHERE run_id OPERATOR(pg_catalog.=) ANY ($1)",
									 1, rtypes, rvalues, NULL, false, SPI_OK_DELETE,
									 "pruning the change log");
	if (scd2_changelog_batch_installed())
		scd2_exec_catalog("DELETE FROM scd2.change_log_batches"
						  " WHERE run_id OPERATOR(pg_catalog.=) ANY ($1)",
						  1, rtypes, rvalues, NULL, false, SPI_OK_DELETE,
						  "pruning the change log");
	scd2_exec_catalog("UPDATE scd2.change_log_runs SET pruned_at = pg_catalog.now()"
									 " WHERE run_id OPERATOR(pg_catalog.=) ANY ($1)",
									 1, rtypes, rvalues, NULL, false, SPI_OK_UPDATE,
									 "marking pruned runs");
}

/*
 * Delete the change log of the runs logged more than older_than ago, of
 * one dimension or of every dimension the caller owns (a superuser: every
 * dimension, also dropped ones); their headers stay, marked pruned, so a
 * revert can say why it cannot.  Returns the number of runs pruned.
 */
Datum
scd2_prune_change_log(PG_FUNCTION_ARGS)
{
	Interval   *older_than;
	Oid			dim_oid = PG_ARGISNULL(1) ? InvalidOid : PG_GETARG_OID(1);
	Oid			argtypes[3] = {INTERVALOID, OIDOID, BOOLOID};
	Datum		values[3];
	char		nulls[3] = {' ', ' ', ' '};
	Datum		runs;
	bool		isnull;
	int64		npruned;
	int			pin;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("older_than must not be NULL"),
				 errhint("Pass how old a run's change log must be to be pruned, e.g. interval '90 days'.")));
	older_than = PG_GETARG_INTERVAL_P(0);
	if (older_than->month < 0 || older_than->day < 0 || older_than->time < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("older_than must not be negative"),
				 errhint("Pass interval '0' to prune every run logged so far.")));
	if (OidIsValid(dim_oid))
		scd2_require_relation_owner(dim_oid, "Only the owner of a dimension can prune its change log.", NULL);
	values[0] = PointerGetDatum(older_than);
	values[1] = ObjectIdGetDatum(dim_oid);
	values[2] = BoolGetDatum(superuser());
	if (!OidIsValid(dim_oid))
		nulls[1] = 'n';

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();

	/* the runs to prune, as the caller: owned dimensions only */
	(void) scd2_exec_catalog_as_caller(
		"SELECT COALESCE(pg_catalog.array_agg(r.run_id), '{}'), pg_catalog.count(*)"
		"  FROM scd2.change_log_runs r LEFT JOIN pg_catalog.pg_class k"
		"    ON k.oid OPERATOR(pg_catalog.=) r.dimension::pg_catalog.oid"
		" WHERE r.logged AND r.pruned_at IS NULL"
		"   AND r.logged_at OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1)"
		"   AND ($2 IS NULL OR r.dimension OPERATOR(pg_catalog.=) $2::pg_catalog.regclass)"
		"   AND CASE WHEN k.oid IS NULL OR (pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.->>) 'dimension_dropped_at') IS NOT NULL THEN $3 ELSE pg_catalog.pg_has_role(k.relowner, 'USAGE') END",
		3, argtypes, values, nulls, "finding runs to prune");
	runs = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull), false, -1);
	npruned = scd2_spi_int8(0, 2);

	if (npruned > 0)
		prune_runs(runs);

	scd2_unpin(pin);
	SPI_finish();
	PG_RETURN_INT64(npruned);
}
