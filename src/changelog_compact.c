/*
 * changelog_compact.c -- the change feed of a first load logged compactly
 * (changelog.c: its header's first_load_rows; scd2.change_log holds none
 * of its rows), for scd2.changes (fn_changes.c), as long as the run
 * stands (a revert writes its rows into scd2.change_log: fn_revert.c).
 *
 * The run inserted every row the dimension had right after it, each as a
 * current version.  A later load of the dimension (not order-free) adds
 * versions and updates valid_to, is_current and Type 1 columns; it never
 * deletes a version nor moves its valid_from.  So the run's rows are the
 * rows of the dimension now less the rows the later successful loads
 * inserted (their change log names them by business key and valid_from),
 * and the feed shows each as the run left it: its key, valid_from and
 * surrogate key, valid_to the current one of the run's registration.
 *
 * Refused, naming the later run, when one cannot be read that way: loaded
 * with scd2.change_log = off or its change log pruned (the rows it
 * inserted are not known), an order-free load that extended or removed
 * versions (it moved valid_from or deleted versions), or a later first
 * load (the dimension was emptied outside scd2 in between).  Refused too
 * when the rows found are not as many as the run inserted (rows added or
 * deleted outside scd2 since).
 *
 * The change log is read as the extension owner; the dimension, as its
 * owner in a security-restricted operation (exec.c), the later runs'
 * rows passed in as arrays of jsonb and timestamptz.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"

#include "revert.h"
#include "worktable.h"			/* WT_ACT_INSERT */

/* Why the feed of the run cannot be read from the dimension. */
static void
refuse(const Run *run, const char *dim_name, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("the change feed of run %lld cannot be read from dimension %s",
					(long long) run->run_id, dim_name),
			 errdetail("Run %lld, a first load into the empty dimension, logged no row of its own: its rows are read from the dimension, less what later loads inserted. %s",
					   (long long) run->run_id, detail)));
}

/* Column col (a boolean) of SPI's row. */
static bool
flag(uint64 row, int col)
{
	bool		isnull;

	return DatumGetBool(SPI_getbinval(SPI_tuptable->vals[row], SPI_tuptable->tupdesc, col, &isnull));
}

/*
 * The later successful loads of the dimension, each one checked (see the
 * file's comment); returns their ids (int8[]).
 */
static Datum
later_loads(const Run *run, const char *dim_name)
{
	Oid			argtypes[2] = {INT8OID, OIDOID};
	Datum		values[2] = {Int64GetDatum(run->run_id), ObjectIdGetDatum(run->dim_oid)};
	Datum	   *ids;
	int			n = 0;

	scd2_exec_catalog(
		"SELECT r.run_id, r.logged, r.pruned_at IS NOT NULL, " SCD2_RUN_COMPACT_SQL("r") ", "
		SCD2_RUN_MOVED_SQL("r.run_id")
		"  FROM scd2.change_log_runs r JOIN scd2.audit_log a ON a.run_id OPERATOR(pg_catalog.=) r.run_id"
		" WHERE r.dimension OPERATOR(pg_catalog.=) $2::pg_catalog.regclass"
		"   AND r.run_id OPERATOR(pg_catalog.>) $1 AND a.status OPERATOR(pg_catalog.=) 'success'"
		" ORDER BY r.run_id",
		2, argtypes, values, NULL, true, SPI_OK_SELECT, "reading the later runs");
	ids = palloc(sizeof(Datum) * Max(SPI_processed, 1));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		int64		id = scd2_spi_int8(i, 1);

		if (!flag(i, 2))
			refuse(run, dim_name, psprintf("Run %lld, loaded later with scd2.change_log = off, logged none of the rows it inserted.", (long long) id));
		if (flag(i, 3))
			refuse(run, dim_name, psprintf("The change log of run %lld, loaded later, was pruned.", (long long) id));
		if (flag(i, 4))
			refuse(run, dim_name, psprintf("Run %lld, loaded later, was a first load too: the dimension was emptied outside scd2 in between.", (long long) id));
		if (flag(i, 5))
			refuse(run, dim_name, psprintf("Run %lld, loaded later, extended or removed versions (an order-free load).", (long long) id));
		ids[n++] = Int64GetDatum(id);
	}
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/*
 * The change feed of a first load logged compactly (the file's comment),
 * in the order scd2.changes gives a logged run's (business key as jsonb,
 * then valid_from), left in SPI's result: action, surrogate key, business
 * key, valid_from, valid_to.  current_vt: the run's current_valid_to.
 */
void
scd2_compact_first_load_feed(const Run *run, const char *dim_name, const Scd2LoggedColumn *keys,
							 int nkeys, const Scd2LoggedColumn *book, const Scd2LoggedColumn *sk, int nsk)
{
	Oid			argtypes[2] = {JSONBARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		values[2];
	Datum		later = later_loads(run, dim_name);
	Oid			ltypes[1] = {INT8ARRAYOID};
	bool		isnull;
	char	   *marker;
	char	   *sql;
	int			nest;

	/* the versions the later loads inserted, as the extension owner */
	scd2_exec_catalog("SELECT COALESCE(pg_catalog.array_agg(c.business_key), '{}'),"
					  "       COALESCE(pg_catalog.array_agg(c.valid_from), '{}')"
					  "  FROM scd2.change_log c WHERE c.run_id OPERATOR(pg_catalog.=) ANY ($1) AND c.inserted",
					  1, ltypes, &later, NULL, true, SPI_OK_SELECT, "reading the later runs' change log");
	for (int i = 0; i < 2; i++)
		values[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull),
							  false, -1);

	if (strcmp(run->current_valid_to, "null") == 0)
		marker = "NULL::pg_catalog.timestamptz";
	else
		marker = psprintf("CAST(CAST(%s AS %s) AS pg_catalog.timestamptz)", quote_literal_cstr(run->current_valid_to),
						  format_type_be_qualified(book[0].typid));
	sql = psprintf("SELECT " WT_ACT_INSERT ", x.sk, x.k, x.vf, %s FROM"
				   " (SELECT %s AS sk, %s AS k, CAST(t.%s AS pg_catalog.timestamptz) AS vf, %s AS e FROM %s t) x"
				   " WHERE NOT EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS l(k, vf)"
				   "                    WHERE l.k OPERATOR(pg_catalog.=) x.k AND l.vf OPERATOR(pg_catalog.=) x.e)"
				   " ORDER BY x.k, x.e",
				   marker,
				   nsk > 0 ? psprintf("CAST(t.%s AS pg_catalog.int8)", sk[0].ident) : "NULL::pg_catalog.int8",
				   scd2_changelog_key_json_sql(keys, nkeys, "t"), book[0].ident,
				   scd2_changelog_encode_sql(book[0].typid, psprintf("t.%s", book[0].ident)), dim_name);

	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	/* a hashed anti-join: never the later rows scanned once per row */
	scd2_set_local("enable_nestloop", "off");
	(void) scd2_exec_as_owner(scd2_relation_owner(run->dim_oid), sql, 2, argtypes, values, true,
							  SPI_OK_SELECT, "reading the change feed",
							  psprintf("scd2: reading the change feed of run %lld of dimension %s",
									   (long long) run->run_id, dim_name));
	AtEOXact_GUC(true, nest);
	if ((int64) SPI_processed != run->first_load_rows)
		refuse(run, dim_name,
			   psprintf("It inserted %lld rows; the dimension holds %lld rows that no later load inserted: rows were added or deleted outside scd2 since.",
						(long long) run->first_load_rows, (long long) SPI_processed));
}
