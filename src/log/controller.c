/*-------------------------------------------------------------------------
 *
 * controller.c
 *		  The controller: gives each committing batch its timestamp
 *
 * See doc/internals.md, "Writing and the stamping protocol".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/controller.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "log/log.h"

/* a batch of the current transaction */
typedef struct SwWrite
{
	Oid			relid;
	Oid			role;
	SwOrigin	origin;
	int			nest_level;		/* subtransaction level of its first write */
	bool		stamped;		/* recorded in the catalog at pre-commit */
	SwBlockRanges blocks[2];	/* where it wrote current and history rows */
	int			source;			/* its source's index in stamping */
	SwBatch		batch;			/* id, origin and role name; ts at commit */
} SwWrite;

/* a check to run when the transaction's batches are stamped */
typedef struct SwCheck
{
	Oid			relid;
	SwCommitCheck check;
	void	   *arg;
	int			nest_level;		/* subtransaction level that registered it */
} SwCheck;

/* the batches and checks of the current transaction, in TopTransactionContext */
static List *writes = NIL;
static List *checks = NIL;

/* the sources the committing transaction stamps, in TopTransactionContext */
static SwStamping *stamping = NULL;
static int	nstamping = 0;
static bool callbacks_registered = false;

/* the notifier's, set when the library loads: see log/log.h */
void		(*sw_upper_moved_hook) (Oid dboid, Oid relid) = NULL;

static void sw_xact_callback(XactEvent event, void *arg);
static void sw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
								SubTransactionId parentSubid, void *arg);

/*
 * Milliseconds since the Unix epoch, the unit of source timestamps.
 */
