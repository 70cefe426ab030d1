/*-------------------------------------------------------------------------
 *
 * webhook_server.c
 *		  The webhook worker's HTTP server: libmicrohttpd's threads, which
 *		  never call PostgreSQL, and the requests they hand over
 *
 * libmicrohttpd serves the connections in threads of its own.  Those
 * threads must never run PostgreSQL code (no palloc, no ereport, no
 * latch): this file includes no PostgreSQL header.  A thread reads a
 * request whole into malloc'd memory, puts it on a queue under a mutex,
 * writes a byte into a pipe that the worker's main thread waits on, and
 * suspends the connection.  The main thread takes the queue, writes the
 * requests in one transaction and, after the commit, answers each one,
 * which resumes its connection: libmicrohttpd then calls us again in its
 * thread, and we send the answer (or close the connection unanswered,
 * when the main thread cannot tell the request's outcome).  The request is
 * freed when libmicrohttpd is done with the connection.
 *
 * Requests that need no database are answered here: methods other than
 * POST (405) and bodies over SW_WEBHOOK_MAX_BODY (413, at once when
 * Content-Length says so; a body of unknown length that grows over it has
 * its connection closed), bodies that would take the buffered bytes of all
 * connections over SW_WEBHOOK_MAX_BUFFERED (503), requests beyond
 * SW_WEBHOOK_MAX_IN_FLIGHT queued or being written (429), and everything
 * while the server shuts down (503).  Connections are limited in number,
 * in total and from one address, and one idle for
 * SW_WEBHOOK_CONNECTION_TIMEOUT is closed.
 *
 * Given a certificate and a key (PEM text, which the main thread read),
 * the server speaks HTTPS only, through libmicrohttpd's GnuTLS: TLS 1.2 or
 * later, as the default of PostgreSQL's ssl_min_protocol_version.
 *
 * A table's max_body_bytes is checked before its body is read, from a map
 * of each webhook source's names to its limit that the main thread
 * publishes (and publishes again after catalog changes).  The map may be
 * stale, so these threads never refuse from it alone: a body announced
 * over the map's limit, a body to an address the map does not know, or a
 * body of unknown length that grows over the limit, is handed to the main
 * thread with its headers only, suspended.  The main thread publishes the
 * map again if the catalog changed, looks the request up in it
 * (sw_webhook_server_verdict) and resumes it with its verdict: 413 or 404,
 * answered at once (a body of unknown length, already flowing, has its
 * connection closed instead: libmicrohttpd cannot answer in the middle of
 * a body), or read on.  Requests under the map's limit go on at once.
 *
 * When the server stops, what the main thread answered is given a moment
 * to go before libmicrohttpd closes the connections.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook_server.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "webhook_server.h"

/* how long an idle connection may stay, in seconds */
#define SW_WEBHOOK_CONNECTION_TIMEOUT	30

/* how long a server that stops waits for its last answers to go, in ms */
#define SW_WEBHOOK_STOP_WAIT_MS			1000

/* connections at once, in all and from one address */
#define SW_WEBHOOK_MAX_CONNECTIONS		256
#define SW_WEBHOOK_MAX_PER_ADDRESS		128

#if SW_WEBHOOK_MAX_IN_FLIGHT >= SW_WEBHOOK_MAX_PER_ADDRESS
#error "the in-flight limit must be below the connections of one address"
#endif

/* GnuTLS's priorities with TLS: its defaults, without the versions before 1.2 */
#define SW_WEBHOOK_TLS_PRIORITIES	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static struct MHD_Daemon *daemon_handle = NULL;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static SwRequest *queue_head = NULL;
static SwRequest *queue_tail = NULL;
static bool shutting_down = false;
static size_t buffered = 0;		/* body bytes held, under queue_lock */
static int	in_flight = 0;		/* requests queued or being written, too */
static int	answering = 0;		/* answered by the main thread, not sent yet */
static pthread_cond_t answer_gone = PTHREAD_COND_INITIALIZER;	/* answering went down */
static int	wake_pipe[2] = {-1, -1};

