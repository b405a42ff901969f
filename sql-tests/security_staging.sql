-- Trust, round 3 (issue 47, findings 1 and 2): the staging table's owner
-- and the caller are not trusted by the dimension's owner.  A load runs as
-- the dimension's owner; it refuses a staging view, a staging column's
-- type, collation or cast function of a role that could not already act
-- as that owner (trust.c), and a schema change that would make the
-- dimension depend on such a type or collation.  The code of each role
-- records, through public.probe(), the role it ran as and whether it ran
-- restricted; a refused call ran none of it and wrote nothing
-- (public.state(): the dimension, the change log and its runs, the audit
-- log but for the refused call's own 'error' row, the arrival memory).
-- Roles are cluster-wide: created and dropped here, in a database of its own.
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_sec47_test;
DROP ROLE IF EXISTS regress_sec47_owner;
DROP ROLE IF EXISTS regress_sec47_etl;
DROP ROLE IF EXISTS regress_sec47_caller;
CREATE DATABASE scd2_sec47_test;
\c scd2_sec47_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';
\set SHOW_CONTEXT never
CREATE EXTENSION scd2;

CREATE ROLE regress_sec47_owner;      -- owns the dimensions (A)
CREATE ROLE regress_sec47_etl;        -- owns the staging tables (B)
CREATE ROLE regress_sec47_caller;     -- SELECT, INSERT, UPDATE on a dimension (C)
CREATE SCHEMA mart AUTHORIZATION regress_sec47_owner;
CREATE SCHEMA etl AUTHORIZATION regress_sec47_etl;
CREATE SCHEMA own AUTHORIZATION regress_sec47_caller;
GRANT USAGE ON SCHEMA mart, etl, own TO PUBLIC;

CREATE TABLE public.probe_log (what text, ran_as name, restricted boolean);
GRANT INSERT ON public.probe_log TO PUBLIC;
CREATE FUNCTION public.probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO public.probe_log VALUES (what, current_user, v_restricted);
    RETURN true;
END $$;
-- who ran which code since the last look (and forget it)
CREATE FUNCTION public.probes() RETURNS TABLE (what text, ran_as name, restricted boolean, n bigint)
LANGUAGE sql AS $$
    WITH gone AS (DELETE FROM public.probe_log RETURNING *)
    SELECT what, ran_as, restricted, count(*) FROM gone GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
$$;
CREATE FUNCTION public.state(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    s text := '';
BEGIN
    EXECUTE format('SELECT count(*) || '':'' || md5(coalesce(string_agg(t::text, '','' ORDER BY t::text), '''')) FROM %s t', dim)
       INTO r;
    s := s || 'dimension ' || r;
    SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) INTO r FROM scd2.change_log t;
    s := s || ' log ' || r;
    SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) INTO r FROM scd2.change_log_runs t;
    s := s || ' runs ' || r;
    SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) INTO r
      FROM scd2.audit_log t WHERE t.status <> 'error';
    s := s || ' audit ' || r;
    SELECT count(*) || ':' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) INTO r FROM scd2.arrival_memory t;
    s := s || ' memory ' || r;
    SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum) INTO r
      FROM pg_attribute WHERE attrelid = dim AND attnum > 0 AND NOT attisdropped;
    RETURN s || ' columns ' || r;
END $$;

-- A's dimension, registered with B's staging table; C may load it.
SET ROLE regress_sec47_etl;
CREATE TYPE etl.code AS ENUM ('a', 'b', 'c');
CREATE FUNCTION etl.code_int(etl.code) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.probe('etl cast');
    RETURN CASE $1 WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 3 END;
END $$;
CREATE CAST (etl.code AS int) WITH FUNCTION etl.code_int(etl.code) AS ASSIGNMENT;
CREATE TABLE etl.stage (id int, code int, city text);
INSERT INTO etl.stage VALUES (1, 1, 'Oslo'), (2, 2, 'Rome');
GRANT SELECT ON etl.stage TO PUBLIC;
RESET ROLE;
SET ROLE regress_sec47_owner;
CREATE TABLE mart.d (id int, code int, city text, valid_from timestamptz, valid_to timestamptz);
SELECT scd2.register('mart.d', ARRAY['id'], staging => 'etl.stage');
GRANT SELECT, INSERT, UPDATE ON mart.d TO regress_sec47_caller;
RESET ROLE;
CALL scd2.apply('etl.stage', 'mart.d', '2024-01-01');
SELECT count(*) FROM mart.d;

------------------------------------------------------------------------------
-- Finding 1: B gives a staging column its own enum with an assignment cast
-- to the dimension's int.  The cast ran as A (24 times in the review) and
-- could GRANT A's tables to B.  Refused now, naming the column, the type,
-- its owner and the fix, whoever calls; nothing runs, nothing is written.
------------------------------------------------------------------------------
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage ALTER COLUMN code TYPE etl.code
    USING (CASE code WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE 'c' END)::etl.code;
UPDATE etl.stage SET code = 'c' WHERE id = 1;
RESET ROLE;
SELECT public.state('mart.d') AS before \gset
CALL scd2.apply('etl.stage', 'mart.d', '2024-02-01');
SET ROLE regress_sec47_owner;
CALL scd2.apply('etl.stage', 'mart.d', '2024-02-01');
SELECT count(*) FROM scd2.merge('etl.stage', 'mart.d', '2024-02-01', dry_run => true);
RESET ROLE;
CALL scd2.apply_all();
SELECT * FROM public.probes();
SELECT public.state('mart.d') = :'before' AS nothing_written;

-- B's collation on a text column: refused the same way.
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage ALTER COLUMN code TYPE int USING etl.code_int(code);
CREATE COLLATION etl.c_coll (locale = 'C');
ALTER TABLE etl.stage ALTER COLUMN city TYPE text COLLATE etl.c_coll;
RESET ROLE;
DELETE FROM public.probe_log;   -- B's cast, run by B's own ALTER
CALL scd2.apply('etl.stage', 'mart.d', '2024-02-01');
SELECT public.state('mart.d') = :'before' AS nothing_written;
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage ALTER COLUMN city TYPE text COLLATE pg_catalog."default";
RESET ROLE;

-- A view of B's over its table: an ordinary view and a security_invoker
-- one both run their functions as the reader, A.  Refused.
SET ROLE regress_sec47_etl;
CREATE VIEW etl.stage_v AS SELECT id, code, city FROM etl.stage WHERE public.probe('etl view');
CREATE VIEW etl.stage_iv WITH (security_invoker) AS
    SELECT id, code, city FROM etl.stage WHERE public.probe('etl invoker view');
GRANT SELECT ON etl.stage_v, etl.stage_iv TO PUBLIC;
RESET ROLE;
CALL scd2.apply('etl.stage_v', 'mart.d', '2024-02-01');
CALL scd2.apply('etl.stage_iv', 'mart.d', '2024-02-01');
SELECT * FROM public.probes();
SELECT public.state('mart.d') = :'before' AS nothing_written;

-- C, which may only SELECT, INSERT and UPDATE the dimension, passes a
-- staging table of its own with its own cast (and a view of its own).
SET ROLE regress_sec47_caller;
CREATE TYPE own.code AS ENUM ('a', 'b', 'c');
CREATE FUNCTION own.code_int(own.code) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.probe('caller cast');
    EXECUTE 'GRANT SELECT ON mart.d TO PUBLIC';
    RETURN 3;
END $$;
CREATE CAST (own.code AS int) WITH FUNCTION own.code_int(own.code) AS ASSIGNMENT;
CREATE TABLE own.stage (id int, code own.code, city text);
INSERT INTO own.stage VALUES (1, 'c', 'Oslo');
GRANT SELECT ON own.stage TO regress_sec47_owner;
CREATE VIEW own.stage_v AS SELECT id, 1 AS code, city FROM own.stage WHERE public.probe('caller view');
GRANT SELECT ON own.stage_v TO regress_sec47_owner;
CALL scd2.apply('own.stage', 'mart.d', '2024-02-01');
CALL scd2.apply('own.stage_v', 'mart.d', '2024-02-01');
RESET ROLE;
SELECT * FROM public.probes();
SELECT public.state('mart.d') = :'before' AS nothing_written;
SELECT has_table_privilege('public', 'mart.d', 'SELECT') AS granted_to_public;

-- apply_snapshots reads every staging column: an extra column of B's
-- type is refused there too.
SET ROLE regress_sec47_etl;
CREATE TABLE etl.snaps (id int, code int, city text, snap timestamptz, extra etl.code);
INSERT INTO etl.snaps VALUES (1, 1, 'Oslo', '2024-03-01', 'a');
GRANT SELECT ON etl.snaps TO PUBLIC;
RESET ROLE;
CALL scd2.apply_snapshots('etl.snaps', 'mart.d', 'snap');
SELECT * FROM public.probes();
SELECT public.state('mart.d') = :'before' AS nothing_written;

-- What the owner trusts still loads: A's own view and A's own enum and
-- cast run as A, restricted (as any code of A's); a staging table of B's
-- with built-in types loads, whoever calls.
SET ROLE regress_sec47_owner;
CREATE TYPE mart.code AS ENUM ('a', 'b', 'c');
CREATE FUNCTION mart.code_int(mart.code) RETURNS int LANGUAGE plpgsql AS $$
BEGIN
    PERFORM public.probe('owner cast');
    RETURN CASE $1 WHEN 'a' THEN 1 WHEN 'b' THEN 2 ELSE 3 END;
END $$;
CREATE CAST (mart.code AS int) WITH FUNCTION mart.code_int(mart.code) AS ASSIGNMENT;
CREATE VIEW mart.stage_v AS
    SELECT id, (CASE code WHEN 1 THEN 'a' WHEN 2 THEN 'b' ELSE 'c' END)::mart.code AS code, city
      FROM etl.stage WHERE public.probe('owner view');
RESET ROLE;
CALL scd2.apply('mart.stage_v', 'mart.d', '2024-02-01');
SELECT what, ran_as, restricted, n > 0 AS ran FROM public.probes();
SET ROLE regress_sec47_caller;
UPDATE own.stage SET city = 'Bergen';
ALTER TABLE own.stage ALTER COLUMN code TYPE int USING 3;
CALL scd2.apply('own.stage', 'mart.d', '2024-03-01');
RESET ROLE;
SELECT id, code, city FROM mart.d WHERE valid_to IS NULL ORDER BY id;
SELECT * FROM public.probes();

------------------------------------------------------------------------------
-- Finding 2: on_schema_change => 'append_new_columns' added B's domain
-- (whose CHECK ran as A during the ALTER) and B's collation to A's
-- dimension; B's DROP ... CASCADE then dropped A's columns with their
-- history.  A schema change adds only built-in types and collations and
-- those of A (or a member of A, or a superuser); others are refused.
------------------------------------------------------------------------------
SET ROLE regress_sec47_owner;
SELECT scd2.register('mart.d', ARRAY['id'], staging => 'etl.stage',
                     on_schema_change => 'append_new_columns');
RESET ROLE;
SET ROLE regress_sec47_etl;
CREATE DOMAIN etl.score AS int CHECK (public.probe('etl domain check'));
CREATE TYPE etl.pair AS (a int, b int);
ALTER TABLE etl.stage ADD COLUMN score etl.score;
UPDATE etl.stage SET city = 'Lund';
RESET ROLE;
DELETE FROM public.probe_log;   -- B's domain check, run by B's own UPDATE
SELECT public.state('mart.d') AS before \gset
CALL scd2.apply('etl.stage', 'mart.d', '2024-04-01');
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage DROP COLUMN score, ADD COLUMN note text COLLATE etl.c_coll;
RESET ROLE;
CALL scd2.apply('etl.stage', 'mart.d', '2024-04-01');
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage DROP COLUMN note, ADD COLUMN codes etl.code[];
RESET ROLE;
CALL scd2.apply('etl.stage', 'mart.d', '2024-04-01');
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage DROP COLUMN codes, ADD COLUMN pair etl.pair;
RESET ROLE;
CALL scd2.apply('etl.stage', 'mart.d', '2024-04-01');
-- a dry run refuses it as the load would
SELECT count(*) FROM scd2.merge('etl.stage', 'mart.d', '2024-04-01', dry_run => true);
SELECT * FROM public.probes();
SELECT public.state('mart.d') = :'before' AS nothing_written;
-- a built-in type and one of A's are added
SET ROLE regress_sec47_owner;
CREATE DOMAIN mart.score AS int CHECK (VALUE >= 0);
GRANT USAGE ON TYPE mart.score TO regress_sec47_etl;
RESET ROLE;
SET ROLE regress_sec47_etl;
ALTER TABLE etl.stage DROP COLUMN pair, ADD COLUMN score mart.score, ADD COLUMN note text;
UPDATE etl.stage SET score = 7, note = 'n';
RESET ROLE;
CALL scd2.apply('etl.stage', 'mart.d', '2024-04-01');
SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 'mart.d'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum;
SELECT * FROM public.probes();

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_sec47_test;
DROP ROLE regress_sec47_owner;
DROP ROLE regress_sec47_etl;
DROP ROLE regress_sec47_caller;
