/*-------------------------------------------------------------------------
 *
 * asof.c
 *	  scd2.asof(dimension regclass, at timestamptz, VARIADIC business_key "any")
 *
 * Returns the surrogate key of the version of a business key that is valid
 * at an instant (valid_from <= at < valid_to; a NULL or 'infinity' valid_to
 * is open), or NULL.
 *
 * The dimension's configuration is read from scd2.dimensions once per query
 * (first call of a call site) and cached in fn_extra together with
 * everything derived from it: attribute numbers, the chosen as-of index and
 * its scan keys.  Each call then probes that index: equality on the business
 * key columns and valid_from <= at, walked from the high end, so the first
 * visible entry is the latest version that started at or before the instant.
 * When the index carries the surrogate key and valid_to (the index
 * scd2.register creates does, through INCLUDE) the probe is index-only
 * wherever the visibility map allows; otherwise it reads the heap tuple.
 *
 * Bulk mode: after scd2.asof_bulk_threshold calls under one snapshot (or a
 * tenth of a smaller dimension's rows), the call site builds once an
 * in-memory map of the dimension's visible versions (one ordered walk of the
 * same index, same visibility rules) and answers from it: a hash lookup and
 * a binary search per call.  It is only built when it fits in work_mem *
 * hash_mem_multiplier, and lives as long as the open scan (see build_map).
 * Each process of a parallel query builds its own.
 *
 * Key arguments: an argument whose type is the column's type (or a domain
 * over it, or binary coercible to the index's operator class type) is used
 * as is; an argument of another type is used through a cross-type operator
 * of the index's operator family when one exists (int4 against a bigint
 * column, as the planner would do); otherwise an implicit cast to the
 * column type is applied; an untyped literal is read by the column type's
 * input function.  Anything else is a datatype_mismatch error naming the
 * column.  VARIADIC ARRAY[...] is accepted: the array's elements are the key
 * values, in business key order.  A NULL dimension, instant or key value
 * gives NULL.  When no version is valid at the instant the result is NULL,
 * or an error with scd2.asof_on_missing = error.
 *
 * The probe runs with the caller's privileges: SELECT on the dimension (or
 * on the columns read) is required, and a dimension with row-level security
 * enforced for the caller is rejected (the probe cannot apply policies), as
 * is a partitioned dimension (its indexes cannot be probed directly).
 *
 * Known limitation: in PL/pgSQL, a simple expression such as
 * "v := scd2.asof(...)" is evaluated in a state that lives until the end of
 * the transaction, so its scan stays open until then, and DDL on that
 * dimension later in the same transaction (TRUNCATE, ALTER TABLE, CREATE
 * INDEX) fails with "cannot ... because it is being used by active queries
 * in this session".  "SELECT scd2.asof(...) INTO v" closes it at the end of
 * the statement.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/htup_details.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "access/xact.h"
#include "catalog/pg_am_d.h"
#include "catalog/pg_class_d.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/nodeHash.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "lib/ilist.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "portability/instr_time.h"
#include "parser/parse_coerce.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/predicate.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/date.h"
#include "utils/fmgroids.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "asof.h"
#include "scd2.h"

/* A smaller dimension switches earlier: after rows / 10 calls, at least this. */
#define ASOF_BULK_MIN_CALLS 1000

/* How one key argument becomes a scan key argument. */
typedef enum KeyConv
{
	KEY_AS_IS,					/* same type, binary coercible, or cross-type op */
	KEY_INPUT,					/* untyped literal: column type's input function */
	KEY_CAST					/* implicit cast function to the column type */
} KeyConv;

typedef struct AsofKey
{
	char	   *colname;		/* dimension column */
	AttrNumber	attnum;			/* its heap attribute number */
	Oid			coltype;		/* its type */
	int32		coltypmod;
	Oid			colcollation;
	Oid			argtype;		/* type of the argument given for it */
	KeyConv		conv;
	FmgrInfo	convfn;			/* KEY_INPUT / KEY_CAST */
	Oid			convioparam;	/* KEY_INPUT */
	int			convnargs;		/* KEY_CAST: 1, 2 or 3 */
	Oid			argoutfn;		/* output function of argtype, for messages */
	FmgrInfo	hash_col;		/* bulk mode: hash of a column value, and */
	FmgrInfo	hash_arg;		/* the compatible hash of an argument value */
} AsofKey;

/*
 * Bulk mode: the dimension's visible versions in memory, built by one ordered
 * walk of the as-of index.  Per business key (a hash table of keys) the
 * versions are contiguous in "versions", in ascending valid_from order; a
 * key's versions end where the next key's start.
 */
typedef struct AsofVersion
{
	int64		vf;				/* valid_from (a date widened to int64) */
	int64		vt;				/* valid_to; ASOF_VT_OPEN if NULL or infinity,
								 * ASOF_VT_NEVER if the surrogate key is NULL */
	int64		sk;
} AsofVersion;

#define ASOF_VT_OPEN	PG_INT64_MAX
#define ASOF_VT_NEVER	PG_INT64_MIN

typedef struct AsofMapKey
{
	uint32		hash;
	uint32		first;			/* its first version */
	Datum		values[FLEXIBLE_ARRAY_MEMBER];	/* the key, as in the index */
} AsofMapKey;

typedef struct AsofMap
{
	char	   *keys;			/* AsofMapKey entries, keysize bytes apart */
	Size		keysize;
	uint32		nkeys;
	uint32		maxkeys;
	AsofVersion *versions;
	uint32		nversions;
	uint32		maxversions;
	uint32	   *buckets;		/* key index + 1, 0 = empty; linear probing */
	uint32		mask;
} AsofMap;

#define MAP_KEY(m, i)	((AsofMapKey *) ((m)->keys + (Size) (i) * (m)->keysize))

typedef enum AsofMapState
{
	MAP_NONE,					/* probing; not tried yet for this snapshot */
	MAP_READY,					/* built: look up in memory */
	MAP_FAILED					/* too large, or not possible: keep probing */
} AsofMapState;

/*
 * Everything derived from the registry for one call site, valid for one
 * dimension within one transaction and command.
 */
