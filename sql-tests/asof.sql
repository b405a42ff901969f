--
-- scd2.asof(dimension, at, VARIADIC business_key): the surrogate key of the
-- version valid at an instant (valid_from <= at < valid_to), or NULL.
--
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
CREATE SCHEMA asof_test;

-- Key 1: three contiguous versions, the last current (valid_to NULL).
-- Key 2: two versions with a gap [2024-02-01, 2024-03-01).
-- Key 3: deleted on 2024-02-15 (no current version).
CREATE TABLE asof_test.dim (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         int NOT NULL,
    name       text,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz,
    is_current boolean NOT NULL DEFAULT true);
INSERT INTO asof_test.dim (id, name, valid_from, valid_to, is_current) VALUES
    (1, 'one a',   '2024-01-01', '2024-02-01', false),  -- sk 1
    (1, 'one b',   '2024-02-01', '2024-03-01', false),  -- sk 2
    (1, 'one c',   '2024-03-01', NULL,         true),   -- sk 3
    (2, 'two a',   '2024-01-01', '2024-02-01', false),  -- sk 4
    (2, 'two b',   '2024-03-01', NULL,         true),   -- sk 5
    (3, 'three a', '2024-01-10', '2024-02-15', false);  -- sk 6
SELECT scd2.register('asof_test.dim', ARRAY['id']);

SELECT n, label, id, at, scd2.asof('asof_test.dim', at, id) AS sk
  FROM (VALUES
    (1,  'before the first version',  1, timestamptz '2023-12-31 23:59:59.999999'),
    (2,  'exactly at valid_from',     1, '2024-01-01'),
    (3,  'inside the first version',  1, '2024-01-15'),
    (4,  'just before valid_to',      1, '2024-01-31 23:59:59.999999'),
    (5,  'exactly at valid_to',       1, '2024-02-01'),
    (6,  'current version',           1, '2024-03-01'),
    (7,  'current version, far',      1, '2999-01-01'),
    (8,  'infinity',                  1, 'infinity'),
    (9,  '-infinity',                 1, '-infinity'),
    (10, 'in a gap',                  2, '2024-02-15'),
    (11, 'end of the gap',            2, '2024-03-01'),
    (12, 'before the delete',         3, '2024-02-14 23:59:59'),
    (13, 'at the delete',             3, '2024-02-15'),
    (14, 'after the delete',          3, '2025-01-01'),
    (15, 'unknown key',               4, '2024-01-15')) AS t(n, label, id, at)
 ORDER BY n;

-- Same answers as the half-open range join, on a grid of keys and instants.
SELECT count(*) AS checked, count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches
  FROM (SELECT scd2.asof('asof_test.dim', g.at, k.id) AS a,
               (SELECT d.sk FROM asof_test.dim d
                 WHERE d.id = k.id AND g.at >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at < d.valid_to)) AS r
          FROM generate_series(0, 4) k(id),
               generate_series(timestamptz '2023-12-30', '2024-03-03', '6 hours') g(at)) s;

-- NULLs: a NULL key, instant or dimension gives NULL.
SELECT scd2.asof('asof_test.dim', '2024-01-15', NULL) AS null_key,
       scd2.asof('asof_test.dim', NULL, 1) AS null_at,
       scd2.asof(NULL, '2024-01-15', 1) AS null_dimension,
       scd2.asof('asof_test.dim', '2024-01-15', VARIADIC NULL::int[]) AS null_array,
       scd2.asof('asof_test.dim', '2024-01-15', VARIADIC ARRAY[NULL]::int[]) AS null_element;

-- Key argument types: the column's type, a cross-type comparison of its
-- operator family (bigint, smallint), an untyped literal, VARIADIC array.
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1::bigint) AS int8,
       scd2.asof('asof_test.dim', '2024-01-15', 1::smallint) AS int2,
       scd2.asof('asof_test.dim', '2024-01-15', '1') AS literal,
       scd2.asof('asof_test.dim', '2024-01-15', VARIADIC ARRAY[1]) AS variadic,
       scd2.asof('asof_test.dim', '2024-01-15', 4294967297::bigint) AS int8_out_of_int4_range;

-- Wrong number of keys, wrong key types.
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1, 2);
SELECT scd2.asof('asof_test.dim', '2024-01-15');
SELECT scd2.asof('asof_test.dim', '2024-01-15', VARIADIC ARRAY[1, 2]);
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1.0);
SELECT scd2.asof('asof_test.dim', '2024-01-15', '1'::text);
SELECT scd2.asof('asof_test.dim', '2024-01-15', 'one');

