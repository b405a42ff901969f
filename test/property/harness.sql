/*
 * scd2 property test -- scenario generator and comparison (schema scd2_prop).
 * Loaded by test/property/run.sh after model.sql; see run.sh for usage.
 *
 * scd2_prop.run_scenario(seed, n, model_only, check_audit) builds scenario n
 * of the run with base seed `seed` (deterministic: random() after setseed),
 * applies its batches to the engine's dimension `dim` (scd2.merge) and to the
 * model's twin `mdim` (scd2_model.load), compares after every batch, and
 * returns one line 'PASS n ...' or a 'FAIL n ...' report with a replayable
 * script.  With model_only the "engine" is the model again (to exercise the
 * generator and the comparison without the extension).
 */

DROP SCHEMA IF EXISTS scd2_prop CASCADE;
CREATE SCHEMA scd2_prop;

-- Instant k of the scenario's small time axis.
CREATE FUNCTION scd2_prop.inst(k int) RETURNS timestamptz IMMUTABLE LANGUAGE sql
AS $$ SELECT '2024-01-01 00:00+00'::timestamptz + k * interval '1 day' $$;

-- A random element of a (small) array; NULL elements are values too.
CREATE FUNCTION scd2_prop.any_of(arr text[]) RETURNS text VOLATILE LANGUAGE sql
AS $$ SELECT arr[1 + floor(random() * cardinality(arr))::int] $$;

CREATE FUNCTION scd2_prop.rnd(n int) RETURNS int VOLATILE LANGUAGE sql
AS $$ SELECT floor(random() * n)::int $$;

-- A dimension's content, in a canonical order, one text per row (no surrogate key).
CREATE FUNCTION scd2_prop.snap(tbl regclass) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r text[];
BEGIN
    EXECUTE format($q$
        SELECT coalesce(array_agg(format('(%%s, %%s, %%s, %%s, %%s, %%s, %%s, %%s)',
                                         quote_nullable(id), quote_nullable(city), quote_nullable(tier),
                                         quote_nullable(phone), quote_nullable(note), quote_nullable(valid_from),
                                         quote_nullable(valid_to), quote_nullable(is_current))
                                  ORDER BY id, valid_from, valid_to, city, tier, phone, note, is_current), '{}')
          FROM %s$q$, tbl) INTO r;
    RETURN r;
END $$;

-- Rows of a that are not in b (multiset difference).
CREATE FUNCTION scd2_prop.minus(a text[], b text[]) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(x ORDER BY x), '{}')
      FROM (SELECT unnest(a) EXCEPT ALL SELECT unnest(b)) s(x)
$$;