typedef struct AsofCache
{
	MemoryContext cxt;			/* owns this struct and what hangs off it */
	MemoryContext callcxt;		/* reset at every call */

	/* validity of the cache */
	Oid			relid;
	LocalTransactionId lxid;
	CommandId	cid;

	char	   *relname;		/* as regclass prints it */
	Oid			indexid;

	int			nkeys;
	AsofKey    *keys;
	bool		variadic_array; /* keys given as VARIADIC ARRAY[...] */
	int16		elmlen;			/* element storage of that array */
	bool		elmbyval;
	char		elmalign;

	AttrNumber	vf_attnum;
	Oid			vftype;			/* valid_from / valid_to type */
	AttrNumber	vt_attnum;		/* heap attribute numbers */
	AttrNumber	sk_attnum;
	Oid			sktype;
	AttrNumber	vt_idxatt;		/* index attribute numbers, 0 if absent */
	AttrNumber	sk_idxatt;
	bool		index_only;		/* both returnable from the index */
	ScanDirection direction;	/* latest valid_from first */

	ScanKeyData scankeys[INDEX_MAX_KEYS];	/* only sk_argument changes */

	/* bulk mode */
	bool		bulk_ok;		/* every key column has compatible hash functions */
	double		est_rows;		/* the dimension's estimated row count */
	int64		bulk_trigger;	/* calls before building the map; 0 = never */

	/*
	 * The open scan, kept across calls (see asof_open).  Its relcache
	 * references, buffer pins and tuple descriptor references belong to a
	 * resource owner of its own.
	 */
	bool		open;
	MemoryContext opencxt;		/* the scan's memory and the map's, while open */
	MemoryContextCallback opencb;
	ResourceOwner owner;
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	Snapshot	snapshot;		/* the scan's */
	SnapshotData snap;			/* a copy of it when the scan was opened */
	TupleTableSlot *slot;
	Buffer		vmbuffer;
	dlist_node	node;			/* in open_caches while open */
	MemoryContextCallback cb;	/* closes it when the cache goes away */

	/* calls under this snapshot, and the map built from it (in opencxt) */
	int64		ncalls;
	AsofMapState map_state;
	AsofMap    *map;
} AsofCache;

/* Caches with an open scan, closed at (sub)transaction end. */
static dlist_head open_caches = DLIST_STATIC_INIT(open_caches);
static bool callbacks_registered = false;

/* The registry query, prepared once per backend. */
static SPIPlanPtr registry_plan = NULL;
static const char *registry_plan_shape = NULL;	/* its shape columns */

static void asof_xact_callback(XactEvent event, void *arg);
static void asof_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								  SubTransactionId parentSubid, void *arg);
static void asof_cache_reset(void *arg);
static void asof_opencxt_gone(void *arg);
static void prepare_btree_scan(IndexScanDesc scan);

PG_FUNCTION_INFO_V1(scd2_asof);

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

/*
 * Read the dimension's registry row (business key, validity and surrogate
 * key columns) into the cache.
 */
static void
read_registry(AsofCache *c)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		values[1];
	int			ret;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;
	Datum		d;
	Datum	   *names;
	int			nnames;
	char	   *vfname,
			   *vtname,
			   *skname = NULL;
	const char *shape_sql;
	MemoryContext oldcxt;

	values[0] = ObjectIdGetDatum(c->relid);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	/*
	 * Prepared once per backend (the plan cache revalidates it), and again
	 * when the registry has gained its shape columns since (ALTER EXTENSION
	 * scd2 UPDATE in this session).
	 */
	shape_sql = scd2_registry_shape_sql();
	if (registry_plan != NULL && strcmp(shape_sql, registry_plan_shape) != 0)
	{
		SPI_freeplan(registry_plan);
		registry_plan = NULL;
	}
	if (registry_plan == NULL)
	{
		SPIPlanPtr	plan;

		plan = SPI_prepare(psprintf("SELECT business_key, valid_from_column, valid_to_column,"
									" surrogate_key_column, %s"
									" FROM scd2.dimensions"
									" WHERE dimension OPERATOR(pg_catalog.=) $1",
									shape_sql),
						   1, argtypes);
		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
		if (SPI_keepplan(plan) != 0)
			elog(ERROR, "SPI_keepplan failed");
		registry_plan = plan;
		registry_plan_shape = shape_sql;
	}
	ret = SPI_execute_plan(registry_plan, values, NULL, true, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute_plan returned %s", SPI_result_code_string(ret));
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not a registered scd2 dimension", c->relname),
				 errhint("Register it with scd2.register(...).")));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;

	/* the dimension must still have the shape it was registered with */
	{
		bool		n1,
					n2,
					n3;
		Datum		cols = SPI_getbinval(tup, desc, 5, &n1);
		Datum		types = SPI_getbinval(tup, desc, 6, &n2);
		Datum		typmods = SPI_getbinval(tup, desc, 7, &n3);

		if (!n1 && !n2 && !n3)
			scd2_check_registered_shape(c->relid, c->relname, cols, types, typmods);
	}

	/* copy what we keep into the cache context */
	oldcxt = MemoryContextSwitchTo(c->cxt);

	d = SPI_getbinval(tup, desc, 1, &isnull);
	Assert(!isnull);
	deconstruct_array(DatumGetArrayTypeP(d), NAMEOID, NAMEDATALEN, false,
					  TYPALIGN_CHAR, &names, NULL, &nnames);
	if (nnames < 1 || nnames >= INDEX_MAX_KEYS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("dimension \"%s\" has an invalid business key in scd2.dimensions", c->relname),
				 errhint("Run scd2.register again to update the registration.")));
	c->nkeys = nnames;
	c->keys = palloc0(sizeof(AsofKey) * nnames);
	for (int i = 0; i < nnames; i++)
		c->keys[i].colname = pstrdup(NameStr(*DatumGetName(names[i])));

	vfname = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 2, &isnull))));
	vtname = pstrdup(NameStr(*DatumGetName(SPI_getbinval(tup, desc, 3, &isnull))));
	d = SPI_getbinval(tup, desc, 4, &isnull);
	if (!isnull)
		skname = pstrdup(NameStr(*DatumGetName(d)));

	MemoryContextSwitchTo(oldcxt);
	SPI_finish();

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

/* Error for a call with the wrong number of key values. */
static void
wrong_key_count(AsofCache *c, int given)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("wrong number of business key values for dimension \"%s\"", c->relname),
			 errdetail("The business key has %d column(s); %d value(s) were given.", c->nkeys, given),
			 errhint("Pass one value per business key column, in the order they were registered.")));
}

/* Error for a key argument of a type that cannot be compared to its column. */
static void
key_type_error(AsofCache *c, AsofKey *k, Oid argtype)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATATYPE_MISMATCH),
			 errmsg("business key value for column \"%s\" of dimension \"%s\" has type %s, but the column has type %s",
					k->colname, c->relname, format_type_be(argtype), format_type_be(k->coltype)),
			 errhint("Cast the value to %s.", format_type_be(k->coltype))));
}

/*
 * Decide how the argument for key column i is compared, and initialize its
 * scan key (index attribute i + 1, equality).
 */
