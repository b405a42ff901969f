/*
 * changelog.c -- the change log: what each load changed, kept so that the
 * load can be reverted (revert.c) and its change feed read again
 * (changes.c).
 *
 * A load that writes (not a dry run) records, in its own transaction and
 * with one INSERT ... SELECT just before its MERGE:
 *   - one row in scd2.change_log_runs (the run's header: the dimension and
 *     its registration as the load used it, and whether the rows were
 *     logged -- SET scd2.change_log = off skips them);
 *   - one row in scd2.change_log per row of the change table, i.e. per
 *     dimension row the MERGE writes: the feed's action, the business key
 *     (jsonb, as in the feed), valid_from and the new valid_to, and for a
 *     row it updates the before-image of what it changes (valid_to,
 *     is_current, Type 1 columns), read from the dimension by the
 *     identity the MERGE matches on (business key and valid_from).
 * A load that completes inferred members (load/complete.c) adds its own
 * rows first: action 'complete', each version whole as it was (old_row).
 * The surrogate keys of the rows the MERGE inserts do not exist yet:
 * scd2.changes reads them back by (key, valid_from), and a revert keeps
 * them in the change log before it deletes the rows.
 *
 * A first load into an empty dimension (load/first_load.c) writes no
 * scd2.change_log row at all (0.4 on): its header's first_load_rows says
 * that it inserted every row the dimension had right after it, and how
 * many.  Its revert writes the rows it deletes into scd2.change_log
 * (scd2_changelog_work_table, scd2_changelog_copy_work_rows) and clears
 * the mark; scd2.changes reads the rows from the dimension as long as the
 * run stands (compact.c).  Measured (bench/RESULTS.md): one log
 * row per version made a first load of 1M rows 1.4-1.9 times as slow as
 * the same load without its change log.
 *
 * The run id is reserved from the audit log's sequence before the MERGE
 * and returned to the load, which hands it to its audit row (LoadState
 * and Scd2LoadResult's run_id), so the change log and the audit log agree
 * on it.
 *
 * Who computes what (docs/SECURITY.md): the rows are computed by the load,
 * as the dimension's owner in its security-restricted operation -- the
 * jsonb of a key calls the key type's casts and output function, which the
 * owner may define -- into a work table (LOG_TABLE) that the extension
 * owner created and granted the dimension's owner INSERT on.  Only then
 * does the extension owner copy them, with the run id, into
 * scd2.change_log: that copy reads jsonb, timestamptz, bool and bigint
 * columns of a table nobody else can alter, and calls no function a user
 * can define.  Users cannot forge the change log of another role's
 * dimension (nor read it: it holds dimension data).
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"

static void copy_work_rows(int64 run_id, bool keep);

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

/*
 * A validity value as the change log stores it (timestamptz): a
 * timestamptz as is, a timestamp or a date as that instant in UTC, so the
 * value reads back exactly whatever the session's TimeZone
 * (scd2_changelog_decode_sql is the inverse).
 */
static char *
encode_sql(Oid typid, const char *expr)
{
	if (typid == TIMESTAMPOID)
		return psprintf("pg_catalog.timezone('UTC'::pg_catalog.text, %s)", expr);
	if (typid == DATEOID)
		return psprintf("pg_catalog.timezone('UTC'::pg_catalog.text, CAST(%s AS pg_catalog.timestamp))", expr);
	return pstrdup(expr);
}

/* encode_sql for revert: a value of the dimension's validity type as the change log keeps it. */
char *
scd2_changelog_encode_sql(Oid typid, const char *expr)
{
	return encode_sql(typid, expr);
}

char *
scd2_changelog_decode_sql(Oid typid, const char *expr)
{
	if (typid == TIMESTAMPOID)
		return psprintf("pg_catalog.timezone('UTC'::pg_catalog.text, %s)", expr);
	if (typid == DATEOID)
		return psprintf("CAST(pg_catalog.timezone('UTC'::pg_catalog.text, %s) AS pg_catalog.date)", expr);
	return pstrdup(expr);
}

/*
 * The columns a run's change log names (a name[] of its header), found
 * in the dimension as it is now; an error when one is gone.
 */
