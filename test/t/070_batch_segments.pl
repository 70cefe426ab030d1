# Batches rolled up into segments (source_writes.batch_segments) read
# exactly as they did as rows.  Two source tables, a and b, get the same
# writes in the same transactions, so their batches have the same
# timestamps, origins and roles (not the same ids); a is rolled up into
# segments of 10 batches, b never is.  At every step, for every readable
# time T, a and b must give the same contents as of T, and the same
# updates() from T, between two times, and from the beginning:
#
#   after a rollup of a's batches, by roles alice, bob and the owner,
#   with transactions that wrote as two roles (two batches, one
#   timestamp);
#   while writers commit to both and a is compacted in a loop;
#   after retention moved since into the segments and both were
#   compacted (a's segments folded, b's batch rows);
#   after the server was killed (-9) in a rollup's open transaction;
#   in a database restored from pg_dump;
#   with the supervisor rolling up on its own.
# Two more, c and d, only ever get rows inserted: their history is empty,
# and updates() of a window of batches reads only the batches in it.
# Dropping a source drops its segments.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use SwTest;

my $node = SwTest::node('segments', conf => q{
source_writes.compaction_interval = 0
source_writes.segment_batches = 10
source_writes.segment_delay = 0
restart_after_crash = on
max_connections = 30
log_statement = none
});
$node->safe_psql('postgres', q{
	CREATE ROLE alice;
	CREATE ROLE bob;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE a (id int, n int) SERVER k OPTIONS (topic 'a');
	CREATE FOREIGN TABLE b (id int, n int) SERVER k OPTIONS (topic 'b');
	CREATE FOREIGN TABLE c (id int, n int) SERVER k OPTIONS (topic 'c');
	CREATE FOREIGN TABLE d (id int, n int) SERVER k OPTIONS (topic 'd');
	GRANT ALL ON a, b, c, d TO alice, bob;

	-- each transaction writes the same to a and b; one in three as alice
	-- and then as the owner (two batches, one timestamp)
	CREATE PROCEDURE churn(first int, batches int) LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN first..first + batches - 1 LOOP
	    IF i % 3 = 0 THEN SET ROLE alice; ELSIF i % 3 = 1 THEN SET ROLE bob; END IF;
	    INSERT INTO a VALUES (i, 0);
	    INSERT INTO b VALUES (i, 0);
	    INSERT INTO c VALUES (i, 0);
	    INSERT INTO d VALUES (i, 0);
	    RESET ROLE;
	    IF i % 3 = 0 THEN
	      UPDATE a SET n = n + 1 WHERE id % 7 = i % 7;
	      UPDATE b SET n = n + 1 WHERE id % 7 = i % 7;
	    END IF;
	    DELETE FROM a WHERE id = i - 25;
	    DELETE FROM b WHERE id = i - 25;
	    COMMIT;
	  END LOOP;
	END $$;

	-- the contents of a table as of t
	CREATE FUNCTION contents_at(tbl regclass, t bigint) RETURNS text
	LANGUAGE plpgsql AS $$
	DECLARE r text;
	BEGIN
	  PERFORM set_config('source_writes.as_of', t::text, true);
	  EXECUTE format('SELECT string_agg(id || ''/'' || n, '','' ORDER BY id, n) FROM %s', tbl)
	    INTO r;
	  PERFORM set_config('source_writes.as_of', '', true);
	  RETURN coalesce(r, '');
	END $$;

	-- a table's updates in a canonical order and form
	CREATE FUNCTION log_of(tbl regclass, since bigint, until bigint) RETURNS text
	LANGUAGE plpgsql AS $$
	DECLARE r text;
	BEGIN
	  EXECUTE format($q$
	    SELECT string_agg(format('%%s %%s %%s %%s %%s', ts, diff, origin, role, data),
	                      E'\n' ORDER BY ts, diff, data::text, role)
	    FROM source_writes.updates(NULL::%s, $1, $2)$q$, tbl)
	    INTO r USING since, until;
	  RETURN coalesce(r, '');
	END $$;

	-- every answer about a table at the readable times of ref: its
	-- contents as of each, its updates from every 25th, and in the window
	-- of 5 batches from there, between two, and all of them
	CREATE FUNCTION answers(tbl regclass, ref regclass) RETURNS text LANGUAGE sql AS $$
	  WITH f AS (SELECT since, upper FROM source_writes.frontiers(ref)),
	  t AS (SELECT DISTINCT u.ts FROM source_writes.updates(NULL::b) u, f
	        WHERE u.ts >= f.since AND u.ts < f.upper),
	  n AS (SELECT ts, lead(ts, 5) OVER (ORDER BY ts) AS ts5,
	               row_number() OVER (ORDER BY ts) AS i FROM t)
	  SELECT string_agg(ts || ' as of: ' || contents_at(tbl, ts), E'\n' ORDER BY ts)
	    || E'\nfrom:\n' || coalesce((SELECT string_agg(ts || ': ' || log_of(tbl, ts, NULL)
	                                                 || E'\nto ' || ts5 || ': ' || log_of(tbl, ts, ts5),
	                                                 E'\n' ORDER BY ts)
	                                 FROM n WHERE i % 25 = 1), '')
	    || E'\nbetween:\n' || coalesce((SELECT log_of(tbl, min(ts) + 1, max(ts)) FROM t), '')
	    || E'\nall:\n' || log_of(tbl, NULL, NULL)
	  FROM t
	$$;
});

