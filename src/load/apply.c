/*
 * apply.c -- CALL scd2.apply(staging, dimension[, effective_at]) and
 * CALL scd2.apply(staging, dimension, effective_at, run_id): one load for
 * psql, PL/pgSQL, dbt and pg_cron.
 *
 * Two procedures, one C function: the form of two or three arguments has
 * no output parameter, so that PL/pgSQL (a DO block, a procedure, a
 * function) can CALL it as written; the form of four returns the run id in
 * its INOUT run_id (a result row at top level, a variable in PL/pgSQL).
 *
 * Inside a transaction block (dbt runs post-hooks inside the model's
 * transaction) the procedure is atomic: the load and its audit row commit
 * or roll back with the caller.  Called at top level (psql, pg_cron) it is
 * non-atomic: the load runs in a subtransaction, and if it fails the error
 * is recorded in the audit log and committed before the error is raised
 * again, so a failed scheduled run leaves a trace.
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/timestamp.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"

PG_FUNCTION_INFO_V1(scd2_apply);

/* The INOUT run_id of the four-argument form, as the one-column result row. */
static Datum
run_id_result(int64 run_id)
{
	TupleDesc	desc = CreateTemplateTupleDesc(1);
	Datum		values[1] = {Int64GetDatum(run_id)};
	bool		nulls[1] = {false};

	TupleDescInitEntry(desc, 1, "run_id", INT8OID, -1, 0);
	desc = BlessTupleDesc(desc);
	return HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
}

/* The load and its success row. */
static int64
load_and_log(const Scd2LoadRequest *req, Scd2LoadResult *res, TimestampTz started_at)
{
	int64		run_id;

	scd2_run_load(req, res);
	run_id = scd2_audit_write(req->dim_oid, res->dim_name, res->stg_name, "success", req->effective_at,
							  started_at, &res->metrics, NULL, res->schema_note, res->run_id);
	return run_id;
}

/* The load of one scd2.apply, as txn.c's subtransaction body. */
typedef struct ApplyCall
{
	const Scd2LoadRequest *req;
	Scd2LoadResult *res;
	TimestampTz started_at;
	int64		run_id;
} ApplyCall;

static void
apply_body(void *arg)
{
	ApplyCall  *call = (ApplyCall *) arg;

	call->run_id = load_and_log(call->req, call->res, call->started_at);
}

/*
 * Top level: run the load in a subtransaction; on failure, commit an
 * error row, then raise the error again.
 */
static int64
load_nonatomic(const Scd2LoadRequest *req, Scd2LoadResult *res, TimestampTz started_at)
{
	char	   *dim_name = scd2_relation_display_name(req->dim_oid);
	char	   *stg_name = scd2_relation_display_name(req->stg_oid);
	ApplyCall	call = {req, res, started_at, 0};
	ErrorData  *edata;

	edata = scd2_run_in_subxact(apply_body, &call, req->dim_oid, dim_name, stg_name,
								req->effective_at, started_at);
	if (edata != NULL)
	{
		SPI_commit();
		ReThrowError(edata);
	}
	return call.run_id;
}

Datum
scd2_apply(PG_FUNCTION_ARGS)
{
	bool		nonatomic = scd2_call_is_nonatomic(fcinfo);
	Scd2LoadRequest req;
	Scd2LoadResult res;
	TimestampTz started_at = GetCurrentTimestamp();
	int64		run_id;

	scd2_request_from_args(fcinfo, &req);
	memset(&res, 0, sizeof(res));

	if (SPI_connect_ext(nonatomic ? SPI_OPT_NONATOMIC : 0) != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	if (nonatomic)
		run_id = load_nonatomic(&req, &res, started_at);
	else
		run_id = load_and_log(&req, &res, started_at);
	scd2_notice_metrics(res.dim_name, &res.metrics, false, res.schema_note);
	SPI_finish();

	if (PG_NARGS() < 4)
		PG_RETURN_VOID();		/* no output parameter */
	return run_id_result(run_id);
}
