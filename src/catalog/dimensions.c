/*
 * dimensions.c -- every read and write of scd2.dimensions.
 *
 * Reads: the registration a load resolves (config.c), the columns
 * scd2.asof needs (asof/cache.c), the dimensions scd2.apply_all loads;
 * and the check that a dimension still has the shape it was registered
 * with (scd2_check_registered_shape, for both).
 * Writes: the SQL-callable helpers of scd2.register and scd2.unregister
 * below.
 *
 * scd2.register() (SQL) validates a dimension and creates its indexes as
 * the caller, who must own the dimension; the registry row itself is
 * written here as the extension owner, so the registry table needs no
 * write privilege for PUBLIC and nobody can register a table they do not
 * own.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "catalog/namespace.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "catalog/pg_class.h"
#include "utils/memutils.h"

#include "catalog/registry.h"
#include "common/common.h"

PG_FUNCTION_INFO_V1(scd2_registry_store);
PG_FUNCTION_INFO_V1(scd2_registry_remove);
PG_FUNCTION_INFO_V1(scd2_registry_forget_dropped);
PG_FUNCTION_INFO_V1(scd2_registry_store_more);
PG_FUNCTION_INFO_V1(scd2_registry_store_guard);
PG_FUNCTION_INFO_V1(scd2_registry_store_missing_columns);
PG_FUNCTION_INFO_V1(scd2_registry_store_schema_change);
PG_FUNCTION_INFO_V1(scd2_registry_store_order_free);
PG_FUNCTION_INFO_V1(scd2_registry_store_stream);
PG_FUNCTION_INFO_V1(scd2_registry_store_inferred);

static void
require_owner(Oid relid)
{
	scd2_require_relation_owner(relid, NULL, "Only the owner of a dimension can register or unregister it.");
}

/*
 * What scd2.register refuses, checked again here: _registry_store is
 * callable by PUBLIC (register runs with its caller's rights), and a
 * registration stored without register must not be one register refuses
 * -- a temporary dimension or default staging table, or a staging table
 * the caller or the dimension's owner may not read.
 */
static void
require_storable(Oid dim, Oid stg)
{
	scd2_check_relkind(dim, true);
	if (!OidIsValid(stg))
		return;
	if (get_rel_persistence(stg) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("temporary table %s cannot be the registered staging table of %s",
						scd2_relation_display_name(stg), scd2_relation_display_name(dim)),
				 errdetail("scd2.apply_all reads the registered staging table in a session of its own, where a temporary table does not exist.")));
	if (pg_class_aclcheck(stg, GetUserId(), ACL_SELECT) != ACLCHECK_OK ||
		pg_class_aclcheck(stg, scd2_relation_owner(dim), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for staging table %s", scd2_relation_display_name(stg)),
				 errdetail("Registering a default staging table needs SELECT on it for the registering role and the dimension's owner.")));
}

Datum
scd2_registry_store(PG_FUNCTION_ARGS)
{
	static const Oid types[14] = {
		REGCLASSOID, NAMEARRAYOID, NAMEARRAYOID, NAMEARRAYOID, NAMEOID, NAMEOID,
		TEXTOID, REGCLASSOID, NAMEOID, NAMEOID, NAMEOID, NAMEOID, TEXTOID, NAMEOID
	};
	Oid			argtypes[14];
	Datum		values[14];
	char		nulls[14];

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	require_owner(PG_GETARG_OID(0));
	require_storable(PG_GETARG_OID(0), PG_ARGISNULL(7) ? InvalidOid : PG_GETARG_OID(7));

	for (int i = 0; i < 13; i++)
	{
		argtypes[i] = types[i];
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
	}
	argtypes[13] = NAMEOID;
	/* a name Datum points to NAMEDATALEN bytes: build one (not the C string) */
	values[13] = DirectFunctionCall1(namein, CStringGetDatum(GetUserNameFromId(GetUserId(), false)));
	nulls[13] = ' ';

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	scd2_exec_catalog(
		"INSERT INTO scd2.dimensions AS d (dimension, business_key, tracked, type1,"
		" effective_column, delete_column, mode, staging, valid_from_column, valid_to_column,"
		" is_current_column, surrogate_key_column, current_valid_to, registered_by)"
		" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
		" ON CONFLICT (dimension) DO UPDATE SET business_key = EXCLUDED.business_key,"
		" tracked = EXCLUDED.tracked, type1 = EXCLUDED.type1,"
		" effective_column = EXCLUDED.effective_column, delete_column = EXCLUDED.delete_column,"
		" mode = EXCLUDED.mode, staging = EXCLUDED.staging,"
		" valid_from_column = EXCLUDED.valid_from_column, valid_to_column = EXCLUDED.valid_to_column,"
		" is_current_column = EXCLUDED.is_current_column,"
		" surrogate_key_column = EXCLUDED.surrogate_key_column,"
		" current_valid_to = EXCLUDED.current_valid_to, registered_by = EXCLUDED.registered_by,"
		" registered_at = pg_catalog.now()",
		14, argtypes, values, nulls, false, SPI_OK_INSERT, "storing the registration");
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
scd2_registry_remove(PG_FUNCTION_ARGS)
{
	Oid			dim = PG_GETARG_OID(0);
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(dim)};
	bool		removed;

	require_owner(dim);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	removed = scd2_exec_catalog("DELETE FROM scd2.dimensions"
											   " WHERE dimension OPERATOR(pg_catalog.=) $1",
											   1, argtypes, values, NULL, false, SPI_OK_DELETE,
											   "removing the registration") > 0;
	SPI_finish();
	PG_RETURN_BOOL(removed);
}

/*
 * The change-log headers of the dimensions dropped are marked
 * dropped (0.4): their regclass would be dumped as a bare OID, which can
 * name another table after a restore, and scd2.revert and scd2.changes
 * refuse a dropped run's header.  An extension not yet updated to 0.4 has
 * no such column.
 */
static void
mark_dropped_runs(Datum dropped)
{
	Oid			argtypes[1] = {OIDARRAYOID};
	Datum		values[1] = {dropped};

	if (!scd2_installed("change_log_runs", "dimension_dropped_at"))
		return;
	scd2_exec_catalog("UPDATE scd2.change_log_runs r SET dimension_dropped_at = pg_catalog.now()"
					  " WHERE r.dimension_dropped_at IS NULL AND r.dimension OPERATOR(pg_catalog.=) ANY ($1)",
					  1, argtypes, values, NULL, false, SPI_OK_UPDATE, "marking the runs of dropped dimensions");
}

