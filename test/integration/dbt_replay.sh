#!/usr/bin/env bash
# scd2 from dbt: replays with psql the statements dbt-postgres sends for a
# table model with a post-hook calling scd2.apply (dbt itself is not
# needed), and checks the dimension and the audit log.
#
# What dbt-postgres does for `materialized='table'` (dbt-adapters'
# table materialization, psycopg2 without autocommit):
#   BEGIN                                      (psycopg2, implicitly)
#   create table "db"."schema"."m__dbt_tmp" as (<model SQL>);
#   alter table "db"."schema"."m" rename to "m__dbt_backup";
#   alter table "db"."schema"."m__dbt_tmp" rename to "m";
#   <post-hooks>                               (inside the transaction)
#   COMMIT
#   drop table if exists "db"."schema"."m__dbt_backup" cascade;
#   commit;                                    (run_hooks, before after_commit hooks)
#   <after_commit post-hooks>                  (no transaction open: top level)
# `{{ this }}` in a hook renders as "db"."schema"."m": the staging model.
#
# Creates (drops first) the database scd2_dbt.

here=$(cd "$(dirname "$0")" && pwd)
SUITE=dbt
# shellcheck source=lib.sh
source "$here/lib.sh"
DB=scd2_dbt
THIS="\"$DB\".\"staging\".\"stg_customer\""
HOOK="CALL scd2.apply('$THIS', 'marts.dim_customer')"

if ! sql postgres -c "SET client_min_messages = warning" -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null; then
    not_ok "create database $DB"
    finish
fi
trap 'sql postgres -c "DROP DATABASE IF EXISTS $DB" >/dev/null 2>&1' EXIT

# The model: staging.stg_customer, a table built from raw.customers.
build_model() {
    cat <<SQL
create  table "$DB"."staging"."stg_customer__dbt_tmp"
  as
  (
    select customer_id, name, city from raw.customers
  );
SQL
    if [ "$(q $DB "SELECT to_regclass('staging.stg_customer') IS NOT NULL")" = t ]; then
        echo "alter table \"$DB\".\"staging\".\"stg_customer\" rename to \"stg_customer__dbt_backup\";"
    fi
    echo "alter table \"$DB\".\"staging\".\"stg_customer__dbt_tmp\" rename to \"stg_customer\";"
}

# One `dbt run` of the model: run_model inside|after_commit|none [HOOK]
run_model() {
    local mode=$1 hook=${2:-$HOOK}
    {
        # What dbt logs and ignores (NOTICEs, "there is no transaction in
        # progress") stays out of the output; errors do not.
        echo "SET client_min_messages = error;"
        echo "BEGIN;"
        build_model
        [ "$mode" = inside ] && echo "$hook;"
        echo "COMMIT;"
        echo "BEGIN;"
        echo "drop table if exists \"$DB\".\"staging\".\"stg_customer__dbt_backup\" cascade;"
        echo "COMMIT;"
        if [ "$mode" = after_commit ]; then
            echo "commit;"
            echo "$hook;"
        fi
    } | psql -X -q -v ON_ERROR_STOP=1 -d $DB -o /dev/null 2>&1
}

dim() {
    q $DB "SELECT string_agg(customer_id || ':' || city || ':' || is_current::int, ' ' ORDER BY customer_id, valid_from)
             FROM marts.dim_customer"
}
runs() { q $DB "SELECT count(*) FROM scd2.audit_log"; }
last_run() {
    q $DB "SELECT status || ' ' || staging || ' ' || inserted || ' ' || new_versions || ' ' || closed
             FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1"
}

sql $DB -o /dev/null <<'SQL' || { not_ok "setup"; finish; }
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA raw;
CREATE SCHEMA staging;
CREATE SCHEMA marts;
CREATE TABLE raw.customers (customer_id int, name text, city text);
INSERT INTO raw.customers VALUES (1, 'Ada', 'Oslo'), (2, 'Brian', 'Rome');
SQL

# First `dbt run`: the model has no relation yet.  The dimension is made
# once from it (README: create it after the first build), then loaded.
run_model none >/dev/null
sql $DB -o /dev/null -c "SELECT scd2.create_dimension('marts.dim_customer', 'staging.stg_customer', ARRAY['customer_id'])"
out=$(psql -X -q -v ON_ERROR_STOP=1 -d $DB -c "$HOOK" 2>&1)
expect "first load" "1:Oslo:1 2:Rome:1" "$(dim)"

