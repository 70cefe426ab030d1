/*-------------------------------------------------------------------------
 *
 * webhook_tables.c
 *		  The webhook worker's paths and tables: the source an address
 *		  names, and what the worker keeps of each table between groups
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_tables.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "mb/pg_wchar.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "log/log.h"
#include "webhook/webhook.h"
#include "workers/workers.h"

HTAB *wh_tables = NULL;		/* relid -> TableEntry */
static MemoryContext tables_cxt = NULL;
bool wh_tables_changed = false; /* some entry is no longer valid */
TableEntry *wh_open_tables = NULL;	/* in the current group */

/*
 * The webhook source table a path names, /<database>/<schema>/<table>, in
 * this database; InvalidOid if there is none.  Tables that exist but are
 * no webhook sources get the same answer as tables that do not.
 */
static Oid
path_source(const char *path)
{
	char	   *buf = palloc(strlen(path) + 1);
	const char *names[3];
	size_t		lens[3];
	char	   *parts[3];
	Oid			nsp;
	Oid			relid;
	SwSource	source;

	if (!sw_webhook_split_path(path, buf, names, lens))
		return InvalidOid;
	/* names without NUL, in the database encoding */
	for (int n = 0; n < 3; n++)
	{
		if (memchr(names[n], '\0', lens[n]) != NULL ||
			!pg_verifymbstr(names[n], lens[n], true))
			return InvalidOid;
		parts[n] = pnstrdup(names[n], lens[n]);
	}
	if (strcmp(parts[0], wh_database_name) != 0)
		return InvalidOid;

	/*
	 * An address that the map of webhook sources does not know, while the
	 * map is fresh, is none: its names are not looked up, which would leave
	 * an entry in the catalog caches for each name that is not there (as
	 * many as clients send).  (The map is made fresh between groups.)
	 */
	if (!wh_limits_stale && sw_webhook_server_knows(path) == 0)
		return InvalidOid;
	nsp = get_namespace_oid(parts[1], true);
	if (!OidIsValid(nsp))
		return InvalidOid;
	relid = get_relname_relid(parts[2], nsp);
	if (!OidIsValid(relid) || !sw_source_lookup(relid, &source) ||
		!sw_source_check_kind(&source, SW_KIND_WEBHOOK, NULL))
		return InvalidOid;
	return relid;
}

/*
 * A cached table changed: make its ingestion again before it is used, and
 * count the change (of other relations, which VACUUM, ANALYZE and
 * temporary tables change all the time, nothing).
 */
static void
tables_relcache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS seq;
	TableEntry *e;

	if (!OidIsValid(relid))
		wh_cache_changes++;		/* a cache reset: all of them */
	if (wh_tables == NULL)
		return;
	if (OidIsValid(relid))
	{
		e = hash_search(wh_tables, &relid, HASH_FIND, NULL);
		if (e == NULL)
			return;
		e->valid = false;
		wh_cache_changes++;
	}
	else
	{
		hash_seq_init(&seq, wh_tables);
		while ((e = hash_seq_search(&seq)) != NULL)
			e->valid = false;
	}
	wh_tables_changed = true;
}

/*
 * A server changed (its options, its type), a function (its body, who may
 * execute it), or a role (its attributes, its memberships: whose rights
 * its owner has): every table, as the defaults of the tables' decoders
 * were prepared, and their rights to functions checked, with these as they
 * were.
 */
static void
tables_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	tables_relcache_callback(arg, InvalidOid);
}

/* the cache of tables, and what tells it of their changes */
void
make_tables(void)
{
	HASHCTL		ctl;

	tables_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook tables",
									   ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(TableEntry);
	ctl.hcxt = tables_cxt;
	wh_tables = hash_create("source_writes webhook tables", 16, &ctl,
						 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	CacheRegisterRelcacheCallback(tables_relcache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, tables_syscache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, tables_syscache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, tables_syscache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, tables_syscache_callback, (Datum) 0);
}

/*
 * Between groups, forget the tables whose ingestion is no longer valid
 * (dropped, altered), or all of them when there are more than
 * SW_WEBHOOK_KEPT_TABLES: those that are still written to are made again
 * when they are.
 */
void
forget_tables(void)
{
	HASH_SEQ_STATUS seq;
	TableEntry *e;
	bool		all = hash_get_num_entries(wh_tables) > SW_WEBHOOK_KEPT_TABLES;

	Assert(wh_open_tables == NULL);
	wh_tables_changed = false;
	hash_seq_init(&seq, wh_tables);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->valid && e->ing && !all)
			continue;
		if (e->cxt)
			MemoryContextDelete(e->cxt);
		(void) hash_search(wh_tables, &e->relid, HASH_REMOVE, NULL);
	}
}

