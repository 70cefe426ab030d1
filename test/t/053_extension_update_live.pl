# ALTER EXTENSION source_writes UPDATE while sources ingest.  A database on
# version 0.1, with a Kafka source that is ingesting (rows, a kept error,
# stored offsets) and a webhook source with idempotency keys (deliveries),
# is updated while the broker and the sender go on.  Nothing ingested
# before is lost or written again: each message of the topic is in the
# table once, the kept error stays and retry_errors() takes it, a delivery
# repeated after the update writes nothing.  And the extension updated
# from 0.1 is what a fresh install is, as pg_dump --schema-only
# --binary-upgrade (which dumps an extension's objects one by one) shows.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => ['ev:2']);
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('live', no_extension => 1,
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port/postgres/public/pay";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST with curl and an idempotency key: "status body"
sub post
{
	my ($key, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-X', 'POST', '-o', '-', '-w', ' %{http_code}',
		$base, '--data-binary', $body, '-H', 'Content-Type: application/json',
		'-H', "Idempotency-Key: $key" ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sub produce { SwTest::produce($broker, 'ev', map { qq{\t{"id": "$_", "v": "e$_"}} } @_); }

sql(qq{
	CREATE EXTENSION source_writes VERSION '0.1';
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE ev (id int, v text) SERVER k OPTIONS (topic 'ev');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id int) SERVER hooks
	  OPTIONS (idempotency_header 'Idempotency-Key')});

produce(1 .. 50, 'x');
sql(q{SELECT source_writes.wait_for('ev')});
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT id) FROM ev}), '50 50', '0.1 ingested the topic');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'ev'::regclass}), '1',
	'0.1 kept the message it could not decode');
ok($node->poll_query_until('postgres', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'the webhook server listens');
is(post("k$_", qq{{"id": $_}}), '200 1 row', "0.1: delivery k$_") for 1 .. 5;
is(sql(q{SELECT count(*) FROM source_writes.deliveries}), '5', '0.1 remembers the deliveries');

# the update, with messages coming meanwhile
produce(51 .. 100);
sql('ALTER EXTENSION source_writes UPDATE');
is(sql(q{SELECT extversion FROM pg_extension WHERE extname = 'source_writes'}), '0.3',
	'updated to 0.3');
is(post("k$_", qq{{"id": $_}}), '200 1 row', "0.3: delivery k$_") for 6 .. 10;
is(post('k3', '{"id": 3}'), '200 1 row', 'a delivery of 0.1 repeated after the update');
produce(101 .. 120);
sql(q{SELECT source_writes.wait_for('ev')});

is(sql(q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || min(id) || ' ' || max(id) FROM ev}),
	'120 120 1 120', 'each message once, before, during and after the update');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM pay}), join(',', 1 .. 10),
	'each delivery once: the repeated one wrote nothing');
is(sql(q{SELECT string_agg(part || ':' || next_offset || ':' || topic, ' ' ORDER BY part)
		FROM source_writes.progress WHERE source = 'ev'::regclass}),
	sql(q{SELECT string_agg(partition || ':' || high_watermark || ':ev', ' ' ORDER BY partition)
		FROM source_writes.partitions WHERE source = 'ev'::regclass}),
	'the stored offsets are the ends of the partitions, in topic ev');
# rows keep where they came from, through the update (the library is the
# new one from the start: test 068 has storage made before 0.3)
is(sql(q{SELECT count(*) FILTER (WHERE "offset" IS NOT NULL) || ' '
		|| (count(DISTINCT ("partition", "offset")) = count("offset")) || ' '
		|| count(*) FILTER (WHERE origin = 'kafka')
		FROM source_writes.blame(NULL::ev)}),
	'120 true 120', 'blame(): each row has its own partition and offset');
is(sql(q{SELECT string_agg(coalesce(delivery, '-'), ',' ORDER BY (data).id)
		FROM source_writes.blame(NULL::pay)}),
	'k1,k2,k3,k4,k5,k6,k7,k8,k9,k10', 'each delivery has its key');
sql(q{ALTER FOREIGN TABLE ev ALTER COLUMN id TYPE text});
is(sql(q{SELECT source_writes.retry_errors('ev')}), '1', 'the error kept by 0.1 is retried');
is(sql(q{SELECT count(*) || ' ' || count(*) FILTER (WHERE id = 'x') FROM ev}), '121 1',
	'its row is in the table');

# the extension's objects, as pg_dump dumps them for pg_upgrade: the same
# after an update from 0.1 as after a fresh install (OIDs aside)
sql(q{CREATE DATABASE fresh; CREATE DATABASE updated});
$node->safe_psql('fresh', 'CREATE EXTENSION source_writes');
$node->safe_psql('updated',
	q{CREATE EXTENSION source_writes VERSION '0.1'; ALTER EXTENSION source_writes UPDATE});

sub schema
{
	my ($db) = @_;
	my ($out, $err) = run_command([ 'pg_dump', '--schema-only', '--binary-upgrade',
		'-d', $node->connstr($db) ]);
	die "pg_dump: $err" if $err =~ /error/i;
	$out =~ s/^--.*\n//mg;
	$out =~ s/^\\(un)?restrict .*\n//mg;	# a random key per dump
	# what pg_upgrade carries over as it is: OIDs, transaction ids, the LSNs
	# of columns, and the value an added column's old rows read (ADD COLUMN
	# ... DEFAULT of the update), which is storage, not definition
	$out =~ s/^SELECT pg_catalog\.binary_upgrade_set_(next_\w+|missing_value)\(.*\n//mg;
	$out =~ s/'\{[0-9,]+\}'/'{OIDS}'/g;
	$out =~ s/^(SET relfrozenxid = |WHERE oid = ).*$/$1.../mg;
	$out =~ s/\n{2,}/\n\n/g;
	return $out;
}
my $fresh = schema('fresh');
like($fresh, qr/CREATE FUNCTION source_writes\.reset_offsets/,
	'the dump has the extension\'s objects one by one');
my $updated = schema('updated');
is($updated, $fresh, 'an updated extension dumps as a fresh one') or do
{
	my $dir = PostgreSQL::Test::Utils::tempdir();
	PostgreSQL::Test::Utils::append_to_file("$dir/fresh.sql", $fresh);
	PostgreSQL::Test::Utils::append_to_file("$dir/updated.sql", $updated);
	my ($diff) = run_command([ 'diff', '-u', "$dir/fresh.sql", "$dir/updated.sql" ]);
	diag($diff);
};

done_testing();
