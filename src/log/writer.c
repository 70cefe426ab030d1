/*-------------------------------------------------------------------------
 *
 * writer.c
 *		  The one path that writes a source table's rows
 *
 * See doc/internals.md, "Writing and the stamping protocol" (The writer).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/writer.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/sysattr.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_trigger.h"
#include "commands/prepare.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "storage/pmsignal.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/ruleutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "log/log.h"

/* rows and bytes of appended rows collected before they are written */
#define SW_APPEND_BUFFER_ROWS	1000
#define SW_APPEND_BUFFER_BYTES	65536

/* retractions collected before they go into the history heap at once */
#define SW_HISTORY_BATCH_SIZE	1000

struct SwWriter
{
	Relation	ftrel;			/* the source table */
	Relation	current;		/* hidden heap of current rows */
	Relation	history;		/* hidden heap of retracted rows */
	SwLayout	current_layout;
	SwLayout	history_layout;
	int			natts;			/* attributes of the foreign table */
	SwOrigin	origin;
	MemoryContext cxt;			/* what lives as long as the writer */

	/* the role we run as, when it is not the caller's */
	int			nest_level;		/* the subtransaction it writes in */
	bool		deeper_ok;		/* ... or in subtransactions of it */
	ResourceOwner owner;		/* what holds what it keeps open: its own
								 * slots' descriptors, indexes */
	bool		switched;
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	EState	   *estate;			/* the caller's, or our own */
	bool		own_estate;
	ResultRelInfo *current_rri; /* the current heap and its indexes */
	ResultRelInfo *history_rri; /* the history heap and its indexes (if
								 * someone made any), once a row is
								 * retracted */
	ResultRelInfo *table_rri;	/* the source table, for its constraints */
	TupleTableSlot *new_slot;	/* a row for the current heap */
	TupleTableSlot *lock_slot;	/* upsert: the current row of a key */

	/*
	 * Ingestion (origins kafka and webhook) fires the table's triggers that
	 * are enabled REPLICA or ALWAYS, as logical replication's apply does.
	 */
	ResultRelInfo *trig_rri;	/* the table with those triggers only, or
								 * NULL if it has none */
	bool		row_triggers;	/* some of them are row triggers */
	bool		complete_late;	/* BEFORE row triggers come first: the
								 * writer computes generated columns and
								 * checks constraints after them */
	bool		stmt_query;		/* statement triggers fired: an AFTER
								 * trigger query is open until close */
	bool		in_trigger;		/* a trigger runs (or ran into an error) */
	TupleTableSlot *old_row;	/* OLD of an overwrite or a tombstone */
	TupleTableSlot *own_row;	/* NEW: a copy of the caller's row, which
								 * BEFORE triggers change (see own_row()) */
	TupleTableSlot *key_slot;	/* an upsert's row after its BEFORE trigger */
	Oid			log_role;		/* the role the log names, if not the one we
								 * run as */
	SwPosition	position;		/* where the next new rows come from */

	/* our batch, once we have written, and the role it is for */
	int64		batch;
	Oid			batch_role;
	SwBlockRanges *blocks;		/* where the batch wrote rows, by SwHeap */

	/* sources with a key (upsert) */
	Oid			key_index;		/* the unique index on the key */
	List	   *key_indexes;	/* ... as a list, for ExecCheckIndexConstraints */
	int			nkeys;			/* its columns' hidden attnums */
	AttrNumber *key_attnums;

	/* appended rows not yet written */
	TupleTableSlot **append_slots;
	int			max_append_slots;
	int			nappend_slots;
	int			nappended;
	Size		appended_bytes;
	BulkInsertState bistate;
	bool		own_bistate;	/* ours to free, not the caller's */
	MemoryContext append_cxt;	/* what writing one group allocates */
	bool		flushing;		/* writing them: an error then is theirs */

	/* retractions not yet written to the history heap */
	bool		buffer_history;
	TupleTableSlot **history_slots;
	SwBlockRanges **history_blocks; /* where each one's batch notes its block */
	int			nhistory;
	CommandId	history_cid;
	Datum	   *history_values; /* to form a history row ... */
	bool	   *history_isnull;
	Datum	   *current_values; /* ... from a deformed current row ... */
	bool	   *current_isnull;
	Datum	   *row_values;		/* ... by way of the table's row */
	bool	   *row_isnull;
	MemoryContext history_cxt;	/* memory of the retractions not yet written */
};

/*
 * While running code as a table's owner on behalf of a worker or the
 * caller of retry_errors(), names resolve in pg_catalog only: objects
 * planted in the caller's search_path (by another role, or by the
 * database's settings) must not stand in for the owner's.  The caller has
 * made a new GUC nest level.
 */
void
sw_writer_safe_search_path(void)
{
	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
}

/*
 * Forget the table's prepared constraints and generated columns after an
 * error while they were being prepared (in a subtransaction that rolled
 * back): they are prepared again, whole, for the next row.
 */
void
sw_writer_reset_checks(SwWriter *w)
{
	w->table_rri = NULL;
}

/*
 * In a worker, after a transaction in which tables' owners' code ran (as
 * those owners, restricted): release what that code may have left to the
 * worker's session rather than to the transaction, session-level advisory
 * locks and prepared statements, so that none of it outlives the
 * transaction in a session that serves every table.  The workers take no
 * advisory locks of their own.
 */
void
sw_writer_forget_session_state(void)
{
	LockReleaseAll(USER_LOCKMETHOD, true);
	DropAllPreparedStatements();
}

/*
 * The WARNINGs with which SyncRepWaitForLSN() ends a commit's wait for
 * synchronous standbys before they confirmed it, on a cancel and on a
 * shutdown, as their untranslated messages.
 */
static const char *const sync_rep_cut_short[] = {
	"canceling wait for synchronous replication due to user request",
	"canceling the wait for synchronous replication and terminating connection due to administrator command"
};

/* from sw_writer_commit_durably() to sw_writer_commit_replicated() */
static bool watching_commit = false;
static bool commit_wait_cut_short = false;
static emit_log_hook_type prev_emit_log_hook = NULL;

/*
 * emit_log_hook: note that the wait of the commit we watch for synchronous
 * standbys was cut short.
 */
static void
watch_commit_wait(ErrorData *edata)
{
	if (watching_commit && edata->elevel == WARNING && edata->message_id != NULL)
	{
		for (int i = 0; i < lengthof(sync_rep_cut_short); i++)
			if (strcmp(edata->message_id, sync_rep_cut_short[i]) == 0)
				commit_wait_cut_short = true;
	}
	if (prev_emit_log_hook)
		prev_emit_log_hook(edata);
}

/*
 * Has this transaction written to a source table, or begun to (a
 * statement that writes it holds RowExclusiveLock on it from its parse
 * on)?  Its batch has no timestamp until the commit stamps it, so what
 * reads the table's log as a whole (a fenced export, a version's copy,
 * an import's check that the table stays as imported) must not run in
 * such a transaction.
 */
bool
sw_transaction_writes(Oid relid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_RELATION(tag, MyDatabaseId, relid);
	return LockHeldByMe(&tag, RowExclusiveLock);
}

/*
 * In a worker, before it commits a transaction that wrote batches: the
 * commit waits for its WAL flush, and for synchronous standbys as
 * synchronous_commit's default does, whatever the database or its owner
 * set it to (off, local).  Else a batch's rows and the upper it moved
 * would be visible before they are durable, and a crash or a failover
 * could take back what readers saw, or a webhook request answered 200.
 * Only for this transaction.
 *
 * With watch, the commit is watched, for sw_writer_commit_replicated()
 * (which the caller then calls): PostgreSQL tells that a commit's wait for
 * the standbys was cut short only by a WARNING, which reaches the
 * emit_log_hook only if the server log takes warnings, as it then does for
 * this transaction (log_min_messages = log or above error would keep them
 * out).  Without, the server log takes what log_min_messages says.
 */
