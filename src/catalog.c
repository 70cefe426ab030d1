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
#include "storage/lmgr.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "source_writes.h"

#define SW_CATALOG_TABLE	"source_tables"
#define SW_CATALOG_INDEX	"source_tables_pkey"
#define SW_BATCHES_TABLE	"batches"
#define SW_BATCHES_INDEX	"batches_pkey"

/* columns of source_writes.source_tables */
#define Anum_st_relid		1
#define Anum_st_kind		2
#define Anum_st_current_rel 3
#define Anum_st_history_rel 4
#define Anum_st_upper		5
#define Anum_st_since		6
#define Natts_st			6

/* columns of source_writes.batches */
#define Anum_b_source		1
#define Anum_b_batch		2
#define Anum_b_ts			3
#define Anum_b_origin		4
#define Anum_b_role			5
#define Natts_b				5

static const char *const origin_names[] = {
	[SW_ORIGIN_USER] = "user",
	[SW_ORIGIN_KAFKA] = "kafka",
	[SW_ORIGIN_WEBHOOK] = "webhook",
	[SW_ORIGIN_SYSTEM] = "system"
};

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
 * The catalog row of a source table, or an error if the table has no
 * storage (it was created while our event triggers could not run).
 */
void
sw_catalog_require(Oid relid, SwCatalogEntry *entry)
{
	if (!sw_catalog_lookup(relid, entry))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_TABLE_NOT_FOUND),
				 errmsg("source table \"%s\" has no storage", get_rel_name(relid)),
				 errdetail("Storage is created by the extension's event triggers, which did not run for this table."),
				 errhint("Any ALTER FOREIGN TABLE on it, with the event triggers enabled, creates the storage.")));
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
 * Delete the rows of one of our catalog tables whose first key column is
 * the given OID; nothing when the extension is being dropped.
 */
static void
delete_rows(const char *table, const char *index, Oid key)
{
	Oid			catalog = sw_catalog_relation(table);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;

	if (!OidIsValid(catalog))
		return;

	rel = table_open(catalog, RowExclusiveLock);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(key));
	scan = systable_beginscan(rel, sw_catalog_relation_required(index),
							  true, SnapshotSelf, 1, &skey);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		CatalogTupleDelete(rel, &tuple->t_self);
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * Remove the catalog row of a dropped source table, if there is one.
 */
void
sw_catalog_delete(Oid relid)
{
	StaticAssertStmt(Anum_st_relid == 1, "source_tables is keyed by its first column");
	delete_rows(SW_CATALOG_TABLE, SW_CATALOG_INDEX, relid);
}

/*
 * The catalog rows of all source tables, or of those on one server.
 */
static List *
catalog_entries(Oid serverid)
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
		if (!OidIsValid(serverid) ||
			GetForeignServerIdByRelId(entry->relid) == serverid)
			result = lappend(result, entry);
		else
			pfree(entry);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

List *
sw_catalog_sources_of_server(Oid serverid)
{
	return catalog_entries(serverid);
}

List *
sw_catalog_all_sources(void)
{
	return catalog_entries(InvalidOid);
}

/*
 * Take the lock that serialises the writers of one source (and anything
 * else that moves its frontiers) until the end of the transaction.  It is
 * a lock on the source as an object of our catalog, not on the foreign
 * table, so it conflicts with nothing but itself.
 */
void
sw_catalog_lock_source(Oid relid)
{
	LockDatabaseObject(sw_catalog_relation_required(SW_CATALOG_TABLE), relid, 0,
					   ExclusiveLock);
}

/*
 * Set the frontiers of a source.  The caller holds the source's lock, so
 * the row found with SnapshotSelf is its latest version and nobody else is
 * updating it; it is updated in place of that version, the way PostgreSQL
 * updates its own catalogs, whatever the caller's isolation level.
 */
void
sw_catalog_set_frontiers(Oid relid, int64 since, int64 upper)
{
	Relation	rel = table_open(sw_catalog_relation_required(SW_CATALOG_TABLE),
								 RowExclusiveLock);
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Datum		values[Natts_st] = {0};
	bool		nulls[Natts_st] = {0};
	bool		replace[Natts_st] = {0};

	ScanKeyInit(&key, Anum_st_relid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, sw_catalog_relation_required(SW_CATALOG_INDEX),
							  true, SnapshotSelf, 1, &key);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "source table %u has no catalog row", relid);

	values[Anum_st_upper - 1] = Int64GetDatum(upper);
	values[Anum_st_since - 1] = Int64GetDatum(since);
	replace[Anum_st_upper - 1] = replace[Anum_st_since - 1] = true;
	tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
	CatalogTupleUpdate(rel, &tuple->t_self, tuple);

	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * Record a committed batch of a source: its id (the writing transaction),
 * timestamp, origin and role.
 */
void
sw_catalog_insert_batch(Oid source, int64 batch, int64 ts, SwOrigin origin,
						Oid role)
{
	Relation	rel = table_open(sw_catalog_relation_required(SW_BATCHES_TABLE),
								 RowExclusiveLock);
	Datum		values[Natts_b];
	bool		nulls[Natts_b] = {0};
	HeapTuple	tuple;

	values[Anum_b_source - 1] = ObjectIdGetDatum(source);
	values[Anum_b_batch - 1] = Int64GetDatum(batch);
	values[Anum_b_ts - 1] = Int64GetDatum(ts);
	values[Anum_b_origin - 1] = CStringGetTextDatum(origin_names[origin]);
	values[Anum_b_role - 1] = ObjectIdGetDatum(role);

	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
}

/*
 * The committed batches of a source visible to the snapshot, as a hash
 * table from batch id to SwBatch, in the caller's memory context.  Only
 * batches at or before max_ts are loaded.
 */
HTAB *
sw_catalog_load_batches(Oid source, int64 max_ts, Snapshot snapshot)
{
	Relation	rel = table_open(sw_catalog_relation_required(SW_BATCHES_TABLE),
								 AccessShareLock);
	HASHCTL		ctl;
	HTAB	   *batches;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(SwBatch);
	ctl.hcxt = CurrentMemoryContext;
	batches = hash_create("source_writes batches", 1024, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	ScanKeyInit(&key, Anum_b_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(source));
	scan = systable_beginscan(rel, sw_catalog_relation_required(SW_BATCHES_INDEX),
							  true, snapshot, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Datum		values[Natts_b];
		bool		nulls[Natts_b];
		int64		id;
		int64		ts;
		SwBatch    *entry;
		char	   *origin;

		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		ts = DatumGetInt64(values[Anum_b_ts - 1]);
		if (ts > max_ts)
			continue;
		id = DatumGetInt64(values[Anum_b_batch - 1]);
		entry = hash_search(batches, &id, HASH_ENTER, NULL);
		entry->ts = ts;
		entry->role = DatumGetObjectId(values[Anum_b_role - 1]);
		origin = TextDatumGetCString(values[Anum_b_origin - 1]);
		entry->origin = SW_ORIGIN_USER;
		for (int i = 0; i < lengthof(origin_names); i++)
			if (strcmp(origin, origin_names[i]) == 0)
				entry->origin = i;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return batches;
}

const char *
sw_origin_name(SwOrigin origin)
{
	return origin_names[origin];
}

/*
 * Forget the batches of a dropped source.
 */
void
sw_catalog_delete_batches(Oid source)
{
	StaticAssertStmt(Anum_b_source == 1, "batches is keyed by its first column");
	delete_rows(SW_BATCHES_TABLE, SW_BATCHES_INDEX, source);
}
