/*-------------------------------------------------------------------------
 *
 * fdw_modify.c
 *		  INSERT, UPDATE, DELETE, COPY and TRUNCATE on source tables
 *
 * The modify callbacks write into the source's hidden heaps inside the
 * user's transaction, tagging rows with the transaction's batch (see
 * controller.c, which stamps the batch at commit):
 *
 *	INSERT		adds a row to the current heap with "$batch" = our batch;
 *	DELETE		deletes the row instance the scan returned (its ctid) from
 *				the current heap and adds it to the history heap with
 *				"$retracted" = our batch;
 *	UPDATE		does both at once: the current tuple is updated in place
 *				(a new tuple version, HOT where possible) and the old
 *				values go to the history heap;
 *	TRUNCATE	moves every current row to the history heap, then truncates
 *				the current heap as TRUNCATE does.
 *
 * A row inserted and retracted by the same batch leaves no history: a batch
 * is one instant, and within it the pair cancels out.
 *
 * Conflicts are PostgreSQL's: the table AM reports a row deleted or updated
 * by a concurrent transaction, which becomes "0 rows" under READ COMMITTED
 * and a serialization failure above it, never a second retraction.
 *
 * Upsert sources keep a unique index on their key columns in the current
 * heap; inserting an existing key, or updating a key onto one, is a
 * unique_violation that says so.
 *
 * IDENTIFICATION
 *		  src/fdw_modify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/appendinfo.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "source_writes.h"

/* rows per ExecForeignBatchInsert call (multi-row INSERT, COPY FROM) */
#define SW_INSERT_BATCH_SIZE	100

/* state of one source table's modification in one statement */
typedef struct SwModifyState
{
	Relation	ftrel;			/* the source table */
	SwSourceTable *source;		/* its options */
	Relation	current;		/* hidden heap of current rows */
	Relation	history;		/* hidden heap of retracted rows */
	ResultRelInfo *current_rri; /* the current heap's indexes */
	TupleTableSlot *new_slot;	/* a row for the current heap */
	TupleTableSlot *old_slot;	/* the current row being retracted */
	TupleTableSlot *history_slot;	/* a row for the history heap */
	TupleTableSlot **batch_slots;	/* rows of a batch insert */
	AttrNumber	ctid_attno;		/* row identity in the plan's output */
	int			natts;			/* attributes of the foreign table */
	int64		batch;			/* our batch, once we have written */
	Oid			key_index;		/* upsert: the unique index on the key */
	BulkInsertState bistate;	/* for batch inserts */
} SwModifyState;

/*
 * Refuse to write while reading the past.
 */
static void
check_not_as_of(Relation ftrel)
{
	if (sw_as_of >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot modify source table \"%s\" while source_writes.as_of is set",
						RelationGetRelationName(ftrel)),
				 errhint("RESET source_writes.as_of to edit the current contents.")));
}

/*
 * Open what a modification needs; shared by BeginForeignModify (INSERT,
 * UPDATE, DELETE) and BeginForeignInsert (COPY, tuple routing).
 */
static SwModifyState *
begin_modify(EState *estate, ResultRelInfo *rinfo)
{
	Relation	ftrel = rinfo->ri_RelationDesc;
	SwModifyState *state = palloc0(sizeof(SwModifyState));
	SwCatalogEntry entry;

	check_not_as_of(ftrel);
	sw_catalog_require(RelationGetRelid(ftrel), &entry);

	state->ftrel = ftrel;
	state->source = sw_source_table(ftrel);
	state->natts = RelationGetDescr(ftrel)->natts;
	state->current = table_open(entry.current_rel, RowExclusiveLock);
	state->history = table_open(entry.history_rel, RowExclusiveLock);

	state->current_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(state->current_rri, state->current, 0, NULL, 0);
	state->key_index = sw_storage_key_index(entry.current_rel);
	/* "speculative" prepares what the key check needs, as for ON CONFLICT */
	ExecOpenIndices(state->current_rri, OidIsValid(state->key_index));

	state->new_slot = MakeSingleTupleTableSlot(RelationGetDescr(state->current),
											   &TTSOpsVirtual);
	state->old_slot = table_slot_create(state->current, NULL);
	state->history_slot = MakeSingleTupleTableSlot(RelationGetDescr(state->history),
												   &TTSOpsVirtual);
	state->ctid_attno = InvalidAttrNumber;
	return state;
}

