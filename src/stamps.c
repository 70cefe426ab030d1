/*-------------------------------------------------------------------------
 *
 * stamps.c
 *		  Handing out batch timestamps in shared memory
 *
 * The controller gives a committing batch the timestamp
 *
 *		ts = GREATEST(now in ms, the source's last timestamp + 1)
 *
 * and records with it the batches of the source that were given one and
 * have not finished committing (catalog.c says what readers make of
 * them).  With the library preloaded, both live here, in a slot per source
 * in shared memory, under one lightweight lock held for a few
 * instructions: writers of a source wait for each other only that long,
 * never for each other's commit record to be flushed, so their commits
 * reach disk together.  A transaction's batches leave the slots' lists of
 * committing batches once it has committed or aborted (sw_stamps_done(),
 * from the controller's callback after commit, when the commit is visible
 * to every new snapshot).
 *
 * A slot is filled from the catalog the first time a source is stamped
 * after the server started, or after its slot was taken for another
 * source: under the source's heavyweight stamp lock, from its newest batch
 * rows, once the batches still committing have finished.  Without shared
 * memory, or when no slot can be had, the controller stamps with the
 * catalog alone, holding that lock until the batch row is written (see
 * controller.c); a slot is only installed under that lock, and is only
 * taken for another source when no batch it stamped is still committing,
 * so the two ways never mix for one source.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/stamps.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"

#include "stamps.h"

/* sources with a slot at once */
#define SW_STAMP_SLOTS			1024

typedef struct SwStampKey
{
	Oid			dboid;
	Oid			relid;
} SwStampKey;

/* the timestamps of one source */
typedef struct SwStampSlot
{
	SwStampKey	key;			/* hash key */
	int64		last_ts;		/* the newest timestamp given */
	uint64		used;			/* when it was last used, for reuse */
	int			pins;			/* backends about to stamp with it */
	int			ncommitting;
	SwPending	committing[FLEXIBLE_ARRAY_MEMBER];	/* MaxBackends of them */
} SwStampSlot;

typedef struct SwStampShared
{
	LWLock	   *lock;			/* protects the slots */
	uint64		clock;			/* counts uses of slots */
} SwStampShared;

static SwStampShared *shared = NULL;
static HTAB *slots = NULL;

/* the transaction that our slots' committing entries are for */
static FullTransactionId stamped_xid;

static Size
slot_size(void)
{
	/* a backend stamps a source once per transaction */
	return add_size(offsetof(SwStampSlot, committing),
					mul_size(MaxBackends, sizeof(SwPending)));
}

/*
 * Ask for the shared memory and lock, from the shmem_request_hook.
 */
void
sw_stamps_shmem_request(void)
{
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(SwStampShared)),
									hash_estimate_size(SW_STAMP_SLOTS, slot_size())));
	RequestNamedLWLockTranche("source_writes stamps", 1);
}

/*
 * Attach to the shared memory, from the shmem_startup_hook.
 */
void
sw_stamps_shmem_startup(void)
{
	bool		found;
	HASHCTL		ctl;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	shared = ShmemInitStruct("source_writes stamps", sizeof(SwStampShared), &found);
	if (!found)
	{
		shared->lock = &(GetNamedLWLockTranche("source_writes stamps"))->lock;
		shared->clock = 0;
	}
	ctl.keysize = sizeof(SwStampKey);
	ctl.entrysize = slot_size();
	slots = ShmemInitHash("source_writes stamp slots", SW_STAMP_SLOTS, SW_STAMP_SLOTS,
						  &ctl, HASH_ELEM | HASH_BLOBS);
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Is there shared memory to stamp with (the library was preloaded)?
 */
bool
sw_stamps_available(void)
{
	return shared != NULL;
}

static SwStampSlot *
find_slot(Oid relid)
{
	SwStampKey	key = {MyDatabaseId, relid};

	return hash_search(slots, &key, HASH_FIND, NULL);
}

/*
 * Free the least recently used slot that nobody stamps with and that has
 * no batch still committing; false if there is none.
 */
static bool
free_a_slot(void)
{
	HASH_SEQ_STATUS status;
	SwStampSlot *slot;
	SwStampSlot *victim = NULL;

	hash_seq_init(&status, slots);
	while ((slot = hash_seq_search(&status)) != NULL)
		if (slot->pins == 0 && slot->ncommitting == 0 &&
			(victim == NULL || slot->used < victim->used))
			victim = slot;
	if (victim == NULL)
		return false;
	hash_search(slots, &victim->key, HASH_REMOVE, NULL);
	return true;
}

/*
 * Give a source a slot, with the newest timestamp the catalog holds for
 * it, and pin it for the caller's next sw_stamps_take().  The caller holds
 * the source's heavyweight stamp lock, and no batch of the source is
 * still committing.  A slot that somebody installed meanwhile is pinned
 * as it is.  False if no slot can be had.
 */
bool
sw_stamps_install(Oid relid, int64 last_ts)
{
	SwStampKey	key = {MyDatabaseId, relid};
	SwStampSlot *slot;
	bool		found;

	Assert(shared != NULL);
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	slot = hash_search(slots, &key, HASH_FIND, NULL);
	if (slot == NULL &&
		(hash_get_num_entries(slots) < SW_STAMP_SLOTS || free_a_slot()))
	{
		slot = hash_search(slots, &key, HASH_ENTER_NULL, &found);
		if (slot != NULL && !found)
		{
			slot->last_ts = last_ts;
			slot->pins = 0;
			slot->ncommitting = 0;
		}
	}
	if (slot != NULL)
	{
		slot->pins++;
		slot->used = ++shared->clock;
	}
	LWLockRelease(shared->lock);
	return slot != NULL;
}

/*
 * A backend has at most one batch committing per source, so a slot's list
 * never fills up; should a batch have been left in it (its backend gone
 * without saying it finished), drop those whose transaction has ended.
 */
static void
forget_finished(SwStampSlot *slot)
{
	for (int j = slot->ncommitting - 1; j >= 0; j--)
		if (!TransactionIdIsInProgress(XidFromFullTransactionId(slot->committing[j].xid)))
			slot->committing[j] = slot->committing[--slot->ncommitting];
	if (slot->ncommitting >= MaxBackends)
		elog(ERROR, "source_writes: more batches committing than backends");
}

/*
 * Pin the slots of the sources that have one, so that they stay until
 * sw_stamps_take() (or sw_stamps_unpin()).
 */
void
sw_stamps_pin(SwStamping *sources, int n)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot;

		if (!sources[i].in_memory || sources[i].pinned)
			continue;
		slot = find_slot(sources[i].relid);
		if (slot == NULL)
			continue;
		slot->pins++;
		sources[i].pinned = true;
	}
	LWLockRelease(shared->lock);
}

