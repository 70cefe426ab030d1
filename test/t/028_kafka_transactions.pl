# Transactional producers: a Kafka source reads committed messages only
# (read_committed), never those of aborted transactions, and a partition
# that ends with a transaction's commit or abort marker counts as caught
# up, as it does for kcat in read_committed.  The log of transactions is
# served by the embedded broker's --txn-topic mode: librdkafka 2.0.2's
# mock cluster writes no markers.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

# committed ids are 1 to 7, aborted ones 100 and up; producers 12 and 13
# interleave, and partition 0 ends with a commit, partition 1 with an abort
my @log = (
	't7:{"id":1} t7:{"id":2} commit7 t8:{"id":100} abort8 v:{"id":3} '
	  . 't12:{"id":6} t13:{"id":103} t12:{"id":7} abort13 commit12 t9:{"id":4} commit9',
	't10:{"id":5} commit10 t11:{"id":101} t11:{"id":102} abort11');
my $broker = SwTest::broker(txn_topic => 'tx', txn_partitions => \@log);
my $node = SwTest::node('transactions');

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(qq{CREATE SERVER txns FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}')});
sql(q{CREATE FOREIGN TABLE tx (id int, p int OPTIONS (source 'partition'),
	o bigint OPTIONS (source 'offset')) SERVER txns OPTIONS (topic 'tx')});

is(sql(q{SELECT source_writes.wait_for('tx', '20 s')}), '',
	'wait_for() returns: partitions that end with a marker are caught up');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM tx}), '1,2,3,4,5,6,7',
	'exactly the committed messages land');
is(sql(q{SELECT string_agg(p || ':' || o, ',' ORDER BY p, o) FROM tx}),
	'0:0,0:1,0:5,0:6,0:8,0:11,1:0', 'at their offsets');
is(sql(q{SELECT string_agg(partition || ':' || next_offset || '/' || high_watermark || ' lag ' || lag,
	', ' ORDER BY partition) FROM source_writes.partitions WHERE source = 'tx'::regclass}),
	'0:13/13 lag 0, 1:5/5 lag 0', 'each partition is consumed to its end, markers included');
is(sql(q{SELECT state, lag FROM source_writes.sources WHERE source = 'tx'::regclass}),
	'running|0', 'the source is running, without lag');
is(sql(q{SELECT string_agg(part || ':' || next_offset, ',' ORDER BY part)
	FROM source_writes.progress WHERE source = 'tx'::regclass}), '0:13,1:5',
	'the markers\' offsets are stored as consumed');
is(sql(q{SELECT count(*) FROM source_writes.errors}), '0', 'no errors');

done_testing();