/*
 * The audit rows of the dimensions dropped are marked dropped (0.5): the
 * audit log's row security then shows them only to the role that ran
 * them, whatever table their OID or name comes to mean.
 */
static void
mark_dropped_audit_rows(Datum dropped)
{
	Oid			argtypes[1] = {OIDARRAYOID};
	Datum		values[1] = {dropped};

	if (!scd2_installed("audit_log", "dimension_dropped_at"))
		return;
	scd2_exec_catalog("UPDATE scd2.audit_log a SET dimension_dropped_at = pg_catalog.now()"
					  " WHERE a.dimension_dropped_at IS NULL AND a.dimension_oid IS NOT NULL"
					  "   AND a.dimension_oid OPERATOR(pg_catalog.=) ANY ($1)",
					  1, argtypes, values, NULL, false, SPI_OK_UPDATE, "marking the audit rows of dropped dimensions");
}

/*
 * The arrival memory (0.4) of dropped dimensions: a later table given the
 * same oid must not recall another table's events.  Absent while the
 * library is newer than the extension's scripts.  Only the dropped tables'
 * rows are looked up (arrival_memory_key_idx): every load drops its work
 * tables, and a scan of the whole memory would cost every load of every
 * dimension its size (40 ms at 170,000 rows).
 */
static void
forget_dropped_memory(Datum dropped)
{
	Oid			argtypes[1] = {OIDARRAYOID};
	Datum		values[1] = {dropped};

	if (!scd2_installed("arrival_memory", NULL))
		return;
	scd2_exec_catalog("DELETE FROM scd2.arrival_memory m WHERE m.dimension OPERATOR(pg_catalog.=) ANY ($1)",
					  1, argtypes, values, NULL, false, SPI_OK_DELETE, "forgetting dropped dimensions' remembered events");
}

/*
 * The dimensions that some of scd2's rows name but that no longer exist,
 * as a subquery over one column of oids: those that table's rows matching
 * where name in column (read through its index on it: arrival_memory_key_idx,
 * change_log_runs_live_dimension_idx, audit_log_live_dimension_idx) and
 * pg_class lacks.  A table is usually
 * dropped with the event trigger firing, and then its oid is in
 * pg_event_trigger_dropped_objects(); this finds the others (dropped
 * while event triggers did not fire: session_replication_role = replica,
 * single-user mode, the trigger disabled).  A loose scan of the index,
 * one probe per distinct dimension, each looked up in pg_class by oid:
 * every load fires the trigger when it drops its work tables, so this
 * must not read the table.
 */
static char *
vanished_dimensions_sql(const char *table, const char *column, const char *where)
{
	return psprintf("(WITH RECURSIVE d(dim) AS ("
					"  SELECT (SELECT CAST(t.%s AS pg_catalog.oid) FROM %s t WHERE %s"
					"           ORDER BY CAST(t.%s AS pg_catalog.oid) LIMIT 1)"
					"  UNION ALL"
					"  SELECT (SELECT CAST(t.%s AS pg_catalog.oid) FROM %s t WHERE %s"
					"             AND CAST(t.%s AS pg_catalog.oid) OPERATOR(pg_catalog.>) d.dim"
					"           ORDER BY CAST(t.%s AS pg_catalog.oid) LIMIT 1)"
					"    FROM d WHERE d.dim IS NOT NULL)"
					" SELECT d.dim FROM d WHERE d.dim IS NOT NULL AND NOT EXISTS"
					"  (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) d.dim OFFSET 0))",
					column, table, where, column, column, table, where, column, column);
}

/*
 * The tables whose runs and remembered events are to be forgotten: those
 * just dropped, and any other that scd2.arrival_memory, the live
 * change-log headers or the live audit rows still name (vanished_dimensions_sql), as an oid[]
 * (NULL: none).  Each part only where the installed objects have it.
 */
static Datum
dropped_tables(void)
{
	StringInfoData sql;
	Datum		dropped;
	bool		isnull;

	initStringInfo(&sql);
	appendStringInfoString(&sql,
						   "SELECT pg_catalog.array_agg(DISTINCT u.oid) FROM ("
						   " SELECT o.objid AS oid FROM pg_catalog.pg_event_trigger_dropped_objects() o"
						   "  WHERE o.classid OPERATOR(pg_catalog.=) CAST('pg_catalog.pg_class' AS pg_catalog.regclass)"
						   "    AND o.objsubid OPERATOR(pg_catalog.=) 0");
	if (scd2_installed("arrival_memory", NULL))
		appendStringInfo(&sql, " UNION ALL SELECT v.dim FROM %s v",
						 vanished_dimensions_sql("scd2.arrival_memory", "dimension", "true"));
	if (scd2_installed("change_log_runs", "dimension_dropped_at"))
		appendStringInfo(&sql, " UNION ALL SELECT v.dim FROM %s v",
						 vanished_dimensions_sql("scd2.change_log_runs", "dimension", "t.dimension_dropped_at IS NULL"));
	if (scd2_installed("audit_log", "dimension_dropped_at"))
		appendStringInfo(&sql, " UNION ALL SELECT v.dim FROM %s v",
						 vanished_dimensions_sql("scd2.audit_log", "dimension_oid",
												 "t.dimension_dropped_at IS NULL AND t.dimension_oid IS NOT NULL"));
	appendStringInfoString(&sql, ") u");
	scd2_exec_catalog(sql.data, 0, NULL, NULL, NULL, true, SPI_OK_SELECT, "listing the dropped tables");
	dropped = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? (Datum) 0 : datumCopy(dropped, false, -1);
}

/*
 * Called by the sql_drop event trigger: forget dimensions that no longer
 * exist, and default staging tables that no longer exist; mark the change
 * log runs and the audit rows and forget the remembered events of the
 * tables dropped.
 * No ownership check: it only removes rows about tables that are gone.
 */
