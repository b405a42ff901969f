-- scd2.dimension_at(NULL::dim, at): every key's version valid at an
-- instant (valid_from <= at < valid_to), in the dimension's own row type.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA dat;
SET search_path = dat, public;

CREATE TABLE stg (id int, city text, at timestamptz, del boolean);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                  is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del');

-- A random history: 30 batches over 200 keys -- changes, deletes, keys
-- that come back, late changes that split history.
SELECT setseed(0.15);
DO $$
BEGIN
    FOR b IN 1..30 LOOP
        TRUNCATE dat.stg;
        INSERT INTO dat.stg
        SELECT k, 'c' || floor(random() * 4)::int,
               timestamptz '2024-01-01' + (b * 10 - floor(random() * 25)::int) * interval '1 day'
                   + floor(random() * 3)::int * interval '6 hours',
               random() < 0.1
          FROM generate_series(1, 200) k WHERE random() < 0.3;
        PERFORM count(*) FROM scd2.merge('dat.stg', 'dat.dim');
    END LOOP;
END $$;
SELECT count(*) > 1000 AS deep_history, count(DISTINCT id) AS keys,
       count(*) FILTER (WHERE is_current) < count(DISTINCT id) AS some_deleted
  FROM dim;
SELECT scd2_test.invariants('dim');

-- The instants: every version boundary exactly, a microsecond either
-- side of it, random instants, and before and after the whole history.
CREATE TEMP TABLE instants AS
SELECT DISTINCT t FROM (
    SELECT valid_from AS t FROM dim
    UNION ALL SELECT valid_to FROM dim WHERE valid_to IS NOT NULL
    UNION ALL SELECT valid_from - interval '1 microsecond' FROM dim
    UNION ALL SELECT valid_from + interval '1 microsecond' FROM dim
    UNION ALL SELECT timestamptz '2023-12-01' + random() * interval '400 days' FROM generate_series(1, 200)
    UNION ALL VALUES (timestamptz '2000-01-01'), (timestamptz '2100-01-01')) x;
SELECT count(*) > 500 AS many_instants FROM instants;

-- At every instant: exactly the rows of the half-open range filter.
SELECT count(*) AS instants_differing FROM instants i
 WHERE EXISTS (SELECT * FROM scd2.dimension_at(NULL::dim, i.t)
               EXCEPT ALL
               SELECT * FROM dim d WHERE d.valid_from <= i.t AND (d.valid_to IS NULL OR d.valid_to > i.t))
    OR EXISTS (SELECT * FROM dim d WHERE d.valid_from <= i.t AND (d.valid_to IS NULL OR d.valid_to > i.t)
               EXCEPT ALL
               SELECT * FROM scd2.dimension_at(NULL::dim, i.t));
-- ... one version per key at most; after the last change, the current rows.
SELECT count(*) AS keys_with_two_versions FROM instants i
 WHERE EXISTS (SELECT id FROM scd2.dimension_at(NULL::dim, i.t) GROUP BY id HAVING count(*) > 1);
SELECT (SELECT count(*) FROM scd2.dimension_at(NULL::dim, '2100-01-01'))
       = (SELECT count(*) FROM dim WHERE is_current) AS current_rows_at_the_end;
SELECT count(*) AS rows_before_history FROM scd2.dimension_at(NULL::dim, '2000-01-01');

-- A key's boundary: the old version up to the instant, the new from it.
CREATE TEMP TABLE two AS
SELECT id, valid_to AS t FROM dim WHERE valid_to IS NOT NULL
   AND EXISTS (SELECT FROM dim n WHERE n.id = dim.id AND n.valid_from = dim.valid_to)
 ORDER BY id, valid_to LIMIT 1;
SELECT (SELECT d.valid_to FROM scd2.dimension_at(NULL::dim, two.t - interval '1 microsecond') d WHERE d.id = two.id) = two.t AS old_until,
       (SELECT d.valid_from FROM scd2.dimension_at(NULL::dim, two.t) d WHERE d.id = two.id) = two.t AS new_from
  FROM two;
