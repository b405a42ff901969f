/*
 * schema.c -- a load's schema step (register's on_schema_change):
 * the staging table's columns compared with the dimension's, under the
 * load's lock and in its transaction, before the configuration is
 * resolved (docs/LOADING.md, "When the source changes shape").
 *
 *   ignore              a staging column the dimension lacks is not loaded;
 *                       the load's NOTICE and audit row name it
 *   fail                any difference (a new column, another type, a
 *                       column missing from staging) refuses the load,
 *                       naming every differing column
 *   append_new_columns  a new staging column is added to the dimension
 *   sync_all_columns    that, and a widened type widens the dimension's
 *                       column; a narrowed or incompatible one refuses
 *
 * A column is never dropped from a dimension: one missing from staging
 * follows missing_columns (catalog/config.c).  The ALTER TABLE runs as the
 * dimension's owner in a security-restricted operation (common/exec.c): a
 * rewrite evaluates the owner's index expressions and constraints.  In the
 * load that adds a column, the column is a Type 1 column
 * (scd2_schema_apply_fills): the current versions get the staging value in
 * place instead of a new version each, closed versions keep NULL (history
 * before the column is unknown), and the change log keeps the NULL
 * before-images, so a revert restores them.
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "catalog/registry.h"
#include "common/common.h"
#include "history/history.h"
#include "load/steps.h"
#include "load/runner.h"
#include "load/worktable.h"

typedef enum SchemaMode
{
	SCHEMA_IGNORE,
	SCHEMA_FAIL,
	SCHEMA_APPEND,
	SCHEMA_SYNC
} SchemaMode;

/* How a staging column's type relates to the dimension column's. */
typedef enum Widening
{
	WIDEN_YES,					/* a widening scd2 makes */
	WIDEN_NARROWER,				/* the reverse of one: the dimension is wider */
	WIDEN_ZONE,					/* timestamp -> timestamptz outside UTC */
	WIDEN_NO					/* another type */
} Widening;

/* One column that differs, for messages and the ALTER. */
typedef struct Diff
{
	const char *name;
	Form_pg_attribute stg;		/* NULL: missing from staging */
	Form_pg_attribute dim;		/* NULL: new in staging */
} Diff;

static SchemaMode
parse_mode(const char *value)
{
	if (strcmp(value, "fail") == 0)
		return SCHEMA_FAIL;
	if (strcmp(value, "append_new_columns") == 0)
		return SCHEMA_APPEND;
	if (strcmp(value, "sync_all_columns") == 0)
		return SCHEMA_SYNC;
	return SCHEMA_IGNORE;
}

/* A column of a relation by name (not a dropped one), or NULL. */
static Form_pg_attribute
find_column(Relation rel, const char *name)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);

	return attnum > 0 ? TupleDescAttr(RelationGetDescr(rel), attnum - 1) : NULL;
}

static bool
in_list(List *names, const char *name)
{
	ListCell   *lc;

	foreach(lc, names)
		if (strcmp((char *) lfirst(lc), name) == 0)
			return true;
	return false;
}

static char *
type_name(Form_pg_attribute att)
{
	return format_type_with_typemod(att->atttypid, att->atttypmod);
}

static char *
type_sql(Form_pg_attribute att)
{
	return format_type_extended(att->atttypid, att->atttypmod,
								FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);
}

/* varchar(n) typmod -> n, -1 when unlimited. */
static int
varchar_length(int32 typmod)
{
	return typmod < 0 ? -1 : typmod - VARHDRSZ;
}

/* numeric(p,s) typmod -> p and s; false when unconstrained. */
static bool
numeric_ps(int32 typmod, int *p, int *s)
{
	if (typmod < (int32) VARHDRSZ)
		return false;
	*p = ((typmod - VARHDRSZ) >> 16) & 0xffff;
	*s = (((typmod - VARHDRSZ) & 0x7ff) ^ 1024) - 1024;
	return true;
}

static int
int_width(Oid typid)
{
	return typid == INT2OID ? 2 : typid == INT4OID ? 4 : typid == INT8OID ? 8 : 0;
}

