#!/usr/bin/env bash
# scd2 security matrix (issue 21): every entry point x every kind of code a
# dimension or staging owner controls x every kind of caller.  The cells are
# GENERATED from the three lists below; each cell asserts
#   - the outcome: the call succeeds, or is refused with the expected error
#     (row-level security, ownership);
#   - that the owner's code ran as the owner in a security-restricted
#     operation -- never as the superuser or the extension's owner -- or,
#     for an entry point that runs as its caller (dimension_at, asof: the
#     caller's own read), as that caller, never a more privileged one;
#   - that the owner's code did run where the entry point must run it (no
#     cell passes because nothing happened);
#   - that policies held (a policy-limited caller is refused, or reads only
#     the rows its policy shows);
#   - that a refused call wrote nothing: the dimension, scd2.change_log and
#     scd2.audit_log (but for the one 'error' row a top-level CALL keeps)
#     are unchanged.
#
# Adding an entry point is one line in ENTRY_POINTS below: its name, the
# statement the caller runs (:run is a run loaded just before the cell,
# KEY a key literal of the dimension, @@ a line break) and whether it
# runs as its caller;
# then, if the owner's code must run in it, its name in the kinds' FIRES
# lists.  Its expected refusals follow from expect() (owner-only entry
# points are listed in OWNER_ONLY).
#
# Not in the matrix: scd2._not_distinct and the aggregate scd2._repeats,
# the comparisons a load's own statements call (common/not_distinct.c,
# common/repeats.c): they take values, not a dimension, read and write no
# table, and call the equality, hash and ordering functions of their
# arguments' types as whoever calls them -- within a load, the dimension's
# owner in its restricted statement, which the cells below check -- just
# as `a = b` or count(DISTINCT a) would.
#
# Also not in the matrix: the output function of a key type (a base type's I/O
# functions are C, and CREATE TYPE of a base type needs a superuser: it is
# trusted code, not something a dimension owner controls; the cast kind
# covers the jsonb path that would call it).
#
# The staging axes (issue 47, below the kinds' loop) vary what the first
# axes keep fixed: who owns the staging relation (the dimension's owner,
# the caller, a third role), what it is (a table, a security_invoker view,
# an ordinary view) and what code its owner put in it, for the entry
# points that read a staging relation.
#
# Needs a running server (PGHOST, PGPORT, PGUSER: a superuser) with scd2
# installed, as scripts/test.sh starts it.  Prints one line per cell, the
# cell count, then `security_matrix: N passed, M failed`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
PG_BIN=${PG_BIN:-$(pg_config --bindir)}
export PATH="$PG_BIN:$PATH"
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# The order-free cells' prep: STG gets an effective column that every
# insert and update sets (so no two states of a key share an instant), all
# of its rows a new instant, and @RESHAPE@ (STG_RESHAPE) before the
# registration reads the staging table's shape.
ORDER_FREE_PREP="ALTER TABLE STG ADD COLUMN IF NOT EXISTS eff timestamptz DEFAULT clock_timestamp(); CREATE OR REPLACE FUNCTION m.eff_now() RETURNS trigger LANGUAGE plpgsql AS \$\$ BEGIN NEW.eff := clock_timestamp(); RETURN NEW; END \$\$; CREATE OR REPLACE TRIGGER eff_now BEFORE UPDATE ON STG FOR EACH ROW EXECUTE FUNCTION m.eff_now(); UPDATE STG SET eff = clock_timestamp(); @RESHAPE@ SELECT scd2.register('m.dim', ARRAY['k'], staging => 'm.stg', effective_column => 'eff', on_schema_change => 'ignore', order_free => true);"

