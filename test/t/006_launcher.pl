# The background workers: the launcher, connected to no database, starts a
# supervisor in each database with source tables, which compacts sources
# with a retain_history periodically once a reload turns the pass on;
# both come back after being killed or terminated.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('launcher',
	conf => "source_writes.compaction_interval = 0\nrestart_after_crash = on\n");

my $launcher_pid = sub {
	$node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'});
};
my $supervisor_pid = sub {
	$node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity
		  WHERE backend_type = 'source_writes supervisor' AND datname = 'postgres'});
};
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'the launcher runs');
is($node->safe_psql('postgres',
		q{SELECT datname IS NULL FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	't', 'connected to no database');
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE short (id int) SERVER k OPTIONS (topic 'short', retain_history '0');
	CREATE FOREIGN TABLE forever (id int) SERVER k OPTIONS (topic 'forever');
	INSERT INTO short SELECT generate_series(1, 1000);
	INSERT INTO forever SELECT generate_series(1, 1000);
	DELETE FROM short WHERE id > 100;
	DELETE FROM forever WHERE id > 100;
});
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 AND bool_and(datname = 'postgres') FROM pg_stat_activity
		  WHERE backend_type = 'source_writes supervisor'}),
	'a supervisor serves the database with source tables, and no other');

# what the history heaps hold, as superuser
my $history = sub {
	my ($table) = @_;
	my $rel = $node->safe_psql('postgres',
		qq{SELECT history_rel FROM source_writes.source_tables WHERE relid = '$table'::regclass});
	return $node->safe_psql('postgres', "SELECT count(*) FROM $rel");
};

is($history->('short'), '900', 'with the periodic pass off, history stays');

# SIGHUP: turn the pass on
$node->append_conf('postgresql.conf', "source_writes.compaction_interval = '1s'\n");
$node->reload;
ok($node->poll_query_until('postgres', sprintf(q{SELECT count(*) = 0 FROM %s},
			$node->safe_psql('postgres',
				q{SELECT history_rel FROM source_writes.source_tables WHERE relid = 'short'::regclass}))),
	'after a reload, the periodic pass compacts the history of a source with retain_history 0');
is($history->('forever'), '900', 'and keeps the history of a source without retain_history');
is($node->safe_psql('postgres', 'SELECT count(*), sum(id) FROM short'), '100|5050',
	'the current rows stay');

# source_writes.database no longer moves anything: the supervisor stays
$node->safe_psql('postgres', 'CREATE DATABASE elsewhere');
my $old_supervisor = $supervisor_pid->();
$node->append_conf('postgresql.conf', "source_writes.database = 'elsewhere'\n");
$node->reload;
$node->safe_psql('postgres', "INSERT INTO short SELECT generate_series(1, 10); DELETE FROM short WHERE id <= 10");
ok($node->poll_query_until('postgres', sprintf(q{SELECT count(*) = 0 FROM %s},
			$node->safe_psql('postgres',
				q{SELECT history_rel FROM source_writes.source_tables WHERE relid = 'short'::regclass}))),
	'after source_writes.database changed, the database is still compacted');
is($supervisor_pid->(), $old_supervisor, 'by the same supervisor');

# a killed supervisor is started again (after the crash of the server)
kill 'KILL', $old_supervisor;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity
		   WHERE backend_type = 'source_writes supervisor' AND datname = 'postgres'
		     AND pid <> $old_supervisor}),
	'a killed supervisor is started again');

# killed with -9, it takes the server through crash recovery and comes back
my $pid = $launcher_pid->();
kill 'KILL', $pid;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity
		   WHERE backend_type = 'source_writes launcher' AND pid <> $pid}),
	'a killed launcher is started again');

# SIGTERM stops it cleanly, and it is restarted too
$pid = $launcher_pid->();
kill 'TERM', $pid;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity
		   WHERE backend_type = 'source_writes launcher' AND pid <> $pid}),
	'a terminated launcher is started again');

# SIGTERM stops a supervisor cleanly; the launcher starts it again
$pid = $supervisor_pid->();
kill 'TERM', $pid;
ok($node->poll_query_until('postgres',
		qq{SELECT count(*) = 1 FROM pg_stat_activity
		   WHERE backend_type = 'source_writes supervisor' AND datname = 'postgres'
		     AND pid <> $pid}),
	'a terminated supervisor is started again');

$node->stop;
ok($node->log_contains('source_writes supervisor started for database "postgres"'),
	'the log names the database a supervisor serves');
done_testing();