static void
setup_key(AsofCache *c, Relation index, int i, Oid argtype)
{
	AsofKey    *k = &c->keys[i];
	Oid			opfamily = index->rd_opfamily[i];
	Oid			opcintype = index->rd_opcintype[i];
	Oid			subtype = opcintype;
	Oid			eqop = InvalidOid;
	bool		isvarlena;

	k->argtype = argtype;
	k->conv = KEY_AS_IS;

	if (argtype == UNKNOWNOID)
	{
		Oid			infn;

		k->conv = KEY_INPUT;
		getTypeInputInfo(k->coltype, &infn, &k->convioparam);
		fmgr_info_cxt(infn, &k->convfn, c->cxt);
	}
	else if (getBaseType(argtype) == getBaseType(k->coltype) ||
			 (!IsPolymorphicType(opcintype) && IsBinaryCoercible(argtype, opcintype)))
	{
		/* used as is */
	}
	else if (!IsPolymorphicType(opcintype) &&
			 OidIsValid(eqop = get_opfamily_member(opfamily, opcintype, getBaseType(argtype),
												   BTEqualStrategyNumber)))
	{
		/* cross-type comparison inside the operator family */
		subtype = getBaseType(argtype);
	}
	else
	{
		Oid			castfn;

		switch (find_coercion_pathway(k->coltype, argtype, COERCION_IMPLICIT, &castfn))
		{
			case COERCION_PATH_RELABELTYPE:
				break;
			case COERCION_PATH_FUNC:
				k->conv = KEY_CAST;
				k->convnargs = get_func_nargs(castfn);
				fmgr_info_cxt(castfn, &k->convfn, c->cxt);
				break;
			default:
				key_type_error(c, k, argtype);
		}
	}

	if (!OidIsValid(eqop))
		eqop = get_opfamily_member(opfamily, opcintype, opcintype, BTEqualStrategyNumber);
	if (!OidIsValid(eqop))
		elog(ERROR, "missing equality operator for types %u and %u in operator family %u",
			 opcintype, subtype, opfamily);

	getTypeOutputInfo(argtype == UNKNOWNOID ? CSTRINGOID : argtype, &k->argoutfn, &isvarlena);

	/*
	 * Bulk mode hashes keys with the hash functions of this equality
	 * operator's hash operator family (as a hash join on it would): the
	 * column side's for the values in the index, the argument side's for the
	 * values looked up, which the family guarantees to agree whenever the
	 * operator says equal (under the index column's collation, which is
	 * passed to both).  Without them, no bulk mode.
	 */
	{
		RegProcedure lhs,
					rhs;

		if (get_op_hash_functions(eqop, &lhs, &rhs))
		{
			fmgr_info_cxt(lhs, &k->hash_col, c->cxt);
			fmgr_info_cxt(rhs, &k->hash_arg, c->cxt);
		}
		else
			c->bulk_ok = false;
	}

	{
		MemoryContext oldcxt = MemoryContextSwitchTo(c->cxt);

		ScanKeyEntryInitialize(&c->scankeys[i], 0, i + 1, BTEqualStrategyNumber,
							   subtype, index->rd_indcollation[i],
							   get_opcode(eqop), (Datum) 0);
		MemoryContextSwitchTo(oldcxt);
	}
}

/*
 * Build the cache for dimension relid and the call site's argument types:
 * registry row, permissions, index, scan keys.
 */
static AsofCache *
build_cache(FunctionCallInfo fcinfo, AsofCache *old, Oid relid)
{
	MemoryContext cxt;
	AsofCache  *c;
	Relation	heap;
	Relation	index;
	int			nargs;
	AttrNumber	vf_attnum;
	Oid			vfopfamily;
	Oid			vfopcintype;
	Oid			leop;
	MemoryContext oldcxt;

	/* a fresh context: the old cache stays usable until this one is built */
	cxt = AllocSetContextCreate(fcinfo->flinfo->fn_mcxt, "scd2.asof cache",
								ALLOCSET_SMALL_SIZES);

	if (!callbacks_registered)
	{
		RegisterXactCallback(asof_xact_callback, NULL);
		RegisterSubXactCallback(asof_subxact_callback, NULL);
		callbacks_registered = true;
	}

	c = MemoryContextAllocZero(cxt, sizeof(AsofCache));
	c->cxt = cxt;
	c->cb.func = asof_cache_reset;
	c->cb.arg = c;
	MemoryContextRegisterResetCallback(cxt, &c->cb);
	c->relid = relid;
	c->lxid = SCD2_MY_LXID;
	c->cid = GetCurrentCommandId(false);

	oldcxt = MemoryContextSwitchTo(cxt);
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
	vf_attnum = c->vf_attnum;

	/*
	 * The probe reads the table bypassing the executor, so check what the
	 * executor would: SELECT on the columns read, and no row-level security.
	 */
	if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
	{
		AttrNumber	cols[INDEX_MAX_KEYS + 3];
		int			ncols = 0;

		for (int i = 0; i < c->nkeys; i++)
			cols[ncols++] = c->keys[i].attnum;
		cols[ncols++] = vf_attnum;
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

	choose_index(c, heap);

	/* bulk mode: when it may switch, and whether it can */
	c->bulk_ok = true;
	c->est_rows = heap->rd_rel->reltuples;
	if (c->est_rows < 0)		/* never vacuumed or analyzed: guess from the size */
		c->est_rows = (double) RelationGetNumberOfBlocks(heap) * (BLCKSZ / 64);
	if (scd2_asof_bulk_threshold <= 0)
		c->bulk_trigger = 0;
	else
		c->bulk_trigger = (int64) Min((double) scd2_asof_bulk_threshold,
									  Max(c->est_rows / 10, ASOF_BULK_MIN_CALLS));

	/* key arguments */
	nargs = PG_NARGS() - 2;
	c->variadic_array = get_fn_expr_variadic(fcinfo->flinfo);
	if (c->variadic_array)
	{
		Oid			arrtype = get_fn_expr_argtype(fcinfo->flinfo, 2);
		Oid			elemtype = OidIsValid(arrtype) ? get_element_type(getBaseType(arrtype)) : InvalidOid;

		if (!OidIsValid(elemtype))
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("VARIADIC argument of scd2.asof must be an array")));
		get_typlenbyvalalign(elemtype, &c->elmlen, &c->elmbyval, &c->elmalign);
		index = index_open(c->indexid, AccessShareLock);
		for (int i = 0; i < c->nkeys; i++)
			setup_key(c, index, i, elemtype);
	}
	else
	{
		if (nargs != c->nkeys)
			wrong_key_count(c, nargs);
		index = index_open(c->indexid, AccessShareLock);
		for (int i = 0; i < c->nkeys; i++)
		{
			Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, i + 2);

			if (!OidIsValid(argtype))
				elog(ERROR, "could not determine the type of business key argument %d", i + 1);
			setup_key(c, index, i, argtype);
		}
	}

	/* valid_from <= at, walked from the latest start */
	vfopfamily = index->rd_opfamily[c->nkeys];
	vfopcintype = index->rd_opcintype[c->nkeys];
	if (vfopcintype != c->vftype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("as-of index of dimension \"%s\" uses an unexpected operator class for valid_from",
						c->relname),
				 errhint("Run scd2.register again to recreate the index with the default operator class.")));
	leop = get_opfamily_member(vfopfamily, vfopcintype, vfopcintype, BTLessEqualStrategyNumber);
	if (!OidIsValid(leop))
		elog(ERROR, "missing <= operator for type %u in operator family %u", vfopcintype, vfopfamily);
	oldcxt = MemoryContextSwitchTo(cxt);
	ScanKeyEntryInitialize(&c->scankeys[c->nkeys], 0, c->nkeys + 1, BTLessEqualStrategyNumber,
						   vfopcintype, index->rd_indcollation[c->nkeys],
						   get_opcode(leop), (Datum) 0);
	MemoryContextSwitchTo(oldcxt);
	c->direction = (index->rd_indoption[c->nkeys] & INDOPTION_DESC) ?
		ForwardScanDirection : BackwardScanDirection;

	if (c->sktype != INT8OID && c->sktype != INT4OID && c->sktype != INT2OID)
		elog(ERROR, "unexpected surrogate key type %u", c->sktype);

	index_close(index, NoLock);
	table_close(heap, NoLock);

	c->callcxt = AllocSetContextCreate(cxt, "scd2.asof call", ALLOCSET_DEFAULT_SIZES);
	if (old != NULL)
		MemoryContextDelete(old->cxt);
	return c;
}

