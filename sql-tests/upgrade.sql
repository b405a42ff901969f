-- Upgrade paths: from every released version (CREATE EXTENSION scd2
-- VERSION 'x', then ALTER EXTENSION scd2 UPDATE to the default version)
-- the catalog must be exactly what a fresh CREATE EXTENSION scd2
-- makes (routines and their definitions, tables, columns, constraints,
-- indexes, sequences, comments, grants and initial privileges, event
-- triggers, dependencies, pg_dump configuration), and keep the data.
--
-- Runs in a database of its own: dropping and recreating the extension
-- there cannot touch what the other tests left in theirs.
SELECT current_database() AS regress_db \gset
SET client_min_messages = warning;
DROP DATABASE IF EXISTS scd2_upgrade_test;
CREATE DATABASE scd2_upgrade_test;
\c scd2_upgrade_test
SET client_min_messages = notice;
SET TimeZone = 'UTC';

SELECT source, target, path FROM pg_extension_update_paths('scd2')
 WHERE path IS NOT NULL ORDER BY source, target;

-- Everything the extension consists of, one row per fact.  A temporary
-- view: it depends on nothing of the extension's.
CREATE TEMP VIEW scd2_catalog (kind, object, detail) AS
WITH ext AS (
    SELECT oid, extnamespace FROM pg_extension WHERE extname = 'scd2'
), members AS (
    SELECT d.classid, d.objid, d.objsubid
      FROM pg_depend d JOIN ext ON d.refobjid = ext.oid
     WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
), rels AS (
    SELECT c.oid, c.relkind FROM pg_class c
      JOIN members m ON m.classid = 'pg_class'::regclass AND m.objid = c.oid
)
SELECT 'member', pg_describe_object(classid, objid, objsubid), ''
  FROM members
UNION ALL
SELECT 'extension', e.extname,
       format('schema=%s relocatable=%s config=%s conditions=%s',
              e.extnamespace::regnamespace, e.extrelocatable,
              (SELECT array_agg(c::regclass::text ORDER BY c::regclass::text) FROM unnest(e.extconfig) c),
              (SELECT array_agg(x ORDER BY x) FROM unnest(e.extcondition) x))
  FROM pg_extension e WHERE e.extname = 'scd2'
UNION ALL
SELECT 'schema', n.nspname, format('owner=%s acl=%s', n.nspowner::regrole, n.nspacl)
  FROM pg_namespace n JOIN ext ON n.oid = ext.extnamespace
UNION ALL
SELECT 'routine', p.oid::regprocedure::text,
       format('kind=%s owner=%s acl=%s definition=%s', p.prokind, p.proowner::regrole, p.proacl,
              md5(CASE WHEN p.prokind = 'a'   -- pg_get_functiondef refuses aggregates
                       THEN (SELECT format('%s %s %s %s %s', a.aggtransfn, a.aggfinalfn, a.aggtranstype::regtype,
                                           a.aggfinalmodify, p.proparallel)
                               FROM pg_aggregate a WHERE a.aggfnoid = p.oid)
                       ELSE pg_get_functiondef(p.oid) END))
  FROM pg_proc p JOIN members m ON m.classid = 'pg_proc'::regclass AND m.objid = p.oid
UNION ALL
SELECT 'relation', c.oid::regclass::text,
       format('kind=%s persistence=%s owner=%s acl=%s options=%s rls=%s',
              c.relkind, c.relpersistence, c.relowner::regrole, c.relacl, c.reloptions, c.relrowsecurity)
  FROM pg_class c JOIN rels r ON r.oid = c.oid
UNION ALL
SELECT 'column', format('%s.%I', a.attrelid::regclass, a.attname),
       format('position=%s type=%s notnull=%s default=%s identity=%s generated=%s collation=%s acl=%s',
              row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
              format_type(a.atttypid, a.atttypmod), a.attnotnull,
              pg_get_expr(ad.adbin, ad.adrelid), a.attidentity, a.attgenerated,
              NULLIF(a.attcollation, 0)::regcollation, a.attacl)
  FROM pg_attribute a JOIN rels r ON r.oid = a.attrelid AND r.relkind IN ('r', 'p')
  LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
 WHERE a.attnum > 0 AND NOT a.attisdropped
