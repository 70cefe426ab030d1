/*-------------------------------------------------------------------------
 *
 * kafka_worker.c
 *		  The background worker that ingests a Kafka source's topic
 *
 * This is the library source_writes_kafka, the only one linked with
 * librdkafka: backends that read and edit source tables never map it.  The
 * launcher starts one worker per Kafka source, or as many as its option
 * workers says, each with its share of the partitions (workers.c).  A
 * worker consumes its partitions and writes each batch of messages in a
 * transaction of its own, through an ingestion (ingest.c) that decodes
 * them as the table's owner, keeps what cannot be decoded as errors, and
 * consumes their offsets in the same transaction.  A batch takes what the
 * brokers hold, up to a bound: on an upsert source, whose batches keep
 * only the last message of each key, the more it takes the fewer rows it
 * writes.
 *
 * Exactly once: the worker does not trust the broker with its position.
 * It assigns itself the topic's partitions explicitly, at the offsets
 * stored in source_writes.progress, and each batch moves them with a
 * compare-and-set when it is stamped (sw_writer_consumed()).  Whatever
 * happens (a crash, a kill -9, a second worker for the same source), a
 * message is in the table once or, if its batch did not commit, not at
 * all and consumed again.  After a failed batch the worker goes back to
 * the stored offsets.
 *
 * Where a partition starts is stored when the worker first sees it: the
 * table's start_offset for the partitions of its first start, the
 * earliest offset for partitions found later.  Partitions are found
 * through metadata, refreshed every few seconds (and at once while the
 * topic does not exist yet).
 *
 * librdkafka's threads never run PostgreSQL code: they are created with
 * every signal blocked, and its callbacks (errors, logs) are served by
 * rd_kafka_poll() in our thread.  The worker waits for messages in
 * librdkafka, SW_KAFKA_WAIT_MS at a time, and looks at its latch (wait_for()
 * requests), interrupts and the postmaster in between.
 *
 * The worker leaves when its source is dropped (the launcher frees its
 * slot), and to take new options when the table, its server or a user
 * mapping changes (the launcher starts it again at once).  SIGHUP reloads
 * the configuration; SIGTERM stops it between two batches or in one,
 * which then rolls back.
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/kafka_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <pthread.h>
#include <signal.h>

#include <librdkafka/rdkafka.h>

#include "access/reloptions.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "catalog.h"
#include "databases.h"
#include "fdw_options.h"
#include "ingest.h"
#include "source_writes.h"
#include "workers.h"
#include "writer.h"

PG_MODULE_MAGIC;

PGDLLEXPORT void source_writes_kafka_main(Datum main_arg);

/*
 * A batch takes what the brokers hold, up to what sw_ingest_full() allows
 * (a number of messages, or on an upsert source, whose batch keeps each
 * key's last message in memory, their size), and at most this long.
 */
#define SW_KAFKA_BATCH_MS		5000

/* messages taken from the queue at a time, and how long we wait for them */
#define SW_KAFKA_CONSUME_STEP	1000
#define SW_KAFKA_WAIT_MS		100

/* how often partitions are looked for: while the topic is missing, and then */
#define SW_METADATA_MISSING_MS	1000
#define SW_METADATA_MS			5000

/* how often the worker reports its partitions while idle */
#define SW_REPORT_MS			1000

/* how long a broker request of ours may take */
#define SW_BROKER_TIMEOUT_MS	5000

/* the longest wait before a failed batch is tried again */
#define SW_MAX_RETRY_MS			30000

/* a partition the worker ingests */
typedef struct KafkaPartition
{
	int32		partition;
	int64		next;			/* the next offset to ingest: all before it
								 * are committed */
	int64		high;			/* the high watermark last seen, -1 if none */
	int64		batch_to;		/* the current batch: one past its last */
	int64		batch_first;	/* ... and its first, -1 if none */
	int64		deleted_to;		/* the brokers deleted the offsets before it
								 * that we did not take; -1 if none */
} KafkaPartition;

/* the worker's state */
static Oid	source_relid = InvalidOid;
static char *source_name;
static Oid	server_oid;
static char *topic;
static SwIngest *ingest;			/* in ingest_cxt */
static MemoryContext ingest_cxt;
static SwSourceTable *source_table;	/* the table's options */
static rd_kafka_t *rk;
static rd_kafka_queue_t *queue;
static KafkaPartition *partitions;
static rd_kafka_topic_partition_list_t *assigned;	/* the same, for librdkafka */
static int	npartitions;
static bool topic_exists = false;
static bool first_start;		/* no partition had stored progress */
static int	member;				/* our share of the partitions: those p */
static int	members;			/* ... with p % members = member */
static Bitmapset *seen;			/* the partitions found, ours or not */
static MemoryContext worker_cxt;
static MemoryContext step_cxt;	/* the messages taken from the queue */
static rd_kafka_message_t **msgs;	/* ... */
static int	nmsgs;

