/*-------------------------------------------------------------------------
 *
 * fdw.h
 *		  The foreign data wrapper: its callbacks, and the options of its
 *		  servers, user mappings and source tables
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_FDW_H
#define SW_FDW_H

#include "access/attnum.h"
#include "executor/tuptable.h"
#include "foreign/foreign.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

#include "source_writes.h"

/*
 * fdw.c
 * The foreign data wrapper's callbacks, by role
 */

/*
 * Named as structs, so that the files of other subsystems that include
 * this header do not get the planner's and executor's node types too.
 */
struct FdwRoutine;
struct ForeignScanState;

/* fdw_scan.c: planning, scans, EXPLAIN, ANALYZE */
extern void sw_fdw_scan_routine(struct FdwRoutine *routine);
extern TupleTableSlot *sw_scan_current_row(struct ForeignScanState *node);

/* fdw_modify.c: INSERT, UPDATE, DELETE, COPY, TRUNCATE */
extern void sw_fdw_modify_routine(struct FdwRoutine *routine);

/*
 * fdw_options.c, source_table.c
 * What the options of source_writes servers, user mappings, source
 * tables and their columns say, once validated
 */

/* a format of messages (option format): see ingest/ingest.h */
struct SwFormatOps;

/* where a column's value comes from */
typedef enum SwColumnSource
{
	SW_COLUMN_DATA,				/* decoded from the message value or body */
	SW_COLUMN_HEADER,			/* one header, named by the "header" option */
	SW_COLUMN_PARTITION,		/* Kafka metadata */
	SW_COLUMN_OFFSET,
	SW_COLUMN_TIMESTAMP,
	SW_COLUMN_KEY,
	SW_COLUMN_HEADERS,			/* all headers (Kafka and webhook) */
	SW_COLUMN_TOPIC,
	SW_COLUMN_BODY,				/* webhook metadata */
	SW_COLUMN_RECEIVED_AT
} SwColumnSource;

typedef struct SwColumn
{
	AttrNumber	attnum;			/* in the foreign table */
	char	   *name;
	Oid			typid;
	SwColumnSource source;
	char	   *header;			/* SW_COLUMN_HEADER: the header's name */
	char	   *field;			/* SW_COLUMN_DATA, JSON formats: the field */
} SwColumn;

/* everything the options of a source table and its server say */
/* a partition's offset in option start_offset */
typedef struct SwStartOffset
{
	int32		partition;
	int64		offset;
} SwStartOffset;

/* the most workers that may share the partitions of a Kafka source */
#define SW_MAX_SOURCE_WORKERS	16

typedef struct SwSourceTable
{
	Oid			relid;
	Oid			serverid;
	SwKind		kind;
	const struct SwFormatOps *format;
	char	   *topic;			/* Kafka */
	bool		upsert;			/* Kafka: envelope 'upsert' */
	List	   *key;			/* Kafka upsert: key column names */
	bool		start_latest;	/* Kafka: start_offset 'latest' */
	List	   *start_offsets;	/* ... or offsets of partitions: SwStartOffset */
	int			workers;		/* Kafka: workers that share the partitions */
	int64		retain_history_ms;	/* -1: keep all history */
	int			max_body_bytes; /* webhook */
	char	   *signature_header;
	bool		signature_base64;
	char	   *signature_prefix;
	char	   *idempotency_header;
	int			ncolumns;		/* live columns of the foreign table */
	SwColumn   *columns;
} SwSourceTable;

extern const char *sw_kind_name(SwKind kind);
extern SwKind sw_server_kind(ForeignServer *server);
extern PGDLLEXPORT SwSourceTable *sw_source_table(Relation rel);
extern int	sw_source_workers(Oid relid);
extern PGDLLEXPORT int	sw_source_max_body_bytes(Oid relid);
extern PGDLLEXPORT char *sw_source_signature_header(Oid relid);
extern void sw_check_user_mapping(UserMapping *mapping, ForeignServer *server);
extern int64 sw_retention_ms(Oid relid);
extern List *sw_parse_start_offset(const char *option, const char *value,
								   bool *latest);

#endif							/* SW_FDW_H */
