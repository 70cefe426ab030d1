/*-------------------------------------------------------------------------
 *
 * supervisor.c
 *		  The source_writes background worker of a database
 *
 * See doc/internals.md, "Workers and processes" (Supervisor).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/supervisor.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/dbcommands.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "log/log.h"
#include "options/options.h"
#include "workers/workers.h"

/* blocks of a history heap compacted per transaction */
#define SW_COMPACTION_CHUNK		1024

/* how often the supervisor checks on the ingestion workers */
#define SW_SUPERVISE_MS			1000

PGDLLEXPORT void source_writes_supervisor_main(Datum main_arg);

/* the name of the supervisor's database, for messages */
static char *database_name = NULL;

/* error context while a source is compacted */
static void
compaction_error_callback(void *arg)
{
	errcontext("compacting source table with OID %u", *(Oid *) arg);
}

/*
 * Keep an ingestion worker running for each Kafka source, if it is time to
 * check on them (or always, with force): between compaction chunks too,
 * so that a long pass holds no source up.
 */
static void
supervise_workers(bool force)
{
	static TimestampTz last = 0;
	static bool announced = false;
	TimestampTz now = GetCurrentTimestamp();
	MemoryContext cxt = CurrentMemoryContext;
	MemoryContext tmp;
	bool		extension = true;
	bool		webhooks = false;
	bool		any = true;

	if (!force && !TimestampDifferenceExceeds(last, now, SW_SUPERVISE_MS))
		return;
	last = now;
	tmp = AllocSetContextCreate(CurrentMemoryContext, "source_writes supervision",
								ALLOCSET_SMALL_SIZES);
	MemoryContextSwitchTo(tmp);
	AcceptInvalidationMessages();
	sw_workers_supervise(&extension, &webhooks, &any);
	MemoryContextSwitchTo(cxt);
	MemoryContextDelete(tmp);
	sw_database_report(!extension ? SW_DATABASE_NO_EXTENSION :
					   !any ? SW_DATABASE_NO_SOURCES : SW_DATABASE_SERVED,
					   webhooks);
	if (!extension || !any)
	{
		/*
		 * DROP EXTENSION, or no source table (left, or none yet): its
		 * workers go, and so do we, to take no worker process while there
		 * is nothing to serve (the launcher starts us again when a source
		 * table is made)
		 */
		sw_workers_stop_all();
		if (!extension)
			ereport(LOG,
					(errmsg("source_writes supervisor leaves database \"%s\"",
							database_name),
					 errdetail("The extension was dropped.")));
		else
			ereport(announced ? LOG : DEBUG1,
					(errmsg("source_writes supervisor leaves database \"%s\"",
							database_name),
					 errdetail("The database has no source table.")));
		proc_exit(0);
	}
	if (!announced)
		ereport(LOG,
				(errmsg("source_writes supervisor started for database \"%s\"", database_name)));
	announced = true;
}

/*
 * In a PG_CATCH of the supervisor: log the error and abort the
 * transaction; the supervisor goes on.
 */
static void
log_and_abort(void)
{
	HOLD_INTERRUPTS();
	EmitErrorReport();
	AbortOutOfAnyTransaction();
	FlushErrorState();
	RESUME_INTERRUPTS();
}

/*
 * Run fn(relid) in a transaction of its own, with a snapshot: returns what
 * it returns, or if_error when it fails (the error is logged).
 */
static bool
in_own_transaction(bool (*fn) (Oid relid), Oid relid, bool if_error)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool result = if_error;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		result = fn(relid);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		log_and_abort();
		result = if_error;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	return result;
}

/*
 * Compact one range of a source's history in its own transaction.  Returns
 * the block to go on from, or InvalidBlockNumber when the source is done,
 * was skipped, or failed (the error is logged).
 */
static BlockNumber
compact_chunk(Oid relid, BlockNumber start)
{
	MemoryContext cxt = CurrentMemoryContext;
	ErrorContextCallback errcallback;
	BlockNumber next = InvalidBlockNumber;

	errcallback.callback = compaction_error_callback;
	errcallback.arg = &relid;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		int64		removed = 0;

		PushActiveSnapshot(GetTransactionSnapshot());

		/* the table may have been dropped since the list was made */
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) &&
			sw_retention_ms(relid) >= 0)
		{
			pgstat_report_activity(STATE_RUNNING, "compacting a source table");
			if (!sw_compact(relid, false, start, SW_COMPACTION_CHUNK, &removed, &next))
				ereport(DEBUG1,
						(errmsg("skipped compacting \"%s\": it is locked",
								get_rel_name(relid))));
			else if (removed > 0)
				ereport(DEBUG1,
						(errmsg("compacted \"%s\": " INT64_FORMAT " history rows removed",
								get_rel_name(relid), removed)));
		}
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		log_and_abort();
		next = InvalidBlockNumber;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	error_context_stack = errcallback.previous;
	pgstat_report_activity(STATE_IDLE, NULL);
	return next;
}

