# envelope 'debezium' with format 'avro': change events as Debezium's
# PostgreSQL connector writes them through Confluent's Avro converter (an
# Envelope record of before, after, source, op, ts_ms and transaction;
# keys as Key records), keyed by the message key: c, r and u make the
# after image the key's row, d and tombstones delete it, t retracts every
# row; Debezium's own time types (named in connect.name); the envelope's
# parts as columns; bad events kept as errors that say why, and retried.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $topic = 'dbserver1.public.customers';
my $broker = SwTest::broker(topics => [ "$topic:2", 'one:1', 'bad:1', 'retry:1', 'vsd:1', 'avsc:1' ]);
my $registry = SwTest::registry();
my $node = SwTest::node('debezium_avro');

sub sql { return $node->safe_psql('postgres', $_[0]); }

# the schemas, in the layout of Debezium's documentation for the
# PostgreSQL connector, as Confluent's Avro converter writes them
my $key_schema = qq{{"type": "record", "name": "Key", "namespace": "$topic",
	"fields": [{"name": "id", "type": "int"}], "connect.name": "$topic.Key"}};
my $value_fields = q{[
	{"name": "id", "type": "int"},
	{"name": "name", "type": ["null", "string"], "default": null},
	{"name": "email", "type": ["null", "string"], "default": null},
	{"name": "born", "type": ["null", {"type": "int", "connect.version": 1,
		"connect.name": "io.debezium.time.Date"}], "default": null},
	{"name": "seen", "type": ["null", {"type": "long", "connect.version": 1,
		"connect.name": "io.debezium.time.MicroTimestamp"}], "default": null},
	{"name": "balance", "type": ["null", {"type": "bytes", "scale": 2, "precision": 10,
		"connect.version": 1, "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
		"connect.name": "org.apache.kafka.connect.data.Decimal", "logicalType": "decimal"}],
		"default": null}]};
my $source_schema = q{{"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
	"fields": [
	{"name": "version", "type": "string"}, {"name": "connector", "type": "string"},
	{"name": "name", "type": "string"}, {"name": "ts_ms", "type": "long"},
	{"name": "snapshot", "type": [{"type": "string", "connect.version": 1,
		"connect.parameters": {"allowed": "true,last,false,incremental"},
		"connect.default": "false", "connect.name": "io.debezium.data.Enum"}, "null"],
		"default": "false"},
	{"name": "db", "type": "string"}, {"name": "sequence", "type": ["null", "string"], "default": null},
	{"name": "schema", "type": "string"}, {"name": "table", "type": "string"},
	{"name": "txId", "type": ["null", "long"], "default": null},
	{"name": "lsn", "type": ["null", "long"], "default": null},
	{"name": "xmin", "type": ["null", "long"], "default": null}],
	"connect.name": "io.debezium.connector.postgresql.Source"}};
my $envelope = qq{{"type": "record", "name": "Envelope", "namespace": "$topic", "fields": [
	{"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": $value_fields,
		"connect.name": "$topic.Value"}], "default": null},
	{"name": "after", "type": ["null", "Value"], "default": null},
	{"name": "source", "type": $source_schema},
	{"name": "op", "type": "string"},
	{"name": "ts_ms", "type": ["null", "long"], "default": null},
	{"name": "transaction", "type": ["null", {"type": "record", "name": "block", "namespace": "event",
		"fields": [{"name": "id", "type": "string"}, {"name": "total_order", "type": "long"},
		{"name": "data_collection_order", "type": "long"}],
		"connect.version": 1, "connect.name": "event.block"}], "default": null}],
	"connect.version": 1, "connect.name": "$topic.Envelope"}};

my $source = '{"version": "2.5.0.Final", "connector": "postgresql", "name": "dbserver1", "ts_ms": 1700000000000, "snapshot": {"string": "false"}, "db": "postgres", "sequence": null, "schema": "public", "table": "customers", "txId": {"long": 555}, "lsn": {"long": 24023128}, "xmin": null}';

# a row in Avro's JSON encoding: 1970-01-01 + 19675 days = 2023-11-14;
# 1700000000123456 us = 2023-11-14 22:13:20.123456; 12.34 is 0x04d2
sub row
{
	my ($id, $name, $email) = @_;
	return qq({"$topic.Value": {"id": $id, "name": {"string": "$name"}, "email": {"string": "$email"}, "born": {"int": 19675}, "seen": {"long": 1700000000123456}, "balance": {"bytes": "\\u0004\\u00d2"}}});
}

