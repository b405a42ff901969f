#!/usr/bin/env bash
# scd2 with real dbt: dbt-core and dbt-postgres (pinned, from PyPI, in a
# virtual environment cached between runs) run
#   - the test project test/dbt/project (its dim_customer model and schema
#     file are the README's example, extracted from docs/DBT.md) through
#     several `dbt run`s with changing sources: new keys, changes, NULLs,
#     a composite key, Type 1 columns, snapshot-mode deletes, late rows, a
#     rerun of the same data, a dbt snapshot taken over by the
#     materialization; checks the dimensions, the audit log, the adapter
#     response, `dbt test` (passing, and failing on a broken history) and
#     `--full-refresh`; then docs/DBT.md's dimension model with
#     inferred_column and its fact model, whose pre_hook infers members
#     that the dimension's next run completes, and the change-stream
#     options;
#   - the post-hook example examples/dbt (a table model whose post-hook
#     calls scd2.apply), inside the model's transaction and after_commit,
#     with failing loads;
#   - docs/DBT.md's complete project (profiles.yml, dbt_project.yml,
#     packages.yml, sources, model, tests), extracted from the document.
# Needs a running server (PGHOST, PGPORT, PGUSER: a superuser) with scd2
# installed, as scripts/test_suites.sh starts it.  Creates (drops first) the
# databases scd2_dbt, scd2_dbt_example and scd2_dbt_doc.  A venv that cannot be installed
# is a failure, never a pass.
#
# SCD2_DBT_VENV overrides where the venv is kept.

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
SUITE=dbt
# shellcheck source=../integration/lib.sh
source "$root/test/integration/lib.sh"

# The pinned versions (SCD2_DBT_CORE_VERSION / SCD2_DBT_POSTGRES_VERSION
# try others, each pair in a venv of its own).  dbt-core 1.11.16 is the
# newest that installs from PyPI alone: 1.12 needs
# dbt-core-experimental-parser, whose build downloads a binary from
# outside PyPI.
DBT_CORE_VERSION=${SCD2_DBT_CORE_VERSION:-1.11.16}
DBT_POSTGRES_VERSION=${SCD2_DBT_POSTGRES_VERSION:-1.11.0}
cache=/var/cache/scd2
[ -w "$(dirname "$cache")" ] || [ -w "$cache" ] || cache=${XDG_CACHE_HOME:-$HOME/.cache}/scd2
VENV=${SCD2_DBT_VENV:-$cache/dbt-venv-core$DBT_CORE_VERSION-postgres$DBT_POSTGRES_VERSION}
# docs/DBT.md's line that installs dbt
HOME_VENV_LINE="~/dbt-venv/bin/pip install dbt-core==$DBT_CORE_VERSION dbt-postgres==$DBT_POSTGRES_VERSION"
SKIP=0
DB=scd2_dbt
EXDB=scd2_dbt_example
DOCDB=scd2_dbt_doc

work=$(mktemp -d)
trap 'rm -rf "$work"; psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "DROP DATABASE IF EXISTS $EXDB" -c "DROP DATABASE IF EXISTS $DOCDB" >/dev/null 2>&1' EXIT

# ---------------------------------------------------------------- the venv

venv_ok() {
    [ -x "$VENV/bin/dbt" ] &&
        [ "$("$VENV/bin/python" -c 'import dbt.version, dbt.adapters.postgres.__version__ as p; print(dbt.version.__version__, p.version)' 2>/dev/null)" \
          = "$DBT_CORE_VERSION $DBT_POSTGRES_VERSION" ]
}

install_venv() {
    local py=python3 tmp
    [ -x /usr/bin/python3 ] && py=/usr/bin/python3
    if ! "$py" -c 'import ensurepip, venv' 2>/dev/null; then
        echo "# installing python3-venv"
        if [ "$(id -u)" = 0 ]; then
            DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null ||
                { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null; }
        else
            sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        fi
    fi
    # Built beside its final place and moved there once complete, so a
    # broken install is never reused.
    tmp="$VENV.tmp.$$"
    rm -rf "$tmp"
    mkdir -p "$(dirname "$VENV")" &&
        "$py" -m venv "$tmp" &&
        "$tmp/bin/pip" install --disable-pip-version-check -q \
            "dbt-core==$DBT_CORE_VERSION" "dbt-postgres==$DBT_POSTGRES_VERSION" &&
        rm -rf "$VENV" && mv "$tmp" "$VENV" || { rm -rf "$tmp"; return 1; }
    # A venv's scripts name its path: rewrite the shebangs moved with it.
    grep -rlI "^#!$tmp/bin/" "$VENV/bin" | xargs -r sed -i "1s|^#!$tmp/bin/|#!$VENV/bin/|"
    sed -i "s|$tmp|$VENV|g" "$VENV/bin/activate" "$VENV/pyvenv.cfg" 2>/dev/null
    venv_ok
}

if venv_ok; then
    echo "# dbt venv: $VENV (cached)"
else
    echo "# installing dbt-core $DBT_CORE_VERSION and dbt-postgres $DBT_POSTGRES_VERSION into $VENV"
    if ! install_venv; then
        not_ok "install dbt-core $DBT_CORE_VERSION and dbt-postgres $DBT_POSTGRES_VERSION from PyPI"
        finish
    fi
fi
ok "dbt-core $DBT_CORE_VERSION with dbt-postgres $DBT_POSTGRES_VERSION"

export DBT_SEND_ANONYMOUS_USAGE_STATS=false DO_NOT_TRACK=1 DBT_PROFILES_DIR="$work"
export DBT_USE_COLORS=false DBT_PRINTER_WIDTH=120

# -------------------------------------------------------------- the projects

cat >"$work/profiles.yml" <<YML
scd2_test:
  target: test
  outputs:
    test:
      type: postgres
      host: "$PGHOST"
      port: $PGPORT
      user: "$PGUSER"
      password: ""
      dbname: $DB
      schema: analytics
      threads: 2
shop:
  target: test
  outputs:
    test:
      type: postgres
      host: "$PGHOST"
      port: $PGPORT
      user: "$PGUSER"
      password: ""
      dbname: $EXDB
      schema: staging
      threads: 1
YML

proj=$work/project
cp -r "$here/project" "$proj"
mkdir -p "$proj/snapshots"
# The README's example: every fenced block preceded by a line
#   <!-- test/dbt/project: PATH -->
# is written to PATH in the project; prints how many.
extract_readme() {
    awk -v dir="$proj" '
        /^<!-- test\/dbt\/project: .* -->$/ { f = dir "/" $3; want = 1; next }
        want && /^```/ { want = 0; copying = 1; printf "" > f; next }
        copying && /^```$/ { copying = 0; close(f); n++; next }
        copying { print >> f }
        END { print n + 0 }' "$root/docs/DBT.md"
}
extract_readme >"$work/extracted"
expect "docs/DBT.md has the example model, its schema file and the migration model" "3" "$(cat "$work/extracted")"
[ -s "$proj/models/dim_customer.sql" ] || { not_ok "docs/DBT.md's model"; finish; }
# The migration model takes over the dbt snapshot of the same name later.
mv "$proj/models/customers_snapshot.sql" "$work/customers_snapshot.sql"

