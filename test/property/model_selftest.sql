/*
 * Hand-checked cases for the reference model (test/property/model.sql).
 * Every expectation below was worked out by hand from docs/SEMANTICS.md, not
 * by running the model.  Needs model.sql loaded; run with ON_ERROR_STOP: the
 * last statement fails when any case fails.
 *
 * Notation: day n is 2024-01-0n (UTC).  Dimension rows are written
 *   id city tier phone note valid_from valid_to is_current
 * with days for the instants and '-' for an open end.
 */

SET client_min_messages = warning;
SET timezone = 'UTC';
DROP SCHEMA IF EXISTS scd2_model_selftest CASCADE;
CREATE SCHEMA scd2_model_selftest;
SET search_path = scd2_model_selftest, public;

CREATE FUNCTION d(n int) RETURNS timestamptz IMMUTABLE LANGUAGE sql
AS $$ SELECT '2023-12-31 00:00+00'::timestamptz + n * interval '1 day' $$;
CREATE FUNCTION day(t timestamptz) RETURNS text IMMUTABLE LANGUAGE sql
AS $$ SELECT coalesce((extract(epoch FROM t - '2023-12-31 00:00+00'::timestamptz) / 86400)::int::text, '-') $$;

CREATE TABLE mdim (sk bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, id int NOT NULL,
                   city text, tier text, phone text, note text,
                   valid_from timestamptz NOT NULL, valid_to timestamptz,
                   is_current boolean NOT NULL DEFAULT true);
CREATE TABLE stg (id int, city text, tier text, phone text, note text, eff timestamptz, del boolean);
CREATE TABLE results (n serial, name text, ok boolean, detail text);

-- One case: reset the dimension to dim_values (id, city, tier, phone, note,
-- vf day, vt day), stage stg_values (id, city, tier, phone, note, eff day,
-- del), load, and compare the rows and the metrics (unlisted metrics: 0).
-- expected NULL means the load must fail, and leave the dimension as it was.
CREATE FUNCTION run_case(name text, mode text, dim_values text, stg_values text,
                         eat int, expected text[], metrics jsonb)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    got      text[];
    before   text[];
    m        jsonb;
    want     jsonb;
    err      text;
BEGIN
    TRUNCATE mdim, stg;
    IF dim_values IS NOT NULL THEN
        EXECUTE 'INSERT INTO mdim (id, city, tier, phone, note, valid_from, valid_to, is_current) '
                'SELECT id, city, tier, phone, note, d(vf), d(vt), vt IS NULL FROM (VALUES '
                || dim_values || ') v(id, city, tier, phone, note, vf, vt)';
    END IF;
    IF stg_values IS NOT NULL THEN
        EXECUTE 'INSERT INTO stg SELECT id, city, tier, phone, note, d(eff), del FROM (VALUES '
                || stg_values || ') v(id, city, tier, phone, note, eff, del)';
    END IF;
    SELECT array_agg(format('%s %s %s %s %s %s %s %s', id, quote_nullable(city), quote_nullable(tier),
                            quote_nullable(phone), quote_nullable(note), day(valid_from), day(valid_to),
                            CASE WHEN is_current THEN 't' ELSE 'f' END)
                     ORDER BY id, valid_from)
      INTO before FROM mdim;
    BEGIN
        m := scd2_model.load('stg', 'mdim', d(eat), ARRAY['id'], ARRAY['city', 'tier'], ARRAY['phone'],
                             ARRAY['note'], 'eff', 'del', mode);
    EXCEPTION WHEN OTHERS THEN
        err := SQLERRM;
    END;
    SELECT array_agg(format('%s %s %s %s %s %s %s %s', id, quote_nullable(city), quote_nullable(tier),
                            quote_nullable(phone), quote_nullable(note), day(valid_from), day(valid_to),
                            CASE WHEN is_current THEN 't' ELSE 'f' END)
                     ORDER BY id, valid_from)
      INTO got FROM mdim;
    IF expected IS NULL THEN
        INSERT INTO results (name, ok, detail)
        VALUES (name, err IS NOT NULL AND got IS NOT DISTINCT FROM before,
                coalesce('error: ' || err, 'no error; rows: ' || array_to_string(got, ' | ')));
        RETURN;
    END IF;
    IF err IS NOT NULL THEN
        INSERT INTO results (name, ok, detail) VALUES (name, false, 'unexpected error: ' || err);
        RETURN;
    END IF;
    want := '{"duplicates":0,"inserted":0,"new_versions":0,"closed":0,"deleted":0,"shortened":0,
              "type1_updated":0,"unchanged":0}'::jsonb || metrics;
    want := want || jsonb_build_object('source_rows',
                                       coalesce((metrics ->> 'source_rows')::int, (SELECT count(*) FROM stg)));
    IF got IS NOT DISTINCT FROM expected AND (m - 'feed') = want THEN
        INSERT INTO results (name, ok, detail) VALUES (name, true, NULL);
    ELSE
        INSERT INTO results (name, ok, detail)
        VALUES (name, false, format(E'\n  rows     %s\n  expected %s\n  metrics  %s\n  expected %s',
                                    array_to_string(got, ' | '), array_to_string(expected, ' | '),
                                    m - 'feed', want));
    END IF;
