/*
 * facts.c -- scd2.rekey_facts(fact, full): the facts of a
 * registered fact table (catalog/fact_tables.c) re-pointed at the version
 * valid at their time, after runs moved the dimension's history.
 *
 * The change log says which versions' validity changed: every version a
 * run updated (closed, shortened, extended, removed: scd2.change_log rows
 * with a surrogate key; a batch's closed versions, scd2.change_log_batches)
 * and every version a revert deleted (its change-log rows, whose surrogate
 * keys revert kept).  A fact can only have become wrong if its surrogate
 * key is one of those: the facts with them are found through the index on
 * the fact's surrogate key column (register_fact makes one), never by a
 * scan of the fact table, and set to the version of the same business key
 * valid at their time (scd2.asof's rule; NULL where none is).  The runs
 * are those of the dimension, or reverts of them, newer than the last one
 * the fact table has seen (scd2.fact_tables.last_run_id).  A run whose
 * change log was pruned, or that was loaded with scd2.change_log = off,
 * cannot say which versions moved: refused, unless full => true, which
 * compares every fact (a scan) as scd2.check_facts does.
 *
 * A maintained fact table (register_fact's maintain) is re-keyed the same
 * way by every run of its dimension, in the run's transaction, after its
 * write: scd2_facts_require_maintainable checks, before the run writes
 * anything, what the re-keying will need; scd2_facts_maintain re-keys
 * (rekey below, the code scd2.rekey_facts runs too) and advances each
 * fact table's last run, so rekey_facts does not do it again.  The load
 * (load/driver.c) calls both, and so do scd2.revert (revert.c) and
 * scd2.rewind (rewind.c).
 *
 * Who runs as whom: the checks as the caller (SELECT and UPDATE on the
 * fact table, SELECT on the dimension, row security), the change log read
 * as the extension owner (scd2's own tables), the UPDATE as the fact
 * table's owner in a security-restricted operation (common/exec.c), so
 * the fact owner's triggers run with the fact owner's rights.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"

PG_FUNCTION_INFO_V1(scd2_rekey_facts);

static void
require_privilege(Oid rel, Oid role, AclMode mode, const char *what, const char *detail)
{
	if (pg_class_aclcheck(rel, role, mode) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for %s %s", what, scd2_relation_display_name(rel)),
				 errdetail("%s", detail)));
}

/* The runs since the last one seen: their ids, and the newest run or revert. */
typedef struct RekeyRuns
{
	Datum		run_ids;		/* int8[]; (Datum) 0: none */
	Datum		reverted;		/* int8[]: those of them reverted since */
	int64		newest;
	int64		unreadable;		/* the first run whose log is pruned or was not kept; 0: none */
	bool		pruned;			/* ... pruned (else not kept) */
} RekeyRuns;

/*
 * (Read-write, as the reads below: a new snapshot that sees what the run
 * calling scd2_facts_maintain has just written in this transaction.)
 */
static void
read_runs(const Scd2FactRegistration *f, RekeyRuns *r)
{
	Oid			argtypes[2] = {REGCLASSOID, INT8OID};
	Datum		values[2] = {ObjectIdGetDatum(f->dim), Int64GetDatum(f->last_run)};
	bool		isnull;
	Datum		d;

	scd2_exec_catalog("SELECT pg_catalog.array_agg(r.run_id),"
					  " pg_catalog.max(GREATEST(r.run_id, r.reverted_by)),"
					  " pg_catalog.min(r.run_id) FILTER (WHERE NOT r.logged OR r.pruned_at IS NOT NULL),"
					  " (pg_catalog.array_agg(r.pruned_at IS NOT NULL ORDER BY r.run_id)"
					  "   FILTER (WHERE NOT r.logged OR r.pruned_at IS NOT NULL))[1],"
					  " COALESCE(pg_catalog.array_agg(r.run_id) FILTER (WHERE r.reverted_by IS NOT NULL),"
					  "  CAST('{}' AS pg_catalog.int8[]))"
					  " FROM scd2.change_log_runs r WHERE r.dimension OPERATOR(pg_catalog.=) $1"
					  "  AND GREATEST(r.run_id, r.reverted_by) OPERATOR(pg_catalog.>) $2",
					  2, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the runs since the last re-keying");
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	r->run_ids = isnull ? (Datum) 0 : datumCopy(d, false, -1);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull);
	r->newest = isnull ? f->last_run : DatumGetInt64(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull);
	r->unreadable = isnull ? 0 : DatumGetInt64(d);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull);
	r->pruned = !isnull && DatumGetBool(d);
	r->reverted = datumCopy(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull), false, -1);
}

