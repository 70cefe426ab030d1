/*-------------------------------------------------------------------------
 *
 * decode_csv.c
 *		  The format csv: a message value that is one CSV record of the
 *		  data columns, split by the rules of COPY's format csv
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode_csv.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "utils/memutils.h"

#include "ingest/decode.h"

/* a decoder's CSV state: the fields of a record, and the buffer they are split into */
typedef struct CsvState
{
	char	  **fields;
	StringInfoData buf;
} CsvState;

/*
 * Prepare a decoder for CSV: room for the fields of a record.
 */
static void
prepare_csv(SwDecoder *d)
{
	CsvState   *cs = palloc(sizeof(CsvState));

	cs->fields = palloc(sizeof(char *) * Max(d->ndata, 1));
	initStringInfo(&cs->buf);
	d->format_state = cs;
}

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
	StringInfo	buf = &((CsvState *) d->format_state)->buf;
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
	CsvState   *cs = (CsvState *) d->format_state;
	size_t		used;
	int			nfields;

	r->in_part = true;
	sw_verify_text(r, value, len);
	if (d->ndata == 0)
		return;					/* nothing to fill */

	if (len == 0)
		ereport(ERROR,
				(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
				 errmsg("message value holds no CSV record")));
	nfields = csv_split(d, value, len, cs->fields, d->ndata, &used);
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
		store_text(r, r->col, cs->fields[j]);
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

/* csv (Kafka): a CSV record a message */
const SwFormatOps sw_format_csv = {
	.name = "csv",
	.kinds = SW_KIND_KAFKA,
	.needs_value = true,
	.prepare = prepare_csv,
	.decode = decode_csv,
};
