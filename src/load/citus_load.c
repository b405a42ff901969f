/*
 * citus_load.c -- a load whose dimension or staging table is a Citus
 * table (citus/detect.c tells): the same steps as on PostgreSQL, with two
 * differences, both chosen here from the catalog at load time.
 *
 *   Reads.  Citus plans a join of a distributed or reference table with
 *   the load's temporary work tables only in simple shapes (no correlated
 *   subqueries, no outer side of a join that is local), and a MERGE into a
 *   Citus table not at all from a local source.  So before validation the
 *   load copies what it reads into two more temporary tables, the images
 *   (worktable.h): the staging rows, and the dimension's versions of the
 *   staged keys (every version of them; in snapshot mode the whole
 *   dimension, whose absent current keys are closed).  Classification,
 *   the timeline, the metrics and the change log then run unchanged on
 *   the coordinator against the images (cfg->stg_sql / cfg->dim_sql name
 *   them; LoadState.dim_table_sql keeps the dimension itself).
 *
 *   Write.  Instead of the one MERGE: the closes (every update copy of
 *   the change table) as one UPDATE, then the new versions as one INSERT
 *   ... SELECT, in the load's transaction; Citus runs each on every shard
 *   it touches and commits the transaction with two-phase commit when it
 *   wrote on more than one node.  A distributed dimension is updated FROM
 *   the change table, which Citus ships to the workers; a reference
 *   dimension refuses a local table in UPDATE ... FROM, so its closes come
 *   as arrays (one parameter per column, unnest).  An order-free load
 *   (arrival.c) first deletes the versions it supersedes ('remove'
 *   copies, the same two ways) and its UPDATE also sets valid_from (an
 *   'extend' copy moves it earlier).  The processed counts
 *   must add up to the classified writes, as the MERGE's must.
 *
 * Shapes: a dimension distributed by hash on one of its business key
 * columns (every version of a key on one shard, so the current-row and
 * as-of indexes stay unique), or a reference table; any other Citus
 * table is refused before anything is written.  The staging table may be
 * local, reference or distributed, co-located or not, or a view: a Citus
 * table or a view is read once, into its image.
 */
#include "scd2.h"

#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"
#include "citus/citus.h"

static void fill_dimension_image(LoadState *st);

/* Refuse a Citus dimension scd2 cannot load as one unit per key. */
static void
check_dimension_shape(const Scd2Config *cfg, const Scd2CitusTable *t)
{
	StringInfoData keys;

	initStringInfo(&keys);
	scd2_append_cols(&keys, cfg->keys, cfg->nkeys, NULL);
	if (t->kind == SCD2_CITUS_DISTRIBUTED)
	{
		const char *col = get_attname(cfg->dim_oid, t->distcol, false);

		for (int i = 0; i < cfg->nkeys; i++)
			if (strcmp(cfg->keys[i].name, col) == 0)
				return;
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dimension %s is distributed by column \"%s\", which is not part of its business key",
						cfg->dim_name, col),
				 errdetail("A load closes and opens the versions of a key together, and the current-row and as-of indexes are unique per key: every version of a key must live on one shard, so the distribution column must be a business key column (%s). Nothing was loaded.",
						   keys.data),
				 errhint("Distribute the dimension by its business key (SELECT undistribute_table('%s'); SELECT create_distributed_table('%s', '%s');), or make it a reference table.",
						 cfg->dim_name, cfg->dim_name, cfg->keys[0].name)));
	}
	if (t->kind == SCD2_CITUS_OTHER)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("dimension %s is a %s table, which scd2 cannot load", cfg->dim_name,
						scd2_citus_kind_name(t)),
				 errdetail("On Citus scd2 loads a dimension distributed by hash on a business key column (%s) or a reference table. Nothing was loaded.",
						   keys.data),
				 errhint("Distribute the dimension with create_distributed_table('%s', '%s'), or make it a reference table with create_reference_table('%s').",
						 cfg->dim_name, cfg->keys[0].name, cfg->dim_name)));
}

/*
 * Before the load's reads (and before the security-restricted part, where
 * no temporary table can be created): which write step this load takes,
 * and the empty images it reads instead of Citus tables.  Returns whether
 * the load goes the Citus way.
 */
