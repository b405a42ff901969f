-- Order-free dimensions (issue 24): with register(..., order_free => true)
-- the dimension is a function of the set of events loaded, whatever their
-- batching and arrival order.  The four kinds of difference the issue
-- found, each loaded in order and shuffled; the extended valid_from and
-- removed versions in the feed, the metrics and the change log; what is
-- remembered (scd2.arrival_memory) and pruned; revert and rewind restore
-- everything, the memory included; refusals write nothing.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA arr;
SET search_path = arr, public;

CREATE TABLE stg (k int, a text, b int, eff date, del boolean);
CREATE TABLE dim_o (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int,
                    valid_from date, valid_to date, is_current boolean);
CREATE TABLE dim_s (LIKE dim_o INCLUDING IDENTITY);

-- Refused registrations: the events must carry their instants, and be
-- loaded incrementally by value with no Type 1 columns, and no load may
-- add a column (its first values would be written in place, as Type 1).
SELECT scd2.register('dim_o', ARRAY['k'], order_free => true);
SELECT scd2.register('dim_o', ARRAY['k'], effective_column => 'eff', mode => 'snapshot', order_free => true);
SELECT scd2.register('dim_o', ARRAY['k'], effective_column => 'eff', type1 => ARRAY['b'], order_free => true);
SELECT scd2.register('dim_o', ARRAY['k'], effective_column => 'eff', detect => 'timestamp', order_free => true);
SELECT scd2.register('dim_o', ARRAY['k'], effective_column => 'eff', on_schema_change => 'append_new_columns', order_free => true);
SELECT scd2.register(d, ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true)
  FROM unnest(ARRAY['dim_o', 'dim_s']::regclass[]) AS d;
SELECT dimension, order_free FROM scd2.dimensions WHERE dimension IN ('dim_o'::regclass, 'dim_s'::regclass) ORDER BY 1;

-- load(dim, rows): one load of the given staging rows; returns the feed.
CREATE FUNCTION load(dim regclass, VARIADIC rows text[])
RETURNS TABLE (action text, sk bigint, k jsonb, valid_from date, valid_to date)
LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    TRUNCATE stg;
    FOREACH r IN ARRAY rows LOOP EXECUTE 'INSERT INTO stg VALUES ' || r; END LOOP;
    RETURN QUERY SELECT f.action, f.surrogate_key, f.business_key, f.valid_from::date, f.valid_to::date
                   FROM scd2.merge('stg', dim) f;
END $$;
-- The two dimensions agree (business columns and validity)?
CREATE FUNCTION same() RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS ((SELECT k, a, b, valid_from, valid_to FROM dim_o EXCEPT SELECT k, a, b, valid_from, valid_to FROM dim_s)
                       UNION ALL
                       (SELECT k, a, b, valid_from, valid_to FROM dim_s EXCEPT SELECT k, a, b, valid_from, valid_to FROM dim_o))
$$;
CREATE VIEW memory AS
    SELECT m.dimension::regclass AS dim, m.business_key, m.effective::date AS effective, m.present, m.state
      FROM scd2.arrival_memory m WHERE m.dropped_by IS NULL
       AND m.dimension::text IN ('dim_o', 'dim_s') ORDER BY 1, 2, 3;

-- 1. A late identical event extends the version after it.
SELECT * FROM load('dim_o', $$(3, '~', 1, '2024-01-06', false)$$, $$(3, '~', 1, '2024-01-07', false)$$);
SELECT * FROM load('dim_s', $$(3, '~', 1, '2024-01-07', false)$$);
SELECT * FROM load('dim_s', $$(3, '~', 1, '2024-01-06', false)$$);
SELECT extended, removed, unchanged FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT same(), scd2_test.invariants('dim_s', 'k');
SELECT * FROM memory;

-- 2. A no-op event is remembered: a late change before it brings it back.
SELECT * FROM load('dim_o', $$(1, 'A', 1, '2024-01-01', false)$$, $$(1, 'B', 1, '2024-01-02', false)$$,
                   $$(1, 'A', 1, '2024-01-03', false)$$);