# dbt COMMAND [ARGS]: run dbt in the project; output in $work/out, status returned.
dbt_in() {
    local dir=$1; shift
    (cd "$dir" && "$VENV/bin/dbt" --no-use-colors "$@") >"$work/out" 2>&1
}
dbt() { dbt_in "$proj" "$@"; }
# The dbt output in a failure message.
dbt_out() { tail -n 25 "$work/out"; }
# adapter_response.rows_affected of a model in the last run_results.json.
rows_affected() {
    "$VENV/bin/python" - "$proj/target/run_results.json" "$1" <<'PY'
import json, sys
for r in json.load(open(sys.argv[1]))["results"]:
    if r["unique_id"].endswith("." + sys.argv[2]):
        print(r["status"], r["adapter_response"].get("code"), r["adapter_response"].get("rows_affected"))
PY
}
# expect_dbt DESCRIPTION COMMAND...: the dbt command succeeds.
expect_dbt() {
    local what=$1; shift
    if dbt "$@"; then ok "$what"; else not_ok "$what" "$(dbt_out)"; fi
}

q postgres "DROP DATABASE IF EXISTS $DB" >/dev/null
q postgres "CREATE DATABASE $DB" >/dev/null
sql $DB -o /dev/null <<'SQL' || { not_ok "setup"; finish; }
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA crm;
CREATE TABLE crm.customers (customer_id int, name text, city text, email text, updated_at timestamptz);
CREATE TABLE crm.accounts (region text, account_no int, owner text, plan text);
CREATE TABLE crm.products (sku text, price numeric(8,2), description text, changed_on date, is_deleted boolean);
INSERT INTO crm.products VALUES ('A', 10, 'Apple', '2024-01-01', false), ('B', 20, 'Bean', '2024-01-01', NULL);
INSERT INTO crm.customers VALUES
    (1, 'Ada', 'Oslo', 'ada@example.com', '2024-01-01'),
    (2, 'Brian', 'Rome', 'brian@example.com', '2024-01-01');
INSERT INTO crm.accounts VALUES
    ('eu', 1, 'ann', 'basic'), ('eu', 2, 'bob', NULL), ('us', 1, 'cy', 'pro');
SQL

# ------------------------------------------------------------ packages.yml
# docs/DBT.md's three packages.yml, exactly, each block preceded by a line
#   <!-- test/dbt/packages.yml: NAME -->
# with only the placeholders filled in: the git URL is a file:// clone of
# this repository whose main is the commit under test (HEAD), the commit id
# is HEAD's, the local path is this checkout's dbt/.  The local form is
# installed last: the runs below use the working tree's package.
awk -v dir="$work" '
    /^<!-- test\/dbt\/packages\.yml: [a-z]+ -->$/ { f = dir "/packages." $3 ".yml"; want = 1; next }
    want && /^```/ { want = 0; copying = 1; printf "" > f; next }
    copying && /^```$/ { copying = 0; close(f); next }
    copying { print >> f }' "$root/docs/DBT.md"
# deps_with NAME: dbt deps with packages.NAME.yml; the installed package
# must be the repository's dbt/ (its dbt_project.yml and macros).
deps_with() {
    local name=$1
    rm -rf "$proj/dbt_packages" "$proj/package-lock.yml"
    cp "$work/packages.$name.yml" "$proj/packages.yml"
    if ! dbt deps; then
        not_ok "dbt deps with docs/DBT.md's $name packages.yml" "$(cat "$proj/packages.yml")
$(dbt_out)"
    elif ! diff -r "$root/dbt/macros" "$proj/dbt_packages/scd2/macros" >/dev/null ||
         ! cmp -s "$root/dbt/dbt_project.yml" "$proj/dbt_packages/scd2/dbt_project.yml"; then
        not_ok "dbt deps with docs/DBT.md's $name packages.yml installs dbt/" "$(ls -R "$proj/dbt_packages" | head -20)"
    else
        ok "dbt deps with docs/DBT.md's $name packages.yml installs the scd2 package"
    fi
}
for name in git pinned local; do
    [ -s "$work/packages.$name.yml" ] || not_ok "docs/DBT.md has the $name packages.yml"
done
[ -n "${SCD2_DBT_CORE_VERSION:-}${SCD2_DBT_POSTGRES_VERSION:-}" ] ||
    expect "docs/DBT.md's dbt install line has the versions tested here" 1 \
        "$(grep -cxF "$HOME_VENV_LINE" "$root/docs/DBT.md")"
if head=$(git -C "$root" rev-parse -q --verify HEAD 2>/dev/null) && [ -z "$(git -C "$root" status --porcelain -- dbt)" ]; then
    git clone -q --bare "file://$root" "$work/scd2.git" &&
        git -C "$work/scd2.git" update-ref refs/heads/main "$head" ||
        not_ok "a file:// clone of the repository"
    sed -i "s|\"<URL of this repository>\"|\"file://$work/scd2.git\"|; s|\"<commit id>\"|\"$head\"|" \
        "$work/packages.git.yml" "$work/packages.pinned.yml"
    deps_with git
    deps_with pinned
else
    # a tree that is no git checkout, or whose dbt/ differs from HEAD's
    echo "SKIPPED: the git forms of packages.yml (no git checkout, or dbt/ has uncommitted changes)"
    SKIP=2
fi
sed -i "s|/path/to/scd2/dbt|$root/dbt|" "$work/packages.local.yml"
deps_with local
expect_dbt "dbt snapshot: the snapshot to take over, and a reference kept by dbt" snapshot

customers() {
    q $DB "SELECT string_agg(customer_id || ':' || coalesce(city, '-') || ':' || email || ':' || valid_from::date
                             || '..' || coalesce(valid_to::date::text, '') || ':' || is_current::int, ' '
                             ORDER BY customer_id, valid_from)
             FROM analytics.dim_customer"
}
accounts() {
    q $DB "SELECT string_agg(region || account_no || ':' || coalesce(plan, '-') || ':' || is_current::int, ' '
                             ORDER BY region, account_no, valid_from)
             FROM analytics.dim_account"
}
# The newest audit row of a dimension: status and metrics.
last_run() {
    q $DB "SELECT status || ' src=' || source_rows || ' ins=' || inserted || ' new=' || new_versions
                  || ' closed=' || closed || ' del=' || deleted || ' short=' || shortened
                  || ' t1=' || type1_updated || ' same=' || unchanged
             FROM scd2.audit_log WHERE dimension = 'analytics.$1' ORDER BY run_id DESC LIMIT 1"
}
last_run_s() {
    q $DB "SELECT status || ' src=' || source_rows || ' ins=' || inserted || ' new=' || new_versions
                  || ' closed=' || closed || ' del=' || deleted || ' short=' || shortened
                  || ' t1=' || type1_updated || ' same=' || unchanged
             FROM scd2.audit_log WHERE dimension = 'analytics_snapshots.customers_snapshot' ORDER BY run_id DESC LIMIT 1"
}
runs() { q $DB "SELECT count(*) FROM scd2.audit_log WHERE dimension = 'analytics.$1'"; }

