-- Whose rights rewind and apply_snapshots (issue 27) run with: the same
-- as revert and loads.  Code the dimension's owner controls (a trigger)
-- runs as the owner in a security-restricted operation, never with the
-- caller's rights; what revert or a load refuses, they refuse, writing
-- nothing.  Roles are cluster-wide: created and dropped here.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
DROP ROLE IF EXISTS regress_scd2h_owner;
DROP ROLE IF EXISTS regress_scd2h_loader;
DROP ROLE IF EXISTS regress_scd2h_nobody;
CREATE ROLE regress_scd2h_owner;
CREATE ROLE regress_scd2h_loader;
CREATE ROLE regress_scd2h_nobody;
CREATE SCHEMA hsec AUTHORIZATION regress_scd2h_owner;
GRANT USAGE ON SCHEMA hsec TO PUBLIC;
GRANT USAGE, CREATE ON SCHEMA histops TO PUBLIC;
CREATE TABLE hsec.secret (v text);
INSERT INTO hsec.secret VALUES ('secret');
GRANT SELECT ON hsec.secret TO regress_scd2h_loader;

-- The owner's dimension, with a trigger that tries what a hostile owner
-- would: become superuser, read a table only the caller may read, leave a
-- setting behind.
SET ROLE regress_scd2h_owner;
CREATE TABLE hsec.dim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                       valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('hsec.dim', ARRAY['id'], mode => 'snapshot');
CREATE TABLE hsec.extracts (day date, id int, v text);
INSERT INTO hsec.extracts VALUES ('2024-01-01', 1, 'a'), ('2024-01-01', 2, 'a'),
                                 ('2024-01-02', 1, 'b'), ('2024-01-02', 2, 'a');
CREATE TABLE hsec.trigger_log (n serial, op text, role_seen name, escalation text, secret text);
CREATE FUNCTION hsec.spy() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_escalation text;
    v_secret text;
BEGIN
    BEGIN
        EXECUTE 'ALTER ROLE regress_scd2h_owner SUPERUSER';
        v_escalation := 'became superuser';
    EXCEPTION WHEN OTHERS THEN
        v_escalation := 'refused';
    END;
    BEGIN
        SELECT v INTO v_secret FROM hsec.secret LIMIT 1;
    EXCEPTION WHEN insufficient_privilege THEN
        v_secret := 'refused';
    END;
    PERFORM pg_catalog.set_config('work_mem', '1234kB', false);
    INSERT INTO hsec.trigger_log (op, role_seen, escalation, secret) VALUES (TG_OP, current_user, v_escalation, v_secret);
    RETURN NULL;
END $$;
CREATE TRIGGER spy AFTER INSERT OR UPDATE OR DELETE ON hsec.dim FOR EACH STATEMENT EXECUTE FUNCTION hsec.spy();
GRANT SELECT ON hsec.extracts TO regress_scd2h_loader;
GRANT SELECT, INSERT, UPDATE, DELETE ON hsec.dim TO regress_scd2h_loader;
GRANT SELECT ON hsec.trigger_log TO PUBLIC;
RESET ROLE;

-- The loader applies the extracts, then rewinds to the first one.
SET ROLE regress_scd2h_loader;
SET work_mem = '4MB';
CALL scd2.apply_snapshots('hsec.extracts', 'hsec.dim', 'day');
SELECT scd2.rewind('hsec.dim', (SELECT min(run_id) FROM scd2.change_log_runs WHERE dimension = 'hsec.dim'::regclass));
SHOW work_mem;
RESET ROLE;
SELECT op, role_seen, escalation, secret, count(*) FROM hsec.trigger_log GROUP BY 1, 2, 3, 4 ORDER BY 1;
SELECT id, v, valid_to IS NULL AS current FROM hsec.dim ORDER BY id, valid_from;