/*
 * Whether the dimension type "from" widens to "to" exactly: every value of
 * from is a value of to, compares the same, and PostgreSQL converts it
 * without a function a user wrote.  Only these (the list):
 * varchar(n) to a larger n, varchar or text; text/varchar to text; an
 * integer type to a larger one; numeric(p,s) to a larger p with the same
 * s, or to numeric; timestamp to timestamptz where the session's TimeZone
 * is UTC (then no value moves: PostgreSQL does not even rewrite the table).
 */
static Widening
classify_widening(Oid from, int32 frommod, Oid to, int32 tomod)
{
	int			fp,
				fs,
				tp,
				ts;

	if ((from == VARCHAROID || from == TEXTOID) && (to == VARCHAROID || to == TEXTOID))
	{
		int			fl = from == TEXTOID ? -1 : varchar_length(frommod);
		int			tl = to == TEXTOID ? -1 : varchar_length(tomod);

		if (tl < 0 || (fl >= 0 && tl > fl))
			return to == VARCHAROID && from == TEXTOID ? WIDEN_NARROWER : WIDEN_YES;
		return WIDEN_NARROWER;
	}
	if (int_width(from) && int_width(to))
		return int_width(to) > int_width(from) ? WIDEN_YES : WIDEN_NARROWER;
	if (from == NUMERICOID && to == NUMERICOID)
	{
		bool		fc = numeric_ps(frommod, &fp, &fs);
		bool		tc = numeric_ps(tomod, &tp, &ts);

		if (!tc)
			return WIDEN_YES;
		if (!fc)
			return WIDEN_NARROWER;
		if (ts == fs && tp > fp)
			return WIDEN_YES;
		if (ts == fs && tp < fp)
			return WIDEN_NARROWER;
		return WIDEN_NO;
	}
	if (from == TIMESTAMPOID && to == TIMESTAMPTZOID)
		return TimestampTimestampTzRequiresRewrite() ? WIDEN_ZONE : WIDEN_YES;
	return WIDEN_NO;
}

/* A dimension column a load never compares with staging (bookkeeping). */
static bool
bookkeeping(const Scd2Registration *reg, const char *name)
{
	return strcmp(name, reg->valid_from) == 0 || strcmp(name, reg->valid_to) == 0 ||
		(reg->is_current && strcmp(name, reg->is_current) == 0) ||
		(reg->surrogate_key && strcmp(name, reg->surrogate_key) == 0);
}

/*
 * The staging columns that are not the dimension's by design: the
 * effective column (unless the dimension keeps one of its name), the
 * delete marker, a change stream's sequence column, apply_snapshots'
 * snapshot column.
 */
static List *
staging_only(const Scd2Registration *reg, const Scd2Extract *ext)
{
	List	   *out = NIL;

	if (reg->effective_column)
		out = lappend(out, reg->effective_column);
	if (reg->delete_column)
		out = lappend(out, reg->delete_column);
	if (reg->sequence_column)
		out = lappend(out, reg->sequence_column);
	if (ext && ext->snapshot_col)
		out = lappend(out, (char *) ext->snapshot_col);
	return out;
}

/* Staging columns the dimension lacks; shared columns whose type differs. */
static void
compare_columns(const Scd2Registration *reg, const Scd2Extract *ext, Relation dim,
				Relation stgrel, List **added, List **retyped)
{
	List	   *skip = staging_only(reg, ext);
	TupleDesc	stg = RelationGetDescr(stgrel);

	for (int i = 0; i < stg->natts; i++)
	{
		Form_pg_attribute s = TupleDescAttr(stg, i);
		Form_pg_attribute d;
		Diff	   *diff;

		if (s->attisdropped)
			continue;
		d = find_column(dim, NameStr(s->attname));
		if (d == NULL && in_list(skip, NameStr(s->attname)))
			continue;
		if (d != NULL && (bookkeeping(reg, NameStr(d->attname)) ||
						  (s->atttypid == d->atttypid && s->atttypmod == d->atttypmod)))
			continue;
		diff = palloc0(sizeof(Diff));
		diff->name = pstrdup(NameStr(s->attname));
		diff->stg = s;
		diff->dim = d;
		if (d == NULL)
			*added = lappend(*added, diff);
		else
			*retyped = lappend(*retyped, diff);
	}
}

