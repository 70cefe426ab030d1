/*-------------------------------------------------------------------------
 *
 * webhook_group.c
 *		  The webhook worker's group commit: writing the requests taken
 *		  together in one transaction, and each alone when one fails
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_group.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgstat.h"
#include "postmaster/interrupt.h"
#include "storage/proc.h"
#include "utils/inval.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"

#include "log/log.h"
#include "webhook/webhook.h"
#include "workers/workers.h"

/*
 * After a request failed among others written together: for how many of
 * its table's next writes (rounds of a group that have requests for it)
 * they are written a request at a time, so that a table that is sent bad
 * requests all the time writes most of them once, not twice.
 */
#define SW_WEBHOOK_CAREFUL_WRITES	16

/*
 * Check one request of a group and write its body, in the current
 * subtransaction: its answer (given after the commit) in g, in memory
 * context cxt.  A refusal of the checks sets g->refused, to be logged once
 * the subtransaction commits.  Which part of the body is written goes into
 * where (of SW_WHERE_BYTES).
 */
static void
check_and_write(GroupRequest *g, MemoryContext cxt, char *where)
{
	SwRequest  *r = g->request;
	SwRequest	decoded;		/* r, with its body decoded */
	TableEntry *t = g->table;
	const SwSourceTable *st = sw_ingest_source_table(t->ing);
	const char *signature_headers = sw_signature_headers(st);
	char	   *text;
	const char *key = NULL;
	uint8		hash[PG_SHA256_DIGEST_LENGTH];
	int64		written;
	int			rows;
	int			status;

	where[0] = '\0';
	g->note = NULL;
	g->json = false;
	if (r->query != NULL)
	{
		/* a GET: a handshake, or refused; nothing is written */
		status = answer_subscription(r, t->ftrel, st, &text, &g->note);
		g->status = status;
		g->text = MemoryContextStrdup(cxt, text);
		g->refused = status != 200;
		return;
	}
	if (signature_headers && request_lacks_headers(r, signature_headers))
	{
		/*
		 * As to no table, before anything that tells of the table (its
		 * content types, codings or size): the HTTP threads answer most
		 * such requests so already, but not those that came before the
		 * table was in their map.
		 */
		g->status = 404;
		g->text = MemoryContextStrdup(cxt, SW_WEBHOOK_NOT_FOUND_TEXT);
		g->note = SW_UNSIGNED_NOTE;
		g->refused = true;
		return;
	}
	status = check_request(r, st, &text);
	if (status == 0)
		status = decode_body(g->request, st, &decoded, &text);
	if (status == 0)
	{
		/* the checks and the table see the decoded body */
		r = &decoded;
		status = check_signature(r, t->ftrel, st, &text);
	}
	if (status == 0)
	{
		status = answer_handshake(r, t->ftrel, st, &text, &g->json);
		if (status == 200)
			g->note = SW_HANDSHAKE_NOTE;
	}
	if (status == 0)
		status = check_idempotency(r, t->relid, st, &key, hash, &text);
	if (status)
	{
		/* refused, a handshake, or a repeated delivery: the first's answer */
		g->status = status;
		g->text = MemoryContextStrdup(cxt, text);
		g->refused = status != 200;
		return;
	}

	/* the rows go into the table in this subtransaction, with the key */
	written = sw_ingest_written(t->ing);
	(void) write_body(r, t->ftrel, t->ing, key, where);
	rows = sw_ingest_written(t->ing) - written;	/* those no trigger skipped */
	if (key)
		sw_delivery_insert(t->relid, key, r->received_ms, hash, rows);
	g->status = 200;
	g->refused = false;
	g->text = MemoryContextStrdup(cxt, psprintf("%d %s\n", rows, rows == 1 ? "row" : "rows"));
}

/*
 * After an error in a subtransaction that wrote requests of table t: roll
 * it back, back in memory context cxt and resource owner owner.  If the
 * error was raised by one request's checks or writing, g is that request,
 * and gets its answer from the error (the request's part of the body in
 * where), which is logged; with g NULL (the error came while rows already
 * buffered were written, or when the requests written together ran out of
 * time at their end), only its message is logged, as no request's body is
 * in it.
 */
