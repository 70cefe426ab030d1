/*-------------------------------------------------------------------------
 *
 * webhook_server.c
 *		  The webhook worker's HTTP server: libmicrohttpd's threads, which
 *		  never call PostgreSQL, and the requests they hand over
 *
 * See doc/internals.md, "Workers and processes" (Webhook server).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/webhook/webhook_server.c
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

#include "webhook/webhook_server.h"

/*
 * How long a connection may wait for a request: seconds from its opening
 * to its first request's complete line and headers, and from an answer to
 * the next request's (in which a connection with nothing to say is idle:
 * libmicrohttpd closes one idle for the latter, too, at any time).
 */
#define SW_WEBHOOK_HEADER_TIMEOUT		5
#define SW_WEBHOOK_CONNECTION_TIMEOUT	30

/* how long a server that stops waits for its last answers to go, in ms */
#define SW_WEBHOOK_STOP_WAIT_MS			1000

/* the reaper's wakes, at most one per this many ms */
#define SW_WEBHOOK_REAP_MS				250

/* the most requests waiting for the main thread's look at their limit */
#define SW_WEBHOOK_MAX_CHECKING			32

#if SW_WEBHOOK_MAX_IN_FLIGHT + SW_WEBHOOK_MAX_CHECKING >= SW_WEBHOOK_MAX_PER_ADDRESS
#error "the connections held by the main thread must leave room at one address"
#endif

/* GnuTLS's priorities with TLS: its defaults, without the versions before 1.2 */
#define SW_WEBHOOK_TLS_PRIORITIES	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static struct MHD_Daemon *daemon_handle = NULL;
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static SwRequest *queue_head = NULL;
static SwRequest *queue_tail = NULL;
static bool shutting_down = false;
static size_t buffered = 0;		/* body bytes held (counted), under queue_lock */
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
	const char *signature_header;	/* or NULL */
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

/* requests waiting for the main thread's look, under queue_lock */
static int	checks_waiting = 0;

/*
 * A client's address, as the limits count connections: an IPv4 address,
 * or an IPv6 one's /64.  Each is kept while it has connections, in a
 * table of SW_ADDRESS_BUCKETS lists, under conn_lock.
 */
#define SW_ADDRESS_BUCKETS	1024

typedef struct SwAddress
{
	struct SwAddress *next;		/* in its bucket's list */
	unsigned int bucket;		/* its list's, in addresses[] */
	unsigned char bytes[8];
	int			len;
	int			live;			/* its connections that are not closing */
	int			refs;			/* its connections, closing or not */
} SwAddress;

static SwAddress *addresses[SW_ADDRESS_BUCKETS];

/*
 * The connections libmicrohttpd has, as we keep track of them (its
 * connection notifications), to close those that wait too long for a
 * request and, past the limits, others.  A connection is in one of four
 * states:
 */
#define SW_CONN_WAITING		0	/* for a request's line and headers */
#define SW_CONN_RECEIVING	1	/* its body, in libmicrohttpd's thread */
#define SW_CONN_HELD		2	/* the main thread has it */
#define SW_CONN_SENDING		3	/* its answer goes */

typedef struct SwConnection
{
	struct SwConnection *prev;	/* in the list, oldest state first */
	struct SwConnection *next;
	int			fd;				/* libmicrohttpd's socket */
	SwAddress  *address;		/* the client's */
	int			state;
	int64_t		since;			/* when the state began, monotonic ms */
	int64_t		deadline;		/* waiting: when it is closed, monotonic ms */
	bool		closing;		/* we shut its socket down */
	bool		listed;			/* in the list */
	bool		served;			/* a request of it was answered */
} SwConnection;

/*
 * The list, under conn_lock: in the order their states began, the oldest
 * first (a connection moves to the end when its state changes), with how
 * many are not closing.  Connections are added and removed in
 * libmicrohttpd's thread, before it closes their sockets, so that the
 * reaper may shut a socket down while it holds the lock.
 */
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static SwConnection *conn_head = NULL;
static SwConnection *conn_tail = NULL;
static int	conn_live = 0;
static int	conn_limit = SW_WEBHOOK_MAX_CONNECTIONS;	/* kept at once */
static int	conn_per_address = SW_WEBHOOK_MAX_PER_ADDRESS;

