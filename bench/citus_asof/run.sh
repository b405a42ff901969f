#!/usr/bin/env bash
# scd2.asof on Citus, side by side: the fact load with scd2.asof (probe:
# threshold 0, map: threshold 1) and with the half-open range join, for a
# distributed and a reference dimension and for a plain one on the
# coordinator; and 2000 lookups evaluated on the coordinator.  Alternating
# rounds; prints "case ms" lines.  Needs a running cluster with setup.sql
# loaded, e.g. SCD2_CITUS_KEEP=1 test/citus/run.sh, then
#   psql -h /tmp/scd2-citus-PORT -p PORT -U postgres -d scd2_citus -f bench/citus_asof/setup.sql
#   PGHOST=/tmp/scd2-citus-PORT PGPORT=PORT PGDATABASE=scd2_citus bench/citus_asof/run.sh
set -u
ROUNDS=${ROUNDS:-5}
P="psql -X -q -At -U postgres"
t() {
    local name=$1 s e; shift
    s=$(date +%s%N)
    $P -c "SET citus.propagate_set_commands = 'local'" -c "BEGIN" "$@" -c "COMMIT" >/dev/null || echo "FAIL $name"
    e=$(date +%s%N)
    echo "$name $(( (e - s) / 1000000 ))"
}
J="LEFT JOIN %s d ON d.id = f.id AND d.valid_from <= f.ts AND (d.valid_to IS NULL OR f.ts < d.valid_to)"
for round in $(seq "$ROUNDS"); do
    for dim in ddim rdim; do
        t ${dim}_asof_probe -c "TRUNCATE facts" -c "SET LOCAL scd2.asof_bulk_threshold = 0" -c "INSERT INTO facts SELECT fid, scd2.asof('$dim', ts, id) FROM stg"
        t ${dim}_asof_map -c "TRUNCATE facts" -c "SET LOCAL scd2.asof_bulk_threshold = 1" -c "INSERT INTO facts SELECT fid, scd2.asof('$dim', ts, id) FROM stg"
        t ${dim}_join -c "TRUNCATE facts" -c "INSERT INTO facts SELECT f.fid, d.sk FROM stg f $(printf "$J" $dim)"
    done
    t plain_asof_probe -c "TRUNCATE facts_plain" -c "SET LOCAL scd2.asof_bulk_threshold = 0" -c "INSERT INTO facts_plain SELECT fid, scd2.asof('dim_plain', ts, id) FROM stg_plain"
    t plain_asof_map -c "TRUNCATE facts_plain" -c "SET LOCAL scd2.asof_bulk_threshold = 1" -c "INSERT INTO facts_plain SELECT fid, scd2.asof('dim_plain', ts, id) FROM stg_plain"
    t plain_join -c "TRUNCATE facts_plain" -c "INSERT INTO facts_plain SELECT f.fid, d.sk FROM stg_plain f $(printf "$J" dim_plain)"
    t coord_ddim_2k_distinct -c "SELECT sum(scd2.asof('ddim', ts, id)) FROM probe2k"
    t coord_ddim_2k_100keys -c "SELECT sum(scd2.asof('ddim', ts, id)) FROM probe2k_100"
    t coord_rdim_2k_distinct -c "SELECT sum(scd2.asof('rdim', ts, id)) FROM probe2k"
    t coord_nothing -c "SELECT 1"
done