-- Invariants of an SCD2 table; NULL when they hold.
CREATE FUNCTION scd2_prop.invariants(tbl regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format($q$
        SELECT string_agg(v, '; ') FROM (
            SELECT format('key %%s has %%s current rows', id, count(*)) FROM %1$s
             WHERE is_current OR valid_to IS NULL GROUP BY id HAVING count(*) > 1
            UNION ALL
            SELECT format('key %%s: [%%s, %%s) overlaps [%%s, %%s)', a.id, a.valid_from, a.valid_to,
                          b.valid_from, b.valid_to)
              FROM %1$s a JOIN %1$s b ON a.id = b.id AND a.sk < b.sk
             WHERE a.valid_from < coalesce(b.valid_to, 'infinity')
               AND b.valid_from < coalesce(a.valid_to, 'infinity')
            UNION ALL
            SELECT format('key %%s: valid_from %%s >= valid_to %%s', id, valid_from, valid_to) FROM %1$s
             WHERE valid_from >= valid_to
            UNION ALL
            SELECT format('key %%s at %%s: is_current %%s with valid_to %%s', id, valid_from, is_current, valid_to)
              FROM %1$s WHERE is_current IS DISTINCT FROM (valid_to IS NULL)
        ) s(v)$q$, tbl) INTO r;
    RETURN r;
END $$;

-- Metrics as compared: the nine audit metrics, from a model result.
CREATE FUNCTION scd2_prop.metrics(m jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT jsonb_build_object(
        'source_rows', (m ->> 'source_rows')::bigint, 'duplicates', (m ->> 'duplicates')::bigint,
        'inserted', (m ->> 'inserted')::bigint, 'new_versions', (m ->> 'new_versions')::bigint,
        'closed', (m ->> 'closed')::bigint, 'deleted', (m ->> 'deleted')::bigint,
        'shortened', (m ->> 'shortened')::bigint, 'type1_updated', (m ->> 'type1_updated')::bigint,
        'unchanged', (m ->> 'unchanged')::bigint)
$$;

-- Change-feed action counts implied by metrics (zeros left out).
CREATE FUNCTION scd2_prop.feed_counts(m jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(jsonb_object_agg(a, n), '{}')
      FROM (VALUES ('insert', (m ->> 'inserted')::bigint), ('new_version', (m ->> 'new_versions')::bigint),
                   ('close', (m ->> 'closed')::bigint), ('delete', (m ->> 'deleted')::bigint),
                   ('shorten', (m ->> 'shortened')::bigint), ('type1', (m ->> 'type1_updated')::bigint)) v(a, n)
     WHERE n <> 0
$$;

-- The model's change feed rows as sorted text (compared to the engine's).
CREATE FUNCTION scd2_prop.feed_rows(m jsonb) RETURNS text[] LANGUAGE sql STABLE AS $$
    SELECT coalesce(array_agg(x ORDER BY x), '{}')
      FROM (SELECT jsonb_build_object('action', e ->> 'action', 'business_key', e -> 'business_key',
                                      'valid_from', (e ->> 'valid_from')::timestamptz,
                                      'valid_to', (e ->> 'valid_to')::timestamptz)::text
              FROM jsonb_array_elements(m -> 'feed') e) s(x)
$$;

-- Fill stg with one random batch; returns it as an INSERT statement.
CREATE FUNCTION scd2_prop.gen_batch(nkeys int, ninst int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    nrows  int := scd2_prop.rnd(2 * nkeys + 3);     -- 0 .. 2*nkeys+2 rows
    cities text[] := ARRAY[NULL, '~', 'A', 'B'];
    tiers  text[] := ARRAY[NULL, '~', 'x'];
    phones text[] := ARRAY[NULL, '~', 'p1', 'p2'];
    notes  text[] := ARRAY[NULL, 'n1', 'n2'];
    x      float8;
    nver   int;
    v      record;
    v_del  boolean;
    stmt   text;
BEGIN
    TRUNCATE stg;
    FOR r IN 1 .. nrows LOOP
        x := random();
        v_del := CASE WHEN x < 0.15 THEN true WHEN x < 0.6 THEN NULL ELSE false END;
        x := random();
        IF x < 0.12 AND r > 1 THEN
            -- an exact duplicate of a row of this batch
            INSERT INTO stg SELECT * FROM stg OFFSET scd2_prop.rnd(r - 1) LIMIT 1;
        ELSIF x < 0.35 AND (SELECT count(*) FROM mdim) > 0 THEN
            -- an existing version sent again: at its valid_from (a tie) or
            -- at another instant (a late or repeated state), maybe with a
            -- new phone (Type 1)
            SELECT count(*) INTO nver FROM mdim;
            SELECT * INTO v FROM mdim ORDER BY id, valid_from OFFSET scd2_prop.rnd(nver) LIMIT 1;
            INSERT INTO stg VALUES (
                v.id, v.city, v.tier,
                CASE WHEN random() < 0.6 THEN v.phone ELSE scd2_prop.any_of(phones) END,
                scd2_prop.any_of(notes),
                CASE WHEN random() < 0.5 THEN v.valid_from ELSE scd2_prop.inst(scd2_prop.rnd(ninst)) END,
                CASE WHEN v_del THEN NULL ELSE v_del END);
        ELSE
            INSERT INTO stg VALUES (
                1 + scd2_prop.rnd(nkeys), scd2_prop.any_of(cities), scd2_prop.any_of(tiers),
                scd2_prop.any_of(phones), scd2_prop.any_of(notes),
                scd2_prop.inst(scd2_prop.rnd(ninst)), v_del);
        END IF;
    END LOOP;
    -- rare invalid input
    x := random();
    IF x < 0.015 THEN
        INSERT INTO stg VALUES (NULL, 'A', 'x', NULL, NULL, scd2_prop.inst(scd2_prop.rnd(ninst)), NULL);
    ELSIF x < 0.03 THEN
        INSERT INTO stg VALUES (1 + scd2_prop.rnd(nkeys), 'A', 'x', NULL, NULL, NULL, NULL);
    END IF;
    SELECT 'TRUNCATE stg;' || coalesce(E'\nINSERT INTO stg VALUES ' || string_agg(
               format('(%s, %s, %s, %s, %s, %s, %s)', quote_nullable(id), quote_nullable(city),
                      quote_nullable(tier), quote_nullable(phone), quote_nullable(note),
                      quote_nullable(eff), quote_nullable(del)), E',\n    ' ORDER BY ctid) || ';', '')
      INTO stmt FROM stg;
    RETURN stmt;
END $$;

-- Apply the staged batch to the model (mdim) and the engine (dim), each in
-- a subtransaction, and compare.  Returns jsonb: problem (NULL when they
-- agree), both_failed, and the details.
CREATE FUNCTION scd2_prop.step(eat timestamptz, mode text, model_only boolean, check_audit boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    m         jsonb;
    m_err     text;
    e_feed    jsonb;
    e_audit   jsonb;
    e_err     text;
    e_rows    text[];
    a0        bigint;
    before    text[];
    after     text[];
    msnap     text[];
    problem   text;
    inv       text;
BEGIN
    -- the model
    BEGIN
        m := scd2_model.load('stg', 'mdim', eat, ARRAY['id'], ARRAY['city', 'tier'], ARRAY['phone'],
                             ARRAY['note'], 'eff', 'del', mode);
    EXCEPTION WHEN OTHERS THEN
        m_err := SQLSTATE || ' ' || SQLERRM;
    END;

    -- the engine
    before := scd2_prop.snap('dim');
    BEGIN
        IF model_only THEN
            e_audit := scd2_model.load('stg', 'dim', eat, ARRAY['id'], ARRAY['city', 'tier'],
                                       ARRAY['phone'], ARRAY['note'], 'eff', 'del', mode);
            e_rows := scd2_prop.feed_rows(e_audit);
            e_audit := scd2_prop.metrics(e_audit);
            e_feed := scd2_prop.feed_counts(e_audit);
        ELSE
            SELECT coalesce(max(run_id), 0) INTO a0 FROM scd2.audit_log;
            WITH f AS MATERIALIZED (SELECT * FROM scd2.merge('stg', 'dim', effective_at => eat))
            SELECT (SELECT coalesce(jsonb_object_agg(action, cnt), '{}')
                      FROM (SELECT f.action, count(*) AS cnt FROM f GROUP BY f.action) s),
                   (SELECT coalesce(array_agg(x ORDER BY x), '{}')
                      FROM (SELECT jsonb_build_object('action', f.action, 'business_key', f.business_key,
                                                      'valid_from', f.valid_from, 'valid_to', f.valid_to)::text
                              FROM f) fr(x))
              INTO e_feed, e_rows;
            IF check_audit THEN
                SELECT scd2_prop.metrics(to_jsonb(a)) || jsonb_build_object('status', a.status)
                  INTO e_audit
                  FROM scd2.audit_log a WHERE a.run_id > a0 ORDER BY a.run_id DESC LIMIT 1;
            END IF;
        END IF;
    EXCEPTION WHEN OTHERS THEN
        e_err := SQLSTATE || ' ' || SQLERRM;
    END;
    after := scd2_prop.snap('dim');
    msnap := scd2_prop.snap('mdim');

    IF m_err IS NOT NULL OR e_err IS NOT NULL THEN
        IF m_err IS NULL THEN
            problem := 'the engine failed, the model did not: ' || e_err;
        ELSIF e_err IS NULL THEN
            problem := 'the model failed, the engine did not: ' || m_err;
        ELSIF after IS DISTINCT FROM before THEN
            problem := 'the engine failed but changed the dimension: ' || e_err;
        END IF;
    ELSIF after IS DISTINCT FROM msnap THEN
        problem := 'dimension content differs';
    ELSIF e_feed IS DISTINCT FROM scd2_prop.feed_counts(m) THEN
        problem := format('change feed counts differ: engine %s, model %s', e_feed, scd2_prop.feed_counts(m));
    ELSIF e_rows IS NOT NULL AND e_rows IS DISTINCT FROM scd2_prop.feed_rows(m) THEN
        -- each feed row: action, business key and the row's validity after the write
        problem := format('change feed rows differ: only in engine %s, only in model %s',
                          scd2_prop.minus(e_rows, scd2_prop.feed_rows(m)),
                          scd2_prop.minus(scd2_prop.feed_rows(m), e_rows));
    ELSIF check_audit AND e_audit IS NULL THEN
        problem := 'no audit_log row for the load';
    ELSIF check_audit
          AND ((e_audit - 'status') IS DISTINCT FROM scd2_prop.metrics(m)
               OR coalesce(e_audit ->> 'status', 'success') <> 'success') THEN
        problem := format('audit metrics differ: engine %s, model %s', e_audit, scd2_prop.metrics(m));
    END IF;
    IF problem IS NULL THEN
        inv := scd2_prop.invariants('dim');
        IF inv IS NOT NULL THEN
            problem := 'engine invariants violated: ' || inv;
        ELSE
            inv := scd2_prop.invariants('mdim');
            IF inv IS NOT NULL THEN
                problem := 'MODEL invariants violated: ' || inv;
            END IF;
        END IF;
    END IF;
    RETURN jsonb_build_object(
        'problem', problem, 'both_failed', m_err IS NOT NULL AND e_err IS NOT NULL,
        'e_err', e_err, 'm_err', m_err, 'e_feed', e_feed, 'e_audit', e_audit,
        'm', scd2_prop.metrics(m), 'm_feed', m -> 'feed',
        'before', to_jsonb(before), 'after', to_jsonb(after), 'msnap', to_jsonb(msnap));
END $$;

CREATE FUNCTION scd2_prop.jarr(j jsonb) RETURNS text[] LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(x ORDER BY o), '{}') FROM jsonb_array_elements_text(j) WITH ORDINALITY AS e(x, o)
$$;

-- Reset both dimensions to `dimrows` (snap() tuples) and staging to `stgrows`
-- (tuples of stg), then step().
CREATE FUNCTION scd2_prop.retry(dimrows text[], stgrows text[], eat timestamptz, mode text,
                                model_only boolean, check_audit boolean)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM dim;
    DELETE FROM mdim;
    TRUNCATE stg;
    IF cardinality(dimrows) > 0 THEN
        EXECUTE 'INSERT INTO dim (id, city, tier, phone, note, valid_from, valid_to, is_current) VALUES '
                || array_to_string(dimrows, ', ');
        EXECUTE 'INSERT INTO mdim (id, city, tier, phone, note, valid_from, valid_to, is_current) VALUES '
                || array_to_string(dimrows, ', ');
    END IF;
    IF cardinality(stgrows) > 0 THEN
        EXECUTE 'INSERT INTO stg VALUES ' || array_to_string(stgrows, ', ');
    END IF;
    RETURN scd2_prop.step(eat, mode, model_only, check_audit);
END $$;

-- Shrink a failing batch: drop staging rows, then whole keys of the
-- dimension's prior history, as long as the comparison still fails.
-- Returns a replay script of the smallest failing case found.
CREATE FUNCTION scd2_prop.shrink(dimrows text[], eat timestamptz, mode text, model_only boolean,
                                 check_audit boolean)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    stgrows text[];
    cand    text[];
    r       jsonb;
    last_r  jsonb;
    i       int := 1;
    k       text;
    keys    text[];
BEGIN
    SELECT coalesce(array_agg(format('(%s, %s, %s, %s, %s, %s, %s)', quote_nullable(id), quote_nullable(city),
                                     quote_nullable(tier), quote_nullable(phone), quote_nullable(note),
                                     quote_nullable(eff), quote_nullable(del)) ORDER BY ctid), '{}')
      INTO stgrows FROM stg;
    last_r := scd2_prop.retry(dimrows, stgrows, eat, mode, model_only, check_audit);
    IF last_r ->> 'problem' IS NULL THEN
        RETURN '(the failure did not reproduce from the state before the batch)';
    END IF;
    WHILE i <= cardinality(stgrows) LOOP
        cand := stgrows[1 : i - 1] || stgrows[i + 1 :];
        r := scd2_prop.retry(dimrows, cand, eat, mode, model_only, check_audit);
        IF r ->> 'problem' IS NOT NULL THEN
            stgrows := cand;
            last_r := r;
        ELSE
            i := i + 1;
        END IF;
    END LOOP;
    SELECT array_agg(DISTINCT split_part(x, ',', 1)) INTO keys FROM unnest(dimrows) x;
    FOREACH k IN ARRAY coalesce(keys, '{}') LOOP
        SELECT coalesce(array_agg(x ORDER BY o), '{}') INTO cand
          FROM unnest(dimrows) WITH ORDINALITY AS u(x, o) WHERE split_part(x, ',', 1) <> k;
        r := scd2_prop.retry(cand, stgrows, eat, mode, model_only, check_audit);
        IF r ->> 'problem' IS NOT NULL THEN
            dimrows := cand;
            last_r := r;
        END IF;
    END LOOP;
    RETURN format(E'-- %s\n'
                  'TRUNCATE dim;\n%s'
                  'TRUNCATE stg;\n%s'
                  'SELECT * FROM scd2.merge(''stg'', ''dim'', effective_at => %L);  -- mode %s\n'
                  '--   engine: error %s, feed %s, audit %s\n'
                  '--   model:  error %s, metrics %s\n'
                  '--   model feed: %s\n'
                  '--   engine after:\n--     %s\n'
                  '--   model after:\n--     %s',
                  last_r ->> 'problem',
                  CASE WHEN cardinality(dimrows) > 0
                       THEN E'INSERT INTO dim (id, city, tier, phone, note, valid_from, valid_to, is_current) VALUES\n    '
                            || array_to_string(dimrows, E',\n    ') || E';\n' ELSE '' END,
                  CASE WHEN cardinality(stgrows) > 0
                       THEN E'INSERT INTO stg VALUES\n    ' || array_to_string(stgrows, E',\n    ') || E';\n'
                       ELSE '' END,
                  eat, mode,
                  coalesce(last_r ->> 'e_err', '-'), coalesce(last_r ->> 'e_feed', '-'),
                  coalesce(last_r ->> 'e_audit', '-'), coalesce(last_r ->> 'm_err', '-'),
                  coalesce(last_r ->> 'm', '-'), coalesce(last_r ->> 'm_feed', '-'),
                  array_to_string(scd2_prop.jarr(last_r -> 'after'), E'\n--     '),
                  array_to_string(scd2_prop.jarr(last_r -> 'msnap'), E'\n--     '));
END $$;

CREATE FUNCTION scd2_prop.run_scenario(seed bigint, n int, model_only boolean, check_audit boolean)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    sseed     float8 := (((seed * 1000003 + n * 7919) % 2000000 + 2000000) % 2000000) / 1000000.0 - 1.0;
    mode      text;
    nkeys     int;
    nbatches  int;
    -- knobs (run.sh passes them as custom settings): instants on the time
    -- axis, largest key space, most batches
    ninst     int := coalesce(nullif(current_setting('scd2_prop.ninst', true), ''), '24')::int;
    maxkeys   int := coalesce(nullif(current_setting('scd2_prop.max_keys', true), ''), '8')::int;
    maxbatch  int := coalesce(nullif(current_setting('scd2_prop.max_batches', true), ''), '6')::int;
    eat       timestamptz;
    script    text;
    reg       text;
    batch     text;
    r         jsonb;
    nerr      int := 0;
    nrows     int := 0;
    b         int;
    report    text;
BEGIN
    PERFORM setseed(sseed);
    mode := CASE WHEN random() < 0.5 THEN 'incremental' ELSE 'snapshot' END;
    nkeys := 1 + scd2_prop.rnd(maxkeys);
    nbatches := least(3, maxbatch) + scd2_prop.rnd(greatest(maxbatch - 2, 1));

    -- fresh tables
    IF NOT model_only AND to_regclass('public.dim') IS NOT NULL THEN
        BEGIN
            PERFORM scd2.unregister('public.dim');
        EXCEPTION WHEN OTHERS THEN NULL;
        END;
    END IF;
    DROP TABLE IF EXISTS public.dim, public.mdim, public.stg;
    CREATE TABLE public.dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                             city text, tier text, phone text, note text,
                             valid_from timestamptz NOT NULL, valid_to timestamptz,
                             is_current boolean NOT NULL DEFAULT true);
    CREATE TABLE public.mdim (LIKE public.dim INCLUDING ALL);
    CREATE TABLE public.stg (id int, city text, tier text, phone text, note text, eff timestamptz, del boolean);
    -- the model is of loads in arrival order (test/arrival has the order-free one)
    reg := format('SELECT scd2.register(''dim'', ARRAY[''id''], tracked => ARRAY[''city'', ''tier''], '
                  'type1 => ARRAY[''phone''], effective_column => ''eff'', delete_column => ''del'', mode => %L, '
                  'order_free => false);',
                  mode);
    IF NOT model_only THEN
        EXECUTE reg;
    END IF;
    script := format(E'-- scenario %s of seed %s: mode %s, %s keys, %s batches\n'
                     'SET timezone = ''UTC'';\n'
                     'DROP TABLE IF EXISTS dim, stg;\n'
                     'CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL, '
                     'city text, tier text, phone text, note text, valid_from timestamptz NOT NULL, '
                     'valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);\n'
                     'CREATE TABLE stg (id int, city text, tier text, phone text, note text, eff timestamptz, del boolean);\n'
                     '%s\n', n, seed, mode, nkeys, nbatches, reg);

    FOR b IN 1 .. nbatches LOOP
        batch := scd2_prop.gen_batch(nkeys, ninst);
        nrows := nrows + (SELECT count(*) FROM stg);
        eat := CASE WHEN random() < 0.8 THEN scd2_prop.inst(ninst + b)
                    ELSE scd2_prop.inst(scd2_prop.rnd(ninst)) END;
        script := script || format(E'-- batch %s\n%s\nSELECT * FROM scd2.merge(''stg'', ''dim'', effective_at => %L);\n',
                                   b, batch, eat);
        r := scd2_prop.step(eat, mode, model_only, check_audit);
        IF (r ->> 'both_failed')::boolean AND r ->> 'problem' IS NULL THEN
            nerr := nerr + 1;
            script := script || format(E'-- (both fail: engine %s | model %s)\n', r ->> 'e_err', r ->> 'm_err');
        END IF;

        IF r ->> 'problem' IS NOT NULL THEN
            report := format(E'FAIL %s: seed %s, mode %s, batch %s of %s: %s\n'
                              '---- replay (psql, CREATE EXTENSION scd2 first):\n%s'
                              '---- dimension before the batch (engine):\n  %s\n'
                              '---- engine after:\n  %s\n'
                              '---- model after:\n  %s\n'
                              '---- only in engine:\n  %s\n'
                              '---- only in model:\n  %s\n'
                              '---- engine: error %s, feed %s, audit %s\n'
                              '---- model:  error %s, metrics %s\n'
                              '---- model feed: %s\n',
                             n, seed, mode, b, nbatches, r ->> 'problem', script,
                             array_to_string(scd2_prop.jarr(r -> 'before'), E'\n  '),
                             array_to_string(scd2_prop.jarr(r -> 'after'), E'\n  '),
                             array_to_string(scd2_prop.jarr(r -> 'msnap'), E'\n  '),
                             array_to_string(scd2_prop.minus(scd2_prop.jarr(r -> 'after'),
                                                             scd2_prop.jarr(r -> 'msnap')), E'\n  '),
                             array_to_string(scd2_prop.minus(scd2_prop.jarr(r -> 'msnap'),
                                                             scd2_prop.jarr(r -> 'after')), E'\n  '),
                             coalesce(r ->> 'e_err', '-'), coalesce(r ->> 'e_feed', '-'),
                             coalesce(r ->> 'e_audit', '-'), coalesce(r ->> 'm_err', '-'),
                             coalesce(r ->> 'm', '-'), coalesce(r ->> 'm_feed', '-'));
            BEGIN
                report := report || E'---- shrunk (the dimension as it was before the batch, fewest rows that still fail):\n'
                          || scd2_prop.shrink(scd2_prop.jarr(r -> 'before'), eat, mode, model_only, check_audit)
                          || E'\n';
            EXCEPTION WHEN OTHERS THEN
                report := report || '---- (shrinking failed: ' || SQLERRM || E')\n';
            END;
            RETURN report || format('---- end of scenario %s', n);
        END IF;
    END LOOP;
    RETURN format('PASS %s mode=%s keys=%s batches=%s failing_batches=%s staged_rows=%s final_rows=%s',
                  n, mode, nkeys, nbatches, nerr, nrows, (SELECT count(*) FROM mdim));
END $$;