Scd2LoggedColumn *
scd2_changelog_columns(Relation rel, Datum names, int64 run_id, const char *dim_name, int *n)
{
	TupleDesc	desc = RelationGetDescr(rel);
	Datum	   *elems;
	bool	   *nulls;
	Scd2LoggedColumn *cols;

	deconstruct_array(DatumGetArrayTypeP(names), NAMEOID, NAMEDATALEN, false,
					  TYPALIGN_CHAR, &elems, &nulls, n);
	cols = palloc0(sizeof(Scd2LoggedColumn) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		const char *name = NameStr(*DatumGetName(elems[i]));
		Form_pg_attribute att = NULL;
		TypeCacheEntry *tc;

		for (int a = 0; a < desc->natts; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), name) == 0)
				att = TupleDescAttr(desc, a);
		if (att == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("dimension %s has no column \"%s\", which run %lld changed",
							dim_name, name, (long long) run_id),
					 errdetail("The change log of run %lld names the column; it was dropped or renamed since.",
							   (long long) run_id),
					 errhint("Give the column back its name (or add it again) to revert the run.")));
		cols[i].name = pstrdup(name);
		cols[i].ident = pstrdup(quote_identifier(name));
		cols[i].typid = att->atttypid;
		cols[i].type_sql = format_type_extended(att->atttypid, att->atttypmod,
												FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
		cols[i].def = psprintf("%s %s%s", cols[i].ident, cols[i].type_sql,
							   scd2_collate_sql(att->attcollation));
		tc = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR);
		cols[i].eqop_sql = OidIsValid(tc->eq_opr) ? scd2_operator_sql(tc->eq_opr) : NULL;
	}
	return cols;
}

/*
 * The business key of row alias as the change log keeps it, from a run's
 * logged key columns: scd2_key_json_sql's jsonb_build_object, for readers
 * of the log that have no registration in hand.
 */
char *
scd2_changelog_key_json_sql(const Scd2LoggedColumn *keys, int nkeys, const char *alias)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "pg_catalog.jsonb_build_object(");
	for (int i = 0; i < nkeys; i++)
		appendStringInfo(&buf, "%s%s, %s.%s", i ? ", " : "", quote_literal_cstr(keys[i].name), alias,
						 keys[i].ident);
	appendStringInfoString(&buf, ")");
	return buf.data;
}

/* "'name', alias.ident" pairs for jsonb_build_object. */
static void
append_json_pair(StringInfo buf, const char *name, const char *expr)
{
	appendStringInfo(buf, "%s%s, %s", buf->len > 0 ? ", " : "", quote_literal_cstr(name), expr);
}

/*
 * A Type 1 before-image value as old_type1 keeps it (since 0.4,
 * change_log_runs.old_type1_text): the type's own text form, as its
 * output function writes it (format's %s), NULL as JSON null.  Revert
 * reads it back with the type's input, which gives back the value
 * exactly -- a json value's text verbatim, where jsonb would reorder its
 * keys and drop duplicates and white space.  Computed, like every value
 * of the log, in the owner's context.
 */
static char *
type1_text_sql(const char *expr)
{
	return psprintf("CASE WHEN pg_catalog.num_nonnulls(%s) OPERATOR(pg_catalog.=) 1"
					" THEN pg_catalog.format('%%s', %s) END", expr, expr);
}

/*
 * Whether the installed extension has a change log: the library can be
 * newer than the extension's objects until ALTER EXTENSION scd2 UPDATE
 * (0.3 created the change log), and loads go on meanwhile, unlogged.
 */
static bool
change_log_installed(void)
{
	return scd2_installed("change_log_runs", NULL) && scd2_installed("change_log", NULL);
}

/*
 * Whether the change log keeps Type 1 before-images as text forms: 0.4's
 * change_log_runs.old_type1_text (an extension still at 0.3 keeps them as
 * jsonb values, as 0.3 did).
 */
static bool
text_before_images(void)
{
	return scd2_installed("change_log_runs", "old_type1_text");
}

/*
 * Reserve the run id (from the audit log's own sequence) and write the
 * run's header: the registration's columns as this load used them.
 * Returns the run id.
 */
