/*-------------------------------------------------------------------------
 *
 * source_writes_test.c
 *		  The tests' own module: doors into source_writes for its tests
 *
 * The functions of this library (test_write.c, test_decode.c) let a test
 * write batches with any origin, as the owner of a table, and decode
 * messages, as the workers do.  They are for tests only: test/run builds
 * and installs this library, and the extension's `make install` does not.
 * It calls into source_writes, which must be loaded before it.
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
