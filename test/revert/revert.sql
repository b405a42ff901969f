/*
 * scd2 revert property test (schema scd2_rp), driven by test/revert/run.sh.
 *
 * Scenario n of a seed: a dimension gets a few random loads, then the run
 * to revert (R); S0 is the dimension just before R, W the rows R wrote
 * (its change feed: inserted, updated).  Then, at random:
 *   - a hand edit of a row R wrote (closed or deleted)       -> must refuse
 *   - a hand edit of a row R did not write (its city)        -> kept
 *   - a hand-made backfilled version of a key R touched      -> may refuse
 *   - a re-registration: other tracked columns, or the move
 *     to current_valid_to 'infinity' (open rows moved too)   -> followed
 *   - a re-registration with another is_current_column      -> must refuse
 *   - a later load                                           -> must refuse
 *   - a load committed by another session (dblink) while
 *     the revert's transaction (READ COMMITTED or
 *     REPEATABLE READ, at random) is open                    -> must refuse
 * Then scd2.revert(R), in a subtransaction.  The property:
 *   - a revert that succeeds leaves exactly the expected state: every row
 *     R inserted gone, every row R updated as in S0 (its valid_to in the
 *     convention in force), every other row as it was before the revert;
 *     and the dimension's invariants hold;
 *   - a revert that is refused wrote nothing: the dimension, the audit
 *     log and the change log are as before it;
 *   - a revert that must be refused is; one that nothing stands against
 *     succeeds.
 */

-- (the SQL functions name public.rdim, which each scenario creates)
SET check_function_bodies = off;
DROP SCHEMA IF EXISTS scd2_rp CASCADE;
CREATE SCHEMA scd2_rp;

CREATE TABLE scd2_rp.scenario (
    n            int PRIMARY KEY,
    run_id       bigint,
    s0           text[],          -- the dimension before R, one text per row, by (id, valid_from)
    w_ins        text[],          -- (id, valid_from) of the rows R inserted
    w_upd        text[],          -- ... that R updated
    actions      text[] NOT NULL DEFAULT '{}',
    must_refuse  boolean NOT NULL DEFAULT false,
    may_refuse   boolean NOT NULL DEFAULT false,
    infinity     boolean NOT NULL DEFAULT false,   -- current_valid_to 'infinity' at the revert
    iso          text NOT NULL DEFAULT 'READ COMMITTED',
    concurrent   boolean NOT NULL DEFAULT false,
    concurrent_loaded boolean,
    before_rows  text[],          -- the dimension just before the revert (the latest view)
    before_sum   text,            -- ... and the audit log and the change log
    outcome      text             -- 'ok' or the error
);

CREATE FUNCTION scd2_rp.rnd(n int) RETURNS int VOLATILE LANGUAGE sql
AS $$ SELECT floor(random() * n)::int $$;

CREATE FUNCTION scd2_rp.inst(k int) RETURNS timestamptz IMMUTABLE LANGUAGE sql
AS $$ SELECT '2024-01-01 00:00+00'::timestamptz + k * interval '1 day' $$;

-- One row's identity and its full content (no surrogate key).
CREATE FUNCTION scd2_rp.ident(id int, vf timestamptz) RETURNS text IMMUTABLE LANGUAGE sql
AS $$ SELECT format('%s@%s', id, vf) $$;

CREATE FUNCTION scd2_rp.rows(tbl regclass) RETURNS text[] LANGUAGE plpgsql AS $$
DECLARE
    r text[];
BEGIN
    EXECUTE format($q$SELECT coalesce(array_agg(format('%%s|%%s|%%s|%%s|%%s|%%s', scd2_rp.ident(id, valid_from),
                                         quote_nullable(city), quote_nullable(tier), quote_nullable(phone),
                                         quote_nullable(valid_to), quote_nullable(is_current))
                                  ORDER BY id, valid_from, valid_to, city, tier, phone), '{}') FROM %s$q$, tbl)
      INTO r;
    RETURN r;
END $$;

