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
 * Every reader of the past asks the same question of a hidden row: where,
 * seen from a time, are the batches that added and retracted it?  A batch
 * map (the batches from a time on) and sw_log_row() answer it: a batch in
 * the map is in the range asked about or after it; a batch that is not
 * is before it, or folded by compaction (see compaction.c), which is
 * before since and so before any time a reader may ask about; except the
 * reader's own batches, not committed yet, which are after every time.
 * Each reader picks its range:
 *
 *	as of T		from T + 1: the row is in the contents if a batch before
 *				added it and none before retracted it;
 *	updates		[since, until): +1 for the row's addition, -1 for its
 *				retraction, where the batch is in range (and, reading from
 *				the beginning, +1 for rows added by folded batches);
 *	compaction	from since: a history row retracted before is needed by
 *				no readable time.
 *
 * A map holds the batches from a time on, not those before it: its size,
 * and the cost of loading it, follow the part of the log that is read.
 * Batch ids come from a sequence at a transaction's first write, so they
 * grow with time, give or take the transactions that were writing at once:
 * the history rows that the batches of a map retracted are among those
 * whose "$retracted" is at least the smallest id in it, which the index on
 * that column finds without reading older rows; the current rows they
 * added are in the blocks they say they wrote (sw_log_scan_written_blocks()).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/relscan.h"
#include "access/stratnum.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/fmgroids.h"
#include "utils/rel.h"

#include "controller.h"
#include "log.h"

/*
 * The committed batches of a source with ts >= from that the MVCC
 * snapshot sees, in the caller's memory context, for a reader of the range
 * [from, until).
 */
