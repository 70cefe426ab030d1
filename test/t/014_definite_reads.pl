# Reads of the past are definite under load: while writers commit and
# compaction runs all the time, a read as of a time T either gives the
# contents at T or says T is out of range, and the upper that frontiers()
# gives agrees with the log that updates() gives in the same snapshot.
#
# Writers commit transactions that each insert the next number of a
# counter into the source and delete the number K below it; a plain
# counter row serialises them, so the contents at any time after the
# first batch are exactly K consecutive numbers.  The source keeps 300 ms
# of history and is compacted in a loop.  Readers meanwhile check:
#
#   as of T, for T = upper - 1, a random readable time, or since: K
#   consecutive numbers, or the out-of-range error (22023);
#
#   in one statement (READ COMMITTED) and in a REPEATABLE READ
#   transaction: the updates below upper consolidate to K consecutive
#   numbers, each once; the last batch below upper (at upper - 1) is in
#   the log; every batch in [since, upper) has its updates in
#   updates(since, until => upper); and the contents as of upper - 1 are
#   those numbers.
#
# No client may ever see another error, such as "has no storage".
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;

my $K = 10;
my $duration = 12;    # seconds of load

# (tens of thousands of statements: not in the server log)
my $node = SwTest::node('definite', conf => q{
source_writes.compaction_interval = 1s
max_connections = 30
log_statement = none
});
$node->safe_psql('postgres', qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE feed (n bigint) SERVER k
	  OPTIONS (topic 'feed', retain_history '300 ms');
	CREATE TABLE counter (n bigint);
	INSERT INTO counter VALUES ($K);
	INSERT INTO feed SELECT generate_series(1, $K);
});
my $first_upper = $node->safe_psql('postgres',
	q{SELECT upper FROM source_writes.frontiers('feed')});

my $dir = PostgreSQL::Test::Utils::tempdir();
my %script = (
	writer => qq{
BEGIN;
UPDATE counter SET n = n + 1 RETURNING n \\gset
INSERT INTO feed VALUES (:n);
DELETE FROM feed WHERE n = :n - $K;
COMMIT;
},
	compactor => q{
SELECT source_writes.compact('feed');
});
my %bench;
for my $name (sort keys %script)
{
	my $file = "$dir/$name.sql";
	open(my $fh, '>', $file) or die "cannot write $file: $!";
	print $fh $script{$name};
	close $fh;
	my $clients = $name eq 'writer' ? 2 : 1;
	$bench{$name} = { out => '', err => '' };
	$bench{$name}{run} = IPC::Run::start(
		[ 'pgbench', '-n', '-c', $clients, '-T', $duration, '-f', $file,
		  '-h', $node->host, '-p', $node->port, 'postgres' ],
		'>', \$bench{$name}{out}, '2>', \$bench{$name}{err});
}

# from here on, every readable time is after the first batch
ok($node->poll_query_until('postgres',
		"SELECT since >= $first_upper FROM source_writes.frontiers('feed')"),
	'the writers move since past the first batch');

# run a query in a session that goes on after errors: its output and errors
sub query_err
{
	my ($session, $sql) = @_;
	$session->{stderr} = '';
	my ($out) = $session->query($sql);
	return ($out, $session->{stderr});
}

my %count;
my @violations;
sub violation
{
	my ($what) = @_;
	my ($kind) = $what =~ /^(as of|read committed|repeatable read|frontiers\(\))/;
	push @violations, $what;
	$count{violation}++;
	$count{"violation ($kind)"}++;
}

# errors: none, or only the out-of-range error when $range_ok
sub check_errors
{
	my ($what, $err, $range_ok) = @_;
	return 'none' if $err eq '';
	my @codes = $err =~ /ERROR:\s+([0-9A-Z]{5}):/g;
	if ($range_ok && @codes == 1 && $codes[0] eq '22023'
		&& $err =~ /cannot be read as of/)
	{
		return 'range';
	}
	violation("$what: $err");
	return 'error';
}

