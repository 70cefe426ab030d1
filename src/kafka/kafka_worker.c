/*-------------------------------------------------------------------------
 *
 * kafka_worker.c
 *		  The background worker that ingests a Kafka source's topic
 *
 * See doc/internals.md, "Workers and processes" (Kafka workers).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/kafka/kafka_worker.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <librdkafka/rdkafka.h>

#include "access/relation.h"
#include "access/reloptions.h"
#include "access/table.h"
#include "access/tupdesc.h"
#include "access/xact.h"
#include "catalog/pg_user_mapping.h"
#include "commands/dbcommands.h"
#include "commands/defrem.h"
#include "fmgr.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/pmsignal.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "ingest/ingest.h"
#include "kafka/registry.h"
#include "log/log.h"
#include "options/options.h"
#include "source_writes.h"
#include "workers/workers.h"

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

/* the longest the worker sleeps between two looks at its partitions */
#define SW_IDLE_MS				1000

/* how long an offset past its partition's end must stay so to stop us */
#define SW_PAST_END_MS			10000

/* how often partitions are looked for: while the topic is missing, and then */
#define SW_METADATA_MISSING_MS	1000
#define SW_METADATA_MS			5000

/* how often the worker reports its partitions while idle */
#define SW_REPORT_MS			1000

/* how long a broker request of ours may take */
#define SW_BROKER_TIMEOUT_MS	5000

/* how long a batch about to commit waits to hear which cluster it read */
#define SW_CLUSTER_CHECK_MS		1000

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
	int64		lost;			/* ... of which the current batch lost these */
	bool		stopped;		/* its stored offset is not followed */
	TimestampTz past_end_since; /* since when its offset seems past its end;
								 * 0: it does not */
} KafkaPartition;

/* the worker's state */
static Oid	source_relid = InvalidOid;
static char *source_name;
static Oid	server_oid;
static char *topic;
static bool avro_values;		/* format avro: schemas from the registry */
static bool avro_keys;			/* key_format avro: the same for keys */
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
static rd_kafka_conf_t *conf_template;	/* to make the consumer again */
static rd_kafka_queue_t *main_queue;	/* librdkafka's events and logs */
static int	wake_pipe[2] = {-1, -1};	/* librdkafka writes to it */
static WaitEventSet *wait_set;
static char *cluster_id = NULL; /* of the brokers; NULL until known */
static bool identity_checked = false;	/* the stored offsets were checked */
static bool catalog_has_identity;	/* progress has 0.2's columns */
static bool halted = false;		/* its offsets cannot be followed */

/* the options the worker runs with, to see whether they changed */
static TupleDesc desc_seen;
static char *options_seen;

/* set by callbacks */
static bool options_maybe_changed = false;
static bool ingest_stale = false;
static char broker_error[256];
static bool broker_error_pending = false;

static void leave_for_new_options(void);

/*
 * The table, its server or a user mapping may have changed (or been
 * dropped): look again, and leave if they did, to start again with the
 * new options.  A GRANT or an ANALYZE of the table invalidates it too,
 * and changes nothing the worker uses.
 */
static void
relcache_callback(Datum arg, Oid relid)
{
	/* InvalidOid: every relation, after a cache reset */
	if (relid == source_relid || !OidIsValid(relid))
		options_maybe_changed = true;
}

static void
syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	if (cacheid == USERMAPPINGOID ||
		hashvalue == 0 ||
		hashvalue == GetSysCacheHashValue1(FOREIGNSERVEROID,
										   ObjectIdGetDatum(server_oid)))
		options_maybe_changed = true;
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
				(errmsg("librdkafka: %s", buf),
				 errdetail("librdkafka logged it (facility %s) in the Kafka worker of source table \"%s\".",
						   fac, source_name)));
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

	/*
	 * Messages of aborted transactions never land, whatever an option of
	 * version 0.1 said (it is refused now).
	 */
	set_property(conf, "isolation.level", "read_committed");
	rd_kafka_conf_set_error_cb(conf, error_callback);
	rd_kafka_conf_set_log_cb(conf, log_callback);
	return conf;
}

/*
 * Create the consumer with every signal blocked, so that librdkafka's
 * threads, which inherit the mask, never run PostgreSQL's handlers.  Its
 * queues write to our pipe when something arrives while they are empty.
 */
static void
create_consumer(rd_kafka_conf_t *conf)
{
	sigset_t	all;
	sigset_t	old;
	char		errstr[512];

	if (conf_template == NULL)
		conf_template = rd_kafka_conf_dup(conf);
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
	main_queue = rd_kafka_queue_get_main(rk);
	rd_kafka_queue_io_event_enable(queue, wake_pipe[1], "c", 1);
	rd_kafka_queue_io_event_enable(main_queue, wake_pipe[1], "m", 1);
}

/*
 * Make the consumer again, with no partitions: after a failed batch, so
 * that nothing librdkafka knew of the offsets it had passed (its
 * positions) outlives the rewind to the stored offsets.
 */
static void
renew_consumer(void)
{
	rd_kafka_queue_destroy(queue);
	rd_kafka_queue_destroy(main_queue);
	rd_kafka_destroy_flags(rk, RD_KAFKA_DESTROY_F_NO_CONSUMER_CLOSE);
	rk = NULL;
	if (assigned)
		rd_kafka_topic_partition_list_destroy(assigned);
	assigned = NULL;
	create_consumer(rd_kafka_conf_dup(conf_template));
}

