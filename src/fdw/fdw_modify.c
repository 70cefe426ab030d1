/*-------------------------------------------------------------------------
 *
 * fdw_modify.c
 *		  INSERT, UPDATE, DELETE, COPY and TRUNCATE on source tables
 *
 * See doc/internals.md, "Writing and the stamping protocol"
 * (The executor's side).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw_modify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "fdw/fdw.h"
#include "log/log.h"

/* rows per ExecForeignBatchInsert call (multi-row INSERT, INSERT ... SELECT) */
#define SW_INSERT_BATCH_SIZE	100

/* state of one source table's modification in one statement */
typedef struct SwModifyState
{
	Relation	ftrel;			/* the source table */
	SwWriter   *writer;			/* writes its hidden heaps */
	ModifyTableState *mtstate;	/* UPDATE and DELETE: for EvalPlanQual */
	TupleTableSlot *old_slot;	/* the current row being retracted */
	TupleTableSlot *lock_slot;	/* its latest version, locked */
	HeapTupleData old_tuple;	/* ... when the scan handed it over */
	TupleTableSlot *latest_slot;	/* the latest version as a row of the table */
	MemoryContext row_cxt;		/* per-row work, reset for each row */
	AttrNumber	ctid_attno;		/* row identity in the plan's output */
	ForeignScanState *scan;		/* the scan that feeds UPDATE/DELETE, if direct */
	bool		check_partition;	/* a partition: enforce its constraint */
	bool		check_constraints;	/* NOT NULL and CHECK constraints */
	bool		row_triggers;	/* the command's row triggers saw the row */
	bool		append_rows;	/* COPY: write single rows in groups */
	SwHiddenNames names;		/* to say errors of the source */
} SwModifyState;

/*
 * Open a writer for the statement, as the current user, and what the
 * executor's side needs.  Shared by BeginForeignModify (INSERT, UPDATE,
 * DELETE), BeginForeignInsert (COPY, tuple routing) and TRUNCATE.
 */
static SwModifyState *
begin_modify(Relation ftrel, EState *estate)
{
	SwModifyState *state = palloc0(sizeof(SwModifyState));
	Relation	current;
	SwSource	source;

	state->ftrel = ftrel;
	sw_source_require(RelationGetRelid(ftrel), &source);
	sw_storage_hidden_names(ftrel, &source, &state->names);
	state->writer = sw_writer_open(ftrel, SW_ORIGIN_USER, GetUserId(), estate);
	current = sw_writer_current(state->writer);
	state->check_partition = ftrel->rd_rel->relispartition;
	state->check_constraints = RelationGetDescr(ftrel)->constr != NULL &&
		(RelationGetDescr(ftrel)->constr->has_not_null ||
		 RelationGetDescr(ftrel)->constr->num_check > 0);
	state->row_cxt = AllocSetContextCreate(CurrentMemoryContext,
										   "source_writes row",
										   ALLOCSET_SMALL_SIZES);
	state->latest_slot = MakeSingleTupleTableSlot(RelationGetDescr(ftrel),
												  &TTSOpsVirtual);
	state->old_slot = table_slot_create(current, NULL);
	state->lock_slot = table_slot_create(current, NULL);
	state->ctid_attno = InvalidAttrNumber;
	return state;
}

static void
end_modify(SwModifyState *state)
{
	if (state == NULL)
		return;
	sw_writer_close(state->writer);
	ExecDropSingleTupleTableSlot(state->old_slot);
	ExecDropSingleTupleTableSlot(state->lock_slot);
	ExecDropSingleTupleTableSlot(state->latest_slot);
	MemoryContextDelete(state->row_cxt);
}

/*
 * The ctid of the row to update or delete, from the plan's junk column.
 */
static ItemPointerData
row_identity(SwModifyState *state, TupleTableSlot *planSlot)
{
	bool		isnull;
	Datum		datum = ExecGetJunkAttribute(planSlot, state->ctid_attno, &isnull);

	if (isnull)
		elog(ERROR, "ctid is NULL");
	return *(ItemPointer) DatumGetPointer(datum);
}

/*
 * The current tuple at tid, as it is now.  When the scan feeding us just
 * returned it, its buffer is pinned and the tuple is at hand; otherwise it
 * is fetched.  Either way old_slot holds it (and a pin) until the next row.
 */
