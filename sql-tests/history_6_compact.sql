-- The change log of a first load into an empty dimension (issue 27, "the
-- change log at the cost floor"): the run's header alone
-- (change_log_runs.first_load_rows), no scd2.change_log row.  Everything
-- that reads the change log must give what a run logged row by row gives:
-- a twin dimension, which a trigger keeps off the first-load path, takes
-- the same loads and is logged row by row.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

CREATE FUNCTION histops.cpass() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE cdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text, note text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE ctwin (LIKE cdim INCLUDING ALL);
CREATE TRIGGER cpass BEFORE INSERT ON ctwin FOR EACH ROW EXECUTE FUNCTION histops.cpass();
CREATE TABLE cstg (id int, v text, note text, eff timestamptz, del boolean DEFAULT false);
SELECT scd2.register('cdim', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff', delete_column => 'del',
                     order_free => false);
SELECT scd2.register('ctwin', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff', delete_column => 'del',
                     order_free => false);

-- Both dimensions take the same load; the run ids into histops.crun.
CREATE TABLE histops.crun (step int, dim_run bigint, twin_run bigint);
CREATE PROCEDURE histops.cload(step int, eff timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    a bigint; b bigint;
BEGIN
    CALL scd2.apply('histops.cstg', 'histops.cdim', eff, a);
    CALL scd2.apply('histops.cstg', 'histops.ctwin', eff, b);
    INSERT INTO histops.crun VALUES (step, a, b);
END $$;
-- The feed of a step's run of each dimension: equal, in the same order
-- (the surrogate keys are each dimension's own: their rows' keys).
CREATE FUNCTION histops.cfeeds(s int) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE a.ordinality IS NULL OR b.ordinality IS NULL
                                                      OR a.action <> b.action OR a.business_key <> b.business_key
                                                      OR a.valid_from <> b.valid_from
                                                      OR a.valid_to IS DISTINCT FROM b.valid_to
                                                      OR (a.surrogate_key IS NULL) <> (b.surrogate_key IS NULL)) || ' different'
      FROM scd2.changes((SELECT dim_run FROM histops.crun WHERE step = s)) WITH ORDINALITY a
      FULL JOIN scd2.changes((SELECT twin_run FROM histops.crun WHERE step = s)) WITH ORDINALITY b
        ON a.ordinality = b.ordinality
$$;
-- The surrogate keys of a step's feed (of cdim) are its rows' (or, once
-- reverted, the keys they had: kept in histops.csk).
CREATE TABLE histops.csk AS SELECT sk, id, valid_from FROM cdim;
CREATE FUNCTION histops.cfeed_sk(s int) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE k.sk IS NULL) || ' without their row''s key'
      FROM scd2.changes((SELECT dim_run FROM histops.crun WHERE step = s)) f
      LEFT JOIN histops.csk k ON k.sk = f.surrogate_key AND k.id = (f.business_key ->> 'id')::int
                             AND k.valid_from = f.valid_from
$$;
-- dimension_at(..., known_at) of cdim equals ctwin's (every column but sk).
CREATE FUNCTION histops.cknown(at timestamptz, known_at timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || (SELECT count(*) FROM (
             (SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.cdim, at, known_at)
              EXCEPT ALL
              SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.ctwin, at, known_at))
             UNION ALL
             (SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.ctwin, at, known_at)
              EXCEPT ALL
              SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.cdim, at, known_at))) d)
           || ' different'
      FROM scd2.dimension_at(NULL::histops.cdim, at, known_at)
$$;

-- 1. The first load: cdim's change log is its header, ctwin's a row per version.
SELECT now() AS before_first \gset
INSERT INTO cstg (id, v, note, eff) SELECT g, 'a', 'n' || g, '2024-01-01' FROM generate_series(1, 40) g;
CALL histops.cload(1, '2024-01-01');
SELECT r.step, c.first_load_rows, (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = r.dim_run) AS log_rows,
       t.first_load_rows AS twin_first_load_rows, (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = r.twin_run) AS twin_log_rows
  FROM histops.crun r JOIN scd2.change_log_runs c ON c.run_id = r.dim_run JOIN scd2.change_log_runs t ON t.run_id = r.twin_run;
INSERT INTO histops.csk SELECT sk, id, valid_from FROM cdim EXCEPT SELECT * FROM histops.csk;
SELECT histops.cfeeds(1) AS feeds_1, histops.cfeed_sk(1) AS sk_1;
SELECT * FROM scd2.changes((SELECT dim_run FROM histops.crun WHERE step = 1)) ORDER BY business_key LIMIT 2;
SELECT max(histops.known_since(a.run_id)) AS after_first FROM scd2.audit_log a JOIN histops.crun r ON a.run_id IN (r.dim_run, r.twin_run)
 WHERE r.step = 1 \gset

-- 2. Later loads: changes, a Type 1 overwrite, new keys, a delete marker,
--    a late change that splits history.  The first load's feed stays what it was.
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (1, 'b', 'n1', '2024-02-01'), (2, 'a', 'N', '2024-02-01'),
                                           (41, 'a', 'n', '2024-02-01'), (42, 'a', 'n', '2024-02-01');
