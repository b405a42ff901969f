-- First load, approach scd2_nolog: scd2.apply into the empty registered
-- dimension without the change log (SET LOCAL scd2.change_log = off): what
-- the change log costs.
SET LOCAL scd2.change_log = off;
CALL scd2.apply('stg', 'dim', effective_at => :'eff') \g /dev/null
