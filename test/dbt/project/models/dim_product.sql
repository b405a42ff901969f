-- Every other config: a tracked list (description is copied, never
-- compared), a delete marker (not kept in the dimension), a date effective
-- column (the validity columns are dates), 'infinity' for current rows,
-- bookkeeping columns of other names, no is_current, no surrogate key.
{{ config(
    materialized='scd2',
    unique_key='sku',
    tracked=['price'],
    delete_column='is_deleted',
    effective_column='changed_on',
    current_valid_to='infinity',
    valid_from_column='valid_from_date',
    valid_to_column='valid_to_date',
    is_current_column=none,
    surrogate_key_column=none
) }}

select sku, price, description, changed_on, is_deleted
from {{ source('crm', 'products') }}
