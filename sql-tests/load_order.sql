-- Many changed keys with payloads of very different sizes: the change
-- table's heap reuses free space, so its physical order is not the order
-- rows were written in.  The MERGE must still close every old current row
-- before inserting its new current version (the unique partial index on
-- current rows is checked row by row).
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA ord;
SET search_path = ord, public;
SELECT setseed(0.42);
CREATE TABLE stg (id int, payload text, n int);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
INSERT INTO stg SELECT g, repeat('x', (random() * 3000)::int), 0 FROM generate_series(1, 6000) g;
SELECT action, count(*) FROM scd2.merge('stg', 'dim', '2024-01-01') GROUP BY 1;
UPDATE stg SET payload = repeat('y', (random() * 3000)::int), n = 1 WHERE id % 3 <> 0;
INSERT INTO stg SELECT g, repeat('z', (random() * 3000)::int), 0 FROM generate_series(6001, 7000) g;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT action, count(*) FROM feed GROUP BY 1 ORDER BY 1;
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');
SELECT count(*) FILTER (WHERE is_current) AS current_rows, count(*) AS all_rows FROM dim;
DROP SCHEMA ord CASCADE;
