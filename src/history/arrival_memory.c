/*
 * arrival_memory.c -- scd2.arrival_memory: the events of an order-free
 * dimension that its versions do not show (a no-op observation, a delete
 * of a key that was already absent), kept for later, earlier-dated events
 * (load/arrival.c recomputes a key from its versions and these).
 *
 * Every statement here runs as the extension owner and touches only scd2's
 * own tables and the memory's work tables (history.h), which the extension
 * owner creates: the business keys, instants and states in them were
 * computed by the load as the dimension's owner (jsonb of the keys, text
 * forms of the values), so nothing here calls a function a user can
 * define (docs/SECURITY.md).
 *
 * A row is remembered by a run (run_id) and superseded by a later one
 * (dropped_by): a load marks the live rows of the keys it recomputes from
 * their earliest staged instant on as dropped by it and inserts what it
 * remembers instead, so a revert of that run deletes its rows and brings
 * back the ones it dropped (scd2_arrival_memory_undo).  Rows leave the
 * table through scd2.prune_arrival_memory, and when their dimension is
 * dropped (catalog/dimensions.c, forget_dropped_memory).
 */
#include "scd2.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "common/common.h"
#include "history/history.h"

PG_FUNCTION_INFO_V1(scd2_prune_arrival_memory);
PG_FUNCTION_INFO_V1(scd2_arrival_memory_size);

#define MEMORY_COLS "business_key pg_catalog.jsonb, effective pg_catalog.timestamptz," \
	" present pg_catalog.bool, state pg_catalog.jsonb, sequence pg_catalog.jsonb"

/*
 * A remembered event's sequence (0.5: a change stream's order at one
 * instant, load/arrival.c), when the installed objects keep it: the
 * library is updated before ALTER EXTENSION scd2 UPDATE adds the column,
 * and a dimension registered before has no sequence.
 */
static const char *
memory_sequence(const char *alias)
{
	if (!scd2_installed("arrival_memory", "sequence"))
		return "NULL::pg_catalog.jsonb";
	return psprintf("%s.sequence", alias);
}

static void
catalog_utility(const char *sql, const char *what)
{
	(void) scd2_exec_catalog(sql, 0, NULL, NULL, NULL, false, SPI_OK_UTILITY, what);
}

/*
 * A statement that reads the memory of one dimension per staged key (the
 * recall: probes of arrival_memory_key_idx) or per row the recall found
 * (the supersede: a TID scan), whatever the memory's statistics say.
 * Statistics taken while only other dimensions remembered anything
 * estimate no row for this one; planned on them, the recall probed an
 * index by dimension alone and read the dimension's whole memory for every
 * staged key (200,000 keys of a batch sent again against 170,000
 * remembered rows: more than 13 minutes instead of seconds), or scanned
 * the table (or a whole index) per key when it was small at the last
 * ANALYZE.  So the key index is the only index with the dimension in it
 * (scd2--0.4.sql), the statements that probe it say "(dropped_by IS NULL)
 * IS TRUE", which the planner cannot prove implies the predicate of the
 * partial arrival_memory_live_idx (else a whole scan of that index,
 * when it was small at the last ANALYZE, was costed below the probe, and
 * taken for every staged key), the statement is planned for any dimension
 * ("dimension = $1" one dimension's share: plan_cache_mode =
 * force_generic_plan), and
 * the other scans are off for this statement only: sequential scans for
 * the recall, which leaves it the probe of the key index (tid_only: index
 * and bitmap scans too, for the supersede, which leaves it its TID scan).
 */
static uint64
memory_exec_per_row(const char *sql, int nargs, Oid *argtypes, Datum *values, bool tid_only,
					int expected, const char *what)
{
	int			nest = NewGUCNestLevel();
	uint64		n;

	scd2_set_local("plan_cache_mode", "force_generic_plan");
	scd2_set_local("enable_seqscan", "off");
	if (tid_only)
	{
		scd2_set_local("enable_indexscan", "off");
		scd2_set_local("enable_bitmapscan", "off");
	}
	n = scd2_exec_catalog(sql, nargs, argtypes, values, NULL, false, expected, what);
	AtEOXact_GUC(true, nest);
	return n;
}