SELECT * FROM load('dim_s', $$(1, 'A', 1, '2024-01-01', false)$$);
SELECT * FROM load('dim_s', $$(1, 'A', 1, '2024-01-03', false)$$);
SELECT * FROM memory WHERE dim = 'dim_s'::regclass;
-- the same no-op sent again: remembered as it is, nothing added
SELECT scd2_test.checksum('scd2.arrival_memory') AS mem \gset
SELECT * FROM load('dim_s', $$(1, 'A', 1, '2024-01-03', false)$$);
SELECT scd2_test.checksum('scd2.arrival_memory') = :'mem' AS resent_adds_nothing;
SELECT * FROM load('dim_s', $$(1, 'B', 1, '2024-01-02', false)$$);
SELECT same(), scd2_test.invariants('dim_s', 'k');

-- 3. A delete of a key not seen yet is remembered: the later-arriving
-- upsert before it ends there.
SELECT * FROM load('dim_o', $$(4, 'x', NULL, '2024-01-02', false)$$, $$(4, NULL, NULL, '2024-01-05', true)$$);
SELECT * FROM load('dim_s', $$(4, NULL, NULL, '2024-01-05', true)$$);
SELECT * FROM memory WHERE dim = 'dim_s'::regclass AND business_key = '{"k": 4}';
SELECT * FROM load('dim_s', $$(4, 'x', NULL, '2024-01-02', false)$$);
SELECT same(), scd2_test.invariants('dim_s', 'k');

-- 4. An upsert and a delete at one instant: the delete wins, in one batch
-- or in two (then the version the upsert made is removed).
SELECT * FROM load('dim_o', $$(5, 'y', NULL, '2024-01-02', false)$$, $$(5, NULL, NULL, '2024-01-02', true)$$);
SELECT * FROM load('dim_s', $$(5, 'y', NULL, '2024-01-02', false)$$);
SELECT * FROM load('dim_s', $$(5, NULL, NULL, '2024-01-02', true)$$);
SELECT extended, removed, unchanged FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT same(), scd2_test.invariants('dim_s', 'k');
SELECT * FROM dim_s WHERE k = 5;

-- Two different states of one key at one instant: an error naming the key,
-- nothing written (the memory neither).
SELECT scd2_test.state('dim_s') || (SELECT count(*) FROM scd2.arrival_memory) AS before \gset
SELECT * FROM load('dim_s', $$(1, 'C', 1, '2024-01-02', false)$$);
SELECT * FROM load('dim_s', $$(6, 'p', NULL, '2024-01-02', false)$$, $$(6, 'q', NULL, '2024-01-02', false)$$);
SELECT scd2_test.state('dim_s') || (SELECT count(*) FROM scd2.arrival_memory) = :'before' AS nothing_written;
-- a dry run reports and writes nothing but its audit row
SELECT scd2_test.checksum('dim_s') || scd2_test.checksum('scd2.change_log')
       || scd2_test.checksum('scd2.arrival_memory') AS before \gset
TRUNCATE stg;
INSERT INTO stg VALUES (3, '~', 1, '2024-01-04', false), (5, 'z', NULL, '2024-01-01', false);
SELECT action, surrogate_key IS NOT NULL AS has_sk, business_key, valid_from::date, valid_to::date
  FROM scd2.merge('stg', 'dim_s', dry_run => true);
SELECT scd2_test.checksum('dim_s') || scd2_test.checksum('scd2.change_log')
       || scd2_test.checksum('scd2.arrival_memory') = :'before' AS nothing_written;

-- Revert restores the dimension, the memory and what the run superseded.
SELECT scd2_test.checksum('dim_s') AS dim_before,
       (SELECT string_agg(m::text, ',' ORDER BY m::text) FROM memory m) AS mem_before \gset
SELECT * FROM scd2.merge('stg', 'dim_s');
SELECT run_id AS r FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1 \gset
SELECT action, surrogate_key IS NOT NULL AS has_sk, valid_from::date, valid_to::date, old_row IS NOT NULL AS whole
  FROM scd2.change_log WHERE run_id = :r ORDER BY business_key, valid_from;
