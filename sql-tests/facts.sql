-- Fact tables (issue 49, first part): scd2.register_fact, the temporal
-- foreign-key check scd2.check_facts, and scd2.rekey_facts re-pointing the
-- facts whose versions runs moved (a late change splitting history, a
-- revert), found from the change log through the fact's index.  These
-- fact tables are registered with maintain => false: facts_maintain.sql
-- has the maintained ones.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA facts;
SET search_path = facts, public;

CREATE TABLE fdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
CREATE TABLE fstg (id int, v text, eff timestamptz);
SELECT scd2.register('fdim', ARRAY['id'], effective_column => 'eff');
INSERT INTO fstg VALUES (1, 'a', '2024-01-01'), (2, 'x', '2024-01-01');
CALL scd2.apply('fstg', 'fdim') \gset
TRUNCATE fstg;
INSERT INTO fstg VALUES (1, 'b', '2024-03-01');
CALL scd2.apply('fstg', 'fdim') \gset

-- The facts, keyed with scd2.asof at their time.
CREATE TABLE sales (n int PRIMARY KEY, cust_id int, cust_sk bigint, sold_at timestamptz, amount numeric);
INSERT INTO sales (n, cust_id, sold_at, amount)
SELECT g, 1 + g % 2, timestamptz '2024-01-05' + g * interval '1 day', g FROM generate_series(1, 90) g;
UPDATE sales SET cust_sk = scd2.asof('fdim', sold_at, cust_id);
SELECT count(*) AS facts, count(cust_sk) AS keyed FROM sales;