-- In a join, as a fact load uses it.
CREATE TABLE asof_test.facts (id int, ts timestamptz);
INSERT INTO asof_test.facts VALUES
    (1, '2024-01-05'), (1, '2024-02-05'), (1, '2024-03-05'), (2, '2024-02-05'),
    (3, '2024-01-05'), (3, '2024-01-12'), (NULL, '2024-01-05'), (1, NULL);
SELECT f.id, f.ts, scd2.asof('asof_test.dim', f.ts, f.id) AS sk, d.name
  FROM asof_test.facts f
  LEFT JOIN asof_test.dim d ON d.sk = scd2.asof('asof_test.dim', f.ts, f.id)
 ORDER BY f.id, f.ts;

-- Composite business key (a int, b text).
CREATE TABLE asof_test.dim2 (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    a          int NOT NULL,
    b          text NOT NULL,
    attr       text,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz,
    is_current boolean NOT NULL DEFAULT true);
INSERT INTO asof_test.dim2 (a, b, attr, valid_from, valid_to, is_current) VALUES
    (1, 'x', 'v1', '2024-01-01', '2024-02-01', false),  -- sk 1
    (1, 'x', 'v2', '2024-02-01', NULL,         true),   -- sk 2
    (1, 'y', 'v1', '2024-01-15', NULL,         true),   -- sk 3
    (2, 'x', 'v1', '2024-01-01', NULL,         true);   -- sk 4
SELECT scd2.register('asof_test.dim2', ARRAY['a', 'b']);
SELECT scd2.asof('asof_test.dim2', '2024-01-20', 1, 'x') AS "1x_jan",
       scd2.asof('asof_test.dim2', '2024-02-20', 1, 'x'::text) AS "1x_feb",
       scd2.asof('asof_test.dim2', '2024-01-20', 1, 'y'::varchar) AS "1y",
       scd2.asof('asof_test.dim2', '2024-01-10', 1, 'y') AS "1y_before",
       scd2.asof('asof_test.dim2', '2024-01-20', 2::bigint, 'x') AS "2x",
       scd2.asof('asof_test.dim2', '2024-01-20', 2, 'y') AS "2y",
       scd2.asof('asof_test.dim2', '2024-01-20', 1, NULL) AS "1null";
SELECT scd2.asof('asof_test.dim2', '2024-01-20', 1);
SELECT scd2.asof('asof_test.dim2', '2024-01-20', 'x'::text, 1);
SELECT scd2.asof('asof_test.dim2', '2024-01-20', VARIADIC ARRAY['1', 'x']);

-- Missing-version policy.
SET scd2.asof_on_missing = error;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS found;
SELECT scd2.asof('asof_test.dim', '2024-02-15', 2);
SELECT scd2.asof('asof_test.dim2', '2024-01-10', 1, 'y');
SELECT scd2.asof('asof_test.dim', '2024-01-15', NULL) AS null_key_is_not_missing;
SET scd2.asof_on_missing = nonsense;
RESET scd2.asof_on_missing;
SHOW scd2.asof_on_missing;

-- valid_from of type date: the instant is converted as a cast would, in the
-- session time zone.
CREATE TABLE asof_test.ddim (
    sk         int GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    code       text NOT NULL,
    valid_from date NOT NULL,
    valid_to   date,
    is_current boolean NOT NULL DEFAULT true);
INSERT INTO asof_test.ddim (code, valid_from, valid_to, is_current) VALUES
    ('A', '2024-01-01', '2024-02-01', false),  -- sk 1
    ('A', '2024-02-01', NULL,         true);   -- sk 2
SELECT scd2.register('asof_test.ddim', ARRAY['code']);
SELECT scd2.asof('asof_test.ddim', '2023-12-31 23:59:59', 'A') AS before,
       scd2.asof('asof_test.ddim', '2024-01-01 00:00:00', 'A') AS first_day,
       scd2.asof('asof_test.ddim', '2024-01-31 23:59:59', 'A') AS last_day,
       scd2.asof('asof_test.ddim', '2024-02-01 00:00:00', 'A') AS second;
