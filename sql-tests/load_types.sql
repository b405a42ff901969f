-- Column types and conventions: the infinity convention for current rows,
-- date validity columns, tracked columns without an equality operator
-- (json), a key type whose = lives outside pg_catalog (citext), a
-- non-default collation, and a hash-partitioned dimension.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA typ;
SET search_path = typ, public;

-- valid_to = 'infinity' for current rows.
CREATE TABLE stg_inf (id int, v text);
CREATE TABLE dim_inf (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                      valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL DEFAULT 'infinity');
SELECT scd2.register('dim_inf', ARRAY['id'], current_valid_to => 'infinity');
INSERT INTO stg_inf VALUES (1, 'a'), (2, 'b');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_inf', 'dim_inf', '2024-01-01') ORDER BY 2;
UPDATE stg_inf SET v = 'c' WHERE id = 1;
DELETE FROM stg_inf WHERE id = 2;
INSERT INTO stg_inf VALUES (3, NULL);
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_inf', 'dim_inf', '2024-02-01') ORDER BY 2, 3;
SELECT id, v, valid_from, valid_to FROM dim_inf ORDER BY id, valid_from;
-- rerun: nothing; a late change splits with infinity kept for the current row
SELECT count(*) AS feed_rows FROM scd2.merge('stg_inf', 'dim_inf', '2024-02-01');
CREATE TABLE stg_inf_late (id int, v text, at timestamptz);
SELECT scd2.register('dim_inf', ARRAY['id'], current_valid_to => 'infinity', effective_column => 'at');
INSERT INTO stg_inf_late VALUES (1, 'late', '2024-01-15');
SELECT action, valid_from, valid_to FROM scd2.merge('stg_inf_late', 'dim_inf') ORDER BY 2;
SELECT id, v, valid_from, valid_to FROM dim_inf WHERE id = 1 ORDER BY valid_from;

-- date validity columns: the effective time is cast to date.
CREATE TABLE stg_date (id int, v text, d date);
CREATE TABLE dim_date (id int NOT NULL, v text, valid_from date NOT NULL, valid_to date);
SELECT scd2.register('dim_date', ARRAY['id'], effective_column => 'd');
INSERT INTO stg_date VALUES (1, 'a', '2024-01-01'), (1, 'b', '2024-03-01');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_date', 'dim_date') ORDER BY 3;
SELECT * FROM dim_date ORDER BY valid_from;
SELECT scd2.register('dim_date', ARRAY['id']);
TRUNCATE stg_date; INSERT INTO stg_date VALUES (1, 'c', NULL);
SELECT action, valid_from, valid_to FROM scd2.merge('stg_date', 'dim_date', '2024-06-15 13:00+00') ORDER BY 2;

-- json has no equality operator: compared by its text form.
CREATE TABLE stg_json (id int, attrs json);
SELECT scd2.create_dimension('dim_json', 'stg_json', ARRAY['id']);
INSERT INTO stg_json VALUES (1, '{"a": 1}'), (2, NULL), (3, '[1, 2]');
SELECT count(*) FROM scd2.merge('stg_json', 'dim_json', '2024-01-01');
UPDATE stg_json SET attrs = '{"a": 2}' WHERE id = 1;
UPDATE stg_json SET attrs = '{}' WHERE id = 2;
SELECT action, business_key FROM scd2.merge('stg_json', 'dim_json', '2024-02-01') ORDER BY 2, 1;
-- duplicates with json payloads collapse too
TRUNCATE stg_json;
CREATE TABLE stg_json2 (id int, attrs json, at timestamptz);
SELECT scd2.register('dim_json', ARRAY['id'], effective_column => 'at');
INSERT INTO stg_json2 VALUES (4, '{"x": 1}', '2024-03-01'), (4, '{"x": 1}', '2024-03-01');
SELECT action FROM scd2.merge('stg_json2', 'dim_json');
SELECT duplicates FROM scd2_test.last_metrics('dim_json');

-- citext key: its = (case-insensitive) is used, not text's.
CREATE EXTENSION IF NOT EXISTS citext SCHEMA public;
CREATE TABLE stg_ci (code citext, label text);
SELECT scd2.create_dimension('dim_ci', 'stg_ci', ARRAY['code']);
INSERT INTO stg_ci VALUES ('ABC', 'one');
SELECT count(*) FROM scd2.merge('stg_ci', 'dim_ci', '2024-01-01');
TRUNCATE stg_ci; INSERT INTO stg_ci VALUES ('abc', 'one'), ('XyZ', 'two');
SELECT action, business_key FROM scd2.merge('stg_ci', 'dim_ci', '2024-02-01') ORDER BY 2;
TRUNCATE stg_ci; INSERT INTO stg_ci VALUES ('abc', 'uno'), ('xyz', 'two'), ('XYZ', 'two');
SELECT * FROM scd2.merge('stg_ci', 'dim_ci', '2024-03-01');

