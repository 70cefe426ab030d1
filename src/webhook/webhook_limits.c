/*-------------------------------------------------------------------------
 *
 * webhook_limits.c
 *		  The webhook worker's limits: the time a request may take, and
 *		  the map of body limits that the server's threads read
 *
 * See doc/internals.md, "Workers and processes" (Map of limits).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_limits.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "pgstat.h"
#include "storage/proc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "log/log.h"
#include "webhook/webhook.h"
#include "workers/workers.h"

/*
 * The cancels a request's time limit sends before it ends the worker: a
 * table's code that catches them all would hold up every other table.
 */
#define SW_WEBHOOK_CANCELS		3

TimeoutId wh_request_timeout;	/* source_writes.webhook_request_timeout */
static volatile sig_atomic_t request_timed_out = 0;	/* cancels it asked for */
bool wh_limits_stale = true;	/* the server's map of limits may be */
static bool publishing = false; /* making it: every change counts */
static Oid *tracked = NULL;		/* the sources in the map, counted */
static int	ntracked = -1;
static uint32 *tracked_hashes = NULL;	/* their hash values in RELOID */
static uint32 *tracked_schema_hashes = NULL;	/* their schemas' */

/*
 * A request took longer than source_writes.webhook_request_timeout: cancel
 * what it runs, as a statement timeout does.
 */
void
request_timeout_handler(void)
{
	request_timed_out++;
	QueryCancelPending = true;
	/* code that catches the cancel, again and again, ends the worker */
	if (request_timed_out > SW_WEBHOOK_CANCELS)
		ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * Start a request's time limit: a cancel when it runs out, and again each
 * time as long again (code may catch a cancel).
 */
void
start_request_clock(void)
{
	request_timed_out = 0;
	if (sw_webhook_request_timeout > 0)
		enable_timeout_every(wh_request_timeout,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 sw_webhook_request_timeout),
							 sw_webhook_request_timeout);
}

/*
 * Stop it; true if it ran out.  A cancel it asked for and that nothing
 * took yet is dropped: it was for the request, which is over.
 */
bool
stop_request_clock(void)
{
	disable_timeout(wh_request_timeout, false);
	if (request_timed_out == 0)
		return false;
	QueryCancelPending = false;
	return true;
}

/*
 * Run out of time though its code caught the cancel: an error, so that it
 * writes nothing all the same.
 */
void
check_request_clock(void)
{
	if (stop_request_clock())
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg(SW_TIMED_OUT_LOG)));
}

/*
 * After an error caught where the request clock ran (timed_out from
 * stop_request_clock()): is it the cancel that the clock sent?  Then its
 * message becomes what the log says of a request that ran out of time.
 */
bool
cancelled_by_clock(ErrorData *edata, bool timed_out)
{
	if (!timed_out || edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
		return false;
	edata->message = pstrdup(SW_TIMED_OUT_LOG);
	return true;
}

/*
 * A catalog change that may move a webhook source or change its limit: a
 * foreign table, or the pg_class row of a source in the map or its
 * schema's row (of other tables and schemas, which VACUUM, ANALYZE and
 * temporary tables change all the time, none; a table that becomes a
 * source comes with a foreign table's row).  While the map is stale or
 * being made, it may not know every source, nor their schemas: every change
 * counts.
 */
void
limits_invalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	const uint32 *hashes;
	bool		ours;

	/*
	 * Of pg_class and pg_namespace, the rows of the map's sources and their
	 * schemas; of pg_foreign_table, a reset, or with no map yet, all
	 */
	if (cacheid == RELOID)
		hashes = tracked_hashes;
	else if (cacheid == NAMESPACEOID)
		hashes = tracked_schema_hashes;
	else
		hashes = NULL;
	ours = hashes == NULL || hashvalue == 0 || wh_limits_stale || publishing;
	for (int i = 0; i < ntracked && !ours; i++)
		ours = hashes[i] == hashvalue;
	if (ours)
	{
		wh_limits_stale = true;
		wh_cache_changes++;
	}
}

/* the tables of the limits, in their order, in the current memory context */
static Oid *
limits_relids(const SwBodyLimit *limits, int n)
{
	Oid		   *relids = palloc(sizeof(Oid) * Max(n, 1));

	for (int i = 0; i < n; i++)
		relids[i] = limits[i].table_id;
	return relids;
}

/*
 * Publish each webhook source's address and max_body_bytes to the server's
 * threads, which look a request up there before they read its body.  In a
 * transaction.
 */