/*
 * Whether the dimension remembers a live event (versions: an observation
 * of a version) effective at or after since.
 */
static bool
remembers_from(Oid dim_oid, TimestampTz since, bool versions)
{
	Oid			argtypes[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), TimestampTzGetDatum(since)};
	bool		isnull;
	bool		found;

	(void) scd2_exec_catalog(versions ?
							 "SELECT EXISTS (SELECT FROM scd2.arrival_memory m"
							 "  WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.business_key IS NULL"
							 "    AND m.effective OPERATOR(pg_catalog.>=) $2 AND m.dropped_by IS NULL)" :
							 "SELECT EXISTS (SELECT FROM scd2.arrival_memory m"
							 "  WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL"
							 "    AND m.effective OPERATOR(pg_catalog.>=) $2)",
							 2, argtypes, values, NULL, false, SPI_OK_SELECT,
							 versions ? "looking for remembered observations of versions" :
							 "looking for remembered events after the staged ones");
	found = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return found && !isnull;
}

/*
 * The work tables, created by the extension owner before the load's
 * security-restricted operation starts (the caller is the dimension's
 * owner, unrestricted), with what the owner may do on each granted.
 */
void
scd2_arrival_memory_prepare_store(void)
{
	const char *role = quote_identifier(GetUserNameFromId(GetUserId(), false));

	catalog_utility("CREATE TEMP TABLE " ARR_REMEMBER_TABLE " (" MEMORY_COLS ") ON COMMIT DROP",
					"creating the remembered events table");
	catalog_utility(psprintf("GRANT INSERT ON " ARR_REMEMBER_TABLE " TO %s", role),
					"granting the remembered events table");
}

/*
 * The same for the recall's work tables, which only a load that
 * recomputes keys needs (load/arrival.c).
 */
void
scd2_arrival_memory_prepare_recall(void)
{
	const char *role = quote_identifier(GetUserNameFromId(GetUserId(), false));

	catalog_utility("CREATE TEMP TABLE " ARR_KEYS_TABLE " (business_key pg_catalog.jsonb,"
					" since pg_catalog.timestamptz) ON COMMIT DROP", "creating the arrival key table");
	catalog_utility("CREATE TEMP TABLE " ARR_RECALLED_TABLE " (" MEMORY_COLS ", tid pg_catalog.tid,"
					" sk pg_catalog.int8) ON COMMIT DROP",
					"creating the recalled events table");
	catalog_utility("CREATE TEMP TABLE " ARR_VERSIONS_TABLE " (sk pg_catalog.int8,"
					" since pg_catalog.timestamptz) ON COMMIT DROP", "creating the arrival versions table");
	catalog_utility("CREATE TEMP TABLE " ARR_OBSERVED_TABLE " (sk pg_catalog.int8,"
					" effective pg_catalog.timestamptz, tid pg_catalog.tid) ON COMMIT DROP",
					"creating the observed versions table");
	catalog_utility("CREATE TEMP TABLE " ARR_STATES_TABLE " (sk pg_catalog.int8, effective pg_catalog.timestamptz,"
					" business_key pg_catalog.jsonb, state pg_catalog.jsonb) ON COMMIT DROP",
					"creating the observed states table");
	catalog_utility(psprintf("GRANT INSERT ON " ARR_KEYS_TABLE ", " ARR_VERSIONS_TABLE
							 ", " ARR_STATES_TABLE " TO %s", role),
					"granting the arrival work tables");
	catalog_utility(psprintf("GRANT SELECT ON " ARR_RECALLED_TABLE ", " ARR_OBSERVED_TABLE " TO %s", role),
					"granting the recalled events tables");
}

