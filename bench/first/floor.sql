-- First load, approach floor: what no first load with scd2's three indexes
-- can avoid.  An insert of the rows sorted by key into a table without
-- indexes, then the primary key, the unique current-row index and the
-- as-of index built afterwards (each one sort).
-- dim's columns, defaults and identity; none of its indexes
CREATE TABLE dim_floor (LIKE dim INCLUDING DEFAULTS INCLUDING IDENTITY);
INSERT INTO dim_floor (customer_id, name, city, tier, email, birth_date, credit_limit,
                       valid_from, valid_to, is_current)
SELECT customer_id, name, city, tier, email, birth_date, credit_limit, :'eff', NULL, true
  FROM stg ORDER BY customer_id;
ALTER TABLE dim_floor ADD PRIMARY KEY (customer_sk);
CREATE UNIQUE INDEX dim_floor_current ON dim_floor (customer_id) WHERE valid_to IS NULL;
CREATE UNIQUE INDEX dim_floor_asof ON dim_floor (customer_id, valid_from) INCLUDE (customer_sk, valid_to);
