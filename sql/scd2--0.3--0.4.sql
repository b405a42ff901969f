/* scd2 0.3 -> 0.4 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.4'" to load this file. \quit

------------------------------------------------------------------------------
-- Issue 22 (nothing lost, nothing doubled): the change log keeps Type 1
-- before-images as each type's text form (a json value verbatim); runs
-- logged before 0.4 kept them as jsonb values.
------------------------------------------------------------------------------
ALTER TABLE scd2.change_log_runs
    ADD COLUMN old_type1_text boolean NOT NULL DEFAULT false;
COMMENT ON COLUMN scd2.change_log_runs.old_type1_text IS
    'true: the run''s scd2.change_log.old_type1 holds each Type 1 value''s text form (0.4 on); false: jsonb values (0.3)';
