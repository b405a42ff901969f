/*
 * apply_all.c -- CALL scd2.apply_all(effective_at): load every registered
 * dimension from its registered default staging table, for one scheduled
 * job (pg_cron).
 *
 * Called at top level (psql, pg_cron) the procedure is non-atomic and
 * commits after every dimension: each load runs in a subtransaction, a
 * failed one leaves a committed audit row with status 'error' and a
 * WARNING, and the next dimension is loaded all the same.  When every
 * dimension has been tried and any failed, the procedure raises an error
 * naming them, so the job's run is reported as failed; what did load stays
 * committed.
 *
 * Inside a transaction block (or called from a function) it cannot commit:
 * it is atomic with the caller, like scd2.apply, and the first failing
 * load raises its error, so the caller's transaction keeps all of the
 * loads or none.
 *
 * Dimensions without a registered staging table are skipped with a NOTICE;
 * a closing NOTICE counts the loaded, failed and skipped dimensions.  (No
 * INOUT result: PL/pgSQL can only CALL a procedure with output parameters
 * by passing variables for them, and a scheduled job's procedure should be
 * callable as plainly as CALL scd2.apply_all().)
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "history/history.h"
#include "load/steps.h"

PG_FUNCTION_INFO_V1(scd2_apply_all);

/* CONTEXT line of an error raised while loading one dimension. */
static void
apply_all_error_context(void *arg)
{
	const Scd2Target *t = (const Scd2Target *) arg;

	errcontext("scd2.apply_all loading %s from %s", t->dim_name, t->stg_name);
}

/* One load and its success row (both inside the caller's transaction). */
static void
load_one(const Scd2Target *t, TimestampTz effective_at)
{
	ErrorContextCallback errcb;
	Scd2LoadRequest req;
	Scd2LoadResult res;
	TimestampTz started_at = GetCurrentTimestamp();

	errcb.callback = apply_all_error_context;
	errcb.arg = (void *) t;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	memset(&req, 0, sizeof(req));
	memset(&res, 0, sizeof(res));
	req.stg_oid = t->stg_oid;
	req.dim_oid = t->dim_oid;
	req.effective_at = effective_at;
	scd2_run_load(&req, &res);
	(void) scd2_audit_write(t->dim_oid, res.dim_name, res.stg_name, "success", effective_at,
							started_at, &res.metrics, NULL, res.schema_note, res.run_id);
	scd2_notice_metrics(res.dim_name, &res.metrics, false, res.schema_note);

	error_context_stack = errcb.previous;
}

/* One dimension's load, as txn.c's subtransaction body. */
typedef struct ApplyAllCall
{
	const Scd2Target *t;
	TimestampTz effective_at;
} ApplyAllCall;

static void
apply_all_body(void *arg)
{
	ApplyAllCall *call = (ApplyAllCall *) arg;

	load_one(call->t, call->effective_at);
}

/*
 * Top level: the load in a subtransaction; a failure becomes an error row
 * and a WARNING.  Returns the error (copied into the current memory
 * context), or NULL on success.  The caller commits either way.
 */
static ErrorData *
load_one_nonatomic(const Scd2Target *t, TimestampTz effective_at)
{
	ApplyAllCall call = {t, effective_at};
	ErrorData  *edata;

	edata = scd2_run_in_subxact(apply_all_body, &call, t->dim_oid, t->dim_name, t->stg_name,
								effective_at, GetCurrentTimestamp());
	if (edata != NULL)
		ereport(WARNING,
				(errcode(edata->sqlerrcode),
				 errmsg("scd2: loading %s failed: %s", t->dim_name, edata->message),
				 edata->detail ? errdetail_internal("%s", edata->detail) : 0,
				 edata->hint ? errhint("%s", edata->hint) : 0,
				 errcontext("scd2.apply_all loading %s from %s; the error is in scd2.audit_log and the other dimensions are loaded",
							t->dim_name, t->stg_name)));
	return edata;
}

/*
 * Whether a registered dimension can be loaded: it has a staging table
 * and neither was dropped; else a NOTICE says why it is skipped.
 */
static bool
loadable(const Scd2Target *t)
{
	if (!OidIsValid(t->stg_oid))
	{
		ereport(NOTICE,
				(errmsg("scd2: %s has no registered staging table, skipped", t->dim_name),
				 errhint("Register one with scd2.register(..., staging => ...), or load it with scd2.apply.")));
		return false;
	}
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(t->dim_oid)) ||
		!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(t->stg_oid)))
	{
		ereport(NOTICE,
				(errmsg("scd2: %s or its staging table %s was dropped, skipped",
						t->dim_name, t->stg_name)));
		return false;
	}
	return true;
}

/*
 * The closing NOTICE, and when any dimension failed an error naming them,
 * so the scheduled job's run is reported as failed.
 */
static void
report_outcome(int loaded, int failed, int skipped, int ntargets, int first_errcode,
			   const char *failures)
{
	ereport(NOTICE,
			(errmsg("scd2.apply_all: %d loaded, %d failed, %d skipped of %d registered dimensions",
					loaded, failed, skipped, ntargets)));
	if (failed > 0)
		ereport(ERROR,
				(errcode(first_errcode),
				 errmsg_plural("scd2.apply_all: %d of %d dimensions failed to load",
							   "scd2.apply_all: %d of %d dimensions failed to load",
							   failed, failed, ntargets),
				 errdetail_internal("%s", failures),
				 errhint("The error rows are in scd2.audit_log; the dimensions that loaded are committed.")));
}

Datum
scd2_apply_all(PG_FUNCTION_ARGS)
{
	bool		nonatomic = scd2_call_is_nonatomic(fcinfo);
	TimestampTz effective_at;
	Scd2Target	   *targets;
	int			ntargets;
	int			loaded = 0,
				skipped = 0,
				failed = 0;
	int			first_errcode = 0;
	StringInfoData failures;
	MemoryContext cxt;
	MemoryContext loadcxt;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("effective_at must not be NULL"),
				 errhint("Leave it out to load at now(), or pass the instant the changes take effect.")));
	effective_at = PG_GETARG_TIMESTAMPTZ(0);

	if (SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");

	/*
	 * SPI's procedure context outlives the commits of a non-atomic call; the
	 * memory of each load goes in a child of it, reset after the load.
	 */
	cxt = CurrentMemoryContext;
	loadcxt = AllocSetContextCreate(cxt, "scd2 apply_all load", ALLOCSET_DEFAULT_SIZES);
	initStringInfo(&failures);
	targets = scd2_registry_targets(&ntargets);

	for (int i = 0; i < ntargets; i++)
	{
		const Scd2Target *t = &targets[i];

		CHECK_FOR_INTERRUPTS();
		if (!loadable(t))
		{
			skipped++;
			continue;
		}

		MemoryContextSwitchTo(loadcxt);
		if (nonatomic)
		{
			ErrorData  *edata = load_one_nonatomic(t, effective_at);

			MemoryContextSwitchTo(cxt);
			if (edata == NULL)
				loaded++;
			else
			{
				if (failed++ == 0)
					first_errcode = edata->sqlerrcode;
				appendStringInfo(&failures, "%s%s: %s", failures.len > 0 ? "; " : "",
								 t->dim_name, edata->message);
			}
			/* This dimension's load, or its error row, is kept. */
			SPI_commit();
		}
		else
		{
			load_one(t, effective_at);
			MemoryContextSwitchTo(cxt);
			loaded++;
		}
		MemoryContextReset(loadcxt);
	}

	report_outcome(loaded, failed, skipped, ntargets, first_errcode, failures.data);

	SPI_finish();
	PG_RETURN_VOID();
}
