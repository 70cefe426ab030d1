# Every database with the extension is served: Kafka sources of two
# databases ingest, each exactly once, and are compacted, while a database
# without the extension, or without source tables, keeps no worker (not
# even the many copies a role that may only create databases makes of
# one), and its first source table brings its supervisor; a failing ALTER
# DATABASE ... RENAME by a role that may not rename it does not stop the
# workers there; CREATE EXTENSION in a third
# database while the server runs gets its sources ingested within
# seconds; DROP DATABASE of a served database works without FORCE (the
# workers leave it) and the launcher stays healthy, and a DROP DATABASE
# that fails gives the database its workers back; ALTER DATABASE RENAME,
# CREATE DATABASE from a served template and DROP DATABASE ... FORCE work
# too; a Kafka worker killed with -9 mid-stream loses and duplicates
# nothing.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'a:2', 'b:2', 'c:1', 'd:1', 'e:1' ]);
my $node = SwTest::node('every', conf => <<'EOF');
max_worker_processes = 24
restart_after_crash = on
source_writes.compaction_interval = '1s'
EOF
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { my ($db, $q) = @_; return $node->safe_psql($db, $q); }

# produce messages {"id": first .. last} to a topic
sub produce
{
	my ($topic, $first, $last) = @_;
	my $file = "$dir/$topic";
	open(my $fh, '>', $file) or die;
	print $fh "k$_\t{\"id\": $_}\n" for $first .. $last;
	close $fh;
	my ($out, $err) = run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', $topic, '-K', "\t", '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

# a Kafka server and a source on topic in database db
sub make_source
{
	my ($db, $table, $topic, $extra) = @_;
	sql($db, qq{CREATE SERVER IF NOT EXISTS k FOREIGN DATA WRAPPER source_writes
		OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
		CREATE FOREIGN TABLE $table (id int) SERVER k OPTIONS (topic '$topic'$extra)});
}

sub supervisors
{
	return sql('postgres', q{SELECT coalesce(string_agg(datname, ',' ORDER BY datname), '')
		FROM pg_stat_activity WHERE backend_type = 'source_writes supervisor'});
}

my $launcher = sql('postgres',
	q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'});

#
# 1. two databases with the extension, one without
#
sql('postgres', 'CREATE DATABASE app1; CREATE DATABASE app2; CREATE DATABASE plain');
sql($_, 'CREATE EXTENSION source_writes') for qw(app1 app2);
make_source('app1', 'ta', 'a');
make_source('app2', 'tb', 'b');
make_source('app2', 'short', 'd', ", retain_history '0'");
produce('a', 1, 500);
produce('b', 1, 700);
is(sql('app1', q{SELECT source_writes.wait_for('ta', '60 s')}), '', 'database app1 ingests');
is(sql('app2', q{SELECT source_writes.wait_for('tb', '60 s')}), '', 'database app2 ingests');
is(sql('app1', 'SELECT count(*), count(DISTINCT id) FROM ta'), '500|500',
	'app1 has each message of its topic once');
is(sql('app2', 'SELECT count(*), count(DISTINCT id) FROM tb'), '700|700',
	'app2 has each message of its topic once');
is(sql('app2', q{SELECT state, worker_pid IS NOT NULL FROM source_writes.sources
	WHERE source = 'tb'::regclass}), 'running|t', 'the sources view of app2 shows its worker');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'plain' AND backend_type LIKE 'source_writes%'}),
	'no worker stays in the database without the extension');
is(supervisors(), 'app1,app2',
	'a supervisor in each database with source tables (postgres has the extension, and none)');

# a role that may create databases, and owns one with the extension (but
# no source table yet), copies it: no copy takes a worker process
sql('postgres', 'CREATE ROLE maker LOGIN CREATEDB; CREATE DATABASE mine OWNER maker');
sql('mine', 'CREATE EXTENSION source_writes');
for my $i (1 .. 6)
{
	my ($ret, $out, $err) = $node->psql('postgres', "CREATE DATABASE copy_$i TEMPLATE mine",
		extra_params => [ '-U', 'maker' ]);
	is($ret . $err, '0', "the role makes copy $i of its database");
}
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE (datname = 'mine' OR datname LIKE 'copy\_%') AND backend_type LIKE 'source_writes%'}),
	'no worker stays in a database with the extension and no source table, nor in its copies');
