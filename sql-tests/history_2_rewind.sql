-- scd2.rewind (issue 27): every successful load of a dimension after a
-- run, or after the last load finished at or before an instant, undone
-- newest first in one transaction, each as scd2.revert would; refused
-- before anything is written when one of them cannot be reverted.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

-- The state of a dimension after each of its runs (every column, the
-- surrogate keys too), and when the run became known (committed: each
-- load commits on its own).
CREATE TABLE histops.kept (dim regclass, run_id bigint, sum text, known timestamptz);
CREATE PROCEDURE histops.load_keep(stg regclass, dim regclass, eff timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    run bigint;
BEGIN
    CALL scd2.apply(stg, dim, eff, run);
    COMMIT;
    INSERT INTO histops.kept SELECT dim, run, histops.checksum(dim), histops.known_since(run);
END $$;

-- Run a rewind in a subtransaction that is rolled back: how many runs it
-- undid and whether the dimension then equals want.
CREATE FUNCTION histops.rewind_check(dim regclass, q text, want text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    n bigint; m text;
BEGIN
    EXECUTE q INTO n;
    RAISE EXCEPTION USING ERRCODE = 'SC2RW', MESSAGE = n || ' undone, ' ||
        CASE WHEN histops.checksum(dim) = want THEN 'equal' ELSE 'DIFFERENT' END;
EXCEPTION WHEN SQLSTATE 'SC2RW' THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT;
    RETURN m;
END $$;

-- A chain of every kind of load: a first load, changes, a Type 1
-- overwrite, a new key, several changes of one key, a delete marker, a
-- late change that splits history, a key that returns, a load that
-- changes nothing.
CREATE TABLE rdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text, note text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE rstg (id int, v text, note text, eff timestamptz, del boolean DEFAULT false);
SELECT scd2.register('rdim', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff',
                     delete_column => 'del');
INSERT INTO histops.kept SELECT 'rdim', 0, histops.checksum('rdim'), now() - interval '1 hour';

INSERT INTO rstg (id, v, note, eff) SELECT g, 'a', 'n', '2024-01-01' FROM generate_series(1, 6) g;
CALL histops.load_keep('rstg', 'rdim', '2024-01-01');
TRUNCATE rstg;
INSERT INTO rstg (id, v, note, eff) VALUES (1, 'b', 'n', '2024-02-01'), (2, 'a', 'N', '2024-02-01'),
                                           (7, 'a', 'n', '2024-02-01');
CALL histops.load_keep('rstg', 'rdim', '2024-02-01');
TRUNCATE rstg;
INSERT INTO rstg (id, v, note, eff, del) VALUES (3, 'b', 'n', '2024-03-01', false), (3, 'c', 'n', '2024-03-15', false),
                                                (4, NULL, NULL, '2024-03-01', true);
CALL histops.load_keep('rstg', 'rdim', '2024-03-01');
TRUNCATE rstg;
INSERT INTO rstg (id, v, note, eff) VALUES (1, 'x', 'n', '2024-01-15'), (4, 'a', 'n', '2024-04-01');
CALL histops.load_keep('rstg', 'rdim', '2024-04-01');
CALL histops.load_keep('rstg', 'rdim', '2024-04-01');
TRUNCATE rstg;
INSERT INTO rstg (id, v, note, eff) VALUES (5, 'b', 'm', '2024-05-01'), (6, 'b', 'n', '2024-05-01');
CALL histops.load_keep('rstg', 'rdim', '2024-05-01');
SELECT scd2_test.invariants('rdim');
SELECT r.status, a.action, count(*)
  FROM histops.kept k JOIN scd2.audit_log r USING (run_id), scd2.changes(k.run_id) a
 WHERE k.dim = 'rdim'::regclass GROUP BY 1, 2 ORDER BY 1, 2;

-- Rewind to each run, and to the instant each became known (and just
-- before, and before the first load): every column equals the state
-- after the target.
SELECT k.n AS target,
       histops.rewind_check('rdim', format('SELECT scd2.rewind(%L, %s::bigint)', 'rdim', k.run_id), k.sum) AS to_run,
       histops.rewind_check('rdim', format('SELECT scd2.rewind(%L, %L::timestamptz)', 'rdim', k.known), k.sum) AS to_time,
       histops.rewind_check('rdim', format('SELECT scd2.rewind(%L, %L::timestamptz)', 'rdim', k.known - interval '1 microsecond'),
                         k.sum_before) AS just_before
  FROM (SELECT *, row_number() OVER (ORDER BY run_id) - 1 AS n, lag(sum) OVER (ORDER BY run_id) AS sum_before
          FROM histops.kept WHERE dim = 'rdim'::regclass) k
 WHERE k.run_id > 0 ORDER BY k.run_id;
SELECT histops.rewind_check('rdim', $$SELECT scd2.rewind('rdim', '2000-01-01'::timestamptz)$$,
                         (SELECT sum FROM histops.kept WHERE dim = 'rdim'::regclass AND run_id = 0)) AS before_first_load;

-- A snapshot-mode chain: keys absent from an extract are closed, keys
-- that come back open again.
CREATE TABLE sdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE sstg (id int, v text);
SELECT scd2.register('sdim', ARRAY['id'], mode => 'snapshot');
INSERT INTO sstg SELECT g, 'a' FROM generate_series(1, 5) g;
CALL histops.load_keep('sstg', 'sdim', '2024-01-01');
DELETE FROM sstg WHERE id IN (2, 3);
UPDATE sstg SET v = 'b' WHERE id = 1;
CALL histops.load_keep('sstg', 'sdim', '2024-02-01');
INSERT INTO sstg VALUES (2, 'a'), (6, 'a');
CALL histops.load_keep('sstg', 'sdim', '2024-03-01');
SELECT k.run_id = min(k.run_id) OVER () AS first,
       histops.rewind_check('sdim', format('SELECT scd2.rewind(%L, %s::bigint)', 'sdim', k.run_id), k.sum) AS to_run
  FROM histops.kept k WHERE k.dim = 'sdim'::regclass ORDER BY k.run_id;

-- For real: rewind rdim to its second run.  The undone runs are marked
-- reverted by one audit row of the rewind (status revert), the load that
-- changed nothing included; the later runs of sdim are untouched.
SELECT run_id AS r2 FROM histops.kept WHERE dim = 'rdim'::regclass ORDER BY run_id OFFSET 2 LIMIT 1 \gset
SELECT scd2.rewind('rdim', :r2);
SELECT histops.checksum('rdim') = (SELECT sum FROM histops.kept WHERE run_id = :r2) AS equals_run_2;
SELECT regexp_replace(message, '[0-9]+', 'N', 'g') AS message, status, staging
  FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT k.run_id > :r2 AS after_target, a.status, r.reverted_by = (SELECT max(run_id) FROM scd2.audit_log) AS by_the_rewind,
       count(*)
  FROM histops.kept k JOIN scd2.audit_log a USING (run_id) JOIN scd2.change_log_runs r USING (run_id)
 WHERE k.dim = 'rdim'::regclass AND k.run_id > 0 GROUP BY 1, 2, 3 ORDER BY 1;
SELECT count(*) AS sdim_runs_still_success FROM histops.kept k JOIN scd2.audit_log a USING (run_id)
 WHERE k.dim = 'sdim'::regclass AND a.status = 'success';
-- Nothing after the target: 0, nothing written.
SELECT histops.state('rdim') AS before \gset
SELECT scd2.rewind('rdim', :r2);
SELECT histops.state('rdim') = :'before' AS nothing_written;
-- The rewind is itself a revert, which cannot be reverted; loading again works.
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT max(run_id) FROM scd2.audit_log)));
CALL histops.load_keep('rstg', 'rdim', '2024-05-01');
SELECT scd2_test.invariants('rdim');

