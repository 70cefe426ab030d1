/*-------------------------------------------------------------------------
 *
 * decode.c
 *		  Turning one message into a row of a source table
 *
 * The Kafka worker, source_writes.retry_errors() and the webhook worker
 * decode messages here.  A decoder (SwDecoder) is made once per source
 * table: it looks up the input function of every column, the defaults of
 * the data columns, and builds a hash of the JSON fields.  Decoding a
 * message then touches no catalog.
 *
 * Data columns, by the table's format:
 *
 * json		The value is a JSON object, parsed once by PostgreSQL's JSON
 *			parser (pg_parse_json) with semantic actions that fill the
 *			columns as the fields go by.  A field fills the data columns
 *			named like it, or whose "field" option names it; other fields
 *			are ignored, and of a field given twice the last counts.  A
 *			value goes through the column type's input function with the
 *			column's typmod: a string's de-escaped text, a number or true
 *			or false as written.  A json or jsonb column takes the raw text
 *			of the value instead, so a string keeps its quotes, and may take
 *			a nested object or array, which is an error for other types.
 *			JSON null gives NULL; a missing field gives the column's
 *			DEFAULT, as COPY does for columns it is not given, or NULL.
 *			json_array (webhooks) is decoded as json: the webhook worker
 *			hands over each element of the array as a message.
 *
 *			The parser runs without de-escaping strings, which in
 *			PostgreSQL 15 costs an append per character: the callbacks
 *			take field names and string values from the input between
 *			token bounds, and only a string that holds a backslash is
 *			de-escaped, by the JSON lexer again.  So "\u0000" or a lone
 *			surrogate is an error in a top-level field's name, or in a
 *			string that a column of another type than json and jsonb
 *			takes, and not elsewhere (jsonb refuses them too).
 * text		The whole value, through the input function of the one data
 *			column (of a string type).
 * bytes	The whole value, raw, into the one bytea column.
 * csv		The value is one CSV record of the data columns in table
 *			order, split by the rules of COPY's format csv (csv_split());
 *			an unquoted empty field is NULL.
 *
 * For the text formats, the bytes must be valid in the database encoding,
 * without NUL bytes.  A message without a value gives NULL to the data
 * column of text and bytes, and is an error for json and csv.
 *
 * Metadata columns, in every format:
 *
 * partition	the partition (integer or bigint)
 * offset		the offset (bigint)
 * timestamp,	the message timestamp (a webhook request's arrival), NULL
 * received_at	if it has none: into timestamptz as that instant, into
 *				timestamp as its UTC wall-clock time, into bigint as ms since
 *				the Unix epoch (only timestamptz passes the option checks
 *				today)
 * key			the message key, NULL if it has none: raw into bytea, else
 *				through the type's input function (text, json, jsonb)
 * body			the value, as key does (webhooks)
 * headers		all headers, in order, duplicates kept, as a JSON array of
 *				one-field objects: [{"name": "value"}, {"other": null}],
 *				into json or jsonb; an empty array for none.  Header names
 *				and values must then be text in the database encoding.
 * topic		the topic (text)
 * header 'h'	the last header named h (exactly for Kafka, in any case for
 *				webhooks), NULL if there is none or it is null: raw into
 *				bytea, else through the type's input function
 *
 * A value for a domain passes the domain's checks.  Stored generated
 * columns are left NULL: whoever writes the row computes them.
 *
 * Upsert sources: the message key names the row, as Kafka's log compaction
 * takes it, so that a tombstone deletes the row that messages with its key
 * wrote.  Key columns that are data columns are read from the message key
 * as well as from the value (decode_message_key()): a JSON object gives
 * them by field; another key gives the value of the one such column (a
 * JSON scalar its value, anything else its bytes).  A message whose key
 * does not give each of them a value, or gives another value than the
 * message value, by the key type's equality, is an error; a tombstone
 * (sw_decode_key()) reads its key the same way.
 *
 * Errors say what is wrong and, through an error context, which column of
 * which table (and which JSON field, CSV field or header) had the bad
 * value; they never quote the whole message.  Each call starts afresh, so
 * a message that fails leaves nothing behind that the next one could trip
 * on: the caller catches errors in a subtransaction and goes on.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "common/jsonapi.h"
#include "executor/executor.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "utils/backend_progress.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "ingest/ingest.h"

/* buffers kept between messages shrink back when a message grew them past this */
#define SW_KEEP_BUFFER		(1024 * 1024)

/* longest part of a JSON token quoted in an error */
#define SW_ERROR_TOKEN_BYTES	40

/* longest context line kept for sw_decoder_failed() */
#define SW_ERROR_WHERE_BYTES	256

/* microseconds from the Unix epoch to PostgreSQL's */
#define SW_EPOCH_DIFF_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

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
	SwFormat	format;
	bool		upsert;
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

	/* CSV: the fields of a record, and the buffer they are split into */
	char	  **csv_fields;
	StringInfoData csv_buf;

	/* the last call, for sw_decoder_failed() */
	bool		running;		/* it began and did not return */
	bool		checking;		/* ... and was checking a domain's value */
	bool		defaulting;		/* ... or computing a default */
	char		error_where[SW_ERROR_WHERE_BYTES];	/* its context line */
};

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
 * Error context: the column being filled, or the part of the message; kept
 * for sw_decoder_failed() as well.
 */