# Second run, post-hook inside the model's transaction.
sql $DB -c "UPDATE raw.customers SET city = 'Bergen' WHERE customer_id = 1" \
        -c "INSERT INTO raw.customers VALUES (3, 'Chen', 'Lima')" >/dev/null
out=$(run_model inside) ; rc=$?
expect "dbt run with the post-hook inside the transaction succeeds" "0" "$rc${out:+ $out}"
expect "dimension after the in-transaction hook" "1:Oslo:0 1:Bergen:1 2:Rome:1 3:Lima:1" "$(dim)"
expect "its audit row names the rebuilt staging table" "success staging.stg_customer 1 1 1" "$(last_run)"
expect "loaded in the model's transaction" "t" \
    "$(q $DB "SELECT xmin::text::bigint = (SELECT txid::text::bigint % 4294967296 FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1)
                FROM staging.stg_customer LIMIT 1")"
expect "no temporary or backup relation left" "" \
    "$(q $DB "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'stg_customer__dbt%'")"
# dbt drops the old table every run: the registered default staging table
# is forgotten (so scd2.apply_all would skip this dimension); the hook
# names {{ this }} explicitly and does not depend on it.
expect "the registry forgot the dropped default staging table" "" \
    "$(q $DB "SELECT staging FROM scd2.dimensions WHERE dimension = 'marts.dim_customer'::regclass")"

# Third run, after_commit variant: the model commits first, the CALL runs
# at top level.
sql $DB -c "UPDATE raw.customers SET city = 'Milan' WHERE customer_id = 2" >/dev/null
out=$(run_model after_commit) ; rc=$?
expect "dbt run with an after_commit hook succeeds" "0" "$rc${out:+ $out}"
expect "dimension after the after_commit hook" "1:Oslo:0 1:Bergen:1 2:Rome:0 2:Milan:1 3:Lima:1" "$(dim)"
expect "its audit row" "success staging.stg_customer 0 1 1" "$(last_run)"
expect "loaded in a transaction of its own, after the model's" "f" \
    "$(q $DB "SELECT xmin::text::bigint = (SELECT txid::text::bigint % 4294967296 FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1)
                FROM staging.stg_customer LIMIT 1")"

# A failing in-transaction hook: dbt's transaction rolls back, so the
# model keeps its previous contents, and the load and its audit row are
# gone with it.
before_runs=$(runs) before_dim=$(dim)
sql $DB -c "UPDATE raw.customers SET city = 'Paris' WHERE customer_id = 1" \
        -c "INSERT INTO raw.customers VALUES (NULL, 'Nobody', 'Nowhere')" >/dev/null
out=$(run_model inside) ; rc=$?
case $out in
    *"NULL business key"*) ok "a failing in-transaction hook fails the model" ;;
    *) not_ok "a failing in-transaction hook fails the model" "rc=$rc $out" ;;
esac
expect "the model is rolled back to its previous build" "3 Bergen" \
    "$(q $DB "SELECT count(*) || ' ' || max(city) FILTER (WHERE customer_id = 1) FROM staging.stg_customer")"
expect "no temporary relation left" "" \
    "$(q $DB "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'stg_customer__dbt%'")"
expect "the dimension is unchanged" "$before_dim" "$(dim)"
expect "no audit row is left (there is no transaction to keep it in)" "$before_runs" "$(runs)"

# A failing after_commit hook: the model is committed, the load is not,
# and the error row is kept (a top-level CALL commits it).
out=$(run_model after_commit) ; rc=$?
case $out in
    *"NULL business key"*) ok "a failing after_commit hook fails the model" ;;
    *) not_ok "a failing after_commit hook fails the model" "rc=$rc $out" ;;
esac
expect "the model is committed" "4" "$(q $DB "SELECT count(*) FROM staging.stg_customer")"
expect "the dimension is unchanged" "$before_dim" "$(dim)"
expect "an error row is kept" "error staging.stg_customer 0 0 0" "$(last_run)"
expect "with the message" "staging table staging.stg_customer has a NULL business key" \
    "$(q $DB "SELECT message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"

# Keep the hook a single statement: several statements in one hook are
# one implicit transaction, in which CALL scd2.apply is atomic, so a
# failure leaves no error row.
before_runs=$(runs)
out=$(psql -X -q -d $DB -c "SELECT 1; $HOOK" 2>&1)
expect "a multi-statement after_commit hook is atomic: no error row" "$before_runs" "$(runs)"

finish