/* set by callbacks */
static bool options_changed = false;
static bool ingest_stale = false;
static char broker_error[256];
static bool broker_error_pending = false;

/*
 * The table, its server or a user mapping changed: leave, to start again
 * with the new options.
 */
static void
relcache_callback(Datum arg, Oid relid)
{
	/* InvalidOid: every relation, after a cache reset */
	if (relid == source_relid || !OidIsValid(relid))
		options_changed = true;
}

static void
syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (cacheid == USERMAPPINGOID ||
		hashvalue == 0 ||
		hashvalue == GetSysCacheHashValue1(FOREIGNSERVEROID,
										   ObjectIdGetDatum(server_oid)))
		options_changed = true;
}

/*
 * A function (its body, who may execute it) or a role (its attributes, its
 * memberships: whose rights the owner has) changed: the ingestion prepared
 * the table's defaults, and checked the owner's rights to them, with these
 * as they were, so the next batch makes it again.
 */
static void
ingest_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	ingest_stale = true;
}

/*
 * librdkafka reports an error; served by rd_kafka_poll() in our thread.
 */
static void
error_callback(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	snprintf(broker_error, sizeof(broker_error), "%s: %s",
			 rd_kafka_err2name(err), reason);
	broker_error_pending = true;
}

/*
 * librdkafka logs; served by rd_kafka_poll() in our thread (log.queue).
 * Warnings and worse go to the server log.
 */
static void
log_callback(const rd_kafka_t *rk, int level, const char *fac, const char *buf)
{
	if (level <= 4)
		ereport(LOG,
				(errmsg("source_writes kafka worker for \"%s\": librdkafka %s: %s",
						source_name, fac, buf)));
}

/*
 * The options of the table owner's user mapping for the server (or
 * PUBLIC's), which hold the credentials; NIL if there is none.
 */
static List *
owner_mapping_options(Oid owner)
{
	HeapTuple	tuple;
	List	   *options = NIL;

	tuple = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(owner),
							ObjectIdGetDatum(server_oid));
	if (!HeapTupleIsValid(tuple))
		tuple = SearchSysCache2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
								ObjectIdGetDatum(server_oid));
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		datum = SysCacheGetAttr(USERMAPPINGUSERSERVER, tuple,
											Anum_pg_user_mapping_umoptions, &isnull);

		if (!isnull)
			options = untransformRelOptions(datum);
		ReleaseSysCache(tuple);
	}
	return options;
}

/* set a librdkafka property, or fail with what librdkafka says */
static void
set_property(rd_kafka_conf_t *conf, const char *name, const char *value)
{
	char		errstr[512];

	if (rd_kafka_conf_set(conf, name, value, errstr, sizeof(errstr)) != RD_KAFKA_CONF_OK)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("librdkafka refuses property \"%s\" of the server of source table \"%s\"",
						name, source_name),
				 errdetail("%s", errstr)));
}

/*
 * The consumer's configuration: what we manage, then the server's and the
 * user mapping's "rdkafka." properties (validated when they were set).
 */
static rd_kafka_conf_t *
make_conf(ForeignServer *server, List *mapping)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	List	   *lists[2] = {server->options, mapping};
	ListCell   *lc;

	set_property(conf, "group.id", "source_writes");
	set_property(conf, "client.id", "source_writes");
	set_property(conf, "enable.auto.commit", "false");
	set_property(conf, "enable.auto.offset.store", "false");
	set_property(conf, "enable.partition.eof", "false");
	set_property(conf, "auto.offset.reset", "earliest");
	set_property(conf, "log.queue", "true");
	/*
	 * A small prefetch, in small fetches: the worker's memory stays small
	 * (librdkafka's defaults keep up to 64 MB of messages and 50 MB a fetch),
	 * and a worker that writes no faster is not slowed down.  A message
	 * bigger than a fetch still comes, alone.
	 */
	set_property(conf, "queued.max.messages.kbytes", "2048");
	set_property(conf, "fetch.max.bytes", "2097152");
	set_property(conf, "max.partition.fetch.bytes", "262144");
	set_property(conf, "fetch.wait.max.ms", "100");

	for (int i = 0; i < 2; i++)
		foreach(lc, lists[i])
		{
			DefElem    *def = lfirst(lc);

			if (strcmp(def->defname, "brokers") == 0)
				set_property(conf, "bootstrap.servers", defGetString(def));
			else if (strncmp(def->defname, "rdkafka.", 8) == 0)
				set_property(conf, def->defname + 8, defGetString(def));
		}
	rd_kafka_conf_set_error_cb(conf, error_callback);
	rd_kafka_conf_set_log_cb(conf, log_callback);
	return conf;
}