/* A key argument's value as its column's comparison expects it. */
static Datum
convert_key(AsofKey *k, Datum value)
{
	switch (k->conv)
	{
		case KEY_AS_IS:
			return value;
		case KEY_INPUT:
			return InputFunctionCall(&k->convfn, DatumGetCString(value),
									 k->convioparam, k->coltypmod);
		case KEY_CAST:
			if (k->convnargs == 1)
				return FunctionCall1(&k->convfn, value);
			if (k->convnargs == 2)
				return FunctionCall2(&k->convfn, value, Int32GetDatum(k->coltypmod));
			return FunctionCall3(&k->convfn, value, Int32GetDatum(k->coltypmod),
								 BoolGetDatum(false));
	}
	return value;				/* keep compiler quiet */
}

/* at, as a value of the valid_from column's type (as a cast would do it) */
static Datum
convert_at(AsofCache *c, TimestampTz at)
{
	switch (c->vftype)
	{
		case TIMESTAMPTZOID:
			return TimestampTzGetDatum(at);
		case TIMESTAMPOID:
			return DirectFunctionCall1(timestamptz_timestamp, TimestampTzGetDatum(at));
		case DATEOID:
			return DirectFunctionCall1(timestamptz_date, TimestampTzGetDatum(at));
	}
	elog(ERROR, "unexpected valid_from type %u", c->vftype);
	return (Datum) 0;			/* keep compiler quiet */
}

/* Is a version ending at valid_to (not NULL) still valid at at? */
static bool
before_valid_to(AsofCache *c, Datum at, Datum valid_to)
{
	if (c->vftype == DATEOID)
	{
		DateADT		vt = DatumGetDateADT(valid_to);

		return DATE_IS_NOEND(vt) || DatumGetDateADT(at) < vt;
	}
	else
	{
		Timestamp	vt = DatumGetTimestamp(valid_to);

		return TIMESTAMP_IS_NOEND(vt) || DatumGetTimestamp(at) < vt;
	}
}

static int64
sk_value(AsofCache *c, Datum d)
{
	switch (c->sktype)
	{
		case INT2OID:
			return DatumGetInt16(d);
		case INT4OID:
			return DatumGetInt32(d);
		default:
			return DatumGetInt64(d);
	}
}

/*
 * Open the dimension, its as-of index and a scan of it, to be reused by the
 * following calls of this call site.
 *
 * The executor gives a plain function no end-of-query hook, so the scan is
 * kept open with resources that cannot leak into the transaction's resource
 * owners: the relcache references, buffer pins and tuple descriptor
 * references it takes go to a resource owner of our own (the locks are taken
 * in the current owner, as any relation_open would, and last until the
 * transaction ends).  It is closed when the cache's memory goes away (the end
 * of the query), when the cache is rebuilt, and at the end or abort of any
 * (sub)transaction (asof_xact_callback), whichever comes first; a closed
 * cache is rebuilt at the next call.
 */
static void
asof_open(AsofCache *c, Snapshot snapshot)
{
	ResourceOwner saved = CurrentResourceOwner;
	MemoryContext oldcxt;

	LockRelationOid(c->relid, AccessShareLock);
	LockRelationOid(c->indexid, AccessShareLock);

	c->owner = ResourceOwnerCreate(NULL, "scd2.asof");
	c->open = true;
	dlist_push_head(&open_caches, &c->node);

	/*
	 * The scan's memory (and the map's) in a context of its own, freed when
	 * the scan is closed: a call site that reopens its scan at every call (a
	 * PL/pgSQL loop whose statements each take a new snapshot) stays flat.
	 */
	c->opencxt = AllocSetContextCreate(c->cxt, "scd2.asof scan", ALLOCSET_DEFAULT_SIZES);
	c->opencb.func = asof_opencxt_gone;
	c->opencb.arg = c;
	MemoryContextRegisterResetCallback(c->opencxt, &c->opencb);
	c->ncalls = 0;
	c->map_state = MAP_NONE;
	c->map = NULL;

	oldcxt = MemoryContextSwitchTo(c->opencxt);
	CurrentResourceOwner = c->owner;
	PG_TRY();
	{
		c->heap = table_open(c->relid, NoLock);
		c->index = index_open(c->indexid, NoLock);

		c->snapshot = snapshot;
		c->snap = *snapshot;	/* what it is now, to see it change */
		c->snap.xip = palloc(sizeof(TransactionId) * Max(snapshot->xcnt, 1));
		if (snapshot->xcnt > 0)
			memcpy(c->snap.xip, snapshot->xip, sizeof(TransactionId) * snapshot->xcnt);
		c->snap.subxip = palloc(sizeof(TransactionId) * Max(snapshot->subxcnt, 1));
		if (snapshot->subxcnt > 0)
			memcpy(c->snap.subxip, snapshot->subxip, sizeof(TransactionId) * snapshot->subxcnt);
		c->scan = scd2_index_beginscan(c->heap, c->index, c->snapshot, c->nkeys + 1, 0);
		c->scan->xs_want_itup = c->index_only;
		prepare_btree_scan(c->scan);
		c->slot = table_slot_create(c->heap, NULL);
		c->vmbuffer = InvalidBuffer;
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
		MemoryContextSwitchTo(oldcxt);
	}
	PG_END_TRY();
}