-- Everything a revert writes, as one text.
CREATE FUNCTION scd2_rp.sums() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM public.rdim t)
           || ' ' || (SELECT md5(coalesce(string_agg(a::text, ',' ORDER BY a.run_id), ''))
                        FROM (SELECT run_id, dimension, staging, status, effective_at, started_at, message
                                FROM scd2.audit_log) a)
           || ' ' || (SELECT md5(coalesce(string_agg(r::text, ',' ORDER BY r.run_id), '')) FROM scd2.change_log_runs r)
           || ' ' || (SELECT md5(coalesce(string_agg(c::text, ',' ORDER BY c::text), '')) FROM scd2.change_log c)
$$;

-- The invariants of the dimension (current: valid_to NULL or 'infinity'); NULL when they hold.
CREATE FUNCTION scd2_rp.invariants() RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(v, '; ') FROM (
        SELECT format('key %s has %s current rows', id, count(*)) FROM public.rdim
         WHERE coalesce(valid_to, 'infinity') = 'infinity' GROUP BY id HAVING count(*) > 1
        UNION ALL
        SELECT format('key %s: [%s, %s) overlaps [%s, %s)', a.id, a.valid_from, a.valid_to, b.valid_from, b.valid_to)
          FROM public.rdim a JOIN public.rdim b ON a.id = b.id AND a.sk < b.sk
         WHERE a.valid_from < coalesce(b.valid_to, 'infinity') AND b.valid_from < coalesce(a.valid_to, 'infinity')
        UNION ALL
        SELECT format('key %s at %s: is_current %s with valid_to %s', id, valid_from, is_current, valid_to)
          FROM public.rdim WHERE is_current IS DISTINCT FROM (coalesce(valid_to, 'infinity') = 'infinity')
    ) s(v)
$$;

