/*-------------------------------------------------------------------------
 *
 * source_writes.c
 *		  Module load: settings, and whether the workers can run
 *
 * The extension works in any backend that loads it: source tables can be
 * created, read and edited.  Ingestion needs background workers, which
 * exist only when the library is in shared_preload_libraries.
 *
 * IDENTIFICATION
 *		  src/source_writes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "source_writes.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* true when loaded by the postmaster through shared_preload_libraries */
bool		sw_preloaded = false;

/* settings */
char	   *sw_database = NULL;
char	   *sw_webhook_listen = NULL;

/*
 * Accept "host:port" with a port from 1 to 65535.
 */
static bool
check_webhook_listen(char **newval, void **extra, GucSource source)
{
	const char *colon = strrchr(*newval, ':');
	char	   *end;
	long		port;

	if (colon == NULL || colon == *newval)
	{
		GUC_check_errdetail("The value must have the form host:port.");
		return false;
	}
	port = strtol(colon + 1, &end, 10);
	if (*end != '\0' || port < 1 || port > 65535)
	{
		GUC_check_errdetail("The port must be a number from 1 to 65535.");
		return false;
	}
	return true;
}

/*
 * Tell the user, once per command that would need them, that the workers
 * are not running.
 */
void
sw_warn_if_not_preloaded(void)
{
	if (sw_preloaded)
		return;
	ereport(WARNING,
			(errmsg("source_writes is not loaded through shared_preload_libraries"),
			 errdetail("Source tables can be created, read and edited, but nothing is ingested from Kafka or webhooks."),
			 errhint("Add source_writes to shared_preload_libraries in postgresql.conf and restart the server to start the workers.")));
}

PG_FUNCTION_INFO_V1(source_writes_warn_unless_preloaded);

/*
 * Called by the extension script: CREATE EXTENSION warns at once when the
 * workers cannot run.
 */
Datum
source_writes_warn_unless_preloaded(PG_FUNCTION_ARGS)
{
	sw_warn_if_not_preloaded();
	PG_RETURN_VOID();
}

void
_PG_init(void)
{
	sw_preloaded = process_shared_preload_libraries_in_progress;

	DefineCustomStringVariable("source_writes.database",
							   "Database whose source tables the workers serve.",
							   NULL,
							   &sw_database,
							   "postgres",
							   PGC_SIGHUP,
							   0,
							   NULL, NULL, NULL);

	DefineCustomStringVariable("source_writes.webhook_listen",
							   "Address (host:port) the webhook server listens on.",
							   "Loopback by default; put it behind a proxy that terminates TLS.",
							   &sw_webhook_listen,
							   "127.0.0.1:8432",
							   PGC_SIGHUP,
							   0,
							   check_webhook_listen, NULL, NULL);

	MarkGUCPrefixReserved("source_writes");
}
