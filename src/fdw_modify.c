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
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "source_writes.h"

/* rows per ExecForeignBatchInsert call (multi-row INSERT, COPY FROM) */
#define SW_INSERT_BATCH_SIZE	100

/* retractions collected before they go into the history heap at once */
#define SW_HISTORY_BATCH_SIZE	1000

/* state of one source table's modification in one statement */
typedef struct SwModifyState
{
	Relation	ftrel;			/* the source table */
	Relation	current;		/* hidden heap of current rows */
	Relation	history;		/* hidden heap of retracted rows */
	SwLayout	current_layout;
	SwLayout	history_layout;
	ResultRelInfo *current_rri; /* the current heap's indexes */
	TupleTableSlot *new_slot;	/* a row for the current heap */
	TupleTableSlot *old_slot;	/* the current row being retracted */
	HeapTupleData old_tuple;	/* ... when the scan handed it over */
	TupleTableSlot **batch_slots;	/* rows of a batch insert */
	bool		buffer_rows;	/* COPY: collect single rows into batches */
	int			nbuffered;
	TupleTableSlot **history_slots; /* retractions not yet written */
	int			nhistory;
	Datum	   *history_values; /* to form a history row ... */
	bool	   *history_isnull;
	Datum	   *current_values; /* ... from a deformed current row ... */
	bool	   *current_isnull;
	Datum	   *row_values;		/* ... by way of the table's row */
	bool	   *row_isnull;
	MemoryContext history_cxt;	/* memory of the retractions not yet written */
	CommandId	history_cid;
	AttrNumber	ctid_attno;		/* row identity in the plan's output */
	ForeignScanState *scan;		/* the scan that feeds UPDATE/DELETE, if direct */
	int			natts;			/* attributes of the foreign table */
	int64		batch;			/* our batch, once we have written */
	Oid			key_index;		/* upsert: the unique index on the key */
	int			nkeys;			/* ... its columns' hidden attnums */
	AttrNumber *key_attnums;
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
	state->natts = RelationGetDescr(ftrel)->natts;
	state->current = table_open(entry.current_rel, RowExclusiveLock);
	state->history = table_open(entry.history_rel, RowExclusiveLock);
	sw_layout(state->current, &state->current_layout);
	sw_layout(state->history, &state->history_layout);

	state->current_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(state->current_rri, state->current, 0, NULL, 0);
	state->key_index = sw_storage_key_index(entry.current_rel);
	/* "speculative" prepares what the key check needs, as for ON CONFLICT */
	ExecOpenIndices(state->current_rri, OidIsValid(state->key_index));
	for (int i = 0; i < state->current_rri->ri_NumIndices; i++)
	{
		Relation	index = state->current_rri->ri_IndexRelationDescs[i];

		if (RelationGetRelid(index) != state->key_index)
			continue;
		state->nkeys = index->rd_index->indnkeyatts;
		state->key_attnums = index->rd_index->indkey.values;
	}

	state->new_slot = MakeSingleTupleTableSlot(RelationGetDescr(state->current),
											   &TTSOpsVirtual);
	state->old_slot = table_slot_create(state->current, NULL);
	state->ctid_attno = InvalidAttrNumber;
	return state;
}

static void end_history(SwModifyState *state);

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
	end_history(state);
	ExecDropSingleTupleTableSlot(state->new_slot);
	ExecDropSingleTupleTableSlot(state->old_slot);
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
 * Fill a current-heap slot from a row of the foreign table: its columns in
 * their places, and our batch.
 */
static void
form_current_row(SwModifyState *state, TupleTableSlot *row, TupleTableSlot *dst)
{
	AttrNumber	meta = state->current_layout.meta;

	ExecClearTuple(dst);
	slot_getallattrs(row);
	sw_to_hidden(&state->current_layout, state->natts,
				 row->tts_values, row->tts_isnull,
				 dst->tts_values, dst->tts_isnull);
	dst->tts_values[meta - 1] = Int64GetDatum(our_batch(state));
	dst->tts_isnull[meta - 1] = false;
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
	sw_from_hidden(&state->current_layout, state->natts,
				   hidden->tts_values, hidden->tts_isnull,
				   dst->tts_values, dst->tts_isnull);
	ExecStoreVirtualTuple(dst);
	ExecMaterializeSlot(dst);
}