bool
scd2_citus_prepare(LoadState *st, Scd2Config *cfg)
{
	Scd2CitusTable dim;
	Scd2CitusTable stg;
	bool		copy_stg;

	st->citus = scd2_citus_table(cfg->dim_oid, &dim);
	st->stg_citus = scd2_citus_table(cfg->stg_oid, &stg);
	st->dim_table_sql = cfg->dim_sql;
	if (st->citus == SCD2_CITUS_NONE && st->stg_citus == SCD2_CITUS_NONE)
		return false;
	/* a view may read Citus tables: copied as well */
	copy_stg = st->stg_citus != SCD2_CITUS_NONE || get_rel_relkind(cfg->stg_oid) == RELKIND_VIEW;
	if (st->citus != SCD2_CITUS_NONE)
	{
		check_dimension_shape(cfg, &dim);
		scd2_exec_work(psprintf("CREATE TEMP TABLE %s (LIKE %s) ON COMMIT DROP", DIM_IMAGE, cfg->dim_sql),
					  SPI_OK_UTILITY, "creating the dimension's image");
		cfg->dim_sql = DIM_IMAGE;
	}
	/*
	 * A staging table the workers can join where the dimension's shards
	 * are -- a reference table, or a table distributed on the same column
	 * and co-located -- filters the dimension's image there (measured on a
	 * 1M-key dimension, 32 shards: 1.2-1.5 s instead of 3.0-3.7 s for
	 * shipping 200k staged keys to every shard).  Then the staging table
	 * is read twice (this and its image), and Citus has no snapshot across
	 * statements: writes to it wait until the load ends (SHARE lock; like
	 * the dimension's lock, taken on the coordinator).
	 */
	if (st->citus == SCD2_CITUS_DISTRIBUTED &&
		(stg.kind == SCD2_CITUS_REFERENCE ||
		 (stg.kind == SCD2_CITUS_DISTRIBUTED && stg.colocationid == dim.colocationid &&
		  strcmp(get_attname(cfg->stg_oid, stg.distcol, false),
				 get_attname(cfg->dim_oid, dim.distcol, false)) == 0)))
	{
		LockRelationOid(cfg->stg_oid, ShareLock);
		st->stg_join_sql = cfg->stg_sql;
	}
	if (copy_stg)
	{
		st->stg_table_sql = cfg->stg_sql;
		/* the image copies every column: none of an untrusted type (trust.c) */
		scd2_trust_staging_columns(cfg->stg_oid, cfg->dim_oid, cfg->owner, cfg->stg_name,
								   cfg->dim_name);
		scd2_exec_work(psprintf("CREATE TEMP TABLE %s (LIKE %s) ON COMMIT DROP", STG_IMAGE, cfg->stg_sql),
					  SPI_OK_UTILITY, "creating the staging table's image");
		cfg->stg_sql = STG_IMAGE;
	}
	return true;
}

/*
 * Fill the images: the staging rows, then the dimension's versions of the
 * staged keys (the whole dimension in snapshot mode), one read of the
 * dimension on every shard; the load reads nothing else from the Citus
 * tables before its write.
 */
void
scd2_citus_fill_images(LoadState *st)
{
	if (st->stg_table_sql != NULL)
		scd2_load_exec(st, psprintf("INSERT INTO %s SELECT * FROM %s", STG_IMAGE, st->stg_table_sql),
					   SPI_OK_INSERT, "copying the staging table");
	if (st->citus != SCD2_CITUS_NONE)
		fill_dimension_image(st);

	/*
	 * The load's read-only statements (the validation) run on its snapshot
	 * as it is: let it see the images, which this transaction just wrote
	 * (what SPI does for the other statements).  The snapshot is the
	 * load's own registered copy.
	 */
	CommandCounterIncrement();
	st->snap->curcid = GetCurrentCommandId(false);
}

/* The dimension's versions of the staged keys (snapshot mode: all), indexed. */
static void
fill_dimension_image(LoadState *st)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s SELECT d.* FROM %s d", DIM_IMAGE, st->dim_table_sql);
	if (!cfg->snapshot)
	{
		appendStringInfoString(&sql, " WHERE (");
		scd2_append_cols(&sql, cfg->keys, cfg->nkeys, "d.");
		appendStringInfoString(&sql, ") IN (SELECT ");
		scd2_append_cols(&sql, cfg->keys, cfg->nkeys, "s.");
		appendStringInfo(&sql, " FROM %s s)", st->stg_join_sql ? st->stg_join_sql : cfg->stg_sql);
	}
	scd2_load_exec(st, sql.data, SPI_OK_INSERT, "copying the dimension's versions of the staged keys");
	st->dim_rows = (double) SPI_processed;

	/* the reads probe it by key and valid_from, as the as-of index */
	resetStringInfo(&sql);
	appendStringInfo(&sql, "CREATE INDEX ON %s (", DIM_IMAGE);
	scd2_append_cols(&sql, cfg->keys, cfg->nkeys, NULL);
	appendStringInfo(&sql, ", %s)", cfg->vf.ident);
	scd2_load_exec(st, sql.data, SPI_OK_UTILITY, "indexing the dimension's image");
	scd2_load_exec(st, "ANALYZE " DIM_IMAGE, SPI_OK_UTILITY, "analyzing the dimension's image");
}

