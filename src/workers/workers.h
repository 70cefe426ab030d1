/*-------------------------------------------------------------------------
 *
 * workers.h
 *		  The ingestion workers of Kafka sources: their shared state, how
 *		  their supervisors keep them running, and what they report
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
#include "storage/latch.h"

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
extern Size sw_workers_shmem_size(void);
extern void sw_workers_shmem_request(void);
extern void sw_workers_shmem_startup(void);

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

/* the webhook server's worker */
extern PGDLLEXPORT bool sw_webhook_worker_attach(void);
extern PGDLLEXPORT void sw_webhook_worker_report_error(const char *error);
extern PGDLLEXPORT void sw_webhook_worker_track(const Oid *relids, int n);
extern PGDLLEXPORT void sw_webhook_worker_count(Oid relid, int status, const char *text);
extern PGDLLEXPORT void sw_webhook_worker_count_in(Oid dboid, Oid relid, int status,
												   const char *text);
extern void sw_webhook_forget_counts(Oid relid);

#endif							/* SW_WORKERS_H */
