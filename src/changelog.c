/*
 * changelog.c -- the change log: what each load changed, kept so that the
 * load can be reverted (revert.c) and its change feed read again
 * (scd2.changes).
 *
 * A load that writes (not a dry run) records, in its own transaction:
 *   - one row in scd2.change_log_runs (the run's header: dimension, the
 *     columns that identify a row and the columns a revert restores, and
 *     whether the rows were logged -- setting scd2.change_log = off skips
 *     them);
 *   - one row in scd2.change_log per dimension row it wrote: the change
 *     feed's columns (action, surrogate key, valid_from, valid_to), the
 *     row's identity (business key and valid_from, as jsonb in the
 *     dimension's own types) and, for a row it updated, the before-image of
 *     what it changed (valid_to, is_current, Type 1 columns).
 *
 * The before-images are read from the dimension just before the MERGE,
 * joined to the load's change table by the identity the MERGE matches on;
 * the inserted rows are read just after it (their surrogate keys exist
 * only then).  The run id is reserved from the audit log's sequence before
 * the MERGE and handed to the audit row of the same load
 * (scd2_changelog_claim_run_id), so the change log and the audit log agree
 * on it.
 *
 * Everything here is written as the extension owner, as the audit log is:
 * users read the change log but cannot forge it.
 */
#include "scd2.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"

/* scd2.change_log: record what loads change (default on). */
static bool scd2_change_log_enabled = true;

/*
 * The run id reserved by the load running now, claimed by its audit row.
 * It is only handed over inside the (sub)transaction that reserved it and
 * for the same dimension: a load that failed after reserving leaves a
 * stale id that nobody claims.
 */
static struct
{
	int64		run_id;
	TransactionId xid;
	char	   *dim_name;		/* in TopMemoryContext */
}			pending;

/*
 * Settings under which every type's text form (the change log keeps
 * values as jsonb) reads back as the value written: ISO dates, postgres
 * intervals, shortest-exact floats, money in the C locale.  Saved in the
 * caller's GUC nest level.
 */
void
scd2_pin_text_forms(void)
{
	scd2_set_local("DateStyle", "ISO, YMD");
	scd2_set_local("IntervalStyle", "postgres");
	scd2_set_local("extra_float_digits", "1");
	scd2_set_local("lc_monetary", "C");
}

