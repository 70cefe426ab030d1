/*-------------------------------------------------------------------------
 *
 * storage.c
 *		  The hidden relations that hold a source table's rows, and keeping
 *		  them in step with the foreign table
 *
 * See doc/internals.md, "Storage layout".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/storage.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/heap.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_am.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "catalog/toasting.h"
#include "commands/comment.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "rewrite/rewriteHandler.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/varlena.h"

#include "log/log.h"
#include "options/options.h"

static Oid	create_hidden_relation(Relation ftrel, const char *prefix,
								   uint32 tag, bool history, SwKind kind,
								   bool raw);
static List *sync_hidden_relation(Relation ftrel, Oid hiddenid, SwKind kind,
								  bool raw, List *retyped);
static void follow_key_renames(Relation ftrel, Oid hiddenid);
static void sync_key_index(Relation ftrel, Oid current_rel, SwSourceTable *st);
static void follow_retention(Oid relid, int64 retain_ms);
static bool is_own_index(Oid hiddenid, const char *indexname);
static bool storage_in_step(Relation ftrel, const SwSource *source,
							SwSourceTable *st);

/*
 * A source table's hidden relations hold a few more columns than it has
 * (SW_HISTORY_META at most), within PostgreSQL's limit.
 */
static void
check_column_count(Relation ftrel, int natts)
{
	if (natts + SW_HISTORY_META > MaxHeapAttributeNumber)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_COLUMNS),
				 errmsg("source table \"%s\" has too many columns",
						RelationGetRelationName(ftrel)),
				 errdetail("A source table can have at most %d columns, dropped ones included, because its storage keeps %d columns of its own.",
						   MaxHeapAttributeNumber - SW_HISTORY_META, SW_HISTORY_META)));
}

/*
 * How many columns of raw messages a source's storage has: those of
 * retain_raw, from when it was turned on (they stay when it is turned
 * off); an ALTER gives both heaps the same columns, so the history's say.
 */
int
sw_storage_raw_columns(const SwSource *source)
{
	Relation	history = table_open(source->history_rel, AccessShareLock);
	SwLayout	layout;
	int			nraw = 0;

	if (sw_find_layout(RelationGetDescr(history), &layout))
		for (int i = 0; i < SW_NUM_RAW; i++)
			nraw += layout.raw[i] != InvalidAttrNumber;
	table_close(history, AccessShareLock);
	return nraw;
}

/*
 * ... and with retain_raw, the columns of the raw message too.
 */
static void
check_raw_column_count(Relation ftrel, SwSourceTable *st)
{
	int			nraw = 0;
	SwSource	source;

	/* those it keeps, or kept once (they stay when it is turned off) */
	if (!st->retain_raw)
	{
		if (!sw_source_lookup(RelationGetRelid(ftrel), &source))
			return;
		nraw = sw_storage_raw_columns(&source);
		if (nraw == 0)
			return;
	}
	else
		for (int i = 0; i < SW_NUM_RAW; i++)
			nraw += sw_raw_column_of(st->kind, i);
	if (RelationGetDescr(ftrel)->natts + SW_HISTORY_META + nraw > MaxHeapAttributeNumber)
		ereport(ERROR,
				(errcode(ERRCODE_TOO_MANY_COLUMNS),
				 errmsg("source table \"%s\" has too many columns to keep raw messages",
						RelationGetRelationName(ftrel)),
				 errdetail("With retain_raw (or once it was on), a source table can have at most %d columns, dropped ones included, because its storage keeps %d columns of its own.",
						   MaxHeapAttributeNumber - SW_HISTORY_META - nraw,
						   SW_HISTORY_META + nraw)));
}

/*
 * Make the hidden relations and the catalog row of a source table match
 * the foreign table, creating them if it is new (but in a restore).  Called at the end of any
 * command that created or altered the table, with the names of the columns
 * whose type the command changed; errors abort the command, so nothing
 * half-done remains.  Returns the attnums of the columns added to a table
 * that existed before, which its current rows have no values in yet (see
 * sw_storage_fill_added()).
 */
List *
sw_storage_sync(Oid relid, List *retyped)
{
	Relation	ftrel = relation_open(relid, AccessShareLock);
	SwSource	source;
	SwSourceTable *st;
	bool		exists = sw_source_lookup(relid, &source);
	List	   *added;

	check_column_count(ftrel, RelationGetDescr(ftrel)->natts);
	if (exists)
		follow_key_renames(ftrel, source.current_rel);

	/* every option and column must make sense before anything is stored */
	st = sw_source_table(ftrel);
	check_raw_column_count(ftrel, st);

	/* ALTER ... SET SCHEMA takes the table's indexes along */
	if (exists)
		sw_storage_place_indexes(relid, source.current_rel, false);

	/*
	 * A table that a restore creates (pg_dump's scripts turn
	 * check_function_bodies off) gets no storage now: the restore brings it,
	 * with the table's catalog row (fdw/restore.c).  Storage made now could be
	 * ingested into before that, and would be dropped then.
	 */
	if (!exists && !check_function_bodies)
	{
		relation_close(ftrel, NoLock);
		return NIL;
	}

	/*
	 * Most commands hold the table ACCESS EXCLUSIVE already; those that take
	 * a weaker lock change nothing the storage follows, and leave it as it
	 * is without a stronger lock (raising it could deadlock with readers).
	 * A column whose type changed to a domain over the same base type leaves
	 * the storage as it is too, but its rows must be checked.
	 */
	if (exists && retyped == NIL && source.kind == st->kind &&
		storage_in_step(ftrel, &source, st))
	{
		follow_retention(relid, st->retain_history_ms);
		relation_close(ftrel, NoLock);
		return NIL;
	}
	LockRelationOid(relid, AccessExclusiveLock);

	if (!exists)
	{
		uint32		tag;
		SwFrontiers frontiers;

		if (!pg_strong_random(&tag, sizeof(tag)))
			tag = (uint32) random();
		source.relid = relid;
		source.kind = st->kind;
		source.current_rel = create_hidden_relation(ftrel, "current", tag, false,
													st->kind, st->retain_raw);
		source.history_rel = create_hidden_relation(ftrel, "history", tag, true,
													st->kind, st->retain_raw);
		/* nothing is written before creation: both start now */
		frontiers.upper = frontiers.since = sw_now_ms();
		frontiers.retain = st->retain_history_ms;
		sw_catalog_insert(&source, &frontiers);
		CommandCounterIncrement();
	}
	else if (source.kind != st->kind)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot turn %s source table \"%s\" into a %s source table",
						sw_kind_name(source.kind), RelationGetRelationName(ftrel),
						sw_kind_name(st->kind)),
				 errdetail("The type of a source's server cannot change while it has source tables."),
				 errhint("Create a new server of the other type and new source tables on it.")));
	else
	{
		sw_storage_depend(relid, source.current_rel);
		sw_storage_depend(relid, source.history_rel);
	}

	added = sync_hidden_relation(ftrel, source.current_rel, st->kind,
								 st->retain_raw, retyped);
	(void) sync_hidden_relation(ftrel, source.history_rel, st->kind,
								st->retain_raw, NIL);
	sync_key_index(ftrel, source.current_rel, st);
	if (exists)
		follow_retention(relid, st->retain_history_ms);

	relation_close(ftrel, NoLock);
	return exists ? added : NIL;
}

/* rows given values in added columns, written together */
#define SW_FILL_CHUNK		1000

