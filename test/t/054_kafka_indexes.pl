# Kafka ingestion into a source table with indexes.  A plain CREATE INDEX
# left open in a transaction makes ingestion wait, and the sources view
# says for which process; nothing is lost or refused, and ingestion goes on
# at its commit.  CREATE INDEX CONCURRENTLY, waiting for a person's open
# write, does not stop ingestion.  kill -9 of the postmaster during
# ingestion into a source with two btree indexes (one unique) and a GIN
# index loses and doubles nothing, and afterwards amcheck finds every btree
# index clean and a count through each index (forced) is the table's.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => ['ev:4']);
my $node = SwTest::node('kafka_indexes',
	conf => "restart_after_crash = on\nmax_worker_processes = 16\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub poll_is
{
	my ($query, $expected, $name) = @_;
	ok($node->poll_query_until('postgres', $query, $expected), $name)
	  or diag("last: " . $node->safe_psql('postgres', $query));
}

# produce messages first .. last, keyed so that they spread over the
# partitions
sub produce
{
	my ($first, $last) = @_;
	my $file = "$dir/messages";
	open(my $fh, '>', $file) or die;
	print $fh "k$_\t{\"id\": $_, \"k\": \"key $_\", \"doc\": {\"g\": " . ($_ % 10) . "}}\n"
	  for $first .. $last;
	close $fh;
	my ($out, $err) = run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'ev', '-K', "\t", '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

sub state
{
	return sql(q{SELECT state FROM source_writes.sources WHERE source = 'ev'::regclass});
}

sql(qq{CREATE EXTENSION amcheck;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE ev (id int, k text, doc jsonb,
	  p int OPTIONS (source 'partition'), o bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'ev');
	CREATE UNIQUE INDEX ev_id ON ev (id)});
produce(1, 100);
is(sql(q{SELECT source_writes.wait_for('ev')}), '', 'the first messages are ingested');
is(sql('SELECT count(*) FROM ev'), '100', '100 rows');

#
# 1. a plain CREATE INDEX, open: ingestion waits for it, and says so
#
my $holder = $node->background_psql('postgres');
my $holder_pid = $holder->query_safe('SELECT pg_backend_pid()');
$holder->query_safe('BEGIN; CREATE INDEX ev_k ON ev (k)');
produce(101, 200);
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'ev'::regclass},
	"waiting for a lock held by process $holder_pid",
	'the sources view says that ingestion waits for the CREATE INDEX, and its process');
is(sql('SELECT count(*) FROM ev'), '100', 'meanwhile the table reads as before');
$holder->query_safe('COMMIT');
is(sql(q{SELECT source_writes.wait_for('ev')}), '', 'at its commit, ingestion goes on');
is(sql('SELECT count(*), count(DISTINCT id), min(id), max(id) FROM ev'), '200|200|1|200',
	'every message once');
poll_is(q{SELECT state FROM source_writes.sources WHERE source = 'ev'::regclass},
	'running', 'the source is running again');
is(sql('SELECT count(*) FROM source_writes.errors'), '0', 'no message was refused');

#
# 2. CREATE INDEX CONCURRENTLY, waiting for a person's open write, does
# not stop ingestion; then it ends valid
#
my $person = $node->background_psql('postgres');
$person->query_safe(q{BEGIN; INSERT INTO ev (id, k, doc) VALUES (-1, 'person', '{"g": 0}')});
my $builder = $node->background_psql('postgres');
my $builder_pid = $builder->query_safe('SELECT pg_backend_pid()');
$builder->query_until(qr/building/,
	"\\echo building\nCREATE INDEX CONCURRENTLY ev_doc ON ev USING gin (doc);\n\\echo built\n");
ok($node->poll_query_until('postgres', qq{
	SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $builder_pid}),
	'CREATE INDEX CONCURRENTLY waits for the person');
produce(201, 300);
is(sql(q{SELECT source_writes.wait_for('ev')}), '', 'meanwhile ingestion goes on');
is(sql('SELECT count(*) FROM ev WHERE id BETWEEN 201 AND 300'), '100', '... and every message is in');
is(sql(qq{SELECT wait_event_type FROM pg_stat_activity WHERE pid = $builder_pid}), 'Lock',
	'... while the build still waits');
$person->query_safe('COMMIT');
$builder->query_until(qr/built/, '');
is(sql(q{SELECT indisvalid AND indisready FROM pg_index WHERE indexrelid = 'ev_doc'::regclass}), 't',
	'the concurrent build ends valid');
$holder->quit;
$person->quit;
$builder->quit;