/* make a table's ingestion (again), in its own memory */
static void
make_ingestion(TableEntry *e, Relation ftrel)
{
	MemoryContext old;

	if (e->cxt)
		MemoryContextDelete(e->cxt);
	e->ing = NULL;
	e->cxt = AllocSetContextCreate(tables_cxt, "source_writes webhook table",
								   ALLOCSET_SMALL_SIZES);
	e->valid = true;			/* a change from now on makes it again */
	old = MemoryContextSwitchTo(e->cxt);
	e->ing = sw_ingest_create(ftrel, SW_ORIGIN_WEBHOOK);
	MemoryContextSwitchTo(old);
}

/*
 * Open a webhook source table for the current group, with its cached
 * ingestion, made again if it changed.  Called in a subtransaction; the
 * relation is the group's (group_owner's), as is its lock.
 */
static TableEntry *
open_table(Oid relid, ResourceOwner group_owner)
{
	ResourceOwner owner = CurrentResourceOwner;
	TableEntry *e;
	bool		found;
	Relation	ftrel;

	e = hash_search(wh_tables, &relid, HASH_ENTER, &found);
	if (!found)
	{
		e->valid = false;
		e->cxt = NULL;
		e->ing = NULL;
		e->ftrel = NULL;
		e->begun = false;
		e->careful = 0;
	}
	if (e->ftrel)
		return e;				/* the group opened it already */

	/* the lock takes in the invalidations that came meanwhile */
	CurrentResourceOwner = group_owner;
	ftrel = table_open(relid, RowExclusiveLock);
	CurrentResourceOwner = owner;
	if (!e->valid || e->ing == NULL)
	{
		PG_TRY();
		{
			make_ingestion(e, ftrel);
		}
		PG_CATCH();
		{
			CurrentResourceOwner = group_owner;
			table_close(ftrel, NoLock);
			CurrentResourceOwner = owner;
			PG_RE_THROW();
		}
		PG_END_TRY();
	}
	e->ftrel = ftrel;
	e->next_open = wh_open_tables;
	wh_open_tables = e;
	return e;
}

/* before the group commits: close the tables it wrote to */
void
close_tables(void)
{
	while (wh_open_tables)
	{
		TableEntry *e = wh_open_tables;

		Assert(!e->begun);
		table_close(e->ftrel, NoLock);
		wh_open_tables = e->next_open;
		e->ftrel = NULL;
		e->begun = false;
		e->next_open = NULL;
	}
}

/*
 * After the group's transaction aborted: forget its batches, which went
 * with it, as did the tables' relations.
 */
void
forget_open_tables(void)
{
	while (wh_open_tables)
	{
		TableEntry *e = wh_open_tables;

		if (e->begun)
			sw_ingest_abort(e->ing);
		wh_open_tables = e->next_open;
		e->ftrel = NULL;
		e->begun = false;
		e->next_open = NULL;
	}
}

/*
 * The webhook source at a path, locked for writing; InvalidOid if there is
 * none.  A table that DDL holds is not waited for: *busy is set, and it is
 * returned unlocked (its requests get 503 at once, and the other tables'
 * go on).  Once it is locked, its name is looked up again: it may have
 * been dropped or renamed meanwhile (taking the lock took in the
 * invalidations), or another table renamed to it, which is then locked in
 * its turn, as RangeVarGetRelidExtended() does.
 */
