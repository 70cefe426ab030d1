/*-------------------------------------------------------------------------
 *
 * decode_json.c
 *		  The formats json and json_array: a message value that is a JSON
 *		  object, the JSON of message keys, and webhook bodies cut into
 *		  messages (one JSON value, NDJSON, or the elements of an array)
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode_json.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "ingest/decode.h"

/* longest part of a JSON token quoted in an error */
#define SW_ERROR_TOKEN_BYTES	40

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
static int
json_error_byte(JsonLexContext *lex)
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
static int
json_error_code(JsonParseErrorType err)
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
	int			pos = offset + json_error_byte(lex);

	ereport(ERROR,
			(errcode(json_error_code(err)),
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
 * The name of the field whose value the lexer has just begun, as it is in
 * the JSON (between its quotes, escapes and all), in *name and *len.
 *
 * The lexer gives no field name (it de-escapes no strings for us), but it
 * has just read the name, a colon, and the value's first token: the name
 * is the string that ends before the colon.  Its opening quote is the
 * first quote before its closing one that no backslash escapes (a quote in
 * a valid string, which the lexer checked, is always escaped).
 */
void
json_raw_field_name(JsonLexContext *lex, const char **name, size_t *len)
{
	const char *start;
	const char *end = lex->prev_token_terminator - 1;	/* the colon */

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
	*name = start + 1;
	*len = end - *name;
}

/*
 * A top-level field: find the columns it fills.
 */
static void
json_field_start(void *arg, char *fname, bool isnull)
{
	DecodeRun  *r = (DecodeRun *) arg;
	JsonLexContext *lex = r->lex;
	const char *start;
	const char *end;
	size_t		len;

	if (lex->lex_level != 1)
		return;

	json_raw_field_name(lex, &start, &len);
	end = start + len;

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
void
decode_json(DecodeRun *r, const char *json, size_t len, bool key_only)
{
	SwDecoder  *d = r->d;
	JsonSemAction sem;
	JsonParseErrorType err;

	r->in_part = true;
	sw_verify_text(r, json, len);

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
			sw_fill_default(r, &d->cols[i]);
	}
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
 * Prepare a decoder for JSON: the hash of the fields of its data columns,
 * and the buffer of the lexer that de-escapes strings.  Every decoder has
 * them: message keys are read as JSON whatever the format of the values.
 */
void
prepare_json(SwDecoder *d)
{
	build_field_hash(d);
	d->unescape_lex.strval = makeStringInfo();
}

/* the format json's decoding: the value is one JSON object */
static void
decode_json_value(DecodeRun *r, const char *value, size_t len)
{
	decode_json(r, value, len, false);
}

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
KeyShape
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

/* ---------------------------------------------------------------------
 * Webhook bodies
 * ---------------------------------------------------------------------
 */

/*
 * Handing over the elements of a JSON array as PostgreSQL's parser finds
 * them: its semantic actions' state.
 */
typedef struct ArraySplitter
{
	JsonLexContext *lex;
	int			depth;
	const char *start;			/* of the element at depth 1 */
	const SwBodySplit *split;
	int			n;
} ArraySplitter;

static void
splitter_nest(void *state)
{
	((ArraySplitter *) state)->depth++;
}

static void
splitter_unnest(void *state)
{
	((ArraySplitter *) state)->depth--;
}

static void
array_element_start(void *state, bool isnull)
{
	ArraySplitter *w = state;

	if (w->depth == 1)
		w->start = w->lex->token_start;
}

static void
array_element_end(void *state, bool isnull)
{
	ArraySplitter *w = state;
	const SwBodySplit *s = w->split;

	if (w->depth != 1)
		return;
	snprintf(s->where, s->where_size, "element %d of the body", ++w->n);
	*s->parsing = false;
	s->write(s->arg, w->start, w->lex->prev_token_terminator - w->start);
	*s->parsing = true;
	strlcpy(s->where, "the body", s->where_size);
}

/* a body that PostgreSQL's JSON parser cannot take: say where */
static void
bad_body(JsonLexContext *lex, JsonParseErrorType result)
{
	int			byte = json_error_byte(lex);

	ereport(ERROR,
			(errcode(json_error_code(result)),
			 errmsg("invalid JSON in the body at byte %d", byte),
			 errdetail("%s", json_errdetail(result, lex))));
}

/*
 * The format json_array's body: each element of a JSON array is a
 * message.  Returns how many.
 */
static int
split_json_array(const char *body, size_t len, const SwBodySplit *s)
{
	JsonSemAction sem = {0};
	ArraySplitter w = {0};
	JsonParseErrorType result;

	if (body[strspn(body, " \t\r\n")] != '[')
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the body is not a JSON array"),
				 errhint("Source table \"%s\" has format json_array: post [{...}, {...}].",
						 s->relname)));
	w.lex = makeJsonLexContextCstringLen((char *) body, len,
										 GetDatabaseEncoding(), false);
	w.split = s;
	sem.semstate = &w;
	sem.object_start = splitter_nest;
	sem.object_end = splitter_unnest;
	sem.array_start = splitter_nest;
	sem.array_end = splitter_unnest;
	sem.array_element_start = array_element_start;
	sem.array_element_end = array_element_end;
	*s->parsing = true;
	result = pg_parse_json(w.lex, &sem);
	*s->parsing = false;
	if (result != JSON_SUCCESS)
		bad_body(w.lex, result);
	return w.n;
}

/*
 * The format json's body: one JSON value, or else a value a line
 * (NDJSON), each a message.  Returns how many.
 */
static int
split_json_body(const char *body, size_t len, const SwBodySplit *s)
{
	JsonSemAction sem = {0};
	const char *first_nl = memchr(body, '\n', len);
	bool		one_value;
	int			n = 0;

	/* a line, blank space after it aside, is one value: parsed once */
	one_value = body[strspn(body, " \t\r\n")] != '\0' &&
		(first_nl == NULL ||
		 first_nl + strspn(first_nl, " \t\r\n") == body + len);
	if (!one_value)
	{
		*s->parsing = true;
		one_value = pg_parse_json(makeJsonLexContextCstringLen((char *) body, len,
															  GetDatabaseEncoding(), false),
								  &sem) == JSON_SUCCESS;
		*s->parsing = false;
	}
	if (one_value)
	{
		s->write(s->arg, body, len);	/* one value */
		n = 1;
	}
	else
	{
		/* NDJSON: a value a line; empty lines do not count */
		size_t		at = 0;
		int			line = 0;

		while (at < len)
		{
			const char *nl = memchr(body + at, '\n', len - at);
			size_t		end = nl ? (size_t) (nl - body) : len;
			size_t		blank = 0;

			line++;
			while (at + blank < end && strchr(" \t\r", body[at + blank]))
				blank++;
			if (at + blank < end)
			{
				snprintf(s->where, s->where_size, "line %d of the body", line);
				s->write(s->arg, body + at, end - at);
				n++;
			}
			at = end + 1;
		}
	}
	if (n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("the body is empty"),
				 errhint("Source table \"%s\" has format json: post an object, or one a line.",
						 s->relname)));
	return n;
}

/* ---------------------------------------------------------------------
 * The formats
 * ---------------------------------------------------------------------
 */

static const char *const json_types[] = {
	"application/json", "application/x-ndjson", "application/ndjson", "text/plain", NULL
};

static const char *const json_array_types[] = {
	"application/json", "text/plain", NULL
};

/* json: a JSON object a message; a webhook body of one, or one a line */
const SwFormatOps sw_format_json = {
	.name = "json",
	.kinds = SW_KIND_KAFKA | SW_KIND_WEBHOOK,
	.takes_fields = true,
	.needs_value = true,
	.content_types = json_types,
	.decode = decode_json_value,
	.split_body = split_json_body,
	.event_op = sw_debezium_json_op,
	.read_event = sw_debezium_json_read,
	.decode_after = sw_debezium_json_after,
};

/* json_array (webhooks): each element of a body's JSON array, as json */
const SwFormatOps sw_format_json_array = {
	.name = "json_array",
	.kinds = SW_KIND_WEBHOOK,
	.takes_fields = true,
	.needs_value = true,
	.content_types = json_array_types,
	.decode = decode_json_value,
	.split_body = split_json_array,
};