/*
 * Dimension columns the staging table lacks that a load would miss (no
 * default fills them), when missing_columns does not carry them forward:
 * for fail's message (catalog/config.c refuses them under every option).
 */
static List *
missing_columns(const Scd2Registration *reg, Relation dimrel, Relation stg)
{
	List	   *out = NIL;
	TupleDesc	dim = RelationGetDescr(dimrel);

	if (reg->carry_forward)
		return NIL;
	for (int i = 0; i < dim->natts; i++)
	{
		Form_pg_attribute d = TupleDescAttr(dim, i);
		Diff	   *diff;

		if (d->attisdropped || d->attgenerated || d->attidentity || d->atthasdef ||
			bookkeeping(reg, NameStr(d->attname)) || find_column(stg, NameStr(d->attname)))
			continue;
		diff = palloc0(sizeof(Diff));
		diff->name = pstrdup(NameStr(d->attname));
		diff->dim = d;
		out = lappend(out, diff);
	}
	return out;
}

/* "a" (text), "b" (varchar(20) in the dimension, text in staging), ... */
static char *
describe_diffs(List *diffs)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, diffs)
	{
		Diff	   *d = lfirst(lc);

		appendStringInfo(&buf, "%s\"%s\" (", buf.len ? ", " : "", d->name);
		if (d->dim == NULL)
			appendStringInfo(&buf, "new in staging, %s)", type_name(d->stg));
		else if (d->stg == NULL)
			appendStringInfo(&buf, "missing from staging, %s in the dimension)", type_name(d->dim));
		else
			appendStringInfo(&buf, "%s in the dimension, %s in staging)", type_name(d->dim),
							 type_name(d->stg));
	}
	return buf.data;
}

static char *
name_list(List *diffs)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, diffs)
		appendStringInfo(&buf, "%s\"%s\"", buf.len ? ", " : "", ((Diff *) lfirst(lc))->name);
	return buf.data;
}

/* on_schema_change => 'fail': any difference refuses the load. */
static void
refuse_differences(const char *dim_name, const char *stg_name, List *diffs)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("staging table %s differs from dimension %s in %s %s", stg_name, dim_name,
					list_length(diffs) == 1 ? "column" : "columns", name_list(diffs)),
			 errdetail("Dimension %s is registered with on_schema_change => 'fail': %s. Nothing was loaded.",
					   dim_name, describe_diffs(diffs)),
			 errhint("Give the staging table the dimension's columns again, or register the dimension with on_schema_change => 'append_new_columns' (new columns are added) or 'sync_all_columns' (also widened types).")));
}

/* sync_all_columns: a type the dimension's column cannot widen to. */
static void
refuse_type_change(const char *dim_name, const char *stg_name, const Diff *d, Widening w)
{
	const char *dt = type_name(d->dim);
	const char *st = type_name(d->stg);
	const char *detail;

	if (w == WIDEN_NARROWER)
		detail = psprintf("The staging column has type %s, narrower than the dimension's %s: a column's history may hold values the narrower type cannot, and scd2 never narrows a dimension column.",
						  st, dt);
	else if (w == WIDEN_ZONE)
		detail = psprintf("Converting timestamp to timestamptz reads every existing value in the session's TimeZone (%s); scd2 converts only where no value moves, in a session whose TimeZone is UTC.",
						  pg_get_timezone_name(session_timezone));
	else
		detail = psprintf("The staging column has type %s, which is not a widening of the dimension's %s (scd2 widens varchar(n) to a larger n or text, an integer type to a larger one, numeric(p,s) to a larger p with the same s, and timestamp to timestamptz in a UTC session).",
						  st, dt);
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("cannot change column \"%s\" of dimension %s from %s to %s",
					d->name, dim_name, dt, st),
			 errdetail("%s Staging table %s; nothing was loaded.", detail, stg_name),
			 w == WIDEN_ZONE ?
			 errhint("If the dimension's timestamps are UTC, load with SET LOCAL TimeZone = 'UTC'; otherwise convert the column yourself (ALTER TABLE ... ALTER COLUMN \"%s\" TYPE timestamptz USING \"%s\" AT TIME ZONE '<zone>') and register the dimension again.",
					 d->name, d->name) :
			 errhint("Cast the column to %s in the staging table (or a view over it), or change the dimension's column yourself (ALTER TABLE ... ALTER COLUMN ... TYPE ... USING ...) and register the dimension again.",
					 dt)));
}