SET TimeZone = 'America/New_York';
-- 2024-02-01 03:00 UTC is still 2024-01-31 in New York
SELECT scd2.asof('asof_test.ddim', '2024-02-01 03:00:00+00', 'A') AS ny_jan31,
       scd2.asof('asof_test.ddim', '2024-02-01 06:00:00+00', 'A') AS ny_feb1;
SET TimeZone = 'UTC';

-- valid_from of type timestamp (without time zone).
CREATE TABLE asof_test.tdim (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         int NOT NULL,
    valid_from timestamp NOT NULL,
    valid_to   timestamp,
    is_current boolean NOT NULL DEFAULT true);
INSERT INTO asof_test.tdim (id, valid_from, valid_to, is_current) VALUES
    (1, '2024-01-01 00:00', '2024-01-01 12:00', false),  -- sk 1
    (1, '2024-01-01 12:00', NULL,               true);   -- sk 2
SELECT scd2.register('asof_test.tdim', ARRAY['id']);
SELECT scd2.asof('asof_test.tdim', '2024-01-01 11:59:59', 1) AS morning,
       scd2.asof('asof_test.tdim', '2024-01-01 12:00:00', 1) AS noon;
SET TimeZone = 'Europe/Berlin';
-- 11:30 UTC is 12:30 in Berlin
SELECT scd2.asof('asof_test.tdim', '2024-01-01 11:30:00+00', 1) AS berlin_afternoon;
SET TimeZone = 'UTC';

-- The 'infinity' convention for current versions.
CREATE TABLE asof_test.idim (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         int NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz NOT NULL DEFAULT 'infinity',
    is_current boolean NOT NULL DEFAULT true);
INSERT INTO asof_test.idim (id, valid_from, valid_to, is_current) VALUES
    (1, '2024-01-01', '2024-06-01', false),  -- sk 1
    (1, '2024-06-01', 'infinity',   true);   -- sk 2
SELECT scd2.register('asof_test.idim', ARRAY['id'], current_valid_to => 'infinity');
SELECT scd2.asof('asof_test.idim', '2024-05-31', 1) AS first,
       scd2.asof('asof_test.idim', '2024-06-01', 1) AS current,
       scd2.asof('asof_test.idim', '2999-01-01', 1) AS far,
       scd2.asof('asof_test.idim', 'infinity', 1) AS at_infinity;

-- Not a registered dimension.
CREATE TABLE asof_test.plain (id int, valid_from timestamptz, valid_to timestamptz);
SELECT scd2.asof('asof_test.plain', '2024-01-15', 1);

-- A dimension without a surrogate key column.
CREATE TABLE asof_test.nosk (
    id int NOT NULL, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('asof_test.nosk', ARRAY['id']);
SELECT scd2.asof('asof_test.nosk', '2024-01-15', 1);

-- The as-of index: found whatever its name; without it, an error with a hint.
ALTER INDEX asof_test.dim_scd2_asof RENAME TO dim_versions;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS renamed_index;
DROP INDEX asof_test.dim_versions;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1);
-- an index that does not start with the business key then valid_from does not count
CREATE INDEX dim_from_id ON asof_test.dim (valid_from, id);
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1);
-- a plain (not covering) index on (business key, valid_from) does: the heap is read
CREATE INDEX dim_id_from ON asof_test.dim (id, valid_from);
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS plain_index,
       scd2.asof('asof_test.dim', '2024-02-15', 2) AS plain_index_gap;
-- registering again recreates the covering index
SET client_min_messages = warning;
SELECT scd2.register('asof_test.dim', ARRAY['id']);
RESET client_min_messages;
SELECT scd2.asof('asof_test.dim', '2024-03-15', 1) AS reregistered;

-- Visibility: rows changed in this transaction, and rolled back.
BEGIN;
UPDATE asof_test.dim SET valid_to = '2024-04-01', is_current = false WHERE sk = 3;
INSERT INTO asof_test.dim (id, name, valid_from) VALUES (1, 'one d', '2024-04-01');
SELECT scd2.asof('asof_test.dim', '2024-03-15', 1) AS closed_version,
       scd2.asof('asof_test.dim', '2024-04-15', 1) AS new_version;
ROLLBACK;
SELECT scd2.asof('asof_test.dim', '2024-04-15', 1) AS after_rollback;

-- The scan kept open across calls survives cursors, subtransactions that
-- fail, and procedures that commit.
BEGIN;
DECLARE c CURSOR FOR
    SELECT id, scd2.asof('asof_test.dim', '2024-01-15', id) AS sk FROM generate_series(1, 4) id;