/* the reaper: a thread that closes connections past their deadline */
static pthread_t reaper;
static bool reaper_running = false;
static bool reaper_stop = false;	/* under conn_lock, as the rest */
static int64_t reaper_wake = INT64_MAX; /* when it wakes next */
static pthread_cond_t reaper_cond = PTHREAD_COND_INITIALIZER;

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

/*
 * Of a body's buffer of cap bytes, those counted against
 * SW_WEBHOOK_MAX_BUFFERED: all but the first SW_WEBHOOK_BODY_ROOM, which
 * each connection has
 */
static size_t
counted_bytes(size_t cap)
{
	return cap > SW_WEBHOOK_BODY_ROOM ? cap - SW_WEBHOOK_BODY_ROOM : 0;
}

static void
free_request(SwRequest *r)
{
	pthread_mutex_lock(&queue_lock);
	buffered -= counted_bytes(r->body_cap);
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
	free(r->query);
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

	/*
	 * A field value has no whitespace (SP, HTAB) at either end (RFC 9110,
	 * 5.5): libmicrohttpd skips it before the value, we cut it after.
	 */
	if (value)
	{
		char	   *v = r->headers[r->nheaders].value;
		size_t		len = strlen(v);

		while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
			v[--len] = '\0';
	}
	r->nheaders++;
	return MHD_YES;
}

/*
 * libmicrohttpd's iterator over the arguments of a GET: each is added to
 * the query, as sent (libmicrohttpd has made each '+' a space)
 */
static enum MHD_Result
keep_argument(void *cls, enum MHD_ValueKind kind, const char *name, const char *value)
{
	SwRequest  *r = cls;
	size_t		had = r->query ? strlen(r->query) : 0;
	size_t		len = had + 1 + strlen(name) + 1 + (value ? strlen(value) : 0) + 1;
	char	   *query = realloc(r->query, len);

	if (query == NULL)
	{
		r->headers_lost = true;
		return MHD_NO;
	}
	snprintf(query + had, len - had, "%s%s%s%s", had ? "&" : "", name,
			 value ? "=" : "", value ? value : "");
	r->query = query;
	return MHD_YES;
}

/* keep the path as sent: we split it before we decode it */
static size_t
keep_escapes(void *cls, struct MHD_Connection *connection, char *s)
{
	return strlen(s);
}

/* monotonic milliseconds, for the connections' deadlines */
static int64_t
monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* take a connection out of the list, if it is there; under conn_lock */
static void
unlink_connection(SwConnection *c)
{
	if (!c->listed)
		return;
	c->listed = false;
	if (c->prev)
		c->prev->next = c->next;
	else
		conn_head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		conn_tail = c->prev;
	c->prev = c->next = NULL;
}

/*
 * Close a connection that waits too long, or one past the limits: shut
 * its socket down, so that libmicrohttpd, which reads its end at once,
 * closes it (in its thread; we hold conn_lock, so it has not closed the
 * socket yet).  A request it may have begun is never taken.
 */
static void
cut_connection(SwConnection *c)
{
	c->closing = true;
	conn_live--;
	c->address->live--;
	(void) shutdown(c->fd, SHUT_RDWR);
}

/*
 * Move a connection to a state, at the end of the list; one that waits
 * for a request is cut at wait_ms from now.  Under conn_lock.
 */
static void
set_connection_state(SwConnection *c, int state, int64_t wait_ms)
{
	int64_t		now = monotonic_ms();

	c->state = state;
	c->since = now;
	unlink_connection(c);
	c->prev = conn_tail;
	if (conn_tail)
		conn_tail->next = c;
	else
		conn_head = c;
	conn_tail = c;
	c->listed = true;
	if (state == SW_CONN_WAITING)
	{
		c->deadline = now + wait_ms;
		if (c->deadline < reaper_wake)
		{
			reaper_wake = c->deadline;
			pthread_cond_signal(&reaper_cond);
		}
	}
}

/*
 * Move the connection of a request to a state (a waiting one gets
 * SW_WEBHOOK_CONNECTION_TIMEOUT): false if it is being cut.  In
 * libmicrohttpd's thread.
 */
