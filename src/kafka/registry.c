/*-------------------------------------------------------------------------
 *
 * registry.c
 *		  The Kafka worker's schema registry client: writers' schemas by id,
 *		  fetched with libcurl before a batch begins, and kept by the Avro
 *		  decoder (source_writes_avro.so)
 *
 * Built into source_writes_kafka.so, the only library linked with
 * libcurl.  See doc/kafka.md, "Avro", and doc/internals.md, "Workers and
 * processes".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/kafka/registry.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <signal.h>
#include <pthread.h>

#include <curl/curl.h>

#include "access/xact.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/memutils.h"

#include "ingest/avro.h"
#include "kafka/registry.h"
#include "log/log.h"

/* the largest schema taken, in bytes */
#define SW_REGISTRY_MAX_SCHEMA	(16 * 1024 * 1024)

/* how long a request may take, and its connection */
#define SW_REGISTRY_TIMEOUT_MS	10000
#define SW_REGISTRY_CONNECT_MS	5000

/* how many times an id the registry does not know is asked again */
#define SW_REGISTRY_UNKNOWN_TRIES 3

typedef const char *(*AddFunc) (Oid serverid, int32 id, const char *json, size_t len);
typedef void (*RefuseFunc) (Oid serverid, int32 id, const char *why);
typedef bool (*KnownFunc) (Oid serverid, int32 id);

/* the registry of the worker's source: where, and as whom */
static struct
{
	Oid			serverid;
	char	   *option;			/* the server's schema_registry */
	char	   *url;			/* ... without a trailing slash */
	char	   *user;
	char	   *password;
	char	   *token;
	char	   *ca;
	CURL	   *curl;			/* kept, for its connections */
	AddFunc		add;
	RefuseFunc	refuse;
	KnownFunc	known;
	int32		unknown_id;		/* the id the registry last did not know */
	int			unknown_tries;	/* ... and how many times in a row */
} reg;

/* an answer being received, in malloc'd memory */
typedef struct Answer
{
	char	   *data;
	size_t		len;
	size_t		cap;
	bool		too_large;
} Answer;

/*
 * Set up the client for the source's server and its owner's user mapping
 * (options), in TopMemoryContext.  libcurl is set up once, here, in the
 * main thread, before any other thread of ours could be running it.
 */
void
sw_registry_init(ForeignServer *server, List *mapping)
{
	MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);
	ListCell   *lc;

	memset(&reg, 0, sizeof(reg));
	reg.serverid = server->serverid;
	foreach(lc, server->options)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "schema_registry") == 0)
		{
			reg.option = pstrdup(defGetString(def));
			reg.url = pstrdup(reg.option);
		}
		else if (strcmp(def->defname, "schema_registry_ca") == 0)
			reg.ca = pstrdup(defGetString(def));
	}
	foreach(lc, mapping)
	{
		DefElem    *def = lfirst(lc);

		if (strcmp(def->defname, "schema_registry_user") == 0)
			reg.user = pstrdup(defGetString(def));
		else if (strcmp(def->defname, "schema_registry_password") == 0)
			reg.password = pstrdup(defGetString(def));
		else if (strcmp(def->defname, "schema_registry_token") == 0)
			reg.token = pstrdup(defGetString(def));
	}
	MemoryContextSwitchTo(old);
	if (reg.url == NULL)
		return;
	while (strlen(reg.url) > 0 && reg.url[strlen(reg.url) - 1] == '/')
		reg.url[strlen(reg.url) - 1] = '\0';

	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK ||
		(reg.curl = curl_easy_init()) == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not set up libcurl for the schema registry")));
	reg.add = (AddFunc) sw_avro_function("sw_avro_schema_add");
	reg.refuse = (RefuseFunc) sw_avro_function("sw_avro_schema_refuse");
	reg.known = (KnownFunc) sw_avro_function("sw_avro_schema_known");
}

/* libcurl's writer: the answer, up to the largest schema taken */
static size_t
take_answer(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Answer	   *a = arg;
	size_t		n = size * nmemb;

	if (a->len + n > SW_REGISTRY_MAX_SCHEMA)
	{
		a->too_large = true;
		return 0;				/* libcurl stops: CURLE_WRITE_ERROR */
	}
	if (a->len + n + 1 > a->cap)
	{
		size_t		cap = Max(a->cap * 2, a->len + n + 1);
		char	   *data = realloc(a->data, cap);

		if (data == NULL)
			return 0;
		a->data = data;
		a->cap = cap;
	}
	memcpy(a->data + a->len, ptr, n);
	a->len += n;
	a->data[a->len] = '\0';
	return n;
}

