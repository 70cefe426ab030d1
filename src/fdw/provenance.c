/*-------------------------------------------------------------------------
 *
 * provenance.c
 *		  Where rows came from: the SQL functions blame(), history(),
 *		  diff() and raw_messages()
 *
 * Each row version keeps where it came from ("$part", "$pos", "$delivery":
 * a Kafka message, or a webhook delivery) and the batch that wrote it (its
 * timestamp, origin, role and transaction).  See doc/internals.md,
 * "Reading the log" (Functions).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/provenance.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"
#include "utils/xid8.h"

#include "fdw/fdw.h"
#include "ingest/ingest.h"
#include "log/log.h"

/* a batch's columns: ts, origin, role, xid */
#define BATCH_NATTS		4
/* a row's position: partition, offset, delivery, received_at */
#define POSITION_NATTS	4

/* what reading a source's rows for one of the functions needs */
typedef struct ProvenanceRead
{
	ReturnSetInfo *rsinfo;
	Oid			relid;
	SwSource	source;
	Relation	ftrel;
	Relation	current;
	Relation	history;		/* NULL: the current rows only */
	SwBatchMap *map;
	SwLogScan	ls;
	SwBatch		folded;			/* the batch of rows whose own was folded */
	TupleDesc	rowdesc;		/* the table's rows */
	Datum	   *row_values;
	bool	   *row_isnull;
	Datum		origins[SW_NUM_ORIGINS];
	MemoryContext row_cxt;		/* reset for each row */
} ProvenanceRead;

/*
 * Begin reading a source's rows (and its history, if asked) with the
 * batches of [since, until) that the statement's snapshot sees.
 */
static void
begin_read(ProvenanceRead *pr, FunctionCallInfo fcinfo, const char *function,
		   bool with_history, int64 since, int64 until, SwFrontiers *frontiers)
{
	Snapshot	snapshot = GetActiveSnapshot();
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);

	memset(pr, 0, sizeof(ProvenanceRead));
	pr->rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	pr->relid = sw_function_source(fcinfo, function);
	pr->ftrel = relation_open(pr->relid, AccessShareLock);
	sw_source_require(pr->relid, &pr->source);
	sw_statement_frontiers(pr->relid, frontiers);
	InitMaterializedSRF(fcinfo, 0);

	pr->rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	pr->row_values = palloc(sizeof(Datum) * Max(pr->rowdesc->natts, 1));
	pr->row_isnull = palloc(sizeof(bool) * Max(pr->rowdesc->natts, 1));
	for (int i = 0; i < SW_NUM_ORIGINS; i++)
		pr->origins[i] = CStringGetTextDatum(sw_origin_name(i));
	pr->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes provenance",
										ALLOCSET_DEFAULT_SIZES);
	pr->map = sw_log_batches(pr->relid, since, until, snapshot);
	pr->folded.ts = pr->map->oldest_ts;
	pr->folded.origin = SW_ORIGIN_SYSTEM;

	pr->current = table_open(pr->source.current_rel, AccessShareLock);
	if (with_history)
		pr->history = table_open(pr->source.history_rel, AccessShareLock);
	sw_log_begin_scan(&pr->ls, pr->ftrel, pr->current, pr->history, snapshot, pr->map);
}

/* every row version the statement sees, those of its own transaction too */
static void
read_every_row(ProvenanceRead *pr)
{
	pr->ls.every_row = true;
}

static void
end_read(ProvenanceRead *pr)
{
	sw_log_end_scan(&pr->ls);
	if (pr->history)
		table_close(pr->history, AccessShareLock);
	table_close(pr->current, AccessShareLock);
	MemoryContextDelete(pr->row_cxt);
	relation_close(pr->ftrel, AccessShareLock);
}

/* the table's row of a hidden row, as a composite datum */
static Datum
row_datum(ProvenanceRead *pr, TupleTableSlot *hidden, const SwLayout *layout)
{
	slot_getallattrs(hidden);
	sw_from_hidden(layout, pr->rowdesc->natts, hidden->tts_values,
				   hidden->tts_isnull, pr->row_values, pr->row_isnull);
	return HeapTupleGetDatum(heap_form_tuple(pr->rowdesc, pr->row_values,
											 pr->row_isnull));
}

