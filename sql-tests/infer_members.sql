-- Inferred members (issue 49): scd2.infer_members inserts a flagged
-- placeholder version for every key of a fact batch that the dimension has
-- no version of; the load that brings the key's record completes it in
-- place (same surrogate key, flag cleared, valid_from moved back to an
-- earlier record); revert and rewind restore it exactly.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA inf;
SET search_path = inf, public;

CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text DEFAULT 'unknown', tier text, valid_from timestamptz NOT NULL,
                  valid_to timestamptz, is_current boolean NOT NULL DEFAULT true,
                  is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE stg (id int, city text, tier text, eff timestamptz);
SELECT scd2.register('dim', ARRAY['id'], type1 => ARRAY['tier'], effective_column => 'eff',
                     inferred_column => 'is_inferred', order_free => false);
INSERT INTO stg VALUES (1, 'Oslo', 'gold', '2024-01-01'), (2, 'Rome', 'gold', '2024-03-01');
CALL scd2.apply('stg', 'dim');

-- A batch of facts: key 1 known; key 2 known, but from after this fact (a
-- late fact for an existing member: not inferred); keys 3 and 4 unknown.
CREATE TABLE facts (order_id int, id int, sold_at timestamptz);
INSERT INTO facts VALUES (1, 1, '2024-02-01'), (2, 2, '2024-02-01'), (3, 3, '2024-02-10'),
                         (4, 3, '2024-02-05'), (5, 4, '2024-04-01'), (6, 4, '2024-04-02');

