-- bench/first/gen.sql -- the data of the first-load benchmark (issue 14).
--
--   psql -v rows=1000000 -v use_scd2=1 -f bench/first/gen.sql
--
-- Creates (dropping what was there):
--   stg        ROWS staging rows, one per key, in random key order: the
--              customer_id and the 6 attributes of bench/gen.sql's
--              dimension (mixed types, NULLs).
--   dim        an EMPTY dimension of bench/gen.sql's shape (customer_sk
--              identity primary key), registered with
--              scd2.register('dim', ARRAY['customer_id']) when use_scd2=1:
--              approach scd2 loads it.
--   bench_params the parameters (for GEN=0).
-- dbt's table (dim_dbt) and the floor's (dim_floor) are created by the
-- timed statements themselves (approaches/*.sql), in transactions that are
-- rolled back.
\set ON_ERROR_STOP on
\if :{?rows} \else \set rows 1000000 \endif
\if :{?use_scd2} \else \set use_scd2 0 \endif
\if :{?seed} \else \set seed 42 \endif
SET client_min_messages = warning;
SET maintenance_work_mem = '1GB';
SET work_mem = '256MB';

\if :use_scd2
SELECT scd2.unregister(d.dimension) FROM scd2.dimensions d
 WHERE d.dimension = to_regclass('public.dim') \g /dev/null
\endif
DROP TABLE IF EXISTS dim, dim_dbt, dim_floor, dim_seed, stg, bench_params;

CREATE TABLE bench_params AS SELECT :rows::bigint AS rows;

CREATE TABLE stg (
    customer_id   bigint NOT NULL,
    name          text,
    city          text,
    tier          text,
    email         text,
    birth_date    date,
    credit_limit  numeric(12,2)
);
INSERT INTO stg
SELECT k, 'Customer ' || k,
       (ARRAY['Amsterdam','Berlin','Chicago','Dublin','Edinburgh','Frankfurt','Geneva','Hamburg',
              'Istanbul','Jakarta','Kyiv','Lisbon','Madrid','Nairobi','Oslo','Paris','Quito',
              'Rome','Seoul','Tokyo','Utrecht','Vienna','Warsaw','Xiamen','York','Zurich'])[1 + (h1 & 2147483647) % 26],
       CASE WHEN (h2 & 2147483647) % 20 = 0 THEN NULL
            ELSE (ARRAY['bronze','silver','gold','platinum'])[1 + (h2 & 2147483647) % 4] END,
       CASE WHEN (h3 & 2147483647) % 10 = 0 THEN NULL ELSE 'c' || k || '.1@example.com' END,
       date '1950-01-01' + (h4 & 2147483647) % 20000,
       CASE WHEN (h5 & 2147483647) % 20 = 0 THEN NULL
            ELSE ((h5 & 2147483647) % 1000000 / 10.0)::numeric(12,2) END
  FROM generate_series(1, :rows::bigint) k,
       LATERAL (SELECT hashint8(k * 64 + 1) AS h1, hashint8(k * 64 + 2) AS h2,
                       hashint8(k * 64 + 3) AS h3, hashint8(k * 64 + 4) AS h4,
                       hashint8(k * 64 + 5) AS h5) h
 ORDER BY hashint8(k # :seed), k;

\ir ../dim.sql
\if :use_scd2
SELECT scd2.register('dim', ARRAY['customer_id']) \g /dev/null
\else
CREATE UNIQUE INDEX dim_scd2_current ON dim (customer_id) WHERE valid_to IS NULL;
CREATE UNIQUE INDEX dim_scd2_asof ON dim (customer_id, valid_from) INCLUDE (customer_sk, valid_to);
\endif

VACUUM (ANALYZE) stg, dim;
CHECKPOINT;