/*
 * Does a current-heap tuple end with "$batch", as every current row does
 * while no column has been added after the table was created?  Then its
 * batch is the last 8 bytes of its data, and its history row is the same
 * tuple with "$retracted" appended.
 */
static inline bool
ends_with_batch(SwModifyState *state, HeapTuple tuple)
{
	return HeapTupleHeaderGetNatts(tuple->t_data) == state->current_layout.meta;
}

/*
 * The batch that inserted a current-heap tuple.
 */
static int64
inserted_by(SwModifyState *state, HeapTuple tuple)
{
	bool		isnull;

	if (ends_with_batch(state, tuple))
	{
		int64		batch;

		memcpy(&batch, (char *) tuple->t_data + tuple->t_len - sizeof(int64),
			   sizeof(int64));
		return batch;
	}
	return DatumGetInt64(heap_getattr(tuple, state->current_layout.meta,
									  RelationGetDescr(state->current), &isnull));
}

/*
 * Upsert sources: the key of a new or changed row must be complete and not
 * be taken by another current row.  Waits, like INSERT ... ON CONFLICT,
 * for a transaction that holds the key.  A role that may not read the
 * table is not shown the key's values.
 */
static void
check_key(SwModifyState *state, EState *estate, TupleTableSlot *row)
{
	TupleDesc	desc = RelationGetDescr(state->current);
	ItemPointerData conflict;
	StringInfoData names;
	StringInfoData values;

	slot_getallattrs(row);
	for (int i = 0; i < state->nkeys; i++)
		if (row->tts_isnull[state->key_attnums[i] - 1])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("key column \"%s\" of upsert source \"%s\" cannot be null",
							NameStr(TupleDescAttr(desc, state->key_attnums[i] - 1)->attname),
							RelationGetRelationName(state->ftrel)),
					 errhint("Every row of an upsert source has a complete key.")));

	if (ExecCheckIndexConstraints(state->current_rri, row, estate, &conflict,
								  list_make1_oid(state->key_index)))
		return;

	initStringInfo(&names);
	initStringInfo(&values);
	for (int i = 0; i < state->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, state->key_attnums[i] - 1);
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(att->atttypid, &out, &varlena);
		appendStringInfo(&names, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(NameStr(att->attname)));
		appendStringInfo(&values, "%s%s", i > 0 ? ", " : "",
						 OidOutputFunctionCall(out, row->tts_values[att->attnum - 1]));
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates the key of upsert source \"%s\"",
					RelationGetRelationName(state->ftrel)),
			 pg_class_aclcheck(RelationGetRelid(state->ftrel), GetUserId(),
							   ACL_SELECT) == ACLCHECK_OK
			 ? errdetail("Key (%s)=(%s) already exists.", names.data, values.data) : 0,
			 errhint("Use UPDATE to change the row of an existing key.")));
}

/*
 * Does the new version of a row of an upsert source change its key?
 */
