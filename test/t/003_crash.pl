# A crash (kill -9) in the middle of DDL leaves no half-created source, and
# committed sources come back whole after crash recovery.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $node = SwTest::node('crash', conf => "restart_after_crash = on\n");

# what the extension keeps, in one line: each source's two hidden heaps,
# and all the relations of the internal schema (the heaps only: these
# sources have no key)
my $storage_query = q{
	SELECT coalesce(string_agg(relid::text || ':' ||
	         (SELECT count(*) FROM pg_class c WHERE c.oid IN (current_rel, history_rel)),
	         ',' ORDER BY relid::text), '') || ' / ' ||
	       (SELECT count(*) FROM pg_class
	        WHERE relnamespace = 'source_writes_internal'::regnamespace)
	FROM source_writes.source_tables};

$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE kept (id int, note text) SERVER k OPTIONS (topic 'kept');
	INSERT INTO kept SELECT g, 'row ' || g FROM generate_series(1, 1000) g;
});
is($node->safe_psql('postgres', $storage_query), 'kept:2 / 2', 'one committed source');

# a session dies with -9 while its CREATE and ALTER are uncommitted
my $session = $node->background_psql('postgres');
$session->query_safe(q{
	BEGIN;
	CREATE FOREIGN TABLE doomed (id int) SERVER k OPTIONS (topic 'doomed');
	ALTER FOREIGN TABLE kept ADD COLUMN extra int, ALTER COLUMN id TYPE bigint;
});
my $pid = $session->query_safe('SELECT pg_backend_pid()');
like($session->query_safe(q{SELECT count(*) FROM source_writes.source_tables}),
	qr/^2$/, 'uncommitted source visible to its session');

my $from = -s $node->logfile;
kill 'KILL', $pid;
# the postmaster restarts everything through crash recovery
SwTest::wait_for_restart($node, $from);
eval { $session->quit };

is($node->safe_psql('postgres', $storage_query), 'kept:2 / 2',
	'after the crash: only the committed source, nothing half-created');
is($node->safe_psql('postgres', q{
	SELECT string_agg(attname || ' ' || format_type(atttypid, atttypmod), ', ' ORDER BY attnum)
	FROM pg_attribute
	WHERE attrelid = (SELECT current_rel FROM source_writes.source_tables
	                  WHERE relid = 'kept'::regclass)
	  AND attnum > 0 AND NOT attisdropped}),
	'id integer, note text, $part integer, $pos bigint, $batch bigint',
	'the uncommitted ALTER left no trace in storage');
is($node->safe_psql('postgres', 'SELECT count(*), sum(id) FROM kept'), '1000|500500',
	'committed rows all there');

# kill -9 of the postmaster itself, right after a committed CREATE
$node->safe_psql('postgres',
	q{CREATE FOREIGN TABLE fresh (v jsonb) SERVER k OPTIONS (topic 'fresh')});
my $postmaster = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
$node->kill9;
# wait until it is gone; its orphaned children hold on to shared memory
# until they notice, so the first starts may fail
usleep(100_000) while kill(0, $postmaster);
my $started = 0;
for (1 .. 60)
{
	last if ($started = $node->start(fail_ok => 1));
	sleep 1;
}
ok($started, 'the server starts again after kill -9 of the postmaster');
is($node->safe_psql('postgres', $storage_query), 'fresh:2,kept:2 / 4',
	'a committed CREATE survives kill -9 of the postmaster');
is($node->safe_psql('postgres', 'SELECT count(*) FROM fresh'), '0', 'and can be read');

done_testing();