# name|statement|runs as the caller (1) or as the dimension's owner (0)
#   [|what the dimension's owner does to the staging table (STG) before the
#   cell, NN the cell's number]
ENTRY_POINTS=(
    "apply|CALL scd2.apply('m.stg', 'm.dim');|0"
    # issue 48: the same call from PL/pgSQL, as written (no variable)
    "apply_plpgsql|DO \$\$ BEGIN CALL scd2.apply('m.stg', 'm.dim'); END \$\$;|0"
    "merge|SELECT count(*) FROM scd2.merge('m.stg', 'm.dim');|0"
    "merge_dry_run|SELECT count(*) FROM scd2.merge('m.stg', 'm.dim', dry_run => true);|0"
    "apply_all|CALL scd2.apply_all();|0"
    "revert|SELECT scd2.revert(:run);|0"
    "rewind|SELECT scd2.rewind('m.dim', :'t0'::timestamptz);|0"
    "apply_snapshots|CALL scd2.apply_snapshots('m.snaps', 'm.dim', 'snap');@@\\if :ERROR@@\\else@@SELECT count(*) = 1 AS post FROM scd2.audit_log WHERE message = 'scd2.apply_snapshots: extract 1 of 1' AND finished_at >= :'t0' \\gset@@\\endif|0"
    "changes|SELECT count(*) FROM scd2.changes(:run);|0"
    "dimension_at|SELECT (SELECT count(*) FROM scd2.dimension_at(NULL::m.dim, now())) = (SELECT count(DISTINCT k) FROM m.dim) AS post \\gset|1"
    "dimension_at_known_at|SELECT (SELECT count(*) FROM scd2.dimension_at(NULL::m.dim, now(), now())) = (SELECT count(DISTINCT k) FROM m.dim) AS post \\gset|1"
    "prune_change_log|SELECT scd2.prune_change_log(interval '0', 'm.dim');|0"
    "prune_arrival_memory|SELECT scd2.prune_arrival_memory('m.dim', 'infinity');|0"
    "arrival_memory_size|SELECT count(*) FROM scd2.arrival_memory_size('m.dim');|0"
    "register|SELECT scd2.register('m.dim', ARRAY['k'], staging => 'm.stg', on_schema_change => 'append_new_columns');|0"
    "asof|SELECT scd2.asof('m.dim', now(), KEY);|1"
    "dbt_apply|CALL scd2.apply('m.stg'::regclass, 'm.dim'::regclass, pg_catalog.now(), null) \\gset@@\\if :ERROR@@\\else@@SELECT count(*) = 1 AS post FROM scd2.audit_log WHERE run_id = :run_id \\gset@@\\endif|0"
    # on_schema_change (issue 28): the load adds the staging table's new
    # column to the dimension (ALTER TABLE as the owner, restricted)
    "apply_new_column|CALL scd2.apply('m.stg', 'm.dim');@@\\if :ERROR@@\\else@@SELECT (SELECT count(*) FROM pg_attribute WHERE attrelid = 'm.dim'::regclass AND attname = 'added_NN') = 1 AS post \\gset@@\\endif|0|ALTER TABLE STG ADD COLUMN added_NN int DEFAULT NN;"
    # order_free (issue 24): the load recomputes the staged keys and
    # remembers the no-op observation of key 2 in scd2.arrival_memory (the
    # prep, as the owner: an effective column, set anew on every staging
    # row, and the dimension registered order-free; after apply_new_column,
    # which order_free's on_schema_change refuses)
    "apply_order_free|CALL scd2.apply('m.stg', 'm.dim');@@\\if :ERROR@@\\else@@SELECT public.mx_remembered() AS post \\gset@@\\endif|0|$ORDER_FREE_PREP"
    "merge_order_free|SELECT count(*) FROM scd2.merge('m.stg', 'm.dim');@@\\if :ERROR@@\\else@@SELECT public.mx_remembered() AS post \\gset@@\\endif|0|$ORDER_FREE_PREP"
    # fact tables (issue 49): m.fact, owned by the dimension's owner, with
    # an AFTER UPDATE trigger probing who runs it, holds one fact at
    # 'infinity' keyed to key 1's current version, which each cell's load
    # closes; rekey_facts updates it as the fact table's owner (the
    # trigger), check_facts is the caller's own read (a policy of m.fact or
    # m.dim applies to it as to any query)
    "register_fact|SELECT scd2.register_fact('m.fact', 'm.dim', 'sk', 't');|0"
    "check_facts|SELECT count(*) FROM scd2.check_facts('m.fact');|1"
    "rekey_facts|SELECT scd2.rekey_facts('m.fact', full => true);@@\\if :ERROR@@\\else@@SELECT NOT EXISTS (SELECT FROM scd2.check_facts('m.fact')) AS post \\gset@@\\endif|0|UPDATE m.fact SET sk = (SELECT min(d.sk) FROM m.dim d WHERE d.valid_to IS NOT NULL AND d.k = (SELECT v.k FROM m.dim v WHERE v.sk = m.fact.sk));"
    # (its prep, as the owner, keys the fact to a closed version of its key:
    # every load re-keys m.fact already, see below)
    # m.fact is maintained (register_fact's default): every load, revert and
    # rewind above re-keys it in its transaction, as its owner; here the
    # callers lose UPDATE on it (the prep, last: it stays revoked; the fact
    # a refused rekey_facts cell left keyed wrongly is fixed first) and key
    # 1, whose current version the fact names, changes again: a load by a
    # caller without UPDATE is refused before it writes anything, naming the
    # fact table, and an allowed one re-keys the fact (its trigger, in every
    # kind's FIRES, runs as the fact table's owner, restricted)
    "apply_maintained_no_update|CALL scd2.apply('m.stg', 'm.dim');@@\\if :ERROR@@\\else@@SELECT NOT EXISTS (SELECT FROM scd2.check_facts('m.fact')) AS post \\gset@@\\endif|0|DO \$\$ BEGIN PERFORM scd2.rekey_facts('m.fact', full => true); END \$\$; REVOKE UPDATE ON m.fact FROM regress_mx_grantee, regress_mx_limited; UPDATE STG SET city = city || ' again' WHERE k = (SELECT d.k FROM m.dim d JOIN m.fact f ON f.sk = d.sk);"
    # inferred members (issue 49): the owner (prep) gives m.dim a flag and
    # registers it as inferred_column, and copies the staging keys into a
    # batch of facts m.fb, whose newest key (the prelude's key NN+500) the
    # dimension does not have: infer_members inserts its version as the
    # owner, restricted (defaults, checks, triggers, the key's cast into the
    # change log); the next cell's prelude load completes it
    "infer_members|SELECT scd2.infer_members('m.fb', 'm.dim', 't');@@\\if :ERROR@@\\else@@SELECT count(*) = 1 AS post FROM m.dim WHERE inf \\gset@@\\endif|0|ALTER TABLE m.dim ADD COLUMN IF NOT EXISTS inf boolean NOT NULL DEFAULT false; SELECT scd2.register('m.dim', ARRAY['k'], staging => 'm.stg', on_schema_change => 'append_new_columns', inferred_column => 'inf'); CREATE TABLE IF NOT EXISTS m.fb AS SELECT k, now() AS t FROM STG WITH NO DATA; GRANT SELECT ON m.fb TO PUBLIC; DELETE FROM m.fb; INSERT INTO m.fb SELECT k, now() FROM STG;"
)
OWNER_ONLY=" register prune_change_log prune_arrival_memory arrival_memory_size register_fact "

# The kinds of owner code: each is a shell function printing its setup
# (run as the owner: it creates m.stg and m.dim, registered) and sets
# KTYPE (the key's type), KEYLIT (printf format of a key literal from a
# number), STG_TABLE (the table the cells stage rows in), FIRES (the
# entry points that must run the code, for an allowed caller) and
# STG_RESHAPE (what makes a column added to STG_TABLE a staging column);
# SNAPS_VIEW=1 when m.snaps, apply_snapshots' table of extracts (m.stg's
# rows and a snapshot column), must be a view over m.stg (else it is a plain
# table).
KINDS=(trigger default check domain_check cast operator index_expression policy staging_view generated)
# apply_new_column stays last but for the order-free loads: it adds columns
# to m.stg that m.snaps lacks
LOADS="apply apply_plpgsql merge apply_all dbt_apply apply_snapshots apply_new_column apply_order_free merge_order_free infer_members"
# (SCD2_MX_KINDS="trigger cast" runs only those, while developing)
read -r -a KINDS <<<"${SCD2_MX_KINDS:-${KINDS[*]}}"

