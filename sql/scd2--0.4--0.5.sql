/* scd2 0.4 -> 0.5 */

\echo Use "ALTER EXTENSION scd2 UPDATE TO '0.5'" to load this file. \quit
