# scd2 -- PGXS build.  `make && make install`, then `make installcheck`
# against a running server (scripts/test.sh does all of it on a throwaway
# cluster).

EXTENSION   = scd2
MODULE_big  = scd2
OBJS        = $(patsubst %.c,%.o,$(wildcard src/*.c))
DATA        = $(wildcard sql/scd2--*.sql)
PG_CPPFLAGS = -I$(srcdir)/src
# -Wextra on top of PGXS's -Wall; the three categories left out fire on
# PostgreSQL's own headers and fmgr macros (PG_FUNCTION_ARGS, List cells).
PG_CFLAGS   = -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -Wno-sign-compare

# pg_regress (PostgreSQL 15) reads INPUTDIR/sql/*.sql and
# INPUTDIR/expected/*.out and has no --expecteddir: bridge our sql-tests/ and
# expected/ folders through a directory of symlinks under build/.
TESTS        = $(sort $(wildcard sql-tests/*.sql))
REGRESS      = $(patsubst sql-tests/%.sql,%,$(TESTS))
REGRESS_OPTS = --inputdir=build/regress --outputdir=build/regress --load-extension=scd2
REGRESS_PREP = build/regress/sql

# Concurrency specs (pg_isolation_regress): isolation/specs + isolation/expected.
ISOLATION      = $(patsubst isolation/specs/%.spec,%,$(sort $(wildcard isolation/specs/*.spec)))
ISOLATION_OPTS = --inputdir=isolation --outputdir=build/isolation

EXTRA_CLEAN = build

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies.
$(OBJS): $(wildcard src/*.h)

build/regress/sql:
	mkdir -p build/regress build/isolation
	ln -sfn ../../sql-tests build/regress/sql
	ln -sfn ../../expected build/regress/expected

.PHONY: test
test:
	scripts/test.sh

# The regression and isolation suites separately (scripts/test.sh runs both).
.PHONY: installcheck-regress installcheck-isolation
installcheck-regress: $(REGRESS_PREP)
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
installcheck-isolation: $(REGRESS_PREP)
	$(if $(ISOLATION),$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION),@echo "no isolation specs")

# The Citus checks (test/citus/sql, expected in test/citus/expected): their
# own coordinator and two workers; SKIPPED where Citus is not installed.
.PHONY: installcheck-citus
installcheck-citus:
	PG_CONFIG=$(PG_CONFIG) test/citus/run.sh
