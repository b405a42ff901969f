-- CALL scd2.apply_snapshots (issue 27): many full extracts in one staging
-- table, one snapshot-mode load per extract in ascending order, in one
-- call.  It must equal loading the extracts one by one: the rows, their
-- validity, and each extract's audit metrics.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
SET search_path = histops, public;

-- A random series of extracts (keys disappear and come back, values and a
-- Type 1 column change, exact duplicates, one empty extract), applied to
-- dimension a by apply_snapshots and to b one by one with scd2.apply;
-- both start from the same first load.  Surrogate keys aside, every
-- column of every row must be equal, and the metrics of every extract.
-- kind: 'table' (filled extract by extract: compared in one pass, with
-- no sort); 'view' (the staging rows are fetched again by key, not by
-- ctid); 'not null' (a NOT NULL snapshot column: a delete marker is no
-- staging row); 'shuffled' (the rows stored in random order: a key's rows
-- come out of extract order, and the extracts are compared by sorting);
-- 'text key' (a text business key, hashed and compared in one pass);
-- 'low memory' (maintenance_work_mem 1MB: the one pass gives up part way,
-- what it wrote goes, and the extracts are compared by sorting).
CREATE FUNCTION histops.snapshots_match(seed float8, days int, nkeys int, kind text DEFAULT 'table', OUT rows_equal boolean,
                                     OUT metrics_equal boolean, OUT extracts bigint, OUT versions bigint)
LANGUAGE plpgsql AS $$
DECLARE
    d date;
    run bigint;
    first_run bigint;
    idtype text := CASE kind WHEN 'text key' THEN 'text COLLATE "C"' ELSE 'int' END;
    saved_mem text;
BEGIN
    PERFORM setseed(seed);
    DROP VIEW IF EXISTS histops.snaps_v;
    DROP TABLE IF EXISTS histops.sa, histops.sb, histops.snaps, histops.stg1;
    EXECUTE format('CREATE TABLE histops.sa (sk bigint GENERATED ALWAYS AS IDENTITY, id %s NOT NULL, v text, w int,'
                   ' valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true)', idtype);
    CREATE TABLE histops.sb (LIKE histops.sa INCLUDING ALL);
    PERFORM scd2.register('histops.sa', ARRAY['id'], type1 => ARRAY['w'], mode => 'snapshot');
    PERFORM scd2.register('histops.sb', ARRAY['id'], type1 => ARRAY['w'], mode => 'snapshot');
    EXECUTE format('CREATE TABLE histops.stg1 (id %s, v text, w int)', idtype);
    EXECUTE format('CREATE TABLE histops.snaps (snap date, id %s, v text, w int)', idtype);
    -- the state both start from
    INSERT INTO histops.stg1 SELECT g, 'a', 0 FROM generate_series(1, nkeys) g WHERE random() < 0.7;
    CALL scd2.apply('histops.stg1', 'histops.sa', '2023-12-31', run);
    CALL scd2.apply('histops.stg1', 'histops.sb', '2023-12-31', run);
    -- the extracts: each key present with probability 0.8, its value one of three
    FOR i IN 1 .. days LOOP
        d := date '2024-01-01' + i;
        IF i = days / 2 THEN
            INSERT INTO histops.snaps VALUES (d, NULL, NULL, NULL);   -- an empty extract
        ELSE
            INSERT INTO histops.snaps
            SELECT d, g, (ARRAY['a', 'b', 'c'])[1 + (random() * 2.2)::int], (random() * 1.4)::int
              FROM generate_series(1, nkeys) g WHERE random() < 0.8;
            INSERT INTO histops.snaps SELECT * FROM histops.snaps WHERE snap = d AND random() < 0.05;  -- duplicates
        END IF;
    END LOOP;
    IF kind = 'shuffled' THEN
        CREATE TEMP TABLE shuffled ON COMMIT DROP AS SELECT * FROM histops.snaps ORDER BY random();
        TRUNCATE histops.snaps;
        INSERT INTO histops.snaps SELECT * FROM shuffled;
        DROP TABLE shuffled;
    END IF;
    CREATE VIEW histops.snaps_v AS SELECT * FROM histops.snaps;
    IF kind = 'not null' THEN
        ALTER TABLE histops.snaps ALTER snap SET NOT NULL;
    END IF;
    PERFORM set_config('scd2.allow_empty_snapshot', 'on', true);
    SELECT max(run_id) INTO first_run FROM scd2.audit_log;
    IF kind = 'low memory' THEN
        saved_mem := current_setting('maintenance_work_mem');
        PERFORM set_config('maintenance_work_mem', '1MB', true);
    END IF;
    IF kind = 'view' THEN
        CALL scd2.apply_snapshots('histops.snaps_v', 'histops.sa', 'snap');
    ELSE
        CALL scd2.apply_snapshots('histops.snaps', 'histops.sa', 'snap');
    END IF;
    IF kind = 'low memory' THEN
        PERFORM set_config('maintenance_work_mem', saved_mem, true);
    END IF;
    FOR d IN SELECT DISTINCT snap FROM histops.snaps ORDER BY 1 LOOP
        TRUNCATE histops.stg1;
        INSERT INTO histops.stg1 SELECT id, v, w FROM histops.snaps WHERE snap = d AND id IS NOT NULL;
        CALL scd2.apply('histops.stg1', 'histops.sb', d, run);
    END LOOP;
    PERFORM set_config('scd2.allow_empty_snapshot', 'off', true);
    rows_equal := histops.checksum('histops.sa', ARRAY['sk']) = histops.checksum('histops.sb', ARRAY['sk']);
    SELECT bool_and(a IS NOT DISTINCT FROM b), count(*) INTO metrics_equal, extracts
      FROM (SELECT row_number() OVER (ORDER BY run_id) AS n,
                   ROW(status, effective_at, source_rows, inserted, new_versions, closed, deleted, shortened,
                       type1_updated, unchanged, duplicates) AS a
              FROM scd2.audit_log WHERE dimension = 'histops.sa' AND run_id > first_run) x
      FULL JOIN (SELECT row_number() OVER (ORDER BY run_id) AS n,
                   ROW(status, effective_at, source_rows, inserted, new_versions, closed, deleted, shortened,
                       type1_updated, unchanged, duplicates) AS b
              FROM scd2.audit_log WHERE dimension = 'histops.sb' AND run_id > first_run) y USING (n);
    SELECT count(*) INTO versions FROM histops.sa;
    IF scd2_test.invariants('histops.sa') <> 'ok' THEN
        RAISE EXCEPTION 'invariants: %', scd2_test.invariants('histops.sa');
    END IF;