/* a current row and its new version, to be written */
typedef struct SwFilledRow
{
	ItemPointerData tid;
	HeapTuple	old;			/* the current tuple, copied */
	HeapTuple	row;			/* the new version, a row of the table */
} SwFilledRow;

/*
 * Write the new versions of filled rows, with a writer of origin 'system'
 * for the role that runs the command.  What the writer allocates is made
 * in cxt, which is reset afterwards: a table of any size is filled in the
 * same memory.
 */
static void
write_filled(Relation ftrel, SwFilledRow *rows, int n, MemoryContext cxt)
{
	SwWriter   *writer;
	TupleTableSlot *slot;
	MemoryContext old;

	if (n == 0)
		return;
	old = MemoryContextSwitchTo(cxt);
	writer = sw_writer_open(ftrel, SW_ORIGIN_SYSTEM, GetUserId(), NULL);
	slot = MakeSingleTupleTableSlot(RelationGetDescr(ftrel), &TTSOpsHeapTuple);
	for (int i = 0; i < n; i++)
	{
		TM_FailureData tmfd;
		LockTupleMode lockmode;

		ExecStoreHeapTuple(rows[i].row, slot, false);
		if (sw_writer_update(writer, &rows[i].tid, rows[i].old, slot,
							 &tmfd, &lockmode) != TM_Ok)
			elog(ERROR, "could not update a row of source table \"%s\" while filling its new columns",
				 RelationGetRelationName(ftrel));
	}
	ExecDropSingleTupleTableSlot(slot);
	sw_writer_close(writer);
	MemoryContextSwitchTo(old);
	MemoryContextReset(cxt);
}

/*
 * Give the current rows of a source table the values that a plain table's
 * rows get in columns added to it (by ALTER TABLE ... ADD COLUMN, which
 * leaves a foreign table's rows alone): the column's default (a volatile
 * one evaluated for each row, as a plain table's rewrite does), its
 * generated expression, the next values of its identity sequence, or the
 * default of its domain, checked against the domain's constraints.  Rows
 * are numbered and evaluated in the heap's order, as ALTER TABLE's rewrite
 * does, and as the role that runs the command, as ALTER TABLE evaluates
 * them.
 *
 * Changing the rows changes the table's contents, so it is a write like any
 * other, in the log: a batch of origin 'system', by the role that ran the
 * command, that retracts each row (its history keeps the added columns
 * null: before the command, the row had no such value) and adds its new
 * version.  The log thus still consolidates to the table, and reads as of
 * an earlier time show the rows as they were then.  A row that gets null in
 * every added column is unchanged, and not written.  No triggers fire, as
 * none fire for a plain table's rewrite.  The command holds the table
 * ACCESS EXCLUSIVE: no other writer is in progress.
 */
void
sw_storage_fill_added(Oid relid, List *attnums)
{
	Relation	ftrel;
	TupleDesc	desc;
	EState	   *estate;
	ExprContext *econtext;
	List	   *targets = NIL;	/* attnums that get a value ... */
	List	   *exprs = NIL;	/* ... from these */
	List	   *generated = NIL;	/* attnums of generated columns ... */
	List	   *generated_exprs = NIL;	/* ... and their expressions */
	SwSource	source;
	Relation	current;
	SwLayout	layout;
	SwRowScan	rs;
	TupleTableSlot *hidden;
	TupleTableSlot *row;
	SwFilledRow *filled;
	int			nfilled = 0;
	MemoryContext chunk_cxt;
	MemoryContext write_cxt;
	ListCell   *lc;

	if (attnums == NIL)
		return;
	ftrel = relation_open(relid, AccessExclusiveLock);
	desc = RelationGetDescr(ftrel);
	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);

	foreach(lc, attnums)
	{
		AttrNumber	k = lfirst_int(lc);
		Form_pg_attribute att = TupleDescAttr(desc, k - 1);
		Expr	   *expr = (Expr *) build_column_default(ftrel, k);

		if (expr == NULL && DomainHasConstraints(att->atttypid))
		{
			/* a null that the domain may refuse, as ALTER TABLE checks it */
			int32		basetypmod = att->atttypmod;
			Oid			basetype = getBaseTypeAndTypmod(att->atttypid, &basetypmod);

			expr = (Expr *) makeNullConst(basetype, basetypmod,
										  get_typcollation(basetype));
			expr = (Expr *) coerce_to_target_type(NULL, (Node *) expr,
												  basetype, att->atttypid,
												  att->atttypmod, COERCION_ASSIGNMENT,
												  COERCE_IMPLICIT_CAST, -1);
		}
		if (expr == NULL)
			continue;
		expr = expression_planner(expr);
		if (att->attgenerated)
		{
			generated = lappend_int(generated, k);
			generated_exprs = lappend(generated_exprs, ExecPrepareExpr(expr, estate));
		}
		else
		{
			targets = lappend_int(targets, k);
			exprs = lappend(exprs, ExecPrepareExpr(expr, estate));
		}
	}
	if (targets == NIL && generated == NIL)
	{
		FreeExecutorState(estate);
		relation_close(ftrel, NoLock);
		return;
	}

	sw_source_require(relid, &source);
	current = table_open(source.current_rel, AccessExclusiveLock);
	sw_storage_layout(ftrel, current, &layout);
	row = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	filled = palloc(sizeof(SwFilledRow) * SW_FILL_CHUNK);
	chunk_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes filled rows",
									  ALLOCSET_DEFAULT_SIZES);
	write_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes filling writer",
									  ALLOCSET_DEFAULT_SIZES);
	sw_rows_begin(&rs, current);
	while ((hidden = sw_rows_next(&rs)) != NULL)
	{
		bool		changed = false;
		MemoryContext old;
		ListCell   *ec;

		ResetExprContext(econtext);
		ExecClearTuple(row);
		slot_getallattrs(hidden);
		sw_from_hidden(&layout, desc->natts, hidden->tts_values,
					   hidden->tts_isnull, row->tts_values, row->tts_isnull);
		ExecStoreVirtualTuple(row);
		econtext->ecxt_scantuple = row;

		/* defaults first; generated columns then see them, as on INSERT */
		for (int pass = 0; pass < 2; pass++)
		{
			List	   *cols = pass == 0 ? targets : generated;
			List	   *states = pass == 0 ? exprs : generated_exprs;

			forboth(lc, cols, ec, states)
			{
				AttrNumber	k = lfirst_int(lc);

				row->tts_values[k - 1] = ExecEvalExprSwitchContext(lfirst(ec), econtext,
																   &row->tts_isnull[k - 1]);
				changed |= !row->tts_isnull[k - 1];
			}
		}
		if (!changed)
			continue;

		old = MemoryContextSwitchTo(chunk_cxt);
		filled[nfilled].tid = hidden->tts_tid;
		filled[nfilled].old = ExecCopySlotHeapTuple(hidden);
		filled[nfilled].row = heap_form_tuple(desc, row->tts_values, row->tts_isnull);
		MemoryContextSwitchTo(old);
		if (++nfilled == SW_FILL_CHUNK)
		{
			write_filled(ftrel, filled, nfilled, write_cxt);
			nfilled = 0;
			MemoryContextReset(chunk_cxt);
		}
	}
	write_filled(ftrel, filled, nfilled, write_cxt);
	sw_rows_end(&rs);
	MemoryContextDelete(write_cxt);
	MemoryContextDelete(chunk_cxt);
	ExecDropSingleTupleTableSlot(row);
	FreeExecutorState(estate);
	table_close(current, NoLock);
	relation_close(ftrel, NoLock);
	CommandCounterIncrement();
}

