/* scd2 0.3 -> 0.4 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.4'" to load this file. \quit
