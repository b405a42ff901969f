/* scd2 0.4 -> 0.5 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.5'" to load this file. \quit

------------------------------------------------------------------------------
-- Issues 48 and 52: a running load keeps its statement in
-- pg_stat_activity.query and appends its progress as a comment on a line of
-- its own (src/load/progress.c writes it; keep the pattern in step), with
-- counts that move within a phase and the phase's start in Unix seconds; a
-- load that ends, fails or is cancelled leaves the statement alone.
------------------------------------------------------------------------------
CREATE OR REPLACE VIEW scd2.load_progress WITH (security_invoker = true) AS
SELECT a.pid,
       a.datname,
       a.usename,
       m[8]::pg_catalog.oid::pg_catalog.regclass AS dimension,
       m[9]::pg_catalog.oid::pg_catalog.regclass AS staging,
       m[2] AS phase,
       NULLIF(m[4], '-')::bigint AS rows_done,
       NULLIF(m[5], '-')::bigint AS rows_total,
       NULLIF(m[6], '-')::bigint AS changes_done,
       NULLIF(m[7], '-')::bigint AS changes_total,
       a.query_start AS started_at,
       pg_catalog.to_timestamp(m[3]::double precision) AS phase_started_at,
       m[1] AS query
  FROM pg_catalog.pg_stat_activity a,
       LATERAL pg_catalog.regexp_match(a.query,
           '^(.*)[[:space:]]/[*] scd2 load: ([a-z ]+) since ([0-9]+[.][0-9]+); '
           'staging rows ([0-9]+|-) of ([0-9]+|-); changes ([0-9]+|-) of ([0-9]+|-); '
           'oids ([0-9]+) ([0-9]+) [*]/$') AS m
 WHERE a.state OPERATOR(pg_catalog.=) 'active' AND m IS NOT NULL;
COMMENT ON VIEW scd2.load_progress IS
    'one row per running scd2 load: its phase, when the phase began, and its counts (staging rows, changes; they move within a phase), from the progress comment a load appends to its statement in pg_stat_activity.query, under that view''s visibility rules';