/*
 * since follows upper - retain_history, with the retention stored in the
 * source's catalog row (so that a snapshot sees since and the retention it
 * follows together).  When retain_history changes, store the since that
 * the old retention has reached along with the new retention: since never
 * goes back, and a source nobody writes to follows its new retention at
 * once.
 */
static void
follow_retention(Oid relid, int64 retain_ms)
{
	SwFrontiers frontiers;

	if (!sw_catalog_stored_frontiers(relid, &frontiers) ||
		frontiers.retain == retain_ms ||
		!sw_catalog_frontiers(relid, GetLatestSnapshot(), &frontiers))
		return;
	sw_catalog_set_since(relid, frontiers.since, retain_ms);
	CommandCounterIncrement();
}

/*
 * Forget a dropped source table: drop what is left of its hidden relations
 * (normally nothing: they went with it through their internal dependency),
 * then its catalog row and batches.
 */
void
sw_storage_forget(Oid relid)
{
	SwSource	source;

	if (!sw_source_lookup(relid, &source))
		return;
	for (int i = 0; i < 2; i++)
	{
		Oid			hidden = i == 0 ? source.current_rel : source.history_rel;
		ObjectAddress addr;

		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(hidden)))
			continue;
		ObjectAddressSet(addr, RelationRelationId, hidden);
		performDeletion(&addr, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
	}
	sw_catalog_delete(relid);
}

/*
 * Does a hidden relation depend internally on its table?
 */
static bool
has_dependency(Oid relid, Oid hiddenid)
{
	Relation	depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	bool		found = false;

	ScanKeyInit(&keys[0], Anum_pg_depend_classid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_objid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(hiddenid));
	scan = systable_beginscan(depend, DependDependerIndexId, true, NULL, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

		if (dep->refclassid == RelationRelationId && dep->refobjid == relid &&
			dep->deptype == DEPENDENCY_INTERNAL)
			found = true;
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);
	return found;
}

/*
 * Record the internal dependency of a hidden relation on its table, unless
 * it is there.
 */
void
sw_storage_depend(Oid relid, Oid hiddenid)
{
	ObjectAddress hidden;
	ObjectAddress table;

	if (has_dependency(relid, hiddenid))
		return;
	ObjectAddressSet(hidden, RelationRelationId, hiddenid);
	ObjectAddressSet(table, RelationRelationId, relid);
	recordDependencyOn(&hidden, &table, DEPENDENCY_INTERNAL);
	CommandCounterIncrement();
}

/*
 * Record the internal dependencies of the hidden relations of the sources
 * of the database where they are missing: pg_upgrade does not carry them.
 * (pg_dump --binary-upgrade dumps no pg_depend rows, and the upgrade brings
 * the extension's catalog back as files, not as rows that the restore
 * trigger of fdw/restore.c would see.)  A source that somebody holds locked is
 * left for the next call: returns false if any was.  The caller is in a
 * transaction, with an active snapshot.
 */
bool
sw_storage_restore_dependencies(void)
{
	List	   *sources = sw_catalog_sources(InvalidOid);
	ListCell   *lc;
	bool		complete = true;
	int			recorded = 0;

	foreach(lc, sources)
	{
		SwSource   *source = lfirst(lc);
		Oid			hidden[2] = {source->current_rel, source->history_rel};

		if (has_dependency(source->relid, hidden[0]) &&
			has_dependency(source->relid, hidden[1]))
			continue;

		/* the table and its storage, that nobody drops them meanwhile */
		if (!ConditionalLockRelationOid(source->relid, AccessShareLock))
		{
			complete = false;
			continue;
		}
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source->relid)))
			continue;
		for (int i = 0; i < 2; i++)
		{
			if (!ConditionalLockRelationOid(hidden[i], AccessShareLock))
			{
				complete = false;
				continue;
			}
			if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(hidden[i])) ||
				has_dependency(source->relid, hidden[i]))
				continue;
			sw_storage_depend(source->relid, hidden[i]);
			recorded++;
			/* pg_upgrade made the user's indexes beside the heap */
			if (i == 0 &&
				!sw_storage_place_indexes(source->relid, hidden[0], true))
				complete = false;
		}
	}
	if (recorded > 0)
		ereport(LOG,
				(errmsg_plural("recorded the dependency of %d hidden relation on its source table",
							   "recorded the dependencies of %d hidden relations on their source tables",
							   recorded, recorded),
				 errdetail("pg_upgrade does not carry them.")));
	return complete;
}

/*
 * Give the storage of a source made before 0.3, which the update could not
 * alter while a worker wrote it, the columns of 0.3, unless somebody holds
 * the table (the supervisor tries again).  True if it has them.
 */
bool
sw_storage_complete(Oid relid)
{
	SwSource	source;
	bool		complete = true;

	if (!ConditionalLockRelationOid(relid, AccessShareLock))
		return false;
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) ||
		!sw_source_lookup(relid, &source))
		return true;
	for (int i = 0; i < 2 && complete; i++)
	{
		Relation	hidden = try_relation_open(i == 0 ? source.current_rel : source.history_rel,
											   AccessShareLock);
		SwLayout	layout;

		if (hidden == NULL)
			return true;
		complete = !sw_find_layout(RelationGetDescr(hidden), &layout) ||
			sw_layout_complete(&layout, source.kind);
		relation_close(hidden, AccessShareLock);
	}
	if (complete)
		return true;
	/* as ALTER FOREIGN TABLE would, if nobody is in it */
	if (!ConditionalLockRelationOid(relid, AccessExclusiveLock))
		return false;
	(void) sw_storage_sync(relid, NIL);
	ereport(LOG,
			(errmsg("gave the storage of source table \"%s\" the columns of where its rows came from",
					get_rel_name(relid))));
	return true;
}

/*
 * The source table whose current heap hiddenid is, or InvalidOid: found
 * through the heap's internal dependency on its table, and checked against
 * the table's catalog row.  A heap that a restore brought and no table has
 * adopted yet (restore.c), or whose dependency pg_upgrade did not carry,
 * has none.
 */
Oid
sw_storage_source_of_current(Oid hiddenid)
{
	Relation	depend;
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			relid = InvalidOid;
	SwSource	source;

	if (get_rel_namespace(hiddenid) != get_namespace_oid(SW_INTERNAL_SCHEMA, true))
		return InvalidOid;
	depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyInit(&keys[0], Anum_pg_depend_classid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_objid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(hiddenid));
	scan = systable_beginscan(depend, DependDependerIndexId, true, NULL, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

		if (dep->refclassid == RelationRelationId &&
			dep->deptype == DEPENDENCY_INTERNAL)
			relid = dep->refobjid;
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);

	if (!OidIsValid(relid) || !sw_is_source_table(relid) ||
		!sw_source_lookup(relid, &source) || source.current_rel != hiddenid)
		return InvalidOid;
	return relid;
}

/*
 * pg_upgrade restores the indexes of a current heap before the catalog
 * rows and dependencies that say whose heap it is, and needs each index
 * in the schema it had.  So a current heap that has a user's index says
 * whose it is in its comment, which pg_dump --binary-upgrade carries, with
 * the OIDs it keeps.
 */
