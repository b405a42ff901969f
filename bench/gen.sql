-- bench/gen.sql -- builds the data of the side-by-side benchmark (issue 5).
--
--   psql -v keys=1000000 -v versions=1 -v batch=200000 \
--        -v changed=0.10 -v new=0.05 -v deleted=0 -v use_scd2=1 -f bench/gen.sql
--
-- layout (default key): the physical order of the dimension's rows.
--   key   a key's versions side by side (ORDER BY key, version), as after
--         CLUSTER on the as-of index: the current rows are spread over the
--         whole heap, one in VERSIONS rows.
--   load  in the order daily loads would have appended them (ORDER BY
--         version, key): the current rows of the last load are packed.
--
-- Creates (dropping what was there):
--   dim        the scd2 dimension: customer_sk identity (primary key),
--              customer_id, 6 tracked attributes of mixed types with NULLs,
--              valid_from, valid_to, is_current; KEYS keys x VERSIONS
--              versions (the last one current). Registered with
--              scd2.register('dim', ARRAY['customer_id']) when use_scd2=1,
--              otherwise given the same two indexes register creates.
--              Approaches 1 (scd2.apply) and 4 (floor) run on it.
--   dim_seed   a copy of dim plus row_hash (sha256 of the tracked columns as
--              the seeds compute it) with the same indexes: approach 2.
--   dim_dbt    the same history in a dbt snapshot's shape (dbt_scd_id,
--              dbt_updated_at, dbt_valid_from, dbt_valid_to; timestamp
--              without time zone as dbt-postgres makes them), NO indexes:
--              approach 3.
--   stg        the staging batch: customer_id + the 6 attributes (plus
--              is_deleted when deleted > 0), BATCH rows in random order.
--   stg_hashed the seeds' staging view (row_hash computed on read).
--   bench_truth (customer_id, kind) what the generator did to each key.
--   floor_close, floor_new  the precomputed work of approach 4.
--   bench_params the parameters and the actual composition of the batch.
--
-- part (default all) builds one part, for runs on a dimension too large to
-- build more than once (bench/scale.sh):
--   dim     dim (registered) and dim_nov; drops everything else
--   copies  dim_seed and/or dim_dbt, as COPIES ('seed dbt', 'seed', 'dbt',
--           ''), from dim, dropping the other
--   batch   stg, stg_hashed, bench_truth, floor_*, bench_params for the
--           batch parameters, against the dim there is
--   all     dim, the batch, then the copies: what run.sh builds
--
-- Shares are fractions of the batch. When the batch asks for more existing
-- keys than the dimension has (BATCH 2M against 1M keys), unchanged rows are
-- clamped so that every key of the dimension is in the batch once and the
-- remainder are new keys (bench_params records what was generated).

\set ON_ERROR_STOP on
\if :{?keys} \else \set keys 1000000 \endif
\if :{?versions} \else \set versions 1 \endif
\if :{?batch} \else \set batch 200000 \endif
\if :{?changed} \else \set changed 0.10 \endif
\if :{?new} \else \set new 0.05 \endif
\if :{?deleted} \else \set deleted 0 \endif
\if :{?use_scd2} \else \set use_scd2 0 \endif
\if :{?no_overlap} \else \set no_overlap 0 \endif
\if :{?seed} \else \set seed 42 \endif
\if :{?layout} \else \set layout key \endif
\if :{?part} \else \set part all \endif
\if :{?copies} \else \set copies 'seed dbt' \endif
SELECT :'layout' IN ('key', 'load') AS layout_ok,
       CASE :'layout' WHEN 'load' THEN 'v, k' ELSE 'k, v' END AS layout_order,
       -- surrogate keys follow the physical order (the copies below are made ORDER BY them)
       CASE :'layout' WHEN 'load' THEN '(v - 1) * ' || :keys || ' + k' ELSE '(k - 1) * ' || :versions || ' + v' END AS layout_sk \gset
\if :layout_ok
\else
\echo 'layout must be key or load'
\quit
\endif

SELECT :'part' IN ('all', 'dim') AS do_dim,
       :'part' IN ('all', 'dim', 'batch') AS drop_batch,
       :'part' IN ('all', 'batch') AS do_batch,
       :'part' IN ('all', 'copies') AS do_copies,
       :'part' IN ('all', 'dim', 'copies') AS drop_copies,
       :'part' IN ('all', 'copies') AND :'copies' ~ '\mseed\M' AS want_seed,
       :'part' IN ('all', 'copies') AND :'copies' ~ '\mdbt\M' AS want_dbt,
       :'part' IN ('all', 'dim', 'copies', 'batch') AS part_ok,
       (:deleted > 0) AS has_deleted \gset
