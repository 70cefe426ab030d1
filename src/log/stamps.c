/*-------------------------------------------------------------------------
 *
 * stamps.c
 *		  Handing out batch timestamps in shared memory
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Stamping).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/stamps.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/wait_event.h"

#include "log/log.h"
#include "source_writes.h"

/* sources named in a backend's entry, and in each chunk of further names */
#define SW_STAMPER_SOURCES		8

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
	int			ncommitting;	/* its batches still committing */
} SwStampSlot;

/* a backend's transaction that stamped batches and is committing */
typedef struct SwStamper
{
	FullTransactionId xid;
	int64		ts;
	Oid			dboid;
	int			nsources;		/* the sources it stamped in shared memory */
	Oid			sources[SW_STAMPER_SOURCES];	/* ... the first of them */
	int			more;			/* the chunk that names the next, or -1 */
	int			listed;			/* its place in committing[], or -1 */
} SwStamper;

/* a chunk of the names of an entry's further sources */
typedef struct SwStampNames
{
	Oid			sources[SW_STAMPER_SOURCES];
	int			next;			/* the entry's next chunk, or -1; or free's */
} SwStampNames;

typedef struct SwStampShared
{
	LWLock	   *lock;			/* protects all of it, and the slots */
	uint64		clock;			/* counts uses of slots */
	int			ncommitting;	/* entries of transactions committing */
	int		   *committing;		/* ... their indexes in stampers */
	SwStamper  *stampers;		/* one for each backend */
	SwStampNames *names;		/* the pool of chunks of names */
	int			free_names;		/* the first free chunk, or -1 */
	int			nfree_names;	/* how many are free */
	ConditionVariable names_freed;	/* chunks were given back */
} SwStampShared;

static SwStampShared *shared = NULL;
static HTAB *slots = NULL;

/* our transaction's entry is listed */
static bool stamped = false;

/* sources of a transaction beyond its entry: how many chunks name them */
static int
chunks_for(int nsources)
{
	return nsources <= SW_STAMPER_SOURCES ? 0 :
		(nsources - 1) / SW_STAMPER_SOURCES;
}

/*
 * The chunks of names in the pool: one for each backend, and those that
 * one transaction needs to stamp a source of every slot.
 */
static int
pool_chunks(void)
{
	return MaxBackends + chunks_for(sw_stamp_slots);
}

static Size
stampers_size(void)
{
	return add_size(add_size(mul_size(MaxBackends, sizeof(SwStamper)),
							 mul_size(pool_chunks(), sizeof(SwStampNames))),
					mul_size(MaxBackends, sizeof(int)));
}

static Size
stamps_shmem_size(void)
{
	return sizeof(SwStampShared);
}

/* besides the struct: the slots' hash, and the backends' entries */
static Size
stamps_shmem_more(void)
{
	return add_size(hash_estimate_size(sw_stamp_slots, sizeof(SwStampSlot)),
					stampers_size());
}

/*
 * The registry's address; a new one gets its lock and the backends'
 * entries.  Then the slots' hash.
 */
static void
stamps_shmem_attach(void *registry, LWLock *lock, bool created)
{
	bool		found;
	HASHCTL		ctl;

	shared = registry;
	if (created)
	{
		char	   *mem = ShmemInitStruct("source_writes stamps of backends",
										  stampers_size(), &found);

		shared->lock = lock;
		shared->clock = 0;
		shared->ncommitting = 0;
		shared->stampers = (SwStamper *) mem;
		mem += MaxBackends * sizeof(SwStamper);
		shared->names = (SwStampNames *) mem;
		mem += pool_chunks() * sizeof(SwStampNames);
		shared->committing = (int *) mem;
		for (int i = 0; i < MaxBackends; i++)
		{
			shared->stampers[i].listed = -1;
			shared->stampers[i].more = -1;
		}
		for (int i = 0; i < pool_chunks(); i++)
			shared->names[i].next = i + 1 < pool_chunks() ? i + 1 : -1;
		shared->free_names = 0;
		shared->nfree_names = pool_chunks();
		ConditionVariableInit(&shared->names_freed);
	}
	ctl.keysize = sizeof(SwStampKey);
	ctl.entrysize = sizeof(SwStampSlot);
	slots = ShmemInitHash("source_writes stamp slots", sw_stamp_slots, sw_stamp_slots,
						  &ctl, HASH_ELEM | HASH_BLOBS);
}

