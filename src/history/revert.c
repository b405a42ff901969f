/*
 * revert.c -- scd2.revert(run_id): undo one successful load exactly, from
 * its change log (changelog.c); the run is read by run.c.
 *
 * Order of work:
 *   1. read the run (audit row and change-log header) and refuse what
 *      cannot be reverted: unknown runs, failed runs, dry runs, reverts,
 *      runs already reverted, runs without a change log or whose change
 *      log was pruned;
 *   2. check the privileges a load needs (SELECT, INSERT, UPDATE) and
 *      DELETE, and take a load's lock on the dimension (SHARE ROW
 *      EXCLUSIVE: loads and reverts of one dimension queue up, readers do
 *      not wait); read the run again under the lock;
 *   3. refuse unless the run is the newest successful load of its
 *      dimension (the error names the later runs) -- in a REPEATABLE READ
 *      or SERIALIZABLE transaction also in the latest snapshot, and the
 *      dimension must not have changed since the transaction's snapshot
 *      (serialization_failure, common/snapshot_check.c); refuse when the
 *      dimension is registered again with other key or bookkeeping
 *      columns;
 *   4. refuse when a row the run wrote is no longer as the run left it
 *      (valid_to, is_current: closed, reopened or deleted by hand since),
 *      naming the rows; delete the versions the run inserted, then
 *      restore valid_to, is_current and the Type 1 columns of the rows it
 *      updated (deleting first: the restored current rows must not meet
 *      the current rows the run inserted in the unique index on current
 *      rows), then write back whole the inferred versions it completed
 *      (load/complete.c; 'complete' rows); each statement must touch
 *      exactly the rows the change log names; a valid_to that meant "current" under the run's
 *      current_valid_to becomes the current registration's; refuse when
 *      the keys the run touched now have overlapping versions (a version
 *      added by hand since, where the restored one reopens);
 *   5. write the revert's own audit row (status 'revert'), mark the run
 *      'reverted';
 *   6. re-key the dimension's maintained fact tables (facts.c; checked in
 *      2), their count into the audit row (facts_rekeyed).
 * Everything happens in the caller's transaction: a refused or failed
 * revert writes nothing.
 *
 * The change log is read as the extension owner (it holds dimension data:
 * PUBLIC cannot read it); the dimension is written, once the caller's
 * privileges are checked, as its owner in a security-restricted
 * operation, the values passed in as parameters.
 */
#include "scd2.h"

#include "access/table.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"

PG_FUNCTION_INFO_V1(scd2_revert);

/* A load's privileges on the dimension, and DELETE. */
static void
check_privileges(Oid dim_oid, const char *dim_name)
{
	AclMode		mode = ACL_SELECT | ACL_INSERT | ACL_UPDATE | ACL_DELETE;
	AclMode		missing = mode & ~pg_class_aclmask(dim_oid, GetUserId(), mode, ACLMASK_ALL);

	if (missing != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for dimension %s", dim_name),
				 errdetail("A revert needs what a load needs (SELECT, INSERT and UPDATE) and DELETE on the dimension; missing:%s%s%s%s.",
						   (missing & ACL_SELECT) ? " SELECT" : "",
						   (missing & ACL_INSERT) ? " INSERT" : "",
						   (missing & ACL_UPDATE) ? " UPDATE" : "",
						   (missing & ACL_DELETE) ? " DELETE" : "")));
}

/* "t.k = s.k AND ...": dimension row t of business key s. */
static void
append_key_match(StringInfo buf, Scd2LoggedColumn *keys, int nkeys)
{
	for (int i = 0; i < nkeys; i++)
		appendStringInfo(buf, "%st.%s %s s.%s", i ? " AND " : "", keys[i].ident, keys[i].eqop_sql, keys[i].ident);
}

/* "jsonb_to_record(c.k) AS s(keys)": the logged business key c.k as columns. */
static void
append_key_record(StringInfo buf, const char *json, Scd2LoggedColumn *keys, int nkeys)
{
	appendStringInfo(buf, "pg_catalog.jsonb_to_record(%s) AS s(", json);
	for (int i = 0; i < nkeys; i++)
		appendStringInfo(buf, "%s%s", i ? ", " : "", keys[i].def);
	appendStringInfoString(buf, ")");
}

/*
 * "ROWS FROM (unnest($1), unnest($2)...) AS c(k, vf...) CROSS JOIN LATERAL
 * jsonb_to_record(c.k) AS s(keys) WHERE t.k = s.k AND t.vf = vf": the
 * logged rows matched to the dimension's rows by business key and
 * valid_from (the as-of index).  The Type 1 before-images as y(...): text
 * forms (text_type1, 0.4 on) or values of the columns' types (0.3).
 */
