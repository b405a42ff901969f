-- First load, approach scd2: scd2.apply into the empty registered dimension.
CALL scd2.apply('stg', 'dim', effective_at => :'eff') \g /dev/null
