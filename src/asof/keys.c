/*
 * keys.c -- the scan keys of scd2.asof: how each business key
 * argument is compared with its index column (as is, a cross-type
 * operator, an implicit cast, an untyped literal's input function) and
 * valid_from <= at.
 */
#include "postgres.h"

#include "fmgr.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "scd2.h"
#include "asof/asof.h"


/* Error for a call with the wrong number of key values. */
void
scd2_asof_wrong_key_count(AsofCache *c, int given)
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
 * How a key argument of type k->argtype is compared with its column: as
 * is, through a cross-type operator of the index's operator family (then
 * returned, with *subtype the argument's type), through the column type's
 * input function (an untyped literal) or an implicit cast; anything else
 * is an error naming the column.  Returns InvalidOid when the family's
 * own equality applies.
 */
static Oid
choose_conversion(AsofCache *c, AsofKey *k, Oid opfamily, Oid opcintype, Oid *subtype)
{
	Oid			argtype = k->argtype;
	Oid			eqop = InvalidOid;

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
		*subtype = getBaseType(argtype);
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

	return eqop;
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
	eqop = choose_conversion(c, k, opfamily, opcintype, &subtype);

	if (!OidIsValid(eqop))
		eqop = get_opfamily_member(opfamily, opcintype, opcintype, BTEqualStrategyNumber);
	if (!OidIsValid(eqop))
		elog(ERROR, "missing equality operator for types %u and %u in operator family %u",
			 opcintype, subtype, opfamily);

	getTypeOutputInfo(argtype == UNKNOWNOID ? CSTRINGOID : argtype, &k->argoutfn, &isvarlena);

	{
		MemoryContext oldcxt = MemoryContextSwitchTo(c->cxt);

		ScanKeyEntryInitialize(&c->scankeys[i], 0, i + 1, BTEqualStrategyNumber,
							   subtype, index->rd_indcollation[i],
							   get_opcode(eqop), (Datum) 0);
		MemoryContextSwitchTo(oldcxt);
	}
}

/* The scan keys of the key arguments (VARIADIC array or one per column). */
void
scd2_asof_setup_key_args(AsofCache *c, FunctionCallInfo fcinfo, Relation index)
{
	int			nargs = PG_NARGS() - 2;

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
		for (int i = 0; i < c->nkeys; i++)
			setup_key(c, index, i, elemtype);
	}
	else
	{
		if (nargs != c->nkeys)
			scd2_asof_wrong_key_count(c, nargs);
		for (int i = 0; i < c->nkeys; i++)
		{
			Oid			argtype = get_fn_expr_argtype(fcinfo->flinfo, i + 2);

			if (!OidIsValid(argtype))
				elog(ERROR, "could not determine the type of business key argument %d", i + 1);
			setup_key(c, index, i, argtype);
		}
	}
}

/* The scan keys of key values of types keytypes[nkeys] (a caller in C). */
void
scd2_asof_setup_key_types(AsofCache *c, Relation index, int nkeys, const Oid *keytypes)
{
	if (nkeys != c->nkeys)
		scd2_asof_wrong_key_count(c, nkeys);
	for (int i = 0; i < c->nkeys; i++)
		setup_key(c, index, i, keytypes[i]);
}

/* The last scan key: valid_from <= at, walked from the latest start. */
void
scd2_asof_setup_valid_from_key(AsofCache *c, Relation index)
{
	Oid			vfopfamily = index->rd_opfamily[c->nkeys];
	Oid			vfopcintype = index->rd_opcintype[c->nkeys];
	Oid			leop;
	MemoryContext oldcxt;

	if (vfopcintype != c->vftype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("as-of index of dimension \"%s\" uses an unexpected operator class for valid_from",
						c->relname),
				 errhint("Run scd2.register again to recreate the index with the default operator class.")));
	leop = get_opfamily_member(vfopfamily, vfopcintype, vfopcintype, BTLessEqualStrategyNumber);
	if (!OidIsValid(leop))
		elog(ERROR, "missing <= operator for type %u in operator family %u", vfopcintype, vfopfamily);
	oldcxt = MemoryContextSwitchTo(c->cxt);
	ScanKeyEntryInitialize(&c->scankeys[c->nkeys], 0, c->nkeys + 1, BTLessEqualStrategyNumber,
						   vfopcintype, index->rd_indcollation[c->nkeys],
						   get_opcode(leop), (Datum) 0);
	MemoryContextSwitchTo(oldcxt);
	c->direction = (index->rd_indoption[c->nkeys] & INDOPTION_DESC) ?
		ForwardScanDirection : BackwardScanDirection;
}
