/*-------------------------------------------------------------------------
 *
 * webhook_handshake.c
 *		  The handshakes with which providers check a webhook address before
 *		  they send to it, answered without writing a row; and the fields of
 *		  a JSON body they and the idempotency key are read from
 *
 * See doc/webhooks.md, "Providers", and doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_handshake.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/jsonapi.h"
#include "common/sha2.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "utils/json.h"
#include "utils/rel.h"

#include "webhook/signature.h"
#include "webhook/webhook.h"

/* the search of a JSON body for one field (a path of names) */
typedef struct FieldSearch
{
	JsonLexContext *lex;
	const char *const *path;
	int			npath;
	int			matched;		/* names of the path the open fields match */
	bool		pending;		/* the next value is the field's */
	bool		is_object;		/* the body is an object */
	SwJsonField result;
	char	   *value;
} FieldSearch;

static void
search_object_start(void *state)
{
	FieldSearch *s = state;

	if (s->lex->lex_level == 0)
		s->is_object = true;
	if (s->pending)
	{
		s->result = SW_JSON_NOT_SCALAR;
		s->pending = false;
	}
}

static void
search_array_start(void *state)
{
	FieldSearch *s = state;

	if (s->pending)
	{
		s->result = SW_JSON_NOT_SCALAR;
		s->pending = false;
	}
}

static void
search_field_start(void *state, char *fname, bool isnull)
{
	FieldSearch *s = state;
	int			level = s->lex->lex_level;

	if (level - 1 != s->matched || level > s->npath ||
		strcmp(fname, s->path[level - 1]) != 0)
		return;
	if (level == s->npath)
		s->pending = true;
	else
		s->matched = level;
}

static void
search_field_end(void *state, char *fname, bool isnull)
{
	FieldSearch *s = state;
	int			level = s->lex->lex_level;

	if (s->matched >= level)
		s->matched = level - 1;
	s->pending = false;
}

static void
search_scalar(void *state, char *token, JsonTokenType type)
{
	FieldSearch *s = state;

	if (!s->pending)
		return;
	s->pending = false;
	/* the last of a field given twice, as jsonb keeps it; no boolean */
	if (type == JSON_TOKEN_NULL)
	{
		s->result = SW_JSON_ABSENT;
		s->value = NULL;
	}
	else if (type == JSON_TOKEN_TRUE || type == JSON_TOKEN_FALSE)
	{
		s->result = SW_JSON_NOT_SCALAR;
		s->value = NULL;
	}
	else
	{
		s->result = SW_JSON_FOUND;
		s->value = token;
	}
}

/* a \u escape PostgreSQL's JSON parser cannot make text of */
static bool
is_escape_error(JsonParseErrorType error)
{
	return error == JSON_UNICODE_CODE_POINT_ZERO ||
		error == JSON_UNICODE_HIGH_ESCAPE ||
		error == JSON_UNICODE_HIGH_SURROGATE ||
		error == JSON_UNICODE_LOW_SURROGATE;
}

/* the code point of the 4 hex digits at p, or -1 */
static int
hex4(const char *p, const char *end)
{
	int			cp = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++)
	{
		int			d = sw_webhook_hex_digit(p[i]);

		if (d < 0)
			return -1;
		cp = cp * 16 + d;
	}
	return cp;
}

/*
 * A copy of a JSON body whose \u escapes that PostgreSQL cannot make text
 * of (\u0000, a lone surrogate, and in a database that is not UTF-8 any
 * above \u007f) are \ufffd (\u003f if not UTF-8), each in the same
 * bytes: what is found in it is the same for every copy of the body.
 */
static char *
readable_copy(const char *body, size_t len)
{
	char	   *copy = palloc(len + 1);
	char	   *end = copy + len;
	bool		utf8 = GetDatabaseEncoding() == PG_UTF8;

	memcpy(copy, body, len);
	copy[len] = '\0';
	for (char *p = copy; p < end; p++)
	{
		int			cp;

		if (*p != '\\')
			continue;
		if (p + 1 < end && p[1] != 'u')
		{
			p++;				/* another escape: two bytes */
			continue;
		}
		if ((cp = hex4(p + 2, end)) < 0)
			continue;
		if (utf8 && cp >= 0xD800 && cp <= 0xDBFF && end - p >= 12 &&
			p[6] == '\\' && p[7] == 'u' && hex4(p + 8, end) >= 0xDC00 &&
			hex4(p + 8, end) <= 0xDFFF)
		{
			p += 11;			/* a pair, which makes one character */
			continue;
		}
		if (cp == 0 || (cp >= 0xD800 && cp <= 0xDFFF) || (!utf8 && cp > 0x7F))
			memcpy(p + 2, utf8 ? "fffd" : "003f", 4);
		p += 5;
	}
	return copy;
}