sub event
{
	my ($id, $op, $before, $after, $ts) = @_;
	my $key = defined $id ? qq({"id": $id}) : '';
	return qq($key\t{"before": $before, "after": $after, "source": $source, "op": "$op", "ts_ms": {"long": $ts}, "transaction": null});
}

sub produce
{
	my ($to, @records) = @_;
	return SwTest::produce_avro($broker, $registry, $to, schema => $envelope,
		key_schema => $key_schema, subject => "$to-value", key_subject => "$to-key",
		records => \@records);
}

sub no_negative
{
	my ($table) = @_;
	is(sql(qq{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::$table)
		GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0',
		"the log of $table holds no negative or doubled multiplicity");
}

produce($topic,
	event(1, 'r', 'null', row(1, 'Ann', 'ann@example.com'), 1700000000001),
	event(2, 'c', 'null', row(2, 'Bob', 'bob@example.com'), 1700000000002),
	event(3, 'c', 'null', row(3, 'Cy', 'cy@example.com'), 1700000000003),
	event(1, 'u', row(1, 'Ann', 'ann@example.com'), row(1, 'Ann', 'ann@new.example'), 1700000000004),
	event(2, 'd', row(2, 'Bob', 'bob@example.com'), 'null', 1700000000005),
	qq({"id": 2}\t));

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$registry->{url}');
	CREATE FOREIGN TABLE customers (
	  id int, name text, email text, born date, seen timestamp, balance numeric(10,2),
	  op text OPTIONS (source 'op'),
	  before jsonb OPTIONS (source 'before'),
	  src jsonb OPTIONS (source 'source'),
	  changed timestamptz OPTIONS (source 'ts_ms'),
	  ts bigint OPTIONS (source 'ts_ms'))
	SERVER k OPTIONS (topic '$topic', format 'avro', key_format 'avro',
	  envelope 'debezium', key 'id')});
is(sql(qq{SELECT source_writes.wait_for('customers')}), '', 'the change events are ingested');
is(sql(q{SELECT id, name, email, op FROM customers ORDER BY id}),
	"1|Ann|ann\@new.example|u\n3|Cy|cy\@example.com|c",
	'c, r and u make the after image the row; d and the tombstone delete it');
is(sql(q{SELECT born, seen, balance FROM customers WHERE id = 1}),
	'2023-11-14|2023-11-14 22:13:20.123456|12.34',
	"Debezium's Date and MicroTimestamp, and Connect's Decimal");
is(sql(q{SELECT before->>'email', before->>'born', src->>'table', src->>'lsn', src->>'snapshot', ts,
	changed = to_timestamp(ts / 1000.0) FROM customers WHERE id = 1}),
	'ann@example.com|2023-11-14|customers|24023128|false|1700000000004|t',
	'the before image and the source as JSON, ts_ms as columns');
is(sql(q{SELECT before, src->'xmin' FROM customers WHERE id = 3}), '|null',
	'a c has no before image; a null field of the source is JSON null');

# a person's edits, then the next events of their keys
sql(q{UPDATE customers SET email = 'cy@fixed.example' WHERE id = 3;
	DELETE FROM customers WHERE id = 1});
produce($topic,
	event(3, 'u', row(3, 'Cy', 'cy@example.com'), row(3, 'Cyd', 'cy@example.com'), 1700000000006),
	event(1, 'd', row(1, 'Ann', 'ann@new.example'), 'null', 1700000000007),
	qq({"id": 1}\t),
	event(9, 'd', row(9, 'Nobody', 'n@example.com'), 'null', 1700000000008));
is(sql(q{SELECT source_writes.wait_for('customers')}), '', 'more events');
is(sql(q{SELECT id, name, email FROM customers ORDER BY id}),
	"3|Cyd|cy\@example.com",
	"an update replaces a person's edit of its row; a delete of a row a person deleted, or of a key never seen, does nothing");
no_negative('customers');
is(sql(q{SELECT string_agg(origin || ' ' || diff, ',' ORDER BY ts, diff) FROM source_writes.updates(NULL::customers)
	WHERE (data).id = 3}),
	'kafka 1,user -1,user 1,kafka -1,kafka 1',
	'the log has the event, the edit, and the event that replaced it');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'customers'::regclass}), '0',
	'no error kept');

# truncate events (no key, no before or after image) retract every row at
# their place, a person's too; the events after them stay
sql(q{CREATE FOREIGN TABLE one (id int, name text) SERVER k
	OPTIONS (topic 'one', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
produce('one',
	event(1, 'c', 'null', row(1, 'A', 'a'), 1),
	event(undef, 't', 'null', 'null', 2),
	event(2, 'c', 'null', row(2, 'B', 'b'), 3));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'events around a truncate');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM one}), '2',
	'the truncate retracted the row before it; the one after it stays');
