-- First load, approach seeds: the seeds' staged-union MERGE
-- (bench/approaches/seeds.sql) into their empty dimension -- dim's columns
-- plus row_hash, with the same three indexes -- from the seeds' staging
-- view, which hashes the tracked attributes on read.  Into an empty table
-- every row is "not matched": the MERGE inserts every staging row, and its
-- second branch (changed rows) is empty.
CREATE TABLE dim_seed (LIKE dim INCLUDING DEFAULTS INCLUDING IDENTITY);
ALTER TABLE dim_seed ADD COLUMN row_hash text;
ALTER TABLE dim_seed ADD PRIMARY KEY (customer_sk);
CREATE UNIQUE INDEX dim_seed_current ON dim_seed (customer_id) WHERE valid_to IS NULL;
CREATE UNIQUE INDEX dim_seed_asof ON dim_seed (customer_id, valid_from) INCLUDE (customer_sk, valid_to);
-- the seeds' staging view and MERGE, as bench/gen.sql and
-- bench/approaches/seeds.sql have them (created and rolled back with the load)
\ir ../stg_hashed.sql
\set has_deleted false
\ir ../approaches/seeds.sql
