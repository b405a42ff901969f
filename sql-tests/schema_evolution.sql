-- Schema evolution (issue 28): register's on_schema_change, checked at
-- every load under its lock.  ignore (the default) names the staging
-- columns it does not load; fail refuses any difference and writes
-- nothing; append_new_columns adds a new staging column to the dimension
-- (existing versions NULL, the current versions filled in place, no new
-- version for it); sync_all_columns also widens a column whose staging
-- type is wider, and refuses a narrower or incompatible one.  A column is
-- never dropped.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA se;
SET search_path = se, public;

-- the columns of a table with their types, compactly
CREATE FUNCTION cols(rel regclass) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
      FROM pg_attribute WHERE attrelid = rel AND attnum > 0 AND NOT attisdropped
$$;
CREATE FUNCTION last_audit(dim text)
RETURNS TABLE (status text, inserted bigint, new_versions bigint, closed bigint,
               type1_updated bigint, filled_in_place bigint, unchanged bigint, schema_change text)
LANGUAGE sql AS $$
    SELECT status, inserted, new_versions, closed, type1_updated, filled_in_place, unchanged, schema_change
      FROM scd2.audit_log WHERE dimension = dim ORDER BY run_id DESC LIMIT 1
$$;

------------------------------------------------------------------------------
-- The option: default ignore, the vocabulary checked.
------------------------------------------------------------------------------
CREATE TABLE dim (id int NOT NULL, city varchar(10), valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('dim', ARRAY['id']);
SELECT on_schema_change FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
SELECT scd2.register('dim', ARRAY['id'], on_schema_change => 'append');
SELECT scd2.register('dim', ARRAY['id'], on_schema_change => NULL);
SELECT on_schema_change FROM scd2.dimensions WHERE dimension = 'dim'::regclass;

CREATE TABLE stg0 (id int, city varchar(10));
INSERT INTO stg0 VALUES (1, 'Oslo'), (2, 'Rome'), (4, 'Lima');
CALL scd2.apply('stg0', 'dim', '2024-01-01', NULL) \gset
CREATE TABLE stg1 (id int, city varchar(10));
INSERT INTO stg1 VALUES (1, 'Bergen');
CALL scd2.apply('stg1', 'dim', '2024-02-01', NULL) \gset
SELECT scd2_test.state('dim') AS base \gset

------------------------------------------------------------------------------
-- ignore: the extra staging columns are not loaded, and named.
------------------------------------------------------------------------------
CREATE TABLE stg_wide (id int, city varchar(10), region text, batch_id int);
INSERT INTO stg_wide VALUES (1, 'Bergen', 'west', 7), (2, 'Milan', 'south', 7);
SET client_min_messages = notice;
CALL scd2.apply('stg_wide', 'dim', '2024-03-01', NULL) \gset
SET client_min_messages = warning;
SELECT * FROM last_audit('se.dim');
SELECT cols('dim');
-- a staging type that differs is not ignore's business: values are checked as ever
CREATE TABLE stg_long (id int, city text);
INSERT INTO stg_long VALUES (2, 'Milano centrale');
CALL scd2.apply('stg_long', 'dim', '2024-03-05', NULL) \gset
SELECT id, city, valid_from, valid_to FROM dim ORDER BY id, valid_from;

------------------------------------------------------------------------------
-- fail: any difference is refused, naming every differing column; nothing
-- is written.  (The effective and delete columns belong to staging.)
------------------------------------------------------------------------------
CREATE TABLE dimf (id int NOT NULL, city varchar(10), tier text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dimf', ARRAY['id'], effective_column => 'at', delete_column => 'gone',
                     on_schema_change => 'fail');
CREATE TABLE stgf (id int, city varchar(10), tier text, at timestamptz, gone boolean DEFAULT false);
INSERT INTO stgf VALUES (1, 'Oslo', 'gold', '2024-01-01');
CALL scd2.apply('stgf', 'dimf', now(), NULL) \gset
SELECT * FROM last_audit('se.dimf');
SELECT scd2_test.state('dimf') AS before \gset
-- a new column, a retyped one and a missing one, all named
CREATE TABLE stgf2 (id int, city text, region text, at timestamptz);
INSERT INTO stgf2 VALUES (1, 'Bergen', 'west', '2024-02-01');
SELECT count(*) FROM scd2.merge('stgf2', 'dimf');
SELECT count(*) FROM scd2.merge('stgf2', 'dimf', dry_run => true);
SELECT scd2_test.state('dimf') = :'before' AS nothing_written;
-- only a new column
ALTER TABLE stgf ADD COLUMN region text;
SELECT count(*) FROM scd2.merge('stgf', 'dimf');
SELECT scd2_test.state('dimf') = :'before' AS nothing_written;
SELECT cols('dimf');

------------------------------------------------------------------------------
-- append_new_columns, every column tracked: the column is added, existing
-- versions keep NULL, the current versions get the value in place (no new
-- version for it), a key that changed gets a new version with it.
------------------------------------------------------------------------------
SELECT scd2.register('dim', ARRAY['id'], on_schema_change => 'append_new_columns');
SELECT scd2_test.state('dim') AS before \gset
SELECT string_agg(format('%s %s %s %s', id, city, valid_from, valid_to), '; ' ORDER BY id, valid_from) AS rows_before_add FROM dim \gset
-- key 1 unchanged, 2 changed (Milano centrale -> Turin), 3 new, 4 absent
CREATE TABLE stg_add (id int, city varchar(10), region text);
INSERT INTO stg_add VALUES (1, 'Bergen', 'west'), (2, 'Turin', 'north'), (3, 'Paris', 'idf');
SET client_min_messages = notice;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_add', 'dim', '2024-04-01') ORDER BY 2, 3;
SET client_min_messages = warning;
SELECT * FROM last_audit('se.dim');
SELECT cols('dim');
SELECT id, city, region, valid_from, valid_to FROM dim ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim');
-- the registration: still every column tracked, region among them
SELECT tracked, type1, on_schema_change FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
-- the same batch again: nothing
CALL scd2.apply('stg_add', 'dim', '2024-04-02', NULL) \gset
SELECT * FROM last_audit('se.dim');
-- later changes of the new column version as usual
UPDATE stg_add SET region = 'fjords' WHERE id = 1;
CALL scd2.apply('stg_add', 'dim', '2024-05-01', NULL) \gset
SELECT * FROM last_audit('se.dim');
SELECT id, city, region, valid_from, valid_to FROM dim WHERE id = 1 ORDER BY valid_from;
-- under append_new_columns a wider staging type is not followed: a value
-- that does not fit is refused as ever
CREATE TABLE stg_add_long (id int, city text, region text);
INSERT INTO stg_add_long VALUES (3, 'Paris la Defense', 'idf');
SELECT scd2_test.state('dim') AS before \gset
SELECT count(*) FROM scd2.merge('stg_add_long', 'dim', '2024-05-02');
SELECT scd2_test.state('dim') = :'before' AS nothing_written;

-- revert of the load that added region: the column stays, the versions
-- are as before that load (region NULL again)
SELECT run_id AS add_run FROM scd2.audit_log WHERE dimension = 'se.dim' AND schema_change LIKE 'added%' \gset
SELECT max(run_id) AS prev_run FROM scd2.audit_log WHERE dimension = 'se.dim' AND status = 'success' AND run_id < :add_run \gset
SELECT scd2.rewind('dim', :prev_run);
SELECT cols('dim');
SELECT id, city, region, valid_from, valid_to FROM dim ORDER BY id, valid_from;
SELECT string_agg(format('%s %s %s %s', id, city, valid_from, valid_to), '; ' ORDER BY id, valid_from) = :'rows_before_add' AS rows_as_before_the_add,
       count(region) AS regions FROM dim;
-- loading the batch again: the column exists now, an ordinary tracked
-- column (only the load that adds a column fills it in place), so key 1's
-- NULL -> 'west' is a new version; key 2 changed, key 3 is new
CALL scd2.apply('stg_add', 'dim', '2024-06-01', NULL) \gset
SELECT * FROM last_audit('se.dim');

------------------------------------------------------------------------------
-- append_new_columns with an explicit tracked list: the new column is
-- copied (a change of it alone opens no version), and filled in place.
------------------------------------------------------------------------------
CREATE TABLE dimc (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dimc', ARRAY['id'], tracked => ARRAY['city'], on_schema_change => 'append_new_columns');
CREATE TABLE stgc (id int, city text);
INSERT INTO stgc VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stgc', 'dimc', '2024-01-01', NULL) \gset
ALTER TABLE stgc ADD COLUMN phone text;
UPDATE stgc SET phone = '+47' WHERE id = 1;
CALL scd2.apply('stgc', 'dimc', '2024-02-01', NULL) \gset
SELECT * FROM last_audit('se.dimc');
SELECT id, city, phone, valid_from, valid_to FROM dimc ORDER BY id, valid_from;
UPDATE stgc SET phone = '+39' WHERE id = 2;
CALL scd2.apply('stgc', 'dimc', '2024-03-01', NULL) \gset
SELECT * FROM last_audit('se.dimc');
SELECT tracked FROM scd2.dimensions WHERE dimension = 'dimc'::regclass;
-- as known before the load that added phone, key 1 had none (the
-- change log keeps the NULL it replaced); as it is, +47
SELECT started_at AS before_phone FROM scd2.audit_log WHERE dimension = 'se.dimc' AND schema_change LIKE 'added%' \gset
SELECT id, phone FROM scd2.dimension_at(NULL::dimc, '2024-02-15', :'before_phone') ORDER BY id;
SELECT id, phone FROM scd2.dimension_at(NULL::dimc, '2024-02-15') ORDER BY id;
-- a key with several rows in the load that adds a column (the general path)
CREATE TABLE dimg (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('dimg', ARRAY['id'], effective_column => 'at', on_schema_change => 'append_new_columns');
CREATE TABLE stgg (id int, city text, at timestamptz);
INSERT INTO stgg VALUES (1, 'Oslo', '2024-01-01'), (2, 'Rome', '2024-01-01');
CALL scd2.apply('stgg', 'dimg', now(), NULL) \gset
ALTER TABLE stgg ADD COLUMN region text;
TRUNCATE stgg;
INSERT INTO stgg VALUES (1, 'Oslo', '2024-02-01', 'east'), (1, 'Bergen', '2024-03-01', 'west'),
                        (2, 'Rome', '2024-02-01', 'lazio');
CALL scd2.apply('stgg', 'dimg', now(), NULL) \gset
SELECT * FROM last_audit('se.dimg');
SELECT id, city, region, valid_from, valid_to FROM dimg ORDER BY id, valid_from;
SELECT scd2_test.invariants('dimg');

-- the first load of an empty dimension adds the column too
CREATE TABLE dim0 (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim0', ARRAY['id'], on_schema_change => 'append_new_columns');
CREATE TABLE stg0b (id int, city text, since date);
INSERT INTO stg0b VALUES (1, 'Oslo', '2020-01-01'), (2, 'Rome', NULL);
CALL scd2.apply('stg0b', 'dim0', '2024-01-01', NULL) \gset
SELECT * FROM last_audit('se.dim0');
SELECT id, city, since, valid_from, valid_to FROM dim0 ORDER BY id;
-- a dry run says what it would add and adds nothing
ALTER TABLE stg0b ADD COLUMN tier text;
SELECT scd2_test.state('dim0') AS before \gset
SET client_min_messages = notice;
SELECT count(*) FROM scd2.merge('stg0b', 'dim0', '2024-02-01', dry_run => true);
SET client_min_messages = warning;
SELECT cols('dim0');

------------------------------------------------------------------------------
-- sync_all_columns: widenings widen the dimension; the indexes, no_overlap
-- and the registered shape follow; asof works on the widened key.
------------------------------------------------------------------------------
CREATE EXTENSION IF NOT EXISTS btree_gist;
CREATE TABLE dimw (id int NOT NULL, sk bigint GENERATED ALWAYS AS IDENTITY, name varchar(10),
                   price numeric(6,2), seen timestamp,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('dimw', ARRAY['id'], no_overlap => true, on_schema_change => 'sync_all_columns');
CREATE TABLE stgw (id int, name varchar(10), price numeric(6,2), seen timestamp);
INSERT INTO stgw VALUES (1, 'ab', 1.50, '2024-01-01 10:00'), (2, 'cd', 2.50, '2024-01-01 11:00');
CALL scd2.apply('stgw', 'dimw', '2024-01-01', NULL) \gset
UPDATE stgw SET name = 'abc' WHERE id = 1;
CALL scd2.apply('stgw', 'dimw', '2024-02-01', NULL) \gset
SELECT shape_columns, shape_types FROM scd2.dimensions WHERE dimension = 'dimw'::regclass;
-- the source widened every column; key 3 needs the widths
DROP TABLE stgw;
CREATE TABLE stgw (id bigint, name text, price numeric(12,2), seen timestamptz);
INSERT INTO stgw VALUES (1, 'abc', 1.50, '2024-01-01 10:00+00'), (2, 'a much longer name', 2.50, '2024-01-01 11:00+00'),
                        (5000000000, 'big', 1234567.89, '2024-03-01 00:00+00');
SET client_min_messages = notice;
CALL scd2.apply('stgw', 'dimw', '2024-03-01', NULL) \gset
SET client_min_messages = warning;
SELECT * FROM last_audit('se.dimw');
SELECT cols('dimw');
SELECT id, name, price, seen, valid_from, valid_to FROM dimw ORDER BY id, valid_from;
SELECT shape_columns, shape_types FROM scd2.dimensions WHERE dimension = 'dimw'::regclass;
SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisvalid
  FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE i.indrelid = 'dimw'::regclass ORDER BY 1;
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'dimw'::regclass AND contype = 'x';
-- asof on the widened key, and the exclusion constraint still holds
SELECT scd2.asof('dimw', '2024-01-15', 1) AS sk1_jan, scd2.asof('dimw', '2024-02-15', 1) AS sk1_feb,
       scd2.asof('dimw', '2024-03-15', 5000000000::bigint) AS sk_big, scd2.asof('dimw', '2024-01-15', 5000000000::bigint) AS sk_big_jan;
INSERT INTO dimw (id, name, valid_from, valid_to) VALUES (2, 'overlap', '2024-01-15', '2024-01-20');
SELECT scd2_test.invariants('dimw');
-- the same batch again: nothing; no spurious versions
CALL scd2.apply('stgw', 'dimw', '2024-03-02', NULL) \gset
SELECT * FROM last_audit('se.dimw');
SELECT count(*) AS versions FROM dimw;
-- revert the widening load: the rows as before, the columns stay wide
SELECT max(run_id) AS widen_run FROM scd2.audit_log WHERE dimension = 'se.dimw' AND schema_change LIKE 'widened%' \gset
SELECT max(run_id) AS prev_run FROM scd2.audit_log WHERE dimension = 'se.dimw' AND status = 'success' AND run_id < :widen_run \gset
SELECT scd2.rewind('dimw', :prev_run);
SELECT id, name, price, valid_from, valid_to FROM dimw ORDER BY id, valid_from;
SELECT cols('dimw');

-- refusals: narrowing, another type, another scale, timestamp outside UTC;
-- each names the column and both types, and writes nothing
SELECT scd2_test.state('dimw') AS before \gset
CREATE TABLE stgn (id bigint, name varchar(5), price numeric(12,2), seen timestamptz);
INSERT INTO stgn VALUES (1, 'abc', 1.50, '2024-01-01 10:00+00');
SELECT count(*) FROM scd2.merge('stgn', 'dimw', '2024-04-01');
CREATE TABLE stgi (id bigint, name text, price text, seen timestamptz);
INSERT INTO stgi VALUES (1, 'abc', '1.50', '2024-01-01 10:00+00');
SELECT count(*) FROM scd2.merge('stgi', 'dimw', '2024-04-01');
CREATE TABLE stgs (id bigint, name text, price numeric(14,4), seen timestamptz);
INSERT INTO stgs VALUES (1, 'abc', 1.50, '2024-01-01 10:00+00');
SELECT count(*) FROM scd2.merge('stgs', 'dimw', '2024-04-01');
CREATE TABLE stgb (id int, name text, price numeric(12,2), seen timestamptz);
INSERT INTO stgb VALUES (1, 'abc', 1.50, '2024-01-01 10:00+00');
SELECT count(*) FROM scd2.merge('stgb', 'dimw', '2024-04-01');
SELECT scd2_test.state('dimw') = :'before' AS nothing_written;
CREATE TABLE dimt (id int NOT NULL, seen timestamp, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dimt', ARRAY['id'], on_schema_change => 'sync_all_columns');
CREATE TABLE stgt (id int, seen timestamp);
INSERT INTO stgt VALUES (1, '2024-01-01 10:00');
CALL scd2.apply('stgt', 'dimt', '2024-01-01', NULL) \gset
ALTER TABLE stgt ALTER COLUMN seen TYPE timestamptz;
SELECT scd2_test.state('dimt') AS before \gset
SET TimeZone = 'Europe/Oslo';
SELECT count(*) FROM scd2.merge('stgt', 'dimt', '2024-02-01');
SET TimeZone = 'UTC';
SELECT scd2_test.state('dimt') = :'before' AS nothing_written;
CALL scd2.apply('stgt', 'dimt', '2024-02-01', NULL) \gset
SELECT * FROM last_audit('se.dimt');
SELECT id, seen, valid_from, valid_to FROM dimt;

-- a column gone from staging: missing_columns decides (refused by
-- default), and sync_all_columns never drops it
CREATE TABLE stgm (id bigint, name text, seen timestamptz);
INSERT INTO stgm VALUES (1, 'abcd', '2024-01-01 10:00+00');
SELECT scd2_test.state('dimw') AS before \gset
SELECT count(*) FROM scd2.merge('stgm', 'dimw', '2024-04-01');
SELECT scd2_test.state('dimw') = :'before' AS nothing_written;
SELECT scd2.register('dimw', ARRAY['id'], no_overlap => true, on_schema_change => 'sync_all_columns',
                     missing_columns => 'carry_forward');
CALL scd2.apply('stgm', 'dimw', '2024-04-01', NULL) \gset
SELECT * FROM last_audit('se.dimw');
SELECT id, name, price, valid_from, valid_to FROM dimw WHERE id = 1 ORDER BY valid_from;
SELECT cols('dimw');

-- apply_snapshots: its snapshot column belongs to staging (never added);
-- the first extract's load adds the new column and fills it in place, the
-- second versions a change as usual
CREATE TABLE dimx (id int NOT NULL, city text, valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('dimx', ARRAY['id'], mode => 'snapshot', on_schema_change => 'append_new_columns');
CREATE TABLE stgx0 (id int, city text);
INSERT INTO stgx0 VALUES (1, 'Oslo'), (2, 'Rome');
CALL scd2.apply('stgx0', 'dimx', '2024-01-01', NULL) \gset
CREATE TABLE stgx_hist (id int, city text, region text, extract_at timestamptz);
INSERT INTO stgx_hist VALUES (1, 'Oslo', 'north', '2024-02-01'), (2, 'Rome', 'south', '2024-02-01'),
                             (1, 'Bergen', 'west', '2024-03-01'), (2, 'Rome', 'south', '2024-03-01');
CALL scd2.apply_snapshots('stgx_hist', 'dimx', 'extract_at');
SELECT cols('dimx');
SELECT id, city, region, valid_from, valid_to FROM dimx ORDER BY id, valid_from;
SELECT filled_in_place, new_versions, closed, unchanged, schema_change FROM scd2.audit_log
 WHERE dimension = 'se.dimx' ORDER BY run_id;

------------------------------------------------------------------------------
-- dimension_at and the audit row after the shape changed
------------------------------------------------------------------------------
SELECT id, city, region FROM scd2.dimension_at(NULL::dim, '2024-04-15') ORDER BY id;
SELECT dimension, status, schema_change FROM scd2.audit_log WHERE schema_change IS NOT NULL AND dimension LIKE 'se.%' ORDER BY run_id;

-- A dimension owned by another role, loaded by a third: the column is
-- added, and widened (a rewrite, which rebuilds the owner's expression
-- index), as the dimension's owner in a security-restricted operation.
CREATE ROLE se_owner;
CREATE ROLE se_loader;
GRANT USAGE ON SCHEMA se TO se_owner, se_loader;
GRANT CREATE ON SCHEMA se TO se_owner;
CREATE TABLE probe_log (what text, who name, restricted boolean);
GRANT INSERT ON probe_log TO PUBLIC;
CREATE FUNCTION probe(what text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
    v_restricted boolean;
BEGIN
    BEGIN
        PERFORM pg_catalog.set_config('role', 'none', true);
        RAISE EXCEPTION 'undo';
    EXCEPTION WHEN OTHERS THEN
        v_restricted := SQLERRM LIKE '%security-restricted operation%';
    END;
    INSERT INTO se.probe_log VALUES (what, current_user, v_restricted);
    RETURN true;
END $$;
CREATE FUNCTION probe_imm(what text, v text) RETURNS text LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN PERFORM se.probe(what); RETURN v; END $$;
CREATE TABLE dimo (id int NOT NULL, city text, n int CHECK (se.probe('check')),
                   valid_from timestamptz NOT NULL, valid_to timestamptz);
CREATE INDEX dimo_probe ON dimo ((se.probe_imm('index', city)));
ALTER TABLE dimo OWNER TO se_owner;
SET ROLE se_owner;
SELECT scd2.register('dimo', ARRAY['id'], on_schema_change => 'sync_all_columns');
RESET ROLE;
CREATE TABLE stgo (id int, city text, n int);
INSERT INTO stgo VALUES (1, 'Oslo', 1), (2, 'Rome', 2);
GRANT SELECT ON stgo TO se_owner, se_loader;
GRANT SELECT, INSERT, UPDATE ON dimo TO se_loader;
SET ROLE se_loader;
CALL scd2.apply('stgo', 'dimo', '2024-01-01', NULL) \gset
RESET ROLE;
-- widened, nothing else: the rewrite rebuilt the owner's index, as the
-- owner, restricted (the load itself writes nothing)
TRUNCATE probe_log;
ALTER TABLE stgo ALTER COLUMN n TYPE bigint;
SET ROLE se_loader;
CALL scd2.apply('stgo', 'dimo', '2024-02-01', NULL) \gset
RESET ROLE;
SELECT * FROM last_audit('se.dimo');
SELECT what, who, restricted, count(*) FROM probe_log GROUP BY 1, 2, 3 ORDER BY 1;
-- a new column: added, and filled in place (the update checks the owner's
-- constraint), as the owner, restricted
TRUNCATE probe_log;
ALTER TABLE stgo ADD COLUMN zone text;
UPDATE stgo SET zone = 'cet';
SET ROLE se_loader;
CALL scd2.apply('stgo', 'dimo', '2024-03-01', NULL) \gset
RESET ROLE;
SELECT * FROM last_audit('se.dimo');
SELECT cols('dimo'), pg_get_userbyid(relowner) FROM pg_class WHERE oid = 'dimo'::regclass;
SELECT what, who, restricted, count(*) FROM probe_log GROUP BY 1, 2, 3 ORDER BY 1;
DROP TABLE dimo;
REVOKE ALL ON SCHEMA se FROM se_owner, se_loader;
REVOKE ALL ON stgo FROM se_owner, se_loader;
REVOKE ALL ON probe_log FROM PUBLIC;
DROP ROLE se_owner;
DROP ROLE se_loader;
