/*-------------------------------------------------------------------------
 *
 * fdw_scan.c
 *		  The foreign data wrapper's handler, planning and scan of source
 *		  tables, EXPLAIN and ANALYZE
 *
 * A source table is read straight from its hidden heap of current rows
 * with a table AM scan under the query's snapshot.  The hidden heap starts
 * with the table's columns, attnum for attnum, so unless columns were
 * added after the table was created, each heap tuple is handed on as a row
 * of the table, in a buffer slot with the table's descriptor: the same
 * work as a sequential scan of a plain table (our columns at the end are
 * never deformed).  Otherwise the needed columns are copied to their
 * places.  The slot's tts_tid is the heap tuple's ctid: the row identity
 * that UPDATE and DELETE use, visible as the ctid system column.  Large
 * tables are scanned in parallel, like plain ones.
 *
 * With source_writes.as_of = T, the scan returns the contents at T
 * instead: current rows whose batch is at or before T, and history rows
 * inserted at or before T and retracted after it.  T must be readable
 * (since <= T < upper); then every batch at or before T has committed, and
 * a snapshot taken after that check sees all of them, so the same T gives
 * the same rows whenever it is read.
 *
 * IDENTIFICATION
 *		  src/fdw_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/parallel.h"
#include "access/relscan.h"
#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/explain.h"
#include "commands/dbcommands.h"
#include "commands/vacuum.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "storage/bufmgr.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/sampling.h"
#include "utils/snapmgr.h"
#include "utils/spccache.h"

#include "source_writes.h"

/* planner state, in baserel->fdw_private */
typedef struct SwPlanInfo
{
	Oid			current_rel;	/* hidden heap of current rows */
	BlockNumber pages;
} SwPlanInfo;

/* indexes into ForeignScan.fdw_private */
enum SwScanPrivate
{
	SwScanCurrentRel,			/* Const: OID of the hidden heap */
	SwScanNeededAtts			/* Integer: last foreign attnum the plan reads */
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
	TupleTableSlot *current_slot;	/* tuples of the current heap */
	TupleTableSlot *history_slot;	/* tuples of the history heap */
	TupleTableSlot *direct_slot;	/* current tuples read as the table's */
	SwLayout	current_layout;
	SwLayout	history_layout;
	int			needed_atts;	/* deform hidden tuples this far (foreign attnums) */
	Snapshot	snapshot;		/* what the scan sees */
	bool		registered;		/* we registered the snapshot */
	int64		as_of;			/* -1, or the time read */
	HTAB	   *batches;		/* as_of: batches at or before it */
	SwParallelScan *pscan;		/* parallel scan, when there is one */
} SwScanState;

/*
 * The hidden heap of current rows of a source table.
 */
static Oid
current_relation(Oid relid)
{
	SwCatalogEntry entry;

	sw_catalog_require(relid, &entry);
	return entry.current_rel;
}

/*
 * Size estimates come from the hidden heap, as for a plain table.
 */
static void
swGetForeignRelSize(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	SwPlanInfo *info = palloc0(sizeof(SwPlanInfo));
	Relation	current;
	double		tuples;
	double		allvisfrac;
	Selectivity sel;

	info->current_rel = current_relation(foreigntableid);
	current = table_open(info->current_rel, AccessShareLock);
	estimate_rel_size(current, NULL, &info->pages, &tuples, &allvisfrac);
	table_close(current, NoLock);

	sel = clauselist_selectivity(root, baserel->baserestrictinfo, 0,
								 JOIN_INNER, NULL);
	baserel->pages = info->pages;
	baserel->tuples = tuples;
	baserel->rows = clamp_row_est(tuples * sel);
	baserel->fdw_private = info;
}

/*
 * The share of the rows one participant of a parallel plan handles, as the
 * planner reckons it for a sequential scan.
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
 * A full scan, costed like a sequential scan of the hidden heap, and its
 * parallel version when the heap is big enough to be worth it.
 */
