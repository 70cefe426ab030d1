# A role that may only use a Kafka server cannot raise its worker's
# memory with its user mapping: librdkafka's buffers are capped for roles
# that are not superusers.  The worker of alice's table, held back while
# librdkafka prefetches a topic of about 140 MB with the largest buffers
# alice may ask for, stays small.
#
# And a worker that runs for months does not grow: over many small
# batches its private memory (RssAnon: malloc, palloc, librdkafka's) stays
# flat.  Its whole RSS grows for a while, by the pages of shared memory
# (shared buffers, WAL buffers) that it touches for the first time, up to
# the server's shared memory, which is counted in every process that
# touches it but is there once.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

if (!-r '/proc/self/status')
{
	plan skip_all => 'no /proc/self/status to read the memory from';
}

my $broker = SwTest::broker(topics => [ 'mem:32', 'trickle:1' ]);
my $node = SwTest::node('memory', conf => "max_worker_processes = 16\n");
sub sql { return $node->safe_psql('postgres', $_[0]); }

# 32 partitions of 1,100 messages of 4 kB each (the embedded broker keeps
# about 5 MB a partition)
my $dir = PostgreSQL::Test::Utils::tempdir();
open(my $fh, '>', "$dir/messages") or die;
my $pad = 'x' x 4000;
print $fh "{\"id\": $_, \"pad\": \"$pad\"}\n" for 1 .. 35200;
close $fh;
my ($out, $err) = run_command([ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'mem',
	'-l', "$dir/messages" ]);
die "kcat: $err" if $err ne '';

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}')});
sql(q{CREATE ROLE alice; GRANT USAGE ON FOREIGN SERVER k TO alice;
	CREATE SCHEMA a AUTHORIZATION alice});

# what alice asks for is refused; she gets the most she may set
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{SET ROLE alice;
	CREATE USER MAPPING FOR alice SERVER k OPTIONS (
	  "rdkafka.queued.max.messages.kbytes" '2097151', "rdkafka.queued.min.messages" '10000000')});
like($stderr, qr/may only be set above 8192 by a superuser/,
	'a user mapping that would keep 2 GB of messages is refused');
sql(q{SET ROLE alice; CREATE USER MAPPING FOR alice SERVER k OPTIONS (
	"rdkafka.queued.max.messages.kbytes" '8192', "rdkafka.queued.min.messages" '100000',
	"rdkafka.fetch.max.bytes" '8388608', "rdkafka.max.partition.fetch.bytes" '8388608')})
  if $ret != 0;

# the peak resident memory of a table's worker while its batch is held
# back and librdkafka prefetches
sub worker_peak_mb
{
	my ($table) = @_;
	my $lock = $node->background_psql('postgres');
	$lock->query_safe(qq{BEGIN; SELECT current_rel FROM source_writes.source_tables
		WHERE relid = '$table'::regclass \\gset
		LOCK TABLE :current_rel IN SHARE MODE});
	$node->poll_query_until('postgres', qq{SELECT worker_pid IS NOT NULL
		FROM source_writes.sources WHERE source = '$table'::regclass}) or die;
	my $pid = sql(qq{SELECT worker_pid FROM source_writes.sources WHERE source = '$table'::regclass});
	my $peak = 0;
	for (1 .. 40)
	{
		my $status = slurp_file("/proc/$pid/status");
		$status =~ /^VmRSS:\s+(\d+) kB/m or die "no VmRSS for $pid";
		$peak = $1 if $1 > $peak;
		usleep(250_000);
	}
	$lock->query_safe('COMMIT');
	$lock->quit;
	sql(qq{SELECT source_writes.wait_for('$table', '120 s')});
	return $peak / 1024;
}

sql(q{SET ROLE alice; CREATE FOREIGN TABLE a.km (id int, pad text) SERVER k OPTIONS (topic 'mem')});
my $alice = worker_peak_mb('a.km');
sql(q{CREATE FOREIGN TABLE km (id int, pad text) SERVER k OPTIONS (topic 'mem')});
my $plain = worker_peak_mb('km');
note(sprintf('worker peak RSS: %.1f MB with alice\'s mapping, %.1f MB with the defaults',
	$alice, $plain));
cmp_ok($alice, '<', 64, 'alice\'s worker stays under 64 MB');
is(sql(q{SELECT count(*) = (SELECT count(*) FROM km) FROM a.km}), 't',
	'and ingests the topic as the other');

# the memory of a process, in kB: private (RssAnon) and shared (RssShmem)
sub memory_kb
{
	my ($pid) = @_;
	my $status = slurp_file("/proc/$pid/status");
	$status =~ /^RssAnon:\s+(\d+) kB/m or die "no RssAnon for $pid";
	my $anon = $1;
	$status =~ /^RssShmem:\s+(\d+) kB/m or die "no RssShmem for $pid";
	return ($anon, $1);
}

# Small batches, many of them: a message of 1 kB every 10 ms (kcat sends
# what it reads from a pipe about 1 kB at a time), fetched every few ms,
# makes a batch or two of one message each.  After a first 1,000 batches
# (librdkafka's buffers, the caches and malloc's arenas fill), 1,000 more
# and then 2,000 more: the private memory grows by no more than a few
# pages.  The leak a worker must not have, a few hundred bytes a batch,
# would be a megabyte.
sql(qq{CREATE SERVER quick FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka',
	brokers '$broker->{bootstrap}', "rdkafka.fetch.wait.max.ms" '5')});
sql(q{CREATE FOREIGN TABLE kt (id int) SERVER quick OPTIONS (topic 'trickle')});
sql(q{SELECT source_writes.wait_for('kt', '60 s')});
my $trickle_pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'kt'::regclass});
my ($producer_out, $producer_err) = ('', '');
my $producer = IPC::Run::start(
	[ 'perl', '-MTime::HiRes=usleep', '-e',
	  '$| = 1; my $pad = "x" x 1000;
	   for my $i (1 .. 30_000) { print qq({"id": $i, "pad": "$pad"}\n); usleep(10_000) }' ],
	'|', [ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'trickle',
	  '-X', 'queue.buffering.max.ms=0' ],
	'>', \$producer_out, '2>', \$producer_err);

END { $producer->kill_kill if $producer; }

# the worker's memory once it has written n batches of the table
sub memory_after_batches
{
	my ($n) = @_;
	$node->poll_query_until('postgres', qq{SELECT count(*) >= $n
		FROM source_writes.batches WHERE source = 'kt'::regclass})
	  or die "the worker did not write $n batches";
	my @memory = memory_kb($trickle_pid);
	my ($batches, $rows) = split /\|/, sql(q{SELECT count(*), (SELECT count(*) FROM kt)
		FROM source_writes.batches WHERE source = 'kt'::regclass});
	note(sprintf('after %d batches of %.1f rows on average: RssAnon %d kB, RssShmem %d kB',
		$batches, $rows / $batches, @memory));
	return @memory;
}

memory_after_batches(1000);
my ($anon1) = memory_after_batches(2000);
my ($anon2) = memory_after_batches(4000);
$producer->kill_kill;
is(sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'kt'::regclass}),
	$trickle_pid, 'the same worker wrote every batch');
cmp_ok($anon2 - $anon1, '<', 256,
	'the private memory of the worker grows by less than 256 kB over 2,000 small batches');

done_testing();
