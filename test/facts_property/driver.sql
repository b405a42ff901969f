-- scd2 maintained-facts property test (issue 49): random dimension events,
-- late and out of order, loaded in small batches into an in-order or an
-- order-free dimension (in order: every event a value of its own, so that
-- no event is a no-op the dimension forgets), random facts keyed with scd2.asof as they arrive,
-- and reverts and rewinds of random runs.  After every step:
--   - scd2.check_facts returns no row for the maintained fact table;
--   - every fact equals an independent model's keying: the model is the
--     set of events of the runs not undone, and the value of a key at an
--     instant is that of its latest event at or before it; a fact's
--     version (the dimension row its surrogate key names) must hold that
--     value and be valid at the fact's time; a fact the model gives no
--     value at some step (its key had no event by then) is NULL from
--     then on (a NULL surrogate key names no business key and is never
--     re-keyed: docs/FACTS.md);
--   - scd2.rekey_facts has nothing left to do (the runs re-keyed it).
-- Each scenario is a function of its number (setseed).
SET client_min_messages = warning;

CREATE TABLE fp_events (k int, eff timestamptz, v text, step int, live boolean);
CREATE TABLE fp_runs (step int, run_id bigint, live boolean);
CREATE TABLE fp_facts (n int, k int, t timestamptz, orphan boolean);
CREATE TABLE fp_failures (scenario int, step int, what text, diff text, events text);
CREATE TABLE fp_log (scenario int, step int, action text);