/*
 * Stamp the sources of the committing transaction that have a slot
 * (in_memory): *ts, which the caller set to at least now and one past the
 * newest timestamp of each source it stamps by the catalog, becomes one
 * past the newest of every source too; each of them gets our batch in its
 * list of committing batches, and the list as it was in its state.
 * Returns false, having changed nothing but pinned the slots it found, if
 * a source has no slot: the caller installs one (or stamps it by the
 * catalog) and tries again.
 */
bool
sw_stamps_take(SwStamping *sources, int n, int64 *ts)
{
	SwStampSlot **found = palloc(sizeof(SwStampSlot *) * n);
	FullTransactionId xid = GetTopFullTransactionId();
	bool		all = true;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		found[i] = NULL;
		if (!sources[i].in_memory)
			continue;
		found[i] = find_slot(sources[i].relid);
		if (found[i] == NULL)
			all = false;
		else if (!sources[i].pinned)
		{
			found[i]->pins++;
			sources[i].pinned = true;
		}
	}
	if (!all)
	{
		LWLockRelease(shared->lock);
		pfree(found);
		return false;
	}

	for (int i = 0; i < n; i++)
	{
		if (found[i] == NULL)
			continue;
		*ts = Max(*ts, found[i]->last_ts + 1);
		if (found[i]->ncommitting >= MaxBackends)
			forget_finished(found[i]);
	}
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot = found[i];
		SwStampState *state = &sources[i].state;

		if (slot == NULL)
			continue;
		if (state->maxpending < slot->ncommitting)
			elog(ERROR, "source_writes: no room for %d committing batches",
				 slot->ncommitting);
		memcpy(state->pending, slot->committing, sizeof(SwPending) * slot->ncommitting);
		state->npending = slot->ncommitting;
		state->top = slot->last_ts;
		slot->last_ts = *ts;
		slot->committing[slot->ncommitting].ts = *ts;
		slot->committing[slot->ncommitting].xid = xid;
		slot->ncommitting++;
		slot->pins--;
		slot->used = ++shared->clock;
		sources[i].pinned = false;
	}
	LWLockRelease(shared->lock);
	stamped_xid = xid;
	pfree(found);
	return true;
}

/*
 * The batches that sw_stamps_take() stamped for the current transaction
 * have committed or aborted: they leave their slots' lists.  Called after
 * commit and abort; it cannot fail.
 */
void
sw_stamps_done(const SwStamping *sources, int n)
{
	if (shared == NULL || n == 0)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot = sources[i].in_memory ? find_slot(sources[i].relid) : NULL;

		for (int j = 0; slot && j < slot->ncommitting; j++)
			if (FullTransactionIdEquals(slot->committing[j].xid, stamped_xid))
			{
				slot->committing[j] = slot->committing[--slot->ncommitting];
				break;
			}
	}
	LWLockRelease(shared->lock);
}

/*
 * Unpin the slots a failed attempt pinned (an error between attempts).
 */
void
sw_stamps_unpin(SwStamping *sources, int n)
{
	bool		any = false;

	for (int i = 0; i < n; i++)
		any |= sources[i].pinned;
	if (shared == NULL || !any)
		return;					/* the common case: every commit passes here */
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot;

		if (!sources[i].pinned)
			continue;
		slot = find_slot(sources[i].relid);
		if (slot)
			slot->pins--;
		sources[i].pinned = false;
	}
	LWLockRelease(shared->lock);
}
