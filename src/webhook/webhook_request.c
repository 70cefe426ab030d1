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

#include <zlib.h>

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
	w->m.piece++;
}

/*
 * The id of a request whose rows are written now, kept with them: when it
 * came, in microseconds since the Unix epoch, and later than the last
 * one's, so that no two requests this process writes share one.
 */
static int64
request_id(SwRequest *r)
{
	static int64 last = 0;

	last = Max(last + 1, r->received_ms * 1000);
	return last;
}

/*
 * Write a request's body into its table: the messages its format makes of
 * it, each as it is found, through the table's ingestion (its batch begun
 * by the group), which raises the first error.  Returns how many rows.
 * Which part of the body is being written goes into where (of
 * SW_WHERE_BYTES), for the error's context and the caller.
 */
int
write_body(SwRequest *r, Relation ftrel, SwIngest *ing, const char *key,
		   char *where)
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
	w.m.request = request_id(r);
	w.m.delivery = key;

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

/* whether a request has a header of this name (of len bytes) */
static bool
has_request_header(const void *arg, const char *name, size_t len)
{
	SwRequest  *r = (SwRequest *) arg;
	char	   *copy = pnstrdup(name, len);
	bool		has = request_header(r, copy) != NULL;

	pfree(copy);
	return has;
}

/*
 * Whether a request has none of the headers names lists, as the HTTP
 * threads ask (sw_webhook_lacks_headers): a table's signature headers.
 */
