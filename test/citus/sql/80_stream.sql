-- Change streams on Citus (issue 50): events with sequences, several events
-- of a key at one instant, partial updates (NULL = unchanged), deletes,
-- returning keys and a Type 1 column, loaded in order and shuffled, give
-- the same dimension on a distributed and a reference dimension (and a
-- distributed co-located staging table) as on a local one loaded in order.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
CREATE SCHEMA citus_stream;
SET search_path = citus_stream, public;

-- 40 scenarios as test/arrival/stream.sql makes them (odd ones: with a
-- sequence; here every one has one)
CREATE TABLE ev (s int, n int, k int, a text, b int, y int, eff date, lsn int, del boolean, bt int);
DO $$
DECLARE
    nkeys int; nev int; cnt int; day int; seq int; nb int; left_ int;
    vals text[] := ARRAY[NULL, '', '~', 'x'];
    r record;
BEGIN
    FOR sc IN 1..40 LOOP
        PERFORM setseed((hashint4(sc)::bigint % 1000000) / 1000000.0);
        nkeys := 1 + floor(random() * 3)::int; cnt := 0; nb := 0; left_ := 0;
        FOR kk IN sc * 10 + 1 .. sc * 10 + nkeys LOOP
            nev := 1 + floor(random() * 6)::int;
            FOR i IN 1..nev LOOP
                day := floor(random() * 10)::int;
                seq := 1 + floor(random() * 40)::int;
                cnt := cnt + 1;
                IF EXISTS (SELECT FROM ev e WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND e.lsn = seq) THEN
                    INSERT INTO ev SELECT sc, cnt, e.k, e.a, e.b, e.y, e.eff, e.lsn, e.del FROM ev e
                     WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND e.lsn = seq ORDER BY e.n LIMIT 1;
                ELSIF random() < 0.2 THEN
                    INSERT INTO ev VALUES (sc, cnt, kk, NULL, NULL, NULL, date '2020-01-01' + day, seq, true);
                ELSE
                    INSERT INTO ev VALUES (sc, cnt, kk, vals[1 + floor(random() * 4)::int],
                                           CASE WHEN random() < 0.5 THEN 1 END,
                                           (ARRAY[NULL, 1, 2])[1 + floor(random() * 3)::int],
                                           date '2020-01-01' + day, seq, false);
                END IF;
            END LOOP;
        END LOOP;
        FOR r IN SELECT e.n FROM ev e WHERE e.s = sc ORDER BY random() LOOP
            IF left_ = 0 THEN nb := nb + 1; left_ := 1 + floor(random() * 4)::int; END IF;
            UPDATE ev SET bt = nb WHERE s = sc AND n = r.n;
            left_ := left_ - 1;
        END LOOP;
    END LOOP;
END $$;
SELECT count(DISTINCT k) AS keys, count(*) AS events, count(*) FILTER (WHERE del) AS deletes,
       count(*) FILTER (WHERE NOT del AND (a IS NULL OR y IS NULL)) AS partial FROM ev;

CREATE TABLE pairs (dim text PRIMARY KEY, dim_shape text, stg_shape text, batching text);
INSERT INTO pairs VALUES
  ('local_in', 'local', 'local', 'in order'),
  ('local_sh', 'local', 'local', 'shuffled'),
  ('dist_in', 'distributed', 'local', 'in order'),
  ('dist_sh', 'distributed', 'local', 'shuffled'),
  ('dist_stg_coloc_sh', 'distributed', 'co-located', 'shuffled'),
  ('ref_sh', 'reference', 'local', 'shuffled');
DO $$
DECLARE p record;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    EXECUTE format('CREATE TABLE %I (k int, a text, b int, y int, eff date, lsn int, del boolean)', 'stg_' || p.dim);
    EXECUTE format('CREATE TABLE %I (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int, y int,'
                   ' valid_from date, valid_to date, is_current boolean)', p.dim);
    PERFORM scd2.register(p.dim::regclass, ARRAY['k'], tracked => ARRAY['a', 'b'], type1 => ARRAY['y'],
                          effective_column => 'eff', delete_column => 'del', is_current_column => 'is_current',
                          surrogate_key_column => 'sk', sequence_column => 'lsn',
                          ignore_null_updates => ARRAY['a', 'y']);
    IF p.dim_shape = 'distributed' THEN
      PERFORM create_distributed_table(p.dim, 'k');
    ELSIF p.dim_shape = 'reference' THEN
      PERFORM create_reference_table(p.dim);
    END IF;
    IF p.stg_shape = 'co-located' THEN
      PERFORM create_distributed_table('stg_' || p.dim, 'k', colocate_with => p.dim);
    END IF;
  END LOOP;
END $$;
SELECT count(*) AS order_free_streams FROM scd2.dimensions
 WHERE order_free AND sequence_column = 'lsn'
   AND dimension IN (SELECT ('citus_stream.' || dim)::regclass FROM pairs);

CREATE PROCEDURE load_all() LANGUAGE plpgsql AS $$
DECLARE p record; b int;
BEGIN
  FOR p IN SELECT * FROM pairs ORDER BY dim LOOP
    FOR b IN SELECT DISTINCT CASE p.batching WHEN 'in order' THEN e.eff - date '2020-01-01' ELSE e.bt END
               FROM ev e ORDER BY 1 LOOP
      EXECUTE format('DELETE FROM %I', 'stg_' || p.dim);
      EXECUTE format('INSERT INTO %I SELECT e.k, e.a, e.b, e.y, e.eff, e.lsn, e.del FROM ev e WHERE %s = %s',
                     'stg_' || p.dim,
                     CASE p.batching WHEN 'in order' THEN $q$e.eff - date '2020-01-01'$q$ ELSE 'e.bt' END, b);
      EXECUTE format('CALL scd2.apply(%L, %L)', 'stg_' || p.dim, p.dim);
    END LOOP;
  END LOOP;
END $$;
CALL load_all();

CREATE FUNCTION versions(dim text) RETURNS TABLE (sk bigint, k int, a text, b int, y int, valid_from date,
    valid_to date, is_current boolean)
LANGUAGE plpgsql AS $$
BEGIN
  RETURN QUERY EXECUTE format('SELECT sk, k, a, b, y, valid_from, valid_to, is_current FROM %I', dim);
END $$;
SELECT count(*) AS versions, count(*) FILTER (WHERE valid_to IS NULL) AS current FROM versions('local_in');
SELECT p.dim,
       (SELECT count(*) FROM versions(p.dim)) AS versions,
       (SELECT count(*) FROM (SELECT k, a, b, y, valid_from, valid_to FROM versions(p.dim)
                              EXCEPT ALL SELECT k, a, b, y, valid_from, valid_to FROM local_in) x) AS extra,
       (SELECT count(*) FROM (SELECT k, a, b, y, valid_from, valid_to FROM local_in
                              EXCEPT ALL SELECT k, a, b, y, valid_from, valid_to FROM versions(p.dim)) x) AS missing,
       (SELECT count(*) FROM versions(p.dim) v WHERE v.is_current IS DISTINCT FROM (v.valid_to IS NULL)) AS bad_current
FROM pairs p ORDER BY p.dim;
-- every event remembered once per dimension, whatever the shape
SELECT p.dim, (SELECT count(*) FROM scd2.arrival_memory m
                WHERE m.dimension = ('citus_stream.' || p.dim)::regclass AND m.dropped_by IS NULL) AS remembered
FROM pairs p ORDER BY p.dim;

RESET search_path;
SET client_min_messages = warning;
DROP SCHEMA citus_stream CASCADE;
