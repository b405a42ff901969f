-- test/arrival/stream.sql -- the change-stream property (issue 50): events
-- with sequences, same-instant events, partial updates (NULL = unchanged),
-- deletes, returning keys and a Type 1 column give the same dimension
-- whatever their batching and arrival order, and it is the fold an
-- independent procedural model computes.  Loaded by run.sh into a fresh
-- database; CALL stream_run(first, n, group) runs scenarios first ..
-- first+n-1 and leaves one row per failing one in stream_failures.
--
-- A scenario: 1-3 keys, 1-6 events each on days 0-9.  An event is a delete
-- or an upsert of (a, b, y): a in {NULL, '', '~', 'x'} where NULL means
-- "unchanged" (ignore_null_updates), b in {NULL, 1} where NULL is a value
-- (tracked, not partial), y in {NULL, 1, 2} a Type 1 column where NULL
-- means "unchanged".
--   Odd scenarios carry a sequence (lsn 1-40): several different events of
--   a key at one instant are ordered by it; an event sent again at the same
--   (day, lsn) is an exact duplicate.  They load into stream_a (in order:
--   one batch per day) and stream_b (shuffled into random batches of 1-4).
--   Even scenarios have no sequence: at one (key, day) one upserted state
--   at most, exact duplicates, and a delete there wins.  They load into
--   plain_a and plain_b the same way.
-- The model (stream_model): per key, the events in (day, lsn) order --
-- without a sequence, a day's upserts before its deletes -- folded into a
-- state (a delete clears it; an upsert lays its values over it, a NULL a
-- or y keeping the value in force); each day's state is the fold after its
-- last event; a day whose (a, b) or presence differs from the state in
-- force opens a version, and a version's y is that of its last day.
-- All must agree on (k, a, b, y, valid_from, valid_to).
SET client_min_messages = warning;
CREATE TABLE stg (k int, a text, b int, y int, eff date, lsn int, del boolean);
CREATE TABLE stream_a (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int, y int,
                       valid_from date, valid_to date, is_current boolean);
CREATE TABLE stream_b (LIKE stream_a INCLUDING IDENTITY);
CREATE TABLE plain_a (LIKE stream_a INCLUDING IDENTITY);
CREATE TABLE plain_b (LIKE stream_a INCLUDING IDENTITY);
SELECT scd2.register(d, ARRAY['k'], tracked => ARRAY['a', 'b'], type1 => ARRAY['y'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current', surrogate_key_column => 'sk',
                     order_free => true, sequence_column => 'lsn', ignore_null_updates => ARRAY['a', 'y'])
  FROM unnest(ARRAY['stream_a', 'stream_b']::regclass[]) AS d;
SELECT scd2.register(d, ARRAY['k'], tracked => ARRAY['a', 'b'], type1 => ARRAY['y'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current', surrogate_key_column => 'sk',
                     order_free => true, ignore_null_updates => ARRAY['a', 'y'])
  FROM unnest(ARRAY['plain_a', 'plain_b']::regclass[]) AS d;
CREATE TABLE ev (s int, n int, k int, a text, b int, y int, eff date, lsn int, del boolean, bt int);
CREATE TABLE model (k int, a text, b int, y int, valid_from date, valid_to date);
CREATE TABLE stream_failures (scenario int, diff text, events text);

CREATE FUNCTION load_batch(dim regclass, cond text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE stg;
    EXECUTE 'INSERT INTO stg SELECT e.k, e.a, e.b, e.y, e.eff, e.lsn, e.del FROM ev e WHERE ' || cond;
    IF EXISTS (SELECT FROM stg) THEN
        PERFORM count(*) FROM scd2.merge('stg', dim);
    END IF;
END $$;

-- The model, from the event set alone.
CREATE FUNCTION stream_model() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
    cur_k int := NULL; cur_day date := NULL;
    -- the fold
    f_live boolean := false; fa text; fb int; fy int;
    -- the version in force
    live boolean := false; va text; vb int; vy int; vvf date;
BEGIN
    TRUNCATE model;
    FOR r IN SELECT e.k, e.eff, e.a, e.b, e.y, e.del FROM ev e
              ORDER BY e.k, e.eff, e.lsn NULLS FIRST, e.del, e.n LOOP
        IF cur_k IS DISTINCT FROM r.k OR cur_day IS DISTINCT FROM r.eff THEN
            -- the previous day is complete: its state decides
            IF cur_day IS NOT NULL THEN
                PERFORM NULL;
            END IF;
        END IF;
        -- a new key: close the last one's version, start afresh
        IF cur_k IS DISTINCT FROM r.k THEN
            IF cur_k IS NOT NULL THEN
                -- apply the last day of the previous key
                IF f_live THEN
                    IF NOT live OR va IS DISTINCT FROM fa OR vb IS DISTINCT FROM fb THEN
                        IF live THEN INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); END IF;
                        live := true; va := fa; vb := fb; vvf := cur_day;
                    END IF;
                    vy := fy;
                ELSIF live THEN
                    INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); live := false;
                END IF;
                IF live THEN INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, NULL); END IF;
            END IF;
            cur_k := r.k; cur_day := NULL; f_live := false; live := false;
        END IF;
        -- a new day of the same key: the previous day decides
        IF cur_day IS DISTINCT FROM r.eff AND cur_day IS NOT NULL THEN
            IF f_live THEN
                IF NOT live OR va IS DISTINCT FROM fa OR vb IS DISTINCT FROM fb THEN
                    IF live THEN INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); END IF;
                    live := true; va := fa; vb := fb; vvf := cur_day;
                END IF;
                vy := fy;
            ELSIF live THEN
                INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); live := false;
            END IF;
        END IF;
        cur_day := r.eff;
        -- fold the event
        IF r.del THEN
            f_live := false; fa := NULL; fb := NULL; fy := NULL;
        ELSIF NOT f_live THEN
            f_live := true; fa := r.a; fb := r.b; fy := r.y;
        ELSE
            fa := coalesce(r.a, fa); fb := r.b; fy := coalesce(r.y, fy);
        END IF;
    END LOOP;
    IF cur_k IS NOT NULL THEN
        IF f_live THEN
            IF NOT live OR va IS DISTINCT FROM fa OR vb IS DISTINCT FROM fb THEN
                IF live THEN INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); END IF;
                live := true; va := fa; vb := fb; vvf := cur_day;
            END IF;
            vy := fy;
        ELSIF live THEN
            INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, cur_day); live := false;
        END IF;
        IF live THEN INSERT INTO model VALUES (cur_k, va, vb, vy, vvf, NULL); END IF;
    END IF;
