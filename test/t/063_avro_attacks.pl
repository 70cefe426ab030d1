# Kafka sources of format avro under attack: hostile message bodies and
# schemas, each kept as an error that says why (never a crashed or stuck
# worker), values at the edges of PostgreSQL's types, a registry that
# stalls, redirects or speaks TLS, and a worker killed while it holds
# messages for a schema.
use strict;
use warnings;

use IO::Socket::INET;
use IPC::Run;
use JSON::PP;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'body:1', 'edge:1', 'reg:1', 'tls:1', 'crash:1', 'many:1', 'dec:1', 'nf:1', 'dag:1' ]);
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

#
# 2. values at the edges of PostgreSQL's types
#
my $s_edge = schema_id(q{{"type": "record", "name": "edge", "fields": [
	{"name": "d", "type": {"type": "int", "logicalType": "date"}},
	{"name": "t", "type": {"type": "int", "logicalType": "time-millis"}},
	{"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "x", "type": "double"},
	{"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 100, "scale": 2}}]}});
my $nan = pack('H*', '000000000000f87f');
my $inf = pack('H*', '000000000000f07f');
my $dec40 = "\x7f" . ("\xff" x 39);
my @edges = (
	[ 'a date before 1940, NaN', zz(-25567) . zz(0) . zz(0) . $nan . zz(1) . "\x01" ],
	[ 'a 40-byte decimal, Infinity', zz(0) . zz(86400000) . zz(-1) . $inf . zz(40) . $dec40 ],
	[ 'a date past PostgreSQL\'s', zz(2**31 - 1) . zz(0) . zz(0) . $nan . zz(0) ],
	[ 'a date before PostgreSQL\'s', zz(-2**31) . zz(0) . zz(0) . $nan . zz(0) ],
	[ 'a negative time', zz(0) . zz(-1) . zz(0) . $nan . zz(0) ],
	[ 'a time past midnight', zz(0) . zz(86400001) . zz(0) . $nan . zz(0) ],
	[ 'a timestamp past PostgreSQL\'s', zz(0) . zz(0) . zz(2**62) . $nan . zz(0) ],
);
raw('edge', map { framed($s_edge, $_->[1]) } @edges);
sql(q{CREATE FOREIGN TABLE edge (d date, t time, ts timestamptz, x float8,
	xn numeric OPTIONS (field 'x'), xj jsonb OPTIONS (field 'x'), xt text OPTIONS (field 'x'),
	dec numeric, o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'edge', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('edge')}), '', 'values at the edges');
is(sql(q{SET TimeZone = 'UTC'; SELECT o, d, t, ts, x, xn, xj, xt, dec FROM edge ORDER BY o}),
	"0|1900-01-01|00:00:00|1970-01-01 00:00:00+00|NaN|NaN|\"NaN\"|NaN|0.01\n"
	. "1|1970-01-01|24:00:00|1969-12-31 23:59:59.999+00|Infinity|Infinity|\"Infinity\"|Infinity|"
	. "10679935179604550411975108530847760573013522611783263849735208039111098628903202750114810434682.87",
	'a date before 1940, times of the whole day, NaN and Infinity, a 40-byte decimal');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'edge'::regclass}),
	"2: date out of range: 2147483647 days since the Unix epoch (column \"d\" of source table \"edge\", field \"d\")\n"
	. "3: date out of range: -2147483648 days since the Unix epoch (column \"d\" of source table \"edge\", field \"d\")\n"
	. "4: time out of range: -1 ms since midnight (column \"t\" of source table \"edge\", field \"t\")\n"
	. "5: time out of range: 86400001 ms since midnight (column \"t\" of source table \"edge\", field \"t\")\n"
	. "6: timestamp out of range: 4611686018427387904 ms since the Unix epoch (column \"ts\" of source table \"edge\", field \"ts\")",
	'dates, times and timestamps out of range are kept as errors');


# decimals longer than their precision: a conversion that takes the
# square of their length is not started for them
my $s_dec = schema_id(q{{"type": "record", "name": "dec", "fields": [
	{"name": "b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
	{"name": "f", "type": {"type": "fixed", "name": "f16", "size": 16, "logicalType": "decimal", "precision": 10, "scale": 2}}]}});
my $f16 = ("\xff" x 15) . "\x85";    # -1.23, its sign over 16 bytes
raw('dec',
	framed($s_dec, zz(5) . "\x02\x54\x0b\xe3\xff" . $f16),        # 99999999.99
	framed($s_dec, zz(6) . "\x01\x02\x54\x0b\xe3\xff" . $f16),
	framed($s_dec, zz(100_000) . ("\x7f" . "\xff" x 99_999) . $f16));
sql(q{CREATE FOREIGN TABLE dec (b numeric, f numeric, o bigint OPTIONS (source 'offset'))
	SERVER k OPTIONS (topic 'dec', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('dec')}), '', 'decimals longer than their precision');
is(sql(q{SELECT string_agg(o || ': ' || b || ' ' || f, ',') FROM dec}), '0: 99999999.99 -1.23',
	'one within its precision, a fixed one whose sign fills 16 bytes');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'dec'::regclass}),
	"1: decimal of 6 bytes is longer than its precision of 10 digits allows (column \"b\" of source table \"dec\", field \"b\")\n"
	. "2: decimal of 100000 bytes is longer than its precision of 10 digits allows (column \"b\" of source table \"dec\", field \"b\")",
	'the others are kept as errors');

# one worker at a time from here on
sql(q{DROP FOREIGN TABLE body, body_map, edge, dec});
my $worker = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes kafka worker'};
sub reg_state { return sql(q{SELECT state || ': ' || coalesce(last_error, '') FROM source_writes.sources WHERE source = 'reg'::regclass}); }

#
# 3. what the registry answers
#
my $small = q{{"type": "record", "name": "r%d", "fields": [{"name": "id", "type": "int"}]}};
my @ids = map { schema_id(sprintf($small, $_)) } 1 .. 12;
sql(q{CREATE FOREIGN TABLE reg (id int, o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'reg', format 'avro')});
raw('reg', framed($ids[0], zz(1)));
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'a first message');

