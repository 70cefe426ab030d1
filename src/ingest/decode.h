/*-------------------------------------------------------------------------
 *
 * decode.h
 *		  What the decoder's files share: decode.c (the decoder, metadata,
 *		  keys, errors), decode_column.c (filling a column) and one file per
 *		  format
 *
 * Private to src/ingest; other subsystems include ingest/ingest.h.  See
 * doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_INGEST_PRIVATE_DECODE_H
#define SW_INGEST_PRIVATE_DECODE_H

#include "common/jsonapi.h"
#include "fmgr.h"
#include "nodes/execnodes.h"
#include "utils/builtins.h"

#include "ingest/ingest.h"

/* buffers kept between messages shrink back when a message grew them past this */
#define SW_KEEP_BUFFER		(1024 * 1024)

/* longest context line kept for sw_decoder_failed() */
#define SW_ERROR_WHERE_BYTES	256

/* how one column is filled; decided once, in sw_decoder_create() */
typedef struct DecColumn
{
	int			attidx;			/* in the tuple descriptor, from 0 */
	const char *name;
	SwColumnSource source;
	const char *header;			/* SW_COLUMN_HEADER: the header's name */
	Oid			typid;
	Oid			basetype;		/* the type, or a domain's base type */
	int32		typmod;
	bool		is_domain;
	bool		is_json;		/* of base type json or jsonb */
	bool		is_bytea;		/* of base type bytea */
	bool		is_key;			/* named by the key option */
	FmgrInfo	key_eq;			/* a data key column: its type's equality */
	Oid			collation;
	FmgrInfo	infunc;			/* the (base) type's input function */
	Oid			ioparam;
	int32		intypmod;		/* ... and the typmod it takes */
	void	   *domain_extra;	/* domain_check()'s cache */

	/* data columns */
	const char *field;			/* the JSON field that fills it */
	size_t		field_len;
	uint32		field_hash;
	int			next_same;		/* next column the same field fills, or -1 */
	bool		has_default;
	ExprState  *default_expr;	/* NULL for a constant default */
	Datum		default_value;	/* the constant */
	bool		default_isnull;
} DecColumn;

struct SwDecoder
{
	MemoryContext cxt;			/* where all of this lives */
	char	   *relname;
	SwKind		kind;
	Oid			serverid;		/* its server (format avro: the registry's) */
	bool		upsert;
	bool		debezium;		/* envelope 'debezium' */
	SwKeyFormat key_format;		/* how message keys are read */
	char	   *registry;		/* avro values or keys: the schema registry */
	int			natts;			/* of the table's tuple descriptor */
	int			ncols;
	DecColumn  *cols;			/* columns to fill, in table order */
	int			ndata;
	int		   *data;			/* indexes into cols of the data columns */
	int			nkey;
	int		   *key;			/* ... and of the key columns */
	int			ndatakey;		/* key columns that are data columns */
	int			datakey;		/* ... the first of them, an index into cols */
	Datum	   *key_values;		/* ... as the message key gives them */
	bool	   *key_nulls;

	/* JSON: fields to columns, an open-addressing hash of cols index + 1 */
	int			hash_mask;
	int		   *hash;
	bool	   *seen;			/* per column: this message filled it */
	JsonLexContext lex;			/* lexes messages, reused */
	JsonLexContext unescape_lex;	/* de-escapes strings, reused */

	ExprContext *econtext;		/* for defaults that are not constants */

	const SwFormatOps *format;
	void	   *format_state;	/* what the format's prepare made */

	/* the last call, for sw_decoder_failed() */
	bool		running;		/* it began and did not return */
	bool		checking;		/* ... and was checking a domain's value */
	bool		defaulting;		/* ... or computing a default */
	char		error_where[SW_ERROR_WHERE_BYTES];	/* its context line */
};

/* a span of JSON, and a Debezium change event's envelope (debezium.c) */
typedef struct SwSpan
{
	const char *data;			/* NULL: absent */
	size_t		len;
	bool		isnull;			/* the JSON null */
} SwSpan;

typedef struct SwEnvelope
{
	char		op;				/* 'c', 'r', 'u', 'd', 't', or '\0' */
	SwSpan		op_json;		/* the op as it is in the JSON */
	SwSpan		before;
	SwSpan		after;
	SwSpan		source;
	SwSpan		ts_ms;
} SwEnvelope;