# count|min|max of K consecutive numbers?
sub consecutive
{
	my ($c, $min, $max) = split /\|/, shift;
	return defined $max && $c == $K && $max - $min == $K - 1;
}

# The statement that checks frontiers() against updates() in one snapshot:
# upper; count, min and max of the consolidated contents below upper, and
# whether each is there once; whether the last update is at upper - 1;
# how many distinct times updates(since, upper) has, and how many batches
# there are in [since, upper).
my $agree = q{
	WITH f AS (SELECT since, upper FROM source_writes.frontiers('feed')),
	u AS (SELECT (data).n, sum(diff) AS m
	      FROM f, source_writes.updates(NULL::feed, until => f.upper)
	      GROUP BY 1 HAVING sum(diff) <> 0),
	l AS (SELECT u.ts
	      FROM f, source_writes.updates(NULL::feed, since => f.since, until => f.upper) u)
	SELECT f.upper,
	       (SELECT count(*) || '|' || min(n) || '|' || max(n) FROM u),
	       (SELECT bool_and(m = 1) FROM u),
	       (SELECT max(ts) FROM l) = f.upper - 1,
	       (SELECT count(DISTINCT ts) FROM l),
	       (SELECT count(*) FROM source_writes.batches b
	        WHERE b.source = 'feed'::regclass AND b.ts >= f.since AND b.ts < f.upper)
	FROM f};

# check the output of $agree; returns upper and the contents, or nothing
sub check_agree
{
	my ($what, $out) = @_;
	my @f = split /\|/, $out, -1;
	if (@f != 8)
	{
		violation("$what: unexpected output $out");
		return;
	}
	my ($upper, $once, $last, $times, $batches) = @f[ 0, 4, 5, 6, 7 ];
	my $contents = join('|', @f[ 1 .. 3 ]);
	if (!consecutive($contents) || $once ne 't')
	{
		violation("$what: updates below upper $upper consolidate to $contents (once: $once)");
		return;
	}
	if ($last ne 't')
	{
		violation("$what: the batch at upper - 1 = " . ($upper - 1) . ' is missing from updates()');
		return;
	}
	if ($times != $batches || $batches < 1)
	{
		violation("$what: $batches batches in [since, $upper) but $times in updates()");
		return;
	}
	return ($upper, $contents);
}

my @readers = map {
	my $s = $node->background_psql('postgres', on_error_stop => 0);
	$s->set_query_timer_restart;
	$s->query_safe('\set VERBOSITY verbose');
	$s;
} 1 .. 3;
my ($as_of_reader, $rc_reader, $rr_reader) = @readers;

# one read as of a time picked from the frontiers just read
my $pick = 0;
sub read_as_of
{
	my ($out, $err) = query_err($as_of_reader,
		q{SELECT since, upper FROM source_writes.frontiers('feed')});
	return if check_errors('frontiers()', $err, 0) ne 'none';
	my ($since, $upper) = split /\|/, $out;
	my $t = (
		$upper - 1,
		$since + int(rand($upper - $since)),
		$since)[ $pick++ % 3 ];
	($out, $err) = query_err($as_of_reader, qq{
		SET source_writes.as_of = $t;
		SELECT count(*) || '|' || min(n) || '|' || max(n) FROM feed;
		RESET source_writes.as_of});
	my $e = check_errors("as of $t", $err, 1);
	if ($e eq 'range')
	{
		$count{as_of_range}++;
	}
	elsif ($e eq 'none')
	{
		if (consecutive($out)) { $count{as_of_ok}++ }
		else { violation("as of $t: $out") }
	}
}

# frontiers() and updates() in one READ COMMITTED statement, then the
# contents as of upper - 1
sub read_committed
{
	my ($out, $err) = query_err($rc_reader, $agree);
	return if check_errors('read committed', $err, 0) ne 'none';
	my ($upper, $contents) = check_agree('read committed', $out);
	return unless $upper;
	$count{rc_ok}++;
	($out, $err) = query_err($rc_reader, sprintf(q{
		SET source_writes.as_of = %d;
		SELECT count(*) || '|' || min(n) || '|' || max(n) FROM feed;
		RESET source_writes.as_of}, $upper - 1));
	return if check_errors('read committed, as of upper - 1', $err, 1) ne 'none';
	if ($out eq $contents) { $count{rc_as_of_ok}++ }
	else { violation("read committed: as of upper - 1 = $out, updates() say $contents") }
}

