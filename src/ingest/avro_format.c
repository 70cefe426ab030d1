/*-------------------------------------------------------------------------
 *
 * avro_format.c
 *		  The format avro as source_writes.so lists it: its checks at DDL,
 *		  and its decoding, which source_writes_avro.so does
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/avro_format.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "commands/defrem.h"
#include "fmgr.h"
#include "foreign/foreign.h"

#include "ingest/avro.h"
#include "ingest/decode.h"

typedef void (*PrepareFunc) (SwDecoder *d);
typedef void (*DecodeFunc) (DecodeRun *r, const char *value, size_t len);
typedef bool (*DecodeKeyFunc) (DecodeRun *r, const char *key, size_t len);
typedef char (*EventOpFunc) (SwDecoder *d, const char *value, size_t len);
typedef bool (*ReadEventFunc) (DecodeRun *r, const char *value, size_t len);
typedef void (*DecodeAfterFunc) (DecodeRun *r);

/*
 * A function of source_writes_avro.so, which is loaded on first use.
 */
void *
sw_avro_function(const char *name)
{
	return (void *) load_external_function(SW_AVRO_LIBRARY, name, true, NULL);
}

/* the server option schema_registry of a server, or NULL */
char *
avro_server_registry(Oid serverid)
{
	ListCell   *lc;

	foreach(lc, GetForeignServer(serverid)->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "schema_registry") == 0)
			return defGetString(def);
	}
	return NULL;
}

/* a table of format avro needs its server to name a schema registry */
static void
check_avro_columns(const SwSourceTable *st, Relation rel)
{
	if (avro_server_registry(st->serverid) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("format \"avro\" needs server option \"schema_registry\""),
				 errhint("Name the schema registry the writers use, e.g. ALTER SERVER ... OPTIONS (ADD schema_registry 'http://registry:8081').")));
}

static void
prepare_avro(SwDecoder *d)
{
	((PrepareFunc) sw_avro_function("sw_avro_prepare")) (d);
}

static void
decode_avro(DecodeRun *r, const char *value, size_t len)
{
	static DecodeFunc decode = NULL;

	if (decode == NULL)
		decode = (DecodeFunc) sw_avro_function("sw_avro_decode");
	decode(r, value, len);
}

/*
 * An upsert message's key of key_format avro, into the key columns that
 * are data columns (decode_message_key()): true if it is a record.
 */
bool
decode_avro_key(DecodeRun *r, const char *key, size_t len)
{
	static DecodeKeyFunc decode = NULL;

	if (decode == NULL)
		decode = (DecodeKeyFunc) sw_avro_function("sw_avro_decode_key");
	return decode(r, key, len);
}

/* envelope 'debezium': an event's op, as sw_ingest_add() reads it */
static char
avro_event_op(SwDecoder *d, const char *value, size_t len)
{
	static EventOpFunc event_op = NULL;

	if (event_op == NULL)
		event_op = (EventOpFunc) sw_avro_function("sw_avro_event_op");
	return event_op(d, value, len);
}

/* ... an event's parts */
static bool
avro_read_event(DecodeRun *r, const char *value, size_t len)
{
	static ReadEventFunc read_event = NULL;

	if (read_event == NULL)
		read_event = (ReadEventFunc) sw_avro_function("sw_avro_read_event");
	return read_event(r, value, len);
}

/* ... and the row of its after image */
static void
avro_decode_after(DecodeRun *r)
{
	static DecodeAfterFunc decode_after = NULL;

	if (decode_after == NULL)
		decode_after = (DecodeAfterFunc) sw_avro_function("sw_avro_decode_after");
	decode_after(r);
}

/* avro: records in the Confluent wire format, fields to columns by name */
const SwFormatOps sw_format_avro = {
	.name = "avro",
	.kinds = SW_KIND_KAFKA,
	.takes_fields = true,
	.needs_value = true,
	.check_columns = check_avro_columns,
	.prepare = prepare_avro,
	.decode = decode_avro,
	.event_op = avro_event_op,
	.read_event = avro_read_event,
	.decode_after = avro_decode_after,
};
