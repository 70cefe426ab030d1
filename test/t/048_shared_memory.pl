# The shared memory that source_writes takes stays small with many
# connections: the timestamps of sources (stamps.c) keep the batches still
# committing once per backend, not in each of their 1024 slots with room
# for every backend (which took about 80 MB at max_connections = 5000).
# Measured as what the server's shared memory allocations grow by when the
# library is preloaded; stamping works as ever, and a transaction that
# writes more sources than a backend's entry names itself holds back the
# upper of those sources only, never moves another's back.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('shmem', preload => 0,
	conf => "max_connections = 5000\nwal_level = replica\nmax_wal_senders = 2\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# bytes of shared memory allocated, free memory aside
sub allocated
{
	return sql(q{SELECT sum(allocated_size) FROM pg_shmem_allocations WHERE name IS NOT NULL});
}

my $without = allocated();
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'source_writes'\n");
$node->restart;
is(sql(q{SHOW max_connections}), '5000', '5000 connections');
my $ours = allocated() - $without;
note "source_writes takes $ours bytes of shared memory";
cmp_ok($ours, '<', 2 * 1024 * 1024, 'source_writes takes less than 2 MB of shared memory');
is(sql(q{SHOW source_writes.stamp_slots}), '1024', 'with 1024 slots for the timestamps of sources');

# concurrent commits to a source still get timestamps from shared memory
sql(q{CREATE SERVER k FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int) SERVER k OPTIONS (topic 't')});
my @sessions = map { $node->background_psql('postgres') } 1 .. 3;
$_->query_safe('BEGIN') for @sessions;
$sessions[$_]->query_safe("INSERT INTO t VALUES ($_)") for 0 .. 2;
$_->query_safe('COMMIT') for @sessions;
$_->quit for @sessions;
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT ts) FROM source_writes.batches
	WHERE source = 't'::regclass}), '3 3', 'three commits, three timestamps');
is(sql(q{SELECT count(*) FROM t}), '3', 'their rows');
cmp_ok(sql(q{SELECT upper FROM source_writes.frontiers('t')}), '>',
	sql(q{SELECT max(ts) FROM source_writes.batches WHERE source = 't'::regclass}),
	'the upper is past them');

# A transaction that stamps more sources than a backend's entry has room
# to name, and is still committing, does not move back the upper of a
# source that it did not write: here one whose timestamps run ahead of the
# clock, as a source's do with more commits than milliseconds.  The
# transaction's commit waits for a synchronous standby that never comes.
sql(q{CREATE FOREIGN TABLE x (id int) SERVER k OPTIONS (topic 'x')});
sql("CREATE FOREIGN TABLE y$_ (id int) SERVER k OPTIONS (topic 'y$_')") for 1 .. 9;
sql(q{SET synchronous_commit = off;
	DO $$ BEGIN FOR i IN 1 .. 30000 LOOP INSERT INTO x VALUES (i); COMMIT; END LOOP; END $$});
cmp_ok(sql(q{SELECT max(ts) - (extract(epoch FROM clock_timestamp()) * 1000)::bigint
	FROM source_writes.batches WHERE source = 'x'::regclass}), '>', 10_000,
	'the timestamps of x run ahead of the clock');
sql(q{ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()});
my $wide = $node->background_psql('postgres');
$wide->query_until(qr/committing/, "\\echo committing\nBEGIN;\n"
	. join('', map { "INSERT INTO y$_ VALUES (1);\n" } 1 .. 9) . "COMMIT;\n");
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity WHERE wait_event = 'SyncRep'}),
	'a transaction that wrote 9 sources is committing');
my $upper = sql(q{SELECT upper FROM source_writes.frontiers('x')});
sql(q{SET synchronous_commit = local; INSERT INTO x VALUES (0)});
cmp_ok(sql(q{SELECT upper FROM source_writes.frontiers('x')}), '>', $upper,
	'a commit to x moves its upper on, not back');
my ($ret, $rows, $err) = $node->psql('postgres',
	qq{SET source_writes.as_of = '@{[ $upper - 1 ]}'; SELECT count(*) FROM x});
is("$ret $rows", '0 30000', 'a read of x as of just before that upper is still allowed')
  or diag $err;
# and a source it wrote, even one its entry names beyond the first 8,
# keeps its upper at that transaction's batch while it commits
sql(q{SET synchronous_commit = local; INSERT INTO y9 VALUES (2)});
my $upper_y9 = sql(q{SELECT upper FROM source_writes.frontiers('y9')});
sql(q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE wait_event = 'SyncRep'});
$wide->quit;
cmp_ok(sql(q{SELECT max(ts) FROM source_writes.batches WHERE source = 'y1'::regclass}), '<', $upper,
	'(the 9 sources were stamped below the upper of x)');
is($upper_y9, sql(q{SELECT min(ts) FROM source_writes.batches WHERE source = 'y9'::regclass}),
	'the upper of its 9th source stayed at its batch while it committed');
sql(q{ALTER SYSTEM RESET synchronous_standby_names; SELECT pg_reload_conf()});

done_testing();