# its first source table brings a supervisor, which ingests; its drop ends it
make_source('copy_3', 'tm', 'e');
produce('e', 1, 30);
is(sql('copy_3', q{SELECT source_writes.wait_for('tm', '30 s')}), '',
	'the first source table of such a database ingests within seconds');
is(sql('copy_3', 'SELECT count(*), count(DISTINCT id) FROM tm'), '30|30', 'all of its topic, once');
sql('copy_3', 'DROP FOREIGN TABLE tm');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'copy_3' AND backend_type LIKE 'source_writes%'}),
	'after the drop of its last source table no worker stays');
sql('postgres', "DROP DATABASE copy_$_") for 1 .. 6;

# an owner who may not rename its database (no CREATEDB) does not stop the
# workers there with a rename that PostgreSQL refuses
sql('postgres', 'CREATE ROLE keeper LOGIN; ALTER DATABASE app1 OWNER TO keeper');
my $before = sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
	WHERE datname = 'app1'
	  AND backend_type IN ('source_writes supervisor', 'source_writes kafka worker')});
my $log_at = -s $node->logfile;
my ($r, $o, $e) = $node->psql('postgres', 'ALTER DATABASE app1 RENAME TO app1_renamed',
	extra_params => [ '-U', 'keeper' ]);
like($e, qr/permission denied to rename database/, 'a rename by an owner without CREATEDB fails');
is(sql('postgres', q{SELECT string_agg(pid::text, ',' ORDER BY pid) FROM pg_stat_activity
	WHERE datname = 'app1'
	  AND backend_type IN ('source_writes supervisor', 'source_writes kafka worker')}), $before,
	'and the workers of the database stay');
unlike(substr(slurp_file($node->logfile), $log_at), qr/workers leave database "app1"/,
	'none was told to leave');
sql('postgres', 'ALTER DATABASE app1 OWNER TO CURRENT_USER');

# compaction in the second database
sql('app2', q{INSERT INTO short SELECT generate_series(1, 100); DELETE FROM short});
my $history = sql('app2', q{SELECT history_rel FROM source_writes.source_tables
	WHERE relid = 'short'::regclass});
ok($node->poll_query_until('app2', "SELECT count(*) = 0 FROM $history"),
	'sources of app2 are compacted in the background');

# a Kafka worker of app2 that is terminated is started again, and goes on
my $worker = sql('app2', q{SELECT worker_pid FROM source_writes.sources WHERE source = 'tb'::regclass});
kill 'TERM', $worker;
ok($node->poll_query_until('app2', qq{SELECT worker_pid <> $worker AND state = 'running'
	FROM source_writes.sources WHERE source = 'tb'::regclass}), 'a stopped worker is started again');
produce('b', 701, 800);
sql('app2', q{SELECT source_writes.wait_for('tb', '60 s')});
is(sql('app2', 'SELECT count(*), count(DISTINCT id) FROM tb'), '800|800', 'and ingests on');

#
# 2. CREATE EXTENSION while the server runs: its sources ingest at once
#
sql('postgres', 'CREATE DATABASE app3');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'app3' AND backend_type LIKE 'source_writes%'}),
	'a new database without the extension keeps no worker');
sql('app3', 'CREATE EXTENSION source_writes');
make_source('app3', 'tc', 'c');
produce('c', 1, 50);
is(sql('app3', q{SELECT source_writes.wait_for('tc', '10 s')}), '',
	'a database given the extension ingests within seconds');
is(sql('app3', 'SELECT count(*) FROM tc'), '50', 'all of its topic');

