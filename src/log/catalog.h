/*-------------------------------------------------------------------------
 *
 * catalog.h
 *		  The extension's catalog: which tables are sources, their frontiers
 *		  and their batches
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/catalog.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_CATALOG_H
#define SW_CATALOG_H

#include "access/transam.h"
#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/hsearch.h"
#include "utils/snapshot.h"

#include "source_writes.h"

/* schema of the extension's user-facing objects and catalog tables */
#define SW_SCHEMA			"source_writes"

/* columns of source_writes.source_tables */
#define Anum_st_relid		1
#define Anum_st_kind		2
#define Anum_st_current_rel 3
#define Anum_st_history_rel 4
#define Anum_st_upper		5
#define Anum_st_since		6
#define Anum_st_retain		7
#define Natts_st			7

/*
 * What never changes about a source table while it exists: its kind and
 * its hidden relations.  Cached per backend.
 */
typedef struct SwSource
{
	Oid			relid;			/* the foreign table */
	SwKind		kind;
	Oid			current_rel;	/* hidden heap of current rows */
	Oid			history_rel;	/* hidden heap of retracted rows */
	Oid			key_index;		/* upsert sources: unique index on the key */
} SwSource;

/* the suffix of the name of the key index beside the current heap */
#define SW_KEY_INDEX_SUFFIX			"key"

/*
 * The readable range of a source: since <= T < upper; and the retention
 * (retain_history in ms, -1 for ever) that since follows.
 */
typedef struct SwFrontiers
{
	int64		since;
	int64		upper;
	int64		retain;
} SwFrontiers;

/*
 * Where in a hidden heap a batch wrote rows: the heap's file, and up to
 * SW_MAX_BLOCK_RANGES ranges of blocks [from, to).  A batch whose rows are
 * too scattered gets wider ranges, never fewer blocks.  n is -1 where it
 * is not known (the heap was rewritten while the batch wrote): readers
 * then read the whole heap.  A batch has one for each hidden heap: the
 * current rows it added, the history rows of those it retracted.
 */
#define SW_MAX_BLOCK_RANGES	16

typedef struct SwBlockRanges
{
	Oid			file;
	int			n;
	BlockNumber from[SW_MAX_BLOCK_RANGES];
	BlockNumber to[SW_MAX_BLOCK_RANGES];
} SwBlockRanges;

/* the hidden heaps of a source, as indexes of SwBlockRanges[2] and the like */
typedef enum SwHeap
{
	SW_CURRENT_HEAP = 0,
	SW_HISTORY_HEAP = 1
} SwHeap;

/*
 * Where a set of batches wrote rows in one hidden heap, all together: the
 * heap's file and [from, to) pairs of blocks, unsorted; or not known, when
 * one of them does not say, or says it of another file.
 */
typedef struct SwWrittenBlocks
{
	bool		known;
	Oid			file;			/* InvalidOid while no batch named one */
	int			npairs;
	int			maxpairs;
	BlockNumber *pairs;
} SwWrittenBlocks;

extern void sw_block_ranges_add(SwBlockRanges *ranges, Oid file, BlockNumber block);
extern void sw_written_blocks_init(SwWrittenBlocks *written);
extern void sw_written_blocks_add(SwWrittenBlocks *written,
								  const SwBlockRanges *ranges);

/* a committed batch, as source_writes.batches keeps it */
typedef struct SwBatch
{
	int64		batch;			/* its id; the hash key of loaded batches */
	int64		ts;
	SwOrigin	origin;
	NameData	role;			/* who wrote it, as the role was named then */
} SwBatch;

/* a batch that was still committing when a later one was stamped */
typedef struct SwPending
{
	int64		ts;
	FullTransactionId xid;
} SwPending;

/* what the controller needs to know to stamp a batch of a source */
typedef struct SwStampState
{
	int64		top;			/* the newest timestamp given, 0 if none */
	int			npending;		/* the batches still committing */
	int			maxpending;
	SwPending  *pending;
} SwStampState;