# ---------------------------------------------------------------- run 1
expect_dbt "first dbt run creates and loads both dimensions" run
expect "dim_customer after the first run" \
    "1:Oslo:ada@example.com:2024-01-01..:1 2:Rome:brian@example.com:2024-01-01..:1" "$(customers)"
expect "dim_account after the first run" "eu1:basic:1 eu2:-:1 us1:pro:1" "$(accounts)"
expect "the dimension is registered from the config" \
    "{customer_id} {email} updated_at incremental valid_from valid_to is_current sk" \
    "$(q $DB "SELECT concat_ws(' ', business_key, type1, effective_column, mode, valid_from_column,
                               valid_to_column, is_current_column, surrogate_key_column)
                FROM scd2.dimensions WHERE dimension = 'analytics.dim_customer'::regclass")"
expect "its columns: the model's, then the bookkeeping columns" \
    "customer_id integer,name text,city text,email text,updated_at timestamp with time zone,sk bigint,valid_from timestamp with time zone,valid_to timestamp with time zone,is_current boolean" \
    "$(q $DB "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
                FROM pg_attribute WHERE attrelid = 'analytics.dim_customer'::regclass AND attnum > 0 AND NOT attisdropped")"
expect "the effective column is kept in the dimension, as in a dbt snapshot" "2024-01-01 2024-01-01" \
    "$(q $DB "SELECT string_agg(updated_at::date::text, ' ' ORDER BY customer_id) FROM analytics.dim_customer")"
expect "adapter response: rows affected = rows written" "success SCD2 2" "$(rows_affected dim_customer)"
expect "audit row of the first run" "success src=2 ins=2 new=0 closed=0 del=0 short=0 t1=0 same=0" "$(last_run dim_customer)"
run_id=$(q $DB "SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'analytics.dim_customer'")
if grep -qF "scd2 run $run_id: 2 source rows, 2 inserted, 0 new versions, 0 closed, 0 deleted, 0 shortened, 0 type1 updated, 0 unchanged, 0 duplicates (" "$work/out"; then
    ok "the run id and metrics are in dbt's log"
else
    not_ok "the run id and metrics are in dbt's log" "$(dbt_out)"
fi
expect "no staging table is left behind" "" \
    "$(q $DB "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE '%dbt_tmp%' OR relname LIKE '% (dbt model)'")"

products() {
    q $DB "SELECT string_agg(sku || ':' || price || ':' || description || ':' || valid_from_date || '..' || valid_to_date, ' '
                             ORDER BY sku, valid_from_date)
             FROM analytics.dim_product"
}
expect "dim_product: the model's columns less the delete marker, then the configured bookkeeping columns" \
    "sku text,price numeric(8,2),description text,changed_on date,valid_from_date date,valid_to_date date" \
    "$(q $DB "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
                FROM pg_attribute WHERE attrelid = 'analytics.dim_product'::regclass AND attnum > 0 AND NOT attisdropped")"
expect "dim_product after the first run" "A:10.00:Apple:2024-01-01..infinity B:20.00:Bean:2024-01-01..infinity" "$(products)"

# ---------------------------------------------------------------- run 2
# Changes, a Type 1 change, a new key with a NULL, NULL -> value, a key
# missing from the snapshot, a new composite key.
sql $DB -o /dev/null <<'SQL'
UPDATE crm.customers SET city = 'Bergen', updated_at = '2024-02-01' WHERE customer_id = 1;
UPDATE crm.customers SET email = 'brian@example.org', updated_at = '2024-02-01' WHERE customer_id = 2;
INSERT INTO crm.customers VALUES (3, 'Chen', NULL, 'chen@example.com', '2024-02-01');
UPDATE crm.accounts SET plan = 'basic' WHERE (region, account_no) = ('eu', 2);
DELETE FROM crm.accounts WHERE (region, account_no) = ('us', 1);
INSERT INTO crm.accounts VALUES ('us', 2, 'dee', 'pro');
UPDATE crm.products SET description = 'Red apple', changed_on = '2024-02-01' WHERE sku = 'A';
UPDATE crm.products SET price = 25, changed_on = '2024-02-01' WHERE sku = 'B';
SQL
expect_dbt "second dbt run" run
expect "dim_customer: a change, a Type 1 overwrite, a new key with a NULL" \
    "1:Oslo:ada@example.com:2024-01-01..2024-02-01:0 1:Bergen:ada@example.com:2024-02-01..:1 2:Rome:brian@example.org:2024-01-01..:1 3:-:chen@example.com:2024-02-01..:1" \
    "$(customers)"
expect "the new version carries the new effective time" "2024-01-01 2024-02-01" \
    "$(q $DB "SELECT string_agg(updated_at::date::text, ' ' ORDER BY valid_from) FROM analytics.dim_customer WHERE customer_id = 1")"
expect "audit row" "success src=3 ins=1 new=1 closed=1 del=0 short=0 t1=1 same=0" "$(last_run dim_customer)"
expect "adapter response" "success SCD2 4" "$(rows_affected dim_customer)"
expect "dim_account: NULL -> value is one change; a missing key is closed" \
    "eu1:basic:1 eu2:-:0 eu2:basic:1 us1:pro:0 us2:pro:1" "$(accounts)"
expect "its audit row" "success src=3 ins=1 new=1 closed=1 del=1 short=0 t1=0 same=1" "$(last_run dim_account)"
expect "adapter response" "success SCD2 4" "$(rows_affected dim_account)"
expect "dim_product: a tracked change; an untracked one alone is no change" \
    "A:10.00:Apple:2024-01-01..infinity B:20.00:Bean:2024-01-01..2024-02-01 B:25.00:Bean:2024-02-01..infinity" "$(products)"

expect_dbt "dbt snapshot" snapshot

# ---------------------------------------------------------------- migration
# The README's migration model takes over the dbt snapshot.
snap() {
    q $DB "SELECT string_agg(concat_ws(',', customer_id, name, city, updated_at::date, dbt_scd_id, dbt_updated_at::date,
                                       dbt_valid_from::date, dbt_valid_to::date), ' '
                             ORDER BY customer_id, dbt_valid_from)
             FROM analytics_snapshots.$1"
}
before_s=$(snap customers_snapshot)
rm "$proj/snapshots/customers_snapshot.sql"
mv "$work/customers_snapshot.sql" "$proj/models/customers_snapshot.sql"
cp "$here/project/customers_snapshot.yml" "$proj/models/customers_snapshot.yml"
rm "$proj/customers_snapshot.yml"
expect_dbt "the migration model takes over the dbt snapshot" run -s customers_snapshot
if grep -q "registered the existing table" "$work/out"; then ok "it registers the existing table"; else not_ok "it registers the existing table" "$(dbt_out)"; fi
expect "registered with dbt's column names, timestamp detection, a far-future valid_to" \
    "dbt_valid_from dbt_valid_to timestamp 9999-12-31T00:00:00+00:00 " \
    "$(q $DB "SELECT concat_ws(' ', valid_from_column, valid_to_column, detect, current_valid_to, is_current_column, surrogate_key_column, '')
                FROM scd2.dimensions WHERE dimension = 'analytics_snapshots.customers_snapshot'::regclass")"