/* one search of a body, with PostgreSQL's parser */
static JsonParseErrorType
search_body(FieldSearch *s, const char *body, size_t len)
{
	JsonSemAction sem = {0};
	JsonParseErrorType error;

	s->lex = makeJsonLexContextCstringLen((char *) body, (int) len,
										  GetDatabaseEncoding(), true);
	s->matched = 0;
	s->pending = false;
	s->is_object = false;
	s->result = SW_JSON_ABSENT;
	s->value = NULL;
	sem.semstate = s;
	sem.object_start = search_object_start;
	sem.array_start = search_array_start;
	sem.object_field_start = search_field_start;
	sem.object_field_end = search_field_end;
	sem.scalar = search_scalar;
	/* its errors (a body nested deeper than the stack allows) are the body's */
	wh_parsing_body = true;
	error = pg_parse_json(s->lex, &sem);
	wh_parsing_body = false;
	return error;
}

/*
 * Find a field of a JSON body by its path of names (a top-level field, or
 * one in objects under it), with PostgreSQL's JSON parser:
 * SW_JSON_FOUND with its value as text in *value (a string unescaped, a
 * number as written); SW_JSON_ABSENT if the body is an object without it
 * (or it is null); SW_JSON_NOT_SCALAR if it is an object, an array or a
 * boolean; SW_JSON_INVALID if the body is not a JSON object.  A body with
 * escapes the parser cannot make text of (\u0000 in a user's note) is
 * searched again as readable_copy() makes it, so that a provider's retry
 * of it finds the same key.
 */
SwJsonField
sw_json_body_field(const char *body, size_t len, const char *const *path,
				   int npath, char **value)
{
	FieldSearch s = {0};
	JsonParseErrorType error;

	*value = NULL;
	if (len > PG_INT32_MAX)
		return SW_JSON_INVALID;
	s.path = path;
	s.npath = npath;
	error = search_body(&s, body, len);
	if (is_escape_error(error))
		error = search_body(&s, readable_copy(body, len), len);
	if (error != JSON_SUCCESS || !s.is_object)
		return SW_JSON_INVALID;
	*value = s.value;
	return s.result;
}

/* a top-level field of a JSON body that is a string or number, or NULL */
static char *
body_field(SwRequest *r, const char *name)
{
	const char *path[1] = {name};
	char	   *value;

	if (sw_json_body_field(r->body, r->body_len, path, 1, &value) != SW_JSON_FOUND)
		return NULL;
	return value;
}

/* log a handshake answered */
static void
log_handshake(Relation ftrel, const char *provider, const char *kind)
{
	ereport(LOG,
			(errmsg("webhook source table \"%s\" answered a %s %s handshake",
					RelationGetRelationName(ftrel), provider, kind),
			 errdetail("No row was written.")));
}

/*
 * If a request whose signature passed is a handshake of its table's
 * scheme, answer it: 200 with the answer in *text (JSON if *json), or 400
 * for one that lacks what its answer needs, with nothing written.  0 if
 * it is no handshake, and is to be written.
 *
 *	slack	a body {"type": "url_verification", "challenge": ...}, answered
 *			with the challenge as plain text (Slack, "url_verification")
 *	twitch	Twitch-Eventsub-Message-Type: webhook_callback_verification,
 *			answered with the body's challenge as plain text
 *	zoom	a body {"event": "endpoint.url_validation", "payload":
 *			{"plainToken": ...}}, answered with {"plainToken": ...,
 *			"encryptedToken": <hex HMAC-SHA256 of it with the secret>}
 */
