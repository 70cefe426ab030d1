# Kafka sources of format avro: values in the Confluent wire format,
# decoded with Apache Avro C against the writer's schema, which the worker
# fetches from the schema registry (with its credentials) before a batch
# and keeps; fields to columns by name, logical types to PostgreSQL's
# types, nested values as JSON; a writer's newer or older schema; bad
# messages kept as errors that say why; a registry that fails or is down
# makes the worker wait, and nothing is lost or written twice.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'orders:2', 'evolve:1', 'bad:1', 'outage:1', 'upserts:2',
	'skus:1', 'texts:1' ]);
my $registry = SwTest::registry(user => 'reg', password => 'pw');
my $node = SwTest::node('avro', conf => "max_worker_processes = 24\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

sub produce
{
	my ($topic, $schema, @records) = @_;
	return SwTest::produce_avro($broker, $registry, $topic, schema => $schema,
		records => \@records, user => 'reg', password => 'pw');
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$registry->{url}');
	CREATE USER MAPPING FOR CURRENT_USER SERVER k
	  OPTIONS (schema_registry_user 'reg', schema_registry_password 'pw')});

#
# 1. the types
#
my $order = q{{"type": "record", "name": "order", "namespace": "shop", "fields": [
	{"name": "id", "type": "long"},
	{"name": "qty", "type": "int"},
	{"name": "note", "type": ["null", "string"]},
	{"name": "ok", "type": "boolean"},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
	{"name": "ratio", "type": "double"},
	{"name": "status", "type": {"type": "enum", "name": "status", "symbols": ["NEW", "PAID"]}},
	{"name": "placed", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "placed_us", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "local", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "at", "type": {"type": "int", "logicalType": "time-millis"}},
	{"name": "ref", "type": {"type": "string", "logicalType": "uuid"}},
	{"name": "raw", "type": "bytes"},
	{"name": "hash", "type": {"type": "fixed", "name": "md5", "size": 2}},
	{"name": "address", "type": {"type": "record", "name": "address", "fields": [
		{"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "int"]}]}},
	{"name": "tags", "type": {"type": "array", "items": "string"}},
	{"name": "attrs", "type": {"type": "map", "values": "long"}},
	{"name": "ignored", "type": "string"}]}};
# 12.34 is the unscaled 1234 = 0x04d2; -0.01 is -1 = 0xff
my $ids = produce('orders', $order,
	'{"id": 1, "qty": 3, "note": {"string": "first"}, "ok": true, "price": "\u0004\u00d2", "ratio": 0.5, "status": "NEW", "placed": 1700000000123, "placed_us": 1700000000123456, "local": 1700000000000, "day": 19675, "at": 3723004, "ref": "123e4567-e89b-12d3-a456-426614174000", "raw": "\u0001\u0002", "hash": "\u00ab\u00cd", "address": {"city": "Lyon", "zip": {"int": 69001}}, "tags": ["a", "b"], "attrs": {"x": 1}, "ignored": "x"}',
	'{"id": 2, "qty": -1, "note": null, "ok": false, "price": "\u00ff", "ratio": -2.25, "status": "PAID", "placed": 0, "placed_us": 0, "local": 0, "day": 0, "at": 0, "ref": "00000000-0000-0000-0000-000000000000", "raw": "", "hash": "\u0000\u0000", "address": {"city": "Nice", "zip": null}, "tags": [], "attrs": {}, "ignored": "y"}');
sql(q{CREATE FOREIGN TABLE orders (
	id bigint, qty int, note text, ok boolean, price numeric(10,2), ratio float8,
	status text, placed timestamptz, placed_us timestamptz, local timestamp, day date,
	at time, ref uuid, raw bytea, hash bytea, address jsonb, tags jsonb, attrs json,
	town text OPTIONS (field 'address'), missing int DEFAULT 7,
	o bigint OPTIONS (source 'offset'))
	SERVER k OPTIONS (topic 'orders', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('orders')}), '', 'the topic is ingested');
is(sql(q{SELECT id, qty, note, ok, price, ratio, status FROM orders ORDER BY id}),
	"1|3|first|t|12.34|0.5|NEW\n2|-1||f|-0.01|-2.25|PAID",
	'primitive types, a union with null, a decimal with its scale, an enum');
is(sql(q{SET TimeZone = 'UTC'; SELECT placed, placed_us, local, day, at, ref FROM orders ORDER BY id}),
	"2023-11-14 22:13:20.123+00|2023-11-14 22:13:20.123456+00|2023-11-14 22:13:20|2023-11-14|01:02:03.004|123e4567-e89b-12d3-a456-426614174000\n"
	. "1970-01-01 00:00:00+00|1970-01-01 00:00:00+00|1970-01-01 00:00:00|1970-01-01|00:00:00|00000000-0000-0000-0000-000000000000",
	'timestamp-millis and -micros, local-timestamp, date, time-millis, uuid');
is(sql(q{SELECT raw, hash, address, tags, attrs FROM orders ORDER BY id}),
	"\\x0102|\\xabcd|{\"zip\": 69001, \"city\": \"Lyon\"}|[\"a\", \"b\"]|{\"x\": 1}\n"
	. "\\x|\\x0000|{\"zip\": null, \"city\": \"Nice\"}|[]|{}",
	'bytes and fixed into bytea; a record, an array and a map as JSON');
is(sql(q{SELECT town::jsonb->>'city', missing FROM orders ORDER BY id}), "Lyon|7\nNice|7",
	'option field names the field; a field the writer lacks gives the default');
my $stats = SwTest::registry_stats($registry);
is($stats->{paths}{"GET /schemas/ids/$ids->{value_schema_id}"}, 1, 'the schema was fetched once');

# people edit Avro rows as any others
sql(q{UPDATE orders SET note = 'fixed' WHERE id = 2});
is(sql(q{SELECT note FROM orders WHERE id = 2}), 'fixed', 'an Avro row is edited like any other');

#
# 2. schema evolution: older and newer writers' schemas
#
my $v1 = q{{"type": "record", "name": "e", "fields": [{"name": "id", "type": "int"}]}};
my $v2 = q{{"type": "record", "name": "e", "fields": [{"name": "id", "type": "int"},
	{"name": "label", "type": "string", "default": ""}, {"name": "extra", "type": "long"}]}};
produce('evolve', $v1, '{"id": 1}');
produce('evolve', $v2, '{"id": 2, "label": "two", "extra": 9}');
sql(q{CREATE FOREIGN TABLE evolve (id int, label text DEFAULT 'none') SERVER k
	OPTIONS (topic 'evolve', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('evolve')}), '', 'messages of two schema versions');
is(sql(q{SELECT id, label FROM evolve ORDER BY id}), "1|none\n2|two",
	'an old writer lacks a field (its default), a new one has more (ignored)');
my $v3 = q{{"type": "record", "name": "e", "fields": [{"name": "id", "type": "string"}]}};
produce('evolve', $v3, '{"id": "three"}');
is(sql(q{SELECT source_writes.wait_for('evolve')}), '', 'a writer whose type the column cannot take');
is(sql(q{SELECT error FROM source_writes.errors WHERE source = 'evolve'::regclass}),
	'invalid input syntax for type integer: "three" (column "id" of source table "evolve", field "id")',
	'is kept as an error naming the column and the field');
sql(q{ALTER FOREIGN TABLE evolve ALTER COLUMN id TYPE text});
is(sql(q{SELECT source_writes.retry_errors('evolve')}), '1',
	'retry_errors() takes it back once the column takes it, with the schema the worker kept');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM evolve}), '1,2,three', 'the row is there');
is(sql(q{SELECT count(*) FROM source_writes.avro_schemas WHERE registry = '} . $registry->{url} . q{'}),
	'4', 'the usable schemas fetched so far are kept');

#
# 3. bad messages are kept as errors, and nothing is lost
#
sql(q{CREATE FOREIGN TABLE bad (id int) SERVER k OPTIONS (topic 'bad', format 'avro')});
my $good = produce('bad', $v1, '{"id": 1}');
my $id = sprintf('%08x', $good->{value_schema_id});
SwTest::produce_avro($broker, undef, 'bad', raw_hex => 1, records => [
	'01' . $id . '02',		# another magic byte
	'00' . $id,				# no body
	'0000',					# shorter than the header
	'00' . $id . '80',		# a varint that never ends
	'00000f4240' . '02',	# an id the registry does not know (1000000)
]);
# schemas whose messages could make Avro C nest or repeat without end
my $list = produce('bad', q{{"type": "record", "name": "node", "fields": [{"name": "id", "type": "int"},
	{"name": "next", "type": ["null", "node"]}]}}, '{"id": 9, "next": {"node": {"id": 10, "next": null}}}');
my $nulls = produce('bad', q{{"type": "record", "name": "nulls", "fields": [{"name": "id", "type": "int"},
	{"name": "n", "type": {"type": "array", "items": "null"}}]}}, '{"id": 11, "n": [null, null]}');
produce('bad', $v1, '{"id": 2}');
is(sql(q{SELECT source_writes.wait_for('bad')}), '', 'good and bad messages');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM bad}), '1,2', 'the good ones are rows');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'bad'::regclass}),
	"1: Avro message value begins with magic byte 1, not 0 (message value for source table \"bad\"): A message in the Confluent wire format begins with a magic byte 0 and a 4-byte schema id.\n"
	. "2: invalid Avro data: the message value does not match its schema of id $good->{value_schema_id} (message value for source table \"bad\"): At byte 0 of the body: it ends within a number.\n"
	. "3: Avro message value of 2 bytes is shorter than the Confluent wire format's header (message value for source table \"bad\"): A message begins with a magic byte 0 and a 4-byte schema id.\n"
	. "4: invalid Avro data: the message value does not match its schema of id $good->{value_schema_id} (message value for source table \"bad\"): At byte 1 of the body: it ends within a number.\n"
	. "5: the schema of id 1000000 in the schema registry cannot be used: the schema registry does not know it (message value for source table \"bad\")\n"
	. "6: the schema of id $list->{value_schema_id} in the schema registry cannot be used: it is recursive, which this release does not read (message value for source table \"bad\")\n"
	. "7: the schema of id $nulls->{value_schema_id} in the schema registry cannot be used: it has an array of items that take no bytes (message value for source table \"bad\")",
	'the bad ones are kept as errors that say why');