Datum
scd2_registry_forget_dropped(PG_FUNCTION_ARGS)
{
	int64		removed;
	Datum		dropped;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	removed = (int64) scd2_exec_catalog(
		"DELETE FROM scd2.dimensions d WHERE NOT EXISTS"
		" (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) d.dimension)",
		0, NULL, NULL, NULL, false, SPI_OK_DELETE, "forgetting dropped dimensions");
	scd2_exec_catalog(
		"UPDATE scd2.dimensions d SET staging = NULL WHERE staging IS NOT NULL AND NOT EXISTS"
		" (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) d.staging)",
		0, NULL, NULL, NULL, false, SPI_OK_UPDATE, "forgetting dropped staging tables");
	dropped = dropped_tables();
	if (dropped != (Datum) 0)
	{
		forget_dropped_memory(dropped);
		mark_dropped_runs(dropped);
		mark_dropped_audit_rows(dropped);
	}
	SPI_finish();
	PG_RETURN_INT64(removed);
}

/*
 * The shape a dimension is registered with: its business key, validity,
 * is_current and surrogate key columns with their types and typmods (a
 * NULL type: the column is missing).  Loads and scd2.asof refuse to work
 * on a dimension whose columns no longer have it (config.c).  The upgrade
 * script scd2--0.2--0.3.sql fills the same columns with the same query.
 */
#define SHAPE_SQL \
	"(shape_columns, shape_types, shape_typmods) = (" \
	" SELECT pg_catalog.array_agg(u.c ORDER BY u.o)," \
	"        pg_catalog.array_agg(a.atttypid::pg_catalog.regtype ORDER BY u.o)," \
	"        pg_catalog.array_agg(a.atttypmod ORDER BY u.o)" \
	"   FROM pg_catalog.unnest(d.business_key OPERATOR(pg_catalog.||) ARRAY[d.valid_from_column," \
	"          d.valid_to_column, d.is_current_column, d.surrogate_key_column]) WITH ORDINALITY AS u(c, o)" \
	"   LEFT JOIN pg_catalog.pg_attribute a ON a.attrelid OPERATOR(pg_catalog.=) d.dimension" \
	"        AND a.attname OPERATOR(pg_catalog.=) u.c AND a.attnum OPERATOR(pg_catalog.>) 0" \
	"        AND NOT a.attisdropped" \
	"  WHERE u.c IS NOT NULL)"

/*
 * After scd2.register stored a registration (_registry_store, whose
 * arguments are 0.2's): what 0.3 adds to it -- the indexes and the
 * no_overlap exclusion constraint it created (NULL: none), by name:
 * indexes and constraints live with their table, and names, unlike OIDs,
 * are what pg_dump keeps -- the change detection ('values' or
 * 'timestamp'; the registry's CHECK refuses others), and the dimension's
 * shape.
 */
Datum
scd2_registry_store_more(PG_FUNCTION_ARGS)
{
	Oid			argtypes[4] = {REGCLASSOID, NAMEARRAYOID, NAMEOID, TEXTOID};
	Datum		values[4];
	char		nulls[4] = {' ', ' ', ' ', ' '};

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(3))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension, created_indexes and detect must not be NULL")));
	require_owner(PG_GETARG_OID(0));
	for (int i = 0; i < 4; i++)
	{
		values[i] = PG_ARGISNULL(i) ? (Datum) 0 : PG_GETARG_DATUM(i);
		nulls[i] = PG_ARGISNULL(i) ? 'n' : ' ';
	}
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	if (scd2_exec_catalog("UPDATE scd2.dimensions d SET created_indexes = $2,"
										 " no_overlap_constraint = $3, detect = $4, " SHAPE_SQL
										 " WHERE d.dimension OPERATOR(pg_catalog.=) $1",
										 4, argtypes, values, nulls, false, SPI_OK_UPDATE,
										 "storing the registration's indexes, constraint and detection") != 1)
		elog(ERROR, "scd2: dimension %s vanished from the registry while it was registered",
			 scd2_relation_display_name(PG_GETARG_OID(0)));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * One option of the registration register has just stored: SET column = value
 * (of type typid; NULL when isnull).  The caller is connected to SPI.
 */
static void
store_option(Oid dim_oid, const char *column, Oid typid, Datum value, bool isnull)
{
	Oid			argtypes[2] = {REGCLASSOID, typid};
	Datum		values[2] = {ObjectIdGetDatum(dim_oid), value};
	char		nulls[2] = {' ', isnull ? 'n' : ' '};

	if (scd2_exec_catalog(psprintf("UPDATE scd2.dimensions d SET %s = $2"
								   " WHERE d.dimension OPERATOR(pg_catalog.=) $1", column),
						  2, argtypes, values, nulls, false, SPI_OK_UPDATE,
						  psprintf("storing the registration's %s", column)) != 1)
		elog(ERROR, "scd2: dimension %s vanished from the registry while it was registered",
			 scd2_relation_display_name(dim_oid));
}

/*
 * After scd2.register stored a registration: the partial-extract guard
 * (0.4), the largest fraction of the current keys one load may close or
 * delete (NULL: no limit; register checked the range, the registry's
 * CHECK too).
 */
