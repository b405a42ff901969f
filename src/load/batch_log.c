/*
 * batch_log.c -- a batch logged by surrogate keys: the change log of a
 * load at its cost floor.  This file is the load's half (whether a load may,
 * and its record); history/batch_read.c reads such a batch back.
 *
 * One change-log row per written version, with the before-images probed
 * from the dimension, made a 200k-row batch on 1M keys 1.3x the same load
 * without its log (bench/RESULTS.md).  Most batches need no row of their
 * own: every row they write is either a current version they close (its
 * before-image is implied: current, the run's current valid_to, the Type 1
 * values it still has) or a current version they insert, and every one of
 * them has a surrogate key.  Such a load (eligible below) logs, in one
 * scd2.change_log_batches row, three arrays: the surrogate keys of the rows
 * it wrote, what it did to each ("char": batch_action), and the valid_to it
 * left (as scd2.change_log's valid_to: NULL for current).  The surrogate
 * keys of the versions it inserts are drawn from the column's sequence
 * by the classification, into the change table, and the MERGE inserts
 * them (PostgreSQL 15 and 16 have no MERGE ... RETURNING).
 *
 * The rows read back (scd2_batch_rows_sql): business key and valid_from
 * from the dimension by surrogate key -- no load but an order-free one
 * moves a version's valid_from or deletes a version, and the readers
 * refuse a batch followed by one (scd2_batch_require_unmoved) -- and the
 * arrays' action and valid_to; the updated rows' before-images are
 * implied.  Readers: scd2.revert writes the rows into scd2.change_log
 * before it undoes the run (history/revert.c), scd2.changes (history/changes.c),
 * dimension_at(..., known_at) (history/known_at.c), the feed of a compact first
 * load (history/compact.c).
 *
 * Eligible: the change log on and installed with the table, not a dry run,
 * not Citus (citus_load.c logs after its writes), no column
 * added by the load; a plain table whose surrogate key is an identity or
 * serial column (its sequence, on which the owner has USAGE or UPDATE) and
 * that has no enabled BEFORE INSERT row trigger (which could change the
 * key); every change row from the fast path (classify.c) and none a
 * Type 1 update.  Otherwise the load logs one row per version
 * (history/changelog.c) -- an order-free one with the surrogate keys it drew for
 * its new versions (driver.c draws those of its general path's too), which
 * it would otherwise read back after its write.  A later order-free load
 * may move a version's valid_from or remove the version: before it does,
 * it pins the business key and valid_from of those rows in the batches
 * that logged them (batch_pin.c: business_keys and valid_from, NULL
 * at the other rows' places), and the readers read a pinned row from
 * there (a row a later load removed is still read).  An in-order load
 * moves nothing, and logs no more than the three arrays.
 *
 * Security (docs/SECURITY.md): the change table is read, the keys drawn
 * and the dimension read back as the dimension's owner (the load's
 * security-restricted operation, or common/exec.c's for a reader); the extension
 * owner writes only the arrays, of bigint, "char" and timestamptz.
 */
#include "scd2.h"

#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_trigger.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"
#include "citus/citus.h"

/* Whether the relation has an enabled BEFORE INSERT row trigger. */
static bool
has_before_insert_trigger(Relation rel)
{
	TriggerDesc *td = rel->trigdesc;

	for (int i = 0; td != NULL && i < td->numtriggers; i++)
	{
		Trigger    *tg = &td->triggers[i];

		if (tg->tgenabled != TRIGGER_DISABLED && TRIGGER_FOR_ROW(tg->tgtype) &&
			TRIGGER_FOR_BEFORE(tg->tgtype) && TRIGGER_FOR_INSERT(tg->tgtype))
			return true;
	}
	return false;
}

/*
 * The sequence the load draws the surrogate keys of its new versions from
 * (the file's comment: what makes a load eligible, before its change
 * table is read), or InvalidOid.  Called as the dimension's owner, before
 * the classification: the fast path's insert copies draw their keys
 * (classify.c), the MERGE the other insert copies' (write.c), in
 * the order the MERGE alone drew them before, so a load that is not
 * logged by surrogate keys gives its versions the same keys as without.
 */
