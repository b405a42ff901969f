-- The first load into an empty dimension (load_first.c): one INSERT in key
-- order, scd2's indexes built after it from 10000 rows on.  It must leave
-- exactly what the general path leaves: rows, metrics, audit row, change
-- log, change feed; the indexes afterwards have the same names and
-- definitions; a refused first load writes nothing and leaves the indexes
-- as they were; a rolled-back one too.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA first;
SET search_path = first, public;

-- 20000 staging rows, one per key, in no particular order, NULLs included;
-- every 1000th row carries the delete marker (a new key deleted: nothing).
CREATE TABLE stg (id int, name text, city text, score numeric(6,2), gone boolean);
INSERT INTO stg
SELECT k, 'n' || k, CASE WHEN k % 7 = 0 THEN NULL ELSE 'c' || (k % 13) END,
       CASE WHEN k % 11 = 0 THEN NULL ELSE k % 1000 / 10.0 END, k % 1000 = 0
  FROM generate_series(1, 20000) k ORDER BY hashint4(k);

-- dim: takes the first-load path.  twin: the same registration, but a
-- (harmless) BEFORE INSERT trigger sends its loads down the general path.
SELECT scd2.create_dimension('dim', 'stg', ARRAY['id'], delete_column => 'gone');
SELECT scd2.create_dimension('twin', 'stg', ARRAY['id'], delete_column => 'gone');
CREATE FUNCTION keep_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER keep_row BEFORE INSERT ON twin FOR EACH ROW EXECUTE FUNCTION keep_row();

-- The indexes before: scd2's two, and the surrogate key's primary key.
CREATE TEMP TABLE idx_before AS
SELECT c.relname::text AS name, c.oid AS idx_oid,
       replace(pg_get_indexdef(c.oid), 'twin', 'dim') AS def, i.indrelid::regclass::text AS tbl
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid IN ('dim'::regclass, 'twin'::regclass);
SELECT tbl, name, def FROM idx_before WHERE tbl = 'dim' ORDER BY name;
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim'::regclass;

-- 1. A first load that is refused writes nothing and leaves the indexes.
--    a) ambiguous duplicates (they go the general way, which refuses them)
INSERT INTO stg VALUES (5, 'other', NULL, NULL, false);
CALL scd2.apply('stg', 'dim', '2024-01-01', NULL) \gset
DELETE FROM stg WHERE id = 5 AND name = 'other';
--    b) a row the dimension's CHECK constraint refuses, found by the
--       INSERT itself -- after the first load dropped scd2's indexes
ALTER TABLE dim ADD CONSTRAINT no_bad CHECK (name <> 'bad');
UPDATE stg SET name = 'bad' WHERE id = 19999;
CALL scd2.apply('stg', 'dim', '2024-01-01', NULL) \gset
UPDATE stg SET name = 'n19999' WHERE id = 19999;
ALTER TABLE dim DROP CONSTRAINT no_bad;
SELECT count(*) AS dim_rows FROM dim;
SELECT count(*) AS audit_rows FROM scd2.audit_log WHERE dimension = 'first.dim';
SELECT i.name, i.idx_oid = c.oid AS same_index, i.def = pg_get_indexdef(c.oid) AS same_definition
  FROM idx_before i LEFT JOIN pg_class c ON c.relname = i.name AND c.relnamespace = 'first'::regnamespace
 WHERE i.tbl = 'dim' ORDER BY i.name;

-- 2. A first load in a transaction that is rolled back: it locks the empty
--    dimension against readers while it runs (DROP INDEX), and leaves
--    nothing behind.
BEGIN;
CALL scd2.apply('stg', 'dim', '2024-01-01', NULL) \gset
SELECT mode FROM pg_locks WHERE relation = 'dim'::regclass AND locktype = 'relation'
   AND pid = pg_backend_pid() ORDER BY mode;
SELECT count(*) AS dim_rows_inside FROM dim;
ROLLBACK;
SELECT count(*) AS dim_rows FROM dim;
SELECT i.name, i.idx_oid = c.oid AS same_index
  FROM idx_before i LEFT JOIN pg_class c ON c.relname = i.name AND c.relnamespace = 'first'::regnamespace
 WHERE i.tbl = 'dim' ORDER BY i.name;