SwTest::registry_control($registry, 'garbage');
raw('reg', framed($ids[1], zz(2)));
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'an answer that is not JSON');
SwTest::registry_control($registry, 'huge');
raw('reg', framed($ids[2], zz(3)));
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'an answer of 20 MB');
SwTest::registry_control($registry, 'ok');
my $top_enum = schema_id(q{{"type": "enum", "name": "top", "symbols": ["A"]}});
my $top_int = schema_id(q{"int"});
raw('reg', framed($top_enum, zz(0)), framed($top_int, zz(4)));
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'schemas that are not records');
is(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'reg'::regclass}),
	"1: the schema of id $ids[1] in the schema registry cannot be used: the registry's answer is not JSON with a \"schema\" string (message value for source table \"reg\")\n"
	. "2: the schema of id $ids[2] in the schema registry cannot be used: the registry's answer is larger than 16 MB (message value for source table \"reg\")\n"
	. "3: the schema of id $top_enum of the message value is not a record (message value for source table \"reg\"): A value's fields fill the table's columns: its writer's schema must be a record.\n"
	. "4: the schema of id $top_int of the message value is not a record (message value for source table \"reg\"): A value's fields fill the table's columns: its writer's schema must be a record.",
	'each kept as an error that says why');

# schemas of 15 MB (a long doc): the worker keeps what it needs of them only
my ($pid) = sql($worker);
sub rss_mb
{
	open(my $fh, '<', "/proc/$pid/status") or return -1;
	my ($kb) = map { /^VmRSS:\s+(\d+)/ ? $1 : () } <$fh>;
	return int($kb / 1024);
}
my $before = rss_mb();
SwTest::registry_control($registry, 'huge', mb => 15);
my $start = time();
raw('reg', map { framed($ids[$_], zz(10 + $_)) } 3 .. 8);
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'six schemas of 15 MB');
my $took = time() - $start;
SwTest::registry_control($registry, 'ok');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY o) FROM reg}), '1,13,14,15,16,17,18', 'are read');
my $after = rss_mb();
my $log_from = -s $node->logfile;
sql("SELECT pg_log_backend_memory_contexts($pid)");
ok($node->wait_for_log(qr/Grand total: \d+ bytes/, $log_from), 'the worker logs its memory');
my ($total) = slurp_file($node->logfile, $log_from) =~ /Grand total: (\d+) bytes/;
note("worker RSS: $before MB before, $after MB after six schemas of 15 MB ($took s); its memory contexts: $total bytes");
cmp_ok($total, '<', 20 * 1024 * 1024, 'and it keeps next to nothing of them');