static void
decode_error_callback(void *arg)
{
	DecodeRun  *r = (DecodeRun *) arg;
	StringInfoData buf;
	int			keep;

	r->d->error_where[0] = '\0';
	initStringInfo(&buf);
	if (r->col)
	{
		DecColumn  *c = r->col;

		appendStringInfo(&buf, "column \"%s\" of source table \"%s\"",
						 c->name, r->d->relname);
		switch (c->source)
		{
			case SW_COLUMN_DATA:
				if (r->field && r->in_key)
					appendStringInfo(&buf, ", field \"%.*s\" of the message key",
									 (int) r->field_len, r->field);
				else if (r->field)
					appendStringInfo(&buf, ", field \"%.*s\"",
									 (int) r->field_len, r->field);
				else if (r->in_key)
					appendStringInfoString(&buf, ", message key");
				else if (r->csv_field > 0)
					appendStringInfo(&buf, ", CSV field %d", r->csv_field);
				break;
			case SW_COLUMN_HEADER:
				appendStringInfo(&buf, ", header \"%s\"", c->header);
				break;
			case SW_COLUMN_HEADERS:
				if (r->header)
					appendStringInfo(&buf, ", header \"%s\"", r->header);
				else if (r->header_no > 0)
					appendStringInfo(&buf, ", name of header %d", r->header_no);
				break;
			case SW_COLUMN_KEY:
				appendStringInfoString(&buf, ", message key");
				break;
			case SW_COLUMN_BODY:
				appendStringInfoString(&buf, ", request body");
				break;
			case SW_COLUMN_TIMESTAMP:
			case SW_COLUMN_RECEIVED_AT:
			case SW_COLUMN_PARTITION:
			case SW_COLUMN_OFFSET:
			case SW_COLUMN_TOPIC:
				break;
		}
	}
	else if (r->in_part)
		appendStringInfo(&buf, "message %s for source table \"%s\"",
						 r->in_key ? "key" : "value", r->d->relname);
	else
		return;
	if (r->byte > 0)
		appendStringInfo(&buf, ", byte %d", r->byte);
	/* kept whole, or cut on a character's boundary */
	keep = pg_mbcliplen(buf.data, buf.len, sizeof(r->d->error_where) - 1);
	memcpy(r->d->error_where, buf.data, keep);
	r->d->error_where[keep] = '\0';
	errcontext("%s", buf.data);
}

/*
 * Check that len bytes are text in the database encoding, without NUL
 * bytes, as the input functions of text types expect.
 */
static void
verify_text(DecodeRun *r, const char *s, size_t len)
{
	int			valid;

	if (len >= MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("message text of %zu bytes is too long", len),
				 errdetail("Text values are limited to %zu bytes.",
						   (size_t) MaxAllocSize - 1)));
	valid = pg_encoding_verifymbstr(GetDatabaseEncoding(), s, (int) len);
	if (valid < (int) len)
	{
		r->byte = valid + 1;
		report_invalid_encoding(GetDatabaseEncoding(), s + valid,
								(int) len - valid);
	}
}

/*
 * len bytes as a NUL-terminated string, once checked.
 */
static char *
make_cstring(DecodeRun *r, const char *s, size_t len)
{
	char	   *result;

	verify_text(r, s, len);
	result = palloc(len + 1);
	memcpy(result, s, len);
	result[len] = '\0';
	return result;
}

/*
 * Fill a column with a value of its base type, checked against its domain.
 */
static void
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

/*
 * Fill a column from raw bytes, or NULL: as they are into bytea, else as
 * text through the input function.
 */
static void
store_raw(DecodeRun *r, DecColumn *c, const char *data, size_t len)
{
	if (data == NULL)
		store_text(r, c, NULL);
	else if (c->is_bytea)
	{
		bytea	   *b;

		if (len > MaxAllocSize - VARHDRSZ)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("message bytes of %zu bytes are too long", len),
					 errdetail("bytea values are limited to %zu bytes.",
							   (size_t) (MaxAllocSize - VARHDRSZ))));
		b = palloc(len + VARHDRSZ);
		SET_VARSIZE(b, len + VARHDRSZ);
		memcpy(VARDATA(b), data, len);
		store_datum(r, c, PointerGetDatum(b), false);
	}
	else
	{
		char	   *s = make_cstring(r, data, len);

		store_text(r, c, s);
		pfree(s);
	}
}

/*
 * A column filled with the message timestamp (ms since the Unix epoch, -1
 * for none).
 */
static void
store_timestamp(DecodeRun *r, DecColumn *c, int64 ms)
{
	int64		usecs;

	if (ms == -1)
	{
		store_datum(r, c, (Datum) 0, true);
		return;
	}
	switch (c->basetype)
	{
		case INT8OID:
			store_datum(r, c, Int64GetDatum(ms), false);
			return;
		case TIMESTAMPTZOID:
		case TIMESTAMPOID:
			if (pg_mul_s64_overflow(ms, 1000, &usecs) ||
				pg_sub_s64_overflow(usecs, SW_EPOCH_DIFF_USECS, &usecs) ||
				!IS_VALID_TIMESTAMP(usecs))
				ereport(ERROR,
						(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
						 errmsg("timestamp out of range: %lld ms since the Unix epoch",
								(long long) ms)));
			/* a timestamp gets the instant's wall-clock time in UTC */
			store_datum(r, c, Int64GetDatum(usecs), false);
			return;
	}
	elog(ERROR, "unexpected type %u for a timestamp column", c->typid);
}

/*
 * A column filled with all the headers, as a JSON array of one-field
 * objects, in order.
 */
