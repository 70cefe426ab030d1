/*-------------------------------------------------------------------------
 *
 * fdw.h
 *		  The foreign data wrapper: its callbacks, and the validator of the
 *		  options of its servers, user mappings and source tables
 *
 * See doc/internals.md, "Source files".
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

#include "executor/tuptable.h"
#include "fmgr.h"
#include "foreign/foreign.h"
#include "utils/relcache.h"

#include "log/log.h"
#include "options/options.h"
#include "source_writes.h"

/*
 * fdw.c
 * The foreign data wrapper's callbacks, by role
 */

/*
 * Named as structs, so that the files of other subsystems that include
 * this header do not get the planner's and executor's node types too.
 */
struct FdwRoutine;
struct ForeignScanState;

/* fdw_scan.c: planning, scans, EXPLAIN, ANALYZE */
extern void sw_fdw_scan_routine(struct FdwRoutine *routine);
extern TupleTableSlot *sw_scan_current_row(struct ForeignScanState *node);

/* fdw_modify.c: INSERT, UPDATE, DELETE, COPY, TRUNCATE */
extern void sw_fdw_modify_routine(struct FdwRoutine *routine);

/* indexes.c: CREATE INDEX and REINDEX TABLE on source tables */
extern void sw_indexes_install_hooks(void);

/* functions.c: what the SQL functions of the log share */
extern Oid	sw_function_source(FunctionCallInfo fcinfo, const char *function);
extern void sw_statement_frontiers(Oid relid, SwFrontiers *frontiers);

/* versions.c: a new version of a source table (option version_of) */
struct CollectedCommand;
extern void sw_version_create(Oid relid);
extern void sw_version_check_alter(struct CollectedCommand *command);

/* fdw_options.c: the validator's checks */
extern void sw_check_user_mapping(UserMapping *mapping, ForeignServer *server);

#endif							/* SW_FDW_H */