/*
 * Whether the dimension remembers an event effective at or after since
 * (the load's earliest staged instant).  When it does not -- in-order
 * events, every remembered one older than the batch -- no staged key has
 * a remembered event its load must see, and the load's simple keys take
 * the fast path (load/arrival.c).  One probe of arrival_memory_live_idx
 * (0.5: the dimension's live events by instant; the index on the instant
 * alone read the later events of every other order-free dimension first).
 */
bool
scd2_arrival_memory_ahead(Oid dim_oid, TimestampTz since)
{
	return remembers_from(dim_oid, since, false);
}

/*
 * Whether the dimension remembers observations of versions (rows of
 * surrogate keys) effective at or after since: only then does a
 * recomputing load list its staged keys' versions to recall them.
 */
bool
scd2_arrival_memory_has_versions(Oid dim_oid, TimestampTz since)
{
	return remembers_from(dim_oid, since, true);
}

/*
 * The live remembered events of the staged keys, from each key's earliest
 * staged instant on (earlier ones cannot change), into the recalled table.
 */
void
scd2_arrival_memory_recall(Oid dim_oid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};

	(void) memory_exec_per_row(psprintf("INSERT INTO " ARR_RECALLED_TABLE " (business_key, effective, present, state, sequence, tid)"
							   " SELECT m.business_key, m.effective, m.present, m.state, m.sequence, m.ctid"
							   "   FROM ONLY " ARR_KEYS_TABLE " k CROSS JOIN LATERAL"
							   "        (SELECT m0.ctid, m0.business_key, m0.effective, m0.present, m0.state, %s AS sequence"
							   "           FROM scd2.arrival_memory m0"
							   "          WHERE m0.dimension OPERATOR(pg_catalog.=) $1 AND (m0.dropped_by IS NULL) IS TRUE"
							   "            AND m0.business_key OPERATOR(pg_catalog.=) k.business_key"
							   "            AND (m0.effective OPERATOR(pg_catalog.>=) k.since) IS TRUE OFFSET 0) m",
							   memory_sequence("m0")),
							   1, argtypes, values, false, SPI_OK_INSERT, "recalling remembered events");
}

/*
 * The live no-op observations of versions (rows of surrogate keys) of the
 * staged keys' versions in ARR_VERSIONS_TABLE, each from its key's
 * earliest staged instant on, into ARR_OBSERVED_TABLE with the row that
 * holds it: the rows of the dimension's surrogate keys from the earliest
 * such instant on (arrival_memory_key_idx: the dimension, a NULL business
 * key, the instant), unnested and matched to the versions by hash.
 * Returns how many there are: the dimension's owner then reads their
 * states from the dimension (load/arrival.c), and
 * scd2_arrival_memory_recall_observed adds them to the recalled events.
 */
uint64
scd2_arrival_memory_recall_versions(Oid dim_oid)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};

	return memory_exec_per_row("INSERT INTO " ARR_OBSERVED_TABLE " (sk, effective, tid)"
							   " SELECT u.sk, m.effective, m.ctid FROM scd2.arrival_memory m"
							   "  CROSS JOIN LATERAL pg_catalog.unnest(m.versions) u(sk)"
							   "  WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.business_key IS NULL"
							   "    AND m.effective OPERATOR(pg_catalog.>=) (SELECT pg_catalog.min(v0.since)"
							   "                                              FROM ONLY " ARR_VERSIONS_TABLE " v0)"
							   "    AND (m.dropped_by IS NULL) IS TRUE"
							   "    AND EXISTS (SELECT FROM ONLY " ARR_VERSIONS_TABLE " v"
							   "                 WHERE v.sk OPERATOR(pg_catalog.=) u.sk"
							   "                   AND m.effective OPERATOR(pg_catalog.>=) v.since)",
							   1, argtypes, values, false, SPI_OK_INSERT, "recalling observed versions");
}

/*
 * The observations of versions, with the key and state the dimension's
 * owner read for each version (ARR_STATES_TABLE), join the recalled
 * events: from here on they are recalled events like any other, and the
 * row that holds one is superseded when the load does not remember it
 * again (scd2_arrival_memory_store).  An observation whose version is no
 * longer in the dimension (deleted by hand) has no state and is left out.
 */
