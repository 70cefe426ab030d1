/*-------------------------------------------------------------------------
 *
 * webhook_worker.c
 *		  The background worker that writes webhook requests into their
 *		  source tables, and answers them after the commit
 *
 * This is the library source_writes_webhook, the only one linked with
 * libmicrohttpd.  The launcher starts one such worker, the webhook server,
 * while any database served has webhook sources: connected to the
 * database that source_writes.database names when that one is served,
 * else to none.  It serves source_writes.webhook_listen (webhook_server.c,
 * whose threads never call PostgreSQL), writes the requests to its own
 * database's webhook sources itself, and hands those to other databases
 * to a relay, a worker of theirs that runs this file's code without an
 * HTTP server (webhook_relay.c).
 *
 * The worker's main thread waits on its latch and on the server's pipe.
 * It takes the requests that came meanwhile and writes them in one
 * transaction; after the commit it answers them all: 200 only for rows
 * that are durably committed.  POST /<database>/<schema>/<table> appends
 * the body to that webhook source table, as the table's owner, with origin
 * webhook; the names are percent-decoded, as PostgreSQL spells them.
 * Requests that come while a group is written join it, up to
 * SW_WEBHOOK_GROUP of them and for source_writes.webhook_join_time after
 * it began, so that one commit (and its WAL flush) serves as many as it
 * can; each round of them is written with a new snapshot, and a catalog
 * change ends the joining (what the group resolved and prepared would be
 * out of date for them).  Those that come later form the next group.
 *
 * A group resolves each address it was sent to once, and writes the
 * requests to one table together, in the order they came, in one batch of
 * the table: one writer, which runs as the table's owner while it writes
 * them (the requests to another table run as that one's owner).  They are
 * written in one subtransaction, their rows inserted many at a time; if
 * one fails, the subtransaction is rolled back, that request is answered
 * with its error, and the others are written again, each in a
 * subtransaction of its own, so that a bad request fails alone.  What the
 * worker prepared for a table (its options, its decoder) is kept from one
 * group to the next, and made again when the table, its server, a
 * function or the caches change (relcache and syscache invalidations).
 * The table's code runs as its owner, restricted, with a search_path of
 * pg_catalog (writer.c), also when the worker's own role owns the table;
 * what it leaves to the session (advisory locks, prepared statements) is
 * released after each group.
 *
 * A table with signature_header takes only requests signed with the
 * secret of its owner's user mapping for its server (or the server's
 * mapping for PUBLIC, as GetUserMapping() finds them): HMAC-SHA256 of the
 * raw body, in hex or base64, after signature_prefix, compared in constant
 * time.  A request with a wrong signature gets 403; one without the header
 * gets what a request to no table gets (404, before its body is read, the
 * server's threads looking at the map below), so that who does not sign
 * cannot tell which signed tables there are; either writes nothing.
 *
 * Refused requests are counted in the sources view, and logged at LOG at
 * most once a minute for each table (the others at DEBUG1): whoever can
 * connect can make requests be refused.
 *
 * A table with idempotency_header keeps the key each delivery carries in
 * that header (deliveries.c), in the delivery's subtransaction.  A later
 * delivery with a key that is kept writes nothing: it gets the first one's
 * answer, or 422 if its body differs.  Requests of one group are written
 * in turn, so repeats that arrive together are written once.
 *
 * Bodies, by the table's format: json, one JSON value (an object) or, if
 * the body is not one, a value a line (NDJSON); json_array, each element
 * of a JSON array; text and bytes, the whole body.  Each is one message
 * for the decoder (decode.c), with the request's headers and its arrival
 * time, written as it is found.
 *
 * With source_writes.webhook_ssl_cert_file and webhook_ssl_key_file set,
 * the server speaks HTTPS only.  This thread reads the files (the key
 * checked as PostgreSQL checks ssl_key_file) and hands their PEM text to
 * the server.  A reload re-reads them: when they, or webhook_listen,
 * changed, the server restarts with them; when they cannot be used, the
 * server keeps its previous configuration and the log says why, as
 * PostgreSQL does with its own ssl settings.  At start, they are an error.
 *
 * The server's threads check a table's max_body_bytes before they read
 * the body, from a map of the webhook sources' addresses and limits that
 * the main thread publishes at start and again whenever it has taken in
 * catalog changes (a syscache callback marks the map stale).  A request
 * over the map's limit, or to an address the map does not know, waits,
 * with its headers only, for the main thread to publish a fresh map
 * before it is answered 413 or 404, or its body is read.
 *
 * One table must not hold up the others: a table that DDL or maintenance
 * holds locked is not waited for (503), and a request, or the preparing of
 * a table for a group, that takes longer than
 * source_writes.webhook_request_timeout is cancelled and answered 503,
 * also when its code catches the cancel.
 *
 * A request's memory is freed when it is written.  Whatever
 * synchronous_commit the database or a role sets, the commit waits for its
 * flush (and synchronous standbys) before the rows are visible and the
 * answers go.  Clients are told what was wrong with their body (an error
 * that reading it raised itself, and errors of classes 22 and 23: the
 * message, the column, where; not the context of the table's code); of
 * other errors only that the server failed, with 500 or, for errors that
 * pass (a lock, resources, shutdown), 503.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "common/base64.h"
#include "common/cryptohash.h"
#include "common/hmac.h"
#include "common/sha2.h"
#include "common/jsonapi.h"
#include "foreign/foreign.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"

#include "fdw/fdw.h"
#include "ingest/ingest.h"
#include "log/log.h"
#include "source_writes.h"
#include "webhook/webhook.h"
#include "webhook/webhook_server.h"
#include "workers/workers.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void source_writes_webhook_main(Datum main_arg);
PGDLLEXPORT void source_writes_webhook_relay_main(Datum main_arg);

/* how long the worker waits between looks at its latch and the server */
#define SW_WEBHOOK_WAIT_MS		1000

/*
 * The most requests written in one transaction.  Each may take a
 * subtransaction ID of its own (when it is written alone, or again after
 * a request written with it failed): more than the cache of them that
 * every snapshot reads would send snapshots of the whole cluster to
 * pg_subtrans meanwhile.  (The server's SW_WEBHOOK_MAX_IN_FLIGHT keeps
 * groups no larger today.)
 */
#define SW_WEBHOOK_GROUP		PGPROC_MAX_CACHED_SUBXIDS

/* the largest certificate or key file the worker reads */
#define SW_WEBHOOK_MAX_PEM_FILE	(1024 * 1024)

/*
 * The cancels a request's time limit sends before it ends the worker: a
 * table's code that catches them all would hold up every other table.
 */
#define SW_WEBHOOK_CANCELS		3

/*
 * After a request failed among others written together: for how many of
 * its table's next writes (rounds of a group that have requests for it)
 * they are written a request at a time, so that a table that is sent bad
 * requests all the time writes most of them once, not twice.
 */
#define SW_WEBHOOK_CAREFUL_WRITES	16

/* the most tables whose ingestion the worker keeps between groups */
#define SW_WEBHOOK_KEPT_TABLES	128

/* room for the part of a body being written ("element 12 of the body") */
#define SW_WHERE_BYTES			64

/* the requests of a group: taken together, written in one transaction */
typedef struct GroupRequest
{
	SwRequest  *request;
	Oid			relid;			/* the source it is for, if any */
	struct TableEntry *table;	/* where it goes, if it can be written */
	int			status;
	char	   *text;
	const char *note;			/* for the log and the sources view, or NULL */
	bool		refused;		/* by its checks: to be logged */
} GroupRequest;

/*
 * A request without its table's signature header is answered as one to no
 * table (404, SW_WEBHOOK_NOT_FOUND_TEXT), so that who does not sign cannot
 * tell which signed tables there are; the sources view and the log say
 * why.
 */
#define SW_UNSIGNED_NOTE "the request has no signature header: it was answered as if there were no table at its address"
#define SW_UNSIGNED_DETAIL "The request has no signature header: it was answered as if there were no table at its address."

/*
 * The refusals of a table's requests are logged at LOG once a minute at
 * most; the others at DEBUG1, and the next line at LOG says how many
 * there were.  Whoever can connect can make requests be refused.
 */
#define SW_REFUSALS_LOGGED_MS	(60 * 1000)

typedef struct RefusalsLogged
{
	Oid			relid;			/* the table; InvalidOid for no table */
	TimestampTz logged;			/* the last refusal logged at LOG */
	int64		unlogged;		/* refusals since, logged at DEBUG1 only */
} RefusalsLogged;

/* the tables whose refusals were logged, at most SW_REFUSALS_KEPT */
#define SW_REFUSALS_KEPT		1024
static HTAB *refusals_logged = NULL;

static char *listening = NULL;	/* the webhook_listen the server serves */
static char *serving_cert = NULL;	/* the PEM text it serves with, or NULL */
static char *serving_key = NULL;
static char *database_name = NULL;	/* ours; NULL: none */
static bool relay_mode = false; /* a relay: requests come from the server */
static bool server_gone = false;	/* (a relay) the server left */
static SwRequest *in_hand = NULL;	/* taken, not written yet */
static SwRequest *writing = NULL;	/* being written, not answered yet */
static MemoryContext request_cxt = NULL;	/* what writing a request takes */
static SwRequest *checking = NULL;	/* taken for a look at their limit */
static TimeoutId request_timeout;	/* source_writes.webhook_request_timeout */
static volatile sig_atomic_t request_timed_out = 0;	/* cancels it asked for */
static bool limits_stale = true;	/* the server's map of limits may be */
static bool publishing = false; /* making it: every change counts */
static Oid *tracked = NULL;		/* the sources in the map, counted */
static int	ntracked = -1;
static uint32 *tracked_hashes = NULL;	/* their hash values in RELOID */
static uint32 *tracked_schema_hashes = NULL;	/* their schemas' */

/*
 * What the worker keeps of a webhook source table from one group to the
 * next: its ingestion (options, decoder), made when a group first writes
 * to the table and made again after the table, its server or the cache
 * changed (invalidation callbacks).  While a group writes to the table,
 * the table is open and the ingestion's batch begun: one writer for all
 * the group's requests to it.
 */
typedef struct TableEntry
{
	Oid			relid;			/* the hash key */
	bool		valid;			/* false: to be made again */
	MemoryContext cxt;			/* the ingestion's memory */
	SwIngest   *ing;			/* NULL until made */
	Relation	ftrel;			/* open in the current group, else NULL */
	bool		begun;			/* its batch begun in the current group */
	int			careful;		/* writes to make a request at a time */
	struct TableEntry *next_open;	/* the group's other open tables */
} TableEntry;

