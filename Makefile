# scd2 -- PGXS build.  `make && make install`, then `make installcheck`
# against a running server (scripts/test.sh does all of it on a throwaway
# cluster).
#
# Out-of-tree (VPATH) builds work too, one directory per server version,
# as scripts/test.sh and Debian's pg_buildext do them:
#   mkdir -p build/pg15 && make -C build/pg15 -f $PWD/Makefile PG_CONFIG=...

EXTENSION   = scd2
MODULE_big  = scd2
# The source directory: "." in tree, the Makefile's directory out of tree.
scd2_src    := $(patsubst %/,%,$(dir $(firstword $(MAKEFILE_LIST))))
# src/ is one folder per subsystem (docs/ARCHITECTURE.md); every .c below it.
OBJS        = $(patsubst $(scd2_src)/%.c,%.o,$(wildcard $(scd2_src)/src/*.c $(scd2_src)/src/*/*.c))
DATA        = $(patsubst $(scd2_src)/%,%,$(wildcard $(scd2_src)/sql/scd2--*.sql))
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

# Out of tree, sources are found through VPATH (Debian's PGXS derives it
# from -f; a server built from source needs it said).
ifneq ($(scd2_src),.)
VPATH ?= $(scd2_src)
endif

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies.
$(OBJS): $(wildcard $(scd2_src)/src/*.h $(scd2_src)/src/*/*.h)

# Out of tree, the objects' directories must exist in the build directory.
ifneq ($(scd2_src),.)
$(shell mkdir -p $(sort $(dir $(OBJS))))
endif

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

# The PGXN release archive, dist/scd2-VERSION.zip (VERSION from META.json):
# `git archive` of the commit checked out, so it holds exactly the tracked
# files (control, sql/, src/, META.json, README.md, docs, tests) and no
# build output.  test/release/run.sh checks its contents and builds it.
DIST_VERSION = $(shell sed -nE 's/^  "version": "([^"]*)".*/\1/p' $(scd2_src)/META.json)
.PHONY: dist
dist:
	mkdir -p dist
	git -C $(scd2_src) archive --format=zip --prefix=scd2-$(DIST_VERSION)/ \
		-o $(abspath dist)/scd2-$(DIST_VERSION).zip HEAD
	@echo dist/scd2-$(DIST_VERSION).zip
