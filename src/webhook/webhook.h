/*-------------------------------------------------------------------------
 *
 * webhook.h
 *		  The webhook worker's own header: what its files and the relays
 *		  share (the HTTP server's threads have webhook_server.h)
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WEBHOOK_H
#define SW_WEBHOOK_H

#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/timeout.h"

#include "ingest/ingest.h"
#include "options/options.h"
#include "webhook/signature.h"
#include "webhook/webhook_server.h"

/* what a request is answered when its database's worker cannot write it now */
#define SW_WEBHOOK_UNAVAILABLE_TEXT	"the server could not write the request now; send it again\n"

/* judges a request that waited for a look at its limit (webhook_limits.c) */
typedef void (*SwJudgeCheck) (SwRequest *request, Oid dboid);

/* the server's side (its main thread) */
extern void sw_relay_server_start(Oid own_dboid, const char *own_database,
								  SwJudgeCheck judge);
extern SwRequest *sw_relay_route(SwRequest *requests);
extern SwRequest *sw_relay_route_checks(SwRequest *checks);
extern bool sw_relay_set_own_limits(const SwBodyLimit *limits, int n);
extern void sw_relay_pump(void);
extern void sw_relay_flush(void);
extern void sw_relay_finish(void);
extern void sw_relay_stop_all(void);


/* the relay's side */
extern Oid	sw_relay_attach(uint32 handle);
extern void sw_relay_connect(void);
extern SwRequest *sw_relay_take(bool *server_gone);
extern void sw_relay_answer(SwRequest *request, int status, const char *text);
extern void sw_relay_send_limits(const SwBodyLimit *limits, int n);
extern void sw_relay_refresh_answered(void);
extern bool sw_relay_refresh_wanted(void);
extern bool sw_relay_server_left(void);
extern void sw_relay_leave(void);

/*
 * The webhook worker's files: webhook_worker.c and those it is cut into.
 */

/* room for the part of a body being written ("element 12 of the body") */
#define SW_WHERE_BYTES			64

/* the requests of a group: taken together, written in one transaction */
typedef struct GroupRequest
{
	SwRequest  *request;
	Oid			relid;			/* the source it is for, if any */
	struct TableEntry *table;	/* where it goes, if it can be written */
	int			status;
	char	   *text;
	const char *note;			/* for the log and the sources view, or NULL */
	bool		refused;		/* by its checks: to be logged */
	bool		json;			/* a 200's text is JSON (a handshake's) */
} GroupRequest;

/*
 * What the worker keeps of a webhook source table from one group to the
 * next: its ingestion (options, decoder), made when a group first writes
 * to the table and made again after the table, its server or the cache
 * changed (invalidation callbacks).  While a group writes to the table,
 * the table is open and the ingestion's batch begun: one writer for all
 * the group's requests to it.
 */
typedef struct TableEntry
{
	Oid			relid;			/* the hash key */
	bool		valid;			/* false: to be made again */
	MemoryContext cxt;			/* the ingestion's memory */
	SwIngest   *ing;			/* NULL until made */
	Relation	ftrel;			/* open in the current group, else NULL */
	bool		begun;			/* its batch begun in the current group */
	int			careful;		/* writes to make a request at a time */
	struct TableEntry *next_open;	/* the group's other open tables */
} TableEntry;

/*
 * The address a group's requests were sent to, resolved once a group:
 * its table, opened, or the answer to give each request sent there.
 */
typedef struct GroupPath
{
	const char *path;
	Oid			relid;			/* the source it names, if any */
	TableEntry *table;			/* NULL: answer status and text */
	int			status;
	char	   *text;
	bool		look_again;		/* in a later round: none, or locked */
	bool		signature_read; /* signature_header read (unopened table) */
	char	   *signature_header;	/* the table's, or NULL */
} GroupPath;

/*
 * A request without its table's signature header is answered as one to no
 * table (404, SW_WEBHOOK_NOT_FOUND_TEXT), so that who does not sign cannot
 * tell which signed tables there are; the sources view and the log say
 * why.
 */
#define SW_HANDSHAKE_NOTE "a handshake: answered, and no row written"
#define SW_UNSIGNED_NOTE "the request has no signature header: it was answered as if there were no table at its address"
#define SW_UNSIGNED_DETAIL "The request has no signature header: it was answered as if there were no table at its address."
#define SW_NO_VERIFY_TOKEN_NOTE "the owner's user mapping has no verify_token for Meta's subscription handshake"
#define SW_NO_VERIFY_TOKEN_DETAIL "The owner's user mapping for the table's server has no verify_token for Meta's subscription handshake."