#define SW_CURRENT_COMMENT	"current rows of source table %u"

/*
 * Say in the comment of a current heap whose it is, unless it does.
 */
void
sw_storage_mark_current(Oid relid, Oid hiddenid)
{
	char	   *comment = GetComment(hiddenid, RelationRelationId, 0);
	char	   *wanted = psprintf(SW_CURRENT_COMMENT, relid);

	if (comment != NULL && strcmp(comment, wanted) == 0)
		return;
	CreateComments(hiddenid, RelationRelationId, 0, wanted);
	CommandCounterIncrement();
}

/*
 * The source table that the comment of a current heap names, if it is one;
 * else InvalidOid.  For pg_upgrade only, which keeps OIDs.
 */
Oid
sw_storage_marked_source(Oid hiddenid)
{
	char	   *comment;
	unsigned int relid;
	char		rest;

	if (get_rel_namespace(hiddenid) != get_namespace_oid(SW_INTERNAL_SCHEMA, true))
		return InvalidOid;
	comment = GetComment(hiddenid, RelationRelationId, 0);
	if (comment == NULL ||
		sscanf(comment, SW_CURRENT_COMMENT "%c", &relid, &rest) != 1 ||
		!sw_is_source_table((Oid) relid))
		return InvalidOid;
	return (Oid) relid;
}

/*
 * Is this index of a current heap one that we make (the key index of an
 * upsert source, or a copy that REINDEX CONCURRENTLY makes of it)?  Those
 * stay beside the heap.
 */
static bool
is_own_index(Oid hiddenid, const char *indexname)
{
	char		name[NAMEDATALEN];
	char	   *hidden_name = get_rel_name(hiddenid);

	if (hidden_name == NULL)
		return false;
	sw_key_index_name(hidden_name, name);
	return strncmp(indexname, name, strlen(name)) == 0;
}

/*
 * Is name one that we keep for our own indexes of this current heap?
 */
bool
sw_storage_reserved_index_name(Oid hiddenid, const char *name)
{
	return is_own_index(hiddenid, name);
}

/*
 * A user's index of a source table is an index of its current heap whose
 * pg_class row is in the table's schema, so that it is named, dropped and
 * altered as the index of a plain table is.  Move one there, with
 * PostgreSQL's error if the schema has a relation of that name.  The
 * caller holds the index locked, and has made its pg_class row visible.
 */
void
sw_storage_place_index(Oid relid, Oid hiddenid, Oid indexid)
{
	Oid			nsp = get_rel_namespace(relid);
	Oid			old = get_rel_namespace(indexid);
	char	   *name = get_rel_name(indexid);
	Relation	classRel;
	ObjectAddresses *moved;

	if (name == NULL || is_own_index(hiddenid, name))
		return;
	sw_storage_mark_current(relid, hiddenid);
	if (old == nsp)
		return;
	classRel = table_open(RelationRelationId, RowExclusiveLock);
	moved = new_object_addresses();
	AlterRelationNamespaceInternal(classRel, indexid, old, nsp, false, moved);
	free_object_addresses(moved);
	table_close(classRel, RowExclusiveLock);
	CommandCounterIncrement();
}

/*
 * Put the user's indexes of a source table in the table's schema: after
 * ALTER ... SET SCHEMA, and when a restore or an upgrade gives a table its
 * heap back.  With nowait, an index somebody holds locked is left for
 * later: returns false if any was.
 */
bool
sw_storage_place_indexes(Oid relid, Oid hiddenid, bool nowait)
{
	Relation	heap;
	List	   *indexes;
	ListCell   *lc;
	Oid			nsp = get_rel_namespace(relid);
	bool		complete = true;

	heap = try_relation_open(hiddenid, AccessShareLock);
	if (heap == NULL)
		return true;
	indexes = RelationGetIndexList(heap);
	foreach(lc, indexes)
	{
		Oid			indexid = lfirst_oid(lc);
		char	   *name = get_rel_name(indexid);

		if (name == NULL || get_rel_namespace(indexid) == nsp ||
			is_own_index(hiddenid, name))
			continue;
		if (nowait && !ConditionalLockRelationOid(indexid, AccessExclusiveLock))
		{
			complete = false;
			continue;
		}
		if (!nowait)
			LockRelationOid(indexid, AccessExclusiveLock);
		sw_storage_place_index(relid, hiddenid, indexid);
	}
	relation_close(heap, AccessShareLock);
	return complete;
}

/*
 * The unique index on the key columns of an upsert source, or InvalidOid.
 */
static Oid
key_index(Relation current)
{
	char		name[NAMEDATALEN];

	sw_key_index_name(RelationGetRelationName(current), name);
	return get_relname_relid(name, RelationGetNamespace(current));
}

/* error context while the key index of an upsert source is built */
static void
key_index_error_callback(void *arg)
{
	errcontext("while making the key of upsert source \"%s\"", (const char *) arg);
}

/*
 * Refuse to make a key of columns that some current row has no value in.
 */
static void
check_keys_not_null(Relation ftrel, Relation current, int nkeys,
					const AttrNumber *attnums)
{
	SwRowScan	rs;
	TupleTableSlot *slot;
	AttrNumber	last = 0;

	for (int i = 0; i < nkeys; i++)
		last = Max(last, attnums[i]);
	sw_rows_begin(&rs, current);
	while ((slot = sw_rows_next(&rs)) != NULL)
	{
		slot_getsomeattrs(slot, last);
		for (int i = 0; i < nkeys; i++)
			if (slot->tts_isnull[attnums[i] - 1])
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("cannot make \"%s\" the key of source table \"%s\"",
								NameStr(TupleDescAttr(RelationGetDescr(current), attnums[i] - 1)->attname),
								RelationGetRelationName(ftrel)),
						 errdetail("Some of its current rows have no value in the column."),
						 errhint("Delete those rows or give them a value first: every row of an upsert source has a complete key.")));
	}
	sw_rows_end(&rs);
}

/*
 * The hidden attnums of an upsert source's key columns, as its options
 * name them; returns how many.
 */
static int
key_attnums(SwSourceTable *st, const SwLayout *layout, AttrNumber *attnums)
{
	int			k = 0;
	ListCell   *lc;

	foreach(lc, st->key)
		for (int i = 0; i < st->ncolumns; i++)
			if (strcmp(st->columns[i].name, lfirst(lc)) == 0)
				attnums[k++] = sw_hidden_attnum(layout, st->columns[i].attnum);
	return k;
}

/*
 * Is the key index of a current heap the one the options ask for (none
 * unless the source is an upsert source)?
 */
static bool
key_index_in_step(Oid existing, SwSourceTable *st, const AttrNumber *attnums,
				  int nkeys)
{
	HeapTuple	tuple;
	Form_pg_index index;
	bool		same;

	if (!OidIsValid(existing))
		return !st->upsert;
	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(existing));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for index %u", existing);
	index = (Form_pg_index) GETSTRUCT(tuple);
	same = st->upsert && index->indnkeyatts == nkeys &&
		memcmp(index->indkey.values, attnums, sizeof(AttrNumber) * nkeys) == 0;
	ReleaseSysCache(tuple);
	return same;
}

/*
 * Is the storage of a source what the table says it should be: owner,
 * columns and their names, internal dependencies, key index?  Then a
 * command that changed nothing it depends on (SET STATISTICS, an option of
 * another kind, a comment) leaves it alone, and the table's lock need not
 * be raised.
 */
