{#-
  One-time creation of a dimension shaped after a staging model:
    dbt run-operation scd2_create_dimension \
      --args '{dimension: marts.dim_customer, staging: stg_customer, business_key: [customer_id]}'
-#}
{% macro scd2_create_dimension(dimension, staging, business_key) %}
  {%- set staging_relation = ref(staging) -%}
  {%- set keys = [] -%}
  {%- for k in business_key -%}{%- do keys.append("'" ~ k ~ "'") -%}{%- endfor -%}
  {%- set sql -%}
    select scd2.create_dimension('{{ dimension }}', '{{ staging_relation }}', array[{{ keys | join(', ') }}]::name[])
  {%- endset -%}
  {#- statement() opens dbt's transaction (run_query does not), so the commit has one to commit -#}
  {% call statement('scd2_create_dimension', auto_begin=True) %}{{ sql }}{% endcall %}
  {% do adapter.commit() %}
  {{ log("scd2: created and registered " ~ dimension ~ " from " ~ staging_relation, info=True) }}
{% endmacro %}
