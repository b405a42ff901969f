-- scd2.asof on a Citus cluster: a reference dimension (rdim) and a
-- dimension distributed by its business key (ddim), on the coordinator and
-- in distributed fact loads, checked against the half-open range join on a
-- plain copy of the same versions (dim_local, truth).  The dimensions are
-- loaded with plain INSERTs and UPDATEs through Citus and registered when
-- already filled.
SET client_min_messages = warning;
CREATE SCHEMA asof_citus;
SET search_path = asof_citus, public;
SET citus.shard_count = 4;
SET citus.shard_replication_factor = 1;

-- Keys 1..60, two versions each: [2020-01-01 + k hours, 2021-01-01 + k hours)
-- then from 2021-01-01 + k hours; every fourth key's second version was
-- closed at 2022-01-01 (deleted).  Keys 61..65 have no version.
CREATE TABLE dim_local (sk bigint NOT NULL, id int NOT NULL, name text,
                        valid_from timestamptz NOT NULL, valid_to timestamptz,
                        is_current boolean NOT NULL);
INSERT INTO dim_local
SELECT 1000 + k, k, 'v1', '2020-01-01'::timestamptz + k * interval '1 hour',
       '2021-01-01'::timestamptz + k * interval '1 hour', false
  FROM generate_series(1, 60) k
UNION ALL
SELECT 2000 + k, k, 'v2', '2021-01-01'::timestamptz + k * interval '1 hour',
       CASE WHEN k % 4 = 0 THEN '2022-01-01'::timestamptz END, k % 4 <> 0
  FROM generate_series(1, 60) k;

CREATE TABLE rdim (LIKE dim_local);
SELECT create_reference_table('rdim');
CREATE TABLE ddim (LIKE dim_local);
SELECT create_distributed_table('ddim', 'id');
INSERT INTO rdim SELECT * FROM dim_local;
INSERT INTO ddim SELECT * FROM dim_local;
SELECT scd2.register('rdim', ARRAY['id'], surrogate_key_column => 'sk');
SELECT scd2.register('ddim', ARRAY['id'], surrogate_key_column => 'sk');

-- The registry is the coordinator's; the as-of index scd2.register created
-- is on every node (Citus propagates it), which is what a worker reads.
SELECT count(*) FROM scd2.dimensions WHERE dimension IN ('rdim'::regclass, 'ddim'::regclass);
SELECT result FROM run_command_on_workers($$SELECT count(*) FROM scd2.dimensions$$) ORDER BY nodeport;
SELECT result FROM run_command_on_workers($$
  SELECT string_agg(pg_get_indexdef(indexrelid), '; ' ORDER BY indexrelid::regclass::text)
    FROM pg_index WHERE indrelid = 'asof_citus.rdim'::regclass$$) ORDER BY nodeport;

-- The facts: every key 1..65 at eight instants, among them the boundaries
-- (valid_from, a microsecond before it, valid_to, a microsecond before it).
CREATE TABLE probe (fid int, id int, ts timestamptz);
INSERT INTO probe
SELECT row_number() OVER (ORDER BY k, t), k, t
  FROM generate_series(1, 65) k,
       LATERAL (VALUES ('2020-01-01'::timestamptz + k * interval '1 hour'),
                       ('2020-01-01'::timestamptz + k * interval '1 hour' - interval '1 microsecond'),
                       ('2021-01-01'::timestamptz + k * interval '1 hour'),
                       ('2021-01-01'::timestamptz + k * interval '1 hour' - interval '1 microsecond'),
                       ('2020-07-01'), ('2022-01-01'), ('2023-06-01'), ('infinity')) v(t);

-- What the half-open range join answers, on plain tables.
CREATE TABLE truth (fid int, sk bigint);
CREATE FUNCTION refresh_truth() RETURNS void LANGUAGE sql AS $$
  TRUNCATE truth;
  INSERT INTO truth
  SELECT p.fid, d.sk FROM probe p
    LEFT JOIN dim_local d ON d.id = p.id AND d.valid_from <= p.ts
                         AND (d.valid_to IS NULL OR p.ts < d.valid_to);
$$;
SELECT refresh_truth();
SELECT count(*) AS probes, count(sk) AS found, sum(sk) AS sum_sk FROM truth;

-- 1. On the coordinator: the reference dimension's placement here, the
-- distributed one through Citus.  Row by row on a few keys.
SELECT p.id, p.ts, scd2.asof('rdim', p.ts, p.id) AS rdim, scd2.asof('ddim', p.ts, p.id) AS ddim,
       t.sk AS join_sk
  FROM probe p JOIN truth t USING (fid)
 WHERE p.id IN (4, 7, 61)
 ORDER BY p.id, p.ts;
