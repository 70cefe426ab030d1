/*-------------------------------------------------------------------------
 *
 * writer.h
 *		  The one path that writes a source table's rows
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/writer.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WRITER_H
#define SW_WRITER_H

#include "access/heapam.h"
#include "access/tableam.h"
#include "nodes/execnodes.h"

#include "source_writes.h"

typedef struct SwWriter SwWriter;

extern PGDLLEXPORT SwWriter *sw_writer_open(Relation ftrel, SwOrigin origin, Oid role,
											EState *estate);
extern PGDLLEXPORT void sw_writer_close(SwWriter *w);
extern void sw_writer_log_as(SwWriter *w, Oid role);
extern bool sw_writer_fires_row_triggers(SwWriter *w);
extern bool sw_writer_failed_in_trigger(SwWriter *w);

extern PGDLLEXPORT void sw_writer_check_constraints(SwWriter *w, TupleTableSlot *row);
extern void sw_writer_complete_row(SwWriter *w, TupleTableSlot *row);
extern void sw_writer_reset_checks(SwWriter *w);
extern void sw_writer_safe_search_path(void);
extern PGDLLEXPORT void sw_writer_forget_session_state(void);
extern PGDLLEXPORT void sw_writer_commit_durably(bool watch);
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

#endif							/* SW_WRITER_H */
