--
-- scd2.asof's in-memory map (bulk mode) gives the probe's answers, for
-- every form the map takes (dense integer keys, sparse integer keys, any
-- other and multi-column keys), at every version boundary, with gaps,
-- overlaps, empty and closed versions, NULLs, and when scd2.asof_map_memory
-- is too small for it.
--
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
CREATE SCHEMA asof_map;

-- Every (key, instant) of a grid, looked up through the index probe
-- (scd2.asof_bulk_threshold = 0) and through the map (1, built at the first
-- call), and by the half-open range join.  The instants are every valid_from
-- and valid_to of the dimension, a microsecond before each, and the
-- infinities: the boundaries.  The calls go through EXECUTE so that each
-- statement has its own call site; the map's build prints its form.
CREATE FUNCTION asof_map.check(dim regclass, keys text, key_expr text,
                               OUT checked bigint, OUT map_mismatches bigint,
                               OUT join_mismatches bigint, OUT hits bigint)
LANGUAGE plpgsql AS $$
DECLARE
    messages text := current_setting('client_min_messages');
BEGIN
    EXECUTE format($q$
        CREATE TEMP TABLE asof_grid AS
        SELECT k.key, g.at, NULL::bigint AS probe, NULL::bigint AS map
          FROM (%s) k(key),
               (SELECT DISTINCT b.at FROM (
                    SELECT valid_from::timestamptz FROM %s
                    UNION ALL SELECT valid_to::timestamptz FROM %s
                    UNION ALL SELECT valid_from::timestamptz - interval '1 microsecond' FROM %s
                    UNION ALL SELECT valid_to::timestamptz - interval '1 microsecond' FROM %s
                    UNION ALL VALUES (timestamptz 'infinity'), (timestamptz '-infinity')) b(at)
                 WHERE b.at IS NOT NULL) g
    $q$, keys, dim, dim, dim, dim);
    SET LOCAL scd2.asof_bulk_threshold = 0;
    EXECUTE format('UPDATE asof_grid g SET probe = scd2.asof(%L, g.at, %s)', dim, key_expr);
    SET LOCAL scd2.asof_bulk_threshold = 1;
    PERFORM set_config('client_min_messages', 'debug1', true);  -- the map's form
    EXECUTE format('UPDATE asof_grid g SET map = scd2.asof(%L, g.at, %s)', dim, key_expr);
    PERFORM set_config('client_min_messages', messages, true);
    SELECT count(*), count(*) FILTER (WHERE g.map IS DISTINCT FROM g.probe), count(g.map)
      INTO checked, map_mismatches, hits FROM asof_grid g;
    EXECUTE format($q$
        SELECT count(*) FILTER (WHERE g.probe IS DISTINCT FROM
                   (SELECT d.sk FROM %s d
                     WHERE d.key = g.key AND g.at >= d.valid_from
                       AND (d.valid_to IS NULL OR g.at < d.valid_to OR d.valid_to = 'infinity')
                     ORDER BY d.valid_from DESC, d.sk DESC LIMIT 1))
          FROM asof_grid g
    $q$, dim) INTO join_mismatches;
    DROP TABLE asof_grid;
END
$$;

-- Dense integer keys with holes (smallint, looked up with int arguments):
-- contiguous versions, a gap, a closed last version, an empty version
-- (valid_to = valid_from), an overlap (the later start wins, as in the
-- probe), 'infinity' as open.
CREATE TABLE asof_map.dense (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        smallint NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz);
INSERT INTO asof_map.dense (key, valid_from, valid_to) VALUES
    (1, '2024-01-01', '2024-02-01'), (1, '2024-02-01', '2024-03-01'), (1, '2024-03-01', NULL),
    (3, '2024-01-01', '2024-02-01'), (3, '2024-03-01', NULL),
    (5, '2024-01-10', '2024-02-15'),
    (7, '2024-01-01', '2024-01-01'), (7, '2024-01-01 00:00:01', 'infinity'),
    (9, '2024-01-01', '2024-03-01'), (9, '2024-02-01', NULL),
    (10, '-infinity', '2024-01-01');
SELECT scd2.register('asof_map.dense', ARRAY['key']);
SELECT * FROM asof_map.check('asof_map.dense', 'SELECT generate_series(0, 11)', 'g.key');

-- Sparse bigint keys (negative, beyond int4) with surrogate keys too far
-- apart for 32 bits; looked up with bigint and with int arguments.
CREATE TABLE asof_map.sparse (
    sk         bigint PRIMARY KEY,
    key        bigint NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz);
INSERT INTO asof_map.sparse VALUES
    (1, -5000000000, '2024-01-01', '2024-02-01'), (9000000000000, -5000000000, '2024-02-01', NULL),
    (-3, -7, '2024-01-01', NULL),
    (4, 12, '2024-01-01', '2024-01-15'), (5, 12, '2024-02-01', '2024-03-01'),
    (6, 1000003, '2024-01-05', NULL),
    (7, 8000000000, '2024-01-01', '2024-02-01');
