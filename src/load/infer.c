/*
 * infer.c -- scd2.infer_members(staging, dimension, time_column): an
 * inferred member for every key of a batch of facts that the dimension
 * has no version of (issue 49; docs/FACTS.md, "Early-arriving facts").
 *
 * staging holds the facts, with the dimension's business key columns
 * under the same names and time_column, each fact's instant.  Every key
 * in it with no version at all gets one current version, flagged in the
 * registered inferred_column, starting at the earliest time among its
 * facts (converted to valid_from's type exactly, or refused, as a load's
 * effective times); its other columns take their defaults (the surrogate
 * key its identity or default, as a load's new versions), or NULL.  A
 * key with a version -- even one that starts after the fact, or a closed
 * one -- is not inferred.  Returns the number inferred.
 *
 * A logged run, as a load is: the load's checks and lock (SHARE ROW
 * EXCLUSIVE, taken before anything is read), row security and the
 * staging table's trust, then every statement as the dimension's owner in
 * a security-restricted operation with one snapshot (runner.c); the
 * batch validated and its values' conversions checked as a load's
 * (validate.c, convert.c: NULL keys or times, a time that does not fit
 * valid_from, refused with nothing written) in the one scan that finds
 * the facts of unknown keys (the search, below); one INSERT of the members
 * from those facts, whose versions go into the change log as a load's
 * inserts (scd2.revert and scd2.rewind delete them); one audit row, status 'success', with the metric
 * inferred.  A load that brings a key's record completes its inferred
 * version in place (complete.c).
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/snapmgr.h"
#include "utils/date.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "asof/asof.h"
#include "catalog/registry.h"
#include "citus/citus.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"

PG_FUNCTION_INFO_V1(scd2_infer_members);

/* What infer_members needs of the registration, or a refusal naming it. */
static void
require_inferable(Oid dim_oid, const Scd2Registration *reg, const char *dim_name)
{
	Scd2CitusTable t;

	if (reg->inferred_column == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension %s has no inferred_column", dim_name),
				 errdetail("scd2.infer_members flags the versions it inserts in the dimension's registered inferred_column, so that the load that brings a key's record completes them; nothing was inferred."),
				 errhint("Add a boolean column (ALTER TABLE ... ADD COLUMN is_inferred boolean NOT NULL DEFAULT false) and register the dimension again with inferred_column => 'is_inferred'.")));
	if (reg->surrogate_key == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension %s has no surrogate_key_column", dim_name),
				 errdetail("Facts are keyed to an inferred member by its surrogate key (scd2.asof), which a dimension registered without one does not have; nothing was inferred."),
				 errhint("Register the dimension again with surrogate_key_column.")));
	if (scd2_citus_table(dim_oid, &t) != SCD2_CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("scd2.infer_members does not support Citus dimension %s", dim_name),
				 errdetail("Dimension %s is a %s table; inferred members are made and completed on plain PostgreSQL tables only. Nothing was inferred.",
						   dim_name, scd2_citus_kind_name(&t)),
				 errhint("Key the facts with scd2.asof, and load the members' records before the facts.")));
}

/* The facts of unknown keys, as the INSERT reads them (runner.c). */
#define UNKNOWN_FACTS_NAME "scd2 work: unknown facts"

/* The search's query: every fact's key (the dimension's types) and time. */
static char *
sql_search(const Scd2Config *cfg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfoString(&buf, X(", s.`_t FROM "));
	scd2_append_all_staging(&buf, cfg);
	appendStringInfoString(&buf, " s");
	return buf.data;
}

