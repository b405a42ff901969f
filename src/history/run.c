/*
 * run.c -- what scd2.revert reads before it writes (revert.c),
 * and scd2.changes (changes.c) too:
 * the run (its audit row and change-log header), the refusals (unknown,
 * failed, dry, already reverted, no or pruned change log, not the newest
 * load), and the run's change log itself.
 */
#include "scd2.h"

#include "access/xact.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"

/*
 * A run as the audit log and its change-log header know it; an error when
 * there is no such run.  read_only as for SPI (scd2.changes reads with
 * the caller's snapshot; revert reads again under its lock).
 */
void
scd2_revert_read_run(int64 run_id, bool read_only, Run *run)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;

	/* as the extension owner: the audit log shows a role only some rows */
	(void) scd2_exec_catalog(
		"SELECT a.status, a.dimension, a.staging, a.effective_at, r.run_id IS NOT NULL,"
		"       r.dimension::pg_catalog.oid, r.key_columns,"
		"       ARRAY[r.valid_from_column, r.valid_to_column],"
		"       pg_catalog.array_remove(ARRAY[r.is_current_column], NULL),"
		"       pg_catalog.array_remove(ARRAY[r.surrogate_key_column], NULL),"
		"       r.type1_columns, r.logged, r.pruned_at, r.reverted_by, r.current_valid_to,"
		"       pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.->>) 'dimension_dropped_at',"
		/* old_type1_text: 0.4 on (an extension still at 0.3 has no such column) */
		"       COALESCE(CAST(pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.->>) 'old_type1_text' AS pg_catalog.bool), false),"
		/* first_load_rows: 0.4 on */
		"       COALESCE(CAST(pg_catalog.to_jsonb(r) OPERATOR(pg_catalog.->>) 'first_load_rows' AS pg_catalog.int8), -1)"
		"  FROM scd2.audit_log a LEFT JOIN scd2.change_log_runs r"
		"    ON r.run_id OPERATOR(pg_catalog.=) a.run_id"
		" WHERE a.run_id OPERATOR(pg_catalog.=) $1",
		1, argtypes, values, NULL, read_only, SPI_OK_SELECT, "reading the run");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("run %lld does not exist", (long long) run_id),
				 errhint("The run ids of the loads are in scd2.audit_log.")));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	memset(run, 0, sizeof(*run));
	run->run_id = run_id;
	run->first_load_rows = -1;
	run->status = SPI_getvalue(tup, desc, 1);
	run->dim_text = SPI_getvalue(tup, desc, 2);
	run->stg_text = SPI_getvalue(tup, desc, 3);
	d = SPI_getbinval(tup, desc, 4, &isnull);
	run->has_eff = !isnull;
	if (!isnull)
		run->effective_at = DatumGetTimestampTz(d);
	run->has_header = DatumGetBool(SPI_getbinval(tup, desc, 5, &isnull));
	if (!run->has_header)
		return;
	run->dim_oid = DatumGetObjectId(SPI_getbinval(tup, desc, 6, &isnull));
	run->key_columns = datumCopy(SPI_getbinval(tup, desc, 7, &isnull), false, -1);
	run->bookkeeping = datumCopy(SPI_getbinval(tup, desc, 8, &isnull), false, -1);
	run->is_current = datumCopy(SPI_getbinval(tup, desc, 9, &isnull), false, -1);
	run->surrogate_key = datumCopy(SPI_getbinval(tup, desc, 10, &isnull), false, -1);
	run->type1_columns = datumCopy(SPI_getbinval(tup, desc, 11, &isnull), false, -1);
	run->logged = DatumGetBool(SPI_getbinval(tup, desc, 12, &isnull));
	run->pruned_at = SPI_getvalue(tup, desc, 13);
	run->reverted_by = SPI_getvalue(tup, desc, 14);
	run->current_valid_to = SPI_getvalue(tup, desc, 15);
	run->dropped_at = SPI_getvalue(tup, desc, 16);
	run->old_type1_text = DatumGetBool(SPI_getbinval(tup, desc, 17, &isnull));
	run->first_load_rows = DatumGetInt64(SPI_getbinval(tup, desc, 18, &isnull));
	/* logged by surrogate keys (0.4, load/batch_log.c) */
	if (scd2_changelog_batch_installed())
	{
		(void) scd2_exec_catalog("SELECT EXISTS (SELECT FROM scd2.change_log_batches b"
								 " WHERE b.run_id OPERATOR(pg_catalog.=) $1)",
								 1, argtypes, values, NULL, read_only, SPI_OK_SELECT, "reading the run");
		run->batch = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	}
}

/*
 * A run whose change log can be read: the change log exists and was not
 * pruned.  (scd2.changes needs this much; revert more.)
 */