/*
 * The pipe librdkafka wakes us with, and the wait event set that sleeps on
 * it, the latch and the postmaster.
 */
static void
make_wait_set(void)
{
	if (pipe(wake_pipe) != 0 ||
		fcntl(wake_pipe[0], F_SETFL, O_NONBLOCK) != 0 ||
		fcntl(wake_pipe[1], F_SETFL, O_NONBLOCK) != 0)
		ereport(ERROR,
				(errcode_for_file_access(),
				 errmsg("could not create a pipe: %m")));
	wait_set = CreateWaitEventSet(TopMemoryContext, 3);
	AddWaitEventToSet(wait_set, WL_LATCH_SET, PGINVALID_SOCKET, MyLatch, NULL);
	AddWaitEventToSet(wait_set, WL_EXIT_ON_PM_DEATH, PGINVALID_SOCKET, NULL, NULL);
	AddWaitEventToSet(wait_set, WL_SOCKET_READABLE, wake_pipe[0], NULL, NULL);
}

/* empty the pipe: what librdkafka said is looked at next */
static void
drain_wake_pipe(void)
{
	char		buf[64];

	while (read(wake_pipe[0], buf, sizeof(buf)) > 0)
		;
}

/*
 * What the worker takes from the table's definition, its options, its
 * server's and the owner's user mapping, written out to be compared
 * (with the table's tuple descriptor, compared apart): not its
 * privileges, statistics or comments.
 */
static char *
describe_options(Relation ftrel)
{
	Oid			relid = RelationGetRelid(ftrel);
	Form_pg_class cls = RelationGetForm(ftrel);
	TupleDesc	desc = RelationGetDescr(ftrel);
	StringInfoData buf;
	HeapTuple	tuple;

	initStringInfo(&buf);
	appendStringInfo(&buf, "%s %u %u %d %d %d %d\n", NameStr(cls->relname),
					 cls->relnamespace, cls->relowner, cls->relispartition,
					 cls->relrowsecurity, cls->relforcerowsecurity,
					 cls->relhastriggers);
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		Datum		bound = SysCacheGetAttr(RELOID, tuple, Anum_pg_class_relpartbound,
											&isnull);

		if (!isnull)
			appendStringInfo(&buf, "%s\n", TextDatumGetCString(bound));
		ReleaseSysCache(tuple);
	}
	appendStringInfo(&buf, "%s\n", nodeToString(GetForeignTable(relid)->options));
	for (int i = 0; i < desc->natts; i++)
		if (!TupleDescAttr(desc, i)->attisdropped)
			appendStringInfo(&buf, "%d %s\n", i + 1,
							 nodeToString(GetForeignColumnOptions(relid, i + 1)));
	appendStringInfo(&buf, "%s\n", nodeToString(GetForeignServer(server_oid)->options));
	appendStringInfo(&buf, "%s\n", nodeToString(owner_mapping_options(cls->relowner)));
	if (ftrel->trigdesc)
		for (int i = 0; i < ftrel->trigdesc->numtriggers; i++)
			appendStringInfo(&buf, "trigger %u %c\n", ftrel->trigdesc->triggers[i].tgoid,
							 ftrel->trigdesc->triggers[i].tgenabled);
	return buf.data;
}

/* note the options the worker runs with, in its memory */
static void
remember_options(Relation ftrel)
{
	MemoryContext old = MemoryContextSwitchTo(worker_cxt);

	desc_seen = CreateTupleDescCopyConstr(RelationGetDescr(ftrel));
	options_seen = describe_options(ftrel);
	MemoryContextSwitchTo(old);
}

/*
 * Start a transaction with a snapshot and open the source table; if it was
 * dropped, leave: the launcher frees our slot.
 */
static Relation
open_source_or_exit(void)
{
	Relation	ftrel;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	ftrel = try_relation_open(source_relid, AccessShareLock);
	if (ftrel == NULL)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		proc_exit(0);
	}
	return ftrel;
}

/* close what open_source_or_exit() opened, and commit */
static void
close_source(Relation ftrel)
{
	relation_close(ftrel, AccessShareLock);
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
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

	ftrel = open_source_or_exit();
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
	remember_options(ftrel);
	catalog_has_identity = sw_catalog_progress_has_identity();
	make_wait_set();
	create_consumer(make_conf(server, mapping));
	avro_values = strcmp(source_table->format->name, "avro") == 0;
	avro_keys = source_table->key_format == SW_KEY_AVRO;
	if (avro_values || avro_keys)
		sw_registry_init(server, mapping);
	close_source(ftrel);
}

/*
 * Say what the worker is doing, in shared memory when it changes, with the
 * error that brought it there if any.
 */
static void
set_state(const char *state, const char *error)
{
	static char reported[64] = "";

	if (halted)
		return;					/* it says why it stopped */
	if (strcmp(state, reported) == 0 && error == NULL)
		return;
	sw_worker_report_state(state, error);
	strlcpy(reported, state, sizeof(reported));
}

/*
 * Stop ingesting: the stored offsets cannot be followed (state says why,
 * error how), until reset_offsets() says where to go on.  The partitions
 * are still reported; wait_for() fails at once.
 */