void
sw_writer_commit_durably(bool watch)
{
	static bool hooked = false;

	if (synchronous_commit < SYNCHRONOUS_COMMIT_REMOTE_WRITE)
		(void) set_config_option("synchronous_commit", "on",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	if (!watch)
		return;
	if (log_min_messages > WARNING || log_min_messages == LOG)
		(void) set_config_option("log_min_messages", "warning",
								 PGC_SUSET, PGC_S_SESSION, GUC_ACTION_LOCAL,
								 true, 0, false);
	if (!hooked)
	{
		prev_emit_log_hook = emit_log_hook;
		emit_log_hook = watch_commit_wait;
		hooked = true;
	}
	commit_wait_cut_short = false;
	watching_commit = true;
}

/*
 * After the commit that followed sw_writer_commit_durably(): whether it
 * reached the synchronous standbys it waited for.  It did not if its wait
 * was cut short, by a cancel or a shutdown (PostgreSQL then warns that the
 * transaction is committed locally and might not be replicated), or by the
 * death of the postmaster (without a warning: the backend is to exit).  A
 * commit that waited for no standby, or that was released because none is
 * asked for any more, did.
 */
bool
sw_writer_commit_replicated(void)
{
	bool		cut_short = commit_wait_cut_short ||
		(ProcDiePending && !PostmasterIsAlive());

	watching_commit = false;
	commit_wait_cut_short = false;
	return !cut_short;
}

/*
 * Of a table's triggers, those that fire for ingested rows: the ones
 * enabled REPLICA or ALWAYS, which fire for the changes that logical
 * replication's apply writes (its session_replication_role of replica
 * keeps ordinary ones, enabled ORIGIN, quiet).  The writer does not set
 * that role, a superuser's: it would also silence the ordinary triggers
 * and foreign keys of the tables that the triggers' own code writes, as
 * the owner.  It fires a copy of the table's triggers with only those,
 * each marked ALWAYS, so that it fires whatever role the session has.
 * NULL if there are none.  The copy points into all.
 */
static TriggerDesc *
ingestion_triggers(TriggerDesc *all)
{
	TriggerDesc *td;

	if (all == NULL)
		return NULL;
	td = palloc0(sizeof(TriggerDesc));
	td->triggers = palloc(sizeof(Trigger) * all->numtriggers);
	for (int i = 0; i < all->numtriggers; i++)
	{
		Trigger    *t = &td->triggers[td->numtriggers];
		int16		type = all->triggers[i].tgtype;

		if (all->triggers[i].tgenabled != TRIGGER_FIRES_ON_REPLICA &&
			all->triggers[i].tgenabled != TRIGGER_FIRES_ALWAYS)
			continue;
		*t = all->triggers[i];
		t->tgenabled = TRIGGER_FIRES_ALWAYS;
		td->numtriggers++;

		/* what SetTriggerFlags() says of the relcache's TriggerDesc */
		td->trig_insert_before_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_INSERT);
		td->trig_insert_after_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_INSERT);
		td->trig_insert_before_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_INSERT);
		td->trig_insert_after_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_INSERT);
		td->trig_update_before_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_UPDATE);
		td->trig_update_after_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_UPDATE);
		td->trig_update_before_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_UPDATE);
		td->trig_update_after_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_UPDATE);
		td->trig_delete_before_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_DELETE);
		td->trig_delete_after_row |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_ROW, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_DELETE);
		td->trig_delete_before_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_BEFORE, TRIGGER_TYPE_DELETE);
		td->trig_delete_after_statement |= TRIGGER_TYPE_MATCHES(type, TRIGGER_TYPE_STATEMENT, TRIGGER_TYPE_AFTER, TRIGGER_TYPE_DELETE);
		/* foreign tables have no INSTEAD OF, TRUNCATE or transition tables */
	}
	if (td->numtriggers == 0)
	{
		pfree(td->triggers);
		pfree(td);
		return NULL;
	}
	return td;
}

/* do the ingestion triggers of a writer include statement triggers? */
static bool
has_statement_triggers(SwWriter *w)
{
	TriggerDesc *td = w->trig_rri->ri_TrigDesc;

	return td->trig_insert_before_statement || td->trig_insert_after_statement ||
		(OidIsValid(w->key_index) &&
		 (td->trig_update_before_statement || td->trig_update_after_statement ||
		  td->trig_delete_before_statement || td->trig_delete_after_statement));
}

/*
 * An ingesting writer: prepare to fire the table's triggers that fire for
 * ingested rows (see ingestion_triggers()), as logical replication's apply
 * does, in the writer's own executor state: the table is its one result
 * relation and range table entry, which says that an ingested row sets
 * every column (an overwrite fires UPDATE OF triggers).  The functions are
 * looked up, and the slot of OLD rows made, for the writer's life.  Then
 * the statement triggers fire, BEFORE ones now and AFTER ones at close, in
 * an AFTER trigger query of their own: for INSERT, and on a source with a
 * key also for UPDATE and DELETE, as MERGE fires them for its actions.
 */
static void
prepare_triggers(SwWriter *w)
{
	ResultRelInfo *rri = makeNode(ResultRelInfo);
	TupleDesc	desc = RelationGetDescr(w->ftrel);
	RangeTblEntry *rte;
	TriggerDesc *td;
	ResourceOwner save;

	InitResultRelInfo(rri, w->ftrel, 1, NULL, 0);
	td = ingestion_triggers(rri->ri_TrigDesc);
	if (td == NULL)
		return;
	Assert(w->own_estate);
	rri->ri_TrigDesc = td;
	rri->ri_TrigFunctions = palloc0(sizeof(FmgrInfo) * td->numtriggers);
	rri->ri_TrigWhenExprs = palloc0(sizeof(ExprState *) * td->numtriggers);
	rri->ri_TrigInstrument = NULL;
	for (int i = 0; i < td->numtriggers; i++)
		fmgr_info(td->triggers[i].tgfoid, &rri->ri_TrigFunctions[i]);

	rte = makeNode(RangeTblEntry);
	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(w->ftrel);
	rte->relkind = w->ftrel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			rte->insertedCols = bms_add_member(rte->insertedCols,
											   i + 1 - FirstLowInvalidHeapAttributeNumber);
	rte->updatedCols = bms_copy(rte->insertedCols);
	ExecInitRangeTable(w->estate, list_make1(rte));
	w->estate->es_opened_result_relations =
		lappend(w->estate->es_opened_result_relations, rri);

	/* kept beyond the subtransactions that fire row triggers */
	save = CurrentResourceOwner;
	CurrentResourceOwner = w->owner;
	(void) ExecGetTriggerOldSlot(w->estate, rri);
	w->old_row = table_slot_create(w->ftrel, NULL);
	w->own_row = table_slot_create(w->ftrel, NULL);
	w->key_slot = table_slot_create(w->current, NULL);
	CurrentResourceOwner = save;

	w->trig_rri = rri;
	w->row_triggers = td->trig_insert_before_row || td->trig_insert_after_row ||
		(OidIsValid(w->key_index) &&
		 (td->trig_update_before_row || td->trig_update_after_row ||
		  td->trig_delete_before_row || td->trig_delete_after_row));
	w->complete_late = td->trig_insert_before_row ||
		(OidIsValid(w->key_index) && td->trig_update_before_row);
	/* row triggers may read the log: retractions are written as made */
	if (w->row_triggers)
		w->buffer_history = false;

	if (!has_statement_triggers(w))
		return;
	AfterTriggerBeginQuery();
	w->stmt_query = true;
	w->in_trigger = true;
	ExecBSInsertTriggers(w->estate, rri);
	if (OidIsValid(w->key_index))
	{
		ExecBSUpdateTriggers(w->estate, rri);
		ExecBSDeleteTriggers(w->estate, rri);
	}
	w->in_trigger = false;
}

/*
 * Fire the AFTER statement triggers, at close, and end their query.
 */
static void
end_triggers(SwWriter *w)
{
	if (!w->stmt_query)
		return;
	if (OidIsValid(w->key_index))
	{
		ExecASDeleteTriggers(w->estate, w->trig_rri, NULL);
		ExecASUpdateTriggers(w->estate, w->trig_rri, NULL);
	}
	ExecASInsertTriggers(w->estate, w->trig_rri, NULL);
	w->in_trigger = true;
	AfterTriggerEndQuery(w->estate);
	w->in_trigger = false;
	w->stmt_query = false;
}

/*
 * Fire the BEFORE row triggers of an ingested row for an event, on row
 * (its NEW, which they may change) and old (OLD, as a tuple of the table,
 * for UPDATE and DELETE): false if one of them skipped it.  Whatever they
 * return is copied into row's own memory.
 */
static bool
before_row(SwWriter *w, CmdType cmd, HeapTuple old, TupleTableSlot *row)
{
	bool		ok;

	if (row)
		row->tts_tableOid = RelationGetRelid(w->ftrel);
	w->in_trigger = true;
	if (cmd == CMD_INSERT)
		ok = ExecBRInsertTriggers(w->estate, w->trig_rri, row);
	else if (cmd == CMD_UPDATE)
		ok = ExecBRUpdateTriggers(w->estate, NULL, w->trig_rri, NULL, old, row, NULL);
	else
		ok = ExecBRDeleteTriggers(w->estate, NULL, w->trig_rri, NULL, old, NULL);
	w->in_trigger = false;
	if (ok && row)
		ExecMaterializeSlot(row);
	return ok;
}

/*
 * Fire the AFTER row triggers of an ingested row, once it is written, in
 * an AFTER trigger query of its own (as apply has one for each change),
 * so that they have run, and any error of theirs is the row's, when the
 * caller goes on to the next row.
 */
static void
after_row(SwWriter *w, CmdType cmd, HeapTuple old, TupleTableSlot *row)
{
	TriggerDesc *td = w->trig_rri->ri_TrigDesc;

	if (!(cmd == CMD_INSERT ? td->trig_insert_after_row :
		  cmd == CMD_UPDATE ? td->trig_update_after_row : td->trig_delete_after_row))
		return;
	AfterTriggerBeginQuery();
	if (cmd == CMD_INSERT)
		ExecARInsertTriggers(w->estate, w->trig_rri, row, NIL, NULL);
	else if (cmd == CMD_UPDATE)
		ExecARUpdateTriggers(w->estate, w->trig_rri, NULL, NULL, NULL, old, row,
							 NIL, NULL, false);
	else
		ExecARDeleteTriggers(w->estate, w->trig_rri, NULL, old, NULL, false);
	w->in_trigger = true;
	AfterTriggerEndQuery(w->estate);
	w->in_trigger = false;
}

/*
 * The row that BEFORE row triggers, and the writer after them (generated
 * columns), make the row to write: a copy of the caller's, which stays as
 * it was given.  A caller writes a row again after the subtransaction that
 * wrote it rolled back (ingestion retries a failed chunk one message at a
 * time): the triggers must fire on the message's row again, not on what
 * they made of it the first time.
 */
static TupleTableSlot *
own_row(SwWriter *w, TupleTableSlot *row)
{
	if (!w->complete_late)
		return row;
	return ExecCopySlot(w->own_row, row);
}