#
# 4. the registry down, failing, refusing us: the worker waits, then goes on
#
sql(q{CREATE FOREIGN TABLE outage (id int) SERVER k OPTIONS (topic 'outage', format 'avro')});
produce('outage', $v1, '{"id": 1}');
is(sql(q{SELECT source_writes.wait_for('outage')}), '', 'a first message');
my $v4 = q{{"type": "record", "name": "e4", "fields": [{"name": "id", "type": "int"}, {"name": "n", "type": "int"}]}};
my $v4_id = SwTest::registry_register($registry, 'outage-value', $v4, user => 'reg', password => 'pw');
SwTest::registry_control($registry, 'fail');
SwTest::produce_avro($broker, undef, 'outage', schema => $v4, schema_id => $v4_id,
	records => [ '{"id": 2, "n": 0}', '{"id": 3, "n": 0}' ]);
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'outage'::regclass},
	'schema registry error', 'a failing registry: the state says so');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'outage'::regclass}),
	qr/HTTP status 500 for schema id \d+/, 'and which status came');
SwTest::registry_control($registry, 'unauthorized');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'outage'::regclass},
	'the schema registry refuses our credentials', 'a registry that refuses us: the state says so');
SwTest::registry_control($registry, 'down');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'outage'::regclass},
	'cannot reach the schema registry', 'one that closes the connection: the state says so');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM outage}), '1',
	'nothing of the new schema is written meanwhile');
