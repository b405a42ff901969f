{#-
  Helpers of the scd2 materialization: SQL literals and identifiers built
  from model config (never pasted in unquoted), the model's configuration,
  and the registry of the extension.
-#}

{#- A double-quoted identifier. -#}
{% macro scd2__ident(name) -%}
  "{{ name | replace('"', '""') }}"
{%- endmacro %}

{#- A single-quoted string literal (text). -#}
{% macro scd2__literal(value) -%}
  '{{ value | string | replace("'", "''") }}'
{%- endmacro %}

{#- A relation as a regclass literal: schema.name (a temporary relation by name alone). -#}
{% macro scd2__regclass(relation) -%}
  {{ scd2.scd2__literal(relation.include(database=False)) }}::pg_catalog.regclass
{%- endmacro %}

{#- A list of column names as name[] (NULL for none). -#}
{% macro scd2__names(names) -%}
  {%- if names is none -%}
    NULL::pg_catalog.name[]
  {%- else -%}
    ARRAY[{%- for n in names -%}{{ scd2.scd2__literal(n) }}{{ ", " if not loop.last }}{%- endfor -%}]::pg_catalog.name[]
  {%- endif -%}
{%- endmacro %}

{#- A name or NULL. -#}
{% macro scd2__name_or_null(name) -%}
  {%- if name is none -%} NULL::pg_catalog.name {%- else -%} {{ scd2.scd2__literal(name) }}::pg_catalog.name {%- endif -%}
{%- endmacro %}

{#- A string or list config value as a list (none stays none). -#}
{% macro scd2__as_list(value, what) -%}
  {%- if value is none -%}
    {{ return(none) }}
  {%- elif value is string -%}
    {{ return([value]) }}
  {%- elif value is iterable and value is not mapping -%}
    {{ return(value | list) }}
  {%- else -%}
    {{ exceptions.raise_compiler_error("scd2: config " ~ what ~ " must be a column name or a list of column names, not " ~ value) }}
  {%- endif -%}
{%- endmacro %}

{#- An optional column name: none, false or '' mean "no such column". -#}
{% macro scd2__optional_name(value) -%}
  {{ return(none if (value is none or value is false or value == '') else value) }}
{%- endmacro %}

{#-
  The model's scd2 configuration, with the extension's defaults (names as
  in scd2.register / scd2.create_dimension).
-#}
{% macro scd2__config() -%}
  {%- set unique_key = scd2.scd2__as_list(config.get('unique_key'), 'unique_key') -%}
  {%- if not unique_key -%}
    {{ exceptions.raise_compiler_error("scd2: model " ~ model.name ~ " needs config unique_key (the business key: a column or a list of columns)") }}
  {%- endif -%}
  {%- set mode = config.get('mode', 'incremental') -%}
  {%- if mode not in ['incremental', 'snapshot'] -%}
    {{ exceptions.raise_compiler_error("scd2: config mode of " ~ model.name ~ " must be 'incremental' (a missing key means nothing, dbt's hard_deletes='ignore') or 'snapshot' (the query is a full extract: missing keys are closed, hard_deletes='invalidate'), not '" ~ mode ~ "'") }}
  {%- endif -%}
  {%- set detect = config.get('detect', 'values') -%}
  {%- if detect not in ['values', 'timestamp'] -%}
    {{ exceptions.raise_compiler_error("scd2: config detect of " ~ model.name ~ " must be 'values' (a change is a change of a tracked column, dbt's check strategy) or 'timestamp' (a change is a later effective_column, dbt's timestamp strategy), not '" ~ detect ~ "'") }}
  {%- endif -%}
  {%- set missing_columns = config.get('missing_columns', 'error') -%}
  {%- if missing_columns not in ['error', 'carry_forward'] -%}
    {{ exceptions.raise_compiler_error("scd2: config missing_columns of " ~ model.name ~ " must be 'error' (a run whose model lacks a column of the dimension fails and writes nothing) or 'carry_forward' (new versions keep the current version's value of a column the model lacks: a partial extract), not '" ~ missing_columns ~ "'") }}
  {%- endif -%}
  {#- none: scd2's default (order-free when the registration can be: an effective_column in incremental mode) -#}
  {%- set order_free = config.get('order_free', none) -%}
  {%- if order_free is not none and order_free is not boolean -%}
    {{ exceptions.raise_compiler_error("scd2: config order_free of " ~ model.name ~ " must be true (the dimension is a function of the set of events loaded, whatever their batching and arrival order; needs effective_column), false, or left out (scd2's default: order-free when it can be), not '" ~ order_free ~ "'") }}
  {%- endif -%}
  {%- set current_valid_to = config.get('current_valid_to') -%}
  {%- set max_close_fraction = config.get('max_close_fraction') -%}
  {%- if max_close_fraction is not none and (max_close_fraction is not number or max_close_fraction < 0 or max_close_fraction > 1) -%}
    {{ exceptions.raise_compiler_error("scd2: config max_close_fraction of " ~ model.name ~ " must be a number from 0 to 1 (the largest fraction of the current keys one run may close), not '" ~ max_close_fraction ~ "'") }}
  {%- endif -%}
  {%- set ignore_null_updates = scd2.scd2__as_list(config.get('ignore_null_updates'), 'ignore_null_updates') -%}
  {%- set on_schema_change = config.get('on_schema_change') or 'ignore' -%}
  {%- if on_schema_change not in ['ignore', 'append_new_columns', 'sync_all_columns', 'fail'] -%}
    {{ exceptions.raise_compiler_error("scd2: config on_schema_change of " ~ model.name ~ " must be 'ignore' (new columns of the model are not loaded, and named in the run's audit row), 'append_new_columns' (they are added to the dimension), 'sync_all_columns' (also widened types widen it; no column is ever dropped) or 'fail' (any difference fails the run), not '" ~ on_schema_change ~ "'") }}
  {%- endif -%}
  {%- do return({
      'unique_key': unique_key,
      'tracked': scd2.scd2__as_list(config.get('tracked'), 'tracked'),
      'type1': scd2.scd2__as_list(config.get('type1'), 'type1'),
      'effective_column': scd2.scd2__optional_name(config.get('effective_column')),
      'delete_column': scd2.scd2__optional_name(config.get('delete_column')),
      'mode': mode,
      'detect': detect,
      'max_close_fraction': max_close_fraction,
      'missing_columns': missing_columns,
      'order_free': order_free,
      'current_valid_to': 'null' if current_valid_to is none else (current_valid_to | string),
      'valid_from_column': config.get('valid_from_column', 'valid_from'),
      'valid_to_column': config.get('valid_to_column', 'valid_to'),
      'is_current_column': scd2.scd2__optional_name(config.get('is_current_column', 'is_current')),
      'surrogate_key_column': scd2.scd2__optional_name(config.get('surrogate_key_column', 'sk')),
      'rebuild_on_full_refresh': config.get('rebuild_on_full_refresh', false) is true,
      'on_schema_change': on_schema_change,
      'inferred_column': scd2.scd2__optional_name(config.get('inferred_column')),
      'sequence_column': scd2.scd2__optional_name(config.get('sequence_column')),
      'ignore_null_updates': ignore_null_updates if ignore_null_updates else none,
  }) -%}
{%- endmacro %}

{#- The named arguments of scd2.register for a configuration. -#}
{% macro scd2__register_sql(target, cfg) -%}
  select scd2.register({{ scd2.scd2__regclass(target) }}, {{ scd2.scd2__names(cfg.unique_key) }},
      tracked => {{ scd2.scd2__names(cfg.tracked) }},
      type1 => {{ scd2.scd2__names(cfg.type1) }},
      effective_column => {{ scd2.scd2__name_or_null(cfg.effective_column) }},
      delete_column => {{ scd2.scd2__name_or_null(cfg.delete_column) }},
      mode => {{ scd2.scd2__literal(cfg.mode) }},
      valid_from_column => {{ scd2.scd2__name_or_null(cfg.valid_from_column) }},
      valid_to_column => {{ scd2.scd2__name_or_null(cfg.valid_to_column) }},
      is_current_column => {{ scd2.scd2__name_or_null(cfg.is_current_column) }},
      surrogate_key_column => {{ scd2.scd2__name_or_null(cfg.surrogate_key_column) }},
      current_valid_to => {{ scd2.scd2__literal(cfg.current_valid_to) }}
      {%- if cfg.detect != 'values' %},
      detect => {{ scd2.scd2__literal(cfg.detect) }}
      {%- endif %}
      {%- if cfg.max_close_fraction is not none %},
      max_close_fraction => {{ cfg.max_close_fraction }}
      {%- endif %}
      {%- if cfg.missing_columns != 'error' %},
      missing_columns => {{ scd2.scd2__literal(cfg.missing_columns) }}
      {%- endif %}
      {%- if cfg.on_schema_change != 'ignore' %},
      on_schema_change => {{ scd2.scd2__literal(cfg.on_schema_change) }}
      {%- endif %}
      {%- if cfg.order_free is not none %},
      order_free => {{ 'true' if cfg.order_free else 'false' }}
      {%- endif %}
      {%- if cfg.inferred_column is not none %},
      inferred_column => {{ scd2.scd2__name_or_null(cfg.inferred_column) }}
      {%- endif %}
      {%- if cfg.sequence_column is not none %},
      sequence_column => {{ scd2.scd2__name_or_null(cfg.sequence_column) }}
      {%- endif %}
      {%- if cfg.ignore_null_updates is not none %},
      ignore_null_updates => {{ scd2.scd2__names(cfg.ignore_null_updates) }}
      {%- endif %})
{%- endmacro %}

{#-
  How the registration of a dimension compares with a configuration:
  'missing' (not registered), 'same', 'options' (business key, tracked,
  Type 1, effective/delete column, mode, detection, max_close_fraction,
  missing_columns, on_schema_change, order_free, inferred_column,
  sequence_column or ignore_null_updates differ: registering again is
  safe) or 'bookkeeping' (bookkeeping column names or current_valid_to
  differ: the existing rows follow the old ones).  The options later
  releases added are read through to_jsonb, so that the comparison also
  runs against an older extension (a missing one is the default).
-#}
{% macro scd2__registration_state(target, cfg) -%}
  {%- set query -%}
    select case
        when d.dimension is null then 'missing'
        when d.valid_from_column is distinct from {{ scd2.scd2__name_or_null(cfg.valid_from_column) }}
          or d.valid_to_column is distinct from {{ scd2.scd2__name_or_null(cfg.valid_to_column) }}
          or (d.is_current_column is distinct from {{ scd2.scd2__name_or_null(cfg.is_current_column) }}
              and {{ scd2.scd2__name_or_null(cfg.is_current_column) }} is not null)
          or (d.surrogate_key_column is distinct from {{ scd2.scd2__name_or_null(cfg.surrogate_key_column) }}
              and {{ scd2.scd2__name_or_null(cfg.surrogate_key_column) }} is not null)
          {%- if cfg.current_valid_to in ['null', 'infinity'] %}
          or d.current_valid_to <> {{ scd2.scd2__literal(cfg.current_valid_to) }}
          {%- else %}
          or case when d.current_valid_to in ('null', 'infinity') then true
                  else d.current_valid_to::pg_catalog.timestamptz <> {{ scd2.scd2__literal(cfg.current_valid_to) }}::pg_catalog.timestamptz end
          {%- endif %}
          then 'bookkeeping'
        when d.business_key is distinct from {{ scd2.scd2__names(cfg.unique_key) }}
          or d.tracked is distinct from {{ scd2.scd2__names(cfg.tracked) }}
          or d.type1 is distinct from coalesce({{ scd2.scd2__names(cfg.type1) }}, '{}')
          or d.effective_column is distinct from {{ scd2.scd2__name_or_null(cfg.effective_column) }}
          or d.delete_column is distinct from {{ scd2.scd2__name_or_null(cfg.delete_column) }}
          or d.mode is distinct from {{ scd2.scd2__literal(cfg.mode) }}
          or coalesce(pg_catalog.to_jsonb(d) ->> 'detect', 'values') is distinct from {{ scd2.scd2__literal(cfg.detect) }}
          or (pg_catalog.to_jsonb(d) ->> 'max_close_fraction')::pg_catalog.float4 is distinct from {{ 'null' if cfg.max_close_fraction is none else cfg.max_close_fraction }}::pg_catalog.float4
          or coalesce(pg_catalog.to_jsonb(d) ->> 'missing_columns', 'error') is distinct from {{ scd2.scd2__literal(cfg.missing_columns) }}
          or coalesce(pg_catalog.to_jsonb(d) ->> 'on_schema_change', 'ignore') is distinct from {{ scd2.scd2__literal(cfg.on_schema_change) }}
          {%- if cfg.order_free is not none %}
          or coalesce((pg_catalog.to_jsonb(d) ->> 'order_free')::pg_catalog.bool, false) is distinct from {{ 'true' if cfg.order_free else 'false' }}
          {%- endif %}
          or (pg_catalog.to_jsonb(d) ->> 'inferred_column') is distinct from {{ scd2.scd2__name_or_null(cfg.inferred_column) }}::pg_catalog.text
          or (pg_catalog.to_jsonb(d) ->> 'sequence_column') is distinct from {{ scd2.scd2__name_or_null(cfg.sequence_column) }}::pg_catalog.text
          or coalesce(pg_catalog.to_jsonb(d) -> 'ignore_null_updates', '[]'::pg_catalog.jsonb)
             is distinct from pg_catalog.to_jsonb(coalesce({{ scd2.scd2__names(cfg.ignore_null_updates) }}, '{}'))
          then 'options'
        else 'same' end
      from (select 1) one
      left join scd2.dimensions d on d.dimension = pg_catalog.to_regclass({{ scd2.scd2__literal(target.include(database=False)) }})
  {%- endset -%}
  {%- call statement('scd2_registration', fetch_result=True) -%}{{ query }}{%- endcall -%}
  {{ return(load_result('scd2_registration')['data'][0][0]) }}
{%- endmacro %}
