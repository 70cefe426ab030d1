/*-------------------------------------------------------------------------
 *
 * log.c
 *		  Reading a source's log out of its hidden relations
 *
 * See doc/internals.md, "Reading the log".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/log.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relscan.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

#include "log/log.h"

/*
 * The committed batches of a source with ts >= from (and < load_until)
 * that the MVCC snapshot sees, in the caller's memory context, for a
 * reader of the range [from, until).
 */
static SwBatchMap *
load_map(Oid relid, int64 from, int64 until, Snapshot snapshot, int64 load_until,
		 bool oldest)
{
	SwBatchMap *map = palloc(sizeof(SwBatchMap));
	HASH_SEQ_STATUS status;
	SwBatch    *batch;

	map->relid = relid;
	map->from = from;
	map->until = until;
	sw_written_blocks_init(&map->written[SW_CURRENT_HEAP]);
	sw_written_blocks_init(&map->written[SW_HISTORY_HEAP]);
	map->batches = sw_catalog_load_batches(relid, from, snapshot, until,
										   map->written, &map->segments,
										   load_until);
	map->found = palloc(sizeof(SwBatch) * 2);
	map->found_ok = palloc0(sizeof(bool) * 2);
	sw_controller_history_blocks(relid, &map->written[SW_HISTORY_HEAP]);
	map->nrows = hash_get_num_entries(map->batches);
	map->oldest_ts = PG_INT64_MAX;
	if (!oldest)
		return map;
	map->oldest_ts = sw_segments_oldest(map->segments, from);
	hash_seq_init(&status, map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
		map->oldest_ts = Min(map->oldest_ts, batch->ts);
	return map;
}

/*
 * The committed batches of a source with ts >= from that the MVCC
 * snapshot sees, in the caller's memory context, for a reader of the range
 * [from, until).
 */
SwBatchMap *
sw_log_batches(Oid relid, int64 from, int64 until, Snapshot snapshot)
{
	return load_map(relid, from, until, snapshot, PG_INT64_MAX, true);
}

/*
 * The same, for a reader of the window [from, until) (from not
 * PG_INT64_MIN) that takes a row for in it only if a batch in it added or
 * retracted the row (updates() with since), and tells the batches before
 * the window from those after it in no other way.  When the source has no
 * history rows (an append-only source: a webhook's, say), the batches
 * after the window are not loaded: they would only say where history rows
 * are.  (With none, its heap has no block; one that a snapshot sees was
 * in a block before the snapshot was taken, and VACUUM does not truncate
 * a block with a row that a snapshot still sees.)  A batch after the
 * window then looks before it.  Nor is the oldest batch's timestamp
 * known (oldest_ts): that of the batch of rows added before the beginning.
 */
SwBatchMap *
sw_log_window_batches(Oid relid, int64 from, int64 until, Snapshot snapshot)
{
	SwSource	source;
	Relation	history;
	bool		empty;

	Assert(from != PG_INT64_MIN);
	sw_source_require(relid, &source);
	history = table_open(source.history_rel, AccessShareLock);
	empty = RelationGetNumberOfBlocks(history) == 0;
	table_close(history, AccessShareLock);
	return load_map(relid, from, until, snapshot,
					empty && until != PG_INT64_MAX ? until : PG_INT64_MAX, false);
}

/*
 * Where the batch in a hidden row's column is, seen from the map.  A batch
 * that is not in it is before the map's range, or, if it is the reader's
 * own (may_be_own, and the reader's transaction wrote the tuple), after.
 * The tuple's xmin says that, in parallel workers too: a current row that
 * the reader's transaction wrote was added by one of its batches, a
 * history row that it wrote was retracted by one.  A batch found in a
 * segment is copied to map->found[which], which holds it until the next
 * row that another batch of a segment added (or retracted): the rows of a
 * batch often follow each other, and the next is not looked up again.
 */
static inline SwLogWhen
batch_when(const SwBatchMap *map, TupleTableSlot *hidden, AttrNumber attnum,
		   bool may_be_own, int which, const SwBatch **batch)
{
	bool		isnull;
	int64		id = DatumGetInt64(slot_getattr(hidden, attnum, &isnull));

	Assert(!isnull);
	*batch = map->nrows > 0 ? hash_search(map->batches, &id, HASH_FIND, NULL) : NULL;
	if (*batch == NULL && map->found_ok[which] && map->found[which].batch == id)
		*batch = &map->found[which];
	else if (*batch == NULL)
	{
		map->found_ok[which] = sw_segments_find(map->segments, id, &map->found[which]);
		if (map->found_ok[which])
			*batch = &map->found[which];
	}
	if (*batch != NULL)
	{
		if ((*batch)->ts < map->from)
		{
			*batch = NULL;
			return SW_LOG_BEFORE;	/* in a segment that reaches from */
		}
		return (*batch)->ts < map->until ? SW_LOG_IN : SW_LOG_LATER;
	}
	if (may_be_own)
	{
		HeapTuple	tuple = ExecFetchSlotHeapTuple(hidden, false, NULL);

		if (TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data)))
			return SW_LOG_LATER;
	}
	return SW_LOG_BEFORE;
}

/*
 * Where the batches that added and retracted a hidden row are.  A row
 * that a transaction added and retracted leaves no history, so a history
 * row was added by a batch of another, but for a no-op row: one that a
 * batch added and retracted itself, the trace of a stream's tombstone that
 * found no row of its key to delete (see sw_writer_tombstone()).  Its net
 * count is zero at every time; readers that show rows or changes leave it
 * out (sw_log_next()), and it is added when it is retracted, by the same
 * batch (its own transaction's, for a reader in it).
 */
