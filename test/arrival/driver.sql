-- test/arrival/driver.sql -- the order-free property (issue 24): the same
-- events give the same dimension whatever their batching and arrival order.
-- Loaded by run.sh into a fresh database; CALL arrival_run(first, n, group)
-- runs scenarios first .. first+n-1 and leaves one row per failing one in
-- arrival_failures.
--
-- Keys never interact, so a round loads `group` scenarios at once, each on
-- keys of its own (scenario * 10 + 1..3): a batch of the round is the union
-- of the scenarios' batches of that rank, which is, per key, exactly the
-- scenario's own batching.  A round that fails is run again scenario by
-- scenario, to name the failing ones.
--
-- A scenario: 1-3 keys, events on days 0-9, each an upsert of (a, b) with
-- a in {NULL, '', '~', 'x'} and b in {NULL, 1}, or a delete; a key may get
-- an upsert and a delete at one instant (the delete wins), exact duplicates
-- and keys that come back.  At one (key, day) there is at most one upserted
-- state (two would be an error however they arrive).
--   dim_a: the events in effective-time order, one batch per instant;
--   dim_b: the same events shuffled into random batches of 1-4;
--   the model (arrival_model): the dimension the events define, computed
--   procedurally from the event set alone.
-- All three must agree on (k, a, b, valid_from, valid_to).
SET client_min_messages = warning;
CREATE TABLE stg (k int, a text, b int, eff date, del boolean);
CREATE TABLE dim_a (sk bigint GENERATED ALWAYS AS IDENTITY, k int, a text, b int,
                    valid_from date, valid_to date, is_current boolean);
CREATE TABLE dim_b (LIKE dim_a INCLUDING IDENTITY);
SELECT scd2.register(d, ARRAY['k'], tracked => ARRAY['a', 'b'], effective_column => 'eff',
                     delete_column => 'del', is_current_column => 'is_current',
                     surrogate_key_column => 'sk', order_free => true)
  FROM unnest(ARRAY['dim_a', 'dim_b']::regclass[]) AS d;
CREATE TABLE ev (s int, n int, k int, a text, b int, eff date, del boolean, bt int);
CREATE TABLE model (k int, a text, b int, valid_from date, valid_to date);
CREATE TABLE arrival_failures (scenario int, diff text, events text);

