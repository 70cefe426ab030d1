/*-------------------------------------------------------------------------
 *
 * kafka_txn_broker.c
 *		  A broker that serves a fixed log of transactions, for the tests
 *
 * librdkafka 2.0.2's mock cluster takes transactional producers but writes
 * no commit or abort markers, and its fetch responses name no aborted
 * transactions, so what a consumer in read_committed sees of transactions
 * cannot be tested with it.  This serves one topic whose partitions hold
 * a log given on the command line, in the Kafka protocol, as much of it
 * as librdkafka's consumer uses: ApiVersions, Metadata, FindCoordinator,
 * ListOffsets and Fetch (version 4, with the aborted transactions and the
 * last stable offset).  It is the embedded broker's --txn-topic mode:
 *
 *		kafka_broker --ready-file PATH --txn-topic NAME \
 *			--txn-partition 'v:{"id":1} t7:{"id":2} commit7 t8:{"id":3} abort8' ...
 *
 * Each --txn-partition is the next partition, a list of records separated
 * by spaces, each at the next offset: "v:VALUE" a message outside any
 * transaction, "tN:VALUE" a message of producer N's transaction,
 * "commitN" and "abortN" the marker that ends it.  Each record is a batch
 * of its own.  The ready file says bootstrap= and pid=, as the mock's.
 * --port N listens on that port (to stand in for brokers rebuilt under
 * the same address), --cluster-id ID names the cluster in Metadata
 * (txnCluster by default).
 *
 * IDENTIFICATION
 *		  test/kafka_txn_broker.c
 *
 *-------------------------------------------------------------------------
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#define MAX_PARTITIONS	16
#define MAX_CONNECTIONS	32

/* one record of a partition's log, a batch of its own */
typedef struct Record
{
	int			kind;			/* 'v' plain, 't' transactional, 'c' commit,
								 * 'a' abort */
	int64_t		pid;			/* the producer, for 't', 'c', 'a' */
	const char *value;			/* 'v', 't' */
	unsigned char *batch;		/* encoded, at its offset */
	size_t		batch_len;
} Record;

typedef struct Partition
{
	Record	   *records;
	int			n;
} Partition;

static const char *topic;
static Partition partitions[MAX_PARTITIONS];
static int	npartitions;
static int	port;
static const char *cluster_id = "txnCluster";

/* a growing buffer */
typedef struct Buf
{
	unsigned char *data;
	size_t		len;
	size_t		cap;
} Buf;