static void
roll_back_requests(TableEntry *t, GroupRequest *g, const char *where,
				   MemoryContext cxt, ResourceOwner owner)
{
	bool		timed_out = stop_request_clock();
	ErrorData  *edata;
	char	   *text;
	const char *decoder_where;
	bool		in_message;

	(void) sw_ingest_decode_failed(t->ing, &decoder_where, &in_message);
	in_message |= wh_parsing_body;
	wh_parsing_body = false;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	sw_ingest_sub_end(t->ing, false);
	sw_roll_back_sub(cxt, owner);
	MemoryContextReset(wh_request_cxt);
	if (g == NULL)
	{
		int64		unlogged;

		(void) cancelled_by_clock(edata, timed_out);
		ereport(refusal_level(t->relid, &unlogged),
				(errmsg("webhook requests to table \"%s\" could not be written together",
						RelationGetRelationName(t->ftrel)),
				 errdetail_internal("%s", edata->message)));
		FreeErrorData(edata);
		return;
	}

	/*
	 * Every error here is the request's own: a cancel of the worker cancels
	 * the request it writes (a shutdown is FATAL, and does not come here).
	 */
	g->refused = false;
	if (cancelled_by_clock(edata, timed_out))
	{
		g->status = 503;
		g->text = pstrdup(SW_TIMED_OUT_TEXT);
	}
	else
	{
		/*
		 * Raised by the reading itself: the error's context begins with our
		 * own lines, no code of the table's before them; and no internal
		 * error.
		 */
		const char *ours = decoder_where[0] ? decoder_where : where;
		const char *context = edata->context ? edata->context : "";
		bool		in_body = in_message &&
			strncmp(context, ours, strlen(ours)) == 0 &&
			(ours[0] != '\0' || context[0] == '\0') &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_INTERNAL_ERROR;

		g->status = error_answer(edata, in_body, decoder_where, where, &text);
		g->text = text;
	}
	/* what the client sent is not logged: its error may quote it */
	if (g->status == 400)
		log_refused(g);
	else
		log_refusal(g->relid, g->request->path, g->status, edata->message, NULL);
	FreeErrorData(edata);
}

/*
 * Write one request of a group, in a subtransaction of its own: its answer
 * (given after the commit) in g, in the caller's memory context.  One that
 * runs out of time is answered 503 and writes nothing.
 */
static void
write_request(GroupRequest *g)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char		where[SW_WHERE_BYTES] = "";

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(wh_request_cxt);
	start_request_clock();
	PG_TRY();
	{
		check_and_write(g, cxt, where);
		sw_ingest_sub_end(g->table->ing, true);
		check_request_clock();
		sw_release_sub(cxt, owner);
		MemoryContextReset(wh_request_cxt);
		if (g->refused)
			log_refused(g);
	}
	PG_CATCH();
	{
		roll_back_requests(g->table, g, where, cxt, owner);
	}
	PG_END_TRY();
}

/*
 * Write the requests of a group to table t (of group[0 .. n-1], those
 * whose table it is) together, in one subtransaction, their rows many to
 * a multi-insert: true if it committed.  Otherwise the subtransaction
 * rolled back, and the others are to be written again one at a time: if
 * one request's checks or rows raised the error, *failed is its index,
 * and it has its answer from the error; if no one request did (the rows
 * buffered failed as they were written, or the requests ran out of time
 * at the end), *failed is -1, and all are to be written again.
 */
