/*
 * metrics.h -- the metrics of a load, declared once.
 *
 * SCD2_METRICS(X) calls X(name, words, shown, source, how) for every metric, in
 * the order of the NOTICE and of scd2.audit_log's columns:
 *
 *   name    the field of Scd2Metrics (scd2.h) and the bigint column of
 *           scd2.audit_log (history/audit.c writes it; dbt's materialization reads
 *           every bigint column but run_id as a metric)
 *   words   what the NOTICE prints after the count, (one, many): "1 <one>",
 *           "<count> <many>"
 *   shown   ALWAYS, or NONZERO: written into the audit row and shown in the
 *           NOTICE only when not 0 -- a metric whose audit_log column a later
 *           release adds, so that a server with the new library and the
 *           older objects (before ALTER EXTENSION scd2 UPDATE) still loads
 *           as before; dbt shows such a column (after message) when not 0
 *   source  where the count arises, and how is what it is:
 *     SET        assigned where the count arises: how names the place
 *     COUNTED    a count over the change table: how is its filter, a
 *                condition on the work table's columns (load/worktable.h; ` is
 *                the internal prefix); scd2_count_changes (load/write.c)
 *                runs the counts and reads them by name
 *     DERIVED    how is a C expression of the classification's counts
 *                (Scd2ClassifyCounts *cc), the fast path's rows that count
 *                as applied (fast_counted) and the metrics above it (m),
 *                evaluated in scd2_count_changes
 *
 * A first load (load/first_load.c) has no change table and no classification:
 * inserted = the rows its INSERT wrote, unchanged = the rest, the others 0.
 *
 * The rows a load writes are its COUNTED metrics: dbt's adapter response
 * (dbt/macros/materialization_scd2.sql) sums every metric but source_rows,
 * unchanged and duplicates; a new metric that counts no written rows joins
 * those three there.
 *
 * A new metric is one line here and its column of scd2.audit_log (added at
 * the end of the table in sql/scd2--<new>.sql and the upgrade script; put
 * its line last here too, so that the NOTICE and dbt show the same order).
 */
#ifndef SCD2_METRICS_H
#define SCD2_METRICS_H

#define SCD2_METRICS(X) \
	X(source_rows,   ("source row", "source rows"), ALWAYS,  SET,       "load.c, from scd2_validate_staging") \
	X(inserted,      ("inserted", "inserted"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_INSERT) \
	X(new_versions,  ("new version", "new versions"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_NEW_VERSION) \
	X(closed,        ("closed", "closed"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_CLOSE) \
	X(deleted,       ("deleted", "deleted"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_DELETE) \
	X(shortened,     ("shortened", "shortened"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_SHORTEN) \
	X(type1_updated, ("type 1 update", "type 1 updates"), ALWAYS,  COUNTED,   "`_action = " WT_ACT_TYPE1) \
	X(unchanged,     ("unchanged", "unchanged"), ALWAYS,  DERIVED,   (m->source_rows - cc->complex_rows - fast_counted) + \
															(cc->distinct - cc->kept - cc->y_applied) - m->completed) \
	X(duplicates,    ("duplicate", "duplicates"), ALWAYS,  DERIVED,   cc->complex_rows - cc->distinct) \
	X(filled_in_place, ("filled in place", "filled in place"), NONZERO, SET,     "load_schema.c, scd2_schema_count_fills: Type 1 updates that gave a current version a column the load added") \
	X(extended,      ("extended", "extended"), NONZERO, COUNTED,   "`_action = " WT_ACT_EXTEND) \
	X(removed,       ("removed", "removed"), NONZERO, COUNTED,   "`_action = " WT_ACT_REMOVE) \
	X(facts_rekeyed, ("fact re-keyed", "facts re-keyed"), NONZERO, SET, "load/driver.c, from history/facts.c's scd2_facts_maintain: the facts of the dimension's maintained fact tables the run re-pointed (revert.c and rewind.c set their audit row's)") \
	X(inferred,      ("inferred", "inferred"), NONZERO, SET,     "load/infer.c: the versions scd2.infer_members inserted for keys without any") \
	X(completed,     ("completed", "completed"), NONZERO, SET,   "load/complete.c, before the classification: inferred versions completed in place (the row that completed one is not counted unchanged)")

/* The field of Scd2Metrics. */
#define SCD2_METRIC_FIELD(name, words, shown, source, how) int64 name;

/* The NOTICE's words for a count: SCD2_METRIC_WORDS(words, count). */
#define SCD2_METRIC_ONE(one, many) one
#define SCD2_METRIC_MANY(one, many) many
#define SCD2_METRIC_WORDS(words, count) ((count) == 1 ? SCD2_METRIC_ONE words : SCD2_METRIC_MANY words)

/* Whether a metric of this value is written and shown. */
#define SCD2_METRIC_SHOWN_ALWAYS(value) true
#define SCD2_METRIC_SHOWN_NONZERO(value) ((value) != 0)
#define SCD2_METRIC_SHOWN(shown, value) SCD2_METRIC_SHOWN_##shown(value)

#endif							/* SCD2_METRICS_H */
