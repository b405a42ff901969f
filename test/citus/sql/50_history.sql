-- History operations on the Citus write path (issue 27): CALL
-- scd2.apply_snapshots into a distributed and a reference dimension from
-- a local table of daily extracts (keys leave, come back and are new,
-- values move), then scd2.rewind of the distributed one back to a run and
-- of the reference one back to a time; each compared with the same calls
-- on a local twin.
SET client_min_messages = warning;
CREATE SCHEMA citus_hist;
SET search_path = citus_hist, public;

-- Four extracts of keys 1-13: 3 and 7 leave on day 2, 3 comes back on
-- day 4, 13 is new on day 3, every third key moves on day 3.
CREATE TABLE extracts (snap date, id int, name text, city text);
INSERT INTO extracts
SELECT d, g, 'n' || g, 'c' || (g + CASE WHEN d >= '2024-01-03' AND g % 3 = 0 THEN 100 ELSE 0 END)
  FROM generate_series(date '2024-01-01', '2024-01-04', '1 day') d, generate_series(1, 13) g
 WHERE NOT (g IN (3, 7) AND d IN ('2024-01-02', '2024-01-03'))
   AND NOT (g = 7 AND d = '2024-01-04') AND NOT (g = 13 AND d < '2024-01-03');
CREATE TABLE stg (id int, name text, city text);
SELECT scd2.create_dimension('dim_d', 'stg', ARRAY['id'], mode => 'snapshot');
SELECT scd2.create_dimension('dim_r', 'stg', ARRAY['id'], mode => 'snapshot');
SELECT scd2.create_dimension('dim_dl', 'stg', ARRAY['id'], mode => 'snapshot');
SELECT scd2.create_dimension('dim_rl', 'stg', ARRAY['id'], mode => 'snapshot');
ALTER TABLE dim_d DROP CONSTRAINT dim_d_pkey, ADD PRIMARY KEY (id, sk);
SELECT create_distributed_table('dim_d', 'id');
SELECT create_reference_table('dim_r');
SELECT scd2.register('dim_d', ARRAY['id'], mode => 'snapshot', surrogate_key_column => 'sk', is_current_column => 'is_current');
SELECT scd2.register('dim_r', ARRAY['id'], mode => 'snapshot', surrogate_key_column => 'sk', is_current_column => 'is_current');

-- rows of a dimension in one text, surrogate keys aside (times as epochs:
-- Citus renders a pushed-down timestamptz in the worker's time zone)
CREATE FUNCTION rows_of(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE format('SELECT string_agg(x, '';'' ORDER BY x) FROM (SELECT concat_ws('','', id, name, city, extract(epoch FROM valid_from), extract(epoch FROM valid_to), is_current) x FROM %s) t', dim)
    INTO r;
  RETURN r;
END $$;
-- each extract's audit row: the metrics a run of one extract counted
CREATE FUNCTION metrics_of(dim text) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(concat_ws('/', effective_at, source_rows, inserted, new_versions, closed, deleted, unchanged, message),
                    ';' ORDER BY run_id)
    FROM scd2.audit_log WHERE dimension = dim AND status = 'success'
$$;

CALL scd2.apply_snapshots('extracts', 'dim_d', 'snap');
CALL scd2.apply_snapshots('extracts', 'dim_r', 'snap');
CALL scd2.apply_snapshots('extracts', 'dim_dl', 'snap');
CALL scd2.apply_snapshots('extracts', 'dim_rl', 'snap');
SELECT effective_at::date AS extract, source_rows, inserted, new_versions, closed, deleted, unchanged
  FROM scd2.audit_log WHERE dimension = 'citus_hist.dim_d' ORDER BY run_id;
SELECT rows_of('dim_d') = rows_of('dim_dl') AS distributed_equal,
       rows_of('dim_r') = rows_of('dim_rl') AS reference_equal,
       metrics_of('citus_hist.dim_d') = replace(metrics_of('citus_hist.dim_dl'), 'dim_dl', 'dim_d') AS distributed_metrics_equal,
       metrics_of('citus_hist.dim_r') = replace(metrics_of('citus_hist.dim_rl'), 'dim_rl', 'dim_r') AS reference_metrics_equal;
SELECT id, city, valid_from::date, valid_to::date, is_current FROM dim_d WHERE id IN (3, 6, 7, 13) ORDER BY id, valid_from;

-- rewind to a run: the distributed dimension back to its second extract
SELECT scd2.rewind('dim_d', (SELECT run_id FROM scd2.audit_log WHERE dimension = 'citus_hist.dim_d' ORDER BY run_id OFFSET 1 LIMIT 1)) AS undone_d,
       scd2.rewind('dim_dl', (SELECT run_id FROM scd2.audit_log WHERE dimension = 'citus_hist.dim_dl' ORDER BY run_id OFFSET 1 LIMIT 1)) AS undone_dl;
-- rewind to a time: the reference dimension back to its first extract (a
-- run counts from its commit, audit_log.committed_at: SEMANTICS.md, "Known at")
SELECT scd2.rewind('dim_r', (SELECT committed_at FROM scd2.audit_log WHERE dimension = 'citus_hist.dim_r' ORDER BY run_id LIMIT 1)) AS undone_r,
       scd2.rewind('dim_rl', (SELECT committed_at FROM scd2.audit_log WHERE dimension = 'citus_hist.dim_rl' ORDER BY run_id LIMIT 1)) AS undone_rl;
SELECT rows_of('dim_d') = rows_of('dim_dl') AS distributed_equal,
       rows_of('dim_r') = rows_of('dim_rl') AS reference_equal,
       (SELECT count(*) FROM dim_d) AS dim_d_rows, (SELECT count(*) FROM dim_r) AS dim_r_rows,
       (SELECT count(*) FROM dim_d WHERE valid_to IS NULL AND is_current) AS dim_d_current,
       (SELECT count(*) FROM dim_r WHERE valid_to IS NULL AND is_current) AS dim_r_current;
SELECT dimension, count(*) FILTER (WHERE status = 'success') AS success, count(*) FILTER (WHERE status = 'reverted') AS reverted
  FROM scd2.audit_log WHERE dimension LIKE 'citus_hist.%' GROUP BY 1 ORDER BY 1;
-- the rewound dimension takes the later extracts again, as its twin does
DELETE FROM extracts WHERE snap < '2024-01-03';
CALL scd2.apply_snapshots('extracts', 'dim_d', 'snap');
CALL scd2.apply_snapshots('extracts', 'dim_dl', 'snap');
SELECT rows_of('dim_d') = rows_of('dim_dl') AS distributed_equal, (SELECT count(*) FROM dim_d) AS dim_d_rows;

RESET search_path;
DROP SCHEMA citus_hist CASCADE;
