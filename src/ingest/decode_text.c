/*-------------------------------------------------------------------------
 *
 * decode_text.c
 *		  The formats text and bytes: the whole message value into the one
 *		  data column
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode_text.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "ingest/decode.h"

/*
 * Check that the table has exactly one data column (filled from the value
 * or body), of type bytea for 'bytes', else of a string type.
 */
static void
check_one_column(const SwSourceTable *st, Relation rel, bool bytes)
{
	StringInfoData names;
	int			ndata = 0;
	SwColumn   *data = NULL;
	const char *format = bytes ? "bytes" : "text";
	const char *type = bytes ? "bytea" : "text";
	bool		ok;

	initStringInfo(&names);
	for (int i = 0; i < st->ncolumns; i++)
	{
		if (st->columns[i].source != SW_COLUMN_DATA)
			continue;
		data = &st->columns[i];
		ndata++;
		appendStringInfo(&names, "%s%s", names.len > 0 ? ", " : "",
						 quote_identifier(data->name));
	}

	if (bytes)
		ok = ndata == 1 && getBaseType(data->typid) == BYTEAOID;
	else
		ok = ndata == 1 &&
			TypeCategory(getBaseType(data->typid)) == TYPCATEGORY_STRING;

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NUMBER),
				 errmsg("format \"%s\" needs exactly one %s column besides metadata columns",
						format, type),
				 ndata == 0
				 ? errdetail("Source table \"%s\" has no data column.",
							 RelationGetRelationName(rel))
				 : errdetail_plural("Source table \"%s\" has %d data column: %s.",
									"Source table \"%s\" has %d data columns: %s.",
									ndata, RelationGetRelationName(rel), ndata,
									names.data),
				 errhint("Mark the other columns as metadata with OPTIONS (source '...') or OPTIONS (header '...').")));
}

static void
check_text_columns(const SwSourceTable *st, Relation rel)
{
	check_one_column(st, rel, false);
}

static void
check_bytes_columns(const SwSourceTable *st, Relation rel)
{
	check_one_column(st, rel, true);
}

/*
 * The whole value, or NULL for a message without one, into the data
 * column: as text through its input function, or raw into bytea.
 */
static void
decode_whole(DecodeRun *r, const char *value, size_t len)
{
	SwDecoder  *d = r->d;

	for (int j = 0; j < d->ndata; j++)
	{
		r->col = &d->cols[d->data[j]];
		sw_store_raw(r, r->col, value, len);
	}
	r->col = NULL;
}

static const char *const text_types[] = {
	"text/", "application/json", "application/x-ndjson", "application/xml",
	"application/x-www-form-urlencoded", NULL
};

/* text: the value, as text in the database encoding */
const SwFormatOps sw_format_text = {
	.name = "text",
	.kinds = SW_KIND_KAFKA | SW_KIND_WEBHOOK,
	.content_types = text_types,
	.check_columns = check_text_columns,
	.decode = decode_whole,
};

/* bytes: the value, raw; webhook bodies of any content type */
const SwFormatOps sw_format_bytes = {
	.name = "bytes",
	.kinds = SW_KIND_KAFKA | SW_KIND_WEBHOOK,
	.check_columns = check_bytes_columns,
	.decode = decode_whole,
};
