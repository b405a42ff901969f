/*
 * exec.c -- every SPI statement scd2 runs on data goes through here, in one
 * of three ways (docs/SECURITY.md, "The rule"):
 *
 *   scd2_exec_user     a statement that reads or evaluates user data (the
 *                      dimension, the staging table, values of their types:
 *                      casts, type I/O, domains, operators, defaults,
 *                      triggers, policies).  It runs only inside an owner
 *                      context (scd2_owner_enter ... scd2_owner_leave): as
 *                      the dimension's owner, in a security-restricted
 *                      operation, with a GUC nest level of its own and
 *                      search_path pinned.  Called anywhere else it is an
 *                      error, not a silent run with the caller's rights.
 *   scd2_exec_work     creating or dropping the load's temporary work
 *                      tables, as the owner before the restriction starts
 *                      (a security-restricted operation may not create a
 *                      temporary table).
 *   scd2_exec_catalog  a statement on scd2's own tables (registry, audit
 *                      log, change log) as the extension's owner.  It may
 *                      name only scd2's tables, pg_catalog and work tables
 *                      the extension owner created itself, and takes every
 *                      other value as a parameter, computed before in the
 *                      owner's context: it never evaluates a function,
 *                      cast or type a user can define.
 *
 * The SPI calls themselves are static in this file; the rest of scd2 has no
 * other way to run a statement on user data.  test/security_matrix/run.sh
 * fails when another file calls SPI_execute*, SPI_prepare* or
 * SPI_cursor_open, except those it lists: load/convert.c (the load's
 * conversion checks, in subtransactions, which call
 * scd2_exec_require_owner first) and the reads of scd2's registry and of
 * Citus' catalog, and asof on Citus, which read as the caller.
 */
#include "scd2.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "common/common.h"

/*
 * The owner of the innermost owner context, InvalidOid outside one.  A
 * value left behind by an error is harmless: scd2_exec_user also requires
 * the security-restricted bit, which the abort of the (sub)transaction
 * cleared together with the role.
 */
static Oid	active_owner = InvalidOid;

