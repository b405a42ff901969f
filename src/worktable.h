/*
 * worktable.h -- the load's work tables (worktable.c creates them).
 */
#ifndef SCD2_WORKTABLE_H
#define SCD2_WORKTABLE_H

#include "scd2.h"

#include "lib/stringinfo.h"

/*
 * Work tables of a load, in the session's temporary schema, dropped at the
 * end of a successful load (ON COMMIT DROP as well; a failed load's are
 * rolled back with it).  Names a user is unlikely to choose: a user's own
 * temporary table of that name makes the load fail at CREATE, never
 * dropped or read by it.
 */
#define KEYS_TABLE	"pg_temp.\"scd2 work: keys\""
#define CHG_TABLE	"pg_temp.\"scd2 work: changes\""
#define PTS_TABLE	"pg_temp.\"scd2 work: points\""
#define WIN_TABLE	"pg_temp.\"scd2 work: window\""

/* worktable.c */
extern char *scd2_sql_create_changes(const Scd2Config *cfg, const char *chg);
extern char *scd2_sql_create_keys(const Scd2Config *cfg, const char *keys);
extern char *scd2_sql_create_points(const Scd2Config *cfg, const char *pts);
extern void scd2_append_changes_insert(StringInfo buf, const Scd2Config *cfg, const char *chg, bool payload);
extern void scd2_drop_work_tables(void);
extern void scd2_create_work_tables(const Scd2Config *cfg);

#endif							/* SCD2_WORKTABLE_H */
