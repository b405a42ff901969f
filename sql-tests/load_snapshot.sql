-- Snapshot mode leaves the extract current (issue 17, class 11): after a
-- snapshot-mode load every key of the extract has a current version with
-- the extract's values, and no other key has one -- or the load is refused
-- and writes nothing.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA snap;
SET search_path = snap, public;

CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                  valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'updated_at', mode => 'snapshot');
CREATE TABLE stg (id int, v text, updated_at timestamptz);

-- The extract is current: keys (and values) of the current versions equal
-- the extract's latest row per key.
CREATE FUNCTION extract_is_current() RETURNS boolean LANGUAGE sql AS $$
    SELECT coalesce(array_agg(ROW(id, v)::text ORDER BY id), '{}')
           = (SELECT coalesce(array_agg(ROW(id, v)::text ORDER BY id), '{}')
                FROM (SELECT DISTINCT ON (id) id, v FROM snap.stg ORDER BY id, updated_at DESC) s)
      FROM snap.dim WHERE valid_to IS NULL
$$;
CREATE FUNCTION state() RETURNS text LANGUAGE sql AS $$
    SELECT pg_catalog.md5(coalesce(string_agg(d::text, ',' ORDER BY d::text), ''))
           || ' / ' || (SELECT count(*) FROM scd2.audit_log) FROM snap.dim d
$$;

-- The issue's example: loaded at 2020-01-01, absent from the extract of
-- 2020-01-02, present again at 2020-01-04 with updated_at 2020-01-01 12:00.
INSERT INTO stg VALUES (1, 'a', '2020-01-01'), (2, 'a', '2020-01-01');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-01') ORDER BY 2, 3;
DELETE FROM stg WHERE id = 1;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-02') ORDER BY 2, 3;
SELECT extract_is_current();
INSERT INTO stg VALUES (1, 'b', '2020-01-01 12:00');
-- It comes back at its deletion (the later of the deletion and its own
-- effective time); the version it had is not rewritten.
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-04') ORDER BY 2, 3;
SELECT id, v, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;
SELECT extract_is_current();
SELECT scd2.asof('dim', '2020-01-01 18:00', 1) = (SELECT sk FROM dim WHERE id = 1 AND v = 'a') AS asof_before_deletion,
       scd2.asof('dim', '2020-01-03', 1) = (SELECT sk FROM dim WHERE id = 1 AND v = 'b') AS asof_after_return;
-- The same extract again: nothing to do.
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', '2020-01-05');

-- A key that comes back with a row after its deletion starts at that row.
DELETE FROM stg WHERE id = 2;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-06') ORDER BY 2, 3;
INSERT INTO stg VALUES (2, 'c', '2020-01-07');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-08') ORDER BY 2, 3;
SELECT extract_is_current();

-- Several rows of a returning key: the older ones are late changes, the
-- latest comes back at the deletion.
DELETE FROM stg WHERE id = 2;
SELECT count(*) FROM scd2.merge('stg', 'dim', '2020-01-10');
INSERT INTO stg VALUES (2, 'd', '2020-01-08'), (2, 'e', '2020-01-09');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-11') ORDER BY 2, 3, 1;
SELECT id, v, valid_from, valid_to, is_current FROM dim WHERE id = 2 ORDER BY valid_from;
SELECT extract_is_current();

-- The extract again: nothing to do (key 1's row is older than its current
-- version, with its values).
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', '2020-01-12');
-- A latest row older than the key's current version, with other values:
-- the extract cannot be made current without rewriting history: refused.
SELECT state() AS before \gset
UPDATE stg SET v = 'z', updated_at = '2020-01-01 18:00' WHERE id = 1;
SELECT * FROM scd2.merge('stg', 'dim', '2020-01-12');
SELECT state() = :'before' AS nothing_written;
UPDATE stg SET updated_at = '2020-01-12' WHERE id = 1;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-01-12') ORDER BY 2, 3, 1;
SELECT extract_is_current();

-- A key missing from the extract whose current version starts after
-- effective_at: deleting it then would leave it current: refused.
INSERT INTO stg VALUES (3, 'a', '2020-02-01');
SELECT count(*) FROM scd2.merge('stg', 'dim', '2020-02-01');
DELETE FROM stg WHERE id = 3;
SELECT state() AS before \gset
SELECT * FROM scd2.merge('stg', 'dim', '2020-01-20');
SELECT state() = :'before' AS nothing_written;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim', '2020-02-02') ORDER BY 2, 3;
SELECT extract_is_current();

RESET search_path;