static HeapTuple
current_tuple(SwModifyState *state, ItemPointer tid)
{
	TupleTableSlot *row = state->scan ? sw_scan_current_row(state->scan) : NULL;

	if (row && !TupIsNull(row) && ItemPointerEquals(&row->tts_tid, tid))
	{
		BufferHeapTupleTableSlot *b = (BufferHeapTupleTableSlot *) row;

		state->old_tuple = *b->base.tuple;
		ExecStoreBufferHeapTuple(&state->old_tuple, state->old_slot, b->buffer);
	}
	else if (!table_tuple_fetch_row_version(sw_writer_current(state->writer),
											tid, SnapshotAny, state->old_slot))
		elog(ERROR, "failed to fetch the row at (%u,%u) of source table \"%s\"",
			 ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
			 RelationGetRelationName(state->ftrel));
	return ExecFetchSlotHeapTuple(state->old_slot, false, NULL);
}

/*
 * A concurrent transaction updated or deleted the row we were about to
 * update or delete (or our own command did).  Decide as ExecUpdate() and
 * ExecDelete() do for a table: a row changed by this very command is
 * skipped, one changed by a later command of ours (a trigger) is an error;
 * above READ COMMITTED a concurrent change is a serialization failure;
 * under READ COMMITTED a deleted row is skipped, and an updated one is
 * locked in its latest version and rechecked with EvalPlanQual.  Returns
 * the plan's output for the latest version, with *tid moved to it, or NULL
 * to skip the row.
 *
 * Row triggers of the command already ran on the version the scan found,
 * and PostgreSQL hands that version to the AFTER triggers; with them, a
 * re-check could only apply the change against what the triggers saw, so
 * it is a serialization failure, at every isolation level.
 */
static TupleTableSlot *
recheck_row(SwModifyState *state, EState *estate, ResultRelInfo *rinfo,
			TM_Result result, TM_FailureData *tmfd, ItemPointer tid,
			LockTupleMode lockmode, CmdType operation)
{
	CommandId	cid = estate->es_output_cid;
	EPQState   *epqstate;
	TupleTableSlot *testslot;
	HeapTuple	tuple;
	MemoryContext old;
	TupleTableSlot *epqslot;

	for (;;)
	{
		switch (result)
		{
			case TM_SelfModified:
				if (tmfd->cmax != cid)
					ereport(ERROR,
							(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
							 operation == CMD_UPDATE
							 ? errmsg("tuple to be updated was already modified by an operation triggered by the current command")
							 : errmsg("tuple to be deleted was already modified by an operation triggered by the current command"),
							 errhint("Consider using an AFTER trigger instead of a BEFORE trigger to propagate changes to other rows.")));
				/* already changed by this command: once is enough */
				return NULL;
			case TM_Updated:
			case TM_Deleted:
				if (IsolationUsesXactSnapshot() ||
					(state->row_triggers && result == TM_Updated))
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 result == TM_Updated
							 ? errmsg("could not serialize access due to concurrent update")
							 : errmsg("could not serialize access due to concurrent delete"),
							 IsolationUsesXactSnapshot() ? 0 :
							 errdetail("The row triggers of source table \"%s\" already ran on the version of the row that a concurrent transaction changed.",
									   RelationGetRelationName(state->ftrel))));
				if (result == TM_Deleted || state->mtstate == NULL)
					return NULL;
				break;
			default:
				elog(ERROR, "unexpected result %u when changing a row of source table \"%s\"",
					 result, RelationGetRelationName(state->ftrel));
		}

		/* lock the latest version, waiting for whoever holds it */
		result = table_tuple_lock(sw_writer_current(state->writer), tid,
								  estate->es_snapshot,
								  state->lock_slot, cid, lockmode,
								  LockWaitBlock,
								  TUPLE_LOCK_FLAG_FIND_LAST_VERSION, tmfd);
		if (result == TM_Ok)
			break;
	}

	/* does the latest version still qualify?  run the plan on it */
	*tid = state->lock_slot->tts_tid;
	epqstate = &state->mtstate->mt_epqstate;
	old = MemoryContextSwitchTo(estate->es_query_cxt);
	testslot = EvalPlanQualSlot(epqstate, state->ftrel, rinfo->ri_RangeTableIndex);
	sw_writer_to_row(state->writer, state->lock_slot, state->latest_slot);
	tuple = ExecCopySlotHeapTuple(state->latest_slot);
	tuple->t_self = *tid;
	tuple->t_tableOid = RelationGetRelid(state->ftrel);
	ExecForceStoreHeapTuple(tuple, testslot, true);
	epqslot = EvalPlanQual(epqstate, state->ftrel, rinfo->ri_RangeTableIndex,
						   testslot);
	MemoryContextSwitchTo(old);
	return TupIsNull(epqslot) ? NULL : epqslot;
}