static void
put(Buf *b, const void *p, size_t n)
{
	if (b->len + n > b->cap)
	{
		b->cap = (b->len + n) * 2 + 64;
		b->data = realloc(b->data, b->cap);
		if (!b->data)
			abort();
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

static void
put8(Buf *b, int v)
{
	unsigned char c = (unsigned char) v;

	put(b, &c, 1);
}

static void
put16(Buf *b, int v)
{
	uint16_t	x = htons((uint16_t) v);

	put(b, &x, 2);
}

static void
put32(Buf *b, int32_t v)
{
	uint32_t	x = htonl((uint32_t) v);

	put(b, &x, 4);
}

static void
put64(Buf *b, int64_t v)
{
	put32(b, (int32_t) ((uint64_t) v >> 32));
	put32(b, (int32_t) (v & 0xffffffff));
}

static void
put_str(Buf *b, const char *s)
{
	if (s == NULL)
	{
		put16(b, -1);
		return;
	}
	put16(b, (int) strlen(s));
	put(b, s, strlen(s));
}

/* an unsigned varint, and a zigzag (signed) one */
static void
put_uvarint(Buf *b, uint64_t v)
{
	while (v >= 0x80)
	{
		put8(b, (int) ((v & 0x7f) | 0x80));
		v >>= 7;
	}
	put8(b, (int) v);
}

static void
put_varint(Buf *b, int64_t v)
{
	put_uvarint(b, ((uint64_t) v << 1) ^ (uint64_t) (v >> 63));
}

static void
set32(Buf *b, size_t at, int32_t v)
{
	uint32_t	x = htonl((uint32_t) v);

	memcpy(b->data + at, &x, 4);
}

/* CRC-32C (Castagnoli), as record batches carry it */
static uint32_t
crc32c(const unsigned char *p, size_t n)
{
	uint32_t	crc = 0xffffffff;

	while (n--)
	{
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78 & (0 - (crc & 1)));
	}
	return crc ^ 0xffffffff;
}

/*
 * Encode a record as a record batch (magic 2) of its own at offset.
 */
static void
encode(Record *r, int64_t offset)
{
	Buf			b = {0};
	Buf			rec = {0};
	size_t		length_at;
	size_t		crc_at;
	int			attributes = 0;
	int			transactional = r->kind != 'v';
	uint32_t	crc;

	if (transactional)
		attributes |= 0x10;
	if (r->kind == 'c' || r->kind == 'a')
		attributes |= 0x20;

	/* the record */
	put8(&rec, 0);				/* attributes */
	put_varint(&rec, 0);		/* timestamp delta */
	put_varint(&rec, 0);		/* offset delta */
	if (attributes & 0x20)
	{
		Buf			key = {0};
		Buf			value = {0};

		put16(&key, 0);			/* version */
		put16(&key, r->kind == 'c' ? 1 : 0);	/* commit: 1, abort: 0 */
		put16(&value, 0);		/* version */
		put32(&value, 0);		/* coordinator epoch */
		put_varint(&rec, (int64_t) key.len);
		put(&rec, key.data, key.len);
		put_varint(&rec, (int64_t) value.len);
		put(&rec, value.data, value.len);
		free(key.data);
		free(value.data);
	}
	else
	{
		put_varint(&rec, -1);	/* no key */
		put_varint(&rec, (int64_t) strlen(r->value));
		put(&rec, r->value, strlen(r->value));
	}
	put_varint(&rec, 0);		/* no headers */

	put64(&b, offset);			/* base offset */
	length_at = b.len;
	put32(&b, 0);				/* batch length, below */
	put32(&b, 0);				/* partition leader epoch */
	put8(&b, 2);				/* magic */
	crc_at = b.len;
	put32(&b, 0);				/* crc, below */
	put16(&b, attributes);
	put32(&b, 0);				/* last offset delta */
	{
		struct timeval tv;
		int64_t		now;

		gettimeofday(&tv, NULL);
		now = (int64_t) tv.tv_sec * 1000 + tv.tv_usec / 1000;
		put64(&b, now);			/* base timestamp */
		put64(&b, now);			/* max timestamp */
	}
	put64(&b, transactional ? r->pid : -1); /* producer id */
	put16(&b, transactional ? 0 : -1);	/* producer epoch */
	put32(&b, transactional ? 0 : -1);	/* base sequence */
	put32(&b, 1);				/* records */
	put_varint(&b, (int64_t) rec.len);
	put(&b, rec.data, rec.len);
	free(rec.data);

	set32(&b, length_at, (int32_t) (b.len - length_at - 4));
	crc = crc32c(b.data + crc_at + 4, b.len - crc_at - 4);
	set32(&b, crc_at, (int32_t) crc);
	r->batch = b.data;
	r->batch_len = b.len;
}

/* parse a --txn-partition */
static int
parse_partition(char *spec)
{
	Partition  *p;
	char	   *tok;
	char	   *save = NULL;

	if (npartitions == MAX_PARTITIONS)
		return -1;
	p = &partitions[npartitions++];
	for (tok = strtok_r(spec, " ", &save); tok; tok = strtok_r(NULL, " ", &save))
	{
		Record		r = {0};

		if (strncmp(tok, "v:", 2) == 0)
		{
			r.kind = 'v';
			r.value = tok + 2;
		}
		else if (tok[0] == 't' && strchr(tok, ':'))
		{
			r.kind = 't';
			r.pid = strtoll(tok + 1, NULL, 10);
			r.value = strchr(tok, ':') + 1;
		}
		else if (strncmp(tok, "commit", 6) == 0)
		{
			r.kind = 'c';
			r.pid = strtoll(tok + 6, NULL, 10);
		}
		else if (strncmp(tok, "abort", 5) == 0)
		{
			r.kind = 'a';
			r.pid = strtoll(tok + 5, NULL, 10);
		}
		else
			return -1;
		p->records = realloc(p->records, sizeof(Record) * (p->n + 1));
		encode(&r, p->n);
		p->records[p->n++] = r;
	}
	return 0;
}

/* reading a request */
typedef struct Reader
{
	const unsigned char *p;
	const unsigned char *end;
	int			bad;
} Reader;

static int
get16(Reader *r)
{
	uint16_t	x;

	if (r->end - r->p < 2)
	{
		r->bad = 1;
		return 0;
	}
	memcpy(&x, r->p, 2);
	r->p += 2;
	return (int16_t) ntohs(x);
}

static int32_t
get32(Reader *r)
{
	uint32_t	x;

	if (r->end - r->p < 4)
	{
		r->bad = 1;
		return 0;
	}
	memcpy(&x, r->p, 4);
	r->p += 4;
	return (int32_t) ntohl(x);
}

static int64_t
get64(Reader *r)
{
	uint64_t	hi = (uint32_t) get32(r);
	uint64_t	lo = (uint32_t) get32(r);

	return (int64_t) ((hi << 32) | lo);
}

static int
get8(Reader *r)
{
	if (r->end - r->p < 1)
	{
		r->bad = 1;
		return 0;
	}
	return *r->p++;
}

/* a string into buf (cut), NULL if null */
static char *
get_str(Reader *r, char *buf, size_t size)
{
	int			n = get16(r);

	if (n < 0)
		return NULL;
	if (r->end - r->p < n)
	{
		r->bad = 1;
		return NULL;
	}
	snprintf(buf, size, "%.*s", n, (const char *) r->p);
	r->p += n;
	return buf;
}

/* the supported APIs: key, min and max version */
static const int apis[][3] = {
	{0, 0, 3},					/* Produce: advertised, never used */
	{1, 4, 4},					/* Fetch */
	{2, 1, 2},					/* ListOffsets */
	{3, 1, 4},					/* Metadata */
	{10, 0, 2},					/* FindCoordinator */
	{18, 0, 3},					/* ApiVersions */
};

static Partition *
find_partition(const char *name, int32_t partition)
{
	if (name == NULL || strcmp(name, topic) != 0 ||
		partition < 0 || partition >= npartitions)
		return NULL;
	return &partitions[partition];
}

static void
api_versions(int version, Buf *out)
{
	int			n = (int) (sizeof(apis) / sizeof(apis[0]));

	put16(out, 0);
	if (version >= 3)
	{
		put_uvarint(out, (uint64_t) n + 1);
		for (int i = 0; i < n; i++)
		{
			put16(out, apis[i][0]);
			put16(out, apis[i][1]);
			put16(out, apis[i][2]);
			put_uvarint(out, 0);
		}
		put32(out, 0);			/* throttle */
		put_uvarint(out, 0);
		return;
	}
	put32(out, n);
	for (int i = 0; i < n; i++)
	{
		put16(out, apis[i][0]);
		put16(out, apis[i][1]);
		put16(out, apis[i][2]);
	}
	if (version >= 1)
		put32(out, 0);			/* throttle */
}

static void
metadata(int version, Reader *in, Buf *out)
{
	int32_t		ntopics = get32(in);
	char		name[256];
	int			ours = ntopics < 0;
	int			others = 0;
	Buf			rest = {0};

	for (int i = 0; i < ntopics && !in->bad; i++)
	{
		if (get_str(in, name, sizeof(name)) && strcmp(name, topic) == 0)
			ours = 1;
		else
		{
			/* unknown topic */
			put16(&rest, 3);
			put_str(&rest, name);
			put8(&rest, 0);
			put32(&rest, 0);
			others++;
		}
	}
	if (version >= 3)
		put32(out, 0);			/* throttle */
	put32(out, 1);				/* brokers */
	put32(out, 1);
	put_str(out, "127.0.0.1");
	put32(out, port);
	put_str(out, NULL);			/* rack */
	if (version >= 2)
		put_str(out, cluster_id);
	put32(out, 1);				/* controller */
	put32(out, ours + others);
	if (ours)
	{
		put16(out, 0);
		put_str(out, topic);
		put8(out, 0);			/* is internal */
		put32(out, npartitions);
		for (int p = 0; p < npartitions; p++)
		{
			put16(out, 0);
			put32(out, p);
			put32(out, 1);		/* leader */
			put32(out, 1);		/* replicas */
			put32(out, 1);
			put32(out, 1);		/* in sync */
			put32(out, 1);
		}
	}
	put(out, rest.data, rest.len);
	free(rest.data);
}

static void
find_coordinator(int version, Buf *out)
{
	if (version >= 1)
		put32(out, 0);			/* throttle */
	put16(out, 0);
	if (version >= 1)
		put_str(out, NULL);		/* error message */
	put32(out, 1);
	put_str(out, "127.0.0.1");
	put32(out, port);
}

static void
list_offsets(int version, Reader *in, Buf *out)
{
	int32_t		ntopics;
	char		name[256];

	(void) get32(in);			/* replica */
	if (version >= 2)
		(void) get8(in);		/* isolation */
	if (version >= 2)
		put32(out, 0);			/* throttle */
	ntopics = get32(in);
	put32(out, ntopics);
	for (int t = 0; t < ntopics && !in->bad; t++)
	{
		int32_t		nparts;
		char	   *n = get_str(in, name, sizeof(name));

		put_str(out, n);
		nparts = get32(in);
		put32(out, nparts);
		for (int i = 0; i < nparts && !in->bad; i++)
		{
			int32_t		part = get32(in);
			int64_t		when = get64(in);
			Partition  *p = find_partition(n, part);

			put32(out, part);
			put16(out, p ? 0 : 3);
			put64(out, -1);		/* timestamp */
			put64(out, p == NULL ? -1 : when == -1 ? p->n : 0);
		}
	}
}

/*
 * Fetch (version 4): the batches from the fetch offset on, up to the
 * partition's byte limit (one at least), and, to a consumer in
 * read_committed, the aborted transactions that start before their end
 * and end at or after the fetch offset.
 * Returns how many batches it gave.
 */
static int
fetch(Reader *in, Buf *out)
{
	int32_t		ntopics;
	char		name[256];
	int			given = 0;
	int			committed;

	(void) get32(in);			/* replica */
	(void) get32(in);			/* max wait */
	(void) get32(in);			/* min bytes */
	(void) get32(in);			/* max bytes */
	committed = get8(in) == 1;	/* isolation: read_committed */
	put32(out, 0);				/* throttle */
	ntopics = get32(in);
	put32(out, ntopics);
	for (int t = 0; t < ntopics && !in->bad; t++)
	{
		int32_t		nparts;
		char	   *n = get_str(in, name, sizeof(name));

		put_str(out, n);
		nparts = get32(in);
		put32(out, nparts);
		for (int i = 0; i < nparts && !in->bad; i++)
		{
			int32_t		part = get32(in);
			int64_t		from = get64(in);
			int32_t		max_bytes = get32(in);
			Partition  *p = find_partition(n, part);
			int64_t		to;
			int			naborted = 0;
			Buf			aborted = {0};
			size_t		size = 0;

			put32(out, part);
			if (p == NULL || from < 0 || from > p->n)
			{
				put16(out, p == NULL ? 3 : 1);
				put64(out, p ? p->n : -1);
				put64(out, p ? p->n : -1);
				put32(out, -1);	/* aborted: null */
				put32(out, 0);	/* records */
				continue;
			}
			for (to = from; to < p->n; to++)
			{
				if (to > from && size + p->records[to].batch_len > (size_t) max_bytes)
					break;
				size += p->records[to].batch_len;
			}
			given += (int) (to - from);
			/* aborted transactions that the batches given may hold */
			for (int64_t o = 0; o < p->n; o++)
			{
				Record	   *r = &p->records[o];
				int64_t		first = -1;

				if (r->kind != 'a' || o < from)
					continue;
				for (int64_t b = o - 1; b >= 0; b--)
				{
					Record	   *e = &p->records[b];

					if (e->pid == r->pid && (e->kind == 'c' || e->kind == 'a'))
						break;
					if (e->pid == r->pid && e->kind == 't')
						first = b;
				}
				if (committed && first >= 0 && first < to)
				{
					put64(&aborted, r->pid);
					put64(&aborted, first);
					naborted++;
				}
			}
			put16(out, 0);
			put64(out, p->n);	/* high watermark */
			put64(out, p->n);	/* last stable offset */
			put32(out, naborted);
			put(out, aborted.data, aborted.len);
			free(aborted.data);
			put32(out, (int32_t) size);
			for (int64_t o = from; o < to; o++)
				put(out, p->records[o].batch, p->records[o].batch_len);
		}
	}
	return given;
}

/* a client's connection */
typedef struct Conn
{
	int			fd;
	Buf			in;
	Buf			delayed;		/* a fetch response held back, if any */
	struct timeval due;
} Conn;

static Conn conns[MAX_CONNECTIONS];

static void
send_all(int fd, const unsigned char *p, size_t n)
{
	while (n > 0)
	{
		ssize_t		w = write(fd, p, n);

		if (w <= 0)
		{
			if (w < 0 && errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t) w;
	}
}

static long
ms_until(const struct timeval *due)
{
	struct timeval now;

	gettimeofday(&now, NULL);
	return (due->tv_sec - now.tv_sec) * 1000 + (due->tv_usec - now.tv_usec) / 1000;
}

/*
 * Serve the complete requests a connection holds, in order; a fetch that
 * gives nothing is answered after its max wait (at most half a second),
 * and the requests after it wait for it.  False to close the connection.
 */
static int
serve(Conn *c)
{
	while (c->delayed.len == 0 && c->in.len >= 4)
	{
		uint32_t	len;
		Reader		r;
		int			key;
		int			version;
		int32_t		correlation;
		char		client[256];
		Buf			out = {0};
		int			delay = 0;

		memcpy(&len, c->in.data, 4);
		len = ntohl(len);
		if (c->in.len < 4 + (size_t) len)
			break;
		r.p = c->in.data + 4;
		r.end = r.p + len;
		r.bad = 0;
		key = get16(&r);
		version = get16(&r);
		correlation = get32(&r);
		(void) get_str(&r, client, sizeof(client));
		if (key == 18 && version >= 3)
			(void) get8(&r);	/* tagged fields: none */

		put32(&out, 0);			/* size, below */
		put32(&out, correlation);
		switch (key)
		{
			case 18:
				api_versions(version, &out);
				break;
			case 3:
				metadata(version, &r, &out);
				break;
			case 10:
				find_coordinator(version, &out);
				break;
			case 2:
				list_offsets(version, &r, &out);
				break;
			case 1:
				{
					Reader		peek = r;

					(void) get32(&peek);
					delay = get32(&peek);	/* max wait */
					if (fetch(&r, &out) > 0)
						delay = 0;
				}
				break;
			default:
				fprintf(stderr, "kafka_txn_broker: no API %d (version %d)\n", key, version);
				free(out.data);
				return 0;
		}
		if (r.bad)
		{
			fprintf(stderr, "kafka_txn_broker: bad request %d (version %d)\n", key, version);
			free(out.data);
			return 0;
		}
		set32(&out, 0, (int32_t) (out.len - 4));
		memmove(c->in.data, c->in.data + 4 + len, c->in.len - 4 - len);
		c->in.len -= 4 + len;
		if (delay > 0)
		{
			gettimeofday(&c->due, NULL);
			c->due.tv_usec += (delay > 500 ? 500 : delay) * 1000L;
			c->due.tv_sec += c->due.tv_usec / 1000000;
			c->due.tv_usec %= 1000000;
			c->delayed = out;
		}
		else
		{
			send_all(c->fd, out.data, out.len);
			free(out.data);
		}
	}
	return 1;
}

static volatile sig_atomic_t stop_requested = 0;

static void
handle_stop(int signo)
{
	(void) signo;
	stop_requested = 1;
}

/* the --txn-topic mode of kafka_broker; returns its exit status */
int
txn_broker_main(int argc, char **argv)
{
	const char *ready_file = NULL;
	int			listener;
	struct sockaddr_in addr;
	socklen_t	addrlen = sizeof(addr);
	char		announce[256];

	for (int i = 1; i < argc; i++)
	{
		if (strcmp(argv[i], "--ready-file") == 0 && i + 1 < argc)
			ready_file = argv[++i];
		else if (strcmp(argv[i], "--port") == 0 && i + 1 < argc)
			port = atoi(argv[++i]);
		else if (strcmp(argv[i], "--cluster-id") == 0 && i + 1 < argc)
			cluster_id = argv[++i];
		else if (strcmp(argv[i], "--txn-topic") == 0 && i + 1 < argc)
			topic = argv[++i];
		else if (strcmp(argv[i], "--txn-partition") == 0 && i + 1 < argc)
		{
			if (parse_partition(argv[++i]) != 0)
			{
				fprintf(stderr, "kafka_txn_broker: bad partition \"%s\"\n", argv[i]);
				return 2;
			}
		}
		else
		{
			fprintf(stderr, "kafka_txn_broker: unknown argument \"%s\"\n", argv[i]);
			return 2;
		}
	}
	if (topic == NULL || npartitions == 0)
	{
		fprintf(stderr, "kafka_txn_broker: --txn-topic and --txn-partition are required\n");
		return 2;
	}

	listener = socket(AF_INET, SOCK_STREAM, 0);
	if (listener >= 0)
	{
		int			on = 1;

		(void) setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
	}
	memset(&addr, 0, sizeof(addr));
	addr.sin_family = AF_INET;
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons((uint16_t) port);
	if (listener < 0 || bind(listener, (struct sockaddr *) &addr, sizeof(addr)) < 0 ||
		listen(listener, 16) < 0 ||
		getsockname(listener, (struct sockaddr *) &addr, &addrlen) < 0)
	{
		perror("kafka_txn_broker: listen");
		return 1;
	}
	port = ntohs(addr.sin_port);
	snprintf(announce, sizeof(announce), "bootstrap=127.0.0.1:%d\npid=%d\n", port, (int) getpid());
	if (ready_file)
	{
		char		tmp[4096];
		FILE	   *f;

		snprintf(tmp, sizeof(tmp), "%s.tmp", ready_file);
		f = fopen(tmp, "w");
		if (!f || fputs(announce, f) < 0 || fclose(f) != 0 || rename(tmp, ready_file) != 0)
		{
			perror("kafka_txn_broker: ready file");
			return 1;
		}
	}
	fputs(announce, stdout);
	fflush(stdout);
	signal(SIGTERM, handle_stop);
	signal(SIGINT, handle_stop);
	signal(SIGPIPE, SIG_IGN);
	for (int i = 0; i < MAX_CONNECTIONS; i++)
		conns[i].fd = -1;

	while (!stop_requested)
	{
		struct pollfd fds[MAX_CONNECTIONS + 1];
		int			map[MAX_CONNECTIONS + 1];
		int			nfds = 0;
		long		timeout = 1000;

		fds[nfds].fd = listener;
		fds[nfds].events = POLLIN;
		map[nfds++] = -1;
		for (int i = 0; i < MAX_CONNECTIONS; i++)
		{
			if (conns[i].fd < 0)
				continue;
			if (conns[i].delayed.len > 0)
			{
				long		left = ms_until(&conns[i].due);

				if (left < timeout)
					timeout = left < 0 ? 0 : left;
			}
			fds[nfds].fd = conns[i].fd;
			fds[nfds].events = POLLIN;
			map[nfds++] = i;
		}
		if (poll(fds, nfds, (int) timeout) < 0 && errno != EINTR)
			break;
		for (int k = 0; k < nfds; k++)
		{
			Conn	   *c;

			if (map[k] < 0)
			{
				if (fds[k].revents & POLLIN)
				{
					int			fd = accept(listener, NULL, NULL);
					int			slot = -1;

					for (int i = 0; i < MAX_CONNECTIONS && slot < 0; i++)
						if (conns[i].fd < 0)
							slot = i;
					if (fd >= 0 && slot < 0)
						close(fd);
					else if (fd >= 0)
					{
						memset(&conns[slot], 0, sizeof(Conn));
						conns[slot].fd = fd;
					}
				}
				continue;
			}
			c = &conns[map[k]];
			if (fds[k].revents & (POLLIN | POLLHUP | POLLERR))
			{
				unsigned char buf[65536];
				ssize_t		n = read(c->fd, buf, sizeof(buf));

				if (n <= 0)
				{
					close(c->fd);
					c->fd = -1;
					free(c->in.data);
					free(c->delayed.data);
					continue;
				}
				put(&c->in, buf, (size_t) n);
			}
		}
		for (int i = 0; i < MAX_CONNECTIONS; i++)
		{
			Conn	   *c = &conns[i];

			if (c->fd < 0)
				continue;
			if (c->delayed.len > 0 && ms_until(&c->due) <= 0)
			{
				send_all(c->fd, c->delayed.data, c->delayed.len);
				free(c->delayed.data);
				memset(&c->delayed, 0, sizeof(Buf));
			}
			if (!serve(c))
			{
				close(c->fd);
				c->fd = -1;
				free(c->in.data);
				free(c->delayed.data);
			}
		}
	}
	if (ready_file)
		unlink(ready_file);
	return 0;
}
