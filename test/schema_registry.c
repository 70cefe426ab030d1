/*-------------------------------------------------------------------------
 *
 * schema_registry.c
 *		  A small Confluent-compatible schema registry for the tests, in
 *		  memory, with faults that the tests switch on at run time
 *
 * The Avro sources fetch writer schemas from a schema registry (see
 * doc/internals.md); the tests run this one.  It listens on 127.0.0.1 at a
 * port chosen by the kernel (or --port), over HTTP or, with --cert and
 * --key (PEM files), HTTPS only, and writes a "key=value" file
 * (--ready-file, written whole by rename) and the same lines on stdout:
 *
 *		url=http://127.0.0.1:41235
 *		pid=12345
 *
 * The REST paths, as Confluent documents them (answers are
 * application/vnd.schemaregistry.v1+json; errors are {"error_code": N,
 * "message": "..."}):
 *
 *		POST /subjects/{s}/versions		{"schema": "..."} -> {"id": N}
 *		POST /subjects/{s}				{"schema": "..."} -> the version that has it
 *		GET  /schemas/ids/{id}			-> {"schema": "..."}
 *		GET  /subjects					-> ["s", ...]
 *		GET  /subjects/{s}/versions		-> [1, 2, ...]
 *		GET  /subjects/{s}/versions/{v|latest}
 *										-> {"subject", "version", "id", "schema"}
 *
 * Ids are global and start at 1; a schema is kept in its compact form, and
 * the same schema registered again (under any subject) keeps its id.  With
 * --user and --password every path asks for basic auth, with --token for
 * "Authorization: Bearer <token>".
 *
 * The control paths need no auth and are not counted:
 *
 *		POST /_control/{mode}			ok, fail, notfound, unauthorized, stall
 *										(?ms=N, default --stall-ms), garbage,
 *										huge (?mb=N, default 20), down
 *		POST /_control/reset			zero the counters
 *		GET  /_control/stats			{"mode", "requests", "schema_ids",
 *										 "register", "lookup", "subjects",
 *										 "versions", "other", "paths": {...}}
 *
 * Modes apply to every other request: fail answers 500, unauthorized 401,
 * garbage 200 with a body that is not JSON, down closes the connection
 * without answering; notfound answers 404 to every GET /schemas/ids/{id};
 * huge answers GET /schemas/ids/{id} with the schema (or a record schema
 * when the id is unknown) grown past N MB by a "doc" attribute; stall holds
 * each answer for its time, or until the mode changes, then answers as ok
 * would.  The counters count every request that arrived, whatever its
 * answer; "paths" by "METHOD /path".
 *
 * IDENTIFICATION
 *		  test/schema_registry.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>

#define CONTENT_TYPE "application/vnd.schemaregistry.v1+json"
#define MAX_BODY (64 * 1024 * 1024)

typedef enum Mode
{
	MODE_OK,
	MODE_FAIL,
	MODE_NOTFOUND,
	MODE_UNAUTHORIZED,
	MODE_STALL,
	MODE_GARBAGE,
	MODE_HUGE,
	MODE_DOWN
} Mode;

static const char *const mode_names[] = {
	"ok", "fail", "notfound", "unauthorized", "stall", "garbage", "huge", "down"
};

typedef struct Subject
{
	char	   *name;
	int			nversions;
	int		   *ids;			/* the schema id of each version */
} Subject;

/* the registry, under lock */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char **schemas;			/* schemas[id - 1]: compact JSON text */
static int	nschemas;
static Subject *subjects;
static int	nsubjects;
static Mode mode = MODE_OK;
static long mode_ms;			/* stall: how long */
static long mode_mb;			/* huge: how big */
static long stall_ms = 30000;
static json_t *stats;

/* settings */
static const char *auth_user;
static const char *auth_password;
static const char *auth_token;

static volatile sig_atomic_t stopping = 0;

/* a request being read: its body */
typedef struct Request
{
	char	   *body;
	size_t		len;
	size_t		cap;
	bool		too_big;
} Request;

