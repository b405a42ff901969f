{#-
  materialized='scd2': the model's SELECT is the staging query of an SCD
  Type 2 dimension kept by the scd2 extension, and the model's relation is
  the dimension.

  Every run, inside the model's transaction:
    1. stages the SELECT into a temporary table (dropped at commit), named
       "<model> (dbt model)";
    2. on the first run, creates the dimension shaped after it (the model's
       columns, less the delete marker, plus the bookkeeping columns) and
       registers it with scd2.register; an existing table that is not
       registered yet (e.g. a dbt snapshot taken over) is registered; a
       registration that differs from the config is updated (dbt's
       on_schema_change is register's: the load itself adds the model's
       new columns, widens types or refuses, under its lock);
    3. loads it with CALL scd2.apply, its form that returns the run id
       (not with --empty);
    4. reports the run's metrics as the adapter response (rows_affected =
       rows written) and logs the run id.
  --full-refresh never rebuilds the dimension (its history is not in the
  source any more): it fails with a hint, unless the model sets
  rebuild_on_full_refresh: true.
-#}
{% materialization scd2, adapter='postgres' %}

  {%- set cfg = scd2.scd2__config() -%}
  {%- set target_relation = this.incorporate(type='table') -%}
  {%- set existing_relation = load_cached_relation(this) -%}
  {%- set grant_config = config.get('grants') -%}
  {%- set full_refresh = should_full_refresh() -%}

  {%- if existing_relation is not none and existing_relation.type != 'table' -%}
    {{ exceptions.raise_compiler_error("scd2: " ~ target_relation ~ " exists and is a " ~ existing_relation.type ~ ", not a table; drop it or give the model another alias") }}
  {%- endif -%}

  {%- if existing_relation is not none and full_refresh and not cfg.rebuild_on_full_refresh -%}
    {{ exceptions.raise_compiler_error("scd2: --full-refresh would destroy the history kept in " ~ target_relation ~ ", which the source cannot rebuild; the dimension was left alone.\n  Hint: run without --full-refresh (or exclude this model, or set full_refresh: false in its config). To rebuild the dimension from the current source on purpose, losing its history, set rebuild_on_full_refresh: true in the model's config for that run.") }}
  {%- endif -%}

  {{ run_hooks(pre_hooks, inside_transaction=False) }}
  {{ run_hooks(pre_hooks, inside_transaction=True) }}

  {%- if existing_relation is not none and full_refresh -%}
    {{ log("scd2: rebuilding " ~ target_relation ~ " (rebuild_on_full_refresh): its history is dropped", info=True) }}
    {% do adapter.drop_relation(existing_relation) %}
    {%- set existing_relation = none -%}
  {%- endif -%}

  {#- 1. stage: into a temporary table named after the model, the name
      scd2's errors and the audit log's staging column give ("staging table
      pg_temp_3."dim_customer (dbt model)" has a NULL business key"), not a
      generated one -#}
  {%- set staging_relation = api.Relation.create(identifier=model.name ~ ' (dbt model)', type='table') -%}
  {% call statement('scd2_stage') -%}
    create temporary table {{ staging_relation }} on commit drop as (
      {{ sql }}
    )
  {%- endcall %}

  {#- 2. the dimension and its registration -#}
  {%- if existing_relation is none -%}
    {% do scd2.scd2__create_dimension(target_relation, staging_relation, cfg) %}
    {{ log("scd2: created " ~ target_relation ~ " and registered it (business key " ~ cfg.unique_key | join(', ') ~ ")", info=True) }}
  {%- else -%}
    {%- set state = scd2.scd2__registration_state(target_relation, cfg) -%}
    {%- if state == 'bookkeeping' -%}
      {{ exceptions.raise_compiler_error("scd2: the bookkeeping columns or current_valid_to in the config of " ~ model.name ~ " differ from the registration of " ~ target_relation ~ "; its existing rows follow the registration, so the dimension was left alone.\n  Hint: restore the config (see the registry: select * from scd2.dimensions), or migrate the table and register it again by hand.") }}
    {%- elif state != 'same' -%}
      {% call statement('scd2_register') -%}
        {%- if cfg.inferred_column is not none %}
        {{ scd2.scd2__add_inferred_column(target_relation, cfg) }};
        {%- endif %}
        {{ scd2.scd2__register_sql(target_relation, cfg) }}
      {%- endcall %}
      {{ log("scd2: " ~ ("registered the existing table " if state == 'missing' else "updated the registration of ") ~ target_relation, info=True) }}
    {%- endif -%}
  {%- endif -%}

  {#- 3. load (not with --empty: an empty extract would close every key in snapshot mode) -#}
  {%- if flags.EMPTY is true -%}
    {{ log("scd2: --empty: " ~ target_relation ~ " was not loaded", info=True) }}
    {% call noop_statement('main', 'SCD2 0 (--empty)', 'SCD2', 0) -%}
      -- --empty: no load
    {%- endcall %}
  {%- else -%}
  {% call statement('scd2_apply', fetch_result=True) -%}
    call scd2.apply({{ scd2.scd2__regclass(staging_relation) }}, {{ scd2.scd2__regclass(target_relation) }}, pg_catalog.now(), null)
  {%- endcall %}
  {%- set run_id = load_result('scd2_apply')['data'][0][0] -%}

  {#- 4. report: the metrics by name, from the run's audit row.  Every bigint
      column of scd2.audit_log but run_id is a metric (src/metrics.h), shown
      in column order as its name with spaces; one a later release added
      (after message: NONZERO in metrics.h) only when not 0.  The rows
      written are every metric but what the load read (source_rows) or left
      alone. -#}
  {% call statement('scd2_metrics', fetch_result=True) -%}
    select a.attname::text, v.value
      from scd2.audit_log l, pg_catalog.pg_attribute a,
           lateral (select (pg_catalog.to_jsonb(l) ->> a.attname::text)::bigint as value) v
     where l.run_id = {{ run_id }}
       and a.attrelid = 'scd2.audit_log'::regclass and a.attnum > 0 and not a.attisdropped
       and a.atttypid = 'bigint'::regtype and a.attname <> 'run_id'
       and (v.value <> 0 or a.attnum < (select m.attnum from pg_catalog.pg_attribute m
                                         where m.attrelid = a.attrelid and m.attname = 'message'))
     order by a.attnum
  {%- endcall %}
  {%- set m = namespace(parts=[], written=0) -%}
  {%- for name, value in load_result('scd2_metrics')['data'] -%}
    {#- one of a count: "1 source row", "1 new version", "1 duplicate" -#}
    {%- set words = name.replace('_', ' ') -%}
    {%- if value == 1 and words.endswith('s') -%}{%- set words = words[:-1] -%}{%- endif -%}
    {%- do m.parts.append(value ~ " " ~ words) -%}
    {%- if name not in ['source_rows', 'unchanged', 'duplicates', 'facts_rekeyed'] -%}
      {%- set m.written = m.written + value -%}
    {%- endif -%}
  {%- endfor -%}
  {%- set written = m.written -%}
  {%- set summary = "scd2 run " ~ run_id ~ ": " ~ m.parts | join(", ") -%}
  {{ log(summary ~ " (" ~ target_relation ~ ", scd2.audit_log)", info=True) }}
  {% call noop_statement('main', 'SCD2 ' ~ written, 'SCD2', written) -%}
    -- {{ summary }}
  {%- endcall %}
  {%- endif -%}

  {{ run_hooks(post_hooks, inside_transaction=True) }}

  {%- set should_revoke = should_revoke(existing_relation, full_refresh_mode=False) -%}
  {% do apply_grants(target_relation, grant_config, should_revoke=should_revoke) %}
  {% do persist_docs(target_relation, model) %}

  {{ adapter.commit() }}

  {{ run_hooks(post_hooks, inside_transaction=False) }}

  {{ return({'relations': [target_relation]}) }}

{% endmaterialization %}

{#-
  The first run: the dimension has the model's columns (types, typmods and
  collations of the SELECT), less the delete marker, with the business key
  NOT NULL, then the bookkeeping columns: surrogate key (identity),
  valid_from and valid_to (of the effective column's type when it has a
  date/time type, else timestamptz; a current_valid_to other than null is
  valid_to's default) and is_current, and with inferred_column the flag of
  inferred members (scd2__add_inferred_column).  The effective column
  stays a column of the dimension, filled from staging in every new
  version (dbt's updated_at).
-#}
{% macro scd2__create_dimension(target, staging, cfg) %}
  {%- set validity_type = 'timestamp with time zone' -%}
  {%- if cfg.effective_column is not none -%}
    {% call statement('scd2_effective_type', fetch_result=True) -%}
      select pg_catalog.format_type(a.atttypid, a.atttypmod)
        from pg_catalog.pg_attribute a
       where a.attrelid = {{ scd2.scd2__regclass(staging) }} and a.attname = {{ scd2.scd2__literal(cfg.effective_column) }}
         and a.atttypid in ('timestamptz'::pg_catalog.regtype, 'timestamp'::pg_catalog.regtype, 'date'::pg_catalog.regtype)
    {%- endcall %}
    {%- set rows = load_result('scd2_effective_type')['data'] -%}
    {%- if rows | length > 0 -%}{%- set validity_type = rows[0][0] -%}{%- endif -%}
  {%- endif -%}
  {% call statement('scd2_create') -%}
    create table {{ target }} as select * from {{ staging }} with no data;
    {%- if cfg.delete_column is not none %}
    alter table {{ target }} drop column {{ scd2.scd2__ident(cfg.delete_column) }};
    {%- endif %}
    alter table {{ target }}
    {%- for k in cfg.unique_key %}
        alter column {{ scd2.scd2__ident(k) }} set not null,
    {%- endfor %}
    {%- if cfg.surrogate_key_column is not none %}
        add column {{ scd2.scd2__ident(cfg.surrogate_key_column) }} bigint generated always as identity primary key,
    {%- endif %}
        add column {{ scd2.scd2__ident(cfg.valid_from_column) }} {{ validity_type }} not null,
        add column {{ scd2.scd2__ident(cfg.valid_to_column) }} {{ validity_type }}
        {%- if cfg.current_valid_to != 'null' %} not null default {{ scd2.scd2__literal(cfg.current_valid_to) }}{% endif %}
    {%- if cfg.is_current_column is not none %},
        add column {{ scd2.scd2__ident(cfg.is_current_column) }} boolean not null default true
    {%- endif %};
    {%- if cfg.inferred_column is not none %}
    {{ scd2.scd2__add_inferred_column(target, cfg) }};
    {%- endif %}
    {{ scd2.scd2__register_sql(target, cfg) }}
  {%- endcall %}
{% endmacro %}

{#-
  The flag of inferred members (config inferred_column), added to the
  dimension when it lacks it: boolean NOT NULL DEFAULT false, the column
  scd2.infer_members sets true and a load's completion clears (every other
  version takes the default).  On the first run, and before the
  registration of an existing table changes: adding inferred_column to the
  config of a dimension that has history adds the column (false in every
  existing version).  A column of that name the model's SELECT has is
  left alone: register refuses it unless it is boolean, and every load
  refuses a staging column named as the inferred_column, naming it.
-#}
{% macro scd2__add_inferred_column(target, cfg) -%}
  alter table {{ target }} add column if not exists {{ scd2.scd2__ident(cfg.inferred_column) }} boolean not null default false
{%- endmacro %}
