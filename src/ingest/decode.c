/*-------------------------------------------------------------------------
 *
 * decode.c
 *		  Turning one message into a row of a source table
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Decoding).
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
#include "common/int.h"
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

#include "ingest/decode.h"

/* microseconds from the Unix epoch to PostgreSQL's */
#define SW_EPOCH_DIFF_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)


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
			case SW_COLUMN_OP:
			case SW_COLUMN_BEFORE:
			case SW_COLUMN_SOURCE:
			case SW_COLUMN_TS_MS:
				appendStringInfoString(&buf, ", the change event's envelope");
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
		sw_verify_text(r, h->name, strlen(h->name));
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
			char	   *value = sw_make_cstring(r, h->value, h->len);

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

/* a part of a change event's envelope, as JSON, or NULL */
static void
store_span(DecodeRun *r, DecColumn *c, const SwSpan *span)
{
	char	   *json;

	if (span->data == NULL || span->isnull)
	{
		store_text(r, c, NULL);
		return;
	}
	json = sw_make_cstring(r, span->data, span->len);
	store_text(r, c, json);
	pfree(json);
}

/* a change event's ts_ms, into a bigint or a timestamptz column */
static void
store_ts_ms(DecodeRun *r, DecColumn *c, const SwSpan *span)
{
	char	   *text;
	int64		ms;

	if (span->data == NULL || span->isnull)
	{
		store_text(r, c, NULL);
		return;
	}
	text = sw_make_cstring(r, span->data, span->len);
	if (c->basetype == TIMESTAMPTZOID)
	{
		ms = pg_strtoint64(text);
		store_timestamp(r, c, ms);
	}
	else
		store_text(r, c, text);
	pfree(text);
}

/*
 * Fill a metadata column from the message.
 */
static void
fill_metadata(DecodeRun *r, DecColumn *c)
{
	const SwMessage *msg = r->msg;
	int			h;

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
			sw_store_raw(r, c, msg->key, msg->key_len);
			break;
		case SW_COLUMN_BODY:
			sw_store_raw(r, c, msg->value, msg->value_len);
			break;
		case SW_COLUMN_HEADER:
			/* exactly for Kafka, in any case for webhooks (HTTP) */
			h = sw_find_header(msg->headers, sizeof(SwHeader), msg->nheaders,
							   c->header, r->d->kind == SW_KIND_WEBHOOK);
			if (h >= 0)
				sw_store_raw(r, c, msg->headers[h].value, msg->headers[h].len);
			else
				sw_store_raw(r, c, NULL, 0);
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
		case SW_COLUMN_OP:
			if (r->env.op)
				store_datum(r, c, PointerGetDatum(cstring_to_text_with_len(&r->env.op, 1)), false);
			else
				store_datum(r, c, (Datum) 0, true);
			break;
		case SW_COLUMN_BEFORE:
			store_span(r, c, &r->env.before);
			break;
		case SW_COLUMN_SOURCE:
			store_span(r, c, &r->env.source);
			break;
		case SW_COLUMN_TS_MS:
			store_ts_ms(r, c, &r->env.ts_ms);
			break;
	}
	r->col = NULL;
	r->byte = 0;
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
	d->serverid = st->serverid;
	d->format = st->format;
	d->upsert = st->upsert;
	d->debezium = st->debezium;
	d->key_format = st->key_format;
	if (d->key_format == SW_KEY_AVRO || strcmp(d->format->name, "avro") == 0)
		d->registry = avro_server_registry(d->serverid);
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

	prepare_json(d);			/* message keys are JSON in every format */
	if (d->ndatakey > 0)
	{
		d->key_values = palloc(sizeof(Datum) * Max(d->natts, 1));
		d->key_nulls = palloc(sizeof(bool) * Max(d->natts, 1));
	}
	if (d->format->prepare)
		d->format->prepare(d);
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
 * After a message key that is a JSON object or an Avro record (what, for
 * the errors) filled the key columns that are data columns by field:
 * each must have been filled (d->seen), and not with null.
 */
static void
check_key_fields(DecodeRun *r, const char *what)
{
	SwDecoder  *d = r->d;

	for (int k = 0; k < d->nkey; k++)
	{
		int			i = d->key[k];
		DecColumn  *c = &d->cols[i];

		if (c->source != SW_COLUMN_DATA)
			continue;
		if (!d->seen[i])
			key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
							   psprintf("The message key is %s without the field \"%s\".",
										what, c->field));
		if (r->nulls[c->attidx])
			key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
							   psprintf("The field \"%s\" of the message key is null.",
										c->field));
	}
}

/*
 * decode_message_key() for key_format avro: a key that is a record gives
 * the key columns by field, as the value does; another gives the one key
 * column, if the table has only one.  Returns whether it was a record.
 */
static bool
decode_avro_message_key(DecodeRun *r)
{
	SwDecoder  *d = r->d;
	DecColumn  *c = &d->cols[d->datakey];
	bool		record;

	memset(d->seen, false, sizeof(bool) * d->ncols);
	record = decode_avro_key(r, r->msg->key, r->msg->key_len);
	if (!record && d->ndatakey > 1)
		key_gives_no_value(r, c, ERRCODE_INVALID_PARAMETER_VALUE,
						   psprintf("The message key is an Avro value that is not a record, and the table has %d key columns from the message value.",
									d->ndatakey));
	if (record)
		check_key_fields(r, "an Avro record");
	else if (r->nulls[c->attidx])
		key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
						   "The message key is null.");
	r->in_key = false;
	return record;
}

/*
 * A Debezium key in its {"schema": ..., "payload": {...}} wrapper: the
 * message (in *copy) with the payload as its key, which r->msg is while
 * the key is read; the message as it is for a key without one.
 */