void
scd2_changelog_init_gucs(void)
{
	DefineCustomBoolVariable("scd2.change_log",
							 "Records the before-images of what each load changes, so the load can be reverted.",
							 "With off, loads run a little faster but cannot be reverted with scd2.revert.",
							 &scd2_change_log_enabled,
							 true,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
}

/* An unquoted column name from quote_identifier()'s result. */
static char *
dequote_ident(const char *ident)
{
	StringInfoData buf;
	size_t		len = strlen(ident);

	if (len < 2 || ident[0] != '"')
		return pstrdup(ident);
	initStringInfo(&buf);
	for (size_t i = 1; i + 1 < len; i++)
	{
		appendStringInfoChar(&buf, ident[i]);
		if (ident[i] == '"')
			i++;				/* "" stands for one " */
	}
	return buf.data;
}

/* A name[] Datum from C strings. */
static Datum
name_array(List *names)
{
	int			n = list_length(names);
	Datum	   *elems = palloc(sizeof(Datum) * Max(n, 1));
	ListCell   *lc;
	int			i = 0;

	foreach(lc, names)
		elems[i++] = DirectFunctionCall1(namein, CStringGetDatum((char *) lfirst(lc)));
	return PointerGetDatum(construct_array(elems, n, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
}

/* "'name', alias.ident" pairs for jsonb_build_object. */
static void
append_json_pair(StringInfo buf, const char *name, const char *expr)
{
	appendStringInfo(buf, "%s%s, %s", buf->len > 0 ? ", " : "", quote_literal_cstr(name), expr);
}

/* jsonb_build_object of the row identity: business key and valid_from. */
static char *
identity_json(const Scd2Config *cfg, const char *alias, const char *vf_expr)
{
	StringInfoData pairs;

	initStringInfo(&pairs);
	for (int i = 0; i < cfg->nkeys; i++)
		append_json_pair(&pairs, cfg->keys[i].name, psprintf("%s.%s", alias, cfg->keys[i].ident));
	append_json_pair(&pairs, cfg->vf.name, vf_expr);
	return psprintf("pg_catalog.jsonb_build_object(%s)", pairs.data);
}

/* "t.k1 = c.k1 AND ..." with the key columns' own equality operators. */
static void
append_key_join(StringInfo buf, const Scd2Config *cfg, const char *a, const char *b)
{
	for (int i = 0; i < cfg->nkeys; i++)
		appendStringInfo(buf, "%s%s.%s %s %s.%s", i ? " AND " : "",
						 a, cfg->keys[i].ident, cfg->keys[i].eqop_sql, b, cfg->keys[i].ident);
}

/* Run one statement of the change log as the extension owner. */
static void
exec_as_owner(const char *sql, int nargs, Oid *argtypes, Datum *values,
			  Snapshot snap, int expected, const char *what)
{
	Oid			save_userid;
	int			save_sec;

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(scd2_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	if (snap != NULL)
		scd2_spi_exec_snap(sql, nargs, argtypes, values, NULL, snap, expected, what);
	else
	{
		int			rc = SPI_execute_with_args(sql, nargs, argtypes, values, NULL, false, 0);

		if (rc != expected)
			elog(ERROR, "scd2: %s failed: %s", what, SPI_result_code_string(rc));
	}
	SetUserIdAndSecContext(save_userid, save_sec);
}

/*
 * Before the MERGE: reserve the run id, write the run's header and the
 * before-images of every row the load is about to update (the update
 * copies of the change table: they carry their target's valid_from in
 * _tvf).  Returns the reserved run id.
 */
int64
scd2_changelog_before(const Scd2Config *cfg, const char *chg, Snapshot snap)
{
	StringInfoData sql;
	StringInfoData before;
	List	   *identity = NIL;
	List	   *restored = NIL;
	Oid			argtypes[5] = {INT8OID, OIDOID, NAMEARRAYOID, NAMEARRAYOID, BOOLOID};
	Datum		values[5];
	int64		run_id;
	MemoryContext oldcxt;

	/* the run id, from the audit log's own sequence */
	exec_as_owner("SELECT pg_catalog.nextval('scd2.audit_log_run_id_seq'::pg_catalog.regclass)",
				  0, NULL, NULL, NULL, SPI_OK_SELECT, "reserving a run id");
	run_id = scd2_spi_int8(0, 1);

	for (int i = 0; i < cfg->nkeys; i++)
		identity = lappend(identity, cfg->keys[i].name);
	identity = lappend(identity, cfg->vf.name);
	restored = lappend(restored, cfg->vt.name);
	if (cfg->is_current)
		restored = lappend(restored, dequote_ident(cfg->is_current));
	for (int i = 0; i < cfg->ntype1; i++)
		restored = lappend(restored, cfg->type1[i].name);

	values[0] = Int64GetDatum(run_id);
	values[1] = ObjectIdGetDatum(cfg->dim_oid);
	values[2] = name_array(identity);
	values[3] = name_array(restored);
	values[4] = BoolGetDatum(scd2_change_log_enabled);
	exec_as_owner("INSERT INTO scd2.change_log_runs (run_id, dimension, identity_columns,"
				  " restored_columns, logged) VALUES ($1, $2, $3, $4, $5)",
				  5, argtypes, values, NULL, SPI_OK_INSERT, "writing the change log's run");

	if (scd2_change_log_enabled)
	{
		int			nest = NewGUCNestLevel();

		/* valid_to, is_current and the Type 1 columns as they are now */
		initStringInfo(&before);
		append_json_pair(&before, cfg->vt.name, psprintf("d.%s", cfg->vt.ident));
		if (cfg->is_current)
			append_json_pair(&before, dequote_ident(cfg->is_current), psprintf("d.%s", cfg->is_current));
		for (int i = 0; i < cfg->ntype1; i++)
			append_json_pair(&before, cfg->type1[i].name, psprintf("d.%s", cfg->type1[i].ident));

		/*
		 * The feed's valid_to of an updated row: its new end, or -- when it
		 * stays current (a Type 1 update) -- its stored end, unchanged.
		 */
		initStringInfo(&sql);
		appendStringInfo(&sql,
						 "INSERT INTO scd2.change_log (run_id, action, surrogate_key, valid_from, valid_to,"
						 " identity, before) SELECT $1, c._action, %s, CAST(c._vf AS pg_catalog.timestamptz),"
						 " CAST(COALESCE(c._vt, d.%s) AS pg_catalog.timestamptz), %s,"
						 " pg_catalog.jsonb_build_object(%s) FROM %s c JOIN %s d ON ",
						 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL",
						 cfg->vt.ident, identity_json(cfg, "c", "c._tvf"),
						 before.data, chg, cfg->dim_sql);
		append_key_join(&sql, cfg, "d", "c");
		appendStringInfo(&sql, " AND d.%s %s c._tvf WHERE c._tvf IS NOT NULL",
						 cfg->vf.ident, cfg->vf.eqop_sql);
		scd2_pin_text_forms();
		exec_as_owner(sql.data, 1, argtypes, values, snap, SPI_OK_INSERT,
					  "writing the change log's before-images");
		AtEOXact_GUC(true, nest);
	}

	/* hand the run id to this load's audit row */
	oldcxt = MemoryContextSwitchTo(TopMemoryContext);
	if (pending.dim_name)
		pfree(pending.dim_name);
	pending.dim_name = pstrdup(cfg->dim_name);
	MemoryContextSwitchTo(oldcxt);
	pending.run_id = run_id;
	pending.xid = GetCurrentTransactionId();
	return run_id;
}

/*
 * After the MERGE: the rows it inserted, with their surrogate keys and
 * stored valid_to read back by (key, valid_from).  inserted is the number
 * of insert copies the load classified.
 */
void
scd2_changelog_after(const Scd2Config *cfg, const char *chg, Snapshot snap,
					 int64 run_id, int64 inserted)
{
	StringInfoData sql;
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};
	int			nest;

	if (!scd2_change_log_enabled || inserted == 0)
		return;
	initStringInfo(&sql);
	appendStringInfo(&sql,
					 "INSERT INTO scd2.change_log (run_id, action, surrogate_key, valid_from, valid_to,"
					 " identity, before) SELECT $1, c._action, %s, CAST(c._vf AS pg_catalog.timestamptz),"
					 " CAST(d.%s AS pg_catalog.timestamptz), %s, NULL FROM %s c JOIN %s d ON ",
					 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL",
					 cfg->vt.ident, identity_json(cfg, "c", "c._vf"), chg, cfg->dim_sql);
	append_key_join(&sql, cfg, "d", "c");
	appendStringInfo(&sql, " AND d.%s %s c._vf WHERE c._tvf IS NULL", cfg->vf.ident, cfg->vf.eqop_sql);
	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	exec_as_owner(sql.data, 1, argtypes, values, snap, SPI_OK_INSERT,
				  "writing the change log's inserted rows");
	AtEOXact_GUC(true, nest);
	if ((int64) SPI_processed != inserted)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("load of %s inserted %lld rows but the change log found %lld",
						cfg->dim_name, (long long) inserted, (long long) SPI_processed),
				 errdetail("The dimension changed in a way the load did not expect; everything was rolled back."),
				 errhint("Check for triggers or rules on the dimension, then retry the load.")));
}

/*
 * The run id reserved by this (sub)transaction's load of dim_name, or 0.
 * Called by the audit log for a successful load; the reservation is used
 * once.
 */
int64
scd2_changelog_claim_run_id(const char *dim_name)
{
	int64		run_id = 0;

	if (pending.run_id != 0 && pending.dim_name != NULL &&
		TransactionIdEquals(pending.xid, GetCurrentTransactionIdIfAny()) &&
		strcmp(pending.dim_name, dim_name) == 0)
		run_id = pending.run_id;
	pending.run_id = 0;
	return run_id;
}
