/*-------------------------------------------------------------------------
 *
 * compaction.h
 *		  Deleting the history that no readable time needs
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/compaction.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_COMPACTION_H
#define SW_COMPACTION_H

#include "storage/block.h"

extern bool sw_compact(Oid relid, bool wait, BlockNumber start,
					   BlockNumber nblocks, int64 *removed, BlockNumber *next);

#endif							/* SW_COMPACTION_H */