# a and b answer the same, and so do c and d; returns a's answers
sub same_answers
{
	my ($label, $db) = @_;
	$db //= 'postgres';
	my $a = $node->safe_psql($db, q{SELECT answers('a', 'b')});
	my $b = $node->safe_psql($db, q{SELECT answers('b', 'b')});
	ok(length($a) > 100, "$label: there are answers");
	is($a, $b, "$label: a (rolled up) answers as b (batch rows) does");
	is($node->safe_psql($db, q{SELECT answers('c', 'd')}),
	   $node->safe_psql($db, q{SELECT answers('d', 'd')}),
	   "$label: c (append-only, rolled up) answers as d does");
	is($node->safe_psql($db, q{
		SELECT upper FROM source_writes.sources WHERE source = 'a'::regclass}),
	   $node->safe_psql($db, q{
		SELECT upper FROM source_writes.sources WHERE source = 'b'::regclass}),
		"$label: source_writes.sources shows the same upper");
	return $a;
}

# Compact both: b without rolling up.  (Compaction shows in updates() from
# the beginning, which gives the rows of folded batches at one time.)
my $compact_both = q{
	SET source_writes.segment_batches = 65535;
	SELECT source_writes.compact('b'), source_writes.compact('d');
	RESET source_writes.segment_batches;
	SELECT source_writes.compact('a'), source_writes.compact('c');
};

# a keeps as many batches, in rows and segments, as b in rows
sub same_batches
{
	my ($label) = @_;
	is($node->safe_psql('postgres', q{
		SELECT (SELECT count(*) FROM source_writes.batches WHERE source = 'a'::regclass)
		     + (SELECT coalesce(sum(nbatches), 0) FROM source_writes.batch_segments
		        WHERE source = 'a'::regclass)
		     = (SELECT count(*) FROM source_writes.batches WHERE source = 'b'::regclass)}),
		't', "$label: a keeps as many batches as b");
}

sub catalog_of
{
	my ($tbl, $db) = @_;
	return $node->safe_psql($db // 'postgres', qq{
		SELECT (SELECT count(*) FROM source_writes.batches WHERE source = '$tbl'::regclass)
		  || ' rows, ' || (SELECT count(*) FROM source_writes.batch_segments WHERE source = '$tbl'::regclass)
		  || ' segments of ' || (SELECT coalesce(sum(nbatches), 0) FROM source_writes.batch_segments
		                         WHERE source = '$tbl'::regclass)});
}

