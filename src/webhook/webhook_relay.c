/*-------------------------------------------------------------------------
 *
 * webhook_relay.c
 *		  Webhook requests to other databases: the webhook server hands them
 *		  to a webhook worker of their database, and answers with its answer
 *
 * See doc/internals.md, "Workers and processes" (relays).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_relay.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "storage/dsm.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shm_mq.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "webhook/webhook.h"
#include "workers/workers.h"

/* what a relay's segment begins with */
#define SW_RELAY_MAGIC			0x53575231

/* each queue's size */
#define SW_RELAY_QUEUE_SIZE		(256 * 1024)

/* the most databases whose requests the server relays */
#define SW_MAX_RELAYS			1024

/* how long a server that stops waits for the relays' answers */
#define SW_RELAY_STOP_WAIT_MS	5000

/* how often the server looks which databases take webhook requests */
#define SW_RELAY_FOLLOW_MS		100

/* the longest wait before a relay that failed is started again */
#define SW_RELAY_MAX_BACKOFF_MS	60000

/* a relay that ran this long before it left starts again at once */
#define SW_RELAY_HEALTHY_MS		60000

/* messages */
#define SW_MSG_REQUEST			'R' /* to a relay: a request */
#define SW_MSG_REFRESH			'F' /* to a relay: send a fresh map */
#define SW_MSG_ANSWER			'A' /* from a relay: a request's answer */
#define SW_MSG_LIMITS			'L' /* from a relay: its map */

/* a header value that is NULL */
#define SW_NO_VALUE				PG_UINT32_MAX

typedef struct RelaySegment
{
	uint32		magic;
	Oid			dboid;
	pg_atomic_uint32 server_left;	/* the server detached: it answers no more */
	/* then the queue to the relay, then the queue from it */
} RelaySegment;

#define SW_RELAY_QUEUES_AT		MAXALIGN(sizeof(RelaySegment))
#define SW_RELAY_SEGMENT_SIZE	(SW_RELAY_QUEUES_AT + 2 * SW_RELAY_QUEUE_SIZE)

/*
 * The server's side
 */

/* a message waiting to go to a relay */
typedef struct Outgoing
{
	struct Outgoing *next;
	SwRequest  *request;		/* NULL: an ask for a fresh map */
	uint64		id;
	StringInfoData head;		/* all of the message but the body */
} Outgoing;

/* a request that waits for a relay's fresh map to be judged */
typedef struct Parked
{
	SwRequest  *request;
	uint64		refresh;		/* the ask it waits for */
} Parked;

/* the relay of a database */
typedef struct Relay
{
	Oid			dboid;			/* the hash key */
	char	   *name;			/* its database's, in cxt */
	bool		wanted;			/* its database takes webhook requests */
	bool		paused;			/* a command wants its database to itself */
	MemoryContext cxt;			/* its map, its name, its parked checks */
	dsm_segment *seg;			/* NULL while none runs */
	shm_mq_handle *to;
	shm_mq_handle *from;
	BackgroundWorkerHandle *handle;
	Outgoing   *out_head;
	Outgoing   *out_tail;
	int			nsent;			/* requests sent, not answered */
	uint64		refresh_asked;	/* the last ask for a fresh map */
	bool		refresh_queued; /* one is queued and not begun */
	List	   *parked;			/* Parked */
	SwBodyLimit *limits;		/* its map, in cxt */
	int			nlimits;
	TimestampTz started_at;
	TimestampTz start_after;	/* backoff */
	int			failures;
	bool		short_of_workers;	/* it could not be started */
} Relay;

/* a request sent to a relay, until it is answered */
typedef struct Sent
{
	uint64		id;				/* the hash key */
	SwRequest  *request;
	Oid			dboid;
} Sent;

static bool publish_map(void);
static void follow_databases(void);

static SwJudgeCheck judge_check = NULL;
static Oid	own_dboid = InvalidOid;
static char *own_database = NULL;
static SwBodyLimit *own_limits = NULL;
static int	own_nlimits = 0;
static MemoryContext own_cxt = NULL;
static HTAB *relays = NULL;
static HTAB *sent = NULL;
static uint64 next_id = 0;
static bool map_changed = false;

/*
 * The relay's side
 */

/* a request the relay took from its queue, in one allocation */
typedef struct RelayedRequest
{
	SwRequest	request;		/* first: the worker sees only this */
	uint64		id;
} RelayedRequest;

static dsm_segment *relay_seg = NULL;
static shm_mq_handle *relay_in = NULL;
static shm_mq_handle *relay_out = NULL;
static bool relay_sending = false;	/* a send was under way */
static bool relay_broken = false;	/* no more can be sent */
static uint64 refresh_wanted = 0;	/* the last ask for a fresh map */
static uint64 refresh_answered = 0;
static StringInfoData last_limits;	/* the map last sent, for asks */

/* append binary values to a message */
static void
put_bytes(StringInfo s, const void *data, Size len)
{
	appendBinaryStringInfo(s, data, len);
}

static void
put_uint32(StringInfo s, uint32 v)
{
	put_bytes(s, &v, sizeof(v));
}

static void
put_uint64(StringInfo s, uint64 v)
{
	put_bytes(s, &v, sizeof(v));
}

/* read values out of a message, with a check of its length */
typedef struct Reader
{
	const char *data;
	Size		len;
	Size		at;
} Reader;