common_tables() {   # $1: the key's type, $2: column DDL to place right after the key (optional)
    cat <<SQL
CREATE TABLE m.stg (k $1${2:+, $2}, tenant text, city text);
SELECT scd2.create_dimension('m.dim', 'm.stg', ARRAY['k']);
SQL
}

kind_trigger() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES="$LOADS revert rewind"
    common_tables int
    cat <<'SQL'
CREATE FUNCTION m.trg() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM m.probe('trigger'); RETURN NULL; END $$;
CREATE TRIGGER trg AFTER INSERT OR UPDATE OR DELETE ON m.dim FOR EACH ROW EXECUTE FUNCTION m.trg();
SQL
}
kind_default() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES="$LOADS"
    common_tables int
    echo "ALTER TABLE m.dim ADD COLUMN note boolean DEFAULT m.probe('default');"
}
kind_check() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES="$LOADS revert rewind"
    common_tables int
    echo "ALTER TABLE m.dim ADD CONSTRAINT probed CHECK (m.probe('check'));"
}
kind_domain_check() {
    # (scd2.changes of a batch logged by surrogate keys reads the key as it
    # is, never through its domain: load/batch_log.c)
    KTYPE=m.kdom KEYLIT="'k%d'::text" STG_TABLE=m.stg FIRES="$LOADS merge_dry_run revert rewind"
    # the staging key is text, the dimension's the domain: loads convert
    echo "CREATE DOMAIN m.kdom AS text CHECK (m.probe('domain check'));"
    common_tables text
    echo "ALTER TABLE m.dim ALTER k TYPE m.kdom;"
    echo "SELECT scd2.register('m.dim', ARRAY['k'], staging => 'm.stg');"
}
kind_cast() {
    # a batch of changes logged by surrogate keys casts no key when it
    # loads (load/batch_log.c), an in-order order-free one neither; its
    # feed, revert and rewind do
    KTYPE=m.code KEYLIT="'k%d'::m.code" STG_TABLE=m.stg
    FIRES="merge merge_dry_run apply_new_column merge_order_free changes revert rewind infer_members"
    echo "CREATE TYPE m.code AS ENUM ($(seq -f "'k%g'" 0 999 | paste -sd,));"
    cat <<'SQL'
CREATE FUNCTION m.code_json(m.code) RETURNS json LANGUAGE plpgsql AS $$
BEGIN PERFORM m.probe('cast'); RETURN to_json($1::text); END $$;
CREATE CAST (m.code AS json) WITH FUNCTION m.code_json(m.code);
SQL
    common_tables m.code
}
kind_operator() {
    # An = of the owner's on the key type and on a tracked column's: scd2
    # must never pick it -- not in the key's joins, not in scd2._repeats,
    # not in scd2._not_distinct, which takes a column's equality from its
    # type's default operator class (only a superuser creates one) and
    # would call a PARALLEL SAFE one in C.  The tracked column `grade`
    # comes first and gets a new value whenever a staging row's city
    # changes, so a changed key's comparison does call an equality on it.
    KTYPE=m.code KEYLIT="'k%d'::m.code" STG_TABLE=m.stg FIRES=""
    echo "CREATE TYPE m.code AS ENUM ($(seq -f "'k%g'" 0 999 | paste -sd,));"
    cat <<'SQL'
CREATE FUNCTION m.code_eq(m.code, m.code) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
BEGIN PERFORM m.probe('operator'); RETURN $1::text = $2::text; END $$;
CREATE OPERATOR m.= (LEFTARG = m.code, RIGHTARG = m.code, FUNCTION = m.code_eq);
CREATE SEQUENCE m.grades;
CREATE FUNCTION m.next_grade() RETURNS m.code LANGUAGE sql AS
    $$ SELECT ('k' || nextval('m.grades') % 1000)::m.code $$;
CREATE FUNCTION m.regrade() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.grade := m.next_grade(); RETURN NEW; END $$;
SQL
    common_tables m.code "grade m.code DEFAULT m.next_grade()"
    cat <<'SQL'
CREATE TRIGGER regrade BEFORE UPDATE OF city ON m.stg FOR EACH ROW
    WHEN (NEW.city IS DISTINCT FROM OLD.city) EXECUTE FUNCTION m.regrade();
SQL
}
kind_index_expression() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES="$LOADS"
    common_tables int
    echo "CREATE INDEX dim_probe ON m.dim ((m.probe_imm('index expression', city)));"
}
kind_policy() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES=""
    common_tables int
    cat <<'SQL'
ALTER TABLE m.dim ENABLE ROW LEVEL SECURITY;
CREATE POLICY probed ON m.dim USING (m.probe('policy')) WITH CHECK (m.probe('policy'));
SQL
}
kind_staging_view() {
    # (infer_members reads its batch of facts, a table, not the view)
    KTYPE=int KEYLIT="%d" STG_TABLE=m.src FIRES="${LOADS% infer_members} merge_dry_run" SNAPS_VIEW=1
    # after a column is added to m.src, the view shows it too
    STG_RESHAPE="CREATE OR REPLACE VIEW m.stg AS SELECT * FROM m.src WHERE m.probe('staging view');"
    cat <<'SQL'
CREATE TABLE m.src (k int, tenant text, city text);
CREATE VIEW m.stg AS SELECT k, tenant, city FROM m.src WHERE m.probe('staging view');
SELECT scd2.create_dimension('m.dim', 'm.stg', ARRAY['k']);
GRANT SELECT ON m.src TO PUBLIC;
SQL
}
kind_generated() {
    KTYPE=int KEYLIT="%d" STG_TABLE=m.stg FIRES="$LOADS"
    common_tables int
    echo "ALTER TABLE m.dim ADD COLUMN gen text GENERATED ALWAYS AS (m.probe_imm('generated column', city)) STORED;"
}

# caller|role to SET (empty: the superuser running the script)
CALLERS=(
    "owner|regress_mx_owner"
    "superuser|"
    "grantee|regress_mx_grantee"
    "limited|regress_mx_limited"
)