SELECT scd2.register('asof_map.sparse', ARRAY['key'], surrogate_key_column => 'sk');
SELECT * FROM asof_map.check('asof_map.sparse',
    'SELECT unnest(ARRAY[-5000000000, -7, 0, 12, 13, 1000003, 8000000000, 9000000000])', 'g.key');
SELECT * FROM asof_map.check('asof_map.sparse',
    'SELECT unnest(ARRAY[-7, 0, 12, 13, 1000003])', 'g.key::int');

-- Integer keys in a descending, not covering index, with a NULL key and a
-- NULL valid_from in the table (neither is ever found), a NULL surrogate key
-- (found, but NULL) and two versions of key 40 with the same valid_from: the
-- probe takes the last in index order (sk 7) and checks its valid_to, where
-- the join takes a valid one (sk 6 from 2024-01-20 on), so the join differs
-- at those 4 instants (by design) and the map must not.
CREATE TABLE asof_map.desckey (
    sk         int,
    key        int,
    valid_from timestamptz,
    valid_to   timestamptz);
SELECT scd2.register('asof_map.desckey', ARRAY['key'], surrogate_key_column => 'sk',
                     create_indexes => false);
CREATE INDEX desckey_versions ON asof_map.desckey (key DESC, valid_from);
INSERT INTO asof_map.desckey VALUES
    (1, 1, '2024-01-01', '2024-02-01'), (2, 1, '2024-02-01', NULL),
    (3, 2, '2024-01-01', NULL), (NULL, 2, '2024-02-01', NULL),
    (4, NULL, '2024-01-01', NULL), (5, 3, NULL, NULL),
    (6, 40, '2024-01-01', NULL), (7, 40, '2024-01-01', '2024-01-20');
SELECT * FROM asof_map.check('asof_map.desckey', 'SELECT unnest(ARRAY[0, 1, 2, 3, 40, 41])', 'g.key');
SELECT scd2.asof('asof_map.desckey', '2024-01-10', 40) AS duplicate_valid_from_probe_choice;

-- Text keys, date validity: short and long keys (a key over 127 bytes has
-- a 4-byte header in the index, one over 2 kB is compressed there), keys
-- equal but for case.
CREATE TABLE asof_map.textkey (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        text NOT NULL,
    valid_from date NOT NULL,
    valid_to   date);
INSERT INTO asof_map.textkey (key, valid_from, valid_to) VALUES
    ('a', '2024-01-01', '2024-02-01'), ('a', '2024-02-01', NULL),
    ('A', '2024-01-15', NULL),
    ('b', '2024-01-01', '2024-01-10'),
    (repeat('long', 40), '2024-01-01', '2024-02-01'), (repeat('long', 40), '2024-02-01', NULL),
    (repeat('huge', 1000), '2024-01-01', NULL),
    ('', '2024-01-01', NULL);
SELECT scd2.register('asof_map.textkey', ARRAY['key']);
CREATE TEMP TABLE textkeys AS SELECT key FROM asof_map.textkey UNION SELECT 'B' UNION SELECT 'zz';
SELECT * FROM asof_map.check('asof_map.textkey', 'SELECT key FROM textkeys', 'g.key');
-- varchar and untyped arguments for the text column
SELECT * FROM asof_map.check('asof_map.textkey', 'SELECT key FROM textkeys', 'g.key::varchar');
SET scd2.asof_bulk_threshold = 1;
SELECT scd2.asof('asof_map.textkey', '2024-02-01', 'a') AS untyped_literal,
       scd2.asof('asof_map.textkey', '2024-02-01', repeat('huge', 1000)) AS compressed_key,
       scd2.asof('asof_map.textkey', '2024-02-01', NULL::text) AS null_key;
RESET scd2.asof_bulk_threshold;

-- Two key columns, text and numeric (by reference), the numeric looked up
-- with int and bigint arguments (implicit casts).
CREATE TABLE asof_map.multi (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    region     text NOT NULL,
    n          numeric NOT NULL,
    valid_from timestamp NOT NULL,
    valid_to   timestamp);
INSERT INTO asof_map.multi (region, n, valid_from, valid_to)
SELECT r, n, timestamp '2024-01-01' + (n || ' days')::interval,
       CASE WHEN n % 3 = 0 THEN timestamp '2024-01-01' + (n + 10 || ' days')::interval END
  FROM unnest(ARRAY['EU', 'US', 'eu']) r, generate_series(1, 20) n;
INSERT INTO asof_map.multi (region, n, valid_from)
SELECT r, n, timestamp '2024-01-01' + (n + 10 || ' days')::interval
  FROM unnest(ARRAY['EU', 'US']) r, generate_series(3, 20, 3) n;
SELECT scd2.register('asof_map.multi', ARRAY['region', 'n']);
CREATE TABLE asof_map.multi_keys AS
SELECT ROW(r, n)::text AS key, r, n
  FROM unnest(ARRAY['EU', 'US', 'eu', 'XX']) r, generate_series(0, 21) n;