static bool
write_together(TableEntry *t, GroupRequest *group, int n, int *failed)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char		where[SW_WHERE_BYTES] = "";
	volatile int current = -1;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(wh_request_cxt);
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			if (group[i].table != t)
				continue;
			current = i;
			start_request_clock();
			check_and_write(&group[i], cxt, where);
			check_request_clock();
			MemoryContextReset(wh_request_cxt);
		}
		current = -1;
		start_request_clock();
		sw_ingest_sub_end(t->ing, true);
		check_request_clock();
		sw_release_sub(cxt, owner);
		MemoryContextReset(wh_request_cxt);
	}
	PG_CATCH();
	{
		/* writing buffered rows, maybe of earlier requests: no one's fault */
		if (sw_ingest_failed_flushing(t->ing))
			current = -1;
		roll_back_requests(t, current >= 0 ? &group[current] : NULL, where, cxt, owner);
		ok = false;
	}
	PG_END_TRY();
	*failed = current;
	if (ok)
		for (int i = 0; i < n; i++)
			if (group[i].table == t && group[i].refused)
				log_refused(&group[i]);
	return ok;
}

/*
 * Write the group's requests to one table (those of group[0 .. n-1] whose
 * table it is), in the order they came, in one batch of the table: one
 * writer, which runs as the table's owner until the last of them is
 * written.  They are written together, in one subtransaction; if that
 * fails, the request that failed alone has its answer from its error, and
 * the others are written again each in a subtransaction of its own, as
 * they are for the table's next SW_WEBHOOK_CAREFUL_WRITES writes when
 * there were others.
 */
static void
write_table(TableEntry *e, GroupRequest *group, int n, MemoryContext group_cxt)
{
	int64		kept;
	int			failed = -1;
	int			mine = 0;
	bool		one_at_a_time = true;

	for (int i = 0; i < n; i++)
		if (group[i].table == e)
			mine++;
	if (mine == 0)
		return;

	/*
	 * The table's statement triggers fire here, timed as a request is; if
	 * they fail, the group does, and its batch is forgotten with it.
	 */
	MemoryContextSwitchTo(TopTransactionContext);
	e->begun = true;
	start_request_clock();
	sw_ingest_begin(e->ing, e->ftrel);
	check_request_clock();
	MemoryContextSwitchTo(group_cxt);
	if (e->careful > 0)
		e->careful--;
	else if (write_together(e, group, n, &failed))
		one_at_a_time = false;
	else if (mine > 1)
	{
		elog(DEBUG1, "webhook requests to table \"%s\" are written again one at a time, as writing them together failed",
			 RelationGetRelationName(e->ftrel));
		e->careful = SW_WEBHOOK_CAREFUL_WRITES;
	}
	if (one_at_a_time)
	{
		for (int i = 0; i < n; i++)
		{
			if (group[i].table != e || i == failed)
				continue;
			MemoryContextSwitchTo(group_cxt);
			write_request(&group[i]);
		}
	}
	start_request_clock();
	(void) sw_ingest_end(e->ing, &kept);
	check_request_clock();
	e->begun = false;
}

/* what the sources view says of requests whose connections were closed */
#define SW_UNCONFIRMED_TEXT "closed without an answer: committed, but not confirmed by the synchronous standbys"

/*
 * Resolve the addresses of a round's requests, group[first] to
 * group[n - 1]: each gets its table, or the answer to give it.
 */
static void
resolve_round(GroupRequest *group, int first, int n, List **paths,
			  MemoryContext group_cxt)
{
	for (int i = first; i < n; i++)
	{
		GroupPath  *p;
		unsigned int table_id;

		MemoryContextSwitchTo(group_cxt);

		/*
		 * Without its table's signature header, as to no table:
		 * as fast, while the map is fresh (else its table says)
		 */
		if (!wh_limits_stale &&
			sw_webhook_server_find(group[i].request, &table_id) == SW_WEBHOOK_UNSIGNED)
		{
			group[i].relid = table_id;
			group[i].table = NULL;
			group[i].status = 404;
			group[i].text = SW_WEBHOOK_NOT_FOUND_TEXT;
			group[i].note = SW_UNSIGNED_NOTE;
			log_refused(&group[i]);
			continue;
		}
		p = group_path(group[i].request->path, paths);
		group[i].relid = p->relid;
		group[i].table = p->table;
		group[i].status = p->status;
		group[i].text = p->text;

		/*
		 * A GET to no table is answered as one to a table that takes only
		 * POST (all but scheme meta's): a GET tells no more of which
		 * tables there are than a POST without a signature.
		 */
		if (group[i].request->query && p->table == NULL && p->status == 404)
		{
			group[i].status = 405;
			group[i].text = SW_WEBHOOK_POST_ONLY_TEXT;
			continue;
		}
		if (p->table == NULL && OidIsValid(p->relid) &&
			lacks_signature_header(p, group[i].request))
		{
			group[i].status = 404;
			group[i].text = SW_WEBHOOK_NOT_FOUND_TEXT;
			group[i].note = SW_UNSIGNED_NOTE;
			log_refused(&group[i]);
		}
	}
}