extern PGDLLEXPORT bool sw_catalog_exists(void);
extern bool sw_is_source_server(Oid serverid);
extern PGDLLEXPORT bool sw_is_source_table(Oid relid);

extern void sw_key_index_name(const char *current_name, char *name);
extern void sw_meta_index_name(const char *hidden_name, const char *suffix,
							   char *name);
extern PGDLLEXPORT bool sw_source_lookup(Oid relid, SwSource *source);
extern void sw_source_require(Oid relid, SwSource *source);
extern PGDLLEXPORT List *sw_catalog_sources(Oid serverid);

extern bool sw_catalog_frontiers(Oid relid, Snapshot snapshot,
								 SwFrontiers *frontiers);
extern int64 sw_retained_since(int64 since, int64 upper, int64 retain_ms);
extern bool sw_catalog_stored_frontiers(Oid relid, SwFrontiers *frontiers);
extern void sw_catalog_set_since(Oid relid, int64 since, int64 retain);
extern void sw_catalog_lock_source(Oid relid);
extern void sw_catalog_unlock_source(Oid relid);
extern bool sw_catalog_lock_compaction(Oid relid, bool wait);
extern bool sw_catalog_stamp_state(Oid relid, SwStampState *state);

extern void sw_catalog_insert(const SwSource *source,
							  const SwFrontiers *frontiers);
extern void sw_catalog_delete(Oid relid);
extern void sw_catalog_delete_row(Oid relid);

extern int64 sw_catalog_new_batch_id(void);
extern void sw_catalog_insert_batch(Oid relid, const SwBatch *batch,
									int npending, const SwPending *pending,
									const SwBlockRanges blocks[2]);
extern HTAB *sw_catalog_load_batches(Oid relid, int64 from_ts, Snapshot snapshot,
									 int64 current_until,
									 SwWrittenBlocks written[2]);
extern void sw_catalog_advance_progress(Oid relid, int32 part, int64 from,
										int64 to, int64 lost);
extern int	sw_catalog_count_batches_before(Oid relid, int64 before,
											Snapshot snapshot, int limit);
extern int64 sw_catalog_fold_batches(Oid relid, int64 since, Snapshot snapshot);
extern PGDLLEXPORT const char *sw_origin_name(SwOrigin origin);
extern Oid	sw_catalog_table_oid(void);
extern Oid	sw_catalog_errors_oid(Oid *index);
extern Oid	sw_catalog_deliveries_oid(Oid *key_index, Oid *ts_index);

/*
 * A partition's stored progress: its next offset, and what that is a
 * position in.  reset_offsets() may store one of these two instead of an
 * offset, for the worker to look up (librdkafka's own values for them).
 */
#define SW_OFFSET_EARLIEST	(-2)
#define SW_OFFSET_LATEST	(-1)

/* why a partition's stored offset is not followed (progress.stopped) */
#define SW_STOPPED_CLUSTER	"cluster changed"
#define SW_STOPPED_PAST_END	"offsets past the end"

typedef struct SwProgress
{
	int32		part;
	int64		next_offset;	/* or SW_OFFSET_EARLIEST, SW_OFFSET_LATEST */
	char	   *topic;			/* the topic it is an offset of; NULL: unknown */
	char	   *cluster_id;		/* the cluster's id; NULL: unknown */
	int64		lost;			/* offsets deleted before they were ingested */
	char	   *stopped;		/* why it is not followed; NULL: it is */
} SwProgress;

extern PGDLLEXPORT bool sw_catalog_progress_has_identity(void);
extern PGDLLEXPORT List *sw_catalog_progress(Oid relid);
extern PGDLLEXPORT void sw_catalog_lock_progress(Oid relid);
extern PGDLLEXPORT void sw_catalog_start_progress(Oid relid, int32 part, int64 next_offset,
												  const char *topic, const char *cluster_id);
extern PGDLLEXPORT bool sw_catalog_set_progress(Oid relid, const SwProgress *p);
extern PGDLLEXPORT void sw_catalog_delete_progress(Oid relid);

#endif							/* SW_CATALOG_H */