/*
 * Close the scan: release everything its resource owner holds.  Quietly:
 * this is the normal way to close it, not a leak.  Memory is left to the
 * cache's context.
 */
static void
asof_close(AsofCache *c)
{
	if (!c->open)
		return;
	c->open = false;
	dlist_delete(&c->node);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_BEFORE_LOCKS, false, true);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_LOCKS, false, true);
	ResourceOwnerRelease(c->owner, RESOURCE_RELEASE_AFTER_LOCKS, false, true);
	ResourceOwnerDelete(c->owner);
	c->owner = NULL;
	if (c->opencxt != NULL)
		MemoryContextDelete(c->opencxt);	/* asof_opencxt_gone clears it */
	c->map = NULL;
	c->map_state = MAP_NONE;
	c->ncalls = 0;
	c->heap = NULL;
	c->index = NULL;
	c->scan = NULL;
	c->slot = NULL;
	c->vmbuffer = InvalidBuffer;
}

static void
asof_close_all(void)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &open_caches)
		asof_close(dlist_container(AsofCache, node, iter.cur));
}

/*
 * At the end of a transaction, and at the abort of a subtransaction (whose
 * locks are released, and which may have interrupted a call half-way), close
 * every open scan.
 */
static void
asof_xact_callback(XactEvent event, void *arg)
{
	(void) arg;
	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			asof_close_all();
			break;
		default:
			break;
	}
}

static void
asof_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					  SubTransactionId parentSubid, void *arg)
{
	(void) mySubid;
	(void) parentSubid;
	(void) arg;
	if (event == SUBXACT_EVENT_ABORT_SUB)
		asof_close_all();
}

/*
 * The open scan's memory is going away: closed, or its parent (the cache's)
 * is being deleted, which deletes its children before calling
 * asof_cache_reset.
 */
static void
asof_opencxt_gone(void *arg)
{
	AsofCache  *c = (AsofCache *) arg;

	c->opencxt = NULL;
	c->map = NULL;
}

/*
 * btgettuple allocates its array of killed items lazily, in the memory
 * context current at the time, which for us is a per-call context: allocate
 * it now, with the scan.
 */
static void
prepare_btree_scan(IndexScanDesc scan)
{
	BTScanOpaque so = (BTScanOpaque) scan->opaque;

	Assert(scan->indexRelation->rd_rel->relam == BTREE_AM_OID);
	if (so->killedItems == NULL)
		so->killedItems = (int *) palloc(MaxTIDsPerBTreePage * sizeof(int));
}

/* The cache's memory is going away (end of query, or rebuilt). */
static void
asof_cache_reset(void *arg)
{
	asof_close((AsofCache *) arg);
}

/*
 * Probe the as-of index.  Returns true and sets *sk if the latest version
 * starting at or before the instant (atv, in valid_from's type) is still
 * valid at that instant.  Runs with the scan's resource owner current.
 */
static bool
probe(AsofCache *c, Datum atv, int64 *sk)
{
	IndexScanDesc scan = c->scan;
	ItemPointer tid;
	bool		found = false;
	bool		vtnull = true;
	Datum		vt = (Datum) 0;
	Datum		skd = (Datum) 0;
	bool		sknull = true;

	index_rescan(scan, c->scankeys, c->nkeys + 1, NULL, 0);

	if (c->index_only)
	{
		while ((tid = index_getnext_tid(scan, c->direction)) != NULL)
		{
			/* as nodeIndexonlyscan.c: the heap only when the page is not all-visible */
			if (!VM_ALL_VISIBLE(c->heap, ItemPointerGetBlockNumber(tid), &c->vmbuffer))
			{
				if (!index_fetch_heap(scan, c->slot))
					continue;	/* no visible tuple, try the next entry */
				ExecClearTuple(c->slot);
				if (scan->xs_heap_continue)
					elog(ERROR, "non-MVCC snapshots are not supported by scd2.asof");
			}
			else
				PredicateLockPage(c->heap, ItemPointerGetBlockNumber(tid), c->snapshot);

			if (scan->xs_itup != NULL)
			{
				vt = index_getattr(scan->xs_itup, c->vt_idxatt, scan->xs_itupdesc, &vtnull);
				skd = index_getattr(scan->xs_itup, c->sk_idxatt, scan->xs_itupdesc, &sknull);
			}
			else if (scan->xs_hitup != NULL)
			{
				vt = heap_getattr(scan->xs_hitup, c->vt_idxatt, scan->xs_hitupdesc, &vtnull);
				skd = heap_getattr(scan->xs_hitup, c->sk_idxatt, scan->xs_hitupdesc, &sknull);
			}
			else
				elog(ERROR, "no data returned for index-only scan");
			found = true;
			break;
		}
	}
	else if (index_getnext_slot(scan, c->direction, c->slot))
	{
		vt = slot_getattr(c->slot, c->vt_attnum, &vtnull);
		skd = slot_getattr(c->slot, c->sk_attnum, &sknull);
		found = true;
	}

	if (found)
		found = !sknull && (vtnull || before_valid_to(c, atv, vt));
	if (found)
		*sk = sk_value(c, skd);

	/*
	 * Drop the pins on the index leaf page and the heap page until the next
	 * call, so that a paused query (a cursor) does not hold up VACUUM.  The
	 * visibility map page stays pinned.
	 */
	ExecClearTuple(c->slot);
	index_rescan(scan, NULL, 0, NULL, 0);
	return found;
}

/*
 * Bulk mode.
 *
 * After many calls under one snapshot (scd2.asof_bulk_threshold, or a tenth
 * of a smaller dimension's rows), the call site walks the whole as-of index
 * once, in order, with the scan's snapshot (index-only where the visibility
 * map allows, as the probe), and keeps every visible version in memory:
 * a hash table of business keys, each with its versions in ascending
 * valid_from order.  A call is then a hash lookup and a binary search,
 * giving exactly what the probe would: the latest visible version starting
 * at or before the instant, if it is still valid then.  The map lives in the
 * scan's memory context, so it goes away with the scan: at the end of the
 * query, when the snapshot changes, when the cache is rebuilt (another
 * command or transaction), and at (sub)transaction end.  It is only built
 * when the estimated size fits in work_mem * hash_mem_multiplier, and the
 * build is abandoned (the call site keeps probing) when the real size does
 * not.
 */

/* valid_from / valid_to as int64, ordered as the btree orders them */
static inline int64
time_value(AsofCache *c, Datum d)
{
	if (c->vftype == DATEOID)
		return (int64) DatumGetDateADT(d);
	return DatumGetInt64(d);
}

