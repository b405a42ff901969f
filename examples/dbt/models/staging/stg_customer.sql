-- The staging model.  After dbt builds it (inside the model's
-- transaction) the post-hook loads its rows into the SCD Type 2 dimension:
-- {{ this }} renders as "db"."staging"."stg_customer", this model.
--
-- after_commit variant: the rebuilt model is committed first and kept even
-- if the load fails, and a failed load leaves an 'error' row in
-- scd2.audit_log:
--   post_hook=after_commit("CALL scd2.apply('{{ this }}', 'marts.dim_customer')")
--
-- Keep the hook a single CALL (several statements in one hook run as one
-- implicit transaction, where a failed load keeps no error row).
{{ config(
    materialized='table',
    post_hook="CALL scd2.apply('{{ this }}', 'marts.dim_customer')"
) }}

select
    customer_id,
    name,
    city,
    tier
from {{ source('crm', 'customers') }}
