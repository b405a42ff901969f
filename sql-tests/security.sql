-- Whose rights a load runs with (issue 17, classes 1 and 2).  Every load
-- -- scd2.apply, scd2.merge, scd2.apply_all -- runs as the dimension's
-- owner in a security-restricted operation, after checking that the
-- caller may read the staging table and write the dimension and that the
-- owner may too.  Code the owner controls (here a trigger) never runs with
-- the caller's rights, cannot change role, and cannot leave settings
-- behind in the caller's session; the owner never reads a table only the
-- caller may read; a default staging table is registered only by a role
-- that may read it, and checked again at load time.
--
-- apply_all loads every dimension of the database, so this test runs in a
-- database of its own.  Roles are cluster-wide: created and dropped here.
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_security_test;
DROP ROLE IF EXISTS regress_scd2_owner;
DROP ROLE IF EXISTS regress_scd2_loader;
DROP ROLE IF EXISTS regress_scd2_secret;
CREATE DATABASE scd2_security_test;
\c scd2_security_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never
CREATE EXTENSION scd2;

CREATE ROLE regress_scd2_owner;     -- owns the dimension
CREATE ROLE regress_scd2_loader;    -- loads it, with grants
CREATE ROLE regress_scd2_secret;    -- owns a table the owner may not read
CREATE SCHEMA mart AUTHORIZATION regress_scd2_owner;
CREATE SCHEMA secret AUTHORIZATION regress_scd2_secret;
GRANT USAGE ON SCHEMA mart, secret TO PUBLIC;
SET ROLE regress_scd2_secret;
CREATE TABLE secret.customers (id int, city text);
INSERT INTO secret.customers VALUES (1, 'Secret City');
GRANT SELECT ON secret.customers TO regress_scd2_loader;
RESET ROLE;

-- The owner's dimension, with a trigger that tries what a hostile owner
-- would: become superuser, read the secret table, leave a setting behind.
SET ROLE regress_scd2_owner;
CREATE TABLE mart.stg (id int, city text);
SELECT scd2.create_dimension('mart.dim', 'mart.stg', ARRAY['id']);
CREATE TABLE mart.trigger_log (n serial, role_seen name, superuser boolean, escalation text, secret text);
CREATE FUNCTION mart.spy() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_escalation text;
    v_secret text;
BEGIN
    BEGIN
        EXECUTE 'ALTER ROLE regress_scd2_owner SUPERUSER';
        v_escalation := 'became superuser';
    EXCEPTION WHEN insufficient_privilege THEN
        v_escalation := 'refused';
    END;
    BEGIN
        SELECT city INTO v_secret FROM secret.customers LIMIT 1;
    EXCEPTION WHEN insufficient_privilege THEN
        v_secret := 'refused';
    END;
    PERFORM pg_catalog.set_config('work_mem', '1234kB', false);
    INSERT INTO mart.trigger_log (role_seen, superuser, escalation, secret)
    SELECT current_user, rolsuper, v_escalation, v_secret FROM pg_catalog.pg_roles WHERE rolname = current_user;
    RETURN NULL;
END $$;
CREATE TRIGGER spy AFTER INSERT ON mart.dim FOR EACH STATEMENT EXECUTE FUNCTION mart.spy();
RESET ROLE;

-- What a refused load must leave alone: the dimension and the audit log.
CREATE FUNCTION public.state(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''empty'') FROM %s t', dim)
       INTO v;
    RETURN v || ' audit ' || (SELECT count(*) || '/' || coalesce(max(run_id), 0) FROM scd2.audit_log);
END $$;

------------------------------------------------------------------------------
-- Class 1: apply_all, scheduled as a superuser, runs each load as the
-- dimension's owner in a security-restricted operation.
------------------------------------------------------------------------------
SET work_mem = '3MB';
INSERT INTO mart.stg VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply_all('2024-01-01');
SELECT role_seen, superuser, escalation, secret FROM mart.trigger_log ORDER BY n;
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_scd2_owner';
SHOW work_mem;
-- The audit log names the role that started the run.
SELECT dimension, status, inserted, username = current_user AS by_caller FROM scd2.audit_log ORDER BY run_id;

-- The same for scd2.apply and scd2.merge called by the superuser.
UPDATE mart.stg SET city = 'Milan' WHERE id = 2;
CALL scd2.apply('mart.stg', 'mart.dim', '2024-02-01', NULL) \gset
INSERT INTO mart.stg VALUES (3, 'Lima');
SELECT action, business_key FROM scd2.merge('mart.stg', 'mart.dim', '2024-03-01') ORDER BY 2, 1;
SELECT role_seen, superuser, escalation, secret FROM mart.trigger_log ORDER BY n;
SHOW work_mem;