/* where a request waits for the main thread to look at its table's limit */
#define SW_CHECK_NONE		0
#define SW_CHECK_HEADERS	1	/* before its body */
#define SW_CHECK_BODY		2	/* in its body, of unknown length */

/* requests waiting for that, under queue_lock */
static SwRequest *check_head = NULL;
static SwRequest *check_tail = NULL;

/* one webhook source in the published map: its names, decoded, and limit */
typedef struct BodyLimit
{
	const char *database;
	size_t		database_len;
	const char *schema;
	size_t		schema_len;
	const char *table;
	size_t		table_len;
	size_t		limit;
	unsigned int table_id;
} BodyLimit;

/*
 * The map, of the webhook sources of every database served, sorted by
 * database, schema and table, malloc'd in one piece
 */
typedef struct BodyLimits
{
	int			n;
	BodyLimit	limits[];
} BodyLimits;

/* as the main thread last published it, under queue_lock; NULL if none */
static BodyLimits *body_limits = NULL;

/* what libmicrohttpd says while the server starts: why it could not */
static pthread_mutex_t start_log_lock = PTHREAD_MUTEX_INITIALIZER;
static bool start_logging = false;
static char start_log[256];

static void keep_start_log(void *cls, const char *format, va_list ap)
#ifdef __GNUC__
			__attribute__((format(printf, 2, 0)))
#endif
			;

/* a copy of a string, or NULL when out of memory */
static char *
copy_string(const char *s)
{
	return s ? strdup(s) : NULL;
}

static void
free_request(SwRequest *r)
{
	pthread_mutex_lock(&queue_lock);
	buffered -= r->body_cap;
	if (r->answered || r->check_status)
	{
		answering--;			/* its answer went, or its connection */
		pthread_cond_broadcast(&answer_gone);
	}
	pthread_mutex_unlock(&queue_lock);
	for (int i = 0; i < r->nheaders; i++)
	{
		free(r->headers[i].name);
		free(r->headers[i].value);
	}
	free(r->headers);
	free(r->method);
	free(r->path);
	free(r->body);
	free(r->text);
	free(r);
}

/* libmicrohttpd's iterator over the request headers: keep each one */
static enum MHD_Result
keep_header(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
	SwRequest  *r = cls;
	SwRequestHeader *headers;

	headers = realloc(r->headers, sizeof(SwRequestHeader) * (r->nheaders + 1));
	if (headers == NULL)
	{
		r->headers_lost = true;
		return MHD_NO;
	}
	r->headers = headers;
	r->headers[r->nheaders].name = copy_string(name);
	r->headers[r->nheaders].value = copy_string(value);
	if (r->headers[r->nheaders].name == NULL ||
		(value && r->headers[r->nheaders].value == NULL))
	{
		/* without all its headers (a signature...), a request is not taken */
		free(r->headers[r->nheaders].name);
		free(r->headers[r->nheaders].value);
		r->headers_lost = true;
		return MHD_NO;
	}
	r->nheaders++;
	return MHD_YES;
}

/* keep the path as sent: we split it before we decode it */
static size_t
keep_escapes(void *cls, struct MHD_Connection *connection, char *s)
{
	return strlen(s);
}

/* send a request's answer */
static enum MHD_Result
send_answer(struct MHD_Connection *connection, int status, const char *text)
{
	struct MHD_Response *response;
	enum MHD_Result result;

	response = MHD_create_response_from_buffer(strlen(text), (void *) text,
											   MHD_RESPMEM_MUST_COPY);
	if (response == NULL)
		return MHD_NO;
	MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
							"text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "POST");
	result = MHD_queue_response(connection, status, response);
	MHD_destroy_response(response);
	return result;
}

/* milliseconds since the Unix epoch */
static int64_t
now_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/*
 * The value of a hexadecimal digit, or -1.  The main thread decodes hex
 * signatures with it too.
 */
int
sw_webhook_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * Split a path /<database>/<schema>/<table> into its three names,
 * percent-decoded into buf (as long as the path): false if it is no such
 * path.  The HTTP threads and the main thread (path_source) both split
 * paths with it.
 */
