/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		  Access to source_writes.source_tables, one row per source table
 *
 * The table is an ordinary heap owned by the extension.  It is read and
 * written the way PostgreSQL treats its own catalogs (systable scans,
 * CatalogTupleInsert and friends): no SPI, no privilege checks on behalf of
 * the user, and lookups with SnapshotSelf, which takes no SSI predicate
 * locks, so that SERIALIZABLE users never conflict on our bookkeeping.
 *
 * IDENTIFICATION
 *		  src/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "source_writes.h"

#define SW_CATALOG_TABLE	"source_tables"
#define SW_CATALOG_INDEX	"source_tables_pkey"

/* columns of source_writes.source_tables */
#define Anum_st_relid		1
#define Anum_st_kind		2
#define Anum_st_current_rel 3
#define Anum_st_history_rel 4
#define Anum_st_upper		5
#define Anum_st_since		6
#define Natts_st			6

/*
 * The OID of a relation in schema source_writes, or InvalidOid when the
 * extension is not (or no longer) installed.
 */
static Oid
sw_catalog_relation(const char *name)
{
	Oid			nsp = get_namespace_oid(SW_SCHEMA, true);

	if (!OidIsValid(nsp))
		return InvalidOid;
	return get_relname_relid(name, nsp);
}

static Oid
sw_catalog_relation_required(const char *name)
{
	Oid			relid = sw_catalog_relation(name);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"source_writes\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION source_writes.")));
	return relid;
}

/*
 * Is the catalog there?  (It is not while the extension is being dropped.)
 */
bool
sw_catalog_exists(void)
{
	return OidIsValid(sw_catalog_relation(SW_CATALOG_TABLE));
}

static void
entry_from_tuple(HeapTuple tuple, TupleDesc desc, SwCatalogEntry *entry)
{
	Datum		values[Natts_st];
	bool		nulls[Natts_st];

	heap_deform_tuple(tuple, desc, values, nulls);
	entry->relid = DatumGetObjectId(values[Anum_st_relid - 1]);
	entry->kind = strcmp(TextDatumGetCString(values[Anum_st_kind - 1]), "webhook") == 0
		? SW_KIND_WEBHOOK : SW_KIND_KAFKA;
	entry->current_rel = DatumGetObjectId(values[Anum_st_current_rel - 1]);
	entry->history_rel = DatumGetObjectId(values[Anum_st_history_rel - 1]);
	entry->upper = DatumGetInt64(values[Anum_st_upper - 1]);
	entry->since = DatumGetInt64(values[Anum_st_since - 1]);
}

/*
 * Find the catalog row of a source table.  Returns false if there is none.
 */
bool
sw_catalog_lookup(Oid relid, SwCatalogEntry *entry)
{
	Oid			catalog = sw_catalog_relation(SW_CATALOG_TABLE);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		found = false;

	if (!OidIsValid(catalog))
		return false;

	rel = table_open(catalog, AccessShareLock);
	ScanKeyInit(&key, Anum_st_relid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, sw_catalog_relation_required(SW_CATALOG_INDEX),
							  true, SnapshotSelf, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		entry_from_tuple(tuple, RelationGetDescr(rel), entry);
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * Add the catalog row of a new source table.
 */
void
sw_catalog_insert(const SwCatalogEntry *entry)
{
	Relation	rel = table_open(sw_catalog_relation_required(SW_CATALOG_TABLE),
								 RowExclusiveLock);
	Datum		values[Natts_st];
	bool		nulls[Natts_st] = {0};
	HeapTuple	tuple;

	values[Anum_st_relid - 1] = ObjectIdGetDatum(entry->relid);
	values[Anum_st_kind - 1] =
		CStringGetTextDatum(entry->kind == SW_KIND_WEBHOOK ? "webhook" : "kafka");
	values[Anum_st_current_rel - 1] = ObjectIdGetDatum(entry->current_rel);
	values[Anum_st_history_rel - 1] = ObjectIdGetDatum(entry->history_rel);
	values[Anum_st_upper - 1] = Int64GetDatum(entry->upper);
	values[Anum_st_since - 1] = Int64GetDatum(entry->since);

	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
}

/*
 * Remove the catalog row of a dropped source table, if there is one.
 */
void
sw_catalog_delete(Oid relid)
{
	Oid			catalog = sw_catalog_relation(SW_CATALOG_TABLE);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	if (!OidIsValid(catalog))
		return;

	rel = table_open(catalog, RowExclusiveLock);
	ScanKeyInit(&key, Anum_st_relid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, sw_catalog_relation_required(SW_CATALOG_INDEX),
							  true, SnapshotSelf, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		CatalogTupleDelete(rel, &tuple->t_self);
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * The catalog rows of the source tables on a server.
 */
List *
sw_catalog_sources_of_server(Oid serverid)
{
	Oid			catalog = sw_catalog_relation(SW_CATALOG_TABLE);
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *result = NIL;

	if (!OidIsValid(catalog))
		return NIL;

	rel = table_open(catalog, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, SnapshotSelf, 0, NULL);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		SwCatalogEntry *entry = palloc(sizeof(SwCatalogEntry));

		entry_from_tuple(tuple, RelationGetDescr(rel), entry);
		if (GetForeignTable(entry->relid)->serverid == serverid)
			result = lappend(result, entry);
		else
			pfree(entry);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}
