/* scd2 0.2 -> 0.3 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.3'" to load this file. \quit
