/*-------------------------------------------------------------------------
 *
 * avro_schemas.c
 *		  The writers' Avro schemas the Kafka workers fetched from schema
 *		  registries, kept in source_writes.avro_schemas so that sessions
 *		  (retry_errors()) decode with them too, without a registry
 *
 * See doc/internals.md, "Storage layout".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/avro_schemas.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "log/log.h"

/* the columns of source_writes.avro_schemas */
#define Natts_a				4
#define Anum_a_server		1
#define Anum_a_id			2
#define Anum_a_registry		3
#define Anum_a_schema		4

/* scan the table's row of (server, id), if any */
static SysScanDesc
begin_scan(Relation rel, Oid pkey, Oid serverid, int32 id, ScanKeyData *keys)
{
	ScanKeyInit(&keys[0], Anum_a_server, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(serverid));
	ScanKeyInit(&keys[1], Anum_a_id, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(id));
	return systable_beginscan(rel, pkey, true, NULL, 2, keys);
}

/*
 * Keep the schema of id that the registry of server serverid (its
 * schema_registry, registry) gave, replacing what was kept for them, in a
 * transaction of its own if none is open.  Writers of the table take
 * turns (two workers of one server may fetch one id at once).  Nothing is
 * kept in a database not updated to 0.3 yet.
 */
void
sw_avro_schema_store(Oid serverid, const char *registry, int32 id, const char *json)
{
	bool		own = !IsTransactionState();
	Oid			pkey;
	Oid			table;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	old;
	HeapTuple	tuple;
	Datum		values[Natts_a];
	bool		nulls[Natts_a] = {0};
	bool		replace[Natts_a] = {0};

	if (own)
		StartTransactionCommand();
	table = sw_catalog_avro_schemas_oid(&pkey);
	if (OidIsValid(table))
	{
		rel = table_open(table, ShareRowExclusiveLock);
		values[Anum_a_server - 1] = ObjectIdGetDatum(serverid);
		values[Anum_a_id - 1] = Int32GetDatum(id);
		values[Anum_a_registry - 1] = CStringGetTextDatum(registry);
		values[Anum_a_schema - 1] = CStringGetTextDatum(json);
		scan = begin_scan(rel, pkey, serverid, id, keys);
		old = systable_getnext(scan);
		if (HeapTupleIsValid(old))
		{
			replace[Anum_a_registry - 1] = replace[Anum_a_schema - 1] = true;
			tuple = heap_modify_tuple(old, RelationGetDescr(rel), values, nulls, replace);
			CatalogTupleUpdate(rel, &old->t_self, tuple);
		}
		else
		{
			tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
			CatalogTupleInsert(rel, tuple);
		}
		systable_endscan(scan);
		table_close(rel, NoLock);
	}
	if (own)
		CommitTransactionCommand();
}

/*
 * The schema of id kept for server serverid, if it came from the registry
 * the server names now (registry); NULL if none did.
 */
char *
sw_avro_schema_stored(Oid serverid, const char *registry, int32 id)
{
	Oid			pkey;
	Oid			table = sw_catalog_avro_schemas_oid(&pkey);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tuple;
	char	   *json = NULL;

	if (!OidIsValid(table))
		return NULL;
	rel = table_open(table, AccessShareLock);
	scan = begin_scan(rel, pkey, serverid, id, keys);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		from = heap_getattr(tuple, Anum_a_registry, RelationGetDescr(rel), &isnull);

		if (!isnull && strcmp(TextDatumGetCString(from), registry) == 0)
		{
			Datum		schema = heap_getattr(tuple, Anum_a_schema, RelationGetDescr(rel), &isnull);

			if (!isnull)
				json = TextDatumGetCString(schema);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return json;
}
