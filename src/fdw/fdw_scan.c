/*-------------------------------------------------------------------------
 *
 * fdw_scan.c
 *		  Planning and scanning source tables, EXPLAIN and ANALYZE
 *
 * See doc/internals.md, "Reading the log" (Scans).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/parallel.h"
#include "access/relation.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "commands/vacuum.h"
#include "common/pg_prng.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/planmain.h"
#include "optimizer/plancat.h"
#include "optimizer/restrictinfo.h"
#include "utils/acl.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/sampling.h"
#include "utils/snapmgr.h"
#include "utils/spccache.h"

#include "fdw/fdw.h"
#include "fdw/index_scan.h"
#include "log/log.h"

/* planner state, in baserel->fdw_private */
typedef struct SwPlanInfo
{
	Oid			current_rel;	/* the hidden heap of current rows */
	BlockNumber pages;			/* ... its size */
	BlockNumber plain_pages;	/* of a plain table of the same rows */
} SwPlanInfo;

/* indexes into ForeignScan.fdw_private */
enum SwScanPrivate
{
	SwScanNeededAtts,			/* Integer: last foreign attnum the plan reads */
	SwScanIndex					/* index and bitmap scans: see fdw_index.c */
};

/* shared state of a parallel scan: one parallel heap scan per hidden heap */
typedef struct SwParallelScan
{
	Size		history_offset; /* where the history heap's scan starts */
	ParallelTableScanDescData current;	/* followed by the history's */
} SwParallelScan;

/* execution state of a scan */
typedef struct SwScanState
{
	Relation	current;		/* hidden heap of current rows */
	Relation	history;		/* hidden heap of retracted rows (as_of) */
	TableScanDesc scan;			/* the heap being scanned now */
	bool		in_history;		/* as_of: scanning the history heap */
	SwBlockScan *history_scan;	/* ... in the blocks the batches after the
								 * time wrote, if not in parallel; kept for
								 * rescans */
	bool		reading_history;	/* ... through history_scan */
	TupleTableSlot *current_slot;	/* tuples of the current heap */
	TupleTableSlot *history_slot;	/* tuples of the history heap */
	SwLayout	current_layout;
	SwLayout	history_layout;
	int			needed_atts;	/* deform hidden tuples this far (foreign attnums) */
	bool		shared_values;	/* the scan slot's datums are current_slot's */
	bool		fast;			/* swIterateForeignScan's fast path applies */
	int			natts;			/* of the scan slot */
	Snapshot	snapshot;		/* what the scan sees */
	bool		registered;		/* we registered the snapshot */
	int64		as_of;			/* -1, or the time read */
	SwBatchMap *batches;		/* as_of: batches after it */
	SwParallelScan *pscan;		/* parallel scan, when there is one */
	SwIndexScan *index;			/* index or bitmap scan, when the plan is one */
} SwScanState;

/*
 * Size estimates come from the hidden heap and the table's statistics, as
 * for a plain table.
 */
static void
swGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	SwPlanInfo *info = palloc0(sizeof(SwPlanInfo));
	SwSource	source;
	Relation	current;
	double		tuples;
	double		allvisfrac;
	Selectivity sel;

	sw_source_require(foreigntableid, &source);
	info->current_rel = source.current_rel;
	current = table_open(source.current_rel, AccessShareLock);
	estimate_rel_size(current, NULL, &info->pages, &tuples, &allvisfrac);

	/*
	 * A heap never vacuumed nor analyzed has its rows guessed from their
	 * width (see estimate_rel_size()): guess them as for a plain table of
	 * the table's columns, without ours.
	 */
	if (current->rd_rel->relpages == 0 || current->rd_rel->reltuples < 0)
	{
		Relation	ftrel = relation_open(foreigntableid, NoLock);
		int32		overhead = MAXALIGN(SizeofHeapTupleHeader) + sizeof(ItemIdData);
		double		hidden = (BLCKSZ - SizeOfPageHeaderData) /
			(get_rel_data_width(current, NULL) + overhead);
		double		plain = (BLCKSZ - SizeOfPageHeaderData) /
			(get_rel_data_width(ftrel, NULL) + overhead);

		if (hidden > 0)
			tuples = rint(tuples / hidden * plain);
		relation_close(ftrel, NoLock);
	}
	table_close(current, NoLock);

	/*
	 * ANALYZE of the source table records its rows and the pages of its
	 * current heap, as it does for a plain table: the density it found
	 * applies to the heap as it is now.  (On entry, baserel holds the
	 * table's pg_class figures.)
	 */
	if (baserel->tuples >= 0 && baserel->pages > 0)
		tuples = clamp_row_est(baserel->tuples / baserel->pages * info->pages);

	/*
	 * A plain table of the same rows would be smaller by the batch column
	 * each row carries here.  The planner sizes parallel scans by pages, and
	 * a source table should get a parallel plan where, and only where, a
	 * plain table of its rows would.
	 */
	info->plain_pages = info->pages;
	if (info->pages > 0 && tuples > 0)
	{
		double		per_row = (double) info->pages * BLCKSZ / tuples;

		if (per_row > sizeof(int64))
			info->plain_pages = (BlockNumber) ceil(info->pages * (per_row - sizeof(int64)) / per_row);
	}

	sel = clauselist_selectivity(root, baserel->baserestrictinfo, 0,
								 JOIN_INNER, NULL);
	baserel->pages = info->pages;
	baserel->tuples = tuples;
	baserel->rows = clamp_row_est(tuples * sel);
	baserel->fdw_private = info;
}

