/*-------------------------------------------------------------------------
 *
 * functions.c
 *		  The SQL functions of schema source_writes: frontiers(), updates(),
 *		  channel() and compact()
 *
 * See doc/internals.md, "Reading the log" (Functions).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/functions.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_type.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "fdw/fdw.h"
#include "log/log.h"
#include "workers/workers.h"

/* columns of updates() */
#define UPDATES_NATTS	5

/* complain that a relation is not a source table */
static void
not_a_source_table(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("\"%s\" is not a source table", get_rel_name(relid)),
			 errhint("Source tables are foreign tables on a source_writes server.")));
}

/*
 * Check a privilege on a source table before anything about the table is
 * looked at.
 */
static void
check_source_privilege(Oid relid, AclMode mode)
{
	(void) sw_check_source_privilege(relid, GetUserId(), mode, false);
	if (!sw_is_source_table(relid))
		not_a_source_table(relid);
}

/*
 * May the current role read a source table's rows, and so its log?  The
 * functions of the log return whole rows: like a whole-row reference in a
 * query (ExecCheckRTEPerms()), they need SELECT on the table, or on each
 * of its columns.  If not, the usual error.
 */
static void
check_read_privilege(Oid relid)
{
	if (!sw_check_source_privilege(relid, GetUserId(), ACL_SELECT, true) &&
		pg_attribute_aclcheck_all(relid, GetUserId(), ACL_SELECT,
								  ACLMASK_ALL) == ACLCHECK_OK)
	{
		if (!sw_is_source_table(relid))
			not_a_source_table(relid);
		return;
	}
	check_source_privilege(relid, ACL_SELECT);
}

/*
 * The source table whose row type a function of the log was given as its
 * first argument (NULL::tbl), checked to be one the caller may read.
 */
Oid
sw_function_source(FunctionCallInfo fcinfo, const char *function)
{
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	Oid			relid = OidIsValid(rowtype) ? typeidTypeRelid(rowtype) : InvalidOid;

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source_writes.%s() takes a row of a source table", function),
				 errhint("Pass a null of the table's row type, e.g. %s(NULL::events).", function)));
	check_read_privilege(relid);
	return relid;
}

/*
 * The frontiers of a source as the calling statement sees them.  A table
 * created after the statement's snapshot was taken has nothing readable in
 * it: its range is empty.
 */
void
sw_statement_frontiers(Oid relid, SwFrontiers *frontiers)
{
	SwSource	source;

	if (sw_catalog_frontiers(relid, GetActiveSnapshot(), frontiers))
		return;
	sw_source_require(relid, &source);
	if (!sw_catalog_frontiers(relid, GetLatestSnapshot(), frontiers))
		elog(ERROR, "source table \"%s\" has no catalog row", get_rel_name(relid));
	frontiers->upper = frontiers->since;
}

PG_FUNCTION_INFO_V1(source_writes_frontiers);

/*
 * frontiers(regclass) -> (since, upper): the readable range of a source.
 */
Datum
source_writes_frontiers(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	TupleDesc	desc;
	SwFrontiers frontiers;
	Datum		values[2];
	bool		nulls[2] = {0};

	check_read_privilege(relid);
	LockRelationOid(relid, AccessShareLock);
	sw_statement_frontiers(relid, &frontiers);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(frontiers.since);
	values[1] = Int64GetDatum(frontiers.upper);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(desc),
													  values, nulls)));
}

PG_FUNCTION_INFO_V1(source_writes_channel);

/*
 * channel(regclass): the name to LISTEN on for a source's new batches.
 */
Datum
source_writes_channel(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);

	check_read_privilege(relid);
	PG_RETURN_TEXT_P(cstring_to_text(sw_channel_name(relid)));
}

PG_FUNCTION_INFO_V1(source_writes_updates);

/*
 * updates(NULL::tbl, since => bigint, until => bigint)
 *		-> (ts bigint, diff integer, origin text, role name, data tbl)
 *
 * The log of a source table in timestamp order (additions before
 * retractions at one timestamp): the updates with since <= ts < until.
 * Without since, all retained history: the rows of batches that
 * compaction folded appear as added by the oldest batch kept, with origin
 * system and no role.  An explicit since must be readable (not before the
 * source's since), and costs what the batches since then wrote.  The
 * updates are sorted with work_mem,
 * spilling to disk as a sort does; each is built in a memory context that
 * is reset for the next.
 */
