/*
 * trust.c -- whose objects a dimension's owner may run or depend on
 * (docs/SECURITY.md, "The three roles of a load").
 *
 * A load runs as the dimension's owner.  What it reads of the staging
 * relation -- a table or view of any role, passed by any caller -- must not
 * make another role's code run with the owner's rights, and a schema
 * change must not make the dimension depend on another role's objects.
 * An object is trusted when it is built in (an OID below
 * FirstNormalObjectId) or its owner is a superuser or a role with the
 * dimension owner's privileges (its owner, or a member of it): code of such
 * a role running as the owner gains nothing its author could not do
 * already.  Everything else is refused, naming the column, the object, its
 * owner and the fix.
 */
#include "scd2.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "catalog/registry.h"
#include "common/common.h"

/* An object that is not trusted: its kind, its name, its owner. */
typedef struct Untrusted
{
	const char *kind;			/* "type", "domain", "cast function", "collation" */
	char	   *name;
	Oid			owner;
} Untrusted;

/*
 * Code of role may run as owner: role is a superuser, or has owner's
 * privileges (could already act as owner).
 */
static bool
role_trusted(Oid role, Oid owner)
{
	return superuser_arg(role) || has_privs_of_role(role, owner);
}

static bool
untrusted(Untrusted *u, const char *kind, char *name, Oid objowner, Oid owner)
{
	if (role_trusted(objowner, owner))
		return false;
	u->kind = kind;
	u->name = name;
	u->owner = objowner;
	return true;
}

/*
 * A type not trusted, or one it is made of: a domain's base type, an
 * array's element type, a composite type's attribute types, a range's
 * subtype, a multirange's range.
 */
static bool
untrusted_type(Oid typid, Oid owner, Untrusted *u)
{
	HeapTuple	tup;
	Form_pg_type typ;
	char		typtype;
	Oid			typowner;
	Oid			part = InvalidOid;
	bool		array;

	check_stack_depth();
	if (typid < FirstNormalObjectId)
		return false;
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	typ = (Form_pg_type) GETSTRUCT(tup);
	typtype = typ->typtype;
	typowner = typ->typowner;
	array = IsTrueArrayType(typ);
	if (array)
		part = typ->typelem;
	else if (typtype == TYPTYPE_DOMAIN)
		part = typ->typbasetype;
	ReleaseSysCache(tup);

	if (untrusted(u, typtype == TYPTYPE_DOMAIN ? "domain" : "type",
				  format_type_be_qualified(typid), typowner, owner))
		return true;
	if (OidIsValid(part))
		return untrusted_type(part, owner, u);
	if (typtype == TYPTYPE_RANGE)
		return untrusted_type(get_range_subtype(typid), owner, u);
	if (typtype == TYPTYPE_MULTIRANGE)
		return untrusted_type(get_multirange_range(typid), owner, u);
	if (typtype == TYPTYPE_COMPOSITE)
	{
		TupleDesc	desc = lookup_rowtype_tupdesc(typid, -1);
		bool		found = false;

		for (int i = 0; i < desc->natts && !found; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);

			if (!att->attisdropped)
				found = untrusted_type(att->atttypid, owner, u);
		}
		ReleaseTupleDesc(desc);
		return found;
	}
	return false;
}

static bool
untrusted_collation(Oid collid, Oid owner, Untrusted *u)
{
	HeapTuple	tup;
	Form_pg_collation coll;
	bool		found;

	if (!OidIsValid(collid) || collid < FirstNormalObjectId)
		return false;
	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collid);
	coll = (Form_pg_collation) GETSTRUCT(tup);
	found = untrusted(u, "collation",
					  quote_qualified_identifier(get_namespace_name(coll->collnamespace),
												 NameStr(coll->collname)),
					  coll->collowner, owner);
	ReleaseSysCache(tup);
	return found;
}

/*
 * The function a conversion from srctype to dsttype calls (a cast's
 * function; for arrays, their elements'), when not trusted.
 */
static bool
untrusted_conversion(Oid srctype, Oid dsttype, CoercionContext ctx, Oid owner, Untrusted *u)
{
	Oid			funcid = InvalidOid;
	CoercionPathType path;

	check_stack_depth();
	srctype = getBaseType(srctype);
	path = find_coercion_pathway(dsttype, srctype, ctx, &funcid);
	if (path == COERCION_PATH_FUNC && OidIsValid(funcid) && funcid >= FirstNormalObjectId)
	{
		HeapTuple	tup = SearchSysCache1(PROCOID, ObjectIdGetDatum(funcid));
		Oid			proowner;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for function %u", funcid);
		proowner = ((Form_pg_proc) GETSTRUCT(tup))->proowner;
		ReleaseSysCache(tup);
		return untrusted(u, "cast function", format_procedure_qualified(funcid), proowner, owner);
	}
	if (path == COERCION_PATH_ARRAYCOERCE)
	{
		Oid			srcelem = get_element_type(srctype);
		Oid			dstelem = get_element_type(getBaseType(dsttype));

		if (OidIsValid(srcelem) && OidIsValid(dstelem))
			return untrusted_conversion(srcelem, dstelem, ctx, owner, u);
	}
	return false;
}

/*
 * Refuse a staging view whose owner is not trusted by the dimension's
 * owner: the load reads it as that owner, so the functions the view calls
 * (an ordinary view's as much as a security_invoker one's: PostgreSQL
 * checks a view's table privileges as its owner but runs its functions as
 * the reader) would run with the owner's rights.
 */
