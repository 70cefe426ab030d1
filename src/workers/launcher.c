/*-------------------------------------------------------------------------
 *
 * launcher.c
 *		  The source_writes launcher: the databases the workers serve
 *
 * See doc/internals.md, "Workers and processes" (Launcher).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/launcher.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "log/log.h"
#include "source_writes.h"
#include "workers/workers.h"

/* how often the launcher reads pg_database */
#define SW_LAUNCHER_MS			1000

/* supervisors that look at a database not known to be served, at once */
#define SW_MAX_LOOKS			4

/* the longest wait before a failed supervisor is started again */
#define SW_MAX_BACKOFF_MS		60000

/* a supervisor that ran this long before it stopped starts again at once */
#define SW_HEALTHY_MS			60000

/* how long after its start the launcher may take to look at every database */
#define SW_LOOK_AT_ALL_MS		10000

/* the hints of CREATE EXTENSION taken at once */
#define SW_HINTS_TAKEN			64

PGDLLEXPORT void source_writes_launcher_main(Datum main_arg);

/* what the launcher knows of a database */
typedef enum LauncherState
{
	SW_LAUNCHER_NEW,			/* to be looked at */
	SW_LAUNCHER_SERVED,			/* it has the extension and source tables */
	SW_LAUNCHER_NO_EXTENSION,	/* it has no extension: looked at again when
								 * told */
	SW_LAUNCHER_NO_SOURCES		/* it has the extension, no source table:
								 * likewise */
} LauncherState;

/* nothing to serve there until the launcher is told */
#define UNSERVED(state) \
	((state) == SW_LAUNCHER_NO_EXTENSION || (state) == SW_LAUNCHER_NO_SOURCES)

typedef struct LauncherDatabase
{
	Oid			dboid;			/* the hash key */
	NameData	name;
	bool		seen;			/* in the last read of pg_database */
	bool		connectable;
	LauncherState state;
	BackgroundWorkerHandle *handle; /* its supervisor; NULL: none started */
	TimestampTz started_at;
	TimestampTz start_after;	/* backoff */
	int			failures;
	bool		warned;			/* that no worker process was free for it */
	bool		told;			/* told to look again while a supervisor ran */
} LauncherDatabase;

static HTAB *databases = NULL;

/*
 * Tell the user, once per command that would need them, that the workers
 * are not running.
 */
void
sw_warn_if_not_preloaded(void)
{
	if (sw_preloaded)
		return;
	ereport(WARNING,
			(errmsg("source_writes is not loaded through shared_preload_libraries"),
			 errdetail("Source tables can be created, read and edited, but nothing is ingested from Kafka or webhooks, and listeners are not notified of new batches."),
			 errhint("Add source_writes to shared_preload_libraries in postgresql.conf and restart the server to start the workers.")));
}

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
 * Read pg_database: every database is in the hash, new ones to be looked
 * at; those gone are marked unseen.
 */
static void
read_databases(void)
{
	HASH_SEQ_STATUS seq;
	LauncherDatabase *db;
	Relation	rel;
	TableScanDesc scan;
	HeapTuple	tuple;

	hash_seq_init(&seq, databases);
	while ((db = hash_seq_search(&seq)) != NULL)
		db->seen = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	(void) GetTransactionSnapshot();
	rel = table_open(DatabaseRelationId, AccessShareLock);
	scan = table_beginscan_catalog(rel, 0, NULL);
	while (HeapTupleIsValid(tuple = heap_getnext(scan, ForwardScanDirection)))
	{
		Form_pg_database form = (Form_pg_database) GETSTRUCT(tuple);
		bool		found;

		db = hash_search(databases, &form->oid, HASH_ENTER, &found);
		if (!found)
		{
			memset((char *) db + sizeof(Oid), 0, sizeof(LauncherDatabase) - sizeof(Oid));
			db->state = SW_LAUNCHER_NEW;
		}
		db->seen = true;
		db->name = form->datname;
		/* one that could not be connected to is looked at when it can */
		if (!db->connectable && UNSERVED(db->state))
			db->state = SW_LAUNCHER_NEW;
		db->connectable = form->datallowconn && !database_is_invalid_form(form);
	}
	table_endscan(scan);
	table_close(rel, AccessShareLock);
	CommitTransactionCommand();
}

/*
 * Look again at the databases where CREATE EXTENSION or a source table
 * committed (or at every database not served, if too many came at once).
 * A database whose supervisor runs (or starts) may have looked before the
 * commit: it is looked at again if that supervisor finds nothing to serve.
 */