static void
store_headers(DecodeRun *r, DecColumn *c)
{
	const SwMessage *msg = r->msg;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	for (int i = 0; i < msg->nheaders; i++)
	{
		const SwHeader *h = &msg->headers[i];

		r->header_no = i + 1;
		verify_text(r, h->name, strlen(h->name));
		r->header = h->name;
		if (i > 0)
			appendStringInfoString(&buf, ", ");
		appendStringInfoChar(&buf, '{');
		escape_json(&buf, h->name);
		appendStringInfoString(&buf, ": ");
		if (h->value == NULL)
			appendStringInfoString(&buf, "null");
		else
		{
			char	   *value = make_cstring(r, h->value, h->len);

			escape_json(&buf, value);
			pfree(value);
		}
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	r->header = NULL;
	r->header_no = 0;
	store_text(r, c, buf.data);
	pfree(buf.data);
}

/*
 * The last header with a name, or NULL: names compare exactly for Kafka,
 * in any case for webhooks (HTTP).
 */
static const SwHeader *
find_header(DecodeRun *r, const char *name)
{
	const SwMessage *msg = r->msg;
	bool		any_case = r->d->kind == SW_KIND_WEBHOOK;

	for (int i = msg->nheaders - 1; i >= 0; i--)
	{
		const SwHeader *h = &msg->headers[i];

		if (any_case ? pg_strcasecmp(h->name, name) == 0 :
			strcmp(h->name, name) == 0)
			return h;
	}
	return NULL;
}

/*
 * Fill a metadata column from the message.
 */
static void
fill_metadata(DecodeRun *r, DecColumn *c)
{
	const SwMessage *msg = r->msg;
	const SwHeader *h;

	r->col = c;
	switch (c->source)
	{
		case SW_COLUMN_DATA:
			Assert(false);
			break;
		case SW_COLUMN_PARTITION:
			store_datum(r, c, c->basetype == INT8OID ?
						Int64GetDatum((int64) msg->partition) :
						Int32GetDatum(msg->partition), false);
			break;
		case SW_COLUMN_OFFSET:
			store_datum(r, c, Int64GetDatum(msg->offset), false);
			break;
		case SW_COLUMN_TIMESTAMP:
		case SW_COLUMN_RECEIVED_AT:
			store_timestamp(r, c, msg->timestamp_ms);
			break;
		case SW_COLUMN_KEY:
			store_raw(r, c, msg->key, msg->key_len);
			break;
		case SW_COLUMN_BODY:
			store_raw(r, c, msg->value, msg->value_len);
			break;
		case SW_COLUMN_HEADER:
			h = find_header(r, c->header);
			if (h)
				store_raw(r, c, h->value, h->len);
			else
				store_raw(r, c, NULL, 0);
			break;
		case SW_COLUMN_HEADERS:
			store_headers(r, c);
			break;
		case SW_COLUMN_TOPIC:
			if (msg->topic)
				store_datum(r, c, CStringGetTextDatum(msg->topic), false);
			else
				store_datum(r, c, (Datum) 0, true);
			break;
	}
	r->col = NULL;
	r->byte = 0;
}

/*
 * A data column that no field filled: its default, or NULL.  A key column
 * of an upsert source that the message key fills gets neither: it takes
 * the key's value (check_key_agrees()).
 */
static void
fill_default(DecodeRun *r, DecColumn *c)
{
	r->col = c;
	if (c->is_key && r->d->upsert && r->d->ndatakey > 0)
	{
		r->values[c->attidx] = (Datum) 0;
		r->nulls[c->attidx] = true;
	}
	else if (c->default_expr)
	{
		bool		isnull;
		Datum		value;

		r->d->defaulting = true;
		value = ExecEvalExpr(c->default_expr, r->d->econtext, &isnull);
		r->d->defaulting = false;
		r->values[c->attidx] = value;
		r->nulls[c->attidx] = isnull;
	}
	else if (c->has_default)
	{
		r->values[c->attidx] = c->default_value;
		r->nulls[c->attidx] = c->default_isnull;
	}
	else
		store_text(r, c, NULL);
	r->col = NULL;
}

/* ---------------------------------------------------------------------
 * JSON
 * ---------------------------------------------------------------------
 */

static inline uint32
field_hash(const char *name, size_t len)
{
	return hash_bytes((const unsigned char *) name, (int) len);
}

/*
 * The first column a top-level field fills, or -1.
 */
static int
field_lookup(SwDecoder *d, const char *name, size_t len)
{
	uint32		h = field_hash(name, len);

	for (int i = h & d->hash_mask;; i = (i + 1) & d->hash_mask)
	{
		int			entry = d->hash[i];
		DecColumn  *c;

		if (entry == 0)
			return -1;
		c = &d->cols[entry - 1];
		if (c->field_hash == h && c->field_len == len &&
			memcmp(c->field, name, len) == 0)
			return entry - 1;
	}
}

/*
 * Whether this decoding fills a column.
 */
static inline bool
wanted(DecodeRun *r, DecColumn *c)
{
	return !r->key_only || c->is_key;
}

/*
 * Where PostgreSQL's JSON parser failed, for an error: the byte (from 1)
 * of lex's input where the token it failed at begins, or the byte after
 * the last if the input ended; a long token is cut, for json_errdetail()
 * to quote at most its beginning.
 */
int
sw_json_error_byte(JsonLexContext *lex)
{
	int			toklen;

	if (lex->token_start == NULL)
		return (lex->token_terminator - lex->input) + 1;
	toklen = lex->token_terminator - lex->token_start;
	if (toklen > SW_ERROR_TOKEN_BYTES)
		lex->token_terminator = lex->token_start +
			pg_mbcliplen(lex->token_start, toklen, SW_ERROR_TOKEN_BYTES);
	return (lex->token_start - lex->input) + 1;
}

/* the SQLSTATE of an error of PostgreSQL's JSON parser */
int
sw_json_error_code(JsonParseErrorType err)
{
	return err == JSON_UNICODE_CODE_POINT_ZERO || err == JSON_UNICODE_HIGH_ESCAPE
		? ERRCODE_UNTRANSLATABLE_CHARACTER
		: ERRCODE_INVALID_TEXT_REPRESENTATION;
}

/*
 * The parser failed at a token of lex, whose input begins at byte offset
 * of the message part: say where, and what it expected.
 */
static void
json_error(DecodeRun *r, JsonParseErrorType err, JsonLexContext *lex,
		   int offset)
{
	int			pos = offset + sw_json_error_byte(lex);

	ereport(ERROR,
			(errcode(sw_json_error_code(err)),
			 r->in_key
			 ? errmsg("invalid JSON in message key at byte %d", pos)
			 : errmsg("invalid JSON in message value at byte %d", pos),
			 errdetail("%s", json_errdetail(err, lex))));
}

/*
 * Point a lexer at len bytes of JSON, with or without a buffer for the
 * de-escaped text of strings (which it keeps, unless a long string grew it).
 */
static void
lex_restart(SwDecoder *d, JsonLexContext *lex, const char *json, size_t len)
{
	StringInfo	strval = lex->strval;

	if (strval)
	{
		if (strval->maxlen > SW_KEEP_BUFFER)
		{
			MemoryContext old = MemoryContextSwitchTo(d->cxt);

			pfree(strval->data);
			initStringInfo(strval);
			MemoryContextSwitchTo(old);
		}
		resetStringInfo(strval);
	}
	memset(lex, 0, sizeof(JsonLexContext));
	lex->input = lex->token_terminator = lex->line_start = (char *) json;
	lex->line_number = 1;
	lex->input_length = (int) len;
	lex->input_encoding = GetDatabaseEncoding();
	lex->strval = strval;
}

/*
 * The text of a string token that holds escapes, de-escaped by the JSON
 * lexer itself (the one that lexes the message leaves strings as they are,
 * which is much faster).  Its errors are reported where the token is.
 */
static char *
unescape(DecodeRun *r, const char *token, size_t len)
{
	JsonLexContext *lex = &r->d->unescape_lex;
	JsonParseErrorType err;

	lex_restart(r->d, lex, token, len);
	err = json_lex(lex);
	if (err != JSON_SUCCESS)
		json_error(r, err, lex, token - r->lex->input);
	Assert(lex->token_type == JSON_TOKEN_STRING &&
		   lex->token_terminator == token + len);
	return pstrdup(lex->strval->data);
}

/*
 * What a JSON value that begins with a token of this type is, for errors
 * (objects aside).
 */
static const char *
json_value_kind(JsonTokenType type)
{
	switch (type)
	{
		case JSON_TOKEN_ARRAY_START:
			return "a JSON array";
		case JSON_TOKEN_STRING:
			return "a JSON string";
		case JSON_TOKEN_NUMBER:
			return "a JSON number";
		case JSON_TOKEN_TRUE:
		case JSON_TOKEN_FALSE:
			return "a JSON boolean";
		default:
			return "JSON null";
	}
}

/*
 * The value is not an object: the decoding stops at its first token.
 */
static void
not_an_object(DecodeRun *r, JsonTokenType type)
{
	const char *what = json_value_kind(type);

	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 r->in_key
			 ? errmsg("message key is not a JSON object")
			 : errmsg("message value is not a JSON object"),
			 errdetail("It is %s.", what)));
}

