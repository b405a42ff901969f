/*
 * not_distinct.c -- scd2._not_distinct(VARIADIC "any"): whether every
 * pair of its arguments, (a1, b1), (a2, b2), ..., is NOT DISTINCT by its
 * type's default equality -- the comparison of a staged row's tracked or
 * Type 1 columns with its key's current version that every load makes
 * (sqlbuild.c, scd2_append_eq_positional).
 *
 * It gives what the SQL it replaces gives, the AND of
 *   CASE WHEN a IS NULL OR b IS NULL THEN a IS NULL AND b IS NULL
 *        ELSE a = b END
 * over the pairs, with = the type's default equality operator (the type
 * cache's, as catalog/config.c records it) under b's collation: false when a pair
 * differs, else NULL when an operator gave NULL, else true.  Two values
 * with the same bytes are equal without a call of the operator: an
 * equality operator of a btree or hash operator class is reflexive (1.0
 * and 1.00, 0 and -0, or 'a' and 'A' under a case-insensitive collation
 * differ in their bytes, so the operator still decides those).
 *
 * Why a function: the CASE form costs ~75-85 ms for the six columns of a
 * 200k-row batch (PostgreSQL 15, bench/RESULTS.md, issue 27); most of it
 * is the expression steps around each operator call, and most staged rows
 * are unchanged, so their values are byte-identical to the version's.
 *
 * It runs inside the statement that calls it, i.e. as the dimension's
 * owner in the load's security-restricted operation; the operators it
 * calls are the ones the SQL form named.  Only columns whose equality
 * function is parallel safe are compared through it (catalog/config.c), so it is
 * PARALLEL SAFE; and no row-typed column, since the SQL form's IS NULL is
 * true of a row whose fields are all NULL, which this NULL test is not.
 */
#include "scd2.h"

#include "fmgr.h"
#include "nodes/nodeFuncs.h"
#include "nodes/pg_list.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

PG_FUNCTION_INFO_V1(scd2_not_distinct);

/* One pair's type: how to compare its values, looked up once per call site. */
typedef struct PairType
{
	int16		typlen;
	bool		typbyval;
	Oid			collation;
	FmgrInfo	eq;
} PairType;

/*
 * The pairs' types, from the call's expression (fn_expr): both sides of a
 * pair must be of one type, with an equality operator.
 */
static PairType *
pair_types(FunctionCallInfo fcinfo, int npairs)
{
	FmgrInfo   *flinfo = fcinfo->flinfo;
	List	   *args;
	PairType   *types;

	if (flinfo->fn_expr == NULL || !IsA(flinfo->fn_expr, FuncExpr))
		elog(ERROR, "scd2._not_distinct: called without its expression");
	args = ((FuncExpr *) flinfo->fn_expr)->args;
	types = MemoryContextAllocZero(flinfo->fn_mcxt, sizeof(PairType) * npairs);
	for (int i = 0; i < npairs; i++)
	{
		Node	   *a = (Node *) list_nth(args, 2 * i);
		Node	   *b = (Node *) list_nth(args, 2 * i + 1);
		Oid			typid = exprType(b);
		TypeCacheEntry *tc;

		if (getBaseType(exprType(a)) != getBaseType(typid))
			elog(ERROR, "scd2._not_distinct: pair %d compares type %u with type %u",
				 i + 1, exprType(a), typid);
		tc = lookup_type_cache(typid, TYPECACHE_EQ_OPR);
		if (!OidIsValid(tc->eq_opr))
			elog(ERROR, "scd2._not_distinct: type %u of pair %d has no equality operator", typid, i + 1);
		get_typlenbyval(typid, &types[i].typlen, &types[i].typbyval);
		types[i].collation = exprCollation(b);
		fmgr_info_cxt(get_opcode(tc->eq_opr), &types[i].eq, flinfo->fn_mcxt);
	}
	return types;
}

/* a = b by the pair's operator; *isnull when it gave NULL. */
static bool
operator_equal(PairType *t, Datum a, Datum b, bool *isnull)
{
	LOCAL_FCINFO(eqinfo, 2);
	Datum		r;

	InitFunctionCallInfoData(*eqinfo, &t->eq, 2, t->collation, NULL, NULL);
	eqinfo->args[0].value = a;
	eqinfo->args[0].isnull = false;
	eqinfo->args[1].value = b;
	eqinfo->args[1].isnull = false;
	r = FunctionCallInvoke(eqinfo);
	*isnull = eqinfo->isnull;
	return !eqinfo->isnull && DatumGetBool(r);
}

Datum
scd2_not_distinct(PG_FUNCTION_ARGS)
{
	int			nargs = PG_NARGS();
	int			npairs = nargs / 2;
	PairType   *types = (PairType *) fcinfo->flinfo->fn_extra;
	bool		saw_null = false;

	if (nargs % 2 != 0 || get_fn_expr_variadic(fcinfo->flinfo))
		elog(ERROR, "scd2._not_distinct: takes pairs of values, not %d arguments", nargs);
	if (types == NULL)
		fcinfo->flinfo->fn_extra = types = pair_types(fcinfo, npairs);

	for (int i = 0; i < npairs; i++)
	{
		bool		anull = PG_ARGISNULL(2 * i);
		bool		bnull = PG_ARGISNULL(2 * i + 1);
		Datum		a = PG_GETARG_DATUM(2 * i);
		Datum		b = PG_GETARG_DATUM(2 * i + 1);
		bool		opnull;

		if (anull || bnull)
		{
			if (anull && bnull)
				continue;
			PG_RETURN_BOOL(false);
		}
		if (datum_image_eq(a, b, types[i].typbyval, types[i].typlen))
			continue;
		if (operator_equal(&types[i], a, b, &opnull))
			continue;
		if (!opnull)
			PG_RETURN_BOOL(false);
		saw_null = true;
	}
	if (saw_null)
		PG_RETURN_NULL();
	PG_RETURN_BOOL(true);
}
