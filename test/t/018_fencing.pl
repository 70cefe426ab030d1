# Writers that race for the same offsets of a partition never commit a
# duplicate.  Eight clients each read the partition's stored progress and
# write the message at that offset, as a worker that resumes would, many
# times over: most races end with one writer committing and the others
# failing at commit (40001, and pgbench tries again from the new
# progress).  Afterwards every offset is in the table exactly once, with
# no gap, and the progress is the next offset.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('fencing');
$node->safe_psql('postgres', q{
	CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
	                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
	RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE ev (part int, "offset" bigint, client int) SERVER k
	  OPTIONS (topic 'ev');
});

# one message of partition 0 or 1 per transaction, at the stored offset
my $script = q{
\set part random(0, 1)
SELECT test_write('ev', 'kafka', 'append', ARRAY[ROW(:part, o, :client_id)]::ev[], :part, o)
FROM (SELECT coalesce((SELECT next_offset FROM source_writes.progress
                       WHERE source = 'ev'::regclass AND part = :part), 0) AS o) s;
};
$node->pgbench(
	'-n -c 8 -j 2 -t 150 --max-tries=1000',
	0,
	[qr/number of transactions actually processed: 1200\/1200/],
	[qr/^$/],
	'eight clients write 1200 messages, retrying lost races',
	{ '018_fencing' => $script });

my $batches = $node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batches WHERE source = 'ev'::regclass});
cmp_ok($batches, '==', 1200, 'one batch per committed message');

is($node->safe_psql('postgres', q{
	SELECT count(*) FROM (SELECT part, "offset" FROM ev
	                      GROUP BY 1, 2 HAVING count(*) > 1) d}),
	'0', 'no offset was written twice');
is($node->safe_psql('postgres', q{
	SELECT string_agg(format('%s: %s rows, offsets %s-%s', part, n, lo, hi), '; '
	                  ORDER BY part)
	FROM (SELECT part, count(*) AS n, min("offset") AS lo, max("offset") AS hi
	      FROM ev GROUP BY part) e}),
	$node->safe_psql('postgres', q{
	SELECT string_agg(format('%s: %s rows, offsets %s-%s', part, next_offset, 0,
	                         next_offset - 1), '; ' ORDER BY part)
	FROM source_writes.progress WHERE source = 'ev'::regclass}),
	'each partition holds every offset below its progress, and nothing else');

# the races were real: some commits failed and were tried again
my $log = slurp_file($node->logfile);
my $lost = () = $log =~ /were consumed by another writer/g;
cmp_ok($lost, '>', 0, "races were lost and retried ($lost)");

done_testing();