/*
 * Changes taken in that may concern a group's requests, counted: of a
 * cached table, of the sources' addresses, of servers, functions, roles.
 */
static uint64 cache_changes = 0;
static HTAB *tables = NULL;		/* relid -> TableEntry */
static MemoryContext tables_cxt = NULL;
static bool tables_changed = false; /* some entry is no longer valid */
static TableEntry *open_tables = NULL;	/* in the current group */

/*
 * The address a group's requests were sent to, resolved once a group:
 * its table, opened, or the answer to give each request sent there.
 */
typedef struct GroupPath
{
	const char *path;
	Oid			relid;			/* the source it names, if any */
	TableEntry *table;			/* NULL: answer status and text */
	int			status;
	char	   *text;
	bool		look_again;		/* in a later round: none, or locked */
	bool		signature_read; /* signature_header read (unopened table) */
	char	   *signature_header;	/* the table's, or NULL */
} GroupPath;

/*
 * Forget a certificate or key read by read_pem_file, wiping it first; NULL
 * is none.
 */
static void
free_pem(char *text)
{
	if (text == NULL)
		return;
	explicit_bzero(text, strlen(text));
	pfree(text);
}

/* the same PEM text, or both none? */
static bool
pem_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

/*
 * Read the certificate or private key file that a TLS setting names,
 * whole, into TopMemoryContext; NULL if it cannot be used, after saying
 * why at elevel.  A relative path is relative to the data directory, our
 * working directory, as for ssl_cert_file.  A key file is checked as
 * PostgreSQL checks ssl_key_file (check_ssl_key_file_permissions() in
 * be-secure-common.c): a regular file, owned by the database user with no
 * group or world access, or by root with group read at most.  Messages
 * name the file, never what it holds.
 */
static char *
read_pem_file(const char *path, bool is_key, int elevel)
{
	const char *what = is_key ? "private key" : "certificate";
	struct stat st;
	int			fd;
	char	   *text;
	size_t		len = 0;
	ssize_t		n = 0;

	if (stat(path, &st) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not access webhook server %s file \"%s\": %m", what, path)));
		return NULL;
	}
	if (!S_ISREG(st.st_mode))
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server %s file \"%s\" is not a regular file", what, path)));
		return NULL;
	}
	if (is_key && st.st_uid != geteuid() && st.st_uid != 0)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server private key file \"%s\" must be owned by the database user or root",
						path)));
		return NULL;
	}
	if (is_key &&
		((st.st_uid == geteuid() && (st.st_mode & (S_IRWXG | S_IRWXO))) ||
		 (st.st_uid == 0 && (st.st_mode & (S_IWGRP | S_IXGRP | S_IRWXO)))))
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server private key file \"%s\" has group or world access",
						path),
				 errdetail("File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.")));
		return NULL;
	}
	if (st.st_size > SW_WEBHOOK_MAX_PEM_FILE)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server %s file \"%s\" is too large", what, path),
				 errdetail("A certificate or key file may hold at most %d bytes.",
						   SW_WEBHOOK_MAX_PEM_FILE)));
		return NULL;
	}

	fd = OpenTransientFile(path, O_RDONLY | PG_BINARY);
	if (fd < 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not open webhook server %s file \"%s\": %m", what, path)));
		return NULL;
	}
	text = MemoryContextAllocZero(TopMemoryContext, st.st_size + 1);
	while (len < (size_t) st.st_size &&
		   (n = read(fd, text + len, st.st_size - len)) > 0)
		len += n;
	if (n < 0)
	{
		int			save_errno = errno;

		CloseTransientFile(fd);
		free_pem(text);
		errno = save_errno;
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not read webhook server %s file \"%s\": %m", what, path)));
		return NULL;
	}
	CloseTransientFile(fd);
	text[len] = '\0';

	/* PEM text, so that what GnuTLS says of it is about its contents */
	if (strlen(text) != len ||
		(!is_key && strstr(text, "-----BEGIN CERTIFICATE-----") == NULL) ||
		(is_key && (strstr(text, "-----BEGIN ") == NULL ||
					strstr(text, "PRIVATE KEY-----") == NULL)))
	{
		explicit_bzero(text, len);	/* all of it, past a NUL too */
		pfree(text);
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 is_key ?
				 errmsg("webhook server private key file \"%s\" holds no private key in PEM format", path) :
				 errmsg("webhook server certificate file \"%s\" holds no certificate in PEM format", path),
				 is_key ?
				 errdetail("The file must hold the private key as a block beginning with \"-----BEGIN PRIVATE KEY-----\" or another \"-----BEGIN ... PRIVATE KEY-----\" line.") :
				 errdetail("The file must hold the certificate as a block beginning with \"-----BEGIN CERTIFICATE-----\", followed by any intermediate certificates.")));
		return NULL;
	}
	if (is_key && (strstr(text, "-----BEGIN ENCRYPTED PRIVATE KEY-----") != NULL ||
				   strstr(text, "Proc-Type: 4,ENCRYPTED") != NULL))
	{
		free_pem(text);
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server private key file \"%s\" is encrypted", path),
				 errdetail("The webhook server cannot ask for a passphrase."),
				 errhint("Store the key unencrypted, readable only by the database user.")));
		return NULL;
	}
	return text;
}

/*
 * Read the certificate and key that source_writes.webhook_ssl_cert_file
 * and webhook_ssl_key_file name, for the server: both NULL when neither
 * is set.  Returns false, after saying why at elevel, when they cannot be
 * used: one set without the other, a libmicrohttpd without TLS, a file
 * that read_pem_file() refuses.
 */
static bool
read_tls_files(int elevel, char **cert, char **key)
{
	bool		has_cert = sw_webhook_ssl_cert_file[0] != '\0';
	bool		has_key = sw_webhook_ssl_key_file[0] != '\0';

	*cert = *key = NULL;
	if (!has_cert && !has_key)
		return true;
	if (!has_cert || !has_key)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("source_writes.webhook_ssl_cert_file and source_writes.webhook_ssl_key_file must be set together"),
				 has_cert ?
				 errdetail("Only source_writes.webhook_ssl_cert_file is set.") :
				 errdetail("Only source_writes.webhook_ssl_key_file is set."),
				 errhint("Set both to serve HTTPS, or neither to serve HTTP.")));
		return false;
	}
	if (!sw_webhook_server_tls_supported())
	{
		ereport(elevel,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("webhook server cannot serve HTTPS"),
				 errdetail("The libmicrohttpd library it uses was built without TLS support."),
				 errhint("Install a libmicrohttpd built with GnuTLS, or empty source_writes.webhook_ssl_cert_file and source_writes.webhook_ssl_key_file to serve HTTP.")));
		return false;
	}
	*cert = read_pem_file(sw_webhook_ssl_cert_file, false, elevel);
	if (*cert == NULL)
		return false;
	*key = read_pem_file(sw_webhook_ssl_key_file, true, elevel);
	if (*key == NULL)
	{
		free_pem(*cert);
		*cert = NULL;
		return false;
	}
	return true;
}

/*
 * The file descriptors the webhook server may open: SW_WEBHOOK_SERVER_FDS,
 * or fewer if the process may not open that many besides PostgreSQL's
 * own.  Those (fd.c's) stay within max_files_per_process, or within the
 * limit of open files (RLIMIT_NOFILE) if that is lower; the server takes
 * what the limit leaves above them.  The process's soft limit is raised
 * for it as far as its hard limit allows (PostgreSQL uses poll() and
 * epoll, not select(), which would fail on higher descriptors).  If that
 * is still too low, fd.c is told that descriptors are used outside it
 * (AcquireExternalFD), so that it keeps fewer files open: up to a quarter
 * of its own, of the third it lets go (the rest is for the worker's wait
 * event sets and others).  Worked out once; in *limit, the limit of open
 * files then.
 */
static int
server_fds(unsigned long *limit)
{
	static int	fds = -1;
	static unsigned long files = 0;
	struct rlimit rl;
	rlim_t		ours;

	if (fds < 0)
	{
		fds = SW_WEBHOOK_SERVER_FDS;
		if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		{
			ours = Min((rlim_t) max_files_per_process, rl.rlim_cur);
			if (rl.rlim_cur < ours + SW_WEBHOOK_SERVER_FDS)
			{
				struct rlimit raised = rl;

				raised.rlim_cur = ours + SW_WEBHOOK_SERVER_FDS;
				if (rl.rlim_max != RLIM_INFINITY && raised.rlim_cur > rl.rlim_max)
					raised.rlim_cur = rl.rlim_max;
				if (setrlimit(RLIMIT_NOFILE, &raised) == 0)
					rl = raised;
			}
			fds = (int) Min(rl.rlim_cur - ours, (rlim_t) SW_WEBHOOK_SERVER_FDS);
			for (int taken = 0; fds < SW_WEBHOOK_SERVER_FDS &&
				 taken < max_safe_fds / 4 && AcquireExternalFD(); taken++)
				fds++;
			files = (unsigned long) rl.rlim_cur;
		}
	}
	*limit = files;
	return fds;
}

/*
 * Start serving an address of webhook_listen's form, with HTTPS if a
 * certificate and key are given (the server keeps them while it serves);
 * true if it serves, else false after saying why at elevel.
 */
static bool
start_server(const char *address, char *cert, char *key, int elevel)
{
	char	   *value = pstrdup(address);
	char	   *colon = strrchr(value, ':');
	const char *error;
	char	   *host = value;
	unsigned long files;
	int			fds = server_fds(&files);
	int			connections;

	*colon = '\0';
	if (host[0] == '[' && colon[-1] == ']')
	{
		host++;					/* [::1]:8080 */
		colon[-1] = '\0';
	}
	error = sw_webhook_server_start(host, atoi(colon + 1), cert, key, fds, &connections);
	pfree(value);
	if (error)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server cannot start"),
				 errdetail_internal("%s.", error),
				 cert ?
				 errhint("Check source_writes.webhook_listen, and that source_writes.webhook_ssl_cert_file and source_writes.webhook_ssl_key_file name a certificate and its key.") :
				 errhint("Check source_writes.webhook_listen.")));
		return false;
	}
	sw_webhook_worker_report_error(NULL);
	listening = MemoryContextStrdup(TopMemoryContext, address);
	serving_cert = cert;
	serving_key = key;
	ereport(LOG,
			(errmsg("webhook server listening on %s%s",
					listening, cert ? " (HTTPS)" : "")));
	if (connections < SW_WEBHOOK_MAX_CONNECTIONS)
		ereport(LOG,
				(errmsg("the webhook server keeps at most %d connections, not %d",
						connections, SW_WEBHOOK_MAX_CONNECTIONS),
				 errdetail("The worker may open %lu files (RLIMIT_NOFILE), and PostgreSQL's own files take up to %d of them (max_files_per_process).",
						   files, max_files_per_process),
				 errhint("Raise the limit of open files of PostgreSQL's service (LimitNOFILE, ulimit -n), or lower max_files_per_process.")));
	return true;
}

