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
 * The committed batches of a source with from <= ts < until, as one
 * snapshot sees them.
 */
typedef struct SwBatchMap
{
	HTAB	   *batches;		/* batch id -> SwBatch */
	int64		from;
	int64		until;
} SwBatchMap;

/*
 * What a hidden row says in the log, as far as a batch map covers it: the
 * batch that added the row, and (history rows) the one that retracted it;
 * NULL where that batch is outside the map's range or not committed.
 */
typedef struct SwLogRow
{
	const SwBatch *added;
	const SwBatch *retracted;
} SwLogRow;

extern SwBatchMap *sw_log_batches(Oid relid, int64 from, int64 until,
								  Snapshot snapshot);
extern void sw_log_row(const SwBatchMap *map, TupleTableSlot *hidden,
					   const SwLayout *layout, bool history, SwLogRow *row);

/*
 * Is the row in the contents at T?  With a map of the batches at or before
 * T: it was added by one of them and not retracted by one of them.
 */
static inline bool
sw_log_row_present(const SwLogRow *row)
{
	return row->added != NULL && row->retracted == NULL;
}

/*
 * A scan of a source's hidden relations, current rows then history, that
 * returns the rows a batch map has something to say about.
 */
typedef struct SwLogScan
{
	Relation	rel[2];			/* current, history (either may be NULL) */
	SwLayout	layout[2];
	TupleTableSlot *slot[2];
	int			which;			/* the relation being scanned */
	TableScanDesc scan;
	Snapshot	snapshot;
	const SwBatchMap *map;
} SwLogScan;

extern void sw_log_begin_scan(SwLogScan *ls, Relation ftrel, Relation current,
							  Relation history, Snapshot snapshot,
							  const SwBatchMap *map);
extern TupleTableSlot *sw_log_next(SwLogScan *ls, const SwLayout **layout,
								   SwLogRow *row);
extern void sw_log_end_scan(SwLogScan *ls);

#endif							/* SW_LOG_H */
