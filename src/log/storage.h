/*-------------------------------------------------------------------------
 *
 * storage.h
 *		  The hidden relations that hold a source table's rows
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/storage.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_STORAGE_H
#define SW_STORAGE_H

#include "access/attnum.h"
#include "executor/tuptable.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "catalog.h"

/* schema of the hidden relations that hold the rows of source tables */
#define SW_INTERNAL_SCHEMA	"source_writes_internal"

/*
 * The hidden relations hold the foreign table's columns as they were when
 * it was created, attnum for attnum, then our own columns, then the
 * columns added to the table later, again attnum for attnum after ours.
 */
#define SW_CURRENT_META		1	/* "$batch" */
#define SW_HISTORY_META		2	/* "$batch", "$retracted" */
#define SW_META_BATCH		"$batch"
#define SW_META_RETRACTED	"$retracted"

/* where a hidden relation's own columns are */
typedef struct SwLayout
{
	AttrNumber	meta;			/* attnum of "$batch" */
	int			nmeta;			/* how many of ours: SW_*_META */
} SwLayout;

/* the hidden attnum of the foreign table's attnum */
static inline AttrNumber
sw_hidden_attnum(const SwLayout *layout, AttrNumber attnum)
{
	return attnum < layout->meta ? attnum : attnum + layout->nmeta;
}

/* a scan of a hidden heap's rows as they are now (the latest snapshot) */
typedef struct SwRowScan
{
	Snapshot	snapshot;
	struct TableScanDescData *scan;
	TupleTableSlot *slot;
} SwRowScan;

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

extern void sw_rows_begin(SwRowScan *rs, Relation hidden);
extern TupleTableSlot *sw_rows_next(SwRowScan *rs);
extern void sw_rows_end(SwRowScan *rs);

extern List *sw_storage_sync(Oid relid, List *retyped);
extern void sw_storage_fill_added(Oid relid, List *attnums);
extern void sw_storage_forget(Oid relid);
extern void sw_storage_depend(Oid relid, Oid hiddenid);
extern void sw_storage_hidden_names(Relation ftrel, const SwSource *source,
									SwHiddenNames *names);
extern void sw_storage_rename_error(ErrorData *edata, const SwHiddenNames *names);
extern void sw_storage_rethrow(const SwHiddenNames *names,
							   MemoryContext cxt) pg_attribute_noreturn();
extern bool sw_storage_restore_dependencies(void);
extern void sw_storage_layout(Relation ftrel, Relation hidden, SwLayout *layout);
extern void sw_to_hidden(const SwLayout *layout, int natts,
						 const Datum *values, const bool *isnull,
						 Datum *hvalues, bool *hisnull);
extern void sw_from_hidden(const SwLayout *layout, int natts,
						   const Datum *hvalues, const bool *hisnull,
						   Datum *values, bool *isnull);

#endif							/* SW_STORAGE_H */