Oid
scd2_batch_sequence(const LoadState *st, bool dry_run)
{
	const Scd2Config *cfg = st->cfg;
	Relation	rel;
	char	   *sk_name = NULL;
	bool		ok;
	Oid			argtypes[2] = {TEXTOID, TEXTOID};
	Datum		values[2];
	bool		isnull;
	Datum		seq;

	if (dry_run || !st->log_prepared || st->citus != SCD2_CITUS_NONE || cfg->sk == NULL ||
		cfg->filled != NIL || !scd2_changelog_batch_installed())
		return InvalidOid;
	rel = table_open(cfg->dim_oid, AccessShareLock);
	ok = rel->rd_rel->relkind == RELKIND_RELATION && !has_before_insert_trigger(rel);
	for (int a = 0; ok && a < RelationGetDescr(rel)->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), a);

		if (!att->attisdropped && strcmp(quote_identifier(NameStr(att->attname)), cfg->sk) == 0)
		{
			sk_name = pstrdup(NameStr(att->attname));
			ok = !att->attgenerated &&
				(att->atttypid == INT2OID || att->atttypid == INT4OID || att->atttypid == INT8OID);
		}
	}
	table_close(rel, AccessShareLock);
	if (!ok || sk_name == NULL)
		return InvalidOid;

	/* an identity or serial column's sequence: a catalog lookup, no user code */
	values[0] = CStringGetTextDatum(cfg->dim_sql);
	values[1] = CStringGetTextDatum(sk_name);
	scd2_exec_catalog("SELECT CAST(CAST(pg_catalog.pg_get_serial_sequence($1, $2) AS pg_catalog.regclass) AS pg_catalog.oid)",
					  2, argtypes, values, NULL, true, SPI_OK_SELECT, "finding the surrogate key's sequence");
	seq = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull ||
		pg_class_aclcheck(DatumGetObjectId(seq), GetUserId(), ACL_USAGE | ACL_UPDATE) != ACLCHECK_OK)
		return InvalidOid;
	return DatumGetObjectId(seq);
}

/*
 * Step 5 of a load, before its MERGE: log the batch by surrogate keys when
 * it is eligible (the file's comment; st->sk_seq: the fast path drew the
 * new versions' keys) -- the arrays computed as the owner, in the pass
 * that checks the change table, and written by the extension owner.
 * Returns false, having written nothing, when the load must log row by
 * row.
 */
bool
scd2_load_record_batch_log(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	Datum		arrays[5] = {0};
	bool		isnull;

	/* completed inferred versions are logged row by row (complete.c) */
	if (!OidIsValid(st->sk_seq) || st->completed > 0)
		return false;
	scd2_load_exec(st, psprintf(X("SELECT pg_catalog.count(*) FILTER (WHERE `_origin <> " WT_ORIGIN_FAST
								  "   OR `_action NOT IN (" WT_ACT_INSERT ", " WT_ACT_NEW_VERSION ", " WT_ACT_CLOSE ", " WT_ACT_DELETE ")"
								  "   OR `_sk IS NULL), pg_catalog.count(*),"
								  " pg_catalog.array_agg(`_sk), pg_catalog.array_agg(%s), pg_catalog.array_agg(%s) FROM %s c"),
								scd2_batch_action_case_sql(X("`_action"), true),
								scd2_changelog_encode_sql(cfg->vf.typid, X("`_vt")), CHG_TABLE),
				   SPI_OK_SELECT, "recording the change log");
	if (scd2_spi_int8(0, 1) != 0 || scd2_spi_int8(0, 2) == 0)
		return false;
	for (int i = 0; i < 3; i++)
		arrays[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 3, &isnull),
							  false, -1);
	st->run_id = scd2_changelog_write_batch(cfg, arrays);
	return true;
}
