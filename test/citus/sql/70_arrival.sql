-- Order-free dimensions on Citus (issue 24): the same events, loaded in
-- effective-time order (one batch per instant) and shuffled into random
-- batches, give the same dimension on a distributed and a reference
-- dimension as on a local one -- versions, arrival memory, metrics, change
-- feeds and change logs -- and a revert of an order-free load restores the
-- dimension and the memory exactly.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
CREATE SCHEMA citus_arrival;
SET search_path = citus_arrival, public;

-- The events of 40 scenarios (as test/arrival/driver.sql makes them: 1-3
-- keys each, days 0-9, upserts of (a, b), deletes, same-instant upsert +
-- delete, exact duplicates), and their shuffled batches (bt).
CREATE TABLE ev (s int, n int, k int, a text, b int, eff date, del boolean, bt int);
DO $$
DECLARE
    nkeys int; nev int; cnt int; day int; nb int; left_ int;
    vals text[] := ARRAY[NULL, '', '~', 'x'];
    r record;
BEGIN
    FOR sc IN 1..40 LOOP
        PERFORM setseed((hashint4(sc)::bigint % 1000000) / 1000000.0);
        nkeys := 1 + floor(random() * 3)::int; cnt := 0; nb := 0; left_ := 0;
        FOR kk IN sc * 10 + 1 .. sc * 10 + nkeys LOOP
            nev := 1 + floor(random() * 5)::int;
            FOR i IN 1..nev LOOP
                day := floor(random() * 10)::int;
                cnt := cnt + 1;
                IF random() < 0.25 THEN
                    INSERT INTO ev VALUES (sc, cnt, kk, NULL, NULL, date '2020-01-01' + day, true);
                ELSIF EXISTS (SELECT FROM ev e WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND NOT e.del) THEN
                    INSERT INTO ev SELECT sc, cnt, e.k, e.a, e.b, e.eff, e.del FROM ev e
                     WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND NOT e.del LIMIT 1;
                ELSE
                    INSERT INTO ev VALUES (sc, cnt, kk, vals[1 + floor(random() * 4)::int],
                                           CASE WHEN random() < 0.5 THEN 1 END, date '2020-01-01' + day, false);
                END IF;
            END LOOP;
        END LOOP;
        FOR r IN SELECT e.n FROM ev e WHERE e.s = sc ORDER BY random() LOOP
            IF left_ = 0 THEN nb := nb + 1; left_ := 1 + floor(random() * 4)::int; END IF;
            UPDATE ev SET bt = nb WHERE s = sc AND n = r.n;
            left_ := left_ - 1;
        END LOOP;
    END LOOP;
END $$;
SELECT count(DISTINCT k) AS keys, count(*) AS events, count(*) FILTER (WHERE del) AS deletes,
       count(DISTINCT eff) AS instants, max(bt) AS shuffled_batches FROM ev;

-- One order-free dimension (and staging table) per shape and batching.
CREATE TABLE pairs (dim text PRIMARY KEY, dim_shape text, stg_shape text, batching text);
INSERT INTO pairs VALUES
  ('local_in', 'local', 'local', 'in order'),
  ('local_sh', 'local', 'local', 'shuffled'),
  ('local_stg_dist_sh', 'local', 'distributed', 'shuffled'),
  ('dist_in', 'distributed', 'local', 'in order'),
  ('dist_sh', 'distributed', 'local', 'shuffled'),
  ('dist_stg_coloc_sh', 'distributed', 'co-located', 'shuffled'),
  ('ref_in', 'reference', 'local', 'in order'),
  ('ref_sh', 'reference', 'local', 'shuffled');
DO $$
DECLARE p record;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    EXECUTE format('CREATE TABLE %I (k int, a text, b int, eff date, del boolean)', 'stg_' || p.dim);
    EXECUTE format('CREATE TABLE %I (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int,'
                   ' valid_from date, valid_to date, is_current boolean)', p.dim);
    PERFORM scd2.register(p.dim::regclass, ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                          delete_column => 'del', is_current_column => 'is_current',
                          surrogate_key_column => 'sk', order_free => true);
    IF p.dim_shape = 'distributed' THEN
      PERFORM create_distributed_table(p.dim, 'k');
    ELSIF p.dim_shape = 'reference' THEN
      PERFORM create_reference_table(p.dim);
    END IF;
    IF p.stg_shape = 'co-located' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'k', colocate_with => p.dim);
    ELSIF p.stg_shape = 'distributed' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'k');
    END IF;
  END LOOP;
END $$;
SELECT p.dim, p.batching, coalesce(d.citus_table_type, 'local') AS dim_type,
       coalesce(s.citus_table_type, 'local') AS stg_type
