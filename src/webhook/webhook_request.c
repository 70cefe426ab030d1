/*-------------------------------------------------------------------------
 *
 * webhook_request.c
 *		  The webhook worker's look at a request: its checks (signature,
 *		  idempotency key) and its body, cut into messages
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker), and
 * doc/webhooks.md for what a request gets.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_request.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/cryptohash.h"
#include "common/sha2.h"
#include "mb/pg_wchar.h"
#include "utils/timestamp.h"

#include "log/log.h"
#include "webhook/webhook.h"

/*
 * Whether PostgreSQL's JSON parser is reading a request's body for the
 * worker (and not writing an element it found): its errors (a body nested
 * deeper than the stack allows) are the body's, as the decoder's are.
 */
bool wh_parsing_body = false;

/* an error context: which piece of a body is decoded */
static void
piece_context(void *arg)
{
	errcontext("%s", (char *) arg);
}

/* a body's messages, as write_body() hands them to the table's ingestion */
typedef struct BodyWriter
{
	SwIngest   *ing;
	SwMessage	m;				/* the request's headers and arrival time */
} BodyWriter;

/* write one message of a body (an SwBodySplit's write) */
static void
write_piece(void *arg, const char *value, size_t len)
{
	BodyWriter *w = arg;

	w->m.value = value;
	w->m.value_len = len;
	sw_ingest_write(w->ing, &w->m);
}

/*
 * Write a request's body into its table: the messages its format makes of
 * it, each as it is found, through the table's ingestion (its batch begun
 * by the group), which raises the first error.  Returns how many rows.
 * Which part of the body is being written goes into where (of
 * SW_WHERE_BYTES), for the error's context and the caller.
 */
int
write_body(SwRequest *r, Relation ftrel, SwIngest *ing, char *where)
{
	const SwSourceTable *st = sw_ingest_source_table(ing);
	SwHeader   *headers = palloc0(sizeof(SwHeader) * Max(r->nheaders, 1));
	BodyWriter	w = {0};
	SwBodySplit split = {0};
	ErrorContextCallback errcb;
	int			n;

	for (int i = 0; i < r->nheaders; i++)
	{
		headers[i].name = r->headers[i].name;
		headers[i].value = r->headers[i].value;
		headers[i].len = r->headers[i].value ? strlen(r->headers[i].value) : 0;
	}
	w.ing = ing;
	w.m.nheaders = r->nheaders;
	w.m.headers = headers;
	w.m.partition = -1;
	w.m.offset = -1;
	w.m.timestamp_ms = r->received_ms;

	split.relname = RelationGetRelationName(ftrel);
	split.write = write_piece;
	split.arg = &w;
	split.where = where;
	split.where_size = SW_WHERE_BYTES;
	split.parsing = &wh_parsing_body;

	strlcpy(where, "the body", SW_WHERE_BYTES);
	errcb.callback = piece_context;
	errcb.arg = where;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	n = sw_split_body(st->format, r->body ? r->body : "", r->body_len, &split);

	error_context_stack = errcb.previous;
	return n;
}

/* the value of a request's header, found in any case; NULL if none */
const char *
request_header(SwRequest *r, const char *name)
{
	int			i = sw_find_header(r->headers, sizeof(SwRequestHeader),
								   r->nheaders, name, true);

	return i >= 0 ? r->headers[i].value : NULL;
}

/*
 * Check what the table can take of a request: 0 if it can, else the
 * status to answer, with the text in *text: 413 for a body over its
 * max_body_bytes, 415 for a content type its format cannot take (none
 * given is taken).  Checked before the signature (no HMAC of a body the
 * table would refuse anyway), so the texts tell nothing of the table's
 * settings.
 */
int
check_request(SwRequest *r, const SwSourceTable *st, char **text)
{
	const char *type = request_header(r, "Content-Type");
	size_t		len;
	bool		takes;
	const char *const *t;

	if (r->body_len > (size_t) st->max_body_bytes)
	{
		*text = pstrdup(SW_WEBHOOK_TOO_LARGE_TEXT);
		return 413;
	}
	if (type == NULL || type[0] == '\0')
		return 0;
	len = strcspn(type, "; \t");
	/* any, or one of the format's ("text/": any text type) */
	takes = st->format->content_types == NULL;
	for (t = st->format->content_types; !takes && t && *t; t++)
	{
		size_t		tlen = strlen(*t);

		if ((*t)[tlen - 1] == '/' ? len >= tlen : len == tlen)
			takes = pg_strncasecmp(type, *t, tlen) == 0;
	}
	if (!takes)
	{
		*text = psprintf("this table cannot take content type \"%.*s\"\n",
						 (int) Min(len, 100), type);
		return 415;
	}
	return 0;
}