END $$;

------------------------------------------------------------------------------
-- In-order change, new key; rerunning the same batch is a no-op.
SELECT run_case('in-order change + new key', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'B', 'x', 'p1', 'n2', 3, NULL::boolean), (2, 'A', 'x', NULL, NULL, 2, false) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p1'' ''n1'' 1 3 f', '1 ''B'' ''x'' ''p1'' ''n2'' 3 - t',
          '2 ''A'' ''x'' NULL NULL 2 - t'],
    '{"inserted":1,"new_versions":1,"closed":1}');
SELECT run_case('rerun is a no-op', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, 3), (1, 'B', 'x', 'p1', 'n2', 3, NULL::int), (2, 'A', 'x', NULL, NULL, 2, NULL) $$,
    $$ (1, 'B', 'x', 'p1', 'n2', 3, NULL::boolean), (2, 'A', 'x', NULL, NULL, 2, false) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p1'' ''n1'' 1 3 f', '1 ''B'' ''x'' ''p1'' ''n2'' 3 - t',
          '2 ''A'' ''x'' NULL NULL 2 - t'],
    '{"unchanged":2}');

-- Changes to and from NULL are changes.
SELECT run_case('change to NULL and back', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int) $$,
    $$ (1, NULL, 'x', NULL, NULL, 2, NULL::boolean), (1, 'A', 'x', NULL, NULL, 4, NULL) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 2 f', '1 NULL ''x'' NULL NULL 2 4 f', '1 ''A'' ''x'' NULL NULL 4 - t'],
    '{"new_versions":2,"closed":1}');

-- '~' is a value: NULL -> '~' is a change, '~' -> '~' is not.
SELECT run_case('tilde vs NULL', 'incremental',
    $$ (1, NULL, 'x', NULL, NULL, 1, NULL::int), (2, '~', 'x', NULL, NULL, 1, NULL) $$,
    $$ (1, '~', 'x', NULL, NULL, 2, NULL::boolean), (2, '~', 'x', NULL, NULL, 2, NULL) $$, 9,
    ARRAY['1 NULL ''x'' NULL NULL 1 2 f', '1 ''~'' ''x'' NULL NULL 2 - t', '2 ''~'' ''x'' NULL NULL 1 - t'],
    '{"new_versions":1,"closed":1,"unchanged":1}');

-- Several changes of one key in one batch; equal consecutive states collapse.
SELECT run_case('several changes collapse', 'incremental', NULL,
    $$ (3, 'A', 'x', 'p1', 'n1', 1, NULL::boolean), (3, 'A', 'x', 'p1', 'n1', 2, NULL),
       (3, 'B', 'x', 'p1', 'n1', 3, NULL), (3, 'B', 'x', 'p1', 'n1', 4, NULL),
       (3, 'A', 'x', 'p1', 'n1', 5, NULL) $$, 9,
    ARRAY['3 ''A'' ''x'' ''p1'' ''n1'' 1 3 f', '3 ''B'' ''x'' ''p1'' ''n1'' 3 5 f',
          '3 ''A'' ''x'' ''p1'' ''n1'' 5 - t'],
    '{"inserted":1,"new_versions":2,"unchanged":2}');

-- Exact duplicates collapse silently.
SELECT run_case('exact duplicate', 'incremental', NULL,
    $$ (4, 'A', 'x', 'p1', 'n1', 1, NULL::boolean), (4, 'A', 'x', 'p1', 'n1', 1, NULL) $$, 9,
    ARRAY['4 ''A'' ''x'' ''p1'' ''n1'' 1 - t'],
    '{"inserted":1,"duplicates":1}');

