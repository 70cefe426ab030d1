/*-------------------------------------------------------------------------
 *
 * webhook_load.c
 *		  A load client for bench/webhook: concurrent HTTP/1.1 POSTs on
 *		  libcurl's multi interface
 *
 *   webhook_load URL CLIENTS SECONDS PREFIX
 *
 * bench/webhook/run measures with wrk, which costs less CPU a request; it
 * runs this client for its exact check, because this one waits for every
 * answer and so knows exactly how many requests were answered 200.
 *
 * Keeps CLIENTS requests in flight, each on a keep-alive connection of its
 * own, for SECONDS seconds: each one POSTs a JSON object of about 200 bytes
 * with a unique id ("PREFIX-<client>-<n>") and, once answered, the client
 * sends the next.  Requests still in flight at the end are waited for and
 * counted.  Prints one line of figures:
 *
 *   ok=N other=N failed=N seconds=S rps=R p50_ms=X p99_ms=Y body_bytes=B
 *
 * ok: answers 200; other: answers with another status (the first few are
 * shown on stderr); failed: requests that got no answer (a transport
 * error).  rps is ok answers a second; the latencies are of every answered
 * request, from the moment it was handed to libcurl; body_bytes is the
 * average body.  Exits 1 unless every request was answered 200.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  bench/webhook/webhook_load.c
 *
 *-------------------------------------------------------------------------
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

/* one client: an easy handle and the request it has in flight */
typedef struct Client
{
	int			id;
	CURL	   *easy;
	long		sent;			/* requests it sent */
	double		started;		/* when the one in flight was handed over */
	char		body[512];
	char		error[CURL_ERROR_SIZE];
} Client;

static double *latencies;		/* ms, of every answered request */
static long nlatencies;
static long maxlatencies;
static long body_bytes;			/* of every request sent */
static long bodies;

/* seconds on the monotonic clock */
static double
now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* answers are not kept: we only count them */
static size_t
discard(char *data, size_t size, size_t n, void *arg)
{
	return size * n;
}

static void
keep_latency(double ms)
{
	if (nlatencies == maxlatencies)
	{
		maxlatencies = maxlatencies ? maxlatencies * 2 : 65536;
		latencies = realloc(latencies, sizeof(double) * maxlatencies);
		if (latencies == NULL)
		{
			fprintf(stderr, "webhook_load: out of memory\n");
			exit(2);
		}
	}
	latencies[nlatencies++] = ms;
}

static int
compare_doubles(const void *a, const void *b)
{
	double		x = *(const double *) a;
	double		y = *(const double *) b;

	return x < y ? -1 : x > y;
}

/* the latency below which a fraction of the answers came, in ms */
static double
percentile(double fraction)
{
	long		i;

	if (nlatencies == 0)
		return 0;
	i = (long) (fraction * nlatencies);
	if (i >= nlatencies)
		i = nlatencies - 1;
	return latencies[i];
}

/*
 * Make the client's next body, of about 200 bytes, and hand its request to
 * the multi handle.
 */
static void
send_next(CURLM *multi, Client *c, const char *prefix)
{
	long		n = ++c->sent;

	snprintf(c->body, sizeof(c->body),
			 "{\"id\": \"%s-%d-%ld\", \"amount\": %ld.%02ld, \"currency\": \"EUR\", "
			 "\"kind\": \"%s\", \"customer\": \"customer-%ld\", "
			 "\"at\": \"2026-01-%02ldT%02ld:%02ld:%02ldZ\", "
			 "\"note\": \"standard delivery, leave at the door, ring twice\"}",
			 prefix, c->id, n, n % 500, n % 100, (n % 3) ? "order" : "refund",
			 (c->id * 7919 + n) % 5000, 1 + n % 28, n % 24, n % 60, (n * 7) % 60);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDS, c->body);
	curl_easy_setopt(c->easy, CURLOPT_POSTFIELDSIZE, (long) strlen(c->body));
	body_bytes += strlen(c->body);
	bodies++;
	c->started = now();
	curl_multi_add_handle(multi, c->easy);
}

