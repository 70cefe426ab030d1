# kill -9 in the middle of a stream of edits: every transaction that
# committed is in the source, in its log and in its batches, once; none
# that did not commit is.  A plain "witness" table edited in the same
# transactions says what committed.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $node = SwTest::node('crash_dml', conf => "restart_after_crash = on\n");
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE events (client int, seq int, v text) SERVER k OPTIONS (topic 'events');
	CREATE TABLE witness (client int, seq int, v text);
});

# each client edits its own rows, the same way in both tables
my $script = PostgreSQL::Test::Utils::tempdir() . '/edits.sql';
open(my $fh, '>', $script) or die;
print $fh q{
\set n random(1, 1000)
BEGIN;
INSERT INTO events VALUES (:client_id, :n, 'x');
INSERT INTO witness VALUES (:client_id, :n, 'x');
UPDATE events SET v = v || 'u' WHERE client = :client_id AND seq % 50 = :n % 50;
UPDATE witness SET v = v || 'u' WHERE client = :client_id AND seq % 50 = :n % 50;
DELETE FROM events WHERE client = :client_id AND seq % 97 = (:n + 1) % 97;
DELETE FROM witness WHERE client = :client_id AND seq % 97 = (:n + 1) % 97;
COMMIT;
};
close $fh;

# start the edits, let them run until enough have committed, then kill
sub edit_and_kill
{
	my ($victim) = @_;
	my $before = $node->safe_psql('postgres', 'SELECT count(*) FROM source_writes.batches');
	my ($out, $err) = ('', '');
	local $ENV{PGAPPNAME} = 'edits';
	my $bench = IPC::Run::start(
		[ 'pgbench', '-n', '-c', '4', '-T', '60', '-f', $script, '-h', $node->host,
		  '-p', $node->port, 'postgres' ],
		'>', \$out, '2>', \$err);
	$node->poll_query_until('postgres',
		"SELECT count(*) >= $before + 200 FROM source_writes.batches")
	  or die 'the edits did not get going';
	if ($victim eq 'postmaster')
	{
		my $pid = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
		$node->kill9;
		usleep(100_000) while kill(0, $pid);
		my $started = 0;
		for (1 .. 60)
		{
			last if ($started = $node->start(fail_ok => 1));
			sleep 1;
		}
		die 'the server did not start again' unless $started;
	}
	else
	{
		# a backend in the middle of its work: the postmaster restarts all
		my $pid = $node->safe_psql('postgres',
			q{SELECT pid FROM pg_stat_activity WHERE application_name = 'edits' LIMIT 1});
		my $from = -s $node->logfile;
		kill 'KILL', $pid;
		SwTest::wait_for_restart($node, $from);
	}
	$bench->finish;
}

sub check
{
	my ($what) = @_;
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (
		  (SELECT * FROM events EXCEPT ALL SELECT * FROM witness)
		  UNION ALL
		  (SELECT * FROM witness EXCEPT ALL SELECT * FROM events)) d}),
		'0', "$what: the source holds exactly the committed edits");
	ok($node->safe_psql('postgres', 'SELECT count(*) FROM witness') > 0,
		"$what: and there are some");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (
		  (SELECT (data).* FROM (SELECT data, sum(diff) AS n
		                         FROM source_writes.updates(NULL::events) GROUP BY data) u,
		                        generate_series(1, u.n)
		   EXCEPT ALL SELECT * FROM events)
		  UNION ALL
		  (SELECT * FROM events EXCEPT ALL
		   SELECT (data).* FROM (SELECT data, sum(diff) AS n
		                         FROM source_writes.updates(NULL::events) GROUP BY data) u,
		                        generate_series(1, u.n))) d}),
		'0', "$what: the log consolidates to the contents");
	is($node->safe_psql('postgres', q{
		SELECT min(running) >= 0 FROM (
		  SELECT sum(n) OVER (PARTITION BY data ORDER BY ts) AS running
		  FROM (SELECT data, ts, sum(diff) AS n FROM source_writes.updates(NULL::events)
		        GROUP BY data, ts) p) r}),
		't', "$what: no row's multiplicity goes below zero");
	is($node->safe_psql('postgres', q{
		SELECT count(*) = count(DISTINCT ts)
		       AND max(ts) + 1 = (SELECT upper FROM source_writes.frontiers('events'))
		FROM source_writes.batches WHERE source = 'events'::regclass}),
		't', "$what: one timestamp per batch, upper after the last");
	is($node->safe_psql('postgres', q{
		SELECT count(*) FROM events e
		WHERE NOT EXISTS (SELECT FROM source_writes.updates(NULL::events) u
		                  WHERE u.data = e AND u.diff = 1)}),
		'0', "$what: every current row is in the log");
}

edit_and_kill('backend');
check('after kill -9 of a backend');
edit_and_kill('postmaster');
check('after kill -9 of the postmaster');

done_testing();
