# Exactly once: while 200,000 messages are being ingested, kill -9 the
# worker, and separately the postmaster, at several points; after each
# restart ingestion resumes from the offsets stored with the batches, and
# in the end every message is in the table once: the count, each
# partition's offsets from 0 without a gap or a repeat, each message's id.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $messages = 200_000;
my $rounds = 4;
my $per_round = $messages / $rounds;

my $broker = SwTest::broker(topics => ['stream:16']);
my $node = SwTest::node('exactly_once', conf => "restart_after_crash = on\nmax_worker_processes = 16\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

$node->safe_psql('postgres', qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE stream (id int, pad text,
	  p int OPTIONS (source 'partition'), o bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'stream');
});

# produce messages first .. last, keyed so that they spread over the partitions
sub produce
{
	my ($first, $last) = @_;
	my $file = "$dir/round";
	open(my $fh, '>', $file) or die;
	print $fh "k$_\t{\"id\": $_, \"pad\": \"" . ('x' x 40) . "\"}\n" for $first .. $last;
	close $fh;
	my ($out, $err) = run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'stream', '-K', "\t", '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

sub count_rows
{
	return $node->safe_psql('postgres', 'SELECT count(*) FROM stream');
}

# wait until ingestion of this round is under way: more rows than before,
# fewer than all
sub wait_mid_stream
{
	my ($before, $all) = @_;
	for (1 .. 3000)
	{
		my ($ret, $n) = $node->psql('postgres', 'SELECT count(*) FROM stream');
		return $n if $ret == 0 && $n > $before && $n < $all;
		return undef if $ret == 0 && $n >= $all;
		usleep(5_000);
	}
	return undef;
}

my $worker_kills = 0;
my $postmaster_kills = 0;
for my $round (1 .. $rounds)
{
	my $before = count_rows();
	produce(($round - 1) * $per_round + 1, $round * $per_round);
	my $n = wait_mid_stream($before, $round * $per_round);
	if (!defined $n)
	{
		note("round $round: ingested before we could kill; killing right after instead");
	}
	if ($round % 2 == 1)
	{
		# the worker, mid-stream: the postmaster restarts everything
		my $pid = $node->safe_psql('postgres',
			q{SELECT worker_pid FROM source_writes.sources WHERE source = 'stream'::regclass});
		note("round $round: kill -9 worker $pid at " . ($n // 'the end') . " rows");
		kill 'KILL', $pid;
		$worker_kills++;
		$node->poll_query_until('postgres', qq{
			SELECT worker_pid IS NOT NULL AND worker_pid <> $pid FROM source_writes.sources
			WHERE source = 'stream'::regclass}) or die 'the server and its worker did not come back';
	}
	else
	{
		note("round $round: kill -9 the postmaster at " . ($n // 'the end') . " rows");
		my $postmaster = $node->{_pid};
		$node->kill9;
		# its orphaned children (the worker among them) hold on to shared
		# memory until they notice, so the first starts may fail
		usleep(100_000) while kill(0, $postmaster);
		my $started;
		for (1 .. 60)
		{
			last if ($started = $node->start(fail_ok => 1));
			sleep 1;
		}
		die 'the server did not start again' unless $started;
		$postmaster_kills++;
	}
	ok(1, "round $round: killed mid-stream and restarted");
}
is($worker_kills, 2, 'the worker was killed twice');
is($postmaster_kills, 2, 'the postmaster was killed twice');

is($node->safe_psql('postgres', q{SELECT source_writes.wait_for('stream', '120 s')}), '',
	'ingestion caught up after the restarts');
is(count_rows(), $messages, "$messages rows: nothing lost, nothing doubled");
is($node->safe_psql('postgres', q{
	SELECT count(DISTINCT id), min(id), max(id), count(DISTINCT (p, o)) FROM stream}),
	"$messages|1|$messages|$messages", 'each message id once, each partition and offset once');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT p FROM stream GROUP BY p
	  HAVING min(o) <> 0 OR max(o) <> count(*) - 1) gaps}), '0',
	'each partition holds offsets 0 .. n-1: no gap, no repeat');
is($node->safe_psql('postgres', q{
	SELECT count(*), sum(next_offset) FROM source_writes.progress WHERE source = 'stream'::regclass}),
	"16|$messages", 'the stored progress is past every message');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.errors}), '0', 'and no message was kept as an error');
like(slurp_file($node->logfile), qr/kafka worker.*terminated by signal 9/,
	'the log shows the killed worker');

done_testing();
