/*-------------------------------------------------------------------------
 *
 * ingest.h
 *		  Ingestion: decoding messages into rows, and writing them into a
 *		  source exactly once
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Ingestion,
 * Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/ingest.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_INGEST_H
#define SW_INGEST_H

#include "executor/tuptable.h"
#include "utils/relcache.h"

#include "options/options.h"
#include "source_writes.h"

/*
 * decode.c and decode_*.c
 * Turning one message into a row of a source table
 *
 * A decoder is made once per source table (sw_decoder_create), with
 * everything a message needs prepared: input functions, typmods, defaults,
 * the lookup of JSON fields, the format's own state.  Then each message is
 * decoded into a virtual slot of the table's descriptor (sw_decode), or,
 * for a tombstone of an upsert source, only its key (sw_decode_key).
 * Decoding allocates in CurrentMemoryContext, which the caller resets
 * between messages or batches; a message that cannot be decoded raises an
 * ERROR that says what is wrong, with a context line that names the column,
 * and leaves the decoder ready for the next message.  doc/reference.md says
 * what each format and metadata column gives.
 */

/* one header of a message; value NULL for a null header */
typedef struct SwHeader
{
	const char *name;			/* NUL-terminated; first, for sw_find_header() */
	const char *value;			/* len bytes, or NULL */
	size_t		len;
} SwHeader;

/* a message to decode: Kafka's, or later a webhook request's */
typedef struct SwMessage
{
	const char *value;			/* NULL: no value (a tombstone) */
	size_t		value_len;
	const char *key;			/* NULL: no key */
	size_t		key_len;
	int32		partition;
	int64		offset;
	int64		timestamp_ms;	/* ms since the Unix epoch; -1 if none; a
								 * webhook request's arrival time */
	const char *topic;			/* NULL for webhooks */
	int			nheaders;
	const SwHeader *headers;
	int64		request;		/* webhooks: the request, and the message's */
	int32		piece;			/* place in its body (SwPosition); 0 */
	const char *delivery;		/* ... and the delivery's idempotency key */
	char		op;				/* envelope 'debezium': the event's op as
								 * sw_ingest_add() read it, '?' for none;
								 * '\0' if it did not (not yet, or a value
								 * too deep to read there) */
} SwMessage;

typedef struct SwDecoder SwDecoder;


/*
 * How sw_split_body() hands over the messages of a webhook body: write is
 * called with each, as it is found.  where (of where_size bytes) names the
 * part of the body being read, for the caller's error context ("element 2
 * of the body"); *parsing is true while the JSON parser reads the body
 * (what it raises is the body's fault), and false while write runs.
 */
typedef struct SwBodySplit
{
	const char *relname;		/* the table's, for errors */
	void		(*write) (void *arg, const char *value, size_t len);
	void	   *arg;
	char	   *where;
	size_t		where_size;
	bool	   *parsing;
} SwBodySplit;

/*
 * The formats of messages (SwFormatOps, in options/options.h): one file
 * each (decode_json.c, decode_csv.c, decode_text.c), listed in decode.c.
 */

/* hand the list of formats to the option parser, from _PG_init */
extern void sw_register_formats(void);
/* a webhook body (NUL-terminated at len), cut into the format's messages */
extern PGDLLEXPORT int sw_split_body(const SwFormatOps *format, const char *body,
									 size_t len, const SwBodySplit *split);

/*
 * the last of n headers named name (in any case if any_case, as HTTP's
 * are), or -1; headers is an array of n structs of stride bytes that each
 * begin with the header's name, a char pointer (SwHeader, and the webhook
 * server's SwRequestHeader)
 */
extern PGDLLEXPORT int sw_find_header(const void *headers, size_t stride, int n,
									  const char *name, bool any_case);

/* everything prepared once per table (input functions, typmods, defaults, field lookup) */
extern PGDLLEXPORT SwDecoder *sw_decoder_create(Relation ftrel, const SwSourceTable *st);

/*
 * decode a message into slot (a virtual slot with ftrel's descriptor) and
 * store it; raises an ERROR that says what is wrong when the message cannot
 * be decoded, or, on an upsert source, when its key does not name the
 * row's key (the message key must give the key columns that are data
 * columns the values the value gives them)
 */