static void
append_source(StringInfo buf, Scd2LoggedColumn *keys, int nkeys, const Scd2LoggedColumn *vf,
			  const char *arrays, const char *names, Scd2LoggedColumn *type1, int ntype1,
			  bool text_type1)
{
	appendStringInfo(buf, " ROWS FROM (%s) AS c(%s) CROSS JOIN LATERAL ", arrays, names);
	append_key_record(buf, "c.k", keys, nkeys);
	if (ntype1 > 0)
	{
		appendStringInfoString(buf, " CROSS JOIN LATERAL pg_catalog.jsonb_to_record(c.y) AS y(");
		for (int i = 0; i < ntype1; i++)
			appendStringInfo(buf, "%s%s", i ? ", " : "",
							 text_type1 ? psprintf("%s pg_catalog.text", type1[i].ident) : type1[i].def);
		appendStringInfoString(buf, ")");
	}
	appendStringInfoString(buf, " WHERE ");
	append_key_match(buf, keys, nkeys);
	appendStringInfo(buf, " AND t.%s %s %s", vf->ident, vf->eqop_sql,
					 scd2_changelog_decode_sql(vf->typid, "c.vf"));
}

/*
 * Run a revert statement on the dimension; rows touched.  It runs as the
 * dimension's owner in a security-restricted operation (common/exec.c), as core
 * runs REFRESH MATERIALIZED VIEW (and as a load runs): the owner's code
 * (triggers, defaults, index expressions) never runs with the rights of
 * whoever reverts, settings it makes are undone, and an error of its code
 * shows the revert in its context, not the generated statement.
 */
static int64
exec_dml(const Run *run, const char *dim_name, const char *sql, int nargs, Oid *argtypes,
		 Datum *values, int expected)
{
	int			nest = NewGUCNestLevel();
	uint64		n;

	/* probe the (key, valid_from) index for each logged row */
	scd2_set_local("enable_hashjoin", "off");
	scd2_set_local("enable_mergejoin", "off");
	scd2_pin_text_forms();
	n = scd2_exec_as_owner(scd2_relation_owner(run->dim_oid), sql, nargs, argtypes, values, false,
						   expected, "reverting",
						   psprintf("scd2: reverting run %lld of dimension %s",
									(long long) run->run_id, dim_name));
	AtEOXact_GUC(true, nest);
	return (int64) n;
}

/*
 * The surrogate keys of the deleted rows (the result of the DELETE ...
 * RETURNING), written into the change log so that scd2.changes still
 * shows them.
 */
