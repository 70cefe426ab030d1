/*-------------------------------------------------------------------------
 *
 * deliveries.c
 *		  Idempotency keys of webhook deliveries
 *
 * See doc/internals.md, "Writing and the stamping protocol"
 * (Idempotency keys).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/deliveries.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_collation.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "log/log.h"

/* columns of source_writes.deliveries */
#define Anum_d_source		1
#define Anum_d_key			2
#define Anum_d_ts			3
#define Anum_d_body_sha256	4
#define Anum_d_rows			5
#define Natts_d				5

/*
 * What is known of a delivery's key to a source: if it was written, *rows
 * is how many rows it wrote.
 */
SwDeliveryState
sw_delivery_lookup(Oid relid, const char *key, const uint8 *body_sha256,
				   int32 *rows)
{
	Oid			key_index;
	Oid			ts_index;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	SnapshotData dirty;
	HeapTuple	tuple;
	SwDeliveryState state = SW_DELIVERY_NEW;

	rel = table_open(sw_catalog_deliveries_oid(&key_index, &ts_index), AccessShareLock);
	InitDirtySnapshot(dirty);
	ScanKeyInit(&keys[0], Anum_d_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	/* in the column's collation */
	ScanKeyEntryInitialize(&keys[1], 0, Anum_d_key, BTEqualStrategyNumber,
						   InvalidOid, C_COLLATION_OID, F_TEXTEQ,
						   CStringGetTextDatum(key));
	scan = systable_beginscan(rel, key_index, true, &dirty, 2, keys);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
	{
		Datum		values[Natts_d];
		bool		nulls[Natts_d];
		bytea	   *hash;

		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		hash = DatumGetByteaPP(values[Anum_d_body_sha256 - 1]);
		if (TransactionIdIsValid(dirty.xmin) || TransactionIdIsValid(dirty.xmax))
			state = SW_DELIVERY_CHANGING;
		else if (VARSIZE_ANY_EXHDR(hash) == PG_SHA256_DIGEST_LENGTH &&
				 memcmp(VARDATA_ANY(hash), body_sha256, PG_SHA256_DIGEST_LENGTH) == 0)
			state = SW_DELIVERY_REPEAT;
		else
			state = SW_DELIVERY_CONFLICT;
		*rows = DatumGetInt32(values[Anum_d_rows - 1]);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return state;
}

/*
 * Keep the key of a delivery just written: it wrote rows rows, and was
 * received at received_ms.
 */
void
sw_delivery_insert(Oid relid, const char *key, int64 received_ms,
				   const uint8 *body_sha256, int32 rows)
{
	Oid			key_index;
	Oid			ts_index;
	Relation	rel;
	Datum		values[Natts_d];
	bool		nulls[Natts_d] = {0};
	bytea	   *hash = palloc(VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	HeapTuple	tuple;

	rel = table_open(sw_catalog_deliveries_oid(&key_index, &ts_index), RowExclusiveLock);
	SET_VARSIZE(hash, VARHDRSZ + PG_SHA256_DIGEST_LENGTH);
	memcpy(VARDATA(hash), body_sha256, PG_SHA256_DIGEST_LENGTH);
	values[Anum_d_source - 1] = ObjectIdGetDatum(relid);
	values[Anum_d_key - 1] = CStringGetTextDatum(key);
	values[Anum_d_ts - 1] = Int64GetDatum(received_ms);
	values[Anum_d_body_sha256 - 1] = PointerGetDatum(hash);
	values[Anum_d_rows - 1] = Int32GetDatum(rows);
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
}

/*
 * Forget the keys of a source received before the given time; returns
 * how many.  The caller holds the source's compaction lock, so no other
 * compaction deletes them meanwhile; the webhook worker only inserts keys,
 * and sees one being deleted as being changed (a repeat of it is refused
 * 503 until the deletion is over).
 */
int64
sw_deliveries_forget(Oid relid, int64 before)
{
	Oid			key_index;
	Oid			ts_index;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tuple;
	int64		n = 0;

	rel = table_open(sw_catalog_deliveries_oid(&key_index, &ts_index), RowExclusiveLock);
	ScanKeyInit(&keys[0], Anum_d_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_d_ts, BTLessStrategyNumber, F_INT8LT,
				Int64GetDatum(before));
	scan = systable_beginscan(rel, ts_index, true, SnapshotSelf, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		CHECK_FOR_INTERRUPTS();
		CatalogTupleDelete(rel, &tuple->t_self);
		n++;
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
	return n;
}

/*
 * The kept keys of a source's deliveries that the snapshot sees, as a list
 * of SwDelivery, in the caller's memory context (export()).
 */
List *
sw_deliveries_of(Oid relid, Snapshot snapshot)
{
	Oid			key_index;
	Oid			ts_index;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[1];
	HeapTuple	tuple;
	List	   *result = NIL;

	rel = table_open(sw_catalog_deliveries_oid(&key_index, &ts_index), AccessShareLock);
	ScanKeyInit(&keys[0], Anum_d_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, key_index, true, snapshot, 1, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		SwDelivery *d = palloc(sizeof(SwDelivery));
		Datum		values[Natts_d];
		bool		nulls[Natts_d];
		bytea	   *hash;

		CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		d->key = TextDatumGetCString(values[Anum_d_key - 1]);
		d->ts = DatumGetInt64(values[Anum_d_ts - 1]);
		hash = DatumGetByteaPP(values[Anum_d_body_sha256 - 1]);
		memset(d->body_sha256, 0, PG_SHA256_DIGEST_LENGTH);
		memcpy(d->body_sha256, VARDATA_ANY(hash),
			   Min(VARSIZE_ANY_EXHDR(hash), PG_SHA256_DIGEST_LENGTH));
		d->rows = DatumGetInt32(values[Anum_d_rows - 1]);
		result = lappend(result, d);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}
