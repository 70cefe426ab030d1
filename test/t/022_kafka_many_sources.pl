# 50 Kafka sources on one server: a worker each (max_worker_processes is
# the number of sources plus the launcher, a notifier and any parallel
# workers), all ingesting at once; and with too few worker processes, the
# sources left over say so and start when a slot frees up.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $sources = 50;
my $broker = SwTest::broker(topics => [ map { "t$_:2" } 1 .. 10 ]);
my $node = SwTest::node('many', conf => "max_worker_processes = 56\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

for my $t (1 .. 10)
{
	my $file = "$dir/t$t";
	open(my $fh, '>', $file) or die;
	print $fh "k$_\t{\"id\": $_}\n" for 1 .. 100;
	close $fh;
	my ($out, $err) = run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', "t$t", '-K', "\t", '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

# five sources on each of the ten topics
$node->safe_psql('postgres',
	"CREATE SERVER k FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');\n"
	  . join('', map { "CREATE FOREIGN TABLE s$_ (id int) SERVER k OPTIONS (topic 't" . (1 + $_ % 10) . "');\n" } 1 .. $sources));
$node->safe_psql('postgres', join('', map { "SELECT source_writes.wait_for('s$_', '120 s');\n" } 1 .. $sources));
is($node->safe_psql('postgres',
	join(' UNION ALL ', map { "SELECT count(*) FROM s$_" } 1 .. $sources) =~ s/^/SELECT count(*), min(count), max(count) FROM (/r . ') c'),
	"$sources|100|100", "each of the $sources sources holds its topic's 100 messages");
is($node->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT worker_pid), bool_and(state = 'running')
	FROM source_writes.sources}), "$sources|$sources|t", 'a worker each, all running');

# with worker processes for fewer sources, the others wait for a slot
$node->safe_psql('postgres', "ALTER SYSTEM SET max_worker_processes = 12");
$node->restart;
ok($node->poll_query_until('postgres', q{
	SELECT count(*) FILTER (WHERE state = 'running') > 0
	   AND count(*) FILTER (WHERE state = 'waiting for a background worker') > 0
	FROM source_writes.sources}), 'sources without a worker process say they wait for one');
like($node->safe_psql('postgres', q{
	SELECT last_error FROM source_writes.sources WHERE state = 'waiting for a background worker' LIMIT 1}),
	qr/max_worker_processes/, 'and name the setting');
$node->safe_psql('postgres', join('', map { "DROP FOREIGN TABLE s$_;\n" } 7 .. $sources));
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 6 AND bool_and(state = 'running') FROM source_writes.sources}),
	'once worker processes free up, the others run');

done_testing();