/*
 * The current row of a key, locked in lock_slot, as a tuple of the table:
 * the OLD of its triggers, valid until the next call.
 */
static HeapTuple
old_tuple(SwWriter *w)
{
	sw_writer_to_row(w, w->lock_slot, w->old_row);
	w->old_row->tts_tableOid = RelationGetRelid(w->ftrel);
	return ExecFetchSlotHeapTuple(w->old_row, true, NULL);
}

/*
 * Ingestion fires triggers: does a row trigger need each row as it is
 * written?  Then rows are written one at a time, and an upsert batch is
 * not merged by key (the triggers see every message).
 */
bool
sw_writer_fires_row_triggers(SwWriter *w)
{
	return w->trig_rri != NULL && w->row_triggers;
}

/*
 * After an error: was a trigger running (the error is the trigger's, not
 * the writer's)?  Forgets it.
 */
bool
sw_writer_failed_in_trigger(SwWriter *w)
{
	bool		in_trigger = w->in_trigger;

	w->in_trigger = false;
	return in_trigger;
}

/*
 * The log names role as the one that wrote the writer's batch, not the
 * role it runs as: retry_errors() runs as the table's owner for its
 * caller.  Before the first write.
 */
void
sw_writer_log_as(SwWriter *w, Oid role)
{
	Assert(w->batch == 0);
	w->log_role = role;
}

/*
 * Open a writer on a source table, which the caller has opened and locked
 * for writing, for an origin and a role.  With an executor state, the
 * writer writes with its command id and snapshot; without one, it makes
 * its own from the current command and the active snapshot.
 */
SwWriter *
sw_writer_open(Relation ftrel, SwOrigin origin, Oid role, EState *estate)
{
	SwWriter   *w = palloc0(sizeof(SwWriter));
	SwSource	source;

	if (sw_as_of >= 0)
		ereport(ERROR,
				(errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
				 errmsg("cannot modify source table \"%s\" while source_writes.as_of is set",
						RelationGetRelationName(ftrel)),
				 errhint("RESET source_writes.as_of to edit the current contents.")));
	sw_source_require(RelationGetRelid(ftrel), &source);
	if (source.moved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" was moved", RelationGetRelationName(ftrel)),
				 errdetail("Its log was exported with source_writes.export(..., fence => true): it takes no more writes."),
				 errhint("Write to the source table it was imported into, or drop this one.")));

	/*
	 * Ingestion runs the table's code (defaults, checks, input functions)
	 * as its owner, restricted and with the safe search_path, also when the
	 * worker's own role owns the table: the worker is a superuser, and its
	 * search_path is whatever the database's settings made it.  A user's
	 * edit runs as that user, as DML does.
	 */
	if (origin != SW_ORIGIN_USER || role != GetUserId())
	{
		GetUserIdAndSecContext(&w->save_userid, &w->save_sec_context);
		SetUserIdAndSecContext(role, w->save_sec_context |
							   SECURITY_LOCAL_USERID_CHANGE |
							   SECURITY_RESTRICTED_OPERATION);
		w->save_nestlevel = NewGUCNestLevel();
		sw_writer_safe_search_path();
		w->switched = true;
	}

	w->ftrel = ftrel;
	w->origin = origin;
	w->nest_level = GetCurrentTransactionNestLevel();
	w->owner = CurrentResourceOwner;
	w->cxt = CurrentMemoryContext;
	w->natts = RelationGetDescr(ftrel)->natts;
	w->current = table_open(source.current_rel, RowExclusiveLock);
	w->history = table_open(source.history_rel, RowExclusiveLock);
	sw_storage_layout(ftrel, w->current, &w->current_layout);
	sw_storage_layout(ftrel, w->history, &w->history_layout);
	w->buffer_history = true;

	if (estate == NULL)
	{
		estate = CreateExecutorState();
		estate->es_output_cid = GetCurrentCommandId(true);
		estate->es_snapshot = GetActiveSnapshot();
		w->own_estate = true;
	}
	w->estate = estate;

	w->current_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->current_rri, w->current, 0, NULL, 0);
	w->key_index = source.key_index;
	/* "speculative" prepares what the key checks need, as for ON CONFLICT */
	ExecOpenIndices(w->current_rri, OidIsValid(w->key_index));
	for (int i = 0; i < w->current_rri->ri_NumIndices; i++)
	{
		Relation	index = w->current_rri->ri_IndexRelationDescs[i];

		if (RelationGetRelid(index) != w->key_index)
			continue;
		w->nkeys = index->rd_index->indnkeyatts;
		w->key_attnums = index->rd_index->indkey.values;
		w->key_indexes = list_make1_oid(w->key_index);
	}

	w->new_slot = table_slot_create(w->current, NULL);
	w->lock_slot = table_slot_create(w->current, NULL);

	if ((origin == SW_ORIGIN_KAFKA || origin == SW_ORIGIN_WEBHOOK) &&
		ftrel->trigdesc != NULL)
		prepare_triggers(w);
	return w;
}

static void end_history(SwWriter *w);
static void flush_history(SwWriter *w);

/*
 * Write what is buffered, and close the writer.
 */
void
sw_writer_close(SwWriter *w)
{
	sw_writer_flush(w);
	end_history(w);
	if (w->trig_rri)
	{
		end_triggers(w);
		ExecDropSingleTupleTableSlot(w->old_row);
		ExecDropSingleTupleTableSlot(w->own_row);
		ExecDropSingleTupleTableSlot(w->key_slot);
		ExecResetTupleTable(w->estate->es_tupleTable, false);
	}
	if (w->bistate && w->own_bistate)
		FreeBulkInsertState(w->bistate);
	else if (w->bistate)
		ReleaseBulkInsertStatePin(w->bistate);
	for (int i = 0; i < w->nappend_slots; i++)
		ExecDropSingleTupleTableSlot(w->append_slots[i]);
	if (w->append_cxt)
		MemoryContextDelete(w->append_cxt);
	ExecDropSingleTupleTableSlot(w->new_slot);
	ExecDropSingleTupleTableSlot(w->lock_slot);
	ExecCloseIndices(w->current_rri);
	if (w->history_rri)
		ExecCloseIndices(w->history_rri);
	if (w->own_estate)
		FreeExecutorState(w->estate);
	table_close(w->history, NoLock);
	table_close(w->current, NoLock);
	if (w->switched)
	{
		AtEOXact_GUC(false, w->save_nestlevel);
		SetUserIdAndSecContext(w->save_userid, w->save_sec_context);
	}
	pfree(w);
}

/*
 * Our batch id, allocated at the first write (nothing written, no batch),
 * for the role we write as.
 */
static inline int64
our_batch(SwWriter *w)
{
	Oid			role = OidIsValid(w->log_role) ? w->log_role : GetUserId();

	if (w->batch == 0 || w->batch_role != role)
	{
		w->batch = sw_controller_batch_of(RelationGetRelid(w->ftrel), w->origin,
										  role, &w->blocks);
		w->batch_role = role;
	}
	return w->batch;
}

/*
 * A writer with an executor state of its own resets its per-tuple memory
 * (index keys, CHECK constraints) before each row, as the executor would.
 */
static inline void
next_row(SwWriter *w)
{
	if (w->nest_level != GetCurrentTransactionNestLevel() &&
		!(w->deeper_ok && GetCurrentTransactionNestLevel() > w->nest_level))
		elog(ERROR, "a writer of source table \"%s\" was used in another subtransaction than the one it was opened in",
			 RelationGetRelationName(w->ftrel));
	if (w->own_estate)
		ResetPerTupleExprContext(w->estate);
}

/*
 * Note the block of a current row just written, for the readers of the log
 * from a time on (log.c).
 */
static inline void
note_block(SwWriter *w, TupleTableSlot *slot)
{
	sw_block_ranges_add(&w->blocks[SW_CURRENT_HEAP], w->current->rd_rel->relfilenode,
						ItemPointerGetBlockNumber(&slot->tts_tid));
}

/*
 * Where the rows written next come from: a message of a stream, or (NULL)
 * none, a person's new rows.  The delivery's key and the raw message's
 * values must last until they are written.
 */
void
sw_writer_set_position(SwWriter *w, const SwPosition *position)
{
	if (position)
		w->position = *position;
	else
		memset(&w->position, 0, sizeof(SwPosition));
}

/* a column of ours in a hidden row */
static inline void
set_meta(Datum *values, bool *isnull, AttrNumber attnum, Datum value, bool null)
{
	if (attnum == InvalidAttrNumber)
		return;					/* a relation made before it was kept */
	values[attnum - 1] = value;
	isnull[attnum - 1] = null;
}

/* ... copied from another hidden row's column of ours (NULL if it has none) */
static inline void
copy_meta(Datum *values, bool *isnull, AttrNumber attnum,
		  const Datum *from_values, const bool *from_isnull, AttrNumber from)
{
	if (from == InvalidAttrNumber)
		set_meta(values, isnull, attnum, (Datum) 0, true);
	else
		set_meta(values, isnull, attnum, from_values[from - 1], from_isnull[from - 1]);
}

/*
 * Fill a current-heap slot from a row of the foreign table: its columns in
 * their places, and our batch.  Its position is that of the current tuple
 * it replaces (from, for an UPDATE: the row still comes from that
 * message), or else where the writer's rows come from now.
 */
