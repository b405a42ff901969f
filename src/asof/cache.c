/*
 * cache.c -- the call site's cache of scd2.asof: the registry row, the
 * privileges, the choice of the as-of index and the scan keys of the
 * business key arguments.  Built at the first call of a query (lookup.c), it
 * lives in fn_extra.
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_am_d.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "storage/proc.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"

#include "scd2.h"
#include "catalog/registry.h"
#include "asof/asof.h"
#include "citus/citus.h"


/* The dimension's name as regclass prints it (qualified when not visible). */
static char *
dimension_name(Oid relid)
{
	return DatumGetCString(DirectFunctionCall1(regclassout, ObjectIdGetDatum(relid)));
}

/* Attribute number of a registered column, or an error naming it. */
static AttrNumber
registered_column(AsofCache *c, const char *colname, const char *what)
{
	AttrNumber	attnum = get_attnum(c->relid, colname);

	if (attnum == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of dimension \"%s\" does not exist",
						colname, c->relname),
				 errdetail("It is registered as the %s column in scd2.dimensions.", what),
				 errhint("Run scd2.register again to update the registration.")));
	if (attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("system column \"%s\" cannot be the %s column of dimension \"%s\"",
						colname, what, c->relname)));
	return attnum;
}

static bool
is_time_type(Oid t)
{
	return t == TIMESTAMPTZOID || t == TIMESTAMPOID || t == DATEOID;
}

static bool
is_int_type(Oid t)
{
	return t == INT8OID || t == INT4OID || t == INT2OID;
}

/*
 * Does this index have the as-of index's shape: a valid, non-partial
 * btree on plain columns (business key..., valid_from) INCLUDE (two
 * columns: an integer surrogate key and a valid_to of valid_from's type)?
 * Then fill reg (column names in cxt).
 */
static bool
asof_index_shape(Relation heap, Relation index, MemoryContext cxt,
				 Scd2AsofRegistration *reg)
{
	Form_pg_index ind = index->rd_index;
	int			nkey = ind->indnkeyatts;
	TupleDesc	td = RelationGetDescr(heap);
	Oid			vftype;
	AttrNumber	vf,
				sk = InvalidAttrNumber,
				vt = InvalidAttrNumber;

	if (index->rd_rel->relam != BTREE_AM_OID || !ind->indisvalid || !ind->indisready)
		return false;
	if (!heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL) ||
		!heap_attisnull(index->rd_indextuple, Anum_pg_index_indexprs, NULL))
		return false;
	if (nkey < 2 || ind->indnatts != nkey + 2)
		return false;
	vf = ind->indkey.values[nkey - 1];
	vftype = TupleDescAttr(td, vf - 1)->atttypid;
	if (!is_time_type(vftype))
		return false;
	for (int j = nkey; j < nkey + 2; j++)
	{
		AttrNumber	a = ind->indkey.values[j];
		Oid			t = TupleDescAttr(td, a - 1)->atttypid;

		if (is_int_type(t) && sk == InvalidAttrNumber)
			sk = a;
		else if (t == vftype && vt == InvalidAttrNumber)
			vt = a;
		else
			return false;
	}
	if (sk == InvalidAttrNumber || vt == InvalidAttrNumber)
		return false;

	reg->nkeys = nkey - 1;
	reg->keys = MemoryContextAlloc(cxt, sizeof(char *) * reg->nkeys);
	for (int i = 0; i < reg->nkeys; i++)
		reg->keys[i] = MemoryContextStrdup(cxt, NameStr(TupleDescAttr(td, ind->indkey.values[i] - 1)->attname));
	reg->valid_from = MemoryContextStrdup(cxt, NameStr(TupleDescAttr(td, vf - 1)->attname));
	reg->valid_to = MemoryContextStrdup(cxt, NameStr(TupleDescAttr(td, vt - 1)->attname));
	reg->surrogate_key = MemoryContextStrdup(cxt, NameStr(TupleDescAttr(td, sk - 1)->attname));
	return true;
}