static bool
connection_state(struct MHD_Connection *connection, int state)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	SwConnection *c = info ? info->socket_context : NULL;
	bool		live = true;

	if (c == NULL)
		return true;
	pthread_mutex_lock(&conn_lock);
	if (c->closing)
		live = false;
	else if (c->state != state || state == SW_CONN_WAITING)
	{
		/* waiting again: it was served */
		c->served |= state == SW_CONN_WAITING;
		set_connection_state(c, state, SW_WEBHOOK_CONNECTION_TIMEOUT * 1000);
	}
	pthread_mutex_unlock(&conn_lock);
	return live;
}

/*
 * Of a connection that may be cut: whether it had a request, one that is
 * idle between requests or sends an answer (an answer that does not go is
 * one the client does not read), which are cut after those that wait for
 * their first request or receive a body.  Under conn_lock.
 */
static bool
had_request(SwConnection *x)
{
	return x->state == SW_CONN_SENDING || x->served;
}

/*
 * The connection to cut to make room for connection c: of address a, or
 * (if a is NULL) of the address that has the most connections, so that
 * whoever opens many cuts his own (of those that have as many, the one
 * whose connection's state began longest ago).  Of that address's
 * connections, the one whose state began longest ago that waits for its
 * first request or receives a body; if there is none, the one that has
 * been idle between requests (a client's pool of connections, which a
 * reverse proxy keeps) or sending its answer longest.  c itself, and those
 * the main thread holds, are never cut.  NULL if there is none.  Under
 * conn_lock.
 */
static SwConnection *
connection_to_cut(SwConnection *c, SwAddress *a)
{
	SwConnection *victim = NULL;
	SwConnection *served = NULL;

	/* the list is in order: the first found of an address is its oldest */
	if (a == NULL)
	{
		for (SwConnection *x = conn_head; x; x = x->next)
		{
			if (x == c || x->closing || x->state == SW_CONN_HELD)
				continue;
			if (a == NULL || x->address->live > a->live)
				a = x->address;
		}
	}
	for (SwConnection *x = conn_head; x && victim == NULL; x = x->next)
	{
		if (x == c || x->closing || x->state == SW_CONN_HELD || x->address != a)
			continue;
		if (!had_request(x))
			victim = x;
		else if (served == NULL)
			served = x;
	}
	return victim ? victim : served;
}

/*
 * Past the limits, with c just come: cut a connection of c's address, and
 * then, past the total, one of the address that has the most
 * (connection_to_cut); c itself only if no other may be, so that a new
 * connection is not cut for older ones that wait (which an attacker could
 * keep, each served once).  Under conn_lock.
 */
static void
make_room(SwConnection *c)
{
	SwConnection *victim;

	if (c->address->live > conn_per_address)
	{
		victim = connection_to_cut(c, c->address);
		cut_connection(victim ? victim : c);
	}
	if (!c->closing && conn_live > conn_limit)
	{
		victim = connection_to_cut(c, NULL);
		cut_connection(victim ? victim : c);
	}
}

/*
 * The address of a connection's client, as the limits count it: an IPv4
 * address (also one mapped into IPv6), or the /64 of an IPv6 one, the
 * least a site is given; taken from the table, or added to it.  NULL if
 * there is no memory for it.  Under conn_lock.
 */
static SwAddress *
client_address(struct MHD_Connection *connection)
{
	const union MHD_ConnectionInfo *info =
		MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	const struct sockaddr *sa = info ? info->client_addr : NULL;
	unsigned char bytes[8];
	int			len = 0;
	uint32_t	hash = 2166136261u; /* FNV-1a */
	unsigned int bucket;
	SwAddress  *a;

	if (sa && sa->sa_family == AF_INET)
	{
		memcpy(bytes, &((const struct sockaddr_in *) sa)->sin_addr, 4);
		len = 4;
	}
	else if (sa && sa->sa_family == AF_INET6)
	{
		const struct in6_addr *in6 = &((const struct sockaddr_in6 *) sa)->sin6_addr;

		if (IN6_IS_ADDR_V4MAPPED(in6))
		{
			memcpy(bytes, &in6->s6_addr[12], 4);
			len = 4;
		}
		else
		{
			memcpy(bytes, in6->s6_addr, 8);
			len = 8;
		}
	}
	for (int i = 0; i < len; i++)
		hash = (hash ^ bytes[i]) * 16777619u;
	bucket = (hash ^ (uint32_t) len) % SW_ADDRESS_BUCKETS;
	for (a = addresses[bucket]; a; a = a->next)
		if (a->len == len && memcmp(a->bytes, bytes, len) == 0)
			break;
	if (a == NULL)
	{
		a = calloc(1, sizeof(SwAddress));
		if (a == NULL)
			return NULL;
		memcpy(a->bytes, bytes, len);
		a->len = len;
		a->bucket = bucket;
		a->next = addresses[bucket];
		addresses[bucket] = a;
	}
	a->refs++;
	return a;
}