static void
halt(const char *state, const char *error)
{
	if (!halted)
		ereport(WARNING,
				(errmsg("kafka worker for source table \"%s\" stopped ingesting: %s",
						source_name, state),
				 errdetail("%s.", error),
				 errhint("Say where it goes on with source_writes.reset_offsets(): 'earliest', 'latest' or offsets of partitions.")));
	halted = true;
	sw_worker_report_state(state, error);
	sw_worker_report_halted(true);
	(void) rd_kafka_assign(rk, NULL);
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
 * query_offsets(), for offsets the worker cannot go on without: if the
 * brokers cannot say, the state says so and an error is raised.
 */
static void
query_offsets_or_error(int n, const int32 *parts, bool latest, int64 *offsets)
{
	const char *error = query_offsets(n, parts, latest, offsets);

	if (error)
	{
		set_state("cannot reach the brokers", error);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_UNABLE_TO_ESTABLISH_CONNECTION),
				 errmsg("could not read the offsets of topic \"%s\"", topic),
				 errdetail("%s", error)));
	}
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

	query_offsets_or_error(n, parts, latest, offsets);
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

/* is the partition ours (of our share of them)? */
static bool
is_ours(int32 partition)
{
	return partition % members == member;
}

/* the partition's row in a list of SwProgress, or NULL */
static SwProgress *
stored_row(List *stored, int32 partition)
{
	ListCell   *lc;

	foreach(lc, stored)
		if (((SwProgress *) lfirst(lc))->part == partition)
			return lfirst(lc);
	return NULL;
}

/*
 * Does a stored offset wait for a start of the worker to be placed: one
 * that reset_offsets() stored (earliest or latest to look up, or an offset
 * whose cluster it leaves to the worker), or of a topic or cluster not
 * known yet while the worker knows them?  check_stored_offsets() places
 * it; a worker that goes on without does not check it against the next
 * cluster.  Not a stopped one (which reset_offsets() alone moves on).
 */
static bool
offset_unplaced(const SwProgress *s)
{
	if (s->next_offset < 0)
		return true;
	return catalog_has_identity && s->stopped == NULL &&
		(s->topic == NULL || (s->cluster_id == NULL && cluster_id != NULL));
}

/* why a stored offset is not followed, for last_error */
static char *
stopped_error(const char *stopped, const SwProgress *row)
{
	if (strcmp(stopped, SW_STOPPED_CLUSTER) == 0)
		return psprintf("the stored offsets are positions in Kafka cluster \"%s\", but the brokers are cluster \"%s\"",
						row->cluster_id ? row->cluster_id : "?",
						cluster_id ? cluster_id : "?");
	return psprintf("partition %d of topic \"%s\" ends before its stored offset " INT64_FORMAT
					": the topic was deleted and created again, or its brokers lost messages",
					row->part, topic, row->next_offset);
}

/*
 * Are the brokers another Kafka cluster than the one the worker found
 * first?  As librdkafka last heard, or, with ask, as the brokers say now
 * (librdkafka may fetch from brokers rebuilt under the same address
 * before it hears their cluster id; if they cannot be asked, as it last
 * heard).  The first cluster heard of becomes ours.
 */
static bool
brokers_moved(bool ask)
{
	char	   *brokers_cluster;
	bool		moved = false;

	if (ask)
	{
		const rd_kafka_metadata_t *md;

		/* the topics we know of: the answer updates librdkafka's cluster id */
		if (rd_kafka_metadata(rk, 0, NULL, &md, SW_CLUSTER_CHECK_MS) ==
			RD_KAFKA_RESP_ERR_NO_ERROR)
			rd_kafka_metadata_destroy(md);
	}
	brokers_cluster = rd_kafka_clusterid(rk, 0);
	if (brokers_cluster == NULL)
		return false;
	if (cluster_id == NULL)
		cluster_id = MemoryContextStrdup(worker_cxt, brokers_cluster);
	else
		moved = strcmp(cluster_id, brokers_cluster) != 0;
	rd_kafka_mem_free(rk, brokers_cluster);
	return moved;
}

/*
 * The brokers were replaced under the same address: leave, and check the
 * stored offsets against the new cluster at start.
 */
static void
leave_for_other_cluster(void)
{
	ereport(LOG,
			(errmsg("kafka worker for source table \"%s\" restarts: the brokers are another cluster now",
					source_name)));
	sw_worker_restart_soon();
	proc_exit(0);
}

/*
 * Check the stored offsets of the source against the brokers, under the
 * progress lock: when the worker first finds its topic, and then those of
 * partitions found later (fresh).  Offsets of another topic are dropped
 * (first time only): the source starts again at its start_offset.  Of
 * our fresh partitions' offsets, those of another cluster stop the worker,
 * and so do those already stopped; those whose topic or cluster was not
 * known yet (stored by version 0.1, or by reset_offsets()) take the
 * brokers', and "earliest" or "latest" from reset_offsets() become
 * offsets.  Returns the stored offsets then, read again.
 */