/*
 * The surrogate keys whose versions the runs moved, each once, in order
 * (so that their facts' index is probed in its order), in the MOVED_*
 * arrays below, or false: none.  The
 * versions a run inserted count only once it is reverted (they are
 * deleted then); until then no fact keyed before the run names them.  A
 * version a run closed, deleted or shortened kept its start: only its
 * facts from its new end on can be wrong, and the change log has that end
 * (the earliest, when several runs moved it: a later run that extended it
 * again only widens what is compared); one it extended or gave new Type 1
 * values keeps every fact it had: none can.  Anything else (a removed
 * version, every version of a reverted run) is probed on both sides of its
 * range as the dimension has it now, with its business key from the change
 * log in case it is gone.  A version probed on one side is still in the
 * dimension: had a later run removed it, or a revert deleted it, that
 * run's row, probed on both sides, would stand for it.  Read as the
 * extension owner: scd2's own tables only.
 */
#define MOVED_ONE_SK	0		/* int8[]: probed on one side */
#define MOVED_ONE_END	1		/* timestamptz[]: its new end, encoded */
#define MOVED_BOTH_SK	2		/* int8[]: probed on both sides of its range */
#define MOVED_BOTH_BK	3		/* jsonb[]: its business key */
#define MOVED_N			4

/* the arrays' types, by MOVED_* */
static const Oid moved_types[MOVED_N] = {INT8ARRAYOID, TIMESTAMPTZARRAYOID, INT8ARRAYOID, JSONBARRAYOID};

