-- The basic rules of a load (DESIGN.md semantics 1-3): new keys, changes
-- (to and from NULL; '~' is a value, not NULL), unchanged keys untouched,
-- idempotent reruns; change feed, metrics and audit row agree.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA basic;
SET search_path = basic, public;

CREATE TABLE stg (id int, name text, city text);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);

-- 1. New keys.
INSERT INTO stg VALUES (1, 'Ann', 'Oslo'), (2, 'Bob', NULL), (3, 'Cid', '~'), (4, 'Dee', 'Rome');
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-01-01');
SELECT * FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- 2. Changes: NULL -> value, '~' -> NULL, value -> value; unchanged key 4.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Ann', 'Bergen'), (2, 'Bob', '~'), (3, 'Cid', NULL), (4, 'Dee', 'Rome');
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT action, surrogate_key, business_key, valid_from, valid_to FROM feed
 ORDER BY business_key->>'id', valid_from, action;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');
SELECT sk, id, name, city, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;

-- 3. Rerunning the same batch is a no-op: nothing written, no row touched.
SELECT xmin AS before_xmin FROM dim WHERE id = 4 \gset
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-03-01');
SELECT count(*) AS feed_rows FROM feed;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT xmin = :'before_xmin' AS row_untouched FROM dim WHERE id = 4;
SELECT count(*) AS dimension_rows FROM dim;

-- A change in a column the staging table does not have is impossible;
-- staging with extra columns: they are ignored.
ALTER TABLE stg ADD COLUMN load_batch int DEFAULT 7;
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-03-01');
SELECT count(*) AS feed_rows FROM feed;

-- An empty staging table is a no-op too.
TRUNCATE stg;
SELECT * FROM scd2.merge('stg', 'dim', '2024-04-01');
SELECT * FROM scd2_test.last_metrics('dim');

-- effective_at defaults to now(): the new version starts at the
-- transaction's start.
INSERT INTO stg VALUES (4, 'Dee', 'Milan');
BEGIN;
SELECT action, valid_from = now() AS starts_now FROM scd2.merge('stg', 'dim') ORDER BY 1;
SELECT valid_to = now() AS closed_now FROM dim WHERE id = 4 AND NOT is_current;
COMMIT;

-- Untracked ("other") columns: copied into each new version, never
-- compared.  Register with city tracked only; a name change alone is not a
-- change, but a new version carries the staged name.
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city']);
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Annie', 'Bergen'), (2, 'Robert', 'Paris');
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-05-01');
SELECT action, business_key, valid_from, valid_to FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT id, name, city, valid_from, valid_to FROM dim WHERE id IN (1, 2) ORDER BY id, valid_from;
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- Dimension columns missing from staging get their defaults.
ALTER TABLE dim ADD COLUMN source text DEFAULT 'crm';
TRUNCATE stg;
INSERT INTO stg VALUES (9, 'Ivy', 'Lima');
SELECT action FROM scd2.merge('stg', 'dim', '2024-06-01');
SELECT id, name, source FROM dim WHERE id = 9;

DROP SCHEMA basic CASCADE;
