-- The cluster the other check files run on: a coordinator in the
-- metadata, two active workers, and scd2 at the same version on every node.
SELECT groupid = 0 AS coordinator, noderole, isactive, shouldhaveshards
FROM pg_dist_node ORDER BY groupid;
SELECT extversion FROM pg_extension WHERE extname = 'scd2';
SELECT result FROM run_command_on_workers(
  $$SELECT extversion FROM pg_extension WHERE extname = 'scd2'$$) ORDER BY nodeport;