sql(q{INSERT INTO one (id, name) VALUES (100, 'typed by hand')});
produce('one',
	event(3, 'c', 'null', row(3, 'C', 'c'), 4),
	event(undef, 't', 'null', 'null', 5),
	event(4, 'r', 'null', row(4, 'D', 'd'), 6),
	event(4, 'd', row(4, 'D', 'd'), 'null', 7),
	qq({"id": 4}\t),
	event(4, 'c', 'null', row(4, 'D2', 'd2'), 8),
	event(undef, 't', 'null', 'null', 9),
	event(5, 'c', 'null', row(5, 'E', 'e'), 10));
is(sql(q{SELECT source_writes.wait_for('one')}), '', 'two truncates in a batch');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM one}), '5E',
	"they retract a person's row, those of earlier batches and of their own");
no_negative('one');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'one'::regclass}), '0',
	'and no error kept');

# bad events: kept as errors that say why, the events after them taken
sql(q{CREATE FOREIGN TABLE bad (id int, name text) SERVER k
	OPTIONS (topic 'bad', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
my $ids = produce('bad',
	event(1, 'x', 'null', row(1, 'X', 'x'), 1),
	event(2, 'u', row(2, 'U', 'u'), 'null', 2),
	event(3, 'create', 'null', row(3, 'C', 'c'), 3),
	event(4, '', 'null', row(4, 'E', 'e'), 4));
my $no_op = q{{"type": "record", "name": "NoOp", "fields": [{"name": "after", "type": ["null", {"type": "record", "name": "V", "fields": [{"name": "id", "type": "int"}]}]}]}};
SwTest::produce_avro($broker, $registry, 'bad', schema => $no_op, subject => 'bad-noop',
	key_schema => $key_schema, key_schema_id => $ids->{key_schema_id}, records => [ qq({"id": 5}\t{"after": {"V": {"id": 5}}}) ]);
my $not_record = q{{"type": "string"}};
SwTest::produce_avro($broker, $registry, 'bad', schema => $not_record, subject => 'bad-string',
	key_schema => $key_schema, key_schema_id => $ids->{key_schema_id}, records => [ qq({"id": 6}\t"c") ]);
# a body cut short in its after image (no before, an after whose id is 1,
# then nothing): the op cannot be read as the event is added to the batch,
# and decoding it says why
my $vid = sprintf('%08x', $ids->{value_schema_id});
SwTest::produce_avro($broker, $registry, 'bad', schema_id => $ids->{value_schema_id}, raw_hex => 1,
	records => [ "00${vid}000202" ]);
produce('bad', event(7, 'c', 'null', row(7, 'G', 'g'), 7));
is(sql(q{SELECT source_writes.wait_for('bad')}), '', 'bad events');
is(sql(q{SELECT string_agg(id || name, ',') FROM bad}), '7G', 'the event after them is taken');
my $errors = sql(q{SELECT string_agg(error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'bad'::regclass});
my @errors = split /\n/, $errors;
is(scalar(@errors), 7, 'each bad event is kept') or diag($errors);
like($errors[0], qr/^Debezium change event has an unknown op "x"/, 'an unknown op');
like($errors[1], qr/^Debezium change event of op 'u' has no "after"/, 'a u without after');
like($errors[2], qr/^Debezium change event has an unknown op "create"/, 'an op of more than a letter');
like($errors[3], qr/^Debezium change event has an unknown op ""/, 'an empty op');
like($errors[4], qr/^Debezium change event has no "op"/, 'a record without op');
like($errors[5], qr/^the schema of id \d+ of the Debezium change event is not a record/,
	'a value that is not a record');
like($errors[6], qr/^invalid Avro data: the message value does not match its schema/,
	'a body cut short');

# retried after ALTER FOREIGN TABLE, in a session: a c whose email is too
# long, and the d of a key too big for the key column (read as a delete in
# the session too)
sql(q{CREATE FOREIGN TABLE retry (id int, name text, email varchar(5)) SERVER k
	OPTIONS (topic 'retry', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
my $big_key = qq{{"type": "record", "name": "Key", "namespace": "$topic",
	"fields": [{"name": "id", "type": "long"}]}};
(my $big_envelope = $envelope) =~ s/\{"name": "id", "type": "int"\}/{"name": "id", "type": "long"}/
  or die 'no id in the envelope';
SwTest::produce_avro($broker, $registry, 'retry', schema => $big_envelope, key_schema => $big_key,
	subject => 'retry-value', key_subject => 'retry-key',
	records => [ event(1, 'c', 'null', row(1, 'A', 'a@example.com'), 1),
		event(3000000000, 'c', 'null', row(3000000000, 'Big', 'b'), 2),
		event(2, 'c', 'null', row(2, 'B', 'b'), 3),
		event(3000000000, 'd', row(3000000000, 'Big', 'b'), 'null', 4) ]);
is(sql(q{SELECT source_writes.wait_for('retry')}), '', 'events to retry');
is(sql(q{SELECT string_agg(id || name, ',') FROM retry}), '2B', 'one is taken');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'retry'::regclass}), '3',
	'three are kept');
sql(q{ALTER FOREIGN TABLE retry ALTER email TYPE text, ALTER id TYPE bigint});
is(sql(q{SELECT source_writes.retry_errors('retry')}), '3', 'they are retried');
is(sql(q{SELECT string_agg(id || name || email, ',' ORDER BY id) FROM retry}),
	'1Aa@example.com,2Bb', 'the c is a row; the c and the d of the big key leave none');
no_negative('retry');

# a numeric without a scale, as Debezium writes it by default: a
# VariableScaleDecimal record of the scale and the unscaled value's bytes
# (two's complement, big-endian); as JSON in a jsonb column.  And an
# interval, as Debezium writes it by default: a MicroDuration
my $vsd_type = q{{"type": "record", "name": "VariableScaleDecimal", "namespace": "io.debezium.data",
	"fields": [{"name": "scale", "type": "int"}, {"name": "value", "type": "bytes"}],
	"connect.doc": "Variable scaled decimal", "connect.version": 1,
	"connect.name": "io.debezium.data.VariableScaleDecimal"}};
my $vsd_envelope = qq{{"type": "record", "name": "Envelope", "namespace": "vsd", "fields": [
	{"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
		{"name": "id", "type": "int"}, {"name": "amount", "type": ["null", $vsd_type], "default": null},
		{"name": "doc", "type": ["null", "io.debezium.data.VariableScaleDecimal"], "default": null},
		{"name": "took", "type": ["null", {"type": "long", "connect.version": 1,
			"connect.name": "io.debezium.time.MicroDuration"}], "default": null}]}],
		"default": null},
	{"name": "after", "type": ["null", "Value"], "default": null},
	{"name": "op", "type": "string"}]}};
sub vsd
{
	my ($n, $scale) = @_;
	my $hex = Math::BigInt->new($n)->as_hex;	# its magnitude, and a sign
	my $neg = $hex =~ s/^-//;
	$hex =~ s/^0x//;
	$hex = "0$hex" if length($hex) % 2;
	my $v = Math::BigInt->new($n);
	if ($neg)
	{
		# two's complement in as many bytes as the magnitude, one more if need be
		my $bytes = length($hex) / 2;
		$bytes++ if Math::BigInt->new("0x$hex") > Math::BigInt->new(2)->bpow(8 * $bytes - 1);
		$hex = (Math::BigInt->new(2)->bpow(8 * $bytes) + $v)->as_hex;
		$hex =~ s/^0x//;
		$hex = "0$hex" if length($hex) % 2;
	}
	elsif (hex(substr($hex, 0, 1)) >= 8)
	{
		$hex = "00$hex";
	}
	my $chars = join('', map { sprintf('\\u%04x', hex($_)) } ($hex =~ /../g));
	return qq({"io.debezium.data.VariableScaleDecimal": {"scale": $scale, "value": "$chars"}});
}
use Math::BigInt;
sql(q{CREATE FOREIGN TABLE vsd (id int, amount numeric, doc jsonb, took interval) SERVER k
	OPTIONS (topic 'vsd', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
SwTest::produce_avro($broker, $registry, 'vsd', schema => $vsd_envelope, key_schema => $key_schema,
	subject => 'vsd-value', key_subject => 'vsd-key',
	records => [ map { my ($id, $n, $s) = @$_;
		qq({"id": $id}\t{"before": null, "after": {"vsd.Value": {"id": $id, "amount": ) . vsd($n, $s)
		  . qq(, "doc": ) . ($id == 1 ? vsd($n, $s) : 'null')
		  . qq(, "took": ) . ($id == 1 ? '{"long": 3723000004}' : $id == 2 ? '{"long": -2629800000000}' : 'null')
		  . qq(}}, "op": "c"}) }
		[ 1, 12345, 3 ], [ 2, -5, 1 ], [ 3, 128, 0 ], [ 4, -128, 2 ],
		[ 5, '-123456789012345678901234567890', 5 ], [ 6, 0, 0 ] ]);
is(sql(q{SELECT source_writes.wait_for('vsd')}), '', 'numerics of variable scale');
is(sql(q{SELECT string_agg(id || ' ' || amount, ',' ORDER BY id) FROM vsd}),
	'1 12.345,2 -0.5,3 128,4 -1.28,5 -1234567890123456789012345.67890,6 0',
	"Debezium's VariableScaleDecimal is read as its number");
is(sql(q{SELECT doc->>'scale' FROM vsd WHERE id = 1}), '3', 'and as a record in a jsonb column');
is(sql(q{SELECT string_agg(took::text, ',' ORDER BY id) FROM vsd}), '01:02:03.000004,-730:30:00',
	"Debezium's MicroDuration is an interval of its microseconds (a month of 30.4375 days)");
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'vsd'::regclass}), '0',
	'with no error kept');

# events of the envelope above as a third-party library encodes them
# (avsc 5.7, JavaScript, with wrapped unions): an r of a snapshot's last
# row, its d with a transaction block, and a truncate; their bodies,
# framed here with the registry's schema id
my %avsc = (
	r => '00022802085a6fc3ab00020102010204ff8516322e352e302e46696e616c14706f737467726573716c1264627365727665723180a0abfef96200086c61737410706f737467726573022e5b223234303233313034222c223234303233313238225d0c7075626c696312637573746f6d65727302d80802c0c2f416000272020200',
	d => '022802085a6fc3ab00020102010204ff850016322e352e302e46696e616c14706f737467726573716c1264627365727665723180a0abfef96200086c61737410706f737467726573022e5b223234303233313034222c223234303233313238225d0c7075626c696312637573746f6d65727302d80802c0c2f416000264020402183535363a32343032333230300202',
	t => '000016322e352e302e46696e616c14706f737467726573716c1264627365727665723180a0abfef96200086c61737410706f737467726573022e5b223234303233313034222c223234303233313238225d0c7075626c696312637573746f6d65727302d80802c0c2f416000274020600');
sql(q{DROP FOREIGN TABLE vsd, retry});	# their workers, for this one
sql(q{CREATE FOREIGN TABLE avsc (id int, name text, email text, born date, seen timestamp,
	  balance numeric(10,2), src jsonb OPTIONS (source 'source'))
	SERVER k OPTIONS (topic 'avsc', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
my $avsc_ids = produce('avsc', event(1, 'c', 'null', row(1, 'Ann', 'ann@example.com'), 1));
my $frame = sprintf('00%08x', $avsc_ids->{value_schema_id});
sub avsc
{
	SwTest::produce_avro($broker, $registry, 'avsc', raw_hex => 1, key_schema => $key_schema,
		key_schema_id => $avsc_ids->{key_schema_id}, schema_id => $avsc_ids->{value_schema_id},
		records => [ @_ ]);
}
avsc(qq({"id": 20}\t$frame$avsc{r}));
is(sql(q{SELECT source_writes.wait_for('avsc')}), '', "a third party's events");
is(sql(q{SELECT id, name, email IS NULL, born, seen, balance, src->>'snapshot', src->>'sequence'
	FROM avsc WHERE id = 20}),
	qq(20|Zo\xc3\xab|t|1969-12-31|1969-12-31 23:59:59.999999|-1.23|last|["24023104","24023128"]),
	'an r: its row, with values before the epoch and a negative decimal');
avsc(qq({"id": 20}\t$frame$avsc{d}));
is(sql(q{SELECT source_writes.wait_for('avsc')}), '', 'its d');
is(sql(q{SELECT string_agg(id::text, ',') FROM avsc}), '1', 'deletes the row');
avsc(qq({"id": 20}\t$frame$avsc{r}), qq(\t$frame$avsc{t}));
is(sql(q{SELECT source_writes.wait_for('avsc')}), '', 'the r again, and a truncate');
is(sql(q{SELECT count(*) FROM avsc}), '0', 'the truncate retracts every row');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'avsc'::regclass}), '0',
	'and no error kept');
no_negative('avsc');

# what the options allow
my ($rc, $out, $err) = $node->psql('postgres', q{CREATE FOREIGN TABLE t (id int) SERVER k
	OPTIONS (topic 'x', format 'csv', envelope 'debezium', key 'id')});
like($err, qr/envelope 'debezium' takes format 'json' or 'avro'/,
	'envelope debezium takes json or avro');

done_testing();