Datum
scd2_registry_store_guard(PG_FUNCTION_ARGS)
{
	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	require_owner(PG_GETARG_OID(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	store_option(PG_GETARG_OID(0), "max_close_fraction", FLOAT4OID,
				 PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1), PG_ARGISNULL(1));
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * scd2._registry_store_missing_columns(dimension, missing_columns): what a
 * load does with a dimension column its staging table lacks (0.4): 'error'
 * or 'carry_forward'.
 */
Datum
scd2_registry_store_missing_columns(PG_FUNCTION_ARGS)
{
	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	if (PG_ARGISNULL(1) ||
		(strcmp(text_to_cstring(PG_GETARG_TEXT_PP(1)), "error") != 0 &&
		 strcmp(text_to_cstring(PG_GETARG_TEXT_PP(1)), "carry_forward") != 0))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid missing_columns \"%s\"",
						PG_ARGISNULL(1) ? "NULL" : text_to_cstring(PG_GETARG_TEXT_PP(1))),
				 errhint("Use 'error' (a load whose staging table lacks a column of the dimension is refused) or 'carry_forward' (new versions keep the current version's value of a column the staging table lacks).")));
	require_owner(PG_GETARG_OID(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	store_option(PG_GETARG_OID(0), "missing_columns", TEXTOID, PG_GETARG_DATUM(1), false);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * scd2._registry_store_schema_change(dimension, on_schema_change): what a
 * load does when the staging table's columns differ from the dimension's
 * (0.4, load/schema.c): 'ignore', 'fail', 'append_new_columns' or
 * 'sync_all_columns'.
 */
Datum
scd2_registry_store_schema_change(PG_FUNCTION_ARGS)
{
	static const char *const options[] = {"ignore", "fail", "append_new_columns",
	"sync_all_columns"};
	char	   *value = PG_ARGISNULL(1) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(1));
	bool		valid = false;

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	for (int i = 0; value != NULL && i < lengthof(options); i++)
		valid |= strcmp(value, options[i]) == 0;
	if (!valid)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid on_schema_change \"%s\"", value ? value : "NULL"),
				 errhint("Use 'ignore' (staging columns the dimension lacks are not loaded, and named), 'fail' (any difference refuses the load), 'append_new_columns' (new staging columns are added to the dimension) or 'sync_all_columns' (also widened types widen the dimension).")));
	require_owner(PG_GETARG_OID(0));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	store_option(PG_GETARG_OID(0), "on_schema_change", TEXTOID, PG_GETARG_DATUM(1), false);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * scd2._registry_store_order_free(dimension, order_free) (0.4): an
 * order-free dimension (load/arrival.c) needs an effective column and
 * incremental mode (its events carry their own instants) and value
 * detection.  Its Type 1 columns (0.5), and the columns a load adds with
 * on_schema_change 'append_new_columns' or 'sync_all_columns' (0.5),
 * follow the latest event by effective time and sequence (load/stream.c).
 * NULL (0.5: register's default, for a dimension not registered before):
 * order-free when it can be and adds no columns (what such a load fills in
 * place is then the latest event's, no longer the last batch's: asked
 * for, not assumed).  Checked against the registration register has just
 * stored.
 */
Datum
scd2_registry_store_order_free(PG_FUNCTION_ARGS)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1];
	const char *why = NULL;
	bool		adds_columns = false;
	bool		order_free;

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	require_owner(PG_GETARG_OID(0));
	values[0] = PG_GETARG_DATUM(0);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	scd2_exec_catalog("SELECT d.effective_column IS NULL, d.mode OPERATOR(pg_catalog.<>) 'incremental',"
					  " d.detect OPERATOR(pg_catalog.<>) 'values',"
					  " d.on_schema_change IN ('append_new_columns', 'sync_all_columns')"
					  " FROM scd2.dimensions d WHERE d.dimension OPERATOR(pg_catalog.=) $1",
					  1, argtypes, values, NULL, true, SPI_OK_SELECT,
					  "checking the registration for order_free");
	if (SPI_processed == 1)
	{
		bool		isnull;

		if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)))
			why = "it has no effective_column: its events must carry their own instants";
		else if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)))
			why = "it is in snapshot mode: an extract is a state now, not a set of events";
		else if (DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)))
			why = "it detects changes by timestamp: every later instant would be a change";
		/* register stores on_schema_change first */
		adds_columns = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull));
	}
	order_free = PG_ARGISNULL(1) ? why == NULL && !adds_columns : PG_GETARG_BOOL(1);
	if (order_free && why)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimension %s cannot be order-free", scd2_relation_display_name(PG_GETARG_OID(0))),
				 errdetail("order_free needs an effective column, incremental mode and value detection; %s.", why),
				 errhint("Register it with order_free => false, or with an effective column in incremental mode and detect => 'values'.")));
	store_option(PG_GETARG_OID(0), "order_free", BOOLOID, BoolGetDatum(order_free), false);
	SPI_finish();
	PG_RETURN_VOID();
}

static List *text_array_to_list(Datum arr);

/*
 * The roles of a registration's columns register has just stored, for the
 * checks of the options stored after them: each column name with what it
 * is ("business key", "tracked", ...), and whether it is order-free.
 */
typedef struct StoredRoles
{
	List	   *names;			/* char * */
	List	   *roles;			/* const char * */
	bool		tracked_all;	/* tracked is NULL: every shared column */
	bool		order_free;
	char	   *effective_column;
} StoredRoles;

static void
add_roles(StoredRoles *r, HeapTuple tup, TupleDesc desc, int col, const char *role)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, col, &isnull);

	if (isnull)
		return;
	if (SPI_gettypeid(desc, col) == TEXTARRAYOID)
	{
		ListCell   *lc;

		foreach(lc, text_array_to_list(d))
		{
			r->names = lappend(r->names, lfirst(lc));
			r->roles = lappend(r->roles, (void *) role);
		}
		return;
	}
	r->names = lappend(r->names, SPI_getvalue(tup, desc, col));
	r->roles = lappend(r->roles, (void *) role);
}

static StoredRoles *
stored_roles(Oid dim_oid)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};
	StoredRoles *r = palloc0(sizeof(StoredRoles));
	static const char *const roles[] = {"a business key column", "a tracked column",
		"a Type 1 column", "the effective column", "the delete column", "the valid_from column",
	"the valid_to column", "the is_current column", "the surrogate key column"};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	if (scd2_exec_catalog("SELECT d.business_key::pg_catalog.text[], d.tracked::pg_catalog.text[],"
						  " d.type1::pg_catalog.text[], d.effective_column, d.delete_column,"
						  " d.valid_from_column, d.valid_to_column, d.is_current_column,"
						  " d.surrogate_key_column, d.order_free, d.tracked IS NULL"
						  " FROM scd2.dimensions d WHERE d.dimension OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, true, SPI_OK_SELECT,
						  "reading the registration just stored") != 1)
		elog(ERROR, "scd2: dimension %s vanished from the registry while it was registered",
			 scd2_relation_display_name(dim_oid));
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	for (int i = 0; i < lengthof(roles); i++)
		add_roles(r, tup, desc, i + 1, roles[i]);
	r->order_free = DatumGetBool(SPI_getbinval(tup, desc, 10, &isnull));
	r->tracked_all = DatumGetBool(SPI_getbinval(tup, desc, 11, &isnull));
	r->effective_column = SPI_getvalue(tup, desc, 4);
	return r;
}

