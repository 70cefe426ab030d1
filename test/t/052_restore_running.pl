# A dump restored in many transactions into a server that runs the workers,
# with the brokers and senders still at work: nothing is ingested into a
# restored source until the session that restored it ends, so nothing is
# ingested twice, no answered webhook post is dropped, and the restore of
# the offsets meets no offsets of a worker.  Before its catalog row is
# restored a source has no storage (a post is answered 404); after that it
# waits for the restore to end (503); then it goes on from the restored
# offsets.  Checked with a plain dump run by psql, stopped at both points,
# and with pg_restore, serial and parallel.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'ev:2', 'u:1' ]);

sub node_with_webhooks
{
	my ($name) = @_;
	my $port = PostgreSQL::Test::Cluster::get_free_port();
	my $node = SwTest::node($name, conf => <<"EOF");
source_writes.webhook_listen = '127.0.0.1:$port'
max_worker_processes = 24
EOF
	return ($node, "http://127.0.0.1:$port");
}

my ($src, $src_base) = node_with_webhooks('src');
my ($dst, $dst_base) = node_with_webhooks('dst');
my $dir = PostgreSQL::Test::Utils::tempdir();

# POST with curl: "status body"
sub post
{
	my ($base, $path, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-X', 'POST', '-o', '-', '-w', ' %{http_code}',
		"$base$path", '--data-binary', $body, '-H', 'Content-Type: application/json' ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sub produce_ev { SwTest::produce($broker, 'ev', map { qq{\t{"id": $_, "v": "e$_"}} } @_); }

$src->safe_psql('postgres', qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE ev (id int, v text) SERVER k OPTIONS (topic 'ev');
	CREATE FOREIGN TABLE u (k int, v text) SERVER k
	  OPTIONS (topic 'u', envelope 'upsert', key 'k');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id int) SERVER hooks});

produce_ev(1 .. 100);
SwTest::produce($broker, 'u', map { qq{$_\t{"v": "a$_"}} } 1 .. 10);
SwTest::produce($broker, 'u', map { qq{$_\t{"v": "b$_"}} } 1 .. 10);
ok($src->poll_query_until('postgres', q{SELECT count(*) = 1 FROM source_writes.sources
	WHERE source = 'pay'::regclass AND state = 'listening'}), 'the source server listens');
is(post($src_base, '/postgres/public/pay', qq{{"id": $_}}), '200 1 row', "post $_ to the source server")
  for 1 .. 10;
$src->safe_psql('postgres', q{
	SELECT source_writes.wait_for('ev'); SELECT source_writes.wait_for('u');
	DELETE FROM ev WHERE id = 1;
	UPDATE u SET v = 'fixed' WHERE k = 1});

# what every restore must end with, once more came after it
my %final = (
	ev => join("\n", 2 .. 120),
	u => join("\n", '1|fixed', (map { "$_|b$_" } 2 .. 10), '11|c11'),
	pay => join("\n", 1 .. 11),
	log => "1|kafka\n1|user\n2|kafka",
);
my %queries = (
	ev => 'SELECT id FROM ev ORDER BY id',
	u => 'SELECT k, v FROM u ORDER BY k',
	pay => 'SELECT id FROM pay ORDER BY id',
	# the log of id 1: ingested, deleted by a person; of id 2: ingested once
	log => q{SELECT (data).id, origin FROM source_writes.updates(NULL::ev)
		WHERE (data).id IN (1, 2) ORDER BY (data).id, ts, origin},
);

SwTest::run_client('plain dump', 'pg_dump', '-Fp', '-f', "$dir/dump.sql", $src->connstr('postgres'));
SwTest::run_client('custom-format dump', 'pg_dump', '-Fc', '-f', "$dir/dump.custom", $src->connstr('postgres'));
my $batches = q{SELECT count(*) FROM source_writes.batches};
my $dumped_batches = $src->safe_psql('postgres', $batches);

is($src->safe_psql('postgres', $queries{u}), join("\n", '1|fixed', map { "$_|b$_" } 2 .. 10),
	'the upsert source holds each key once')
  or diag($src->safe_psql('postgres', 'SELECT * FROM source_writes.errors'));

# the plain dump, stopped by advisory locks the test holds: after the
# tables are created (before the extension's catalog is restored), and
# after the catalog rows (before the hidden relations' rows)
my $plain = slurp_file("$dir/dump.sql");
my $wait1 = "SELECT pg_advisory_lock(1); SELECT pg_advisory_unlock(1);\n";
my $wait2 = "SELECT pg_advisory_lock(2); SELECT pg_advisory_unlock(2);\n";
ok($plain =~ s/^(COPY source_writes\.batches )/$wait1$1/m, 'the dump restores the batches');
ok($plain =~ s/^(COPY source_writes\.source_tables .*?^\\\.\n)/$1$wait2/ms,
	'the dump restores the catalog rows');