static bool
same_registration(const Scd2AsofRegistration *a, const Scd2AsofRegistration *b)
{
	if (a->nkeys != b->nkeys || strcmp(a->valid_from, b->valid_from) != 0 ||
		strcmp(a->valid_to, b->valid_to) != 0 || strcmp(a->surrogate_key, b->surrogate_key) != 0)
		return false;
	for (int i = 0; i < a->nkeys; i++)
		if (strcmp(a->keys[i], b->keys[i]) != 0)
			return false;
	return true;
}

/*
 * The registration of a Citus table that the registry here does not know
 * (a worker's registry is empty: the registry is the coordinator's), read
 * from its as-of index, which Citus creates on every node.  False when
 * relid is not a Citus table (the caller reports it unregistered).
 */
static bool
registration_from_index(Oid relid, const char *relname, MemoryContext cxt,
							 Scd2AsofRegistration *out)
{
	Relation	heap;
	List	   *indexes;
	ListCell   *lc;
	int			found = 0;
	char	   *first = NULL;
	char	   *second = NULL;

	if (scd2_citus_table(relid, NULL) == SCD2_CITUS_NONE)
		return false;

	memset(out, 0, sizeof(*out));
	heap = table_open(relid, AccessShareLock);
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Relation	index = index_open(lfirst_oid(lc), AccessShareLock);
		Scd2AsofRegistration reg;

		if (asof_index_shape(heap, index, cxt, &reg))
		{
			if (found == 0)
			{
				*out = reg;
				first = pstrdup(RelationGetRelationName(index));
				found = 1;
			}
			else if (!same_registration(out, &reg) && second == NULL)
			{
				second = pstrdup(RelationGetRelationName(index));
				found = 2;
			}
		}
		index_close(index, NoLock);
	}
	list_free(indexes);
	table_close(heap, NoLock);

	if (found == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not a registered scd2 dimension on this node", relname),
				 errdetail("On a Citus node without the registration, scd2.asof reads it from the dimension's as-of index: a btree index on (business key columns, valid_from) INCLUDE (surrogate key, valid_to). The table has none."),
				 errhint("Register the dimension on the coordinator with scd2.register(...), which creates that index.")));
	if (found == 2)
		ereport(ERROR,
				(errcode(ERRCODE_AMBIGUOUS_PARAMETER),
				 errmsg("dimension \"%s\" has more than one index that could be its as-of index", relname),
				 errdetail("Indexes \"%s\" and \"%s\" name different business key, validity or surrogate key columns, and this node has no registration to choose between them.",
						   first, second),
				 errhint("Drop the index that is not the dimension's as-of index.")));
	return true;
}

/*
 * Read the dimension's registry row (business key, validity and surrogate
 * key columns, catalog/dimensions.c) into the cache, and resolve its columns.
 */
static void
read_registry(AsofCache *c)
{
	Scd2AsofRegistration reg;
	char	   *vfname,
			   *vtname,
			   *skname;

	/* a Citus worker has no registry row: the as-of index tells */
	if (!scd2_registry_read_asof(c->relid, c->relname, c->cxt, &reg, true) &&
		!registration_from_index(c->relid, c->relname, c->cxt, &reg))
		scd2_registry_read_asof(c->relid, c->relname, c->cxt, &reg, false);
	c->nkeys = reg.nkeys;
	c->keys = MemoryContextAllocZero(c->cxt, sizeof(AsofKey) * reg.nkeys);
	for (int i = 0; i < reg.nkeys; i++)
		c->keys[i].colname = reg.keys[i];
	vfname = reg.valid_from;
	vtname = reg.valid_to;
	skname = reg.surrogate_key;

	if (skname == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("dimension \"%s\" has no surrogate key column", c->relname),
				 errdetail("scd2.asof returns the surrogate key of a version, and none is registered."),
				 errhint("Register the dimension again with surrogate_key_column => the column that identifies a version.")));

	for (int i = 0; i < c->nkeys; i++)
	{
		AsofKey    *k = &c->keys[i];

		k->attnum = registered_column(c, k->colname, "business key");
		get_atttypetypmodcoll(c->relid, k->attnum, &k->coltype, &k->coltypmod,
							  &k->colcollation);
	}

	{
		Oid			vttype;

		c->vf_attnum = registered_column(c, vfname, "valid_from");
		c->vftype = get_atttype(c->relid, c->vf_attnum);
		c->vt_attnum = registered_column(c, vtname, "valid_to");
		vttype = get_atttype(c->relid, c->vt_attnum);
		if ((c->vftype != TIMESTAMPTZOID && c->vftype != TIMESTAMPOID && c->vftype != DATEOID) ||
			vttype != c->vftype)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("validity columns of dimension \"%s\" must both be timestamptz, timestamp or date",
							c->relname),
					 errdetail("Column \"%s\" has type %s and column \"%s\" has type %s.",
							   vfname, format_type_be(c->vftype), vtname, format_type_be(vttype))));

		c->sk_attnum = registered_column(c, skname, "surrogate key");
		c->sktype = get_atttype(c->relid, c->sk_attnum);
		if (c->sktype != INT8OID && c->sktype != INT4OID && c->sktype != INT2OID)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("surrogate key column \"%s\" of dimension \"%s\" must be an integer",
							skname, c->relname),
					 errdetail("Column \"%s\" has type %s.", skname, format_type_be(c->sktype))));
	}
}

