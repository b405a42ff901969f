-- Loads on Citus that fail write nothing: a load that fails after its
-- closes (a new version breaks a CHECK constraint), bad input, a dry run;
-- and a dimension in a shape scd2 cannot load is refused with a clear
-- error before anything is written.
SET client_min_messages = warning;
CREATE SCHEMA citus_err;
SET search_path = citus_err, public;
-- worker errors name a worker and a shard: only the SQLSTATE is shown
\set SHOW_CONTEXT never

CREATE TABLE stg_d (id int, name text, city text);
CREATE TABLE stg_r (id int, name text, city text);
INSERT INTO stg_d VALUES (1, 'Ann', 'Oslo'), (2, 'Bob', 'Rome'), (3, 'Cid', 'Kyiv');
INSERT INTO stg_r SELECT * FROM stg_d;
SELECT scd2.create_dimension('dim_d', 'stg_d', ARRAY['id']);
ALTER TABLE dim_d DROP CONSTRAINT dim_d_pkey, ADD PRIMARY KEY (id, sk);
SELECT create_distributed_table('dim_d', 'id');
SELECT create_distributed_table('stg_d', 'id', colocate_with => 'dim_d');
SELECT scd2.create_dimension('dim_r', 'stg_r', ARRAY['id']);
SELECT create_reference_table('dim_r');
CALL scd2.apply('stg_d', 'dim_d', '2024-01-01') \g /dev/null
CALL scd2.apply('stg_r', 'dim_r', '2024-01-01') \g /dev/null
-- a new version may not be in 'BAD' (existing rows pass)
ALTER TABLE dim_d ADD CONSTRAINT no_bad CHECK (city <> 'BAD');
ALTER TABLE dim_r ADD CONSTRAINT no_bad CHECK (city <> 'BAD');
CREATE TABLE before AS
  SELECT 'dim_d' AS dim, * FROM dim_d UNION ALL SELECT 'dim_r', * FROM dim_r;

-- 1. Key 1 changes to a city the CHECK refuses, key 2 to a good one, key 4
-- is new: the closes of 1 and 2 run, then the INSERT of the new versions
-- fails on a worker.  At top level the CALL leaves an error row.  (Citus
-- sends INSERT ... SELECT from a local table to the shards as COPY and
-- reports a worker's COPY error as XX000; on the reference table 23514.)
UPDATE stg_d SET city = CASE id WHEN 1 THEN 'BAD' WHEN 2 THEN 'Good' ELSE city END;
INSERT INTO stg_d VALUES (4, 'Dan', 'Lima');
UPDATE stg_r SET city = CASE id WHEN 1 THEN 'BAD' WHEN 2 THEN 'Good' ELSE city END;
INSERT INTO stg_r VALUES (4, 'Dan', 'Lima');
\set VERBOSITY sqlstate
CALL scd2.apply('stg_d', 'dim_d', '2024-02-01');
CALL scd2.apply('stg_r', 'dim_r', '2024-02-01');
\set VERBOSITY default
-- both dimensions are exactly as before: the closes were rolled back
SELECT b.dim, count(*) AS rows_before,
       count(*) FILTER (WHERE b.valid_to IS NULL AND b.is_current) AS current_before
FROM before b GROUP BY b.dim ORDER BY b.dim;
SELECT (SELECT count(*) FROM (SELECT * FROM dim_d EXCEPT SELECT sk, id, name, city, valid_from, valid_to, is_current FROM before WHERE dim = 'dim_d') x) AS dim_d_changed,
       (SELECT count(*) FROM (SELECT * FROM dim_r EXCEPT SELECT sk, id, name, city, valid_from, valid_to, is_current FROM before WHERE dim = 'dim_r') x) AS dim_r_changed,
       (SELECT count(*) FROM dim_d) AS dim_d_rows, (SELECT count(*) FROM dim_r) AS dim_r_rows;
-- the error rows, with the worker's message, and no change log for them
SELECT dimension, status, inserted + new_versions + closed AS written,
       message LIKE 'new row for relation "dim_%" violates check constraint "no_bad%"' AS check_message,
       (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = a.run_id) AS logged
FROM scd2.audit_log a WHERE dimension IN ('citus_err.dim_d', 'citus_err.dim_r') ORDER BY run_id;

-- 2. The same in a transaction block: the error reaches the caller, the
-- whole transaction rolls back, the load wrote nothing.
BEGIN;
\set VERBOSITY sqlstate
CALL scd2.apply('stg_d', 'dim_d', '2024-02-01');
\set VERBOSITY default
ROLLBACK;
SELECT count(*) AS dim_d_rows FROM dim_d;

-- 3. Bad input: two rows of key 2 at one instant with different values.
UPDATE stg_d SET city = 'Oslo' WHERE id = 1;
INSERT INTO stg_d VALUES (2, 'Bob', 'Milan');
UPDATE stg_r SET city = 'Oslo' WHERE id = 1;
INSERT INTO stg_r VALUES (2, 'Bob', 'Milan');
\set VERBOSITY terse
CALL scd2.apply('stg_d', 'dim_d', '2024-02-01');
CALL scd2.apply('stg_r', 'dim_r', '2024-02-01');
\set VERBOSITY default
SELECT (SELECT count(*) FROM dim_d) AS dim_d_rows, (SELECT count(*) FROM dim_r) AS dim_r_rows;

-- 4. A dry run classifies (the feed) and writes nothing.
DELETE FROM stg_d WHERE id = 2 AND city = 'Milan';
DELETE FROM stg_r WHERE id = 2 AND city = 'Milan';
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_d', 'dim_d', '2024-02-01', dry_run => true)
ORDER BY business_key, valid_from, action;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_r', 'dim_r', '2024-02-01', dry_run => true)
ORDER BY business_key, valid_from, action;
SELECT (SELECT count(*) FROM dim_d) AS dim_d_rows, (SELECT count(*) FROM dim_r) AS dim_r_rows;

-- 5. Shapes scd2 refuses (errcode, message, detail, hint), before writing:
-- a dimension distributed by a column outside its business key, and a
-- single-shard distributed one.
CREATE TABLE stg_x (id int, name text, city text);
INSERT INTO stg_x VALUES (1, 'Ann', 'Oslo');
CREATE TABLE dim_by_name (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, name text NOT NULL,
                          city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
-- its unique indexes could not be distributed by name: not created
SELECT scd2.register('dim_by_name', ARRAY['id'], surrogate_key_column => 'sk', create_indexes => false);
SELECT create_distributed_table('dim_by_name', 'name');
CREATE TABLE dim_single (LIKE dim_by_name INCLUDING IDENTITY);
SELECT scd2.register('dim_single', ARRAY['id'], surrogate_key_column => 'sk', create_indexes => false);
SELECT create_distributed_table('dim_single', NULL);
CREATE FUNCTION show_error(sql text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE st text; msg text; det text; hnt text;
BEGIN
  EXECUTE sql;
  RAISE NOTICE 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL, hnt = PG_EXCEPTION_HINT;
  RAISE NOTICE E'%: %\nDETAIL: %\nHINT: %', st, msg, det, hnt;
END $$;
SET client_min_messages = notice;
SELECT show_error($$CALL scd2.apply('stg_x', 'dim_by_name', '2024-01-01')$$);
SELECT show_error($$SELECT * FROM scd2.merge('stg_x', 'dim_single', '2024-01-01')$$);
SET client_min_messages = warning;
SELECT (SELECT count(*) FROM dim_by_name) AS dim_by_name_rows, (SELECT count(*) FROM dim_single) AS dim_single_rows;

RESET search_path;
DROP SCHEMA citus_err CASCADE;
