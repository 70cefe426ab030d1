/*-------------------------------------------------------------------------
 *
 * databases.c
 *		  The databases the workers serve, and keeping out of a database
 *		  that a command needs to itself
 *
 * See doc/internals.md, "Workers and processes" (Databases).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/workers/databases.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <unistd.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_database.h"
#include "catalog/pg_tablespace_d.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "commands/tablespace.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "pgstat.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "workers/workers.h"

/* entries and registered workers beyond max_worker_processes */
#define SW_DATABASES_EXTRA		16

/* commands that may want a database to themselves at once */
#define SW_MAX_WANTED			16

/* databases to look at again, remembered until the launcher takes them */
#define SW_MAX_HINTS			64

/* sessions restoring source tables at once */
#define SW_MAX_RESTORERS		16

/* how long a command waits for our workers to leave its database */
#define SW_LEAVE_WAIT_MS		10000

/* how often it tells those that stay again */
#define SW_LEAVE_RESIGNAL_MS	1000

/* a database with a supervisor */
typedef struct SwDatabaseEntry
{
	Oid			dboid;			/* InvalidOid: free */
	NameData	name;			/* as the launcher read it */
	SwDatabaseResult result;	/* what its supervisor found */
	pid_t		supervisor_pid; /* 0 while none runs */
	Latch	   *supervisor_latch;
	bool		has_webhooks;	/* it has webhook sources */
	pid_t		webhook_pid;	/* the process that writes its webhook requests */
	char		webhook_state[SW_WEBHOOK_STATE_LEN];
	char		webhook_error[SW_WEBHOOK_ERROR_LEN];
} SwDatabaseEntry;

/* a worker of ours connected to a database */
typedef struct SwConnected
{
	pid_t		pid;			/* 0: free */
	Oid			dboid;
} SwConnected;

/*
 * A database a command wants to itself, until its transaction ends; or,
 * after DROP DATABASE committed, until the launcher has forgotten it.
 */
typedef struct SwWanted
{
	pid_t		pid;			/* the backend; 0: free */
	Oid			dboid;
	bool		dropping;		/* the command is DROP DATABASE */
	bool		dropped;		/* ... and it committed */
} SwWanted;

/* a session that restored source tables, until it ends */
typedef struct SwRestorer
{
	pid_t		pid;			/* 0: free */
	Oid			dboid;
} SwRestorer;

typedef struct SwDatabasesShared
{
	LWLock	   *lock;			/* protects all of it */
	Latch	   *launcher_latch; /* NULL while no launcher runs */
	bool		looked_at_all;	/* the launcher looked at every database once */
	SwWanted	wanted[SW_MAX_WANTED];
	SwRestorer	restorers[SW_MAX_RESTORERS];
	int			nhints;
	bool		hints_lost;		/* more than SW_MAX_HINTS came */
	Oid			hints[SW_MAX_HINTS];
	int			nentries;
	int			nconnected;
	/* then nentries SwDatabaseEntry, then nconnected SwConnected */
} SwDatabasesShared;

static SwDatabasesShared *shared = NULL;

static ProcessUtility_hook_type prev_process_utility = NULL;

/*
 * This backend: it wants a database, or created the extension or a source
 * table (the launcher is to look at the database again at commit)
 */
static bool xact_callback_registered = false;
static bool wanting = false;
static bool look_again = false;
static bool restoring = false;	/* this session restored source tables */

static int
entry_count(void)
{
	return max_worker_processes + SW_DATABASES_EXTRA;
}

static Size
databases_shmem_size(void)
{
	Size		size = MAXALIGN(sizeof(SwDatabasesShared));

	size = add_size(size, mul_size(entry_count(), sizeof(SwDatabaseEntry)));
	size = add_size(size, mul_size(entry_count(), sizeof(SwConnected)));
	return size;
}

static SwDatabaseEntry *
entries(void)
{
	return (SwDatabaseEntry *) ((char *) shared + MAXALIGN(sizeof(SwDatabasesShared)));
}

static SwConnected *
connected(void)
{
	return (SwConnected *) (entries() + shared->nentries);
}

