-- scd2.dimension_at(NULL::dim, at, known_at) (issue 27): the dimension
-- valid at `at` as the loads finished by known_at had recorded it,
-- reconstructed from the change log.  It must equal the two-argument
-- dimension_at taken right after the load that was newest at known_at,
-- for every at; it is refused, naming the run, when a later run cannot be
-- undone from its change log.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

-- The dimension's rows after each run (and before the first), and when
-- the run became known (committed: each load commits on its own).
CREATE TABLE histops.kn (run_id bigint, known timestamptz, rows jsonb);
CREATE PROCEDURE histops.kn_load(stg regclass, dim regclass, eff timestamptz)
LANGUAGE plpgsql AS $$
DECLARE
    run bigint;
BEGIN
    CALL scd2.apply(stg, dim, eff, run);
    COMMIT;
    INSERT INTO histops.kn SELECT run, histops.known_since(run), (SELECT coalesce(jsonb_agg(to_jsonb(d)), '[]') FROM histops.kdim d);
END $$;
-- A set of rows (jsonb) as a checksum.
CREATE FUNCTION histops.rows_sum(r jsonb) RETURNS text LANGUAGE sql AS $$
    SELECT count(*) || ':' || md5(coalesce(string_agg(e::text, ',' ORDER BY e::text), '')) FROM jsonb_array_elements(r) e
