/* scd2 0.5 -- Slowly Changing Dimension Type 2 tables kept by one MERGE.
 * (The 0.4 install script followed by scd2--0.4--0.5.sql.) */

\echo Use "CREATE EXTENSION scd2" to load this file. \quit

------------------------------------------------------------------------------
-- Registry: one row per registered dimension.
------------------------------------------------------------------------------
CREATE TABLE scd2.dimensions (
    dimension            regclass PRIMARY KEY,
    business_key         name[]   NOT NULL,
    tracked              name[],                 -- NULL: every shared non-key column
    type1                name[]   NOT NULL DEFAULT '{}',
    effective_column     name,                   -- staging column with the change time
    delete_column        name,                   -- staging boolean, true = delete
    mode                 text     NOT NULL DEFAULT 'incremental',
    staging              regclass,               -- default staging table
    valid_from_column    name     NOT NULL DEFAULT 'valid_from',
    valid_to_column      name     NOT NULL DEFAULT 'valid_to',
    is_current_column    name,
    surrogate_key_column name,
    current_valid_to     text     NOT NULL DEFAULT 'null', -- 'null', or valid_to of current rows (canonical text)
    registered_by        name     NOT NULL DEFAULT current_user,
    registered_at        timestamptz NOT NULL DEFAULT pg_catalog.now(),
    created_indexes      name[]   NOT NULL DEFAULT '{}',  -- indexes scd2.register created (same schema)
    shape_columns        name[],                 -- key, validity, is_current, surrogate key columns
    shape_types          regtype[],              -- ... their types when registered
    shape_typmods        integer[],              -- ... and typmods
    no_overlap_constraint name,                  -- exclusion constraint scd2 made (no_overlap)
    detect               text     NOT NULL DEFAULT 'values',
    CONSTRAINT dimensions_mode_check CHECK (mode IN ('incremental', 'snapshot')),
    CONSTRAINT dimensions_detect_check CHECK (detect IN ('values', 'timestamp')),
    CONSTRAINT dimensions_business_key_check CHECK (pg_catalog.cardinality(business_key) > 0)
);
COMMENT ON TABLE scd2.dimensions IS
    'scd2 registry: the configuration of every SCD Type 2 dimension (written by scd2.register)';
SELECT pg_catalog.pg_extension_config_dump('scd2.dimensions', '');

------------------------------------------------------------------------------
-- Audit log: one row per load.
------------------------------------------------------------------------------
CREATE TABLE scd2.audit_log (
    run_id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dimension      text        NOT NULL,
    staging        text        NOT NULL,
    status         text        NOT NULL,
    effective_at   timestamptz,
    started_at     timestamptz NOT NULL,
    finished_at    timestamptz NOT NULL,
    duration       interval GENERATED ALWAYS AS (finished_at - started_at) STORED,
    source_rows    bigint NOT NULL DEFAULT 0,
    inserted       bigint NOT NULL DEFAULT 0,
    new_versions   bigint NOT NULL DEFAULT 0,
    closed         bigint NOT NULL DEFAULT 0,
    deleted        bigint NOT NULL DEFAULT 0,
    shortened      bigint NOT NULL DEFAULT 0,
    type1_updated  bigint NOT NULL DEFAULT 0,
    unchanged      bigint NOT NULL DEFAULT 0,
    duplicates     bigint NOT NULL DEFAULT 0,
    username       name        NOT NULL,
    txid           xid8,
    message        text,
    CONSTRAINT audit_log_status_check CHECK (status IN ('success', 'error', 'dry_run', 'revert', 'reverted'))
);
COMMENT ON TABLE scd2.audit_log IS
    'scd2 audit log: one row per load with its exact operation metrics';
SELECT pg_catalog.pg_extension_config_dump('scd2.audit_log', '');
SELECT pg_catalog.pg_extension_config_dump('scd2.audit_log_run_id_seq', '');

-- Everybody may read the registry and the audit log; only the extension's
-- own C code (switching to the extension owner after checking the caller's
-- rights) writes them, so a user cannot forge or alter audit rows.
GRANT USAGE ON SCHEMA scd2 TO PUBLIC;
REVOKE ALL ON scd2.dimensions, scd2.audit_log FROM PUBLIC;
GRANT SELECT ON scd2.dimensions, scd2.audit_log TO PUBLIC;

------------------------------------------------------------------------------
-- Internal C helpers.
------------------------------------------------------------------------------
CREATE FUNCTION scd2._registry_store(dimension regclass, business_key name[],
        tracked name[], type1 name[], effective_column name, delete_column name,
        mode text, staging regclass, valid_from_column name, valid_to_column name,
        is_current_column name, surrogate_key_column name, current_valid_to text)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store(regclass, name[], name[], name[], name, name, text, regclass, name, name, name, name, text) IS
    'internal: stores a validated registration (the caller must own the dimension)';

CREATE FUNCTION scd2._registry_remove(dimension regclass)
RETURNS boolean
AS 'MODULE_PATHNAME', 'scd2_registry_remove'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION scd2._registry_remove(regclass) IS
    'internal: removes a registration (the caller must own the dimension)';

CREATE FUNCTION scd2._registry_forget_dropped()
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_registry_forget_dropped'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION scd2._registry_forget_dropped() IS
    'internal: removes registrations whose dimension table no longer exists';

-- Dropping a dimension unregisters it (and a dropped default staging
-- table is forgotten), so the registry never points at a reused OID.
CREATE FUNCTION scd2._on_sql_drop()
RETURNS event_trigger
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_event_trigger_dropped_objects()
                WHERE object_type IN ('table', 'schema')) THEN
        PERFORM scd2._registry_forget_dropped();
    END IF;
END
$$;
CREATE EVENT TRIGGER scd2_forget_dropped_dimensions ON sql_drop
    EXECUTE FUNCTION scd2._on_sql_drop();

------------------------------------------------------------------------------
-- register: validate a dimension's shape, create its indexes, store it.
------------------------------------------------------------------------------
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
        order_free           boolean DEFAULT false)
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
    SELECT d.created_indexes INTO v_old FROM scd2.dimensions d WHERE d.dimension = register.dimension;
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
    PERFORM scd2._registry_store_order_free(dimension, order_free);
    RETURN dimension;
END
$register$;
COMMENT ON FUNCTION scd2.register(regclass, name[], name[], name[], name, name, text, regclass, name, name, name, name, text, boolean, boolean, text, real, text, text, boolean) IS
    'registers an SCD Type 2 dimension: validates its shape, creates the current-row and as-of indexes (and with no_overlap an exclusion constraint), stores the configuration';

------------------------------------------------------------------------------
-- no_overlap: no two versions of one key overlap, whoever writes the table.
------------------------------------------------------------------------------

