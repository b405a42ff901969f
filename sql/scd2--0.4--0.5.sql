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
-- scd2.register_fact, scd2.check_facts, scd2.rekey_facts (docs/FACTS.md);
-- a maintained fact table (register_fact's maintain, the default) is
-- re-keyed by every run that moves the dimension's history, in its own
-- transaction (metric facts_rekeyed).  Inferred members: the block at the end.
------------------------------------------------------------------------------
CREATE TABLE scd2.fact_tables (
    fact                 regclass PRIMARY KEY,
    dimension            regclass NOT NULL,
    surrogate_key_column name     NOT NULL,  -- the fact's column holding the dimension's surrogate key
    time_column          name     NOT NULL,  -- the fact's instant: its key is the version valid then
    created_index        name,               -- the index on surrogate_key_column register_fact created
    last_run_id          bigint   NOT NULL DEFAULT 0,  -- the newest run or revert rekey_facts has seen
    maintain             boolean  NOT NULL DEFAULT true, -- every run that moves the dimension's history re-keys the facts
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
        surrogate_key_column name, time_column name, maintain boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_fact_validate'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2._fact_validate(regclass, regclass, name, name, boolean) IS
    'internal: what scd2.register_fact refuses (the caller must own the fact table)';

CREATE FUNCTION scd2._fact_store(fact regclass, dimension regclass,
        surrogate_key_column name, time_column name, maintain boolean, created_index name)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_fact_store'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._fact_store(regclass, regclass, name, name, boolean, name) IS
    'internal: stores a validated fact table registration (the caller must own the fact table)';

CREATE FUNCTION scd2._fact_check_sql(fact regclass)
RETURNS text
AS 'MODULE_PATHNAME', 'scd2_fact_check_sql'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2._fact_check_sql(regclass) IS
    'internal: the query of scd2.check_facts, which runs it as its caller';

CREATE FUNCTION scd2.register_fact(fact regclass, dimension regclass,
        surrogate_key_column name, time_column name, maintain boolean DEFAULT true)
RETURNS void
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_att     smallint;
    v_idxname name;
BEGIN
    PERFORM scd2._fact_validate(fact, dimension, surrogate_key_column, time_column, maintain);
    -- the re-keying finds the facts of a moved version through an index
    -- whose first column is the surrogate key column (any such index will
    -- do; the one made here also has the time column, so that the facts
    -- still inside their version's range are not read)
    SELECT a.attnum INTO v_att FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = fact AND a.attname = surrogate_key_column;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_index i
                     JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
                     JOIN pg_catalog.pg_am am ON am.oid = ic.relam
                    WHERE i.indrelid = fact AND i.indkey[0] = v_att AND i.indpred IS NULL
                      AND i.indisvalid AND am.amname = 'btree') THEN
        v_idxname := scd2._choose_index_name(fact, 'scd2_fact');
        EXECUTE pg_catalog.format('CREATE INDEX %I ON %s (%I, %I)', v_idxname, fact, surrogate_key_column,
                                  time_column);
    END IF;
    PERFORM scd2._fact_store(fact, dimension, surrogate_key_column, time_column, maintain, v_idxname);
END
$$;
COMMENT ON FUNCTION scd2.register_fact(regclass, regclass, name, name, boolean) IS
    'registers a fact table whose surrogate_key_column holds the surrogate key of the dimension''s version valid at time_column; creates an index on that column if none; maintain: every run that moves the dimension''s history re-keys the facts in its transaction';

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
-- The facts a run re-keyed (its maintained fact tables), a metric of the
-- audit row as the others (src/metrics.h).
ALTER TABLE scd2.audit_log ADD COLUMN facts_rekeyed bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN scd2.audit_log.facts_rekeyed IS
    'the facts of the dimension''s maintained fact tables the run re-keyed (scd2.register_fact(..., maintain => true))';
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

------------------------------------------------------------------------------
-- Issues 49 and 50: register takes inferred_column (the boolean column that
-- flags inferred members, scd2.infer_members), sequence_column (the staging
-- column that orders one key's events within one effective time) and
-- ignore_null_updates (the columns in which a NULL means "unchanged").
-- Checked and stored by src/catalog/dimensions.c.
------------------------------------------------------------------------------
ALTER TABLE scd2.dimensions ADD COLUMN inferred_column name;
ALTER TABLE scd2.dimensions ADD COLUMN sequence_column name;
ALTER TABLE scd2.dimensions ADD COLUMN ignore_null_updates name[] NOT NULL DEFAULT '{}';
COMMENT ON COLUMN scd2.dimensions.inferred_column IS
    'the dimension''s boolean column that flags inferred members (scd2.infer_members); NULL: none';
COMMENT ON COLUMN scd2.dimensions.sequence_column IS
    'the staging column that orders one key''s events within one effective time (an LSN, an offset); NULL: none';
COMMENT ON COLUMN scd2.dimensions.ignore_null_updates IS
    'the columns in which an event''s NULL means "unchanged" (partial updates)';

CREATE FUNCTION scd2._registry_store_stream(dimension regclass, sequence_column name, ignore_null_updates name[])
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_stream'
LANGUAGE C;
COMMENT ON FUNCTION scd2._registry_store_stream(regclass, name, name[]) IS
    'internal: checks and stores register''s sequence_column and ignore_null_updates (the caller must own the dimension)';
CREATE FUNCTION scd2._registry_store_inferred(dimension regclass, inferred_column name)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_inferred'
LANGUAGE C;
COMMENT ON FUNCTION scd2._registry_store_inferred(regclass, name) IS
    'internal: checks and stores register''s inferred_column (the caller must own the dimension)';

DROP FUNCTION scd2.register(regclass, name[], name[], name[], name, name, text, regclass, name, name, name, name, text, boolean, boolean, text, real, text, text, boolean);
CREATE FUNCTION scd2.register(
        dimension            regclass,
        business_key         name[],
        tracked              name[]  DEFAULT NULL,
        type1                name[]  DEFAULT NULL,
        effective_column     name    DEFAULT NULL,
        delete_column        name    DEFAULT NULL,
        mode                 text    DEFAULT 'incremental',
        staging              regclass DEFAULT NULL,
        valid_from_column    name    DEFAULT 'valid_from',
        valid_to_column      name    DEFAULT 'valid_to',
        is_current_column    name    DEFAULT NULL,
        surrogate_key_column name    DEFAULT NULL,
        current_valid_to     text    DEFAULT 'null',
        create_indexes       boolean DEFAULT true,
        no_overlap           boolean DEFAULT false,
        detect               text    DEFAULT 'values',
        max_close_fraction   real    DEFAULT NULL,
        missing_columns      text    DEFAULT 'error',
        on_schema_change     text    DEFAULT 'ignore',
        order_free           boolean DEFAULT NULL,
        inferred_column      name    DEFAULT NULL,
        sequence_column      name    DEFAULT NULL,
        ignore_null_updates  name[]  DEFAULT NULL)
RETURNS regclass
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $register$
DECLARE
    v_rel        pg_catalog.pg_class;
    v_col        name;
    v_type       regtype;
    v_vf_type    regtype;
    v_vt_type    regtype;
    v_is_current name := is_current_column;
    v_sk         name := surrogate_key_column;
    v_bookkeeping name[];
    v_pred       text;
    v_keylist    text;
    v_include    text;
    v_idxname    text;
    v_keyatts    int2[];
    v_vf_att     int2;
    v_covers     int2[];
    v_old        name[];
    v_order_free_before boolean;
    v_created    name[] := '{}';
    v_index      regclass;
    v_current    regclass;
    v_asof       regclass;
    v_no_overlap name;
    v_current_vt text := current_valid_to;
    v_vt_text    text;
BEGIN
    IF dimension IS NULL THEN
        RAISE EXCEPTION 'dimension must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    SELECT * INTO v_rel FROM pg_catalog.pg_class WHERE oid = dimension;
    IF v_rel.relkind NOT IN ('r', 'p') THEN
        RAISE EXCEPTION 'relation % is not a table', dimension
            USING ERRCODE = 'wrong_object_type',
                  HINT = 'A dimension must be a plain or partitioned table.';
    END IF;
    IF v_rel.relpersistence = 't' THEN
        RAISE EXCEPTION 'temporary table % cannot be an scd2 dimension', dimension
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'A temporary table vanishes with its session, and its registration would be left behind.',
                  HINT = 'Make the dimension a permanent (or unlogged) table.';
    END IF;
    IF NOT pg_catalog.pg_has_role(current_user, v_rel.relowner, 'USAGE') THEN
        RAISE EXCEPTION 'must be owner of table %', dimension
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'Only the owner of a dimension can register it.';
    END IF;
    IF business_key IS NULL OR pg_catalog.cardinality(business_key) = 0 THEN
        RAISE EXCEPTION 'business_key must name at least one column'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the business key as an array, e.g. ARRAY[''customer_id''].';
    END IF;
    IF mode IS NULL OR mode NOT IN ('incremental', 'snapshot') THEN
        RAISE EXCEPTION 'invalid mode "%"', mode
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''incremental'' (missing keys mean nothing) or ''snapshot'' (missing keys are closed).';
    END IF;
    IF current_valid_to IS NULL THEN
        RAISE EXCEPTION 'invalid current_valid_to NULL'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''null'' (current rows have valid_to NULL), ''infinity'' or a far-future value such as ''9999-12-31''.';
    END IF;

    -- The validity columns: both present, of one temporal type.
    v_vf_type := scd2._column_type(dimension, valid_from_column, 'valid_from_column');
    v_vt_type := scd2._column_type(dimension, valid_to_column, 'valid_to_column');
    IF v_vf_type NOT IN ('timestamptz'::regtype, 'timestamp'::regtype, 'date'::regtype)
       OR v_vt_type IS DISTINCT FROM v_vf_type THEN
        RAISE EXCEPTION 'validity columns of % must both be timestamptz, timestamp or date', dimension
            USING ERRCODE = 'datatype_mismatch',
                  DETAIL = pg_catalog.format('Column %I has type %s and column %I has type %s.',
                                             valid_from_column, v_vf_type, valid_to_column, v_vt_type);
    END IF;

    -- is_current: explicit, or a boolean column called is_current if there is one.
    IF v_is_current IS NULL AND EXISTS (
            SELECT FROM pg_catalog.pg_attribute
             WHERE attrelid = dimension AND attname = 'is_current' AND NOT attisdropped) THEN
        v_is_current := 'is_current';
    END IF;
    IF v_is_current IS NOT NULL
       AND scd2._column_type(dimension, v_is_current, 'is_current_column') <> 'boolean'::regtype THEN
        RAISE EXCEPTION 'column % of % must be boolean', pg_catalog.quote_ident(v_is_current), dimension
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Pass is_current_column => NULL-free boolean column, or drop the column.';
    END IF;

    -- Surrogate key: explicit, or the table's only identity column.
    IF v_sk IS NULL THEN
        SELECT pg_catalog.min(attname) INTO v_sk
          FROM pg_catalog.pg_attribute
         WHERE attrelid = dimension AND attidentity <> '' AND NOT attisdropped
        HAVING pg_catalog.count(*) = 1;
    END IF;
    IF v_sk IS NOT NULL THEN
        v_type := scd2._column_type(dimension, v_sk, 'surrogate_key_column');
        IF v_type NOT IN ('bigint'::regtype, 'integer'::regtype, 'smallint'::regtype) THEN
            RAISE EXCEPTION 'surrogate key column % of % must be an integer', pg_catalog.quote_ident(v_sk), dimension
                USING ERRCODE = 'datatype_mismatch',
                      DETAIL = pg_catalog.format('Column %I has type %s.', v_sk, v_type);
        END IF;
    END IF;

    v_bookkeeping := ARRAY[valid_from_column, valid_to_column]::name[];
    IF v_is_current IS NOT NULL THEN v_bookkeeping := v_bookkeeping || v_is_current; END IF;
    IF v_sk IS NOT NULL THEN v_bookkeeping := v_bookkeeping || v_sk; END IF;

    FOREACH v_col IN ARRAY business_key LOOP
        PERFORM scd2._column_type(dimension, v_col, 'business_key');
        IF v_col = ANY (v_bookkeeping) THEN
            RAISE EXCEPTION 'business key column % of % is a bookkeeping column', pg_catalog.quote_ident(v_col), dimension
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'The business key is the natural key of the source rows, not a validity or surrogate key column.';
        END IF;
    END LOOP;
    FOREACH v_col IN ARRAY COALESCE(tracked, '{}') || COALESCE(type1, '{}') LOOP
        PERFORM scd2._column_type(dimension, v_col, 'tracked/type1');
        IF v_col = ANY (business_key) OR v_col = ANY (v_bookkeeping) THEN
            RAISE EXCEPTION 'column % of % cannot be tracked or Type 1', pg_catalog.quote_ident(v_col), dimension
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'It is a business key or bookkeeping column.';
        END IF;
    END LOOP;
    IF tracked IS NOT NULL AND type1 IS NOT NULL AND tracked && type1 THEN
        RAISE EXCEPTION 'a column cannot be both tracked and Type 1'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = pg_catalog.format('Columns in both lists: %s.',
                               (SELECT pg_catalog.string_agg(pg_catalog.quote_ident(c), ', ')
                                  FROM pg_catalog.unnest(tracked) c WHERE c = ANY (type1)));
    END IF;
    IF staging IS NOT NULL AND staging = dimension THEN
        RAISE EXCEPTION 'staging table cannot be the dimension itself'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Name the table the changes are loaded into, or leave staging NULL.';
    END IF;
    IF detect IS NULL OR detect NOT IN ('values', 'timestamp') THEN
        RAISE EXCEPTION 'invalid detect "%"', detect
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''values'' (a change is a different value of a tracked column) or ''timestamp'' (a change is a later effective time).';
    END IF;
    IF detect = 'timestamp' AND effective_column IS NULL THEN
        RAISE EXCEPTION 'detect => ''timestamp'' needs an effective_column'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A row is a change exactly when its effective time is later than the current version''s start.',
                  HINT = 'Name the staging column with the time the row changed (dbt''s updated_at) as effective_column.';
    END IF;
    IF detect = 'timestamp' AND pg_catalog.cardinality(COALESCE(type1, '{}')) > 0 THEN
        RAISE EXCEPTION 'detect => ''timestamp'' cannot have Type 1 columns'
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'With timestamp detection every later row opens a new version and values are never compared, so no column is overwritten in place.',
                  HINT = 'Leave type1 out, or use detect => ''values''.';
    END IF;
    IF effective_column = ANY (business_key || COALESCE(tracked, '{}') || COALESCE(type1, '{}')) THEN
        RAISE EXCEPTION 'effective column % cannot be a business key, tracked or Type 1 column', pg_catalog.quote_ident(effective_column)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A dimension column named like the effective column is copied from staging into every new version and never compared.';
    END IF;

    -- The current rows' valid_to other than NULL: any value of valid_to's
    -- type (a far-future date as dbt snapshots use, or infinity), stored
    -- in its canonical ISO form, which reads back the same whatever the
    -- session's DateStyle and TimeZone.
    IF current_valid_to <> 'null' THEN
        BEGIN
            EXECUTE pg_catalog.format('SELECT pg_catalog.to_json(CAST(%L AS %s)) #>> ''{}''',
                                      current_valid_to, v_vt_type)
               INTO v_current_vt;
        EXCEPTION WHEN data_exception THEN
            RAISE EXCEPTION 'invalid current_valid_to "%"', current_valid_to
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = pg_catalog.format('It is not a value of type %s (column %I): %s.',
                                                 v_vt_type, valid_to_column, SQLERRM),
                      HINT = 'Use ''null'' (current rows have valid_to NULL), ''infinity'' or a far-future value such as ''9999-12-31''.';
        END;
        IF v_current_vt = '-infinity' THEN
            RAISE EXCEPTION 'invalid current_valid_to "%"', current_valid_to
                USING ERRCODE = 'invalid_parameter_value',
                      DETAIL = 'Current rows end after every instant they cover.',
                      HINT = 'Use ''null'', ''infinity'' or a far-future value such as ''9999-12-31''.';
        END IF;
    END IF;

    -- A default staging table is read by scd2.apply_all as the dimension's
    -- owner: the registering role must be allowed to read it (or it could
    -- have it copied into its dimension), and so must the owner (loads
    -- check the owner's right again).  A temporary one would be gone, or
    -- another session's, when apply_all runs.
    IF staging IS NOT NULL THEN
        IF (SELECT c.relpersistence FROM pg_catalog.pg_class c WHERE c.oid = staging) = 't' THEN
            RAISE EXCEPTION 'temporary table % cannot be the registered staging table of %', staging, dimension
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'scd2.apply_all reads the registered staging table in a session of its own, where a temporary table does not exist.',
                      HINT = 'Register a permanent staging table, or leave staging NULL and load with scd2.apply(staging, dimension).';
        END IF;
        IF NOT pg_catalog.has_table_privilege(current_user, staging, 'SELECT') THEN
            RAISE EXCEPTION 'permission denied for staging table %', staging
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = pg_catalog.format('Registering a default staging table needs SELECT on it, and role %I has none.', current_user),
                      HINT = 'Register a staging table you may read, or ask its owner for SELECT on it.';
        END IF;
        IF NOT pg_catalog.has_table_privilege(v_rel.relowner, staging, 'SELECT') THEN
            RAISE EXCEPTION 'permission denied for staging table %', staging
                USING ERRCODE = 'insufficient_privilege',
                      DETAIL = pg_catalog.format('Loads of %s run as its owner, role %s, which has no SELECT on the staging table.',
                                                 dimension, v_rel.relowner::regrole),
                      HINT = pg_catalog.format('Grant SELECT on %s to %s.', staging, v_rel.relowner::regrole);
        END IF;
    END IF;

    -- The supporting indexes, found by definition (whatever their names):
    -- one current version per business key, and the as-of index (versions
    -- of a key by start, carrying what the lookup returns so the probe can
    -- be index-only).  Missing ones are created under names chosen the way
    -- PostgreSQL chooses them; indexes scd2 created for an earlier
    -- registration that no longer fit this one are dropped.
    SELECT pg_catalog.array_agg(a.attnum ORDER BY u.o),
           pg_catalog.string_agg(pg_catalog.quote_ident(u.k), ', ' ORDER BY u.o)
      INTO v_keyatts, v_keylist
      FROM pg_catalog.unnest(business_key) WITH ORDINALITY AS u(k, o)
      JOIN pg_catalog.pg_attribute a ON a.attrelid = dimension AND a.attname = u.k;
    SELECT a.attnum INTO v_vf_att FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = dimension AND a.attname = valid_from_column;
    SELECT pg_catalog.array_agg(a.attnum) INTO v_covers FROM pg_catalog.pg_attribute a
     WHERE a.attrelid = dimension AND a.attname IN (valid_to_column, v_sk);
    IF v_current_vt = 'null' THEN
        v_pred := pg_catalog.format('%I IS NULL', valid_to_column);
    ELSE
        -- The constant as this session prints it: that is how pg_get_expr
        -- shows an existing index's predicate (_find_index compares them).
        EXECUTE pg_catalog.format('SELECT CAST(%L AS %s)::pg_catalog.text', v_current_vt,
                                  pg_catalog.format_type(v_vt_type, NULL))
           INTO v_vt_text;
        v_pred := pg_catalog.format('%I = %L::%s', valid_to_column, v_vt_text,
                                    pg_catalog.format_type(v_vt_type, NULL));
    END IF;
    SELECT d.created_indexes, d.order_free INTO v_old, v_order_free_before
      FROM scd2.dimensions d WHERE d.dimension = register.dimension;
    v_old := COALESCE(v_old, '{}');

    v_current := scd2._find_index(dimension, v_keyatts, '(' || v_pred || ')', '{}', v_old);
    v_asof := scd2._find_index(dimension, v_keyatts || v_vf_att, NULL, v_covers, v_old);

    -- scd2's own indexes of the earlier registration: still scd2's when
    -- they serve this one, dropped otherwise (before the new ones are
    -- made, so these get the plain names).
    FOR v_index IN
        SELECT i.indexrelid::regclass FROM pg_catalog.pg_index i
          JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid
         WHERE i.indrelid = dimension AND ic.relname = ANY (v_old)
    LOOP
        IF v_index IN (v_current, v_asof) THEN
            v_created := v_created || (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = v_index);
        ELSE
            EXECUTE pg_catalog.format('DROP INDEX %s', v_index);
        END IF;
    END LOOP;

    IF v_current IS NULL AND create_indexes THEN
        v_idxname := scd2._choose_index_name(dimension, 'scd2_current');
        EXECUTE pg_catalog.format('CREATE UNIQUE INDEX %I ON %s (%s) WHERE %s',
                                  v_idxname, dimension, v_keylist, v_pred);
        v_created := v_created || v_idxname;
    END IF;
    IF v_asof IS NULL AND create_indexes THEN
        v_include := pg_catalog.quote_ident(valid_to_column);
        IF v_sk IS NOT NULL THEN
            v_include := pg_catalog.quote_ident(v_sk) || ', ' || v_include;
        END IF;
        v_idxname := scd2._choose_index_name(dimension, 'scd2_asof');
        EXECUTE pg_catalog.format('CREATE UNIQUE INDEX %I ON %s (%s, %I) INCLUDE (%s)',
                                  v_idxname, dimension, v_keylist, valid_from_column, v_include);
        v_created := v_created || v_idxname;
    END IF;

    -- History integrity enforced by the database: the exclusion constraint
    -- of the previous registration is replaced by this one's, or dropped.
    v_no_overlap := scd2._no_overlap_replace(
        dimension, business_key, valid_from_column, valid_to_column, COALESCE(no_overlap, false),
        (SELECT d.no_overlap_constraint FROM scd2.dimensions d
          WHERE d.dimension OPERATOR(pg_catalog.=) register.dimension));

    IF max_close_fraction IS NOT NULL AND NOT (max_close_fraction >= 0 AND max_close_fraction <= 1) THEN
        RAISE EXCEPTION 'invalid max_close_fraction %', max_close_fraction
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'It is the largest fraction of the current keys one load may close or delete.',
                  HINT = 'Use a fraction from 0 to 1 (0.2: a load may close at most 20% of the current keys), or NULL for no limit.';
    END IF;
    PERFORM scd2._registry_store(dimension, business_key, tracked, COALESCE(type1, '{}'),
                                 effective_column, delete_column, mode, staging,
                                 valid_from_column, valid_to_column, v_is_current, v_sk,
                                 v_current_vt);
    PERFORM scd2._registry_store_more(dimension, v_created, v_no_overlap, detect);
    PERFORM scd2._registry_store_guard(dimension, max_close_fraction);
    PERFORM scd2._registry_store_missing_columns(dimension, missing_columns);
    PERFORM scd2._registry_store_schema_change(dimension, on_schema_change);
    -- NULL: a new registration, or one again of an order-free dimension, is
    -- order-free when it can be; one again of a dimension that was not
    -- order-free stays so (src/catalog/dimensions.c)
    PERFORM scd2._registry_store_order_free(dimension, COALESCE(order_free, NULLIF(v_order_free_before, true)));
    PERFORM scd2._registry_store_stream(dimension, sequence_column, ignore_null_updates);
    PERFORM scd2._registry_store_inferred(dimension, inferred_column);
    RETURN dimension;
END
$register$;
COMMENT ON FUNCTION scd2.register(regclass, name[], name[], name[], name, name, text, regclass, name, name, name, name, text, boolean, boolean, text, real, text, text, boolean, name, name, name[]) IS
    'registers an SCD Type 2 dimension: validates its shape, creates the current-row and as-of indexes (and with no_overlap an exclusion constraint), stores the configuration';

------------------------------------------------------------------------------
-- Issue 49, inferred members: scd2.infer_members (src/load/infer.c) inserts
-- a flagged placeholder version for every key of a batch of facts that the
-- dimension has no version of; the load that brings a key's record
-- completes it in place (src/load/complete.c: change-log action 'complete',
-- the version kept whole in old_row for revert).  Their metrics, last in
-- SCD2_METRICS (src/metrics.h).
------------------------------------------------------------------------------
ALTER TABLE scd2.audit_log ADD COLUMN inferred bigint NOT NULL DEFAULT 0;
ALTER TABLE scd2.audit_log ADD COLUMN completed bigint NOT NULL DEFAULT 0;

CREATE FUNCTION scd2.infer_members(staging regclass, dimension regclass, time_column name)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_infer_members'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.infer_members(regclass, regclass, name) IS
    'inserts an inferred current version (flagged in the registered inferred_column) for every business key of a batch of facts that the dimension has no version of, from the earliest time among its facts; a logged, revertible run; returns the number inferred';

------------------------------------------------------------------------------
-- Issue 50: a change stream's events (src/load/arrival.c, stream.c).  The
-- memory keeps each event's sequence (its text form, a JSON string) and,
-- for a stream, every event as it came.
------------------------------------------------------------------------------
ALTER TABLE scd2.arrival_memory ADD COLUMN sequence jsonb;
COMMENT ON COLUMN scd2.arrival_memory.sequence IS
    'a change stream''s event: its sequence_column value (text form, a JSON string); NULL: none';
COMMENT ON TABLE scd2.arrival_memory IS
    'scd2 arrival memory: the events of order-free dimensions that their versions do not show (no-op observations, deletes) and, for change streams (a sequence, partial updates, Type 1 columns), every event; pruned with scd2.prune_arrival_memory';

-- Whether a dimension remembers anything as late as a load's earliest event
-- (an in-order load then takes the fast path), and prune: per dimension.
-- The index on the instant alone read the later events of every order-free
-- dimension until one of this one (hundreds of rows in the regression
-- suite, where most dimensions with an effective column are order-free
-- now).  Partial on dropped_by IS NULL, which the recall's "(dropped_by IS
-- NULL) IS TRUE" does not imply: the recall still probes
-- arrival_memory_key_idx by key (src/history/arrival_memory.c).
DROP INDEX scd2.arrival_memory_effective_idx;
CREATE INDEX arrival_memory_live_idx ON scd2.arrival_memory (dimension, effective)
    WHERE dropped_by IS NULL;

------------------------------------------------------------------------------
-- Issue 51: a batch logged by surrogate keys is written in chunks, one row
-- of at most 65,536 of its rows each (src/load/batch_log.c), so that a load
-- holds a few MB of its change log whatever the batch (one row of a 1.9M-row
-- batch's arrays took 97 MB in the backend).  A batch's rows are read back
-- in chunk order, as one; the rows written before 0.5 are chunk 0.
------------------------------------------------------------------------------
ALTER TABLE scd2.change_log_batches ADD COLUMN chunk integer NOT NULL DEFAULT 0;
ALTER TABLE scd2.change_log_batches ALTER COLUMN chunk DROP DEFAULT;
ALTER TABLE scd2.change_log_batches DROP CONSTRAINT change_log_batches_pkey;
ALTER TABLE scd2.change_log_batches ADD CONSTRAINT change_log_batches_pkey PRIMARY KEY (run_id, chunk);
COMMENT ON COLUMN scd2.change_log_batches.chunk IS
    'the batch''s rows in this row: the chunk-th 65,536 of them, in the order the load wrote them (0: the first)';
COMMENT ON TABLE scd2.change_log_batches IS
    'scd2 change log: a batch logged by the surrogate keys of the rows it wrote (one row per chunk of at most 65,536 of them; scd2.change_log holds none of its rows)';