static void
take_hints(void)
{
	Oid			hints[SW_HINTS_TAKEN];
	bool		all;
	int			n = sw_databases_take_hints(hints, SW_HINTS_TAKEN, &all);
	HASH_SEQ_STATUS seq;
	LauncherDatabase *db;

	for (int i = 0; i < n; i++)
	{
		db = hash_search(databases, &hints[i], HASH_FIND, NULL);
		if (db && db->handle)
			db->told = true;
		else if (db && UNSERVED(db->state))
		{
			db->state = SW_LAUNCHER_NEW;
			db->start_after = 0;
		}
	}
	if (!all)
		return;
	hash_seq_init(&seq, databases);
	while ((db = hash_seq_search(&seq)) != NULL)
	{
		if (db->handle)
			db->told = true;
		else if (UNSERVED(db->state))
			db->state = SW_LAUNCHER_NEW;
	}
}

/* start the supervisor of a database; false if no worker process is free */
static bool
start_supervisor(LauncherDatabase *db, TimestampTz now)
{
	BackgroundWorker worker;
	MemoryContext old;
	bool		started;

	if (!sw_database_prepare(db->dboid, NameStr(db->name)))
		return false;
	sw_worker_describe(&worker, "source_writes", "source_writes_supervisor_main",
					   "source_writes supervisor", ObjectIdGetDatum(db->dboid));
	snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes supervisor for database %u", db->dboid);
	old = MemoryContextSwitchTo(TopMemoryContext);
	started = RegisterDynamicBackgroundWorker(&worker, &db->handle);
	MemoryContextSwitchTo(old);
	if (!started)
	{
		db->handle = NULL;
		return false;
	}
	db->started_at = now;
	db->told = false;			/* it looks after what it was told of */
	return true;
}

/*
 * A database that is gone, or no longer has the extension: what was kept
 * for it goes.
 */
static void
forget_database(Oid dboid)
{
	sw_database_forget(dboid);
	sw_workers_forget_database(dboid);
	sw_notifier_forget_database(dboid);
}

/*
 * Keep the supervisor of a database running while it may have the
 * extension.  Supervisors that look at a new database are counted in
 * *looking; *more_to_look is set when a database waits for one.  Returns
 * false once the database is gone (the caller removes it from the hash).
 */
static bool
supervise_database(LauncherDatabase *db, TimestampTz now, int *looking,
				   bool *more_to_look)
{
	bool		wanted = sw_database_paused(db->dboid);
	pid_t		pid;

	if ((db->handle &&
		 GetBackgroundWorkerPid(db->handle, &pid) != BGWH_STOPPED) ||
		(db->handle == NULL && sw_database_supervisor_pid(db->dboid) != 0))
	{
		/* running or starting (maybe started by an earlier launcher) */
		if (sw_database_result(db->dboid) == SW_DATABASE_SERVED)
			db->state = SW_LAUNCHER_SERVED;
		return true;
	}
	if (db->handle)
	{
		SwDatabaseResult result = sw_database_result(db->dboid);

		pfree(db->handle);
		db->handle = NULL;
		if (result == SW_DATABASE_NO_EXTENSION || result == SW_DATABASE_NO_SOURCES)
		{
			if (db->state == SW_LAUNCHER_SERVED && result == SW_DATABASE_NO_EXTENSION)
				ereport(LOG,
						(errmsg("source tables of database \"%s\" are no longer served",
								NameStr(db->name)),
						 errdetail("The extension was dropped.")));
			db->state = result == SW_DATABASE_NO_EXTENSION ?
				SW_LAUNCHER_NO_EXTENSION : SW_LAUNCHER_NO_SOURCES;
			db->failures = 0;
			db->start_after = 0;
			forget_database(db->dboid);
			/* told of a commit meanwhile: what it saw may be older */
			if (db->told)
				db->state = SW_LAUNCHER_NEW;
			db->told = false;
		}
		else if (wanted ||
				 TimestampDifferenceExceeds(db->started_at, now, SW_HEALTHY_MS))
		{
			/* made to leave, or healthy for long: at once, when it may */
			db->failures = 0;
			db->start_after = 0;
		}
		else
		{
			db->failures++;
			db->start_after =
				TimestampTzPlusMilliseconds(now, sw_backoff_ms(db->failures, 1000,
															   SW_MAX_BACKOFF_MS));
		}
	}

	if (!db->seen)
	{
		/* dropped: the command that dropped it made its workers leave */
		if (db->state == SW_LAUNCHER_SERVED)
			ereport(LOG,
					(errmsg("source tables of database \"%s\" are no longer served",
							NameStr(db->name)),
					 errdetail("The database was dropped.")));
		forget_database(db->dboid);
		return false;
	}
	if (UNSERVED(db->state) || !db->connectable || wanted ||
		now < db->start_after)
		return true;
	if (db->state == SW_LAUNCHER_NEW && *looking >= SW_MAX_LOOKS)
	{
		*more_to_look = true;
		return true;
	}

	if (!start_supervisor(db, now))
	{
		if (!db->warned)
			ereport(WARNING,
					(errmsg("could not start the supervisor of database \"%s\"",
							NameStr(db->name)),
					 errdetail("No background worker slot is free."),
					 errhint("Raise max_worker_processes.")));
		db->warned = true;
		db->start_after = TimestampTzPlusMilliseconds(now, 1000);
		return true;
	}
	db->warned = false;
	if (db->state == SW_LAUNCHER_NEW)
		(*looking)++;
	return true;
}

