-- no_overlap: register(..., no_overlap => true) adds an exclusion
-- constraint so that no two versions of one key ever overlap, whoever
-- writes the table; scd2's own loads (late splits, deletes, returning
-- keys) go on under it.
SET client_min_messages = warning;
\set SHOW_CONTEXT never
SET TimeZone = 'UTC';
CREATE SCHEMA nov;
SET search_path = nov, public;

CREATE TABLE stg (id int, city text, at timestamptz, del boolean);
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                  city text, valid_from timestamptz NOT NULL, valid_to timestamptz,
                  is_current boolean NOT NULL DEFAULT true);

-- Without btree_gist: refused, and nothing is registered or created.
DROP EXTENSION IF EXISTS btree_gist;
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del',
                     no_overlap => true, order_free => false);
SELECT count(*) AS registered FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
SELECT count(*) AS indexes FROM pg_index WHERE indrelid = 'dim'::regclass;

CREATE EXTENSION btree_gist SCHEMA public;
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del',
                     no_overlap => true, order_free => false);
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'dim'::regclass AND contype = 'x';
SELECT no_overlap_constraint FROM scd2.dimensions WHERE dimension = 'dim'::regclass;

-- Loads under the constraint: new keys, a change, a late change that
-- splits history, a delete, a key that comes back, a late delete.
INSERT INTO stg VALUES (1, 'Oslo', '2024-01-01', false), (2, 'Rome', '2024-01-01', false),
                       (3, 'Lima', '2024-01-01', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Bergen', '2024-04-01', false), (2, NULL, '2024-03-01', true),
                       (3, 'Cusco', '2024-05-01', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Trondheim', '2024-02-01', false), (2, 'Milan', '2024-06-01', false),
                       (3, NULL, '2024-03-01', true);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT id, city, valid_from, valid_to, is_current FROM dim ORDER BY id, valid_from;
SELECT scd2_test.invariants('dim');
SELECT * FROM scd2_test.last_metrics('dim');

-- Writes outside scd2 that would overlap are refused by the database.
CREATE TEMP TABLE before AS SELECT * FROM dim;
INSERT INTO dim (id, city, valid_from, valid_to, is_current)
VALUES (1, 'Stavanger', '2024-01-15', '2024-01-20', false);
UPDATE dim SET valid_from = '2024-01-15' WHERE id = 1 AND city = 'Trondheim';
UPDATE dim SET valid_to = '2024-07-01' WHERE id = 2 AND city = 'Rome';
-- (a gap filled exactly, end to start, is no overlap: half-open ranges)
INSERT INTO dim (id, city, valid_from, valid_to, is_current)
VALUES (3, 'Arequipa', '2024-03-01', '2024-05-01', false);
DELETE FROM dim WHERE city = 'Arequipa';
SELECT count(*) AS changed_rows FROM ((TABLE dim EXCEPT TABLE before) UNION ALL (TABLE before EXCEPT TABLE dim)) d;

-- A load that would overlap an existing version cannot happen: scd2
-- never writes one (a change at an existing version's start is refused
-- before any write, as without the constraint).
TRUNCATE stg;
INSERT INTO stg VALUES (1, 'Tromso', '2024-02-01', false);
CALL scd2.apply('stg', 'dim', now(), NULL) \gset
SELECT count(*) AS changed_rows FROM ((TABLE dim EXCEPT TABLE before) UNION ALL (TABLE before EXCEPT TABLE dim)) d;

-- Registering again keeps one constraint (the previous one is replaced);
-- with a different key it follows the new key; without no_overlap the
-- constraint scd2 made is dropped.
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del',
                     no_overlap => true, order_free => false);
SELECT count(*) AS exclusion_constraints FROM pg_constraint WHERE conrelid = 'dim'::regclass AND contype = 'x';
SELECT scd2.register('dim', ARRAY['id', 'city'], effective_column => 'at',
                     delete_column => 'del', no_overlap => true, order_free => false);
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'dim'::regclass AND contype = 'x';
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del', order_free => false);
SELECT count(*) AS exclusion_constraints FROM pg_constraint WHERE conrelid = 'dim'::regclass AND contype = 'x';
SELECT no_overlap_constraint FROM scd2.dimensions WHERE dimension = 'dim'::regclass;

-- History that already overlaps cannot be put under the constraint: an
-- error naming the versions, and the registration is unchanged.
INSERT INTO dim (id, city, valid_from, valid_to, is_current)
VALUES (1, 'Stavanger', '2024-01-15', '2024-01-20', false);
SELECT scd2.register('dim', ARRAY['id'], effective_column => 'at', delete_column => 'del',
                     no_overlap => true, order_free => false);
SELECT no_overlap_constraint, business_key FROM scd2.dimensions WHERE dimension = 'dim'::regclass;
SELECT count(*) AS exclusion_constraints FROM pg_constraint WHERE conrelid = 'dim'::regclass AND contype = 'x';
DELETE FROM dim WHERE city = 'Stavanger';

-- date validity with the infinity convention, a text key, and a table
-- name so long that the constraint's name must be clipped.
CREATE TABLE stg_product (code text, price numeric, at date);
CREATE TABLE dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes (
    code text NOT NULL, price numeric, valid_from date NOT NULL,
    valid_to date NOT NULL DEFAULT 'infinity');
SELECT scd2.register('dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes',
                     ARRAY['code'], effective_column => 'at', current_valid_to => 'infinity',
                     no_overlap => true, order_free => false);
SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint
 WHERE conrelid = 'dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes'::regclass
   AND contype = 'x';
INSERT INTO stg_product VALUES ('A', 10, '2024-01-01'), ('A', 12, '2024-03-01'), ('B', 5, '2024-01-01');
CALL scd2.apply('stg_product', 'dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes', now(), NULL) \gset
TRUNCATE stg_product;
INSERT INTO stg_product VALUES ('A', 11, '2024-02-01');
CALL scd2.apply('stg_product', 'dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes', now(), NULL) \gset
SELECT * FROM dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes ORDER BY code, valid_from;
INSERT INTO dim_product_with_a_very_long_name_that_fills_most_of_the_63_bytes
VALUES ('B', 6, '2024-06-01', '2024-07-01');

-- A key type without a gist equality: refused, naming the column.
CREATE TABLE dim_json (k jsonb NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('dim_json', ARRAY['k'], no_overlap => true);
SELECT count(*) AS registered FROM scd2.dimensions WHERE dimension = 'dim_json'::regclass;

RESET search_path;
DROP SCHEMA nov CASCADE;
DROP EXTENSION btree_gist;
