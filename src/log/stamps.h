/*-------------------------------------------------------------------------
 *
 * stamps.h
 *		  Handing out batch timestamps in shared memory
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/stamps.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_STAMPS_H
#define SW_STAMPS_H

#include "catalog.h"

/* a source whose batch a committing transaction stamps */
typedef struct SwStamping
{
	Oid			relid;
	bool		in_memory;		/* stamped in shared memory, not by the catalog */
	bool		pinned;			/* we hold a pin on its slot */
	SwStampState state;			/* the newest ts before ours; the pending */
} SwStamping;

extern void sw_stamps_shmem_request(void);
extern void sw_stamps_shmem_startup(void);
extern bool sw_stamps_available(void);
extern bool sw_stamps_install(Oid relid, int64 last_ts);
extern void sw_stamps_pin(SwStamping *sources, int n);
extern bool sw_stamps_take(SwStamping *sources, int n, int64 *ts);
extern void sw_stamps_done(const SwStamping *sources, int n);
extern void sw_stamps_unpin(SwStamping *sources, int n);

#endif							/* SW_STAMPS_H */
