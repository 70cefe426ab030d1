/*-------------------------------------------------------------------------
 *
 * fdw_modify.c
 *		  INSERT, UPDATE, DELETE, COPY and TRUNCATE on source tables
 *
 * The modify callbacks write into the source's hidden heaps inside the
 * user's transaction, tagging rows with the user's batch (see controller.c,
 * which stamps the batch at commit):
 *
 *	INSERT		adds a row to the current heap with "$batch" = our batch;
 *	DELETE		deletes the row instance the scan returned (its ctid) from
 *				the current heap and adds it to the history heap with
 *				"$retracted" = our batch;
 *	UPDATE		does both at once: the current tuple is updated in place
 *				(a new tuple version, HOT where possible) and the old
 *				values go to the history heap;
 *	TRUNCATE	deletes every current row as DELETE does, so that readers
 *				whose snapshot is older still see them, and their log.
 *
 * A row inserted and retracted by the same transaction leaves no history:
 * a transaction is one instant, and within it the pair cancels out.
 *
 * Conflicts are PostgreSQL's.  When a concurrent transaction changed the
 * row first, REPEATABLE READ and SERIALIZABLE get a serialization failure;
 * READ COMMITTED does what ExecUpdate() and ExecDelete() do for a table:
 * lock the row's latest version, check with EvalPlanQual that it still
 * qualifies, and apply the UPDATE (recomputed from that version) or the
 * DELETE to it, or skip a row that was deleted.  Either way a row instance
 * is retracted once.
 *
 * Upsert sources keep a unique index on their key columns in the current
 * heap; inserting an existing key, or updating a key onto one, is a
 * unique_violation that names the source, not the index.  Keys compare
 * with the key types' equality (1.0 and 1.00 are one numeric key).
 *
 * Memory stays bounded whatever the number of rows: rows of a batch insert
 * and retractions are written in groups, each group in a memory context of
 * its own that is reset after it is written.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw_modify.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "foreign/fdwapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/appendinfo.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "controller.h"
#include "fdw.h"
#include "storage.h"

/* rows per ExecForeignBatchInsert call (multi-row INSERT, INSERT ... SELECT) */
#define SW_INSERT_BATCH_SIZE	100

/* rows and bytes of a COPY collected before they are written at once */
#define SW_COPY_BUFFER_ROWS		1000
#define SW_COPY_BUFFER_BYTES	65536

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
	int			natts;			/* attributes of the foreign table */
	char	   *schema_name;	/* of the foreign table, for errors */
	ResultRelInfo *current_rri; /* the current heap's indexes */
	ModifyTableState *mtstate;	/* UPDATE and DELETE: for EvalPlanQual */
	TupleTableSlot *new_slot;	/* a row for the current heap */
	TupleTableSlot *old_slot;	/* the current row being retracted */
	TupleTableSlot *lock_slot;	/* its latest version, locked */
	HeapTupleData old_tuple;	/* ... when the scan handed it over */
	TupleTableSlot *latest_slot;	/* the latest version as a row of the table */
	MemoryContext cxt;			/* what lives as long as the statement */
	MemoryContext row_cxt;		/* per-row work, reset for each row */
	AttrNumber	ctid_attno;		/* row identity in the plan's output */
	ForeignScanState *scan;		/* the scan that feeds UPDATE/DELETE, if direct */
	bool		check_partition;	/* a partition: enforce its constraint */
	bool		check_constraints;	/* NOT NULL and CHECK constraints */
	bool		row_triggers;	/* the command's row triggers saw the row */
	bool		buffer_history; /* retractions may wait for the end */

	/* our batch, once we have written, and the role it is for */
	int64		batch;
	Oid			batch_role;

	/* upsert sources */
	Oid			key_index;		/* the unique index on the key */
	List	   *key_indexes;	/* ... as a list, for ExecCheckIndexConstraints */
	int			nkeys;			/* its columns' hidden attnums */
	AttrNumber *key_attnums;

	/* batch inserts: multi-row INSERT, INSERT ... SELECT, COPY */
	TupleTableSlot **batch_slots;
	int			nbatch_slots;
	bool		buffer_rows;	/* COPY: collect single rows into batches */
	int			nbuffered;
	Size		buffered_bytes;
	BulkInsertState bistate;
	MemoryContext batch_cxt;	/* what writing one batch allocates */

	/* retractions not yet written to the history heap */
	TupleTableSlot **history_slots;
	int			nhistory;
	CommandId	history_cid;
	Datum	   *history_values; /* to form a history row ... */
	bool	   *history_isnull;
	Datum	   *current_values; /* ... from a deformed current row ... */
	bool	   *current_isnull;
	Datum	   *row_values;		/* ... by way of the table's row */
	bool	   *row_isnull;
	MemoryContext history_cxt;	/* memory of the retractions not yet written */
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
 * Open what a modification of a source needs: its hidden heaps, checked
 * against the table, and (with an executor state) the current heap's
 * indexes.  Shared by BeginForeignModify (INSERT, UPDATE, DELETE),
 * BeginForeignInsert (COPY, tuple routing) and TRUNCATE.
 */