const SwShmemRegistry sw_stamps_registry = {
	"source_writes stamps", stamps_shmem_size, stamps_shmem_more, stamps_shmem_attach
};

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
		(hash_get_num_entries(slots) < sw_stamp_slots || free_a_slot()))
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

/* does a committing transaction's entry name a source? */
static bool
names_source(const SwStamper *stamper, Oid relid)
{
	const Oid  *names = stamper->sources;
	int			next = stamper->more;

	if (stamper->dboid != MyDatabaseId)
		return false;
	for (int i = 0; i < stamper->nsources; i++)
	{
		if (i > 0 && i % SW_STAMPER_SOURCES == 0)
		{
			names = shared->names[next].sources;
			next = shared->names[next].next;
		}
		if (names[i % SW_STAMPER_SOURCES] == relid)
			return true;
	}
	return false;
}

/*
 * Take an entry off the list of those committing, its chunks of names back
 * to the pool; returns whether it had any (then wake those who wait for
 * them, once the lock is released).
 */
static bool
unlist(SwStamper *stamper)
{
	int			last = shared->committing[--shared->ncommitting];
	bool		had_chunks = stamper->more >= 0;

	shared->committing[stamper->listed] = last;
	shared->stampers[last].listed = stamper->listed;
	stamper->listed = -1;
	while (stamper->more >= 0)
	{
		int			chunk = stamper->more;

		stamper->more = shared->names[chunk].next;
		shared->names[chunk].next = shared->free_names;
		shared->free_names = chunk;
		shared->nfree_names++;
	}
	return had_chunks;
}

/*
 * Stamp the sources of the committing transaction that have a slot
 * (in_memory): *ts, which the caller set to at least now and one past the
 * newest timestamp of each source it stamps by the catalog, becomes one
 * past the newest of every source too; our transaction joins the list of
 * those committing, for each of them, and their state gets the batches of
 * theirs still committing.  Returns false, having changed nothing but
 * pinned the slots it found, if a source has no slot: the caller installs
 * one (or stamps it by the catalog) and tries again.  Waits, when the pool
 * has too few chunks to name the sources, for a committing transaction to
 * give some back.
 */