-- The exclusion constraint of no_overlap:
--   EXCLUDE USING gist (key WITH =, ..., tstzrange(valid_from, valid_to, '[)') WITH &&)
-- (tsrange / daterange for timestamp / date validity).  A current row's
-- NULL valid_to is an unbounded range; 'infinity' and far-future values
-- are ordinary upper bounds.  The key's equality needs a gist operator
-- class: btree_gist's, for the built-in scalar types and enums.
CREATE FUNCTION scd2._no_overlap_definition(dimension regclass, business_key name[],
        valid_from_column name, valid_to_column name)
RETURNS text
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_col   name;
    v_type  oid;
    v_elems text[] := '{}';
    v_range text;
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_extension WHERE extname = 'btree_gist') THEN
        RAISE EXCEPTION 'no_overlap needs the btree_gist extension'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'The exclusion constraint compares business keys with = in a gist index; btree_gist provides that for scalar types.',
                  HINT = 'Run CREATE EXTENSION btree_gist in this database (it is part of PostgreSQL''s contrib), then register again.';
    END IF;
    FOREACH v_col IN ARRAY business_key LOOP
        SELECT a.atttypid INTO v_type FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = dimension AND a.attname = v_col AND a.attnum > 0 AND NOT a.attisdropped;
        -- A domain compares as its base type.
        WHILE (SELECT t.typtype FROM pg_catalog.pg_type t WHERE t.oid = v_type) = 'd' LOOP
            SELECT t.typbasetype INTO v_type FROM pg_catalog.pg_type t WHERE t.oid = v_type;
        END LOOP;
        -- Only types whose = is pg_catalog's (so OPERATOR(pg_catalog.=) is
        -- the equality scd2 itself uses for the key) and that have a
        -- default gist operator class, directly or by binary coercion.
        IF NOT EXISTS (
            SELECT FROM pg_catalog.pg_type t
             WHERE t.oid = v_type AND (t.typnamespace = 'pg_catalog'::regnamespace OR t.typtype = 'e')
               AND EXISTS (
                   SELECT FROM pg_catalog.pg_opclass c
                     JOIN pg_catalog.pg_am am ON am.oid = c.opcmethod AND am.amname = 'gist'
                    WHERE c.opcdefault
                      AND (c.opcintype = v_type
                           OR (t.typtype = 'e' AND c.opcintype = 'anyenum'::regtype)
                           OR EXISTS (SELECT FROM pg_catalog.pg_cast k
                                       WHERE k.castsource = v_type AND k.casttarget = c.opcintype
                                         AND k.castmethod = 'b' AND k.castcontext = 'i')))) THEN
            RAISE EXCEPTION 'business key column % of % cannot take part in the no_overlap constraint',
                            pg_catalog.quote_ident(v_col), dimension
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = pg_catalog.format('Its type %s has no gist operator class for the built-in equality.',
                                                 v_type::regtype),
                      HINT = 'btree_gist supports integer, numeric, text, varchar, uuid, date and timestamp keys, among others; register without no_overlap for other key types.';
        END IF;
        v_elems := v_elems || pg_catalog.format('%I WITH OPERATOR(pg_catalog.=)', v_col);
    END LOOP;
    v_range := CASE scd2._column_type(dimension, valid_from_column, 'valid_from_column')
                   WHEN 'timestamptz'::regtype THEN 'tstzrange'
                   WHEN 'timestamp'::regtype THEN 'tsrange'
                   ELSE 'daterange' END;
    RETURN pg_catalog.format('EXCLUDE USING gist (%s, pg_catalog.%s(%I, %I, ''[)'') WITH OPERATOR(pg_catalog.&&))',
                             pg_catalog.array_to_string(v_elems, ', '), v_range,
                             valid_from_column, valid_to_column);
END
$$;

-- Drops the constraint a previous registration made (when it is still
-- there) and, when wanted, adds this registration's; returns its name or
-- NULL.  Adding it checks the existing history: overlapping versions are
-- an error naming them, and nothing is registered.
CREATE FUNCTION scd2._no_overlap_replace(dimension regclass, business_key name[],
        valid_from_column name, valid_to_column name, wanted boolean, previous name)
RETURNS name
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    v_def    text;
    v_name   name;
    v_detail text;
BEGIN
    IF wanted THEN
        v_def := scd2._no_overlap_definition(dimension, business_key, valid_from_column, valid_to_column);
    END IF;
    IF previous IS NOT NULL AND EXISTS (SELECT FROM pg_catalog.pg_constraint
                                         WHERE conrelid = dimension AND conname = previous AND contype = 'x') THEN
        EXECUTE pg_catalog.format('ALTER TABLE %s DROP CONSTRAINT %I', dimension, previous);
    END IF;
    IF NOT wanted THEN
        RETURN NULL;
    END IF;
    v_name := scd2._choose_index_name(dimension, 'scd2_no_overlap');
    BEGIN
        EXECUTE pg_catalog.format('ALTER TABLE %s ADD CONSTRAINT %I %s', dimension, v_name, v_def);
    EXCEPTION WHEN exclusion_violation THEN
        GET STACKED DIAGNOSTICS v_detail = PG_EXCEPTION_DETAIL;
        RAISE EXCEPTION 'versions of % overlap: no_overlap cannot be enforced', dimension
            USING ERRCODE = 'exclusion_violation',
                  DETAIL = v_detail,
                  HINT = 'Repair the overlapping versions (each key''s versions must follow each other, valid_to of one at or before valid_from of the next), then register again.';
    END;
    RETURN v_name;
END
$$;

-- Type of a column of a table, or a clear error naming it.
CREATE FUNCTION scd2._column_type(rel regclass, col name, what text)
RETURNS regtype
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
    t regtype;
BEGIN
    SELECT atttypid INTO t FROM pg_catalog.pg_attribute
     WHERE attrelid = rel AND attname = col AND attnum > 0 AND NOT attisdropped;
    IF t IS NULL THEN
        RAISE EXCEPTION 'column "%" does not exist in %', col, rel
            USING ERRCODE = 'undefined_column',
                  DETAIL = pg_catalog.format('It was given as %s.', what),
                  HINT = 'Column names are case sensitive; pass them exactly as they appear in the table.';
    END IF;
    RETURN t;
END
$$;

