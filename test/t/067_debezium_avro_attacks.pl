# envelope 'debezium' with format 'avro' under hostile events: bodies cut
# short after their op (a truncate or a delete that does not match its
# schema is neither, but an error kept), an op claimed 2 GB long, a before
# image nested too deep, ops that are records or enums, unknown schema
# ids; and kill -9 of the worker in the middle of a batch with a truncate.
# Nothing crashes the worker or stops the topic, nothing is lost or
# doubled, and no row's multiplicity goes below 0.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'cut:1', 'deep:1', 'odd:1', 'kill:1' ]);
my $registry = SwTest::registry();
my $node = SwTest::node('debezium_avro_attacks', conf => "restart_after_crash = on\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

my $key_schema = q{{"type": "record", "name": "Key", "fields": [{"name": "id", "type": "int"}]}};
my $source_schema = q{{"type": "record", "name": "Source", "namespace": "io.debezium.connector.postgresql",
	"fields": [{"name": "version", "type": "string"}, {"name": "name", "type": "string"},
	{"name": "ts_ms", "type": "long"},
	{"name": "snapshot", "type": [{"type": "string", "connect.name": "io.debezium.data.Enum"}, "null"],
		"default": "false"}]}};
my $envelope = qq{{"type": "record", "name": "Envelope", "fields": [
	{"name": "before", "type": ["null", {"type": "record", "name": "Value", "fields": [
		{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"], "default": null}]}],
		"default": null},
	{"name": "after", "type": ["null", "Value"], "default": null},
	{"name": "source", "type": $source_schema},
	{"name": "op", "type": "string"},
	{"name": "ts_ms", "type": ["null", "long"], "default": null},
	{"name": "transaction", "type": ["null", {"type": "record", "name": "block",
		"fields": [{"name": "id", "type": "string"}]}], "default": null}]}};
my $source = '{"version": "2.5.0.Final", "name": "dbserver1", "ts_ms": 1700000000000, "snapshot": {"string": "false"}}';

sub event
{
	my ($id, $op, $after, $ts) = @_;
	my $key = defined $id ? qq({"id": $id}) : '';
	$after = defined $after ? qq({"Value": {"id": $id, "name": {"string": "$after"}}}) : 'null';
	return qq($key\t{"before": null, "after": $after, "source": $source, "op": "$op", "ts_ms": {"long": $ts}, "transaction": null});
}

# Avro's binary encoding, for bodies produced as they are
sub zz
{
	my ($n) = @_;
	my $u = $n >= 0 ? 2 * $n : -2 * $n - 1;
	my $s = '';
	do
	{
		my $b = $u & 0x7f;
		$u >>= 7;
		$s .= chr($u ? $b | 0x80 : $b);
	} while ($u);
	return $s;
}
sub str { return zz(length $_[0]) . $_[0]; }
my $source_bin = str('2.5.0.Final') . str('dbserver1') . zz(1700000000000) . "\x00" . str('false');

# the whole message value in hex: schema id, before (null), after, source,
# op, ts_ms and transaction (null); $cut bytes cut off its end
sub raw
{
	my ($id, $op, $after, $ts, $cut) = @_;
	my $body = "\x00" . (defined $after ? "\x02" . zz($after) . "\x00" : "\x00")
	  . $source_bin . str($op) . "\x02" . zz($ts) . "\x00";
	$body = substr($body, 0, length($body) - $cut) if $cut;
	return unpack('H*', "\x00" . pack('N', $id) . $body);
}

sub no_negative
{
	my ($table) = @_;
	is(sql(qq{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::$table)
		GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0',
		"the log of $table holds no negative or doubled multiplicity");
}

sub errors
{
	my ($table) = @_;
	return split /\n/, sql(qq{SELECT string_agg(error, E'\\n' ORDER BY "offset") FROM source_writes.errors
		WHERE source = '$table'::regclass});
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$registry->{url}')});
for my $t ('cut', 'deep', 'odd', 'kill')
{
	sql(qq{CREATE FOREIGN TABLE $t (id int, name text) SERVER k
		OPTIONS (topic '$t', format 'avro', key_format 'avro', envelope 'debezium', key 'id')});
}

# events whose body ends after their op: a truncate cut in its ts_ms, a
# delete cut there too, a create whose op claims 2 GB; and an event of a
# schema id the registry does not know, a truncate
my $ids = SwTest::produce_avro($broker, $registry, 'cut', schema => $envelope,
	key_schema => $key_schema, subject => 'cut-value', key_subject => 'cut-key',
	records => [ event(1, 'c', 'A', 1), event(2, 'c', 'B', 2) ]);
my ($vid, $kid) = ($ids->{value_schema_id}, $ids->{key_schema_id});
ok(length(raw($vid, 't', undef, 5)) > 0, 'raw events');
my $huge_op = unpack('H*', "\x00" . pack('N', $vid) . "\x00\x00" . $source_bin . zz(2**31) . 'c');
SwTest::produce_avro($broker, $registry, 'cut', schema_id => $vid, raw_hex => 1,
	key_schema => $key_schema, key_schema_id => $kid,
	records => [ "\t" . raw($vid, 't', undef, 3, 2),
		qq({"id": 1}\t) . raw($vid, 'd', undef, 4, 2),
		qq({"id": 2}\t) . $huge_op,
		"\t" . raw(999999, 't', undef, 5) ]);
SwTest::produce_avro($broker, $registry, 'cut', schema => $envelope, key_schema => $key_schema,
	schema_id => $vid, key_schema_id => $kid, records => [ event(3, 'c', 'C', 6) ]);
is(sql(q{SELECT source_writes.wait_for('cut')}), '', 'events cut short');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM cut}), '1A,2B,3C',
	'a truncate or a delete whose body does not match its schema retracts nothing');
my @errors = errors('cut');
is(scalar(@errors), 4, 'the four are kept as errors') or diag(join("\n", @errors));
like($errors[0], qr/^invalid Avro data: .*it ends within a number/, 'the truncate cut short');
like($errors[1], qr/^invalid Avro data: .*it ends within a number/, 'the delete cut short');
like($errors[2], qr/^invalid Avro data: .*a string is longer than the rest of the message/,
	'the op of 2 GB');
like($errors[3], qr/schema of id 999999/, 'the truncate of an unknown schema');
no_negative('cut');

# a truncate whose before image nests without end (a schema that names
# itself, which cannot be used): kept as an error; the event after it is
# taken
my $deep = q{{"type": "record", "name": "Envelope", "fields": [
	{"name": "before", "type": ["null", {"type": "record", "name": "N", "fields": [
		{"name": "next", "type": ["null", "N"]}]}]},
	{"name": "after", "type": ["null", {"type": "record", "name": "Value", "fields": [
		{"name": "id", "type": "int"}, {"name": "name", "type": ["null", "string"]}]}]},
	{"name": "op", "type": "string"}]}};
my $deep_ids = SwTest::produce_avro($broker, $registry, 'deep', schema => $envelope,
	key_schema => $key_schema, subject => 'deep-value', key_subject => 'deep-key',
	records => [ event(1, 'c', 'A', 1) ]);
SwTest::produce_avro($broker, $registry, 'deep', schema => $deep, subject => 'deep-rec',
	key_schema => $key_schema, key_schema_id => $deep_ids->{key_schema_id},
	records => [ qq(\t{"before": {"N": {"next": {"N": {"next": null}}}}, "after": null, "op": "t"}) ]);
SwTest::produce_avro($broker, $registry, 'deep', schema => $envelope, key_schema => $key_schema,
	schema_id => $deep_ids->{value_schema_id}, key_schema_id => $deep_ids->{key_schema_id},
	records => [ event(2, 'c', 'B', 2) ]);
is(sql(q{SELECT source_writes.wait_for('deep')}), '', 'a truncate nested without end');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM deep}), '1A,2B',
	'it retracts nothing; the event after it is taken');
@errors = errors('deep');
is(scalar(@errors), 1, 'it is kept as an error') or diag(join("\n", @errors));
like($errors[0], qr/^the schema of id \d+ in the schema registry cannot be used: it is recursive/,
	'the truncate is one');
no_negative('deep');

# ops that are a record, an enum, a union of null and string (null)
my @odd = (
	[ q{{"type": "record", "name": "O", "fields": [{"name": "v", "type": "string"}]}}, '{"v": "t"}' ],
	[ q{{"type": "enum", "name": "E", "symbols": ["c", "t"]}}, '"t"' ],
	[ q{["null", "string"]}, 'null' ]);
my $n = 0;
for my $o (@odd)
{
	$n++;
	my $schema = qq{{"type": "record", "name": "Env$n", "fields": [
		{"name": "after", "type": ["null", {"type": "record", "name": "V$n", "fields": [{"name": "id", "type": "int"}]}]},
		{"name": "op", "type": $o->[0]}]}};
	SwTest::produce_avro($broker, $registry, 'odd', schema => $schema, subject => "odd-$n",
		key_schema => $key_schema, key_subject => 'odd-key',
		records => [ qq({"id": $n}\t{"after": {"V$n": {"id": $n}}, "op": $o->[1]}) ]);
}
SwTest::produce_avro($broker, $registry, 'odd', schema => $envelope, key_schema => $key_schema,
	subject => 'odd-value', key_subject => 'odd-key', records => [ event(9, 'c', 'Z', 9) ]);
is(sql(q{SELECT source_writes.wait_for('odd')}), '', 'odd ops');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM odd}), '9Z', 'none is taken but the c');
@errors = errors('odd');
is(scalar(@errors), 3, 'they are kept as errors') or diag(join("\n", @errors));
like($errors[0], qr/^Debezium change event has an unknown op \{"v": "t"\}/, 'an op that is a record');
like($errors[1], qr/^Debezium change event has an unknown op "t"/, 'an op that is an enum');
like($errors[2], qr/^Debezium change event has no "op"/, 'a null op');