END $$;

-- The events of scenario sc (deterministic in sc) and their shuffled batches (bt).
CREATE FUNCTION stream_generate(sc int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    nkeys int; nev int; kk int; cnt int := 0; day int; seq int; nb int := 0; left_ int := 0;
    vals text[] := ARRAY[NULL, '', '~', 'x'];
    with_seq boolean := sc % 2 = 1;
    r record;
BEGIN
    PERFORM setseed((hashint4(sc)::bigint % 1000000) / 1000000.0);
    nkeys := 1 + floor(random() * 3)::int;
    FOR kk IN sc * 10 + 1 .. sc * 10 + nkeys LOOP
        nev := 1 + floor(random() * 6)::int;
        FOR i IN 1..nev LOOP
            day := floor(random() * 10)::int;
            seq := CASE WHEN with_seq THEN 1 + floor(random() * 40)::int END;
            cnt := cnt + 1;
            IF EXISTS (SELECT FROM ev e WHERE e.k = kk AND e.eff = date '2020-01-01' + day
                          AND (e.lsn = seq OR (seq IS NULL AND NOT e.del))) AND random() < 0.8 THEN
                -- the same event again (with a sequence: that (day, lsn)'s; without: the day's upsert)
                INSERT INTO ev SELECT sc, cnt, e.k, e.a, e.b, e.y, e.eff, e.lsn, e.del FROM ev e
                 WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND (e.lsn = seq OR (seq IS NULL AND NOT e.del))
                 ORDER BY e.n LIMIT 1;
            ELSIF EXISTS (SELECT FROM ev e WHERE e.k = kk AND e.eff = date '2020-01-01' + day
                             AND (e.lsn = seq OR (seq IS NULL AND NOT e.del))) THEN
                -- at an instant taken: a delete there (with a sequence, another lsn)
                INSERT INTO ev VALUES (sc, cnt, kk, NULL, NULL, NULL, date '2020-01-01' + day,
                                       CASE WHEN with_seq THEN 41 + cnt END, true);
            ELSIF random() < 0.2 THEN
                INSERT INTO ev VALUES (sc, cnt, kk, NULL, NULL, NULL, date '2020-01-01' + day, seq, true);
            ELSE
                INSERT INTO ev VALUES (sc, cnt, kk, vals[1 + floor(random() * 4)::int],
                                       CASE WHEN random() < 0.5 THEN 1 END,
                                       (ARRAY[NULL, 1, 2])[1 + floor(random() * 3)::int],
                                       date '2020-01-01' + day, seq, false);
            END IF;
        END LOOP;
    END LOOP;
    FOR r IN SELECT e.n FROM ev e WHERE e.s = sc ORDER BY random() LOOP
        IF left_ = 0 THEN nb := nb + 1; left_ := 1 + floor(random() * 4)::int; END IF;
        UPDATE ev SET bt = nb WHERE s = sc AND n = r.n;
        left_ := left_ - 1;
    END LOOP;
END $$;

CREATE FUNCTION stream_diffs(a regclass, b regclass, odd int) RETURNS TABLE (scenario int, diff text) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
    SELECT q.k / 10, string_agg(format('%%s %%s', q.w, q.r), '; ' ORDER BY q.w, q.r) FROM (
        (SELECT 'in-order-only' AS w, k, row(k, a, b, y, valid_from, valid_to)::text AS r FROM %1$s
         EXCEPT SELECT 'in-order-only', k, row(k, a, b, y, valid_from, valid_to)::text FROM %2$s)
        UNION ALL
        (SELECT 'shuffled-only', k, row(k, a, b, y, valid_from, valid_to)::text FROM %2$s
         EXCEPT SELECT 'shuffled-only', k, row(k, a, b, y, valid_from, valid_to)::text FROM %1$s)
        UNION ALL
        (SELECT 'model-only', k, row(k, a, b, y, valid_from, valid_to)::text FROM model WHERE (k / 10) %% 2 = %3$s
         EXCEPT SELECT 'model-only', k, row(k, a, b, y, valid_from, valid_to)::text FROM %1$s)
        UNION ALL
        (SELECT 'not-in-model', k, row(k, a, b, y, valid_from, valid_to)::text FROM %1$s
         EXCEPT SELECT 'not-in-model', k, row(k, a, b, y, valid_from, valid_to)::text FROM model)
        UNION ALL
        SELECT 'is_current', k, format('%%s %%s', k, valid_from) FROM (SELECT * FROM %1$s UNION ALL SELECT * FROM %2$s) x
         WHERE is_current IS DISTINCT FROM (valid_to IS NULL)) q
    GROUP BY q.k / 10$q$, a, b, odd);