static bool
moved_keys(const RekeyRuns *runs, Datum *moved)
{
	Oid			argtypes[2] = {INT8ARRAYOID, INT8ARRAYOID};
	Datum		values[2] = {runs->run_ids, runs->reverted};
	bool		isnull;
	bool		any = false;
	int			nest = NewGUCNestLevel();

	/* one sort groups and orders them (a hash spilled, then sorted again) */
	scd2_set_local("enable_hashagg", "off");
	scd2_exec_catalog(psprintf("SELECT pg_catalog.array_agg(g.sk) FILTER (WHERE NOT g.b), pg_catalog.array_agg(g.e) FILTER (WHERE NOT g.b),"
							   "  pg_catalog.array_agg(g.sk) FILTER (WHERE g.b), pg_catalog.array_agg(g.bk) FILTER (WHERE g.b) FROM ("
							   " SELECT x.sk, pg_catalog.bool_or(x.b) AS b,"
							   "  (pg_catalog.array_agg(x.bk) FILTER (WHERE x.b))[1] AS bk, pg_catalog.min(x.e) AS e FROM ("
							   " SELECT y.sk, CASE WHEN y.b OR y.e IS NULL THEN y.bk END AS bk, y.b OR y.e IS NULL AS b, y.e FROM ("
							   "  SELECT c.surrogate_key AS sk, c.business_key AS bk, c.valid_to AS e,"
							   "   c.run_id OPERATOR(pg_catalog.=) ANY ($2) OR c.action NOT IN (" WT_ACT_CLOSE ", " WT_ACT_DELETE ", " WT_ACT_SHORTEN ") AS b"
							   "    FROM scd2.change_log c"
							   "   WHERE c.run_id OPERATOR(pg_catalog.=) ANY ($1) AND c.surrogate_key IS NOT NULL"
							   "     AND (NOT c.inserted OR c.run_id OPERATOR(pg_catalog.=) ANY ($2))"
							   "     AND (c.run_id OPERATOR(pg_catalog.=) ANY ($2) OR c.action NOT IN (" WT_ACT_EXTEND ", " WT_ACT_TYPE1 "))) y"
							   "%s) x GROUP BY x.sk ORDER BY x.sk) g",
							   scd2_installed("change_log_batches", NULL) ?
							   " UNION ALL SELECT u.sk, NULL, u.e IS NULL, u.e FROM scd2.change_log_batches b,"
							   "  ROWS FROM (pg_catalog.unnest(b.surrogate_keys), pg_catalog.unnest(b.actions), pg_catalog.unnest(b.valid_to)) AS u(sk, act, e)"
							   "  WHERE b.run_id OPERATOR(pg_catalog.=) ANY ($1)"
							   "    AND u.act OPERATOR(pg_catalog.=) ANY (ARRAY['c', 'd']::pg_catalog.\"char\"[])" : ""),
					  2, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the versions the runs moved");
	AtEOXact_GUC(true, nest);
	for (int i = 0; i < MOVED_N; i++)
	{
		moved[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull);
		if (isnull)
			moved[i] = PointerGetDatum(construct_empty_array(get_element_type(moved_types[i])));
		else
		{
			moved[i] = datumCopy(moved[i], false, -1);
			any = true;
		}
	}
	return any;
}

/* The business key columns of alias a, as a select list (a NULL: k1, k2, ...). */
static char *
key_list(const Scd2FactRegistration *f, const char *a)
{
	StringInfoData buf;
	ListCell   *lc;
	int			i = 0;

	initStringInfo(&buf);
	foreach(lc, f->dim_reg->business_key)
	{
		i++;
		if (a == NULL)
			appendStringInfo(&buf, ", k%d", i);
		else
			appendStringInfo(&buf, ", %s.%s", a, quote_identifier((const char *) lfirst(lc)));
	}
	return buf.data;
}

/*
 * The surrogate key of the version of kalias's business key valid at fact
 * f's time (positional: kalias's key columns are k1, k2, ...).
 */
static char *
expected_sql(const Scd2FactRegistration *f, const char *kalias, bool positional)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "(SELECT e.%s FROM %s e WHERE ", quote_identifier(f->dim_reg->surrogate_key),
					 scd2_relation_display_name(f->dim));
	scd2_fact_append_key_eq(&buf, f, "e", kalias, positional);
	appendStringInfoString(&buf, " AND ");
	scd2_fact_append_valid_at(&buf, f, "e", "f");
	appendStringInfoString(&buf, ")");
	return buf.data;
}

/*
 * The key columns of the moved versions: from the dimension's row (alias
 * v) when it is still there, else from the change log's business key
 * (alias j).
 */
static char *
key_list_either(const Scd2FactRegistration *f)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, f->dim_reg->business_key)
	{
		const char *k = quote_identifier((const char *) lfirst(lc));

		appendStringInfo(&buf, ", CASE WHEN v.%s IS NULL THEN j.%s ELSE v.%s END",
						 quote_identifier(f->dim_reg->surrogate_key), k, k);
	}
	return buf.data;
}

/*
 * The conditions that put a fact f of moved version m.s outside m's range
 * [m.lo, m.hi) now, on the sides m.b says (true: both; false: only from
 * m.hi on): a fact still inside its version's range is still right.  When
 * the fact's time has the validity's type, the two sides of the range are
 * each a range condition on the fact's (surrogate key, time) index that
 * register_fact makes -- one probe per side (s.after), which a load that
 * closes versions after all their facts finds empty -- else a filter.
 */