static void
keep_surrogate_keys(int64 run_id)
{
	uint64		n = SPI_processed;
	Datum	   *k = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *vf = palloc(sizeof(Datum) * Max(n, 1));
	Datum	   *sk = palloc(sizeof(Datum) * Max(n, 1));
	bool	   *sknull = palloc(sizeof(bool) * Max(n, 1));
	int			dims[1] = {(int) n};
	int			lbs[1] = {1};
	Oid			argtypes[4] = {INT8OID, JSONBARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID};
	Datum		values[4];
	bool		isnull;

	for (uint64 i = 0; i < n; i++)
	{
		k[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		vf[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
		sk[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &sknull[i]);
	}
	values[0] = Int64GetDatum(run_id);
	values[1] = PointerGetDatum(construct_array(k, (int) n, JSONBOID, -1, false, TYPALIGN_INT));
	values[2] = PointerGetDatum(construct_array(vf, (int) n, TIMESTAMPTZOID, sizeof(TimestampTz),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[3] = PointerGetDatum(construct_md_array(sk, sknull, 1, dims, lbs, INT8OID, sizeof(int64),
												   FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	scd2_exec_catalog("UPDATE scd2.change_log c SET surrogate_key = r.sk"
									 "  FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS r(k, vf, sk)"
									 " WHERE c.run_id OPERATOR(pg_catalog.=) $1 AND c.inserted"
									 "   AND c.business_key OPERATOR(pg_catalog.=) r.k"
									 "   AND c.valid_from OPERATOR(pg_catalog.=) r.vf",
									 4, argtypes, values, NULL, false, SPI_OK_UPDATE,
									 "keeping the surrogate keys of reverted rows");
}

/* The dimension touched exactly the rows the change log names, or an error. */
static void
require_count(int64 got, int64 want, const char *what, int64 run_id, const char *dim_name)
{
	if (got != want)
		scd2_report_run_rows_changed(dim_name, run_id,
									 psprintf("Run %lld %s %lld rows; %lld of them are still there. Nothing was reverted.",
											  (long long) run_id, what, (long long) want, (long long) got),
									 "The rows were changed outside scd2 since the run; repair them by hand.");
}

/* Mark the reverted run, as the extension owner. */
static void
mark_reverted(int64 run_id, int64 revert_id)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(run_id), Int64GetDatum(revert_id)};

	scd2_exec_catalog("UPDATE scd2.audit_log SET status = 'reverted'"
									 " WHERE run_id OPERATOR(pg_catalog.=) $1",
									 2, argtypes, values, NULL, false, SPI_OK_UPDATE,
									 "marking the reverted run in the audit log");
	scd2_exec_catalog("UPDATE scd2.change_log_runs SET reverted_by = $2"
									 " WHERE run_id OPERATOR(pg_catalog.=) $1",
									 2, argtypes, values, NULL, false, SPI_OK_UPDATE,
									 "marking the reverted run in the change log");
}

/*
 * The current-row conventions: the run's (how its change log's valid_to
 * values say "current") and the registration's in force (what a row the
 * revert makes current again gets).
 */
typedef struct RevertConvention
{
	char	   *run_open;		/* the run's current valid_to, as the log keeps it; NULL: SQL NULL */
	char	   *now_open;		/* the stored current valid_to now: "NULL" or CAST(...) */
	bool		now_null;
} RevertConvention;

/* The dimension columns a run's change log names. */
typedef struct RevertColumns
{
	Scd2LoggedColumn *keys;
	Scd2LoggedColumn *book;		/* valid_from, valid_to */
	Scd2LoggedColumn *cur;
	Scd2LoggedColumn *sk;
	Scd2LoggedColumn *type1;
	int			nkeys;
	int			nbook;
	int			ncur;
	int			nsk;
	int			ntype1;
	RevertConvention conv;
} RevertColumns;

static int64 write_back(const Run *run, const char *dim_name, const RevertColumns *c, int64 nmoved,
						Datum mv_keys, Datum mv_vf, int64 nrows, Datum rows, const char *moved_word,
						const char *rows_word);

/* The conventions of the run and of the registration in force (current_vt). */
static void
read_conventions(const Run *run, const char *current_vt, RevertColumns *c)
{
	Oid			vt_type = c->book[1].typid;
	const char *type_sql = format_type_be_qualified(vt_type);

	c->conv.run_open = strcmp(run->current_valid_to, "null") == 0 ? NULL :
		scd2_changelog_encode_sql(vt_type, psprintf("CAST(%s AS %s)", quote_literal_cstr(run->current_valid_to),
													type_sql));
	c->conv.now_null = strcmp(current_vt, "null") == 0;
	c->conv.now_open = c->conv.now_null ? "NULL" :
		psprintf("CAST(%s AS %s)", quote_literal_cstr(current_vt), type_sql);
}

/* A logged before-image valid_to, as the registration in force stores it. */
static char *
restored_vt_sql(const RevertColumns *c, const char *logged)
{
	return psprintf("CASE WHEN %s THEN %s ELSE %s END",
					c->conv.run_open ? psprintf("%s OPERATOR(pg_catalog.=) %s", logged, c->conv.run_open) :
					psprintf("%s IS NULL", logged),
					c->conv.now_open, scd2_changelog_decode_sql(c->book[1].typid, logged));
}

/* The valid_to the run left (logged: NULL = current), as stored now. */
static char *
left_vt_sql(const RevertColumns *c, const char *logged)
{
	char	   *decoded = scd2_changelog_decode_sql(c->book[1].typid, logged);

	return c->conv.now_null ? decoded : psprintf("COALESCE(%s, %s)", decoded, c->conv.now_open);
}

/* The first rows of a refusal's list (column 1), "a, b, c" and "..." past five. */
static char *
listed_rows(uint64 total)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (uint64 i = 0; i < SPI_processed; i++)
		appendStringInfo(&buf, "%s%s", i ? "; " : "", SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1));
	if (total > SPI_processed)
		appendStringInfoString(&buf, "; ...");
	return buf.data;
}

static void
read_columns(const Run *run, const char *dim_name, RevertColumns *c)
{
	Relation	rel = table_open(run->dim_oid, AccessShareLock);
	int64		run_id = run->run_id;

	c->keys = scd2_changelog_columns(rel, run->key_columns, run_id, dim_name, &c->nkeys);
	c->book = scd2_changelog_columns(rel, run->bookkeeping, run_id, dim_name, &c->nbook);
	c->cur = scd2_changelog_columns(rel, run->is_current, run_id, dim_name, &c->ncur);
	c->sk = scd2_changelog_columns(rel, run->surrogate_key, run_id, dim_name, &c->nsk);
	c->type1 = scd2_changelog_columns(rel, run->type1_columns, run_id, dim_name, &c->ntype1);
	table_close(rel, NoLock);
	for (int i = 0; i < c->nkeys; i++)
		if (c->keys[i].eqop_sql == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("business key column \"%s\" of %s has type %s, which has no equality operator",
							c->keys[i].name, dim_name, format_type_be(c->keys[i].typid))));
}

/*
 * Step 4, first: every row the run wrote is still there as the run left
 * it -- its valid_to (and is_current) -- or an error naming the first
 * ones.  A revert would otherwise throw away a close, a reopening or a
 * deletion made since (by hand: a later load is refused in step 3).
 * The dimension is read by one join of the logged rows, the shape of the
 * revert's own statements (Citus plans it; it plans no correlated
 * subquery of a distributed table under a function scan); which logged
 * rows it did not find is then worked out on the arrays alone.
 */
static void
require_rows_as_left(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	StringInfoData sql;
	Oid			argtypes[5] = {JSONBARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID,
	JSONBARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		values[5] = {lg->all_keys, lg->all_vf, lg->all_vt, 0, 0};
	uint64		nfound;
	Datum	   *k;
	Datum	   *vf;
	int			nsame = 0;
	uint64		total;
	bool		isnull;
	int			nest;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT c.k, c.vf FROM %s t,", dim_name);
	append_source(&sql, c->keys, c->nkeys, &c->book[0],
				  "pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)", "k, vf, vt", NULL, 0, false);
	appendStringInfo(&sql, " AND t.%s IS NOT DISTINCT FROM %s", c->book[1].ident, left_vt_sql(c, "c.vt"));
	if (c->ncur > 0)
		appendStringInfo(&sql, " AND t.%s IS NOT DISTINCT FROM (c.vt IS NULL)", c->cur[0].ident);
	nfound = (uint64) exec_dml(run, dim_name, sql.data, 3, argtypes, values, SPI_OK_SELECT);
	if (nfound == (uint64) lg->nrows)
		return;

	/* the rows found as the run left them, as arrays */
	k = palloc(sizeof(Datum) * Max(nfound, 1));
	vf = palloc(sizeof(Datum) * Max(nfound, 1));
	for (uint64 i = 0; i < nfound; i++)
	{
		k[nsame] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
		vf[nsame++] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull);
	}
	values[3] = PointerGetDatum(construct_array(k, nsame, JSONBOID, -1, false, TYPALIGN_INT));
	values[4] = PointerGetDatum(construct_array(vf, nsame, TIMESTAMPTZOID, sizeof(TimestampTz),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	resetStringInfo(&sql);
	appendStringInfo(&sql,
					 "SELECT pg_catalog.format('key %%s from %%s', c.k, CAST(%s AS pg_catalog.text)), pg_catalog.count(*) OVER ()"
					 "  FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS c(k, vf)"
					 " WHERE NOT EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest($4), pg_catalog.unnest($5)) AS m(k, vf)"
					 "                    WHERE m.k OPERATOR(pg_catalog.=) c.k AND m.vf OPERATOR(pg_catalog.=) c.vf)"
					 " ORDER BY c.k, c.vf LIMIT 5",
					 scd2_changelog_decode_sql(c->book[0].typid, "c.vf"));
	/* valid_from in ISO form, whatever the session's DateStyle */
	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	/* arrays of jsonb and timestamptz only: no value of a user type */
	(void) scd2_exec_catalog(sql.data, 5, argtypes, values, NULL, true, SPI_OK_SELECT,
							 "listing the changed rows");
	AtEOXact_GUC(false, nest);
	if (SPI_processed == 0)
		return;					/* a logged row found twice: the counts check in 4a/4b names it */
	total = (uint64) scd2_spi_int8(0, 2);
	scd2_report_run_rows_changed(dim_name, run->run_id,
								 psprintf("%llu of the %lld rows run %lld wrote were changed (valid_to, is_current) or deleted since: %s. Nothing was reverted.",
										  (unsigned long long) total, (long long) lg->nrows, (long long) run->run_id,
										  listed_rows(total)),
								 "The rows were changed outside scd2 since the run; put them back as the run left them, or repair the dimension by hand.");
}

/*
 * Step 4, last (after the writes, in the same transaction): no two
 * versions of a key the run touched overlap, nor are two of them current
 * -- as when a version was added by hand where the restored one reopens.
 * One join of the keys with the dimension, as above; the window is
 * partitioned by the business key (a Citus dimension's distribution
 * column is one of its columns).
 */
static void
require_no_overlap(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	StringInfoData sql;
	StringInfoData keys;
	Oid			argtypes[1] = {JSONBARRAYOID};
	Datum		values[1] = {lg->all_keys};
	const char *vt = c->conv.now_null ? psprintf("t.%s", c->book[1].ident) :
		psprintf("NULLIF(t.%s, %s)", c->book[1].ident, c->conv.now_open);
	uint64		total;

	initStringInfo(&keys);
	for (int i = 0; i < c->nkeys; i++)
		appendStringInfo(&keys, "%st.%s", i ? ", " : "", c->keys[i].ident);
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "SELECT d.key, pg_catalog.count(*) OVER () FROM ("
					 " SELECT DISTINCT pg_catalog.format('key %%s', v.k) AS key FROM ("
					 "  SELECT k.k, %s AS vt, pg_catalog.lead(t.%s) OVER (PARTITION BY %s ORDER BY t.%s) AS nvf"
					 "    FROM %s t, (SELECT DISTINCT u.k FROM pg_catalog.unnest($1) AS u(k)) AS k CROSS JOIN LATERAL ",
					 vt, c->book[0].ident, keys.data, c->book[0].ident, dim_name);
	append_key_record(&sql, "k.k", c->keys, c->nkeys);
	appendStringInfoString(&sql, " WHERE ");
	append_key_match(&sql, c->keys, c->nkeys);
	appendStringInfo(&sql, ") AS v WHERE v.nvf OPERATOR(pg_catalog.<) COALESCE(v.vt, CAST('infinity' AS %s))) AS d"
					 " ORDER BY d.key LIMIT 5", format_type_be_qualified(c->book[0].typid));
	if (exec_dml(run, dim_name, sql.data, 1, argtypes, values, SPI_OK_SELECT) == 0)
		return;
	total = (uint64) scd2_spi_int8(0, 2);
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("reverting run %lld would leave overlapping versions in dimension %s", (long long) run->run_id, dim_name),
			 errdetail("Once the rows run %lld changed are restored, versions overlap for %s; versions were added to these keys since the run. Nothing was reverted.",
					   (long long) run->run_id, listed_rows(total)),
			 errhint("Remove or shorten the versions added since the run, or repair the dimension by hand.")));
}

