/*-------------------------------------------------------------------------
 *
 * log.c
 *		  The log of a source: reading it (updates()) and compacting it
 *
 * The log is derived, not stored twice.  A current row is the update
 * (row, ts(batch), +1); a history row is that and (row, ts(retracted), -1).
 * Batch timestamps come from source_writes.batches.  Reading the log under
 * one MVCC snapshot sees each row instance exactly once, either current or
 * in the history, and only batches that committed.
 *
 * Compaction deletes history rows retracted before since: no read at or
 * after since needs them.  VACUUM (or autovacuum) then reclaims the space.
 *
 * IDENTIFICATION
 *		  src/log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "source_writes.h"

/* columns of updates() */
#define UPDATES_NATTS	5

/* what updates() collects before sorting */
typedef struct UpdatesState
{
	HTAB	   *batches;
	int64		since;
	int64		until;			/* exclusive; INT64_MAX for none */
	TupleDesc	rowdesc;		/* the source table's row type */
	TupleDesc	outdesc;
	Tuplesortstate *sort;
	TupleTableSlot *slot;		/* an update on its way into the sort */
	Datum	   *row_values;		/* the row of an update */
	bool	   *row_isnull;
} UpdatesState;

/*
 * Add one update to the sort, if its time is in range.
 */
static void
add_update(UpdatesState *us, SwBatch *batch, int diff, TupleTableSlot *hidden,
		   SwLayout *layout)
{
	Datum		values[UPDATES_NATTS];
	bool		nulls[UPDATES_NATTS] = {0};
	char	   *role;
	HeapTuple	row;

	if (batch->ts < us->since || batch->ts >= us->until)
		return;

	slot_getallattrs(hidden);
	sw_from_hidden(layout, us->rowdesc->natts, hidden->tts_values,
				   hidden->tts_isnull, us->row_values, us->row_isnull);
	row = heap_form_tuple(us->rowdesc, us->row_values, us->row_isnull);

	values[0] = Int64GetDatum(batch->ts);
	values[1] = Int32GetDatum(diff);
	values[2] = CStringGetTextDatum(sw_origin_name(batch->origin));
	role = GetUserNameFromId(batch->role, true);
	if (role)
		values[3] = DirectFunctionCall1(namein, CStringGetDatum(role));
	else
		nulls[3] = true;		/* the role was dropped since */
	values[4] = HeapTupleGetDatum(row);

	ExecClearTuple(us->slot);
	memcpy(us->slot->tts_values, values, sizeof(values));
	memcpy(us->slot->tts_isnull, nulls, sizeof(nulls));
	ExecStoreVirtualTuple(us->slot);
	tuplesort_puttupleslot(us->sort, us->slot);
	heap_freetuple(row);
}

/*
 * Scan one hidden heap and add its updates.
 */