/*
 * UPDATE and DELETE identify rows by the ctid of the current heap, which
 * the scan puts in its slots.
 */
static void
swAddForeignUpdateTargets(PlannerInfo *root, Index rtindex,
						  RangeTblEntry *target_rte, Relation target_relation)
{
	Var		   *var = makeVar(rtindex, SelfItemPointerAttributeNumber,
							  TIDOID, -1, InvalidOid, 0);

	add_row_identity_var(root, var, rtindex, "ctid");
}

static void
refuse_on_conflict(OnConflictAction action)
{
	if (action != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT with ON CONFLICT is not supported on source tables"),
				 errhint("Upsert sources (envelope 'upsert') keep one row per key; use UPDATE to change it.")));
}

/*
 * Does a table have AFTER triggers (row or statement) on UPDATE or DELETE?
 */
static bool
has_after_triggers(TriggerDesc *trig)
{
	return trig != NULL &&
		(trig->trig_update_after_row || trig->trig_update_after_statement ||
		 trig->trig_delete_after_row || trig->trig_delete_after_statement ||
		 trig->trig_update_new_table || trig->trig_update_old_table ||
		 trig->trig_delete_old_table);
}

static List *
swPlanForeignModify(PlannerInfo *root, ModifyTable *plan,
					Index resultRelation, int subplan_index)
{
	refuse_on_conflict(plan->onConflictAction);
	return NIL;
}

static void
swBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					 List *fdw_private, int subplan_index, int eflags)
{
	SwModifyState *state;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	state = begin_modify(rinfo->ri_RelationDesc, mtstate->ps.state);
	if (mtstate->operation == CMD_UPDATE || mtstate->operation == CMD_DELETE)
	{
		Plan	   *subplan = outerPlanState(mtstate)->plan;
		TriggerDesc *trig = rinfo->ri_TrigDesc;
		TriggerDesc *roottrig = rinfo->ri_RootResultRelInfo
		? rinfo->ri_RootResultRelInfo->ri_TrigDesc : NULL;
		bool		update = mtstate->operation == CMD_UPDATE;
		bool		buffer_history;

		state->row_triggers = trig &&
			(update ? (trig->trig_update_before_row || trig->trig_update_after_row)
			 : (trig->trig_delete_before_row || trig->trig_delete_after_row));

		/*
		 * AFTER triggers run before EndForeignModify: when the statement may
		 * fire any (on this table, its partitioned root, another of the
		 * statement's target tables, or a table of a writable CTE),
		 * retractions are written at once, so that the log they read is
		 * whole.
		 */
		buffer_history = !has_after_triggers(trig) &&
			!has_after_triggers(roottrig) &&
			mtstate->canSetTag &&
			mtstate->ps.state->es_auxmodifytables == NIL;

		for (int i = 0; i < mtstate->mt_nrels && buffer_history; i++)
			buffer_history = !has_after_triggers(mtstate->resultRelInfo[i].ri_TrigDesc);
		if (!buffer_history)
			sw_writer_write_history_now(state->writer);

		state->mtstate = mtstate;
		state->ctid_attno = ExecFindJunkAttributeInTlist(subplan->targetlist, "ctid");
		if (!AttributeNumberIsValid(state->ctid_attno))
			elog(ERROR, "could not find junk ctid column");
		/* when the scan of this table feeds us directly, it has the row */
		if (IsA(outerPlanState(mtstate), ForeignScanState) &&
			((ForeignScanState *) outerPlanState(mtstate))->ss.ss_currentRelation ==
			rinfo->ri_RelationDesc)
			state->scan = (ForeignScanState *) outerPlanState(mtstate);
	}
	rinfo->ri_FdwState = state;
}