static void
swGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	SwPlanInfo *info = baserel->fdw_private;
	double		seq_page_cost;
	Cost		startup;
	Cost		cpu_run;
	Cost		disk_run;
	int			workers;

	get_tablespace_page_costs(InvalidOid, NULL, &seq_page_cost);
	startup = baserel->baserestrictcost.startup +
		baserel->reltarget->cost.startup;
	disk_run = seq_page_cost * info->pages;
	cpu_run = (cpu_tuple_cost + baserel->baserestrictcost.per_tuple) * baserel->tuples +
		baserel->reltarget->cost.per_tuple * baserel->rows;

	add_path(baserel, (Path *)
			 create_foreignscan_path(root, baserel, NULL, baserel->rows,
									 startup, startup + disk_run + cpu_run,
									 NIL, baserel->lateral_relids,
									 NULL, NIL));

	if (!baserel->consider_parallel || baserel->lateral_relids != NULL)
		return;
	workers = compute_parallel_worker(baserel, info->pages, -1,
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

static ForeignScan *
swGetForeignPlan(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid,
				 ForeignPath *best_path, List *tlist, List *scan_clauses,
				 Plan *outer_plan)
{
	SwPlanInfo *info = baserel->fdw_private;
	List	   *fdw_private;

	/* all quals are checked locally, by the ForeignScan node */
	scan_clauses = extract_actual_clauses(scan_clauses, false);

	fdw_private = list_make2(makeConst(OIDOID, -1, InvalidOid, sizeof(Oid),
									   ObjectIdGetDatum(info->current_rel),
									   false, true),
							 makeInteger(needed_attributes(baserel, scan_clauses)));

	return make_foreignscan(tlist, scan_clauses, baserel->relid,
							NIL, fdw_private, NIL, NIL, outer_plan);
}

static void
swBeginForeignScan(ForeignScanState *node, int eflags)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	EState	   *estate = node->ss.ps.state;
	Relation	ftrel = node->ss.ss_currentRelation;
	SwScanState *ss = palloc0(sizeof(SwScanState));
	Oid			current = DatumGetObjectId(((Const *) list_nth(plan->fdw_private,
															   SwScanCurrentRel))->constvalue);

	ss->needed_atts = intVal(list_nth(plan->fdw_private, SwScanNeededAtts));
	ss->as_of = sw_as_of;
	node->fdw_state = ss;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	ss->current = table_open(current, AccessShareLock);
	ss->current_slot = table_slot_create(ss->current, &estate->es_tupleTable);
	sw_layout(ss->current, &ss->current_layout);
	ss->snapshot = estate->es_snapshot;

	/* every column of the table where the heap has it: no copying */
	if (ss->as_of < 0 && RelationGetDescr(ftrel)->natts < ss->current_layout.meta)
		ss->direct_slot = ExecAllocTableSlot(&estate->es_tupleTable,
											 RelationGetDescr(ftrel),
											 &TTSOpsBufferHeapTuple);

	if (ss->as_of >= 0)
	{
		SwCatalogEntry entry;

		sw_catalog_require(RelationGetRelid(ftrel), &entry);
		ss->history = table_open(entry.history_rel, AccessShareLock);
		ss->history_slot = table_slot_create(ss->history, &estate->es_tupleTable);
		sw_layout(ss->history, &ss->history_layout);

		/*
		 * Check that the time is readable, then take the snapshot: every
		 * batch at or before it has committed by now.  Parallel workers get
		 * the leader's snapshot with their scans.
		 */
		if (!IsParallelWorker())
		{
			sw_check_readable(RelationGetRelid(ftrel), &entry, ss->as_of);
			ss->snapshot = RegisterSnapshot(GetLatestSnapshot());
			ss->registered = true;
		}
	}
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
 * The next row of the source as of ss->as_of: from the current heap, rows
 * whose batch is at or before it, then from the history heap, rows
 * inserted at or before it and retracted after it.  Returns the hidden
 * slot and, in *layout, where its columns are; or NULL at the end.
 */
static TupleTableSlot *
next_row_as_of(ForeignScanState *node, SwScanState *ss, SwLayout **layout)
{
	MemoryContext query_cxt = node->ss.ps.state->es_query_cxt;

	if (ss->batches == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(query_cxt);

		ss->batches = sw_catalog_load_batches(RelationGetRelid(node->ss.ss_currentRelation),
											  ss->as_of, ss->scan->rs_snapshot);
		MemoryContextSwitchTo(old);
	}

	for (;;)
	{
		TupleTableSlot *hidden = ss->in_history ? ss->history_slot : ss->current_slot;
		bool		isnull;
		int64		batch;

		if (!table_scan_getnextslot(ss->scan, ForwardScanDirection, hidden))
		{
			MemoryContext old;

			if (ss->in_history)
				return NULL;
			table_endscan(ss->scan);
			old = MemoryContextSwitchTo(query_cxt);
			ss->scan = begin_heap_scan(ss, ss->history, true);
			MemoryContextSwitchTo(old);
			ss->in_history = true;
			continue;
		}

		*layout = ss->in_history ? &ss->history_layout : &ss->current_layout;
		batch = DatumGetInt64(slot_getattr(hidden, (*layout)->meta, &isnull));
		if (hash_search(ss->batches, &batch, HASH_FIND, NULL) == NULL)
			continue;			/* inserted later, or not committed */
		if (!ss->in_history)
			return hidden;
		batch = DatumGetInt64(slot_getattr(hidden, (*layout)->meta + 1, &isnull));
		if (hash_search(ss->batches, &batch, HASH_FIND, NULL) != NULL)
			continue;			/* already retracted then */
		return hidden;
	}
}

/*
 * The general case of swIterateForeignScan: start the scan, read as of a
 * time, or copy the needed columns of each row to their places.  Kept out
 * of line, so that the common case pays for no more than it uses.
 */
static pg_noinline TupleTableSlot *
iterate_scan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *hidden;
	SwLayout   *layout = &ss->current_layout;
	int			natts = slot->tts_tupleDescriptor->natts;

	if (ss->scan == NULL)
	{
		/* we run in per-tuple memory; the scan lives as long as the query */
		MemoryContext old = MemoryContextSwitchTo(node->ss.ps.state->es_query_cxt);

		ss->scan = begin_heap_scan(ss, ss->current, false);
		MemoryContextSwitchTo(old);
	}

	if (ss->direct_slot)
	{
		table_scan_getnextslot(ss->scan, ForwardScanDirection, ss->direct_slot);
		return ss->direct_slot;
	}

	ExecClearTuple(slot);
	if (ss->as_of < 0)
	{
		hidden = ss->current_slot;
		if (!table_scan_getnextslot(ss->scan, ForwardScanDirection, hidden))
			return slot;
	}
	else if ((hidden = next_row_as_of(node, ss, &layout)) == NULL)
		return slot;

	slot_getsomeattrs(hidden, sw_hidden_attnum(layout, ss->needed_atts));
	sw_from_hidden(layout, ss->needed_atts, hidden->tts_values,
				   hidden->tts_isnull, slot->tts_values, slot->tts_isnull);
	for (int i = ss->needed_atts; i < natts; i++)
		slot->tts_isnull[i] = true;
	ExecStoreVirtualTuple(slot);
	slot->tts_tid = hidden->tts_tid;
	return slot;
}