static int64
write_run_header(const Scd2Config *cfg, bool text_images, int64 first_load_rows)
{
	Oid			argtypes[5 + SCD2_REGISTRY_RUN_HEADER_COLS] = {INT8OID, OIDOID, BOOLOID, TEXTARRAYOID, INT8OID,
		NAMEARRAYOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, NAMEARRAYOID, TEXTOID};
	Datum		values[5 + SCD2_REGISTRY_RUN_HEADER_COLS];
	char		nulls[5 + SCD2_REGISTRY_RUN_HEADER_COLS];
	bool		isnull[SCD2_REGISTRY_RUN_HEADER_COLS];
	int64		run_id;
	Datum	   *filled = palloc(sizeof(Datum) * Max(list_length(cfg->filled), 1));
	ListCell   *lc;

	scd2_exec_catalog("SELECT pg_catalog.nextval('scd2.audit_log_run_id_seq'::pg_catalog.regclass)",
									 0, NULL, NULL, NULL, false, SPI_OK_SELECT, "reserving a run id");
	run_id = scd2_spi_int8(0, 1);

	memset(nulls, ' ', sizeof(nulls));
	values[0] = Int64GetDatum(run_id);
	values[1] = ObjectIdGetDatum(cfg->dim_oid);
	values[2] = BoolGetDatum(scd2_change_log);
	/* the columns this load added are its Type 1 columns (load/schema.c) */
	foreach(lc, cfg->filled)
		filled[foreach_current_index(lc)] = CStringGetTextDatum((char *) lfirst(lc));
	values[3] = PointerGetDatum(construct_array(filled, list_length(cfg->filled), TEXTOID, -1,
												false, TYPALIGN_INT));
	values[4] = Int64GetDatum(first_load_rows);
	/* $6..$12: the registration as the load read it */
	scd2_registry_run_header(cfg->reg, values + 5, isnull);
	for (int i = 0; i < SCD2_REGISTRY_RUN_HEADER_COLS; i++)
		nulls[5 + i] = isnull[i] ? 'n' : ' ';
	if (scd2_exec_catalog(psprintf("INSERT INTO scd2.change_log_runs (run_id, dimension, key_columns,"
				  " valid_from_column, valid_to_column, is_current_column, surrogate_key_column,"
				  " type1_columns, current_valid_to, logged%s%s)"
				  " VALUES ($1, $2::pg_catalog.regclass, $6, $7, $8, $9, $10,"
				  " $11 OPERATOR(pg_catalog.||) $4::pg_catalog.name[], $12, $3%s%s)",
				  text_images ? ", old_type1_text" : "", first_load_rows >= 0 ? ", first_load_rows" : "",
				  text_images ? ", true" : "", first_load_rows >= 0 ? ", $5" : ""),
				  5 + SCD2_REGISTRY_RUN_HEADER_COLS, argtypes, values, nulls, false, SPI_OK_INSERT,
				  "writing the change log's run") != 1)
		elog(ERROR, "scd2: writing the change log's run of %s inserted no row", cfg->dim_name);
	return run_id;
}

/*
 * Before the load computes its change log: the work table it writes into,
 * created by the extension owner (so the dimension's owner, whose code
 * runs while the table is filled, cannot alter it, add a trigger, rule or
 * policy to it, or change a column's type), with INSERT granted to the
 * load's role.  Returns false when there is nothing to log (a dry run, no
 * change log installed, scd2.change_log = off): the load computes no rows.
 */
bool
scd2_changelog_prepare(bool dry_run)
{
	if (dry_run || !change_log_installed() || !scd2_change_log)
		return false;
	scd2_changelog_work_table(GetUserId());
	return true;
}

/*
 * The change log's work table (LOG_TABLE), created by the extension owner,
 * with INSERT granted to role: the load's role, or the dimension's owner
 * when a revert writes a first load's rows (revert.c).
 */
