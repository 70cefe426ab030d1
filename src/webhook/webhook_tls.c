/*-------------------------------------------------------------------------
 *
 * webhook_tls.c
 *		  The webhook worker's TLS files, and starting the server again
 *		  when a reload changes them or webhook_listen
 *
 * See doc/internals.md, "Workers and processes" (Webhook worker).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_tls.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/resource.h>
#include <sys/stat.h>

#include "utils/memutils.h"

#include "log/log.h"
#include "webhook/webhook.h"
#include "workers/workers.h"

/* the largest certificate or key file the worker reads */
#define SW_WEBHOOK_MAX_PEM_FILE	(1024 * 1024)

static char *listening = NULL;	/* the webhook_listen the server serves */
static char *serving_cert = NULL;	/* the PEM text it serves with, or NULL */
static char *serving_key = NULL;

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
 * Whether the certificate or key file at path may be read: a regular file
 * of a size we take, and for a key, owned and protected as PostgreSQL
 * wants ssl_key_file.  *st is what stat() says of it.  When not, says why
 * at elevel (below ERROR, returns).
 */
static bool
pem_file_usable(const char *path, bool is_key, int elevel, struct stat *st)
{
	const char *what = is_key ? "private key" : "certificate";

	if (stat(path, st) != 0)
	{
		ereport(elevel,
				(errcode_for_file_access(),
				 errmsg("could not access webhook server %s file \"%s\": %m", what, path)));
		return false;
	}
	if (!S_ISREG(st->st_mode))
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server %s file \"%s\" is not a regular file", what, path)));
		return false;
	}
	if (is_key && st->st_uid != geteuid() && st->st_uid != 0)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server private key file \"%s\" must be owned by the database user or root",
						path)));
		return false;
	}
	if (is_key &&
		((st->st_uid == geteuid() && (st->st_mode & (S_IRWXG | S_IRWXO))) ||
		 (st->st_uid == 0 && (st->st_mode & (S_IWGRP | S_IXGRP | S_IRWXO)))))
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server private key file \"%s\" has group or world access",
						path),
				 errdetail("File must have permissions u=rw (0600) or less if owned by the database user, or permissions u=rw,g=r (0640) or less if owned by root.")));
		return false;
	}
	if (st->st_size > SW_WEBHOOK_MAX_PEM_FILE)
	{
		ereport(elevel,
				(errcode(ERRCODE_CONFIG_FILE_ERROR),
				 errmsg("webhook server %s file \"%s\" is too large", what, path),
				 errdetail("A certificate or key file may hold at most %d bytes.",
						   SW_WEBHOOK_MAX_PEM_FILE)));
		return false;
	}
	return true;
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

	if (!pem_file_usable(path, is_key, elevel, &st))
		return NULL;

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
void
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
bool
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
