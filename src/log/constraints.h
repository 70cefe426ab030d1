/*-------------------------------------------------------------------------
 *
 * constraints.h
 *		  Constraints over the current rows of source tables
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/constraints.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_CONSTRAINTS_H
#define SW_CONSTRAINTS_H

#include "utils/relcache.h"

extern void sw_domain_check_values(Relation current, AttrNumber hattnum, Oid domain);
extern void sw_domain_altered(Oid domain);
extern void sw_constraints_check(Relation ftrel);

#endif							/* SW_CONSTRAINTS_H */