static void
form_current_row(SwWriter *w, TupleTableSlot *row, TupleTableSlot *dst,
				 HeapTuple from)
{
	const SwLayout *layout = &w->current_layout;
	Datum	   *values = dst->tts_values;
	bool	   *isnull = dst->tts_isnull;

	ExecClearTuple(dst);
	slot_getallattrs(row);
	sw_to_hidden(layout, w->natts, row->tts_values, row->tts_isnull,
				 values, isnull);
	set_meta(values, isnull, layout->batch, Int64GetDatum(our_batch(w)), false);
	if (from)
	{
		TupleDesc	desc = RelationGetDescr(w->current);
		const AttrNumber ours[3] = {layout->part, layout->pos, layout->delivery};

		for (int i = 0; i < 3; i++)
			if (ours[i] != InvalidAttrNumber)
				values[ours[i] - 1] = heap_getattr(from, ours[i], desc, &isnull[ours[i] - 1]);

		/*
		 * The raw message stays with a row that the system rewrites (filling
		 * added columns: it still is the message's row); a person's UPDATE
		 * makes a row of the person's, which keeps none: a value a person
		 * erases is not kept on in the message beyond retain_history (the
		 * version it replaces keeps the message in the history).
		 */
		for (int i = 0; i < SW_NUM_RAW; i++)
		{
			AttrNumber	attnum = layout->raw[i];

			if (attnum == InvalidAttrNumber)
				continue;
			if (w->origin == SW_ORIGIN_SYSTEM)
				values[attnum - 1] = heap_getattr(from, attnum, desc, &isnull[attnum - 1]);
			else
				set_meta(values, isnull, attnum, (Datum) 0, true);
		}
	}
	else
	{
		const SwPosition *p = &w->position;

		set_meta(values, isnull, layout->part, Int32GetDatum(p->part), !p->known);
		set_meta(values, isnull, layout->pos, Int64GetDatum(p->pos), !p->known);
		set_meta(values, isnull, layout->delivery,
				 p->delivery ? CStringGetTextDatum(p->delivery) : (Datum) 0,
				 p->delivery == NULL);
		for (int i = 0; i < SW_NUM_RAW; i++)
			set_meta(values, isnull, layout->raw[i], p->raw[i],
					 !p->raw_kept || p->raw_null[i]);
	}
	ExecStoreVirtualTuple(dst);
}

/*
 * Fill a slot of the foreign table's shape from a current-heap row.
 */
void
sw_writer_to_row(SwWriter *w, TupleTableSlot *hidden, TupleTableSlot *row)
{
	ExecClearTuple(row);
	slot_getallattrs(hidden);
	sw_from_hidden(&w->current_layout, w->natts,
				   hidden->tts_values, hidden->tts_isnull,
				   row->tts_values, row->tts_isnull);
	ExecStoreVirtualTuple(row);
}

/* the source table as a result relation, for its constraints */
static ResultRelInfo *
table_rri(SwWriter *w)
{
	if (w->table_rri == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(w->cxt);

		w->table_rri = makeNode(ResultRelInfo);
		InitResultRelInfo(w->table_rri, w->ftrel, 0, NULL, 0);
		MemoryContextSwitchTo(old);
	}
	return w->table_rri;
}

/*
 * A new row must meet the table's NOT NULL and CHECK constraints and, on a
 * source that is a partition, its partition's bounds, which PostgreSQL
 * leaves to the foreign data wrapper (the FDW's callbacks check them with
 * the executor's result relation; other writers, here).  The errors are
 * PostgreSQL's.
 */
static void
check_row(SwWriter *w, TupleTableSlot *row)
{
	TupleConstr *constr = RelationGetDescr(w->ftrel)->constr;
	bool		constraints = constr != NULL &&
		(constr->has_not_null || constr->num_check > 0);
	bool		partition = w->ftrel->rd_rel->relispartition;

	if (!constraints && !partition)
		return;
	/* writes nothing: a subtransaction may check, and catch its error */
	if (w->own_estate)
		ResetPerTupleExprContext(w->estate);
	if (constraints)
		ExecConstraints(table_rri(w), row, w->estate);
	if (partition)
		ExecPartitionCheck(table_rri(w), row, w->estate, true);
}

/*
 * Stored generated columns computed, as the executor computes them for
 * INSERT, then the constraints checked.
 */
static void
complete_row(SwWriter *w, TupleTableSlot *row)
{
	TupleConstr *constr = RelationGetDescr(w->ftrel)->constr;

	if (constr && constr->has_generated_stored)
	{
		if (w->own_estate)
			ResetPerTupleExprContext(w->estate);
		ExecComputeStoredGenerated(table_rri(w), w->estate, row, CMD_INSERT);
	}
	check_row(w, row);
}

/*
 * Check a new row's constraints (see check_row()), before it is written.
 * Where BEFORE row triggers fire for it, they come first, as for INSERT:
 * the writer checks it after them, when it writes it.
 */
void
sw_writer_check_constraints(SwWriter *w, TupleTableSlot *row)
{
	if (!w->complete_late)
		check_row(w, row);
}

/*
 * A new row from a worker gets its stored generated columns computed, then
 * its constraints are checked, as for sw_writer_check_constraints() (after
 * the BEFORE row triggers, if any fire, when the writer writes it).
 * Writes nothing: a subtransaction may do it, and catch its error.
 */
void
sw_writer_complete_row(SwWriter *w, TupleTableSlot *row)
{
	if (!w->complete_late)
		complete_row(w, row);
}

/*
 * Does a current-heap tuple end with "$batch", as every current row does
 * while no column has been added after the table was created?  Then its
 * batch is the last 8 bytes of its data, and its history row is the same
 * tuple with "$retracted" appended (where the history heap has it next).
 */
static inline bool
ends_with_batch(SwWriter *w, HeapTuple tuple)
{
	return HeapTupleHeaderGetNatts(tuple->t_data) == w->current_layout.batch;
}

/*
 * The batch that inserted a current-heap tuple.
 */
static int64
inserted_by(SwWriter *w, HeapTuple tuple)
{
	bool		isnull;

	if (ends_with_batch(w, tuple))
	{
		int64		batch;

		memcpy(&batch, (char *) tuple->t_data + tuple->t_len - sizeof(int64),
			   sizeof(int64));
		return batch;
	}
	return DatumGetInt64(heap_getattr(tuple, w->current_layout.batch,
									  RelationGetDescr(w->current), &isnull));
}

/*
 * The unique violation of an upsert source's key, said of the source.  A
 * role that may not read the table is not shown the key's values.
 */
static void
report_duplicate_key(SwWriter *w, TupleTableSlot *row)
{
	TupleDesc	desc = RelationGetDescr(w->current);
	bool		may_read = sw_check_source_privilege(RelationGetRelid(w->ftrel),
													 GetUserId(), ACL_SELECT, true);
	StringInfoData names;
	StringInfoData values;

	initStringInfo(&names);
	initStringInfo(&values);
	slot_getallattrs(row);
	for (int i = 0; i < w->nkeys && may_read; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, w->key_attnums[i] - 1);
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
					RelationGetRelationName(w->ftrel)),
			 may_read ? errdetail("Key (%s)=(%s) already exists.", names.data, values.data) : 0,
			 errhint("Use UPDATE to change the row of an existing key."),
			 errtable(w->ftrel)));
}

/*
 * Sources with a key: every row has a complete key.
 */
static void
check_key_complete(SwWriter *w, TupleTableSlot *row)
{
	slot_getallattrs(row);
	for (int i = 0; i < w->nkeys; i++)
		if (row->tts_isnull[w->key_attnums[i] - 1])
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("key column \"%s\" of upsert source \"%s\" cannot be null",
							NameStr(TupleDescAttr(RelationGetDescr(w->current),
												  w->key_attnums[i] - 1)->attname),
							RelationGetRelationName(w->ftrel)),
					 errhint("Every row of an upsert source has a complete key.")));
}

/*
 * Sources with a key: the key of a new row must be complete and not be
 * taken by a current row.  Waits, like INSERT ... ON CONFLICT, for a
 * transaction that holds the key.  (An update needs no such check: the
 * unique index finds a genuine conflict when the new version is indexed,
 * and the row's own old version, which the update retracts, is none.)
 */
static void
check_key_free(SwWriter *w, TupleTableSlot *row)
{
	ItemPointerData conflict;

	check_key_complete(w, row);
	if (!ExecCheckIndexConstraints(w->current_rri, row, w->estate, &conflict,
								   w->key_indexes))
		report_duplicate_key(w, row);
}

/*
 * The detail of a unique violation in index index_name of the current
 * heap, for row: "Key (...)=(...) already exists.", or NULL.  PostgreSQL
 * leaves it out unless the role may read the table the index is on, the
 * hidden heap, which nobody is granted: it is built again, as PostgreSQL
 * builds it, for a role that may read the source table or the key's
 * columns of it.
 */
