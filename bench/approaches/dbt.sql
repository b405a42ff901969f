-- Approach 3: what a dbt snapshot (strategy='check', check_cols='all',
-- unique_key='customer_id') runs on PostgreSQL for an existing snapshot
-- table, rendered from dbt's macros:
--   snapshot_check_strategy (dbt-core strategies.sql): row_changed is a
--     per-column != with null-pair checks over every column of the query;
--     updated_at = snapshot_string_as_time(now) -- a literal timestamp
--     without time zone; dbt_scd_id = md5 of unique_key and updated_at
--     (default__snapshot_hash_arguments);
--   default__snapshot_staging_table (helpers.sql): the snapshot_query,
--     snapshotted_data, insertions_source_data, updates_source_data,
--     insertions and updates CTEs, materialised by
--     build_snapshot_staging_table as a temporary table
--     (postgres__create_table_as);
--   postgres__snapshot_merge_sql (dbt-postgres snapshot_merge.sql): UPDATE
--     ... FROM the temp table on dbt_scd_id, then INSERT ... SELECT of the
--     'insert' rows.
-- The snapshot's SQL is `select * from stg`. dbt's catalog look-ups between
-- the statements (get_columns_in_query, expand_target_column_types,
-- get_missing_columns, get_columns_in_relation) are left out: they cost
-- milliseconds. dim_dbt has no indexes, as dbt leaves it.
-- {EFF_TS} is replaced by run.sh with the load's instant in UTC.

create temporary table "dim_dbt__dbt_tmp"
  as (
    with snapshot_query as (

        select * from stg

    ),

    snapshotted_data as (

        select *,
            customer_id as dbt_unique_key

        from dim_dbt
        where
                dbt_valid_to is null

    ),

    insertions_source_data as (

        select *,
            customer_id as dbt_unique_key
        ,
            :'eff_ts'::timestamp without time zone as dbt_updated_at,
            :'eff_ts'::timestamp without time zone as dbt_valid_from,
            coalesce(nullif(:'eff_ts'::timestamp without time zone, :'eff_ts'::timestamp without time zone), null)
  as dbt_valid_to,
            md5(coalesce(cast(customer_id as varchar ), '')
         || '|' || coalesce(cast(:'eff_ts'::timestamp without time zone as varchar ), '')
        ) as dbt_scd_id

        from snapshot_query
    ),

    updates_source_data as (

        select *,
            customer_id as dbt_unique_key
        ,
            :'eff_ts'::timestamp without time zone as dbt_updated_at,
            :'eff_ts'::timestamp without time zone as dbt_valid_from,
            :'eff_ts'::timestamp without time zone as dbt_valid_to

        from snapshot_query
    ),

    insertions as (

        select
            'insert' as dbt_change_type,
            source_data.*

        from insertions_source_data as source_data
        left outer join snapshotted_data on
                snapshotted_data.dbt_unique_key = source_data.dbt_unique_key
                where snapshotted_data.dbt_unique_key is null
                or (
                    snapshotted_data.dbt_unique_key is not null
                and (
                    (snapshotted_data.customer_id != source_data.customer_id
        or
        (
            ((snapshotted_data.customer_id is null) and not (source_data.customer_id is null))
            or
            ((not snapshotted_data.customer_id is null) and (source_data.customer_id is null))
        ) or snapshotted_data.name != source_data.name
        or
        (
            ((snapshotted_data.name is null) and not (source_data.name is null))
            or
            ((not snapshotted_data.name is null) and (source_data.name is null))
        ) or snapshotted_data.city != source_data.city
        or
        (
            ((snapshotted_data.city is null) and not (source_data.city is null))
            or
            ((not snapshotted_data.city is null) and (source_data.city is null))
        ) or snapshotted_data.tier != source_data.tier
        or
        (
            ((snapshotted_data.tier is null) and not (source_data.tier is null))
            or
            ((not snapshotted_data.tier is null) and (source_data.tier is null))
        ) or snapshotted_data.email != source_data.email
        or
        (
            ((snapshotted_data.email is null) and not (source_data.email is null))
            or
            ((not snapshotted_data.email is null) and (source_data.email is null))
        ) or snapshotted_data.birth_date != source_data.birth_date
        or
        (
            ((snapshotted_data.birth_date is null) and not (source_data.birth_date is null))
            or
            ((not snapshotted_data.birth_date is null) and (source_data.birth_date is null))
        ) or snapshotted_data.credit_limit != source_data.credit_limit
        or
        (
            ((snapshotted_data.credit_limit is null) and not (source_data.credit_limit is null))
            or
            ((not snapshotted_data.credit_limit is null) and (source_data.credit_limit is null))
        )
    )
                )

        )

    ),

    updates as (

        select
            'update' as dbt_change_type,
            source_data.*,
            snapshotted_data.dbt_scd_id

        from updates_source_data as source_data
        join snapshotted_data on
                snapshotted_data.dbt_unique_key = source_data.dbt_unique_key
        where (
            (snapshotted_data.customer_id != source_data.customer_id
        or
        (
            ((snapshotted_data.customer_id is null) and not (source_data.customer_id is null))
            or
            ((not snapshotted_data.customer_id is null) and (source_data.customer_id is null))
        ) or snapshotted_data.name != source_data.name
        or
        (
            ((snapshotted_data.name is null) and not (source_data.name is null))
            or
            ((not snapshotted_data.name is null) and (source_data.name is null))
        ) or snapshotted_data.city != source_data.city
        or
        (
            ((snapshotted_data.city is null) and not (source_data.city is null))
            or
            ((not snapshotted_data.city is null) and (source_data.city is null))
        ) or snapshotted_data.tier != source_data.tier
        or
        (
            ((snapshotted_data.tier is null) and not (source_data.tier is null))
            or
            ((not snapshotted_data.tier is null) and (source_data.tier is null))
        ) or snapshotted_data.email != source_data.email
        or
        (
            ((snapshotted_data.email is null) and not (source_data.email is null))
            or
            ((not snapshotted_data.email is null) and (source_data.email is null))
        ) or snapshotted_data.birth_date != source_data.birth_date
        or
        (
            ((snapshotted_data.birth_date is null) and not (source_data.birth_date is null))
            or
            ((not snapshotted_data.birth_date is null) and (source_data.birth_date is null))
        ) or snapshotted_data.credit_limit != source_data.credit_limit
        or
        (
            ((snapshotted_data.credit_limit is null) and not (source_data.credit_limit is null))
            or
            ((not snapshotted_data.credit_limit is null) and (source_data.credit_limit is null))
        )
    )
        )
    )

    select * from insertions
    union all
    select * from updates
  );