void
scd2_arrival_memory_recall_observed(void)
{
	(void) scd2_exec_catalog("INSERT INTO " ARR_RECALLED_TABLE " (business_key, effective, present, state, tid, sk)"
							 " SELECT s.business_key, o.effective, true, s.state, o.tid, o.sk"
							 "   FROM ONLY " ARR_OBSERVED_TABLE " o JOIN ONLY " ARR_STATES_TABLE " s"
							 "     ON s.sk OPERATOR(pg_catalog.=) o.sk AND s.effective OPERATOR(pg_catalog.=) o.effective",
							 0, NULL, NULL, NULL, false, SPI_OK_INSERT, "recalling the observed versions' states");
}

/*
 * After the load's change log (its run id is reserved): the recalled rows
 * that the load does not remember again are superseded by run_id, and what
 * it remembers anew is inserted -- a row remembered again exactly as it is
 * stays as it is (a batch sent again adds nothing).  The recalled rows are
 * the live rows of the recomputed keys from their earliest staged instant
 * on (the load holds the dimension's lock: no other load changed them), so
 * both comparisons are between the two work tables, by hash (the state
 * compared as jsonb, NULL as JSON null: every condition hashable; a
 * nested loop over unanalyzed work tables was quadratic), and the rows
 * superseded are found by the ctid the recall read (a TID scan).  The
 * recall probes arrival_memory_key_idx by dimension and key
 * (memory_exec_per_row): its instant is a filter (IS TRUE), so that
 * arrival_memory_live_idx, which the dimension and the instant would match, is
 * never the probe -- one probe would read every later event of every
 * dimension.  Neither the recall (a nested loop driven by the staged keys,
 * each an index probe: the LATERAL subquery is fenced) nor the store joins
 * the memory to a work table by the planner's estimate of the memory: with
 * statistics that do not know the dimension yet (a new one, or its
 * memory grown since the last ANALYZE) it was estimated at one row, and a
 * nested loop over the memory re-ran the work tables' anti join once per
 * remembered row -- a batch of 200,000 rows sent again ran for more than 9
 * minutes instead of seconds.
 */
#define SAME_EVENT(a, b) \
	a ".business_key OPERATOR(pg_catalog.=) " b ".business_key AND " \
	a ".effective OPERATOR(pg_catalog.=) " b ".effective AND " \
	a ".present OPERATOR(pg_catalog.=) " b ".present AND " \
	"COALESCE(" a ".state, 'null') OPERATOR(pg_catalog.=) COALESCE(" b ".state, 'null') AND " \
	"COALESCE(" a ".sequence, 'null') OPERATOR(pg_catalog.=) COALESCE(" b ".sequence, 'null')"

/*
 * The recalled events the load does not remember again are superseded by
 * run_id: a row of versions in part, the others whole.
 */