/*
 * The row the scan returned last, in a buffer slot of the current heap's
 * tuples, when it hands them over as they are (see swIterateForeignScan);
 * NULL otherwise.  UPDATE and DELETE use it to skip fetching the row again.
 */
TupleTableSlot *
sw_scan_current_row(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	return ss ? ss->direct_slot : NULL;
}

/*
 * The next row.  In the common case the heap tuple is the row, and this is
 * all there is to it: as little as a sequential scan does per row.
 */
static TupleTableSlot *
swIterateForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (likely(ss->direct_slot != NULL && ss->scan != NULL))
	{
		table_scan_getnextslot(ss->scan, ForwardScanDirection, ss->direct_slot);
		return ss->direct_slot;
	}
	return iterate_scan(node);
}

static void
swReScanForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (ss->scan == NULL)
		return;
	if (ss->in_history)
	{
		/* back to the start: the current heap */
		table_endscan(ss->scan);
		ss->scan = NULL;
		ss->in_history = false;
	}
	else
		table_rescan(ss->scan, NULL);
}

static void
swEndForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (ss == NULL || ss->current == NULL)
		return;
	if (ss->scan)
		table_endscan(ss->scan);
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

/*
 * ANALYZE samples the hidden heap of current rows.
 */
static int
swAcquireSampleRows(Relation relation, int elevel, HeapTuple *rows,
					int targrows, double *totalrows, double *totaldeadrows)
{
	TupleDesc	desc = RelationGetDescr(relation);
	Relation	current = table_open(current_relation(RelationGetRelid(relation)),
									 AccessShareLock);
	Snapshot	snapshot = RegisterSnapshot(GetTransactionSnapshot());
	TableScanDesc scan = table_beginscan(current, snapshot, 0, NULL);
	TupleTableSlot *slot = table_slot_create(current, NULL);
	Datum	   *values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	bool	   *isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
	SwLayout	layout;
	ReservoirStateData rstate;
	double		rowstoskip = -1;
	double		seen = 0;
	int			numrows = 0;

	sw_layout(current, &layout);
	reservoir_init_selection_state(&rstate, targrows);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		HeapTuple	tuple;

		vacuum_delay_point();
		slot_getallattrs(slot);
		sw_from_hidden(&layout, desc->natts, slot->tts_values, slot->tts_isnull,
					   values, isnull);
		tuple = heap_form_tuple(desc, values, isnull);
		if (numrows < targrows)
			rows[numrows++] = tuple;
		else
		{
			/* Vitter's algorithm, as acquire_sample_rows() does */
			if (rowstoskip < 0)
				rowstoskip = reservoir_get_next_S(&rstate, seen, targrows);
			if (rowstoskip <= 0)
			{
				int			k = (int) (targrows * sampler_random_fract(&rstate.randstate));

				heap_freetuple(rows[k]);
				rows[k] = tuple;
			}
			else
				heap_freetuple(tuple);
			rowstoskip -= 1;
		}
		seen += 1;
	}

	ExecDropSingleTupleTableSlot(slot);
	table_endscan(scan);
	UnregisterSnapshot(snapshot);
	table_close(current, AccessShareLock);

	*totalrows = seen;
	*totaldeadrows = 0;
	ereport(elevel,
			(errmsg("\"%s\": source table contains %.0f rows; %d rows in sample",
					RelationGetRelationName(relation), seen, numrows)));
	return numrows;
}

