-- scd2.apply_all on Citus: a distributed dimension loaded incrementally
-- from a co-located staging table and a reference dimension in snapshot
-- mode (keys missing from the extract are closed) from a local one, each
-- registered with its default staging table; two rounds, the second
-- incremental on top of the first, compared with the same loads of local
-- twins.
SET client_min_messages = warning;
CREATE SCHEMA citus_all;
SET search_path = citus_all, public;

CREATE TABLE stg_d (id int, name text, city text);
CREATE TABLE stg_r (id int, name text, city text);
CREATE TABLE stg_dl (id int, name text, city text);
CREATE TABLE stg_rl (id int, name text, city text);
SELECT scd2.create_dimension('dim_d', 'stg_d', ARRAY['id']);
SELECT scd2.create_dimension('dim_r', 'stg_r', ARRAY['id'], mode => 'snapshot');
SELECT scd2.create_dimension('dim_dl', 'stg_dl', ARRAY['id']);
SELECT scd2.create_dimension('dim_rl', 'stg_rl', ARRAY['id'], mode => 'snapshot');
ALTER TABLE dim_d DROP CONSTRAINT dim_d_pkey, ADD PRIMARY KEY (id, sk);
SELECT create_distributed_table('dim_d', 'id');
SELECT create_distributed_table('stg_d', 'id', colocate_with => 'dim_d');
SELECT create_reference_table('dim_r');
-- the default staging tables
SELECT scd2.register('dim_d', ARRAY['id'], staging => 'stg_d', surrogate_key_column => 'sk', is_current_column => 'is_current');
SELECT scd2.register('dim_r', ARRAY['id'], staging => 'stg_r', mode => 'snapshot', surrogate_key_column => 'sk', is_current_column => 'is_current');
SELECT scd2.register('dim_dl', ARRAY['id'], staging => 'stg_dl', surrogate_key_column => 'sk', is_current_column => 'is_current');
SELECT scd2.register('dim_rl', ARRAY['id'], staging => 'stg_rl', mode => 'snapshot', surrogate_key_column => 'sk', is_current_column => 'is_current');

-- round 1
INSERT INTO stg_d SELECT g, 'n' || g, 'c' || g FROM generate_series(1, 20) g;
INSERT INTO stg_r SELECT * FROM stg_d;
INSERT INTO stg_dl SELECT * FROM stg_d;
INSERT INTO stg_rl SELECT * FROM stg_d;
CALL scd2.apply_all('2024-01-01');
-- round 2: 5 keys move, 2 are new; the snapshot extract lacks keys 1-3
DELETE FROM stg_d;
INSERT INTO stg_d SELECT g, 'n' || g, CASE WHEN g % 4 = 0 THEN 'moved' ELSE 'c' || g END
FROM generate_series(4, 22) g;
DELETE FROM stg_r; DELETE FROM stg_dl; DELETE FROM stg_rl;
INSERT INTO stg_r SELECT * FROM stg_d;
INSERT INTO stg_dl SELECT * FROM stg_d;
INSERT INTO stg_rl SELECT * FROM stg_d;
CALL scd2.apply_all('2024-02-01');

SELECT dimension, status, source_rows, inserted, new_versions, closed, deleted, unchanged
FROM scd2.audit_log WHERE dimension LIKE 'citus_all.%' ORDER BY dimension, run_id;
-- the Citus dimensions equal their local twins
SELECT (SELECT count(*) FROM dim_d) AS dim_d_rows,
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_d
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_dl) x) +
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_dl
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_d) x) AS dim_d_differs,
       (SELECT count(*) FROM dim_r) AS dim_r_rows,
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_r
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_rl) x) +
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_rl
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_r) x) AS dim_r_differs;
-- the reference dimension's closed keys and moved keys
SELECT id, city, valid_from, valid_to, is_current FROM dim_r
WHERE id IN (1, 2, 3, 4, 8, 21) ORDER BY id, valid_from;

-- scd2.revert undoes the second round on every dimension: back to round 1
SELECT count(*) AS reverted FROM (
  SELECT scd2.revert(max(run_id)) FROM scd2.audit_log
  WHERE dimension LIKE 'citus_all.%' AND status = 'success' GROUP BY dimension) x;
SELECT (SELECT count(*) FROM dim_d) AS dim_d_rows, (SELECT count(*) FROM dim_r) AS dim_r_rows,
       (SELECT count(*) FROM dim_d WHERE valid_to IS NULL AND is_current) AS dim_d_current,
       (SELECT count(*) FROM dim_r WHERE valid_to IS NULL AND is_current) AS dim_r_current,
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_d
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_dl) x) +
       (SELECT count(*) FROM (SELECT id, name, city, valid_from, valid_to, is_current FROM dim_r
                              EXCEPT SELECT id, name, city, valid_from, valid_to, is_current FROM dim_rl) x) AS differ;

RESET search_path;
DROP SCHEMA citus_all CASCADE;