static SwModifyState *
begin_modify(Relation ftrel, EState *estate)
{
	SwModifyState *state = palloc0(sizeof(SwModifyState));
	SwSource	source;

	check_not_as_of(ftrel);
	sw_source_require(RelationGetRelid(ftrel), &source);

	state->ftrel = ftrel;
	state->natts = RelationGetDescr(ftrel)->natts;
	state->schema_name = get_namespace_name(RelationGetNamespace(ftrel));
	state->current = table_open(source.current_rel, RowExclusiveLock);
	state->history = table_open(source.history_rel, RowExclusiveLock);
	sw_storage_layout(ftrel, state->current, &state->current_layout);
	sw_storage_layout(ftrel, state->history, &state->history_layout);
	state->check_partition = ftrel->rd_rel->relispartition;
	state->check_constraints = RelationGetDescr(ftrel)->constr != NULL &&
		(RelationGetDescr(ftrel)->constr->has_not_null ||
		 RelationGetDescr(ftrel)->constr->num_check > 0);
	state->buffer_history = true;
	state->cxt = CurrentMemoryContext;
	state->row_cxt = AllocSetContextCreate(CurrentMemoryContext,
										   "source_writes row",
										   ALLOCSET_SMALL_SIZES);

	if (estate)
	{
		state->current_rri = makeNode(ResultRelInfo);
		InitResultRelInfo(state->current_rri, state->current, 0, NULL, 0);
		state->key_index = source.key_index;
		/* "speculative" prepares what the key check needs, as for ON CONFLICT */
		ExecOpenIndices(state->current_rri, OidIsValid(state->key_index));
		for (int i = 0; i < state->current_rri->ri_NumIndices; i++)
		{
			Relation	index = state->current_rri->ri_IndexRelationDescs[i];

			if (RelationGetRelid(index) != state->key_index)
				continue;
			state->nkeys = index->rd_index->indnkeyatts;
			state->key_attnums = index->rd_index->indkey.values;
			state->key_indexes = list_make1_oid(state->key_index);
		}
	}

	state->latest_slot = MakeSingleTupleTableSlot(RelationGetDescr(ftrel),
												  &TTSOpsVirtual);
	state->new_slot = table_slot_create(state->current, NULL);
	state->old_slot = table_slot_create(state->current, NULL);
	state->lock_slot = table_slot_create(state->current, NULL);
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
	for (int i = 0; i < state->nbatch_slots; i++)
		ExecDropSingleTupleTableSlot(state->batch_slots[i]);
	end_history(state);
	ExecDropSingleTupleTableSlot(state->new_slot);
	ExecDropSingleTupleTableSlot(state->old_slot);
	ExecDropSingleTupleTableSlot(state->lock_slot);
	ExecDropSingleTupleTableSlot(state->latest_slot);
	if (state->current_rri)
		ExecCloseIndices(state->current_rri);
	MemoryContextDelete(state->row_cxt);
	if (state->batch_cxt)
		MemoryContextDelete(state->batch_cxt);
	table_close(state->history, NoLock);
	table_close(state->current, NoLock);
}