/* Step 4a: delete the versions the run inserted; returns how many. */
static int64
delete_inserted(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	StringInfoData sql;
	int64		n;
	Oid			argtypes[2] = {JSONBARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		values[2] = {lg->ins_keys, lg->ins_vf};

	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s t USING", dim_name);
	append_source(&sql, c->keys, c->nkeys, &c->book[0], "pg_catalog.unnest($1), pg_catalog.unnest($2)", "k, vf", NULL, 0, false);
	appendStringInfo(&sql, " RETURNING c.k, c.vf, %s",
					 c->nsk > 0 ? psprintf("CAST(t.%s AS pg_catalog.int8)", c->sk[0].ident) : "NULL::pg_catalog.int8");
	n = exec_dml(run, dim_name, sql.data, 2, argtypes, values, SPI_OK_DELETE_RETURNING);
	require_count(n, lg->ninserted, "inserted", run->run_id, dim_name);
	if (c->nsk > 0)
		keep_surrogate_keys(run->run_id);
	return n;
}

/*
 * Step 4a, order-free runs (load/arrival.c): the rows the run extended are
 * deleted (found where the run left them), then they and the rows it
 * removed are written back whole from their logged before-images (each
 * column's text form, read back with its type's input, as the owner; an
 * identity surrogate key keeps its value).  Returns the rows written back.
 */
static int64
write_back_rows(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	return write_back(run, dim_name, c, lg->nmoved, lg->mv_keys, lg->mv_vf, lg->nrestored, lg->rs_rows,
					  "extended", "extended or removed");
}

/*
 * Step 4c: the inferred versions the run completed in place
 * (load/complete.c), after the rows it updated are restored: deleted where
 * the run left them, written back whole as they were, their surrogate key
 * kept.  Returns how many.
 */
static int64
write_back_completed(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	return write_back(run, dim_name, c, lg->ncompleted, lg->cp_keys, lg->cp_vf, lg->ncompleted,
					  lg->cp_rows, "completed", "completed");
}

/*
 * The rows of nmoved (keys, valid_from as the run left them) deleted, then
 * the nrows whole rows (jsonb of text forms) inserted; moved_word and
 * rows_word name them in a count's error.
 */
static int64
write_back(const Run *run, const char *dim_name, const RevertColumns *c, int64 nmoved,
		   Datum mv_keys, Datum mv_vf, int64 nrows, Datum rows, const char *moved_word,
		   const char *rows_word)
{
	StringInfoData sql;
	StringInfoData cols;
	StringInfoData vals;
	Relation	rel;
	TupleDesc	desc;
	int64		n;
	Oid			argtypes[2] = {JSONBARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		values[2] = {mv_keys, mv_vf};

	if (nmoved > 0)
	{
		initStringInfo(&sql);
		appendStringInfo(&sql, "DELETE FROM %s t USING", dim_name);
		append_source(&sql, c->keys, c->nkeys, &c->book[0], "pg_catalog.unnest($1), pg_catalog.unnest($2)", "k, vf", NULL, 0, false);
		require_count(exec_dml(run, dim_name, sql.data, 2, argtypes, values, SPI_OK_DELETE),
					  nmoved, moved_word, run->run_id, dim_name);
	}
	initStringInfo(&cols);
	initStringInfo(&vals);
	rel = table_open(run->dim_oid, AccessShareLock);
	desc = RelationGetDescr(rel);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);

		if (att->attisdropped || att->attgenerated)
			continue;
		appendStringInfo(&cols, "%s%s", cols.len ? ", " : "", quote_identifier(NameStr(att->attname)));
		appendStringInfo(&vals, "%sCAST(r.r OPERATOR(pg_catalog.->>) %s AS %s)", vals.len ? ", " : "",
						 quote_literal_cstr(NameStr(att->attname)),
						 format_type_extended(att->atttypid, att->atttypmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	}
	table_close(rel, NoLock);
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE SELECT %s FROM pg_catalog.unnest($1) AS r(r)",
					 dim_name, cols.data, vals.data);
	values[0] = rows;
	n = exec_dml(run, dim_name, sql.data, 1, argtypes, values, SPI_OK_INSERT);
	require_count(n, nrows, rows_word, run->run_id, dim_name);
	return n;
}

/* Step 4b: restore the rows the run updated; returns how many. */
static int64
restore_updated(const Run *run, const char *dim_name, const RevertColumns *c, const Logged *lg)
{
	StringInfoData sql;
	int64		n;
	Oid			argtypes[5] = {JSONBARRAYOID, TIMESTAMPTZARRAYOID, TIMESTAMPTZARRAYOID,
	BOOLARRAYOID, JSONBARRAYOID};
	Datum		values[5] = {lg->upd_keys, lg->upd_vf, lg->upd_vt, lg->upd_cur, lg->upd_type1};

	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s t SET %s = %s", dim_name, c->book[1].ident, restored_vt_sql(c, "c.vt"));
	if (c->ncur > 0)
		appendStringInfo(&sql, ", %s = c.cur", c->cur[0].ident);
	for (int i = 0; i < c->ntype1; i++)
		if (run->old_type1_text)
			appendStringInfo(&sql, ", %s = CAST(y.%s AS %s)", c->type1[i].ident, c->type1[i].ident,
							 c->type1[i].type_sql);
		else
			appendStringInfo(&sql, ", %s = y.%s", c->type1[i].ident, c->type1[i].ident);
	appendStringInfoString(&sql, " FROM");
	append_source(&sql, c->keys, c->nkeys, &c->book[0], "pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3),"
				  " pg_catalog.unnest($4), pg_catalog.unnest($5)", "k, vf, vt, cur, y",
				  c->type1, c->ntype1, run->old_type1_text);
	n = exec_dml(run, dim_name, sql.data, 5, argtypes, values, SPI_OK_UPDATE);
	require_count(n, lg->nupdated, "updated", run->run_id, dim_name);
	return n;
}

/*
 * Step 4 of a first load logged compactly (changelog.c: it inserted every
 * row the dimension had right after it, first_load_rows of them, and its
 * change log names none): the dimension must hold as many rows, every one
 * current as the run left it (a row added, deleted, closed or reopened
 * since: an error, nothing written); then every row is deleted and
 * written, as the change log of an insert keeps it (with its surrogate
 * key), into scd2.change_log, so that scd2.changes of the reverted run
 * reads it as any other.  The DELETE ... RETURNING computes the logged
 * values (jsonb of the key: its type's output) as the owner, into the
 * extension owner's work table; the extension owner copies them.
 */
static int64
revert_first_load(const Run *run, const char *dim_name, const RevertColumns *c)
{
	char	   *key = scd2_changelog_key_json_sql(c->keys, c->nkeys, "t");
	char	   *vf = scd2_changelog_encode_sql(c->book[0].typid, psprintf("t.%s", c->book[0].ident));
	char	   *as_left = psprintf("t.%s IS NOT DISTINCT FROM %s%s", c->book[1].ident,
								   c->conv.now_null ? "NULL" : c->conv.now_open,
								   c->ncur > 0 ? psprintf(" AND t.%s IS NOT DISTINCT FROM true", c->cur[0].ident) : "");
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run->run_id)};
	int64		rows;
	int64		changed;
	int64		n;

	exec_dml(run, dim_name,
			 psprintf("SELECT pg_catalog.count(*), pg_catalog.count(*) FILTER (WHERE NOT (%s)),"
					  " pg_catalog.string_agg(pg_catalog.format('key %%s from %%s', %s, t.%s), '; ')"
					  "   FILTER (WHERE NOT (%s))"
					  " FROM %s t", as_left, key, c->book[0].ident, as_left, dim_name),
			 0, NULL, NULL, SPI_OK_SELECT);
	rows = scd2_spi_int8(0, 1);
	changed = scd2_spi_int8(0, 2);
	if (rows != run->first_load_rows)
		scd2_report_run_rows_changed(dim_name, run->run_id,
									 psprintf("Run %lld, a first load into the empty dimension, inserted %lld rows, every row it had; it has %lld now. Nothing was reverted.",
											  (long long) run->run_id, (long long) run->first_load_rows, (long long) rows),
									 "Rows were added or deleted outside scd2 since the run; repair the dimension by hand.");
	if (changed > 0)
	{
		char	   *list = scd2_spi_text(0, 3);

		/* the first five, as require_rows_as_left lists them */
		for (int i = 0, seen = 0; list[i]; i++)
			if (list[i] == ';' && ++seen == 5)
			{
				list[i] = '\0';
				list = psprintf("%s; ...", list);
				break;
			}
		scd2_report_run_rows_changed(dim_name, run->run_id,
									 psprintf("%lld of the %lld rows run %lld wrote were changed (valid_to, is_current) since: %s. Nothing was reverted.",
											  (long long) changed, (long long) rows, (long long) run->run_id, list),
									 "The rows were changed outside scd2 since the run; put them back as the run left them, or repair the dimension by hand.");
	}

	scd2_changelog_work_table(scd2_relation_owner(run->dim_oid));
	n = exec_dml(run, dim_name,
				 psprintf("WITH d AS (DELETE FROM %s t RETURNING %s AS k, %s AS vf, %s AS sk)"
						  " INSERT INTO " LOG_TABLE " (" LOG_COLS_KEYS ")"
						  " SELECT " WT_ACT_INSERT ", true, d.sk, d.k, d.vf FROM d",
						  dim_name, key, vf,
						  c->nsk > 0 ? psprintf("CAST(t.%s AS pg_catalog.int8)", c->sk[0].ident) : "NULL::pg_catalog.int8"),
				 0, NULL, NULL, SPI_OK_INSERT);
	require_count(n, run->first_load_rows, "inserted", run->run_id, dim_name);
	scd2_changelog_copy_work_rows(run->run_id);
	scd2_exec_catalog("UPDATE scd2.change_log_runs SET first_load_rows = NULL"
					  " WHERE run_id OPERATOR(pg_catalog.=) $1",
					  1, argtypes, values, NULL, false, SPI_OK_UPDATE,
					  "writing the reverted first load's rows into the change log");
	return n;
}

