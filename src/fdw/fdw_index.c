/*-------------------------------------------------------------------------
 *
 * fdw_index.c
 *		  Index paths of source tables, and the index and bitmap scans
 *		  that follow them
 *
 * See doc/internals.md, "Reading the log" (Index scans).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw_index.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/visibilitymap.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "executor/executor.h"
#include "executor/nodeIndexscan.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/tidbitmap.h"
#include "optimizer/optimizer.h"
#include "optimizer/paramassign.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/placeholder.h"
#include "optimizer/plancat.h"
#include "optimizer/planmain.h"
#include "parser/parsetree.h"
#include "storage/bufmgr.h"
#include "storage/predicate.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"

#include "fdw/fdw.h"
#include "fdw/index_scan.h"
#include "log/log.h"

/* ForeignScan.fdw_private of an index or bitmap scan, from the offset given */
enum SwIndexPrivate
{
	SwIndexKind,				/* Integer: SwScanKind */
	SwIndexOid,					/* Integer: the index of an index scan */
	SwIndexBackward,			/* Boolean: ... scanned backward */
	SwIndexPrivateLength
};

/* the execution state of an index or bitmap scan of the current heap */
struct SwIndexScan
{
	ForeignScanState *node;
	SwScanKind	kind;
	Relation	current;
	Snapshot	snapshot;

	/* SW_SCAN_INDEX and SW_SCAN_INDEX_ONLY */
	Relation	index;
	IndexScanDesc scan;
	ScanDirection direction;
	ScanKey		keys;
	int			nkeys;
	IndexRuntimeKeyInfo *runtime_keys;	/* keys computed at each (re)scan */
	int			nruntime_keys;
	ExprContext *runtime_cxt;	/* ... in this context */
	bool		started;

	/* SW_SCAN_INDEX_ONLY: the table's attnum of each index column */
	AttrNumber *attnums;
	Buffer		vm_buffer;		/* of the visibility map */
	uint64		heap_fetches;	/* for EXPLAIN ANALYZE */
	bool		recheck;		/* the last row's index match was lossy */
	Datum	   *values;			/* an index tuple's columns */
	bool	   *isnull;

	/* SW_SCAN_BITMAP */
	TIDBitmap  *bitmap;			/* from the outer plan */
	TBMIterator *iterator;
	TBMIterateResult *page;		/* the page being read, or NULL */
	TableScanDesc heap_scan;
};

/* mapping the current heap's attnums to the foreign table's */
typedef struct MapVars
{
	Index		varno;
	const SwLayout *layout;
	TupleDesc	desc;			/* the foreign table's */
	bool		ours;			/* found one of our own columns */
} MapVars;

/*
 * A Var of the current heap made the foreign table's.  A column of a
 * domain type has the domain's base type in the heap, and CREATE INDEX
 * dropped the coercion of the domain to its base type (indexes.c); it is
 * put back as the parser puts it in a query (a RelabelType to the base
 * type, its typmod unknown), for the planner to find the index's
 * expressions and predicate in the query's.
 */
static Node *
map_vars_mutator(Node *node, MapVars *map)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;
		Var		   *mapped;
		AttrNumber	attnum;
		Form_pg_attribute att;

		if (var->varno != map->varno || var->varlevelsup != 0 ||
			var->varattno <= 0)
			return (Node *) copyObject(var);
		attnum = sw_table_attnum(map->layout, var->varattno);
		if (attnum == InvalidAttrNumber || attnum > map->desc->natts)
		{
			map->ours = true;
			return (Node *) copyObject(var);
		}
		att = TupleDescAttr(map->desc, attnum - 1);
		mapped = makeVar(var->varno, attnum, att->atttypid, att->atttypmod,
						 att->attcollation, 0);
		mapped->location = var->location;
		if (att->atttypid == var->vartype)
		{
			mapped->vartypmod = var->vartypmod;
			mapped->varcollid = var->varcollid;
			return (Node *) mapped;
		}
		return (Node *) makeRelabelType((Expr *) mapped, var->vartype, -1,
										var->varcollid, COERCE_IMPLICIT_CAST);
	}
	return expression_tree_mutator(node, map_vars_mutator, (void *) map);
}

