/*
 * extract_stream.h -- scd2.apply_snapshots' comparison of the extracts in
 * one streaming pass over the staging table (extract_stream.c).
 */
#ifndef SCD2_EXTRACT_STREAM_H
#define SCD2_EXTRACT_STREAM_H

#include "scd2.h"

#include "datatype/timestamp.h"
#include "utils/snapshot.h"

/*
 * Run sql (as the dimension's owner, restricted) and compare its rows as
 * they come: ctid, the extract's time (timestamptz, one of at[0..n-1],
 * ascending), the nkeys business key columns, then every column of the
 * row but its extract's.  The rows to load and the keys gone go into the
 * table changes_oid (the keys, `_n, `_row, `_load, `_gone).  Returns
 * false -- having written part of it, which the caller deletes -- when a
 * key's rows do not come in extract order, a key type has no hash
 * support, or the keys outgrow maintenance_work_mem; *why says which.
 */
extern bool scd2_compare_extracts_streaming(const char *sql, Snapshot snap, int nkeys, int n,
											const TimestampTz *at, Oid changes_oid,
											const char **why);

#endif							/* SCD2_EXTRACT_STREAM_H */