/*
 * The next round of a group: the requests that came meanwhile (not while
 * a reload waits, which waits for no request to be in hand), added to
 * group[] after the *n it has, *first set to the first of them.  False
 * when the group ends here: it is full, its time is up, none came, or the
 * caches changed.
 */
static bool
join_next_round(GroupRequest *group, volatile int *n, int *first,
				List **paths, TimestampTz began, uint64 changes)
{
	SwRequest  *more;
	ListCell   *lc;

	if (*n >= SW_WEBHOOK_GROUP || wh_in_hand != NULL ||
		ConfigReloadPending ||
		TimestampDifferenceExceeds(began, GetCurrentTimestamp(),
								   sw_webhook_join_time))
		return false;
	more = take_requests();
	if (more == NULL)
		return false;

	/*
	 * They were sent after the caches' last look: if a change that
	 * matters came since the group began, they wait for the next
	 * group, which looks again.  They are in hand before the look,
	 * which may fail, so that they are written or answered all the
	 * same.
	 */
	wh_in_hand = more;
	AcceptInvalidationMessages();
	if (wh_cache_changes != changes)
		return false;
	wh_in_hand = NULL;

	/* linked to those being written, for stop_server() to answer */
	group[*n - 1].request->next = more;
	*first = *n;
	for (SwRequest *r = more; r; r = r->next)
	{
		if (*n == SW_WEBHOOK_GROUP)
		{
			wh_in_hand = r;	/* for the next group */
			group[*n - 1].request->next = NULL;
			break;
		}
		group[(*n)++].request = r;
	}
	pgstat_report_activity(STATE_RUNNING,
						   psprintf("writing %d webhook requests", *n));
	/* they see what committed before they came */
	PopActiveSnapshot();
	PushActiveSnapshot(GetTransactionSnapshot());

	/*
	 * An address that named no table, or one that was locked, is
	 * looked up again: what kept it may have ended without a change
	 * the caches count.  (One whose table failed to be prepared is
	 * not: that may take the time a request may.)
	 */
	foreach(lc, *paths)
	{
		if (((GroupPath *) lfirst(lc))->look_again)
			*paths = foreach_delete_current(*paths, lc);
	}
	return true;
}

/*
 * Answer the requests of a group, and count them in the sources view: those
 * of a group that did not commit 503.  The requests are not ours any more.
 */
static void
answer_group(GroupRequest *group, int n, bool committed, bool replicated)
{
	int			unconfirmed = 0;

	for (int i = 0; i < n; i++)
	{
		if (!committed)
		{
			group[i].status = 503;
			group[i].text = "the request could not be committed; send it again\n";
		}

		/*
		 * Rows committed here, but maybe not on the synchronous standbys
		 * that 200 stands for, as the wait for them was cut short; and 503
		 * would have them sent again.  The connection is closed unanswered,
		 * as PostgreSQL closes a session whose commit it cannot confirm when
		 * it is terminated (after a cancel it confirms it with a warning).
		 */
		if (!replicated && group[i].status == 200)
		{
			group[i].status = 0;
			group[i].text = SW_UNCONFIRMED_TEXT;
			unconfirmed++;
		}
		if (OidIsValid(group[i].relid))
			sw_webhook_worker_count(group[i].relid, group[i].status,
									group[i].note ? group[i].note : group[i].text);
		if (group[i].status == 0)
			hang_up_request(group[i].request);
		else
		{
			group[i].request->answer_json = group[i].json && group[i].status == 200;
			answer_request(group[i].request, group[i].status, group[i].text);
		}
	}
	if (unconfirmed > 0)
		ereport(WARNING,
				(errmsg_plural("webhook server closed %d connection without an answer",
							   "webhook server closed %d connections without an answer",
							   unconfirmed, unconfirmed),
				 errdetail("The requests are committed locally, but the wait for synchronous replication was cut short.")));
}

