/*-------------------------------------------------------------------------
 *
 * source_writes.c
 *		  Module load: settings, and whether the workers can run
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/source_writes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <limits.h>

#include "fmgr.h"
#include "miscadmin.h"
#include "common/string.h"
#include "utils/builtins.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/plancache.h"

#include "fdw/fdw.h"
#include "ingest/ingest.h"
#include "log/log.h"
#include "source_writes.h"
#include "workers/workers.h"

PG_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

/* true when loaded by the postmaster through shared_preload_libraries */
bool		sw_preloaded = false;

/* settings */
char	   *sw_database = NULL;
char	   *sw_webhook_listen = NULL;
char	   *sw_webhook_ssl_cert_file = NULL;
char	   *sw_webhook_ssl_key_file = NULL;
int			sw_compaction_interval = 60;
int			sw_segment_batches = 4096;
int			sw_segment_delay = 600000;
int			sw_stamp_slots = 1024;
#ifdef SW_BENCHMARK
bool		sw_webhook_bench_discard = false;
#endif
int			sw_webhook_request_timeout = 1000;
int			sw_webhook_join_time = 10;
static char *sw_as_of_string = NULL;

/* source_writes.as_of as a number: -1 when not set */
int64		sw_as_of = -1;

/*
 * source_writes.as_of is empty or a timestamp in ms since the Unix epoch,
 * written as a plain number: digits only.
 */
static bool
check_as_of(char **newval, void **extra, GucSource source)
{
	int64		value = -1;
	int64	   *result;

	if (**newval != '\0')
	{
		size_t		len = strlen(*newval);
		char	   *end;

		errno = 0;
		value = strtoi64(*newval, &end, 10);
		if (strspn(*newval, "0123456789") != len || errno != 0 || *end != '\0')
		{
			GUC_check_errdetail("The value must be a time in milliseconds since the Unix epoch, as source_writes.frontiers() and source_writes.updates() show them, or empty.");
			return false;
		}
	}
	result = malloc(sizeof(int64));
	if (result == NULL)
		return false;
	*result = value;
	*extra = result;
	return true;
}

/*
 * Plans are made for the current rows or for a time (reads as of a time
 * use no index): a change makes cached plans again.
 */
static void
assign_as_of(const char *newval, void *extra)
{
	int64		as_of = *(int64 *) extra;

	if (as_of != sw_as_of)
		ResetPlanCache();
	sw_as_of = as_of;
}

/*
 * Accept "host:port" with a port from 1 to 65535.
 */
static bool
check_webhook_listen(char **newval, void **extra, GucSource source)
{
	const char *colon = strrchr(*newval, ':');
	char	   *end;
	long		port;

	if (colon == NULL || colon == *newval)
	{
		GUC_check_errdetail("The value must have the form host:port.");
		return false;
	}
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
	{
		GUC_check_errdetail("The port must be a number from 1 to 65535.");
		return false;
	}
	return true;
}

/* our registries in shared memory: a new one is one more line */
static const SwShmemRegistry *const registries[] = {
	&sw_databases_registry,
	&sw_notifier_registry,
	&sw_stamps_registry,
	&sw_workers_registry,
};

/*
 * Ask for the registries' shared memory and locks, from the
 * shmem_request_hook.
 */
static void
sw_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	for (int i = 0; i < lengthof(registries); i++)
	{
		const SwShmemRegistry *r = registries[i];

		RequestAddinShmemSpace(MAXALIGN(r->size()));
		if (r->more)
			RequestAddinShmemSpace(r->more());
		RequestNamedLWLockTranche(r->name, 1);
	}
}

/*
 * Create the registries, or attach to them, from the shmem_startup_hook.
 */
static void
sw_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	for (int i = 0; i < lengthof(registries); i++)
	{
		const SwShmemRegistry *r = registries[i];
		bool		found;
		void	   *mem = ShmemInitStruct(r->name, r->size(), &found);

		if (!found)
			memset(mem, 0, r->size());
		r->attach(mem, &(GetNamedLWLockTranche(r->name))->lock, !found);
	}
	LWLockRelease(AddinShmemInitLock);
}

PG_FUNCTION_INFO_V1(source_writes_warn_unless_preloaded);

/*
 * Called by the extension script: CREATE EXTENSION warns at once when the
 * workers cannot run; when they can, the launcher is told at commit that
 * the database has the extension, and serves it.
 */
Datum
source_writes_warn_unless_preloaded(PG_FUNCTION_ARGS)
{
	sw_warn_if_not_preloaded();
	sw_database_extension_created();
	PG_RETURN_VOID();
}