-- The model's value of key k at t (NULL: no event of k at or before t).
CREATE FUNCTION fp_model(p_k int, p_t timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT e.v FROM fp_events e WHERE e.live AND e.k = p_k AND e.eff <= p_t ORDER BY e.eff DESC LIMIT 1
$$;

-- What is wrong after a step ('' : nothing).
CREATE FUNCTION fp_check() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_bad text := '';
    r record;
BEGIN
    -- the model's orphans first
    UPDATE fp_facts f SET orphan = true WHERE NOT f.orphan AND fp_model(f.k, f.t) IS NULL;
    IF EXISTS (SELECT FROM scd2.check_facts('fp_fact')) THEN
        v_bad := v_bad || 'check_facts: ' || (SELECT string_agg(c::text, ' ') FROM scd2.check_facts('fp_fact') c) || '; ';
    END IF;
    FOR r IN
        SELECT m.n, m.k, m.t, m.orphan, f.sk, d.v AS dv, d.valid_from, d.valid_to, fp_model(m.k, m.t) AS mv
          FROM fp_facts m JOIN fp_fact f ON f.n = m.n LEFT JOIN fp_dim d ON d.sk = f.sk
         ORDER BY m.n
    LOOP
        IF r.orphan THEN
            IF r.sk IS NOT NULL THEN
                v_bad := v_bad || format('fact %s (key %s at %s) should name no version, names %s (%s); ',
                                         r.n, r.k, r.t, r.sk, r.dv);
            END IF;
        ELSIF r.sk IS NULL OR r.dv IS DISTINCT FROM r.mv OR NOT (r.valid_from <= r.t AND (r.valid_to IS NULL OR r.t < r.valid_to)) THEN
            v_bad := v_bad || format('fact %s (key %s at %s): model %s, names %s (%s, %s to %s); ',
                                     r.n, r.k, r.t, r.mv, r.sk, r.dv, r.valid_from, r.valid_to);
        END IF;
    END LOOP;
    IF scd2.rekey_facts('fp_fact') <> 0 THEN
        v_bad := v_bad || 'rekey_facts found facts left to re-key; ';
    END IF;
    RETURN v_bad;
END $$;

CREATE PROCEDURE fp_scenario(s int) LANGUAGE plpgsql AS $$
DECLARE
    v_order_free boolean := s % 2 = 0;
    v_keys int;
    v_steps int;
    v_r float8;
    v_run bigint;
    v_target bigint;
    v_n int := 0;
    v_bad text;
    v_what text;
    v_t timestamptz;
    v_k int;
    v_ev int := 0;
BEGIN
    PERFORM setseed(((s * 0.6180339887) - floor(s * 0.6180339887)) * 2 - 1);
    v_keys := 1 + floor(random() * 3)::int;
    v_steps := 6 + floor(random() * 7)::int;
    TRUNCATE fp_events, fp_runs, fp_facts;
    DROP TABLE IF EXISTS fp_fact, fp_dim, fp_stg;
    CREATE TABLE fp_dim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, k int NOT NULL, v text,
                         valid_from timestamptz NOT NULL, valid_to timestamptz);
    CREATE TABLE fp_stg (k int, v text, eff timestamptz);
    PERFORM scd2.register('fp_dim', ARRAY['k'], effective_column => 'eff', order_free => v_order_free);
    CREATE TABLE fp_fact (n int, sk bigint, t timestamptz);
    PERFORM scd2.register_fact('fp_fact', 'fp_dim', 'sk', 't');
    FOR i IN 1 .. v_steps LOOP
        v_r := random();
        IF i = 1 OR v_r < 0.45 THEN
            -- a batch of 1-3 events at instants no event of the scenario has
            -- (days 0-30 from 2024-01-01, each key its own hour): late, out
            -- of order, or in order
            TRUNCATE fp_stg;
            FOR j IN 1 .. 1 + floor(random() * 3)::int LOOP
                v_k := 1 + floor(random() * v_keys)::int;
                v_t := timestamptz '2024-01-01 00:00+00' + floor(random() * 31) * interval '1 day' + v_k * interval '1 hour';
                CONTINUE WHEN EXISTS (SELECT FROM fp_events e WHERE e.k = v_k AND e.eff = v_t)
                           OR EXISTS (SELECT FROM fp_stg g WHERE g.k = v_k AND g.eff = v_t);
                -- order-free: values that repeat (extends, collapsed
                -- states); in order, every event a value of its own (an
                -- in-order dimension keeps no event that changed nothing:
                -- a late event then splits the version in force, which
                -- is what the model says only when no event was a no-op)
                v_ev := v_ev + 1;
                INSERT INTO fp_stg VALUES (v_k, CASE WHEN v_order_free THEN (ARRAY['a', 'b', 'c'])[1 + floor(random() * 3)::int]
                                                     ELSE 'e' || v_ev END, v_t);
            END LOOP;
            CALL scd2.apply('fp_stg', 'fp_dim', now(), v_run);
            INSERT INTO fp_events SELECT g.k, g.eff, g.v, i, true FROM fp_stg g;
            INSERT INTO fp_runs VALUES (i, v_run, true);
            v_what := 'load ' || (SELECT string_agg(format('(%s,%s,%s)', g.k, g.v, to_char(g.eff AT TIME ZONE 'UTC', 'DD HH24')), ' ') FROM fp_stg g);
        ELSIF v_r < 0.70 THEN
            -- 2-8 facts, keyed as they arrive
            FOR j IN 1 .. 2 + floor(random() * 7)::int LOOP
                v_n := v_n + 1;
                v_k := 1 + floor(random() * v_keys)::int;
                v_t := timestamptz '2024-01-01 00:00+00' + random() * interval '33 days';
                INSERT INTO fp_fact VALUES (v_n, scd2.asof('fp_dim', v_t, v_k), v_t);
                INSERT INTO fp_facts VALUES (v_n, v_k, v_t, false);
            END LOOP;
            v_what := 'facts';
        ELSIF v_r < 0.85 THEN
            -- revert the newest load not undone
            SELECT r.run_id INTO v_run FROM fp_runs r WHERE r.live ORDER BY r.step DESC LIMIT 1;
            CONTINUE WHEN v_run IS NULL;
            PERFORM scd2.revert(v_run);
            UPDATE fp_events e SET live = false FROM fp_runs r WHERE r.run_id = v_run AND e.step = r.step;
            UPDATE fp_runs SET live = false WHERE run_id = v_run;
            v_what := 'revert ' || v_run;
        ELSE
            -- rewind to a random load not undone (or to before the first)
            SELECT r.run_id INTO v_target FROM fp_runs r WHERE r.live ORDER BY random() LIMIT 1;
            CONTINUE WHEN v_target IS NULL;
            IF random() < 0.2 THEN
                v_target := 0;      -- before the first load: rewound by time
                PERFORM scd2.rewind('fp_dim', timestamptz '2000-01-01');
            ELSE
                PERFORM scd2.rewind('fp_dim', v_target);
            END IF;
            UPDATE fp_events e SET live = false FROM fp_runs r WHERE r.live AND r.run_id > v_target AND e.step = r.step;
            UPDATE fp_runs SET live = false WHERE live AND run_id > v_target;
            v_what := 'rewind to ' || v_target;
        END IF;
        INSERT INTO fp_log VALUES (s, i, v_what);
        v_bad := fp_check();
        IF v_bad <> '' THEN
            INSERT INTO fp_failures VALUES (s, i, v_what, v_bad,
                (CASE WHEN v_order_free THEN 'order-free: ' ELSE 'in order: ' END)
                || (SELECT string_agg(step || ':' || action, ' | ' ORDER BY step) FROM fp_log WHERE scenario = s));
            RETURN;
        END IF;
    END LOOP;
END $$;

-- Scenarios first .. first + n - 1, each in its own transaction; an error
-- is a failure of its scenario.
CREATE PROCEDURE fp_run(first int, n int) LANGUAGE plpgsql AS $$
DECLARE
    v_msg text;
BEGIN
    FOR s IN first .. first + n - 1 LOOP
        BEGIN
            CALL fp_scenario(s);
        EXCEPTION WHEN OTHERS THEN
            GET STACKED DIAGNOSTICS v_msg = MESSAGE_TEXT;
            INSERT INTO fp_failures VALUES (s, NULL, 'error', v_msg,
                (SELECT string_agg(step || ':' || action, ' | ' ORDER BY step) FROM fp_log WHERE scenario = s));
        END;
        COMMIT;
    END LOOP;
END $$;