static void
supersede_recalled(Oid dim_oid, int64 run_id)
{
	Oid			argtypes[2] = {OIDOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), Int64GetDatum(run_id)};

	/*
	 * A row of versions some of whose observations go: the others stay,
	 * in a row of this run (a revert deletes it and brings the old one
	 * back).  Written before the old row is marked, which is read by its
	 * ctid.  Both sides of the anti join are hashed: a row holds up to
	 * ARRIVAL_VERSIONS_PER_ROW keys, a batch sent again supersedes none
	 * of them but recalls them all.
	 */
	(void) memory_exec_per_row("WITH gone AS MATERIALIZED (SELECT c.tid, c.sk FROM ONLY " ARR_RECALLED_TABLE " c"
							   "         WHERE c.sk IS NOT NULL AND NOT EXISTS (SELECT FROM ONLY " ARR_REMEMBER_TABLE " r"
							   "                                                 WHERE " SAME_EVENT("r", "c") ")),"
							   " hit AS MATERIALIZED (SELECT m.ctid AS tid, m.effective, m.versions FROM scd2.arrival_memory m"
							   "         WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT DISTINCT g.tid FROM gone g))"
							   "           AND m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL),"
							   " kept AS (SELECT h.tid, h.effective, u.sk FROM hit h CROSS JOIN LATERAL pg_catalog.unnest(h.versions) u(sk)"
							   "         WHERE NOT EXISTS (SELECT FROM gone g WHERE g.tid OPERATOR(pg_catalog.=) h.tid"
							   "                                                AND g.sk OPERATOR(pg_catalog.=) u.sk))"
							   " INSERT INTO scd2.arrival_memory (dimension, effective, present, versions, run_id)"
							   " SELECT $1, k.effective, true, pg_catalog.array_agg(k.sk ORDER BY k.sk), $2"
							   "   FROM kept k GROUP BY k.tid, k.effective",
							   2, argtypes, values, true, SPI_OK_INSERT, "keeping the observations not superseded");
	(void) memory_exec_per_row("UPDATE scd2.arrival_memory m SET dropped_by = $2"
							   " WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.tid FROM ONLY " ARR_RECALLED_TABLE " c"
							   "          WHERE NOT EXISTS (SELECT FROM ONLY " ARR_REMEMBER_TABLE " r"
							   "                             WHERE " SAME_EVENT("r", "c") ")))"
							   "   AND m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL",
							   2, argtypes, values, true, SPI_OK_UPDATE, "superseding remembered events");
}

void
scd2_arrival_memory_store(Oid dim_oid, int64 run_id, bool recalled)
{
	Oid			argtypes[2] = {OIDOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), Int64GetDatum(run_id)};
	bool		seq = scd2_installed("arrival_memory", "sequence");

	if (recalled)
		supersede_recalled(dim_oid, run_id);
	/* what is remembered again as it is stays as it is */
	(void) scd2_exec_catalog(psprintf("INSERT INTO scd2.arrival_memory (dimension, business_key, effective, present,"
									  " state, run_id%s) SELECT $1, r.business_key, r.effective, r.present, r.state, $2%s"
									  "   FROM ONLY " ARR_REMEMBER_TABLE " r%s",
									  seq ? ", sequence" : "", seq ? ", r.sequence" : "",
									  recalled ? "  WHERE NOT EXISTS (SELECT FROM ONLY " ARR_RECALLED_TABLE " c"
									  " WHERE " SAME_EVENT("c", "r") ")" : ""),
							 2, argtypes, values, NULL, false, SPI_OK_INSERT, "remembering events");
}

static int
compare_observations(const void *a, const void *b, void *arg)
{
	const ArrivalObserved *obs = arg;
	int64		i = *(const int64 *) a;
	int64		j = *(const int64 *) b;

	if (obs->at[i] != obs->at[j])
		return obs->at[i] < obs->at[j] ? -1 : 1;
	if (obs->sk[i] != obs->sk[j])
		return obs->sk[i] < obs->sk[j] ? -1 : 1;
	return 0;
}