bool
sw_webhook_split_path(const char *path, char *buf, const char **names, size_t *lens)
{
	const char *p = path;
	char	   *out = buf;

	if (*p++ != '/')
		return false;
	for (int n = 0; n < 3; n++)
	{
		const char *slash = strchr(p, '/');
		size_t		len = slash ? (size_t) (slash - p) : strlen(p);

		if (len == 0 || (n < 2 && slash == NULL) || (n == 2 && slash != NULL))
			return false;
		names[n] = out;
		for (size_t i = 0; i < len; i++)
		{
			if (p[i] != '%')
				*out++ = p[i];
			else if (i + 2 < len &&
					 sw_webhook_hex_digit(p[i + 1]) >= 0 &&
					 sw_webhook_hex_digit(p[i + 2]) >= 0)
			{
				*out++ = (char) (sw_webhook_hex_digit(p[i + 1]) * 16 +
								 sw_webhook_hex_digit(p[i + 2]));
				i += 2;
			}
			else
				return false;
		}
		lens[n] = (size_t) (out - names[n]);
		p += len + 1;
	}
	return true;
}

/* compare two names of given lengths, bytewise */
static int
compare_names(const char *a, size_t alen, const char *b, size_t blen)
{
	int			c = memcmp(a, b, alen < blen ? alen : blen);

	if (c != 0)
		return c;
	return (alen > blen) - (alen < blen);
}

/* order of the map: by database, schema, then table */
static int
compare_limits(const void *a, const void *b)
{
	const BodyLimit *la = a;
	const BodyLimit *lb = b;
	int			c = compare_names(la->database, la->database_len,
								  lb->database, lb->database_len);

	if (c == 0)
		c = compare_names(la->schema, la->schema_len, lb->schema, lb->schema_len);
	return c != 0 ? c : compare_names(la->table, la->table_len, lb->table, lb->table_len);
}

/*
 * The limit the published map gives the table a path names: 1 if it has
 * one (in *limit), 0 if the path names no webhook source in the map, -1
 * if there is no map (or no memory to look).
 */
static int
find_limit(const char *path, size_t *limit, unsigned int *table_id)
{
	char	   *buf = malloc(strlen(path) + 1);
	const char *names[3];
	size_t		lens[3];
	bool		valid = buf != NULL && sw_webhook_split_path(path, buf, names, lens);
	int			found;

	pthread_mutex_lock(&queue_lock);
	if (body_limits == NULL || buf == NULL)
		found = -1;
	else if (!valid)
		found = 0;
	else
	{
		BodyLimit	key = {names[0], lens[0], names[1], lens[1], names[2], lens[2], 0, 0};
		BodyLimit  *entry = bsearch(&key, body_limits->limits, body_limits->n,
									sizeof(BodyLimit), compare_limits);

		found = entry != NULL;
		if (entry)
		{
			*limit = entry->limit;
			if (table_id)
				*table_id = entry->table_id;
		}
	}
	pthread_mutex_unlock(&queue_lock);
	free(buf);
	return found;
}

/*
 * Set a request's limit from what find_limit() found; looked says the
 * main thread published the map after the request came.  Without a map,
 * or for a table gone since it was looked at, the request goes on as far
 * as the server reads, and the main thread answers it when it is in.
 */
static void
set_limit(SwRequest *r, int found, size_t limit, bool looked)
{
	if (found < 0 || (found == 0 && looked))
	{
		r->limit = SW_WEBHOOK_MAX_BODY;
		r->limit_sure = true;
	}
	else if (found == 0)
	{
		r->limit = 0;			/* a table made since, or none: look */
		r->limit_sure = false;
	}
	else
	{
		r->limit = limit < SW_WEBHOOK_MAX_BODY ? limit : SW_WEBHOOK_MAX_BODY;
		r->limit_sure = looked || limit >= SW_WEBHOOK_MAX_BODY;
	}
}

/* write a byte into the pipe the main thread waits on */
static void
wake_worker(void)
{
	char		byte = 0;

	/* a full pipe wakes the main thread as well */
	if (write(wake_pipe[1], &byte, 1) < 0 && errno != EAGAIN)
		fprintf(stderr, "source_writes webhook server: could not wake the worker: %s\n",
				strerror(errno));
}

