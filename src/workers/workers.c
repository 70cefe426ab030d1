/*-------------------------------------------------------------------------
 *
 * workers.c
 *		  The ingestion workers of Kafka sources: their shared state, how
 *		  their supervisors keep them running, and what they report
 *
 * See doc/internals.md, "Workers and processes" (Kafka workers).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/workers.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "log/log.h"
#include "options/options.h"
#include "workers/workers.h"

/* how long a background worker's statistics may stay unreported */
#define SW_STATS_INTERVAL_MS	1000

#define SW_STATE_LEN		64
#define SW_ERROR_LEN		256

/* slots beyond max_worker_processes */
#define SW_EXTRA_SLOTS		64

/* the longest wait before a failed worker is started again */
#define SW_MAX_BACKOFF_MS	60000

/* a worker that ran this long before it failed starts again at once */
#define SW_HEALTHY_MS		60000

/* one worker's slot */
typedef struct SwWorkerSlot
{
	Oid			relid;			/* the source it ingests; InvalidOid: free */
	Oid			dboid;
	int			member;			/* its share of the partitions: member of */
	int			members;		/* ... members */
	uint32		generation;		/* bumped each time the slot is given */
	pid_t		pid;			/* its worker; 0 while none is attached */
	Latch	   *latch;
	bool		restart_now;	/* it left to take new options */
	char		state[SW_STATE_LEN];
	char		last_error[SW_ERROR_LEN];
	uint64		wait_requested; /* wait_for()'s requests for watermarks */
	uint64		wait_served;	/* the last request the worker answered */
	int			npartitions;
	SwPartitionReport partitions[SW_MAX_REPORTED_PARTITIONS];
	bool		halted;			/* it stopped until reset_offsets() */
} SwWorkerSlot;

/* webhook sources whose requests are counted */
#define SW_WEBHOOK_COUNTED	1024

/* the requests the webhook server answered for one source, since start */
typedef struct SwWebhookCounts
{
	Oid			relid;			/* the source; InvalidOid: free */
	Oid			dboid;
	uint64		accepted;		/* answered 200 */
	uint64		refused;		/* answered anything else */
	char		last_error[SW_ERROR_LEN];	/* the last refusal's status and text */
} SwWebhookCounts;

typedef struct SwWorkersShared
{
	LWLock	   *lock;			/* protects all of it */
	ConditionVariable reported; /* broadcast when a worker reports */
	pid_t		webhook_pid;	/* the webhook server's worker, 0 if none */
	Oid			webhook_dboid;	/* its database */
	char		webhook_error[SW_ERROR_LEN];	/* why it could not start; "" */
	SwWebhookCounts webhook_counts[SW_WEBHOOK_COUNTED];
	int			nslots;
	SwWorkerSlot slots[FLEXIBLE_ARRAY_MEMBER];
} SwWorkersShared;

static SwWorkersShared *shared = NULL;

/* the supervisor's own view of each slot's worker */
typedef struct SwSupervised
{
	BackgroundWorkerHandle *handle; /* NULL: none started */
	TimestampTz started_at;
	TimestampTz start_after;	/* backoff */
	int			failures;
} SwSupervised;

static SwSupervised *supervised = NULL;

/* a Kafka source, and how many workers it wants */
typedef struct SwWanted
{
	Oid			relid;
	char	   *name;			/* for messages */
	int			workers;
	bool		short_of_slots; /* some of its workers got no slot */
} SwWanted;

/* the supervisor: the sources it warned about having no slot, until they get one */
static List *warned_no_slot = NIL;

/* a worker's own slot */
static int	my_index = -1;
static uint32 my_generation = 0;

PG_FUNCTION_INFO_V1(source_writes_worker_status);
PG_FUNCTION_INFO_V1(source_writes_partition_status);
PG_FUNCTION_INFO_V1(source_writes_wait_for);

/*
 * A slot for each worker that can run, and more, so that sources waiting
 * for a worker process can say so.
 */
static int
slot_count(void)
{
	return max_worker_processes + SW_EXTRA_SLOTS;
}

static Size
workers_shmem_size(void)
{
	return MAXALIGN(add_size(offsetof(SwWorkersShared, slots),
							 mul_size(slot_count(), sizeof(SwWorkerSlot))));
}

/* the registry's address; a new one gets its lock and its slots */
static void
workers_shmem_attach(void *mem, LWLock *lock, bool created)
{
	shared = mem;
	if (created)
	{
		shared->lock = lock;
		ConditionVariableInit(&shared->reported);
		shared->nslots = slot_count();
	}
}

const SwShmemRegistry sw_workers_registry = {
	"source_writes workers", workers_shmem_size, NULL, workers_shmem_attach
};

/*
 * Copy an error's text into one of the SW_ERROR_LEN buffers of shared
 * memory, cut on a character's boundary if it is longer.
 */
static void
copy_error(char *to, const char *error)
{
	int			len = pg_mbcliplen(error, strlen(error), SW_ERROR_LEN - 1);

	memcpy(to, error, len);
	to[len] = '\0';
}

/*
 * Set the state (and, if error is not NULL, the last error) of a slot that
 * is still in the given generation.
 */
static void
report(int index, uint32 generation, const char *state, const char *error)
{
	SwWorkerSlot *slot = &shared->slots[index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == generation)
	{
		strlcpy(slot->state, state, SW_STATE_LEN);
		if (error)
			copy_error(slot->last_error, error);
	}
	LWLockRelease(shared->lock);
}

/* does a source of the current database have a worker slot? */
static bool
has_slot(Oid relid)
{
	bool		found = false;

	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots && !found; i++)
		found = shared->slots[i].relid == relid &&
			shared->slots[i].dboid == MyDatabaseId;
	LWLockRelease(shared->lock);
	return found;
}

/*
 * The Kafka sources of the supervisor's database, and how many workers
 * each wants, as a list of SwWanted in the caller's memory context;
 * *extension says whether the extension is there, *webhooks whether the
 * database has webhook sources, *any whether it has source tables at all.
 */
