# Kafka sources of format avro under attack: hostile message bodies and
# schemas, each kept as an error that says why (never a crashed or stuck
# worker), values at the edges of PostgreSQL's types, a registry that
# stalls, redirects or speaks TLS, and a worker killed while it holds
# messages for a schema.
use strict;
use warnings;

use IO::Socket::INET;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'body:1', 'edge:1', 'reg:1', 'tls:1', 'crash:1' ]);
my $registry = SwTest::registry();
my $node = SwTest::node('avro_attacks', conf => "max_worker_processes = 24\nrestart_after_crash = on\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

# Avro's binary encoding
sub varint
{
	my ($v) = @_;
	my $o = '';
	while ($v >= 0x80)
	{
		$o .= chr(($v & 0x7f) | 0x80);
		$v >>= 7;
	}
	return $o . chr($v);
}
sub zz { my ($n) = @_; return varint($n >= 0 ? 2 * $n : 2 * (-($n + 1)) + 1); }
sub hexof { return unpack('H*', $_[0]); }
sub framed { return '00' . sprintf('%08x', $_[0]) . hexof($_[1]); }

# register a schema under a subject of its own; its id
my $subjects = 0;
sub schema_id
{
	my ($schema) = @_;
	$subjects++;
	return SwTest::registry_register($registry, "s$subjects-value", $schema);
}

sub raw
{
	my ($topic, @hex) = @_;
	SwTest::produce_avro($broker, undef, $topic, raw_hex => 1, records => \@hex);
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$registry->{url}')});

#
# 1. hostile bodies: each kept as an error that says why
#
my $s_str = schema_id(q{{"type": "record", "name": "s", "fields": [{"name": "id", "type": "string"}]}});
my $s_bytes = schema_id(q{{"type": "record", "name": "b", "fields": [{"name": "id", "type": "bytes"}]}});
my $s_union = schema_id(q{{"type": "record", "name": "u", "fields": [{"name": "id", "type": ["null", "string"]}]}});
my $s_array = schema_id(q{{"type": "record", "name": "a", "fields": [{"name": "id", "type": {"type": "array", "items": "int"}}]}});
my $s_map = schema_id(q{{"type": "record", "name": "m", "fields": [{"name": "id", "type": {"type": "map", "values": "null"}}]}});
my $s_mapi = schema_id(q{{"type": "record", "name": "mi", "fields": [{"name": "id", "type": {"type": "map", "values": "int"}}]}});
my $s_enum = schema_id(q{{"type": "record", "name": "en", "fields": [{"name": "id", "type": {"type": "enum", "name": "e", "symbols": ["A", "B"]}}]}});
my @bodies = (
	[ 'a truncated string', framed($s_str, zz(5) . 'ab') ],
	[ 'a negative string length', framed($s_str, zz(-1)) ],
	[ 'a huge string length', framed($s_str, varint(2**62) . 'ab') ],
	[ 'a string length of 1 GB', framed($s_str, zz(2**30) . 'ab') ],
	[ 'a huge bytes length', framed($s_bytes, varint(2**62) . 'ab') ],
	[ 'a negative bytes length', framed($s_bytes, zz(-5) . 'ab') ],
	[ 'a union index out of range', framed($s_union, zz(2) . zz(1) . 'a') ],
	[ 'a negative union index', framed($s_union, zz(-1)) ],
	[ 'a huge array block count', framed($s_array, zz(2**40) . zz(1) x 100) ],
	[ 'an array block of the most negative count', framed($s_array, varint(2**63 + 1) . zz(1) x 10) ],
	[ 'a huge map block count', framed($s_map, zz(2**40) . (zz(1) . 'x') x 100) ],
	[ 'invalid UTF-8 in a string', framed($s_str, zz(2) . "\xff\xfe") ],
	[ 'a NUL in a string', framed($s_str, zz(3) . "a\0b") ],
	[ 'an enum index out of range', framed($s_enum, zz(7)) ],
	[ 'a negative enum index', framed($s_enum, zz(-1)) ],
);
raw('body', map { $_->[1] } @bodies);
sql(q{CREATE FOREIGN TABLE body (id text) SERVER k OPTIONS (topic 'body', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('body')}), '', 'hostile bodies: the worker goes on');
my %errors = map { split /\|/, $_, 2 } split /\n/,
  sql(q{SELECT "offset", error FROM source_writes.errors WHERE source = 'body'::regclass});
for my $i (0 .. $#bodies)
{
	ok(defined $errors{$i}, "$bodies[$i][0]: kept as an error") or next;
	note("$bodies[$i][0]: $errors{$i}");
}
is(sql(q{SELECT count(*) FROM body}), '0', 'and none is a row');

# map keys are strings too
raw('body', framed($s_mapi, zz(1) . zz(2) . "\xff\xfe" . zz(1) . zz(0)));
sql(q{CREATE FOREIGN TABLE body_map (id jsonb) SERVER k OPTIONS (topic 'body', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('body_map')}), '', 'a map key of invalid UTF-8');
is(sql(q{SELECT count(*) FROM body_map}), '0', 'is no row');
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'body_map'::regclass AND "offset" = } . scalar(@bodies)),
	qr/^invalid byte sequence for encoding "UTF8": 0xff \(column "id" of source table "body_map", field "id"/,
	'but an error, as in a value');

done_testing();
