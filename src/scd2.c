/*
 * scd2.c -- module entry point: _PG_init defines the scd2.* settings (and
 * has load/memory.c and load/explain.c define their own one each).
 *
 * The variables are read where the setting takes effect: asof_on_missing
 * asof_bulk_threshold and asof_map_memory by the as-of lookup (asof/lookup.c,
 * asof/cache.c, asof/map.c),
 * change_log by the change log (history/changelog.c), allow_empty_snapshot and
 * allow_large_close by the load driver (load/driver.c), first_load_rebuild_indexes by the first load
 * (load/first_load.c), allow_drop_with_history by the uninstall guard
 * (history/drop_guard.c).  Their defaults are named in scd2.h.
 * scd2.load_memory is defined and read by load/memory.c,
 * scd2.explain_statement by load/explain.c.
 */
#include "scd2.h"

#include <limits.h>

#include "fmgr.h"
#include "utils/guc.h"

#include "load/load.h"

PG_MODULE_MAGIC;

int			scd2_asof_on_missing = SCD2_ASOF_ON_MISSING_DEFAULT;
int			scd2_asof_bulk_threshold = SCD2_ASOF_BULK_THRESHOLD_DEFAULT;
int			scd2_asof_map_memory = SCD2_ASOF_MAP_MEMORY_DEFAULT;
bool		scd2_change_log = SCD2_CHANGE_LOG_DEFAULT;
bool		scd2_allow_empty_snapshot = SCD2_ALLOW_EMPTY_SNAPSHOT_DEFAULT;
bool		scd2_first_load_rebuild_indexes = SCD2_FIRST_LOAD_REBUILD_INDEXES_DEFAULT;
bool		scd2_allow_large_close = SCD2_ALLOW_LARGE_CLOSE_DEFAULT;
int			scd2_load_memory = SCD2_LOAD_MEMORY_DEFAULT;
char	   *scd2_explain_statement = NULL;
bool		scd2_allow_drop_with_history = SCD2_ALLOW_DROP_WITH_HISTORY_DEFAULT;

static const struct config_enum_entry asof_on_missing_options[] = {
	{"null", SCD2_ASOF_MISSING_NULL, false},
	{"error", SCD2_ASOF_MISSING_ERROR, false},
	{NULL, 0, false}
};

void		_PG_init(void);

