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

#include "commands/defrem.h"
#include "common/base64.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "foreign/foreign.h"
#include "utils/builtins.h"
#include "utils/rel.h"

#include "webhook/signature.h"

static SwSignatureResult check_hmac(const SwSignedRequest *request,
									Relation ftrel, const SwSourceTable *st);

/*
 * The schemes.  A table with signature_header has the first, today's
 * only one.
 */
static const SwSignatureScheme schemes[] = {
	{"hmac", check_hmac},
};

/*
 * The signature scheme of a source table; NULL if it checks no signature.
 */
const SwSignatureScheme *
sw_signature_scheme(const SwSourceTable *st)
{
	if (st->signature_header == NULL)
		return NULL;
	return &schemes[0];
}

/*
 * The secret of the user mapping of ftrel's owner for its server (or the
 * server's mapping for PUBLIC, as GetUserMapping() finds them), with its
 * length in *len.  A table that checks signatures without one is an error.
 */
static const char *
owner_secret(Relation ftrel, const SwSourceTable *st, size_t *len)
{
	UserMapping *mapping = GetUserMapping(ftrel->rd_rel->relowner, st->serverid);
	const char *secret = NULL;
	ListCell   *lc;

	foreach(lc, mapping->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "secret") == 0)
			secret = defGetString(def);
	}
	if (secret == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("source table \"%s\" checks signatures, but its owner's user mapping for its server has no secret",
						RelationGetRelationName(ftrel))));
	*len = strlen(secret);
	return secret;
}

/*
 * The HMAC-SHA256 of data with key, in mac (of PG_SHA256_DIGEST_LENGTH
 * bytes), by PostgreSQL's HMAC.
 */
static void
hmac_sha256(const char *key, size_t key_len, const char *data, size_t len,
			uint8 *mac)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL ||
		pg_hmac_init(ctx, (const uint8 *) key, key_len) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) data, len) < 0 ||
		pg_hmac_final(ctx, mac, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	pg_hmac_free(ctx);
}

/*
 * A signature as sent, in hex or base64, decoded into sent (of room
 * bytes): its length, or -1 if it is not in that encoding or too long.
 */
static int
decode_signature(const char *value, bool base64, uint8 *sent, int room)
{
	size_t		len = strlen(value);

	if (base64)
	{
		if (pg_b64_dec_len(len) > room)
			return -1;
		return pg_b64_decode(value, len, (char *) sent, room);
	}
	/* hex digits only, so that hex_decode() raises no error */
	if (len % 2 != 0 || len / 2 > (size_t) room ||
		strspn(value, "0123456789abcdefABCDEF") != len)
		return -1;
	return (int) hex_decode(value, len, (char *) sent);
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
	const char *value = request->header(request, st->signature_header);
	const char *secret;
	size_t		secret_len;
	uint8		mac[PG_SHA256_DIGEST_LENGTH];
	uint8		sent[PG_SHA256_DIGEST_LENGTH + 3] = {0};
	int			sent_len;

	if (value == NULL)
		return SW_SIGNATURE_MISSING;
	if (st->signature_prefix)
	{
		size_t		len = strlen(st->signature_prefix);

		if (strncmp(value, st->signature_prefix, len) != 0)
			return SW_SIGNATURE_NO_PREFIX;
		value += len;
	}
	sent_len = decode_signature(value, st->signature_base64, sent, sizeof(sent));

	/* the body's HMAC, computed whatever was sent */
	secret = owner_secret(ftrel, st, &secret_len);
	hmac_sha256(secret, secret_len, request->body, request->body_len, mac);
	if (timingsafe_bcmp(mac, sent, PG_SHA256_DIGEST_LENGTH) != 0 ||
		sent_len != PG_SHA256_DIGEST_LENGTH)
		return SW_SIGNATURE_MISMATCH;
	return SW_SIGNATURE_VALID;
}