/*
 * A column added or retyped gets only a type and collation the dimension's
 * owner may depend on (trust.c): the staging column's; a widened column
 * keeps its own collation.  A dry run refuses it as the load would.
 */
static void
refuse_untrusted(const Scd2LoadRequest *req, List *added, List *widened, const char *dim_name)
{
	Oid			owner = scd2_relation_owner(req->dim_oid);
	char	   *stg_name = scd2_relation_display_name(req->stg_oid);
	ListCell   *lc;

	foreach(lc, added)
	{
		Diff	   *d = lfirst(lc);

		scd2_trust_new_column(owner, dim_name, stg_name, d->name, d->stg->atttypid,
							  d->stg->attcollation);
	}
	foreach(lc, widened)
	{
		Diff	   *d = lfirst(lc);

		scd2_trust_new_column(owner, dim_name, stg_name, d->name, d->stg->atttypid, InvalidOid);
	}
}

/* The ALTER TABLE of the new and widened columns (one statement: one rewrite at most). */
static char *
alter_sql(const char *dim_sql, List *added, List *widened)
{
	StringInfoData buf;
	ListCell   *lc;
	int			n = 0;

	initStringInfo(&buf);
	appendStringInfo(&buf, "ALTER TABLE %s", dim_sql);
	foreach(lc, added)
	{
		Diff	   *d = lfirst(lc);

		appendStringInfo(&buf, "%s ADD COLUMN %s %s%s", n++ ? "," : "",
						 quote_identifier(d->name), type_sql(d->stg),
						 OidIsValid(d->stg->attcollation) &&
						 d->stg->attcollation != get_typcollation(d->stg->atttypid) ?
						 scd2_collate_sql(d->stg->attcollation) : "");
	}
	foreach(lc, widened)
	{
		Diff	   *d = lfirst(lc);

		/* the column keeps its collation (ALTER TYPE would take the type's) */
		appendStringInfo(&buf, "%s ALTER COLUMN %s TYPE %s%s", n++ ? "," : "",
						 quote_identifier(d->name), type_sql(d->stg),
						 OidIsValid(d->dim->attcollation) ? scd2_collate_sql(d->dim->attcollation) : "");
	}
	return buf.data;
}

/* The note of the NOTICE and audit row: what was ignored, added, widened. */
static char *
make_note(List *ignored, List *added, List *widened, bool dry_run)
{
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	if (ignored)
		appendStringInfo(&buf, "ignored staging %s %s", list_length(ignored) == 1 ? "column" : "columns",
						 name_list(ignored));
	foreach(lc, added)
		appendStringInfo(&buf, "%s%s column \"%s\" %s", buf.len ? "; " : "",
						 dry_run ? "would add" : "added", ((Diff *) lfirst(lc))->name,
						 type_name(((Diff *) lfirst(lc))->stg));
	foreach(lc, widened)
		appendStringInfo(&buf, "%s%s column \"%s\" %s to %s", buf.len ? "; " : "",
						 dry_run ? "would widen" : "widened", ((Diff *) lfirst(lc))->name,
						 type_name(((Diff *) lfirst(lc))->dim), type_name(((Diff *) lfirst(lc))->stg));
	return buf.len ? buf.data : NULL;
}