END $$;

CREATE FUNCTION stream_round(first int, last int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    d int; rank int; nfail int;
BEGIN
    TRUNCATE ev, stream_a, stream_b, plain_a, plain_b;
    PERFORM scd2.prune_arrival_memory(x, 'infinity')
       FROM unnest(ARRAY['stream_a', 'stream_b', 'plain_a', 'plain_b']::regclass[]) AS x;
    PERFORM stream_generate(sc) FROM generate_series(first, last) AS sc;
    FOR d IN SELECT DISTINCT e.eff - date '2020-01-01' FROM ev e ORDER BY 1 LOOP
        PERFORM load_batch('stream_a', format('e.eff = %L AND e.lsn IS NOT NULL', date '2020-01-01' + d));
        PERFORM load_batch('plain_a', format('e.eff = %L AND e.lsn IS NULL', date '2020-01-01' + d));
    END LOOP;
    FOR rank IN 1 .. (SELECT max(e.bt) FROM ev e) LOOP
        PERFORM load_batch('stream_b', format('e.bt = %s AND e.lsn IS NOT NULL', rank));
        PERFORM load_batch('plain_b', format('e.bt = %s AND e.lsn IS NULL', rank));
    END LOOP;
    PERFORM stream_model();
    INSERT INTO stream_failures
    SELECT f.scenario, f.diff, (SELECT string_agg(format('(%s,%s,%s,%s,%s,%s,%s)', e.k, coalesce(quote_literal(e.a), 'NULL'),
                                                         coalesce(e.b::text, 'NULL'), coalesce(e.y::text, 'NULL'), e.eff,
                                                         coalesce(e.lsn::text, '-'), e.del), ' ' ORDER BY e.n)
                                  FROM ev e WHERE e.s = f.scenario)
      FROM (SELECT * FROM stream_diffs('stream_a', 'stream_b', 1)
            UNION ALL SELECT * FROM stream_diffs('plain_a', 'plain_b', 0)) f;
    GET DIAGNOSTICS nfail = ROW_COUNT;
    RETURN nfail;
END $$;

CREATE FUNCTION stream_round_safe(first int, last int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    sc int;
BEGIN
    BEGIN
        PERFORM stream_round(first, last);
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        IF first = last THEN
            INSERT INTO stream_failures SELECT first, 'error: ' || SQLERRM, NULL;
            RETURN;
        END IF;
    END;
    FOR sc IN first .. last LOOP
        PERFORM stream_round_safe(sc, sc);
    END LOOP;
END $$;

CREATE PROCEDURE stream_run(first int, n int, grp int) LANGUAGE plpgsql AS $$
DECLARE
    r int := first;
BEGIN
    WHILE r < first + n LOOP
        PERFORM stream_round_safe(r, least(r + grp, first + n) - 1);
        COMMIT;
        r := r + grp;
    END LOOP;
END $$;
