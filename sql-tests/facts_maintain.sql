-- Maintained fact tables (issue 49, register_fact's maintain, the
-- default): every run that moves a dimension's history -- a load in any
-- form, scd2.revert, scd2.rewind -- re-keys the dimension's maintained
-- fact tables in its own transaction, after its write, from its change
-- log (metric facts_rekeyed), and advances their last run; a dry run
-- re-keys nothing.  The caller needs SELECT and UPDATE on every maintained
-- fact table, checked before anything is written; a load with
-- scd2.change_log = off is refused; the UPDATE runs as the fact table's
-- owner, restricted.
SET client_min_messages = notice;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA fm;
SET search_path = fm, public;
CREATE ROLE fm_loader;
CREATE ROLE fm_fact_owner;
GRANT USAGE ON SCHEMA fm TO fm_loader, fm_fact_owner;
GRANT CREATE ON SCHEMA fm TO fm_fact_owner;

CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                  valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE stg (id int, v text, eff timestamptz);
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'eff');
INSERT INTO stg VALUES (1, 'a', '2024-01-01'), (2, 'x', '2024-01-01');
CALL scd2.apply('stg', 'dim');
GRANT SELECT, INSERT, UPDATE, DELETE ON dim TO fm_loader;
GRANT SELECT ON dim TO fm_fact_owner;
GRANT SELECT ON stg TO fm_loader;

-- The fact table has its own owner; a trigger records who re-keys it.
SET ROLE fm_fact_owner;
CREATE TABLE fm.sales (n int PRIMARY KEY, cust_id int, cust_sk bigint, sold_at timestamptz);
CREATE TABLE fm.who (ran_as name, restricted boolean);
CREATE FUNCTION fm.who_trg() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO fm.who VALUES (current_user, v_restricted);
    RETURN NULL;
END $$;
CREATE TRIGGER who AFTER UPDATE ON fm.sales FOR EACH STATEMENT EXECUTE FUNCTION fm.who_trg();
INSERT INTO fm.sales SELECT g, 1 + g % 2, NULL, timestamptz '2024-01-05' + g * interval '3 days'
  FROM generate_series(1, 60) g;
UPDATE fm.sales SET cust_sk = scd2.asof('fm.dim', sold_at, cust_id);
DELETE FROM fm.who;
SELECT scd2.register_fact('fm.sales', 'fm.dim', 'cust_sk', 'sold_at');
GRANT SELECT, UPDATE ON fm.sales TO fm_loader;
RESET ROLE;
SELECT fact, maintain, last_run_id = (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'fm.dim'::regclass) AS last_run_is_newest
  FROM scd2.fact_tables;