UNION ALL
SELECT 'constraint', format('%s on %s', co.conname, co.conrelid::regclass),
       pg_get_constraintdef(co.oid)
  FROM pg_constraint co JOIN rels r ON r.oid = co.conrelid
UNION ALL
SELECT 'index', format('%s on %s', i.indexrelid::regclass, i.indrelid::regclass),
       pg_get_indexdef(i.indexrelid)
  FROM pg_index i JOIN rels r ON r.oid = i.indrelid
UNION ALL
SELECT 'sequence', s.seqrelid::regclass::text,
       format('type=%s start=%s increment=%s min=%s max=%s cache=%s cycle=%s owned by %s',
              s.seqtypid::regtype, s.seqstart, s.seqincrement, s.seqmin, s.seqmax, s.seqcache,
              s.seqcycle,
              (SELECT pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid) || ' (' || d.deptype::text || ')'
                 FROM pg_depend d
                WHERE d.classid = 'pg_class'::regclass AND d.objid = s.seqrelid
                  AND d.refclassid = 'pg_class'::regclass))
  FROM pg_sequence s JOIN rels r ON r.oid = s.seqrelid
UNION ALL
SELECT 'policy', format('%s on %s', p.polname, p.polrelid::regclass),
       format('cmd=%s permissive=%s roles=%s using=%s check=%s', p.polcmd, p.polpermissive,
              p.polroles::regrole[], pg_get_expr(p.polqual, p.polrelid), pg_get_expr(p.polwithcheck, p.polrelid))
  FROM pg_policy p JOIN rels r ON r.oid = p.polrelid
UNION ALL
SELECT 'event trigger', t.evtname,
       format('event=%s function=%s enabled=%s tags=%s owner=%s',
              t.evtevent, t.evtfoid::regprocedure, t.evtenabled, t.evttags, t.evtowner::regrole)
  FROM pg_event_trigger t JOIN members m ON m.classid = 'pg_event_trigger'::regclass AND m.objid = t.oid
UNION ALL
SELECT 'comment', pg_describe_object(d.classoid, d.objoid, d.objsubid), d.description
  FROM pg_description d
 WHERE (d.classoid, d.objoid) IN (SELECT classid, objid FROM members)
    OR (d.classoid = 'pg_namespace'::regclass AND d.objoid = (SELECT extnamespace FROM ext))
UNION ALL
SELECT 'initial privileges', pg_describe_object(ip.classoid, ip.objoid, ip.objsubid),
       format('%s %s', ip.privtype, ip.initprivs)
  FROM pg_init_privs ip
 WHERE (ip.classoid, ip.objoid) IN (SELECT classid, objid FROM members)
    OR (ip.classoid = 'pg_namespace'::regclass AND ip.objoid = (SELECT extnamespace FROM ext))
UNION ALL
SELECT 'dependency', pg_describe_object(d.classid, d.objid, d.objsubid),
       format('%s on %s', d.deptype, pg_describe_object(d.refclassid, d.refobjid, d.refobjsubid))
  FROM pg_depend d
 WHERE (d.classid, d.objid) IN (SELECT classid, objid FROM members)
   AND d.deptype <> 'e';

-- Walk every earlier version up to the default one (upgrade_walk.psql:
-- install, use, update, compare with a fresh install, clean up).
-- pg_regress gives the input directory (its sql/ is sql-tests/) as
-- PG_ABS_SRCDIR.
\getenv abs_srcdir PG_ABS_SRCDIR
\set walk :abs_srcdir '/sql/upgrade_walk.psql'
\set from '0.1'
\i :walk
\set from '0.2'
\i :walk
\set from '0.3'
\i :walk
\set from '0.4'
\i :walk

\c :regress_db
SET client_min_messages = warning;
DROP DATABASE scd2_upgrade_test;
