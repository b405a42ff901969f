/*
 * detect.c -- Citus detection from the catalog, in one place (the load's
 * write step, the as-of lookup): whether the citus extension is installed
 * in this database, and how a relation is distributed.  Reads
 * pg_catalog.pg_dist_partition directly, by column name; needs no Citus
 * header or library, and reads nothing when Citus is not installed.  (The
 * one Citus function scd2 calls, shard_name(), is shards.c's, for
 * the as-of lookup's shard, and only where Citus is installed.)
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_namespace.h"
#include "commands/extension.h"
#include "nodes/primnodes.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus/citus.h"

/* The citus extension exists in this database. */
bool
scd2_citus_installed(void)
{
	return OidIsValid(get_extension_oid("citus", true));
}

/* A column of pg_dist_partition by name (0: this Citus has no such column). */
static AttrNumber
dist_attnum(Relation rel, const char *name)
{
	TupleDesc	desc = RelationGetDescr(rel);

	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped &&
			strcmp(NameStr(TupleDescAttr(desc, i)->attname), name) == 0)
			return (AttrNumber) (i + 1);
	return 0;
}

/* The distribution column of a hash-distributed table: partkey is a Var. */
static AttrNumber
partkey_attnum(Datum partkey)
{
	Node	   *node = stringToNode(TextDatumGetCString(partkey));

	if (node == NULL || !IsA(node, Var))
		elog(ERROR, "scd2: unexpected pg_dist_partition.partkey");
	return ((Var *) node)->varattno;
}

/*
 * How relid is distributed; fills *out when given.  SCD2_CITUS_NONE
 * without the citus extension or for a relation Citus does not manage.
 */
Scd2CitusKind
scd2_citus_table(Oid relid, Scd2CitusTable *out)
{
	Scd2CitusTable t = {SCD2_CITUS_NONE, 0, 0, 0, 0};
	Oid			catoid;

	if (scd2_citus_installed() &&
		OidIsValid(catoid = get_relname_relid("pg_dist_partition", PG_CATALOG_NAMESPACE)))
	{
		Relation	rel = table_open(catoid, AccessShareLock);
		AttrNumber	a_rel = dist_attnum(rel, "logicalrelid");
		AttrNumber	a_method = dist_attnum(rel, "partmethod");
		AttrNumber	a_key = dist_attnum(rel, "partkey");
		AttrNumber	a_coloc = dist_attnum(rel, "colocationid");
		AttrNumber	a_rep = dist_attnum(rel, "repmodel");
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tup;

		if (a_rel == 0 || a_method == 0 || a_key == 0 || a_rep == 0)
			elog(ERROR, "scd2: pg_dist_partition lacks a column scd2 reads");
		ScanKeyInit(&key, a_rel, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
		if (HeapTupleIsValid(tup = systable_getnext(scan)))
		{
			TupleDesc	desc = RelationGetDescr(rel);
			bool		isnull;
			Datum		d;

			t.partmethod = DatumGetChar(heap_getattr(tup, a_method, desc, &isnull));
			t.repmodel = DatumGetChar(heap_getattr(tup, a_rep, desc, &isnull));
			if (a_coloc != 0)
			{
				d = heap_getattr(tup, a_coloc, desc, &isnull);
				t.colocationid = isnull ? 0 : DatumGetUInt32(d);
			}
			if (t.partmethod == 'h')
			{
				d = heap_getattr(tup, a_key, desc, &isnull);
				if (isnull)
					elog(ERROR, "scd2: hash-distributed table %u has no partkey", relid);
				t.distcol = partkey_attnum(d);
				t.kind = SCD2_CITUS_DISTRIBUTED;
			}
			else if (t.partmethod == 'n' && t.repmodel == 't')
				t.kind = SCD2_CITUS_REFERENCE;
			else
				t.kind = SCD2_CITUS_OTHER;
		}
		systable_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	if (out != NULL)
		*out = t;
	return t.kind;
}

/* What the table is, in Citus's words, for messages. */
const char *
scd2_citus_kind_name(const Scd2CitusTable *t)
{
	switch (t->kind)
	{
		case SCD2_CITUS_NONE:
			return "local";
		case SCD2_CITUS_DISTRIBUTED:
			return "distributed";
		case SCD2_CITUS_REFERENCE:
			return "reference";
		case SCD2_CITUS_OTHER:
			break;
	}
	switch (t->partmethod)
	{
		case 'a':
			return "append-distributed";
		case 'r':
			return "range-distributed";
		case 'n':
			return t->colocationid != 0 ? "single-shard distributed" : "Citus local";
	}
	return "Citus";
}