static const char *
get_bytes(Reader *r, Size len)
{
	const char *p = r->data + r->at;

	if (len > r->len - r->at)
		elog(ERROR, "webhook relay message is cut short");
	r->at += len;
	return p;
}

static uint32
get_uint32(Reader *r)
{
	uint32		v;

	memcpy(&v, get_bytes(r, sizeof(v)), sizeof(v));
	return v;
}

static uint64
get_uint64(Reader *r)
{
	uint64		v;

	memcpy(&v, get_bytes(r, sizeof(v)), sizeof(v));
	return v;
}

/*
 * The name a path begins with, /<database>/..., percent-decoded into buf
 * (as long as the path); false if it has none.
 */
static bool
path_database(const char *path, char *buf, size_t *len)
{
	const char *p = path;
	char	   *out = buf;

	if (*p++ != '/')
		return false;
	for (; *p != '\0' && *p != '/'; p++)
	{
		if (*p != '%')
			*out++ = *p;
		else if (sw_webhook_hex_digit(p[1]) >= 0 && sw_webhook_hex_digit(p[2]) >= 0)
		{
			*out++ = (char) (sw_webhook_hex_digit(p[1]) * 16 + sw_webhook_hex_digit(p[2]));
			p += 2;
		}
		else
			return false;
	}
	*len = out - buf;
	return *len > 0 && *p == '/';
}

/*
 * Start serving: the server's own database (InvalidOid and NULL: none),
 * whose requests it writes itself.  judge is what judges a request that
 * waited for a relay's map (the worker's sw_webhook_judge_check(), given
 * here so that this file does not call back into the worker's).
 */
void
sw_relay_server_start(Oid dboid, const char *database, SwJudgeCheck judge)
{
	HASHCTL		ctl;

	judge_check = judge;
	own_dboid = dboid;
	own_database = database ? MemoryContextStrdup(TopMemoryContext, database) : NULL;
	own_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook map",
									ALLOCSET_SMALL_SIZES);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(Relay);
	relays = hash_create("source_writes webhook relays", 16, &ctl, HASH_ELEM | HASH_BLOBS);
	ctl.keysize = sizeof(uint64);
	ctl.entrysize = sizeof(Sent);
	sent = hash_create("source_writes relayed requests", 64, &ctl, HASH_ELEM | HASH_BLOBS);

	/* of no database: a map of none yet, which the relays' maps fill */
	if (!OidIsValid(dboid))
		(void) publish_map();

	/*
	 * The relays to make, before the first request is routed: one to a
	 * database that has webhook sources waits for its relay, and is not
	 * told there is no table
	 */
	follow_databases();
}

/* publish the server's map: its own database's sources and each relay's */
static bool
publish_map(void)
{
	HASH_SEQ_STATUS seq;
	Relay	   *relay;
	SwBodyLimit *all;
	int			n = own_nlimits;
	bool		published;

	map_changed = false;
	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
		n += relay->nlimits;
	all = palloc(sizeof(SwBodyLimit) * Max(n, 1));
	n = 0;
	for (int i = 0; i < own_nlimits; i++)
		all[n++] = own_limits[i];
	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
		for (int i = 0; i < relay->nlimits; i++)
			all[n++] = relay->limits[i];
	published = sw_webhook_server_publish_limits(all, n);
	pfree(all);
	return published;
}

/*
 * The webhook sources of the server's own database, with their limits:
 * kept, and published with the relays' (in a transaction of the caller's:
 * it may fail).  False if there was no memory for the map.
 */
bool
sw_relay_set_own_limits(const SwBodyLimit *limits, int n)
{
	MemoryContext old = MemoryContextSwitchTo(own_cxt);

	MemoryContextReset(own_cxt);
	own_limits = palloc(sizeof(SwBodyLimit) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		own_limits[i] = limits[i];
		own_limits[i].database = pstrdup(own_database);
		own_limits[i].schema = pstrdup(limits[i].schema);
		own_limits[i].table = pstrdup(limits[i].table);
		if (limits[i].signature_header)
			own_limits[i].signature_header = pstrdup(limits[i].signature_header);
	}
	own_nlimits = n;
	MemoryContextSwitchTo(old);
	return publish_map();
}

/* a message that asks a relay for a fresh map */
static void
queue_refresh(Relay *relay)
{
	MemoryContext old;
	Outgoing   *o;

	if (relay->refresh_queued)
		return;					/* one that will go after what came is queued */
	old = MemoryContextSwitchTo(TopMemoryContext);
	o = palloc0(sizeof(Outgoing));
	o->id = ++relay->refresh_asked;
	initStringInfo(&o->head);
	appendStringInfoChar(&o->head, SW_MSG_REFRESH);
	put_uint64(&o->head, o->id);
	MemoryContextSwitchTo(old);
	if (relay->out_tail)
		relay->out_tail->next = o;
	else
		relay->out_head = o;
	relay->out_tail = o;
	relay->refresh_queued = true;
}