/*
 * Hand a request to the main thread for a look at its table's limit, and
 * suspend it until sw_webhook_server_checked(): libmicrohttpd then calls
 * us again where we left, before the body or with the same piece of it.
 */
static enum MHD_Result
wait_for_look(SwRequest *r, struct MHD_Connection *connection, int where)
{
	bool		wake;

	pthread_mutex_lock(&queue_lock);
	if (shutting_down)
	{
		pthread_mutex_unlock(&queue_lock);
		if (where == SW_CHECK_BODY)
			return MHD_NO;		/* no answer in the middle of a body: close */
		return send_answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
						   SW_WEBHOOK_SHUTTING_DOWN_TEXT);
	}
	r->checking = where;
	r->check_status = 0;
	r->next = NULL;
	MHD_suspend_connection(connection);
	wake = check_head == NULL;
	if (check_tail)
		check_tail->next = r;
	else
		check_head = r;
	check_tail = r;
	pthread_mutex_unlock(&queue_lock);
	if (wake)
		wake_worker();
	return MHD_YES;
}

/*
 * At a POST's headers: its body's limit, from the map.  A body announced
 * over it, or any body to an address the map does not know, waits for the
 * main thread to look; others go on at once.
 */
static enum MHD_Result
look_up_limit(SwRequest *r, struct MHD_Connection *connection, const char *length)
{
	size_t		limit = 0;
	int			found;

	/* with a Transfer-Encoding, libmicrohttpd reads no Content-Length */
	r->sized = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
										   MHD_HTTP_HEADER_TRANSFER_ENCODING) == NULL;
	r->declared = r->sized && length ? strtoull(length, NULL, 10) : 0;
	found = find_limit(r->path, &limit, NULL);
	set_limit(r, found, limit, false);
	if (r->limit_sure)
		return MHD_YES;
	if (found == 0 ? (!r->sized || r->declared > 0) : (r->sized && r->declared > r->limit))
		return wait_for_look(r, connection, SW_CHECK_HEADERS);
	return MHD_YES;
}

/*
 * A request resumed before its body, with the main thread's verdict: 404
 * for an address that is no webhook source, 413 for a body announced over
 * the limit, 503 while the server shuts down; else the body comes.
 */
static enum MHD_Result
headers_looked_at(SwRequest *r, struct MHD_Connection *connection)
{
	r->checking = SW_CHECK_NONE;
	switch (r->check_status)
	{
		case 0:
			return MHD_YES;
		case MHD_HTTP_NOT_FOUND:
			return send_answer(connection, r->check_status, SW_WEBHOOK_NOT_FOUND_TEXT);
		case MHD_HTTP_CONTENT_TOO_LARGE:
			return send_answer(connection, r->check_status, SW_WEBHOOK_TOO_LARGE_TEXT);
		default:
			return send_answer(connection, r->check_status, SW_WEBHOOK_SHUTTING_DOWN_TEXT);
	}
}

/*
 * libmicrohttpd's handler, called in its threads: first with the request
 * line and headers, then with each piece of the body, then once more when
 * the body is complete; and again after the main thread answered and
 * resumed the connection.  A request that waited for a look at its
 * table's limit is called again where it left: with its headers, or with
 * the same piece of its body.
 */