void
scd2_revert_require_change_log(const Run *run)
{
	long long	id = (long long) run->run_id;

	if (!run->has_header)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has no change log", id),
				 errdetail(strcmp(run->status, "success") == 0 ?
						   "Run %lld was loaded before scd2 0.3, which began keeping a change log." :
						   "Run %lld is not a load that wrote the dimension (its status is %s).",
						   id, run->status)));
	if (run->dropped_at)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("the dimension of run %lld was dropped", id),
				 errdetail("Dimension %s was dropped; the run's change log names no table any more.",
						   run->dim_text)));
	if (!run->logged)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld has no change log", id),
				 errdetail("Run %lld was loaded with scd2.change_log = off.", id)));
	if (run->pruned_at)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the change log of run %lld was pruned", id),
				 errdetail("scd2.prune_change_log removed it at %s; a pruned run can no longer be reverted or read back.",
						   run->pruned_at)));
}

/* Refuse what revert cannot undo (before and again after the lock). */
void
scd2_revert_require_revertible(const Run *run)
{
	long long	id = (long long) run->run_id;

	if (strcmp(run->status, "reverted") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld was already reverted", id),
				 run->reverted_by ? errdetail("Run %s reverted it.", run->reverted_by) : 0));
	if (strcmp(run->status, "revert") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is a revert, which cannot be reverted", id),
				 errhint("To apply the reverted batch again, load it again.")));
	if (strcmp(run->status, "success") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("run %lld is not a successful load", id),
				 errdetail("Its status is %s: it wrote nothing to revert.", run->status)));
	scd2_revert_require_change_log(run);
}

/*
 * The later successful loads of the dimension (column 1, or NULL) and the
 * run's own status (column 2), read with snap (InvalidSnapshot: the
 * transaction's).
 */
static void
read_later_runs(const Run *run, Snapshot snap)
{
	Oid			argtypes[2] = {INT8OID, OIDOID};
	Datum		values[2] = {Int64GetDatum(run->run_id), ObjectIdGetDatum(run->dim_oid)};

	/* as the extension owner: the audit log's row security hides no run here */
	(void) scd2_exec_catalog_snap(
		"SELECT pg_catalog.string_agg(r.run_id::pg_catalog.text, ', ' ORDER BY r.run_id),"
		"       (SELECT o.status FROM scd2.audit_log o WHERE o.run_id OPERATOR(pg_catalog.=) $1)"
		"  FROM scd2.change_log_runs r JOIN scd2.audit_log a ON a.run_id OPERATOR(pg_catalog.=) r.run_id"
		" WHERE r.dimension OPERATOR(pg_catalog.=) $2::pg_catalog.regclass"
		"   AND r.run_id OPERATOR(pg_catalog.>) $1 AND a.status OPERATOR(pg_catalog.=) 'success'",
		2, argtypes, values, NULL, snap, false, SPI_OK_SELECT, "reading later runs");
}

/* The later successful loads of the dimension, or NULL. */
char *
scd2_revert_later_runs(const Run *run)
{
	read_later_runs(run, InvalidSnapshot);
	return scd2_spi_text(0, 1);
}

/*
 * In a REPEATABLE READ or SERIALIZABLE transaction every read of the
 * revert uses the transaction's snapshot, also under the lock: the run
 * must still be the newest successful load, and not reverted, in the
 * latest snapshot too; else serialization_failure, as PostgreSQL's own
 * conflicts (READ COMMITTED reads under the lock and needs none of this).
 */
void
scd2_revert_require_fresh(const Run *run, const char *dim_name)
{
	Snapshot	latest;
	char	   *later;
	char	   *status;

	if (!IsolationUsesXactSnapshot())
		return;
	latest = RegisterSnapshot(GetLatestSnapshot());
	read_later_runs(run, latest);
	UnregisterSnapshot(latest);
	later = scd2_spi_text(0, 1);
	status = scd2_spi_text(0, 2);
	if (later || status == NULL || strcmp(status, "success") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update of dimension %s", dim_name),
				 later ?
				 errdetail("Run %s, committed after this transaction's snapshot was taken, loaded %s later than run %lld; nothing was reverted.",
						   later, dim_name, (long long) run->run_id) :
				 errdetail("Run %lld was %s by a transaction that committed after this transaction's snapshot was taken; nothing was reverted.",
						   (long long) run->run_id, status ? status : "removed"),
				 errhint("Retry the transaction.")));
}

/*
 * The registration in force must name the dimension's rows and columns as
 * the run's did (business key, validity, is_current and surrogate key
 * columns): the change log is read by those names; else an error naming
 * what changed.  Returns the current_valid_to in force (the run's when
 * the dimension is no longer registered): a row the revert makes current
 * again takes the current convention's valid_to.
 */
