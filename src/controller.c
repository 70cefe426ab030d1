/*-------------------------------------------------------------------------
 *
 * controller.c
 *		  The controller: gives each committing batch its timestamp
 *
 * Every write to a source is part of a batch.  A batch is identified by the
 * writing transaction (its full transaction id), which tags the rows it
 * inserts ("$batch") and retracts ("$retracted"), so all of a transaction's
 * edits to one source are one batch.  Rows are written inside the
 * transaction, so MVCC gives read-your-writes, savepoints and rollback.
 *
 * The batch gets its timestamp at pre-commit.  For every source the
 * transaction wrote, in OID order, the controller takes the source's lock
 * (held until commit, so it serialises writers only from pre-commit on),
 * reads its frontiers with SnapshotSelf (the latest version under the lock,
 * without SSI predicate locks) and computes one timestamp for all of them:
 *
 *		ts = GREATEST(now in ms, upper of every source written)
 *
 * Then it records the batch, moves each source's upper to ts + 1 (and its
 * since along with retain_history), and queues a NOTIFY with the new upper
 * on the source's channel, delivered at commit.  Timestamps are thus
 * strictly increasing per source in commit order.  A transaction that
 * rolls back, or writes only in rolled-back subtransactions, leaves no
 * batch.
 *
 * IDENTIFICATION
 *		  src/controller.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/transam.h"
#include "access/xact.h"
#include "commands/async.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "source_writes.h"

/* a source written by the current transaction */
typedef struct SwWrite
{
	Oid			relid;
	int			nest_level;		/* subtransaction level of the first write */
	Oid			role;			/* who wrote first */
	SwOrigin	origin;
} SwWrite;

/* the sources the current transaction wrote, in TopTransactionContext */
static List *writes = NIL;
static bool callbacks_registered = false;

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
 * The notification channel of a source: "source_writes_<oid>".
 */
char *
sw_channel_name(Oid relid)
{
	return psprintf("source_writes_%u", relid);
}

/*
 * Note that the current transaction writes a source, and return the id of
 * its batch, with which the written rows are tagged.
 */
int64
sw_controller_batch(Oid relid, SwOrigin origin)
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
		if (w->relid == relid)
			return (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	}

	old = MemoryContextSwitchTo(TopTransactionContext);
	w = palloc(sizeof(SwWrite));
	w->relid = relid;
	w->nest_level = GetCurrentTransactionNestLevel();
	w->role = GetUserId();
	w->origin = origin;
	writes = lappend(writes, w);
	MemoryContextSwitchTo(old);

	return (int64) U64FromFullTransactionId(GetTopFullTransactionId());
}

static int
compare_writes(const ListCell *a, const ListCell *b)
{
	Oid			ra = ((SwWrite *) lfirst(a))->relid;
	Oid			rb = ((SwWrite *) lfirst(b))->relid;

	return ra < rb ? -1 : (ra > rb ? 1 : 0);
}

/*
 * The since that retention allows once upper has moved: it follows
 * upper - retain_history and never goes back.
 */
int64
sw_retained_since(int64 since, int64 upper, int64 retain_ms)
{
	if (retain_ms < 0 || upper - retain_ms <= since)
		return since;
	return upper - retain_ms;
}

/*
 * Stamp the batches of the committing transaction (see the file header).
 */
static void
stamp_batches(void)
{
	int64		batch = (int64) U64FromFullTransactionId(GetTopFullTransactionId());
	int64		ts = sw_now_ms();
	int			n = list_length(writes);
	SwCatalogEntry *entries = palloc(sizeof(SwCatalogEntry) * n);
	bool	   *exists = palloc(sizeof(bool) * n);

	/* a fixed lock order keeps writers of several sources from deadlocking */
	list_sort(writes, compare_writes);

	for (int i = 0; i < n; i++)
	{
		SwWrite    *w = list_nth(writes, i);

		sw_catalog_lock_source(w->relid);
		/* a source dropped after it was written needs no batch */
		exists[i] = sw_catalog_lookup(w->relid, &entries[i]);
		if (exists[i])
			ts = Max(ts, entries[i].upper);
	}

	for (int i = 0; i < n; i++)
	{
		SwWrite    *w = list_nth(writes, i);
		int64		upper = ts + 1;

		if (!exists[i])
			continue;
		sw_catalog_insert_batch(w->relid, batch, ts, w->origin, w->role);
		sw_catalog_set_frontiers(w->relid,
								 sw_retained_since(entries[i].since, upper,
												   sw_retention_ms(w->relid)),
								 upper);
		Async_Notify(sw_channel_name(w->relid), psprintf(INT64_FORMAT, upper));
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
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			/* the list lived in TopTransactionContext, which is going away */
			writes = NIL;
			break;
	}
}

/*
 * A rolled-back subtransaction takes its writes with it; a committed one
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
	}
	else if (event == SUBXACT_EVENT_COMMIT_SUB)
	{
		foreach(lc, writes)
		{
			SwWrite    *w = lfirst(lc);

			if (w->nest_level >= level)
				w->nest_level = level - 1;
		}
	}
}

/*
 * Is ts readable in the source, since <= ts < upper?  If not, say what is.
 */
void
sw_check_readable(Oid relid, const SwCatalogEntry *entry, int64 ts)
{
	if (ts >= entry->since && ts < entry->upper)
		return;
	if (entry->since >= entry->upper)
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
					   entry->since, entry->upper),
			 ts < entry->since
			 ? errhint("Nothing before " INT64_FORMAT " is kept: the table did not exist yet, or older history was compacted (option \"retain_history\").",
					   entry->since)
			 : errhint("Times from " INT64_FORMAT " on are not final yet.", entry->upper)));
}

/*
 * Check a privilege on a source table (SELECT to read its contents, log
 * and frontiers; DELETE to compact it), before anything about the table is
 * looked at.
 */
void
sw_check_source_privilege(Oid relid, AclMode mode)
{
	AclResult	aclresult = pg_class_aclcheck(relid, GetUserId(), mode);

	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	if (!sw_is_source_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", get_rel_name(relid)),
				 errhint("Source tables are foreign tables on a source_writes server.")));
}

PG_FUNCTION_INFO_V1(source_writes_frontiers);

/*
 * frontiers(regclass) -> (since, upper): the readable range of a source,
 * as last committed.
 */
Datum
source_writes_frontiers(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	TupleDesc	desc;
	SwCatalogEntry entry;
	Datum		values[2];
	bool		nulls[2] = {0};

	sw_check_source_privilege(relid, ACL_SELECT);
	sw_catalog_require(relid, &entry);
	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	values[0] = Int64GetDatum(entry.since);
	values[1] = Int64GetDatum(entry.upper);
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

	sw_check_source_privilege(relid, ACL_SELECT);
	PG_RETURN_TEXT_P(cstring_to_text(sw_channel_name(relid)));
}
