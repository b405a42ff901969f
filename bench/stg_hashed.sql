-- bench/stg_hashed.sql -- the seeds' staging view (bench/gen.sql, bench/first/seeds.sql):
-- the seeds hash the tracked attributes "once in staging", in a view.
CREATE VIEW stg_hashed AS
SELECT s.*,
       encode(sha256(convert_to(concat_ws('||',
           coalesce(s.name, '~'), coalesce(s.city, '~'), coalesce(s.tier, '~'), coalesce(s.email, '~'),
           coalesce(s.birth_date::text, '~'), coalesce(s.credit_limit::text, '~')), 'UTF8')), 'hex') AS row_hash
  FROM stg s;
