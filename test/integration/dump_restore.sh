#!/usr/bin/env bash
# scd2 through pg_dump / pg_restore: the registry (scd2.dimensions) and the
# audit log are extension configuration tables (pg_extension_config_dump),
# so their rows are dumped; the registry's regclass columns must resolve
# to the restored tables, and loads must go on after the restore, with the
# audit log's run ids continuing past the restored ones.
#
# Creates (drops first) the databases scd2_dump_src and scd2_dump_dst and a
# dump file in a temporary directory; removes them when done.

here=$(cd "$(dirname "$0")" && pwd)
SUITE=dump_restore
# shellcheck source=lib.sh
source "$here/lib.sh"
SRC=scd2_dump_src
DST=scd2_dump_dst
TMP=$(mktemp -d)
chmod 755 "$TMP"

drop_dbs() {
    sql postgres -c "SET client_min_messages = warning" \
        -c "DROP DATABASE IF EXISTS $SRC" -c "DROP DATABASE IF EXISTS $DST" >/dev/null 2>&1
}
trap 'drop_dbs; rm -rf "$TMP"' EXIT
drop_dbs
if ! sql postgres -c "CREATE DATABASE $SRC" >/dev/null; then
    not_ok "create database $SRC"
    finish
fi

# Two dimensions: a plain one made by create_dimension, and a registered
# one whose every name needs quoting, with custom validity columns,
# infinity for current rows, a Type 1 column, an effective-time column and
# a delete marker.
if ! sql $SRC -o /dev/null <<'SQL'
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE EXTENSION scd2;
CREATE TABLE public.stg_customer (customer_id int, city text);
SELECT scd2.create_dimension('public.dim_customer', 'public.stg_customer', ARRAY['customer_id']);

CREATE SCHEMA "Sales Mart";
CREATE TABLE "Sales Mart"."stg product ""v2""" (
    "SKU Code" text, "Région" text, "Price" numeric, "Descr." text,
    "Changed At" timestamptz, "Gone?" boolean);
CREATE TABLE "Sales Mart"."Dim Product ""ü""" (
    "Key" bigint GENERATED ALWAYS AS IDENTITY,
    "SKU Code" text NOT NULL, "Région" text NOT NULL, "Price" numeric, "Descr." text,
    "From" timestamptz NOT NULL, "To" timestamptz NOT NULL DEFAULT 'infinity');
SELECT scd2.register('"Sales Mart"."Dim Product ""ü"""', ARRAY['SKU Code', 'Région'],
                     tracked => ARRAY['Price'], type1 => ARRAY['Descr.'],
                     effective_column => 'Changed At', delete_column => 'Gone?',
                     staging => '"Sales Mart"."stg product ""v2"""',
                     valid_from_column => 'From', valid_to_column => 'To',
                     current_valid_to => 'infinity');

-- Loads: new keys, changes, a Type 1 update, a delete, a failed load.
INSERT INTO stg_customer VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stg_customer', 'dim_customer', '2024-01-01');
UPDATE stg_customer SET city = 'Milan' WHERE customer_id = 2;
CALL scd2.apply('stg_customer', 'dim_customer', '2024-02-01');
-- on_schema_change (issue 28): a column new in staging is added by a load
SELECT scd2.register('public.dim_customer', ARRAY['customer_id'], staging => 'public.stg_customer',
                     on_schema_change => 'append_new_columns');
ALTER TABLE stg_customer ADD COLUMN "Tier ü" text;
UPDATE stg_customer SET "Tier ü" = 'gold' WHERE customer_id = 1;
CALL scd2.apply('stg_customer', 'dim_customer', '2024-02-15');
INSERT INTO "Sales Mart"."stg product ""v2""" VALUES
    ('A-1', 'EU', 10, 'bolt', '2024-01-01', false),
    ('A-1', 'US', 12, 'bolt', '2024-01-01', false),
    ('B-2', 'EU', 5, 'nut', '2024-01-01', false);