void
_PG_init(void)
{
	sw_preloaded = process_shared_preload_libraries_in_progress;
	/* what the lower layers call back (see doc/internals.md, "Source files") */
	sw_register_formats();
	sw_upper_moved_hook = sw_notifier_wake;

	DefineCustomStringVariable("source_writes.database",
							   "Database the webhook server connects to.",
							   "The workers serve every database that has the extension.  The webhook server writes the requests to this database's webhook sources itself, and hands those to other databases to a worker of theirs.",
							   &sw_database,
							   "postgres",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("source_writes.webhook_listen",
							   "Address (host:port) the webhook server listens on.",
							   "Loopback by default; serve HTTPS with source_writes.webhook_ssl_cert_file and source_writes.webhook_ssl_key_file, or put it behind a proxy that terminates TLS.",
							   &sw_webhook_listen,
							   "127.0.0.1:8432",
							   PGC_SIGHUP,
							   0,
							   check_webhook_listen, NULL, NULL);

	/*
	 * Like ssl_cert_file and ssl_key_file: postgresql.conf or ALTER SYSTEM
	 * only, relative to the data directory.  The webhook worker reads the
	 * files and checks that both are set or neither (webhook_tls.c).
	 */
	DefineCustomStringVariable("source_writes.webhook_ssl_cert_file",
							   "Location of the webhook server's TLS certificate file (PEM).",
							   "With source_writes.webhook_ssl_key_file, the webhook server serves HTTPS only; empty serves HTTP.",
							   &sw_webhook_ssl_cert_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("source_writes.webhook_ssl_key_file",
							   "Location of the webhook server's TLS private key file (PEM, unencrypted).",
							   "With source_writes.webhook_ssl_cert_file, the webhook server serves HTTPS only; empty serves HTTP.",
							   &sw_webhook_ssl_key_file,
							   "",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomIntVariable("source_writes.webhook_request_timeout",
							"Longest time the webhook server spends writing one request.",
							"A request that takes longer (a table's slow default, constraint or trigger) is answered 503 and writes nothing, so that it does not hold up the requests to other tables; 0 means no limit.",
							&sw_webhook_request_timeout,
							1000,
							0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomIntVariable("source_writes.webhook_join_time",
							"How long after the webhook server began to write a group of requests new requests may join it.",
							"Requests that come while a group is written join it, so that one commit serves them all, until this time has passed since it began; later ones wait for the next group.  0 means they never join.",
							&sw_webhook_join_time,
							10,
							0, INT_MAX,
							PGC_SIGHUP,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

	DefineCustomStringVariable("source_writes.as_of",
							   "Reads source tables as of this time (ms since the Unix epoch).",
							   "Empty reads the current contents.  Source tables cannot be modified while it is set.",
							   &sw_as_of_string,
							   "",
							   PGC_USERSET,
							   0,
							   check_as_of, assign_as_of, NULL);

	DefineCustomIntVariable("source_writes.compaction_interval",
							"Time between the background worker's compaction passes.",
							"0 turns the periodic pass off; source_writes.compact() still works.",
							&sw_compaction_interval,
							60,
							0, INT_MAX / 1000,
							PGC_SIGHUP,
							GUC_UNIT_S,
							NULL, NULL, NULL);

	DefineCustomIntVariable("source_writes.segment_batches",
							"Batches that compaction rolls up into one segment of the batch catalog.",
							"Batches that every snapshot sees, all but the newest, are rolled up this many at a time.",
							&sw_segment_batches,
							4096,
							1, PG_UINT16_MAX,
							PGC_SUSET,
							0,
							NULL, NULL, NULL);

	DefineCustomIntVariable("source_writes.segment_delay",
							"How long a batch stays a row of the batch catalog before compaction may roll it up.",
							"Counted in the source's batch timestamps, back from its newest batch.",
							&sw_segment_delay,
							600000,
							0, INT_MAX,
							PGC_SUSET,
							GUC_UNIT_MS,
							NULL, NULL, NULL);

#ifdef SW_BENCHMARK

	/*
	 * For benchmarks only, and only in their own build of the extension
	 * (make SW_BENCHMARK=1), never in a release build: it drops every post.
	 * Set at server start, by a superuser (postgresql.conf, ALTER SYSTEM or
	 * the command line), never in a session; not in the sample file nor in
	 * SHOW ALL, and the webhook server warns in the log while it is on.
	 * Only with the webhook server, which needs shared_preload_libraries (a
	 * setting of the postmaster can be made at its start only).
	 */
	if (sw_preloaded)
		DefineCustomBoolVariable("source_writes.webhook_bench_discard",
								 "For benchmarks only: the webhook server answers 200 to every POST and writes nothing.",
								 "It drops every request: the figure it gives is the HTTP server's ceiling.",
								 &sw_webhook_bench_discard,
								 false,
								 PGC_POSTMASTER,
								 GUC_NOT_IN_SAMPLE | GUC_NO_SHOW_ALL | GUC_SUPERUSER_ONLY,
								 NULL, NULL, NULL);
#endif

	/* shared memory, which only a preloaded library has (from its start) */
	if (sw_preloaded)
		DefineCustomIntVariable("source_writes.stamp_slots",
								"Number of source tables whose batch timestamps are handed out in shared memory at once.",
								"When they are all taken, the least recently used one that no commit uses goes; a source that finds none takes its timestamps through the catalog, one commit after the other.",
								&sw_stamp_slots,
								1024,
								16, 1024 * 1024,
								PGC_POSTMASTER,
								0,
								NULL, NULL, NULL);

	MarkGUCPrefixReserved("source_writes");

	/* CREATE INDEX on source tables, in every backend that loads us */
	sw_indexes_install_hooks();

	if (!sw_preloaded)
		return;

	/* the shared memory of the databases, notifier, timestamps and workers */
	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = sw_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = sw_shmem_startup;

	/*
	 * No workers under pg_upgrade: the launcher would connect to a database
	 * that pg_upgrade is about to drop and restore, and make it fail.
	 */
	if (IsBinaryUpgrade)
		return;

	/* our workers leave a database that DROP DATABASE... needs */
	sw_databases_install_hooks();
	sw_launcher_register();
}