FETCH 1 FROM c;
SAVEPOINT s;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 'x'::text);
ROLLBACK TO SAVEPOINT s;
FETCH 3 FROM c;
COMMIT;
DO $$
DECLARE
    r bigint;
BEGIN
    FOR i IN 1 .. 3 LOOP
        BEGIN
            r := scd2.asof('asof_test.dim', '2024-01-15', i);
            RAISE NOTICE 'key %: %', i, r;
            IF i = 2 THEN
                PERFORM 1 / 0;
            END IF;
        EXCEPTION WHEN division_by_zero THEN
            RAISE NOTICE 'key %: caught', i;
        END;
    END LOOP;
END
$$;
CREATE PROCEDURE asof_test.each_commit() LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    FOR i IN 1 .. 3 LOOP
        r := scd2.asof('asof_test.dim', '2024-01-15', i);
        RAISE NOTICE 'key %: %', i, r;
        COMMIT;
    END LOOP;
END
$$;
CALL asof_test.each_commit();

-- The dimension argument may change from row to row.
SELECT dim, scd2.asof(dim, '2024-01-20', 1) AS sk
  FROM unnest(ARRAY['asof_test.dim', 'asof_test.tdim', 'asof_test.dim']::regclass[]) dim;

-- Bulk mode: after scd2.asof_bulk_threshold calls under one snapshot (1:
-- at the first call) a call site looks versions up in an in-memory map of
-- the dimension, built by one walk of the as-of index.  Same answers as the
-- range join, on the same grids.
SHOW scd2.asof_bulk_threshold;
SET scd2.asof_bulk_threshold = 1;
SET client_min_messages = debug1;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS bulk_built;
RESET client_min_messages;
SELECT count(*) AS checked, count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches
  FROM (SELECT scd2.asof('asof_test.dim', g.at, k.id) AS a,
               (SELECT d.sk FROM asof_test.dim d
                 WHERE d.id = k.id AND g.at >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at < d.valid_to)) AS r
          FROM generate_series(0, 4) k(id),
               generate_series(timestamptz '2023-12-30', '2024-03-03', '6 hours') g(at)) s;
-- key argument types as in probe mode
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1::bigint) AS int8,
       scd2.asof('asof_test.dim', '2024-01-15', 1::smallint) AS int2,
       scd2.asof('asof_test.dim', '2024-01-15', '1') AS literal,
       scd2.asof('asof_test.dim', '2024-01-15', VARIADIC ARRAY[1]) AS variadic,
       scd2.asof('asof_test.dim', '2024-01-15', 4294967297::bigint) AS int8_out_of_int4_range,
       scd2.asof('asof_test.dim', '2024-01-15', NULL::int) AS null_key;
SELECT f.id, f.ts, scd2.asof('asof_test.dim', f.ts, f.id) AS sk
  FROM asof_test.facts f ORDER BY f.id, f.ts;
SET scd2.asof_on_missing = error;
SELECT scd2.asof('asof_test.dim', '2024-02-15', 2);
RESET scd2.asof_on_missing;

-- composite key, index-only (vacuumed) and with text and varchar arguments
VACUUM asof_test.dim2;
SELECT count(*) AS checked,
       count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches,
       count(*) FILTER (WHERE v IS DISTINCT FROM r) AS varchar_mismatches
  FROM (SELECT scd2.asof('asof_test.dim2', g.at, k.a, k.b) AS a,
               scd2.asof('asof_test.dim2', g.at, k.a::bigint, k.b::varchar) AS v,
               (SELECT d.sk FROM asof_test.dim2 d
                 WHERE d.a = k.a AND d.b = k.b AND g.at >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at < d.valid_to)) AS r
          FROM generate_series(0, 3) ka(a), unnest(ARRAY['x', 'y', 'z', 'X']) kb(b),
               LATERAL (SELECT ka.a, kb.b) k,
               generate_series(timestamptz '2023-12-30', '2024-02-03', '12 hours') g(at)) s;

-- date validity, in two time zones
SELECT current_setting('TimeZone') AS tz, count(*) AS checked,
       count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches
  FROM (SELECT scd2.asof('asof_test.ddim', g.at, k.code) AS a,
               (SELECT d.sk FROM asof_test.ddim d
                 WHERE d.code = k.code AND g.at::date >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at::date < d.valid_to)) AS r
          FROM unnest(ARRAY['A', 'B']) k(code),
               generate_series(timestamptz '2023-12-30', '2024-02-03', '3 hours') g(at)) s;
