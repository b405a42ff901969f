/*
 * merge.c -- scd2.merge(staging, dimension, effective_at, dry_run):
 * one load, returning the change feed (materialize mode).
 */
#include "scd2.h"

#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/timestamp.h"

#include "history/history.h"
#include "load/steps.h"

PG_FUNCTION_INFO_V1(scd2_merge);

Datum
scd2_merge(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Scd2LoadRequest req;
	Scd2LoadResult res;
	TimestampTz started_at = GetCurrentTimestamp();

	scd2_request_from_args(fcinfo, &req);
	InitMaterializedSRF(fcinfo, 0);

	memset(&res, 0, sizeof(res));
	req.dry_run = !PG_ARGISNULL(3) && PG_GETARG_BOOL(3);
	req.want_feed = true;
	res.feed = rsinfo->setResult;
	res.feed_desc = rsinfo->setDesc;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	scd2_run_load(&req, &res);
	(void) scd2_audit_write(req.dim_oid, res.dim_name, res.stg_name, req.dry_run ? "dry_run" : "success",
							req.effective_at, started_at, &res.metrics, NULL,
							res.schema_note, res.run_id);
	SPI_finish();

	return (Datum) 0;
}
