/*
 * create_dimension.c -- scd2.create_dimension(dimension, like,
 * business_key, ...): a dimension table shaped after a staging table,
 * created and registered.
 *
 * The work is the PL/pgSQL scd2._create_dimension (sql/scd2--0.1.sql), which
 * runs with search_path pinned and so is given the caller's current schema
 * (where an unqualified name is created) by this entry point.  Its errors
 * -- and those of scd2.register, which it calls -- reach the caller without
 * context lines of scd2's internals (the helper's PL/pgSQL lines and the
 * statements it runs): the caller's own context lines stay.  A syntax or
 * internal error -- a bug of scd2 -- keeps them all.  The helper is called
 * through fmgr, not SQL: it needs no EXECUTE grant to PUBLIC.
 */
#include "scd2.h"

#include "catalog/namespace.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

PG_FUNCTION_INFO_V1(scd2_create_dimension);

#define CREATE_DIMENSION_NARGS 14	/* of scd2.create_dimension; the helper has the schema first */

/*
 * The context line that separates the helper's lines (before it) from the
 * caller's (after it) in an error's context.
 */
#define INTERNAL_MARK "scd2.create_dimension: internal context above"

static void
mark_context(void *arg)
{
	errcontext(INTERNAL_MARK);
}

/*
 * An error's context without the mark: the caller's lines (after it) only,
 * or with internal, the helper's lines too.
 */
static char *
without_mark(const char *context, bool internal)
{
	const char *mark = context ? strstr(context, INTERNAL_MARK) : NULL;
	const char *rest;
	StringInfoData buf;

	if (mark == NULL)
		return context ? pstrdup(context) : NULL;
	rest = mark + strlen(INTERNAL_MARK);
	if (*rest == '\n')
		rest++;
	initStringInfo(&buf);
	if (internal)
		appendBinaryStringInfo(&buf, context, mark - context);
	appendStringInfoString(&buf, rest);
	if (buf.len > 0 && buf.data[buf.len - 1] == '\n')
		buf.data[--buf.len] = '\0';
	return buf.len > 0 ? buf.data : NULL;
}

/* scd2._create_dimension(name, text, regclass, name[], ..., boolean) */
static Oid
helper_oid(Oid self)
{
	Oid			argtypes[CREATE_DIMENSION_NARGS + 1];
	HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(self));
	Form_pg_proc proc;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for function %u", self);
	proc = (Form_pg_proc) GETSTRUCT(tup);
	argtypes[0] = NAMEOID;
	memcpy(argtypes + 1, proc->proargtypes.values, CREATE_DIMENSION_NARGS * sizeof(Oid));
	ReleaseSysCache(tup);
	return LookupFuncName(list_make2(makeString(get_namespace_name(get_func_namespace(self))),
									 makeString("_create_dimension")),
						  CREATE_DIMENSION_NARGS + 1, argtypes, false);
}

Datum
scd2_create_dimension(PG_FUNCTION_ARGS)
{
	LOCAL_FCINFO(helper, CREATE_DIMENSION_NARGS + 1);
	FmgrInfo	flinfo;
	List	   *search_path = fetch_search_path(false);
	char	   *schema = search_path != NIL ? get_namespace_name(linitial_oid(search_path)) : NULL;
	MemoryContext cxt = CurrentMemoryContext;
	ErrorContextCallback errcb;
	volatile Datum result = (Datum) 0;

	if (PG_NARGS() != CREATE_DIMENSION_NARGS)
		elog(ERROR, "scd2.create_dimension: %d arguments, expected %d", PG_NARGS(), CREATE_DIMENSION_NARGS);
	fmgr_info(helper_oid(fcinfo->flinfo->fn_oid), &flinfo);
	InitFunctionCallInfoData(*helper, &flinfo, CREATE_DIMENSION_NARGS + 1, PG_GET_COLLATION(), NULL, NULL);
	/* the caller's current schema, as current_schema() gives it */
	helper->args[0].value = schema ? DirectFunctionCall1(namein, CStringGetDatum(schema)) : (Datum) 0;
	helper->args[0].isnull = (schema == NULL);
	for (int i = 0; i < CREATE_DIMENSION_NARGS; i++)
		helper->args[i + 1] = fcinfo->args[i];

	errcb.callback = mark_context;
	errcb.arg = NULL;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	PG_TRY();
	{
		result = FunctionCallInvoke(helper);
	}
	PG_CATCH();
	{
		ErrorData  *edata;
		bool		bug;

		error_context_stack = errcb.previous;
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		bug = ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_INTERNAL_ERROR ||
			edata->sqlerrcode == ERRCODE_SYNTAX_ERROR;
		edata->context = without_mark(edata->context, bug);
		if (!bug)
		{
			/* nor a statement of the helper as "QUERY:" */
			edata->internalquery = NULL;
			edata->internalpos = 0;
		}
		ReThrowError(edata);
	}
	PG_END_TRY();
	error_context_stack = errcb.previous;

	if (helper->isnull)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}
