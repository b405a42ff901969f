-- The audit log's row security goes by the dimension's OID (issue 47,
-- finding 3): a failed load's message names a business key, and a table
-- that later takes the dimension's name -- after a rename, or a drop --
-- is another table, whose owner sees none of those rows.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE ROLE regress_al_owner;
CREATE ROLE regress_al_reader;
CREATE ROLE regress_al_intruder;
CREATE SCHEMA al AUTHORIZATION regress_al_owner;
GRANT USAGE, CREATE ON SCHEMA al TO regress_al_intruder;
GRANT USAGE ON SCHEMA al TO regress_al_reader;

SET ROLE regress_al_owner;
CREATE TABLE al.d1 (email text NOT NULL, tier text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE al.d2 (LIKE al.d1);
CREATE TABLE al.stg (email text, tier text);
SELECT scd2.register('al.d1', ARRAY['email']);
SELECT scd2.register('al.d2', ARRAY['email']);
GRANT SELECT ON al.d1, al.d2 TO regress_al_reader;
-- a failed load of each names the key in its message; d1 also loads
INSERT INTO al.stg VALUES ('alice@example.com', 'gold'), ('alice@example.com', 'silver');
CALL scd2.apply('al.stg', 'al.d1', '2024-01-01');
CALL scd2.apply('al.stg', 'al.d2', '2024-01-01');
DELETE FROM al.stg WHERE tier = 'silver';
CALL scd2.apply('al.stg', 'al.d1', '2024-01-01', NULL) \gset
RESET ROLE;

-- Who sees what: the owner and a reader of the dimension see its rows
-- (the error with the key too); a role without SELECT sees none.
CREATE VIEW al.seen AS
SELECT dimension, status, message LIKE '%alice@example.com%' AS names_the_key
  FROM scd2.audit_log WHERE dimension IN ('al.d1', 'al.d2', 'al.d1_old');
GRANT SELECT ON al.seen TO PUBLIC;
ALTER VIEW al.seen SET (security_invoker = true);
SELECT dimension_oid = 'al.d1'::regclass AS by_oid, count(*) FROM scd2.audit_log
 WHERE dimension = 'al.d1' GROUP BY 1;
SET ROLE regress_al_reader;
SELECT * FROM al.seen ORDER BY 1, 2;
SET ROLE regress_al_intruder;
SELECT count(*) AS intruder_sees FROM al.seen;
RESET ROLE;

-- A rename: the rows stay with the table (its readers still see them), and
-- a new al.d1 by the intruder reveals nothing.
ALTER TABLE al.d1 RENAME TO d1_old;
SET ROLE regress_al_intruder;
CREATE TABLE al.d1 (email text);
SELECT count(*) AS intruder_sees_after_rename FROM al.seen;
SELECT count(*) AS intruder_sees_by_name FROM scd2.audit_log WHERE dimension = 'al.d1';
RESET ROLE;
SET ROLE regress_al_reader;
SELECT count(*) AS reader_still_sees FROM scd2.audit_log WHERE dimension_oid = 'al.d1_old'::regclass;
RESET ROLE;

-- A drop: the rows are marked (as change_log_runs' are), and nobody but
-- the role that ran them (and roles exempt from row security) sees them;
-- a new al.d2 by the intruder reveals nothing.
SELECT 'al.d2'::regclass::oid AS d2_oid \gset
DROP TABLE al.d2;
SELECT count(*) AS rows, bool_and(dimension_dropped_at IS NOT NULL) AS marked
  FROM scd2.audit_log WHERE dimension_oid::oid = :d2_oid;
SELECT count(*) AS runs_still_live FROM scd2.change_log_runs
 WHERE dimension::oid = :d2_oid AND dimension_dropped_at IS NULL;
SET ROLE regress_al_intruder;
CREATE TABLE al.d2 (email text);
SELECT count(*) AS intruder_sees_after_drop FROM al.seen WHERE dimension = 'al.d2';
SELECT scd2._may_read_dimension('al.d2'::regclass) AS own_table,
       scd2._may_read_dimension('al.d1_old'::regclass) AS others_table;
RESET ROLE;
SET ROLE regress_al_reader;
SELECT count(*) AS reader_sees_dropped FROM al.seen WHERE dimension = 'al.d2';
SET ROLE regress_al_owner;
SELECT dimension, status, names_the_key FROM al.seen WHERE dimension = 'al.d2';
RESET ROLE;

-- A table dropped while event triggers did not fire: marked at the next
-- drop the trigger sees.
SET ROLE regress_al_owner;
CREATE TABLE al.d3 (LIKE al.d1_old);
SELECT scd2.register('al.d3', ARRAY['email']);
CALL scd2.apply('al.stg', 'al.d3', '2024-01-01', NULL) \gset
RESET ROLE;
SELECT 'al.d3'::regclass::oid AS d3_oid \gset
SET session_replication_role = replica;
DROP TABLE al.d3;
RESET session_replication_role;
SELECT count(*) FILTER (WHERE dimension_dropped_at IS NULL) AS unmarked FROM scd2.audit_log WHERE dimension_oid::oid = :d3_oid;
CREATE TABLE al.anything (i int);
DROP TABLE al.anything;
SELECT count(*) FILTER (WHERE dimension_dropped_at IS NULL) AS unmarked_after_next_drop FROM scd2.audit_log WHERE dimension_oid::oid = :d3_oid;

DROP SCHEMA al CASCADE;
DROP ROLE regress_al_owner, regress_al_reader, regress_al_intruder;