/* a request for a relay: queued, to go when the queue takes it */
static void
queue_request(Relay *relay, SwRequest *r)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	Outgoing   *o = palloc0(sizeof(Outgoing));
	size_t		path_len = strlen(r->path);

	o->request = r;
	o->id = ++next_id;
	initStringInfo(&o->head);
	appendStringInfoChar(&o->head, SW_MSG_REQUEST);
	put_uint64(&o->head, o->id);
	put_uint64(&o->head, (uint64) r->received_ms);
	put_uint32(&o->head, (uint32) path_len);
	put_uint32(&o->head, r->query ? (uint32) strlen(r->query) : SW_NO_VALUE);
	put_uint32(&o->head, (uint32) r->nheaders);
	put_uint64(&o->head, (uint64) r->body_len);
	put_bytes(&o->head, r->path, path_len);
	if (r->query)
		put_bytes(&o->head, r->query, strlen(r->query));
	for (int i = 0; i < r->nheaders; i++)
	{
		size_t		name_len = strlen(r->headers[i].name);
		const char *value = r->headers[i].value;

		put_uint32(&o->head, (uint32) name_len);
		put_uint32(&o->head, value ? (uint32) strlen(value) : SW_NO_VALUE);
		put_bytes(&o->head, r->headers[i].name, name_len);
		if (value)
			put_bytes(&o->head, value, strlen(value));
	}
	MemoryContextSwitchTo(old);
	if (relay->out_tail)
		relay->out_tail->next = o;
	else
		relay->out_head = o;
	relay->out_tail = o;
}

/* the relay of a database by name, or NULL */
static Relay *
relay_by_name(const char *name, size_t len)
{
	HASH_SEQ_STATUS seq;
	Relay	   *relay;

	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
	{
		if (strlen(relay->name) == len && memcmp(relay->name, name, len) == 0)
		{
			hash_seq_term(&seq);
			return relay;
		}
	}
	return NULL;
}

/* where a request goes */
typedef enum Destination
{
	SW_DEST_OWN,				/* the server's own database */
	SW_DEST_RELAY,				/* a relay's */
	SW_DEST_NONE,				/* no database served with webhook sources */
	SW_DEST_UNAVAILABLE			/* its relay cannot take it now, or its
								 * database is still being looked at */
} Destination;

static Destination
destination(const char *path, Relay **relay)
{
	size_t		path_len = strlen(path);
	char		stack_buf[256];
	char	   *buf = path_len < sizeof(stack_buf) ? stack_buf : palloc(path_len + 1);
	size_t		len;
	Destination dest;

	*relay = NULL;
	if (!path_database(path, buf, &len))
		dest = own_database ? SW_DEST_OWN : SW_DEST_NONE;
	else if (own_database && strlen(own_database) == len &&
			 memcmp(own_database, buf, len) == 0)
		dest = SW_DEST_OWN;
	else if ((*relay = relay_by_name(buf, len)) == NULL)
		dest = sw_databases_unsettled(buf, len) ? SW_DEST_UNAVAILABLE : SW_DEST_NONE;
	else if ((*relay)->paused || !(*relay)->wanted ||
			 ((*relay)->seg == NULL && (*relay)->start_after > GetCurrentTimestamp()))
		dest = SW_DEST_UNAVAILABLE;
	else
		dest = SW_DEST_RELAY;
	if (buf != stack_buf)
		pfree(buf);
	return dest;
}

/*
 * Route the requests the server's threads handed over (a list, through
 * next): those to the server's own database are returned, in order; those
 * to another database go to its relay, or are answered 404 (no webhook
 * source there; 405 for a GET) or 503 (its relay cannot take them now).
 */
SwRequest *
sw_relay_route(SwRequest *requests)
{
	SwRequest  *own = NULL;
	SwRequest **tail = &own;

	while (requests)
	{
		SwRequest  *r = requests;
		Relay	   *relay;

		requests = r->next;
		switch (destination(r->path, &relay))
		{
			case SW_DEST_OWN:
				*tail = r;
				tail = &r->next;
				break;
			case SW_DEST_RELAY:
				queue_request(relay, r);
				break;
			case SW_DEST_NONE:
				/* a GET to no table: as to a table that takes only POST */
				if (r->query)
					sw_webhook_server_answer(r, 405, SW_WEBHOOK_POST_ONLY_TEXT);
				else
					sw_webhook_server_answer(r, 404, SW_WEBHOOK_NOT_FOUND_TEXT);
				break;
			case SW_DEST_UNAVAILABLE:
				sw_webhook_server_answer(r, 503, SW_WEBHOOK_UNAVAILABLE_TEXT);
				break;
		}
	}
	*tail = NULL;
	return own;
}

/*
 * Route the requests that wait for a look at their limit: those to another
 * database whose relay runs (or is starting) wait for its fresh map; those
 * whose database cannot be told now are answered 503; the others are
 * returned, to be judged now (by the map as it is: an address of no
 * database served is none).
 */
SwRequest *
sw_relay_route_checks(SwRequest *checks)
{
	SwRequest  *now = NULL;
	SwRequest **tail = &now;

	while (checks)
	{
		SwRequest  *r = checks;
		Relay	   *relay;
		Destination dest;

		checks = r->next;
		dest = destination(r->path, &relay);
		if (dest == SW_DEST_UNAVAILABLE)
			sw_webhook_server_checked(r, 503);
		else if (dest == SW_DEST_RELAY)
		{
			MemoryContext old = MemoryContextSwitchTo(relay->cxt);
			Parked	   *p = palloc(sizeof(Parked));

			queue_refresh(relay);
			p->request = r;
			p->refresh = relay->refresh_asked;
			relay->parked = lappend(relay->parked, p);
			MemoryContextSwitchTo(old);
		}
		else
		{
			*tail = r;
			tail = &r->next;
		}
	}
	*tail = NULL;
	return now;
}