static char *
sides_sql(const Scd2FactRegistration *f, Oid vtypid)
{
	const char *fsk = quote_identifier(f->sk);
	Oid			ftypid = get_atttype(f->fact, get_attnum(f->fact, f->time));
	char	   *vtype = format_type_be_qualified(vtypid);

	if (ftypid == vtypid)
	{
		/* t < lo as t <= the instant before lo, so that both sides are ranges */
		const char *before = vtypid == DATEOID ? "m.lo OPERATOR(pg_catalog.-) 1" :
			"m.lo OPERATOR(pg_catalog.-) CAST('1 microsecond' AS pg_catalog.interval)";
		const char *t = psprintf("f.%s", quote_identifier(f->time));

		return psprintf(" CROSS JOIN (VALUES (false), (true)) AS s(after)"
						" WHERE f.%s OPERATOR(pg_catalog.=) m.s"
						"  AND %s OPERATOR(pg_catalog.>=) CASE WHEN s.after THEN m.hi ELSE CAST('-infinity' AS %s) END"
						"  AND %s OPERATOR(pg_catalog.<=) CASE WHEN s.after THEN CAST('infinity' AS %s) ELSE %s END"
						"  AND (s.after OR m.b)",
						fsk, t, vtype, t, vtype, before);
	}
	return psprintf(" WHERE f.%s OPERATOR(pg_catalog.=) m.s"
					"  AND ((m.b AND CAST(CAST(f.%s AS pg_catalog.timestamptz) AS %s) OPERATOR(pg_catalog.<) m.lo)"
					"   OR CAST(CAST(f.%s AS pg_catalog.timestamptz) AS %s) OPERATOR(pg_catalog.>=) m.hi)",
					fsk, quote_identifier(f->time), vtype, quote_identifier(f->time), vtype);
}

/*
 * The UPDATE of the facts of the versions probed on both sides
 * (MOVED_BOTH_SK, MOVED_BOTH_BK as $1, $2): m has each one's range as the
 * dimension has it now (lo = infinity, hi NULL: gone) and its business key
 * k1, k2, ... (from the dimension's row, or the change log's for a version
 * that is gone).
 */
static char *
rekey_both_sql(const Scd2FactRegistration *f)
{
	const char *dim = scd2_relation_display_name(f->dim);
	const char *dsk = quote_identifier(f->dim_reg->surrogate_key);
	const char *vf = quote_identifier(f->dim_reg->valid_from);
	const char *vt = quote_identifier(f->dim_reg->valid_to);
	Oid			vtypid = get_atttype(f->dim, get_attnum(f->dim, f->dim_reg->valid_from));
	char	   *inf = psprintf("CAST('infinity' AS %s)", format_type_be_qualified(vtypid));
	char	   *expected = expected_sql(f, "m", true);

	return psprintf("WITH m(s, b, lo, hi%s) AS (SELECT a.sk, true, COALESCE(v.%s, %s),"
					"   CASE WHEN v.%s IS NOT NULL THEN COALESCE(v.%s, %s) END%s"
					"  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.jsonb[])) AS a(sk, bk)"
					"  LEFT JOIN %s v ON v.%s OPERATOR(pg_catalog.=) a.sk"
					"  LEFT JOIN LATERAL (SELECT * FROM pg_catalog.jsonb_populate_record(CAST(NULL AS %s), a.bk)"
					"    WHERE v.%s IS NULL) j ON true"
					"  WHERE v.%s IS NOT NULL OR a.bk IS NOT NULL)"
					" UPDATE %s f SET %s = %s FROM m%s"
					"  AND f.%s IS DISTINCT FROM %s",
					key_list(f, NULL), vf, inf, dsk, vt, inf, key_list_either(f),
					dim, dsk, dim, dsk, dsk,
					scd2_relation_display_name(f->fact), quote_identifier(f->sk), expected, sides_sql(f, vtypid),
					quote_identifier(f->sk), expected);
}