/*
 * The search: one scan of the batch, each fact checked as a load checks
 * its staging rows (NULL keys or times, infinite times: counted, refused
 * after the scan) and kept, in a tuplestore, unless the dimension has a
 * version of its key.  Whether it has is asked of scd2.asof's bulk map,
 * built at the scan's start (asof/known.c): one random read per fact.
 * Without a map (the dimension too large for scd2.asof_map_memory, or the
 * map lost halfway: asof/known.c) every fact is kept, from there on, and
 * the INSERT's NOT EXISTS probes decide.
 *
 * Measured on PostgreSQL 15 (1M facts over 1M keys, 1% unknown,
 * bench/infer.sh): a query that filters the facts with scd2.asof(...) IS
 * NULL and probes the rest took as long as the bulk scd2.asof of the
 * batch (~0.5 s: half of it the map's random reads, the rest the call)
 * and the batch's validation scan came on top (60-130 ms); parallel query
 * did not help, as every worker builds its own map.  An anti join of every
 * fact with a hash of the dimension's keys, or grouping every fact first,
 * took 1.2 to 2 times as long.
 */
typedef struct FactSearch
{
	DestReceiver pub;
	Oid			dim_oid;
	int			nkeys;
	Oid			time_type;		/* valid_from's: the facts' times cast to it */
	AsofCache  *known;			/* NULL: no map, every valid fact kept */
	LoadRelation *unknown;		/* the facts kept */
	TupleDesc	desc;			/* their row type */
	MemoryContext cxt;
	int64		rows;
	int64		null_keys;
	int64		null_times;
	int64		non_finite;
} FactSearch;

static void
search_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
	FactSearch *r = (FactSearch *) self;
	MemoryContext old = MemoryContextSwitchTo(r->cxt);
	Oid		   *keytypes = palloc(sizeof(Oid) * r->nkeys);

	r->desc = CreateTupleDescCopy(typeinfo);
	for (int i = 0; i < r->nkeys; i++)
		keytypes[i] = TupleDescAttr(typeinfo, i)->atttypid;
	r->time_type = TupleDescAttr(typeinfo, r->nkeys)->atttypid;
	r->known = scd2_asof_known_begin(r->dim_oid, r->nkeys, keytypes);
	MemoryContextSwitchTo(old);
}

/* Whether a time of the valid_from type is infinity or -infinity. */
static bool
time_not_finite(Oid type, Datum t)
{
	switch (type)
	{
		case TIMESTAMPTZOID:
		case TIMESTAMPOID:
			return TIMESTAMP_NOT_FINITE(DatumGetTimestamp(t));
		case DATEOID:
			return DATE_NOT_FINITE(DatumGetDateADT(t));
	}
	elog(ERROR, "scd2: unexpected valid_from type %u", type);
	return false;				/* keep compiler quiet */
}

static bool
search_receive(TupleTableSlot *slot, DestReceiver *self)
{
	FactSearch *r = (FactSearch *) self;

	slot_getallattrs(slot);
	r->rows++;
	for (int i = 0; i < r->nkeys; i++)
	{
		if (slot->tts_isnull[i])
		{
			r->null_keys++;
			break;
		}
	}
	if (slot->tts_isnull[r->nkeys])
		r->null_times++;
	else if (time_not_finite(r->time_type, slot->tts_values[r->nkeys]))
		r->non_finite++;
	/* a batch with a bad fact is refused: nothing more to keep */
	if (r->null_keys + r->null_times + r->non_finite > 0)
		return true;
	if (r->known != NULL)
	{
		AsofKnown	k = scd2_asof_known(r->known, slot->tts_values);

		if (k == ASOF_KNOWN)
			return true;
		if (k == ASOF_NO_ANSWER)
		{
			/* from here on the INSERT's probes decide, as without a map */
			scd2_asof_known_end(r->known);
			r->known = NULL;
		}
	}
	tuplestore_puttupleslot(r->unknown->store, slot);
	r->unknown->rows++;
	return true;
}

static void
search_shutdown(DestReceiver *self)
{
	FactSearch *r = (FactSearch *) self;

	if (r->known != NULL)
		scd2_asof_known_end(r->known);
	r->known = NULL;
}

static void
search_destroy(DestReceiver *self)
{
}

/*
 * Run the search (as the owner, the load's snapshot), refuse a bad batch,
 * and register the facts kept as the relation *unknown; returns the number
 * of facts in the batch.
 */