/*
 * Step 4 of a batch logged by surrogate keys (load/batch_log.c), first:
 * its rows, read back from the dimension as the owner (the run is the
 * newest: the Type 1 values now are the ones it found), into
 * scd2.change_log, as the change log of any other run keeps them; the
 * arrays go.  The revert then reads them as any other run's.
 */
static void
write_batch_rows(const Run *run, const char *dim_name)
{
	Scd2BatchLog b;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run->run_id)};
	uint64		n;

	if (!scd2_batch_read(run->run_id, &b))
		elog(ERROR, "scd2: the change log of run %lld vanished", (long long) run->run_id);
	scd2_changelog_work_table(scd2_relation_owner(run->dim_oid));
	n = scd2_batch_exec(run, dim_name,
						psprintf("INSERT INTO " LOG_TABLE " (" LOG_COLS_IMAGES ") %s",
								 scd2_batch_rows_sql(run, dim_name, true, &b)),
						&b, false, SPI_OK_INSERT, "reading back the rows the run wrote");
	scd2_batch_require_rows(run, dim_name, (int64) n, &b);
	scd2_changelog_copy_work_rows(run->run_id);
	scd2_exec_catalog("DELETE FROM scd2.change_log_batches WHERE run_id OPERATOR(pg_catalog.=) $1",
					  1, argtypes, values, NULL, false, SPI_OK_DELETE,
					  "writing the reverted run's rows into the change log");
}