CALL scd2.apply('"Sales Mart"."stg product ""v2"""', '"Sales Mart"."Dim Product ""ü"""');
TRUNCATE "Sales Mart"."stg product ""v2""";
INSERT INTO "Sales Mart"."stg product ""v2""" VALUES
    ('A-1', 'EU', 11, 'bolt', '2024-03-01', false),
    ('A-1', 'US', 12, 'steel bolt', '2024-03-01', false),
    ('B-2', 'EU', 5, 'nut', '2024-03-01', true);
CALL scd2.apply_all('2024-03-01');
SQL
then
    not_ok "setup"
    finish
fi
# A failed load at top level leaves an error row.
sql $SRC -c "INSERT INTO stg_customer VALUES (NULL, 'x', NULL)" -c "CALL scd2.apply('stg_customer', 'dim_customer', '2024-04-01')" >/dev/null 2>&1
sql $SRC -c "DELETE FROM stg_customer WHERE customer_id IS NULL" >/dev/null
expect "source: six successful runs and one error row" "6 1" \
    "$(q $SRC "SELECT count(*) FILTER (WHERE status = 'success') || ' ' || count(*) FILTER (WHERE status = 'error') FROM scd2.audit_log")"

# Dump, restore into a new database.
if pg_dump -Fc -f "$TMP/scd2.dump" $SRC 2>"$TMP/dump.err"; then
    ok "pg_dump -Fc"
else
    not_ok "pg_dump -Fc" "$(cat "$TMP/dump.err")"
fi
sql postgres -c "CREATE DATABASE $DST" >/dev/null
if pg_restore --exit-on-error -d $DST "$TMP/scd2.dump" 2>"$TMP/restore.err"; then
    ok "pg_restore"
else
    not_ok "pg_restore" "$(cat "$TMP/restore.err")"
fi

# The same query on both sides must give the same text.
same() {
    local what=$1 query=$2 a b
    a=$(q $SRC "$query" 2>&1)
    b=$(q $DST "$query" 2>&1)
    if [ -n "$a" ] && [ "$a" = "$b" ]; then ok "$what"; else not_ok "$what" "source:   $a
restored: $b"; fi
}

same "extension version" "SELECT extversion FROM pg_extension WHERE extname = 'scd2'"
same "registry rows (regclass values by name)" \
    "SELECT d::text FROM scd2.dimensions d ORDER BY dimension::text"
expect "registry regclass values resolve to the restored tables" "2 2" \
    "$(q $DST "SELECT count(c.oid) || ' ' || count(s.oid) FROM scd2.dimensions d
                 LEFT JOIN pg_class c ON c.oid = d.dimension AND c.relkind = 'r'
                 LEFT JOIN pg_class s ON s.oid = d.staging AND s.relkind = 'r'")"
expect "restored registry names the restored tables" \
    'public.dim_customer=public.stg_customer "Sales Mart"."Dim Product ""ü"""="Sales Mart"."stg product ""v2"""' \
    "$(q $DST "SELECT string_agg(format('%I.%I=%I.%I', cn.nspname, c.relname, sn.nspname, s.relname), ' '
                                  ORDER BY c.relname DESC)
                 FROM scd2.dimensions d
                 JOIN pg_class c ON c.oid = d.dimension JOIN pg_namespace cn ON cn.oid = c.relnamespace
                 JOIN pg_class s ON s.oid = d.staging JOIN pg_namespace sn ON sn.oid = s.relnamespace")"
same "audit log rows" "SELECT a::text FROM scd2.audit_log a ORDER BY run_id"
same "change log runs" "SELECT r::text FROM scd2.change_log_runs r ORDER BY run_id"
same "change log rows" "SELECT c::text FROM scd2.change_log c ORDER BY 1"
same "dimension rows (plain)" "SELECT t::text FROM public.dim_customer t ORDER BY sk"
same "dimension rows (quoted names)" "SELECT t::text FROM \"Sales Mart\".\"Dim Product \"\"ü\"\"\" t ORDER BY 1"
same "scd2 indexes on the dimensions" \
    "SELECT string_agg(indexdef, E'\n' ORDER BY indexname) FROM pg_indexes WHERE indexname LIKE '%scd2%'"
same "as-of lookup" \
    "SELECT scd2.asof('public.dim_customer', '2024-01-15', 2) || ',' || scd2.asof('public.dim_customer', '2024-02-15', 2)"