void
scd2_changelog_work_table(Oid role)
{
	scd2_exec_catalog("CREATE TEMP TABLE " LOG_TABLE " (action pg_catalog.text"
					  SCD2_LOG_KEYS(LOG_COL_DEF) SCD2_LOG_IMAGES(LOG_COL_DEF) SCD2_LOG_ROW(LOG_COL_DEF)
					  ") ON COMMIT DROP",
					  0, NULL, NULL, NULL, false, SPI_OK_UTILITY, "creating the change log's work table");
	scd2_exec_catalog(psprintf("GRANT INSERT ON " LOG_TABLE " TO %s",
							   quote_identifier(GetUserNameFromId(role, false))),
					  0, NULL, NULL, NULL, false, SPI_OK_UTILITY, "granting the change log's work table");
}

#define LOG_INSERT "INSERT INTO " LOG_TABLE " (" LOG_COLS_ALL ")"

/*
 * The whole before-image of row alias d, as an order-free load's 'extend'
 * and 'remove' rows keep it (0.4's change_log.old_row; revert inserts it
 * again, revert.c): every column but a generated one, as its type's text
 * form (type1_text_sql), computed in the owner's context like every value
 * of the log.  In pieces of 40 columns (a function takes at most 100
 * arguments).
 */
static char *
row_text_json_sql(Oid relid, const char *alias)
{
	Relation	rel = table_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	StringInfoData buf;
	int			n = 0;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "(pg_catalog.jsonb_build_object(");
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		const char *ident = quote_identifier(NameStr(att->attname));

		if (att->attisdropped || att->attgenerated)
			continue;
		if (n > 0 && n % 40 == 0)
			appendStringInfoString(&buf, ") OPERATOR(pg_catalog.||) pg_catalog.jsonb_build_object(");
		else if (n > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfo(&buf, "%s, %s", quote_literal_cstr(NameStr(att->attname)),
						 type1_text_sql(psprintf("%s.%s", alias, ident)));
		n++;
	}
	appendStringInfoString(&buf, "))");
	table_close(rel, AccessShareLock);
	return buf.data;
}

/* row_text_json_sql for a completed inferred version (load/complete.c). */
char *
scd2_changelog_row_json_sql(Oid relid, const char *alias)
{
	return row_text_json_sql(relid, alias);
}

/*
 * The statement that computes the change log's rows of a load into
 * LOG_TABLE, run by the load as the dimension's owner (scd2_load_exec):
 * one row per row of the change table -- for an update copy (it carries
 * its target's valid_from in _tvf) the before-image of its target, read
 * from the dimension; for an insert copy its identity only (its surrogate
 * key does not exist yet: scd2.changes reads it back).
 *
 * On Citus (load/citus_load.c) the log is written after the write step: the
 * before-images come from the dimension's image (cfg->dim_sql, as read
 * before the write) and the inserted rows' surrogate keys from "written",
 * where the load read the versions it wrote back (scd2.changes cannot
 * read them back from a distributed dimension).  NULL: not known.
 */
