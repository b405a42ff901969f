/*
 * progress.c -- a running load's phase and counts, for other sessions.
 *
 * PostgreSQL's progress views (pg_stat_progress_*) serve its own commands
 * only: pgstat_progress_start_command takes one of a fixed list of command
 * types (VACUUM, ANALYZE, CLUSTER, CREATE INDEX, BASE BACKUP, COPY on 15
 * to 18), a backend has one slot, and a load's own statements (the
 * indexes a first load builds) start core commands in it.  Borrowing a
 * core type would show a load in another command's view, to every reader
 * of that view.  An extension's shared memory would need
 * shared_preload_libraries, and a DSM registry exists from 17 on only.
 * What every session can already read about another is pg_stat_activity,
 * under its usual visibility rules (a role sees its own sessions'
 * queries; pg_read_all_stats sees all).  So while a load runs, the
 * backend's query text is the statement that started it, then, on a line
 * of its own, its progress as a SQL comment whose text is
 *
 *   scd2 load: PHASE since EPOCH; staging rows D of T; changes D of T; oids DIM STG
 *
 * ("-" for a count not known yet; EPOCH is when the phase began, in Unix
 * seconds), which the view scd2.load_progress splits into columns.  The
 * statement comes first and keeps its text, so that monitoring that looks
 * for it (query LIKE 'CALL scd2.apply%', lock-wait reports) still finds
 * the load; it is cut short when it and the comment would not fit in
 * track_activity_query_size.  Only the text changes: the state, its
 * timestamp and the query id stay PostgreSQL's.  The counts move within a
 * phase: the statement that classifies the staging rows and the one that
 * writes the dimension count the rows they process (the executor hook
 * below), and the text is rewritten every 1% of the phase's total.
 *
 * When the load ends -- done, failed, cancelled, or its subtransaction
 * rolled back by a caller that caught the error -- the statement's own
 * text comes back (the transaction and subtransaction callbacks below), so
 * an idle session shows the statement that failed, as PostgreSQL would,
 * and scd2.load_progress no row.  Nothing is written when
 * track_activities is off.
 *
 * The comment is formatted here only: its pattern is also in the view
 * (sql/), keep the two in step.
 */
#include "scd2.h"

#include "access/xact.h"
#include "datatype/timestamp.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/execnodes.h"
#include "utils/backend_status.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"

#include "load/load.h"
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

/* Rewrite the text every this fraction of a phase's total (1%). */
#define STEPS_PER_PHASE 100
/* ... or every this many rows when the total is not known. */
#define STEP_UNKNOWN_TOTAL 10000

/*
 * The load being reported.  One load runs at a time in a backend (a load
 * a trigger of another load starts takes the report over, and gives the
 * statement back when it ends).
 */
static struct
{
	bool		running;
	bool		shown;			/* the text was rewritten (track_activities) */
	char	   *statement;		/* the activity's text before (TopMemoryContext) */
	SubTransactionId subid;		/* the subtransaction the load began in */
	Oid			dim_oid;
	Oid			stg_oid;
	Scd2ProgressPhase phase;
	TimestampTz phase_start;
	int64		rows_done;
	int64		rows_total;
	int64		changes_done;
	int64		changes_total;
	int64		next_rows;		/* rewrite the text when a count reaches this */
	int64		next_changes;
	bool		callbacks;		/* the transaction callbacks are registered */
} progress;

/*
 * The statement whose processed rows count (scd2_progress_count_statement),
 * and, from its executor's start to its end, the one node of it whose
 * ExecProcNode counts them (one at a time: that node calls counted_real).
 */
static const char *count_sql = NULL;
static bool count_changes;		/* they count as changes, else as rows */
static QueryDesc *counted_query = NULL;	/* from its start to its end */
static SubTransactionId counted_subid;	/* the subtransaction it runs in */
static ExecProcNodeMtd counted_real = NULL;
static bool counted_pending;	/* it returned a row the node above has */

static ExecutorStart_hook_type prev_executor_start = NULL;
static ExecutorEnd_hook_type prev_executor_end = NULL;

/*
 * Set this backend's activity text to text, and nothing else of it (its
 * state, the state's timestamp, the query id stay), as
 * pgstat_report_activity writes it.
 */