SELECT scd2.asof('rdim', now(), NULL::int) AS null_key, scd2.asof('ddim', now(), NULL::int) AS null_key_d;

-- every probe, by probe and by the in-memory map
CREATE FUNCTION coordinator_check() RETURNS TABLE (n bigint, r_found bigint, r_sum numeric,
    d_found bigint, d_sum numeric, wrong bigint) LANGUAGE sql AS $$
  SELECT count(*), count(a.r), sum(a.r), count(a.d), sum(a.d),
         count(*) FILTER (WHERE a.r IS DISTINCT FROM t.sk OR a.d IS DISTINCT FROM t.sk)
    FROM (SELECT p.fid, scd2.asof('rdim', p.ts, p.id) AS r, scd2.asof('ddim', p.ts, p.id) AS d
            FROM probe p) a
    JOIN truth t USING (fid);
$$;
SET scd2.asof_bulk_threshold = 0;
SELECT * FROM coordinator_check();
SET scd2.asof_bulk_threshold = 1;
SELECT * FROM coordinator_check();
RESET scd2.asof_bulk_threshold;

-- 2. Distributed fact loads: INSERT INTO facts SELECT ... scd2.asof(...)
-- FROM distributed staging.  stg_coloc is distributed by the business key,
-- co-located with ddim: every key's shard is on the node that reads it.
CREATE TABLE stg_coloc (LIKE probe);
SELECT create_distributed_table('stg_coloc', 'id', colocate_with => 'ddim');
INSERT INTO stg_coloc SELECT * FROM probe;
CREATE TABLE facts (fid int, sk_r bigint, sk_d bigint);
SELECT create_distributed_table('facts', 'fid');
CREATE TABLE truth_ref (LIKE truth);
SELECT create_reference_table('truth_ref');
CREATE FUNCTION facts_check() RETURNS TABLE (n bigint, r_found bigint, r_sum numeric,
    d_found bigint, d_sum numeric, wrong bigint) LANGUAGE sql AS $$
  SELECT count(*), count(f.sk_r), sum(f.sk_r), count(f.sk_d), sum(f.sk_d),
         count(*) FILTER (WHERE f.sk_r IS DISTINCT FROM t.sk OR f.sk_d IS DISTINCT FROM t.sk)
    FROM facts f JOIN truth_ref t USING (fid);
$$;
INSERT INTO truth_ref SELECT * FROM truth;

-- The workers read the setting of the distributed transaction (SET LOCAL,
-- propagated): 0 probes the index at every call, 1 builds the map at once.
SET citus.propagate_set_commands = 'local';
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 0;
SELECT DISTINCT current_setting('scd2.asof_bulk_threshold') AS on_workers FROM stg_coloc;
INSERT INTO facts SELECT fid, scd2.asof('rdim', ts, id), scd2.asof('ddim', ts, id) FROM stg_coloc;
COMMIT;
SELECT * FROM facts_check();
TRUNCATE facts;
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 1;
SELECT DISTINCT current_setting('scd2.asof_bulk_threshold') AS on_workers FROM stg_coloc;
INSERT INTO facts SELECT fid, scd2.asof('rdim', ts, id), scd2.asof('ddim', ts, id) FROM stg_coloc;
COMMIT;
SELECT * FROM facts_check();

-- Staging distributed by another column: the reference dimension is on
-- every node; the distributed one is too only for keys whose shard
-- happens to be there (below).
CREATE TABLE stg_other (LIKE probe);
SELECT create_distributed_table('stg_other', 'fid', colocate_with => 'none');
INSERT INTO stg_other SELECT * FROM probe;
TRUNCATE facts;
INSERT INTO facts (fid, sk_r) SELECT fid, scd2.asof('rdim', ts, id) FROM stg_other;
SELECT n, r_found, r_sum, (SELECT count(*) FROM facts f JOIN truth_ref t USING (fid)
                            WHERE f.sk_r IS DISTINCT FROM t.sk) AS wrong
  FROM facts_check();

-- 3. A second load through Citus (closes, then new versions, in one
-- transaction): every third current key gets a version from 2023-01-01.
-- The facts loaded again in the same session (the workers' pooled
-- connections) must see it: nothing cached outlives its query.
CREATE FUNCTION second_load(tbl regclass) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format($q$UPDATE %s SET valid_to = '2023-01-01', is_current = false
                     WHERE valid_to IS NULL AND id %% 3 = 0$q$, tbl);
  EXECUTE format($q$INSERT INTO %s SELECT 3000 + id, id, 'v3', '2023-01-01', NULL, true
                      FROM %s WHERE valid_to = '2023-01-01' AND id %% 3 = 0$q$, tbl, tbl);