static bool
storage_in_step(Relation ftrel, const SwSource *source, SwSourceTable *st)
{
	bool		in_step = true;

	for (int i = 0; i < 2 && in_step; i++)
	{
		Oid			hiddenid = i == 0 ? source->current_rel : source->history_rel;
		Relation	hidden = table_open(hiddenid, AccessShareLock);
		SwLayout	layout;
		const char *column;

		in_step = hidden->rd_rel->relowner == ftrel->rd_rel->relowner &&
			sw_check_layout(ftrel, hidden, &layout, true, &column) &&
			sw_layout_complete(&layout, source->kind) &&
			(!st->retain_raw || sw_layout_has_raw(&layout, source->kind)) &&
			has_dependency(RelationGetRelid(ftrel), hiddenid);
		if (in_step && i == 0)
		{
			AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(list_length(st->key), 1));
			int			nkeys = key_attnums(st, &layout, attnums);

			in_step = key_index_in_step(key_index(hidden), st, attnums, nkeys);
		}
		table_close(hidden, AccessShareLock);
	}
	return in_step;
}

/*
 * Upsert sources keep a unique index on their key columns in the current
 * heap.  Make it match the options: build it, rebuild it when the key
 * changed, drop it when the envelope is no longer 'upsert'.  Like the
 * hidden relations, it is made without privilege checks on the internal
 * schema.  Current rows without a complete key, or with a key another row
 * has, make it fail with an error that names the table, not the index.
 */
static void
sync_key_index(Relation ftrel, Oid current_rel, SwSourceTable *st)
{
	int			nkeys = list_length(st->key);
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(nkeys, 1));
	Relation	current;
	Oid			existing;
	IndexInfo  *info;
	Oid		   *collations;
	Oid		   *opclasses;
	int16	   *coloptions;
	List	   *colnames = NIL;
	char		name[NAMEDATALEN];
	ErrorContextCallback errcallback;
	MemoryContext oldcxt = CurrentMemoryContext;
	char	   *schema_name;
	int			k;
	SwLayout	layout;

	current = table_open(current_rel, ShareLock);
	existing = key_index(current);
	sw_storage_layout(ftrel, current, &layout);
	k = key_attnums(st, &layout, attnums);

	if (key_index_in_step(existing, st, attnums, k))
	{
		table_close(current, NoLock);
		return;
	}
	if (OidIsValid(existing))
	{
		ObjectAddress addr;

		ObjectAddressSet(addr, RelationRelationId, existing);
		performDeletion(&addr, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
		CommandCounterIncrement();
	}
	if (!st->upsert)
	{
		table_close(current, NoLock);
		return;
	}

	info = makeIndexInfo(nkeys, nkeys, BTREE_AM_OID, NIL, NIL,
						 true, false, true, false);
	collations = palloc(sizeof(Oid) * nkeys);
	opclasses = palloc(sizeof(Oid) * nkeys);
	coloptions = palloc0(sizeof(int16) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(current), attnums[i] - 1);

		info->ii_IndexAttrNumbers[i] = attnums[i];
		collations[i] = att->attcollation;
		opclasses[i] = GetDefaultOpClass(att->atttypid, BTREE_AM_OID);
		if (!OidIsValid(opclasses[i]))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("key column \"%s\" of source table \"%s\" has type %s, which cannot be a key",
							NameStr(att->attname), RelationGetRelationName(ftrel),
							format_type_be(att->atttypid)),
					 errhint("Key columns need a type with a default btree operator class, such as text, integer or jsonb.")));
		colnames = lappend(colnames, NameStr(att->attname));
	}
	check_keys_not_null(ftrel, current, nkeys, attnums);

	errcallback.callback = key_index_error_callback;
	errcallback.arg = RelationGetRelationName(ftrel);
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	sw_key_index_name(RelationGetRelationName(current), name);
	schema_name = get_namespace_name(RelationGetNamespace(ftrel));
	PG_TRY();
	{
		index_create(current, name, InvalidOid, InvalidOid, InvalidOid, InvalidOid,
					 info, colnames, BTREE_AM_OID, current->rd_rel->reltablespace,
					 collations, opclasses, coloptions, (Datum) 0,
					 0, 0, true, true, NULL);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* the index's own message would name it: say it of the table */
		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_UNIQUE_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		edata->message = psprintf(_("cannot make the key of source table \"%s\" unique"),
								  RelationGetRelationName(ftrel));
		edata->detail = pstrdup(_("Some of its current rows have the same key."));
		edata->hint = pstrdup(_("Delete or change the duplicate rows first: an upsert source keeps one row per key."));
		edata->context = NULL;
		edata->constraint_name = NULL;
		edata->schema_name = schema_name;
		edata->table_name = pstrdup(RelationGetRelationName(ftrel));
		ReThrowError(edata);
	}
	PG_END_TRY();

	error_context_stack = errcallback.previous;
	table_close(current, NoLock);
	CommandCounterIncrement();
}

/* the type of a column of the raw message */
static Oid
raw_type(SwRawColumn column)
{
	switch (column)
	{
		case SW_RAW_KEY:
		case SW_RAW_VALUE:
			return BYTEAOID;
		case SW_RAW_TIMESTAMP:
			return INT8OID;
		case SW_RAW_HEADER_NAMES:
			return TEXTARRAYOID;
		case SW_RAW_HEADER_VALUES:
			return BYTEAARRAYOID;
		case SW_NUM_RAW:
			break;
	}
	elog(ERROR, "unknown column %d of a raw message", (int) column);
	return InvalidOid;			/* keep the compiler quiet */
}

/*
 * Create a hidden relation: the foreign table's columns (as their storage
 * types), then ours.  A column the table has already dropped gets a
 * placeholder, which the caller's sync drops again so that the attnums
 * line up.
 */