/*
 * The database the webhook server connects to: the one that
 * source_writes.database names, when it is served, else none
 * (InvalidOid).  *known is false while that database is still being looked
 * at: the server waits for it.
 */
static Oid
webhook_database(bool *known)
{
	HASH_SEQ_STATUS seq;
	LauncherDatabase *db;
	LauncherDatabase *named = NULL;

	*known = true;
	hash_seq_init(&seq, databases);
	while ((db = hash_seq_search(&seq)) != NULL)
		if (strcmp(NameStr(db->name), sw_database) == 0)
			named = db;
	if (named == NULL || !named->connectable || sw_database_paused(named->dboid))
		return InvalidOid;
	if (named->state == SW_LAUNCHER_NEW)
		*known = false;
	return named->state == SW_LAUNCHER_SERVED ? named->dboid : InvalidOid;
}

void
source_writes_launcher_main(Datum main_arg)
{
	HASHCTL		ctl;
	MemoryContext loop_cxt;
	bool		looked_at_all = false;
	TimestampTz started = GetCurrentTimestamp();

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	/* no database: it reads pg_database, a shared catalog */
	BackgroundWorkerInitializeConnection(NULL, NULL, 0);
	pgstat_report_appname("source_writes launcher");
	sw_worker_override_settings();
	ereport(LOG, (errmsg("source_writes launcher started")));

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(LauncherDatabase);
	databases = hash_create("source_writes databases", 64, &ctl, HASH_ELEM | HASH_BLOBS);
	loop_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes launcher",
									 ALLOCSET_DEFAULT_SIZES);
	sw_databases_attach_launcher();
	sw_notifier_attach_launcher();

	for (;;)
	{
		long		timeout = SW_LAUNCHER_MS;
		TimestampTz now;
		HASH_SEQ_STATUS seq;
		LauncherDatabase *db;
		int			looking = 0;
		bool		more_to_look = false;
		bool		known;
		Oid			webhook_dboid;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		MemoryContextSwitchTo(loop_cxt);

		/* databases whose commits wait for a notifier (again soon if none could start) */
		if (!sw_notifier_start_requested())
			timeout = Min(timeout, 1000);

		take_hints();
		read_databases();
		MemoryContextSwitchTo(loop_cxt);

		/* the supervisors: those that look at a new database first counted */
		now = GetCurrentTimestamp();
		hash_seq_init(&seq, databases);
		while ((db = hash_seq_search(&seq)) != NULL)
			if (db->handle && db->state == SW_LAUNCHER_NEW)
				looking++;
		hash_seq_init(&seq, databases);
		while ((db = hash_seq_search(&seq)) != NULL)
			if (!supervise_database(db, now, &looking, &more_to_look))
				(void) hash_search(databases, &db->dboid, HASH_REMOVE, NULL);
		if (more_to_look)
			timeout = Min(timeout, 100);	/* the next ones soon */
		else if (!looked_at_all)
		{
			/*
			 * Every database found at the start has been looked at?  (After
			 * a while, those that could not be are given up.)
			 */
			looked_at_all = true;
			hash_seq_init(&seq, databases);
			while ((db = hash_seq_search(&seq)) != NULL)
				if (db->state == SW_LAUNCHER_NEW && db->connectable)
					looked_at_all = false;
			if (TimestampDifferenceExceeds(started, now, SW_LOOK_AT_ALL_MS))
				looked_at_all = true;
			if (looked_at_all)
				sw_databases_looked_at_all();
		}

		/* the webhook server, while any database has webhook sources */
		webhook_dboid = webhook_database(&known);
		if (known)
			sw_webhook_server_supervise(sw_databases_any_webhooks(), webhook_dboid, now);

		sw_report_stats();
		MemoryContextSwitchTo(TopMemoryContext);
		MemoryContextReset(loop_cxt);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 timeout, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