/*
 * The UPDATE of the facts of the versions probed on one side, from their
 * new end on (MOVED_ONE_SK, MOVED_ONE_END as $1, $2): the end the change
 * log has, so that the dimension is not read for the many versions a load
 * closed; each found fact's business key is that of its version, still in
 * the dimension (w), looked up only for the facts found.
 */
static char *
rekey_one_sql(const Scd2FactRegistration *f)
{
	const char *dim = scd2_relation_display_name(f->dim);
	Oid			vtypid = get_atttype(f->dim, get_attnum(f->dim, f->dim_reg->valid_from));
	StringInfoData expected;

	/*
	 * One flat subquery over w and e: expected_sql nested in a subquery
	 * over w would serve, but Citus refuses a correlated subquery nested
	 * in another when a reference table is in the FROM (test/citus).
	 */
	initStringInfo(&expected);
	appendStringInfo(&expected, "(SELECT e.%s FROM %s w, %s e WHERE w.%s OPERATOR(pg_catalog.=) m.s AND ",
					 quote_identifier(f->dim_reg->surrogate_key), dim, dim,
					 quote_identifier(f->dim_reg->surrogate_key));
	scd2_fact_append_key_eq(&expected, f, "e", "w", false);
	appendStringInfoString(&expected, " AND ");
	scd2_fact_append_valid_at(&expected, f, "e", "f");
	appendStringInfoString(&expected, ")");
	return psprintf("WITH m(s, b, lo, hi) AS (SELECT a.sk, false, CAST(NULL AS %s), %s"
					"  FROM ROWS FROM (pg_catalog.unnest($1::pg_catalog.int8[]), pg_catalog.unnest($2::pg_catalog.timestamptz[])) AS a(sk, e))"
					" UPDATE %s f SET %s = %s FROM m%s"
					"  AND f.%s IS DISTINCT FROM %s",
					format_type_be_qualified(vtypid), scd2_changelog_decode_sql(vtypid, "a.e"),
					scd2_relation_display_name(f->fact), quote_identifier(f->sk), expected.data,
					sides_sql(f, vtypid), quote_identifier(f->sk), expected.data);
}

/*
 * The UPDATE of every fact (full => true): each fact's version (v) gives
 * its business key, and a fact inside its version's range is right (a
 * key's versions do not overlap), so only the others look up the version
 * valid at their time.
 */
static char *
rekey_full_sql(const Scd2FactRegistration *f)
{
	const char *dim = scd2_relation_display_name(f->dim);
	const char *dsk = quote_identifier(f->dim_reg->surrogate_key);
	const char *fsk = quote_identifier(f->sk);
	char	   *expected = expected_sql(f, "v", false);
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s f SET %s = %s FROM %s v WHERE v.%s OPERATOR(pg_catalog.=) f.%s AND (",
					 scd2_relation_display_name(f->fact), fsk, expected, dim, dsk, fsk);
	scd2_fact_append_valid_at(&buf, f, "v", "f");
	appendStringInfo(&buf, ") IS NOT TRUE AND f.%s IS DISTINCT FROM %s", fsk, expected);
	return buf.data;
}

/*
 * One UPDATE of fact table f as its owner: sql with no parameters, or
 * with the MOVED_* arrays first and second as $1 and $2; none when the
 * first is empty.  Returns the facts changed.
 */
static int64
update_facts(const Scd2FactRegistration *f, Oid owner, const char *sql, const Datum *moved,
			 int first, int second)
{
	Datum		values[2];
	Oid			types[2];

	if (moved != NULL)
	{
		if (ArrayGetNItems(ARR_NDIM(DatumGetArrayTypeP(moved[first])),
						   ARR_DIMS(DatumGetArrayTypeP(moved[first]))) == 0)
			return 0;
		values[0] = moved[first];
		values[1] = moved[second];
		types[0] = moved_types[first];
		types[1] = moved_types[second];
	}
	return (int64) scd2_exec_as_owner(owner, sql, moved != NULL ? 2 : 0, types, values, false,
									  SPI_OK_UPDATE, "re-keying facts",
									  psprintf("scd2: re-keying the facts of %s",
											   scd2_relation_display_name(f->fact)));
}

