/*
 * runner.c -- the statement runner of one load: every statement a step
 * of the load generates runs here, as the dimension's owner in the load's
 * security-restricted operation (scd2_exec_user), with $1 = effective_at,
 * the load's one snapshot, its plan shown on request (explain.c), its
 * sorts and hashes under one memory budget (memory.c), and its errors
 * in the words of the load rather than of the generated SQL.  Below every
 * step and the driver (driver.c): it calls neither.
 */
#include "scd2.h"

#include "executor/spi.h"
#include "tcop/dest.h"
#include "utils/guc.h"
#include "utils/queryenvironment.h"
#include "utils/tuplestore.h"

#include "common/common.h"
#include "history/history.h"
#include "load/runner.h"

/*
 * In PG_CATCH of a statement of the load: the error goes on with the load
 * as its context instead of the generated statement (a constraint, trigger,
 * default or staging view of the user's fails in the load of a dimension,
 * not in SQL the user never wrote).  A syntax or internal error -- a bug
 * of scd2 -- keeps the statement.
 */
static void
load_rethrow(const LoadState *st, const char *what, MemoryContext cxt)
{
	scd2_rethrow_without_sql(cxt, psprintf("scd2: %s (load of dimension %s from %s)",
										   what, st->cfg->dim_name, st->cfg->stg_name));
}

/* Run a statement of the load: $1 = effective_at, the load's snapshot. */
void
scd2_load_exec(LoadState *st, const char *sql, int expected, const char *what)
{
	scd2_load_exec_args(st, sql, 0, NULL, NULL, expected, what);
}

/*
 * A statement of the load with more parameters, $2 on (none NULL); its
 * rows to dest when one is given (scd2_exec_user_into), else the
 * statement's result code must be expected.  With sorted_staging (a
 * query into dest) that relation's rows come sorted under the join that
 * asks for its key's order, and the query may run in parallel
 * (fast_path_plan.c).
 */
static void
run_statement(LoadState *st, const char *sql, int nargs, const Oid *types, const Datum *args,
			  DestReceiver *dest, Oid sorted_staging, int expected, const char *what)
{
	Oid		   *argtypes = palloc(sizeof(Oid) * (nargs + 1));
	Datum	   *values = palloc(sizeof(Datum) * (nargs + 1));
	MemoryContext cxt = CurrentMemoryContext;
	int			nest = NewGUCNestLevel();

	argtypes[0] = TIMESTAMPTZOID;
	values[0] = st->effective_at;
	for (int i = 0; i < nargs; i++)
	{
		argtypes[i + 1] = types[i];
		values[i + 1] = args[i];
	}
	PG_TRY();
	{
		scd2_fast_path_plan_arm(sorted_staging);
		/* its sorts and hashes share hash_mem (memory.c) */
		scd2_explain_if_asked(sql, what, nargs + 1, argtypes, values, st->snap);
		scd2_memory_budget_arm(sql);
		if (dest)
			(void) scd2_exec_user_into(sql, nargs + 1, argtypes, values, st->snap, dest,
									   OidIsValid(sorted_staging), what);
		else
			(void) scd2_exec_user(sql, nargs + 1, argtypes, values, NULL, st->snap, false,
								  expected, what);
		scd2_memory_budget_disarm();
		scd2_fast_path_plan_disarm();
	}
	PG_CATCH();
	{
		scd2_memory_budget_disarm();
		scd2_fast_path_plan_disarm();
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
	AtEOXact_GUC(true, nest);
}

/* The same with more parameters, $2 on (none NULL). */
void
scd2_load_exec_args(LoadState *st, const char *sql, int nargs, const Oid *types,
					const Datum *args, int expected, const char *what)
{
	run_statement(st, sql, nargs, types, args, NULL, InvalidOid, expected, what);
}

/*
 * Nested-loop index probes forced, for the statement at this GUC nest
 * level, when the driving side is small next to the dimension
 * (driving_rows < 0: always).  Measured on PostgreSQL 15: with a 48k-row
 * change set against a 1M-row dimension the planner still picks hash joins
 * that read and hash the whole dimension (about 2x slower than probing the
 * indexes).
 */
static void
force_probing(LoadState *st, double driving_rows)
{
	if (driving_rows >= 0 && driving_rows * 2 >= st->dim_rows)
		return;
	scd2_set_local("enable_hashjoin", "off");
	scd2_set_local("enable_mergejoin", "off");
	/* every probe is for a different key: a cache only costs */
	scd2_set_local("enable_memoize", "off");

	/*
	 * Probe the dimension's indexes, never scan it per row: a dimension
	 * that was empty (or tiny) when last analyzed is costed as a few pages,
	 * and the MERGE into it then scanned the whole, growing heap once per
	 * source row (100k rows into an empty dimension: 158 s on PostgreSQL
	 * 15).  The work tables have no index and are still scanned.
	 */
	scd2_set_local("enable_seqscan", "off");

	/*
	 * Nor scan a materialised copy of it per row: without statistics the
	 * planner takes "valid_to IS NULL" for 0.5% of the dimension, so a
	 * Materialize of the current rows filtered against every staging row
	 * looked cheaper than the probes (20k keys, 1,500 staging rows: 30M
	 * comparisons, 2.4 s instead of 60 ms).  The probe of a unique index is
	 * costed at one row whatever the statistics say.
	 */
	scd2_set_local("enable_material", "off");
}

/* Run a statement of the load with probes forced (force_probing). */
void
scd2_load_exec_probing(LoadState *st, double driving_rows, const char *sql,
				  int expected, const char *what)
{
	int			nest = NewGUCNestLevel();

	force_probing(st, driving_rows);
	scd2_load_exec(st, sql, expected, what);
	AtEOXact_GUC(true, nest);
}

/*
 * A query of the load whose rows go to dest, in the order of its scan
 * (batch_log.c's receiver of the change table).
 */
void
scd2_load_exec_into(LoadState *st, const char *sql, DestReceiver *dest, const char *what)
{
	run_statement(st, sql, 0, NULL, NULL, dest, InvalidOid, SPI_OK_SELECT, what);
}

/* The same with probes forced, for classify_copies.c's receiver. */
void
scd2_load_exec_probing_into(LoadState *st, double driving_rows, const char *sql,
							DestReceiver *dest, Oid sorted_staging, const char *what)
{
	int			nest = NewGUCNestLevel();

	force_probing(st, driving_rows);
	run_statement(st, sql, 0, NULL, NULL, dest, sorted_staging, SPI_OK_SELECT, what);
	AtEOXact_GUC(true, nest);
}

/*
 * Rows a step of the load computed (a query's, through its receiver), kept
 * in rel->store with the row type desc, as the named relation rel->name
 * that the load's next statements read, as a trigger's transition table
 * is read.  It lives until scd2_load_forget_relation, or the end of the SPI
 * connection.
 */
void
scd2_load_register_relation(LoadRelation *rel, TupleDesc desc)
{
	EphemeralNamedRelation enr = palloc0(sizeof(EphemeralNamedRelationData));

	enr->md.name = pstrdup(rel->name);
	enr->md.reliddesc = InvalidOid;
	enr->md.tupdesc = desc;
	enr->md.enrtype = ENR_NAMED_TUPLESTORE;
	enr->md.enrtuples = (double) rel->rows;
	enr->reldata = rel->store;
	if (SPI_register_relation(enr) != SPI_OK_REL_REGISTER)
		elog(ERROR, "scd2: registering relation \"%s\" failed", rel->name);
	rel->registered = true;
}

/* The relation of scd2_load_register_relation forgotten, its rows freed. */
void
scd2_load_forget_relation(LoadRelation *rel)
{
	if (rel->registered && SPI_unregister_relation(rel->name) != SPI_OK_REL_UNREGISTER)
		elog(ERROR, "scd2: forgetting relation \"%s\" failed", rel->name);
	rel->registered = false;
	if (rel->store)
		tuplestore_end(rel->store);
	rel->store = NULL;
}

/*
 * Run a read-only statement of the load (parallel query allowed, for the
 * validation scan of a large staging table when the planner finds it
 * worth it).
 */
void
scd2_load_exec_parallel(LoadState *st, const char *sql, const char *what)
{
	Oid			argtypes[1] = {TIMESTAMPTZOID};
	Datum		values[1] = {st->effective_at};
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		scd2_exec_user_parallel(sql, 1, argtypes, values, st->snap, what);
	}
	PG_CATCH();
	{
		load_rethrow(st, what, cxt);
	}
	PG_END_TRY();
}