#
# 4. a registry that stalls past the timeout: the worker says so, and stops
# when told
#
SwTest::registry_control($registry, 'stall', ms => 120000);
raw('reg', framed($ids[9], zz(20)));
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'reg'::regclass},
	'cannot reach the schema registry', 'a registry that stalls: the state says so');
like(reg_state(), qr/timed out/i, 'a timeout') or diag(reg_state());
($pid) = sql($worker);
ok($node->poll_query_until('postgres',
	"SELECT state = 'active' AND query = 'fetching schemas from the schema registry' FROM pg_stat_activity WHERE pid = $pid"),
	'the worker asks again');
usleep(200_000);
$start = time();
kill 'TERM', $pid;
usleep(50_000) while kill(0, $pid) && time() - $start < 60;
$took = time() - $start;
note("the worker stopped $took s after SIGTERM, within a request to a stalled registry");
cmp_ok($took, '<', 5, "SIGTERM stops the worker within a stalled request ($took s)");
SwTest::registry_control($registry, 'ok');
is(sql(q{SELECT source_writes.wait_for('reg')}), '', 'the registry answers again');
is(sql(q{SELECT count(*) FROM reg WHERE id = 20}), '1', 'and the message is written once');

#
# 5. a registry that redirects: not followed, and the credentials stay
#
my $redirect = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 5, ReuseAddr => 1)
  or die "cannot listen: $!";
my $redirect_port = $redirect->sockport;
my $redirect_log = PostgreSQL::Test::Utils::tempdir() . '/redirect.log';
my $redirect_pid = fork();
if ($redirect_pid == 0)
{
	while (my $c = $redirect->accept)
	{
		my $request = '';
		while (my $line = <$c>)
		{
			$request .= $line;
			last if $line eq "\r\n";
		}
		open(my $fh, '>>', $redirect_log);
		print $fh $request;
		close $fh;
		my ($path) = $request =~ m{^GET (\S+)};
		print $c "HTTP/1.1 302 Found\r\nLocation: $registry->{url}$path\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
		close $c;
	}
	exit 0;
}
sql(qq{CREATE SERVER redirect FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry 'http://127.0.0.1:$redirect_port');
	CREATE USER MAPPING FOR CURRENT_USER SERVER redirect OPTIONS (schema_registry_user 'u', schema_registry_password 'hunter2');
	CREATE FOREIGN TABLE redirected (id int) SERVER redirect OPTIONS (topic 'reg', format 'avro')});
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'redirected'::regclass},
	'schema registry error', 'a redirect is an error of the registry');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'redirected'::regclass}),
	qr/^HTTP status 302 for schema id \d+$/, 'which says so');
is(sql(q{SELECT count(*) FROM redirected}), '0', 'nothing is written');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'redirected'::regclass}), '0',
	'nor kept as an error');