static uint32
hash_key(AsofCache *c, const Datum *values, bool column_side)
{
	uint32		h = 0;

	for (int i = 0; i < c->nkeys; i++)
	{
		AsofKey    *k = &c->keys[i];
		Datum		hd;

		hd = FunctionCall1Coll(column_side ? &k->hash_col : &k->hash_arg,
							   c->scankeys[i].sk_collation, values[i]);
		h = hash_combine(h, DatumGetUInt32(hd));
	}
	return h;
}

/* Is the walk's key the current group's key (btree comparison)? */
static bool
same_key(AsofCache *c, const Datum *stored, const Datum *values)
{
	for (int i = 0; i < c->nkeys; i++)
	{
		FmgrInfo   *cmp = index_getprocinfo(c->index, i + 1, BTORDER_PROC);

		if (DatumGetInt32(FunctionCall2Coll(cmp, c->index->rd_indcollation[i],
											stored[i], values[i])) != 0)
			return false;
	}
	return true;
}

/* The versions of the last key, ascending (the walk gave them descending). */
static void
finish_key(AsofCache *c, AsofMap *m)
{
	if (ScanDirectionIsForward(c->direction) && m->nkeys > 0)
	{
		uint32		lo = MAP_KEY(m, m->nkeys - 1)->first;
		uint32		hi = m->nversions;

		while (hi > lo + 1)
		{
			AsofVersion tmp = m->versions[lo];

			m->versions[lo++] = m->versions[--hi];
			m->versions[hi] = tmp;
		}
	}
}

/* Does the map's memory stay within the limit, with "more" bytes to come? */
static bool
map_fits(MemoryContext mapcxt, Size more, Size limit)
{
	return MemoryContextMemAllocated(mapcxt, true) + more <= limit;
}

/*
 * Add one index entry (in index order) to the map.  Returns false when the
 * map outgrows the memory limit.
 */
static bool
map_add(AsofCache *c, AsofMap *m, MemoryContext mapcxt, Size limit,
		const Datum *values, const bool *isnull,
		Datum vf, bool vfnull, Datum vt, bool vtnull, Datum sk, bool sknull)
{
	AsofVersion v;
	AsofMapKey *cur = m->nkeys > 0 ? MAP_KEY(m, m->nkeys - 1) : NULL;

	/* entries the probe's scan keys can never match */
	for (int i = 0; i < c->nkeys; i++)
		if (isnull[i])
			return true;
	if (vfnull)
		return true;

	v.vf = time_value(c, vf);
	if (vtnull)
		v.vt = ASOF_VT_OPEN;
	else if (c->vftype == DATEOID)
		v.vt = DATE_IS_NOEND(DatumGetDateADT(vt)) ? ASOF_VT_OPEN : (int64) DatumGetDateADT(vt);
	else
		v.vt = DatumGetInt64(vt);	/* TIMESTAMP_IS_NOEND is ASOF_VT_OPEN */
	v.sk = sknull ? 0 : sk_value(c, sk);
	if (sknull)
		v.vt = ASOF_VT_NEVER;	/* found by the probe, but gives NULL */

	if (cur == NULL || !same_key(c, cur->values, values))
	{
		TupleDesc	idesc = RelationGetDescr(c->index);
		MemoryContext oldcxt;

		finish_key(c, m);
		if (m->nkeys == m->maxkeys)
		{
			if (m->maxkeys >= PG_UINT32_MAX / 2 ||
				!map_fits(mapcxt, m->keysize * m->maxkeys, limit))
				return false;
			m->maxkeys *= 2;
			m->keys = repalloc_huge(m->keys, m->keysize * m->maxkeys);
		}
		cur = MAP_KEY(m, m->nkeys);
		m->nkeys++;
		cur->first = m->nversions;
		oldcxt = MemoryContextSwitchTo(mapcxt);
		for (int i = 0; i < c->nkeys; i++)
		{
			Form_pg_attribute att = TupleDescAttr(idesc, i);

			cur->values[i] = datumCopy(values[i], att->attbyval, att->attlen);
		}
		MemoryContextSwitchTo(oldcxt);
		cur->hash = hash_key(c, cur->values, true);
		if ((m->nkeys & 4095) == 0 && !map_fits(mapcxt, 0, limit))
			return false;
	}
	else if (m->nversions > cur->first && m->versions[m->nversions - 1].vf == v.vf)
	{
		/*
		 * The same valid_from twice (the index is not unique): keep the one
		 * the probe would find first, the last in index order when it walks
		 * backwards, the first when it walks forwards.
		 */
		if (ScanDirectionIsBackward(c->direction))
			m->versions[m->nversions - 1] = v;
		return true;
	}

	if (m->nversions == m->maxversions)
	{
		if (m->maxversions >= PG_UINT32_MAX / 2 ||
			!map_fits(mapcxt, sizeof(AsofVersion) * m->maxversions, limit))
			return false;
		m->maxversions *= 2;
		m->versions = repalloc_huge(m->versions, sizeof(AsofVersion) * m->maxversions);
	}
	m->versions[m->nversions++] = v;
	return true;
}

/*
 * Build the map from the open scan's relations and snapshot, with its
 * resource owner current.  Sets c->map_state to MAP_READY or MAP_FAILED.
 */