/* The names of a name[] (a NULL element is refused). */
static List *
name_array_to_list(ArrayType *arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	List	   *out = NIL;

	deconstruct_array(arr, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
	{
		scd2_require_not_null(nulls[i], "an element of ignore_null_updates");
		out = lappend(out, pstrdup(NameStr(*DatumGetName(elems[i]))));
	}
	return out;
}

/* What the column name is in the registration, or NULL. */
static const char *
stored_role_of(const StoredRoles *r, const char *name)
{
	ListCell   *ln,
			   *lr;

	forboth(ln, r->names, lr, r->roles)
		if (strcmp((char *) lfirst(ln), name) == 0)
		return (const char *) lfirst(lr);
	return NULL;
}

static void
refuse_option(Oid dim_oid, const char *option, const char *value, const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid %s \"%s\" for dimension %s", option, value, scd2_relation_display_name(dim_oid)),
			 errdetail("%s", detail),
			 errhint("%s", hint)));
}

/*
 * scd2._registry_store_stream(dimension, sequence_column,
 * ignore_null_updates) (0.5, load/arrival.c): a change stream's options.
 * Both need an order-free dimension: what orders one key's events at one
 * instant, and what a partial update lays itself over, must hold across
 * batches, and only the arrival memory keeps the events for that.  The
 * sequence column is a staging column (checked by the load, which knows
 * the staging table) that is none of the registration's own columns; the
 * columns that ignore NULL updates are the dimension's tracked or Type 1
 * columns.  Checked against the registration register has just stored.
 */
Datum
scd2_registry_store_stream(PG_FUNCTION_ARGS)
{
	Oid			dim_oid;
	StoredRoles *r;
	char	   *seq = PG_ARGISNULL(1) ? NULL : NameStr(*PG_GETARG_NAME(1));
	List	   *ignore = NIL;
	ListCell   *lc;

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	dim_oid = PG_GETARG_OID(0);
	require_owner(dim_oid);
	if (!PG_ARGISNULL(2))
		ignore = name_array_to_list(PG_GETARG_ARRAYTYPE_P(2));
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	r = stored_roles(dim_oid);
	if ((seq != NULL || ignore != NIL) && !r->order_free)
		refuse_option(dim_oid, seq ? "sequence_column" : "ignore_null_updates",
					  seq ? seq : (char *) linitial(ignore),
					  "A sequence and partial updates need an order-free dimension: the order of one key's events, and the state a partial update lays itself over, must hold across batches, and the arrival memory keeps them.",
					  "Register it with order_free => true (the default for an effective column in incremental mode).");
	if (seq != NULL && stored_role_of(r, seq) != NULL)
		refuse_option(dim_oid, "sequence_column", seq,
					  psprintf("%s is %s of the registration; the sequence orders events and is none of those.",
							   quote_identifier(seq), stored_role_of(r, seq)),
					  "Name the staging column that holds the events' order (an LSN, an offset, a version counter).");
	foreach(lc, ignore)
	{
		char	   *col = lfirst(lc);
		const char *role = stored_role_of(r, col);
		AttrNumber	att = get_attnum(dim_oid, col);

		if (att == InvalidAttrNumber)
			refuse_option(dim_oid, "ignore_null_updates", col,
						  psprintf("%s has no column %s.", scd2_relation_display_name(dim_oid), quote_identifier(col)),
						  "List the dimension's tracked or Type 1 columns whose NULL means \"unchanged\".");
		if (seq != NULL && strcmp(col, seq) == 0)
			role = "the sequence column";
		if (role != NULL && strcmp(role, "a tracked column") != 0 && strcmp(role, "a Type 1 column") != 0)
			refuse_option(dim_oid, "ignore_null_updates", col,
						  psprintf("%s is %s; only tracked and Type 1 columns take partial updates.",
								   quote_identifier(col), role),
						  "List the dimension's tracked or Type 1 columns whose NULL means \"unchanged\".");
		if (role == NULL && !r->tracked_all)
			refuse_option(dim_oid, "ignore_null_updates", col,
						  psprintf("%s is neither tracked nor Type 1 in this registration.", quote_identifier(col)),
						  "List the dimension's tracked or Type 1 columns whose NULL means \"unchanged\".");
		for (ListCell *l2 = lnext(ignore, lc); l2 != NULL; l2 = lnext(ignore, l2))
			if (strcmp(col, (char *) lfirst(l2)) == 0)
				refuse_option(dim_oid, "ignore_null_updates", col,
							  psprintf("%s is listed twice.", quote_identifier(col)),
							  "List each column once.");
	}
	store_option(dim_oid, "sequence_column", NAMEOID, seq ? PG_GETARG_DATUM(1) : (Datum) 0, seq == NULL);
	store_option(dim_oid, "ignore_null_updates", NAMEARRAYOID,
				 PG_ARGISNULL(2) ? PointerGetDatum(construct_empty_array(NAMEOID)) : PG_GETARG_DATUM(2), false);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * scd2._registry_store_inferred(dimension, inferred_column) (0.5,
 * history/infer.c): the boolean column of the dimension that flags
 * inferred members, none of the registration's other columns (a load
 * clears it; it is never a change).
 */
Datum
scd2_registry_store_inferred(PG_FUNCTION_ARGS)
{
	Oid			dim_oid;
	char	   *col = PG_ARGISNULL(1) ? NULL : NameStr(*PG_GETARG_NAME(1));

	scd2_require_not_null(PG_ARGISNULL(0), "dimension");
	dim_oid = PG_GETARG_OID(0);
	require_owner(dim_oid);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	if (col != NULL)
	{
		StoredRoles *r = stored_roles(dim_oid);
		AttrNumber	att = get_attnum(dim_oid, col);
		const char *role = stored_role_of(r, col);

		if (att == InvalidAttrNumber)
			refuse_option(dim_oid, "inferred_column", col,
						  psprintf("%s has no column %s.", scd2_relation_display_name(dim_oid), quote_identifier(col)),
						  "Add a boolean column to flag inferred members (ALTER TABLE ... ADD COLUMN is_inferred boolean NOT NULL DEFAULT false), then register again.");
		if (get_atttype(dim_oid, att) != BOOLOID)
			refuse_option(dim_oid, "inferred_column", col,
						  psprintf("%s is of type %s, not boolean.", quote_identifier(col),
								   format_type_be(get_atttype(dim_oid, att))),
						  "Flag inferred members in a boolean column.");
		if (role != NULL)
			refuse_option(dim_oid, "inferred_column", col,
						  psprintf("%s is %s; the flag of inferred members is a column of its own.",
								   quote_identifier(col), role),
						  "Add a boolean column to flag inferred members and name it.");
	}
	store_option(dim_oid, "inferred_column", NAMEOID, col ? PG_GETARG_DATUM(1) : (Datum) 0, col == NULL);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * After a load changed a dimension's columns (load/schema.c: a widened
 * business key): the registered shape is the dimension's again, read from
 * pg_attribute by the query register uses.  The caller is connected to SPI.
 */
