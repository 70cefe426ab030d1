--
-- Option validation: servers, user mappings, source tables, columns.
-- Every bad option is an error with an FDW error code (printed after it)
-- and a hint that lists the valid choices; options that only a superuser
-- may set fail with 42501 for others.
--
-- the wrapper itself takes no options
ALTER FOREIGN DATA WRAPPER source_writes OPTIONS (ADD debug 'true');
\echo :LAST_ERROR_SQLSTATE

--
-- servers
--
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes;
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafak');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers '');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers 'b:9092', host 'b');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook', brokers 'b:9092');
\echo :LAST_ERROR_SQLSTATE

-- librdkafka properties go under "rdkafka.": only those on source_writes'
-- list, each value checked by its type (without calling librdkafka)
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.fetch.wait.max.mss" '100');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.debug" 'all');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.fetch.wait.max.ms" 'soon');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.fetch.wait.max.ms" '300001');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.fetch.wait.max.ms" '0100');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.topic.metadata.refresh.interval.ms" '-2');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.security.protocol" 'tls');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.sasl.mechanism" 'plain');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.client.rack" '');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.ssl.ca.location" 'certs/ca.pem');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.group.id" 'mine');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.sasl.password" 'secret');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'webhook', "rdkafka.fetch.wait.max.ms" '100');
\echo :LAST_ERROR_SQLSTATE
-- properties that load code or run a program are refused, superusers included
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.plugin.library.paths" '/tmp/x.so');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.ssl.engine.location" '/tmp/x.so');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.sasl.kerberos.kinit.cmd" 'touch /tmp/x');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER bad FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', "rdkafka.ssl.providers" 'legacy');
\echo :LAST_ERROR_SQLSTATE
SELECT source_writes.fdw_validator(ARRAY['rdkafka.plugin.library.paths=/tmp/x.so'],
                                   'pg_user_mapping'::regclass);
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS servers FROM pg_foreign_server;

-- good servers
CREATE SERVER kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092', "rdkafka.fetch.wait.max.ms" '100');
CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
ALTER SERVER kafka OPTIONS (ADD "rdkafka.socket.keepalive.enable" 'true');
ALTER SERVER kafka OPTIONS (SET "rdkafka.socket.keepalive.enable" 'maybe');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER kafka OPTIONS (DROP brokers);
\echo :LAST_ERROR_SQLSTATE
SELECT srvname, srvoptions FROM pg_foreign_server ORDER BY 1;

--
-- user mappings hold credentials
--
CREATE ROLE regress_sw_app;
CREATE USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS ("rdkafka.sasl.username" 'app', "rdkafka.sasl.password" 'secret');
CREATE USER MAPPING FOR regress_sw_app SERVER hooks OPTIONS (secret 'whsec');
CREATE USER MAPPING FOR PUBLIC SERVER kafka OPTIONS (secret 'whsec');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER hooks OPTIONS ("rdkafka.sasl.password" 'x');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER hooks OPTIONS (password 'x');
\echo :LAST_ERROR_SQLSTATE
-- errors never show the values of user mappings
CREATE USER MAPPING FOR PUBLIC SERVER kafka OPTIONS ("rdkafka.security.protocol" 'pigeon');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER kafka OPTIONS ("rdkafka.socket.timeout.ms" '1e3');
\echo :LAST_ERROR_SQLSTATE
CREATE USER MAPPING FOR PUBLIC SERVER kafka OPTIONS ("rdkafka.sasl.password" '');
\echo :LAST_ERROR_SQLSTATE
SELECT count(*) AS user_mappings FROM pg_user_mappings;


--
-- only a superuser may name files on the database server, in servers and
-- in user mappings, or change a server or user mapping that names one
--
CREATE SERVER tls FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9093', "rdkafka.security.protocol" 'SSL',
           "rdkafka.ssl.ca.location" 'probe',
           "rdkafka.ssl.certificate.location" '/etc/kafka/client.pem',
           "rdkafka.fetch.wait.max.ms" '50',
           "rdkafka.topic.metadata.refresh.interval.ms" '-1');
CREATE USER MAPPING FOR regress_sw_app SERVER tls
  OPTIONS ("rdkafka.ssl.key.location" '/etc/kafka/app.key',
           "rdkafka.ssl.key.password" 'keypass');
GRANT USAGE ON FOREIGN SERVER tls, kafka TO regress_sw_app;
ALTER SERVER tls OWNER TO regress_sw_app;
SET ROLE regress_sw_app;
ALTER SERVER tls OPTIONS (SET "rdkafka.fetch.wait.max.ms" '100');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER tls OPTIONS (DROP "rdkafka.ssl.ca.location",
                          DROP "rdkafka.ssl.certificate.location",
                          SET "rdkafka.fetch.wait.max.ms" '100');