-- Refusals write nothing.
CREATE TABLE inf.before AS SELECT scd2_test.state('inf.dim') AS s;
CREATE TABLE plain (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                    valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('plain', ARRAY['id']);
SELECT scd2.infer_members('facts', 'plain', 'sold_at');          -- no inferred_column
CREATE TABLE nosk (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                   flag boolean NOT NULL DEFAULT false);
SELECT scd2.register('nosk', ARRAY['id'], inferred_column => 'flag');
SELECT scd2.infer_members('facts', 'nosk', 'sold_at');           -- no surrogate key
SELECT scd2.infer_members('facts', 'dim', 'nope');               -- no such time column
SELECT scd2.infer_members('facts', 'dim', 'order_id');           -- not a time
CREATE TABLE nokey (order_id int, sold_at timestamptz);
SELECT scd2.infer_members('nokey', 'dim', 'sold_at');            -- no business key column
CREATE TABLE nullkey (id int, sold_at timestamptz);
INSERT INTO nullkey VALUES (7, '2024-01-01'), (NULL, '2024-01-02');
SELECT scd2.infer_members('nullkey', 'dim', 'sold_at');          -- a NULL key
CREATE TABLE nulltime (id int, sold_at timestamptz);
INSERT INTO nulltime VALUES (7, '2024-01-01'), (8, NULL);
SELECT scd2.infer_members('nulltime', 'dim', 'sold_at');         -- a NULL time
CREATE TABLE bigkey (id bigint, sold_at timestamptz);
INSERT INTO bigkey VALUES (7, '2024-01-01'), (8000000000, '2024-01-02');
SELECT scd2.infer_members('bigkey', 'dim', 'sold_at');           -- a key that does not fit
CREATE TABLE infinite (id int, sold_at timestamptz);
INSERT INTO infinite VALUES (7, 'infinity');
SELECT scd2.infer_members('infinite', 'dim', 'sold_at');         -- not a finite time
SELECT scd2.infer_members('dim', 'dim', 'valid_from');           -- the dimension itself
SELECT scd2.infer_members(NULL, 'dim', 'sold_at');
SELECT scd2.infer_members('facts', 'dim', NULL);
SELECT scd2_test.state('inf.dim') = s AS nothing_written FROM inf.before;

-- Two members inferred: keys 3 (from its earliest fact) and 4 (also with
-- scd2.asof_on_missing = error: infer_members calls no scd2.asof).
SET scd2.asof_on_missing = error;
SELECT scd2.infer_members('facts', 'dim', 'sold_at') AS inferred;
RESET scd2.asof_on_missing;
SELECT id, city, tier, valid_from, valid_to, is_current, is_inferred FROM dim ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim');
SELECT status, staging, effective_at, source_rows, inserted, inferred, completed, message
  FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass ORDER BY run_id DESC LIMIT 1;
SELECT action, inserted, surrogate_key = d.sk AS sk_logged, business_key, l.valid_from, l.valid_to
  FROM scd2.change_log l JOIN dim d ON d.id = (l.business_key->>'id')::int
 WHERE l.run_id = (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'dim'::regclass)
 ORDER BY business_key::text;
-- The facts keyed: key 2's fact is before its first version (NULL).
SELECT order_id, f.id, d.id AS member, d.is_inferred
  FROM facts f LEFT JOIN dim d ON d.sk = scd2.asof('dim', f.sold_at, f.id) ORDER BY order_id;

-- A key inferred twice: the second call infers nothing (a logged run all the same).
SELECT scd2.infer_members('facts', 'dim', 'sold_at') AS inferred_again;
SELECT count(*) AS versions FROM dim;
SELECT effective_at, inferred FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass ORDER BY run_id DESC LIMIT 1;

-- Revert of an infer_members run deletes the members it inserted.
SELECT run_id AS infer_run FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass AND inferred > 0
 ORDER BY run_id DESC LIMIT 1 \gset
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted_noop FROM scd2.audit_log
 WHERE dimension_oid = 'dim'::regclass AND status = 'success';
SELECT scd2.revert(:infer_run) IS NOT NULL AS reverted;
SELECT count(*) AS versions, count(*) FILTER (WHERE is_inferred) AS inferred FROM dim;
SELECT scd2.infer_members('facts', 'dim', 'sold_at') AS inferred;
CREATE TABLE inf.inferred AS SELECT * FROM dim WHERE is_inferred;

-- The records arrive: key 3 effective before its inferred version (its
-- valid_from moves back), key 4 after it (valid_from stays) and then a
-- change; key 5 is new.  Same surrogate keys, flags cleared.
CREATE TABLE inf.state_inferred AS SELECT scd2_test.checksum('inf.dim') AS s;
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Paris', 'silver', '2024-01-15'), (4, 'Lyon', 'bronze', '2024-05-01'),
                       (4, 'Nice', 'bronze', '2024-06-01'), (5, 'Bonn', 'gold', '2024-05-01');
CALL scd2.apply('stg', 'dim');
SELECT d.id, d.city, d.tier, d.valid_from, d.valid_to, d.is_inferred, d.sk = i.sk AS inferred_sk
  FROM dim d LEFT JOIN inf.inferred i ON i.id = d.id
 WHERE d.id >= 3 ORDER BY d.id, d.valid_from;
SELECT scd2_test.invariants('dim');
SELECT source_rows, inserted, new_versions, closed, unchanged, completed
  FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass ORDER BY run_id DESC LIMIT 1;
SELECT action, business_key, valid_from, old_row IS NOT NULL AS whole_row_kept
  FROM scd2.changes((SELECT max(run_id) FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass)) c
  LEFT JOIN LATERAL (SELECT old_row FROM scd2.change_log l WHERE l.run_id = (SELECT max(run_id) FROM scd2.change_log_runs)
                      AND l.action = c.action AND l.business_key = c.business_key LIMIT 1) l ON true
 ORDER BY business_key::text, valid_from, action;

-- Revert restores the inferred versions exactly.
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass AND status = 'success';
SELECT scd2_test.checksum('inf.dim') = s AS inferred_restored FROM inf.state_inferred;
-- ... and so does rewind, to the infer_members run.
CALL scd2.apply('stg', 'dim');
SELECT count(*) FILTER (WHERE is_inferred) AS still_inferred FROM dim;
SELECT scd2.rewind('dim', (SELECT max(run_id) FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass AND inferred > 0)) AS runs_undone;
SELECT scd2_test.checksum('inf.dim') = s AS inferred_restored FROM inf.state_inferred;

-- A record and a later Type 1 change in one batch: the completed version
-- takes the Type 1 value in place too; revert undoes both.
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Paris', 'silver', '2024-01-15'), (3, 'Paris', 'gold', '2024-02-20');
CALL scd2.apply('stg', 'dim');
SELECT id, city, tier, valid_from, valid_to, is_inferred FROM dim WHERE id = 3 ORDER BY valid_from;
SELECT completed, type1_updated, unchanged FROM scd2.audit_log
 WHERE dimension_oid = 'dim'::regclass ORDER BY run_id DESC LIMIT 1;
-- dimension_at(..., known_at) cannot undo a completion.
DO $$ BEGIN
    PERFORM count(*) FROM scd2.dimension_at(NULL::inf.dim, now(), now() - interval '1 hour');
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING '%', regexp_replace(SQLERRM, 'known at .* cannot be reconstructed: run [0-9]+', 'known at ... cannot be reconstructed: run N');
END $$;
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass AND status = 'success';
SELECT scd2_test.checksum('inf.dim') = s AS inferred_restored FROM inf.state_inferred;
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Paris', 'silver', '2024-01-15'), (4, 'Lyon', 'bronze', '2024-05-01'),
                       (4, 'Nice', 'bronze', '2024-06-01'), (5, 'Bonn', 'gold', '2024-05-01');

-- A date dimension: a fact time must be a whole day (converted exactly, as
-- a load's effective time), or nothing is inferred.
CREATE TABLE ddate (sk int GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                    valid_from date NOT NULL, valid_to date, is_inferred boolean NOT NULL DEFAULT false);
SELECT scd2.register('ddate', ARRAY['id'], surrogate_key_column => 'sk', inferred_column => 'is_inferred');
CREATE TABLE inf.before_date AS SELECT scd2_test.state('inf.ddate') AS s;
INSERT INTO facts VALUES (7, 9, '2024-02-01 12:00');
SELECT scd2.infer_members('facts', 'ddate', 'sold_at');
SELECT scd2_test.state('inf.ddate') = s AS nothing_written FROM inf.before_date;
DELETE FROM facts WHERE order_id = 7;
SELECT scd2.infer_members('facts', 'ddate', 'sold_at') AS inferred;
SELECT id, valid_from, valid_to, is_inferred FROM ddate ORDER BY id;

-- A dry run counts the completions and writes nothing to the dimension.
CREATE TABLE inf.before_dry AS SELECT scd2_test.checksum('inf.dim') AS s;
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', dry_run => true);
SELECT status, completed FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass ORDER BY run_id DESC LIMIT 1;
SELECT scd2_test.checksum('inf.dim') = s AS nothing_written FROM inf.before_dry;

-- The facts keyed to the inferred versions stay right through the completion.
CREATE TABLE fact_sales AS SELECT f.order_id, scd2.asof('dim', f.sold_at, f.id) AS dim_sk, f.sold_at FROM facts f;
SELECT scd2.register_fact('fact_sales', 'dim', 'dim_sk', 'sold_at');
CALL scd2.apply('stg', 'dim');
SELECT count(*) AS wrong_facts FROM scd2.check_facts('fact_sales');
-- A fact keyed to the completed version before the inferred version's
-- start (key 3 moved back to Jan 15): the revert of the completion gives
-- back the inferred version from Feb 5, and re-keys that fact (maintained:
-- to no version, NULL).
INSERT INTO fact_sales SELECT 7, scd2.asof('dim', '2024-01-20', 3), '2024-01-20';
SELECT dim_sk IS NOT NULL AS keyed FROM fact_sales WHERE order_id = 7;
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'dim'::regclass AND status = 'success';
SELECT dim_sk IS NULL AS rekeyed_to_none FROM fact_sales WHERE order_id = 7;
SELECT count(*) AS wrong_facts FROM scd2.check_facts('fact_sales');
CALL scd2.apply('stg', 'dim');

-- An inferred version no longer current is not completed: a delete marker
-- for an inferred key closes it (the flag stays), and when the key's record
-- comes later it opens a new version as usual.
CREATE TABLE ddim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE dstg (id int, city text, eff timestamptz, gone boolean);
SELECT scd2.register('ddim', ARRAY['id'], effective_column => 'eff', delete_column => 'gone',
                     surrogate_key_column => 'sk', inferred_column => 'is_inferred', order_free => false);
INSERT INTO dstg VALUES (1, 'Oslo', '2024-01-01', false);
CALL scd2.apply('dstg', 'ddim');
SELECT scd2.infer_members('facts', 'ddim', 'sold_at') AS inferred;
TRUNCATE dstg;
INSERT INTO dstg VALUES (3, NULL, '2024-03-01', true);
CALL scd2.apply('dstg', 'ddim');
TRUNCATE dstg;
INSERT INTO dstg VALUES (3, 'Pisa', '2024-04-01', false), (4, 'Lyon', '2024-03-01', false);
CALL scd2.apply('dstg', 'ddim');
SELECT id, city, valid_from, valid_to, is_inferred FROM ddim ORDER BY id, valid_from;
SELECT completed, inserted, new_versions, unchanged FROM scd2.audit_log
 WHERE dimension_oid = 'ddim'::regclass ORDER BY run_id DESC LIMIT 1;

-- Snapshot mode: an extract that lacks an inferred key does not close it
-- (no extract had it yet); the extract that has it completes it.
CREATE TABLE sdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE sstg (id int, city text);
SELECT scd2.register('sdim', ARRAY['id'], mode => 'snapshot', surrogate_key_column => 'sk',
                     inferred_column => 'is_inferred');
INSERT INTO sstg VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('sstg', 'sdim', '2024-01-01');
SELECT scd2.infer_members('facts', 'sdim', 'sold_at') AS inferred;
DELETE FROM sstg WHERE id = 2;
CALL scd2.apply('sstg', 'sdim', '2024-03-01');
SELECT id, city, valid_from, valid_to, is_inferred FROM sdim ORDER BY id, valid_from;
INSERT INTO sstg VALUES (3, 'Paris');
CALL scd2.apply('sstg', 'sdim', '2024-05-01');
SELECT id, city, valid_from, valid_to, is_inferred FROM sdim ORDER BY id, valid_from;
SELECT completed, closed, inserted, unchanged FROM scd2.audit_log
 WHERE dimension_oid = 'sdim'::regclass ORDER BY run_id DESC LIMIT 1;

-- apply_snapshots: the extract that first has an inferred key completes it.
CREATE TABLE snaps (id int, city text, snap timestamptz);
INSERT INTO snaps VALUES (1, 'Oslo', '2024-06-01'), (3, 'Paris', '2024-06-01'),
                         (1, 'Oslo', '2024-07-01'), (3, 'Paris', '2024-07-01'), (4, 'Lyon', '2024-07-01');
CALL scd2.apply_snapshots('snaps', 'sdim', 'snap');
SELECT id, city, valid_from, valid_to, is_inferred FROM sdim ORDER BY id, valid_from;
SELECT sum(completed) AS completed FROM scd2.audit_log WHERE dimension_oid = 'sdim'::regclass AND staging LIKE '%snaps%';

-- Timestamp detection: a record after the placeholder's start completes it
-- and, a later effective time being a change, opens a version of its own.
CREATE TABLE tdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE tstg (id int, city text, eff timestamptz);
SELECT scd2.register('tdim', ARRAY['id'], effective_column => 'eff', detect => 'timestamp',
                     surrogate_key_column => 'sk', inferred_column => 'is_inferred', order_free => false);
SELECT scd2.infer_members('facts', 'tdim', 'sold_at') AS inferred;
INSERT INTO tstg VALUES (3, 'Paris', '2024-03-01'), (4, 'Lyon', '2024-03-01');
CALL scd2.apply('tstg', 'tdim');
SELECT id, city, valid_from, valid_to, is_inferred FROM tdim WHERE id IN (3, 4) ORDER BY id, valid_from;

-- An order-free dimension: the same, and its revert.
CREATE TABLE odim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true,
                   is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE ostg (id int, city text, eff timestamptz);
SELECT scd2.register('odim', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk',
                     is_current_column => 'is_current', inferred_column => 'is_inferred', order_free => true);
INSERT INTO ostg VALUES (1, 'Oslo', '2024-01-01');
CALL scd2.apply('ostg', 'odim');
SELECT scd2.infer_members('facts', 'odim', 'sold_at') AS inferred;
CREATE TABLE inf.state_odim AS SELECT scd2_test.checksum('inf.odim') AS s;
CREATE TABLE inf.inferred_odim AS SELECT * FROM odim WHERE is_inferred;
TRUNCATE ostg;
INSERT INTO ostg VALUES (3, 'Paris', '2024-01-15'), (4, 'Lyon', '2024-05-01'), (4, 'Nice', '2024-06-01'),
                        (1, 'Oslo', '2023-12-01');
CALL scd2.apply('ostg', 'odim');
SELECT d.id, d.city, d.valid_from, d.valid_to, d.is_inferred, d.sk = i.sk AS inferred_sk
  FROM odim d LEFT JOIN inf.inferred_odim i ON i.id = d.id ORDER BY d.id, d.valid_from;
SELECT scd2_test.invariants('odim');
SELECT completed, inserted, new_versions, closed, extended, unchanged FROM scd2.audit_log
 WHERE dimension_oid = 'odim'::regclass ORDER BY run_id DESC LIMIT 1;
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'odim'::regclass AND status = 'success';
SELECT scd2_test.checksum('inf.odim') = s AS inferred_restored FROM inf.state_odim;
-- A later order-free load of the same records completes them again.
CALL scd2.apply('ostg', 'odim');
SELECT count(*) FILTER (WHERE is_inferred) AS still_inferred, scd2_test.invariants('odim') FROM odim;

-- A dimension of an ordinary role, who infers and loads (its statements
-- run as that owner: the change log's work table is its to insert into).
CREATE ROLE inf_owner;
GRANT USAGE, CREATE ON SCHEMA inf TO inf_owner;
GRANT SELECT ON facts TO inf_owner;
SET ROLE inf_owner;
CREATE TABLE inf.rdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                       valid_from timestamptz NOT NULL, valid_to timestamptz,
                       is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE inf.rstg (id int, city text, eff timestamptz);
SELECT scd2.register('inf.rdim', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk',
                     inferred_column => 'is_inferred', order_free => false);
SELECT scd2.infer_members('inf.facts', 'inf.rdim', 'sold_at') AS inferred;
INSERT INTO inf.rstg VALUES (3, 'Paris', '2024-01-15'), (4, 'Lyon', '2024-05-01');
CALL scd2.apply('inf.rstg', 'inf.rdim');
SELECT id, city, valid_from, is_inferred FROM inf.rdim ORDER BY id;
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'inf.rdim'::regclass AND status = 'success';
SELECT count(*) FILTER (WHERE is_inferred) AS inferred_again FROM inf.rdim;
RESET ROLE;

-- scd2.merge's change feed has a row for each version the load completes
-- in place: action 'complete', the inferred version's surrogate key, its
-- valid_from after the completion (key 3's moved back to its record),
-- current; before the other rows of its version (key 4's later change
-- closes it).  The rows of scd2.changes, and as many as the metric
-- completed.  A dry run shows them as well.
CREATE TABLE mdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
CREATE TABLE mstg (id int, city text, eff timestamptz);
SELECT scd2.register('mdim', ARRAY['id'], effective_column => 'eff', surrogate_key_column => 'sk',
                     inferred_column => 'is_inferred', order_free => false) IS NOT NULL AS registered;
INSERT INTO mstg VALUES (1, 'Oslo', '2024-01-01');
CALL scd2.apply('mstg', 'mdim');
SELECT scd2.infer_members('facts', 'mdim', 'sold_at') AS inferred;
CREATE TABLE inf.inferred_m AS SELECT id, sk FROM mdim WHERE is_inferred;
CREATE TABLE inf.state_m AS SELECT scd2_test.checksum('inf.mdim') AS s;
TRUNCATE mstg;
INSERT INTO mstg VALUES (3, 'Paris', '2024-01-15'), (4, 'Lyon', '2024-05-01'), (4, 'Nice', '2024-06-01'),
                        (5, 'Bonn', '2024-05-01');
SELECT f.action, f.business_key, f.surrogate_key = i.sk AS inferred_sk, f.valid_from, f.valid_to
  FROM scd2.merge('mstg', 'mdim', dry_run => true) f LEFT JOIN inf.inferred_m i ON i.id = (f.business_key->>'id')::int
 WHERE f.action = 'complete';
SELECT scd2_test.checksum('inf.mdim') = s AS nothing_written FROM inf.state_m;
CREATE TABLE inf.feed AS
SELECT f.* FROM scd2.merge('mstg', 'mdim') WITH ORDINALITY AS f(action, surrogate_key, business_key, valid_from, valid_to, n);
SELECT f.n, f.action, f.business_key, f.surrogate_key = i.sk AS inferred_sk, f.valid_from, f.valid_to
  FROM inf.feed f LEFT JOIN inf.inferred_m i ON i.id = (f.business_key->>'id')::int ORDER BY f.n;
SELECT completed, (SELECT count(*) FROM inf.feed WHERE action = 'complete') AS complete_rows
  FROM scd2.audit_log WHERE dimension_oid = 'mdim'::regclass ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS differences FROM (
    (SELECT action, surrogate_key, business_key, valid_from, valid_to FROM inf.feed
     EXCEPT ALL SELECT * FROM scd2.changes((SELECT max(run_id) FROM scd2.audit_log WHERE dimension_oid = 'mdim'::regclass)))
    UNION ALL
    (SELECT * FROM scd2.changes((SELECT max(run_id) FROM scd2.audit_log WHERE dimension_oid = 'mdim'::regclass))
     EXCEPT ALL SELECT action, surrogate_key, business_key, valid_from, valid_to FROM inf.feed)) d;
-- A batch that only completes (nothing else to write: the feed is read
-- back, also on PostgreSQL 17+), and the same without the change log.
TRUNCATE mstg;
INSERT INTO mstg VALUES (2, 'Rome', '2024-03-01');
CREATE TABLE inf.state_m2 AS SELECT scd2_test.checksum('inf.mdim') AS s;
SELECT f.action, f.business_key, f.surrogate_key = i.sk AS inferred_sk, f.valid_from, f.valid_to
  FROM scd2.merge('mstg', 'mdim') f LEFT JOIN inf.inferred_m i ON i.id = (f.business_key->>'id')::int;
SELECT id, city, valid_from, is_inferred FROM mdim WHERE id = 2;
SELECT scd2.revert(max(run_id)) IS NOT NULL AS reverted FROM scd2.audit_log WHERE dimension_oid = 'mdim'::regclass AND status = 'success';
SELECT scd2_test.checksum('inf.mdim') = s AS inferred_restored FROM inf.state_m2;
BEGIN;
SET LOCAL scd2.change_log = off;
SELECT f.action, f.business_key, f.surrogate_key = i.sk AS inferred_sk, f.valid_from, f.valid_to
  FROM scd2.merge('mstg', 'mdim') f LEFT JOIN inf.inferred_m i ON i.id = (f.business_key->>'id')::int;
ROLLBACK;

-- A staging table with a column named as the inferred_column is refused.
CREATE TABLE stg_flag (id int, city text, tier text, eff timestamptz, is_inferred boolean);
INSERT INTO stg_flag VALUES (6, 'Bern', 'gold', '2024-07-01', false);
CREATE TABLE inf.before_flag AS SELECT scd2_test.checksum('inf.dim') || scd2_test.checksum('scd2.change_log') AS s;
SELECT count(*) FROM scd2.merge('stg_flag', 'dim');
SELECT scd2_test.checksum('inf.dim') || scd2_test.checksum('scd2.change_log') = s AS nothing_written FROM inf.before_flag;

-- Which keys are unknown is asked of the as-of lookup's in-memory map, in
-- the scan that checks the facts; without a map (a dimension too large for
-- scd2.asof_map_memory, a partitioned one) the dimension's index answers:
-- the same members either way.  A two-column text key (the map's general
-- form); a key whose only version is closed; a key with a version after
-- every fact; the same key in several facts; facts with no unknown key.
CREATE TABLE kdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, region text NOT NULL, code text NOT NULL,
                   city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
INSERT INTO kdim (region, code, city, valid_from, valid_to) VALUES
    ('eu', 'a', 'Oslo', '2024-01-01', NULL), ('eu', 'b', 'Rome', '2024-01-01', '2024-02-01'),
    ('us', 'a', 'Reno', '2024-06-01', NULL);
-- (6,000 more keys: a map of them takes more than 64kB)
INSERT INTO kdim (region, code, valid_from) SELECT 'zz', g::text, '2024-01-01' FROM generate_series(1, 6000) g;
SELECT scd2.register('kdim', ARRAY['region', 'code'], surrogate_key_column => 'sk',
                     inferred_column => 'is_inferred');
CREATE TABLE kfacts (region text, code text, sold_at timestamptz);
INSERT INTO kfacts VALUES ('eu', 'a', '2024-03-01'), ('eu', 'b', '2024-03-01'), ('us', 'a', '2024-03-01'),
                          ('us', 'b', '2024-03-05'), ('us', 'b', '2024-03-02'), ('eu', 'c', '2024-04-01'),
                          ('EU', 'a', '2024-04-01'), ('zz', '17', '2023-01-01');
CREATE TABLE inf.kdim_before AS SELECT scd2_test.checksum('inf.kdim') AS s;
BEGIN;
SELECT scd2.infer_members('kfacts', 'kdim', 'sold_at') AS inferred_with_map;
SELECT region, code, valid_from, valid_to, is_inferred FROM kdim WHERE region <> 'zz' ORDER BY region, code, valid_from;
SELECT string_agg(format('%s/%s/%s/%s/%s', region, code, valid_from, valid_to, is_inferred), ','
                  ORDER BY region, code, valid_from) AS with_map FROM kdim \gset
ROLLBACK;
SET scd2.asof_map_memory = 64;         -- the 6,003 keys' map does not fit: the index answers
BEGIN;
SELECT scd2.infer_members('kfacts', 'kdim', 'sold_at') AS inferred_without_map;
SELECT string_agg(format('%s/%s/%s/%s/%s', region, code, valid_from, valid_to, is_inferred), ','
                  ORDER BY region, code, valid_from) = :'with_map' AS same_members FROM kdim;
ROLLBACK;
RESET scd2.asof_map_memory;
DELETE FROM kfacts WHERE (region, code) NOT IN (('eu', 'a'), ('us', 'a'));
SELECT scd2.infer_members('kfacts', 'kdim', 'sold_at') AS nothing_unknown;
SELECT scd2_test.checksum('inf.kdim') = s AS dimension_unchanged FROM inf.kdim_before;
INSERT INTO kfacts VALUES (NULL, 'z', '2024-01-01');
SELECT scd2.infer_members('kfacts', 'kdim', 'sold_at');          -- a NULL key, after known keys
SELECT scd2_test.checksum('inf.kdim') = s AS nothing_written FROM inf.kdim_before;

-- A key whose domain's CHECK runs PL/pgSQL with an EXCEPTION block: each
-- fact's conversion aborts a subtransaction, which closes the as-of map
-- (as after any subtransaction's abort); the facts from there on are
-- probed instead: the same members.
CREATE FUNCTION inf.code_ok(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    BEGIN
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        NULL;
    END;
    RETURN v <> 'bad';
END $$;
CREATE DOMAIN inf.code AS text CHECK (inf.code_ok(VALUE));
CREATE TABLE ddom (sk bigint GENERATED ALWAYS AS IDENTITY, k inf.code NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false);
INSERT INTO ddom (k, city, valid_from) VALUES ('a', 'Oslo', '2024-01-01'), ('b', 'Rome', '2024-01-01');
SELECT scd2.register('ddom', ARRAY['k'], surrogate_key_column => 'sk', inferred_column => 'is_inferred');
CREATE TABLE dfacts (k text, sold_at timestamptz);
INSERT INTO dfacts VALUES ('a', '2024-02-01'), ('c', '2024-02-03'), ('b', '2024-02-01'), ('c', '2024-02-02'), ('d', '2024-03-01');
SELECT scd2.infer_members('dfacts', 'ddom', 'sold_at') AS inferred;
SELECT k, city, valid_from, is_inferred FROM ddom ORDER BY k;

-- A hash-partitioned dimension (scd2.asof does not read it: no map).
CREATE TABLE pdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_inferred boolean NOT NULL DEFAULT false) PARTITION BY HASH (id);
CREATE TABLE pdim_0 PARTITION OF pdim FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pdim_1 PARTITION OF pdim FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO pdim (id, city, valid_from) VALUES (1, 'Oslo', '2024-01-01');
SELECT scd2.register('pdim', ARRAY['id'], surrogate_key_column => 'sk', inferred_column => 'is_inferred');
SELECT scd2.infer_members('facts', 'pdim', 'sold_at') AS inferred;
SELECT id, city, valid_from, is_inferred FROM pdim ORDER BY id;

RESET search_path;
DROP SCHEMA inf CASCADE;
DROP OWNED BY inf_owner;
DROP ROLE inf_owner;