/*
 * The share of the rows one participant of a parallel plan handles, as
 * get_parallel_divisor() in costsize.c reckons it for a sequential scan.
 */
static double
parallel_divisor(int workers)
{
	double		divisor = workers;

	if (parallel_leader_participation && 1.0 - 0.3 * workers > 0)
		divisor += 1.0 - 0.3 * workers;
	return divisor;
}

/*
 * A full scan, costed as cost_seqscan() costs a sequential scan of the
 * hidden heap (enable_seqscan off disables it, as it does a plain table's
 * sequential scan), and its parallel version wherever the planner would
 * scan a plain table of that size in parallel; and the paths through the
 * indexes of the hidden heap (fdw_index.c), made first.
 */
static void
swGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	SwPlanInfo *info = baserel->fdw_private;
	double		seq_page_cost;
	Cost		startup;
	Cost		cpu_per_tuple;
	Cost		cpu_run;
	Cost		disk_run;
	int			workers;
	List	   *index_paths;
	ListCell   *lc;

	index_paths = sw_index_paths(root, baserel, info->current_rel);
	foreach(lc, index_paths)
		add_path(baserel, lfirst(lc));

	get_tablespace_page_costs(InvalidOid, NULL, &seq_page_cost);
	startup = baserel->baserestrictcost.startup +
		baserel->reltarget->cost.startup;
	if (!enable_seqscan)
		startup += disable_cost;
	disk_run = seq_page_cost * info->pages;
	cpu_per_tuple = cpu_tuple_cost + baserel->baserestrictcost.per_tuple;
	cpu_run = cpu_per_tuple * baserel->tuples +
		baserel->reltarget->cost.per_tuple * baserel->rows;

	add_path(baserel, (Path *)
			 create_foreignscan_path(root, baserel, NULL, baserel->rows,
									 startup, startup + disk_run + cpu_run,
									 NIL, baserel->lateral_relids,
									 NULL, NIL));

	if (!baserel->consider_parallel || baserel->lateral_relids != NULL)
		return;
	workers = compute_parallel_worker(baserel, info->plain_pages, -1,
									  max_parallel_workers_per_gather);
	if (workers > 0)
	{
		double		divisor = parallel_divisor(workers);
		ForeignPath *path;

		path = create_foreignscan_path(root, baserel, NULL,
									   clamp_row_est(baserel->rows / divisor),
									   startup,
									   startup + disk_run + cpu_run / divisor,
									   NIL, NULL, NULL, NIL);
		path->path.parallel_aware = true;
		path->path.parallel_safe = true;
		path->path.parallel_workers = workers;
		add_partial_path(baserel, (Path *) path);
	}
}

/*
 * The last attnum the query needs from the table, so that the scan
 * deforms no further (a whole-row reference needs them all).
 */
static int
needed_attributes(RelOptInfo *baserel, List *scan_clauses)
{
	Bitmapset  *attrs = NULL;
	int			last = 0;
	int			x = -1;

	pull_varattnos((Node *) baserel->reltarget->exprs, baserel->relid, &attrs);
	pull_varattnos((Node *) scan_clauses, baserel->relid, &attrs);

	while ((x = bms_next_member(attrs, x)) >= 0)
	{
		AttrNumber	attno = x + FirstLowInvalidHeapAttributeNumber;

		if (attno == InvalidAttrNumber)
			return baserel->max_attr;
		last = Max(last, attno);
	}
	return last;
}

/*
 * The plan of a full scan, or of an index path (fdw_index.c).  The plan
 * depends on the hidden heap, whose relcache invalidations say that an
 * index came or went.
 */
static ForeignScan *
swGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				 ForeignPath *best_path, List *tlist, List *scan_clauses,
				 Plan *outer_plan)
{
	SwPlanInfo *info = baserel->fdw_private;
	List	   *fdw_private;
	List	   *fdw_exprs = NIL;
	List	   *recheck_quals = NIL;

	/* all quals are checked locally, by the ForeignScan node */
	scan_clauses = extract_actual_clauses(scan_clauses, false);
	fdw_private = list_make1(makeInteger(needed_attributes(baserel, scan_clauses)));
	root->glob->relationOids = lappend_oid(root->glob->relationOids,
										   info->current_rel);

	if (best_path->fdw_private != NIL)
	{
		SwIndexPlan index;

		sw_index_plan(root, best_path, &index);
		fdw_private = list_concat(fdw_private, index.fdw_private);
		scan_clauses = index.qual;
		fdw_exprs = index.fdw_exprs;
		recheck_quals = index.recheck_quals;
		outer_plan = index.outer_plan;
	}
	return make_foreignscan(tlist, scan_clauses, baserel->relid, fdw_exprs,
							fdw_private, NIL, recheck_quals, outer_plan);
}

