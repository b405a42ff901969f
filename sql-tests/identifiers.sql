-- Hostile input: identifiers that are not SQL-safe in keys, staging in
-- another schema or in pg_temp, functions and operators planted first on
-- the caller's search_path, callers without the right privileges.
-- (load_errors.sql has quoted schema/table/column names in a one-column
-- key; test/huge_batch/run.sh has the huge batch.)
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA hostile;
SET search_path = hostile, public;

-- 1. A composite key of three hostile names (unicode, a semicolon and a
--    comment, a double quote and capitals), staging in another schema.
CREATE SCHEMA "stage; area";
CREATE TABLE "stage; area"."Stg ☃" ("Ключ" int, "k;--2" text, "K""3" date, "Ville d'été" text, "Ωmega" numeric);
SELECT scd2.create_dimension('hostile."Dim ☃"', '"stage; area"."Stg ☃"', ARRAY['Ключ', 'k;--2', 'K"3'],
                             type1 => ARRAY['Ωmega']);
SELECT attname, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
 WHERE attrelid = 'hostile."Dim ☃"'::regclass AND attnum > 0 ORDER BY attnum;
INSERT INTO "stage; area"."Stg ☃" VALUES
    (1, 'a;b', '2024-01-01', 'Zürich', 1), (1, 'a;b', '2024-01-02', 'Genève', 2),
    (1, E'a\'b', '2024-01-01', 'Köln', 3), (2, '"x"', '2024-01-01', NULL, 4);
SELECT action, business_key FROM scd2.merge('"stage; area"."Stg ☃"', '"Dim ☃"', '2024-01-01') ORDER BY 2::text, 1;
-- Change a tracked column of one key and the Type 1 column of another.
UPDATE "stage; area"."Stg ☃" SET "Ville d'été" = 'Basel' WHERE "K""3" = '2024-01-01' AND "k;--2" = 'a;b';
UPDATE "stage; area"."Stg ☃" SET "Ωmega" = 40 WHERE "Ключ" = 2;
SELECT action, business_key FROM scd2.merge('"stage; area"."Stg ☃"', '"Dim ☃"', '2024-02-01') ORDER BY 2::text, 1;
SELECT "Ключ", "k;--2", "K""3", "Ville d'été", "Ωmega", valid_from, valid_to, is_current
  FROM "Dim ☃" ORDER BY 1, 2, 3, valid_from;
SELECT dimension, staging, status, inserted, new_versions, closed, type1_updated
  FROM scd2.audit_log WHERE dimension LIKE 'hostile.%☃%' ORDER BY run_id;

-- 2. A temporary staging table (pg_temp), loaded into the same dimension.
CREATE TEMP TABLE "tmp stg" ("Ключ" int, "k;--2" text, "K""3" date, "Ville d'été" text, "Ωmega" numeric);
INSERT INTO "tmp stg" VALUES (2, '"x"', '2024-01-01', 'Oslo', 40), (3, '', '2024-01-01', '', NULL);
SELECT action, business_key FROM scd2.merge('pg_temp."tmp stg"', 'hostile."Dim ☃"', '2024-03-01') ORDER BY 2::text, 1;
SELECT staging ~ '^pg_temp_[0-9]+\."tmp stg"$' AS temp_staging_logged FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;

-- 3. Capture attempts: a schema first on the caller's search_path with
--    functions and operators that would win over pg_catalog's for an
--    unqualified call, each raising an error (or lying) when called.
CREATE SCHEMA evil;
CREATE FUNCTION evil.boom(text) RETURNS boolean LANGUAGE plpgsql AS
  $$ BEGIN RAISE EXCEPTION 'captured: %', $1; END $$;