char *
scd2_changelog_sql(const Scd2Config *cfg, const char *chg, const char *written)
{
	StringInfoData sql;
	StringInfoData type1;
	char	   *keys = scd2_key_json_sql(cfg, "c");
	bool		text_images = text_before_images();

	initStringInfo(&type1);
	for (int i = 0; i < cfg->ntype1; i++)
	{
		char	   *value = psprintf("d.%s", cfg->type1[i].ident);

		append_json_pair(&type1, cfg->type1[i].name, text_images ? type1_text_sql(value) : value);
	}

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 X(LOG_INSERT
					   " SELECT c.`_action, false, %s, %s, %s, %s, %s, %s, %s, %s"
					   " FROM %s c JOIN %s d ON "),
					 cfg->sk ? psprintf("CAST(d.%s AS pg_catalog.int8)", cfg->sk) : "NULL::pg_catalog.int8",
					 keys,
					 /* an order-free 'extend' row is found at its new valid_from */
					 cfg->order_free ? encode_sql(cfg->vf.typid, X("CASE WHEN c.`_action = " WT_ACT_EXTEND " THEN c.`_vf ELSE c.`_tvf END"))
					 : encode_sql(cfg->vf.typid, X("c.`_tvf")),
					 encode_sql(cfg->vf.typid, X("c.`_vt")),
					 encode_sql(cfg->vf.typid, psprintf("d.%s", cfg->vt.ident)),
					 cfg->is_current ? psprintf("d.%s", cfg->is_current) : "NULL::pg_catalog.bool",
					 cfg->ntype1 > 0 ? psprintf("pg_catalog.jsonb_build_object(%s)", type1.data) : "NULL::pg_catalog.jsonb",
					 cfg->order_free ? psprintf(X("CASE WHEN c.`_action IN (" WT_ACT_EXTEND ", " WT_ACT_REMOVE ") THEN %s END"),
												row_text_json_sql(cfg->dim_oid, "d"))
					 : "NULL::pg_catalog.jsonb",
					 chg, cfg->dim_sql);
	scd2_append_key_join(&sql, cfg, "d", "c");
	appendStringInfo(&sql, X(" AND d.%s %s c.`_tvf WHERE c.`_tvf IS NOT NULL"), cfg->vf.ident, cfg->vf.eqop_sql);
	appendStringInfo(&sql,
					 X(" UNION ALL SELECT c.`_action, true, %s, %s, %s, %s,"
					   " NULL::pg_catalog.timestamptz, NULL::pg_catalog.bool, NULL::pg_catalog.jsonb, NULL::pg_catalog.jsonb"
					   " FROM %s c"),
					 written && cfg->sk ? psprintf("CAST(w.%s AS pg_catalog.int8)", cfg->sk) :
					 /* the keys an order-free load drew (load/driver.c), or NULL */
					 cfg->order_free && cfg->sk ? X("c.`_sk") : "NULL::pg_catalog.int8",
					 keys, encode_sql(cfg->vf.typid, X("c.`_vf")), encode_sql(cfg->vf.typid, X("c.`_vt")), chg);
	if (written && cfg->sk)
	{
		appendStringInfo(&sql, " LEFT JOIN %s w ON ", written);
		scd2_append_key_join(&sql, cfg, "w", "c");
		appendStringInfo(&sql, X(" AND w.%s %s c.`_vf"), cfg->vf.ident, cfg->vf.eqop_sql);
	}
	appendStringInfoString(&sql, X(" WHERE c.`_tvf IS NULL"));
	return sql.data;
}

/*
 * The same after the first load into an empty dimension (load/first_load.c),
 * which writes no change table: one row per row of the dimension -- every
 * one of them was inserted by this load, as a current version (valid_to
 * NULL in the log, as for an insert copy).
 */
char *
scd2_changelog_sql_first_load(const Scd2Config *cfg)
{
	return psprintf(LOG_INSERT
					" SELECT " WT_ACT_INSERT ", true, NULL::pg_catalog.int8, %s, %s,"
					" NULL::pg_catalog.timestamptz, NULL::pg_catalog.timestamptz, NULL::pg_catalog.bool, NULL::pg_catalog.jsonb,"
					" NULL::pg_catalog.jsonb FROM %s d",
					scd2_key_json_sql(cfg, "d"), encode_sql(cfg->vf.typid, psprintf("d.%s", cfg->vf.ident)),
					cfg->dim_sql);
}

/*
 * Copy the work table's rows into scd2.change_log under run_id and drop
 * the work table, as the extension owner: jsonb, timestamptz, bool and
 * bigint columns of a table nobody else can alter.
 */
void
scd2_changelog_copy_work_rows(int64 run_id)
{
	copy_work_rows(run_id, false);
}

/*
 * keep: the work table stays, emptied, for the surrogate keys an
 * order-free load logs after its write (scd2_changelog_sql_inserted_keys;
 * the load runs restricted by then, when no temporary table can be made).
 */
