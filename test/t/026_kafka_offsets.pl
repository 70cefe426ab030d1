# Stored offsets are positions in one topic of one cluster, and are never
# followed into another: a new topic starts at start_offset, and offsets
# of another cluster, or beyond the end of their partition, stop the
# source (its state says why, wait_for() fails) until reset_offsets() says
# where it goes on.  That choice is a batch of origin system in the log.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'tca:1', 'tcb:1', 'tcc:1', 'kt:2', 'kr:1' ]);
my $node = SwTest::node('offsets', conf => "max_worker_processes = 16\n");

sub produce { SwTest::produce($broker, @_); }
sub sql { return $node->safe_psql('postgres', $_[0]); }

# run a statement that must fail; returns its error text
sub sql_error
{
	my ($query) = @_;
	my ($ret, $out, $err) = $node->psql('postgres', $query);
	isnt($ret, 0, "fails: $query");
	return $err;
}

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}')});

#
# 1. A new topic starts at start_offset: nothing of it is skipped
#
produce('tca', map { "\t{\"id\": $_, \"src\": \"tca\"}" } 1 .. 10);
produce('tcb', map { "\t{\"id\": $_, \"src\": \"tcb\"}" } 1 .. 20);
produce('tcc', map { "\t{\"id\": $_, \"src\": \"tcc\"}" } 1 .. 3);
sql(q{CREATE FOREIGN TABLE tc (id int, src text, o bigint OPTIONS (source 'offset'),
	tp text OPTIONS (source 'topic')) SERVER k OPTIONS (topic 'tca')});
sql(q{SELECT source_writes.wait_for('tc')});
is(sql(q{SELECT count(*), min(o), max(o) FROM tc WHERE tp = 'tca'}), '10|0|9',
	'topic tca ingested');
is(sql(q{SELECT part, next_offset, topic, cluster_id IS NOT NULL, lost, stopped IS NULL
	FROM source_writes.progress WHERE source = 'tc'::regclass}), '0|10|tca|t|0|t',
	'progress says which topic and cluster its offset is in');

sql(q{ALTER FOREIGN TABLE tc OPTIONS (SET topic 'tcb')});
sql(q{SELECT source_writes.wait_for('tc')});
is(sql(q{SELECT count(*), min(o), max(o), count(DISTINCT src) FROM tc WHERE tp = 'tcb'}),
	'20|0|19|1', 'after a change of topic, all 20 messages of tcb are ingested');

# to a topic smaller than the stored offset
sql(q{ALTER FOREIGN TABLE tc OPTIONS (SET topic 'tcc')});
sql(q{SELECT source_writes.wait_for('tc')});
produce('tcc', map { "\t{\"id\": $_, \"src\": \"tcc\"}" } 4 .. 25);
sql(q{SELECT source_writes.wait_for('tc')});
is(sql(q{SELECT count(*), min(o), max(o) FROM tc WHERE tp = 'tcc'}), '25|0|24',
	'a smaller topic: every message of it');
is(sql(q{SELECT next_offset, topic FROM source_writes.progress WHERE source = 'tc'::regclass}),
	'25|tcc', 'progress follows the new topic');
is(sql(q{SELECT state, lag, last_error FROM source_writes.sources WHERE source = 'tc'::regclass}),
	'running|0|', 'the source runs');
like(slurp_file($node->logfile),
	qr/source table "tc" ingests topic "tcb" now, from its start_offset/,
	'the server log says so');

#
# 2. The brokers are replaced by another cluster: the source stops
#
produce('kt', map { "k$_\t{\"id\": $_, \"c\": \"old\"}" } 1 .. 300);
sql(q{CREATE FOREIGN TABLE kt (id int, c text, p int OPTIONS (source 'partition'),
	o bigint OPTIONS (source 'offset')) SERVER k OPTIONS (topic 'kt')});
sql(q{SELECT source_writes.wait_for('kt')});
is(sql(q{SELECT count(*) FROM kt}), '300', 'the old cluster\'s messages');
my $old_cluster = sql(q{SELECT DISTINCT cluster_id FROM source_writes.progress
	WHERE source = 'kt'::regclass});

my $broker2 = SwTest::broker(topics => [ 'kt:2' ]);
SwTest::produce($broker2, 'kt', map { "n$_\t{\"id\": $_, \"c\": \"newcluster\"}" } 1 .. 200);
sql(qq{ALTER SERVER k OPTIONS (SET brokers '$broker2->{bootstrap}')});
like(sql_error(q{SELECT source_writes.wait_for('kt')}),
	qr/source table "kt" stopped ingesting its topic.*Its state is "cluster changed"/s,
	'wait_for() fails, saying why');
is(sql(q{SELECT state FROM source_writes.sources WHERE source = 'kt'::regclass}),
	'cluster changed', 'the state says what happened');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'kt'::regclass}),
	qr/^the stored offsets are positions in Kafka cluster "\Q$old_cluster\E", but the brokers are cluster "[^"]+"$/,
	'last_error names both clusters');
