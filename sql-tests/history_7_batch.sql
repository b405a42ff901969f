-- A batch logged by surrogate keys (issue 27, "the change log at the cost
-- floor"): a load whose every write closes a current version or inserts a
-- current one logs one scd2.change_log_batches row (the surrogate keys of
-- the rows it wrote, what it did to each, the valid_to it left), no
-- scd2.change_log row.  Everything that reads the change log must give
-- what a run logged row by row gives: a twin dimension, which a BEFORE
-- INSERT trigger keeps off that path (and off the first-load path), takes
-- the same loads and is logged row by row.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

CREATE FUNCTION histops.bpass() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TABLE bdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text, note text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE btwin (LIKE bdim INCLUDING ALL);
CREATE TRIGGER bpass BEFORE INSERT ON btwin FOR EACH ROW EXECUTE FUNCTION histops.bpass();
CREATE TABLE bstg (id int, v text, note text, eff timestamptz, del boolean DEFAULT false);
SELECT scd2.register('bdim', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff', delete_column => 'del');
SELECT scd2.register('btwin', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff', delete_column => 'del');

-- Both dimensions take the same load; the run ids into histops.brun.
CREATE TABLE histops.brun (step int, dim_run bigint, twin_run bigint);
CREATE PROCEDURE histops.bload(step int, eff timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    a bigint; b bigint;
BEGIN
    CALL scd2.apply('histops.bstg', 'histops.bdim', eff, a);
    CALL scd2.apply('histops.bstg', 'histops.btwin', eff, b);
    INSERT INTO histops.brun VALUES (step, a, b);
END $$;
-- How each step's run of bdim was logged.
CREATE FUNCTION histops.blogged(s int) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN c.first_load_rows IS NOT NULL THEN 'first load'
                WHEN b.run_id IS NOT NULL THEN 'batch of ' || pg_catalog.cardinality(b.surrogate_keys)
                ELSE 'rows' END
           || ', ' || (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = r.dim_run) || ' log rows'
      FROM histops.brun r JOIN scd2.change_log_runs c ON c.run_id = r.dim_run
      LEFT JOIN scd2.change_log_batches b ON b.run_id = r.dim_run WHERE r.step = s
$$;
-- The feed of a step's run of each dimension: equal, in the same order,
-- every surrogate key the row's (or, once reverted, the one it had:
-- histops.bsk keeps every row's).
CREATE TABLE histops.bsk (sk bigint, id int, valid_from timestamptz);
CREATE FUNCTION histops.bfeeds(s int) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE a.ordinality IS NULL OR b.ordinality IS NULL
                                                      OR a.action <> b.action OR a.business_key <> b.business_key
                                                      OR a.valid_from <> b.valid_from
                                                      OR a.valid_to IS DISTINCT FROM b.valid_to
                                                      OR (a.surrogate_key IS NULL) <> (b.surrogate_key IS NULL)) || ' different, '
           || count(*) FILTER (WHERE a.ordinality IS NOT NULL AND NOT EXISTS (
                  SELECT FROM histops.bsk k WHERE k.sk = a.surrogate_key AND k.id = (a.business_key ->> 'id')::int
                                              AND k.valid_from = a.valid_from)) || ' without their row''s key'
      FROM scd2.changes((SELECT dim_run FROM histops.brun WHERE step = s)) WITH ORDINALITY a
      FULL JOIN scd2.changes((SELECT twin_run FROM histops.brun WHERE step = s)) WITH ORDINALITY b
        ON a.ordinality = b.ordinality
$$;
-- dimension_at(..., known_at) of bdim equals btwin's (every column but sk).
CREATE FUNCTION histops.bknown(at timestamptz, known_at timestamptz) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (
             (SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.bdim, at, known_at)
              EXCEPT ALL
              SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.btwin, at, known_at))
             UNION ALL
             (SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.btwin, at, known_at)
              EXCEPT ALL
              SELECT id, v, note, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.bdim, at, known_at))) d