static enum MHD_Result
handle_request(void *cls, struct MHD_Connection *connection, const char *url,
			   const char *method, const char *version, const char *upload_data,
			   size_t *upload_data_size, void **req_cls)
{
	SwRequest  *r = *req_cls;
	bool		wake;

	if (r == NULL)
	{
		const char *length;

		r = calloc(1, sizeof(SwRequest));
		if (r == NULL)
			return MHD_NO;
		r->connection = connection;
		r->method = copy_string(method);
		r->path = copy_string(url);
		r->received_ms = now_ms();
		*req_cls = r;
		if (r->method == NULL || r->path == NULL ||
			MHD_get_connection_values(connection, MHD_HEADER_KIND, keep_header, r) < 0 ||
			r->headers_lost)
			return MHD_NO;		/* out of memory: the connection is closed */

		/* what we refuse anyway, we answer before the body comes */
		if (strcmp(r->method, MHD_HTTP_METHOD_POST) != 0)
			return send_answer(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
							   "only POST is allowed\n");
		length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
											 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (length && strtoull(length, NULL, 10) > SW_WEBHOOK_MAX_BODY)
			return send_answer(connection, MHD_HTTP_CONTENT_TOO_LARGE,
							   "the body is too large\n");
		return look_up_limit(r, connection, length);
	}

	/* resumed after the main thread published the map */
	if (r->checking == SW_CHECK_HEADERS)
		return headers_looked_at(r, connection);

	/* answered by the main thread: send it, or close without an answer */
	if (r->answered)
		return r->status == 0 ? MHD_NO :
			send_answer(connection, r->status, r->text ? r->text : "");

	/* a piece of the body */
	if (*upload_data_size > 0)
	{
		size_t		n = *upload_data_size;

		if (r->checking == SW_CHECK_BODY)
		{
			/* resumed with the main thread's verdict */
			r->checking = SW_CHECK_NONE;
			if (r->check_status)
				return MHD_NO;	/* 413, or 503: no answer in a body, close */
		}
		if (!r->refusal && r->body_len + n > r->limit)
		{
			/*
			 * Over the limit, with a body of unknown length: the main thread
			 * looks if the map may be stale (this piece waits), else the
			 * connection is closed at once, as no answer can be sent in the
			 * middle of a body.
			 */
			if (!r->limit_sure)
			{
				r->declared = r->body_len + n;	/* with the piece that waits */
				return wait_for_look(r, connection, SW_CHECK_BODY);
			}
			return MHD_NO;
		}
		*upload_data_size = 0;
		if (r->refusal)
			return MHD_YES;		/* not kept */
		if (r->body_len + n + 1 > r->body_cap)
		{
			size_t		cap = r->body_cap ? r->body_cap : 4096;
			char	   *body;
			bool		over;

			while (cap < r->body_len + n + 1)
				cap *= 2;
			pthread_mutex_lock(&queue_lock);
			over = buffered - r->body_cap + cap > SW_WEBHOOK_MAX_BUFFERED;
			if (!over)
				buffered += cap - r->body_cap;
			pthread_mutex_unlock(&queue_lock);
			body = over ? NULL : realloc(r->body, cap);
			if (body == NULL)
			{
				/* the server holds as much as it may: come again */
				if (!over)
				{
					pthread_mutex_lock(&queue_lock);
					buffered -= cap - r->body_cap;
					pthread_mutex_unlock(&queue_lock);
				}
				r->refusal = MHD_HTTP_SERVICE_UNAVAILABLE;
				return MHD_YES;
			}
			r->body = body;
			r->body_cap = cap;
		}
		memcpy(r->body + r->body_len, upload_data, n);
		r->body_len += n;
		r->body[r->body_len] = '\0';
		return MHD_YES;
	}

	/* the request is complete */
	if (r->refusal)
		return send_answer(connection, r->refusal, "the server is busy; send it again\n");

	pthread_mutex_lock(&queue_lock);
	if (shutting_down)
	{
		pthread_mutex_unlock(&queue_lock);
		return send_answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
						   SW_WEBHOOK_SHUTTING_DOWN_TEXT);
	}
	if (in_flight >= SW_WEBHOOK_MAX_IN_FLIGHT)
	{
		pthread_mutex_unlock(&queue_lock);
		return send_answer(connection, MHD_HTTP_TOO_MANY_REQUESTS,
						   "too many requests are being written; send it again\n");
	}
	in_flight++;
	MHD_suspend_connection(connection);
	wake = queue_head == NULL;
	r->next = NULL;				/* it may still link the checks it waited among */
	if (queue_tail)
		queue_tail->next = r;
	else
		queue_head = r;
	queue_tail = r;
	pthread_mutex_unlock(&queue_lock);

	if (wake)
	{
		char		byte = 0;

		/* a full pipe wakes the main thread as well */
		if (write(wake_pipe[1], &byte, 1) < 0 && errno != EAGAIN)
			fprintf(stderr, "source_writes webhook server: could not wake the worker: %s\n",
					strerror(errno));
	}
	return MHD_YES;
}

