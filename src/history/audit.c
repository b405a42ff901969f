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

#include "common/common.h"
#include "history/history.h"

/* the audit row's parameters: 10 columns and the metrics */
#define SCD2_AUDIT_MAX_ARGS (10 + sizeof(Scd2Metrics) / sizeof(int64))

/* The audit INSERT being built: its columns, values and parameters. */
typedef struct AuditRow
{
	StringInfoData columns;
	StringInfoData values;
	Oid			types[SCD2_AUDIT_MAX_ARGS];
	Datum		args[SCD2_AUDIT_MAX_ARGS];
	char		nulls[SCD2_AUDIT_MAX_ARGS];
	int			nargs;
} AuditRow;

/* A column whose value is an SQL expression. */
static void
add_expr(AuditRow *row, const char *column, const char *expr)
{
	const char *sep = row->columns.len > 0 ? ", " : "";

	appendStringInfo(&row->columns, "%s%s", sep, column);
	appendStringInfo(&row->values, "%s%s", sep, expr);
}

/* A column whose value is the next parameter. */
static void
add_arg(AuditRow *row, const char *column, Oid type, Datum value, bool isnull)
{
	Assert(row->nargs < SCD2_AUDIT_MAX_ARGS);
	row->types[row->nargs] = type;
	row->args[row->nargs] = value;
	row->nulls[row->nargs] = isnull ? 'n' : ' ';
	row->nargs++;
	add_expr(row, column, psprintf("$%d", row->nargs));
}

#define AUDIT_METRIC(name, words, shown, source, how) \
	if (SCD2_METRIC_SHOWN(shown, m->name)) \
		add_arg(&row, #name, INT8OID, Int64GetDatum(m->name), false);

/*
 * Insert an audit row; returns its run id.  The caller is connected to SPI
 * and passes its own role's view of the run; the insert itself runs as the
 * extension owner (pg_cron's approach, instead of SECURITY DEFINER).  The
 * row keeps the dimension's OID (0.5), by which its row security goes, and
 * is stamped when its transaction commits (commit_stamp.c).
 */
int64
scd2_audit_write(Oid dim_oid, const char *dim_name, const char *stg_name, const char *status,
				 TimestampTz effective_at, TimestampTz started_at,
				 const Scd2Metrics *m, const char *message, const char *schema_note,
				 int64 run_id)
{
	AuditRow	row;
	int64		written;
	char	   *username = GetUserNameFromId(GetUserId(), false);
	/* a load's run id reserved by its change log (changelog.c), or 0 */
	int64		reserved = run_id;

	memset(&row, 0, sizeof(row));
	initStringInfo(&row.columns);
	initStringInfo(&row.values);
	add_arg(&row, "dimension", TEXTOID, CStringGetTextDatum(dim_name), false);
	add_arg(&row, "staging", TEXTOID, CStringGetTextDatum(stg_name), false);
	add_arg(&row, "status", TEXTOID, CStringGetTextDatum(status), false);
	add_arg(&row, "effective_at", TIMESTAMPTZOID, TimestampTzGetDatum(effective_at), false);
	add_arg(&row, "started_at", TIMESTAMPTZOID, TimestampTzGetDatum(started_at), false);
	add_expr(&row, "finished_at", "pg_catalog.clock_timestamp()");
	SCD2_METRICS(AUDIT_METRIC)
	/* a name Datum points to NAMEDATALEN bytes: build one (not the C string) */
	add_arg(&row, "username", NAMEOID, DirectFunctionCall1(namein, CStringGetDatum(username)), false);
	add_expr(&row, "txid", "pg_catalog.pg_current_xact_id()");
	add_arg(&row, "message", TEXTOID, message ? CStringGetTextDatum(message) : (Datum) 0,
			message == NULL);
	if (reserved != 0)
		add_arg(&row, "run_id", INT8OID, Int64GetDatum(reserved), false);
	/* what the load did about the staging table's shape (load/schema.c; 0.4) */
	if (schema_note != NULL)
		add_arg(&row, "schema_change", TEXTOID, CStringGetTextDatum(schema_note), false);
	/* an extension not yet updated to 0.5 has no such column */
	if (scd2_installed("audit_log", "dimension_oid"))
		add_arg(&row, "dimension_oid", REGCLASSOID, ObjectIdGetDatum(dim_oid), !OidIsValid(dim_oid));

	if (scd2_exec_catalog(psprintf("INSERT INTO scd2.audit_log (%s)%s VALUES (%s) RETURNING run_id",
								   row.columns.data,
								   reserved != 0 ? " OVERRIDING SYSTEM VALUE" : "",
								   row.values.data),
						  row.nargs, row.types, row.args, row.nulls, false,
						  SPI_OK_INSERT_RETURNING, "writing the audit row") != 1)
		elog(ERROR, "scd2: writing the audit row returned no run id");
	written = scd2_spi_int8(0, 1);
	scd2_commit_stamp_remember(written);
	return written;
}

/*
 * The facts a revert or rewind re-keyed (facts.c), written into its audit
 * row after the row (the runs it undid are marked reverted by the row's
 * run id, which the re-keying reads), as the extension owner.
 */
void
scd2_audit_set_facts_rekeyed(int64 run_id, int64 facts)
{
	Oid			argtypes[2] = {INT8OID, INT8OID};
	Datum		values[2] = {Int64GetDatum(run_id), Int64GetDatum(facts)};

	if (facts == 0)
		return;
	scd2_exec_catalog("UPDATE scd2.audit_log SET facts_rekeyed = $2 WHERE run_id OPERATOR(pg_catalog.=) $1",
					  2, argtypes, values, NULL, false, SPI_OK_UPDATE, "writing the facts re-keyed into the audit row");
}

#define NOTICE_METRIC(name, words, shown, source, how) \
	if (SCD2_METRIC_SHOWN(shown, m->name)) \
		appendStringInfo(&buf, "%s%lld %s", buf.len > 0 ? ", " : "", (long long) m->name, \
						 SCD2_METRIC_WORDS(words, m->name));

/* The one-line summary a CALL prints. */
void
scd2_notice_metrics(const char *dim_name, const Scd2Metrics *m, bool dry_run,
					const char *schema_note)
{
	StringInfoData buf;

	initStringInfo(&buf);
	SCD2_METRICS(NOTICE_METRIC)
	/* a staging column that is not loaded is never passed over in silence */
	ereport(NOTICE,
			(errmsg("scd2: %s%s: %s%s%s", dim_name, dry_run ? " (dry run)" : "", buf.data,
					schema_note ? "; " : "", schema_note ? schema_note : "")));
}
