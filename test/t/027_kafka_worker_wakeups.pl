# What wakes a Kafka worker, and what makes it leave: a GRANT or an ANALYZE
# of its table does not restart it (a change of its options does); idle,
# it sleeps on its latch and librdkafka's queue rather than polling; a
# worker whose table is dropped while it starts leaves without an error.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'wk:2' ]);
my $node = SwTest::node('wakeups', conf => "max_worker_processes = 16\n");

sub produce { SwTest::produce($broker, @_); }
sub sql { return $node->safe_psql('postgres', $_[0]); }

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}')});
produce('wk', map { "k$_\t{\"id\": $_}" } 1 .. 20);
sql(q{CREATE FOREIGN TABLE w (id int) SERVER k OPTIONS (topic 'wk')});
sql(q{SELECT source_writes.wait_for('w')});
my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'w'::regclass});

#
# 1. Invalidations that change nothing the worker uses keep it
#
sql(q{CREATE ROLE reader; GRANT SELECT ON w TO reader});
sql(q{ANALYZE w});
sql(q{REVOKE SELECT ON w FROM reader; COMMENT ON FOREIGN TABLE w IS 'events'});
produce('wk', "k21\t{\"id\": 21}");
sql(q{SELECT source_writes.wait_for('w')});
is(sql(q{SELECT worker_pid, state FROM source_writes.sources WHERE source = 'w'::regclass}),
	"$pid|running", 'GRANT, ANALYZE, REVOKE and COMMENT leave the worker as it was');
is(sql(q{SELECT count(*) FROM w}), '21', 'and it ingests on');

# a change of options restarts it
sql(q{ALTER FOREIGN TABLE w OPTIONS (ADD retain_history '1 day')});
poll_is(qq{SELECT worker_pid IS NOT NULL AND worker_pid <> $pid
	FROM source_writes.sources WHERE source = 'w'::regclass}, 't',
	'ALTER FOREIGN TABLE ... OPTIONS restarts it');
$pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'w'::regclass});
sql(q{ALTER FOREIGN TABLE w ADD COLUMN note text});
poll_is(qq{SELECT worker_pid IS NOT NULL AND worker_pid <> $pid
	FROM source_writes.sources WHERE source = 'w'::regclass}, 't',
	'so does a new column');
produce('wk', "k22\t{\"id\": 22, \"note\": \"after\"}");
sql(q{SELECT source_writes.wait_for('w')});
is(sql(q{SELECT note FROM w WHERE id = 22}), 'after', 'which it then fills');

#
# 2. Idle, the worker sleeps until something comes: on its latch and the
# pipe that librdkafka wakes it with, not in short polls
#
$pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'w'::regclass});
sub switches
{
	my $status = slurp_file("/proc/$pid/status");
	$status =~ /^voluntary_ctxt_switches:\s+(\d+)/m or die "no context switches for $pid";
	return $1;
}
SKIP:
{
	skip 'no /proc to count context switches', 2 unless -r "/proc/$pid/status";
	my $before = switches();
	sleep 3;
	my $woken = switches() - $before;
	note("the idle worker woke $woken times in 3 s");
	cmp_ok($woken, '<', 15, 'an idle worker wakes a few times in 3 s, not every 100 ms');

	my $asleep = 0;
	for (1 .. 10)
	{
		$asleep++ if sql(qq{SELECT wait_event FROM pg_stat_activity WHERE pid = $pid}) eq 'Extension';
		usleep(100_000);
	}
	cmp_ok($asleep, '>=', 5, 'most of the time it waits on its wait event set');
}
# and a message wakes it
produce('wk', "k23\t{\"id\": 23}");
poll_is(q{SELECT count(*) FROM w WHERE id = 23}, '1', 'a message that comes wakes it');

#
# 3. A table dropped while its worker starts: the worker leaves, quietly
#
sql(q{CREATE FOREIGN TABLE q (id int) SERVER k OPTIONS (topic 'wk')});
sql(q{SELECT source_writes.wait_for('q')});
my $qpid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'q'::regclass});
my $locker = $node->background_psql('postgres');
# (an ALTER holds the table's lock: LOCK TABLE is not for foreign tables)
$locker->query_safe(q{BEGIN; ALTER FOREIGN TABLE q OPTIONS (ADD retain_history '1 day')});
sql(qq{SELECT pg_terminate_backend($qpid)});
my $qoid = sql(q{SELECT 'q'::regclass::oid});
my $waiting = qq{SELECT l.pid FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.relation = $qoid AND NOT l.granted
	  AND a.backend_type = 'source_writes kafka worker'};
ok($node->poll_query_until('postgres', "SELECT count(*) > 0 FROM ($waiting) w"),
	'a new worker waits for the table');
my $new_pid = sql($waiting);
$locker->query_safe(q{DROP FOREIGN TABLE q; COMMIT});
$locker->quit;
poll_is(qq{SELECT count(*) FROM pg_stat_activity WHERE pid = $new_pid}, '0',
	'it leaves once the table is dropped');
my $log = slurp_file($node->logfile);
unlike($log, qr/\[$new_pid\] ERROR/, 'without an error');
unlike($log, qr/ERROR:  could not open relation/, 'no worker failed to open its table');
is(sql(q{SELECT count(*) FROM w}), '23', 'the other source goes on');

done_testing();