/* Run the ALTER as the dimension's owner, security-restricted. */
static void
alter_dimension(OwnerContext *oc, const char *sql, const char *dim_name)
{
	MemoryContext cxt = CurrentMemoryContext;

	scd2_owner_restrict(oc);
	PG_TRY();
	{
		(void) scd2_exec_user(sql, 0, NULL, NULL, NULL, InvalidSnapshot, false,
							  SPI_OK_UTILITY, "changing the dimension's columns");
	}
	PG_CATCH();
	{
		scd2_rethrow_without_sql(cxt, psprintf("scd2: changing the columns of dimension %s (on_schema_change)",
											   dim_name));
	}
	PG_END_TRY();
	/* the load creates its work tables next */
	scd2_owner_unrestrict(oc);
	CommandCounterIncrement();
}

/*
 * What the option makes of the differences: fail refuses any; sync checks
 * that every retyped column widens (else refuses) and returns them; the
 * other options leave a retyped column to the load's value checks.
 */
static List *
check_differences(SchemaMode mode, const Scd2Registration *reg, Relation dim, Relation stg,
				  List *added, List *retyped, const char *dim_name, const char *stg_name)
{
	List	   *widened = NIL;
	ListCell   *lc;

	if (mode == SCHEMA_FAIL)
	{
		List	   *diffs = list_concat(list_concat(list_copy(added), retyped),
										missing_columns(reg, dim, stg));

		if (diffs != NIL)
			refuse_differences(dim_name, stg_name, diffs);
	}
	if (mode != SCHEMA_SYNC)
		return NIL;
	foreach(lc, retyped)
	{
		Diff	   *d = lfirst(lc);
		Widening	w = classify_widening(d->dim->atttypid, d->dim->atttypmod,
								 d->stg->atttypid, d->stg->atttypmod);

		if (w != WIDEN_YES)
			refuse_type_change(dim_name, stg_name, d, w);
		widened = lappend(widened, d);
	}
	return widened;
}

static List *
diff_names(List *diffs)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, diffs)
		names = lappend(names, pstrdup(((Diff *) lfirst(lc))->name));
	return names;
}

/*
 * The schema step of a load (see the file's header), as the dimension's
 * owner (the owner context is entered, not yet restricted), under the
 * load's lock, with the registration the load read (its shape checked).
 * Returns the names of the columns it added (NIL: none), which
 * scd2_schema_apply_fills makes this load's Type 1 columns; *note is what
 * the NOTICE and the audit row say about the staging table's shape (NULL:
 * nothing).
 */
List *
scd2_schema_evolve(const Scd2LoadRequest *req, const Scd2Registration *reg,
				   const char *dim_name, OwnerContext *oc, char **note)
{
	SchemaMode	mode;
	Relation	dimrel;
	Relation	stgrel;
	List	   *added = NIL;
	List	   *retyped = NIL;
	List	   *widened;
	List	   *names = NIL;
	char	   *sql = NULL;

	*note = NULL;
	if (reg->on_schema_change == NULL || req->stg_oid == req->dim_oid)
		return NIL;				/* a registry before 0.4; catalog/config.c refuses the other */
	mode = parse_mode(reg->on_schema_change);
	dimrel = table_open(req->dim_oid, AccessShareLock);
	stgrel = table_open(req->stg_oid, AccessShareLock);
	compare_columns(reg, req->extract, dimrel, stgrel, &added, &retyped);
	widened = check_differences(mode, reg, dimrel, stgrel, added, retyped, dim_name,
								scd2_relation_display_name(req->stg_oid));
	if (mode == SCHEMA_IGNORE)
		*note = make_note(added, NIL, NIL, req->dry_run);
	else if (mode != SCHEMA_FAIL)
		*note = make_note(NIL, added, widened, req->dry_run);
	if ((mode == SCHEMA_APPEND || mode == SCHEMA_SYNC) && (added != NIL || widened != NIL))
		refuse_untrusted(req, added, widened, dim_name);
	if ((mode == SCHEMA_APPEND || mode == SCHEMA_SYNC) && !req->dry_run &&
		(added != NIL || widened != NIL))
	{
		names = diff_names(added);
		sql = alter_sql(dim_name, added, widened);
	}
	/* ALTER TABLE refuses a table this backend still has open */
	table_close(stgrel, NoLock);
	table_close(dimrel, NoLock);
	if (sql == NULL)
		return NIL;

	/*
	 * REPEATABLE READ, SERIALIZABLE: a rewrite copies what the latest
	 * snapshot sees, so the transaction's must see the dimension as it is
	 * (the load checks it again after the ALTER, too late then)
	 */
	scd2_refuse_stale_snapshot(req->dim_oid, dim_name, GetTransactionSnapshot(),
							   "nothing was loaded");
	alter_dimension(oc, sql, dim_name);
	/* a widened business key: the registered shape follows */
	if (widened != NIL)
		scd2_registry_refresh_shape(req->dim_oid);
	return names;
}