/*
 * Does a column of rel have a volatile default (nextval() aside), which
 * COPY evaluates for each row, and which may read the table?
 */
static bool
has_volatile_defaults(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	if (desc->constr == NULL || desc->constr->num_defval == 0)
		return false;
	for (int i = 0; i < desc->natts; i++)
	{
		Node	   *expr;

		if (TupleDescAttr(desc, i)->attisdropped ||
			!TupleDescAttr(desc, i)->atthasdef)
			continue;
		expr = build_column_default(rel, i + 1);
		if (expr && contain_volatile_functions_not_nextval(expr))
			return true;
	}
	return false;
}

/*
 * Has a table that a partitioned table routes rows to any triggers?  They
 * run while COPY goes on (AFTER triggers too, before the end of COPY that
 * ends our insert), and may read the partition we write.
 */
static bool
partitions_have_triggers(Relation root)
{
	List	   *rels = find_all_inheritors(RelationGetRelid(root), NoLock, NULL);
	ListCell   *lc;

	foreach(lc, rels)
	{
		HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(lfirst_oid(lc)));
		bool		triggers;

		if (!HeapTupleIsValid(tuple))
			continue;
		triggers = ((Form_pg_class) GETSTRUCT(tuple))->relhastriggers;
		ReleaseSysCache(tuple);
		if (triggers)
			return true;
	}
	return false;
}

/*
 * COPY and tuple routing.  ON CONFLICT is refused here too, for inserts
 * routed from a partitioned table.  PostgreSQL 15 hands COPY's rows to
 * foreign tables one at a time; when nothing needs a row back at once,
 * they are collected and written in batches like those of a multi-row
 * INSERT.  Something needs them at once where RETURNING, a trigger or a
 * key check does, and where user code that runs during COPY may read the
 * table: where PostgreSQL would not batch a plain table's rows either (a
 * volatile default), and where a partitioned table routes rows to
 * partitions with triggers, whose rows PostgreSQL writes before it runs
 * them.
 */
static void
swBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	SwModifyState *state;
	ResultRelInfo *root = rinfo->ri_RootResultRelInfo;

	if (mtstate->ps.plan)
		refuse_on_conflict(((ModifyTable *) mtstate->ps.plan)->onConflictAction);

	/*
	 * An UPDATE of a partitioned table that moves a row into a source
	 * partition which the UPDATE also updates routes the row to the
	 * UPDATE's own result relation: insert with the state the UPDATE set
	 * up, which EndForeignModify ends.
	 */
	if (rinfo->ri_FdwState != NULL)
		return;

	/*
	 * COPY FROM (no plan) inserts into tables with a command id of its own,
	 * and leaves its executor state's at 0, which would make our rows
	 * visible to the snapshots of earlier commands of the transaction (a
	 * cursor declared before the COPY).  Write with the command id COPY
	 * writes plain tables with, as INSERT does.
	 */
	if (mtstate->ps.plan == NULL)
		mtstate->ps.state->es_output_cid = GetCurrentCommandId(true);

	state = begin_modify(rinfo->ri_RelationDesc, mtstate->ps.state);
	state->append_rows = rinfo->ri_TrigDesc == NULL &&
		(root == NULL || root->ri_TrigDesc == NULL) &&
		rinfo->ri_projectReturning == NULL &&
		!sw_writer_has_key(state->writer) &&
		!has_volatile_defaults(rinfo->ri_RelationDesc) &&
		(root == NULL ||
		 (!has_volatile_defaults(root->ri_RelationDesc) &&
		  !partitions_have_triggers(root->ri_RelationDesc)));
	rinfo->ri_FdwState = state;
}

/*
 * A new row must meet the table's NOT NULL and CHECK constraints, and its
 * partition's bounds: PostgreSQL leaves them to the foreign data wrapper,
 * and we keep the rows.
 */
static void
check_row(SwModifyState *state, ResultRelInfo *rinfo,
		  TupleTableSlot *slot, EState *estate)
{
	if (state->check_constraints)
		ExecConstraints(rinfo, slot, estate);
	if (state->check_partition)
		ExecPartitionCheck(rinfo, slot, estate, true);
}

