-- Loads on Citus: the same five batches loaded into a plain local
-- dimension and into eight Citus ones -- distributed by the business key
-- with staging local, reference, distributed co-located, distributed not
-- co-located, and a view over a distributed table; a reference dimension
-- with staging local, reference and distributed -- and into a local one
-- from a distributed staging table give identical dimensions, metrics,
-- change feeds (scd2.merge) and change logs (scd2.changes).
SET client_min_messages = warning;
CREATE SCHEMA citus_load;
SET search_path = citus_load, public;

-- The batches: staging rows with their effective time and delete marker.
CREATE TABLE batches (batch int, id int, name text, city text, tier int, eff timestamptz, del boolean);
INSERT INTO batches VALUES
  -- 1: the first load
  (1, 1, 'Ann', 'Oslo', 1, '2024-01-01', false), (1, 2, 'Bob', 'Rome', 1, '2024-01-01', false),
  (1, 3, 'Cid', 'Kyiv', 1, '2024-01-01', false), (1, 4, 'Dan', 'Lima', 1, '2024-01-01', false),
  (1, 5, 'Eve', 'Cork', 1, '2024-01-01', false), (1, 6, 'Fay', 'Riga', 1, '2024-01-01', false),
  -- 2: unchanged (1), a change (2), a Type 1 change (3), a delete (4), a new key (7)
  (2, 1, 'Ann', 'Oslo', 1, '2024-02-01', false), (2, 2, 'Bob', 'Paris', 1, '2024-02-01', false),
  (2, 3, 'Cid', 'Kyiv', 2, '2024-02-01', false), (2, 4, 'Dan', 'Lima', 1, '2024-02-01', true),
  (2, 7, 'Gus', 'Baku', 1, '2024-02-01', false),
  -- 3: two changes of one key (5), an exact duplicate (8), a deleted key comes back (4)
  (3, 5, 'Eve', 'Bonn', 1, '2024-03-01', false), (3, 5, 'Eve', 'Graz', 1, '2024-03-15', false),
  (3, 8, 'Hal', 'Nice', 1, '2024-03-01', false), (3, 8, 'Hal', 'Nice', 1, '2024-03-01', false),
  (3, 4, 'Dan', 'Lima', 1, '2024-03-01', false),
  -- 4: a late arrival (2, inside its first version), a change with a Type 1 change (6)
  (4, 2, 'Bob', 'Turin', 1, '2024-01-15', false), (4, 6, 'Fay', 'Oulu', 3, '2024-04-01', false),
  -- 5: batch 4 again: nothing to do
  (5, 2, 'Bob', 'Turin', 1, '2024-01-15', false), (5, 6, 'Fay', 'Oulu', 3, '2024-04-01', false);

-- One staging table and one dimension per shape.
CREATE TABLE pairs (dim text PRIMARY KEY, dim_shape text, stg_shape text);
INSERT INTO pairs VALUES
  ('dim_local', 'local', 'local'),
  ('dim_local_stg_dist', 'local', 'distributed'),
  ('dim_dist_stg_local', 'distributed', 'local'),
  ('dim_dist_stg_ref', 'distributed', 'reference'),
  ('dim_dist_stg_coloc', 'distributed', 'co-located'),
  ('dim_dist_stg_other', 'distributed', 'not co-located'),
  ('dim_dist_stg_view', 'distributed', 'view'),
  ('dim_ref_stg_local', 'reference', 'local'),
  ('dim_ref_stg_ref', 'reference', 'reference'),
  ('dim_ref_stg_dist', 'reference', 'distributed');

CREATE TABLE stg_template (id int, name text, city text, tier int, eff timestamptz, del boolean);
DO $$
DECLARE p record;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    EXECUTE format('CREATE TABLE %I (LIKE stg_template)', 'stg_' || p.dim);
    PERFORM scd2.create_dimension(p.dim, ('stg_' || p.dim)::regclass, ARRAY['id'],
                                  type1 => ARRAY['tier'], effective_column => 'eff',
                                  delete_column => 'del');
    IF p.dim_shape = 'distributed' THEN
      -- a distributed table's unique indexes must contain the distribution column
      EXECUTE format('ALTER TABLE %I DROP CONSTRAINT %I, ADD PRIMARY KEY (id, sk)', p.dim, p.dim || '_pkey');
      PERFORM create_distributed_table(p.dim, 'id');
    ELSIF p.dim_shape = 'reference' THEN
      PERFORM create_reference_table(p.dim);
    END IF;
    IF p.stg_shape = 'reference' THEN
      PERFORM create_reference_table('stg_' || p.dim);
    ELSIF p.stg_shape = 'co-located' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'id', colocate_with => p.dim);
    ELSIF p.stg_shape = 'not co-located' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'name', colocate_with => 'none');
    ELSIF p.stg_shape = 'distributed' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'id');
    ELSIF p.stg_shape = 'view' THEN
      EXECUTE format('ALTER TABLE %I RENAME TO %I', 'stg_' || p.dim, 'base_' || p.dim);
      PERFORM create_distributed_table('base_' || p.dim, 'id', colocate_with => p.dim);
      EXECUTE format('CREATE VIEW %I AS SELECT * FROM %I', 'stg_' || p.dim, 'base_' || p.dim);
    END IF;
  END LOOP;
END $$;

-- The shapes as Citus sees them.
SELECT p.dim, p.dim_shape, p.stg_shape, d.citus_table_type AS dim_type,
       coalesce(s.citus_table_type, CASE WHEN c.relkind = 'v' THEN 'view' ELSE 'local' END) AS stg_type,
       d.colocation_id = s.colocation_id AS co_located
