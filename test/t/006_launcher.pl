# The background worker: it compacts sources with a retain_history
# periodically once a reload turns the pass on, moves to another database
# when told to, and comes back after being killed or terminated.
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
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'the launcher runs');
is($node->safe_psql('postgres',
		q{SELECT datname FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'postgres', 'in source_writes.database');

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

# another database: the launcher restarts there
$node->safe_psql('postgres', 'CREATE DATABASE elsewhere');
my $old_pid = $launcher_pid->();
$node->append_conf('postgresql.conf', "source_writes.database = 'elsewhere'\n");
$node->reload;
ok($node->poll_query_until('postgres',
		q{SELECT datname = 'elsewhere' FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'after a reload the launcher serves the new database');
ok($node->log_contains('source_writes launcher restarting to serve database "elsewhere"'),
	'and says so in the log');

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

$node->stop;
ok($node->log_contains('source_writes launcher started for database "elsewhere"'),
	'the log names the database it serves');
done_testing();
