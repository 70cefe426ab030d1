# Durability of webhook answers: 16 concurrent clients post 10,000
# requests, each with its own id, to a webhook source while the postmaster
# is killed with SIGKILL midway and started again.  No request is re-sent,
# so that a row there twice can only be the server's doing.  Every request
# answered 200 is there exactly once, even with synchronous_commit = off
# (the worker flushes its commit before it answers); no request is there
# twice; one that was refused an answer (a 503) or never reached the server
# (its connection refused) is not there; the log holds each row once, added
# by the webhook.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use HTTP::Tiny;
use POSIX ();
use Time::HiRes qw(usleep time);
use SwTest;

my $requests = 10_000;
my $nclients = 16;
my $kill_after = 3_000;    # answers 200 before the kill

my $port = PostgreSQL::Test::Cluster::get_free_port();
# asynchronous commits, which the WAL writer writes out as late as it may
# (its longest delay).  A kill -9 loses the WAL that is only in shared
# buffers, not what was written to the kernel: an answered request
# survives because the worker flushes its commit before it answers
# (without that flush, this test finds answered requests missing, at this
# delay and at the default one)
my $node = SwTest::node('durability', conf => <<"EOF");
source_writes.webhook_listen = '127.0.0.1:$port'
synchronous_commit = off
wal_writer_delay = 10s
EOF
my $dir = PostgreSQL::Test::Utils::tempdir();
my $url = "http://127.0.0.1:$port/postgres/public/req";

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE req (id int, client int, pad text) SERVER hooks OPTIONS (format 'json')});
$node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/);
is(sql(q{SELECT current_setting('synchronous_commit')}), 'off', 'commits are asynchronous');

