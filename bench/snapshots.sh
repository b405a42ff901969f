#!/usr/bin/env bash
# bench/snapshots.sh -- issue 27: history from archived daily extracts.
# DAYS full extracts of KEYS customers, CHURN of the keys changing one
# tracked column each day, loaded three ways on the same data in one run:
#
#   apply_snapshots  CALL scd2.apply_snapshots('extracts', 'dim_a', 'day'):
#                    one call over the table of every extract
#   apply x DAYS     CALL scd2.apply('ext_<n>', 'dim_b', <day>) per day, each
#                    extract already in a table of its own (copying it there
#                    is not timed)
#   apply x DAYS     the same calls from views over the one table of
#     (views)        extracts (extv_<n>: WHERE day = <day>), into dim_v --
#                    separate calls on the data apply_snapshots is given
#   dbt x DAYS       what a dbt snapshot (check strategy, every column) runs
#                    per day on the same per-day tables: the first day's
#                    CREATE TABLE AS, then approaches/dbt.sql (temp table,
#                    UPDATE, INSERT) for each later day
#
# Every approach starts from an empty dimension.  Afterwards dim_a and dim_b
# must hold the same rows (surrogate keys aside) and dim_dbt as many
# versions.  Prints the times and the ratios to apply_snapshots.
#
# Needs a running server with scd2 installed (PGHOST, PGPORT, PGUSER);
# RESULTS.md used bench/cluster.sh with SETTINGS=default.
#   KEYS=100000 DAYS=30 CHURN=0.02 DB=scd2_bench_snapshots bench/snapshots.sh
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
KEYS=${KEYS:-100000}
DAYS=${DAYS:-30}
CHURN=${CHURN:-0.02}
DB=${DB:-scd2_bench_snapshots}
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
now() { date +%s.%N; }

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
q -c "SET client_min_messages = warning; CREATE EXTENSION scd2"

echo "== generating $DAYS extracts of $KEYS keys, churn $CHURN"
q <<SQL
SET client_min_messages = warning;
SELECT setseed(0.27);
CREATE TABLE extracts (day date NOT NULL, customer_id bigint, name text, city text, tier text,
                       email text, birth_date date, credit_limit numeric(12,2));
INSERT INTO extracts
SELECT date '2024-01-01', g, 'name ' || g, 'city ' || (g % 1000), (ARRAY['gold', 'silver', 'bronze'])[1 + g % 3],
       'c' || g || '@example.com', date '1950-01-01' + (g % 20000), (g % 5000) * 10
  FROM generate_series(1, $KEYS) g;
DO \$\$
BEGIN
    FOR i IN 1 .. $DAYS - 1 LOOP
        INSERT INTO extracts
        SELECT e.day + 1, customer_id, name,
               CASE WHEN random() < $CHURN THEN 'city ' || (random() * 1000)::int ELSE city END,
               tier, email, birth_date, credit_limit
          FROM extracts e WHERE e.day = date '2024-01-01' + (i - 1);
    END LOOP;
END \$\$;
DO \$\$
DECLARE
    d date;
BEGIN
    FOR d IN SELECT DISTINCT day FROM extracts ORDER BY 1 LOOP
        EXECUTE format('CREATE TABLE %I AS SELECT customer_id, name, city, tier, email, birth_date, credit_limit'
                       ' FROM extracts WHERE day = %L', 'ext_' || to_char(d, 'YYYYMMDD'), d);
        EXECUTE format('CREATE VIEW %I AS SELECT customer_id, name, city, tier, email, birth_date, credit_limit'
                       ' FROM extracts WHERE day = %L', 'extv_' || to_char(d, 'YYYYMMDD'), d);
    END LOOP;
END \$\$;
\i $here/dim.sql
ALTER TABLE dim RENAME TO dim_a;
CREATE TABLE dim_b (LIKE dim_a INCLUDING ALL);
CREATE TABLE dim_v (LIKE dim_a INCLUDING ALL);
SELECT scd2.register('dim_a', ARRAY['customer_id'], mode => 'snapshot');
SELECT scd2.register('dim_b', ARRAY['customer_id'], mode => 'snapshot');
SELECT scd2.register('dim_v', ARRAY['customer_id'], mode => 'snapshot');
VACUUM ANALYZE;
SQL
days=$(q -At -c "SELECT string_agg(to_char(day, 'YYYYMMDD'), ' ' ORDER BY day) FROM (SELECT DISTINCT day FROM extracts) d")
changes=$(q -At -c "SELECT count(*) FROM (SELECT customer_id, city, lag(city) OVER (PARTITION BY customer_id ORDER BY day) p FROM extracts) x WHERE city <> p")
echo "   $(q -At -c "SELECT count(*) FROM extracts") staging rows, $changes changes"

echo "== apply_snapshots"
t0=$(now)
q -c "SET client_min_messages = warning; CALL scd2.apply_snapshots('extracts', 'dim_a', 'day')"
t_a=$(echo "$(now) - $t0" | bc)

