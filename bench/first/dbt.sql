-- First load, approach dbt: what the first run of a dbt snapshot
-- (strategy='check', unique_key='customer_id') runs on PostgreSQL,
-- rendered from dbt's macros: build_snapshot_table (dbt-core
-- snapshots/helpers.sql) wrapped in postgres__create_table_as -- a
-- CREATE TABLE AS of the snapshot query with dbt's four columns, no
-- indexes. {eff_ts} is the run's instant as dbt's timestamp without time
-- zone.
create table "dim_dbt"
  as (
    select *,
        md5(coalesce(cast(customer_id as varchar ), '')
         || '|' || coalesce(cast(:'eff_ts'::timestamp without time zone as varchar ), '')
        ) as dbt_scd_id,
        :'eff_ts'::timestamp without time zone as dbt_updated_at,
        :'eff_ts'::timestamp without time zone as dbt_valid_from,
        coalesce(nullif(:'eff_ts'::timestamp without time zone, :'eff_ts'::timestamp without time zone), null)
  as dbt_valid_to
    from (
        select * from stg
    ) sbq
  );