/*
 * A top-level field's value is an object or an array: only json and jsonb
 * columns take it (at the field's end, as raw text).
 */
static void
nested_value(DecodeRun *r, bool object)
{
	SwDecoder  *d = r->d;

	for (int i = r->cur; i >= 0; i = d->cols[i].next_same)
	{
		DecColumn  *c = &d->cols[i];

		if (!wanted(r, c) || c->is_json)
			continue;
		r->col = c;
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 object
				 ? errmsg("cannot convert a JSON object to type %s",
						  format_type_with_typemod(c->typid, c->typmod))
				 : errmsg("cannot convert a JSON array to type %s",
						  format_type_with_typemod(c->typid, c->typmod)),
				 errhint("Only columns of type json or jsonb take nested objects and arrays.")));
	}
}

static void
json_object_start(void *arg)
{
	DecodeRun  *r = (DecodeRun *) arg;

	/* level 0 is the message's own object */
	if (r->lex->lex_level == 1 && r->cur >= 0)
		nested_value(r, true);
}

static void
json_array_start(void *arg)
{
	DecodeRun  *r = (DecodeRun *) arg;

	if (r->lex->lex_level == 0)
		not_an_object(r, JSON_TOKEN_ARRAY_START);
	if (r->lex->lex_level == 1 && r->cur >= 0)
		nested_value(r, false);
}