static int64
search_facts(LoadState *st, LoadRelation *unknown)
{
	FactSearch	r;

	memset(&r, 0, sizeof(r));
	r.pub.receiveSlot = search_receive;
	r.pub.rStartup = search_startup;
	r.pub.rShutdown = search_shutdown;
	r.pub.rDestroy = search_destroy;
	r.pub.mydest = DestNone;
	r.dim_oid = st->cfg->dim_oid;
	r.nkeys = st->cfg->nkeys;
	r.cxt = CurrentMemoryContext;
	r.unknown = unknown;
	unknown->store = tuplestore_begin_heap(false, false, work_mem);
	scd2_load_exec_into(st, sql_search(st->cfg), (DestReceiver *) &r, "finding the facts' unknown keys");
	scd2_refuse_bad_staging(st, r.null_keys, r.null_times, r.non_finite);
	scd2_load_register_relation(unknown, r.desc);
	return r.rows;
}

/*
 * The INSERT of the inferred versions from the search's rows, and with log
 * their change-log rows (as a load's inserts, with their surrogate keys)
 * into the log's work table.
 */
static char *
sql_insert(const Scd2Config *cfg, bool log)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "WITH n AS (SELECT ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, X(", pg_catalog.min(s.`_t) AS `_t FROM %s s WHERE NOT EXISTS (SELECT FROM %s d WHERE "),
					 quote_identifier(UNKNOWN_FACTS_NAME), cfg->dim_sql);
	scd2_append_key_join(&buf, cfg, "d", "s");
	appendStringInfoString(&buf, ") GROUP BY ");
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "s.");
	appendStringInfo(&buf, "), i AS (INSERT INTO %s AS d (", cfg->dim_sql);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, NULL);
	appendStringInfo(&buf, ", %s, %s%s%s, %s) SELECT ", cfg->vf.ident, cfg->vt.ident,
					 cfg->is_current ? ", " : "", cfg->is_current ? cfg->is_current : "", cfg->inferred);
	scd2_append_cols(&buf, cfg->keys, cfg->nkeys, "n.");
	appendStringInfo(&buf, X(", n.`_t, %s%s, true FROM n RETURNING d.*)"),
					 cfg->infinity ? cfg->current_vt : psprintf("CAST(NULL AS %s)", cfg->vt.type_sql),
					 cfg->is_current ? ", true" : "");
	/* how many, and the earliest valid_from (the run's effective_at) */
	if (!log)
	{
		appendStringInfo(&buf, " SELECT pg_catalog.count(*), pg_catalog.min(%s) FROM i",
						 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)));
		return buf.data;
	}
	/* (the log's work table is the owner's to insert into, not to read) */
	appendStringInfo(&buf, ", l AS (INSERT INTO " LOG_TABLE " (" LOG_COLS_KEYS ", valid_to)"
					 " SELECT " WT_ACT_INSERT ", true, CAST(i.%s AS pg_catalog.int8), %s, %s,"
					 " NULL::pg_catalog.timestamptz FROM i)"
					 " SELECT pg_catalog.count(*), pg_catalog.min(%s) FROM i",
					 cfg->sk, scd2_key_json_sql(cfg, "i"),
					 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)),
					 scd2_changelog_encode_sql(cfg->vf.typid, psprintf("i.%s", cfg->vf.ident)));
	return buf.data;
}

/*
 * The run, connected to SPI: checks and lock, the owner's context, the
 * batch checked, the search, the INSERT and its change log; returns the run id the
 * change log reserved (0: none), the metrics in *m and in *effective_at the
 * earliest valid_from inserted (-infinity: none), the run's effective_at in
 * its audit row: scd2.apply_snapshots applies no extract older than a run's
 * (apply_snapshots.c), and a call that inferred nothing is older than all.
 */
