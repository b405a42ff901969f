-- scd2.asof on Citus: a 100k-key x 3-version dimension as a reference table
-- (rdim), distributed by its key (ddim) and plain on the coordinator
-- (dim_plain); 200k facts distributed by the key, co-located with ddim.
SET client_min_messages = warning;
SET citus.shard_count = 4;
CREATE TABLE dim_plain (sk bigint NOT NULL, id int NOT NULL, name text, valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL);
INSERT INTO dim_plain SELECT (v - 1) * 100000 + k, k, 'n' || v, '2020-01-01'::timestamptz + (v - 1) * interval '100 days' + (k % 1000) * interval '1 minute',
   CASE WHEN v < 3 THEN '2020-01-01'::timestamptz + v * interval '100 days' + (k % 1000) * interval '1 minute' END, v = 3
  FROM generate_series(1, 100000) k, generate_series(1, 3) v;
CREATE TABLE rdim (LIKE dim_plain); SELECT create_reference_table('rdim');
CREATE TABLE ddim (LIKE dim_plain); SELECT create_distributed_table('ddim', 'id');
INSERT INTO rdim SELECT * FROM dim_plain; INSERT INTO ddim SELECT * FROM dim_plain;
SELECT scd2.register('rdim', ARRAY['id'], surrogate_key_column => 'sk');
SELECT scd2.register('ddim', ARRAY['id'], surrogate_key_column => 'sk');
SELECT scd2.register('dim_plain', ARRAY['id'], surrogate_key_column => 'sk');
CREATE TABLE stg (fid int, id int, ts timestamptz);
SELECT create_distributed_table('stg', 'id', colocate_with => 'ddim');
INSERT INTO stg SELECT g, 1 + (hashint4(g) & 2147483647) % 100000, '2020-01-01'::timestamptz + ((hashint4(g * 7) & 2147483647) % 350) * interval '1 day' FROM generate_series(1, 200000) g;
CREATE TABLE stg_plain AS SELECT * FROM stg;
CREATE TABLE facts (fid int, sk bigint); SELECT create_distributed_table('facts', 'fid');
CREATE TABLE facts_plain (fid int, sk bigint);
CREATE TABLE probe2k AS SELECT * FROM stg_plain ORDER BY fid LIMIT 2000;
CREATE TABLE probe2k_100 AS SELECT fid, 1 + id % 100 AS id, ts FROM probe2k;
VACUUM ANALYZE dim_plain, stg_plain, probe2k, probe2k_100; VACUUM ANALYZE rdim; VACUUM ANALYZE ddim; VACUUM ANALYZE stg;