static Oid
create_hidden_relation(Relation ftrel, const char *prefix, uint32 tag,
					   bool history, SwKind kind, bool raw)
{
	Oid			nsp = get_namespace_oid(SW_INTERNAL_SCHEMA, false);
	TupleDesc	ftdesc = RelationGetDescr(ftrel);
	bool		delivery = kind == SW_KIND_WEBHOOK;
	int			nraw = 0;
	int			nmeta;
	char		relname[NAMEDATALEN];
	Oid			relid;
	TupleDesc	desc;
	AttrNumber	next = ftdesc->natts;

	for (int i = 0; i < SW_NUM_RAW && raw; i++)
		nraw += sw_raw_column_of(kind, i);
	nmeta = 3 + delivery + nraw + history;
	desc = CreateTemplateTupleDesc(ftdesc->natts + nmeta);

	/* a relation restored from a dump may have taken the name */
	for (;;)
	{
		snprintf(relname, sizeof(relname), "%s_%u_%08x", prefix,
				 RelationGetRelid(ftrel), tag);
		if (!OidIsValid(get_relname_relid(relname, nsp)))
			break;
		tag++;
	}

	for (int k = 1; k <= ftdesc->natts; k++)
	{
		Form_pg_attribute att = TupleDescAttr(ftdesc, k - 1);

		if (att->attisdropped)
			TupleDescInitEntry(desc, k, psprintf("$dropped_%d", k), INT4OID, -1, 0);
		else
		{
			int32		typmod;
			Oid			type = sw_hidden_type(att, &typmod);

			TupleDescInitEntry(desc, k, NameStr(att->attname), type, typmod,
							   att->attndims);
			TupleDescInitEntryCollation(desc, k, att->attcollation);
		}
	}
	/*
	 * Where each row came from (NULL: no message; a webhook delivery's key
	 * only for webhooks, so that a Kafka row has no null to keep), the raw
	 * message with retain_raw, then its batches, "$batch" last of the
	 * current heap's (so that a history row is its current row with
	 * "$retracted" appended).
	 */
	TupleDescInitEntry(desc, ++next, SW_META_PART, INT4OID, -1, 0);
	TupleDescInitEntry(desc, ++next, SW_META_POS, INT8OID, -1, 0);
	if (delivery)
	{
		TupleDescInitEntry(desc, ++next, SW_META_DELIVERY, TEXTOID, -1, 0);
		TupleDescInitEntryCollation(desc, next, C_COLLATION_OID);
	}
	for (int i = 0; i < SW_NUM_RAW && raw; i++)
		if (sw_raw_column_of(kind, i))
			TupleDescInitEntry(desc, ++next, sw_raw_names[i], raw_type(i), -1, 0);
	TupleDescInitEntry(desc, ++next, SW_META_BATCH, INT8OID, -1, 0);
	TupleDescAttr(desc, next - 1)->attnotnull = true;
	if (history)
	{
		TupleDescInitEntry(desc, ++next, SW_META_RETRACTED, INT8OID, -1, 0);
		TupleDescAttr(desc, next - 1)->attnotnull = true;
	}

	/*
	 * Like a TOAST table: no privilege checks on the internal schema, no
	 * default privileges, and the owner of the table it belongs to.
	 */
	relid = heap_create_with_catalog(relname, nsp, InvalidOid,
									 InvalidOid, InvalidOid, InvalidOid,
									 ftrel->rd_rel->relowner,
									 HEAP_TABLE_AM_OID,
									 desc, NIL,
									 RELKIND_RELATION,
									 RELPERSISTENCE_PERMANENT,
									 false, false,
									 ONCOMMIT_NOOP,
									 (Datum) 0,
									 false, /* use_user_acl */
									 true,	/* allow_system_table_mods */
									 true,	/* is_internal */
									 InvalidOid,
									 NULL);
	CommandCounterIncrement();
	sw_storage_depend(RelationGetRelid(ftrel), relid);
	NewRelationCreateToastTable(relid, (Datum) 0);
	CommandCounterIncrement();
	return relid;
}

/*
 * The names of a source's hidden relations, and its own, for
 * sw_storage_rename_error().  Looked up now, while the catalogs may be
 * read: an error may come with buffers locked.
 */
void
sw_storage_hidden_names(Relation ftrel, const SwSource *source,
						SwHiddenNames *names)
{
	names->hidden[0] = OidIsValid(source->key_index) ? get_rel_name(source->key_index) : NULL;
	names->hidden[1] = get_rel_name(source->current_rel);
	names->hidden[2] = get_rel_name(source->history_rel);
	names->table = pstrdup(RelationGetRelationName(ftrel));
	names->schema = get_namespace_name(RelationGetNamespace(ftrel));
}

/*
 * Can c be part of an identifier, as the scanner reads them (ASCII letters,
 * digits, _ and $, and any byte of a multibyte character)?
 */
static inline bool
identifier_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		(c >= '0' && c <= '9') || c == '_' || c == '$' || IS_HIGHBIT_SET(c);
}

/*
 * Which hidden relation's name, if any, stands at p in str as a whole
 * name: not part of a longer one (a user's table may be called after a
 * hidden relation, with more around it).  The key index's name begins
 * with the current heap's: it is tried first.  -1 if none.
 */
static int
hidden_name_at(const char *str, const char *p, const SwHiddenNames *names)
{
	if (p > str && identifier_char(p[-1]))
		return -1;
	for (int i = 0; i < lengthof(names->hidden); i++)
	{
		size_t		len;

		if (names->hidden[i] == NULL)
			continue;
		len = strlen(names->hidden[i]);
		if (strncmp(p, names->hidden[i], len) == 0 && !identifier_char(p[len]))
			return i;
	}
	return -1;
}

/*
 * A copy of str with every hidden relation's name in it replaced by the
 * source table's, or str itself if it names none.
 */
static char *
rename_in(char *str, const SwHiddenNames *names)
{
	StringInfoData buf;
	const char *p;

	if (str == NULL)
		return NULL;
	for (p = str; *p; p++)
		if (hidden_name_at(str, p, names) >= 0)
			break;
	if (*p == '\0')
		return str;

	initStringInfo(&buf);
	for (p = str; *p;)
	{
		int			i = hidden_name_at(str, p, names);

		if (i >= 0)
		{
			appendStringInfoString(&buf, names->table);
			p += strlen(names->hidden[i]);
		}
		else
			appendStringInfoChar(&buf, *p++);
	}
	return buf.data;
}

/*
 * Is name one of the hidden relations'?
 */
static bool
is_hidden_name(const char *name, const SwHiddenNames *names)
{
	for (int i = 0; i < lengthof(names->hidden); i++)
		if (name && names->hidden[i] && strcmp(name, names->hidden[i]) == 0)
			return true;
	return false;
}

/*
 * Errors that PostgreSQL raises while it works on a source's hidden
 * relations name them: the context of a lock wait ("while locking tuple
 * (0,1) in relation ..."), which a deadlock or a lock timeout shows, the
 * error of NOWAIT ("could not obtain lock on row in relation ..."), the
 * fields of a unique violation.  Users know the source table, whose row
 * identity the ctids of its hidden current rows are: say the error of it,
 * as PostgreSQL would of a plain table, with its name in the texts where
 * they name a hidden relation, and its schema and name in the fields that
 * name one.  The key index of an upsert source is no constraint of the
 * user's: its name goes.  Errors about anything else (another source's
 * storage, a table whose name merely contains a hidden one) are left as
 * they are.
 */
void
sw_storage_rename_error(ErrorData *edata, const SwHiddenNames *names)
{
	if (names->table == NULL)
		return;
	edata->message = rename_in(edata->message, names);
	edata->detail = rename_in(edata->detail, names);
	edata->detail_log = rename_in(edata->detail_log, names);
	edata->hint = rename_in(edata->hint, names);
	edata->context = rename_in(edata->context, names);
	if (edata->schema_name && strcmp(edata->schema_name, SW_INTERNAL_SCHEMA) == 0 &&
		is_hidden_name(edata->table_name, names))
	{
		edata->schema_name = pstrdup(names->schema);
		edata->table_name = pstrdup(names->table);
		if (edata->constraint_name && names->hidden[0] &&
			strcmp(edata->constraint_name, names->hidden[0]) == 0)
			edata->constraint_name = NULL;
	}
}

/*
 * In a PG_CATCH block: rethrow the error caught, said of the source
 * table rather than its hidden relations (sw_storage_rename_error()).  cxt
 * is the memory context of the code that caught it.
 */
void
sw_storage_rethrow(const SwHiddenNames *names, MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	sw_storage_rename_error(edata, names);
	ReThrowError(edata);
}

/*
 * Rename a column of a hidden relation in the catalog, as renameatt() does,
 * without looking the relation up by name (the internal schema is closed to
 * the users on whose behalf this runs).
 */