/*
 * libcurl's progress function, called about once a second at least while
 * a request runs with every signal blocked: stop it when we are told to
 * stop (SIGTERM, SIGQUIT), which is then handled once they are unblocked.
 */
static int
stop_requested(void *arg, curl_off_t dltotal, curl_off_t dlnow,
			   curl_off_t ultotal, curl_off_t ulnow)
{
	sigset_t	pending;

	if (sigpending(&pending) != 0)
		return 0;
	return sigismember(&pending, SIGTERM) || sigismember(&pending, SIGQUIT);
}

/*
 * GET path of the registry: the HTTP status (0 if none came, with
 * libcurl's error in errbuf), the body in *a.  Signals are blocked while
 * libcurl runs, so that the threads its resolver starts take none; a
 * SIGTERM stops the request (stop_requested()).
 */
static long
get(const char *path, Answer *a, char *errbuf)
{
	CURL	   *c = reg.curl;
	char	   *url = psprintf("%s%s", reg.url, path);
	struct curl_slist *headers = NULL;
	char	   *bearer = NULL;
	sigset_t	all;
	sigset_t	old;
	CURLcode	res;
	long		status = 0;

	curl_easy_reset(c);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long) SW_REGISTRY_TIMEOUT_MS);
	curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, (long) SW_REGISTRY_CONNECT_MS);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, take_answer);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, a);
	curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, stop_requested);
	headers = curl_slist_append(headers, "Accept: application/vnd.schemaregistry.v1+json, application/json");
	if (reg.token)
	{
		bearer = psprintf("Authorization: Bearer %s", reg.token);
		headers = curl_slist_append(headers, bearer);
	}
	else if (reg.user)
	{
		curl_easy_setopt(c, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(c, CURLOPT_USERNAME, reg.user);
		curl_easy_setopt(c, CURLOPT_PASSWORD, reg.password ? reg.password : "");
	}
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	if (reg.ca)
		curl_easy_setopt(c, CURLOPT_CAINFO, reg.ca);

	errbuf[0] = '\0';
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	res = curl_easy_perform(c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (res == CURLE_OK)
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	else if (errbuf[0] == '\0')
		strlcpy(errbuf, curl_easy_strerror(res), CURL_ERROR_SIZE);
	curl_slist_free_all(headers);
	if (bearer)
	{
		explicit_bzero(bearer, strlen(bearer));
		pfree(bearer);
	}
	pfree(url);

	/* a SIGTERM that stopped the request is handled now */
	CHECK_FOR_INTERRUPTS();
	return status;
}

/* the "schema" string of a registry's answer, or NULL if it has none */
static char *
answer_schema(const char *body)
{
	MemoryContext cxt = CurrentMemoryContext;
	text	   *schema = NULL;

	PG_TRY();
	{
		Datum		d = DirectFunctionCall2(json_object_field_text,
											CStringGetTextDatum(body),
											CStringGetTextDatum("schema"));

		schema = DatumGetTextPP(d);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		FlushErrorState();
		schema = NULL;
	}
	PG_END_TRY();
	return schema ? text_to_cstring(schema) : NULL;
}

/*
 * Keep a usable schema in source_writes.avro_schemas as well, for the
 * sessions that decode kept messages; if that fails, the worker goes on
 * with the schema in memory, and says why in its log.
 */
static void
keep_schema(int32 id, const char *schema)
{
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		sw_avro_schema_store(reg.serverid, reg.option, id, schema);
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		EmitErrorReport();
		FlushErrorState();
		AbortCurrentTransaction();
	}
	PG_END_TRY();
	/* the transaction's end left us elsewhere */
	MemoryContextSwitchTo(cxt);
}

/*
 * Fetch the writer's schema of id, and hand it to the decoder: true once
 * it is kept (usable, or refused for good: the messages written with it
 * are kept as errors that say why), false if the registry cannot tell now
 * (unreachable, refusing us, failing, or not knowing the id the first few
 * times), with what to say in *state and *error: the worker waits and
 * asks again.
 */