-- A random batch into tbl (rstg or rstg2).
CREATE FUNCTION scd2_rp.gen_batch(tbl text, nkeys int, ninst int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    x float8;
BEGIN
    EXECUTE format('TRUNCATE %I', tbl);
    FOR r IN 1 .. 1 + scd2_rp.rnd(2 * nkeys) LOOP
        x := random();
        EXECUTE format('INSERT INTO %I VALUES ($1, $2, $3, $4, $5, $6)', tbl)
          USING 1 + scd2_rp.rnd(nkeys), (ARRAY['A', 'B', 'C'])[1 + scd2_rp.rnd(3)], (ARRAY['x', 'y'])[1 + scd2_rp.rnd(2)],
                (ARRAY['p1', 'p2', NULL])[1 + scd2_rp.rnd(3)], scd2_rp.inst(scd2_rp.rnd(ninst)), x < 0.1;
    END LOOP;
END $$;

-- Load rstg (or rstg2); the change feed, or NULL when the load was refused.
CREATE FUNCTION scd2_rp.try_load(tbl text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    feed jsonb;
BEGIN
    SELECT coalesce(jsonb_agg(to_jsonb(f)), '[]') INTO feed FROM scd2.merge(tbl::regclass, 'public.rdim') f;
    RETURN feed;
EXCEPTION WHEN OTHERS THEN
    RETURN NULL;
END $$;

CREATE FUNCTION scd2_rp.register(infinity boolean, tracked name[] DEFAULT ARRAY['city', 'tier'],
                                 is_current name DEFAULT 'is_current') RETURNS void LANGUAGE sql AS $$
    SELECT scd2.register('public.rdim', ARRAY['id'], tracked => tracked, type1 => ARRAY['phone'],
                         effective_column => 'eff', delete_column => 'del',
                         is_current_column => is_current, surrogate_key_column => 'sk',
                         current_valid_to => CASE WHEN infinity THEN 'infinity' ELSE 'null' END,
                         order_free => false);  -- the scenarios' model is of loads in arrival order
$$;

/*
 * Build scenario n up to the revert: the loads, R, the actions after it.
 * Commits as one statement; the revert runs in the driver's transaction.
 */
CREATE FUNCTION scd2_rp.prepare(seed bigint, n int, have_dblink boolean) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    nkeys int;
    ninst int := 12;
    feed  jsonb;
    sc    scd2_rp.scenario;
    v     record;
    t1    int;
    acts  text[] := '{}';
BEGIN
    PERFORM setseed(((seed * 7919 + n) % 1000003) / 1000003.0);
    nkeys := 2 + scd2_rp.rnd(5);
    DROP TABLE IF EXISTS public.rdim, public.rstg, public.rstg2;
    CREATE TABLE public.rdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                              city text, tier text, phone text, valid_from timestamptz NOT NULL,
                              valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
    CREATE TABLE public.rstg (id int, city text, tier text, phone text, eff timestamptz, del boolean);
    CREATE TABLE public.rstg2 (LIKE public.rstg);
    PERFORM scd2_rp.register(false);
    DELETE FROM scd2_rp.scenario WHERE scenario.n = prepare.n;
    sc.n := n;
    sc.must_refuse := false;
    sc.may_refuse := false;
    sc.infinity := false;

    -- a history
    FOR i IN 1 .. 1 + scd2_rp.rnd(3) LOOP
        PERFORM scd2_rp.gen_batch('rstg', nkeys, ninst);
        PERFORM scd2_rp.try_load('rstg');
    END LOOP;

    -- R: a random batch (a few tries: a batch can be refused), at last
    -- one that inserts a key of its own
    sc.s0 := scd2_rp.rows('public.rdim');
    FOR i IN 1 .. 6 LOOP
        PERFORM scd2_rp.gen_batch('rstg', nkeys, ninst);
        IF i = 6 THEN
            TRUNCATE public.rstg;
        END IF;
        INSERT INTO public.rstg VALUES (100 + n, 'N', 'x', 'p1', scd2_rp.inst(scd2_rp.rnd(ninst)), false);
        feed := scd2_rp.try_load('rstg');
        EXIT WHEN feed IS NOT NULL;
    END LOOP;
    IF feed IS NULL THEN
        RAISE EXCEPTION 'scenario %: no load of R succeeded', n;
    END IF;
    SELECT max(run_id) INTO sc.run_id FROM scd2.audit_log WHERE status = 'success' AND dimension = 'public.rdim';
    SELECT coalesce(array_agg(scd2_rp.ident((e -> 'business_key' ->> 'id')::int, (e ->> 'valid_from')::timestamptz))
                      FILTER (WHERE e ->> 'action' IN ('insert', 'new_version')), '{}'),
           coalesce(array_agg(scd2_rp.ident((e -> 'business_key' ->> 'id')::int, (e ->> 'valid_from')::timestamptz))
                      FILTER (WHERE e ->> 'action' NOT IN ('insert', 'new_version')), '{}')
      INTO sc.w_ins, sc.w_upd
      FROM jsonb_array_elements(coalesce(feed, '[]')) e;

    -- a hand edit of a row R wrote: closed (when current) or deleted
    IF random() < 0.25 AND cardinality(sc.w_ins || sc.w_upd) > 0 THEN
        SELECT * INTO v FROM public.rdim d WHERE scd2_rp.ident(d.id, d.valid_from) = ANY (sc.w_ins || sc.w_upd)
         ORDER BY d.id, d.valid_from OFFSET scd2_rp.rnd(cardinality(sc.w_ins || sc.w_upd)) LIMIT 1;
        IF FOUND AND v.valid_to IS NULL THEN
            UPDATE public.rdim SET valid_to = v.valid_from + interval '1 hour', is_current = false WHERE sk = v.sk;
            acts := acts || format('closed %s by hand', scd2_rp.ident(v.id, v.valid_from));
            sc.must_refuse := true;
        ELSIF FOUND THEN
            DELETE FROM public.rdim WHERE sk = v.sk;
            acts := acts || format('deleted %s by hand', scd2_rp.ident(v.id, v.valid_from));
            sc.must_refuse := true;
        END IF;
    END IF;
    -- a hand edit of a row R did not write
    IF random() < 0.3 THEN
        SELECT * INTO v FROM public.rdim d WHERE NOT scd2_rp.ident(d.id, d.valid_from) = ANY (sc.w_ins || sc.w_upd)
         ORDER BY random() LIMIT 1;
        IF FOUND THEN
            UPDATE public.rdim SET city = 'edited' WHERE sk = v.sk;
            acts := acts || format('edited the city of %s', scd2_rp.ident(v.id, v.valid_from));
        END IF;
    END IF;
    -- a backfilled closed version of a key R touched, where nothing is now
    IF random() < 0.25 AND cardinality(sc.w_ins || sc.w_upd) > 0 THEN
        t1 := scd2_rp.rnd(ninst + 4);
        SELECT split_part((sc.w_ins || sc.w_upd)[1 + scd2_rp.rnd(cardinality(sc.w_ins || sc.w_upd))], '@', 1)::int AS id
          INTO v;
        IF NOT EXISTS (SELECT FROM public.rdim d WHERE d.id = v.id
                          AND d.valid_from < scd2_rp.inst(t1 + 1) AND coalesce(d.valid_to, 'infinity') > scd2_rp.inst(t1)) THEN
            INSERT INTO public.rdim (id, city, tier, phone, valid_from, valid_to, is_current)
                 VALUES (v.id, 'backfill', 'x', NULL, scd2_rp.inst(t1), scd2_rp.inst(t1 + 1), false);
            acts := acts || format('backfilled key %s at [%s, %s)', v.id, t1, t1 + 1);
            sc.may_refuse := true;
        END IF;
    END IF;
    -- a re-registration
    t1 := scd2_rp.rnd(8);
    IF t1 = 0 THEN
        PERFORM scd2_rp.register(false, ARRAY['city']);
        acts := acts || 'registered again tracking city only'::text;
    ELSIF t1 = 1 THEN
        UPDATE public.rdim SET valid_to = 'infinity' WHERE valid_to IS NULL;
        PERFORM scd2_rp.register(true);
        sc.infinity := true;
        acts := acts || 'moved to current_valid_to infinity'::text;
    ELSIF t1 = 2 THEN
        ALTER TABLE public.rdim RENAME is_current TO current_flag;
        PERFORM scd2_rp.register(false, is_current => 'current_flag');
        ALTER TABLE public.rdim RENAME current_flag TO is_current;
        acts := acts || 'registered again with another is_current_column'::text;
        sc.must_refuse := true;
    END IF;
    -- a later load
    IF random() < 0.2 THEN
        PERFORM scd2_rp.gen_batch('rstg', nkeys, ninst);
        IF scd2_rp.try_load('rstg') IS NOT NULL THEN
            acts := acts || 'a later load'::text;
            sc.must_refuse := true;
        END IF;
    END IF;
    -- the revert's transaction, and a load committed by another session meanwhile
    sc.iso := CASE WHEN random() < 0.5 THEN 'REPEATABLE READ' ELSE 'READ COMMITTED' END;
    sc.concurrent := have_dblink AND random() < 0.3;
    IF sc.concurrent THEN
        PERFORM scd2_rp.gen_batch('rstg2', nkeys, ninst);
    END IF;
    sc.actions := acts;
    INSERT INTO scd2_rp.scenario SELECT sc.*;
END $$;

-- In the driver's transaction (its isolation level), after its first read.
CREATE FUNCTION scd2_rp.attempt(n int, conninfo text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    sc    scd2_rp.scenario;
    m     text;
    c     text;
BEGIN
    SELECT * INTO sc FROM scd2_rp.scenario s WHERE s.n = attempt.n;
    IF sc.concurrent THEN
        -- committed by another session while this transaction is open
        sc.concurrent_loaded := (SELECT l FROM public.dblink(conninfo,
            'SELECT scd2_rp.try_load(''rstg2'') IS NOT NULL') AS t(l boolean));
        IF sc.concurrent_loaded THEN
            sc.must_refuse := true;
            sc.actions := sc.actions || 'a load committed by another session during the revert''s transaction'::text;
        END IF;
    END IF;
    -- the state before the revert, as the latest snapshot sees it
    SELECT t.r, t.s INTO sc.before_rows, sc.before_sum
      FROM public.dblink(conninfo, 'SELECT scd2_rp.rows(''public.rdim''), scd2_rp.sums()') AS t(r text[], s text);
    BEGIN
        PERFORM scd2.revert(sc.run_id);
        sc.outcome := 'ok';
    EXCEPTION WHEN OTHERS THEN
        GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, c = RETURNED_SQLSTATE;
        sc.outcome := c || ': ' || m;
    END;
    UPDATE scd2_rp.scenario s SET must_refuse = sc.must_refuse, actions = sc.actions,
           concurrent_loaded = sc.concurrent_loaded, before_rows = sc.before_rows,
           before_sum = sc.before_sum, outcome = sc.outcome
     WHERE s.n = attempt.n;
END $$;

-- The state a successful revert must leave: see the top.
CREATE FUNCTION scd2_rp.expected(sc scd2_rp.scenario) RETURNS text[] LANGUAGE sql AS $$
    SELECT coalesce(array_agg(x ORDER BY x), '{}') FROM (
        SELECT b AS x FROM unnest(sc.before_rows) b
         WHERE NOT split_part(b, '|', 1) = ANY (sc.w_ins || sc.w_upd)
        UNION ALL
        -- a row R updated, as in S0; "current" in the convention in force
        SELECT CASE WHEN sc.infinity AND split_part(s, '|', 5) = 'NULL'
                    THEN format('%s|%s|%s|%s|%s|%s', split_part(s, '|', 1), split_part(s, '|', 2), split_part(s, '|', 3),
                                split_part(s, '|', 4), quote_literal('infinity'::timestamptz), split_part(s, '|', 6))
                    ELSE s END
          FROM unnest(sc.s0) s WHERE split_part(s, '|', 1) = ANY (sc.w_upd)
    ) e
$$;

-- After the driver's COMMIT: 'PASS n ...' or 'FAIL n ...'.
CREATE FUNCTION scd2_rp.verdict(seed bigint, n int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    sc    scd2_rp.scenario;
    after text[];
    want  text[];
    inv   text;
    what  text := NULL;
    label text;
BEGIN
    SELECT * INTO sc FROM scd2_rp.scenario s WHERE s.n = verdict.n;
    after := scd2_rp.rows('public.rdim');
    label := format('seed %s, %s, %s%s', seed, sc.iso, coalesce(nullif(array_to_string(sc.actions, '; '), ''), 'no action'),
                    format(', R wrote %s rows', cardinality(sc.w_ins || sc.w_upd)));
    IF sc.outcome = 'ok' THEN
        want := scd2_rp.expected(sc);
        inv := scd2_rp.invariants();
        IF sc.must_refuse THEN
            what := 'the revert succeeded but had to be refused';
        ELSIF after IS DISTINCT FROM want THEN
            what := format('not the expected state: missing %s, unexpected %s',
                           (SELECT array_agg(x) FROM (SELECT unnest(want) EXCEPT ALL SELECT unnest(after)) s(x)),
                           (SELECT array_agg(x) FROM (SELECT unnest(after) EXCEPT ALL SELECT unnest(want)) s(x)));
        ELSIF inv IS NOT NULL THEN
            what := 'invariants broken: ' || inv;
        END IF;
    ELSE
        IF scd2_rp.sums() IS DISTINCT FROM sc.before_sum THEN
            what := 'refused (' || sc.outcome || ') but wrote something';
        ELSIF NOT sc.must_refuse AND NOT sc.may_refuse THEN
            what := 'refused though nothing stands against it: ' || sc.outcome;
        END IF;
    END IF;
    IF what IS NULL THEN
        RETURN format('PASS %s %s %s', n, CASE WHEN sc.outcome = 'ok' THEN 'reverted' ELSE 'refused' END,
                      CASE WHEN sc.concurrent THEN 'concurrent' ELSE 'alone' END);
    END IF;
    RETURN format('FAIL %s: %s: %s (replay: ONLY=%s SEED=%s)', n, label, what, n, seed);
END $$;
