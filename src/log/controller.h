/*-------------------------------------------------------------------------
 *
 * controller.h
 *		  The controller: batches, their timestamps, and the frontiers
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/controller.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_CONTROLLER_H
#define SW_CONTROLLER_H

#include "catalog.h"

extern int64 sw_now_ms(void);
extern char *sw_channel_name(Oid relid);
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

#endif							/* SW_CONTROLLER_H */
