/*-------------------------------------------------------------------------
 *
 * source_writes.h
 *		  Settings of the source_writes extension and what every module uses
 *
 * See doc/internals.md, "Source files".
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
#include "fmgr.h"
#include "storage/lwlock.h"

/*
 * The functions and settings that the extension's other libraries (the
 * Kafka and webhook workers', the tests' module) call in this one are
 * marked PGDLLEXPORT where they are declared, in the headers of their
 * modules: the build hides every other symbol (see the Makefile), as
 * PostgreSQL 16 and later build modules.  Before 16, PG_FUNCTION_INFO_V1
 * does not export the function it declares, nor fmgr.h _PG_init: as 16
 * does, for that build.
 */
#if PG_VERSION_NUM < 160000
#undef PG_FUNCTION_INFO_V1
#define PG_FUNCTION_INFO_V1(funcname) \
extern PGDLLEXPORT Datum funcname(PG_FUNCTION_ARGS); \
extern PGDLLEXPORT const Pg_finfo_record * CppConcat(pg_finfo_,funcname)(void); \
const Pg_finfo_record * \
CppConcat(pg_finfo_,funcname) (void) \
{ \
	static const Pg_finfo_record my_finfo = { 1 }; \
	return &my_finfo; \
} \
extern int no_such_variable

extern PGDLLEXPORT void _PG_init(void);
#endif

/* source timestamps are milliseconds since the Unix epoch */
#define SW_MSECS_PER_DAY	((int64) SECS_PER_DAY * 1000)

/* the two kinds of sources; also used as bit masks in the option table */
typedef enum SwKind
{
	SW_KIND_KAFKA = 0x01,
	SW_KIND_WEBHOOK = 0x02
} SwKind;

/* every kind, as a mask */
#define SW_KIND_ANY		(SW_KIND_KAFKA | SW_KIND_WEBHOOK)

/*
 * A registry of ours in shared memory: a struct with one lock, of the
 * same name (as pg_shmem_allocations and wait events show them).  The
 * list in source_writes.c asks for both and attaches each to its module.
 */
typedef struct SwShmemRegistry
{
	const char *name;			/* of the struct, and of its lock's tranche */
	Size		(*size) (void); /* the struct's */
	Size		(*more) (void); /* what attach allocates besides, or NULL */
	/* keep the struct's address; set it up if created (it is zeroed) */
	void		(*attach) (void *mem, LWLock *lock, bool created);
} SwShmemRegistry;

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
extern int	sw_stamp_slots;
#ifdef SW_BENCHMARK
extern PGDLLEXPORT bool sw_webhook_bench_discard;
#endif
extern char *sw_database;
extern PGDLLEXPORT char *sw_webhook_listen;
extern PGDLLEXPORT char *sw_webhook_ssl_cert_file;
extern PGDLLEXPORT char *sw_webhook_ssl_key_file;
extern PGDLLEXPORT int	sw_webhook_request_timeout;
extern PGDLLEXPORT int	sw_webhook_join_time;


#endif							/* SOURCE_WRITES_H */