static List *
check_stored_offsets(List *stored, List *fresh)
{
	ListCell   *lc;
	int32	   *parts[2];
	int			nparts[2] = {0, 0};
	List	   *changed = NIL;
	SwProgress *stopping = NULL;

	foreach(lc, stored)
	{
		SwProgress *s = lfirst(lc);

		if (!identity_checked && s->topic && strcmp(s->topic, topic) != 0)
		{
			ereport(LOG,
					(errmsg("source table \"%s\" ingests topic \"%s\" now, from its start_offset",
							source_name, topic),
					 errdetail("The offsets stored for topic \"%s\" are dropped.", s->topic)));
			sw_catalog_delete_progress(source_relid);
			CommandCounterIncrement();
			return NIL;
		}
	}
	if (!catalog_has_identity)
		return stored;

	parts[0] = palloc(sizeof(int32) * Max(list_length(stored), 1));
	parts[1] = palloc(sizeof(int32) * Max(list_length(stored), 1));
	foreach(lc, stored)
	{
		SwProgress *s = lfirst(lc);

		/* fresh partitions are in the topic */
		if (!is_ours(s->part) || !list_member_int(fresh, s->part))
			continue;
		if (s->stopped == NULL && s->cluster_id && cluster_id &&
			strcmp(s->cluster_id, cluster_id) != 0)
		{
			s->stopped = SW_STOPPED_CLUSTER;
			changed = lappend(changed, s);
		}
		if (s->stopped)
		{
			if (stopping == NULL)
				stopping = s;
			continue;
		}
		if (s->topic == NULL || (s->cluster_id == NULL && cluster_id))
		{
			s->topic = topic;
			s->cluster_id = cluster_id;
			changed = lappend(changed, s);
		}
		if (s->next_offset == SW_OFFSET_EARLIEST)
			parts[0][nparts[0]++] = s->part;
		else if (s->next_offset == SW_OFFSET_LATEST)
			parts[1][nparts[1]++] = s->part;
	}
	for (int l = 0; l < 2 && stopping == NULL; l++)
	{
		int64	   *offsets;

		if (nparts[l] == 0)
			continue;
		offsets = palloc(sizeof(int64) * nparts[l]);
		query_offsets_or_error(nparts[l], parts[l], l == 1, offsets);
		for (int i = 0; i < nparts[l]; i++)
		{
			SwProgress *s = stored_row(stored, parts[l][i]);

			s->next_offset = offsets[i];
			changed = list_append_unique_ptr(changed, s);
		}
	}
	foreach(lc, changed)
		sw_catalog_set_progress(source_relid, lfirst(lc));
	if (stopping)
		halt(stopping->stopped, stopped_error(stopping->stopped, stopping));
	if (changed != NIL)
	{
		CommandCounterIncrement();
		stored = sw_catalog_progress(source_relid);
	}
	return stored;
}

/*
 * Stop following a partition whose stored offset is beyond its end, as the
 * brokers say now (high): durably, until reset_offsets().
 */
static void
stop_past_end(KafkaPartition *p, int64 high)
{
	SwProgress	row = {0};
	List	   *stored;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	sw_catalog_lock_progress(source_relid);
	stored = sw_catalog_progress(source_relid);
	if (stored_row(stored, p->partition))
	{
		row = *stored_row(stored, p->partition);
		if (row.next_offset == p->next && catalog_has_identity)
		{
			row.stopped = SW_STOPPED_PAST_END;
			sw_catalog_set_progress(source_relid, &row);
		}
	}
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	row.part = p->partition;
	row.next_offset = p->next;
	p->stopped = true;
	p->high = high;
	halt(SW_STOPPED_PAST_END, stopped_error(SW_STOPPED_PAST_END, &row));
}

/*
 * Is a partition's next offset beyond the high watermark the brokers gave
 * (librdkafka's last one, or given), asked again of them to be sure, and
 * has it been for SW_PAST_END_MS?  (A new leader may report a high
 * watermark behind the old one's for a moment.)  Then ingestion stops,
 * and true.  While it is not sure, *suspect says so (may be NULL).
 */
static bool
check_past_end(KafkaPartition *p, int64 high, bool *suspect)
{
	int64		low;
	int64		fresh;
	TimestampTz now = GetCurrentTimestamp();

	if (suspect)
		*suspect = false;
	if (high < 0)
	{
		if (rd_kafka_get_watermark_offsets(rk, topic, p->partition, &low, &high) !=
			RD_KAFKA_RESP_ERR_NO_ERROR)
			return false;
	}
	if (high < 0 || high >= p->next ||
		query_offsets(1, &p->partition, true, &fresh) != NULL || fresh >= p->next)
	{
		p->past_end_since = 0;
		return false;
	}
	if (p->past_end_since == 0)
		p->past_end_since = now;
	if (!TimestampDifferenceExceeds(p->past_end_since, now, SW_PAST_END_MS))
	{
		if (suspect)
			*suspect = true;
		return false;
	}
	stop_past_end(p, fresh);
	return true;
}

/*
 * The partitions of the topic that the metadata md lists and the worker
 * has not seen yet, in *fresh; none if the topic does not exist (yet).
 * Says so in the state.  False if the topic cannot be read.
 */
static bool
find_fresh_partitions(const rd_kafka_metadata_t *md, List **fresh)
{
	const rd_kafka_metadata_topic_t *t = NULL;

	*fresh = NIL;
	for (int i = 0; i < md->topic_cnt && t == NULL; i++)
		if (strcmp(md->topics[i].topic, topic) == 0)
			t = &md->topics[i];
	if (t == NULL || t->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
		t->partition_cnt == 0)
	{
		topic_exists = false;
		set_state("waiting for the topic", NULL);
		return true;
	}
	if (t->err != RD_KAFKA_RESP_ERR_NO_ERROR)
	{
		set_state("cannot read the topic", rd_kafka_err2str(t->err));
		return false;
	}
	set_state("running", NULL);
	topic_exists = true;
	for (int i = 0; i < t->partition_cnt; i++)
		if (!bms_is_member(t->partitions[i].id, seen))
			*fresh = lappend_int(*fresh, t->partitions[i].id);
	return true;
}