/*
 * Whether the change log of an order-free load learns the surrogate keys
 * of the versions it inserts after its write (they have one, and the load
 * did not draw them before: on Citus, or when the key has no sequence
 * the owner may use -- batch_log.c, scd2_batch_sequence).
 */
static bool
keys_after_write(const LoadState *st)
{
	return st->cfg->order_free && st->cfg->sk != NULL && !OidIsValid(st->sk_seq);
}

/*
 * The change log of the load: its rows computed as the owner, like every
 * statement of the load (history/changelog.c explains why), then copied into
 * scd2.change_log by the extension owner.  probing: the rows are read by
 * (key, valid_from) probes of the dimension (the change table is not
 * analyzed, and the planner would hash the whole dimension: 0.6 s at 1M
 * keys / 20k updates, against 0.1 s for the probes).
 */
void
scd2_load_record_change_log(LoadState *st, const char *sql, bool probing)
{
	if (st->log_prepared)
	{
		int			nest = NewGUCNestLevel();

		scd2_pin_text_forms();
		if (probing)
			scd2_load_exec_probing(st, -1, sql, SPI_OK_INSERT, "recording the change log");
		else
			scd2_load_exec(st, sql, SPI_OK_INSERT, "recording the change log");
		AtEOXact_GUC(true, nest);
	}
	st->run_id = scd2_changelog_write(st->cfg, st->log_prepared, keys_after_write(st));
}

/*
 * After the write of an order-free load (driver.c): the surrogate keys of
 * the versions it inserted into its change log (history/changelog.c), computed as
 * the dimension's owner like the rest of the log, copied by the extension
 * owner, through the log's work table, which scd2_changelog_write kept
 * for them.  Nothing when no change log is kept or there is no surrogate
 * key.
 */
void
scd2_load_record_inserted_keys(LoadState *st, const char *chg)
{
	int			nest;
	int64		n;

	if (!st->log_prepared || !keys_after_write(st))
		return;
	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	scd2_load_exec_probing(st, -1, scd2_changelog_sql_inserted_keys(st->cfg, chg), SPI_OK_INSERT,
						   "recording the inserted versions' surrogate keys");
	n = (int64) SPI_processed;
	AtEOXact_GUC(true, nest);
	scd2_changelog_store_inserted_keys(st->cfg, st->run_id, n);
}

/* Copy the change feed rows SPI holds into the caller's tuplestore. */
void
scd2_store_feed(Tuplestorestate *store, TupleDesc desc)
{
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		Datum		values[5];
		bool		nulls[5];

		for (int c = 0; c < 5; c++)
			values[c] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, c + 1, &nulls[c]);
		tuplestore_putvalues(store, desc, values, nulls);
	}
}