/* a connection is forgotten: forget its address too if it has no other */
static void
release_address(SwAddress *a)
{
	if (--a->refs > 0)
		return;
	for (SwAddress **p = &addresses[a->bucket]; *p; p = &(*p)->next)
	{
		if (*p == a)
		{
			*p = a->next;
			break;
		}
	}
	free(a);
}

/*
 * libmicrohttpd's notification of a connection, in its thread: keep track
 * of a new one, which waits for its first request for
 * SW_WEBHOOK_HEADER_TIMEOUT, and make room for it; forget one closed (its
 * socket is not closed yet).  A connection we cannot keep track of is cut.
 */
static void
notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
				  enum MHD_ConnectionNotificationCode code)
{
	SwConnection *c = *socket_context;

	if (code == MHD_CONNECTION_NOTIFY_STARTED)
	{
		const union MHD_ConnectionInfo *fd =
			MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (fd == NULL)
			return;
		c = calloc(1, sizeof(SwConnection));
		pthread_mutex_lock(&conn_lock);
		if (c)
			c->address = client_address(connection);
		if (c == NULL || c->address == NULL)
		{
			pthread_mutex_unlock(&conn_lock);
			free(c);
			(void) shutdown(fd->connect_fd, SHUT_RDWR);
			return;
		}
		c->fd = fd->connect_fd;
		*socket_context = c;
		conn_live++;
		c->address->live++;
		set_connection_state(c, SW_CONN_WAITING, SW_WEBHOOK_HEADER_TIMEOUT * 1000);
		make_room(c);
		pthread_mutex_unlock(&conn_lock);
	}
	else if (code == MHD_CONNECTION_NOTIFY_CLOSED && c)
	{
		pthread_mutex_lock(&conn_lock);
		unlink_connection(c);
		if (!c->closing)
		{
			conn_live--;
			c->address->live--;
		}
		release_address(c->address);
		pthread_mutex_unlock(&conn_lock);
		free(c);
		*socket_context = NULL;
	}
}

/*
 * The reaper's thread: cut the connections that have waited for a request
 * past their deadline, waking at the next one (at most every
 * SW_WEBHOOK_REAP_MS), until the server stops.
 */
static void *
reap_connections(void *arg)
{
	pthread_mutex_lock(&conn_lock);
	while (!reaper_stop)
	{
		int64_t		now = monotonic_ms();
		int64_t		next = INT64_MAX;

		for (SwConnection *c = conn_head; c; c = c->next)
		{
			if (c->closing || c->state != SW_CONN_WAITING)
				continue;
			if (c->deadline <= now)
				cut_connection(c);
			else if (c->deadline < next)
				next = c->deadline;
		}
		if (next < now + SW_WEBHOOK_REAP_MS)
			next = now + SW_WEBHOOK_REAP_MS;
		reaper_wake = next;
		if (next == INT64_MAX)
			pthread_cond_wait(&reaper_cond, &conn_lock);
		else
		{
			struct timespec until;

			until.tv_sec = next / 1000;
			until.tv_nsec = (next % 1000) * 1000000L;
			(void) pthread_cond_clockwait(&reaper_cond, &conn_lock, CLOCK_MONOTONIC, &until);
		}
	}
	pthread_mutex_unlock(&conn_lock);
	return NULL;
}

/* stop the reaper's thread, if it runs */
static void
stop_reaper(void)
{
	if (!reaper_running)
		return;
	pthread_mutex_lock(&conn_lock);
	reaper_stop = true;
	pthread_cond_signal(&reaper_cond);
	pthread_mutex_unlock(&conn_lock);
	pthread_join(reaper, NULL);
	reaper_running = false;
}

/* send a request's answer, of plain text or of JSON */
static enum MHD_Result
send_typed_answer(struct MHD_Connection *connection, int status,
				  const char *text, bool json)
{
	struct MHD_Response *response;
	enum MHD_Result result;

	response = MHD_create_response_from_buffer(strlen(text), (void *) text,
											   MHD_RESPMEM_MUST_COPY);
	if (response == NULL)
		return MHD_NO;
	(void) connection_state(connection, SW_CONN_SENDING);
	MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE,
							json ? "application/json" : "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(response, MHD_HTTP_HEADER_ALLOW, "POST");
	result = MHD_queue_response(connection, status, response);
	MHD_destroy_response(response);
	return result;
}