static void
usage(void)
{
	fprintf(stderr,
			"Usage: schema_registry [--port N] [--ready-file PATH]\n"
			"         [--user U --password P | --token T]\n"
			"         [--cert FILE --key FILE] [--stall-ms N]\n");
	exit(2);
}

static void *
xmalloc(size_t size)
{
	void	   *p = malloc(size);

	if (p == NULL)
	{
		fprintf(stderr, "schema_registry: out of memory\n");
		exit(1);
	}
	return p;
}

/*
 * Zero the counters.  Caller holds the lock.
 */
static void
reset_stats(void)
{
	if (stats)
		json_decref(stats);
	stats = json_pack("{s:i,s:i,s:i,s:i,s:i,s:i,s:i,s:{}}",
					  "requests", 0, "schema_ids", 0, "register", 0,
					  "lookup", 0, "subjects", 0, "versions", 0, "other", 0,
					  "paths");
}

/*
 * Add one to a counter of stats.  Caller holds the lock.
 */
static void
count(json_t *obj, const char *key)
{
	json_t	   *n = json_object_get(obj, key);

	json_object_set_new(obj, key,
						json_integer((n ? json_integer_value(n) : 0) + 1));
}

/*
 * Queue an answer: body (taken over; freed by libmicrohttpd) with our
 * content type, and a WWW-Authenticate header if www is not NULL.
 */
static enum MHD_Result
answer(struct MHD_Connection *conn, unsigned int status, char *body,
	   const char *www)
{
	struct MHD_Response *resp;
	enum MHD_Result ret;

	resp = MHD_create_response_from_buffer(strlen(body), body,
										   MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, CONTENT_TYPE);
	if (www)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_WWW_AUTHENTICATE, www);
	ret = MHD_queue_response(conn, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

/* Answer a JSON value (taken over). */
static enum MHD_Result
answer_json(struct MHD_Connection *conn, unsigned int status, json_t *value)
{
	char	   *text = json_dumps(value, JSON_COMPACT | JSON_ENCODE_ANY);

	json_decref(value);
	return answer(conn, status, text, NULL);
}

/* Answer a Confluent error. */
static enum MHD_Result
answer_error(struct MHD_Connection *conn, unsigned int status, int code,
			 const char *message)
{
	return answer_json(conn, status,
					   json_pack("{s:i,s:s}", "error_code", code,
								 "message", message));
}

static enum MHD_Result
answer_unauthorized(struct MHD_Connection *conn)
{
	return answer(conn, MHD_HTTP_UNAUTHORIZED,
				  strdup("{\"error_code\":401,\"message\":\"Unauthorized\"}"),
				  auth_token ? "Bearer realm=\"schema-registry\""
				  : "Basic realm=\"schema-registry\"");
}

/*
 * Whether the request carries the credentials we were given, if any.
 */
static bool
authorized(struct MHD_Connection *conn)
{
	if (auth_token)
	{
		const char *h = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
													MHD_HTTP_HEADER_AUTHORIZATION);

		return h && strncmp(h, "Bearer ", 7) == 0 &&
			strcmp(h + 7, auth_token) == 0;
	}
	if (auth_user)
	{
		char	   *password = NULL;
		char	   *user = MHD_basic_auth_get_username_password(conn, &password);
		bool		ok;

		ok = user && password && strcmp(user, auth_user) == 0 &&
			strcmp(password, auth_password) == 0;
		if (user)
			MHD_free(user);
		if (password)
			MHD_free(password);
		return ok;
	}
	return true;
}

/*
 * The schema of a request body {"schema": "..."} in compact form (to be
 * freed), or NULL with *error set.
 */