/* One row of versions: the observations order[from, to) at one instant. */
static void
store_versions_row(Oid dim_oid, int64 run_id, const ArrivalObserved *obs, const int64 *order,
				   int64 from, int64 to)
{
	Oid			argtypes[4] = {OIDOID, TIMESTAMPTZOID, INT8ARRAYOID, INT8OID};
	Datum		values[4];
	Datum	   *sks = palloc(sizeof(Datum) * (to - from));

	for (int64 i = from; i < to; i++)
		sks[i - from] = Int64GetDatum(obs->sk[order[i]]);
	values[0] = ObjectIdGetDatum(dim_oid);
	values[1] = TimestampTzGetDatum(obs->at[order[from]]);
	values[2] = PointerGetDatum(construct_array(sks, (int) (to - from), INT8OID, sizeof(int64),
												FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	values[3] = Int64GetDatum(run_id);
	(void) scd2_exec_catalog("INSERT INTO scd2.arrival_memory (dimension, effective, present, versions, run_id)"
							 " VALUES ($1, $2, true, $3, $4)",
							 4, argtypes, values, NULL, false, SPI_OK_INSERT, "remembering observed versions");
	pfree(DatumGetPointer(values[2]));
	pfree(sks);
}

/*
 * After the change log: the fast path's no-op observations of versions
 * (load/classify_copies.c), one row per instant and ARRIVAL_VERSIONS_PER_ROW
 * surrogate keys, sorted -- a row of keys is rewritten whole when a later
 * load supersedes one of them, so rows stay small enough for that to be
 * cheap, and few enough to be written at a fraction of the load's cost.
 */
void
scd2_arrival_memory_store_observed(Oid dim_oid, int64 run_id, const ArrivalObserved *obs)
{
	int64	   *order;
	int64		from = 0;

	if (obs == NULL || obs->n == 0)
		return;
	order = palloc_extended(sizeof(int64) * obs->n, MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < obs->n; i++)
		order[i] = i;
	qsort_arg(order, obs->n, sizeof(int64), compare_observations, (void *) obs);
	for (int64 i = 1; i <= obs->n; i++)
		if (i == obs->n || obs->at[order[i]] != obs->at[order[from]] ||
			i - from == ARRIVAL_VERSIONS_PER_ROW)
		{
			store_versions_row(dim_oid, run_id, obs, order, from, i);
			from = i;
		}
	pfree(order);
}

/* The work tables go (a transaction may run several loads). */
void
scd2_arrival_memory_drop(void)
{
	int			nest = NewGUCNestLevel();

	/* quietly: a load that only remembered made no recall tables */
	scd2_set_local("client_min_messages", "warning");
	catalog_utility("DROP TABLE IF EXISTS " ARR_KEYS_TABLE ", " ARR_RECALLED_TABLE ", " ARR_REMEMBER_TABLE
					", " ARR_VERSIONS_TABLE ", " ARR_OBSERVED_TABLE ", " ARR_STATES_TABLE,
					"dropping the arrival work tables");
	AtEOXact_GUC(true, nest);
}

/*
 * Revert of run_id (revert.c, for scd2.revert and scd2.rewind): what it
 * remembered is forgotten, what it superseded is remembered again.
 */
void
scd2_arrival_memory_undo(Oid dim_oid, int64 run_id)
{
	Oid			argtypes[2] = {OIDOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), Int64GetDatum(run_id)};
	if (!scd2_installed("arrival_memory", NULL))
		return;					/* objects older than 0.4: nothing remembered */
	(void) scd2_exec_catalog("DELETE FROM scd2.arrival_memory m"
							 " WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.run_id OPERATOR(pg_catalog.=) $2",
							 2, argtypes, values, NULL, false, SPI_OK_DELETE,
							 "forgetting the reverted run's remembered events");
	(void) scd2_exec_catalog("UPDATE scd2.arrival_memory m SET dropped_by = NULL"
							 " WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by OPERATOR(pg_catalog.=) $2",
							 2, argtypes, values, NULL, false, SPI_OK_UPDATE,
							 "remembering again what the reverted run superseded");
}

/*
 * scd2.prune_arrival_memory(dimension, before): forget the dimension's
 * remembered events effective before `before` (the retention horizon: a
 * later event older than it is loaded against the versions and what is
 * still remembered, docs/SEMANTICS.md), and the superseded rows no revert
 * can bring back any more (their run's change log was pruned, or the run
 * is gone from it).  Only the dimension's owner may prune.  Returns the
 * rows removed.
 */
Datum
scd2_prune_arrival_memory(PG_FUNCTION_ARGS)
{
	Oid			dim_oid;
	Oid			argtypes[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2];
	uint64		n;
	int			pin;

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("before must not be NULL"),
				 errhint("Pass the retention horizon: remembered events effective before it are forgotten, e.g. now() - interval '90 days'.")));
	dim_oid = PG_GETARG_OID(0);
	scd2_require_relation_owner(dim_oid, "Only the owner of a dimension can prune what it remembers.", NULL);
	values[0] = ObjectIdGetDatum(dim_oid);
	values[1] = PG_GETARG_DATUM(1);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();
	/*
	 * Two statements, each on its own index: the live rows before the
	 * horizon (arrival_memory_live_idx), then the superseded rows
	 * (arrival_memory_dropped_idx) before it or beyond any revert.  One
	 * statement with both conditions OR'ed read the whole memory.
	 */
	n = scd2_exec_catalog("DELETE FROM scd2.arrival_memory m"
						  " WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL"
						  "   AND m.effective OPERATOR(pg_catalog.<) $2",
						  2, argtypes, values, NULL, false, SPI_OK_DELETE,
						  "pruning remembered events");
	n += scd2_exec_catalog("DELETE FROM scd2.arrival_memory m"
						   " WHERE m.dropped_by IS NOT NULL AND m.dimension OPERATOR(pg_catalog.=) $1"
						   "   AND (m.effective OPERATOR(pg_catalog.<) $2 OR NOT EXISTS ("
						   "        SELECT FROM scd2.change_log_runs r"
						   "         WHERE r.run_id OPERATOR(pg_catalog.=) m.dropped_by"
						   "           AND r.logged AND r.pruned_at IS NULL AND r.reverted_by IS NULL))",
						   2, argtypes, values, NULL, false, SPI_OK_DELETE,
						   "pruning superseded events");
	scd2_unpin(pin);
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}

