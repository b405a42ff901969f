-- Bad input (semantics 7): a clear error naming the key or column, and
-- nothing written.  Identifiers with quotes, spaces, capitals and schemas.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA err;
SET search_path = err, public;

CREATE TABLE stg (id int, city text, eff timestamptz);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                  is_current boolean NOT NULL DEFAULT true);
CREATE TABLE other_table (id int, city text);
INSERT INTO stg VALUES (1, 'Oslo', '2024-01-01');

\set VERBOSITY default
-- Unregistered dimension.
SELECT * FROM scd2.merge('stg', 'other_table');
CALL scd2.apply('stg', 'other_table');
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'eff', order_free => false);
-- The staging table is the dimension.
SELECT * FROM scd2.merge('dim', 'dim');
-- NULL arguments.
SELECT * FROM scd2.merge(NULL, 'dim');
SELECT * FROM scd2.merge('stg', 'dim', NULL);
-- Staging missing the key, a tracked column, the effective column.
CREATE TABLE stg_nokey (city text, eff timestamptz);
SELECT * FROM scd2.merge('stg_nokey', 'dim');
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city'], effective_column => 'eff', order_free => false);
CREATE TABLE stg_nocity (id int, eff timestamptz);
SELECT * FROM scd2.merge('stg_nocity', 'dim');
CREATE TABLE stg_noeff (id int, city text);
SELECT * FROM scd2.merge('stg_noeff', 'dim');
-- Incompatible types: key, tracked column, effective column, delete marker.
CREATE TABLE stg_badkey (id uuid, city text, eff timestamptz);
SELECT * FROM scd2.merge('stg_badkey', 'dim');
-- (Any type can be assigned to a text column, as in INSERT ... SELECT.)
CREATE TABLE stg_anycity (id int, city point, eff timestamptz);
SELECT * FROM scd2.merge('stg_anycity', 'dim');
CREATE TABLE stg_badeff (id int, city text, eff int);
SELECT * FROM scd2.merge('stg_badeff', 'dim');
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'eff', delete_column => 'del', order_free => false);
CREATE TABLE stg_baddel (id int, city text, eff timestamptz, del text);
SELECT * FROM scd2.merge('stg_baddel', 'dim');
SELECT * FROM scd2.merge('stg', 'dim');
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'eff', order_free => false);
-- Assignable types are fine: bigint key, varchar city, date effective time.
CREATE TABLE stg_cast (id bigint, city varchar(10), eff date);
INSERT INTO stg_cast VALUES (1, 'Oslo', '2024-01-01');
SELECT action, business_key, valid_from FROM scd2.merge('stg_cast', 'dim');
-- NULL business key, NULL effective time: refused, nothing written.
INSERT INTO stg VALUES (NULL, 'Nowhere', '2024-02-01'), (2, 'Rome', NULL), (3, 'Lima', '2024-02-01');
SELECT * FROM scd2.merge('stg', 'dim');
DELETE FROM stg WHERE id IS NULL;
SELECT * FROM scd2.merge('stg', 'dim');
SELECT count(*) AS dimension_rows FROM dim;
-- A staged change at the very instant an existing version starts, with
-- other values: existing versions are never rewritten.
DELETE FROM stg;
INSERT INTO stg VALUES (1, 'Bergen', '2024-01-01');
SELECT * FROM scd2.merge('stg', 'dim');
-- The same values at that instant are a no-op.
UPDATE stg SET city = 'Oslo';
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');
-- A dimension column dropped after registration.
CREATE TABLE dim2 (id int NOT NULL, city text, zone text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim2', ARRAY['id'], tracked => ARRAY['city', 'zone']);
ALTER TABLE dim2 DROP COLUMN zone;
SELECT * FROM scd2.merge('stg', 'dim2');
-- Staging sharing no column but the key.
CREATE TABLE dim3 (id int NOT NULL, colour text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim3', ARRAY['id']);
CREATE TABLE stg3 (id int, shade text);
SELECT * FROM scd2.merge('stg3', 'dim3');

-- Hostile identifiers: quotes, semicolons, spaces, capitals, unicode, and
-- a schema name needing quotes; the load treats them as names, never SQL.
CREATE SCHEMA "Sch""ema; DROP TABLE x";
CREATE TABLE "Sch""ema; DROP TABLE x"."Stg ""Q"" ;--" ("Ké y" int, "Ci'ty; --" text, "Valid" text);
CREATE TABLE "Sch""ema; DROP TABLE x"."Dim ""Q"" ;--" (
    "S K" bigint GENERATED ALWAYS AS IDENTITY, "Ké y" int NOT NULL, "Ci'ty; --" text,
    "Valid" text, "From" timestamptz NOT NULL, "To" timestamptz, "Current?" boolean);
SELECT scd2.register('"Sch""ema; DROP TABLE x"."Dim ""Q"" ;--"', ARRAY['Ké y'],
                     valid_from_column => 'From', valid_to_column => 'To',
                     is_current_column => 'Current?');
INSERT INTO "Sch""ema; DROP TABLE x"."Stg ""Q"" ;--" VALUES (1, 'a''b', 'x'), (2, NULL, 'y');
SELECT action, business_key FROM scd2.merge('"Sch""ema; DROP TABLE x"."Stg ""Q"" ;--"',
                                            '"Sch""ema; DROP TABLE x"."Dim ""Q"" ;--"', '2024-01-01')
 ORDER BY 2;
UPDATE "Sch""ema; DROP TABLE x"."Stg ""Q"" ;--" SET "Ci'ty; --" = 'c' WHERE "Ké y" = 2;
SELECT action, business_key FROM scd2.merge('"Sch""ema; DROP TABLE x"."Stg ""Q"" ;--"',
                                            '"Sch""ema; DROP TABLE x"."Dim ""Q"" ;--"', '2024-02-01')
 ORDER BY 2, 1;
SELECT "Ké y", "Ci'ty; --", "Valid", "From", "To", "Current?"
  FROM "Sch""ema; DROP TABLE x"."Dim ""Q"" ;--" ORDER BY 1, 4;
SELECT dimension, staging, status FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
DROP SCHEMA "Sch""ema; DROP TABLE x" CASCADE;

DROP SCHEMA err CASCADE;