/*
 * Reading the past shows rows the present no longer has.  A view, or a
 * SECURITY DEFINER function, over a source table lets its users read the
 * current rows with its owner's rights; it must not become a way into the
 * history, so reading as of a time needs SELECT on the table itself, for
 * the current role and for the one outside any SECURITY DEFINER function
 * (the session's current role).
 */
static void
check_read_past(Relation ftrel)
{
	Oid			roles[2] = {GetOuterUserId(), GetUserId()};

	for (int i = 0; i < lengthof(roles); i++)
		if (!sw_check_source_privilege(RelationGetRelid(ftrel), roles[i], ACL_SELECT, true))
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to read source table \"%s\" as of a time",
							RelationGetRelationName(ftrel)),
					 errdetail("Reading the past needs SELECT on the source table itself, also through views and functions."),
					 errhint("RESET source_writes.as_of to read the current contents.")));
}

/*
 * A plan through an index reads the current rows through it.  Reading as
 * of a time reads the heaps: planning makes no index paths then, and a
 * change of source_writes.as_of makes cached plans again.  A plan made for
 * the current rows is refused, should one be run as of a time all the
 * same.
 */
static void
begin_index_scan(ForeignScanState *node, SwScanState *ss)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;

	if (sw_index_plan_kind(plan->fdw_private, SwScanIndex) == SW_SCAN_HEAP)
		return;
	if (ss->as_of < 0)
		ss->index = sw_index_begin(node, SwScanIndex, ss->current,
								   &ss->current_layout, ss->snapshot);
	else
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot read source table \"%s\" as of a time with a plan made for its current rows",
						RelationGetRelationName(node->ss.ss_currentRelation)),
				 errhint("Prepare the statement again after setting source_writes.as_of.")));
}

static void
swBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	Relation	ftrel = node->ss.ss_currentRelation;
	Oid			relid = RelationGetRelid(ftrel);
	SwScanState *ss = palloc0(sizeof(SwScanState));
	SwSource	source;

	ss->needed_atts = intVal(list_nth(plan->fdw_private, SwScanNeededAtts));
	ss->as_of = sw_as_of;
	node->fdw_state = ss;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;


	sw_source_require(relid, &source);
	ss->current = table_open(source.current_rel, AccessShareLock);
	sw_storage_layout(ftrel, ss->current, &ss->current_layout);
	ss->current_slot = table_slot_create(ss->current, &estate->es_tupleTable);
	ss->snapshot = estate->es_snapshot;

	/*
	 * When the columns the query needs are where the table has them, and
	 * the current rows are read, the scan slot shares the arrays into which
	 * the hidden tuples are deformed: a row costs no copy at all.  The
	 * columns past the needed ones are null in every row, set once here;
	 * nothing deforms a hidden tuple that far.
	 */
	{
		TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;

		if (ss->as_of < 0 &&
			sw_hidden_attnum(&ss->current_layout, ss->needed_atts) == ss->needed_atts)
		{
			slot->tts_values = ss->current_slot->tts_values;
			slot->tts_isnull = ss->current_slot->tts_isnull;
			ss->shared_values = true;
		}
		ss->natts = slot->tts_tupleDescriptor->natts;
		for (int i = ss->needed_atts; i < ss->natts; i++)
			slot->tts_isnull[i] = true;
	}

	if (ss->as_of >= 0)
	{
		ExecRowMark *erm = ExecFindRowMark(estate, plan->scan.scanrelid, true);

		if (erm && RowMarkRequiresRowShareLock(erm->markType))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot lock rows of source table \"%s\" as of a time",
							RelationGetRelationName(ftrel)),
					 errdetail("FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE and FOR KEY SHARE lock the current rows; rows of the past cannot be locked."),
					 errhint("RESET source_writes.as_of to lock the current rows.")));
		check_read_past(ftrel);
		ss->history = table_open(source.history_rel, AccessShareLock);
		sw_storage_layout(ftrel, ss->history, &ss->history_layout);
		ss->history_slot = table_slot_create(ss->history, &estate->es_tupleTable);

		/*
		 * Check that the time is readable around taking the snapshot (see
		 * the file header).  Parallel workers get the leader's snapshot
		 * with their scans.
		 */
		if (!IsParallelWorker())
		{
			SwFrontiers frontiers;

			if (!sw_catalog_frontiers(relid, GetLatestSnapshot(), &frontiers))
				elog(ERROR, "source table \"%s\" lost its catalog row",
					 RelationGetRelationName(ftrel));
			if (ss->as_of >= frontiers.upper)
				sw_check_readable(relid, &frontiers, ss->as_of);

			ss->snapshot = RegisterSnapshot(GetLatestSnapshot());
			ss->registered = true;
			if (!sw_catalog_frontiers(relid, ss->snapshot, &frontiers))
				elog(ERROR, "source table \"%s\" lost its catalog row",
					 RelationGetRelationName(ftrel));
			sw_check_readable(relid, &frontiers, ss->as_of);
		}
	}
	begin_index_scan(node, ss);
}

/*
 * Start scanning a hidden heap, in parallel when the plan says so.
 */