-- Same key and instant, different values (even only a Type 1 or other
-- column, or the delete marker): ambiguous, the load fails.
SELECT run_case('conflicting duplicate', 'incremental',
    $$ (4, 'Q', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (4, 'A', 'x', 'p1', 'n1', 2, NULL::boolean), (4, 'B', 'x', 'p1', 'n1', 2, NULL) $$, 9, NULL, NULL);
SELECT run_case('conflicting duplicate (note only)', 'incremental', NULL,
    $$ (4, 'A', 'x', 'p1', 'n1', 2, NULL::boolean), (4, 'A', 'x', 'p1', 'n2', 2, NULL) $$, 9, NULL, NULL);
SELECT run_case('conflicting duplicate (delete marker)', 'incremental', NULL,
    $$ (4, 'A', 'x', 'p1', 'n1', 2, NULL::boolean), (4, 'A', 'x', 'p1', 'n1', 2, true) $$, 9, NULL, NULL);
-- A NULL and a false delete marker mean the same (present): duplicates.
SELECT run_case('duplicate with NULL vs false marker', 'incremental', NULL,
    $$ (4, 'A', 'x', 'p1', 'n1', 2, NULL::boolean), (4, 'A', 'x', 'p1', 'n1', 2, false) $$, 9,
    ARRAY['4 ''A'' ''x'' ''p1'' ''n1'' 2 - t'],
    '{"inserted":1,"duplicates":1}');
SELECT run_case('NULL business key', 'incremental', NULL,
    $$ (4, 'A', 'x', 'p1', 'n1', 2, NULL::boolean), (NULL, 'A', 'x', 'p1', 'n1', 2, NULL) $$, 9, NULL, NULL);
SELECT run_case('NULL effective time', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int) $$,
    $$ (1, 'B', 'x', 'p1', 'n1', NULL::int, NULL::boolean) $$, 9, NULL, NULL);

-- Delete, then the key comes back (new_version: the key had versions).
-- A delete of a key that has no version is a no-op.
SELECT run_case('delete + comeback', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int) $$,
    $$ (1, 'A', 'x', NULL, NULL, 2, true), (1, 'A', 'x', NULL, NULL, 4, false),
       (5, 'A', 'x', NULL, NULL, 1, true) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 2 f', '1 ''A'' ''x'' NULL NULL 4 - t'],
    '{"deleted":1,"new_versions":1,"unchanged":1}');
SELECT run_case('delete of a deleted key', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 2) $$,
    $$ (1, 'B', 'x', NULL, NULL, 4, true) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 2 f'],
    '{"unchanged":1}');

-- Snapshot mode: current keys missing from the extract are deleted at
-- effective_at; closed keys are left alone.
SELECT run_case('snapshot deletion', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int), (2, 'B', 'x', NULL, NULL, 1, NULL), (3, 'C', 'x', NULL, NULL, 1, 2) $$,
    $$ (1, 'A', 'x', NULL, NULL, 3, NULL::boolean) $$, 5,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 - t', '2 ''B'' ''x'' NULL NULL 1 5 f', '3 ''C'' ''x'' NULL NULL 1 2 f'],
    '{"deleted":1,"unchanged":1}');
-- A missing key whose current version starts after effective_at cannot be
-- deleted then: refused (its version would stay current).
SELECT run_case('snapshot deletion before the current version starts', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int), (2, 'B', 'x', NULL, NULL, 6, NULL) $$,
    $$ (1, 'A', 'x', NULL, NULL, 3, NULL::boolean) $$, 5, NULL, NULL);
-- An empty extract is refused, unless scd2.allow_empty_snapshot is on.
SELECT run_case('snapshot: empty extract refused', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int), (2, 'B', 'x', NULL, NULL, 1, 3), (2, 'C', 'x', NULL, NULL, 3, NULL) $$,
    NULL, 5, NULL, NULL);
SELECT set_config('scd2.allow_empty_snapshot', 'on', false);
SELECT run_case('snapshot: empty extract allowed', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, NULL::int), (2, 'B', 'x', NULL, NULL, 1, 3), (2, 'C', 'x', NULL, NULL, 3, NULL) $$,
    NULL, 5,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 5 f', '2 ''B'' ''x'' NULL NULL 1 3 f', '2 ''C'' ''x'' NULL NULL 3 5 f'],
    '{"deleted":2}');
