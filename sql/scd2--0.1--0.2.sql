/* scd2 0.1 -> 0.2: scd2.apply_all, one CALL that loads every registered dimension. */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.2'" to load this file. \quit

------------------------------------------------------------------------------
-- apply_all: every registered dimension from its default staging table.
------------------------------------------------------------------------------
CREATE PROCEDURE scd2.apply_all(effective_at timestamptz DEFAULT pg_catalog.now())
AS 'MODULE_PATHNAME', 'scd2_apply_all'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply_all(timestamptz) IS
    'loads every registered dimension from its registered staging table; at top level commits after each dimension, logs failures and raises an error naming them';