static inline bool
json_whitespace(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

/*
 * A top-level field: find the columns it fills.
 *
 * The lexer gives no field name (it de-escapes no strings for us), but it
 * has just read the name, a colon, and the value's first token: the name
 * is the string that ends before the colon.  Its opening quote is the
 * first quote before its closing one that no backslash escapes (a quote in
 * a valid string, which the lexer checked, is always escaped).
 */
static void
json_field_start(void *arg, char *fname, bool isnull)
{
	DecodeRun  *r = (DecodeRun *) arg;
	JsonLexContext *lex = r->lex;
	const char *start;
	const char *end;

	if (lex->lex_level != 1)
		return;

	end = lex->prev_token_terminator - 1;	/* the colon */
	Assert(*end == ':');
	do
		end--;
	while (json_whitespace(*end));
	Assert(*end == '"');
	for (start = end - 1;; start--)
	{
		int			backslashes = 0;

		if (*start != '"')
			continue;
		while (start[-1 - backslashes] == '\\')
			backslashes++;
		if (backslashes % 2 == 0)
			break;
	}
	start++;

	if (memchr(start, '\\', end - start) == NULL)
	{
		r->field = start;
		r->field_len = end - start;
	}
	else
	{
		r->field = unescape(r, start - 1, end - start + 2);
		r->field_len = strlen(r->field);
	}
	r->cur = field_lookup(r->d, r->field, r->field_len);
	r->value_start = lex->token_start;
}

/*
 * The end of a top-level field: json and jsonb columns take the raw text
 * of its value (other columns took a scalar already).
 */
static void
json_field_end(void *arg, char *fname, bool isnull)
{
	DecodeRun  *r = (DecodeRun *) arg;
	SwDecoder  *d = r->d;

	if (r->lex->lex_level != 1)
		return;
	for (int i = r->cur; i >= 0; i = d->cols[i].next_same)
	{
		DecColumn  *c = &d->cols[i];

		if (!wanted(r, c))
			continue;
		if (c->is_json)
		{
			r->col = c;
			if (isnull)
				store_text(r, c, NULL);
			else
			{
				char	   *raw;

				raw = pnstrdup(r->value_start,
							   r->lex->prev_token_terminator - r->value_start);
				store_text(r, c, raw);
				pfree(raw);
			}
			r->col = NULL;
		}
		d->seen[i] = true;
	}
	r->cur = -1;
	r->field = NULL;
}

/*
 * A scalar: a top-level field's value goes to the columns of other types
 * than json and jsonb; a scalar message is not an object.  The lexer gives
 * the text of numbers, true, false and null, but not of strings: that is
 * the token between the value's start and the lexer's last token end.
 */
static void
json_scalar(void *arg, char *token, JsonTokenType type)
{
	DecodeRun  *r = (DecodeRun *) arg;
	SwDecoder  *d = r->d;
	char	   *text = token;

	if (r->lex->lex_level == 0)
		not_an_object(r, type);
	if (r->lex->lex_level != 1)
	{
		if (token)
			pfree(token);
		return;
	}

	for (int i = r->cur; i >= 0; i = d->cols[i].next_same)
	{
		DecColumn  *c = &d->cols[i];

		if (!wanted(r, c) || c->is_json)
			continue;
		if (type == JSON_TOKEN_STRING && text == NULL)
		{
			const char *start = r->value_start;
			size_t		len = r->lex->prev_token_terminator - start;

			if (memchr(start, '\\', len) == NULL)
				text = pnstrdup(start + 1, len - 2);
			else
				text = unescape(r, start, len);
		}
		r->col = c;
		store_text(r, c, type == JSON_TOKEN_NULL ? NULL : text);
		r->col = NULL;
	}
	if (text)
		pfree(text);
}

/*
 * Decode a JSON object into the data columns (or, for a tombstone's key,
 * the key columns among them), and default the ones it lacks.
 */
static void
decode_json(DecodeRun *r, const char *json, size_t len, bool key_only)
{
	SwDecoder  *d = r->d;
	JsonSemAction sem;
	JsonParseErrorType err;

	r->in_part = true;
	verify_text(r, json, len);

	r->lex = &d->lex;
	lex_restart(d, r->lex, json, len);
	r->key_only = key_only;
	r->cur = -1;
	memset(d->seen, 0, sizeof(bool) * d->ncols);

	memset(&sem, 0, sizeof(sem));
	sem.semstate = r;
	sem.object_start = json_object_start;
	sem.array_start = json_array_start;
	sem.object_field_start = json_field_start;
	sem.object_field_end = json_field_end;
	sem.scalar = json_scalar;

	err = pg_parse_json(r->lex, &sem);
	if (err != JSON_SUCCESS)
		json_error(r, err, r->lex, 0);
	r->in_part = false;

	for (int j = 0; j < d->ndata; j++)
	{
		int			i = d->data[j];

		if (!d->seen[i] && wanted(r, &d->cols[i]) && !r->no_defaults)
			fill_default(r, &d->cols[i]);
	}
}

/* ---------------------------------------------------------------------
 * CSV
 * ---------------------------------------------------------------------
 */

/*
 * Split the CSV record at the start of a message into its fields, by the
 * rules of COPY's format csv with its defaults: fields are separated by
 * commas; a double quote starts a quoted part of a field (anywhere in it),
 * in which commas and line breaks are data and two double quotes stand
 * for one, and the next lone double quote ends it; an unquoted empty field
 * is NULL, a quoted one an empty string; the record ends at a line break
 * (LF, CR LF or CR) outside quotes, or at the end of the value.  (COPY
 * also takes a line of \. for the end of its data, which a message has no
 * use for: here it is a value like any other.)  The fields are written,
 * NUL-terminated, into the decoder's buffer; the first max of them are
 * pointed to in fields.  Returns the number of fields, and in *used the
 * bytes of the value the record took, its line break included.
 */
static int
csv_split(SwDecoder *d, const char *value, size_t len, char **fields, int max,
		  size_t *used)
{
	StringInfo	buf = &d->csv_buf;
	const char *cur = value;
	const char *end = value + len;
	char	   *out;
	int			nfields = 0;

	/* a buffer that the last message grew too much shrinks back */
	if (buf->maxlen > SW_KEEP_BUFFER && len < SW_KEEP_BUFFER)
	{
		MemoryContext old = MemoryContextSwitchTo(d->cxt);

		pfree(buf->data);
		initStringInfo(buf);
		MemoryContextSwitchTo(old);
	}
	/* each byte of the value gives at most one of the fields or a terminator */
	resetStringInfo(buf);
	enlargeStringInfo(buf, len + 1);
	out = buf->data;

	for (;;)
	{
		char	   *field = out;
		bool		quoted = false;
		bool		at_end = true;
		const char *start = cur;

		while (cur < end)
		{
			char		c = *cur;

			if (c == ',' || c == '\n' || c == '\r')
			{
				at_end = c != ',';
				break;
			}
			cur++;
			if (c != '"')
			{
				*out++ = c;
				continue;
			}
			/* a quoted part, to its closing quote */
			quoted = true;
			for (;;)
			{
				if (cur >= end)
					ereport(ERROR,
							(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
							 errmsg("unterminated CSV quoted field")));
				c = *cur++;
				if (c == '"')
				{
					if (cur < end && *cur == '"')
						cur++;	/* "" stands for " */
					else
						break;
				}
				*out++ = c;
			}
		}
		*out++ = '\0';
		if (nfields < max)
			fields[nfields] = (!quoted && cur == start) ? NULL : field;
		nfields++;
		if (at_end)
			break;
		cur++;					/* the comma */
	}

	/* the line break that ends the record: LF, CR LF or CR */
	if (cur < end && *cur++ == '\r' && cur < end && *cur == '\n')
		cur++;
	*used = cur - value;
	return nfields;
}

/*
 * Decode one CSV record into the data columns.
 */
static void
decode_csv(DecodeRun *r, const char *value, size_t len)
{
	SwDecoder  *d = r->d;
	size_t		used;
	int			nfields;

	r->in_part = true;
	verify_text(r, value, len);
	if (d->ndata == 0)
		return;					/* nothing to fill */

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				 errmsg("message value holds no CSV record")));
	nfields = csv_split(d, value, len, d->csv_fields, d->ndata, &used);
	if (nfields > d->ndata)
		ereport(ERROR,
				(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				 errmsg("extra data after last expected column")));
	r->in_part = false;

	/* a missing field is an error once the fields before it are read, as in COPY */
	for (int j = 0; j < d->ndata; j++)
	{
		r->col = &d->cols[d->data[j]];
		if (j >= nfields)
		{
			r->col = NULL;
			r->in_part = true;
			ereport(ERROR,
					(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
					 errmsg("missing data for column \"%s\"",
							d->cols[d->data[j]].name)));
		}
		r->csv_field = j + 1;
		store_text(r, r->col, d->csv_fields[j]);
	}
	r->col = NULL;
	r->csv_field = 0;

	r->in_part = true;
	if (used < len)
		ereport(ERROR,
				(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				 errmsg("message value holds more than one CSV record"),
				 errhint("Quote a field to put a line break in it.")));
	r->in_part = false;
}

/* ---------------------------------------------------------------------
 * Decoders
 * ---------------------------------------------------------------------
 */

/*
 * The default of a data column, for a JSON message that lacks its field:
 * a constant is kept as it is, other expressions are evaluated per message.
 */
static void
prepare_default(SwDecoder *d, Relation rel, DecColumn *c)
{
	Expr	   *expr = (Expr *) build_column_default(rel, c->attidx + 1);

	if (expr == NULL)
		return;
	c->has_default = true;
	expr = expression_planner(expr);
	if (IsA(expr, Const))
	{
		c->default_value = ((Const *) expr)->constvalue;
		c->default_isnull = ((Const *) expr)->constisnull;
		return;
	}
	if (d->econtext == NULL)
		d->econtext = CreateStandaloneExprContext();
	c->default_expr = ExecInitExpr(expr, NULL);
}

