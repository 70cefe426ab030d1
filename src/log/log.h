/*-------------------------------------------------------------------------
 *
 * log.h
 *		  Reading a source's log out of its hidden relations
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/log.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_LOG_H
#define SW_LOG_H

#include "access/tableam.h"
#include "executor/tuptable.h"

#include "catalog.h"
#include "storage.h"

/*
 * The committed batches of a source with ts >= from, as one snapshot sees
 * them, and what a reader asks of them: the range [from, until).
 */
typedef struct SwBatchMap
{
	Oid			relid;
	HTAB	   *batches;		/* batch id -> SwBatch */
	int64		from;
	int64		until;
	SwWrittenBlocks written[2]; /* where they wrote rows, by SwHeap: in the
								 * current heap those before until, in the
								 * history all, and the reader's own */
	int64		oldest_ts;		/* the oldest batch's ts, PG_INT64_MAX if none */
} SwBatchMap;

/* where a batch is, seen from a batch map */
typedef enum SwLogWhen
{
	SW_LOG_BEFORE,				/* before from, or folded by compaction */
	SW_LOG_IN,					/* in [from, until) */
	SW_LOG_LATER				/* at or after until, or not committed yet */
} SwLogWhen;

/*
 * What a hidden row says in the log, seen from a batch map: where the
 * batch that added it is and, for history rows, the one that retracted
 * it (SW_LOG_LATER for current rows), with the batches that are in range.
 */
typedef struct SwLogRow
{
	SwLogWhen	added;
	SwLogWhen	retracted;
	const SwBatch *added_batch; /* when SW_LOG_IN */
	const SwBatch *retracted_batch; /* when SW_LOG_IN */
} SwLogRow;

extern SwBatchMap *sw_log_batches(Oid relid, int64 from, int64 until,
								  Snapshot snapshot);
extern void sw_log_row(const SwBatchMap *map, TupleTableSlot *hidden,
					   const SwLayout *layout, bool history, SwLogRow *row);

/*
 * Is the row in the contents at T?  With a map from T + 1: it was added by
 * a batch at or before T and not retracted by one.
 */
static inline bool
sw_log_row_present(const SwLogRow *row)
{
	return row->added == SW_LOG_BEFORE && row->retracted != SW_LOG_BEFORE;
}

/*
 * A scan of a hidden heap, whole or of the blocks a batch map needs: the
 * ranges [pairs[2i], pairs[2i + 1]) in order, when nranges >= 0.
 */
typedef struct SwBlockScan
{
	Relation	rel;
	TableScanDesc scan;			/* NULL if there is nothing to read */
	int			nranges;		/* -1: the whole heap */
	BlockNumber *pairs;			/* the ranges, [from, to) pairs */
	int			range;			/* the next range to read */
} SwBlockScan;

extern void sw_block_scan_begin(SwBlockScan *bs, Relation rel, Snapshot snapshot,
								const SwBatchMap *map, SwHeap heap);
extern void sw_block_scan_rescan(SwBlockScan *bs);
extern bool sw_block_scan_next(SwBlockScan *bs, TupleTableSlot *slot);
extern void sw_block_scan_end(SwBlockScan *bs);

/*
 * A scan of a source's hidden relations, current rows then history, that
 * returns the rows with something in a batch map's range: added or
 * retracted in it, or (a map from the beginning) added by a folded batch
 * and not retracted by one.  Each relation is read whole, or only in the
 * blocks that the map's batches wrote (sw_log_scan_written_blocks()).
 */
typedef struct SwLogScan
{
	Relation	rel[2];			/* current, history (either may be NULL) */
	SwLayout	layout[2];
	TupleTableSlot *slot[2];
	bool		written;		/* read only the blocks the batches wrote */
	int			which;			/* the relation being scanned */
	bool		scanning;		/* ... and bscan is open on it */
	SwBlockScan bscan;
	Snapshot	snapshot;
	const SwBatchMap *map;
} SwLogScan;

extern void sw_log_begin_scan(SwLogScan *ls, Relation ftrel, Relation current,
							  Relation history, Snapshot snapshot,
							  const SwBatchMap *map);
extern void sw_log_scan_written_blocks(SwLogScan *ls);
extern TupleTableSlot *sw_log_next(SwLogScan *ls, const SwLayout **layout,
								   SwLogRow *row);
extern void sw_log_end_scan(SwLogScan *ls);

#endif							/* SW_LOG_H */
