-- DROP EXTENSION scd2 keeps the history of the loads (issue 48): while a
-- dimension is registered or the audit log holds rows, dropping the
-- extension -- with or without CASCADE or IF EXISTS, or by DROP SCHEMA
-- scd2 CASCADE -- is refused and leaves everything in place, with the
-- counts, how to export the history and how to force the drop
-- (scd2.allow_drop_with_history).  An extension without history drops as
-- any other.
--
-- Runs in a database of its own: the drops there cannot touch what the
-- other tests left in theirs.
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_uninstall_test;
CREATE DATABASE scd2_uninstall_test;
\c scd2_uninstall_test
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE EXTENSION scd2;
CREATE TABLE stg (id int, city text);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
INSERT INTO stg VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stg', 'dim', '2024-01-01');
UPDATE stg SET city = 'Milan' WHERE id = 2;
CALL scd2.apply('stg', 'dim', '2024-02-01');
SET client_min_messages = notice;

-- What a drop would delete, and the dimension's rows (a function: a view
-- would be a dependent object of scd2's tables).
CREATE FUNCTION history(OUT extension bigint, OUT dimensions bigint, OUT audit_rows bigint,
                        OUT runs bigint, OUT logged bigint, OUT dimension_rows text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE $q$
        SELECT (SELECT count(*) FROM pg_extension WHERE extname = 'scd2'),
               (SELECT count(*) FROM scd2.dimensions),
               (SELECT count(*) FROM scd2.audit_log),
               (SELECT count(*) FROM scd2.change_log_runs),
               (SELECT count(*) FROM scd2.change_log) + (SELECT count(*) FROM scd2.change_log_batches),
               (SELECT md5(string_agg(d::text, ',' ORDER BY d.sk)) FROM dim d)$q$
      INTO extension, dimensions, audit_rows, runs, logged, dimension_rows;
END $$;
CREATE TABLE before AS SELECT * FROM history();
SELECT extension, dimensions, audit_rows, runs FROM before;

-- Refused, with its SQLSTATE (dependent_objects_still_exist), in each form.
DROP EXTENSION scd2;
\echo :LAST_ERROR_SQLSTATE
\set VERBOSITY terse
DROP EXTENSION scd2 CASCADE;
DROP EXTENSION IF EXISTS scd2;
DROP EXTENSION IF EXISTS scd2 RESTRICT;
DROP SCHEMA scd2 CASCADE;
\set VERBOSITY default
-- (without CASCADE the schema's drop fails as before: the extension is in it)
DROP SCHEMA scd2;
SELECT (SELECT row(h.*) FROM history() h) = (SELECT row(b.*) FROM before b) AS all_in_place;

-- Forced in a transaction that rolls back: still in place.
BEGIN;
SET LOCAL scd2.allow_drop_with_history = on;
DROP EXTENSION scd2;
ROLLBACK;
SELECT (SELECT row(h.*) FROM history() h) = (SELECT row(b.*) FROM before b) AS all_in_place;

-- No dimension registered, but the audit log holds rows: still refused.
SELECT scd2.unregister('dim');
DROP EXTENSION scd2;
SELECT dimensions, audit_rows FROM history();

-- Forced, in a new session (scd2's library is not loaded there yet when
-- the setting is made): the extension, its schema's tables and the history
-- are gone, the dimension table and its rows stay.
\c scd2_uninstall_test
SET TimeZone = 'UTC';
SET scd2.allow_drop_with_history = on;
DROP EXTENSION scd2 CASCADE;
SELECT count(*) AS extension FROM pg_extension WHERE extname = 'scd2';
SELECT count(*) AS scd2_tables FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
 WHERE n.nspname = 'scd2';
SELECT md5(string_agg(d::text, ',' ORDER BY d.sk)) = (SELECT dimension_rows FROM before) AS dimension_kept,
       count(*) AS dimension_rows FROM dim d;
RESET scd2.allow_drop_with_history;

-- An extension without history (nothing registered, no audit row) drops
-- as any other, and so does its schema with CASCADE.
DROP SCHEMA scd2;
CREATE EXTENSION scd2;
DROP EXTENSION scd2;
CREATE EXTENSION scd2;
DROP SCHEMA scd2 CASCADE;
SELECT count(*) AS extension FROM pg_extension WHERE extname = 'scd2';

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_uninstall_test;
