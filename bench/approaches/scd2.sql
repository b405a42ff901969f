-- Approach 1: scd2.apply on the registered dimension `dim`.
CALL scd2.apply('stg', 'dim', effective_at => :'eff') \g /dev/null
