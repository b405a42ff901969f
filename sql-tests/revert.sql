-- On a bad day (issue 15): every load keeps a change log; scd2.revert
-- undoes the newest successful load of a dimension exactly;
-- scd2.changes returns a past run's change feed; scd2.prune_change_log
-- makes retention explicit.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA rev;
SET search_path = rev, public;

-- A checksum of every column of every row (columns named in drop left
-- out), and the row count.
CREATE FUNCTION rev.checksum(rel regclass, drop text[] DEFAULT '{}')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format('SELECT count(*) || '':'' || md5(coalesce(string_agg((to_jsonb(t) - %L::text[])::text, '','' ORDER BY (to_jsonb(t) - %L::text[])::text), ''''))'
                   ' FROM %s t', drop, drop, rel) INTO r;
    RETURN r;
END $$;

-- Run a statement; 'ok', or its error (SQLSTATE, message, detail, hint)
-- with every number masked: run ids depend on the tests run before.
-- (Errors are caught in a subtransaction: the rev.state checks below
-- show that a refused revert wrote nothing before it failed either.)
CREATE FUNCTION rev.try(q text)
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
                                       || coalesce(' HINT: ' || nullif(h, ''), ''), '\m[0-9]+', 'N', 'g');
END $$;

-- The detail of a statement's error, as is.
CREATE FUNCTION rev.error_detail(q text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
BEGIN
    EXECUTE q;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN d;
END $$;

-- Everything a revert could write: the dimension, the audit log, the
-- change log.
CREATE FUNCTION rev.state(rel regclass)
RETURNS text LANGUAGE sql AS $$
    SELECT rev.checksum(rel) || ' audit ' || rev.checksum('scd2.audit_log', ARRAY['finished_at', 'duration'])
           || ' runs ' || rev.checksum('scd2.change_log_runs')
$$;

-- One load of a batch, checked and reverted:
--   actions          what the load did (its change feed, counted by action)
--   changes_match    scd2.changes(run) returns exactly what merge returned,
--                    before and after the revert
--   revert_restores  after scd2.revert(run), every column of every row is
--                    as before the load
--   reload_same      loading the batch again gives the rows of the first
--                    load (surrogate keys aside)
-- The dimension is left with the batch loaded again.
CREATE FUNCTION rev.load_revert_reload(stg regclass, dim regclass, sk text DEFAULT 'sk',
                                       eff timestamptz DEFAULT '2024-12-01')
RETURNS TABLE (actions text, changes_match boolean, revert_restores boolean, reload_same boolean)
LANGUAGE plpgsql AS $$
DECLARE
    v_before text;
    v_loaded text;
    v_run bigint;
BEGIN
    v_before := rev.checksum(dim);
    CREATE TEMP TABLE feed1 AS SELECT * FROM scd2.merge(stg, dim, eff);
    SELECT max(a.run_id) INTO v_run FROM scd2.audit_log a WHERE a.status = 'success';
    v_loaded := rev.checksum(dim, ARRAY[sk]);
    SELECT string_agg(a || ' ' || n, ', ' ORDER BY a) INTO actions
      FROM (SELECT f.action AS a, count(*) AS n FROM feed1 f GROUP BY f.action) x;
    changes_match := NOT EXISTS (
        (SELECT * FROM feed1 EXCEPT ALL SELECT * FROM scd2.changes(v_run))
        UNION ALL
        (SELECT * FROM scd2.changes(v_run) EXCEPT ALL SELECT * FROM feed1));
    PERFORM scd2.revert(v_run);
    revert_restores := rev.checksum(dim) = v_before;
    -- the change feed of a reverted run is still what merge returned
    changes_match := changes_match AND NOT EXISTS (
        (SELECT * FROM feed1 EXCEPT ALL SELECT * FROM scd2.changes(v_run))
        UNION ALL
        (SELECT * FROM scd2.changes(v_run) EXCEPT ALL SELECT * FROM feed1));
    PERFORM count(*) FROM scd2.merge(stg, dim, eff);
    reload_same := rev.checksum(dim, ARRAY[sk]) = v_loaded;
    DROP TABLE feed1;
    RETURN NEXT;
END $$;

CREATE TABLE stg (id int, city text, tier text, phone text, at timestamptz, del boolean);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, tier text, phone text, valid_from timestamptz NOT NULL,
                  valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city', 'tier'], type1 => ARRAY['phone'],
                     effective_column => 'at', delete_column => 'del', order_free => false);

-- New keys: the first load of an empty dimension (reverting it empties it).
INSERT INTO stg VALUES (1, 'Oslo', 'a', '111', '2024-01-01', false),
                       (2, 'Rome', 'b', '222', '2024-01-01', false),
                       (3, 'Lima', 'c', '333', '2024-01-01', false),
                       (4, 'Kyiv', 'd', '444', '2024-01-01', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');
SELECT scd2_test.invariants('dim');

-- Changes of tracked columns, and a new key.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Bergen', 'a', '111', '2024-03-01', false),
                       (2, 'Rome', 'bb', '222', '2024-03-01', false),
                       (5, 'Quito', 'e', '555', '2024-03-01', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- Several changes of one key in one batch (and an exact duplicate).
TRUNCATE stg;
INSERT INTO stg VALUES (3, 'Cusco', 'c', '333', '2024-04-01', false),
                       (3, 'Arequipa', 'c', '333', '2024-05-01', false),
                       (3, 'Arequipa', 'c', '333', '2024-05-01', false),
                       (3, 'Puno', 'c', '333', '2024-06-01', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- Deletes (the delete marker).
TRUNCATE stg;
INSERT INTO stg VALUES (4, NULL, NULL, NULL, '2024-06-15', true),
                       (5, NULL, NULL, NULL, '2024-06-15', true);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- Late changes that split history (before the current version's start).
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Trondheim', 'a', '111', '2024-02-01', false),
                       (3, 'Ica', 'c', '333', '2024-04-15', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- A key that returns after its delete, and one late into its gap.
TRUNCATE stg;
INSERT INTO stg VALUES (4, 'Lviv', 'd', '444', '2024-08-01', false),
                       (5, 'Cuenca', 'e', '555', '2024-07-01', false),
                       (5, 'Loja', 'e', '555', '2024-09-01', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- Type 1 updates (in place on the current version), one with a change.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Trondheim', 'a', '999', '2024-10-01', false),
                       (2, 'Rome', 'bb', '888', '2024-10-01', false),
                       (3, 'Tacna', 'c', '777', '2024-10-01', false);
SELECT * FROM rev.load_revert_reload('stg', 'dim');

-- A load that changes nothing: reverting it changes nothing either.
SELECT * FROM rev.load_revert_reload('stg', 'dim');
SELECT scd2_test.invariants('dim');

-- Snapshot mode: keys missing from the extract are closed.
CREATE TABLE stg_snap (id int, city text);
CREATE TABLE dim_snap (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                       city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                       is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim_snap', ARRAY['id'], mode => 'snapshot');
INSERT INTO stg_snap VALUES (1, 'Oslo'), (2, 'Rome'), (3, 'Lima');
SELECT * FROM rev.load_revert_reload('stg_snap', 'dim_snap', eff => '2024-01-01');
TRUNCATE stg_snap;
INSERT INTO stg_snap VALUES (1, 'Oslo'), (3, 'Cusco');
SELECT * FROM rev.load_revert_reload('stg_snap', 'dim_snap', eff => '2024-02-01');
-- ... and a deleted key back in the extract at an instant before its
-- deletion (the general path: it returns from the deletion on; key 3's
-- current version starts after that instant, with the same values: a
-- no-op).
TRUNCATE stg_snap;
INSERT INTO stg_snap VALUES (1, 'Oslo'), (2, 'Rome'), (3, 'Cusco');
SELECT * FROM rev.load_revert_reload('stg_snap', 'dim_snap', eff => '2024-01-15');
SELECT scd2_test.invariants('dim_snap');

-- Date validity, current rows at 'infinity', a composite key with a
-- collation, no surrogate key and no is_current column, a numeric Type 1
-- column: every value goes through the change log's jsonb exactly.
CREATE TABLE stg_d (region text COLLATE "C", code int, name text, price numeric, ratio float8,
                    at date);
CREATE TABLE dim_d (region text COLLATE "C" NOT NULL, code int NOT NULL, name text,
                    price numeric, ratio float8, valid_from date NOT NULL,
                    valid_to date NOT NULL DEFAULT 'infinity');
SELECT scd2.register('dim_d', ARRAY['region', 'code'], type1 => ARRAY['price', 'ratio'],
                     effective_column => 'at', current_valid_to => 'infinity', order_free => false);
INSERT INTO stg_d VALUES ('eu', 1, 'bolt', 1.10, 0.1, '2024-01-01'), ('EU', 1, 'nut', 2.20, 1e-300, '2024-01-01'),
                         ('us', 2, 'gear', 3.3333333333333333333, 1.0/3, '2024-01-01');
SELECT * FROM rev.load_revert_reload('stg_d', 'dim_d', sk => '');
TRUNCATE stg_d;
INSERT INTO stg_d VALUES ('eu', 1, 'bolt', 9.99, 2.0/3, '2024-01-01'),
                         ('EU', 1, 'screw', 2.20, 1e-300, '2024-02-01'),
                         ('us', 2, 'cog', 4.4, 1.0/3, '2023-06-01');
SELECT * FROM rev.load_revert_reload('stg_d', 'dim_d', sk => '');
SELECT region, code, name, price, ratio, valid_from, valid_to FROM dim_d ORDER BY 1, 2, 6;

-- Quoted names everywhere, under the no_overlap exclusion constraint: a
-- late change splits history and the revert puts the split back.
CREATE EXTENSION IF NOT EXISTS btree_gist SCHEMA public;
CREATE TABLE "stg Q" ("Key ""1""" text, "Ci ty" text, "Ph,one" text, "At" timestamptz);
CREATE TABLE "dim Q" ("S K" bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "Key ""1""" text NOT NULL,
                      "Ci ty" text, "Ph,one" text, "From" timestamptz NOT NULL, "To" timestamptz,
                      "Cur?" boolean NOT NULL DEFAULT true);
SELECT scd2.register('"dim Q"', ARRAY['Key "1"'], type1 => ARRAY['Ph,one'], effective_column => 'At',
                     valid_from_column => 'From', valid_to_column => 'To', is_current_column => 'Cur?',
                     no_overlap => true, order_free => false);
INSERT INTO "stg Q" VALUES ('a''b', 'Oslo', '1', '2024-01-01'), ('a''b', 'Bergen', '1', '2024-05-01'),
                           ('{"x"}', 'Rome', '2', '2024-01-01');
SELECT * FROM rev.load_revert_reload('"stg Q"', '"dim Q"', sk => 'S K');
TRUNCATE "stg Q";
INSERT INTO "stg Q" VALUES ('a''b', 'Molde', '9', '2024-03-01'), ('{"x"}', 'Rome', '3', '2024-06-01');
SELECT * FROM rev.load_revert_reload('"stg Q"', '"dim Q"', sk => 'S K');
SELECT "Key ""1""", "Ci ty", "Ph,one", "From", "To", "Cur?" FROM "dim Q" ORDER BY 1, "From";

-- Random batches (changes, several rows per key, deletes, keys that
-- return, late changes, Type 1 updates): every one reverts to
-- the state before it and loads again to the same rows.
CREATE TABLE stg_r (LIKE stg);
CREATE TABLE dim_r (LIKE dim INCLUDING ALL);
SELECT scd2.register('dim_r', ARRAY['id'], tracked => ARRAY['city', 'tier'], type1 => ARRAY['phone'],
                     effective_column => 'at', delete_column => 'del', order_free => false);
SELECT setseed(0.42);
CREATE TEMP TABLE random_runs AS SELECT 0 AS batch, NULL::text AS actions, true AS ok LIMIT 0;
DO $$
DECLARE
    r record;
BEGIN
    FOR b IN 1..25 LOOP
        TRUNCATE rev.stg_r;
        INSERT INTO rev.stg_r
        SELECT k, 'c' || floor(random() * 3)::int, 't' || floor(random() * 2)::int,
               'p' || floor(random() * 3)::int,
               -- late ones too; never at an instant another batch used
               timestamptz '2024-01-01' + (b * 7 - floor(random() * 20)::int) * interval '1 day'
                   + b * interval '1 second' + n * interval '1 minute',
               random() < 0.1
          FROM generate_series(1, 40) k, generate_series(1, 2) n WHERE random() < 0.35;
        SELECT * INTO r FROM rev.load_revert_reload('rev.stg_r', 'rev.dim_r');
        INSERT INTO random_runs VALUES (b, r.actions, r.changes_match AND r.revert_restores AND r.reload_same);
    END LOOP;
END $$;
SELECT count(*) AS batches, count(*) FILTER (WHERE NOT ok) AS failed,
       count(*) FILTER (WHERE actions LIKE '%shorten%') > 0 AS some_late,
       count(*) FILTER (WHERE actions LIKE '%delete%') > 0 AS some_deletes,
       count(*) FILTER (WHERE actions LIKE '%type1%') > 0 AS some_type1
  FROM random_runs;
SELECT scd2_test.invariants('dim_r');

-- CALL scd2.apply returns the run id the change log is kept under.
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Milan', 'bb', '888', '2024-11-01', false);
SELECT rev.checksum('dim') AS before_apply \gset
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT :run_id AS apply_run \gset
SELECT :apply_run = max(run_id) AS same_run_id FROM scd2.change_log_runs;
SELECT a.status, r.dimension, r.key_columns, r.valid_from_column, r.valid_to_column,
       r.is_current_column, r.surrogate_key_column, r.type1_columns, r.current_valid_to, r.logged
  FROM scd2.audit_log a JOIN scd2.change_log_runs r USING (run_id) WHERE run_id = :apply_run;
SELECT * FROM scd2.changes(:apply_run);

------------------------------------------------------------------------------
-- Refused reverts write nothing: the dimension, the audit log and the
-- change log are as they were.
------------------------------------------------------------------------------
-- (a failed load at top level leaves an error row)
CREATE TABLE stg_bad (LIKE stg);
INSERT INTO stg_bad VALUES (NULL, 'Nowhere', 'x', '000', '2024-11-01', false);
CALL scd2.apply('stg_bad', 'dim');
SELECT count(*) FROM scd2.merge('stg', 'dim', dry_run => true);
SELECT rev.state('dim') AS state \gset
-- not the newest load of its dimension: the error names the later runs
SELECT min(run_id) AS old_run FROM scd2.change_log_runs r JOIN scd2.audit_log a USING (run_id)
 WHERE r.dimension = 'dim'::regclass AND a.status = 'success' \gset
SELECT rev.try('SELECT scd2.revert(' || :old_run || ')');
SELECT rev.error_detail('SELECT scd2.revert(' || :old_run || ')')
       = format('Later loads of rev.dim: run %s. Nothing was reverted.',
                (SELECT string_agg(run_id::text, ', ' ORDER BY run_id)
                   FROM scd2.change_log_runs r JOIN scd2.audit_log a USING (run_id)
                  WHERE r.dimension = 'dim'::regclass AND a.status = 'success' AND run_id > :old_run))
       AS names_the_later_runs;
SELECT rev.state('dim') = :'state' AS unchanged;
-- a run that was already reverted, a revert, an error, a dry run, no run
SELECT rev.try('SELECT scd2.revert(' || min(run_id) || ')') FROM scd2.audit_log
 WHERE status = 'reverted' AND dimension = 'rev.dim';
SELECT rev.try('SELECT scd2.revert(' || min(run_id) || ')') FROM scd2.audit_log
 WHERE status = 'revert' AND dimension = 'rev.dim';
SELECT rev.try('SELECT scd2.revert(' || max(run_id) || ')') FROM scd2.audit_log
 WHERE status = 'error' AND dimension = 'rev.dim';
SELECT rev.try('SELECT scd2.revert(' || max(run_id) || ')') FROM scd2.audit_log
 WHERE status = 'dry_run' AND dimension = 'rev.dim';
SELECT rev.try('SELECT scd2.revert(-1)');
SELECT rev.try('SELECT scd2.revert(NULL)');
SELECT rev.try('SELECT scd2.changes(-1)');
SELECT rev.state('dim') = :'state' AS unchanged;
-- rows the run wrote were changed outside scd2 since: refused
BEGIN;
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Turin', 'bb', '888', '2024-11-10', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
DELETE FROM dim WHERE id = 2 AND city = 'Turin';
SELECT rev.checksum('dim') AS after_delete \gset
SELECT rev.try('SELECT scd2.revert(' || :run_id || ')');
SELECT rev.checksum('dim') = :'after_delete' AS unchanged;
ROLLBACK;
SELECT rev.state('dim') = :'state' AS unchanged;

------------------------------------------------------------------------------
-- Revert inside a transaction block: rolled back with it, or committed
-- with it; two loads in one transaction are two runs, reverted newest
-- first.
------------------------------------------------------------------------------
BEGIN;
SELECT scd2.revert(:apply_run) > :apply_run AS revert_run_id_is_new;
SELECT rev.checksum('dim') = :'before_apply' AS restored;
ROLLBACK;
SELECT rev.state('dim') = :'state' AS unchanged, status FROM scd2.audit_log WHERE run_id = :apply_run;

BEGIN;
TRUNCATE stg;
INSERT INTO stg VALUES (6, 'Cairo', 'f', '666', '2024-11-15', false);
SELECT count(*) FROM scd2.merge('stg', 'dim');
TRUNCATE stg;
INSERT INTO stg VALUES (6, 'Giza', 'f', '666', '2024-11-20', false);
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT array_agg(run_id ORDER BY run_id) AS two_runs FROM scd2.change_log_runs
 WHERE run_id > :apply_run AND dimension = 'dim'::regclass \gset
SELECT rev.try('SELECT scd2.revert(' || (:'two_runs'::bigint[])[1] || ')');
SELECT scd2.revert((:'two_runs'::bigint[])[2]) IS NOT NULL AS reverted_second;
SELECT scd2.revert((:'two_runs'::bigint[])[1]) IS NOT NULL AS reverted_first;
SELECT scd2.revert(:apply_run) IS NOT NULL AS reverted_apply;
COMMIT;
SELECT rev.checksum('dim') = :'before_apply' AS restored;
SELECT status FROM scd2.audit_log
 WHERE run_id = ANY (:'two_runs'::bigint[] || :apply_run::bigint) ORDER BY run_id;
-- the revert's own audit row
SELECT status, dimension, staging, inserted, new_versions, closed,
       regexp_replace(message, '[0-9]+', 'N') AS message
  FROM scd2.audit_log WHERE run_id = (SELECT reverted_by FROM scd2.change_log_runs WHERE run_id = :apply_run);

------------------------------------------------------------------------------
-- Privileges: a revert needs what a load needs and DELETE; the change log
-- itself is not readable by PUBLIC, scd2.changes needs SELECT on the
-- dimension.
------------------------------------------------------------------------------
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'Naples', 'bb', '888', '2024-11-25', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT :run_id AS last_run \gset
CREATE ROLE scd2_rev_user;
GRANT USAGE ON SCHEMA rev TO scd2_rev_user;
GRANT SELECT, INSERT, UPDATE ON dim TO scd2_rev_user;
SELECT rev.state('dim') AS state \gset
SET ROLE scd2_rev_user;
SELECT scd2.revert(:last_run);
SELECT count(*) FROM scd2.change_log;
SELECT count(*) AS visible_runs FROM scd2.change_log_runs WHERE run_id = :last_run;
SELECT count(*) AS feed_rows FROM scd2.changes(:last_run);
RESET ROLE;
REVOKE SELECT ON dim FROM scd2_rev_user;
SET ROLE scd2_rev_user;
SELECT rev.try('SELECT scd2.changes(' || :last_run || ')');
RESET ROLE;
SELECT rev.state('dim') = :'state' AS unchanged;
GRANT SELECT, DELETE ON dim TO scd2_rev_user;
-- the dimension's code (a trigger here) runs as its owner, not as the
-- role that reverts
CREATE TABLE rev.who (u name, op text);
CREATE FUNCTION rev.note_who() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO rev.who VALUES (current_user, TG_OP);
    RETURN NULL;
END $$;
CREATE TRIGGER note_who AFTER DELETE OR UPDATE ON dim FOR EACH ROW EXECUTE FUNCTION rev.note_who();
SET ROLE scd2_rev_user;
SELECT scd2.revert(:last_run) IS NOT NULL AS reverted_by_user;
RESET ROLE;
SELECT DISTINCT op, u = (SELECT relowner::regrole::name FROM pg_class WHERE oid = 'dim'::regclass) AS as_owner
  FROM rev.who ORDER BY op;
DROP TRIGGER note_who ON dim;
SET ROLE scd2_rev_user;
SELECT scd2.prune_change_log('0', 'dim');
RESET ROLE;
REVOKE ALL ON dim FROM scd2_rev_user;
REVOKE ALL ON SCHEMA rev FROM scd2_rev_user;
DROP ROLE scd2_rev_user;

------------------------------------------------------------------------------
-- The change log off (SET scd2.change_log = off): the run is recorded,
-- but cannot be reverted; a later logged run can.
------------------------------------------------------------------------------
TRUNCATE stg;
INSERT INTO stg VALUES (7, 'Accra', 'g', '777', '2024-12-01', false);
SET scd2.change_log = off;
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
RESET scd2.change_log;
SELECT :run_id AS unlogged_run \gset
SELECT logged FROM scd2.change_log_runs WHERE run_id = :unlogged_run;
SELECT count(*) FROM scd2.change_log WHERE run_id = :unlogged_run;
SELECT rev.try('SELECT scd2.revert(' || :unlogged_run || ')');
SELECT rev.try('SELECT scd2.changes(' || :unlogged_run || ')');
-- a later logged run is the newest load, and reverts
TRUNCATE stg;
INSERT INTO stg VALUES (7, 'Tema', 'g', '777', '2024-12-10', false);
SELECT rev.checksum('dim') AS before_logged \gset
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT scd2.revert(:run_id) IS NOT NULL AS reverted;
SELECT rev.checksum('dim') = :'before_logged' AS restored;
SELECT rev.try('SELECT scd2.revert(' || :unlogged_run || ')');

------------------------------------------------------------------------------
-- Retention: prune_change_log deletes the change log of old runs; a pruned
-- run can no longer be reverted, and revert says so.
------------------------------------------------------------------------------
TRUNCATE stg;
INSERT INTO stg VALUES (7, 'Kumasi', 'g', '777', '2024-12-15', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT :run_id AS pruned_run \gset
SELECT scd2.prune_change_log('1 day');
-- (logged by surrogate keys: a batch of new versions and closes)
SELECT (SELECT count(*) FROM scd2.change_log WHERE run_id = :pruned_run)
       + (SELECT count(*) FROM scd2.change_log_batches WHERE run_id = :pruned_run) > 0 AS has_rows;
SELECT rev.try('SELECT scd2.prune_change_log(NULL)');
SELECT rev.try('SELECT scd2.prune_change_log(''-1 day'')');
SELECT scd2.prune_change_log('0', 'stg');
BEGIN;
-- now() is the transaction's start: runs logged before it are pruned
SELECT scd2.prune_change_log('0', 'dim') > 0 AS pruned_some;
COMMIT;
SELECT count(*) AS rows_left FROM scd2.change_log c JOIN scd2.change_log_runs r USING (run_id)
 WHERE r.dimension = 'dim'::regclass;
SELECT pruned_at IS NOT NULL AS pruned FROM scd2.change_log_runs WHERE run_id = :pruned_run;
SELECT rev.state('dim') AS state \gset
SELECT regexp_replace(rev.try('SELECT scd2.revert(' || :pruned_run || ')'), ' at .*;', ' at T;');
SELECT regexp_replace(rev.try('SELECT scd2.changes(' || :pruned_run || ')'), ' at .*;', ' at T;');
SELECT rev.state('dim') = :'state' AS unchanged;
-- other dimensions' change logs are kept
SELECT count(*) > 0 AS kept FROM scd2.change_log c JOIN scd2.change_log_runs r USING (run_id)
 WHERE r.dimension = 'dim_d'::regclass;
