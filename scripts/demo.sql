-- scd2 demo: a customer dimension through four batches, an as-of fact
-- load, the history and the audit log.
\pset footer off
SET client_min_messages = notice;
SET TimeZone = 'UTC';
CREATE EXTENSION scd2;

\echo
\echo '== A staging table, and a dimension shaped after it'
CREATE TABLE stg_customer (customer_id int, name text, city text, tier text,
                           changed_at timestamptz, deleted boolean);
SELECT scd2.create_dimension('dim_customer', 'stg_customer', ARRAY['customer_id'],
                             type1 => ARRAY['name'],
                             effective_column => 'changed_at', delete_column => 'deleted');
\d dim_customer

\echo
\echo '== Batch 1: three new customers'
INSERT INTO stg_customer VALUES
  (1, 'Ada',   'Oslo',  'gold',   '2024-01-01', false),
  (2, 'Brian', NULL,    'silver', '2024-01-01', false),
  (3, 'Chloe', 'Lima',  '~',      '2024-01-01', false);
CALL scd2.apply('stg_customer', 'dim_customer');

\echo
\echo '== Batch 2: a move, NULL -> value, two changes of one key, a duplicate row, a new key'
TRUNCATE stg_customer;
INSERT INTO stg_customer VALUES
  (1, 'Ada',        'Bergen', 'gold',   '2024-03-01', false),
  (2, 'Brian',      'Rome',   'silver', '2024-02-01', false),
  (3, 'Chloe',      'Lima',   'gold',   '2024-02-01', false),
  (3, 'Chloe',      'Cusco',  'gold',   '2024-04-01', false),
  (3, 'Chloe',      'Cusco',  'gold',   '2024-04-01', false),
  (4, 'Dmitri',     'Kyiv',   'bronze', '2024-02-15', false);
SELECT * FROM scd2.merge('stg_customer', 'dim_customer')
 ORDER BY business_key->>'customer_id', valid_from, action;

\echo
\echo '== Batch 3: a late-arriving change (Ada lived in Trondheim from February), a delete'
TRUNCATE stg_customer;
INSERT INTO stg_customer VALUES
  (1, 'Ada',   'Trondheim', 'gold', '2024-02-01', false),
  (2, 'Brian', NULL,        NULL,   '2024-05-01', true);
CALL scd2.apply('stg_customer', 'dim_customer');

\echo
\echo '== Batch 4: the same batch again (idempotent), and a Type 1 name fix'
INSERT INTO stg_customer VALUES (4, 'Dmitry', 'Kyiv', 'bronze', '2024-06-01', false);
CALL scd2.apply('stg_customer', 'dim_customer');

\echo
\echo '== The dimension history'
SELECT sk, customer_id, name, city, tier, valid_from::date, valid_to::date, is_current
  FROM dim_customer ORDER BY customer_id, valid_from;

\echo
\echo '== An as-of fact load: each order gets the version valid when it was placed'
CREATE TABLE orders (order_id int, customer_id int, ordered_at timestamptz, amount numeric);
INSERT INTO orders VALUES (100, 1, '2024-01-15', 10), (101, 1, '2024-02-15', 20),
                          (102, 1, '2024-03-15', 30), (103, 2, '2024-04-01', 40),
                          (104, 2, '2024-06-01', 50), (105, 3, '2023-12-01', 60),
                          (106, 4, '2024-07-01', 70);
CREATE TABLE fact_orders AS
SELECT o.order_id, o.amount, scd2.asof('dim_customer', o.ordered_at, o.customer_id) AS customer_sk
  FROM orders o;
SELECT f.order_id, o.ordered_at::date, f.customer_sk, d.city, d.tier
  FROM fact_orders f JOIN orders o USING (order_id)
  LEFT JOIN dim_customer d ON d.sk = f.customer_sk
 ORDER BY f.order_id;

\echo
\echo '== The audit log'
SELECT run_id, status, source_rows AS src, inserted AS ins, new_versions AS new_v,
       closed, deleted AS del, shortened AS short, type1_updated AS t1,
       unchanged AS same, duplicates AS dup, duration
  FROM scd2.audit_log ORDER BY run_id;