extern PGDLLEXPORT void sw_decode(SwDecoder *d, const SwMessage *msg, TupleTableSlot *slot);

/*
 * after an error: whether the decoder's last call raised it, the context
 * line it added (which names the column or part), and whether it was
 * reading the message (not computing a default)
 */
extern bool sw_decoder_failed(SwDecoder *d, const char **where, bool *in_message);

/*
 * upsert sources, a tombstone: fill only the key columns (other columns
 * NULL) from the message, as sw_decode reads the message key: metadata
 * key columns from the message's metadata (source 'key': the raw key),
 * key columns that are data columns from the message key (a JSON object
 * by field, another key as the value of the one such column); ERROR if a
 * key column stays NULL
 */
extern PGDLLEXPORT void sw_decode_key(SwDecoder *d, const SwMessage *msg, TupleTableSlot *slot);

/*
 * envelope 'debezium': the op of a change event, read in its format
 * without raising an error for what it holds: '?' if it has none, '\0' if
 * it cannot be read so (a tombstone; or decoding it says why)
 */
extern char sw_decoder_event_op(SwDecoder *d, const SwMessage *msg);

/*
 * ingest.c
 * Writing messages into a source: decoded, checked, kept as errors
 * when they cannot be, and consumed exactly once
 */

typedef struct SwIngest SwIngest;

extern PGDLLEXPORT SwIngest *sw_ingest_create(Relation ftrel, SwOrigin origin);
extern PGDLLEXPORT SwIngest *sw_ingest_remake(SwIngest *old, Relation ftrel);
extern PGDLLEXPORT void sw_ingest_begin(SwIngest *ing, Relation ftrel);
extern PGDLLEXPORT void sw_ingest_add(SwIngest *ing, SwMessage *msg);
extern PGDLLEXPORT void sw_ingest_flush(SwIngest *ing);
extern PGDLLEXPORT void sw_ingest_write(SwIngest *ing, const SwMessage *msg);
extern PGDLLEXPORT int64 sw_ingest_written(SwIngest *ing);
extern PGDLLEXPORT bool sw_ingest_decode_failed(SwIngest *ing, const char **where,
												bool *in_message);
extern PGDLLEXPORT void sw_ingest_sub_end(SwIngest *ing, bool commit);
extern PGDLLEXPORT bool sw_ingest_failed_flushing(SwIngest *ing);
extern PGDLLEXPORT bool sw_ingest_full(SwIngest *ing);
extern PGDLLEXPORT void sw_ingest_consumed(SwIngest *ing, int32 part, int64 from, int64 to,
										   int64 lost);
extern PGDLLEXPORT int64 sw_ingest_end(SwIngest *ing, int64 *kept);
extern PGDLLEXPORT void sw_ingest_abort(SwIngest *ing);
extern PGDLLEXPORT const SwSourceTable *sw_ingest_source_table(SwIngest *ing);

/*
 * the message a hidden row of a source with retain_raw came from, as it
 * came (see ingest.c), to decode again; false where the row keeps none
 * (a person's row, or one written while retain_raw was off).  layout is
 * the hidden relation's (log/log.h), hidden a slot of it holding the row.
 */
struct SwLayout;
extern bool sw_raw_message(const struct SwLayout *layout, TupleTableSlot *hidden,
						   SwMessage *msg);
/*
 * ... and the other way: a message as columns of the raw message, by
 * SwRawColumn (log/log.h): key, value, timestamp, header names and values
 */
extern void sw_raw_columns(const SwMessage *msg, Datum *values, bool *nulls);
/* keep a message that could not be decoded in source_writes.errors */
extern void sw_keep_error(Oid relid, const SwMessage *msg, const char *error);
/* may an error be kept for its message, rather than raised? */
struct ErrorData;
extern bool sw_error_may_be_kept(struct ErrorData *edata);
/* what a user needs to fix a message: the error, where, its detail */
extern char *sw_error_text(struct ErrorData *edata);

#endif							/* SW_INGEST_H */
