-- Security by construction (issue 21): one test per finding of the second
-- review.  Code a dimension's owner controls records, through
-- mart.probe(), the role it ran as, the session's role and whether it ran
-- in a security-restricted operation; every statement scd2 runs on user
-- data must run as the owner, restricted -- never as the superuser who
-- called it nor as the extension's owner.  A refused call writes nothing:
-- public.state() checksums the dimension, the change log and the audit log
-- (a refused top-level CALL adds exactly its own 'error' row, by design).
-- Roles are cluster-wide: created and dropped here, in a database of its own.
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_sec21_test;
DROP ROLE IF EXISTS regress_sec21_owner;
DROP ROLE IF EXISTS regress_sec21_tenant;
DROP ROLE IF EXISTS regress_sec21_reader;
DROP ROLE IF EXISTS regress_sec21_outsider;
CREATE DATABASE scd2_sec21_test;
\c scd2_sec21_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never
CREATE EXTENSION scd2;

CREATE ROLE regress_sec21_owner;      -- owns the dimensions
CREATE ROLE regress_sec21_tenant;     -- loads, limited by a policy to tenant 'a'
CREATE ROLE regress_sec21_reader;     -- SELECT only, limited by the same policy
CREATE ROLE regress_sec21_outsider;   -- no rights on the dimensions
CREATE SCHEMA mart AUTHORIZATION regress_sec21_owner;
GRANT USAGE ON SCHEMA mart TO PUBLIC;

SET ROLE regress_sec21_owner;
CREATE TABLE mart.probe_log (what text, ran_as name, session_role name, restricted boolean);
GRANT INSERT ON mart.probe_log TO PUBLIC;
CREATE FUNCTION mart.probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO mart.probe_log VALUES (what, current_user, session_user, v_restricted);
    RETURN true;
END $$;
RESET ROLE;

CREATE FUNCTION public.state(dim regclass, OUT dimension text, OUT change_log text, OUT audit_log text)
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''empty'') FROM %s t', dim)
       INTO dimension;
    SELECT coalesce(md5(string_agg(c::text, ',' ORDER BY c::text)), 'empty') INTO change_log FROM scd2.change_log c;
    SELECT coalesce(md5(string_agg(a::text, ',' ORDER BY a.run_id)), 'empty') INTO audit_log
      FROM scd2.audit_log a WHERE a.status <> 'error';
END $$;
-- who ran the owner's code since the last look (and forget it)
CREATE FUNCTION public.probes() RETURNS TABLE (what text, ran_as name, restricted boolean, n bigint)
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM mart.probe_log RETURNING *)
    SELECT what, ran_as, restricted, count(*) FROM gone GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
$$;

------------------------------------------------------------------------------
-- Finding 1 (critical): the change log's jsonb of a key calls the key
-- type's cast to json.  It ran as the extension's owner (a superuser) on
-- every load, first load and MERGE path alike.  Now it runs as the owner,
-- restricted, whoever loads; the extension owner only copies its result.
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
CREATE TYPE mart.code AS ENUM ('a', 'b', 'c');
CREATE FUNCTION mart.code_json(mart.code) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    PERFORM mart.probe('cast to json');
    RETURN pg_catalog.to_json($1::text);
END $$;
CREATE CAST (mart.code AS json) WITH FUNCTION mart.code_json(mart.code);
CREATE TABLE mart.stg1 (code mart.code, city text);
SELECT scd2.create_dimension('mart.dim1', 'mart.stg1', ARRAY['code']);
INSERT INTO mart.stg1 VALUES ('a', 'Oslo'), ('b', 'Rome');
RESET ROLE;
-- the first load (one INSERT; its change log is its header alone, so no
-- key is cast to json), then its feed, read from the dimension as the owner
CALL scd2.apply('mart.stg1', 'mart.dim1', '2024-01-01');
SELECT * FROM public.probes();
SELECT action, business_key FROM scd2.changes((SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'mart.dim1')) ORDER BY 2, 1;
SELECT * FROM public.probes();
-- the MERGE path: a batch of changes is logged by surrogate keys
-- (changelog_batch.c), so its load casts no key either; its feed does,
-- as the owner
UPDATE mart.stg1 SET city = 'Milan' WHERE code = 'b';
CALL scd2.apply('mart.stg1', 'mart.dim1', '2024-02-01');
SELECT * FROM public.probes();
SELECT action, business_key FROM scd2.changes((SELECT max(run_id) FROM scd2.audit_log)) ORDER BY 2, 1;
SELECT * FROM public.probes();
-- The work table the rows pass through is the extension owner's: the
-- dimension's owner, whose code runs while it is filled, may insert into
-- it and nothing more.  (A BEFORE INSERT trigger keeps the load off the
-- batch log: it logs row by row, through the work table.)
SET ROLE regress_sec21_owner;
CREATE FUNCTION mart.pass() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER pass BEFORE INSERT ON mart.dim1 FOR EACH ROW EXECUTE FUNCTION mart.pass();
CREATE FUNCTION mart.code_json_meddling(mart.code) RETURNS json LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE 'CREATE RULE meddle AS ON INSERT TO pg_temp."scd2 work: log" DO INSTEAD NOTHING';
    RETURN pg_catalog.to_json($1::text);