#
# 3. kill -9 of the postmaster during ingestion, twice
#
# wait until some batches of the round committed, not all, and the worker
# writes the next one (it holds its lock on the hidden heap); returns the
# rows then, or undef if it was too late
sub wait_mid_stream
{
	my ($before, $all) = @_;
	for (1 .. 3000)
	{
		my ($ret, $out) = $node->psql('postgres', q{
			SELECT count(*), (SELECT count(*) FROM pg_locks l JOIN source_writes.sources s
			  ON l.pid = s.worker_pid AND s.source = 'ev'::regclass
			  JOIN source_writes.source_tables t ON l.relation = t.current_rel
			  AND t.relid = 'ev'::regclass AND l.mode = 'RowExclusiveLock')
			FROM ev});
		next if $ret != 0;
		my ($n, $writing) = split /\|/, $out;
		return $n if $n > $before && $n < $all && $writing > 0;
		return undef if $n >= $all;
		usleep(5_000);
	}
	return undef;
}

# Each round's messages are produced while an open CREATE INDEX holds
# ingestion back, so that once it rolls back the worker has three batches
# of 50,000 to write (doc/kafka.md): the kill comes after the first
# committed, while the worker writes the next.
my $produced = 300;
my $killed_mid_stream = 0;
for my $round (1 .. 2)
{
	my $before = sql('SELECT count(*) FROM ev');
	my $hold = $node->background_psql('postgres');
	$hold->query_safe('BEGIN; CREATE INDEX ev_hold ON ev (id)');
	produce($produced + 1, $produced + 150_000);
	$produced += 150_000;
	$hold->query_safe('ROLLBACK');
	$hold->quit;
	my $n = wait_mid_stream($before, $produced + 1);
	$killed_mid_stream++ if defined $n;
	note("round $round: kill -9 the postmaster at " . ($n // 'the end') . " rows");
	my $postmaster = $node->{_pid};
	$node->kill9;
	# its orphaned children hold on to shared memory until they notice
	usleep(100_000) while kill(0, $postmaster);
	my $started;
	for (1 .. 60)
	{
		last if ($started = $node->start(fail_ok => 1));
		sleep 1;
	}
	ok($started, "round $round: the server starts again after kill -9");
}
ok($killed_mid_stream > 0, 'at least one kill came in the middle of ingestion');

is(sql(q{SELECT source_writes.wait_for('ev', '120 s')}), '', 'ingestion caught up after the crashes');
is(sql('SELECT count(*), count(DISTINCT id), min(id), max(id) FROM ev'),
	($produced + 1) . "|" . ($produced + 1) . "|-1|$produced",
	"every message once: $produced messages and the person's row");
is(sql('SELECT count(*), count(DISTINCT (p, o)) FROM ev WHERE id > 0'), "$produced|$produced",
	'each partition and offset once');
is(sql(q{SELECT count(*), sum(next_offset) FROM source_writes.progress WHERE source = 'ev'::regclass}),
	"4|$produced", 'the stored progress is past every message');
is(sql('SELECT count(*) FROM source_writes.errors'), '0', 'no message was refused');

# amcheck on each btree index (they live in the table's schema)
is(sql(q{SELECT string_agg(indexname, ',' ORDER BY indexname) FROM source_writes.indexes
	WHERE tablename = 'ev'}), 'ev_doc,ev_id,ev_k', 'the three indexes are there');
for my $index ('ev_id', 'ev_k')
{
	my ($ret, $out, $err) = $node->psql('postgres', qq{
		SELECT bt_index_check('$index', heapallindexed => true);
		SELECT bt_index_parent_check('$index', heapallindexed => true)});
	is($ret, 0, "amcheck finds $index clean") or diag($err);
}

# a count through each index, which the scan of the hidden heap must use,
# equals the heap's
my $heap = sql(q{SELECT current_rel FROM source_writes.source_tables WHERE relid = 'ev'::regclass});
my $rows = $produced + 1;
my %through = (
	ev_id => 'id > -1000',
	ev_k => q{k > ''},
	ev_doc => join(' OR ', map { qq{doc @> '{"g": $_}'} } 0 .. 9));
for my $index (sort keys %through)
{
	my $query = "SELECT count(*) FROM $heap WHERE $through{$index}";
	my $settings = 'SET enable_seqscan = off; '
	  . ($index eq 'ev_doc' ? '' : 'SET enable_bitmapscan = off; ');
	like($node->safe_psql('postgres', "$settings EXPLAIN (COSTS OFF) $query"),
		qr/Index (Only )?Scan (using|on) \Q$index\E\b/, "the count uses $index");
	is($node->safe_psql('postgres', "$settings $query"), $rows,
		"a count through $index is the heap's");
}
is(sql('SELECT count(*) FROM ev'), $rows, "the table's count is the heap's");

done_testing();
