/*-------------------------------------------------------------------------
 *
 * launcher.h
 *		  The source_writes background worker of a database
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/launcher.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_LAUNCHER_H
#define SW_LAUNCHER_H

extern void sw_launcher_register(void);

#endif							/* SW_LAUNCHER_H */
