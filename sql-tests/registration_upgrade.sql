-- Registrations made by 0.2, after ALTER EXTENSION scd2 UPDATE to 0.3
-- (issue 17, classes 6-8): the update records each dimension's shape and,
-- as scd2's own, the indexes 0.2's register created, so registering again
-- replaces them and an altered dimension is refused.
--
-- Runs in a database of its own (it installs an older version).
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_registration_upgrade_test;
CREATE DATABASE scd2_registration_upgrade_test;
\c scd2_registration_upgrade_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never

CREATE EXTENSION scd2 VERSION '0.2';
CREATE TABLE stg (id int, region text, city text);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
-- 0.2 cut "<name>_scd2_current" and "<name>_scd2_asof" to the same 63
-- characters here and created only the first.
SET client_min_messages = warning;
CREATE TABLE "dimension_with_a_rather_long_name_for_the_customer_accounts_" (
    id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('"dimension_with_a_rather_long_name_for_the_customer_accounts_"', ARRAY['id']);
SET client_min_messages = notice;
SELECT indexrelid::regclass FROM pg_index
 WHERE indrelid = '"dimension_with_a_rather_long_name_for_the_customer_accounts_"'::regclass;

ALTER EXTENSION scd2 UPDATE TO '0.3';
SELECT dimension, created_indexes, shape_columns, shape_types
  FROM scd2.dimensions ORDER BY dimension::text;

-- The recorded shape is checked as for a new registration.
INSERT INTO stg VALUES (1, 'north', 'Oslo');
CALL scd2.apply('stg', 'dim', '2024-01-01', NULL) \gset
ALTER TABLE dim ALTER valid_from TYPE timestamp;
SELECT count(*) AS rows_before FROM dim \gset
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT count(*) = :rows_before AS unchanged FROM dim;
ALTER TABLE dim ALTER valid_from TYPE timestamptz;

-- Registering again: 0.2's indexes are scd2's, replaced when they no
-- longer fit, kept when they do; the missing as-of index is made.
SELECT scd2.register('dim', ARRAY['id', 'region']);
SELECT scd2.register('"dimension_with_a_rather_long_name_for_the_customer_accounts_"', ARRAY['id']);
SELECT c.relname AS dimension, i.indexrelid::regclass AS index_name,
       regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') AS definition
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE i.indrelid IN ('dim'::regclass, '"dimension_with_a_rather_long_name_for_the_customer_accounts_"'::regclass)
 ORDER BY 1, 3;
SELECT dimension, created_indexes FROM scd2.dimensions ORDER BY dimension::text;

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_registration_upgrade_test;