/* The events a row of the memory holds: one, or its versions' observations. */
#define EVENTS_IN_ROW "COALESCE(pg_catalog.cardinality(m.versions), 1)"

/*
 * scd2.arrival_memory_size(dimension): how much an order-free dimension
 * remembers, so that its owner can choose the retention horizon of
 * scd2.prune_arrival_memory: the live rows (remembered), the rows later
 * loads superseded and a revert may bring back (superseded), the earliest
 * and latest instants of the live rows, and the bytes of all of them
 * (pg_column_size of each row: the heap data, not its indexes).  One
 * statement on scd2.arrival_memory, as the extension owner, of the
 * dimension's rows only; only the dimension's owner may ask.
 */
Datum
scd2_arrival_memory_size(PG_FUNCTION_ARGS)
{
	Oid			dim_oid;
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1];
	TupleDesc	desc;
	Datum		out[5];
	bool		nulls[5];
	HeapTupleHeader row;
	int			pin;

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	dim_oid = PG_GETARG_OID(0);
	scd2_require_relation_owner(dim_oid, "Only the owner of a dimension can read how much it remembers.", NULL);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "scd2: arrival_memory_size must return a row");
	desc = BlessTupleDesc(desc);
	values[0] = ObjectIdGetDatum(dim_oid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();
	(void) scd2_exec_catalog("SELECT COALESCE(pg_catalog.sum(" EVENTS_IN_ROW ") FILTER (WHERE m.dropped_by IS NULL), 0)::pg_catalog.int8,"
							 "       COALESCE(pg_catalog.sum(" EVENTS_IN_ROW ") FILTER (WHERE m.dropped_by IS NOT NULL), 0)::pg_catalog.int8,"
							 "       pg_catalog.min(m.effective) FILTER (WHERE m.dropped_by IS NULL),"
							 "       pg_catalog.max(m.effective) FILTER (WHERE m.dropped_by IS NULL),"
							 "       COALESCE(pg_catalog.sum(pg_catalog.pg_column_size(m.*)), 0)::pg_catalog.int8"
							 "  FROM scd2.arrival_memory m WHERE m.dimension OPERATOR(pg_catalog.=) $1",
							 1, argtypes, values, NULL, true, SPI_OK_SELECT,
							 "reading the size of the arrival memory");
	for (int i = 0; i < 5; i++)
		out[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &nulls[i]);
	/* the row outlives SPI: form it in the caller's memory context */
	row = SPI_returntuple(heap_form_tuple(desc, out, nulls), desc);
	scd2_unpin(pin);
	SPI_finish();
	PG_RETURN_HEAPTUPLEHEADER(row);
}