# kill -9 of the worker while it waits in the middle of a batch with a
# truncate: after the restart, nothing of it is lost or doubled
my $kill_ids = SwTest::produce_avro($broker, $registry, 'kill', schema => $envelope,
	key_schema => $key_schema, subject => 'kill-value', key_subject => 'kill-key',
	records => [ event(1, 'c', 'A', 1) ]);
is(sql(q{SELECT source_writes.wait_for('kill')}), '', 'a first event');
my $session = $node->background_psql('postgres');
$session->query_safe(q{BEGIN; INSERT INTO kill (id, name) VALUES (200, 'open')});
SwTest::produce_avro($broker, $registry, 'kill', schema => $envelope, key_schema => $key_schema,
	schema_id => $kill_ids->{value_schema_id}, key_schema_id => $kill_ids->{key_schema_id},
	records => [ event(10, 'c', 'J', 2), event(undef, 't', undef, 3), event(11, 'c', 'K', 4) ]);
ok($node->poll_query_until('postgres', q{SELECT count(*) > 0 FROM pg_locks
	WHERE relation = 'kill'::regclass AND mode = 'ExclusiveLock' AND NOT granted}),
	'the worker waits for the open edit at the truncate');
my $worker = sql(q{SELECT pid FROM pg_locks
	WHERE relation = 'kill'::regclass AND mode = 'ExclusiveLock' AND NOT granted});
my $from = -s $node->logfile;
kill 'KILL', $worker;
SwTest::wait_for_restart($node, $from);
$session->{run}->kill_kill if $session->{run};
is(sql(q{SELECT source_writes.wait_for('kill')}), '', 'the events are taken after the restart');
is(sql(q{SELECT string_agg(id || name, ',' ORDER BY id) FROM kill}), '11K',
	'once: the row after the truncate, and nothing else');
no_negative('kill');
is(sql(q{SELECT count(*) FROM source_writes.errors}), '8', 'no other error kept');

done_testing();