-- An index of rel that enforces and serves what scd2.register would
-- create, found by its definition: a valid unique btree, no expressions,
-- its key columns exactly keyatts in order with their columns' collations
-- and default operator classes, the partial-index predicate pred (NULL:
-- none), and the columns covers among its columns.  One scd2 created
-- (named in prefer) wins over another that fits as well.
CREATE FUNCTION scd2._find_index(rel regclass, keyatts int2[], pred text, covers int2[], prefer name[])
RETURNS regclass
LANGUAGE sql STABLE
SET search_path = pg_catalog, pg_temp
AS $$
SELECT i.indexrelid::pg_catalog.regclass
  FROM pg_catalog.pg_index i
  JOIN pg_catalog.pg_class ic ON ic.oid OPERATOR(pg_catalog.=) i.indexrelid
  JOIN pg_catalog.pg_am am ON am.oid OPERATOR(pg_catalog.=) ic.relam
 WHERE i.indrelid OPERATOR(pg_catalog.=) rel AND am.amname OPERATOR(pg_catalog.=) 'btree'
   AND i.indisunique AND i.indisvalid AND i.indisready AND i.indimmediate
   AND i.indexprs IS NULL
   AND i.indnkeyatts OPERATOR(pg_catalog.=) pg_catalog.cardinality(keyatts)
   AND (i.indkey::pg_catalog.int2[])[0:pg_catalog.cardinality(keyatts) OPERATOR(pg_catalog.-) 1]
       OPERATOR(pg_catalog.=) keyatts
   AND pg_catalog.pg_get_expr(i.indpred, i.indrelid) IS NOT DISTINCT FROM pred
   AND covers OPERATOR(pg_catalog.<@) i.indkey::pg_catalog.int2[]
   AND NOT EXISTS (
        SELECT FROM pg_catalog.generate_series(0, i.indnkeyatts OPERATOR(pg_catalog.-) 1) j
          JOIN pg_catalog.pg_attribute a
            ON a.attrelid OPERATOR(pg_catalog.=) rel AND a.attnum OPERATOR(pg_catalog.=) i.indkey[j]
          JOIN pg_catalog.pg_opclass oc ON oc.oid OPERATOR(pg_catalog.=) i.indclass[j]
         WHERE i.indcollation[j] OPERATOR(pg_catalog.<>) a.attcollation OR NOT oc.opcdefault
                OR i.indoption[j] OPERATOR(pg_catalog.<>) 0)
 ORDER BY ic.relname OPERATOR(pg_catalog.=) ANY (prefer) DESC, i.indexrelid
 LIMIT 1
$$;
COMMENT ON FUNCTION scd2._find_index(regclass, int2[], text, int2[], name[]) IS
    'internal: an index of a dimension that fits what scd2.register would create, found by definition';

CREATE FUNCTION scd2._choose_index_name(dimension regclass, label text)
RETURNS name
AS 'MODULE_PATHNAME', 'scd2_choose_index_name'
LANGUAGE C STRICT VOLATILE;
COMMENT ON FUNCTION scd2._choose_index_name(regclass, text) IS
    'internal: a free name for a new index of a dimension, chosen as PostgreSQL chooses one (table name, label, a number if taken)';

CREATE FUNCTION scd2._registry_store_more(dimension regclass, created_indexes name[],
        no_overlap_constraint name, detect text)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_more'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store_more(regclass, name[], name, text) IS
    'internal: records what scd2.register stores beyond the 0.2 registration: the indexes and the no_overlap constraint it created, the change detection, and the shape the dimension was registered with (the caller must own the dimension)';

------------------------------------------------------------------------------
-- unregister
------------------------------------------------------------------------------
CREATE FUNCTION scd2.unregister(dimension regclass)
RETURNS boolean
LANGUAGE sql
SET search_path = pg_catalog, pg_temp
AS $$ SELECT scd2._registry_remove(dimension) $$;
COMMENT ON FUNCTION scd2.unregister(regclass) IS
    'removes a dimension from the registry (its rows and indexes are left alone)';

------------------------------------------------------------------------------
-- create_dimension: a dimension table shaped after a staging table.
------------------------------------------------------------------------------
CREATE FUNCTION scd2._create_dimension(
        default_schema       name,
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
LANGUAGE plpgsql
SET search_path = pg_catalog, pg_temp
AS $create$
DECLARE
    v_parts   text[];
    v_target  text;
    v_cols    text;
    v_vt_def  text := '';
    v_dim     regclass;
    v_missing name;
BEGIN
    IF "like" IS NULL OR dimension IS NULL THEN
        RAISE EXCEPTION 'dimension and like must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    v_parts := pg_catalog.parse_ident(dimension);
    IF pg_catalog.cardinality(v_parts) > 2 THEN
        RAISE EXCEPTION 'invalid dimension name "%"', dimension
            USING ERRCODE = 'invalid_name', HINT = 'Give a table name, optionally schema-qualified.';
    END IF;
    -- An unqualified name goes to the caller's current schema (the
    -- function itself runs with a pinned search_path).
    IF pg_catalog.cardinality(v_parts) = 1 THEN
        IF default_schema IS NULL THEN
            RAISE EXCEPTION 'no schema has been selected to create in'
                USING ERRCODE = 'invalid_schema_name',
                      HINT = 'Schema-qualify the dimension name, or set search_path.';
        END IF;
        v_parts := ARRAY[default_schema::text] || v_parts;
    END IF;
    v_target := pg_catalog.format('%I.%I', v_parts[1], v_parts[2]);

    SELECT k INTO v_missing FROM pg_catalog.unnest(business_key) k
     WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_attribute
                        WHERE attrelid = "like" AND attname = k AND attnum > 0 AND NOT attisdropped)
     LIMIT 1;
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'business key column "%" does not exist in %', v_missing, "like"
            USING ERRCODE = 'undefined_column';
    END IF;

    -- Every staging column but the load metadata (effective time, delete
    -- marker), with its type and collation; keys NOT NULL.
    SELECT pg_catalog.string_agg(
               pg_catalog.format('%I %s%s%s', a.attname,
                   pg_catalog.format_type(a.atttypid, a.atttypmod),
                   CASE WHEN a.attcollation <> 0 AND a.attcollation <> t.typcollation
                        THEN ' COLLATE ' || (SELECT pg_catalog.format('%I.%I', n.nspname, c.collname)
                                               FROM pg_catalog.pg_collation c
                                               JOIN pg_catalog.pg_namespace n ON n.oid = c.collnamespace
                                              WHERE c.oid = a.attcollation)
                        ELSE '' END,
                   CASE WHEN a.attname = ANY (business_key) THEN ' NOT NULL' ELSE '' END),
               ', ' ORDER BY a.attnum)
      INTO v_cols
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
     WHERE a.attrelid = "like" AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attname IS DISTINCT FROM effective_column
       AND a.attname IS DISTINCT FROM delete_column;

    IF current_valid_to IS DISTINCT FROM 'null' THEN
        v_vt_def := pg_catalog.format(' NOT NULL DEFAULT %L', current_valid_to);
    END IF;
    EXECUTE pg_catalog.format(
        'CREATE TABLE %s (%I bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, %s, '
        '%I timestamptz NOT NULL, %I timestamptz%s, %I boolean NOT NULL DEFAULT true)',
        v_target, surrogate_key_column, v_cols,
        valid_from_column, valid_to_column, v_vt_def, is_current_column);
    v_dim := v_target::regclass;

    PERFORM scd2.register(v_dim, business_key,
                          tracked => tracked, type1 => type1,
                          effective_column => effective_column, delete_column => delete_column,
                          mode => mode,
                          -- a temporary staging table gives the shape, but
                          -- is no default for apply_all (it would be gone)
                          staging => CASE WHEN (SELECT c.relpersistence FROM pg_catalog.pg_class c
                                                 WHERE c.oid = "like") = 't'
                                          THEN NULL ELSE "like" END,
                          valid_from_column => valid_from_column, valid_to_column => valid_to_column,
                          is_current_column => is_current_column,
                          surrogate_key_column => surrogate_key_column,
                          current_valid_to => current_valid_to,
                          no_overlap => no_overlap);
    RETURN v_dim;
