# The Kafka worker's commit waits for synchronous standbys as
# synchronous_commit = on does, and its warnings reach the server log as
# log_min_messages says: a cancel of that wait is logged with the default
# (warning), and not with error.  (The webhook server alone lets that
# warning through whatever the setting: it must know that the wait was cut
# short; test 037.)
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => ['t:1']);
my $node = SwTest::node('kafka_log', conf => "wal_level = replica\nmax_wal_senders = 2\n");
$node->safe_psql('postgres', q{ALTER SYSTEM SET synchronous_standby_names = 'nobody'; SELECT pg_reload_conf()});

sub sql { return $node->safe_psql('postgres', "SET synchronous_commit = local;\n$_[0]"); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE t (id int) SERVER k OPTIONS (topic 't')});

# a message whose batch waits for the standby that never comes, cancelled;
# its row is committed here; what the log says meanwhile
sub cut_wait
{
	my ($id) = @_;
	my $from = -s $node->logfile;
	SwTest::produce($broker, 't', qq{\t{"id": $id}});
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'source_writes kafka worker' AND wait_event = 'SyncRep'}),
		"message $id: the batch waits for the standby");
	# (the worker's other transactions, which record its partitions, wait too)
	ok($node->poll_query_until('postgres', qq{
		SELECT count(*) = 0 FROM (SELECT pg_cancel_backend(pid) FROM pg_stat_activity
		  WHERE wait_event = 'SyncRep') c
		WHERE (SELECT count(*) FROM t WHERE id = $id) = 0}),
		"message $id: the waits cancelled, its row is committed");
	return substr(slurp_file($node->logfile), $from);
}

like(cut_wait(1), qr/WARNING:  canceling wait for synchronous replication due to user request/,
	'log_min_messages = warning: the cancel is logged');
# A restart rather than a reload: a worker still waiting for the standby
# from message 1's transactions reads the new setting only once that wait
# ends, so the next cancel could find it with the old one.
sql(q{ALTER SYSTEM SET log_min_messages = 'error'});
$node->restart;
unlike(cut_wait(2), qr/canceling wait for synchronous replication/,
	'log_min_messages = error: it is not');

done_testing();