/*
 * Start serving webhook_listen, with TLS if the settings say so, or fail
 * the worker with the reason (the launcher starts it again).
 */
static void
start_configured_server(void)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *cert;
	char	   *key;

	PG_TRY();
	{
		(void) read_tls_files(ERROR, &cert, &key);
		(void) start_server(sw_webhook_listen, cert, key, ERROR);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		/* the sources view says why (and how), until a server starts */
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->detail)
		{
			int			len = strlen(edata->detail);

			if (len > 0 && edata->detail[len - 1] == '.')
				len--;
			sw_webhook_worker_report_error(psprintf("%s: %.*s", edata->message,
													len, edata->detail));
		}
		else
			sw_webhook_worker_report_error(edata->message);
		PG_RE_THROW();
	}
	PG_END_TRY();
}

/* a reload's settings cannot be used: say what the server keeps serving */
static void
report_not_reloaded(void)
{
	ereport(LOG,
			(errmsg("webhook server configuration was not reloaded"),
			 errdetail("The server keeps serving %s on %s.",
					   serving_cert ? "HTTPS" : "HTTP", listening)));
}

/*
 * After a reload: when webhook_listen, the TLS settings or the files they
 * name changed, restart the server with them (what is queued is answered
 * 503).  Settings that cannot be used, or with which the server cannot
 * start, are logged, and the server keeps (or takes again) its previous
 * configuration.  Returns whether the server restarted, with a new pipe.
 */
static bool
reconfigure_server(void)
{
	char	   *old_listening = listening;
	char	   *old_cert = serving_cert;
	char	   *old_key = serving_key;
	char	   *cert;
	char	   *key;

	if (!read_tls_files(LOG, &cert, &key))
	{
		report_not_reloaded();
		return false;
	}
	if (strcmp(listening, sw_webhook_listen) == 0 &&
		pem_equal(cert, serving_cert) && pem_equal(key, serving_key))
	{
		free_pem(cert);
		free_pem(key);
		return false;
	}

	if (strcmp(listening, sw_webhook_listen) != 0)
		ereport(LOG,
				(errmsg("webhook server moves from %s to %s",
						listening, sw_webhook_listen)));
	else
		ereport(LOG,
				(errmsg("webhook server restarts on %s", listening),
				 errdetail("Its TLS settings or files changed.")));
	sw_webhook_server_stop();
	if (start_server(sw_webhook_listen, cert, key, LOG))
	{
		pfree(old_listening);
		free_pem(old_cert);
		free_pem(old_key);
		return true;
	}

	/* back to what it served; if that fails too, the worker fails */
	free_pem(cert);
	free_pem(key);
	report_not_reloaded();
	(void) start_server(old_listening, old_cert, old_key, ERROR);
	pfree(old_listening);
	return true;
}

/*
 * The requests that came (a list, through next; NULL if none): from the
 * server's threads, those to its own database (the others go to their
 * relays, webhook_relay.c); in a relay, from the server.
 */
static SwRequest *
take_requests(void)
{
	SwRequest  *requests;

	if (relay_mode)
		return sw_relay_take(&server_gone);
	requests = sw_webhook_server_take();
#ifdef SW_BENCHMARK
	if (sw_webhook_bench_discard)
		return requests;		/* all of them discarded */
#endif
	return sw_relay_route(requests);
}

/* answer a request taken; it is not ours any more */
static void
answer_request(SwRequest *r, int status, const char *text)
{
	if (relay_mode)
		sw_relay_answer(r, status, text);
	else
		sw_webhook_server_answer(r, status, text);
}

/* close a taken request's connection without an answer */
static void
hang_up_request(SwRequest *r)
{
	if (relay_mode)
		sw_relay_answer(r, 0, NULL);
	else
		sw_webhook_server_hang_up(r);
}

/* answer each request of a list 503 */
static void
answer_unavailable(SwRequest *r)
{
	while (r)
	{
		SwRequest  *next = r->next;

		answer_request(r, 503, SW_WEBHOOK_SHUTTING_DOWN_TEXT);
		r = next;
	}
}

/* resume each request of a list taken for a look at its limit */
static void
resume_checked(SwRequest *r, int status)
{
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_checked(r, status);
		r = next;
	}
}

/*
 * When the worker leaves: answer what it holds, and stop the server.  A
 * group it was writing is rolled back first, and what its tables' code
 * left to the session released (as ShutdownPostgres would, after this),
 * so that no lock of theirs is held while the answers go.
 */
static void
stop_server(int code, Datum arg)
{
	AbortOutOfAnyTransaction();
	sw_writer_forget_session_state();
	resume_checked(checking, 503);
	checking = NULL;
	answer_unavailable(writing);
	writing = NULL;
	answer_unavailable(in_hand);
	in_hand = NULL;
	sw_relay_finish();
	sw_relay_stop_all();
	sw_webhook_server_stop();
	if (OidIsValid(MyDatabaseId))
		sw_database_set_webhook_writer(MyDatabaseId, 0, "", NULL);
}

/*
 * When a relay leaves: as the server, it answers what it holds, after its
 * group is rolled back; the server learns it left from its queues.
 */
static void
stop_relay(int code, Datum arg)
{
	AbortOutOfAnyTransaction();
	sw_writer_forget_session_state();
	answer_unavailable(writing);
	writing = NULL;
	answer_unavailable(in_hand);
	in_hand = NULL;
	sw_relay_leave();
}

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
	if (strcmp(parts[0], database_name) != 0)
		return InvalidOid;

	/*
	 * An address that the map of webhook sources does not know, while the
	 * map is fresh, is none: its names are not looked up, which would leave
	 * an entry in the catalog caches for each name that is not there (as
	 * many as clients send).  (The map is made fresh between groups.)
	 */
	if (!limits_stale && sw_webhook_server_knows(path) == 0)
		return InvalidOid;
	nsp = get_namespace_oid(parts[1], true);
	if (!OidIsValid(nsp))
		return InvalidOid;
	relid = get_relname_relid(parts[2], nsp);
	if (!OidIsValid(relid) || !sw_source_lookup(relid, &source) ||
		source.kind != SW_KIND_WEBHOOK)
		return InvalidOid;
	return relid;
}

/*
 * Whether PostgreSQL's JSON parser is reading a request's body for the
 * worker (and not writing an element it found): its errors (a body nested
 * deeper than the stack allows) are the body's, as the decoder's are.
 */
static bool parsing_body = false;

/*
 * Writing the elements of a JSON array as PostgreSQL's parser finds them:
 * its semantic actions' state.
 */
typedef struct ArrayWriter
{
	JsonLexContext *lex;
	int			depth;
	const char *start;			/* of the element at depth 1 */
	SwIngest   *ing;
	SwMessage  *message;
	char	   *where;			/* the error context's text */
	int			n;
} ArrayWriter;

static void
array_nest(void *state)
{
	((ArrayWriter *) state)->depth++;
}

static void
array_unnest(void *state)
{
	((ArrayWriter *) state)->depth--;
}

static void
array_element_start(void *state, bool isnull)
{
	ArrayWriter *w = state;

	if (w->depth == 1)
		w->start = w->lex->token_start;
}

static void
array_element_end(void *state, bool isnull)
{
	ArrayWriter *w = state;

	if (w->depth != 1)
		return;
	w->message->value = w->start;
	w->message->value_len = w->lex->prev_token_terminator - w->start;
	snprintf(w->where, SW_WHERE_BYTES, "element %d of the body", ++w->n);
	parsing_body = false;
	sw_ingest_write(w->ing, w->message);
	parsing_body = true;
	strlcpy(w->where, "the body", SW_WHERE_BYTES);
}

/* a body that PostgreSQL's JSON parser cannot take: say where */
static void
bad_json(JsonLexContext *lex, JsonParseErrorType result)
{
	int			byte = sw_json_error_byte(lex);

	ereport(ERROR,
			(errcode(sw_json_error_code(result)),
			 errmsg("invalid JSON in the body at byte %d", byte),
			 errdetail("%s", json_errdetail(result, lex))));
}

/* an error context: which piece of a body is decoded */
static void
piece_context(void *arg)
{
	errcontext("%s", (char *) arg);
}

/* write one message of a body */
static void
write_piece(SwIngest *ing, SwMessage *m, const char *value, size_t len)
{
	m->value = value;
	m->value_len = len;
	sw_ingest_write(ing, m);
}

/*
 * Write a request's body into its table: the messages its format makes of
 * it, each as it is found, through the table's ingestion (its batch begun
 * by the group), which raises the first error.  Returns how many rows.
 * Which part of the body is being written goes into where (of
 * SW_WHERE_BYTES), for the error's context and the caller.
 */