static bool
key_changed(SwModifyState *state, TupleTableSlot *old, TupleTableSlot *new)
{
	TupleDesc	desc = RelationGetDescr(state->current);

	slot_getallattrs(old);
	slot_getallattrs(new);
	for (int i = 0; i < state->nkeys; i++)
	{
		int			k = state->key_attnums[i] - 1;
		Form_pg_attribute att = TupleDescAttr(desc, k);

		if (old->tts_isnull[k] != new->tts_isnull[k] ||
			(!new->tts_isnull[k] &&
			 !datumIsEqual(old->tts_values[k], new->tts_values[k],
						   att->attbyval, att->attlen)))
			return true;
	}
	return false;
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
 * Write the collected retractions into the history heap, many rows per
 * page and WAL record.  Without a bulk-insert state: its small ring of
 * buffers would make each retraction write pages out and flush WAL as the
 * history heap grows, while the history is what later reads want cached.
 */
static void
flush_history(SwModifyState *state)
{
	if (state->nhistory == 0)
		return;
	table_multi_insert(state->history, state->history_slots, state->nhistory,
					   state->history_cid, 0, NULL);
	for (int i = 0; i < state->nhistory; i++)
		ExecClearTuple(state->history_slots[i]);
	state->nhistory = 0;
	MemoryContextReset(state->history_cxt);
}

/*
 * Write what is left and free the retraction buffers.
 */
static void
end_history(SwModifyState *state)
{
	if (state->history_slots == NULL)
		return;
	flush_history(state);
	for (int i = 0; i < SW_HISTORY_BATCH_SIZE; i++)
		ExecDropSingleTupleTableSlot(state->history_slots[i]);
	MemoryContextDelete(state->history_cxt);
	state->history_slots = NULL;
}

/*
 * The history tuple of a current tuple that ends with "$batch": a copy
 * with "$retracted" appended, made without deforming it.  The data keeps
 * its alignment because both headers are MAXALIGNed; only a null bitmap
 * that needs one more byte can move it.
 */
static HeapTuple
append_retracted(SwModifyState *state, HeapTuple current, int64 retracted)
{
	HeapTupleHeader from = current->t_data;
	TupleDesc	desc = RelationGetDescr(state->history);
	int			natts = HeapTupleHeaderGetNatts(from) + 1;
	bool		hasnulls = HeapTupleHasNulls(current);
	Size		hoff = MAXALIGN(SizeofHeapTupleHeader + (hasnulls ? BITMAPLEN(natts) : 0));
	Size		datalen = current->t_len - from->t_hoff;
	Size		len = hoff + datalen + sizeof(int64);
	HeapTuple	tuple = (HeapTuple) palloc(HEAPTUPLESIZE + len);
	HeapTupleHeader to = (HeapTupleHeader) ((char *) tuple + HEAPTUPLESIZE);

	/* the header as heap_form_tuple() leaves it: zeroed, then filled */
	memset(to, 0, hoff);

	tuple->t_len = len;
	tuple->t_data = to;
	ItemPointerSetInvalid(&tuple->t_self);
	tuple->t_tableOid = InvalidOid;

	HeapTupleHeaderSetDatumLength(to, len);
	HeapTupleHeaderSetTypeId(to, desc->tdtypeid);
	HeapTupleHeaderSetTypMod(to, desc->tdtypmod);
	HeapTupleHeaderSetNatts(to, natts);
	to->t_hoff = hoff;
	to->t_infomask = from->t_infomask & (HEAP_HASNULL | HEAP_HASVARWIDTH | HEAP_HASEXTERNAL);
	if (hasnulls)
	{
		memcpy(to->t_bits, from->t_bits, BITMAPLEN(natts - 1));
		to->t_bits[(natts - 1) >> 3] |= 1 << ((natts - 1) & 7);
	}
	memcpy((char *) to + hoff, (char *) from + from->t_hoff, datalen);
	memcpy((char *) to + hoff + datalen, &retracted, sizeof(int64));
	return tuple;
}

/*
 * Record the retraction of a current tuple in the history heap (nothing
 * when our own batch inserted it).  Retractions are collected and written
 * in groups; end_modify() writes the rest, before the statement ends.
 */
static void
retract(SwModifyState *state, HeapTuple old, CommandId cid)
{
	TupleDesc	desc = RelationGetDescr(state->history);
	int64		batch = inserted_by(state, old);
	MemoryContext oldcxt;
	HeapTuple	tuple;

	if (batch == our_batch(state))
		return;

	if (state->history_slots == NULL)
	{
		state->history_slots = palloc(sizeof(TupleTableSlot *) * SW_HISTORY_BATCH_SIZE);
		for (int i = 0; i < SW_HISTORY_BATCH_SIZE; i++)
			state->history_slots[i] = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
		state->history_values = palloc(sizeof(Datum) * desc->natts);
		state->history_isnull = palloc(sizeof(bool) * desc->natts);
		state->current_values = palloc(sizeof(Datum) * RelationGetDescr(state->current)->natts);
		state->current_isnull = palloc(sizeof(bool) * RelationGetDescr(state->current)->natts);
		state->row_values = palloc(sizeof(Datum) * Max(state->natts, 1));
		state->row_isnull = palloc(sizeof(bool) * Max(state->natts, 1));
		state->history_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "source_writes retractions",
												   ALLOCSET_DEFAULT_SIZES);
	}

	oldcxt = MemoryContextSwitchTo(state->history_cxt);
	if (ends_with_batch(state, old))
		tuple = append_retracted(state, old, state->batch);
	else
	{
		/* columns were added later: the table's columns move */
		AttrNumber	meta = state->history_layout.meta;
		Datum	   *values = state->history_values;
		bool	   *isnull = state->history_isnull;

		heap_deform_tuple(old, RelationGetDescr(state->current),
						  state->current_values, state->current_isnull);
		sw_from_hidden(&state->current_layout, state->natts,
					   state->current_values, state->current_isnull,
					   state->row_values, state->row_isnull);
		sw_to_hidden(&state->history_layout, state->natts,
					 state->row_values, state->row_isnull, values, isnull);
		values[meta - 1] = Int64GetDatum(batch);
		isnull[meta - 1] = false;
		values[meta] = Int64GetDatum(state->batch);
		isnull[meta] = false;
		tuple = heap_form_tuple(desc, values, isnull);
	}
	MemoryContextSwitchTo(oldcxt);

	/* the slot owns the tuple, so that the multi-insert need not copy it */
	ExecStoreHeapTuple(tuple, state->history_slots[state->nhistory++], true);
	state->history_cid = cid;
	if (state->nhistory == SW_HISTORY_BATCH_SIZE)
		flush_history(state);
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
	else if (!table_tuple_fetch_row_version(state->current, tid, SnapshotAny,
											state->old_slot))
		elog(ERROR, "failed to fetch the row at (%u,%u) of source table \"%s\"",
			 ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid),
			 RelationGetRelationName(state->ftrel));
	return ExecFetchSlotHeapTuple(state->old_slot, false, NULL);
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
		/* when the scan of this table feeds us directly, it has the row */
		if (IsA(outerPlanState(mtstate), ForeignScanState) &&
			((ForeignScanState *) outerPlanState(mtstate))->ss.ss_currentRelation ==
			rinfo->ri_RelationDesc)
			state->scan = (ForeignScanState *) outerPlanState(mtstate);
	}
	rinfo->ri_FdwState = state;
}

