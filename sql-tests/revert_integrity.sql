-- Nothing lost, nothing doubled (issue 22): a revert follows the
-- registration in force (finding 1), refuses rows changed by hand since
-- the run and never leaves overlapping versions (finding 4), and gives
-- json Type 1 values back verbatim (finding 5).  Every refusal is checked
-- for its text and for having written nothing: the dimension, the audit
-- log and the change log are the same before and after.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA ri;
SET search_path = ri, public;

-- Run a statement: 'ok', or its error (SQLSTATE, message, detail, hint),
-- run ids and timestamps masked.
CREATE FUNCTION ri.try(q text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text; d text; h text; c text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT,
                            c = RETURNED_SQLSTATE;
    RETURN c || ': ' || regexp_replace(m || coalesce(' DETAIL: ' || nullif(d, ''), '')
                                       || coalesce(' HINT: ' || nullif(h, ''), ''), '\m(run|Run) [0-9]+', '\1 N', 'g');
END $$;

-- The newest successful run.
CREATE FUNCTION ri.last_run() RETURNS bigint LANGUAGE sql AS $$
    SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success'
$$;

CREATE TABLE stg (id int, city text, tier text, at timestamptz);

------------------------------------------------------------------------------
-- Finding 1: the owner moves from valid_to NULL to 'infinity' between the
-- load and the revert.  The revert restores the row the run closed as
-- current in the convention in force ('infinity'), and the next load finds
-- it: one current version, no overlap.
------------------------------------------------------------------------------
CREATE TABLE conv (id int NOT NULL, city text, tier text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('conv', ARRAY['id'], effective_column => 'at');
INSERT INTO stg VALUES (1, 'Oslo', 'a', '2024-01-01');
SELECT count(*) FROM scd2.merge('stg', 'conv');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Bergen', 'a', '2024-02-01');
SELECT count(*) FROM scd2.merge('stg', 'conv');
SELECT ri.last_run() AS run2 \gset
UPDATE conv SET valid_to = 'infinity' WHERE valid_to IS NULL;
SELECT scd2.register('conv', ARRAY['id'], effective_column => 'at', current_valid_to => 'infinity');
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT id, city, valid_from, valid_to FROM conv ORDER BY valid_from;
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Tromso', 'a', '2024-03-01');
SELECT count(*) FROM scd2.merge('stg', 'conv');
SELECT id, city, valid_from, valid_to FROM conv ORDER BY valid_from;

-- The convention changed but the open rows were not moved to it: the run's
-- current row is not as the run left it under the registration in force.
CREATE TABLE conv2 (id int NOT NULL, city text, tier text,
                    valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('conv2', ARRAY['id'], effective_column => 'at');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Oslo', 'a', '2024-01-01');
SELECT count(*) FROM scd2.merge('stg', 'conv2');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Bergen', 'a', '2024-02-01');
SELECT count(*) FROM scd2.merge('stg', 'conv2');
SELECT ri.last_run() AS run2 \gset
SELECT scd2.register('conv2', ARRAY['id'], effective_column => 'at', current_valid_to => 'infinity');
SELECT scd2_test.state('conv2') AS before \gset
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT scd2_test.state('conv2') = :'before' AS nothing_written;

-- Registered again with another bookkeeping column: refused.
ALTER TABLE conv2 ADD COLUMN is_current boolean;
UPDATE conv2 SET is_current = valid_to IS NULL, valid_to = NULL WHERE valid_to IS NULL;
SELECT scd2.register('conv2', ARRAY['id'], effective_column => 'at', is_current_column => 'is_current');
SELECT scd2_test.state('conv2') AS before \gset
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT scd2_test.state('conv2') = :'before' AS nothing_written;

------------------------------------------------------------------------------
-- Finding 4: rows the run wrote, changed by hand since.
------------------------------------------------------------------------------
CREATE TABLE hand (id int NOT NULL, city text, tier text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('hand', ARRAY['id'], effective_column => 'at', is_current_column => 'is_current');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Oslo', 'a', '2024-01-01'), (2, 'Rome', 'b', '2024-01-01');
SELECT count(*) FROM scd2.merge('stg', 'hand');
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Bergen', 'a', '2024-02-01');
SELECT count(*) FROM scd2.merge('stg', 'hand');
SELECT ri.last_run() AS run2 \gset

-- a hand-made close of the version the run inserted
UPDATE hand SET valid_to = '2024-05-01', is_current = false WHERE id = 1 AND valid_to IS NULL;
SELECT scd2_test.state('hand') AS before \gset
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT scd2_test.state('hand') = :'before' AS nothing_written;
-- put back as the run left it: the revert goes through
UPDATE hand SET valid_to = NULL, is_current = true WHERE id = 1 AND valid_from = '2024-02-01';
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT id, city, valid_from, valid_to, is_current FROM hand ORDER BY id, valid_from;

-- a hand-made reopening of the version the run closed
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Milan', 'b', '2024-03-01');
SELECT count(*) FROM scd2.merge('stg', 'hand');
SELECT ri.last_run() AS run3 \gset
UPDATE hand SET valid_to = '2024-04-01' WHERE id = 2 AND valid_from = '2024-01-01';
SELECT scd2_test.state('hand') AS before \gset
SELECT ri.try('SELECT scd2.revert(' || :run3 || ')');
SELECT scd2_test.state('hand') = :'before' AS nothing_written;
UPDATE hand SET valid_to = '2024-03-01' WHERE id = 2 AND valid_from = '2024-01-01';

-- A snapshot load deletes key 2; a closed version is backfilled by hand
-- after the deletion; reverting would reopen [01-01, open) over it.
CREATE TABLE snap (id int NOT NULL, city text, tier text,
                   valid_from date NOT NULL, valid_to date);
SELECT scd2.register('snap', ARRAY['id'], mode => 'snapshot', create_indexes => false);
CREATE TABLE sstg (id int, city text, tier text);
INSERT INTO sstg VALUES (1, 'Oslo', 'a'), (2, 'Rome', 'b');
SELECT count(*) FROM scd2.merge('sstg', 'snap', '2024-01-01');
DELETE FROM sstg WHERE id = 2;
SELECT count(*) FROM scd2.merge('sstg', 'snap', '2024-02-01');
SELECT ri.last_run() AS run2 \gset
INSERT INTO snap VALUES (2, 'Naples', 'b', '2024-03-01', '2024-04-01');
SELECT scd2_test.state('snap') AS before \gset
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT scd2_test.state('snap') = :'before' AS nothing_written;
SELECT id, city, valid_from, valid_to FROM snap ORDER BY id, valid_from;

------------------------------------------------------------------------------
-- Finding 5: json Type 1 values come back verbatim (key order, duplicate
-- keys, white space); other types too (xml is left out: PostgreSQL may be
-- built without libxml).
------------------------------------------------------------------------------
CREATE TABLE js (id int NOT NULL, city text, doc json, docs json[], b jsonb, x interval, f float8,
                 valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('js', ARRAY['id'], type1 => ARRAY['doc', 'docs', 'b', 'x', 'f']);
CREATE TABLE jstg (id int, city text, doc json, docs json[], b jsonb, x interval, f float8);
INSERT INTO jstg VALUES (1, 'Oslo', '{"b": 1,  "a": 3, "a": 4}', ARRAY['{"z":1, "y" :2}']::json[],
                         '{"k": [1, 2]}', '1 mon 2 days 03:04:05.5', 0.1),
                        (2, 'Rome', NULL, NULL, NULL, NULL, 'NaN');
SELECT count(*) FROM scd2.merge('jstg', 'js', '2024-01-01');
SELECT scd2_test.checksum('js') AS before_load \gset
UPDATE jstg SET doc = '{"c": 0}', docs = ARRAY['[]']::json[], b = '{}', x = '-1 day', f = 2.5;
SELECT count(*) FROM scd2.merge('jstg', 'js', '2024-02-01');
SELECT ri.last_run() AS run2 \gset
SELECT ri.try('SELECT scd2.revert(' || :run2 || ')');
SELECT scd2_test.checksum('js') = :'before_load' AS restored_exactly;
SELECT id, doc::text, docs::text, b, x::text, f FROM js ORDER BY id;