/*
 * Does this index serve the as-of probe: a valid, non-partial btree whose
 * leading key columns are the business key columns in order (with their
 * collations), then valid_from?
 */
static bool
index_fits(AsofCache *c, Relation index, AttrNumber vf_attnum)
{
	Form_pg_index ind = index->rd_index;

	if (index->rd_rel->relam != BTREE_AM_OID || !ind->indisvalid || !ind->indisready)
		return false;
	if (ind->indnkeyatts < c->nkeys + 1)
		return false;
	if (!heap_attisnull(index->rd_indextuple, Anum_pg_index_indpred, NULL))
		return false;
	for (int i = 0; i < c->nkeys; i++)
	{
		Oid			collid = c->keys[i].colcollation;

		if (ind->indkey.values[i] != c->keys[i].attnum)
			return false;
		if (OidIsValid(collid) && index->rd_indcollation[i] != collid)
			return false;
	}
	return ind->indkey.values[c->nkeys] == vf_attnum;
}

/* Index attribute number (1-based) that returns heap column attnum, or 0. */
static AttrNumber
index_column_of(Relation index, AttrNumber attnum)
{
	Form_pg_index ind = index->rd_index;

	for (int j = 0; j < ind->indnatts; j++)
		if (ind->indkey.values[j] == attnum && index_can_return(index, j + 1))
			return j + 1;
	return 0;
}

/*
 * Choose the as-of index among the dimension's indexes: one that fits, and
 * among those the first that also returns the surrogate key and valid_to
 * (so the probe can be index-only).
 */
static void
choose_index(AsofCache *c, Relation heap)
{
	List	   *indexes = RelationGetIndexList(heap);
	AttrNumber	vf_attnum = c->vf_attnum;
	ListCell   *lc;

	c->indexid = InvalidOid;
	foreach(lc, indexes)
	{
		Oid			indexid = lfirst_oid(lc);
		Relation	index = index_open(indexid, AccessShareLock);

		if (index_fits(c, index, vf_attnum))
		{
			AttrNumber	skatt = index_column_of(index, c->sk_attnum);
			AttrNumber	vtatt = index_column_of(index, c->vt_attnum);
			bool		covering = skatt != 0 && vtatt != 0;

			if (!OidIsValid(c->indexid) || (covering && !c->index_only))
			{
				c->indexid = indexid;
				c->sk_idxatt = skatt;
				c->vt_idxatt = vtatt;
				c->index_only = covering;
			}
		}
		index_close(index, NoLock);
		if (c->index_only)
			break;
	}
	list_free(indexes);

	if (!OidIsValid(c->indexid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("dimension \"%s\" has no as-of index", c->relname),
				 errdetail("scd2.asof needs a valid, non-partial btree index whose leading columns are the business key columns followed by \"%s\".",
						   get_attname(c->relid, vf_attnum, false)),
				 errhint("Run scd2.register again to recreate it, or create a btree index on (business key, valid_from).")));
}

