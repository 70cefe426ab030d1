# One webhook server serves the webhook sources of every database with the
# extension: those of source_writes.database it writes itself, those of
# the others a webhook worker of their database writes.  Posts to each
# database are answered 200 and written once; a post to a database
# without the extension is answered 404 byte for byte as one to a missing
# table; body limits (413 before the body), signatures and idempotency
# keys hold in every database; a table or a database made while the server
# runs is served within seconds; the sources view shows who serves; a
# webhook worker killed with -9 or terminated mid-stream loses and
# duplicates nothing; the webhook server terminated mid-stream answers
# each request it handed on with what became of it (nothing it closed
# unanswered is written), and a table of another database is never
# answered 404 while the server starts; DROP DATABASE of a database served
# so works without FORCE; and the server follows source_writes.database.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(usleep time);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('hooks', conf => <<"EOF");
source_writes.webhook_listen = '127.0.0.1:$port'
max_worker_processes = 24
restart_after_crash = on
EOF
my $dir = PostgreSQL::Test::Utils::tempdir();
my $base = "http://127.0.0.1:$port";

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# POST with curl: "status body"
sub post
{
	my ($path, $body, @headers) = @_;
	my @cmd = ('curl', '-s', '-X', 'POST', '-o', '-', '-w', ' %{http_code}', "$base$path",
		'--data-binary', $body, '-H', 'Content-Type: application/json',
		map { ('-H', $_) } @headers);
	my ($out) = run_command(\@cmd);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

# the whole answer to a POST, but its Date header
sub raw_answer
{
	my ($path, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-i', '-X', 'POST', "$base$path",
		'--data-binary', $body, '-H', 'Content-Type: application/json' ]);
	$out =~ s/^Date: [^\r\n]*\r?\n//mi;
	return $out;
}

my $hooks = q{CREATE SERVER IF NOT EXISTS hooks FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'webhook');};

sql('postgres', 'CREATE DATABASE w1; CREATE DATABASE w2; CREATE DATABASE plain');
sql($_, 'CREATE EXTENSION source_writes') for qw(w1 w2);
sql('postgres', $hooks . q{CREATE FOREIGN TABLE own (id int) SERVER hooks});
sql('w1', $hooks . q{CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks;
	CREATE USER MAPPING FOR PUBLIC SERVER hooks OPTIONS (secret 's3cret');
	CREATE FOREIGN TABLE signed (id int) SERVER hooks
	  OPTIONS (signature_header 'X-Signature')});
sql('w2', $hooks . q{CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks
	  OPTIONS (max_body_bytes '100', idempotency_header 'Idempotency-Key')});

ok($node->poll_query_until('w2', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'the webhook sources of another database are served');

#
# 1. posts to each database, each written once in its own
#
is(post('/postgres/public/own', '{"id": 1}'), '200 1 row', 'a post to source_writes.database');
is(post('/w1/public/pay', '{"id": 1, "note": "one"}'), '200 1 row', 'a post to database w1');
is(post('/w2/public/pay', '{"id": 2, "note": "two"}'), '200 1 row', 'a post to database w2');
is(sql('w1', 'SELECT id, note FROM pay') . ' ' . sql('w2', 'SELECT id, note FROM pay'),
	'1|one 2|two', 'each row is in its own database, once');
is(sql('w1', q{SELECT string_agg(origin || ' ' || diff, ',') FROM source_writes.updates(NULL::pay)}),
	'webhook 1', 'with origin webhook in its log');
my $server = sql('postgres', q{SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND datname = 'postgres'});
my $worker = sql('postgres', q{SELECT pid FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook worker' AND datname = 'w1'});
isnt($worker, '', 'a webhook worker runs in database w1');
is(sql('w1', q{SELECT state, worker_pid, accepted, refused FROM source_writes.sources
	WHERE source = 'pay'::regclass}), "listening|$worker|1|0",
	'the sources view of w1 shows its webhook worker and the requests it answered');
is(sql('postgres', q{SELECT state, worker_pid FROM source_writes.sources
	WHERE source = 'own'::regclass}), "listening|$server",
	'that of source_writes.database shows the server');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'plain' AND backend_type LIKE 'source_writes%'}),
	'no worker is connected to the database without the extension');

