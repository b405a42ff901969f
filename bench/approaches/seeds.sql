-- Approach 2: the seeds' staged-union MERGE (seed 000, the Delta/Spark SQL
-- blog post) translated to PostgreSQL 15. stg_hashed is the seeds' staging
-- view: row_hash = sha2(concat_ws('||', coalesce(col, '~'), ...), 256),
-- computed on read (so twice: once per branch of the union). dim_seed stores
-- row_hash as the seeds' dimension does. The effective time is the batch's
-- (seed 001 uses m.effective_date instead of current_timestamp()).
\if :has_deleted
-- With a delete marker the user adds a close-only branch and keeps deleted
-- rows out of the insert copies (the seeds have no incremental deletes).
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
  WHERE  t.row_hash <> s.row_hash AND NOT s.is_deleted
) AS src
ON  t.customer_id = src.merge_key
AND t.is_current  = true
WHEN MATCHED AND src.is_deleted THEN UPDATE SET
  valid_to   = :'eff',
  is_current = false
WHEN MATCHED AND t.row_hash <> src.row_hash THEN UPDATE SET
  valid_to   = :'eff',
  is_current = false
WHEN NOT MATCHED AND NOT src.is_deleted THEN INSERT
  (customer_id, name, city, tier, email, birth_date, credit_limit,
   row_hash, valid_from, valid_to, is_current)
  VALUES
  (src.customer_id, src.name, src.city, src.tier, src.email, src.birth_date, src.credit_limit,
   src.row_hash, :'eff', NULL, true);
\else
MERGE INTO dim_seed AS t
USING (
  -- 1) All staging rows, keyed normally: they close changed rows / insert new keys
  SELECT s.customer_id AS merge_key, s.*
  FROM   stg_hashed s

  UNION ALL

  -- 2) Changed rows again with a NULL key: they always become new current versions
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
\endif