is(sql(q{SELECT count(*) FROM kt WHERE c = 'newcluster'}), '0', 'nothing of the new cluster');
is(sql(q{SELECT count(*), bool_and(stopped = 'cluster changed') FROM source_writes.progress
	WHERE source = 'kt'::regclass}), '2|t', 'the stop is stored');
like(slurp_file($node->logfile),
	qr/WARNING:  kafka worker for source table "kt" stopped ingesting: cluster changed/,
	'the server log says so');

# it stays stopped across restarts of the worker
my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'kt'::regclass});
sql(qq{SELECT pg_terminate_backend($pid)});
poll_is(qq{SELECT worker_pid <> $pid AND state = 'cluster changed'
	FROM source_writes.sources WHERE source = 'kt'::regclass}, 't',
	'a new worker stops as well');

# only the owner chooses where it goes on
sql(q{CREATE ROLE bob; GRANT SELECT, INSERT, UPDATE, DELETE ON kt TO bob});
like(sql_error(q{SET ROLE bob; SELECT source_writes.reset_offsets('kt', 'earliest')}),
	qr/must be owner of foreign table kt/, 'not a role that may only edit the table');
like(sql_error(q{SELECT source_writes.reset_offsets('kt', 'soon')}),
	qr/invalid value for option "offsets": "soon"/, 'a bad choice');
like(sql_error(q{SELECT source_writes.reset_offsets('tc', '0:-1')}),
	qr/invalid value/, 'a bad offset');

sql(q{SELECT source_writes.reset_offsets('kt', 'earliest')});
sql(q{SELECT source_writes.wait_for('kt')});
is(sql(q{SELECT count(*), count(DISTINCT (p, o)) FROM kt WHERE c = 'newcluster'}), '200|200',
	'after reset_offsets(\'earliest\'), all 200 messages of the new cluster');
is(sql(q{SELECT count(*), count(DISTINCT cluster_id), bool_and(cluster_id <> '} . $old_cluster . q{'),
	bool_and(stopped IS NULL) FROM source_writes.progress WHERE source = 'kt'::regclass}),
	'2|1|t|t', 'progress is in the new cluster');
is(sql(q{SELECT state, last_error FROM source_writes.sources WHERE source = 'kt'::regclass}),
	'running|', 'running again');
is(sql(q{SELECT origin, role = current_user FROM source_writes.batches
	WHERE source = 'kt'::regclass AND origin <> 'kafka'}), 'system|t',
	'the reset is a batch of origin system, by the role that made it');

#
# 3. An offset beyond the end of its partition stops the source too
#
my $next1 = sql(q{SELECT next_offset FROM source_writes.progress
	WHERE source = 'kt'::regclass AND part = 1});
sql(qq{SELECT source_writes.reset_offsets('kt', '0:100000, 1:$next1')});
like(sql_error(q{SELECT source_writes.wait_for('kt')}),
	qr/Its state is "offsets past the end": partition 0 of topic "kt" ends before its stored offset 100000/,
	'an offset past the end of its partition');
is(sql(q{SELECT part, stopped FROM source_writes.progress
	WHERE source = 'kt'::regclass AND stopped IS NOT NULL}), '0|offsets past the end',
	'stored');
sql(q{SELECT source_writes.reset_offsets('kt', 'latest')});
sql(q{SELECT source_writes.wait_for('kt')});
SwTest::produce($broker2, 'kt', map { "m$_\t{\"id\": $_, \"c\": \"latest\"}" } 1 .. 10);
sql(q{SELECT source_writes.wait_for('kt')});
is(sql(q{SELECT count(*) FROM kt WHERE c = 'latest'}), '10', 'after \'latest\', what comes next');
is(sql(q{SELECT count(*) FROM kt WHERE c = 'newcluster'}), '200', 'and nothing twice');
is(sql(q{SELECT count(*) FROM source_writes.batches
	WHERE source = 'kt'::regclass AND origin = 'system'}), '3', 'each reset is in the log');