static void
copy_work_rows(int64 run_id, bool keep)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};

	/* whole before-images (0.4's old_row): only order-free loads write them */
	bool		rows = scd2_installed("change_log", "old_row");

	scd2_exec_catalog(psprintf("INSERT INTO scd2.change_log (run_id, " LOG_COLS_IMAGES "%s)"
							   " SELECT $1, l.action" SCD2_LOG_KEYS(LOG_COL_OF_L) SCD2_LOG_IMAGES(LOG_COL_OF_L)
							   "%s FROM ONLY " LOG_TABLE " l",
							   rows ? SCD2_LOG_ROW(LOG_COL_NAME) : "", rows ? SCD2_LOG_ROW(LOG_COL_OF_L) : ""),
					  1, argtypes, values, NULL, false, SPI_OK_INSERT, "writing the change log");
	scd2_exec_catalog(keep ? "DELETE FROM ONLY " LOG_TABLE : "DROP TABLE " LOG_TABLE, 0, NULL, NULL, NULL, false,
					  keep ? SPI_OK_DELETE : SPI_OK_UTILITY, "dropping the change log's work table");
}

/*
 * After the load computed its rows (prepared: scd2_changelog_prepare
 * returned true): reserve the run id, write the run's header and copy the
 * rows into scd2.change_log, as the extension owner; the work table is
 * dropped, or with keys_later emptied for the surrogate keys of the
 * versions the load inserts (scd2_changelog_sql_inserted_keys: an
 * order-free load that did not draw them).  Returns the run id (0: no
 * change log installed).
 */
int64
scd2_changelog_write(const Scd2Config *cfg, bool prepared, bool keys_later)
{
	int64		run_id;

	if (!change_log_installed())
		return 0;

	run_id = write_run_header(cfg, text_before_images(), -1);
	if (prepared)
		copy_work_rows(run_id, keys_later);
	return run_id;
}

/*
 * Whether the installed extension logs a first load compactly (0.4's
 * change_log_runs.first_load_rows).
 */
bool
scd2_changelog_compact_first_load(void)
{
	return scd2_installed("change_log_runs", "first_load_rows");
}

/*
 * The change log of a first load into an empty dimension that inserted
 * `inserted` rows, logged compactly (scd2_changelog_compact_first_load;
 * the file's comment): the header alone, first_load_rows = inserted, or
 * logged = false with scd2.change_log = off (prepared false).  The work
 * table goes unused.  Returns the run id.
 */
int64
scd2_changelog_write_first_load(const Scd2Config *cfg, bool prepared, int64 inserted)
{
	int64		run_id;

	if (!change_log_installed())
		return 0;
	run_id = write_run_header(cfg, text_before_images(), prepared ? inserted : -1);

	if (prepared)
		scd2_exec_catalog("DROP TABLE " LOG_TABLE, 0, NULL, NULL, NULL, false, SPI_OK_UTILITY,
						  "dropping the change log's work table");
	return run_id;
}

/*
 * Whether the installed extension can log a batch by surrogate keys
 * (0.4's scd2.change_log_batches; load/batch_log.c).
 */
bool
scd2_changelog_batch_installed(void)
{
	return change_log_installed() && scd2_installed("change_log_batches", NULL);
}

/*
 * Whether a load can log a batch by surrogate keys: 0.5's table, which
 * holds a batch in chunks (its column chunk; load/batch_log.c).  A 0.4
 * table -- the library updated, ALTER EXTENSION scd2 UPDATE not run yet
 * -- is still read and pinned (each of its batches one row, as a chunk 0),
 * and loads log row by row meanwhile.
 */
bool
scd2_changelog_batch_chunked(void)
{
	return scd2_changelog_batch_installed() && scd2_installed("change_log_batches", "chunk");
}

/*
 * The change log of a batch logged by surrogate keys (load/batch_log.c):
 * its header, as the extension owner.  The work table goes unused.
 * Returns the run id; the batch's rows follow (scd2_changelog_write_batch_chunk).
 */
int64
scd2_changelog_write_batch_header(const Scd2Config *cfg)
{
	int64		run_id = write_run_header(cfg, text_before_images(), -1);

	scd2_exec_catalog("DROP TABLE " LOG_TABLE, 0, NULL, NULL, NULL, false, SPI_OK_UTILITY,
					  "dropping the change log's work table");
	return run_id;
}

/*
 * One scd2.change_log_batches row of run run_id, its chunk chunk: the three
 * arrays the load computed (surrogate keys, "char" actions, valid_to as
 * logged), as the extension owner; business keys and valid_from are
 * pinned later (load/batch_pin.c).
 */