# expect ENTRY KIND CALLER: ok, refused_owner, refused_rls, refused_unsafe or
# refused_fact.
expect() {
    local entry=$1 kind=$2 caller=$3 runs_as_caller=$4
    case "$OWNER_ONLY" in *" $entry "*)
        case $caller in owner|superuser) echo ok ;; *) echo refused_owner ;; esac; return ;;
    esac
    # dimension_at(..., known_at) runs as its caller: a key with the owner's
    # cast to json, or a domain with a CHECK, is refused for every caller
    if [ "$entry" = dimension_at_known_at ]; then
        case $kind in cast|domain_check) echo refused_unsafe; return ;; esac
    fi
    # subject to a policy: limited always, grantee on the policy kind
    if [ "$caller" = limited ] || { [ "$kind" = policy ] && [ "$caller" = grantee ]; }; then
        # dimension_at is the caller's own SELECT: the policy applies to it;
        # dimension_at(..., known_at) reads the change log as the extension
        # owner, which no policy limits: refused
        case $entry in dimension_at|check_facts) echo ok ;; *) echo refused_rls ;; esac
        return
    fi
    # a maintained fact table the caller may not update
    if [ "$entry" = apply_maintained_no_update ] && [ "$caller" = grantee ]; then
        echo refused_fact; return
    fi
    echo ok
}

psql_su() { psql -X -q -v ON_ERROR_STOP=1 "$@"; }
psql_su -d postgres -c "DO \$\$ BEGIN
    DROP ROLE IF EXISTS regress_mx_owner; DROP ROLE IF EXISTS regress_mx_grantee;
    DROP ROLE IF EXISTS regress_mx_limited; DROP ROLE IF EXISTS regress_mx_etl;
END \$\$" >/dev/null 2>&1 || true
for k in "${KINDS[@]}"; do psql_su -d postgres -c "DROP DATABASE IF EXISTS scd2_mx_$k" >/dev/null 2>&1; done
psql_su -d postgres -c "DROP DATABASE IF EXISTS scd2_mx_staging" >/dev/null 2>&1
psql_su -d postgres -c "CREATE ROLE regress_mx_owner; CREATE ROLE regress_mx_grantee; CREATE ROLE regress_mx_limited; CREATE ROLE regress_mx_etl;" >/dev/null

# The mechanism holds by construction only while statements go through
# src/common/exec.c: no other file may call SPI's executors, except these.
SPI_ALLOWED="common/exec.c load/convert.c catalog/dimensions.c citus/shards.c asof/citus_route.c"
spi_users=$(cd "$here/../../src" && grep -l -E 'SPI_(execute|prepare|cursor_open)' ./*.c ./*/*.c | sed 's|^\./||' | sort | tr '\n' ' ')
lint_ok=1
for f in $spi_users; do
    case " $SPI_ALLOWED " in *" $f "*) ;; *) lint_ok=0; echo "not ok - $f runs SPI statements itself, outside src/common/exec.c" ;; esac
done

cells=0
started=$SECONDS
superuser=$(psql -X -At -d postgres -c "SELECT current_user")
for kind in "${KINDS[@]}"; do
    db=scd2_mx_$kind
    psql_su -d postgres -c "CREATE DATABASE $db" >/dev/null
    SNAPS_VIEW=0
    kind_sql=$("kind_$kind")
    STG_RESHAPE=
    "kind_$kind" >/dev/null   # sets KTYPE, KEYLIT, STG_TABLE, FIRES, STG_RESHAPE in this shell
    FIRES="$FIRES rekey_facts apply_maintained_no_update"   # the fact table's trigger, every kind
    # apply_snapshots' extracts: m.stg's rows at the time in the cell's prelude
    if [ "$SNAPS_VIEW" = 1 ]; then
        snaps_sql="CREATE TABLE m.snap_at (t timestamptz); GRANT SELECT ON m.snap_at TO PUBLIC;
CREATE VIEW m.snaps AS SELECT s.*, a.t AS snap FROM m.stg s CROSS JOIN m.snap_at a;"
        snaps_fill="DELETE FROM m.snap_at; INSERT INTO m.snap_at VALUES (statement_timestamp());"
    else
        snaps_sql="CREATE TABLE m.snaps AS SELECT s.*, now() AS snap FROM m.stg s WITH NO DATA;"
        snaps_fill="DELETE FROM m.snaps; INSERT INTO m.snaps SELECT s.*, statement_timestamp() FROM m.stg s;"
    fi
    if ! psql_su -d "$db" >"$out/setup_$kind" 2>&1 <<SQL
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA m AUTHORIZATION regress_mx_owner;
GRANT USAGE ON SCHEMA m TO PUBLIC;
SET ROLE regress_mx_owner;
CREATE TABLE m.probe_log (what text, ran_as name, restricted boolean);
GRANT INSERT ON m.probe_log TO PUBLIC;
CREATE FUNCTION m.probe(what text) RETURNS boolean LANGUAGE plpgsql AS \$\$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO m.probe_log VALUES (what, current_user, v_restricted);
    RETURN true;