/* libmicrohttpd is done with a connection's request: free it */
static void
request_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
				  enum MHD_RequestTerminationCode toe)
{
	if (*req_cls)
		free_request(*req_cls);
	*req_cls = NULL;
}

/* close the pipe that wakes the main thread */
static void
close_wake_pipe(void)
{
	close(wake_pipe[0]);
	close(wake_pipe[1]);
	wake_pipe[0] = wake_pipe[1] = -1;
}

/*
 * libmicrohttpd's error log, called in any of its threads: while the
 * server starts, keep its first message (why it could not start: a port
 * in use, a certificate and key that GnuTLS refuses); ignore the others.
 */
static void
keep_start_log(void *cls, const char *format, va_list ap)
{
	pthread_mutex_lock(&start_log_lock);
	if (start_logging && start_log[0] == '\0')
	{
		size_t		len;

		vsnprintf(start_log, sizeof(start_log), format, ap);
		len = strlen(start_log);
		while (len > 0 && (start_log[len - 1] == '\n' || start_log[len - 1] == '.'))
			start_log[--len] = '\0';
	}
	pthread_mutex_unlock(&start_log_lock);
}

/* can this libmicrohttpd serve HTTPS? */
bool
sw_webhook_server_tls_supported(void)
{
	return MHD_is_feature_supported(MHD_FEATURE_TLS) == MHD_YES;
}

/*
 * Start serving on host:port, in libmicrohttpd's threads, which are made
 * with every signal blocked (PostgreSQL's handlers must run in the main
 * thread only).  With cert_pem and key_pem (PEM text, which must stay
 * until sw_webhook_server_stop), HTTPS only; with NULLs, HTTP.  Returns
 * NULL, or what went wrong (never anything of the key).
 */
const char *
sw_webhook_server_start(const char *host, int port, const char *cert_pem,
						const char *key_pem)
{
	struct MHD_OptionItem tls[] = {
		{MHD_OPTION_HTTPS_MEM_CERT, 0, (void *) cert_pem},
		{MHD_OPTION_HTTPS_MEM_KEY, 0, (void *) key_pem},
		{MHD_OPTION_HTTPS_PRIORITIES, 0, (void *) SW_WEBHOOK_TLS_PRIORITIES},
		{MHD_OPTION_END, 0, NULL}
	};
	bool		use_tls = cert_pem != NULL && key_pem != NULL;
	struct addrinfo hints = {0};
	struct addrinfo *addr;
	char		service[16];
	sigset_t	all;
	sigset_t	old;
	static char error[256];

	shutting_down = false;
	if (pipe(wake_pipe) != 0 ||
		fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
		fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) != 0)
	{
		snprintf(error, sizeof(error), "could not make a pipe: %s", strerror(errno));
		close_wake_pipe();
		return error;
	}

	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
	snprintf(service, sizeof(service), "%d", port);
	if (getaddrinfo(host, service, &hints, &addr) != 0 || addr == NULL)
	{
		snprintf(error, sizeof(error), "could not resolve \"%s\"", host);
		close_wake_pipe();
		return error;
	}

	pthread_mutex_lock(&start_log_lock);
	start_logging = true;
	start_log[0] = '\0';
	pthread_mutex_unlock(&start_log_lock);
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);

	/*
	 * poll(), not epoll: every request is suspended while the main thread
	 * writes it, and with epoll each suspension and each resumption is an
	 * epoll_ctl() call.  With bench/webhook's 32 keep-alive connections,
	 * the HTTP ceiling was about a fifth higher with poll(); with a
	 * connection per request, the two cost about the same.
	 */
	daemon_handle = MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD |
									 MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
									 (use_tls ? MHD_USE_TLS : 0) |
									 (addr->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
									 (uint16_t) port, NULL, NULL,
									 handle_request, NULL,
									 MHD_OPTION_EXTERNAL_LOGGER, keep_start_log, NULL,
									 MHD_OPTION_SOCK_ADDR, addr->ai_addr,
									 MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
									 MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL,
									 MHD_OPTION_CONNECTION_TIMEOUT,
									 (unsigned int) SW_WEBHOOK_CONNECTION_TIMEOUT,
									 MHD_OPTION_CONNECTION_LIMIT,
									 (unsigned int) SW_WEBHOOK_MAX_CONNECTIONS,
									 MHD_OPTION_PER_IP_CONNECTION_LIMIT,
									 (unsigned int) SW_WEBHOOK_MAX_PER_ADDRESS,
									 MHD_OPTION_ARRAY, use_tls ? tls : &tls[3],
									 MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	freeaddrinfo(addr);
	pthread_mutex_lock(&start_log_lock);
	start_logging = false;
	if (daemon_handle == NULL && start_log[0] != '\0')
		snprintf(error, sizeof(error), "could not serve on %s:%d: %s", host, port, start_log);
	else if (daemon_handle == NULL)
		snprintf(error, sizeof(error), "could not listen on %s:%d (is the address in use?)",
				 host, port);
	pthread_mutex_unlock(&start_log_lock);
	if (daemon_handle == NULL)
	{
		close_wake_pipe();
		return error;
	}
	return NULL;
}