expect "nothing is rewritten: the same data is no change" "$before_s success SCD2 0" \
    "$(snap customers_snapshot) $(rows_affected customers_snapshot)"
expect "history as dbt made it (3 keys, 5 versions)" "5 3" \
    "$(q $DB "SELECT count(*) || ' ' || count(*) FILTER (WHERE dbt_valid_to = '9999-12-31') FROM analytics_snapshots.customers_snapshot")"

# ---------------------------------------------------------------- run 3
before_c=$(customers) before_a=$(accounts)
expect_dbt "a rerun of the same data" run
expect "writes nothing to dim_customer" "$before_c" "$(customers)"
expect "writes nothing to dim_account" "$before_a" "$(accounts)"
expect "and says so" "success SCD2 0" "$(rows_affected dim_customer)"
expect "audit row of the rerun" "success src=3 ins=0 new=0 closed=0 del=0 short=0 t1=0 same=3" "$(last_run dim_customer)"

# ---------------------------------------------------------------- run 4
# A late row (before the current version of key 1), a value -> NULL, a
# closed key coming back.
sql $DB -o /dev/null <<'SQL'
UPDATE crm.customers SET city = 'Paris', updated_at = '2024-01-15' WHERE customer_id = 1;
UPDATE crm.accounts SET plan = NULL WHERE (region, account_no) = ('eu', 1);
INSERT INTO crm.accounts VALUES ('us', 1, 'cy', 'pro');
UPDATE crm.products SET is_deleted = true, changed_on = '2024-03-01' WHERE sku = 'A';
SQL
expect_dbt "fourth dbt run" run
expect "dim_customer: the late row splits the history" \
    "1:Oslo:ada@example.com:2024-01-01..2024-01-15:0 1:Paris:ada@example.com:2024-01-15..2024-02-01:0 1:Bergen:ada@example.com:2024-02-01..:1 2:Rome:brian@example.org:2024-01-01..:1 3:-:chen@example.com:2024-02-01..:1" \
    "$(customers)"
expect "audit row" "success src=3 ins=0 new=1 closed=0 del=0 short=1 t1=0 same=2" "$(last_run dim_customer)"
expect "dim_product: a delete marker closes the key" \
    "A:10.00:Apple:2024-01-01..2024-03-01 B:20.00:Bean:2024-01-01..2024-02-01 B:25.00:Bean:2024-02-01..infinity" "$(products)"
expect "its audit row" "success src=2 ins=0 new=0 closed=0 del=1 short=0 t1=0 same=1" "$(last_run dim_product)"
expect "dim_account: value -> NULL; the closed key comes back" \
    "eu1:basic:0 eu1:-:1 eu2:-:0 eu2:basic:1 us1:pro:0 us1:pro:1 us2:pro:1" "$(accounts)"
before_a=$(accounts)
expect_dbt "a rerun with the NULL" run -s dim_account
expect "opens no new version (a NULL equals itself)" "$before_a" "$(accounts)"
expect_dbt "dbt snapshot (reference)" snapshot


# ---------------------------------------------------------------- run 5
# A later updated_at with the same values: a change for dbt's timestamp
# strategy (detect='timestamp'), none for value detection.
before_c=$(customers)
q $DB "UPDATE crm.customers SET updated_at = '2024-03-01' WHERE customer_id = 2" >/dev/null
expect_dbt "fifth dbt run" run
expect "dim_customer (detect values): an updated_at alone is no change" "$before_c" "$(customers)"
expect "adapter response of the migration model" "success SCD2 2" "$(rows_affected customers_snapshot)"
expect_dbt "dbt snapshot (reference)" snapshot
expect "customers_snapshot (detect timestamp): the late row is ignored, the later updated_at is a new version" \
    "1:2024-01-01..2024-02-01 1:2024-02-01..9999-12-31 2:2024-01-01..2024-02-01 2:2024-02-01..2024-03-01 2:2024-03-01..9999-12-31 3:2024-02-01..9999-12-31" \
    "$(q $DB "SELECT string_agg(customer_id || ':' || dbt_valid_from::date || '..' || dbt_valid_to::date, ' ' ORDER BY customer_id, dbt_valid_from)
                FROM analytics_snapshots.customers_snapshot")"
expect "the taken-over table is row for row what dbt snapshot made of the same runs" \
    "$(snap customers_snapshot_ref)" "$(snap customers_snapshot)"
expect "its audit row" "success src=3 ins=0 new=1 closed=1 del=0 short=0 t1=0 same=2" "$(last_run_s)"

# ---------------------------------------------------------------- a new column
# The model gains a column: ignored by default (dbt's on_schema_change;
# the audit row names it), refused with 'fail', added with
# 'append_new_columns' -- by the core (register's on_schema_change), which
# gives the current versions the value in place instead of a new version
# per key.
before_a=$(accounts)
sed -i "s/^select region, account_no, owner, plan$/select region, account_no, owner, plan, upper(owner) as owner_code/" \
    "$proj/models/dim_account.sql"
expect_dbt "a new column in the model (on_schema_change: ignore)" run -s dim_account
expect "is not loaded" "$before_a f" \
    "$(accounts) $(q $DB "SELECT count(*) > 0 FROM pg_attribute WHERE attrelid = 'analytics.dim_account'::regclass AND attname = 'owner_code'")"
expect "the audit row names it" 'ignored staging column "owner_code"' \
    "$(q $DB "SELECT schema_change FROM scd2.audit_log WHERE dimension = 'analytics.dim_account' ORDER BY run_id DESC LIMIT 1")"
sed -i "s/mode='snapshot'$/mode='snapshot', on_schema_change='fail'/" "$proj/models/dim_account.sql"
if dbt run -s dim_account; then
    not_ok "on_schema_change: fail refuses it" "$(dbt_out)"
elif grep -q 'differs from dimension analytics.dim_account in column "owner_code"' "$work/out"; then
    ok "on_schema_change: fail refuses it, naming the column"
else
    not_ok "on_schema_change: fail refuses it, naming the column" "$(dbt_out)"
fi
sed -i "s/on_schema_change='fail'/on_schema_change='append_new_columns'/" "$proj/models/dim_account.sql"
expect_dbt "on_schema_change: append_new_columns" run -s dim_account
expect "adds the column and fills the current versions in place, no new version per key" \
    "success src=4 ins=0 new=0 closed=0 del=0 short=0 t1=0 same=0 filled=4 text" \
    "$(last_run dim_account) filled=$(q $DB "SELECT filled_in_place FROM scd2.audit_log WHERE dimension = 'analytics.dim_account' ORDER BY run_id DESC LIMIT 1") $(q $DB "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 'analytics.dim_account'::regclass AND attname = 'owner_code'")"