/*
 * Write the requests taken together in one transaction, then answer them:
 * after the commit, or 503 each if it failed.  The group is written in
 * rounds: the requests in hand first, then those that came while a round
 * was written, for as long as source_writes.webhook_join_time allows and
 * the caches took in no change that matters to the group (a request sent
 * after such a change must not be written with what was prepared before
 * it).  Each round has a snapshot of its own, taken after its requests
 * came; its requests' addresses are resolved first, then each table's
 * requests written (write_table).  Requests left over wait in wh_in_hand.
 */
void
write_group(SwRequest *requests, MemoryContext group_cxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	GroupRequest *group;
	List	   *paths = NIL;
	volatile int n = 0;
	int			i = 0;
	int			first = 0;		/* the round's first request */
	TimestampTz began = 0;
	uint64		changes = 0;
	volatile bool committed = false;
	volatile bool replicated = true;
	volatile bool holding = false;

	for (SwRequest *r = requests; r; r = r->next)
		n++;
	MemoryContextSwitchTo(group_cxt);
	group = palloc0(sizeof(GroupRequest) * SW_WEBHOOK_GROUP);
	for (SwRequest *r = requests; r; r = r->next)
		group[i++].request = r;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		began = GetCurrentTimestamp();
		changes = wh_cache_changes;
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("writing %d webhook request%s", n, n == 1 ? "" : "s"));
		if (wh_tables_changed || hash_get_num_entries(wh_tables) > SW_WEBHOOK_KEPT_TABLES)
			forget_tables();
		for (;;)
		{
			resolve_round(group, first, n, &paths, group_cxt);
			for (TableEntry *e = wh_open_tables; e; e = e->next_open)
				write_table(e, group + first, n - first, group_cxt);

			if (!join_next_round(group, &n, &first, &paths, began, changes))
				break;
		}

		/*
		 * A relay whose server left writes nothing: nobody could be told
		 * that it was written, and its sender, whose connection the server
		 * closed, sends it again
		 */
		if (wh_relay_mode && (wh_server_gone || sw_relay_server_left()))
			ereport(ERROR,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("the webhook server left before the requests were committed"),
					 errdetail("They were not written: the server can no longer answer them.")));
		close_tables();
		PopActiveSnapshot();
		sw_writer_commit_durably(true);

		/*
		 * From the commit to the answers, no interrupt: a shutdown that
		 * answered committed requests 503 would have them sent again.  The
		 * commit holds them itself from before its commit record (and no
		 * earlier: stamping the batches may wait for a lock, which
		 * lock_timeout and a shutdown must be able to end); nothing checks
		 * for them between its end and here.
		 */
		CommitTransactionCommand();
		HOLD_INTERRUPTS();
		holding = true;
		committed = true;
		replicated = sw_writer_commit_replicated();
	}
	PG_CATCH();
	{
		/* the error reset the interrupt holdoff that the commit took */
		holding = false;
		report_and_abort(group_cxt);
		forget_open_tables();
	}
	PG_END_TRY();
	sw_writer_forget_session_state();
	pgstat_report_activity(STATE_IDLE, NULL);

	/* answer and count; the requests are not ours any more */
	wh_writing = NULL;
	answer_group(group, n, committed, replicated);
	if (holding)
		RESUME_INTERRUPTS();
	MemoryContextSwitchTo(cxt);
}