SELECT set_config('scd2.allow_empty_snapshot', 'off', false);
-- A deleted key back in the extract with an effective time before its
-- deletion: current again from the deletion on (history is not rewritten).
SELECT run_case('snapshot: key back, effective before its deletion', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 3), (2, 'B', 'x', NULL, NULL, 1, NULL::int) $$,
    $$ (1, 'C', 'x', NULL, NULL, 2, NULL::boolean), (2, 'B', 'x', NULL, NULL, 1, NULL) $$, 5,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''C'' ''x'' NULL NULL 3 - t', '2 ''B'' ''x'' NULL NULL 1 - t'],
    '{"new_versions":1,"unchanged":1}');
SELECT run_case('snapshot: key back with its old values', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 3) $$,
    $$ (1, 'A', 'x', NULL, NULL, 2, NULL::boolean) $$, 5,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''A'' ''x'' NULL NULL 3 - t'],
    '{"new_versions":1}');
-- A latest row older than the current version, with other values: the
-- extract cannot be made current without rewriting history: refused.
SELECT run_case('snapshot: latest row before the current version, other values', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 4), (1, 'B', 'x', NULL, NULL, 4, NULL::int) $$,
    $$ (1, 'C', 'x', NULL, NULL, 2, NULL::boolean) $$, 6, NULL, NULL);
-- ... with the current values: nothing to do (an extract sent again).
SELECT run_case('snapshot: latest row before the current version, same values', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 4), (1, 'B', 'x', NULL, NULL, 4, NULL::int) $$,
    $$ (1, 'B', 'x', NULL, NULL, 2, NULL::boolean) $$, 6,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 4 f', '1 ''B'' ''x'' NULL NULL 4 - t'],
    '{"unchanged":1}');
-- ... the returned key of the case above, loaded again: nothing to do.
SELECT run_case('snapshot: key back, loaded again', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 3), (1, 'C', 'x', NULL, NULL, 3, NULL::int) $$,
    $$ (1, 'C', 'x', NULL, NULL, 2, NULL::boolean) $$, 6,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''C'' ''x'' NULL NULL 3 - t'],
    '{"unchanged":1}');
SELECT run_case('snapshot: key back, an older row is a late change', 'snapshot',
    $$ (1, 'A', 'x', NULL, NULL, 1, 4) $$,
    $$ (1, 'B', 'x', NULL, NULL, 2, NULL::boolean), (1, 'C', 'x', NULL, NULL, 3, NULL) $$, 6,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 2 f', '1 ''B'' ''x'' NULL NULL 2 4 f', '1 ''C'' ''x'' NULL NULL 4 - t'],
    '{"shortened":1,"new_versions":2}');

-- Late arrivals.
SELECT run_case('late change splits a version', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'C', 'x', 'p9', 'n9', 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''C'' ''x'' ''p9'' ''n9'' 3 5 f', '1 ''B'' ''x'' NULL NULL 5 - t'],
    '{"shortened":1,"new_versions":1}');
SELECT run_case('late change equal to the state in force', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'A', 'x', 'p9', 'n9', 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 5 f', '1 ''B'' ''x'' NULL NULL 5 - t'],
    '{"unchanged":1}');
SELECT run_case('late delete leaves a gap', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'A', 'x', NULL, NULL, 3, true) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''B'' ''x'' NULL NULL 5 - t'],
    '{"shortened":1}');
SELECT run_case('late change at an existing valid_from, other state', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'C', 'x', NULL, NULL, 5, NULL::boolean) $$, 9, NULL, NULL);
SELECT run_case('late delete at an existing valid_from', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'A', 'x', NULL, NULL, 1, true) $$, 9, NULL, NULL);
SELECT run_case('late change at an existing valid_from, same state', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'A', 'x', 'p7', NULL, 1, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 5 f', '1 ''B'' ''x'' NULL NULL 5 - t'],
    '{"unchanged":1}');
SELECT run_case('same state at the current valid_from, new phone', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'B', 'x', 'p7', 'n7', 5, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 5 f', '1 ''B'' ''x'' ''p7'' NULL 5 - t'],
    '{"type1_updated":1}');
SELECT run_case('late change before the first version', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 3, NULL::int) $$,
    $$ (1, 'Z', 'x', NULL, NULL, 1, NULL::boolean) $$, 9,
    ARRAY['1 ''Z'' ''x'' NULL NULL 1 3 f', '1 ''A'' ''x'' NULL NULL 3 - t'],
    '{"new_versions":1}');
SELECT run_case('late change inside a closed version before a gap', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 3) $$,
    $$ (1, 'B', 'x', NULL, NULL, 2, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 2 f', '1 ''B'' ''x'' NULL NULL 2 3 f'],
    '{"shortened":1,"new_versions":1}');