/*
 * Step 4 of one run, for scd2.revert and for each run scd2.rewind undoes
 * (rewind.c): the caller has checked the privileges, holds the lock,
 * and has refused what cannot be reverted; the run is the newest
 * successful load of its dimension.
 */
void
scd2_revert_undo(const Run *run, const char *dim_name, int64 *deleted, int64 *restored)
{
	RevertColumns cols;
	Logged		lg;

	/* the registration in force decides what a reopened row's valid_to is */
	char	   *current_vt = scd2_revert_registration(run, dim_name);

	*deleted = 0;
	*restored = 0;
	read_columns(run, dim_name, &cols);
	read_conventions(run, current_vt, &cols);
	if (run->first_load_rows >= 0)
	{
		*deleted = revert_first_load(run, dim_name, &cols);
		return;
	}
	if (run->batch)
		write_batch_rows(run, dim_name);
	scd2_revert_read_change_log(run->run_id, &lg);
	if (lg.nrows > 0)
		require_rows_as_left(run, dim_name, &cols, &lg);
	if (lg.ninserted > 0)
		*deleted = delete_inserted(run, dim_name, &cols, &lg);
	if (lg.nrestored > 0)
		*restored += write_back_rows(run, dim_name, &cols, &lg);
	if (lg.nupdated > 0)
		*restored += restore_updated(run, dim_name, &cols, &lg);
	if (lg.ncompleted > 0)
		*restored += write_back_completed(run, dim_name, &cols, &lg);
	if (lg.nrows > 0)
		require_no_overlap(run, dim_name, &cols, &lg);
	/* an order-free run's remembered events (arrival_memory.c) */
	scd2_arrival_memory_undo(run->dim_oid, run->run_id);
}