\if :part_ok
\else
\echo 'part must be all, dim, copies or batch'
\quit
\endif

SET client_min_messages = warning;
SET maintenance_work_mem = '1GB';
SET work_mem = '256MB';

\if :drop_batch
DROP VIEW  IF EXISTS stg_hashed;
DROP TABLE IF EXISTS stg, bench_truth, floor_close, floor_new, bench_params;
\endif
\if :drop_copies
DROP TABLE IF EXISTS dim_seed, dim_dbt;
\endif
\if :do_dim
\if :use_scd2
SELECT scd2.unregister(c.oid::regclass) FROM pg_class c
 WHERE c.relname IN ('dim', 'dim_nov') AND c.relnamespace = 'public'::regnamespace
   AND EXISTS (SELECT FROM scd2.dimensions d WHERE d.dimension = c.oid) \g /dev/null
\endif
DROP TABLE IF EXISTS dim, dim_nov;

------------------------------------------------------------------------------
-- The dimension: KEYS x VERSIONS rows, version v of key k valid on
-- [2020-01-01 + 30 days * (v-1), 2020-01-01 + 30 days * v), the last open.
------------------------------------------------------------------------------
\ir dim.sql

INSERT INTO dim (customer_sk, customer_id, name, city, tier, email, birth_date, credit_limit,
                 valid_from, valid_to, is_current)
SELECT :layout_sk, k,
       'Customer ' || k || CASE WHEN v > 1 THEN ' v' || v ELSE '' END,
       (ARRAY['Amsterdam','Berlin','Chicago','Dublin','Edinburgh','Frankfurt','Geneva','Hamburg',
              'Istanbul','Jakarta','Kyiv','Lisbon','Madrid','Nairobi','Oslo','Paris','Quito',
              'Rome','Seoul','Tokyo','Utrecht','Vienna','Warsaw','Xiamen','York','Zurich'])[1 + (h1 & 2147483647) % 26],
       CASE WHEN (h2 & 2147483647) % 20 = 0 THEN NULL
            ELSE (ARRAY['bronze','silver','gold','platinum'])[1 + (h2 & 2147483647) % 4] END,
       CASE WHEN (h3 & 2147483647) % 10 = 0 THEN NULL
            ELSE 'c' || k || '.' || v || '@example.com' END,
       date '1950-01-01' + (h4 & 2147483647) % 20000,
       CASE WHEN (h5 & 2147483647) % 20 = 0 THEN NULL
            ELSE ((h5 & 2147483647) % 1000000 / 10.0)::numeric(12,2) END,
       timestamptz '2020-01-01 00:00:00+00' + (v - 1) * interval '30 days',
       CASE WHEN v < :versions THEN timestamptz '2020-01-01 00:00:00+00' + v * interval '30 days' END,
       v = :versions
  FROM generate_series(1, :keys::bigint) k,
       generate_series(1, :versions) v,
       LATERAL (SELECT hashint8(k * 64 + v * 8 + 1) AS h1, hashint8(k * 64 + v * 8 + 2) AS h2,
                       hashint8(k * 64 + v * 8 + 3) AS h3, hashint8(k * 64 + v * 8 + 4) AS h4,
                       hashint8(k * 64 + v * 8 + 5) AS h5) h
 ORDER BY :layout_order;
SELECT setval(pg_get_serial_sequence('dim', 'customer_sk'), :keys::bigint * :versions) \g /dev/null
\endif

\if :do_batch
-- Composition of the batch.
SELECT round(:batch * :changed)::bigint AS n_changed,
       round(:batch * :deleted)::bigint AS n_deleted,
       round(:batch * :new)::bigint     AS n_new \gset
SELECT :batch - :n_changed - :n_deleted - :n_new AS n_unchanged \gset
SELECT CASE WHEN :n_changed + :n_deleted + :n_unchanged > :keys
            THEN :keys - :n_changed - :n_deleted ELSE :n_unchanged END AS n_unchanged \gset
SELECT :batch - :n_changed - :n_deleted - :n_unchanged AS n_new \gset

CREATE TABLE bench_params AS
SELECT :keys::bigint AS keys, :versions::int AS versions, :batch::bigint AS batch,
       :n_unchanged::bigint AS unchanged, :n_changed::bigint AS changed,
       :n_new::bigint AS new, :n_deleted::bigint AS deleted,
       timestamptz '2026-11-30 12:00:00+00' AS effective_at, :'layout'::text AS layout,
       :no_overlap::int AS no_overlap;


