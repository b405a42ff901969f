/*
 * scd2 property test -- the reference model.
 *
 * An independent, deliberately naive implementation of docs/SEMANTICS.md
 * (one load of a staging table into an SCD Type 2 dimension).  It shares no
 * code and no approach with the engine: the engine is set-based (window
 * functions, one MERGE); this model walks every business key separately and
 * loops over that key's points in time order, exactly as the numbered steps
 * of SEMANTICS.md are written.  Rows are handled as jsonb so that the model
 * only needs column names; NULL-safe equality of states is jsonb equality
 * (JSON null equals JSON null and never equals the string "~").
 *
 * Assumptions about the dimension (the property test's shape): bookkeeping
 * columns are called valid_from, valid_to and is_current; current rows have
 * valid_to NULL; other columns (a surrogate key) have defaults.
 *
 *   SELECT scd2_model.load('stg', 'mdim', '2024-01-31', ARRAY['id'],
 *                          ARRAY['city','tier'], ARRAY['phone'], ARRAY['note'],
 *                          'eff', 'del', 'incremental');
 *
 * returns the metrics as jsonb (source_rows, duplicates, inserted,
 * new_versions, closed, deleted, shortened, type1_updated, unchanged) plus
 * "feed": the change feed (one object per row written), and raises an error
 * wherever the specification says the load fails.
 */

DROP SCHEMA IF EXISTS scd2_model CASCADE;
CREATE SCHEMA scd2_model;

-- One point of a key's time line (SEMANTICS.md step 4).
CREATE TYPE scd2_model.point AS (
    t       timestamptz,  -- its instant
    kind    int,          -- 0 = E (existing version), 1 = G (gap start), 2 = S (staged)
    present boolean,      -- the state it carries: present (true) or absent (false)
    state   jsonb,        -- tracked values when present, else NULL
    y       jsonb,        -- Type 1 values (E: the row's, S: the staging row's)
    o       jsonb,        -- other values (S only)
    ref     int           -- E/G: index into the key's history; S: index into the
                          -- distinct staging rows (NULL for a snapshot point)
);