-- 3. The first load, and the same load down the general path.
CREATE TEMP TABLE feed AS SELECT * FROM scd2.merge('stg', 'dim', '2024-01-01');
SELECT * FROM scd2_test.last_metrics('dim');
CREATE TEMP TABLE feed_twin AS SELECT * FROM scd2.merge('stg', 'twin', '2024-01-01');
SELECT * FROM scd2_test.last_metrics('twin');
SELECT scd2_test.metrics_match_feed('dim'), scd2_test.invariants('dim');
-- same rows (the surrogate keys differ: the loads refused and rolled back
-- above used up values of dim's identity sequence; both paths write in key
-- order, so the surrogate keys ascend with the key)
SELECT count(*) AS differences FROM (
  (SELECT id, name, city, score, valid_from, valid_to, is_current FROM dim
   EXCEPT SELECT id, name, city, score, valid_from, valid_to, is_current FROM twin)
  UNION ALL
  (SELECT id, name, city, score, valid_from, valid_to, is_current FROM twin
   EXCEPT SELECT id, name, city, score, valid_from, valid_to, is_current FROM dim)) d;
SELECT t, count(*) AS rows, bool_and(by_sk = by_id) AS sk_in_key_order FROM (
  SELECT 'dim' AS t, row_number() OVER (ORDER BY sk) AS by_sk, row_number() OVER (ORDER BY id) AS by_id FROM dim
  UNION ALL
  SELECT 'twin', row_number() OVER (ORDER BY sk), row_number() OVER (ORDER BY id) FROM twin) x
 GROUP BY t ORDER BY t;
-- same change feed, in the same order
SELECT count(*) AS feed_rows, min(action), max(action) FROM feed;
SELECT count(*) AS feed_differences FROM (
  SELECT row_number() OVER () AS n, f.* FROM feed f) a
  FULL JOIN (SELECT row_number() OVER () AS n, f.* FROM feed_twin f) b
    ON a.n = b.n AND a.action = b.action
   AND a.business_key = b.business_key AND a.valid_from = b.valid_from
   AND a.valid_to IS NOT DISTINCT FROM b.valid_to
 WHERE a.n IS NULL OR b.n IS NULL;
-- the feed's surrogate keys are the rows'
SELECT count(*) AS feed_rows_with_their_sk FROM feed f JOIN dim d
    ON d.sk = f.surrogate_key AND d.id = (f.business_key->>'id')::int;
-- same audit row (but for the dimension)
SELECT (SELECT row(status, source_rows, inserted, new_versions, closed, deleted, shortened,
                   type1_updated, unchanged, duplicates, effective_at)
          FROM scd2.audit_log WHERE dimension = 'first.dim' ORDER BY run_id DESC LIMIT 1)
     = (SELECT row(status, source_rows, inserted, new_versions, closed, deleted, shortened,
                   type1_updated, unchanged, duplicates, effective_at)
          FROM scd2.audit_log WHERE dimension = 'first.twin' ORDER BY run_id DESC LIMIT 1) AS same_audit;
-- the change log: the first load's is its header alone (first_load_rows,
-- every row the dimension has), the twin's one row per version; the same
-- feed read back from either, in the same order
SELECT (SELECT run_id FROM scd2.audit_log WHERE dimension = 'first.dim' ORDER BY run_id DESC LIMIT 1) AS run_dim,
       (SELECT run_id FROM scd2.audit_log WHERE dimension = 'first.twin' ORDER BY run_id DESC LIMIT 1) AS run_twin \gset
SELECT (SELECT count(*) FROM scd2.change_log WHERE run_id = :run_dim) AS log_rows,
       (SELECT first_load_rows FROM scd2.change_log_runs WHERE run_id = :run_dim) AS first_load_rows,
       (SELECT count(*) FROM scd2.change_log WHERE run_id = :run_twin) AS twin_log_rows,
       (SELECT first_load_rows FROM scd2.change_log_runs WHERE run_id = :run_twin) AS twin_first_load_rows;
SELECT count(*) AS changes_differences
  FROM scd2.changes(:run_dim) WITH ORDINALITY a
  FULL JOIN scd2.changes(:run_twin) WITH ORDINALITY b
    ON a.ordinality = b.ordinality AND a.action = b.action AND a.business_key = b.business_key
   AND a.valid_from = b.valid_from AND a.valid_to IS NOT DISTINCT FROM b.valid_to
 WHERE a.ordinality IS NULL OR b.ordinality IS NULL;
SELECT (SELECT count(*) FROM scd2.changes(:run_dim)) AS changes_rows,
       (SELECT count(*) FROM (SELECT * FROM scd2.changes(:run_dim) EXCEPT SELECT * FROM feed) x) AS changes_not_in_feed;

