-- bench/plans/gen.sql -- one dimension of the plan-robustness benchmark
-- (issue 26), first loaded by scd2 and never analyzed, and its staging
-- batches, never analyzed either.
--
--   psql -v keys=20000 -v keytype=comp -v batches='100 200 2000' -f bench/plans/gen.sql
--
-- keytype  int   key (id int): dimension p_int_<keys>
--          comp  key (sku int, region text), the issue's shape: p_comp_<keys>
-- Both have the tracked columns price numeric, color text, descr text.
-- The dimension is created with autovacuum off, registered, and filled by
-- one CALL scd2.apply from KEYS staging rows (its first load: the indexes
-- are built after the insert, so reltuples is right, and there are no
-- column statistics).  Each batch B gets:
--   <dim>_s<B>       the staging table (autovacuum off): B rows in random
--                    order, 10% changed keys, 5% new keys, the rest
--                    unchanged (at least one of each)
--   <dim>_s<B>_close the keys the floor closes      } precomputed
--   <dim>_s<B>_new   the versions the floor inserts } classification
\set ON_ERROR_STOP on
SET client_min_messages = warning;
SELECT 'p_' || :'keytype' || '_' || :keys AS dim,
       CASE :'keytype' WHEN 'int' THEN 'id int NOT NULL' ELSE 'sku int NOT NULL, region text NOT NULL' END AS keydef,
       CASE :'keytype' WHEN 'int' THEN 'id' ELSE 'sku, region' END AS keycols,
       CASE :'keytype' WHEN 'int' THEN 'ARRAY[''id'']' ELSE 'ARRAY[''sku'', ''region'']' END AS keyarr,
       -- key number g -> the key's columns (composite: 3 regions per sku)
       CASE :'keytype' WHEN 'int' THEN 'g AS id'
            ELSE '(g + 2) / 3 AS sku, (ARRAY[''EU'', ''US'', ''AP''])[g % 3 + 1] AS region' END AS keyof
\gset
SELECT scd2.unregister(c.oid::regclass) FROM pg_class c
 WHERE c.relname = :'dim' AND EXISTS (SELECT FROM scd2.dimensions d WHERE d.dimension = c.oid) \g /dev/null
SELECT format('DROP TABLE IF EXISTS %I CASCADE', relname) FROM pg_class
 WHERE relname = :'dim' OR relname LIKE :'dim' || '\_s%' AND relkind = 'r' \gexec

CREATE TABLE :"dim" (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, :keydef,
  price numeric, color text, descr text, valid_from timestamptz NOT NULL, valid_to timestamptz,
  is_current boolean NOT NULL DEFAULT true) WITH (autovacuum_enabled = off);
SELECT scd2.register(:'dim', :keyarr::name[]) \g /dev/null
CREATE TEMP TABLE first_stg WITH (autovacuum_enabled = off) AS
SELECT :keyof, (g % 1000)::numeric AS price, (ARRAY['red', 'green', 'blue'])[g % 3 + 1] AS color,
       'item ' || g AS descr
  FROM generate_series(1, :keys) g ORDER BY random();
CALL scd2.apply('first_stg', :'dim', effective_at => '2026-01-01') \g /dev/null
DROP TABLE first_stg;

-- the batches
SELECT format($q$
CREATE TABLE %1$I WITH (autovacuum_enabled = off) AS
WITH p AS (SELECT greatest(1, round(%2$s * 0.10))::int AS n_chg, greatest(1, round(%2$s * 0.05))::int AS n_new),
     pick AS (SELECT g, row_number() OVER (ORDER BY hashint4(g + %2$s)) AS r FROM generate_series(1, %3$s) g)
SELECT * FROM (
SELECT %4$s, (g %% 1000)::numeric + CASE WHEN r <= n_chg THEN 1 ELSE 0 END AS price,
       (ARRAY['red', 'green', 'blue'])[g %% 3 + 1] AS color, 'item ' || g AS descr
  FROM pick, p WHERE r <= %2$s - n_new
UNION ALL
SELECT %4$s, 1, 'new', 'new ' || g FROM p, generate_series(%3$s + 1, %3$s + n_new) g) u
ORDER BY random()$q$, :'dim' || '_s' || b, b, :keys, :'keyof')
  FROM unnest(string_to_array(:'batches', ' ')::int[]) b \gexec
-- the floor's precomputed classification, from the dimension itself
SELECT format($q$
CREATE TABLE %1$I AS SELECT %3$s FROM %2$I s JOIN %4$I d USING (%3$s)
 WHERE d.valid_to IS NULL AND d.price IS DISTINCT FROM s.price$q$,
       :'dim' || '_s' || b || '_close', :'dim' || '_s' || b, :'keycols', :'dim'),
       format($q$
CREATE TABLE %1$I AS SELECT s.* FROM %2$I s LEFT JOIN %4$I d ON (%3$s) = (%5$s) AND d.valid_to IS NULL
 WHERE d.sk IS NULL OR d.price IS DISTINCT FROM s.price$q$,
       :'dim' || '_s' || b || '_new', :'dim' || '_s' || b,
       (SELECT string_agg('d.' || c, ', ') FROM unnest(string_to_array(:'keycols', ', ')) c),
       :'dim', (SELECT string_agg('s.' || c, ', ') FROM unnest(string_to_array(:'keycols', ', ')) c))
  FROM unnest(string_to_array(:'batches', ' ')::int[]) b \gexec
-- the analyzed state's statistics (the never-analyzed state hides them
-- inside its rolled-back transaction: run.sh)
ANALYZE :"dim";
SELECT format('ANALYZE %I', :'dim' || '_s' || b) FROM unnest(string_to_array(:'batches', ' ')::int[]) b \gexec
VACUUM :"dim";