static List *
kafka_sources(bool *extension, bool *webhooks, bool *any)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *result = NIL;
	ListCell   *lc;
	bool		restoring;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	/* after the snapshot: a restore registers before it commits */
	restoring = sw_database_restoring(MyDatabaseId) != 0;
	*extension = sw_catalog_exists();
	if (*extension)
	{
		List	   *sources = sw_catalog_sources_of_kind(SW_KIND_ANY);

		*any = sources != NIL;
		foreach(lc, sources)
		{
			SwSource   *source = lfirst(lc);
			int			workers;
			char	   *name;
			MemoryContext old;
			SwWanted   *w;

			if (source->kind == SW_KIND_WEBHOOK)
				*webhooks = true;
			/* a moved source takes no writes: its workers stop */
			if (source->kind != SW_KIND_KAFKA || source->moved)
				continue;
			workers = sw_source_workers(source->relid);
			name = get_rel_name(source->relid);
			if (workers == 0 || name == NULL)
				continue;		/* dropped meanwhile */
			/* while a restore goes on, only workers already at work go on */
			if (restoring && !has_slot(source->relid))
				continue;
			old = MemoryContextSwitchTo(cxt);
			w = palloc0(sizeof(SwWanted));
			w->relid = source->relid;
			w->name = pstrdup(name);
			w->workers = workers;
			result = lappend(result, w);
			MemoryContextSwitchTo(old);
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(cxt);
	return result;
}

/*
 * Start the worker of a slot; false if no background worker could be
 * registered (max_worker_processes are all taken).
 */
static bool
start_worker(int index, uint32 generation, Oid relid, int member)
{
	BackgroundWorker worker;
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	bool		started;

	sw_worker_describe(&worker, "source_writes_kafka", "source_writes_kafka_main",
					   "source_writes kafka worker", Int32GetDatum(index));
	if (member == 0)
		snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes kafka worker for source %u", relid);
	else
		snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes kafka worker %d for source %u",
				 member + 1, relid);
	memcpy(worker.bgw_extra, &generation, sizeof(generation));
	started = RegisterDynamicBackgroundWorker(&worker, &supervised[index].handle);
	MemoryContextSwitchTo(old);
	if (!started)
		supervised[index].handle = NULL;
	return started;
}

/*
 * Give a free slot to a worker of a source; false if there is none.
 * Called with the lock held.
 */
static bool
assign_slot(Oid relid, int member, int members)
{
	for (int i = 0; i < shared->nslots; i++)
	{
		SwWorkerSlot *slot = &shared->slots[i];

		/* free, and its last worker gone */
		if (OidIsValid(slot->relid) || slot->pid != 0)
			continue;
		slot->relid = relid;
		slot->dboid = MyDatabaseId;
		slot->member = member;
		slot->members = members;
		slot->generation++;
		slot->restart_now = false;
		strlcpy(slot->state, "starting", SW_STATE_LEN);
		slot->last_error[0] = '\0';
		slot->npartitions = 0;
		supervised[i].failures = 0;
		supervised[i].start_after = 0;
		return true;
	}
	return false;
}

/* the launcher's webhook server worker */
static BackgroundWorkerHandle *webhook_handle = NULL;
static TimestampTz webhook_started_at = 0;
static TimestampTz webhook_start_after = 0;
static int	webhook_failures = 0;

/*
 * Keep the webhook server's worker running while it is wanted, connected
 * to database dboid (InvalidOid: none); one that stops is started again
 * after a backoff that doubles, up to a minute (at once after a minute of
 * good health).  One connected to another database than dboid is stopped,
 * to be started again in dboid.  When it is no longer wanted, it leaves
 * by itself once no database has had webhook sources for a while (a
 * source dropped and made again does not stop it).  Run by the launcher.
 */
void
sw_webhook_server_supervise(bool wanted, Oid dboid, TimestampTz now)
{
	pid_t		pid;
	pid_t		running;
	Oid			running_dboid;

	if (shared == NULL)
		return;

	if (webhook_handle &&
		GetBackgroundWorkerPid(webhook_handle, &pid) == BGWH_STOPPED)
	{
		pfree(webhook_handle);
		webhook_handle = NULL;
		if (TimestampDifferenceExceeds(webhook_started_at, now, SW_HEALTHY_MS))
			webhook_failures = 0;
		else
			webhook_failures++;
		webhook_start_after = webhook_failures == 0 ? 0 :
			TimestampTzPlusMilliseconds(now, sw_backoff_ms(webhook_failures, 1000,
														   SW_MAX_BACKOFF_MS));
	}
	LWLockAcquire(shared->lock, LW_SHARED);
	running = shared->webhook_pid;
	running_dboid = shared->webhook_dboid;
	LWLockRelease(shared->lock);
	if (!wanted)
		return;					/* it leaves once it has been idle a while */
	if (running != 0 && running_dboid != dboid)
	{
		if (webhook_handle)
			TerminateBackgroundWorker(webhook_handle);
		else
			(void) kill(running, SIGTERM);	/* an earlier launcher started it */
		webhook_start_after = 0;	/* in its new database at once */
		return;
	}
	if (webhook_handle == NULL && now >= webhook_start_after && running == 0)
	{
		BackgroundWorker worker;
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		sw_worker_describe(&worker, "source_writes_webhook", "source_writes_webhook_main",
						   "source_writes webhook server", ObjectIdGetDatum(dboid));
		if (RegisterDynamicBackgroundWorker(&worker, &webhook_handle))
			webhook_started_at = now;
		else
		{
			webhook_handle = NULL;
			webhook_start_after = TimestampTzPlusMilliseconds(now, 1000);
		}
		MemoryContextSwitchTo(old);
	}
}

/* the webhook server's worker leaves */
static void
detach_webhook_worker(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->webhook_pid == MyProcPid)
		shared->webhook_pid = 0;
	LWLockRelease(shared->lock);
}

/*
 * The webhook server's worker says it runs; false if another one does (a
 * launcher that restarted does not know the one its predecessor started).
 */
bool
sw_webhook_worker_attach(void)
{
	bool		mine = false;

	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->webhook_pid == 0 || kill(shared->webhook_pid, 0) != 0)
	{
		shared->webhook_pid = MyProcPid;
		shared->webhook_dboid = MyDatabaseId;
		mine = true;
	}
	LWLockRelease(shared->lock);
	if (mine)
		before_shmem_exit(detach_webhook_worker, (Datum) 0);
	return mine;
}