/*
 * Create the consumer with every signal blocked, so that librdkafka's
 * threads, which inherit the mask, never run PostgreSQL's handlers.
 */
static void
create_consumer(rd_kafka_conf_t *conf)
{
	sigset_t	all;
	sigset_t	old;
	char		errstr[512];

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, errstr, sizeof(errstr));
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rk == NULL)
	{
		rd_kafka_conf_destroy(conf);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not create the Kafka consumer of source table \"%s\"",
						source_name),
				 errdetail("%s", errstr)));
	}
	rd_kafka_set_log_queue(rk, NULL);
	queue = rd_kafka_queue_get_consumer(rk);
}

/*
 * Read the source's options and make its consumer and ingestion, in a
 * transaction.  Errors (bad options) propagate: the launcher starts the
 * worker again after a backoff, and the state shows the error.
 */
static void
set_up(void)
{
	Relation	ftrel;
	ForeignServer *server;
	List	   *mapping;
	MemoryContext old;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	ftrel = table_open(source_relid, AccessShareLock);
	old = MemoryContextSwitchTo(worker_cxt);
	source_name = pstrdup(RelationGetRelationName(ftrel));
	server_oid = GetForeignServerIdByRelId(source_relid);
	ingest_cxt = AllocSetContextCreate(worker_cxt, "source_writes kafka ingestion",
									   ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(ingest_cxt);
	ingest = sw_ingest_create(ftrel, SW_ORIGIN_KAFKA);
	MemoryContextSwitchTo(worker_cxt);
	source_table = sw_source_table(ftrel);
	topic = source_table->topic;
	MemoryContextSwitchTo(old);
	pgstat_report_activity(STATE_RUNNING, "setting up");

	server = GetForeignServer(server_oid);
	mapping = owner_mapping_options(ftrel->rd_rel->relowner);
	create_consumer(make_conf(server, mapping));
	table_close(ftrel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
}

/*
 * Say what the worker is doing, in shared memory when it changes, with the
 * error that brought it there if any.
 */
static void
set_state(const char *state, const char *error)
{
	static char reported[64] = "";

	if (strcmp(state, reported) == 0 && error == NULL)
		return;
	sw_worker_report_state(state, error);
	strlcpy(reported, state, sizeof(reported));
}

/* the partition the worker ingests, or NULL */
static KafkaPartition *
find_partition(int32 partition)
{
	for (int i = 0; i < npartitions; i++)
		if (partitions[i].partition == partition)
			return &partitions[i];
	return NULL;
}

/* report the partitions, and wake whoever waits for ingestion */
static void
report_partitions(void)
{
	SwPartitionReport *parts = palloc(sizeof(SwPartitionReport) * Max(npartitions, 1));

	for (int i = 0; i < npartitions; i++)
	{
		int64		low;
		int64		high;

		if (rd_kafka_get_watermark_offsets(rk, topic, partitions[i].partition,
										   &low, &high) == RD_KAFKA_RESP_ERR_NO_ERROR &&
			high >= 0)
			partitions[i].high = Max(partitions[i].high, high);
		parts[i].partition = partitions[i].partition;
		parts[i].next_offset = partitions[i].next;
		parts[i].high = partitions[i].high;
	}
	sw_worker_report_partitions(npartitions, parts);
	pfree(parts);
}

/*
 * The earliest (or latest: the high watermark) offset of each of n
 * partitions, asked of the brokers in one request per broker.  Returns
 * an error text, or NULL.
 */
static const char *
query_offsets(int n, const int32 *parts, bool latest, int64 *offsets)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(Max(n, 1));
	rd_kafka_resp_err_t err;
	const char *error = NULL;

	for (int i = 0; i < n; i++)
		rd_kafka_topic_partition_list_add(list, topic, parts[i])->offset =
			latest ? RD_KAFKA_OFFSET_END : RD_KAFKA_OFFSET_BEGINNING;
	err = rd_kafka_offsets_for_times(rk, list, SW_BROKER_TIMEOUT_MS);
	for (int i = 0; i < n && err == RD_KAFKA_RESP_ERR_NO_ERROR; i++)
	{
		rd_kafka_topic_partition_t *tp =
			rd_kafka_topic_partition_list_find(list, topic, parts[i]);

		if (tp == NULL || tp->err != RD_KAFKA_RESP_ERR_NO_ERROR || tp->offset < 0)
			err = tp && tp->err ? tp->err : RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION;
		else
			offsets[i] = tp->offset;
	}
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		error = rd_kafka_err2str(err);
	rd_kafka_topic_partition_list_destroy(list);
	return error;
}

/*
 * Where partitions without stored progress start: the table's start_offset
 * if the source is starting for the first time, the earliest offset
 * otherwise (partitions added later).
 */
static void
start_offsets(int n, const int32 *parts, int64 *offsets)
{
	const SwSourceTable *st = source_table;
	bool		latest = first_start && st->start_latest;
	const char *error = query_offsets(n, parts, latest, offsets);

	if (error)
	{
		set_state("cannot reach the brokers", error);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION),
				 errmsg("could not read the offsets of topic \"%s\"", topic),
				 errdetail("%s", error)));
	}
	if (!first_start)
		return;
	for (int i = 0; i < n; i++)
	{
		ListCell   *lc;

		foreach(lc, st->start_offsets)
		{
			SwStartOffset *so = lfirst(lc);

			if (so->partition == parts[i])
				offsets[i] = so->offset;
		}
	}
}