char *
scd2_revert_registration(const Run *run, const char *dim_name)
{
	char	   *current_vt = NULL;
	char	   *changed = scd2_registry_changed_since_run(run->run_id, &current_vt);

	if (changed == NULL)
		return run->current_valid_to;
	if (changed && changed[0] != '\0')
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension %s was registered again with other columns since run %lld",
						dim_name, (long long) run->run_id),
				 errdetail("Run %lld was loaded under a registration with another %s; nothing was reverted.",
						   (long long) run->run_id, changed),
				 errhint("Register the dimension again as it was for run %lld to revert it, or repair the rows by hand.",
						 (long long) run->run_id)));
	return current_vt;
}

/* The change log of a run (as the extension owner: PUBLIC cannot read it). */
void
scd2_revert_read_change_log(int64 run_id, Logged *lg)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};
	bool		isnull;
	Datum	   *out[16] = {&lg->ins_keys, &lg->ins_vf, &lg->upd_keys, &lg->upd_vf, &lg->upd_vt,
	&lg->upd_cur, &lg->upd_type1, &lg->all_keys, &lg->all_vf, &lg->all_vt, &lg->mv_keys, &lg->mv_vf,
	&lg->rs_rows, &lg->cp_keys, &lg->cp_vf, &lg->cp_rows};
	int			cols[16] = {1, 2, 4, 5, 6, 7, 8, 10, 11, 12, 14, 15, 17, 19, 20, 21};

	/*
	 * An order-free run's 'extend' rows (moved) and 'remove' rows (gone)
	 * are written back whole from old_row (0.4: read through to_jsonb, a
	 * 0.3 change log has no such column); so are the inferred versions a
	 * load completed ('complete', 0.5: load/complete.c), after the other
	 * rows are restored (a later row of the same run may have closed or
	 * updated the completed version: that row, at the same valid_from,
	 * then checks the version as the run left it, not the 'complete' row);
	 * the other rows as before.
	 */
	scd2_exec_catalog(
		"SELECT COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.inserted), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.inserted), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE c.inserted),"
		"       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE NOT c.inserted AND c.r IS NULL), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE NOT c.inserted AND c.r IS NULL), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.old_valid_to) FILTER (WHERE NOT c.inserted AND c.r IS NULL), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.old_is_current) FILTER (WHERE NOT c.inserted AND c.r IS NULL), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.old_type1) FILTER (WHERE NOT c.inserted AND c.r IS NULL), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE NOT c.inserted AND c.r IS NULL),"
		"       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.a), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.a), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_to) FILTER (WHERE c.a), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE c.a),"
		"       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.action OPERATOR(pg_catalog.=) " WT_ACT_EXTEND "), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.action OPERATOR(pg_catalog.=) " WT_ACT_EXTEND "), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE c.action OPERATOR(pg_catalog.=) " WT_ACT_EXTEND "),"
		"       COALESCE(pg_catalog.array_agg(c.r) FILTER (WHERE c.r IS NOT NULL AND NOT c.cp), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE c.r IS NOT NULL AND NOT c.cp),"
		"       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.cp), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.cp), '{}'),"
		"       COALESCE(pg_catalog.array_agg(c.r) FILTER (WHERE c.cp), '{}'),"
		"       pg_catalog.count(*) FILTER (WHERE c.cp)"
		"  FROM (SELECT c1.*, c1.action OPERATOR(pg_catalog.=) " WT_ACT_COMPLETE " AS cp,"
		"               c1.action OPERATOR(pg_catalog.<>) " WT_ACT_REMOVE
		"               AND NOT (c1.action OPERATOR(pg_catalog.=) " WT_ACT_COMPLETE " AND c1.same OPERATOR(pg_catalog.>) 1) AS a"
		"          FROM (SELECT c0.*, NULLIF(pg_catalog.to_jsonb(c0) OPERATOR(pg_catalog.->) 'old_row', 'null') AS r,"
		"                       pg_catalog.count(*) FILTER (WHERE NOT c0.inserted)"
		"                         OVER (PARTITION BY c0.business_key, c0.valid_from) AS same"
		"                  FROM scd2.change_log c0 WHERE c0.run_id OPERATOR(pg_catalog.=) $1) c1) c",
		/* not read-only: it sees the rows a batch's revert just wrote (revert.c) */
		1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the change log");
	for (int i = 0; i < 16; i++)
		*out[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, cols[i], &isnull),
							false, -1);
	lg->ninserted = scd2_spi_int8(0, 3);
	lg->nupdated = scd2_spi_int8(0, 9);
	lg->nrows = scd2_spi_int8(0, 13);
	lg->nmoved = scd2_spi_int8(0, 16);
	lg->nrestored = scd2_spi_int8(0, 18);
	lg->ncompleted = scd2_spi_int8(0, 22);
}

/*
 * A revert (or a reader of run run_id's rows) refused: the dimension no
 * longer holds what the run wrote; detail says what differs, hint what to do.
 */
void
scd2_report_run_rows_changed(const char *dim_name, int64 run_id, const char *detail,
							 const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("dimension %s no longer holds what run %lld wrote", dim_name, (long long) run_id),
			 errdetail_internal("%s", detail),
			 errhint("%s", hint)));
}