void
scd2_changelog_write_batch_chunk(int64 run_id, int chunk, const Datum *arrays)
{
	Oid			argtypes[5] = {INT8OID, INT4OID, INT8ARRAYOID, CHARARRAYOID, TIMESTAMPTZARRAYOID};
	Datum		values[5] = {Int64GetDatum(run_id), Int32GetDatum(chunk), arrays[0], arrays[1], arrays[2]};

	scd2_exec_catalog("INSERT INTO scd2.change_log_batches (run_id, chunk, surrogate_keys, actions, valid_to)"
					  " VALUES ($1, $2, $3, $4, $5)",
					  5, argtypes, values, NULL, false, SPI_OK_INSERT, "writing the change log");
}

/*
 * jsonb_build_object('c', alias.c, ...) of Type 1 columns as old_type1
 * keeps them (text forms: type1_text_sql, or the values as 0.3 kept
 * them), for readers of the log that have no registration in hand.
 */
char *
scd2_changelog_type1_json_sql(const Scd2LoggedColumn *cols, int ncols, const char *alias, bool text)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 0; i < ncols; i++)
	{
		char	   *value = psprintf("%s.%s", alias, cols[i].ident);

		append_json_pair(&buf, cols[i].name, text ? type1_text_sql(value) : value);
	}
	return psprintf("pg_catalog.jsonb_build_object(%s)", buf.data);
}

/*
 * The surrogate keys of the versions an order-free load inserted
 * (load/driver.c, after its MERGE), into LOG_TABLE: computed by the load as the
 * dimension's owner from the change table's insert copies and the
 * dimension, by (key, valid_from) right after the write.  scd2.changes
 * would otherwise look them up by (key, valid_from) when asked, which a
 * later order-free load may have moved ('extend') or removed; kept now,
 * they stay exact, as on Citus.
 */
char *
scd2_changelog_sql_inserted_keys(const Scd2Config *cfg, const char *chg)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql,
					 X(LOG_INSERT
					   " SELECT c.`_action, true, CAST(d.%s AS pg_catalog.int8), %s, %s,"
					   " NULL::pg_catalog.timestamptz, NULL::pg_catalog.timestamptz, NULL::pg_catalog.bool,"
					   " NULL::pg_catalog.jsonb, NULL::pg_catalog.jsonb"
					   " FROM %s c JOIN %s d ON "),
					 cfg->sk, scd2_key_json_sql(cfg, "c"), encode_sql(cfg->vf.typid, X("c.`_vf")),
					 chg, cfg->dim_sql);
	scd2_append_key_join(&sql, cfg, "d", "c");
	appendStringInfo(&sql, X(" AND d.%s %s c.`_vf WHERE c.`_tvf IS NULL"), cfg->vf.ident, cfg->vf.eqop_sql);
	return sql.data;
}

/*
 * Then, as the extension owner: those keys into the run's change-log rows
 * of the inserted versions (matched by the key and valid_from the load
 * logged for them), and the work table dropped.  Every inserted row must
 * get its key.
 */
void
scd2_changelog_store_inserted_keys(const Scd2Config *cfg, int64 run_id, int64 expected)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};

	scd2_exec_catalog("UPDATE scd2.change_log c SET surrogate_key = l.surrogate_key FROM ONLY " LOG_TABLE " l"
					  " WHERE c.run_id OPERATOR(pg_catalog.=) $1 AND c.inserted"
					  "   AND c.business_key OPERATOR(pg_catalog.=) l.business_key"
					  "   AND c.valid_from OPERATOR(pg_catalog.=) l.valid_from",
					  1, argtypes, values, NULL, false, SPI_OK_UPDATE, "writing the change log's surrogate keys");
	if ((int64) SPI_processed != expected)
		elog(ERROR, "scd2: the change log of a load of %s names %lld inserted versions, the dimension %lld",
			 cfg->dim_name, (long long) expected, (long long) SPI_processed);
	scd2_exec_catalog("DROP TABLE " LOG_TABLE, 0, NULL, NULL, NULL, false, SPI_OK_UTILITY,
					  "dropping the change log's work table");
}