static TableScanDesc
begin_heap_scan(SwScanState *ss, Relation rel, bool history)
{
	if (ss->pscan)
	{
		ParallelTableScanDesc pscan = history
		? (ParallelTableScanDesc) ((char *) ss->pscan + ss->pscan->history_offset)
		: &ss->pscan->current;

		return table_beginscan_parallel(rel, pscan);
	}
	return table_beginscan(rel, ss->snapshot, 0, NULL);
}

/*
 * Clear the scan slot, and make its columns past the needed ones null
 * again.  Rows refill the slot in place (see store_row()), and leave those
 * columns null as the scan's start set them; but when the slot held a
 * tuple of its own, something may have deformed it that far.
 */
static void
clear_slot(SwScanState *ss, TupleTableSlot *slot)
{
	ExecClearTuple(slot);
	for (int i = ss->needed_atts; i < ss->natts; i++)
		slot->tts_isnull[i] = true;
}

/*
 * Put the needed columns of a hidden row into the scan slot, as a row of
 * the table: a virtual tuple whose datums point into the hidden tuple,
 * which its buffer slot keeps pinned until the next row.  The columns past
 * the needed ones are null.  Where the needed ones are where the table has
 * them, they are deformed straight into the scan slot's (shared) arrays.
 *
 * The slot is refilled in place, which is what ExecClearTuple() and
 * ExecStoreVirtualTuple() would do to a slot that holds the previous row
 * as a virtual tuple.  A slot that holds anything else (a tuple that a
 * node above materialized in it, or that a trigger stored in it) is
 * cleared first.  swIterateForeignScan() does the same for the common
 * case, inline.
 */
static TupleTableSlot *
store_row(SwScanState *ss, TupleTableSlot *hidden, const SwLayout *layout,
		  TupleTableSlot *slot)
{
	int			needed = ss->needed_atts;

	if (unlikely(slot->tts_ops != &TTSOpsHeapTuple ||
				 ((HeapTupleTableSlot *) slot)->tuple != NULL ||
				 TTS_SHOULDFREE(slot)))
		clear_slot(ss, slot);
	slot_getsomeattrs(hidden, sw_hidden_attnum(layout, needed));
	if (likely(ss->shared_values))
		;						/* the datums are in place */
	else if (sw_hidden_attnum(layout, needed) == needed)
	{
		for (int i = 0; i < needed; i++)
		{
			slot->tts_values[i] = hidden->tts_values[i];
			slot->tts_isnull[i] = hidden->tts_isnull[i];
		}
	}
	else
		sw_from_hidden(layout, needed, hidden->tts_values, hidden->tts_isnull,
					   slot->tts_values, slot->tts_isnull);
	slot->tts_flags &= ~TTS_FLAG_EMPTY;
	slot->tts_nvalid = ss->natts;
	slot->tts_tid = hidden->tts_tid;
	return slot;
}

/*
 * The next row of the source as of ss->as_of: from the current heap, rows
 * whose batch is at or before it, then from the history heap, rows
 * inserted at or before it and retracted after it.  Only the batches after
 * it are loaded (log.c), and only the history rows they retracted are
 * read, in the blocks they wrote (a parallel scan reads all of the
 * history).  Returns the hidden slot and, in *layout, where its
 * columns are; or NULL at the end.
 */
static TupleTableSlot *
next_row_as_of(ForeignScanState *node, SwScanState *ss, SwLayout **layout)
{
	MemoryContext query_cxt = node->ss.ps.state->es_query_cxt;

	if (ss->batches == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(query_cxt);

		ss->batches = sw_log_batches(RelationGetRelid(node->ss.ss_currentRelation),
									 ss->as_of + 1, PG_INT64_MAX,
									 ss->scan->rs_snapshot);
		MemoryContextSwitchTo(old);
	}

	for (;;)
	{
		TupleTableSlot *hidden = ss->in_history ? ss->history_slot : ss->current_slot;
		SwLogRow	row;
		bool		found;

		found = ss->reading_history
			? sw_block_scan_next(ss->history_scan, hidden)
			: table_scan_getnextslot(ss->scan, ForwardScanDirection, hidden);
		if (!found)
		{
			MemoryContext old;

			if (ss->in_history)
				return NULL;
			table_endscan(ss->scan);
			ss->scan = NULL;
			ss->in_history = true;

			/*
			 * Of the history, the rows retracted after the time: those the
			 * batches after it wrote (the map's), and our own.
			 */
			old = MemoryContextSwitchTo(query_cxt);
			if (ss->pscan)
				ss->scan = begin_heap_scan(ss, ss->history, true);
			else if (ss->history_scan)
				sw_block_scan_rescan(ss->history_scan); /* the same blocks */
			else
			{
				ss->history_scan = palloc(sizeof(SwBlockScan));
				sw_block_scan_begin(ss->history_scan, ss->history, ss->snapshot,
									ss->batches, SW_HISTORY_HEAP);
			}
			ss->reading_history = ss->history_scan != NULL;
			MemoryContextSwitchTo(old);
			continue;
		}

		/* most rows may be skipped: this loop can run long by itself */
		CHECK_FOR_INTERRUPTS();
		*layout = ss->in_history ? &ss->history_layout : &ss->current_layout;
		sw_log_row(ss->batches, hidden, *layout, ss->in_history, &row);
		if (sw_log_row_present(&row))
			return hidden;
	}
}