/* the registry's address; a new one gets its lock and its entries */
static void
databases_shmem_attach(void *mem, LWLock *lock, bool created)
{
	shared = mem;
	if (created)
	{
		shared->lock = lock;
		shared->nentries = entry_count();
		shared->nconnected = entry_count();
	}
}

const SwShmemRegistry sw_databases_registry = {
	"source_writes databases", databases_shmem_size, NULL, databases_shmem_attach
};

/* has the process gone without saying so (its slot is stale)? */
static bool
process_gone(pid_t pid)
{
	return kill(pid, 0) != 0 && errno == ESRCH;
}

/* the entry of a database, or NULL; with the lock held */
static SwDatabaseEntry *
find_entry(Oid dboid)
{
	for (int i = 0; i < shared->nentries; i++)
		if (entries()[i].dboid == dboid)
			return &entries()[i];
	return NULL;
}

/*
 * Does a command want the database to itself?  With the lock held
 * exclusively: the marks of backends that are gone are dropped.
 */
static bool
wanted_locked(Oid dboid)
{
	bool		wanted = false;

	for (int i = 0; i < SW_MAX_WANTED; i++)
	{
		SwWanted   *w = &shared->wanted[i];

		if (w->dropped && w->dboid == dboid)
			wanted = true;
		if (w->pid == 0 || w->dboid != dboid)
			continue;
		if (process_gone(w->pid))
			w->pid = 0;			/* it left without ending its transaction */
		else
			wanted = true;
	}
	return wanted;
}

static void
wake_launcher(void)
{
	Latch	   *latch;

	LWLockAcquire(shared->lock, LW_SHARED);
	latch = shared->launcher_latch;
	LWLockRelease(shared->lock);
	if (latch)
		SetLatch(latch);
}

/* a worker of ours leaves its database */
static void
leave_database(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nconnected; i++)
		if (connected()[i].pid == MyProcPid)
			connected()[i].pid = 0;
	LWLockRelease(shared->lock);
}

/*
 * A worker of ours is about to connect to a database: it registers, so
 * that a command that needs the database to itself can make it leave.
 * False if such a command wants the database now: the worker leaves
 * instead (quietly, with proc_exit(0)), and the launcher starts what is
 * needed once the command is over.
 */
bool
sw_database_enter(Oid dboid)
{
	bool		wanted;

	if (shared == NULL || !OidIsValid(dboid))
		return true;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	wanted = wanted_locked(dboid);
	if (!wanted)
	{
		for (int i = 0; i < shared->nconnected; i++)
		{
			SwConnected *c = &connected()[i];

			if (c->pid == 0)
			{
				c->pid = MyProcPid;
				c->dboid = dboid;
				break;
			}
		}
	}
	LWLockRelease(shared->lock);
	if (wanted)
		return false;
	before_shmem_exit(leave_database, (Datum) 0);
	return true;
}

/*
 * At the end of a transaction: the databases it wanted are free again;
 * an extension or a source table it created is there, if it committed.
 * The launcher is told of either.
 */
static void
databases_xact_callback(XactEvent event, void *arg)
{
	bool		wake = false;

	switch (event)
	{
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PREPARE:
			break;
		default:
			return;
	}
	if (!wanting && !look_again)
		return;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (wanting)
	{
		for (int i = 0; i < SW_MAX_WANTED; i++)
		{
			SwWanted   *w = &shared->wanted[i];

			if (w->pid != MyProcPid)
				continue;
			/* a database dropped stays wanted until the launcher forgets it */
			w->dropped = w->dropping && event == XACT_EVENT_COMMIT;
			w->pid = 0;
		}
		wake = true;
	}
	if (look_again &&
		(event == XACT_EVENT_COMMIT || event == XACT_EVENT_PARALLEL_COMMIT))
	{
		if (shared->nhints < SW_MAX_HINTS)
			shared->hints[shared->nhints++] = MyDatabaseId;
		else
			shared->hints_lost = true;
		wake = true;
	}
	LWLockRelease(shared->lock);
	wanting = false;
	look_again = false;
	if (wake)
		wake_launcher();
}

