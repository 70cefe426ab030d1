/*-------------------------------------------------------------------------
 *
 * signature.h
 *		  The signature schemes of webhook sources (signature.c, built into
 *		  source_writes.so for the webhook worker and the tests' door)
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/signature.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WEBHOOK_SIGNATURE_H
#define SW_WEBHOOK_SIGNATURE_H

#include "utils/relcache.h"

#include "options/options.h"

/*
 * signature.c, in source_writes.so: the signature schemes.  A scheme
 * checks a request through a view of it (its body, and its headers found
 * by name in any case), with the table's options and its owner's secret.
 * A new scheme is an entry of signature.c's table, and its check.
 */
typedef enum SwSignatureResult
{
	SW_SIGNATURE_VALID,
	SW_SIGNATURE_MISSING,		/* no signature header */
	SW_SIGNATURE_NO_PREFIX,		/* it does not begin with signature_prefix */
	SW_SIGNATURE_MISMATCH,		/* it does not match the body */
	SW_SIGNATURE_MALFORMED,		/* a header of the scheme cannot be read */
	SW_SIGNATURE_REPEATED,		/* a header of the scheme came twice */
	SW_SIGNATURE_OUTSIDE_WINDOW /* it matches, but its timestamp is
								 * outside signature_tolerance */
} SwSignatureResult;

typedef struct SwSignedRequest
{
	const char *body;			/* body_len bytes */
	size_t		body_len;
	/*
	 * the value of a header, found in any case; NULL if none; *repeated
	 * set if it came more than once
	 */
	const char *(*header) (const struct SwSignedRequest *request,
						   const char *name, bool *repeated);
	int64		now;			/* the server's clock, in Unix seconds */
	const void *arg;			/* the caller's request, for header() */
} SwSignedRequest;

typedef struct SwSignatureScheme
{
	const char *name;			/* as the table's options will name it */
	SwSignatureResult (*check) (const SwSignedRequest *request,
								Relation ftrel, const SwSourceTable *st);
	const char *header;			/* the signature header a request without
								 * is answered as to no table (or several,
								 * separated by commas: without any of
								 * them); NULL: the table's
								 * signature_header */
	int			tolerance_s;	/* default replay window; 0: no timestamp */
	/*
	 * the headers of the provider's delivery id, the first a request has:
	 * the idempotency key of a table that names none (NULL: no such header)
	 */
	const char *delivery_headers[2];
} SwSignatureScheme;

extern PGDLLEXPORT const SwSignatureScheme *sw_signature_scheme(const SwSourceTable *st);
extern const SwSignatureScheme *sw_signature_scheme_named(const char *name);
extern const char *const *sw_signature_scheme_names(int kinds);

/*
 * The signature headers of a source table, as its scheme's header (see
 * signature.c's schemes[]): a request without any of them is answered as
 * one to no table.  NULL if the table checks no signature.  Inline, so
 * that the webhook worker's library needs no other symbol for it.
 */
static inline const char *
sw_signature_headers(const SwSourceTable *st)
{
	const SwSignatureScheme *scheme = sw_signature_scheme(st);

	if (scheme == NULL)
		return NULL;
	return scheme->header ? scheme->header : st->signature_header;
}

extern int	sw_standard_key(const char *secret, char *key, int room);
extern PGDLLEXPORT void sw_signature_hmac_hex(Relation ftrel, const SwSourceTable *st,
											  const char *data, size_t len, char *hex);
extern PGDLLEXPORT bool sw_signature_verify_token(Relation ftrel, const SwSourceTable *st,
												  const char *token, bool *configured);

#endif							/* SW_WEBHOOK_SIGNATURE_H */
