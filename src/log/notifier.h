/*-------------------------------------------------------------------------
 *
 * notifier.h
 *		  Announcing the new upper of sources to listeners
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/notifier.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_NOTIFIER_H
#define SW_NOTIFIER_H

extern void sw_notifier_shmem_request(void);
extern void sw_notifier_shmem_startup(void);
extern void sw_notifier_wake(Oid dboid, Oid relid);
extern void sw_notifier_attach_launcher(void);
extern bool sw_notifier_start_requested(void);
extern void sw_notifier_forget_database(Oid dboid);

#endif							/* SW_NOTIFIER_H */