END $$;
BEGIN;
SELECT second_load('rdim'), second_load('ddim'), second_load('dim_local');
COMMIT;
SELECT count(*) AS v3 FROM ddim WHERE sk >= 3000;
SELECT refresh_truth();
TRUNCATE truth_ref;
INSERT INTO truth_ref SELECT * FROM truth;
SELECT count(*) AS probes, count(sk) AS found, sum(sk) AS sum_sk FROM truth;
SELECT * FROM coordinator_check();
SET scd2.asof_bulk_threshold = 0;
SELECT * FROM coordinator_check();
RESET scd2.asof_bulk_threshold;
TRUNCATE facts;
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 1;
INSERT INTO facts SELECT fid, scd2.asof('rdim', ts, id), scd2.asof('ddim', ts, id) FROM stg_coloc;
COMMIT;
SELECT * FROM facts_check();
TRUNCATE facts;
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 0;
INSERT INTO facts SELECT fid, scd2.asof('rdim', ts, id), scd2.asof('ddim', ts, id) FROM stg_coloc;
COMMIT;
SELECT * FROM facts_check();

-- Inside the loading transaction the new version is visible to the lookup
-- on the coordinator and on the workers; after a rollback it is gone.
BEGIN;
UPDATE rdim SET valid_to = '2024-01-01', is_current = false WHERE id = 5 AND valid_to IS NULL;
INSERT INTO rdim VALUES (4005, 5, 'v3', '2024-01-01', NULL, true);
UPDATE ddim SET valid_to = '2024-01-01', is_current = false WHERE id = 5 AND valid_to IS NULL;
INSERT INTO ddim VALUES (4005, 5, 'v3', '2024-01-01', NULL, true);
SELECT scd2.asof('rdim', '2024-06-01', 5) AS rdim, scd2.asof('ddim', '2024-06-01', 5) AS ddim;
SELECT id, scd2.asof('rdim', '2024-06-01', id) AS rdim, scd2.asof('ddim', '2024-06-01', id) AS ddim
  FROM stg_coloc WHERE id IN (5, 6) GROUP BY id ORDER BY id;
ROLLBACK;
SELECT scd2.asof('rdim', '2024-06-01', 5) AS rdim, scd2.asof('ddim', '2024-06-01', 5) AS ddim;
SELECT id, scd2.asof('rdim', '2024-06-01', id) AS rdim, scd2.asof('ddim', '2024-06-01', id) AS ddim
  FROM stg_coloc WHERE id IN (5, 6) GROUP BY id ORDER BY id;