/*
 * A batch's columns: its timestamp, origin, role and transaction (NULL
 * for one not known: a batch of this transaction, not stamped yet; a
 * folded batch has no role nor transaction).
 */
static void
batch_values(ProvenanceRead *pr, const SwBatch *batch, Datum *values, bool *nulls)
{
	for (int i = 0; i < BATCH_NATTS; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = batch == NULL;
	}
	if (batch == NULL)
		return;
	values[0] = Int64GetDatum(batch->ts);
	values[1] = pr->origins[batch->origin];
	values[2] = NameGetDatum(&batch->role);
	values[3] = FullTransactionIdGetDatum(batch->xid);
	nulls[2] = nulls[3] = batch == &pr->folded;
	/* a batch rolled up into a segment of format 1 kept no transaction */
	nulls[3] |= !FullTransactionIdIsValid(batch->xid);
}

/*
 * A row's position: a Kafka message's partition and offset, or a webhook
 * delivery's idempotency key and when it came (its request's id, in
 * microseconds since the Unix epoch).  NULL where the row has none (a
 * person's new row, or one written before positions were kept).
 */
static void
position_values(ProvenanceRead *pr, TupleTableSlot *hidden, const SwLayout *layout,
				Datum *values, bool *nulls)
{
	bool		part_null;
	bool		pos_null;
	bool		delivery_null;
	Datum		part = sw_meta_value(hidden, layout->part, &part_null);
	Datum		pos = sw_meta_value(hidden, layout->pos, &pos_null);
	Datum		delivery = sw_meta_value(hidden, layout->delivery, &delivery_null);

	for (int i = 0; i < POSITION_NATTS; i++)
	{
		values[i] = (Datum) 0;
		nulls[i] = true;
	}
	if (pr->source.kind == SW_KIND_KAFKA)
	{
		values[0] = part;
		nulls[0] = part_null;
		values[1] = pos;
		nulls[1] = pos_null;
	}
	else
	{
		values[2] = delivery;
		nulls[2] = delivery_null;
		if (!pos_null)
		{
			values[3] = TimestampTzGetDatum(DatumGetInt64(pos) -
											(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY);
			nulls[3] = false;
		}
	}
}

/* the batch a row was added (or retracted) by, as a reader of all batches sees it */
static const SwBatch *
row_batch(ProvenanceRead *pr, SwLogWhen when, const SwBatch *batch)
{
	switch (when)
	{
		case SW_LOG_IN:
			return batch;
		case SW_LOG_BEFORE:
			return &pr->folded; /* folded by compaction */
		case SW_LOG_LATER:
			break;
	}
	return NULL;				/* this transaction's, not stamped yet */
}

PG_FUNCTION_INFO_V1(source_writes_blame);

/*
 * blame(NULL::tbl) -> (ts, origin, role, xid, partition, offset, delivery,
 *						received_at, data)
 *
 * Each current row of a source table, with the batch that wrote it and
 * where it came from.
 */
Datum
source_writes_blame(PG_FUNCTION_ARGS)
{
	ProvenanceRead pr;
	SwFrontiers frontiers;
	TupleTableSlot *hidden;
	const SwLayout *layout;
	SwLogRow	row;
	Datum		values[BATCH_NATTS + POSITION_NATTS + 1];
	bool		nulls[BATCH_NATTS + POSITION_NATTS + 1];

	begin_read(&pr, fcinfo, "blame", false, PG_INT64_MIN, PG_INT64_MAX, &frontiers);
	read_every_row(&pr);
	while ((hidden = sw_log_next(&pr.ls, &layout, &row)) != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(pr.row_cxt);

		batch_values(&pr, row_batch(&pr, row.added, row.added_batch), values, nulls);
		position_values(&pr, hidden, layout, values + BATCH_NATTS, nulls + BATCH_NATTS);
		values[BATCH_NATTS + POSITION_NATTS] = row_datum(&pr, hidden, layout);
		nulls[BATCH_NATTS + POSITION_NATTS] = false;
		tuplestore_putvalues(pr.rsinfo->setResult, pr.rsinfo->setDesc, values, nulls);
		MemoryContextSwitchTo(old);
		MemoryContextReset(pr.row_cxt);
	}
	end_read(&pr);
	return (Datum) 0;
}

/* a function's rows being sorted, and the slot that puts them in */
typedef struct SortedRows
{
	Tuplesortstate *sort;
	TupleTableSlot *slot;
} SortedRows;

/* sort a function's rows by their first columns (nkeys of them) with work_mem */
static void
begin_sort(SortedRows *sr, TupleDesc desc, int nkeys, AttrNumber *cols, Oid *ops)
{
	Oid			collations[2] = {InvalidOid, C_COLLATION_OID};
	bool		nulls_first[2] = {false, false};

	sr->sort = tuplesort_begin_heap(desc, nkeys, cols, ops, collations, nulls_first,
									work_mem, NULL, TUPLESORT_NONE);
	sr->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
}

/* put a row into a sort */
static void
put_sorted(SortedRows *sr, Datum *values, bool *nulls)
{
	TupleTableSlot *slot = sr->slot;
	int			natts = slot->tts_tupleDescriptor->natts;

	ExecClearTuple(slot);
	memcpy(slot->tts_values, values, sizeof(Datum) * natts);
	memcpy(slot->tts_isnull, nulls, sizeof(bool) * natts);
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(sr->sort, slot);
}

/* the sorted rows, into the function's result */
static void
end_sort(ProvenanceRead *pr, SortedRows *sr)
{
	TupleTableSlot *slot = MakeSingleTupleTableSlot(pr->rsinfo->setDesc,
													&TTSOpsMinimalTuple);

	ExecDropSingleTupleTableSlot(sr->slot);
	tuplesort_performsort(sr->sort);
	while (tuplesort_gettupleslot(sr->sort, true, false, slot, NULL))
		tuplestore_puttupleslot(pr->rsinfo->setResult, slot);
	ExecDropSingleTupleTableSlot(slot);
	tuplesort_end(sr->sort);
}

/* the columns of history() and raw_messages() */
#define SORTED_NATTS	12

/*
 * Fill the columns of one row version of the log; false: it has no row of
 * the result.  In the row's memory.
 */
typedef bool (*RowFiller) (ProvenanceRead *pr, TupleTableSlot *hidden,
						   const SwLayout *layout, const SwLogRow *row,
						   Datum *values, bool *nulls);

/*
 * The result of history() and raw_messages(): every version of every row
 * that the retained history has, as fill makes them, in the order of
 * their first column (valid_from).
 */
static void
sorted_row_versions(ProvenanceRead *pr, RowFiller fill)
{
	TupleTableSlot *hidden;
	const SwLayout *layout;
	SwLogRow	row;
	SortedRows	sorted;
	AttrNumber	cols[1] = {1};
	Oid			ops[1];
	Datum		values[SORTED_NATTS];
	bool		nulls[SORTED_NATTS];

	read_every_row(pr);
	ops[0] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
								 BTLessStrategyNumber);
	begin_sort(&sorted, pr->rsinfo->setDesc, 1, cols, ops);
	while ((hidden = sw_log_next(&pr->ls, &layout, &row)) != NULL)
	{
		MemoryContext old;

		/* retracted before since, by a folded batch: compaction's to delete */
		if (row.retracted == SW_LOG_BEFORE)
			continue;
		old = MemoryContextSwitchTo(pr->row_cxt);
		if (fill(pr, hidden, layout, &row, values, nulls))
			put_sorted(&sorted, values, nulls);
		MemoryContextSwitchTo(old);
		MemoryContextReset(pr->row_cxt);
	}
	end_read(pr);
	end_sort(pr, &sorted);
}