static bool
swAnalyzeForeignTable(Relation relation, AcquireSampleRowsFunc *func,
					  BlockNumber *totalpages)
{
	Relation	current = table_open(current_relation(RelationGetRelid(relation)),
									 AccessShareLock);

	*totalpages = RelationGetNumberOfBlocks(current);
	table_close(current, AccessShareLock);
	*func = swAcquireSampleRows;
	return true;
}

PG_FUNCTION_INFO_V1(source_writes_fdw_handler);

/*
 * The foreign data wrapper handler.
 */
Datum
source_writes_fdw_handler(PG_FUNCTION_ARGS)
{
	FdwRoutine *routine = makeNode(FdwRoutine);

	routine->GetForeignRelSize = swGetForeignRelSize;
	routine->GetForeignPaths = swGetForeignPaths;
	routine->GetForeignPlan = swGetForeignPlan;
	routine->BeginForeignScan = swBeginForeignScan;
	routine->IterateForeignScan = swIterateForeignScan;
	routine->ReScanForeignScan = swReScanForeignScan;
	routine->EndForeignScan = swEndForeignScan;
	routine->ExplainForeignScan = swExplainForeignScan;
	routine->AnalyzeForeignTable = swAnalyzeForeignTable;
	routine->IsForeignScanParallelSafe = swIsForeignScanParallelSafe;
	routine->EstimateDSMForeignScan = swEstimateDSMForeignScan;
	routine->InitializeDSMForeignScan = swInitializeDSMForeignScan;
	routine->ReInitializeDSMForeignScan = swReInitializeDSMForeignScan;
	routine->InitializeWorkerForeignScan = swInitializeWorkerForeignScan;
	sw_fdw_modify_routine(routine);

	PG_RETURN_POINTER(routine);
}
