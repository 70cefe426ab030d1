/*-------------------------------------------------------------------------
 *
 * options.h
 *		  What the options of a source table, its columns and its server
 *		  say: read by storage, the decoder, the workers and the webhook
 *		  worker; and the checks of the FDW's validator
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/options/options.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_OPTIONS_H
#define SW_OPTIONS_H

#include "access/attnum.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

#include "source_writes.h"

/* what a Kafka message key is (option key_format) */
typedef enum SwKeyFormat
{
	SW_KEY_JSON,				/* JSON, or bytes if it is not (the default) */
	SW_KEY_TEXT,				/* text, as it is */
	SW_KEY_BYTES,				/* bytes, as they are */
	SW_KEY_AVRO					/* Avro in the Confluent wire format */
} SwKeyFormat;

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
	SW_COLUMN_RECEIVED_AT,
	SW_COLUMN_OP,				/* a Debezium event's envelope */
	SW_COLUMN_BEFORE,
	SW_COLUMN_SOURCE,
	SW_COLUMN_TS_MS
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

/* a partition's offset in option start_offset */
typedef struct SwStartOffset
{
	int32		partition;
	int64		offset;
} SwStartOffset;

/* the most workers that may share the partitions of a Kafka source */
#define SW_MAX_SOURCE_WORKERS	16

/* everything the options of a source table and its server say */
typedef struct SwSourceTable
{
	Oid			relid;
	Oid			serverid;
	SwKind		kind;
	const struct SwFormatOps *format;
	char	   *topic;			/* Kafka */
	bool		upsert;			/* Kafka: envelope 'upsert' (or 'debezium') */
	bool		debezium;		/* Kafka: envelope 'debezium' */
	SwKeyFormat key_format;		/* Kafka */
	List	   *key;			/* Kafka upsert: key column names */
	bool		start_latest;	/* Kafka: start_offset 'latest' */
	List	   *start_offsets;	/* ... or offsets of partitions: SwStartOffset */
	int			workers;		/* Kafka: workers that share the partitions */
	int64		retain_history_ms;	/* -1: keep all history */
	char	   *version_of;		/* the table it is a version of, as named */
	bool		carry_edits;	/* ... and whether people's edits come too */
	bool		carry_edits_given;	/* ... the option is there */
	bool		retain_raw;		/* rows keep the message they came from */
	int			max_body_bytes; /* webhook */
	char	   *signature_header;
	bool		signature_base64;
	char	   *signature_prefix;
	char	   *signature_scheme;	/* NULL: hmac if signature_header */
	int64		signature_tolerance_ms; /* -1: the scheme's default */
	char	   *idempotency_header;
	char	   *idempotency_field;	/* a top-level field of a JSON body */
	int			ncolumns;		/* live columns of the foreign table */
	SwColumn   *columns;
} SwSourceTable;

/*
 * A format of messages, as option format names it: what the option
 * checks, the decoder and the webhook worker ask of it.  One file each in
 * src/ingest (decode_json.c, decode_csv.c, decode_text.c), listed in
 * decode.c, which hands the list to sw_set_formats(); a new format is a
 * new file and a line there.  See doc/internals.md, "Writing and the
 * stamping protocol" (Decoding).
 */
struct SwDecoder;
struct SwBodySplit;
struct DecodeRun;

typedef struct SwFormatOps
{
	const char *name;			/* the value of option format */
	int			kinds;			/* SwKind bits of the sources that take it */
	bool		takes_fields;	/* data columns may name a field (option field) */
	bool		needs_value;	/* a message without a value is an error */
	const char *const *content_types;	/* webhook bodies it takes, NULL-
										 * terminated ("text/": any text);
										 * NULL: any */

	/* check the table's data columns, at DDL (NULL: any will do) */
	void		(*check_columns) (const SwSourceTable *st, Relation rel);
	/* make the format's state in a new decoder (NULL: it needs none) */
	void		(*prepare) (struct SwDecoder *d);
	/*
	 * fill the data columns from a message's value (value is NULL if the
	 * message has none)
	 */
	void		(*decode) (struct DecodeRun *r, const char *value, size_t len);
	/* cut a webhook body into messages, return how many (NULL: it is one) */
	int			(*split_body) (const char *body, size_t len,
							   const struct SwBodySplit *split);

	/*
	 * envelope 'debezium' (NULL: the format has no change events): the op
	 * of an event's value, read as it is added to a batch, so never an
	 * error ('?': none, '\0': it cannot be read there); the event's parts
	 * into the DecodeRun's envelope (false: the value is not an event);
	 * the data columns from the after image that found
	 */
	char		(*event_op) (struct SwDecoder *d, const char *value, size_t len);
	bool		(*read_event) (struct DecodeRun *r, const char *value, size_t len);
	void		(*decode_after) (struct DecodeRun *r);
} SwFormatOps;

/*
 * source_table.c
 * What a source table's options, columns and server say
 */
extern SwKind sw_server_kind(ForeignServer *server);
extern PGDLLEXPORT SwSourceTable *sw_source_table(Relation rel);
extern int	sw_source_workers(Oid relid);
extern PGDLLEXPORT int	sw_source_max_body_bytes(Oid relid);
extern PGDLLEXPORT char *sw_source_signature_header(Oid relid);
extern int64 sw_retention_ms(Oid relid);

/*
 * option_table.c
 * Where each option may appear and the checks of its values, for the
 * FDW's validator; the formats option format names
 */

/* servers and user mappings set librdkafka properties under this prefix */
#define RDKAFKA_PREFIX		"rdkafka."

/* options valid for both kinds of sources */
#define SW_ANY_KIND		(SW_KIND_KAFKA | SW_KIND_WEBHOOK)

/* the values of server option type */
extern const char *const sw_server_types[];

extern const char *sw_kind_name(SwKind kind);
extern void sw_check_option(DefElem *def, Oid context, int kinds);
extern List *sw_parse_start_offset(const char *option, const char *value,
								   bool *latest);
extern void sw_set_formats(const SwFormatOps *const *list, int n);
extern const SwFormatOps *sw_format_lookup(const char *name);
extern const char *const *sw_format_names(int kinds);

/* whether value is one of a NULL-terminated list */
static inline bool
in_list(const char *const *list, const char *value)
{
	for (; *list; list++)
		if (strcmp(*list, value) == 0)
			return true;
	return false;
}

/* the list joined with ", ", for a hint */
static inline char *
join_list(const char *const *list)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (; *list; list++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *list);
	return buf.data;
}

/* an option whose value must not be empty (an SwValueCheck) */
static inline void
check_nonempty(const char *option, const char *value)
{
	if (value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not be empty", option),
				 errhint("Give a value, or drop the option.")));
}

#endif							/* SW_OPTIONS_H */
