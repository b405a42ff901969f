/*
 * compact.c -- the change feed of a first load logged compactly
 * (changelog.c: its header's first_load_rows; scd2.change_log holds none
 * of its rows), for scd2.changes (changes.c), as long as the run
 * stands (a revert writes its rows into scd2.change_log: revert.c).
 *
 * The run inserted every row the dimension had right after it, each as a
 * current version.  A later load of the dimension adds versions and
 * updates valid_to, is_current and Type 1 columns; only an order-free load
 * also moves a version's valid_from ('extend') or deletes a version
 * ('remove'), and logs the whole row as it was (old_row).  So the run's
 * rows are the rows of the dimension now and the rows later loads removed,
 * each traced back through the later extends to where it stood right
 * after the run, less the versions the later successful loads inserted
 * (their change log names them by business key and valid_from); the feed
 * shows each as the run left it: its key, valid_from and surrogate key,
 * valid_to the current one of the run's registration.
 *
 * Refused, naming the later run, when one cannot be read that way: loaded
 * with scd2.change_log = off or its change log pruned (the rows it
 * inserted are not known), or a later first load (the dimension was
 * emptied outside scd2 in between).  Refused too when the rows found are
 * not as many as the run inserted (rows added or deleted outside scd2
 * since).
 *
 * The change log is read as the extension owner; the dimension, as its
 * owner in a security-restricted operation (common/exec.c), the later runs'
 * rows passed in as arrays of jsonb and timestamptz.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "history/runs.h"

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
		"SELECT r.run_id, r.logged, r.pruned_at IS NOT NULL, " SCD2_RUN_COMPACT_SQL("r")
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
		ids[n++] = Int64GetDatum(id);
	}
	return PointerGetDatum(construct_array(ids, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
										   TYPALIGN_DOUBLE));
}

/*
 * The feed's query when later order-free loads moved or removed versions
 * ($4..$8: their 'extend' and 'remove' rows: run, action, key, valid_from
 * as logged, the whole row before the load).  Every version found at the
 * end -- a row of the dimension now, or a row a later load removed, just
 * before that load -- is traced back to where it stood right after the
 * run: the latest extend before that moved it to where it was found
 * (ext's new valid_from), then that extend's predecessor, and so on
 * (pred, precomputed by hash joins; chain follows it).  A version is the
 * run's unless a later load inserted it there before it was found or
 * moved ($1..$3: run, key, valid_from of the later loads' inserts).  The
 * surrogate key is the row's, or the removed row's.
 */