INSERT INTO cstg (id, eff, del) VALUES (3, '2024-02-01', true);
CALL histops.cload(2, '2024-02-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (1, 'c', 'n1', '2024-03-01'), (5, 'x', 'n5', '2024-01-15'), (41, 'z', 'n', '2024-03-01');
CALL histops.cload(3, '2024-03-01');
INSERT INTO histops.csk SELECT sk, id, valid_from FROM cdim EXCEPT SELECT * FROM histops.csk;
SELECT histops.cfeeds(1) AS feeds_1, histops.cfeed_sk(1) AS sk_1, histops.cfeeds(2) AS feeds_2, histops.cfeeds(3) AS feeds_3;

-- 3. dimension_at as known at: before the first load, nothing; after it,
--    the later loads undone as for the twin.
SELECT histops.cknown('2024-06-01', :'before_first') AS before_first,
       histops.cknown('2024-06-01', :'after_first') AS after_first,
       histops.cknown('2024-01-20', :'after_first') AS after_first_jan,
       histops.cknown('2024-06-01', now()) AS now;
SELECT scd2._known_at_undo('cdim', :'before_first');

-- 4. Revert: not while later loads stand; refused, writing nothing, when
--    the dimension no longer holds what the first load wrote.
SELECT regexp_replace(histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.crun WHERE step = 1))),
                      ', [0-9]+', ', N') AS not_newest;
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.crun WHERE step = 3;
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.crun WHERE step = 2;
SELECT histops.checksum('cdim', ARRAY['sk']) = histops.checksum('ctwin', ARRAY['sk']) AS same_as_twin;
SELECT histops.state('cdim') AS s0 \gset
-- a row closed by hand
UPDATE cdim SET valid_to = '2024-05-01', is_current = false WHERE id = 7;
SELECT histops.state('cdim') AS s1 \gset
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.crun WHERE step = 1))) AS closed_by_hand;
SELECT histops.state('cdim') = :'s1' AS nothing_written;
UPDATE cdim SET valid_to = NULL, is_current = true WHERE id = 7;
-- a row added by hand, then a row deleted by hand
INSERT INTO cdim (id, v, note, valid_from) VALUES (99, 'h', 'h', '2024-01-01');
SELECT histops.state('cdim') AS s2 \gset
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.crun WHERE step = 1))) AS added_by_hand;
SELECT histops.try(format('SELECT count(*) FROM scd2.changes(%s)', (SELECT dim_run FROM histops.crun WHERE step = 1))) AS changes_added_by_hand;
SELECT histops.state('cdim') = :'s2' AS nothing_written;
DELETE FROM cdim WHERE id = 99;
CREATE TABLE histops.c_gone AS SELECT * FROM cdim WHERE id = 8;
DELETE FROM cdim WHERE id = 8;
SELECT histops.state('cdim') AS s3 \gset
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.crun WHERE step = 1))) AS deleted_by_hand;
SELECT histops.state('cdim') = :'s3' AS nothing_written;
INSERT INTO cdim OVERRIDING SYSTEM VALUE SELECT * FROM histops.c_gone;
SELECT histops.state('cdim') = :'s0' AS as_before;

-- 5. The revert deletes every row and writes them into the change log:
--    the feed reads back the same, with the rows' surrogate keys, and the
--    log equals the twin's.
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.crun WHERE step = 1;
SELECT (SELECT count(*) FROM cdim) AS rows_left, c.first_load_rows, c.reverted_by IS NOT NULL AS marked,
       (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = r.dim_run) AS log_rows,
       (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = r.dim_run AND l.surrogate_key IS NULL) AS log_rows_without_sk
  FROM histops.crun r JOIN scd2.change_log_runs c ON c.run_id = r.dim_run WHERE r.step = 1;
SELECT histops.cfeeds(1) AS feeds_1, histops.cfeed_sk(1) AS sk_1;
SELECT count(*) AS log_differences FROM (
  (SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT dim_run FROM histops.crun WHERE step = 1)
   EXCEPT ALL
   SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT twin_run FROM histops.crun WHERE step = 1))
  UNION ALL
  (SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT twin_run FROM histops.crun WHERE step = 1)
   EXCEPT ALL
   SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT dim_run FROM histops.crun WHERE step = 1))) d;