/*
 * Store where the partitions in fresh that have no progress yet start
 * (start_offsets()), once the stored offsets are checked against the
 * brokers (check_stored_offsets()).  Returns the source's progress rows
 * after that.  In refresh_partitions()'s transaction.
 */
static List *
store_fresh_starts(List *fresh)
{
	List	   *stored = sw_catalog_progress(source_relid);
	int32	   *parts = palloc(sizeof(int32) * Max(list_length(fresh), 1));
	int64	   *offsets = palloc(sizeof(int64) * Max(list_length(fresh), 1));
	int			n = 0;
	ListCell   *lc;

	stored = check_stored_offsets(stored, fresh);
	identity_checked = true;
	first_start = (stored == NIL);
	foreach(lc, fresh)
	{
		int32		part = lfirst_int(lc);

		if (stored_row(stored, part) == NULL)
			parts[n++] = part;
	}
	if (n > 0)
		start_offsets(n, parts, offsets);
	for (int i = 0; i < n; i++)
		sw_catalog_start_progress(source_relid, parts[i], offsets[i], topic,
								  cluster_id);
	CommandCounterIncrement();
	return sw_catalog_progress(source_relid);
}

/*
 * Take the partitions in fresh as seen, and add those of ours to the
 * worker's partitions, at the offsets their progress rows (stored) say.
 * Returns the index of the first added.
 */
static int
add_fresh_partitions(List *fresh, List *stored)
{
	MemoryContext old = MemoryContextSwitchTo(worker_cxt);
	int			ours = 0;
	int			first_new;
	ListCell   *lc;

	foreach(lc, fresh)
	{
		seen = bms_add_member(seen, lfirst_int(lc));
		ours += is_ours(lfirst_int(lc));
	}
	partitions = partitions
		? repalloc(partitions, sizeof(KafkaPartition) * (npartitions + ours))
		: palloc(sizeof(KafkaPartition) * Max(ours, 1));
	MemoryContextSwitchTo(old);
	first_new = npartitions;
	foreach(lc, fresh)
	{
		KafkaPartition *p;
		SwProgress *row = stored_row(stored, lfirst_int(lc));

		if (!is_ours(lfirst_int(lc)))
			continue;
		p = &partitions[npartitions++];
		memset(p, 0, sizeof(KafkaPartition));
		p->partition = lfirst_int(lc);
		p->high = -1;
		p->batch_first = -1;
		p->deleted_to = -1;
		if (row)
		{
			p->next = row->next_offset;
			p->stopped = row->stopped != NULL;
		}
	}
	return first_new;
}

/*
 * Find the topic's partitions through metadata, and assign the new ones
 * that are ours at their stored offsets.  Where a new partition starts is
 * stored first, if it has no progress yet, by whichever worker of the
 * source finds it first, ours or not: so the source's first start, when
 * it applies start_offset, is one for all its workers.  The stored
 * offsets are checked against the brokers first (check_stored_offsets()),
 * and those of new partitions of ours against their ends.  False if the
 * brokers could not be asked.
 */
static bool
refresh_partitions(void)
{
	const rd_kafka_metadata_t *md;
	rd_kafka_resp_err_t err;
	List	   *fresh;
	bool		readable;
	int			first_new;

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

	/* the cluster, as the metadata just said */
	if (brokers_moved(false) && !halted)
	{
		rd_kafka_metadata_destroy(md);
		leave_for_other_cluster();
	}

	readable = find_fresh_partitions(md, &fresh);
	rd_kafka_metadata_destroy(md);
	if (!readable)
		return false;
	if (!topic_exists || (fresh == NIL && identity_checked))
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
	first_new = add_fresh_partitions(fresh, store_fresh_starts(fresh));
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);

	/* a new partition of ours may start beyond its end */
	for (int i = first_new; i < npartitions && !halted; i++)
	{
		int64		high;

		if (query_offsets(1, &partitions[i].partition, true, &high) == NULL)
			(void) check_past_end(&partitions[i], high, NULL);
	}
	return true;
}

/*
 * Assign every partition at its next offset: at start, when partitions
 * were found, and after a failed batch, whose messages are fetched again.
 * None while the worker is stopped.
 */
