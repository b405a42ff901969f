-- Other registrations on Citus: a composite business key (region, id)
-- distributed by its second column, no surrogate key, no is_current, and
-- current rows ending at 'infinity'; as a distributed, a reference and a
-- local dimension, loaded from a local staging table: the same rows,
-- metrics and feeds.
SET client_min_messages = warning;
CREATE SCHEMA citus_shapes;
SET search_path = citus_shapes, public;

CREATE TABLE stg (region text, id int, city text);
CREATE FUNCTION make_dim(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format('CREATE TABLE %I (region text NOT NULL, id int NOT NULL, city text,
                  valid_from timestamptz NOT NULL, valid_to timestamptz NOT NULL)', name);
  PERFORM scd2.register(name::regclass, ARRAY['region', 'id'], current_valid_to => 'infinity');
END $$;
SELECT make_dim('dim_dist'), make_dim('dim_ref'), make_dim('dim_local');
SELECT create_distributed_table('dim_dist', 'id');
SELECT create_reference_table('dim_ref');

CREATE TABLE feeds (dim text, batch int, action text, business_key jsonb, valid_from timestamptz, valid_to timestamptz);
CREATE FUNCTION load(b int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
  FOREACH d IN ARRAY ARRAY['dim_dist', 'dim_ref', 'dim_local'] LOOP
    EXECUTE format('INSERT INTO feeds SELECT %L, %s, action, business_key, valid_from, valid_to
                    FROM scd2.merge(%L, %L, %L)', d, b, 'stg', d, '2024-0' || b || '-01');
  END LOOP;
END $$;
-- the same id in two regions: two keys, on one shard
INSERT INTO stg VALUES ('eu', 1, 'Oslo'), ('us', 1, 'Reno'), ('eu', 2, 'Rome'), ('us', 3, 'Waco');
SELECT load(1);
DELETE FROM stg;
INSERT INTO stg VALUES ('eu', 1, 'Bergen'), ('us', 1, 'Reno'), ('eu', 2, NULL), ('eu', 4, 'Bonn');
SELECT load(2);

SELECT region, id, city, valid_from, valid_to FROM dim_local ORDER BY region, id, valid_from;
SELECT d.dim,
       (SELECT count(*) FROM feeds f WHERE f.dim = d.dim) AS feed_rows,
       (SELECT count(*) FROM (SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = d.dim
                              EXCEPT ALL
                              SELECT batch, action, business_key, valid_from, valid_to FROM feeds WHERE dim = 'dim_local') x) AS feed_differs
FROM (VALUES ('dim_dist'), ('dim_ref'), ('dim_local')) d(dim) ORDER BY 1;
SELECT (SELECT count(*) FROM (SELECT * FROM dim_dist EXCEPT ALL SELECT * FROM dim_local) x) +
       (SELECT count(*) FROM (SELECT * FROM dim_local EXCEPT ALL SELECT * FROM dim_dist) x) AS dist_differs,
       (SELECT count(*) FROM (SELECT * FROM dim_ref EXCEPT ALL SELECT * FROM dim_local) x) +
       (SELECT count(*) FROM (SELECT * FROM dim_local EXCEPT ALL SELECT * FROM dim_ref) x) AS ref_differs;
SELECT dimension, source_rows, inserted, new_versions, closed, unchanged
FROM scd2.audit_log WHERE dimension LIKE 'citus_shapes.%' ORDER BY dimension, run_id;

RESET search_path;
DROP SCHEMA citus_shapes CASCADE;