/* a row of history() */
static bool
history_row(ProvenanceRead *pr, TupleTableSlot *hidden, const SwLayout *layout,
			const SwLogRow *row, Datum *values, bool *nulls)
{
	const SwBatch *added = row_batch(pr, row->added, row->added_batch);
	const SwBatch *retracted = row->retracted == SW_LOG_IN ? row->retracted_batch : NULL;
	Datum		batch[BATCH_NATTS];
	bool		batch_nulls[BATCH_NATTS];

	/* valid_from, then origin, role, xid */
	batch_values(pr, added, batch, batch_nulls);
	values[0] = batch[0];
	nulls[0] = batch_nulls[0];
	memcpy(values + 2, batch + 1, sizeof(Datum) * 3);
	memcpy(nulls + 2, batch_nulls + 1, sizeof(bool) * 3);
	/* valid_to, retracted_origin, retracted_role */
	batch_values(pr, retracted, batch, batch_nulls);
	values[1] = batch[0];
	nulls[1] = batch_nulls[0];
	values[5] = batch[1];
	nulls[5] = batch_nulls[1];
	values[6] = batch[2];
	nulls[6] = batch_nulls[2];
	position_values(pr, hidden, layout, values + 7, nulls + 7);
	values[11] = row_datum(pr, hidden, layout);
	nulls[11] = false;
	return true;
}

