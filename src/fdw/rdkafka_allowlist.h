/*-------------------------------------------------------------------------
 *
 * rdkafka_allowlist.h
 *		  The librdkafka properties that servers and user mappings may set:
 *		  what rdkafka_allowlist.c gives fdw_options.c
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/rdkafka_allowlist.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_FDW_RDKAFKA_ALLOWLIST_H
#define SW_FDW_RDKAFKA_ALLOWLIST_H

#include "nodes/parsenodes.h"

#include "options/options.h"

extern void sw_rdkafka_check_property(DefElem *def, Oid context);
extern bool sw_rdkafka_may_be_secret(const char *name);

#endif							/* SW_FDW_RDKAFKA_ALLOWLIST_H */
