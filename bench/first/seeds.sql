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
CREATE TEMP VIEW stg_hashed AS
SELECT s.*,
       encode(sha256(convert_to(concat_ws('||',
           coalesce(s.name, '~'), coalesce(s.city, '~'), coalesce(s.tier, '~'), coalesce(s.email, '~'),
           coalesce(s.birth_date::text, '~'), coalesce(s.credit_limit::text, '~')), 'UTF8')), 'hex') AS row_hash
  FROM stg s;
MERGE INTO dim_seed AS t
USING (
  SELECT s.customer_id AS merge_key, s.*
  FROM   stg_hashed s
  UNION ALL
  SELECT NULL AS merge_key, s.*
  FROM   stg_hashed s
  JOIN   dim_seed t
    ON   t.customer_id = s.customer_id
   AND   t.is_current = true
  WHERE  t.row_hash <> s.row_hash
) AS src
ON  t.customer_id = src.merge_key
AND t.is_current  = true
WHEN MATCHED AND t.row_hash <> src.row_hash THEN UPDATE SET
  valid_to   = :'eff',
  is_current = false
WHEN NOT MATCHED THEN INSERT
  (customer_id, name, city, tier, email, birth_date, credit_limit,
   row_hash, valid_from, valid_to, is_current)
  VALUES
  (src.customer_id, src.name, src.city, src.tier, src.email, src.birth_date, src.credit_limit,
   src.row_hash, :'eff', NULL, true);