static void
assign_partitions(void)
{
	rd_kafka_topic_partition_list_t *list;
	rd_kafka_resp_err_t err;

	if (halted)
		return;
	list = rd_kafka_topic_partition_list_new(Max(npartitions, 1));

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
 * messages must be ingested again (or, if another writer took them, not),
 * by a new consumer.  Offsets that reset_offsets() stored, or that stopped
 * being followed, are for a new start of the worker.
 */
static void
rewind_partitions(void)
{
	List	   *stored;
	ListCell   *lc;
	bool		restart = false;

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	stored = sw_catalog_progress(source_relid);
	foreach(lc, stored)
	{
		SwProgress *s = lfirst(lc);
		KafkaPartition *p = find_partition(s->part);

		if (p)
		{
			p->next = s->next_offset;
			restart |= offset_unplaced(s) || s->stopped != NULL;
		}
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	if (restart)
		leave_for_new_options();
	renew_consumer();
	assign_partitions();
}

/*
 * A header's name as text in the database encoding.  Kafka's protocol makes
 * header names UTF-8 strings, but librdkafka hands over whatever bytes a
 * producer sent: each byte that is not part of a valid character becomes
 * U+FFFD in a UTF-8 database ('?' in others), as Kafka's Java client shows
 * such a name, so that no header column, raw message or kept error holds
 * text that is not valid (COPY, pg_dump and export() could not read it
 * back).
 */
static const char *
header_name(const char *name)
{
	int			encoding = GetDatabaseEncoding();
	int			len = strlen(name);
	StringInfoData s;

	if (pg_encoding_verifymbstr(encoding, name, len) == len)
		return name;
	initStringInfo(&s);
	for (;;)
	{
		int			valid = pg_encoding_verifymbstr(encoding, name, len);

		appendBinaryStringInfo(&s, name, valid);
		if (valid == len)
			break;
		appendStringInfoString(&s, encoding == PG_UTF8 ? "\xEF\xBF\xBD" : "?");
		name += valid + 1;
		len -= valid + 1;
	}
	return s.data;
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
		headers[i].name = header_name(headers[i].name);
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
 * The parts of the messages taken that are Avro (values, keys), for the
 * schema registry client: how many.
 */
static int
taken_avro(const char **parts, size_t *lens)
{
	int			n = 0;

	for (int i = 0; i < nmsgs; i++)
	{
		if (avro_values)
		{
			parts[n] = msgs[i]->payload;
			lens[n++] = msgs[i]->len;
		}
		if (avro_keys)
		{
			parts[n] = msgs[i]->key;
			lens[n++] = msgs[i]->key_len;
		}
	}
	return n;
}

/*
 * Does a message taken need a writer's schema not fetched yet?  Then the
 * batch ends before it: schemas are fetched outside its transaction.
 */
static bool
schemas_missing(void)
{
	const char *parts[2 * SW_KAFKA_CONSUME_STEP];
	size_t		lens[2 * SW_KAFKA_CONSUME_STEP];

	if (!avro_values && !avro_keys)
		return false;
	return sw_registry_missing(taken_avro(parts, lens), parts, lens);
}

/*
 * Fetch the writers' schemas the messages taken need, before the batch's
 * transaction: false, with the state saying why, while the registry
 * cannot give them (the messages are kept, to be tried again).
 */
static bool
fetch_schemas(void)
{
	const char *parts[2 * SW_KAFKA_CONSUME_STEP];
	size_t		lens[2 * SW_KAFKA_CONSUME_STEP];
	const char *state = NULL;
	char	   *error = NULL;
	int			n;

	if (!avro_values && !avro_keys)
		return true;
	n = taken_avro(parts, lens);
	pgstat_report_activity(STATE_RUNNING, "fetching schemas from the schema registry");
	if (sw_registry_resolve(n, parts, lens, &state, &error))
	{
		pgstat_report_activity(STATE_IDLE, NULL);
		return true;
	}
	pgstat_report_activity(STATE_IDLE, NULL);
	set_state(state, error);
	return false;
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
				(errmsg("the brokers deleted offsets " INT64_FORMAT " to " INT64_FORMAT " of partition %d of topic \"%s\" before source table \"%s\" ingested them",
						p->next, p->deleted_to - 1, p->partition, topic, source_name),
				 errhint("The topic's retention is shorter than the time the source was behind.")));
		set_state("running", error);
		p->lost = p->deleted_to - p->next;
		p->batch_to = Max(p->batch_to, p->deleted_to);
	}
}

/*
 * Where librdkafka stands in a partition: one past the last offset we
 * took from its queue, message or not (it takes transaction markers, and
 * skips aborted messages, in read_committed); -1 if not known.  Only
 * trusted because a failed batch makes the consumer again.
 */
static int64
position_of(const KafkaPartition *p)
{
	rd_kafka_topic_partition_list_t *list = rd_kafka_topic_partition_list_new(1);
	int64		position = -1;

	rd_kafka_topic_partition_list_add(list, topic, p->partition);
	if (rd_kafka_position(rk, list) == RD_KAFKA_RESP_ERR_NO_ERROR &&
		list->elems[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
		list->elems[0].offset >= 0)
		position = list->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(list);
	return position;
}

/*
 * Has librdkafka passed offsets beyond what was ingested, without a
 * message for us (a partition that ends with a transaction's commit or
 * abort marker)?  A batch consumes them.
 */
static bool
passed_silent_offsets(void)
{
	for (int i = 0; i < npartitions; i++)
		if (position_of(&partitions[i]) > partitions[i].next)
			return true;
	return false;
}

/*
 * At the end of a batch whose every message taken was added to it (none
 * is held for its schema): the offsets librdkafka passed beyond the last
 * of them brought none, and are consumed with it.
 */
static void
consume_silent_offsets(void)
{
	for (int i = 0; i < npartitions; i++)
		partitions[i].batch_to = Max(partitions[i].batch_to,
									 position_of(&partitions[i]));
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
		partitions[i].lost = 0;
	}

	SetCurrentStatementStartTimestamp();
	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	pgstat_report_activity(STATE_RUNNING, "ingesting a batch");
	ftrel = try_relation_open(source_relid, RowExclusiveLock);
	if (ftrel == NULL || options_maybe_changed)
	{
		/*
		 * The table changed before we locked it, or is gone: write nothing,
		 * and look at it first (the messages are fetched again)
		 */
		if (ftrel)
			relation_close(ftrel, NoLock);
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(worker_cxt);
		pgstat_report_activity(STATE_IDLE, NULL);
		drop_messages();
		options_maybe_changed = true;
		rewind_partitions();
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
			ConfigReloadPending || options_maybe_changed)
			break;
		if (take_messages(0) > 0)
		{
			/* those that need a schema not fetched wait for the next batch */
			if (schemas_missing())
				break;
			continue;
		}
		/* the queue is empty: wait for more if the brokers have more */
		drained = true;
		if (fetched_all())
			break;
		wake_fetcher();
		if (take_messages(SW_KAFKA_WAIT_MS) == 0)
			break;
		drained = false;
		if (schemas_missing())
			break;
	}
	/* messages held for their schemas are not passed over */
	if (nmsgs == 0)
		consume_silent_offsets();
	consume_deleted(drained);

	/*
	 * Not one message of brokers rebuilt under the same address lands at
	 * offsets of the old ones: they are asked which cluster they are, after
	 * the messages came and before the batch commits.
	 */
	if (brokers_moved(true))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_ERROR),
				 errmsg("the brokers of source table \"%s\" are another Kafka cluster now",
						source_name),
				 errdetail("The batch is rolled back; the worker starts again to check its offsets.")));
	for (int i = 0; i < npartitions; i++)
		if (partitions[i].batch_to > partitions[i].next)
			sw_ingest_consumed(ingest, partitions[i].partition,
							   partitions[i].next, partitions[i].batch_to,
							   partitions[i].lost);
	written = sw_ingest_end(ingest, &kept);
	relation_close(ftrel, NoLock);
	PopActiveSnapshot();
	sw_writer_commit_durably(false);
	CommitTransactionCommand();
	MemoryContextSwitchTo(worker_cxt);
	pgstat_report_activity(STATE_IDLE, NULL);

	for (int i = 0; i < npartitions; i++)
		partitions[i].next = partitions[i].batch_to;
	elog(DEBUG1, "ingested " INT64_FORMAT " rows into source table \"%s\", kept " INT64_FORMAT " errors",
		 written, source_name, kept);
}