/*
 * Re-key fact table f (owned by owner) after the runs since its last one:
 * the facts of the versions they moved (full: every fact), as the fact
 * table's owner; the fact table's last run advanced.  The caller has
 * checked the privileges and row security and holds the dimension's lock;
 * it is connected to SPI.  Returns the number of facts changed.
 */
static int64
rekey(const Scd2FactRegistration *f, Oid owner, bool full)
{
	char	   *fname = scd2_relation_display_name(f->fact);
	RekeyRuns	runs;
	int64		changed = 0;
	Datum		moved[MOVED_N];
	int			nest;

	read_runs(f, &runs);
	if (!full && runs.unreadable != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot re-key fact table %s from the change log", fname),
				 errdetail("Run %lld of dimension %s, newer than the last re-keying, has no change log (%s), so which versions it moved is not known; nothing was re-keyed.",
						   (long long) runs.unreadable, scd2_relation_display_name(f->dim),
						   runs.pruned ? "pruned" : "loaded with scd2.change_log = off"),
				 errhint("Run SELECT * FROM scd2.check_facts('%s') to see the facts keyed to the wrong version, and SELECT scd2.rekey_facts('%s', full => true), which compares every fact.",
						 fname, fname)));

	nest = NewGUCNestLevel();
	/* a plan over many moved versions is costed high, but runs in a second or so */
	scd2_set_local("jit", "off");
	if (full)
		changed = update_facts(f, owner, rekey_full_sql(f), NULL, 0, 0);
	else if (runs.run_ids != (Datum) 0 && moved_keys(&runs, moved))
	{
		/* the facts of the moved versions through the fact's index, one probe each */
		scd2_set_local("enable_hashjoin", "off");
		scd2_set_local("enable_mergejoin", "off");
		scd2_set_local("enable_seqscan", "off");
		changed = update_facts(f, owner, rekey_both_sql(f), moved, MOVED_BOTH_SK, MOVED_BOTH_BK) +
			update_facts(f, owner, rekey_one_sql(f), moved, MOVED_ONE_SK, MOVED_ONE_END);
	}
	AtEOXact_GUC(true, nest);
	if (runs.newest != f->last_run)
		scd2_fact_set_last_run(f->fact, runs.newest);
	return changed;
}

/*
 * Refuse a run of dimension dim (entry names it in the messages: "A load",
 * "scd2.revert", "scd2.rewind") that would leave a maintained fact table
 * keyed wrongly or re-key it with rights the caller does not have: called
 * under the dimension's lock, before the run writes anything.  A load
 * (logged: whether it keeps a change log) must keep one.  The caller is
 * connected to SPI.
 */