$$;
-- After each step: its end (for known_at), the rows' surrogate keys.
CREATE TABLE histops.bend (step int, at timestamptz);
CREATE PROCEDURE histops.bstep(s int, eff timestamptz)
LANGUAGE plpgsql AS $$
BEGIN
    CALL histops.bload(s, eff);
    COMMIT;
    INSERT INTO histops.bsk SELECT sk, id, valid_from FROM histops.bdim EXCEPT SELECT * FROM histops.bsk;
    INSERT INTO histops.bend SELECT s, max(histops.known_since(a.run_id)) FROM scd2.audit_log a JOIN histops.brun r
                                ON a.run_id IN (r.dim_run, r.twin_run) WHERE r.step = s;
END $$;

-- 1. A first load, then the chain: in-order changes, new keys, a delete
--    marker, a key that returns (batches); a Type 1 overwrite and a late
--    change that splits history (row by row); a batch again.
INSERT INTO bstg (id, v, note, eff) SELECT g, 'a', 'n' || g, '2024-01-01' FROM generate_series(1, 40) g;
CALL histops.bstep(1, '2024-01-01');
TRUNCATE bstg;
INSERT INTO bstg (id, v, note, eff) VALUES (1, 'b', 'n1', '2024-02-01'), (2, NULL, 'n2', '2024-02-01'),
                                           (41, 'a', 'n', '2024-02-01'), (42, '', NULL, '2024-02-01'),
                                           (7, 'a', 'n7', '2024-02-01');
INSERT INTO bstg (id, eff, del) VALUES (3, '2024-02-01', true), (99, '2024-02-01', true);
CALL histops.bstep(2, '2024-02-01');
TRUNCATE bstg;
INSERT INTO bstg (id, v, note, eff) VALUES (1, 'c', 'n1', '2024-03-01'), (3, 'back', 'n3', '2024-03-01'),
                                           (43, 'a', 'n', '2024-03-01');
CALL histops.bstep(3, '2024-03-01');
TRUNCATE bstg;
INSERT INTO bstg (id, v, note, eff) VALUES (5, 'a', 'N5', '2024-04-01'), (6, 'z', 'n6', '2024-04-01');
CALL histops.bstep(4, '2024-04-01');
TRUNCATE bstg;
INSERT INTO bstg (id, v, note, eff) VALUES (8, 'late', 'n8', '2023-12-15'), (9, 'y', 'n9', '2024-05-01');
CALL histops.bstep(5, '2024-05-01');
TRUNCATE bstg;
INSERT INTO bstg (id, v, note, eff) VALUES (1, 'd', 'n1', '2024-06-01'), (10, 'y', 'n10', '2024-06-01');
INSERT INTO bstg (id, eff, del) VALUES (41, '2024-06-01', true), (4, '2024-06-01', true);
CALL histops.bstep(6, '2024-06-01');
SELECT s AS step, histops.blogged(s) AS logged, histops.bfeeds(s) AS feeds FROM generate_series(1, 6) s;
SELECT histops.checksum('bdim', ARRAY['sk']) = histops.checksum('btwin', ARRAY['sk']) AS same_as_twin;
SELECT * FROM scd2.changes((SELECT dim_run FROM histops.brun WHERE step = 2)) ORDER BY business_key, valid_from;

-- 2. dimension_at as known at: after every step, at every boundary and
--    between them, equal to the twin's.
SELECT count(*) AS comparisons, sum(histops.bknown(x.at, e.at)) AS different
  FROM histops.bend e,
       (SELECT DISTINCT valid_from AS at FROM btwin UNION SELECT valid_to FROM btwin WHERE valid_to IS NOT NULL
        UNION SELECT valid_from + interval '1 day' FROM btwin UNION SELECT valid_from - interval '1 second' FROM btwin) x;
SELECT count(*) AS undo_rows FROM scd2._known_at_undo('bdim', (SELECT at FROM histops.bend WHERE step = 1));

