/*-------------------------------------------------------------------------
 *
 * log.h
 *		  The log and its commit protocol: the catalog, batches and their
 *		  timestamps, the hidden relations, reading and writing the log
 *
 * See doc/internals.md, "Source files".
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

#include "access/attnum.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "catalog/pg_attribute.h"
#include "common/sha2.h"
#include "executor/tuptable.h"
#include "nodes/execnodes.h"
#include "nodes/pg_list.h"
#include "storage/block.h"
#include "utils/hsearch.h"
#include "utils/relcache.h"
#include "utils/resowner.h"
#include "utils/snapshot.h"

#include "source_writes.h"

/*
 * catalog.c
 * The extension's catalog: which tables are sources, their frontiers
 * and their batches
 */

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
#define Anum_st_moved		8	/* from 0.3 on */
#define Natts_st			8

/*
 * What never changes about a source table while it exists: its kind and
 * its hidden relations; and whether it was moved (which happens once, and
 * invalidates the table's relcache entry).  Cached per backend.
 */
typedef struct SwSource
{
	Oid			relid;			/* the foreign table */
	SwKind		kind;
	Oid			current_rel;	/* hidden heap of current rows */
	Oid			history_rel;	/* hidden heap of retracted rows */
	Oid			key_index;		/* upsert sources: unique index on the key */
	bool		moved;			/* exported with a fence: it takes no writes */
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

struct SwSegmentSet;				/* segments.c */

/* a committed batch, as source_writes.batches keeps it */
typedef struct SwBatch
{
	int64		batch;			/* its id; the hash key of loaded batches */
	int64		ts;
	SwOrigin	origin;
	NameData	role;			/* who wrote it, as the role was named then */
	FullTransactionId xid;		/* ... in which transaction */
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

extern bool sw_catalog_exists(void);
extern bool sw_is_source_server(Oid serverid);
extern PGDLLEXPORT bool sw_is_source_table(Oid relid);
extern bool sw_check_source_privilege(Oid relid, Oid roleid, AclMode mode,
									  bool missing_ok);

extern void sw_key_index_name(const char *current_name, char *name);
extern void sw_meta_index_name(const char *hidden_name, const char *suffix,
							   char *name);
extern PGDLLEXPORT bool sw_source_lookup(Oid relid, SwSource *source);
extern void sw_source_require(Oid relid, SwSource *source);
extern void sw_source_resolve(Oid relid, SwSource *source, bool hint);
extern PGDLLEXPORT bool sw_source_check_kind(const SwSource *source, int kinds,
											 const char *detail);
extern List *sw_catalog_sources(Oid serverid);
extern PGDLLEXPORT List *sw_catalog_sources_of_kind(int kinds);
extern List *sw_catalog_source_relids(int kinds);

extern bool sw_catalog_frontiers(Oid relid, Snapshot snapshot,
								 SwFrontiers *frontiers);
extern int64 sw_retained_since(int64 since, int64 upper, int64 retain_ms);
extern bool sw_catalog_stored_frontiers(Oid relid, SwFrontiers *frontiers);
extern void sw_catalog_set_since(Oid relid, int64 since, int64 retain);
extern void sw_catalog_set_moved(Oid relid);
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
									 SwWrittenBlocks written[2],
									 struct SwSegmentSet **segments,
									 int64 load_until);
extern void sw_catalog_advance_progress(Oid relid, int32 part, int64 from,
										int64 to, int64 lost);
extern int	sw_catalog_count_batches_before(Oid relid, int64 before,
											Snapshot snapshot, int limit);
extern int64 sw_catalog_fold_batches(Oid relid, int64 since, Snapshot snapshot);
extern bytea *sw_catalog_segment_packed(ItemPointer tid);
extern int	sw_catalog_roll_up(Oid relid, int segment_batches, int64 delay_ms);
extern PGDLLEXPORT const char *sw_origin_name(SwOrigin origin);
extern SwOrigin sw_origin_of(const char *name);
extern Oid	sw_catalog_table_oid(void);
extern Oid	sw_catalog_errors_oid(Oid *index);
extern Oid	sw_catalog_deliveries_oid(Oid *key_index, Oid *ts_index);
extern Oid	sw_catalog_avro_schemas_oid(Oid *pkey);
extern void sw_catalog_copy_errors(Oid from, Oid to, Snapshot snapshot);
extern Oid	sw_catalog_uncarried_oid(void);


/* avro_schemas.c */
extern PGDLLEXPORT void sw_avro_schema_store(Oid serverid, const char *registry,
											 int32 id, const char *json);
extern PGDLLEXPORT char *sw_avro_schema_stored(Oid serverid, const char *registry,
											   int32 id);

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
extern List *sw_catalog_progress_at(Oid relid, Snapshot snapshot);
extern PGDLLEXPORT void sw_catalog_lock_progress(Oid relid);
extern PGDLLEXPORT void sw_catalog_start_progress(Oid relid, int32 part, int64 next_offset,
												  const char *topic, const char *cluster_id);
extern PGDLLEXPORT bool sw_catalog_set_progress(Oid relid, const SwProgress *p);
extern PGDLLEXPORT void sw_catalog_delete_progress(Oid relid);

/*
 * stamps.c
 * Handing out batch timestamps in shared memory
 */

/* a source whose batch a committing transaction stamps */
typedef struct SwStamping
{
	Oid			relid;
	bool		in_memory;		/* stamped in shared memory, not by the catalog */
	bool		pinned;			/* we hold a pin on its slot */
	SwStampState state;			/* the newest ts before ours; the pending */
} SwStamping;

extern const SwShmemRegistry sw_stamps_registry;
extern bool sw_stamps_available(void);
extern bool sw_stamps_install(Oid relid, int64 last_ts);
extern void sw_stamps_pin(SwStamping *sources, int n);
extern bool sw_stamps_take(SwStamping *sources, int n, int64 *ts);
extern void sw_stamps_done(const SwStamping *sources, int n);
extern void sw_stamps_unpin(SwStamping *sources, int n);

/*
 * controller.c
 * The controller: batches, their timestamps, and the frontiers
 */

extern int64 sw_now_ms(void);

/*
 * Called after commit or abort with each source whose upper may have
 * moved; cannot fail.  The notifier sets it (workers/workers.h) when the
 * library loads.
 */
extern void (*sw_upper_moved_hook) (Oid dboid, Oid relid);
/*
 * A check that the controller runs when it stamps the batches of the
 * committing transaction, under the stamp lock of the source it was
 * registered for; it raises an error to roll the transaction back.
 */
typedef void (*SwCommitCheck) (Oid relid, void *arg);

extern int64 sw_controller_batch(Oid relid, SwOrigin origin,
								 SwBlockRanges **blocks);
extern int64 sw_controller_batch_of(Oid relid, SwOrigin origin, Oid role,
									 SwBlockRanges **blocks);
extern void sw_controller_on_commit(Oid relid, SwCommitCheck check, void *arg);
extern bool sw_controller_wrote(Oid relid, int64 batch);
extern void sw_controller_history_blocks(Oid relid, SwWrittenBlocks *written);
extern void sw_check_readable(Oid relid, const SwFrontiers *frontiers, int64 ts);

/*
 * layout.c
 * Where a source table's columns are in its hidden relations, and
 * reading their rows
 */

/* schema of the hidden relations that hold the rows of source tables */
#define SW_INTERNAL_SCHEMA	"source_writes_internal"

/*
 * The hidden relations hold the foreign table's columns in their order,
 * attnum for attnum, with our own columns in runs between them: a
 * relation made now has the table's columns as they were when it was
 * created, then ours ("$part", "$pos", "$delivery", the raw message's
 * columns where the table has retain_raw, "$batch", and in the history
 * "$retracted"), then the columns added to the table later.  One made
 * before provenance was kept has "$batch" (and "$retracted") there, and
 * the provenance columns in a second run, where the update of the
 * extension added them; the raw message's columns, where retain_raw was
 * turned on later, come in a run of their own where that ALTER added them.
 */
#define SW_CURRENT_META		4	/* "$part", "$pos", "$delivery" (webhooks), "$batch" */
#define SW_HISTORY_META		5	/* ... and "$retracted": at most, and
								 * SW_NUM_RAW more with retain_raw */
#define SW_META_PART		"$part"
#define SW_META_POS			"$pos"
#define SW_META_DELIVERY	"$delivery"
#define SW_META_BATCH		"$batch"
#define SW_META_RETRACTED	"$retracted"

/*
 * The message a row came from, as it came, where the table has retain_raw
 * (see sw_raw_message()): a Kafka message's key, value, timestamp and
 * headers (as source_writes.errors keeps them); a webhook delivery's piece
 * of the body the row was decoded from, in "$value" (not its request's
 * headers, which carry signatures and tokens).
 */
#define SW_META_RAW_KEY				"$key"
#define SW_META_RAW_VALUE			"$value"
#define SW_META_RAW_TIMESTAMP		"$timestamp"
#define SW_META_RAW_HEADER_NAMES	"$header_names"
#define SW_META_RAW_HEADER_VALUES	"$header_values"

/* the raw message's columns, in SwLayout.raw and SwPosition.raw */
typedef enum SwRawColumn
{
	SW_RAW_KEY = 0,				/* bytea, NULL: no key */
	SW_RAW_VALUE,				/* bytea, NULL: no value */
	SW_RAW_TIMESTAMP,			/* bigint, ms since the epoch, -1: none;
								 * never NULL in a row that keeps one */
	SW_RAW_HEADER_NAMES,		/* text[], NULL: no headers */
	SW_RAW_HEADER_VALUES,		/* bytea[], with NULLs for null values */
	SW_NUM_RAW
} SwRawColumn;

/* does a source of a kind keep this one?  Kafka all, webhooks "$value" */
static inline bool
sw_raw_column_of(SwKind kind, SwRawColumn column)
{
	return kind != SW_KIND_WEBHOOK || column == SW_RAW_VALUE;
}

extern const char *const sw_raw_names[SW_NUM_RAW];

/* most runs of our columns a hidden relation may have */
#define SW_LAYOUT_RUNS		3

/* where a hidden relation's own columns are */
typedef struct SwLayout
{
	AttrNumber	batch;			/* attnum of "$batch" */
	AttrNumber	retracted;		/* ... of "$retracted" (history), or 0 */
	AttrNumber	part;			/* ... of "$part", "$pos" and "$delivery" */
	AttrNumber	pos;
	AttrNumber	delivery;
	AttrNumber	raw[SW_NUM_RAW];	/* ... of the raw message's, by
									 * SwRawColumn, or 0 */
	int			nmeta;			/* how many of ours */
	int			nruns;			/* in how many runs: */
	struct
	{
		AttrNumber	before;		/* the run comes before this attnum of the
								 * foreign table's */
		int16		length;
	}			runs[SW_LAYOUT_RUNS];
} SwLayout;

/* a column of ours in a hidden row, NULL where the layout has none */
static inline Datum
sw_meta_value(TupleTableSlot *hidden, AttrNumber attnum, bool *isnull)
{
	if (attnum == InvalidAttrNumber)
	{
		*isnull = true;
		return (Datum) 0;
	}
	return slot_getattr(hidden, attnum, isnull);
}

/* the hidden attnum of the foreign table's attnum */
static inline AttrNumber
sw_hidden_attnum(const SwLayout *layout, AttrNumber attnum)
{
	AttrNumber	hidden = attnum;

	for (int i = 0; i < layout->nruns; i++)
		if (attnum >= layout->runs[i].before)
			hidden += layout->runs[i].length;
	return hidden;
}

/* does a relation have all of our columns that a source of its kind has? */
static inline bool
sw_layout_complete(const SwLayout *layout, SwKind kind)
{
	return layout->part != InvalidAttrNumber && layout->pos != InvalidAttrNumber &&
		(kind != SW_KIND_WEBHOOK || layout->delivery != InvalidAttrNumber);
}

/*
 * does a relation have the columns of the raw message that a source of its
 * kind keeps?
 */
static inline bool
sw_layout_has_raw(const SwLayout *layout, SwKind kind)
{
	for (int i = 0; i < SW_NUM_RAW; i++)
		if (sw_raw_column_of(kind, i) && layout->raw[i] == InvalidAttrNumber)
			return false;
	return true;
}

/* the foreign table's attnum of a hidden attnum, or 0 for one of ours */
static inline AttrNumber
sw_table_attnum(const SwLayout *layout, AttrNumber hidden)
{
	AttrNumber	attnum = hidden;

	for (int i = 0; i < layout->nruns; i++)
	{
		AttrNumber	start = sw_hidden_attnum(layout, layout->runs[i].before) -
			layout->runs[i].length;

		if (hidden >= start + layout->runs[i].length)
			attnum -= layout->runs[i].length;
		else if (hidden >= start)
			return InvalidAttrNumber;
	}
	return attnum;
}

/* a scan of a hidden heap's rows as they are now (the latest snapshot) */
typedef struct SwRowScan
{
	Snapshot	snapshot;
	struct TableScanDescData *scan;
	TupleTableSlot *slot;
} SwRowScan;

extern Oid	sw_hidden_type(Form_pg_attribute fatt, int32 *typmod);
extern bool sw_find_layout(TupleDesc hdesc, SwLayout *layout);
extern bool sw_check_layout(Relation ftrel, Relation hidden, SwLayout *layout,
							bool names, const char **column);
extern void sw_storage_layout(Relation ftrel, Relation hidden, SwLayout *layout);
extern int	sw_storage_raw_columns(const SwSource *source);
extern void sw_to_hidden(const SwLayout *layout, int natts,
						 const Datum *values, const bool *isnull,
						 Datum *hvalues, bool *hisnull);
extern void sw_from_hidden(const SwLayout *layout, int natts,
						   const Datum *hvalues, const bool *hisnull,
						   Datum *values, bool *isnull);
extern void sw_rows_begin(SwRowScan *rs, Relation hidden);
extern TupleTableSlot *sw_rows_next(SwRowScan *rs);
extern void sw_rows_end(SwRowScan *rs);

/*
 * storage.c
 * The hidden relations that hold a source table's rows, and keeping
 * them in step with the foreign table
 */

/*
 * What errors raised while working on a source's hidden relations may name
 * of them, and the source's own names to say instead (see
 * sw_storage_rethrow()).
 */
typedef struct SwHiddenNames
{
	const char *hidden[3];		/* key index, current heap, history heap */
	const char *table;			/* the source table */
	const char *schema;			/* ... and its schema */
} SwHiddenNames;

extern List *sw_storage_sync(Oid relid, List *retyped);
extern void sw_storage_fill_added(Oid relid, List *attnums);
extern void sw_storage_forget(Oid relid);
extern bool sw_storage_complete(Oid relid);
extern void sw_storage_depend(Oid relid, Oid hiddenid);
extern void sw_storage_hidden_names(Relation ftrel, const SwSource *source,
									SwHiddenNames *names);
extern void sw_storage_rename_error(ErrorData *edata, const SwHiddenNames *names);
extern void sw_storage_rethrow(const SwHiddenNames *names,
							   MemoryContext cxt) pg_attribute_noreturn();
extern bool sw_storage_restore_dependencies(void);
extern Oid	sw_storage_source_of_current(Oid hiddenid);
extern void sw_storage_mark_current(Oid relid, Oid hiddenid);
extern Oid	sw_storage_marked_source(Oid hiddenid);
extern bool sw_storage_reserved_index_name(Oid hiddenid, const char *name);
extern void sw_storage_place_index(Oid relid, Oid hiddenid, Oid indexid);
extern bool sw_storage_place_indexes(Oid relid, Oid hiddenid, bool nowait);

/*
 * segments.c
 * Batches rolled up into segments of source_writes.batch_segments
 */

/* the batches per segment that a rollup makes (source_writes.segment_batches) */
extern int	sw_segment_batches;
/* how long (ms) batches stay rows first (source_writes.segment_delay) */
extern int	sw_segment_delay;

/* where a chunk of a segment's packed batches is, and what it starts from */
typedef struct SwPackedChunk
{
	int32		offset;			/* of its bytes, in the packed bytea's data */
	int32		len;
	int64		id_base;		/* the id, timestamp and transaction of the */
	int64		ts_base;		/* batch before it (of the first: the */
	uint64		xid_base;		/* segment's first id and ts, and 0) */
} SwPackedChunk;

/* a segment a reader loaded: its bounds and dictionary; its batches, unpacked */
typedef struct SwSegment
{
	int64		batch_from;		/* its lowest and highest batch ids */
	int64		batch_to;
	int64		ts_from;		/* its oldest and newest timestamps */
	int64		ts_to;
	int64		max_to;			/* the highest batch_to of it and those before */
	int			nbatches;
	int			nkinds;			/* its dictionary: (origin, role) pairs */
	SwOrigin   *origins;
	NameData   *roles;
	ItemPointerData tid;		/* its row, whose packed batches are read
								 * when it is opened */
	/* opened, while it is among those a reader keeps so: */
	bytea	   *packed;			/* its packed batches */
	uint8		format;			/* their format (the first byte) */
	int			chunk_batches;	/* the batches of a chunk (the last: fewer) */
	int			chunk_shift;	/* its log2, -1 if not a power of two */
	int			nchunks;
	SwPackedChunk *chunks;	/* where each is, what it starts from */
	bool	   *unpacked;		/* which chunks are in the arrays below */
	int			nunpacked;		/* how many */
	int64	   *ids;			/* arrays of nbatches, filled a chunk at a
								 * time */
	int64	   *ts;
	uint16	   *kinds;
	uint64	   *xids;			/* full transaction ids, 0 for none */
	uint64		used;			/* when it was last looked in */
} SwSegment;

/* the segments a reader loaded, sorted by batch_from */
typedef struct SwSegmentSet
{
	MemoryContext cxt;
	int			n;
	int			max;
	SwSegment  *segs;
	int			nopen;			/* how many are opened */
	uint64		clock;
	int			last;			/* where the last batch was found, or -1 */
} SwSegmentSet;

extern bytea *sw_segment_pack(int n, const int64 *ids, const int64 *ts,
							  const uint16 *kinds, const uint64 *xids,
							  int64 batch_from, int64 ts_from);
extern void sw_segment_check(int n, int64 batch_from, int64 batch_to,
							 int64 ts_from, int64 ts_to);
extern void sw_segment_unpack(const bytea *packed, int n, int64 batch_from,
							  int64 batch_to, int64 ts_from, int64 ts_to,
							  int nkinds, int64 *ids, int64 *ts, uint16 *kinds,
							  uint64 *xids);
extern SwSegmentSet *sw_segments_create(void);
extern SwSegment *sw_segments_add(SwSegmentSet *set);
extern void sw_segments_finish(SwSegmentSet *set);
extern bool sw_segments_find(SwSegmentSet *set, int64 id, SwBatch *batch);
extern int64 sw_segments_oldest(SwSegmentSet *set, int64 from);
extern void sw_segments_each(SwSegmentSet *set,
							 void (*fn) (const SwBatch *batch, void *arg), void *arg);

/*
 * log.c
 * Reading a source's log out of its hidden relations
 */

/*
 * The committed batches of a source with ts >= from, as one snapshot sees
 * them, and what a reader asks of them: the range [from, until).
 */
typedef struct SwBatchMap
{
	Oid			relid;
	HTAB	   *batches;		/* batch id -> SwBatch, of those not rolled up */
	long		nrows;			/* how many it holds */
	SwSegmentSet *segments;		/* the segments with batches from from on */
	SwBatch    *found;			/* where batches found in segments go: two,
								 * for the row's addition and retraction */
	bool	   *found_ok;		/* whether each holds one */
	int64		from;
	int64		until;
	SwWrittenBlocks written[2]; /* where they wrote rows, by SwHeap: in the
								 * current heap those before until, in the
								 * history all, and the reader's own */
	int64		oldest_ts;		/* the oldest batch's ts, PG_INT64_MAX if none
								 * (or not known: a window's map) */
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
	bool		noop;			/* a history row added and retracted by one
								 * batch: a trace, never a row (see
								 * sw_log_row()) */
} SwLogRow;

extern SwBatchMap *sw_log_batches(Oid relid, int64 from, int64 until,
								  Snapshot snapshot);
extern SwBatchMap *sw_log_window_batches(Oid relid, int64 from, int64 until,
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
 * and not retracted by one; or every row, those of the reader's own
 * transaction too (every_row).  Each relation is read whole, or only in
 * the blocks that the map's batches wrote (sw_log_scan_written_blocks()).
 * No-op rows, which are no rows, are left out, unless keep_noop (those
 * that carry the log: export(), a version's copy).
 */
typedef struct SwLogScan
{
	Relation	rel[2];			/* current, history (either may be NULL) */
	SwLayout	layout[2];
	TupleTableSlot *slot[2];
	bool		written;		/* read only the blocks the batches wrote */
	bool		every_row;		/* return every row the snapshot sees */
	bool		keep_noop;		/* return no-op rows too (see SwLogRow) */
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

/*
 * subxact.c
 * Ending a subtransaction, and going back to where it began
 */

extern PGDLLEXPORT void sw_release_sub(MemoryContext cxt, ResourceOwner owner);
extern PGDLLEXPORT void sw_roll_back_sub(MemoryContext cxt, ResourceOwner owner);

/*
 * writer.c
 * The one path that writes a source table's rows
 */

typedef struct SwWriter SwWriter;

/*
 * Where a new row comes from, kept with it ("$part", "$pos", "$delivery"):
 * a Kafka message's partition and offset; a webhook delivery's request
 * (its arrival in microseconds since the Unix epoch, unique per source),
 * the row's place in its body, and its idempotency key.  A person's new
 * row has none; a person's UPDATE keeps the position of the row it
 * replaces.  With retain_raw, the message itself too, as it came (by
 * SwRawColumn): a person's rows, UPDATEs included, keep none.
 */
typedef struct SwPosition
{
	bool		known;			/* false: no message */
	int32		part;			/* Kafka: the partition; webhooks: the row's
								 * place in the body, from 0 */
	int64		pos;			/* Kafka: the offset; webhooks: the request */
	const char *delivery;		/* webhooks: the idempotency key, or NULL */
	bool		raw_kept;		/* raw and raw_null hold the raw message */
	Datum		raw[SW_NUM_RAW];
	bool		raw_null[SW_NUM_RAW];
} SwPosition;

extern PGDLLEXPORT SwWriter *sw_writer_open(Relation ftrel, SwOrigin origin, Oid role,
											EState *estate);
extern PGDLLEXPORT void sw_writer_close(SwWriter *w);
extern void sw_writer_log_as(SwWriter *w, Oid role);
extern PGDLLEXPORT void sw_writer_set_position(SwWriter *w, const SwPosition *position);
extern bool sw_writer_fires_row_triggers(SwWriter *w);
extern bool sw_writer_failed_in_trigger(SwWriter *w);

extern PGDLLEXPORT void sw_writer_check_constraints(SwWriter *w, TupleTableSlot *row);
extern void sw_writer_complete_row(SwWriter *w, TupleTableSlot *row);
extern void sw_writer_reset_checks(SwWriter *w);
extern void sw_writer_safe_search_path(void);
extern PGDLLEXPORT void sw_writer_forget_session_state(void);
extern PGDLLEXPORT void sw_writer_commit_durably(bool watch);
extern bool sw_transaction_writes(Oid relid);

/*
 * loader.c: a whole log written at once (import(), a version's first
 * copy): row versions straight into the hidden heaps, as COPY writes rows.
 */
typedef struct SwLoader SwLoader;

extern SwLoader *sw_loader_open(Relation ftrel, const SwSource *source);
extern void sw_loader_add(SwLoader *ld, const Datum *values, const bool *isnull,
						  int64 added, int64 retracted, const SwPosition *pos,
						  int64 tag);
extern int64 sw_loader_tag(SwLoader *ld);
extern int64 sw_loader_close(SwLoader *ld);
extern PGDLLEXPORT bool sw_writer_commit_replicated(void);
extern PGDLLEXPORT void sw_writer_insert(SwWriter *w, TupleTableSlot *row);
extern PGDLLEXPORT bool sw_writer_append(SwWriter *w, TupleTableSlot *row);
extern void sw_writer_flush(SwWriter *w);
extern void sw_writer_use_bulk_state(SwWriter *w, BulkInsertState bistate);
extern void sw_writer_allow_subtransactions(SwWriter *w);
extern void sw_writer_sub_end(SwWriter *w, bool commit);
extern bool sw_writer_failed_flushing(SwWriter *w);
extern PGDLLEXPORT bool sw_writer_upsert(SwWriter *w, TupleTableSlot *row);
extern PGDLLEXPORT bool sw_writer_tombstone(SwWriter *w, TupleTableSlot *key);
extern TM_Result sw_writer_update(SwWriter *w, ItemPointer tid, HeapTuple old,
								  TupleTableSlot *row, TM_FailureData *tmfd,
								  LockTupleMode *lockmode);
extern TM_Result sw_writer_delete(SwWriter *w, ItemPointer tid, HeapTuple old,
								  TM_FailureData *tmfd);
extern void sw_writer_truncate(SwWriter *w);
extern PGDLLEXPORT void sw_writer_consumed(SwWriter *w, int32 part, int64 from, int64 to);
extern void sw_writer_consumed_lost(SwWriter *w, int32 part, int64 from,
									int64 to, int64 lost);
extern void sw_writer_write_history_now(SwWriter *w);

extern ItemPointer sw_writer_last_tid(SwWriter *w);
extern Relation sw_writer_current(SwWriter *w);
extern bool sw_writer_has_key(SwWriter *w);
extern void sw_writer_to_row(SwWriter *w, TupleTableSlot *hidden,
							 TupleTableSlot *row);

/*
 * constraints.c
 * Constraints over the current rows of source tables
 */

extern void sw_domain_check_values(Relation current, AttrNumber hattnum, Oid domain);
extern List *sw_domain_checks(Oid domain, EState *estate, bool *notnull, List **names);
extern void sw_domain_altered(Oid domain);
extern void sw_constraints_check(Relation ftrel);

/*
 * compaction.c
 * Deleting the history that no readable time needs, and rolling batches
 * up into segments
 */

extern int	sw_roll_up(Oid relid, bool wait);
extern bool sw_compact(Oid relid, bool wait, BlockNumber start,
					   BlockNumber nblocks, int64 *removed, BlockNumber *next);

/*
 * deliveries.c
 * Idempotency keys of webhook deliveries
 */

/* the longest idempotency key taken, in bytes */
#define SW_DELIVERY_KEY_MAX		255

/* what is known of a delivery's key */
typedef enum SwDeliveryState
{
	SW_DELIVERY_NEW,			/* not seen: write it */
	SW_DELIVERY_REPEAT,			/* written, with the same body */
	SW_DELIVERY_CONFLICT,		/* written, with another body */
	SW_DELIVERY_CHANGING		/* another transaction is deleting it */
} SwDeliveryState;

extern PGDLLEXPORT SwDeliveryState sw_delivery_lookup(Oid relid, const char *key,
													  const uint8 *body_sha256, int32 *rows);
extern PGDLLEXPORT void sw_delivery_insert(Oid relid, const char *key, int64 received_ms,
										   const uint8 *body_sha256, int32 rows);
extern int64 sw_deliveries_forget(Oid relid, int64 before);

/* a kept key of a delivery, as export() writes it */
typedef struct SwDelivery
{
	char	   *key;
	int64		ts;
	uint8		body_sha256[PG_SHA256_DIGEST_LENGTH];
	int32		rows;
} SwDelivery;

extern List *sw_deliveries_of(Oid relid, Snapshot snapshot);

#endif							/* SW_LOG_H */