static void
register_xact_callback(void)
{
	if (!xact_callback_registered)
	{
		RegisterXactCallback(databases_xact_callback, NULL);
		xact_callback_registered = true;
	}
}

/*
 * CREATE EXTENSION source_writes runs in this transaction: once it
 * commits, the launcher serves the database (within a second or so, with
 * no restart) when it has source tables.
 */
void
sw_database_extension_created(void)
{
	if (shared == NULL)
		return;
	register_xact_callback();
	look_again = true;
}

/*
 * A command of this transaction made a source table: once it commits, the
 * launcher looks at the database again, which a supervisor left while it
 * had none.
 */
void
sw_database_sources_changed(void)
{
	if (shared == NULL)
		return;
	register_xact_callback();
	look_again = true;
}

/*
 * The command being run needs the database to itself: mark it, until the
 * transaction ends, then terminate our workers connected to it and wait
 * for them to leave (at most SW_LEAVE_WAIT_MS; a cancel ends the wait, and
 * the command).  PostgreSQL then counts the sessions left, as always.
 */
static void
want_database(Oid dboid, const char *name, bool dropping)
{
	TimestampTz start = GetCurrentTimestamp();
	TimestampTz signalled = 0;
	bool		marked = false;
	pid_t	   *pids = palloc(sizeof(pid_t) * shared->nconnected);

	register_xact_callback();
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_MAX_WANTED && !marked; i++)
	{
		SwWanted   *w = &shared->wanted[i];

		if (w->pid != 0 && process_gone(w->pid))
			w->pid = 0;
		if (w->pid == 0 && !w->dropped)
		{
			w->pid = MyProcPid;
			w->dboid = dboid;
			w->dropping = dropping;
			marked = true;
		}
	}
	LWLockRelease(shared->lock);
	if (!marked)
		return;					/* too many at once: PostgreSQL waits as ever */
	wanting = true;
	wake_launcher();

	for (;;)
	{
		int			n = 0;
		TimestampTz now;

		LWLockAcquire(shared->lock, LW_SHARED);
		for (int i = 0; i < shared->nconnected; i++)
			if (connected()[i].pid != 0 && connected()[i].dboid == dboid)
				pids[n++] = connected()[i].pid;
		LWLockRelease(shared->lock);
		if (n == 0)
			break;
		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(start, now, SW_LEAVE_WAIT_MS))
			break;
		if (signalled == 0 || TimestampDifferenceExceeds(signalled, now, SW_LEAVE_RESIGNAL_MS))
		{
			if (signalled == 0)
				ereport(LOG,
						(errmsg("source_writes workers leave database \"%s\", which the command needs to itself",
								name)));
			for (int i = 0; i < n; i++)
				(void) kill(pids[i], SIGTERM);
			signalled = now;
		}
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 10, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	pfree(pids);
}

/* may the current role create databases? */
static bool
may_create_databases(void)
{
	HeapTuple	tuple;
	bool		result = false;

	if (superuser())
		return true;
	tuple = SearchSysCache1(AUTHOID, ObjectIdGetDatum(GetUserId()));
	if (HeapTupleIsValid(tuple))
	{
		result = ((Form_pg_authid) GETSTRUCT(tuple))->rolcreatedb;
		ReleaseSysCache(tuple);
	}
	return result;
}

/*
 * Is the database a template?  (Anyone who may create databases may copy
 * it; DROP DATABASE refuses it.)
 */
static bool
is_template(Oid dboid)
{
	HeapTuple	tuple;
	bool		result = false;

	tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (HeapTupleIsValid(tuple))
	{
		result = ((Form_pg_database) GETSTRUCT(tuple))->datistemplate;
		ReleaseSysCache(tuple);
	}
	return result;
}

/* may the current role copy the database (CREATE DATABASE ... TEMPLATE)? */
static bool
may_copy_database(Oid dboid)
{
	return may_create_databases() &&
		(is_template(dboid) || pg_database_ownercheck(dboid, GetUserId()));
}

/*
 * May the current role move the database to the tablespace, and would
 * that move it (ALTER DATABASE ... SET TABLESPACE, as movedb() checks)?
 */