-- 3. Rows changed by hand since a batch: its feed, a revert and
--    dimension_at refuse, naming the run, and write nothing.
SELECT histops.state('bdim') AS s0 \gset
CREATE TABLE histops.b_gone AS SELECT * FROM bdim WHERE id = 10;
DELETE FROM bdim WHERE id = 10;
SELECT histops.state('bdim') AS s1 \gset
SELECT histops.try(format('SELECT count(*) FROM scd2.changes(%s)', (SELECT dim_run FROM histops.brun WHERE step = 6))) AS feed_deleted_by_hand;
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.brun WHERE step = 6))) AS revert_deleted_by_hand;
SELECT histops.try(format('SELECT count(*) FROM scd2.dimension_at(NULL::histops.bdim, now(), %L)',
                          (SELECT at FROM histops.bend WHERE step = 5))) AS known_at_deleted_by_hand;
SELECT histops.state('bdim') = :'s1' AS nothing_written;
INSERT INTO bdim OVERRIDING SYSTEM VALUE SELECT * FROM histops.b_gone;
UPDATE bdim SET valid_to = '2024-07-01', is_current = false WHERE id = 1 AND valid_to IS NULL;
SELECT histops.state('bdim') AS s2 \gset
SELECT histops.try(format('SELECT scd2.revert(%s)', (SELECT dim_run FROM histops.brun WHERE step = 6))) AS revert_closed_by_hand;
SELECT histops.state('bdim') = :'s2' AS nothing_written;
UPDATE bdim SET valid_to = NULL, is_current = true WHERE id = 1 AND valid_to = '2024-07-01';
SELECT histops.state('bdim') = :'s0' AS as_before;

-- 4. Revert the newest batch: its rows go into scd2.change_log (with their
--    surrogate keys), its batch row goes; the dimension, the feed and the
--    log equal the twin's.
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.brun WHERE step = 6;
SELECT histops.blogged(6) AS logged_6, histops.bfeeds(6) AS feeds_6,
       histops.checksum('bdim', ARRAY['sk']) = histops.checksum('btwin', ARRAY['sk']) AS same_as_twin;
SELECT count(*) AS log_differences FROM (
  (SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT dim_run FROM histops.brun WHERE step = 6)
   EXCEPT ALL
   SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT twin_run FROM histops.brun WHERE step = 6))
  UNION ALL
  (SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT twin_run FROM histops.brun WHERE step = 6)
   EXCEPT ALL
   SELECT action, inserted, business_key, valid_from, valid_to, old_valid_to, old_is_current, old_type1
     FROM scd2.change_log WHERE run_id = (SELECT dim_run FROM histops.brun WHERE step = 6))) d;

-- 5. Rewind over batches, rows and the first load, step by step: after
--    each, the dimension equals the twin's, and both what they were.
CREATE TABLE histops.bsum AS SELECT 0 AS step, ''::text AS sum WHERE false;
SELECT scd2.rewind('bdim', (SELECT dim_run FROM histops.brun WHERE step = 3)) AS undone,
       scd2.rewind('btwin', (SELECT twin_run FROM histops.brun WHERE step = 3)) AS twin_undone;
SELECT histops.checksum('bdim', ARRAY['sk']) = histops.checksum('btwin', ARRAY['sk']) AS same_as_twin,
       histops.blogged(3) AS logged_3, histops.bfeeds(4) AS feeds_4, histops.bfeeds(5) AS feeds_5;
SELECT scd2.rewind('bdim', (SELECT dim_run FROM histops.brun WHERE step = 1)) AS undone,
       scd2.rewind('btwin', (SELECT twin_run FROM histops.brun WHERE step = 1)) AS twin_undone;
SELECT histops.checksum('bdim', ARRAY['sk']) = histops.checksum('btwin', ARRAY['sk']) AS same_as_twin,
       histops.bfeeds(2) AS feeds_2, histops.bfeeds(3) AS feeds_3, histops.bfeeds(1) AS feeds_1;
SELECT scd2.rewind('bdim', (SELECT at FROM histops.bend WHERE step = 1) - interval '1 hour') AS undone,
       scd2.rewind('btwin', (SELECT at FROM histops.bend WHERE step = 1) - interval '1 hour') AS twin_undone;