/* Move column name from cols[] (if there) to the end of dst[]. */
static bool
move_column(Scd2Column *cols, int *n, Scd2Column **dst, int *ndst, const char *name)
{
	for (int i = 0; i < *n; i++)
	{
		if (strcmp(cols[i].name, name) != 0)
			continue;
		*dst = repalloc(*dst, sizeof(Scd2Column) * (*ndst + 1));
		(*dst)[(*ndst)++] = cols[i];
		memmove(&cols[i], &cols[i + 1], sizeof(Scd2Column) * (*n - i - 1));
		(*n)--;
		return true;
	}
	return false;
}

/*
 * In the load that added them, the new columns are Type 1 columns: a key
 * whose other columns are unchanged gets their values on its current
 * version in place (counted as filled_in_place), a changed key a new
 * version with them; closed versions keep NULL (on an order-free
 * dimension: the value of the latest staged event in their validity, as
 * for any Type 1 column there, none when no staged event is in it).  Not with detect =>
 * 'timestamp', which has no Type 1 columns: there a key's next later row
 * brings the value in a new version.  The change log's header names them
 * with the Type 1 columns (history/changelog.c), so a revert restores the NULLs.
 */
void
scd2_schema_apply_fills(Scd2Config *cfg, List *added)
{
	ListCell   *lc;

	if (added == NIL || cfg->detect_timestamp)
		return;
	foreach(lc, added)
	{
		const char *name = lfirst(lc);

		/* a load needs one tracked column: an only one stays tracked */
		if ((cfg->ntracked > 1 &&
			 move_column(cfg->tracked, &cfg->ntracked, &cfg->type1, &cfg->ntype1, name)) ||
			move_column(cfg->other, &cfg->nother, &cfg->type1, &cfg->ntype1, name))
			cfg->filled = lappend(cfg->filled, pstrdup(name));
	}
	/*
	 * on an order-free dimension they follow the Type 1 rule of a stream:
	 * each version takes the value of the latest event in its validity
	 * that carries the column (load/stream.c), whatever the arrival order
	 */
	scd2_config_set_stream(cfg);
}

/*
 * filled_in_place: the Type 1 updates of this load that gave a current
 * version a new column's value (counted once: no longer as type 1
 * updates).  After scd2_count_changes, from the change table.
 */
void
scd2_schema_count_fills(LoadState *st, Scd2Metrics *m)
{
	const Scd2Config *cfg = st->cfg;
	StringInfoData buf;
	ListCell   *lc;
	int64		filled;

	if (cfg->filled == NIL || m->type1_updated == 0)
		return;
	initStringInfo(&buf);
	appendStringInfo(&buf, X("SELECT pg_catalog.count(*) FROM %s c WHERE c.`_action = " WT_ACT_TYPE1 " AND ("),
					 CHG_TABLE);
	foreach(lc, cfg->filled)
		appendStringInfo(&buf, "%sc.%s IS NOT NULL", foreach_current_index(lc) ? " OR " : "",
						 quote_identifier((char *) lfirst(lc)));
	appendStringInfoString(&buf, ")");
	/* not read-only: the snapshot then sees the change table written since */
	(void) scd2_exec_user(buf.data, 0, NULL, NULL, NULL, st->snap, false, SPI_OK_SELECT,
						  "counting the versions filled in place");
	filled = scd2_spi_int8(0, 1);
	m->filled_in_place = filled;
	m->type1_updated -= filled;
}
