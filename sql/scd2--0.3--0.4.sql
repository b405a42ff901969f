/* scd2 0.3 -> 0.4 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.4'" to load this file. \quit

-- ---------------------------------------------------------------------------
-- Issue 25: progress of a running load (src/load_progress.c writes the text
-- this view reads; keep the pattern in step with it).
CREATE VIEW scd2.load_progress WITH (security_invoker = true) AS
SELECT a.pid,
       a.datname,
       a.usename,
       m[6]::pg_catalog.oid::pg_catalog.regclass AS dimension,
       m[7]::pg_catalog.oid::pg_catalog.regclass AS staging,
       m[1] AS phase,
       NULLIF(m[2], '-')::bigint AS rows_done,
       NULLIF(m[3], '-')::bigint AS rows_total,
       NULLIF(m[4], '-')::bigint AS changes_done,
       NULLIF(m[5], '-')::bigint AS changes_total,
       a.query_start AS started_at,
       a.state_change AS phase_started_at,
       m[8] AS query
  FROM pg_catalog.pg_stat_activity a,
       LATERAL pg_catalog.regexp_match(a.query,
           '^scd2: load of .* from .*: ([a-z ]+); staging rows ([0-9]+|-) of ([0-9]+|-); '
           'changes ([0-9]+|-) of ([0-9]+|-); oids ([0-9]+) ([0-9]+); query: (.*)$') AS m
 WHERE a.state OPERATOR(pg_catalog.=) 'active' AND m IS NOT NULL;
COMMENT ON VIEW scd2.load_progress IS
    'one row per running scd2 load: its phase and counts (staging rows, changes) as of the phase''s start, from pg_stat_activity and under its visibility rules';
GRANT SELECT ON scd2.load_progress TO PUBLIC;