static int
write_body(SwRequest *r, Relation ftrel, SwIngest *ing, char *where)
{
	const SwSourceTable *st = sw_ingest_source_table(ing);
	SwHeader   *headers = palloc0(sizeof(SwHeader) * Max(r->nheaders, 1));
	const char *body = r->body ? r->body : "";
	SwMessage	m = {0};
	ErrorContextCallback errcb;
	int			n = 0;

	for (int i = 0; i < r->nheaders; i++)
	{
		headers[i].name = r->headers[i].name;
		headers[i].value = r->headers[i].value;
		headers[i].len = r->headers[i].value ? strlen(r->headers[i].value) : 0;
	}
	m.nheaders = r->nheaders;
	m.headers = headers;
	m.partition = -1;
	m.offset = -1;
	m.timestamp_ms = r->received_ms;

	strlcpy(where, "the body", SW_WHERE_BYTES);
	errcb.callback = piece_context;
	errcb.arg = where;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	if (st->format == SW_FORMAT_JSON_ARRAY)
	{
		JsonSemAction sem = {0};
		ArrayWriter w = {0};
		JsonParseErrorType result;

		if (body[strspn(body, " \t\r\n")] != '[')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("the body is not a JSON array"),
					 errhint("Source table \"%s\" has format json_array: post [{...}, {...}].",
							 RelationGetRelationName(ftrel))));
		w.lex = makeJsonLexContextCstringLen((char *) body, r->body_len,
											 GetDatabaseEncoding(), false);
		w.ing = ing;
		w.message = &m;
		w.where = where;
		sem.semstate = &w;
		sem.object_start = array_nest;
		sem.object_end = array_unnest;
		sem.array_start = array_nest;
		sem.array_end = array_unnest;
		sem.array_element_start = array_element_start;
		sem.array_element_end = array_element_end;
		parsing_body = true;
		result = pg_parse_json(w.lex, &sem);
		parsing_body = false;
		if (result != JSON_SUCCESS)
			bad_json(w.lex, result);
		n = w.n;
	}
	else if (st->format == SW_FORMAT_JSON)
	{
		JsonSemAction sem = {0};
		const char *first_nl = memchr(body, '\n', r->body_len);
		bool		one_value;

		/* a line, blank space after it aside, is one value: parsed once */
		one_value = body[strspn(body, " \t\r\n")] != '\0' &&
			(first_nl == NULL ||
			 first_nl + strspn(first_nl, " \t\r\n") == body + r->body_len);
		if (!one_value)
		{
			parsing_body = true;
			one_value = pg_parse_json(makeJsonLexContextCstringLen((char *) body, r->body_len,
																  GetDatabaseEncoding(), false),
									  &sem) == JSON_SUCCESS;
			parsing_body = false;
		}
		if (one_value)
		{
			write_piece(ing, &m, body, r->body_len);	/* one value */
			n = 1;
		}
		else
		{
			/* NDJSON: a value a line; empty lines do not count */
			size_t		at = 0;
			int			line = 0;

			while (at < r->body_len)
			{
				const char *nl = memchr(body + at, '\n', r->body_len - at);
				size_t		end = nl ? (size_t) (nl - body) : r->body_len;
				size_t		blank = 0;

				line++;
				while (at + blank < end && strchr(" \t\r", body[at + blank]))
					blank++;
				if (at + blank < end)
				{
					snprintf(where, SW_WHERE_BYTES, "line %d of the body", line);
					write_piece(ing, &m, body + at, end - at);
					n++;
				}
				at = end + 1;
			}
		}
		if (n == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TEXT_REPRESENTATION),
					 errmsg("the body is empty"),
					 errhint("Source table \"%s\" has format json: post an object, or one a line.",
							 RelationGetRelationName(ftrel))));
	}
	else
	{
		write_piece(ing, &m, body, r->body_len);
		n = 1;
	}

	error_context_stack = errcb.previous;
	return n;
}

/* the value of a request's header, found in any case; NULL if none */
static const char *
request_header(SwRequest *r, const char *name)
{
	const char *value = NULL;

	for (int i = 0; i < r->nheaders; i++)
		if (pg_strcasecmp(r->headers[i].name, name) == 0)
			value = r->headers[i].value;
	return value;
}

/*
 * Check what the table can take of a request: 0 if it can, else the
 * status to answer, with the text in *text: 413 for a body over its
 * max_body_bytes, 415 for a content type its format cannot take (none
 * given is taken).  Checked before the signature (no HMAC of a body the
 * table would refuse anyway), so the texts tell nothing of the table's
 * settings.
 */
static int
check_request(SwRequest *r, const SwSourceTable *st, char **text)
{
	const char *type = request_header(r, "Content-Type");
	size_t		len;
	bool		takes;

	if (r->body_len > (size_t) st->max_body_bytes)
	{
		*text = pstrdup(SW_WEBHOOK_TOO_LARGE_TEXT);
		return 413;
	}
	if (type == NULL || type[0] == '\0')
		return 0;
	len = strcspn(type, "; \t");
#define TYPE_IS(t) (len == strlen(t) && pg_strncasecmp(type, t, len) == 0)
	switch (st->format)
	{
		case SW_FORMAT_JSON:
			takes = TYPE_IS("application/json") || TYPE_IS("application/x-ndjson") ||
				TYPE_IS("application/ndjson") || TYPE_IS("text/plain");
			break;
		case SW_FORMAT_JSON_ARRAY:
			takes = TYPE_IS("application/json") || TYPE_IS("text/plain");
			break;
		case SW_FORMAT_TEXT:
			takes = len >= 5 && pg_strncasecmp(type, "text/", 5) == 0;
			takes |= TYPE_IS("application/json") || TYPE_IS("application/x-ndjson") ||
				TYPE_IS("application/xml") || TYPE_IS("application/x-www-form-urlencoded");
			break;
		default:
			takes = true;		/* bytes take anything */
			break;
	}
#undef TYPE_IS
	if (!takes)
	{
		*text = psprintf("this table cannot take content type \"%.*s\"\n",
						 (int) Min(len, 100), type);
		return 415;
	}
	return 0;
}

/*
 * Check a request's signature if the table wants one: 0 if it passes,
 * else the status to answer (403 when it does not match; a request
 * without the header is answered as to no table, 404, before this), with
 * the text in *text.  Nothing of the secret is told.
 */
static int
check_signature(SwRequest *r, Relation ftrel, const SwSourceTable *st, char **text)
{
	const char *value;
	const char *secret = NULL;
	UserMapping *mapping;
	ListCell   *lc;
	uint8		mac[PG_SHA256_DIGEST_LENGTH];
	uint8		sent[PG_SHA256_DIGEST_LENGTH + 3] = {0};
	int			sent_len = -1;
	pg_hmac_ctx *ctx;
	int			diff = 0;

	if (st->signature_header == NULL)
		return 0;
	value = request_header(r, st->signature_header);
	if (value == NULL)
	{
		*text = pstrdup(SW_WEBHOOK_NOT_FOUND_TEXT);
		return 404;
	}
	if (st->signature_prefix)
	{
		size_t		len = strlen(st->signature_prefix);

		if (strncmp(value, st->signature_prefix, len) != 0)
		{
			*text = psprintf("the signature in header \"%s\" does not begin with \"%s\"\n",
							 st->signature_header, st->signature_prefix);
			return 403;
		}
		value += len;
	}

	/* what was sent, as bytes */
	if (st->signature_base64)
	{
		if (pg_b64_dec_len(strlen(value)) <= (int) sizeof(sent))
			sent_len = pg_b64_decode(value, strlen(value), (char *) sent, sizeof(sent));
	}
	else if (strlen(value) == 2 * PG_SHA256_DIGEST_LENGTH)
	{
		sent_len = PG_SHA256_DIGEST_LENGTH;
		for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		{
			int			hi = sw_webhook_hex_digit(value[2 * i]);
			int			lo = sw_webhook_hex_digit(value[2 * i + 1]);

			if (hi < 0 || lo < 0)
				sent_len = -1;
			sent[i] = (uint8) (((hi & 0xf) << 4) | (lo & 0xf));
		}
	}

	/* the owner's secret, and the body's HMAC */
	mapping = GetUserMapping(ftrel->rd_rel->relowner, st->serverid);
	foreach(lc, mapping->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "secret") == 0)
			secret = defGetString(def);
	}
	if (secret == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("source table \"%s\" checks signatures, but its owner's user mapping for its server has no secret",
						RelationGetRelationName(ftrel))));
	ctx = pg_hmac_create(PG_SHA256);
	if (ctx == NULL ||
		pg_hmac_init(ctx, (const uint8 *) secret, strlen(secret)) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) (r->body ? r->body : ""), r->body_len) < 0 ||
		pg_hmac_final(ctx, mac, sizeof(mac)) < 0)
		elog(ERROR, "could not compute an HMAC: %s", pg_hmac_error(ctx));
	pg_hmac_free(ctx);

	/* in constant time */
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		diff |= mac[i] ^ sent[i];
	if (sent_len != PG_SHA256_DIGEST_LENGTH || diff != 0)
	{
		*text = psprintf("the signature in header \"%s\" does not match the body\n",
						 st->signature_header);
		return 403;
	}
	return 0;
}

/*
 * The idempotency key of a request to a table with idempotency_header, in
 * *key (NULL if it has none, or the table takes none), and the SHA-256 of
 * its body.  If the key was written already, or cannot be taken, returns
 * the status to answer, with the text in *text, and the request writes
 * nothing: 200 and the first delivery's answer for a repeat; 422 for a key
 * that came with another body; 503 while another transaction changes it
 * (the worker is the only one to write keys: compaction or a DROP);
 * 400 for a key that is empty, too long or not text.  Else returns 0.
 */
static int
check_idempotency(SwRequest *r, Oid relid, const SwSourceTable *st,
				  const char **key, uint8 *hash, char **text)
{
	pg_cryptohash_ctx *ctx;
	size_t		len;
	int32		rows;

	*key = NULL;
	if (st->idempotency_header == NULL ||
		(*key = request_header(r, st->idempotency_header)) == NULL)
		return 0;
	len = strlen(*key);
	if (len == 0 || len > SW_DELIVERY_KEY_MAX ||
		!pg_verifymbstr(*key, len, true))
	{
		*text = psprintf("the idempotency key in header \"%s\" must be 1 to %d bytes of text\n",
						 st->idempotency_header, SW_DELIVERY_KEY_MAX);
		return 400;
	}

	ctx = pg_cryptohash_create(PG_SHA256);
	if (ctx == NULL || pg_cryptohash_init(ctx) < 0 ||
		pg_cryptohash_update(ctx, (const uint8 *) r->body, r->body_len) < 0 ||
		pg_cryptohash_final(ctx, hash, PG_SHA256_DIGEST_LENGTH) < 0)
		elog(ERROR, "could not compute the SHA-256 of a webhook body: %s",
			 pg_cryptohash_error(ctx));
	pg_cryptohash_free(ctx);

	switch (sw_delivery_lookup(relid, *key, hash, &rows))
	{
		case SW_DELIVERY_NEW:
			return 0;
		case SW_DELIVERY_REPEAT:
			*text = psprintf("%d %s\n", rows, rows == 1 ? "row" : "rows");
			return 200;
		case SW_DELIVERY_CONFLICT:
			*text = pstrdup("this idempotency key came before with another body\n");
			return 422;
		case SW_DELIVERY_CHANGING:
			break;
	}
	*text = pstrdup("a delivery with this idempotency key is being changed; send it again\n");
	return 503;
}

/*
 * What a client is told of an error, and with which status.  Errors that
 * pass (a lock, resources, shutdown) get 503.  An error in what it sent:
 * one that reading its body raised itself (the decoder, a column's input
 * function, with no code of the table's between them: in_body),
 * or one of classes 22 and 23, gets 400, its message, for data exceptions
 * its detail (where the JSON broke), and where: the decoder's context line
 * (decoder_where, the column and field) and the part of the body (piece),
 * never the error's other context lines, which the table's own code adds
 * (its queries, its functions).  Of others, only that the server failed:
 * 500.
 */