-- What the others may not do, they may not do through these either; and
-- they are refused as revert and apply refuse them, writing nothing.
CREATE FUNCTION histops.refusal(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '\mrun [0-9]+', 'run N', 'g');
END $$;
-- What a statement does, rolled back: the dimension it leaves (surrogate
-- keys aside), or its error.
CREATE FUNCTION histops.outcome(q text, dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text;
BEGIN
    EXECUTE q;
    RAISE EXCEPTION USING ERRCODE = 'SC2OK', MESSAGE = histops.checksum(dim, ARRAY['sk']);
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
GRANT EXECUTE ON FUNCTION histops.outcome(text, regclass) TO PUBLIC;
SELECT histops.state('hsec.dim') AS before \gset
SET ROLE regress_scd2h_nobody;
SELECT histops.refusal($$CALL scd2.apply('hsec.extracts', 'hsec.dim', '2024-01-03')$$) AS apply,
       histops.refusal($$CALL scd2.apply_snapshots('hsec.extracts', 'hsec.dim', 'day')$$) AS apply_snapshots;
SELECT histops.refusal(format('SELECT scd2.revert(%s)', min(run_id))) AS revert,
       histops.refusal(format('SELECT scd2.rewind(%L, %s::bigint)', 'hsec.dim', min(run_id))) AS rewind
  FROM scd2.change_log_runs WHERE dimension = 'hsec.dim'::regclass;
RESET ROLE;
-- without DELETE: no revert, no rewind; a load needs none
REVOKE DELETE ON hsec.dim FROM regress_scd2h_loader;
SET ROLE regress_scd2h_loader;
SELECT histops.refusal(format('SELECT scd2.revert(%s)', min(run_id))) AS revert,
       histops.refusal(format('SELECT scd2.rewind(%L, %s::bigint)', 'hsec.dim', min(run_id))) AS rewind
  FROM scd2.change_log_runs WHERE dimension = 'hsec.dim'::regclass;
RESET ROLE;
SELECT histops.state('hsec.dim') = :'before' AS nothing_written;
-- a staging table the owner may not read: the load reads it as the owner
SET ROLE regress_scd2h_loader;
CREATE TABLE histops.loader_extracts AS SELECT * FROM hsec.extracts;
UPDATE histops.loader_extracts SET day = day + 10;
SELECT histops.refusal($$CALL scd2.apply('histops.loader_extracts', 'hsec.dim', '2024-01-13')$$) AS apply,
       histops.refusal($$CALL scd2.apply_snapshots('histops.loader_extracts', 'hsec.dim', 'day')$$) AS apply_snapshots;
-- a staging table with row security the loader is subject to: refused alike
RESET ROLE;
ALTER TABLE hsec.extracts ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_1 ON hsec.extracts FOR SELECT TO regress_scd2h_loader USING (id = 1);
DELETE FROM hsec.extracts WHERE day = '2024-01-01';
UPDATE hsec.extracts SET day = '2024-01-22';
SET ROLE regress_scd2h_loader;
SELECT histops.outcome($$CALL scd2.apply('hsec.extracts', 'hsec.dim', '2024-01-22')$$, 'hsec.dim')
       = histops.outcome($$CALL scd2.apply_snapshots('hsec.extracts', 'hsec.dim', 'day')$$, 'hsec.dim') AS same_outcome;
RESET ROLE;
SELECT histops.state('hsec.dim') = :'before' AS nothing_written;

DROP SCHEMA hsec CASCADE;
DROP TABLE histops.loader_extracts;
DROP FUNCTION histops.refusal(text);
DROP FUNCTION histops.outcome(text, regclass);
REVOKE ALL ON SCHEMA histops FROM PUBLIC;
DELETE FROM scd2.change_log WHERE run_id IN (SELECT run_id FROM scd2.audit_log WHERE dimension = 'hsec.dim');
DELETE FROM scd2.change_log_runs WHERE run_id IN (SELECT run_id FROM scd2.audit_log WHERE dimension = 'hsec.dim');
DELETE FROM scd2.audit_log WHERE dimension = 'hsec.dim';
DROP ROLE regress_scd2h_owner;
DROP ROLE regress_scd2h_loader;
DROP ROLE regress_scd2h_nobody;