static void
end_modify(SwModifyState *state)
{
	if (state == NULL)
		return;
	if (state->bistate)
		FreeBulkInsertState(state->bistate);
	if (state->batch_slots)
		for (int i = 0; i < SW_INSERT_BATCH_SIZE && state->batch_slots[i]; i++)
			ExecDropSingleTupleTableSlot(state->batch_slots[i]);
	ExecDropSingleTupleTableSlot(state->new_slot);
	ExecDropSingleTupleTableSlot(state->old_slot);
	ExecDropSingleTupleTableSlot(state->history_slot);
	ExecCloseIndices(state->current_rri);
	table_close(state->history, NoLock);
	table_close(state->current, NoLock);
}

/*
 * Our batch id, allocated at the first write of the statement (a statement
 * that writes nothing makes no batch).
 */
static inline int64
our_batch(SwModifyState *state)
{
	if (state->batch == 0)
		state->batch = sw_controller_batch(RelationGetRelid(state->ftrel),
										   SW_ORIGIN_USER);
	return state->batch;
}

/*
 * Fill a current-heap slot from a row of the foreign table: our batch
 * first, then the columns, attnum by attnum.
 */
static void
form_current_row(SwModifyState *state, TupleTableSlot *row, TupleTableSlot *dst)
{
	ExecClearTuple(dst);
	slot_getallattrs(row);
	dst->tts_values[0] = Int64GetDatum(our_batch(state));
	dst->tts_isnull[0] = false;
	memcpy(dst->tts_values + SW_CURRENT_META, row->tts_values,
		   state->natts * sizeof(Datum));
	memcpy(dst->tts_isnull + SW_CURRENT_META, row->tts_isnull,
		   state->natts * sizeof(bool));
	ExecStoreVirtualTuple(dst);
}

/*
 * Fill a foreign table slot (for RETURNING) from a current-heap row.
 */
static void
form_table_row(SwModifyState *state, TupleTableSlot *hidden, TupleTableSlot *dst)
{
	ExecClearTuple(dst);
	slot_getallattrs(hidden);
	memcpy(dst->tts_values, hidden->tts_values + SW_CURRENT_META,
		   state->natts * sizeof(Datum));
	memcpy(dst->tts_isnull, hidden->tts_isnull + SW_CURRENT_META,
		   state->natts * sizeof(bool));
	ExecStoreVirtualTuple(dst);
	ExecMaterializeSlot(dst);
}

/*
 * Upsert sources: the key of a new or changed row must be complete and not
 * be taken by another current row.  Waits, like INSERT ... ON CONFLICT,
 * for a transaction that holds the key.
 */
static void
check_key(SwModifyState *state, EState *estate, TupleTableSlot *row)
{
	SwSourceTable *st = state->source;
	ItemPointerData conflict;
	ListCell   *lc;

	foreach(lc, st->key)
	{
		for (int i = 0; i < st->ncolumns; i++)
		{
			SwColumn   *col = &st->columns[i];

			if (strcmp(col->name, lfirst(lc)) == 0 &&
				row->tts_isnull[col->attnum - 1 + SW_CURRENT_META])
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("key column \"%s\" of upsert source \"%s\" cannot be null",
								col->name, RelationGetRelationName(state->ftrel)),
						 errhint("Every row of an upsert source has a complete key.")));
		}
	}

	if (!ExecCheckIndexConstraints(state->current_rri, row, estate, &conflict,
								   list_make1_oid(state->key_index)))
	{
		bool		may_see = pg_class_aclcheck(RelationGetRelid(state->ftrel),
												GetUserId(), ACL_SELECT) == ACLCHECK_OK;
		StringInfoData key;

		initStringInfo(&key);
		if (may_see)
		{
			StringInfoData values;

			initStringInfo(&values);
			foreach(lc, st->key)
				for (int i = 0; i < st->ncolumns; i++)
				{
					SwColumn   *col = &st->columns[i];
					Oid			out;
					bool		varlena;

					if (strcmp(col->name, lfirst(lc)) != 0)
						continue;
					getTypeOutputInfo(col->typid, &out, &varlena);
					appendStringInfo(&key, "%s%s", key.len > 0 ? ", " : "",
									 quote_identifier(col->name));
					appendStringInfo(&values, "%s%s", values.len > 0 ? ", " : "",
									 OidOutputFunctionCall(out,
														   row->tts_values[col->attnum - 1 + SW_CURRENT_META]));
				}
			appendStringInfo(&key, ")=(%s", values.data);
		}
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("duplicate key value violates the key of upsert source \"%s\"",
						RelationGetRelationName(state->ftrel)),
				 may_see ? errdetail("Key (%s) already exists.", key.data) : 0,
				 errhint("Use UPDATE to change the row of an existing key.")));
	}
}

