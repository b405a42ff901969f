/* scd2 0.4 -> 0.5 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.5'" to load this file. \quit

------------------------------------------------------------------------------
-- Issues 48 and 52: a running load keeps its statement in
-- pg_stat_activity.query and appends its progress as a comment on a line of
-- its own (src/load/progress.c writes it; keep the pattern in step), with
-- counts that move within a phase and the phase's start in Unix seconds; a
-- load that ends, fails or is cancelled leaves the statement alone.
------------------------------------------------------------------------------
CREATE OR REPLACE VIEW scd2.load_progress WITH (security_invoker = true) AS
SELECT a.pid,
       a.datname,
       a.usename,
       m[8]::pg_catalog.oid::pg_catalog.regclass AS dimension,
       m[9]::pg_catalog.oid::pg_catalog.regclass AS staging,
       m[2] AS phase,
       NULLIF(m[4], '-')::bigint AS rows_done,
       NULLIF(m[5], '-')::bigint AS rows_total,
       NULLIF(m[6], '-')::bigint AS changes_done,
       NULLIF(m[7], '-')::bigint AS changes_total,
       a.query_start AS started_at,
       pg_catalog.to_timestamp(m[3]::double precision) AS phase_started_at,
       m[1] AS query
  FROM pg_catalog.pg_stat_activity a,
       LATERAL pg_catalog.regexp_match(a.query,
           '^(.*)[[:space:]]/[*] scd2 load: ([a-z ]+) since ([0-9]+[.][0-9]+); '
           'staging rows ([0-9]+|-) of ([0-9]+|-); changes ([0-9]+|-) of ([0-9]+|-); '
           'oids ([0-9]+) ([0-9]+) [*]/$') AS m
 WHERE a.state OPERATOR(pg_catalog.=) 'active' AND m IS NOT NULL;
COMMENT ON VIEW scd2.load_progress IS
    'one row per running scd2 load: its phase, when the phase began, and its counts (staging rows, changes; they move within a phase), from the progress comment a load appends to its statement in pg_stat_activity.query, under that view''s visibility rules';

------------------------------------------------------------------------------
-- Issue 48 (a user's first hour): loads wherever SQL runs, an uninstall
-- that keeps the history, internal helpers not executable by PUBLIC.
------------------------------------------------------------------------------
-- scd2.apply as written in the README has no output parameter, so that
-- PL/pgSQL (a DO block, a procedure, a function) can CALL it as it is
-- (PL/pgSQL needs a variable for every output parameter, also a defaulted
-- one).  The form of four arguments keeps the INOUT run_id for a caller
-- that wants the run id: a result row at top level (psql, dbt), a variable
-- in PL/pgSQL.  No default is shared between the two (a call of two or
-- three arguments is the first, of four the second), so no call is
-- ambiguous.  Both are src/load/apply.c's scd2_apply.
DROP PROCEDURE scd2.apply(regclass, regclass, timestamptz, bigint);
CREATE PROCEDURE scd2.apply(
        staging      regclass,
        dimension    regclass,
        effective_at timestamptz DEFAULT pg_catalog.now())
AS 'MODULE_PATHNAME', 'scd2_apply'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply(regclass, regclass, timestamptz) IS
    'loads a staging table into a registered SCD Type 2 dimension with one MERGE and logs the run; callable as written from psql, PL/pgSQL, pg_cron and dbt';
CREATE PROCEDURE scd2.apply(
        staging      regclass,
        dimension    regclass,
        effective_at timestamptz,
        INOUT run_id bigint)
AS 'MODULE_PATHNAME', 'scd2_apply'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply(regclass, regclass, timestamptz, bigint) IS
    'loads a staging table into a registered SCD Type 2 dimension with one MERGE, logs the run and returns its id in run_id (CALL scd2.apply(s, d, now(), NULL) at top level; a variable in PL/pgSQL)';

-- DROP EXTENSION scd2 (and DROP SCHEMA scd2 CASCADE) is refused while
-- dimensions are registered or the audit log holds rows, unless
-- scd2.allow_drop_with_history is on (src/history/drop_guard.c).
CREATE FUNCTION scd2._on_drop_extension()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'scd2_on_drop_extension'
LANGUAGE C;
COMMENT ON FUNCTION scd2._on_drop_extension() IS
    'internal: refuses DROP EXTENSION scd2 while it holds the history of the loads (the event trigger scd2_keep_history)';
CREATE EVENT TRIGGER scd2_keep_history ON ddl_command_start
    WHEN TAG IN ('DROP EXTENSION', 'DROP SCHEMA')
    EXECUTE FUNCTION scd2._on_drop_extension();

-- Internal helpers: not executable by PUBLIC unless an entry point that
-- runs as its caller needs them (then they check what they need; see
-- docs/SECURITY.md).  The event triggers' functions are called by the
-- triggers only; the transition and final functions of scd2._repeats by
-- the aggregate, as its owner.
REVOKE EXECUTE ON FUNCTION scd2._on_sql_drop(), scd2._on_drop_extension(),
    scd2._repeats_add(internal, anyelement), scd2._repeats_final(internal) FROM PUBLIC;

-- scd2.create_dimension passes the caller's current schema to the PL/pgSQL
-- scd2._create_dimension in C (src/catalog/create_dimension.c): the helper's
-- errors carry no context lines of scd2's internals, and the helper needs
-- no EXECUTE grant to PUBLIC.
CREATE OR REPLACE FUNCTION scd2.create_dimension(
        dimension            text,
        "like"               regclass,
        business_key         name[],
        tracked              name[]  DEFAULT NULL,
        type1                name[]  DEFAULT NULL,
        effective_column     name    DEFAULT NULL,
        delete_column        name    DEFAULT NULL,
        mode                 text    DEFAULT 'incremental',
        surrogate_key_column name    DEFAULT 'sk',
        valid_from_column    name    DEFAULT 'valid_from',
        valid_to_column      name    DEFAULT 'valid_to',
        is_current_column    name    DEFAULT 'is_current',
        current_valid_to     text    DEFAULT 'null',
        no_overlap           boolean DEFAULT false)
RETURNS regclass
AS 'MODULE_PATHNAME', 'scd2_create_dimension'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
REVOKE EXECUTE ON FUNCTION scd2._create_dimension(name, text, regclass, name[], name[], name[], name, name,
    text, name, name, name, name, text, boolean) FROM PUBLIC;
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

------------------------------------------------------------------------------
-- Issue 47 (trust, round 3): the audit log by the dimension's OID, and a
-- run known from its commit.
------------------------------------------------------------------------------
-- dimension_oid: the dimension the run was of, as scd2.change_log_runs
-- keeps it; the audit log's row security decides by it, so a table given a
-- run's old name later (a rename, a drop and a new table) is another table
-- and sees nothing.  dimension_dropped_at: set by the sql_drop event trigger
-- as on scd2.change_log_runs (a dropped table's regclass is dumped as a bare
-- OID, which can name another table after a restore).  committed_at: when
-- the run's transaction began to commit (written at its pre-commit, or at
-- PREPARE TRANSACTION), what scd2.dimension_at(..., known_at) and
-- scd2.rewind(..., to_time) go by where no commit timestamp is kept.
ALTER TABLE scd2.audit_log
    ADD COLUMN dimension_oid regclass,
    ADD COLUMN dimension_dropped_at timestamptz,
    ADD COLUMN committed_at timestamptz;
COMMENT ON COLUMN scd2.audit_log.dimension_oid IS
    'the dimension of the run (NULL: an error or dry run written before 0.5, or a load before 0.3): the row security goes by it, not by the name in dimension';
COMMENT ON COLUMN scd2.audit_log.dimension_dropped_at IS
    'when the dimension was dropped; the row is then visible only to the role that ran it';
COMMENT ON COLUMN scd2.audit_log.committed_at IS
    'when the run''s transaction began to commit (its pre-commit; a prepared one: PREPARE TRANSACTION); NULL while it has not';
-- the dimensions the live rows name, one probe each (the sql_drop trigger,
-- src/catalog/dimensions.c)
CREATE INDEX audit_log_live_dimension_idx ON scd2.audit_log (dimension_oid)
    WHERE dimension_dropped_at IS NULL AND dimension_oid IS NOT NULL;
-- Rows written before 0.5: a load's dimension from its change-log header, a
-- revert's or rewind's from the headers of the runs it undid (the OID the
-- load had, not what its name means now: a name could since name a table
-- of another role).  Error rows, dry runs and loads before 0.3 have no
-- such record and keep NULL: only the role that ran them (and roles exempt
-- from row security) see them.  Their commit: when they finished.
UPDATE scd2.audit_log a
   SET dimension_oid = r.dimension,
       dimension_dropped_at = COALESCE(r.dimension_dropped_at,
           CASE WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                                  WHERE c.oid OPERATOR(pg_catalog.=) r.dimension) THEN pg_catalog.now() END)
  FROM scd2.change_log_runs r
 WHERE r.run_id OPERATOR(pg_catalog.=) a.run_id;
UPDATE scd2.audit_log a
   SET dimension_oid = r.dimension,
       dimension_dropped_at = COALESCE(r.dimension_dropped_at,
           CASE WHEN NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                                  WHERE c.oid OPERATOR(pg_catalog.=) r.dimension) THEN pg_catalog.now() END)
  FROM scd2.change_log_runs r
 WHERE r.reverted_by OPERATOR(pg_catalog.=) a.run_id AND a.dimension_oid IS NULL;
UPDATE scd2.audit_log SET committed_at = finished_at;

CREATE FUNCTION scd2._may_read_dimension(dimension regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'scd2_may_read_dimension_oid'
LANGUAGE C STRICT STABLE;
COMMENT ON FUNCTION scd2._may_read_dimension(regclass) IS
    'internal: whether the caller may read the table of an audit row''s dimension_oid (the audit log''s row security)';
ALTER POLICY audit_log_readable ON scd2.audit_log
    USING (username OPERATOR(pg_catalog.=) CURRENT_USER
           OR (dimension_dropped_at IS NULL AND scd2._may_read_dimension(dimension_oid)));
DROP FUNCTION scd2._may_read_dimension(text);