SwBatchMap *
sw_log_batches(Oid relid, int64 from, int64 until, Snapshot snapshot)
{
	SwBatchMap *map = palloc(sizeof(SwBatchMap));
	HASH_SEQ_STATUS status;
	SwBatch    *batch;

	map->relid = relid;
	map->from = from;
	map->until = until;
	map->batches = sw_catalog_load_batches(relid, from, PG_INT64_MAX, snapshot);
	map->min_id = sw_controller_min_batch(relid);
	map->oldest_ts = PG_INT64_MAX;
	hash_seq_init(&status, map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
	{
		map->min_id = Min(map->min_id, batch->batch);
		map->oldest_ts = Min(map->oldest_ts, batch->ts);
	}
	return map;
}

/*
 * Where the batch in a hidden row's column is, seen from the map.
 */
static inline SwLogWhen
batch_when(const SwBatchMap *map, TupleTableSlot *hidden, AttrNumber attnum,
		   const SwBatch **batch)
{
	bool		isnull;
	int64		id = DatumGetInt64(slot_getattr(hidden, attnum, &isnull));

	Assert(!isnull);
	*batch = hash_search(map->batches, &id, HASH_FIND, NULL);
	if (*batch != NULL)
		return (*batch)->ts < map->until ? SW_LOG_IN : SW_LOG_LATER;
	if (sw_controller_wrote(map->relid, id))
		return SW_LOG_LATER;
	return SW_LOG_BEFORE;
}

/*
 * Where the batches that added and retracted a hidden row are.
 */
void
sw_log_row(const SwBatchMap *map, TupleTableSlot *hidden,
		   const SwLayout *layout, bool history, SwLogRow *row)
{
	row->added = batch_when(map, hidden, layout->meta, &row->added_batch);
	row->retracted = SW_LOG_LATER;
	row->retracted_batch = NULL;
	if (history)
		row->retracted = batch_when(map, hidden, layout->meta + 1,
									&row->retracted_batch);
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
	ls->nranges = -1;
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
 * Read the current heap (or the history) through an index on its batch
 * column ("$batch", or "$retracted"), from the map's smallest id on: only
 * the rows of the map's batches, and of a few older ones.
 */
void
sw_log_scan_by_index(SwLogScan *ls, bool history, Oid index)
{
	ls->index[history ? 1 : 0] = index;
}

static int
compare_blocks(const void *a, const void *b)
{
	BlockNumber x = *(const BlockNumber *) a;
	BlockNumber y = *(const BlockNumber *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * Read of the current heap only the blocks into which the map's batches in
 * range wrote rows, as they say (a row written there is still there, or in
 * the history).  Where one of them does not say, or says it of a heap that
 * has been rewritten since, the whole heap is read.
 */
void
sw_log_scan_written_blocks(SwLogScan *ls)
{
	const SwBatchMap *map = ls->map;
	Relation	current = ls->rel[0];
	BlockNumber nblocks = RelationGetNumberOfBlocks(current);
	HASH_SEQ_STATUS status;
	SwBatch    *batch;
	BlockNumber *pairs;
	int			n = 0;
	int			max = 64;

	pairs = palloc(sizeof(BlockNumber) * 2 * max);
	hash_seq_init(&status, map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
	{
		SwBlockRanges *b = batch->blocks;

		if (batch->ts >= map->until)
			continue;
		if (b == NULL || (b->n > 0 && b->file != current->rd_rel->relfilenode))
		{
			hash_seq_term(&status);
			pfree(pairs);
			return;				/* read it all */
		}
		for (int i = 0; i < b->n; i++)
		{
			if (b->from[i] >= nblocks)
				continue;		/* truncated away since */
			if (n == max)
			{
				max *= 2;
				pairs = repalloc(pairs, sizeof(BlockNumber) * 2 * max);
			}
			pairs[2 * n] = b->from[i];
			pairs[2 * n + 1] = Min(b->to[i], nblocks);
			n++;
		}
	}

	/* sorted by start, overlapping and touching ranges merged */
	qsort(pairs, n, 2 * sizeof(BlockNumber), compare_blocks);
	ls->range_from = palloc(sizeof(BlockNumber) * Max(n, 1));
	ls->range_to = palloc(sizeof(BlockNumber) * Max(n, 1));
	ls->nranges = 0;
	for (int i = 0; i < n; i++)
	{
		if (ls->nranges > 0 && pairs[2 * i] <= ls->range_to[ls->nranges - 1])
		{
			ls->range_to[ls->nranges - 1] = Max(ls->range_to[ls->nranges - 1],
												pairs[2 * i + 1]);
			continue;
		}
		ls->range_from[ls->nranges] = pairs[2 * i];
		ls->range_to[ls->nranges] = pairs[2 * i + 1];
		ls->nranges++;
	}
	pfree(pairs);
}

/*
 * Start reading the next range of blocks of the current heap; false when
 * there is none left.
 */
static bool
next_range(SwLogScan *ls)
{
	if (ls->range >= ls->nranges)
		return false;
	if (ls->scan == NULL)
		ls->scan = table_beginscan_strat(ls->rel[0], ls->snapshot, 0, NULL,
										 true, false);
	else
		table_rescan(ls->scan, NULL);
	heap_setscanlimits(ls->scan, ls->range_from[ls->range],
					   ls->range_to[ls->range] - ls->range_from[ls->range]);
	ls->range++;
	return true;
}

/*
 * Begin an index scan of the rows of a hidden heap whose batch column (the
 * index's) is at least min_id; false if there can be none.
 */
bool
sw_index_scan_begin(IndexScanDesc *iscan, Relation *index_rel, Relation heap,
					Oid index, Snapshot snapshot, int64 min_id)
{
	ScanKeyData key;

	if (min_id == PG_INT64_MAX)
		return false;
	*index_rel = index_open(index, AccessShareLock);
	*iscan = index_beginscan(heap, *index_rel, snapshot, 1, 0);
	ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_INT8GE,
				Int64GetDatum(min_id));
	index_rescan(*iscan, &key, 1, NULL, 0);
	return true;
}

/* end the scan of the relation being read */
static void
end_relation(SwLogScan *ls)
{
	if (ls->scan)
		table_endscan(ls->scan);
	if (ls->iscan)
	{
		index_endscan(ls->iscan);
		index_close(ls->index_rel, AccessShareLock);
	}
	ls->scan = NULL;
	ls->iscan = NULL;
}

/*
 * The next hidden row with something in the map's range (see SwLogScan),
 * with where its columns are and what the map says of it; NULL at the end.
 * The slot holds the row until the next call.
 */
TupleTableSlot *
sw_log_next(SwLogScan *ls, const SwLayout **layout, SwLogRow *row)
{
	bool		from_start = ls->map->from == PG_INT64_MIN;

	for (;;)
	{
		TupleTableSlot *slot;
		bool		found;

		if (ls->scan == NULL && ls->iscan == NULL)
		{
			int			which = ls->which;

			do
				which++;
			while (which < 2 && ls->rel[which] == NULL);
			ls->which = which;
			if (which >= 2)
				return NULL;
			if (which == 0 && ls->nranges >= 0)
			{
				if (!next_range(ls))
					continue;
			}
			else if (!OidIsValid(ls->index[which]))
				ls->scan = table_beginscan(ls->rel[which], ls->snapshot, 0, NULL);
			else if (!sw_index_scan_begin(&ls->iscan, &ls->index_rel, ls->rel[which],
										  ls->index[which], ls->snapshot,
										  ls->map->min_id))
				continue;
		}

		slot = ls->slot[ls->which];
		found = ls->scan
			? table_scan_getnextslot(ls->scan, ForwardScanDirection, slot)
			: index_getnext_slot(ls->iscan, ForwardScanDirection, slot);
		if (!found)
		{
			if (ls->which == 0 && ls->nranges >= 0 && next_range(ls))
				continue;
			end_relation(ls);
			continue;
		}

		CHECK_FOR_INTERRUPTS();
		sw_log_row(ls->map, slot, &ls->layout[ls->which], ls->which == 1, row);
		if (row->added == SW_LOG_IN || row->retracted == SW_LOG_IN ||
			(from_start && sw_log_row_present(row)))
		{
			*layout = &ls->layout[ls->which];
			return slot;
		}
	}
}

void
sw_log_end_scan(SwLogScan *ls)
{
	end_relation(ls);
	for (int i = 0; i < 2; i++)
		if (ls->slot[i])
			ExecDropSingleTupleTableSlot(ls->slot[i]);
}