# Loads go on after the restore; run ids continue past the restored ones.
max_run=$(q $DST "SELECT max(run_id) FROM scd2.audit_log")
out=$(sql $DST -c "SET client_min_messages = warning" -c "UPDATE stg_customer SET city = 'Paris' WHERE customer_id = 1" \
        -c "CALL scd2.apply('stg_customer', 'dim_customer', '2024-05-01')" 2>&1) \
    && ok "a load after the restore" || not_ok "a load after the restore" "$out"
expect "its run id follows the restored ones" "$((max_run + 1)) success 1 1" \
    "$(q $DST "SELECT run_id || ' ' || status || ' ' || new_versions || ' ' || closed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"
expect "the restored dimension has the new version" "1:Oslo:0 1:Paris:1 2:Rome:0 2:Milan:1" \
    "$(q $DST "SELECT string_agg(customer_id || ':' || city || ':' || is_current::int, ' ' ORDER BY customer_id, valid_from) FROM dim_customer")"
# A restored run can be read back (the first load of dim_customer), and
# the load after the restore reverted.
same "change feed of a restored run" \
    "SELECT string_agg(f::text, ' ' ORDER BY f::text) FROM scd2.changes((SELECT min(r.run_id) FROM scd2.change_log_runs r
        WHERE r.dimension = 'public.dim_customer'::regclass)) f"
out=$(sql $DST -c "SET client_min_messages = warning" -c "SELECT scd2.revert($((max_run + 1)))" 2>&1) \
    && ok "revert after the restore" || not_ok "revert after the restore" "$out"
expect "the reverted dimension is as restored" "1:Oslo:1 2:Rome:0 2:Milan:1" \
    "$(q $DST "SELECT string_agg(customer_id || ':' || city || ':' || is_current::int, ' ' ORDER BY customer_id, valid_from) FROM dim_customer")"
out=$(sql $DST -c "SET client_min_messages = warning" \
        -c "INSERT INTO \"Sales Mart\".\"stg product \"\"v2\"\"\" VALUES ('C-3', 'EU', 7, 'washer', '2024-05-01', false)" \
        -c "CALL scd2.apply_all('2024-05-01')" 2>&1) \
    && ok "apply_all after the restore (registered staging tables resolve)" \
    || not_ok "apply_all after the restore (registered staging tables resolve)" "$out"
expect "the quoted dimension got the new key" "1" \
    "$(q $DST "SELECT count(*) FROM \"Sales Mart\".\"Dim Product \"\"ü\"\"\" WHERE \"SKU Code\" = 'C-3' AND \"To\" = 'infinity'")"
# on_schema_change came back with the registry: a column new in staging
# is added, the current versions filled in place.
out=$(sql $DST -c "SET client_min_messages = warning" -c "ALTER TABLE stg_customer ADD COLUMN since date" \
        -c "UPDATE stg_customer SET since = '2020-01-01'" \
        -c "CALL scd2.apply('stg_customer', 'dim_customer', '2024-06-01')" 2>&1) \
    && ok "a load after the restore adds a new staging column" || not_ok "a load after the restore adds a new staging column" "$out"
expect "the column, the versions filled in place, no new version" "since date 2 0 gold" \
    "$(q $DST "SELECT (SELECT attname || ' ' || format_type(atttypid, atttypmod) FROM pg_attribute
                        WHERE attrelid = 'dim_customer'::regclass AND attname = 'since')
                      || ' ' || filled_in_place || ' ' || new_versions
                      || ' ' || (SELECT \"Tier ü\" FROM dim_customer WHERE customer_id = 1 AND is_current)
                 FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1")"
# The event trigger came back with the extension.
sql $DST -c "SET client_min_messages = warning" -c "DROP TABLE dim_customer" >/dev/null
expect "dropping a restored dimension unregisters it" "1" "$(q $DST "SELECT count(*) FROM scd2.dimensions")"
# The source is untouched by all of this.
expect "source audit log unchanged" "$max_run" "$(q $SRC "SELECT max(run_id) FROM scd2.audit_log")"

finish