static void
build_map(AsofCache *c)
{
	Size		limit = get_hash_memory_limit();
	MemoryContext mapcxt;
	MemoryContext tmpcxt;
	MemoryContext oldcxt;
	AsofMap    *m;
	IndexScanDesc scan;
	bool		ok = true;
	uint64		nentries = 0;
	uint32		nbuckets;
	instr_time	start;
	instr_time	duration;

	c->map_state = MAP_FAILED;	/* unless it completes */
	if (!c->bulk_ok)
		return;
	if (c->est_rows * sizeof(AsofVersion) > (double) limit)
	{
		elog(DEBUG1, "scd2.asof: dimension \"%s\" is too large for an in-memory map (about %.0f rows, limit %zu bytes)",
			 c->relname, c->est_rows, limit);
		return;
	}
	INSTR_TIME_SET_CURRENT(start);

	mapcxt = AllocSetContextCreate(c->opencxt, "scd2.asof map", ALLOCSET_DEFAULT_SIZES);
	tmpcxt = AllocSetContextCreate(mapcxt, "scd2.asof map build", ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(mapcxt);

	m = palloc0(sizeof(AsofMap));
	m->keysize = MAXALIGN(offsetof(AsofMapKey, values) + sizeof(Datum) * c->nkeys);
	m->maxkeys = 1024;
	m->keys = MemoryContextAllocHuge(mapcxt, m->keysize * m->maxkeys);
	m->maxversions = (uint32) Min(c->est_rows * 1.05 + 1024,
								  Min((double) (PG_UINT32_MAX / 4), (double) limit / sizeof(AsofVersion)));
	m->versions = MemoryContextAllocHuge(mapcxt, sizeof(AsofVersion) * m->maxversions);

	scan = scd2_index_beginscan(c->heap, c->index, c->snapshot, 0, 0);
	scan->xs_want_itup = c->index_only;
	prepare_btree_scan(scan);
	index_rescan(scan, NULL, 0, NULL, 0);

	/* the whole dimension is read: a serializable reader depends on all of it */
	PredicateLockRelation(c->heap, c->snapshot);

	MemoryContextSwitchTo(tmpcxt);
	for (;;)
	{
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];
		Datum		vf,
					vt = (Datum) 0,
					sk = (Datum) 0;
		bool		vfnull,
					vtnull = true,
					sknull = true;

		if ((++nentries & 1023) == 0)
		{
			CHECK_FOR_INTERRUPTS();
			MemoryContextReset(tmpcxt);
		}

		if (c->index_only)
		{
			ItemPointer tid = index_getnext_tid(scan, ForwardScanDirection);

			if (tid == NULL)
				break;
			if (!VM_ALL_VISIBLE(c->heap, ItemPointerGetBlockNumber(tid), &c->vmbuffer))
			{
				if (!index_fetch_heap(scan, c->slot))
					continue;
				ExecClearTuple(c->slot);
				if (scan->xs_heap_continue)
					elog(ERROR, "non-MVCC snapshots are not supported by scd2.asof");
			}
			if (scan->xs_itup != NULL)
			{
				for (int i = 0; i < c->nkeys; i++)
					values[i] = index_getattr(scan->xs_itup, i + 1, scan->xs_itupdesc, &isnull[i]);
				vf = index_getattr(scan->xs_itup, c->nkeys + 1, scan->xs_itupdesc, &vfnull);
				vt = index_getattr(scan->xs_itup, c->vt_idxatt, scan->xs_itupdesc, &vtnull);
				sk = index_getattr(scan->xs_itup, c->sk_idxatt, scan->xs_itupdesc, &sknull);
			}
			else if (scan->xs_hitup != NULL)
			{
				for (int i = 0; i < c->nkeys; i++)
					values[i] = heap_getattr(scan->xs_hitup, i + 1, scan->xs_hitupdesc, &isnull[i]);
				vf = heap_getattr(scan->xs_hitup, c->nkeys + 1, scan->xs_hitupdesc, &vfnull);
				vt = heap_getattr(scan->xs_hitup, c->vt_idxatt, scan->xs_hitupdesc, &vtnull);
				sk = heap_getattr(scan->xs_hitup, c->sk_idxatt, scan->xs_hitupdesc, &sknull);
			}
			else
				elog(ERROR, "no data returned for index-only scan");
		}
		else
		{
			if (!index_getnext_slot(scan, ForwardScanDirection, c->slot))
				break;
			for (int i = 0; i < c->nkeys; i++)
				values[i] = slot_getattr(c->slot, c->keys[i].attnum, &isnull[i]);
			vf = slot_getattr(c->slot, c->vf_attnum, &vfnull);
			vt = slot_getattr(c->slot, c->vt_attnum, &vtnull);
			sk = slot_getattr(c->slot, c->sk_attnum, &sknull);
		}

		if (!map_add(c, m, mapcxt, limit, values, isnull, vf, vfnull, vt, vtnull, sk, sknull))
		{
			ok = false;
			break;
		}
	}
	if (!c->index_only)
		ExecClearTuple(c->slot);
	index_endscan(scan);
	MemoryContextSwitchTo(mapcxt);
	MemoryContextDelete(tmpcxt);

	if (ok)
	{
		finish_key(c, m);
		/* give back the arrays' slack, then a table at most half full */
		m->keys = repalloc_huge(m->keys, m->keysize * Max(m->nkeys, 1));
		m->versions = repalloc_huge(m->versions, sizeof(AsofVersion) * Max(m->nversions, 1));
		nbuckets = 16;
		while (nbuckets < (uint64) m->nkeys * 2)
			nbuckets *= 2;
		ok = map_fits(mapcxt, sizeof(uint32) * nbuckets, limit);
	}
	if (ok)
	{
		m->mask = nbuckets - 1;
		m->buckets = MemoryContextAllocHuge(mapcxt, sizeof(uint32) * nbuckets);
		memset(m->buckets, 0, sizeof(uint32) * nbuckets);
		for (uint32 i = 0; i < m->nkeys; i++)
		{
			uint32		b = MAP_KEY(m, i)->hash & m->mask;

			while (m->buckets[b] != 0)
				b = (b + 1) & m->mask;
			m->buckets[b] = i + 1;
		}
	}
	MemoryContextSwitchTo(oldcxt);

	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	if (!ok)
	{
		elog(DEBUG1, "scd2.asof: in-memory map of dimension \"%s\" abandoned: more than %zu bytes",
			 c->relname, limit);
		MemoryContextDelete(mapcxt);
		return;
	}
	elog(DEBUG1, "scd2.asof: in-memory map of dimension \"%s\": %u keys, %u versions",
		 c->relname, m->nkeys, m->nversions);
	elog(DEBUG2, "scd2.asof: in-memory map of dimension \"%s\": %zu bytes, built in %.1f ms",
		 c->relname, MemoryContextMemAllocated(mapcxt, true), INSTR_TIME_GET_MILLISEC(duration));
	c->map = m;
	c->map_state = MAP_READY;
}

/* The bulk mode's answer for the scan keys' arguments and atv. */
static bool
map_lookup(AsofCache *c, Datum atv, int64 *sk)
{
	AsofMap    *m = c->map;
	Datum		values[INDEX_MAX_KEYS];
	AsofMapKey *k;
	uint32		h;
	uint32		b;
	uint32		lo,
				hi,
				first;
	int64		at;

	for (int i = 0; i < c->nkeys; i++)
		values[i] = c->scankeys[i].sk_argument;
	h = hash_key(c, values, false);
	for (b = h & m->mask;; b = (b + 1) & m->mask)
	{
		uint32		e = m->buckets[b];
		bool		match = true;

		if (e == 0)
			return false;
		k = MAP_KEY(m, e - 1);
		if (k->hash != h)
			continue;
		/* the index's equality operators, column value first, as the probe */
		for (int i = 0; i < c->nkeys && match; i++)
			match = DatumGetBool(FunctionCall2Coll(&c->scankeys[i].sk_func,
												   c->scankeys[i].sk_collation,
												   k->values[i], values[i]));
		if (match)
		{
			first = k->first;
			hi = e < m->nkeys ? MAP_KEY(m, e)->first : m->nversions;
			break;
		}
	}

	/* the last version with valid_from <= at */
	at = time_value(c, atv);
	lo = first;
	while (lo < hi)
	{
		uint32		mid = lo + (hi - lo) / 2;

		if (m->versions[mid].vf <= at)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == first)
		return false;
	if (m->versions[lo - 1].vt != ASOF_VT_OPEN && !(at < m->versions[lo - 1].vt))
		return false;
	*sk = m->versions[lo - 1].sk;
	return true;
}