FROM pairs p
LEFT JOIN citus_tables d ON d.table_name = p.dim::regclass
LEFT JOIN citus_tables s ON s.table_name = ('stg_' || p.dim)::regclass
ORDER BY p.dim;

-- Load: in order, one batch per instant; shuffled, the batches of each
-- rank together; scd2.merge, its feed kept.
CREATE TABLE feeds (dim text, batch int, action text, surrogate_key bigint, business_key jsonb,
                    valid_from timestamptz, valid_to timestamptz);
CREATE TABLE runs (dim text, batch int, run_id bigint);
CREATE PROCEDURE load_all() LANGUAGE plpgsql AS $$
DECLARE p record; b int; r bigint;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    FOR b IN SELECT DISTINCT CASE p.batching WHEN 'in order' THEN e.eff - date '2020-01-01' ELSE e.bt END
               FROM ev e ORDER BY 1 LOOP
      EXECUTE format('DELETE FROM %I', 'stg_' || p.dim);
      EXECUTE format('INSERT INTO %I SELECT e.k, e.a, e.b, e.eff, e.del FROM ev e WHERE %s = %s',
                     'stg_' || p.dim,
                     CASE p.batching WHEN 'in order' THEN $q$e.eff - date '2020-01-01'$q$ ELSE 'e.bt' END, b);
      EXECUTE format('INSERT INTO feeds SELECT %L, %s, * FROM scd2.merge(%L, %L)', p.dim, b, 'stg_' || p.dim, p.dim);
      SELECT max(run_id) INTO r FROM scd2.audit_log;
      INSERT INTO runs VALUES (p.dim, b, r);
    END LOOP;
  END LOOP;
END $$;
CALL load_all();

-- The versions of every dimension: the same as the local in-order one's
-- (rows of one missing from the other: none), unique surrogate keys,
-- is_current as valid_to says, no two versions of a key overlapping.
CREATE FUNCTION versions(dim text) RETURNS TABLE (sk bigint, k int, a text, b int, valid_from date,
    valid_to date, is_current boolean)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT sk, k, a, b, valid_from, valid_to, is_current FROM %I', dim);
END $$;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to IS NULL) AS current FROM versions('local_in');
SELECT p.dim,
       (SELECT count(*) FROM versions(p.dim)) AS versions,
       (SELECT count(DISTINCT sk) FROM versions(p.dim)) AS distinct_sk,
       (SELECT count(*) FROM (SELECT k, a, b, valid_from, valid_to FROM versions(p.dim)
                              EXCEPT ALL SELECT k, a, b, valid_from, valid_to FROM local_in) x) AS extra,
       (SELECT count(*) FROM (SELECT k, a, b, valid_from, valid_to FROM local_in
                              EXCEPT ALL SELECT k, a, b, valid_from, valid_to FROM versions(p.dim)) x) AS missing,
       (SELECT count(*) FROM versions(p.dim) v WHERE v.is_current IS DISTINCT FROM (v.valid_to IS NULL)) AS bad_current,
       (SELECT count(*) FROM versions(p.dim) v JOIN versions(p.dim) w ON w.k = v.k AND w.sk <> v.sk
          AND w.valid_from >= v.valid_from AND w.valid_from < coalesce(v.valid_to, 'infinity')) AS overlaps
FROM pairs p ORDER BY p.dim;

