/*-------------------------------------------------------------------------
 *
 * index_scan.h
 *		  What fdw_scan.c and fdw_index.c share: the index paths of a source
 *		  table and the scans that follow them (private to src/fdw)
 *
 * See doc/internals.md, "Reading the log" (Index scans).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/index_scan.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_FDW_PRIVATE_INDEX_SCAN_H
#define SW_FDW_PRIVATE_INDEX_SCAN_H

#include "commands/explain.h"
#include "nodes/execnodes.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"

#include "log/log.h"

/* how a plan reads the current rows: ForeignScan.fdw_private's kind */
typedef enum SwScanKind
{
	SW_SCAN_HEAP,				/* the whole heap */
	SW_SCAN_INDEX,				/* an index scan */
	SW_SCAN_INDEX_ONLY,			/* an index-only scan */
	SW_SCAN_BITMAP				/* a bitmap of TIDs from the outer plan */
} SwScanKind;

/* the plan's own part of an index or bitmap scan */
typedef struct SwIndexPlan
{
	SwScanKind	kind;
	List	   *qual;			/* what the scan checks of each row */
	List	   *fdw_exprs;		/* the index's conditions, see fdw_index.c */
	List	   *recheck_quals;	/* ... on the table's columns */
	List	   *fdw_private;	/* the rest, as nodes */
	Plan	   *outer_plan;		/* the bitmap, for SW_SCAN_BITMAP */
} SwIndexPlan;

typedef struct SwIndexScan SwIndexScan;

extern List *sw_index_paths(PlannerInfo *root, RelOptInfo *rel, Oid current_rel);
extern void sw_index_plan(PlannerInfo *root, ForeignPath *path, SwIndexPlan *plan);
extern SwScanKind sw_index_plan_kind(List *fdw_private, int offset);
extern SwIndexScan *sw_index_begin(ForeignScanState *node, int offset,
								   Relation current, const SwLayout *layout,
								   Snapshot snapshot);
extern TupleTableSlot *sw_index_next(SwIndexScan *is, TupleTableSlot *hidden,
									 TupleTableSlot *slot);
extern bool sw_index_recheck(SwIndexScan *is);
extern void sw_index_rescan(SwIndexScan *is);
extern void sw_index_end(SwIndexScan *is);
extern void sw_index_explain(ForeignScanState *node, SwIndexScan *is,
							 int offset, ExplainState *es);

#endif							/* SW_FDW_PRIVATE_INDEX_SCAN_H */
