/*-------------------------------------------------------------------------
 *
 * webhook_server.h
 *		  The webhook worker's HTTP server: libmicrohttpd's threads, which
 *		  never call PostgreSQL, and the requests they hand over
 *
 * See doc/internals.md, "Workers and processes" (Webhook server).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_server.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WEBHOOK_SERVER_H
#define SW_WEBHOOK_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The largest body the server reads.  A table's max_body_bytes is checked
 * before the body too, from the limits the main thread publishes
 * (sw_webhook_server_publish_limits), and again when the request is written.
 */
#define SW_WEBHOOK_MAX_BODY		(64 * 1024 * 1024)

/* answers that the server's threads and the main thread both give */
#define SW_WEBHOOK_NOT_FOUND_TEXT	"no webhook source table at this address\n"
#define SW_WEBHOOK_POST_ONLY_TEXT	"only POST is allowed\n"
#define SW_WEBHOOK_TOO_LARGE_TEXT	"the body is larger than this table takes\n"
#define SW_WEBHOOK_SHUTTING_DOWN_TEXT	"the server is shutting down\n"
#define SW_WEBHOOK_LOCKED_TEXT	"the table is being altered; send it again\n"
#define SW_WEBHOOK_RESTORING_TEXT	"the table is being restored; send it again\n"
#define SW_WEBHOOK_MOVED_TEXT	"the table was moved: send to its new address\n"

/*
 * The most requests queued or being written at once; more get 429.  Below
 * the connections one address may hold (webhook_server.c), so that it can
 * be reached.
 */
#define SW_WEBHOOK_MAX_IN_FLIGHT	64

/*
 * The most body bytes all connections together may hold, past the first
 * SW_WEBHOOK_BODY_ROOM of each body, which every connection has (so that
 * the server holds at most SW_WEBHOOK_MAX_BUFFERED and that much for each
 * connection)
 */
#define SW_WEBHOOK_MAX_BUFFERED	(256 * 1024 * 1024)
#define SW_WEBHOOK_BODY_ROOM	(64 * 1024)

/*
 * Connections kept at once, in all and from one address (for IPv6, one
 * /64); past either, an old one is closed, of the address that has the
 * most (webhook_server.c).  While
 * they close, libmicrohttpd may hold SW_WEBHOOK_CLOSING_CONNECTIONS more.
 */
#define SW_WEBHOOK_MAX_CONNECTIONS	512
#define SW_WEBHOOK_MAX_PER_ADDRESS	(SW_WEBHOOK_MAX_CONNECTIONS / 4)
#define SW_WEBHOOK_CLOSING_CONNECTIONS	64

/* the file descriptors the server opens at most: connections, and 8 more */
#define SW_WEBHOOK_SERVER_FDS \
	(SW_WEBHOOK_MAX_CONNECTIONS + SW_WEBHOOK_CLOSING_CONNECTIONS + 8)

/* what the published map says of a request's address */
#define SW_WEBHOOK_NO_MAP		(-1)	/* there is none */
#define SW_WEBHOOK_UNKNOWN		0	/* no webhook source there */
#define SW_WEBHOOK_KNOWN		1	/* a webhook source */
#define SW_WEBHOOK_UNSIGNED		2	/* one whose signature header it lacks */

/* one request header */
typedef struct SwRequestHeader
{
	char	   *name;			/* first, for sw_find_header() */
	char	   *value;
} SwRequestHeader;

/*
 * A request the server hands to the worker's main thread, complete, and
 * its answer.  All of it is malloc'd by the server's threads and freed by
 * them once answered: the main thread reads it and sets status and text.
 */
typedef struct SwRequest
{
	struct SwRequest *next;		/* in the queue */
	void	   *connection;		/* libmicrohttpd's, suspended */
	char	   *method;
	char	   *path;			/* as sent, still percent-encoded */
	char	   *query;			/* of a GET, as sent (but '+' as ' '), or NULL */
	char	   *body;			/* NUL-terminated, beyond body_len */
	size_t		body_len;
	size_t		body_cap;
	int			refusal;		/* a status to answer once the body is in, 0 */
	int			nheaders;
	SwRequestHeader *headers;
	bool		headers_lost;	/* no memory to keep them all */
	int64_t		received_ms;	/* ms since the Unix epoch */

	/* the body limit of the table the path names, for the server's threads */
	size_t		limit;			/* the most body bytes it may have */
	bool		limit_sure;		/* the main thread looked, or none takes more */
	bool		sized;			/* Content-Length says how long the body is */
	uint64_t	declared;		/* and that is how long; or the bytes of a body
								 * of unknown length when it waited */
	int			checking;		/* waits for the main thread to look: where */
	int			check_status;	/* what the main thread answered that, or 0 */

	/* the answer */
	bool		answered;
	int			status;
	char	   *text;			/* NULL if there was no memory for it */
	bool		answer_json;	/* the text is JSON, not plain text */
} SwRequest;

extern bool sw_webhook_server_tls_supported(void);
extern int	sw_webhook_hex_digit(char c);
extern bool sw_webhook_lacks_headers(const char *names,
									 bool (*has) (const void *arg, const char *name,
												  size_t len),
									 const void *arg);
extern bool sw_webhook_split_path(const char *path, char *buf, const char **names,
								  size_t *lens);
extern const char *sw_webhook_server_start(const char *host, int port,
										   const char *cert_pem, const char *key_pem,
										   int fds, int *connections);
extern void sw_webhook_server_stop(void);
extern int	sw_webhook_server_wake_fd(void);
extern SwRequest *sw_webhook_server_take(void);
extern void sw_webhook_server_answer(SwRequest *request, int status, const char *text);
extern void sw_webhook_server_hang_up(SwRequest *request);

/*
 * A webhook source's address (its names, not encoded), max_body_bytes and
 * signature_header (NULL if none)
 */
typedef struct SwBodyLimit
{
	const char *database;
	const char *schema;
	const char *table;
	size_t		limit;
	const char *signature_header;
	unsigned int table_id;		/* the main thread's, for its verdicts */
} SwBodyLimit;

extern bool sw_webhook_server_publish_limits(const SwBodyLimit *limits, int n);
extern SwRequest *sw_webhook_server_take_checks(void);
extern int	sw_webhook_server_verdict(SwRequest *request, unsigned int *table_id);
extern int	sw_webhook_server_knows(const char *path);
extern int	sw_webhook_server_find(const SwRequest *request, unsigned int *table_id);
extern void sw_webhook_server_checked(SwRequest *request, int status);

#endif							/* SW_WEBHOOK_SERVER_H */