bool
sw_stamps_take(SwStamping *sources, int n, int64 *ts)
{
	FullTransactionId xid = GetTopFullTransactionId();
	SwStampSlot **found;
	SwStamper  *me;
	int			nmine;
	int			chunk = -1;
	bool		wake = false;

	Assert(!stamped);
	if (MyProc == NULL || MyProc->pgprocno >= MaxBackends)
		elog(ERROR, "a process without a backend's entry cannot stamp batches in shared memory");
	me = &shared->stampers[MyProc->pgprocno];
	found = palloc(sizeof(SwStampSlot *) * n);
	for (;;)
	{
		int			room = INT_MAX;
		bool		all = true;

		LWLockAcquire(shared->lock, LW_EXCLUSIVE);
		for (int i = 0; i < n; i++)
			if (sources[i].in_memory)
				room = Min(room, sources[i].state.maxpending);
		if (room < shared->ncommitting)
		{
			/* room in the states for every batch committing, then again */
			room = shared->ncommitting * 2;
			LWLockRelease(shared->lock);
			for (int i = 0; i < n; i++)
			{
				SwStampState *state = &sources[i].state;

				if (!sources[i].in_memory || state->maxpending >= room)
					continue;
				state->pending = state->pending ?
					repalloc(state->pending, sizeof(SwPending) * room) :
					palloc(sizeof(SwPending) * room);
				state->maxpending = room;
			}
			continue;
		}

		nmine = 0;
		for (int i = 0; i < n; i++)
		{
			found[i] = NULL;
			if (!sources[i].in_memory)
				continue;
			found[i] = find_slot(sources[i].relid);
			if (found[i] == NULL)
				all = false;
			else
			{
				nmine++;
				if (!sources[i].pinned)
				{
					found[i]->pins++;
					sources[i].pinned = true;
				}
			}
		}
		if (!all)
		{
			LWLockRelease(shared->lock);
			pfree(found);
			return false;
		}

		/* an entry that a transaction of ours left (none should) */
		if (me->listed >= 0)
			wake |= unlist(me);

		if (chunks_for(nmine) <= shared->nfree_names)
			break;

		/* too few chunks of names free: wait for some */
		LWLockRelease(shared->lock);
		if (wake)
			ConditionVariableBroadcast(&shared->names_freed);
		wake = false;
		ConditionVariableSleep(&shared->names_freed, PG_WAIT_EXTENSION);
	}
	ConditionVariableCancelSleep();

	for (int i = 0; i < n; i++)
		if (found[i] != NULL)
			*ts = Max(*ts, found[i]->last_ts + 1);

	nmine = 0;
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot = found[i];
		SwStampState *state = &sources[i].state;

		if (slot == NULL)
			continue;
		state->npending = 0;
		for (int k = 0; k < shared->ncommitting; k++)
		{
			SwStamper  *other = &shared->stampers[shared->committing[k]];

			if (names_source(other, sources[i].relid))
			{
				state->pending[state->npending].ts = other->ts;
				state->pending[state->npending].xid = other->xid;
				state->npending++;
			}
		}
		state->top = slot->last_ts;
		slot->last_ts = *ts;
		slot->ncommitting++;
		slot->pins--;
		slot->used = ++shared->clock;
		sources[i].pinned = false;

		/* named in our entry, then in chunks from the pool */
		if (nmine < SW_STAMPER_SOURCES)
			me->sources[nmine] = sources[i].relid;
		else
		{
			if (nmine % SW_STAMPER_SOURCES == 0)
			{
				int			next = shared->free_names;

				Assert(next >= 0);
				shared->free_names = shared->names[next].next;
				shared->nfree_names--;
				shared->names[next].next = -1;
				if (chunk < 0)
					me->more = next;
				else
					shared->names[chunk].next = next;
				chunk = next;
			}
			shared->names[chunk].sources[nmine % SW_STAMPER_SOURCES] = sources[i].relid;
		}
		nmine++;
	}

	/* our transaction is committing batches of those sources */
	if (nmine > 0)
	{
		me->xid = xid;
		me->ts = *ts;
		me->dboid = MyDatabaseId;
		me->nsources = nmine;
		me->listed = shared->ncommitting;
		shared->committing[shared->ncommitting++] = MyProc->pgprocno;
		stamped = true;
	}
	LWLockRelease(shared->lock);
	if (wake)
		ConditionVariableBroadcast(&shared->names_freed);
	pfree(found);
	return true;
}

/*
 * The batches that sw_stamps_take() stamped for the current transaction
 * have committed or aborted: they are no longer committing.  Called after
 * commit and abort; it cannot fail.
 */
void
sw_stamps_done(const SwStamping *sources, int n)
{
	bool		wake;

	if (shared == NULL || !stamped)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < n; i++)
	{
		SwStampSlot *slot = sources[i].in_memory ? find_slot(sources[i].relid) : NULL;

		if (slot != NULL && slot->ncommitting > 0)
			slot->ncommitting--;
	}
	wake = unlist(&shared->stampers[MyProc->pgprocno]);
	LWLockRelease(shared->lock);
	stamped = false;
	if (wake)
		ConditionVariableBroadcast(&shared->names_freed);
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
