-- Loads never cut, round or corrupt silently (issue 17, classes 3, 5, 10):
-- every refused load names the column or cause, the key and the dimension,
-- and writes nothing (the dimension and scd2.audit_log are the same after).
SET client_min_messages = warning;
SET TimeZone = 'UTC';
CREATE SCHEMA safe;
SET search_path = safe, public;

-- The dimension's rows and the audit log, as one value.
CREATE FUNCTION state(dim regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text;
BEGIN
    EXECUTE format('SELECT pg_catalog.md5(coalesce(string_agg(d::text, '','' ORDER BY d::text), '''')) FROM %s d', dim)
       INTO r;
    RETURN r || ' / ' || (SELECT count(*) || ' audit rows, last ' || coalesce(max(run_id), 0) FROM scd2.audit_log);
END $$;

\set VERBOSITY default

-- ---------------------------------------------------------------------
-- Class 3: values are stored as they are or not at all.
CREATE TABLE dim (sk bigint GENERATED ALWAYS AS IDENTITY, id int NOT NULL, city varchar(3),
                  code char(3), amount numeric(5,2), qty int,
                  valid_from timestamptz NOT NULL, valid_to timestamptz, is_current boolean NOT NULL DEFAULT true);
SELECT scd2.register('dim', ARRAY['id']);
CREATE TABLE stg (id bigint, city text, code text, amount numeric, qty numeric);
-- Values that fit are stored and compared as stored: 1.250 is 1.25, 'ab' is 'ab '.
INSERT INTO stg VALUES (1, 'Osl', 'ab', 1.250, 7), (2, 'Rom', 'xyz', 2.5, 8.0);
SELECT count(*) FROM scd2.merge('stg', 'dim', '2024-01-01');
SELECT id, city, code, amount, qty, valid_from, valid_to FROM dim ORDER BY id, valid_from;
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', '2024-01-02');
SELECT state('dim') AS before \gset

-- varchar(3): a longer value is not cut (a change past the third
-- character would never be seen again).
UPDATE stg SET city = 'Oslo' WHERE id = 1;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET city = 'Osl' WHERE id = 1;
-- char(3)
UPDATE stg SET code = 'abcd' WHERE id = 2;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET code = 'xyz' WHERE id = 2;
-- numeric(5,2): rounding, and overflow
UPDATE stg SET amount = 1.255 WHERE id = 1;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET amount = 123456 WHERE id = 1;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET amount = 1.25 WHERE id = 1;
-- numeric into int: rounding
UPDATE stg SET qty = 7.5 WHERE id = 1;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET qty = 7 WHERE id = 1;
-- Class 10: a bigint business key out of range for the int key column.
INSERT INTO stg VALUES (3000000000, 'Lim', 'abc', 1, 1);
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
-- CALL at top level: refused the same way, the audit row says why.
CALL scd2.apply('stg', 'dim', '2024-02-01');
SELECT status, source_rows, inserted, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) AS dimension_rows FROM dim;
DELETE FROM stg WHERE id = 3000000000;
SELECT state('dim') AS before \gset
-- A long value is shown shortened in the message, never stored.
UPDATE stg SET city = repeat('x', 150) WHERE id = 2;
SELECT * FROM scd2.merge('stg', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg SET city = 'Rom' WHERE id = 2;
-- char(3) compares as char: trailing spaces do not count (a fixed-width
-- extract's 'xyz  ' is 'xyz').
UPDATE stg SET code = 'xyz  ' WHERE id = 2;
-- Everything fits again: the batch is unchanged.
SELECT count(*) AS feed_rows FROM scd2.merge('stg', 'dim', '2024-02-01');

-- Class 10: a bigint value out of range for an int tracked column.
SELECT state('dim') AS before \gset
CREATE TABLE stg_big (id int, city varchar(3), code char(3), amount numeric(5,2), qty bigint);
INSERT INTO stg_big VALUES (1, 'Osl', 'ab', 1.25, 7), (2, 'Rom', 'xyz', 2.5, 5000000000);
SELECT * FROM scd2.merge('stg_big', 'dim', '2024-02-01');
SELECT state('dim') = :'before' AS nothing_written;
UPDATE stg_big SET qty = 9 WHERE id = 2;
SELECT action, business_key, valid_from FROM scd2.merge('stg_big', 'dim', '2024-02-01') ORDER BY 2, 3;

-- ---------------------------------------------------------------------
-- Class 5: effective times.
CREATE TABLE edim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('edim', ARRAY['id'], effective_column => 'eff');
CREATE TABLE estg (id int, v text, eff timestamptz);
INSERT INTO estg VALUES (1, 'a', '2024-01-01'), (2, 'a', '2024-01-01');
SELECT count(*) FROM scd2.merge('estg', 'edim');
SELECT state('edim') AS before \gset
-- infinity and -infinity in the effective column, for a new key and a change
INSERT INTO estg VALUES (3, 'a', 'infinity');
SELECT * FROM scd2.merge('estg', 'edim');
SELECT state('edim') = :'before' AS nothing_written;
DELETE FROM estg WHERE id = 3;
UPDATE estg SET v = 'b', eff = '-infinity' WHERE id = 2;
SELECT * FROM scd2.merge('estg', 'edim');
SELECT state('edim') = :'before' AS nothing_written;
-- several rows of one key (the general path) with one of them infinite
UPDATE estg SET v = 'b', eff = '2024-02-01' WHERE id = 2;
INSERT INTO estg VALUES (2, 'c', 'infinity');
SELECT * FROM scd2.merge('estg', 'edim');
SELECT state('edim') = :'before' AS nothing_written;
DELETE FROM estg WHERE eff = 'infinity';
-- effective_at => infinity (used by dimensions without an effective column
-- and by snapshot deletions): refused whatever the registration.
CREATE TABLE idim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('idim', ARRAY['id'], current_valid_to => 'infinity');
CREATE TABLE istg (id int, v text);
INSERT INTO istg VALUES (1, 'a');
SELECT count(*) FROM scd2.merge('istg', 'idim', '2024-01-01');
SELECT state('idim') AS before \gset
UPDATE istg SET v = 'b';
SELECT * FROM scd2.merge('istg', 'idim', 'infinity');
SELECT state('idim') = :'before' AS nothing_written;
SELECT * FROM scd2.merge('istg', 'idim', '-infinity');
CALL scd2.apply('istg', 'idim', 'infinity');
SELECT status, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT * FROM scd2.merge('estg', 'edim', 'infinity');
SELECT count(*) AS idim_rows FROM idim;

-- date validity columns: an effective time must be a whole day in the
-- session's time zone; timestamp validity: the local time must map back to
-- the same instant (not in a daylight-saving fall-back hour).
CREATE TABLE ddim (id int NOT NULL, v text, valid_from date NOT NULL, valid_to date);
SELECT scd2.register('ddim', ARRAY['id'], effective_column => 'eff');
TRUNCATE estg;
INSERT INTO estg VALUES (1, 'a', '2024-01-01 12:00');
SELECT * FROM scd2.merge('estg', 'ddim');
SELECT count(*) AS ddim_rows FROM ddim;
UPDATE estg SET eff = '2024-01-01';
SELECT action, business_key, valid_from FROM scd2.merge('estg', 'ddim');
SELECT state('ddim') AS before \gset
SET TimeZone = 'Europe/Oslo';
-- midnight UTC is 01:00 in Oslo: not a whole day there
UPDATE estg SET v = 'b', eff = '2024-02-01 00:00+00';
SELECT * FROM scd2.merge('estg', 'ddim');
SELECT state('ddim') = :'before' AS nothing_written;
UPDATE estg SET eff = '2024-02-01 00:00+01';
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('estg', 'ddim') ORDER BY 3;
CREATE TABLE tdim (id int NOT NULL, v text, valid_from timestamp NOT NULL, valid_to timestamp);
SELECT scd2.register('tdim', ARRAY['id'], effective_column => 'eff');
-- 2024-10-27 02:30 happens twice in Oslo; the first one does not map back
UPDATE estg SET eff = '2024-10-27 02:30+02';
SELECT * FROM scd2.merge('estg', 'tdim');
SELECT count(*) AS tdim_rows FROM tdim;
UPDATE estg SET eff = '2024-10-27 02:30+01';
SELECT action, business_key, valid_from FROM scd2.merge('estg', 'tdim');
SET TimeZone = 'UTC';
-- The effective_at argument is the one documented conversion: a date
-- dimension without an effective column loads at the day effective_at
-- falls on in the session's time zone.
SELECT scd2.register('ddim', ARRAY['id']);
CREATE TABLE dstg (id int, v text);
INSERT INTO dstg VALUES (1, 'c');
SELECT action, business_key, valid_from, valid_to FROM scd2.merge('dstg', 'ddim', '2024-03-15 13:00+00') ORDER BY 3;

-- ---------------------------------------------------------------------
-- Class 10: an empty extract in snapshot mode.
CREATE TABLE sdim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('sdim', ARRAY['id'], mode => 'snapshot');
CREATE TABLE sstg (id int, v text);
INSERT INTO sstg VALUES (1, 'a'), (2, 'b');
SELECT count(*) FROM scd2.merge('sstg', 'sdim', '2024-01-01');
SELECT state('sdim') AS before \gset
TRUNCATE sstg;
SELECT * FROM scd2.merge('sstg', 'sdim', '2024-02-01');
SELECT state('sdim') = :'before' AS nothing_written;
CALL scd2.apply('sstg', 'sdim', '2024-02-01');
SELECT status, source_rows, deleted, message FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT count(*) FILTER (WHERE valid_to IS NULL) AS current_rows FROM sdim;
-- Allowed for one transaction: every current version is closed.
BEGIN;
SET LOCAL scd2.allow_empty_snapshot = on;
DO $$ DECLARE run bigint; BEGIN CALL scd2.apply('safe.sstg', 'safe.sdim', '2024-02-01', run); END $$;
COMMIT;
SELECT status, source_rows, deleted FROM scd2.audit_log ORDER BY run_id DESC LIMIT 1;
SELECT id, v, valid_from, valid_to FROM sdim ORDER BY id;
-- The setting did not outlive the transaction.
SELECT * FROM scd2.merge('sstg', 'sdim', '2024-03-01');

-- ---------------------------------------------------------------------
-- Class 10: a dimension trigger that swallows the load's update.
CREATE TABLE tgdim (id int NOT NULL, v text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('tgdim', ARRAY['id']);
CREATE TABLE tgstg (id int, v text);
INSERT INTO tgstg VALUES (1, 'a'), (2, 'a');
SELECT count(*) FROM scd2.merge('tgstg', 'tgdim', '2024-01-01');
CREATE FUNCTION keep_history() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF OLD.id = 1 THEN RETURN NULL; END IF;  -- "protects" key 1's rows
    RETURN NEW;
END $$;
CREATE TRIGGER "no updates" BEFORE UPDATE ON tgdim FOR EACH ROW EXECUTE FUNCTION keep_history();
SELECT state('tgdim') AS before \gset
UPDATE tgstg SET v = 'b';
SELECT * FROM scd2.merge('tgstg', 'tgdim', '2024-02-01');
SELECT state('tgdim') = :'before' AS nothing_written;
-- A trigger that swallows inserts: the write count falls short.
ALTER TABLE tgdim DISABLE TRIGGER "no updates";
CREATE FUNCTION no_new_keys() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 3 THEN RETURN NULL; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER "no new keys" BEFORE INSERT ON tgdim FOR EACH ROW EXECUTE FUNCTION no_new_keys();
INSERT INTO tgstg VALUES (3, 'a');
SELECT * FROM scd2.merge('tgstg', 'tgdim', '2024-02-01');
SELECT state('tgdim') = :'before' AS nothing_written;
DROP TRIGGER "no new keys" ON tgdim;
-- A constraint of the dimension that a new version violates: its own
-- error, in the context of the load, without the generated statement.
ALTER TABLE tgdim ADD CONSTRAINT "v is short" CHECK (length(v) < 5);
UPDATE tgstg SET v = 'too long' WHERE id = 3;
SELECT * FROM scd2.merge('tgstg', 'tgdim', '2024-02-01');
SELECT state('tgdim') = :'before' AS nothing_written;
UPDATE tgstg SET v = 'b' WHERE id = 3;
SELECT action, business_key, valid_from FROM scd2.merge('tgstg', 'tgdim', '2024-02-01') ORDER BY 2, 3, 1;
-- A unique index of the user's own, with a trigger that skips nothing: its
-- violation is reported as it is (no trigger is blamed).
CREATE FUNCTION pass() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER "harmless" BEFORE UPDATE ON tgdim FOR EACH ROW EXECUTE FUNCTION pass();
CREATE UNIQUE INDEX "one c per instant" ON tgdim (v, valid_from, (CASE WHEN v = 'c' THEN 0 ELSE id END));
SELECT state('tgdim') AS before \gset
UPDATE tgstg SET v = 'c' WHERE id = 3;
UPDATE tgstg SET v = 'c', id = 4 WHERE id = 1;
SELECT * FROM scd2.merge('tgstg', 'tgdim', '2024-03-01');
SELECT state('tgdim') = :'before' AS nothing_written;

-- A staging view whose column fails for one row: the error of the user's
-- own code, in the context of the load, without the generated statement.
CREATE TABLE raw (id int, n int);
INSERT INTO raw VALUES (1, 1), (2, 0);
CREATE VIEW vstg AS SELECT id, (10 / n)::text AS v FROM raw;
SELECT state('tgdim') AS before \gset
SELECT * FROM scd2.merge('vstg', 'tgdim', '2024-04-01');
SELECT state('tgdim') = :'before' AS nothing_written;

-- ---------------------------------------------------------------------
-- Class 3: a domain's constraint is checked like a type's limits.
CREATE DOMAIN short_text AS text CHECK (length(VALUE) <= 3);
CREATE TABLE domdim (id int NOT NULL, v short_text, valid_from timestamptz NOT NULL, valid_to timestamptz);
SELECT scd2.register('domdim', ARRAY['id']);
CREATE TABLE domstg (id int, v varchar(10));
INSERT INTO domstg VALUES (1, 'abc'), (2, 'abcd');
SELECT * FROM scd2.merge('domstg', 'domdim', '2024-01-01');
SELECT count(*) AS domdim_rows FROM domdim;
DELETE FROM domstg WHERE id = 2;
SELECT action, business_key FROM scd2.merge('domstg', 'domdim', '2024-01-01');

RESET search_path;