void
scd2_registry_refresh_shape(Oid dim_oid)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};

	if (scd2_exec_catalog("UPDATE scd2.dimensions d SET " SHAPE_SQL
						  " WHERE d.dimension OPERATOR(pg_catalog.=) $1",
						  1, argtypes, values, NULL, false, SPI_OK_UPDATE,
						  "storing the dimension's new shape") != 1)
		elog(ERROR, "scd2: dimension %s vanished from the registry during its load",
			 scd2_relation_display_name(dim_oid));
}

PG_FUNCTION_INFO_V1(scd2_choose_index_name);

/*
 * A name for a new index of a dimension: the table's name and the label,
 * cut to fit NAMEDATALEN (at a character boundary) and numbered when
 * taken -- core's own ChooseRelationName, as CREATE INDEX without a name
 * uses it.
 */
Datum
scd2_choose_index_name(PG_FUNCTION_ARGS)
{
	Oid			dim = PG_GETARG_OID(0);
	char	   *label = text_to_cstring(PG_GETARG_TEXT_PP(1));
	char	   *relname = get_rel_name(dim);
	char	   *name;

	if (relname == NULL)
		scd2_report_no_relation(dim);
	name = ChooseRelationName(relname, NULL, label, get_rel_namespace(dim), false);
	PG_RETURN_DATUM(DirectFunctionCall1(namein, CStringGetDatum(name)));
}

/* ---------- reads ---------- */

/*
 * The registry's shape columns for a SELECT list, or NULLs when the
 * installed extension's registry predates them (0.1 and 0.2: the library
 * is updated before ALTER EXTENSION scd2 UPDATE runs).
 */
static const char *
registry_shape_sql(void)
{
	if (scd2_installed("dimensions", "shape_columns"))
		return "shape_columns::pg_catalog.text[], shape_types::pg_catalog.oid[], shape_typmods";
	return "NULL::pg_catalog.text[], NULL::pg_catalog.oid[], NULL::pg_catalog.int4[]";
}

static List *
text_array_to_list(Datum arr)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	List	   *out = NIL;

	deconstruct_array(DatumGetArrayTypeP(arr), TEXTOID, -1, false,
					  TYPALIGN_INT, &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			out = lappend(out, TextDatumGetCString(elems[i]));
	return out;
}

static char *
spi_text_or_null(HeapTuple tup, TupleDesc desc, int col)
{
	return SPI_getvalue(tup, desc, col);
}

/* Read the registry row of a dimension, or report it is not registered. */
Scd2Registration *
scd2_registry_read(Oid dim_oid, const char *dim_name)
{
	Scd2Registration *reg = palloc0(sizeof(Scd2Registration));
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	int			rc;

	/*
	 * detect (0.3), max_close_fraction, missing_columns and
	 * on_schema_change (0.4), inferred_column, sequence_column and
	 * ignore_null_updates (0.5) are read
	 * through to_jsonb: a registry of an older installation, before ALTER
	 * EXTENSION scd2 UPDATE, has no such column and loads with value
	 * detection, no close limit, and refuses a staging table that lacks a
	 * column.  Not read-only: a load that changed the dimension's shape
	 * (load/schema.c) reads the registration it has just updated.
	 */
	rc = SPI_execute_with_args(
		psprintf("SELECT business_key::pg_catalog.text[], tracked::pg_catalog.text[],"
				 "       type1::pg_catalog.text[], effective_column, delete_column, mode,"
				 "       valid_from_column, valid_to_column, is_current_column,"
				 "       surrogate_key_column, current_valid_to, %s,"
				 "       COALESCE(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'detect', 'values'),"
				 "       CAST(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'max_close_fraction' AS pg_catalog.float8),"
				 "       COALESCE(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'missing_columns', 'error'),"
				 "       pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'on_schema_change',"
				 "       COALESCE(CAST(pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'order_free' AS pg_catalog.bool), false),"
				 "       %s,"
				 "       pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'inferred_column',"
				 "       pg_catalog.to_jsonb(d) OPERATOR(pg_catalog.->>) 'sequence_column',"
				 "       ARRAY(SELECT pg_catalog.jsonb_array_elements_text(COALESCE(pg_catalog.to_jsonb(d)"
				 "             OPERATOR(pg_catalog.->) 'ignore_null_updates', '[]')))"
				 "  FROM scd2.dimensions d WHERE dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
				 registry_shape_sql(),
				 scd2_installed("dimensions", "created_indexes") ?
				 "created_indexes::pg_catalog.text[]" : "NULL::pg_catalog.text[]"),
		1, argtypes, values, NULL, false, 1);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: reading the registry failed: %s",
			 SPI_result_code_string(rc));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table %s is not a registered scd2 dimension", dim_name),
				 errhint("Register it first, e.g. SELECT scd2.register('%s', ARRAY['business_key_column']).",
						 dim_name)));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	reg->business_key = text_array_to_list(SPI_getbinval(tup, desc, 1, &isnull));
	d = SPI_getbinval(tup, desc, 2, &isnull);
	reg->tracked_all = isnull;
	if (!isnull)
		reg->tracked = text_array_to_list(d);
	d = SPI_getbinval(tup, desc, 3, &isnull);
	if (!isnull)
		reg->type1 = text_array_to_list(d);
	reg->effective_column = spi_text_or_null(tup, desc, 4);
	reg->delete_column = spi_text_or_null(tup, desc, 5);
	reg->mode = spi_text_or_null(tup, desc, 6);
	reg->valid_from = spi_text_or_null(tup, desc, 7);
	reg->valid_to = spi_text_or_null(tup, desc, 8);
	reg->is_current = spi_text_or_null(tup, desc, 9);
	reg->surrogate_key = spi_text_or_null(tup, desc, 10);
	reg->current_valid_to = spi_text_or_null(tup, desc, 11);
	reg->shape_columns = SPI_getbinval(tup, desc, 12, &isnull);
	reg->has_shape = !isnull;
	if (reg->has_shape)
	{
		bool		n2,
					n3;

		reg->shape_columns = SPI_datumTransfer(reg->shape_columns, false, -1);
		reg->shape_types = SPI_datumTransfer(SPI_getbinval(tup, desc, 13, &n2), false, -1);
		reg->shape_typmods = SPI_datumTransfer(SPI_getbinval(tup, desc, 14, &n3), false, -1);
		reg->has_shape = !n2 && !n3;
	}
	reg->detect = spi_text_or_null(tup, desc, 15);
	d = SPI_getbinval(tup, desc, 16, &isnull);
	reg->max_close_fraction = isnull ? -1.0 : DatumGetFloat8(d);
	reg->carry_forward = strcmp(spi_text_or_null(tup, desc, 17), "carry_forward") == 0;
	/* NULL: a registry before 0.4 (the library is updated first) */
	reg->on_schema_change = spi_text_or_null(tup, desc, 18);
	reg->order_free = DatumGetBool(SPI_getbinval(tup, desc, 19, &isnull));
	d = SPI_getbinval(tup, desc, 20, &isnull);
	reg->created_indexes = isnull ? (Datum) 0 : SPI_datumTransfer(d, false, -1);
	/* 0.5's, read through to_jsonb: NULL and empty before the update */
	reg->inferred_column = spi_text_or_null(tup, desc, 21);
	reg->sequence_column = spi_text_or_null(tup, desc, 22);
	reg->ignore_null_updates = text_array_to_list(SPI_getbinval(tup, desc, 23, &isnull));
	return reg;
}