-- 6. Rewind across a first load: loaded again (a first load again: the
--    dimension is empty), two loads after it, everything undone.
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) SELECT g, 'r', 'n' || g, '2024-01-01' FROM generate_series(1, 30) g;
CALL histops.cload(11, '2024-01-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (1, 'b', 'n1', '2024-02-01'), (31, 'a', 'n', '2024-02-01');
CALL histops.cload(12, '2024-02-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (2, 'b', 'x', '2024-03-01');
CALL histops.cload(13, '2024-03-01');
SELECT (SELECT first_load_rows FROM scd2.change_log_runs WHERE run_id = dim_run) AS first_load_rows
  FROM histops.crun WHERE step = 11;
SELECT scd2.rewind('cdim', :'before_first'::timestamptz) AS undone, scd2.rewind('ctwin', :'before_first'::timestamptz) AS twin_undone;
SELECT (SELECT count(*) FROM cdim) AS rows_left, (SELECT count(*) FROM ctwin) AS twin_rows_left;
SELECT histops.cfeeds(11) AS feeds_11, histops.cfeeds(12) AS feeds_12, histops.cfeeds(13) AS feeds_13;

-- 7. The feed of a standing first load, refused when the dimension cannot
--    say which rows were the first load's: a later load without a change
--    log, a later first load (the dimension emptied by hand in between).
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) SELECT g, 'q', 'n', '2024-01-01' FROM generate_series(1, 10) g;
CALL histops.cload(21, '2024-01-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (1, 'b', 'n', '2024-02-01');
BEGIN;
SET LOCAL scd2.change_log = off;
CALL histops.cload(22, '2024-02-01');
SELECT histops.try(format('SELECT count(*) FROM scd2.changes(%s)', (SELECT dim_run FROM histops.crun WHERE step = 21))) AS later_unlogged;
ROLLBACK;
DELETE FROM histops.crun WHERE step = 22;
BEGIN;
DELETE FROM cdim;
DO $$ DECLARE r bigint; BEGIN CALL scd2.apply('histops.cstg', 'histops.cdim', '2024-02-01', r); END $$;
SELECT histops.try(format('SELECT count(*) FROM scd2.changes(%s)', (SELECT dim_run FROM histops.crun WHERE step = 21))) AS later_first_load;
ROLLBACK;
-- Order-free loads after it (the dimension registered again, order_free)
-- move versions' valid_from ('extend') and remove versions ('remove'):
-- the first load's feed is traced back through them, unchanged.
CREATE TABLE histops.c_feed21 AS
SELECT * FROM scd2.changes((SELECT dim_run FROM histops.crun WHERE step = 21)) WITH ORDINALITY;
BEGIN;
SELECT scd2.register('cdim', ARRAY['id'], effective_column => 'eff', delete_column => 'del',
                     order_free => true) IS NOT NULL AS order_free;
CREATE PROCEDURE histops.cload_free(eff timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    r bigint;
BEGIN
    CALL scd2.apply('histops.cstg', 'histops.cdim', eff, r);
END $$;
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff, del) VALUES (1, 'q', 'n', '2023-12-01', false), (2, NULL, NULL, '2024-01-01', true),
                                                (50, 'n', 'n', '2024-03-01', false);
CALL histops.cload_free('2024-03-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff) VALUES (1, 'q', 'n', '2023-11-01'), (50, 'n', 'n', '2024-02-01'), (3, 'x', 'n', '2024-02-01');
CALL histops.cload_free('2024-03-01');
TRUNCATE cstg;
INSERT INTO cstg (id, v, note, eff, del) VALUES (50, NULL, NULL, '2024-02-01', true), (1, 'q', 'n', '2023-10-01', false);
CALL histops.cload_free('2024-03-01');
SELECT action, count(*) FROM scd2.change_log
 WHERE run_id IN (SELECT run_id FROM scd2.change_log_runs WHERE dimension = 'cdim'::regclass
                   AND run_id > (SELECT dim_run FROM histops.crun WHERE step = 21))
 GROUP BY action ORDER BY action;
SELECT id, v, valid_from, valid_to FROM cdim WHERE id IN (1, 2, 3, 50) ORDER BY id, valid_from;
SELECT count(*) AS rows, count(*) FILTER (WHERE a.ordinality IS NULL OR b.ordinality IS NULL
                                          OR row(a.*) IS DISTINCT FROM row(b.*)) AS different
  FROM scd2.changes((SELECT dim_run FROM histops.crun WHERE step = 21)) WITH ORDINALITY a
  FULL JOIN histops.c_feed21 b ON a.ordinality = b.ordinality;
ROLLBACK;
SELECT histops.cfeeds(21) AS feeds_21;

-- 8. With scd2.change_log = off a first load logs nothing (no first_load_rows).
BEGIN;
DELETE FROM cdim;
SET LOCAL scd2.change_log = off;
DO $$ DECLARE r bigint; BEGIN CALL scd2.apply('histops.cstg', 'histops.cdim', '2024-02-01', r); END $$;
SELECT logged, first_load_rows FROM scd2.change_log_runs WHERE dimension = 'cdim'::regclass ORDER BY run_id DESC LIMIT 1;
ROLLBACK;

-- 9. The security of what reads the dimension: a first load's feed is
--    read as the dimension's owner; a caller without SELECT is refused.
CREATE ROLE histops_c_reader;
SELECT histops.try(format('SET LOCAL ROLE histops_c_reader; SELECT count(*) FROM scd2.changes(%s)',
                          (SELECT dim_run FROM histops.crun WHERE step = 21))) AS no_select;
RESET ROLE;
DROP ROLE histops_c_reader;