static char *
body_schema(Request *req, const char **error)
{
	json_t	   *body;
	json_t	   *text;
	json_t	   *type;
	json_t	   *schema;
	char	   *compact = NULL;

	*error = "Invalid schema";
	body = json_loadb(req->body ? req->body : "", req->len, 0, NULL);
	if (body == NULL || !json_is_object(body))
	{
		*error = "Unrecognized request body: not a JSON object";
		json_decref(body);
		return NULL;
	}
	type = json_object_get(body, "schemaType");
	if (type && !(json_is_string(type) &&
				  strcmp(json_string_value(type), "AVRO") == 0))
	{
		*error = "Invalid schema: this test registry keeps only AVRO schemas";
		json_decref(body);
		return NULL;
	}
	text = json_object_get(body, "schema");
	if (text && json_is_string(text))
	{
		schema = json_loadb(json_string_value(text), json_string_length(text),
							JSON_DECODE_ANY, NULL);
		if (schema)
		{
			compact = json_dumps(schema, JSON_COMPACT | JSON_ENCODE_ANY);
			json_decref(schema);
		}
	}
	json_decref(body);
	return compact;
}

/* The subject named name, or NULL.  Caller holds the lock. */
static Subject *
find_subject(const char *name)
{
	for (int i = 0; i < nsubjects; i++)
		if (strcmp(subjects[i].name, name) == 0)
			return &subjects[i];
	return NULL;
}

/* The id of a schema (compact text), or 0.  Caller holds the lock. */
static int
find_schema(const char *text)
{
	for (int i = 0; i < nschemas; i++)
		if (strcmp(schemas[i], text) == 0)
			return i + 1;
	return 0;
}

/*
 * POST /subjects/{s}/versions: register a schema under a subject, keeping
 * its id if it is known, and adding a version unless the subject has it.
 */
static enum MHD_Result
register_schema(struct MHD_Connection *conn, const char *name, Request *req)
{
	const char *error;
	char	   *text = body_schema(req, &error);
	Subject    *subject;
	int			id;
	bool		has = false;

	if (text == NULL)
		return answer_error(conn, 422, 42201, error);
	pthread_mutex_lock(&lock);
	id = find_schema(text);
	if (id == 0)
	{
		schemas = realloc(schemas, sizeof(char *) * (nschemas + 1));
		schemas[nschemas++] = text;
		id = nschemas;
	}
	else
		free(text);
	subject = find_subject(name);
	if (subject == NULL)
	{
		subjects = realloc(subjects, sizeof(Subject) * (nsubjects + 1));
		subject = &subjects[nsubjects++];
		subject->name = strdup(name);
		subject->nversions = 0;
		subject->ids = NULL;
	}
	for (int v = 0; v < subject->nversions; v++)
		has |= subject->ids[v] == id;
	if (!has)
	{
		subject->ids = realloc(subject->ids,
							   sizeof(int) * (subject->nversions + 1));
		subject->ids[subject->nversions++] = id;
	}
	pthread_mutex_unlock(&lock);
	return answer_json(conn, MHD_HTTP_OK, json_pack("{s:i}", "id", id));
}

/*
 * The answer about version v (from 1) of a subject.  Caller holds the lock.
 */
static json_t *
version_json(Subject *subject, int v)
{
	int			id = subject->ids[v - 1];

	return json_pack("{s:s,s:i,s:i,s:s}", "subject", subject->name,
					 "version", v, "id", id, "schema", schemas[id - 1]);
}

/*
 * POST /subjects/{s}: the version of the subject that has the schema.
 */
static enum MHD_Result
lookup_schema(struct MHD_Connection *conn, const char *name, Request *req)
{
	const char *error;
	char	   *text = body_schema(req, &error);
	Subject    *subject;
	json_t	   *found = NULL;
	int			id;

	if (text == NULL)
		return answer_error(conn, 422, 42201, error);
	pthread_mutex_lock(&lock);
	subject = find_subject(name);
	id = find_schema(text);
	if (subject)
		for (int v = 1; v <= subject->nversions && !found; v++)
			if (subject->ids[v - 1] == id)
				found = version_json(subject, v);
	pthread_mutex_unlock(&lock);
	free(text);
	if (subject == NULL)
		return answer_error(conn, 404, 40401, "Subject not found.");
	if (found == NULL)
		return answer_error(conn, 404, 40403, "Schema not found");
	return answer_json(conn, MHD_HTTP_OK, found);
}

/*
 * GET /schemas/ids/{id}, as the mode says.
 */
