/*
 * asof.h -- scd2.asof(dimension, at, VARIADIC business_key): index-backed
 * as-of lookup of a dimension's surrogate key.
 */
#ifndef SCD2_ASOF_H
#define SCD2_ASOF_H

/* Defines the scd2.asof_* GUCs; called from the module's _PG_init. */
extern void scd2_asof_init_gucs(void);

#endif							/* SCD2_ASOF_H */