/*
 * The registered shape of dim_oid (shape[0..2]: columns, types, typmods;
 * (Datum) 0 each when it was registered before 0.3 kept shapes), or false
 * when it is not registered.  The caller is connected to SPI.
 */
bool
scd2_registry_read_shape(Oid dim_oid, Datum *shape)
{
	Oid			argtypes[1] = {OIDOID};
	Datum		values[1] = {ObjectIdGetDatum(dim_oid)};
	bool		isnull;

	if (scd2_exec_catalog(psprintf("SELECT %s FROM scd2.dimensions d"
								   " WHERE d.dimension OPERATOR(pg_catalog.=) $1::pg_catalog.regclass",
								   registry_shape_sql()),
						  1, argtypes, values, NULL, true, SPI_OK_SELECT,
						  "reading the registered shape") == 0)
		return false;
	for (int i = 0; i < 3; i++)
	{
		shape[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull);
		if (isnull)
		{
			shape[0] = shape[1] = shape[2] = (Datum) 0;
			break;
		}
		shape[i] = SPI_datumTransfer(shape[i], false, -1);
	}
	return true;
}

/* A list of names as a name[] Datum. */
static Datum
name_array(List *names)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(names), 1));
	ListCell   *lc;

	foreach(lc, names)
		elems[foreach_current_index(lc)] = DirectFunctionCall1(namein,
															   CStringGetDatum((char *) lfirst(lc)));
	return PointerGetDatum(construct_array(elems, list_length(names), NAMEOID, NAMEDATALEN,
										   false, TYPALIGN_CHAR));
}

/* A name, or a null. */
static Datum
name_or_null(const char *name, bool *isnull)
{
	*isnull = name == NULL;
	return name ? DirectFunctionCall1(namein, CStringGetDatum(name)) : (Datum) 0;
}

/*
 * What a run's change-log header copies of the registration a load used
 * (SCD2_REGISTRY_RUN_HEADER_COLS values, typed as scd2.change_log_runs'
 * key_columns name[], valid_from_column, valid_to_column,
 * is_current_column, surrogate_key_column name, the registered Type 1
 * columns name[], current_valid_to text), from the registration the load
 * read: the registry is not read again.
 */
void
scd2_registry_run_header(const Scd2Registration *reg, Datum *values, bool *nulls)
{
	values[0] = name_array(reg->business_key);
	nulls[0] = false;
	values[1] = name_or_null(reg->valid_from, &nulls[1]);
	values[2] = name_or_null(reg->valid_to, &nulls[2]);
	values[3] = name_or_null(reg->is_current, &nulls[3]);
	values[4] = name_or_null(reg->surrogate_key, &nulls[4]);
	values[5] = name_array(reg->type1);
	nulls[5] = false;
	nulls[6] = reg->current_valid_to == NULL;
	values[6] = nulls[6] ? (Datum) 0 : CStringGetTextDatum(reg->current_valid_to);
}

/*
 * The registration's columns that differ from those run run_id's change-log
 * header kept (a comma-separated list, "" none), and *current_valid_to the
 * registration's; NULL when the dimension is no longer registered.
 */
char *
scd2_registry_changed_since_run(int64 run_id, char **current_valid_to)
{
	Oid			argtypes[1] = {INT8OID};
	Datum		values[1] = {Int64GetDatum(run_id)};

	(void) scd2_exec_catalog(
		"SELECT pg_catalog.concat_ws(', ',"
		"         CASE WHEN d.business_key IS DISTINCT FROM r.key_columns THEN 'business_key' END,"
		"         CASE WHEN d.valid_from_column IS DISTINCT FROM r.valid_from_column THEN 'valid_from_column' END,"
		"         CASE WHEN d.valid_to_column IS DISTINCT FROM r.valid_to_column THEN 'valid_to_column' END,"
		"         CASE WHEN d.is_current_column IS DISTINCT FROM r.is_current_column THEN 'is_current_column' END,"
		"         CASE WHEN d.surrogate_key_column IS DISTINCT FROM r.surrogate_key_column THEN 'surrogate_key_column' END),"
		"       d.current_valid_to"
		"  FROM scd2.change_log_runs r JOIN scd2.dimensions d ON d.dimension OPERATOR(pg_catalog.=) r.dimension"
		" WHERE r.run_id OPERATOR(pg_catalog.=) $1",
		1, argtypes, values, NULL, false, SPI_OK_SELECT, "reading the registration");
	if (SPI_processed == 0)
		return NULL;
	*current_valid_to = scd2_spi_text(0, 2);
	return scd2_spi_text(0, 1);
}


