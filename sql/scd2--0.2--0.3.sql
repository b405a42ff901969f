/* scd2 0.2 -> 0.3 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.3'" to load this file. \quit

------------------------------------------------------------------------------
-- A dimension column named like the effective column cannot be a key,
-- tracked or Type 1 column (it is copied from staging into new versions).
------------------------------------------------------------------------------
CREATE OR REPLACE FUNCTION scd2.register(
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
        create_indexes       boolean DEFAULT true)
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
    IF current_valid_to IS NULL OR current_valid_to NOT IN ('null', 'infinity') THEN
        RAISE EXCEPTION 'invalid current_valid_to "%"', current_valid_to
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use ''null'' (current rows have valid_to NULL) or ''infinity''.';
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

    IF effective_column = ANY (business_key || COALESCE(tracked, '{}') || COALESCE(type1, '{}')) THEN
        RAISE EXCEPTION 'effective column % cannot be a business key, tracked or Type 1 column', pg_catalog.quote_ident(effective_column)
            USING ERRCODE = 'invalid_parameter_value',
                  DETAIL = 'A dimension column named like the effective column is copied from staging into every new version and never compared.';
    END IF;

    IF create_indexes THEN
        SELECT pg_catalog.string_agg(pg_catalog.quote_ident(k), ', ' ORDER BY o)
          INTO v_keylist FROM pg_catalog.unnest(business_key) WITH ORDINALITY AS u(k, o);
        IF current_valid_to = 'null' THEN
            v_pred := pg_catalog.format('%I IS NULL', valid_to_column);
        ELSE
            v_pred := pg_catalog.format('%I = ''infinity''', valid_to_column);
        END IF;
        -- One current version per business key, enforced by the database.
        v_idxname := pg_catalog.left(v_rel.relname || '_scd2_current', 63);
        EXECUTE pg_catalog.format('CREATE UNIQUE INDEX IF NOT EXISTS %I ON %s (%s) WHERE %s',
                                  v_idxname, dimension, v_keylist, v_pred);
        -- The as-of index: versions of a key by start, carrying what the
        -- lookup returns so the probe can be index-only.
        v_include := pg_catalog.quote_ident(valid_to_column);
        IF v_sk IS NOT NULL THEN
            v_include := pg_catalog.quote_ident(v_sk) || ', ' || v_include;
        END IF;
        v_idxname := pg_catalog.left(v_rel.relname || '_scd2_asof', 63);
        EXECUTE pg_catalog.format('CREATE UNIQUE INDEX IF NOT EXISTS %I ON %s (%s, %I) INCLUDE (%s)',
                                  v_idxname, dimension, v_keylist, valid_from_column, v_include);
    END IF;

    PERFORM scd2._registry_store(dimension, business_key, tracked, COALESCE(type1, '{}'),
                                 effective_column, delete_column, mode, staging,
                                 valid_from_column, valid_to_column, v_is_current, v_sk,
                                 current_valid_to);
    RETURN dimension;
END
$register$;
COMMENT ON FUNCTION scd2.register(regclass, name[], name[], name[], name, name, text, regclass, name, name, name, name, text, boolean) IS
    'registers an SCD Type 2 dimension: validates its shape, creates the current-row and as-of indexes, stores the configuration';
