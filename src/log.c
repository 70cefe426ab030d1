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
 * Each batch says in which blocks of the hidden heaps it wrote rows, and
 * rows never move within a heap, so the rows a reader needs are found
 * without reading older ones (a SwBlockScan): the current rows that the
 * map's batches added, in the blocks they wrote in the current heap; the
 * history rows that they (and the reader's own batches) retracted, in the
 * blocks they wrote in the history.  A row added from a time on and
 * retracted is retracted from that time on too, so those are all the rows
 * with something from that time on.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
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
	map->own_history = sw_controller_history_blocks(relid);
	map->oldest_ts = PG_INT64_MAX;
	hash_seq_init(&status, map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
		map->oldest_ts = Min(map->oldest_ts, batch->ts);
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
 * Read only the blocks of each hidden heap that the map's batches wrote
 * rows into (see SwBlockScan), not the whole heaps.
 */
void
sw_log_scan_written_blocks(SwLogScan *ls)
{
	ls->written = true;
}

static int
compare_blocks(const void *a, const void *b)
{
	BlockNumber x = *(const BlockNumber *) a;
	BlockNumber y = *(const BlockNumber *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * Add a batch's ranges of blocks of a heap of nblocks blocks, whose file is
 * file, to pairs; false if it does not say where it wrote, or says it of a
 * file that has been rewritten since.
 */
static bool
add_ranges(const SwBlockRanges *b, Oid file, BlockNumber nblocks,
		   BlockNumber **pairs, int *n, int *max)
{
	if (b == NULL || b->n < 0 || (b->n > 0 && b->file != file))
		return false;
	for (int i = 0; i < b->n; i++)
	{
		if (b->from[i] >= nblocks)
			continue;			/* truncated away since */
		if (*n == *max)
		{
			*max *= 2;
			*pairs = repalloc(*pairs, sizeof(BlockNumber) * 2 * *max);
		}
		(*pairs)[2 * *n] = b->from[i];
		(*pairs)[2 * *n + 1] = Min(b->to[i], nblocks);
		(*n)++;
	}
	return true;
}

/*
 * The blocks of a hidden heap to read for a batch map, sorted, with
 * overlapping and touching ranges merged: of the current heap (history
 * false), those into which the map's batches in range wrote rows; of the
 * history, those into which all the map's batches and the reader's own
 * wrote rows.  False if one of them does not say: read it all.
 */
static bool
written_blocks(SwBlockScan *bs, const SwBatchMap *map, bool history)
{
	Oid			file = bs->rel->rd_rel->relfilenode;
	BlockNumber nblocks = RelationGetNumberOfBlocks(bs->rel);
	HASH_SEQ_STATUS status;
	SwBatch    *batch;
	ListCell   *lc;
	BlockNumber *pairs;
	int			n = 0;
	int			max = 64;
	bool		known = true;

	pairs = palloc(sizeof(BlockNumber) * 2 * max);
	hash_seq_init(&status, map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
	{
		if (!history && batch->ts >= map->until)
			continue;			/* added later: not read */
		if (!add_ranges(batch->blocks[history ? 1 : 0], file, nblocks,
						&pairs, &n, &max))
		{
			hash_seq_term(&status);
			known = false;
			break;
		}
	}
	if (history)
		foreach(lc, map->own_history)
			known = known && add_ranges(lfirst(lc), file, nblocks, &pairs, &n, &max);
	if (!known)
	{
		pfree(pairs);
		return false;
	}

	qsort(pairs, n, 2 * sizeof(BlockNumber), compare_blocks);
	bs->from = palloc(sizeof(BlockNumber) * Max(n, 1));
	bs->to = palloc(sizeof(BlockNumber) * Max(n, 1));
	bs->nranges = 0;
	for (int i = 0; i < n; i++)
	{
		if (bs->nranges > 0 && pairs[2 * i] <= bs->to[bs->nranges - 1])
		{
			bs->to[bs->nranges - 1] = Max(bs->to[bs->nranges - 1], pairs[2 * i + 1]);
			continue;
		}
		bs->from[bs->nranges] = pairs[2 * i];
		bs->to[bs->nranges] = pairs[2 * i + 1];
		bs->nranges++;
	}
	pfree(pairs);
	return true;
}

/*
 * Begin a scan of a hidden heap: of the blocks that a batch map needs (see
 * written_blocks()), or of all of it when map is NULL or the blocks are
 * not known.
 */
void
sw_block_scan_begin(SwBlockScan *bs, Relation rel, Snapshot snapshot,
					const SwBatchMap *map, bool history)
{
	memset(bs, 0, sizeof(SwBlockScan));
	bs->rel = rel;
	bs->nranges = -1;
	if (map == NULL || !written_blocks(bs, map, history))
		bs->scan = table_beginscan(rel, snapshot, 0, NULL);
	else if (bs->nranges > 0)
	{
		/* a synchronized scan would not start where it is told */
		bs->scan = table_beginscan_strat(rel, snapshot, 0, NULL, true, false);
		heap_setscanlimits(bs->scan, bs->from[0], bs->to[0] - bs->from[0]);
		bs->range = 1;
	}
}

/*
 * The next row of a block scan into slot; false at the end.
 */
bool
sw_block_scan_next(SwBlockScan *bs, TupleTableSlot *slot)
{
	if (bs->scan == NULL)
		return false;
	while (!table_scan_getnextslot(bs->scan, ForwardScanDirection, slot))
	{
		if (bs->nranges < 0 || bs->range >= bs->nranges)
			return false;
		table_rescan(bs->scan, NULL);
		heap_setscanlimits(bs->scan, bs->from[bs->range],
						   bs->to[bs->range] - bs->from[bs->range]);
		bs->range++;
	}
	return true;
}

void
sw_block_scan_end(SwBlockScan *bs)
{
	if (bs->scan)
		table_endscan(bs->scan);
	bs->scan = NULL;
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

		if (!ls->scanning)
		{
			int			which = ls->which;

			do
				which++;
			while (which < 2 && ls->rel[which] == NULL);
			ls->which = which;
			if (which >= 2)
				return NULL;
			sw_block_scan_begin(&ls->bscan, ls->rel[which], ls->snapshot,
								ls->written ? ls->map : NULL, which == 1);
			ls->scanning = true;
		}

		slot = ls->slot[ls->which];
		if (!sw_block_scan_next(&ls->bscan, slot))
		{
			sw_block_scan_end(&ls->bscan);
			ls->scanning = false;
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
	sw_block_scan_end(&ls->bscan);
	for (int i = 0; i < 2; i++)
		if (ls->slot[i])
			ExecDropSingleTupleTableSlot(ls->slot[i]);
}
