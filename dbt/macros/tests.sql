{#-
  Generic tests of a dimension's history.  Without arguments they read the
  business key and the bookkeeping columns from the dimension's scd2
  registration; for a table that is not registered (e.g. a dbt snapshot)
  pass them: unique_key, valid_from_column, valid_to_column, and
  current_valid_to (default: null, i.e. the current row's valid_to is NULL).

    models:
      - name: dim_customer
        data_tests:
          - scd2.one_current_row
          - scd2.no_overlapping_versions
-#}

{#- The columns a test needs: from its arguments, else from the registry. -#}
{% macro scd2__test_columns(model, unique_key, valid_from_column, valid_to_column, current_valid_to, is_current_column) %}
  {%- set cols = {
      'unique_key': scd2.scd2__as_list(unique_key, 'unique_key'),
      'valid_from_column': valid_from_column,
      'valid_to_column': valid_to_column,
      'current_valid_to': current_valid_to,
      'is_current_column': is_current_column } -%}
  {%- if execute and cols.unique_key is none -%}
    {%- set query -%}
      select pg_catalog.array_to_json(d.business_key)::text, d.valid_from_column::text, d.valid_to_column::text,
             d.current_valid_to, d.is_current_column::text
        from scd2.dimensions d
       where d.dimension = pg_catalog.to_regclass({{ scd2.scd2__literal(model.include(database=False)) }})
    {%- endset -%}
    {%- set rows = run_query(query).rows -%}
    {%- if rows | length == 0 -%}
      {{ exceptions.raise_compiler_error("scd2: " ~ model ~ " is not a registered scd2 dimension; pass unique_key (and valid_from_column, valid_to_column, current_valid_to) to the test") }}
    {%- endif -%}
    {%- do cols.update({'unique_key': fromjson(rows[0][0]),
                        'valid_from_column': valid_from_column or rows[0][1],
                        'valid_to_column': valid_to_column or rows[0][2],
                        'current_valid_to': current_valid_to or rows[0][3],
                        'is_current_column': is_current_column or rows[0][4]}) -%}
  {%- endif -%}
  {%- if cols.unique_key is none -%}{%- do cols.update({'unique_key': ['_unknown_']}) -%}{%- endif -%}
  {%- do cols.update({'valid_from_column': cols.valid_from_column or 'valid_from',
                      'valid_to_column': cols.valid_to_column or 'valid_to',
                      'current_valid_to': cols.current_valid_to or 'null'}) -%}
  {{ return(cols) }}
{% endmacro %}

{#- "valid_to marks a current row", for a current_valid_to convention. -#}
{% macro scd2__current_predicate(cols) -%}
  {%- if cols.current_valid_to == 'null' -%}
    {{ scd2.scd2__ident(cols.valid_to_column) }} is null
  {%- else -%}
    {{ scd2.scd2__ident(cols.valid_to_column) }} = {{ scd2.scd2__literal(cols.current_valid_to) }}
  {%- endif -%}
{%- endmacro %}

{#-
  At most one current row per business key; where the dimension has an
  is_current column, it is true exactly on the rows whose valid_to marks
  them current.  Fails with one row per key at fault.
-#}
{% test one_current_row(model, unique_key=none, valid_from_column=none, valid_to_column=none, current_valid_to=none, is_current_column=none) %}
  {%- set cols = scd2.scd2__test_columns(model, unique_key, valid_from_column, valid_to_column, current_valid_to, is_current_column) -%}
  {%- set keys = [] -%}
  {%- for k in cols.unique_key -%}{%- do keys.append(scd2.scd2__ident(k)) -%}{%- endfor -%}
  select {{ keys | join(', ') }}, 'current rows: ' || pg_catalog.count(*) as problem
    from {{ model }}
   where {{ scd2.scd2__current_predicate(cols) }}
   group by {{ keys | join(', ') }}
  having pg_catalog.count(*) > 1
  {%- if cols.is_current_column %}
  union all
  select {{ keys | join(', ') }}, 'is_current disagrees with valid_to at ' || {{ scd2.scd2__ident(cols.valid_from_column) }}::text
    from {{ model }}
   where {{ scd2.scd2__ident(cols.is_current_column) }} is distinct from ({{ scd2.scd2__current_predicate(cols) }})
  {%- endif %}
{% endtest %}

{#-
  The versions of a business key do not overlap: each ends (valid_to) no
  later than the next one starts, and none ends before it starts.  Fails
  with one row per version at fault.
-#}
{% test no_overlapping_versions(model, unique_key=none, valid_from_column=none, valid_to_column=none, current_valid_to=none) %}
  {%- set cols = scd2.scd2__test_columns(model, unique_key, valid_from_column, valid_to_column, current_valid_to, none) -%}
  {%- set keys = [] -%}
  {%- for k in cols.unique_key -%}{%- do keys.append(scd2.scd2__ident(k)) -%}{%- endfor -%}
  {%- set vf = scd2.scd2__ident(cols.valid_from_column) -%}
  {%- set vt = scd2.scd2__ident(cols.valid_to_column) -%}
  select *
    from (select {{ keys | join(', ') }}, {{ vf }} as valid_from, {{ vt }} as valid_to,
                 pg_catalog.lead({{ vf }}) over (partition by {{ keys | join(', ') }} order by {{ vf }}) as next_valid_from
            from {{ model }}) v
   where v.next_valid_from < coalesce(v.valid_to, 'infinity')
      or v.valid_to <= v.valid_from
{% endtest %}
