-- Change streams (issue 50): register's sequence_column and
-- ignore_null_updates, and Type 1 columns on an order-free dimension.
-- Each rule with its rows and metrics; each refusal with its error text
-- and nothing written (the dimension, audit log, change log and arrival
-- memory before and after).
SET client_min_messages = warning;
CREATE SCHEMA stream;
SET search_path = stream, public;
SET TimeZone = 'UTC';
CREATE TABLE d (id int, name text, city text, score int, valid_from timestamptz, valid_to timestamptz,
                sk bigint GENERATED ALWAYS AS IDENTITY);
CREATE TABLE s (id int, name text, city text, score int, eff timestamptz, lsn bigint, del boolean);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], type1 => ARRAY['score'],
                     effective_column => 'eff', delete_column => 'del', surrogate_key_column => 'sk',
                     order_free => true, sequence_column => 'lsn', ignore_null_updates => ARRAY['city', 'score']) IS NOT NULL AS registered;
CREATE VIEW v AS SELECT id, name, city, score, valid_from::date AS vf, valid_to::date AS vt FROM d;
-- what a load writes, but for the audit log's row of a refused load (status 'error')
CREATE FUNCTION everything() RETURNS text LANGUAGE sql AS $$
    SELECT scd2_test.checksum('stream.d') || ' runs ' || scd2_test.checksum('scd2.change_log_runs')
           || ' log ' || scd2_test.checksum('scd2.change_log') || ' memory ' || scd2_test.checksum('scd2.arrival_memory')
           || ' audit ' || (SELECT count(*) FROM scd2.audit_log WHERE status <> 'error') $$;
SET client_min_messages = notice;