SwTest::registry_control($registry, 'ok');
is(sql(q{SELECT source_writes.wait_for('outage')}), '', 'the registry back: ingestion goes on');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id), count(*) FROM outage}), '1,2,3|3',
	'every message once');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'outage'::regclass}), '0',
	'and none kept as an error because the registry was down');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'outage'::regclass},
	'running', 'the state is running again');

#
# 5. credentials
#
sql(q{ALTER USER MAPPING FOR CURRENT_USER SERVER k OPTIONS (SET schema_registry_password 'wrong')});
my $v5 = q{{"type": "record", "name": "e5", "fields": [{"name": "id", "type": "int"}, {"name": "m", "type": "int"}]}};
produce('outage', $v5, '{"id": 4, "m": 0}');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'outage'::regclass},
	'the schema registry refuses our credentials', 'a wrong password: the registry refuses us');
sql(q{ALTER USER MAPPING FOR CURRENT_USER SERVER k OPTIONS (SET schema_registry_password 'pw')});
is(sql(q{SELECT source_writes.wait_for('outage')}), '', 'the right one again');
is(sql(q{SELECT count(*) FROM outage}), '4', 'and the message is written');
# (but the statements that set it, which this test's server logs)
is(scalar(grep { /^\d{4}-/ && !/statement: / && /\bpw\b|wrong/ } split /\n/, slurp_file($node->logfile)), 0,
	'the server log never shows the password');