/*
 * Roll up one segment of a source's batches in its own transaction;
 * returns how many batches it rolled up (0 when there are too few, it was
 * locked, or failed: the error is logged).
 */
static int
roll_up_segment(Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;
	ErrorContextCallback errcallback;
	int			n = 0;

	errcallback.callback = compaction_error_callback;
	errcallback.arg = &relid;
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PG_TRY();
	{
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "rolling up batches of a source table");
		n = Max(sw_roll_up(relid, false), 0);
		PopActiveSnapshot();
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		log_and_abort();
		n = 0;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	error_context_stack = errcallback.previous;
	pgstat_report_activity(STATE_IDLE, NULL);
	return n;
}

/*
 * One compaction pass over the sources of the database: the storage of
 * those an update left as it was, the history that no readable time
 * needs, then the batches to roll up into segments.
 */
static void
compaction_pass(void)
{
	List	   *sources = sw_catalog_source_relids(SW_KIND_ANY);
	ListCell   *lc;

	foreach(lc, sources)
	{
		BlockNumber next = 0;

		/* what the extension's update could not give the storage */
		(void) in_own_transaction(sw_storage_complete, lfirst_oid(lc), true);

		do
		{
			CHECK_FOR_INTERRUPTS();
			supervise_workers(false);
			next = compact_chunk(lfirst_oid(lc), next);
			sw_report_stats();	/* autovacuum sees the deletes as they go */
		} while (next != InvalidBlockNumber);

		do
		{
			CHECK_FOR_INTERRUPTS();
			supervise_workers(false);
		} while (roll_up_segment(lfirst_oid(lc)) > 0);
		sw_report_stats();
	}
}

/*
 * Record the internal dependencies of the database's hidden relations that
 * pg_upgrade did not carry (storage.c); false if some source was locked.
 */
static bool
restore_all_dependencies(Oid unused)
{
	return !sw_catalog_exists() || sw_storage_restore_dependencies();
}

/*
 * Is the extension in the database?  In a transaction of its own.
 */
static bool
extension_exists(void)
{
	bool		exists;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	exists = sw_catalog_exists();
	CommitTransactionCommand();
	return exists;
}

/*
 * The supervisor of one database (main_arg): started by the launcher.
 */
void
source_writes_supervisor_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	MemoryContext pass_cxt;
	TimestampTz last_pass = 0;
	bool		dependencies_restored = false;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* a command that wants the database to itself: the launcher comes back */
	if (!sw_database_enter(dboid))
		proc_exit(0);
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes supervisor");
	sw_worker_override_settings();
	sw_database_supervisor_attach();

	if (!extension_exists())
	{
		sw_database_report(SW_DATABASE_NO_EXTENSION, false);
		proc_exit(0);
	}
	StartTransactionCommand();
	database_name = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
	CommitTransactionCommand();

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes supervisor",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		timeout = -1;

		CHECK_FOR_INTERRUPTS();

		sw_worker_reload();

		sw_report_stats();

		/* after pg_upgrade, what it did not carry (again, if it was locked) */
		if (!dependencies_restored)
			dependencies_restored = in_own_transaction(restore_all_dependencies,
													   InvalidOid, true);

		/* a worker for each Kafka source, none for those that are gone */
		supervise_workers(true);

		/* no compaction while a restore brings a source's rows and log */
		if (sw_compaction_interval > 0 && sw_database_restoring(MyDatabaseId) == 0)
		{
			TimestampTz now = GetCurrentTimestamp();
			long		interval_ms = sw_compaction_interval * 1000L;

			if (TimestampDifferenceExceeds(last_pass, now, interval_ms))
			{
				MemoryContext old = MemoryContextSwitchTo(pass_cxt);

				AcceptInvalidationMessages();
				compaction_pass();
				MemoryContextSwitchTo(old);
				MemoryContextReset(pass_cxt);
				last_pass = now;
			}
			timeout = interval_ms -
				TimestampDifferenceMilliseconds(last_pass, GetCurrentTimestamp());
			timeout = Max(timeout, 1);
		}

		/* supervise the workers about once a second */
		timeout = timeout < 0 ? SW_SUPERVISE_MS : Min(timeout, SW_SUPERVISE_MS);
		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH | WL_TIMEOUT,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
