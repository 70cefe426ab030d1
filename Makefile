# source_writes: Kafka topics and webhooks as editable PostgreSQL tables
#
#   make && sudo make install    build and install the extension
#   make test                    everything, on a fresh Debian 12 machine
#   make demo / make demo-stop   a throwaway cluster with a tour

EXTENSION = source_writes
MODULE_big = source_writes
OBJS = \
	src/source_writes.o \
	src/fdw/ddl.o \
	src/fdw/fdw.o \
	src/fdw/fdw_index.o \
	src/fdw/fdw_modify.o \
	src/fdw/fdw_options.o \
	src/fdw/fdw_scan.o \
	src/fdw/functions.o \
	src/fdw/moves.o \
	src/fdw/provenance.o \
	src/fdw/indexes.o \
	src/fdw/rdkafka_allowlist.o \
	src/fdw/restore.o \
	src/fdw/versions.o \
	src/ingest/avro_format.o \
	src/ingest/decode.o \
	src/ingest/decode_column.o \
	src/ingest/decode_csv.o \
	src/ingest/decode_json.o \
	src/ingest/decode_text.o \
	src/ingest/debezium.o \
	src/ingest/ingest.o \
	src/ingest/offsets.o \
	src/log/avro_schemas.o \
	src/log/catalog.o \
	src/log/compaction.o \
	src/log/constraints.o \
	src/log/controller.o \
	src/log/deliveries.o \
	src/log/layout.o \
	src/log/loader.o \
	src/log/log.o \
	src/log/segments.o \
	src/log/stamps.o \
	src/log/storage.o \
	src/log/subxact.o \
	src/log/writer.o \
	src/options/option_table.o \
	src/options/source_table.o \
	src/webhook/signature.o \
	src/workers/databases.o \
	src/workers/launcher.o \
	src/workers/notifier.o \
	src/workers/supervisor.o \
	src/workers/workers.o
DATA = sql/source_writes--0.1.sql sql/source_writes--0.1--0.2.sql \
	sql/source_writes--0.2--0.3.sql sql/source_writes--0.3.sql
PGFILEDESC = "source_writes - Kafka topics and webhooks as editable tables"

# regression tests: sql/*.sql against expected/*.out, on a temporary instance
REGRESS = extension options lifecycle scan dml audit workload compaction security writer provenance versions version_attacks \
	tombstones \
	decode add_column row_locks ingestion signatures indexes index_scans index_writers retain_raw \
	retain_raw_attacks
REGRESS_OPTS = --temp-instance=tmp_check_regress --temp-config=test/regress.conf

# isolation specs: test/isolation/specs/*.spec
ISOLATION = ddl_vs_scan dml_conflicts controller upsert compaction snapshots counters writer \
	row_locks retry upsert_triggers index_build index_unique index_reads tombstones
ISOLATION_OPTS = --inputdir=test/isolation --temp-instance=tmp_check_iso \
	--temp-config=test/isolation.conf --load-extension=source_writes