/*
 * Count a failure and wait the backoff it earns, which doubles up to
 * SW_MAX_RETRY_MS, unless a reload comes (or, if options_end_it, a change
 * of the table's options: the invalidations are taken in meanwhile);
 * wait_for() requests set the latch meanwhile.
 */
static void
back_off(int *failures, bool options_end_it)
{
	TimestampTz deadline;

	(*failures)++;
	deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
										   sw_backoff_ms(*failures, 1000, SW_MAX_RETRY_MS));
	while (!ConfigReloadPending && !(options_end_it && options_maybe_changed))
	{
		long		remaining = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);

		if (remaining <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 remaining, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
		if (options_end_it)
			AcceptInvalidationMessages();
	}
}

/*
 * Wait before asking the schema registry again; the messages taken stay.
 */
static void
wait_for_registry(int *failures)
{
	back_off(failures, true);
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
	if (!ok && brokers_moved(false))
		leave_for_other_cluster();

	if (ok)
	{
		*failures = 0;
		return true;
	}
	/* the whole backoff */
	back_off(failures, false);
	rewind_partitions();
	return false;
}

/*
 * Answer wait_for(): the high watermark of every partition, asked of the
 * brokers now.  Not answered (false) while they cannot be asked, while
 * the worker is stopped (wait_for() then fails), or before it has looked
 * at a change of its options or offsets.
 */
static bool
serve_wait(void)
{
	int32	   *parts;
	int64	   *highs;
	const char *error;

	AcceptInvalidationMessages();
	if (options_maybe_changed || halted)
		return false;
	if (!refresh_partitions() || halted)
		return false;
	parts = palloc(sizeof(int32) * Max(npartitions, 1));
	highs = palloc(sizeof(int64) * Max(npartitions, 1));
	for (int i = 0; i < npartitions; i++)
		parts[i] = partitions[i].partition;
	error = npartitions > 0 ? query_offsets(npartitions, parts, true, highs) : NULL;
	pfree(parts);
	if (error)
	{
		set_state("cannot reach the brokers", error);
		pfree(highs);
		return false;
	}
	for (int i = 0; i < npartitions; i++)
	{
		bool		suspect;

		/* not answered while an offset seems past its end */
		if (check_past_end(&partitions[i], highs[i], &suspect) || suspect)
		{
			pfree(highs);
			return false;
		}
		partitions[i].high = highs[i];
	}
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
				(errmsg("kafka worker for source table \"%s\" restarts to take new options",
						source_name)));
		sw_worker_restart_soon();
	}
	proc_exit(0);
}

/*
 * Do the stored offsets of our partitions still say what the worker
 * knows?  Not after reset_offsets(), which stops no batch of ours that
 * is not committing (the compare-and-set fails it) and may come while
 * the worker is idle or stopped, even where it stores the offset the
 * worker is at (the worker must place it in its cluster again).
 */
static bool
offsets_unchanged(void)
{
	List	   *stored = sw_catalog_progress(source_relid);
	ListCell   *lc;

	foreach(lc, stored)
	{
		SwProgress *s = lfirst(lc);
		KafkaPartition *p = find_partition(s->part);

		if (p && (s->next_offset != p->next || offset_unplaced(s) ||
				  (catalog_has_identity && (s->stopped != NULL) != p->stopped)))
			return false;
	}
	return true;
}

/*
 * Something the worker runs with may have changed: read the table's
 * definition and options, its server's, the owner's user mapping and the
 * stored offsets again, and leave to start again if they differ.  Leave
 * without a word if the table was dropped.
 */