static char *
duplicate_detail(SwWriter *w, TupleTableSlot *row, const char *index_name)
{
	Relation	index = NULL;
	IndexInfo  *info = NULL;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	Oid			save_userid;
	int			save_sec_context;
	char	   *desc;

	for (int i = 0; i < w->current_rri->ri_NumIndices; i++)
		if (strcmp(RelationGetRelationName(w->current_rri->ri_IndexRelationDescs[i]),
				   index_name) == 0)
		{
			index = w->current_rri->ri_IndexRelationDescs[i];
			info = w->current_rri->ri_IndexRelationInfo[i];
		}
	if (index == NULL ||
		check_enable_rls(RelationGetRelid(w->ftrel), InvalidOid, true) == RLS_ENABLED)
		return NULL;

	/*
	 * As BuildIndexValueDescription() checks a table: no row security, and
	 * SELECT on it, or on each key column (an expression needs the
	 * table's).
	 */
	if (!sw_check_source_privilege(RelationGetRelid(w->ftrel), GetUserId(),
								   ACL_SELECT, true))
	{
		for (int k = 0; k < info->ii_NumIndexKeyAttrs; k++)
		{
			AttrNumber	attnum = info->ii_IndexAttrNumbers[k];
			AttrNumber	own;

			if (attnum <= 0)
				return NULL;
			own = get_attnum(RelationGetRelid(w->ftrel),
							 NameStr(TupleDescAttr(RelationGetDescr(w->current),
												   attnum - 1)->attname));
			if (own == InvalidAttrNumber ||
				pg_attribute_aclcheck(RelationGetRelid(w->ftrel), own, GetUserId(),
									  ACL_SELECT) != ACLCHECK_OK)
				return NULL;
		}
	}
	GetPerTupleExprContext(w->estate)->ecxt_scantuple = row;
	FormIndexDatum(info, row, w->estate, values, isnull);
	/* as the heap's owner, who may read it */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(w->current->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
	desc = BuildIndexValueDescription(index, values, isnull);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	return desc ? psprintf(_("Key %s already exists."), desc) : NULL;
}

/*
 * Index the current rows just written.  On a source with a key, a key that
 * a concurrent transaction took since we checked it (or that an update
 * moves a row onto) fails in the unique index, whose error would name the
 * hidden index: the error is said of the source instead, and re-thrown.
 * A unique index of the user's fails with PostgreSQL's error, which names
 * that index; it is said of the source table rather than of its heap.
 * The detail, with the key's values, is PostgreSQL's, shown only to roles
 * that may read the rows.  With key_conflict, the row was inserted
 * speculatively: a conflict in the key's index sets *key_conflict instead
 * of failing, as INSERT ... ON CONFLICT's arbiter index does, and the
 * user's unique indexes fail as they do without it.
 */
static void
index_rows(SwWriter *w, TupleTableSlot **rows, int n, bool update,
		   bool *key_conflict)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile int i = 0;

	if (w->current_rri->ri_NumIndices == 0)
		return;
	PG_TRY();
	{
		for (; i < n; i++)
			ExecInsertIndexTuples(w->current_rri, rows[i], w->estate, update,
								  key_conflict != NULL, key_conflict,
								  key_conflict ? w->key_indexes : NIL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		edata->schema_name = get_namespace_name(RelationGetNamespace(w->ftrel));
		edata->table_name = pstrdup(RelationGetRelationName(w->ftrel));
		if (edata->detail == NULL && edata->constraint_name != NULL && i < n)
			edata->detail = duplicate_detail(w, rows[i], edata->constraint_name);
		if (!OidIsValid(w->key_index) || edata->constraint_name == NULL ||
			strcmp(edata->constraint_name, get_rel_name(w->key_index)) != 0)
			ReThrowError(edata);
		edata->message = psprintf(_("duplicate key value violates the key of upsert source \"%s\""),
								  RelationGetRelationName(w->ftrel));
		edata->hint = pstrdup(_("Use UPDATE to change the row of an existing key."));
		edata->constraint_name = NULL;
		ReThrowError(edata);
	}
	PG_END_TRY();
}

/* index the current rows just written (see index_rows()) */
static inline void
insert_index_entries(SwWriter *w, TupleTableSlot **rows, int n, bool update)
{
	index_rows(w, rows, n, update, NULL);
}

/*
 * Insert one row of the table now, firing the INSERT row triggers of
 * ingestion: a BEFORE trigger may change the row or skip it (false:
 * nothing written), AFTER triggers fire once it is written.
 */
static bool
insert_row(SwWriter *w, TupleTableSlot *row)
{
	next_row(w);
	row = own_row(w, row);
	if (w->trig_rri && w->trig_rri->ri_TrigDesc->trig_insert_before_row &&
		!before_row(w, CMD_INSERT, NULL, row))
		return false;
	if (w->complete_late)
		complete_row(w, row);
	form_current_row(w, row, w->new_slot, NULL);
	if (OidIsValid(w->key_index))
		check_key_free(w, w->new_slot);
	table_tuple_insert(w->current, w->new_slot, w->estate->es_output_cid, 0, NULL);
	note_block(w, w->new_slot);
	insert_index_entries(w, &w->new_slot, 1, false);
	if (w->trig_rri)
		after_row(w, CMD_INSERT, NULL, row);
	return true;
}

/*
 * Insert one row of the table now: its tid is sw_writer_last_tid().  On a
 * source with a key, a key that a current row has is a unique violation.
 */
void
sw_writer_insert(SwWriter *w, TupleTableSlot *row)
{
	(void) insert_row(w, row);
}

ItemPointer
sw_writer_last_tid(SwWriter *w)
{
	return &w->new_slot->tts_tid;
}

/*
 * The i-th slot of the append buffer, made on first use (a statement that
 * appends one row makes one).
 */
static TupleTableSlot *
append_slot(SwWriter *w, int i)
{
	MemoryContext old = MemoryContextSwitchTo(w->cxt);

	if (w->append_slots == NULL)
	{
		w->max_append_slots = 8;
		w->append_slots = palloc(sizeof(TupleTableSlot *) * w->max_append_slots);
		w->append_cxt = AllocSetContextCreate(w->cxt, "source_writes appended rows",
											  ALLOCSET_DEFAULT_SIZES);
	}
	if (i >= w->max_append_slots)
	{
		w->max_append_slots = Min(w->max_append_slots * 2, SW_APPEND_BUFFER_ROWS);
		w->append_slots = repalloc(w->append_slots,
								   sizeof(TupleTableSlot *) * w->max_append_slots);
	}
	if (w->nappend_slots <= i)
	{
		/* made in a subtransaction, kept beyond it */
		ResourceOwner save = CurrentResourceOwner;

		CurrentResourceOwner = w->owner;
		while (w->nappend_slots <= i)
			w->append_slots[w->nappend_slots++] = table_slot_create(w->current, NULL);
		CurrentResourceOwner = save;
	}
	MemoryContextSwitchTo(old);
	return w->append_slots[i];
}

/*
 * Add a row of the table to the rows written together: at most
 * SW_APPEND_BUFFER_ROWS rows or SW_APPEND_BUFFER_BYTES bytes are buffered
 * (the row is copied), then written with one multi-insert; rows that
 * ingestion's INSERT row triggers fire for are written one at a time, and
 * false says that a BEFORE trigger skipped the row.  On a source with a
 * key, a key that a current row has is a unique violation.
 */
bool
sw_writer_append(SwWriter *w, TupleTableSlot *row)
{
	TupleTableSlot *slot;

	/* INSERT row triggers need each row as it is written */
	if (w->trig_rri && (w->trig_rri->ri_TrigDesc->trig_insert_before_row ||
						w->trig_rri->ri_TrigDesc->trig_insert_after_row))
		return insert_row(w, row);
	if (w->nest_level != GetCurrentTransactionNestLevel())
		next_row(w);			/* which complains, unless allowed */
	slot = append_slot(w, w->nappended++);

	form_current_row(w, row, slot, NULL);
	if (OidIsValid(w->key_index))
		check_key_free(w, slot);
	w->appended_bytes += ExecFetchSlotHeapTuple(slot, true, NULL)->t_len;
	if (w->nappended == SW_APPEND_BUFFER_ROWS ||
		w->appended_bytes >= SW_APPEND_BUFFER_BYTES)
		sw_writer_flush(w);
	return true;
}

/*
 * Let a caller write in subtransactions of the one the writer was opened
 * in, each of which either commits or rolls back what it wrote (a worker
 * that retries a failed chunk a message at a time).  Our batch is made
 * now, outside them, so that a rolled-back subtransaction cannot take it
 * away; and the caller ends each subtransaction with sw_writer_sub_end(),
 * so that nothing buffered crosses its boundary.
 */
void
sw_writer_allow_subtransactions(SwWriter *w)
{
	(void) our_batch(w);
	w->deeper_ok = true;
}

/*
 * End the caller's subtransaction's writes: write what is buffered (it
 * commits), or drop it (it rolls back); and release the buffer pins taken
 * in it.  Called before the subtransaction ends, while it holds them.
 */
void
sw_writer_sub_end(SwWriter *w, bool commit)
{
	if (commit)
	{
		sw_writer_flush(w);
		flush_history(w);
	}
	/* no buffer pin may outlive the subtransaction that took it */
	for (int i = 0; i < w->nappended; i++)
		ExecClearTuple(w->append_slots[i]);
	w->nappended = 0;
	w->appended_bytes = 0;
	w->flushing = false;
	for (int i = 0; i < w->nhistory; i++)
		ExecClearTuple(w->history_slots[i]);
	w->nhistory = 0;
	ExecClearTuple(w->new_slot);
	ExecClearTuple(w->lock_slot);
	if (w->trig_rri)
	{
		ExecClearTuple(w->key_slot);
		ExecClearTuple(w->old_row);
		ExecClearTuple(w->own_row);
	}
	w->in_trigger = false;
	if (w->bistate)
		ReleaseBulkInsertStatePin(w->bistate);
}

/*
 * After an error: did writing the buffered appended rows raise it (rather
 * than the row being appended)?  Those may be rows of earlier messages.
 * (Not the buffered retractions, which flush_history() writes: only
 * callers that append ask.)
 */
bool
sw_writer_failed_flushing(SwWriter *w)
{
	return w->flushing;
}

/*
 * Append through the caller's bulk-insert state, which outlives the writer
 * (a worker's, across its batches): its ring of buffers keeps what the
 * worker touches of shared buffers small.
 */
void
sw_writer_use_bulk_state(SwWriter *w, BulkInsertState bistate)
{
	Assert(w->bistate == NULL);
	w->bistate = bistate;
	w->own_bistate = false;
}

/*
 * Write the appended rows, with one multi-insert in a memory context of
 * their own, and index them.
 */
void
sw_writer_flush(SwWriter *w)
{
	MemoryContext old;

	if (w->nappended == 0)
		return;

	/*
	 * A bulk-insert state for big writes (a COPY, a large INSERT ... SELECT),
	 * whose ring of buffers keeps them from flooding shared buffers; a few
	 * rows are not worth setting one up.
	 */
	if (w->bistate == NULL && w->nappended >= SW_APPEND_BUFFER_ROWS / 10)
	{
		old = MemoryContextSwitchTo(w->cxt);
		w->bistate = GetBulkInsertState();
		w->own_bistate = true;
		MemoryContextSwitchTo(old);
	}
	old = MemoryContextSwitchTo(w->append_cxt);
	w->flushing = true;
	table_multi_insert(w->current, w->append_slots, w->nappended,
					   w->estate->es_output_cid, 0, w->bistate);
	for (int i = 0; i < w->nappended; i++)
		note_block(w, w->append_slots[i]);
	insert_index_entries(w, w->append_slots, w->nappended, false);
	w->flushing = false;
	MemoryContextSwitchTo(old);
	for (int i = 0; i < w->nappended; i++)
		ExecClearTuple(w->append_slots[i]);
	w->nappended = 0;
	w->appended_bytes = 0;
	MemoryContextReset(w->append_cxt);
	if (w->own_estate)
		ResetPerTupleExprContext(w->estate);
}

/*
 * Write the collected retractions into the history heap, many rows per
 * page and WAL record, in their own memory context.  Without a bulk-insert
 * state: its small ring of buffers would make each retraction write pages
 * out and flush WAL as the history heap grows, while the history is what
 * later reads want cached.
 */
static void
flush_history(SwWriter *w)
{
	MemoryContext old;

	if (w->nhistory == 0)
		return;
	old = MemoryContextSwitchTo(w->history_cxt);
	table_multi_insert(w->history, w->history_slots, w->nhistory,
					   w->history_cid, 0, NULL);
	for (int i = 0; i < w->nhistory; i++)
		sw_block_ranges_add(w->history_blocks[i], w->history->rd_rel->relfilenode,
							ItemPointerGetBlockNumber(&w->history_slots[i]->tts_tid));
	for (int i = 0; i < w->nhistory && w->history_rri->ri_NumIndices > 0; i++)
		ExecInsertIndexTuples(w->history_rri, w->history_slots[i], w->estate,
							  false, false, NULL, NIL);
	MemoryContextSwitchTo(old);
	for (int i = 0; i < w->nhistory; i++)
		ExecClearTuple(w->history_slots[i]);
	w->nhistory = 0;
	MemoryContextReset(w->history_cxt);
}

/*
 * Write what is left and free the retraction buffers.
 */
static void
end_history(SwWriter *w)
{
	if (w->history_slots == NULL)
		return;
	flush_history(w);
	for (int i = 0; i < SW_HISTORY_BATCH_SIZE && w->history_slots[i]; i++)
		ExecDropSingleTupleTableSlot(w->history_slots[i]);
	MemoryContextDelete(w->history_cxt);
	w->history_slots = NULL;
}

/*
 * Write every retraction into the history heap as it is made, from now
 * on: AFTER triggers of the caller's statement read the log before the
 * writer is closed.
 */
void
sw_writer_write_history_now(SwWriter *w)
{
	w->buffer_history = false;
	flush_history(w);
}

/*
 * The history tuple of a current tuple that ends with "$batch": a copy
 * with "$retracted" appended, made without deforming it.  The data keeps
 * its alignment because both headers are MAXALIGNed; only a null bitmap
 * that needs one more byte can move it.
 */
static HeapTuple
append_retracted(SwWriter *w, HeapTuple current, int64 retracted)
{
	HeapTupleHeader from = current->t_data;
	TupleDesc	desc = RelationGetDescr(w->history);
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
 * Make what writing history rows needs, on first use, for the rest of the
 * writer's life.
 */
static void
open_history(SwWriter *w)
{
	TupleDesc	desc = RelationGetDescr(w->history);
	MemoryContext oldcxt;
	ResourceOwner save_owner;

	if (w->history_slots == NULL)
	{
		/* made on first use, for the rest of the writer's life */
		oldcxt = MemoryContextSwitchTo(w->cxt);
		w->history_slots = palloc0(sizeof(TupleTableSlot *) * SW_HISTORY_BATCH_SIZE);
		w->history_blocks = palloc(sizeof(SwBlockRanges *) * SW_HISTORY_BATCH_SIZE);
		w->history_values = palloc(sizeof(Datum) * desc->natts);
		w->history_isnull = palloc(sizeof(bool) * desc->natts);
		w->current_values = palloc(sizeof(Datum) * RelationGetDescr(w->current)->natts);
		w->current_isnull = palloc(sizeof(bool) * RelationGetDescr(w->current)->natts);
		w->row_values = palloc(sizeof(Datum) * Max(w->natts, 1));
		w->row_isnull = palloc(sizeof(bool) * Max(w->natts, 1));
		w->history_cxt = AllocSetContextCreate(w->cxt, "source_writes retractions",
											   ALLOCSET_DEFAULT_SIZES);
		w->history_rri = makeNode(ResultRelInfo);
		InitResultRelInfo(w->history_rri, w->history, 0, NULL, 0);
		save_owner = CurrentResourceOwner;
		CurrentResourceOwner = w->owner;
		ExecOpenIndices(w->history_rri, false);
		CurrentResourceOwner = save_owner;
		MemoryContextSwitchTo(oldcxt);
	}
}

/*
 * Hold a history tuple (made in history_cxt) to be written with the next
 * group of them, as of command cid.
 */
static void
add_history(SwWriter *w, HeapTuple tuple, CommandId cid)
{
	MemoryContext oldcxt;
	ResourceOwner save_owner;

	/* the slot owns the tuple, so that the multi-insert need not copy it */
	if (w->history_slots[w->nhistory] == NULL)
	{
		oldcxt = MemoryContextSwitchTo(w->cxt);
		save_owner = CurrentResourceOwner;
		CurrentResourceOwner = w->owner;
		w->history_slots[w->nhistory] =
			MakeSingleTupleTableSlot(RelationGetDescr(w->history), &TTSOpsHeapTuple);
		CurrentResourceOwner = save_owner;
		MemoryContextSwitchTo(oldcxt);
	}
	w->history_blocks[w->nhistory] = &w->blocks[SW_HISTORY_HEAP];
	ExecStoreHeapTuple(tuple, w->history_slots[w->nhistory++], true);
	w->history_cid = cid;
	if (w->nhistory == SW_HISTORY_BATCH_SIZE || !w->buffer_history)
		flush_history(w);
}

/*
 * A history tuple, in the current memory context, of the table's columns
 * in row_values and row_isnull, added by batch and retracted by
 * retracted, with where it came from (and its raw message) as the columns
 * of ours in a current tuple, from_values and from_isnull, have it.
 */
static HeapTuple
form_history(SwWriter *w, int64 batch, int64 retracted,
			 const Datum *from_values, const bool *from_isnull)
{
	const SwLayout *from = &w->current_layout;
	const SwLayout *to = &w->history_layout;
	Datum	   *values = w->history_values;
	bool	   *isnull = w->history_isnull;

	sw_to_hidden(to, w->natts, w->row_values, w->row_isnull, values, isnull);
	set_meta(values, isnull, to->batch, Int64GetDatum(batch), false);
	set_meta(values, isnull, to->retracted, Int64GetDatum(retracted), false);
	copy_meta(values, isnull, to->part, from_values, from_isnull, from->part);
	copy_meta(values, isnull, to->pos, from_values, from_isnull, from->pos);
	copy_meta(values, isnull, to->delivery, from_values, from_isnull, from->delivery);
	for (int i = 0; i < SW_NUM_RAW; i++)
		copy_meta(values, isnull, to->raw[i], from_values, from_isnull, from->raw[i]);
	return heap_form_tuple(RelationGetDescr(w->history), values, isnull);
}

/*
 * Record the retraction of a current tuple, which the caller deleted or
 * updated, in the history heap: false, and nothing, when this transaction
 * inserted it.  Retractions are collected and written in groups; closing
 * the writer writes the rest.
 */
static bool
retract(SwWriter *w, HeapTuple old, CommandId cid)
{
	int64		batch = inserted_by(w, old);
	int64		ours;
	MemoryContext oldcxt;
	HeapTuple	tuple;

	/* a row this transaction inserted leaves no history */
	if (sw_controller_wrote(RelationGetRelid(w->ftrel), batch))
		return false;
	ours = our_batch(w);
	open_history(w);

	oldcxt = MemoryContextSwitchTo(w->history_cxt);
	if (ends_with_batch(w, old) &&
		w->history_layout.retracted == w->current_layout.batch + 1)
		tuple = append_retracted(w, old, ours);
	else
	{
		/* columns were added later: the table's columns and ours move */
		heap_deform_tuple(old, RelationGetDescr(w->current),
						  w->current_values, w->current_isnull);
		sw_from_hidden(&w->current_layout, w->natts, w->current_values,
					   w->current_isnull, w->row_values, w->row_isnull);
		tuple = form_history(w, batch, ours, w->current_values, w->current_isnull);
	}
	MemoryContextSwitchTo(oldcxt);
	add_history(w, tuple, cid);
	return true;
}

/*
 * The trace of a tombstone that left none (its key had no row, or one that
 * this transaction added): a no-op row in the history, the key's columns
 * of the row that key_row() made in new_slot (the others NULL) and where
 * the tombstone came from, added and retracted by our batch.  Its count is
 * zero at every time, and readers that show rows leave it out (log.c); it
 * tells a version without edits that the stream wrote the key then.
 */
static void
write_noop(SwWriter *w, CommandId cid)
{
	const SwLayout *from = &w->current_layout;
	TupleTableSlot *key = w->new_slot;
	int64		ours = our_batch(w);
	MemoryContext oldcxt;
	HeapTuple	tuple;

	open_history(w);
	oldcxt = MemoryContextSwitchTo(w->history_cxt);
	slot_getallattrs(key);
	for (int i = 0; i < w->natts; i++)
		w->row_isnull[i] = true;
	for (int k = 0; k < w->nkeys; k++)
	{
		AttrNumber	a = w->key_attnums[k];

		/* the key index's columns are the table's, where the heap has them */
		for (int i = 0; i < w->natts; i++)
			if (sw_hidden_attnum(from, i + 1) == a)
			{
				w->row_values[i] = key->tts_values[a - 1];
				w->row_isnull[i] = key->tts_isnull[a - 1];
			}
	}
	for (int i = 0; i < RelationGetDescr(w->history)->natts; i++)
		w->history_isnull[i] = true;
	tuple = form_history(w, ours, ours, key->tts_values, key->tts_isnull);
	MemoryContextSwitchTo(oldcxt);
	add_history(w, tuple, cid);
}

/*
 * Update the current row at tid, whose tuple is old, to a new row of the
 * table, and retract the old one.  The result is table_tuple_update()'s:
 * on anything but TM_Ok nothing was written, and the caller decides, with
 * tmfd and lockmode, what to do about the concurrent change.  The new
 * version's tid is sw_writer_last_tid().
 */
TM_Result
sw_writer_update(SwWriter *w, ItemPointer tid, HeapTuple old,
				 TupleTableSlot *row, TM_FailureData *tmfd,
				 LockTupleMode *lockmode)
{
	CommandId	cid = w->estate->es_output_cid;
	bool		update_indexes;
	TM_Result	result;

	next_row(w);
	form_current_row(w, row, w->new_slot, old);
	if (OidIsValid(w->key_index))
		check_key_complete(w, w->new_slot);
	result = table_tuple_update(w->current, tid, w->new_slot, cid,
								w->estate->es_snapshot,
								w->estate->es_crosscheck_snapshot,
								true, tmfd, lockmode, &update_indexes);
	if (result != TM_Ok)
		return result;
	note_block(w, w->new_slot);
	if (update_indexes)
		insert_index_entries(w, &w->new_slot, 1, true);
	retract(w, old, cid);
	return TM_Ok;
}

/*
 * Delete the current row at tid, whose tuple is old, and retract it.  The
 * result is table_tuple_delete()'s, as for sw_writer_update().
 */
TM_Result
sw_writer_delete(SwWriter *w, ItemPointer tid, HeapTuple old,
				 TM_FailureData *tmfd)
{
	CommandId	cid = w->estate->es_output_cid;
	TM_Result	result;

	next_row(w);
	result = table_tuple_delete(w->current, tid, cid, w->estate->es_snapshot,
								w->estate->es_crosscheck_snapshot, true, tmfd,
								false);
	if (result == TM_Ok)
		retract(w, old, cid);
	return result;
}

/*
 * Under REPEATABLE READ and SERIALIZABLE, the current row of a key that an
 * upsert or a tombstone locked must be one the transaction's snapshot
 * sees: replacing a row that a concurrent transaction committed meanwhile
 * is a serialization failure, as for INSERT ... ON CONFLICT (see
 * ExecCheckTupleVisible()).  Our own rows may be newer than the snapshot.
 */
static void
check_key_visible(SwWriter *w)
{
	bool		isnull;
	TransactionId xmin;

	if (!IsolationUsesXactSnapshot() ||
		table_tuple_satisfies_snapshot(w->current, w->lock_slot, w->estate->es_snapshot))
		return;
	xmin = DatumGetTransactionId(slot_getsysattr(w->lock_slot,
												 MinTransactionIdAttributeNumber,
												 &isnull));
	if (!TransactionIdIsCurrentTransactionId(xmin))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to concurrent update")));
}

/*
 * Sources with a key: lock the current row of the key of a row (a current
 * row, in row), if there is one, in mode, into lock_slot, waiting for a
 * transaction that holds the key as INSERT ... ON CONFLICT does.  Returns
 * whether there was one, with its tid in *tid; false if the key was free
 * when looked at.
 */
static bool
lock_key(SwWriter *w, TupleTableSlot *row, ItemPointer tid, LockTupleMode mode)
{
	for (;;)
	{
		TM_FailureData tmfd;
		TM_Result	result;

		CHECK_FOR_INTERRUPTS();
		if (ExecCheckIndexConstraints(w->current_rri, row, w->estate, tid,
									  w->key_indexes))
			return false;

		result = table_tuple_lock(w->current, tid, w->estate->es_snapshot,
								  w->lock_slot, w->estate->es_output_cid,
								  mode, LockWaitBlock, 0, &tmfd);
		switch (result)
		{
			case TM_Ok:
				break;
			case TM_Updated:
			case TM_Deleted:
				if (IsolationUsesXactSnapshot())
					ereport(ERROR,
							(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
							 errmsg("could not serialize access due to concurrent update")));
				/* the key's row changed meanwhile: look again */
				continue;
			default:
				elog(ERROR, "unexpected result %u when locking the row of a key of source table \"%s\"",
					 result, RelationGetRelationName(w->ftrel));
		}
		check_key_visible(w);
		return true;
	}
}

/*
 * A BEFORE row trigger of an upsert's overwrite (update) or a tombstone
 * changed or deleted the key's row it locked: PostgreSQL's error, as
 * ExecUpdate() and ExecDelete() raise it.
 */
static void
report_self_modified(bool update)
{
	ereport(ERROR,
			(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
			 update
			 ? errmsg("tuple to be updated was already modified by an operation triggered by the current command")
			 : errmsg("tuple to be deleted was already modified by an operation triggered by the current command"),
			 errhint("Consider using an AFTER trigger instead of a BEFORE trigger to propagate changes to other rows.")));
}

/*
 * Delete the current row of a key that lock_key() locked, and retract it
 * (with a command id of its own, so that a row this writer wrote for the
 * same key just before is seen).  False if that left no history: this
 * transaction had added the row.
 */
static bool
delete_locked(SwWriter *w, ItemPointer tid)
{
	TM_FailureData tmfd;
	TM_Result	result;

	result = table_tuple_delete(w->current, tid, w->estate->es_output_cid,
								InvalidSnapshot, InvalidSnapshot, true, &tmfd,
								false);
	if (result == TM_SelfModified)
		report_self_modified(false);
	if (result != TM_Ok)
		elog(ERROR, "could not delete the locked row of a key of source table \"%s\"",
			 RelationGetRelationName(w->ftrel));
	return retract(w, ExecFetchSlotHeapTuple(w->lock_slot, false, NULL),
				   w->estate->es_output_cid);
}

/*
 * Update the current row of a key that lock_key() locked to new_slot, as
 * INSERT ... ON CONFLICT DO UPDATE does, and retract its old version: the
 * new version is the row's next one, which row locks, and UPDATE and
 * DELETE under READ COMMITTED, follow to as for a plain table's row.
 */
static void
update_locked(SwWriter *w, ItemPointer tid)
{
	TM_FailureData tmfd;
	LockTupleMode lockmode;
	bool		update_indexes;
	TM_Result	result;

	result = table_tuple_update(w->current, tid, w->new_slot, w->estate->es_output_cid,
								w->estate->es_snapshot, InvalidSnapshot, true,
								&tmfd, &lockmode, &update_indexes);
	if (result == TM_SelfModified)
		report_self_modified(true);
	if (result != TM_Ok)
		elog(ERROR, "could not update the locked row of a key of source table \"%s\"",
			 RelationGetRelationName(w->ftrel));
	note_block(w, w->new_slot);
	if (update_indexes)
		insert_index_entries(w, &w->new_slot, 1, true);
	retract(w, ExecFetchSlotHeapTuple(w->lock_slot, false, NULL),
			w->estate->es_output_cid);
}

/*
 * Upserts and tombstones: a source with a key, the appended rows written
 * (the key checks must see them), and the row as a current row, in
 * new_slot, with a complete key.
 */
static void
key_row(SwWriter *w, TupleTableSlot *row)
{
	if (!OidIsValid(w->key_index))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source table \"%s\" has no key",
						RelationGetRelationName(w->ftrel)),
				 errhint("Rows replace each other by key only in sources with envelope 'upsert'.")));
	sw_writer_flush(w);
	form_current_row(w, row, w->new_slot, NULL);
	check_key_complete(w, w->new_slot);
}