# TAP tests: test/t/*.pl
TAP_TESTS = 1
PROVE_TESTS = test/t/*.pl

# the sources, by subsystem: src/options (what a source table's options
# say), src/log (the log and its commit protocol), src/fdw, src/ingest,
# src/workers, src/kafka and src/webhook (the Kafka and webhook libraries'
# own, but for src/webhook/signature.c, which the tests' module calls
# too), each with one header that the others include as "log/log.h",
# "fdw/fdw.h", ...
PG_CPPFLAGS = -Isrc

KAFKA_OBJS = src/kafka/kafka_worker.o src/kafka/registry.o
AVRO_OBJS = src/ingest/decode_avro.o
WEBHOOK_OBJS = src/webhook/webhook_worker.o src/webhook/webhook_state.o \
	src/webhook/webhook_answers.o \
	src/webhook/webhook_group.o src/webhook/webhook_limits.o \
	src/webhook/webhook_request.o src/webhook/webhook_tables.o \
	src/webhook/webhook_tls.o src/webhook/webhook_server.o \
	src/webhook/webhook_relay.o src/webhook/webhook_handshake.o

EXTRA_CLEAN = test/kafka_broker test/schema_registry test/avro_producer \
	tmp_check_regress tmp_check_iso output_iso \
	source_writes_kafka$(DLSUFFIX) $(KAFKA_OBJS) \
	source_writes_avro$(DLSUFFIX) $(AVRO_OBJS) \
	source_writes_webhook$(DLSUFFIX) $(WEBHOOK_OBJS)

PG_CONFIG ?= /usr/lib/postgresql/15/bin/pg_config
override with_llvm = no
# rebuild what includes a header that changed
override autodepend = yes
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# after PGXS, which resets it: where the TAP tests find SwTest.pm
PROVE_FLAGS = -I test/perl

# Symbols are hidden unless marked PGDLLEXPORT, as PostgreSQL 16 and later
# build every module (CFLAGS_SL_MODULE): what the server calls, and the
# functions and settings of source_writes that its other libraries call
# (marked in its headers; test/t/016_libraries.pl checks them).  Before 16,
# PGDLLEXPORT means nothing on Unix, so we give it its later meaning.
ifeq ($(CFLAGS_SL_MODULE)$(GCC),yes)
override CFLAGS += -fvisibility=hidden
override CPPFLAGS += -D'PGDLLEXPORT=__attribute__((visibility("default")))'
endif

# make SW_BENCHMARK=1: the benchmarks' own build, with what release builds
# leave out (source_writes.webhook_bench_discard; see bench/webhook/run)
ifdef SW_BENCHMARK
override CPPFLAGS += -DSW_BENCHMARK
endif

# The Kafka workers' library, the only one linked with librdkafka: backends
# that only read and edit source tables never load it.  It calls into
# source_writes, which the server has loaded before it.
KAFKA_SHLIB = source_writes_kafka$(DLSUFFIX)

# The webhook server's library, the only one linked with libmicrohttpd (and
# zlib, which decodes gzip and deflate bodies).
WEBHOOK_SHLIB = source_writes_webhook$(DLSUFFIX)

# The Avro decoder's library, the only one linked with Apache Avro C,
# loaded by the processes that decode Avro messages when they first do.
AVRO_SHLIB = source_writes_avro$(DLSUFFIX)

all: $(KAFKA_SHLIB) $(WEBHOOK_SHLIB) $(AVRO_SHLIB)

# (the Kafka workers also fetch schemas from registries, with libcurl)
$(KAFKA_SHLIB): $(KAFKA_OBJS)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDFLAGS_SL) -shared -o $@ -lrdkafka -lcurl -pthread

$(AVRO_SHLIB): $(AVRO_OBJS)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDFLAGS_SL) -shared -o $@ -lavro

$(WEBHOOK_SHLIB): $(WEBHOOK_OBJS)
	$(CC) $(CFLAGS) $^ $(LDFLAGS) $(LDFLAGS_SL) -shared -o $@ -lmicrohttpd -lz -pthread

install: install-kafka install-webhook install-avro

# the tests' own module is built in place by test/run; clean it with us
clean: clean-test-module

.PHONY: install-kafka install-webhook install-avro clean-test-module
clean-test-module:
	$(MAKE) -C test/modules/source_writes_test PG_CONFIG='$(PG_CONFIG)' clean

install-kafka: $(KAFKA_SHLIB) installdirs
	$(INSTALL_SHLIB) $(KAFKA_SHLIB) '$(DESTDIR)$(pkglibdir)/$(KAFKA_SHLIB)'

install-webhook: $(WEBHOOK_SHLIB) installdirs
	$(INSTALL_SHLIB) $(WEBHOOK_SHLIB) '$(DESTDIR)$(pkglibdir)/$(WEBHOOK_SHLIB)'

install-avro: $(AVRO_SHLIB) installdirs
	$(INSTALL_SHLIB) $(AVRO_SHLIB) '$(DESTDIR)$(pkglibdir)/$(AVRO_SHLIB)'

# the embedded Kafka broker for tests, demo and benchmarks
test/kafka_broker: test/kafka_broker.c test/kafka_txn_broker.c
	$(CC) -O2 -Wall -o $@ $^ -lrdkafka -pthread

# the tests' schema registry, and their producer of Avro messages in the
# registry's wire format
test/schema_registry: test/schema_registry.c
	$(CC) -O2 -Wall -o $@ $^ -lmicrohttpd -ljansson -pthread

test/avro_producer: test/avro_producer.c
	$(CC) -O2 -Wall -o $@ $^ -lavro -ljansson -lrdkafka -lcurl

.PHONY: test demo demo-stop
test:
	test/run

demo:
	scripts/demo start

demo-stop:
	scripts/demo stop