/*
 * Make the planner's description of an index of the current heap describe
 * it as an index of the foreign table: its columns and the Vars of its
 * expressions, predicate and target list are the table's.  False for an
 * index on one of our own columns, which no query can use.
 */
static bool
map_index(IndexOptInfo *index, RelOptInfo *rel, Relation ftrel,
		  const SwLayout *layout)
{
	TupleDesc	desc = RelationGetDescr(ftrel);
	MapVars		map = {rel->relid, layout, desc, false};
	ListCell   *lc;
	int			i;

	index->rel = rel;
	for (i = 0; i < index->ncolumns; i++)
	{
		if (index->indexkeys[i] != 0)
		{
			index->indexkeys[i] = sw_table_attnum(layout, index->indexkeys[i]);
			if (index->indexkeys[i] <= 0)
				return false;
		}
	}
	index->indexprs = (List *) map_vars_mutator((Node *) index->indexprs, &map);
	index->indpred = (List *) map_vars_mutator((Node *) index->indpred, &map);
	if (map.ours)
		return false;

	/*
	 * The target list's expressions are those of indexprs, mapped the same
	 * way; its simple columns become the table's, with the table's types (a
	 * domain's, where the heap has its base type).
	 */
	i = 0;
	foreach(lc, index->indextlist)
	{
		TargetEntry *tle = lfirst(lc);
		AttrNumber	attnum = index->indexkeys[i++];

		if (attnum != 0)
		{
			Form_pg_attribute att = TupleDescAttr(desc, attnum - 1);

			tle->expr = (Expr *) makeVar(rel->relid, attnum, att->atttypid,
										 att->atttypmod, att->attcollation, 0);
		}
		else
			tle->expr = (Expr *) map_vars_mutator((Node *) tle->expr, &map);
	}
	return true;
}

/*
 * The indexes of the current heap, as the planner describes a plain
 * table's indexes (get_relation_info() on the heap), made the foreign
 * table's.
 */
static List *
table_indexes(PlannerInfo *root, RelOptInfo *rel, Relation ftrel,
			  Relation current)
{
	RelOptInfo *heap = makeNode(RelOptInfo);
	SwLayout	layout;
	List	   *indexes = NIL;
	ListCell   *lc;

	sw_storage_layout(ftrel, current, &layout);

	/* not a base relation: get_relation_info() looks for no foreign keys */
	heap->reloptkind = RELOPT_OTHER_MEMBER_REL;
	heap->relid = rel->relid;
	get_relation_info(root, RelationGetRelid(current), false, heap);

	foreach(lc, heap->indexlist)
	{
		IndexOptInfo *index = lfirst(lc);

		if (map_index(index, rel, ftrel, &layout))
			indexes = lappend(indexes, index);
	}
	return indexes;
}

/*
 * The paths through the indexes of a source's current heap: PostgreSQL's
 * own index paths (create_index_paths(): index and bitmap scans, ordered
 * ones, parameterized ones for nested loops, with the index AMs' cost
 * estimates), each wrapped in a ForeignPath of the same cost, rows and
 * order.  Called before any path of the relation is added, since
 * create_index_paths() adds to the relation's path lists, which are
 * emptied again.  Reads as of a time scan the heaps, and get none.
 *
 * The relation lists the indexes only while its index paths are made.
 * Selectivity estimates made meanwhile (of a partial index's predicate, of
 * the range a LIKE prefix makes) read actual extremes from a relation's
 * btree indexes (get_actual_variable_range()) through the table AM of the
 * relation itself, which a foreign table has none of: meanwhile the btree
 * indexes say they are hypothetical, which that function skips, and the
 * estimates use the histogram.  (Of the index AMs' cost estimators, only
 * GIN's and BRIN's look at the flag.)
 */