-- A non-default collation on a tracked column is kept on comparison.
CREATE TABLE stg_coll (id int, name text COLLATE "C");
CREATE TABLE dim_coll (id int NOT NULL, name text COLLATE "POSIX", valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim_coll', ARRAY['id']);
INSERT INTO stg_coll VALUES (1, 'b');
SELECT action FROM scd2.merge('stg_coll', 'dim_coll', '2024-01-01');
UPDATE stg_coll SET name = 'B';
SELECT action FROM scd2.merge('stg_coll', 'dim_coll', '2024-02-01') ORDER BY 1;

-- A staging column of another typmod is cast to the dimension's before the
-- comparison: 1.250 is stored as 1.25, so loading it again changes nothing.
-- (A value the dimension would round, 1.005, is refused: load_safety.)
CREATE TABLE stg_tm (id int, amount numeric(10,3));
CREATE TABLE dim_tm (id int NOT NULL, amount numeric(12,2), valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim_tm', ARRAY['id']);
INSERT INTO stg_tm VALUES (1, 1.250), (2, 2.5);
SELECT action, business_key FROM scd2.merge('stg_tm', 'dim_tm', '2024-01-01') ORDER BY 2;
SELECT id, amount FROM dim_tm ORDER BY id;
SELECT count(*) FROM scd2.merge('stg_tm', 'dim_tm', '2024-02-01');
SELECT unchanged, new_versions FROM scd2_test.last_metrics('dim_tm');

-- Values their type's equality calls equal, with other bytes, are
-- unchanged: 1.0 and 1.00, 0 and -0, '1 day' and '24 hours', citext 'Abc'
-- and 'aBC'; NaN equals NaN, and an array's NULL element its NULL element.
-- A NULL against a value and a real difference are changes.
CREATE TABLE stg_eq (id int, n numeric, f float8, i interval, c citext, a int[]);
SELECT scd2.create_dimension('dim_eq', 'stg_eq', ARRAY['id']);
INSERT INTO stg_eq VALUES (1, 1.0, 0, '1 day', 'Abc', ARRAY[1, NULL]),
                          (2, 'NaN', 'NaN', '1 hour', NULL, NULL), (3, 5, 5, '1 minute', 'x', ARRAY[2]);
SELECT count(*) FROM scd2.merge('stg_eq', 'dim_eq', '2024-01-01');
UPDATE stg_eq SET n = 1.00, f = '-0', i = '24 hours', c = 'aBC' WHERE id = 1;
UPDATE stg_eq SET c = 'y' WHERE id = 2;
UPDATE stg_eq SET a = ARRAY[3] WHERE id = 3;
SELECT action, business_key FROM scd2.merge('stg_eq', 'dim_eq', '2024-02-01') ORDER BY 2, 1;
SELECT id, n, f, i, c, a FROM dim_eq WHERE valid_to IS NULL ORDER BY id;
-- A row-typed column keeps the SQL form: its IS NULL is true of a row of
-- NULL fields, so NULL against ROW(NULL, NULL) is no change.
CREATE TYPE typ.pair AS (a int, b text);
CREATE TABLE stg_row (id int, p typ.pair);
SELECT scd2.create_dimension('dim_row', 'stg_row', ARRAY['id']);
INSERT INTO stg_row VALUES (1, NULL), (2, ROW(1, 'x')), (3, ROW(NULL, NULL));
SELECT count(*) FROM scd2.merge('stg_row', 'dim_row', '2024-01-01');
UPDATE stg_row SET p = ROW(NULL, NULL) WHERE id = 1;
UPDATE stg_row SET p = ROW(1, NULL) WHERE id = 2;
UPDATE stg_row SET p = NULL WHERE id = 3;
SELECT action, business_key FROM scd2.merge('stg_row', 'dim_row', '2024-02-01') ORDER BY 2, 1;
-- the comparison itself: SQL's AND of NULL-safe equalities
SELECT scd2._not_distinct(1, 1, NULL::text, NULL::text) AS same,
       scd2._not_distinct(1, 1, 'a'::text, NULL::text) AS one_null,
       scd2._not_distinct(1.0, 1.00, 2, 3) AS differ;

-- The check for keys with several staging rows, scd2._repeats: count(x) -
-- count(DISTINCT x), from a hash set, and past hash_mem from a sort.
CREATE TEMP TABLE rep AS SELECT (g % 7000)::int AS i, (g % 7000)::text AS s, NULLIF(g % 5, 0) AS n
  FROM generate_series(1, 10000) g;
SELECT scd2._repeats(i) AS ints, scd2._repeats(s) AS texts, scd2._repeats(n) AS with_nulls,
       count(i) - count(DISTINCT i) AS expected, count(n) - count(DISTINCT n) AS expected_nulls FROM rep;
SET work_mem = '64kB';
SELECT scd2._repeats(i) AS ints, scd2._repeats(s) AS texts FROM rep;
RESET work_mem;
SELECT scd2._repeats(i) AS no_rows FROM rep WHERE false;

-- A hash-partitioned dimension (the business key is the partition key).
CREATE TABLE dim_part (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                       valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true)
    PARTITION BY HASH (id);
CREATE TABLE dim_part_0 PARTITION OF dim_part FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE dim_part_1 PARTITION OF dim_part FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT scd2.register('dim_part', ARRAY['id']);
CREATE TABLE stg_part (id int, v text);
INSERT INTO stg_part SELECT g, 'v' || g FROM generate_series(1, 6) g;
SELECT count(*) FROM scd2.merge('stg_part', 'dim_part', '2024-01-01');
UPDATE stg_part SET v = 'w' WHERE id IN (2, 5);
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg_part', 'dim_part', '2024-02-01');
SELECT action, business_key FROM feed ORDER BY 2, 1;
SELECT scd2_test.metrics_match_feed('dim_part'), scd2_test.invariants('dim_part');

DROP SCHEMA typ CASCADE;
