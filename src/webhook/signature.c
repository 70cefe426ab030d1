/*-------------------------------------------------------------------------
 *
 * signature.c
 *		  The signature schemes of webhook source tables: a table of them,
 *		  each with its check of a request
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/signature.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "commands/defrem.h"
#include "common/base64.h"
#include "common/hmac.h"
#include "common/sha1.h"
#include "common/sha2.h"
#include "datatype/timestamp.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/rel.h"

#include "webhook/signature.h"

/* the most signatures of one request that are tried (rotation) */
#define MAX_SENT	8
/* the most bytes of a decoded signature */
#define MAX_MAC		PG_SHA256_DIGEST_LENGTH

/* a piece of what is signed */
typedef struct Piece
{
	const char *data;
	size_t		len;
} Piece;

/* a signature as sent, decoded */
typedef struct Sent
{
	uint8		mac[MAX_MAC];
	int			len;			/* -1: not in the scheme's encoding */
} Sent;

/* the secrets of the owner's user mapping: secret, then previous_secret */
typedef struct Secrets
{
	int			n;
	const char *key[2];
	size_t		len[2];
} Secrets;

static SwSignatureResult check_hmac(const SwSignedRequest *request,
									Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_github(const SwSignedRequest *request,
									  Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_shopify(const SwSignedRequest *request,
									   Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_stripe(const SwSignedRequest *request,
									  Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_standard(const SwSignedRequest *request,
										Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_slack(const SwSignedRequest *request,
									 Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_zoom(const SwSignedRequest *request,
									Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_twitch(const SwSignedRequest *request,
									  Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_paddle(const SwSignedRequest *request,
									  Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_segment(const SwSignedRequest *request,
									   Relation ftrel, const SwSourceTable *st);
static SwSignatureResult check_token(const SwSignedRequest *request,
									 Relation ftrel, const SwSourceTable *st);

/*
 * The schemes, as option signature_scheme names them.  A table with
 * signature_header and no signature_scheme has the first.  The header is
 * the one whose absence answers a request as one to no table (NULL: the
 * table's signature_header; several separated by commas: a request
 * without any of them); the tolerance is the provider's documented replay window, 0 for
 * a scheme that signs no timestamp; the delivery headers carry the id a
 * provider sends each delivery with, the same when it sends it again.
 */
static const SwSignatureScheme schemes[] = {
	{"hmac", check_hmac, NULL, 0, {NULL}},
	{"github", check_github, "X-Hub-Signature-256", 0, {"X-GitHub-Delivery"}},
	{"shopify", check_shopify, "X-Shopify-Hmac-Sha256", 0, {"X-Shopify-Webhook-Id"}},
	/* Stripe's libraries: DEFAULT_TOLERANCE = 300 seconds */
	{"stripe", check_stripe, "Stripe-Signature", 300, {NULL}},
	/* Standard Webhooks: "a tolerance of 5 minutes"; either set of names */
	{"standard", check_standard, "webhook-signature,svix-signature", 300,
	{"webhook-id", "svix-id"}},
	/* Slack: "more than five minutes from local time" */
	{"slack", check_slack, "X-Slack-Signature", 300, {NULL}},
	/* Twitch: "older than 10 minutes" */
	{"twitch", check_twitch, "Twitch-Eventsub-Message-Signature", 600,
	{"Twitch-Eventsub-Message-Id"}},
	/* Paddle's SDKs: a 5 second tolerance */
	{"paddle", check_paddle, "Paddle-Signature", 5, {NULL}},
	{"segment", check_segment, "X-Signature", 0, {NULL}},
	/* Meta (WhatsApp, Messenger, Instagram): GitHub's header, the app secret */
	{"meta", check_github, "X-Hub-Signature-256", 0, {NULL}},
	/* Zoom documents no window: the default of five minutes */
	{"zoom", check_zoom, "x-zm-signature", 300, {NULL}},
	{"token", check_token, NULL, 0, {NULL}},
};

/*
 * The scheme named name; NULL if there is none.
 */
const SwSignatureScheme *
sw_signature_scheme_named(const char *name)
{
	for (int i = 0; i < lengthof(schemes); i++)
		if (strcmp(schemes[i].name, name) == 0)
			return &schemes[i];
	return NULL;
}

/*
 * The names of the schemes, NULL-terminated, for option signature_scheme.
 */
const char *const *
sw_signature_scheme_names(int kinds)
{
	static const char *names[lengthof(schemes) + 1];

	for (int i = 0; i < lengthof(schemes); i++)
		names[i] = schemes[i].name;
	names[lengthof(schemes)] = NULL;
	return names;
}

/*
 * The signature scheme of a source table; NULL if it checks no signature.
 */
const SwSignatureScheme *
sw_signature_scheme(const SwSourceTable *st)
{
	if (st->signature_scheme)
	{
		const SwSignatureScheme *scheme = sw_signature_scheme_named(st->signature_scheme);

		/* the option's check lets no other name in: never check nothing */
		if (scheme == NULL)
			elog(ERROR, "unrecognized signature scheme \"%s\"", st->signature_scheme);
		return scheme;
	}
	if (st->signature_header == NULL)
		return NULL;
	return &schemes[0];
}

/*
 * The secrets of the user mapping of ftrel's owner for its server (or the
 * server's mapping for PUBLIC, as GetUserMapping() finds them): secret,
 * then previous_secret if it has one.  A table that checks signatures
 * without a secret is an error.
 */
static void
owner_secrets(Relation ftrel, const SwSourceTable *st, Secrets *s)
{
	UserMapping *mapping = GetUserMapping(ftrel->rd_rel->relowner, st->serverid);
	const char *secret = NULL;
	const char *previous = NULL;
	ListCell   *lc;

	foreach(lc, mapping->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "secret") == 0)
			secret = defGetString(def);
		else if (strcmp(def->defname, "previous_secret") == 0)
			previous = defGetString(def);
	}
	if (secret == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("source table \"%s\" checks signatures, but its owner's user mapping for its server has no secret",
						RelationGetRelationName(ftrel))));
	s->n = 0;
	s->key[s->n] = secret;
	s->len[s->n++] = strlen(secret);
	if (previous)
	{
		s->key[s->n] = previous;
		s->len[s->n++] = strlen(previous);
	}
}

/*
 * The key of a Standard Webhooks secret: the base64 after "whsec_" (or
 * the whole secret without it), decoded into key; its length, or -1 if
 * it is not base64.  See sw_check_secret().
 */
int
sw_standard_key(const char *secret, char *key, int room)
{
	size_t		len;

	if (strncmp(secret, "whsec_", 6) == 0)
		secret += 6;
	len = strlen(secret);
	if (len == 0 || pg_b64_dec_len(len) > room)
		return -1;
	return pg_b64_decode(secret, len, key, room);
}

/*
 * The HMAC of the pieces with key, by PostgreSQL's HMAC, in mac (of room
 * bytes); its length.
 */
static int
compute_mac(pg_cryptohash_type type, const char *key, size_t key_len,
			const Piece *pieces, int npieces, uint8 *mac)
{
	pg_hmac_ctx *ctx = pg_hmac_create(type);
	int			len = type == PG_SHA1 ? SHA1_DIGEST_LENGTH : PG_SHA256_DIGEST_LENGTH;

	if (ctx == NULL || pg_hmac_init(ctx, (const uint8 *) key, key_len) < 0)
		elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	for (int i = 0; i < npieces; i++)
		if (pg_hmac_update(ctx, (const uint8 *) pieces[i].data, pieces[i].len) < 0)
			elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	if (pg_hmac_final(ctx, mac, len) < 0)
		elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	pg_hmac_free(ctx);
	return len;
}

/*
 * A signature as sent, in hex or base64, of len bytes, decoded into sent:
 * its length is -1 if it is not in that encoding or too long.
 */
static void
decode_sent(const char *value, size_t len, bool base64, Sent *sent)
{
	char		buf[MAX_MAC * 2 + 8];

	memset(sent->mac, 0, sizeof(sent->mac));
	sent->len = -1;
	if (base64)
	{
		/* pg_b64_decode() needs room for what it may write */
		if (pg_b64_dec_len(len) <= (int) sizeof(buf))
		{
			int			n = pg_b64_decode(value, len, buf, sizeof(buf));

			if (n >= 0 && n <= MAX_MAC)
			{
				memcpy(sent->mac, buf, n);
				sent->len = n;
			}
		}
		return;
	}
	/* hex digits only, so that hex_decode() raises no error */
	if (len % 2 != 0 || len / 2 > MAX_MAC)
		return;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char) value[i]))
			return;
	sent->len = (int) hex_decode(value, len, (char *) sent->mac);
}

/*
 * Whether any of the sent signatures is the HMAC of the pieces with any
 * of the secrets (rotation: a sender's several signatures, the owner's
 * current and previous secret), each compared in constant time.  Every
 * pair is computed and compared, whatever matched before.
 */
static bool
any_matches(pg_cryptohash_type type, const Secrets *secrets,
			const Piece *pieces, int npieces, const Sent *sent, int nsent)
{
	bool		match = false;

	for (int k = 0; k < secrets->n; k++)
	{
		uint8		mac[MAX_MAC];
		int			len = compute_mac(type, secrets->key[k], secrets->len[k],
									  pieces, npieces, mac);

		for (int i = 0; i < nsent; i++)
			if ((timingsafe_bcmp(mac, sent[i].mac, len) == 0) &
				(sent[i].len == len))
				match = true;
	}
	return match;
}

/*
 * A header a scheme needs: SW_SIGNATURE_VALID with its value in *value,
 * SW_SIGNATURE_MISSING if it is absent, SW_SIGNATURE_REPEATED if it came
 * more than once.
 */
static SwSignatureResult
get_header(const SwSignedRequest *request, const char *name, const char **value)
{
	bool		repeated = false;

	*value = request->header(request, name, &repeated);
	if (*value == NULL)
		return SW_SIGNATURE_MISSING;
	return repeated ? SW_SIGNATURE_REPEATED : SW_SIGNATURE_VALID;
}

/*
 * A timestamp in Unix seconds, all digits: true with it in *ts.
 */
static bool
parse_unix_time(const char *value, size_t len, int64 *ts)
{
	int64		v = 0;

	if (len == 0 || len > 12)
		return false;
	for (size_t i = 0; i < len; i++)
	{
		if (value[i] < '0' || value[i] > '9')
			return false;
		v = v * 10 + (value[i] - '0');
	}
	*ts = v;
	return true;
}

/*
 * The replay window: whether a request's timestamp ts (Unix seconds) is
 * within the table's signature_tolerance (or the scheme's default) of the
 * server's clock, in either direction.
 */
static bool
within_window(const SwSignedRequest *request, const SwSourceTable *st,
			  const SwSignatureScheme *scheme, int64 ts)
{
	int64		tolerance_ms = st->signature_tolerance_ms >= 0 ?
		st->signature_tolerance_ms : (int64) scheme->tolerance_s * 1000;
	int64		diff_ms = (request->now - ts) * 1000;

	return diff_ms <= tolerance_ms && -diff_ms <= tolerance_ms;
}

/* what the check of a timestamped scheme answers once the MACs are done */
static SwSignatureResult
verdict(bool match, bool in_window)
{
	if (!match)
		return SW_SIGNATURE_MISMATCH;
	return in_window ? SW_SIGNATURE_VALID : SW_SIGNATURE_OUTSIDE_WINDOW;
}

/*
 * A scheme that signs the body alone, with one signature after a prefix:
 * hmac (the table's header, prefix and encoding), github, shopify, segment.
 */
static SwSignatureResult
check_body(const SwSignedRequest *request, Relation ftrel,
		   const SwSourceTable *st, pg_cryptohash_type type,
		   const char *header, const char *prefix, bool base64)
{
	const char *value;
	SwSignatureResult res = get_header(request, header, &value);
	Secrets		secrets;
	Sent		sent;
	Piece		body = {request->body, request->body_len};

	if (res != SW_SIGNATURE_VALID)
		return res;
	if (prefix)
	{
		size_t		len = strlen(prefix);

		if (strncmp(value, prefix, len) != 0)
			return SW_SIGNATURE_NO_PREFIX;
		value += len;
	}
	decode_sent(value, strlen(value), base64, &sent);
	owner_secrets(ftrel, st, &secrets);
	return any_matches(type, &secrets, &body, 1, &sent, 1) ?
		SW_SIGNATURE_VALID : SW_SIGNATURE_MISMATCH;
}

/*
 * Scheme hmac: the HMAC-SHA256 of the raw body with the owner's secret,
 * in header signature_header after signature_prefix, in hex or base64
 * (signature_encoding), compared in constant time.
 */
static SwSignatureResult
check_hmac(const SwSignedRequest *request, Relation ftrel,
		   const SwSourceTable *st)
{
	return check_body(request, ftrel, st, PG_SHA256, st->signature_header,
					  st->signature_prefix, st->signature_base64);
}

/*
 * Scheme github (GitHub, "Validating webhook deliveries"): "X-Hub-
 * Signature-256: sha256=<hex>", the HMAC-SHA256 of the payload body.
 */
static SwSignatureResult
check_github(const SwSignedRequest *request, Relation ftrel,
			 const SwSourceTable *st)
{
	return check_body(request, ftrel, st, PG_SHA256, "X-Hub-Signature-256",
					  "sha256=", false);
}

/*
 * Scheme shopify (Shopify, "Verify webhooks"): "X-Shopify-Hmac-Sha256:
 * <base64>", the HMAC-SHA256 of the raw body.
 */
static SwSignatureResult
check_shopify(const SwSignedRequest *request, Relation ftrel,
			  const SwSourceTable *st)
{
	return check_body(request, ftrel, st, PG_SHA256, "X-Shopify-Hmac-Sha256",
					  NULL, true);
}

/*
 * Scheme segment (Segment webhook destinations): "X-Signature: <hex>",
 * the HMAC-SHA1 of the body with the shared secret.
 */
static SwSignatureResult
check_segment(const SwSignedRequest *request, Relation ftrel,
			  const SwSourceTable *st)
{
	return check_body(request, ftrel, st, PG_SHA1, "X-Signature", NULL, false);
}

/*
 * Whether a token sent is one of tokens, compared in constant time: the
 * HMACs of both sides under a fixed key are compared, so that neither
 * length tells anything, and every one of tokens is compared.
 */
static bool
token_matches(const char *sent_token, const Secrets *tokens)
{
	Secrets		fixed = {1, {"source_writes token"}, {19}};
	Piece		piece = {sent_token, strlen(sent_token)};
	Sent		sent;
	bool		match = false;

	compute_mac(PG_SHA256, fixed.key[0], fixed.len[0], &piece, 1, sent.mac);
	sent.len = PG_SHA256_DIGEST_LENGTH;
	for (int k = 0; k < tokens->n; k++)
	{
		Piece		token = {tokens->key[k], tokens->len[k]};

		match |= any_matches(PG_SHA256, &fixed, &token, 1, &sent, 1);
	}
	return match;
}

/*
 * Scheme token: signature_header carries the secret itself (e.g.
 * "Authorization: Bearer <token>" with the secret "Bearer <token>"),
 * compared in constant time (token_matches()).
 */
static SwSignatureResult
check_token(const SwSignedRequest *request, Relation ftrel,
			const SwSourceTable *st)
{
	const char *value;
	SwSignatureResult res = get_header(request, st->signature_header, &value);
	Secrets		secrets;

	if (res != SW_SIGNATURE_VALID)
		return res;
	owner_secrets(ftrel, st, &secrets);
	return token_matches(value, &secrets) ? SW_SIGNATURE_VALID : SW_SIGNATURE_MISMATCH;
}

/*
 * The check of a scheme whose one header is a list of key=value items
 * (Stripe's and Paddle's): items separated by sep, the timestamp under
 * ts_key (once), signatures in hex under sig_key (any may match), other
 * items ignored; signed is <ts><joiner><raw body>, with HMAC-SHA256.
 */
static SwSignatureResult
check_keyed_items(const SwSignedRequest *request, Relation ftrel,
				  const SwSourceTable *st, const char *header, char sep,
				  const char *ts_key, const char *sig_key, const char *joiner)
{
	const char *value;
	SwSignatureResult res = get_header(request, header, &value);
	char		seps[2] = {sep, '\0'};
	size_t		ts_key_len = strlen(ts_key);
	size_t		sig_key_len = strlen(sig_key);
	const char *t = NULL;
	size_t		t_len = 0;
	int64		ts;
	Sent		sent[MAX_SENT];
	int			nsent = 0;
	Secrets		secrets;
	Piece		pieces[3];

	if (res != SW_SIGNATURE_VALID)
		return res;
	for (const char *p = value; *p;)
	{
		size_t		len = strcspn(p, seps);
		const char *eq = memchr(p, '=', len);

		if (eq == NULL)
			return SW_SIGNATURE_MALFORMED;
		if ((size_t) (eq - p) == ts_key_len && strncmp(p, ts_key, ts_key_len) == 0)
		{
			if (t != NULL)
				return SW_SIGNATURE_MALFORMED;
			t = eq + 1;
			t_len = len - ts_key_len - 1;
		}
		else if ((size_t) (eq - p) == sig_key_len && strncmp(p, sig_key, sig_key_len) == 0)
		{
			if (nsent == MAX_SENT)
				return SW_SIGNATURE_MALFORMED;
			decode_sent(eq + 1, len - sig_key_len - 1, false, &sent[nsent++]);
		}
		p += len;
		if (*p == sep)
			p++;
	}
	if (t == NULL || nsent == 0 || !parse_unix_time(t, t_len, &ts))
		return SW_SIGNATURE_MALFORMED;

	owner_secrets(ftrel, st, &secrets);
	pieces[0].data = t;
	pieces[0].len = t_len;
	pieces[1].data = joiner;
	pieces[1].len = strlen(joiner);
	pieces[2].data = request->body;
	pieces[2].len = request->body_len;
	return verdict(any_matches(PG_SHA256, &secrets, pieces, 3, sent, nsent),
				   within_window(request, st, sw_signature_scheme(st), ts));
}

/*
 * Scheme stripe (Stripe, "Check the webhook signatures"): "Stripe-
 * Signature: t=<ts>,v1=<hex>[,v1=<hex>...][,v0=...]"; "the signed_payload
 * string is created by concatenating: the timestamp (as a string), the
 * character '.', the actual JSON payload (that is, the request body)",
 * signed with HMAC-SHA256.  Any v1 may match (a secret rolled by Stripe
 * sends one for each); other schemes' items are ignored.
 */
static SwSignatureResult
check_stripe(const SwSignedRequest *request, Relation ftrel,
			 const SwSourceTable *st)
{
	return check_keyed_items(request, ftrel, st, "Stripe-Signature", ',',
							 "t", "v1", ".");
}

/*
 * Scheme standard (Standard Webhooks, as Svix signs): headers webhook-id,
 * webhook-timestamp (Unix seconds) and webhook-signature (or the same with
 * svix-); the signed content is
 *		<webhook-id>.<webhook-timestamp>.<raw body>
 * with HMAC-SHA256, the key the base64 after the secret's whsec_ prefix.
 * The signature header is a space-separated list of signatures, each
 * v1,<base64>; any v1 may match, other versions are ignored.
 */
static SwSignatureResult
check_standard(const SwSignedRequest *request, Relation ftrel,
			   const SwSourceTable *st)
{
	const char *prefix = "webhook-";
	const char *id;
	const char *t;
	const char *value;
	char		name[32];
	SwSignatureResult res;
	int64		ts;
	Sent		sent[MAX_SENT];
	int			nsent = 0;
	Secrets		secrets;
	Secrets		keys;
	char		key[2][256];
	Piece		pieces[5];

	bool		repeated = false;

	if (request->header(request, "webhook-signature", &repeated) == NULL &&
		request->header(request, "svix-signature", &repeated) != NULL)
		prefix = "svix-";
	snprintf(name, sizeof(name), "%ssignature", prefix);
	if ((res = get_header(request, name, &value)) != SW_SIGNATURE_VALID)
		return res;
	snprintf(name, sizeof(name), "%sid", prefix);
	res = get_header(request, name, &id);
	if (res != SW_SIGNATURE_VALID)
		return res == SW_SIGNATURE_MISSING ? SW_SIGNATURE_MALFORMED : res;
	snprintf(name, sizeof(name), "%stimestamp", prefix);
	res = get_header(request, name, &t);
	if (res != SW_SIGNATURE_VALID)
		return res == SW_SIGNATURE_MISSING ? SW_SIGNATURE_MALFORMED : res;
	if (!parse_unix_time(t, strlen(t), &ts))
		return SW_SIGNATURE_MALFORMED;

	for (const char *p = value; *p;)
	{
		size_t		len = strcspn(p, " ");

		if (len > 3 && strncmp(p, "v1,", 3) == 0)
		{
			if (nsent == MAX_SENT)
				return SW_SIGNATURE_MALFORMED;
			decode_sent(p + 3, len - 3, true, &sent[nsent++]);
		}
		else if (len > 0 && memchr(p, ',', len) == NULL)
			return SW_SIGNATURE_MALFORMED;
		p += len;
		while (*p == ' ')
			p++;
	}
	if (nsent == 0)
		return SW_SIGNATURE_MALFORMED;

	owner_secrets(ftrel, st, &secrets);
	/*
	 * A secret that is not base64 is no Standard Webhooks key (one that
	 * begins whsec_ cannot even be set): the other one may be, and then a
	 * secret rolled from another scheme's does not stop the table.
	 */
	keys.n = 0;
	for (int k = 0; k < secrets.n; k++)
	{
		int			len = sw_standard_key(secrets.key[k], key[keys.n], sizeof(key[keys.n]));

		if (len < 0)
			continue;
		keys.key[keys.n] = key[keys.n];
		keys.len[keys.n++] = len;
	}
	if (keys.n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("source table \"%s\" checks Standard Webhooks signatures, but no secret of its owner's user mapping is base64",
						RelationGetRelationName(ftrel)),
				 errhint("Set the secret as the sender shows it, e.g. whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw.")));
	pieces[0].data = id;
	pieces[0].len = strlen(id);
	pieces[1].data = ".";
	pieces[1].len = 1;
	pieces[2].data = t;
	pieces[2].len = strlen(t);
	pieces[3].data = ".";
	pieces[3].len = 1;
	pieces[4].data = request->body;
	pieces[4].len = request->body_len;
	return verdict(any_matches(PG_SHA256, &keys, pieces, 5, sent, nsent),
				   within_window(request, st, sw_signature_scheme(st), ts));
}

/*
 * A scheme that signs v0:<timestamp>:<body> (Slack's, and Zoom's after it):
 * "v0=" and the hex HMAC-SHA256 in header sig_header, the timestamp in Unix
 * seconds in header ts_header.
 */
static SwSignatureResult
check_v0(const SwSignedRequest *request, Relation ftrel,
		 const SwSourceTable *st, const char *sig_header, const char *ts_header)
{
	const char *value;
	const char *t;
	SwSignatureResult res = get_header(request, sig_header, &value);
	int64		ts;
	Sent		sent;
	Secrets		secrets;
	Piece		pieces[4];

	if (res != SW_SIGNATURE_VALID)
		return res;
	res = get_header(request, ts_header, &t);
	if (res != SW_SIGNATURE_VALID)
		return res == SW_SIGNATURE_MISSING ? SW_SIGNATURE_MALFORMED : res;
	if (!parse_unix_time(t, strlen(t), &ts))
		return SW_SIGNATURE_MALFORMED;
	if (strncmp(value, "v0=", 3) != 0)
		return SW_SIGNATURE_NO_PREFIX;
	decode_sent(value + 3, strlen(value + 3), false, &sent);

	owner_secrets(ftrel, st, &secrets);
	pieces[0].data = "v0:";
	pieces[0].len = 3;
	pieces[1].data = t;
	pieces[1].len = strlen(t);
	pieces[2].data = ":";
	pieces[2].len = 1;
	pieces[3].data = request->body;
	pieces[3].len = request->body_len;
	return verdict(any_matches(PG_SHA256, &secrets, pieces, 4, &sent, 1),
				   within_window(request, st, sw_signature_scheme(st), ts));
}

/*
 * Scheme slack (Slack, "Verifying requests from Slack"): "concatenate the
 * version number, the timestamp, and the body of the request to form a
 * basestring. Use a colon as the delimiter", i.e. v0:<X-Slack-Request-
 * Timestamp>:<body>, HMAC-SHA256 in hex after "v0=" in X-Slack-Signature.
 */
static SwSignatureResult
check_slack(const SwSignedRequest *request, Relation ftrel,
			const SwSourceTable *st)
{
	return check_v0(request, ftrel, st, "X-Slack-Signature",
					"X-Slack-Request-Timestamp");
}

/*
 * Scheme zoom (Zoom, "Verify webhook events"): the message
 * v0:<x-zm-request-timestamp>:<body>, HMAC-SHA256 with the app's secret
 * token, in hex after "v0=" in x-zm-signature.
 */
static SwSignatureResult
check_zoom(const SwSignedRequest *request, Relation ftrel,
		   const SwSourceTable *st)
{
	return check_v0(request, ftrel, st, "x-zm-signature",
					"x-zm-request-timestamp");
}

/*
 * An RFC 3339 timestamp, as Twitch sends it (2019-11-16T10:11:12.634234626Z,
 * or with an offset): true with it in Unix seconds in *ts.
 */
static bool
parse_rfc3339(const char *value, int64 *ts)
{
	struct pg_tm tm = {0};
	int			n = 0;
	int			tz = 0;
	const char *p;
	Timestamp	t;

	if (sscanf(value, "%4d-%2d-%2d%*1[Tt]%2d:%2d:%2d%n", &tm.tm_year,
			   &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec,
			   &n) != 6 || n != 19)
		return false;
	p = value + n;
	if (*p == '.')
	{
		p++;
		if (!isdigit((unsigned char) *p))
			return false;
		while (isdigit((unsigned char) *p))
			p++;
	}
	if (*p == 'Z' || *p == 'z')
		p++;
	else if ((*p == '+' || *p == '-') && isdigit((unsigned char) p[1]) &&
			 isdigit((unsigned char) p[2]) && p[3] == ':' &&
			 isdigit((unsigned char) p[4]) && isdigit((unsigned char) p[5]))
	{
		tz = ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 +
			((p[4] - '0') * 10 + (p[5] - '0')) * 60;
		if (*p == '+')
			tz = -tz;
		p += 6;
	}
	else
		return false;
	if (*p != '\0' || tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 ||
		tm.tm_mday > day_tab[isleap(tm.tm_year)][tm.tm_mon - 1] ||
		tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60 ||
		tm2timestamp(&tm, 0, NULL, &t) != 0)
		return false;
	*ts = t / USECS_PER_SEC +
		(POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * SECS_PER_DAY + tz;
	return true;
}

/*
 * Scheme twitch (Twitch EventSub, "Verifying the event message"): the HMAC
 * message is the values of Twitch-Eventsub-Message-Id and
 * Twitch-Eventsub-Message-Timestamp and the raw body, concatenated:
 *		<message id><timestamp><raw body>
 * HMAC-SHA256 in hex after "sha256=" in Twitch-Eventsub-Message-Signature.
 */
static SwSignatureResult
check_twitch(const SwSignedRequest *request, Relation ftrel,
			 const SwSourceTable *st)
{
	const char *value;
	const char *id;
	const char *t;
	SwSignatureResult res = get_header(request, "Twitch-Eventsub-Message-Signature", &value);
	int64		ts;
	Sent		sent;
	Secrets		secrets;
	Piece		pieces[3];

	if (res != SW_SIGNATURE_VALID)
		return res;
	res = get_header(request, "Twitch-Eventsub-Message-Id", &id);
	if (res != SW_SIGNATURE_VALID)
		return res == SW_SIGNATURE_MISSING ? SW_SIGNATURE_MALFORMED : res;
	res = get_header(request, "Twitch-Eventsub-Message-Timestamp", &t);
	if (res != SW_SIGNATURE_VALID)
		return res == SW_SIGNATURE_MISSING ? SW_SIGNATURE_MALFORMED : res;
	if (!parse_rfc3339(t, &ts))
		return SW_SIGNATURE_MALFORMED;
	if (strncmp(value, "sha256=", 7) != 0)
		return SW_SIGNATURE_NO_PREFIX;
	decode_sent(value + 7, strlen(value + 7), false, &sent);

	owner_secrets(ftrel, st, &secrets);
	pieces[0].data = id;
	pieces[0].len = strlen(id);
	pieces[1].data = t;
	pieces[1].len = strlen(t);
	pieces[2].data = request->body;
	pieces[2].len = request->body_len;
	return verdict(any_matches(PG_SHA256, &secrets, pieces, 3, &sent, 1),
				   within_window(request, st, sw_signature_scheme(st), ts));
}

/*
 * Scheme paddle (Paddle Billing, "Verify webhook signatures"): header
 * Paddle-Signature: ts=<ts>;h1=<hex> (an h1 for each secret while one is
 * rotated); the signed payload is the timestamp, a colon and the raw body,
 *		<ts>:<raw body>
 * HMAC-SHA256.  Paddle's SDKs allow 5 seconds of clock difference.
 */
static SwSignatureResult
check_paddle(const SwSignedRequest *request, Relation ftrel,
			 const SwSourceTable *st)
{
	return check_keyed_items(request, ftrel, st, "Paddle-Signature", ';',
							 "ts", "h1", ":");
}

/*
 * The hex HMAC-SHA256 of data with the owner's current secret, in hex (of
 * 2 * PG_SHA256_DIGEST_LENGTH + 1 bytes): what Zoom's handshake answers.
 */
void
sw_signature_hmac_hex(Relation ftrel, const SwSourceTable *st,
					  const char *data, size_t len, char *hex)
{
	Secrets		secrets;
	Piece		piece = {data, len};
	uint8		mac[MAX_MAC];
	int			n;

	owner_secrets(ftrel, st, &secrets);
	n = compute_mac(PG_SHA256, secrets.key[0], secrets.len[0], &piece, 1, mac);
	hex[hex_encode((const char *) mac, n, hex)] = '\0';
}

/*
 * Whether token is the verify_token of the owner's user mapping, compared
 * in constant time (as check_token compares); *configured is false if the
 * mapping has none, and then no token is.
 */
bool
sw_signature_verify_token(Relation ftrel, const SwSourceTable *st,
						  const char *token, bool *configured)
{
	UserMapping *mapping = GetUserMapping(ftrel->rd_rel->relowner, st->serverid);
	ListCell   *lc;

	*configured = false;
	foreach(lc, mapping->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "verify_token") == 0)
		{
			Secrets		mine = {1, {defGetString(def)}, {strlen(defGetString(def))}};

			*configured = true;
			return token_matches(token, &mine);
		}
	}
	return false;
}
