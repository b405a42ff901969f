-- Helpers shared by the scd2 regression tests (pg_regress runs the files in
-- order in one database; this one runs first).
SET client_min_messages = warning;
CREATE SCHEMA scd2_test;

-- Invariants every dimension must keep after every load: one current row
-- per key, no overlapping versions, valid_from < valid_to, is_current in
-- step with valid_to.  Returns 'ok' or the first problem found.
CREATE FUNCTION scd2_test.invariants(dim regclass, key text DEFAULT 'id')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    problem text;
BEGIN
    EXECUTE format($q$
        SELECT 'key ' || k || ': ' || what FROM (
          SELECT %1$s::text AS k, 'several current rows' AS what FROM %2$s
           WHERE valid_to IS NULL GROUP BY %1$s HAVING count(*) > 1
          UNION ALL
          SELECT %1$s::text, 'empty or inverted version' FROM %2$s WHERE valid_to <= valid_from
          UNION ALL
          SELECT %1$s::text, 'is_current out of step' FROM %2$s
           WHERE is_current IS DISTINCT FROM (valid_to IS NULL)
          UNION ALL
          SELECT k, 'overlapping versions' FROM (
            SELECT %1$s::text AS k, valid_from,
                   lag(valid_to) OVER (PARTITION BY %1$s ORDER BY valid_from) AS prev_to,
                   lag(valid_from) OVER (PARTITION BY %1$s ORDER BY valid_from) AS prev_from
              FROM %2$s) x
           WHERE prev_from IS NOT NULL AND (prev_to IS NULL OR prev_to > valid_from)
        ) p LIMIT 1$q$, key, dim) INTO problem;
    RETURN coalesce(problem, 'ok');
END $$;

-- The last audit row of a dimension must agree with a change feed saved
-- in pg_temp.feed: every action count equals its metric.
CREATE FUNCTION scd2_test.metrics_match_feed(dim regclass)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    a scd2.audit_log;
    f record;
BEGIN
    SELECT * INTO a FROM scd2.audit_log WHERE dimension = dim::regclass::text
        OR dimension = (SELECT format('%I.%I', nspname, relname) FROM pg_class c
                          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = dim)
     ORDER BY run_id DESC LIMIT 1;
    SELECT count(*) FILTER (WHERE action = 'insert') AS inserted,
           count(*) FILTER (WHERE action = 'new_version') AS new_versions,
           count(*) FILTER (WHERE action = 'close') AS closed,
           count(*) FILTER (WHERE action = 'delete') AS deleted,
           count(*) FILTER (WHERE action = 'shorten') AS shortened,
           count(*) FILTER (WHERE action = 'type1') AS type1_updated
      INTO f FROM pg_temp.feed;
    IF (a.inserted, a.new_versions, a.closed, a.deleted, a.shortened, a.type1_updated)
       IS DISTINCT FROM (f.inserted, f.new_versions, f.closed, f.deleted, f.shortened, f.type1_updated) THEN
        RETURN format('audit %s vs feed %s',
                      (a.inserted, a.new_versions, a.closed, a.deleted, a.shortened, a.type1_updated),
                      (f.inserted, f.new_versions, f.closed, f.deleted, f.shortened, f.type1_updated));
    END IF;
    RETURN 'ok';
END $$;

-- The metrics of the last run of a dimension, compactly.
CREATE FUNCTION scd2_test.last_metrics(dim regclass)
RETURNS TABLE (status text, source_rows bigint, inserted bigint, new_versions bigint,
               closed bigint, deleted bigint, shortened bigint, type1_updated bigint,
               unchanged bigint, duplicates bigint)
LANGUAGE sql AS $$
    SELECT status, source_rows, inserted, new_versions, closed, deleted, shortened,
           type1_updated, unchanged, duplicates
      FROM scd2.audit_log
     WHERE dimension = (SELECT format('%I.%I', nspname, relname) FROM pg_class c
                          JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = dim)
     ORDER BY run_id DESC LIMIT 1
$$;

-- Everything a load or a revert could write, as one text: every column of
-- every row of the dimension, the audit log, the change log.  Equal
-- before and after a refused statement: it wrote nothing.
CREATE FUNCTION scd2_test.checksum(rel regclass)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format('SELECT count(*) || '':'' || md5(coalesce(string_agg(t::text, '','' ORDER BY t::text), ''''))'
                   ' FROM %s t', rel) INTO r;
    RETURN r;
END $$;
CREATE FUNCTION scd2_test.state(rel regclass)
RETURNS text LANGUAGE sql AS $$
    SELECT scd2_test.checksum(rel) || ' audit ' || scd2_test.checksum('scd2.audit_log')
           || ' runs ' || scd2_test.checksum('scd2.change_log_runs') || ' log ' || scd2_test.checksum('scd2.change_log')
$$;