-- Exact-type operators beat pg_catalog's when evil comes first.
CREATE FUNCTION evil.int_eq(int, int) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.boom('int =') $$;
CREATE OPERATOR evil.= (LEFTARG = int, RIGHTARG = int, FUNCTION = evil.int_eq);
CREATE FUNCTION evil.text_eq(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT true $$;
CREATE OPERATOR evil.= (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_eq);
CREATE FUNCTION evil.text_ne(text, text) RETURNS boolean LANGUAGE sql AS $$ SELECT false $$;
CREATE OPERATOR evil.<> (LEFTARG = text, RIGHTARG = text, FUNCTION = evil.text_ne);
CREATE FUNCTION evil.tstz_lt(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.boom('timestamptz <') $$;
CREATE OPERATOR evil.< (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.tstz_lt);
CREATE FUNCTION evil.tstz_le(timestamptz, timestamptz) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.boom('timestamptz <=') $$;
CREATE OPERATOR evil.<= (LEFTARG = timestamptz, RIGHTARG = timestamptz, FUNCTION = evil.tstz_le);
CREATE FUNCTION evil.bool_not(boolean) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.boom('NOT') $$;
CREATE FUNCTION evil.bigint_eq(bigint, bigint) RETURNS boolean LANGUAGE sql AS $$ SELECT evil.boom('bigint =') $$;
CREATE OPERATOR evil.= (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.bigint_eq);
CREATE FUNCTION evil.int8pl(bigint, bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint WHERE evil.boom('bigint +') $$;
CREATE OPERATOR evil.+ (LEFTARG = bigint, RIGHTARG = bigint, FUNCTION = evil.int8pl);
-- Functions with the names the generated SQL could use.
CREATE FUNCTION evil.count_step(bigint) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint WHERE evil.boom('count(*)') $$;
CREATE AGGREGATE evil.count(*) (sfunc = evil.count_step, stype = bigint, initcond = '0');
CREATE FUNCTION evil.count(int) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint WHERE evil.boom('count(int)') $$;
CREATE FUNCTION evil.lower(text) RETURNS text LANGUAGE sql AS $$ SELECT 'x' WHERE evil.boom('lower') $$;
CREATE FUNCTION evil.now() RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'epoch'::timestamptz WHERE evil.boom('now') $$;
CREATE FUNCTION evil.row_number(int) RETURNS bigint LANGUAGE sql AS $$ SELECT 0::bigint WHERE evil.boom('row_number') $$;
CREATE FUNCTION evil.jsonb_build_object(VARIADIC text[]) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb WHERE evil.boom('jsonb_build_object') $$;
CREATE FUNCTION evil.to_jsonb(anyelement) RETURNS jsonb LANGUAGE sql AS $$ SELECT '{}'::jsonb WHERE evil.boom('to_jsonb') $$;
CREATE FUNCTION evil.md5(text) RETURNS text LANGUAGE sql AS $$ SELECT 'x' WHERE evil.boom('md5') $$;
CREATE FUNCTION evil.int4(bigint) RETURNS int LANGUAGE sql AS $$ SELECT 0 WHERE evil.boom('int4 cast') $$;
CREATE FUNCTION evil.timestamptz(date) RETURNS timestamptz LANGUAGE sql AS $$ SELECT 'epoch'::timestamptz WHERE evil.boom('timestamptz cast') $$;
CREATE FUNCTION evil.greatest(anyelement, anyelement) RETURNS anyelement LANGUAGE sql AS $$ SELECT $1 WHERE evil.boom('greatest') $$;
CREATE FUNCTION evil.lead(anyelement) RETURNS anyelement LANGUAGE sql AS $$ SELECT $1 WHERE evil.boom('lead') $$;
CREATE FUNCTION evil.lag(anyelement) RETURNS anyelement LANGUAGE sql AS $$ SELECT $1 WHERE evil.boom('lag') $$;
-- Tables named like what a load might read unqualified.
CREATE TABLE evil.dimensions (x int);
CREATE TABLE evil.audit_log (x int);
CREATE TABLE evil.scd2_changes (x int);
-- The traps work on unqualified SQL:
SET search_path = evil, hostile, pg_catalog, public;
SELECT 1 = 1;
SELECT 'a' = 'b' AS "text = lies";
SELECT count(*) FROM (VALUES (1)) v;
SELECT now();
RESET search_path;

-- Two identical dimensions; one loaded with the traps on the path, one
-- without: the same feeds, the same rows, the same metrics.
SET search_path = hostile, public;
CREATE TABLE stg_t (id int, code bigint, name text, note text, eff date, gone boolean);
INSERT INTO stg_t VALUES (1, 10, 'a', 'n', '2024-01-01', false), (1, 10, 'b', 'n', '2024-02-01', false),
                         (2, 20, 'c', 'n', '2024-01-01', false), (3, 30, 'd', 'n', '2024-01-01', false),
                         (3, 30, 'd', 'n', '2024-03-01', true), (4, 40, NULL, 'n', '2024-01-01', false),
                         (4, 40, NULL, 'n', '2024-01-01', false);
SELECT scd2.create_dimension('dim_plain', 'stg_t', ARRAY['id', 'code'], effective_column => 'eff',
                             delete_column => 'gone', type1 => ARRAY['note']);
SELECT scd2.create_dimension('dim_trap', 'stg_t', ARRAY['id', 'code'], effective_column => 'eff',
                             delete_column => 'gone', type1 => ARRAY['note']);
-- (loaded in order: the same-instant Type 1 update below is the in-order path's)
SELECT count(scd2.register(d, ARRAY['id', 'code'], type1 => ARRAY['note'], effective_column => 'eff',
                           delete_column => 'gone', order_free => false)) AS in_order
  FROM unnest(ARRAY['dim_plain', 'dim_trap']::regclass[]) AS d;
CREATE TEMP TABLE feed_plain AS SELECT * FROM scd2.merge('stg_t', 'dim_plain');
SET search_path = evil, hostile, pg_catalog, public;
CREATE TEMP TABLE feed_trap AS SELECT * FROM scd2.merge('stg_t', 'dim_trap');
CALL scd2.apply('stg_t', 'dim_trap', pg_catalog.now(), NULL) \gset
RESET search_path;
SET search_path = hostile, public;
-- Second batch: a late change, a Type 1 change, a key coming back after
-- its delete, a new key; loaded the same way.
UPDATE stg_t SET name = 'z', eff = '2023-12-01' WHERE id = 2;
UPDATE stg_t SET note = 'm' WHERE id = 4;
INSERT INTO stg_t VALUES (3, 30, 'd', 'n', '2024-05-01', false), (5, 50, 'e', 'n', '2024-04-01', false);
INSERT INTO feed_plain SELECT * FROM scd2.merge('stg_t', 'dim_plain');
SET search_path = evil, hostile, pg_catalog, public;
INSERT INTO feed_trap SELECT * FROM scd2.merge('stg_t', 'dim_trap');
RESET search_path;
SET search_path = hostile, public;
SELECT count(*) AS feed_rows,
       count(*) FILTER (WHERE (p.action, p.business_key, p.valid_from, p.valid_to)
                              IS NOT DISTINCT FROM (t.action, t.business_key, t.valid_from, t.valid_to)) AS equal_rows
  FROM (SELECT *, row_number() OVER (ORDER BY action, business_key::text, valid_from) AS n FROM feed_plain) p
  FULL JOIN (SELECT *, row_number() OVER (ORDER BY action, business_key::text, valid_from) AS n FROM feed_trap) t USING (n);
SELECT (SELECT array_agg((id, code, name, note, valid_from, valid_to, is_current) ORDER BY id, valid_from) FROM dim_plain)
     = (SELECT array_agg((id, code, name, note, valid_from, valid_to, is_current) ORDER BY id, valid_from) FROM dim_trap)
       AS same_dimension;
SELECT id, code, name, note, valid_from, valid_to, is_current FROM dim_trap ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim_trap');
SELECT dimension, status, source_rows, inserted, new_versions, closed, deleted, shortened, type1_updated, unchanged
  FROM scd2.audit_log WHERE dimension IN ('hostile.dim_plain', 'hostile.dim_trap') ORDER BY dimension, run_id;

-- 4. Privileges.  A role with USAGE on the schemas only: refused, nothing
--    written, whatever is missing.
CREATE ROLE regress_scd2_loader;
CREATE TABLE stg_p (id int, city text);
SELECT scd2.create_dimension('dim_p', 'stg_p', ARRAY['id']);
INSERT INTO stg_p VALUES (1, 'Oslo'), (2, 'Rome');
GRANT USAGE ON SCHEMA hostile TO regress_scd2_loader;
\set VERBOSITY default
SET ROLE regress_scd2_loader;
SELECT * FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-01-01');
RESET ROLE;
GRANT SELECT ON stg_p TO regress_scd2_loader;
SET ROLE regress_scd2_loader;
-- SELECT on the staging table, nothing on the dimension.
SELECT * FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-01-01');
RESET ROLE;
GRANT SELECT, INSERT ON dim_p TO regress_scd2_loader;
SET ROLE regress_scd2_loader;
-- No UPDATE on the dimension: refused before anything is read; a dry run
-- (SELECT only) is allowed.
SELECT * FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-01-01');
CALL scd2.apply('hostile.stg_p', 'hostile.dim_p', '2024-01-01');
SELECT action, business_key FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-01-01', dry_run => true) ORDER BY 2::text;
RESET ROLE;
REVOKE SELECT ON stg_p FROM regress_scd2_loader;
GRANT UPDATE ON dim_p TO regress_scd2_loader;
SET ROLE regress_scd2_loader;
-- Everything on the dimension, no SELECT on the staging table.
SELECT * FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-01-01');
RESET ROLE;
SELECT count(*) AS dimension_rows FROM dim_p;
SELECT status, username, message FROM scd2.audit_log WHERE dimension = 'hostile.dim_p' ORDER BY run_id;
-- The documented grants: SELECT on staging; SELECT, INSERT, UPDATE on the
-- dimension; USAGE on the schemas.  The load works.
GRANT SELECT ON stg_p TO regress_scd2_loader;
SET ROLE regress_scd2_loader;
CALL scd2.apply('hostile.stg_p', 'hostile.dim_p', '2024-01-01', NULL) \gset
RESET ROLE;
UPDATE stg_p SET city = 'Milan' WHERE id = 2;
SET ROLE regress_scd2_loader;
SELECT action, business_key FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2024-02-01') ORDER BY 2::text, 1;
-- The audit rows are the extension's: the loader reads them, cannot
-- change or forge them, nor the registry.
SELECT status, username, source_rows, inserted FROM scd2.audit_log WHERE dimension = 'hostile.dim_p' ORDER BY run_id;
UPDATE scd2.audit_log SET status = 'success' WHERE dimension = 'hostile.dim_p';
DELETE FROM scd2.audit_log WHERE dimension = 'hostile.dim_p';
UPDATE scd2.dimensions SET business_key = ARRAY['city']::name[];
-- Nor re-register (only the owner may).
\set VERBOSITY terse
SELECT scd2.register('hostile.dim_p', ARRAY['city']);
RESET ROLE;
SELECT id, city, valid_from, valid_to, is_current FROM dim_p ORDER BY id, valid_from;

-- The caller's own temporary objects named like scd2's work tables are
-- neither dropped nor read by a load.
\set VERBOSITY default
CREATE TEMP TABLE scd2_changes (my_precious int);
INSERT INTO scd2_changes VALUES (42);
CREATE TEMP VIEW scd2_keys AS SELECT 1 AS one;
SELECT count(*) >= 0 AS loaded FROM scd2.merge('hostile.stg_p', 'hostile.dim_p', '2031-01-01');
SELECT my_precious FROM pg_temp.scd2_changes;
SELECT one FROM pg_temp.scd2_keys;
DROP VIEW scd2_keys;
DROP TABLE scd2_changes;

REVOKE ALL ON SCHEMA hostile FROM regress_scd2_loader;
REVOKE ALL ON ALL TABLES IN SCHEMA hostile FROM regress_scd2_loader;
DROP ROLE regress_scd2_loader;
DROP SCHEMA evil CASCADE;
DROP SCHEMA "stage; area" CASCADE;
DROP SCHEMA hostile CASCADE;