-- A deleted key is absent after its delete; a key is absent before it exists.
TRUNCATE stg;
INSERT INTO stg VALUES (1000, 'new', '2025-06-01', false);
SELECT count(*) FROM scd2.merge('stg', 'dim');
TRUNCATE stg;
INSERT INTO stg VALUES (1000, NULL, '2025-07-01', true);
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT t, (SELECT count(*) FROM scd2.dimension_at(NULL::dim, t) d WHERE d.id = 1000) AS versions_of_1000
  FROM (VALUES (timestamptz '2025-05-31'), ('2025-06-01'), ('2025-06-30 23:59:59.999999'), ('2025-07-01')) v(t);

-- The dimension's own row type, every column.
SELECT pg_typeof(d) AS row_type, d.* FROM scd2.dimension_at(NULL::dim, '2025-06-15') d WHERE id = 1000;

-- Date validity, current rows at 'infinity', other column names: at is
-- taken in the session's TimeZone.
CREATE TABLE dim_d (code text NOT NULL, price numeric, from_day date NOT NULL,
                    to_day date NOT NULL DEFAULT 'infinity');
SELECT scd2.register('dim_d', ARRAY['code'], valid_from_column => 'from_day',
                     valid_to_column => 'to_day', current_valid_to => 'infinity');
INSERT INTO dim_d VALUES ('a', 1, '2024-01-01', '2024-03-01'), ('a', 2, '2024-03-01', 'infinity'),
                         ('b', 5, '2024-02-01', '2024-02-15');
SELECT t, string_agg(code || '=' || price, ', ' ORDER BY code) AS versions
  FROM (VALUES (timestamptz '2023-12-31 23:59'), ('2024-01-01'), ('2024-02-14 23:00'),
               ('2024-02-15'), ('2024-02-29 12:00'), ('2024-03-01'), ('2999-01-01')) v(t)
  LEFT JOIN LATERAL scd2.dimension_at(NULL::dim_d, t) ON true
 GROUP BY t ORDER BY t;
SET TimeZone = 'Pacific/Auckland';
-- 2024-02-14 23:00 UTC is already the 15th in Auckland: b is gone
SELECT string_agg(code || '=' || price, ', ' ORDER BY code) AS versions
  FROM scd2.dimension_at(NULL::dim_d, '2024-02-14 23:00+00');
SET TimeZone = 'UTC';

-- Timestamp (without time zone) validity.
CREATE TABLE dim_ts (id int NOT NULL, v text, valid_from timestamp NOT NULL, valid_to timestamp);
SELECT scd2.register('dim_ts', ARRAY['id']);
INSERT INTO dim_ts VALUES (1, 'x', '2024-01-01 10:00', '2024-01-01 12:00'), (1, 'y', '2024-01-01 12:00', NULL);
SELECT t, (SELECT v FROM scd2.dimension_at(NULL::dim_ts, t)) AS v
  FROM (VALUES (timestamptz '2024-01-01 09:59:59'), ('2024-01-01 10:00'), ('2024-01-01 11:59:59.999999'),
               ('2024-01-01 12:00')) x(t);

-- Errors.
SELECT * FROM scd2.dimension_at(NULL::int, now());
CREATE TABLE not_a_dim (id int);
SELECT * FROM scd2.dimension_at(NULL::not_a_dim, now());
SELECT * FROM scd2.dimension_at(NULL::dim, NULL);
-- The caller's own rights on the table apply.
CREATE ROLE scd2_dat_user;
GRANT USAGE ON SCHEMA dat TO scd2_dat_user;
SET ROLE scd2_dat_user;
SELECT count(*) FROM scd2.dimension_at(NULL::dim, now());
RESET ROLE;
REVOKE ALL ON SCHEMA dat FROM scd2_dat_user;
DROP ROLE scd2_dat_user;