/* the pipe the main thread waits on: readable when requests are queued */
int
sw_webhook_server_wake_fd(void)
{
	return wake_pipe[0];
}

/*
 * Take the queued requests, oldest first, as a list (through next); NULL
 * if there are none.
 */
SwRequest *
sw_webhook_server_take(void)
{
	SwRequest  *taken;
	char		bytes[64];

	while (read(wake_pipe[0], bytes, sizeof(bytes)) > 0)
		;
	pthread_mutex_lock(&queue_lock);
	taken = queue_head;
	queue_head = queue_tail = NULL;
	pthread_mutex_unlock(&queue_lock);
	return taken;
}

/*
 * Take the requests waiting for a look at their table's limit, as a list
 * (through next); NULL if there are none.  The caller publishes the map
 * if it may be stale, and then resumes each with sw_webhook_server_checked.
 */
SwRequest *
sw_webhook_server_take_checks(void)
{
	SwRequest  *taken;

	pthread_mutex_lock(&queue_lock);
	taken = check_head;
	check_head = check_tail = NULL;
	pthread_mutex_unlock(&queue_lock);
	return taken;
}

/*
 * What to answer a request taken with sw_webhook_server_take_checks(),
 * from the map as it is now (published since the request came): 404 for
 * an address that is no webhook source, 413 for a body over its table's
 * limit, or 0 to read (more of) it, its limit then sure; the table's id,
 * as published, in *table_id (0 if none).  For the main thread, which
 * passes it to sw_webhook_server_checked().
 */
int
sw_webhook_server_verdict(SwRequest *request, unsigned int *table_id)
{
	size_t		limit = 0;
	int			found;

	*table_id = 0;
	found = find_limit(request->path, &limit, table_id);

	if (found == 0 && request->checking == SW_CHECK_HEADERS)
		return MHD_HTTP_NOT_FOUND;
	set_limit(request, found, limit, true);
	if (request->declared > request->limit)
		return MHD_HTTP_CONTENT_TOO_LARGE;
	return 0;
}

/*
 * Whether the published map has a webhook source at path: 1 if it has, 0
 * if not, -1 if there is no map.  For the main thread.
 */
int
sw_webhook_server_knows(const char *path)
{
	size_t		limit;

	return find_limit(path, &limit, NULL);
}

/*
 * Resume a request taken with sw_webhook_server_take_checks(): with status
 * 0, to read (more of) its body; else to be answered that status (404,
 * 413, 503) or, in the middle of its body, to have its connection closed.
 * The request is not ours any more.
 */
void
sw_webhook_server_checked(SwRequest *request, int status)
{
	request->check_status = status;
	if (status)
	{
		pthread_mutex_lock(&queue_lock);
		answering++;
		pthread_mutex_unlock(&queue_lock);
	}
	MHD_resume_connection(request->connection);
}

/*
 * Publish the webhook sources of the databases served with their limits,
 * for the server's threads to look up; limits NULL publishes none.  False
 * if there was no memory for it: then there is no map, and bodies are
 * read up to SW_WEBHOOK_MAX_BODY before the main thread checks them.
 */