/*
 * Start a command of our own: rows written by earlier ones are seen by the
 * key checks and locks of the next.
 */
static void
next_command(SwWriter *w)
{
	next_row(w);
	CommandCounterIncrement();
	w->estate->es_output_cid = GetCurrentCommandId(true);
	if (w->own_estate)
		ResetPerTupleExprContext(w->estate);
}

/*
 * Upserts: after a BEFORE row trigger changed the row (its NEW), it must
 * keep its key, by the equality of the key's index (the row's message
 * named the key: its key's tombstone must find the row).  new_slot holds
 * the row as it was before the trigger, materialized.
 */
static void
check_key_kept(SwWriter *w, TupleTableSlot *row)
{
	TupleTableSlot *before = w->new_slot;
	TupleTableSlot *after = w->key_slot;
	Relation	index = NULL;

	for (int i = 0; i < w->current_rri->ri_NumIndices; i++)
		if (RelationGetRelid(w->current_rri->ri_IndexRelationDescs[i]) == w->key_index)
			index = w->current_rri->ri_IndexRelationDescs[i];
	Assert(index != NULL);
	form_current_row(w, row, after, NULL);
	slot_getallattrs(before);
	slot_getallattrs(after);
	for (int k = 0; k < w->nkeys; k++)
	{
		int			a = w->key_attnums[k] - 1;
		Oid			eq = get_opfamily_member(index->rd_opfamily[k], index->rd_opcintype[k],
											 index->rd_opcintype[k], BTEqualStrategyNumber);

		if (!after->tts_isnull[a] &&
			OidIsValid(eq) &&
			DatumGetBool(OidFunctionCall2Coll(get_opcode(eq), index->rd_indcollation[k],
											  before->tts_values[a],
											  after->tts_values[a])))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_DATA_CHANGE_VIOLATION),
				 errmsg("a BEFORE trigger cannot change the key of an ingested row of upsert source \"%s\"",
						RelationGetRelationName(w->ftrel)),
				 errdetail("A trigger changed key column \"%s\".",
						   NameStr(TupleDescAttr(RelationGetDescr(w->current),
												 a)->attname)),
				 errhint("An ingested row keeps the key of its message, so that the key's next message or tombstone finds it.")));
	}
}

