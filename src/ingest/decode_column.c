/*-------------------------------------------------------------------------
 *
 * decode_column.c
 *		  Filling one column of a decoded row: text checked against the
 *		  database encoding, raw bytes, a column's default
 *
 * What decode.c and every format's file share.  See doc/internals.md,
 * "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode_column.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "mb/pg_wchar.h"
#include "utils/memutils.h"

#include "ingest/decode.h"

/*
 * Check that len bytes are text in the database encoding, without NUL
 * bytes, as the input functions of text types expect.
 */
void
sw_verify_text(DecodeRun *r, const char *s, size_t len)
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
char *
sw_make_cstring(DecodeRun *r, const char *s, size_t len)
{
	char	   *result;

	sw_verify_text(r, s, len);
	result = palloc(len + 1);
	memcpy(result, s, len);
	result[len] = '\0';
	return result;
}

/*
 * Fill a column from raw bytes, or NULL: as they are into bytea, else as
 * text through the input function.
 */
void
sw_store_raw(DecodeRun *r, DecColumn *c, const char *data, size_t len)
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
		char	   *s = sw_make_cstring(r, data, len);

		store_text(r, c, s);
		pfree(s);
	}
}

/*
 * A data column that no field filled: its default, or NULL.  A key column
 * of an upsert source that the message key fills gets neither: it takes
 * the key's value (check_key_agrees()).
 */
void
sw_fill_default(DecodeRun *r, DecColumn *c)
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