static enum MHD_Result
get_schema(struct MHD_Connection *conn, const char *idtext, Mode m, long mb)
{
	char	   *end;
	long		id;
	char	   *text = NULL;
	json_t	   *schema;

	errno = 0;
	id = strtol(idtext, &end, 10);
	if (m == MODE_NOTFOUND || *idtext == '\0' || *end != '\0' || errno)
		return answer_error(conn, 404, 40403, "Schema not found");
	pthread_mutex_lock(&lock);
	if (id >= 1 && id <= nschemas)
		text = strdup(schemas[id - 1]);
	pthread_mutex_unlock(&lock);
	if (m == MODE_HUGE)
	{
		size_t		size = (size_t) mb * 1024 * 1024;
		char	   *doc;

		schema = text ? json_loads(text, JSON_DECODE_ANY, NULL) : NULL;
		if (!json_is_object(schema))
		{
			json_decref(schema);
			schema = json_pack("{s:s,s:s,s:[{s:s,s:s}]}", "type", "record",
							   "name", "huge", "fields", "name", "a",
							   "type", "int");
		}
		doc = xmalloc(size + 1);
		memset(doc, 'x', size);
		doc[size] = '\0';
		json_object_set_new(schema, "doc", json_stringn_nocheck(doc, size));
		free(doc);
		free(text);
		text = json_dumps(schema, JSON_COMPACT);
		json_decref(schema);
	}
	if (text == NULL)
		return answer_error(conn, 404, 40403, "Schema not found");
	schema = json_pack("{s:s}", "schema", text);
	free(text);
	return answer_json(conn, MHD_HTTP_OK, schema);
}

/*
 * GET /subjects/{s}/versions[/{v}]
 */
static enum MHD_Result
get_versions(struct MHD_Connection *conn, const char *name, const char *vtext)
{
	Subject    *subject;
	json_t	   *result = NULL;
	long		v = 0;
	char	   *end;

	if (vtext)
	{
		errno = 0;
		v = strtol(vtext, &end, 10);
		if (strcmp(vtext, "latest") == 0)
			v = -1;
		else if (*vtext == '\0' || *end != '\0' || errno || v == 0 || v < -1)
			return answer_error(conn, 422, 42202,
								"The specified version is not a valid version id.");
	}
	pthread_mutex_lock(&lock);
	subject = find_subject(name);
	if (subject && vtext == NULL)
	{
		result = json_array();
		for (int i = 1; i <= subject->nversions; i++)
			json_array_append_new(result, json_integer(i));
	}
	else if (subject)
	{
		if (v == -1)
			v = subject->nversions;
		if (v >= 1 && v <= subject->nversions)
			result = version_json(subject, (int) v);
	}
	pthread_mutex_unlock(&lock);
	if (subject == NULL)
		return answer_error(conn, 404, 40401, "Subject not found.");
	if (result == NULL)
		return answer_error(conn, 404, 40402, "Version not found.");
	return answer_json(conn, MHD_HTTP_OK, result);
}

/*
 * The control paths: switch the mode, read or reset the counters.
 */
static enum MHD_Result
control(struct MHD_Connection *conn, const char *method, const char *what)
{
	json_t	   *result;

	if (strcmp(method, "GET") == 0 && strcmp(what, "stats") == 0)
	{
		pthread_mutex_lock(&lock);
		result = json_deep_copy(stats);
		json_object_set_new(result, "mode", json_string(mode_names[mode]));
		json_object_set_new(result, "schemas", json_integer(nschemas));
		pthread_mutex_unlock(&lock);
		return answer_json(conn, MHD_HTTP_OK, result);
	}
	if (strcmp(method, "POST") != 0)
		return answer_error(conn, 405, 405, "HTTP 405 Method Not Allowed");
	if (strcmp(what, "reset") == 0)
	{
		pthread_mutex_lock(&lock);
		reset_stats();
		pthread_mutex_unlock(&lock);
		return answer_json(conn, MHD_HTTP_OK, json_pack("{s:b}", "reset", 1));
	}
	for (int m = 0; m < (int) (sizeof(mode_names) / sizeof(mode_names[0])); m++)
	{
		const char *ms;
		const char *mb;

		if (strcmp(what, mode_names[m]) != 0)
			continue;
		ms = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "ms");
		mb = MHD_lookup_connection_value(conn, MHD_GET_ARGUMENT_KIND, "mb");
		pthread_mutex_lock(&lock);
		mode = (Mode) m;
		mode_ms = ms ? atol(ms) : stall_ms;
		mode_mb = mb ? atol(mb) : 20;
		if (mode_mb < 1 || mode_mb > 1024)
			mode_mb = 20;
		pthread_mutex_unlock(&lock);
		return answer_json(conn, MHD_HTTP_OK,
						   json_pack("{s:s}", "mode", mode_names[m]));
	}
	return answer_error(conn, 404, 404, "unknown control path");
}