/*
 * The webhook server says why it cannot start (the sources view shows it
 * until it starts), or, with NULL, that it listens.
 */
void
sw_webhook_worker_report_error(const char *error)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->webhook_pid == MyProcPid)
		copy_error(shared->webhook_error, error ? error : "");
	LWLockRelease(shared->lock);
}

/*
 * Count a request the webhook server answered for a source of its
 * database, with the status and text it answered (status 0: it closed the
 * connection without an answer, for the reason text says).  The counts of
 * the first SW_WEBHOOK_COUNTED sources are kept; the others are not
 * counted.
 */
void
sw_webhook_worker_count(Oid relid, int status, const char *text)
{
	sw_webhook_worker_count_in(MyDatabaseId, relid, status, text);
}

/* the same, for a source of database dboid */
void
sw_webhook_worker_count_in(Oid dboid, Oid relid, int status, const char *text)
{
	SwWebhookCounts *counts = NULL;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_WEBHOOK_COUNTED; i++)
	{
		SwWebhookCounts *c = &shared->webhook_counts[i];

		if (c->relid == relid && c->dboid == dboid)
		{
			counts = c;
			break;
		}
		if (counts == NULL && !OidIsValid(c->relid))
			counts = c;
	}
	if (counts && !OidIsValid(counts->relid))
	{
		memset(counts, 0, sizeof(SwWebhookCounts));
		counts->relid = relid;
		counts->dboid = dboid;
	}
	if (counts && status == 200)
		counts->accepted++;
	else if (counts)
	{
		/* the status and the first line, cut on a character's boundary */
		int			len = pg_mbcliplen(text, strcspn(text, "\n"), SW_ERROR_LEN - 5);

		counts->refused++;
		if (status == 0)
			snprintf(counts->last_error, SW_ERROR_LEN, "%.*s", len, text);
		else
			snprintf(counts->last_error, SW_ERROR_LEN, "%d %.*s", status, len, text);
	}
	LWLockRelease(shared->lock);
}

/*
 * The webhook sources of the worker's database are these: keep counts for
 * them (as many as there is room for, each with its counts so far), and
 * none for any other table.
 */
void
sw_webhook_worker_track(const Oid *relids, int n)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_WEBHOOK_COUNTED; i++)
	{
		SwWebhookCounts *c = &shared->webhook_counts[i];
		bool		live = false;

		for (int j = 0; j < n && !live && c->dboid == MyDatabaseId; j++)
			live = relids[j] == c->relid;
		if (!live)
			c->relid = InvalidOid;
	}
	for (int j = 0; j < n; j++)
	{
		SwWebhookCounts *free_one = NULL;
		bool		found = false;

		for (int i = 0; i < SW_WEBHOOK_COUNTED && !found; i++)
		{
			SwWebhookCounts *c = &shared->webhook_counts[i];

			found = c->relid == relids[j] && c->dboid == MyDatabaseId;
			if (free_one == NULL && !OidIsValid(c->relid))
				free_one = c;
		}
		if (!found && free_one)
		{
			memset(free_one, 0, sizeof(SwWebhookCounts));
			free_one->relid = relids[j];
			free_one->dboid = MyDatabaseId;
		}
	}
	LWLockRelease(shared->lock);
}

/*
 * Forget the counts of a webhook source that is dropped (the transaction
 * that drops it might still fail: counts are not transactional).
 */
void
sw_webhook_forget_counts(Oid relid)
{
	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_WEBHOOK_COUNTED; i++)
		if (shared->webhook_counts[i].relid == relid &&
			shared->webhook_counts[i].dboid == MyDatabaseId)
			shared->webhook_counts[i].relid = InvalidOid;
	LWLockRelease(shared->lock);
}

/* how many workers a source wants, in a list of SwWanted; 0 if none */
static int
wanted_workers(List *sources, Oid relid)
{
	ListCell   *lc;

	foreach(lc, sources)
		if (((SwWanted *) lfirst(lc))->relid == relid)
			return ((SwWanted *) lfirst(lc))->workers;
	return 0;
}

/*
 * Share the slots out among the sources wanted (SwWanted), under the lock:
 * the slots of a source that is gone, or wants another number of workers
 * (its partitions are shared out anew), are freed and marked in to_stop;
 * each worker wanted without a slot gets a free one, or its source is
 * marked short of slots.
 */
static void
share_out_slots(List *sources, bool *to_stop)
{
	ListCell   *lc;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		SwWorkerSlot *slot = &shared->slots[i];

		if (!OidIsValid(slot->relid) || slot->dboid != MyDatabaseId)
			continue;
		if (wanted_workers(sources, slot->relid) != slot->members)
		{
			slot->relid = InvalidOid;
			slot->generation++;
			to_stop[i] = true;
		}
	}
	foreach(lc, sources)
	{
		SwWanted   *w = lfirst(lc);

		for (int m = 0; m < w->workers; m++)
		{
			bool		found = false;

			for (int i = 0; i < shared->nslots && !found; i++)
				found = shared->slots[i].relid == w->relid &&
					shared->slots[i].dboid == MyDatabaseId &&
					shared->slots[i].member == m;
			if (!found && !assign_slot(w->relid, m, w->workers))
				w->short_of_slots = true;
		}
	}
	LWLockRelease(shared->lock);
}

/* say so once for each source short of slots, until it has them */
static void
warn_short_of_slots(List *sources)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	List	   *short_of_slots = NIL;
	ListCell   *lc;

	foreach(lc, sources)
	{
		SwWanted   *w = lfirst(lc);

		if (!w->short_of_slots)
			continue;
		if (!list_member_oid(warned_no_slot, w->relid))
			ereport(WARNING,
					(errmsg("no worker slot is free for source table \"%s\"", w->name),
					 errhint("Each Kafka source table takes a background worker, or as many as its option \"workers\" says; raise max_worker_processes.")));
		short_of_slots = lappend_oid(short_of_slots, w->relid);
	}
	list_free(warned_no_slot);
	warned_no_slot = short_of_slots;
	MemoryContextSwitchTo(old);
}

/*
 * Keep the worker of slot i running: stop it first if stop (its slot was
 * freed).  One that stopped is started again at once if it asked to be
 * or ran long enough, else after a backoff that grows with each failure.
 */
