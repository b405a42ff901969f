-- Approach 1c: scd2.merge on `dim`: the same load as scd2.apply, plus its
-- change feed (one row per dimension row written) read to the end.
SELECT pg_catalog.count(*) FROM scd2.merge('stg', 'dim', effective_at => :'eff') \g /dev/null