-- Refusals, each before anything is written.
-- A run loaded with scd2.change_log = off in the middle of the chain.
SELECT max(run_id) AS r3 FROM histops.kept WHERE dim = 'rdim'::regclass \gset
SET scd2.change_log = off;
UPDATE rstg SET v = 'c', eff = '2024-06-01';
CALL histops.load_keep('rstg', 'rdim', '2024-06-01');
RESET scd2.change_log;
UPDATE rstg SET v = 'd', eff = '2024-07-01';
CALL histops.load_keep('rstg', 'rdim', '2024-07-01');
SELECT histops.state('rdim') AS before \gset
SELECT histops.try(format('SELECT scd2.rewind(%L, %s::bigint)', 'rdim', :r3));
SELECT histops.try(format('SELECT scd2.rewind(%L, %L::timestamptz)', 'rdim', '2000-01-01'));
SELECT histops.state('rdim') = :'before' AS nothing_written;
-- ... after it, fine.
SELECT histops.rewind_check('rdim', format('SELECT scd2.rewind(%L, %s::bigint)', 'rdim', k.run_id), k.sum)
  FROM histops.kept k WHERE k.dim = 'rdim'::regclass ORDER BY k.run_id DESC OFFSET 1 LIMIT 1;
-- A pruned run.
SELECT scd2.prune_change_log('0', 'sdim');
SELECT histops.state('sdim') AS before \gset
SELECT regexp_replace(histops.try(format('SELECT scd2.rewind(%L, %s::bigint)', 'sdim', min(run_id))), 'removed it at .* UTC', 'removed it at T')
  FROM histops.kept WHERE dim = 'sdim'::regclass;
SELECT histops.state('sdim') = :'before' AS nothing_written;
-- Rows changed by hand since the run: found while undoing, the whole
-- rewind rolls back.
CREATE TABLE hdim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE hstg (id int, v text);
SELECT scd2.register('hdim', ARRAY['id']);
INSERT INTO hstg VALUES (1, 'a'), (2, 'a');
CALL histops.load_keep('hstg', 'hdim', '2024-01-01');
UPDATE hstg SET v = 'b' WHERE id = 1;
CALL histops.load_keep('hstg', 'hdim', '2024-02-01');
UPDATE hstg SET v = 'c' WHERE id = 2;
CALL histops.load_keep('hstg', 'hdim', '2024-03-01');
UPDATE hdim SET valid_from = '2024-02-02' WHERE id = 1 AND valid_to IS NULL;
SELECT histops.state('hdim') AS before \gset
SELECT histops.try(format('SELECT scd2.rewind(%L, %s::bigint)', 'hdim', min(run_id))) FROM histops.kept WHERE dim = 'hdim'::regclass;
SELECT histops.state('hdim') = :'before' AS nothing_written;
-- Targets: a run of another dimension, a reverted run, NULLs, no such run.
SELECT histops.try(format('SELECT scd2.rewind(%L, %s::bigint)', 'rdim', max(run_id))) FROM histops.kept WHERE dim = 'sdim'::regclass;
SELECT histops.try(format('SELECT scd2.rewind(%L, %s::bigint)', 'rdim', min(run_id))) FROM histops.kept WHERE dim = 'rdim'::regclass AND run_id > :r2;
SELECT histops.try($$SELECT scd2.rewind('rdim', NULL::bigint)$$);
SELECT histops.try($$SELECT scd2.rewind('rdim', 'infinity'::timestamptz)$$);
SELECT histops.try($$SELECT scd2.rewind('rdim', -1::bigint)$$);
