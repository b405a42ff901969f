/*
 * txn.c -- transaction plumbing shared by scd2.apply and scd2.apply_all:
 * whether a CALL is non-atomic (may commit), and running one load in a
 * subtransaction that leaves an error row in scd2.audit_log when it fails.
 */
#include "scd2.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "history/history.h"
#include "load/steps.h"

/*
 * A procedure called at top level (psql, pg_cron) runs non-atomic: it may
 * commit.  Inside a transaction block, or called from a function, it is
 * atomic with its caller.
 */
bool
scd2_call_is_nonatomic(FunctionCallInfo fcinfo)
{
	return fcinfo->context && IsA(fcinfo->context, CallContext) &&
		!castNode(CallContext, fcinfo->context)->atomic;
}

/*
 * Runs body(arg) in a subtransaction.  Returns NULL when it succeeded (the
 * subtransaction is released into the caller's transaction).  When it
 * failed, the subtransaction is rolled back, an audit row with status
 * 'error' and the error's message is written for dim_oid (dim_name) and stg_name in
 * the caller's transaction, and the error, copied into the memory context
 * current at the call, is returned: the caller commits, then raises it
 * again or reports it and goes on.
 */
ErrorData *
scd2_run_in_subxact(void (*body) (void *arg), void *arg, Oid dim_oid,
					const char *dim_name, const char *stg_name,
					TimestampTz effective_at, TimestampTz started_at)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	ErrorData  *volatile edata = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		body(arg);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		Scd2Metrics none;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = oldowner;

		memset(&none, 0, sizeof(none));
		(void) scd2_audit_write(dim_oid, dim_name, stg_name, "error", effective_at, started_at,
								&none, edata->message, NULL, 0);
	}
	PG_END_TRY();
	return edata;
}