/* the header of a request that a signature scheme asks for */
static const char *
signed_header(const SwSignedRequest *view, const char *name, bool *repeated)
{
	SwRequest  *r = (SwRequest *) view->arg;
	int			i = sw_find_header(r->headers, sizeof(SwRequestHeader),
								   r->nheaders, name, true);

	if (i < 0)
		return NULL;
	*repeated = sw_find_header(r->headers, sizeof(SwRequestHeader),
							   i, name, true) >= 0;
	return r->headers[i].value;
}

/*
 * Check a request's signature if the table wants one, by its scheme
 * (signature.c): 0 if it passes, else the status to answer (403 when it
 * does not match; 400 for a header of the scheme that cannot be read or
 * came twice; 401 for a signature whose timestamp is outside the replay
 * window; a request without the header is answered as to no table, 404,
 * before this), with the text in *text.  Nothing of the secret is told.
 */
int
check_signature(SwRequest *r, Relation ftrel, const SwSourceTable *st, char **text)
{
	const SwSignatureScheme *scheme = sw_signature_scheme(st);
	SwSignedRequest view;

	if (scheme == NULL)
		return 0;
	view.body = r->body ? r->body : "";
	view.body_len = r->body_len;
	view.header = signed_header;
	view.arg = r;
	view.now = (int64) timestamptz_to_time_t(GetCurrentTimestamp());
	switch (scheme->check(&view, ftrel, st))
	{
		case SW_SIGNATURE_VALID:
			break;
		case SW_SIGNATURE_MISSING:
			*text = pstrdup(SW_WEBHOOK_NOT_FOUND_TEXT);
			return 404;
		case SW_SIGNATURE_NO_PREFIX:
			if (strcmp(scheme->name, "hmac") == 0)
				*text = psprintf("the signature in header \"%s\" does not begin with \"%s\"\n",
								 st->signature_header, st->signature_prefix);
			else
				*text = psprintf("the request's %s signature does not begin as its scheme's does\n",
								 scheme->name);
			return 403;
		case SW_SIGNATURE_MISMATCH:
			if (strcmp(scheme->name, "hmac") == 0)
				*text = psprintf("the signature in header \"%s\" does not match the body\n",
								 st->signature_header);
			else
				*text = psprintf("the request's %s signature does not match\n",
								 scheme->name);
			return 403;
		case SW_SIGNATURE_MALFORMED:
			*text = psprintf("the request's %s signature headers cannot be read\n",
							 scheme->name);
			return 400;
		case SW_SIGNATURE_REPEATED:
			*text = psprintf("a header of the request's %s signature came more than once\n",
							 scheme->name);
			return 400;
		case SW_SIGNATURE_OUTSIDE_WINDOW:
			*text = psprintf("the timestamp of the request's %s signature is outside the window of signature_tolerance\n",
							 scheme->name);
			return 401;
	}
	return 0;
}

/*
 * The idempotency key of a request to a table with idempotency_header, in
 * *key (NULL if it has none, or the table takes none), and the SHA-256 of
 * its body.  If the key was written already, or cannot be taken, returns
 * the status to answer, with the text in *text, and the request writes
 * nothing: 200 and the first delivery's answer for a repeat; 422 for a key
 * that came with another body; 503 while another transaction changes it
 * (the worker is the only one to write keys: compaction or a DROP);
 * 400 for a key that is empty, too long or not text.  Else returns 0.
 */
int
check_idempotency(SwRequest *r, Oid relid, const SwSourceTable *st,
				  const char **key, uint8 *hash, char **text)
{
	pg_cryptohash_ctx *ctx;
	size_t		len;
	int32		rows;

	*key = NULL;
	if (st->idempotency_header == NULL ||
		(*key = request_header(r, st->idempotency_header)) == NULL)
		return 0;
	len = strlen(*key);
	if (len == 0 || len > SW_DELIVERY_KEY_MAX ||
		!pg_verifymbstr(*key, len, true))
	{
		*text = psprintf("the idempotency key in header \"%s\" must be 1 to %d bytes of text\n",
						 st->idempotency_header, SW_DELIVERY_KEY_MAX);
		return 400;
	}

	ctx = pg_cryptohash_create(PG_SHA256);
	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) r->body, r->body_len) < 0 ||
		pg_cryptohash_final(ctx, hash, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute the SHA-256 of a webhook body: %s",
			 pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);

	switch (sw_delivery_lookup(relid, *key, hash, &rows))
	{
		case SW_DELIVERY_NEW:
			return 0;
		case SW_DELIVERY_REPEAT:
			*text = psprintf("%d %s\n", rows, rows == 1 ? "row" : "rows");
			return 200;
		case SW_DELIVERY_CONFLICT:
			*text = pstrdup("this idempotency key came before with another body\n");
			return 422;
		case SW_DELIVERY_CHANGING:
			break;
	}
	*text = pstrdup("a delivery with this idempotency key is being changed; send it again\n");
	return 503;
}