#
# 6. upsert sources with Avro keys (key_format avro), and keys as text
#
my $ukey = q{{"type": "record", "name": "k", "fields": [{"name": "region", "type": "string"},
	{"name": "id", "type": "int"}]}};
my $uval = q{{"type": "record", "name": "v", "fields": [{"name": "id", "type": "int"},
	{"name": "qty", "type": "int"}]}};
SwTest::produce_avro($broker, $registry, 'upserts', schema => $uval, key_schema => $ukey,
	user => 'reg', password => 'pw', records => [
	qq({"region": "eu", "id": 1}\t{"id": 1, "qty": 5}),
	qq({"region": "us", "id": 1}\t{"id": 1, "qty": 7}),
	qq({"region": "eu", "id": 1}\t{"id": 1, "qty": 6}),
	qq({"region": "us", "id": 1}\t),
	qq({"region": "eu", "id": 2}\t{"id": 3, "qty": 1}) ]);
sql(q{CREATE FOREIGN TABLE upserts (region text, id int, qty int) SERVER k
	OPTIONS (topic 'upserts', format 'avro', envelope 'upsert', key 'region, id', key_format 'avro')});
is(sql(q{SELECT source_writes.wait_for('upserts')}), '', 'an upsert topic with Avro keys');
is(sql(q{SELECT region, id, qty FROM upserts ORDER BY region, id}), 'eu|1|6',
	'a record key gives the key columns by field; a tombstone deletes its key');
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'upserts'::regclass}),
	qr/^message key and value disagree on key column "id" of upsert source table "upserts"/,
	'a value that disagrees with its Avro key is kept as an error');

SwTest::produce_avro($broker, $registry, 'skus', schema => $uval, key_schema => '"string"',
	user => 'reg', password => 'pw', records => [
	qq("a-1"\t{"id": 1, "qty": 1}), qq("a-2"\t{"id": 2, "qty": 2}), qq("a-1"\t{"id": 1, "qty": 3}) ]);
sql(q{CREATE FOREIGN TABLE skus (sku text, qty int) SERVER k
	OPTIONS (topic 'skus', format 'avro', envelope 'upsert', key 'sku', key_format 'avro')});
is(sql(q{SELECT source_writes.wait_for('skus')}), '', 'Avro keys that are strings');
is(sql(q{SELECT sku, qty FROM skus ORDER BY sku}), "a-1|3\na-2|2", 'give the one key column');

SwTest::produce($broker, 'texts', qq("q"\t{"n": 1}), qq(q\t{"n": 2}), qq("q"\t{"n": 3}));
sql(q{CREATE FOREIGN TABLE texts (k text, n int) SERVER k
	OPTIONS (topic 'texts', envelope 'upsert', key 'k', key_format 'text')});
is(sql(q{SELECT source_writes.wait_for('texts')}), '', 'keys as text');
is(sql(q{SELECT k, n FROM texts ORDER BY k}), "\"q\"|3\nq|2", 'are never read as JSON');

done_testing();