#
# 4. Offsets that reset_offsets() stores are placed in the brokers' cluster
# by the worker, also when it was about to write a batch and goes on
# without a restart: a later change of brokers still stops the source
#
sql(qq{CREATE SERVER kr FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}')});
produce('kr', map { "\t{\"id\": $_, \"c\": \"old\"}" } 1 .. 10);
sql(q{CREATE FOREIGN TABLE kr (id int, c text, o bigint OPTIONS (source 'offset'))
	SERVER kr OPTIONS (topic 'kr')});
sql(q{SELECT source_writes.wait_for('kr')});
my $resetter = $node->background_psql('postgres');
$resetter->query_safe(q{BEGIN; SELECT source_writes.reset_offsets('kr', '0:12')});
produce('kr', map { "\t{\"id\": $_, \"c\": \"old\"}" } 11 .. 15);
my $kr = sql(q{SELECT 'kr'::regclass::oid});
ok($node->poll_query_until('postgres', qq{SELECT count(*) > 0 FROM pg_locks l
	JOIN pg_stat_activity a ON a.pid = l.pid
	WHERE l.relation = $kr AND NOT l.granted AND a.backend_type = 'source_writes kafka worker'}),
	'the worker waits for the reset to write its batch');
$resetter->query_safe('COMMIT');
$resetter->quit;
sql(q{SELECT source_writes.wait_for('kr')});
is(sql(q{SELECT string_agg(o::text, ',' ORDER BY o) FROM kr WHERE o >= 10}), '12,13,14',
	'it goes on at the offset reset_offsets() stored');
is(sql(q{SELECT next_offset, cluster_id IS NOT NULL FROM source_writes.progress
	WHERE source = 'kr'::regclass}), '15|t', 'an offset in the cluster of the brokers');
my $broker3 = SwTest::broker(topics => [ 'kr:1' ]);
SwTest::produce($broker3, 'kr', map { "\t{\"id\": $_, \"c\": \"new\"}" } 1 .. 30);
sql(qq{ALTER SERVER kr OPTIONS (SET brokers '$broker3->{bootstrap}')});
like(sql_error(q{SELECT source_writes.wait_for('kr')}), qr/Its state is "cluster changed"/,
	'new brokers then stop the source');
is(sql(q{SELECT count(*) FROM kr WHERE c = 'new'}), '0',
	'nothing of the new cluster at the old offsets');

#
# 5. Brokers rebuilt under the same address (a fixed log of another
# cluster at the same port): not one of their messages lands at the old
# cluster's offsets, although the worker was fetching when they came
#
sub txn_log { my ($tag, $n) = @_; return join ' ', map { "v:{\"id\":$_,\"c\":\"$tag\"}" } 1 .. $n; }
my $rebuilt = SwTest::broker(txn_topic => 'rb', txn_partitions => [ txn_log('A', 3) ],
	cluster_id => 'clusterA');
my ($rebuilt_port) = $rebuilt->{bootstrap} =~ /:(\d+)$/;
sql(qq{CREATE SERVER rb FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$rebuilt->{bootstrap}')});
sql(q{CREATE FOREIGN TABLE rb (id int, c text, o bigint OPTIONS (source 'offset'))
	SERVER rb OPTIONS (topic 'rb')});
sql(q{SELECT source_writes.wait_for('rb')});
SwTest::stop_broker($rebuilt);
$rebuilt = SwTest::broker(txn_topic => 'rb', txn_partitions => [ txn_log('B', 8) ],
	cluster_id => 'clusterB', port => $rebuilt_port);
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'rb'::regclass},
	'cluster changed', 'the source stops');
is(sql(q{SELECT string_agg(c || o, ',' ORDER BY o) FROM rb}), 'A0,A1,A2',
	'nothing of the rebuilt cluster landed before');

#
# 6. A partition found after the worker started, whose stored offset is of
# another cluster, stops too (two workers: the second one's partition is
# missing from the new cluster's topic at first, and added later)
#
my $two = SwTest::broker(txn_topic => 'tw', txn_partitions => [ txn_log('A', 3), txn_log('A', 3) ],
	cluster_id => 'clusterA');
sql(qq{CREATE SERVER tw FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$two->{bootstrap}')});
sql(q{CREATE FOREIGN TABLE tw (id int, c text, p int OPTIONS (source 'partition'),
	o bigint OPTIONS (source 'offset')) SERVER tw OPTIONS (topic 'tw', workers '2')});
sql(q{SELECT source_writes.wait_for('tw')});
SwTest::stop_broker($two);
$two = SwTest::broker(txn_topic => 'tw', txn_partitions => [ txn_log('B', 5) ],
	cluster_id => 'clusterB');
my ($two_port) = $two->{bootstrap} =~ /:(\d+)$/;
my $workers = q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes kafka worker'};
my $before = join ',', split /\n/, sql($workers);
sql(qq{ALTER SERVER tw OPTIONS (SET brokers '$two->{bootstrap}')});
poll_is(q{SELECT string_agg(part || ' ' || coalesce(stopped, 'following'), ', ' ORDER BY part)
	FROM source_writes.progress WHERE source = 'tw'::regclass},
	'0 cluster changed, 1 following', 'the partition in the new topic stops');
# both new workers have looked at the new cluster's topic, and sleep
poll_is(qq{SELECT count(*) FROM ($workers) w JOIN pg_stat_activity a USING (pid)
	WHERE pid NOT IN ($before) AND a.wait_event = 'Extension'}, '2',
	'both workers of the source run on the new cluster');
SwTest::stop_broker($two);
$two = SwTest::broker(txn_topic => 'tw', txn_partitions => [ txn_log('B', 5), txn_log('B', 6) ],
	cluster_id => 'clusterB', port => $two_port);
poll_is(q{SELECT stopped FROM source_writes.progress WHERE source = 'tw'::regclass AND part = 1},
	'cluster changed', 'so does the partition added to it later');
is(sql(q{SELECT count(*) FROM tw WHERE c = 'B'}), '0', 'nothing of the new cluster landed');

done_testing();