static void
supervise_slot(int i, bool stop, TimestampTz now)
{
	SwSupervised *sup = &supervised[i];
	SwWorkerSlot *slot = &shared->slots[i];
	pid_t		pid;
	Oid			relid;
	uint32		generation;
	bool		restart_now;
	int			member;

	if (stop && sup->handle)
		TerminateBackgroundWorker(sup->handle);

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	relid = slot->relid;
	generation = slot->generation;
	restart_now = slot->restart_now;
	pid = slot->pid;
	member = slot->member;
	LWLockRelease(shared->lock);

	/* a worker that an earlier supervisor started is still at work */
	if (sup->handle == NULL && pid != 0)
		return;
	if (sup->handle &&
		GetBackgroundWorkerPid(sup->handle, &pid) != BGWH_STOPPED)
		return;					/* running, or starting */
	if (sup->handle)
	{
		/* it stopped: start it again at once, or after a backoff */
		pfree(sup->handle);
		sup->handle = NULL;
		if (restart_now ||
			TimestampDifferenceExceeds(sup->started_at, now, SW_HEALTHY_MS))
			sup->failures = 0;
		else
			sup->failures++;
		sup->start_after = sup->failures == 0 ? 0 :
			TimestampTzPlusMilliseconds(now, sw_backoff_ms(sup->failures, 1000,
														   SW_MAX_BACKOFF_MS));
	}
	if (!OidIsValid(relid) || shared->slots[i].dboid != MyDatabaseId ||
		now < sup->start_after)
		return;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	slot->restart_now = false;
	LWLockRelease(shared->lock);
	if (start_worker(i, generation, relid, member))
		sup->started_at = now;
	else
	{
		report(i, generation, "waiting for a background worker",
			   "max_worker_processes are all in use");
		sup->start_after = TimestampTzPlusMilliseconds(now, 1000);
	}
}

/*
 * Keep the workers of each Kafka source of the database running, and none
 * for sources that are gone (all of them once the extension is gone).
 * *extension says whether the extension is there, *webhooks whether the
 * database has webhook sources, *any whether it has source tables at
 * all.  Run by the database's supervisor, outside a transaction.
 */
void
sw_workers_supervise(bool *extension, bool *webhooks, bool *any)
{
	List	   *sources;
	ListCell   *lc;
	TimestampTz now = GetCurrentTimestamp();
	bool	   *to_stop;

	*extension = true;
	*webhooks = false;
	*any = true;
	if (shared == NULL)
		return;
	if (supervised == NULL)
		supervised = MemoryContextAllocZero(TopMemoryContext,
											sizeof(SwSupervised) * shared->nslots);
	*any = false;
	sources = kafka_sources(extension, webhooks, any);
	to_stop = palloc0(sizeof(bool) * shared->nslots);

	share_out_slots(sources, to_stop);
	warn_short_of_slots(sources);
	for (int i = 0; i < shared->nslots; i++)
		supervise_slot(i, to_stop[i], now);

	pfree(to_stop);
	foreach(lc, sources)
		pfree(((SwWanted *) lfirst(lc))->name);
	list_free_deep(sources);
}

/*
 * Stop the workers the supervisor started; when it leaves after DROP
 * EXTENSION.
 */
void
sw_workers_stop_all(void)
{
	if (supervised == NULL)
		return;
	for (int i = 0; i < shared->nslots; i++)
		if (supervised[i].handle)
			TerminateBackgroundWorker(supervised[i].handle);
}

/*
 * The launcher no longer serves a database (it was dropped, or lost the
 * extension): the slots of its workers that are gone are freed (a worker
 * still running finds its slot gone, and leaves).
 */
void
sw_workers_forget_database(Oid dboid)
{
	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nslots; i++)
	{
		SwWorkerSlot *slot = &shared->slots[i];

		if (OidIsValid(slot->relid) && slot->dboid == dboid)
		{
			slot->relid = InvalidOid;
			slot->generation++;
		}
	}
	for (int i = 0; i < SW_WEBHOOK_COUNTED; i++)
		if (shared->webhook_counts[i].dboid == dboid)
			shared->webhook_counts[i].relid = InvalidOid;
	LWLockRelease(shared->lock);
}

/* a worker leaves its slot */
static void
detach_worker(int code, Datum arg)
{
	SwWorkerSlot *slot = &shared->slots[my_index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->pid == MyProcPid)
	{
		slot->pid = 0;
		slot->latch = NULL;
		if (slot->generation == my_generation && strcmp(slot->state, "running") == 0)
			strlcpy(slot->state, "stopped", SW_STATE_LEN);
	}
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->reported);
}

/*
 * A worker takes its slot: returns the source it ingests, in *dboid its
 * database and in *member and *members its share of the partitions;
 * InvalidOid if the slot was given to another source since the worker was
 * started.
 */
Oid
sw_worker_attach(int index, uint32 generation, Oid *dboid, int *member, int *members)
{
	SwWorkerSlot *slot;
	Oid			relid = InvalidOid;

	if (shared == NULL || index < 0 || index >= shared->nslots)
		return InvalidOid;
	slot = &shared->slots[index];
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == generation && OidIsValid(slot->relid) &&
		(slot->pid == 0 || slot->pid == MyProcPid))
	{
		relid = slot->relid;
		*dboid = slot->dboid;
		*member = slot->member;
		*members = slot->members;
		slot->pid = MyProcPid;
		slot->latch = MyLatch;
		strlcpy(slot->state, "starting", SW_STATE_LEN);
		slot->npartitions = 0;
		slot->halted = false;
	}
	LWLockRelease(shared->lock);
	if (!OidIsValid(relid))
		return InvalidOid;
	my_index = index;
	my_generation = generation;
	before_shmem_exit(detach_worker, (Datum) 0);
	return relid;
}

/*
 * Is the worker's slot still its own?  When its supervisor gives it to
 * another source, or frees it, the worker leaves.
 */
bool
sw_worker_still_assigned(void)
{
	bool		mine;

	LWLockAcquire(shared->lock, LW_SHARED);
	mine = shared->slots[my_index].generation == my_generation;
	LWLockRelease(shared->lock);
	return mine;
}

/*
 * Report what the worker is doing and, if error is not NULL, its last
 * error (the empty string clears it).
 */