$$;
-- What the two-argument form returned right after a run, at an instant.
CREATE FUNCTION histops.expected(r jsonb, at timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT histops.rows_sum(coalesce(jsonb_agg(e), '[]')) FROM jsonb_array_elements(r) e
     WHERE (e ->> 'valid_from')::timestamptz <= at
       AND (e ->> 'valid_to' IS NULL OR (e ->> 'valid_to')::timestamptz > at)
$$;

-- A chain of every kind of load (as in history_2_rewind).
CREATE TABLE kdim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, v text, note text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE kstg (id int, v text, note text, eff timestamptz, del boolean DEFAULT false);
SELECT scd2.register('kdim', ARRAY['id'], type1 => ARRAY['note'], effective_column => 'eff',
                     delete_column => 'del');
-- What the three-argument form returns.
CREATE FUNCTION histops.known(at timestamptz, known_at timestamptz) RETURNS text LANGUAGE sql AS $$
    SELECT histops.rows_sum(coalesce(jsonb_agg(to_jsonb(d)), '[]')) FROM scd2.dimension_at(NULL::histops.kdim, at, known_at) d
$$;
INSERT INTO histops.kn VALUES (0, now() - interval '1 hour', '[]');
INSERT INTO kstg (id, v, note, eff) SELECT g, 'a', 'n', '2024-01-01' FROM generate_series(1, 6) g;
CALL histops.kn_load('kstg', 'kdim', '2024-01-01');
TRUNCATE kstg;
INSERT INTO kstg (id, v, note, eff) VALUES (1, 'b', 'n', '2024-02-01'), (2, 'a', 'N', '2024-02-01'),
                                           (7, 'a', 'n', '2024-02-01');
CALL histops.kn_load('kstg', 'kdim', '2024-02-01');
TRUNCATE kstg;
INSERT INTO kstg (id, v, note, eff, del) VALUES (3, 'b', 'n', '2024-03-01', false), (3, 'c', 'n', '2024-03-15', false),
                                                (4, NULL, NULL, '2024-03-01', true);
CALL histops.kn_load('kstg', 'kdim', '2024-03-01');
TRUNCATE kstg;
INSERT INTO kstg (id, v, note, eff) VALUES (1, 'x', 'n', '2024-01-15'), (4, 'a', 'n', '2024-04-01'), (2, 'a', 'M', '2024-04-01');
CALL histops.kn_load('kstg', 'kdim', '2024-04-01');
-- a load reverted later (its run and its revert both after the earlier known_at's)
TRUNCATE kstg;
INSERT INTO kstg (id, v, note, eff) VALUES (5, 'bad', 'n', '2024-05-01');
CALL scd2.apply('kstg', 'kdim', '2024-05-01', NULL) \gset
SELECT max(run_id) AS bad_run FROM scd2.audit_log \gset
SELECT histops.known_since(:bad_run) AS bad_finished \gset
SELECT scd2.revert(:bad_run) > 0 AS reverted;
SELECT histops.known_since(max(run_id)) AS revert_finished FROM scd2.audit_log \gset
TRUNCATE kstg;
INSERT INTO kstg (id, v, note, eff) VALUES (5, 'b', 'm', '2024-05-01'), (6, 'b', 'n', '2024-05-02');
CALL histops.kn_load('kstg', 'kdim', '2024-05-02');
SELECT scd2_test.invariants('kdim');

-- Every instant that matters: each boundary of each version (and just
-- before it), and random ones; every known_at: each run's end, just
-- before it, and between runs.
CREATE TEMP TABLE ats AS
SELECT DISTINCT t AS at FROM (
    SELECT valid_from AS t FROM kdim UNION SELECT valid_to FROM kdim WHERE valid_to IS NOT NULL
    UNION SELECT valid_from - interval '1 microsecond' FROM kdim
    UNION SELECT '2023-12-01'::timestamptz
    UNION SELECT timestamptz '2024-01-01' + random() * interval '150 days' FROM generate_series(1, 12)) x;
SELECT setseed(0.27);
SELECT k.n AS after_run,
       bool_and(histops.known(a.at, k.known) = histops.expected(k.rows, a.at)) AS at_its_end,
       bool_and(histops.known(a.at, k.known + interval '1 microsecond') = histops.expected(k.rows, a.at)) AS just_after,
       bool_and(k.n = 0 OR histops.known(a.at, k.known - interval '1 microsecond') = histops.expected(k.rows_before, a.at)) AS just_before,
       count(*) AS instants
  FROM (SELECT *, row_number() OVER (ORDER BY run_id) - 1 AS n, lag(rows) OVER (ORDER BY run_id) AS rows_before FROM histops.kn) k,
       ats a
 GROUP BY k.n ORDER BY k.n;
-- known_at now: the current dimension, as the two-argument form.
SELECT bool_and(histops.known(a.at, now() + interval '1 day')
                = (SELECT histops.rows_sum(coalesce(jsonb_agg(to_jsonb(d)), '[]')) FROM scd2.dimension_at(NULL::kdim, a.at) d))
       AS now_equals_current FROM ats a;

-- Refusals, naming the run.
-- between the reverted load and its revert: that load's rows are gone
SELECT regexp_replace(histops.try(format($$SELECT count(*) FROM scd2.dimension_at(NULL::kdim, '2024-06-01', %L)$$,
                       :'bad_finished'::timestamptz + (:'revert_finished'::timestamptz - :'bad_finished'::timestamptz) / 2)),
                      '[0-9]{4}-[0-9-]+ [0-9:.]+[+]00', 'T', 'g');
-- a later load with scd2.change_log = off, a pruned one
SELECT max(known) AS last_finished FROM histops.kn \gset
SET scd2.change_log = off;
UPDATE kstg SET v = 'c', eff = '2024-06-01';
CALL scd2.apply('kstg', 'kdim', '2024-06-01', NULL) \gset
RESET scd2.change_log;
SELECT regexp_replace(histops.try(format($$SELECT count(*) FROM scd2.dimension_at(NULL::kdim, '2024-06-01', %L)$$, :'last_finished')),
                      '[0-9]{4}-[0-9-]+ [0-9:.]+[+]00', 'T', 'g');
SELECT count(*) > 0 AS after_the_unlogged_run FROM scd2.dimension_at(NULL::kdim, '2024-06-01', now());
CREATE TABLE pdim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE pstg (id int, v text);
SELECT scd2.register('pdim', ARRAY['id']);
INSERT INTO pstg VALUES (1, 'a');
CALL scd2.apply('pstg', 'pdim', '2024-01-01', NULL) \gset
SELECT scd2.prune_change_log('0', 'pdim');
SELECT histops.try($$SELECT count(*) FROM scd2.dimension_at(NULL::pdim, '2024-06-01', '2000-01-01')$$);
-- arguments
SELECT histops.try($$SELECT count(*) FROM scd2.dimension_at(NULL::kdim, '2024-06-01', NULL)$$);
SELECT histops.try($$SELECT count(*) FROM scd2.dimension_at(NULL::histops.kn, '2024-06-01', now())$$);

-- The reconstruction runs as its caller: a key type with a cast to json
-- that a role other than a superuser wrote (jsonb_build_object would call
-- it) is refused for every caller, naming the column and the function.
CREATE ROLE regress_known_at_owner;
CREATE SCHEMA histops_cast AUTHORIZATION regress_known_at_owner;
SET ROLE regress_known_at_owner;
CREATE TYPE histops_cast.code AS ENUM ('a', 'b');
CREATE FUNCTION histops_cast.code_json(histops_cast.code) RETURNS json
    LANGUAGE sql AS $$ SELECT pg_catalog.to_json(CAST($1 AS text)) $$;
CREATE CAST (histops_cast.code AS json) WITH FUNCTION histops_cast.code_json(histops_cast.code);
CREATE TABLE histops_cast.stg (k histops_cast.code, v text);
SELECT scd2.create_dimension('histops_cast.dim', 'histops_cast.stg', ARRAY['k']);
RESET ROLE;
SELECT * FROM scd2.dimension_at(NULL::histops_cast.dim, now(), now());
SELECT count(*) FROM scd2.dimension_at(NULL::histops_cast.dim, now());
DROP SCHEMA histops_cast CASCADE;
DROP ROLE regress_known_at_owner;

-- A Type 1 before-image is decoded onto the row itself: a column that is
-- neither key nor Type 1 never goes through its type's input, so the
-- CHECK of its domain (the owner's code) does not run as the caller.
CREATE FUNCTION noisy_check(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'the domain check ran as %', current_user; RETURN true; END $$;
CREATE DOMAIN noisy AS text CHECK (noisy_check(VALUE));
CREATE TABLE ddim (id int NOT NULL, note noisy, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE dstg (id int, note noisy, v text);
SET client_min_messages = warning;
SELECT scd2.register('ddim', ARRAY['id'], type1 => ARRAY['v']);
INSERT INTO dstg VALUES (1, 'n', 'x');
CALL scd2.apply('dstg', 'ddim', '2024-01-01', NULL) \gset
SELECT histops.known_since(:run_id) AS t1 \gset
UPDATE dstg SET v = 'y';
CALL scd2.apply('dstg', 'ddim', '2024-02-01', NULL) \gset
SET client_min_messages = notice;
SELECT id, note, v FROM scd2.dimension_at(NULL::ddim, '2024-03-01', :'t1');
SELECT id, note, v FROM scd2.dimension_at(NULL::ddim, '2024-03-01', now());
SET client_min_messages = warning;

-- Row-level security: the before-images are read from the change log as
-- the extension owner, so a caller a policy limits is refused -- also when
-- it calls the internal function directly -- and sees nothing of a hidden
-- row; the two-argument dimension_at is its own SELECT, under its policy.
CREATE ROLE regress_known_at_reader;
CREATE TABLE kn_rls_dim (id int NOT NULL, tenant text, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE kn_rls_stg (id int, tenant text, v text);
SELECT scd2.register('kn_rls_dim', ARRAY['id'], type1 => ARRAY['v']);
INSERT INTO kn_rls_stg VALUES (1, 'a', 'x'), (2, 'b', 'secret');
CALL scd2.apply('kn_rls_stg', 'kn_rls_dim', '2024-01-01', NULL) \gset
UPDATE kn_rls_stg SET v = 'y';
CALL scd2.apply('kn_rls_stg', 'kn_rls_dim', '2024-02-01', NULL) \gset
ALTER TABLE kn_rls_dim ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_a ON kn_rls_dim TO regress_known_at_reader USING (tenant = 'a');
GRANT USAGE ON SCHEMA histops TO regress_known_at_reader;
GRANT SELECT ON kn_rls_dim TO regress_known_at_reader;
SET ROLE regress_known_at_reader;
SELECT id, v FROM scd2.dimension_at(NULL::kn_rls_dim, now());
SELECT histops.try($$SELECT count(*) FROM scd2.dimension_at(NULL::histops.kn_rls_dim, now(), '-infinity')$$);
SELECT histops.try($$SELECT count(*) FROM scd2._known_at_undo('histops.kn_rls_dim', '-infinity')$$);
RESET ROLE;
SELECT count(*) AS rows_for_the_owner FROM scd2.dimension_at(NULL::kn_rls_dim, now(), '-infinity');
DROP TABLE kn_rls_dim, kn_rls_stg;
REVOKE USAGE ON SCHEMA histops FROM regress_known_at_reader;
DROP ROLE regress_known_at_reader;

-- Known at goes by commit, not by when the load wrote its audit row: a
-- load in a long transaction (a dbt run) that commits after known_at was
-- seen by no reader at known_at, and counts as not known then -- for
-- dimension_at(..., known_at) and for rewind(..., to_time).  Inside its
-- own transaction a load has not committed: it is after every known_at.
CREATE TABLE ltdim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE ltstg (id int, v text);
SELECT scd2.register('ltdim', ARRAY['id']);
INSERT INTO ltstg VALUES (1, 'a'), (2, 'a');
CALL scd2.apply('ltstg', 'ltdim', '2024-01-01', NULL) \gset
UPDATE ltstg SET v = 'b' WHERE id = 1;
BEGIN;
CALL scd2.apply('ltstg', 'ltdim', '2024-02-01', NULL) \gset
SELECT count(*) AS own_run_not_known_yet FROM scd2.dimension_at(NULL::ltdim, '2024-03-01', clock_timestamp()) WHERE v = 'b';
SELECT pg_sleep(0.01);
SELECT clock_timestamp() AS mid \gset
SELECT pg_sleep(0.01);
COMMIT;
SELECT finished_at < :'mid' AS finished_before_mid, histops.known_since(run_id) > :'mid' AS known_after_mid,
       committed_at > finished_at AS stamped_at_commit
  FROM scd2.audit_log WHERE run_id = :run_id;
SELECT id, v FROM scd2.dimension_at(NULL::ltdim, '2024-03-01', :'mid') ORDER BY id;
SELECT id, v FROM scd2.dimension_at(NULL::ltdim, '2024-03-01', histops.known_since(:run_id)) ORDER BY id;
BEGIN;
SELECT scd2.rewind('ltdim', :'mid'::timestamptz) AS undone;
SELECT id, v, valid_to FROM ltdim ORDER BY id, valid_from;
ROLLBACK;
SELECT scd2.rewind('ltdim', histops.known_since(:run_id)) AS undone_at_its_commit;
-- the loads' audit rows: stamped at their commit (a rewind that undid nothing wrote none)
SELECT status, committed_at IS NOT NULL AS stamped FROM scd2.audit_log
 WHERE dimension_oid = 'ltdim'::regclass ORDER BY run_id;
DROP TABLE ltdim, ltstg;