int
main(int argc, char **argv)
{
	const char *url;
	int			nclients;
	double		seconds;
	const char *prefix;
	Client	   *clients;
	CURLM	   *multi;
	struct curl_slist *headers = NULL;
	long		ok = 0;
	long		other = 0;
	long		failed = 0;
	int			running = 0;
	int			in_flight = 0;	/* requests handed over, not answered */
	double		start;
	double		end;
	double		stop;

	if (argc != 5 || (nclients = atoi(argv[2])) < 1 || (seconds = atof(argv[3])) <= 0)
	{
		fprintf(stderr, "usage: webhook_load URL CLIENTS SECONDS PREFIX\n");
		return 2;
	}
	url = argv[1];
	prefix = argv[4];

	curl_global_init(CURL_GLOBAL_DEFAULT);
	multi = curl_multi_init();
	/* one connection a client, kept alive: no more, and none closed */
	curl_multi_setopt(multi, CURLMOPT_MAX_HOST_CONNECTIONS, (long) nclients);
	curl_multi_setopt(multi, CURLMOPT_MAXCONNECTS, (long) nclients);
	headers = curl_slist_append(headers, "Content-Type: application/json");
	headers = curl_slist_append(headers, "Expect:");

	clients = calloc(nclients, sizeof(Client));
	for (int i = 0; i < nclients; i++)
	{
		Client	   *c = &clients[i];

		c->id = i + 1;
		c->easy = curl_easy_init();
		curl_easy_setopt(c->easy, CURLOPT_URL, url);
		curl_easy_setopt(c->easy, CURLOPT_HTTP_VERSION, CURL_HTTP_VERSION_1_1);
		curl_easy_setopt(c->easy, CURLOPT_HTTPHEADER, headers);
		curl_easy_setopt(c->easy, CURLOPT_WRITEFUNCTION, discard);
		curl_easy_setopt(c->easy, CURLOPT_ERRORBUFFER, c->error);
		curl_easy_setopt(c->easy, CURLOPT_TCP_NODELAY, 1L);
		curl_easy_setopt(c->easy, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c->easy, CURLOPT_TIMEOUT, 60L);
		curl_easy_setopt(c->easy, CURLOPT_PROXY, "");	/* no look at the environment */
		curl_easy_setopt(c->easy, CURLOPT_PRIVATE, c);
	}

	start = now();
	stop = start + seconds;
	for (int i = 0; i < nclients; i++)
		send_next(multi, &clients[i], prefix);
	in_flight = nclients;

	do
	{
		CURLMsg    *msg;
		int			left;

		curl_multi_perform(multi, &running);
		while ((msg = curl_multi_info_read(multi, &left)) != NULL)
		{
			Client	   *c;
			long		status = 0;

			if (msg->msg != CURLMSG_DONE)
				continue;
			curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **) &c);
			curl_multi_remove_handle(multi, c->easy);
			in_flight--;
			if (msg->data.result != CURLE_OK)
			{
				if (failed++ < 5)
					fprintf(stderr, "webhook_load: client %d: %s\n", c->id,
							c->error[0] ? c->error : curl_easy_strerror(msg->data.result));
			}
			else
			{
				curl_easy_getinfo(c->easy, CURLINFO_RESPONSE_CODE, &status);
				keep_latency((now() - c->started) * 1000);
				if (status == 200)
					ok++;
				else if (other++ < 5)
					fprintf(stderr, "webhook_load: client %d: status %ld\n", c->id, status);
			}
			if (now() < stop)
			{
				send_next(multi, c, prefix);
				in_flight++;
			}
		}
		if (in_flight > 0 && curl_multi_poll(multi, NULL, 0, 100, NULL) != CURLM_OK)
			break;
	} while (in_flight > 0);
	end = now();

	qsort(latencies, nlatencies, sizeof(double), compare_doubles);
	printf("ok=%ld other=%ld failed=%ld seconds=%.3f rps=%.1f p50_ms=%.3f p99_ms=%.3f body_bytes=%ld\n",
		   ok, other, failed, end - start, ok / (end - start),
		   percentile(0.50), percentile(0.99), bodies ? body_bytes / bodies : 0);

	for (int i = 0; i < nclients; i++)
		curl_easy_cleanup(clients[i].easy);
	curl_multi_cleanup(multi);
	curl_slist_free_all(headers);
	curl_global_cleanup();
	return (other == 0 && failed == 0) ? 0 : 1;
}