/*
 * Is this another snapshot than the open scan's?  Not only another address:
 * the scan's snapshot may have been freed and another one allocated at the
 * same place (a PL/pgSQL loop takes one per statement), or its command id
 * advanced in place; so compare what decides visibility too.  (The snapshot
 * is not registered: that would forbid UpdateActiveSnapshotCommandId on it.)
 */
static bool
snapshot_changed(AsofCache *c, Snapshot snapshot)
{
	Snapshot	old = &c->snap;

	return snapshot != c->snapshot ||
		snapshot->snapshot_type != old->snapshot_type ||
		snapshot->xmin != old->xmin ||
		snapshot->xmax != old->xmax ||
		snapshot->curcid != old->curcid ||
		snapshot->xcnt != old->xcnt ||
		snapshot->subxcnt != old->subxcnt ||
		snapshot->suboverflowed != old->suboverflowed ||
		snapshot->takenDuringRecovery != old->takenDuringRecovery ||
		(old->xcnt > 0 &&
		 memcmp(snapshot->xip, old->xip, sizeof(TransactionId) * old->xcnt) != 0) ||
		(old->subxcnt > 0 &&
		 memcmp(snapshot->subxip, old->subxip, sizeof(TransactionId) * old->subxcnt) != 0);
}

/*
 * Look up with the scan open (under the active snapshot): in the map when
 * there is one, else by a probe, with the scan's resource owner current;
 * the map is built on the call that reaches the trigger.
 */
static bool
run_probe(AsofCache *c, Datum atv, int64 *sk)
{
	Snapshot	snapshot = GetActiveSnapshot();
	ResourceOwner saved = CurrentResourceOwner;
	volatile bool found = false;

	if (c->open && snapshot_changed(c, snapshot))
		asof_close(c);			/* another snapshot: a new scan, no map */
	if (!c->open)
		asof_open(c, snapshot);

	if (c->map_state == MAP_READY)
		return map_lookup(c, atv, sk);

	c->ncalls++;
	CurrentResourceOwner = c->owner;
	PG_TRY();
	{
		if (c->map_state == MAP_NONE && c->bulk_trigger > 0 && c->ncalls >= c->bulk_trigger)
			build_map(c);
		if (c->map_state == MAP_READY)
			found = map_lookup(c, atv, sk);
		else
		{
			/*
			 * In the scan's context: btree keeps what its first rescan and
			 * gettuple allocate (the index-only tuple workspace, the killed
			 * items array) for the life of the scan, and callcxt is reset
			 * before every call (valgrind: invalid writes after free).
			 */
			MemoryContext oldcxt = MemoryContextSwitchTo(c->opencxt);

			found = probe(c, atv, sk);
			MemoryContextSwitchTo(oldcxt);
		}
	}
	PG_FINALLY();
	{
		CurrentResourceOwner = saved;
	}
	PG_END_TRY();
	return found;
}

/* "(a, b)=(1, x)" for the missing-version error */
static char *
describe_key(AsofCache *c, Datum *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < c->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "", quote_identifier(c->keys[i].colname));
	appendStringInfoString(&buf, ")=(");
	for (int i = 0; i < c->nkeys; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 c->keys[i].argtype == UNKNOWNOID ? DatumGetCString(values[i]) :
						 OidOutputFunctionCall(c->keys[i].argoutfn, values[i]));
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

Datum
scd2_asof(PG_FUNCTION_ARGS)
{
	AsofCache  *c = (AsofCache *) fcinfo->flinfo->fn_extra;
	Oid			relid;
	TimestampTz at;
	Datum		values[INDEX_MAX_KEYS];
	Datum		atv;
	int64		sk = 0;
	bool		found;
	MemoryContext oldcxt;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	relid = PG_GETARG_OID(0);

	/* (re)build the cache on first call, another dimension, or after DDL */
	if (c == NULL || c->relid != relid || c->lxid != SCD2_MY_LXID ||
		c->cid != GetCurrentCommandId(false))
	{
		c = build_cache(fcinfo, c, relid);
		fcinfo->flinfo->fn_extra = c;
	}

	if (PG_ARGISNULL(1))
		PG_RETURN_NULL();
	at = PG_GETARG_TIMESTAMPTZ(1);

	MemoryContextReset(c->callcxt);
	oldcxt = MemoryContextSwitchTo(c->callcxt);

	if (c->variadic_array)
	{
		ArrayType  *arr;
		bool	   *nulls;
		int			n;

		if (PG_ARGISNULL(2))
		{
			MemoryContextSwitchTo(oldcxt);
			PG_RETURN_NULL();
		}
		arr = PG_GETARG_ARRAYTYPE_P(2);
		if (ARR_NDIM(arr) > 1)
			ereport(ERROR,
					(errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
					 errmsg("VARIADIC argument of scd2.asof must be a one-dimensional array")));
		{
			Datum	   *elems;

			deconstruct_array(arr, ARR_ELEMTYPE(arr), c->elmlen, c->elmbyval, c->elmalign,
							  &elems, &nulls, &n);
			if (n != c->nkeys)
				wrong_key_count(c, n);
			for (int i = 0; i < n; i++)
			{
				if (nulls[i])
				{
					MemoryContextSwitchTo(oldcxt);
					PG_RETURN_NULL();
				}
				values[i] = elems[i];
			}
		}
	}
	else
	{
		for (int i = 0; i < c->nkeys; i++)
		{
			if (PG_ARGISNULL(i + 2))
			{
				MemoryContextSwitchTo(oldcxt);
				PG_RETURN_NULL();
			}
			values[i] = PG_GETARG_DATUM(i + 2);
		}
	}

	for (int i = 0; i < c->nkeys; i++)
		c->scankeys[i].sk_argument = convert_key(&c->keys[i], values[i]);
	atv = convert_at(c, at);
	c->scankeys[c->nkeys].sk_argument = atv;

	found = run_probe(c, atv, &sk);

	if (!found && scd2_asof_on_missing == SCD2_ASOF_MISSING_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_NO_DATA_FOUND),
				 errmsg("no version of key %s in dimension \"%s\" is valid at %s",
						describe_key(c, values), c->relname,
						DatumGetCString(DirectFunctionCall1(timestamptz_out,
															TimestampTzGetDatum(at)))),
				 errhint("Set scd2.asof_on_missing to 'null' to get NULL for missing versions.")));

	MemoryContextSwitchTo(oldcxt);
	if (!found)
		PG_RETURN_NULL();
	PG_RETURN_INT64(sk);
}
