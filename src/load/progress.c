/*
 * load_progress.c -- a running load's phase and counts, for other sessions.
 *
 * PostgreSQL's progress views (pg_stat_progress_*) serve core commands
 * only, and an extension's shared memory would need
 * shared_preload_libraries.  What every session can already read about
 * another is pg_stat_activity, under its usual visibility rules (a role
 * sees its own sessions' queries; pg_read_all_stats sees all).  So at each
 * phase boundary of a load (load.c) the backend's query text becomes
 *
 *   scd2: load of DIM from STG: PHASE; staging rows D of T; changes D of T;
 *   oids DIMOID STGOID; query: <the statement that started the load>
 *
 * ("-" for a count not known yet), which the view scd2.load_progress splits
 * into columns; pg_stat_activity.state_change is when the phase began.
 * When the load ends the statement's own text and query id come back.
 * Nothing is written when track_activities is off.
 *
 * The text is formatted here only: its pattern is also in the view (sql/),
 * keep the two in step.
 */
#include "scd2.h"

#include "access/xact.h"
#include "lib/stringinfo.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "load/steps.h"

/* The phases' names, in the order of a load (Scd2ProgressPhase). */
static const char *const phase_names[] = {
	"validating staging",
	"classifying",
	"writing change log",
	"writing dimension",
	"inserting first versions",
	"reading change feed",
};

StaticAssertDecl(lengthof(phase_names) == SCD2_PROGRESS_PHASES,
				 "a name for every progress phase");

/*
 * The load being reported, and the activity to restore.  One load runs at
 * a time in a backend; a load that failed leaves `saved` behind, which is
 * reused only by a load of the same statement (a caller that caught the
 * error and went on), never restored into a later statement.
 */
static struct
{
	char	   *saved;			/* the statement's text (TopMemoryContext) */
	int64		query_id;
	TimestampTz statement_start;	/* of the statement `saved` belongs to */
	char	   *head;			/* "scd2: load of DIM from STG: " */
	Oid			dim_oid;
	Oid			stg_oid;
	bool		running;
} progress;

/* The text of this backend's current activity, or "" when not tracked. */
static const char *
current_activity(void)
{
	if (MyBEEntry == NULL || MyBEEntry->st_activity_raw == NULL)
		return "";
	return MyBEEntry->st_activity_raw;
}

void
scd2_progress_begin(const Scd2Config *cfg, Oid dim_oid, Oid stg_oid)
{
	TimestampTz start = GetCurrentStatementStartTimestamp();

	if (!pgstat_track_activities)
		return;
	/* a failed load of this statement left the statement's text saved */
	if (!(progress.running && progress.statement_start == start))
	{
		if (progress.saved)
			pfree(progress.saved);
		progress.saved = MemoryContextStrdup(TopMemoryContext, current_activity());
		progress.query_id = pgstat_get_my_query_id();
		progress.statement_start = start;
	}
	if (progress.head)
		pfree(progress.head);
	progress.head = MemoryContextStrdup(TopMemoryContext,
										psprintf("scd2: load of %s from %s: ",
												 cfg->dim_name, cfg->stg_name));
	progress.dim_oid = dim_oid;
	progress.stg_oid = stg_oid;
	progress.running = true;
}

static void
append_count(StringInfo buf, int64 n)
{
	if (n < 0)
		appendStringInfoChar(buf, '-');
	else
		appendStringInfo(buf, INT64_FORMAT, n);
}

/*
 * The load enters PHASE; counts < 0 are not known yet.  rows: staging
 * rows; changes: the dimension rows the load writes.
 */
void
scd2_progress_phase(Scd2ProgressPhase phase, int64 rows_done, int64 rows_total,
					int64 changes_done, int64 changes_total)
{
	StringInfoData buf;

	if (!pgstat_track_activities || !progress.running)
		return;
	initStringInfo(&buf);
	appendStringInfo(&buf, "%s%s; staging rows ", progress.head, phase_names[phase]);
	append_count(&buf, rows_done);
	appendStringInfoString(&buf, " of ");
	append_count(&buf, rows_total);
	appendStringInfoString(&buf, "; changes ");
	append_count(&buf, changes_done);
	appendStringInfoString(&buf, " of ");
	append_count(&buf, changes_total);
	appendStringInfo(&buf, "; oids %u %u; query: %s", progress.dim_oid, progress.stg_oid,
					 progress.saved);
	pgstat_report_activity(STATE_RUNNING, buf.data);
	/* a new activity resets the query id: keep the statement's */
	pgstat_report_query_id(progress.query_id, true);
	pfree(buf.data);
}

/* The load is done: the statement's own text again. */
void
scd2_progress_end(void)
{
	if (!progress.running)
		return;
	progress.running = false;
	if (pgstat_track_activities && progress.saved != NULL)
	{
		pgstat_report_activity(STATE_RUNNING, progress.saved);
		pgstat_report_query_id(progress.query_id, true);
	}
	if (progress.saved)
		pfree(progress.saved);
	progress.saved = NULL;
}