int
answer_handshake(SwRequest *r, Relation ftrel, const SwSourceTable *st,
				 char **text, bool *json)
{
	const SwSignatureScheme *scheme = sw_signature_scheme(st);
	const char *provider;
	const char *kind;
	char	   *answer = NULL;

	*json = false;
	if (scheme == NULL)
		return 0;
	if (strcmp(scheme->name, "slack") == 0)
	{
		char	   *type = body_field(r, "type");

		if (type == NULL || strcmp(type, "url_verification") != 0)
			return 0;
		provider = "Slack";
		kind = "url_verification";
		answer = body_field(r, "challenge");
	}
	else if (strcmp(scheme->name, "twitch") == 0)
	{
		const char *type = request_header(r, "Twitch-Eventsub-Message-Type");

		if (type == NULL || strcmp(type, "webhook_callback_verification") != 0)
			return 0;
		provider = "Twitch";
		kind = "webhook_callback_verification";
		answer = body_field(r, "challenge");
	}
	else if (strcmp(scheme->name, "zoom") == 0)
	{
		const char *path[2] = {"payload", "plainToken"};
		char	   *event = body_field(r, "event");
		char	   *token;

		if (event == NULL || strcmp(event, "endpoint.url_validation") != 0)
			return 0;
		provider = "Zoom";
		kind = "endpoint.url_validation";
		if (sw_json_body_field(r->body, r->body_len, path, 2, &token) == SW_JSON_FOUND)
		{
			StringInfoData buf;
			char		hex[PG_SHA256_DIGEST_LENGTH * 2 + 1];

			sw_signature_hmac_hex(ftrel, st, token, strlen(token), hex);
			initStringInfo(&buf);
			appendStringInfoString(&buf, "{\"plainToken\":");
			escape_json(&buf, token);
			appendStringInfo(&buf, ",\"encryptedToken\":\"%s\"}", hex);
			answer = buf.data;
			*json = true;
		}
	}
	else
		return 0;

	if (answer == NULL || answer[0] == '\0')
	{
		*json = false;
		*text = psprintf("the %s %s request has no %s\n", provider, kind,
						 strcmp(provider, "Zoom") == 0 ? "payload.plainToken" : "challenge");
		return 400;
	}
	log_handshake(ftrel, provider, kind);
	*text = answer;
	return 200;
}

/* decode a percent-encoded value of a query in place (its '+'s are spaces) */
static bool
decode_query_value(char *s)
{
	char	   *out = s;

	for (char *p = s; *p; p++)
	{
		if (*p == '%')
		{
			int			hi = sw_webhook_hex_digit(p[1]);
			int			lo = hi < 0 ? -1 : sw_webhook_hex_digit(p[2]);

			if (lo < 0)
				return false;
			*out++ = (char) (hi * 16 + lo);
			p += 2;
		}
		else
			*out++ = *p;
	}
	*out = '\0';
	return pg_verifymbstr(s, out - s, true);
}

/* the value of an argument of a request's query, decoded, or NULL */
static char *
query_value(SwRequest *r, const char *name, bool *bad)
{
	char	   *query = pstrdup(r->query);
	char	   *found = NULL;
	char	   *save;

	for (char *arg = strtok_r(query, "&", &save); arg; arg = strtok_r(NULL, "&", &save))
	{
		char	   *eq = strchr(arg, '=');

		if (eq == NULL || (size_t) (eq - arg) != strlen(name) ||
			strncmp(arg, name, eq - arg) != 0)
			continue;
		if (found || !decode_query_value(eq + 1))
		{
			*bad = true;		/* twice, or not UTF-8 text */
			return NULL;
		}
		found = eq + 1;
	}
	return found;
}

/*
 * Answer a GET request (one with a query: those without are refused by
 * the server) to a table: the subscription handshake of scheme meta (Meta's
 * "Verification Requests": hub.mode=subscribe, hub.verify_token and
 * hub.challenge), 200 with the challenge if the token is the verify_token
 * of the owner's user mapping, else 403; 400 for one that cannot be read;
 * 405 for a table of another scheme, which takes only POST.  The text to
 * answer in *text, and in *note what the log and the sources view are to
 * say of it, or NULL.  Nothing is written.
 */
int
answer_subscription(SwRequest *r, Relation ftrel, const SwSourceTable *st,
					char **text, const char **note)
{
	const SwSignatureScheme *scheme = sw_signature_scheme(st);
	bool		bad = false;
	char	   *mode;
	char	   *token;
	char	   *challenge;
	bool		configured;

	*note = NULL;
	if (scheme == NULL || strcmp(scheme->name, "meta") != 0)
	{
		*text = pstrdup(SW_WEBHOOK_POST_ONLY_TEXT);
		return 405;
	}
	mode = query_value(r, "hub.mode", &bad);
	token = query_value(r, "hub.verify_token", &bad);
	challenge = query_value(r, "hub.challenge", &bad);
	if (bad || mode == NULL || strcmp(mode, "subscribe") != 0 ||
		token == NULL || challenge == NULL || challenge[0] == '\0')
	{
		*text = pstrdup("a GET request to this table is a subscription handshake: hub.mode=subscribe, hub.verify_token and hub.challenge, each once\n");
		return 400;
	}
	if (!sw_signature_verify_token(ftrel, st, token, &configured))
	{
		/* the log (at most once a minute) and the sources view say why */
		if (!configured)
			*note = SW_NO_VERIFY_TOKEN_NOTE;
		*text = pstrdup("the verify token does not match\n");
		return 403;
	}
	*note = SW_HANDSHAKE_NOTE;
	log_handshake(ftrel, "Meta", "subscribe");
	*text = challenge;
	return 200;
}
