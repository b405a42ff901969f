-- The same dbt snapshot, kept by dbt all along: test/dbt/run.sh compares
-- the taken-over table with it, row for row.
{% snapshot customers_snapshot_ref %}
{{ config(
    target_schema='analytics_snapshots',
    unique_key='customer_id',
    strategy='timestamp',
    updated_at='updated_at',
    dbt_valid_to_current="'9999-12-31'::timestamptz"
) }}
select customer_id, name, city, updated_at from {{ source('crm', 'customers') }}
{% endsnapshot %}
