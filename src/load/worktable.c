/*
 * worktable.c -- the load's work tables: their names (worktable.h), their
 * CREATE statements, the change table's INSERT column list, and dropping
 * them.  See worktable.h and docs/ARCHITECTURE.md for what each holds.
 */
#include "scd2.h"

#include "executor/spi.h"
#include "utils/guc.h"

#include "common/common.h"
#include "load/worktable.h"

static const WorkColumn keys_cols[] = {
	{"`_n", WT_INT8},
	{"`_snap", WT_BOOL},
};

static const WorkColumn changes_cols[] = {
	{"`_action", WT_TEXT},
	{"`_origin", WT_CHAR},
	{"`_counts", WT_BOOL},
	{"`_tvf", WT_VF},
	{"`_sk", WT_INT8},
	{"`_vf", WT_VF},
	{"`_vt", WT_VT},
	{"`_cur", WT_BOOL},
	{"`_set_y", WT_BOOL},
};

static const WorkColumn points_cols[] = {
	{"`_t", WT_VF},
	{"`_prio", WT_INT4},
	{"`_present", WT_BOOL},
	{"`_ovt", WT_VT},
	{"`_sk", WT_INT8},
	{"`_stg", WT_BOOL},
};

static const WorkColumn completed_cols[] = {
	{"`_sk", WT_INT8},
	{"`_vf", WT_VF},
	{"`_vt", WT_VT},
};

const WorkTable scd2_wt_keys = {KEYS_TABLE, keys_cols, lengthof(keys_cols), false};
const WorkTable scd2_wt_changes = {CHG_TABLE, changes_cols, lengthof(changes_cols), true};
const WorkTable scd2_wt_points = {PTS_TABLE, points_cols, lengthof(points_cols), true};
const WorkTable scd2_wt_completed = {CMP_TABLE, completed_cols, lengthof(completed_cols), false};

static const char *
work_type_sql(const Scd2Config *cfg, WorkType type)
{
	switch (type)
	{
		case WT_TEXT:
			return "pg_catalog.text";
		case WT_CHAR:
			return "pg_catalog.\"char\"";
		case WT_BOOL:
			return "pg_catalog.bool";
		case WT_INT4:
			return "pg_catalog.int4";
		case WT_INT8:
			return "pg_catalog.int8";
		case WT_VF:
			return cfg->vf.type_sql;
		case WT_VT:
			return cfg->vt.type_sql;
		case WT_SEQ:
			return cfg->seq_type_sql ? cfg->seq_type_sql : "pg_catalog.int4";
	}
	elog(ERROR, "unexpected work table column type %d", (int) type);
	return NULL;				/* keep compiler quiet */
}

/* CREATE TEMP TABLE of a work table: its own columns, keys[, payload]. */
char *
scd2_sql_create_work_table(const Scd2Config *cfg, const WorkTable *wt)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, "CREATE TEMP TABLE %s (", wt->table);
	for (int i = 0; i < wt->ncols; i++)
		appendStringInfo(&buf, "%s%s %s", i > 0 ? ", " : "",
						 scd2_expand_names(cfg, wt->cols[i].name),
						 work_type_sql(cfg, wt->cols[i].type));
	scd2_append_col_defs(&buf, cfg->keys, cfg->nkeys);
	if (wt->payload)
	{
		scd2_append_col_defs(&buf, cfg->tracked, cfg->ntracked);
		scd2_append_col_defs(&buf, cfg->type1, cfg->ntype1);
		scd2_append_col_defs(&buf, cfg->other, cfg->nother);
	}
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

/*
 * "INSERT INTO table (own columns, keys[, payload]" -- the column list of
 * a work table in its spec's order (the payload only with with_payload);
 * the caller closes the parenthesis.
 */
void
scd2_append_work_insert(StringInfo buf, const Scd2Config *cfg, const WorkTable *wt,
						const char *table, bool with_payload)
{
	appendStringInfo(buf, "INSERT INTO %s (", table);
	for (int i = 0; i < wt->ncols; i++)
		appendStringInfo(buf, "%s%s", i > 0 ? ", " : "", scd2_expand_names(cfg, wt->cols[i].name));
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, NULL);
	if (wt->payload && with_payload)
		scd2_append_payload_cols(buf, cfg, NULL);
}

/* Drop the temporary work tables (quietly: the general path's may not exist). */
void
scd2_drop_work_tables(void)
{
	int			nest = NewGUCNestLevel();

	scd2_set_local("client_min_messages", "warning");
	scd2_exec_work("DROP TABLE IF EXISTS " KEYS_TABLE ", " CHG_TABLE ", " PTS_TABLE ", " WIN_TABLE
				  ", " CMP_TABLE ", " DIM_IMAGE ", " STG_IMAGE,
				  SPI_OK_UTILITY, "dropping work tables");
	AtEOXact_GUC(true, nest);
}

/* Temporary work tables of a load. */
void
scd2_create_work_tables(const Scd2Config *cfg)
{
	scd2_exec_work(scd2_sql_create_work_table(cfg, &scd2_wt_keys), SPI_OK_UTILITY, "creating the key table");
	scd2_exec_work(scd2_sql_create_work_table(cfg, &scd2_wt_changes), SPI_OK_UTILITY, "creating the change table");
}

/*
 * The table of the versions a load completes in place (complete.c), which
 * its change feed shows (write.c): for scd2.merge on a dimension with an
 * inferred_column, created with the others, before the load's
 * security-restricted operation (which refuses CREATE TEMP TABLE).
 */
void
scd2_create_completed_table(const Scd2Config *cfg)
{
	scd2_exec_work(scd2_sql_create_work_table(cfg, &scd2_wt_completed), SPI_OK_UTILITY,
				   "creating the completion table");
}
