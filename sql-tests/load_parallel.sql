-- The fast path's probes in key order, in parallel (fast_path_plan.c):
-- with parallel query made cheap, a batch's staging rows are sorted in the
-- workers under the probes of the current-row index, below a Gather Merge,
-- and the new versions' surrogate keys are drawn after parallel mode ends.
-- Every kind of row -- new, changed, Type 1, deleted, unchanged, returning,
-- late -- gives the same rows, surrogate keys, metrics and change log as the
-- same loads run serially, on a plain and on an order-free dimension; a
-- revert of a parallel load restores the dimension.
SET TimeZone = 'UTC';
CREATE SCHEMA par;
SET search_path = par, public;

CREATE TABLE st (k int, r text, a text, b numeric, t1 text, del boolean);
CREATE TABLE dp (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k int NOT NULL, r text NOT NULL,
                 a text, b numeric, t1 text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                 is_current boolean NOT NULL DEFAULT true);
CREATE TABLE ds (LIKE dp INCLUDING ALL INCLUDING IDENTITY);
SELECT scd2.register(d, ARRAY['k', 'r'], tracked => ARRAY['a', 'b'], type1 => ARRAY['t1'],
                     delete_column => 'del', surrogate_key_column => 'sk',
                     is_current_column => 'is_current')
  FROM unnest(ARRAY['dp', 'ds']::regclass[]) AS d;

-- par_settings(parallel): parallel query made cheap for what follows, or turned off
CREATE FUNCTION par_settings(parallel boolean) RETURNS void LANGUAGE sql AS $$
  SELECT set_config('max_parallel_workers_per_gather', CASE WHEN parallel THEN '2' ELSE '0' END, false),
         set_config('parallel_setup_cost', '0', false),
         set_config('parallel_tuple_cost', '0', false),
         set_config('min_parallel_table_scan_size', '0', false);
$$;
-- the two dimensions' rows, surrogate keys included, and their loads' metrics, side by side
CREATE FUNCTION differences() RETURNS TABLE (same_rows boolean, same_metrics boolean)
LANGUAGE sql AS $$
  SELECT scd2_test.checksum('dp') = scd2_test.checksum('ds'),
         (SELECT array_agg(ROW(status, source_rows, inserted, new_versions, closed, deleted, type1_updated, unchanged)::text ORDER BY run_id)
            FROM scd2.audit_log WHERE dimension = 'par.dp')
         IS NOT DISTINCT FROM
         (SELECT array_agg(ROW(status, source_rows, inserted, new_versions, closed, deleted, type1_updated, unchanged)::text ORDER BY run_id)
            FROM scd2.audit_log WHERE dimension = 'par.ds');
$$;

-- 400 keys, then analyzed: a batch of fewer rows than half of them is probed
INSERT INTO st SELECT g, 'EU', 'a' || g, g, 'x', false FROM generate_series(1, 400) g;
CALL scd2.apply('st', 'dp', effective_at => '2026-01-01', run_id => NULL) \gset
CALL scd2.apply('st', 'ds', effective_at => '2026-01-01', run_id => NULL) \gset
ANALYZE dp;
ANALYZE ds;

-- a batch of every kind: changed, Type 1, deleted, unchanged, changed to NULL, new
TRUNCATE st;
INSERT INTO st SELECT g, 'EU', CASE WHEN g % 5 = 0 THEN 'b' || g ELSE 'a' || g END,
                      CASE WHEN g % 5 = 4 THEN NULL ELSE g END,
                      CASE WHEN g % 5 = 1 THEN 'y' ELSE 'x' END, g % 5 = 2
                 FROM generate_series(1, 150) g
               UNION ALL SELECT g, 'EU', 'n' || g, g, 'x', false FROM generate_series(401, 420) g;
ANALYZE st;
SELECT par_settings(true) \gset
SET scd2.explain_statement = 'classifying staging rows';
CALL scd2.apply('st', 'dp', effective_at => '2026-02-01', run_id => NULL) \gset
RESET scd2.explain_statement;
SELECT par_settings(false) \gset
CALL scd2.apply('st', 'ds', effective_at => '2026-02-01', run_id => NULL) \gset
SELECT * FROM differences();

-- the deleted keys return; then a row earlier than its key's current version (late: the general way)
TRUNCATE st;
INSERT INTO st SELECT g, 'EU', 'r' || g, g, 'x', false FROM generate_series(2, 150, 5) g;
SELECT par_settings(true) \gset
CALL scd2.apply('st', 'dp', effective_at => '2026-03-01', run_id => NULL) \gset
SELECT par_settings(false) \gset
CALL scd2.apply('st', 'ds', effective_at => '2026-03-01', run_id => NULL) \gset
INSERT INTO st VALUES (10, 'EU', 'late', 10, 'x', false);
DELETE FROM st WHERE k <> 10 OR a <> 'late';
SELECT par_settings(true) \gset
CALL scd2.apply('st', 'dp', effective_at => '2026-01-15', run_id => NULL) \gset
SELECT par_settings(false) \gset
CALL scd2.apply('st', 'ds', effective_at => '2026-01-15', run_id => NULL) \gset
SELECT * FROM differences();
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to IS NULL) AS current,
       scd2_test.invariants('dp', 'k::text || r') AS invariants FROM dp;