/*
 * COPY and tuple routing.  PostgreSQL 15 hands COPY's rows to foreign
 * tables one at a time; when nothing needs a row back at once (no
 * RETURNING, no triggers, no key to check), they are collected and
 * written in batches like those of a multi-row INSERT.
 */
static void
swBeginForeignInsert(ModifyTableState *mtstate, ResultRelInfo *rinfo)
{
	SwModifyState *state = begin_modify(mtstate->ps.state, rinfo);

	state->buffer_rows = rinfo->ri_TrigDesc == NULL &&
		rinfo->ri_projectReturning == NULL &&
		!OidIsValid(state->key_index);
	rinfo->ri_FdwState = state;
}

/*
 * The i-th slot of a batch insert, made on first use.
 */
static TupleTableSlot *
batch_slot(SwModifyState *state, EState *estate, int i)
{
	if (state->batch_slots == NULL)
	{
		state->batch_slots = MemoryContextAllocZero(estate->es_query_cxt,
													sizeof(TupleTableSlot *) * SW_INSERT_BATCH_SIZE);
		state->bistate = GetBulkInsertState();
	}
	if (state->batch_slots[i] == NULL)
		state->batch_slots[i] = MakeSingleTupleTableSlot(RelationGetDescr(state->current),
														 &TTSOpsVirtual);
	return state->batch_slots[i];
}