/* A revert's privileges, for scd2.rewind. */
void
scd2_revert_check_privileges(Oid dim_oid, const char *dim_name)
{
	check_privileges(dim_oid, dim_name);
}

/* Mark an undone run as reverted by revert_id, for scd2.rewind. */
void
scd2_revert_mark_reverted(int64 run_id, int64 revert_id)
{
	mark_reverted(run_id, revert_id);
}

Datum
scd2_revert(PG_FUNCTION_ARGS)
{
	TimestampTz started_at = GetCurrentTimestamp();
	int64		run_id;
	Run			run;
	char	   *dim_name;
	char	   *later;
	int64		deleted = 0;
	int64		restored = 0;
	int64		revert_id;
	int64		facts;
	Scd2Metrics none;
	int			pin;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("run_id must not be NULL"),
				 errhint("Pass the run id of the load to revert, from scd2.audit_log.")));
	run_id = PG_GETARG_INT64(0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();

	/* 1. */
	scd2_revert_read_run(run_id, false, &run);
	scd2_revert_require_revertible(&run);
	if (get_rel_relkind(run.dim_oid) == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("dimension %s of run %lld no longer exists", run.dim_text, (long long) run_id)));
	dim_name = scd2_relation_display_name(run.dim_oid);

	/* 2. */
	check_privileges(run.dim_oid, dim_name);
	scd2_lock_dimension(run.dim_oid, dim_name,
						"The revert waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s; nothing was reverted.");
	scd2_refuse_row_security(run.dim_oid, scd2_relation_owner(run.dim_oid), "dimension", "scd2.revert");
	scd2_require_registered_shape(run.dim_oid, dim_name, true);
	/* the maintained fact tables it re-keys (facts.c) */
	scd2_facts_require_maintainable(run.dim_oid, "scd2.revert", false, true);
	scd2_revert_read_run(run_id, false, &run);
	scd2_revert_require_revertible(&run);

	/* 3. */
	later = scd2_revert_later_runs(&run);
	if (later)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is not the newest load of dimension %s", (long long) run_id, dim_name),
				 errdetail("Later loads of %s: run %s. Nothing was reverted.", dim_name, later),
				 errhint("Revert the later runs first, newest first.")));
	scd2_revert_require_fresh(&run, dim_name);
	scd2_refuse_stale_snapshot(run.dim_oid, dim_name, GetTransactionSnapshot(), "nothing was reverted");

	/* 4. */
	scd2_revert_undo(&run, dim_name, &deleted, &restored);

	/* 5. */
	memset(&none, 0, sizeof(none));
	revert_id = scd2_audit_write(run.dim_oid, dim_name, run.stg_text, "revert",
								 run.has_eff ? run.effective_at : started_at, started_at, &none,
								 psprintf("reverted run %lld: %lld rows deleted, %lld rows restored",
										  (long long) run_id, (long long) deleted, (long long) restored),
								 NULL, 0);
	mark_reverted(run_id, revert_id);
	/* 6. the maintained fact tables follow the history back (facts.c) */
	facts = scd2_facts_maintain(run.dim_oid);
	scd2_audit_set_facts_rekeyed(revert_id, facts);
	ereport(NOTICE,
			(errmsg("scd2: %s: reverted run %lld: %lld rows deleted, %lld rows restored%s",
					dim_name, (long long) run_id, (long long) deleted, (long long) restored,
					facts > 0 ? psprintf(", %lld fact%s re-keyed", (long long) facts, facts == 1 ? "" : "s") : "")));

	scd2_unpin(pin);
	SPI_finish();
	PG_RETURN_INT64(revert_id);
}
