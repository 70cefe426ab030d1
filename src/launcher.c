/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		  The source_writes background worker of a database
 *
 * Registered when the library is in shared_preload_libraries, the launcher
 * connects to source_writes.database and runs a latch loop: every
 * source_writes.compaction_interval it compacts the sources that have a
 * retain_history, each in its own transaction, so that one failing source
 * does not stop the others.  It reloads its settings on SIGHUP (a new
 * database means a restart there), stops on SIGTERM and when the
 * postmaster dies.  The ingestion workers will be started from here.
 *
 * IDENTIFICATION
 *		  src/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "source_writes.h"

PGDLLEXPORT void source_writes_launcher_main(Datum main_arg);

/*
 * Register the launcher; called from _PG_init in the postmaster.
 */
void
sw_launcher_register(void)
{
	BackgroundWorker worker = {0};

	worker.bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 5;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "source_writes");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "source_writes_launcher_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes launcher");
	snprintf(worker.bgw_type, BGW_MAXLEN, "source_writes launcher");
	RegisterBackgroundWorker(&worker);
}

/*
 * Compact one source in its own transaction.  An error is logged and the
 * pass goes on with the next source.
 */
static void
compact_source(Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;

	StartTransactionCommand();
	PG_TRY();
	{
		/* the table may have been dropped since the list was made */
		if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)) &&
			sw_retention_ms(relid) >= 0)
		{
			int64		removed;

			pgstat_report_activity(STATE_RUNNING, "compacting a source table");
			removed = sw_compact(relid);
			if (removed > 0)
				ereport(DEBUG1,
						(errmsg("source_writes: compacted \"%s\": " INT64_FORMAT " history rows removed",
								get_rel_name(relid), removed)));
		}
		CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
	}
	PG_CATCH();
	{
		HOLD_INTERRUPTS();
		errcontext("compacting source table with OID %u", relid);
		EmitErrorReport();
		AbortOutOfAnyTransaction();
		FlushErrorState();
		MemoryContextSwitchTo(cxt);
		RESUME_INTERRUPTS();
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);
}

/*
 * One compaction pass over the sources of the database.
 */
static void
compaction_pass(void)
{
	MemoryContext pass_cxt = CurrentMemoryContext;
	List	   *sources = NIL;
	ListCell   *lc;

	StartTransactionCommand();
	if (sw_catalog_exists())
	{
		List	   *entries = sw_catalog_all_sources();
		MemoryContext old = MemoryContextSwitchTo(pass_cxt);

		foreach(lc, entries)
			sources = lappend_oid(sources, ((SwCatalogEntry *) lfirst(lc))->relid);
		MemoryContextSwitchTo(old);
	}
	CommitTransactionCommand();
	MemoryContextSwitchTo(pass_cxt);

	foreach(lc, sources)
		compact_source(lfirst_oid(lc));
}

void
source_writes_launcher_main(Datum main_arg)
{
	char	   *database;
	MemoryContext pass_cxt;
	TimestampTz last_pass = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	database = MemoryContextStrdup(TopMemoryContext, sw_database);
	BackgroundWorkerInitializeConnection(database, NULL, 0);
	ereport(LOG,
			(errmsg("source_writes launcher started for database \"%s\"", database)));

	pass_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes launcher",
									 ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		long		timeout = -1;

		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (strcmp(database, sw_database) != 0)
			{
				ereport(LOG,
						(errmsg("source_writes launcher restarting to serve database \"%s\"",
								sw_database)));
				proc_exit(1);	/* the postmaster starts us again */
			}
		}

		if (sw_compaction_interval > 0)
		{
			TimestampTz now = GetCurrentTimestamp();
			long		interval_ms = sw_compaction_interval * 1000L;

			if (TimestampDifferenceExceeds(last_pass, now, interval_ms))
			{
				MemoryContext old = MemoryContextSwitchTo(pass_cxt);

				compaction_pass();
				MemoryContextSwitchTo(old);
				MemoryContextReset(pass_cxt);
				last_pass = now;
			}
			timeout = interval_ms -
				TimestampDifferenceMilliseconds(last_pass, GetCurrentTimestamp());
			timeout = Max(timeout, 1);
		}

		(void) WaitLatch(MyLatch,
						 WL_LATCH_SET | WL_EXIT_ON_PM_DEATH |
						 (timeout >= 0 ? WL_TIMEOUT : 0),
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
