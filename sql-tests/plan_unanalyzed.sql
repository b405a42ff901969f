-- Issue 26: the fast path's plan does not depend on the dimension (or the
-- staging table) having statistics.  A composite-key dimension first
-- loaded by scd2 and never analyzed: the planner, guessing 0.5% of it
-- current, used to filter a Materialize of all current rows against every
-- staging row (20k keys, 1,500 rows: 30M comparisons) instead of probing
-- the current-row index.  scd2.explain_statement shows the plan's nodes of
-- the named statement; the plan before and after ANALYZE is the same.
CREATE SCHEMA plan;
SET search_path = plan, public;
CREATE TABLE dz (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, sku int NOT NULL, region text NOT NULL,
  price numeric, color text, descr text, valid_from timestamptz NOT NULL, valid_to timestamptz,
  is_current boolean NOT NULL DEFAULT true) WITH (autovacuum_enabled = off);
CREATE TABLE sz (sku int, region text, price numeric, color text, descr text) WITH (autovacuum_enabled = off);
SELECT scd2.register('dz', ARRAY['sku','region']::name[]);
INSERT INTO sz SELECT g, 'EU', 1, 'red', 'a' FROM generate_series(1, 20000) g;
CALL scd2.apply('sz', 'dz', effective_at => '2026-01-01', run_id => NULL) \gset
TRUNCATE sz;
INSERT INTO sz SELECT sku, region, 2, color, descr FROM dz WHERE sku % 13 = 0;

-- neither table has statistics
SELECT c.relname, s.last_analyze IS NULL AND s.last_autoanalyze IS NULL AS never_analyzed,
       NOT EXISTS (SELECT 1 FROM pg_statistic WHERE starelid = c.oid) AS no_statistics
  FROM pg_class c JOIN pg_stat_user_tables s ON s.relid = c.oid
 WHERE c.relname IN ('dz', 'sz') ORDER BY 1;

SET scd2.explain_statement = 'classifying staging rows';
BEGIN;
CALL scd2.apply('sz', 'dz', effective_at => '2026-02-01', run_id => NULL) \gset
ROLLBACK;

ANALYZE dz;
ANALYZE sz;
BEGIN;
CALL scd2.apply('sz', 'dz', effective_at => '2026-02-01', run_id => NULL) \gset
ROLLBACK;

-- the setting is a superuser's: it shows the plan of a dimension's statements
CREATE ROLE scd2_plan_user;
SET ROLE scd2_plan_user;
SET scd2.explain_statement = '*';
RESET ROLE;
DROP ROLE scd2_plan_user;
RESET scd2.explain_statement;

-- a load with nothing asked shows nothing; the load itself is the same
CALL scd2.apply('sz', 'dz', effective_at => '2026-02-01', run_id => NULL) \gset
SELECT count(*) FILTER (WHERE valid_to IS NULL) AS current, count(*) AS versions,
       scd2_test.invariants('dz', 'sku::text || region') AS invariants FROM dz;
DROP SCHEMA plan CASCADE;
