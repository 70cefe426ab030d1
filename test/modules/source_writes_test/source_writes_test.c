/*-------------------------------------------------------------------------
 *
 * source_writes_test.c
 *		  The tests' own module: doors into source_writes for its tests
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  test/modules/source_writes_test/source_writes_test.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"

PG_MODULE_MAGIC;
