/*
 * scd2.c -- module entry point: settings.
 */
#include "scd2.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "asof.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	scd2_asof_init_gucs();
	scd2_load_init_gucs();
	scd2_changelog_init_gucs();
	MarkGUCPrefixReserved("scd2");
}
