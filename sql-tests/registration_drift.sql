-- Registrations that stay true (issue 17): a dimension altered after
-- register is refused until registered again (class 6); registering again
-- leaves exactly the indexes the new registration needs (class 7); index
-- names are chosen the way PostgreSQL chooses them and indexes are found
-- by definition (class 8); temporary tables are refused (class 9).  Every
-- refusal is checked for its error text and for having written nothing.
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA regn;
SET search_path = regn, public;
SET client_min_messages = notice;
-- Errors with their DETAIL and HINT; CONTEXT lines (line numbers inside
-- scd2.register) are left out.
\set SHOW_CONTEXT never

-- What a refused operation must leave alone: the dimension's rows, the
-- audit log and the registry row.
CREATE FUNCTION regn.state(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''empty'') FROM %s t', dim)
       INTO v;
    RETURN v || ' audit ' || (SELECT count(*) || '/' || coalesce(max(run_id), 0) FROM scd2.audit_log)
             || ' registry ' || coalesce((SELECT md5(d::text) FROM scd2.dimensions d WHERE d.dimension = dim), 'none');
END $$;

CREATE FUNCTION regn.rows(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v text;
BEGIN
    EXECUTE format('SELECT coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), ''empty'') FROM %s t', dim)
       INTO v;
    RETURN v;
END $$;

-- The indexes of a table, by definition.
CREATE FUNCTION regn.indexes(rel regclass) RETURNS TABLE (index_name name, definition text)
LANGUAGE sql AS $$
    SELECT c.relname, regexp_replace(pg_get_indexdef(i.indexrelid), '^CREATE (UNIQUE )?INDEX \S+ ', 'CREATE \1INDEX ')
      FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
     WHERE i.indrelid = rel ORDER BY 2, 1
$$;

------------------------------------------------------------------------------
-- Class 9: temporary tables.
------------------------------------------------------------------------------
CREATE TEMP TABLE tmp_dim (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('tmp_dim', ARRAY['id']);
SELECT count(*) AS registered FROM scd2.dimensions WHERE dimension = 'tmp_dim'::regclass;
SELECT count(*) AS indexes FROM pg_index WHERE indrelid = 'tmp_dim'::regclass;
-- create_dimension into pg_temp: refused, and no table is left behind.
CREATE TABLE stg9 (id int, city text);
SELECT scd2.create_dimension('pg_temp.tmp_dim2', 'stg9', ARRAY['id']);
SELECT to_regclass('pg_temp.tmp_dim2') IS NULL AS no_table;

-- A temporary default staging table would be gone (or another session's)
-- when apply_all runs: refused; a permanent one is fine, and a temporary
-- staging table can still be loaded with scd2.apply.
CREATE TABLE dim9 (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TEMP TABLE tmp_stg (id int, city text);
SELECT scd2.register('dim9', ARRAY['id'], staging => 'tmp_stg');
SELECT count(*) AS registered FROM scd2.dimensions WHERE dimension = 'dim9'::regclass;
SELECT scd2.register('dim9', ARRAY['id'], staging => 'stg9');
SELECT regn.state('dim9') AS before \gset
SELECT scd2.register('dim9', ARRAY['id'], staging => 'tmp_stg');
SELECT regn.state('dim9') = :'before' AS unchanged, staging FROM scd2.dimensions WHERE dimension = 'dim9'::regclass;
-- create_dimension from a temporary staging table takes its shape and
-- registers no default staging table.
SELECT scd2.create_dimension('dim9b', 'tmp_stg', ARRAY['id']);
SELECT staging IS NULL AS no_default_staging FROM scd2.dimensions WHERE dimension = 'dim9b'::regclass;
INSERT INTO tmp_stg VALUES (1, 'Oslo');
CALL scd2.apply('tmp_stg', 'dim9', '2024-01-01', NULL) \gset
SELECT id, city, valid_from, valid_to FROM dim9;

------------------------------------------------------------------------------
-- Class 6: a dimension altered after register.
------------------------------------------------------------------------------
CREATE TABLE dim6 (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_current boolean NOT NULL DEFAULT true);
CREATE TABLE stg6 (id int, city text);
SELECT scd2.register('dim6', ARRAY['id']);
SELECT shape_columns, shape_types, shape_typmods FROM scd2.dimensions WHERE dimension = 'dim6'::regclass;
INSERT INTO stg6 VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stg6', 'dim6', '2024-01-01 10:00', NULL) \gset
UPDATE stg6 SET city = 'Milan' WHERE id = 2;

-- valid_to turned into a date: a load would cut history to midnight.
ALTER TABLE dim6 ALTER valid_to TYPE date;
SELECT regn.state('dim6') AS before \gset
SELECT * FROM scd2.merge('stg6', 'dim6', '2024-02-01 10:30');
SELECT scd2.asof('dim6', '2024-01-15', 1);
SELECT regn.state('dim6') = :'before' AS unchanged;
-- CALL at top level: the same refusal, recorded as an error row (and
-- nothing else written).
SELECT regn.rows('dim6') AS before \gset
CALL scd2.apply('stg6', 'dim6', '2024-02-01 10:30', NULL) \gset
SELECT status, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT regn.rows('dim6') = :'before' AS rows_unchanged;
-- register checks the new shape (and refuses it here); changed back, the
-- registration holds again.
SELECT scd2.register('dim6', ARRAY['id']);
ALTER TABLE dim6 ALTER valid_to TYPE timestamptz;
SELECT count(*) AS loaded_rows FROM scd2.merge('stg6', 'dim6', '2024-02-01 10:30');

-- The business key retyped: refused until registered again.
ALTER TABLE dim6 ALTER id TYPE bigint;
SELECT regn.state('dim6') AS before \gset
SELECT * FROM scd2.merge('stg6', 'dim6', '2024-03-01');
SELECT scd2.asof('dim6', '2024-01-15', 1::bigint);
SELECT regn.state('dim6') = :'before' AS unchanged;
SELECT scd2.register('dim6', ARRAY['id']);
SELECT shape_types FROM scd2.dimensions WHERE dimension = 'dim6'::regclass;
SELECT scd2.asof('dim6', '2024-01-15', 1::bigint) AS sk_of_1;

-- The surrogate key retyped.
ALTER TABLE dim6 ALTER sk TYPE integer;
SELECT regn.state('dim6') AS before \gset
SELECT * FROM scd2.merge('stg6', 'dim6', '2024-03-01');
SELECT scd2.asof('dim6', '2024-01-15', 1::bigint);
SELECT regn.state('dim6') = :'before' AS unchanged;
SELECT scd2.register('dim6', ARRAY['id']);

-- A key column dropped.
CREATE TABLE dim6b (id int NOT NULL, region text, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE TABLE stg6b (id int, region text, city text);
SELECT scd2.register('dim6b', ARRAY['id', 'region']);
INSERT INTO stg6b VALUES (1, 'north', 'Oslo');
SELECT count(*) FROM scd2.merge('stg6b', 'dim6b', '2024-01-01');
ALTER TABLE dim6b DROP COLUMN region;
SELECT regn.state('dim6b') AS before \gset
SELECT * FROM scd2.merge('stg6b', 'dim6b', '2024-02-01');
SELECT regn.state('dim6b') = :'before' AS unchanged;

------------------------------------------------------------------------------
-- Class 7: registering again leaves the indexes of the new registration.
------------------------------------------------------------------------------
CREATE TABLE dim7 (sk bigint GENERATED ALWAYS AS IDENTITY, region text NOT NULL, id int NOT NULL,
                   city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_current boolean NOT NULL DEFAULT true);
CREATE TABLE stg7 (region text, id int, city text);
-- An index of the user's own, and one the user made that is exactly what
-- scd2 needs for the second registration: both are never dropped.
CREATE INDEX dim7_city ON dim7 (city);
CREATE UNIQUE INDEX dim7_mine ON dim7 (region, id, valid_from) INCLUDE (sk, valid_to);
SELECT scd2.register('dim7', ARRAY['id']);
SELECT * FROM regn.indexes('dim7');
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim7'::regclass;

-- A finer key: the old unique indexes on id alone would refuse one id in
-- two regions.  They are replaced; the user's fitting index serves as the
-- as-of index.
SELECT scd2.register('dim7', ARRAY['region', 'id']);
SELECT * FROM regn.indexes('dim7');
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim7'::regclass;
INSERT INTO stg7 VALUES ('north', 1, 'Oslo'), ('south', 1, 'Rome');
CALL scd2.apply('stg7', 'dim7', '2024-01-01', NULL) \gset
SELECT region, id, city, valid_to FROM dim7 ORDER BY region, id;
SELECT scd2.asof('dim7', '2024-06-01', 'south', 1) = (SELECT sk FROM dim7 WHERE region = 'south') AS asof_ok;

-- Another current-row convention: the current-row index follows it.
UPDATE dim7 SET valid_to = 'infinity' WHERE valid_to IS NULL;
SELECT scd2.register('dim7', ARRAY['region', 'id'], current_valid_to => 'infinity');
SELECT * FROM regn.indexes('dim7');
UPDATE stg7 SET city = 'Bergen' WHERE region = 'north';
CALL scd2.apply('stg7', 'dim7', '2024-02-01', NULL) \gset
SELECT region, id, city, valid_from, valid_to FROM dim7 ORDER BY region, id, valid_from;

-- Registering the same way again changes nothing.
SELECT scd2.register('dim7', ARRAY['region', 'id'], current_valid_to => 'infinity');
SELECT * FROM regn.indexes('dim7');

-- create_indexes => false: nothing is created, and scd2's indexes that no
-- longer fit are dropped all the same (the ones that fit stay).
SELECT scd2.register('dim7', ARRAY['region', 'id'], create_indexes => false);
SELECT * FROM regn.indexes('dim7');
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim7'::regclass;

------------------------------------------------------------------------------
-- Class 8: index names.
------------------------------------------------------------------------------
-- A 60-character table name: cut at 63 bytes, "<name>_scd2_current" and
-- "<name>_scd2_asof" were the same name, and the second index was silently
-- not created.
CREATE TABLE "dimension_with_a_rather_long_name_for_the_customer_accounts_" (
    id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('"dimension_with_a_rather_long_name_for_the_customer_accounts_"', ARRAY['id']);
SELECT index_name, octet_length(index_name) AS bytes, definition
  FROM regn.indexes('"dimension_with_a_rather_long_name_for_the_customer_accounts_"');
-- One current row per key is enforced.
INSERT INTO "dimension_with_a_rather_long_name_for_the_customer_accounts_"
VALUES (1, 'Oslo', '2024-01-01', NULL), (1, 'Rome', '2024-02-01', NULL);

-- Multibyte names are cut at a character boundary.
CREATE TABLE "dimensión_de_los_clientes_ñandú_ñandú_ñandú_ñandú" (
    id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('"dimensión_de_los_clientes_ñandú_ñandú_ñandú_ñandú"', ARRAY['id']);
SELECT index_name, octet_length(index_name) AS bytes
  FROM regn.indexes('"dimensión_de_los_clientes_ñandú_ñandú_ñandú_ñandú"');

-- A name already taken by something else (here an unrelated index that
-- is not unique): another name is chosen, nothing is skipped.
CREATE TABLE dim8 (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE INDEX dim8_scd2_current ON dim8 (city);
CREATE TABLE dim8_scd2_asof (x int);
SELECT scd2.register('dim8', ARRAY['id']);
SELECT * FROM regn.indexes('dim8');
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim8'::regclass;

-- Re-registration finds scd2's indexes by definition after a rename.
ALTER INDEX dim8_scd2_current1 RENAME TO dim8_current_by_key;
SELECT scd2.register('dim8', ARRAY['id']);
SELECT * FROM regn.indexes('dim8');
SELECT created_indexes FROM scd2.dimensions WHERE dimension = 'dim8'::regclass;

RESET search_path;