/*
 * Our batch id, allocated at the first write (a statement that writes
 * nothing makes no batch), for the role we write as.
 */
static inline int64
our_batch(SwModifyState *state)
{
	Oid			role = GetUserId();

	if (state->batch == 0 || state->batch_role != role)
	{
		state->batch = sw_controller_batch(RelationGetRelid(state->ftrel),
										   SW_ORIGIN_USER);
		state->batch_role = role;
	}
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
 * Fill a foreign table slot from a current-heap row.
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
 * The unique violation of an upsert source's key, said of the source.  A
 * role that may not read the table is not shown the key's values.
 */
static void
report_duplicate_key(SwModifyState *state, TupleTableSlot *row)
{
	TupleDesc	desc = RelationGetDescr(state->current);
	bool		may_read = pg_class_aclcheck(RelationGetRelid(state->ftrel),
											 GetUserId(), ACL_SELECT) == ACLCHECK_OK;
	StringInfoData names;
	StringInfoData values;

	initStringInfo(&names);
	initStringInfo(&values);
	slot_getallattrs(row);
	for (int i = 0; i < state->nkeys && may_read; i++)
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
			 may_read ? errdetail("Key (%s)=(%s) already exists.", names.data, values.data) : 0,
			 errhint("Use UPDATE to change the row of an existing key."),
			 errtable(state->ftrel)));
}

/*
 * Upsert sources: every row has a complete key.
 */
static void
check_key_complete(SwModifyState *state, TupleTableSlot *row)
{
	slot_getallattrs(row);
	for (int i = 0; i < state->nkeys; i++)
		if (row->tts_isnull[state->key_attnums[i] - 1])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("key column \"%s\" of upsert source \"%s\" cannot be null",
							NameStr(TupleDescAttr(RelationGetDescr(state->current),
												  state->key_attnums[i] - 1)->attname),
							RelationGetRelationName(state->ftrel)),
					 errhint("Every row of an upsert source has a complete key.")));
}

/*
 * Upsert sources: the key of a new row must be complete and not be taken
 * by a current row.  Waits, like INSERT ... ON CONFLICT, for a transaction
 * that holds the key.  (An UPDATE needs no such check: the unique index
 * finds a genuine conflict when the new version is indexed, and the row's
 * own old version, which the update retracts, is none.)
 */
static void
check_key_free(SwModifyState *state, EState *estate, TupleTableSlot *row)
{
	ItemPointerData conflict;

	check_key_complete(state, row);
	if (!ExecCheckIndexConstraints(state->current_rri, row, estate, &conflict,
								   state->key_indexes))
		report_duplicate_key(state, row);
}

/*
 * Index the current rows just written.  On an upsert source, a key that a
 * concurrent transaction took since we checked it (or that an UPDATE moves
 * a row onto) fails in the unique index, whose error would name the hidden
 * index: the error is said of the source instead, and re-thrown.  Its
 * detail, with the key's values, is PostgreSQL's, shown only to roles that
 * may read the rows.
 */
static void
insert_index_entries(SwModifyState *state, EState *estate,
					 TupleTableSlot **rows, int n, bool update)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (state->current_rri->ri_NumIndices == 0)
		return;
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
			ExecInsertIndexTuples(state->current_rri, rows[i], estate, update,
								  false, NULL, NIL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION ||
			!OidIsValid(state->key_index))
			PG_RE_THROW();
		FlushErrorState();
		edata->message = psprintf(_("duplicate key value violates the key of upsert source \"%s\""),
								  RelationGetRelationName(state->ftrel));
		edata->hint = pstrdup(_("Use UPDATE to change the row of an existing key."));
		edata->schema_name = state->schema_name;
		edata->table_name = pstrdup(RelationGetRelationName(state->ftrel));
		edata->constraint_name = NULL;
		ReThrowError(edata);
	}
	PG_END_TRY();
}

/*
 * Insert one row into the current heap.
 */
static void
insert_current(SwModifyState *state, EState *estate, TupleTableSlot *row)
{
	if (OidIsValid(state->key_index))
		check_key_free(state, estate, row);
	table_tuple_insert(state->current, row, estate->es_output_cid, 0, NULL);
	insert_index_entries(state, estate, &row, 1, false);
}

