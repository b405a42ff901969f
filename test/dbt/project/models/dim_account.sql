-- A full extract with a composite business key: keys missing from it are
-- closed (mode snapshot, dbt's hard_deletes='invalidate'); Type 2 on every
-- other column.
{{ config(
    materialized='scd2',
    unique_key=['region', 'account_no'],
    mode='snapshot'
) }}

select region, account_no, owner, plan
from {{ source('crm', 'accounts') }}