/*
 * The server detaches from a relay's segment (it drops the relay, or
 * exits, however it exits): the relay is told that nothing it writes
 * from now on can be answered.
 */
static void
server_leaves_segment(dsm_segment *seg, Datum arg)
{
	RelaySegment *header = (RelaySegment *) DatumGetPointer(arg);

	pg_atomic_write_u32(&header->server_left, 1);
}

/*
 * Detach from a relay's queues and segment: a relay that still runs finds
 * the server gone, and leaves without writing what it holds.
 */
static void
detach_relay(Relay *relay)
{
	if (relay->seg)
		server_leaves_segment(relay->seg, PointerGetDatum(dsm_segment_address(relay->seg)));
	if (relay->to)
		shm_mq_detach(relay->to);
	if (relay->from)
		shm_mq_detach(relay->from);
	if (relay->seg)
		dsm_detach(relay->seg);
	relay->to = relay->from = NULL;
	relay->seg = NULL;
	if (relay->handle)
		pfree(relay->handle);
	relay->handle = NULL;
}

/*
 * What waits to go to a relay is answered 503, and the requests that
 * waited for its map 503 too.  A message that went in part never reached
 * it whole: once the queue is closed, it never will, and was not written.
 */
static void
unsend_all(Relay *relay)
{
	ListCell   *lc;

	while (relay->out_head)
	{
		Outgoing   *o = relay->out_head;

		relay->out_head = o->next;
		if (o->request)
			sw_webhook_server_answer(o->request, 503, SW_WEBHOOK_UNAVAILABLE_TEXT);
		pfree(o->head.data);
		pfree(o);
	}
	relay->out_tail = NULL;
	relay->refresh_queued = false;
	foreach(lc, relay->parked)
		sw_webhook_server_checked(((Parked *) lfirst(lc))->request, 503);
	list_free_deep(relay->parked);
	relay->parked = NIL;
}

/*
 * A relay left, or could not be reached: what it was sent and did not
 * answer has its connection closed (it may have been written), what it
 * was not sent whole is answered 503, and the requests that waited for
 * its map 503 too.  With backoff, it is started again after a wait.
 */
static void
lose_relay(Relay *relay, bool backoff)
{
	TimestampTz now = GetCurrentTimestamp();
	HASH_SEQ_STATUS seq;
	Sent	   *s;
	int			closed = 0;

	hash_seq_init(&seq, sent);
	while ((s = hash_seq_search(&seq)) != NULL)
	{
		if (s->dboid != relay->dboid)
			continue;
		sw_webhook_server_hang_up(s->request);
		closed++;
		(void) hash_search(sent, &s->id, HASH_REMOVE, NULL);
	}
	relay->nsent = 0;
	unsend_all(relay);
	detach_relay(relay);
	if (closed > 0)
		ereport(LOG,
				(errmsg_plural("webhook server closed %d connection without an answer",
							   "webhook server closed %d connections without an answer",
							   closed, closed),
				 errdetail("The webhook worker of database \"%s\" left.  The requests were handed to it and may have been written.",
						   relay->name)));
	if (!backoff)
		return;
	if (TimestampDifferenceExceeds(relay->started_at, now, SW_RELAY_HEALTHY_MS) || relay->paused)
		relay->failures = 0;
	else
		relay->failures++;
	relay->start_after = relay->failures == 0 ? 0 :
		TimestampTzPlusMilliseconds(now, sw_backoff_ms(relay->failures, 1000,
													   SW_RELAY_MAX_BACKOFF_MS));
	sw_database_set_webhook_writer(relay->dboid, 0, "starting", NULL);
}

/* start a relay for a database; false if it could not be started */
static bool
start_relay(Relay *relay)
{
	BackgroundWorker worker;
	MemoryContext old;
	dsm_segment *seg;
	RelaySegment *header;
	shm_mq	   *to;
	shm_mq	   *from;
	BackgroundWorkerHandle *handle;

	seg = dsm_create(SW_RELAY_SEGMENT_SIZE, DSM_CREATE_NULL_IF_MAXSEGMENTS);
	if (seg == NULL)
		return false;
	dsm_pin_mapping(seg);
	header = dsm_segment_address(seg);
	header->magic = SW_RELAY_MAGIC;
	header->dboid = relay->dboid;
	pg_atomic_init_u32(&header->server_left, 0);
	to = shm_mq_create((char *) header + SW_RELAY_QUEUES_AT, SW_RELAY_QUEUE_SIZE);
	shm_mq_set_sender(to, MyProc);
	from = shm_mq_create((char *) header + SW_RELAY_QUEUES_AT + SW_RELAY_QUEUE_SIZE,
						 SW_RELAY_QUEUE_SIZE);
	shm_mq_set_receiver(from, MyProc);

	sw_worker_describe(&worker, "source_writes_webhook", "source_writes_webhook_relay_main",
					   "source_writes webhook worker",
					   UInt32GetDatum(dsm_segment_handle(seg)));
	snprintf(worker.bgw_name, BGW_MAXLEN, "source_writes webhook worker for database %u",
			 relay->dboid);
	old = MemoryContextSwitchTo(TopMemoryContext);
	if (!RegisterDynamicBackgroundWorker(&worker, &handle))
	{
		MemoryContextSwitchTo(old);
		dsm_detach(seg);
		return false;
	}
	relay->to = shm_mq_attach(to, seg, handle);
	relay->from = shm_mq_attach(from, seg, handle);
	/* after the queues': it runs before they are detached */
	on_dsm_detach(seg, server_leaves_segment, PointerGetDatum(header));
	MemoryContextSwitchTo(old);
	relay->seg = seg;
	relay->handle = handle;
	relay->started_at = GetCurrentTimestamp();
	return true;
}