List *
sw_index_paths(PlannerInfo *root, RelOptInfo *rel, Oid current_rel)
{
	RangeTblEntry *rte = planner_rt_fetch(rel->relid, root);
	List	   *paths = NIL;
	Relation	current;
	Relation	ftrel;
	ListCell   *lc;

	if (sw_as_of >= 0)
		return NIL;
	Assert(rel->pathlist == NIL && rel->partial_pathlist == NIL);

	current = table_open(current_rel, NoLock);
	if (current->rd_rel->relhasindex)
	{
		ftrel = table_open(rte->relid, NoLock);
		rel->indexlist = table_indexes(root, rel, ftrel, current);
		table_close(ftrel, NoLock);
	}
	table_close(current, NoLock);
	if (rel->indexlist == NIL)
		return NIL;

	check_index_predicates(root, rel);
	foreach(lc, rel->indexlist)
	{
		IndexOptInfo *index = lfirst(lc);

		if (index->relam == BTREE_AM_OID)
			index->hypothetical = true;
	}
	create_index_paths(root, rel);
	foreach(lc, rel->indexlist)
		((IndexOptInfo *) lfirst(lc))->hypothetical = false;

	foreach(lc, rel->pathlist)
	{
		Path	   *path = lfirst(lc);

		/* ordering by operators (distance) needs a reordering queue */
		if (IsA(path, IndexPath) && ((IndexPath *) path)->indexorderbys != NIL)
			continue;
		paths = lappend(paths,
						create_foreignscan_path(root, rel, NULL, path->rows,
												path->startup_cost,
												path->total_cost,
												path->pathkeys,
												PATH_REQ_OUTER(path),
												NULL, list_make1(path)));
	}
	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	rel->indexlist = NIL;
	return paths;
}

/*
 * Replace the Vars and PlaceHolderVars of outer relations with nestloop
 * Params, as createplan.c does for a scan's own expressions (which
 * create_foreignscan_plan() does for ours).
 */
static Node *
nestloop_params_mutator(Node *node, PlannerInfo *root)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		if (IS_SPECIAL_VARNO(var->varno) ||
			!bms_is_member(var->varno, root->curOuterRels))
			return node;
		return (Node *) replace_nestloop_param_var(root, var);
	}
	if (IsA(node, PlaceHolderVar))
	{
		PlaceHolderVar *phv = (PlaceHolderVar *) node;

		if (bms_is_subset(find_placeholder_info(root, phv, false)->ph_eval_at,
						  root->curOuterRels))
			return (Node *) replace_nestloop_param_placeholdervar(root, phv);
	}
	return expression_tree_mutator(node, nestloop_params_mutator, (void *) root);
}

/* ... in the conditions of a bitmap's index scans */
static void
bitmap_nestloop_params(PlannerInfo *root, Plan *plan)
{
	ListCell   *lc;

	if (IsA(plan, BitmapIndexScan))
	{
		BitmapIndexScan *scan = (BitmapIndexScan *) plan;

		scan->indexqual = (List *)
			nestloop_params_mutator((Node *) scan->indexqual, root);
		scan->indexqualorig = (List *)
			nestloop_params_mutator((Node *) scan->indexqualorig, root);
	}
	else if (IsA(plan, BitmapAnd))
		foreach(lc, ((BitmapAnd *) plan)->bitmapplans)
			bitmap_nestloop_params(root, lfirst(lc));
	else if (IsA(plan, BitmapOr))
		foreach(lc, ((BitmapOr *) plan)->bitmapplans)
			bitmap_nestloop_params(root, lfirst(lc));
	else
		elog(ERROR, "unrecognized node type: %d", (int) nodeTag(plan));
}

/*
 * The conditions an index path's scan puts to the index, on the table's
 * columns: what createplan.c keeps as an index scan's indexqualorig, to
 * check rows that the index matched lossily, and for EXPLAIN.
 */
static List *
index_conditions(IndexPath *path)
{
	List	   *conditions = NIL;
	ListCell   *lc;

	foreach(lc, path->indexclauses)
	{
		IndexClause *iclause = lfirst(lc);
		ListCell   *lc2;

		foreach(lc2, iclause->indexquals)
			conditions = lappend(conditions, ((RestrictInfo *) lfirst(lc2))->clause);
	}
	return conditions;
}

