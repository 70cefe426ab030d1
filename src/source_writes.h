/*-------------------------------------------------------------------------
 *
 * source_writes.h
 *		  Shared declarations of the source_writes extension
 *
 * A source table is a foreign table of our foreign data wrapper.  Its rows
 * live in hidden heaps in the schema source_writes_internal, one for the
 * current rows and one for the history (see storage.c), and its state lives
 * in the catalog table source_writes.source_tables (see catalog.c).
 *
 * IDENTIFICATION
 *		  src/source_writes.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SOURCE_WRITES_H
#define SOURCE_WRITES_H

#include "access/attnum.h"
#include "datatype/timestamp.h"
#include "executor/tuptable.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

/* schema of the extension's user-facing objects and catalog tables */
#define SW_SCHEMA			"source_writes"
/* schema of the hidden relations that hold the rows of source tables */
#define SW_INTERNAL_SCHEMA	"source_writes_internal"

/*
 * The hidden relations hold the foreign table's columns as they were when
 * it was created, attnum for attnum (so that a current row can be read
 * with the table's own tuple descriptor), then our own columns, then the
 * columns added to the table later, again attnum for attnum after ours.
 */
#define SW_CURRENT_META		1	/* "$batch" */
#define SW_HISTORY_META		2	/* "$batch", "$retracted" */
#define SW_META_BATCH		"$batch"
#define SW_META_RETRACTED	"$retracted"

/* where a hidden relation's own columns are */
typedef struct SwLayout
{
	AttrNumber	meta;			/* attnum of "$batch" */
	int			nmeta;			/* how many of ours: SW_*_META */
} SwLayout;

/* the hidden attnum of the foreign table's attnum */
static inline AttrNumber
sw_hidden_attnum(const SwLayout *layout, AttrNumber attnum)
{
	return attnum < layout->meta ? attnum : attnum + layout->nmeta;
}

/* source timestamps are milliseconds since the Unix epoch */
#define SW_MSECS_PER_DAY	((int64) SECS_PER_DAY * 1000)

/* the two kinds of sources; also used as bit masks in the option table */
typedef enum SwKind
{
	SW_KIND_KAFKA = 0x01,
	SW_KIND_WEBHOOK = 0x02
} SwKind;

typedef enum SwFormat
{
	SW_FORMAT_JSON,
	SW_FORMAT_JSON_ARRAY,
	SW_FORMAT_TEXT,
	SW_FORMAT_BYTES,
	SW_FORMAT_CSV
} SwFormat;

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
typedef struct SwSourceTable
{
	Oid			relid;
	Oid			serverid;
	SwKind		kind;
	SwFormat	format;
	char	   *topic;			/* Kafka */
	bool		upsert;			/* Kafka: envelope 'upsert' */
	List	   *key;			/* Kafka upsert: key column names */
	bool		start_latest;	/* Kafka: start_offset 'latest' */
	int64		retain_history_ms;	/* -1: keep all history */
	int			max_body_bytes; /* webhook */
	char	   *signature_header;
	bool		signature_base64;
	char	   *signature_prefix;
	char	   *idempotency_header;
	int			ncolumns;		/* live columns of the foreign table */
	SwColumn   *columns;
} SwSourceTable;

/* who wrote a batch */
typedef enum SwOrigin
{
	SW_ORIGIN_USER,
	SW_ORIGIN_KAFKA,
	SW_ORIGIN_WEBHOOK,
	SW_ORIGIN_SYSTEM
} SwOrigin;

/* a committed batch, as loaded from source_writes.batches */
typedef struct SwBatch
{
	int64		batch;			/* hash key: the writing transaction */
	int64		ts;
	SwOrigin	origin;
	Oid			role;
} SwBatch;

/* one row of source_writes.source_tables */
typedef struct SwCatalogEntry
{
	Oid			relid;			/* the foreign table */
	SwKind		kind;
	Oid			current_rel;	/* hidden heap of current rows */
	Oid			history_rel;	/* hidden heap of retracted rows */
	int64		upper;
	int64		since;
} SwCatalogEntry;

/* source_writes.c */
extern bool sw_preloaded;
extern int64 sw_as_of;
extern int	sw_compaction_interval;
extern char *sw_database;
extern char *sw_webhook_listen;
extern void sw_warn_if_not_preloaded(void);

/* fdw_options.c */
extern const char *sw_kind_name(SwKind kind);
extern SwKind sw_server_kind(ForeignServer *server);
extern SwSourceTable *sw_source_table(Relation rel);
extern void sw_check_user_mapping(UserMapping *mapping, ForeignServer *server);
extern int64 sw_retention_ms(Oid relid);

/* controller.c */
extern int64 sw_now_ms(void);
extern char *sw_channel_name(Oid relid);
extern int64 sw_controller_batch(Oid relid, SwOrigin origin);
extern int64 sw_retained_since(int64 since, int64 upper, int64 retain_ms);
extern void sw_check_readable(Oid relid, const SwCatalogEntry *entry, int64 ts);
extern void sw_check_source_privilege(Oid relid, AclMode mode);

/* launcher.c */
extern void sw_launcher_register(void);

/* fdw_scan.c */
extern TupleTableSlot *sw_scan_current_row(ForeignScanState *node);

/* fdw_modify.c */
extern void sw_fdw_modify_routine(FdwRoutine *routine);

/* log.c */
extern int64 sw_compact(Oid relid);

/* ddl.c */
extern bool sw_is_source_server(Oid serverid);
extern bool sw_is_source_table(Oid relid);

/* catalog.c */
extern bool sw_catalog_lookup(Oid relid, SwCatalogEntry *entry);
extern void sw_catalog_require(Oid relid, SwCatalogEntry *entry);
extern void sw_catalog_insert(const SwCatalogEntry *entry);
extern void sw_catalog_delete(Oid relid);
extern bool sw_catalog_exists(void);
extern List *sw_catalog_sources_of_server(Oid serverid);
extern List *sw_catalog_all_sources(void);
extern void sw_catalog_lock_source(Oid relid);
extern void sw_catalog_set_frontiers(Oid relid, int64 since, int64 upper);
extern void sw_catalog_insert_batch(Oid source, int64 batch, int64 ts,
									SwOrigin origin, Oid role);
extern struct HTAB *sw_catalog_load_batches(Oid source, int64 max_ts,
											Snapshot snapshot);
extern void sw_catalog_delete_batches(Oid source);
extern const char *sw_origin_name(SwOrigin origin);

/* storage.c */
extern void sw_storage_sync(Oid relid);
extern void sw_storage_forget(Oid relid);
extern Oid	sw_storage_key_index(Oid current_rel);
extern void sw_layout(Relation hidden, SwLayout *layout);
extern void sw_to_hidden(const SwLayout *layout, int natts,
						 const Datum *values, const bool *isnull,
						 Datum *hvalues, bool *hisnull);
extern void sw_from_hidden(const SwLayout *layout, int natts,
						   const Datum *hvalues, const bool *hisnull,
						   Datum *values, bool *isnull);

#endif							/* SOURCE_WRITES_H */
