-- History repair (semantics 6): late-arriving changes split the version
-- that covered their instant; Type 1 columns are overwritten in place on
-- the current version; dry runs write nothing.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA hist;
SET search_path = hist, public;

CREATE TABLE stg (id int, city text, tier text, phone text, at timestamptz, del boolean);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, tier text, phone text, valid_from timestamptz NOT NULL,
                  valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city', 'tier'], type1 => ARRAY['phone'],
                     effective_column => 'at', delete_column => 'del', order_free => false);

-- History: key 1 Oslo [Jan, Apr) then Bergen [Apr, -); key 2 Rome
-- [Jan, Mar) then deleted; key 3 Lima [Jan, -).
INSERT INTO stg VALUES (1, 'Oslo', 'a', '111', '2024-01-01', false),
                       (1, 'Bergen', 'a', '111', '2024-04-01', false),
                       (2, 'Rome', 'b', '222', '2024-01-01', false),
                       (2, NULL, NULL, NULL, '2024-03-01', true),
                       (3, 'Lima', 'c', '333', '2024-01-01', false);
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT id, city, tier, phone, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;
CREATE TEMP TABLE history_before AS SELECT * FROM dim;

-- A late change splits the covering version; nothing else is rewritten.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Trondheim', 'a', '111', '2024-02-01', false);
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim');
SELECT * FROM feed ORDER BY valid_from, action;
SELECT id, city, tier, valid_from, valid_to, is_current FROM dim WHERE id = 1 ORDER BY valid_from;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');
-- Existing rows: never deleted, tracked attributes never changed.
SELECT count(*) AS rows_lost FROM history_before b
 WHERE NOT EXISTS (SELECT FROM dim d WHERE d.sk = b.sk AND d.city IS NOT DISTINCT FROM b.city
                   AND d.tier IS NOT DISTINCT FROM b.tier AND d.valid_from = b.valid_from);

-- A late change equal to the state in force: no-op.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Oslo', 'a', '111', '2024-01-15', false);
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');
SELECT unchanged FROM scd2_test.last_metrics('dim');

-- A late change before the first version: a new first version ending
-- where the old first one starts.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Cusco', 'c', '333', '2023-06-01', false);
SELECT action, valid_from, valid_to FROM scd2.merge('stg', 'dim');

-- Key 2 was deleted in March: a change after that brings it back from
-- its instant.
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Naples', 'b', '222', '2024-05-01', false);
SELECT action, valid_from, valid_to FROM scd2.merge('stg', 'dim');
-- A late change inside the gap [Mar, May) the delete left: a version for
-- the gap, ending where the next version starts.
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Genoa', 'b', '222', '2024-04-01', false);
SELECT action, valid_from, valid_to FROM scd2.merge('stg', 'dim');
SELECT id, city, valid_from, valid_to, is_current FROM dim WHERE id = 2 ORDER BY valid_from;

-- A late delete shortens the covering version and leaves a gap.
TRUNCATE stg;
INSERT INTO stg VALUES (1, NULL, NULL, NULL, '2024-03-01', true);
SELECT action, valid_from, valid_to FROM scd2.merge('stg', 'dim') ORDER BY valid_from;
SELECT id, city, valid_from, valid_to, is_current FROM dim WHERE id = 1 ORDER BY valid_from;

-- A late change at exactly an existing version's start with other values:
-- refused, naming the key; with equal values: a no-op.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Stavanger', 'a', '111', '2024-02-01', false);
SELECT * FROM scd2.merge('stg', 'dim');
UPDATE stg SET city = 'Trondheim';
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');

-- Late and in-order changes of one key in one batch compose.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Arequipa', 'c', '333', '2023-09-01', false),   -- late: splits Cusco
                       (3, 'Lima', 'c', '333', '2024-03-01', false),       -- equal to Lima: no-op
                       (3, 'Puno', 'c', '333', '2024-07-01', false);       -- in order
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim');
SELECT action, valid_from, valid_to FROM feed ORDER BY valid_from, action;
SELECT id, city, valid_from, valid_to, is_current FROM dim WHERE id = 3 ORDER BY valid_from;
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- Type 1: a phone change alone updates the current row in place.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Puno', 'c', '999', '2024-08-01', false);
DROP TABLE feed;
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim');
SELECT action, valid_from, valid_to FROM feed;
SELECT city, phone, valid_from, valid_to FROM dim WHERE id = 3 ORDER BY valid_from;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');
-- Type 1 + tracked change: a new version carrying the new phone; the old
-- version keeps its phone.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Tacna', 'c', '888', '2024-09-01', false);
SELECT action, valid_from, valid_to FROM scd2.merge('stg', 'dim') ORDER BY valid_from;
SELECT city, phone, valid_from, valid_to FROM dim WHERE id = 3 AND valid_from >= '2024-07-01' ORDER BY valid_from;
-- A Type 1 change arriving late does not touch closed history.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Puno', 'c', '000', '2024-08-15', false);
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');

-- Dry run: the feed it would write, nothing written, a dry_run audit row.
SELECT count(*) AS rows_before FROM dim \gset
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Tacna', 'c', '777', '2024-10-01', false),
                       (4, 'Quito', 'd', '444', '2024-10-01', false),
                       (1, 'Bodø', 'a', '111', '2024-10-01', false);
SELECT * FROM scd2.merge('stg', 'dim', dry_run => true) ORDER BY business_key->>'id', valid_from, action;
SELECT count(*) = :rows_before AS nothing_written FROM dim;
SELECT * FROM scd2_test.last_metrics('dim');
-- The real run writes what the dry run showed.
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim')
 ORDER BY business_key->>'id', valid_from, action;

DROP SCHEMA hist CASCADE;