/*
 * Hold a request for ms milliseconds, or until the mode is no longer
 * stall, or we are stopping.
 */
static void
stall(long ms)
{
	struct timespec start;
	struct timespec now;

	clock_gettime(CLOCK_MONOTONIC, &start);
	for (;;)
	{
		bool		stalled;

		clock_gettime(CLOCK_MONOTONIC, &now);
		if ((now.tv_sec - start.tv_sec) * 1000 +
			(now.tv_nsec - start.tv_nsec) / 1000000 >= ms || stopping)
			return;
		pthread_mutex_lock(&lock);
		stalled = mode == MODE_STALL;
		pthread_mutex_unlock(&lock);
		if (!stalled)
			return;
		usleep(20000);
	}
}

/*
 * Count a request under its path and its kind.
 */
static void
count_request(const char *method, const char *url)
{
	char	   *key = xmalloc(strlen(method) + strlen(url) + 2);
	const char *kind = "other";

	sprintf(key, "%s %s", method, url);
	if (strncmp(url, "/schemas/ids/", 13) == 0)
		kind = "schema_ids";
	else if (strcmp(url, "/subjects") == 0)
		kind = "subjects";
	else if (strncmp(url, "/subjects/", 10) == 0 && strstr(url, "/versions"))
		kind = strcmp(method, "POST") == 0 ? "register" : "versions";
	else if (strncmp(url, "/subjects/", 10) == 0)
		kind = "lookup";
	pthread_mutex_lock(&lock);
	count(stats, "requests");
	count(stats, kind);
	count(json_object_get(stats, "paths"), key);
	pthread_mutex_unlock(&lock);
	free(key);
}

/*
 * Route a request of the registry's own paths.
 */
static enum MHD_Result
route(struct MHD_Connection *conn, const char *method, const char *url,
	  Request *req, Mode m, long mb)
{
	bool		get = strcmp(method, "GET") == 0;
	bool		post = strcmp(method, "POST") == 0;
	char	   *path = strdup(url);
	char	   *parts[5];
	int			nparts = 0;
	enum MHD_Result ret;

	/* split /a/b/c into parts, at most 5 */
	for (char *p = strtok(path, "/"); p; p = strtok(NULL, "/"))
	{
		if (nparts == 5)
		{
			nparts = 0;
			break;
		}
		parts[nparts++] = p;
	}

	if (nparts == 3 && strcmp(parts[0], "schemas") == 0 &&
		strcmp(parts[1], "ids") == 0 && get)
		ret = get_schema(conn, parts[2], m, mb);
	else if (nparts == 1 && strcmp(parts[0], "subjects") == 0 && get)
	{
		json_t	   *list = json_array();

		pthread_mutex_lock(&lock);
		for (int i = 0; i < nsubjects; i++)
			json_array_append_new(list, json_string(subjects[i].name));
		pthread_mutex_unlock(&lock);
		ret = answer_json(conn, MHD_HTTP_OK, list);
	}
	else if (nparts == 2 && strcmp(parts[0], "subjects") == 0 && post)
		ret = lookup_schema(conn, parts[1], req);
	else if (nparts == 3 && strcmp(parts[0], "subjects") == 0 &&
			 strcmp(parts[2], "versions") == 0 && post)
		ret = register_schema(conn, parts[1], req);
	else if (nparts == 3 && strcmp(parts[0], "subjects") == 0 &&
			 strcmp(parts[2], "versions") == 0 && get)
		ret = get_versions(conn, parts[1], NULL);
	else if (nparts == 4 && strcmp(parts[0], "subjects") == 0 &&
			 strcmp(parts[2], "versions") == 0 && get)
		ret = get_versions(conn, parts[1], parts[3]);
	else
		ret = answer_error(conn, 404, 404, "HTTP 404 Not Found");
	free(path);
	return ret;
}

