# The tools of the Avro tests, on their own: the schema registry
# (test/schema_registry) answers Confluent's REST paths, asks for its
# credentials, serves TLS, and fails as its control paths say; the producer
# (test/avro_producer) writes the Confluent wire format, with bodies that
# are compared with bytes computed here from Avro's specification.
use strict;
use warnings;

use File::Spec;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;

my $registry = SwTest::registry(user => 'reg', password => 'secret');
like($registry->{url}, qr{^http://127\.0\.0\.1:\d+$}, 'registry listens on loopback');
my %auth = (user => 'reg', password => 'secret');

sub http { return SwTest::registry_http($registry, @_, %auth); }

# register, then read back by id and by subject and version
my $simple = '{"type": "record", "name": "simple", "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string"}]}';
my $other = '{"type": "enum", "name": "e", "symbols": ["X", "Y"]}';
sub body { return encode_json({ schema => $_[0] }); }

my ($status, $body) = http('POST', '/subjects/simple-value/versions', body => body($simple));
is("$status $body", '200 {"id":1}', 'a first schema gets id 1');
($status, $body) = http('POST', '/subjects/simple-value/versions', body => body($simple));
is("$status $body", '200 {"id":1}', 'the same schema again keeps its id');
($status, $body) = http('POST', '/subjects/simple-value/versions',
	body => encode_json({ schema => $other, schemaType => 'AVRO' }), content_type => 'application/json');
is("$status $body", '200 {"id":2}', 'another schema gets id 2, with schemaType and application/json');
($status, $body) = http('POST', '/subjects/copy-value/versions', body => body($simple));
is("$status $body", '200 {"id":1}', 'the same schema under another subject keeps its id');

($status, $body) = http('GET', '/schemas/ids/1');
is($status, '200', 'GET /schemas/ids/1 answers 200');
is_deeply(decode_json(decode_json($body)->{schema}), decode_json($simple), 'and gives the schema back');
($status, $body) = http('GET', '/schemas/ids/3');
is("$status $body", '404 {"error_code":40403,"message":"Schema not found"}', 'an unknown id is 40403');
($status, $body) = http('GET', '/subjects');
is_deeply(decode_json($body), [ 'simple-value', 'copy-value' ], 'GET /subjects lists the subjects');
($status, $body) = http('GET', '/subjects/simple-value/versions');
is($body, '[1,2]', 'GET /subjects/s/versions lists the versions');
($status, $body) = http('GET', '/subjects/simple-value/versions/1');
my $version = decode_json($body);
is_deeply([ @$version{qw(subject version id)} ], [ 'simple-value', 1, 1 ], 'version 1 of a subject');
is_deeply(decode_json($version->{schema}), decode_json($simple), 'with its schema');
($status, $body) = http('GET', '/subjects/simple-value/versions/latest');
is_deeply([ @{ decode_json($body) }{qw(version id)} ], [ 2, 2 ], 'latest is the last version');
($status, $body) = http('GET', '/subjects/copy-value/versions/2');
like("$status $body", qr/^404 .*40402/, 'a missing version is 40402');
($status, $body) = http('GET', '/subjects/nobody/versions');
like("$status $body", qr/^404 .*40401/, 'a missing subject is 40401');
($status, $body) = http('POST', '/subjects/simple-value/versions', body => '{"schema": "{not json"}');
like("$status $body", qr/^422 .*42201/, 'a schema that is not JSON is 42201');
($status, $body) = http('POST', '/subjects/simple-value/versions', body => body($simple),
	content_type => 'text/plain');
is($status, '415', 'a body of another type is refused');

# basic auth on every path but the control paths
my ($out, $err);
IPC::Run::run([ 'curl', '-s', '-i', "$registry->{url}/schemas/ids/1" ], '>', \$out, '2>', \$err);
like($out, qr{^HTTP/1\.1 401}, 'no credentials: 401');
like($out, qr{^WWW-Authenticate: Basic realm=}mi, 'with WWW-Authenticate');
($status) = SwTest::registry_http($registry, 'GET', '/subjects', user => 'reg', password => 'wrong');
is($status, '401', 'a wrong password: 401');
($status) = SwTest::registry_http($registry, 'GET', '/subjects', token => 'secret');
is($status, '401', 'a bearer token where basic auth is asked: 401');
is(SwTest::registry_stats($registry)->{mode}, 'ok', 'the control paths need no credentials');

# the counters: every request, by kind and by path
SwTest::registry_control($registry, 'reset');
http('GET', '/schemas/ids/1') for 1 .. 3;
http('GET', '/schemas/ids/2');
http('GET', '/subjects');
my $stats = SwTest::registry_stats($registry);
is($stats->{schema_ids}, 4, 'stats count the schema fetches');
is($stats->{paths}{'GET /schemas/ids/1'}, 3, 'and each path');
is($stats->{subjects}, 1, 'and the other kinds');
is($stats->{requests}, 5, 'and every request');

# the faults
SwTest::registry_control($registry, 'fail');
($status, $body) = http('GET', '/schemas/ids/1');
like("$status $body", qr/^500 .*"error_code":50001/, 'fail: 500');
SwTest::registry_control($registry, 'notfound');
($status, $body) = http('GET', '/schemas/ids/1');
like("$status $body", qr/^404 .*40403/, 'notfound: a known id is 404');
($status) = http('GET', '/subjects');
is($status, '200', 'notfound: other paths answer');
SwTest::registry_control($registry, 'unauthorized');
($status) = http('GET', '/schemas/ids/1');
is($status, '401', 'unauthorized: 401 with the right credentials');
SwTest::registry_control($registry, 'garbage');
($status, $body) = http('GET', '/schemas/ids/1');
is($status, '200', 'garbage: 200');
ok(!eval { decode_json($body); 1 }, 'garbage: the body is not JSON');
SwTest::registry_control($registry, 'huge');
($status, $body) = http('GET', '/schemas/ids/1');
ok($status eq '200' && length($body) >= 20 * 1024 * 1024, 'huge: 20 MB');
# (JSON::PP takes seconds for 20 MB: take the doc out before decoding)
my $mark = ',\\"doc\\":\\"';
my $at = index($body, $mark);
my $size = 20 * 1024 * 1024;
ok($at > 0 && substr($body, $at + length($mark), $size + 2) eq ('x' x $size) . '\\"',
	'huge: a doc of 20 MB');
substr($body, $at, length($mark) + $size + 2) = '' if $at > 0;
is_deeply(decode_json(decode_json($body)->{schema}), decode_json($simple), 'huge: in the id\'s schema');
SwTest::registry_control($registry, 'down');
($status) = http('GET', '/schemas/ids/1');
is($status, '000', 'down: no answer');
SwTest::registry_control($registry, 'stall', ms => 500);
my $start = time();
($status) = http('GET', '/schemas/ids/1');
my $took = time() - $start;
ok($status eq '200' && $took >= 0.5, "stall: answers after 500 ms ($took s)");

# a stalled request goes on when the mode changes
SwTest::registry_control($registry, 'stall', ms => 60000);
$start = time();
my ($slow_out, $slow_err) = ('', '');
my $slow = IPC::Run::start(
	[ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-u', 'reg:secret', "$registry->{url}/subjects" ],
	'>', \$slow_out, '2>', \$slow_err);
Time::HiRes::sleep(0.5);
SwTest::registry_control($registry, 'ok');
$slow->finish;
$took = time() - $start;
ok($slow_out eq '200' && $took < 30, "a stalled request answers once the mode is ok ($took s)");
($status) = http('GET', '/schemas/ids/1');
is($status, '200', 'ok: answers again');
is(SwTest::registry_stats($registry)->{schemas}, 2, 'the faults changed no schema');

# bearer tokens
my $bearer = SwTest::registry(token => 't0ken');
($status) = SwTest::registry_http($bearer, 'GET', '/subjects');
is($status, '401', 'token: none is 401');
($status) = SwTest::registry_http($bearer, 'GET', '/subjects', token => 'wrong');
is($status, '401', 'token: a wrong one is 401');
($status, $body) = SwTest::registry_http($bearer, 'GET', '/subjects', token => 't0ken');
is("$status $body", '200 []', 'token: the right one answers');

# TLS, with a self-signed certificate for 127.0.0.1
my $dir = PostgreSQL::Test::Utils::tempdir();
system_or_bail('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
	'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj',
	'/CN=source_writes test registry', '-addext', 'subjectAltName=IP:127.0.0.1',
	'-keyout', "$dir/registry.key", '-out', "$dir/registry.crt");
my $tls = SwTest::registry(cert => "$dir/registry.crt", key => "$dir/registry.key");
like($tls->{url}, qr{^https://127\.0\.0\.1:\d+$}, 'TLS: an https URL');
($status, $body) = SwTest::registry_http($tls, 'GET', '/subjects');
is("$status $body", '200 []', 'TLS: answers with its certificate');
(my $plain = $tls->{url}) =~ s/^https/http/;
($status) = SwTest::registry_http({ url => $plain }, 'GET', '/subjects');
isnt($status, '200', 'TLS: no plain HTTP');

# ---- the producer

my $broker = SwTest::broker(topics => [ 'simple:1', 'typed:1', 'keyed:1', 'raw:1' ]);

# Avro's binary encoding, from the specification: zigzag varints for int
# and long, length-prefixed bytes and strings, little-endian IEEE floats
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
sub str { return zz(length($_[0])) . $_[0]; }
sub framed { return "\x00" . pack('N', $_[0]) . $_[1]; }

# the messages of a topic, as [key, value], undef for none: kcat gives
# each key's length in text and each value's as 4 bytes
sub consume
{
	my ($topic, $count) = @_;
	my ($raw, $kerr) = ('', '');
	IPC::Run::run(
		[ 'kcat', '-C', '-b', $broker->{bootstrap}, '-t', $topic, '-o', 'beginning',
			'-e', '-q', '-c', $count, '-f', '%K:%k%R%s' ],
		'>', \$raw, '2>', \$kerr);
	my @messages;
	my $pos = 0;
	while ($pos < length($raw))
	{
		$raw =~ /\G(-?\d+):/gc or die "cannot parse kcat's output at $pos";
		my $klen = $1;
		$pos = pos($raw);
		my $key = $klen < 0 ? undef : substr($raw, $pos, $klen);
		$pos += $klen if $klen > 0;
		my $vlen = unpack('l>', substr($raw, $pos, 4));
		$pos += 4;
		my $value = $vlen < 0 ? undef : substr($raw, $pos, $vlen);
		$pos += $vlen if $vlen > 0;
		pos($raw) = $pos;
		push @messages, [ $key, $value ];
	}
	return @messages;
}

SwTest::registry_control($registry, 'reset');
my $ids = SwTest::produce_avro($broker, $registry, 'simple', %auth,
	schema => $simple, records => ['{"a": 1, "b": "x"}']);
is($ids->{value_schema_id}, 1, 'the producer registers its schema (a known one keeps its id)');
is($ids->{produced}, 1, 'and says how many it produced');
is(SwTest::registry_stats($registry)->{paths}{'POST /subjects/simple-value/versions'}, 1,
	'under the subject TOPIC-value');
my @got = consume('simple', 1);
is(unpack('H*', $got[0][1]), '00' . '00000001' . '02' . '0278', '{"a": 1, "b": "x"} is 00, the id, 02, 02 78');

# every type, nested and logical ones too
my $typed = <<'SCHEMA';
{"type": "record", "name": "Order", "namespace": "shop", "fields": [
  {"name": "i", "type": "int"},
  {"name": "l", "type": "long"},
  {"name": "s", "type": "string"},
  {"name": "ns", "type": ["null", "string"]},
  {"name": "e", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
  {"name": "by", "type": "bytes"},
  {"name": "d", "type": "double"},
  {"name": "f", "type": "float"},
  {"name": "ok", "type": "boolean"},
  {"name": "fx", "type": {"type": "fixed", "name": "Two", "size": 2}},
  {"name": "nested", "type": {"type": "record", "name": "Inner", "fields": [
    {"name": "x", "type": "int"}, {"name": "y", "type": ["null", "Inner"]}]}},
  {"name": "arr", "type": {"type": "array", "items": "int"}},
  {"name": "m", "type": {"type": "map", "values": "string"}},
  {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
  {"name": "day", "type": {"type": "int", "logicalType": "date"}},
  {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
  {"name": "id", "type": {"type": "string", "logicalType": "uuid"}}]}
SCHEMA
my @records = (
	'{"i": 1, "l": 10000000000, "s": "one", "ns": {"string": "yes"}, "e": "GREEN", "by": "\u0000\u00ff", "d": 1.5, "f": 0.5, "ok": true, "fx": "ab", "nested": {"x": 7, "y": {"shop.Inner": {"x": 8, "y": null}}}, "arr": [1, 2, 3], "m": {"k": "v"}, "ts": 1700000000000, "day": 19000, "dec": "\u0030\u0039", "id": "123e4567-e89b-12d3-a456-426614174000"}',
	'{"i": -1, "l": -1, "s": "", "ns": null, "e": "RED", "by": "", "d": -2.25, "f": -0.25, "ok": false, "fx": "\u0001\u0002", "nested": {"x": 0, "y": null}, "arr": [], "m": {}, "ts": 0, "day": 0, "dec": "\u00ff", "id": "00000000-0000-0000-0000-000000000000"}',
	'{"i": 2147483647, "l": -9223372036854775808, "s": "Grüße", "ns": {"string": "ü"}, "e": "BLUE", "by": "abc", "d": 1e300, "f": 3, "ok": true, "fx": "zz", "nested": {"x": -64, "y": null}, "arr": [-1, 64], "m": {"a": "b"}, "ts": -1, "day": -719162, "dec": "\u0001\u0086\u00a0", "id": "ffffffff-ffff-ffff-ffff-ffffffffffff"}'
);
$ids = SwTest::produce_avro($broker, $registry, 'typed', %auth, schema => $typed, records => \@records);
is($ids->{value_schema_id}, 3, 'a new schema gets the next id');
# the same, field by field: an array or a map is a block count, its items,
# then 0; a union is its branch's index, then the value
my $id = $ids->{value_schema_id};
my @expected = (
	framed($id, zz(1) . zz(10000000000) . str('one') . zz(1) . str('yes') . zz(1)
		  . str("\x00\xff") . pack('d<', 1.5) . pack('f<', 0.5) . "\x01" . 'ab'
		  . zz(7) . zz(1) . zz(8) . zz(0) . zz(3) . zz(1) . zz(2) . zz(3) . zz(0)
		  . zz(1) . str('k') . str('v') . zz(0) . zz(1700000000000) . zz(19000)
		  . str("\x30\x39") . str('123e4567-e89b-12d3-a456-426614174000')),
	framed($id, zz(-1) . zz(-1) . str('') . zz(0) . zz(0) . str('')
		  . pack('d<', -2.25) . pack('f<', -0.25) . "\x00" . "\x01\x02"
		  . zz(0) . zz(0) . zz(0) . zz(0) . zz(0) . zz(0)
		  . str("\xff") . str('00000000-0000-0000-0000-000000000000')),
	framed($id, zz(2147483647) . zz(-9223372036854775808) . str('Grüße') . zz(1) . str('ü')
		  . zz(2) . str('abc') . pack('d<', 1e300) . pack('f<', 3) . "\x01" . 'zz'
		  . zz(-64) . zz(0) . zz(2) . zz(-1) . zz(64) . zz(0) . zz(1) . str('a') . str('b')
		  . zz(0) . zz(-1) . zz(-719162) . str("\x01\x86\xa0")
		  . str('ffffffff-ffff-ffff-ffff-ffffffffffff')));
@got = consume('typed', 3);
is(scalar(@got), 3, 'three typed records');
for my $n (0 .. 2)
{
	is(unpack('H*', $got[$n][1]), unpack('H*', $expected[$n]),
		'record ' . ($n + 1) . ' is as the specification encodes it');
}

# keys with their own schema, tombstones, messages without a key
$ids = SwTest::produce_avro($broker, $registry, 'keyed', %auth, schema => $simple,
	key_schema => '{"type": "record", "name": "k", "fields": [{"name": "id", "type": "long"}]}',
	records => [ "{\"id\": 5}\t{\"a\": 2, \"b\": \"y\"}", "{\"id\": 6}\t", "\t{\"a\": -3, \"b\": \"\"}" ]);
my $kid = $ids->{key_schema_id};
is($kid, 4, 'the key schema is registered');
($status, $body) = http('GET', '/subjects/keyed-key/versions/latest');
is(decode_json($body)->{id}, $kid, 'under the subject TOPIC-key');
@got = consume('keyed', 3);
is_deeply(
	[ map { [ map { defined $_ ? unpack('H*', $_) : undef } @$_ ] } @got ],
	[
		[ unpack('H*', framed($kid, zz(5))), unpack('H*', framed(1, zz(2) . str('y'))) ],
		[ unpack('H*', framed($kid, zz(6))), undef ],
		[ undef, unpack('H*', framed(1, zz(-3) . str(''))) ],
	],
	'keys, a tombstone and a message without a key');

# bad messages: raw hex as is, a given id, raw keys
SwTest::registry_control($registry, 'reset');
SwTest::produce_avro($broker, undef, 'raw', raw_hex => 1, raw_key => 1,
	records => [ "k1\t01 00000001 0202 78", "k2\t0000", "k3\t" ]);
SwTest::produce_avro($broker, undef, 'raw', schema => $simple, schema_id => 77,
	records => ['{"a": 1, "b": "x"}']);
@got = consume('raw', 4);
is_deeply([ map { [ $_->[0], defined $_->[1] ? unpack('H*', $_->[1]) : undef ] } @got ],
	[ [ 'k1', '01000000010202' . '78' ], [ 'k2', '0000' ], [ 'k3', undef ], [ undef, '000000004d' . '020278' ] ],
	'raw hex goes as it is, and --schema-id frames with the id given');
is(SwTest::registry_stats($registry)->{requests}, 0, 'neither asked the registry');

# errors: the producer says what is wrong and exits non-zero
my $bin = File::Spec->rel2abs('test/avro_producer');
my $schema_file = "$dir/simple.avsc";
open(my $fh, '>', $schema_file) or die;
print $fh $simple;
close $fh;
sub fails
{
	my ($input, $pattern, $name, @args) = @_;
	my ($o, $e) = ('', '');
	my $ok = IPC::Run::run([ $bin, '--brokers', $broker->{bootstrap}, '--topic', 'simple',
		'--schema', $schema_file, @args ], '<', \$input, '>', \$o, '2>', \$e);
	ok(!$ok && $e =~ $pattern, $name) or diag("stderr: $e");
}
fails("{\"a\": \"1\", \"b\": \"x\"}\n", qr/line 1: value\.a: expected an int/, 'a value of another type',
	'--schema-id', 1);
fails("{\"a\": 1}\n", qr/value\.b: missing field/, 'a missing field', '--schema-id', 1);
fails("{\"a\": 1, \"b\": \"x\", \"c\": 1}\n", qr/no field "c"/, 'a field of no schema', '--schema-id', 1);
fails("not json\n", qr/the value is not JSON/, 'a line that is not JSON', '--schema-id', 1);
fails("", qr/answered 401/, 'a registry refusing the credentials',
	'--registry', $registry->{url}, '--user', 'reg', '--password', 'wrong');
fails("", qr/cannot register .*SSL certificate/, 'a registry with an unknown certificate',
	'--registry', $tls->{url});

# through TLS with the registry's certificate
$ids = SwTest::produce_avro($broker, $tls, 'simple', schema => $simple, records => ['{"a": 1, "b": "x"}']);
is($ids->{value_schema_id}, 1, 'the producer registers through TLS');

# SIGTERM stops the registry and removes its ready file; one started again
# at the same port gives the same schemas the same ids
is(SwTest::registry_register($bearer, 's', $other, token => 't0ken'), 1, 'registry_register gives the id');
is(SwTest::registry_register($bearer, 's', $simple, token => 't0ken'), 2, 'and the next');
is(SwTest::stop_registry($bearer), 0, 'the registry exits 0 on SIGTERM');
ok(!-e $bearer->{ready}, 'and removes its ready file');
($status) = SwTest::registry_http($bearer, 'GET', '/subjects', token => 't0ken');
is($status, '000', 'a stopped registry does not answer');
my $again = SwTest::registry(token => 't0ken', port => $bearer->{port});
is($again->{url}, $bearer->{url}, 'a registry starts again at the same port');
is(SwTest::registry_register($again, 's', $other, token => 't0ken'), 1, 'and gives the same id to the same schema');

done_testing();