/*
 * Sources with a key: make a row of the table the current row of its key.
 * The current row of the key, if there is one (whoever wrote it), is
 * locked FOR NO KEY UPDATE (the key stays), as INSERT ... ON CONFLICT DO
 * UPDATE locks it, updated to the row and retracted (update_locked());
 * otherwise the row is added, with a speculative insertion, as INSERT ...
 * ON CONFLICT does, so that a concurrent transaction that adds the same key
 * makes us look again rather than fail.
 *
 * Ingestion's row triggers see the upsert as MERGE would: an UPDATE of the
 * key's current row (OLD) to the row (NEW) when the key has one, an INSERT
 * of the row when it has none.  A BEFORE trigger may change the row (not
 * its key) or skip it: then nothing is written, and the key keeps its row.
 * If a concurrent transaction adds the key after a BEFORE INSERT trigger
 * fired, the BEFORE UPDATE triggers fire too, on its row, as INSERT ... ON
 * CONFLICT DO UPDATE fires both.  Returns false if a trigger skipped it.
 */
bool
sw_writer_upsert(SwWriter *w, TupleTableSlot *row)
{
	TriggerDesc *td = w->trig_rri ? w->trig_rri->ri_TrigDesc : NULL;
	bool		before_insert = td && td->trig_insert_before_row;
	bool		before_update = td && td->trig_update_before_row;

	row = own_row(w, row);
	key_row(w, row);
	for (;;)
	{
		ItemPointerData tid;
		uint32		token;
		bool		conflict = false;
		bool		found;
		HeapTuple	old = NULL;

		next_command(w);
		found = lock_key(w, w->new_slot, &tid, LockTupleNoKeyExclusive);
		if (found && td)
			old = old_tuple(w);
		if (found ? before_update : before_insert)
		{
			ExecMaterializeSlot(w->new_slot);
			if (!before_row(w, found ? CMD_UPDATE : CMD_INSERT, old, row))
				return false;
			check_key_kept(w, row);
			/* each fires once */
			if (found)
				before_update = false;
			else
				before_insert = false;
		}
		if (w->complete_late)
			complete_row(w, row);
		if (td)
			form_current_row(w, row, w->new_slot, NULL);	/* as the triggers left it */
		if (found)
		{
			update_locked(w, &tid);
			if (td)
				after_row(w, CMD_UPDATE, old, row);
			return true;
		}

		token = SpeculativeInsertionLockAcquire(GetCurrentTransactionId());
		table_tuple_insert_speculative(w->current, w->new_slot,
									   w->estate->es_output_cid, 0, NULL, token);
		note_block(w, w->new_slot);
		index_rows(w, &w->new_slot, 1, false, &conflict);
		table_tuple_complete_speculative(w->current, w->new_slot, token, !conflict);
		SpeculativeInsertionLockRelease(GetCurrentTransactionId());
		if (conflict)
			continue;			/* somebody added the key meanwhile: take it
								 * from them */
		if (td)
			after_row(w, CMD_INSERT, NULL, row);
		return true;
	}
}

