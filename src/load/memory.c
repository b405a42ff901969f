/*
 * memory.c -- the memory budget of a load's statements.
 *
 * PostgreSQL gives every sort, tuplestore and hash node of a plan its own
 * work_mem (a hash node work_mem * hash_mem_multiplier), and a statement of
 * the load can have many of them live at once: at 10M staging rows and
 * work_mem 64MB the statement that collects the timeline points held two
 * hash aggregates, a hash join, a sort and a CTE's tuplestore, each near
 * its own limit -- 443 MB of private memory in one backend.
 *
 * So each statement of a load shares ONE hash node's memory, hash_mem =
 * work_mem * hash_mem_multiplier (2 x work_mem by default), among its
 * memory-hungry nodes: just before the executor starts a statement the
 * load marked (scd2_memory_budget_arm), its plan is read, a sort,
 * tuplestore or sorted aggregate counts 1, a hash node hash_mem_multiplier,
 * and work_mem is lowered for that statement to hash_mem / that weight
 * when that is less than work_mem (never raised: a statement with one sort
 * or one hash runs as before).  The plan itself is made with the user's
 * work_mem; only its execution spills to disk sooner.  Nothing of the
 * result depends on it.
 *
 * Memory no work_mem bounds is not covered: a hashed SubPlan (no longer in
 * the load's own statements; one in a user's staging view would be), the
 * backend's caches, temp_buffers for the work tables.
 *
 * The setting scd2.load_memory (kB) is the budget: -1, the default, is
 * hash_mem; 0 turns the sharing off (every node gets work_mem, as
 * PostgreSQL gives it: faster for a batch far larger than work_mem, at
 * several times the memory).
 */
#include "scd2.h"

#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/bitmapset.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "utils/guc.h"

#include "load/runner.h"
#include "load/load.h"

static ExecutorStart_hook_type prev_executor_start = NULL;


/* the statement of a load the executor is about to start, or NULL */
static const char *budget_sql = NULL;

typedef struct
{
	int			units;			/* sorts and tuplestores */
	int			hashes;			/* hash tables */
	Bitmapset  *ctes;			/* CTE plans counted (one tuplestore each) */
} PlanWeight;

/* Aggregates with DISTINCT or ORDER BY: each sorts its input. */
static bool
count_sorted_aggs(Node *node, PlanWeight *w)
{
	if (node == NULL)
		return false;
	if (IsA(node, Aggref))
	{
		Aggref	   *agg = (Aggref *) node;

		if (agg->aggdistinct != NIL || agg->aggorder != NIL)
			w->units++;
		return false;
	}
	return expression_tree_walker(node, count_sorted_aggs, (void *) w);
}

static void
weigh_plan(Plan *plan, PlanWeight *w)
{
	ListCell   *lc;

	if (plan == NULL)
		return;
	switch (nodeTag(plan))
	{
		case T_Sort:
		case T_IncrementalSort:
		case T_Material:
		case T_WindowAgg:
		case T_FunctionScan:
		case T_TableFuncScan:
			w->units++;
			break;
		case T_RecursiveUnion:
			w->units += 2;		/* working table and intermediate table */
			if (((RecursiveUnion *) plan)->numCols > 0)
				w->hashes++;
			break;
		case T_CteScan:
			if (!bms_is_member(((CteScan *) plan)->ctePlanId, w->ctes))
			{
				w->ctes = bms_add_member(w->ctes, ((CteScan *) plan)->ctePlanId);
				w->units++;
			}
			break;
		case T_Hash:
		case T_Memoize:
			w->hashes++;
			break;
		case T_Agg:
			if (((Agg *) plan)->aggstrategy == AGG_HASHED ||
				((Agg *) plan)->aggstrategy == AGG_MIXED)
				w->hashes++;
			(void) count_sorted_aggs((Node *) plan->targetlist, w);
			(void) count_sorted_aggs((Node *) plan->qual, w);
			break;
		case T_SetOp:
			if (((SetOp *) plan)->strategy == SETOP_HASHED)
				w->hashes++;
			break;
		case T_Append:
			foreach(lc, ((Append *) plan)->appendplans)
				weigh_plan((Plan *) lfirst(lc), w);
			break;
		case T_MergeAppend:
			foreach(lc, ((MergeAppend *) plan)->mergeplans)
				weigh_plan((Plan *) lfirst(lc), w);
			break;
		case T_BitmapAnd:
			foreach(lc, ((BitmapAnd *) plan)->bitmapplans)
				weigh_plan((Plan *) lfirst(lc), w);
			break;
		case T_BitmapOr:
			foreach(lc, ((BitmapOr *) plan)->bitmapplans)
				weigh_plan((Plan *) lfirst(lc), w);
			break;
		case T_SubqueryScan:
			weigh_plan(((SubqueryScan *) plan)->subplan, w);
			break;
		case T_CustomScan:
			foreach(lc, ((CustomScan *) plan)->custom_plans)
				weigh_plan((Plan *) lfirst(lc), w);
			break;
		default:
			break;
	}
	weigh_plan(plan->lefttree, w);
	weigh_plan(plan->righttree, w);
}

/*
 * Lower work_mem for this statement (in the GUC nest level of the load's
 * statement, which undoes it) so its nodes together stay within hash_mem.
 */
static void
apply_budget(PlannedStmt *stmt)
{
	PlanWeight	w = {0, 0, NULL};
	ListCell   *lc;
	double		weight;
	double		budget_kb;
	int			kb;
	char		value[32];

	if (scd2_load_memory == 0)
		return;
	budget_kb = scd2_load_memory > 0 ? (double) scd2_load_memory : (double) get_hash_memory_limit() / 1024.0;
	weigh_plan(stmt->planTree, &w);
	foreach(lc, stmt->subplans)	/* SubPlans, InitPlans and CTEs */
		weigh_plan((Plan *) lfirst(lc), &w);
	weight = w.units + w.hashes * hash_mem_multiplier;
	if (weight <= 0 || budget_kb / weight >= work_mem)
		return;
	kb = (int) Max(budget_kb / weight, 64.0);	/* work_mem's minimum */
	snprintf(value, sizeof(value), "%dkB", kb);
	(void) set_config_option("work_mem", value, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
}

static void
budget_executor_start(QueryDesc *queryDesc, int eflags)
{
	/*
	 * Only the load's statement itself, not a query a function runs while
	 * it is planned; what its triggers run inherits the lowered work_mem.
	 */
	if (budget_sql != NULL && queryDesc->sourceText != NULL &&
		strcmp(queryDesc->sourceText, budget_sql) == 0)
	{
		budget_sql = NULL;
		if (queryDesc->plannedstmt != NULL && queryDesc->plannedstmt->commandType != CMD_UTILITY)
			apply_budget(queryDesc->plannedstmt);
	}
	if (prev_executor_start)
		prev_executor_start(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

/* _PG_init */
void
scd2_memory_budget_init(void)
{
	prev_executor_start = ExecutorStart_hook;
	ExecutorStart_hook = budget_executor_start;
}

/*
 * The statement sql, which the caller runs next, is a load's: call in a
 * GUC nest level the caller undoes after the statement, and disarm after
 * it (also on error).
 */
void
scd2_memory_budget_arm(const char *sql)
{
	budget_sql = sql;
}

void
scd2_memory_budget_disarm(void)
{
	budget_sql = NULL;
}