int64
sw_now_ms(void)
{
	return GetCurrentTimestamp() / 1000 +
		(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SW_MSECS_PER_DAY;
}

/*
 * Note that the current transaction writes a source as the current user,
 * and return the id of the batch with which the written rows are tagged,
 * and in *blocks where to note the blocks it writes rows into: two
 * SwBlockRanges, for the current heap and for the history.
 */
int64
sw_controller_batch(Oid relid, SwOrigin origin, SwBlockRanges **blocks)
{
	return sw_controller_batch_of(relid, origin, GetUserId(), blocks);
}

/*
 * The same, for a batch that the log says role wrote (retry_errors() runs
 * as the table's owner for its caller).
 */
int64
sw_controller_batch_of(Oid relid, SwOrigin origin, Oid role,
					   SwBlockRanges **blocks)
{
	ListCell   *lc;
	SwWrite    *w;
	MemoryContext old;

	if (!callbacks_registered)
	{
		RegisterXactCallback(sw_xact_callback, NULL);
		RegisterSubXactCallback(sw_subxact_callback, NULL);
		callbacks_registered = true;
	}

	foreach(lc, writes)
	{
		w = lfirst(lc);
		if (w->relid == relid && w->role == role && w->origin == origin)
		{
			*blocks = w->blocks;
			return w->batch.batch;
		}
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	w = palloc0(sizeof(SwWrite));
	w->relid = relid;
	w->role = role;
	w->origin = origin;
	w->nest_level = GetCurrentTransactionNestLevel();
	w->batch.batch = sw_catalog_new_batch_id();
	w->batch.origin = origin;
	namestrcpy(&w->batch.role, GetUserNameFromId(role, false));
	writes = lappend(writes, w);
	MemoryContextSwitchTo(old);

	*blocks = w->blocks;
	return w->batch.batch;
}

/*
 * Register a check to run under the stamp lock of a source that the
 * current transaction writes, when its batch is stamped (see SwCommitCheck):
 * e.g. a compare-and-set of the offsets a batch consumed.  arg must live
 * until the end of the transaction.  A check registered in a subtransaction
 * that rolls back is forgotten with it.
 */
void
sw_controller_on_commit(Oid relid, SwCommitCheck check, void *arg)
{
	MemoryContext old = MemoryContextSwitchTo(TopTransactionContext);
	SwCheck    *c = palloc(sizeof(SwCheck));

	c->relid = relid;
	c->check = check;
	c->arg = arg;
	c->nest_level = GetCurrentTransactionNestLevel();
	checks = lappend(checks, c);
	MemoryContextSwitchTo(old);
}

/*
 * Is batch one of the current transaction's batches of the source?
 */
bool
sw_controller_wrote(Oid relid, int64 batch)
{
	ListCell   *lc;

	foreach(lc, writes)
	{
		SwWrite    *w = lfirst(lc);

		if (w->relid == relid && w->batch.batch == batch)
			return true;
	}
	return false;
}

/*
 * Add where the current transaction's batches of the source wrote history
 * rows so far to what was gathered.
 */
void
sw_controller_history_blocks(Oid relid, SwWrittenBlocks *written)
{
	ListCell   *lc;

	foreach(lc, writes)
	{
		SwWrite    *w = lfirst(lc);

		if (w->relid == relid)
			sw_written_blocks_add(written, &w->blocks[SW_HISTORY_HEAP]);
	}
}

static int
compare_writes(const ListCell *a, const ListCell *b)
{
	Oid			ra = ((SwWrite *) lfirst(a))->relid;
	Oid			rb = ((SwWrite *) lfirst(b))->relid;

	return ra < rb ? -1 : (ra > rb ? 1 : 0);
}

/*
 * Read a source's newest batches from the catalog, under its stamp lock,
 * for a slot in shared memory (once the batches still committing have
 * finished: a slot starts with none) or to stamp by the catalog.
 */
static void
read_stamp_state(SwStamping *src, bool for_slot)
{
	SwFrontiers stored;

	if (for_slot)
	{
		(void) sw_catalog_stamp_state(src->relid, &src->state);
		for (int j = 0; j < src->state.npending; j++)
			XactLockTableWait(XidFromFullTransactionId(src->state.pending[j].xid),
							  NULL, NULL, XLTW_None);
	}
	if (!sw_catalog_stamp_state(src->relid, &src->state))
	{
		/* no batch yet: after the upper it was created with */
		if (!sw_catalog_stored_frontiers(src->relid, &stored))
			elog(ERROR, "source table %u has no catalog row", src->relid);
		src->state.top = stored.upper - 1;
	}
}

/*
 * Stamp the batches of the committing transaction (see the file header
 * and stamps.c).
 */
static void
stamp_batches(void)
{
	int64		ts = sw_now_ms();
	int			n;
	int			nsources = 0;
	SwStamping *sources;
	bool	   *locked;
	ListCell   *lc;

	/* the extension was dropped in this transaction, sources and all */
	if (!sw_catalog_exists())
		return;

	/* a fixed lock order keeps writers of several sources from deadlocking */
	list_sort(writes, compare_writes);
	n = list_length(writes);
	sources = MemoryContextAllocZero(TopTransactionContext, sizeof(SwStamping) * n);
	locked = palloc0(sizeof(bool) * n);

	/* the sources written, once each, that still exist */
	foreach(lc, writes)
	{
		SwWrite    *w = lfirst(lc);
		SwStamping *src = &sources[nsources];

		if (nsources > 0 && sources[nsources - 1].relid == w->relid)
		{
			w->source = nsources - 1;
			continue;
		}
		w->source = -1;
		/* a source dropped after it was written needs no batch */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(w->relid)))
			continue;
		src->relid = w->relid;
		src->in_memory = sw_stamps_available();
		/* room for the batches still committing is made as they are read */
		src->state.maxpending = 0;
		src->state.pending = NULL;
		w->source = nsources++;
	}
	stamping = sources;
	nstamping = nsources;

	/* the slots the sources have, pinned so that they stay */
	if (sw_stamps_available())
		sw_stamps_pin(sources, nsources);

	/*
	 * The stamp locks, all in one pass in OID order: of the sources with a
	 * check to run under it, of those without a slot yet, which get one
	 * from their newest batches under it, and of those that get none (or
	 * without shared memory), which are stamped by the catalog while it is
	 * held, until their batch is recorded.
	 */
	for (int i = 0; i < nsources; i++)
	{
		SwStamping *src = &sources[i];
		bool		checked = false;

		foreach(lc, checks)
			checked |= ((SwCheck *) lfirst(lc))->relid == src->relid;
		if (!checked && src->in_memory && src->pinned)
			continue;
		sw_catalog_lock_source(src->relid);
		locked[i] = true;
		if (src->in_memory && !src->pinned)
		{
			read_stamp_state(src, true);
			src->pinned = sw_stamps_install(src->relid, src->state.top);
			src->in_memory = src->pinned;
		}
		if (!src->in_memory)
		{
			read_stamp_state(src, false);
			ts = Max(ts, src->state.top + 1);
		}
		else if (!checked)
		{
			sw_catalog_unlock_source(src->relid);
			locked[i] = false;
		}
	}

	/* the checks, under the stamp locks of their sources */
	foreach(lc, checks)
	{
		SwCheck    *c = lfirst(lc);

		for (int i = 0; i < nsources; i++)
			if (sources[i].relid == c->relid)
			{
				c->check(c->relid, c->arg);
				break;
			}
	}

	/* the timestamp, in shared memory where the sources have slots */
	if (sw_stamps_available() && !sw_stamps_take(sources, nsources, &ts))
		elog(ERROR, "a pinned timestamp slot is gone");

	foreach(lc, writes)
	{
		SwWrite    *w = lfirst(lc);

		if (w->source < 0)
			continue;
		w->batch.ts = ts;
		sw_catalog_insert_batch(w->relid, &w->batch,
								sources[w->source].state.npending,
								sources[w->source].state.pending,
								w->blocks);
		w->stamped = true;
	}

	/* the batches are in the catalog: the next writer will see them */
	for (int i = 0; i < nsources; i++)
		if (locked[i])
			sw_catalog_unlock_source(sources[i].relid);
}