-- {"c1": j->c1, "c2": j->c2, ...}; a missing or NULL value becomes JSON null.
CREATE FUNCTION scd2_model.pick(j jsonb, cols text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
    r jsonb := '{}';
    c text;
BEGIN
    FOREACH c IN ARRAY coalesce(cols, '{}') LOOP
        r := r || jsonb_build_object(c, coalesce(j -> c, 'null'::jsonb));
    END LOOP;
    RETURN r;
END $$;

-- State equality: both absent, or both present with equal tracked values.
CREATE FUNCTION scd2_model.same_state(p1 boolean, s1 jsonb, p2 boolean, s2 jsonb)
RETURNS boolean LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF NOT p1 AND NOT p2 THEN RETURN true; END IF;
    IF p1 AND p2 THEN RETURN s1 = s2; END IF;
    RETURN false;
END $$;

CREATE FUNCTION scd2_model.load(
        staging          regclass,
        dimension        regclass,
        effective_at     timestamptz,
        business_key     text[],
        tracked          text[],
        type1            text[],
        other            text[],
        effective_column text,
        delete_column    text,
        mode             text)
RETURNS jsonb
LANGUAGE plpgsql AS $model$
DECLARE
    -- distinct staging rows (after step 2)
    s_key     jsonb[] := '{}';
    s_eff     timestamptz[] := '{}';
    s_full    jsonb[] := '{}';
    s_present boolean[] := '{}';
    s_state   jsonb[] := '{}';
    s_y       jsonb[] := '{}';
    s_o       jsonb[] := '{}';
    ns        int := 0;
    -- metrics
    m_source  int := 0;
    m_dup     int := 0;
    m_ins     int := 0;
    m_newv    int := 0;
    m_close   int := 0;
    m_del     int := 0;
    m_short   int := 0;
    m_t1      int := 0;
    m_unch    int := 0;
    feed      jsonb := '[]';
    -- work
    rec       record;
    j         jsonb;
    k         jsonb;
    full_row  jsonb;
    eff       timestamptz;
    is_dup    boolean;
    i         int;
    p         int;
    q         int;
    keys      jsonb[] := '{}';
    cur_keys  jsonb[] := '{}';
    c         text;
    ins_cols  text[];
    ins_sql   text;
BEGIN
    IF mode NOT IN ('incremental', 'snapshot') THEN
        RAISE EXCEPTION 'model: bad mode %', mode;
    END IF;
    ins_cols := business_key || tracked || coalesce(type1, '{}') || coalesce(other, '{}')
                || ARRAY['valid_from', 'valid_to', 'is_current'];
    SELECT format('INSERT INTO %s (%s) SELECT %s FROM jsonb_populate_record(NULL::%s, $1) r',
                  dimension,
                  string_agg(quote_ident(x), ', '),
                  string_agg('r.' || quote_ident(x), ', '),
                  dimension)
      INTO ins_sql FROM unnest(ins_cols) x;

    ---------------------------------------------------------------- step 1
    -- Read every staging row; NULL key or NULL effective time fails.
    FOR rec IN EXECUTE format('SELECT to_jsonb(s) AS j FROM %s s', staging) LOOP
        m_source := m_source + 1;
        j := rec.j;
        FOREACH c IN ARRAY business_key LOOP
            IF j ->> c IS NULL THEN
                RAISE EXCEPTION 'model: NULL business key column % in staging', c
                    USING ERRCODE = 'not_null_violation';
            END IF;
        END LOOP;
        IF effective_column IS NULL THEN
            eff := effective_at;
        ELSE
            eff := (j ->> effective_column)::timestamptz;
            IF eff IS NULL THEN
                RAISE EXCEPTION 'model: NULL effective time for key %', scd2_model.pick(j, business_key)
                    USING ERRCODE = 'not_null_violation';
            END IF;
        END IF;

        ------------------------------------------------------------ step 2
        -- Exact duplicates (identical in K, eff, T, Y, O and the delete
        -- marker, NULL-safely) collapse into one.  The marker is compared by
        -- its meaning: NULL and false both mean "present" (SEMANTICS.md
        -- defines no other meaning for it), so a NULL-marker row and an
        -- otherwise identical false-marker row are duplicates, not an
        -- ambiguity.
        full_row := scd2_model.pick(j, business_key || tracked || coalesce(type1, '{}')
                                       || coalesce(other, '{}'))
                    || jsonb_build_object(' deleted', delete_column IS NOT NULL
                                                      AND coalesce((j ->> delete_column)::boolean, false));
        is_dup := false;
        FOR i IN 1 .. ns LOOP
            IF s_full[i] = full_row AND s_eff[i] = eff THEN
                is_dup := true;
                EXIT;
            END IF;
        END LOOP;
        IF is_dup THEN
            m_dup := m_dup + 1;
            CONTINUE;
        END IF;
        ns := ns + 1;
        s_key[ns]     := scd2_model.pick(j, business_key);
        s_eff[ns]     := eff;
        s_full[ns]    := full_row;
        s_present[ns] := delete_column IS NULL OR NOT coalesce((j ->> delete_column)::boolean, false);
        s_state[ns]   := CASE WHEN s_present[ns] THEN scd2_model.pick(j, tracked) END;
        s_y[ns]       := scd2_model.pick(j, type1);
        s_o[ns]       := scd2_model.pick(j, other);
    END LOOP;

    -- Snapshot mode: an empty extract is refused unless allowed.
    IF mode = 'snapshot' AND m_source = 0
       AND coalesce(current_setting('scd2.allow_empty_snapshot', true), 'off') <> 'on' THEN
        RAISE EXCEPTION 'model: snapshot load from an empty staging table'
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;

    -- Two remaining rows with equal key and eff are ambiguous.
    FOR p IN 1 .. ns LOOP
        FOR q IN p + 1 .. ns LOOP
            IF s_key[p] = s_key[q] AND s_eff[p] = s_eff[q] THEN
                RAISE EXCEPTION 'model: ambiguous staging rows for key % at %', s_key[p], s_eff[p]
                    USING ERRCODE = 'cardinality_violation';
            END IF;
        END LOOP;
    END LOOP;

    -- The keys to process: staged keys (first appearance order) and, in
    -- snapshot mode, every current key absent from staging.
    FOR p IN 1 .. ns LOOP
        IF NOT (s_key[p] = ANY (keys)) THEN
            keys := keys || s_key[p];
        END IF;
    END LOOP;
    IF mode = 'snapshot' THEN
        FOR rec IN EXECUTE format('SELECT to_jsonb(d) AS j FROM %s d WHERE valid_to IS NULL', dimension) LOOP
            k := scd2_model.pick(rec.j, business_key);
            IF NOT (k = ANY (keys)) AND NOT (k = ANY (cur_keys)) THEN
                cur_keys := cur_keys || k;
            END IF;
        END LOOP;
    END IF;

    ---------------------------------------------------------------- per key
    FOREACH k IN ARRAY keys || cur_keys LOOP
        DECLARE
            h_ctid    tid[] := '{}';
            h_vf      timestamptz[] := '{}';
            h_vt      timestamptz[] := '{}';
            h_state   jsonb[] := '{}';
            h_y       jsonb[] := '{}';
            nh        int := 0;
            min_eff   timestamptz;
            pts       scd2_model.point[] := '{}';
            pt        scd2_model.point;
            np        int;
            kept      boolean[] := '{}';
            carries   boolean[] := '{}';   -- dropped S point whose Type 1 values updated an existing current row
            in_p      boolean;
            in_s      jsonb;
            nxt       int;
            end_t     timestamptz;
            last_s    int;
            new_y     jsonb;
            y_changed boolean;
            act       text;
            first_new boolean;
            followed  boolean;
            newrow    jsonb;
            back_row  int;
            back_at   timestamptz;
        BEGIN
            -- The key's whole history, oldest first.
            FOR rec IN EXECUTE format('SELECT ctid AS tid, to_jsonb(d) AS j FROM %s d WHERE to_jsonb(d) @> $1 '
                                      'ORDER BY valid_from', dimension) USING k LOOP
                nh := nh + 1;
                h_ctid[nh]  := rec.tid;
                h_vf[nh]    := (rec.j ->> 'valid_from')::timestamptz;
                h_vt[nh]    := (rec.j ->> 'valid_to')::timestamptz;
                h_state[nh] := scd2_model.pick(rec.j, tracked);
                h_y[nh]     := scd2_model.pick(rec.j, type1);
            END LOOP;
            first_new := nh = 0;

            -- Snapshot mode (step 4): a key with history but no current
            -- version whose latest staged row is present and older than the
            -- end of its last version comes back at that end.
            back_row := NULL;
            IF mode = 'snapshot' AND k = ANY (keys) AND nh > 0 AND array_position(h_vt, NULL) IS NULL THEN
                back_at := NULL;
                FOR p IN 1 .. nh LOOP
                    IF back_at IS NULL OR h_vt[p] > back_at THEN back_at := h_vt[p]; END IF;
                END LOOP;
                FOR p IN 1 .. ns LOOP
                    IF s_key[p] = k AND (back_row IS NULL OR s_eff[p] > s_eff[back_row]) THEN back_row := p; END IF;
                END LOOP;
                IF NOT s_present[back_row] OR s_eff[back_row] >= back_at THEN back_row := NULL; END IF;
            ELSIF mode = 'snapshot' AND k = ANY (keys) AND nh > 0 THEN
                -- ... and a latest row before the start of the current
                -- version is placed at that start (a no-op with the same
                -- values; with others it conflicts there).
                FOR p IN 1 .. ns LOOP
                    IF s_key[p] = k AND (back_row IS NULL OR s_eff[p] > s_eff[back_row]) THEN back_row := p; END IF;
                END LOOP;
                FOR p IN 1 .. nh LOOP
                    IF h_vt[p] IS NULL THEN back_at := h_vf[p]; q := p; END IF;
                END LOOP;
                IF NOT s_present[back_row] OR s_eff[back_row] >= back_at THEN
                    back_row := NULL;
                END IF;
            END IF;

            -- S points (step 4) and the earliest of them.
            IF k = ANY (keys) THEN
                FOR p IN 1 .. ns LOOP
                    IF s_key[p] = k THEN
                        pts := pts || ROW(CASE WHEN p = back_row THEN back_at ELSE s_eff[p] END,
                                          2, s_present[p], s_state[p], s_y[p], s_o[p], p)::scd2_model.point;
                        IF min_eff IS NULL OR pts[cardinality(pts)].t < min_eff THEN
                            min_eff := pts[cardinality(pts)].t;
                        END IF;
                    END IF;
                END LOOP;
            ELSE
                -- snapshot: a current key missing from the extract, absent
                -- from effective_at or, when later, its current version's start
                min_eff := effective_at;
                FOR p IN 1 .. nh LOOP
                    IF h_vt[p] IS NULL AND h_vf[p] > min_eff THEN min_eff := h_vf[p]; END IF;
                END LOOP;
                pts := pts || ROW(min_eff, 2, false, NULL, NULL, NULL, NULL)::scd2_model.point;
            END IF;

            -- Step 3: relevant history (vt > min eff, or current); E and G points.
            FOR p IN 1 .. nh LOOP
                IF h_vt[p] IS NULL OR h_vt[p] > min_eff THEN
                    pts := pts || ROW(h_vf[p], 0, true, h_state[p], h_y[p], NULL, p)::scd2_model.point;
                    IF h_vt[p] IS NOT NULL THEN
                        followed := false;
                        FOR q IN 1 .. nh LOOP
                            IF h_vf[q] = h_vt[p] THEN followed := true; END IF;
                        END LOOP;
                        IF NOT followed THEN
                            pts := pts || ROW(h_vt[p], 1, false, NULL, NULL, NULL, p)::scd2_model.point;
                        END IF;
                    END IF;
                END IF;
            END LOOP;

            -- Time order; at one instant E, then G, then S.
            SELECT array_agg(x ORDER BY x.t, x.kind) INTO pts FROM unnest(pts) x;
            np := cardinality(pts);

            -- Ties: an S point at an E point's instant must carry its state.
            FOR p IN 1 .. np LOOP
                IF pts[p].kind = 2 THEN
                    FOR q IN 1 .. np LOOP
                        IF pts[q].kind = 0 AND pts[q].t = pts[p].t
                           AND NOT scd2_model.same_state(pts[p].present, pts[p].state, true, pts[q].state) THEN
                            RAISE EXCEPTION 'model: staged row for key % at % conflicts with the version starting at that instant',
                                            k, pts[p].t
                                USING ERRCODE = 'unique_violation';
                        END IF;
                    END LOOP;
                END IF;
            END LOOP;

            -- Step 5: collapse.
            in_p := false;
            in_s := NULL;
            FOR p IN 1 .. np LOOP
                IF pts[p].kind = 0 THEN
                    kept[p] := true;
                ELSE
                    kept[p] := NOT scd2_model.same_state(pts[p].present, pts[p].state, in_p, in_s);
                END IF;
                carries[p] := false;
                IF kept[p] THEN
                    in_p := pts[p].present;
                    in_s := pts[p].state;
                END IF;
            END LOOP;

            -- Steps 6 and 7: each kept point ends at the next kept point.
            FOR p IN 1 .. np LOOP
                CONTINUE WHEN NOT kept[p];
                pt := pts[p];
                nxt := NULL;
                FOR q IN p + 1 .. np LOOP
                    IF kept[q] THEN nxt := q; EXIT; END IF;
                END LOOP;
                end_t := CASE WHEN nxt IS NOT NULL THEN pts[nxt].t END;
                -- the last staging row of this run (the kept point included)
                last_s := NULL;
                FOR q IN p .. coalesce(nxt - 1, np) LOOP
                    IF pts[q].kind = 2 AND pts[q].ref IS NOT NULL THEN last_s := q; END IF;
                END LOOP;

                IF pt.kind = 0 THEN
                    -- An existing version.
                    y_changed := false;
                    new_y := h_y[pt.ref];
                    IF h_vt[pt.ref] IS NULL AND last_s IS NOT NULL AND last_s <> p THEN
                        new_y := pts[last_s].y;
                        IF new_y <> h_y[pt.ref] THEN
                            y_changed := true;
                            carries[last_s] := true;
                        END IF;
                    END IF;
                    act := NULL;
                    IF end_t IS DISTINCT FROM h_vt[pt.ref] THEN
                        IF h_vt[pt.ref] IS NOT NULL AND (end_t IS NULL OR end_t > h_vt[pt.ref]) THEN
                            RAISE EXCEPTION 'model bug: end of version of % at % would move later', k, pt.t;
                        END IF;
                        IF h_vt[pt.ref] IS NULL THEN
                            act := CASE WHEN pts[nxt].present THEN 'close' ELSE 'delete' END;
                        ELSE
                            act := 'shorten';
                        END IF;
                    ELSIF y_changed THEN
                        act := 'type1';
                    END IF;
                    IF act IS NOT NULL THEN
                        -- one write per row: its new end and (maybe) Type 1 values
                        EXECUTE format('UPDATE %1$s d SET valid_to = $1, is_current = $1 IS NULL%2$s WHERE ctid = $3',
                                       dimension,
                                       CASE WHEN cardinality(coalesce(type1, '{}')) = 0 THEN ''
                                            ELSE format(', (%s) = (SELECT %s FROM jsonb_populate_record(NULL::%s, $2) r)',
                                                        (SELECT string_agg(quote_ident(x), ', ') FROM unnest(type1) x),
                                                        (SELECT string_agg('r.' || quote_ident(x), ', ') FROM unnest(type1) x),
                                                        dimension) END)
                            USING end_t, new_y, h_ctid[pt.ref];
                    END IF;
                    IF act IS NOT NULL THEN
                        feed := feed || jsonb_build_object('action', act, 'business_key', k,
                                                           'valid_from', pt.t, 'valid_to', end_t);
                    END IF;
                    CASE act
                        WHEN 'close' THEN m_close := m_close + 1;
                        WHEN 'delete' THEN m_del := m_del + 1;
                        WHEN 'shorten' THEN m_short := m_short + 1;
                        WHEN 'type1' THEN m_t1 := m_t1 + 1;
                        ELSE NULL;
                    END CASE;

                ELSIF pt.kind = 2 AND pt.present THEN
                    -- A new version [eff, end): Y and O from its staging row,
                    -- then Y from the last staging row of its run.
                    -- (the dropped rows of its run still count as unchanged)
                    new_y := pts[last_s].y;
                    newrow := k || pt.state || new_y || pt.o
                              || jsonb_build_object('valid_from', pt.t, 'valid_to', end_t,
                                                    'is_current', end_t IS NULL);
                    EXECUTE ins_sql USING newrow;
                    act := CASE WHEN first_new THEN 'insert' ELSE 'new_version' END;
                    first_new := false;
                    IF act = 'insert' THEN m_ins := m_ins + 1; ELSE m_newv := m_newv + 1; END IF;
                    feed := feed || jsonb_build_object('action', act, 'business_key', k,
                                                       'valid_from', pt.t, 'valid_to', end_t);
                END IF;
                -- kept absent S points and G points write nothing
            END LOOP;

            -- unchanged: dropped staging rows, except the one whose Type 1
            -- values were written to an existing current version
            FOR p IN 1 .. np LOOP
                IF pts[p].kind = 2 AND pts[p].ref IS NOT NULL AND NOT kept[p] AND NOT carries[p] THEN
                    m_unch := m_unch + 1;
                END IF;
            END LOOP;
        END;
    END LOOP;

    RETURN jsonb_build_object(
        'source_rows', m_source, 'duplicates', m_dup, 'inserted', m_ins,
        'new_versions', m_newv, 'closed', m_close, 'deleted', m_del,
        'shortened', m_short, 'type1_updated', m_t1, 'unchanged', m_unch,
        'feed', feed);
END
$model$;

COMMENT ON FUNCTION scd2_model.load(regclass, regclass, timestamptz, text[], text[], text[], text[], text, text, text) IS
    'scd2 property test: independent reference model of one load (docs/SEMANTICS.md)';
