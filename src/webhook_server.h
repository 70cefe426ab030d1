/*-------------------------------------------------------------------------
 *
 * webhook_server.h
 *		  The webhook worker's HTTP server: libmicrohttpd's threads, which
 *		  never call PostgreSQL, and the requests they hand over
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook_server.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_WEBHOOK_SERVER_H
#define SW_WEBHOOK_SERVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the largest body the server reads; a table's max_body_bytes is checked after */
#define SW_WEBHOOK_MAX_BODY		(64 * 1024 * 1024)

/*
 * The most requests queued or being written at once; more get 429.  Below
 * the connections one address may hold (webhook_server.c), so that it can
 * be reached.
 */
#define SW_WEBHOOK_MAX_IN_FLIGHT	64

/* the most body bytes all connections together may hold */
#define SW_WEBHOOK_MAX_BUFFERED	(256 * 1024 * 1024)

/* one request header */
typedef struct SwRequestHeader
{
	char	   *name;
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
	char	   *body;			/* NUL-terminated, beyond body_len */
	size_t		body_len;
	size_t		body_cap;
	int			refusal;		/* a status to answer once the body is in, 0 */
	int			nheaders;
	SwRequestHeader *headers;
	int64_t		received_ms;	/* ms since the Unix epoch */

	/* the answer */
	bool		answered;
	int			status;
	char	   *text;			/* NULL if there was no memory for it */
} SwRequest;

extern bool sw_webhook_server_tls_supported(void);
extern const char *sw_webhook_server_start(const char *host, int port,
										   const char *cert_pem, const char *key_pem);
extern void sw_webhook_server_stop(void);
extern int	sw_webhook_server_wake_fd(void);
extern SwRequest *sw_webhook_server_take(void);
extern void sw_webhook_server_answer(SwRequest *request, int status, const char *text);

#endif							/* SW_WEBHOOK_SERVER_H */
