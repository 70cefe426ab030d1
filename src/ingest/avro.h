/*-------------------------------------------------------------------------
 *
 * avro.h
 *		  Format avro: what source_writes_avro.so (decode_avro.c) offers, and
 *		  how source_writes.so and the Kafka workers' library reach it
 *
 * Only source_writes_avro.so is linked with Apache Avro C; the others find
 * its functions with load_external_function() (sw_avro_function()), so
 * that backends that never decode Avro never load it.  See
 * doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/avro.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_INGEST_AVRO_H
#define SW_INGEST_AVRO_H

#include "ingest/ingest.h"

/* the library, as load_external_function() names it */
#define SW_AVRO_LIBRARY		"$libdir/source_writes_avro"

struct DecodeRun;

/* decode_avro.c, in source_writes_avro.so */
extern PGDLLEXPORT void sw_avro_prepare(SwDecoder *d);
extern PGDLLEXPORT void sw_avro_decode(struct DecodeRun *r, const char *value, size_t len);
extern PGDLLEXPORT bool sw_avro_decode_key(struct DecodeRun *r, const char *key, size_t len);
extern PGDLLEXPORT const char *sw_avro_schema_add(Oid serverid, int32 id,
												  const char *json, size_t len);
extern PGDLLEXPORT void sw_avro_schema_refuse(Oid serverid, int32 id, const char *why);
extern PGDLLEXPORT bool sw_avro_schema_known(Oid serverid, int32 id);
extern PGDLLEXPORT char sw_avro_event_op(SwDecoder *d, const char *value, size_t len);
extern PGDLLEXPORT bool sw_avro_read_event(struct DecodeRun *r, const char *value, size_t len);
extern PGDLLEXPORT void sw_avro_decode_after(struct DecodeRun *r);

/*
 * The schema id of a message value in the Confluent wire format (a magic
 * byte 0, the id in 4 bytes, big-endian, then the Avro body): true with it
 * in *id, false if the value is not in that format.
 */
static inline bool
sw_avro_wire_id(const char *value, size_t len, int32 *id)
{
	if (value == NULL || len < 5 || value[0] != 0)
		return false;
	*id = (int32) (((uint32) (uint8) value[1] << 24) | ((uint32) (uint8) value[2] << 16) |
				   ((uint32) (uint8) value[3] << 8) | (uint32) (uint8) value[4]);
	return true;
}

/* avro_format.c, in source_writes.so: a function of source_writes_avro.so */
extern PGDLLEXPORT void *sw_avro_function(const char *name);

#endif							/* SW_INGEST_AVRO_H */