expect "the versions are as before, the current ones carry it" "$before_a ANN BOB CY DEE" \
    "$(accounts) $(q $DB "SELECT string_agg(owner_code, ' ' ORDER BY owner_code) FROM analytics.dim_account WHERE is_current")"
expect "closed versions keep NULL" "0" \
    "$(q $DB "SELECT count(owner_code) FROM analytics.dim_account WHERE NOT is_current")"
before_a=$(accounts)

# ---------------------------------------------------------------- a lost column
# The model loses owner_code again (the dimension keeps it: a column holds
# history) while a plan changes: the run fails, naming the column, and
# writes nothing; with missing_columns='carry_forward' the new version
# keeps the current version's owner_code.
sed -i "s/, upper(owner) as owner_code$//" "$proj/models/dim_account.sql"
q $DB "UPDATE crm.accounts SET plan = 'gold' WHERE owner = 'ann'" >/dev/null
before_runs=$(runs dim_account)
if dbt run -s dim_account; then
    not_ok "a column lost from the model fails the run" "$(dbt_out)"
elif grep -q 'lacks column "owner_code"' "$work/out"; then
    ok "a column lost from the model fails the run, naming it"
else
    not_ok "a column lost from the model fails the run, naming it" "$(dbt_out)"
fi
expect "and writes nothing" "$before_a $before_runs" "$(accounts) $(runs dim_account)"
sed -i "s/on_schema_change='append_new_columns'/on_schema_change='append_new_columns', missing_columns='carry_forward'/" \
    "$proj/models/dim_account.sql"
expect_dbt "missing_columns: carry_forward" run -s dim_account
expect "the new version keeps the current owner_code" "success src=4 ins=0 new=1 closed=1 del=0 short=0 t1=0 same=3 ANN:gold" \
    "$(last_run dim_account) $(q $DB "SELECT owner_code || ':' || plan FROM analytics.dim_account WHERE is_current AND owner = 'ann'")"
before_a=$(accounts)

# --empty renders the sources empty: no load (a full extract with no rows
# would close every key).
expect_dbt "dbt run --empty" run --empty -s dim_account
expect "loads nothing" "$before_a success SCD2 0" "$(accounts) $(rows_affected dim_account)"

# ---------------------------------------------------------------- a partial extract
# dim_account's config max_close_fraction=0.5: an extract that drops all
# accounts but ann's fails the run with the counts and writes nothing.
expect "max_close_fraction is registered from the config" "0.5" \
    "$(q $DB "SELECT max_close_fraction FROM scd2.dimensions WHERE dimension = 'analytics.dim_account'::regclass")"
q $DB "CREATE TABLE crm.accounts_saved AS SELECT * FROM crm.accounts; DELETE FROM crm.accounts WHERE owner <> 'ann'" >/dev/null
if dbt run -s dim_account; then
    not_ok "a partial extract fails the run (max_close_fraction)"
elif grep -q "would close [0-9]* of [0-9]* current keys, limit 0.5" "$work/out"; then
    ok "a partial extract fails the run with the counts (max_close_fraction)"
else
    not_ok "a partial extract fails the run with the counts (max_close_fraction)" "$(dbt_out)"
fi
expect "and writes nothing" "$before_a" "$(accounts)"
q $DB "DELETE FROM crm.accounts; INSERT INTO crm.accounts SELECT * FROM crm.accounts_saved; DROP TABLE crm.accounts_saved" >/dev/null

# ---------------------------------------------------------------- a bad batch
q $DB "INSERT INTO crm.accounts VALUES (NULL, 3, 'eve', 'pro')" >/dev/null
before_runs=$(runs dim_account)
if dbt run -s dim_account; then
    not_ok "a NULL inside the composite key fails the run"
else
    if grep -q 'staging table pg_temp_[0-9]*\."dim_account (dbt model)" has a NULL business key' "$work/out"; then
        ok "a NULL inside the composite key fails the run, naming the problem and the model"
    else
        not_ok "a NULL inside the composite key fails the run, naming the problem and the model" "$(dbt_out)"
    fi
fi
expect "and writes nothing" "$before_a $before_runs" "$(accounts) $(runs dim_account)"
q $DB "DELETE FROM crm.accounts WHERE region IS NULL" >/dev/null

# ---------------------------------------------------------------- dbt test
if dbt test; then
    ok "dbt test: one current row per key, no overlapping versions"
    expect "the package's tests ran on the four dimensions" "8" \
        "$(grep -cE 'PASS (scd2_)?(one_current_row|no_overlapping_versions)' "$work/out")"
else
    not_ok "dbt test: one current row per key, no overlapping versions" "$(dbt_out)"
fi
# A history broken behind scd2's back (its indexes dropped): the tests fail.
sql $DB -o /dev/null <<'SQL'
BEGIN;
DROP INDEX analytics.dim_account_scd2_current;
UPDATE analytics.dim_account SET valid_to = NULL, is_current = true
 WHERE (region, account_no) = ('eu', 2) AND NOT is_current;
COMMIT;
SQL
if dbt test -s dim_account; then
    not_ok "dbt test fails on a broken history" "$(dbt_out)"
else
    expect "dbt test fails on a broken history, with both tests" "2" \
        "$(grep -cE 'FAIL [0-9]+ (scd2_)?(one_current_row|no_overlapping_versions)' "$work/out")"
fi

# ---------------------------------------------------------------- --full-refresh
before_c=$(customers) before_runs=$(runs dim_customer)
if dbt run --full-refresh -s dim_customer; then
    not_ok "--full-refresh is refused" "$(dbt_out)"
else
    if grep -q "would destroy the history" "$work/out" && grep -q "rebuild_on_full_refresh" "$work/out"; then
        ok "--full-refresh is refused, with a hint"
    else
        not_ok "--full-refresh is refused, with a hint" "$(dbt_out)"
    fi
fi
expect "and the dimension is left alone" "$before_c $before_runs" "$(customers) $(runs dim_customer)"
# full_refresh: false in the model's config: dbt ignores --full-refresh.
sed -i "s/materialized='scd2',/materialized='scd2', full_refresh=false,/" "$proj/models/dim_customer.sql"
expect_dbt "with full_refresh: false the model loads as usual" run --full-refresh -s dim_customer
expect "history kept" "$before_c" "$(customers)"
# The explicit rebuild: history is dropped, the dimension starts again.
sed -i "s/full_refresh=false,/rebuild_on_full_refresh=true,/" "$proj/models/dim_customer.sql"
expect_dbt "rebuild_on_full_refresh: true rebuilds on --full-refresh" run --full-refresh -s dim_customer
expect "from the current source only" \
    "1:Paris:ada@example.com:2024-01-15..:1 2:Rome:brian@example.org:2024-03-01..:1 3:-:chen@example.com:2024-02-01..:1" \
    "$(customers)"