static TupleTableSlot *
insert_row(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	MemoryContext old;

	check_row(state, rinfo, slot, estate);
	if (state->append_rows)
	{
		/* COPY reuses its slot for the next row: the writer copies it */
		sw_writer_append(state->writer, slot);
		return slot;
	}

	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	sw_writer_insert(state->writer, slot);
	MemoryContextSwitchTo(old);
	slot->tts_tid = *sw_writer_last_tid(state->writer);
	return slot;
}

static int
swGetForeignModifyBatchSize(ResultRelInfo *rinfo)
{
	SwModifyState *state = rinfo->ri_FdwState;
	TriggerDesc *triggers = rinfo->ri_TrigDesc;

	/*
	 * One row at a time when RETURNING or row triggers need each row back at
	 * once, and for upsert keys, which are checked row by row.
	 */
	if (rinfo->ri_projectReturning ||
		(triggers && (triggers->trig_insert_before_row ||
					  triggers->trig_insert_after_row)) ||
		(state && sw_writer_has_key(state->writer)))
		return 1;
	return SW_INSERT_BATCH_SIZE;
}

/*
 * Many rows at once (multi-row INSERT, INSERT ... SELECT): written
 * together, with one multi-insert.
 */
static TupleTableSlot **
swExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo,
						 TupleTableSlot **slots, TupleTableSlot **planSlots,
						 int *numSlots)
{
	SwModifyState *state = rinfo->ri_FdwState;
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		for (int i = 0; i < *numSlots; i++)
		{
			check_row(state, rinfo, slots[i], estate);
			sw_writer_append(state->writer, slots[i]);
		}
		sw_writer_flush(state->writer);
	}
	PG_CATCH();
	{
		sw_storage_rethrow(&state->names, cxt);
	}
	PG_END_TRY();
	return slots;
}

/*
 * UPDATE: a new version of the current row, and the old one retracted.
 */
static TupleTableSlot *
update_row(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
		   TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	ItemPointerData tid = row_identity(state, planSlot);
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	MemoryContext oldcxt;

	MemoryContextReset(state->row_cxt);
	oldcxt = MemoryContextSwitchTo(state->row_cxt);
	for (;;)
	{
		TupleTableSlot *epqslot;
		HeapTuple	old = current_tuple(state, &tid);
		TM_Result	result;

		check_row(state, rinfo, slot, estate);
		result = sw_writer_update(state->writer, &tid, old, slot, &tmfd, &lockmode);
		if (result == TM_Ok)
			break;

		/* changed meanwhile: recompute the new row from its latest version */
		epqslot = recheck_row(state, estate, rinfo, result, &tmfd, &tid,
							  lockmode, CMD_UPDATE);
		if (epqslot == NULL)
		{
			MemoryContextSwitchTo(oldcxt);
			return NULL;
		}
		MemoryContextSwitchTo(estate->es_query_cxt);
		slot = ExecGetUpdateNewTuple(rinfo, epqslot, state->latest_slot);
		ExecMaterializeSlot(slot);
		if (state->ftrel->rd_att->constr &&
			state->ftrel->rd_att->constr->has_generated_stored)
			ExecComputeStoredGenerated(rinfo, estate, slot, CMD_UPDATE);
		MemoryContextSwitchTo(state->row_cxt);
	}
	MemoryContextSwitchTo(oldcxt);

	slot->tts_tid = *sw_writer_last_tid(state->writer);
	return slot;
}

/*
 * DELETE: retract the row instance the scan found (or its latest version).
 */
static TupleTableSlot *
delete_row(EState *estate, ResultRelInfo *rinfo, TupleTableSlot *slot,
		   TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	ItemPointerData tid = row_identity(state, planSlot);
	TM_FailureData tmfd;
	MemoryContext oldcxt;

	MemoryContextReset(state->row_cxt);
	oldcxt = MemoryContextSwitchTo(state->row_cxt);
	for (;;)
	{
		HeapTuple	old = current_tuple(state, &tid);
		TM_Result	result = sw_writer_delete(state->writer, &tid, old, &tmfd);

		if (result == TM_Ok)
			break;
		if (recheck_row(state, estate, rinfo, result, &tmfd, &tid,
						LockTupleExclusive, CMD_DELETE) == NULL)
		{
			MemoryContextSwitchTo(oldcxt);
			return NULL;
		}
	}
	MemoryContextSwitchTo(oldcxt);

	/* RETURNING sees the deleted row */
	if (rinfo->ri_projectReturning)
	{
		sw_writer_to_row(state->writer, state->old_slot, slot);
		ExecMaterializeSlot(slot);
	}
	return slot;
}