# 1. a rollup of 300 transactions' batches
$node->safe_psql('postgres', 'CALL churn(1, 300)');
my $before = same_answers('before any rollup');
is($node->safe_psql('postgres', q{SELECT source_writes.compact('a'), source_writes.compact('c')}), '0|0',
	'compact() deletes no history (none is out of retention)');
my $cat = catalog_of('a');
ok($cat =~ /^(\d+) rows, (\d+) segments of (\d+)$/ && $1 <= 20 && $2 >= 30,
	"a is rolled up into segments ($cat)");
same_batches('the rollup');
is($node->safe_psql('postgres', q{
	SELECT bool_and(ts_to >= ts_from AND batch_to >= batch_from AND nbatches <= 10
	                AND current_blocks IS NOT NULL AND history_blocks IS NOT NULL)
	       AND count(DISTINCT xid) = 1 AND count(*) FILTER (WHERE nbatches = 10) > 25
	FROM source_writes.batch_segments}), 't',
	'segments of 10 batches (or fewer, not to split a timestamp), each knowing where its batches wrote, from one compact()');
is(same_answers('after the rollup'), $before, 'the answers did not change');

# 2. writers commit to both, and a is compacted, all the time
my $dir = PostgreSQL::Test::Utils::tempdir();
my %script = (
	writer => q{
\set i random(1000, 10000000) * 3 + random(1, 2)
CALL churn(:i, 1);
},
	compactor => $compact_both);
