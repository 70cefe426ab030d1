/*-------------------------------------------------------------------------
 *
 * webhook_worker.c
 *		  The background worker that writes webhook requests into their
 *		  source tables, and answers them after the commit
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/dbcommands.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/syscache.h"

#include "log/log.h"
#include "webhook/webhook.h"
#include "workers/workers.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void source_writes_webhook_main(Datum main_arg);
PGDLLEXPORT void source_writes_webhook_relay_main(Datum main_arg);

/* how long the worker waits between looks at its latch and the server */
#define SW_WEBHOOK_WAIT_MS		1000


/*
 * When the worker leaves: answer what it holds, and stop the server.  A
 * group it was writing is rolled back first, and what its tables' code
 * left to the session released (as ShutdownPostgres would, after this),
 * so that no lock of theirs is held while the answers go.
 */
static void
stop_server(int code, Datum arg)
{
	AbortOutOfAnyTransaction();
	sw_writer_forget_session_state();
	resume_checked(wh_checking, 503);
	wh_checking = NULL;
	answer_unavailable(wh_writing);
	wh_writing = NULL;
	answer_unavailable(wh_in_hand);
	wh_in_hand = NULL;
	sw_relay_finish();
	sw_relay_stop_all();
	sw_webhook_server_stop();
	if (OidIsValid(MyDatabaseId))
		sw_database_set_webhook_writer(MyDatabaseId, 0, "", NULL);
}

/*
 * When a relay leaves: as the server, it answers what it holds, after its
 * group is rolled back; the server learns it left from its queues.
 */
static void
stop_relay(int code, Datum arg)
{
	AbortOutOfAnyTransaction();
	sw_writer_forget_session_state();
	answer_unavailable(wh_writing);
	wh_writing = NULL;
	answer_unavailable(wh_in_hand);
	wh_in_hand = NULL;
	sw_relay_leave();
}

#ifdef SW_BENCHMARK
/*
 * source_writes.webhook_bench_discard, in benchmarks' own builds only:
 * answer each request of a list 200 at once, writing nothing and starting
 * no transaction, so that a benchmark measures what the HTTP side alone
 * can do.
 */
static void
discard_requests(SwRequest *r)
{
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_answer(r, 200, "discarded (source_writes.webhook_bench_discard)\n");
		r = next;
	}
}
#endif