static int64
infer(Oid stg_oid, Oid dim_oid, const char *time_column, Scd2Metrics *m, char **dim_name_out,
	  char **stg_name_out, TimestampTz *effective_at)
{
	Datum		earliest;
	bool		none;
	char	   *dim_name = scd2_relation_display_name(dim_oid);
	Oid			owner;
	OwnerContext oc;
	Scd2Registration *reg;
	Scd2Config *cfg;
	LoadState	st;
	LoadRelation unknown = {UNKNOWN_FACTS_NAME, NULL, 0, false};
	int			nest;

	/* before the lock: the relations, the caller's privileges (a load's) */
	scd2_check_relkind(dim_oid, true);
	scd2_check_relkind(stg_oid, false);
	scd2_check_privileges(stg_oid, dim_oid, false, GetUserId(), false);
	scd2_lock_dimension(dim_oid, NULL,
						"scd2.infer_members waited lock_timeout (%s) for the SHARE ROW EXCLUSIVE lock on dimension %s, "
						"which a load (or a statement that locks the table) holds; nothing was inferred.");
	owner = scd2_relation_owner(dim_oid);
	scd2_refuse_row_security(dim_oid, owner, "dimension", "scd2.infer_members");
	scd2_refuse_row_security(stg_oid, owner, "staging table", "scd2.infer_members");
	scd2_trust_staging_relation(stg_oid, owner, dim_name);

	scd2_owner_enter(&oc, owner);
	scd2_check_privileges(stg_oid, dim_oid, false, oc.owner, true);
	scd2_set_local("jit", "off");
	reg = scd2_load_registration(dim_oid, stg_oid, dim_name);
	require_inferable(dim_oid, reg, dim_name);
	cfg = scd2_infer_config(dim_oid, stg_oid, reg, time_column);
	*dim_name_out = cfg->dim_name;
	*stg_name_out = cfg->stg_name;

	memset(&st, 0, sizeof(st));
	st.cfg = cfg;
	st.oc = &oc;
	st.effective_at = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	CommandCounterIncrement();
	st.snap = RegisterSnapshot(GetTransactionSnapshot());
	scd2_refuse_stale_snapshot(dim_oid, cfg->dim_name, st.snap, "nothing was inferred");
	st.log_prepared = scd2_changelog_prepare(false);
	scd2_owner_restrict(&oc);

	/* the batch as a load checks its staging rows: the search counts */
	scd2_check_conversions(&st);
	m->source_rows = search_facts(&st, &unknown);
	if (cfg->infinity)
		scd2_check_before_current_valid_to(&st);

	nest = NewGUCNestLevel();
	scd2_pin_text_forms();
	scd2_load_exec_probing(&st, -1, sql_insert(cfg, st.log_prepared), SPI_OK_SELECT, "inferring members");
	m->inferred = scd2_spi_int8(0, 1);
	earliest = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &none);
	*effective_at = none ? DT_NOBEGIN : DatumGetTimestampTz(earliest);
	AtEOXact_GUC(true, nest);
	scd2_load_forget_relation(&unknown);
	st.run_id = scd2_changelog_write(cfg, st.log_prepared, false);

	UnregisterSnapshot(st.snap);
	scd2_owner_leave(&oc);
	return st.run_id;
}

Datum
scd2_infer_members(PG_FUNCTION_ARGS)
{
	TimestampTz started_at = GetCurrentTimestamp();
	Scd2Metrics m;
	char	   *dim_name;
	char	   *stg_name;
	char	   *time_column;
	int64		run_id;
	TimestampTz effective_at;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("staging table, dimension and time_column must not be NULL"),
				 errhint("Pass the batch of facts, the dimension and the name of the facts' time column.")));
	time_column = NameStr(*PG_GETARG_NAME(2));
	memset(&m, 0, sizeof(m));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	run_id = infer(PG_GETARG_OID(0), PG_GETARG_OID(1), time_column, &m, &dim_name, &stg_name,
				   &effective_at);
	(void) scd2_audit_write(PG_GETARG_OID(1), dim_name, stg_name, "success",
							effective_at, started_at, &m,
							psprintf("scd2.infer_members: %lld inferred members from the times in column %s",
									 (long long) m.inferred, quote_identifier(time_column)),
							NULL, run_id);
	SPI_finish();
	PG_RETURN_INT64(m.inferred);
}
