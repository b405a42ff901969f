/*
 * infer.c -- scd2.infer_members(staging, dimension, time_column): an
 * inferred member for every key of a batch of facts that the dimension
 * has no version of (issue 49; docs/FACTS.md, "Early-arriving facts").
 *
 * staging holds the facts, with the dimension's business key columns
 * under the same names and time_column, each fact's instant.  Every key
 * in it with no version at all gets one current version, flagged in the
 * registered inferred_column, starting at the earliest time among its
 * facts (converted to valid_from's type exactly, or refused, as a load's
 * effective times); its other columns take their defaults (the surrogate
 * key its identity or default, as a load's new versions), or NULL.  A
 * key with a version -- even one that starts after the fact, or a closed
 * one -- is not inferred.  Returns the number inferred.
 *
 * A logged run, as a load is: the load's checks and lock (SHARE ROW
 * EXCLUSIVE, taken before anything is read), row security and the
 * staging table's trust, then every statement as the dimension's owner in
 * a security-restricted operation with one snapshot (runner.c); the
 * batch validated and its values' conversions checked as a load's
 * (validate.c, convert.c: NULL keys or times, a time that does not fit
 * valid_from, refused with nothing written); one INSERT whose versions go
 * into the change log as a load's inserts (scd2.revert and scd2.rewind
 * delete them); one audit row, status 'success', with the metric
 * inferred.  A load that brings a key's record completes its inferred
 * version in place (complete.c).
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "citus/citus.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"

PG_FUNCTION_INFO_V1(scd2_infer_members);

/* What infer_members needs of the registration, or a refusal naming it. */
static void
require_inferable(Oid dim_oid, const Scd2Registration *reg, const char *dim_name)
{
	Scd2CitusTable t;

	if (reg->inferred_column == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension %s has no inferred_column", dim_name),
				 errdetail("scd2.infer_members flags the versions it inserts in the dimension's registered inferred_column, so that the load that brings a key's record completes them; nothing was inferred."),
				 errhint("Add a boolean column (ALTER TABLE ... ADD COLUMN is_inferred boolean NOT NULL DEFAULT false) and register the dimension again with inferred_column => 'is_inferred'.")));
	if (reg->surrogate_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension %s has no surrogate_key_column", dim_name),
				 errdetail("Facts are keyed to an inferred member by its surrogate key (scd2.asof), which a dimension registered without one does not have; nothing was inferred."),
				 errhint("Register the dimension again with surrogate_key_column.")));
	if (scd2_citus_table(dim_oid, &t) != SCD2_CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("scd2.infer_members does not support Citus dimension %s", dim_name),
				 errdetail("Dimension %s is a %s table; inferred members are made and completed on plain PostgreSQL tables only. Nothing was inferred.",
						   dim_name, scd2_citus_kind_name(&t)),
				 errhint("Key the facts with scd2.asof, and load the members' records before the facts.")));
}

/*
 * The INSERT of the inferred versions, and with log their change-log rows
 * (as a load's inserts, with their surrogate keys) into the log's work
 * table: the batch's keys (cast to the dimension's types) with their
 * earliest time, less every key the dimension has a version of.
 */
static char *
sql_infer(const Scd2Config *cfg, bool log)
{
	StringInfoData buf;

	/*
	 * The facts of unknown keys first, then their keys grouped: most facts
	 * name a known key.  A fact whose key scd2.asof finds a version of at
	 * its time names a known key; the others (the unknown keys' facts, and
	 * a known key's facts from before its first version or in a gap) are
	 * probed for any version of their key through the dimension's index.
	 * The lookup answers from its bulk map, one ordered walk of the as-of
	 * index (asof/map.c), and the probes are few (forced: the runner's
	 * probing).  Grouping every fact first, or an anti join of every fact
	 * with a hash of the dimension's keys, took 1.2 to 2 times as long as
	 * this (200k and 1M facts over as many keys, 1% unknown; PostgreSQL 15:
	 * 1M facts, serial, 650 ms and 516 ms; bench/infer.sh).
	 */
	initStringInfo(&buf);
	appendStringInfoString(&buf, "WITH n AS (SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, X(", pg_catalog.min(s.`_t) AS `_t FROM "));
	scd2_append_all_staging(&buf, cfg);
	appendStringInfo(&buf, X(" s WHERE scd2.asof(CAST(CAST(%u AS pg_catalog.oid) AS pg_catalog.regclass),"
							 " CAST(s.`_t AS pg_catalog.timestamptz)"),
					 cfg->dim_oid);
	scd2_append_more_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, ") IS NULL AND NOT EXISTS (SELECT FROM %s d WHERE ", cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "s");
	appendStringInfoString(&buf, ") GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, "), i AS (INSERT INTO %s AS d (", cfg->dim_sql);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfo(&buf, ", %s, %s%s%s, %s) SELECT ", cfg->vf.ident, cfg->vt.ident,
					 cfg->is_current ? ", " : "", cfg->is_current ? cfg->is_current : "", cfg->inferred);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "n.");
	appendStringInfo(&buf, X(", n.`_t, %s%s, true FROM n RETURNING d.*)"),
					 cfg->infinity ? cfg->current_vt : psprintf("CAST(NULL AS %s)", cfg->vt.type_sql),
					 cfg->is_current ? ", true" : "");
	/* how many, and the earliest valid_from (the run's effective_at) */
	if (!log)
	{
		appendStringInfo(&buf, " SELECT pg_catalog.count(*), pg_catalog.min(%s) FROM i",
						 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)));
		return buf.data;
	}
	/* (the log's work table is the owner's to insert into, not to read) */
	appendStringInfo(&buf, ", l AS (INSERT INTO " LOG_TABLE " (" LOG_COLS_KEYS ", valid_to)"
					 " SELECT " WT_ACT_INSERT ", true, CAST(i.%s AS pg_catalog.int8), %s, %s,"
					 " NULL::pg_catalog.timestamptz FROM i)"
					 " SELECT pg_catalog.count(*), pg_catalog.min(%s) FROM i",
					 cfg->sk, scd2_key_json_sql(cfg, "i"),
					 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)),
					 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)));
	return buf.data;
}