-- register_fact refuses, writing nothing (no registration, no index).
CREATE TABLE nosk (id int NOT NULL, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('nosk', ARRAY['id']);
CREATE TABLE wrong (n int, sk int, t text, ts timestamptz);
CREATE FUNCTION facts.refused_state() RETURNS text LANGUAGE sql AS $$
    SELECT scd2_test.checksum('scd2.fact_tables') || ' indexes '
           || (SELECT count(*) FROM pg_index i WHERE i.indrelid IN ('facts.sales'::regclass, 'facts.wrong'::regclass))
$$;
CREATE TABLE facts.before AS SELECT facts.refused_state() AS s;
SELECT scd2.register_fact('sales', 'fstg', 'cust_sk', 'sold_at');     -- not a dimension
SELECT scd2.register_fact('sales', 'nosk', 'cust_sk', 'sold_at');     -- no surrogate key
SELECT scd2.register_fact('sales', 'fdim', 'nope', 'sold_at');        -- no such column
SELECT scd2.register_fact('wrong', 'fdim', 'sk', 'ts');               -- int, not bigint
SELECT scd2.register_fact('sales', 'fdim', 'cust_sk', 'amount');      -- not a time
SELECT scd2.register_fact('sales', 'fdim', 'cust_sk', 'nope');
SELECT scd2.register_fact('fdim', 'fdim', 'sk', 'valid_from');        -- itself
SELECT scd2.register_fact(NULL, 'fdim', 'cust_sk', 'sold_at');
SELECT scd2.register_fact('sales', 'fdim', 'cust_sk', NULL);
CREATE ROLE facts_stranger;
GRANT USAGE ON SCHEMA facts TO facts_stranger;
SET ROLE facts_stranger;
SELECT scd2.register_fact('facts.sales', 'facts.fdim', 'cust_sk', 'sold_at');   -- not the owner
SELECT scd2._fact_store('facts.sales', 'facts.fdim', 'cust_sk', 'sold_at', true, NULL);
RESET ROLE;
SELECT facts.refused_state() = s AS nothing_written FROM facts.before;
-- Not registered yet:
SELECT * FROM scd2.check_facts('sales');
SELECT scd2.rekey_facts('sales');

-- Registered: an index on the surrogate key column is made.
SELECT scd2.register_fact('sales', 'fdim', 'cust_sk', 'sold_at', maintain => false);
SELECT fact, dimension, surrogate_key_column, time_column, created_index,
       last_run_id = (SELECT max(run_id) FROM scd2.change_log_runs WHERE dimension = 'facts.fdim'::regclass) AS last_run_is_newest
  FROM scd2.fact_tables;
SELECT pg_get_indexdef(indexrelid) FROM pg_index WHERE indrelid = 'sales'::regclass ORDER BY 1;
-- registered again: the index is there, none is made
SELECT scd2.register_fact('sales', 'fdim', 'cust_sk', 'sold_at', maintain => false);
SELECT count(*) AS indexes FROM pg_index WHERE indrelid = 'sales'::regclass;
SELECT * FROM scd2.check_facts('sales');
-- a role with no privilege on the tables: refused, nothing written
CREATE TABLE facts.before1 AS SELECT scd2_test.checksum('facts.sales') || scd2_test.checksum('scd2.fact_tables') AS s;
SET ROLE facts_stranger;
SELECT * FROM scd2.check_facts('facts.sales');
SELECT scd2.rekey_facts('facts.sales', full => true);
RESET ROLE;
GRANT SELECT, UPDATE ON facts.sales TO facts_stranger;
SET ROLE facts_stranger;
SELECT * FROM scd2.check_facts('facts.sales');
SELECT scd2.rekey_facts('facts.sales', full => true);
RESET ROLE;
REVOKE ALL ON facts.sales FROM facts_stranger;
SELECT scd2_test.checksum('facts.sales') || scd2_test.checksum('scd2.fact_tables') = s AS nothing_written FROM facts.before1;

-- A fact keyed to a version no longer valid then is found.
CREATE TABLE facts.v AS SELECT sk, v FROM fdim;
UPDATE sales SET cust_sk = (SELECT sk FROM fdim WHERE id = 1 AND v = 'b') WHERE n = 2;
SELECT s.surrogate_key = b.sk AS keyed_to_b, s.at, s.expected = a.sk AS expected_a, s.facts
  FROM scd2.check_facts('sales') s, fdim a, fdim b WHERE a.id = 1 AND a.v = 'a' AND b.id = 1 AND b.v = 'b';
-- rekey_facts reads the change log only: that fact was not moved by a run.
SELECT scd2.rekey_facts('sales');
SELECT scd2.rekey_facts('sales', full => true);
SELECT * FROM scd2.check_facts('sales');

-- A late change splits customer 1's first version: from 2024-02-01 'late'.
TRUNCATE fstg;
INSERT INTO fstg VALUES (1, 'late', '2024-02-01');
CALL scd2.apply('fstg', 'fdim') \gset
SELECT id, v, valid_from, valid_to FROM fdim ORDER BY id, valid_from;
-- the facts of customer 1 from 2024-02-01 to 2024-03-01 point at 'a'
SELECT (SELECT v FROM fdim WHERE sk = c.surrogate_key) AS keyed, (SELECT v FROM fdim WHERE sk = c.expected) AS expected,
       count(*) AS times, sum(c.facts) AS facts
  FROM scd2.check_facts('sales') c GROUP BY 1, 2;
SELECT count(*) AS wrong FROM sales f JOIN fdim d ON d.id = f.cust_id AND d.valid_from <= f.sold_at
   AND (d.valid_to IS NULL OR d.valid_to > f.sold_at) WHERE d.sk <> f.cust_sk;
SELECT scd2.rekey_facts('sales');
SELECT * FROM scd2.check_facts('sales');
SELECT count(*) FILTER (WHERE cust_sk = scd2.asof('fdim', sold_at, cust_id)) AS right, count(*) FROM sales;
SELECT scd2.rekey_facts('sales');    -- nothing since

-- The late load reverted: 'late' is gone, 'a' valid again to 2024-03-01;
-- the facts keyed to 'late' go back to 'a'.
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'facts.fdim' AND status = 'success')) > 0 AS reverted;
SELECT (SELECT v FROM fdim WHERE sk = c.surrogate_key) AS keyed, (SELECT v FROM fdim WHERE sk = c.expected) AS expected,
       c.surrogate_key IS NOT NULL AS has_key, sum(c.facts) AS facts
  FROM scd2.check_facts('sales') c GROUP BY 1, 2, 3;