my $stats = SwTest::registry_stats($registry);
is($stats->{paths}{"GET /schemas/ids/$ids[0]"}, 1, 'the redirect is not followed');
like(slurp_file($redirect_log), qr/^Authorization: Basic /m, 'the redirecting registry had the credentials it was given');
kill 'KILL', $redirect_pid;
waitpid($redirect_pid, 0);
sql(q{DROP FOREIGN TABLE redirected});

#
# 6. TLS with a self-signed certificate: refused, until schema_registry_ca
#
my $dir = PostgreSQL::Test::Utils::tempdir();
system_or_bail('openssl', 'req', '-x509', '-newkey', 'ec', '-pkeyopt',
	'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2', '-subj',
	'/CN=source_writes test registry', '-addext', 'subjectAltName=IP:127.0.0.1',
	'-keyout', "$dir/registry.key", '-out', "$dir/registry.crt");
my $tls = SwTest::registry(cert => "$dir/registry.crt", key => "$dir/registry.key");
my $tls_id = SwTest::registry_register($tls, 'tls-value', sprintf($small, 99));
sql(qq{CREATE SERVER tls FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$tls->{url}');
	CREATE FOREIGN TABLE tls (id int) SERVER tls OPTIONS (topic 'tls', format 'avro')});
raw('tls', framed($tls_id, zz(7)));
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'tls'::regclass},
	'cannot reach the schema registry', 'a certificate no CA vouches for: refused');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'tls'::regclass}),
	qr/certificate/i, 'the error says why');
sql(qq{ALTER SERVER tls OPTIONS (ADD schema_registry_ca '$dir/registry.crt')});
is(sql(q{SELECT source_writes.wait_for('tls')}), '', 'with schema_registry_ca');
is(sql(q{SELECT string_agg(id::text, ',') FROM tls}), '7', 'the message is written');

#
# 7. a hostile role with USAGE on the server
#
sql(qq{CREATE ROLE mallory LOGIN;
	GRANT USAGE ON FOREIGN SERVER k TO mallory;
	GRANT USAGE ON FOREIGN DATA WRAPPER source_writes TO mallory;
	GRANT CREATE ON SCHEMA public TO mallory;
	CREATE USER MAPPING FOR CURRENT_USER SERVER k OPTIONS (schema_registry_user 'owner', schema_registry_password 'hunter2')});
sub mallory
{
	my ($query) = @_;
	my ($rc, $out, $err) = $node->psql('postgres', $query, extra_params => [ '-U', 'mallory' ]);
	return $rc == 0 ? $out : $err;
}
like(mallory(q{ALTER SERVER k OPTIONS (SET schema_registry 'file:///etc/passwd')}),
	qr/must be owner of foreign server k/, 'mallory cannot point the server elsewhere');
like(mallory(qq{CREATE SERVER m FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry 'file:///etc/passwd')}),
	qr/invalid value for option "schema_registry"/, 'nor make a server that reads files');
like(mallory(qq{CREATE SERVER m FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$tls->{url}', schema_registry_ca '/etc/passwd')}),
	qr/option "schema_registry_ca" may only be set by a superuser/, 'nor one that names a CA file');
is(mallory(q{SELECT umoptions FROM pg_user_mappings WHERE srvname = 'k'}), '', 'nor see the owner\'s password');
like(mallory(qq{CREATE SERVER m FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry 'http://owner:hunter2\@127.0.0.1:1')}),
	qr/invalid value for option "schema_registry"/, 'a URL with credentials is refused: all can read a server\'s options');
# mallory's own table on the owner's server: its worker has mallory's
# credentials (none), never the owner's
is(mallory(q{CREATE FOREIGN TABLE stolen (id int) SERVER k OPTIONS (topic 'reg', format 'avro')}), '',
	'mallory makes a table of format avro on the server');
my $auth = SwTest::registry(user => 'owner', password => 'hunter2');
sql(qq{ALTER SERVER k OPTIONS (SET schema_registry '$auth->{url}')});
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'stolen'::regclass},
	'the schema registry refuses our credentials', 'its worker is refused: it has no credentials');