/*
 * The run, connected to SPI: checks and lock, the owner's context, the
 * batch checked, the INSERT and its change log; returns the run id the
 * change log reserved (0: none), the metrics in *m and in *effective_at the
 * earliest valid_from inserted (-infinity: none), the run's effective_at in
 * its audit row: scd2.apply_snapshots applies no extract older than a run's
 * (apply_snapshots.c), and a call that inferred nothing is older than all.
 */
static int64
infer(Oid stg_oid, Oid dim_oid, const char *time_column, Scd2Metrics *m, char **dim_name_out,
	  char **stg_name_out, TimestampTz *effective_at)
{
	Datum		earliest;
	bool		none;
	char	   *dim_name = scd2_relation_display_name(dim_oid);
	Oid			owner;
	OwnerContext oc;
	Scd2Registration *reg;
	Scd2Config *cfg;
	LoadState	st;
	int			nest;

	/* before the lock: the relations, the caller's privileges (a load's) */
	scd2_check_relkind(dim_oid, true);
	scd2_check_relkind(stg_oid, false);
	scd2_check_privileges(stg_oid, dim_oid, false, GetUserId(), false);
	scd2_lock_dimension(dim_oid, NULL,
						"scd2.infer_members waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						"which a load (or a statement that locks the table) holds; nothing was inferred.");
	owner = scd2_relation_owner(dim_oid);
	scd2_refuse_row_security(dim_oid, owner, "dimension", "scd2.infer_members");
	scd2_refuse_row_security(stg_oid, owner, "staging table", "scd2.infer_members");
	scd2_trust_staging_relation(stg_oid, owner, dim_name);

	scd2_owner_enter(&oc, owner);
	scd2_check_privileges(stg_oid, dim_oid, false, oc.owner, true);
	scd2_set_local("jit", "off");
	reg = scd2_load_registration(dim_oid, stg_oid, dim_name);
	require_inferable(dim_oid, reg, dim_name);
	cfg = scd2_infer_config(dim_oid, stg_oid, reg, time_column);
	*dim_name_out = cfg->dim_name;
	*stg_name_out = cfg->stg_name;

	memset(&st, 0, sizeof(st));
	st.cfg = cfg;
	st.oc = &oc;
	st.effective_at = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	CommandCounterIncrement();
	st.snap = RegisterSnapshot(GetTransactionSnapshot());
	scd2_refuse_stale_snapshot(dim_oid, cfg->dim_name, st.snap, "nothing was inferred");
	st.log_prepared = scd2_changelog_prepare(false);
	scd2_owner_restrict(&oc);

	/* the batch as a load checks its staging rows */
	scd2_check_conversions(&st);
	m->source_rows = scd2_validate_staging(&st, NULL);
	if (cfg->infinity)
		scd2_check_before_current_valid_to(&st);

	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	/* the lookup that finds the known keys' facts says NULL for the others */
	scd2_set_local("scd2.asof_on_missing", "null");
	scd2_load_exec_probing(&st, -1, sql_infer(cfg, st.log_prepared), SPI_OK_SELECT, "inferring members");
	m->inferred = scd2_spi_int8(0, 1);
	earliest = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &none);
	*effective_at = none ? DT_NOBEGIN : DatumGetTimestampTz(earliest);
	AtEOXact_GUC(true, nest);
	st.run_id = scd2_changelog_write(cfg, st.log_prepared, false);

	UnregisterSnapshot(st.snap);
	scd2_owner_leave(&oc);
	return st.run_id;
}

Datum
scd2_infer_members(PG_FUNCTION_ARGS)
{
	TimestampTz started_at = GetCurrentTimestamp();
	Scd2Metrics m;
	char	   *dim_name;
	char	   *stg_name;
	char	   *time_column;
	int64		run_id;
	TimestampTz effective_at;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("staging table, dimension and time_column must not be NULL"),
				 errhint("Pass the batch of facts, the dimension and the name of the facts' time column.")));
	time_column = NameStr(*PG_GETARG_NAME(2));
	memset(&m, 0, sizeof(m));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	run_id = infer(PG_GETARG_OID(0), PG_GETARG_OID(1), time_column, &m, &dim_name, &stg_name,
				   &effective_at);
	(void) scd2_audit_write(PG_GETARG_OID(1), dim_name, stg_name, "success",
							effective_at, started_at, &m,
							psprintf("scd2.infer_members: %lld inferred members from the times in column %s",
									 (long long) m.inferred, quote_identifier(time_column)),
							NULL, run_id);
	SPI_finish();
	PG_RETURN_INT64(m.inferred);
}
