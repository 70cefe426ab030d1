/*-------------------------------------------------------------------------
 *
 * notifier.c
 *		  Announcing the new upper of sources to listeners
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Notifications).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/notifier.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "commands/async.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "log/log.h"
#include "workers/workers.h"

/* databases whose notifiers can have work at once */
#define SW_NOTIFY_DATABASES		64

/* sources remembered per database; beyond that, all of its sources */
#define SW_NOTIFY_SOURCES		64

/* how long a notifier waits for work before it exits */
#define SW_NOTIFIER_IDLE_MS		1000

/*
 * The shortest time from one round of notifications to the next.  A writer
 * that commits a thousand times a second would otherwise have the notifier
 * run a transaction for nearly each commit, taking a tenth of a CPU from
 * it; the commits of this long are announced together instead.  A commit
 * after a quiet spell is announced at once.
 */
#define SW_NOTIFY_ROUND_MS		10

/* the sources of one database whose upper may have moved */
typedef struct SwNotifyDb
{
	Oid			dboid;			/* InvalidOid: a free slot */
	pid_t		pid;			/* its notifier, 0 if none is attached */
	Latch	   *latch;			/* the notifier's latch */
	bool		requested;		/* the launcher asked for a notifier */
	bool		all;			/* too many to remember: every source */
	int			nsources;
	Oid			sources[SW_NOTIFY_SOURCES];
} SwNotifyDb;

typedef struct SwNotifyShared
{
	LWLock	   *lock;			/* protects everything here */
	Latch	   *launcher_latch; /* NULL while no launcher runs */
	bool		full;			/* a database found no free slot */
	SwNotifyDb	dbs[SW_NOTIFY_DATABASES];
} SwNotifyShared;

static SwNotifyShared *shared = NULL;

/* where a notifier is in its life */
typedef enum SwNotifierState
{
	SW_NOTIFIER_CONNECTING,		/* not attached to its slot yet */
	SW_NOTIFIER_ATTACHED,		/* its slot's pid is ours */
	SW_NOTIFIER_DONE			/* gave its slot up, or never had one */
} SwNotifierState;

static SwNotifierState notifier_state = SW_NOTIFIER_CONNECTING;

PGDLLEXPORT void source_writes_notifier_main(Datum main_arg);

static Size
notifier_shmem_size(void)
{
	return sizeof(SwNotifyShared);
}

/* the registry's address; a new one gets its lock */
static void
notifier_shmem_attach(void *mem, LWLock *lock, bool created)
{
	shared = mem;
	if (created)
		shared->lock = lock;
}

const SwShmemRegistry sw_notifier_registry = {
	"source_writes", notifier_shmem_size, NULL, notifier_shmem_attach
};

/*
 * The notification channel of a source: "source_writes_<oid>".
 */
char *
sw_channel_name(Oid relid)
{
	return psprintf("source_writes_%u", relid);
}

/*
 * Record that the upper of a source may have moved, and wake whoever
 * announces it: the database's notifier, or the launcher to start one.
 * Called after commit and abort: it cannot fail.
 */
void
sw_notifier_wake(Oid dboid, Oid relid)
{
	SwNotifyDb *db = NULL;
	Latch	   *latch = NULL;

	if (shared == NULL)
		return;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_NOTIFY_DATABASES && db == NULL; i++)
		if (shared->dbs[i].dboid == dboid)
			db = &shared->dbs[i];
	for (int i = 0; i < SW_NOTIFY_DATABASES && db == NULL; i++)
		if (shared->dbs[i].dboid == InvalidOid)
		{
			db = &shared->dbs[i];
			memset(db, 0, sizeof(SwNotifyDb));
			db->dboid = dboid;
		}

	if (db == NULL)
		shared->full = true;
	else
	{
		bool		known = db->all;

		for (int i = 0; i < db->nsources && !known; i++)
			known = db->sources[i] == relid;
		if (!known && db->nsources < SW_NOTIFY_SOURCES)
			db->sources[db->nsources++] = relid;
		else if (!known)
			db->all = true;
		/* a source already recorded: whoever takes it has been woken */
		if (!known)
			latch = db->pid != 0 ? db->latch : shared->launcher_latch;
	}
	LWLockRelease(shared->lock);

	if (latch)
		SetLatch(latch);
}

static void
launcher_detach(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = NULL;
	LWLockRelease(shared->lock);
}

/*
 * Make the calling launcher the one that starts notifiers.
 */