static void
set_activity(const char *text)
{
	volatile PgBackendStatus *be = MyBEEntry;
	int			len;

	if (be == NULL || be->st_activity_raw == NULL)
		return;
	len = Min((int) strlen(text), pgstat_track_activity_query_size - 1);
	PGSTAT_BEGIN_WRITE_ACTIVITY(be);
	memcpy((char *) be->st_activity_raw, text, len);
	be->st_activity_raw[len] = '\0';
	PGSTAT_END_WRITE_ACTIVITY(be);
}

static void
append_count(StringInfo buf, int64 n)
{
	if (n < 0)
		appendStringInfoChar(buf, '-');
	else
		appendStringInfo(buf, INT64_FORMAT, n);
}

/* How many more done of total before the text is rewritten again. */
static int64
step_of(int64 total)
{
	return total > 0 ? Max(total / STEPS_PER_PHASE, 1) : STEP_UNKNOWN_TOTAL;
}

/* The statement and the progress comment, into the activity text. */
static void
show(void)
{
	StringInfoData comment;
	StringInfoData buf;
	int			len = (int) strlen(progress.statement);
	int64		usecs = progress.phase_start +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;
	int			room;

	progress.next_rows = progress.rows_done + step_of(progress.rows_total);
	progress.next_changes = progress.changes_done + step_of(progress.changes_total);
	if (!progress.running || !pgstat_track_activities)
		return;
	initStringInfo(&comment);
	appendStringInfo(&comment, "\n/* scd2 load: %s since " INT64_FORMAT ".%06d; staging rows ",
					 phase_names[progress.phase], usecs / USECS_PER_SEC,
					 (int) (usecs % USECS_PER_SEC));
	append_count(&comment, progress.rows_done);
	appendStringInfoString(&comment, " of ");
	append_count(&comment, progress.rows_total);
	appendStringInfoString(&comment, "; changes ");
	append_count(&comment, progress.changes_done);
	appendStringInfoString(&comment, " of ");
	append_count(&comment, progress.changes_total);
	appendStringInfo(&comment, "; oids %u %u */", progress.dim_oid, progress.stg_oid);

	/* the statement cut short (at a character) to leave room for the comment */
	room = pgstat_track_activity_query_size - 1 - comment.len;
	if (room < 0)
	{
		pfree(comment.data);
		return;					/* no room even for the comment: the statement alone */
	}
	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, progress.statement,
						   len <= room ? len : pg_mbcliplen(progress.statement, len, room));
	appendBinaryStringInfo(&buf, comment.data, comment.len);
	set_activity(buf.data);
	progress.shown = true;
	pfree(buf.data);
	pfree(comment.data);
}

/* The load is over: the statement's own text again, nothing counted. */
static void
finish(void)
{
	count_sql = NULL;
	if (!progress.running)
		return;
	progress.running = false;
	if (progress.shown)
		set_activity(progress.statement);
	progress.shown = false;
	pfree(progress.statement);
	progress.statement = NULL;
}

/* A transaction that ends with a load running (it failed): finish it. */
static void
progress_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PREPARE:
			counted_query = NULL;	/* its executor is gone */
			finish();
			break;
		default:
			break;
	}
}

/*
 * A subtransaction rolled back that the load began in, or one around it
 * (a caller that caught the load's error): finish it.  One the load
 * began itself (a later id) is the load's own business.
 */
static void
progress_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						  SubTransactionId parentSubid, void *arg)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	if (counted_query != NULL && mySubid <= counted_subid)
		counted_query = NULL;	/* its executor is gone */
	if (progress.running && mySubid <= progress.subid)
		finish();
}

void
scd2_progress_begin(Oid dim_oid, Oid stg_oid)
{
	const char *activity = "";

	if (!progress.callbacks)
	{
		RegisterXactCallback(progress_xact_callback, NULL);
		RegisterSubXactCallback(progress_subxact_callback, NULL);
		progress.callbacks = true;
	}
	/* a load within a load (a trigger's) keeps the statement */
	if (!progress.running)
	{
		if (MyBEEntry != NULL && MyBEEntry->st_activity_raw != NULL)
			activity = MyBEEntry->st_activity_raw;
		progress.statement = MemoryContextStrdup(TopMemoryContext, activity);
		progress.shown = false;
	}
	progress.running = true;
	progress.subid = GetCurrentSubTransactionId();
	progress.dim_oid = dim_oid;
	progress.stg_oid = stg_oid;
}

