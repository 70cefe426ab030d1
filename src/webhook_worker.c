/*-------------------------------------------------------------------------
 *
 * webhook_worker.c
 *		  The background worker that writes webhook requests into their
 *		  source tables, and answers them after the commit
 *
 * This is the library source_writes_webhook, the only one linked with
 * libmicrohttpd.  The launcher starts one such worker for the database
 * that source_writes.database names; it serves source_writes.webhook_listen
 * (webhook_server.c, whose threads never call PostgreSQL).
 *
 * The worker's main thread waits on its latch and on the server's pipe.
 * It takes the requests that came meanwhile and writes them in one
 * transaction, each in a subtransaction of its own, so that a bad one
 * fails alone; after the commit it answers them all: 200 only for rows
 * that are durably committed.  POST /<database>/<schema>/<table> appends
 * the body to that webhook source table, as the table's owner, with origin
 * webhook; the names are percent-decoded, as PostgreSQL spells them.
 *
 * Bodies, by the table's format: json, one JSON value (an object) or, if
 * the body is not one, a value a line (NDJSON); json_array, each element
 * of a JSON array; text and bytes, the whole body.  Each is one message
 * for the decoder (decode.c), with the request's headers and its arrival
 * time.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "common/jsonapi.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "catalog.h"
#include "ingest.h"
#include "source_writes.h"
#include "webhook_server.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void source_writes_webhook_main(Datum main_arg);

/* how long the worker waits between looks at its latch and the server */
#define SW_WEBHOOK_WAIT_MS		1000

/* the requests of a group: taken together, written in one transaction */
typedef struct GroupRequest
{
	SwRequest  *request;
	int			status;
	char	   *text;
} GroupRequest;

static char *listening = NULL;	/* the webhook_listen the server serves */
static SwRequest *in_hand = NULL;	/* taken, not answered yet */

/*
 * Start serving webhook_listen, or fail the worker with the reason (the
 * launcher starts it again).
 */
static void
start_server(void)
{
	char	   *value = pstrdup(sw_webhook_listen);
	char	   *colon = strrchr(value, ':');
	const char *error;
	char	   *host = value;

	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']')
	{
		host++;					/* [::1]:8080 */
		colon[-1] = '\0';
	}
	error = sw_webhook_server_start(host, atoi(colon + 1));
	if (error)
		ereport(ERROR,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("source_writes webhook server cannot start: %s", error),
				 errhint("Check source_writes.webhook_listen.")));
	listening = MemoryContextStrdup(TopMemoryContext, sw_webhook_listen);
	ereport(LOG,
			(errmsg("source_writes webhook server listening on %s", listening)));
}

/* when the worker leaves: answer what it holds, and stop the server */
static void
stop_server(int code, Datum arg)
{
	while (in_hand)
	{
		SwRequest  *next = in_hand->next;

		sw_webhook_server_answer(in_hand, 503, "the server is shutting down\n");
		in_hand = next;
	}
	sw_webhook_server_stop();
}

