/*-------------------------------------------------------------------------
 *
 * ingest.h
 *		  Writing messages into a source: decoded, checked, kept as errors
 *		  when they cannot be, and consumed exactly once
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

#include "utils/relcache.h"

#include "decode.h"
#include "fdw_options.h"
#include "source_writes.h"

typedef struct SwIngest SwIngest;

extern PGDLLEXPORT SwIngest *sw_ingest_create(Relation ftrel, SwOrigin origin);
extern PGDLLEXPORT SwIngest *sw_ingest_remake(SwIngest *old, Relation ftrel);
extern PGDLLEXPORT void sw_ingest_begin(SwIngest *ing, Relation ftrel);
extern PGDLLEXPORT void sw_ingest_add(SwIngest *ing, const SwMessage *msg);
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

#endif							/* SW_INGEST_H */
