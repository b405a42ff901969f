-- CALL scd2.apply: the procedure form for psql, dbt hooks and pg_cron.
-- Prints a NOTICE with the metrics (the form of four arguments also
-- returns the run id), works inside a transaction block; a failed
-- top-level CALL leaves an error row.  From PL/pgSQL: apply_plpgsql.
SET client_min_messages = notice;
SET TimeZone = 'UTC';
CREATE SCHEMA app;
SET search_path = app, public;
CREATE TABLE stg (id int, city text);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);
INSERT INTO stg VALUES (1, 'Oslo'), (2, 'Rome');

-- Top level.
CALL scd2.apply('stg', 'dim', '2024-01-01', NULL) \gset first_
SELECT :first_run_id = max(run_id) AS returns_its_run_id FROM scd2.audit_log;
SELECT * FROM scd2_test.last_metrics('dim');

-- Inside a transaction block (what dbt does with a post-hook), with the
-- run id captured; rolled back, the load and its audit row vanish.
BEGIN;
UPDATE stg SET city = 'Milan' WHERE id = 2;
CALL scd2.apply('stg', 'dim', '2024-02-01', NULL) \gset
SELECT city FROM dim WHERE id = 2 AND is_current;
ROLLBACK;
SELECT city FROM dim WHERE id = 2 AND is_current;
SELECT count(*) AS runs_after_rollback FROM scd2.audit_log WHERE run_id > :first_run_id AND dimension = 'app.dim';

-- Inside a committed block: two loads in one transaction at two instants.
BEGIN;
UPDATE stg SET city = 'Milan' WHERE id = 2;
CALL scd2.apply('stg', 'dim', '2024-02-01', NULL) \gset
UPDATE stg SET city = 'Turin' WHERE id = 2;
CALL scd2.apply('stg', 'dim', '2024-03-01', NULL) \gset
COMMIT;
SELECT id, city, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;

-- A DO block calling it (atomic context) gets the run id back.
DO $$
DECLARE
    rid bigint;
BEGIN
    CALL scd2.apply('app.stg', 'app.dim', '2024-04-01', rid);
    RAISE NOTICE 'got a run id: %', rid IS NOT NULL;
END $$;

-- Failure at top level: the error is raised and an error row is kept.
INSERT INTO stg VALUES (NULL, 'Nowhere');
CALL scd2.apply('stg', 'dim', '2024-05-01');
SELECT status, source_rows, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS dimension_rows FROM dim;

-- Failure inside a transaction block: everything rolls back, error row too
-- (there is no autonomous transaction to keep it).
BEGIN;
CALL scd2.apply('stg', 'dim', '2024-05-01');
ROLLBACK;
SELECT count(*) AS error_rows FROM scd2.audit_log WHERE status = 'error' AND dimension = 'app.dim';

-- The audit row carries who and which transaction.
DELETE FROM stg WHERE id IS NULL;
UPDATE stg SET city = 'Bari' WHERE id = 2;
BEGIN;
CALL scd2.apply('stg', 'dim', '2024-06-01', NULL) \gset
SELECT username = current_user AS by_me, txid = pg_current_xact_id() AS same_txn,
       finished_at >= started_at AS timed, duration >= '0'::interval AS has_duration
  FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
COMMIT;

-- Nobody but the extension writes the audit log.
CREATE ROLE scd2_app_user;
SET ROLE scd2_app_user;
INSERT INTO scd2.audit_log (dimension, staging, status, started_at, finished_at, username)
VALUES ('x', 'y', 'success', now(), now(), 'me');
UPDATE scd2.audit_log SET status = 'success';
DELETE FROM scd2.audit_log;
-- it may read the log, and sees the rows of the dimensions it may read:
-- none here (issue 21: messages can hold keys)
SELECT count(*) AS visible_rows FROM scd2.audit_log;
RESET ROLE;
DROP ROLE scd2_app_user;

SET client_min_messages = warning;
DROP SCHEMA app CASCADE;