/* One column of the closes: "col", or "agg(s.col)" when aggregated. */
static void
append_close_col(StringInfo buf, const char *agg, const char *col, bool first)
{
	if (agg != NULL)
		appendStringInfo(buf, "%s%s(s.%s)", first ? "" : ", ", agg, col);
	else
		appendStringInfo(buf, "%s%s", first ? "" : ", ", col);
}

/*
 * The update copies' columns as the UPDATE and DELETE read them: keys,
 * _tvf, _vt, _cur, _set_y, Type 1, and for an order-free load _vf (each
 * wrapped in agg when given).
 */
static void
append_close_cols(StringInfo buf, const Scd2Config *cfg, const char *agg)
{
	for (int i = 0; i < cfg->nkeys; i++)
		append_close_col(buf, agg, cfg->keys[i].ident, i == 0);
	append_close_col(buf, agg, X("`_tvf"), false);
	append_close_col(buf, agg, X("`_vt"), false);
	append_close_col(buf, agg, X("`_cur"), false);
	append_close_col(buf, agg, X("`_set_y"), false);
	for (int i = 0; i < cfg->ntype1; i++)
		append_close_col(buf, agg, cfg->type1[i].ident, false);
	if (cfg->order_free)
		append_close_col(buf, agg, X("`_vf"), false);
}

/*
 * The update copies the UPDATE writes (closes, shortenings, Type 1 and,
 * order-free, extensions), and those the DELETE writes (an order-free
 * load's superseded versions, arrival.c), as conditions on alias s.
 */
#define CLOSE_COPIES	"s.`_tvf IS NOT NULL AND s.`_action <> " WT_ACT_REMOVE
#define REMOVE_COPIES	"s.`_tvf IS NOT NULL AND s.`_action = " WT_ACT_REMOVE

/* "[cond AND] the key and valid_from of t are the update copy's target" */
static void
append_target(StringInfo buf, const Scd2Config *cfg, const char *cond)
{
	if (cond != NULL)
		appendStringInfo(buf, "%s AND ", X(cond));
	scd2_append_key_join(buf, cfg, "t", "s");
	appendStringInfo(buf, X(" AND t.%s %s s.`_tvf"), cfg->vf.ident, cfg->vf.eqop_sql);
}

/*
 * UPDATE <dimension> t SET <as the MERGE's> FROM <source, alias s>
 * WHERE [cond AND] the key and valid_from of t are the update copy's
 * target.
 */
static char *
sql_close(const LoadState *st, const char *source, const char *cond)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "UPDATE %s t SET ", st->dim_table_sql);
	scd2_append_update_set(&buf, cfg, SCD2_LOAD_MOVES(st));
	appendStringInfo(&buf, " FROM %s WHERE ", source);
	append_target(&buf, cfg, cond);
	return buf.data;
}

/* DELETE FROM <dimension> t USING <source, alias s> WHERE [cond AND] <target>. */
static char *
sql_remove(const LoadState *st, const char *source, const char *cond)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "DELETE FROM %s t USING %s WHERE ", st->dim_table_sql, source);
	append_target(&buf, st->cfg, cond);
	return buf.data;
}

/* How one kind of update copy is written: its statement, copies, result. */
typedef struct CitusWriteStep
{
	char	   *(*build) (const LoadState *st, const char *source, const char *cond);
	const char *copies;			/* CLOSE_COPIES, REMOVE_COPIES */
	int			expected;		/* SPI_OK_UPDATE, SPI_OK_DELETE */
	const char *what;
} CitusWriteStep;

static const CitusWriteStep close_step = {sql_close, CLOSE_COPIES, SPI_OK_UPDATE, "closing versions"};
static const CitusWriteStep remove_step = {sql_remove, REMOVE_COPIES, SPI_OK_DELETE,
"removing superseded versions"};

