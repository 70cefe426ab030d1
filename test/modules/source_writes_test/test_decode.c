/*-------------------------------------------------------------------------
 *
 * test_decode.c
 *		  A door to the decoder for tests: decode a message as a worker would
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  test/modules/source_writes_test/test_decode.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "catalog/pg_type.h"
#include "datatype/timestamp.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "ingest/ingest.h"
#include "log/log.h"

PG_FUNCTION_INFO_V1(source_writes_test_decode);

/* the decoder of the table last used, kept for the session */
typedef struct TestDecoder
{
	Oid			relid;			/* InvalidOid: none */
	bool		stale;			/* the table changed since */
	MemoryContext cxt;
	SwDecoder  *decoder;
	TupleTableSlot *slot;
	char	   *topic;
} TestDecoder;

static TestDecoder cached;
static bool callback_registered = false;

static void
invalidate_decoder(Datum arg, Oid relid)
{
	if (relid == InvalidOid || relid == cached.relid)
		cached.stale = true;
}

/*
 * The decoder of a table, made anew when the table changed.
 */
static TestDecoder *
get_decoder(Oid relid)
{
	Relation	ftrel;
	MemoryContext cxt;
	MemoryContext old;
	SwSourceTable *st;

	if (cached.relid == relid && !cached.stale)
		return &cached;

	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(invalidate_decoder, (Datum) 0);
		callback_registered = true;
	}
	if (cached.cxt)
		MemoryContextDelete(cached.cxt);
	memset(&cached, 0, sizeof(cached));

	if (!sw_is_source_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", get_rel_name(relid))));

	/* a failure frees it with the statement's memory */
	cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes test_decode",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	ftrel = table_open(relid, AccessShareLock);
	st = sw_source_table(ftrel);
	cached.decoder = sw_decoder_create(ftrel, st);
	cached.slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(ftrel)),
										   &TTSOpsVirtual);
	cached.topic = st->topic ? pstrdup(st->topic) : NULL;
	table_close(ftrel, NoLock);
	MemoryContextSwitchTo(old);

	MemoryContextSetParent(cxt, TopMemoryContext);
	cached.cxt = cxt;
	cached.relid = relid;
	return &cached;
}

/*
 * source_writes_test_decode
 *
 * Decodes one message into a row of a source table, as a worker would.  A
 * test creates it; only superusers may call it, whoever it is granted to:
 *
 *		CREATE FUNCTION test_decode(src anyelement, value bytea,
 *									key bytea DEFAULT NULL,
 *									part int DEFAULT 0,
 *									"offset" bigint DEFAULT 0,
 *									ts timestamptz DEFAULT NULL,
 *									headers bytea[] DEFAULT NULL,
 *									tombstone boolean DEFAULT false)
 *		RETURNS anyelement
 *		AS 'source_writes_test', 'source_writes_test_decode' LANGUAGE C;
 *
 * src is NULL::the_source_table; value and key are the message's (NULL for
 * none), headers its headers as name, value pairs (a NULL value is a null
 * header), ts its timestamp (NULL for none) and its topic is the table's.
 * It returns the decoded row; with tombstone, only the key of a tombstone
 * (sw_decode_key()).
 *
 * Like a worker, it keeps the decoder of a table for the session, until the
 * table changes, so that a test can see that a message that fails leaves
 * the decoder fit for the next one, and time decoding alone.
 */
Datum
source_writes_test_decode(PG_FUNCTION_ARGS)
{
	Oid			relid = get_typ_typrelid(get_fn_expr_argtype(fcinfo->flinfo, 0));
	TestDecoder *td;
	SwMessage	msg;
	SwHeader   *headers = NULL;
	int			nheaders = 0;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only superusers may decode messages through source_writes_test_decode()")));
	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the first argument must be a row of a source table"),
				 errhint("Pass NULL::table_name.")));
	td = get_decoder(relid);

	memset(&msg, 0, sizeof(msg));
	if (!PG_ARGISNULL(1))
	{
		bytea	   *value = PG_GETARG_BYTEA_PP(1);

		msg.value = VARDATA_ANY(value);
		msg.value_len = VARSIZE_ANY_EXHDR(value);
	}
	if (PG_NARGS() > 2 && !PG_ARGISNULL(2))
	{
		bytea	   *key = PG_GETARG_BYTEA_PP(2);

		msg.key = VARDATA_ANY(key);
		msg.key_len = VARSIZE_ANY_EXHDR(key);
	}
	msg.partition = PG_NARGS() > 3 && !PG_ARGISNULL(3) ? PG_GETARG_INT32(3) : 0;
	msg.offset = PG_NARGS() > 4 && !PG_ARGISNULL(4) ? PG_GETARG_INT64(4) : 0;
	msg.timestamp_ms = -1;
	if (PG_NARGS() > 5 && !PG_ARGISNULL(5))
	{
		/* microseconds since 2000 to milliseconds since 1970, rounded down */
		int64		us = PG_GETARG_TIMESTAMPTZ(5) +
			(int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY;

		msg.timestamp_ms = us / 1000 - (us % 1000 < 0 ? 1 : 0);
	}
	msg.topic = td->topic;
	if (PG_NARGS() > 6 && !PG_ARGISNULL(6))
	{
		Datum	   *elems;
		bool	   *nulls;
		int			n;

		deconstruct_array(PG_GETARG_ARRAYTYPE_P(6), BYTEAOID, -1, false,
						  TYPALIGN_INT, &elems, &nulls, &n);
		if (n % 2 != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("headers must be name, value pairs")));
		headers = palloc(sizeof(SwHeader) * (n / 2 + 1));
		for (int i = 0; i < n; i += 2)
		{
			SwHeader   *h = &headers[nheaders++];
			bytea	   *name;

			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("header names cannot be null")));
			name = DatumGetByteaPP(elems[i]);
			h->name = pnstrdup(VARDATA_ANY(name), VARSIZE_ANY_EXHDR(name));
			if (nulls[i + 1])
				h->value = NULL;
			else
			{
				bytea	   *value = DatumGetByteaPP(elems[i + 1]);

				h->value = VARDATA_ANY(value);
				h->len = VARSIZE_ANY_EXHDR(value);
			}
		}
	}
	msg.nheaders = nheaders;
	msg.headers = headers;

	if (PG_NARGS() > 7 && !PG_ARGISNULL(7) && PG_GETARG_BOOL(7))
		sw_decode_key(td->decoder, &msg, td->slot);
	else
		sw_decode(td->decoder, &msg, td->slot);

	PG_RETURN_DATUM(ExecFetchSlotHeapTupleDatum(td->slot));
}
