/*-------------------------------------------------------------------------
 *
 * source_writes.h
 *		  Settings of the source_writes extension and what every module uses
 *
 * A source table is a foreign table of our foreign data wrapper.  Its rows
 * live in hidden heaps (storage.h), its state in the extension's catalog
 * (catalog.h), and every committed write is a batch of its log, stamped
 * with a timestamp by the controller (controller.h).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/source_writes.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SOURCE_WRITES_H
#define SOURCE_WRITES_H

#include "datatype/timestamp.h"

/* source timestamps are milliseconds since the Unix epoch */
#define SW_MSECS_PER_DAY	((int64) SECS_PER_DAY * 1000)

/* the two kinds of sources; also used as bit masks in the option table */
typedef enum SwKind
{
	SW_KIND_KAFKA = 0x01,
	SW_KIND_WEBHOOK = 0x02
} SwKind;

/* who wrote a batch */
typedef enum SwOrigin
{
	SW_ORIGIN_USER,
	SW_ORIGIN_KAFKA,
	SW_ORIGIN_WEBHOOK,
	SW_ORIGIN_SYSTEM
} SwOrigin;

#define SW_NUM_ORIGINS		(SW_ORIGIN_SYSTEM + 1)

/* settings (source_writes.c) */
extern bool sw_preloaded;
extern int64 sw_as_of;
extern int	sw_compaction_interval;
extern bool sw_webhook_bench_discard;
extern char *sw_database;
extern char *sw_webhook_listen;
extern char *sw_webhook_ssl_cert_file;
extern char *sw_webhook_ssl_key_file;
extern int	sw_webhook_request_timeout;
extern int	sw_webhook_join_time;

extern void sw_warn_if_not_preloaded(void);

#endif							/* SOURCE_WRITES_H */