/*
 * The plan of an index path: PostgreSQL's own plan of it (create_plan(),
 * which puts the index's conditions in the form the index scan needs),
 * taken apart.  An index scan (or index-only scan) keeps its conditions
 * in fdw_exprs, where
 * create_foreignscan_plan() turns outer Vars into nestloop Params; a bitmap
 * scan keeps the plan of its bitmap (bitmap index scans, and their AND and
 * OR) as the ForeignScan's outer plan, which the executor runs and EXPLAIN
 * shows as PostgreSQL's own nodes.  The ForeignScan checks what PostgreSQL's
 * scan would (its qual: the conditions the index does not settle), and its
 * fdw_recheck_quals are the index's conditions on the table's columns,
 * checked where the index is lossy and by EvalPlanQual.
 *
 * create_plan() starts from no outer relations; our caller's are put back
 * before the bitmap's outer Vars are replaced.  (create_foreignscan_plan()
 * replaces those of the ForeignScan's own expressions.)
 */
void
sw_index_plan(PlannerInfo *root, ForeignPath *fpath, SwIndexPlan *out)
{
	Path	   *path = linitial(fpath->fdw_private);
	Relids		outer_rels = root->curOuterRels;
	List	   *outer_params = root->curOuterParams;
	Plan	   *plan;

	plan = create_plan(root, path);
	root->curOuterRels = outer_rels;
	root->curOuterParams = outer_params;

	if (IsA(plan, IndexScan) || IsA(plan, IndexOnlyScan))
	{
		IndexScan  *scan = (IndexScan *) plan;
		IndexOnlyScan *only = (IndexOnlyScan *) plan;
		bool		index_only = IsA(plan, IndexOnlyScan);

		out->kind = index_only ? SW_SCAN_INDEX_ONLY : SW_SCAN_INDEX;
		out->fdw_exprs = list_make1(index_only ? only->indexqual : scan->indexqual);
		out->recheck_quals = index_conditions((IndexPath *) path);
		out->fdw_private = list_make3(makeInteger(out->kind),
									  makeInteger((int) (index_only ? only->indexid : scan->indexid)),
									  makeBoolean(ScanDirectionIsBackward(index_only ? only->indexorderdir : scan->indexorderdir)));
		out->outer_plan = NULL;
	}
	else if (IsA(plan, BitmapHeapScan))
	{
		out->kind = SW_SCAN_BITMAP;
		out->fdw_exprs = NIL;
		out->recheck_quals = ((BitmapHeapScan *) plan)->bitmapqualorig;
		out->fdw_private = list_make3(makeInteger(SW_SCAN_BITMAP),
									  makeInteger((int) InvalidOid),
									  makeBoolean(false));
		out->outer_plan = outerPlan(plan);
		if (fpath->path.param_info)
			bitmap_nestloop_params(root, out->outer_plan);
	}
	else
		elog(ERROR, "unrecognized node type: %d", (int) nodeTag(plan));
	out->qual = plan->qual;
}

/*
 * How the plan reads the current rows, from ForeignScan.fdw_private at
 * offset.
 */
SwScanKind
sw_index_plan_kind(List *fdw_private, int offset)
{
	if (list_length(fdw_private) < offset + SwIndexPrivateLength)
		return SW_SCAN_HEAP;
	return (SwScanKind) intVal(list_nth(fdw_private, offset + SwIndexKind));
}

/*
 * Start an index or bitmap scan of the current heap, for a plan that
 * makes one: the index scan's keys are built as nodeIndexscan.c builds
 * them (ExecIndexBuildScanKeys()), those computed at run time in a context
 * of their own; the bitmap's plan was started with the ForeignScan node.
 */