static void
check_options(void)
{
	Relation	ftrel;
	bool		same;

	options_maybe_changed = false;
	ftrel = open_source_or_exit();
	same = equalTupleDescs(desc_seen, RelationGetDescr(ftrel)) &&
		strcmp(describe_options(ftrel), options_seen) == 0 &&
		offsets_unchanged();
	close_source(ftrel);
	if (!same)
		leave_for_new_options();
}

/*
 * Sleep until librdkafka has something for us, the latch is set (a
 * wait_for() request, a signal) or timeout_ms have passed.
 */
static void
wait_for_events(long timeout_ms)
{
	WaitEvent	event;

	(void) WaitEventSetWait(wait_set, Max(timeout_ms, 0), &event, 1, PG_WAIT_EXTENSION);
	ResetLatch(MyLatch);
}

/*
 * Take the slot of index, connect to its database, and make the worker's
 * memory and cache callbacks.  Leaves if the slot went to another source
 * or the database cannot be entered.
 */
static void
attach_and_connect(int index)
{
	uint32		generation;
	Oid			dboid = InvalidOid;

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
}

/*
 * set_up(), with its error in the state ("cannot start") if it fails; the
 * error propagates.
 */
static void
set_up_or_say_why(void)
{
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
}

/*
 * The partitions, in each round of the loop: serve a wait_for() request
 * (*served: the last served) with fresh watermarks, or, now and then
 * (*last_metadata), look for new partitions; assign again if some came.
 */
static void
look_at_partitions(uint64 *served, TimestampTz *last_metadata)
{
	TimestampTz now = GetCurrentTimestamp();
	uint64		requested = sw_worker_wait_requested();

	if (requested > *served && halted)
	{
		/* still stopped after what came before the request: say so */
		AcceptInvalidationMessages();
		if (options_maybe_changed)
			check_options();
		sw_worker_wait_served(requested);
		*served = requested;
	}
	else if (requested > *served)
	{
		int			before = npartitions;

		if (serve_wait())
		{
			sw_worker_wait_served(requested);
			*served = requested;
		}
		*last_metadata = now;
		if (npartitions != before)
			assign_partitions();
	}
	else if (TimestampDifferenceExceeds(*last_metadata, now,
										topic_exists ? SW_METADATA_MS : SW_METADATA_MISSING_MS))
	{
		int			before = npartitions;

		*last_metadata = now;
		if (refresh_partitions() && npartitions != before)
			assign_partitions();
	}
}

/*
 * Report the partitions in shared memory every SW_REPORT_MS (*last_report:
 * when last), and check whether a partition now starts past its end.
 */
static void
report_now_and_then(TimestampTz *last_report)
{
	TimestampTz now = GetCurrentTimestamp();

	if (!TimestampDifferenceExceeds(*last_report, now, SW_REPORT_MS))
		return;
	report_partitions();
	*last_report = now;
	for (int i = 0; i < npartitions && !halted; i++)
		if (check_past_end(&partitions[i], -1, NULL))
			report_partitions();
}

/*
 * The Kafka worker of the slot main_arg: ingests its share of the
 * source's partitions until the slot goes to another source.
 */
void
source_writes_kafka_main(Datum main_arg)
{
	int			failures = 0;
	uint64		served = 0;
	TimestampTz last_metadata = 0;
	TimestampTz last_report = 0;

	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	pqsignal(SIGTERM, die);
	BackgroundWorkerUnblockSignals();

	attach_and_connect(DatumGetInt32(main_arg));
	set_up_or_say_why();
	ereport(LOG,
			(errmsg("kafka worker for source table \"%s\" started on topic \"%s\"",
					source_name, topic)));
	set_state("starting", "");

	for (;;)
	{
		bool		busy = false;

		CHECK_FOR_INTERRUPTS();
		sw_worker_reload();
		sw_report_stats();
		AcceptInvalidationMessages();
		if (!sw_worker_still_assigned())
			proc_exit(0);
		if (options_maybe_changed)
			check_options();

		/* what librdkafka wrote to the pipe is looked at below */
		drain_wake_pipe();

		/* librdkafka's callbacks */
		rd_kafka_poll(rk, 0);
		if (broker_error_pending)
		{
			broker_error_pending = false;
			set_state("broker error", broker_error);
		}

		/* partitions, now and then; wait_for() wants fresh watermarks */
		look_at_partitions(&served, &last_metadata);

		/*
		 * A batch, when messages came, when the brokers deleted some before
		 * we could take them, or when librdkafka passed offsets that brought
		 * none (transaction markers).
		 */
		if (!halted)
		{
			bool		deleted = deleted_ahead();

			/* (messages a batch left for their schemas come first) */
			if (nmsgs > 0 || take_messages(0) > 0 || deleted || passed_silent_offsets())
			{
				if (!fetch_schemas())
					wait_for_registry(&failures);
				else if (try_batch(&failures))
					set_state("running", NULL);
				last_report = 0;	/* report now */
				busy = true;
			}
		}
		MemoryContextSwitchTo(worker_cxt);

		report_now_and_then(&last_report);

		/* nothing came: sleep until something does, or it is time to look */
		if (!busy)
			wait_for_events(SW_IDLE_MS -
							TimestampDifferenceMilliseconds(last_report, GetCurrentTimestamp()));
		else if (!PostmasterIsAlive())
			proc_exit(1);
	}
}