void
sw_worker_report_state(const char *state, const char *error)
{
	report(my_index, my_generation, state, error);
	sw_worker_report_halted(false);
}

/*
 * Report that the worker stopped ingesting until somebody says where it
 * goes on (its stored offsets cannot be followed), or no longer: wait_for()
 * then fails once the worker answers its request (without watermarks).
 * Reported after the state that says why.
 */
void
sw_worker_report_halted(bool halted)
{
	SwWorkerSlot *slot = &shared->slots[my_index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == my_generation)
		slot->halted = halted;
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->reported);
}

/*
 * Report the partitions the worker ingests: the next offset of each, as
 * committed, and its high watermark.  Wakes whoever waits for ingestion.
 */
void
sw_worker_report_partitions(int n, const SwPartitionReport *parts)
{
	SwWorkerSlot *slot = &shared->slots[my_index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == my_generation)
	{
		slot->npartitions = Min(n, SW_MAX_REPORTED_PARTITIONS);
		memcpy(slot->partitions, parts, sizeof(SwPartitionReport) * slot->npartitions);
	}
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->reported);
}

/*
 * The last request of wait_for() for fresh watermarks.  The worker answers
 * it with sw_worker_wait_served() once it has reported, after the request,
 * the high watermark of every partition its topic has.
 */
uint64
sw_worker_wait_requested(void)
{
	uint64		request;

	LWLockAcquire(shared->lock, LW_SHARED);
	request = shared->slots[my_index].wait_requested;
	LWLockRelease(shared->lock);
	return request;
}

void
sw_worker_wait_served(uint64 request)
{
	SwWorkerSlot *slot = &shared->slots[my_index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == my_generation)
		slot->wait_served = Max(slot->wait_served, request);
	LWLockRelease(shared->lock);
	ConditionVariableBroadcast(&shared->reported);
}

/*
 * The worker leaves to take new options: the supervisor starts it again at
 * once, without a backoff.
 */
void
sw_worker_restart_soon(void)
{
	SwWorkerSlot *slot = &shared->slots[my_index];

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (slot->generation == my_generation)
		slot->restart_now = true;
	LWLockRelease(shared->lock);
}

/*
 * Report the process's statistics (its tables' inserts and deletes, its
 * commits, its WAL) as a backend does, for autovacuum and the pg_stat
 * views: called between transactions by every background worker of ours,
 * about once a second or more often.  pgstat_report_stat(false) reports at
 * most once a second, measured by the end of the last transaction, which
 * stands still while a worker idles without starting one; what it leaves
 * pending waits for a later call, ten seconds later by the delay it
 * returns.  Instead, what is still pending SW_STATS_INTERVAL_MS after the
 * first call that left it is forced out.
 */
void
sw_report_stats(void)
{
	static TimestampTz due = 0;

	if (due != 0 && GetCurrentTimestamp() >= due)
	{
		due = 0;
		(void) pgstat_report_stat(true);
	}
	else if (pgstat_report_stat(false) == 0)
		due = 0;
	else if (due == 0)
		due = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SW_STATS_INTERVAL_MS);
}

/*
 * Settings of the database or its owner that would stop a worker of ours
 * (ALTER DATABASE ... SET source_writes.as_of, say), or choose what names
 * mean to it, a superuser (search_path): overridden.  Its transactions run
 * at READ COMMITTED, whatever default_transaction_isolation the database
 * or a role sets: under a transaction snapshot, an upsert that meets a key
 * written since would fail its whole batch (40001), and a batch sees the
 * rows committed while it waited for a lock.  (The setting that a table's
 * code changes for the session cannot undo the override.)  At its start,
 * before its first transaction, and after each reload.
 */
void
sw_worker_override_settings(void)
{
	SetConfigOption("source_writes.as_of", "", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
	SetConfigOption("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * In a worker's loop: take in a reload that SIGHUP asked for, if any, and
 * override the settings again (sw_worker_override_settings()).
 */
void
sw_worker_reload(void)
{
	if (!ConfigReloadPending)
		return;
	ConfigReloadPending = false;
	ProcessConfigFile(PGC_SIGHUP);
	sw_worker_override_settings();
}

/*
 * Describe, in *worker, a dynamic background worker of ours: it connects
 * to a database, runs function of library, is never restarted by the
 * postmaster, and this process is told when it starts and stops.  Its
 * name is type until the caller says otherwise.
 */
void
sw_worker_describe(BackgroundWorker *worker, const char *library,
				   const char *function, const char *type, Datum main_arg)
{
	memset(worker, 0, sizeof(BackgroundWorker));
	worker->bgw_flags = BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker->bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker->bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker->bgw_library_name, BGW_MAXLEN, "%s", library);
	snprintf(worker->bgw_function_name, BGW_MAXLEN, "%s", function);
	snprintf(worker->bgw_name, BGW_MAXLEN, "%s", type);
	snprintf(worker->bgw_type, BGW_MAXLEN, "%s", type);
	worker->bgw_main_arg = main_arg;
	worker->bgw_notify_pid = MyProcPid;
}

/* how far a slot's worker is behind the high watermarks it reported */
static int64
slot_lag(const SwWorkerSlot *slot)
{
	int64		lag = 0;

	for (int i = 0; i < slot->npartitions; i++)
		if (slot->partitions[i].high > slot->partitions[i].next_offset)
			lag += slot->partitions[i].high - slot->partitions[i].next_offset;
	return lag;
}

/* may the current user read this table (false if it is gone)? */
static bool
may_read(Oid relid)
{
	return sw_check_source_privilege(relid, GetUserId(), ACL_SELECT, true);
}

/*
 * A copy of the slots in use in the current database, taken under the lock
 * (the caller then checks privileges without holding it); *n of them.
 */
static SwWorkerSlot *
copy_slots(int *n)
{
	SwWorkerSlot *copy;

	*n = 0;
	if (shared == NULL)
		return NULL;
	copy = palloc(sizeof(SwWorkerSlot) * shared->nslots);
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < shared->nslots; i++)
		if (OidIsValid(shared->slots[i].relid) && shared->slots[i].dboid == MyDatabaseId)
			copy[(*n)++] = shared->slots[i];
	LWLockRelease(shared->lock);
	return copy;
}

/*
 * A worker that says it is running but waits for a heavyweight lock (a
 * row of an upsert key that a person's transaction holds, say) is said to
 * wait, for the processes that hold it up, as pg_blocking_pids() finds
 * them: ingestion of its partitions stands still until they let go.
 */
static void
tell_lock_wait(SwWorkerSlot *slot)
{
	ArrayType  *blockers;
	Datum	   *pids;
	int			npids;

	if (slot->pid == 0 || strcmp(slot->state, "running") != 0)
		return;
	blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids,
													  Int32GetDatum(slot->pid)));
	deconstruct_array(blockers, INT4OID, sizeof(int32), true, TYPALIGN_INT,
					  &pids, NULL, &npids);
	if (npids == 1)
		snprintf(slot->state, SW_STATE_LEN, "waiting for a lock held by process %d",
				 DatumGetInt32(pids[0]));
	else if (npids > 1)
		snprintf(slot->state, SW_STATE_LEN, "waiting for a lock held by process %d and %d others",
				 DatumGetInt32(pids[0]), npids - 1);
}