static Oid
lock_path_source(const char *path, bool *busy)
{
	Oid			relid = path_source(path);

	for (int tries = 0; tries < 3 && OidIsValid(relid); tries++)
	{
		Oid			again;

		if (!ConditionalLockRelationOid(relid, RowExclusiveLock))
		{
			*busy = true;
			return relid;
		}
		again = path_source(path);
		if (again == relid)
			return relid;
		UnlockRelationOid(relid, RowExclusiveLock);
		relid = again;
	}
	/* gone, or still moving after three looks */
	*busy = OidIsValid(relid);
	return relid;
}

/*
 * What a path of the group leads to: the first request sent to it
 * resolves it and opens its table, in a subtransaction (a failure is the
 * answer to the requests sent there, not to the group).  Called in the
 * group's memory context.
 */
GroupPath *
group_path(const char *path, List **paths)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ListCell   *lc;
	GroupPath  *p;

	foreach(lc, *paths)
	{
		p = lfirst(lc);
		if (strcmp(p->path, path) == 0)
			return p;
	}
	p = palloc0(sizeof(GroupPath));
	p->path = pstrdup(path);
	*paths = lappend(*paths, p);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(wh_request_cxt);
	start_request_clock();
	PG_TRY();
	{
		bool		busy = false;
		Oid			relid = lock_path_source(path, &busy);
		SwSource	source;

		/*
		 * Its hidden heaps, which VACUUM FULL or CLUSTER may hold, are not
		 * waited for either.  Preparing its ingestion (which may run its
		 * code: an immutable default is computed once) is timed like a
		 * request.
		 */
		if (busy)
		{
			p->relid = relid;
			p->status = 503;
			p->text = MemoryContextStrdup(cxt, SW_WEBHOOK_LOCKED_TEXT);
			p->look_again = true;
		}
		else if (!OidIsValid(relid) || !sw_source_lookup(relid, &source))
		{
			p->status = 404;
			p->text = MemoryContextStrdup(cxt, SW_WEBHOOK_NOT_FOUND_TEXT);
			p->look_again = true;
		}
		else if (source.moved)
		{
			/* exported with a fence: it takes nothing more (doc/moves.md) */
			p->relid = relid;
			p->status = 410;
			p->text = MemoryContextStrdup(cxt, SW_WEBHOOK_MOVED_TEXT);
		}
		else if (sw_database_restoring(MyDatabaseId) != 0)
		{
			/* its restore goes on: what it writes now would collide */
			p->relid = relid;
			p->status = 503;
			p->text = MemoryContextStrdup(cxt, SW_WEBHOOK_RESTORING_TEXT);
			p->look_again = true;
		}
		else if (!ConditionalLockRelationOid(source.current_rel, RowExclusiveLock) ||
				 !ConditionalLockRelationOid(source.history_rel, RowExclusiveLock))
		{
			p->relid = relid;
			p->status = 503;
			p->text = MemoryContextStrdup(cxt, SW_WEBHOOK_LOCKED_TEXT);
			p->look_again = true;
		}
		else
		{
			p->relid = relid;
			p->table = open_table(relid, owner);
		}
		check_request_clock();
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		bool		timed_out = stop_request_clock();
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		sw_roll_back_sub(cxt, owner);
		p->table = NULL;
		if (cancelled_by_clock(edata, timed_out))
		{
			p->status = 503;
			p->text = pstrdup(SW_TIMED_OUT_TEXT);
		}
		else
			p->status = error_answer(edata, false, "", "", &p->text);
		log_refusal(p->relid, path, p->status, edata->message, NULL);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	MemoryContextReset(wh_request_cxt);
	return p;
}

/*
 * Whether a request lacks the signature header of the table of path p,
 * which could not be opened (DDL holds it, or an error): as when it opens
 * (check_and_write), it is then answered as one to no table, so that who
 * does not sign cannot tell a signed table that DDL holds from none.  The
 * header is read from the table's catalog row, once for the group.
 */
bool
lacks_signature_header(GroupPath *p, SwRequest *r)
{
	if (!p->signature_read)
	{
		p->signature_header = sw_source_signature_header(p->relid);
		p->signature_read = true;
	}
	/* a GET (one with a query) is a handshake, which no one signs */
	return p->signature_header && r->query == NULL &&
		request_lacks_headers(r, p->signature_header);
}
