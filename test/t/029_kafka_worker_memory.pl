# A role that may only use a Kafka server cannot raise its worker's
# memory with its user mapping: librdkafka's buffers are capped for roles
# that are not superusers.  The worker of alice's table, held back while
# librdkafka prefetches a topic of about 140 MB with the largest buffers
# alice may ask for, stays small.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

if (!-r '/proc/self/status')
{
	plan skip_all => 'no /proc/self/status to read the memory from';
}

my $broker = SwTest::broker(topics => [ 'mem:32' ]);
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

done_testing();
