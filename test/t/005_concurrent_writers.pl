# Many writers at once, at SERIALIZABLE: the controller's bookkeeping makes
# none of them fail, every commit is one batch with its own timestamp, and
# the log consolidates to the contents.  (pgbench retries nothing here: a
# serialization failure would count as a failed transaction.)
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('writers', conf => "max_connections = 50\n");
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE events (client int, n int) SERVER k OPTIONS (topic 'events');
	CREATE FOREIGN TABLE audit (client int, n int) SERVER k OPTIONS (topic 'audit');
});

my $clients = 8;
my $per_client = 100;
my ($stdout, $stderr);
my $ok = $node->pgbench(
	"--no-vacuum --client=$clients --transactions=$per_client",
	0,
	[qr{number of failed transactions: 0}],
	[qr{^$}],
	'8 SERIALIZABLE writers, 100 transactions each, none fails',
	{
		'serializable_writers' => q{
			BEGIN ISOLATION LEVEL SERIALIZABLE;
			INSERT INTO events VALUES (:client_id, :scale);
			INSERT INTO audit VALUES (:client_id, :scale);
			COMMIT;
		}
	});

my $total = $clients * $per_client;
is($node->safe_psql('postgres', 'SELECT count(*) FROM events'), $total, 'every row is there');
is($node->safe_psql('postgres', q{
	SELECT count(*), count(DISTINCT ts) FROM source_writes.batches
	WHERE source = 'events'::regclass}),
	"$total|$total", 'one batch per commit, each with its own timestamp');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batches a
	JOIN source_writes.batches b ON a.ts = b.ts AND b.source = 'audit'::regclass
	WHERE a.source = 'events'::regclass}),
	$total, 'both sources of a transaction share its timestamp');
is($node->safe_psql('postgres', q{
	SELECT upper = (SELECT max(ts) + 1 FROM source_writes.batches
	                WHERE source = 'events'::regclass)
	FROM source_writes.frontiers('events')}),
	't', 'upper follows the last batch');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (
	  (SELECT (data).* FROM source_writes.updates(NULL::events) EXCEPT ALL SELECT * FROM events)
	  UNION ALL
	  (SELECT * FROM events EXCEPT ALL SELECT (data).* FROM source_writes.updates(NULL::events))) d}),
	'0', 'the log consolidates to the contents');

done_testing();