SELECT run_case('change at a gap start', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 3) $$,
    $$ (1, 'B', 'x', NULL, NULL, 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''B'' ''x'' NULL NULL 3 - t'],
    '{"new_versions":1}');
SELECT run_case('late change equal to the next version (E never dropped)', 'incremental',
    $$ (1, 'A', 'x', NULL, NULL, 1, 5), (1, 'B', 'x', NULL, NULL, 5, NULL::int) $$,
    $$ (1, 'B', 'x', NULL, NULL, 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL NULL 1 3 f', '1 ''B'' ''x'' NULL NULL 3 5 f', '1 ''B'' ''x'' NULL NULL 5 - t'],
    '{"shortened":1,"new_versions":1}');

-- Type 1.
SELECT run_case('type 1 only change', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'A', 'x', 'p2', 'n9', 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p2'' ''n1'' 1 - t'],
    '{"type1_updated":1}');
SELECT run_case('type 1 to NULL', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'A', 'x', NULL, 'n1', 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' NULL ''n1'' 1 - t'],
    '{"type1_updated":1}');
SELECT run_case('type 1 on a closed row is ignored', 'incremental',
    $$ (1, 'A', 'x', 'p1', NULL, 1, 5), (1, 'B', 'x', 'p1', NULL, 5, NULL::int) $$,
    $$ (1, 'A', 'x', 'p2', NULL, 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p1'' NULL 1 5 f', '1 ''B'' ''x'' ''p1'' NULL 5 - t'],
    '{"unchanged":1}');
SELECT run_case('type 1 + tracked change in one row', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'B', 'x', 'p2', 'n2', 3, NULL::boolean) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p1'' ''n1'' 1 3 f', '1 ''B'' ''x'' ''p2'' ''n2'' 3 - t'],
    '{"closed":1,"new_versions":1}');
SELECT run_case('type 1 then tracked change', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'A', 'x', 'p2', 'n2', 2, NULL::boolean), (1, 'B', 'x', 'p3', 'n3', 3, NULL) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p2'' ''n1'' 1 3 f', '1 ''B'' ''x'' ''p3'' ''n3'' 3 - t'],
    '{"closed":1,"new_versions":1}');
SELECT run_case('type 1 then delete', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'A', 'x', 'p2', 'n2', 2, NULL::boolean), (1, 'B', 'x', 'p3', 'n3', 3, true) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p2'' ''n1'' 1 3 f'],
    '{"deleted":1}');
-- (dropped rows in a new version's run count as unchanged, though the new
-- version takes the Type 1 values of the last one)
SELECT run_case('type 1 of a new version from the last row of its run', 'incremental', NULL,
    $$ (6, 'A', 'x', 'p1', 'n1', 1, NULL::boolean), (6, 'A', 'x', 'p2', 'n2', 2, NULL),
       (6, 'A', 'x', 'p3', 'n3', 3, NULL), (6, 'B', 'x', 'p4', 'n4', 4, NULL) $$, 9,
    ARRAY['6 ''A'' ''x'' ''p3'' ''n1'' 1 4 f', '6 ''B'' ''x'' ''p4'' ''n4'' 4 - t'],
    '{"inserted":1,"new_versions":1,"unchanged":2}');
SELECT run_case('type 1 back to the old value in one batch', 'incremental',
    $$ (1, 'A', 'x', 'p1', 'n1', 1, NULL::int) $$,
    $$ (1, 'A', 'x', 'p2', NULL, 2, NULL::boolean), (1, 'A', 'x', 'p1', NULL, 3, NULL) $$, 9,
    ARRAY['1 ''A'' ''x'' ''p1'' ''n1'' 1 - t'],
    '{"unchanged":2}');

------------------------------------------------------------------------------
SELECT format('selftest %s: %s%s', CASE WHEN ok THEN 'ok  ' ELSE 'FAIL' END, name, coalesce(' ' || detail, ''))
  FROM results ORDER BY n;

DO $$
DECLARE
    nfail int;
    ntot  int;
BEGIN
    SELECT count(*) FILTER (WHERE NOT ok), count(*) INTO nfail, ntot FROM scd2_model_selftest.results;
    IF nfail > 0 THEN
        RAISE EXCEPTION 'model selftest: % of % cases failed', nfail, ntot;
    END IF;
    RAISE WARNING 'model selftest: all % cases passed', ntot;
END $$;

RESET search_path;
DROP SCHEMA scd2_model_selftest CASCADE;
