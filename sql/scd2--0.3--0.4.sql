/* scd2 0.3 -> 0.4 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.4'" to load this file. \quit

------------------------------------------------------------------------------
-- issue 21: security by construction (docs/SECURITY.md)
------------------------------------------------------------------------------
-- The guard of a read that runs as its caller (scd2.dimension_at, whose
-- query is the caller's own SELECT: row-level security applies to it as to
-- any query): the registered shape still holds (a validity column turned
-- into a domain would run that domain's CHECK as the caller).
CREATE FUNCTION scd2._check_dimension_read(dimension regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_check_dimension_read'
LANGUAGE C STRICT STABLE;
COMMENT ON FUNCTION scd2._check_dimension_read(regclass) IS
    'internal: refuses a read of a dimension whose registered shape changed';

-- The audit log's messages can hold business keys (an error names the key
-- at fault): a role sees the rows of dimensions it may read, and its own.
-- Superusers, the extension's owner and BYPASSRLS roles see every row.
CREATE FUNCTION scd2._may_read_dimension(dimension text)
RETURNS boolean
AS 'MODULE_PATHNAME', 'scd2_may_read_dimension'
LANGUAGE C STRICT STABLE;
COMMENT ON FUNCTION scd2._may_read_dimension(text) IS
    'internal: whether the caller may read the table an audit row names (the audit log''s row security)';
ALTER TABLE scd2.audit_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY audit_log_readable ON scd2.audit_log FOR SELECT TO PUBLIC
    USING (username OPERATOR(pg_catalog.=) CURRENT_USER OR scd2._may_read_dimension(dimension));

-- A dropped dimension's change-log headers are marked (by the sql_drop
-- event trigger): the regclass of a dropped table is dumped as a bare OID,
-- which can name another table after a restore.
ALTER TABLE scd2.change_log_runs ADD COLUMN dimension_dropped_at timestamptz;
COMMENT ON COLUMN scd2.change_log_runs.dimension_dropped_at IS
    'when the dimension was dropped; scd2.revert and scd2.changes refuse the run';
UPDATE scd2.change_log_runs r SET dimension_dropped_at = pg_catalog.now()
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = r.dimension::pg_catalog.oid);

-- scd2.dimension_at calls scd2._check_dimension_read
CREATE OR REPLACE FUNCTION scd2.dimension_at(dimension anyelement, at timestamptz)
RETURNS SETOF anyelement
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_rel  regclass;
    v_reg  scd2.dimensions;
    v_type regtype;
BEGIN
    SELECT t.typrelid INTO v_rel FROM pg_catalog.pg_type t
     WHERE t.oid = pg_catalog.pg_typeof(dimension) AND t.typrelid <> 0;
    IF v_rel IS NULL THEN
        RAISE EXCEPTION 'scd2.dimension_at takes a row of a dimension table, not %', pg_catalog.pg_typeof(dimension)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Pass a NULL of the dimension''s row type, e.g. scd2.dimension_at(NULL::dim_customer, ''2024-06-01'').';
    END IF;
    SELECT * INTO v_reg FROM scd2.dimensions d WHERE d.dimension = v_rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not a registered scd2 dimension', v_rel
            USING ERRCODE = 'undefined_object',
                  HINT = 'Register it first with scd2.register().';
    END IF;
    IF at IS NULL THEN
        RAISE EXCEPTION 'at must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- issue 21: the registered shape holds (only built-in casts below)
    PERFORM scd2._check_dimension_read(v_rel);
    -- Half-open validity: valid_from <= at < valid_to; a current row's
    -- valid_to is NULL or a far-future value.  For date and timestamp
    -- validity columns, at is converted in the session's TimeZone.
    v_type := scd2._column_type(v_rel, v_reg.valid_from_column, 'valid_from_column');
    RETURN QUERY EXECUTE pg_catalog.format(
        'SELECT d.* FROM %s d WHERE d.%I OPERATOR(pg_catalog.<=) CAST($1 AS %s)'
        ' AND (d.%I IS NULL OR d.%I OPERATOR(pg_catalog.>) CAST($1 AS %s))',
        v_rel, v_reg.valid_from_column, v_type,
        v_reg.valid_to_column, v_reg.valid_to_column, v_type) USING at;
END
$$;
