/*
 * fast_path_plan.c -- the plan of the fast path's probes (classify.c):
 * the staging rows sorted by key under the nested loop that probes the
 * current-row index, serial or in parallel.
 *
 * Probing in key order walks the index (and a heap that follows the key)
 * forward: at 1M keys and 200k staging rows, ~300 ms serial against
 * ~750 ms in the staging table's order (bench/RESULTS.md, issue 27).
 * PostgreSQL's cost model does not see that locality, so wherever it has
 * the choice it probes in the staging order and sorts after the join; and
 * it plans no sorted partial path of a table by itself, so a sorted
 * staging subquery keeps the probes in the leader, above a Gather Merge of
 * the sorted rows.  With a set_rel_pathlist_hook the statement's staging
 * relation is given only paths sorted by the key -- a Sort over its
 * cheapest scan, over its cheapest partial scan too -- for the one
 * statement the load arms it for: the join above them keeps the order,
 * serial or below a Gather Merge, where each process sorts its share of
 * the staging rows and probes them in key order (~210 ms for those
 * probes with one worker).
 *
 * The statement must ask for that order (an ORDER BY the key at the level
 * of the join), which names the staging relation's own columns: the hook
 * changes nothing when the pathkeys are not all of the relation.
 */
#include "scd2.h"

#include "nodes/pathnodes.h"
#include "optimizer/cost.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"

#include "load/runner.h"
#include "load/load.h"

static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;

/* the staging relation of the statement being planned, or InvalidOid */
static Oid	armed_relid = InvalidOid;

/* Whether every pathkey is of an expression of rel alone. */
static bool
pathkeys_of_rel(List *pathkeys, RelOptInfo *rel)
{
	ListCell   *lc;

	foreach(lc, pathkeys)
	{
		EquivalenceClass *ec = ((PathKey *) lfirst(lc))->pk_eclass;
		bool		found = false;
		ListCell   *lm;

		foreach(lm, ec->ec_members)
		{
			EquivalenceMember *em = (EquivalenceMember *) lfirst(lm);

			if (!em->em_is_const && !bms_is_empty(em->em_relids) &&
				bms_is_subset(em->em_relids, rel->relids))
				found = true;
		}
		if (!found)
			return false;
	}
	return true;
}

/*
 * The staging table is read whole, whatever enable_seqscan says: the load
 * turns sequential scans off for the dimension's sake (runner.c,
 * force_probing).  Before 18 that adds disable_cost to the staging scan's
 * path, serial and partial alike, and the serial and the parallel plans
 * then cost the same within the planner's fuzz, where the serial one wins
 * the tie (it is parallel safe, its Gather is not).  The staging relation
 * has no other way to be read, so its sorted scan is costed without it.
 */
static void
cost_staging_scan(Path *sort, Path *scan)
{
#if SCD2_DISABLE_COST_IN_PATHS
	if (!enable_seqscan && scan->pathtype == T_SeqScan && sort->startup_cost >= disable_cost)
	{
		sort->startup_cost -= disable_cost;
		sort->total_cost -= disable_cost;
	}
#endif
}

/*
 * The paths of a list that are sorted by pathkeys already, and the cheapest
 * other unparameterised one sorted; NIL when the list has no
 * unparameterised path.
 */
static List *
sorted_paths(PlannerInfo *root, RelOptInfo *rel, List *paths, List *pathkeys)
{
	List	   *sorted = NIL;
	Path	   *cheapest = NULL;
	ListCell   *lc;

	foreach(lc, paths)
	{
		Path	   *path = (Path *) lfirst(lc);

		if (path->param_info != NULL)
			continue;
		if (pathkeys_contained_in(pathkeys, path->pathkeys))
			sorted = lappend(sorted, path);
		else if (cheapest == NULL || path->total_cost < cheapest->total_cost)
			cheapest = path;
	}
	if (cheapest != NULL)
	{
		Path	   *sort = (Path *) create_sort_path(root, rel, cheapest, pathkeys, -1.0);

		cost_staging_scan(sort, cheapest);
		sorted = lappend(sorted, sort);
	}
	return sorted;
}

static void
sorted_staging_hook(PlannerInfo *root, RelOptInfo *rel, Index rti, RangeTblEntry *rte)
{
	List	   *serial;

	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);
	if (!OidIsValid(armed_relid) || rte->rtekind != RTE_RELATION || rte->relid != armed_relid ||
		rel->reloptkind != RELOPT_BASEREL || root->parse->commandType != CMD_SELECT ||
		root->query_pathkeys == NIL || !pathkeys_of_rel(root->query_pathkeys, rel))
		return;
	serial = sorted_paths(root, rel, rel->pathlist, root->query_pathkeys);
	if (serial == NIL)
		return;
	rel->pathlist = serial;
	rel->partial_pathlist = sorted_paths(root, rel, rel->partial_pathlist, root->query_pathkeys);
}

/* _PG_init */
void
scd2_fast_path_plan_init(void)
{
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = sorted_staging_hook;
}

/*
 * The statement the caller runs next probes in the order of relid's key:
 * disarm after it (also on error).
 */
void
scd2_fast_path_plan_arm(Oid relid)
{
	armed_relid = relid;
}

void
scd2_fast_path_plan_disarm(void)
{
	armed_relid = InvalidOid;
}