SELECT * FROM memory WHERE dim = 'dim_s'::regclass AND business_key IN ('{"k": 3}', '{"k": 5}');
SELECT scd2.revert(:r) > 0 AS reverted;
SELECT scd2_test.checksum('dim_s') = :'dim_before' AS dimension_restored,
       (SELECT string_agg(m::text, ',' ORDER BY m::text) FROM memory m) = :'mem_before' AS memory_restored;
-- and the same load again gives the same dimension
SELECT count(*) FROM scd2.merge('stg', 'dim_s');
SELECT k, a, b, valid_from, valid_to, is_current FROM dim_s WHERE k IN (3, 5) ORDER BY k, valid_from;

-- Rewind to the first load of dim_s: the dimension and memory as then.
SELECT min(run_id) AS first_run FROM scd2.audit_log WHERE dimension = 'arr.dim_s' \gset
SELECT scd2.rewind('dim_s', :first_run) > 0 AS rewound;
SELECT k, a, b, valid_from, valid_to FROM dim_s ORDER BY k, valid_from;
SELECT * FROM memory WHERE dim = 'dim_s'::regclass;

-- Prune: only the owner; events before the horizon are forgotten.
SELECT * FROM memory WHERE dim = 'dim_o'::regclass;
-- what the owner sees of it before choosing the horizon: the live and the
-- superseded rows, the live rows' instants and their bytes, as the memory
-- holds them
SELECT s.remembered, s.superseded, s.oldest::date, s.newest::date,
       s.bytes = (SELECT sum(pg_column_size(m.*)) FROM scd2.arrival_memory m
                   WHERE m.dimension = 'dim_o'::regclass) AS bytes_exact,
       (s.remembered, s.superseded) = (SELECT count(*) FILTER (WHERE dropped_by IS NULL),
                                              count(*) FILTER (WHERE dropped_by IS NOT NULL)
                                         FROM scd2.arrival_memory WHERE dimension = 'dim_o'::regclass) AS counts_exact
  FROM scd2.arrival_memory_size('dim_o') s;
SELECT * FROM scd2.arrival_memory_size(NULL);
SELECT scd2.prune_arrival_memory('dim_o', NULL);
CREATE ROLE arr_other;
GRANT USAGE ON SCHEMA arr TO arr_other;
GRANT SELECT ON dim_o TO arr_other;
SET ROLE arr_other;
SELECT scd2.prune_arrival_memory('dim_o', 'infinity');
-- a reader of the dimension is not its owner: the memory's size is refused
SELECT * FROM scd2.arrival_memory_size('dim_o');
RESET ROLE;
SELECT scd2.prune_arrival_memory('dim_o', '2024-01-04');
SELECT * FROM memory WHERE dim = 'dim_o'::regclass;
SELECT remembered, superseded, oldest::date, newest::date, bytes > 0 AS has_bytes
  FROM scd2.arrival_memory_size('dim_o');
-- a table the memory holds nothing of (the staging table, owned by the same role)
SELECT * FROM scd2.arrival_memory_size('stg');
REVOKE SELECT ON dim_o FROM arr_other;
REVOKE USAGE ON SCHEMA arr FROM arr_other;
DROP ROLE arr_other;

-- dimension_at(..., known_at) cannot undo a moved valid_from: refused for
-- a known_at before a run that extended a version.
-- (known_at: an instant after the earlier runs committed)
SELECT clock_timestamp() AS before_extend \gset
SELECT * FROM load('dim_s', $$(3, '~', 1, '2024-01-05', false)$$);
CREATE FUNCTION known_at_refusal(k timestamptz) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    PERFORM count(*) FROM scd2.dimension_at(NULL::arr.dim_s, 'infinity', k);
    RETURN 'not refused';
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    RETURN regexp_replace(SQLERRM, 'known at .* cannot', 'known at ... cannot');
END $$;
SELECT regexp_replace(known_at_refusal(:'before_extend'), 'run [0-9]+', 'run N') AS refusal;
SELECT count(*) FROM scd2.dimension_at(NULL::dim_s, '2024-01-06', now());

-- A full extract is a state, not events: apply_snapshots refuses an
-- order-free dimension, writing nothing.
CREATE TABLE snaps (snap date, k int, a text, b int, eff date, del boolean);
INSERT INTO snaps VALUES ('2099-02-01', 1, 'A', 1, '2099-02-01', false);
SELECT scd2_test.checksum('dim_s') || scd2_test.checksum('scd2.change_log')
       || scd2_test.checksum('scd2.arrival_memory') AS before \gset