-- 1. An insert and an update of one key at one instant, ordered by the
--    sequence (a CDC stream's insert and update within a millisecond);
--    the update is partial: its NULL city and score are "unchanged".
INSERT INTO s VALUES (1, 'Ann', 'Oslo', 1, '2024-01-01', 10, false),
                     (1, 'Anne', NULL, NULL, '2024-01-01', 11, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v ORDER BY id, vf;
TRUNCATE s;

-- 2. A partial update later (city only): a new version with the name kept
--    from the state in force -- name is tracked but not partial: its NULL
--    is a value, so the update sends the name too.
INSERT INTO s VALUES (1, 'Anne', 'Bergen', NULL, '2024-01-10', 20, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v ORDER BY id, vf;
TRUNCATE s;

-- 3. A late partial event (2024-01-05, score only) changes the fold from
--    its instant on: the version of 01-01 keeps its range, takes no new
--    version (score is Type 1), but its Type 1 value is that of its latest
--    event (the late one); the version of 01-10 carries score 7 forward.
INSERT INTO s VALUES (1, 'Anne', NULL, 7, '2024-01-05', 15, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v ORDER BY id, vf;
TRUNCATE s;

-- 4. A late event that changes a tracked column splits the version (its
--    city, partial, is Oslo from the state in force); the version of 01-10
--    keeps its state: its event sent a name of its own.
INSERT INTO s VALUES (1, 'Anna', NULL, NULL, '2024-01-07', 17, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v ORDER BY id, vf;
TRUNCATE s;

-- 5. Across batches: at an instant already loaded, an event with a lower
--    sequence changes nothing; one with a higher sequence wins (the version
--    there has another state now: superseded, and inserted anew).
INSERT INTO s VALUES (1, 'Anna', 'Tromso', NULL, '2024-01-10', 19, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE vf >= '2024-01-10' ORDER BY id, vf;
TRUNCATE s;
INSERT INTO s VALUES (1, 'Anna', 'Tromso', NULL, '2024-01-10', 21, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE vf >= '2024-01-10' ORDER BY id, vf;
TRUNCATE s;

-- 6. The last event wins: a delete with a lower sequence than an update
--    at the same instant no longer hides it; a later delete does.
INSERT INTO s VALUES (2, 'Bo', 'Rome', 1, '2024-02-01', 5, false),
                     (2, NULL, NULL, NULL, '2024-02-01', 4, true);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE id = 2 ORDER BY vf;
TRUNCATE s;
INSERT INTO s VALUES (2, NULL, NULL, NULL, '2024-02-01', 6, true);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE id = 2 ORDER BY vf;
TRUNCATE s;

-- 7. A key that comes back after a delete starts afresh: its partial
--    columns' NULLs stay NULL (there is no state in force to keep).
INSERT INTO s VALUES (2, 'Bo', NULL, NULL, '2024-03-01', 7, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE id = 2 ORDER BY vf;
TRUNCATE s;

-- 8. Sent again, a batch changes nothing, and the memory keeps each event once.
SELECT count(*) AS remembered FROM scd2.arrival_memory WHERE dimension = 'd'::regclass AND dropped_by IS NULL;
INSERT INTO s VALUES (1, 'Ann', 'Oslo', 1, '2024-01-01', 10, false),
                     (1, 'Anne', NULL, NULL, '2024-01-01', 11, false),
                     (1, 'Anne', 'Bergen', NULL, '2024-01-10', 20, false);
SELECT everything() AS before \gset
CALL scd2.apply('s', 'd');
SELECT scd2_test.checksum('stream.d') = split_part(:'before', ' runs ', 1) AS dimension_unchanged;
SELECT count(*) AS remembered FROM scd2.arrival_memory WHERE dimension = 'd'::regclass AND dropped_by IS NULL;
TRUNCATE s;

-- 9. Refused, nothing written: two different events of one key at one
--    instant and one sequence; a NULL sequence.
SELECT everything() AS before \gset
INSERT INTO s VALUES (3, 'Cy', 'Pisa', 1, '2024-01-01', 1, false), (3, 'Cy', 'Lima', 1, '2024-01-01', 1, false);
CALL scd2.apply('s', 'd');
SELECT everything() = :'before' AS nothing_written;
TRUNCATE s;
INSERT INTO s VALUES (1, 'Dee', 'Oslo', 1, '2024-01-20', 30, false), (3, 'Cy', 'Pisa', 1, '2024-01-01', NULL, false);
CALL scd2.apply('s', 'd');
SELECT everything() = :'before' AS nothing_written;
TRUNCATE s;
-- ... an event that differs from a remembered one at the same instant and sequence
INSERT INTO s VALUES (1, 'Zed', NULL, NULL, '2024-01-10', 20, false);
CALL scd2.apply('s', 'd');
SELECT everything() = :'before' AS nothing_written;
TRUNCATE s;

-- 10. The staging table must have the sequence column, of a type that sorts.
ALTER TABLE s RENAME COLUMN lsn TO lsn2;
INSERT INTO s VALUES (1, 'Dee', 'Oslo', 1, '2024-01-20', 30, false);
CALL scd2.apply('s', 'd');
ALTER TABLE s RENAME COLUMN lsn2 TO lsn;
CREATE TABLE s_json (id int, name text, city text, score int, eff timestamptz, lsn json, del boolean);
INSERT INTO s_json VALUES (1, 'Dee', 'Oslo', 1, '2024-01-20', '1', false);
CALL scd2.apply('s_json', 'd');
SELECT everything() = :'before' AS nothing_written;
TRUNCATE s;

-- 11. A revert of a load undoes its versions and its memory exactly.
INSERT INTO s VALUES (1, 'Eve', NULL, 9, '2024-01-03', 13, false);
CALL scd2.apply('s', 'd');
SELECT * FROM v WHERE id = 1 ORDER BY vf;
SELECT * FROM scd2_test.last_metrics('d');
SET client_min_messages = warning;
SELECT count(*) AS reverted FROM scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success'));
SELECT scd2_test.checksum('stream.d') = split_part(:'before', ' runs ', 1) AS dimension_restored,
       scd2_test.checksum('scd2.arrival_memory') = split_part(split_part(:'before', ' memory ', 2), ' audit ', 1) AS memory_restored;
SET client_min_messages = notice;
SELECT * FROM v WHERE id = 1 ORDER BY vf;
TRUNCATE s;

-- 12. Without a sequence, partial updates and Type 1 columns work the same;
--     at one instant present events must agree and a delete wins.
CREATE TABLE d2 (id int, name text, city text, score int, valid_from date, valid_to date);
CREATE TABLE s2 (id int, name text, city text, score int, eff date, del boolean);
SELECT scd2.register('d2', ARRAY['id'], tracked => ARRAY['name', 'city'], type1 => ARRAY['score'],
                     effective_column => 'eff', delete_column => 'del', order_free => true,
                     ignore_null_updates => ARRAY['city', 'score']) IS NOT NULL AS registered;
INSERT INTO s2 VALUES (1, 'Ann', 'Oslo', 1, '2024-01-01', false), (1, 'Ann', NULL, 2, '2024-01-03', false),
                      (1, 'Ann', 'Rome', NULL, '2024-01-05', false), (1, 'Ann', 'Rome', NULL, '2024-01-05', false);
CALL scd2.apply('s2', 'd2');
SELECT id, name, city, score, valid_from, valid_to FROM d2 ORDER BY valid_from;
TRUNCATE s2;
INSERT INTO s2 VALUES (1, 'Ann', 'Oslo', 5, '2024-01-02', false);
CALL scd2.apply('s2', 'd2');
SELECT id, name, city, score, valid_from, valid_to FROM d2 ORDER BY valid_from;
TRUNCATE s2;
INSERT INTO s2 VALUES (1, 'Ann', 'Lima', 5, '2024-01-05', false);
CALL scd2.apply('s2', 'd2');
TRUNCATE s2;

-- 13. A column a load adds (on_schema_change => 'append_new_columns', asked
--     for with order_free => true; left out, such a registration loads in
--     arrival order) is a Type 1 column of that load, on every version:
--     the value of the latest staged event in its validity. Later loads
--     track it as any shared column.
CREATE TABLE d3 (id int, city text, valid_from date, valid_to date);
CREATE TABLE s3 (id int, city text, eff date);
SELECT scd2.register('d3', ARRAY['id'], effective_column => 'eff', on_schema_change => 'append_new_columns')
       IS NOT NULL AS registered;
SELECT order_free FROM scd2.dimensions WHERE dimension = 'd3'::regclass;
SELECT scd2.register('d3', ARRAY['id'], effective_column => 'eff', on_schema_change => 'append_new_columns',
                     order_free => true) IS NOT NULL AS registered;
SELECT order_free FROM scd2.dimensions WHERE dimension = 'd3'::regclass;
INSERT INTO s3 VALUES (1, 'Oslo', '2024-01-01'), (1, 'Rome', '2024-01-03');
CALL scd2.apply('s3', 'd3');
TRUNCATE s3;
ALTER TABLE s3 ADD COLUMN tier text;
INSERT INTO s3 VALUES (1, 'Oslo', '2024-01-02', 'silver'), (1, 'Rome', '2024-01-05', 'platinum'),
                      (1, 'Rome', '2024-01-04', 'gold');
CALL scd2.apply('s3', 'd3');
SELECT id, city, tier, valid_from, valid_to FROM d3 ORDER BY valid_from;
SELECT filled_in_place, type1_updated FROM scd2.audit_log WHERE status = 'success' ORDER BY run_id DESC LIMIT 1;
TRUNCATE s3;
INSERT INTO s3 VALUES (1, 'Rome', '2024-01-07', 'diamond');
CALL scd2.apply('s3', 'd3');
SELECT id, city, tier, valid_from, valid_to FROM d3 ORDER BY valid_from;
TRUNCATE s3;

RESET client_min_messages;
SET client_min_messages = warning;
DROP SCHEMA stream CASCADE;
RESET search_path;
RESET TimeZone;
