/*
 * explain.c -- the plan a statement of a load runs with, on request.
 *
 * A load's statements run through SPI inside a procedure, where EXPLAIN
 * cannot reach them, and auto_explain is rarely loaded.  The setting
 * scd2.scd2_explain_statement names one step of a load by the words its errors
 * use for it (e.g. 'classifying staging rows'); just before that statement
 * runs, it is planned again under EXPLAIN (COSTS OFF) -- with the same
 * parameters, snapshot and statement-scoped planner settings -- and its
 * plan's nodes (the node lines without their details: no conditions, keys
 * or filters, which differ between PostgreSQL versions) are sent as a
 * NOTICE.  '*' shows every statement.  It is how a DBA sees what a slow
 * load does, and how the tests assert a plan's shape
 * (sql-tests/plan_unanalyzed.sql).
 */
#include "scd2.h"

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/guc.h"

#include "common/common.h"
#include "load/runner.h"

/*
 * A node line of EXPLAIN's text output: the top node, a line with an
 * arrow, or a SubPlan / InitPlan label (cut before PostgreSQL 15's
 * "(returns $0)").  Everything else is a node's detail.
 */
static void
append_node_line(StringInfo buf, const char *line)
{
	const char *text = line + strspn(line, " ");
	const char *returns;

	if (buf->len > 0 && strstr(line, "->  ") == NULL &&
		strncmp(text, "SubPlan ", 8) != 0 && strncmp(text, "InitPlan ", 9) != 0)
		return;
	if (buf->len > 0)
		appendStringInfoChar(buf, '\n');
	returns = strstr(line, " (returns ");
	if (returns != NULL)
		appendBinaryStringInfo(buf, line, (int) (returns - line));
	else
		appendStringInfoString(buf, line);
}

/*
 * Called by the load just before it runs sql (what = the step's words);
 * shows its plan when scd2.scd2_explain_statement asks for it.
 */
void
scd2_explain_if_asked(const char *sql, const char *what, int nargs, Oid *argtypes,
					  Datum *values, Snapshot snap)
{
	StringInfoData shape;

	if (scd2_explain_statement == NULL || scd2_explain_statement[0] == '\0' ||
		(strcmp(scd2_explain_statement, "*") != 0 && strcmp(scd2_explain_statement, what) != 0))
		return;
	/* planned as the load's statement would be: as the owner, restricted */
	(void) scd2_exec_user(psprintf("EXPLAIN (COSTS OFF) %s", sql), nargs, argtypes, values, NULL,
						  snap, false, SPI_OK_UTILITY, "explaining a load statement");
	if (SPI_tuptable == NULL)
		elog(ERROR, "scd2: EXPLAIN of %s returned no plan", what);
	initStringInfo(&shape);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		char	   *line = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);

		if (line != NULL)
			append_node_line(&shape, line);
	}
	ereport(NOTICE,
			(errmsg("scd2: plan of %s", what),
			 errdetail_internal("%s", shape.data)));
}