ALTER SERVER tls OPTIONS (ADD "rdkafka.ssl.crl.location" '/etc/kafka/crl.pem');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER tls
  OPTIONS (SET "rdkafka.ssl.key.password" 'other');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER tls
  OPTIONS (DROP "rdkafka.ssl.key.location", SET "rdkafka.ssl.key.password" 'other');
ALTER USER MAPPING FOR regress_sw_app SERVER tls
  OPTIONS (ADD "rdkafka.ssl.keystore.location" '/etc/passwd');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.sasl.kerberos.keytab" '/etc/krb5.keytab');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.sasl.kerberos.principal" 'postgres');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.ssl.ca.pem" '-----BEGIN CERTIFICATE-----', ADD "rdkafka.check.crcs" 'TRUE');
SELECT source_writes.fdw_validator(ARRAY['rdkafka.ssl.key.location=/etc/passwd'],
                                   'pg_user_mapping'::regclass);
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT source_writes.fdw_validator(ARRAY['rdkafka.ssl.key.location=/etc/passwd'],
                                   'pg_user_mapping'::regclass);
SELECT srvname, unnest(srvoptions) AS option FROM pg_foreign_server
WHERE srvname = 'tls';
SELECT srvname, unnest(umoptions) AS option FROM pg_user_mappings
WHERE usename = 'regress_sw_app' AND srvname IN ('kafka', 'tls') ORDER BY 1, 2;

--
-- a worker's memory: roles that are not superusers may set librdkafka's
-- buffers up to a cap (superusers further); Kerberos (GSSAPI), which
-- would authenticate with the database server's own credentials, is for
-- superusers; messages of aborted transactions never land
--
SET ROLE regress_sw_app;
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.queued.max.messages.kbytes" '2097151');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.queued.min.messages" '10000000');
\echo :LAST_ERROR_SQLSTATE
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.fetch.max.bytes" '8388609');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.max.partition.fetch.bytes" '1000000000');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.fetch.message.max.bytes" '1000000000');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.receive.message.max.bytes" '2147483647');
ALTER SERVER tls OPTIONS (ADD "rdkafka.queued.max.messages.kbytes" '8193');
-- up to the cap
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.queued.max.messages.kbytes" '8192',
           ADD "rdkafka.queued.min.messages" '100000',
           ADD "rdkafka.fetch.max.bytes" '8388608',
           ADD "rdkafka.max.partition.fetch.bytes" '8388608',
           ADD "rdkafka.receive.message.max.bytes" '100000000');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.sasl.mechanism" 'GSSAPI');
\echo :LAST_ERROR_SQLSTATE
ALTER SERVER tls OPTIONS (ADD "rdkafka.sasl.mechanisms" 'GSSAPI');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.sasl.mechanism" 'SCRAM-SHA-512');
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (ADD "rdkafka.isolation.level" 'read_uncommitted');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
-- a superuser may go further, and then only a superuser may change it
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (SET "rdkafka.queued.max.messages.kbytes" '65536',
           SET "rdkafka.sasl.mechanism" 'GSSAPI');
SET ROLE regress_sw_app;
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (SET "rdkafka.queued.min.messages" '1000');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
SELECT option FROM (SELECT unnest(umoptions) AS option FROM pg_user_mappings
                    WHERE usename = 'regress_sw_app' AND srvname = 'kafka') o
WHERE option ~ '(queued|fetch|receive|mechanism)' ORDER BY 1;
ALTER USER MAPPING FOR regress_sw_app SERVER kafka
  OPTIONS (DROP "rdkafka.queued.max.messages.kbytes", DROP "rdkafka.queued.min.messages",
           DROP "rdkafka.fetch.max.bytes", DROP "rdkafka.max.partition.fetch.bytes",
           DROP "rdkafka.receive.message.max.bytes", DROP "rdkafka.sasl.mechanism");
DROP SERVER tls CASCADE;