static void
publish_limits(void)
{
	List	   *sources;
	SwBodyLimit *limits;
	Oid		   *relids;
	Oid		   *schemas;
	uint32	   *old_schemas;
	uint32	   *new_schemas;
	int			n = 0;
	ListCell   *lc;

	wh_limits_stale = false;		/* changes taken in from now on make it stale */
	sources = sw_catalog_sources_of_kind(SW_KIND_WEBHOOK);
	limits = palloc(sizeof(SwBodyLimit) * Max(list_length(sources), 1));
	schemas = palloc(sizeof(Oid) * Max(list_length(sources), 1));
	foreach(lc, sources)
	{
		SwSource   *source = lfirst(lc);
		char	   *table;
		char	   *schema;
		int			bytes;

		table = get_rel_name(source->relid);
		schemas[n] = get_rel_namespace(source->relid);
		schema = get_namespace_name(schemas[n]);
		bytes = sw_source_max_body_bytes(source->relid);
		if (table == NULL || schema == NULL || bytes <= 0)
			continue;			/* dropped meanwhile */
		limits[n].database = wh_database_name;
		limits[n].schema = schema;
		limits[n].table = table;
		limits[n].limit = (size_t) bytes;
		limits[n].signature_header = sw_source_signature_header(source->relid);
		limits[n].table_id = source->relid;
		n++;
	}
	/* their schemas, which may have changed without them */
	old_schemas = tracked_schema_hashes;
	new_schemas = MemoryContextAlloc(TopMemoryContext,
									 sizeof(uint32) * Max(n, 1));
	for (int i = 0; i < n; i++)
		new_schemas[i] = GetSysCacheHashValue1(NAMESPACEOID,
											   ObjectIdGetDatum(schemas[i]));

	/* the counts follow the sources, when they changed (in OID order) */
	relids = limits_relids(limits, n);
	if (n != ntracked || memcmp(tracked, relids, sizeof(Oid) * n) != 0)
	{
		Oid		   *new_tracked = MemoryContextAlloc(TopMemoryContext,
													 sizeof(Oid) * Max(n, 1));
		uint32	   *new_hashes = MemoryContextAlloc(TopMemoryContext,
													sizeof(uint32) * Max(n, 1));

		/*
		 * All made before the old ones go: never one without the others
		 * (the invalidation callbacks read them).
		 */
		memcpy(new_tracked, relids, sizeof(Oid) * n);
		for (int i = 0; i < n; i++)
			new_hashes[i] = GetSysCacheHashValue1(RELOID, ObjectIdGetDatum(relids[i]));
		if (tracked)
		{
			pfree(tracked);
			pfree(tracked_hashes);
		}
		tracked = new_tracked;
		tracked_hashes = new_hashes;
		tracked_schema_hashes = new_schemas;
		ntracked = n;
		sw_webhook_worker_track(tracked, n);
	}
	else
		tracked_schema_hashes = new_schemas;
	if (old_schemas)
		pfree(old_schemas);
	if (wh_relay_mode)
	{
		/* the server's map, and the relay's own for path_source() */
		sw_relay_send_limits(limits, n);
		if (!sw_webhook_server_publish_limits(limits, n))
			wh_limits_stale = true;
	}
	else if (!sw_relay_set_own_limits(limits, n))
	{
		wh_limits_stale = true;
		ereport(LOG,
				(errmsg("webhook server has no memory for its map of body limits"),
				 errdetail("Bodies are read before their table's max_body_bytes is checked.")));
	}
}

/*
 * Publish the limits again if the catalog changed since they were.  A
 * transaction takes in the changes: it is begun if always, or if changes
 * were taken in already.  If it fails, the server's threads are left with
 * no map (they read bodies before the limit is checked, as far as
 * SW_WEBHOOK_MAX_BODY) until the next time.
 */
void
refresh_limits(bool always)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (!OidIsValid(MyDatabaseId))
		return;					/* a server of no database: the relays' maps */
	if (!always && !wh_limits_stale)
		return;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (wh_limits_stale)
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			publishing = true;
			publish_limits();
			publishing = false;
			PopActiveSnapshot();
		}
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		publishing = false;
		report_and_abort(cxt);
		(void) sw_webhook_server_publish_limits(NULL, 0);
		wh_limits_stale = true;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/*
 * Answer a request that waited for a look at its table's limit, from the
 * map as it is now: 404 or 413 at once, or read on.  Its table, if any, is
 * of database dboid.  The request is not ours any more.
 */
void
sw_webhook_judge_check(SwRequest *r, Oid dboid)
{
	unsigned int relid;
	int			status = sw_webhook_server_verdict(r, &relid);

	if (status == 413 && relid != InvalidOid)
		sw_webhook_worker_count_in(dboid, relid, status, SW_WEBHOOK_TOO_LARGE_TEXT);
	if (status == 413)
		log_refusal(relid, r->path, status, NULL, r->sized ?
					_("The body announced is over the table's max_body_bytes; it was not read.") :
					_("The body, of unknown length, grew over the table's max_body_bytes; its connection was closed."));

	/* a request without its table's signature header, as to no table */
	if (status == 404 && relid != InvalidOid)
	{
		sw_webhook_worker_count_in(dboid, relid, status, SW_UNSIGNED_NOTE);
		log_refusal(relid, r->path, status, NULL, _(SW_UNSIGNED_DETAIL));
	}
	sw_webhook_server_checked(r, status);
}

/*
 * The requests the server's threads hand over before they read (more of)
 * their bodies: over the limit their map gives, or to an address it does
 * not know.  Those to another database with a relay wait for its fresh
 * map (webhook_relay.c); once the map of the server's own database is
 * fresh, each of the others is answered 404 or 413 at once, or resumes to
 * be read on.  False if there were none.
 */
bool
answer_checks(void)
{
	wh_checking = sw_webhook_server_take_checks();
	if (wh_checking == NULL)
		return false;
	wh_checking = sw_relay_route_checks(wh_checking);
	if (wh_checking == NULL)
		return true;
	refresh_limits(true);
	while (wh_checking)
	{
		SwRequest  *r = wh_checking;

		wh_checking = r->next;
		sw_webhook_judge_check(r, MyDatabaseId);	/* not ours any more */
	}
	return true;
}
