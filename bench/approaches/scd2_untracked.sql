-- Approach 1d: scd2.apply on `dim` with track_activities off: the load
-- without its progress reports in pg_stat_activity (load_progress.c), to
-- measure what they cost.
SET track_activities = off;
CALL scd2.apply('stg', 'dim', effective_at => :'eff') \g /dev/null
RESET track_activities;