-- What each run is checked against: the facts' keying by the rule, and
-- everything a refused run must leave alone.
CREATE FUNCTION fm.right(fact regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    EXECUTE format('SELECT count(*) FILTER (WHERE cust_sk IS NOT DISTINCT FROM scd2.asof(''fm.dim'', sold_at, cust_id)) || '' of '' || count(*) FROM %s', fact) INTO r;
    RETURN r;
END $$;
CREATE FUNCTION fm.state() RETURNS text LANGUAGE sql AS $$
    SELECT scd2_test.checksum('fm.dim') || ' facts ' || scd2_test.checksum('fm.sales')
           || ' registry ' || scd2_test.checksum('scd2.fact_tables')
           || ' audit ' || (SELECT count(*) || ':' || md5(coalesce(string_agg(a::text, ',' ORDER BY a.run_id), ''))
                              FROM scd2.audit_log a WHERE a.status <> 'error')
           || ' runs ' || scd2_test.checksum('scd2.change_log_runs') || ' log ' || scd2_test.checksum('scd2.change_log')
           || ' batches ' || scd2_test.checksum('scd2.change_log_batches')
$$;
CREATE TABLE fm.keying AS SELECT n, cust_sk FROM fm.sales;

-- 1. A late change splits customer 1's first version at 2024-02-01: the
--    load re-keys the facts from then to the next version (as the fact
--    table's owner, restricted), counts them, advances the last run.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'late', '2024-02-01');
CALL scd2.apply('stg', 'dim');
SELECT fm.right('fm.sales'), (SELECT count(*) FROM scd2.check_facts('fm.sales')) AS wrong;
SELECT status, facts_rekeyed FROM scd2.audit_log WHERE run_id = (SELECT max(run_id) FROM scd2.audit_log);
SELECT last_run_id = (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'fm.dim'::regclass) AS last_run_is_newest
  FROM scd2.fact_tables WHERE fact = 'fm.sales'::regclass;
SELECT DISTINCT ran_as, restricted FROM fm.who;
SELECT scd2.rekey_facts('fm.sales') AS again;     -- nothing left to do
SELECT count(*) AS moved FROM fm.sales s JOIN fm.keying k USING (n) WHERE s.cust_sk <> k.cust_sk;
CREATE TABLE fm.keying1 AS SELECT n, cust_sk FROM fm.sales;

-- 2. Its revert puts the facts back exactly, counted in the revert's row.
SET client_min_messages = warning;   -- (its NOTICE names run ids)
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success')) > 0 AS reverted;
RESET client_min_messages;
SELECT status, facts_rekeyed FROM scd2.audit_log WHERE run_id = (SELECT max(run_id) FROM scd2.audit_log);
SELECT fm.right('fm.sales'), (SELECT count(*) FROM fm.sales s JOIN fm.keying k USING (n)
                               WHERE s.cust_sk IS DISTINCT FROM k.cust_sk) AS not_as_before;

-- 3. An in-order change (a batch logged by surrogate keys) closes customer
--    2's 'x' at 2024-03-15, a fact scd2.merge (the function form) loads:
--    the facts after it move to 'y'.
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'y', '2024-03-15');
SELECT count(*) AS feed FROM scd2.merge('stg', 'dim');
SELECT count(*) AS batches FROM scd2.change_log_batches WHERE run_id = (SELECT max(run_id) FROM scd2.audit_log);
SELECT fm.right('fm.sales'), (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1);

-- 4. A dry run re-keys nothing.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'dry', '2024-01-20');
CREATE TABLE fm.before AS SELECT scd2_test.checksum('fm.sales') AS s;
SELECT count(*) AS feed FROM scd2.merge('stg', 'dim', dry_run => true);
SELECT scd2_test.checksum('fm.sales') = s AS facts_untouched FROM fm.before;
DROP TABLE fm.before;

-- 5. The procedure's other form (the run id), from PL/pgSQL; the loader
--    is not the fact table's owner: the trigger still runs as the owner.
DELETE FROM fm.who;
SET ROLE fm_loader;
DO $$
DECLARE
    v_run bigint;
BEGIN
    CALL scd2.apply('fm.stg', 'fm.dim', now(), v_run);
    RAISE NOTICE 'facts re-keyed by run: %', (SELECT facts_rekeyed FROM scd2.audit_log WHERE run_id = v_run);
END $$;
RESET ROLE;
SELECT fm.right('fm.sales'), (SELECT count(*) FROM scd2.check_facts('fm.sales')) AS wrong;
SELECT DISTINCT ran_as, restricted FROM fm.who;

-- 6. scd2.rewind to before the last two loads: the facts follow.
SET client_min_messages = warning;
SELECT scd2.rewind('dim', (SELECT run_id FROM scd2.audit_log WHERE status = 'success'
                            ORDER BY run_id DESC OFFSET 2 LIMIT 1)) AS rewound;
RESET client_min_messages;
SELECT status, facts_rekeyed FROM scd2.audit_log WHERE run_id = (SELECT max(run_id) FROM scd2.audit_log);
SELECT fm.right('fm.sales'), (SELECT count(*) FROM fm.sales s JOIN fm.keying k USING (n)
                               WHERE s.cust_sk IS DISTINCT FROM k.cust_sk) AS not_as_before;