/*
 * End the scan of the current heap or of the history; and, at the end of
 * the foreign scan, the history's block scan, kept until then for rescans.
 */
static void
end_scan(SwScanState *ss, bool for_good)
{
	if (ss->scan)
		table_endscan(ss->scan);
	ss->scan = NULL;
	ss->reading_history = false;
	if (for_good && ss->history_scan)
	{
		sw_block_scan_end(ss->history_scan);
		pfree(ss->history_scan);
		ss->history_scan = NULL;
	}
}

/*
 * The next row an index or bitmap scan finds, checked against the index's
 * conditions where the index matched it lossily.
 */
static TupleTableSlot *
next_indexed_row(ForeignScanState *node, SwScanState *ss, TupleTableSlot *slot)
{
	ExprContext *econtext = node->ss.ps.ps_ExprContext;

	for (;;)
	{
		TupleTableSlot *hidden = sw_index_next(ss->index, ss->current_slot, slot);

		if (hidden == NULL)
		{
			clear_slot(ss, slot);
			return slot;
		}
		if (hidden != slot)		/* else an index-only scan made the row */
			store_row(ss, hidden, &ss->current_layout, slot);
		if (!sw_index_recheck(ss->index))
			return slot;
		econtext->ecxt_scantuple = slot;
		if (ExecQual(node->fdw_recheck_quals, econtext))
			return slot;
		InstrCountFiltered2(node, 1);
		CHECK_FOR_INTERRUPTS();
	}
}

/*
 * The general case of swIterateForeignScan: start the scan, read as of a
 * time, copy columns that are not where the table has them, or clear a
 * slot that holds a tuple.  Kept out of line, so that the common case pays
 * for no more than it uses.
 */
static pg_noinline TupleTableSlot *
iterate_scan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *hidden;
	SwLayout   *layout = &ss->current_layout;

	if (ss->index)
		return next_indexed_row(node, ss, slot);
	if (ss->scan == NULL && !ss->in_history)
	{
		/* we run in per-tuple memory; the scan lives as long as the query */
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		ss->scan = begin_heap_scan(ss, ss->current, false);
		MemoryContextSwitchTo(old);
		ss->fast = ss->shared_values && slot->tts_ops == &TTSOpsHeapTuple;
	}

	if (ss->as_of < 0)
		hidden = table_scan_getnextslot(ss->scan, ForwardScanDirection,
										ss->current_slot) ? ss->current_slot : NULL;
	else
		hidden = next_row_as_of(node, ss, &layout);
	if (hidden == NULL)
	{
		clear_slot(ss, slot);
		return slot;
	}
	return store_row(ss, hidden, layout, slot);
}

/*
 * The next row.  In the common case this is all there is to it: the next
 * heap tuple, deformed as far as needed straight into the scan slot's
 * arrays, which the slot shares with the hidden heap's slot (store_row()
 * says more).  A slot into which something stored a tuple of its own since
 * the last row takes the general path, which clears it.
 */
static TupleTableSlot *
swIterateForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *hidden = ss->current_slot;

	if (unlikely(!ss->fast || ((HeapTupleTableSlot *) slot)->tuple != NULL))
		return iterate_scan(node);
	if (!table_scan_getnextslot(ss->scan, ForwardScanDirection, hidden))
		return ExecClearTuple(slot);
	slot_getsomeattrs(hidden, ss->needed_atts);
	slot->tts_flags &= ~TTS_FLAG_EMPTY;
	slot->tts_nvalid = ss->natts;
	slot->tts_tid = hidden->tts_tid;
	return slot;
}

/*
 * The current heap's tuple of the row the scan returned last, in a buffer
 * slot, when the scan reads the current rows; NULL otherwise.  UPDATE and
 * DELETE use it to skip fetching the row again.
 */
TupleTableSlot *
sw_scan_current_row(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (ss == NULL || ss->as_of >= 0 || ss->current_slot == NULL)
		return NULL;
	return ss->current_slot;
}

static void
swReScanForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	/* the executor clears the slot next, but leaves the rest to us */
	clear_slot(ss, node->ss.ss_ScanTupleSlot);
	if (ss->index)
		sw_index_rescan(ss->index);
	else if (ss->in_history)
	{
		/* back to the start: the current heap */
		end_scan(ss, false);
		ss->in_history = false;
	}
	else if (ss->scan)
		table_rescan(ss->scan, NULL);
}

static void
swEndForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (ss == NULL || ss->current == NULL)
		return;
	end_scan(ss, true);
	if (ss->index)
		sw_index_end(ss->index);
	if (ss->registered)
		UnregisterSnapshot(ss->snapshot);
	if (ss->history)
		table_close(ss->history, NoLock);
	table_close(ss->current, NoLock);
}

/*
 * Parallel scans: the shared memory holds a parallel heap scan of the
 * current heap and, for as_of, one of the history heap.
 */
static bool
swIsForeignScanParallelSafe(PlannerInfo *root, RelOptInfo *rel,
							RangeTblEntry *rte)
{
	return true;
}