/* send a request's answer of plain text */
static enum MHD_Result
send_answer(struct MHD_Connection *connection, int status, const char *text)
{
	return send_typed_answer(connection, status, text, false);
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
 * The value of a hexadecimal digit, or -1.  The relays decode paths with
 * it too.
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

/* does a request have a header of this name (of len bytes)? */
static bool
has_header(const void *arg, const char *name, size_t len)
{
	const SwRequest *r = arg;

	for (int i = 0; i < r->nheaders; i++)
		if (strncasecmp(r->headers[i].name, name, len) == 0 &&
			r->headers[i].name[len] == '\0')
			return true;
	return false;
}

/*
 * Whether a request has none of the headers that names lists: one name, or
 * several separated by commas (the signature headers of a table's scheme,
 * e.g. standard's webhook-signature and svix-signature), each asked of
 * has(arg, name, its length).  Plain C: the HTTP threads and the main
 * thread both ask.
 */
bool
sw_webhook_lacks_headers(const char *names,
						 bool (*has) (const void *arg, const char *name, size_t len),
						 const void *arg)
{
	for (const char *p = names; *p;)
	{
		size_t		len = strcspn(p, ",");

		if (len > 0 && has(arg, p, len))
			return false;
		p += len;
		if (*p == ',')
			p++;
	}
	return true;
}

/*
 * What the published map says of the table a path names (and of request
 * r, if given): SW_WEBHOOK_KNOWN if it has one (its limit in *limit, its
 * id in *table_id), SW_WEBHOOK_UNSIGNED if r lacks the table's signature
 * header (the same, else), SW_WEBHOOK_UNKNOWN if the path names no
 * webhook source in the map, SW_WEBHOOK_NO_MAP if there is no map (or no
 * memory to look).
 */
static int
find_limit(const char *path, const SwRequest *r, size_t *limit, unsigned int *table_id)
{
	char	   *buf = malloc(strlen(path) + 1);
	const char *names[3];
	size_t		lens[3];
	bool		valid = buf != NULL && sw_webhook_split_path(path, buf, names, lens);
	int			found;

	pthread_mutex_lock(&queue_lock);
	if (body_limits == NULL || buf == NULL)
		found = SW_WEBHOOK_NO_MAP;
	else if (!valid)
		found = SW_WEBHOOK_UNKNOWN;
	else
	{
		BodyLimit	key = {names[0], lens[0], names[1], lens[1], names[2], lens[2], 0, NULL, 0};
		BodyLimit  *entry = bsearch(&key, body_limits->limits, body_limits->n,
									sizeof(BodyLimit), compare_limits);

		found = SW_WEBHOOK_UNKNOWN;
		if (entry)
		{
			found = r && entry->signature_header && r->query == NULL &&
				sw_webhook_lacks_headers(entry->signature_header, has_header, r) ?
				SW_WEBHOOK_UNSIGNED : SW_WEBHOOK_KNOWN;
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
 * Set a request's limit from what find_limit() found (SW_WEBHOOK_UNSIGNED
 * taken as either of the others by the caller); looked says the main
 * thread published the map after the request came.  Without a map,
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
	if (checks_waiting >= SW_WEBHOOK_MAX_CHECKING)
	{
		pthread_mutex_unlock(&queue_lock);
		if (where == SW_CHECK_BODY)
			return MHD_NO;
		return send_answer(connection, MHD_HTTP_TOO_MANY_REQUESTS,
						   "too many requests are waiting; send it again\n");
	}
	checks_waiting++;
	r->checking = where;
	r->check_status = 0;
	r->next = NULL;
	(void) connection_state(connection, SW_CONN_HELD);
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
	found = find_limit(r->path, r, &limit, NULL);

	/*
	 * Without its table's signature header, a request is one to no table,
	 * as the main thread answers it (404, with the same text), so that
	 * who does not sign cannot tell which signed tables there are.
	 */
	if (found == SW_WEBHOOK_UNSIGNED)
		found = SW_WEBHOOK_UNKNOWN;
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
			(void) connection_state(connection, SW_CONN_RECEIVING);
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
 * A request whose line and headers are in: keep them (*req_cls), and
 * refuse at once what would be refused anyway, before its body comes.
 */
static enum MHD_Result
request_begins(struct MHD_Connection *connection, const char *url,
			   const char *method, void **req_cls)
{
	SwRequest  *r;
	const char *length;

	/* its headers are in: unless it was cut meanwhile, its body comes */
	if (!connection_state(connection, SW_CONN_RECEIVING))
		return MHD_NO;
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

	/*
	 * What we refuse anyway, we answer before the body comes: a method but
	 * POST, or GET with a query, which the main thread answers (a table's
	 * scheme may take the handshake it is).
	 */
	if (strcmp(r->method, MHD_HTTP_METHOD_GET) == 0)
	{
		if (MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND,
									  keep_argument, r) < 0 || r->headers_lost)
			return MHD_NO;
	}
	if (strcmp(r->method, MHD_HTTP_METHOD_POST) != 0 && r->query == NULL)
		return send_answer(connection, MHD_HTTP_METHOD_NOT_ALLOWED,
						   SW_WEBHOOK_POST_ONLY_TEXT);
	length = MHD_lookup_connection_value(connection, MHD_HEADER_KIND,
										 MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (length && strtoull(length, NULL, 10) > SW_WEBHOOK_MAX_BODY)
		return send_answer(connection, MHD_HTTP_CONTENT_TOO_LARGE,
						   "the body is too large\n");
	return look_up_limit(r, connection, length);
}

/*
 * A piece of a request's body: kept, unless the body goes over its limit
 * (then the main thread looks again at the limit, or the connection is
 * closed) or the server holds as much as it may (the request is refused
 * when complete).
 */
static enum MHD_Result
keep_body_piece(SwRequest *r, struct MHD_Connection *connection,
				const char *upload_data, size_t *upload_data_size)
{
	size_t		n = *upload_data_size;

	if (r->checking == SW_CHECK_BODY)
	{
		/* resumed with the main thread's verdict */
		r->checking = SW_CHECK_NONE;
		if (r->check_status)
			return MHD_NO;	/* 413, or 503: no answer in a body, close */
		(void) connection_state(connection, SW_CONN_RECEIVING);
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
		size_t		growth;
		char	   *body;
		bool		over;

		while (cap < r->body_len + n + 1)
			cap *= 2;
		growth = counted_bytes(cap) - counted_bytes(r->body_cap);
		pthread_mutex_lock(&queue_lock);
		over = buffered + growth > SW_WEBHOOK_MAX_BUFFERED;
		if (!over)
			buffered += growth;
		pthread_mutex_unlock(&queue_lock);
		body = over ? NULL : realloc(r->body, cap);
		if (body == NULL)
		{
			/* the server holds as much as it may: come again */
			if (!over)
			{
				pthread_mutex_lock(&queue_lock);
				buffered -= growth;
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

/*
 * A complete request: unless its connection was cut meanwhile (a request
 * whose client cannot have its answer is not written), suspend it and put
 * it on the queue for the main thread, waking it.
 */
static enum MHD_Result
queue_request(SwRequest *r, struct MHD_Connection *connection)
{
	bool		wake;

	if (!connection_state(connection, SW_CONN_HELD))
		return MHD_NO;
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
		wake_worker();
	return MHD_YES;
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

	if (r == NULL)
		return request_begins(connection, url, method, req_cls);

	/* resumed after the main thread published the map */
	if (r->checking == SW_CHECK_HEADERS)
		return headers_looked_at(r, connection);

	/* answered by the main thread: send it, or close without an answer */
	if (r->answered)
		return r->status == 0 ? MHD_NO :
			send_typed_answer(connection, r->status, r->text ? r->text : "",
							  r->answer_json && r->text);

	/* a piece of the body */
	if (*upload_data_size > 0)
		return keep_body_piece(r, connection, upload_data, upload_data_size);

	/* the request is complete */
	return queue_request(r, connection);
}

/* libmicrohttpd is done with a connection's request: free it */
static void
request_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
				  enum MHD_RequestTerminationCode toe)
{
	if (*req_cls)
		free_request(*req_cls);
	*req_cls = NULL;

	/* its answer went: the connection waits for the next request */
	if (toe == MHD_REQUEST_TERMINATED_COMPLETED_OK)
		(void) connection_state(connection, SW_CONN_WAITING);
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
 * The connections the server keeps (conn_limit, conn_per_address and
 * *connections), and libmicrohttpd's limit, which it returns: those and
 * the ones being closed, in proportion when there are fewer file
 * descriptors (fds) than it would open.
 */
static int
set_connection_limits(int fds, int *connections)
{
	int			sockets;

	sockets = fds - (SW_WEBHOOK_SERVER_FDS - SW_WEBHOOK_MAX_CONNECTIONS -
					 SW_WEBHOOK_CLOSING_CONNECTIONS);
	if (sockets > SW_WEBHOOK_MAX_CONNECTIONS + SW_WEBHOOK_CLOSING_CONNECTIONS)
		sockets = SW_WEBHOOK_MAX_CONNECTIONS + SW_WEBHOOK_CLOSING_CONNECTIONS;
	if (sockets < 2)
		sockets = 2;
	conn_limit = (int) ((int64_t) sockets * SW_WEBHOOK_MAX_CONNECTIONS /
						(SW_WEBHOOK_MAX_CONNECTIONS + SW_WEBHOOK_CLOSING_CONNECTIONS));
	if (conn_limit < 1)
		conn_limit = 1;
	conn_per_address = conn_limit * SW_WEBHOOK_MAX_PER_ADDRESS / SW_WEBHOOK_MAX_CONNECTIONS;
	if (conn_per_address < 1)
		conn_per_address = 1;
	*connections = conn_limit;
	return sockets;
}

/*
 * Start libmicrohttpd on addr, with TLS if use_tls (its options in tls),
 * for at most sockets sockets; NULL if it could not.
 *
 * poll(), not epoll: every request is suspended while the main thread
 * writes it, and with epoll each suspension and each resumption is an
 * epoll_ctl() call.  With bench/webhook's 32 keep-alive connections,
 * the HTTP ceiling was about a fifth higher with poll(); with a
 * connection per request, the two cost about the same.
 *
 * The limits of connections, in all and per address, are ours
 * (notify_connection): libmicrohttpd's refuse a new connection when
 * old ones only wait (so that 128 idle connections from one address
 * locked out every other client of that address, a reverse proxy),
 * where we close an old one (make_room).  Its limit only bounds
 * the sockets, with those being closed.
 */
static struct MHD_Daemon *
start_daemon(int port, struct addrinfo *addr, bool use_tls,
			 struct MHD_OptionItem *tls, int sockets)
{
	return MHD_start_daemon(MHD_USE_POLL_INTERNAL_THREAD |
				MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
				(use_tls ? MHD_USE_TLS : 0) |
				(addr->ai_family == AF_INET6 ? MHD_USE_IPv6 : 0),
				(uint16_t) port, NULL, NULL,
				handle_request, NULL,
				MHD_OPTION_EXTERNAL_LOGGER, keep_start_log, NULL,
				MHD_OPTION_SOCK_ADDR, addr->ai_addr,
				MHD_OPTION_NOTIFY_COMPLETED, request_completed, NULL,
				MHD_OPTION_NOTIFY_CONNECTION, notify_connection, NULL,
				MHD_OPTION_UNESCAPE_CALLBACK, keep_escapes, NULL,
				MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int) SW_WEBHOOK_CONNECTION_TIMEOUT,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int) sockets,
				MHD_OPTION_ARRAY, use_tls ? tls : &tls[3],
				MHD_OPTION_END);
}

/*
 * Start serving on host:port, in libmicrohttpd's thread and the reaper's,
 * which are made with every signal blocked (PostgreSQL's handlers must run
 * in the main thread only).  With cert_pem and key_pem (PEM text, which
 * must stay until sw_webhook_server_stop), HTTPS only; with NULLs, HTTP.
 * The server opens at most fds file descriptors (SW_WEBHOOK_SERVER_FDS,
 * or fewer when the process may not open that many: then it keeps fewer
 * connections, and tells how many in *connections).  Returns NULL, or what
 * went wrong (never anything of the key).
 */
const char *
sw_webhook_server_start(const char *host, int port, const char *cert_pem,
						const char *key_pem, int fds, int *connections)
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
	int			sockets;
	int			rc;
	static char error[256];

	sockets = set_connection_limits(fds, connections);

	shutting_down = false;
	checks_waiting = 0;
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
	reaper_stop = false;
	rc = pthread_create(&reaper, NULL, reap_connections, NULL);
	reaper_running = rc == 0;

	daemon_handle = NULL;
	if (reaper_running)
		daemon_handle = start_daemon(port, addr, use_tls, tls, sockets);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	freeaddrinfo(addr);
	pthread_mutex_lock(&start_log_lock);
	start_logging = false;
	if (!reaper_running)
		snprintf(error, sizeof(error), "could not start a thread: %s", strerror(rc));
	else if (daemon_handle == NULL && start_log[0] != '\0')
		snprintf(error, sizeof(error), "could not serve on %s:%d: %s", host, port, start_log);
	else if (daemon_handle == NULL)
		snprintf(error, sizeof(error), "could not listen on %s:%d (is the address in use?)",
				 host, port);
	pthread_mutex_unlock(&start_log_lock);
	if (daemon_handle == NULL)
	{
		stop_reaper();
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
 * an address that is no webhook source, or one without its table's
 * signature header (the table's id in *table_id), 413 for a body over its
 * table's limit, or 0 to read (more of) it, its limit then sure; the
 * table's id, as published, in *table_id (0 if none).  For the main
 * thread, which passes it to sw_webhook_server_checked().
 */
int
sw_webhook_server_verdict(SwRequest *request, unsigned int *table_id)
{
	size_t		limit = 0;
	int			found;

	*table_id = 0;
	found = find_limit(request->path, request, &limit, table_id);

	if (found == SW_WEBHOOK_UNSIGNED)
	{
		/* in the middle of a body (signed meanwhile), the main thread says */
		if (request->checking == SW_CHECK_HEADERS)
			return MHD_HTTP_NOT_FOUND;
		found = SW_WEBHOOK_KNOWN;
	}
	if (found == SW_WEBHOOK_UNKNOWN && request->checking == SW_CHECK_HEADERS)
		return MHD_HTTP_NOT_FOUND;
	set_limit(request, found, limit, true);
	if (request->declared > request->limit)
		return MHD_HTTP_CONTENT_TOO_LARGE;
	return 0;
}

/*
 * Whether the published map has a webhook source at path:
 * SW_WEBHOOK_KNOWN, SW_WEBHOOK_UNKNOWN, or SW_WEBHOOK_NO_MAP.  For the
 * main thread.
 */
int
sw_webhook_server_knows(const char *path)
{
	size_t		limit;

	return find_limit(path, NULL, &limit, NULL);
}

/*
 * What the published map says of a request's address: as
 * sw_webhook_server_knows(), or SW_WEBHOOK_UNSIGNED if it lacks its
 * table's signature header; the table's id in *table_id (0 if none).  For
 * the main thread.
 */
int
sw_webhook_server_find(const SwRequest *request, unsigned int *table_id)
{
	size_t		limit;

	*table_id = 0;
	return find_limit(request->path, request, &limit, table_id);
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
	pthread_mutex_lock(&queue_lock);
	checks_waiting--;
	if (status)
		answering++;
	pthread_mutex_unlock(&queue_lock);
	MHD_resume_connection(request->connection);
}

/*
 * Publish the webhook sources of the databases served with their limits
 * and signature headers, for the server's threads to look up; limits NULL
 * publishes none.  False if there was no memory for it: then there is no
 * map, and bodies are read up to SW_WEBHOOK_MAX_BODY before the main
 * thread checks them.
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
				strlen(limits[i].table) + 3 +
				(limits[i].signature_header ? strlen(limits[i].signature_header) + 1 : 0);
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
				l->signature_header = NULL;
				if (limits[i].signature_header)
				{
					l->signature_header = s;
					s = stpcpy(s, limits[i].signature_header) + 1;
				}
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

	stop_reaper();				/* first: no connection is cut while they close */
	MHD_stop_daemon(daemon_handle);
	daemon_handle = NULL;

	/* libmicrohttpd told us of each connection it closed: none is left */
	pthread_mutex_lock(&conn_lock);
	while (conn_head)
	{
		SwConnection *c = conn_head;

		unlink_connection(c);
		release_address(c->address);
		free(c);
	}
	conn_live = 0;
	reaper_wake = INT64_MAX;
	pthread_mutex_unlock(&conn_lock);
	close_wake_pipe();
}