--
-- Kafka source tables
--
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka;
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'my topic');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', format 'xml');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', format 'json_array');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', envelope 'maxwell');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int, v jsonb) SERVER kafka OPTIONS (topic 'e', envelope 'upsert');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int, v jsonb) SERVER kafka OPTIONS (topic 'e', key 'id');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int, v jsonb) SERVER kafka OPTIONS (topic 'e', envelope 'upsert', key 'nope');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int, v jsonb) SERVER kafka OPTIONS (topic 'e', envelope 'upsert', key 'id, id');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int, v jsonb) SERVER kafka OPTIONS (topic 'e', envelope 'upsert', key 'id,');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', start_offset 'middle');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', start_offset '0:');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', start_offset '1:5, 1:6');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', start_offset '-1:5');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', start_offset '0:1200, 1:800');
DROP FOREIGN TABLE t;
-- workers: how many share a source's partitions
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers '0');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers '17');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers 'two');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers '1.5');
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers '0x2');
CREATE FOREIGN TABLE t (v jsonb) SERVER hooks OPTIONS (workers '2');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', workers '16');
ALTER FOREIGN TABLE t OPTIONS (SET workers '2');
ALTER FOREIGN TABLE t OPTIONS (SET workers '-2');
DROP FOREIGN TABLE t;
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', retain_history 'forever');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', retain_history '-1 day');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', max_body_bytes '1MB');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb) SERVER kafka OPTIONS (topic 'e', partitions '4');
\echo :LAST_ERROR_SQLSTATE

-- Kafka columns: metadata sources and the types they can fill
CREATE FOREIGN TABLE t (v jsonb OPTIONS (source 'body')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb OPTIONS (source 'size')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb, o int OPTIONS (source 'offset')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb, p text OPTIONS (source 'partition')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb, ts timestamp OPTIONS (source 'timestamp')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb, h text OPTIONS (source 'headers')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb, h int OPTIONS (header 'trace')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb OPTIONS (source 'key', header 'k')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (v jsonb OPTIONS (colour 'red')) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t ("$batch" bigint) SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE

-- formats and data columns
CREATE FOREIGN TABLE t (line text, extra text) SERVER kafka OPTIONS (topic 'e', format 'text');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (line int) SERVER kafka OPTIONS (topic 'e', format 'text');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (o bigint OPTIONS (source 'offset')) SERVER kafka OPTIONS (topic 'e', format 'bytes');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (payload text) SERVER kafka OPTIONS (topic 'e', format 'bytes');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (a int OPTIONS (field 'A'), b text) SERVER kafka OPTIONS (topic 'e', format 'csv');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t () SERVER kafka OPTIONS (topic 'e');
\echo :LAST_ERROR_SQLSTATE
-- avro: its server names the schema registry, an http(s) URL; only a
-- superuser names a CA file for it; credentials go in user mappings (not
-- in the URL, which every role can read)
CREATE FOREIGN TABLE t (id int) SERVER kafka OPTIONS (topic 'e', format 'avro');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER reg FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', schema_registry 'file:///etc/passwd');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER reg FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', schema_registry 'https://u:secret@registry:8081');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER reg FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'webhook', schema_registry 'http://registry:8081');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER reg FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', schema_registry 'https://registry:8081',
           schema_registry_ca 'ca.pem');
\echo :LAST_ERROR_SQLSTATE
CREATE SERVER reg FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'b:9092', schema_registry 'https://registry:8081',
           schema_registry_ca '/etc/ssl/certs/ca-certificates.crt');
CREATE USER MAPPING FOR regress_sw_app SERVER reg
  OPTIONS (schema_registry_user 'u', schema_registry_password 'secret!');
CREATE USER MAPPING FOR CURRENT_USER SERVER reg OPTIONS (schema_registry_token '');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE avro_t (id int, doc jsonb OPTIONS (field 'payload'))
  SERVER reg OPTIONS (topic 'e', format 'avro');
GRANT USAGE ON FOREIGN SERVER reg TO regress_sw_app;
ALTER SERVER reg OWNER TO regress_sw_app;
SET ROLE regress_sw_app;
ALTER SERVER reg OPTIONS (SET schema_registry 'https://other:8081');
\echo :LAST_ERROR_SQLSTATE
RESET ROLE;
DROP SERVER reg CASCADE;
-- key_format: how an upsert source reads its message keys
CREATE FOREIGN TABLE t (id int) SERVER kafka OPTIONS (topic 'e', key_format 'text');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int) SERVER kafka
  OPTIONS (topic 'e', envelope 'upsert', key 'id', key_format 'xml');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE t (id int) SERVER kafka
  OPTIONS (topic 'e', envelope 'upsert', key 'id', key_format 'avro');
\echo :LAST_ERROR_SQLSTATE

-- nothing of the failed commands remains
SELECT count(*) AS foreign_tables FROM pg_foreign_table;
SELECT count(*) AS catalog_rows FROM source_writes.source_tables;
SELECT count(*) AS hidden_relations FROM pg_class
WHERE relnamespace = 'source_writes_internal'::regnamespace;