static bool
fetch(int32 id, const char **state, char **error)
{
	Answer		a = {NULL, 0, 0, false};
	char		errbuf[CURL_ERROR_SIZE];
	long		status = get(psprintf("/schemas/ids/%d", id), &a, errbuf);
	char	   *schema;
	bool		done = false;

	*state = "schema registry error";
	if (a.too_large)
	{
		reg.refuse(reg.serverid, id,
				   psprintf("the registry's answer is larger than %d MB",
							SW_REGISTRY_MAX_SCHEMA / (1024 * 1024)));
		done = true;
	}
	else if (status == 0)
	{
		*state = "cannot reach the schema registry";
		*error = pstrdup(errbuf);
	}
	else if (status == 401 || status == 403)
	{
		*state = "the schema registry refuses our credentials";
		*error = psprintf("HTTP status %ld for schema id %d", status, id);
	}
	else if (status == 404)
	{
		if (reg.unknown_id != id)
		{
			reg.unknown_id = id;
			reg.unknown_tries = 0;
		}
		if (++reg.unknown_tries >= SW_REGISTRY_UNKNOWN_TRIES)
		{
			reg.refuse(reg.serverid, id, "the schema registry does not know it");
			reg.unknown_tries = 0;
			done = true;
		}
		else
		{
			*state = "the schema registry does not know a schema id";
			*error = psprintf("schema id %d (HTTP status 404); asked again before its messages are kept as errors", id);
		}
	}
	else if (status != 200)
		*error = psprintf("HTTP status %ld for schema id %d", status, id);
	else if ((schema = answer_schema(a.len > 0 ? a.data : "")) == NULL)
	{
		reg.refuse(reg.serverid, id, "the registry's answer is not JSON with a \"schema\" string");
		done = true;
	}
	else
	{
		if (reg.add(reg.serverid, id, schema, strlen(schema)) == NULL)
			keep_schema(id, schema);
		pfree(schema);
		done = true;
	}
	free(a.data);
	return done;
}

/*
 * The schema id of a message value in the Confluent wire format whose
 * schema is not kept yet, in *id; false if it has none.
 */
static bool
unknown_id(const char *value, size_t len, int32 *id)
{
	return reg.curl != NULL && sw_avro_wire_id(value, len, id) &&
		!reg.known(reg.serverid, *id);
}

/*
 * Whether any of n message values (of lens bytes) needs a schema that is
 * not kept yet.
 */
bool
sw_registry_missing(int n, const char *const *values, const size_t *lens)
{
	int32		id;

	for (int i = 0; i < n; i++)
		if (unknown_id(values[i], lens[i], &id))
			return true;
	return false;
}

/*
 * Fetch the schemas of n message values that are not kept yet, outside
 * any transaction: true when all are kept, false (with what to say in
 * *state and *error) when the registry cannot tell now.
 */
bool
sw_registry_resolve(int n, const char *const *values, const size_t *lens,
					const char **state, char **error)
{
	static MemoryContext fetch_cxt = NULL;
	static char last_error[CURL_ERROR_SIZE + 128];
	MemoryContext old;
	int32		id;
	bool		done = true;

	Assert(!IsTransactionState());

	/*
	 * An answer, up to 16 MB, and what is made of it go once it is kept:
	 * this is called for a worker's life.  *error outlives the call in a
	 * buffer of ours, until the next.
	 */
	if (fetch_cxt == NULL)
		fetch_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes schema registry",
										  ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(fetch_cxt);

	/*
	 * The schemas kept that the messages need count as used first, so
	 * that those fetched for the others push out none of them (a step
	 * holds fewer messages than the decoder keeps schemas).
	 */
	for (int i = 0; i < n; i++)
		(void) unknown_id(values[i], lens[i], &id);
	for (int i = 0; i < n && done; i++)
	{
		CHECK_FOR_INTERRUPTS();
		if (unknown_id(values[i], lens[i], &id))
		{
			MemoryContextReset(fetch_cxt);
			done = fetch(id, state, error);
		}
	}
	MemoryContextSwitchTo(old);
	if (!done && *error)
	{
		strlcpy(last_error, *error, sizeof(last_error));
		*error = last_error;
	}
	MemoryContextReset(fetch_cxt);
	return done;
}
