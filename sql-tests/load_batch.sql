-- Several rows of one key in one batch (semantics 4): one version per real
-- change in effective-time order, consecutive equal states collapse, exact
-- duplicates collapse, ambiguous duplicates are refused naming the key.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA batch;
SET search_path = batch, public;

CREATE TABLE stg (id int, city text, tier text, changed_at timestamptz);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, tier text, valid_from timestamptz NOT NULL,
                  valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'changed_at', order_free => false);

INSERT INTO stg VALUES (1, 'Oslo', 'gold', '2024-01-01'), (2, 'Rome', NULL, '2024-01-01');
SELECT count(*) FROM scd2.merge('stg', 'dim');
TRUNCATE stg;

-- Key 1: four changes, two of them repeating the state before them, rows
-- out of order in the table; key 2: an exact duplicate pair and a change
-- to NULL; key 3: a new key with two versions; key 4: new, then equal.
INSERT INTO stg VALUES
  (1, 'Bergen', 'gold', '2024-03-01'),
  (1, 'Oslo',   'gold', '2024-02-01'),   -- equal to the current version
  (1, 'Bergen', 'gold', '2024-04-01'),   -- equal to the row before
  (1, 'Bergen', NULL,   '2024-05-01'),
  (2, 'Rome',   NULL,   '2024-02-01'),
  (2, 'Rome',   NULL,   '2024-02-01'),   -- exact duplicate
  (2, NULL,     NULL,   '2024-03-01'),
  (3, 'Lima',   'new',  '2024-02-01'),
  (3, 'Lima',   'old',  '2024-02-15'),
  (4, 'Kyiv',   NULL,   '2024-02-01'),
  (4, 'Kyiv',   NULL,   '2024-02-20');
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim');
SELECT * FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT id, city, tier, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');

-- Rerun: idempotent.
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');
SELECT * FROM scd2_test.last_metrics('dim');

-- Ambiguous: same key and instant, different values.  Nothing is written.
SELECT count(*) AS rows_before FROM dim \gset
TRUNCATE stg;
INSERT INTO stg VALUES (5, 'Paris', 'a', '2024-06-01'), (1, 'Nice', 'x', '2024-06-01'),
                       (1, 'Nice', 'y', '2024-06-01');
SELECT * FROM scd2.merge('stg', 'dim');
SELECT count(*) = :rows_before AS nothing_written FROM dim;

-- Composite business keys with text and a capitalised, spaced column name.
CREATE TABLE "Stg Product" ("SKU" text, "Region Code" text, price numeric, at timestamptz);
CREATE TABLE "Dim Product" (sk bigint GENERATED ALWAYS AS IDENTITY, "SKU" text NOT NULL,
                            "Region Code" text NOT NULL, price numeric,
                            valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('"Dim Product"', ARRAY['SKU', 'Region Code'], effective_column => 'at', order_free => false);
INSERT INTO "Stg Product" VALUES ('a-1', 'EU', 10, '2024-01-01'), ('a-1', 'US', 11, '2024-01-01'),
                                 ('a-1', 'EU', 12, '2024-02-01'), ('a-1', 'EU', 12.0, '2024-03-01');
SELECT * FROM scd2.merge('"Stg Product"', '"Dim Product"') ORDER BY business_key::text, valid_from, action;
SELECT "SKU", "Region Code", price, valid_from, valid_to FROM "Dim Product" ORDER BY 1, 2, 4;

DROP SCHEMA batch CASCADE;
