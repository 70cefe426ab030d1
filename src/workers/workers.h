/*-------------------------------------------------------------------------
 *
 * workers.h
 *		  The background workers: the launcher, the supervisors, the
 *		  ingestion workers' shared state, and the databases they serve
 *
 * See doc/internals.md, "Workers and processes".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/workers.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WORKERS_H
#define SW_WORKERS_H

#include "datatype/timestamp.h"
#include "postmaster/bgworker.h"
#include "storage/latch.h"

#include "source_writes.h"

/*
 * databases.c
 * The databases the workers serve, and keeping out of a database
 * that a command needs to itself
 */

#define SW_WEBHOOK_STATE_LEN	64
#define SW_WEBHOOK_ERROR_LEN	256

/* what the supervisor of a database found there */
typedef enum SwDatabaseResult
{
	SW_DATABASE_UNKNOWN,		/* not looked yet, or still serving */
	SW_DATABASE_SERVED,			/* the extension is there: it serves it */
	SW_DATABASE_NO_EXTENSION,	/* the extension is not (or no longer) there */
	SW_DATABASE_NO_SOURCES		/* the extension is, with no source table */
} SwDatabaseResult;

/* a database whose webhook requests the webhook server takes */
typedef struct SwWebhookDatabase
{
	Oid			dboid;
	NameData	name;
} SwWebhookDatabase;

/* shared memory, from the hooks in source_writes.c */
extern const SwShmemRegistry sw_databases_registry;
extern void sw_databases_install_hooks(void);

/* every worker of ours, before it connects to a database */
extern PGDLLEXPORT bool sw_database_enter(Oid dboid);

/* CREATE EXTENSION, a source table made: the launcher is told at commit */
extern void sw_database_extension_created(void);
extern void sw_database_sources_changed(void);
extern void sw_database_restorer(void);
extern PGDLLEXPORT pid_t sw_database_restoring(Oid dboid);

/* the launcher */
extern void sw_databases_attach_launcher(void);
extern PGDLLEXPORT bool sw_database_paused(Oid dboid);
extern int	sw_databases_take_hints(Oid *dboids, int max, bool *all);
extern bool sw_database_prepare(Oid dboid, const char *name);
extern SwDatabaseResult sw_database_result(Oid dboid);
extern void sw_database_forget(Oid dboid);
extern void sw_databases_looked_at_all(void);
extern PGDLLEXPORT bool sw_databases_any_webhooks(void);
extern pid_t sw_database_supervisor_pid(Oid dboid);

/* the supervisor of a database */
extern void sw_database_supervisor_attach(void);
extern void sw_database_report(SwDatabaseResult result, bool has_webhooks);
extern Latch *sw_database_supervisor_latch(Oid dboid);

/* the webhook server and the workers that write a database's requests */
extern PGDLLEXPORT int	sw_databases_with_webhooks(SwWebhookDatabase *dbs, int max);
extern PGDLLEXPORT bool sw_databases_unsettled(const char *name, size_t len);
extern PGDLLEXPORT void sw_database_set_webhook_writer(Oid dboid, pid_t pid, const char *state,
													   const char *error);
extern PGDLLEXPORT void sw_database_clear_webhook_writer(Oid dboid, pid_t pid);
extern bool sw_database_webhook_writer(Oid dboid, pid_t *pid, char *state, char *error);

/*
 * launcher.c
 * The source_writes background worker of a database
 */

extern void sw_launcher_register(void);
extern void sw_warn_if_not_preloaded(void);

/*
 * notifier.c
 * Announcing the new upper of sources to listeners
 */

extern const SwShmemRegistry sw_notifier_registry;
extern char *sw_channel_name(Oid relid);
extern void sw_notifier_wake(Oid dboid, Oid relid);
extern void sw_notifier_attach_launcher(void);
extern bool sw_notifier_start_requested(void);
extern void sw_notifier_forget_database(Oid dboid);

/*
 * workers.c
 * The ingestion workers of Kafka sources: their shared state, how
 * their supervisors keep them running, and what they report
 */

/*
 * How long to wait before trying again what failed failures times in a
 * row (1 or more): first_ms after the first failure, twice as long after
 * each next one (six times at the most), and never more than max_ms.
 */
static inline long
sw_backoff_ms(int failures, long first_ms, long max_ms)
{
	return Min(max_ms, first_ms << Min(failures - 1, 6));
}

/* partitions a worker reports (it ingests any number) */
#define SW_MAX_REPORTED_PARTITIONS	256

/* what a worker reports of a partition it ingests */
typedef struct SwPartitionReport
{
	int32		partition;
	int64		next_offset;	/* the next offset to ingest, as committed */
	int64		high;			/* the high watermark last seen; -1 if none */
} SwPartitionReport;

/* shared memory, from the hooks in source_writes.c */
extern const SwShmemRegistry sw_workers_registry;

/* the supervisor of a database, and the launcher */
extern void sw_workers_supervise(bool *extension, bool *webhooks, bool *any);
extern void sw_workers_stop_all(void);
extern void sw_workers_forget_database(Oid dboid);
extern void sw_webhook_server_supervise(bool wanted, Oid dboid, TimestampTz now);

/* a worker, about its own slot */
extern PGDLLEXPORT Oid	sw_worker_attach(int index, uint32 generation, Oid *dboid,
										 int *member, int *members);
extern PGDLLEXPORT bool sw_worker_still_assigned(void);
extern PGDLLEXPORT void sw_worker_report_state(const char *state, const char *error);
extern PGDLLEXPORT void sw_worker_report_halted(bool halted);
extern PGDLLEXPORT void sw_worker_report_partitions(int n, const SwPartitionReport *parts);
extern PGDLLEXPORT uint64 sw_worker_wait_requested(void);
extern PGDLLEXPORT void sw_worker_wait_served(uint64 request);
extern PGDLLEXPORT void sw_worker_restart_soon(void);
extern PGDLLEXPORT void sw_report_stats(void);
extern PGDLLEXPORT void sw_worker_override_settings(void);
extern PGDLLEXPORT void sw_worker_reload(void);
extern PGDLLEXPORT void sw_worker_describe(BackgroundWorker *worker,
										   const char *library,
										   const char *function,
										   const char *type, Datum main_arg);

/* the webhook server's worker */
extern PGDLLEXPORT bool sw_webhook_worker_attach(void);
extern PGDLLEXPORT void sw_webhook_worker_report_error(const char *error);
extern PGDLLEXPORT void sw_webhook_worker_track(const Oid *relids, int n);
extern PGDLLEXPORT void sw_webhook_worker_count(Oid relid, int status, const char *text);
extern PGDLLEXPORT void sw_webhook_worker_count_in(Oid dboid, Oid relid, int status,
												   const char *text);
extern void sw_webhook_forget_counts(Oid relid);

#endif							/* SW_WORKERS_H */
