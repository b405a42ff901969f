/*
 * shape.c -- the registered shape of a dimension (the columns scd2 relies
 * on, with the types they had when it was registered) held against the
 * table as it is now; every reader of a registration calls it.
 */
#include "scd2.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "catalog/registry.h"
/*
 * The registered shape (scd2.dimensions.shape_*: the business key,
 * validity, is_current and surrogate key columns with the types they had
 * when the dimension was registered) must still be the dimension's: a
 * column dropped, or retyped (valid_to turned into a date, the key into
 * text, ...), makes loads and scd2.asof refuse until the dimension is
 * registered again -- register checks the new shape and rebuilds the
 * indexes.  columns is text[], types oid[] (NULL: the column was missing
 * already), typmods int4[].
 */
void
scd2_check_registered_shape(Oid relid, const char *dim_name, Datum columns,
							Datum types, Datum typmods)
{
	Datum	   *names;
	Datum	   *typs;
	Datum	   *mods;
	bool	   *namenulls;
	bool	   *typnulls;
	bool	   *modnulls;
	int			n,
				ntyp,
				nmod;

	deconstruct_array(DatumGetArrayTypeP(columns), TEXTOID, -1, false, TYPALIGN_INT,
					  &names, &namenulls, &n);
	deconstruct_array(DatumGetArrayTypeP(types), OIDOID, sizeof(Oid), true, TYPALIGN_INT,
					  &typs, &typnulls, &ntyp);
	deconstruct_array(DatumGetArrayTypeP(typmods), INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &mods, &modnulls, &nmod);
	if (ntyp != n || nmod != n)
		elog(ERROR, "scd2: the registered shape of %s is inconsistent", dim_name);

	for (int i = 0; i < n; i++)
	{
		char	   *name;
		AttrNumber	attnum;
		Oid			typid;
		int32		typmod;
		Oid			collid;

		if (namenulls[i])
			continue;
		name = TextDatumGetCString(names[i]);
		attnum = get_attnum(relid, name);
		if (attnum == InvalidAttrNumber || attnum < 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dimension %s has changed since it was registered", dim_name),
					 errdetail("Column \"%s\", part of its registration, no longer exists.", name),
					 errhint("Register the dimension again with scd2.register(), which checks its new shape.")));
		if (typnulls[i] || modnulls[i])
			continue;			/* missing when registered: nothing to compare */
		get_atttypetypmodcoll(relid, attnum, &typid, &typmod, &collid);
		if (typid != DatumGetObjectId(typs[i]) || typmod != DatumGetInt32(mods[i]))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("dimension %s has changed since it was registered", dim_name),
					 errdetail("Column \"%s\" had type %s when the dimension was registered and has type %s now.",
							   name,
							   format_type_extended(DatumGetObjectId(typs[i]), DatumGetInt32(mods[i]),
													FORMAT_TYPE_TYPEMOD_GIVEN),
							   format_type_extended(typid, typmod, FORMAT_TYPE_TYPEMOD_GIVEN)),
					 errhint("Register the dimension again with scd2.register(), which checks its new shape.")));
	}
}
