/*
 * audit.c -- the audit log: one row per load, written as the extension
 * owner so that users can read the log but never forge or alter it.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

/*
 * Insert an audit row; returns its run id.  The caller is connected to SPI
 * and passes its own role's view of the run; the insert itself runs as the
 * extension owner (pg_cron's approach, instead of SECURITY DEFINER).
 */
int64
scd2_audit_write(const char *dim_name, const char *stg_name, const char *status,
				 TimestampTz effective_at, TimestampTz started_at,
				 const Scd2Metrics *m, const char *message)
{
	Oid			argtypes[18];
	Datum		values[18];
	char		nulls[18];
	int64		run_id;
	char	   *username = GetUserNameFromId(GetUserId(), false);
	int			i = 0;
	/* a load's run id reserved by its change log (changelog.c), or 0 */
	int64		reserved = strcmp(status, "success") == 0 ? scd2_changelog_claim_run_id(dim_name) : 0;

#define ARG(type, value) (argtypes[i] = (type), values[i] = (value), nulls[i] = ' ', i++)
	ARG(TEXTOID, CStringGetTextDatum(dim_name));
	ARG(TEXTOID, CStringGetTextDatum(stg_name));
	ARG(TEXTOID, CStringGetTextDatum(status));
	ARG(TIMESTAMPTZOID, TimestampTzGetDatum(effective_at));
	ARG(TIMESTAMPTZOID, TimestampTzGetDatum(started_at));
	ARG(INT8OID, Int64GetDatum(m->source_rows));
	ARG(INT8OID, Int64GetDatum(m->inserted));
	ARG(INT8OID, Int64GetDatum(m->new_versions));
	ARG(INT8OID, Int64GetDatum(m->closed));
	ARG(INT8OID, Int64GetDatum(m->deleted));
	ARG(INT8OID, Int64GetDatum(m->shortened));
	ARG(INT8OID, Int64GetDatum(m->type1_updated));
	ARG(INT8OID, Int64GetDatum(m->unchanged));
	ARG(INT8OID, Int64GetDatum(m->duplicates));
	/* a name Datum points to NAMEDATALEN bytes: build one (not the C string) */
	ARG(NAMEOID, DirectFunctionCall1(namein, CStringGetDatum(username)));
	ARG(TEXTOID, message ? CStringGetTextDatum(message) : (Datum) 0);
	if (reserved != 0)
		ARG(INT8OID, Int64GetDatum(reserved));
#undef ARG
	if (message == NULL)
		nulls[15] = 'n';

	if (scd2_exec_catalog(reserved == 0 ?
		"INSERT INTO scd2.audit_log (dimension, staging, status, effective_at, started_at,"
		" finished_at, source_rows, inserted, new_versions, closed, deleted, shortened,"
		" type1_updated, unchanged, duplicates, username, txid, message)"
		" VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp(), $6, $7, $8, $9, $10, $11,"
		" $12, $13, $14, $15, pg_catalog.pg_current_xact_id(), $16) RETURNING run_id" :
		"INSERT INTO scd2.audit_log (dimension, staging, status, effective_at, started_at,"
		" finished_at, source_rows, inserted, new_versions, closed, deleted, shortened,"
		" type1_updated, unchanged, duplicates, username, txid, message, run_id)"
		" OVERRIDING SYSTEM VALUE"
		" VALUES ($1, $2, $3, $4, $5, pg_catalog.clock_timestamp(), $6, $7, $8, $9, $10, $11,"
		" $12, $13, $14, $15, pg_catalog.pg_current_xact_id(), $16, $17) RETURNING run_id",
		i, argtypes, values, nulls, false, SPI_OK_INSERT_RETURNING, "writing the audit row") != 1)
		elog(ERROR, "scd2: writing the audit row returned no run id");
	run_id = scd2_spi_int8(0, 1);
	return run_id;
}

/* The one-line summary a CALL prints. */
void
scd2_notice_metrics(const char *dim_name, const Scd2Metrics *m, bool dry_run)
{
	ereport(NOTICE,
			(errmsg("scd2: %s%s: %lld source rows, %lld inserted, %lld new versions, %lld closed, "
					"%lld deleted, %lld shortened, %lld type 1 updates, %lld unchanged, %lld duplicates",
					dim_name, dry_run ? " (dry run)" : "",
					(long long) m->source_rows, (long long) m->inserted,
					(long long) m->new_versions, (long long) m->closed,
					(long long) m->deleted, (long long) m->shortened,
					(long long) m->type1_updated, (long long) m->unchanged,
					(long long) m->duplicates)));
}
