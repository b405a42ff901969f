-- CALL scd2.apply_all: every registered dimension from its registered
-- staging table, for one scheduled job.  At top level it commits after
-- each dimension (a failing one leaves an error row and a WARNING, the
-- others load, and the call ends with an error naming the failures);
-- inside a transaction block it is atomic with the caller.
--
-- apply_all loads every dimension of the database, so this test runs in a
-- database of its own (the other tests' dimensions stay out of it).
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_apply_all_test;
CREATE DATABASE scd2_apply_all_test;
\c scd2_apply_all_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';
CREATE EXTENSION scd2;

-- Nothing registered: nothing to do.
CALL scd2.apply_all();

-- Three dimensions with default staging tables (one with unusual names),
-- one registered without a staging table.
CREATE SCHEMA "Sales Mart";
CREATE SCHEMA crm;
CREATE TABLE "Sales Mart"."Stg Product" ("SKU" text, price numeric);
CREATE TABLE crm.stg_customer (id int, city text);
CREATE TABLE crm.stg_store (id int, name text);
SELECT scd2.create_dimension('"Sales Mart"."Dim Product"', '"Sales Mart"."Stg Product"', ARRAY['SKU']);
SELECT scd2.create_dimension('crm.dim_customer', 'crm.stg_customer', ARRAY['id']);
SELECT scd2.create_dimension('crm.dim_store', 'crm.stg_store', ARRAY['id']);
CREATE TABLE crm.dim_region (id int, name text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('crm.dim_region', ARRAY['id']);
SELECT dimension, staging FROM scd2.dimensions ORDER BY dimension::text;

INSERT INTO "Sales Mart"."Stg Product" VALUES ('A-1', 9.99), ('B-2', 5);
INSERT INTO crm.stg_customer VALUES (1, 'Oslo'), (2, 'Rome');
INSERT INTO crm.stg_store VALUES (10, 'Main St'), (NULL, 'nameless');

-- Top level, one failing dimension: the others are loaded and committed,
-- the failure is a WARNING and an error row, the call ends in an error.
CALL scd2.apply_all('2024-01-01');
SELECT dimension, staging, status, effective_at, source_rows, inserted, message
  FROM scd2.audit_log ORDER BY run_id;
SELECT "SKU", price, valid_from, valid_to, is_current FROM "Sales Mart"."Dim Product" ORDER BY 1;
SELECT id, city, valid_from, is_current FROM crm.dim_customer ORDER BY 1;
SELECT count(*) AS store_rows FROM crm.dim_store;
-- One transaction per dimension.
SELECT count(DISTINCT txid) AS transactions FROM scd2.audit_log;

-- Fixed: every dimension loads.
DELETE FROM crm.stg_store WHERE id IS NULL;
UPDATE crm.stg_customer SET city = 'Milan' WHERE id = 2;
CALL scd2.apply_all('2024-02-01');
SELECT dimension, status, effective_at, inserted, new_versions, closed, unchanged
  FROM scd2.audit_log WHERE effective_at = '2024-02-01' ORDER BY run_id;
SELECT id, city, valid_from, valid_to, is_current FROM crm.dim_customer ORDER BY id, valid_from;

-- The default effective time is the call's, the same for every dimension
-- although each one commits on its own.
UPDATE crm.stg_customer SET city = 'Turin' WHERE id = 2;
CALL scd2.apply_all();
SELECT count(*) AS runs, count(DISTINCT effective_at) AS effective_times,
       count(DISTINCT txid) AS transactions
  FROM scd2.audit_log WHERE effective_at > '2024-02-01';
SELECT count(*) AS current_turin FROM crm.dim_customer WHERE city = 'Turin' AND is_current;

-- Inside a transaction block: atomic with the caller, no commits; rolled
-- back, the loads and their audit rows vanish.
SELECT max(run_id) AS before_block FROM scd2.audit_log \gset
BEGIN;
UPDATE crm.stg_customer SET city = 'Genoa' WHERE id = 2;
CALL scd2.apply_all('2030-01-01');
SELECT count(DISTINCT txid) AS transactions, count(*) AS runs
  FROM scd2.audit_log WHERE run_id > :before_block;
SELECT city FROM crm.dim_customer WHERE id = 2 AND is_current;
ROLLBACK;
SELECT city FROM crm.dim_customer WHERE id = 2 AND is_current;
SELECT count(*) AS runs_after_rollback FROM scd2.audit_log WHERE run_id > :before_block;

-- A failure inside a transaction block raises the load's own error (with a
-- CONTEXT line naming the dimension): the block keeps nothing.
BEGIN;
UPDATE crm.stg_customer SET city = 'Genoa' WHERE id = 2;
INSERT INTO crm.stg_store VALUES (NULL, 'again');
CALL scd2.apply_all('2030-01-01');
ROLLBACK;
SELECT count(*) AS runs_after_rollback FROM scd2.audit_log WHERE run_id > :before_block;

-- A DO block is an atomic context too.
DO $$
BEGIN
    CALL scd2.apply_all('2030-01-01');
END $$;

-- Called from a procedure called at top level, it still commits per
-- dimension (the chain of CALLs is non-atomic).
CREATE PROCEDURE public.nightly() LANGUAGE plpgsql AS $$
BEGIN
    CALL scd2.apply_all('2030-02-01');
END $$;
UPDATE crm.stg_customer SET city = 'Genoa' WHERE id = 2;
INSERT INTO crm.stg_store VALUES (NULL, 'again');
CALL public.nightly();
SELECT dimension, status, new_versions, message FROM scd2.audit_log
 WHERE effective_at = '2030-02-01' ORDER BY run_id;
SELECT count(DISTINCT txid) AS transactions FROM scd2.audit_log WHERE effective_at = '2030-02-01';
SELECT city FROM crm.dim_customer WHERE id = 2 AND is_current;

-- A dropped staging table is forgotten by the registry: skipped.
DELETE FROM crm.stg_store WHERE id IS NULL;
DROP TABLE "Sales Mart"."Stg Product";
CALL scd2.apply_all('2030-03-01');

-- NULL effective time.
CALL scd2.apply_all(NULL);

-- A role that cannot read the staging tables: every load fails with a
-- privilege error, and the error rows are still written (by the
-- extension, as its owner).
CREATE ROLE scd2_apply_all_user;
SET ROLE scd2_apply_all_user;
CALL scd2.apply_all('2030-04-01');
RESET ROLE;
SELECT dimension, status, username, message FROM scd2.audit_log
 WHERE effective_at = '2030-04-01' ORDER BY run_id;

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_apply_all_test;
DROP ROLE scd2_apply_all_user;