/*
 * What one call is doing, on the caller's stack: the row being filled, and
 * where it is, for the error context.
 */
typedef struct DecodeRun
{
	SwDecoder  *d;
	const SwMessage *msg;
	Datum	   *values;
	bool	   *nulls;
	SwEnvelope	env;			/* envelope 'debezium': the event's parts */

	/* where we are */
	bool		in_key;			/* decoding the message key, not the value */
	bool		in_part;		/* in the value or key as a whole */
	int			byte;			/* a byte of it, from 1, or 0 */
	DecColumn  *col;			/* the column being filled, or NULL */
	const char *field;			/* its JSON field, or NULL */
	size_t		field_len;		/* (not NUL-terminated) */
	int			csv_field;		/* its CSV field, from 1, or 0 */
	const char *header;			/* the header being read, or NULL */
	int			header_no;		/* its place, from 1, while its name is
								 * not known to be text */

	/* JSON */
	JsonLexContext *lex;
	bool		key_only;		/* fill only key columns */
	bool		no_defaults;	/* leave the columns it lacks alone */
	int			cur;			/* first column of the current top-level
								 * field, or -1 */
	char	   *value_start;	/* where its value starts */
} DecodeRun;

/*
 * Fill a column with a value of its base type, checked against its domain.
 */
static inline void
store_datum(DecodeRun *r, DecColumn *c, Datum value, bool isnull)
{
	if (c->is_domain)
	{
		r->d->checking = true;
		domain_check(value, isnull, c->typid, &c->domain_extra, r->d->cxt);
		r->d->checking = false;
	}
	r->values[c->attidx] = value;
	r->nulls[c->attidx] = isnull;
}

/*
 * Fill a column from a string, or NULL, through its (base) type's input
 * function, and its domain's checks, as domain_in() would.  NULL goes
 * through them too, so that a domain's NOT NULL holds, as in COPY.
 */
static inline void
store_text(DecodeRun *r, DecColumn *c, char *str)
{
	store_datum(r, c, InputFunctionCall(&c->infunc, str, c->ioparam, c->intypmod),
				str == NULL);
}

/* decode_column.c */
/* (those source_writes_avro.so calls are exported) */
extern PGDLLEXPORT void sw_verify_text(DecodeRun *r, const char *s, size_t len);
extern PGDLLEXPORT char *sw_make_cstring(DecodeRun *r, const char *s, size_t len);
extern PGDLLEXPORT void sw_store_raw(DecodeRun *r, DecColumn *c, const char *data, size_t len);
extern PGDLLEXPORT void sw_fill_default(DecodeRun *r, DecColumn *c);

/* decode_json.c: the JSON of values, and of message keys in every format */

/* what a message key is (key_shape()) */
typedef enum KeyShape
{
	KEY_OBJECT,					/* a JSON object */
	KEY_SCALAR,					/* a JSON string, number, boolean or null */
	KEY_OTHER					/* anything else */
} KeyShape;

extern const SwFormatOps sw_format_json;
extern const SwFormatOps sw_format_json_array;
extern void prepare_json(SwDecoder *d);
extern void decode_json(DecodeRun *r, const char *json, size_t len, bool key_only);
extern void json_raw_field_name(JsonLexContext *lex, const char **name, size_t *len);
extern KeyShape key_shape(SwDecoder *d, const SwMessage *msg, char **text,
						  const char **what);

/* decode_csv.c */
extern const SwFormatOps sw_format_csv;

/* decode_text.c */
extern const SwFormatOps sw_format_text;
extern const SwFormatOps sw_format_bytes;

/* debezium.c */
extern bool sw_json_top_fields(const char *json, size_t len, const char *const *names,
							   int n, SwSpan *spans);
extern bool sw_debezium_envelope(const char *json, size_t len, SwEnvelope *env);
extern char sw_debezium_json_op(SwDecoder *d, const char *value, size_t len);
extern bool sw_debezium_json_read(DecodeRun *r, const char *value, size_t len);
extern void sw_debezium_json_after(DecodeRun *r);

/* avro_format.c (and decode_avro.c, in source_writes_avro.so) */
extern const SwFormatOps sw_format_avro;
extern bool decode_avro_key(DecodeRun *r, const char *key, size_t len);
extern char *avro_server_registry(Oid serverid);

#endif							/* SW_INGEST_PRIVATE_DECODE_H */
