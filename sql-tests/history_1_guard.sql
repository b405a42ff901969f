-- The partial-extract guard (issue 27): register(..., max_close_fraction)
-- refuses a load that would close more than that fraction of the current
-- keys, with the counts, writing nothing; SET LOCAL
-- scd2.allow_large_close = on lets one load through.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

CREATE TABLE gdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE gstg (id int, v text, gone boolean DEFAULT false);

-- The range is checked.
SELECT histops.try($$SELECT scd2.register('gdim', ARRAY['id'], mode => 'snapshot', max_close_fraction => 1.5)$$);
SELECT histops.try($$SELECT scd2.register('gdim', ARRAY['id'], mode => 'snapshot', max_close_fraction => -0.1)$$);
SELECT histops.try($$SELECT scd2.register('gdim', ARRAY['id'], mode => 'snapshot', max_close_fraction => 'NaN')$$);
SELECT scd2.register('gdim', ARRAY['id'], mode => 'snapshot', max_close_fraction => 0.2);
SELECT max_close_fraction FROM scd2.dimensions WHERE dimension = 'gdim'::regclass;

-- A first load of 10 keys: nothing to close.
INSERT INTO gstg (id, v) SELECT g, 'a' FROM generate_series(1, 10) g;
CALL scd2.apply('gstg', 'gdim', '2024-01-01', NULL) \gset

-- 2 of 10 keys missing: at the limit, loaded.
DELETE FROM gstg WHERE id IN (9, 10);
CALL scd2.apply('gstg', 'gdim', '2024-02-01', NULL) \gset
SELECT status, deleted FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;

-- A partial extract: 3 of the 8 current keys left.  Refused with the
-- counts, and nothing written, by merge and by apply (in a transaction
-- block); a dry run writes nothing and is not refused.
DELETE FROM gstg WHERE id > 3;
SELECT histops.state('gdim') AS before \gset
SELECT histops.try($$SELECT count(*) FROM scd2.merge('gstg', 'gdim', '2024-03-01')$$);
SELECT histops.try($$CALL scd2.apply('gstg', 'gdim', '2024-03-01')$$);
SELECT histops.state('gdim') = :'before' AS nothing_written;
SELECT action, count(*) FROM scd2.merge('gstg', 'gdim', '2024-03-01', dry_run => true) GROUP BY 1;
-- A change in the same batch does not count: only keys left without a current version.
UPDATE gstg SET v = 'b' WHERE id = 1;
SELECT histops.try($$SELECT count(*) FROM scd2.merge('gstg', 'gdim', '2024-03-01')$$);

-- At top level a refused CALL leaves its error row, as every failed CALL does.
CALL scd2.apply('gstg', 'gdim', '2024-03-01');
SELECT status, regexp_replace(message, 'run [0-9]+', 'run N') FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT histops.checksum('gdim') = split_part(:'before', ' audit ', 1) AS dimension_unchanged;

-- The override, for one transaction.
BEGIN;
SET LOCAL scd2.allow_large_close = on;
CALL scd2.apply('gstg', 'gdim', '2024-03-01', NULL) \gset
COMMIT;
SELECT status, new_versions, closed, deleted FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) FILTER (WHERE valid_to IS NULL) AS current_keys FROM gdim;
SHOW scd2.allow_large_close;

-- Delete markers count too (incremental mode), and limit 0 refuses any close.
SELECT scd2.register('gdim', ARRAY['id'], delete_column => 'gone', max_close_fraction => 0);
UPDATE gstg SET gone = true WHERE id = 3;
SELECT histops.try($$CALL scd2.apply('gstg', 'gdim', '2024-04-01')$$);
-- Registering again without it removes the limit.
SELECT scd2.register('gdim', ARRAY['id'], delete_column => 'gone');
SELECT max_close_fraction FROM scd2.dimensions WHERE dimension = 'gdim'::regclass;
CALL scd2.apply('gstg', 'gdim', '2024-04-01', NULL) \gset
SELECT status, deleted FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT scd2_test.invariants('gdim');

-- The limit is the registered decimal fraction, not its nearest real:
-- 7 of 10 keys closed under 0.7 is allowed.
CREATE TABLE fdim (id int NOT NULL, v int, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE fstg (id int, v int);
SELECT scd2.register('fdim', ARRAY['id'], mode => 'snapshot', max_close_fraction => 0.7);
INSERT INTO fstg SELECT generate_series(1, 10);
CALL scd2.apply('fstg', 'fdim', '2024-01-01', NULL) \gset
DELETE FROM fstg WHERE id > 2;
SELECT histops.try($$CALL scd2.apply('fstg', 'fdim', '2024-02-01')$$);
INSERT INTO fstg VALUES (3);
CALL scd2.apply('fstg', 'fdim', '2024-02-01', NULL) \gset
SELECT status, deleted FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;

-- The guard counts every key current before the load and not after it,
-- whatever ends it.  An order-free dimension with 10 current keys: delete
-- markers for 8 of them a month later end them (deleted 8); at the
-- versions' own start time they remove the versions instead (an
-- order-free load's removes).  Both refused, nothing written (the
-- dimension, the audit log, the change log, the arrival memory); with
-- scd2.allow_large_close the second loads, and its audit row says
-- removed 8.
CREATE TABLE odim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
CREATE TABLE ostg (id int, v text, at timestamptz, gone boolean DEFAULT false);
SELECT scd2.register('odim', ARRAY['id'], effective_column => 'at', delete_column => 'gone',
                     order_free => true, max_close_fraction => 0.2, is_current_column => 'is_current');
INSERT INTO ostg (id, v, at) SELECT g, 'a', '2024-01-01' FROM generate_series(1, 10) g;
CALL scd2.apply('ostg', 'odim', now(), NULL) \gset
TRUNCATE ostg;
INSERT INTO ostg (id, at, gone) SELECT g, '2024-02-01', true FROM generate_series(1, 8) g;
SELECT histops.state('odim') || ' memory ' || histops.checksum('scd2.arrival_memory') AS before \gset
SELECT histops.try($$CALL scd2.apply('ostg', 'odim')$$);
UPDATE ostg SET at = '2024-01-01';
SELECT histops.try($$CALL scd2.apply('ostg', 'odim')$$);
SELECT histops.try($$SELECT count(*) FROM scd2.merge('ostg', 'odim')$$);
SELECT histops.state('odim') || ' memory ' || histops.checksum('scd2.arrival_memory') = :'before' AS nothing_written;
-- 2 of 10 at the limit: loaded
BEGIN;
DELETE FROM ostg WHERE id > 2;
SELECT action, count(*) FROM scd2.merge('ostg', 'odim') GROUP BY 1;
ROLLBACK;
BEGIN;
SET LOCAL scd2.allow_large_close = on;
CALL scd2.apply('ostg', 'odim', now(), NULL) \gset
COMMIT;
SELECT status, deleted, removed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to IS NULL) AS current_keys FROM odim;
-- A change of every key (close + new version) ends none: not refused.
TRUNCATE ostg;
INSERT INTO ostg (id, v, at) SELECT g, 'b', '2024-03-01' FROM generate_series(9, 10) g;
SELECT scd2.register('odim', ARRAY['id'], effective_column => 'at', delete_column => 'gone',
                     order_free => true, max_close_fraction => 0, is_current_column => 'is_current');
CALL scd2.apply('ostg', 'odim', now(), NULL) \gset
SELECT status, new_versions, closed, deleted, removed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT scd2_test.invariants('odim');
DROP TABLE odim, ostg;