-- A PL/pgSQL loop keeps its call site (and the versions it read through
-- Citus) across statements: a write in between is seen at the next call.
CREATE FUNCTION loop_check(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text := '';
BEGIN
  FOR i IN 1..2 LOOP
    r := r || coalesce(scd2.asof(dim, '2030-01-01', 7)::text, 'null') || ' ';
    IF i = 1 THEN
      EXECUTE format($q$UPDATE %s SET valid_to = '2025-01-01', is_current = false
                         WHERE id = 7 AND valid_to IS NULL$q$, dim);
      EXECUTE format($q$INSERT INTO %s VALUES (5007, 7, 'v5', '2025-01-01', NULL, true)$q$, dim);
    END IF;
  END LOOP;
  RETURN r;
END $$;
BEGIN;
SELECT loop_check('rdim') AS rdim, loop_check('ddim') AS ddim;
ROLLBACK;

-- 4. What is not supported, and says so.  A one-row staging table
-- distributed by the fact id, whose row's key has its ddim shard on the
-- other node: a task on a shard cannot start a query through Citus.
CREATE FUNCTION show_error(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE m text; d text; h text; s text;
BEGIN
  EXECUTE q;
  RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
  GET STACKED DIAGNOSTICS s = RETURNED_SQLSTATE, m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
  RETURN s || E'\n' || m || E'\n' || d || E'\n' || h;
END $$;
CREATE TABLE stg_one (LIKE probe);
SELECT create_distributed_table('stg_one', 'fid', colocate_with => 'stg_other');
CREATE FUNCTION node_of(tbl regclass, v int) RETURNS int LANGUAGE sql AS $$
  SELECT pl.groupid FROM pg_dist_placement pl
   WHERE pl.shardid = get_shard_id_for_distribution_column(tbl, v) $$;
INSERT INTO stg_one
SELECT * FROM probe p WHERE p.id <= 60 AND node_of('stg_one', p.fid) <> node_of('ddim', p.id)
 ORDER BY p.fid LIMIT 1;
SELECT id FROM stg_one;
SELECT show_error($$INSERT INTO facts (fid, sk_d) SELECT fid, scd2.asof('ddim', ts, id) FROM stg_one$$);
-- the refused load wrote nothing
SELECT count(*) AS facts, count(sk_d) AS with_sk_d FROM facts;
-- the reference dimension from the same row: fine
SELECT (SELECT scd2.asof('rdim', ts, id) FROM stg_one) = (SELECT t.sk FROM truth t JOIN stg_one USING (fid)) AS rdim_ok;

-- A dimension distributed by a column that is not its business key (here
-- the surrogate key): a key's versions may be on every shard.  Citus
-- refuses scd2.register's unique indexes there (they must contain the
-- distribution column); with an index of the as-of shape of its own, on
-- the coordinator the lookup asks Citus; on a shard, it cannot.
CREATE TABLE dsk (LIKE dim_local);
SELECT create_distributed_table('dsk', 'sk');
INSERT INTO dsk SELECT * FROM dim_local;
SELECT show_error($$SELECT scd2.register('dsk', ARRAY['id'], surrogate_key_column => 'sk')$$);
CREATE INDEX dsk_asof ON dsk (id, valid_from) INCLUDE (sk, valid_to);
SELECT scd2.register('dsk', ARRAY['id'], surrogate_key_column => 'sk', create_indexes => false);
SELECT count(*) FILTER (WHERE scd2.asof('dsk', p.ts, p.id) IS DISTINCT FROM t.sk) AS wrong,
       count(*) AS n
  FROM probe p JOIN truth t USING (fid);
SELECT show_error($$INSERT INTO facts (fid, sk_d) SELECT fid, scd2.asof('dsk', ts, id) FROM stg_one$$);

-- A dimension registered without its as-of index: the coordinator says
-- the index is missing; a worker, which reads the registration from that
-- index, says the table is not registered there.
CREATE TABLE noidx (LIKE dim_local);
SELECT create_distributed_table('noidx', 'id', colocate_with => 'ddim');
SELECT scd2.register('noidx', ARRAY['id'], surrogate_key_column => 'sk', create_indexes => false);
SELECT show_error($$SELECT scd2.asof('noidx', now(), 1)$$);
SELECT show_error($$INSERT INTO facts (fid, sk_d) SELECT fid, scd2.asof('noidx', ts, id) FROM stg_coloc$$);

-- A business key of two columns, the dimension distributed by the second
-- (bigint), the staging co-located; the lookup is given that column as an
-- int (compared, and hashed to find the shard, across types), the first
-- as text.  Against the join, by probe and by map.
CREATE TABLE dim2 (sk bigint NOT NULL, region text NOT NULL, code bigint NOT NULL,
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT create_distributed_table('dim2', 'code', colocate_with => 'none');
INSERT INTO dim2 SELECT sk, CASE WHEN id % 2 = 0 THEN 'east' ELSE 'west' END, id / 2, valid_from, valid_to
  FROM dim_local;
SELECT scd2.register('dim2', ARRAY['region', 'code'], surrogate_key_column => 'sk');
CREATE TABLE stg2 (fid int, region text, code bigint, ts timestamptz);
SELECT create_distributed_table('stg2', 'code', colocate_with => 'dim2');
INSERT INTO stg2 SELECT p.fid, CASE WHEN p.id % 2 = 0 THEN 'east' ELSE 'west' END, p.id / 2, p.ts FROM probe p;
CREATE TABLE facts2 (fid int, sk bigint);
SELECT create_distributed_table('facts2', 'fid', colocate_with => 'facts');
CREATE FUNCTION facts2_check() RETURNS TABLE (n bigint, found bigint, sum_sk numeric, wrong bigint)
LANGUAGE sql AS $$
  SELECT count(*), count(f.sk), sum(f.sk), count(*) FILTER (WHERE f.sk IS DISTINCT FROM t.sk)
    FROM facts2 f JOIN truth_ref t USING (fid);
$$;
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 0;
INSERT INTO facts2 SELECT fid, scd2.asof('dim2', ts, region, code::int) FROM stg2;
COMMIT;
SELECT * FROM facts2_check();
TRUNCATE facts2;
BEGIN;
SET LOCAL scd2.asof_bulk_threshold = 1;
INSERT INTO facts2 SELECT fid, scd2.asof('dim2', ts, region, code::int) FROM stg2;
COMMIT;
SELECT * FROM facts2_check();
SELECT count(*) FILTER (WHERE scd2.asof('dim2', p.ts, s.region, s.code) IS DISTINCT FROM t.sk) AS wrong_on_coordinator
  FROM probe p JOIN truth t USING (fid) JOIN (SELECT fid, region, code FROM stg2) s USING (fid);

-- On a worker, outside a distributed query (a session of its own there):
-- the registration from the index, the rows from the shards.
SELECT result FROM run_command_on_workers($$
  SELECT scd2.asof('asof_citus.rdim', '2021-06-01', 7)::text || ' ' ||
         scd2.asof('asof_citus.ddim', '2021-06-01', 7)::text$$) ORDER BY nodeport;

DROP SCHEMA asof_citus CASCADE;