-- The arrival memory (live rows) of every dimension: the same as the
-- local dimension's with the same batching.
-- An observation of a version is a row of surrogate keys on a local
-- dimension (its key and state are its version's: docs/SEMANTICS.md), a row
-- of its own on Citus: each is compared as the event it remembers.
CREATE FUNCTION memory(dim text) RETURNS TABLE (business_key jsonb, effective timestamptz, present boolean, state jsonb)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY SELECT m.business_key, m.effective, m.present, m.state FROM scd2.arrival_memory m
   WHERE m.dimension = dim::regclass AND m.dropped_by IS NULL AND m.versions IS NULL;
  RETURN QUERY EXECUTE format(
    'SELECT jsonb_build_object(''k'', d.k), m.effective, m.present, jsonb_build_object(''a'', d.a, ''b'', d.b::text)'
    '  FROM scd2.arrival_memory m CROSS JOIN LATERAL unnest(m.versions) AS v(sk) JOIN %I d ON d.sk = v.sk'
    ' WHERE m.dimension = %L::regclass AND m.dropped_by IS NULL AND m.versions IS NOT NULL', dim, dim);
END $$;
SELECT p.dim,
       (SELECT count(*) FROM memory(p.dim)) AS remembered,
       (SELECT count(*) FROM (SELECT * FROM memory(p.dim) EXCEPT ALL SELECT * FROM memory(q.dim)) x) AS extra,
       (SELECT count(*) FROM (SELECT * FROM memory(q.dim) EXCEPT ALL SELECT * FROM memory(p.dim)) x) AS missing
FROM pairs p JOIN pairs q ON q.batching = p.batching AND q.dim = CASE p.batching WHEN 'in order' THEN 'local_in' ELSE 'local_sh' END
ORDER BY p.dim;

-- The metrics of each batch: the same as the local dimension's with the
-- same batching (sums over the batches; lines that differ: none).
SELECT p.batching, sum(a.source_rows) AS source_rows, sum(a.inserted) AS inserted,
       sum(a.new_versions) AS new_versions, sum(a.closed) AS closed, sum(a.deleted) AS deleted,
       sum(a.shortened) AS shortened, sum(a.extended) AS extended, sum(a.removed) AS removed,
       sum(a.unchanged) AS unchanged, sum(a.duplicates) AS duplicates, count(DISTINCT p.dim) AS dims
FROM pairs p JOIN runs r ON r.dim = p.dim JOIN scd2.audit_log a ON a.run_id = r.run_id AND a.status = 'success'
GROUP BY p.batching ORDER BY p.batching;
CREATE VIEW run_metrics AS
  SELECT r.dim, r.batch, a.status, a.source_rows, a.inserted, a.new_versions, a.closed, a.deleted, a.shortened,
         a.extended, a.removed, a.unchanged, a.duplicates
  FROM runs r JOIN scd2.audit_log a ON a.run_id = r.run_id;
SELECT p.dim,
       (SELECT count(*) FROM (SELECT batch, status, source_rows, inserted, new_versions, closed, deleted, shortened,
                                     extended, removed, unchanged, duplicates FROM run_metrics WHERE dim = p.dim
                              EXCEPT ALL
                              SELECT batch, status, source_rows, inserted, new_versions, closed, deleted, shortened,
                                     extended, removed, unchanged, duplicates FROM run_metrics WHERE dim = q.dim) x) AS metrics_differ
FROM pairs p JOIN pairs q ON q.dim = CASE p.batching WHEN 'in order' THEN 'local_in' ELSE 'local_sh' END
ORDER BY p.dim;

-- The change feeds: the same as the local dimension's with the same
-- batching but for the surrogate keys, each with one; scd2.changes of
-- every run gives its feed again, surrogate keys included
-- (changes_sk_differ): an order-free load keeps the surrogate keys of the
-- rows it inserted in its change log (on Citus read back after the write,
-- locally right after the MERGE), so a later load's extend or removal of
-- such a version does not lose its key.
SELECT p.dim,
       (SELECT count(*) FROM feeds f WHERE f.dim = p.dim) AS feed_rows,
       (SELECT count(*) FROM (SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = p.dim
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = q.dim) x) AS extra,
       (SELECT count(*) FROM (SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = q.dim
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = p.dim) x) AS missing,
       (SELECT count(*) FROM feeds f WHERE f.dim = p.dim AND f.surrogate_key IS NULL) AS no_sk,
       (SELECT count(*) FROM (SELECT r.batch, c.action, c.business_key, c.valid_from, c.valid_to
                                FROM runs r, scd2.changes(r.run_id) c WHERE r.dim = p.dim
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to
                                FROM feeds WHERE dim = p.dim) x) AS changes_differ,
       (SELECT count(*) FROM runs r CROSS JOIN LATERAL scd2.changes(r.run_id) c JOIN feeds f ON f.dim = r.dim AND f.batch = r.batch
           AND f.business_key = c.business_key AND f.valid_from = c.valid_from AND f.action = c.action
         WHERE r.dim = p.dim AND c.surrogate_key IS DISTINCT FROM f.surrogate_key) AS changes_sk_differ
FROM pairs p JOIN pairs q ON q.dim = CASE p.batching WHEN 'in order' THEN 'local_in' ELSE 'local_sh' END
ORDER BY p.dim;
SELECT action, count(*) FROM feeds WHERE dim = 'dist_sh' GROUP BY action ORDER BY action;

-- Keys shown: a late identical event extends a version, a late different
-- one splits it, a delete at a version's start removes it.
CREATE FUNCTION one_load(dim text, VARIADIC rows text[])
RETURNS TABLE (action text, k jsonb, valid_from date, valid_to date)
LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
  EXECUTE format('DELETE FROM %I', 'stg_' || dim);
  FOREACH r IN ARRAY rows LOOP EXECUTE format('INSERT INTO %I VALUES ', 'stg_' || dim) || r; END LOOP;
  RETURN QUERY EXECUTE format('SELECT f.action, f.business_key, f.valid_from::date, f.valid_to::date'
                              ' FROM scd2.merge(%L, %L) f ORDER BY f.valid_from, f.action', 'stg_' || dim, dim);
END $$;
-- the dimension and memory as they are, to compare after a revert
CREATE FUNCTION state(dim text) RETURNS text LANGUAGE sql AS $$
  SELECT coalesce((SELECT string_agg(v::text, ',' ORDER BY v.k, v.valid_from) FROM versions(dim) v), '')
      || ' | ' || coalesce((SELECT string_agg(m::text, ',' ORDER BY m::text) FROM scd2.arrival_memory m
                            WHERE m.dimension = dim::regclass), '')
$$;
SELECT * FROM one_load('dist_in', $$(1, 'x', 1, '2021-01-10', false)$$, $$(1, 'y', 1, '2021-01-20', false)$$);
SELECT * FROM one_load('dist_in', $$(1, 'x', 1, '2021-01-05', false)$$, $$(1, 'x', 1, '2021-01-15', false)$$,
                       $$(2, 'q', NULL, '2021-01-01', false)$$);
SELECT state('dist_in') AS before_dist \gset
SELECT * FROM one_load('dist_in', $$(1, 'x', 1, '2021-01-03', false)$$, $$(1, 'z', 1, '2021-01-07', false)$$,
                       $$(1, NULL, NULL, '2021-01-15', true)$$, $$(1, NULL, NULL, '2021-01-20', true)$$, $$(2, 'q', NULL, '2020-12-01', false)$$,
                       $$(3, 'n', 1, '2021-01-01', false)$$);
SELECT run_id AS r FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1 \gset
SELECT inserted, new_versions, closed, shortened, extended, removed, unchanged FROM scd2.audit_log WHERE run_id = :r;
SELECT action, business_key, valid_from::date, valid_to::date, old_row IS NOT NULL AS whole_row
  FROM scd2.change_log WHERE run_id = :r ORDER BY business_key, valid_from, action;
SELECT k, a, b, valid_from, valid_to, is_current FROM dist_in WHERE k IN (1, 2, 3) ORDER BY k, valid_from;
SELECT business_key, effective::date, present, state, dropped_by IS NOT NULL AS dropped
  FROM scd2.arrival_memory WHERE dimension = 'dist_in'::regclass AND business_key IN ('{"k": 1}', '{"k": 2}')
 ORDER BY business_key, effective, dropped_by NULLS FIRST;
-- Revert restores the dimension and the memory exactly (surrogate keys
-- included); the same load again gives the same versions.
SELECT scd2.revert(:r) > 0 AS reverted;
SELECT state('dist_in') = :'before_dist' AS restored;
SELECT count(*) FROM one_load('dist_in', $$(1, 'x', 1, '2021-01-03', false)$$, $$(1, 'z', 1, '2021-01-07', false)$$,
                              $$(1, NULL, NULL, '2021-01-15', true)$$, $$(1, NULL, NULL, '2021-01-20', true)$$, $$(2, 'q', NULL, '2020-12-01', false)$$,
                              $$(3, 'n', 1, '2021-01-01', false)$$);
SELECT k, a, b, valid_from, valid_to, is_current FROM dist_in WHERE k IN (1, 2, 3) ORDER BY k, valid_from;

-- The same on the reference dimension, and a dry run writes nothing.
SELECT count(*) FROM one_load('ref_in', $$(1, 'x', 1, '2021-01-10', false)$$, $$(1, 'y', 1, '2021-01-20', false)$$);
SELECT count(*) FROM one_load('ref_in', $$(1, 'x', 1, '2021-01-05', false)$$, $$(1, 'x', 1, '2021-01-15', false)$$,
                              $$(2, 'q', NULL, '2021-01-01', false)$$);
SELECT state('ref_in') AS before_ref \gset
SELECT * FROM one_load('ref_in', $$(1, 'x', 1, '2021-01-03', false)$$, $$(1, 'z', 1, '2021-01-07', false)$$,
                       $$(1, NULL, NULL, '2021-01-15', true)$$, $$(1, NULL, NULL, '2021-01-20', true)$$, $$(2, 'q', NULL, '2020-12-01', false)$$,
                       $$(3, 'n', 1, '2021-01-01', false)$$);
SELECT run_id AS r FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1 \gset
SELECT k, a, b, valid_from, valid_to, is_current FROM ref_in WHERE k IN (1, 2, 3) ORDER BY k, valid_from;
SELECT scd2.revert(:r) > 0 AS reverted;
SELECT state('ref_in') = :'before_ref' AS restored;
SELECT count(*) AS feed_rows FROM scd2.merge('stg_ref_in', 'ref_in', dry_run => true);
SELECT state('ref_in') = :'before_ref' AS nothing_written;

RESET search_path;
DROP SCHEMA citus_arrival CASCADE;