/*
 * Write the first n batch slots with one multi-insert.
 */
static void
write_batch(SwModifyState *state, EState *estate, int n)
{
	table_multi_insert(state->current, state->batch_slots, n,
					   estate->es_output_cid, 0, state->bistate);
	if (state->current_rri->ri_NumIndices > 0)
		for (int i = 0; i < n; i++)
			ExecInsertIndexTuples(state->current_rri, state->batch_slots[i],
								  estate, false, false, NULL, NIL);
}

static TupleTableSlot *
swExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;

	if (state->buffer_rows)
	{
		TupleTableSlot *row = batch_slot(state, estate, state->nbuffered++);

		/* COPY reuses its slot for the next row: keep our own copy */
		form_current_row(state, slot, row);
		ExecMaterializeSlot(row);
		if (state->nbuffered == SW_INSERT_BATCH_SIZE)
		{
			write_batch(state, estate, state->nbuffered);
			state->nbuffered = 0;
		}
		return slot;
	}

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
 * Many rows at once (multi-row INSERT, INSERT ... SELECT): one
 * table_multi_insert() with a bulk-insert state.
 */
static TupleTableSlot **
swExecForeignBatchInsert(EState *estate, ResultRelInfo *rinfo,
						 TupleTableSlot **slots, TupleTableSlot **planSlots,
						 int *numSlots)
{
	SwModifyState *state = rinfo->ri_FdwState;
	int			n = *numSlots;

	for (int i = 0; i < n; i++)
	{
		form_current_row(state, slots[i], batch_slot(state, estate, i));
		if (OidIsValid(state->key_index))
			check_key(state, estate, state->batch_slots[i]);
	}
	write_batch(state, estate, n);
	for (int i = 0; i < n; i++)
		slots[i]->tts_tid = state->batch_slots[i]->tts_tid;
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
	HeapTuple	old = current_tuple(state, tid);

	form_current_row(state, slot, state->new_slot);

	/* a changed key must not collide with another row's */
	if (OidIsValid(state->key_index) &&
		key_changed(state, state->old_slot, state->new_slot))
		check_key(state, estate, state->new_slot);

	result = table_tuple_update(state->current, tid, state->new_slot, cid,
								estate->es_snapshot,
								estate->es_crosscheck_snapshot,
								true, &tmfd, &lockmode, &update_indexes);
	if (!check_tm_result(result, &tmfd, cid, "updated"))
		return NULL;
	if (update_indexes && state->current_rri->ri_NumIndices > 0)
		ExecInsertIndexTuples(state->current_rri, state->new_slot, estate,
							  true, false, NULL, NIL);
	retract(state, old, cid);

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
	HeapTuple	old = current_tuple(state, tid);

	result = table_tuple_delete(state->current, tid, cid, estate->es_snapshot,
								estate->es_crosscheck_snapshot, true, &tmfd,
								false);
	if (!check_tm_result(result, &tmfd, cid, "deleted"))
		return NULL;
	retract(state, old, cid);

	/* RETURNING sees the deleted row */
	if (rinfo->ri_projectReturning)
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
	SwModifyState *state = rinfo->ri_FdwState;

	if (state->nbuffered > 0)
		write_batch(state, estate, state->nbuffered);
	state->nbuffered = 0;
	end_modify(state);
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
		sw_layout(state.current, &state.current_layout);
		sw_layout(state.history, &state.history_layout);

		snapshot = RegisterSnapshot(GetLatestSnapshot());
		scan = table_beginscan(state.current, snapshot, 0, NULL);
		while (table_scan_getnextslot(scan, ForwardScanDirection, state.old_slot))
			retract(&state, ExecFetchSlotHeapTuple(state.old_slot, false, NULL), cid);
		table_endscan(scan);
		UnregisterSnapshot(snapshot);
		end_history(&state);
		ExecDropSingleTupleTableSlot(state.old_slot);
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