static Size
swEstimateDSMForeignScan(ForeignScanState *node, ParallelContext *pcxt)
{
	SwScanState *ss = node->fdw_state;
	Size		size = offsetof(SwParallelScan, current);

	size = add_size(size, MAXALIGN(table_parallelscan_estimate(ss->current,
															   ss->snapshot)));
	if (ss->history)
		size = add_size(size, table_parallelscan_estimate(ss->history,
														  ss->snapshot));
	return size;
}

static void
swInitializeDSMForeignScan(ForeignScanState *node, ParallelContext *pcxt,
						   void *coordinate)
{
	SwScanState *ss = node->fdw_state;
	SwParallelScan *pscan = coordinate;

	pscan->history_offset = offsetof(SwParallelScan, current) +
		MAXALIGN(table_parallelscan_estimate(ss->current, ss->snapshot));
	table_parallelscan_initialize(ss->current, &pscan->current, ss->snapshot);
	if (ss->history)
		table_parallelscan_initialize(ss->history,
									  (ParallelTableScanDesc) ((char *) pscan + pscan->history_offset),
									  ss->snapshot);
	ss->pscan = pscan;
}

static void
swReInitializeDSMForeignScan(ForeignScanState *node, ParallelContext *pcxt,
							 void *coordinate)
{
	SwScanState *ss = node->fdw_state;
	SwParallelScan *pscan = coordinate;

	table_parallelscan_reinitialize(ss->current, &pscan->current);
	if (ss->history)
		table_parallelscan_reinitialize(ss->history,
										(ParallelTableScanDesc) ((char *) pscan + pscan->history_offset));
}

static void
swInitializeWorkerForeignScan(ForeignScanState *node, shm_toc *toc,
							  void *coordinate)
{
	SwScanState *ss = node->fdw_state;

	ss->pscan = coordinate;
}

/*
 * Row locks.  FOR UPDATE, FOR NO KEY UPDATE, FOR SHARE and FOR KEY SHARE
 * lock the hidden current tuple of each row, which the ctid the scan
 * returns identifies, as they lock a plain table's tuple: a concurrent
 * UPDATE or DELETE of the row, and ingestion's upsert or tombstone of its
 * key, wait for the holder.  Without a lock (the other tables of a query
 * that locks rows, or of an UPDATE), the row itself is carried along for
 * EvalPlanQual re-checks: a ctid alone could not say which heap a row read
 * as of a time came from.
 */
static RowMarkType
swGetForeignRowMarkType(RangeTblEntry *rte, LockClauseStrength strength)
{
	switch (strength)
	{
		case LCS_NONE:
			break;
		case LCS_FORKEYSHARE:
			return ROW_MARK_KEYSHARE;
		case LCS_FORSHARE:
			return ROW_MARK_SHARE;
		case LCS_FORNOKEYUPDATE:
			return ROW_MARK_NOKEYEXCLUSIVE;
		case LCS_FORUPDATE:
			return ROW_MARK_EXCLUSIVE;
	}
	return ROW_MARK_COPY;
}

/* what the lock of a row mark needs, made at its first row */
typedef struct SwRowLocker
{
	Oid			current_rel;	/* the hidden heap of current rows */
	SwHiddenNames names;		/* to say errors of the source */
} SwRowLocker;

/*
 * Lock a row, as ExecLockRows() locks a plain table's (nodeLockRows.c):
 * the hidden current tuple at the row's ctid, in the strength of the row
 * mark and with its wait policy (NOWAIT, SKIP LOCKED).  Under READ
 * COMMITTED, a row updated meanwhile is locked in its latest version,
 * which the executor then re-checks against the query (*updated); a row
 * deleted meanwhile, or one this transaction changed since the scan, is
 * skipped.  Above READ COMMITTED a row changed meanwhile is a
 * serialization failure.  slot gets the locked version as a row of the
 * table, or is left empty to skip the row.
 */
