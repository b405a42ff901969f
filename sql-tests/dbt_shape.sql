-- dbt's snapshot shape (issue 13): a dimension column named like the
-- effective column is filled from staging and never tracked; the current
-- rows' valid_to may be any date/time value ('9999-12-31'), used by loads,
-- the current-row index and asof; detect => 'timestamp' follows dbt's
-- timestamp strategy (a change is exactly a later effective time).
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA dbtshape;
SET search_path = dbtshape, public;

------------------------------------------------------------------------------
-- (a) the effective column kept in the dimension
------------------------------------------------------------------------------
CREATE TABLE stg_a (id int, city text, updated_at timestamptz);
CREATE TABLE dim_a (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                    updated_at timestamptz, valid_from timestamptz NOT NULL, valid_to timestamptz,
                    is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim_a', ARRAY['id'], effective_column => 'updated_at');
INSERT INTO stg_a VALUES (1, 'Oslo', '2024-01-01'), (2, 'Rome', '2024-01-01');
CALL scd2.apply('stg_a', 'dim_a', now(), NULL) \gset
-- A later updated_at alone is no change (never tracked); a changed city is,
-- and the new version carries its own updated_at.
TRUNCATE stg_a;
INSERT INTO stg_a VALUES (1, 'Oslo', '2024-02-01'), (2, 'Milan', '2024-02-01');
CALL scd2.apply('stg_a', 'dim_a', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_a');
SELECT id, city, updated_at, valid_from, valid_to, is_current FROM dim_a ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim_a');
-- The general path (several rows of a key, a late row) copies it too; a
-- row that repeats the state in force collapses, keeping the first
-- updated_at.
TRUNCATE stg_a;
INSERT INTO stg_a VALUES (1, 'Bergen', '2024-03-01'), (1, 'Bergen', '2024-04-01'), (1, 'Paris', '2024-05-01'),
                         (2, 'Turin', '2024-01-15');
CALL scd2.apply('stg_a', 'dim_a', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_a');
SELECT id, city, updated_at, valid_from, valid_to FROM dim_a ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim_a');
-- It cannot be tracked, Type 1 or a key.
SELECT scd2.register('dim_a', ARRAY['id'], tracked => ARRAY['city', 'updated_at'], effective_column => 'updated_at');
SELECT scd2.register('dim_a', ARRAY['id'], type1 => ARRAY['updated_at'], effective_column => 'updated_at');

------------------------------------------------------------------------------
-- (b) current_valid_to = '9999-12-31'
------------------------------------------------------------------------------
CREATE TABLE stg_b (id int, city text, changed_at timestamptz);
CREATE TABLE dim_b (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                    valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL DEFAULT '9999-12-31');
-- Stored in canonical form, whatever the session's DateStyle.
SET DateStyle = 'SQL, DMY';
SELECT scd2.register('dim_b', ARRAY['id'], effective_column => 'changed_at', current_valid_to => '31/12/9999');
RESET DateStyle;
SELECT current_valid_to FROM scd2.dimensions WHERE dimension = 'dim_b'::regclass;
SELECT pg_get_indexdef('dim_b_scd2_current'::regclass);
INSERT INTO stg_b VALUES (1, 'Oslo', '2024-01-01'), (2, 'Rome', '2024-01-01');
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
TRUNCATE stg_b;
INSERT INTO stg_b VALUES (1, 'Bergen', '2024-02-01'), (1, 'Paris', '2024-03-01'), (2, 'Rome', '2024-02-01'),
                         (3, 'Lima', '2024-02-01');
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_b');
-- A late row splits history; a delete-free rerun writes nothing.
TRUNCATE stg_b;
INSERT INTO stg_b VALUES (2, 'Milan', '2023-06-01');
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_b');
SELECT sk, id, city, valid_from, valid_to FROM dim_b ORDER BY id, valid_from;
-- One current row per key, enforced with the sentinel.
INSERT INTO dim_b (id, city, valid_from) VALUES (1, 'Dup', '2025-01-01');
-- asof: the version valid at an instant; the current one until the sentinel.
SELECT i.at, scd2.asof('dim_b', i.at, 1) AS key1, scd2.asof('dim_b', i.at, 2) AS key2
  FROM (VALUES (timestamptz '2023-12-31'), ('2024-01-15'), ('2024-02-15'), ('2030-01-01'),
               ('9999-12-30')) i(at) ORDER BY i.at;
-- An effective time at or after the sentinel is refused; nothing is written.
TRUNCATE stg_b;
INSERT INTO stg_b VALUES (1, 'Later', '2024-05-01'), (3, 'Never', '9999-12-31');
SELECT count(*) AS runs_before FROM scd2.audit_log \gset
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
BEGIN;
CALL scd2.apply('stg_b', 'dim_b', now(), NULL) \gset
ROLLBACK;
SELECT count(*) AS dim_rows, max(valid_from) AS last_start FROM dim_b;
-- snapshot mode with the sentinel: a missing key is closed at effective_at.
TRUNCATE stg_b;
INSERT INTO stg_b VALUES (1, 'Paris', '2024-03-01'), (2, 'Rome', '2024-02-01');
SELECT scd2.register('dim_b', ARRAY['id'], effective_column => 'changed_at', mode => 'snapshot',
                     current_valid_to => '9999-12-31');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_b', 'dim_b', '2024-06-01')
 ORDER BY business_key->>'id', valid_from;
SELECT id, city, valid_from, valid_to FROM dim_b WHERE id = 3 ORDER BY valid_from;
-- create_dimension with a sentinel: valid_to's default.
CREATE TABLE stg_d (id int, v text);
SELECT scd2.create_dimension('dim_d', 'stg_d', ARRAY['id'], current_valid_to => '9999-12-31');
SELECT pg_get_expr(adbin, adrelid) AS valid_to_default FROM pg_attrdef
 WHERE adrelid = 'dim_d'::regclass AND adnum = (SELECT attnum FROM pg_attribute WHERE attrelid = 'dim_d'::regclass AND attname = 'valid_to');
INSERT INTO stg_d VALUES (1, 'a');
CALL scd2.apply('stg_d', 'dim_d', '2024-01-01', NULL) \gset
TRUNCATE stg_d;
INSERT INTO stg_d VALUES (1, 'b');
CALL scd2.apply('stg_d', 'dim_d', '2024-02-01', NULL) \gset
SELECT id, v, valid_from, valid_to, is_current FROM dim_d ORDER BY valid_from;
-- Bad values.
SELECT scd2.register('dim_b', ARRAY['id'], current_valid_to => 'someday');
SELECT scd2.register('dim_b', ARRAY['id'], current_valid_to => '-infinity');
SELECT scd2.register('dim_b', ARRAY['id'], current_valid_to => NULL);

------------------------------------------------------------------------------
-- (c) detect => 'timestamp'
------------------------------------------------------------------------------
CREATE TABLE stg_c (id int, city text, updated_at timestamptz);
CREATE TABLE dim_c (id int NOT NULL, city text, updated_at timestamptz,
                    dbt_valid_from timestamptz NOT NULL, dbt_valid_to timestamptz);
SELECT scd2.register('dim_c', ARRAY['id'], effective_column => 'updated_at', detect => 'timestamp',
                     valid_from_column => 'dbt_valid_from', valid_to_column => 'dbt_valid_to');
SELECT detect FROM scd2.dimensions WHERE dimension = 'dim_c'::regclass;
INSERT INTO stg_c VALUES (1, 'Oslo', '2024-01-01'), (2, 'Rome', '2024-01-01'), (3, 'Lima', '2024-01-01');
CALL scd2.apply('stg_c', 'dim_c', now(), NULL) \gset
TRUNCATE stg_c;
INSERT INTO stg_c VALUES
    (1, 'Oslo', '2024-02-01'),      -- later, same values: a change
    (2, 'Milan', '2024-01-01'),     -- same instant, other values: ignored, no error
    (3, 'Quito', '2023-06-01'),     -- earlier: ignored, no history split
    (4, 'Nice', '2024-02-01');      -- new key
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg_c', 'dim_c');
SELECT action, business_key, valid_from, valid_to FROM feed ORDER BY business_key->>'id', valid_from, action;
SELECT * FROM scd2_test.last_metrics('dim_c');
-- Several later rows of one key: one version per instant, values not
-- compared; earlier rows of that key ignored; a rerun writes nothing.
TRUNCATE stg_c;
INSERT INTO stg_c VALUES (2, 'Rome', '2024-03-01'), (2, 'Rome', '2024-04-01'), (2, 'Bari', '2023-01-01'),
                         (2, 'Rome', '2024-04-01');
CALL scd2.apply('stg_c', 'dim_c', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_c');
CALL scd2.apply('stg_c', 'dim_c', now(), NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_c');
SELECT id, city, updated_at, dbt_valid_from, dbt_valid_to FROM dim_c ORDER BY id, dbt_valid_from;
-- Two different rows at one later instant are still ambiguous.
TRUNCATE stg_c;
INSERT INTO stg_c VALUES (4, 'Nice', '2024-05-01'), (4, 'Cannes', '2024-05-01');
CALL scd2.apply('stg_c', 'dim_c', now(), NULL) \gset
-- A closed key (deleted in snapshot mode) comes back only after its end.
SELECT scd2.register('dim_c', ARRAY['id'], effective_column => 'updated_at', detect => 'timestamp',
                     mode => 'snapshot',
                     valid_from_column => 'dbt_valid_from', valid_to_column => 'dbt_valid_to');
TRUNCATE stg_c;
INSERT INTO stg_c VALUES (1, 'Oslo', '2024-02-01'), (2, 'Rome', '2024-04-01'), (4, 'Nice', '2024-02-01');
CALL scd2.apply('stg_c', 'dim_c', '2024-06-01', NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_c');
TRUNCATE stg_c;
INSERT INTO stg_c VALUES (1, 'Oslo', '2024-02-01'), (2, 'Rome', '2024-04-01'), (4, 'Nice', '2024-02-01'),
                         (3, 'Lima', '2024-05-01');
CALL scd2.apply('stg_c', 'dim_c', '2024-07-01', NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_c');
UPDATE stg_c SET updated_at = '2024-06-15' WHERE id = 3;
CALL scd2.apply('stg_c', 'dim_c', '2024-07-01', NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim_c');
SELECT id, city, dbt_valid_from, dbt_valid_to FROM dim_c WHERE id = 3 ORDER BY dbt_valid_from;
-- Refused registrations.
SELECT scd2.register('dim_c', ARRAY['id'], detect => 'timestamp',
                     valid_from_column => 'dbt_valid_from', valid_to_column => 'dbt_valid_to');
SELECT scd2.register('dim_a', ARRAY['id'], effective_column => 'updated_at', detect => 'timestamp',
                     type1 => ARRAY['city']);
SELECT scd2.register('dim_c', ARRAY['id'], effective_column => 'updated_at', detect => 'check',
                     valid_from_column => 'dbt_valid_from', valid_to_column => 'dbt_valid_to');
SELECT detect FROM scd2.dimensions WHERE dimension = 'dim_c'::regclass;

RESET search_path;