static bool
may_move_database(Oid dboid, const char *tablespace)
{
	Oid			dst = get_tablespace_oid(tablespace, true);
	HeapTuple	tuple;
	bool		moves = false;

	if (!OidIsValid(dst) || dst == GLOBALTABLESPACE_OID ||
		pg_tablespace_aclcheck(dst, GetUserId(), ACL_CREATE) != ACLCHECK_OK)
		return false;
	tuple = SearchSysCache1(DATABASEOID, ObjectIdGetDatum(dboid));
	if (HeapTupleIsValid(tuple))
	{
		moves = ((Form_pg_database) GETSTRUCT(tuple))->dattablespace != dst;
		ReleaseSysCache(tuple);
	}
	return moves;
}

/*
 * The database a utility command needs to itself, if the current role may
 * run it (its name in *name); else InvalidOid.  Only roles that may run
 * the command can make our workers leave: nobody else can stop a
 * database's ingestion so, not even with a command that PostgreSQL then
 * refuses for want of a privilege, or for a reason known before it counts
 * the database's sessions.
 */
static Oid
database_wanted(Node *parsetree, const char **name)
{
	Oid			dboid;
	ListCell   *lc;
	const char *tablespace = NULL;
	const char *newname = NULL;

	*name = NULL;
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			*name = ((DropdbStmt *) parsetree)->dbname;
			break;
		case T_RenameStmt:
			if (((RenameStmt *) parsetree)->renameType == OBJECT_DATABASE)
			{
				*name = ((RenameStmt *) parsetree)->subname;
				newname = ((RenameStmt *) parsetree)->newname;
			}
			break;
		case T_AlterDatabaseStmt:
			foreach(lc, ((AlterDatabaseStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst(lc);

				if (strcmp(def->defname, "tablespace") == 0 && def->arg != NULL)
				{
					*name = ((AlterDatabaseStmt *) parsetree)->dbname;
					tablespace = defGetString(def);
				}
			}
			break;
		case T_CreatedbStmt:
			*name = "template1";
			foreach(lc, ((CreatedbStmt *) parsetree)->options)
			{
				DefElem    *def = lfirst(lc);

				if (strcmp(def->defname, "template") == 0 && def->arg != NULL)
					*name = defGetString(def);
			}
			break;
		default:
			break;
	}
	if (*name == NULL)
		return InvalidOid;
	dboid = get_database_oid(*name, true);
	if (!OidIsValid(dboid) || dboid == MyDatabaseId)
		return InvalidOid;
	if (IsA(parsetree, CreatedbStmt))
		return may_copy_database(dboid) ? dboid : InvalidOid;
	if (!pg_database_ownercheck(dboid, GetUserId()))
		return InvalidOid;
	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
			if (is_template(dboid))
				return InvalidOid;
			break;
		case T_RenameStmt:
			if (!may_create_databases() ||
				OidIsValid(get_database_oid(newname, true)))
				return InvalidOid;
			break;
		case T_AlterDatabaseStmt:
			if (!may_move_database(dboid, tablespace))
				return InvalidOid;
			break;
		default:
			break;
	}
	return dboid;
}

/*
 * The ProcessUtility hook: before a command that needs a database to
 * itself, our workers leave it.
 */
static void
databases_process_utility(PlannedStmt *pstmt, const char *queryString,
						  bool readOnlyTree, ProcessUtilityContext context,
						  ParamListInfo params, QueryEnvironment *queryEnv,
						  DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	switch (nodeTag(parsetree))
	{
		case T_DropdbStmt:
		case T_AlterDatabaseStmt:
		case T_CreatedbStmt:
			/* PostgreSQL refuses them in a transaction block */
			if (context != PROCESS_UTILITY_TOPLEVEL || IsTransactionBlock())
				break;
			/* FALLTHROUGH */
		case T_RenameStmt:
			{
				const char *name;
				Oid			dboid = database_wanted(parsetree, &name);

				if (OidIsValid(dboid))
					want_database(dboid, name, IsA(parsetree, DropdbStmt));
				break;
			}
		default:
			break;
	}
	if (prev_process_utility)
		prev_process_utility(pstmt, queryString, readOnlyTree, context, params,
							 queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
								queryEnv, dest, qc);
}