PG_FUNCTION_INFO_V1(source_writes_history);

/*
 * history(NULL::tbl) -> (valid_from, valid_to, origin, role, xid,
 *						  retracted_origin, retracted_role, partition,
 *						  offset, delivery, received_at, data)
 *
 * Every version of every row that the retained history has, in the order
 * they were written: from when to when it was current (valid_to NULL: it
 * still is), who wrote it and who retracted it, and where it came from.
 */
Datum
source_writes_history(PG_FUNCTION_ARGS)
{
	ProvenanceRead pr;
	SwFrontiers frontiers;

	begin_read(&pr, fcinfo, "history", true, PG_INT64_MIN, PG_INT64_MAX, &frontiers);
	sorted_row_versions(&pr, history_row);
	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(source_writes_diff);

/*
 * diff(NULL::tbl, from_ts, to_ts) -> (ts, change, origin, role, data)
 *
 * The net change of a source table from one readable time to another:
 * each row instance added after from_ts and not retracted by to_ts
 * ('added'), and each one there at from_ts and retracted by to_ts
 * ('removed'), with the batch that did it, in timestamp order.  It reads
 * the blocks that the batches in between wrote, not the table.
 */
Datum
source_writes_diff(PG_FUNCTION_ARGS)
{
	ProvenanceRead pr;
	SwFrontiers frontiers;
	int64		from_ts;
	int64		to_ts;
	TupleTableSlot *hidden;
	const SwLayout *layout;
	SwLogRow	row;
	SortedRows	sorted;
	AttrNumber	cols[2] = {1, 2};
	Oid			ops[2];
	Datum		added_text;
	Datum		removed_text;
	Datum		values[5];
	bool		nulls[5] = {0};

	/* who may not read the table learns nothing more, as with a query */
	(void) sw_function_source(fcinfo, "diff");
	if (PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("source_writes.diff() needs the two times to compare")));
	from_ts = PG_GETARG_INT64(1);
	to_ts = PG_GETARG_INT64(2);
	if (from_ts > to_ts)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source_writes.diff() compares a time with a later one"),
				 errdetail("from_ts is " INT64_FORMAT " and to_ts " INT64_FORMAT ".",
						   from_ts, to_ts)));

	/* the batches after from_ts, up to to_ts */
	begin_read(&pr, fcinfo, "diff", true, from_ts + 1,
			   to_ts == PG_INT64_MAX ? PG_INT64_MAX : to_ts + 1, &frontiers);
	sw_check_readable(pr.relid, &frontiers, from_ts);
	sw_check_readable(pr.relid, &frontiers, to_ts);
	sw_log_scan_written_blocks(&pr.ls);

	ops[0] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
								 BTLessStrategyNumber);
	ops[1] = get_opfamily_member(TEXT_BTREE_FAM_OID, TEXTOID, TEXTOID,
								 BTGreaterStrategyNumber);
	begin_sort(&sorted, pr.rsinfo->setDesc, 2, cols, ops);
	added_text = CStringGetTextDatum("added");
	removed_text = CStringGetTextDatum("removed");
	while ((hidden = sw_log_next(&pr.ls, &layout, &row)) != NULL)
	{
		MemoryContext old;
		const SwBatch *batch;
		Datum		batch_cols[BATCH_NATTS];
		bool		batch_nulls[BATCH_NATTS];

		/* added and retracted in between, or neither: no change */
		if ((row.added == SW_LOG_IN) == (row.retracted == SW_LOG_IN))
			continue;
		if (row.added == SW_LOG_IN)
			batch = row.added_batch;
		else if (row.added == SW_LOG_BEFORE)
			batch = row.retracted_batch;
		else
			continue;			/* added later than to_ts */
		Assert(batch != NULL);

		old = MemoryContextSwitchTo(pr.row_cxt);
		batch_values(&pr, batch, batch_cols, batch_nulls);
		values[0] = batch_cols[0];
		values[1] = row.added == SW_LOG_IN ? added_text : removed_text;
		values[2] = batch_cols[1];
		values[3] = batch_cols[2];
		nulls[3] = batch_nulls[2];
		values[4] = row_datum(&pr, hidden, layout);
		put_sorted(&sorted, values, nulls);
		MemoryContextSwitchTo(old);
		MemoryContextReset(pr.row_cxt);
	}
	end_read(&pr);
	end_sort(&pr, &sorted);
	return (Datum) 0;
}

