-- CALL scd2.apply wherever SQL runs (issue 48): as the README writes it
-- (two or three arguments, no output parameter) at top level, in a DO
-- block, in a PL/pgSQL procedure that commits between two loads, in a
-- PL/pgSQL function and in an SQL function; the form of four arguments
-- returns the run id (a result row at top level, a variable in PL/pgSQL).
-- Each load is checked by its rows and its audit row.
SET client_min_messages = notice;
SET TimeZone = 'UTC';
CREATE SCHEMA plc;
SET search_path = plc, public;
CREATE TABLE stg (id int, city text);
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id']);

-- Two procedures, no shared default: a call of two or three arguments is
-- the one without an output parameter, of four the one with run_id.
SELECT p.oid::regprocedure AS procedure, pg_get_function_arguments(p.oid) AS arguments
  FROM pg_proc p WHERE p.proname = 'apply' AND p.pronamespace = 'scd2'::regnamespace
 ORDER BY p.pronargs;

-- What every load below is checked with: the dimension's versions and
-- the audit rows of the loads since the mark.
CREATE FUNCTION loads_since(mark bigint)
RETURNS TABLE (run_id bigint, status text, effective_at date, inserted bigint,
               new_versions bigint, closed bigint, message text)
LANGUAGE sql AS $$
    SELECT a.run_id - mark, a.status, a.effective_at::date, a.inserted, a.new_versions, a.closed, a.message
      FROM scd2.audit_log a WHERE a.run_id > mark AND a.dimension = 'plc.dim' ORDER BY a.run_id
$$;
CREATE FUNCTION versions()
RETURNS TABLE (id int, city text, valid_from date, valid_to date, is_current boolean)
LANGUAGE sql AS $$
    SELECT d.id, d.city, d.valid_from::date, d.valid_to::date, d.is_current FROM plc.dim d ORDER BY d.id, d.valid_from
$$;
SELECT coalesce(max(run_id), 0) AS mark FROM scd2.audit_log \gset

-- Top level, as written in the README: no result row, the NOTICE.
INSERT INTO stg VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stg', 'dim', effective_at => '2024-01-01');
SELECT * FROM loads_since(:mark);

-- The four-argument form at top level returns the run id.
UPDATE stg SET city = 'Bergen' WHERE id = 1;
CALL scd2.apply('stg', 'dim', '2024-02-01', NULL) \gset
SELECT :run_id - :mark AS returned_run_id, * FROM loads_since(:mark) WHERE run_id = :run_id - :mark;

-- A DO block: the README's call as it is, and the four-argument form with
-- a variable.
DO $$
DECLARE
    v_run_id bigint;
BEGIN
    UPDATE plc.stg SET city = 'Milan' WHERE id = 2;
    CALL scd2.apply('plc.stg', 'plc.dim', effective_at => '2024-03-01');
    UPDATE plc.stg SET city = 'Turin' WHERE id = 2;
    CALL scd2.apply('plc.stg', 'plc.dim', '2024-04-01', v_run_id);
    RAISE NOTICE 'run id is the audit row''s: %',
        v_run_id = (SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'plc.dim');
END $$;
SELECT * FROM loads_since(:mark) WHERE effective_at >= '2024-03-01';
SELECT * FROM versions();

-- A procedure that commits between two loads, called at top level.
SELECT max(run_id) AS mark FROM scd2.audit_log \gset
CREATE PROCEDURE nightly(first_at timestamptz, first_city text, second_at timestamptz, second_city text)
LANGUAGE plpgsql AS $$
BEGIN
    UPDATE plc.stg SET city = first_city WHERE id = 2;
    CALL scd2.apply('plc.stg', 'plc.dim', first_at);
    COMMIT;
    UPDATE plc.stg SET city = second_city WHERE id = 1;
    INSERT INTO plc.stg SELECT NULL, 'Nowhere' WHERE second_city = 'Nowhere';
    CALL scd2.apply('plc.stg', 'plc.dim', second_at);
END $$;
CALL nightly('2024-05-01', 'Pisa', '2024-06-01', 'Lucca');
SELECT * FROM loads_since(:mark);
SELECT * FROM versions() WHERE valid_from >= '2024-05-01';

-- The second load fails (a NULL key): the first stays committed, and the
-- failed one's error row is committed (as at top level, with what the
-- procedure did since its COMMIT: the staging rows it changed).
SELECT max(run_id) AS mark FROM scd2.audit_log \gset
CALL nightly('2024-07-01', 'Siena', '2024-08-01', 'Nowhere');
SELECT * FROM loads_since(:mark);
SELECT * FROM versions() WHERE valid_from >= '2024-07-01';
SELECT * FROM stg ORDER BY id;
DELETE FROM stg WHERE id IS NULL;
UPDATE stg SET city = 'Lucca' WHERE id = 1;

-- Inside a transaction block the procedure may not commit (PostgreSQL's
-- rule): refused, and nothing is left of its first load.
SELECT max(run_id) AS mark FROM scd2.audit_log \gset
BEGIN;
CALL nightly('2024-09-01', 'Prato', '2024-10-01', 'Alta');
ROLLBACK;
SELECT count(*) AS loads_after_refusal FROM loads_since(:mark);
SELECT count(*) AS versions_after_refusal FROM versions() WHERE valid_from >= '2024-09-01';

-- A PL/pgSQL function (an atomic context): both forms.
SELECT max(run_id) AS mark FROM scd2.audit_log \gset
CREATE FUNCTION load_two() RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    v_run_id bigint;
BEGIN
    UPDATE plc.stg SET city = 'Alta' WHERE id = 1;
    CALL scd2.apply('plc.stg', 'plc.dim', '2024-09-01');
    UPDATE plc.stg SET city = 'Narvik' WHERE id = 1;
    CALL scd2.apply('plc.stg', 'plc.dim', '2024-10-01', v_run_id);
    RETURN v_run_id;
END $$;
SELECT load_two() - :mark AS returned_run_id;
SELECT * FROM loads_since(:mark);

-- An SQL function.
SELECT max(run_id) AS mark FROM scd2.audit_log \gset
CREATE FUNCTION load_sql() RETURNS void
LANGUAGE sql AS $$
    UPDATE plc.stg SET city = 'Hamar' WHERE id = 1;
    CALL scd2.apply('plc.stg', 'plc.dim', '2024-11-01');
$$;
SELECT load_sql();
SELECT * FROM loads_since(:mark);
SELECT * FROM versions() WHERE valid_from >= '2024-09-01';

-- Named arguments: the four-argument form names both.
UPDATE stg SET city = 'Lund' WHERE id = 1;
CALL scd2.apply('stg', 'dim', effective_at => '2024-12-01', run_id => NULL) \gset
SELECT :run_id = max(run_id) AS named_run_id FROM scd2.audit_log;

RESET search_path;
DROP SCHEMA plc CASCADE;