/*
 * Install the ProcessUtility hook; from _PG_init, when preloaded (every
 * backend then has it).
 */
void
sw_databases_install_hooks(void)
{
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = databases_process_utility;
}

static void
launcher_detach(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	if (shared->launcher_latch == MyLatch)
		shared->launcher_latch = NULL;
	LWLockRelease(shared->lock);
}

/*
 * The launcher: its latch is set when a database is wanted or free again,
 * when the extension is created somewhere, or a supervisor reports.
 */
void
sw_databases_attach_launcher(void)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->launcher_latch = MyLatch;
	LWLockRelease(shared->lock);
	before_shmem_exit(launcher_detach, (Datum) 0);
}

/*
 * Does a command want the database to itself now?  Then no worker of ours
 * starts there.
 */
bool
sw_database_paused(Oid dboid)
{
	bool		wanted;

	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	wanted = wanted_locked(dboid);
	LWLockRelease(shared->lock);
	return wanted;
}

/* a session that restored source tables ends */
static void
restorer_detach(int code, Datum arg)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_MAX_RESTORERS; i++)
		if (shared->restorers[i].pid == MyProcPid)
			shared->restorers[i].pid = 0;
	LWLockRelease(shared->lock);
}

/*
 * This session restores source tables from a dump: until it ends, the
 * database's new sources are not ingested (sw_database_restoring()).
 * pg_restore and psql restore a dump in many transactions unless told
 * otherwise, and the rest of a restored source (its hidden relations' rows,
 * the sequence of batch ids, the offsets, the key's index) comes in later
 * ones.  The session's end is the only sign that all of it came.
 */
void
sw_database_restorer(void)
{
	bool		found = false;

	if (shared == NULL || restoring)
		return;
	before_shmem_exit(restorer_detach, (Datum) 0);
	restoring = true;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < SW_MAX_RESTORERS && !found; i++)
	{
		SwRestorer *r = &shared->restorers[i];

		if (r->pid != 0 && process_gone(r->pid))
			r->pid = 0;			/* it ended without saying so */
		if (r->pid == 0)
		{
			r->pid = MyProcPid;
			r->dboid = MyDatabaseId;
			found = true;
		}
	}
	LWLockRelease(shared->lock);
	if (!found)
	{
		restoring = false;
		ereport(ERROR,
				(errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
				 errmsg("too many sessions are restoring source tables"),
				 errdetail("At most %d sessions can restore source tables at once.",
						   SW_MAX_RESTORERS),
				 errhint("A session that restored source tables counts until it ends.")));
	}
}

/*
 * The pid of a session restoring source tables into the database, or 0:
 * while there is one, no ingestion starts there.
 */
pid_t
sw_database_restoring(Oid dboid)
{
	pid_t		pid = 0;

	if (shared == NULL)
		return 0;
	LWLockAcquire(shared->lock, LW_SHARED);
	for (int i = 0; i < SW_MAX_RESTORERS && pid == 0; i++)
	{
		SwRestorer *r = &shared->restorers[i];

		if (r->pid != 0 && r->dboid == dboid && !process_gone(r->pid))
			pid = r->pid;
	}
	LWLockRelease(shared->lock);
	return pid;
}

/*
 * The databases where CREATE EXTENSION committed since the last call, at
 * most max of them; *all when more came than were kept (every database
 * is to be looked at again).
 */
int
sw_databases_take_hints(Oid *dboids, int max, bool *all)
{
	int			n;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	n = Min(shared->nhints, max);
	memcpy(dboids, shared->hints, sizeof(Oid) * n);
	*all = shared->hints_lost || shared->nhints > max;
	shared->nhints = 0;
	shared->hints_lost = false;
	LWLockRelease(shared->lock);
	return n;
}

/*
 * The launcher is about to start the supervisor of a database: its entry,
 * made if it has none, with its name and nothing found yet.  False if
 * there is no room (more databases with a supervisor than worker
 * processes).
 */