/*
 * scd2.asof's registry query, prepared once per backend (the plan cache
 * revalidates it), and again when the registry has gained its shape
 * columns since (ALTER EXTENSION scd2 UPDATE in this session).
 */
static SPIPlanPtr
asof_registry_plan(void)
{
	static SPIPlanPtr registry_plan = NULL;
	static const char *registry_plan_shape = NULL;	/* its shape columns */
	Oid			argtypes[1] = {REGCLASSOID};
	const char *shape_sql = registry_shape_sql();

	if (registry_plan != NULL && strcmp(shape_sql, registry_plan_shape) != 0)
	{
		SPI_freeplan(registry_plan);
		registry_plan = NULL;
	}
	if (registry_plan == NULL)
	{
		SPIPlanPtr	plan;

		plan = SPI_prepare(psprintf("SELECT business_key, valid_from_column, valid_to_column,"
									" surrogate_key_column, %s"
									" FROM scd2.dimensions"
									" WHERE dimension OPERATOR(pg_catalog.=) $1",
									shape_sql),
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		registry_plan = plan;
		registry_plan_shape = shape_sql;
	}
	return registry_plan;
}

/*
 * The registry row scd2.asof needs (business key, validity and surrogate
 * key column names), copied into cxt; relname names the dimension in the
 * errors.  The dimension must still have the shape it was registered
 * with.  Without a row: false with missing_ok (a Citus worker, whose
 * registry is empty: asof/citus_route.c), else an error.
 */
bool
scd2_registry_read_asof(Oid relid, const char *relname, MemoryContext cxt,
						Scd2AsofRegistration *out, bool missing_ok)
{
	Datum		values[1];
	int			ret;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	Datum	   *names;
	int			nnames;
	MemoryContext oldcxt;

	values[0] = ObjectIdGetDatum(relid);
	memset(out, 0, sizeof(*out));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	ret = SPI_execute_plan(asof_registry_plan(), values, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan returned %s", SPI_result_code_string(ret));
	if (SPI_processed == 0 && missing_ok)
	{
		SPI_finish();
		return false;
	}
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not a registered scd2 dimension", relname),
				 errhint("Register it with scd2.register(...).")));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/* the dimension must still have the shape it was registered with */
	{
		bool		n1,
					n2,
					n3;
		Datum		cols = SPI_getbinval(tup, desc, 5, &n1);
		Datum		types = SPI_getbinval(tup, desc, 6, &n2);
		Datum		typmods = SPI_getbinval(tup, desc, 7, &n3);

		if (!n1 && !n2 && !n3)
			scd2_check_registered_shape(relid, relname, cols, types, typmods);
	}

	/* copy what the caller keeps into cxt */
	oldcxt = MemoryContextSwitchTo(cxt);

	d = SPI_getbinval(tup, desc, 1, &isnull);
	Assert(!isnull);
	deconstruct_array(DatumGetArrayTypeP(d), NAMEOID, NAMEDATALEN, false,
					  TYPALIGN_CHAR, &names, NULL, &nnames);
	if (nnames < 1 || nnames >= INDEX_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimension \"%s\" has an invalid business key in scd2.dimensions", relname),
				 errhint("Run scd2.register again to update the registration.")));
	out->nkeys = nnames;
	out->keys = palloc0(sizeof(char *) * nnames);
	for (int i = 0; i < nnames; i++)
		out->keys[i] = pstrdup(NameStr(*DatumGetName(names[i])));

	out->valid_from = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 2, &isnull))));
	out->valid_to = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 3, &isnull))));
	d = SPI_getbinval(tup, desc, 4, &isnull);
	if (!isnull)
		out->surrogate_key = pstrdup(NameStr(*DatumGetName(d)));

	MemoryContextSwitchTo(oldcxt);
	SPI_finish();
	return true;
}

/* Registered dimensions in a stable order (schema, then table name). */
Scd2Target *
scd2_registry_targets(int *ntargets)
{
	int			pin = scd2_pin_search_path();
	Scd2Target	   *targets;
	int			rc;

	rc = SPI_execute("SELECT d.dimension::pg_catalog.oid, d.staging::pg_catalog.oid,"
					 " pg_catalog.format('%I.%I', n.nspname, c.relname),"
					 " (SELECT pg_catalog.format('%I.%I', sn.nspname, s.relname)"
					 "    FROM pg_catalog.pg_class s"
					 "    JOIN pg_catalog.pg_namespace sn ON sn.oid OPERATOR(pg_catalog.=) s.relnamespace"
					 "   WHERE s.oid OPERATOR(pg_catalog.=) d.staging)"
					 " FROM scd2.dimensions d"
					 " JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) d.dimension"
					 " JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
					 " ORDER BY n.nspname, c.relname",
					 true, 0);
	scd2_unpin(pin);
	if (rc != SPI_OK_SELECT)
		elog(ERROR, "scd2: reading the registry failed: %s", SPI_result_code_string(rc));

	*ntargets = (int) SPI_processed;
	targets = palloc0(sizeof(Scd2Target) * Max(*ntargets, 1));
	for (int i = 0; i < *ntargets; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		targets[i].dim_oid = DatumGetObjectId(SPI_getbinval(tup, desc, 1, &isnull));
		d = SPI_getbinval(tup, desc, 2, &isnull);
		targets[i].stg_oid = isnull ? InvalidOid : DatumGetObjectId(d);
		targets[i].dim_name = SPI_getvalue(tup, desc, 3);
		targets[i].stg_name = SPI_getvalue(tup, desc, 4);
		if (targets[i].stg_name == NULL)
			targets[i].stg_oid = InvalidOid;
	}
	SPI_freetuptable(SPI_tuptable);
	return targets;
}
