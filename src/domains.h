/*-------------------------------------------------------------------------
 *
 * domains.h
 *		  Domain constraints over the current rows of source tables
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/domains.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_DOMAINS_H
#define SW_DOMAINS_H

#include "utils/relcache.h"

extern void sw_domain_check_values(Relation current, AttrNumber hattnum, Oid domain);
extern void sw_domain_altered(Oid domain);

#endif							/* SW_DOMAINS_H */