/* the most tables whose ingestion the worker keeps between groups */
#define SW_WEBHOOK_KEPT_TABLES	128

/* what a request, or a table's preparation, that ran out of time is told */
#define SW_TIMED_OUT_TEXT "the request took longer than the server gives one; send it again\n"
#define SW_TIMED_OUT_LOG "it took longer than source_writes.webhook_request_timeout"

/*
 * The most requests written in one transaction.  Each may take a
 * subtransaction ID of its own (when it is written alone, or again after
 * a request written with it failed): more than the cache of them that
 * every snapshot reads would send snapshots of the whole cluster to
 * pg_subtrans meanwhile.  (The server's SW_WEBHOOK_MAX_IN_FLIGHT keeps
 * groups no larger today.)
 */
#define SW_WEBHOOK_GROUP		PGPROC_MAX_CACHED_SUBXIDS

/* webhook_state.c */
extern SwRequest *wh_checking;
extern char *wh_database_name;
extern SwRequest *wh_in_hand;
extern bool wh_relay_mode;
extern MemoryContext wh_request_cxt;
extern bool wh_server_gone;
extern SwRequest *wh_writing;
extern uint64 wh_cache_changes;

/* webhook_tables.c */
extern TableEntry *wh_open_tables;
extern HTAB *wh_tables;
extern bool wh_tables_changed;
extern void make_tables(void);
extern void forget_tables(void);
extern void close_tables(void);
extern void forget_open_tables(void);
extern GroupPath *group_path(const char *path, List **paths);
extern bool lacks_signature_header(GroupPath *p, SwRequest *r);

/* webhook_request.c */
extern bool wh_parsing_body;
extern int	write_body(SwRequest *r, Relation ftrel, SwIngest *ing, const char *key,
					   char *where);
extern const char *request_header(SwRequest *r, const char *name);
extern bool request_lacks_headers(SwRequest *r, const char *names);
extern int	check_request(SwRequest *r, const SwSourceTable *st, char **text);
extern int	decode_body(SwRequest *r, const SwSourceTable *st, SwRequest *view,
						char **text);
extern int	check_signature(SwRequest *r, Relation ftrel,
							const SwSourceTable *st, char **text);
extern int	check_idempotency(SwRequest *r, Oid relid, const SwSourceTable *st,
							  const char **key, uint8 *hash, char **text);

/* webhook_handshake.c */
typedef enum SwJsonField
{
	SW_JSON_FOUND,
	SW_JSON_ABSENT,
	SW_JSON_NOT_SCALAR,
	SW_JSON_INVALID
} SwJsonField;

extern SwJsonField sw_json_body_field(const char *body, size_t len,
									  const char *const *path, int npath,
									  char **value);
extern int	answer_handshake(SwRequest *r, Relation ftrel,
							 const SwSourceTable *st, char **text, bool *json);
extern int	answer_subscription(SwRequest *r, Relation ftrel,
								const SwSourceTable *st, char **text,
								const char **note);

/* webhook_group.c */
extern void write_group(SwRequest *requests, MemoryContext group_cxt);

/* webhook_answers.c */
extern SwRequest *take_requests(void);
extern void answer_request(SwRequest *r, int status, const char *text);
extern void hang_up_request(SwRequest *r);
extern void answer_unavailable(SwRequest *r);
extern void resume_checked(SwRequest *r, int status);
extern void report_and_abort(MemoryContext cxt);
extern int	error_answer(ErrorData *edata, bool in_body,
						 const char *decoder_where, const char *piece,
						 char **text);
extern int	refusal_level(Oid relid, int64 *unlogged);
extern void log_refusal(Oid relid, const char *path, int status,
						const char *message, const char *detail);
extern void log_refused(GroupRequest *g);

/* webhook_limits.c */
extern void sw_webhook_judge_check(SwRequest *request, Oid dboid);
extern bool wh_limits_stale;
extern TimeoutId wh_request_timeout;
extern void request_timeout_handler(void);
extern void start_request_clock(void);
extern bool stop_request_clock(void);
extern void check_request_clock(void);
extern bool cancelled_by_clock(ErrorData *edata, bool timed_out);
extern void limits_invalidated(Datum arg, int cacheid, uint32 hashvalue);
extern void refresh_limits(bool always);
extern bool answer_checks(void);

/* webhook_tls.c */
extern void start_configured_server(void);
extern bool reconfigure_server(void);

#endif							/* SW_WEBHOOK_H */