static void
rename_hidden_column(Oid relid, AttrNumber attnum, const char *newname)
{
	Relation	attrel = table_open(AttributeRelationId, RowExclusiveLock);
	HeapTuple	tuple = SearchSysCacheCopyAttNum(relid, attnum);

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for attribute %d of relation %u",
			 attnum, relid);
	namestrcpy(&((Form_pg_attribute) GETSTRUCT(tuple))->attname, newname);
	CatalogTupleUpdate(attrel, &tuple->t_self, tuple);
	InvokeObjectPostAlterHook(RelationRelationId, relid, attnum);
	heap_freetuple(tuple);
	table_close(attrel, RowExclusiveLock);
}

static AlterTableCmd *
make_alter_cmd(AlterTableType subtype, const char *name, Node *def)
{
	AlterTableCmd *cmd = makeNode(AlterTableCmd);

	cmd->subtype = subtype;
	cmd->name = pstrdup(name);
	cmd->def = def;
	cmd->behavior = DROP_RESTRICT;
	return cmd;
}

/*
 * ALTER COLUMN TYPE without USING: the stored values follow the new type
 * through an assignment cast, as the rows of a plain table would (a value
 * too long for varchar(n) is an error, not cut short).  Types with only an
 * explicit cast between them are refused with a hint.
 */
static AlterTableCmd *
make_type_change(Relation ftrel, Form_pg_attribute fatt, Form_pg_attribute hatt)
{
	ColumnDef  *def;
	int32		typmod;
	Oid			from = hatt->atttypid;
	Oid			to = sw_hidden_type(fatt, &typmod);

	if (!can_coerce_type(1, &from, &to, COERCION_ASSIGNMENT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot change the type of column \"%s\" of source table \"%s\" from %s to %s",
						NameStr(fatt->attname), RelationGetRelationName(ftrel),
						format_type_be(from), format_type_be(fatt->atttypid)),
				 errdetail("The stored rows cannot be converted: there is no assignment cast from %s to %s, as a plain table's ALTER COLUMN ... TYPE would need.",
						   format_type_be(from), format_type_be(to)),
				 errhint("Add a column of the new type, fill it with UPDATE, and drop the old column.")));

	def = makeColumnDef(NameStr(fatt->attname), to, typmod, fatt->attcollation);
	return make_alter_cmd(AT_AlterColumnType, NameStr(fatt->attname), (Node *) def);
}

/* error context while the stored rows of a source table are rewritten */
static void
conversion_error_callback(void *arg)
{
	errcontext("while converting the stored rows of source table \"%s\"",
			   (const char *) arg);
}

/*
 * Run ALTER TABLE subcommands on a hidden relation, then check the domains
 * of retyped columns, as the owner of the source table, so that casts and
 * domain checks run with that user's rights and not with the rights of
 * whoever holds ours.  The relation is given by OID, so no lookup in the
 * closed internal schema is needed, and event triggers do not collect these
 * internal subcommands.
 */
static void
alter_hidden_relation(Relation ftrel, Oid hiddenid, List *cmds, List *domains)
{
	AlterTableStmt *stmt;
	AlterTableUtilityContext context = {0};
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	ErrorContextCallback errcallback;

	if (cmds == NIL && domains == NIL)
		return;

	errcallback.callback = conversion_error_callback;
	errcallback.arg = RelationGetRelationName(ftrel);
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(ftrel->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();

	if (cmds != NIL)
	{
		MemoryContext cxt = CurrentMemoryContext;
		SwSource	source;
		SwHiddenNames names;

		sw_source_require(RelationGetRelid(ftrel), &source);
		sw_storage_hidden_names(ftrel, &source, &names);
		stmt = makeNode(AlterTableStmt);
		stmt->relation = makeRangeVar(SW_INTERNAL_SCHEMA, get_rel_name(hiddenid), -1);
		stmt->relation->inh = false;
		stmt->cmds = cmds;
		stmt->objtype = OBJECT_TABLE;
		context.relid = hiddenid;
		context.queryString = "";

		EventTriggerInhibitCommandCollection();
		PG_TRY();
		{
			AlterTable(stmt, AccessExclusiveLock, &context);
		}
		PG_CATCH();
		{
			ErrorData  *edata;

			/*
			 * Converted keys that are no longer unique fail the rebuild of
			 * the key index: say it of the table, as sync_key_index() does.
			 * Other errors are said of the table too.
			 */
			MemoryContextSwitchTo(cxt);
			edata = CopyErrorData();
			FlushErrorState();
			if (edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION &&
				edata->constraint_name != NULL &&
				is_own_index(hiddenid, edata->constraint_name))
			{
				edata->message = psprintf(_("cannot make the key of source table \"%s\" unique"),
										  RelationGetRelationName(ftrel));
				edata->hint = pstrdup(_("Delete or change the duplicate rows first: an upsert source keeps one row per key."));
			}
			sw_storage_rename_error(edata, &names);
			ReThrowError(edata);
		}
		PG_END_TRY();
		EventTriggerUndoInhibitCommandCollection();
		CommandCounterIncrement();
	}

	if (domains != NIL)
	{
		Relation	hidden = table_open(hiddenid, AccessExclusiveLock);
		ListCell   *lc;
		SwLayout	layout;

		sw_storage_layout(ftrel, hidden, &layout);
		foreach(lc, domains)
		{
			AttrNumber	k = lfirst_int(lc);

			sw_domain_check_values(hidden, sw_hidden_attnum(&layout, k),
								TupleDescAttr(RelationGetDescr(ftrel), k - 1)->atttypid);
		}
		table_close(hidden, NoLock);
	}

	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	error_context_stack = errcallback.previous;
}

/*
 * Bring one hidden relation in step with the foreign table: owner, then
 * names, then added, converted and dropped columns.  Columns named in
 * retyped whose type is now a domain get their values checked against it.
 * Returns the attnums of the table's columns it added.
 */
static List *
sync_hidden_relation(Relation ftrel, Oid hiddenid, SwKind kind, bool raw,
					 List *retyped)
{
	TupleDesc	fdesc = RelationGetDescr(ftrel);
	Relation	hidden = table_open(hiddenid, AccessExclusiveLock);
	TupleDesc	hdesc;
	SwLayout	layout;
	List	   *cmds = NIL;
	List	   *placeholders = NIL;
	List	   *domains = NIL;
	List	   *added = NIL;
	bool		renamed = false;

	if (hidden->rd_rel->relowner != ftrel->rd_rel->relowner)
	{
		ATExecChangeOwner(hiddenid, ftrel->rd_rel->relowner, true,
						  AccessExclusiveLock);
		CommandCounterIncrement();
	}

	/* where our columns are: this relation may not be in step yet */
	hdesc = RelationGetDescr(hidden);
	if (!sw_find_layout(hdesc, &layout))
		elog(ERROR, "hidden relation of source table \"%s\" does not have its own columns where they belong",
			 RelationGetRelationName(ftrel));

	/* renames are catalog updates; do them first so later steps see them */
	for (int k = 1; k <= fdesc->natts && sw_hidden_attnum(&layout, k) <= hdesc->natts; k++)
	{
		Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
		Form_pg_attribute hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);

		if (!fatt->attisdropped && !hatt->attisdropped &&
			strcmp(NameStr(fatt->attname), NameStr(hatt->attname)) != 0)
		{
			rename_hidden_column(hiddenid, hatt->attnum, NameStr(fatt->attname));
			renamed = true;
		}
	}
	if (renamed)
		CommandCounterIncrement();

	hdesc = RelationGetDescr(hidden);
	for (int k = 1; k <= fdesc->natts; k++)
	{
		Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
		Form_pg_attribute hatt;
		int32		typmod;
		Oid			type;

		if (sw_hidden_attnum(&layout, k) > hdesc->natts)
		{
			/*
			 * New attnum.  A column added and dropped before we saw it still
			 * takes its attnum: add a placeholder and drop it again.
			 */
			if (fatt->attisdropped)
			{
				char	   *name = psprintf("$dropped_%d", k);

				cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, name,
													(Node *) makeColumnDef(name, INT4OID, -1, InvalidOid)));
				placeholders = lappend(placeholders,
									   make_alter_cmd(AT_DropColumn, name, NULL));
			}
			else
			{
				type = sw_hidden_type(fatt, &typmod);
				cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, NameStr(fatt->attname),
													(Node *) makeColumnDef(NameStr(fatt->attname),
																		   type, typmod,
																		   fatt->attcollation)));
				added = lappend_int(added, k);
			}
			continue;
		}

		hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);
		if (fatt->attisdropped && !hatt->attisdropped)
			cmds = lappend(cmds, make_alter_cmd(AT_DropColumn, NameStr(hatt->attname), NULL));
		else if (!fatt->attisdropped && hatt->attisdropped)
			elog(ERROR, "hidden relation of source table \"%s\" is out of step at column %d",
				 RelationGetRelationName(ftrel), k);
		else if (!fatt->attisdropped)
		{
			type = sw_hidden_type(fatt, &typmod);
			if (type != hatt->atttypid || typmod != hatt->atttypmod ||
				fatt->attcollation != hatt->attcollation)
				cmds = lappend(cmds, make_type_change(ftrel, fatt, hatt));
			if (type != fatt->atttypid &&
				list_member(retyped, makeString(NameStr(fatt->attname))))
				domains = lappend_int(domains, k);
		}
	}
	if (hdesc->natts > fdesc->natts + layout.nmeta)
		elog(ERROR, "hidden relation of source table \"%s\" has too many columns",
			 RelationGetRelationName(ftrel));

	/*
	 * A relation made before rows kept where they came from (restored from
	 * an older dump) gets those columns after the others, NULL in its rows.
	 */
	if (layout.part == InvalidAttrNumber)
	{
		cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, SW_META_PART,
											(Node *) makeColumnDef(SW_META_PART, INT4OID, -1, InvalidOid)));
		cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, SW_META_POS,
											(Node *) makeColumnDef(SW_META_POS, INT8OID, -1, InvalidOid)));
	}
	if (kind == SW_KIND_WEBHOOK && layout.delivery == InvalidAttrNumber)
		cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, SW_META_DELIVERY,
											(Node *) makeColumnDef(SW_META_DELIVERY, TEXTOID, -1, C_COLLATION_OID)));

	/*
	 * retain_raw turned on: the columns of the raw message, after the
	 * others, NULL in the rows written before (they keep none).  Turned off,
	 * they stay, and rows written from then on keep nothing in them.
	 */
	if (raw)
		for (int i = 0; i < SW_NUM_RAW; i++)
			if (sw_raw_column_of(kind, i) && layout.raw[i] == InvalidAttrNumber)
				cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, sw_raw_names[i],
													(Node *) makeColumnDef(sw_raw_names[i],
																		   raw_type(i), -1,
																		   InvalidOid)));

	table_close(hidden, NoLock);

	/* placeholders are dropped in a second pass: ALTER drops before adds */
	alter_hidden_relation(ftrel, hiddenid, cmds, domains);
	alter_hidden_relation(ftrel, hiddenid, placeholders, NIL);
	return added;
}