void
_PG_init(void)
{
	DefineCustomEnumVariable("scd2.asof_on_missing",
							 "What scd2.asof does when no version of the key is valid at the instant.",
							 "null returns NULL; error raises an error naming the key and the instant.",
							 &scd2_asof_on_missing,
							 SCD2_ASOF_ON_MISSING_DEFAULT,
							 asof_on_missing_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomIntVariable("scd2.asof_bulk_threshold",
							"Calls of scd2.asof in one query after which it looks versions up in an in-memory map of the dimension.",
							"The map is built once per query and snapshot by one walk of the as-of index, when it fits in scd2.asof_map_memory; "
							"a dimension of fewer than 40 times this many rows switches after rows / 40 calls (at least 1000). "
							"0 never builds it; 1 builds it at the first call.",
							&scd2_asof_bulk_threshold,
							SCD2_ASOF_BULK_THRESHOLD_DEFAULT,
							0,
							INT_MAX,
							PGC_USERSET,
							0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("scd2.asof_map_memory",
							"Memory one scd2.asof call site may use for its in-memory map of a dimension.",
							"The map takes about 12 bytes per version and 4 to 12 per business key for an integer key "
							"(more for other keys); a dimension whose map would be larger is probed through its index instead.",
							&scd2_asof_map_memory,
							SCD2_ASOF_MAP_MEMORY_DEFAULT,
							64,
							MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);

	/*
	 * A snapshot-mode load from an empty staging table would close every
	 * current version; it is refused unless this is on (SET LOCAL for the
	 * one load that means it).
	 */
	DefineCustomBoolVariable("scd2.allow_empty_snapshot",
							 "Allows a snapshot-mode load from an empty staging table.",
							 "Such a load closes every current version of the dimension; "
							 "an empty extract is more often an upstream failure, so it is refused unless this is on.",
							 &scd2_allow_empty_snapshot,
							 SCD2_ALLOW_EMPTY_SNAPSHOT_DEFAULT,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * A load that would close more than the registered max_close_fraction
	 * of the current keys is refused unless this is on (SET LOCAL for the
	 * one load that means it).
	 */
	DefineCustomBoolVariable("scd2.allow_large_close",
							 "Allows a load to close more than its dimension's max_close_fraction of the current keys.",
							 "A load that would close or delete more current keys than the registered fraction "
							 "(usually a partial extract in snapshot mode) is refused unless this is on.",
							 &scd2_allow_large_close,
							 SCD2_ALLOW_LARGE_CLOSE_DEFAULT,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/*
	 * DROP EXTENSION scd2 deletes the registry, the audit log and the
	 * change log: refused while they hold history, unless this is on.
	 */
	DefineCustomBoolVariable("scd2.allow_drop_with_history",
							 "Allows DROP EXTENSION scd2 while dimensions are registered or the audit log holds rows.",
							 "Dropping the extension deletes the registry, the audit log, the change log and the arrival memory "
							 "(the dimension tables stay); export them first.",
							 &scd2_allow_drop_with_history,
							 SCD2_ALLOW_DROP_WITH_HISTORY_DEFAULT,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/* Record what loads change, so a load can be reverted. */
	DefineCustomBoolVariable("scd2.change_log",
							 "Records the before-images of what each load changes, so the load can be reverted.",
							 "With off, loads run a little faster but cannot be reverted with scd2.revert.",
							 &scd2_change_log,
							 SCD2_CHANGE_LOG_DEFAULT,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	/*
	 * A first load into an empty dimension builds scd2's indexes after the
	 * insert: DROP INDEX locks the (empty) dimension against readers until
	 * the load commits; off keeps them and their row-by-row upkeep.
	 */
	DefineCustomBoolVariable("scd2.first_load_rebuild_indexes",
							 "Builds scd2's indexes after the insert when a load fills an empty dimension.",
							 "The indexes scd2.register created are dropped and built again with the same definitions, "
							 "which takes an ACCESS EXCLUSIVE lock on the empty dimension until the load's transaction ends; "
							 "off keeps them up to date row by row (slower) and lets readers in.",
							 &scd2_first_load_rebuild_indexes,
							 SCD2_FIRST_LOAD_REBUILD_INDEXES_DEFAULT,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);

	/* the memory budget of a load's statements (load/memory.c) */
	DefineCustomIntVariable("scd2.load_memory",
							"Memory one statement of a load shares among all its sorts and hashes.",
							"Each statement's work_mem is lowered so that its sorts, tuplestores and hash tables together "
							"stay within this (never raised above work_mem). -1 means work_mem * hash_mem_multiplier; "
							"0 turns it off: every sort and hash gets work_mem, as in any other query.",
							&scd2_load_memory,
							SCD2_LOAD_MEMORY_DEFAULT,
							-1,
							MAX_KILOBYTES,
							PGC_USERSET,
							GUC_UNIT_KB,
							NULL, NULL, NULL);
	scd2_memory_budget_init();
	/* a load statement's plan as a NOTICE (load/explain.c) */
	DefineCustomStringVariable("scd2.explain_statement",
							   "Shows the plan of one statement of each load as a NOTICE.",
							   "The statement is named by the step its errors name, for example 'classifying staging rows'; "
							   "'*' shows every statement of the load. The plan is EXPLAIN (COSTS OFF)'s nodes, without their details.",
							   &scd2_explain_statement,
							   "",
							   PGC_SUSET,
							   0,
							   NULL, NULL, NULL);
	/* the fast path's probes in key order (load/fast_path_plan.c) */
	scd2_fast_path_plan_init();
	/* the counts of a running load's statements (load/progress.c) */
	scd2_progress_init();
	MarkGUCPrefixReserved("scd2");
}
