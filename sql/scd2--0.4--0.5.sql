/* scd2 0.4 -> 0.5 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.5'" to load this file. \quit

------------------------------------------------------------------------------
-- Issue 49, first part: fact tables keyed to a dimension's versions --
-- scd2.register_fact, scd2.check_facts, scd2.rekey_facts (docs/FACTS.md).
-- Not built yet: inferred members, re-keying in the load's own transaction.
------------------------------------------------------------------------------
CREATE TABLE scd2.fact_tables (
    fact                 regclass PRIMARY KEY,
    dimension            regclass NOT NULL,
    surrogate_key_column name     NOT NULL,  -- the fact's column holding the dimension's surrogate key
    time_column          name     NOT NULL,  -- the fact's instant: its key is the version valid then
    created_index        name,               -- the index on surrogate_key_column register_fact created
    last_run_id          bigint   NOT NULL DEFAULT 0,  -- the newest run or revert rekey_facts has seen
    registered_by        name     NOT NULL DEFAULT current_user,
    registered_at        timestamptz NOT NULL DEFAULT pg_catalog.now()
);
COMMENT ON TABLE scd2.fact_tables IS
    'scd2 registry of fact tables: each holds the surrogate key of its dimension''s version valid at its time column (written by scd2.register_fact and scd2.rekey_facts)';
SELECT pg_catalog.pg_extension_config_dump('scd2.fact_tables', '');
-- Public like scd2.dimensions (names and columns, no data); written only
-- by the extension's C code as the extension owner.
REVOKE ALL ON scd2.fact_tables FROM PUBLIC;
GRANT SELECT ON scd2.fact_tables TO PUBLIC;

CREATE FUNCTION scd2._fact_validate(fact regclass, dimension regclass,
        surrogate_key_column name, time_column name)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_fact_validate'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2._fact_validate(regclass, regclass, name, name) IS
    'internal: what scd2.register_fact refuses (the caller must own the fact table)';

CREATE FUNCTION scd2._fact_store(fact regclass, dimension regclass,
        surrogate_key_column name, time_column name, created_index name)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_fact_store'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._fact_store(regclass, regclass, name, name, name) IS
    'internal: stores a validated fact table registration (the caller must own the fact table)';

CREATE FUNCTION scd2._fact_check_sql(fact regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'scd2_fact_check_sql'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2._fact_check_sql(regclass) IS
    'internal: the query of scd2.check_facts, which runs it as its caller';

CREATE FUNCTION scd2.register_fact(fact regclass, dimension regclass,
        surrogate_key_column name, time_column name)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_att     smallint;
    v_idxname name;
BEGIN
    PERFORM scd2._fact_validate(fact, dimension, surrogate_key_column, time_column);
    -- rekey_facts finds the facts of a moved version through an index whose
    -- first column is the surrogate key column (any such index will do)
    SELECT a.attnum INTO v_att FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = fact AND a.attname = surrogate_key_column;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_index i
                     JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
                     JOIN pg_catalog.pg_am am ON am.oid = ic.relam
                    WHERE i.indrelid = fact AND i.indkey[0] = v_att AND i.indpred IS NULL
                      AND i.indisvalid AND am.amname = 'btree') THEN
        v_idxname := scd2._choose_index_name(fact, 'scd2_fact');
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %s (%I)', v_idxname, fact, surrogate_key_column);
    END IF;
    PERFORM scd2._fact_store(fact, dimension, surrogate_key_column, time_column, v_idxname);
END
$$;
COMMENT ON FUNCTION scd2.register_fact(regclass, regclass, name, name) IS
    'registers a fact table whose surrogate_key_column holds the surrogate key of the dimension''s version valid at time_column; creates an index on that column if none';

CREATE FUNCTION scd2.check_facts(fact regclass)
RETURNS TABLE (surrogate_key bigint, at timestamptz, expected bigint, facts bigint)
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    -- the caller's own query: its privileges and row-level security apply
    RETURN QUERY EXECUTE scd2._fact_check_sql(fact);
END
$$;
COMMENT ON FUNCTION scd2.check_facts(regclass) IS
    'the facts whose surrogate key is not the dimension''s version valid at their time, grouped (expected NULL: no version valid then)';

CREATE FUNCTION scd2.rekey_facts(fact regclass, full boolean DEFAULT false)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_rekey_facts'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.rekey_facts(regclass, boolean) IS
    're-points the facts keyed to versions that runs since its last call moved, to the version valid at their time (full => true: every fact, a scan); returns the number of facts changed';

-- A dropped fact table (or one whose dimension was dropped) is forgotten:
-- the sql_drop trigger's function, replaced to call it too.
CREATE FUNCTION scd2._fact_forget_dropped()
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_fact_forget_dropped'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION scd2._fact_forget_dropped() IS
    'internal: removes fact table registrations whose fact table or dimension no longer exists';
CREATE OR REPLACE FUNCTION scd2._on_sql_drop()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects()
                WHERE object_type IN ('table', 'schema')) THEN
        PERFORM scd2._registry_forget_dropped();
        PERFORM scd2._fact_forget_dropped();
    END IF;
END
$$;