/*
 * The load enters PHASE; counts < 0 are not known yet.  rows: staging
 * rows; changes: the dimension rows the load writes.
 */
void
scd2_progress_phase(Scd2ProgressPhase phase, int64 rows_done, int64 rows_total,
					int64 changes_done, int64 changes_total)
{
	progress.phase = phase;
	progress.phase_start = GetCurrentTimestamp();
	progress.rows_done = rows_done;
	progress.rows_total = rows_total;
	progress.changes_done = changes_done;
	progress.changes_total = changes_total;
	show();
}

/* n more staging rows done in this phase. */
static void
add_rows(int64 n)
{
	progress.rows_done = Max(progress.rows_done, 0) + n;
	if (progress.rows_done >= progress.next_rows)
		show();
}

/* n more changes done in this phase. */
static void
add_changes(int64 n)
{
	progress.changes_done = Max(progress.changes_done, 0) + n;
	if (progress.changes_done >= progress.next_changes)
		show();
}

/* The load is done. */
void
scd2_progress_end(void)
{
	finish();
}

/* ---------- the rows a statement of the load processes ---------- */

/*
 * The counted node's rows, each one counted when the node above asks for
 * the next (or the end): then it is done with it -- written, or
 * classified and kept or dropped.
 */
static TupleTableSlot *
counting_exec(PlanState *ps)
{
	TupleTableSlot *slot;

	if (counted_pending)
	{
		counted_pending = false;
		if (count_changes)
			add_changes(1);
		else
			add_rows(1);
	}
	slot = counted_real(ps);
	counted_pending = !TupIsNull(slot);
	return slot;
}

/*
 * The node whose rows are the statement's processed rows: the source of
 * its ModifyTable (the statement's own, or a data-modifying WITH's), or
 * for a query the rows under its outermost filter (the fast path drops
 * the rows it found unchanged there, after classifying them).
 */
static PlanState *
node_to_count(QueryDesc *qd)
{
	PlanState  *ps = qd->planstate;

	if (ps == NULL)
		return NULL;
	if (IsA(ps, ModifyTableState))
		return outerPlanState(ps);
	if (qd->estate->es_auxmodifytables != NIL)
		return outerPlanState(linitial(qd->estate->es_auxmodifytables));
	while (IsA(ps, SubqueryScanState) && ps->qual != NULL)
		ps = ((SubqueryScanState *) ps)->subplan;
	return ps;
}

static void
progress_executor_start(QueryDesc *qd, int eflags)
{
	if (prev_executor_start)
		prev_executor_start(qd, eflags);
	else
		standard_ExecutorStart(qd, eflags);

	/* only the armed statement itself, not what its functions run */
	if (count_sql != NULL && counted_query == NULL && qd->sourceText != NULL &&
		strcmp(qd->sourceText, count_sql) == 0 && !(eflags & EXEC_FLAG_EXPLAIN_ONLY))
	{
		PlanState  *ps = node_to_count(qd);

		count_sql = NULL;
		if (ps != NULL)
		{
			counted_query = qd;
			counted_subid = GetCurrentSubTransactionId();
			counted_real = ps->ExecProcNodeReal;
			counted_pending = false;
			ps->ExecProcNodeReal = counting_exec;
		}
	}
}

/*
 * The counted statement's executor ends (an error ends it without this:
 * the transaction callbacks above).
 */
static void
progress_executor_end(QueryDesc *qd)
{
	if (qd == counted_query)
		counted_query = NULL;
	if (prev_executor_end)
		prev_executor_end(qd);
	else
		standard_ExecutorEnd(qd);
}

/*
 * The statement sql, which the caller runs next, counts the rows it
 * processes into the phase's changes (or staging rows); call
 * scd2_progress_count_done after it (an error ends the counting too).
 */
void
scd2_progress_count_statement(const char *sql, bool changes)
{
	if (!progress.running || counted_query != NULL)
		return;
	count_sql = sql;
	count_changes = changes;
}

void
scd2_progress_count_done(void)
{
	count_sql = NULL;
}

/* _PG_init */
void
scd2_progress_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = progress_executor_start;
	prev_executor_end = ExecutorEnd_hook;
	ExecutorEnd_hook = progress_executor_end;
}
