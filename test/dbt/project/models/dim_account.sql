-- A full extract with a composite business key: keys missing from it are
-- closed (mode snapshot, dbt's hard_deletes='invalidate'); Type 2 on every
-- other column; a run may close at most half of the current keys
-- (max_close_fraction, the partial-extract guard).
{{ config(
    materialized='scd2',
    unique_key=['region', 'account_no'],
    max_close_fraction=0.5,
    mode='snapshot'
) }}

select region, account_no, owner, plan
from {{ source('crm', 'accounts') }}