bool
sw_database_prepare(Oid dboid, const char *name)
{
	SwDatabaseEntry *e;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(dboid);
	if (e == NULL && (e = find_entry(InvalidOid)) != NULL)
	{
		memset(e, 0, sizeof(SwDatabaseEntry));
		e->dboid = dboid;
	}
	if (e)
	{
		namestrcpy(&e->name, name);
		e->result = SW_DATABASE_UNKNOWN;
	}
	LWLockRelease(shared->lock);
	return e != NULL;
}

/* what the supervisor of a database found there */
SwDatabaseResult
sw_database_result(Oid dboid)
{
	SwDatabaseEntry *e;
	SwDatabaseResult result = SW_DATABASE_UNKNOWN;

	LWLockAcquire(shared->lock, LW_SHARED);
	e = find_entry(dboid);
	if (e)
		result = e->result;
	LWLockRelease(shared->lock);
	return result;
}

/*
 * The launcher no longer serves a database (it is gone, or has no
 * extension): its entry is freed, and a DROP DATABASE of it is over.
 */
void
sw_database_forget(Oid dboid)
{
	SwDatabaseEntry *e;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(dboid);
	if (e)
		e->dboid = InvalidOid;
	for (int i = 0; i < SW_MAX_WANTED; i++)
		if (shared->wanted[i].dboid == dboid)
			shared->wanted[i].dropped = false;
	LWLockRelease(shared->lock);
}

/* the launcher has looked at every database it found at its start */
void
sw_databases_looked_at_all(void)
{
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	shared->looked_at_all = true;
	LWLockRelease(shared->lock);
}

/* is the entry's database served, with webhook sources, and not wanted? */
static bool
takes_webhooks(SwDatabaseEntry *e)
{
	return OidIsValid(e->dboid) && e->result == SW_DATABASE_SERVED &&
		e->has_webhooks && !wanted_locked(e->dboid);
}

/*
 * May the database of this name (not NUL-terminated) still turn out to be
 * served: the launcher has not looked at every database yet, or its
 * supervisor is looking, or a command wants it?  Or does it take webhook
 * requests (the webhook server, which asks when it has no relay for it,
 * has not made one yet)?  Then a request to it is told to come again, not
 * that it has no such table.
 */
bool
sw_databases_unsettled(const char *name, size_t len)
{
	bool		unsettled;

	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	unsettled = !shared->looked_at_all;
	for (int i = 0; i < shared->nentries && !unsettled; i++)
	{
		SwDatabaseEntry *e = &entries()[i];

		if (OidIsValid(e->dboid) && strlen(NameStr(e->name)) == len &&
			memcmp(NameStr(e->name), name, len) == 0)
			unsettled = e->result == SW_DATABASE_UNKNOWN || wanted_locked(e->dboid) ||
				takes_webhooks(e);
	}
	LWLockRelease(shared->lock);
	return unsettled;
}

/*
 * Does any database served have webhook sources?  Then the webhook server
 * runs.
 */
bool
sw_databases_any_webhooks(void)
{
	bool		any = false;

	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nentries && !any; i++)
		any = takes_webhooks(&entries()[i]);
	LWLockRelease(shared->lock);
	return any;
}

/* the supervisor leaves */
static void
supervisor_detach(int code, Datum arg)
{
	SwDatabaseEntry *e;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(MyDatabaseId);
	if (e && e->supervisor_pid == MyProcPid)
	{
		e->supervisor_pid = 0;
		e->supervisor_latch = NULL;
	}
	LWLockRelease(shared->lock);
}

/*
 * The supervisor of the current database takes its entry (which the
 * launcher made before it started it).
 */
void
sw_database_supervisor_attach(void)
{
	SwDatabaseEntry *e;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(MyDatabaseId);
	if (e)
	{
		e->supervisor_pid = MyProcPid;
		e->supervisor_latch = MyLatch;
	}
	LWLockRelease(shared->lock);
	before_shmem_exit(supervisor_detach, (Datum) 0);
}

/*
 * The supervisor says what it found: whether the database has the
 * extension, and webhook sources.  The launcher is woken when that
 * changes.
 */
