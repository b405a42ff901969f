-- A dbt snapshot (timestamp strategy, a far-future valid_to for current
-- rows) that test/dbt/run.sh builds and then takes over with the README's
-- migration model of the same name (this file is removed first: a model
-- and a snapshot cannot share a name).
{% snapshot customers_snapshot %}
{{ config(
    target_schema='analytics_snapshots',
    unique_key='customer_id',
    strategy='timestamp',
    updated_at='updated_at',
    dbt_valid_to_current="'9999-12-31'::timestamptz"
) }}
select customer_id, name, city, updated_at from {{ source('crm', 'customers') }}
{% endsnapshot %}