# (but the statements that set it, which this test's server logs)
is(scalar(grep { /^\d{4}-/ && !/statement: / && /hunter2/ } split /\n/, slurp_file($node->logfile)), 0,
	'the password is never logged');
unlike(sql(q{SELECT string_agg(coalesce(last_error, ''), ' ') FROM source_writes.sources}), qr/hunter2/,
	'nor shown in the status');
sql(q{DROP FOREIGN TABLE stolen; DROP FOREIGN TABLE reg; DROP FOREIGN TABLE tls});
sql(qq{ALTER SERVER k OPTIONS (SET schema_registry '$registry->{url}')});

#
# 8. the worker killed while it holds messages for a stalled registry
#
my @crash_ids = map { schema_id(sprintf($small, 100 + $_)) } 1 .. 3;
sql(q{CREATE FOREIGN TABLE crash (id int, o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'crash', format 'avro')});
raw('crash', framed($crash_ids[0], zz(1)));
is(sql(q{SELECT source_writes.wait_for('crash')}), '', 'a first message');
SwTest::registry_control($registry, 'stall', ms => 120000);
raw('crash', framed($crash_ids[0], zz(2)), framed($crash_ids[1], zz(3)), framed($crash_ids[0], zz(4)),
	framed($crash_ids[2], zz(5)));
($pid) = sql($worker);
ok($node->poll_query_until('postgres',
	"SELECT state = 'active' AND query = 'fetching schemas from the schema registry' FROM pg_stat_activity WHERE pid = $pid"),
	'the worker waits for the registry, holding messages');
my $from = -s $node->logfile;
kill 'KILL', $pid;
SwTest::wait_for_restart($node, $from);
SwTest::registry_control($registry, 'ok');
is(sql(q{SELECT source_writes.wait_for('crash')}), '', 'after the crash, the registry answers');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY o) FROM crash}), '1,2,3,4,5', 'every message once');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'crash'::regclass}), '0', 'none kept as an error');

#
# 9. more schemas than the worker keeps: those a step's messages need stay
#
sql(q{DROP FOREIGN TABLE crash});
my @curl = ('curl', '-s');
for my $i (1 .. 1025)
{
	push @curl, '--next' if $i > 1;
	push @curl, '-X', 'POST', '-H', 'Content-Type: application/vnd.schemaregistry.v1+json',
	  '--data-binary', JSON::PP::encode_json({ schema => sprintf($small, 1000 + $i) }),
	  "$registry->{url}/subjects/many$i-value/versions";
}
my ($curl_out, $curl_err) = ('', '');
IPC::Run::run(\@curl, '>', \$curl_out, '2>', \$curl_err) or die "curl: $curl_err";
my @many = $curl_out =~ /\{"id":(\d+)\}/g;
is(scalar(@many), 1025, '1025 schemas registered');
sql(q{CREATE FOREIGN TABLE many (id int, o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'many', format 'avro')});
# 1024 schemas, the first the least used; then it and a new one together
raw('many', map { framed($many[$_], zz($_)) } 0 .. 1023);
is(sql(q{SELECT source_writes.wait_for('many')}), '', '1024 schemas');
$from = -s $node->logfile;
raw('many', framed($many[0], zz(2000)), framed($many[1024], zz(2001)));
is(sql(q{SELECT source_writes.wait_for('many')}), '', 'a kept schema and a new one in a step');
is(sql(q{SELECT count(*), count(DISTINCT id) FROM many}), '1026|1026', 'every message once');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'many'::regclass}), '0', 'none kept as an error');
unlike(slurp_file($node->logfile, $from), qr/is not known in this process/,
	'the schema the step needs is not pushed out by the one fetched for it');