CREATE FUNCTION asof_map.multi_check(key_expr text, OUT checked bigint, OUT map_mismatches bigint,
                                     OUT join_mismatches bigint, OUT hits bigint)
LANGUAGE plpgsql AS $$
DECLARE
    messages text := current_setting('client_min_messages');
BEGIN
    CREATE TEMP TABLE asof_grid AS
    SELECT k.r, k.n, g.at, NULL::bigint AS probe, NULL::bigint AS map
      FROM asof_map.multi_keys k,
           (SELECT DISTINCT b.at FROM (
                SELECT valid_from::timestamptz FROM asof_map.multi
                UNION ALL SELECT valid_to::timestamptz FROM asof_map.multi
                UNION ALL SELECT valid_from::timestamptz - interval '1 microsecond' FROM asof_map.multi) b(at)
             WHERE b.at IS NOT NULL) g;
    SET LOCAL scd2.asof_bulk_threshold = 0;
    EXECUTE format('UPDATE asof_grid g SET probe = scd2.asof(%L, g.at, %s)', 'asof_map.multi', key_expr);
    SET LOCAL scd2.asof_bulk_threshold = 1;
    PERFORM set_config('client_min_messages', 'debug1', true);  -- the map's form
    EXECUTE format('UPDATE asof_grid g SET map = scd2.asof(%L, g.at, %s)', 'asof_map.multi', key_expr);
    PERFORM set_config('client_min_messages', messages, true);
    SELECT count(*), count(*) FILTER (WHERE g.map IS DISTINCT FROM g.probe), count(g.map)
      INTO checked, map_mismatches, hits FROM asof_grid g;
    SELECT count(*) FILTER (WHERE g.probe IS DISTINCT FROM
               (SELECT d.sk FROM asof_map.multi d
                 WHERE d.region = g.r AND d.n = g.n AND g.at::timestamp >= d.valid_from
                   AND (d.valid_to IS NULL OR g.at::timestamp < d.valid_to)))
      INTO join_mismatches FROM asof_grid g;
    DROP TABLE asof_grid;
END
$$;
SELECT * FROM asof_map.multi_check('g.r, g.n');
SELECT * FROM asof_map.multi_check('g.r, g.n::int');
SELECT * FROM asof_map.multi_check('g.r::varchar, g.n::bigint');

-- scd2.asof_map_memory too small: the map is abandoned and every call
-- probes, with the same answers.
CREATE TABLE asof_map.medium (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        int NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz) WITH (autovacuum_enabled = off);
SELECT scd2.register('asof_map.medium', ARRAY['key']);
INSERT INTO asof_map.medium (key, valid_from, valid_to)
SELECT k * 7, '2024-01-01', '2024-02-01' FROM generate_series(1, 4000) k;
ANALYZE asof_map.medium;
INSERT INTO asof_map.medium (key, valid_from)
SELECT k * 7, '2024-02-01' FROM generate_series(1, 4000) k;
SET scd2.asof_map_memory = '64kB';
SELECT * FROM asof_map.check('asof_map.medium', 'SELECT generate_series(0, 28010, 5)', 'g.key');
RESET scd2.asof_map_memory;
SELECT * FROM asof_map.check('asof_map.medium', 'SELECT generate_series(0, 28010, 5)', 'g.key');

-- Dense keys (with holes) under a tight scd2.asof_map_memory: the index's
-- ends say the keys are dense, so the map is built as slots from the start
-- and fits (about 240kB); built as sorted int64 keys first, as before, the
-- build would outgrow 320kB and be abandoned.
CREATE TABLE asof_map.tight (
    sk         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    key        int NOT NULL,
    valid_from timestamptz NOT NULL,
    valid_to   timestamptz) WITH (autovacuum_enabled = off);
SELECT scd2.register('asof_map.tight', ARRAY['key']);
INSERT INTO asof_map.tight (key, valid_from)
SELECT k, '2024-01-01' FROM generate_series(1, 20000) k WHERE k % 10 <> 3;
ANALYZE asof_map.tight;
SET scd2.asof_map_memory = '320kB';
SELECT * FROM asof_map.check('asof_map.tight', 'SELECT generate_series(-1, 20002, 7)', 'g.key');
RESET scd2.asof_map_memory;

-- The setting: in kB like work_mem, at least 64kB; a smaller value is refused
-- and leaves the setting as it was.
SHOW scd2.asof_map_memory;
SET scd2.asof_map_memory = '1GB';
SHOW scd2.asof_map_memory;
DO $$
BEGIN
    PERFORM set_config('scd2.asof_map_memory', '32', false);
EXCEPTION WHEN invalid_parameter_value THEN
    RAISE NOTICE 'scd2.asof_map_memory = 32 refused (%)', SQLSTATE;  -- the text differs by version
END
$$;
SHOW scd2.asof_map_memory;
RESET scd2.asof_map_memory;

SELECT count(scd2.unregister(dimension)) AS unregistered
  FROM scd2.dimensions WHERE dimension::text LIKE 'asof_map.%';
SET client_min_messages = warning;
DROP SCHEMA asof_map CASCADE;
