-- Helpers of the history_* tests (issue 27: the partial-extract guard,
-- rewind, apply_snapshots, dimension_at as known at); the other
-- history_* files run after this one.
SET client_min_messages = warning;
CREATE SCHEMA histops;

-- A checksum of every column of every row (columns named in drop left
-- out), and the row count.
CREATE FUNCTION histops.checksum(rel regclass, drop text[] DEFAULT '{}')
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r text;
BEGIN
    EXECUTE format('SELECT count(*) || '':'' || md5(coalesce(string_agg((to_jsonb(t) - %L::text[])::text, '','' ORDER BY (to_jsonb(t) - %L::text[])::text), ''''))'
                   ' FROM %s t', drop, drop, rel) INTO r;
    RETURN r;
END $$;

-- Everything a load, a revert or a rewind could write: the dimension,
-- the audit log, the change log and its runs.
CREATE FUNCTION histops.state(rel regclass)
RETURNS text LANGUAGE sql AS $$
    SELECT histops.checksum(rel) || ' audit ' || histops.checksum('scd2.audit_log', ARRAY['finished_at', 'duration'])
           || ' runs ' || histops.checksum('scd2.change_log_runs')
           || ' log ' || histops.checksum('scd2.change_log')
           || ' batches ' || histops.checksum('scd2.change_log_batches')
$$;

-- When a committed run became known (docs/SEMANTICS.md, "Known at"): its
-- commit timestamp where track_commit_timestamp keeps one, else when its
-- transaction began to commit.
CREATE FUNCTION histops.known_since(run bigint)
RETURNS timestamptz LANGUAGE sql AS $$
    SELECT coalesce(CASE WHEN current_setting('track_commit_timestamp') = 'on'
                         THEN pg_xact_commit_timestamp(a.txid::text::xid) END, a.committed_at)
      FROM scd2.audit_log a WHERE a.run_id = run
$$;

-- Run a statement; 'ok', or its error (SQLSTATE, message, detail, hint)
-- with run ids masked (they depend on the tests run before).  The error
-- is caught in a subtransaction: histops.state before and after shows that
-- a refused statement wrote nothing before it failed either.
CREATE FUNCTION histops.try(q text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m text; d text; h text; c text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS m = MESSAGE_TEXT, d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT,
                            c = RETURNED_SQLSTATE;
    RETURN c || ': ' || regexp_replace(m || coalesce(' DETAIL: ' || nullif(d, ''), '')
                                       || coalesce(' HINT: ' || nullif(h, ''), ''), '\mrun [0-9]+', 'run N', 'gi');
END $$;