/*
 * The probe reads the table bypassing the executor, so check what the
 * executor would: SELECT on the columns read, and no row-level security.
 */
static void
check_read_access(AsofCache *c)
{
	Oid			relid = c->relid;

	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
	{
		AttrNumber	cols[INDEX_MAX_KEYS + 3];
		int			ncols = 0;

		for (int i = 0; i < c->nkeys; i++)
			cols[ncols++] = c->keys[i].attnum;
		cols[ncols++] = c->vf_attnum;
		cols[ncols++] = c->vt_attnum;
		cols[ncols++] = c->sk_attnum;
		for (int i = 0; i < ncols; i++)
			if (pg_attribute_aclcheck(relid, cols[i], GetUserId(), ACL_SELECT) != ACLCHECK_OK)
				aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(relid));
	}
	if (check_enable_rls(relid, InvalidOid, false) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("scd2.asof does not support row-level security on dimension \"%s\"", c->relname),
				 errhint("Use a join on the business key and the validity columns instead.")));
}

/* Bulk mode: when it may switch. */
static void
setup_bulk(AsofCache *c, Relation heap)
{
	c->est_rows = heap->rd_rel->reltuples;
	if (c->est_rows < 0)		/* never vacuumed or analyzed: guess from the size */
		c->est_rows = (double) RelationGetNumberOfBlocks(heap) * (BLCKSZ / 64);
	if (scd2_asof_bulk_threshold <= 0)
		c->bulk_trigger = 0;
	else
		c->bulk_trigger = (int64) Min((double) scd2_asof_bulk_threshold,
									  Max(c->est_rows / ASOF_BULK_ROWS_PER_CALL, ASOF_BULK_MIN_CALLS));
}

/*
 * A new, empty cache for relation relid in context cxt (its own: deleting
 * it frees the cache), valid for this transaction and command.
 */
static AsofCache *
new_cache(MemoryContext cxt, Oid relid)
{
	AsofCache  *c = MemoryContextAllocZero(cxt, sizeof(AsofCache));

	c->cxt = cxt;
	c->cb.func = scd2_asof_cache_reset;
	c->cb.arg = c;
	MemoryContextRegisterResetCallback(cxt, &c->cb);
	c->relid = relid;
	c->lxid = SCD2_MY_LXID;
	c->cid = GetCurrentCommandId(false);
	return c;
}

/*
 * Build the cache for dimension relid: registry row, permissions, index,
 * scan keys -- the keys' argument types from the call site (fcinfo) or, for
 * a caller in C, keytypes[nkeys] -- in a context under parent.
 */
static AsofCache *
build_cache(MemoryContext parent, Oid relid, FunctionCallInfo fcinfo, int nkeys,
			const Oid *keytypes)
{
	AsofCache  *c;
	Relation	heap;
	Relation	index;
	MemoryContext oldcxt;

	scd2_asof_register_callbacks();

	/* a fresh context: the caller frees the old cache once this one is built */
	c = new_cache(AllocSetContextCreate(parent, "scd2.asof cache", ALLOCSET_SMALL_SIZES), relid);
	oldcxt = MemoryContextSwitchTo(c->cxt);
	c->relname = dimension_name(relid);
	MemoryContextSwitchTo(oldcxt);

	/* the dimension must exist; lock it for the rest of the transaction */
	heap = try_table_open(relid, AccessShareLock);
	if (heap == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("dimension with OID %u does not exist", relid)));
	if (heap->rd_rel->relkind == RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("scd2.asof does not support partitioned dimension \"%s\"", c->relname),
				 errhint("Use a join on the business key and the validity columns instead.")));

	/*
	 * The registry's current_valid_to convention is not needed: a NULL or
	 * 'infinity' valid_to is open either way.
	 */
	read_registry(c);

	check_read_access(c);

	choose_index(c, heap);

	setup_bulk(c, heap);

	index = index_open(c->indexid, AccessShareLock);
	if (fcinfo != NULL)
		scd2_asof_setup_key_args(c, fcinfo, index);
	else
		scd2_asof_setup_key_types(c, index, nkeys, keytypes);
	scd2_asof_setup_valid_from_key(c, index);

	if (c->sktype != INT8OID && c->sktype != INT4OID && c->sktype != INT2OID)
		elog(ERROR, "unexpected surrogate key type %u", c->sktype);


	index_close(index, NoLock);
	table_close(heap, NoLock);

	c->callcxt = AllocSetContextCreate(c->cxt, "scd2.asof call", ALLOCSET_DEFAULT_SIZES);
	return c;
}