/*
 * Insert one row into the current heap.
 */
static void
insert_current(SwModifyState *state, EState *estate, TupleTableSlot *row)
{
	if (OidIsValid(state->key_index))
		check_key(state, estate, row);
	table_tuple_insert(state->current, row, estate->es_output_cid, 0, NULL);
	if (state->current_rri->ri_NumIndices > 0)
		ExecInsertIndexTuples(state->current_rri, row, estate, false, false,
							  NULL, NIL);
}

/*
 * Record the retraction of a current row in the history heap (nothing when
 * our own batch inserted it).
 */
static void
retract(SwModifyState *state, TupleTableSlot *old, CommandId cid)
{
	TupleTableSlot *hist = state->history_slot;
	int64		inserted_by;

	slot_getallattrs(old);
	inserted_by = DatumGetInt64(old->tts_values[0]);
	if (inserted_by == our_batch(state))
		return;

	ExecClearTuple(hist);
	hist->tts_values[0] = Int64GetDatum(inserted_by);
	hist->tts_isnull[0] = false;
	hist->tts_values[1] = Int64GetDatum(state->batch);
	hist->tts_isnull[1] = false;
	memcpy(hist->tts_values + SW_HISTORY_META, old->tts_values + SW_CURRENT_META,
		   state->natts * sizeof(Datum));
	memcpy(hist->tts_isnull + SW_HISTORY_META, old->tts_isnull + SW_CURRENT_META,
		   state->natts * sizeof(bool));
	ExecStoreVirtualTuple(hist);
	table_tuple_insert(state->history, hist, cid, 0, NULL);
}

/*
 * What a failed delete or update of a current row means, as PostgreSQL
 * would report it.  Returns false when the row is to be skipped.
 */
static bool
check_tm_result(TM_Result result, TM_FailureData *tmfd, CommandId cid,
				const char *action)
{
	switch (result)
	{
		case TM_Ok:
			return true;
		case TM_SelfModified:
			/* changed by a later command of ours, e.g. a trigger */
			if (tmfd->cmax != cid)
				ereport(ERROR,
						(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
						 errmsg("tuple to be %s was already modified by an operation triggered by the current command",
								action),
						 errhint("Consider using an AFTER trigger instead of a BEFORE trigger to propagate changes to other rows.")));
			/* already changed by this command: once is enough */
			return false;
		case TM_Updated:
		case TM_Deleted:
			/* a concurrent transaction retracted the row instance first */
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent %s",
								result == TM_Updated ? "update" : "delete")));
			return false;
		default:
			elog(ERROR, "unexpected table_tuple_%s status: %u",
				 strcmp(action, "updated") == 0 ? "update" : "delete", result);
			return false;
	}
}

/*
 * The ctid of the row to update or delete, from the plan's junk column.
 */
static ItemPointer
row_identity(SwModifyState *state, TupleTableSlot *planSlot)
{
	bool		isnull;
	Datum		datum = ExecGetJunkAttribute(planSlot, state->ctid_attno, &isnull);

	if (isnull)
		elog(ERROR, "ctid is NULL");
	return (ItemPointer) DatumGetPointer(datum);
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

static List *
swPlanForeignModify(PlannerInfo *root, ModifyTable *plan,
					Index resultRelation, int subplan_index)
{
	if (plan->onConflictAction != ONCONFLICT_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT with ON CONFLICT is not supported on source tables"),
				 errhint("Upsert sources (envelope 'upsert') keep one row per key; use UPDATE to change it.")));
	return NIL;
}