------------------------------------------------------------------------------
-- The staging batch.
------------------------------------------------------------------------------
CREATE TABLE bench_truth (customer_id bigint PRIMARY KEY, kind text NOT NULL, pos bigint NOT NULL);
INSERT INTO bench_truth
SELECT customer_id,
       CASE WHEN rn <= :n_changed THEN 'changed'
            WHEN rn <= :n_changed + :n_deleted THEN 'deleted'
            ELSE 'unchanged' END,
       hashint8(customer_id # (:seed * 7919))
  FROM (SELECT k AS customer_id, row_number() OVER (ORDER BY hashint8(k # :seed), k) AS rn
          FROM generate_series(1, :keys::bigint) k) p
 WHERE rn <= :n_changed + :n_deleted + :n_unchanged;
INSERT INTO bench_truth
SELECT k, 'new', hashint8(k # (:seed * 7919))
  FROM generate_series(:keys::bigint + 1, :keys::bigint + :n_new) k;

CREATE TABLE stg (
    customer_id   bigint NOT NULL,
    name          text,
    city          text,
    tier          text,
    email         text,
    birth_date    date,
    credit_limit  numeric(12,2)
);
\if :has_deleted
ALTER TABLE stg ADD COLUMN is_deleted boolean NOT NULL DEFAULT false;
\endif

-- Existing keys: the current attributes, with one attribute changed for
-- 'changed' keys (which one, and to or from NULL, varies by key).
INSERT INTO stg (customer_id, name, city, tier, email, birth_date, credit_limit)
SELECT d.customer_id,
       CASE WHEN t.kind = 'changed' AND c = 0 THEN d.name || ' (renamed)' ELSE d.name END,
       CASE WHEN t.kind = 'changed' AND c = 1 THEN d.city || '-Nord' ELSE d.city END,
       CASE WHEN t.kind = 'changed' AND c = 2 THEN CASE WHEN d.tier IS NULL THEN 'gold' END ELSE d.tier END,
       CASE WHEN t.kind = 'changed' AND c = 3 THEN CASE WHEN d.email IS NULL THEN 'new' || d.customer_id || '@example.org' END ELSE d.email END,
       CASE WHEN t.kind = 'changed' AND c = 4 THEN d.birth_date + 1 ELSE d.birth_date END,
       CASE WHEN t.kind = 'changed' AND c = 5 THEN CASE WHEN d.credit_limit IS NULL THEN 1000 END ELSE d.credit_limit END
  FROM bench_truth t
  JOIN dim d ON d.customer_id = t.customer_id AND d.valid_to IS NULL,
       LATERAL (SELECT (hashint8(t.customer_id * 3 + 1) & 2147483647) % 6 AS c) x
 WHERE t.kind <> 'new'
 ORDER BY t.pos;
\if :has_deleted
UPDATE stg SET is_deleted = true FROM bench_truth t
 WHERE t.customer_id = stg.customer_id AND t.kind = 'deleted';
\endif
-- New keys.
INSERT INTO stg (customer_id, name, city, tier, email, birth_date, credit_limit)
SELECT k, 'Customer ' || k, 'Lisbon', CASE WHEN k % 20 = 0 THEN NULL ELSE 'bronze' END,
       CASE WHEN k % 10 = 0 THEN NULL ELSE 'c' || k || '.1@example.com' END,
       date '1990-01-01' + (k % 9000)::int, CASE WHEN k % 20 = 0 THEN NULL ELSE 500.00 END
  FROM bench_truth t, LATERAL (SELECT t.customer_id AS k) x
 WHERE t.kind = 'new'
 ORDER BY t.pos;
-- Shuffle new keys into the batch: rewrite in random order.
CREATE TABLE stg_shuffled AS SELECT s.* FROM stg s JOIN bench_truth t USING (customer_id) ORDER BY t.pos;
TRUNCATE stg;
INSERT INTO stg SELECT * FROM stg_shuffled;
DROP TABLE stg_shuffled;

\ir stg_hashed.sql

------------------------------------------------------------------------------
-- Approach 4: the floor's precomputed work (outside the timed part).
------------------------------------------------------------------------------
CREATE TABLE floor_close AS
SELECT customer_id FROM bench_truth WHERE kind IN ('changed', 'deleted') ORDER BY customer_id;
CREATE TABLE floor_new AS
SELECT s.customer_id, s.name, s.city, s.tier, s.email, s.birth_date, s.credit_limit
  FROM stg s JOIN bench_truth t USING (customer_id)
 WHERE t.kind IN ('changed', 'new');
VACUUM (ANALYZE) stg, bench_truth, floor_close, floor_new;
\endif

------------------------------------------------------------------------------
-- Indexes of the scd2 dimension (register creates them).
------------------------------------------------------------------------------
\if :do_dim
\if :use_scd2
\if :has_deleted
SELECT scd2.register('dim', ARRAY['customer_id'], delete_column => 'is_deleted') \g /dev/null
\else
SELECT scd2.register('dim', ARRAY['customer_id']) \g /dev/null
\endif
\else
CREATE UNIQUE INDEX dim_scd2_current ON dim (customer_id) WHERE valid_to IS NULL;
CREATE UNIQUE INDEX dim_scd2_asof ON dim (customer_id, valid_from) INCLUDE (customer_sk, valid_to);
\endif

------------------------------------------------------------------------------
-- Approach 1b (no_overlap=1): a copy of dim registered with no_overlap =>
-- true, so scd2.apply runs under the exclusion constraint.
------------------------------------------------------------------------------
\if :no_overlap
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE TABLE dim_nov (LIKE dim INCLUDING DEFAULTS INCLUDING IDENTITY INCLUDING CONSTRAINTS);
ALTER TABLE dim_nov ADD PRIMARY KEY (customer_sk);
INSERT INTO dim_nov SELECT * FROM dim ORDER BY customer_sk;
SELECT setval(pg_get_serial_sequence('dim_nov', 'customer_sk'), (SELECT max(customer_sk) FROM dim_nov)) \g /dev/null
\if :has_deleted
SELECT scd2.register('dim_nov', ARRAY['customer_id'], delete_column => 'is_deleted', no_overlap => true) \g /dev/null
\else
SELECT scd2.register('dim_nov', ARRAY['customer_id'], no_overlap => true) \g /dev/null
\endif
VACUUM (ANALYZE) dim_nov;
\endif
VACUUM (ANALYZE) dim;
\endif

------------------------------------------------------------------------------
-- Approach 2: the seeds' dimension (row_hash stored) and staging view.
------------------------------------------------------------------------------
\if :want_seed
CREATE TABLE dim_seed (
    customer_sk   bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    customer_id   bigint NOT NULL,
    name          text,
    city          text,
    tier          text,
    email         text,
    birth_date    date,
    credit_limit  numeric(12,2),
    row_hash      text,
    valid_from    timestamptz NOT NULL,
    valid_to      timestamptz,
    is_current    boolean NOT NULL DEFAULT true
);
INSERT INTO dim_seed (customer_sk, customer_id, name, city, tier, email, birth_date, credit_limit,
                      row_hash, valid_from, valid_to, is_current)
SELECT customer_sk, customer_id, name, city, tier, email, birth_date, credit_limit,
       encode(sha256(convert_to(concat_ws('||',
           coalesce(name, '~'), coalesce(city, '~'), coalesce(tier, '~'), coalesce(email, '~'),
           coalesce(birth_date::text, '~'), coalesce(credit_limit::text, '~')), 'UTF8')), 'hex'),
       valid_from, valid_to, is_current
  FROM dim ORDER BY customer_sk;
SELECT setval(pg_get_serial_sequence('dim_seed', 'customer_sk'), :keys::bigint * :versions) \g /dev/null
CREATE UNIQUE INDEX dim_seed_current ON dim_seed (customer_id) WHERE valid_to IS NULL;
CREATE UNIQUE INDEX dim_seed_asof ON dim_seed (customer_id, valid_from) INCLUDE (customer_sk, valid_to);
VACUUM (ANALYZE) dim_seed;
\endif

------------------------------------------------------------------------------
-- Approach 3: dbt snapshot shape, no indexes (dbt creates none).
-- dbt_scd_id = md5(coalesce(cast(key as varchar), '') || '|' ||
--                  coalesce(cast(updated_at as varchar), '')).
------------------------------------------------------------------------------
\if :want_dbt
CREATE TABLE dim_dbt AS
SELECT customer_id, name, city, tier, email, birth_date, credit_limit,
       md5(coalesce(cast(customer_id as varchar), '') || '|' ||
           coalesce(cast((valid_from AT TIME ZONE 'UTC') as varchar), '')) AS dbt_scd_id,
       (valid_from AT TIME ZONE 'UTC') AS dbt_updated_at,
       (valid_from AT TIME ZONE 'UTC') AS dbt_valid_from,
       (valid_to AT TIME ZONE 'UTC')   AS dbt_valid_to
  FROM dim ORDER BY customer_sk;
VACUUM (ANALYZE) dim_dbt;
\endif

CHECKPOINT;
\if :do_batch
SELECT * FROM bench_params;
\endif