END
$create$;

CREATE FUNCTION scd2.create_dimension(
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
LANGUAGE sql
AS $$ SELECT scd2._create_dimension(pg_catalog.current_schema(), $1, $2, $3, $4, $5, $6, $7,
                                    $8, $9, $10, $11, $12, $13, $14) $$;
COMMENT ON FUNCTION scd2.create_dimension(text, regclass, name[], name[], name[], name, name, text, name, name, name, name, text, boolean) IS
    'creates a dimension table shaped after a staging table (identity surrogate key, validity columns) and registers it';

------------------------------------------------------------------------------
-- Loads.
------------------------------------------------------------------------------
CREATE FUNCTION scd2.merge(
        staging      regclass,
        dimension    regclass,
        effective_at timestamptz DEFAULT pg_catalog.now(),
        dry_run      boolean     DEFAULT false)
RETURNS TABLE (action text, surrogate_key bigint, business_key jsonb,
               valid_from timestamptz, valid_to timestamptz)
AS 'MODULE_PATHNAME', 'scd2_merge'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION scd2.merge(regclass, regclass, timestamptz, boolean) IS
    'loads a staging table into a registered SCD Type 2 dimension with one MERGE and returns the change feed';

CREATE PROCEDURE scd2.apply(
        staging      regclass,
        dimension    regclass,
        effective_at timestamptz DEFAULT pg_catalog.now(),
        INOUT run_id bigint      DEFAULT NULL)
AS 'MODULE_PATHNAME', 'scd2_apply'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply(regclass, regclass, timestamptz, bigint) IS
    'loads a staging table into a registered SCD Type 2 dimension with one MERGE; logs the run and returns its id';

------------------------------------------------------------------------------
-- As-of lookup for fact loads.
------------------------------------------------------------------------------
CREATE FUNCTION scd2.asof(dimension regclass, at timestamptz, VARIADIC business_key "any")
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_asof'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION scd2.asof(regclass, timestamptz, "any") IS
    'the surrogate key of the version of a business key valid at an instant (valid_from <= at < valid_to), or NULL';

------------------------------------------------------------------------------
-- apply_all: every registered dimension from its default staging table.
------------------------------------------------------------------------------
CREATE PROCEDURE scd2.apply_all(effective_at timestamptz DEFAULT pg_catalog.now())
AS 'MODULE_PATHNAME', 'scd2_apply_all'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply_all(timestamptz) IS
    'loads every registered dimension from its registered staging table; at top level commits after each dimension, logs failures and raises an error naming them';

------------------------------------------------------------------------------
-- Change log: what each load changed (before-images of the rows it updated,
-- identities of the rows it inserted), so that scd2.revert can undo it and
-- scd2.changes can read its change feed again.  Written only by the
-- extension (as its owner) in the load's transaction; pruned explicitly
-- with scd2.prune_change_log.
------------------------------------------------------------------------------
CREATE TABLE scd2.change_log_runs (
    run_id               bigint      PRIMARY KEY,   -- scd2.audit_log.run_id of the load
    dimension            regclass    NOT NULL,
    -- the registration as the load used it: how the change log's rows
    -- name the dimension's rows and columns
    key_columns          name[]      NOT NULL,
    valid_from_column    name        NOT NULL,
    valid_to_column      name        NOT NULL,
    is_current_column    name,
    surrogate_key_column name,
    type1_columns        name[]      NOT NULL,
    current_valid_to     text        NOT NULL,
    logged               boolean     NOT NULL,      -- false: loaded with scd2.change_log = off
    logged_at            timestamptz NOT NULL DEFAULT pg_catalog.now(),
    pruned_at            timestamptz,               -- set by scd2.prune_change_log
    reverted_by          bigint                     -- run_id of the revert
);
COMMENT ON TABLE scd2.change_log_runs IS
    'scd2 change log: one row per load that wrote a dimension (the registration it used, whether its change log was pruned, which run reverted it)';
SELECT pg_catalog.pg_extension_config_dump('scd2.change_log_runs', '');

-- Validity values are kept as timestamptz: a timestamp or date column's
-- value as that instant in UTC, so it reads back exactly.
CREATE TABLE scd2.change_log (
    run_id         bigint      NOT NULL,
    action         text        NOT NULL,         -- as in the change feed of scd2.merge
    inserted       boolean     NOT NULL,         -- a row the load inserted; else one it updated
    surrogate_key  bigint,                       -- of an updated row, or of an inserted row once reverted
    business_key   jsonb       NOT NULL,
    valid_from     timestamptz NOT NULL,         -- the row's valid_from
    valid_to       timestamptz,                  -- its valid_to after the load; NULL: current
    old_valid_to   timestamptz,                  -- an updated row's values before the load
    old_is_current boolean,
    old_type1      jsonb
);
CREATE INDEX change_log_run_id_idx ON scd2.change_log (run_id);
COMMENT ON TABLE scd2.change_log IS
    'scd2 change log: one row per dimension row a load wrote, with the before-image of what it updated';
SELECT pg_catalog.pg_extension_config_dump('scd2.change_log', '');

-- The runs are public like the audit log; the rows hold dimension data and
-- are read through scd2.changes and scd2.revert, which check the caller's
-- rights on the dimension.
REVOKE ALL ON scd2.change_log_runs, scd2.change_log FROM PUBLIC;
GRANT SELECT ON scd2.change_log_runs TO PUBLIC;

------------------------------------------------------------------------------
-- On a bad day: undo a load, read a past run's changes, see the dimension
-- as it was.
------------------------------------------------------------------------------
CREATE FUNCTION scd2.revert(run_id bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_revert'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.revert(bigint) IS
    'undoes the newest successful load of a dimension exactly (deletes the versions it inserted, restores what it updated); returns the revert''s own run id';

CREATE FUNCTION scd2.changes(run_id bigint)
RETURNS TABLE (action text, surrogate_key bigint, business_key jsonb,
               valid_from timestamptz, valid_to timestamptz)
AS 'MODULE_PATHNAME', 'scd2_changes'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2.changes(bigint) IS
    'the change feed of a past run (the rows scd2.merge returned), from the change log';

CREATE FUNCTION scd2.prune_change_log(older_than interval, dimension regclass DEFAULT NULL)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_prune_change_log'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.prune_change_log(interval, regclass) IS
    'deletes the change log of the runs logged more than older_than ago (of one dimension, or of every dimension the caller owns); returns the number of runs pruned, which can no longer be reverted';

CREATE FUNCTION scd2.dimension_at(dimension anyelement, at timestamptz)
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
COMMENT ON FUNCTION scd2.dimension_at(anyelement, timestamptz) IS
    'every key''s version valid at an instant (valid_from <= at < valid_to), in the dimension''s row type: SELECT * FROM scd2.dimension_at(NULL::dim, at)';

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
-- the dimensions the live headers name, one probe each: the trigger also
-- marks those dropped while it did not fire (src/catalog/dimensions.c)
CREATE INDEX change_log_runs_live_dimension_idx ON scd2.change_log_runs (dimension)
    WHERE dimension_dropped_at IS NULL;
-- Issue 27: the partial-extract guard (register's max_close_fraction).
------------------------------------------------------------------------------
ALTER TABLE scd2.dimensions ADD COLUMN max_close_fraction real
    CONSTRAINT dimensions_max_close_fraction_check
    CHECK (max_close_fraction >= 0 AND max_close_fraction <= 1);
COMMENT ON COLUMN scd2.dimensions.max_close_fraction IS
    'the largest fraction of the current keys one load may close or delete (NULL: no limit; scd2.allow_large_close lets one load through)';

CREATE FUNCTION scd2._registry_store_guard(dimension regclass, max_close_fraction real)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_guard'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store_guard(regclass, real) IS
    'internal: records the max_close_fraction of a registration (the caller must own the dimension)';

------------------------------------------------------------------------------
-- Issue 27: rewind -- every successful load after a run or a time undone,
-- newest first, each as scd2.revert undoes it.
------------------------------------------------------------------------------
CREATE FUNCTION scd2.rewind(dimension regclass, to_run bigint)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_rewind_to_run'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.rewind(regclass, bigint) IS
    'undoes every successful load of a dimension after run to_run, newest first, each as scd2.revert would; returns the number of runs undone';

CREATE FUNCTION scd2.rewind(dimension regclass, to_time timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_rewind_to_time'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.rewind(regclass, timestamptz) IS
    'undoes every successful load of a dimension that finished after to_time, newest first, each as scd2.revert would; returns the number of runs undone';

------------------------------------------------------------------------------
-- Issue 27: apply_snapshots -- many full extracts in one staging table, one
-- snapshot-mode load per extract, ascending, in one call.
------------------------------------------------------------------------------
CREATE PROCEDURE scd2.apply_snapshots(staging regclass, dimension regclass, snapshot_column name)
AS 'MODULE_PATHNAME', 'scd2_apply_snapshots'
LANGUAGE C;
COMMENT ON PROCEDURE scd2.apply_snapshots(regclass, regclass, name) IS
    'applies every extract of a staging table (its rows tagged with the extract''s time in snapshot_column) as one snapshot-mode load per extract, in ascending order, in one transaction';

------------------------------------------------------------------------------
-- Issue 27: the dimension as it was known at an instant, from the change log.
------------------------------------------------------------------------------
CREATE FUNCTION scd2._known_at_undo(dimension regclass, known_at timestamptz)
RETURNS TABLE (business_key jsonb, valid_from timestamptz, inserted boolean,
               old_valid_to timestamptz, old_is_current boolean, old_type1 jsonb)
AS 'MODULE_PATHNAME', 'scd2_known_at_undo'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2._known_at_undo(regclass, timestamptz) IS
    'internal: what scd2.dimension_at(..., known_at) undoes: the rows the loads finished after known_at inserted, and the before-images of the rows they updated; one row with business_key NULL: every row (a first load into the empty dimension is undone) (needs SELECT on the dimension)';

-- The text forms are the change log's (history/changelog.c, scd2_pin_text_forms),
-- so its jsonb values read back as written.
CREATE FUNCTION scd2.dimension_at(dimension anyelement, at timestamptz, known_at timestamptz)
RETURNS SETOF anyelement
LANGUAGE plpgsql STABLE
SET search_path = pg_catalog, pg_temp
SET DateStyle = 'ISO, YMD'
SET IntervalStyle = 'postgres'
SET extra_float_digits = 1
SET lc_monetary = 'C'
AS $$
DECLARE
    v_rel    regclass;
    v_reg    scd2.dimensions;
    v_type   regtype;
    v_cols   text := '';
    v_key    text := '';
    v_vt     text;
    v_att    record;
    v_decode text;
    v_unsafe text;
    v_type1  name[];
BEGIN
    SELECT t.typrelid INTO v_rel FROM pg_catalog.pg_type t
     WHERE t.oid = pg_catalog.pg_typeof(dimension) AND t.typrelid <> 0;
    IF v_rel IS NULL THEN
        RAISE EXCEPTION 'scd2.dimension_at takes a row of a dimension table, not %', pg_catalog.pg_typeof(dimension)
            USING ERRCODE = 'datatype_mismatch',
                  HINT = 'Pass a NULL of the dimension''s row type, e.g. scd2.dimension_at(NULL::dim_customer, ''2024-06-01'', ''2024-07-01'').';
    END IF;
    SELECT * INTO v_reg FROM scd2.dimensions d WHERE d.dimension = v_rel;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'table % is not a registered scd2 dimension', v_rel
            USING ERRCODE = 'undefined_object',
                  HINT = 'Register it first with scd2.register().';
    END IF;
    IF at IS NULL OR known_at IS NULL THEN
        RAISE EXCEPTION 'at and known_at must not be NULL'
            USING ERRCODE = 'null_value_not_allowed';
    END IF;
    -- issue 21: the registered shape holds (only built-in casts below)
    PERFORM scd2._check_dimension_read(v_rel);
    -- the Type 1 columns of every run: the registration's, and the columns
    -- a load added to the dimension (issue 28), whose before-images it
    -- logged as Type 1 values
    SELECT v_reg.type1 || COALESCE(pg_catalog.array_agg(DISTINCT c), '{}') INTO v_type1
      FROM scd2.change_log_runs r, pg_catalog.unnest(r.type1_columns) c
     WHERE r.dimension = v_rel AND c <> ALL (v_reg.type1);
    -- The reconstruction runs as the caller (its own SELECT, its policies):
    -- it builds the key's jsonb (a cast to json of the key's type) and reads
    -- Type 1 before-images back (a domain's CHECK).  Code a role other
    -- than a superuser wrote must not run there, as the caller.
    SELECT pg_catalog.format('column %I: %s', a.attname, x.why) INTO v_unsafe
      FROM pg_catalog.pg_attribute a
      JOIN pg_catalog.pg_type t ON t.oid = a.atttypid
      CROSS JOIN LATERAL (
          SELECT pg_catalog.format('its type %s has a cast to %s by function %s', t.oid::regtype, c.casttarget::regtype, c.castfunc::regprocedure) AS why
            FROM pg_catalog.pg_cast c JOIN pg_catalog.pg_proc p ON p.oid = c.castfunc
            JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
           WHERE c.castsource IN (t.oid, t.typbasetype) AND c.casttarget IN ('json'::regtype, 'jsonb'::regtype)
             AND NOT r.rolsuper
          UNION ALL
          SELECT pg_catalog.format('its type %s is a domain with a CHECK constraint', t.oid::regtype)
           WHERE EXISTS (SELECT FROM pg_catalog.pg_constraint k
                          WHERE k.contypid IN (t.oid, t.typelem) AND k.contypid <> 0
                            AND k.contype = 'c')) x
     WHERE a.attrelid = v_rel AND a.attnum > 0 AND NOT a.attisdropped
       AND a.attname = ANY (v_reg.business_key || v_type1)
     LIMIT 1;
    IF v_unsafe IS NOT NULL THEN
        RAISE EXCEPTION 'scd2.dimension_at cannot reconstruct dimension % as known at an instant', v_rel
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = pg_catalog.format('The reconstruction runs as its caller and would run the dimension owner''s code: %s.', v_unsafe),
                  HINT = 'Use the two-argument scd2.dimension_at, or scd2.changes of the later runs.';
    END IF;
    v_type := scd2._column_type(v_rel, v_reg.valid_from_column, 'valid_from_column');
    -- a validity value of the change log (timestamptz; a date or timestamp as that instant in UTC)
    v_decode := CASE v_type WHEN 'timestamptz'::regtype THEN '%s'
                            WHEN 'timestamp'::regtype THEN 'pg_catalog.timezone(''UTC''::pg_catalog.text, %s)'
                            ELSE 'CAST(pg_catalog.timezone(''UTC''::pg_catalog.text, %s) AS pg_catalog.date)' END;
    v_vt := pg_catalog.format('CASE WHEN u.valid_from IS NULL THEN d.%I ELSE %s END',
                              v_reg.valid_to_column, pg_catalog.format(v_decode, 'u.old_valid_to'));
    -- every column as the later loads found it: valid_to, is_current and
    -- the Type 1 columns from the earliest before-image
    FOR v_att IN SELECT a.attname FROM pg_catalog.pg_attribute a
                  WHERE a.attrelid = v_rel AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum LOOP
        v_cols := v_cols || CASE WHEN v_cols = '' THEN '' ELSE ', ' END || CASE
            WHEN v_att.attname = v_reg.valid_to_column THEN v_vt
            WHEN v_att.attname = v_reg.is_current_column THEN
                pg_catalog.format('CASE WHEN u.valid_from IS NULL THEN d.%1$I ELSE u.old_is_current END', v_att.attname)
            WHEN v_att.attname = ANY (v_type1) THEN
                pg_catalog.format('CASE WHEN u.old_type1 OPERATOR(pg_catalog.?) %1$L'
                                  ' THEN (pg_catalog.jsonb_populate_record(d, u.old_type1)).%1$I ELSE d.%1$I END',
                                  v_att.attname, v_rel)
            ELSE pg_catalog.format('d.%I', v_att.attname) END;
    END LOOP;
    SELECT pg_catalog.string_agg(pg_catalog.format('%L, d.%I', k, k), ', ' ORDER BY o)
      INTO v_key FROM pg_catalog.unnest(v_reg.business_key) WITH ORDINALITY AS x(k, o);
    -- a row with business key NULL: a first load into the empty dimension
    -- is undone, and with it every row there is now
    RETURN QUERY EXECUTE pg_catalog.format(
        'WITH "scd2 undo" AS MATERIALIZED (SELECT * FROM scd2._known_at_undo(%L, $2))'
        ' SELECT %s FROM %s d LEFT JOIN "scd2 undo" u'
        '    ON pg_catalog.jsonb_build_object(%s) OPERATOR(pg_catalog.=) u.business_key'
        '   AND d.%I OPERATOR(pg_catalog.=) %s'
        ' WHERE NOT COALESCE(u.inserted, false)'
        '   AND NOT EXISTS (SELECT FROM "scd2 undo" w WHERE w.business_key IS NULL)'
        '   AND d.%I OPERATOR(pg_catalog.<=) CAST($1 AS %s)'
        '   AND (%s IS NULL OR %s OPERATOR(pg_catalog.>) CAST($1 AS %s))',
        v_rel, v_cols, v_rel, v_key, v_reg.valid_from_column, pg_catalog.format(v_decode, 'u.valid_from'),
        v_reg.valid_from_column, v_type, v_vt, v_vt, v_type) USING at, known_at;
END
$$;
COMMENT ON FUNCTION scd2.dimension_at(anyelement, timestamptz, timestamptz) IS
    'the dimension valid at an instant as the loads finished by known_at had recorded it (later loads undone in the result, from the change log): SELECT * FROM scd2.dimension_at(NULL::dim, at, known_at)';
-- Issue 22 (nothing lost, nothing doubled): the change log keeps Type 1
-- before-images as each type's text form (a json value verbatim); runs
-- logged before 0.4 kept them as jsonb values.
------------------------------------------------------------------------------
ALTER TABLE scd2.change_log_runs
    ADD COLUMN old_type1_text boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN scd2.change_log_runs.old_type1_text IS
    'true: the run''s scd2.change_log.old_type1 holds each Type 1 value''s text form (0.4 on); false: jsonb values (0.3)';

------------------------------------------------------------------------------
-- Issue 22: a staging table that lacks a column of the dimension.
-- missing_columns 'error' (the default) refuses the load and names the
-- columns; 'carry_forward' gives new versions the current version's value
-- of each missing column (partial extracts).  A dimension column with a
-- default, an identity or a generated column is never missing: its
-- default fills it.
------------------------------------------------------------------------------
ALTER TABLE scd2.dimensions
    ADD COLUMN missing_columns text NOT NULL DEFAULT 'error',
    ADD CONSTRAINT dimensions_missing_columns_check CHECK (missing_columns IN ('error', 'carry_forward'));

CREATE FUNCTION scd2._registry_store_missing_columns(dimension regclass, missing_columns text)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_missing_columns'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store_missing_columns(regclass, text) IS
    'internal: validates and records scd2.register''s missing_columns, what a load does with a dimension column its staging table lacks (the caller must own the dimension)';
-- ---------------------------------------------------------------------------
-- Issue 25: progress of a running load (src/load/progress.c writes the text
-- this view reads; keep the pattern in step with it).
CREATE VIEW scd2.load_progress WITH (security_invoker = true) AS
SELECT a.pid,
       a.datname,
       a.usename,
       m[6]::pg_catalog.oid::pg_catalog.regclass AS dimension,
       m[7]::pg_catalog.oid::pg_catalog.regclass AS staging,
       m[1] AS phase,
       NULLIF(m[2], '-')::bigint AS rows_done,
       NULLIF(m[3], '-')::bigint AS rows_total,
       NULLIF(m[4], '-')::bigint AS changes_done,
       NULLIF(m[5], '-')::bigint AS changes_total,
       a.query_start AS started_at,
       a.state_change AS phase_started_at,
       m[8] AS query
  FROM pg_catalog.pg_stat_activity a,
       LATERAL pg_catalog.regexp_match(a.query,
           '^scd2: load of .* from .*: ([a-z ]+); staging rows ([0-9]+|-) of ([0-9]+|-); '
           'changes ([0-9]+|-) of ([0-9]+|-); oids ([0-9]+) ([0-9]+); query: (.*)$') AS m
 WHERE a.state OPERATOR(pg_catalog.=) 'active' AND m IS NOT NULL;
COMMENT ON VIEW scd2.load_progress IS
    'one row per running scd2 load: its phase and counts (staging rows, changes) as of the phase''s start, from pg_stat_activity and under its visibility rules';
GRANT SELECT ON scd2.load_progress TO PUBLIC;

------------------------------------------------------------------------------
-- Issue 28: schema evolution without losing history.  on_schema_change says
-- what a load does when the staging table's columns differ from the
-- dimension's: 'ignore' (the default: extra staging columns are not loaded,
-- and the load's NOTICE and audit row name them), 'fail' (any difference is
-- refused), 'append_new_columns' (a new staging column is added to the
-- dimension), 'sync_all_columns' (also a widened type widens the dimension's
-- column).  A column is never dropped from a dimension.
------------------------------------------------------------------------------
ALTER TABLE scd2.dimensions
    ADD COLUMN on_schema_change text NOT NULL DEFAULT 'ignore',
    ADD CONSTRAINT dimensions_on_schema_change_check
        CHECK (on_schema_change IN ('ignore', 'fail', 'append_new_columns', 'sync_all_columns'));
COMMENT ON COLUMN scd2.dimensions.on_schema_change IS
    'what a load does when the staging table''s columns differ from the dimension''s: ignore, fail, append_new_columns, sync_all_columns';

CREATE FUNCTION scd2._registry_store_schema_change(dimension regclass, on_schema_change text)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_schema_change'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store_schema_change(regclass, text) IS
    'internal: validates and records scd2.register''s on_schema_change (the caller must own the dimension)';

-- filled_in_place: current versions given a new column's value in place by
-- the load that added the column; schema_change: what the load did about
-- the staging table's shape (columns ignored, added, widened).
ALTER TABLE scd2.audit_log
    ADD COLUMN filled_in_place bigint NOT NULL DEFAULT 0,
    ADD COLUMN schema_change text;
COMMENT ON COLUMN scd2.audit_log.filled_in_place IS
    'current versions given a new column''s value in place (no new version) by the load that added the column';
COMMENT ON COLUMN scd2.audit_log.schema_change IS
    'what the load did about the staging table''s shape under on_schema_change: staging columns ignored, dimension columns added or widened';

-- Issue 24: the same events give the same dimension, whatever order they
-- arrive in (register's order_free).  An order-free dimension remembers the
-- events its versions do not show -- no-op observations and deletes that
-- changed nothing when they arrived -- so that a later, earlier-dated event
-- finds them (src/load/arrival.c, docs/SEMANTICS.md "Arrival order").
------------------------------------------------------------------------------
ALTER TABLE scd2.dimensions ADD COLUMN order_free boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN scd2.dimensions.order_free IS
    'true: the dimension is a function of the set of events loaded, whatever their batching and arrival order (register''s order_free)';

CREATE TABLE scd2.arrival_memory (
    dimension    regclass    NOT NULL,   -- the dimension (dumped by name; no dependency on it: a drop forgets its rows)
    business_key jsonb,                  -- as in the change feed, computed as the dimension's owner (NULL: versions)
    effective    timestamptz NOT NULL,   -- the event's instant (a date or timestamp as that instant in UTC)
    present      boolean     NOT NULL,   -- false: a delete
    state        jsonb,                  -- a present event's tracked and other columns' text forms
    versions     bigint[],               -- or: the surrogate keys of the versions observed unchanged at that
                                         -- instant, sorted (one row for many no-op observations; each one's
                                         -- key and state are its version's)
    run_id       bigint      NOT NULL,   -- the load that remembered it
    dropped_by   bigint,                 -- the load that superseded it (NULL: remembered now)
    CHECK ((business_key IS NULL) = (versions IS NOT NULL)),
    CHECK (versions IS NULL OR (present AND state IS NULL))
);
-- the surrogate keys are written as they are: compressing them cost more
-- than the load's own writes (bench/RESULTS.md, issue 24)
ALTER TABLE scd2.arrival_memory ALTER COLUMN versions SET STORAGE EXTERNAL;
-- A key's events (the recall), a dimension's rows (the sql_drop trigger).
-- The only index with the dimension in it: whatever the statistics say of
-- a dimension (taken while only others remembered anything, they estimate
-- one row for it), the planner has no other index to read per staged key
-- by dimension alone (src/history/arrival_memory.c, memory_exec_per_row).
CREATE INDEX arrival_memory_key_idx ON scd2.arrival_memory (dimension, business_key, effective);
-- whether anything remembered is as late as a load's earliest event (an
-- in-order load then classifies its simple keys on the fast path), and prune
CREATE INDEX arrival_memory_effective_idx ON scd2.arrival_memory (effective)
    WHERE dropped_by IS NULL;
-- a run's rows (revert; a run is of one dimension)
CREATE INDEX arrival_memory_run_idx ON scd2.arrival_memory (run_id);
CREATE INDEX arrival_memory_dropped_idx ON scd2.arrival_memory (dropped_by) WHERE dropped_by IS NOT NULL;
COMMENT ON TABLE scd2.arrival_memory IS
    'scd2 arrival memory: the events of order-free dimensions that their versions do not show (no-op observations, deletes), for later out-of-order events; pruned with scd2.prune_arrival_memory';
SELECT pg_catalog.pg_extension_config_dump('scd2.arrival_memory', '');
REVOKE ALL ON scd2.arrival_memory FROM PUBLIC;

CREATE FUNCTION scd2._registry_store_order_free(dimension regclass, order_free boolean)
RETURNS void
AS 'MODULE_PATHNAME', 'scd2_registry_store_order_free'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2._registry_store_order_free(regclass, boolean) IS
    'internal: validates and records scd2.register''s order_free (the caller must own the dimension)';

CREATE FUNCTION scd2.prune_arrival_memory(dimension regclass, before timestamptz)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_prune_arrival_memory'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION scd2.prune_arrival_memory(regclass, timestamptz) IS
    'forgets the remembered events of an order-free dimension effective before an instant (and what reverted or pruned runs no longer need); returns the rows removed';

CREATE FUNCTION scd2.arrival_memory_size(dimension regclass,
    OUT remembered bigint, OUT superseded bigint,
    OUT oldest timestamptz, OUT newest timestamptz, OUT bytes bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'scd2_arrival_memory_size'
LANGUAGE C CALLED ON NULL INPUT STABLE;
COMMENT ON FUNCTION scd2.arrival_memory_size(regclass) IS
    'how much an order-free dimension remembers: live and superseded rows, the live rows'' earliest and latest instants, bytes (its owner only)';

-- The audit metrics of an order-free load: versions whose range grew
-- (valid_from moved earlier), versions a later-arriving event superseded.
ALTER TABLE scd2.audit_log
    ADD COLUMN extended bigint NOT NULL DEFAULT 0,
    ADD COLUMN removed bigint NOT NULL DEFAULT 0;

-- An order-free load's 'extend' and 'remove' rows keep the whole row as it
-- was (each column's text form), which scd2.revert writes back.
ALTER TABLE scd2.change_log ADD COLUMN old_row jsonb;
COMMENT ON COLUMN scd2.change_log.old_row IS
    'an order-free load''s extended or removed row as it was before the load (column => text form), for scd2.revert';

------------------------------------------------------------------------------
-- Issue 27: the change log at the cost floor.  A first load into an empty
-- dimension (src/load/first_load.c) inserts every row the dimension has right
-- after it; its change log says so in its header instead of one
-- scd2.change_log row per inserted version.  scd2.revert writes those rows
-- into scd2.change_log as it deletes them (the column is then NULL);
-- scd2.changes and scd2.dimension_at(..., known_at) read the rows from the
-- dimension and the later runs' change logs (src/history/compact.c).
------------------------------------------------------------------------------
ALTER TABLE scd2.change_log_runs ADD COLUMN first_load_rows bigint;
COMMENT ON COLUMN scd2.change_log_runs.first_load_rows IS
    'a first load into an empty dimension, logged compactly: it inserted every row the dimension had right after it, this many, and scd2.change_log holds none of them (NULL: the run''s rows are in scd2.change_log)';

------------------------------------------------------------------------------
-- Issue 27: a batch at the cost floor.  A load whose every write is an
-- in-order change of a current version (it closes current versions and
-- inserts new current ones, no Type 1 update, no late row) logs, instead of
-- one scd2.change_log row per written version, the surrogate keys of the
-- rows it wrote, what it did to each and the valid_to it left; the rest
-- (business key, valid_from, the closed rows' before-images: current, Type
-- 1 unchanged) is read back from the dimension (src/load/batch_log.c).
-- scd2.revert writes the rows into scd2.change_log before it undoes them.
------------------------------------------------------------------------------
CREATE TABLE scd2.change_log_batches (
    run_id         bigint        PRIMARY KEY,   -- scd2.change_log_runs.run_id
    surrogate_keys bigint[]      NOT NULL,      -- of every row the run wrote
    actions        "char"[]      NOT NULL,      -- i insert, n new_version, c close, d delete
    valid_to       timestamptz[] NOT NULL,      -- each row's valid_to after the run; NULL: current
    business_keys  jsonb[],                     -- the business key and valid_from of each row a later
    valid_from     timestamptz[]                -- order-free load moved or removed, pinned by it (else NULL)
);
COMMENT ON TABLE scd2.change_log_batches IS
    'scd2 change log: a batch logged by the surrogate keys of the rows it wrote (one row per run; scd2.change_log holds none of its rows)';
-- uncompressed: pglz made writing a 200k-row batch's arrays (50k rows
-- written) take 30-40 ms, a quarter of what logging it costs
ALTER TABLE scd2.change_log_batches ALTER COLUMN surrogate_keys SET STORAGE EXTERNAL,
    ALTER COLUMN actions SET STORAGE EXTERNAL, ALTER COLUMN valid_to SET STORAGE EXTERNAL,
    ALTER COLUMN business_keys SET STORAGE EXTERNAL, ALTER COLUMN valid_from SET STORAGE EXTERNAL;
SELECT pg_catalog.pg_extension_config_dump('scd2.change_log_batches', '');
REVOKE ALL ON scd2.change_log_batches FROM PUBLIC;

------------------------------------------------------------------------------
-- Issue 27: a load's comparison of a staged row with its key's current
-- version, in one call per row (common/not_distinct.c; the SQL form's
-- expression steps cost more than the comparisons themselves).
------------------------------------------------------------------------------
CREATE FUNCTION scd2._not_distinct(VARIADIC "any")
RETURNS boolean
AS 'MODULE_PATHNAME', 'scd2_not_distinct'
LANGUAGE C STABLE PARALLEL SAFE;
COMMENT ON FUNCTION scd2._not_distinct("any") IS
    'internal: whether every pair of arguments (a1, b1, a2, b2, ...) is NOT DISTINCT by its type''s default equality, as a load compares a staged row with its current version';

-- A load's check for keys with several staging rows (common/repeats.c): the
-- rows whose value an earlier row had, by a hash set rather than
-- count(DISTINCT)'s sort.
CREATE FUNCTION scd2._repeats_add(internal, anyelement)
RETURNS internal
AS 'MODULE_PATHNAME', 'scd2_repeats_add'
LANGUAGE C CALLED ON NULL INPUT PARALLEL RESTRICTED;
CREATE FUNCTION scd2._repeats_final(internal)
RETURNS bigint
AS 'MODULE_PATHNAME', 'scd2_repeats_final'
LANGUAGE C CALLED ON NULL INPUT PARALLEL RESTRICTED;
CREATE AGGREGATE scd2._repeats(anyelement) (
    SFUNC = scd2._repeats_add, STYPE = internal,
    FINALFUNC = scd2._repeats_final, FINALFUNC_MODIFY = READ_WRITE,
    PARALLEL = RESTRICTED);
COMMENT ON AGGREGATE scd2._repeats(anyelement) IS
    'internal: how many non-NULL values an earlier row already had (count(x) - count(DISTINCT x)), as a load checks its staged keys';

-- (0.5: the objects of scd2--0.4--0.5.sql follow.)

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