bool
request_lacks_headers(SwRequest *r, const char *names)
{
	return sw_webhook_lacks_headers(names, has_request_header, r);
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

/* the codings a body may come in: Content-Encoding's tokens */
#define SW_CODING_NONE		0
#define SW_CODING_GZIP		1
#define SW_CODING_DEFLATE	2

/*
 * The content coding of a request, from all its Content-Encoding headers:
 * SW_CODING_NONE, _GZIP or _DEFLATE; or -1, with the first token that
 * is none of those (or the second coding: a body coded twice is not
 * taken) in *bad and *bad_len.
 */
static int
body_coding(SwRequest *r, const char **bad, int *bad_len)
{
	int			coding = SW_CODING_NONE;

	for (int i = 0; i < r->nheaders; i++)
	{
		const char *s = r->headers[i].value;

		if (pg_strcasecmp(r->headers[i].name, "Content-Encoding") != 0 || s == NULL)
			continue;
		while (*s)
		{
			size_t		len;
			int			coding_of;

			s += strspn(s, " \t,");
			len = strcspn(s, " \t,");
			if (len == 0)
				break;
			if (len == 8 && pg_strncasecmp(s, "identity", len) == 0)
				coding_of = SW_CODING_NONE;
			else if ((len == 4 && pg_strncasecmp(s, "gzip", len) == 0) ||
					 (len == 6 && pg_strncasecmp(s, "x-gzip", len) == 0))
				coding_of = SW_CODING_GZIP;
			else if (len == 7 && pg_strncasecmp(s, "deflate", len) == 0)
				coding_of = SW_CODING_DEFLATE;
			else
				coding_of = -1;
			if (coding_of == -1 || (coding_of != SW_CODING_NONE && coding != SW_CODING_NONE))
			{
				*bad = s;
				*bad_len = (int) Min(len, 100);
				return -1;
			}
			if (coding_of != SW_CODING_NONE)
				coding = coding_of;
			s += len;
		}
	}
	return coding;
}

/*
 * Inflate a body coded as gzip (wbits 15 + 16, one or more members) or
 * deflate (wbits 15, zlib's format; -15, a raw deflate stream, as some
 * senders send) into out, of at most limit bytes.  Returns 0 with the
 * length in *len; 413 when the body decodes to more than limit bytes (it
 * stops there: a small body that would decode to much more is not
 * decoded further); 400 for data that is not of that format, or cut
 * short; 503 when there is no memory for zlib.  Plain C, no PostgreSQL
 * call and no error raised: zlib's state is always freed.
 */
static int
inflate_body(const char *in, size_t in_len, int wbits, char *out,
			 size_t limit, size_t *len)
{
	z_stream	z;
	int			rc;
	int			status = 0;

	memset(&z, 0, sizeof(z));
	if (inflateInit2(&z, wbits) != Z_OK)
		return 503;
	z.next_in = (Bytef *) in;
	z.next_out = (Bytef *) out;
	*len = 0;
	for (;;)
	{
		/* zlib counts in uInt: feed and take at most 1 GB at a time */
		size_t		in_left = in_len - (size_t) ((const char *) z.next_in - in);
		size_t		out_left = limit + 1 - *len;

		z.avail_in = (uInt) Min(in_left, (size_t) 1 << 30);
		z.avail_out = (uInt) Min(out_left, (size_t) 1 << 30);
		rc = inflate(&z, Z_NO_FLUSH);
		*len = (size_t) ((char *) z.next_out - out);
		if (*len > limit)
		{
			status = 413;
			break;
		}
		if (rc == Z_STREAM_END)
		{
			/* gzip: another member may follow; else the body must end */
			in_left = in_len - (size_t) ((const char *) z.next_in - in);
			if (in_left == 0)
				break;
			if (wbits != 15 + 16 || inflateReset(&z) != Z_OK)
			{
				status = 400;
				break;
			}
			continue;
		}
		if (rc == Z_MEM_ERROR)
		{
			status = 503;
			break;
		}
		if (rc != Z_OK && rc != Z_BUF_ERROR)
		{
			status = 400;		/* Z_DATA_ERROR, Z_NEED_DICT */
			break;
		}
		if (rc == Z_BUF_ERROR && z.avail_in == 0)
		{
			status = 400;		/* all of it read, and the stream not ended */
			break;
		}
	}
	inflateEnd(&z);
	return status;
}

/*
 * Decode a request's body by its Content-Encoding, after check_request:
 * *view is the request as the signature check, the idempotency key and the
 * table's format see it, with the decoded body (in the current memory
 * context) if it came coded as gzip or deflate, else the same as r.
 * Returns 0, or the status to answer with the text in *text: 415 for a
 * coding this server cannot decode, 413 for a body whose decoded bytes
 * would be more than max_body_bytes (the table's limit is on what it
 * stores), or than the SW_WEBHOOK_MAX_BODY any body may have, 400 for a
 * body that is not what its coding says, 503 with no memory to decode it.
 */
int
decode_body(SwRequest *r, const SwSourceTable *st, SwRequest *view, char **text)
{
	const char *bad = NULL;
	int			bad_len = 0;
	int			coding = body_coding(r, &bad, &bad_len);
	size_t		limit = Min((size_t) st->max_body_bytes, SW_WEBHOOK_MAX_BODY);
	const char *in = r->body ? r->body : "";
	size_t		cap;
	char	   *out;
	size_t		len = 0;
	int			status;

	*view = *r;
	if (coding == SW_CODING_NONE)
		return 0;
	if (coding < 0)
	{
		*text = psprintf("this server cannot decode content encoding \"%.*s\"\n",
						 bad_len, bad);
		return 415;
	}

	/* room for the most the table takes, and one byte to see it is more */
	cap = limit + 1;
	out = MemoryContextAllocExtended(CurrentMemoryContext, cap + 1,
									 MCXT_ALLOC_HUGE | MCXT_ALLOC_NO_OOM);
	if (out == NULL)
		status = 503;
	else if (coding == SW_CODING_GZIP)
		status = inflate_body(in, r->body_len, 15 + 16, out, limit, &len);
	else
	{
		status = inflate_body(in, r->body_len, 15, out, limit, &len);
		if (status == 400)
			status = inflate_body(in, r->body_len, -15, out, limit, &len);
	}
	switch (status)
	{
		case 0:
			out[len] = '\0';
			view->body = out;
			view->body_len = len;
			view->body_cap = cap + 1;
			return 0;
		case 413:
			*text = pstrdup(SW_WEBHOOK_TOO_LARGE_TEXT);
			break;
		case 400:
			*text = psprintf("the body is not valid %s data\n",
							 coding == SW_CODING_GZIP ? "gzip" : "deflate");
			break;
		default:
			*text = pstrdup("the server has no memory to decode the body; send it again\n");
			break;
	}
	if (out)
		pfree(out);
	return status;
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
 * The idempotency key of a request: the value of the table's
 * idempotency_header, or of its idempotency_field (a top-level field of a
 * JSON body, a string or a number), or else of its signature scheme's
 * delivery header (the provider's delivery id).  NULL if the table takes
 * none or the request has none (a body without the field, or one that is
 * not a JSON object, as a request without the header); 400 with the text
 * in *text if the field is there but holds an object or an array.
 */
static int
idempotency_key(SwRequest *r, const SwSourceTable *st, const char **key,
				const char **from, char **text)
{
	const SwSignatureScheme *scheme;

	*key = NULL;
	if (st->idempotency_header)
	{
		*from = psprintf("header \"%s\"", st->idempotency_header);
		*key = request_header(r, st->idempotency_header);
		return 0;
	}
	if (st->idempotency_field)
	{
		const char *path[1] = {st->idempotency_field};
		char	   *value;

		*from = psprintf("field \"%s\"", st->idempotency_field);
		switch (sw_json_body_field(r->body, r->body_len, path, 1, &value))
		{
			case SW_JSON_FOUND:
				*key = value;
				break;
			case SW_JSON_NOT_SCALAR:
				*text = psprintf("the idempotency key in field \"%s\" must be a string or a number\n",
								 st->idempotency_field);
				return 400;
			case SW_JSON_ABSENT:
			case SW_JSON_INVALID:
				break;
		}
		return 0;
	}
	scheme = sw_signature_scheme(st);
	for (int i = 0; scheme && i < lengthof(scheme->delivery_headers) &&
		 scheme->delivery_headers[i]; i++)
	{
		*from = psprintf("header \"%s\"", scheme->delivery_headers[i]);
		if ((*key = request_header(r, scheme->delivery_headers[i])) != NULL)
			break;
	}
	return 0;
}

/*
 * The idempotency key of a request (idempotency_key()), in *key (NULL if
 * it has none), and the SHA-256 of its body.  If the key was written
 * already, or cannot be taken, returns the status to answer, with the
 * text in *text, and the request writes nothing: 200 and the first
 * delivery's answer for a repeat; 422 for a key that came with another
 * body; 503 while another transaction changes it (the worker is the only
 * one to write keys: compaction or a DROP); 400 for a key that is empty,
 * too long or not text.  Else returns 0.
 */
int
check_idempotency(SwRequest *r, Oid relid, const SwSourceTable *st,
				  const char **key, uint8 *hash, char **text)
{
	pg_cryptohash_ctx *ctx;
	const char *from = NULL;
	size_t		len;
	int32		rows;
	int			status;

	if ((status = idempotency_key(r, st, key, &from, text)) != 0)
		return status;
	if (*key == NULL)
		return 0;
	len = strlen(*key);
	if (len == 0 || len > SW_DELIVERY_KEY_MAX ||
		!pg_verifymbstr(*key, len, true))
	{
		*text = psprintf("the idempotency key in %s must be 1 to %d bytes of text\n",
						 from, SW_DELIVERY_KEY_MAX);
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