void
scd2_trust_staging_relation(Oid stg_oid, Oid owner, const char *dim_name)
{
	Oid			relowner;
	char	   *stg_name;

	if (get_rel_relkind(stg_oid) != RELKIND_VIEW)
		return;
	relowner = scd2_relation_owner(stg_oid);
	if (role_trusted(relowner, owner))
		return;
	stg_name = scd2_relation_display_name(stg_oid);
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("staging view %s belongs to role \"%s\", not to the owner of dimension %s",
					stg_name, GetUserNameFromId(relowner, false), dim_name),
			 errdetail("A load reads the staging relation as role \"%s\", the dimension's owner, so the functions view %s calls would run with that role's rights. Nothing was loaded.",
					   GetUserNameFromId(owner, false), stg_name),
			 errhint("Load from a table, or from a view owned by role \"%s\" (or a member of it, or a superuser).",
					 GetUserNameFromId(owner, false))));
}

/*
 * Refuse a staging column the load reads as the dimension's owner when its
 * type (or what that type is made of), its collation, or the function
 * converting it to the dimension column's type and back belongs to a role
 * not trusted by the owner.  A column of the dimension column's own type
 * and collation passes: the dimension depends on them already.
 */
void
scd2_trust_staging_column(Oid owner, const char *stg_name, const char *dim_name,
						  const char *column, Oid stgtype, Oid stgcoll, Oid dimtype, Oid dimcoll)
{
	Untrusted	u;

	if (!((stgtype != dimtype &&
		   (untrusted_type(stgtype, owner, &u) ||
			untrusted_conversion(stgtype, dimtype, COERCION_ASSIGNMENT, owner, &u) ||
			untrusted_conversion(dimtype, stgtype, COERCION_EXPLICIT, owner, &u))) ||
		  (stgcoll != dimcoll && untrusted_collation(stgcoll, owner, &u))))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("staging column \"%s\" of %s would run code of role \"%s\" as the owner of dimension %s",
					column, stg_name, GetUserNameFromId(u.owner, false), dim_name),
			 errdetail("The column's %s %s belongs to role \"%s\"; a load reads and converts the column to the dimension's type %s as role \"%s\". Nothing was loaded.",
					   u.kind, u.name, GetUserNameFromId(u.owner, false),
					   format_type_be(dimtype), GetUserNameFromId(owner, false)),
			 errhint("Give the staging column the dimension column's type and collation, or built-in ones; or have role \"%s\" (or a member of it, or a superuser) own %s %s.",
					 GetUserNameFromId(owner, false), u.kind, u.name)));
}

/*
 * Refuse a column a schema change would add to the dimension, or retype,
 * when its type (or what the type is made of) or collation belongs to a
 * role not trusted by the dimension's owner: the dimension would depend on
 * it (DROP ... CASCADE by that role drops the column; a domain's new CHECK
 * blocks every load) and its code would run as the owner.
 */
void
scd2_trust_new_column(Oid owner, const char *dim_name, const char *stg_name,
					  const char *column, Oid type, Oid coll)
{
	Untrusted	u;

	if (!untrusted_type(type, owner, &u) && !untrusted_collation(coll, owner, &u))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("cannot give dimension %s column \"%s\" of %s %s, which belongs to role \"%s\"",
					dim_name, column, u.kind, u.name, GetUserNameFromId(u.owner, false)),
			 errdetail("The dimension would depend on an object of role \"%s\", which could then drop the column with it or run code as role \"%s\" in every load; a schema change adds only built-in types and collations and those of the dimension's owner (or a member of it, or a superuser). Staging table %s; nothing was loaded.",
					   GetUserNameFromId(u.owner, false), GetUserNameFromId(owner, false),
					   stg_name),
			 errhint("Give the staging column a built-in type and collation, or add the column to the dimension yourself (ALTER TABLE ... ADD COLUMN) and register the dimension again.")));
}

/*
 * Every column of the staging relation, for a statement that reads them
 * all (apply_snapshots compares whole rows and copies them into its work
 * tables; on Citus a load copies the staging table): a column of the type
 * and collation of the dimension's column of that name passes, any other
 * must have a trusted type and collation.
 */
void
scd2_trust_staging_columns(Oid stg_oid, Oid dim_oid, Oid owner, const char *stg_name,
						   const char *dim_name)
{
	Relation	rel = relation_open(stg_oid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		AttrNumber	dimatt;
		Oid			dimtype = InvalidOid;
		int32		dimtypmod;
		Oid			dimcoll = InvalidOid;
		Untrusted	u;

		if (att->attisdropped)
			continue;
		dimatt = get_attnum(dim_oid, NameStr(att->attname));
		if (dimatt != InvalidAttrNumber)
			get_atttypetypmodcoll(dim_oid, dimatt, &dimtype, &dimtypmod, &dimcoll);
		if (OidIsValid(dimtype))
		{
			scd2_trust_staging_column(owner, stg_name, dim_name, NameStr(att->attname),
									  att->atttypid, att->attcollation, dimtype, dimcoll);
			continue;
		}
		if (!untrusted_type(att->atttypid, owner, &u) &&
			!untrusted_collation(att->attcollation, owner, &u))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("staging column \"%s\" of %s would run code of role \"%s\" as the owner of dimension %s",
						NameStr(att->attname), stg_name, GetUserNameFromId(u.owner, false), dim_name),
				 errdetail("The column's %s %s belongs to role \"%s\"; the load reads every staging column as role \"%s\". Nothing was loaded.",
						   u.kind, u.name, GetUserNameFromId(u.owner, false),
						   GetUserNameFromId(owner, false)),
				 errhint("Give the staging column a built-in type and collation, or drop it from the staging relation; or have role \"%s\" (or a member of it, or a superuser) own %s %s.",
						 GetUserNameFromId(owner, false), u.kind, u.name)));
	}
	relation_close(rel, AccessShareLock);
}