extract_readme >/dev/null

# ---------------------------------------------------------------- the config
# Changing the options registers the dimension again; changing a
# bookkeeping column is refused.
sed -i "s/type1=\['email'\],/type1=['email', 'name'],/" "$proj/models/dim_customer.sql"
expect_dbt "a changed type1 list" run -s dim_customer
expect "updates the registration" "{email,name}" \
    "$(q $DB "SELECT type1 FROM scd2.dimensions WHERE dimension = 'analytics.dim_customer'::regclass")"
sed -i "s/materialized='scd2',/materialized='scd2', valid_to_column='ends_at',/" "$proj/models/dim_customer.sql"
if dbt run -s dim_customer; then
    not_ok "a changed bookkeeping column is refused" "$(dbt_out)"
elif grep -q "bookkeeping columns or current_valid_to" "$work/out"; then
    ok "a changed bookkeeping column is refused"
else
    not_ok "a changed bookkeeping column is refused" "$(dbt_out)"
fi

# ---------------------------------------------------------------- inferred members
# docs/DBT.md's dimension model with inferred_column and its fact model,
# whose pre_hook infers the stores its sales name before the store extract
# has them; the dimension's next run completes them in place.  Then the
# change-stream options (sequence_column, ignore_null_updates) and
# inferred_column added to an existing dimension.
extracted=$(awk -v dir="$proj" '
    /^<!-- test\/dbt\/inferred: .* -->$/ { f = dir "/" $3; want = 1; next }
    want && /^```/ { want = 0; copying = 1; printf "" > f; next }
    copying && /^```$/ { copying = 0; close(f); n++; next }
    copying { print >> f }
    END { print n + 0 }' "$root/docs/DBT.md")
expect "docs/DBT.md has the dimension model with inferred_column and the fact model" "2" "$extracted"
sql $DB -o /dev/null <<'SQL' || not_ok "inferred members: the sources"
SET client_min_messages = warning;
CREATE TABLE crm.stores (store_id int, name text, city text, updated_at timestamptz);
CREATE TABLE crm.sales (sale_id int, store_id int, sold_at timestamptz, amount numeric);
INSERT INTO crm.stores VALUES (1, 'Main', 'Oslo', '2024-01-01');
INSERT INTO crm.sales VALUES (1, 1, '2024-02-01', 10), (2, 2, '2024-02-03', 20), (3, 2, '2024-02-02', 30);
SQL
stores() {
    q $DB "SELECT string_agg(store_id || ':' || coalesce(name, '-') || ':' || coalesce(city, '-') || ':' || valid_from::date
                             || ':' || is_inferred::int, ' ' ORDER BY store_id, valid_from)
             FROM analytics.dim_store"
}
sales() {
    q $DB "SELECT string_agg(f.sale_id || ':' || coalesce(d.store_id::text, '-') || ':' || coalesce(d.is_inferred::int::text, '-'), ' '
                             ORDER BY f.sale_id)
             FROM analytics.fct_sales f LEFT JOIN analytics.dim_store d ON d.sk = f.store_sk"
}
# status and metrics of a run of dim_store: the newest (0) or the one before (1)
store_run() {
    q $DB "SELECT status || ' src=' || source_rows || ' ins=' || inserted || ' new=' || new_versions
                  || ' same=' || unchanged || ' inferred=' || inferred || ' completed=' || completed
             FROM scd2.audit_log WHERE dimension = 'analytics.dim_store' ORDER BY run_id DESC LIMIT 1 OFFSET $1"
}
expect_dbt "the dimension and the fact model: first run" run -s dim_store fct_sales
expect "dim_store: the model's columns, the bookkeeping columns, then the flag" \
    "store_id integer,name text,city text,updated_at timestamp with time zone,sk bigint,valid_from timestamp with time zone,valid_to timestamp with time zone,is_current boolean,is_inferred boolean" \
    "$(q $DB "SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ',' ORDER BY attnum)
                FROM pg_attribute WHERE attrelid = 'analytics.dim_store'::regclass AND attnum > 0 AND NOT attisdropped")"
flag_column() {
    q $DB "SELECT format_type(a.atttypid, a.atttypmod) || ' not null=' || a.attnotnull || ' default ' || pg_get_expr(d.adbin, d.adrelid)
             FROM pg_attribute a LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
            WHERE a.attrelid = 'analytics.$1'::regclass AND a.attname = 'is_inferred'"
}
expect "the flag is boolean NOT NULL DEFAULT false" "boolean not null=true default false" "$(flag_column dim_store)"
expect "and registered as the inferred_column" "is_inferred" \
    "$(q $DB "SELECT inferred_column FROM scd2.dimensions WHERE dimension = 'analytics.dim_store'::regclass")"
expect "the pre_hook inferred store 2 from its earliest sale" "1:Main:Oslo:2024-01-01:0 2:-:-:2024-02-02:1" "$(stores)"
expect "its run: scd2.infer_members, metric inferred" "success src=3 ins=0 new=0 same=0 inferred=1 completed=0" "$(store_run 0)"
expect "every sale is keyed, store 2's to the inferred member" "1:1:0 2:2:1 3:2:1" "$(sales)"
sk2=$(q $DB "SELECT sk FROM analytics.dim_store WHERE store_id = 2")

# Store 2's record arrives, effective before its first sale; a sale of an
# unknown store 3.
sql $DB -o /dev/null -c "INSERT INTO crm.stores VALUES (2, 'Harbour', 'Bergen', '2024-01-15')" \
    -c "INSERT INTO crm.sales VALUES (4, 3, '2024-03-01', 40)"
expect_dbt "second run" run -s dim_store fct_sales
expect "store 2 is completed in place (valid_from moved back to its record), store 3 inferred" \
    "1:Main:Oslo:2024-01-01:0 2:Harbour:Bergen:2024-01-15:0 3:-:-:2024-03-01:1" "$(stores)"
expect "store 2 keeps its surrogate key, in one version" "$sk2 1" \
    "$(q $DB "SELECT min(sk) || ' ' || count(*) FROM analytics.dim_store WHERE store_id = 2")"
expect "the dimension's run: metric completed" "success src=2 ins=0 new=0 same=1 inferred=0 completed=1" "$(store_run 1)"
expect "the fact model's run inferred store 3" "success src=4 ins=0 new=0 same=0 inferred=1 completed=0" "$(store_run 0)"
expect "adapter response: the completion is a row written" "success SCD2 1" "$(rows_affected dim_store)"
if grep -q "scd2 run [0-9]*: 2 source rows, .*, 1 completed (" "$work/out"; then
    ok "the completion is in dbt's log"
else
    not_ok "the completion is in dbt's log" "$(dbt_out)"
fi
expect "the registration was left as it was" "0" "$(grep -c "updated the registration" "$work/out")"
expect "store 2's sales stay keyed to it, the flag cleared" "1:1:0 2:2:0 3:2:0 4:3:1" "$(sales)"
expect "every sale is keyed to the version valid at its time" "0" \
    "$(q $DB "SELECT count(*) FROM analytics.fct_sales f WHERE f.store_sk IS DISTINCT FROM
                 scd2.asof('analytics.dim_store', f.sold_at, f.store_id)")"

