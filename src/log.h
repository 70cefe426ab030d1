/*-------------------------------------------------------------------------
 *
 * log.h
 *		  Reading a source's log out of its hidden relations
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log.h
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
	int64		min_id;			/* the smallest id among them and the
								 * reader's own batches; PG_INT64_MAX if none */
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
 * A scan of a source's hidden relations, current rows then history, that
 * returns the rows with something in a batch map's range: added or
 * retracted in it, or (a map from the beginning) added by a folded batch
 * and not retracted by one.  Each relation is read whole, or only in part:
 * the current heap in the blocks the map's batches wrote, the history
 * through the index on its "$retracted" from the map's smallest id on.
 */
typedef struct SwLogScan
{
	Relation	rel[2];			/* current, history (either may be NULL) */
	SwLayout	layout[2];
	TupleTableSlot *slot[2];
	Oid			index[2];		/* read through this index, if valid */
	int			nranges;		/* the current heap: read only these blocks, */
	BlockNumber *range_from;	/* if nranges >= 0 */
	BlockNumber *range_to;
	int			range;			/* the range being read */
	int			which;			/* the relation being scanned */
	TableScanDesc scan;
	Relation	index_rel;
	struct IndexScanDescData *iscan;
	Snapshot	snapshot;
	const SwBatchMap *map;
} SwLogScan;

extern void sw_log_begin_scan(SwLogScan *ls, Relation ftrel, Relation current,
							  Relation history, Snapshot snapshot,
							  const SwBatchMap *map);
extern void sw_log_scan_by_index(SwLogScan *ls, bool history, Oid index);
extern void sw_log_scan_written_blocks(SwLogScan *ls);
extern TupleTableSlot *sw_log_next(SwLogScan *ls, const SwLayout **layout,
								   SwLogRow *row);
extern void sw_log_end_scan(SwLogScan *ls);
extern bool sw_index_scan_begin(struct IndexScanDescData **iscan,
								Relation *index_rel, Relation heap, Oid index,
								Snapshot snapshot, int64 min_id);

#endif							/* SW_LOG_H */