SELECT scd2.rekey_facts('sales');
SELECT * FROM scd2.check_facts('sales');
SELECT count(*) FILTER (WHERE cust_sk = scd2.asof('fdim', sold_at, cust_id)) AS right, count(*) FROM sales;

-- An in-order change (a batch logged by surrogate keys, no change-log
-- row) closes customer 2's 'x' at 2024-03-15: the facts keyed to 'x'
-- before the change arrived and dated after it move to 'y'.
TRUNCATE fstg;
INSERT INTO fstg VALUES (2, 'y', '2024-03-15');
CALL scd2.apply('fstg', 'fdim') \gset
SELECT count(*) AS batches FROM scd2.change_log_batches b JOIN scd2.change_log_runs r USING (run_id)
 WHERE r.dimension = 'fdim'::regclass;
SELECT sum(facts) AS wrong FROM scd2.check_facts('sales');
SELECT scd2.rekey_facts('sales');
SELECT * FROM scd2.check_facts('sales');
SELECT count(*) AS keyed_to_y FROM sales WHERE cust_sk = (SELECT sk FROM fdim WHERE v = 'y');
-- Its revert deletes 'y' (its key now only in the change log): those
-- facts go back to 'x'.
SELECT scd2.revert((SELECT max(run_id) FROM scd2.audit_log WHERE dimension = 'facts.fdim' AND status = 'success')) > 0 AS reverted;
SELECT sum(facts) AS wrong, count(*) FILTER (WHERE expected IS NULL) AS no_version_named FROM scd2.check_facts('sales');
SELECT scd2.rekey_facts('sales');
SELECT * FROM scd2.check_facts('sales');