/* forget a relay no longer wanted, and its map */
static void
drop_relay(Relay *relay)
{
	lose_relay(relay, false);
	MemoryContextDelete(relay->cxt);
	if (relay->nlimits > 0)
		map_changed = true;
	sw_database_set_webhook_writer(relay->dboid, 0, "", "");
	(void) hash_search(relays, &relay->dboid, HASH_REMOVE, NULL);
}

/*
 * Keep a relay for each database (not the server's own) that takes
 * webhook requests, as databases.c says (looked at every
 * SW_RELAY_FOLLOW_MS); one whose database no longer does is dropped once
 * it holds nothing.
 */
static void
follow_databases(void)
{
	static SwWebhookDatabase *dbs = NULL;
	static TimestampTz last = 0;
	TimestampTz now = GetCurrentTimestamp();
	int			n;
	HASH_SEQ_STATUS seq;
	Relay	   *relay;

	if (!TimestampDifferenceExceeds(last, now, SW_RELAY_FOLLOW_MS))
		return;
	last = now;
	if (dbs == NULL)
		dbs = MemoryContextAlloc(TopMemoryContext, sizeof(SwWebhookDatabase) * SW_MAX_RELAYS);
	n = sw_databases_with_webhooks(dbs, SW_MAX_RELAYS);

	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
		relay->wanted = false;
	for (int i = 0; i < n; i++)
	{
		bool		found;

		if (dbs[i].dboid == own_dboid)
			continue;
		relay = hash_search(relays, &dbs[i].dboid, HASH_ENTER, &found);
		if (found && strcmp(relay->name, NameStr(dbs[i].name)) != 0)
		{
			/* renamed (its relay was made to leave): a new one, a new map */
			lose_relay(relay, false);
			MemoryContextDelete(relay->cxt);
			map_changed |= relay->nlimits > 0;
			found = false;
		}
		if (!found)
		{
			memset((char *) relay + sizeof(Oid), 0, sizeof(Relay) - sizeof(Oid));
			relay->cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook relay",
											   ALLOCSET_SMALL_SIZES);
			relay->name = MemoryContextStrdup(relay->cxt, NameStr(dbs[i].name));
			relay->limits = MemoryContextAlloc(relay->cxt, sizeof(SwBodyLimit));
		}
		relay->wanted = true;
		relay->paused = false;
	}

	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
	{
		if (relay->wanted)
			continue;
		/* made to leave by a command: back once it is over */
		relay->paused = sw_database_paused(relay->dboid);
		if (relay->paused)
			continue;
		if (relay->nsent == 0 && relay->out_head == NULL && relay->parked == NIL)
			drop_relay(relay);
	}
}

/* a relay's answer to a request */
static void
take_answer(Relay *relay, Reader *r)
{
	uint64		id = get_uint64(r);
	int32		status = (int32) get_uint32(r);
	bool		json = *get_bytes(r, 1) == 'j';
	const char *text = get_bytes(r, r->len - r->at);
	Sent	   *s = hash_search(sent, &id, HASH_FIND, NULL);

	if (s == NULL)
		return;
	s->request->answer_json = json;
	if (status == 0)
		sw_webhook_server_hang_up(s->request);
	else
		sw_webhook_server_answer(s->request, status, text);
	(void) hash_search(sent, &id, HASH_REMOVE, NULL);
	relay->nsent--;
}

/* a relay's map: kept, and the requests that waited for it judged */
static void
take_limits(Relay *relay, Reader *r)
{
	uint64		refresh = get_uint64(r);
	uint32		n = get_uint32(r);
	MemoryContext old = MemoryContextSwitchTo(relay->cxt);
	List	   *waiting = NIL;
	ListCell   *lc;

	/* a fresh context for the map, the parked requests kept */
	for (uint32 i = 0; i < (uint32) relay->nlimits; i++)
	{
		pfree((void *) relay->limits[i].schema);
		pfree((void *) relay->limits[i].table);
		if (relay->limits[i].signature_header)
			pfree((void *) relay->limits[i].signature_header);
	}
	pfree(relay->limits);
	relay->limits = palloc(sizeof(SwBodyLimit) * Max(n, 1));
	relay->nlimits = 0;
	for (uint32 i = 0; i < n; i++)
	{
		SwBodyLimit *l = &relay->limits[i];
		uint32		schema_len = get_uint32(r);
		uint32		table_len = get_uint32(r);
		uint32		header_len = get_uint32(r);

		l->limit = (size_t) get_uint64(r);
		l->table_id = get_uint32(r);
		l->database = relay->name;
		l->schema = pnstrdup(get_bytes(r, schema_len), schema_len);
		l->table = pnstrdup(get_bytes(r, table_len), table_len);
		l->signature_header = header_len == 0 ? NULL :
			pnstrdup(get_bytes(r, header_len - 1), header_len - 1);
		relay->nlimits++;
	}
	MemoryContextSwitchTo(old);
	map_changed = true;

	/* those that waited for this map or an earlier one: judged on it */
	foreach(lc, relay->parked)
	{
		Parked	   *p = lfirst(lc);

		if (p->refresh <= refresh)
		{
			waiting = lappend(waiting, p->request);
			relay->parked = foreach_delete_current(relay->parked, lc);
			pfree(p);
		}
	}
	if (waiting == NIL)
		return;
	if (map_changed && !publish_map())
		ereport(LOG,
				(errmsg("webhook server has no memory for its map of body limits"),
				 errdetail("Bodies are read before their table's max_body_bytes is checked.")));
	foreach(lc, waiting)
		judge_check(lfirst(lc), relay->dboid);
	list_free(waiting);
}