void
sw_database_report(SwDatabaseResult result, bool has_webhooks)
{
	SwDatabaseEntry *e;
	bool		changed = false;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(MyDatabaseId);
	if (e)
	{
		changed = e->result != result || e->has_webhooks != has_webhooks;
		e->result = result;
		e->has_webhooks = has_webhooks;
	}
	LWLockRelease(shared->lock);
	if (changed)
		wake_launcher();
}

/* the pid of a database's supervisor; 0 if none runs */
pid_t
sw_database_supervisor_pid(Oid dboid)
{
	SwDatabaseEntry *e;
	pid_t		pid = 0;

	LWLockAcquire(shared->lock, LW_SHARED);
	e = find_entry(dboid);
	if (e)
		pid = e->supervisor_pid;
	LWLockRelease(shared->lock);
	return pid;
}

/* the latch of a database's supervisor, to make it look now; or NULL */
Latch *
sw_database_supervisor_latch(Oid dboid)
{
	SwDatabaseEntry *e;
	Latch	   *latch = NULL;

	if (shared == NULL)
		return NULL;
	LWLockAcquire(shared->lock, LW_SHARED);
	e = find_entry(dboid);
	if (e)
		latch = e->supervisor_latch;
	LWLockRelease(shared->lock);
	return latch;
}

/*
 * The databases whose webhook requests the webhook server takes: served,
 * with webhook sources, not wanted by a command; at most max of them.
 */
int
sw_databases_with_webhooks(SwWebhookDatabase *dbs, int max)
{
	int			n = 0;

	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	for (int i = 0; i < shared->nentries && n < max; i++)
	{
		SwDatabaseEntry *e = &entries()[i];

		if (!takes_webhooks(e))
			continue;
		dbs[n].dboid = e->dboid;
		dbs[n].name = e->name;
		n++;
	}
	LWLockRelease(shared->lock);
	return n;
}

/*
 * Which process writes the webhook requests of a database (pid 0: none),
 * and in what state, with the error that brought it there (NULL leaves
 * the error as it is).
 */
void
sw_database_set_webhook_writer(Oid dboid, pid_t pid, const char *state, const char *error)
{
	SwDatabaseEntry *e;

	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(dboid);
	if (e)
	{
		e->webhook_pid = pid;
		strlcpy(e->webhook_state, state, SW_WEBHOOK_STATE_LEN);
		if (error)
			strlcpy(e->webhook_error, error, SW_WEBHOOK_ERROR_LEN);
	}
	LWLockRelease(shared->lock);
}

/*
 * The process that writes the webhook requests of a database leaves: the
 * database has none, unless another one took its place meanwhile (a relay
 * of a webhook server that left may end after its successor began).
 */
void
sw_database_clear_webhook_writer(Oid dboid, pid_t pid)
{
	SwDatabaseEntry *e;

	if (shared == NULL)
		return;
	LWLockAcquire(shared->lock, LW_EXCLUSIVE);
	e = find_entry(dboid);
	if (e && e->webhook_pid == pid)
	{
		e->webhook_pid = 0;
		e->webhook_state[0] = '\0';
	}
	LWLockRelease(shared->lock);
}

/*
 * Which process writes the webhook requests of a database, its state and
 * error (of SW_WEBHOOK_STATE_LEN and SW_WEBHOOK_ERROR_LEN); false if the
 * database has no entry.
 */
bool
sw_database_webhook_writer(Oid dboid, pid_t *pid, char *state, char *error)
{
	SwDatabaseEntry *e;
	bool		found;

	*pid = 0;
	state[0] = error[0] = '\0';
	if (shared == NULL)
		return false;
	LWLockAcquire(shared->lock, LW_SHARED);
	e = find_entry(dboid);
	found = e != NULL;
	if (e)
	{
		*pid = e->webhook_pid;
		strlcpy(state, e->webhook_state, SW_WEBHOOK_STATE_LEN);
		strlcpy(error, e->webhook_error, SW_WEBHOOK_ERROR_LEN);
	}
	LWLockRelease(shared->lock);
	return found;
}
