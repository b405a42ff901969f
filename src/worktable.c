/*
 * worktable.c -- the load's work tables: their names (worktable.h), their
 * CREATE statements, the change table's INSERT column list, and dropping
 * them.  See worktable.h and docs/ARCHITECTURE.md for what each holds.
 */
#include "scd2.h"


#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "nodes/parsenodes.h"
#include "fmgr.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "load.h"
#include "sqlbuild.h"

/*
 * "INSERT INTO chg (_action, ..., keys[, payload]" -- the column list of
 * the change table; the caller closes the parenthesis.
 */
void
scd2_append_changes_insert(StringInfo buf, const Scd2Config *cfg, const char *chg,
					  bool payload)
{
	appendStringInfo(buf,
					 X("INSERT INTO %s (`_action, `_origin, `_counts, `_tvf, `_sk, `_vf, `_vt, `_cur, `_set_y"),
					 chg);
	scd2_append_more_cols(buf, cfg->keys, cfg->nkeys, NULL);
	if (payload)
		scd2_append_payload_cols(buf, cfg, NULL);
}

/* ---------- temporary tables ---------- */

char *
scd2_sql_create_keys(const Scd2Config *cfg, const char *keys)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf, X("CREATE TEMP TABLE %s (`_n pg_catalog.int8, `_snap pg_catalog.bool"), keys);
	scd2_append_col_defs(&buf, cfg->keys, cfg->nkeys);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

char *
scd2_sql_create_changes(const Scd2Config *cfg, const char *chg)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf,
					 X("CREATE TEMP TABLE %s (`_action pg_catalog.text, `_origin pg_catalog.\"char\","
					 " `_counts pg_catalog.bool, `_tvf %s, `_sk pg_catalog.int8, `_vf %s, `_vt %s,"
					 " `_cur pg_catalog.bool, `_set_y pg_catalog.bool"),
					 chg, cfg->vf.type_sql, cfg->vf.type_sql, cfg->vt.type_sql);
	scd2_append_col_defs(&buf, cfg->keys, cfg->nkeys);
	scd2_append_col_defs(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_col_defs(&buf, cfg->type1, cfg->ntype1);
	scd2_append_col_defs(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

char *
scd2_sql_create_points(const Scd2Config *cfg, const char *pts)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfo(&buf,
					 X("CREATE TEMP TABLE %s (`_t %s, `_prio pg_catalog.int4, `_present pg_catalog.bool,"
					 " `_ovt %s, `_sk pg_catalog.int8, `_stg pg_catalog.bool"),
					 pts, cfg->vf.type_sql, cfg->vt.type_sql);
	scd2_append_col_defs(&buf, cfg->keys, cfg->nkeys);
	scd2_append_col_defs(&buf, cfg->tracked, cfg->ntracked);
	scd2_append_col_defs(&buf, cfg->type1, cfg->ntype1);
	scd2_append_col_defs(&buf, cfg->other, cfg->nother);
	appendStringInfoString(&buf, ") ON COMMIT DROP");
	return buf.data;
}

/* Drop the temporary work tables (quietly: the general path's may not exist). */
void
scd2_drop_work_tables(void)
{
	int			nest = NewGUCNestLevel();

	scd2_set_local("client_min_messages", "warning");
	scd2_spi_exec("DROP TABLE IF EXISTS " KEYS_TABLE ", " CHG_TABLE ", " PTS_TABLE ", " WIN_TABLE,
				  SPI_OK_UTILITY, "dropping work tables");
	AtEOXact_GUC(true, nest);
}

/* Temporary work tables of a load. */
void
scd2_create_work_tables(const Scd2Config *cfg)
{
	scd2_spi_exec(scd2_sql_create_keys(cfg, KEYS_TABLE), SPI_OK_UTILITY, "creating the key table");
	scd2_spi_exec(scd2_sql_create_changes(cfg, CHG_TABLE), SPI_OK_UTILITY, "creating the change table");
}