/*
 * What the workers of a source say together, from the copies of their
 * slots (those of copy[from..n) with the source's relid): the state and
 * last error of the first (in member order) that is not simply running,
 * or that some have no slot; the pid of the first; their lag.
 */
static void
source_report(const SwWorkerSlot *copy, int from, int n, Datum *values, bool *nulls)
{
	const SwWorkerSlot *first = NULL;
	const SwWorkerSlot *telling = NULL;
	const SwWorkerSlot *erring = NULL;
	int64		lag = 0;
	int			npartitions = 0;
	int			nworkers = 0;
	const char *state;

	for (int i = from; i < n; i++)
	{
		const SwWorkerSlot *s = &copy[i];

		if (s->relid != copy[from].relid)
			continue;
		nworkers++;
		if (first == NULL || s->member < first->member)
			first = s;
		if (strcmp(s->state, "running") != 0 &&
			(telling == NULL || s->member < telling->member))
			telling = s;
		if (s->last_error[0] != '\0' &&
			(erring == NULL || s->member < erring->member))
			erring = s;
		lag += slot_lag(s);
		npartitions += s->npartitions;
	}
	state = telling ? telling->state : first->state;
	if (telling == NULL && nworkers < first->members)
		state = "waiting for a background worker";	/* the others have no slot */

	values[0] = ObjectIdGetDatum(first->relid);
	values[1] = CStringGetTextDatum(state);
	values[2] = erring ? CStringGetTextDatum(erring->last_error) : (Datum) 0;
	nulls[2] = erring == NULL;
	values[3] = Int32GetDatum(first->pid);
	nulls[3] = first->pid == 0;
	values[4] = Int64GetDatum(lag);
	nulls[4] = npartitions == 0;
	nulls[5] = nulls[6] = true;		/* requests: webhook sources' */
}

/* the state of the sources a restore holds (sw_database_restorer()) */
static char *
restoring_state(pid_t restorer)
{
	return psprintf("waiting for the restore by process %d to end", (int) restorer);
}

/*
 * A row of worker_status() for each webhook source of the current database
 * that the current user may read: the state of what serves it ("listening"
 * when the webhook server runs and the process that writes this
 * database's requests, the server or a relay of the database, runs;
 * "starting" or "waiting for a background worker" while that one does
 * not; "cannot start" with the server's reason as last error, or "not
 * running"), and the requests answered for the source.
 */
static void
webhook_reports(Tuplestorestate *result, TupleDesc desc)
{
	SwWebhookCounts *counts = palloc(sizeof(SwWebhookCounts) * SW_WEBHOOK_COUNTED);
	char		error[SW_ERROR_LEN];
	char		writer_state[SW_WEBHOOK_STATE_LEN];
	char		writer_error[SW_WEBHOOK_ERROR_LEN];
	const char *state;
	const char *state_error = NULL;
	pid_t		server;
	pid_t		pid;
	pid_t		restorer;
	int			n = 0;
	ListCell   *lc;

	LWLockAcquire(shared->lock, LW_SHARED);
	server = shared->webhook_pid;
	strlcpy(error, shared->webhook_error, SW_ERROR_LEN);
	for (int i = 0; i < SW_WEBHOOK_COUNTED; i++)
		if (OidIsValid(shared->webhook_counts[i].relid) &&
			shared->webhook_counts[i].dboid == MyDatabaseId)
			counts[n++] = shared->webhook_counts[i];
	LWLockRelease(shared->lock);
	(void) sw_database_webhook_writer(MyDatabaseId, &pid, writer_state, writer_error);

	if (server == 0)
	{
		pid = 0;
		state = error[0] ? "cannot start" : "not running";
		state_error = error[0] ? error : NULL;
	}
	else if ((restorer = sw_database_restoring(MyDatabaseId)) != 0)
		state = restoring_state(restorer);
	else if (pid != 0)
		state = "listening";
	else
	{
		state = writer_state[0] ? writer_state : "starting";
		state_error = writer_error[0] ? writer_error : NULL;
	}

	foreach(lc, sw_catalog_sources_of_kind(SW_KIND_WEBHOOK))
	{
		SwSource   *source = lfirst(lc);
		SwWebhookCounts *c = NULL;
		Datum		values[7];
		bool		nulls[7] = {0};

		if (!may_read(source->relid))
			continue;
		for (int i = 0; i < n && c == NULL; i++)
			if (counts[i].relid == source->relid)
				c = &counts[i];
		values[0] = ObjectIdGetDatum(source->relid);
		values[1] = CStringGetTextDatum(state);
		if (state_error)
			values[2] = CStringGetTextDatum(state_error);
		else if (c && c->last_error[0])
			values[2] = CStringGetTextDatum(c->last_error);
		else
			nulls[2] = true;
		values[3] = Int32GetDatum(pid);
		nulls[3] = pid == 0;
		nulls[4] = true;		/* lag: Kafka sources' */
		/* not counted: more webhook sources than there is room for */
		values[5] = Int64GetDatum(c ? (int64) c->accepted : 0);
		values[6] = Int64GetDatum(c ? (int64) c->refused : 0);
		nulls[5] = nulls[6] = c == NULL;
		tuplestore_putvalues(result, desc, values, nulls);
	}
}

