/*-------------------------------------------------------------------------
 *
 * fdw.h
 *		  The foreign data wrapper's callbacks, by role
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_FDW_H
#define SW_FDW_H

#include "foreign/fdwapi.h"

/* fdw_scan.c: planning, scans, EXPLAIN, ANALYZE */
extern void sw_fdw_scan_routine(FdwRoutine *routine);
extern TupleTableSlot *sw_scan_current_row(ForeignScanState *node);

/* fdw_modify.c: INSERT, UPDATE, DELETE, COPY, TRUNCATE */
extern void sw_fdw_modify_routine(FdwRoutine *routine);

#endif							/* SW_FDW_H */