FROM pairs p
LEFT JOIN citus_tables d ON d.table_name = p.dim::regclass
LEFT JOIN citus_tables s ON s.table_name = ('stg_' || p.dim)::regclass
JOIN pg_class c ON c.oid = ('stg_' || p.dim)::regclass
ORDER BY p.dim;

-- Batch b into every dimension; scd2.merge (its feed kept) for batches 2
-- and 4, CALL scd2.apply for the others.
CREATE TABLE feeds (dim text, batch int, action text, surrogate_key bigint, business_key jsonb,
                    valid_from timestamptz, valid_to timestamptz);
CREATE TABLE runs (dim text, batch int, run_id bigint);
CREATE PROCEDURE load_batch(b int) LANGUAGE plpgsql AS $$
DECLARE p record; r bigint; t text;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    -- Citus modifies no view: the batch goes into the view's table
    t := CASE p.stg_shape WHEN 'view' THEN 'base_' ELSE 'stg_' END || p.dim;
    EXECUTE format('DELETE FROM %I', t);
    EXECUTE format('INSERT INTO %I SELECT id, name, city, tier, eff, del FROM batches WHERE batch = %s', t, b);
    IF b IN (2, 4) THEN
      EXECUTE format('INSERT INTO feeds SELECT %L, %s, * FROM scd2.merge(%L, %L, %L)',
                     p.dim, b, 'stg_' || p.dim, p.dim, '2024-06-01');
      SELECT max(run_id) INTO r FROM scd2.audit_log;
    ELSE
      r := NULL;
      CALL scd2.apply(('stg_' || p.dim)::regclass, p.dim::regclass, '2024-06-01', r);
    END IF;
    INSERT INTO runs VALUES (p.dim, b, r);
  END LOOP;
END $$;
CALL load_batch(1);
CALL load_batch(2);
CALL load_batch(3);
CALL load_batch(4);
CALL load_batch(5);

-- The plain dimension after the five loads ...
SELECT id, name, city, tier, valid_from, valid_to, is_current FROM dim_local ORDER BY id, valid_from;

-- ... and every Citus dimension holds exactly the same versions (row
-- counts, and rows of one missing from the other: none), with unique
-- surrogate keys.
CREATE FUNCTION versions(dim text) RETURNS TABLE (id int, name text, city text, tier int,
    valid_from timestamptz, valid_to timestamptz, is_current boolean, sk bigint)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT id, name, city, tier, valid_from, valid_to, is_current, sk FROM %I', dim);
END $$;
SELECT p.dim,
       (SELECT count(*) FROM versions(p.dim)) AS versions,
       (SELECT count(DISTINCT sk) FROM versions(p.dim)) AS distinct_sk,
       (SELECT count(*) FROM (SELECT id, name, city, tier, valid_from, valid_to, is_current FROM versions(p.dim)
                              EXCEPT ALL
                              SELECT id, name, city, tier, valid_from, valid_to, is_current FROM dim_local) x) AS extra,
       (SELECT count(*) FROM (SELECT id, name, city, tier, valid_from, valid_to, is_current FROM dim_local
                              EXCEPT ALL
                              SELECT id, name, city, tier, valid_from, valid_to, is_current FROM versions(p.dim)) x) AS missing
FROM pairs p ORDER BY p.dim;

-- The metrics of every run: each batch's line is the same for all ten
-- dimensions (dims = 10).
SELECT r.batch, a.status, a.source_rows, a.inserted, a.new_versions, a.closed, a.deleted, a.shortened,
       a.type1_updated, a.unchanged, a.duplicates, count(*) AS dims
FROM runs r JOIN scd2.audit_log a ON a.run_id = r.run_id
GROUP BY 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11 ORDER BY 1, 2;

-- scd2.merge's change feed: the plain dimension's, and every Citus
-- dimension's is the same but for the surrogate keys ...
SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = 'dim_local'
ORDER BY batch, business_key, valid_from, action;
SELECT p.dim,
       (SELECT count(*) FROM feeds f WHERE f.dim = p.dim) AS feed_rows,
       (SELECT count(*) FROM (SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = p.dim
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = 'dim_local') x) AS extra,
       (SELECT count(*) FROM (SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = 'dim_local'
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = p.dim) x) AS missing,
       -- ... which are those of the rows written (key and valid_from)
       (SELECT count(*) FROM feeds f JOIN versions(p.dim) v
          ON v.sk = f.surrogate_key AND v.id = (f.business_key->>'id')::int AND v.valid_from = f.valid_from
        WHERE f.dim = p.dim) AS feed_rows_found
FROM pairs p ORDER BY p.dim;

-- The change log: scd2.changes of every run gives the run's feed again,
-- the same on every dimension.
SELECT p.dim,
       (SELECT count(*) FROM runs r, scd2.changes(r.run_id) c WHERE r.dim = p.dim) AS logged,
       (SELECT count(*) FROM (SELECT r.batch, c.action, c.business_key, c.valid_from, c.valid_to
                                FROM runs r, scd2.changes(r.run_id) c WHERE r.dim = p.dim
                              EXCEPT ALL
                              SELECT r.batch, c.action, c.business_key, c.valid_from, c.valid_to
                                FROM runs r, scd2.changes(r.run_id) c WHERE r.dim = 'dim_local') x) AS differ,
       (SELECT count(*) FROM runs r, scd2.changes(r.run_id) c JOIN versions(p.dim) v
          ON v.sk = c.surrogate_key AND v.valid_from = c.valid_from
        WHERE r.dim = p.dim) AS sk_found
FROM pairs p ORDER BY p.dim;

RESET search_path;
DROP SCHEMA citus_load CASCADE;
