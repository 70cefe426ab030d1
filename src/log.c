/*-------------------------------------------------------------------------
 *
 * log.c
 *		  Reading a source's log out of its hidden relations
 *
 * The log is derived, not stored twice.  A current row is the update
 * (row, ts(batch), +1); a history row is that and (row, ts(retracted), -1).
 * Batch timestamps come from source_writes.batches.  Read under one MVCC
 * snapshot, each row instance is seen exactly once, either current or in
 * the history, and only batches that committed count.
 *
 * Every reader of the past asks the same question of a hidden row: which
 * batches, of those in a range of time, added and retracted it?  A batch
 * map (the batches of a range) and sw_log_row() answer it, and each reader
 * picks its range:
 *
 *	as of T		batches at or before T: the row is in the contents if one
 *				of them added it and none retracted it;
 *	updates		batches in [since, until): +1 for the row's addition, -1
 *				for its retraction, where the batch is in range;
 *	compaction	batches before since: a history row retracted by one of
 *				them is needed by no readable time.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "utils/rel.h"

#include "log.h"

/*
 * The committed batches of a source with from <= ts < until that the MVCC
 * snapshot sees, in the caller's memory context.
 */
SwBatchMap *
sw_log_batches(Oid relid, int64 from, int64 until, Snapshot snapshot)
{
	SwBatchMap *map = palloc(sizeof(SwBatchMap));

	map->from = from;
	map->until = until;
	map->batches = sw_catalog_load_batches(relid, from, until, snapshot);
	return map;
}

static inline const SwBatch *
find_batch(const SwBatchMap *map, TupleTableSlot *hidden, AttrNumber attnum)
{
	bool		isnull;
	int64		id = DatumGetInt64(slot_getattr(hidden, attnum, &isnull));

	Assert(!isnull);
	return hash_search(map->batches, &id, HASH_FIND, NULL);
}

/*
 * Which batches of the map added and retracted a hidden row.
 */
void
sw_log_row(const SwBatchMap *map, TupleTableSlot *hidden,
		   const SwLayout *layout, bool history, SwLogRow *row)
{
	row->added = find_batch(map, hidden, layout->meta);
	row->retracted = history ? find_batch(map, hidden, layout->meta + 1) : NULL;
}

/*
 * Begin a scan of the hidden relations given (the current one, the
 * history, or both), whose layouts are checked against the foreign table.
 */
void
sw_log_begin_scan(SwLogScan *ls, Relation ftrel, Relation current,
				  Relation history, Snapshot snapshot, const SwBatchMap *map)
{
	memset(ls, 0, sizeof(SwLogScan));
	ls->rel[0] = current;
	ls->rel[1] = history;
	ls->snapshot = snapshot;
	ls->map = map;
	ls->which = -1;
	for (int i = 0; i < 2; i++)
	{
		if (ls->rel[i] == NULL)
			continue;
		sw_storage_layout(ftrel, ls->rel[i], &ls->layout[i]);
		ls->slot[i] = table_slot_create(ls->rel[i], NULL);
	}
}

/*
 * The next hidden row that a batch of the map added or retracted, with
 * where its columns are and what the map says of it; NULL at the end.
 * The slot holds the row until the next call.
 */
TupleTableSlot *
sw_log_next(SwLogScan *ls, const SwLayout **layout, SwLogRow *row)
{
	for (;;)
	{
		TupleTableSlot *slot;

		if (ls->scan == NULL)
		{
			do
				ls->which++;
			while (ls->which < 2 && ls->rel[ls->which] == NULL);
			if (ls->which >= 2)
				return NULL;
			ls->scan = table_beginscan(ls->rel[ls->which], ls->snapshot, 0, NULL);
		}

		slot = ls->slot[ls->which];
		if (!table_scan_getnextslot(ls->scan, ForwardScanDirection, slot))
		{
			table_endscan(ls->scan);
			ls->scan = NULL;
			continue;
		}

		CHECK_FOR_INTERRUPTS();
		sw_log_row(ls->map, slot, &ls->layout[ls->which], ls->which == 1, row);
		if (row->added == NULL && row->retracted == NULL)
			continue;
		*layout = &ls->layout[ls->which];
		return slot;
	}
}

void
sw_log_end_scan(SwLogScan *ls)
{
	if (ls->scan)
		table_endscan(ls->scan);
	for (int i = 0; i < 2; i++)
		if (ls->slot[i])
			ExecDropSingleTupleTableSlot(ls->slot[i]);
}