/* take what a relay sent; false if it left */
static bool
receive_from(Relay *relay)
{
	for (;;)
	{
		Size		nbytes;
		void	   *data;
		Reader		r;
		shm_mq_result res = shm_mq_receive(relay->from, &nbytes, &data, true);

		if (res == SHM_MQ_WOULD_BLOCK)
			return true;
		if (res == SHM_MQ_DETACHED)
			return false;
		if (nbytes < 1)
			continue;
		r.data = data;
		r.len = nbytes;
		r.at = 1;
		switch (((char *) data)[0])
		{
			case SW_MSG_ANSWER:
				take_answer(relay, &r);
				break;
			case SW_MSG_LIMITS:
				take_limits(relay, &r);
				break;
		}
	}
}

/* send what waits for a relay, as far as its queue takes it; false if it left */
static bool
send_to(Relay *relay)
{
	while (relay->out_head)
	{
		Outgoing   *o = relay->out_head;
		shm_mq_iovec iov[2];
		int			n = 1;
		shm_mq_result res;

		iov[0].data = o->head.data;
		iov[0].len = o->head.len;
		if (o->request && o->request->body_len > 0)
		{
			iov[1].data = o->request->body;
			iov[1].len = o->request->body_len;
			n = 2;
		}
		res = shm_mq_sendv(relay->to, iov, n, true, true);
		if (res == SHM_MQ_DETACHED)
			return false;
		if (res == SHM_MQ_WOULD_BLOCK)
			return true;
		if (o->request)
		{
			Sent	   *s = hash_search(sent, &o->id, HASH_ENTER, NULL);

			s->request = o->request;
			s->dboid = relay->dboid;
			relay->nsent++;
		}
		else
			relay->refresh_queued = false;
		relay->out_head = o->next;
		if (relay->out_head == NULL)
			relay->out_tail = NULL;
		pfree(o->head.data);
		pfree(o);
	}
	return true;
}

/*
 * The server's main thread, at each turn: keep a relay for each database
 * that takes webhook requests, send them what waits, take their answers
 * and maps.
 */
void
sw_relay_pump(void)
{
	HASH_SEQ_STATUS seq;
	Relay	   *relay;
	TimestampTz now;

	if (relays == NULL)
		return;
	follow_databases();
	now = GetCurrentTimestamp();
	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
	{
		pid_t		pid;
		bool		stopped;

		if (relay->seg == NULL)
		{
			if (!relay->wanted || relay->paused || now < relay->start_after)
				continue;

			/*
			 * Said before it starts: once started, the relay says it
			 * listens, and that must not be overwritten.
			 */
			sw_database_set_webhook_writer(relay->dboid, 0, "starting", "");
			if (!start_relay(relay))
			{
				if (!relay->short_of_workers)
					ereport(WARNING,
							(errmsg("could not start the webhook worker of database \"%s\"",
									relay->name),
							 errdetail("No background worker slot is free."),
							 errhint("Raise max_worker_processes.")));
				relay->short_of_workers = true;
				relay->start_after = TimestampTzPlusMilliseconds(now, 1000);
				sw_database_set_webhook_writer(relay->dboid, 0,
											   "waiting for a background worker",
											   "max_worker_processes are all in use");
				/* what waited for it cannot wait longer */
				lose_relay(relay, false);
				continue;
			}
			relay->short_of_workers = false;
		}
		/* what it sent before it stopped is taken first */
		stopped = GetBackgroundWorkerPid(relay->handle, &pid) == BGWH_STOPPED;
		if (!receive_from(relay) || !send_to(relay) || stopped)
			lose_relay(relay, true);
	}
	if (map_changed && !publish_map())
		ereport(LOG,
				(errmsg("webhook server has no memory for its map of body limits"),
				 errdetail("Bodies are read before their table's max_body_bytes is checked.")));
}

/*
 * Send what waits for the relays now (asks for a fresh map queued since
 * the last turn), as far as their queues take it.
 */
void
sw_relay_flush(void)
{
	HASH_SEQ_STATUS seq;
	Relay	   *relay;

	if (relays == NULL)
		return;
	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
		if (relay->seg && relay->out_head && !send_to(relay))
			lose_relay(relay, true);
}

/*
 * The server stops, and sends the relays nothing more: what waits to go
 * to them is answered 503, and it waits, at most SW_RELAY_STOP_WAIT_MS,
 * for their answers to what they were sent.  (At a shutdown the relays,
 * told to stop too, answer 503 what they did not commit.)  What is still
 * unanswered then has its connection closed by sw_relay_stop_all().
 */
