/*-------------------------------------------------------------------------
 *
 * webhook_answers.c
 *		  The webhook worker's requests in and out: taken from the server
 *		  or a relay and answered to it, what an error tells the client,
 *		  and the log of refusals
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_answers.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "storage/proc.h"
#include "utils/memutils.h"

#include "webhook/webhook.h"

/*
 * The refusals of a table's requests are logged at LOG once a minute at
 * most; the others at DEBUG1, and the next line at LOG says how many
 * there were.  Whoever can connect can make requests be refused.
 */
#define SW_REFUSALS_LOGGED_MS	(60 * 1000)

typedef struct RefusalsLogged
{
	Oid			relid;			/* the table; InvalidOid for no table */
	TimestampTz logged;			/* the last refusal logged at LOG */
	int64		unlogged;		/* refusals since, logged at DEBUG1 only */
} RefusalsLogged;

/* the tables whose refusals were logged, at most SW_REFUSALS_KEPT */
#define SW_REFUSALS_KEPT		1024
static HTAB *refusals_logged = NULL;

/*
 * The requests that came (a list, through next; NULL if none): from the
 * server's threads, those to its own database (the others go to their
 * relays, webhook_relay.c); in a relay, from the server.
 */
SwRequest *
take_requests(void)
{
	SwRequest  *requests;

	if (wh_relay_mode)
		return sw_relay_take(&wh_server_gone);
	requests = sw_webhook_server_take();
#ifdef SW_BENCHMARK
	if (sw_webhook_bench_discard)
		return requests;		/* all of them discarded */
#endif
	return sw_relay_route(requests);
}

/* answer a request taken; it is not ours any more */
void
answer_request(SwRequest *r, int status, const char *text)
{
	if (wh_relay_mode)
		sw_relay_answer(r, status, text);
	else
		sw_webhook_server_answer(r, status, text);
}

/* close a taken request's connection without an answer */
void
hang_up_request(SwRequest *r)
{
	if (wh_relay_mode)
		sw_relay_answer(r, 0, NULL);
	else
		sw_webhook_server_hang_up(r);
}

/* answer each request of a list 503 */
void
answer_unavailable(SwRequest *r)
{
	while (r)
	{
		SwRequest  *next = r->next;

		answer_request(r, 503, SW_WEBHOOK_SHUTTING_DOWN_TEXT);
		r = next;
	}
}

/* resume each request of a list taken for a look at its limit */
void
resume_checked(SwRequest *r, int status)
{
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_checked(r, status);
		r = next;
	}
}

/*
 * What a client is told of an error, and with which status.  Errors that
 * pass (a lock, resources, shutdown) get 503.  An error in what it sent:
 * one that reading its body raised itself (the decoder, a column's input
 * function, with no code of the table's between them: in_body),
 * or one of classes 22 and 23, gets 400 (409 for a row a unique index
 * already has), its message, for data exceptions its detail (where the
 * JSON broke), and where: the decoder's context line (decoder_where, the
 * column and field) and the part of the body (piece), never the error's
 * other context lines, which the table's own code adds (its queries, its
 * functions).  Of others, only that the server failed: 500.
 */
int
error_answer(ErrorData *edata, bool in_body, const char *decoder_where,
			 const char *piece, char **text)
{
	StringInfoData s;
	int			category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

	if (category == ERRCODE_TRANSACTION_ROLLBACK ||
		category == ERRCODE_INSUFFICIENT_RESOURCES ||
		category == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		category == ERRCODE_OPERATOR_INTERVENTION ||
		category == ERRCODE_SYSTEM_ERROR)
	{
		*text = pstrdup("the server could not write the request now; send it again\n");
		return 503;
	}
	if (!in_body &&
		category != ERRCODE_DATA_EXCEPTION &&
		category != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
	{
		*text = pstrdup("the server failed to write the request; its log says why\n");
		return 500;
	}

	initStringInfo(&s);
	appendStringInfoString(&s, edata->message);
	if (edata->detail && category == ERRCODE_DATA_EXCEPTION)
		appendStringInfo(&s, ": %s", edata->detail);
	if (decoder_where[0])
		appendStringInfo(&s, " (%s%s%s)", decoder_where, piece[0] ? "; " : "", piece);
	else if (piece[0])
		appendStringInfo(&s, " (%s)", piece);
	appendStringInfoChar(&s, '\n');
	*text = s.data;
	return edata->sqlerrcode == ERRCODE_UNIQUE_VIOLATION ? 409 : 400;
}

/*
 * After an error that ends the worker's transaction: log it, and abort
 * the transaction, back in memory context cxt.
 */
void
report_and_abort(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	AbortOutOfAnyTransaction();
}

/*
 * The level to log a refusal of a request to a table at (relid, or
 * InvalidOid for one that names no table it could open): LOG for the
 * first in SW_REFUSALS_LOGGED_MS, with how many were logged at DEBUG1 only
 * since the one before in *unlogged, else DEBUG1.
 */
int
refusal_level(Oid relid, int64 *unlogged)
{
	TimestampTz now = GetCurrentTimestamp();
	RefusalsLogged *entry;
	bool		found;

	if (refusals_logged && hash_get_num_entries(refusals_logged) >= SW_REFUSALS_KEPT)
	{
		hash_destroy(refusals_logged);	/* of tables dropped since, most */
		refusals_logged = NULL;
	}
	if (refusals_logged == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RefusalsLogged);
		ctl.hcxt = TopMemoryContext;
		refusals_logged = hash_create("source_writes webhook refusals logged", 64, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(refusals_logged, &relid, HASH_ENTER, &found);
	*unlogged = 0;
	if (found && !TimestampDifferenceExceeds(entry->logged, now, SW_REFUSALS_LOGGED_MS))
	{
		entry->unlogged++;
		return DEBUG1;
	}
	if (found)
		*unlogged = entry->unlogged;
	entry->logged = now;
	entry->unlogged = 0;
	return LOG;
}

/*
 * Log a request to path refused with status for the sake of table relid
 * (InvalidOid if none): with the error's message if given, and detail (a
 * sentence) if given.  At most one a minute for each table is logged at
 * LOG, the others at DEBUG1 (refusal_level).
 */
void
log_refusal(Oid relid, const char *path, int status, const char *message,
			const char *detail)
{
	int64		unlogged;
	int			level = refusal_level(relid, &unlogged);
	StringInfoData details;

	if (!message_level_is_interesting(level))
		return;
	initStringInfo(&details);
	if (detail)
		appendStringInfoString(&details, detail);
	if (unlogged > 0)
		appendStringInfo(&details, "%s" INT64_FORMAT " more refusal%s of this table's requests since its last line at LOG %s logged at DEBUG1 only.",
						 detail ? " " : "", unlogged, unlogged == 1 ? "" : "s",
						 unlogged == 1 ? "was" : "were");
	ereport(level,
			(message ?
			 errmsg("webhook request to %s refused with status %d: %s", path, status, message) :
			 errmsg("webhook request to %s refused with status %d", path, status),
			 details.len > 0 ? errdetail_internal("%s", details.data) : 0));
	pfree(details.data);
}

/* log a request refused by its checks */
void
log_refused(GroupRequest *g)
{
	const char *detail = NULL;

	if (g->note && strcmp(g->note, SW_UNSIGNED_NOTE) == 0)
		detail = SW_UNSIGNED_DETAIL;
	else if (g->note && strcmp(g->note, SW_NO_VERIFY_TOKEN_NOTE) == 0)
		detail = SW_NO_VERIFY_TOKEN_DETAIL;
	log_refusal(g->relid, g->request->path, g->status, NULL, detail);
}