/*
 * Hash the fields of the data columns (the column's name, or its field
 * option); columns filled by one field are chained in table order.
 */
static void
build_field_hash(SwDecoder *d)
{
	int			size = 8;

	while (size < d->ndata * 2)
		size *= 2;
	d->hash_mask = size - 1;
	d->hash = palloc0(sizeof(int) * size);

	for (int j = 0; j < d->ndata; j++)
	{
		int			ci = d->data[j];
		DecColumn  *c = &d->cols[ci];

		c->field_len = strlen(c->field);
		c->field_hash = field_hash(c->field, c->field_len);
		for (int i = c->field_hash & d->hash_mask;; i = (i + 1) & d->hash_mask)
		{
			DecColumn  *other;

			if (d->hash[i] == 0)
			{
				d->hash[i] = ci + 1;
				break;
			}
			other = &d->cols[d->hash[i] - 1];
			if (other->field_hash == c->field_hash &&
				other->field_len == c->field_len &&
				memcmp(other->field, c->field, c->field_len) == 0)
			{
				while (other->next_same >= 0)
					other = &d->cols[other->next_same];
				other->next_same = ci;
				break;
			}
		}
	}
}

/*
 * Prepare everything a table's messages need; it all lives in the current
 * memory context.
 */
SwDecoder *
sw_decoder_create(Relation ftrel, const SwSourceTable *st)
{
	TupleDesc	desc = RelationGetDescr(ftrel);
	SwDecoder  *d = palloc0(sizeof(SwDecoder));

	d->cxt = CurrentMemoryContext;
	d->relname = pstrdup(RelationGetRelationName(ftrel));
	d->kind = st->kind;
	d->format = st->format;
	d->upsert = st->upsert;
	d->natts = desc->natts;
	d->cols = palloc0(sizeof(DecColumn) * Max(st->ncolumns, 1));
	d->data = palloc(sizeof(int) * Max(st->ncolumns, 1));
	d->key = palloc(sizeof(int) * Max(st->ncolumns, 1));
	d->seen = palloc0(sizeof(bool) * Max(st->ncolumns, 1));

	for (int i = 0; i < st->ncolumns; i++)
	{
		const SwColumn *sc = &st->columns[i];
		Form_pg_attribute att = TupleDescAttr(desc, sc->attnum - 1);
		DecColumn  *c = &d->cols[d->ncols];
		Oid			infunc;
		ListCell   *lc;

		/* stored generated columns are the writer's to compute */
		if (att->attgenerated)
			continue;

		c->attidx = sc->attnum - 1;
		c->name = pstrdup(sc->name);
		c->source = sc->source;
		c->header = sc->header ? pstrdup(sc->header) : NULL;
		c->typid = att->atttypid;
		c->typmod = att->atttypmod;
		c->basetype = getBaseType(c->typid);
		c->is_domain = c->basetype != c->typid;
		c->is_json = c->basetype == JSONOID || c->basetype == JSONBOID;
		c->is_bytea = c->basetype == BYTEAOID;
		/* a domain's value: its base type's input, then its checks */
		c->intypmod = c->typmod;
		if (c->is_domain)
			(void) getBaseTypeAndTypmod(c->typid, &c->intypmod);
		getTypeInputInfo(c->basetype, &infunc, &c->ioparam);
		fmgr_info_cxt(infunc, &c->infunc, d->cxt);
		c->next_same = -1;

		foreach(lc, st->key)
			if (strcmp((char *) lfirst(lc), c->name) == 0)
				c->is_key = true;

		if (c->source == SW_COLUMN_DATA)
		{
			d->data[d->ndata++] = d->ncols;
			c->field = pstrdup(sc->field ? sc->field : sc->name);
			prepare_default(d, ftrel, c);
		}
		if (c->is_key)
		{
			d->key[d->nkey++] = d->ncols;
			if (c->source == SW_COLUMN_DATA)
			{
				/* the equality of the key's index, its default btree class */
				TypeCacheEntry *type = lookup_type_cache(c->typid, TYPECACHE_EQ_OPR_FINFO);

				if (!OidIsValid(type->eq_opr_finfo.fn_oid))
					elog(ERROR, "key column \"%s\" of source table \"%s\" has no equality",
						 c->name, d->relname);
				fmgr_info_copy(&c->key_eq, &type->eq_opr_finfo, d->cxt);
				c->collation = att->attcollation;
				if (d->ndatakey++ == 0)
					d->datakey = d->ncols;
			}
		}
		d->ncols++;
	}

	build_field_hash(d);
	if (d->ndatakey > 0)
	{
		d->key_values = palloc(sizeof(Datum) * Max(d->natts, 1));
		d->key_nulls = palloc(sizeof(bool) * Max(d->natts, 1));
	}
	d->unescape_lex.strval = makeStringInfo();
	if (d->format == SW_FORMAT_CSV)
	{
		d->csv_fields = palloc(sizeof(char *) * Max(d->ndata, 1));
		initStringInfo(&d->csv_buf);
	}
	return d;
}

/*
 * Begin a call: an empty row, and the error context.
 */
static void
begin_run(DecodeRun *r, SwDecoder *d, const SwMessage *msg,
		  TupleTableSlot *slot, ErrorContextCallback *errcb)
{
	Assert(slot->tts_tupleDescriptor->natts == d->natts);

	memset(r, 0, sizeof(DecodeRun));
	r->d = d;
	r->msg = msg;
	r->cur = -1;

	ExecClearTuple(slot);
	r->values = slot->tts_values;
	r->nulls = slot->tts_isnull;
	memset(r->values, 0, sizeof(Datum) * d->natts);
	memset(r->nulls, true, sizeof(bool) * d->natts);

	errcb->callback = decode_error_callback;
	errcb->arg = r;
	errcb->previous = error_context_stack;
	error_context_stack = errcb;
	d->running = true;
	d->checking = false;
	d->defaulting = false;
	d->error_where[0] = '\0';
}

/*
 * Every key column of an upsert source must have a value, from the message
 * value, the message key (check_key_agrees()) or the message's metadata.
 */
