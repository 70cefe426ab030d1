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
 * thread, and we send the answer.  The request is freed when libmicrohttpd
 * is done with the connection.
 *
 * Requests that need no database are answered here: methods other than
 * POST (405) and bodies over SW_WEBHOOK_MAX_BODY (413, at once when
 * Content-Length says so), bodies that would take the buffered bytes of all
 * connections over SW_WEBHOOK_MAX_BUFFERED (503), requests beyond
 * SW_WEBHOOK_MAX_IN_FLIGHT queued or being written (429), and everything
 * while the server shuts down (503).  Connections are limited in number, in total and
 * from one address, and one idle for SW_WEBHOOK_CONNECTION_TIMEOUT is
 * closed.
 *
 * Given a certificate and a key (PEM text, which the main thread read),
 * the server speaks HTTPS only, through libmicrohttpd's GnuTLS: TLS 1.2 or
 * later, as the default of PostgreSQL's ssl_min_protocol_version.
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

/* connections at once, in all and from one address */
#define SW_WEBHOOK_MAX_CONNECTIONS		256
#define SW_WEBHOOK_MAX_PER_ADDRESS		128

/* how long a server that stops waits for its last answers to be sent */
#define SW_WEBHOOK_STOP_WAIT_MS			1000

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
static int	unsent = 0;			/* answered by the main thread, not yet sent */
static pthread_cond_t sent = PTHREAD_COND_INITIALIZER;	/* unsent went down */
static int	wake_pipe[2] = {-1, -1};

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
		return MHD_NO;
	r->headers = headers;
	r->headers[r->nheaders].name = copy_string(name);
	r->headers[r->nheaders].value = copy_string(value);
	if (r->headers[r->nheaders].name == NULL ||
		(value && r->headers[r->nheaders].value == NULL))
		return MHD_NO;
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
 * libmicrohttpd's handler, called in its threads: first with the request
 * line and headers, then with each piece of the body, then once more when
 * the body is complete; and again after the main thread answered and
 * resumed the connection.
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
			MHD_get_connection_values(connection, MHD_HEADER_KIND, keep_header, r) < 0)
			return MHD_NO;

		/* what we refuse anyway, we answer before the body comes */
		if (strcmp(r->method, MHD_HTTP_METHOD_POST) != 0)
			return send_answer(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
							   "only POST is allowed\n");
		length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
											 MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (length && strtoull(length, NULL, 10) > SW_WEBHOOK_MAX_BODY)
			return send_answer(connection, MHD_HTTP_CONTENT_TOO_LARGE,
							   "the body is too large\n");
		return MHD_YES;
	}

	/* answered by the main thread: send it */
	if (r->answered)
		return send_answer(connection, r->status, r->text ? r->text : "");

	/* a piece of the body */
	if (*upload_data_size > 0)
	{
		size_t		n = *upload_data_size;

		*upload_data_size = 0;
		if (r->refusal)
			return MHD_YES;		/* not kept */
		if (r->body_len + n > SW_WEBHOOK_MAX_BODY)
		{
			r->refusal = MHD_HTTP_CONTENT_TOO_LARGE;
			return MHD_YES;
		}
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
	if (r->refusal == MHD_HTTP_CONTENT_TOO_LARGE)
		return send_answer(connection, r->refusal, "the body is too large\n");
	if (r->refusal)
		return send_answer(connection, r->refusal, "the server is busy; send it again\n");

	pthread_mutex_lock(&queue_lock);
	if (shutting_down)
	{
		pthread_mutex_unlock(&queue_lock);
		return send_answer(connection, MHD_HTTP_SERVICE_UNAVAILABLE,
						   "the server is shutting down\n");
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
	SwRequest  *r = *req_cls;

	if (r && r->answered)
	{
		pthread_mutex_lock(&queue_lock);
		unsent--;
		pthread_cond_broadcast(&sent);
		pthread_mutex_unlock(&queue_lock);
	}
	if (r)
		free_request(r);
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
	daemon_handle = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL |
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
 * Answer a request taken from the queue: its connection resumes, and one of
 * libmicrohttpd's threads sends the answer.  The request is not ours any
 * more.
 */
void
sw_webhook_server_answer(SwRequest *request, int status, const char *text)
{
	request->text = copy_string(text);
	request->status = request->text ? status : MHD_HTTP_INTERNAL_SERVER_ERROR;
	request->answered = true;
	pthread_mutex_lock(&queue_lock);
	in_flight--;
	unsent++;
	pthread_mutex_unlock(&queue_lock);
	MHD_resume_connection(request->connection);
}

/*
 * Stop serving: the requests still queued are answered 503, libmicrohttpd's
 * threads are given up to SW_WEBHOOK_STOP_WAIT_MS to send the answers, and
 * then they stop.  The caller has answered those it took.
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
								 "the server is shutting down\n");
		r = next;
	}

	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_nsec += SW_WEBHOOK_STOP_WAIT_MS * 1000000L;
	deadline.tv_sec += deadline.tv_nsec / 1000000000L;
	deadline.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&queue_lock);
	while (unsent > 0 && pthread_cond_timedwait(&sent, &queue_lock, &deadline) == 0)
		;
	pthread_mutex_unlock(&queue_lock);

	MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;
	close_wake_pipe();
}
