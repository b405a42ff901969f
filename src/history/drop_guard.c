/*
 * drop_guard.c -- an uninstall that keeps the history of the loads.
 *
 * DROP EXTENSION scd2 (with or without CASCADE, or IF EXISTS), and DROP
 * SCHEMA scd2 CASCADE, which drops the extension with its schema, would
 * delete the registry, the audit log, the change log (what scd2.revert and
 * scd2.rewind need) and the arrival memory; the dimension tables would stay
 * with nothing left to explain or undo them.  The ddl_command_start event
 * trigger scd2_keep_history (sql/scd2--0.4--0.5.sql) calls
 * scd2_on_drop_extension before the drop touches anything: while a
 * dimension is registered or the audit log holds a row, the drop is
 * refused, with the counts, how to export the history and how to force it
 * (SET scd2.allow_drop_with_history = on, defined in scd2.c).
 *
 * Like every event trigger it does not fire in single-user mode, nor with
 * event triggers turned off (event_triggers = off, PostgreSQL 17 on), nor
 * for DROP OWNED BY of the extension's owner, nor for DROP DATABASE.
 */
#include "scd2.h"

#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "nodes/parsenodes.h"
#include "nodes/value.h"
#include "utils/lsyscache.h"
#include "common/common.h"

PG_FUNCTION_INFO_V1(scd2_on_drop_extension);

/*
 * Whether stmt drops the extension scd2, or the schema it lives in (nsp)
 * with CASCADE (without, the extension makes the drop fail anyway).
 */
static bool
drops_scd2(const DropStmt *stmt, Oid nsp)
{
	const char *nspname = get_namespace_name(nsp);
	ListCell   *lc;

	if (stmt->removeType != OBJECT_EXTENSION &&
		!(stmt->removeType == OBJECT_SCHEMA && stmt->behavior == DROP_CASCADE))
		return false;
	foreach(lc, stmt->objects)
	{
		const char *name = strVal(lfirst(lc));

		if (stmt->removeType == OBJECT_EXTENSION ? strcmp(name, "scd2") == 0 :
			(nspname != NULL && strcmp(name, nspname) == 0))
			return true;
	}
	return false;
}

/* "1 row", "2 rows" */
static char *
counted(int64 n, const char *one, const char *many)
{
	return psprintf("%lld %s", (long long) n, n == 1 ? one : many);
}

Datum
scd2_on_drop_extension(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	int64		dimensions,
				audit_rows,
				runs;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("scd2._on_drop_extension() is called by the event trigger scd2_keep_history only")));
	trigdata = (EventTriggerData *) fcinfo->context;
	if (scd2_allow_drop_with_history || !IsA(trigdata->parsetree, DropStmt) ||
		!drops_scd2((DropStmt *) trigdata->parsetree, get_func_namespace(fcinfo->flinfo->fn_oid)))
		PG_RETURN_VOID();

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	scd2_exec_catalog("SELECT (SELECT pg_catalog.count(*) FROM scd2.dimensions),"
					  " (SELECT pg_catalog.count(*) FROM scd2.audit_log),"
					  " (SELECT pg_catalog.count(*) FROM scd2.change_log_runs)",
					  0, NULL, NULL, NULL, true, SPI_OK_SELECT, "counting the history of the loads");
	dimensions = scd2_spi_int8(0, 1);
	audit_rows = scd2_spi_int8(0, 2);
	runs = scd2_spi_int8(0, 3);
	SPI_finish();
	if (dimensions == 0 && audit_rows == 0)
		PG_RETURN_VOID();

	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop extension scd2 while it holds the history of the loads"),
			 errdetail("%s registered, scd2.audit_log holds %s and the change log %s; "
					   "dropping the extension deletes them (the dimension tables stay), and nothing could explain, revert or rewind those loads any more.",
					   counted(dimensions, "dimension is", "dimensions are"),
					   counted(audit_rows, "row", "rows"), counted(runs, "run", "runs")),
			 errhint("Export the history first (pg_dump --data-only --table='scd2.*', or COPY each table of schema scd2 to a file), "
					 "then SET scd2.allow_drop_with_history = on and drop the extension again.")));
	PG_RETURN_VOID();			/* not reached */
}