/*
 * Sources with a key: retract the current row of the key of a row of the
 * table, if there is one (a tombstone); returns whether it did.  For
 * ingestion's row triggers, a DELETE of that row: a BEFORE trigger may skip
 * it, and the key keeps its row.  A tombstone that leaves nothing else in
 * the log (the key has no row, a person deleted it or moved it to another
 * key, or this transaction added it) leaves a no-op row (write_noop()):
 * the stream wrote the key then, as a version without edits must know.
 */
bool
sw_writer_tombstone(SwWriter *w, TupleTableSlot *key)
{
	ItemPointerData tid;
	HeapTuple	old = NULL;
	bool		retracted;

	key_row(w, key);
	next_command(w);
	if (!lock_key(w, w->new_slot, &tid, LockTupleExclusive))
	{
		write_noop(w, w->estate->es_output_cid);
		return false;
	}
	if (w->trig_rri)
	{
		old = old_tuple(w);
		if (w->trig_rri->ri_TrigDesc->trig_delete_before_row &&
			!before_row(w, CMD_DELETE, old, NULL))
			return false;
	}
	retracted = delete_locked(w, &tid);
	if (!retracted)
		write_noop(w, w->estate->es_output_cid);
	if (w->trig_rri)
		after_row(w, CMD_DELETE, old, NULL);
	return true;
}

/*
 * Retract every current row.  The caller locked the table against other
 * writers (TRUNCATE takes ACCESS EXCLUSIVE); the rows are read with a fresh
 * snapshot, so that none committed since the caller's snapshot was taken
 * is lost without a trace.
 */
void
sw_writer_truncate(SwWriter *w)
{
	CommandId	cid = w->estate->es_output_cid;
	MemoryContext row_cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "source_writes truncated row",
												  ALLOCSET_SMALL_SIZES);
	SwRowScan	rs;
	TupleTableSlot *slot;

	sw_rows_begin(&rs, w->current);
	while ((slot = sw_rows_next(&rs)) != NULL)
	{
		TM_FailureData tmfd;
		MemoryContext old;

		MemoryContextReset(row_cxt);
		old = MemoryContextSwitchTo(row_cxt);
		if (table_tuple_delete(w->current, &slot->tts_tid, cid, rs.snapshot,
							   InvalidSnapshot, true, &tmfd, false) != TM_Ok)
			elog(ERROR, "could not delete a row of source table \"%s\" while truncating it",
				 RelationGetRelationName(w->ftrel));
		retract(w, ExecFetchSlotHeapTuple(slot, false, NULL), cid);
		MemoryContextSwitchTo(old);
	}
	sw_rows_end(&rs);
	MemoryContextDelete(row_cxt);
}

/* the offsets of a partition that a batch consumed */
typedef struct SwConsumed
{
	int32		part;
	int64		from;
	int64		to;
	int64		lost;			/* of them, deleted before they were read */
} SwConsumed;

static void
advance_progress(Oid relid, void *arg)
{
	SwConsumed *c = arg;

	sw_catalog_advance_progress(relid, c->part, c->from, c->to, c->lost);
}

/*
 * Record that our batch consumed the offsets [from, to) of a partition:
 * when it is stamped, the partition's stored progress must be at from (or
 * the partition new), and moves to to, in the same transaction; otherwise
 * another writer consumed them, and the commit fails.  The batch is made
 * if nothing was written yet: offsets count as consumed even when they
 * brought no row.
 */
void
sw_writer_consumed(SwWriter *w, int32 part, int64 from, int64 to)
{
	sw_writer_consumed_lost(w, part, from, to, 0);
}

/*
 * The same, where lost of the offsets were deleted by the brokers before
 * they could be read: counted in the partition's progress.
 */
void
sw_writer_consumed_lost(SwWriter *w, int32 part, int64 from, int64 to, int64 lost)
{
	SwConsumed *c = MemoryContextAlloc(TopTransactionContext, sizeof(SwConsumed));

	c->part = part;
	c->from = from;
	c->to = to;
	c->lost = lost;
	(void) our_batch(w);
	sw_controller_on_commit(RelationGetRelid(w->ftrel), advance_progress, c);
}

Relation
sw_writer_current(SwWriter *w)
{
	return w->current;
}

bool
sw_writer_has_key(SwWriter *w)
{
	return OidIsValid(w->key_index);
}