static void
collect_updates(UpdatesState *us, Relation rel, Snapshot snapshot, bool history)
{
	TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(rel, NULL);
	SwLayout	layout;

	sw_layout(rel, &layout);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		bool		isnull;
		int64		id = DatumGetInt64(slot_getattr(slot, layout.meta, &isnull));
		SwBatch    *batch = hash_search(us->batches, &id, HASH_FIND, NULL);

		CHECK_FOR_INTERRUPTS();
		/* rows of batches that have not committed are not in the log */
		if (batch == NULL)
			continue;
		add_update(us, batch, 1, slot, &layout);
		if (history)
		{
			id = DatumGetInt64(slot_getattr(slot, layout.meta + 1, &isnull));
			batch = hash_search(us->batches, &id, HASH_FIND, NULL);
			if (batch)
				add_update(us, batch, -1, slot, &layout);
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
}

PG_FUNCTION_INFO_V1(source_writes_updates);

/*
 * updates(NULL::tbl, since => bigint, until => bigint)
 *		-> (ts bigint, diff integer, origin text, role name, data tbl)
 *
 * The log of a source table in timestamp order (additions before
 * retractions at one timestamp): the updates with since <= ts < until.
 * Without since, all retained history; an explicit since must be readable
 * (not before the source's since).
 */
Datum
source_writes_updates(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid			relid = OidIsValid(rowtype) ? typeidTypeRelid(rowtype) : InvalidOid;
	UpdatesState us;
	SwCatalogEntry entry;
	Relation	current;
	Relation	history;
	Snapshot	snapshot = GetActiveSnapshot();
	AttrNumber	sort_cols[2] = {1, 2};
	Oid			sort_ops[2];
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};
	TupleTableSlot *slot;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source_writes.updates() takes a row of a source table"),
				 errhint("Pass a null of the table's row type, e.g. updates(NULL::events).")));
	sw_check_source_privilege(relid, ACL_SELECT);
	LockRelationOid(relid, AccessShareLock);
	sw_catalog_require(relid, &entry);

	us.since = PG_ARGISNULL(1) ? PG_INT64_MIN : PG_GETARG_INT64(1);
	us.until = PG_ARGISNULL(2) ? PG_INT64_MAX : PG_GETARG_INT64(2);
	if (!PG_ARGISNULL(1) && us.since < entry.since)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the log of source table \"%s\" is not complete from " INT64_FORMAT,
						get_rel_name(relid), us.since),
				 errdetail("It is complete from " INT64_FORMAT " on: the table was created then, or older history was compacted.",
						   entry.since),
				 errhint("Ask for updates since " INT64_FORMAT " or later, or without since for all that is kept.",
						 entry.since)));

	InitMaterializedSRF(fcinfo, 0);
	us.outdesc = rsinfo->setDesc;
	us.rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	us.row_values = palloc(sizeof(Datum) * Max(us.rowdesc->natts, 1));
	us.row_isnull = palloc(sizeof(bool) * Max(us.rowdesc->natts, 1));
	us.batches = sw_catalog_load_batches(relid, PG_INT64_MAX, snapshot);

	sort_ops[0] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
									  BTLessStrategyNumber);
	sort_ops[1] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT4OID, INT4OID,
									  BTGreaterStrategyNumber);
	us.sort = tuplesort_begin_heap(us.outdesc, 2, sort_cols, sort_ops,
								   collations, nulls_first, work_mem, NULL,
								   TUPLESORT_NONE);

	us.slot = MakeSingleTupleTableSlot(us.outdesc, &TTSOpsVirtual);
	current = table_open(entry.current_rel, AccessShareLock);
	history = table_open(entry.history_rel, AccessShareLock);
	collect_updates(&us, current, snapshot, false);
	collect_updates(&us, history, snapshot, true);
	table_close(history, AccessShareLock);
	table_close(current, AccessShareLock);

	tuplesort_performsort(us.sort);
	ExecDropSingleTupleTableSlot(us.slot);
	slot = MakeSingleTupleTableSlot(us.outdesc, &TTSOpsMinimalTuple);
	while (tuplesort_gettupleslot(us.sort, true, false, slot, NULL))
		tuplestore_puttupleslot(rsinfo->setResult, slot);
	ExecDropSingleTupleTableSlot(slot);
	tuplesort_end(us.sort);

	return (Datum) 0;
}

/*
 * Compact a source: move since along with retain_history and delete the
 * history rows retracted before it.  Returns how many were deleted.  Holds
 * the source's lock, so writers wait for it at their commit.
 */
int64
sw_compact(Oid relid)
{
	SwCatalogEntry entry;
	int64		since;
	int64		removed = 0;
	Relation	history;
	Snapshot	snapshot;
	HTAB	   *batches;
	TableScanDesc scan;
	TupleTableSlot *slot;
	SwLayout	layout;

	LockRelationOid(relid, AccessShareLock);
	sw_catalog_lock_source(relid);
	sw_catalog_require(relid, &entry);

	since = sw_retained_since(entry.since, entry.upper, sw_retention_ms(relid));
	if (since != entry.since)
		sw_catalog_set_frontiers(relid, since, entry.upper);

	/* every batch before since committed long ago: any new snapshot has it */
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	batches = sw_catalog_load_batches(relid, since - 1, snapshot);
	if (hash_get_num_entries(batches) > 0)
	{
		history = table_open(entry.history_rel, RowExclusiveLock);
		scan = table_beginscan(history, snapshot, 0, NULL);
		slot = table_slot_create(history, NULL);
		sw_layout(history, &layout);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			bool		isnull;
			int64		retracted = DatumGetInt64(slot_getattr(slot, layout.meta + 1, &isnull));

			CHECK_FOR_INTERRUPTS();
			if (hash_search(batches, &retracted, HASH_FIND, NULL) == NULL)
				continue;
			simple_heap_delete(history, &slot->tts_tid);
			removed++;
		}
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);
		table_close(history, NoLock);
	}
	hash_destroy(batches);
	UnregisterSnapshot(snapshot);
	return removed;
}

PG_FUNCTION_INFO_V1(source_writes_compact);

/*
 * compact(regclass) -> bigint: compact a source now (see sw_compact); needs
 * the right to delete from it.
 */
Datum
source_writes_compact(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);

	sw_check_source_privilege(relid, ACL_DELETE);
	PG_RETURN_INT64(sw_compact(relid));
}