# the same in a REPEATABLE READ transaction whose snapshot was taken before
sub repeatable_read
{
	my ($out, $err) = query_err($rr_reader,
		'BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM counter');
	if (check_errors('repeatable read', $err, 0) eq 'none')
	{
		($out, $err) = query_err($rr_reader, $agree);
		if (check_errors('repeatable read', $err, 0) eq 'none')
		{
			my ($upper, $contents) = check_agree('repeatable read', $out);
			if ($upper)
			{
				$count{rr_ok}++;
				($out, $err) = query_err($rr_reader, sprintf(q{
					SET LOCAL source_writes.as_of = %d;
					SELECT count(*) || '|' || min(n) || '|' || max(n) FROM feed},
					$upper - 1));
				if (check_errors('repeatable read, as of upper - 1', $err, 1) eq 'none')
				{
					if ($out eq $contents) { $count{rr_as_of_ok}++ }
					else { violation("repeatable read: as of upper - 1 = $out, updates() say $contents") }
				}
			}
		}
	}
	query_err($rr_reader, 'ROLLBACK');
}

{
	# thousands of queries: keep them out of the log
	no warnings 'redefine';
	local *PostgreSQL::Test::BackgroundPsql::note = sub { };
	my $end = time + $duration - 2;
	while (time < $end)
	{
		read_as_of();
		read_committed();
		repeatable_read();
	}
}
$_->quit for @readers;
$bench{$_}{run}->finish for sort keys %bench;

$count{$_} //= 0
  for qw(as_of_ok as_of_range rc_ok rc_as_of_ok rr_ok rr_as_of_ok violation);
note(join(', ', map { "$_ $count{$_}" } sort keys %count));
my $commits = $node->safe_psql('postgres', 'SELECT n FROM counter') - $K;
note("writer commits: $commits");
diag("violation: $_") for @violations[ 0 .. ($#violations > 9 ? 9 : $#violations) ];
is($count{violation}, 0, 'no read saw wrong contents, a partial log or an unexpected error');

for my $name (sort keys %bench)
{
	like($bench{$name}{out}, qr/number of failed transactions: 0 /,
		"$name: no transaction failed");
	unlike($bench{$name}{err}, qr/ERROR|abort/, "$name: no error");
}
ok($commits >= 500, "the writers committed ($commits) under the readers");
cmp_ok($count{as_of_ok}, '>=', 50, 'reads as of a time succeeded');
cmp_ok($count{rc_ok}, '>=', 20, 'one-statement checks of frontiers() and updates() succeeded');
cmp_ok($count{rc_as_of_ok}, '>=', 10, 'and reads as of their upper - 1');
cmp_ok($count{rr_ok}, '>=', 20, 'REPEATABLE READ checks of frontiers() and updates() succeeded');
cmp_ok($count{rr_as_of_ok}, '>=', 10, 'and reads as of their upper - 1');
ok(!$node->log_contains('has no storage'), 'the server never said "has no storage"');

# what is left: the last K numbers, and a log that consolidates to them
my $last = $K + $commits;
is($node->safe_psql('postgres', 'SELECT count(*), min(n), max(n) FROM feed'),
	join('|', $K, $last - $K + 1, $last), 'the source holds the last K numbers');
is($node->safe_psql('postgres', q{
	SELECT count(*)
	FROM (SELECT (data).n, sum(diff) AS m FROM source_writes.updates(NULL::feed) GROUP BY 1) u
	FULL JOIN (SELECT n, count(*) AS m FROM feed GROUP BY 1) f USING (n)
	WHERE coalesce(u.m, 0) <> coalesce(f.m, 0)}),
	'0', 'the log consolidates to the contents');

done_testing();
