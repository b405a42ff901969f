-- Ordinary column names never break a load (issue 17, class 4).  The
-- dimension below has a column named after every table alias, CTE name and
-- window name of the generated SQL, and after the short name of every
-- internal column (the list of src/sqlbuild.c, "Internal names"); its
-- bookkeeping columns, business key, surrogate key, effective column and
-- delete marker carry internal names too.  Columns starting with "scd2_"
-- and "scd2_2_" push the internal prefix to "scd2_3".
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA nm;
SET search_path = nm, public;

CREATE TABLE internal_names (name text PRIMARY KEY);
INSERT INTO internal_names VALUES
    -- aliases, CTE names and window names
    ('s'), ('s0'), ('d'), ('d2'), ('h'), ('c'), ('c1'), ('cls'), ('v'), ('x'), ('m'),
    ('mx'), ('cs'), ('km'), ('rel'), ('r'), ('o'), ('k'), ('e'), ('kp'), ('g'), ('p'),
    ('t'), ('w'), ('l'), ('wk'),
    -- internal columns by their short names (positional ones for column 1)
    ('_action'), ('_cls'), ('_conflict'), ('_counts'), ('_d1'), ('_diff'), ('_dsk'),
    ('_dvf'), ('_e1'), ('_end'), ('_hvt'), ('_k'), ('_keep'), ('_lprio'), ('_m'),
    ('_n'), ('_ne'), ('_npresent'), ('_nth'), ('_nvf'), ('_o'), ('_origin'), ('_ovt'),
    ('_p1'), ('_pp'), ('_pprio'), ('_prio'), ('_pt'), ('_run'), ('_set_y'),
    ('_sety'), ('_snap'), ('_stg'), ('_w'),
    -- the same with the default prefix and the first alternative
    ('scd2_t'), ('scd2_2_cls');

-- Business key "_tvf", surrogate key "_sk", validity "_vf"/"_vt", current
-- flag "_cur", Type 1 column "_l1"; staging adds effective column "_t" and
-- delete marker "_present".  Every other name is a tracked text column.
DO $$
DECLARE cols text;
BEGIN
    SELECT string_agg(format('%I text', name), ', ' ORDER BY name) INTO cols FROM nm.internal_names;
    EXECUTE format('CREATE TABLE nm.dim ("_sk" bigint GENERATED ALWAYS AS IDENTITY, "_tvf" int NOT NULL,'
                   ' %s, "_l1" text, "_vf" timestamptz NOT NULL, "_vt" timestamptz,'
                   ' "_cur" boolean NOT NULL DEFAULT true)', cols);
    EXECUTE format('CREATE TABLE nm.stg ("_tvf" int, %s, "_l1" text, "_t" timestamptz, "_present" boolean)', cols);
END $$;
SELECT count(*) AS dimension_columns FROM pg_attribute
 WHERE attrelid = 'nm.dim'::regclass AND attnum > 0 AND NOT attisdropped;

SELECT scd2.register('dim', ARRAY['_tvf'], type1 => ARRAY['_l1'], effective_column => '_t',
                     delete_column => '_present', valid_from_column => '_vf', valid_to_column => '_vt',
                     is_current_column => '_cur', surrogate_key_column => '_sk');

-- Every tracked column gets the same value; one column then changes.
CREATE FUNCTION stage(key int, val text, ph text, at timestamptz, gone boolean DEFAULT NULL)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE cols text; vals text;
BEGIN
    SELECT string_agg(format('%I', name), ', ' ORDER BY name),
           string_agg(quote_literal(val), ', ' ORDER BY name) INTO cols, vals FROM nm.internal_names;
    EXECUTE format('INSERT INTO nm.stg ("_tvf", %s, "_l1", "_t", "_present") VALUES ($1, %s, $2, $3, $4)',
                   cols, vals) USING key, ph, at, gone;
END $$;
CREATE VIEW dim_v AS
    SELECT "_sk", "_tvf", w, "_cls", s, "scd2_t", "_l1", "_vf", "_vt", "_cur" FROM dim ORDER BY "_tvf", "_vf";

-- 1. New keys (fast path).
SELECT stage(1, 'a', 'p1', '2024-01-01'), stage(2, 'a', 'p2', '2024-01-01'), stage(3, 'a', 'p3', '2024-01-01');
SELECT action, surrogate_key, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim') ORDER BY 3, 4;
-- 2. One tracked column changes ("w" for key 1, "_cls" for key 2), a Type 1
--    change on key 2, a delete of key 3 (fast path).
TRUNCATE stg;
SELECT stage(1, 'a', 'p1', '2024-02-01'), stage(2, 'a', 'p2b', '2024-02-01'), stage(3, 'a', 'p3', '2024-02-01', true);
UPDATE stg SET w = 'changed' WHERE "_tvf" = 1;
UPDATE stg SET "_cls" = 'changed' WHERE "_tvf" = 2;
SELECT action, surrogate_key, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim') ORDER BY 3, 4;
-- 3. Several rows for one key, a late row, a returning key (general path).
TRUNCATE stg;
SELECT stage(1, 'b', 'p1', '2024-03-01'), stage(1, 'c', 'p1', '2024-04-01'),
       stage(2, 'late', 'p2b', '2024-01-15'), stage(3, 'a', 'p3', '2024-05-01');
SELECT action, surrogate_key, business_key, valid_from, valid_to FROM scd2.merge('stg', 'dim') ORDER BY 3, 4;
SELECT * FROM dim_v;
-- Re-running the same batch is a no-op.
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim');
-- 4. Snapshot mode: key 2 is missing from the extract, key 1 changes.
SELECT scd2.register('dim', ARRAY['_tvf'], type1 => ARRAY['_l1'], effective_column => '_t',
                     valid_from_column => '_vf', valid_to_column => '_vt',
                     is_current_column => '_cur', surrogate_key_column => '_sk', mode => 'snapshot');
TRUNCATE stg;
SELECT stage(1, 'd', 'p1', '2024-06-01'), stage(3, 'a', 'p3', '2024-06-01');
SELECT action, surrogate_key, business_key, valid_from, valid_to
  FROM scd2.merge('stg', 'dim', '2024-06-01') ORDER BY 3, 4;
SELECT * FROM dim_v;
-- The same batch again through CALL: a no-op, logged.
DO $$ DECLARE run bigint; BEGIN CALL scd2.apply('nm.stg', 'nm.dim', '2024-06-01', run); END $$;
SELECT status, source_rows, inserted, new_versions, closed, deleted, shortened, type1_updated, unchanged
  FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
-- The as-of lookup reads the same dimension.
SELECT scd2.asof('dim', '2024-01-20', 2) = (SELECT "_sk" FROM dim WHERE "_tvf" = 2 AND w = 'late') AS asof_late;

RESET search_path;