# A client: posts the ids $c, $c + 16, ... once each, in order, on one
# keep-alive connection (HTTP::Tiny never re-sends a POST), and writes a
# line per id to its file: "<id> <status>" for an answer, "<id> refused"
# when it could not connect (the request was never sent), "<id> lost" when
# the connection broke before an answer.  After a failure it pauses 100 ms,
# so that it still has requests to send once the server is back.
sub client
{
	my ($c) = @_;
	open(my $out, '>', "$dir/client$c") or die "cannot write: $!";
	$out->autoflush(1);
	my $http = HTTP::Tiny->new(keep_alive => 1, timeout => 60);
	for (my $id = $c; $id <= $requests; $id += $nclients)
	{
		my $r = $http->post($url, {
			headers => { 'Content-Type' => 'application/json' },
			content => qq({"id": $id, "client": $c, "pad": ") . ('x' x 64) . '"}' });
		my $outcome = $r->{status};
		if ($outcome == 599)
		{
			$outcome = $r->{content} =~ /^Could not connect/ ? 'refused' : 'lost';
		}
		print $out "$id $outcome\n";
		usleep(100_000) if $outcome !~ /^2/;
	}
	close $out;
}

# the outcome of each id so far, in each client's order
sub outcomes
{
	my @lines;
	for my $c (1 .. $nclients)
	{
		my $file = "$dir/client$c";
		next unless -e $file;
		push @lines, map { [ $c, split / / ] } grep { /^\d+ \S+$/ } split /\n/, slurp_file($file);
	}
	return @lines;
}

my $started = time();
my %running;    # pid => client
for my $c (1 .. $nclients)
{
	my $pid = fork();
	die "fork failed: $!" unless defined $pid;
	if ($pid == 0)
	{
		client($c);
		POSIX::_exit(0);    # none of the test's END blocks
	}
	$running{$pid} = $c;
}

# clients left running if the test dies
END { kill 'KILL', keys %running if %running; }

# wait until a good part is answered, then kill the postmaster in the midst
my $deadline = time() + 180;
my $answered = 0;
until ($answered >= $kill_after)
{
	die "the clients did not get $kill_after answers 200 in time (got $answered)" if time() > $deadline;
	usleep(20_000);
	$answered = grep { $_->[2] eq '200' } outcomes();
}
my $postmaster = $node->{_pid};
my $log_at = -s $node->logfile;
$node->kill9;
note(sprintf('killed the postmaster after %.1f s, at %d answers 200', time() - $started, $answered));

# its orphaned children (the webhook worker among them) hold on to shared
# memory until they notice, so the first starts may fail
usleep(100_000) while kill(0, $postmaster);
my $up = 0;
for (1 .. 60)
{
	last if ($up = $node->start(fail_ok => 1));
	sleep 1;
}
die 'the server did not start again' unless $up;
$node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/, $log_at);
note(sprintf('the webhook server listens again after %.1f s', time() - $started));

# the clients finish the rest
my @failed;
while (%running)
{
	for my $pid (keys %running)
	{
		next unless waitpid($pid, POSIX::WNOHANG()) == $pid;
		push @failed, "client $running{$pid}: status $?" if $? != 0;
		delete $running{$pid};
	}
	last unless %running;
	die 'the clients did not finish in time' if time() > $deadline + 120;
	usleep(50_000);
}
is("@failed", '', "the $nclients clients ended well");
note(sprintf('the clients finished after %.1f s', time() - $started));

my @outcomes = outcomes();
my %outcome = map { $_->[1] => $_->[2] } @outcomes;
is(scalar(@outcomes) . ' ' . scalar(keys %outcome), "$requests $requests", "$requests ids, each tried once");
my %by;
$by{ $outcome{$_} }++ for keys %outcome;
note('outcomes: ' . join(', ', map { "$_: $by{$_}" } sort keys %by));

# after its first failure, each client got answers 200 again
my (%failed, %after);
for my $o (@outcomes)
{
	my ($c, $id, $what) = @$o;
	if ($what ne '200') { $failed{$c} = 1 }
	elsif ($failed{$c}) { $after{$c}++ }
}
is(scalar(keys %failed), $nclients, 'each client saw the server go away');
is(join(',', grep { !$after{$_} } 1 .. $nclients), '', 'and each got answers 200 after the restart');
my $after = 0;
$after += $_ for values %after;
note("answers 200 after the restart: $after");

my %present;
for (split /\n/, sql(q{SELECT id || ' ' || count(*) FROM req GROUP BY id}))
{
	my ($id, $n) = split / /;
	$present{$id} = $n;
}
my @twice = grep { $present{$_} > 1 } sort { $a <=> $b } keys %present;
is("@twice[0 .. ($#twice < 19 ? $#twice : 19)]", '', 'no request is there twice');
my @ok = grep { $outcome{$_} eq '200' } keys %outcome;
my @missing = sort { $a <=> $b } grep { !$present{$_} } @ok;
is(scalar(@missing) . ": @missing[0 .. ($#missing < 19 ? $#missing : 19)]", '0: ',
	'every request answered 200 is there (' . scalar(@ok) . ')');
my @unsent = sort { $a <=> $b } grep { !exists $outcome{$_} || $outcome{$_} eq 'refused' } keys %present;
is("@unsent", '', 'no request that never reached the server is there');
my @refused = sort { $a <=> $b } grep { $outcome{$_} =~ /^\d+$/ && $outcome{$_} ne '200' } keys %present;
is("@refused", '', 'no request answered otherwise than 200 is there');
my @lost = grep { $outcome{$_} eq 'lost' } keys %outcome;
note(scalar(@lost) . ' requests lost their connection before an answer; '
	  . scalar(grep { $present{$_} } @lost) . ' of them are there');
is(sql(q{SELECT count(*) FROM req WHERE client IS DISTINCT FROM (id - 1) % 16 + 1 OR pad <> repeat('x', 64)}),
	'0', 'each row as posted');

# the log agrees: each row added once, by the webhook, and nothing else
is(sql(q{SELECT count(*) FILTER (WHERE diff <> 1 OR origin <> 'webhook'
	    OR role IS DISTINCT FROM (SELECT relowner::regrole::name FROM pg_class WHERE oid = 'req'::regclass)),
	  count(*) = (SELECT count(*) FROM req)
	FROM source_writes.updates(NULL::req)}), '0|t',
	'the log has a row added by the webhook (as the owner) for each row, and nothing else');
is(sql(q{SELECT count(*) FROM (
	  (SELECT (data).* FROM source_writes.updates(NULL::req) EXCEPT ALL SELECT * FROM req)
	  UNION ALL
	  (SELECT * FROM req EXCEPT ALL SELECT (data).* FROM source_writes.updates(NULL::req))) d}),
	'0', 'the log holds the rows of the table');

done_testing();