static void
lock_row(EState *estate, ExecRowMark *erm, ItemPointer tid,
		 TupleTableSlot *slot, bool *updated, Relation current)
{
	Relation	ftrel = erm->relation;
	TupleTableSlot *hidden = table_slot_create(current, NULL);
	TupleDesc	desc = RelationGetDescr(ftrel);
	LockTupleMode mode;
	int			flags = TUPLE_LOCK_FLAG_LOCK_UPDATE_IN_PROGRESS;
	TM_FailureData tmfd;
	TM_Result	result;
	SwLayout	layout;
	HeapTuple	tuple;
	Datum	   *values;
	bool	   *isnull;

	switch (erm->markType)
	{
		case ROW_MARK_EXCLUSIVE:
			mode = LockTupleExclusive;
			break;
		case ROW_MARK_NOKEYEXCLUSIVE:
			mode = LockTupleNoKeyExclusive;
			break;
		case ROW_MARK_SHARE:
			mode = LockTupleShare;
			break;
		case ROW_MARK_KEYSHARE:
			mode = LockTupleKeyShare;
			break;
		default:
			elog(ERROR, "unexpected row mark %d on source table \"%s\"",
				 erm->markType, RelationGetRelationName(ftrel));
			mode = LockTupleExclusive;	/* keep compiler quiet */
	}
	if (!IsolationUsesXactSnapshot())
		flags |= TUPLE_LOCK_FLAG_FIND_LAST_VERSION;

	result = table_tuple_lock(current, tid, estate->es_snapshot, hidden,
							  estate->es_output_cid, mode, erm->waitPolicy,
							  flags, &tmfd);
	switch (result)
	{
		case TM_Ok:
			if (tmfd.traversed)
				*updated = true;
			break;
		case TM_WouldBlock:		/* SKIP LOCKED */
		case TM_SelfModified:	/* changed by us since the scan */
			ExecDropSingleTupleTableSlot(hidden);
			return;
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent update")));
			if (result == TM_Updated)
				elog(ERROR, "unexpected table_tuple_lock status: %u", result);
			ExecDropSingleTupleTableSlot(hidden);
			return;				/* deleted: skip it */
		case TM_Invisible:
			elog(ERROR, "attempted to lock invisible tuple");
			break;
		default:
			elog(ERROR, "unrecognized table_tuple_lock status: %u", result);
	}

	/* the locked version, as a row of the table with the ctid it has */
	sw_storage_layout(ftrel, current, &layout);
	values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
	slot_getallattrs(hidden);
	sw_from_hidden(&layout, desc->natts, hidden->tts_values, hidden->tts_isnull,
				   values, isnull);
	tuple = heap_form_tuple(desc, values, isnull);
	tuple->t_self = hidden->tts_tid;
	tuple->t_tableOid = RelationGetRelid(ftrel);
	ExecForceStoreHeapTuple(tuple, slot, true);
	pfree(values);
	pfree(isnull);
	ExecDropSingleTupleTableSlot(hidden);
}

static void
swRefetchForeignRow(EState *estate, ExecRowMark *erm, Datum rowid,
					TupleTableSlot *slot, bool *updated)
{
	SwRowLocker *locker = erm->ermExtra;
	ItemPointerData tid = *(ItemPointer) DatumGetPointer(rowid);
	MemoryContext cxt = CurrentMemoryContext;
	Relation	current;

	ExecClearTuple(slot);
	if (locker == NULL)
	{
		/* as long as the row mark, which lives in the query's memory */
		MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(erm));
		SwSource	source;

		sw_source_require(RelationGetRelid(erm->relation), &source);
		locker = palloc(sizeof(SwRowLocker));
		locker->current_rel = source.current_rel;
		sw_storage_hidden_names(erm->relation, &source, &locker->names);
		erm->ermExtra = locker;
		MemoryContextSwitchTo(old);
	}

	current = table_open(locker->current_rel, RowShareLock);
	PG_TRY();
	{
		lock_row(estate, erm, &tid, slot, updated, current);
	}
	PG_CATCH();
	{
		sw_storage_rethrow(&locker->names, cxt);
	}
	PG_END_TRY();
	table_close(current, NoLock);
}

/*
 * EXPLAIN names the kind of the source and what it reads.
 */
static void
swExplainForeignScan(ForeignScanState *node, ExplainState *es)
{
	Relation	rel = node->ss.ss_currentRelation;
	ForeignTable *table = GetForeignTable(RelationGetRelid(rel));
	ForeignServer *server = GetForeignServer(table->serverid);
	SwScanState *ss = node->fdw_state;
	ListCell   *lc;

	if (ss && ss->as_of >= 0)
		ExplainPropertyInteger("As Of", NULL, ss->as_of, es);
	else
		sw_index_explain(node, ss ? ss->index : NULL, SwScanIndex, es);

	if (sw_server_kind(server) == SW_KIND_WEBHOOK)
	{
		ExplainPropertyText("Source", "webhook", es);
		ExplainPropertyText("Webhook Path",
							psprintf("/%s/%s/%s",
									 get_database_name(MyDatabaseId),
									 get_namespace_name(RelationGetNamespace(rel)),
									 RelationGetRelationName(rel)),
							es);
		return;
	}

	ExplainPropertyText("Source", "kafka", es);
	foreach(lc, table->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "topic") == 0)
			ExplainPropertyText("Topic", defGetString(def), es);
	}
}

/* the state of one ANALYZE of a source table */
typedef struct SwSampleState
{
	Relation	ftrel;
	Relation	current;
	SwLayout	layout;
	Datum	   *values;			/* a row of the table */
	bool	   *isnull;
} SwSampleState;

/*
 * A sampled hidden row as a heap tuple of the table, keeping its ctid.
 */
static HeapTuple
sample_row(SwSampleState *state, TupleTableSlot *slot)
{
	TupleDesc	desc = RelationGetDescr(state->ftrel);
	HeapTuple	tuple;

	slot_getallattrs(slot);
	sw_from_hidden(&state->layout, desc->natts, slot->tts_values,
				   slot->tts_isnull, state->values, state->isnull);
	tuple = heap_form_tuple(desc, state->values, state->isnull);
	tuple->t_self = slot->tts_tid;
	return tuple;
}

/* order sampled rows by their position in the heap, as ANALYZE does */
static int
compare_rows(const void *a, const void *b)
{
	return ItemPointerCompare(&(*(HeapTuple *) a)->t_self,
							  &(*(HeapTuple *) b)->t_self);
}

