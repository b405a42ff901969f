-- Deletes (semantics 5): by a delete marker column, and by snapshot mode
-- (keys missing from a full extract are closed); a key that comes back
-- opens a new version.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA del;
SET search_path = del, public;

-- Marker column.
CREATE TABLE stg (id int, city text, deleted boolean);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                  is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], delete_column => 'deleted');
INSERT INTO stg VALUES (1, 'Oslo', false), (2, 'Rome', NULL), (3, 'Lima', false);
SELECT count(*) FROM scd2.merge('stg', 'dim', '2024-01-01');

TRUNCATE stg;
INSERT INTO stg VALUES (1, NULL, true),        -- delete
                       (2, 'Rome', true),      -- delete (values ignored)
                       (4, 'Kyiv', true);      -- delete of an unknown key: nothing
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT * FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- Deleting again is a no-op; the key comes back later with a new version.
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', '2024-03-01');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Oslo', false), (2, 'Milan', false);
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-04-01');
SELECT * FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT id, city, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- Snapshot mode: the staging table is the full extract.
CREATE TABLE snap (id int, city text);
CREATE TABLE sdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                   city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('sdim', ARRAY['id'], mode => 'snapshot');
INSERT INTO snap VALUES (1, 'Oslo'), (2, 'Rome'), (3, 'Lima');
SELECT count(*) FROM scd2.merge('snap', 'sdim', '2024-01-01');
DELETE FROM snap WHERE id = 2;              -- 2 vanished from the source
UPDATE snap SET city = 'Cusco' WHERE id = 3;
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('snap', 'sdim', '2024-02-01');
SELECT * FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT * FROM scd2_test.last_metrics('sdim');
SELECT scd2_test.metrics_match_feed('sdim'), scd2_test.invariants('sdim');
-- Same extract again: nothing; 2 comes back: a new version.
SELECT count(*) AS feed_rows FROM scd2.merge('snap', 'sdim', '2024-03-01');
INSERT INTO snap VALUES (2, 'Rome');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('snap', 'sdim', '2024-04-01');
SELECT id, city, valid_from, valid_to, is_current FROM sdim ORDER BY id, valid_from;
-- An empty extract closes everything -- only when allowed explicitly (it is
-- refused by default: load_safety).
TRUNCATE snap;
BEGIN;
SET LOCAL scd2.allow_empty_snapshot = on;
SELECT action, count(*) FROM scd2.merge('snap', 'sdim', '2024-05-01') GROUP BY action;
COMMIT;
SHOW scd2.allow_empty_snapshot;
SELECT count(*) FILTER (WHERE is_current) AS current_rows FROM sdim;

DROP SCHEMA del CASCADE;