static void
check_key(DecodeRun *r)
{
	SwDecoder  *d = r->d;

	for (int k = 0; k < d->nkey; k++)
	{
		DecColumn  *c = &d->cols[d->key[k]];

		if (!r->nulls[c->attidx])
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 errmsg("null value in key column \"%s\" of upsert source table \"%s\"",
						c->name, d->relname),
				 c->source == SW_COLUMN_KEY
				 ? errdetail("The message has no key.")
				 : c->source == SW_COLUMN_HEADER
				 ? errdetail("The message has no header \"%s\", or it is null.", c->header)
				 : errdetail("The message gives the column no value.")));
	}
}

/* what a message key is (key_shape()) */
typedef enum KeyShape
{
	KEY_OBJECT,					/* a JSON object */
	KEY_SCALAR,					/* a JSON string, number, boolean or null */
	KEY_OTHER					/* anything else */
} KeyShape;

/* the first token of a message key's JSON, for key_shape() */
typedef struct KeyProbe
{
	JsonLexContext *lex;
	JsonTokenType type;			/* JSON_TOKEN_END: none yet */
	char	   *text;			/* a scalar's value, NULL for null */
} KeyProbe;

static void
probe_object_start(void *arg)
{
	KeyProbe   *p = (KeyProbe *) arg;

	if (p->lex->lex_level == 0)
		p->type = JSON_TOKEN_OBJECT_START;
}

static void
probe_array_start(void *arg)
{
	KeyProbe   *p = (KeyProbe *) arg;

	if (p->lex->lex_level == 0)
		p->type = JSON_TOKEN_ARRAY_START;
}

static void
probe_scalar(void *arg, char *token, JsonTokenType type)
{
	KeyProbe   *p = (KeyProbe *) arg;

	if (p->lex->lex_level == 0 && type != JSON_TOKEN_NULL)
	{
		p->type = type;
		p->text = token;
		return;
	}
	if (p->lex->lex_level == 0)
		p->type = type;
	if (token)
		pfree(token);
}

/*
 * What the message key is: a JSON object; a JSON scalar, whose value (a
 * string's de-escaped text, a number, true or false as written, NULL for
 * null) it returns in *text; or anything else (other JSON, text that is
 * not JSON, bytes that are not text).  *what says which, for errors.
 */
static KeyShape
key_shape(SwDecoder *d, const SwMessage *msg, char **text, const char **what)
{
	JsonLexContext *lex = &d->unescape_lex;
	JsonSemAction sem;
	KeyProbe	probe;

	*text = NULL;
	if (msg->key_len >= MaxAllocSize ||
		pg_encoding_verifymbstr(GetDatabaseEncoding(), msg->key,
								(int) msg->key_len) != (int) msg->key_len)
	{
		*what = "bytes that are not text in the database encoding";
		return KEY_OTHER;
	}

	/* one parse, which de-escapes the strings (of a key, a short one) */
	lex_restart(d, lex, msg->key, msg->key_len);
	memset(&probe, 0, sizeof(probe));
	probe.lex = lex;
	probe.type = JSON_TOKEN_END;
	memset(&sem, 0, sizeof(sem));
	sem.semstate = &probe;
	sem.object_start = probe_object_start;
	sem.array_start = probe_array_start;
	sem.scalar = probe_scalar;
	if (pg_parse_json(lex, &sem) != JSON_SUCCESS)
	{
		if (probe.text)
			pfree(probe.text);
		*what = "text that is not JSON";
		return KEY_OTHER;
	}

	if (probe.type == JSON_TOKEN_OBJECT_START)
	{
		*what = "a JSON object";
		return KEY_OBJECT;
	}
	*what = json_value_kind(probe.type);
	if (probe.type == JSON_TOKEN_ARRAY_START)
		return KEY_OTHER;
	*text = probe.text;
	return KEY_SCALAR;
}

/*
 * The message key gives no value to a key column (whose values it must
 * give, see decode_message_key()): say why, and how keys look.
 */
static void
key_gives_no_value(DecodeRun *r, DecColumn *c, int sqlerrcode, const char *detail)
{
	SwDecoder  *d = r->d;
	StringInfoData fields;

	initStringInfo(&fields);
	for (int k = 0; k < d->nkey; k++)
	{
		DecColumn  *kc = &d->cols[d->key[k]];

		if (kc->source == SW_COLUMN_DATA)
			appendStringInfo(&fields, "%s\"%s\"", fields.len > 0 ? ", " : "",
							 kc->field);
	}
	r->col = NULL;
	r->in_part = false;
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg("message key gives no value for key column \"%s\" of upsert source table \"%s\"",
					c->name, d->relname),
			 errdetail("%s", detail),
			 d->ndatakey == 1
			 ? errhint("The message key names the row, as in Kafka's log compaction: give the key column's value, or a JSON object with the field %s.",
					   fields.data)
			 : errhint("The message key names the row, as in Kafka's log compaction: give a JSON object with the fields %s.",
					   fields.data)));
}

/*
 * Upsert sources with key columns that are data columns: fill those from
 * the message key (into r->values and r->nulls), which names the row of
 * the message, as Kafka's log compaction takes it, and the row that a
 * tombstone with that key deletes.  A key that is a JSON object gives them
 * by field, as the value does (and the key's other fields are not read);
 * another key gives the value of the one such column, if the table has
 * only one: a JSON scalar its value, as a field of the value would (a
 * string's de-escaped text, a number as written; a json or jsonb column
 * takes its JSON text), anything else its bytes (raw into bytea, else as
 * text), through the column's input function.  A key that does not give
 * each of them a value is an error.  Returns whether the key was an
 * object.
 */
static bool
decode_message_key(DecodeRun *r)
{
	SwDecoder  *d = r->d;
	const SwMessage *msg = r->msg;
	DecColumn  *c = &d->cols[d->datakey];
	KeyShape	shape;
	char	   *text;
	const char *what;

	if (msg->key == NULL)
		key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
						   "The message has no key.");

	r->in_key = true;
	shape = key_shape(d, msg, &text, &what);
	if (shape == KEY_OBJECT)
	{
		r->no_defaults = true;
		decode_json(r, msg->key, msg->key_len, true);
		r->no_defaults = false;
		for (int k = 0; k < d->nkey; k++)
		{
			int			i = d->key[k];

			c = &d->cols[i];
			if (c->source != SW_COLUMN_DATA)
				continue;
			if (!d->seen[i])
				key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
								   psprintf("The message key is a JSON object without the field \"%s\".",
											c->field));
			if (r->nulls[c->attidx])
				key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
								   psprintf("The field \"%s\" of the message key is null.",
											c->field));
		}
	}
	else if (d->ndatakey > 1)
		key_gives_no_value(r, c, ERRCODE_INVALID_PARAMETER_VALUE,
						   psprintf("The message key is %s, not a JSON object, and the table has %d key columns from the message value.",
									what, d->ndatakey));
	else if (shape == KEY_SCALAR && text == NULL)
		key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
						   "The message key is JSON null.");
	else
	{
		r->col = c;
		if (shape == KEY_SCALAR && !c->is_json)
			store_text(r, c, text);
		else
			store_raw(r, c, msg->key, msg->key_len);
		r->col = NULL;
		r->byte = 0;
		if (text)
			pfree(text);
	}
	r->in_key = false;
	return shape == KEY_OBJECT;
}