END \$\$;
-- for index and generation expressions, which must be immutable
CREATE FUNCTION m.probe_imm(what text, v text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS \$\$
BEGIN PERFORM m.probe(what); RETURN v; END \$\$;
$kind_sql
$snaps_sql
-- a new staging column is added to the dimension by the load (apply_new_column)
SELECT scd2.register('m.dim', ARRAY['k'], staging => 'm.stg', on_schema_change => 'append_new_columns');
GRANT SELECT, INSERT, UPDATE, DELETE ON m.dim TO regress_mx_grantee, regress_mx_limited;
GRANT SELECT ON m.stg, m.snaps TO regress_mx_grantee, regress_mx_limited;
CREATE POLICY limited_a ON m.dim TO regress_mx_limited USING (tenant = 'a') WITH CHECK (tenant = 'a');
INSERT INTO $STG_TABLE (k, tenant, city) VALUES ($(printf "$KEYLIT" 1), 'a', 'Oslo'), ($(printf "$KEYLIT" 2), 'b', 'Rome');
CALL scd2.apply('m.stg', 'm.dim', now() - interval '1 day');
CREATE TABLE m.fact (sk bigint, t timestamptz);
CREATE FUNCTION m.fact_trg() RETURNS trigger LANGUAGE plpgsql AS \$\$
BEGIN PERFORM m.probe('fact trigger'); RETURN NULL; END \$\$;
CREATE TRIGGER fact_trg AFTER UPDATE ON m.fact FOR EACH ROW EXECUTE FUNCTION m.fact_trg();
SELECT scd2.register_fact('m.fact', 'm.dim', 'sk', 't');
INSERT INTO m.fact SELECT d.sk, 'infinity' FROM m.dim d WHERE d.valid_to IS NULL AND d.k = $(printf "$KEYLIT" 1);
GRANT SELECT, UPDATE ON m.fact TO regress_mx_grantee, regress_mx_limited;
CREATE POLICY limited_f ON m.fact TO regress_mx_limited USING (true) WITH CHECK (true);
RESET ROLE;
-- what a refused call must leave alone
CREATE FUNCTION public.mx_state() RETURNS text LANGUAGE sql AS \$\$
    SELECT (SELECT coalesce(md5(string_agg(t::text, ',' ORDER BY t::text)), '-') FROM m.dim t)
        || ' ' || (SELECT coalesce(md5(string_agg(c::text, ',' ORDER BY c::text)), '-') FROM scd2.change_log c)
        || ' ' || (SELECT coalesce(md5(string_agg(a::text, ',' ORDER BY a.run_id)), '-') FROM scd2.audit_log a
                    WHERE a.status <> 'error')
        || ' ' || (SELECT coalesce(md5(string_agg(r::text, ',' ORDER BY r::text)), '-') FROM scd2.arrival_memory r)
        || ' ' || (SELECT coalesce(md5(string_agg(f::text, ',' ORDER BY f::text)), '-') FROM m.fact f)
\$\$;
-- the order-free cells' post-check: the newest load of m.dim remembered
-- something (scd2.arrival_memory is not readable by the callers)
CREATE FUNCTION public.mx_remembered() RETURNS boolean LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog AS
    \$\$ SELECT EXISTS (SELECT FROM scd2.arrival_memory r WHERE r.dimension = 'm.dim'::regclass AND r.dropped_by IS NULL
                          AND r.run_id = (SELECT max(a.run_id) FROM scd2.audit_log a
                                           WHERE a.dimension = 'm.dim' AND a.status = 'success')) \$\$;
CREATE FUNCTION public.mx_errors() RETURNS bigint LANGUAGE sql AS
    \$\$ SELECT count(*) FROM scd2.audit_log WHERE status = 'error' \$\$;
CREATE FUNCTION public.mx_verdict(failed boolean, msg text, before text, errors_before bigint,
                                  expected text, caller name, caller_runs boolean, must_fire boolean,
                                  post boolean) RETURNS text LANGUAGE plpgsql AS \$\$
DECLARE
    v_bad text;
    v_fired bigint;
BEGIN
    IF expected = 'ok' AND failed THEN
        RETURN 'refused: ' || msg;
    ELSIF expected <> 'ok' AND NOT failed THEN
        RETURN 'not refused (expected ' || expected || ')';
    ELSIF expected = 'refused_rls' AND msg NOT LIKE '%row-level security%'
          -- apply_all reports its loads' errors in their audit rows
          AND NOT (public.mx_errors() > errors_before
                   AND (SELECT a.message FROM scd2.audit_log a WHERE a.status = 'error'
                         ORDER BY a.run_id DESC LIMIT 1) LIKE '%row-level security%') THEN
        RETURN 'refused for another reason: ' || msg;
    ELSIF expected = 'refused_owner' AND msg NOT LIKE '%must be owner%' THEN
        RETURN 'refused for another reason: ' || msg;
    ELSIF expected = 'refused_unsafe' AND msg NOT LIKE '%cannot reconstruct dimension%' THEN
        RETURN 'refused for another reason: ' || msg;
    ELSIF expected = 'refused_fact' AND msg NOT LIKE 'permission denied for fact table m.fact%' THEN
        RETURN 'refused for another reason: ' || msg;
    END IF;
    IF failed AND (public.mx_state() <> before OR public.mx_errors() - errors_before NOT IN (0, 1)) THEN
        RETURN 'a refused call wrote something';
    END IF;
    SELECT string_agg(DISTINCT what || ' as ' || ran_as || CASE WHEN restricted THEN '' ELSE ' unrestricted' END, ', ')
      INTO v_bad FROM m.probe_log
     WHERE NOT ((ran_as = 'regress_mx_owner' AND restricted)
                OR (caller_runs AND ran_as = caller AND NOT (SELECT rolsuper FROM pg_roles WHERE rolname = caller)));
    IF v_bad IS NOT NULL THEN
        RETURN 'owner code ran wrongly: ' || v_bad;
    END IF;
    SELECT count(*) INTO v_fired FROM m.probe_log;
    IF NOT failed AND must_fire AND v_fired = 0 THEN
        RETURN 'the owner''s code did not run';
    END IF;
    IF NOT failed AND NOT post THEN
        RETURN 'the post-check failed';
    END IF;
    RETURN 'ok';
END \$\$;
SQL
    then
        echo "not ok - setup of kind $kind"; sed 's/^/#   /' "$out/setup_$kind"
        echo "security_matrix: 0 passed, 1 failed"; exit 1
    fi

    # one generated script per kind: every (entry point, caller) cell
    script=$out/cells_$kind.sql
    : >"$script"
    n=2
    for e in "${ENTRY_POINTS[@]}"; do
        IFS='|' read -r entry stmt runs_as_caller prep <<<"$e"
        for c in "${CALLERS[@]}"; do
            IFS='|' read -r caller role <<<"$c"
            n=$((n + 1)); cells=$((cells + 1))
            exp=$(expect "$entry" "$kind" "$caller" "$runs_as_caller")
            case " $FIRES " in *" $entry "*) fire=true ;; *) fire=false ;; esac
            rolename=${role:-$superuser}
            stmt_k=${stmt//KEY/$(printf "$KEYLIT" 1)}
            stmt_k=${stmt_k//@@/$'\n'}
            stmt_k=${stmt_k//NN/$n}
            {
                echo "-- cell $entry x $kind x $caller"
                echo "SET ROLE regress_mx_owner;"
                # a change to load: a new key and a changed one
                echo "INSERT INTO $STG_TABLE (k, tenant, city) VALUES ($(printf "$KEYLIT" "$n"), 'b', 'City $n');"
                echo "UPDATE $STG_TABLE SET city = 'City $n' WHERE k = $(printf "$KEYLIT" 1);"
                # the run revert and changes read: a load just before the cell
                echo "SELECT clock_timestamp() AS t0 \\gset"
                echo "CALL scd2.apply('m.stg', 'm.dim', pg_catalog.now(), NULL) \\gset"
                echo "SELECT :run_id AS run \\gset"
                echo "INSERT INTO $STG_TABLE (k, tenant, city) VALUES ($(printf "$KEYLIT" "$((n + 500))"), 'a', 'City $n');"
                # only apply_snapshots reads m.snaps (and apply_new_column,
                # last, gives m.stg columns m.snaps lacks)
                [ "$entry" = apply_snapshots ] && echo "$snaps_fill"
                if [ -n "$prep" ]; then
                    prep_k=${prep//STG/$STG_TABLE}; prep_k=${prep_k//NN/$n}
                    case $prep_k in
                        *@RESHAPE@*) printf '%s\n' "${prep_k//@RESHAPE@/${STG_RESHAPE:-}}" ;;
                        *) printf '%s\n' "$prep_k" "${STG_RESHAPE:-}" ;;
                    esac
                fi
                [ "$caller" = limited ] && echo "ALTER TABLE m.dim ENABLE ROW LEVEL SECURITY; ALTER TABLE m.fact ENABLE ROW LEVEL SECURITY;"
                echo "RESET ROLE;"
                echo "DELETE FROM m.probe_log;"
                echo "SELECT public.mx_state() AS before, public.mx_errors() AS errors_before \\gset"
                echo "\\set post true"
                [ -n "$role" ] && echo "SET ROLE $role;"
                printf '%s\n' "$stmt_k"
                echo "\\set failed :ERROR"
                echo "\\set msg :LAST_ERROR_MESSAGE"
                printf '%s\n' '\if :failed' '\else' "\\set msg ''" '\endif'
                echo "RESET ROLE;"
                echo "SELECT 'cell|$entry x $kind x $caller|' || public.mx_verdict(:'failed', :'msg', :'before', :errors_before, '$exp', '$rolename', $([ "$runs_as_caller" = 1 ] && echo true || echo false), $fire, :'post');"
                [ "$caller" = limited ] && [ "$kind" != policy ] && echo "SET ROLE regress_mx_owner; ALTER TABLE m.dim DISABLE ROW LEVEL SECURITY; RESET ROLE;"
                [ "$caller" = limited ] && echo "SET ROLE regress_mx_owner; ALTER TABLE m.fact DISABLE ROW LEVEL SECURITY; RESET ROLE;"
            } >>"$script"
        done
    done
    psql -X -q -At -v ON_ERROR_STOP=0 -v VERBOSITY=terse -d "$db" -f "$script" >"$out/result_$kind" 2>"$out/stderr_$kind"
    psql_su -d postgres -c "DROP DATABASE $db" >/dev/null
done


# ---------------------------------------------------------------------------
# The staging axes (issue 47): who owns the staging relation, what it is,
# and what code its owner put in it.  The dimension's owner (regress_mx_owner)
# owns m.d_I (and m.o_I, the same registered order_free with effective
# column eff); the staging relation is
#   owned by   the dimension's owner | the caller | a third role (regress_mx_etl)
#   a          table | security_invoker view | ordinary view (over a table
#              of the same owner)
#   with code  a cast (the column is the staging owner's enum, with an
#              assignment cast to the dimension's text), a domain (with a
#              CHECK), a collation, an operator (an = on text in the owner's
#              schema), a default (of a column the dimension lacks), or only
#              the view's function (a view's WHERE calls it).
# Each cell asserts: a staging owner the dimension's owner does not trust
# (neither it, a member of it, nor a superuser) is refused when it brings a
# view, a type or a collation (trust.c), and then none of its code ran and
# nothing was written; its operator and default never run, and its table
# loads; a trusted owner's code ran as the dimension's owner, restricted,
# and a cast or a view's function did run.  The entry points are those that
# read a staging relation (apply_all is the same load as apply, for every
# registered dimension: sql-tests/security_staging.sql refuses it there).
STAGING_OWNERS="owner caller third"
STAGING_FORMS="table invoker_view view"
STAGING_CODES="cast domain collation operator default view_function"
STAGING_CALLERS="owner superuser grantee"
# name|statement (@D: the dimension, @O: its order-free twin, @S: the staging relation)
STAGING_ENTRIES=(
    "apply|CALL scd2.apply('@S', '@D');"
    "merge|SELECT count(*) FROM scd2.merge('@S', '@D');"
    "merge_dry_run|SELECT count(*) FROM scd2.merge('@S', '@D', dry_run => true);"
    "apply_snapshots|CALL scd2.apply_snapshots('@S', '@D', 'eff');"
    "apply_order_free|CALL scd2.apply('@S', '@O');"
)
role_of() {   # the role a staging owner axis names for a caller
    case $1/$2 in
        owner/*) echo regress_mx_owner ;;
        third/*) echo regress_mx_etl ;;
        caller/owner) echo regress_mx_owner ;;
        caller/superuser) echo "$superuser" ;;
        caller/grantee) echo regress_mx_grantee ;;
    esac
}
trusted_role() { [ "$1" = regress_mx_owner ] || [ "$1" = "$superuser" ]; }

sdb=scd2_mx_staging
sscript=$out/cells_staging.sql
psql_su -d postgres -c "CREATE DATABASE $sdb" >/dev/null
{
    cat <<'SQL'
SET client_min_messages = warning;
CREATE EXTENSION scd2;
CREATE SCHEMA m AUTHORIZATION regress_mx_owner;
CREATE SCHEMA s;
GRANT USAGE ON SCHEMA m TO PUBLIC;
GRANT USAGE, CREATE ON SCHEMA s TO PUBLIC;
CREATE TABLE m.probe_log (what text, ran_as name, restricted boolean);
GRANT INSERT ON m.probe_log TO PUBLIC;
-- counts every probe, in a refused call too (nextval is not rolled back)
CREATE SEQUENCE m.probes;
GRANT USAGE ON SEQUENCE m.probes TO PUBLIC;
CREATE FUNCTION m.probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO m.probe_log VALUES (what, current_user, v_restricted);
    PERFORM nextval('m.probes');
    RETURN true;
END $$;
CREATE FUNCTION public.mx_state(d regclass, o regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
    x text;
BEGIN
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''-'') FROM %s t', d) INTO r;
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''-'') FROM %s t', o) INTO x;
    RETURN r || ' ' || x
        || ' ' || (SELECT coalesce(md5(string_agg(c::text, ',' ORDER BY c::text)), '-') FROM scd2.change_log c)
        || ' ' || (SELECT coalesce(md5(string_agg(a::text, ',' ORDER BY a.run_id)), '-') FROM scd2.audit_log a
                    WHERE a.status <> 'error')
        || ' ' || (SELECT coalesce(md5(string_agg(m::text, ',' ORDER BY m::text)), '-') FROM scd2.arrival_memory m);
END $$;
CREATE FUNCTION public.mx_errors() RETURNS bigint LANGUAGE sql AS
    $$ SELECT count(*) FROM scd2.audit_log WHERE status = 'error' $$;
CREATE FUNCTION public.mx_staging_verdict(failed boolean, msg text, before text, after text,
                                          errors_before bigint, probes_before bigint,
                                          expected text, must_fire boolean)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_bad text;
    v_fired bigint;
BEGIN
    IF expected = 'ok' AND failed THEN
        RETURN 'refused: ' || msg;
    ELSIF expected <> 'ok' AND NOT failed THEN
        RETURN 'not refused (expected ' || expected || ')';
    ELSIF expected = 'refused_trust' AND msg NOT LIKE '%would run code of role%'
          AND msg NOT LIKE 'staging view % belongs to role %' THEN
        RETURN 'refused for another reason: ' || msg;
    END IF;
    IF failed AND (after <> before OR public.mx_errors() - errors_before NOT IN (0, 1)) THEN
        RETURN 'a refused call wrote something';
    END IF;
    IF failed AND (SELECT last_value FROM m.probes) <> probes_before THEN
        RETURN 'a refused call ran staging code before refusing';
    END IF;
    -- a trusted owner's code runs as the dimension's owner, restricted; an
    -- untrusted owner's code never runs, nor any operator or default
    SELECT string_agg(DISTINCT what || ' as ' || ran_as || CASE WHEN restricted THEN '' ELSE ' unrestricted' END, ', ')
      INTO v_bad FROM m.probe_log
     WHERE NOT (ran_as = 'regress_mx_owner' AND restricted)
        OR what LIKE 'untrusted %' OR what LIKE '% operator' OR what LIKE '% default';
    IF v_bad IS NOT NULL THEN
        RETURN 'staging code ran wrongly: ' || v_bad;
    END IF;
    SELECT count(*) INTO v_fired FROM m.probe_log;
    IF NOT failed AND must_fire AND v_fired = 0 THEN
        RETURN 'the staging owner''s code did not run';
    END IF;
    RETURN 'ok';
END $$;
SQL
    i=0
    for srole in regress_mx_owner "$superuser" regress_mx_grantee regress_mx_etl; do
        for form in $STAGING_FORMS; do
            for code in $STAGING_CODES; do
                [ "$form" = table ] && [ "$code" = view_function ] && continue
                i=$((i + 1))
                trusted_role "$srole" && tag=trusted || tag=untrusted
                ctype=text extra= pre=
                case $code in
                    cast)
                        ctype=s.e_$i
                        pre="CREATE TYPE s.e_$i AS ENUM ($(seq -f "'c%g'" 0 999 | paste -sd,));
CREATE FUNCTION s.e_text_$i(s.e_$i) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN PERFORM m.probe('$tag cast'); RETURN pg_catalog.textin(pg_catalog.enum_out(\$1)); END \$\$;
CREATE CAST (s.e_$i AS text) WITH FUNCTION s.e_text_$i(s.e_$i) AS ASSIGNMENT;" ;;
                    domain)
                        ctype=s.dom_$i
                        pre="CREATE DOMAIN s.dom_$i AS text CHECK (m.probe('$tag domain check'));" ;;
                    collation)
                        ctype="text COLLATE s.coll_$i"
                        pre="CREATE COLLATION s.coll_$i (locale = 'C');" ;;
                    operator)
                        pre="CREATE FUNCTION s.eq_$i(text, text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS \$\$
BEGIN PERFORM m.probe('$tag operator'); RETURN \$1 OPERATOR(pg_catalog.=) \$2; END \$\$;
CREATE OPERATOR o_$i.= (LEFTARG = text, RIGHTARG = text, FUNCTION = s.eq_$i);" ;;
                    default)
                        extra=", note text DEFAULT m.probe('$tag default')::text" ;;
                esac
                rel=s.t_$i
                [ "$form" = table ] || rel=s.v_$i
                # (an operator = of its own, in a schema of its own)
                [ "$code" = operator ] && echo "CREATE SCHEMA o_$i AUTHORIZATION \"$srole\";"
                [ "$srole" = "$superuser" ] || echo "SET ROLE $srole;"
                printf '%s\n' "$pre"
                echo "CREATE TABLE s.t_$i (k int, city $ctype, eff timestamptz$extra);"
                case $form in
                    view) echo "CREATE VIEW s.v_$i AS SELECT k, city, eff FROM s.t_$i WHERE m.probe('$tag view function');" ;;
                    invoker_view) echo "CREATE VIEW s.v_$i WITH (security_invoker) AS SELECT k, city, eff FROM s.t_$i WHERE m.probe('$tag view function');" ;;
                esac
                echo "GRANT SELECT ON $rel TO PUBLIC;"
                [ "$form" = table ] || echo "GRANT SELECT ON s.t_$i TO PUBLIC;"
                echo "INSERT INTO s.t_$i (k, city, eff) VALUES (1, 'c0', statement_timestamp());"
                echo "RESET ROLE;"
                echo "SET ROLE regress_mx_owner;"
                echo "CREATE TABLE m.d_$i (k int, city text, valid_from timestamptz, valid_to timestamptz);"
                echo "CREATE TABLE m.o_$i (k int, city text, valid_from timestamptz, valid_to timestamptz);"
                echo "SELECT scd2.register('m.d_$i', ARRAY['k']);"
                echo "SELECT scd2.register('m.o_$i', ARRAY['k'], effective_column => 'eff', order_free => true);"
                echo "GRANT SELECT, INSERT, UPDATE, DELETE ON m.d_$i, m.o_$i TO regress_mx_grantee;"
                echo "RESET ROLE;"
                echo "-- setup|$srole|$form|$code|$i"
            done
        done
    done
    echo "DELETE FROM m.probe_log;"
} >"$out/setup_staging.sql"
if ! psql_su -d "$sdb" -f "$out/setup_staging.sql" >"$out/setup_staging" 2>&1; then
    echo "not ok - setup of the staging axes"; grep -B2 -A3 -E "ERROR|FATAL" "$out/setup_staging" | head -20 | sed 's/^/#   /'
    echo "security_matrix: 0 passed, 1 failed"; exit 1
fi
# the setup index of (staging role, form, code)
declare -A setup_of
while IFS='|' read -r _ srole form code i; do
    setup_of[$srole/$form/$code]=$i
done < <(grep '^-- setup|' "$out/setup_staging.sql")

: >"$sscript"
n=0
for so in $STAGING_OWNERS; do
    for form in $STAGING_FORMS; do
        for code in $STAGING_CODES; do
            [ "$form" = table ] && [ "$code" = view_function ] && continue
            for caller in $STAGING_CALLERS; do
                srole=$(role_of "$so" "$caller")
                i=${setup_of[$srole/$form/$code]}
                case $caller in owner) crole=regress_mx_owner ;; superuser) crole= ;; grantee) crole=regress_mx_grantee ;; esac
                # refused: an untrusted owner's view, type or collation
                exp=ok
                if ! trusted_role "$srole"; then
                    case $form/$code in
                        table/operator|table/default) ;;
                        *) exp=refused_trust ;;
                    esac
                fi
                # what must run, as the dimension's owner: the trusted
                # owner's cast and view function
                fire=false
                if [ "$exp" = ok ] && trusted_role "$srole"; then
                    case $form/$code in table/cast|*view*/*) fire=true ;; esac
                fi
                rel=s.t_$i; [ "$form" = table ] || rel=s.v_$i
                for e in "${STAGING_ENTRIES[@]}"; do
                    IFS='|' read -r entry stmt <<<"$e"
                    n=$((n + 1)); cells=$((cells + 1))
                    stmt_k=${stmt//@S/$rel}; stmt_k=${stmt_k//@D/m.d_$i}; stmt_k=${stmt_k//@O/m.o_$i}
                    {
                        echo "-- cell $entry x staging $form of the $so with $code x $caller"
                        [ "$srole" = "$superuser" ] || echo "SET ROLE $srole;"
                        echo "DELETE FROM s.t_$i;"
                        echo "INSERT INTO s.t_$i (k, city, eff) VALUES (1, 'c$((n % 1000))', statement_timestamp()), ($((n + 10)), 'c$((n % 1000))', statement_timestamp());"
                        echo "RESET ROLE;"
                        echo "DELETE FROM m.probe_log;"
                        echo "SELECT public.mx_state('m.d_$i', 'm.o_$i') AS before, public.mx_errors() AS errors_before, (SELECT last_value FROM m.probes) AS probes_before \\gset"
                        [ -n "$crole" ] && echo "SET ROLE $crole;"
                        printf '%s\n' "$stmt_k"
                        echo "\\set failed :ERROR"
                        echo "\\set msg :LAST_ERROR_MESSAGE"
                        printf '%s\n' '\if :failed' '\else' "\\set msg ''" '\endif'
                        echo "RESET ROLE;"
                        echo "SELECT 'cell|$entry x staging $form of the $so with $code x $caller|' || public.mx_staging_verdict(:'failed', :'msg', :'before', public.mx_state('m.d_$i', 'm.o_$i'), :errors_before, :probes_before, '$exp', $fire);"
                    } >>"$sscript"
                done
            done
        done
    done
done
scells=$n
psql -X -q -At -v ON_ERROR_STOP=0 -v VERBOSITY=terse -d "$sdb" -f "$sscript" >"$out/result_staging" 2>"$out/stderr_staging"
psql_su -d postgres -c "DROP DATABASE $sdb" >/dev/null

passed=0 failed=0
if [ "$lint_ok" = 1 ]; then passed=1; echo "ok 1 - every SPI statement goes through src/common/exec.c"; else failed=1; fi
while IFS='|' read -r tag name verdict; do
    [ "$tag" = cell ] || continue
    if [ "$verdict" = ok ]; then
        passed=$((passed + 1)); echo "ok $((passed + failed)) - $name"
    else
        failed=$((failed + 1)); echo "not ok $((passed + failed)) - $name: $verdict"
    fi
done < <(cat "$out"/result_*)
missing=$((cells + 1 - passed - failed))
if [ "$missing" != 0 ]; then
    echo "not ok - $missing cells printed no verdict"; failed=$((failed + missing))
    cat "$out"/stderr_* | head -40 | sed 's/^/#   /'
fi
psql_su -d postgres -c "DROP ROLE regress_mx_owner; DROP ROLE regress_mx_grantee; DROP ROLE regress_mx_limited; DROP ROLE regress_mx_etl;" >/dev/null
echo "# ${#ENTRY_POINTS[@]} entry points x ${#KINDS[@]} kinds of owner code x ${#CALLERS[@]} callers = $((cells - scells)) cells;" \
     "staging axes: ${#STAGING_ENTRIES[@]} entry points x 3 staging owners x 17 relation forms and codes x 3 callers = $scells cells;" \
     "$cells cells ($((SECONDS - started))s)"
echo "security_matrix: $passed passed, $failed failed"
[ "$failed" = 0 ]