void
sw_notifier_attach_launcher(void)
{
	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = MyLatch;
	LWLockRelease(shared->lock);
	before_shmem_exit(launcher_detach, (Datum) 0);
}

/*
 * Start a notifier for every database that has work and none.  Called by
 * the launcher whenever its latch is set.  Returns false when a database
 * could not get a background worker slot: the launcher tries again soon.
 */
bool
sw_notifier_start_requested(void)
{
	Oid			dbs[SW_NOTIFY_DATABASES];
	int			n = 0;
	bool		full;
	bool		started = true;

	if (shared == NULL)
		return true;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_NOTIFY_DATABASES; i++)
	{
		SwNotifyDb *db = &shared->dbs[i];

		if (db->dboid != InvalidOid && db->pid == 0 && !db->requested &&
			(db->nsources > 0 || db->all) && !sw_database_paused(db->dboid))
		{
			db->requested = true;
			dbs[n++] = db->dboid;
		}
	}
	full = shared->full;
	shared->full = false;
	LWLockRelease(shared->lock);

	if (full)
		ereport(WARNING,
				(errmsg("could not record a notification of new batches"),
				 errdetail("More than %d databases had notifications to send at once; listeners of one of them were not told of a new upper.",
						   SW_NOTIFY_DATABASES)));

	for (int i = 0; i < n; i++)
	{
		BackgroundWorker worker;

		sw_worker_describe(&worker, "source_writes", "source_writes_notifier_main",
						   "source_writes notifier", ObjectIdGetDatum(dbs[i]));
		snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes notifier for database %u", dbs[i]);
		worker.bgw_notify_pid = 0;	/* a committing backend: it does not wait */
		if (RegisterDynamicBackgroundWorker(&worker, NULL))
			continue;

		ereport(WARNING,
				(errmsg("could not start the notifier of database %u", dbs[i]),
				 errdetail("It announces the new batches of the database's source tables.  No background worker slot is free."),
				 errhint("Raise max_worker_processes.")));
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (int j = 0; j < SW_NOTIFY_DATABASES; j++)
			if (shared->dbs[j].dboid == dbs[i])
				shared->dbs[j].requested = false;
		LWLockRelease(shared->lock);
		started = false;
	}
	return started;
}

/*
 * A database the launcher no longer serves (it was dropped): its work is
 * dropped, and no notifier is started for it.
 */
void
sw_notifier_forget_database(Oid dboid)
{
	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_NOTIFY_DATABASES; i++)
		if (shared->dbs[i].dboid == dboid && shared->dbs[i].pid == 0 &&
			!shared->dbs[i].requested)
			shared->dbs[i].dboid = InvalidOid;
	LWLockRelease(shared->lock);
}

/* the slot of the notifier's database */
static SwNotifyDb *
my_slot(Oid dboid)
{
	for (int i = 0; i < SW_NOTIFY_DATABASES; i++)
		if (shared->dbs[i].dboid == dboid)
			return &shared->dbs[i];
	return NULL;
}

/*
 * A notifier that exits gives its slot up.  One that could not connect to
 * its database (it was dropped) drops the database's work too, so that the
 * launcher does not start it again and again.
 */
static void
notifier_detach(int code, Datum arg)
{
	Oid			dboid = DatumGetObjectId(arg);
	SwNotifyDb *db;
	Latch	   *latch = NULL;

	if (notifier_state == SW_NOTIFIER_DONE)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = my_slot(dboid);
	if (db != NULL && notifier_state == SW_NOTIFIER_ATTACHED)
	{
		Assert(db->pid == MyProcPid);
		db->pid = 0;
		db->latch = NULL;
		db->requested = false;
		/* work that came after our last look: the launcher starts another */
		if (db->nsources > 0 || db->all)
			latch = shared->launcher_latch;
	}
	else if (db != NULL && db->pid == 0)
		db->dboid = InvalidOid;
	LWLockRelease(shared->lock);
	if (latch)
		SetLatch(latch);
}

/*
 * Take the sources of the notifier's database whose upper may have moved.
 * With nothing to do for long enough, give the slot up instead and return
 * -1: the notifier exits.
 */