SELECT (SELECT count(*) FROM bdim) AS rows_left, (SELECT count(*) FROM btwin) AS twin_rows_left;

-- 6. Which loads log by surrogate keys: a serial key does; no surrogate
--    key, a key without a sequence, a dry run, scd2.change_log = off and
--    an order-free registration do not.
CREATE TABLE bserial (sk serial, id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                      is_current boolean NOT NULL DEFAULT true);
CREATE TABLE bnosk (LIKE bserial);
ALTER TABLE bnosk ALTER COLUMN sk DROP DEFAULT, ALTER COLUMN sk DROP NOT NULL;
CREATE TABLE bnoseq (LIKE bserial);
ALTER TABLE bnoseq ALTER COLUMN sk SET DEFAULT 7;
CREATE TABLE bstg2 (id int, v text, eff timestamptz);
SELECT scd2.register('bserial', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk');
SELECT scd2.register('bnosk', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk');
SELECT scd2.register('bnoseq', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk');
CREATE TABLE bunkeyed (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                       is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('bunkeyed', ARRAY['id'], effective_column => 'eff');
CREATE FUNCTION histops.blast(d regclass) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN b.run_id IS NOT NULL THEN 'batch of ' || pg_catalog.cardinality(b.surrogate_keys)
                WHEN c.first_load_rows IS NOT NULL THEN 'first load' WHEN NOT c.logged THEN 'not logged' ELSE 'rows' END
           || ', ' || (SELECT count(*) FROM scd2.change_log l WHERE l.run_id = c.run_id) || ' log rows'
      FROM scd2.change_log_runs c LEFT JOIN scd2.change_log_batches b ON b.run_id = c.run_id
     WHERE c.dimension = d ORDER BY c.run_id DESC LIMIT 1
$$;
INSERT INTO bstg2 VALUES (1, 'a', '2024-01-01'), (2, 'a', '2024-01-01');
DO $$ DECLARE r bigint; BEGIN
    CALL scd2.apply('histops.bstg2', 'histops.bserial', '2024-01-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bnosk', '2024-01-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bnoseq', '2024-01-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bunkeyed', '2024-01-01', r);
END $$;
TRUNCATE bstg2;
INSERT INTO bstg2 VALUES (1, 'b', '2024-02-01'), (3, 'a', '2024-02-01');
UPDATE bnosk SET sk = id;
DO $$ DECLARE r bigint; BEGIN
    CALL scd2.apply('histops.bstg2', 'histops.bserial', '2024-02-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bnosk', '2024-02-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bnoseq', '2024-02-01', r);
    CALL scd2.apply('histops.bstg2', 'histops.bunkeyed', '2024-02-01', r);
END $$;
SELECT histops.blast('bserial') AS serial, histops.blast('bnosk') AS no_default, histops.blast('bnoseq') AS no_sequence,
       histops.blast('bunkeyed') AS no_surrogate_key;
SELECT sk, id, v, valid_from, valid_to, is_current FROM bserial ORDER BY sk;
SELECT action, surrogate_key, business_key, valid_from, valid_to
  FROM scd2.changes((SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'bserial'::regclass));
TRUNCATE bstg2;
INSERT INTO bstg2 VALUES (2, 'c', '2024-03-01');
SELECT histops.checksum('bserial') || histops.checksum('scd2.change_log_batches') || histops.checksum('scd2.change_log')
       || (SELECT last_value FROM bserial_sk_seq) AS s3 \gset
SELECT action, count(*) AS dry_run FROM scd2.merge('histops.bstg2', 'histops.bserial', '2024-03-01', dry_run => true) GROUP BY 1 ORDER BY 1;
SELECT histops.checksum('bserial') || histops.checksum('scd2.change_log_batches') || histops.checksum('scd2.change_log')
       || (SELECT last_value FROM bserial_sk_seq) = :'s3' AS dry_run_wrote_and_drew_nothing;
BEGIN;
SET LOCAL scd2.change_log = off;
DO $$ DECLARE r bigint; BEGIN CALL scd2.apply('histops.bstg2', 'histops.bserial', '2024-03-01', r); END $$;
SELECT histops.blast('bserial') AS change_log_off;
ROLLBACK;
BEGIN;
SELECT scd2.register('bserial', ARRAY['id'], effective_column => 'eff', order_free => true) IS NOT NULL AS order_free;
DO $$ DECLARE r bigint; BEGIN CALL scd2.apply('histops.bstg2', 'histops.bserial', '2024-03-01', r); END $$;
SELECT histops.blast('bserial') AS order_free_load;
ROLLBACK;

-- 7. Pruned: the batch row goes with the run's change log.
SELECT scd2.prune_change_log(interval '0', 'bserial') AS pruned;
SELECT count(*) AS batch_rows_left FROM scd2.change_log_batches b JOIN scd2.change_log_runs c ON c.run_id = b.run_id
 WHERE c.dimension = 'bserial'::regclass;
SELECT regexp_replace(histops.try(format('SELECT count(*) FROM scd2.changes(%s)',
                      (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'bserial'::regclass))), ' at .*;', ' at T;') AS pruned_feed;

-- 8. A batch of more than one chunk (issue 51): its arrays are written
--    65,536 rows to a row of scd2.change_log_batches (load/batch_log.c).
--    Order-free twins (the twin logged row by row): the feed of a
--    74,900-row batch, dimension_at as known at before and after it, the
--    feed again after a later order-free load moved and removed versions
--    of both chunks (pinned in each), and the reverts equal the twin's;
--    the batch's rows rewritten as one row (as 0.4 wrote them) read and
--    revert the same.
CREATE TABLE chdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE chtwin (LIKE chdim INCLUDING ALL);
CREATE TRIGGER bpass BEFORE INSERT ON chtwin FOR EACH ROW EXECUTE FUNCTION histops.bpass();
CREATE TABLE chstg (id int, v text, eff timestamptz, del boolean DEFAULT false);
SELECT scd2.register('chdim', ARRAY['id'], effective_column => 'eff', delete_column => 'del',
                     surrogate_key_column => 'sk', order_free => true) IS NOT NULL AS registered,
       scd2.register('chtwin', ARRAY['id'], effective_column => 'eff', delete_column => 'del',
                     surrogate_key_column => 'sk', order_free => true) IS NOT NULL AS twin_registered;
CREATE TABLE histops.chrun (step int, dim_run bigint, twin_run bigint);
CREATE PROCEDURE histops.chload(step int)
LANGUAGE plpgsql AS $$
DECLARE
    a bigint; b bigint;
BEGIN
    CALL scd2.apply('histops.chstg', 'histops.chdim', now(), a);
    CALL scd2.apply('histops.chstg', 'histops.chtwin', now(), b);
    INSERT INTO histops.chrun VALUES (step, a, b);
END $$;
-- The feeds of two runs: equal, in the same order (the surrogate keys
-- aside: each dimension draws its own).
CREATE FUNCTION histops.chfeeds(x bigint, y bigint) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE a.ordinality IS NULL OR b.ordinality IS NULL
                                                      OR a.action <> b.action OR a.business_key <> b.business_key
                                                      OR a.valid_from <> b.valid_from
                                                      OR a.valid_to IS DISTINCT FROM b.valid_to
                                                      OR (a.surrogate_key IS NULL) <> (b.surrogate_key IS NULL)) || ' different'
      FROM scd2.changes(x) WITH ORDINALITY a FULL JOIN scd2.changes(y) WITH ORDINALITY b ON a.ordinality = b.ordinality
$$;
-- dimension_at(..., known_at) of chdim against chtwin's: the rows that differ.
CREATE FUNCTION histops.chknown(at timestamptz, known_at timestamptz) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (
             (SELECT id, v, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.chdim, at, known_at)
              EXCEPT ALL
              SELECT id, v, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.chtwin, at, known_at))
             UNION ALL
             (SELECT id, v, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.chtwin, at, known_at)
              EXCEPT ALL
              SELECT id, v, valid_from, valid_to, is_current FROM scd2.dimension_at(NULL::histops.chdim, at, known_at))) d
