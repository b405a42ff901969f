#!/usr/bin/env bash
# test/release/package_smoke.sh MAJOR DEB -- on the system the package is
# for (this machine for 15, the chroot of its Debian release for 17 and 18):
# installs DEB with `apt-get install ./DEB` as a user would, starts a clean
# cluster of PostgreSQL MAJOR, runs CREATE EXTENSION scd2 and a smoke load
# (a first load, a change, the metrics in the audit log, the as-of lookup),
# stops the cluster and removes the package.  Prints TAP lines `ok - ...` /
# `not ok - ...`.  Needs root.
set -uo pipefail
major=${1:?major}; deb=${2:?deb}
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../../scripts/lib.sh
source "$here/../../scripts/lib.sh"
set +e
pkg=postgresql-$major-scd2
export PG_CONFIG=/usr/lib/postgresql/$major/bin/pg_config PG_BIN=/usr/lib/postgresql/$major/bin
export SCD2_RUN_DIR=/tmp/scd2-package-$SCD2_PORT

ok() { if [ "$2" = "$3" ]; then echo "ok - $major: $1"; else echo "not ok - $major: $1"; echo "#   expected: $2"; echo "#   got:      $3"; fi; }

DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$(cd "$(dirname "$deb")" && pwd)/$(basename "$deb")" >/tmp/scd2-apt-$major.log 2>&1
ok "apt-get install ./$(basename "$deb")" "install ok installed" "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)"
ok "the package installs the module and the scripts of its version" "yes yes" \
    "$([ -f "$("$PG_CONFIG" --pkglibdir)/scd2.so" ] && echo yes) $([ -f "$("$PG_CONFIG" --sharedir)/extension/scd2--0.5.sql" ] && echo yes)"

cluster_start >/dev/null 2>&1
q() { "$PG_BIN/psql" -X -q -At -v ON_ERROR_STOP=1 -d postgres "$@" 2>&1; }
ok "CREATE EXTENSION scd2 in a clean cluster" "$(sed -nE "s/^default_version *= *'([^']*)'.*/\1/p" "$here/../../scd2.control")" \
    "$(q -c 'CREATE EXTENSION scd2' -c "SELECT extversion FROM pg_extension WHERE extname = 'scd2'")"
smoke=$(q <<'SQL'
SET client_min_messages = warning;
CREATE TABLE stg_customer (customer_id int, name text, city text);
SELECT scd2.create_dimension('dim_customer', 'stg_customer', ARRAY['customer_id']) IS NOT NULL;
INSERT INTO stg_customer VALUES (1, 'Ada', 'Oslo'), (2, 'Brian', NULL);
\o /dev/null
CALL scd2.apply('stg_customer', 'dim_customer');
UPDATE stg_customer SET city = 'Bergen' WHERE customer_id = 1;
CALL scd2.apply('stg_customer', 'dim_customer');
\o
SELECT string_agg(concat_ws('/', status, source_rows, inserted, new_versions, closed), ' ' ORDER BY run_id)
  FROM scd2.audit_log;
SELECT count(*) || ' rows, ' || count(*) FILTER (WHERE is_current) || ' current' FROM dim_customer;
SELECT city FROM dim_customer WHERE sk = scd2.asof('dim_customer', now() + interval '1 day', 1);
SQL
)
ok "smoke load: metrics, versions, as-of lookup" "t
success/2/2/0/0 success/2/0/1/1
3 rows, 2 current
Bergen" "$smoke"
cluster_stop >/dev/null 2>&1

DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq "$pkg" >>/tmp/scd2-apt-$major.log 2>&1
ok "apt-get remove $pkg removes its files" "not-installed no" \
    "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || echo not-installed) $([ -e "$("$PG_CONFIG" --pkglibdir)/scd2.so" ] && echo yes || echo no)"