/* the value of a hexadecimal digit, or -1 */
static int
hex_value(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Decode one percent-encoded path segment; NULL if it is not valid (a bad
 * escape, a NUL, bytes not in the database encoding).
 */
static char *
percent_decode(const char *s, size_t len)
{
	StringInfoData out;

	initStringInfo(&out);
	for (size_t i = 0; i < len; i++)
	{
		if (s[i] != '%')
			appendStringInfoChar(&out, s[i]);
		else if (i + 2 < len && hex_value(s[i + 1]) >= 0 && hex_value(s[i + 2]) >= 0)
		{
			appendStringInfoChar(&out, (char) (hex_value(s[i + 1]) * 16 + hex_value(s[i + 2])));
			i += 2;
		}
		else
			return NULL;
	}
	if (strlen(out.data) != (size_t) out.len ||
		!pg_verifymbstr(out.data, out.len, true))
		return NULL;
	return out.data;
}

/*
 * The webhook source table a path names, /<database>/<schema>/<table>, in
 * this database; InvalidOid if there is none.  Tables that exist but are
 * no webhook sources get the same answer as tables that do not.
 */
static Oid
path_source(const char *path)
{
	char	   *parts[3];
	int			n = 0;
	const char *p = path;
	Oid			nsp;
	Oid			relid;
	SwSource	source;

	if (*p++ != '/')
		return InvalidOid;
	while (n < 3)
	{
		const char *slash = strchr(p, '/');
		size_t		len = slash ? (size_t) (slash - p) : strlen(p);

		if (len == 0 || (n < 2 && slash == NULL) || (n == 2 && slash != NULL))
			return InvalidOid;
		if ((parts[n++] = percent_decode(p, len)) == NULL)
			return InvalidOid;
		p += len + 1;
	}
	if (strcmp(parts[0], get_database_name(MyDatabaseId)) != 0)
		return InvalidOid;
	nsp = get_namespace_oid(parts[1], true);
	if (!OidIsValid(nsp))
		return InvalidOid;
	relid = get_relname_relid(parts[2], nsp);
	if (!OidIsValid(relid) || !sw_source_lookup(relid, &source) ||
		source.kind != SW_KIND_WEBHOOK)
		return InvalidOid;
	return relid;
}

/* the bounds of the elements of a JSON array, found by PostgreSQL's parser */
typedef struct ArrayElements
{
	JsonLexContext *lex;
	int			depth;
	List	   *starts;			/* byte offsets */
	List	   *ends;
} ArrayElements;

static void
elements_nest(void *state)
{
	((ArrayElements *) state)->depth++;
}

static void
elements_unnest(void *state)
{
	((ArrayElements *) state)->depth--;
}

static void
element_start(void *state, bool isnull)
{
	ArrayElements *e = state;

	if (e->depth == 1)
		e->starts = lappend_int(e->starts, e->lex->token_start - e->lex->input);
}

static void
element_end(void *state, bool isnull)
{
	ArrayElements *e = state;

	if (e->depth == 1)
		e->ends = lappend_int(e->ends, e->lex->prev_token_terminator - e->lex->input);
}

/* a body that PostgreSQL's JSON parser cannot take: say where */
static void
bad_json(JsonLexContext *lex, JsonParseErrorType result)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
			 errmsg("invalid JSON in the body at byte %d",
					(int) (lex->token_start - lex->input) + 1),
			 errdetail("%s", json_errdetail(result, lex))));
}

/* an error context: which piece of a body is decoded */
static void
piece_context(void *arg)
{
	errcontext("%s", (char *) arg);
}

/*
 * Write a request's body into its table: the messages its format makes of
 * it, through an ingestion that raises the first error.  Returns how many
 * rows.
 */
