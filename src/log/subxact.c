/*-------------------------------------------------------------------------
 *
 * subxact.c
 *		  Ending a subtransaction, and going back to where it began
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Ingestion).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/subxact.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "log/log.h"

/*
 * After a subtransaction begun in memory context cxt and resource owner
 * owner went through: release it, and go back to them.
 */
void
sw_release_sub(MemoryContext cxt, ResourceOwner owner)
{
	ReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}

/*
 * In the PG_CATCH of a subtransaction begun in memory context cxt and
 * resource owner owner, once the error is copied and flushed: roll the
 * subtransaction back, and go back to them.
 */
void
sw_roll_back_sub(MemoryContext cxt, ResourceOwner owner)
{
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
}