/*
 * Find the topic's partitions through metadata, and assign the new ones
 * that are ours at their stored offsets.  Where a new partition starts is
 * stored first, if it has no progress yet, by whichever worker of the
 * source finds it first, ours or not: so the source's first start, when
 * it applies start_offset, is one for all its workers.  False if the
 * brokers could not be asked.
 */
static bool
refresh_partitions(void)
{
	const rd_kafka_metadata_t *md;
	rd_kafka_resp_err_t err;
	const rd_kafka_metadata_topic_t *t = NULL;
	List	   *fresh = NIL;
	ListCell   *lc;

	/*
	 * The metadata of all topics: asking for a missing one by name may
	 * create it, on brokers that create topics automatically.
	 */
	err = rd_kafka_metadata(rk, 1, NULL, &md, SW_BROKER_TIMEOUT_MS);
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		set_state("cannot reach the brokers", rd_kafka_err2str(err));
		return false;
	}
	for (int i = 0; i < md->topic_cnt && t == NULL; i++)
		if (strcmp(md->topics[i].topic, topic) == 0)
			t = &md->topics[i];
	if (t == NULL || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
		t->partition_cnt == 0)
	{
		topic_exists = false;
		set_state("waiting for the topic", NULL);
		rd_kafka_metadata_destroy(md);
		return true;
	}
	if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		set_state("cannot read the topic", rd_kafka_err2str(t->err));
		rd_kafka_metadata_destroy(md);
		return false;
	}
	set_state("running", NULL);
	topic_exists = true;
	for (int i = 0; i < t->partition_cnt; i++)
		if (!bms_is_member(t->partitions[i].id, seen))
			fresh = lappend_int(fresh, t->partitions[i].id);
	rd_kafka_metadata_destroy(md);
	if (fresh == NIL)
		return true;

	/*
	 * Where the new partitions start, stored once, in a transaction that
	 * the other workers of the source wait for; its snapshot is taken once
	 * they are done.
	 */
	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	LockRelationOid(source_relid, AccessShareLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source_relid)))
	{
		/* dropped: we leave at the next look at our slot */
		CommitTransactionCommand();
		MemoryContextSwitchTo(worker_cxt);
		return true;
	}
	sw_catalog_lock_progress(source_relid);
	PushActiveSnapshot(GetTransactionSnapshot());
	{
		List	   *stored = sw_catalog_progress(source_relid);
		MemoryContext old;

		int32	   *parts = palloc(sizeof(int32) * list_length(fresh));
		int64	   *offsets = palloc(sizeof(int64) * list_length(fresh));
		int			n = 0;
		int			ours = 0;

		first_start = (stored == NIL);
		foreach(lc, fresh)
		{
			int32		part = lfirst_int(lc);
			bool		found = false;
			ListCell   *lc2;

			foreach(lc2, stored)
				found |= ((SwProgress *) lfirst(lc2))->part == part;
			if (!found)
				parts[n++] = part;
		}
		if (n > 0)
			start_offsets(n, parts, offsets);
		for (int i = 0; i < n; i++)
			sw_catalog_start_progress(source_relid, parts[i], offsets[i]);
		CommandCounterIncrement();
		stored = sw_catalog_progress(source_relid);

		old = MemoryContextSwitchTo(worker_cxt);
		foreach(lc, fresh)
		{
			seen = bms_add_member(seen, lfirst_int(lc));
			ours += lfirst_int(lc) % members == member;
		}
		partitions = partitions
			? repalloc(partitions, sizeof(KafkaPartition) * (npartitions + ours))
			: palloc(sizeof(KafkaPartition) * Max(ours, 1));
		MemoryContextSwitchTo(old);
		foreach(lc, fresh)
		{
			KafkaPartition *p;
			ListCell   *lc2;

			if (lfirst_int(lc) % members != member)
				continue;
			p = &partitions[npartitions++];
			p->partition = lfirst_int(lc);
			p->next = 0;
			p->high = -1;
			p->batch_first = -1;
			p->deleted_to = -1;
			foreach(lc2, stored)
				if (((SwProgress *) lfirst(lc2))->part == p->partition)
					p->next = ((SwProgress *) lfirst(lc2))->next_offset;
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	return true;
}

/*
 * Assign every partition at its next offset: at start, when partitions
 * were found, and after a failed batch, whose messages are fetched again.
 */
static void
assign_partitions(void)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(Max(npartitions, 1));
	rd_kafka_resp_err_t err;

	for (int i = 0; i < npartitions; i++)
		rd_kafka_topic_partition_list_add(list, topic, partitions[i].partition)->offset =
			partitions[i].next;
	err = rd_kafka_assign(rk, list);
	if (assigned)
		rd_kafka_topic_partition_list_destroy(assigned);
	assigned = list;
	if (err != RD_KAFKA_RESP_ERR_NO_ERROR)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("could not assign the partitions of topic \"%s\"", topic),
				 errdetail("%s", rd_kafka_err2str(err))));
}

