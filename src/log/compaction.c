/*-------------------------------------------------------------------------
 *
 * compaction.c
 *		  Deleting the history that no readable time needs, and rolling
 *		  batches up into segments
 *
 * See doc/internals.md, "Reading the log" (Compaction).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/compaction.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/bufmgr.h"
#include "tcop/utility.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "log/log.h"

/*
 * Compact a source: delete the history rows retracted before its since,
 * in blocks [start, start + nblocks) of the history heap (nblocks 0: all of
 * them from start).  Adds the rows deleted to *removed and sets *next to
 * the block to go on from, or InvalidBlockNumber at the end.  When not
 * waiting, returns false at once if the table or the source's compaction
 * is locked by someone else.
 */
bool
sw_compact(Oid relid, bool wait, BlockNumber start, BlockNumber nblocks,
		   int64 *removed, BlockNumber *next)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	Relation	ftrel;
	Relation	history;
	SwSource	source;
	SwFrontiers frontiers;
	SwFrontiers mine;
	SwFrontiers stored;
	SwBatchMap *map;
	Snapshot	snapshot;
	TableScanDesc scan;
	TupleTableSlot *slot;
	SwLayout	layout;
	BlockNumber total;
	CommandId	cid;

	PreventCommandIfReadOnly("source_writes.compact()");
	*next = InvalidBlockNumber;

	if (wait)
		LockRelationOid(relid, AccessShareLock);
	else if (!ConditionalLockRelationOid(relid, AccessShareLock))
		return false;
	/* the table may have been dropped while we waited */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
	{
		UnlockRelationOid(relid, AccessShareLock);
		return true;
	}
	if (!sw_catalog_lock_compaction(relid, wait))
		return false;

	cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes compaction",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);

	sw_source_require(relid, &source);
	ftrel = relation_open(relid, NoLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!sw_catalog_frontiers(relid, snapshot, &frontiers))
		elog(ERROR, "source table %u has no catalog row", relid);

	/*
	 * The calling transaction may read with an older snapshot (REPEATABLE
	 * READ), from the since it sees: delete nothing it may still read.
	 */
	if (ActiveSnapshotSet() &&
		sw_catalog_frontiers(relid, GetActiveSnapshot(), &mine))
		frontiers.since = Min(frontiers.since, mine.since);
	map = sw_log_batches(relid, frontiers.since, PG_INT64_MAX, snapshot);

	/*
	 * Store the since we compact to: readers must not go below it, even if
	 * retain_history grows.
	 */
	if (sw_catalog_stored_frontiers(relid, &stored) && stored.since < frontiers.since)
		sw_catalog_set_since(relid, frontiers.since, stored.retain);

	history = table_open(source.history_rel, RowExclusiveLock);
	total = RelationGetNumberOfBlocks(history);
	if (start < total &&
		sw_catalog_count_batches_before(relid, frontiers.since, snapshot, 2) == 2)
	{
		BlockNumber count = nblocks == 0 ? total - start : Min(nblocks, total - start);

		sw_storage_layout(ftrel, history, &layout);
		cid = GetCurrentCommandId(true);
		scan = table_beginscan_strat(history, snapshot, 0, NULL, true, false);
		heap_setscanlimits(scan, start, count);
		slot = table_slot_create(history, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
		{
			SwLogRow	row;
			TM_FailureData tmfd;

			CHECK_FOR_INTERRUPTS();
			sw_log_row(map, slot, &layout, true, &row);
			if (row.retracted != SW_LOG_BEFORE)
				continue;
			/*
			 * Other compactions wait for our lock and writers never delete
			 * history rows, so the row is ours to delete, unless an earlier
			 * compaction in this same command deleted it already.
			 */
			switch (table_tuple_delete(history, &slot->tts_tid, cid, snapshot,
									   InvalidSnapshot, true, &tmfd, false))
			{
				case TM_Ok:
					(*removed)++;
					break;
				case TM_SelfModified:
					break;
				default:
					elog(ERROR, "could not delete a compacted history row of source table \"%s\"",
						 RelationGetRelationName(ftrel));
			}
		}
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);
		if (start + count < total)
			*next = start + count;
	}

	/*
	 * Past the end of the history: fold the batches before since, and
	 * forget the idempotency keys of webhook deliveries received before it.
	 */
	if (*next == InvalidBlockNumber)
	{
		sw_catalog_fold_batches(relid, frontiers.since, snapshot);
		sw_deliveries_forget(relid, frontiers.since);
	}
	table_close(history, NoLock);
	UnregisterSnapshot(snapshot);
	relation_close(ftrel, NoLock);

	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	return true;
}

/*
 * Roll the oldest batch rows of a source up into a segment of
 * source_writes.batch_segments, source_writes.segment_batches of them, if
 * that many are settled and source_writes.segment_delay older than its
 * newest batch (sw_catalog_roll_up()).  Takes the source's
 * compaction lock, which writers never take, until the end of the
 * transaction.  Returns how many batches were rolled up, or -1 when not
 * waiting and the table or its compaction is locked by someone else.
 */
int
sw_roll_up(Oid relid, bool wait)
{
	MemoryContext cxt;
	MemoryContext oldcxt;
	int			n;

	PreventCommandIfReadOnly("source_writes.compact()");
	if (wait)
		LockRelationOid(relid, AccessShareLock);
	else if (!ConditionalLockRelationOid(relid, AccessShareLock))
		return -1;
	/* the table may have been dropped while we waited */
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
	{
		UnlockRelationOid(relid, AccessShareLock);
		return 0;
	}
	if (!sw_catalog_lock_compaction(relid, wait))
		return -1;
	cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes rollup",
								ALLOCSET_DEFAULT_SIZES);
	oldcxt = MemoryContextSwitchTo(cxt);
	n = sw_catalog_roll_up(relid, sw_segment_batches, sw_segment_delay);
	MemoryContextSwitchTo(oldcxt);
	MemoryContextDelete(cxt);
	return n;
}