Datum
source_writes_updates(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			relid = sw_function_source(fcinfo, "updates");
	Oid			rowtype = get_fn_expr_argtype(fcinfo->flinfo, 0);
	SwSource	source;
	SwFrontiers frontiers;
	int64		since;
	int64		until;
	Relation	ftrel;
	Relation	current;
	Relation	history;
	Snapshot	snapshot = GetActiveSnapshot();
	SwBatchMap *map;
	SwLogScan	ls;
	TupleDesc	rowdesc;
	Datum	   *row_values;
	bool	   *row_isnull;
	Datum		origins[SW_NUM_ORIGINS];
	AttrNumber	sort_cols[2] = {1, 2};
	Oid			sort_ops[2];
	Oid			collations[2] = {InvalidOid, InvalidOid};
	bool		nulls_first[2] = {false, false};
	Tuplesortstate *sort;
	TupleTableSlot *slot;
	TupleTableSlot *hidden;
	const SwLayout *layout;
	SwLogRow	row;
	SwBatch		folded = {0};
	MemoryContext row_cxt;

	ftrel = relation_open(relid, AccessShareLock);
	sw_source_require(relid, &source);
	sw_statement_frontiers(relid, &frontiers);

	since = PG_ARGISNULL(1) ? PG_INT64_MIN : PG_GETARG_INT64(1);
	until = PG_ARGISNULL(2) ? PG_INT64_MAX : PG_GETARG_INT64(2);
	if (!PG_ARGISNULL(1) && since < frontiers.since)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the log of source table \"%s\" is not complete from " INT64_FORMAT,
						get_rel_name(relid), since),
				 errdetail("It is complete from " INT64_FORMAT " on: the table was created then, or older history was compacted.",
						   frontiers.since),
				 errhint("Ask for updates since " INT64_FORMAT " or later, or without since for all that is kept.",
						 frontiers.since)));

	InitMaterializedSRF(fcinfo, 0);
	rowdesc = lookup_rowtype_tupdesc_copy(rowtype, -1);
	row_values = palloc(sizeof(Datum) * Max(rowdesc->natts, 1));
	row_isnull = palloc(sizeof(bool) * Max(rowdesc->natts, 1));
	for (int i = 0; i < SW_NUM_ORIGINS; i++)
		origins[i] = CStringGetTextDatum(sw_origin_name(i));
	map = since == PG_INT64_MIN ? sw_log_batches(relid, since, until, snapshot)
		: sw_log_window_batches(relid, since, until, snapshot);

	sort_ops[0] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
									  BTLessStrategyNumber);
	sort_ops[1] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT4OID, INT4OID,
									  BTGreaterStrategyNumber);
	sort = tuplesort_begin_heap(rsinfo->setDesc, 2, sort_cols, sort_ops,
								collations, nulls_first, work_mem, NULL,
								TUPLESORT_NONE);
	slot = MakeSingleTupleTableSlot(rsinfo->setDesc, &TTSOpsVirtual);
	row_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes update",
									ALLOCSET_DEFAULT_SIZES);

	current = table_open(source.current_rel, AccessShareLock);
	history = table_open(source.history_rel, AccessShareLock);
	sw_log_begin_scan(&ls, ftrel, current, history, snapshot, map);

	/*
	 * From a time on, only the rows of the batches since then, in the blocks
	 * they wrote; from the beginning, everything.
	 */
	if (since != PG_INT64_MIN)
		sw_log_scan_written_blocks(&ls);
	folded.ts = map->oldest_ts;
	folded.origin = SW_ORIGIN_SYSTEM;
	while ((hidden = sw_log_next(&ls, &layout, &row)) != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(row_cxt);
		Datum		data;

		slot_getallattrs(hidden);
		sw_from_hidden(layout, rowdesc->natts, hidden->tts_values,
					   hidden->tts_isnull, row_values, row_isnull);
		data = HeapTupleGetDatum(heap_form_tuple(rowdesc, row_values, row_isnull));
		for (int i = 0; i < 2; i++)
		{
			const SwBatch *batch = NULL;

			if (i == 0 && row.added == SW_LOG_IN)
				batch = row.added_batch;
			else if (i == 0 && row.added == SW_LOG_BEFORE &&
					 since == PG_INT64_MIN && folded.ts < until)
				batch = &folded;	/* from the beginning: a folded batch */
			else if (i == 1 && row.retracted == SW_LOG_IN)
				batch = row.retracted_batch;
			if (batch == NULL)
				continue;
			ExecClearTuple(slot);
			memset(slot->tts_isnull, false, UPDATES_NATTS * sizeof(bool));
			slot->tts_values[0] = Int64GetDatum(batch->ts);
			slot->tts_values[1] = Int32GetDatum(i == 0 ? 1 : -1);
			slot->tts_values[2] = origins[batch->origin];
			slot->tts_values[3] = NameGetDatum(&batch->role);
			slot->tts_isnull[3] = batch == &folded;
			slot->tts_values[4] = data;
			ExecStoreVirtualTuple(slot);
			tuplesort_puttupleslot(sort, slot);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	sw_log_end_scan(&ls);
	table_close(history, AccessShareLock);
	table_close(current, AccessShareLock);

	tuplesort_performsort(sort);
	ExecDropSingleTupleTableSlot(slot);
	slot = MakeSingleTupleTableSlot(rsinfo->setDesc, &TTSOpsMinimalTuple);
	while (tuplesort_gettupleslot(sort, true, false, slot, NULL))
		tuplestore_puttupleslot(rsinfo->setResult, slot);
	ExecDropSingleTupleTableSlot(slot);
	tuplesort_end(sort);
	MemoryContextDelete(row_cxt);
	relation_close(ftrel, AccessShareLock);

	return (Datum) 0;
}

PG_FUNCTION_INFO_V1(source_writes_compact);

/*
 * compact(regclass) -> bigint: delete the history of a source that no
 * readable time needs, and roll up the batches that every snapshot sees
 * into segments, now, in the caller's transaction; returns how many
 * history rows it deleted.  Needs the right to delete from the table.
 * Writers of the source are not held up, even while the caller's
 * transaction stays open.
 */
Datum
source_writes_compact(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	int64		removed = 0;
	BlockNumber next;

	check_source_privilege(relid, ACL_DELETE);
	(void) sw_compact(relid, true, 0, 0, &removed, &next);
	while (sw_roll_up(relid, true) > 0)
		CHECK_FOR_INTERRUPTS();
	PG_RETURN_INT64(removed);
}
