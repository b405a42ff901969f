-- dbt's snapshot shape (issue 13): a dimension column named like the
-- effective column is filled from staging and never tracked.
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
CALL scd2.apply('stg_a', 'dim_a') \gset
-- A later updated_at alone is no change (never tracked); a changed city is,
-- and the new version carries its own updated_at.
TRUNCATE stg_a;
INSERT INTO stg_a VALUES (1, 'Oslo', '2024-02-01'), (2, 'Milan', '2024-02-01');
CALL scd2.apply('stg_a', 'dim_a') \gset
SELECT * FROM scd2_test.last_metrics('dim_a');
SELECT id, city, updated_at, valid_from, valid_to, is_current FROM dim_a ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim_a');
-- The general path (several rows of a key, a late row) copies it too; a
-- row that repeats the state in force collapses, keeping the first
-- updated_at.
TRUNCATE stg_a;
INSERT INTO stg_a VALUES (1, 'Bergen', '2024-03-01'), (1, 'Bergen', '2024-04-01'), (1, 'Paris', '2024-05-01'),
                         (2, 'Turin', '2024-01-15');
CALL scd2.apply('stg_a', 'dim_a') \gset
SELECT * FROM scd2_test.last_metrics('dim_a');
SELECT id, city, updated_at, valid_from, valid_to FROM dim_a ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim_a');
-- It cannot be tracked, Type 1 or a key.
SELECT scd2.register('dim_a', ARRAY['id'], tracked => ARRAY['city', 'updated_at'], effective_column => 'updated_at');
SELECT scd2.register('dim_a', ARRAY['id'], type1 => ARRAY['updated_at'], effective_column => 'updated_at');

RESET search_path;