/*
 * Write the collected retractions into the history heap, many rows per
 * page and WAL record, in their own memory context.  Without a bulk-insert
 * state: its small ring of buffers would make each retraction write pages
 * out and flush WAL as the history heap grows, while the history is what
 * later reads want cached.
 */
static void
flush_history(SwModifyState *state)
{
	MemoryContext old;

	if (state->nhistory == 0)
		return;
	old = MemoryContextSwitchTo(state->history_cxt);
	table_multi_insert(state->history, state->history_slots, state->nhistory,
					   state->history_cid, 0, NULL);
	MemoryContextSwitchTo(old);
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
	for (int i = 0; i < SW_HISTORY_BATCH_SIZE && state->history_slots[i]; i++)
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
 * when this transaction inserted it).  Retractions are collected and
 * written in groups; end_modify() writes the rest, before the statement
 * ends.
 */
static void
retract(SwModifyState *state, HeapTuple old, CommandId cid)
{
	TupleDesc	desc = RelationGetDescr(state->history);
	int64		batch = inserted_by(state, old);
	int64		ours;
	MemoryContext oldcxt;
	HeapTuple	tuple;

	/* a row this transaction inserted leaves no history */
	if (sw_controller_wrote(RelationGetRelid(state->ftrel), batch))
		return;
	ours = our_batch(state);

	if (state->history_slots == NULL)
	{
		/* made on first use, for the rest of the statement */
		oldcxt = MemoryContextSwitchTo(state->cxt);
		state->history_slots = palloc0(sizeof(TupleTableSlot *) * SW_HISTORY_BATCH_SIZE);
		state->history_values = palloc(sizeof(Datum) * desc->natts);
		state->history_isnull = palloc(sizeof(bool) * desc->natts);
		state->current_values = palloc(sizeof(Datum) * RelationGetDescr(state->current)->natts);
		state->current_isnull = palloc(sizeof(bool) * RelationGetDescr(state->current)->natts);
		state->row_values = palloc(sizeof(Datum) * Max(state->natts, 1));
		state->row_isnull = palloc(sizeof(bool) * Max(state->natts, 1));
		state->history_cxt = AllocSetContextCreate(state->cxt,
												   "source_writes retractions",
												   ALLOCSET_DEFAULT_SIZES);
		MemoryContextSwitchTo(oldcxt);
	}

	oldcxt = MemoryContextSwitchTo(state->history_cxt);
	if (ends_with_batch(state, old))
		tuple = append_retracted(state, old, ours);
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
		values[meta] = Int64GetDatum(ours);
		isnull[meta] = false;
		tuple = heap_form_tuple(desc, values, isnull);
	}
	MemoryContextSwitchTo(oldcxt);

	/* the slot owns the tuple, so that the multi-insert need not copy it */
	if (state->history_slots[state->nhistory] == NULL)
	{
		oldcxt = MemoryContextSwitchTo(state->cxt);
		state->history_slots[state->nhistory] = MakeSingleTupleTableSlot(desc, &TTSOpsHeapTuple);
		MemoryContextSwitchTo(oldcxt);
	}
	ExecStoreHeapTuple(tuple, state->history_slots[state->nhistory++], true);
	state->history_cid = cid;
	if (state->nhistory == SW_HISTORY_BATCH_SIZE || !state->buffer_history)
		flush_history(state);
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
	else if (!table_tuple_fetch_row_version(state->current, tid, SnapshotAny,
											state->old_slot))
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
		result = table_tuple_lock(state->current, tid, estate->es_snapshot,
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
	ExecClearTuple(state->latest_slot);
	slot_getallattrs(state->lock_slot);
	sw_from_hidden(&state->current_layout, state->natts,
				   state->lock_slot->tts_values, state->lock_slot->tts_isnull,
				   state->latest_slot->tts_values, state->latest_slot->tts_isnull);
	ExecStoreVirtualTuple(state->latest_slot);
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
		state->buffer_history = !has_after_triggers(trig) &&
			!has_after_triggers(roottrig) &&
			mtstate->canSetTag &&
			mtstate->ps.state->es_auxmodifytables == NIL;
		for (int i = 0; i < mtstate->mt_nrels && state->buffer_history; i++)
			state->buffer_history = !has_after_triggers(mtstate->resultRelInfo[i].ri_TrigDesc);

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
 * COPY and tuple routing.  ON CONFLICT is refused here too, for inserts
 * routed from a partitioned table.  PostgreSQL 15 hands COPY's rows to
 * foreign tables one at a time; when nothing needs a row back at once (no
 * RETURNING, no triggers, no key to check), they are collected and written
 * in batches like those of a multi-row INSERT.
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

	state = begin_modify(rinfo->ri_RelationDesc, mtstate->ps.state);
	state->buffer_rows = rinfo->ri_TrigDesc == NULL &&
		(root == NULL || root->ri_TrigDesc == NULL) &&
		rinfo->ri_projectReturning == NULL &&
		!OidIsValid(state->key_index);
	rinfo->ri_FdwState = state;
}