/* a row of raw_messages(): one that keeps its message */
static bool
raw_message_row(ProvenanceRead *pr, TupleTableSlot *hidden, const SwLayout *layout,
				const SwLogRow *row, Datum *values, bool *nulls)
{
	Datum		batch[BATCH_NATTS];
	bool		batch_nulls[BATCH_NATTS];
	SwMessage	msg;

	/* the message, as a version of a table would decode it again */
	if (!sw_raw_message(layout, hidden, &msg))
		return false;
	batch_values(pr, row_batch(pr, row->added, row->added_batch), batch, batch_nulls);
	values[0] = batch[0];
	nulls[0] = batch_nulls[0];
	batch_values(pr, row->retracted == SW_LOG_IN ? row->retracted_batch : NULL,
				 batch, batch_nulls);
	values[1] = batch[0];
	nulls[1] = batch_nulls[0];
	position_values(pr, hidden, layout, values + 2, nulls + 2);
	sw_raw_columns(&msg, values + 6, nulls + 6);
	/* a message without a timestamp: -1 kept, NULL shown */
	nulls[6 + SW_RAW_TIMESTAMP] = msg.timestamp_ms < 0;
	/* webhooks keep the piece of the body only */
	for (int i = 0; i < SW_NUM_RAW; i++)
		nulls[6 + i] |= !sw_raw_column_of(pr->source.kind, i);
	values[11] = row_datum(pr, hidden, layout);
	nulls[11] = false;
	return true;
}

PG_FUNCTION_INFO_V1(source_writes_raw_messages);

/*
 * raw_messages(NULL::tbl) -> (valid_from, valid_to, partition, offset,
 *							   delivery, received_at, key, value, timestamp,
 *							   header_names, header_values, data)
 *
 * Every retained version of the rows of a source with retain_raw that
 * keeps the message it came from, as it came, in the order they were
 * written (as history() has them): a Kafka message's key, value,
 * timestamp and headers; a webhook delivery's piece of the body, in value.
 * Versions that keep none (a person's rows, rows written while retain_raw
 * was off) are left out.  It needs SELECT on the table, as the kept
 * errors do (SELECT on its columns is not enough: a message holds what
 * its producer sent).  The messages are read as a new version of the
 * table reads them to decode them again (sw_raw_message()).
 */
Datum
source_writes_raw_messages(PG_FUNCTION_ARGS)
{
	ProvenanceRead pr;
	SwFrontiers frontiers;

	begin_read(&pr, fcinfo, "raw_messages", true, PG_INT64_MIN, PG_INT64_MAX, &frontiers);

	/*
	 * The messages hold what their producers sent, fields no column holds
	 * and headers too: SELECT on each column is not enough, as for the
	 * kept errors, which hold the same messages.
	 */
	(void) sw_check_source_privilege(pr.relid, GetUserId(), ACL_SELECT, false);
	sorted_row_versions(&pr, raw_message_row);
	return (Datum) 0;
}