/*
 * Go back to the offsets stored in the catalog: after a batch failed, its
 * messages must be ingested again (or, if another writer took them, not).
 */
static void
rewind_partitions(void)
{
	List	   *stored;
	ListCell   *lc;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	stored = sw_catalog_progress(source_relid);
	foreach(lc, stored)
	{
		SwProgress *s = lfirst(lc);
		KafkaPartition *p = find_partition(s->part);

		if (p)
			p->next = s->next_offset;
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	assign_partitions();
}

/* the message's headers, in the batch's memory */
static void
message_headers(rd_kafka_message_t *rkm, SwMessage *m)
{
	rd_kafka_headers_t *hdrs;
	size_t		n;
	SwHeader   *headers;

	if (rd_kafka_message_headers(rkm, &hdrs) != RD_KAFKA_RESP_ERR_NO_ERROR ||
		(n = rd_kafka_header_cnt(hdrs)) == 0)
		return;
	headers = palloc(sizeof(SwHeader) * n);
	for (size_t i = 0; i < n; i++)
	{
		const void *value;
		size_t		len;

		if (rd_kafka_header_get_all(hdrs, i, &headers[i].name, &value, &len) !=
			RD_KAFKA_RESP_ERR_NO_ERROR)
			break;
		headers[i].value = value;
		headers[i].len = len;
		m->nheaders = i + 1;
	}
	m->headers = headers;
}

/*
 * librdkafka 2.0 stops fetching while its queue is full, and looks again
 * only when its broker thread next wakes up, up to a second later; so once
 * we have emptied the queue, a request to the broker (a high watermark,
 * which also keeps the lag current) wakes it now.
 */
static void
wake_fetcher(void)
{
	int64		low;
	int64		high;

	if (npartitions > 0 &&
		rd_kafka_query_watermark_offsets(rk, topic, partitions[0].partition,
										 &low, &high, SW_BROKER_TIMEOUT_MS) ==
		RD_KAFKA_RESP_ERR_NO_ERROR)
		partitions[0].high = Max(partitions[0].high, high);
}

/*
 * Take the next messages from the queue, up to a step, waiting up to
 * wait_ms for the first; error events are reported, not kept.  Returns how
 * many there are.
 */
static int
take_messages(int wait_ms)
{
	ssize_t		got;

	Assert(nmsgs == 0);
	got = rd_kafka_consume_batch_queue(queue, wait_ms, msgs, SW_KAFKA_CONSUME_STEP);
	for (int i = 0; i < got; i++)
	{
		if (msgs[i]->err != RD_KAFKA_RESP_ERR_NO_ERROR)
		{
			set_state("broker error", rd_kafka_message_errstr(msgs[i]));
			rd_kafka_message_destroy(msgs[i]);
			continue;
		}
		msgs[nmsgs++] = msgs[i];
	}
	return nmsgs;
}

/* let go of the messages taken, and of what they took in our memory */
static void
drop_messages(void)
{
	for (int i = 0; i < nmsgs; i++)
		rd_kafka_message_destroy(msgs[i]);
	nmsgs = 0;
	MemoryContextReset(step_cxt);
}

/*
 * Has librdkafka fetched every partition up to the high watermark it last
 * saw?  If not, more messages are on their way.
 */
static bool
fetched_all(void)
{
	for (int i = 0; i < npartitions; i++)
	{
		int64		low;
		int64		high;
		int64		position = partitions[i].batch_to;
		rd_kafka_topic_partition_list_t *list;

		if (rd_kafka_get_watermark_offsets(rk, topic, partitions[i].partition,
										   &low, &high) != RD_KAFKA_RESP_ERR_NO_ERROR ||
			high <= position)
			continue;
		/* messages not ingested yet may be in the queue, or on their way */
		list = rd_kafka_topic_partition_list_new(1);
		rd_kafka_topic_partition_list_add(list, topic, partitions[i].partition);
		if (rd_kafka_position(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR &&
			list->elems[0].offset >= 0)
			position = list->elems[0].offset;
		rd_kafka_topic_partition_list_destroy(list);
		if (high > position)
			return false;
	}
	return true;
}

/*
 * Have the brokers deleted messages of ours (by retention) before we could
 * take them?  Their first offset, as librdkafka last heard it from them,
 * has passed a partition's next offset: noted in deleted_to.  Looked at
 * before the queue, so that a message librdkafka fetched before it heard
 * of the deletion is taken by the next batch (it is in the queue): only a
 * partition whose next batch brings nothing from before deleted_to lost
 * those messages.
 */
static bool
deleted_ahead(void)
{
	bool		any = false;

	for (int i = 0; i < npartitions; i++)
	{
		KafkaPartition *p = &partitions[i];
		int64		low;
		int64		high;

		p->deleted_to = -1;
		if (rd_kafka_get_watermark_offsets(rk, topic, p->partition, &low, &high) ==
			RD_KAFKA_RESP_ERR_NO_ERROR && low > p->next)
		{
			p->deleted_to = low;
			any = true;
		}
	}
	return any;
}

/*
 * At the end of a batch: consume the offsets the brokers deleted before we
 * took them, and say so.  They are gone if the batch brought messages of
 * the partition from after them only; or none, and it ended with the queue
 * empty (drained): had librdkafka fetched any of them before it heard of
 * the deletion, they would have been in the queue.
 */
static void
consume_deleted(bool drained)
{
	for (int i = 0; i < npartitions; i++)
	{
		KafkaPartition *p = &partitions[i];
		char	   *error;

		if (p->deleted_to <= p->next ||
			(p->batch_first >= 0 ? p->batch_first < p->deleted_to : !drained))
			continue;
		error = psprintf("the brokers deleted offsets " INT64_FORMAT " to " INT64_FORMAT
						 " of partition %d before they were ingested",
						 p->next, p->deleted_to - 1, p->partition);
		ereport(WARNING,
				(errmsg("source_writes kafka worker for \"%s\": %s", source_name, error),
				 errhint("The topic's retention is shorter than the time the source was behind.")));
		set_state("running", error);
		p->batch_to = Max(p->batch_to, p->deleted_to);
	}
}

/*
 * Hand the messages taken to the batch, and let go of them.  Messages at
 * offsets already ingested are skipped.
 */
static void
add_messages(void)
{
	MemoryContext old = MemoryContextSwitchTo(step_cxt);
	SwMessage  *m = palloc0(sizeof(SwMessage) * Max(nmsgs, 1));

	for (int i = 0; i < nmsgs; i++)
	{
		rd_kafka_message_t *rkm = msgs[i];
		KafkaPartition *p = find_partition(rkm->partition);
		rd_kafka_timestamp_type_t tstype;

		if (p == NULL || rkm->offset < p->batch_to)
			continue;			/* not ours, or ingested already */
		m[i].value = rkm->payload;
		m[i].value_len = rkm->len;
		m[i].key = rkm->key;
		m[i].key_len = rkm->key_len;
		m[i].partition = rkm->partition;
		m[i].offset = rkm->offset;
		m[i].timestamp_ms = rd_kafka_message_timestamp(rkm, &tstype);
		if (tstype == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE)
			m[i].timestamp_ms = -1;
		m[i].topic = topic;
		message_headers(rkm, &m[i]);
		sw_ingest_add(ingest, &m[i]);
		if (p->batch_first < 0)
			p->batch_first = rkm->offset;
		p->batch_to = rkm->offset + 1;
	}
	MemoryContextSwitchTo(old);
	sw_ingest_flush(ingest);
	drop_messages();
}

/*
 * Make the ingestion again, after a function or a role changed, in memory
 * of its own; the old one goes only once the new one is made.
 */
static void
remake_ingestion(Relation ftrel)
{
	MemoryContext cxt;
	MemoryContext old;

	cxt = AllocSetContextCreate(worker_cxt, "source_writes kafka ingestion",
								ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		/* a change from now on makes it again */
		ingest_stale = false;
		ingest = sw_ingest_remake(ingest, ftrel);
	}
	PG_CATCH();
	{
		ingest_stale = true;
		MemoryContextSwitchTo(old);
		MemoryContextDelete(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);
	MemoryContextDelete(ingest_cxt);
	ingest_cxt = cxt;
}

/*
 * Write a batch in a transaction of our own, starting with the messages
 * taken, and consume their offsets in it; then move the partitions on.
 * The batch goes on taking messages while the brokers have more for us,
 * up to a bound.
 */
static void
ingest_batch(void)
{
	Relation	ftrel;
	int64		written;
	int64		kept;
	bool		drained = false;
	TimestampTz start = GetCurrentTimestamp();

	for (int i = 0; i < npartitions; i++)
	{
		partitions[i].batch_to = partitions[i].next;
		partitions[i].batch_first = -1;
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "ingesting a batch");
	ftrel = table_open(source_relid, RowExclusiveLock);
	if (options_changed)
	{
		/* the table changed before we locked it: leave, writing nothing */
		table_close(ftrel, NoLock);
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(worker_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		return;
	}
	if (ingest_stale)
		remake_ingestion(ftrel);
	sw_ingest_begin(ingest, ftrel);
	for (;;)
	{
		add_messages();
		if (sw_ingest_full(ingest) ||
			TimestampDifferenceExceeds(start, GetCurrentTimestamp(), SW_KAFKA_BATCH_MS) ||
			ConfigReloadPending || options_changed)
			break;
		if (take_messages(0) > 0)
			continue;
		/* the queue is empty: wait for more if the brokers have more */
		drained = true;
		if (fetched_all())
			break;
		wake_fetcher();
		if (take_messages(SW_KAFKA_WAIT_MS) == 0)
			break;
		drained = false;
	}
	consume_deleted(drained);
	for (int i = 0; i < npartitions; i++)
		if (partitions[i].batch_to > partitions[i].next)
			sw_ingest_consumed(ingest, partitions[i].partition,
							   partitions[i].next, partitions[i].batch_to);
	written = sw_ingest_end(ingest, &kept);
	table_close(ftrel, NoLock);
	PopActiveSnapshot();
	sw_writer_commit_durably();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	for (int i = 0; i < npartitions; i++)
		partitions[i].next = partitions[i].batch_to;
	elog(DEBUG1, "source_writes: ingested " INT64_FORMAT " rows into \"%s\", kept " INT64_FORMAT " errors",
		 written, source_name, kept);
}

/*
 * Ingest a batch, and after a failure report it, go back to the stored
 * offsets and wait before the next try (a backoff that doubles).  Returns
 * whether the batch committed.
 */
static bool
try_batch(int *failures)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		ok = true;
	TimestampTz deadline;

	PG_TRY();
	{
		ingest_batch();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		HOLD_INTERRUPTS();
		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		EmitErrorReport();
		AbortOutOfAnyTransaction();
		FlushErrorState();
		sw_ingest_abort(ingest);
		drop_messages();
		RESUME_INTERRUPTS();
		set_state("retrying after an error", edata->message);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(cxt);
	sw_writer_forget_session_state();

	if (ok)
	{
		*failures = 0;
		return true;
	}
	(*failures)++;

	/* the whole backoff: wait_for() requests set the latch meanwhile */
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   Min(SW_MAX_RETRY_MS, 500L << Min(*failures, 6)));
	while (!ConfigReloadPending)
	{
		long		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (remaining <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 remaining, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
	rewind_partitions();
	return false;
}

/*
 * Answer wait_for(): the high watermark of every partition, asked of the
 * brokers now.  Not answered (false) while they cannot be asked.
 */
static bool
serve_wait(void)
{
	int32	   *parts;
	int64	   *highs;
	const char *error;

	if (!refresh_partitions())
		return false;
	parts = palloc(sizeof(int32) * Max(npartitions, 1));
	highs = palloc(sizeof(int64) * Max(npartitions, 1));
	for (int i = 0; i < npartitions; i++)
		parts[i] = partitions[i].partition;
	error = npartitions > 0 ? query_offsets(npartitions, parts, true, highs) : NULL;
	if (error)
	{
		set_state("cannot reach the brokers", error);
		return false;
	}
	for (int i = 0; i < npartitions; i++)
		partitions[i].high = highs[i];
	pfree(parts);
	pfree(highs);
	report_partitions();
	return true;
}

/*
 * The table, its server or a user mapping changed: leave, and let the
 * launcher start us again with the new options at once, unless the table
 * is gone.
 */
static void
leave_for_new_options(void)
{
	bool		exists;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	exists = SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source_relid));
	CommitTransactionCommand();
	if (exists)
	{
		ereport(LOG,
				(errmsg("source_writes kafka worker for source table \"%s\" restarts to take new options",
						source_name)));
		sw_worker_restart_soon();
	}
	proc_exit(0);
}

void
source_writes_kafka_main(Datum main_arg)
{
	int			index = DatumGetInt32(main_arg);
	uint32		generation;
	Oid			dboid = InvalidOid;
	int			failures = 0;
	uint64		served = 0;
	TimestampTz last_metadata = 0;
	TimestampTz last_report = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	memcpy(&generation, MyBgworkerEntry->bgw_extra, sizeof(generation));
	source_relid = sw_worker_attach(index, generation, &dboid, &member, &members);
	if (!OidIsValid(source_relid))
		proc_exit(0);			/* the slot went to another source */
	if (!sw_database_enter(dboid))
		proc_exit(0);			/* DROP DATABASE...: its supervisor comes back */
	BackgroundWorkerInitializeConnectionByOid(dboid, InvalidOid, 0);
	pgstat_report_appname("source_writes kafka worker");
	sw_worker_override_settings();

	worker_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes kafka worker",
									   ALLOCSET_DEFAULT_SIZES);
	step_cxt = AllocSetContextCreate(TopMemoryContext, "source_writes kafka messages",
									 ALLOCSET_DEFAULT_SIZES);
	MemoryContextSwitchTo(worker_cxt);
	msgs = palloc(sizeof(rd_kafka_message_t *) * SW_KAFKA_CONSUME_STEP);

	CacheRegisterRelcacheCallback(relcache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID, syscache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(USERMAPPINGOID, syscache_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(PROCOID, ingest_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHMEMROLEMEM, ingest_callback, (Datum) 0);
	CacheRegisterSyscacheCallback(AUTHOID, ingest_callback, (Datum) 0);

	PG_TRY();
	{
		set_up();
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(worker_cxt);
		edata = CopyErrorData();
		set_state("cannot start", edata->message);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ereport(LOG,
			(errmsg("source_writes kafka worker started for source table \"%s\", topic \"%s\"",
					source_name, topic)));
	set_state("starting", "");

	for (;;)
	{
		TimestampTz now;
		uint64		requested;
		bool		deleted;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
			sw_worker_override_settings();
		}
		sw_report_stats();
		AcceptInvalidationMessages();
		if (!sw_worker_still_assigned())
			proc_exit(0);
		if (options_changed)
			leave_for_new_options();

		/* librdkafka's callbacks */
		rd_kafka_poll(rk, 0);
		if (broker_error_pending)
		{
			broker_error_pending = false;
			set_state("broker error", broker_error);
		}

		/* partitions, now and then; wait_for() wants fresh watermarks */
		now = GetCurrentTimestamp();
		requested = sw_worker_wait_requested();
		if (requested > served)
		{
			int			before = npartitions;

			if (serve_wait())
			{
				sw_worker_wait_served(requested);
				served = requested;
			}
			last_metadata = now;
			if (npartitions != before)
				assign_partitions();
		}
		else if (TimestampDifferenceExceeds(last_metadata, now,
											topic_exists ? SW_METADATA_MS : SW_METADATA_MISSING_MS))
		{
			int			before = npartitions;

			last_metadata = now;
			if (refresh_partitions() && npartitions != before)
				assign_partitions();
		}

		/*
		 * A batch, when messages come (we wait a moment for them: the latch
		 * and the requests are looked at that often), or when the brokers
		 * deleted some before we could take them.
		 */
		deleted = deleted_ahead();
		if (take_messages(SW_KAFKA_WAIT_MS) > 0 || deleted)
		{
			if (try_batch(&failures))
				set_state("running", NULL);
			last_report = 0;	/* report now */
		}
		MemoryContextSwitchTo(worker_cxt);

		now = GetCurrentTimestamp();
		if (TimestampDifferenceExceeds(last_report, now, SW_REPORT_MS))
		{
			report_partitions();
			last_report = now;
		}
		ResetLatch(MyLatch);
		if (!PostmasterIsAlive())
			proc_exit(1);
	}
}