static void
swBeginForeignModify(ModifyTableState *mtstate, ResultRelInfo *rinfo,
					 List *fdw_private, int subplan_index, int eflags)
{
	SwModifyState *state;

	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;
	state = begin_modify(mtstate->ps.state, rinfo);
	if (mtstate->operation == CMD_UPDATE || mtstate->operation == CMD_DELETE)
	{
		Plan	   *subplan = outerPlanState(mtstate)->plan;

		state->ctid_attno = ExecFindJunkAttributeInTlist(subplan->targetlist, "ctid");
		if (!AttributeNumberIsValid(state->ctid_attno))
			elog(ERROR, "could not find junk ctid column");
	}
	rinfo->ri_FdwState = state;
}

static void
swBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	rinfo->ri_FdwState = begin_modify(mtstate->ps.state, rinfo);
}

static TupleTableSlot *
swExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;

	form_current_row(state, slot, state->new_slot);
	insert_current(state, estate, state->new_slot);
	slot->tts_tid = state->new_slot->tts_tid;
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
		(state && OidIsValid(state->key_index)))
		return 1;
	return SW_INSERT_BATCH_SIZE;
}

/*
 * Many rows at once (multi-row INSERT, INSERT ... SELECT, COPY FROM):
 * table_multi_insert() with a bulk-insert state.
 */
static TupleTableSlot **
swExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo,
						 TupleTableSlot **slots, TupleTableSlot **planSlots,
						 int *numSlots)
{
	SwModifyState *state = rinfo->ri_FdwState;
	int			n = *numSlots;

	if (state->batch_slots == NULL)
	{
		state->batch_slots = MemoryContextAllocZero(estate->es_query_cxt,
													sizeof(TupleTableSlot *) * SW_INSERT_BATCH_SIZE);
		state->bistate = GetBulkInsertState();
	}
	for (int i = 0; i < n; i++)
	{
		if (state->batch_slots[i] == NULL)
			state->batch_slots[i] =
				MakeSingleTupleTableSlot(RelationGetDescr(state->current),
										 &TTSOpsVirtual);
		form_current_row(state, slots[i], state->batch_slots[i]);
		if (OidIsValid(state->key_index))
			check_key(state, estate, state->batch_slots[i]);
	}

	table_multi_insert(state->current, state->batch_slots, n,
					   estate->es_output_cid, 0, state->bistate);
	for (int i = 0; i < n; i++)
	{
		if (state->current_rri->ri_NumIndices > 0)
			ExecInsertIndexTuples(state->current_rri, state->batch_slots[i],
								  estate, false, false, NULL, NIL);
		slots[i]->tts_tid = state->batch_slots[i]->tts_tid;
	}
	return slots;
}

/*
 * UPDATE: a new version of the current row, and the old one retracted.
 */
static TupleTableSlot *
swExecForeignUpdate(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	ItemPointer tid = row_identity(state, planSlot);
	CommandId	cid = estate->es_output_cid;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	result;

	if (!table_tuple_fetch_row_version(state->current, tid, SnapshotAny,
									   state->old_slot))
		elog(ERROR, "failed to fetch the row to update");
	form_current_row(state, slot, state->new_slot);

	/* a changed key must not collide with another row's */
	if (OidIsValid(state->key_index))
	{
		bool		changed = false;

		slot_getallattrs(state->old_slot);
		for (int i = 0; i < state->source->ncolumns && !changed; i++)
		{
			SwColumn   *col = &state->source->columns[i];
			int			k = col->attnum - 1 + SW_CURRENT_META;
			ListCell   *lc;

			foreach(lc, state->source->key)
				if (strcmp(col->name, lfirst(lc)) == 0 &&
					(state->old_slot->tts_isnull[k] != state->new_slot->tts_isnull[k] ||
					 (!state->new_slot->tts_isnull[k] &&
					  !datumIsEqual(state->old_slot->tts_values[k],
									state->new_slot->tts_values[k],
									TupleDescAttr(state->new_slot->tts_tupleDescriptor, k)->attbyval,
									TupleDescAttr(state->new_slot->tts_tupleDescriptor, k)->attlen))))
					changed = true;
		}
		if (changed)
			check_key(state, estate, state->new_slot);
	}

	result = table_tuple_update(state->current, tid, state->new_slot, cid,
								estate->es_snapshot,
								estate->es_crosscheck_snapshot,
								true, &tmfd, &lockmode, &update_indexes);
	if (!check_tm_result(result, &tmfd, cid, "updated"))
		return NULL;
	if (update_indexes && state->current_rri->ri_NumIndices > 0)
		ExecInsertIndexTuples(state->current_rri, state->new_slot, estate,
							  true, false, NULL, NIL);
	retract(state, state->old_slot, cid);

	slot->tts_tid = state->new_slot->tts_tid;
	return slot;
}