static char *
moved_feed_sql(const char *dim_name, const Scd2LoggedColumn *keys, int nkeys,
			   const Scd2LoggedColumn *book, const Scd2LoggedColumn *sk, int nsk, const char *marker)
{
	Oid			vf = book[0].typid;
	char	   *old_vf = scd2_changelog_encode_sql(vf, psprintf("CAST(m.r OPERATOR(pg_catalog.->>) %s AS %s)",
															 quote_literal_cstr(book[0].name), book[0].type_sql));

	return psprintf("WITH RECURSIVE"
					" ins AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3)) AS i(run, k, e)),"
					" mv AS MATERIALIZED (SELECT m.run, m.action, m.k, m.e, %s AS e_old, %s AS sk FROM ROWS FROM"
					"   (pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8))"
					"   AS m(run, action, k, e, r)),"
					" ext AS MATERIALIZED (SELECT pg_catalog.row_number() OVER () AS id, m.run, m.k, m.e AS e_new, m.e_old"
					"   FROM mv m WHERE m.action OPERATOR(pg_catalog.=) " WT_ACT_EXTEND "),"
					" pred AS MATERIALIZED (SELECT DISTINCT ON (x.id) x.id, y.id AS prev FROM ext x JOIN ext y"
					"   ON y.k OPERATOR(pg_catalog.=) x.k AND y.e_new OPERATOR(pg_catalog.=) x.e_old AND y.run OPERATOR(pg_catalog.<) x.run"
					"   ORDER BY x.id, y.run DESC),"
					" ends AS MATERIALIZED (SELECT %s AS k, %s AS e, CAST('9223372036854775807' AS pg_catalog.int8) AS t, %s AS sk FROM %s t"
					"   UNION ALL SELECT m.k, m.e, m.run, m.sk FROM mv m WHERE m.action OPERATOR(pg_catalog.=) " WT_ACT_REMOVE "),"
					" first AS (SELECT DISTINCT ON (n.k, n.e, n.t) n.k, n.e, n.t, x.id FROM ends n JOIN ext x"
					"   ON x.k OPERATOR(pg_catalog.=) n.k AND x.e_new OPERATOR(pg_catalog.=) n.e AND x.run OPERATOR(pg_catalog.<) n.t"
					"   ORDER BY n.k, n.e, n.t, x.run DESC),"
					" chain (k, e, t, id) AS (SELECT * FROM first"
					"   UNION ALL SELECT c.k, c.e, c.t, p.prev FROM chain c JOIN pred p ON p.id OPERATOR(pg_catalog.=) c.id),"
					" origin AS (SELECT c.k, c.e, c.t, x.e_old, x.run FROM chain c JOIN ext x ON x.id OPERATOR(pg_catalog.=) c.id"
					"   WHERE NOT EXISTS (SELECT FROM pred p WHERE p.id OPERATOR(pg_catalog.=) c.id)),"
					" at_run AS (SELECT n.k, n.sk, COALESCE(o.e_old, n.e) AS e, COALESCE(o.run, n.t) AS t FROM ends n LEFT JOIN origin o"
					"   ON o.k OPERATOR(pg_catalog.=) n.k AND o.e OPERATOR(pg_catalog.=) n.e AND o.t OPERATOR(pg_catalog.=) n.t)"
					" SELECT " WT_ACT_INSERT ", a.sk, a.k, CAST(%s AS pg_catalog.timestamptz), %s FROM at_run a"
					" WHERE NOT EXISTS (SELECT FROM ins i WHERE i.k OPERATOR(pg_catalog.=) a.k AND i.e OPERATOR(pg_catalog.=) a.e"
					"                    AND i.run OPERATOR(pg_catalog.<) a.t)"
					" ORDER BY a.k, a.e",
					old_vf,
					nsk > 0 ? psprintf("CAST(m.r OPERATOR(pg_catalog.->>) %s AS pg_catalog.int8)", quote_literal_cstr(sk[0].name)) : "NULL::pg_catalog.int8",
					scd2_changelog_key_json_sql(keys, nkeys, "t"),
					scd2_changelog_encode_sql(vf, psprintf("t.%s", book[0].ident)),
					nsk > 0 ? psprintf("CAST(t.%s AS pg_catalog.int8)", sk[0].ident) : "NULL::pg_catalog.int8",
					dim_name, scd2_changelog_decode_sql(vf, "a.e"), marker);
}

/*
 * The feed's query when no later load moved or removed a version: the
 * dimension's rows less the later loads' inserts ($2, $3).
 */
static char *
plain_feed_sql(const char *dim_name, const Scd2LoggedColumn *keys, int nkeys,
			   const Scd2LoggedColumn *book, const Scd2LoggedColumn *sk, int nsk, const char *marker)
{
	return psprintf("SELECT " WT_ACT_INSERT ", x.sk, x.k, x.vf, %s FROM"
					" (SELECT %s AS sk, %s AS k, CAST(t.%s AS pg_catalog.timestamptz) AS vf, %s AS e FROM %s t) x"
					" WHERE NOT EXISTS (SELECT FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3)) AS l(k, vf)"
					"                    WHERE l.k OPERATOR(pg_catalog.=) x.k AND l.vf OPERATOR(pg_catalog.=) x.e)"
					" ORDER BY x.k, x.e",
					marker,
					nsk > 0 ? psprintf("CAST(t.%s AS pg_catalog.int8)", sk[0].ident) : "NULL::pg_catalog.int8",
					scd2_changelog_key_json_sql(keys, nkeys, "t"), book[0].ident,
					scd2_changelog_encode_sql(book[0].typid, psprintf("t.%s", book[0].ident)), dim_name);
}

/*
 * The change feed of a first load logged compactly (the file's comment),
 * in the order scd2.changes gives a logged run's (business key as jsonb,
 * then valid_from), left in SPI's result: action, surrogate key, business
 * key, valid_from, valid_to.
 */