static int
write_body(SwRequest *r, Relation ftrel)
{
	SwIngest   *ing = sw_ingest_create(ftrel, SW_ORIGIN_WEBHOOK);
	const SwSourceTable *st = sw_ingest_source_table(ing);
	SwHeader   *headers = palloc0(sizeof(SwHeader) * Max(r->nheaders, 1));
	SwMessage	m = {0};
	List	   *starts = NIL;
	List	   *ends = NIL;
	ListCell   *ls;
	ListCell   *le;
	ErrorContextCallback errcb;
	char		where[64] = "";
	int			n = 0;
	int64		kept;

	for (int i = 0; i < r->nheaders; i++)
	{
		headers[i].name = r->headers[i].name;
		headers[i].value = r->headers[i].value;
		headers[i].len = r->headers[i].value ? strlen(r->headers[i].value) : 0;
	}
	m.nheaders = r->nheaders;
	m.headers = headers;
	m.partition = -1;
	m.offset = -1;
	m.timestamp_ms = r->received_ms;

	/* where the messages are in the body */
	if (st->format == SW_FORMAT_JSON_ARRAY)
	{
		JsonSemAction sem = {0};
		ArrayElements e = {0};
		JsonParseErrorType result;
		char	   *body = pnstrdup(r->body ? r->body : "", r->body_len);

		e.lex = makeJsonLexContextCstringLen(body, r->body_len, GetDatabaseEncoding(), true);
		sem.semstate = &e;
		sem.object_start = elements_nest;
		sem.object_end = elements_unnest;
		sem.array_start = elements_nest;
		sem.array_end = elements_unnest;
		sem.array_element_start = element_start;
		sem.array_element_end = element_end;
		result = pg_parse_json(e.lex, &sem);
		if (result != JSON_SUCCESS)
			bad_json(e.lex, result);
		if (r->body_len == 0 || body[strspn(body, " \t\r\n")] != '[')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("the body is not a JSON array"),
					 errhint("Source table \"%s\" has format json_array: post [{...}, {...}].",
							 RelationGetRelationName(ftrel))));
		starts = e.starts;
		ends = e.ends;
	}
	else if (st->format == SW_FORMAT_JSON)
	{
		JsonSemAction sem = {0};
		char	   *body = pnstrdup(r->body ? r->body : "", r->body_len);
		JsonLexContext *lex = makeJsonLexContextCstringLen(body, r->body_len,
														   GetDatabaseEncoding(), false);

		if (pg_parse_json(lex, &sem) == JSON_SUCCESS)
		{
			starts = list_make1_int(0);		/* one value */
			ends = list_make1_int(r->body_len);
		}
		else
		{
			/* NDJSON: a value a line; empty lines do not count */
			size_t		at = 0;

			while (at < r->body_len)
			{
				const char *nl = memchr(r->body + at, '\n', r->body_len - at);
				size_t		end = nl ? (size_t) (nl - r->body) : r->body_len;
				size_t		len = end - at;

				if (strspn(r->body + at, " \t\r") < len)
				{
					starts = lappend_int(starts, at);
					ends = lappend_int(ends, end);
				}
				at = end + 1;
			}
		}
	}
	else
	{
		starts = list_make1_int(0);
		ends = list_make1_int(r->body_len);
	}

	errcb.callback = piece_context;
	errcb.arg = where;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;
	sw_ingest_begin(ing, ftrel);
	forboth(ls, starts, le, ends)
	{
		m.value = r->body ? r->body + lfirst_int(ls) : "";
		m.value_len = lfirst_int(le) - lfirst_int(ls);
		n++;
		if (list_length(starts) > 1)
			snprintf(where, sizeof(where), "%s %d of the body",
					 st->format == SW_FORMAT_JSON_ARRAY ? "element" : "line", n);
		sw_ingest_write(ing, &m);
	}
	(void) sw_ingest_end(ing, &kept);
	error_context_stack = errcb.previous;
	return n;
}

/* what a client is told of an error: the message, and where and why */
static char *
error_answer(ErrorData *edata)
{
	StringInfoData s;

	initStringInfo(&s);
	appendStringInfoString(&s, edata->message);
	if (edata->detail)
		appendStringInfo(&s, ": %s", edata->detail);
	if (edata->context)
	{
		/* one line: the context's lines, innermost first */
		appendStringInfoString(&s, " (");
		for (const char *c = edata->context; *c; c++)
		{
			if (*c == '\n')
				appendStringInfoString(&s, "; ");
			else
				appendStringInfoChar(&s, *c);
		}
		appendStringInfoChar(&s, ')');
	}
	appendStringInfoChar(&s, '\n');
	return s.data;
}

/*
 * Write one request of a group, in a subtransaction of its own: its answer
 * (given after the commit) in g, in the caller's memory context.
 */