/*
 * The batches stamped in shared memory have committed or aborted: they
 * leave their slots' lists of committing batches, and what an error
 * between two attempts left pinned is unpinned.  Cannot fail.
 */
static void
finish_stamping(void)
{
	if (nstamping == 0)
		return;
	sw_stamps_unpin(stamping, nstamping);
	sw_stamps_done(stamping, nstamping);
}

/*
 * Tell the notifier (through sw_upper_moved_hook) that the upper of the
 * sources whose batches were stamped may have moved: they committed, or
 * they aborted after stamping, which may let upper pass their timestamps.
 * Runs after commit or abort, and cannot fail.
 */
static void
announce_batches(void)
{
	ListCell   *lc;

	foreach(lc, writes)
	{
		SwWrite    *w = lfirst(lc);

		if (w->stamped && sw_upper_moved_hook)
			sw_upper_moved_hook(MyDatabaseId, w->relid);
	}
}

static void
sw_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
			if (writes != NIL)
				stamp_batches();
			break;
		case XACT_EVENT_PRE_PREPARE:
			if (writes != NIL)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot prepare a transaction that has written to source tables"),
						 errdetail("A source's batch gets its timestamp when it commits, which a prepared transaction cannot promise."),
						 errhint("Commit the edits of source tables in an ordinary transaction.")));
			break;
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_ABORT:
			finish_stamping();
			announce_batches();
			/* the lists lived in TopTransactionContext, which is going away */
			writes = NIL;
			checks = NIL;
			stamping = NULL;
			nstamping = 0;
			break;
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the lists lived in TopTransactionContext, which is going away */
			writes = NIL;
			checks = NIL;
			break;
	}
}

/*
 * A rolled-back subtransaction takes its batches with it; a committed one
 * hands them to its parent.
 */
static void
sw_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
					SubTransactionId parentSubid, void *arg)
{
	int			level = GetCurrentTransactionNestLevel();
	ListCell   *lc;

	if (event == SUBXACT_EVENT_ABORT_SUB)
	{
		foreach(lc, writes)
		{
			SwWrite    *w = lfirst(lc);

			if (w->nest_level >= level)
				writes = foreach_delete_current(writes, lc);
		}
		foreach(lc, checks)
		{
			SwCheck    *c = lfirst(lc);

			if (c->nest_level >= level)
				checks = foreach_delete_current(checks, lc);
		}
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, writes)
		{
			SwWrite    *w = lfirst(lc);

			if (w->nest_level >= level)
				w->nest_level = level - 1;
		}
		foreach(lc, checks)
		{
			SwCheck    *c = lfirst(lc);

			if (c->nest_level >= level)
				c->nest_level = level - 1;
		}
	}
}

/*
 * Is ts readable in the source, since <= ts < upper?  If not, say what is.
 */
void
sw_check_readable(Oid relid, const SwFrontiers *frontiers, int64 ts)
{
	if (ts >= frontiers->since && ts < frontiers->upper)
		return;
	if (frontiers->since >= frontiers->upper)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source table \"%s\" cannot be read as of " INT64_FORMAT,
						get_rel_name(relid), ts),
				 errdetail("Its readable range is empty: it has no batch yet, or its option \"retain_history\" is 0."),
				 errhint("source_writes.frontiers() shows the readable range [since, upper).")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("source table \"%s\" cannot be read as of " INT64_FORMAT,
					get_rel_name(relid), ts),
			 errdetail("The readable range is from " INT64_FORMAT " up to, not including, " INT64_FORMAT ".",
					   frontiers->since, frontiers->upper),
			 ts < frontiers->since
			 ? errhint("Nothing before " INT64_FORMAT " is kept: the table did not exist yet, or older history was compacted (option \"retain_history\").",
					   frontiers->since)
			 : errhint("Times from " INT64_FORMAT " on are not final yet.", frontiers->upper)));
}