static const SwMessage *
unwrapped_key(DecodeRun *r, SwMessage *copy)
{
	static const char *const wrapper[] = {"schema", "payload"};
	const SwMessage *msg = r->msg;
	SwSpan		spans[2];

	if (!sw_json_top_fields(msg->key, msg->key_len, wrapper, 2, spans) ||
		spans[0].data == NULL || spans[1].data == NULL || spans[1].isnull)
		return msg;
	*copy = *msg;
	copy->key = spans[1].data;
	copy->key_len = spans[1].len;
	r->msg = copy;
	return copy;
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
	SwMessage	unwrapped;
	const SwMessage *original = msg;

	if (msg->key == NULL)
		key_gives_no_value(r, c, ERRCODE_NOT_NULL_VIOLATION,
						   "The message has no key.");

	r->in_key = true;
	if (d->key_format == SW_KEY_AVRO)
		return decode_avro_message_key(r);
	if (d->debezium && d->key_format == SW_KEY_JSON)
		msg = unwrapped_key(r, &unwrapped);
	if (d->key_format == SW_KEY_JSON)
		shape = key_shape(d, msg, &text, &what);
	else
	{
		/* text or bytes: the key as it is, never read as JSON */
		shape = KEY_OTHER;
		text = NULL;
		what = d->key_format == SW_KEY_TEXT ? "text (key_format 'text')" :
			"bytes (key_format 'bytes')";
	}
	if (shape == KEY_OBJECT)
	{
		r->no_defaults = true;
		decode_json(r, msg->key, msg->key_len, true);
		r->no_defaults = false;
		check_key_fields(r, "a JSON object");
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
			sw_store_raw(r, c, msg->key, msg->key_len);
		r->col = NULL;
		r->byte = 0;
		if (text)
			pfree(text);
	}
	r->in_key = false;
	r->msg = original;
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
 * envelope 'debezium': the row of a change event is its after image, for
 * ops c (create), r (read, in a snapshot) and u (update); d (delete) and
 * tombstones are written as deletes of their key, and never come here.
 */
static void
decode_change_event(DecodeRun *r)
{
	const SwMessage *msg = r->msg;
	SwEnvelope *env = &r->env;

	r->in_part = true;
	if (!r->d->format->read_event(r, msg->value, msg->value_len))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
				 errmsg("Debezium change event is not a JSON object")));
	switch (env->op)
	{
		case 'c':
		case 'r':
		case 'u':
			if (env->after.data == NULL || env->after.isnull)
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("Debezium change event of op '%c' has no \"after\"", env->op),
						 errdetail("Its after image is the row of its key.")));
			r->in_part = false;
			r->d->format->decode_after(r);
			return;
		case 't':
			/* taken in their place as they come (sw_ingest_add()) */
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a Debezium truncate event is taken only in its place among its topic's events"),
					 errdetail("Retried later, it would retract rows that came after it.")));
			break;
		case '\0':
			if (env->op_json.data && !env->op_json.isnull)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("Debezium change event has an unknown op %s",
								sw_make_cstring(r, env->op_json.data,
												pg_mbcliplen(env->op_json.data, env->op_json.len, 64))),
						 errdetail("An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".")));
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("Debezium change event has no \"op\""),
					 errdetail("An event says what it does in \"op\": \"c\", \"r\", \"u\", \"d\" or \"t\".")));
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("Debezium change event has an unknown op \"%c\"", env->op)));
	}
}

/*
 * envelope 'debezium': the op of a change event, as its format reads it
 * without an error (sw_ingest_add() asks, outside the subtransactions that
 * keep a message's errors); '\0' for a tombstone.
 */
char
sw_decoder_event_op(SwDecoder *d, const SwMessage *msg)
{
	if (msg->value == NULL)
		return '\0';
	return d->format->event_op(d, msg->value, msg->value_len);
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

	if (msg->value == NULL && d->format->needs_value)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("message for source table \"%s\" has no value",
						d->relname),
				 errdetail("Its format needs a value; only upsert sources take messages without one (tombstones), which delete a key.")));

	if (d->debezium)
		decode_change_event(&r);
	else
		d->format->decode(&r, msg->value, msg->value_len);
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

/* ---------------------------------------------------------------------
 * Formats
 * ---------------------------------------------------------------------
 */

/* the formats, in the order their names are listed in hints */
static const SwFormatOps *const formats[] = {
	&sw_format_json,
	&sw_format_json_array,
	&sw_format_text,
	&sw_format_bytes,
	&sw_format_csv,
	&sw_format_avro,
};

/*
 * Hand the table of formats to the option parser, which resolves option
 * format with it.  From _PG_init.
 */
void
sw_register_formats(void)
{
	sw_set_formats(formats, lengthof(formats));
}

/*
 * Cut a webhook body of len bytes, NUL-terminated, into the messages of
 * its table's format, and hand each to split->write as it is found; the
 * formats without a way of their own take the body as one message.
 * Returns how many; raises an ERROR for a body the format cannot cut.
 */
int
sw_split_body(const SwFormatOps *format, const char *body, size_t len,
			  const SwBodySplit *split)
{
	if (format->split_body)
		return format->split_body(body, len, split);
	split->write(split->arg, body, len);
	return 1;
}

/*
 * The last of n headers with a name, or -1: names compare exactly, or in
 * any case if any_case (HTTP's).  Each of the n structs of stride bytes
 * at headers begins with the header's name, a char pointer.
 */
int
sw_find_header(const void *headers, size_t stride, int n, const char *name,
			   bool any_case)
{
	for (int i = n - 1; i >= 0; i--)
	{
		const char *h = *(const char *const *) ((const char *) headers + i * stride);

		if (any_case ? pg_strcasecmp(h, name) == 0 : strcmp(h, name) == 0)
			return i;
	}
	return -1;
}
