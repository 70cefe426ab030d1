/*-------------------------------------------------------------------------
 *
 * debezium.c
 *		  envelope 'debezium': a change event's parts (op, before, after,
 *		  source, ts_ms, in Debezium's payload wrapper or not), found in its
 *		  JSON with PostgreSQL's parser
 *
 * See doc/kafka.md, "Debezium", and doc/internals.md, "Writing and the
 * stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/debezium.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "mb/pg_wchar.h"

#include "ingest/decode.h"

/* the top-level fields of an object, as spans of its JSON */
typedef struct SpanSearch
{
	JsonLexContext *lex;
	const char *const *names;
	int			nnames;
	SwSpan	   *spans;
	int			current;		/* the field being read, or -1 */
	bool		is_object;
} SpanSearch;

static void
span_object_start(void *state)
{
	SpanSearch *s = state;

	if (s->lex->lex_level == 0)
		s->is_object = true;
}

/* is a field's name, as it is in the JSON, this one? */
static bool
field_is(const char *raw, size_t len, const char *name)
{
	JsonLexContext *lex;
	bool		is;

	if (memchr(raw, '\\', len) == NULL)
		return len == strlen(name) && memcmp(raw, name, len) == 0;
	/* escapes: the lexer says what the name is, or that it is no name of ours */
	lex = makeJsonLexContextCstringLen((char *) raw - 1, (int) len + 2,
									   GetDatabaseEncoding(), true);
	is = json_lex(lex) == JSON_SUCCESS && strcmp(lex->strval->data, name) == 0;
	pfree(lex->strval->data);
	pfree(lex->strval);
	pfree(lex);
	return is;
}

static void
span_field_start(void *state, char *fname, bool isnull)
{
	SpanSearch *s = state;
	const char *raw;
	size_t		len;

	if (s->lex->lex_level != 1)
		return;					/* a field of a field's value */
	json_raw_field_name(s->lex, &raw, &len);
	s->current = -1;
	for (int i = 0; i < s->nnames; i++)
		if (field_is(raw, len, s->names[i]))
		{
			s->current = i;
			s->spans[i].data = s->lex->token_start;
			s->spans[i].isnull = isnull;
		}
}

static void
span_field_end(void *state, char *fname, bool isnull)
{
	SpanSearch *s = state;

	if (s->lex->lex_level != 1 || s->current < 0)
		return;
	s->spans[s->current].len = s->lex->prev_token_terminator - s->spans[s->current].data;
	s->current = -1;
}

/*
 * The spans of the top-level fields names[0 .. n-1] of a JSON object
 * (data NULL for a field it lacks; the last of a field given twice):
 * false if it is not a JSON object.
 */
bool
sw_json_top_fields(const char *json, size_t len, const char *const *names,
				   int n, SwSpan *spans)
{
	SpanSearch	s = {0};
	JsonSemAction sem = {0};
	bool		found;

	memset(spans, 0, sizeof(SwSpan) * n);
	if (len > PG_INT32_MAX)
		return false;
	s.lex = makeJsonLexContextCstringLen((char *) json, (int) len,
										 GetDatabaseEncoding(), false);
	s.names = names;
	s.nnames = n;
	s.spans = spans;
	s.current = -1;
	sem.semstate = &s;
	sem.object_start = span_object_start;
	sem.object_field_start = span_field_start;
	sem.object_field_end = span_field_end;
	found = pg_parse_json(s.lex, &sem) == JSON_SUCCESS && s.is_object;
	pfree(s.lex);
	return found;
}

/*
 * A Debezium change event's envelope, from its JSON: Debezium's
 * {"schema": ..., "payload": {...}} or the payload alone.  False if it is
 * not a JSON object.  env->op is the op's one letter, or '\0' if the
 * event has none that is one letter.
 */
bool
sw_debezium_envelope(const char *json, size_t len, SwEnvelope *env)
{
	static const char *const wrapper[] = {"schema", "payload"};
	static const char *const parts[] = {"op", "before", "after", "source", "ts_ms"};
	SwSpan		outer[2];
	SwSpan		spans[5];

	memset(env, 0, sizeof(SwEnvelope));
	if (!sw_json_top_fields(json, len, wrapper, 2, outer))
		return false;
	if (outer[1].data && !outer[1].isnull && outer[1].data[0] == '{')
	{
		json = outer[1].data;
		len = outer[1].len;
	}
	if (!sw_json_top_fields(json, len, parts, 5, spans))
		return false;
	if (spans[0].data && !spans[0].isnull && spans[0].len == 3 &&
		spans[0].data[0] == '"' && spans[0].data[2] == '"')
		env->op = spans[0].data[1];
	env->op_json = spans[0];
	env->before = spans[1];
	env->after = spans[2];
	env->source = spans[3];
	env->ts_ms = spans[4];
	return true;
}

/*
 * Does the JSON nest deeper than limit (objects and arrays, outside its
 * strings)?  A plain scan, which needs no stack, unlike PostgreSQL's parser.
 */
static bool
json_nests_deeper(const char *json, size_t len, int limit)
{
	int			depth = 0;
	bool		in_string = false;

	for (size_t i = 0; i < len; i++)
	{
		char		c = json[i];

		if (in_string)
		{
			if (c == '\\')
				i++;
			else if (c == '"')
				in_string = false;
		}
		else if (c == '"')
			in_string = true;
		else if (c == '{' || c == '[')
		{
			if (++depth > limit)
				return true;
		}
		else if (c == '}' || c == ']')
			depth--;
	}
	return false;
}

/*
 * Format json's event_op: the op of a message's value, read once as it is
 * added to the batch (SwMessage.op): '?' if it has none.  Asked outside
 * the subtransactions that keep a message's errors, this must not fail: a
 * value nested deeper than SW_ADD_DEPTH gives '\0', which decoding it then
 * says why, keeping the error it raises (the stack's limit, say) instead
 * of failing the batch again and again; so does a value that is not a
 * JSON object.  (No event needs more: its fields' values are read as they
 * are decoded.)
 */
#define SW_ADD_DEPTH 64

char
sw_debezium_json_op(SwDecoder *d, const char *value, size_t len)
{
	SwEnvelope	env;

	if (json_nests_deeper(value, len, SW_ADD_DEPTH) ||
		!sw_debezium_envelope(value, len, &env))
		return '\0';
	return env.op ? env.op : '?';
}

/* format json's read_event: a change event's parts into r->env */
bool
sw_debezium_json_read(DecodeRun *r, const char *value, size_t len)
{
	return sw_debezium_envelope(value, len, &r->env);
}

/* format json's decode_after: the data columns from the after image */
void
sw_debezium_json_after(DecodeRun *r)
{
	decode_json(r, r->env.after.data, r->env.after.len, false);
}
