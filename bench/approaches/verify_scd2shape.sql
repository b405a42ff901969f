-- Verification signature of a dimension in scd2's shape (dim, dim_seed).
SELECT format('current=%s closed=%s opened=%s total=%s bad_is_current=%s current_fp=%s closed_fp=%s',
       count(*) FILTER (WHERE valid_to IS NULL),
       count(*) FILTER (WHERE valid_to = :'eff'),
       count(*) FILTER (WHERE valid_from = :'eff'),
       count(*),
       count(*) FILTER (WHERE is_current IS DISTINCT FROM (valid_to IS NULL)),
       sum(hashtext(row(customer_id, name, city, tier, email, birth_date, credit_limit)::text)::bigint)
           FILTER (WHERE valid_to IS NULL),
       sum(customer_id) FILTER (WHERE valid_to = :'eff'))
  FROM :tbl;