-- Code the owner controls cannot change role inside the load: the load
-- fails and writes nothing (inside a transaction block apply_all is atomic
-- and raises the load's error).
SET ROLE regress_scd2_owner;
CREATE FUNCTION mart.sudo() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    SET ROLE regress_scd2_secret;
    RETURN NULL;
END $$;
CREATE TRIGGER sudo AFTER UPDATE ON mart.dim FOR EACH STATEMENT EXECUTE FUNCTION mart.sudo();
RESET ROLE;
UPDATE mart.stg SET city = 'Bergen' WHERE id = 1;
SELECT public.state('mart.dim') AS before \gset
SELECT * FROM scd2.merge('mart.stg', 'mart.dim', '2024-04-01');
BEGIN;
CALL scd2.apply_all('2024-04-01');
ROLLBACK;
SELECT public.state('mart.dim') = :'before' AS unchanged, current_user;
DROP TRIGGER sudo ON mart.dim;

-- A deferred trigger would fire at COMMIT, after the load, with the
-- caller's rights: PostgreSQL refuses to queue one inside a
-- security-restricted operation, so the load fails and writes nothing.
SET ROLE regress_scd2_owner;
CREATE FUNCTION mart.later() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO mart.trigger_log (role_seen) VALUES (current_user);
    RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER later AFTER INSERT ON mart.dim DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION mart.later();
RESET ROLE;
INSERT INTO mart.stg VALUES (4, 'Kyiv');
SELECT public.state('mart.dim') AS before \gset
SELECT * FROM scd2.merge('mart.stg', 'mart.dim', '2024-04-01');
SELECT public.state('mart.dim') = :'before' AS unchanged,
       (SELECT count(*) FROM mart.trigger_log WHERE escalation IS NULL) AS deferred_runs;
DROP TRIGGER later ON mart.dim;
DELETE FROM mart.stg WHERE id = 4;

------------------------------------------------------------------------------
-- Class 1: scd2.apply by a role that is not the owner.  The caller needs
-- SELECT on staging and SELECT, INSERT, UPDATE on the dimension; the load
-- still runs as the owner, and reads staging as the owner.
------------------------------------------------------------------------------
GRANT SELECT ON mart.stg TO regress_scd2_loader;
GRANT SELECT, INSERT, UPDATE ON mart.dim TO regress_scd2_loader;
SET ROLE regress_scd2_loader;
CALL scd2.apply('mart.stg', 'mart.dim', '2024-05-01', NULL) \gset
SELECT id, city, valid_from, valid_to FROM mart.dim ORDER BY id, valid_from;
RESET ROLE;
-- The trigger ran as the owner: it could not read what the loader may.
SELECT role_seen, superuser, escalation, secret FROM mart.trigger_log ORDER BY n DESC LIMIT 1;
SELECT username FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SET ROLE regress_scd2_loader;

-- A staging table the caller may read but the owner may not: refused,
-- the owner's code never sees it.
SELECT public.state('mart.dim') AS before \gset
SELECT * FROM scd2.merge('secret.customers', 'mart.dim', '2024-06-01');
SELECT public.state('mart.dim') = :'before' AS unchanged;
RESET ROLE;
-- The same when the owner may read the table but not use its schema.
CREATE SCHEMA vault AUTHORIZATION regress_scd2_secret;
GRANT USAGE ON SCHEMA vault TO regress_scd2_loader;
CREATE TABLE vault.customers (id int, city text);
ALTER TABLE vault.customers OWNER TO regress_scd2_secret;
GRANT SELECT ON vault.customers TO regress_scd2_loader, regress_scd2_owner;
SET ROLE regress_scd2_loader;
SELECT * FROM scd2.merge('vault.customers', 'mart.dim', '2024-06-01');
SELECT public.state('mart.dim') = :'before' AS unchanged;
RESET ROLE;

-- A caller without the privileges a load needs: refused, as before.
REVOKE UPDATE ON mart.dim FROM regress_scd2_loader;
SET ROLE regress_scd2_loader;
SELECT public.state('mart.dim') AS before \gset
SELECT * FROM scd2.merge('mart.stg', 'mart.dim', '2024-06-01');
SELECT public.state('mart.dim') = :'before' AS unchanged;
RESET ROLE;

------------------------------------------------------------------------------
-- Class 2: a default staging table is registered only by a role that may
-- read it, for an owner that may read it; checked again at load time.
------------------------------------------------------------------------------
SELECT md5(d::text) AS before FROM scd2.dimensions d WHERE dimension = 'mart.dim'::regclass \gset
SET ROLE regress_scd2_owner;
SELECT scd2.register('mart.dim', ARRAY['id'], staging => 'secret.customers');
RESET ROLE;
-- The superuser may read it, the owner the loads run as may not.
SELECT scd2.register('mart.dim', ARRAY['id'], staging => 'secret.customers');
SELECT md5(d::text) = :'before' AS registry_unchanged, staging
  FROM scd2.dimensions d WHERE dimension = 'mart.dim'::regclass;

-- Granted, registered, then revoked: apply_all checks the owner's right
-- when it loads.  At top level the refusal is an error row; inside a
-- transaction block nothing is written at all.
GRANT SELECT ON secret.customers TO regress_scd2_owner;
SET ROLE regress_scd2_owner;
SELECT scd2.register('mart.dim', ARRAY['id'], staging => 'secret.customers');
RESET ROLE;
REVOKE SELECT ON secret.customers FROM regress_scd2_owner;
SELECT public.state('mart.dim') AS before \gset
BEGIN;
CALL scd2.apply_all('2024-07-01');
ROLLBACK;
SELECT public.state('mart.dim') = :'before' AS unchanged;
CALL scd2.apply_all('2024-07-01');
SELECT dimension, staging, status, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS secret_rows FROM mart.dim WHERE city = 'Secret City';

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_security_test;
DROP ROLE regress_scd2_owner;
DROP ROLE regress_scd2_loader;
DROP ROLE regress_scd2_secret;