echo "== scd2.apply x $DAYS"
{
    echo "SET client_min_messages = warning;"
    for d in $days; do
        echo "CALL scd2.apply('ext_$d', 'dim_b', '$d'::date);"
    done
} >"/tmp/scd2_bench_snapshots_b.$$.sql"
t0=$(now)
q -o /dev/null -f "/tmp/scd2_bench_snapshots_b.$$.sql"
t_b=$(echo "$(now) - $t0" | bc)

echo "== scd2.apply x $DAYS from views"
{
    echo "SET client_min_messages = warning;"
    for d in $days; do
        echo "CALL scd2.apply('extv_$d', 'dim_v', '$d'::date);"
    done
} >"/tmp/scd2_bench_snapshots_v.$$.sql"
t0=$(now)
q -o /dev/null -f "/tmp/scd2_bench_snapshots_v.$$.sql"
t_v=$(echo "$(now) - $t0" | bc)

echo "== dbt snapshot x $DAYS"
first=${days%% *}
{
    # the first run creates the snapshot table (dbt's build_snapshot_table)
    echo "CREATE TABLE dim_dbt AS SELECT *, md5(coalesce(cast(customer_id as varchar), '') || '|' || coalesce(cast('$first'::timestamp as varchar), '')) AS dbt_scd_id,"
    echo "  '$first'::timestamp AS dbt_updated_at, '$first'::timestamp AS dbt_valid_from, NULL::timestamp AS dbt_valid_to FROM ext_$first;"
    for d in ${days#* }; do
        echo "\\set eff_ts '$d'"
        sed -e "s/from stg\$/from ext_$d/" "$here/approaches/dbt.sql"
        echo "DROP TABLE \"dim_dbt__dbt_tmp\";"
    done
} >"/tmp/scd2_bench_snapshots_c.$$.sql"
t0=$(now)
q -o /dev/null -f "/tmp/scd2_bench_snapshots_c.$$.sql"
t_c=$(echo "$(now) - $t0" | bc)
rm -f "/tmp/scd2_bench_snapshots_b.$$.sql" "/tmp/scd2_bench_snapshots_v.$$.sql" "/tmp/scd2_bench_snapshots_c.$$.sql"

echo "== verification"
same=$(q -At -c "SELECT (SELECT md5(string_agg((to_jsonb(t) - 'customer_sk')::text, ',' ORDER BY (to_jsonb(t) - 'customer_sk')::text)) FROM dim_a t)
                      = (SELECT md5(string_agg((to_jsonb(t) - 'customer_sk')::text, ',' ORDER BY (to_jsonb(t) - 'customer_sk')::text)) FROM dim_b t)")
same_v=$(q -At -c "SELECT (SELECT md5(string_agg((to_jsonb(t) - 'customer_sk')::text, ',' ORDER BY (to_jsonb(t) - 'customer_sk')::text)) FROM dim_v t)
                        = (SELECT md5(string_agg((to_jsonb(t) - 'customer_sk')::text, ',' ORDER BY (to_jsonb(t) - 'customer_sk')::text)) FROM dim_b t)")
counts=$(q -At -c "SELECT (SELECT count(*) FROM dim_a) || ' ' || (SELECT count(*) FROM dim_b) || ' ' || (SELECT count(*) FROM dim_dbt)")
metrics=$(q -At -c "SELECT string_agg(dimension || ':' || s, ' ' ORDER BY dimension) FROM (SELECT dimension, sum(source_rows) || '/' || sum(inserted) || '/' || sum(new_versions) || '/' || sum(closed) || '/' || sum(deleted) || '/' || sum(unchanged) s FROM scd2.audit_log GROUP BY 1) x")
echo "   dim_a = dim_b: $same; dim_v = dim_b: $same_v; versions a/b/dbt: $counts"
echo "   metrics (source/inserted/new/closed/deleted/unchanged): $metrics"
[ "$same" = t ] || { echo "dim_a and dim_b differ" >&2; exit 1; }
[ "$same_v" = t ] || { echo "dim_v and dim_b differ" >&2; exit 1; }
read -r ca cb cd <<<"$counts"
[ "$ca" = "$cb" ] && [ "$ca" = "$cd" ] || { echo "version counts differ" >&2; exit 1; }

echo "== $(date -u '+%Y-%m-%d %H:%M UTC'), $(psql -X -At -d "$DB" -c 'SHOW server_version'), KEYS=$KEYS DAYS=$DAYS CHURN=$CHURN"
printf '%-24s %8.2f s\n' "apply_snapshots" "$t_a" "apply x $DAYS (tables)" "$t_b" \
    "apply x $DAYS (views)" "$t_v" "dbt x $DAYS" "$t_c"
printf 'ratios to apply_snapshots: apply x %s (tables) %.2fx   apply x %s (views) %.2fx   dbt x %s %.2fx\n' \
    "$DAYS" "$(echo "$t_b / $t_a" | bc -l)" "$DAYS" "$(echo "$t_v / $t_a" | bc -l)" "$DAYS" "$(echo "$t_c / $t_a" | bc -l)"