/*
 * A message with a value, of an upsert source whose key columns include
 * data columns: the message key must give each of them (see
 * decode_message_key()), and, where the message value gives one too, the
 * same value, by the key type's equality (1.0 and 1.00 agree).  Otherwise
 * the row would not be the one the message key names: a tombstone with
 * that key could never delete it, and would delete another key's row
 * instead.  A value that leaves a key column out takes the key's.
 */
static void
check_key_agrees(DecodeRun *r)
{
	SwDecoder  *d = r->d;
	Datum	   *values = r->values;
	bool	   *nulls = r->nulls;
	bool		object;

	r->values = d->key_values;
	r->nulls = d->key_nulls;
	memset(r->nulls, true, sizeof(bool) * d->natts);
	object = decode_message_key(r);
	r->values = values;
	r->nulls = nulls;

	for (int k = 0; k < d->nkey; k++)
	{
		DecColumn  *c = &d->cols[d->key[k]];
		int			a = c->attidx;
		Oid			out;
		bool		varlena;

		if (c->source != SW_COLUMN_DATA)
			continue;
		Assert(!d->key_nulls[a]);
		if (nulls[a])
		{
			/* a value that does not repeat the key: the key gives it */
			values[a] = d->key_values[a];
			nulls[a] = false;
			continue;
		}
		if (DatumGetBool(FunctionCall2Coll(&c->key_eq, c->collation,
										   d->key_values[a], values[a])))
			continue;
		getTypeOutputInfo(c->typid, &out, &varlena);
		r->col = c;
		r->in_key = true;
		if (object)
		{
			r->field = c->field;
			r->field_len = strlen(c->field);
		}
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("message key and value disagree on key column \"%s\" of upsert source table \"%s\"",
						c->name, d->relname),
				 errdetail("The message key gives %s, the value %s.",
						   quote_literal_cstr(OidOutputFunctionCall(out, d->key_values[a])),
						   quote_literal_cstr(OidOutputFunctionCall(out, values[a]))),
				 errhint("Give the key the same value in the message key and in the value: a tombstone with this key would not delete the row.")));
	}
}

/*
 * Decode a message into a row of the table.
 */
void
sw_decode(SwDecoder *d, const SwMessage *msg, TupleTableSlot *slot)
{
	DecodeRun	r;
	ErrorContextCallback errcb;

	begin_run(&r, d, msg, slot, &errcb);

	if (msg->value == NULL &&
		(d->format != SW_FORMAT_TEXT && d->format != SW_FORMAT_BYTES))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("message for source table \"%s\" has no value",
						d->relname),
				 errdetail("Its format needs a value; only upsert sources take messages without one (tombstones), which delete a key.")));

	switch (d->format)
	{
		case SW_FORMAT_JSON:
		case SW_FORMAT_JSON_ARRAY:
			decode_json(&r, msg->value, msg->value_len, false);
			break;
		case SW_FORMAT_TEXT:
		case SW_FORMAT_BYTES:
			for (int j = 0; j < d->ndata; j++)
			{
				r.col = &d->cols[d->data[j]];
				store_raw(&r, r.col, msg->value, msg->value_len);
			}
			r.col = NULL;
			break;
		case SW_FORMAT_CSV:
			decode_csv(&r, msg->value, msg->value_len);
			break;
	}
	r.byte = 0;

	for (int i = 0; i < d->ncols; i++)
		if (d->cols[i].source != SW_COLUMN_DATA)
			fill_metadata(&r, &d->cols[i]);

	if (d->upsert)
	{
		if (d->ndatakey > 0)
			check_key_agrees(&r);
		check_key(&r);
	}

	error_context_stack = errcb.previous;
	d->running = false;
	ExecStoreVirtualTuple(slot);
}

/*
 * Decode only the key of a tombstone of an upsert source, as sw_decode()
 * takes it from a message with a value: from the message's metadata for
 * the key columns that are metadata columns, and from the message key for
 * those that are data columns (decode_message_key()).
 */
void
sw_decode_key(SwDecoder *d, const SwMessage *msg, TupleTableSlot *slot)
{
	DecodeRun	r;
	ErrorContextCallback errcb;

	if (!d->upsert)
		elog(ERROR, "source table \"%s\" has no key", d->relname);

	begin_run(&r, d, msg, slot, &errcb);

	for (int k = 0; k < d->nkey; k++)
		if (d->cols[d->key[k]].source != SW_COLUMN_DATA)
			fill_metadata(&r, &d->cols[d->key[k]]);

	if (d->ndatakey > 0)
		(void) decode_message_key(&r);

	check_key(&r);

	error_context_stack = errcb.previous;
	d->running = false;
	ExecStoreVirtualTuple(slot);
}

/*
 * After an error: whether the decoder's last call raised it (the decoder
 * itself, or a column's input function, domain or default), and if so, in
 * *where, the context line it added ("" if none, or if it did not raise
 * it; valid until the next call), and in *in_message whether it was raised while the message was
 * read (its parts found, its values converted by their types' input
 * functions), not while a domain checked a value (its constraints are the
 * table's code) or a default was computed.  Forgets it: the next question
 * is about the next error.
 */
bool
sw_decoder_failed(SwDecoder *d, const char **where, bool *in_message)
{
	bool		failed = d->running;

	*where = failed ? d->error_where : "";
	*in_message = failed && !d->checking && !d->defaulting;
	d->running = false;
	d->checking = false;
	d->defaulting = false;
	return failed;
}