void
sw_relay_finish(void)
{
	TimestampTz deadline;

	if (relays == NULL)
		return;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SW_RELAY_STOP_WAIT_MS);
	for (;;)
	{
		HASH_SEQ_STATUS seq;
		Relay	   *relay;
		bool		waiting = false;
		int			rc;

		hash_seq_init(&seq, relays);
		while ((relay = hash_seq_search(&seq)) != NULL)
		{
			pid_t		pid;
			bool		stopped;

			if (relay->seg == NULL)
				continue;
			unsend_all(relay);
			if (relay->nsent == 0)
				continue;
			stopped = GetBackgroundWorkerPid(relay->handle, &pid) == BGWH_STOPPED;
			if (!receive_from(relay) || stopped)
				lose_relay(relay, false);
			else if (relay->nsent > 0)
				waiting = true;
		}
		if (!waiting || GetCurrentTimestamp() >= deadline)
			break;
		rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH,
					   10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		if (rc & WL_POSTMASTER_DEATH)
			break;
	}
}

/*
 * The server stops: what the relays hold is answered (503, or its
 * connection closed if it may have been written), and they are left.
 */
void
sw_relay_stop_all(void)
{
	HASH_SEQ_STATUS seq;
	Relay	   *relay;

	if (relays == NULL)
		return;
	hash_seq_init(&seq, relays);
	while ((relay = hash_seq_search(&seq)) != NULL)
		lose_relay(relay, false);
}

/*
 * The relay's side
 */

/*
 * The relay leaves: the server is told, by the queues' end; the database
 * has no writer of its requests now, unless the relay of a new server
 * took its place.
 */
static void
relay_detach(int code, Datum arg)
{
	sw_database_clear_webhook_writer(MyDatabaseId, MyProcPid);
}

/*
 * A relay attaches to the segment the server made for it: returns the
 * database it serves.  A segment that is gone (the server left) ends the
 * relay.
 */
Oid
sw_relay_attach(uint32 handle)
{
	RelaySegment *header;

	relay_seg = dsm_attach((dsm_handle) handle);
	if (relay_seg == NULL)
		proc_exit(0);			/* the server left */
	dsm_pin_mapping(relay_seg);
	header = dsm_segment_address(relay_seg);
	if (header->magic != SW_RELAY_MAGIC)
		elog(FATAL, "bad magic number in the webhook relay's segment");
	return header->dboid;
}

/*
 * Connected to its database, the relay takes its ends of the queues, and
 * says it writes the database's requests.
 */
void
sw_relay_connect(void)
{
	char	   *base = dsm_segment_address(relay_seg);
	shm_mq	   *in = (shm_mq *) (base + SW_RELAY_QUEUES_AT);
	shm_mq	   *out = (shm_mq *) (base + SW_RELAY_QUEUES_AT + SW_RELAY_QUEUE_SIZE);
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

	shm_mq_set_receiver(in, MyProc);
	shm_mq_set_sender(out, MyProc);
	relay_in = shm_mq_attach(in, relay_seg, NULL);
	relay_out = shm_mq_attach(out, relay_seg, NULL);
	initStringInfo(&last_limits);
	MemoryContextSwitchTo(old);
	sw_database_set_webhook_writer(MyDatabaseId, MyProcPid, "listening", "");
	before_shmem_exit(relay_detach, (Datum) 0);
}

/*
 * Send a message to the server, waiting for room; while the relay exits,
 * without waiting (what does not fit is not sent, and nothing after it).
 */
static void
send_message(const char *data, Size len)
{
	shm_mq_result res;

	if (relay_out == NULL || relay_broken)
		return;
	if (proc_exit_inprogress)
	{
		if (relay_sending)
		{
			relay_broken = true;	/* a message was cut: no more */
			return;
		}
		res = shm_mq_send(relay_out, len, data, true, true);
		if (res != SHM_MQ_SUCCESS)
			relay_broken = true;
		return;
	}
	relay_sending = true;
	res = shm_mq_send(relay_out, len, data, false, true);
	relay_sending = false;
	if (res != SHM_MQ_SUCCESS)
		relay_broken = true;	/* the server left */
}

/* a request, as the server sent it, in one allocation */
static SwRequest *
decode_request(Reader *r)
{
	uint64		id = get_uint64(r);
	int64		received_ms = (int64) get_uint64(r);
	uint32		path_len = get_uint32(r);
	uint32		query_len = get_uint32(r);
	uint32		nheaders = get_uint32(r);
	uint64		body_len = get_uint64(r);
	Size		size;
	RelayedRequest *rr;
	SwRequest  *q;
	char	   *s;

	if (body_len > SW_WEBHOOK_MAX_BODY || nheaders > r->len)
		elog(ERROR, "webhook relay message is malformed");
	size = MAXALIGN(sizeof(RelayedRequest)) +
		MAXALIGN(sizeof(SwRequestHeader) * Max(nheaders, 1)) +
		(r->len - r->at) + nheaders * 2 + 8;
	rr = MemoryContextAllocHuge(TopMemoryContext, size);
	memset(rr, 0, sizeof(RelayedRequest));
	q = &rr->request;
	rr->id = id;
	q->received_ms = received_ms;
	q->headers = (SwRequestHeader *) ((char *) rr + MAXALIGN(sizeof(RelayedRequest)));
	s = (char *) q->headers + MAXALIGN(sizeof(SwRequestHeader) * Max(nheaders, 1));
	q->method = s;
	s = stpcpy(s, query_len == SW_NO_VALUE ? "POST" : "GET") + 1;
	q->path = s;
	memcpy(s, get_bytes(r, path_len), path_len);
	s[path_len] = '\0';
	s += path_len + 1;
	if (query_len != SW_NO_VALUE)
	{
		q->query = s;
		memcpy(s, get_bytes(r, query_len), query_len);
		s[query_len] = '\0';
		s += query_len + 1;
	}
	for (uint32 i = 0; i < nheaders; i++)
	{
		uint32		name_len = get_uint32(r);
		uint32		value_len = get_uint32(r);

		q->headers[i].name = s;
		memcpy(s, get_bytes(r, name_len), name_len);
		s[name_len] = '\0';
		s += name_len + 1;
		if (value_len == SW_NO_VALUE)
			q->headers[i].value = NULL;
		else
		{
			q->headers[i].value = s;
			memcpy(s, get_bytes(r, value_len), value_len);
			s[value_len] = '\0';
			s += value_len + 1;
		}
	}
	q->nheaders = (int) nheaders;
	q->body = s;
	memcpy(s, get_bytes(r, body_len), body_len);
	s[body_len] = '\0';
	q->body_len = body_len;
	q->body_cap = body_len + 1;
	return q;
}