void
scd2_facts_require_maintainable(Oid dim, const char *entry, bool load, bool logged)
{
	ListCell   *lc;

	foreach(lc, scd2_fact_maintained(dim))
	{
		Oid			fact = lfirst_oid(lc);
		Oid			owner = scd2_relation_owner(fact);
		char	   *fname = scd2_relation_display_name(fact);
		char	   *dname = scd2_relation_display_name(dim);
		AclMode		missing = (ACL_SELECT | ACL_UPDATE) &
			~pg_class_aclmask(fact, GetUserId(), ACL_SELECT | ACL_UPDATE, ACLMASK_ALL);

		/* its columns as registered (a column retyped since is refused) */
		(void) scd2_fact_read(fact);
		scd2_fact_refuse_citus_maintained(fact, dim);
		if (missing != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for fact table %s", fname),
					 errdetail("Fact table %s is maintained with dimension %s: %s re-keys its facts in the same transaction, which needs SELECT and UPDATE on it; missing:%s%s. Nothing was done.",
							   fname, dname, entry,
							   (missing & ACL_SELECT) ? " SELECT" : "",
							   (missing & ACL_UPDATE) ? " UPDATE" : ""),
					 errhint("Grant SELECT and UPDATE on %s to role \"%s\", or register the fact table with scd2.register_fact(..., maintain => false) and re-key it with scd2.rekey_facts('%s').",
							 fname, GetUserNameFromId(GetUserId(), false), fname)));
		if (pg_class_aclcheck(dim, owner, ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for dimension %s", dname),
					 errdetail("The facts of maintained fact table %s are re-keyed as its owner, role %s, which has no SELECT on the dimension. Nothing was done.",
							   fname, GetUserNameFromId(owner, false)),
					 errhint("Grant SELECT on %s to role \"%s\", or register the fact table with maintain => false.",
							 dname, GetUserNameFromId(owner, false))));
		scd2_refuse_row_security(fact, owner, "fact table", entry);
		scd2_refuse_row_security(dim, owner, "dimension", entry);
		if (load && !logged)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot load dimension %s with scd2.change_log = off: fact table %s is maintained",
							dname, fname),
					 errdetail("The facts of a maintained fact table are re-keyed from the run's change log, which says which versions the run moved; without it they would be left keyed to versions that no longer cover them. Nothing was loaded."),
					 errhint("Load with scd2.change_log = on, or register the fact table with scd2.register_fact(..., maintain => false) and re-key it with scd2.rekey_facts('%s', full => true) after the load.",
							 fname)));
	}
}

/*
 * Re-key the maintained fact tables of dimension dim after a run moved its
 * history (its change log and marks written); returns the facts changed.
 * The caller has called scd2_facts_require_maintainable under the lock it
 * still holds, and is connected to SPI.
 */
int64
scd2_facts_maintain(Oid dim)
{
	ListCell   *lc;
	int64		changed = 0;

	foreach(lc, scd2_fact_maintained(dim))
	{
		Oid			fact = lfirst_oid(lc);

		changed += rekey(scd2_fact_read(fact), scd2_relation_owner(fact), false);
	}
	return changed;
}

Datum
scd2_rekey_facts(PG_FUNCTION_ARGS)
{
	Oid			fact;
	bool		full;
	Scd2FactRegistration *f;
	Oid			owner;
	char	   *dname;
	int64		changed;

	scd2_require_not_null(PG_ARGISNULL(0), "fact");
	fact = PG_GETARG_OID(0);
	full = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	f = scd2_fact_read(fact);
	owner = scd2_relation_owner(fact);
	dname = scd2_relation_display_name(f->dim);

	require_privilege(fact, GetUserId(), ACL_SELECT | ACL_UPDATE, "fact table",
					  "scd2.rekey_facts needs SELECT and UPDATE on the fact table.");
	require_privilege(f->dim, GetUserId(), ACL_SELECT, "dimension",
					  "scd2.rekey_facts needs SELECT on the dimension of the fact table.");
	require_privilege(f->dim, owner, ACL_SELECT, "dimension",
					  psprintf("The facts are re-keyed as the fact table's owner, role %s, which has no SELECT on the dimension.",
							   GetUserNameFromId(owner, false)));
	scd2_lock_dimension(f->dim, dname,
						"scd2.rekey_facts waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s; nothing was re-keyed.");
	scd2_refuse_row_security(fact, owner, "fact table", "scd2.rekey_facts");
	scd2_refuse_row_security(f->dim, owner, "dimension", "scd2.rekey_facts");
	scd2_require_registered_shape(f->dim, dname, false);

	/* read again under the lock: a run of the dimension may have re-keyed it */
	f = scd2_fact_read(fact);
	changed = rekey(f, owner, full);
	SPI_finish();
	PG_RETURN_INT64(changed);
}
