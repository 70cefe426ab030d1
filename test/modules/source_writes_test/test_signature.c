/*-------------------------------------------------------------------------
 *
 * test_signature.c
 *		  A door to the signature schemes for tests: a scheme's verdict on
 *		  a request, as the webhook worker would check it
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  test/modules/source_writes_test/test_signature.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/timestamp.h"

#include "ingest/ingest.h"
#include "log/log.h"
#include "webhook/signature.h"

PG_FUNCTION_INFO_V1(source_writes_test_signature);

/* the headers of a request, from a jsonb object */
typedef struct TestHeaders
{
	int			n;
	SwHeader   *headers;
} TestHeaders;

/* a header's value, found in any case, the last one if repeated */
static const char *
test_header(const SwSignedRequest *request, const char *name, bool *repeated)
{
	const TestHeaders *h = request->arg;
	int			i = sw_find_header(h->headers, sizeof(SwHeader), h->n, name, true);

	if (i < 0)
		return NULL;
	*repeated = sw_find_header(h->headers, sizeof(SwHeader), i, name, true) >= 0;
	return h->headers[i].value;
}

/*
 * The name/value pairs of a jsonb object of strings; a header that comes
 * more than once is an array of its values.
 */
static void
read_headers(Jsonb *jb, TestHeaders *h)
{
	JsonbIterator *it = JsonbIteratorInit(&jb->root);
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			room = 8;
	char	   *name = NULL;
	int			depth = 0;

	h->n = 0;
	h->headers = palloc(sizeof(SwHeader) * room);
	if (!JB_ROOT_IS_OBJECT(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("headers must be a JSON object of strings")));
	while ((tok = JsonbIteratorNext(&it, &v, false)) != WJB_DONE)
	{
		if (tok == WJB_BEGIN_OBJECT || tok == WJB_BEGIN_ARRAY)
			depth++;
		else if (tok == WJB_END_OBJECT || tok == WJB_END_ARRAY)
			depth--;
		else if (tok == WJB_KEY)
			name = pnstrdup(v.val.string.val, v.val.string.len);
		else if ((tok == WJB_VALUE && depth == 1) ||
				 (tok == WJB_ELEM && depth == 2))
		{
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("headers must be a JSON object of strings")));
			if (h->n == room)
			{
				room *= 2;
				h->headers = repalloc(h->headers, sizeof(SwHeader) * room);
			}
			h->headers[h->n].name = name;
			h->headers[h->n].value = pnstrdup(v.val.string.val, v.val.string.len);
			h->headers[h->n].len = v.val.string.len;
			h->n++;
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("headers must be a JSON object of strings")));
	}
}

/*
 * source_writes_test_signature
 *
 * A test creates it (see sql/signatures.sql); only superusers may call it:
 *
 *		CREATE FUNCTION test_signature(tab regclass, body bytea, headers jsonb,
 *									   now timestamptz DEFAULT NULL)
 *		RETURNS text
 *		AS 'source_writes_test', 'source_writes_test_signature' LANGUAGE C;
 *
 * headers is an object of header names and their text values (an array of
 * them for a header that comes more than once); now is the server's clock
 * for the replay window (NULL: the clock itself).  It returns
 * the table's scheme and its verdict, e.g. "hmac: valid", or "none" for a
 * table that checks no signature.
 */
Datum
source_writes_test_signature(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	bytea	   *body = PG_GETARG_BYTEA_PP(1);
	TestHeaders headers;
	SwSignedRequest request;
	const SwSignatureScheme *scheme;
	const char *verdict = "?";
	Relation	ftrel;
	SwSourceTable *st;

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only superusers may check signatures through source_writes_test_signature()")));
	if (!sw_is_source_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", get_rel_name(relid))));
	read_headers(PG_GETARG_JSONB_P(2), &headers);

	ftrel = table_open(relid, AccessShareLock);
	st = sw_source_table(ftrel);
	scheme = sw_signature_scheme(st);
	if (scheme == NULL)
	{
		table_close(ftrel, AccessShareLock);
		PG_RETURN_TEXT_P(cstring_to_text("none"));
	}

	request.body = VARDATA_ANY(body);
	request.body_len = VARSIZE_ANY_EXHDR(body);
	request.header = test_header;
	request.arg = &headers;
	request.now = (int64) timestamptz_to_time_t(PG_NARGS() > 3 && !PG_ARGISNULL(3) ?
												PG_GETARG_TIMESTAMPTZ(3) :
												GetCurrentTimestamp());
	switch (scheme->check(&request, ftrel, st))
	{
		case SW_SIGNATURE_VALID:
			verdict = "valid";
			break;
		case SW_SIGNATURE_MISSING:
			verdict = "missing";
			break;
		case SW_SIGNATURE_NO_PREFIX:
			verdict = "no prefix";
			break;
		case SW_SIGNATURE_MISMATCH:
			verdict = "mismatch";
			break;
		case SW_SIGNATURE_MALFORMED:
			verdict = "malformed";
			break;
		case SW_SIGNATURE_REPEATED:
			verdict = "repeated";
			break;
		case SW_SIGNATURE_OUTSIDE_WINDOW:
			verdict = "outside the window";
			break;
	}
	table_close(ftrel, AccessShareLock);
	PG_RETURN_TEXT_P(cstring_to_text(psprintf("%s: %s", scheme->name, verdict)));
}