/*
 * Whether a request's content type is one the registry takes: none, JSON,
 * the registry's own, or octet-stream (as Confluent's does).
 */
static bool
acceptable_type(struct MHD_Connection *conn)
{
	const char *type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
												   MHD_HTTP_HEADER_CONTENT_TYPE);
	static const char *const ok[] = {
		"application/vnd.schemaregistry.v1+json",
		"application/vnd.schemaregistry+json",
		"application/json",
		"application/octet-stream"
	};

	if (type == NULL)
		return true;
	for (int i = 0; i < 4; i++)
	{
		size_t		len = strlen(ok[i]);

		if (strncmp(type, ok[i], len) == 0 &&
			(type[len] == '\0' || type[len] == ';'))
			return true;
	}
	return false;
}

/*
 * libmicrohttpd's handler: gather the body, then answer.
 */
static enum MHD_Result
handle(void *cls, struct MHD_Connection *conn, const char *url,
	   const char *method, const char *version, const char *upload_data,
	   size_t *upload_data_size, void **con_cls)
{
	Request    *req = *con_cls;
	Mode		m;
	long		ms;
	long		mb;

	(void) cls;
	(void) version;
	if (req == NULL)
	{
		req = xmalloc(sizeof(Request));
		memset(req, 0, sizeof(Request));
		*con_cls = req;
		return MHD_YES;
	}
	if (*upload_data_size > 0)
	{
		size_t		n = *upload_data_size;

		if (req->len + n > MAX_BODY)
			req->too_big = true;
		else
		{
			if (req->len + n + 1 > req->cap)
			{
				req->cap = (req->len + n + 1) * 2;
				req->body = realloc(req->body, req->cap);
			}
			memcpy(req->body + req->len, upload_data, n);
			req->len += n;
			req->body[req->len] = '\0';
		}
		*upload_data_size = 0;
		return MHD_YES;
	}

	if (strncmp(url, "/_control/", 10) == 0)
		return control(conn, method, url + 10);

	count_request(method, url);
	pthread_mutex_lock(&lock);
	m = mode;
	ms = mode_ms;
	mb = mode_mb;
	pthread_mutex_unlock(&lock);

	if (m == MODE_STALL)
	{
		stall(ms);
		m = MODE_OK;
	}
	switch (m)
	{
		case MODE_DOWN:
			return MHD_NO;
		case MODE_FAIL:
			return answer_error(conn, 500, 50001,
								"Error in the backend data store");
		case MODE_UNAUTHORIZED:
			return answer_unauthorized(conn);
		case MODE_GARBAGE:
			return answer(conn, MHD_HTTP_OK,
						  strdup("<html>this is not JSON {\"schema\": "),
						  NULL);
		default:
			break;
	}
	if (!authorized(conn))
		return answer_unauthorized(conn);
	if (req->too_big)
		return answer_error(conn, 413, 413, "request body too large");
	if (strcmp(method, "POST") == 0 && !acceptable_type(conn))
		return answer_error(conn, 415, 415, "HTTP 415 Unsupported Media Type");
	return route(conn, method, url, req, m, mb);
}

/* Free what a request gathered. */
static void
completed(void *cls, struct MHD_Connection *conn, void **con_cls,
		  enum MHD_RequestTerminationCode toe)
{
	Request    *req = *con_cls;

	(void) cls;
	(void) conn;
	(void) toe;
	if (req)
	{
		free(req->body);
		free(req);
		*con_cls = NULL;
	}
}