-- 4. The indexes afterwards: the same names and definitions, built anew
--    (scd2's two) or kept up to date (the primary key).
SELECT i.name, c.oid IS NOT NULL AS exists, i.idx_oid <> c.oid AS rebuilt,
       i.def = pg_get_indexdef(c.oid) AS same_definition, x.indisvalid, x.indisready
  FROM idx_before i LEFT JOIN pg_class c ON c.relname = i.name AND c.relnamespace = 'first'::regnamespace
  LEFT JOIN pg_index x ON x.indexrelid = c.oid
 WHERE i.tbl = 'dim' ORDER BY i.name;
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
-- the current-row index still refuses a second current version
INSERT INTO dim (id, name, valid_from) VALUES (1, 'dup', '2024-06-01');

-- 5. scd2.asof right after the first load: in this session, in its
--    transaction, and in another session.
SELECT scd2.asof('dim', '2024-01-02', 42) = (SELECT sk FROM dim WHERE id = 42) AS asof_here,
       scd2.asof('dim', '2023-12-31', 42) IS NULL AS asof_before;
SELECT count(*) AS asof_found FROM generate_series(1, 20000) k
 WHERE scd2.asof('dim', '2024-01-02', k) IS NOT NULL;
SELECT scd2.create_dimension('dim2', 'stg', ARRAY['id'], delete_column => 'gone');
BEGIN;
CALL scd2.apply('stg', 'dim2', '2024-01-01', NULL) \gset
SELECT scd2.asof('dim2', '2024-01-02', 7) = (SELECT sk FROM dim2 WHERE id = 7) AS asof_in_transaction;
COMMIT;
\c
SET client_min_messages = warning;
SET search_path = first, public;
SET TimeZone = 'UTC';
SELECT scd2.asof('dim2', '2024-01-02', 7) = (SELECT sk FROM dim2 WHERE id = 7) AS asof_other_session;
SELECT count(*) AS asof_found FROM generate_series(1, 20000) k
 WHERE scd2.asof('dim2', '2024-01-02', k) IS NOT NULL;

-- 6. The next load of the dimension is an ordinary one.
UPDATE stg SET city = 'moved' WHERE id <= 3;
CALL scd2.apply('stg', 'dim', '2024-02-01', NULL) \gset
SELECT * FROM scd2_test.last_metrics('dim');
SELECT scd2_test.invariants('dim');
UPDATE stg SET city = 'c' || id WHERE id <= 3;

-- 7. A small first load, and one with scd2.first_load_rebuild_indexes =
--    off: the indexes are kept (and kept up to date); the rows are the same.
SELECT scd2.create_dimension('small', 'stg', ARRAY['id'], delete_column => 'gone');
CREATE TEMP TABLE small_before AS
SELECT c.relname::text AS name, c.oid AS idx_oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'small'::regclass;
CREATE TEMP TABLE stg_small AS SELECT * FROM stg WHERE id <= 100;
CALL scd2.apply('stg_small', 'small', '2024-01-01', NULL) \gset
SELECT * FROM scd2_test.last_metrics('small');
SELECT b.name, b.idx_oid = c.oid AS same_index FROM small_before b
  LEFT JOIN pg_class c ON c.relname = b.name AND c.relnamespace = 'first'::regnamespace ORDER BY b.name;
SELECT scd2.create_dimension('kept', 'stg', ARRAY['id'], delete_column => 'gone');
CREATE TEMP TABLE kept_before AS
SELECT c.relname::text AS name, c.oid AS idx_oid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid = 'kept'::regclass;
BEGIN;
SET LOCAL scd2.first_load_rebuild_indexes = off;
CALL scd2.apply('stg', 'kept', '2024-01-01', NULL) \gset
SELECT mode FROM pg_locks WHERE relation = 'kept'::regclass AND locktype = 'relation'
   AND pid = pg_backend_pid() ORDER BY mode;
COMMIT;
SELECT b.name, b.idx_oid = c.oid AS same_index FROM kept_before b
  LEFT JOIN pg_class c ON c.relname = b.name AND c.relnamespace = 'first'::regnamespace ORDER BY b.name;
SELECT count(*) AS differences FROM (
  (SELECT id, name, city, score, valid_from, valid_to, is_current FROM kept
   EXCEPT SELECT id, name, city, score, valid_from, valid_to, is_current FROM twin)
  UNION ALL
  (SELECT id, name, city, score, valid_from, valid_to, is_current FROM twin
   EXCEPT SELECT id, name, city, score, valid_from, valid_to, is_current FROM kept)) d;

-- 8. A dry run of a first load writes nothing (the general path answers).
SELECT scd2.create_dimension('dry', 'stg', ARRAY['id'], delete_column => 'gone');
SELECT count(*) AS dry_feed_rows FROM scd2.merge('stg', 'dry', '2024-01-01', dry_run => true);
SELECT count(*) AS dry_rows FROM dry;

-- 9. A revert of the first load empties the dimension again.
SELECT (SELECT run_id FROM scd2.audit_log WHERE dimension = 'first.small' ORDER BY run_id DESC LIMIT 1) AS run_small \gset
SELECT scd2.revert(:run_small) > :run_small AS reverted;
SELECT count(*) AS small_rows FROM small;

-- 10. No surrogate key, no is_current, current rows valid to 'infinity',
--     an effective column: the same rows, feed and change log as the
--     general path.
CREATE TABLE stg_inf (id int, name text, changed_at timestamptz);
INSERT INTO stg_inf SELECT k, 'n' || k, '2024-01-01'::timestamptz + k * interval '1 hour'
  FROM generate_series(1, 50) k ORDER BY hashint4(k);
CREATE TABLE inf (id int NOT NULL, name text, valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL);
CREATE TABLE inf_twin (LIKE inf);
SELECT scd2.register('inf', ARRAY['id'], effective_column => 'changed_at', current_valid_to => 'infinity');
SELECT scd2.register('inf_twin', ARRAY['id'], effective_column => 'changed_at', current_valid_to => 'infinity');
CREATE TRIGGER keep_row BEFORE INSERT ON inf_twin FOR EACH ROW EXECUTE FUNCTION keep_row();
CREATE TEMP TABLE feed_inf AS SELECT * FROM scd2.merge('stg_inf', 'inf');
CREATE TEMP TABLE feed_inf_twin AS SELECT * FROM scd2.merge('stg_inf', 'inf_twin');
SELECT * FROM inf ORDER BY id LIMIT 3;
SELECT count(*) AS differences FROM ((TABLE inf EXCEPT TABLE inf_twin) UNION ALL (TABLE inf_twin EXCEPT TABLE inf)) d;
SELECT * FROM feed_inf LIMIT 3;
SELECT count(*) AS feed_differences FROM (
  SELECT row_number() OVER () AS n, f.* FROM feed_inf f) a
  FULL JOIN (SELECT row_number() OVER () AS n, f.* FROM feed_inf_twin f) b
    ON a.n = b.n AND a.action = b.action AND a.surrogate_key IS NULL AND b.surrogate_key IS NULL
   AND a.business_key = b.business_key AND a.valid_from = b.valid_from AND a.valid_to = b.valid_to
 WHERE a.n IS NULL OR b.n IS NULL;
SELECT (SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'first.inf') AS run_inf,
       (SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'first.inf_twin') AS run_inf_twin \gset
SELECT count(*) AS changes_differences
  FROM scd2.changes(:run_inf) WITH ORDINALITY a
  FULL JOIN scd2.changes(:run_inf_twin) WITH ORDINALITY b
    ON a.ordinality = b.ordinality AND a.action = b.action AND a.surrogate_key IS NULL AND b.surrogate_key IS NULL
   AND a.business_key = b.business_key AND a.valid_from = b.valid_from AND a.valid_to = b.valid_to
 WHERE a.ordinality IS NULL OR b.ordinality IS NULL;
-- reverted, the first load's change log holds the twin's rows
SELECT scd2.revert(:run_inf) > 0 AS reverted_inf, scd2.revert(:run_inf_twin) > 0 AS reverted_twin;
SELECT (SELECT first_load_rows FROM scd2.change_log_runs WHERE run_id = :run_inf) AS first_load_rows,
       (SELECT count(*) FROM inf) AS inf_rows;
SELECT count(*) AS log_differences FROM (
  (SELECT action, inserted, surrogate_key, business_key, valid_from, valid_to FROM scd2.change_log
    WHERE run_id = :run_inf
   EXCEPT ALL
   SELECT action, inserted, surrogate_key, business_key, valid_from, valid_to FROM scd2.change_log
    WHERE run_id = :run_inf_twin)
  UNION ALL
  (SELECT action, inserted, surrogate_key, business_key, valid_from, valid_to FROM scd2.change_log
    WHERE run_id = :run_inf_twin
   EXCEPT ALL
   SELECT action, inserted, surrogate_key, business_key, valid_from, valid_to FROM scd2.change_log
    WHERE run_id = :run_inf)) d;

-- 11. Without a delete column, the dimension's unique index on the key
--     stands for the check that every key has one staging row: a key with
--     two rows (two instants: history) makes the first load roll back and
--     take the general path.  Rows, metrics and audit row are the twin's;
--     the indexes are the ones from before, whether the first load had
--     dropped them to build them again (20,001 rows) or kept them (101);
--     no trace of the attempt (one audit row, one run).
CREATE TABLE stg_rep (id int, name text, changed_at timestamptz);
INSERT INTO stg_rep SELECT k, 'n' || k, '2024-01-01' FROM generate_series(1, 20000) k ORDER BY hashint4(k);
INSERT INTO stg_rep VALUES (77, 'later', '2024-03-01');
CREATE TABLE stg_rep_small AS SELECT * FROM stg_rep WHERE id <= 100;
CREATE TABLE rep (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, name text,
                  valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE rep_small (LIKE rep INCLUDING IDENTITY);
CREATE TABLE rep_twin (LIKE rep INCLUDING IDENTITY);
SELECT scd2.register('rep', ARRAY['id'], effective_column => 'changed_at', surrogate_key_column => 'sk');
SELECT scd2.register('rep_small', ARRAY['id'], effective_column => 'changed_at', surrogate_key_column => 'sk',
                     order_free => false);
SELECT scd2.register('rep_twin', ARRAY['id'], effective_column => 'changed_at', surrogate_key_column => 'sk');
CREATE TRIGGER keep_row BEFORE INSERT ON rep_twin FOR EACH ROW EXECUTE FUNCTION keep_row();
CREATE TEMP TABLE rep_before AS
SELECT i.indrelid::regclass::text AS tbl, c.relname::text AS name, c.oid AS idx_oid
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE i.indrelid IN ('rep'::regclass, 'rep_small'::regclass);
CALL scd2.apply('stg_rep', 'rep') \gset
CALL scd2.apply('stg_rep', 'rep_twin') \gset
CALL scd2.apply('stg_rep_small', 'rep_small') \gset
SELECT * FROM scd2_test.last_metrics('rep');
SELECT * FROM scd2_test.last_metrics('rep_twin');
SELECT * FROM scd2_test.last_metrics('rep_small');
SELECT scd2_test.invariants('rep'), scd2_test.invariants('rep_small');
SELECT count(*) AS differences FROM (
  (SELECT id, name, valid_from, valid_to FROM rep EXCEPT SELECT id, name, valid_from, valid_to FROM rep_twin)
  UNION ALL
  (SELECT id, name, valid_from, valid_to FROM rep_twin EXCEPT SELECT id, name, valid_from, valid_to FROM rep)) d;
SELECT id, name, valid_from, valid_to FROM rep WHERE id = 77 ORDER BY valid_from;
SELECT id, name, valid_from, valid_to FROM rep_small WHERE id = 77 ORDER BY valid_from;
SELECT b.tbl, b.name, b.idx_oid = c.oid AS same_index FROM rep_before b
  LEFT JOIN pg_class c ON c.relname = b.name AND c.relnamespace = 'first'::regnamespace ORDER BY b.tbl, b.name;
SELECT dimension, count(*) AS audit_rows FROM scd2.audit_log
 WHERE dimension IN ('first.rep', 'first.rep_small') GROUP BY dimension ORDER BY dimension;
SELECT count(*) AS runs FROM scd2.change_log_runs WHERE dimension IN ('rep'::regclass, 'rep_small'::regclass);
--     one row per key: the first load itself (a run with first_load_rows)
CREATE TABLE rep_one (LIKE rep INCLUDING IDENTITY);
SELECT scd2.register('rep_one', ARRAY['id'], effective_column => 'changed_at', surrogate_key_column => 'sk');
DELETE FROM stg_rep WHERE name = 'later';
CALL scd2.apply('stg_rep', 'rep_one') \gset
SELECT first_load_rows FROM scd2.change_log_runs WHERE dimension = 'rep_one'::regclass;
--     a unique violation that is not a repeated key (a user's own unique
--     index) is the load's error after the general path, nothing written
CREATE TABLE rep_u (LIKE rep INCLUDING IDENTITY);
CREATE UNIQUE INDEX rep_u_name ON rep_u (name);
SELECT scd2.register('rep_u', ARRAY['id'], effective_column => 'changed_at', surrogate_key_column => 'sk');
UPDATE stg_rep SET name = 'same' WHERE id IN (5, 6);
CALL scd2.apply('stg_rep', 'rep_u') \gset
SELECT count(*) AS rep_u_rows FROM rep_u;
SELECT count(*) AS rep_u_runs FROM scd2.change_log_runs WHERE dimension = 'rep_u'::regclass;

SET client_min_messages = warning;
DROP SCHEMA first CASCADE;