static int
take_work(Oid dboid, Oid *sources, bool *all, bool idle)
{
	SwNotifyDb *db;
	int			n;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = my_slot(dboid);
	Assert(db != NULL && db->pid == MyProcPid);
	n = db->nsources;
	*all = db->all;
	memcpy(sources, db->sources, sizeof(Oid) * n);
	db->nsources = 0;
	db->all = false;
	if (n == 0 && !*all && idle)
	{
		/* an empty slot is free for any database */
		db->dboid = InvalidOid;
		db->pid = 0;
		db->latch = NULL;
		db->requested = false;
		notifier_state = SW_NOTIFIER_DONE;
		n = -1;
	}
	LWLockRelease(shared->lock);
	return n;
}

/* the upper last announced per source, to announce each upper once */
typedef struct SwAnnounced
{
	Oid			relid;
	int64		upper;
} SwAnnounced;

/*
 * Notify the channel of each source given (or of every source in the
 * database) whose upper moved, in one transaction.
 */
static void
announce(Oid *sources, int n, bool all, HTAB *announced)
{
	List	   *relids = NIL;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (sw_catalog_exists())
	{
		ListCell   *lc;

		if (all)
			relids = sw_catalog_source_relids(SW_KIND_ANY);
		else
			for (int i = 0; i < n; i++)
				relids = lappend_oid(relids, sources[i]);

		foreach(lc, relids)
		{
			Oid			relid = lfirst_oid(lc);
			SwFrontiers frontiers;
			SwAnnounced *entry;
			bool		found;

			/* only the upper, which needs nothing of the (maybe dropped) table */
			if (!sw_catalog_frontiers(relid, GetActiveSnapshot(), &frontiers))
				continue;
			entry = hash_search(announced, &relid, HASH_ENTER, &found);
			if (found && entry->upper == frontiers.upper)
				continue;
			entry->upper = frontiers.upper;
			Async_Notify(sw_channel_name(relid),
						 psprintf(INT64_FORMAT, frontiers.upper));
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
}

/*
 * The notifier of one database (main_arg): announces new uppers until it
 * has nothing to do for SW_NOTIFIER_IDLE_MS.
 */
void
source_writes_notifier_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	MemoryContext round_cxt;
	HTAB	   *announced;
	HASHCTL		ctl;
	Oid			sources[SW_NOTIFY_SOURCES];
	TimestampTz last_work;
	SwNotifyDb *db;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	if (!sw_database_enter(dboid))
	{
		/* wanted by a command: its work waits for the next notifier */
		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		db = my_slot(dboid);
		if (db != NULL)
			db->requested = false;
		LWLockRelease(shared->lock);
		proc_exit(0);
	}
	before_shmem_exit(notifier_detach, main_arg);
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes notifier");
	sw_worker_override_settings();
	SetConfigOption("synchronous_commit", "off", PGC_SUSET, PGC_S_OVERRIDE);

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	db = my_slot(dboid);
	if (db != NULL && db->pid == 0)
	{
		db->pid = MyProcPid;
		db->latch = MyLatch;
		notifier_state = SW_NOTIFIER_ATTACHED;
	}
	else
	{
		db = NULL;
		notifier_state = SW_NOTIFIER_DONE;
	}
	LWLockRelease(shared->lock);
	if (db == NULL)
		proc_exit(0);			/* nothing to do, or another one does it */

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(SwAnnounced);
	announced = hash_create("source_writes announced uppers", 64, &ctl,
							HASH_ELEM | HASH_BLOBS);
	round_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes notifier",
									  ALLOCSET_DEFAULT_SIZES);
	last_work = GetCurrentTimestamp();

	for (;;)
	{
		bool		all;
		bool		idle;
		int			n;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		sw_report_stats();

		idle = TimestampDifferenceExceeds(last_work, GetCurrentTimestamp(),
										  SW_NOTIFIER_IDLE_MS);
		n = take_work(dboid, sources, &all, idle);
		if (n < 0)
			proc_exit(0);
		if (n > 0 || all)
		{
			MemoryContext old = MemoryContextSwitchTo(round_cxt);

			PG_TRY();
			{
				announce(sources, n, all, announced);
			}
			PG_CATCH();
			{
				/* what was not announced waits for the next notifier */
				for (int i = 0; i < n; i++)
					sw_notifier_wake(dboid, sources[i]);
				PG_RE_THROW();
			}
			PG_END_TRY();
			MemoryContextSwitchTo(old);
			MemoryContextReset(round_cxt);
			last_work = GetCurrentTimestamp();

			/* later commits wait for the next round; the latch stays set */
			(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
							 SW_NOTIFY_ROUND_MS, PG_WAIT_EXTENSION);
			continue;
		}

		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 SW_NOTIFIER_IDLE_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}
