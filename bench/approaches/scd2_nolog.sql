-- Approach 1c: scd2.apply on `dim` with the change log off
-- (SET scd2.change_log = off): the load without the before-images that
-- make it revertable, to measure what the change log costs.
SET scd2.change_log = off;
CALL scd2.apply('stg', 'dim', effective_at => :'eff') \g /dev/null
RESET scd2.change_log;