$$;
-- A run's rows in scd2.change_log (columns in drop left out): count and checksum.
CREATE FUNCTION histops.chlog(r bigint, drop text[] DEFAULT '{}') RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ':' || md5(coalesce(string_agg((to_jsonb(l) - 'run_id' - drop)::text, ',' ORDER BY (to_jsonb(l) - 'run_id' - drop)::text), ''))
      FROM scd2.change_log l WHERE l.run_id = r
$$;
-- 10,000 keys (chdim's first load takes the first-load path), then the
-- batch: each of them changed (or every 100th deleted), 55,000 new keys.
INSERT INTO chstg (id, v, eff) SELECT g, 'a', '2025-01-01' FROM generate_series(1, 10000) g;
CALL histops.chload(1);
SELECT greatest(histops.known_since(dim_run), histops.known_since(twin_run)) AS first_known
  FROM histops.chrun WHERE step = 1 \gset
TRUNCATE chstg;
INSERT INTO chstg (id, v, eff, del)
SELECT g, CASE WHEN g % 100 <> 0 THEN 'b' END, '2025-01-05', g % 100 = 0 FROM generate_series(1, 10000) g;
INSERT INTO chstg (id, v, eff) SELECT g, 'n', '2025-01-05' FROM generate_series(10001, 65000) g;
CALL histops.chload(2);
SELECT dim_run AS big, twin_run AS big_twin FROM histops.chrun WHERE step = 2 \gset
SELECT count(*) AS chunks, array_agg(cardinality(surrogate_keys) ORDER BY chunk) AS chunk_rows,
       array_agg(chunk ORDER BY chunk) AS chunk_numbers,
       (SELECT count(*) FROM scd2.change_log WHERE run_id = :big) AS log_rows,
       (SELECT count(*) FROM scd2.change_log WHERE run_id = :big_twin) AS twin_log_rows
  FROM scd2.change_log_batches WHERE run_id = :big;
SELECT histops.chfeeds(:big, :big_twin) AS feeds;
CREATE TABLE histops.chfeed AS SELECT * FROM scd2.changes(:big) WITH ORDINALITY;
-- The rows of a run's feed that differ from it (or are missing on a side).
CREATE FUNCTION histops.chfeed_differences(r bigint) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (SELECT * FROM scd2.changes(r) WITH ORDINALITY) c
      FULL JOIN histops.chfeed f ON f.ordinality = c.ordinality
     WHERE ROW(c.*) IS DISTINCT FROM ROW(f.*)
$$;
-- every surrogate key of the feed its row's
SELECT count(*) AS feed_rows_without_their_key FROM histops.chfeed f
 WHERE NOT EXISTS (SELECT FROM chdim d WHERE d.sk = f.surrogate_key AND d.id = (f.business_key ->> 'id')::int
                                          AND d.valid_from = f.valid_from);
SELECT greatest(histops.known_since(:big), histops.known_since(:big_twin)) AS big_known \gset
-- (as known before the batch: undone from its chunks; a later order-free
-- load that moves versions makes dimension_at refuse such a known_at)
SELECT histops.chknown('2025-01-05', :'first_known') AS different_known_before,
       histops.chknown('2025-01-05', :'big_known') AS different_known_after;
-- A late load: identical events a day earlier (the version then starts
-- earlier: 'extend') and deletes at a version's very start ('remove'),
-- for versions the batch inserted at every 2,000th place of each chunk.
TRUNCATE chstg;
INSERT INTO chstg (id, v, eff)
SELECT d.id, d.v, d.valid_from - interval '1 day' FROM chdim d
  JOIN scd2.change_log_batches b ON b.run_id = :big
  JOIN unnest(b.surrogate_keys) WITH ORDINALITY u(sk, i) ON u.sk = d.sk
 WHERE d.is_current AND u.i % 2000 = 1;
INSERT INTO chstg (id, eff, del)
SELECT d.id, d.valid_from, true FROM chdim d
  JOIN scd2.change_log_batches b ON b.run_id = :big
  JOIN unnest(b.surrogate_keys) WITH ORDINALITY u(sk, i) ON u.sk = d.sk
 WHERE d.is_current AND u.i % 2000 = 1001;
SELECT count(DISTINCT b.chunk) AS chunks_with_events FROM chstg s JOIN chdim d ON d.id = s.id AND d.is_current
  JOIN scd2.change_log_batches b ON b.run_id = :big AND d.sk = ANY (b.surrogate_keys);
CALL histops.chload(3);
SELECT a.extended > 0 AND a.removed > 0 AS moved, a.extended = t.extended AND a.removed = t.removed AS as_twin
  FROM scd2.audit_log a, scd2.audit_log t, histops.chrun r
 WHERE r.step = 3 AND a.run_id = r.dim_run AND t.run_id = r.twin_run;
SELECT count(*) AS chunks, count(business_keys) AS chunks_pinned
  FROM scd2.change_log_batches WHERE run_id = :big;
SELECT histops.chfeed_differences(:big) AS feed_differences_after_the_late_load;
SELECT histops.checksum('chdim', ARRAY['sk']) = histops.checksum('chtwin', ARRAY['sk']) AS same_as_twin;
-- The batch as one row (chunk 0, as 0.4 wrote it): the feed and the
-- reverts the same; rolled back.
BEGIN;
CREATE TEMP TABLE one_row AS
SELECT array_agg(u.sk ORDER BY b.chunk, u.i) AS sk, array_agg(u.a ORDER BY b.chunk, u.i) AS a,
       array_agg(u.vt ORDER BY b.chunk, u.i) AS vt, array_agg(u.bk ORDER BY b.chunk, u.i) AS bk,
       array_agg(u.vf ORDER BY b.chunk, u.i) AS vf
  FROM scd2.change_log_batches b,
       ROWS FROM (unnest(b.surrogate_keys), unnest(b.actions), unnest(b.valid_to), unnest(b.business_keys),
                  unnest(b.valid_from)) WITH ORDINALITY AS u(sk, a, vt, bk, vf, i)
 WHERE b.run_id = :big;
DELETE FROM scd2.change_log_batches WHERE run_id = :big;
INSERT INTO scd2.change_log_batches (run_id, chunk, surrogate_keys, actions, valid_to, business_keys, valid_from)
SELECT :big, 0, sk, a, vt, bk, vf FROM one_row;
SELECT count(*) AS chunks, sum(cardinality(surrogate_keys)) AS rows_logged FROM scd2.change_log_batches WHERE run_id = :big;
SELECT histops.chfeed_differences(:big) AS feed_differences;
SELECT scd2.revert(dim_run) > 0 AS reverted FROM histops.chrun WHERE step = 3;
SELECT scd2.revert(dim_run) > 0 AS reverted FROM histops.chrun WHERE step = 2;
SELECT histops.checksum('chdim') AS one_row_dim, histops.chlog(:big) AS one_row_log \gset
ROLLBACK;
-- The reverts, newest first: each the same as the twin's, and as from one row.
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.chrun WHERE step = 3;
SELECT scd2.revert(dim_run) > 0 AS reverted, scd2.revert(twin_run) > 0 AS twin_reverted
  FROM histops.chrun WHERE step = 2;
SELECT histops.checksum('chdim', ARRAY['sk']) = histops.checksum('chtwin', ARRAY['sk']) AS same_as_twin,
       histops.checksum('chdim') = :'one_row_dim' AS same_as_from_one_row,
       histops.chlog(:big) = :'one_row_log' AS log_as_from_one_row,
       histops.chlog(:big, ARRAY['surrogate_key']) = histops.chlog(:big_twin, ARRAY['surrogate_key']) AS log_as_twin,
       (SELECT count(*) FROM scd2.change_log_batches WHERE run_id = :big) AS chunks_left;