void
scd2_compact_first_load_feed(const Run *run, const char *dim_name, const Scd2LoggedColumn *keys,
							 int nkeys, const Scd2LoggedColumn *book, const Scd2LoggedColumn *sk, int nsk)
{
	Oid			argtypes[8] = {INT8ARRAYOID, JSONBARRAYOID, TIMESTAMPTZARRAYOID,
	INT8ARRAYOID, TEXTARRAYOID, JSONBARRAYOID, TIMESTAMPTZARRAYOID, JSONBARRAYOID};
	Datum		values[8];
	Datum		later = later_loads(run, dim_name);
	Oid			ltypes[4] = {INT8ARRAYOID, INT8ARRAYOID, JSONBARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		lvalues[1 + SCD2_BATCH_UNDO_COLS];
	bool		isnull;
	int64		nmoved;
	char	   *marker;
	char	   *sql;
	int			nest;

	/*
	 * What the later loads inserted, and the versions they moved or removed
	 * (old_row: 0.4 on), as the extension owner.
	 */
	lvalues[0] = later;
	/* the rows the later loads logged by surrogate keys inserted (load/batch_log.c) */
	scd2_batch_collect(later, dim_name, true, &lvalues[1]);
	scd2_exec_catalog("SELECT COALESCE(pg_catalog.array_agg(c.run_id) FILTER (WHERE c.inserted), '{}') OPERATOR(pg_catalog.||) $2,"
					  "       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.inserted), '{}') OPERATOR(pg_catalog.||) $3,"
					  "       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.inserted), '{}') OPERATOR(pg_catalog.||) $4,"
					  "       COALESCE(pg_catalog.array_agg(c.run_id) FILTER (WHERE c.m), '{}'),"
					  "       COALESCE(pg_catalog.array_agg(c.action) FILTER (WHERE c.m), '{}'),"
					  "       COALESCE(pg_catalog.array_agg(c.business_key) FILTER (WHERE c.m), '{}'),"
					  "       COALESCE(pg_catalog.array_agg(c.valid_from) FILTER (WHERE c.m), '{}'),"
					  "       COALESCE(pg_catalog.array_agg(pg_catalog.to_jsonb(c) OPERATOR(pg_catalog.->) 'old_row') FILTER (WHERE c.m), '{}'),"
					  "       pg_catalog.count(*) FILTER (WHERE c.m)"
					  "  FROM (SELECT c0.*, c0.action OPERATOR(pg_catalog.=) ANY ('{extend,remove}'::pg_catalog.text[]) AS m"
					  "          FROM scd2.change_log c0 WHERE c0.run_id OPERATOR(pg_catalog.=) ANY ($1)) c",
					  4, ltypes, lvalues, NULL, true, SPI_OK_SELECT, "reading the later runs' change log");
	for (int i = 0; i < 8; i++)
		values[i] = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull),
							  false, -1);
	nmoved = scd2_spi_int8(0, 9);

	if (strcmp(run->current_valid_to, "null") == 0)
		marker = "NULL::pg_catalog.timestamptz";
	else
		marker = psprintf("CAST(CAST(%s AS %s) AS pg_catalog.timestamptz)", quote_literal_cstr(run->current_valid_to),
						  format_type_be_qualified(book[0].typid));
	sql = nmoved > 0 ? moved_feed_sql(dim_name, keys, nkeys, book, sk, nsk, marker) :
		plain_feed_sql(dim_name, keys, nkeys, book, sk, nsk, marker);

	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	/* hashed joins: never the later rows scanned once per row */
	scd2_set_local("enable_nestloop", "off");
	(void) scd2_exec_as_owner(scd2_relation_owner(run->dim_oid), sql, 8, argtypes, values, true,
							  SPI_OK_SELECT, "reading the change feed",
							  psprintf("scd2: reading the change feed of run %lld of dimension %s",
									   (long long) run->run_id, dim_name));
	AtEOXact_GUC(true, nest);
	if ((int64) SPI_processed != run->first_load_rows)
		refuse(run, dim_name,
			   psprintf("It inserted %lld rows; the dimension holds %lld rows that no later load inserted: rows were added or deleted outside scd2 since.",
						(long long) run->first_load_rows, (long long) SPI_processed));
}
