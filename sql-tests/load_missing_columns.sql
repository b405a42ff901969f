-- A staging table that lacks a column of the dimension (issue 22, finding
-- 6): by default the load is refused, naming the columns, and writes
-- nothing; missing_columns => 'carry_forward' gives new versions the
-- current version's value instead (a partial extract).  A column with a
-- default (or identity, generated) is filled by it and never missing.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA mc;
SET search_path = mc, public;

CREATE TABLE dim (id int NOT NULL, city text, tier text, note text,
                  loaded_at timestamptz DEFAULT '2000-01-01',
                  valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim', ARRAY['id']);
SELECT missing_columns FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
CREATE TABLE stg_full (id int, city text, tier text, note text);
INSERT INTO stg_full VALUES (1, 'Oslo', 'gold', 'n1'), (2, 'Rome', 'silver', 'n2');
SELECT count(*) FROM scd2.merge('stg_full', 'dim', '2024-01-01');

-- The extract lost tier and note upstream; city changes.  Refused.
CREATE TABLE stg_lost (id int, city text);
INSERT INTO stg_lost VALUES (1, 'Bergen'), (3, 'Lima');
SELECT scd2_test.state('dim') AS before \gset
SELECT count(*) FROM scd2.merge('stg_lost', 'dim', '2024-02-01');
SELECT scd2_test.state('dim') = :'before' AS nothing_written;
-- a dry run: the same
SELECT count(*) FROM scd2.merge('stg_lost', 'dim', '2024-02-01', dry_run => true);

-- Explicit tracked columns: a copied column the staging table lacks is
-- refused too (a tracked or Type 1 column already was).
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city']);
CREATE TABLE stg_nonote (id int, city text, tier text);
INSERT INTO stg_nonote VALUES (1, 'Bergen', 'gold');
SELECT count(*) FROM scd2.merge('stg_nonote', 'dim', '2024-02-01');
SELECT scd2.register('dim', ARRAY['id'], tracked => ARRAY['city'], type1 => ARRAY['note']);
SELECT count(*) FROM scd2.merge('stg_nonote', 'dim', '2024-02-01');
SELECT scd2_test.state('dim') = :'before' AS nothing_written;

-- An invalid setting.
SELECT scd2.register('dim', ARRAY['id'], missing_columns => 'ignore');
SELECT scd2.register('dim', ARRAY['id'], missing_columns => NULL);

-- carry_forward: the new versions keep the current version's tier and
-- note; a new key has them NULL; loaded_at takes its default.
SELECT scd2.register('dim', ARRAY['id'], missing_columns => 'carry_forward');
SELECT missing_columns FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('stg_lost', 'dim', '2024-02-01') ORDER BY 2, 3;
SELECT id, city, tier, note, loaded_at, valid_from, valid_to FROM dim ORDER BY id, valid_from;
-- several rows of one key in one batch (the general path): each carries
-- the current version's values
CREATE TABLE stg_lost_eff (id int, city text, at timestamptz);
INSERT INTO stg_lost_eff VALUES (2, 'Milan', '2024-03-01'), (2, 'Turin', '2024-04-01');
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', missing_columns => 'carry_forward');
SELECT count(*) FROM scd2.merge('stg_lost_eff', 'dim');
SELECT id, city, tier, note, valid_from, valid_to FROM dim WHERE id = 2 ORDER BY valid_from;

-- carry_forward with registered tracked and Type 1 columns the staging
-- table lacks: carried, neither compared nor overwritten.
CREATE TABLE dim2 (id int NOT NULL, city text, tier text, phone text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
SELECT scd2.register('dim2', ARRAY['id'], tracked => ARRAY['city', 'tier'], type1 => ARRAY['phone'],
                     is_current_column => 'is_current', missing_columns => 'carry_forward');
CREATE TABLE stg2 (id int, city text, tier text, phone text);
INSERT INTO stg2 VALUES (1, 'Oslo', 'gold', '111');
SELECT count(*) FROM scd2.merge('stg2', 'dim2', '2024-01-01');
CREATE TABLE stg2_part (id bigint, city text);
INSERT INTO stg2_part VALUES (1, 'Bergen');
SELECT action, business_key, valid_from FROM scd2.merge('stg2_part', 'dim2', '2024-02-01') ORDER BY 2, 3;
SELECT id, city, tier, phone, valid_from, valid_to FROM dim2 ORDER BY id, valid_from;
-- unchanged city: nothing to do (the carried columns are not compared)
SELECT count(*) FROM scd2.merge('stg2_part', 'dim2', '2024-03-01');
SELECT scd2_test.invariants('dim2');

-- Only the dimension's owner may set it (the internal store function
-- checks, as register's others do).
CREATE ROLE regress_mc_other;
GRANT USAGE ON SCHEMA mc TO regress_mc_other;
SET ROLE regress_mc_other;
SELECT scd2._registry_store_missing_columns('mc.dim', 'error');
RESET ROLE;
SELECT missing_columns FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
DROP OWNED BY regress_mc_other;
DROP ROLE regress_mc_other;

-- carry_forward covers every column kind, under every detect: a copied
-- column (here the dimension's column named like the effective column,
-- dbt's updated_at, which is never tracked) beside a column the staging
-- table lacks.  Each detect value: refused with 'error' (nothing written),
-- carried with 'carry_forward'.
CREATE TABLE cdim_values (id int NOT NULL, name text, city text, updated_at timestamptz,
                          valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean);
CREATE TABLE cdim_timestamp (LIKE cdim_values);
CREATE TABLE cstg (id int, name text, city text, updated_at timestamptz);
INSERT INTO cstg VALUES (1, 'Ann', 'Oslo', '2024-01-01'), (2, 'Bob', 'Rome', '2024-01-01');
CREATE TABLE cstg_noname (id int, city text, updated_at timestamptz);
INSERT INTO cstg_noname VALUES (1, 'Bergen', '2024-02-01'), (3, 'Lima', '2024-02-01');
DO $$
DECLARE
    d text;
BEGIN
    FOREACH d IN ARRAY ARRAY['values', 'timestamp'] LOOP
        PERFORM scd2.register(format('cdim_%s', d), ARRAY['id'], effective_column => 'updated_at', detect => d,
                              is_current_column => 'is_current');
        PERFORM count(*) FROM scd2.merge('cstg', format('cdim_%s', d)::regclass);
    END LOOP;
END $$;
SELECT dimension, detect, missing_columns FROM scd2.dimensions
 WHERE dimension IN ('cdim_values'::regclass, 'cdim_timestamp'::regclass) ORDER BY 1;
SELECT scd2_test.state('cdim_values') AS before_values \gset
SELECT scd2_test.state('cdim_timestamp') AS before_timestamp \gset
SELECT count(*) FROM scd2.merge('cstg_noname', 'cdim_values');
SELECT count(*) FROM scd2.merge('cstg_noname', 'cdim_timestamp');
SELECT scd2_test.state('cdim_values') = :'before_values' AS nothing_written_values,
       scd2_test.state('cdim_timestamp') = :'before_timestamp' AS nothing_written_timestamp;
SELECT scd2.register('cdim_values', ARRAY['id'], effective_column => 'updated_at', detect => 'values',
                     is_current_column => 'is_current', missing_columns => 'carry_forward');
SELECT scd2.register('cdim_timestamp', ARRAY['id'], effective_column => 'updated_at', detect => 'timestamp',
                     is_current_column => 'is_current', missing_columns => 'carry_forward');
SELECT action, business_key, valid_from FROM scd2.merge('cstg_noname', 'cdim_values') ORDER BY 2, 3;
SELECT action, business_key, valid_from FROM scd2.merge('cstg_noname', 'cdim_timestamp') ORDER BY 2, 3;
SELECT 'values' AS detect, * FROM cdim_values UNION ALL SELECT 'timestamp', * FROM cdim_timestamp
 ORDER BY 1, 2, valid_from;
SELECT scd2_test.invariants('cdim_values'), scd2_test.invariants('cdim_timestamp');
-- a copied column registered through tracked (the others copied), under timestamp
CREATE TABLE cdim_tracked (LIKE cdim_values);
SELECT scd2.register('cdim_tracked', ARRAY['id'], tracked => ARRAY['city'], effective_column => 'updated_at',
                     detect => 'timestamp', is_current_column => 'is_current', missing_columns => 'carry_forward');
SELECT count(*) FROM scd2.merge('cstg', 'cdim_tracked');
SELECT action, business_key, valid_from FROM scd2.merge('cstg_noname', 'cdim_tracked') ORDER BY 2, 3;
SELECT id, name, city, updated_at, valid_from, valid_to FROM cdim_tracked ORDER BY id, valid_from;
SELECT scd2_test.invariants('cdim_tracked');