-- A pruned run cannot say which versions it moved: refused, nothing
-- written; full => true re-keys every fact.
TRUNCATE fstg;
INSERT INTO fstg VALUES (2, 'early', '2024-02-01');
CALL scd2.apply('fstg', 'fdim') \gset
SELECT pg_sleep(0.01);
SELECT scd2.prune_change_log('0 seconds', 'fdim') > 0 AS pruned;
CREATE TABLE facts.before2 AS SELECT scd2_test.checksum('sales') || scd2_test.checksum('scd2.fact_tables') AS s;
-- (the error's run id as N: run ids depend on the tests before)
DO $$
DECLARE
    d text; h text;
BEGIN
    PERFORM scd2.rekey_facts('facts.sales');
EXCEPTION WHEN object_not_in_prerequisite_state THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RAISE WARNING E'%\nDETAIL: %\nHINT: %', SQLERRM,
        regexp_replace(d, 'Run [0-9]+ ', 'Run N '), h;
END $$;
SELECT scd2_test.checksum('sales') || scd2_test.checksum('scd2.fact_tables') = s AS nothing_written FROM facts.before2;
SELECT sum(facts) AS wrong FROM scd2.check_facts('sales');
SELECT scd2.rekey_facts('sales', full => true);
SELECT * FROM scd2.check_facts('sales');
SELECT scd2.rekey_facts('sales');

-- A two-column business key (one column named k1, as the re-keying's own
-- work columns are), date validity, an integer surrogate key, a date time
-- column.
CREATE TABLE rdim (rsk int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, region text NOT NULL, k1 int NOT NULL,
                   label text, valid_from date NOT NULL, valid_to date);
CREATE TABLE rstg (region text, k1 int, label text, eff date);
SELECT scd2.register('rdim', ARRAY['region', 'k1'], effective_column => 'eff');
INSERT INTO rstg VALUES ('north', 1, 'n1', '2024-01-01'), ('south', 1, 's1', '2024-01-01'), ('north', 2, 'n2', '2024-01-01');
CALL scd2.apply('rstg', 'rdim') \gset
CREATE TABLE rfact (region text, k1 int, rsk int, day date);
INSERT INTO rfact SELECT r, k, NULL, date '2024-01-01' + d
  FROM (VALUES ('north', 1), ('south', 1), ('north', 2)) AS x(r, k), generate_series(0, 59, 3) d;
UPDATE rfact SET rsk = scd2.asof('rdim', day, region, k1);
SELECT scd2.register_fact('rfact', 'rdim', 'rsk', 'day', maintain => false);
-- late: north 1 changes on 2024-01-20, south 1 on 2024-02-10
TRUNCATE rstg;
INSERT INTO rstg VALUES ('north', 1, 'n1b', '2024-01-20'), ('south', 1, 's1b', '2024-02-10');
CALL scd2.apply('rstg', 'rdim') \gset
SELECT (SELECT label FROM rdim WHERE rsk = c.surrogate_key) AS keyed, (SELECT label FROM rdim WHERE rsk = c.expected) AS expected,
       sum(c.facts) AS facts
  FROM scd2.check_facts('rfact') c GROUP BY 1, 2 ORDER BY 1;
SELECT scd2.rekey_facts('rfact');
SELECT * FROM scd2.check_facts('rfact');
SELECT count(*) FILTER (WHERE rsk = scd2.asof('rdim', day, region, k1)) AS right, count(*) FROM rfact;

-- An order-free dimension: an earlier event identical to a later version
-- extends that version back, shortening the one before; the facts in
-- between move to the extended version.
CREATE TABLE odim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, v text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE ostg (id int, v text, eff timestamptz);
SELECT scd2.register('odim', ARRAY['id'], effective_column => 'eff', order_free => true);
INSERT INTO ostg VALUES (1, 'a', '2024-01-01');
CALL scd2.apply('ostg', 'odim') \gset
TRUNCATE ostg;
INSERT INTO ostg VALUES (1, 'b', '2024-03-01');
CALL scd2.apply('ostg', 'odim') \gset
CREATE TABLE ofact (sk bigint, t timestamptz);
INSERT INTO ofact SELECT NULL, timestamptz '2024-01-05' + d * interval '7 days' FROM generate_series(0, 11) d;
UPDATE ofact SET sk = scd2.asof('odim', t, 1);
SELECT scd2.register_fact('ofact', 'odim', 'sk', 't', maintain => false);
TRUNCATE ostg;
INSERT INTO ostg VALUES (1, 'b', '2024-02-01');
CALL scd2.apply('ostg', 'odim') \gset
SELECT v, valid_from, valid_to FROM odim ORDER BY valid_from;
SELECT (SELECT v FROM odim WHERE sk = c.surrogate_key) AS keyed, (SELECT v FROM odim WHERE sk = c.expected) AS expected,
       sum(c.facts) AS facts
  FROM scd2.check_facts('ofact') c GROUP BY 1, 2;
SELECT scd2.rekey_facts('ofact');
SELECT * FROM scd2.check_facts('ofact');
-- rewound to before that load: the facts go back
SELECT scd2.rewind('odim', (SELECT run_id FROM scd2.audit_log WHERE dimension = 'facts.odim' AND status = 'success'
                             ORDER BY run_id DESC OFFSET 1 LIMIT 1)) > 0 AS rewound;
SELECT sum(facts) AS wrong FROM scd2.check_facts('ofact');
SELECT scd2.rekey_facts('ofact');
SELECT * FROM scd2.check_facts('ofact');
SELECT count(*) FILTER (WHERE sk = scd2.asof('odim', t, 1)) AS right, count(*) FROM ofact;

-- A dropped fact table is forgotten; so is one whose dimension is dropped.
CREATE TABLE sales2 (LIKE sales);
SELECT scd2.register_fact('sales2', 'fdim', 'cust_sk', 'sold_at');
SELECT count(*) FROM scd2.fact_tables;
DROP TABLE sales;
SELECT fact FROM scd2.fact_tables ORDER BY 1;
DROP TABLE fdim;
SELECT fact FROM scd2.fact_tables ORDER BY 1;

RESET ROLE;
DROP SCHEMA facts CASCADE;
DROP ROLE facts_stranger;