/*
 * The i-th slot of a batch insert, made on first use.
 */
static TupleTableSlot *
batch_slot(SwModifyState *state, int i)
{
	if (state->batch_slots == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(state->cxt);

		state->batch_slots = palloc0(sizeof(TupleTableSlot *) * SW_COPY_BUFFER_ROWS);
		state->bistate = GetBulkInsertState();
		state->batch_cxt = AllocSetContextCreate(state->cxt,
												 "source_writes batch insert",
												 ALLOCSET_DEFAULT_SIZES);
		MemoryContextSwitchTo(old);
	}
	Assert(i < SW_COPY_BUFFER_ROWS);
	while (state->nbatch_slots <= i)
	{
		MemoryContext old = MemoryContextSwitchTo(state->cxt);

		state->batch_slots[state->nbatch_slots++] = table_slot_create(state->current, NULL);
		MemoryContextSwitchTo(old);
	}
	return state->batch_slots[i];
}

/*
 * Write the first n batch slots with one multi-insert, and index them.
 */
static void
write_batch(SwModifyState *state, EState *estate, int n)
{
	MemoryContext old = MemoryContextSwitchTo(state->batch_cxt);

	table_multi_insert(state->current, state->batch_slots, n,
					   estate->es_output_cid, 0, state->bistate);
	insert_index_entries(state, estate, state->batch_slots, n, false);
	MemoryContextSwitchTo(old);
	MemoryContextReset(state->batch_cxt);
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
swExecForeignInsert(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	MemoryContext old;

	check_row(state, rinfo, slot, estate);
	if (state->buffer_rows)
	{
		TupleTableSlot *row = batch_slot(state, state->nbuffered++);

		/* COPY reuses its slot for the next row: keep our own copy */
		form_current_row(state, slot, row);
		state->buffered_bytes += ExecFetchSlotHeapTuple(row, true, NULL)->t_len;
		if (state->nbuffered == SW_COPY_BUFFER_ROWS ||
			state->buffered_bytes >= SW_COPY_BUFFER_BYTES)
		{
			write_batch(state, estate, state->nbuffered);
			for (int i = 0; i < state->nbuffered; i++)
				ExecClearTuple(state->batch_slots[i]);
			state->nbuffered = 0;
			state->buffered_bytes = 0;
		}
		return slot;
	}

	MemoryContextReset(state->row_cxt);
	old = MemoryContextSwitchTo(state->row_cxt);
	form_current_row(state, slot, state->new_slot);
	insert_current(state, estate, state->new_slot);
	MemoryContextSwitchTo(old);
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
		TupleTableSlot *row = batch_slot(state, i);

		check_row(state, rinfo, slots[i], estate);
		form_current_row(state, slots[i], row);
		if (OidIsValid(state->key_index))
			check_key_free(state, estate, row);
	}
	write_batch(state, estate, n);
	for (int i = 0; i < n; i++)
	{
		slots[i]->tts_tid = state->batch_slots[i]->tts_tid;
		ExecClearTuple(state->batch_slots[i]);
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
	ItemPointerData tid = row_identity(state, planSlot);
	CommandId	cid = estate->es_output_cid;
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	result;
	HeapTuple	old;
	MemoryContext oldcxt;

	MemoryContextReset(state->row_cxt);
	oldcxt = MemoryContextSwitchTo(state->row_cxt);
	for (;;)
	{
		TupleTableSlot *epqslot;

		old = current_tuple(state, &tid);
		check_row(state, rinfo, slot, estate);
		form_current_row(state, slot, state->new_slot);

		if (OidIsValid(state->key_index))
			check_key_complete(state, state->new_slot);

		result = table_tuple_update(state->current, &tid, state->new_slot, cid,
									estate->es_snapshot,
									estate->es_crosscheck_snapshot,
									true, &tmfd, &lockmode, &update_indexes);
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

	if (update_indexes)
		insert_index_entries(state, estate, &state->new_slot, 1, true);
	retract(state, old, cid);
	MemoryContextSwitchTo(oldcxt);

	slot->tts_tid = state->new_slot->tts_tid;
	return slot;
}

/*
 * DELETE: retract the row instance the scan found (or its latest version).
 */
static TupleTableSlot *
swExecForeignDelete(EState *estate, ResultRelInfo *rinfo,
					TupleTableSlot *slot, TupleTableSlot *planSlot)
{
	SwModifyState *state = rinfo->ri_FdwState;
	ItemPointerData tid = row_identity(state, planSlot);
	CommandId	cid = estate->es_output_cid;
	TM_FailureData tmfd;
	TM_Result	result;
	HeapTuple	old;
	MemoryContext oldcxt;

	MemoryContextReset(state->row_cxt);
	oldcxt = MemoryContextSwitchTo(state->row_cxt);
	for (;;)
	{
		old = current_tuple(state, &tid);
		result = table_tuple_delete(state->current, &tid, cid, estate->es_snapshot,
									estate->es_crosscheck_snapshot, true, &tmfd,
									false);
		if (result == TM_Ok)
			break;
		if (recheck_row(state, estate, rinfo, result, &tmfd, &tid,
						LockTupleExclusive, CMD_DELETE) == NULL)
		{
			MemoryContextSwitchTo(oldcxt);
			return NULL;
		}
	}
	retract(state, old, cid);
	MemoryContextSwitchTo(oldcxt);

	/* RETURNING sees the deleted row */
	if (rinfo->ri_projectReturning)
		form_table_row(state, state->old_slot, slot);
	return slot;
}

static void
swEndForeignModify(EState *estate, ResultRelInfo *rinfo)
{
	end_modify(rinfo->ri_FdwState);
	rinfo->ri_FdwState = NULL;
}

/*
 * The end of COPY or tuple routing.  A result relation of an UPDATE that
 * rows were routed into was ended by EndForeignModify, which runs first.
 */
static void
swEndForeignInsert(EState *estate, ResultRelInfo *rinfo)
{
	SwModifyState *state = rinfo->ri_FdwState;

	if (state == NULL)
		return;
	if (state->nbuffered > 0)
		write_batch(state, estate, state->nbuffered);
	state->nbuffered = 0;
	end_modify(state);
	rinfo->ri_FdwState = NULL;
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
		SwModifyState *state = begin_modify(lfirst(lc), NULL);
		CommandId	cid = GetCurrentCommandId(true);
		SwRowScan	rs;
		TupleTableSlot *slot;

		sw_rows_begin(&rs, state->current);
		while ((slot = sw_rows_next(&rs)) != NULL)
		{
			TM_FailureData tmfd;
			MemoryContext old;

			MemoryContextReset(state->row_cxt);
			old = MemoryContextSwitchTo(state->row_cxt);
			if (table_tuple_delete(state->current, &slot->tts_tid, cid, rs.snapshot,
								   InvalidSnapshot, true, &tmfd, false) != TM_Ok)
				elog(ERROR, "could not delete a row of source table \"%s\" while truncating it",
					 RelationGetRelationName(state->ftrel));
			retract(state, ExecFetchSlotHeapTuple(slot, false, NULL), cid);
			MemoryContextSwitchTo(old);
		}
		sw_rows_end(&rs);
		end_modify(state);
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