# The change-stream options: a partial update (a NULL city means
# "unchanged"), ordered by a sequence column of the model.
sed -i -e "s/inferred_column='is_inferred'\$/inferred_column='is_inferred', sequence_column='store_seq', ignore_null_updates='city'/" \
    -e "s/^select store_id, name, city, updated_at\$/select store_id, name, city, updated_at, 0 as store_seq/" \
    "$proj/models/dim_store.sql"
q $DB "UPDATE crm.stores SET name = 'Main Street', city = NULL, updated_at = '2024-03-01' WHERE store_id = 1" >/dev/null
expect_dbt "sequence_column and ignore_null_updates in the config" run -s dim_store
if grep -q "updated the registration" "$work/out"; then ok "register the dimension again"; else not_ok "register the dimension again" "$(dbt_out)"; fi
expect "with the sequence column and the partial-update columns" "store_seq {city}" \
    "$(q $DB "SELECT sequence_column || ' ' || ignore_null_updates::text FROM scd2.dimensions WHERE dimension = 'analytics.dim_store'::regclass")"
expect "a NULL city keeps the city" "Main Street:Oslo" \
    "$(q $DB "SELECT name || ':' || city FROM analytics.dim_store WHERE store_id = 1 AND is_current")"
before_st=$(stores)
expect_dbt "a rerun" run -s dim_store
expect "leaves the registration and the dimension as they are" "0 $before_st success SCD2 0" \
    "$(grep -c "updated the registration" "$work/out") $(stores) $(rows_affected dim_store)"

# inferred_column added to the config of an existing dimension: the run
# adds the column (false in every version) and registers it.
before_p=$(products)
sed -i "s/^    surrogate_key_column=none\$/    surrogate_key_column=none, inferred_column='is_inferred'/" "$proj/models/dim_product.sql"
expect_dbt "inferred_column added to an existing dimension's config" run -s dim_product
if grep -q "updated the registration" "$work/out"; then ok "registers it again"; else not_ok "registers it again" "$(dbt_out)"; fi
expect "adds the flag column" "boolean not null=true default false" "$(flag_column dim_product)"
expect "registered as the inferred_column" "is_inferred" \
    "$(q $DB "SELECT inferred_column FROM scd2.dimensions WHERE dimension = 'analytics.dim_product'::regclass")"
expect "the versions as before, none inferred" "$before_p 0" \
    "$(products) $(q $DB "SELECT count(*) FILTER (WHERE is_inferred) FROM analytics.dim_product")"

# ---------------------------------------------------------------- examples/dbt
# The post-hook variant: a table model whose post-hook calls scd2.apply.
ex=$work/example
cp -r "$root/examples/dbt" "$ex"
THIS="\"$EXDB\".\"staging\".\"stg_customer\""
q postgres "DROP DATABASE IF EXISTS $EXDB" >/dev/null
q postgres "CREATE DATABASE $EXDB" >/dev/null
sql $EXDB -o /dev/null <<'SQL' || { not_ok "example setup"; finish; }
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA crm;
CREATE SCHEMA marts;
CREATE TABLE crm.customers (customer_id int, name text, city text, tier text);
INSERT INTO crm.customers VALUES (1, 'Ada', 'Oslo', 'gold'), (2, 'Brian', 'Rome', 'silver');
SQL
exdim() {
    q $EXDB "SELECT string_agg(customer_id || ':' || city || ':' || is_current::int, ' ' ORDER BY customer_id, valid_from)
               FROM marts.dim_customer"
}
exruns() { q $EXDB "SELECT count(*) FROM scd2.audit_log"; }
exlast() {
    q $EXDB "SELECT status || ' ' || staging || ' ' || inserted || ' ' || new_versions || ' ' || closed
               FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1"
}
# The first build: there is no dimension for the hook to load yet, so it
# is built once with the hook replaced by a no-op.
cp "$ex/models/staging/stg_customer.sql" "$work/hook.sql"
sed -i 's/^    post_hook="CALL [^"]*"$/    post_hook="select 1"/' "$ex/models/staging/stg_customer.sql"
if dbt_in "$ex" run -s stg_customer; then ok "example: first build of the staging model"; else not_ok "example: first build of the staging model" "$(dbt_out)"; fi
cp "$work/hook.sql" "$ex/models/staging/stg_customer.sql"
if dbt_in "$ex" run-operation scd2_create_dimension \
        --args '{dimension: marts.dim_customer, staging: stg_customer, business_key: [customer_id]}'; then
    ok "example: run-operation scd2_create_dimension"
else
    not_ok "example: run-operation scd2_create_dimension" "$(dbt_out)"
fi
q $EXDB "CALL scd2.apply('staging.stg_customer', 'marts.dim_customer')" >/dev/null
expect "example: first load" "1:Oslo:1 2:Rome:1" "$(exdim)"

sql $EXDB -o /dev/null -c "UPDATE crm.customers SET city = 'Bergen' WHERE customer_id = 1" \
    -c "INSERT INTO crm.customers VALUES (3, 'Chen', 'Lima', 'gold')"
if dbt_in "$ex" run; then ok "example: dbt run with the post-hook inside the transaction"; else not_ok "example: dbt run with the post-hook inside the transaction" "$(dbt_out)"; fi
expect "example: the dimension" "1:Oslo:0 1:Bergen:1 2:Rome:1 3:Lima:1" "$(exdim)"
expect "example: its audit row names the rebuilt staging table" "success staging.stg_customer 1 1 1" "$(exlast)"
expect "example: loaded in the model's transaction" "t" \
    "$(q $EXDB "SELECT xmin::text::bigint = (SELECT txid::text::bigint % 4294967296 FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1)
                  FROM staging.stg_customer LIMIT 1")"
expect "example: no temporary or backup relation left" "" \
    "$(q $EXDB "SELECT string_agg(relname, ',') FROM pg_class WHERE relname LIKE 'stg_customer__dbt%'")"

# A failing in-transaction hook: dbt rolls back, the model keeps its
# previous build, the load and its audit row are gone with it.
before_runs=$(exruns) before_dim=$(exdim)
sql $EXDB -o /dev/null -c "UPDATE crm.customers SET city = 'Paris' WHERE customer_id = 1" \
    -c "INSERT INTO crm.customers VALUES (NULL, 'Nobody', 'Nowhere', NULL)"
if dbt_in "$ex" run; then
    not_ok "example: a failing in-transaction hook fails the model" "$(dbt_out)"
elif grep -q "NULL business key" "$work/out"; then
    ok "example: a failing in-transaction hook fails the model"
else
    not_ok "example: a failing in-transaction hook fails the model" "$(dbt_out)"
