# Compaction never stalls writers: it takes no lock that writers take, so
# a commit to a source is as quick while a compaction of the source runs,
# or sits uncommitted in an open transaction, as it is otherwise.  A
# compaction can be cancelled and then deletes nothing; a user who keeps a
# compaction open does not stop the background worker from compacting the
# other sources; and a transaction that compacts one source and writes
# another does not deadlock with a writer of both.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;

# the background pass is turned on later, when its part of the test runs
my $node = SwTest::node('compaction',
	conf => "source_writes.compaction_interval = 0\nautovacuum = off\n");
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int, v text) SERVER k OPTIONS (topic 't', retain_history '0');
	INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 1000000) g;
	DELETE FROM t;
});

# rows in a source's history heap, as superuser
sub history_rows
{
	my ($table) = @_;
	return $node->safe_psql('postgres', qq{
		SELECT format('SELECT count(*) FROM %s', history_rel::regclass)
		FROM source_writes.source_tables WHERE relid = '$table'::regclass \\gexec});
}
is(history_rows('t'), '1000000', 'a million history rows to compact');

# A compaction can be cancelled: it stops with the cancel error and leaves
# every row.
my $started = time;
my ($ret, $stdout, $stderr) = $node->psql('postgres', q{
	SET statement_timeout = '50ms';
	SELECT source_writes.compact('t');
});
my $cancelled_after = time - $started;
like($stderr, qr/canceling statement due to statement timeout/,
	'a compaction of a large history is cancelled by statement_timeout');
note(sprintf('the cancelled compaction returned after %.0f ms', 1000 * $cancelled_after));
is(history_rows('t'), '1000000', 'a cancelled compaction deletes nothing');

# Session b commits one-row INSERTs to the source; each (INSERT and its
# commit) is timed from here.  lock_timeout makes a commit that waits for
# the compaction fail rather than hang.  A commit must take less than
# 500 ms: a few ms is usual, the rest is margin for a busy machine; one that
# waited for the compaction would take as long as its transaction stays
# open, which here is until the lock_timeout of 2 s.
my $b = $node->background_psql('postgres', on_error_stop => 0);
$b->set_query_timer_restart;
$b->query_safe(q{SET lock_timeout = '2s'});

# run a query in a session that goes on after errors; returns its output
# and error (the session keeps its stderr until cleared)
sub query_err
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my ($out) = $session->query($sql);
	return ($out, $session->{stderr});
}

my $commits = 0;
my @errors;
sub timed_commit
{
	my $t0 = time;
	my (undef, $err) = query_err($b, sprintf(q{INSERT INTO t VALUES (%d, 'b')}, ++$commits));
	my $ms = 1000 * (time - $t0);
	push @errors, $err if $err ne '';
	return $ms;
}
sub max_of { my $m = 0; $m = $_ > $m ? $_ : $m for @_; return $m }

# without compaction, for comparison
my @idle = map { timed_commit() } 1 .. 10;
note(sprintf('commits with no compaction: max %.1f ms', max_of(@idle)));

# Session a compacts in a transaction: while compact() runs, b commits.
my $a = $node->background_psql('postgres', on_error_stop => 0);
$a->set_query_timer_restart;
my $a_pid = $a->query_safe('SELECT pg_backend_pid()');
my $a_state = sub {
	my ($state, $err) = query_err($b, "SELECT state FROM pg_stat_activity WHERE pid = $a_pid");
	die "could not read the state of session a: $err" if $err ne '';
	return $state;
};
$a->query_safe('BEGIN');
$a->query_until(qr/compacting/, qq{\\echo compacting\nSELECT source_writes.compact('t');\n});
ok($node->poll_query_until('postgres', qq{
	SELECT query LIKE '%source_writes.compact(%' FROM pg_stat_activity WHERE pid = $a_pid}),
	'session a has started compact()');

# commits begun while compact() runs, and how many of them also ended
# before it did
my @running;
my $within = 0;
while ($a_state->() eq 'active')
{
	push @running, timed_commit();
	$within++ if $a_state->() eq 'active';
}
note(sprintf('commits begun while compact() ran: %d (%d ended before it), max %.1f ms',
		scalar(@running), $within, max_of(@running)));
cmp_ok($within, '>=', 3, 'session b committed while compact() was running');
cmp_ok(max_of(@running), '<', 500, 'no commit waited for the running compaction (< 500 ms)');