SwIndexScan *
sw_index_begin(ForeignScanState *node, int offset, Relation current,
			   const SwLayout *layout, Snapshot snapshot)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	SwIndexScan *is = palloc0(sizeof(SwIndexScan));

	is->node = node;
	is->kind = sw_index_plan_kind(plan->fdw_private, offset);
	is->current = current;
	is->snapshot = snapshot;
	if (is->kind != SW_SCAN_BITMAP)
	{
		Oid			indexoid = (Oid) intVal(list_nth(plan->fdw_private,
													 offset + SwIndexOid));

		is->index = index_open(indexoid, AccessShareLock);
		is->direction = boolVal(list_nth(plan->fdw_private, offset + SwIndexBackward))
			? BackwardScanDirection : ForwardScanDirection;
		ExecIndexBuildScanKeys(&node->ss.ps, is->index,
							   linitial(plan->fdw_exprs), false,
							   &is->keys, &is->nkeys,
							   &is->runtime_keys, &is->nruntime_keys,
							   NULL, NULL);
		if (is->nruntime_keys > 0)
			is->runtime_cxt = CreateExprContext(node->ss.ps.state);
	}
	else
		Assert(outerPlanState(node) != NULL);

	if (is->kind == SW_SCAN_INDEX_ONLY)
	{
		int			ncolumns = RelationGetDescr(is->index)->natts;

		is->attnums = palloc(sizeof(AttrNumber) * ncolumns);
		for (int i = 0; i < ncolumns; i++)
			is->attnums[i] = sw_table_attnum(layout,
										  is->index->rd_index->indkey.values[i]);
		is->values = palloc(sizeof(Datum) * ncolumns);
		is->isnull = palloc(sizeof(bool) * ncolumns);
		is->vm_buffer = InvalidBuffer;
	}
	return is;
}

/* start the index scan, or start it again, with the keys of this scan */
static void
start_index_scan(SwIndexScan *is)
{
	if (is->nruntime_keys > 0)
	{
		ResetExprContext(is->runtime_cxt);
		ExecIndexEvalRuntimeKeys(is->runtime_cxt, is->runtime_keys,
								 is->nruntime_keys);
	}
	if (is->scan == NULL)
	{
		is->scan = index_beginscan(is->current, is->index, is->snapshot,
								   is->nkeys, 0);
		is->scan->xs_want_itup = (is->kind == SW_SCAN_INDEX_ONLY);
	}
	index_rescan(is->scan, is->keys, is->nkeys, NULL, 0);
	is->started = true;
}

/* get the bitmap from the outer plan, and start reading its pages */
static void
start_bitmap_scan(SwIndexScan *is)
{
	Node	   *bitmap = MultiExecProcNode(outerPlanState(is->node));

	if (bitmap == NULL || !IsA(bitmap, TIDBitmap))
		elog(ERROR, "unrecognized result from subplan");
	is->bitmap = (TIDBitmap *) bitmap;
	is->iterator = tbm_begin_iterate(is->bitmap);
	is->page = NULL;
	if (is->heap_scan == NULL)
		is->heap_scan = table_beginscan_bm(is->current, is->snapshot, 0, NULL);
	else
		table_rescan(is->heap_scan, NULL);
}

/*
 * The next row of an index-only scan, as nodeIndexonlyscan.c finds it: a
 * TID from the index, whose heap page the visibility map says all
 * visible, or else whose tuple the snapshot sees; the row is made of the
 * index tuple's columns, in slot (the scan slot), the others null.
 */
static bool
index_only_next(SwIndexScan *is, TupleTableSlot *hidden, TupleTableSlot *slot)
{
	IndexScanDesc scan = is->scan;
	ItemPointer tid;

	while ((tid = index_getnext_tid(scan, is->direction)) != NULL)
	{
		bool		from_heap = false;
		int			natts = slot->tts_tupleDescriptor->natts;
		int			ncolumns = RelationGetDescr(is->index)->natts;

		CHECK_FOR_INTERRUPTS();
		if (!VM_ALL_VISIBLE(is->current, ItemPointerGetBlockNumber(tid),
							&is->vm_buffer))
		{
			is->heap_fetches++;
			if (!index_fetch_heap(scan, hidden))
				continue;
			ExecClearTuple(hidden);
			if (scan->xs_heap_continue)
				elog(ERROR, "non-MVCC snapshots are not supported in index-only scans");
			from_heap = true;
		}

		if (scan->xs_hitup)
			heap_deform_tuple(scan->xs_hitup, scan->xs_hitupdesc,
							  is->values, is->isnull);
		else if (scan->xs_itup)
			index_deform_tuple(scan->xs_itup, scan->xs_itupdesc,
							   is->values, is->isnull);
		else
			elog(ERROR, "no data returned for index-only scan");

		ExecClearTuple(slot);
		for (int i = 0; i < natts; i++)
			slot->tts_isnull[i] = true;
		for (int i = 0; i < ncolumns; i++)
		{
			AttrNumber	attnum = is->attnums[i];

			if (attnum > 0 && attnum <= natts)
			{
				slot->tts_values[attnum - 1] = is->values[i];
				slot->tts_isnull[attnum - 1] = is->isnull[i];
			}
		}
		ExecStoreVirtualTuple(slot);
		slot->tts_tid = *tid;
		is->recheck = scan->xs_recheck;

		if (!from_heap)
			PredicateLockPage(is->current, ItemPointerGetBlockNumber(tid),
							  is->snapshot);
		return true;
	}
	return false;
}

