-- register's 0.5 options: inferred_column (issue 49), sequence_column and
-- ignore_null_updates (issue 50).  What each refuses, with the registry
-- unchanged, and what it stores.  Their loads are tested in infer_* and
-- stream_*.
SET client_min_messages = warning;
CREATE SCHEMA ropt;
SET search_path = ropt, public;
CREATE TABLE d (id int, name text, city text, score int, lsn bigint, eff timestamptz,
                valid_from timestamptz, valid_to timestamptz, sk bigint GENERATED ALWAYS AS IDENTITY,
                is_inferred boolean NOT NULL DEFAULT false, note text);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'],
                     effective_column => 'eff', surrogate_key_column => 'sk', order_free => true) IS NOT NULL AS registered;
CREATE TEMP TABLE before AS SELECT * FROM scd2.dimensions WHERE dimension = 'd'::regclass;
-- inferred_column: a boolean column of its own
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     surrogate_key_column => 'sk', order_free => true, inferred_column => 'missing');
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     surrogate_key_column => 'sk', order_free => true, inferred_column => 'note');
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     surrogate_key_column => 'sk', order_free => true, inferred_column => 'sk');
-- sequence_column and ignore_null_updates need an order-free dimension
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => false, sequence_column => 'lsn');
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => false, ignore_null_updates => ARRAY['city']);
-- the sequence is none of the registration's columns
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, sequence_column => 'eff');
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, sequence_column => 'name');
-- partial updates apply to tracked and Type 1 columns only, each once
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, ignore_null_updates => ARRAY['id']);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, ignore_null_updates => ARRAY['note']);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, ignore_null_updates => ARRAY['nope']);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, ignore_null_updates => ARRAY['city', 'city']);
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true, ignore_null_updates => ARRAY['city', NULL]);
SELECT scd2.register('d', ARRAY['id'], effective_column => 'eff', order_free => true,
                     sequence_column => 'lsn', ignore_null_updates => ARRAY['lsn']);
-- every refusal left the registration as it was
SELECT (SELECT row_to_json(b)::text FROM before b) =
       (SELECT row_to_json(d)::text FROM scd2.dimensions d WHERE dimension = 'd'::regclass) AS registry_unchanged;
-- stored
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     surrogate_key_column => 'sk', order_free => true, inferred_column => 'is_inferred',
                     sequence_column => 'lsn', ignore_null_updates => ARRAY['city']) IS NOT NULL AS registered;
SELECT inferred_column, sequence_column, ignore_null_updates FROM scd2.dimensions WHERE dimension = 'd'::regclass;
-- registering again without them clears them
SELECT scd2.register('d', ARRAY['id'], tracked => ARRAY['name', 'city'], effective_column => 'eff',
                     order_free => true) IS NOT NULL AS registered;
SELECT inferred_column, sequence_column, ignore_null_updates FROM scd2.dimensions WHERE dimension = 'd'::regclass;
-- with every shared column tracked (tracked NULL), any dimension column but
-- the registration's own may ignore NULL updates
SELECT scd2.register('d', ARRAY['id'], effective_column => 'eff', order_free => true,
                     ignore_null_updates => ARRAY['city', 'note']) IS NOT NULL AS registered;
SELECT ignore_null_updates FROM scd2.dimensions WHERE dimension = 'd'::regclass;
-- the internal steps register calls are refused to anyone but the owner,
-- called directly (they are executable by PUBLIC: register runs with its
-- caller's rights); nothing stored
CREATE TEMP TABLE before2 AS SELECT * FROM scd2.dimensions WHERE dimension = 'd'::regclass;
CREATE ROLE scd2_ropt_user;
GRANT USAGE ON SCHEMA ropt TO scd2_ropt_user;
SET ROLE scd2_ropt_user;
SELECT scd2._registry_store_stream('d', 'lsn', ARRAY['city']::name[]);
SELECT scd2._registry_store_inferred('d', 'is_inferred');
RESET ROLE;
SELECT (SELECT row_to_json(b)::text FROM before2 b) =
       (SELECT row_to_json(d)::text FROM scd2.dimensions d WHERE dimension = 'd'::regclass) AS registry_unchanged;
DROP SCHEMA ropt CASCADE;
DROP ROLE scd2_ropt_user;
RESET search_path;
