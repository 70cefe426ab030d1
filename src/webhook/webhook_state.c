/*-------------------------------------------------------------------------
 *
 * webhook_state.c
 *		  What the webhook worker as a whole holds, which its files share
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_state.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "webhook/webhook.h"

char *wh_database_name = NULL;	/* ours; NULL: none */
bool wh_relay_mode = false; /* a relay: requests come from the server */
bool wh_server_gone = false;	/* (a relay) the server left */
SwRequest *wh_in_hand = NULL;	/* taken, not written yet */
SwRequest *wh_writing = NULL;	/* being written, not answered yet */
MemoryContext wh_request_cxt = NULL;	/* what writing a request takes */
SwRequest *wh_checking = NULL;	/* taken for a look at their limit */

/*
 * Changes taken in that may concern a group's requests, counted: of a
 * cached table, of the sources' addresses, of servers, functions, roles.
 */
uint64 wh_cache_changes = 0;