#
# 2. a database without the extension is a missing table, byte for byte
#
my $missing = raw_answer('/w1/public/nothing', '{"id": 1}');
like($missing, qr{^HTTP/1\.1 404 }, 'a missing table is 404');
is(raw_answer('/plain/public/pay', '{"id": 1}'), $missing,
	'a database without the extension answers the same bytes');
is(raw_answer('/nosuchdb/public/pay', '{"id": 1}'), $missing, 'so does a database that does not exist');
is(raw_answer('/plain/public/pay', ''), raw_answer('/w1/public/nothing', ''),
	'also with an empty body');
is(raw_answer('/w2/public/nothing', ''), raw_answer('/postgres/public/nothing', ''),
	'a missing table in another database is the same as in source_writes.database');

#
# 3. limits, signatures, idempotency keys in another database
#
my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '-X', 'POST',
	"$base/w2/public/pay", '-H', 'Content-Type: application/json',
	'-H', 'Expect:', '--data-binary', '{"id": 3, "note": "' . ('x' x 500) . '"}' ]);
like($out, qr/ 413$/, 'a body over max_body_bytes of another database is 413');
ok($node->log_contains(qr{request to /w2/public/pay refused with status 413\n.*DETAIL:  The body announced is over the table's max_body_bytes; it was not read\.}),
	'before its body is read');
is(sql('w2', q{SELECT refused FROM source_writes.sources WHERE source = 'pay'::regclass}), '1',
	'and counted for the table of w2');
is(post('/w2/public/pay', '{"id": 4}', 'Idempotency-Key: k1'), '200 1 row', 'a delivery with a key');
is(post('/w2/public/pay', '{"id": 4}', 'Idempotency-Key: k1'), '200 1 row', 'its repeat');
is(sql('w2', 'SELECT count(*) FROM pay WHERE id = 4'), '1', 'is written once');
is(raw_answer('/w1/public/signed', '{"id": 5}'), $missing,
	'an unsigned post to a signed table of w1 is answered as to no table, byte for byte');
is(post('/w1/public/signed', '{"id": 5}', 'X-Signature: ' . hmac_sha256_hex('{"id": 5}', 's3cret')),
	'200 1 row', 'a signed one: 200');
is(sql('w1', 'SELECT count(*) FROM signed'), '1', 'written once');

#
# 4. a table, and a database, made while the server runs
#
sql('w1', q{CREATE FOREIGN TABLE later (id int) SERVER hooks});
is(post('/w1/public/later', '{"id": 6}'), '200 1 row',
	'a table made in another database is served at once');
sql('postgres', 'CREATE DATABASE w3');
sql('w3', 'CREATE EXTENSION source_writes');
sql('w3', $hooks . q{CREATE FOREIGN TABLE pay (id int) SERVER hooks});
my $served_at = time();
my $answer = '';
while (time() < $served_at + 10)
{
	$answer = post('/w3/public/pay', '{"id": 7}');
	last if $answer eq '200 1 row';
	usleep(100_000);
}
is($answer, '200 1 row', 'a database given the extension is served within seconds');
is(sql('w3', 'SELECT count(*) FROM pay'), '1', 'with its row once');

#
# 5. the webhook worker of w1 killed with -9, then terminated, mid-stream
#
sql('w1', q{CREATE FOREIGN TABLE req1 (id int, client int) SERVER hooks;
	CREATE FOREIGN TABLE req2 (id int, client int) SERVER hooks;
	CREATE FUNCTION slow_default() RETURNS int LANGUAGE sql AS 'SELECT 0 FROM pg_sleep(0.05)';
	CREATE FOREIGN TABLE req3 (id int, client int, s int DEFAULT slow_default()) SERVER hooks;
	CREATE FOREIGN TABLE probe (id int) SERVER hooks});

# client c of n posts ids c, c + n, ... up to last to table reqR once each,
# and writes a line for each in its file: "<id> <status>", "<id> refused"
# (never sent), "<id> lost" (no answer)
sub client
{
	my ($round, $c, $n, $last) = @_;
	open(my $out, '>', "$dir/round$round-client$c") or die "cannot write: $!";
	$out->autoflush(1);
	my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 60);
	for (my $id = $c; $id <= $last; $id += $n)
	{
		my $r = $http->post("$base/w1/public/req$round", {
			headers => { 'Content-Type' => 'application/json' },
			content => qq({"id": $id, "client": $c}) });
		my $outcome = $r->{status};
		$outcome = $r->{content} =~ /^Could not connect/ ? 'refused' : 'lost' if $outcome == 599;
		print $out "$id $outcome\n";
		usleep(50_000) if $outcome ne '200';
	}
	close $out;
}

sub outcomes
{
	my ($round, $n) = @_;
	my %outcome;
	for my $c (1 .. $n)
	{
		my $file = "$dir/round$round-client$c";
		next unless -e $file;
		for (grep { /^\d+ \S+$/ } split /\n/, slurp_file($file))
		{
			my ($id, $what) = split / /;
			$outcome{$id} = $what;
		}
	}
	return %outcome;
}

# a round: clients post ids 1 .. last to reqR while $disturb runs once
# $after are answered 200; then every 200 is there once, nothing twice,
# and none was answered 404 (the table is there all along).  With
# $unanswered_unwritten, a request whose connection was closed without an
# answer must not be there either.
sub round
{
	my ($round, $last, $after, $what, $disturb, $unanswered_unwritten) = @_;
	my $nclients = 8;
	my %running;
	for my $c (1 .. $nclients)
	{
		my $pid = fork();
		die "fork failed: $!" unless defined $pid;
		if ($pid == 0)
		{
			client($round, $c, $nclients, $last);
			POSIX::_exit(0);
		}
		$running{$pid} = 1;
	}
	my $deadline = time() + 180;
	my %outcome;
	until (grep({ $_ eq '200' } values %outcome) >= $after)
	{
		die "the clients did not get $after answers 200 in time" if time() > $deadline;
		usleep(20_000);
		%outcome = outcomes($round, $nclients);
	}
	$disturb->();
	while (%running)
	{
		for my $pid (keys %running)
		{
			delete $running{$pid} if waitpid($pid, POSIX::WNOHANG()) == $pid;
		}
		die 'the clients did not finish in time' if %running && time() > $deadline + 120;
		usleep(50_000);
	}
	%outcome = outcomes($round, $nclients);
	my %by;
	$by{$_}++ for values %outcome;
	note("$what: " . join(', ', map { "$_: $by{$_}" } sort keys %by));
	is(scalar(keys %outcome), $last, "$what: each id tried once");
	my %present;
	for (split /\n/, sql('w1', qq{SELECT id, count(*) FROM req$round GROUP BY id}))
	{
		my ($id, $count) = split /\|/;
		$present{$id} = $count;
	}
	my @twice = grep { $present{$_} > 1 } keys %present;
	is(scalar(@twice), 0, "$what: no request is there twice");
	my @missing = grep { $outcome{$_} eq '200' && !$present{$_} } keys %outcome;
	is(scalar(@missing), 0,
		"$what: every request answered 200 is there (" . ($by{200} // 0) . ')');
	my @wrong = grep { $outcome{$_} =~ /^(refused|[1-9]\d*)$/ && $outcome{$_} ne '200' && $present{$_} }
	  keys %outcome;
	is(scalar(@wrong), 0, "$what: no request refused or answered otherwise is there");
	is($by{404} // 0, 0, "$what: no request was answered 404");
	if ($unanswered_unwritten)
	{
		my @lost = grep { $outcome{$_} eq 'lost' && $present{$_} } keys %outcome;
		is(scalar(@lost), 0, "$what: no request closed without an answer is there");
	}
}

round(1, 3000, 500, 'kill -9 of the webhook worker', sub {
	my $pid = sql('postgres', q{SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook worker' AND datname = 'w1'});
	my $from = -s $node->logfile;
	kill 'KILL', $pid;
	note("killed the webhook worker of w1 ($pid)");
	SwTest::wait_for_restart($node, $from);
	# the server restarts; the clients meanwhile find no one or lose a connection
	ok($node->poll_query_until('w1', q{SELECT state = 'listening' FROM source_writes.sources
		WHERE source = 'req1'::regclass}), 'after the crash, w1 is served again');
});
round(2, 3000, 500, 'SIGTERM to the webhook worker', sub {
	my $pid = sql('postgres', q{SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook worker' AND datname = 'w1'});
	kill 'TERM', $pid;
	note("terminated the webhook worker of w1 ($pid)");
});
ok($node->poll_query_until('w1', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'req2'::regclass}), 'a terminated webhook worker is started again');
# (each request takes 50 ms to write: when the server is terminated, the
# clients' requests are in the webhook worker of w1)
round(3, 240, 40, 'SIGTERM to the webhook server', sub {
	# the catalog of the server's own database held locked: as it starts
	# again, its first look at its sources waits (until its lock_timeout),
	# so that requests come before it knows its own sources
	my $locker = $node->background_psql('postgres');
	$locker->query_safe('BEGIN; LOCK TABLE source_writes.source_tables IN ACCESS EXCLUSIVE MODE');
	my $pid = sql('postgres', q{SELECT pid FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server'});
	kill 'TERM', $pid;
	note("terminated the webhook server ($pid)");

	# posts to a table of w1 as fast as they go while it starts again: none
	# is told there is no such table
	my $http = HTTP::Tiny->new(timeout => 60);
	my %statuses;
	my $until = time() + 120;
	while (time() < $until)
	{
		my $r = $http->post("$base/w1/public/probe", {
			headers => { 'Content-Type' => 'application/json' },
			content => '{"id": 1}' });
		$statuses{ $r->{status} }++;
		last if $r->{status} == 200;
	}
	$locker->query_safe('COMMIT');
	$locker->quit;
	note('posts while the server starts: '
		  . join(', ', map { "$_: $statuses{$_}" } sort keys %statuses));
	is($statuses{404} // 0, 0, 'no post while the server starts is answered 404');
}, 1);
ok($node->poll_query_until('w1', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'req3'::regclass}), 'a terminated webhook server is started again');

#
# 6. DROP DATABASE without FORCE of a database with a webhook worker
#
my $log_from = -s $node->logfile;
my ($ret, $o, $err) = $node->psql('postgres', 'DROP DATABASE w2');
is($ret . $err, '0', 'DROP DATABASE of a database with a webhook worker works without FORCE');
my $gone = '';
for (1 .. 50)
{
	$gone = raw_answer('/w2/public/pay', '{"id": 1}');
	last if $gone eq $missing;
	usleep(100_000);
}
is($gone, $missing, 'its addresses are missing tables at once');
is(post('/w1/public/pay', '{"id": 8}'), '200 1 row', 'the others are served on');
unlike(substr(slurp_file($node->logfile), $log_from), qr/FATAL:  database .*does not exist/,
	'no worker tries to connect to the dropped database');

#
# 7. source_writes.database moves the server
#
$node->append_conf('postgresql.conf', "source_writes.database = 'w1'\n");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND datname = 'w1'}),
	'after a reload the webhook server connects to the database named');
my $moved = '';
for (1 .. 100)
{
	$moved = post('/postgres/public/own', '{"id": 9}') . ', ' . post('/w1/public/pay', '{"id": 10}');
	last if $moved eq '200 1 row, 200 1 row';
	usleep(100_000);
}
is($moved, '200 1 row, 200 1 row', 'and serves every database as before');
is(sql('postgres', 'SELECT count(*) FROM own WHERE id = 9') . sql('w1', 'SELECT count(*) FROM pay WHERE id = 10'),
	'11', 'each once');

$node->stop;
done_testing();
