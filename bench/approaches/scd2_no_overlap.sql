-- Approach 1b: scd2.apply on dim_nov, a copy of `dim` registered with
-- no_overlap => true (the exclusion constraint checks every write).
CALL scd2.apply('stg', 'dim_nov', effective_at => :'eff') \g /dev/null