-- the change log of a parallel load has the surrogate keys drawn after it: its revert restores the dimension
SELECT scd2_test.checksum('dp') AS before_revert \gset
TRUNCATE st;
INSERT INTO st SELECT g, 'EU', 'c' || g, g, 'x', false FROM generate_series(1, 100) g
               UNION ALL SELECT g, 'EU', 'n' || g, g, 'x', false FROM generate_series(421, 440) g;
SELECT par_settings(true) \gset
CALL scd2.apply('st', 'dp', effective_at => '2026-04-01', run_id => NULL) \gset
SET client_min_messages = warning;	-- the NOTICE names the run
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'par.dp')) > 0 AS reverted;
RESET client_min_messages;
SELECT scd2_test.checksum('dp') = :'before_revert' AS restored;

-- an order-free dimension: in-order events on the fast path, its observations remembered alike
CREATE TABLE so (k int, a text, eff date, del boolean);
CREATE TABLE op (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, valid_from date, valid_to date, is_current boolean);
CREATE TABLE os (LIKE op INCLUDING IDENTITY);
SELECT scd2.register(d, ARRAY['k'], tracked => ARRAY['a'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true)
  FROM unnest(ARRAY['op', 'os']::regclass[]) AS d;
INSERT INTO so SELECT g, 'a', '2026-01-01', false FROM generate_series(1, 400) g;
SELECT par_settings(false) \gset
CALL scd2.apply('so', 'op', now(), NULL) \gset
CALL scd2.apply('so', 'os', now(), NULL) \gset
ANALYZE op;
ANALYZE os;
TRUNCATE so;
INSERT INTO so SELECT g, CASE WHEN g % 3 = 0 THEN 'b' ELSE 'a' END, '2026-02-01', g % 7 = 0
                 FROM generate_series(1, 150) g;
ANALYZE so;
SELECT par_settings(true) \gset
SET scd2.explain_statement = 'classifying staging rows';
CALL scd2.apply('so', 'op', now(), NULL) \gset
RESET scd2.explain_statement;
SELECT par_settings(false) \gset
CALL scd2.apply('so', 'os', now(), NULL) \gset
SELECT scd2_test.checksum('op') = scd2_test.checksum('os') AS same_rows,
       (SELECT count(*) FROM scd2.arrival_memory WHERE dimension = 'op'::regclass) AS remembered,
       (SELECT count(*) FROM (SELECT business_key, effective, present, state, versions, dropped_by IS NULL
                                FROM scd2.arrival_memory WHERE dimension = 'op'::regclass
                              EXCEPT ALL SELECT business_key, effective, present, state, versions, dropped_by IS NULL
                                FROM scd2.arrival_memory WHERE dimension = 'os'::regclass) x) AS memory_only_parallel;

-- user code PostgreSQL may not run in a worker runs in the leader, above
-- the Gather Merge: a domain's check (parallel restricted) on a column the
-- staging rows are cast to; it runs as the dimension's owner, as in a
-- serial load
CREATE ROLE par_owner;
CREATE FUNCTION seen(v text) RETURNS boolean LANGUAGE plpgsql STABLE PARALLEL SAFE AS $$
BEGIN
    IF v = 'probe' THEN
        RAISE NOTICE 'checked as %, in a worker: %', current_user,
            pg_backend_pid()::text <> current_setting('par.leader');
    END IF;
    RETURN true;
END $$;
CREATE DOMAIN checked AS text CHECK (seen(VALUE));
CREATE TABLE sw (k int, a text);
CREATE TABLE dw (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a checked,
                 valid_from timestamptz, valid_to timestamptz, is_current boolean);
ALTER TABLE dw OWNER TO par_owner;
GRANT USAGE ON SCHEMA par TO par_owner;
GRANT SELECT ON sw TO par_owner;
SELECT scd2.register('dw', ARRAY['k'], is_current_column => 'is_current', surrogate_key_column => 'sk');
INSERT INTO sw SELECT g, 'a' FROM generate_series(1, 400) g;
SELECT par_settings(false) \gset
CALL scd2.apply('sw', 'dw', effective_at => '2026-01-01', run_id => NULL) \gset
ANALYZE dw;
TRUNCATE sw;
INSERT INTO sw SELECT g, CASE WHEN g = 7 THEN 'probe' ELSE 'a' END FROM generate_series(1, 150) g;
ANALYZE sw;
SELECT par_settings(true) \gset
SELECT set_config('par.leader', pg_backend_pid()::text, false) \gset
SET scd2.explain_statement = 'classifying staging rows';
CALL scd2.apply('sw', 'dw', effective_at => '2026-02-01', run_id => NULL) \gset
RESET scd2.explain_statement;
SELECT k, a, valid_to IS NULL AS current FROM dw WHERE k = 7 ORDER BY valid_from;
DROP TABLE dw;
REVOKE ALL ON SCHEMA par FROM par_owner;
REVOKE ALL ON sw FROM par_owner;
DROP ROLE par_owner;

RESET max_parallel_workers_per_gather;
RESET parallel_setup_cost;
RESET parallel_tuple_cost;
RESET min_parallel_table_scan_size;
DROP SCHEMA par CASCADE;