CALL scd2.apply_snapshots('snaps', 'dim_s', 'snap');
SELECT scd2_test.checksum('dim_s') || scd2_test.checksum('scd2.change_log')
       || scd2_test.checksum('scd2.arrival_memory') = :'before' AS nothing_written;

-- A dropped dimension's remembered events are forgotten with it (a later
-- table given its oid must not recall them); the column is a regclass, so
-- pg_dump writes the dimension's name, not its oid.
SELECT 'dim_s'::regclass::oid AS dim_s_oid \gset
SELECT count(*) > 0 AS remembered FROM scd2.arrival_memory WHERE dimension::oid = :dim_s_oid;
SELECT pg_typeof(dimension) FROM scd2.arrival_memory LIMIT 1;
DROP TABLE dim_s;
SELECT count(*) AS left_behind FROM scd2.arrival_memory WHERE dimension::oid = :dim_s_oid;

-- A dimension dropped while event triggers did not fire (here
-- session_replication_role = replica; also single-user mode, a disabled
-- trigger): its remembered events and runs are forgotten and marked at the
-- next drop of anything, which every load does with its work tables.
CREATE TABLE dim_r (LIKE dim_o INCLUDING IDENTITY);
SELECT scd2.register('dim_r', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
SELECT count(*) FROM load('dim_r', $$(1, 'x', 1, '2024-01-01', false)$$, $$(2, 'y', 1, '2024-01-01', true)$$);
SELECT 'dim_r'::regclass::oid AS dim_r_oid \gset
SELECT count(*) AS remembered FROM scd2.arrival_memory WHERE dimension::oid = :dim_r_oid;
SET session_replication_role = replica;
DROP TABLE dim_r;
RESET session_replication_role;
SELECT count(*) AS still_remembered, (SELECT count(*) FROM scd2.change_log_runs
        WHERE dimension::oid = :dim_r_oid AND dimension_dropped_at IS NULL) AS runs_not_marked
  FROM scd2.arrival_memory WHERE dimension::oid = :dim_r_oid;
CREATE TABLE unrelated (x int);
DROP TABLE unrelated;
SELECT count(*) AS left_behind, (SELECT count(*) FROM scd2.change_log_runs
        WHERE dimension::oid = :dim_r_oid AND dimension_dropped_at IS NULL) AS runs_not_marked
  FROM scd2.arrival_memory WHERE dimension::oid = :dim_r_oid;
-- the other dimensions' rows stay
SELECT count(*) > 0 AS others_kept FROM scd2.arrival_memory WHERE dimension = 'dim_o'::regclass;

-- The memory's statistics taken while only other dimensions remembered
-- anything (as on any database where a new order-free dimension joins
-- others) estimate no row for the new one: its recall must still probe by
-- key.  A batch of 600 keys sent again (each key recomputed; 300 deletes
-- of absent keys remembered a row each, 300 no-op observations in one row
-- of surrogate keys): the memory's index scans in that load fetch about
-- one row per key (planned for this dimension they read its whole memory
-- per key, 600 x 301).  The bound leaves room for what the other
-- dimensions of the suite remember (371 alone, 600-1,500 after the other
-- tests, whose dimensions with an effective column are order-free since 0.5).
CREATE TABLE dim_n (LIKE dim_o INCLUDING IDENTITY);
SELECT scd2.register('dim_n', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
ANALYZE scd2.arrival_memory;
TRUNCATE stg;
-- (key 1 twice: the general path, as in the load the comment above measured)
INSERT INTO stg SELECT g, 'v', 1, '2024-03-01', false FROM generate_series(1, 300) g UNION ALL SELECT 1, 'v', 1, '2024-03-01'::date, false;
SELECT count(*) FROM scd2.merge('stg', 'dim_n');
UPDATE stg SET eff = '2024-03-02';
INSERT INTO stg SELECT g, NULL, NULL, '2024-03-02', true FROM generate_series(1001, 1300) g;
SELECT count(*) FROM scd2.merge('stg', 'dim_n');
SELECT count(*) AS rows, sum(coalesce(cardinality(versions), 1)) AS events,
       count(*) FILTER (WHERE versions IS NOT NULL) AS rows_of_versions
  FROM scd2.arrival_memory WHERE dimension = 'dim_n'::regclass;
BEGIN;
SELECT count(*) FROM scd2.merge('stg', 'dim_n');
SELECT idx_tup_fetch BETWEEN 300 AND 5000 AS probed_by_key
  FROM pg_stat_xact_all_tables WHERE relid = 'scd2.arrival_memory'::regclass;
COMMIT;
-- sent again, nothing changes: the same rows
SELECT count(*) AS rows, sum(coalesce(cardinality(versions), 1)) AS events
  FROM scd2.arrival_memory WHERE dimension = 'dim_n'::regclass AND dropped_by IS NULL;
SELECT count(*) AS superseded FROM scd2.arrival_memory WHERE dimension = 'dim_n'::regclass AND dropped_by IS NOT NULL;
DROP TABLE dim_n;

-- Observations of versions: an in-order load's rows that are identical to
-- their key's current version are remembered as the versions' surrogate
-- keys, one row per instant (versions), not a row each.  A late event
-- splits at them as at any remembered event; the row of keys is then
-- superseded and its other keys kept in a row of the late load, which a
-- revert deletes, bringing the old row back.
CREATE TABLE dim_v (LIKE dim_o INCLUDING IDENTITY);
SELECT scd2.register('dim_v', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
SELECT * FROM load('dim_v', $$(1, 'A', 1, '2024-01-01', false)$$, $$(2, 'B', 2, '2024-01-01', false)$$,
                   $$(3, 'C', NULL, '2024-01-01', false)$$);
SELECT * FROM load('dim_v', $$(1, 'A', 1, '2024-01-05', false)$$, $$(2, 'B', 2, '2024-01-05', false)$$,
                   $$(3, 'C', NULL, '2024-01-05', false)$$);
CREATE VIEW memory_v AS
    SELECT m.effective::date AS effective, m.business_key, m.versions, m.run_id - (SELECT min(run_id) FROM scd2.change_log_runs
                                                                                     WHERE dimension = 'dim_v'::regclass) AS run,
           m.dropped_by - (SELECT min(run_id) FROM scd2.change_log_runs WHERE dimension = 'dim_v'::regclass) AS dropped_by_run
      FROM scd2.arrival_memory m WHERE m.dimension = 'dim_v'::regclass ORDER BY m.run_id, m.effective;
SELECT * FROM memory_v;
SELECT remembered, superseded FROM scd2.arrival_memory_size('dim_v');
SELECT scd2_test.checksum('scd2.arrival_memory') AS mem_v, scd2_test.checksum('dim_v') AS dim_v \gset
-- a late change of key 2 on the 3rd: B until the 3rd, X until the 5th, B again
SELECT * FROM load('dim_v', $$(2, 'X', 2, '2024-01-03', false)$$);
SELECT k, a, b, valid_from, valid_to, is_current FROM dim_v ORDER BY k, valid_from;
SELECT * FROM memory_v;
SELECT remembered, superseded FROM scd2.arrival_memory_size('dim_v');
-- the same late change sent again changes nothing
SELECT scd2_test.checksum('scd2.arrival_memory') AS mem_v2 \gset
SELECT * FROM load('dim_v', $$(2, 'X', 2, '2024-01-03', false)$$);
SELECT scd2_test.checksum('scd2.arrival_memory') = :'mem_v2' AS resent_adds_nothing;
SELECT scd2.revert((SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'dim_v'::regclass)) > 0 AS reverted;
SELECT scd2.revert((SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'dim_v'::regclass AND reverted_by IS NULL
                                                                  AND run_id < (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'dim_v'::regclass))) > 0 AS reverted;
SELECT scd2_test.checksum('scd2.arrival_memory') = :'mem_v' AS memory_restored,
       scd2_test.checksum('dim_v') = :'dim_v' AS dimension_restored;
SELECT * FROM memory_v;

-- A dimension that keeps its effective column (as dbt's updated_at): an
-- observation is its version but for that column, which holds the
-- observation's own instant -- the version it starts after a late split
-- has it.
CREATE TABLE dim_e (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int, eff date,
                    valid_from date, valid_to date, is_current boolean);
SELECT scd2.register('dim_e', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
SELECT count(*) FROM load('dim_e', $$(1, 'A', 1, '2024-01-01', false)$$);
SELECT count(*) FROM load('dim_e', $$(1, 'A', 1, '2024-01-05', false)$$);
SELECT effective::date, versions FROM scd2.arrival_memory WHERE dimension = 'dim_e'::regclass AND dropped_by IS NULL;
SELECT count(*) FROM load('dim_e', $$(1, 'Z', 1, '2024-01-03', false)$$);
SELECT k, a, eff, valid_from, valid_to FROM dim_e ORDER BY valid_from;

-- A value equal to the version's but written differently (numeric 1.0
-- and 1.00) is not the version's: remembered as a row of its own, and
-- the version a late split starts there has it as it was loaded.
CREATE TABLE stg_m (k int, a text, n numeric, eff date, del boolean);
CREATE TABLE dim_m (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, n numeric,
                    valid_from date, valid_to date, is_current boolean);
SELECT scd2.register('dim_m', ARRAY['k'], tracked => ARRAY['a'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
INSERT INTO stg_m VALUES (1, 'A', 1.0, '2024-01-01', false);
SELECT count(*) FROM scd2.merge('stg_m', 'dim_m');
TRUNCATE stg_m;
INSERT INTO stg_m VALUES (1, 'A', 1.00, '2024-01-05', false), (2, 'A', 2.0, '2024-01-05', false);
SELECT count(*) FROM scd2.merge('stg_m', 'dim_m');
SELECT effective::date, business_key, state, versions FROM scd2.arrival_memory
 WHERE dimension = 'dim_m'::regclass AND dropped_by IS NULL ORDER BY effective, business_key;
TRUNCATE stg_m;
INSERT INTO stg_m VALUES (1, 'Z', 7, '2024-01-03', false);
SELECT count(*) FROM scd2.merge('stg_m', 'dim_m');
SELECT k, a, n, valid_from, valid_to FROM dim_m ORDER BY k, valid_from;
-- Without a surrogate key the observations are rows of their own, and
-- split the same way.
CREATE TABLE dim_x (k int, a text, b int, valid_from date, valid_to date, is_current boolean);
SELECT scd2.register('dim_x', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current', order_free => true);
SELECT count(*) FROM load('dim_x', $$(1, 'A', 1, '2024-01-01', false)$$);
SELECT count(*) FROM load('dim_x', $$(1, 'A', 1, '2024-01-05', false)$$);
SELECT effective::date, business_key, state, versions FROM scd2.arrival_memory
 WHERE dimension = 'dim_x'::regclass AND dropped_by IS NULL;
SELECT count(*) FROM load('dim_x', $$(1, 'Z', 1, '2024-01-03', false)$$);
SELECT k, a, valid_from, valid_to FROM dim_x ORDER BY valid_from;
-- An in-order order-free load is logged by surrogate keys, like any
-- batch; a later load that moves or removes versions it wrote pins their
-- business keys and valid_from in its batch first: scd2.changes of it
-- stays what it was after later loads extended and removed its versions,
-- and a rewind through them all restores the dimension and the memory.
CREATE TABLE dim_l (LIKE dim_o INCLUDING IDENTITY);
SELECT scd2.register('dim_l', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
SELECT scd2_test.checksum('scd2.arrival_memory') AS mem_l, scd2_test.checksum('dim_l') AS dim_l,
       clock_timestamp() AS t0 \gset
-- (a key of its own first: the first load into the empty dimension takes the
-- first-load path, logged by its header alone; the next is logged by batch)
SELECT count(*) AS first_load FROM load('dim_l', $$(9, 'Z', 1, '2023-01-01', false)$$);
SELECT * FROM load('dim_l', $$(1, 'A', 1, '2024-02-01', false)$$, $$(2, 'B', 1, '2024-02-01', false)$$,
                   $$(3, 'C', 1, '2024-02-01', false)$$);
SELECT max(run_id) AS r1 FROM scd2.change_log_runs WHERE dimension = 'dim_l'::regclass \gset
SELECT * FROM load('dim_l', $$(3, 'D', 1, '2024-02-05', false)$$);
SELECT max(run_id) AS r2 FROM scd2.change_log_runs WHERE dimension = 'dim_l'::regclass \gset
SELECT run_id = :r1 AS first, business_keys IS NOT NULL AS pinned, cardinality(surrogate_keys) AS rows
  FROM scd2.change_log_batches WHERE run_id IN (:r1, :r2) ORDER BY run_id;
SELECT (SELECT count(*) FROM scd2.change_log WHERE run_id IN (:r1, :r2)) AS logged_row_by_row;
CREATE TEMP TABLE feed_l AS SELECT 1 AS r, * FROM scd2.changes(:r1) UNION ALL SELECT 2, * FROM scd2.changes(:r2);
SELECT * FROM feed_l ORDER BY r, business_key, valid_from;
-- key 1 identical on Jan 20th: its version (inserted by r1) starts then;
-- a delete of key 2 at its version's very start: the version is removed
SELECT * FROM load('dim_l', $$(1, 'A', 1, '2024-01-20', false)$$, $$(2, NULL, NULL, '2024-02-01', true)$$);
-- the two versions r1 inserted, pinned in its batch; r2's rows were not moved
SELECT run_id = :r1 AS first, u.bk AS business_key, u.vf::date AS valid_from, u.sk = d.sk AS still_there
  FROM scd2.change_log_batches b,
       ROWS FROM (unnest(b.surrogate_keys), unnest(b.business_keys), unnest(b.valid_from)) AS u(sk, bk, vf)
       LEFT JOIN dim_l d ON d.sk = u.sk
 WHERE b.run_id IN (:r1, :r2) AND u.bk IS NOT NULL ORDER BY 1 DESC, 2;
-- key 1 identical earlier still: the version moves again, its pin stays
SELECT * FROM load('dim_l', $$(1, 'A', 1, '2024-01-10', false)$$);
SELECT u.bk AS business_key, u.vf::date AS valid_from
  FROM scd2.change_log_batches b,
       ROWS FROM (unnest(b.surrogate_keys), unnest(b.business_keys), unnest(b.valid_from)) AS u(sk, bk, vf)
 WHERE b.run_id = :r1 AND u.bk IS NOT NULL ORDER BY 1;
SELECT NOT EXISTS (SELECT 1 AS r, * FROM scd2.changes(:r1) UNION ALL SELECT 2, * FROM scd2.changes(:r2)
                   EXCEPT SELECT * FROM feed_l)
   AND (SELECT count(*) FROM scd2.changes(:r1)) + (SELECT count(*) FROM scd2.changes(:r2)) = (SELECT count(*) FROM feed_l)
    AS changes_unchanged;
-- a row moved but not pinned (the pin taken away by hand): the readers refuse
BEGIN;
UPDATE scd2.change_log_batches
   SET business_keys = (SELECT array_agg(CASE WHEN bk->>'k' = '2' THEN NULL ELSE bk END ORDER BY i)
                          FROM unnest(business_keys) WITH ORDINALITY AS u(bk, i))
 WHERE run_id = :r1;
CREATE FUNCTION pg_temp.refusal(r bigint) RETURNS text LANGUAGE plpgsql AS $$
DECLARE detail text;
BEGIN
  PERFORM count(*) FROM scd2.changes(r);
  RETURN 'read';
EXCEPTION WHEN others THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
  RETURN regexp_replace(SQLERRM || ' -- ' || detail, '[0-9]+', 'N', 'g');
END $$;
SELECT pg_temp.refusal(:r1);
ROLLBACK;
SELECT scd2.rewind('dim_l', :'t0'::timestamptz) AS runs_undone;
SELECT scd2_test.checksum('scd2.arrival_memory') = :'mem_l' AS memory_restored,
       scd2_test.checksum('dim_l') = :'dim_l' AS dimension_restored;
-- Pins across many batches: ten in-order batches (300 keys, then a tenth
-- of them changed each day), then one late load that extends current
-- versions and removes others: each is pinned in the batch that inserted
-- it, and the feed of every earlier run is what it was.
CREATE TABLE dim_p (LIKE dim_o INCLUDING IDENTITY);
SELECT scd2.register('dim_p', ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true);
CREATE TABLE stg_p (k int, a text, b int, eff date, del boolean);
-- (a key of its own first, taking the first-load path: every load below is logged by batch)
INSERT INTO stg_p VALUES (1000, 'z', 1, '2024-01-01', false);
CALL scd2.apply('stg_p', 'dim_p');
DO $$
DECLARE r bigint;
BEGIN
  FOR d IN 1..10 LOOP
    TRUNCATE stg_p;
    INSERT INTO stg_p SELECT k, 'v' || d, 1, date '2025-01-01' + d, false
      FROM generate_series(1, 300) k WHERE d = 1 OR k % 10 = d % 10;
    CALL scd2.apply('stg_p', 'dim_p', effective_at => now(), run_id => r);
  END LOOP;
END $$;
CREATE TEMP TABLE feed_p AS SELECT r.run_id, c.* FROM scd2.change_log_runs r, LATERAL scd2.changes(r.run_id) c
 WHERE r.dimension = 'dim_p'::regclass;
SELECT count(*) AS batches, sum(cardinality(surrogate_keys)) AS rows_logged, count(business_keys) AS pinned
  FROM scd2.change_log_batches WHERE run_id IN (SELECT run_id FROM feed_p);
TRUNCATE stg_p;
INSERT INTO stg_p SELECT c.k, c.a, c.b, c.valid_from - 1, false FROM dim_p c
 WHERE c.is_current AND c.valid_from > '2025-01-03' AND c.k <= 60;
INSERT INTO stg_p SELECT c.k, NULL, NULL, c.valid_from, true FROM dim_p c
 WHERE c.is_current AND c.valid_from > '2025-01-03' AND c.k BETWEEN 201 AND 220;
SELECT count(*) FROM scd2.merge('stg_p', 'dim_p');
SELECT extended, removed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS batches_pinned,
       sum((SELECT count(*) FROM unnest(b.business_keys) x WHERE x IS NOT NULL)) AS rows_pinned
  FROM scd2.change_log_batches b WHERE b.run_id IN (SELECT run_id FROM feed_p) AND b.business_keys IS NOT NULL;
SELECT (SELECT count(*) FROM (SELECT r.run_id, c.* FROM scd2.change_log_runs r, LATERAL scd2.changes(r.run_id) c
                               WHERE r.run_id IN (SELECT run_id FROM feed_p)
                              EXCEPT SELECT * FROM feed_p) x) AS feed_differences,
       (SELECT count(*) FROM scd2.change_log_runs r, LATERAL scd2.changes(r.run_id) c
         WHERE r.run_id IN (SELECT run_id FROM feed_p)) = (SELECT count(*) FROM feed_p) AS same_count;
-- A batch whose arrays disagree in length (written otherwise than by
-- scd2): a load that would pin a row in it fails, naming the run, and
-- writes nothing.
BEGIN;
UPDATE scd2.change_log_batches SET business_keys = '{NULL}' WHERE run_id IN (SELECT run_id FROM feed_p);
SELECT scd2_test.checksum('dim_p') AS dim_p_before \gset
TRUNCATE stg_p;
INSERT INTO stg_p SELECT c.k, c.a, c.b, c.valid_from - 1, false FROM dim_p c
 WHERE c.is_current AND c.k = 63;
CREATE FUNCTION pg_temp.load_p() RETURNS text LANGUAGE plpgsql AS $$
DECLARE detail text; hint text;
BEGIN
  PERFORM count(*) FROM scd2.merge('stg_p', 'dim_p');
  RETURN 'loaded';
EXCEPTION WHEN data_corrupted THEN
  GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
  RETURN regexp_replace(SQLERRM || ' -- ' || detail || ' -- ' || hint, 'run [0-9]+', 'run N', 'g');
END $$;
SELECT pg_temp.load_p() AS outcome;
SELECT scd2_test.checksum('dim_p') = :'dim_p_before' AS nothing_written;
ROLLBACK;
DROP TABLE dim_v, dim_e, dim_m, stg_m, dim_x, dim_l, dim_p, stg_p CASCADE;