ok($plain =~ /\Q$wait2\E.*^COPY source_writes_internal\./ms,
	'... before the rows of the hidden relations');
open(my $fh, '>', "$dir/stopped.sql") or die;
print $fh $plain;
close $fh;

$dst->safe_psql('postgres', 'CREATE DATABASE r1; CREATE DATABASE r2; CREATE DATABASE r3');
my $holder = $dst->background_psql('r1');
$holder->query_safe('SELECT pg_advisory_lock(1), pg_advisory_lock(2)');

my ($out, $err) = ('', '');
my $restore = IPC::Run::start(
	[ 'psql', '-X', '-q', '-d', $dst->connstr('r1'), '-f', "$dir/stopped.sql" ],
	'>', \$out, '2>', \$err);

sub waits_for_lock
{
	my ($n) = @_;
	return $dst->poll_query_until('r1', qq{SELECT count(*) = 1 FROM pg_locks
		WHERE locktype = 'advisory' AND objid = $n AND NOT granted});
}

ok(waits_for_lock(1), 'restore 1 stops before the catalog');
is($dst->safe_psql('r1', q{SELECT count(*) FROM source_writes.source_tables}), '0',
	'the tables created by the restore have no storage yet');
# (000: the webhook server has no source to listen for yet)
like(post($dst_base, '/r1/public/pay', '{"id": 100}'), qr/^(000|404|503) /,
	'a post before the catalog row is refused');
# time for a worker to start, were one started
sleep(2);
is($dst->safe_psql('r1', q{SELECT count(*) FROM source_writes.progress}), '0',
	'no worker stored offsets');
$holder->query_safe('SELECT pg_advisory_unlock(1)');

ok(waits_for_lock(2), 'restore 1 stops after the catalog rows');
my $restorer = $dst->safe_psql('r1', q{SELECT pid FROM pg_stat_activity
	WHERE query LIKE '%pg_advisory_lock(2)%' AND pid <> pg_backend_pid()});
ok($dst->poll_query_until('r1', qq{SELECT count(*) = 3 FROM source_writes.sources
	WHERE state = 'waiting for the restore by process $restorer to end'
	  AND (worker_pid IS NULL OR kind = 'webhook')}),
	'the restored sources wait for the restore to end')
  or diag($dst->safe_psql('r1', 'SELECT * FROM source_writes.sources'));
# (while the database's webhook writer starts, the answer is another 503)
my $answer;
for (1 .. 300)
{
	$answer = post($dst_base, '/r1/public/pay', '{"id": 100}');
	last if $answer !~ /^503 /
	  || $answer eq '503 the table is being restored; send it again';
	usleep(100_000);
}
is($answer, '503 the table is being restored; send it again',
	'a post after the catalog row is answered 503');
sleep(2);
is($dst->safe_psql('r1', $batches), $dumped_batches,
	'nothing was ingested: the batches are those of the dump');
$holder->query_safe('SELECT pg_advisory_unlock(2)');
$holder->quit;
ok($restore->finish, 'restore 1 (psql, many transactions) ends');
unlike($err, qr/ERROR|WARNING|FATAL/, 'restore 1 reports no errors or warnings');

SwTest::run_client('restore 2 (pg_restore, many transactions)',
	'pg_restore', '-d', $dst->connstr('r2'), "$dir/dump.custom");
SwTest::run_client('restore 3 (pg_restore, parallel)',
	'pg_restore', '-j', '2', '-d', $dst->connstr('r3'), "$dir/dump.custom");

# more comes after every restore
produce_ev(101 .. 120);
SwTest::produce($broker, 'u', qq{11\t{"v": "c11"}});
for my $db (qw(r1 r2 r3))
{
	ok($dst->poll_query_until($db, q{SELECT count(*) = 3 FROM source_writes.sources
		WHERE state IN ('running', 'listening')}), "$db: the sources run once the restore ended");
	is(post($dst_base, "/$db/public/pay", '{"id": 11}'), '200 1 row', "$db: a post after the restore");
	$dst->safe_psql($db, q{SELECT source_writes.wait_for('ev'); SELECT source_writes.wait_for('u')});
	is($dst->safe_psql($db, $queries{$_}), $final{$_}, "$db: $_ once each") for sort keys %queries;
}

done_testing();