#
# 3. DROP DATABASE without FORCE
#
my $log_from = -s $node->logfile;
my ($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE app2');
is($ret, 0, 'DROP DATABASE of a served database works without FORCE');
is($err, '', 'without a complaint');
is(sql('postgres', q{SELECT count(*) FROM pg_database WHERE datname = 'app2'}), '0', 'it is gone');
# the launcher stays, and nothing tries to connect to the dropped database
produce('a', 501, 600);
sql('app1', q{SELECT source_writes.wait_for('ta', '60 s')});
is(sql('app1', 'SELECT count(*), count(DISTINCT id) FROM ta'), '600|600',
	'the other databases ingest on');
sleep(3);
is(sql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	$launcher, 'the launcher stays');
my $log = substr(slurp_file($node->logfile), $log_from);
unlike($log, qr/FATAL:  database .*does not exist/, 'no worker tries to connect to it');
unlike($log, qr/launcher.*(terminated|exited)/, 'the launcher did not stop');

# a DROP DATABASE that fails (a session is connected) gives the workers back
my $session = $node->background_psql('app3');
$session->query_safe('SELECT 1');
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE app3');
like($err, qr/database "app3" is being accessed by other users/, 'DROP DATABASE fails for a session of a user');
like($err, qr/There is 1 other session using the database\./, 'which is the only one counted');
$session->quit;
produce('c', 51, 60);
is(sql('app3', q{SELECT source_writes.wait_for('tc', '30 s')}), '', 'the workers come back');
is(sql('app3', 'SELECT count(*), count(DISTINCT id) FROM tc'), '60|60', 'and ingest on');

# ALTER DATABASE RENAME needs the database alone too
($ret, $out, $err) = $node->psql('postgres', 'ALTER DATABASE app3 RENAME TO app4');
is($ret, 0, 'ALTER DATABASE ... RENAME of a served database works');
produce('c', 61, 70);
is(sql('app4', q{SELECT source_writes.wait_for('tc', '30 s')}), '', 'and it is served again');
is(sql('app4', 'SELECT count(*), count(DISTINCT id) FROM tc'), '70|70', 'every message once');

# CREATE DATABASE copying a served database, and DROP DATABASE ... FORCE
($ret, $out, $err) = $node->psql('postgres', 'CREATE DATABASE copy1 TEMPLATE app1');
is($ret . $err, '0', 'CREATE DATABASE with a served database as its template works');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE datname = 'copy1' AND backend_type = 'source_writes supervisor'}),
	'the copy, which has the extension, is served');
$log_from = -s $node->logfile;
($ret, $out, $err) = $node->psql('postgres', 'DROP DATABASE copy1 WITH (FORCE)');
is($ret . $err, '0', 'DROP DATABASE ... WITH (FORCE) of a served database works');
sleep(2);
unlike(substr(slurp_file($node->logfile), $log_from), qr/FATAL:  database .*does not exist/,
	'and nothing tries to connect to it afterwards');

# DROP EXTENSION: its supervisor and workers leave
sql('app4', 'DROP EXTENSION source_writes CASCADE');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE datname = 'app4' AND backend_type LIKE 'source_writes%'}),
	'after DROP EXTENSION no worker stays');

#
# 4. kill -9 of a Kafka worker mid-stream: nothing lost, nothing twice
#
produce('a', 601, 40_000);
ok($node->poll_query_until('app1', 'SELECT count(*) > 600 FROM ta'), 'ingestion of a backlog began');
$worker = sql('app1', q{SELECT worker_pid FROM source_writes.sources WHERE source = 'ta'::regclass});
my $mid = sql('app1', 'SELECT count(*) FROM ta');
my $from = -s $node->logfile;
kill 'KILL', $worker;
note("killed the worker of app1 at $mid rows");
SwTest::wait_for_restart($node, $from);
ok($node->poll_query_until('app1', q{SELECT state = 'running' FROM source_writes.sources
	WHERE source = 'ta'::regclass}), 'the server and the worker come back');
is(sql('app1', q{SELECT source_writes.wait_for('ta', '120 s')}), '', 'it catches up');
is(sql('app1', 'SELECT count(*), count(DISTINCT id), min(id), max(id) FROM ta'), '40000|40000|1|40000',
	'every message is there once');

$node->stop;
done_testing();