fi
expect "example: the model is rolled back to its previous build" "3 Bergen" \
    "$(q $EXDB "SELECT count(*) || ' ' || max(city) FILTER (WHERE customer_id = 1) FROM staging.stg_customer")"
expect "example: the dimension is unchanged, no audit row" "$before_dim $before_runs" "$(exdim) $(exruns)"

# after_commit: the model commits first; a failed load keeps an error row.
sed -i 's/^    post_hook="\(.*\)"$/    post_hook=after_commit("\1")/' "$ex/models/staging/stg_customer.sql"
if grep -q 'post_hook=after_commit(' "$ex/models/staging/stg_customer.sql"; then
    ok "example: the after_commit variant of the hook"
else
    not_ok "example: the after_commit variant of the hook" "$(cat "$ex/models/staging/stg_customer.sql")"
fi
if dbt_in "$ex" run; then
    not_ok "example: a failing after_commit hook fails the model" "$(dbt_out)"
elif grep -q "NULL business key" "$work/out"; then
    ok "example: a failing after_commit hook fails the model"
else
    not_ok "example: a failing after_commit hook fails the model" "$(dbt_out)"
fi
expect "example: the model is committed" "4" "$(q $EXDB "SELECT count(*) FROM staging.stg_customer")"
expect "example: the dimension is unchanged" "$before_dim" "$(exdim)"
expect "example: an error row is kept" "error staging.stg_customer 0 0 0" "$(exlast)"
q $EXDB "DELETE FROM crm.customers WHERE customer_id IS NULL" >/dev/null
if dbt_in "$ex" run; then ok "example: dbt run with an after_commit hook"; else not_ok "example: dbt run with an after_commit hook" "$(dbt_out)"; fi
expect "example: the dimension after the after_commit hook" "1:Oslo:0 1:Bergen:0 1:Paris:1 2:Rome:1 3:Lima:1" "$(exdim)"
expect "example: its audit row" "success staging.stg_customer 0 1 1" "$(exlast)"
expect "example: loaded in a transaction of its own, after the model's" "f" \
    "$(q $EXDB "SELECT xmin::text::bigint = (SELECT txid::text::bigint % 4294967296 FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1)
                  FROM staging.stg_customer LIMIT 1")"


# ------------------------------------------------------ docs/DBT.md's project
# The complete project of docs/DBT.md, in a project of its own: every
# fenced block preceded by a line <!-- test/dbt/example: PATH --> (the
# profile, dbt_project.yml, models/sources.yml), its model and schema file
# (models/dim_customer.*, also in the project above) and its local
# packages.yml.  Only the profile's connection values are replaced by this
# server's; a profile without them fails here, so the text cannot drift.
doc=$work/doc-project
mkdir -p "$doc/models" "$work/doc-profiles"
awk -v dir="$doc" '
    /^<!-- test\/dbt\/(example|project): [^ ]+ -->$/ {
        want = ($2 == "test/dbt/example:" || $3 ~ /^models\/dim_customer\./); f = dir "/" $3; next }
    want && /^```/ { want = 0; copying = 1; printf "" > f; next }
    copying && /^```$/ { copying = 0; close(f); next }
    copying { print >> f }' "$root/docs/DBT.md"
expect "docs/DBT.md has the complete project's files" \
    "dbt_project.yml models/dim_customer.sql models/dim_customer.yml models/sources.yml profiles.yml" \
    "$(cd "$doc" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ' | sed 's/ $//')"
mv "$doc/profiles.yml" "$work/doc-profiles/profiles.yml"
sed -i -e "s|^      host: localhost\$|      host: \"$PGHOST\"|" -e "s|^      port: 5432\$|      port: $PGPORT|" \
    -e "s|^      user: dbt\$|      user: \"$PGUSER\"|" -e "s|^      dbname: warehouse\$|      dbname: $DOCDB|" \
    "$work/doc-profiles/profiles.yml"
expect "docs/DBT.md's profile has the host, port, user and database this test replaces" 4 \
    "$(grep -cE "^      (host: \"$PGHOST\"|port: $PGPORT|user: \"$PGUSER\"|dbname: $DOCDB)\$" "$work/doc-profiles/profiles.yml")"
cp "$work/packages.local.yml" "$doc/packages.yml"
q postgres "DROP DATABASE IF EXISTS $DOCDB" >/dev/null 2>&1
q postgres "CREATE DATABASE $DOCDB" >/dev/null
sql $DOCDB -o /dev/null <<'SQL' || not_ok "docs/DBT.md's project: its source table"
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA crm;
CREATE TABLE crm.customers (customer_id int, name text, city text, email text, updated_at timestamptz);
INSERT INTO crm.customers VALUES (1, 'Ada', 'Oslo', 'ada@example.com', '2024-01-01'),
                                 (2, 'Brian', 'Rome', 'brian@example.com', '2024-01-01');
SQL
# doc_dbt COMMAND...: dbt in that project, with its profile.
doc_dbt() { DBT_PROFILES_DIR="$work/doc-profiles" DBT_PASSWORD= dbt_in "$doc" "$@"; }
doc_dim() {
    q $DOCDB "SELECT string_agg(customer_id || ':' || city || ':' || email || ':' || valid_from::date
                                || '..' || coalesce(valid_to::date::text, '') || ':' || is_current::int, ' '
                                ORDER BY customer_id, valid_from)
                FROM analytics.dim_customer"
}
if doc_dbt deps && doc_dbt run; then ok "docs/DBT.md's project: dbt deps and dbt run"
else not_ok "docs/DBT.md's project: dbt deps and dbt run" "$(dbt_out)"; fi
expect "docs/DBT.md's project: the dimension after the first run" \
    "1:Oslo:ada@example.com:2024-01-01..:1 2:Rome:brian@example.com:2024-01-01..:1" "$(doc_dim)"
sql $DOCDB -o /dev/null -c "UPDATE crm.customers SET city = 'Bergen', updated_at = '2024-02-01' WHERE customer_id = 1" \
    -c "UPDATE crm.customers SET email = 'brian@example.org', updated_at = '2024-02-01' WHERE customer_id = 2"
if doc_dbt run; then ok "docs/DBT.md's project: a second dbt run"; else not_ok "docs/DBT.md's project: a second dbt run" "$(dbt_out)"; fi
expect "docs/DBT.md's project: a change opens a version, an email change overwrites (type1)" \
    "1:Oslo:ada@example.com:2024-01-01..2024-02-01:0 1:Bergen:ada@example.com:2024-02-01..:1 2:Rome:brian@example.org:2024-01-01..:1" \
    "$(doc_dim)"
expect "docs/DBT.md's project: its audit rows" "success 2 2 0 0 0,success 2 0 1 1 1" \
    "$(q $DOCDB "SELECT string_agg(concat_ws(' ', status, source_rows, inserted, new_versions, closed, type1_updated), ',' ORDER BY run_id)
                   FROM scd2.audit_log")"
if doc_dbt test; then ok "docs/DBT.md's project: dbt test passes"; else not_ok "docs/DBT.md's project: dbt test passes" "$(dbt_out)"; fi

finish
