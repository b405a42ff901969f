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
#define CHG_TABLE_RELNAME	"scd2 work: changes"	/* in pg_temp, for C */
#define CHG_TABLE	"pg_temp.\"" CHG_TABLE_RELNAME "\""
#define PTS_TABLE	"pg_temp.\"scd2 work: points\""
#define WIN_TABLE	"pg_temp.\"scd2 work: window\""
/* The versions a load completed, for its change feed (complete.c). */
#define CMP_TABLE	"pg_temp.\"scd2 work: completed\""
/* On Citus (citus_load.c): local copies of what the load reads. */
#define DIM_IMAGE	"pg_temp.\"scd2 work: dimension\""
#define STG_IMAGE	"pg_temp.\"scd2 work: staging\""

/*
 * The work tables' own columns, declared once (worktable.c): each table's
 * spec emits its CREATE and its INSERT column list.  After them come the
 * business key columns, and for the change and points tables the payload
 * (tracked, Type 1, other), under the dimension's own names.  Internal
 * names are written "`_name" (common/sqlbuild.c: the load's prefix).
 *
 *   keys    `_n       staging rows of the key (0: a snapshot deletion)
 *           `_snap    the key is there for the snapshot's deletion
 *   changes `_action  what the MERGE does (WT_ACT_*)
 *           `_origin  which path classified the row (WT_ORIGIN_*)
 *           `_counts  a fast-path row that counts as an applied staging row
 *           `_tvf     update copy: the target row's valid_from; insert
 *                     copy: NULL (the MERGE never matches it)
 *           `_sk      update copy: the target row's surrogate key
 *           `_vf, `_vt  the row's validity as written
 *           `_cur     is_current as written (an order-free load's
 *                     WT_ACT_REMEMBER placeholder: the event is present,
 *                     not a delete)
 *           `_set_y   the update copy overwrites the Type 1 columns
 *   points  `_t       the point's instant
 *           `_prio    what the point is (WT_PRIO_*), and its order at `_t
 *           `_present the point carries a version (not a deletion)
 *           `_ovt     an existing version's valid_to (else NULL)
 *           `_sk      an existing version's surrogate key
 *           `_stg     the point is a staged row
 *   completed `_sk    a completed inferred version's surrogate key
 *           `_vf, `_vt  its validity after the completion
 */
typedef enum WorkType
{
	WT_TEXT,
	WT_CHAR,
	WT_BOOL,
	WT_INT4,
	WT_INT8,
	WT_VF,						/* valid_from's type */
	WT_VT,						/* valid_to's type */
	WT_SEQ						/* the sequence column's type (int4 when
								 * there is none: always NULL) */
} WorkType;

typedef struct WorkColumn
{
	const char *name;			/* "`_name" */
	WorkType	type;
} WorkColumn;

typedef struct WorkTable
{
	const char *table;			/* KEYS_TABLE, ... */
	const WorkColumn *cols;
	int			ncols;
	bool		payload;		/* the payload columns follow the keys */
} WorkTable;

extern const WorkTable scd2_wt_keys;
extern const WorkTable scd2_wt_changes;
extern const WorkTable scd2_wt_points;
extern const WorkTable scd2_wt_completed;

/* `_action of a change row: the change log's actions, WT_ACT_* (history.h). */

/*
 * `_cls of a staging row on the fast path (classify.c): an int4, which
 * classify_copies.c turns into the row's copies (FC_*), or in SQL (WT_CLS_*).
 */
#define FC_NEW				1				/* key not in the dimension */
#define FC_CHANGE			2				/* a tracked column changed */
#define FC_TYPE1			3				/* only Type 1 columns changed */
#define FC_DELETE			4				/* the row deletes its key */
#define FC_RETURN			5				/* a closed key comes back */
#define FC_UNCHANGED		6
#define FC_COMPLEX			7				/* late or same-instant row */
#define FC_NOOP				8				/* order-free: an unchanged row or a
											 * delete of an absent key, which the
											 * dimension remembers */
#define FC_OBSERVED			9				/* order-free: an unchanged row
											 * identical to its current version,
											 * remembered by its surrogate key */
#define WT_CLS_NEW			CppAsString2(FC_NEW)
#define WT_CLS_CHANGE		CppAsString2(FC_CHANGE)
#define WT_CLS_TYPE1		CppAsString2(FC_TYPE1)
#define WT_CLS_DELETE		CppAsString2(FC_DELETE)
#define WT_CLS_RETURN		CppAsString2(FC_RETURN)
#define WT_CLS_UNCHANGED	CppAsString2(FC_UNCHANGED)
#define WT_CLS_COMPLEX		CppAsString2(FC_COMPLEX)
#define WT_CLS_NOOP			CppAsString2(FC_NOOP)
#define WT_CLS_OBSERVED		CppAsString2(FC_OBSERVED)

/* `_origin of a change row. */
#define WT_ORIGIN_FAST		"'F'"			/* the fast path */
#define WT_ORIGIN_COMPLEX	"'C'"			/* the general path */

/* `_prio of a timeline point; at one instant they sort in this order. */
#define WT_PRIO_GAP			"0"				/* a gap starts: a closed version ended */
#define WT_PRIO_VERSION		"1"				/* an existing version starts */
#define WT_PRIO_STAGED		"2"				/* a staged row */

/* worktable.c */
extern char *scd2_sql_create_work_table(const Scd2Config *cfg, const WorkTable *wt);
extern void scd2_append_work_insert(StringInfo buf, const Scd2Config *cfg, const WorkTable *wt,
									const char *table, bool with_payload);
extern void scd2_drop_work_tables(void);
extern void scd2_create_work_tables(const Scd2Config *cfg);
extern void scd2_create_completed_table(const Scd2Config *cfg);

#endif							/* SCD2_WORKTABLE_H */