-- 7. The load of scd2.apply, once more (scd2.apply_all runs the same load
--    for every registered dimension: the security matrix's apply_all cells
--    re-key a maintained fact table), and scd2.apply_snapshots.
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'late', '2024-02-01');
CALL scd2.apply('stg', 'dim');
SELECT fm.right('fm.sales'), (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1);
-- (snapshots are loaded at their extract's time, after the last load: two
-- facts dated ten days from now, keyed to the current versions, move)
INSERT INTO fm.sales SELECT 100 + id, id, scd2.asof('fm.dim', now() + interval '10 days', id), now() + interval '10 days'
  FROM (VALUES (1), (2)) v(id);
CREATE TABLE snaps (id int, v text, snap timestamptz);
INSERT INTO snaps VALUES (1, 'late', now() + interval '1 day'), (2, 'x2', now() + interval '1 day'),
                         (1, 'late2', now() + interval '2 days'), (2, 'x2', now() + interval '2 days');
SELECT scd2.register('dim', ARRAY['id'], mode => 'snapshot');
CALL scd2.apply_snapshots('snaps', 'dim', 'snap');
SELECT fm.right('fm.sales'), (SELECT count(*) FROM scd2.check_facts('fm.sales')) AS wrong;
SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 2;
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'eff');

-- 8. Refused before anything is written, naming the fact table: a caller
--    without UPDATE on it (a load, a revert, a rewind) ...
\set VERBOSITY default
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'z', '2024-02-20');
CREATE TABLE fm.before AS SELECT fm.state() AS s;
REVOKE UPDATE ON fm.sales FROM fm_loader;
SET ROLE fm_loader;
SELECT count(*) FROM scd2.merge('fm.stg', 'fm.dim');
CALL scd2.apply('fm.stg', 'fm.dim');
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success'));
SELECT scd2.rewind('fm.dim', 1);
RESET ROLE;
SELECT fm.state() = s AS nothing_written FROM fm.before;
SELECT status, message FROM scd2.audit_log WHERE run_id = (SELECT max(run_id) FROM scd2.audit_log);
GRANT UPDATE ON fm.sales TO fm_loader;
-- ... the fact table's owner without SELECT on the dimension ...
REVOKE SELECT ON fm.dim FROM fm_fact_owner;
SELECT count(*) FROM scd2.merge('stg', 'dim');
GRANT SELECT ON fm.dim TO fm_fact_owner;
-- ... row-level security of the fact table applying to the caller ...
SET ROLE fm_fact_owner;
ALTER TABLE fm.sales ENABLE ROW LEVEL SECURITY;
CREATE POLICY odd ON fm.sales TO fm_loader USING (n % 2 = 1);
RESET ROLE;
SET ROLE fm_loader;
SELECT count(*) FROM scd2.merge('fm.stg', 'fm.dim');
RESET ROLE;
SET ROLE fm_fact_owner;
ALTER TABLE fm.sales DISABLE ROW LEVEL SECURITY;
DROP POLICY odd ON fm.sales;
RESET ROLE;
-- ... and a load with scd2.change_log = off (which versions it moved
-- would not be known).
SET scd2.change_log = off;
SELECT count(*) FROM scd2.merge('stg', 'dim');
RESET scd2.change_log;
SELECT fm.state() = s AS nothing_written FROM fm.before;
DROP TABLE fm.before;
\set VERBOSITY terse

-- 9. Several fact tables: a maintained one is re-keyed, one registered
--    with maintain => false is left to scd2.rekey_facts.
CREATE TABLE fm.returns (n int, cust_id int, cust_sk bigint, sold_at timestamptz);
INSERT INTO fm.returns SELECT n, cust_id, cust_sk, sold_at FROM fm.sales;
SELECT scd2.register_fact('fm.returns', 'fm.dim', 'cust_sk', 'sold_at', maintain => false);
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT fm.right('fm.sales') AS sales, fm.right('fm.returns') AS returns,
       (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1);