/*
 * Take the requests the server sent (a list, through next; NULL if none)
 * and its asks for a fresh map.  *server_gone is set when the server has
 * left: the relay then leaves, once it has written what it holds.
 */
SwRequest *
sw_relay_take(bool *server_gone)
{
	SwRequest  *head = NULL;
	SwRequest **tail = &head;

	for (;;)
	{
		Size		nbytes;
		void	   *data;
		Reader		r;
		shm_mq_result res = shm_mq_receive(relay_in, &nbytes, &data, true);

		if (res == SHM_MQ_WOULD_BLOCK)
			break;
		if (res == SHM_MQ_DETACHED)
		{
			*server_gone = true;
			break;
		}
		if (nbytes < 1)
			continue;
		r.data = data;
		r.len = nbytes;
		r.at = 1;
		switch (((char *) data)[0])
		{
			case SW_MSG_REQUEST:
				*tail = decode_request(&r);
				(*tail)->next = NULL;
				tail = &(*tail)->next;
				break;
			case SW_MSG_REFRESH:
				{
					uint64		asked = get_uint64(&r);

					refresh_wanted = Max(refresh_wanted, asked);
					break;
				}
		}
	}
	return head;
}

/*
 * Answer a request taken with sw_relay_take() (status 0: close its
 * connection without an answer); it is freed.
 */
void
sw_relay_answer(SwRequest *request, int status, const char *text)
{
	RelayedRequest *rr = (RelayedRequest *) request;
	StringInfoData msg;

	initStringInfo(&msg);
	appendStringInfoChar(&msg, SW_MSG_ANSWER);
	put_uint64(&msg, rr->id);
	put_uint32(&msg, (uint32) status);
	appendStringInfoChar(&msg, request->answer_json ? 'j' : 't');
	if (text)
		appendStringInfoString(&msg, text);
	appendStringInfoChar(&msg, '\0');
	send_message(msg.data, msg.len);
	pfree(msg.data);
	pfree(rr);
}

/*
 * Send the relay's map to the server: its database's webhook sources and
 * their limits, as an answer to the last ask for a fresh map.
 */
void
sw_relay_send_limits(const SwBodyLimit *limits, int n)
{
	resetStringInfo(&last_limits);
	appendStringInfoChar(&last_limits, SW_MSG_LIMITS);
	put_uint64(&last_limits, refresh_wanted);
	put_uint32(&last_limits, (uint32) n);
	for (int i = 0; i < n; i++)
	{
		const char *header = limits[i].signature_header;

		put_uint32(&last_limits, (uint32) strlen(limits[i].schema));
		put_uint32(&last_limits, (uint32) strlen(limits[i].table));
		/* a table's signature header, or none: a length one more, or 0 */
		put_uint32(&last_limits, header ? (uint32) strlen(header) + 1 : 0);
		put_uint64(&last_limits, (uint64) limits[i].limit);
		put_uint32(&last_limits, (uint32) limits[i].table_id);
		appendStringInfoString(&last_limits, limits[i].schema);
		appendStringInfoString(&last_limits, limits[i].table);
		if (header)
			appendStringInfoString(&last_limits, header);
	}
	refresh_answered = refresh_wanted;
	send_message(last_limits.data, last_limits.len);
}

/*
 * Has the server left (or closed the relay's queues)?  Then it can answer
 * nothing the relay writes from now on.
 */
bool
sw_relay_server_left(void)
{
	RelaySegment *header;

	if (relay_seg == NULL)
		return true;
	header = dsm_segment_address(relay_seg);
	return pg_atomic_read_u32(&header->server_left) != 0;
}

/* did the server ask for a fresh map that was not sent yet? */
bool
sw_relay_refresh_wanted(void)
{
	return refresh_wanted > refresh_answered;
}

/*
 * After the relay looked at its catalog for an ask: the map goes again,
 * as it was, if nothing had changed (the ask is answered all the same).
 */
void
sw_relay_refresh_answered(void)
{
	if (refresh_wanted <= refresh_answered || last_limits.len == 0)
		return;
	memcpy(last_limits.data + 1, &refresh_wanted, sizeof(uint64));
	refresh_answered = refresh_wanted;
	send_message(last_limits.data, last_limits.len);
}

/* the relay leaves: its ends of the queues go */
void
sw_relay_leave(void)
{
	if (relay_in)
		shm_mq_detach(relay_in);
	if (relay_out)
		shm_mq_detach(relay_out);
	relay_in = relay_out = NULL;
}