my %bench;
for my $name (sort keys %script)
{
	my $file = "$dir/$name.sql";
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	print $fh $script{$name};
	close $fh;
	$bench{$name} = { out => '', err => '' };
	$bench{$name}{run} = IPC::Run::start(
		[ 'pgbench', '-n', $name eq 'writer' ? ('-c', 3, '-t', 100) : ('-c', 1, '-T', 4),
		  '-f', $file,
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$bench{$name}{out}, '2>', \$bench{$name}{err});
}
for my $name (sort keys %bench)
{
	$bench{$name}{run}->finish;
	is($? >> 8, 0, "pgbench $name ran without errors")
	  or diag($bench{$name}{err});
	unlike($bench{$name}{err}, qr/ERROR/, "pgbench $name saw no error");
}
my $loaded = same_answers('after writers and compactions ran together');
my %now = map { $_ => 1 } split /\n/, $loaded;
my @then = grep { /^\d+ as of: / } split /\n/, $before;
is(scalar(grep { !$now{$_} } @then), 0,
	'the contents as of the times before did not change (' . scalar(@then) . ' times)');
$node->safe_psql('postgres', $compact_both);
like(catalog_of('a'), qr/^\d+ rows, \d+ segments/, 'a rolled up while written');
same_answers('after one more rollup');

# 3. since moves into the segments: a's are folded, b's batch rows
my $middle = $node->safe_psql('postgres', q{
	SELECT (f.upper - ts) || ' ms' FROM source_writes.frontiers('a') f,
	  (SELECT ts_to AS ts FROM source_writes.batch_segments WHERE source = 'a'::regclass
	   ORDER BY ts_to OFFSET 20 LIMIT 1) s});
$node->safe_psql('postgres', qq{
	ALTER FOREIGN TABLE a OPTIONS (ADD retain_history '$middle');
	ALTER FOREIGN TABLE b OPTIONS (ADD retain_history '$middle');
});
$node->safe_psql('postgres', $compact_both);
my $folded = catalog_of('a');
like($folded, qr/^\d+ rows, \d+ segments/, "a's segments before since folded ($folded)");
same_batches('the fold');
same_answers('after retention and compaction');

# 4. kill -9 while a rollup's transaction is open, then roll up for good
$node->safe_psql('postgres', 'CALL churn(400, 100)');
$node->safe_psql('postgres', q{
	SET source_writes.segment_batches = 65535;
	SELECT source_writes.compact('a'), source_writes.compact('b'),
	       source_writes.compact('c'), source_writes.compact('d');
});
my $pre_crash = same_answers('before the crash');
my $pre_catalog = catalog_of('a');
my $session = $node->background_psql('postgres');
$session->query_safe('BEGIN');
$session->query_safe(q{SELECT source_writes.compact('a')});
my $pid = $session->query_safe('SELECT pg_backend_pid()');
die "no backend pid: '$pid'" unless $pid =~ /^\d+$/;
isnt($session->query_safe(q{
	SELECT count(*) FROM source_writes.batches WHERE source = 'a'::regclass}) + 0,
	(split / /, $pre_catalog)[0] + 0, 'the open transaction rolled up batches');
my $from = -s $node->logfile;
kill 'KILL', $pid;
SwTest::wait_for_restart($node, $from);
eval { $session->quit };
is(catalog_of('a'), $pre_catalog, 'after the crash the catalog is as before the rollup');
is(same_answers('after the crash'), $pre_crash, 'and answers the same');
$node->safe_psql('postgres', q{SELECT source_writes.compact('a'), source_writes.compact('c')});
is(same_answers('after the rollup that committed'), $pre_crash, 'still the same');
same_batches('the rollup after the crash');

# 5. pg_dump and pg_restore keep the segments
$node->safe_psql('postgres', 'CREATE DATABASE restored');
SwTest::run_client('pg_dump', 'pg_dump', '-Fc', '-f', "$dir/db.dump", $node->connstr('postgres'));
SwTest::run_client('pg_restore', 'pg_restore', '-d', $node->connstr('restored'), "$dir/db.dump");
is(catalog_of('a', 'restored'), catalog_of('a'), 'the restored catalog has the segments');
is(same_answers('restored', 'restored'), $pre_crash, 'the restored database answers the same');
$node->safe_psql('restored', 'CALL churn(600, 30)');
$node->safe_psql('restored', $compact_both);
same_answers('restored, written and rolled up again', 'restored');

# 6. the supervisor rolls up on its own
$node->safe_psql('postgres', 'CALL churn(700, 50)');
my $rows = $node->safe_psql('postgres',
	q{SELECT count(*) FROM source_writes.batches WHERE source = 'a'::regclass});
ok($rows >= 50, "a has $rows batch rows");
$node->append_conf('postgresql.conf', "source_writes.compaction_interval = 1\n");
$node->reload;
ok($node->poll_query_until('postgres', q{
	SELECT count(*) < 21 FROM source_writes.batches WHERE source = 'a'::regclass}),
	'the supervisor rolled up the batch rows');
$node->append_conf('postgresql.conf', "source_writes.compaction_interval = 0\n");
$node->reload;
# both compacted to the same since (the supervisor may have done one only)
$node->safe_psql('postgres', q{
	SELECT source_writes.compact('a'), source_writes.compact('b'),
	       source_writes.compact('c'), source_writes.compact('d')});
same_answers('after the supervisor rolled up');

# 7. segments of several chunks (64 batches each): a window of a few
# batches reads the blocks of its chunks only, and answers the same
$node->safe_psql('postgres', 'CALL churn(1000, 2600)');
$node->safe_psql('postgres', q{
	SET source_writes.segment_batches = 65535;
	SELECT source_writes.compact('b'), source_writes.compact('d');
	SET source_writes.segment_batches = 2500;
	SELECT source_writes.compact('a'), source_writes.compact('c');
});
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments
	WHERE source = 'c'::regclass AND nbatches > 2000
	  AND array_length(current_chunks, 1) = 240}), '1',
	'c has a segment of 40 chunks');
same_answers('segments of several chunks');

# 8. dropping a source drops its segments
$node->safe_psql('postgres', 'DROP FOREIGN TABLE a');
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments s
	WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.source)}),
	'0', 'the dropped source left no segment');
ok($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments WHERE source = 'c'::regclass}) > 0,
	'another source kept its own');

done_testing();