bool
sw_webhook_server_publish_limits(const SwBodyLimit *limits, int n)
{
	BodyLimits *map = NULL;
	BodyLimits *old;

	if (limits)
	{
		size_t		size = sizeof(BodyLimits) + sizeof(BodyLimit) * n;
		char	   *s;

		for (int i = 0; i < n; i++)
			size += strlen(limits[i].database) + strlen(limits[i].schema) +
				strlen(limits[i].table) + 3;
		map = malloc(size);
		if (map)
		{
			s = (char *) &map->limits[n];
			map->n = n;
			for (int i = 0; i < n; i++)
			{
				BodyLimit  *l = &map->limits[i];

				l->database = s;
				l->database_len = strlen(limits[i].database);
				s = stpcpy(s, limits[i].database) + 1;
				l->schema = s;
				l->schema_len = strlen(limits[i].schema);
				s = stpcpy(s, limits[i].schema) + 1;
				l->table = s;
				l->table_len = strlen(limits[i].table);
				s = stpcpy(s, limits[i].table) + 1;
				l->limit = limits[i].limit;
				l->table_id = limits[i].table_id;
			}
			qsort(map->limits, n, sizeof(BodyLimit), compare_limits);
		}
	}
	pthread_mutex_lock(&queue_lock);
	old = body_limits;
	body_limits = map;
	pthread_mutex_unlock(&queue_lock);
	free(old);
	return map != NULL || limits == NULL;
}

/* resume a request the main thread answered (status 0: close unanswered) */
static void
resume_answered(SwRequest *request)
{
	request->answered = true;
	pthread_mutex_lock(&queue_lock);
	in_flight--;
	answering++;
	pthread_mutex_unlock(&queue_lock);
	MHD_resume_connection(request->connection);
}

/*
 * Answer a request taken from the queue: its connection resumes, and one of
 * libmicrohttpd's threads sends the answer.  The request is not ours any
 * more.
 */
void
sw_webhook_server_answer(SwRequest *request, int status, const char *text)
{
	request->text = copy_string(text);
	request->status = request->text ? status : MHD_HTTP_INTERNAL_SERVER_ERROR;
	resume_answered(request);
}

/*
 * Close a taken request's connection without an answer, when the request's
 * outcome cannot be told: its sender sees the connection drop, as a client
 * of PostgreSQL does whose commit could not be confirmed.  The request is
 * not ours any more.
 */
void
sw_webhook_server_hang_up(SwRequest *request)
{
	request->status = 0;
	resume_answered(request);
}

/*
 * Stop serving: the requests still queued, or waiting for a look at their
 * limit, are answered 503, and once the answers are sent (or after
 * SW_WEBHOOK_STOP_WAIT_MS) libmicrohttpd's threads stop.  The caller has
 * answered those it took.
 */
void
sw_webhook_server_stop(void)
{
	SwRequest  *r;
	struct timespec deadline;

	if (daemon_handle == NULL)
		return;
	pthread_mutex_lock(&queue_lock);
	shutting_down = true;
	pthread_mutex_unlock(&queue_lock);
	r = sw_webhook_server_take();
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_answer(r, MHD_HTTP_SERVICE_UNAVAILABLE,
								 SW_WEBHOOK_SHUTTING_DOWN_TEXT);
		r = next;
	}
	r = sw_webhook_server_take_checks();
	while (r)
	{
		SwRequest  *next = r->next;

		sw_webhook_server_checked(r, MHD_HTTP_SERVICE_UNAVAILABLE);
		r = next;
	}

	/*
	 * Let the answers go, for a while (on the monotonic clock, which a
	 * change of the system's time does not move): libmicrohttpd closes the
	 * connections it still has when it stops, sent or not.
	 */
	clock_gettime(CLOCK_MONOTONIC, &deadline);
	deadline.tv_nsec += SW_WEBHOOK_STOP_WAIT_MS * 1000000L;
	deadline.tv_sec += deadline.tv_nsec / 1000000000L;
	deadline.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&queue_lock);
	while (answering > 0 &&
		   pthread_cond_clockwait(&answer_gone, &queue_lock, CLOCK_MONOTONIC,
								  &deadline) == 0)
		;
	pthread_mutex_unlock(&queue_lock);
	MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;
	close_wake_pipe();
}
