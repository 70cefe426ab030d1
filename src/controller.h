/*-------------------------------------------------------------------------
 *
 * controller.h
 *		  The controller: batches, their timestamps, and the frontiers
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/controller.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_CONTROLLER_H
#define SW_CONTROLLER_H

#include "catalog.h"

extern int64 sw_now_ms(void);
extern char *sw_channel_name(Oid relid);
extern int64 sw_controller_batch(Oid relid, SwOrigin origin);
extern bool sw_controller_wrote(Oid relid, int64 batch);
extern void sw_check_readable(Oid relid, const SwFrontiers *frontiers, int64 ts);

#endif							/* SW_CONTROLLER_H */