SELECT scd2.rekey_facts('fm.returns') AS rekeyed, fm.right('fm.returns') AS returns;
-- registered again as maintained: the next run re-keys it too
SELECT scd2.register_fact('fm.returns', 'fm.dim', 'cust_sk', 'sold_at');
SET client_min_messages = warning;   -- (its NOTICE names run ids)
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success')) > 0 AS reverted;
RESET client_min_messages;
SELECT fm.right('fm.sales') AS sales, fm.right('fm.returns') AS returns,
       (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1);

-- 10. A dropped maintained fact table is forgotten; loads go on.
DROP TABLE fm.returns;
SELECT fact FROM scd2.fact_tables ORDER BY 1;
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'later', '2024-03-20');
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT fm.right('fm.sales'), (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1);

-- 11. An order-free dimension: an earlier event identical to the later
--     version extends it back; the facts in between move to it, and go
--     back when the load is reverted.
CREATE TABLE odim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE ostg (id int, v text, eff timestamptz);
SELECT scd2.register('odim', ARRAY['id'], effective_column => 'eff', order_free => true);
INSERT INTO ostg VALUES (1, 'a', '2024-01-01'), (1, 'b', '2024-03-01');
CALL scd2.apply('ostg', 'odim');
CREATE TABLE ofact (sk bigint, t timestamptz);
INSERT INTO ofact SELECT scd2.asof('odim', t, 1), t
  FROM generate_series(timestamptz '2024-01-05', '2024-04-01', interval '7 days') t;
SELECT scd2.register_fact('ofact', 'odim', 'sk', 't');
CREATE TABLE fm.okeying AS SELECT * FROM ofact;
TRUNCATE ostg;
INSERT INTO ostg VALUES (1, 'b', '2024-02-01');
CALL scd2.apply('ostg', 'odim');
SELECT (SELECT count(*) FROM scd2.check_facts('ofact')) AS wrong,
       (SELECT count(*) FROM ofact f JOIN odim d USING (sk) WHERE d.v = 'b') AS keyed_to_b;
SET client_min_messages = warning;   -- (its NOTICE names run ids)
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE status = 'success')) > 0 AS reverted;
RESET client_min_messages;
SELECT (SELECT count(*) FROM scd2.check_facts('ofact')) AS wrong,
       (SELECT count(*) FROM (SELECT * FROM ofact EXCEPT SELECT * FROM fm.okeying) x) AS not_as_before;

-- 12. A fact time of another type than the validity (timestamp against
--     timestamptz, read as scd2.asof reads it: in the session's TimeZone),
--     and a date one: re-keyed the same way.
CREATE TABLE tfact (sk bigint, t timestamp);
INSERT INTO tfact SELECT scd2.asof('dim', t, 2), t FROM generate_series(timestamp '2024-01-02', '2024-04-30', interval '5 days') t;
SELECT scd2.register_fact('tfact', 'dim', 'sk', 't');
CREATE TABLE dfact (sk bigint, d date);
INSERT INTO dfact SELECT scd2.asof('dim', d, 2), d FROM generate_series(timestamp '2024-01-02', '2024-04-30', interval '5 days') g, CAST(g AS date) d;
SELECT scd2.register_fact('dfact', 'dim', 'sk', 'd');
TRUNCATE stg;
INSERT INTO stg VALUES (2, 'late2', '2024-02-10');
SELECT count(*) FROM scd2.merge('stg', 'dim');
SELECT (SELECT facts_rekeyed FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1),
       (SELECT count(*) FROM scd2.check_facts('tfact')) AS wrong_t, (SELECT count(*) FROM scd2.check_facts('dfact')) AS wrong_d,
       (SELECT count(*) FROM tfact f JOIN dim d USING (sk) WHERE d.v = 'late2') AS t_late2,
       (SELECT count(*) FROM dfact f JOIN dim d USING (sk) WHERE d.v = 'late2') AS d_late2;

RESET ROLE;
DROP SCHEMA fm CASCADE;
DROP ROLE fm_loader;
DROP ROLE fm_fact_owner;