END $$;
DROP CAST (mart.code AS json);
CREATE CAST (mart.code AS json) WITH FUNCTION mart.code_json_meddling(mart.code);
RESET ROLE;
UPDATE mart.stg1 SET city = 'Turin' WHERE code = 'b';
SELECT * FROM public.state('mart.dim1') \gset before_
SELECT action FROM scd2.merge('mart.stg1', 'mart.dim1', '2024-03-01');
SELECT (s).dimension = :'before_dimension' AS dimension_unchanged,
       (s).change_log = :'before_change_log' AS change_log_unchanged,
       (s).audit_log = :'before_audit_log' AS audit_log_unchanged
  FROM public.state('mart.dim1') s;
SET ROLE regress_sec21_owner;
DROP CAST (mart.code AS json);
CREATE CAST (mart.code AS json) WITH FUNCTION mart.code_json(mart.code);
DROP TRIGGER pass ON mart.dim1;
RESET ROLE;

------------------------------------------------------------------------------
-- Finding 2: scd2.changes(run) read the feed as its caller, evaluating the
-- owner's domain CHECK on the key -- as a superuser, when an operator
-- followed the README.  It is read as the owner now (as scd2.revert
-- writes).
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
CREATE DOMAIN mart.email AS text CHECK (mart.probe('domain check'));
CREATE TABLE mart.stg2 (email mart.email, tenant text, city text);
SELECT scd2.create_dimension('mart.dim2', 'mart.stg2', ARRAY['email']);
-- (logged row by row: the feed reads the inserted rows' surrogate keys
-- back by key, through the key's type)
CREATE TRIGGER pass BEFORE INSERT ON mart.dim2 FOR EACH ROW EXECUTE FUNCTION mart.pass();
INSERT INTO mart.stg2 VALUES ('alice@a.example', 'a', 'Oslo'), ('bob@b.example', 'b', 'Rome');
CALL scd2.apply('mart.stg2', 'mart.dim2', '2024-01-01');
UPDATE mart.stg2 SET city = 'Bergen';
CALL scd2.apply('mart.stg2', 'mart.dim2', '2024-02-01');
RESET ROLE;
DELETE FROM mart.probe_log;
SELECT max(run_id) AS run2 FROM scd2.audit_log WHERE dimension = 'mart.dim2' \gset
SELECT action, business_key FROM scd2.changes(:run2) ORDER BY 2, 1;
SELECT * FROM public.probes();

------------------------------------------------------------------------------
-- Finding 3: scd2.dimension_at ignored a changed shape.  A validity column
-- turned into a domain after register ran that domain's CHECK as whoever
-- called dimension_at; now it is refused, as loads and asof refuse it.
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
CREATE TABLE mart.stg3 (id int, city text);
SELECT scd2.create_dimension('mart.dim3', 'mart.stg3', ARRAY['id']);
INSERT INTO mart.stg3 VALUES (1, 'Oslo');
CALL scd2.apply('mart.stg3', 'mart.dim3', '2024-01-01');
CREATE DOMAIN mart.instant AS timestamptz CHECK (mart.probe('validity domain'));
ALTER TABLE mart.dim3 ALTER valid_from TYPE mart.instant;
RESET ROLE;
DELETE FROM mart.probe_log;
SELECT count(*) FROM scd2.dimension_at(NULL::mart.dim3, '2024-06-01');
SELECT * FROM public.probes();
SET ROLE regress_sec21_owner;
ALTER TABLE mart.dim3 ALTER valid_from TYPE timestamptz;
RESET ROLE;
SELECT count(*) FROM scd2.dimension_at(NULL::mart.dim3, '2024-06-01');

------------------------------------------------------------------------------
-- Finding 4: row-level security.  A role limited by a policy to tenant 'a'
-- closed and inserted tenant-b rows through a load, reverted a run that
-- changed tenant-b rows, and read hidden keys through scd2.changes and a
-- snapshot dry run.  scd2 runs as the owner, who is exempt from the
-- policies, so it refuses a caller they apply to -- for every entry point.
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
ALTER TABLE mart.dim2 ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_a ON mart.dim2 TO regress_sec21_tenant, regress_sec21_reader
    USING (tenant = 'a') WITH CHECK (tenant = 'a');
GRANT SELECT, INSERT, UPDATE, DELETE ON mart.dim2 TO regress_sec21_tenant;
GRANT SELECT ON mart.dim2 TO regress_sec21_reader;
GRANT SELECT ON mart.stg2 TO regress_sec21_tenant, regress_sec21_reader;
SELECT scd2.register('mart.dim2', ARRAY['email'], mode => 'snapshot', staging => 'mart.stg2');
RESET ROLE;
DELETE FROM mart.stg2 WHERE tenant = 'b';
INSERT INTO mart.stg2 VALUES ('carol@b.example', 'b', 'Lima');
SELECT * FROM public.state('mart.dim2') \gset before_
SET ROLE regress_sec21_tenant;
-- what the tenant itself may not do
INSERT INTO mart.dim2 (email, tenant, city, valid_from) VALUES ('dave@b.example', 'b', 'Kyiv', now());
-- a snapshot load, a dry run, a revert
CALL scd2.apply('mart.stg2', 'mart.dim2', '2024-03-01');
SELECT * FROM scd2.merge('mart.stg2', 'mart.dim2', '2024-03-01', dry_run => true);
SELECT scd2.revert(:run2);
RESET ROLE;
SELECT (s).dimension = :'before_dimension' AS dimension_unchanged,
       (s).change_log = :'before_change_log' AS change_log_unchanged,
       (s).audit_log = :'before_audit_log' AS audit_log_unchanged
  FROM public.state('mart.dim2') s;
SELECT status, message FROM scd2.audit_log WHERE status = 'error' ORDER BY run_id DESC LIMIT 1;
-- reads: the change feed and asof are refused; dimension_at is the
-- caller's own SELECT, and its policy holds (one of two current keys)
SET ROLE regress_sec21_reader;
SELECT count(*) FROM mart.dim2;
SELECT * FROM scd2.changes(:run2);
SELECT email, tenant FROM scd2.dimension_at(NULL::mart.dim2, '2024-06-01');
SELECT scd2.asof('mart.dim2', '2024-06-01', 'bob@b.example'::text);
RESET ROLE;
-- apply_all, started by the tenant, keeps an error row for the dimension
SET ROLE regress_sec21_tenant;
CALL scd2.apply_all('2024-03-01');
RESET ROLE;
SELECT dimension, status, message FROM scd2.audit_log WHERE dimension = 'mart.dim2' ORDER BY run_id DESC LIMIT 1;
-- FORCE ROW LEVEL SECURITY: the owner is subject too, and so every load is refused
SET ROLE regress_sec21_owner;
ALTER TABLE mart.dim2 FORCE ROW LEVEL SECURITY;
SELECT * FROM scd2.merge('mart.stg2', 'mart.dim2', '2024-03-01');
ALTER TABLE mart.dim2 NO FORCE ROW LEVEL SECURITY;
RESET ROLE;
-- a policy on the staging table counts as much
SET ROLE regress_sec21_owner;
ALTER TABLE mart.stg2 ENABLE ROW LEVEL SECURITY;
CREATE POLICY stg_tenant_a ON mart.stg2 TO regress_sec21_tenant USING (tenant = 'a');
ALTER TABLE mart.dim2 DISABLE ROW LEVEL SECURITY;
RESET ROLE;
SET ROLE regress_sec21_tenant;
SELECT * FROM scd2.merge('mart.stg2', 'mart.dim2', '2024-03-01', dry_run => true);
RESET ROLE;
-- the owner and a superuser are exempt and load as before
SET ROLE regress_sec21_owner;
ALTER TABLE mart.dim2 ENABLE ROW LEVEL SECURITY;
SELECT action, business_key FROM scd2.merge('mart.stg2', 'mart.dim2', '2024-03-01', dry_run => true) ORDER BY 2, 1;
RESET ROLE;
SELECT count(*) FROM scd2.dimension_at(NULL::mart.dim2, '2024-06-01');

------------------------------------------------------------------------------
-- Finding 5: the audit log leaked business keys to PUBLIC.  A role sees
-- the rows of the dimensions it may read (and of the runs it started);
-- superusers see all of them.
------------------------------------------------------------------------------
INSERT INTO mart.stg3 VALUES (1, 'Rome');  -- two rows of one key at one instant
SELECT * FROM scd2.merge('mart.stg3', 'mart.dim3', '2024-07-01');
CALL scd2.apply('mart.stg3', 'mart.dim3', '2024-07-01');
SELECT dimension, message FROM scd2.audit_log WHERE status = 'error' AND dimension = 'mart.dim3';
SET ROLE regress_sec21_outsider;
SELECT count(*) AS visible_to_outsider FROM scd2.audit_log WHERE dimension = 'mart.dim3';
RESET ROLE;
GRANT SELECT ON mart.dim3 TO regress_sec21_outsider;
SET ROLE regress_sec21_outsider;
SELECT count(*) AS visible_with_select FROM scd2.audit_log WHERE dimension = 'mart.dim3';
RESET ROLE;
SELECT count(*) > 0 AS superuser_sees_all FROM scd2.audit_log WHERE dimension = 'mart.dim3';

------------------------------------------------------------------------------
-- Finding 6a: scd2._registry_store (executable by PUBLIC: register runs
-- with its caller's rights) refuses what register refuses.
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
CREATE TEMP TABLE tmp_dim (id int, valid_from timestamptz, valid_to timestamptz);
CREATE TEMP TABLE tmp_stg (id int, city text);
DO $$
BEGIN
    BEGIN
        PERFORM scd2._registry_store('tmp_dim', ARRAY['id']::name[], NULL, '{}', NULL, NULL, 'incremental',
                                     NULL, 'valid_from', 'valid_to', NULL, NULL, 'null');
    EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE '%', regexp_replace(SQLERRM, 'pg_temp_\d+', 'pg_temp');
    END;
    BEGIN
        PERFORM scd2._registry_store('mart.dim3', ARRAY['id']::name[], NULL, '{}', NULL, NULL, 'incremental',
                                     'tmp_stg', 'valid_from', 'valid_to', NULL, NULL, 'null');
    EXCEPTION WHEN feature_not_supported THEN
        RAISE NOTICE '%', regexp_replace(SQLERRM, 'pg_temp_\d+', 'pg_temp');
    END;
END $$;
DROP TABLE tmp_dim, tmp_stg;
RESET ROLE;
SELECT count(*) AS temporary_registrations FROM scd2.dimensions d JOIN pg_class c ON c.oid = d.dimension
 WHERE c.relpersistence = 't';

------------------------------------------------------------------------------
-- Finding 6b: a revert refused by the owner's trigger shows the revert in
-- its context, not the generated UPDATE / DELETE.
------------------------------------------------------------------------------
SET ROLE regress_sec21_owner;
CREATE FUNCTION mart.no_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'rows of % are never deleted', TG_TABLE_NAME;
END $$;
CREATE TRIGGER no_delete BEFORE DELETE ON mart.dim1 FOR EACH ROW EXECUTE FUNCTION mart.no_delete();
RESET ROLE;
SELECT max(run_id) AS run1 FROM scd2.audit_log WHERE dimension = 'mart.dim1' AND status = 'success' \gset
SELECT * FROM public.state('mart.dim1') \gset before_
\set SHOW_CONTEXT always
SELECT scd2.revert(:run1);
\set SHOW_CONTEXT never
SELECT (s).dimension = :'before_dimension' AS dimension_unchanged,
       (s).change_log = :'before_change_log' AS change_log_unchanged,
       (s).audit_log = :'before_audit_log' AS audit_log_unchanged
  FROM public.state('mart.dim1') s;

------------------------------------------------------------------------------
-- Finding 6c: the change-log header of a dropped dimension kept a bare
-- OID, which a restore can point at another table.  The drop marks it,
-- and scd2.changes and scd2.revert refuse the run.
------------------------------------------------------------------------------
SELECT max(run_id) AS run3 FROM scd2.audit_log WHERE dimension = 'mart.dim3' AND status = 'success' \gset
DROP TABLE mart.dim3;
SELECT dimension_dropped_at IS NOT NULL AS marked FROM scd2.change_log_runs WHERE run_id = :run3;
SELECT * FROM scd2.changes(:run3);
SELECT scd2.revert(:run3);

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_sec21_test;
DROP ROLE regress_sec21_owner;
DROP ROLE regress_sec21_tenant;
DROP ROLE regress_sec21_reader;
DROP ROLE regress_sec21_outsider;