/* what the main thread waits for: its latch, the postmaster, requests */
static WaitEventSet *
make_events(void)
{
	WaitEventSet *events = CreateWaitEventSet(TopMemoryContext, 3);

	AddWaitEventToSet(events, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(events, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(events, WL_SOCKET_READABLE, sw_webhook_server_wake_fd(), NULL, NULL);
	return events;
}

/*
 * Settings of the database or its owner that would change what the worker
 * does (ALTER DATABASE ... SET): overridden, those of every worker of ours
 * (a group commits in read committed, where no serialization failure can
 * fail it whole) and this one: a lock that a user's transaction holds long
 * makes a request fail (503), not every request wait behind it.
 */
static void
override_settings(void)
{
	sw_worker_override_settings();
	SetConfigOption("lock_timeout", "5s", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * What writing requests takes, in a server and in a relay: the caches'
 * callbacks, the memory, the request clock.  Returns the groups' memory.
 */
static MemoryContext
prepare_writing(void)
{
	MemoryContext group_cxt;

	CacheRegisterSyscacheCallback(RELOID, limits_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, limits_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNTABLEREL, limits_invalidated, (Datum) 0);
	group_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook group",
									  ALLOCSET_DEFAULT_SIZES);
	wh_request_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook request",
										ALLOCSET_DEFAULT_SIZES);
	make_tables();
	wh_request_timeout = RegisterTimeout(USER_TIMEOUT, request_timeout_handler);
	return group_cxt;
}

/* append what came to the requests in hand */
static void
take_more(void)
{
	SwRequest  *tail;

	if (wh_in_hand == NULL)
		wh_in_hand = take_requests();
	else
	{
		for (tail = wh_in_hand; tail->next; tail = tail->next)
			;
		tail->next = take_requests();
	}
}

/*
 * Write a group of the requests in hand.  Those left (more than a group,
 * or come after a catalog change) are written in the next turn of the
 * loop, after a look at signals.
 */
static void
write_next_group(MemoryContext group_cxt)
{
	SwRequest  *group = wh_in_hand;
	SwRequest  *last = group;

	for (int i = 1; i < SW_WEBHOOK_GROUP && last->next; i++)
		last = last->next;
	wh_in_hand = last->next;
	last->next = NULL;
	wh_writing = group;
	write_group(group, group_cxt);
	MemoryContextReset(group_cxt);
}

/*
 * Set the webhook server up: connect to database dboid (or to none), claim
 * the server's place (or leave, if another has it), start the HTTP server
 * and publish the first map of limits.  Returns the memory context of the
 * groups.
 */
static MemoryContext
start_webhook_server(Oid dboid)
{
	MemoryContext group_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!sw_database_enter(dboid))
		proc_exit(0);			/* DROP DATABASE...: the launcher comes back */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes webhook server");
	override_settings();

	if (OidIsValid(dboid))
	{
		StartTransactionCommand();
		wh_database_name = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
		CommitTransactionCommand();
		MemoryContextSwitchTo(TopMemoryContext);
	}
	if (!sw_webhook_worker_attach())
		proc_exit(0);			/* another one serves */

	before_shmem_exit(stop_server, (Datum) 0);
	sw_relay_server_start(dboid, wh_database_name, sw_webhook_judge_check);
	group_cxt = prepare_writing();
	start_configured_server();
	if (OidIsValid(dboid))
		sw_database_set_webhook_writer(dboid, MyProcPid, "listening", "");
	refresh_limits(true);
#ifdef SW_BENCHMARK
	if (sw_webhook_bench_discard)
		ereport(WARNING,
				(errmsg("webhook server discards every request"),
				 errdetail("source_writes.webhook_bench_discard is on: requests are answered 200 and nothing is written."),
				 errhint("It is for benchmarks only: turn it off and restart the server.")));
#endif
	return group_cxt;
}

/*
 * Take in a reload once no request is in hand: the server may restart,
 * and must not while it holds their connections suspended.  *events is
 * made again if the server has a new pipe.
 */
static void
reload_when_idle(WaitEventSet **events)
{
	if (ConfigReloadPending && wh_in_hand == NULL)
	{
		ConfigReloadPending = false;
		ProcessConfigFile(PGC_SIGHUP);
		override_settings();
		if (reconfigure_server())
		{
			/* the server has a new pipe */
			FreeWaitEventSet(*events);
			*events = make_events();
		}
	}
}

/*
 * The webhook server: main_arg is the database it connects to, or
 * InvalidOid for none (then every request goes to a relay).
 */
void
source_writes_webhook_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	WaitEventSet *events;
	MemoryContext group_cxt;
	TimestampTz last_wanted = GetCurrentTimestamp();
	bool		looked;

	group_cxt = start_webhook_server(dboid);

	events = make_events();

	for (;;)
	{
		WaitEvent	event;

		sw_report_stats();
		/* with requests left from the last group, only a look */
		(void) WaitEventSetWait(events, wh_in_hand ? 0 : SW_WEBHOOK_WAIT_MS,
								&event, 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/* a cancel cancels the request being written; between them, nothing */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();

		reload_when_idle(&events);

		/*
		 * What came, after those left in hand (the server's pipe wakes the
		 * next wait for more); those to other databases go to their relays,
		 * whose answers come back (their queues set our latch)
		 */
		take_more();
		sw_relay_pump();
		looked = answer_checks();
		sw_relay_flush();		/* the asks for maps the checks made */
		if (wh_in_hand == NULL)
		{
			/*
			 * Idle: leave once no database has had webhook sources for a
			 * while (the supervisors tell, about once a second)
			 */
			TimestampTz now = GetCurrentTimestamp();

			if (!looked)
				refresh_limits(true);	/* take in catalog changes */

			if (sw_databases_any_webhooks())
				last_wanted = now;
			else if (TimestampDifferenceExceeds(last_wanted, now, 5 * SW_WEBHOOK_WAIT_MS))
				proc_exit(0);
			continue;
		}
#ifdef SW_BENCHMARK
		if (sw_webhook_bench_discard)
		{
			discard_requests(wh_in_hand);
			wh_in_hand = NULL;
			continue;
		}
#endif

		write_next_group(group_cxt);
		sw_relay_pump();
		(void) answer_checks();
		sw_relay_flush();
		refresh_limits(false);
	}
}

/*
 * A relay: the webhook worker of a database other than the server's,
 * which writes the requests the server hands it (main_arg: the segment of
 * its queues, webhook_relay.c).  It leaves when the server does, and
 * then writes nothing more (nobody could be told it was written).
 */
void
source_writes_webhook_relay_main(Datum main_arg)
{
	Oid			dboid;
	MemoryContext group_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	wh_relay_mode = true;
	dboid = sw_relay_attach(DatumGetUInt32(main_arg));
	if (!sw_database_enter(dboid))
		proc_exit(0);			/* DROP DATABASE...: the server comes back */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes webhook worker");
	override_settings();

	StartTransactionCommand();
	wh_database_name = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
	CommitTransactionCommand();
	MemoryContextSwitchTo(TopMemoryContext);

	sw_relay_connect();
	before_shmem_exit(stop_relay, (Datum) 0);
	group_cxt = prepare_writing();
	refresh_limits(true);

	for (;;)
	{
		sw_report_stats();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 wh_in_hand ? 0 : SW_WEBHOOK_WAIT_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/* a cancel cancels the request being written; between them, nothing */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending && wh_in_hand == NULL)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			override_settings();
		}

		take_more();

		/*
		 * The server left: what we hold is not written (stop_relay drops
		 * it), since nobody could be told it was
		 */
		if (wh_server_gone || sw_relay_server_left())
			proc_exit(0);
		if (sw_relay_refresh_wanted())
		{
			/* the server waits for a fresh map */
			refresh_limits(true);
			sw_relay_refresh_answered();
		}
		if (wh_in_hand == NULL)
		{
			refresh_limits(true);	/* take in catalog changes */
			continue;
		}
		write_next_group(group_cxt);
		refresh_limits(false);
	}
}