# compact() has returned; its transaction stays open while b commits
is($a_state->(), 'idle in transaction', 'compact() returned in an open transaction');
my @held = map { timed_commit() } 1 .. 5;
note(sprintf('commits while compact() was held open: max %.1f ms', max_of(@held)));
cmp_ok(max_of(@held), '<', 500,
	'no commit waited for the open transaction of a compaction (< 500 ms)');
is(join('', @errors), '', 'no commit failed');

my ($out) = $a->query('COMMIT');
is($out, '1000000', 'the compaction deleted the million history rows');
is(history_rows('t'), '0', 'and they are gone once it committed');
is($node->safe_psql('postgres', q{SELECT count(*) FROM t WHERE v = 'b'}),
	$commits, 'every commit of session b is there');
$b->quit;

# The background worker is not stalled by a user who keeps a compaction
# open: it skips that source and goes on compacting the others.  Source
# other gets history twice, the second time after the first was compacted:
# a worker that waits for the user's source, whichever of the two it comes
# to first in a pass, never compacts the second.
$node->safe_psql('postgres', q{
	CREATE FOREIGN TABLE held (id int) SERVER k OPTIONS (topic 'held', retain_history '0');
	CREATE FOREIGN TABLE other (id int) SERVER k OPTIONS (topic 'other', retain_history '0');
	INSERT INTO held SELECT generate_series(1, 1000);
	DELETE FROM held WHERE id <= 500;
	INSERT INTO other SELECT generate_series(1, 1000);
});
$a->query_safe('BEGIN');
is($a->query_safe(q{SELECT source_writes.compact('held')}), '500',
	'a user compacts source held and keeps the transaction open');
$node->append_conf('postgresql.conf', "source_writes.compaction_interval = '1s'\n");
$node->reload;
for my $round (1, 2)
{
	is($node->safe_psql('postgres', sprintf(q{
		WITH d AS (DELETE FROM other WHERE id > %d AND id <= %d RETURNING 1)
		SELECT count(*) FROM d}, 500 * ($round - 1), 500 * $round)),
		'500', "round $round: source other gets history to compact");
	ok($node->poll_query_until('postgres', sprintf(q{SELECT count(*) = 0 FROM %s},
				$node->safe_psql('postgres',
					q{SELECT history_rel::regclass FROM source_writes.source_tables
					  WHERE relid = 'other'::regclass}))),
		"round $round: the background worker compacts source other meanwhile");
}
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
	WHERE a.backend_type = 'source_writes launcher' AND NOT l.granted}),
	'0', 'the background worker waits for no lock');
is(history_rows('held'), '500', 'source held keeps its history while the user holds it');
$a->query_safe('COMMIT');
is(history_rows('held'), '0', 'and loses it when the user commits');

# A transaction that compacts source dl_a and then writes dl_b, and one
# that writes dl_b and dl_a, commit without deadlock.  (dl_b is created
# first: a compaction that held the writers' lock of dl_a would then
# deadlock with a commit, which locks the sources in OID order.)
$node->safe_psql('postgres', q{
	CREATE FOREIGN TABLE dl_b (id int) SERVER k OPTIONS (topic 'dl_b');
	CREATE FOREIGN TABLE dl_a (id int) SERVER k OPTIONS (topic 'dl_a', retain_history '0');
	INSERT INTO dl_a VALUES (0);
	DELETE FROM dl_a;
});
my $w = $node->background_psql('postgres', on_error_stop => 0);
$w->set_query_timer_restart;
my $w_pid = $w->query_safe('SELECT pg_backend_pid()');
$w->query_safe('BEGIN; INSERT INTO dl_b VALUES (1); INSERT INTO dl_a VALUES (1)');
$a->query_safe(q{BEGIN; SELECT source_writes.compact('dl_a'); INSERT INTO dl_b VALUES (2)});
$w->query_until(qr/committing/, "\\echo committing\nCOMMIT;\n");
ok($node->poll_query_until('postgres', qq{
	SELECT state = 'idle' OR wait_event_type = 'Lock'
	FROM pg_stat_activity WHERE pid = $w_pid}),
	'the writer of both has committed, or waits');
is((query_err($a, 'COMMIT'))[1], '', 'the compacting transaction commits');
# (what its COMMIT said is in its stderr since; nothing else went there)
$w->query('SELECT 1');
is($w->{stderr}, '', 'the writer of both commits');
is($node->safe_psql('postgres',
		q{SELECT (SELECT string_agg(id::text, ',' ORDER BY id) FROM dl_b) || ' / ' ||
		         (SELECT string_agg(id::text, ',' ORDER BY id) FROM dl_a)}),
	'1,2 / 1', 'both transactions wrote their rows');

$w->quit;
$a->quit;
done_testing();