update "dim_dbt"
    set dbt_valid_to = DBT_INTERNAL_SOURCE.dbt_valid_to
    from "dim_dbt__dbt_tmp" as DBT_INTERNAL_SOURCE
    where DBT_INTERNAL_SOURCE.dbt_scd_id::text = "dim_dbt".dbt_scd_id::text
      and DBT_INTERNAL_SOURCE.dbt_change_type::text in ('update'::text, 'delete'::text)
      and "dim_dbt".dbt_valid_to is null;

insert into "dim_dbt" ("customer_id", "name", "city", "tier", "email", "birth_date", "credit_limit", "dbt_updated_at", "dbt_valid_from", "dbt_valid_to", "dbt_scd_id")
    select DBT_INTERNAL_SOURCE."customer_id", DBT_INTERNAL_SOURCE."name", DBT_INTERNAL_SOURCE."city", DBT_INTERNAL_SOURCE."tier", DBT_INTERNAL_SOURCE."email", DBT_INTERNAL_SOURCE."birth_date", DBT_INTERNAL_SOURCE."credit_limit", DBT_INTERNAL_SOURCE."dbt_updated_at", DBT_INTERNAL_SOURCE."dbt_valid_from", DBT_INTERNAL_SOURCE."dbt_valid_to", DBT_INTERNAL_SOURCE."dbt_scd_id"
    from "dim_dbt__dbt_tmp" as DBT_INTERNAL_SOURCE
    where DBT_INTERNAL_SOURCE.dbt_change_type::text = 'insert'::text;