/*
 * The next row the index or the bitmap finds (see sw_index_next()).
 */
static TupleTableSlot *
next_row(SwIndexScan *is, TupleTableSlot *hidden, TupleTableSlot *slot)
{
	if (is->kind != SW_SCAN_BITMAP)
	{
		if (!is->started)
			start_index_scan(is);
		if (is->kind == SW_SCAN_INDEX_ONLY)
			return index_only_next(is, hidden, slot) ? slot : NULL;
		if (!index_getnext_slot(is->scan, is->direction, hidden))
			return NULL;
		is->recheck = is->scan->xs_recheck;
		return hidden;
	}

	if (is->bitmap == NULL)
		start_bitmap_scan(is);
	for (;;)
	{
		if (is->page == NULL)
		{
			CHECK_FOR_INTERRUPTS();
			is->page = tbm_iterate(is->iterator);
			if (is->page == NULL)
				return NULL;
			if (!table_scan_bitmap_next_block(is->heap_scan, is->page))
			{
				is->page = NULL;
				continue;
			}
		}
		if (table_scan_bitmap_next_tuple(is->heap_scan, is->page, hidden))
		{
			is->recheck = is->page->recheck;
			return hidden;
		}
		is->page = NULL;
	}
}

/*
 * The next row the index or the bitmap finds: a tuple of the current heap
 * in hidden (a buffer slot of the heap), for the caller to make a row of,
 * or, from an index-only scan, the row itself in slot.  NULL at the end.
 *
 * The scan runs in the query's memory, as an index scan node's does: we
 * are called in memory reset for each row, and index AMs keep what they
 * allocate as they go (btree's list of dead items, for one).
 */
TupleTableSlot *
sw_index_next(SwIndexScan *is, TupleTableSlot *hidden, TupleTableSlot *slot)
{
	MemoryContext old = MemoryContextSwitchTo(is->node->ss.ps.state->es_query_cxt);
	TupleTableSlot *found = next_row(is, hidden, slot);

	MemoryContextSwitchTo(old);
	return found;
}

/*
 * Whether the row sw_index_next() found last must be checked against the
 * index's conditions: the index (or the bitmap's page) was lossy.
 */
bool
sw_index_recheck(SwIndexScan *is)
{
	return is->recheck;
}

/* forget the bitmap read so far */
static void
end_bitmap(SwIndexScan *is)
{
	if (is->iterator)
		tbm_end_iterate(is->iterator);
	if (is->bitmap)
		tbm_free(is->bitmap);
	is->iterator = NULL;
	is->bitmap = NULL;
	is->page = NULL;
}

/*
 * Start again at the next row asked for: with keys computed again, or a
 * new bitmap (the ForeignScan node rescans the outer plan).
 */
void
sw_index_rescan(SwIndexScan *is)
{
	if (is->kind != SW_SCAN_BITMAP)
		is->started = false;
	else
		end_bitmap(is);
}

void
sw_index_end(SwIndexScan *is)
{
	if (is->kind != SW_SCAN_BITMAP)
	{
		if (BufferIsValid(is->vm_buffer))
			ReleaseBuffer(is->vm_buffer);
		if (is->scan)
			index_endscan(is->scan);
		index_close(is->index, NoLock);
		return;
	}
	end_bitmap(is);
	if (is->heap_scan)
		table_endscan(is->heap_scan);
}

