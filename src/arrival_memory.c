/*
 * arrival_memory.c -- scd2.arrival_memory: the events of an order-free
 * dimension that its versions do not show (a no-op observation, a delete
 * of a key that was already absent), kept for later, earlier-dated events
 * (load_arrival.c recomputes a key from its versions and these).
 *
 * Every statement here runs as the extension owner and touches only scd2's
 * own tables and the memory's work tables (arrival.h), which the extension
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
 * dropped (registry.c, forget_dropped_memory).
 */
#include "scd2.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "arrival.h"

PG_FUNCTION_INFO_V1(scd2_prune_arrival_memory);
PG_FUNCTION_INFO_V1(scd2_arrival_memory_size);

#define MEMORY_COLS "business_key pg_catalog.jsonb, effective pg_catalog.timestamptz," \
	" present pg_catalog.bool, state pg_catalog.jsonb"

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
 * (scd2--0.4.sql), the statement is planned for any dimension ("dimension
 * = $1" one dimension's share: plan_cache_mode = force_generic_plan), and
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
 * The work tables, created by the extension owner before the load's
 * security-restricted operation starts (the caller is the dimension's
 * owner, unrestricted), with what the owner may do on each granted.
 */
void
scd2_arrival_memory_prepare(void)
{
	const char *role = quote_identifier(GetUserNameFromId(GetUserId(), false));

	catalog_utility("CREATE TEMP TABLE " ARR_KEYS_TABLE " (business_key pg_catalog.jsonb,"
					" since pg_catalog.timestamptz) ON COMMIT DROP", "creating the arrival key table");
	catalog_utility("CREATE TEMP TABLE " ARR_RECALLED_TABLE " (" MEMORY_COLS ", tid pg_catalog.tid) ON COMMIT DROP",
					"creating the recalled events table");
	catalog_utility("CREATE TEMP TABLE " ARR_REMEMBER_TABLE " (" MEMORY_COLS ") ON COMMIT DROP",
					"creating the remembered events table");
	catalog_utility(psprintf("GRANT INSERT ON " ARR_KEYS_TABLE ", " ARR_REMEMBER_TABLE " TO %s", role),
					"granting the arrival work tables");
	catalog_utility(psprintf("GRANT SELECT ON " ARR_RECALLED_TABLE " TO %s", role),
					"granting the recalled events table");
}

/*
 * Whether the dimension remembers an event effective at or after since
 * (the load's earliest staged instant).  When it does not -- in-order
 * events, every remembered one older than the batch -- no staged key has
 * a remembered event its load must see, and the load's simple keys take
 * the fast path (load_arrival.c).  A scan of arrival_memory_effective_idx
 * from since on: the later events of every order-free dimension, usually
 * none (or, on statistics that take this dimension for a small one, of
 * its part of arrival_memory_key_idx).
 */
bool
scd2_arrival_memory_ahead(Oid dim_oid, TimestampTz since)
{
	Oid			argtypes[2] = {OIDOID, TIMESTAMPTZOID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), TimestampTzGetDatum(since)};
	bool		isnull;
	bool		ahead;

	(void) scd2_exec_catalog("SELECT EXISTS (SELECT FROM scd2.arrival_memory m"
							 "  WHERE m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL"
							 "    AND m.effective OPERATOR(pg_catalog.>=) $2)",
							 2, argtypes, values, NULL, false, SPI_OK_SELECT,
							 "looking for remembered events after the staged ones");
	ahead = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	return ahead && !isnull;
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

	(void) memory_exec_per_row("INSERT INTO " ARR_RECALLED_TABLE " (business_key, effective, present, state, tid)"
							   " SELECT m.business_key, m.effective, m.present, m.state, m.ctid"
							   "   FROM ONLY " ARR_KEYS_TABLE " k CROSS JOIN LATERAL"
							   "        (SELECT m0.ctid, m0.business_key, m0.effective, m0.present, m0.state"
							   "           FROM scd2.arrival_memory m0"
							   "          WHERE m0.dimension OPERATOR(pg_catalog.=) $1 AND m0.dropped_by IS NULL"
							   "            AND m0.business_key OPERATOR(pg_catalog.=) k.business_key"
							   "            AND (m0.effective OPERATOR(pg_catalog.>=) k.since) IS TRUE OFFSET 0) m",
							   1, argtypes, values, false, SPI_OK_INSERT, "recalling remembered events");
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
 * arrival_memory_effective_idx, which only the instant would match, is
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
	"COALESCE(" a ".state, 'null') OPERATOR(pg_catalog.=) COALESCE(" b ".state, 'null')"

void
scd2_arrival_memory_store(Oid dim_oid, int64 run_id)
{
	Oid			argtypes[2] = {OIDOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), Int64GetDatum(run_id)};

	(void) memory_exec_per_row("UPDATE scd2.arrival_memory m SET dropped_by = $2"
							   " WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT c.tid FROM ONLY " ARR_RECALLED_TABLE " c"
							   "          WHERE NOT EXISTS (SELECT FROM ONLY " ARR_REMEMBER_TABLE " r"
							   "                             WHERE " SAME_EVENT("r", "c") ")))"
							   "   AND m.dimension OPERATOR(pg_catalog.=) $1 AND m.dropped_by IS NULL",
							   2, argtypes, values, true, SPI_OK_UPDATE, "superseding remembered events");
	(void) scd2_exec_catalog("INSERT INTO scd2.arrival_memory (dimension, business_key, effective, present,"
							 " state, run_id) SELECT $1, r.business_key, r.effective, r.present, r.state, $2"
							 "   FROM ONLY " ARR_REMEMBER_TABLE " r"
							 "  WHERE NOT EXISTS (SELECT FROM ONLY " ARR_RECALLED_TABLE " c WHERE " SAME_EVENT("c", "r") ")",
							 2, argtypes, values, NULL, false, SPI_OK_INSERT,
							 "remembering events");
}

/* The work tables go (a transaction may run several loads). */
void
scd2_arrival_memory_drop(void)
{
	catalog_utility("DROP TABLE IF EXISTS " ARR_KEYS_TABLE ", " ARR_RECALLED_TABLE ", " ARR_REMEMBER_TABLE,
					"dropping the arrival work tables");
}

/*
 * Revert of run_id (fn_revert.c, for scd2.revert and scd2.rewind): what it
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

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension must not be NULL")));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("before must not be NULL"),
				 errhint("Pass the retention horizon: remembered events effective before it are forgotten, e.g. now() - interval '90 days'.")));
	dim_oid = PG_GETARG_OID(0);
	scd2_require_relation_owner(dim_oid, "Only the owner of a dimension can prune what it remembers.");
	values[0] = ObjectIdGetDatum(dim_oid);
	values[1] = PG_GETARG_DATUM(1);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();
	/*
	 * Two statements, each on its own index: the live rows before the
	 * horizon (arrival_memory_effective_idx), then the superseded rows
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

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension must not be NULL")));
	dim_oid = PG_GETARG_OID(0);
	scd2_require_relation_owner(dim_oid, "Only the owner of a dimension can read how much it remembers.");
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "scd2: arrival_memory_size must return a row");
	desc = BlessTupleDesc(desc);
	values[0] = ObjectIdGetDatum(dim_oid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	pin = scd2_pin_search_path();
	(void) scd2_exec_catalog("SELECT pg_catalog.count(*) FILTER (WHERE m.dropped_by IS NULL),"
							 "       pg_catalog.count(*) FILTER (WHERE m.dropped_by IS NOT NULL),"
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