-- good Kafka tables
CREATE FOREIGN TABLE orders (
    id int,
    amount numeric OPTIONS (field 'total'),
    part int OPTIONS (source 'partition'),
    off bigint OPTIONS (source 'offset'),
    at timestamptz OPTIONS (source 'timestamp'),
    k bytea OPTIONS (source 'key'),
    hs jsonb OPTIONS (source 'headers'),
    trace text OPTIONS (header 'trace-id'),
    top text OPTIONS (source 'topic')
) SERVER kafka OPTIONS (topic 'orders', format 'json', start_offset 'latest',
                         retain_history '7 days');
CREATE FOREIGN TABLE lines (line varchar(200), off bigint OPTIONS (source 'offset'))
  SERVER kafka OPTIONS (topic 'lines', format 'text');
CREATE FOREIGN TABLE blobs (data bytea) SERVER kafka OPTIONS (topic 'blobs', format 'bytes');
CREATE FOREIGN TABLE readings (sensor text, at timestamptz, value float8)
  SERVER kafka OPTIONS (topic 'readings', format 'csv', retain_history 'P1D');
CREATE FOREIGN TABLE prices (sku text OPTIONS (source 'key'), price numeric)
  SERVER kafka OPTIONS (topic 'prices', envelope 'upsert', key 'sku');

-- option changes are checked the same way
ALTER FOREIGN TABLE orders OPTIONS (SET format 'text');
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE orders OPTIONS (DROP topic);
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE orders ALTER COLUMN off OPTIONS (SET source 'timestamp');
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE orders ALTER COLUMN at TYPE timestamp;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE lines ADD COLUMN extra text;
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'none');
\echo :LAST_ERROR_SQLSTATE
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'none', DROP key);
ALTER FOREIGN TABLE prices OPTIONS (SET envelope 'upsert', ADD key 'sku');
ALTER FOREIGN TABLE orders OPTIONS (SET retain_history '0');

-- a server's type cannot change under its tables
ALTER SERVER kafka OPTIONS (SET type 'webhook', DROP brokers,
                            DROP "rdkafka.fetch.wait.max.ms", DROP "rdkafka.socket.keepalive.enable");
\echo :LAST_ERROR_SQLSTATE

--
-- webhook source tables
--
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (topic 'x');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (format 'csv');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (max_body_bytes '0');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (max_body_bytes 'lots');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (max_body_bytes '2GB');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (max_body_bytes '1025MB');
-- the hint's 1GB is taken
CREATE FOREIGN TABLE h1 (v jsonb) SERVER hooks OPTIONS (max_body_bytes '1GB');
DROP FOREIGN TABLE h1;
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (signature_encoding 'hex');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (signature_header 'X Signature');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks
  OPTIONS (signature_header 'X-Signature', signature_encoding 'base32');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb) SERVER hooks OPTIONS (envelope 'upsert', key 'v');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb OPTIONS (source 'offset')) SERVER hooks;
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb, r timestamp OPTIONS (source 'received_at')) SERVER hooks;
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (v jsonb, ua text OPTIONS (header 'User Agent')) SERVER hooks;
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE h (body json OPTIONS (source 'body'), n int) SERVER hooks
  OPTIONS (format 'bytes');
\echo :LAST_ERROR_SQLSTATE

-- good webhook tables
CREATE FOREIGN TABLE payments (
    id text,
    amount numeric OPTIONS (field 'amount_cents'),
    body jsonb OPTIONS (source 'body'),
    headers jsonb OPTIONS (source 'headers'),
    received timestamptz OPTIONS (source 'received_at'),
    agent text OPTIONS (header 'User-Agent')
) SERVER hooks OPTIONS (format 'json', max_body_bytes '64kB',
                        signature_header 'X-Signature', signature_encoding 'base64',
                        signature_prefix 'sha256=', idempotency_header 'Idempotency-Key');
CREATE FOREIGN TABLE batches (item jsonb) SERVER hooks OPTIONS (format 'json_array');
CREATE FOREIGN TABLE notes (note text) SERVER hooks OPTIONS (format 'text');

SELECT c.relname, t.ftoptions
FROM pg_foreign_table t JOIN pg_class c ON c.oid = t.ftrelid
ORDER BY 1;

SELECT relid, kind FROM source_writes.source_tables ORDER BY relid::text;

-- dropping the servers takes every table and its storage along
DROP SERVER kafka, hooks CASCADE;
SELECT count(*) AS catalog_rows FROM source_writes.source_tables;
SELECT count(*) AS hidden_relations FROM pg_class
WHERE relnamespace = 'source_writes_internal'::regnamespace;
DROP ROLE regress_sw_app;
