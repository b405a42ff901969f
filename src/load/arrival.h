/*
 * arrival.h -- private to load/: the work tables of an order-free load's
 * recompute (arrival.c) and the fold of a change stream's events
 * (stream.c), which arrival.c calls.
 */
#ifndef SCD2_LOAD_ARRIVAL_H
#define SCD2_LOAD_ARRIVAL_H

#include "scd2.h"
#include "load/worktable.h"

#define EV_TABLE	"pg_temp.\"scd2 work: arrival events\""
#define TL_TABLE	"pg_temp.\"scd2 work: arrival timeline\""

/* `_src of an event: what it is, and its precedence at one instant. */
#define EV_PRIOR		"0"		/* the version in force just before m */
#define EV_VERSION		"1"		/* an existing version starting at or after m */
#define EV_GAP			"2"		/* a delete where a version ends in a gap */
#define EV_REMEMBERED	"3"		/* a remembered event */
#define EV_STAGED		"4"		/* a staged row */

/*
 * timeline  one row per instant: `_t, `_present (no delete there), `_keep
 *           (it changes the state in force), `_run (kept instants so far),
 *           `_applied (a staged row decides it: no existing event of that
 *           state is there), `_hadver (an existing version starts there),
 *           and the instant's state (keys, payload)
 */
extern const WorkTable scd2_wt_arrival_timeline;

/* stream.c: a change stream's events folded into one state per instant */
extern char *scd2_stream_sql_conflict(const Scd2Config *cfg);
extern char *scd2_stream_sql_timeline(const Scd2Config *cfg);

#endif
