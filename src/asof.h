/*
 * asof.h -- scd2.asof(dimension, at, VARIADIC business_key): index-backed
 * as-of lookup of a dimension's surrogate key.
 */
#ifndef SCD2_ASOF_H
#define SCD2_ASOF_H

#endif							/* SCD2_ASOF_H */
