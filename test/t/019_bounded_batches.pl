# The batch catalog of a source stays proportional to its retained
# history.  100,000 batches with retain_history '0' compact to a handful
# of catalog rows, by compact() and by the background worker; the table,
# its log and reads as of the readable times are what they were.  With a
# longer retention, the batches within it are kept.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('bounded', conf => qq{
synchronous_commit = off
source_writes.compaction_interval = 0
});
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE ev (id int, n int) SERVER k
	  OPTIONS (topic 'ev', retain_history '0');
	CREATE FOREIGN TABLE kept (id int, n int) SERVER k
	  OPTIONS (topic 'kept', retain_history '1 hour');
	CREATE PROCEDURE churn(tbl regclass, batches int) LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN 1..batches LOOP
	    -- one row in, and every tenth batch an update: history
	    EXECUTE format('INSERT INTO %s VALUES ($1, 0)', tbl) USING i;
	    IF i % 10 = 0 THEN
	      EXECUTE format('UPDATE %s SET n = n + 1 WHERE id = $1', tbl) USING i - 5;
	    END IF;
	    COMMIT;
	  END LOOP;
	END $$;
});

sub batches
{
	my ($table) = @_;
	return $node->safe_psql('postgres',
		"SELECT count(*) FROM source_writes.batches WHERE source = '$table'::regclass");
}

# the contents, the log consolidated, and the lowest running multiplicity
# of any row in the log
sub state_of
{
	my ($table) = @_;
	return split /\|/, $node->safe_psql('postgres', qq{
		SELECT (SELECT md5(string_agg(id || ':' || n, ',' ORDER BY id || ':' || n)) FROM $table),
		       (SELECT md5(string_agg(d, ',' ORDER BY d)) FROM
		          (SELECT (data).id || ':' || (data).n AS d, sum(diff) AS c
		           FROM source_writes.updates(NULL::$table) GROUP BY 1) u,
		          generate_series(1, u.c)),
		       (SELECT min(running) FROM
		          (SELECT sum(diff) OVER (PARTITION BY data ORDER BY ts) AS running
		           FROM source_writes.updates(NULL::$table)) r)});
}

$node->safe_psql('postgres', 'CALL churn(\'ev\', 100000)');
is(batches('ev'), '100000', '100,000 batches written');
my ($contents, $log, $lowest) = state_of('ev');
is($log, $contents, 'the log consolidates to the contents');
is($lowest, '0', 'and no multiplicity goes below zero');

my $removed = $node->safe_psql('postgres', q{SELECT source_writes.compact('ev')});
is($removed, '10000', 'compaction deleted the 10,000 retracted rows');
cmp_ok(batches('ev'), '<=', 3, 'and folded the batches into a handful: ' . batches('ev'));
my ($c1, $l1, $low1) = state_of('ev');
is($c1, $contents, 'the contents are the same');
is($l1, $log, 'and so is the log, consolidated');
is($low1, '1', 'which is now only the rows there are');
is($node->safe_psql('postgres', q{
	SELECT count(*), count(*) FILTER (WHERE origin = 'system' AND role IS NULL),
	       count(DISTINCT ts), min(diff)
	FROM source_writes.updates(NULL::ev)}), '100000|99998|1|1',
	'the rows of folded batches are in the log as added by the system at the batch kept');

# more batches, and the background worker compacts them the same way, in
# chunks
$node->safe_psql('postgres', 'CALL churn(\'ev\', 2000)');
$node->append_conf('postgresql.conf', "source_writes.compaction_interval = 1");
$node->reload;
$node->poll_query_until('postgres', q{
	SELECT count(*) <= 3 FROM source_writes.batches WHERE source = 'ev'::regclass})
  or die 'the background worker did not fold the batches';
pass('the background worker folds them too');
my ($c2, $l2, $low2) = state_of('ev');
is($l2, $c2, 'the log still consolidates to the contents');
cmp_ok($low2, '>=', 0, 'and no multiplicity goes below zero');

# a source that keeps an hour keeps its batches
$node->safe_psql('postgres', 'CALL churn(\'kept\', 1000)');
$node->safe_psql('postgres', q{SELECT source_writes.compact('kept')});
is(batches('kept'), '1000', 'batches within the retained history are kept');
is($node->safe_psql('postgres', q{
	SELECT set_config('source_writes.as_of', ts::text, false)
	FROM source_writes.batches WHERE source = 'kept'::regclass
	ORDER BY ts OFFSET 499 LIMIT 1 \g /dev/null
	SELECT count(*), count(*) FILTER (WHERE n = 1) FROM kept}), '500|50',
	'and read as of a time between them');

done_testing();