/*
 * The "key" option names columns.  When one of them was renamed, rewrite
 * the option to the new name, as an index would follow; when one was
 * dropped, refuse.  The hidden relation still has the old names.
 */
static void
follow_key_renames(Relation ftrel, Oid hiddenid)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(ftrel));
	TupleDesc	fdesc = RelationGetDescr(ftrel);
	Relation	hidden;
	TupleDesc	hdesc;
	SwLayout	layout;
	DefElem    *keydef = NULL;
	List	   *names;
	ListCell   *lc;
	StringInfoData newkey;
	bool		changed = false;

	foreach(lc, table->options)
		if (strcmp(((DefElem *) lfirst(lc))->defname, "key") == 0)
			keydef = lfirst(lc);
	if (keydef == NULL ||
		!SplitIdentifierString(pstrdup(defGetString(keydef)), ',', &names))
		return;					/* no key, or sw_source_table() will complain */

	hidden = table_open(hiddenid, AccessShareLock);
	hdesc = RelationGetDescr(hidden);
	if (!sw_find_layout(hdesc, &layout))
		elog(ERROR, "hidden relation of source table \"%s\" does not have its own columns where they belong",
			 RelationGetRelationName(ftrel));
	initStringInfo(&newkey);
	foreach(lc, names)
	{
		const char *name = lfirst(lc);

		for (int k = 1; k <= fdesc->natts && sw_hidden_attnum(&layout, k) <= hdesc->natts; k++)
		{
			Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
			Form_pg_attribute hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);

			if (hatt->attisdropped || strcmp(NameStr(hatt->attname), name) != 0)
				continue;
			if (fatt->attisdropped)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("cannot drop column \"%s\" of source table \"%s\"",
								name, RelationGetRelationName(ftrel)),
						 errdetail("The column is part of the table's option \"key\"."),
						 errhint("Change the option \"key\" first.")));
			if (strcmp(NameStr(fatt->attname), name) != 0)
			{
				name = NameStr(fatt->attname);
				changed = true;
			}
		}
		appendStringInfo(&newkey, "%s%s", newkey.len > 0 ? ", " : "",
						 quote_identifier(name));
	}
	table_close(hidden, AccessShareLock);

	if (changed)
	{
		Relation	ftcat = table_open(ForeignTableRelationId, RowExclusiveLock);
		HeapTuple	tuple = SearchSysCacheCopy1(FOREIGNTABLEREL,
												ObjectIdGetDatum(RelationGetRelid(ftrel)));
		ArrayBuildState *astate = NULL;
		Datum		values[Natts_pg_foreign_table] = {0};
		bool		nulls[Natts_pg_foreign_table] = {0};
		bool		replace[Natts_pg_foreign_table] = {0};
		HeapTuple	newtuple;

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for foreign table %u",
				 RelationGetRelid(ftrel));
		foreach(lc, table->options)
		{
			DefElem    *def = lfirst(lc);
			const char *value = def == keydef ? newkey.data : defGetString(def);

			astate = accumArrayResult(astate,
									  CStringGetTextDatum(psprintf("%s=%s", def->defname, value)),
									  false, TEXTOID, CurrentMemoryContext);
		}
		values[Anum_pg_foreign_table_ftoptions - 1] =
			makeArrayResult(astate, CurrentMemoryContext);
		replace[Anum_pg_foreign_table_ftoptions - 1] = true;
		newtuple = heap_modify_tuple(tuple, RelationGetDescr(ftcat), values,
									 nulls, replace);
		CatalogTupleUpdate(ftcat, &newtuple->t_self, newtuple);
		InvokeObjectPostAlterHook(ForeignTableRelationId, RelationGetRelid(ftrel), 0);
		table_close(ftcat, RowExclusiveLock);
		CommandCounterIncrement();
	}
}
