-- Verification signature of the dbt-shaped dimension (dim_dbt).
SELECT format('current=%s closed=%s opened=%s total=%s bad_is_current=%s current_fp=%s closed_fp=%s',
       count(*) FILTER (WHERE dbt_valid_to IS NULL),
       count(*) FILTER (WHERE dbt_valid_to = :'eff_ts'::timestamp),
       count(*) FILTER (WHERE dbt_valid_from = :'eff_ts'::timestamp),
       count(*),
       0,
       sum(hashtext(row(customer_id, name, city, tier, email, birth_date, credit_limit)::text)::bigint)
           FILTER (WHERE dbt_valid_to IS NULL),
       sum(customer_id) FILTER (WHERE dbt_valid_to = :'eff_ts'::timestamp))
  FROM dim_dbt;