/* The cache of scd2.asof's call site fcinfo for dimension relid. */
AsofCache *
scd2_asof_build_cache(FunctionCallInfo fcinfo, Oid relid)
{
	return build_cache(fcinfo->flinfo->fn_mcxt, relid, fcinfo, 0, NULL);
}

/*
 * The cache of a caller in C (known.c) for dimension relid, its business
 * key values of types keytypes[nkeys], in a context under parent.
 */
AsofCache *
scd2_asof_build_cache_for_types(MemoryContext parent, Oid relid, int nkeys, const Oid *keytypes)
{
	return build_cache(parent, relid, NULL, nkeys, keytypes);
}

/*
 * The cache of one shard of a Citus dimension (citus_route.c), in the
 * dimension's cache's memory: the same registration, argument conversions
 * and scan keys, on the shard's relation (whose attribute numbers may
 * differ: a shard is created without the shell table's dropped columns)
 * and on its copy of the as-of index.
 */
AsofCache *
scd2_asof_build_shard_cache(AsofCache *parent, Oid shardrel)
{
	AsofCache  *c;
	Relation	heap;
	Relation	index;
	Relation	pindex;

	/* what the registration and the call site's arguments decided */
	c = new_cache(AllocSetContextCreate(parent->cxt, "scd2.asof shard cache",
									  ALLOCSET_SMALL_SIZES), shardrel);
	c->relname = parent->relname;
	c->nkeys = parent->nkeys;
	c->keys = MemoryContextAlloc(c->cxt, sizeof(AsofKey) * c->nkeys);
	memcpy(c->keys, parent->keys, sizeof(AsofKey) * c->nkeys);
	c->variadic_array = parent->variadic_array;
	c->elmlen = parent->elmlen;
	c->elmbyval = parent->elmbyval;
	c->elmalign = parent->elmalign;
	c->vftype = parent->vftype;
	c->sktype = parent->sktype;
	c->direction = parent->direction;
	memcpy(c->scankeys, parent->scankeys, sizeof(c->scankeys));

	heap = table_open(shardrel, AccessShareLock);
	for (int i = 0; i < c->nkeys; i++)
		c->keys[i].attnum = registered_column(c, c->keys[i].colname, "business key");
	c->vf_attnum = registered_column(c, get_attname(parent->relid, parent->vf_attnum, false), "valid_from");
	c->vt_attnum = registered_column(c, get_attname(parent->relid, parent->vt_attnum, false), "valid_to");
	c->sk_attnum = registered_column(c, get_attname(parent->relid, parent->sk_attnum, false), "surrogate key");
	choose_index(c, heap);

	/* the scan keys were made for the dimension's index: the shard's must match */
	index = index_open(c->indexid, AccessShareLock);
	pindex = index_open(parent->indexid, AccessShareLock);
	for (int i = 0; i <= c->nkeys; i++)
		if (index->rd_opfamily[i] != pindex->rd_opfamily[i] ||
			index->rd_indoption[i] != pindex->rd_indoption[i])
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("as-of index \"%s\" of shard \"%s\" does not match the as-of index of dimension \"%s\"",
							RelationGetRelationName(index), RelationGetRelationName(heap), parent->relname),
					 errhint("Recreate the index on the dimension so that Citus recreates it on its shards.")));
	index_close(pindex, NoLock);
	index_close(index, NoLock);

	setup_bulk(c, heap);
	table_close(heap, NoLock);

	c->callcxt = AllocSetContextCreate(c->cxt, "scd2.asof call", ALLOCSET_DEFAULT_SIZES);
	return c;
}