/*
 * A row of worker_status() for each Kafka source of the current database
 * that the current user may read and that has no worker while a restore
 * goes on (kafka_sources()).
 */
static void
restore_reports(SwWorkerSlot *copy, int n, pid_t restorer,
				Tuplestorestate *result, TupleDesc desc)
{
	ListCell   *lc;

	foreach(lc, sw_catalog_sources_of_kind(SW_KIND_KAFKA))
	{
		SwSource   *source = lfirst(lc);
		Datum		values[7] = {0};
		bool		nulls[7] = {0};
		bool		seen = false;

		for (int i = 0; i < n && !seen; i++)
			seen = copy[i].relid == source->relid;
		if (seen || !may_read(source->relid))
			continue;
		values[0] = ObjectIdGetDatum(source->relid);
		values[1] = CStringGetTextDatum(restoring_state(restorer));
		for (int i = 2; i < 7; i++)
			nulls[i] = true;
		tuplestore_putvalues(result, desc, values, nulls);
	}
}

/*
 * source_writes.worker_status(): what the workers of the current database
 * report, a row per source the current user may read.
 */
Datum
source_writes_worker_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SwWorkerSlot *copy;
	int			n;
	pid_t		restorer;

	InitMaterializedSRF(fcinfo, 0);
	copy = copy_slots(&n);
	for (int i = 0; i < n; i++)
		tell_lock_wait(&copy[i]);

	for (int i = 0; i < n; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};
		bool		seen = false;

		for (int j = 0; j < i && !seen; j++)
			seen = copy[j].relid == copy[i].relid;
		if (seen || !may_read(copy[i].relid))
			continue;
		source_report(copy, i, n, values, nulls);
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	restorer = sw_database_restoring(MyDatabaseId);
	if (restorer != 0)
		restore_reports(copy, n, restorer, rsinfo->setResult, rsinfo->setDesc);
	if (shared != NULL)
		webhook_reports(rsinfo->setResult, rsinfo->setDesc);
	return (Datum) 0;
}

/*
 * source_writes.partition_status(): each partition the workers of the
 * current database report, for the sources the current user may read.
 */
Datum
source_writes_partition_status(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	SwWorkerSlot *copy;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	copy = copy_slots(&n);

	for (int i = 0; i < n; i++)
	{
		if (!may_read(copy[i].relid))
			continue;
		for (int p = 0; p < copy[i].npartitions; p++)
		{
			SwPartitionReport *part = &copy[i].partitions[p];
			Datum		values[5];
			bool		nulls[5] = {0};

			values[0] = ObjectIdGetDatum(copy[i].relid);
			values[1] = Int32GetDatum(part->partition);
			values[2] = Int64GetDatum(part->next_offset);
			values[3] = Int64GetDatum(part->high);
			nulls[3] = part->high < 0;
			values[4] = Int32GetDatum(copy[i].pid);
			nulls[4] = copy[i].pid == 0;
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}
	return (Datum) 0;
}

/*
 * Did the current transaction create or alter the table (its pg_class row
 * or its options), which the worker cannot see before the commit?
 */
static bool
changed_by_us(Oid relid)
{
	int			caches[2] = {RELOID, FOREIGNTABLEREL};
	bool		ours = false;

	for (int i = 0; i < 2 && !ours; i++)
	{
		HeapTuple	tuple = SearchSysCache1(caches[i], ObjectIdGetDatum(relid));

		if (!HeapTupleIsValid(tuple))
			continue;
		ours = TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetXmin(tuple->t_data));
		ReleaseSysCache(tuple);
	}
	return ours;
}

/* the next offset a slot reports for a partition; -1 if none */
static int64
reported_next(const SwWorkerSlot *slot, int32 partition)
{
	for (int i = 0; i < slot->npartitions; i++)
		if (slot->partitions[i].partition == partition)
			return slot->partitions[i].next_offset;
	return -1;
}

/* what wait_for() knows of one worker of the source */
typedef struct SwWaitedWorker
{
	uint32		generation;		/* of its slot, when we asked it; 0: not yet */
	uint64		request;		/* our request for fresh watermarks */
	bool		have_targets;	/* it answered: targets are its watermarks */
	int			ntargets;
	SwPartitionReport targets[SW_MAX_REPORTED_PARTITIONS];
} SwWaitedWorker;

/* what wait_for() knows of the source's workers, from one look to the next */
typedef struct SwWaitState
{
	SwWaitedWorker waited[SW_MAX_SOURCE_WORKERS];	/* by member */
	bool		supervisor_woken;
	char		state[SW_STATE_LEN];	/* of the worker we tell of */
	char		last_error[SW_ERROR_LEN];
	int64		left;			/* messages left to ingest; -1: not known */
	bool		halted;			/* a worker stopped until reset_offsets() */
} SwWaitState;

/*
 * The checks of wait_for() on its source, before it waits: an error if it
 * may not, or cannot.
 */
static void
check_wait_for(Oid relid)
{
	SwSource	source;

	sw_source_resolve(relid, &source, false);
	if (!may_read(relid))
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FOREIGN_TABLE, get_rel_name(relid));
	(void) sw_source_check_kind(&source, SW_KIND_KAFKA,
								"wait_for() waits for a worker to ingest a topic; a webhook source answers each request after its commit.");
	if (changed_by_us(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot wait for source table \"%s\" in the transaction that created or altered it",
						get_rel_name(relid)),
				 errdetail("Its worker starts with the table as committed."),
				 errhint("Commit first, then call wait_for().")));
	if (shared == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" is not ingested: source_writes is not loaded at server start",
						get_rel_name(relid)),
				 errhint("Add source_writes to shared_preload_libraries and restart the server.")));
}

/* when a wait of timeout from now ends; an error if it is negative */
static TimestampTz
wait_deadline(const Interval *timeout)
{
	int64		timeout_us = timeout->time + (int64) timeout->day * USECS_PER_DAY +
		(int64) timeout->month * DAYS_PER_MONTH * USECS_PER_DAY;

	if (timeout_us < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("timeout must not be negative")));
	return GetCurrentTimestamp() + timeout_us;
}