SET TimeZone = 'America/New_York';
SELECT current_setting('TimeZone') AS tz, count(*) AS checked,
       count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches
  FROM (SELECT scd2.asof('asof_test.ddim', g.at, k.code) AS a,
               (SELECT d.sk FROM asof_test.ddim d
                 WHERE d.code = k.code AND g.at::date >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at::date < d.valid_to)) AS r
          FROM unnest(ARRAY['A', 'B']) k(code),
               generate_series(timestamptz '2023-12-30', '2024-02-03', '3 hours') g(at)) s;
SET TimeZone = 'UTC';

-- timestamp validity
SELECT count(*) AS checked, count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches
  FROM (SELECT scd2.asof('asof_test.tdim', g.at, k.id) AS a,
               (SELECT d.sk FROM asof_test.tdim d
                 WHERE d.id = k.id AND g.at::timestamp >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at::timestamp < d.valid_to)) AS r
          FROM generate_series(0, 2) k(id),
               generate_series(timestamptz '2023-12-31 20:00', '2024-01-02', '30 minutes') g(at)) s;

-- the 'infinity' convention, at the infinities too
SELECT count(*) AS checked, count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches,
       count(*) FILTER (WHERE a IS NOT NULL) AS found
  FROM (SELECT scd2.asof('asof_test.idim', g.at, k.id) AS a,
               (SELECT d.sk FROM asof_test.idim d
                 WHERE d.id = k.id AND g.at >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at < d.valid_to OR d.valid_to = 'infinity')) AS r
          FROM generate_series(0, 2) k(id),
               (SELECT * FROM generate_series(timestamptz '2023-12-01', '2024-07-01', '1 day')
                UNION ALL VALUES (timestamptz 'infinity'), ('-infinity')) g(at)) s;

-- The dimension changed inside the transaction, between statements and
-- between the calls of a PL/pgSQL loop: each statement sees its own state.
BEGIN;
SELECT scd2.asof('asof_test.dim', '2024-04-15', 1) AS before_change;
UPDATE asof_test.dim SET valid_to = '2024-04-01', is_current = false WHERE sk = 3;
INSERT INTO asof_test.dim (id, name, valid_from) VALUES (1, 'one d', '2024-04-01'), (4, 'four a', '2024-01-01');
SELECT count(*) AS checked, count(*) FILTER (WHERE a IS DISTINCT FROM r) AS mismatches,
       count(*) FILTER (WHERE a > 6) AS new_versions_found
  FROM (SELECT scd2.asof('asof_test.dim', g.at, k.id) AS a,
               (SELECT d.sk FROM asof_test.dim d
                 WHERE d.id = k.id AND g.at >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at < d.valid_to)) AS r
          FROM generate_series(0, 4) k(id),
               generate_series(timestamptz '2023-12-30', '2024-05-03', '6 hours') g(at)) s;
DO $$
DECLARE
    a bigint;
    r bigint;
BEGIN
    FOR i IN 1 .. 3 LOOP
        a := scd2.asof('asof_test.dim', '2024-06-15', 4);
        SELECT d.sk INTO r FROM asof_test.dim d
         WHERE d.id = 4 AND '2024-06-15' >= d.valid_from
           AND (d.valid_to IS NULL OR '2024-06-15' < d.valid_to);
        RAISE NOTICE 'round %: asof %, range join %', i, a IS NOT NULL, a IS NOT DISTINCT FROM r;
        UPDATE asof_test.dim SET valid_to = ('2024-06-0' || i)::timestamptz, is_current = false
         WHERE id = 4 AND is_current;
        INSERT INTO asof_test.dim (id, name, valid_from) VALUES (4, 'four', ('2024-06-0' || i)::timestamptz);
    END LOOP;
END
$$;
ROLLBACK;

-- A descending, non-unique, not covering as-of index with duplicate
-- valid_from values: the map answers as the probe does (the heap is read).
CREATE TABLE asof_test.ndim (
    sk         bigint,
    id         int NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz);
SELECT scd2.register('asof_test.ndim', ARRAY['id'], surrogate_key_column => 'sk',
                     create_indexes => false);