static void
write_request(GroupRequest *g)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	SwRequest  *r = g->request;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		Oid			relid = path_source(r->path);

		if (!OidIsValid(relid))
		{
			g->status = 404;
			g->text = MemoryContextStrdup(cxt, "no webhook source table at this address\n");
		}
		else
		{
			Relation	ftrel = table_open(relid, RowExclusiveLock);
			int			rows = write_body(r, ftrel);

			table_close(ftrel, NoLock);
			g->status = 200;
			g->text = MemoryContextStrdup(cxt, psprintf("%d %s\n", rows,
														rows == 1 ? "row" : "rows"));
		}
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		switch (ERRCODE_TO_CATEGORY(edata->sqlerrcode))
		{
			case ERRCODE_OPERATOR_INTERVENTION:
				ReThrowError(edata);
				break;
			case ERRCODE_TRANSACTION_ROLLBACK:
			case ERRCODE_INSUFFICIENT_RESOURCES:
			case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:
			case ERRCODE_SYSTEM_ERROR:
			case ERRCODE_INTERNAL_ERROR:
				g->status = 503;
				break;
			default:
				g->status = 400;
				break;
		}
		g->text = error_answer(edata);
		ereport(LOG,
				(errmsg("source_writes webhook request to %s refused with status %d",
						r->path, g->status)));
		FreeErrorData(edata);
	}
	PG_END_TRY();
}

/*
 * Write the requests taken together in one transaction, then answer them:
 * after the commit, or 503 each if it failed.
 */
static void
write_group(SwRequest *requests, MemoryContext group_cxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	GroupRequest *group;
	int			n = 0;
	int			i = 0;
	bool		committed = false;

	for (SwRequest *r = requests; r; r = r->next)
		n++;
	MemoryContextSwitchTo(group_cxt);
	group = palloc0(sizeof(GroupRequest) * n);
	for (SwRequest *r = requests; r; r = r->next)
		group[i++].request = r;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		pgstat_report_activity(STATE_RUNNING, "writing webhook requests");
		for (i = 0; i < n; i++)
		{
			MemoryContextSwitchTo(group_cxt);
			write_request(&group[i]);
		}
		PopActiveSnapshot();
		CommitTransactionCommand();
		committed = true;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(group_cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortOutOfAnyTransaction();
	}
	PG_END_TRY();
	pgstat_report_activity(STATE_IDLE, NULL);

	/* answer; the requests are not ours any more */
	in_hand = NULL;
	for (i = 0; i < n; i++)
	{
		if (committed)
			sw_webhook_server_answer(group[i].request, group[i].status, group[i].text);
		else
			sw_webhook_server_answer(group[i].request, 503,
									 "the request could not be committed; send it again\n");
	}
	MemoryContextSwitchTo(cxt);
}

/* what the main thread waits for: its latch, the postmaster, requests */
static WaitEventSet *
make_events(void)
{
	WaitEventSet *events = CreateWaitEventSet(TopMemoryContext, 3);

	AddWaitEventToSet(events, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(events, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(events, WL_SOCKET_READABLE, sw_webhook_server_wake_fd(), NULL, NULL);
	return events;
}

void
source_writes_webhook_main(Datum main_arg)
{
	WaitEventSet *events;
	MemoryContext group_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnection(sw_database, NULL, 0);
	pgstat_report_appname("source_writes webhook server");

	before_shmem_exit(stop_server, (Datum) 0);
	start_server();

	events = make_events();
	group_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook group",
									  ALLOCSET_DEFAULT_SIZES);

	for (;;)
	{
		WaitEvent	event;
		SwRequest  *requests;

		(void) WaitEventSetWait(events, SW_WEBHOOK_WAIT_MS, &event, 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			if (strcmp(sw_database, get_database_name(MyDatabaseId)) != 0)
				proc_exit(0);	/* the launcher serves another database now */
			if (strcmp(listening, sw_webhook_listen) != 0)
			{
				/* rebind: what is queued is answered 503 */
				ereport(LOG,
						(errmsg("source_writes webhook server moves from %s to %s",
								listening, sw_webhook_listen)));
				sw_webhook_server_stop();
				start_server();
				FreeWaitEventSet(events);
				events = make_events();
			}
		}

		requests = sw_webhook_server_take();
		if (requests == NULL)
			continue;
		in_hand = requests;
		write_group(requests, group_cxt);
		MemoryContextReset(group_cxt);
	}
}