/*
 * Find target below plan, and add the plans on the way to it to
 * *ancestors, its parent first: the ancestors EXPLAIN keeps for the nodes
 * it shows itself, which deparsing needs to name what a nestloop Param
 * stands for.
 */
static bool
find_ancestors(Plan *plan, Plan *target, List **ancestors)
{
	List	   *children = NIL;
	ListCell   *lc;

	if (plan == NULL)
		return false;
	if (plan == target)
		return true;
	if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, SubqueryScan))
		children = list_make1(((SubqueryScan *) plan)->subplan);
	else if (IsA(plan, CustomScan))
		children = ((CustomScan *) plan)->custom_plans;
	children = lappend(list_copy(children), plan->lefttree);
	children = lappend(children, plan->righttree);
	foreach(lc, children)
	{
		if (find_ancestors(lfirst(lc), target, ancestors))
		{
			*ancestors = lappend(*ancestors, plan);
			return true;
		}
	}
	return false;
}

/*
 * EXPLAIN of an index scan: its kind and index, as PostgreSQL names an
 * index scan node ("Index Only Scan Backward: t_at_idx"; in the other
 * formats, the keys of an index scan node: "Scan Direction", "Index
 * Name"), and its
 * conditions; with ANALYZE, an index-only scan's heap fetches.  A bitmap
 * scan's indexes are in the nodes of its outer plan; its conditions on the
 * table's columns are its "Recheck Cond", as PostgreSQL shows them.
 */
void
sw_index_explain(ForeignScanState *node, SwIndexScan *is, int offset,
				 ExplainState *es)
{
	ForeignScan *plan = (ForeignScan *) node->ss.ps.plan;
	SwScanKind	kind = sw_index_plan_kind(plan->fdw_private, offset);
	List	   *quals = plan->fdw_recheck_quals;

	if (kind == SW_SCAN_HEAP)
		return;
	if (kind != SW_SCAN_BITMAP)
	{
		Oid			indexoid = (Oid) intVal(list_nth(plan->fdw_private,
													 offset + SwIndexOid));

		const char *scan = kind == SW_SCAN_INDEX ? "Index Scan" : "Index Only Scan";
		bool		backward = boolVal(list_nth(plan->fdw_private,
											offset + SwIndexBackward));

		if (es->format == EXPLAIN_FORMAT_TEXT)
			ExplainPropertyText(psprintf("%s%s", scan, backward ? " Backward" : ""),
								quote_identifier(get_rel_name(indexoid)), es);
		else
		{
			/* the keys PostgreSQL gives an index scan node */
			ExplainPropertyText("Index Scan Type", scan, es);
			ExplainPropertyText("Scan Direction", backward ? "Backward" : "Forward", es);
			ExplainPropertyText("Index Name", get_rel_name(indexoid), es);
		}
	}
	if (quals != NIL)
	{
		List	   *ancestors = NIL;
		List	   *context;
		ListCell   *lc;

		if (!find_ancestors(es->pstmt->planTree, (Plan *) plan, &ancestors))
			foreach(lc, es->pstmt->subplans)
			{
				list_free(ancestors);
				ancestors = NIL;
				if (find_ancestors(lfirst(lc), (Plan *) plan, &ancestors))
					break;
			}
		context = set_deparse_context_plan(es->deparse_cxt, (Plan *) plan,
										   ancestors);

		ExplainPropertyText(kind == SW_SCAN_BITMAP ? "Recheck Cond" : "Index Cond",
							deparse_expression((Node *) make_ands_explicit(quals),
											   context, es->verbose, false),
							es);
	}
	if (quals != NIL && es->analyze && node->ss.ps.instrument)
	{
		Instrumentation *instr = node->ss.ps.instrument;

		if (instr->nfiltered2 > 0 || es->format != EXPLAIN_FORMAT_TEXT)
			ExplainPropertyFloat("Rows Removed by Index Recheck", NULL,
								 instr->nloops > 0 ? instr->nfiltered2 / instr->nloops : 0,
								 0, es);
	}
	if (kind == SW_SCAN_INDEX_ONLY && es->analyze)
		ExplainPropertyFloat("Heap Fetches", NULL,
							 is ? (double) is->heap_fetches : 0, 0, es);
}