#
# 10. a registry that did not know an id for a while: the id's later
# messages have it asked again
#
my $nf = schema_id(sprintf($small, 3000));
sql(q{CREATE FOREIGN TABLE nf (id int, o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'nf', format 'avro')});
SwTest::registry_control($registry, 'notfound');
raw('nf', framed($nf, zz(1)));
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM source_writes.errors WHERE source = 'nf'::regclass}),
	'an id the registry does not know, asked three times: kept as an error');
SwTest::registry_control($registry, 'ok');
sleep 31;    # the refusal stands 30 s
raw('nf', framed($nf, zz(2)));
is(sql(q{SELECT source_writes.wait_for('nf')}), '', 'the registry knows it again');
is(sql(q{SELECT string_agg(id::text, ',') FROM nf}), '2', 'a later message of the id is a row');

#
# 11. the server's schema_registry dropped under an Avro table: the worker
# waits for it, and keeps no message as an error meanwhile
#
sql(q{ALTER SERVER k OPTIONS (DROP schema_registry)});
raw('nf', framed($nf, zz(3)));
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'nf'::regclass},
	'cannot start', 'without a registry, the worker cannot start');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'nf'::regclass}),
	qr/format "avro" needs server option "schema_registry"/, 'and says why');
sql(qq{ALTER SERVER k OPTIONS (ADD schema_registry '$registry->{url}')});
is(sql(q{SELECT source_writes.wait_for('nf')}), '', 'the registry named again');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY o) FROM nf}), '2,3', 'the message is a row');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'nf'::regclass}), '1',
	'and no error was kept meanwhile');

#
# 12. schemas and messages that multiply: a named type used twice in each
# of many nested ones (a schema of 2 kB, and millions of values for Avro C
# to make, or a check that never ends), and a message of many items of
# many values each
#
sql(q{DROP FOREIGN TABLE many, nf});
sub dag
{
	my ($n, $leaf) = @_;
	my $t = qq{{"type": "record", "name": "t$n", "fields": [{"name": "v", "type": "$leaf"}]}};
	for my $i (reverse 0 .. $n - 1)
	{
		my $k = $i + 1;
		$t = qq{{"type": "record", "name": "t$i", "fields": [{"name": "a", "type": $t}, {"name": "b", "type": "t$k"}]}};
	}
	return $t;
}
my $dag_ints = schema_id(dag(24, 'int'));
my $dag_nulls = schema_id('{"type": "record", "name": "top", "fields": [{"name": "x", "type": {"type": "array", "items": '
	. dag(40, 'null') . '}}]}');
my $wide = schema_id('{"type": "record", "name": "wide", "fields": [{"name": "x", "type": {"type": "array", "items": '
	. '{"type": "record", "name": "item", "fields": ['
	. join(', ', map { qq{{"name": "n$_", "type": "null"}} } 1 .. 49) . ', {"name": "b", "type": "boolean"}]}}}]}');
raw('dag', framed($dag_ints, zz(1)), framed($dag_nulls, zz(0)),
	framed($wide, zz(100_000) . ("\x01" x 100_000) . zz(0)));
sql(q{CREATE FOREIGN TABLE dag (x jsonb) SERVER k OPTIONS (topic 'dag', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('dag')}), '', 'schemas and messages that multiply');
like(sql(q{SELECT string_agg("offset" || ': ' || error, E'\n' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'dag'::regclass}),
	qr/^0: the schema of id $dag_ints in the schema registry cannot be used: it has more than 50000 types once its named types are written out \(message value for source table "dag"\)
1: the schema of id $dag_nulls in the schema registry cannot be used: it has more than 50000 types once its named types are written out \(message value for source table "dag"\)
2: invalid Avro data: the message value does not match its schema of id $wide \(message value for source table "dag"\): At byte \d+ of the body: it makes more than 1800\d\d\d values\.$/,
	'are kept as errors that say why');
($pid) = sql($worker);
cmp_ok(rss_mb(), '<', 200, 'and the worker made none of it');

done_testing();