-- Load the events of ev selected by cond (on alias e) into dim.
CREATE FUNCTION load_batch(dim regclass, cond text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE stg;
    EXECUTE 'INSERT INTO stg SELECT e.k, e.a, e.b, e.eff, e.del FROM ev e WHERE ' || cond;
    PERFORM count(*) FROM scd2.merge('stg', dim);
END $$;

-- The dimension the event set defines: per key and instant one state (a
-- delete wins), an instant that does not change the state in force is
-- dropped, each kept upsert lasts until the next kept instant.
CREATE FUNCTION arrival_model() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    r record;
    cur_k int := NULL;
    live boolean := false;      -- state in force: present?
    ca text; cb int; cvf date;
BEGIN
    TRUNCATE model;
    FOR r IN SELECT e.k, e.eff, bool_or(e.del) AS gone, min(e.a) AS a, min(e.b) AS b,
                    bool_or(e.a IS NULL AND NOT e.del) AS a_null, bool_or(e.b IS NULL AND NOT e.del) AS b_null
               FROM ev e GROUP BY e.k, e.eff ORDER BY e.k, e.eff LOOP
        IF cur_k IS DISTINCT FROM r.k THEN
            IF live THEN INSERT INTO model VALUES (cur_k, ca, cb, cvf, NULL); END IF;
            cur_k := r.k; live := false;
        END IF;
        IF r.gone THEN
            IF live THEN INSERT INTO model VALUES (cur_k, ca, cb, cvf, r.eff); live := false; END IF;
        ELSE
            -- the instant's one state (the generator makes at most one per key and day)
            r.a := CASE WHEN r.a_null THEN NULL ELSE r.a END;
            r.b := CASE WHEN r.b_null THEN NULL ELSE r.b END;
            IF NOT live OR ca IS DISTINCT FROM r.a OR cb IS DISTINCT FROM r.b THEN
                IF live THEN INSERT INTO model VALUES (cur_k, ca, cb, cvf, r.eff); END IF;
                live := true; ca := r.a; cb := r.b; cvf := r.eff;
            END IF;
        END IF;
    END LOOP;
    IF live THEN INSERT INTO model VALUES (cur_k, ca, cb, cvf, NULL); END IF;
END $$;

-- The events of scenario sc (deterministic in sc) and their shuffled batches (bt).
CREATE FUNCTION arrival_generate(sc int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    nkeys int; nev int; kk int; cnt int := 0; day int; nb int := 0; left_ int := 0;
    vals text[] := ARRAY[NULL, '', '~', 'x'];
    r record;
BEGIN
    PERFORM setseed((hashint4(sc)::bigint % 1000000) / 1000000.0);
    nkeys := 1 + floor(random() * 3)::int;
    FOR kk IN sc * 10 + 1 .. sc * 10 + nkeys LOOP
        nev := 1 + floor(random() * 5)::int;
        FOR i IN 1..nev LOOP
            day := floor(random() * 10)::int;
            cnt := cnt + 1;
            IF random() < 0.25 THEN
                INSERT INTO ev VALUES (sc, cnt, kk, NULL, NULL, date '2020-01-01' + day, true);
            ELSIF EXISTS (SELECT FROM ev e WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND NOT e.del) THEN
                -- the instant's state again: an exact duplicate
                INSERT INTO ev SELECT sc, cnt, e.k, e.a, e.b, e.eff, e.del FROM ev e
                 WHERE e.k = kk AND e.eff = date '2020-01-01' + day AND NOT e.del LIMIT 1;
            ELSE
                INSERT INTO ev VALUES (sc, cnt, kk, vals[1 + floor(random() * 4)::int],
                                       CASE WHEN random() < 0.5 THEN 1 END, date '2020-01-01' + day, false);
            END IF;
        END LOOP;
    END LOOP;
    -- shuffled into batches of 1-4
    FOR r IN SELECT e.n FROM ev e WHERE e.s = sc ORDER BY random() LOOP
        IF left_ = 0 THEN nb := nb + 1; left_ := 1 + floor(random() * 4)::int; END IF;
        UPDATE ev SET bt = nb WHERE s = sc AND n = r.n;
        left_ := left_ - 1;
    END LOOP;
END $$;

-- What differs, per scenario, between the in-order and shuffled dimensions and the model.
CREATE FUNCTION arrival_diffs() RETURNS TABLE (scenario int, diff text) LANGUAGE sql AS $$
    SELECT q.k / 10, string_agg(format('%s %s', q.w, q.r), '; ' ORDER BY q.w, q.r) FROM (
        (SELECT 'in-order-only' AS w, k, row(k, a, b, valid_from, valid_to)::text AS r FROM dim_a
         EXCEPT SELECT 'in-order-only', k, row(k, a, b, valid_from, valid_to)::text FROM dim_b)
        UNION ALL
        (SELECT 'shuffled-only', k, row(k, a, b, valid_from, valid_to)::text FROM dim_b
         EXCEPT SELECT 'shuffled-only', k, row(k, a, b, valid_from, valid_to)::text FROM dim_a)
        UNION ALL
        (SELECT 'model-only', k, row(k, a, b, valid_from, valid_to)::text FROM model
         EXCEPT SELECT 'model-only', k, row(k, a, b, valid_from, valid_to)::text FROM dim_a)
        UNION ALL
        (SELECT 'not-in-model', k, row(k, a, b, valid_from, valid_to)::text FROM dim_a
         EXCEPT SELECT 'not-in-model', k, row(k, a, b, valid_from, valid_to)::text FROM model)
        UNION ALL
        -- the bookkeeping: is_current agrees with valid_to
        SELECT 'is_current', k, format('%s %s', k, valid_from) FROM (SELECT * FROM dim_a UNION ALL SELECT * FROM dim_b) x
         WHERE is_current IS DISTINCT FROM (valid_to IS NULL)) q
    GROUP BY q.k / 10
$$;

-- One round: scenarios first .. last loaded together; failures recorded.
CREATE FUNCTION arrival_round(first int, last int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
    d int; rank int; nfail int;
BEGIN
    TRUNCATE ev, dim_a, dim_b;
    PERFORM scd2.prune_arrival_memory(x, 'infinity') FROM unnest(ARRAY['dim_a', 'dim_b']::regclass[]) AS x;
    PERFORM arrival_generate(sc) FROM generate_series(first, last) AS sc;
    -- in order: one batch per instant
    FOR d IN SELECT DISTINCT e.eff - date '2020-01-01' FROM ev e ORDER BY 1 LOOP
        PERFORM load_batch('dim_a', format('e.eff = %L', date '2020-01-01' + d));
    END LOOP;
    -- shuffled: the batches of each rank together
    FOR rank IN 1 .. (SELECT max(e.bt) FROM ev e) LOOP
        PERFORM load_batch('dim_b', format('e.bt = %s', rank));
    END LOOP;
    PERFORM arrival_model();
    INSERT INTO arrival_failures
    SELECT f.scenario, f.diff, (SELECT string_agg(format('(%s,%s,%s,%s,%s)', e.k, coalesce(quote_literal(e.a), 'NULL'),
                                                         coalesce(e.b::text, 'NULL'), e.eff, e.del), ' ' ORDER BY e.n)
                                  FROM ev e WHERE e.s = f.scenario)
      FROM arrival_diffs() f;
    GET DIAGNOSTICS nfail = ROW_COUNT;
    RETURN nfail;
END $$;

-- A round, and when it errors, its scenarios one by one (naming the failing ones).
CREATE FUNCTION arrival_round_safe(first int, last int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    sc int;
BEGIN
    BEGIN
        PERFORM arrival_round(first, last);
        RETURN;
    EXCEPTION WHEN OTHERS THEN
        IF first = last THEN
            INSERT INTO arrival_failures SELECT first, 'error: ' || SQLERRM, NULL;
            RETURN;
        END IF;
    END;
    FOR sc IN first .. last LOOP
        PERFORM arrival_round_safe(sc, sc);
    END LOOP;
END $$;

-- Scenarios first .. first+n-1, in rounds of grp, a transaction each
-- (every load's work tables hold locks until commit).
CREATE PROCEDURE arrival_run(first int, n int, grp int) LANGUAGE plpgsql AS $$
DECLARE
    r int := first;
BEGIN
    WHILE r < first + n LOOP
        PERFORM arrival_round_safe(r, least(r + grp, first + n) - 1);
        COMMIT;
        r := r + grp;
    END LOOP;
END $$;