/*
 * The update copies of one step on a reference dimension: as one array
 * per column (parameters $2...), which the statement joins as ROWS FROM
 * their unnests.  Returns the rows it wrote.
 */
static int64
write_from_arrays(LoadState *st, const CitusWriteStep *step)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData sql;
	StringInfoData source;
	int			n;
	Oid		   *types;
	Datum	   *args;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.count(*), ");
	append_close_cols(&sql, cfg, "pg_catalog.array_agg");
	appendStringInfo(&sql, " FROM %s s WHERE %s", CHG_TABLE, X(step->copies));
	scd2_load_exec(st, sql.data, SPI_OK_SELECT, "collecting the update copies");
	if (scd2_spi_int8(0, 1) == 0)
		return 0;

	n = SPI_tuptable->tupdesc->natts - 1;
	types = palloc(sizeof(Oid) * n);
	args = palloc(sizeof(Datum) * n);
	initStringInfo(&source);
	appendStringInfoString(&source, "ROWS FROM (");
	for (int i = 0; i < n; i++)
	{
		bool		isnull;
		Datum		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 2, &isnull);

		types[i] = SPI_gettypeid(SPI_tuptable->tupdesc, i + 2);
		args[i] = datumCopy(d, false, -1);
		appendStringInfo(&source, "%spg_catalog.unnest($%d)", i ? ", " : "", i + 2);
	}
	appendStringInfoString(&source, ") AS s(");
	append_close_cols(&source, cfg, NULL);
	appendStringInfoString(&source, ")");
	scd2_load_exec_args(st, step->build(st, source.data, NULL), n, types, args, step->expected,
						step->what);
	return (int64) SPI_processed;
}

/*
 * One step's update copies: a distributed dimension is written FROM the
 * change table (which Citus ships to the workers), a reference one from
 * arrays.  Returns the rows it wrote.
 */
static int64
write_step(LoadState *st, const CitusWriteStep *step)
{
	if (st->citus == SCD2_CITUS_REFERENCE)
		return write_from_arrays(st, step);
	scd2_load_exec(st, step->build(st, psprintf("%s s", CHG_TABLE), step->copies), step->expected,
				   step->what);
	return (int64) SPI_processed;
}

/*
 * Step 5 on Citus: the closes, then the new versions.  When the caller
 * wants the change feed, or the change log is kept, the written versions
 * are read back into the dimension's image, where scd2_read_feed and the
 * change log (written after this, history/changelog.c) find their surrogate keys.
 * Returns false: the feed is read afterwards, as before PostgreSQL 17.
 */
bool
scd2_citus_write(LoadState *st, int64 total_changes, bool want_feed)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData sql;
	int64		written;

	/*
	 * An order-free load's superseded versions go first, so that no
	 * version it moves or opens meets one in the unique indexes (as in the
	 * MERGE, write.c).
	 */
	written = cfg->order_free ? write_step(st, &remove_step) : 0;
	written += write_step(st, &close_step);

	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s ", st->dim_table_sql);
	scd2_append_insert_cols(&sql, cfg, InvalidOid);
	appendStringInfoString(&sql, " SELECT ");
	scd2_append_insert_values(&sql, cfg, InvalidOid);
	appendStringInfo(&sql, X(" FROM %s s WHERE s.`_tvf IS NULL"), CHG_TABLE);
	scd2_load_exec(st, sql.data, SPI_OK_INSERT, "inserting versions");
	written += (int64) SPI_processed;

	if (written != total_changes)
		scd2_report_unexpected_writes(cfg, written, total_changes, "shards");

	if (cfg->sk && (want_feed || scd2_change_log))
	{
		resetStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s SELECT d.* FROM %s d WHERE (", DIM_IMAGE, st->dim_table_sql);
		scd2_append_cols(&sql, cfg->keys, cfg->nkeys, "d.");
		appendStringInfo(&sql, ", d.%s) IN (SELECT ", cfg->vf.ident);
		scd2_append_cols(&sql, cfg->keys, cfg->nkeys, "s.");
		appendStringInfo(&sql, X(", s.`_vf FROM %s s WHERE s.`_tvf IS NULL)"), CHG_TABLE);
		scd2_load_exec(st, sql.data, SPI_OK_INSERT, "reading back the written versions");
	}
	return false;
}