CREATE INDEX ndim_versions ON asof_test.ndim (id, valid_from DESC);
INSERT INTO asof_test.ndim VALUES
    (1, 1, '2024-01-01', '2024-02-01'), (2, 1, '2024-02-01', NULL),
    (3, 1, '2024-02-01', '2024-03-01'), (4, 1, '2024-03-01', NULL),
    (5, 2, '2024-01-01', NULL), (6, 2, '2024-01-01', '2024-01-15'), (7, 2, '2024-01-01', NULL),
    (8, 3, '2024-01-01', NULL), (NULL, 3, '2024-02-01', NULL);
SET scd2.asof_bulk_threshold = 0;
CREATE TEMP TABLE asof_probe AS
SELECT k.id, g.at, scd2.asof('asof_test.ndim', g.at, k.id) AS sk
  FROM generate_series(0, 3) k(id),
       generate_series(timestamptz '2023-12-30', '2024-03-03', '12 hours') g(at);
SET scd2.asof_bulk_threshold = 1;
SET client_min_messages = debug1;
SELECT count(*) AS checked,
       count(*) FILTER (WHERE p.sk IS DISTINCT FROM scd2.asof('asof_test.ndim', p.at, p.id)) AS mismatches,
       count(p.sk) AS found
  FROM asof_probe p;
RESET client_min_messages;

-- Larger than scd2.asof_map_memory: no map, the probe answers.
CREATE TABLE asof_test.bigdim (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         int NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz) WITH (autovacuum_enabled = off);
SELECT scd2.register('asof_test.bigdim', ARRAY['id']);
INSERT INTO asof_test.bigdim (id, valid_from)
SELECT k, '2024-01-01' FROM generate_series(1, 1000) k;
ANALYZE asof_test.bigdim;
INSERT INTO asof_test.bigdim (id, valid_from)
SELECT k, '2024-01-01' FROM generate_series(1001, 20000) k;
SHOW scd2.asof_map_memory;
SET scd2.asof_map_memory = '64kB';
SET client_min_messages = debug1;
-- the estimate (1000 rows, from the statistics) fits, the real size does not
SELECT count(scd2.asof('asof_test.bigdim', '2024-02-01', k)) AS found
  FROM generate_series(1, 20001) k;
ANALYZE asof_test.bigdim;
-- the estimate does not fit
SELECT count(scd2.asof('asof_test.bigdim', '2024-02-01', k)) AS found
  FROM generate_series(1, 20001) k;
-- work_mem is not the limit
SET work_mem = '64kB';
RESET scd2.asof_map_memory;
SELECT count(scd2.asof('asof_test.bigdim', '2024-02-01', k)) AS found
  FROM generate_series(1, 20001) k;
RESET client_min_messages;
RESET work_mem;
RESET scd2.asof_bulk_threshold;

-- Privileges and row-level security are not bypassed.
CREATE ROLE regress_asof_reader;
GRANT USAGE ON SCHEMA scd2, asof_test TO regress_asof_reader;
SET ROLE regress_asof_reader;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1);
RESET ROLE;
GRANT SELECT (id, valid_from, valid_to, sk) ON asof_test.dim TO regress_asof_reader;
SET ROLE regress_asof_reader;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS column_privileges;
RESET ROLE;
ALTER TABLE asof_test.dim ENABLE ROW LEVEL SECURITY;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1) AS owner_bypasses_rls;
SET ROLE regress_asof_reader;
SELECT scd2.asof('asof_test.dim', '2024-01-15', 1);
RESET ROLE;
ALTER TABLE asof_test.dim DISABLE ROW LEVEL SECURITY;

-- Partitioned dimensions are not supported.
CREATE TABLE asof_test.pdim (
    sk bigint NOT NULL, id int NOT NULL, valid_from timestamptz NOT NULL, valid_to timestamptz)
    PARTITION BY HASH (id);
CREATE TABLE asof_test.pdim_0 PARTITION OF asof_test.pdim FOR VALUES WITH (MODULUS 1, REMAINDER 0);
SELECT scd2.register('asof_test.pdim', ARRAY['id'], surrogate_key_column => 'sk', create_indexes => false);
SELECT scd2.asof('asof_test.pdim', '2024-01-15', 1);

SELECT count(scd2.unregister(dimension)) AS unregistered
  FROM scd2.dimensions WHERE dimension::text LIKE 'asof_test.%';
SET client_min_messages = warning;
DROP SCHEMA asof_test CASCADE;
REVOKE USAGE ON SCHEMA scd2 FROM regress_asof_reader;
DROP ROLE regress_asof_reader;