static int
error_answer(ErrorData *edata, bool in_body, const char *decoder_where,
			 const char *piece, char **text)
{
	StringInfoData s;
	int			category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

	if (category == ERRCODE_TRANSACTION_ROLLBACK ||
		category == ERRCODE_INSUFFICIENT_RESOURCES ||
		category == ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE ||
		category == ERRCODE_OPERATOR_INTERVENTION ||
		category == ERRCODE_SYSTEM_ERROR)
	{
		*text = pstrdup("the server could not write the request now; send it again\n");
		return 503;
	}
	if (!in_body &&
		category != ERRCODE_DATA_EXCEPTION &&
		category != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
	{
		*text = pstrdup("the server failed to write the request; its log says why\n");
		return 500;
	}

	initStringInfo(&s);
	appendStringInfoString(&s, edata->message);
	if (edata->detail && category == ERRCODE_DATA_EXCEPTION)
		appendStringInfo(&s, ": %s", edata->detail);
	if (decoder_where[0])
		appendStringInfo(&s, " (%s%s%s)", decoder_where, piece[0] ? "; " : "", piece);
	else if (piece[0])
		appendStringInfo(&s, " (%s)", piece);
	appendStringInfoChar(&s, '\n');
	*text = s.data;
	return 400;
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
		cache_changes++;		/* a cache reset: all of them */
	if (tables == NULL)
		return;
	if (OidIsValid(relid))
	{
		e = hash_search(tables, &relid, HASH_FIND, NULL);
		if (e == NULL)
			return;
		e->valid = false;
		cache_changes++;
	}
	else
	{
		hash_seq_init(&seq, tables);
		while ((e = hash_seq_search(&seq)) != NULL)
			e->valid = false;
	}
	tables_changed = true;
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
static void
make_tables(void)
{
	HASHCTL		ctl;

	tables_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook tables",
									   ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(TableEntry);
	ctl.hcxt = tables_cxt;
	tables = hash_create("source_writes webhook tables", 16, &ctl,
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
static void
forget_tables(void)
{
	HASH_SEQ_STATUS seq;
	TableEntry *e;
	bool		all = hash_get_num_entries(tables) > SW_WEBHOOK_KEPT_TABLES;

	Assert(open_tables == NULL);
	tables_changed = false;
	hash_seq_init(&seq, tables);
	while ((e = hash_seq_search(&seq)) != NULL)
	{
		if (e->valid && e->ing && !all)
			continue;
		if (e->cxt)
			MemoryContextDelete(e->cxt);
		(void) hash_search(tables, &e->relid, HASH_REMOVE, NULL);
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

	e = hash_search(tables, &relid, HASH_ENTER, &found);
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
	e->next_open = open_tables;
	open_tables = e;
	return e;
}

/* before the group commits: close the tables it wrote to */
static void
close_tables(void)
{
	while (open_tables)
	{
		TableEntry *e = open_tables;

		Assert(!e->begun);
		table_close(e->ftrel, NoLock);
		open_tables = e->next_open;
		e->ftrel = NULL;
		e->begun = false;
		e->next_open = NULL;
	}
}

/*
 * After the group's transaction aborted: forget its batches, which went
 * with it, as did the tables' relations.
 */
static void
forget_open_tables(void)
{
	while (open_tables)
	{
		TableEntry *e = open_tables;

		if (e->begun)
			sw_ingest_abort(e->ing);
		open_tables = e->next_open;
		e->ftrel = NULL;
		e->begun = false;
		e->next_open = NULL;
	}
}

/*
 * A request took longer than source_writes.webhook_request_timeout: cancel
 * what it runs, as a statement timeout does.
 */
static void
request_timeout_handler(void)
{
	request_timed_out++;
	QueryCancelPending = true;
	/* code that catches the cancel, again and again, ends the worker */
	if (request_timed_out > SW_WEBHOOK_CANCELS)
		ProcDiePending = true;
	InterruptPending = true;
	SetLatch(MyLatch);
}

/*
 * Start a request's time limit: a cancel when it runs out, and again each
 * time as long again (code may catch a cancel).
 */
static void
start_request_clock(void)
{
	request_timed_out = 0;
	if (sw_webhook_request_timeout > 0)
		enable_timeout_every(request_timeout,
							 TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
														 sw_webhook_request_timeout),
							 sw_webhook_request_timeout);
}

/*
 * Stop it; true if it ran out.  A cancel it asked for and that nothing
 * took yet is dropped: it was for the request, which is over.
 */
static bool
stop_request_clock(void)
{
	disable_timeout(request_timeout, false);
	if (request_timed_out == 0)
		return false;
	QueryCancelPending = false;
	return true;
}

/* what a request, or a table's preparation, that ran out of time is told */
#define SW_TIMED_OUT_TEXT "the request took longer than the server gives one; send it again\n"
#define SW_TIMED_OUT_LOG "it took longer than source_writes.webhook_request_timeout"

/*
 * Run out of time though its code caught the cancel: an error, so that it
 * writes nothing all the same.
 */
static void
check_request_clock(void)
{
	if (stop_request_clock())
		ereport(ERROR,
				(errcode(ERRCODE_QUERY_CANCELED),
				 errmsg(SW_TIMED_OUT_LOG)));
}

/*
 * After an error caught where the request clock ran (timed_out from
 * stop_request_clock()): is it the cancel that the clock sent?  Then its
 * message becomes what the log says of a request that ran out of time.
 */
static bool
cancelled_by_clock(ErrorData *edata, bool timed_out)
{
	if (!timed_out || edata->sqlerrcode != ERRCODE_QUERY_CANCELED)
		return false;
	edata->message = pstrdup(SW_TIMED_OUT_LOG);
	return true;
}

/*
 * The level to log a refusal of a request to a table at (relid, or
 * InvalidOid for one that names no table it could open): LOG for the
 * first in SW_REFUSALS_LOGGED_MS, with how many were logged at DEBUG1 only
 * since the one before in *unlogged, else DEBUG1.
 */
static int
refusal_level(Oid relid, int64 *unlogged)
{
	TimestampTz now = GetCurrentTimestamp();
	RefusalsLogged *entry;
	bool		found;

	if (refusals_logged && hash_get_num_entries(refusals_logged) >= SW_REFUSALS_KEPT)
	{
		hash_destroy(refusals_logged);	/* of tables dropped since, most */
		refusals_logged = NULL;
	}
	if (refusals_logged == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(RefusalsLogged);
		ctl.hcxt = TopMemoryContext;
		refusals_logged = hash_create("source_writes webhook refusals logged", 64, &ctl,
									  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	entry = hash_search(refusals_logged, &relid, HASH_ENTER, &found);
	*unlogged = 0;
	if (found && !TimestampDifferenceExceeds(entry->logged, now, SW_REFUSALS_LOGGED_MS))
	{
		entry->unlogged++;
		return DEBUG1;
	}
	if (found)
		*unlogged = entry->unlogged;
	entry->logged = now;
	entry->unlogged = 0;
	return LOG;
}

/*
 * Log a request to path refused with status for the sake of table relid
 * (InvalidOid if none): with the error's message if given, and detail (a
 * sentence) if given.  At most one a minute for each table is logged at
 * LOG, the others at DEBUG1 (refusal_level).
 */
static void
log_refusal(Oid relid, const char *path, int status, const char *message,
			const char *detail)
{
	int64		unlogged;
	int			level = refusal_level(relid, &unlogged);
	StringInfoData details;

	if (!message_level_is_interesting(level))
		return;
	initStringInfo(&details);
	if (detail)
		appendStringInfoString(&details, detail);
	if (unlogged > 0)
		appendStringInfo(&details, "%s" INT64_FORMAT " more refusal%s of this table's requests since its last line at LOG %s logged at DEBUG1 only.",
						 detail ? " " : "", unlogged, unlogged == 1 ? "" : "s",
						 unlogged == 1 ? "was" : "were");
	ereport(level,
			(message ?
			 errmsg("webhook request to %s refused with status %d: %s", path, status, message) :
			 errmsg("webhook request to %s refused with status %d", path, status),
			 details.len > 0 ? errdetail_internal("%s", details.data) : 0));
	pfree(details.data);
}

/* log a request refused by its checks */
static void
log_refused(GroupRequest *g)
{
	log_refusal(g->relid, g->request->path, g->status, NULL,
				g->note ? SW_UNSIGNED_DETAIL : NULL);
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
static GroupPath *
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
	MemoryContextSwitchTo(request_cxt);
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
		else if (sw_database_restoring(MyDatabaseId))
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
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		bool		timed_out = stop_request_clock();
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
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
	MemoryContextReset(request_cxt);
	return p;
}

/*
 * Whether a request lacks the signature header of the table of path p,
 * which could not be opened (DDL holds it, or an error): as when it opens
 * (check_and_write), it is then answered as one to no table, so that who
 * does not sign cannot tell a signed table that DDL holds from none.  The
 * header is read from the table's catalog row, once for the group.
 */
static bool
lacks_signature_header(GroupPath *p, SwRequest *r)
{
	if (!p->signature_read)
	{
		p->signature_header = sw_source_signature_header(p->relid);
		p->signature_read = true;
	}
	return p->signature_header && request_header(r, p->signature_header) == NULL;
}

/*
 * Check one request of a group and write its body, in the current
 * subtransaction: its answer (given after the commit) in g, in memory
 * context cxt.  A refusal of the checks sets g->refused, to be logged once
 * the subtransaction commits.  Which part of the body is written goes into
 * where (of SW_WHERE_BYTES).
 */
static void
check_and_write(GroupRequest *g, MemoryContext cxt, char *where)
{
	SwRequest  *r = g->request;
	TableEntry *t = g->table;
	const SwSourceTable *st = sw_ingest_source_table(t->ing);
	char	   *text;
	const char *key = NULL;
	uint8		hash[PG_SHA256_DIGEST_LENGTH];
	int64		written;
	int			rows;
	int			status;

	where[0] = '\0';
	g->note = NULL;
	if (st->signature_header && request_header(r, st->signature_header) == NULL)
	{
		/* as to no table, before anything that tells of the table */
		g->status = 404;
		g->text = MemoryContextStrdup(cxt, SW_WEBHOOK_NOT_FOUND_TEXT);
		g->note = SW_UNSIGNED_NOTE;
		g->refused = true;
		return;
	}
	status = check_request(r, st, &text);
	if (status == 0)
		status = check_signature(r, t->ftrel, st, &text);
	if (status == 0)
		status = check_idempotency(r, t->relid, st, &key, hash, &text);
	if (status)
	{
		/* refused, or a repeated delivery: the first one's answer */
		g->status = status;
		g->text = MemoryContextStrdup(cxt, text);
		g->refused = status != 200;
		return;
	}

	/* the rows go into the table in this subtransaction, with the key */
	written = sw_ingest_written(t->ing);
	(void) write_body(r, t->ftrel, t->ing, where);
	rows = sw_ingest_written(t->ing) - written;	/* those no trigger skipped */
	if (key)
		sw_delivery_insert(t->relid, key, r->received_ms, hash, rows);
	g->status = 200;
	g->refused = false;
	g->text = MemoryContextStrdup(cxt, psprintf("%d %s\n", rows, rows == 1 ? "row" : "rows"));
}

/*
 * After an error in a subtransaction that wrote requests of table t: roll
 * it back, back in memory context cxt and resource owner owner.  If the
 * error was raised by one request's checks or writing, g is that request,
 * and gets its answer from the error (the request's part of the body in
 * where), which is logged; with g NULL (the error came while rows already
 * buffered were written, or when the requests written together ran out of
 * time at their end), only its message is logged, as no request's body is
 * in it.
 */
static void
roll_back_requests(TableEntry *t, GroupRequest *g, const char *where,
				   MemoryContext cxt, ResourceOwner owner)
{
	bool		timed_out = stop_request_clock();
	ErrorData  *edata;
	char	   *text;
	const char *decoder_where;
	bool		in_message;

	(void) sw_ingest_decode_failed(t->ing, &decoder_where, &in_message);
	in_message |= parsing_body;
	parsing_body = false;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	sw_ingest_sub_end(t->ing, false);
	RollbackAndReleaseCurrentSubTransaction();
	MemoryContextSwitchTo(cxt);
	CurrentResourceOwner = owner;
	MemoryContextReset(request_cxt);
	if (g == NULL)
	{
		int64		unlogged;

		(void) cancelled_by_clock(edata, timed_out);
		ereport(refusal_level(t->relid, &unlogged),
				(errmsg("webhook requests to table \"%s\" could not be written together",
						RelationGetRelationName(t->ftrel)),
				 errdetail_internal("%s", edata->message)));
		FreeErrorData(edata);
		return;
	}

	/*
	 * Every error here is the request's own: a cancel of the worker cancels
	 * the request it writes (a shutdown is FATAL, and does not come here).
	 */
	g->refused = false;
	if (cancelled_by_clock(edata, timed_out))
	{
		g->status = 503;
		g->text = pstrdup(SW_TIMED_OUT_TEXT);
	}
	else
	{
		/*
		 * Raised by the reading itself: the error's context begins with our
		 * own lines, no code of the table's before them; and no internal
		 * error.
		 */
		const char *ours = decoder_where[0] ? decoder_where : where;
		const char *context = edata->context ? edata->context : "";
		bool		in_body = in_message &&
			strncmp(context, ours, strlen(ours)) == 0 &&
			(ours[0] != '\0' || context[0] == '\0') &&
			ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_INTERNAL_ERROR;

		g->status = error_answer(edata, in_body, decoder_where, where, &text);
		g->text = text;
	}
	/* what the client sent is not logged: its error may quote it */
	if (g->status == 400)
		log_refused(g);
	else
		log_refusal(g->relid, g->request->path, g->status, edata->message, NULL);
	FreeErrorData(edata);
}

/*
 * Write one request of a group, in a subtransaction of its own: its answer
 * (given after the commit) in g, in the caller's memory context.  One that
 * runs out of time is answered 503 and writes nothing.
 */
static void
write_request(GroupRequest *g)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char		where[SW_WHERE_BYTES] = "";

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(request_cxt);
	start_request_clock();
	PG_TRY();
	{
		check_and_write(g, cxt, where);
		sw_ingest_sub_end(g->table->ing, true);
		check_request_clock();
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextReset(request_cxt);
		if (g->refused)
			log_refused(g);
	}
	PG_CATCH();
	{
		roll_back_requests(g->table, g, where, cxt, owner);
	}
	PG_END_TRY();
}

/*
 * Write the requests of a group to table t (of group[0 .. n-1], those
 * whose table it is) together, in one subtransaction, their rows many to
 * a multi-insert: true if it committed.  Otherwise the subtransaction
 * rolled back, and the others are to be written again one at a time: if
 * one request's checks or rows raised the error, *failed is its index,
 * and it has its answer from the error; if no one request did (the rows
 * buffered failed as they were written, or the requests ran out of time
 * at the end), *failed is -1, and all are to be written again.
 */
static bool
write_together(TableEntry *t, GroupRequest *group, int n, int *failed)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	char		where[SW_WHERE_BYTES] = "";
	volatile int current = -1;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(request_cxt);
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
		{
			if (group[i].table != t)
				continue;
			current = i;
			start_request_clock();
			check_and_write(&group[i], cxt, where);
			check_request_clock();
			MemoryContextReset(request_cxt);
		}
		current = -1;
		start_request_clock();
		sw_ingest_sub_end(t->ing, true);
		check_request_clock();
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		MemoryContextReset(request_cxt);
	}
	PG_CATCH();
	{
		/* writing buffered rows, maybe of earlier requests: no one's fault */
		if (sw_ingest_failed_flushing(t->ing))
			current = -1;
		roll_back_requests(t, current >= 0 ? &group[current] : NULL, where, cxt, owner);
		ok = false;
	}
	PG_END_TRY();
	*failed = current;
	if (ok)
		for (int i = 0; i < n; i++)
			if (group[i].table == t && group[i].refused)
				log_refused(&group[i]);
	return ok;
}

/*
 * After an error that ends the worker's transaction: log it, and abort
 * the transaction, back in memory context cxt.
 */
static void
report_and_abort(MemoryContext cxt)
{
	MemoryContextSwitchTo(cxt);
	EmitErrorReport();
	FlushErrorState();
	AbortOutOfAnyTransaction();
}

/*
 * Write the group's requests to one table (those of group[0 .. n-1] whose
 * table it is), in the order they came, in one batch of the table: one
 * writer, which runs as the table's owner until the last of them is
 * written.  They are written together, in one subtransaction; if that
 * fails, the request that failed alone has its answer from its error, and
 * the others are written again each in a subtransaction of its own, as
 * they are for the table's next SW_WEBHOOK_CAREFUL_WRITES writes when
 * there were others.
 */
static void
write_table(TableEntry *e, GroupRequest *group, int n, MemoryContext group_cxt)
{
	int64		kept;
	int			failed = -1;
	int			mine = 0;
	bool		one_at_a_time = true;

	for (int i = 0; i < n; i++)
		if (group[i].table == e)
			mine++;
	if (mine == 0)
		return;

	/*
	 * The table's statement triggers fire here, timed as a request is; if
	 * they fail, the group does, and its batch is forgotten with it.
	 */
	MemoryContextSwitchTo(TopTransactionContext);
	e->begun = true;
	start_request_clock();
	sw_ingest_begin(e->ing, e->ftrel);
	check_request_clock();
	MemoryContextSwitchTo(group_cxt);
	if (e->careful > 0)
		e->careful--;
	else if (write_together(e, group, n, &failed))
		one_at_a_time = false;
	else if (mine > 1)
	{
		elog(DEBUG1, "webhook requests to table \"%s\" are written again one at a time, as writing them together failed",
			 RelationGetRelationName(e->ftrel));
		e->careful = SW_WEBHOOK_CAREFUL_WRITES;
	}
	if (one_at_a_time)
	{
		for (int i = 0; i < n; i++)
		{
			if (group[i].table != e || i == failed)
				continue;
			MemoryContextSwitchTo(group_cxt);
			write_request(&group[i]);
		}
	}
	start_request_clock();
	(void) sw_ingest_end(e->ing, &kept);
	check_request_clock();
	e->begun = false;
}

/* what the sources view says of requests whose connections were closed */
#define SW_UNCONFIRMED_TEXT "closed without an answer: committed, but not confirmed by the synchronous standbys"

/*
 * Write the requests taken together in one transaction, then answer them:
 * after the commit, or 503 each if it failed.  The group is written in
 * rounds: the requests in hand first, then those that came while a round
 * was written, for as long as source_writes.webhook_join_time allows and
 * the caches took in no change that matters to the group (a request sent
 * after such a change must not be written with what was prepared before
 * it).  Each round has a snapshot of its own, taken after its requests
 * came; its requests' addresses are resolved first, then each table's
 * requests written (write_table).  Requests left over wait in in_hand.
 */
static void
write_group(SwRequest *requests, MemoryContext group_cxt)
{
	MemoryContext cxt = CurrentMemoryContext;
	GroupRequest *group;
	List	   *paths = NIL;
	ListCell   *lc;
	volatile int n = 0;
	int			i = 0;
	int			first = 0;		/* the round's first request */
	TimestampTz began = 0;
	uint64		changes = 0;
	int			unconfirmed = 0;
	volatile bool committed = false;
	volatile bool replicated = true;
	volatile bool holding = false;

	for (SwRequest *r = requests; r; r = r->next)
		n++;
	MemoryContextSwitchTo(group_cxt);
	group = palloc0(sizeof(GroupRequest) * SW_WEBHOOK_GROUP);
	for (SwRequest *r = requests; r; r = r->next)
		group[i++].request = r;

	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
		began = GetCurrentTimestamp();
		changes = cache_changes;
		pgstat_report_activity(STATE_RUNNING,
							   psprintf("writing %d webhook request%s", n, n == 1 ? "" : "s"));
		if (tables_changed || hash_get_num_entries(tables) > SW_WEBHOOK_KEPT_TABLES)
			forget_tables();
		for (;;)
		{
			SwRequest  *more;

			for (i = first; i < n; i++)
			{
				GroupPath  *p;
				unsigned int table_id;

				MemoryContextSwitchTo(group_cxt);

				/*
				 * Without its table's signature header, as to no table:
				 * as fast, while the map is fresh (else its table says)
				 */
				if (!limits_stale &&
					sw_webhook_server_find(group[i].request, &table_id) == SW_WEBHOOK_UNSIGNED)
				{
					group[i].relid = table_id;
					group[i].table = NULL;
					group[i].status = 404;
					group[i].text = SW_WEBHOOK_NOT_FOUND_TEXT;
					group[i].note = SW_UNSIGNED_NOTE;
					log_refused(&group[i]);
					continue;
				}
				p = group_path(group[i].request->path, &paths);
				group[i].relid = p->relid;
				group[i].table = p->table;
				group[i].status = p->status;
				group[i].text = p->text;
				if (p->table == NULL && OidIsValid(p->relid) &&
					lacks_signature_header(p, group[i].request))
				{
					group[i].status = 404;
					group[i].text = SW_WEBHOOK_NOT_FOUND_TEXT;
					group[i].note = SW_UNSIGNED_NOTE;
					log_refused(&group[i]);
				}
			}
			for (TableEntry *e = open_tables; e; e = e->next_open)
				write_table(e, group + first, n - first, group_cxt);

			/*
			 * The next round: the requests that came meanwhile (not while
			 * a reload waits, which waits for no request to be in hand)
			 */
			if (n >= SW_WEBHOOK_GROUP || in_hand != NULL ||
				ConfigReloadPending ||
				TimestampDifferenceExceeds(began, GetCurrentTimestamp(),
										   sw_webhook_join_time))
				break;
			more = take_requests();
			if (more == NULL)
				break;

			/*
			 * They were sent after the caches' last look: if a change that
			 * matters came since the group began, they wait for the next
			 * group, which looks again.  They are in hand before the look,
			 * which may fail, so that they are written or answered all the
			 * same.
			 */
			in_hand = more;
			AcceptInvalidationMessages();
			if (cache_changes != changes)
				break;
			in_hand = NULL;

			/* linked to those being written, for stop_server() to answer */
			group[n - 1].request->next = more;
			first = n;
			for (SwRequest *r = more; r; r = r->next)
			{
				if (n == SW_WEBHOOK_GROUP)
				{
					in_hand = r;	/* for the next group */
					group[n - 1].request->next = NULL;
					break;
				}
				group[n++].request = r;
			}
			pgstat_report_activity(STATE_RUNNING,
								   psprintf("writing %d webhook requests", n));
			/* they see what committed before they came */
			PopActiveSnapshot();
			PushActiveSnapshot(GetTransactionSnapshot());

			/*
			 * An address that named no table, or one that was locked, is
			 * looked up again: what kept it may have ended without a change
			 * the caches count.  (One whose table failed to be prepared is
			 * not: that may take the time a request may.)
			 */
			foreach(lc, paths)
			{
				if (((GroupPath *) lfirst(lc))->look_again)
					paths = foreach_delete_current(paths, lc);
			}
		}

		/*
		 * A relay whose server left writes nothing: nobody could be told
		 * that it was written, and its sender, whose connection the server
		 * closed, sends it again
		 */
		if (relay_mode && (server_gone || sw_relay_server_left()))
			ereport(ERROR,
					(errcode(ERRCODE_ADMIN_SHUTDOWN),
					 errmsg("the webhook server left before the requests were committed"),
					 errdetail("They were not written: the server can no longer answer them.")));
		close_tables();
		PopActiveSnapshot();
		sw_writer_commit_durably(true);

		/*
		 * From the commit to the answers, no interrupt: a shutdown that
		 * answered committed requests 503 would have them sent again.  The
		 * commit holds them itself from before its commit record (and no
		 * earlier: stamping the batches may wait for a lock, which
		 * lock_timeout and a shutdown must be able to end); nothing checks
		 * for them between its end and here.
		 */
		CommitTransactionCommand();
		HOLD_INTERRUPTS();
		holding = true;
		committed = true;
		replicated = sw_writer_commit_replicated();
	}
	PG_CATCH();
	{
		/* the error reset the interrupt holdoff that the commit took */
		holding = false;
		report_and_abort(group_cxt);
		forget_open_tables();
	}
	PG_END_TRY();
	sw_writer_forget_session_state();
	pgstat_report_activity(STATE_IDLE, NULL);

	/* answer and count; the requests are not ours any more */
	writing = NULL;
	for (i = 0; i < n; i++)
	{
		if (!committed)
		{
			group[i].status = 503;
			group[i].text = "the request could not be committed; send it again\n";
		}

		/*
		 * Rows committed here, but maybe not on the synchronous standbys
		 * that 200 stands for, as the wait for them was cut short; and 503
		 * would have them sent again.  The connection is closed unanswered,
		 * as PostgreSQL closes a session whose commit it cannot confirm when
		 * it is terminated (after a cancel it confirms it with a warning).
		 */
		if (!replicated && group[i].status == 200)
		{
			group[i].status = 0;
			group[i].text = SW_UNCONFIRMED_TEXT;
			unconfirmed++;
		}
		if (OidIsValid(group[i].relid))
			sw_webhook_worker_count(group[i].relid, group[i].status,
									group[i].note ? group[i].note : group[i].text);
		if (group[i].status == 0)
			hang_up_request(group[i].request);
		else
			answer_request(group[i].request, group[i].status, group[i].text);
	}
	if (unconfirmed > 0)
		ereport(WARNING,
				(errmsg_plural("webhook server closed %d connection without an answer",
							   "webhook server closed %d connections without an answer",
							   unconfirmed, unconfirmed),
				 errdetail("The requests are committed locally, but the wait for synchronous replication was cut short.")));
	if (holding)
		RESUME_INTERRUPTS();
	MemoryContextSwitchTo(cxt);
}

/*
 * A catalog change that may move a webhook source or change its limit: a
 * foreign table, or the pg_class row of a source in the map or its
 * schema's row (of other tables and schemas, which VACUUM, ANALYZE and
 * temporary tables change all the time, none; a table that becomes a
 * source comes with a foreign table's row).  While the map is stale or
 * being made, it may not know every source, nor their schemas: every change
 * counts.
 */
static void
limits_invalidated(Datum arg, int cacheid, uint32 hashvalue)
{
	const uint32 *hashes;
	bool		ours;

	/*
	 * Of pg_class and pg_namespace, the rows of the map's sources and their
	 * schemas; of pg_foreign_table, a reset, or with no map yet, all
	 */
	if (cacheid == RELOID)
		hashes = tracked_hashes;
	else if (cacheid == NAMESPACEOID)
		hashes = tracked_schema_hashes;
	else
		hashes = NULL;
	ours = hashes == NULL || hashvalue == 0 || limits_stale || publishing;
	for (int i = 0; i < ntracked && !ours; i++)
		ours = hashes[i] == hashvalue;
	if (ours)
	{
		limits_stale = true;
		cache_changes++;
	}
}

/* the tables of the limits, in their order, in the current memory context */
static Oid *
limits_relids(const SwBodyLimit *limits, int n)
{
	Oid		   *relids = palloc(sizeof(Oid) * Max(n, 1));

	for (int i = 0; i < n; i++)
		relids[i] = limits[i].table_id;
	return relids;
}

/*
 * Publish each webhook source's address and max_body_bytes to the server's
 * threads, which look a request up there before they read its body.  In a
 * transaction.
 */
static void
publish_limits(void)
{
	List	   *sources;
	SwBodyLimit *limits;
	Oid		   *relids;
	Oid		   *schemas;
	uint32	   *old_schemas;
	uint32	   *new_schemas;
	int			n = 0;
	ListCell   *lc;

	limits_stale = false;		/* changes taken in from now on make it stale */
	sources = sw_catalog_exists() ? sw_catalog_sources(InvalidOid) : NIL;
	limits = palloc(sizeof(SwBodyLimit) * Max(list_length(sources), 1));
	schemas = palloc(sizeof(Oid) * Max(list_length(sources), 1));
	foreach(lc, sources)
	{
		SwSource   *source = lfirst(lc);
		char	   *table;
		char	   *schema;
		int			bytes;

		if (source->kind != SW_KIND_WEBHOOK)
			continue;
		table = get_rel_name(source->relid);
		schemas[n] = get_rel_namespace(source->relid);
		schema = get_namespace_name(schemas[n]);
		bytes = sw_source_max_body_bytes(source->relid);
		if (table == NULL || schema == NULL || bytes <= 0)
			continue;			/* dropped meanwhile */
		limits[n].database = database_name;
		limits[n].schema = schema;
		limits[n].table = table;
		limits[n].limit = (size_t) bytes;
		limits[n].signature_header = sw_source_signature_header(source->relid);
		limits[n].table_id = source->relid;
		n++;
	}
	/* their schemas, which may have changed without them */
	old_schemas = tracked_schema_hashes;
	new_schemas = MemoryContextAlloc(TopMemoryContext,
									 sizeof(uint32) * Max(n, 1));
	for (int i = 0; i < n; i++)
		new_schemas[i] = GetSysCacheHashValue1(NAMESPACEOID,
											   ObjectIdGetDatum(schemas[i]));

	/* the counts follow the sources, when they changed (in OID order) */
	relids = limits_relids(limits, n);
	if (n != ntracked || memcmp(tracked, relids, sizeof(Oid) * n) != 0)
	{
		Oid		   *new_tracked = MemoryContextAlloc(TopMemoryContext,
													 sizeof(Oid) * Max(n, 1));
		uint32	   *new_hashes = MemoryContextAlloc(TopMemoryContext,
													sizeof(uint32) * Max(n, 1));

		/*
		 * All made before the old ones go: never one without the others
		 * (the invalidation callbacks read them).
		 */
		memcpy(new_tracked, relids, sizeof(Oid) * n);
		for (int i = 0; i < n; i++)
			new_hashes[i] = GetSysCacheHashValue1(RELOID, ObjectIdGetDatum(relids[i]));
		if (tracked)
		{
			pfree(tracked);
			pfree(tracked_hashes);
		}
		tracked = new_tracked;
		tracked_hashes = new_hashes;
		tracked_schema_hashes = new_schemas;
		ntracked = n;
		sw_webhook_worker_track(tracked, n);
	}
	else
		tracked_schema_hashes = new_schemas;
	if (old_schemas)
		pfree(old_schemas);
	if (relay_mode)
	{
		/* the server's map, and the relay's own for path_source() */
		sw_relay_send_limits(limits, n);
		if (!sw_webhook_server_publish_limits(limits, n))
			limits_stale = true;
	}
	else if (!sw_relay_set_own_limits(limits, n))
	{
		limits_stale = true;
		ereport(LOG,
				(errmsg("webhook server has no memory for its map of body limits"),
				 errdetail("Bodies are read before their table's max_body_bytes is checked.")));
	}
}

/*
 * Publish the limits again if the catalog changed since they were.  A
 * transaction takes in the changes: it is begun if always, or if changes
 * were taken in already.  If it fails, the server's threads are left with
 * no map (they read bodies before the limit is checked, as far as
 * SW_WEBHOOK_MAX_BODY) until the next time.
 */
static void
refresh_limits(bool always)
{
	MemoryContext cxt = CurrentMemoryContext;

	if (!OidIsValid(MyDatabaseId))
		return;					/* a server of no database: the relays' maps */
	if (!always && !limits_stale)
		return;
	PG_TRY();
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		if (limits_stale)
		{
			PushActiveSnapshot(GetTransactionSnapshot());
			publishing = true;
			publish_limits();
			publishing = false;
			PopActiveSnapshot();
		}
		CommitTransactionCommand();
	}
	PG_CATCH();
	{
		publishing = false;
		report_and_abort(cxt);
		(void) sw_webhook_server_publish_limits(NULL, 0);
		limits_stale = true;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
}

/*
 * Answer a request that waited for a look at its table's limit, from the
 * map as it is now: 404 or 413 at once, or read on.  Its table, if any, is
 * of database dboid.  The request is not ours any more.
 */
void
sw_webhook_judge_check(SwRequest *r, Oid dboid)
{
	unsigned int relid;
	int			status = sw_webhook_server_verdict(r, &relid);

	if (status == 413 && relid != InvalidOid)
		sw_webhook_worker_count_in(dboid, relid, status, SW_WEBHOOK_TOO_LARGE_TEXT);
	if (status == 413)
		log_refusal(relid, r->path, status, NULL, r->sized ?
					_("The body announced is over the table's max_body_bytes; it was not read.") :
					_("The body, of unknown length, grew over the table's max_body_bytes; its connection was closed."));

	/* a request without its table's signature header, as to no table */
	if (status == 404 && relid != InvalidOid)
	{
		sw_webhook_worker_count_in(dboid, relid, status, SW_UNSIGNED_NOTE);
		log_refusal(relid, r->path, status, NULL, _(SW_UNSIGNED_DETAIL));
	}
	sw_webhook_server_checked(r, status);
}

/*
 * The requests the server's threads hand over before they read (more of)
 * their bodies: over the limit their map gives, or to an address it does
 * not know.  Those to another database with a relay wait for its fresh
 * map (webhook_relay.c); once the map of the server's own database is
 * fresh, each of the others is answered 404 or 413 at once, or resumes to
 * be read on.  False if there were none.
 */
static bool
answer_checks(void)
{
	checking = sw_webhook_server_take_checks();
	if (checking == NULL)
		return false;
	checking = sw_relay_route_checks(checking);
	if (checking == NULL)
		return true;
	refresh_limits(true);
	while (checking)
	{
		SwRequest  *r = checking;

		checking = r->next;
		sw_webhook_judge_check(r, MyDatabaseId);	/* not ours any more */
	}
	return true;
}

#ifdef SW_BENCHMARK
/*
 * source_writes.webhook_bench_discard, in benchmarks' own builds only:
 * answer each request of a list 200 at once, writing nothing and starting
 * no transaction, so that a benchmark measures what the HTTP side alone
 * can do.
 */
static void
discard_requests(SwRequest *r)
{
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_answer(r, 200, "discarded (source_writes.webhook_bench_discard)\n");
		r = next;
	}
}
#endif

/* what the main thread waits for: its latch, the postmaster, requests */
static WaitEventSet *
make_events(void)
{
	WaitEventSet *events = CreateWaitEventSet(TopMemoryContext, 3);

	AddWaitEventToSet(events, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(events, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(events, WL_SOCKET_READABLE, sw_webhook_server_wake_fd(), NULL, NULL);
	return events;
}

/*
 * Settings of the database or its owner that would change what the worker
 * does (ALTER DATABASE ... SET): overridden, those of every worker of ours
 * (a group commits in read committed, where no serialization failure can
 * fail it whole) and this one: a lock that a user's transaction holds long
 * makes a request fail (503), not every request wait behind it.
 */
static void
override_settings(void)
{
	sw_worker_override_settings();
	SetConfigOption("lock_timeout", "5s", PGC_SUSET, PGC_S_OVERRIDE);
}

/*
 * What writing requests takes, in a server and in a relay: the caches'
 * callbacks, the memory, the request clock.  Returns the groups' memory.
 */
static MemoryContext
prepare_writing(void)
{
	MemoryContext group_cxt;

	CacheRegisterSyscacheCallback(RELOID, limits_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, limits_invalidated, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNTABLEREL, limits_invalidated, (Datum) 0);
	group_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook group",
									  ALLOCSET_DEFAULT_SIZES);
	request_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes webhook request",
										ALLOCSET_DEFAULT_SIZES);
	make_tables();
	request_timeout = RegisterTimeout(USER_TIMEOUT, request_timeout_handler);
	return group_cxt;
}

/* append what came to the requests in hand */
static void
take_more(void)
{
	SwRequest  *tail;

	if (in_hand == NULL)
		in_hand = take_requests();
	else
	{
		for (tail = in_hand; tail->next; tail = tail->next)
			;
		tail->next = take_requests();
	}
}

/*
 * Write a group of the requests in hand.  Those left (more than a group,
 * or come after a catalog change) are written in the next turn of the
 * loop, after a look at signals.
 */
static void
write_next_group(MemoryContext group_cxt)
{
	SwRequest  *group = in_hand;
	SwRequest  *last = group;

	for (int i = 1; i < SW_WEBHOOK_GROUP && last->next; i++)
		last = last->next;
	in_hand = last->next;
	last->next = NULL;
	writing = group;
	write_group(group, group_cxt);
	MemoryContextReset(group_cxt);
}

/*
 * The webhook server: main_arg is the database it connects to, or
 * InvalidOid for none (then every request goes to a relay).
 */
void
source_writes_webhook_main(Datum main_arg)
{
	Oid			dboid = DatumGetObjectId(main_arg);
	WaitEventSet *events;
	MemoryContext group_cxt;
	TimestampTz last_wanted = GetCurrentTimestamp();
	bool		looked;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	if (!sw_database_enter(dboid))
		proc_exit(0);			/* DROP DATABASE...: the launcher comes back */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes webhook server");
	override_settings();

	if (OidIsValid(dboid))
	{
		StartTransactionCommand();
		database_name = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
		CommitTransactionCommand();
		MemoryContextSwitchTo(TopMemoryContext);
	}
	if (!sw_webhook_worker_attach())
		proc_exit(0);			/* another one serves */

	before_shmem_exit(stop_server, (Datum) 0);
	sw_relay_server_start(dboid, database_name);
	group_cxt = prepare_writing();
	start_configured_server();
	if (OidIsValid(dboid))
		sw_database_set_webhook_writer(dboid, MyProcPid, "listening", "");
	refresh_limits(true);
#ifdef SW_BENCHMARK
	if (sw_webhook_bench_discard)
		ereport(WARNING,
				(errmsg("webhook server discards every request"),
				 errdetail("source_writes.webhook_bench_discard is on: requests are answered 200 and nothing is written."),
				 errhint("It is for benchmarks only: turn it off and restart the server.")));
#endif

	events = make_events();

	for (;;)
	{
		WaitEvent	event;

		sw_report_stats();
		/* with requests left from the last group, only a look */
		(void) WaitEventSetWait(events, in_hand ? 0 : SW_WEBHOOK_WAIT_MS,
								&event, 1, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/* a cancel cancels the request being written; between them, nothing */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();

		/*
		 * A reload once no request is in hand: the server may restart, and
		 * must not while it holds their connections suspended.
		 */
		if (ConfigReloadPending && in_hand == NULL)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			override_settings();
			if (reconfigure_server())
			{
				/* the server has a new pipe */
				FreeWaitEventSet(events);
				events = make_events();
			}
		}

		/*
		 * What came, after those left in hand (the server's pipe wakes the
		 * next wait for more); those to other databases go to their relays,
		 * whose answers come back (their queues set our latch)
		 */
		take_more();
		sw_relay_pump();
		looked = answer_checks();
		sw_relay_flush();		/* the asks for maps the checks made */
		if (in_hand == NULL)
		{
			/*
			 * Idle: leave once no database has had webhook sources for a
			 * while (the supervisors tell, about once a second)
			 */
			TimestampTz now = GetCurrentTimestamp();

			if (!looked)
				refresh_limits(true);	/* take in catalog changes */

			if (sw_databases_any_webhooks())
				last_wanted = now;
			else if (TimestampDifferenceExceeds(last_wanted, now, 5 * SW_WEBHOOK_WAIT_MS))
				proc_exit(0);
			continue;
		}
#ifdef SW_BENCHMARK
		if (sw_webhook_bench_discard)
		{
			discard_requests(in_hand);
			in_hand = NULL;
			continue;
		}
#endif

		write_next_group(group_cxt);
		sw_relay_pump();
		(void) answer_checks();
		sw_relay_flush();
		refresh_limits(false);
	}
}

/*
 * A relay: the webhook worker of a database other than the server's,
 * which writes the requests the server hands it (main_arg: the segment of
 * its queues, webhook_relay.c).  It leaves when the server does, and
 * then writes nothing more (nobody could be told it was written).
 */
void
source_writes_webhook_relay_main(Datum main_arg)
{
	Oid			dboid;
	MemoryContext group_cxt;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();
	relay_mode = true;
	dboid = sw_relay_attach(DatumGetUInt32(main_arg));
	if (!sw_database_enter(dboid))
		proc_exit(0);			/* DROP DATABASE...: the server comes back */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes webhook worker");
	override_settings();

	StartTransactionCommand();
	database_name = MemoryContextStrdup(TopMemoryContext, get_database_name(MyDatabaseId));
	CommitTransactionCommand();
	MemoryContextSwitchTo(TopMemoryContext);

	sw_relay_connect();
	before_shmem_exit(stop_relay, (Datum) 0);
	group_cxt = prepare_writing();
	refresh_limits(true);

	for (;;)
	{
		sw_report_stats();
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 in_hand ? 0 : SW_WEBHOOK_WAIT_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		/* a cancel cancels the request being written; between them, nothing */
		QueryCancelPending = false;
		CHECK_FOR_INTERRUPTS();

		if (ConfigReloadPending && in_hand == NULL)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			override_settings();
		}

		take_more();

		/*
		 * The server left: what we hold is not written (stop_relay drops
		 * it), since nobody could be told it was
		 */
		if (server_gone || sw_relay_server_left())
			proc_exit(0);
		if (sw_relay_refresh_wanted())
		{
			/* the server waits for a fresh map */
			refresh_limits(true);
			sw_relay_refresh_answered();
		}
		if (in_hand == NULL)
		{
			refresh_limits(true);	/* take in catalog changes */
			continue;
		}
		write_next_group(group_cxt);
		refresh_limits(false);
	}
}
