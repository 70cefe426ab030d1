/*-------------------------------------------------------------------------
 *
 * webhook.h
 *		  The webhook worker's own header: what its files and the relays
 *		  share (the HTTP server's threads have webhook_server.h)
 *
 * webhook_relay.c: webhook requests to other databases: the webhook
 * server hands them to a webhook worker of their database, and answers
 * with its answer.
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

#include "webhook/webhook_server.h"

/* what a request is answered when its database's worker cannot write it now */
#define SW_WEBHOOK_UNAVAILABLE_TEXT	"the server could not write the request now; send it again\n"

/* the server's side (its main thread) */
extern void sw_relay_server_start(Oid own_dboid, const char *own_database);
extern SwRequest *sw_relay_route(SwRequest *requests);
extern SwRequest *sw_relay_route_checks(SwRequest *checks);
extern bool sw_relay_set_own_limits(const SwBodyLimit *limits, int n);
extern void sw_relay_pump(void);
extern void sw_relay_flush(void);
extern void sw_relay_finish(void);
extern void sw_relay_stop_all(void);

/* webhook_worker.c: judge a request that waited for a look at its limit */
extern void sw_webhook_judge_check(SwRequest *request, Oid dboid);

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

#endif							/* SW_WEBHOOK_H */