/*
 * DELETE: retract the row instance the scan found.
 */
static TupleTableSlot *
swExecForeignDelete(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	ItemPointer tid = row_identity(state, planSlot);
	CommandId	cid = estate->es_output_cid;
	TM_FailureData tmfd;
	TM_Result	result;

	if (!table_tuple_fetch_row_version(state->current, tid, SnapshotAny,
									   state->old_slot))
		elog(ERROR, "failed to fetch the row to delete");

	result = table_tuple_delete(state->current, tid, cid, estate->es_snapshot,
								estate->es_crosscheck_snapshot, true, &tmfd,
								false);
	if (!check_tm_result(result, &tmfd, cid, "deleted"))
		return NULL;
	retract(state, state->old_slot, cid);

	/* RETURNING sees the deleted row */
	form_table_row(state, state->old_slot, slot);
	return slot;
}

static void
swEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	end_modify(rinfo->ri_FdwState);
}

static void
swEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
	end_modify(rinfo->ri_FdwState);
}

static int
swIsForeignRelUpdatable(Relation rel)
{
	return (1 << CMD_INSERT) | (1 << CMD_UPDATE) | (1 << CMD_DELETE);
}

/*
 * TRUNCATE: every current row is retracted, then the current heap is
 * truncated like a table (a new relfilenode, undone by a rollback).  The
 * foreign table is locked ACCESS EXCLUSIVE by TRUNCATE, so no writer is in
 * progress; the rows are read with a fresh snapshot, so that none committed
 * since our snapshot was taken is lost without a trace.
 */
static void
swExecForeignTruncate(List *rels, DropBehavior behavior, bool restart_seqs)
{
	ListCell   *lc;

	foreach(lc, rels)
	{
		Relation	ftrel = lfirst(lc);
		SwModifyState state = {0};
		SwCatalogEntry entry;
		Snapshot	snapshot;
		TableScanDesc scan;
		CommandId	cid = GetCurrentCommandId(true);

		check_not_as_of(ftrel);
		sw_catalog_require(RelationGetRelid(ftrel), &entry);
		state.ftrel = ftrel;
		state.natts = RelationGetDescr(ftrel)->natts;
		state.current = table_open(entry.current_rel, AccessExclusiveLock);
		state.history = table_open(entry.history_rel, RowExclusiveLock);
		state.old_slot = table_slot_create(state.current, NULL);
		state.history_slot = MakeSingleTupleTableSlot(RelationGetDescr(state.history),
													  &TTSOpsVirtual);

		snapshot = RegisterSnapshot(GetLatestSnapshot());
		scan = table_beginscan(state.current, snapshot, 0, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, state.old_slot))
			retract(&state, state.old_slot, cid);
		table_endscan(scan);
		UnregisterSnapshot(snapshot);

		ExecDropSingleTupleTableSlot(state.old_slot);
		ExecDropSingleTupleTableSlot(state.history_slot);
		table_close(state.history, NoLock);

		ExecuteTruncateGuts(list_make1(state.current),
							list_make1_oid(entry.current_rel),
							NIL, behavior, false);
		table_close(state.current, NoLock);
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
