/*
 * scd2.c -- module entry point.
 */
#include "scd2.h"

#include "fmgr.h"

PG_MODULE_MAGIC;