END $$;

SELECT seed, m.* FROM unnest(ARRAY[0.1, 0.2]) seed, histops.snapshots_match(seed, 10, 30) m;
SELECT * FROM histops.snapshots_match(0.5, 12, 100);

-- What apply_snapshots wrote is ordinary history: one revertible run per
-- extract; rewinding to the first load undoes them all.
SELECT a.status, count(*), min(a.message) AS message
  FROM scd2.audit_log a JOIN scd2.change_log_runs r USING (run_id)
 WHERE r.dimension = 'histops.sa'::regclass GROUP BY 1 ORDER BY 1;
SELECT scd2.rewind('histops.sa', (SELECT min(run_id) FROM scd2.change_log_runs WHERE dimension = 'histops.sa'::regclass))
       = (SELECT count(DISTINCT snap) FROM histops.snaps) AS all_undone;
SELECT count(*) AS versions_left FROM histops.sa;

-- The same from a view (its rows are fetched again by key and extract,
-- not by ctid), with a NOT NULL snapshot column, from a table whose
-- rows are stored in random order (compared by sorting them), and with a
-- text business key.
SELECT kind, m.* FROM unnest(ARRAY['view', 'not null', 'shuffled', 'text key']) kind, histops.snapshots_match(0.3, 10, 40, kind) m;

-- More random series, each compared with one-by-one loading: stored in
-- extract order (the one pass) and in random order (the sort).  Each in a
-- transaction of its own (\gexec): one statement would hold the locks of
-- every table the 16 series create and drop (out of shared memory at
-- max_connections 20).
CREATE TEMP TABLE series (kind text, equal boolean);
SELECT format('INSERT INTO series SELECT %L, m.rows_equal AND m.metrics_equal FROM histops.snapshots_match(%s, %s, %s, %L) m',
              kind, 0.6 + i / 100.0, 6 + i % 5, 15 + i, kind)
  FROM unnest(ARRAY['table', 'shuffled']) kind, generate_series(1, 8) i \gexec
SELECT kind, count(*) FILTER (WHERE equal) AS equal, count(*) AS series FROM series GROUP BY kind ORDER BY kind;
DROP TABLE series;

-- 9,000 keys whose table outgrows maintenance_work_mem (1MB) part way
-- through the rows: the same result by sorting.
SELECT * FROM histops.snapshots_match(0.4, 3, 9000, 'low memory');

-- The small example of the docs.
CREATE TABLE dim_item (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, price int,
                       valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim_item', ARRAY['id'], mode => 'snapshot');
CREATE TABLE item_extracts (extracted_on date, id int, price int);
INSERT INTO item_extracts VALUES
    ('2024-01-01', 1, 10), ('2024-01-01', 2, 20), ('2024-01-01', 3, 30),
    ('2024-01-02', 1, 10), ('2024-01-02', 2, 25),                         -- 2 changes, 3 is gone
    ('2024-01-03', 1, 10), ('2024-01-03', 2, 25), ('2024-01-03', 3, 30);  -- 3 is back
CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on');
SELECT id, price, valid_from, valid_to, is_current FROM dim_item ORDER BY id, valid_from;
SELECT effective_at, source_rows, inserted, new_versions, closed, deleted, unchanged, message
  FROM scd2.audit_log WHERE dimension = 'histops.dim_item' ORDER BY run_id;

-- Refusals, each writing nothing.
SELECT histops.state('dim_item') AS before \gset
-- an extract older than the last load, named
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on')$$);
-- the partial-extract guard, per extract
INSERT INTO item_extracts SELECT '2024-01-05', id, price FROM item_extracts WHERE extracted_on = '2024-01-03';
INSERT INTO item_extracts VALUES ('2024-01-06', 1, 10);
DELETE FROM item_extracts WHERE extracted_on < '2024-01-05';
SELECT scd2.register('dim_item', ARRAY['id'], mode => 'snapshot', max_close_fraction => 0.5);
SELECT histops.state('dim_item') AS before \gset
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on')$$);
-- an empty extract (a row with only its time), unless allowed
UPDATE item_extracts SET id = NULL, price = NULL WHERE extracted_on = '2024-01-06';
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on')$$);
SELECT histops.state('dim_item') = :'before' AS nothing_written;
-- bad arguments
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'nope')$$);
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'price')$$);
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'id')$$);
-- a row without a business key in a later extract, refused as a load refuses it
INSERT INTO item_extracts VALUES ('2024-01-06', NULL, 1);
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on')$$);
DELETE FROM item_extracts WHERE extracted_on = '2024-01-06' AND price = 1;
INSERT INTO item_extracts VALUES (NULL, 1, 1);
SELECT histops.try($$CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on')$$);
SELECT histops.state('dim_item') = :'before' AS nothing_written;
-- at top level a failed call leaves one error row
CALL scd2.apply_snapshots('item_extracts', 'dim_item', 'extracted_on');
SELECT status, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