/* The one place a statement runs: parameters, an optional snapshot. */
static uint64
spi_run(const char *sql, int nargs, const Oid *argtypes, const Datum *values,
		const char *nulls, Snapshot snap, bool read_only, int expected, const char *what)
{
	SPIPlanPtr	plan;
	int			rc;

	plan = SPI_prepare(sql, nargs, (Oid *) argtypes);
	if (plan == NULL)
		elog(ERROR, "scd2: preparing %s failed: %s", what, SPI_result_code_string(SPI_result));
	if (snap != InvalidSnapshot)
		rc = SPI_execute_snapshot(plan, (Datum *) values, nulls, snap, InvalidSnapshot,
								  read_only, true, 0);
	else
		rc = SPI_execute_plan(plan, (Datum *) values, nulls, read_only, 0);
	if (rc != expected)
		elog(ERROR, "scd2: %s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(plan);
	return SPI_processed;
}

/*
 * Become the dimension's owner, the way core runs REFRESH MATERIALIZED
 * VIEW (matview.c): first with only the role switch locked
 * (SECURITY_LOCAL_USERID_CHANGE), so that the load can create its
 * temporary work tables, then -- scd2_owner_restrict, before any statement
 * that runs code the owner controls -- in a security-restricted operation.
 * A new GUC nest level with search_path pinned; scd2_owner_leave rolls
 * back every setting made inside it (by scd2 or by the owner's code) and
 * brings back the caller's role and security context.  An error ends the
 * (sub)transaction, which restores both as well.
 */
void
scd2_owner_enter(OwnerContext *oc, Oid owner)
{
	oc->owner = owner;
	oc->prev_owner = active_owner;
	GetUserIdAndSecContext(&oc->save_userid, &oc->save_sec);
	SetUserIdAndSecContext(owner, oc->save_sec | SECURITY_LOCAL_USERID_CHANGE);
	oc->nest = NewGUCNestLevel();
	scd2_restrict_search_path();
	active_owner = owner;
}

void
scd2_owner_restrict(OwnerContext *oc)
{
	SetUserIdAndSecContext(oc->owner, oc->save_sec | SECURITY_RESTRICTED_OPERATION);
}

/*
 * Back to the owner without the restriction, only to create a work table
 * (matview.c does the same for its "diff" table).
 */
void
scd2_owner_unrestrict(OwnerContext *oc)
{
	SetUserIdAndSecContext(oc->owner, oc->save_sec | SECURITY_LOCAL_USERID_CHANGE);
}

void
scd2_owner_leave(OwnerContext *oc)
{
	AtEOXact_GUC(false, oc->nest);
	SetUserIdAndSecContext(oc->save_userid, oc->save_sec);
	active_owner = oc->prev_owner;
}

/* Inside an owner context, as its owner; restricted: and restricted. */
void
scd2_exec_require_owner(bool restricted, const char *what)
{
	if (!OidIsValid(active_owner) || GetUserId() != active_owner ||
		(restricted && !InSecurityRestrictedOperation()))
		elog(ERROR, "scd2: %s must run as the dimension's owner in a security-restricted operation",
			 what);
}

/*
 * A statement on user data, in the owner context (see the file's header).
 * snap: the snapshot to read with (InvalidSnapshot: the current one).
 * Its settings (a nest level of its own) end with it.  Returns the rows
 * processed.
 */
uint64
scd2_exec_user(const char *sql, int nargs, const Oid *argtypes, const Datum *values,
			   const char *nulls, Snapshot snap, bool read_only, int expected, const char *what)
{
	int			nest;
	uint64		n;

	scd2_exec_require_owner(true, what);
	nest = NewGUCNestLevel();
	n = spi_run(sql, nargs, argtypes, values, nulls, snap, read_only, expected, what);
	AtEOXact_GUC(false, nest);
	return n;
}

/*
 * The same, read-only, with parallel query allowed (the validation scan of
 * a large staging table).
 */
void
scd2_exec_user_parallel(const char *sql, int nargs, const Oid *argtypes, const Datum *values,
						Snapshot snap, const char *what)
{
	SPIPlanPtr	plan;
	int			rc;
	int			nest;

	scd2_exec_require_owner(true, what);
	nest = NewGUCNestLevel();
	plan = SPI_prepare_cursor(sql, nargs, (Oid *) argtypes, CURSOR_OPT_PARALLEL_OK);
	if (plan == NULL)
		elog(ERROR, "scd2: preparing %s failed: %s", what, SPI_result_code_string(SPI_result));
	rc = SPI_execute_snapshot(plan, (Datum *) values, NULL, snap, InvalidSnapshot, true, false, 0);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: %s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(plan);
	AtEOXact_GUC(false, nest);
}

/* Constant parameters $1..$n, none NULL (SPI_execute_plan_extended's form). */
static ParamListInfo
params_of(int nargs, const Oid *argtypes, const Datum *values)
{
	ParamListInfo params = makeParamList(nargs);

	for (int i = 0; i < nargs; i++)
	{
		params->params[i].value = values[i];
		params->params[i].isnull = false;
		params->params[i].pflags = PARAM_FLAG_CONST;
		params->params[i].ptype = argtypes[i];
	}
	return params;
}

/*
 * A query on user data whose rows go to dest instead of SPI's tuple table
 * (a receiver that works on them as they come: load/extract_stream.c's
 * streaming comparison, load/classify_copies.c's copies of the fast path's
 * rows), as scd2_exec_user runs a statement: in the owner
 * context, restricted, with snap (its command id advanced past the
 * statements before, as SPI_execute_snapshot does) and a nest level of its
 * own.  Serial, the receiver seeing the rows in the order of the scan; or,
 * with parallel, as the planner chooses (the receiver then runs in parallel
 * mode, in the leader, and sees the rows in the order the query asks for).
 * Returns the rows sent.
 */
uint64
scd2_exec_user_into(const char *sql, int nargs, const Oid *argtypes, const Datum *values,
					Snapshot snap, DestReceiver *dest, bool parallel, const char *what)
{
	SPIPlanPtr	plan;
	SPIExecuteOptions opts;
	int			rc;
	int			nest;

	scd2_exec_require_owner(true, what);
	nest = NewGUCNestLevel();
	/* in the scan's own order: no workers, no scan joining another midway */
	if (!parallel)
		scd2_set_local("max_parallel_workers_per_gather", "0");
	scd2_set_local("synchronize_seqscans", "off");
	plan = SPI_prepare_cursor(sql, nargs, (Oid *) argtypes, parallel ? CURSOR_OPT_PARALLEL_OK : 0);
	if (plan == NULL)
		elog(ERROR, "scd2: preparing %s failed: %s", what, SPI_result_code_string(SPI_result));
	memset(&opts, 0, sizeof(opts));
	if (nargs > 0)
		opts.params = params_of(nargs, argtypes, values);
	opts.read_only = true;		/* read with the snapshot pushed here */
	opts.dest = dest;
	CommandCounterIncrement();
	PushCopiedSnapshot(snap);
	UpdateActiveSnapshotCommandId();
	rc = SPI_execute_plan_extended(plan, &opts);
	PopActiveSnapshot();
	/* SPI says SPI_OK_UTILITY of a query whose rows went to another receiver */
	if (rc != SPI_OK_SELECT && rc != SPI_OK_UTILITY)
		elog(ERROR, "scd2: %s failed: %s", what, SPI_result_code_string(rc));
	SPI_freeplan(plan);
	AtEOXact_GUC(false, nest);
	return SPI_processed;
}

/* A utility statement on the load's work tables, as the owner. */
void
scd2_exec_work(const char *sql, int expected, const char *what)
{
	scd2_exec_require_owner(false, what);
	(void) spi_run(sql, 0, NULL, NULL, NULL, InvalidSnapshot, false, expected, what);
}

/*
 * One statement on scd2's own tables, as the extension owner with
 * search_path pinned (pg_cron's approach, instead of SECURITY DEFINER:
 * those tables need no write privilege for PUBLIC); its result code must
 * be expected (else an error naming what).  Returns SPI_processed.
 */
uint64
scd2_exec_catalog(const char *sql, int nargs, Oid *argtypes, Datum *values,
				  const char *nulls, bool read_only, int expected, const char *what)
{
	return scd2_exec_catalog_snap(sql, nargs, argtypes, values, nulls, InvalidSnapshot,
								  read_only, expected, what);
}

/*
 * The same with the snapshot snap (InvalidSnapshot: the current one), for a
 * read that must see what a REPEATABLE READ snapshot misses (revert's
 * freshness check reads the runs with the latest snapshot).
 */
uint64
scd2_exec_catalog_snap(const char *sql, int nargs, Oid *argtypes, Datum *values,
					   const char *nulls, Snapshot snap, bool read_only, int expected,
					   const char *what)
{
	Oid			save_userid;
	int			save_sec;
	int			nest = scd2_pin_search_path();
	MemoryContext cxt = CurrentMemoryContext;
	volatile uint64 n = 0;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(scd2_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	PG_TRY();
	{
		n = spi_run(sql, nargs, argtypes, values, nulls, snap, read_only, expected, what);
	}
	PG_CATCH();
	{
		/*
		 * A cancel, a timeout, a lock or serialization failure: in scd2's
		 * words, not its generated SQL (an internal error keeps it).
		 */
		SetUserIdAndSecContext(save_userid, save_sec);
		scd2_rethrow_without_sql(cxt, psprintf("scd2: %s", what));
	}
	PG_END_TRY();
	SetUserIdAndSecContext(save_userid, save_sec);
	scd2_unpin(nest);
	return n;
}

/*
 * A read of scd2's own tables and the system catalogs as the caller, with
 * search_path pinned: what the caller's own privileges let it see (the
 * runs prune_change_log may prune).  Names no user table.
 */
uint64
scd2_exec_catalog_as_caller(const char *sql, int nargs, Oid *argtypes, Datum *values,
							const char *nulls, const char *what)
{
	int			nest = scd2_pin_search_path();
	uint64		n = spi_run(sql, nargs, argtypes, values, nulls, InvalidSnapshot, true,
							SPI_OK_SELECT, what);

	scd2_unpin(nest);
	return n;
}

/*
 * An error context without the generated statement's line (the user's own
 * code -- a trigger's lines -- stays), and scd2's line after it: an error
 * of the user's code shows where in scd2 it happened, never SQL the user
 * did not write.
 */
char *
scd2_context_without_sql(const char *context, const char *line)
{
	StringInfoData buf;
	const char *p = context;

	initStringInfo(&buf);
	while (p != NULL && *p)
	{
		const char *end = strchr(p, '\n');
		int			len = end ? (int) (end - p) : (int) strlen(p);

		if (strncmp(p, "SQL statement \"", 15) != 0)
			appendStringInfo(&buf, "%.*s\n", len, p);
		p = end ? end + 1 : NULL;
	}
	appendStringInfoString(&buf, line);
	return buf.data;
}

/*
 * In PG_CATCH of a statement on user data: the error goes on with line as
 * its context instead of the generated statement.  A syntax or internal
 * error -- a bug of scd2 -- keeps the statement.
 */
void
scd2_rethrow_without_sql(MemoryContext cxt, const char *line)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INTERNAL_ERROR ||
		edata->sqlerrcode == ERRCODE_SYNTAX_ERROR)
		PG_RE_THROW();
	FlushErrorState();
	edata->context = scd2_context_without_sql(edata->context, line);
	/* nor the statement as "QUERY:" with its "LINE n:" (an error while parsing it) */
	edata->internalquery = NULL;
	edata->internalpos = 0;
	ReThrowError(edata);
}

/*
 * One statement on user data outside a load (scd2.revert, scd2.changes):
 * enter the owner context of owner, restricted, run it, leave.  An error
 * of the owner's code carries context_line instead of the statement.
 */
uint64
scd2_exec_as_owner(Oid owner, const char *sql, int nargs, const Oid *argtypes,
				   const Datum *values, bool read_only, int expected, const char *what,
				   const char *context_line)
{
	OwnerContext oc;
	MemoryContext cxt = CurrentMemoryContext;
	volatile uint64 n = 0;

	scd2_owner_enter(&oc, owner);
	scd2_owner_restrict(&oc);
	PG_TRY();
	{
		n = scd2_exec_user(sql, nargs, argtypes, values, NULL, InvalidSnapshot, read_only,
						   expected, what);
	}
	PG_CATCH();
	{
		scd2_rethrow_without_sql(cxt, context_line);
	}
	PG_END_TRY();
	scd2_owner_leave(&oc);
	return n;
}
