/*-------------------------------------------------------------------------
 *
 * deliveries.h
 *		  Idempotency keys of webhook deliveries
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/deliveries.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_DELIVERIES_H
#define SW_DELIVERIES_H

#include "common/sha2.h"
#include "utils/snapshot.h"

/* the longest idempotency key taken, in bytes */
#define SW_DELIVERY_KEY_MAX		255

/* what is known of a delivery's key */
typedef enum SwDeliveryState
{
	SW_DELIVERY_NEW,			/* not seen: write it */
	SW_DELIVERY_REPEAT,			/* written, with the same body */
	SW_DELIVERY_CONFLICT,		/* written, with another body */
	SW_DELIVERY_CHANGING		/* another transaction is deleting it */
} SwDeliveryState;

extern PGDLLEXPORT SwDeliveryState sw_delivery_lookup(Oid relid, const char *key,
													  const uint8 *body_sha256, int32 *rows);
extern PGDLLEXPORT void sw_delivery_insert(Oid relid, const char *key, int64 received_ms,
										   const uint8 *body_sha256, int32 rows);
extern int64 sw_deliveries_forget(Oid relid, int64 before);

#endif							/* SW_DELIVERIES_H */
