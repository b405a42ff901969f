/*
 * registry.c -- writes to scd2.dimensions.
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
#include "utils/lsyscache.h"

PG_FUNCTION_INFO_V1(scd2_registry_store);
PG_FUNCTION_INFO_V1(scd2_registry_remove);
PG_FUNCTION_INFO_V1(scd2_registry_forget_dropped);
PG_FUNCTION_INFO_V1(scd2_registry_store_more);
PG_FUNCTION_INFO_V1(scd2_choose_index_name);

static void
require_owner(Oid relid)
{
	if (!scd2_relation_ownercheck(relid, GetUserId()))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("must be owner of table %s", scd2_relation_display_name(relid)),
				 errhint("Only the owner of a dimension can register or unregister it.")));
}

/* Run registry SQL as the extension owner. */
static int
exec_as_owner(const char *sql, int nargs, Oid *argtypes, Datum *values,
			  const char *nulls)
{
	Oid			save_userid;
	int			save_sec;
	int			rc;
	int			pin = scd2_pin_search_path();

	GetUserIdAndSecContext(&save_userid, &save_sec);
	SetUserIdAndSecContext(scd2_extension_owner(), save_sec | SECURITY_LOCAL_USERID_CHANGE);
	rc = SPI_execute_with_args(sql, nargs, argtypes, values, nulls, false, 0);
	SetUserIdAndSecContext(save_userid, save_sec);
	scd2_unpin(pin);
	return rc;
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
	int			rc;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("dimension must not be NULL")));
	require_owner(PG_GETARG_OID(0));

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
	rc = exec_as_owner(
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
		14, argtypes, values, nulls);
	if (rc != SPI_OK_INSERT)
		elog(ERROR, "scd2: storing the registration failed: %s", SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
scd2_registry_remove(PG_FUNCTION_ARGS)
{
	Oid			dim = PG_GETARG_OID(0);
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(dim)};
	int			rc;
	bool		removed;

	require_owner(dim);
	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	rc = exec_as_owner("DELETE FROM scd2.dimensions WHERE dimension OPERATOR(pg_catalog.=) $1",
					   1, argtypes, values, NULL);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "scd2: removing the registration failed: %s", SPI_result_code_string(rc));
	removed = SPI_processed > 0;
	SPI_finish();
	PG_RETURN_BOOL(removed);
}

/*
 * Called by the sql_drop event trigger: forget dimensions that no longer
 * exist, and default staging tables that no longer exist.  No ownership
 * check: it only removes rows about tables that are gone.
 */
Datum
scd2_registry_forget_dropped(PG_FUNCTION_ARGS)
{
	int			rc;
	int64		removed;

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "scd2: SPI_connect failed");
	rc = exec_as_owner("DELETE FROM scd2.dimensions d WHERE NOT EXISTS"
					   " (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) d.dimension)",
					   0, NULL, NULL, NULL);
	if (rc != SPI_OK_DELETE)
		elog(ERROR, "scd2: forgetting dropped dimensions failed: %s", SPI_result_code_string(rc));
	removed = (int64) SPI_processed;
	rc = exec_as_owner("UPDATE scd2.dimensions d SET staging = NULL WHERE staging IS NOT NULL AND NOT EXISTS"
					   " (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) d.staging)",
					   0, NULL, NULL, NULL);
	if (rc != SPI_OK_UPDATE)
		elog(ERROR, "scd2: forgetting dropped staging tables failed: %s", SPI_result_code_string(rc));
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
	int			rc;

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
	rc = exec_as_owner("UPDATE scd2.dimensions d SET created_indexes = $2,"
					   " no_overlap_constraint = $3, detect = $4, " SHAPE_SQL
					   " WHERE d.dimension OPERATOR(pg_catalog.=) $1",
					   4, argtypes, values, nulls);
	if (rc != SPI_OK_UPDATE || SPI_processed != 1)
		elog(ERROR, "scd2: storing the registration's indexes, constraint and detection failed: %s",
			 SPI_result_code_string(rc));
	SPI_finish();
	PG_RETURN_VOID();
}

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
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", dim)));
	name = ChooseRelationName(relname, NULL, label, get_rel_namespace(dim), false);
	PG_RETURN_DATUM(DirectFunctionCall1(namein, CStringGetDatum(name)));
}
