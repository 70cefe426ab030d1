/*-------------------------------------------------------------------------
 *
 * fdw.c
 *		  The foreign data wrapper's handler
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "nodes/nodes.h"

#include "fdw/fdw.h"
#include "source_writes.h"

PG_FUNCTION_INFO_V1(source_writes_fdw_handler);

/*
 * The foreign data wrapper handler.
 */
Datum
source_writes_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	sw_fdw_scan_routine(routine);
	sw_fdw_modify_routine(routine);
	PG_RETURN_POINTER(routine);
}