/*
 * The row callbacks, and the end of a statement, which writes what the
 * writer buffered: what they do to the hidden heaps may wait for other
 * transactions, or fail, and PostgreSQL's errors would name the heaps.
 * They are said of the source table (sw_storage_rethrow()).
 */
static TupleTableSlot *
modify_row(CmdType operation, EState *estate, ResultRelInfo *rinfo,
		   TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	MemoryContext cxt = CurrentMemoryContext;
	TupleTableSlot *result = NULL;

	PG_TRY();
	{
		if (operation == CMD_INSERT)
			result = insert_row(estate, rinfo, slot);
		else if (operation == CMD_UPDATE)
			result = update_row(estate, rinfo, slot, planSlot);
		else
			result = delete_row(estate, rinfo, slot, planSlot);
	}
	PG_CATCH();
	{
		sw_storage_rethrow(&state->names, cxt);
	}
	PG_END_TRY();
	return result;
}

static TupleTableSlot *
swExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	return modify_row(CMD_INSERT, estate, rinfo, slot, planSlot);
}

static TupleTableSlot *
swExecForeignUpdate(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	return modify_row(CMD_UPDATE, estate, rinfo, slot, planSlot);
}

static TupleTableSlot *
swExecForeignDelete(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	return modify_row(CMD_DELETE, estate, rinfo, slot, planSlot);
}

/*
 * End a statement's writes: write what is buffered, and close the writer.
 */
static void
end_statement(ResultRelInfo *rinfo)
{
	SwModifyState *state = rinfo->ri_FdwState;
	MemoryContext cxt = CurrentMemoryContext;

	if (state == NULL)
		return;
	PG_TRY();
	{
		end_modify(state);
	}
	PG_CATCH();
	{
		sw_storage_rethrow(&state->names, cxt);
	}
	PG_END_TRY();
	rinfo->ri_FdwState = NULL;
}

static void
swEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	end_statement(rinfo);
}

/*
 * The end of COPY or tuple routing.  A result relation of an UPDATE that
 * rows were routed into was ended by EndForeignModify, which runs first.
 */
static void
swEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
	end_statement(rinfo);
}

static int
swIsForeignRelUpdatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

/*
 * TRUNCATE: every current row is retracted, with a delete, so that a
 * reader whose snapshot is older than the TRUNCATE still sees the rows and
 * their log (a plain TRUNCATE would empty the table for it).  The foreign
 * table is locked ACCESS EXCLUSIVE by TRUNCATE, so no writer is in
 * progress; the rows are read with a fresh snapshot, so that none
 * committed since our snapshot was taken is lost without a trace.
 */
static void
swExecForeignTruncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	ListCell   *lc;

	foreach(lc, rels)
	{
		SwWriter   *writer = sw_writer_open(lfirst(lc), SW_ORIGIN_USER,
											GetUserId(), NULL);

		sw_writer_truncate(writer);
		sw_writer_close(writer);
	}
}

/*
 * Fill in the modify callbacks of the FDW routine.
 */
void
sw_fdw_modify_routine(FdwRoutine *routine)
{
	routine->AddForeignUpdateTargets = swAddForeignUpdateTargets;
	routine->PlanForeignModify = swPlanForeignModify;
	routine->BeginForeignModify = swBeginForeignModify;
	routine->ExecForeignInsert = swExecForeignInsert;
	routine->ExecForeignBatchInsert = swExecForeignBatchInsert;
	routine->GetForeignModifyBatchSize = swGetForeignModifyBatchSize;
	routine->ExecForeignUpdate = swExecForeignUpdate;
	routine->ExecForeignDelete = swExecForeignDelete;
	routine->EndForeignModify = swEndForeignModify;
	routine->BeginForeignInsert = swBeginForeignInsert;
	routine->EndForeignInsert = swEndForeignInsert;
	routine->IsForeignRelUpdatable = swIsForeignRelUpdatable;
	routine->ExecForeignTruncate = swExecForeignTruncate;
}