void
sw_log_row(const SwBatchMap *map, TupleTableSlot *hidden,
		   const SwLayout *layout, bool history, SwLogRow *row)
{
	bool		isnull;

	row->noop = false;
	row->retracted = SW_LOG_LATER;
	row->retracted_batch = NULL;
	if (history)
	{
		row->retracted = batch_when(map, hidden, layout->retracted, true, 1,
									&row->retracted_batch);
		row->noop = DatumGetInt64(slot_getattr(hidden, layout->batch, &isnull)) ==
			DatumGetInt64(slot_getattr(hidden, layout->retracted, &isnull));
		if (row->noop)
		{
			row->added = row->retracted;
			row->added_batch = row->retracted_batch;
			return;
		}
	}
	row->added = batch_when(map, hidden, layout->batch, !history, 0,
							&row->added_batch);
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
 * The blocks of a hidden heap to read for a batch map, as [from, to) pairs
 * sorted and merged where they overlap or touch: of the current heap, the
 * blocks into which the map's batches in range wrote rows; of the history,
 * those into which all its batches, and the reader's own, wrote rows.
 * False if one of them does not say, or says it of a file that has been
 * rewritten since: read it all.
 */
static bool
written_blocks(SwBlockScan *bs, const SwBatchMap *map, SwHeap heap)
{
	const SwWrittenBlocks *written = &map->written[heap];
	BlockNumber nblocks;
	int			n = 0;

	if (!written->known ||
		(OidIsValid(written->file) && written->file != bs->rel->rd_rel->relfilenode))
		return false;

	nblocks = RelationGetNumberOfBlocks(bs->rel);
	bs->pairs = palloc(sizeof(BlockNumber) * 2 * Max(written->npairs, 1));
	for (int i = 0; i < written->npairs; i++)
	{
		if (written->pairs[2 * i] >= nblocks)
			continue;			/* truncated away since */
		bs->pairs[2 * n] = written->pairs[2 * i];
		bs->pairs[2 * n + 1] = Min(written->pairs[2 * i + 1], nblocks);
		n++;
	}
	qsort(bs->pairs, n, 2 * sizeof(BlockNumber), compare_blocks);

	bs->nranges = 0;
	for (int i = 0; i < n; i++)
	{
		BlockNumber *last = &bs->pairs[2 * (bs->nranges - 1)];

		if (bs->nranges > 0 && bs->pairs[2 * i] <= last[1])
			last[1] = Max(last[1], bs->pairs[2 * i + 1]);
		else
		{
			bs->pairs[2 * bs->nranges] = bs->pairs[2 * i];
			bs->pairs[2 * bs->nranges + 1] = bs->pairs[2 * i + 1];
			bs->nranges++;
		}
	}
	return true;
}

/* start reading the block scan's first range, or the whole heap */
static void
start_block_scan(SwBlockScan *bs)
{
	bs->range = 0;
	if (bs->scan == NULL)
		return;
	table_rescan(bs->scan, NULL);
	if (bs->nranges > 0)
	{
		heap_setscanlimits(bs->scan, bs->pairs[0], bs->pairs[1] - bs->pairs[0]);
		bs->range = 1;
	}
}

/*
 * Begin a scan of a hidden heap: of the blocks that a batch map needs (see
 * written_blocks()), or of all of it when map is NULL or the blocks are
 * not known.
 */
void
sw_block_scan_begin(SwBlockScan *bs, Relation rel, Snapshot snapshot,
					const SwBatchMap *map, SwHeap heap)
{
	memset(bs, 0, sizeof(SwBlockScan));
	bs->rel = rel;
	bs->nranges = -1;
	if (map == NULL || !written_blocks(bs, map, heap))
		bs->scan = table_beginscan(rel, snapshot, 0, NULL);
	else if (bs->nranges > 0)
	{
		/* a synchronized scan would not start where it is told */
		bs->scan = table_beginscan_strat(rel, snapshot, 0, NULL, true, false);
		start_block_scan(bs);
	}
}

/*
 * Read a block scan again from its start, through the same blocks.
 */
void
sw_block_scan_rescan(SwBlockScan *bs)
{
	start_block_scan(bs);
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
		BlockNumber *range;

		if (bs->nranges < 0 || bs->range >= bs->nranges)
			return false;
		range = &bs->pairs[2 * bs->range++];
		table_rescan(bs->scan, NULL);
		heap_setscanlimits(bs->scan, range[0], range[1] - range[0]);
	}
	return true;
}

/*
 * End a block scan, and free what it holds.
 */
void
sw_block_scan_end(SwBlockScan *bs)
{
	if (bs->scan)
		table_endscan(bs->scan);
	if (bs->pairs)
		pfree(bs->pairs);
	bs->scan = NULL;
	bs->pairs = NULL;
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
								ls->written ? ls->map : NULL, which);
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
		sw_log_row(ls->map, slot, &ls->layout[ls->which],
				   ls->which == SW_HISTORY_HEAP, row);
		if (row->noop && !ls->keep_noop)
			continue;
		if (row->added == SW_LOG_IN || row->retracted == SW_LOG_IN ||
			(from_start && sw_log_row_present(row)) || ls->every_row)
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