/* The whole of a file, or exit. */
static char *
read_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	char	   *text;
	long		size;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0)
	{
		fprintf(stderr, "schema_registry: cannot read %s: %s\n", path,
				strerror(errno));
		exit(1);
	}
	rewind(f);
	text = xmalloc(size + 1);
	if (fread(text, 1, size, f) != (size_t) size)
	{
		fprintf(stderr, "schema_registry: cannot read %s\n", path);
		exit(1);
	}
	text[size] = '\0';
	fclose(f);
	return text;
}

/*
 * Write the ready file whole: to a temporary name, then rename.
 */
static int
write_ready_file(const char *path, const char *contents)
{
	char		tmp[4096];
	FILE	   *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	f = fopen(tmp, "w");
	if (f == NULL)
		return -1;
	fputs(contents, f);
	if (fclose(f) != 0)
		return -1;
	return rename(tmp, path);
}

int
main(int argc, char **argv)
{
	const char *ready_file = NULL;
	const char *cert_file = NULL;
	const char *key_file = NULL;
	char	   *cert = NULL;
	char	   *key = NULL;
	long		port = 0;
	struct sockaddr_in addr;
	struct MHD_Daemon *daemon;
	const union MHD_DaemonInfo *info;
	sigset_t	signals;
	int			signo;
	char		announce[256];

	for (int i = 1; i < argc; i++)
	{
		const char *arg = argv[i];
		const char *value = i + 1 < argc ? argv[i + 1] : NULL;

		if (value == NULL)
			usage();
		if (strcmp(arg, "--port") == 0)
			port = atol(value);
		else if (strcmp(arg, "--ready-file") == 0)
			ready_file = value;
		else if (strcmp(arg, "--user") == 0)
			auth_user = value;
		else if (strcmp(arg, "--password") == 0)
			auth_password = value;
		else if (strcmp(arg, "--token") == 0)
			auth_token = value;
		else if (strcmp(arg, "--cert") == 0)
			cert_file = value;
		else if (strcmp(arg, "--key") == 0)
			key_file = value;
		else if (strcmp(arg, "--stall-ms") == 0)
			stall_ms = atol(value);
		else
			usage();
		i++;
	}
	if ((auth_user == NULL) != (auth_password == NULL) ||
		(auth_token && auth_user) || (cert_file == NULL) != (key_file == NULL) ||
		port < 0 || port > 65535)
		usage();
	if (cert_file)
	{
		cert = read_file(cert_file);
		key = read_file(key_file);
	}
	reset_stats();
	mode_ms = stall_ms;
	mode_mb = 20;

	/* libmicrohttpd's threads must not take our signals: block them first */
	sigemptyset(&signals);
	sigaddset(&signals, SIGTERM);
	sigaddset(&signals, SIGINT);
	pthread_sigmask(SIG_BLOCK, &signals, NULL);
	signal(SIGPIPE, SIG_IGN);

	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_port = htons((uint16_t) port);
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	daemon = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD |
							  MHD_USE_THREAD_PER_CONNECTION |
							  MHD_USE_ERROR_LOG | (cert ? MHD_USE_TLS : 0),
							  (uint16_t) port, NULL, NULL, handle, NULL,
							  MHD_OPTION_SOCK_ADDR, &addr,
							  MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
							  cert ? MHD_OPTION_HTTPS_MEM_CERT : MHD_OPTION_END,
							  cert,
							  MHD_OPTION_HTTPS_MEM_KEY, key,
							  MHD_OPTION_END);
	if (daemon == NULL)
	{
		fprintf(stderr, "schema_registry: cannot listen on 127.0.0.1:%ld\n",
				port);
		return 1;
	}
	info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
	snprintf(announce, sizeof(announce), "url=%s://127.0.0.1:%u\npid=%d\n",
			 cert ? "https" : "http", (unsigned) info->port, (int) getpid());
	fputs(announce, stdout);
	fflush(stdout);
	if (ready_file && write_ready_file(ready_file, announce) != 0)
	{
		perror("schema_registry: ready file");
		MHD_stop_daemon(daemon);
		return 1;
	}

	sigwait(&signals, &signo);
	stopping = 1;
	MHD_stop_daemon(daemon);
	if (ready_file)
		unlink(ready_file);
	return 0;
}