/*
 * Look at a slot of one of the source's workers, under the lock: ask a
 * worker new to us for fresh watermarks (its latch is added to wake),
 * take what it reports after answering as its targets, and count the
 * messages left.  False while it has not reached its targets.
 */
static bool
watch_worker(SwWaitState *ws, SwWorkerSlot *slot, Latch **wake, int *nwake)
{
	SwWaitedWorker *w = &ws->waited[slot->member];
	bool		done = true;

	if (slot->generation != w->generation)
	{
		/* a worker's slot, new to us: ask it for fresh watermarks */
		w->generation = slot->generation;
		w->request = ++slot->wait_requested;
		w->have_targets = false;
		if (slot->latch)
			wake[(*nwake)++] = slot->latch;
	}
	if (!w->have_targets && slot->wait_served >= w->request && slot->pid != 0)
	{
		w->ntargets = slot->npartitions;
		memcpy(w->targets, slot->partitions, sizeof(SwPartitionReport) * w->ntargets);
		w->have_targets = true;
	}
	if (!w->have_targets)
		return false;
	ws->left = Max(ws->left, 0);
	for (int t = 0; t < w->ntargets; t++)
	{
		int64		next = reported_next(slot, w->targets[t].partition);

		if (next < w->targets[t].high)
		{
			done = false;
			ws->left += w->targets[t].high - Max(next, 0);
		}
	}
	return done;
}

/*
 * Take the state of a worker to tell, under the lock: at once that of one
 * halted after our request (so after any reset before it); else that of
 * the first worker (by member) that is not simply running, or of the
 * first.  *told and *told_bad say whose state is taken so far.
 */
static void
tell_worker(SwWaitState *ws, const SwWorkerSlot *slot, int *told, bool *told_bad)
{
	const SwWaitedWorker *w = &ws->waited[slot->member];
	bool		bad = slot->pid == 0 || strcmp(slot->state, "running") != 0;

	if (slot->halted && slot->pid != 0 && slot->wait_served >= w->request &&
		!ws->halted)
	{
		/* it ingests nothing until reset_offsets(): say so now */
		ws->halted = true;
		strlcpy(ws->state, slot->state, SW_STATE_LEN);
		strlcpy(ws->last_error, slot->last_error, SW_ERROR_LEN);
	}
	if (!ws->halted && (*told < 0 || (bad && !*told_bad) ||
						(bad == *told_bad && slot->member < *told)))
	{
		*told = slot->member;
		*told_bad = bad;
		strlcpy(ws->state, slot->pid == 0 ? "no worker" : slot->state, SW_STATE_LEN);
		strlcpy(ws->last_error, slot->last_error, SW_ERROR_LEN);
	}
}

/*
 * One look at the source's workers, under the lock: true once every one
 * has a slot and has reached its targets.  The latches to set are added
 * to wake: those of workers asked for watermarks, and the supervisor's
 * the first time the source has no worker at all.
 */
static bool
watch_workers(Oid relid, SwWaitState *ws, Latch **wake, int *nwake)
{
	int			members = 0;
	int			nslots = 0;
	int			told = -1;		/* the member whose state we tell */
	bool		told_bad = false;
	bool		done = true;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	ws->left = -1;
	for (int i = 0; i < shared->nslots; i++)
	{
		SwWorkerSlot *slot = &shared->slots[i];

		if (slot->relid != relid || slot->dboid != MyDatabaseId ||
			slot->member < 0 || slot->member >= SW_MAX_SOURCE_WORKERS)
			continue;
		members = slot->members;
		nslots++;
		if (!watch_worker(ws, slot, wake, nwake))
			done = false;
		tell_worker(ws, slot, &told, &told_bad);
	}
	if (nslots == 0 && !ws->supervisor_woken)
	{
		/* a new source: the supervisor gives it workers now, not in a second */
		Latch	   *supervisor = sw_database_supervisor_latch(MyDatabaseId);

		if (supervisor)
			wake[(*nwake)++] = supervisor;
		ws->supervisor_woken = true;
	}
	if (nslots == 0 || nslots < members)
		done = false;			/* some worker has no slot yet */
	LWLockRelease(shared->lock);
	return done;
}

/*
 * source_writes.wait_for(source, timeout): return once the source's workers
 * have committed every message its topic held when we asked.  We ask each
 * worker for fresh high watermarks, take those it reports after answering
 * as targets, and wait until each partition's next offset reaches its
 * target.  While a worker does not run (the supervisor has not started it
 * yet, or starts it again), we wait for it.
 */
Datum
source_writes_wait_for(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Interval   *timeout = PG_GETARG_INTERVAL_P(1);
	TimestampTz deadline;
	SwWaitState *ws = palloc0(sizeof(SwWaitState));

	strlcpy(ws->state, "no worker", SW_STATE_LEN);
	ws->left = -1;
	check_wait_for(relid);
	deadline = wait_deadline(timeout);

	ConditionVariablePrepareToSleep(&shared->reported);
	for (;;)
	{
		Latch	   *wake[SW_MAX_SOURCE_WORKERS + 1];
		int			nwake = 0;
		bool		done = watch_workers(relid, ws, wake, &nwake);
		long		remaining;

		for (int i = 0; i < nwake; i++)
			SetLatch(wake[i]);
		if (ws->halted)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("source table \"%s\" stopped ingesting its topic",
							get_rel_name(relid)),
					 errdetail("Its state is \"%s\": %s.", ws->state, ws->last_error),
					 errhint("Say where it goes on with source_writes.reset_offsets().")));
		}
		if (done)
			break;
		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
		if (remaining <= 0)
		{
			ConditionVariableCancelSleep();
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("source table \"%s\" did not catch up with its topic within %s",
							get_rel_name(relid),
							DatumGetCString(DirectFunctionCall1(interval_out,
																IntervalPGetDatum(timeout)))),
					 ws->left >= 0
					 ? errdetail("Its state is \"%s\", with " INT64_FORMAT " messages left to ingest.",
								 ws->state, ws->left)
					 : errdetail("Its state is \"%s\".", ws->state),
					 ws->last_error[0] ? errhint("Its last error was: %s.", ws->last_error) : 0));
		}
		(void) ConditionVariableTimedSleep(&shared->reported, Min(remaining, 100),
										   PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();
	PG_RETURN_VOID();
}
