-- Fact tables on Citus (issue 49): a distributed fact table keyed to a
-- reference dimension.  Maintaining it in a load's transaction is refused,
-- naming it; registered with maintain => false, scd2.check_facts finds the
-- facts a late change made wrong and scd2.rekey_facts re-points them.
SET client_min_messages = warning;
CREATE SCHEMA citus_facts;
SET search_path = citus_facts, public;
CREATE TABLE cf_dim (sk bigint GENERATED ALWAYS AS IDENTITY, id int, city text, valid_from date, valid_to date);
CREATE TABLE cf_stg (id int, city text, eff date);
SELECT scd2.register('cf_dim', ARRAY['id'], effective_column => 'eff') IS NOT NULL AS registered;
INSERT INTO cf_stg SELECT i, 'a', '2024-01-01' FROM generate_series(1, 20) i;
CALL scd2.apply('cf_stg', 'cf_dim');
SELECT create_reference_table('cf_dim');
CREATE TABLE cf_fact (id int, sold_at date, cust_sk bigint);
INSERT INTO cf_fact SELECT i, '2024-03-01', (SELECT sk FROM cf_dim d WHERE d.id = i) FROM generate_series(1, 20) i;
SELECT create_distributed_table('cf_fact', 'id');
\set VERBOSITY terse
SELECT scd2.register_fact('cf_fact', 'cf_dim', 'cust_sk', 'sold_at');
\set VERBOSITY default
SELECT scd2.register_fact('cf_fact', 'cf_dim', 'cust_sk', 'sold_at', maintain => false) IS NOT NULL AS registered;
-- a change of five keys effective before the facts' time
TRUNCATE cf_stg;
INSERT INTO cf_stg SELECT i, 'b', '2024-02-01' FROM generate_series(1, 5) i;
CALL scd2.apply('cf_stg', 'cf_dim');
SELECT count(*) AS wrong_groups, sum(facts) AS wrong_facts FROM scd2.check_facts('cf_fact');
SELECT scd2.rekey_facts('cf_fact') AS rekeyed;
SELECT count(*) AS wrong_after FROM scd2.check_facts('cf_fact');
SELECT count(*) AS facts_on_new_versions FROM cf_fact f JOIN cf_dim d ON d.sk = f.cust_sk WHERE d.city = 'b';
RESET search_path;
DROP SCHEMA citus_facts CASCADE;