/*
 * ANALYZE samples the hidden heap of current rows the way PostgreSQL
 * samples a table (acquire_sample_rows() in analyze.c): a random sample of
 * blocks, and a reservoir sample of the live rows in them.  Only sampled
 * rows are turned into rows of the table.
 */
static int
swAcquireSampleRows(Relation relation, int elevel, HeapTuple *rows,
					int targrows, double *totalrows, double *totaldeadrows)
{
	SwSampleState state;
	SwSource	source;
	BlockNumber totalblocks;
	TransactionId oldest_xmin;
	BlockSamplerData bs;
	ReservoirStateData rstate;
	BufferAccessStrategy strategy;
	TableScanDesc scan;
	TupleTableSlot *slot;
	double		liverows = 0;
	double		deadrows = 0;
	double		samplerows = 0;
	double		rowstoskip = -1;
	int			numrows = 0;

	sw_source_require(RelationGetRelid(relation), &source);
	state.ftrel = relation;
	state.current = table_open(source.current_rel, AccessShareLock);
	sw_storage_layout(relation, state.current, &state.layout);
	state.values = palloc(sizeof(Datum) * Max(RelationGetDescr(relation)->natts, 1));
	state.isnull = palloc(sizeof(bool) * Max(RelationGetDescr(relation)->natts, 1));

	totalblocks = RelationGetNumberOfBlocks(state.current);
	oldest_xmin = GetOldestNonRemovableTransactionId(state.current);
	(void) BlockSampler_Init(&bs, totalblocks, targrows,
							 pg_prng_uint32(&pg_global_prng_state));
	reservoir_init_selection_state(&rstate, targrows);
	strategy = GetAccessStrategy(BAS_BULKREAD);

	scan = table_beginscan_analyze(state.current);
	slot = table_slot_create(state.current, NULL);
	while (BlockSampler_HasMore(&bs))
	{
		BlockNumber block = BlockSampler_Next(&bs);

		vacuum_delay_point();
		if (!table_scan_analyze_next_block(scan, block, strategy))
			continue;
		while (table_scan_analyze_next_tuple(scan, oldest_xmin, &liverows,
											 &deadrows, slot))
		{
			if (numrows < targrows)
				rows[numrows++] = sample_row(&state, slot);
			else
			{
				/* Vitter's algorithm, as acquire_sample_rows() does */
				if (rowstoskip < 0)
					rowstoskip = reservoir_get_next_S(&rstate, samplerows, targrows);
				if (rowstoskip <= 0)
				{
					int			k = (int) (targrows * sampler_random_fract(&rstate.randstate));

					heap_freetuple(rows[k]);
					rows[k] = sample_row(&state, slot);
				}
				rowstoskip -= 1;
			}
			samplerows += 1;
		}
	}
	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	FreeAccessStrategy(strategy);
	table_close(state.current, AccessShareLock);

	if (numrows == targrows)
		qsort(rows, numrows, sizeof(HeapTuple), compare_rows);
	if (bs.m > 0)
	{
		*totalrows = floor((liverows / bs.m) * totalblocks + 0.5);
		*totaldeadrows = floor((deadrows / bs.m) * totalblocks + 0.5);
	}
	else
		*totalrows = *totaldeadrows = 0;

	ereport(elevel,
			(errmsg("\"%s\": scanned %d of %u pages of its storage, containing %.0f live rows and %.0f dead rows; %d rows in sample, %.0f estimated total rows",
					RelationGetRelationName(relation), bs.m, totalblocks,
					liverows, deadrows, numrows, *totalrows)));
	return numrows;
}

static bool
swAnalyzeForeignTable(Relation relation, AcquireSampleRowsFunc *func,
					  BlockNumber *totalpages)
{
	SwSource	source;
	Relation	current;

	sw_source_require(RelationGetRelid(relation), &source);
	current = table_open(source.current_rel, AccessShareLock);
	*totalpages = RelationGetNumberOfBlocks(current);
	table_close(current, AccessShareLock);
	*func = swAcquireSampleRows;
	return true;
}

/*
 * Fill in the scan callbacks of the FDW routine.
 */
void
sw_fdw_scan_routine(FdwRoutine *routine)
{
	routine->GetForeignRelSize = swGetForeignRelSize;
	routine->GetForeignPaths = swGetForeignPaths;
	routine->GetForeignPlan = swGetForeignPlan;
	routine->BeginForeignScan = swBeginForeignScan;
	routine->IterateForeignScan = swIterateForeignScan;
	routine->ReScanForeignScan = swReScanForeignScan;
	routine->EndForeignScan = swEndForeignScan;
	routine->ExplainForeignScan = swExplainForeignScan;
	routine->AnalyzeForeignTable = swAnalyzeForeignTable;
	routine->GetForeignRowMarkType = swGetForeignRowMarkType;
	routine->RefetchForeignRow = swRefetchForeignRow;
	routine->IsForeignScanParallelSafe = swIsForeignScanParallelSafe;
	routine->EstimateDSMForeignScan = swEstimateDSMForeignScan;
	routine->InitializeDSMForeignScan = swInitializeDSMForeignScan;
	routine->ReInitializeDSMForeignScan = swReInitializeDSMForeignScan;
	routine->InitializeWorkerForeignScan = swInitializeWorkerForeignScan;
}
