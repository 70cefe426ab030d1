/*-------------------------------------------------------------------------
 *
 * fdw_scan.c
 *		  The foreign data wrapper's handler, planning and scan of source
 *		  tables, EXPLAIN and ANALYZE
 *
 * A source table is read straight from its hidden heap of current rows
 * with a table AM scan under the query's snapshot: the same work as a
 * sequential scan of a plain table, plus moving the datums of the needed
 * columns (which sit one attnum further) into the foreign scan's slot.
 * The slot's tts_tid is the heap tuple's ctid: the row identity that
 * UPDATE and DELETE use, visible as the ctid system column.
 *
 * IDENTIFICATION
 *		  src/fdw_scan.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
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
#include "optimizer/plancat.h"
#include "optimizer/planmain.h"
#include "optimizer/restrictinfo.h"
#include "storage/bufmgr.h"
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

/* execution state of a scan */
typedef struct SwScanState
{
	Relation	current;		/* hidden heap of current rows */
	TableScanDesc scan;
	TupleTableSlot *hidden_slot;	/* tuples of the hidden heap */
	int			needed_atts;	/* deform the hidden tuple this far (foreign attnums) */
} SwScanState;

/*
 * The hidden heap of current rows of a source table, or an error if the
 * table has no storage (created while our event triggers could not run).
 */
static Oid
current_relation(Oid relid)
{
	SwCatalogEntry entry;

	if (!sw_catalog_lookup(relid, &entry))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_TABLE_NOT_FOUND),
				 errmsg("source table \"%s\" has no storage", get_rel_name(relid)),
				 errdetail("Storage is created by the extension's event triggers, which did not run for this table."),
				 errhint("Any ALTER FOREIGN TABLE on it, with the event triggers enabled, creates the storage.")));
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
 * One path: a full scan, costed like a sequential scan of the hidden heap.
 */
static void
swGetForeignPaths(PlannerInfo *root, RelOptInfo *baserel, Oid foreigntableid)
{
	SwPlanInfo *info = baserel->fdw_private;
	double		seq_page_cost;
	Cost		startup;
	Cost		run;

	get_tablespace_page_costs(InvalidOid, NULL, &seq_page_cost);
	startup = baserel->baserestrictcost.startup +
		baserel->reltarget->cost.startup;
	run = seq_page_cost * info->pages +
		(cpu_tuple_cost + baserel->baserestrictcost.per_tuple) * baserel->tuples +
		baserel->reltarget->cost.per_tuple * baserel->rows;

	add_path(baserel, (Path *)
			 create_foreignscan_path(root, baserel, NULL, baserel->rows,
									 startup, startup + run,
									 NIL, baserel->lateral_relids,
									 NULL, NIL));
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
	SwScanState *ss = palloc0(sizeof(SwScanState));
	Oid			current = DatumGetObjectId(((Const *) list_nth(plan->fdw_private,
															   SwScanCurrentRel))->constvalue);

	ss->needed_atts = intVal(list_nth(plan->fdw_private, SwScanNeededAtts));
	node->fdw_state = ss;
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	ss->current = table_open(current, AccessShareLock);
	ss->hidden_slot = table_slot_create(ss->current, &estate->es_tupleTable);
	ss->scan = table_beginscan(ss->current, estate->es_snapshot, 0, NULL);
}

static TupleTableSlot *
swIterateForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;
	TupleTableSlot *slot = node->ss.ss_ScanTupleSlot;
	TupleTableSlot *hidden = ss->hidden_slot;
	int			natts = slot->tts_tupleDescriptor->natts;

	ExecClearTuple(slot);
	if (!table_scan_getnextslot(ss->scan, ForwardScanDirection, hidden))
		return slot;

	/* foreign attnum k is hidden attnum k + SW_CURRENT_META */
	slot_getsomeattrs(hidden, ss->needed_atts + SW_CURRENT_META);
	memcpy(slot->tts_values, hidden->tts_values + SW_CURRENT_META,
		   ss->needed_atts * sizeof(Datum));
	memcpy(slot->tts_isnull, hidden->tts_isnull + SW_CURRENT_META,
		   ss->needed_atts * sizeof(bool));
	for (int i = ss->needed_atts; i < natts; i++)
		slot->tts_isnull[i] = true;
	ExecStoreVirtualTuple(slot);
	slot->tts_tid = hidden->tts_tid;
	return slot;
}

static void
swReScanForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	table_rescan(ss->scan, NULL);
}

static void
swEndForeignScan(ForeignScanState *node)
{
	SwScanState *ss = node->fdw_state;

	if (ss == NULL || ss->current == NULL)
		return;
	table_endscan(ss->scan);
	table_close(ss->current, NoLock);
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
	ListCell   *lc;

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
	ReservoirStateData rstate;
	double		rowstoskip = -1;
	double		seen = 0;
	int			numrows = 0;

	reservoir_init_selection_state(&rstate, targrows);

	while (table_scan_getnextslot(scan, ForwardScanDirection, slot))
	{
		HeapTuple	tuple;

		vacuum_delay_point();
		slot_getallattrs(slot);
		tuple = heap_form_tuple(desc, slot->tts_values + SW_CURRENT_META,
								slot->tts_isnull + SW_CURRENT_META);
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

	PG_RETURN_POINTER(routine);
}
