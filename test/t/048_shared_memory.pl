# The shared memory that source_writes takes stays small with many
# connections: the timestamps of sources (stamps.c) keep the batches still
# committing once per backend, not in each of their 1024 slots with room
# for every backend (which took about 80 MB at max_connections = 5000).
# Measured as what the server's shared memory allocations grow by when the
# library is preloaded; stamping works as ever.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('shmem', preload => 0, conf => "max_connections = 5000\n");

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

done_testing();
