# kill -9 in the middle of many concurrent commits to one source: no
# acknowledged batch is lost, none is there twice, the log has no gap and
# no doubled timestamp, upper is not held back by batches the crash cut,
# reads below upper stay true, and commits and notifications go on.
#
# Writers stamp their batches under a short stamp lock and commit after
# releasing it; a batch stamped while earlier ones were still committing
# names them as pending.  Three rounds of 16 writers and two readers end
# three ways:
#   1. kill -9 of the postmaster (its backends go on alone until they
#      notice);
#   2. kill -9 of one writer's backend (the postmaster kills the others
#      wherever they are, and restarts);
#   3. kill -9 of the postmaster and all its children at once.
# Of the writers, 4 write a second source in the same transactions, and 4
# send a NOTIFY in theirs.  Halfway through a round, a "blocker" session
# commits a NOTIFY that waits for a synchronous standby that does not
# exist: it holds PostgreSQL's notification lock, so the NOTIFY writers
# get stuck in commit after stamping their batches.  The other writers go
# on committing batches that name the stuck ones as pending, and upper
# stays behind.  The crash ends the stuck transactions without a commit:
# after it, upper must pass their batches.
#
# What was acknowledged: each writer is a psql reading from a pipe
# (-v ON_ERROR_STOP=1) one transaction after another, its row
# (client, n) with n = 1, 2, ..., each followed by "\echo n".  psql runs
# the \echo only after the server has answered the COMMIT (or the
# autocommitted INSERT), and exits at the first error or lost connection,
# so its output is exactly the transactions whose commit was acknowledged,
# and it attempted at most one more (n = last + 1), whose commit may have
# been lost in the crash or made durable without an answer.  So:
#   acknowledged rows  <=  rows present, each once  <=  attempted rows.
#
# The readers meanwhile read upper U and the number of batches below it in
# one snapshot, or the source as of U - 1 (one row per batch).  Times
# below upper are final: after every crash, what they read must still be
# the number of batches up to U - 1.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time usleep);
use SwTest;

my $writers = 16;

# (tens of thousands of statements: not in the server log; commits wait
# for a standby only where a session asks for it: the blocker)
my $node = SwTest::node('crash_commits', conf => q{
restart_after_crash = on
max_connections = 50
log_statement = none
wal_level = replica
max_wal_senders = 1
synchronous_standby_names = 'nobody'
synchronous_commit = local
});
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE ev (client int, n int) SERVER k OPTIONS (topic 'ev');
	CREATE FOREIGN TABLE ev2 (client int, n int) SERVER k OPTIONS (topic 'ev2');
	CREATE TABLE blocker (i int);
});
my $channel = $node->safe_psql('postgres', q{SELECT source_writes.channel('ev')});
my $dir = PostgreSQL::Test::Utils::tempdir();

# what was acknowledged and attempted, as "client,n" => 1, per source
my (%acked, %attempted);
# what the readers read: [T, number of batches of ev up to T]
my @reads;

sub scalar_query
{
	return $node->safe_psql('postgres', shift);
}

sub batches
{
	my ($t) = @_;
	return scalar_query(
		"SELECT count(*) FROM source_writes.batches WHERE source = '$t'::regclass");
}

# rows written by the test itself (client 0), acknowledged when safe_psql returns
sub insert_acked
{
	my ($n) = @_;
	$node->safe_psql('postgres', "INSERT INTO ev VALUES (0, $n)");
	$acked{ev}{"0,$n"} = $attempted{ev}{"0,$n"} = 1;
}
insert_acked(0);    # so that upper - 1 is readable from the start

# a psql fed by a generator through a pipe; its output and errors go to files
sub start_psql
{
	my ($name, $generator, @args) = @_;
	local $ENV{PGAPPNAME} = 'sw_' . ($name =~ /^([a-z]+)/)[0];
	my %c = (name => $name, out => "$dir/$name.out", err => "$dir/$name.err");
	$c{run} = IPC::Run::start([ $^X, '-e', $generator, @args ], '|',
		[ 'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=1',
		  '-d', $node->connstr('postgres') ],
		'>', $c{out}, '2>', $c{err});
	return \%c;
}

# (the test ignores SIGPIPE, and so would the generators: they would go
# on writing long after psql is gone)
my $writer_gen = <<'EOF';
$SIG{PIPE} = 'DEFAULT';
my ($c, $kind, $limit) = @ARGV;
for my $n (1 .. $limit)
{
	print $kind eq 'two'
	  ? "BEGIN;\nINSERT INTO ev VALUES ($c, $n);\nINSERT INTO ev2 VALUES ($c, $n);\nCOMMIT;\n"
	  : $kind eq 'notify'
	  ? "BEGIN;\nINSERT INTO ev VALUES ($c, $n);\nNOTIFY sw_slow_commits;\nCOMMIT;\n"
	  : "INSERT INTO ev VALUES ($c, $n);\n";
	print "\\echo $n\n";
}
EOF
my $reader_gen = <<'EOF';
$SIG{PIPE} = 'DEFAULT';
my ($kind) = @ARGV;
for (1 .. 1_000_000)
{
	print $kind eq 'as_of'
	  ? "SELECT upper - 1 AS t FROM source_writes.frontiers('ev') \\gset\n"
	  . "SET source_writes.as_of = :t;\n"
	  . "SELECT :t, count(*) FROM ev;\n"
	  . "RESET source_writes.as_of;\n"
	  : "SELECT f.upper - 1, (SELECT count(*) FROM source_writes.batches b\n"
	  . "  WHERE b.source = 'ev'::regclass AND b.ts < f.upper)\n"
	  . "FROM source_writes.frontiers('ev') f;\n";
}
EOF

# writers of round $round: clients 100 * $round + 1 .. 100 * $round + 16;
# every fourth writes ev2 too, every fourth (others) sends a NOTIFY; each
# stops after $limit rows
sub start_writers
{
	my ($round, $limit) = @_;
	my @w;
	for my $i (1 .. $writers)
	{
		my $c = 100 * $round + $i;
		my $kind = ('two', 'plain', 'notify', 'plain')[ $i % 4 ];
		my $w = start_psql("writer$c", $writer_gen, $c, $kind, $limit);
		@$w{qw(client kind limit)} = ($c, $kind, $limit);
		push @w, $w;
	}
	return @w;
}

sub slurp_or_empty
{
	my ($file) = @_;
	return -e $file ? slurp_file($file) : '';
}

# once a writer's psql ended: record what it acknowledged and attempted;
# returns what went wrong, or ''
sub collect_writer
{
	my ($w, $crashed) = @_;
	$w->{run}->finish;    # the generator dies of SIGPIPE: no status to check
	my @n = split /\n/, slurp_or_empty($w->{out});
	my $err = slurp_or_empty($w->{err});
	for my $i (0 .. $#n)
	{
		return "ack line $i is '$n[$i]'" unless $n[$i] eq $i + 1;
	}
	return "error: $err" if $err =~ /ERROR:/;
	return "it ended without a crash: $err" if $crashed && @n == $w->{limit};
	return "it did not finish: $err" if !$crashed && @n != $w->{limit};
	return 'it acknowledged nothing' unless @n;
	my $last = @n < $w->{limit} ? @n + 1 : @n;
	for my $n (1 .. $last)
	{
		for my $t ($w->{kind} eq 'two' ? ('ev', 'ev2') : ('ev'))
		{
			$attempted{$t}{"$w->{client},$n"} = 1;
			$acked{$t}{"$w->{client},$n"} = 1 if $n <= @n;
		}
	}
	return '';
}

sub collect_reader
{
	my ($r) = @_;
	$r->{run}->finish;
	my $err = slurp_or_empty($r->{err});
	my @lines = split /\n/, slurp_or_empty($r->{out});
	push @reads, map { [ split /\|/ ] } @lines;
	return $err =~ /ERROR:/ ? "error: $err" : @lines ? '' : 'it read nothing';
}

# wait until $cond returns true; dies after 60 s or when a client failed
sub wait_for
{
	my ($what, $clients, $cond) = @_;
	my $deadline = time() + 60;
	until ($cond->())
	{
		my $failed = join('', map { slurp_or_empty($_->{err}) } @$clients);
		die "$what: a client failed: $failed" if $failed;
		die "$what: timed out" if time() > $deadline;
		usleep(50_000);
	}
}

# pid of every process whose parent is $ppid
sub children
{
	my ($ppid) = @_;
	my @pids;
	for my $stat (glob '/proc/[0-9]*/stat')
	{
		open(my $fh, '<', $stat) or next;
		my $line = <$fh>;
		close $fh;
		next unless defined $line && $line =~ /\)\s+\S+\s+(\d+)/;
		push @pids, $stat =~ m{/proc/(\d+)/} if $1 == $ppid;
	}
	return @pids;
}

# once the processes are gone (orphaned backends hold on to shared memory
# until they notice), start the server again
sub start_again
{
	my @pids = @_;
	usleep(100_000) while grep { kill(0, $_) } @pids;
	my $started = 0;
	for (1 .. 60)
	{
		last if ($started = $node->start(fail_ok => 1));
		sleep 1;
	}
	die 'the server did not start again' unless $started;
}

# wait until a notification on $channel carries $upper; false after 30 s
sub wait_notification
{
	my ($listener, $upper) = @_;
	my @got;
	my $deadline = time() + 30;
	while (time() < $deadline)
	{
		my $out = $listener->query_safe('SELECT 1');
		push @got, $1
		  while $out =~ /Asynchronous notification "\Q$channel\E" with payload "([^"]*)"/g;
		return 1 if grep { $_ eq $upper } @got;
		usleep(20_000);
	}
	diag("no notification of upper $upper; got: @got");
	return 0;
}

# the rows of a source against what was acknowledged and attempted
sub check_rows
{
	my ($what, $t) = @_;
	my %present;
	$present{$_}++ for split /\n/, scalar_query("SELECT client || ',' || n FROM $t");
	my @twice = grep { $present{$_} > 1 } sort keys %present;
	my @missing = grep { !$present{$_} } sort keys %{ $acked{$t} };
	my @unexpected = grep { !$attempted{$t}{$_} } sort keys %present;
	my $unacked = grep { !$acked{$t}{$_} } keys %present;
	is("@twice", '', "$what: no row of $t is there twice");
	is("@missing", '', "$what: every acknowledged row of $t is there ("
		  . scalar(keys %{ $acked{$t} }) . ')');
	is("@unexpected", '', "$what: every row of $t was attempted");
	note("$what: $unacked rows of $t committed without an acknowledgement so far");
}

# the log of a source: one batch per row, each with its own timestamp,
# upper just after the last, and reads as of sampled times
sub check_log
{
	my ($what, $t) = @_;
	is(scalar_query(qq{
		SELECT count(*) FROM (
		  (SELECT (data).* FROM source_writes.updates(NULL::$t) EXCEPT ALL SELECT * FROM $t)
		  UNION ALL
		  (SELECT * FROM $t EXCEPT ALL SELECT (data).* FROM source_writes.updates(NULL::$t))) d}),
		'0', "$what: the log of $t consolidates to its contents");
	is(scalar_query(qq{
		SELECT count(*) = count(DISTINCT ts),
		       max(ts) + 1 = (SELECT upper FROM source_writes.frontiers('$t'))
		FROM source_writes.batches WHERE source = '$t'::regclass}),
		't|t', "$what: $t: one timestamp per batch, upper just after the last");
	my $current = scalar_query(qq{
		SELECT current_rel FROM source_writes.source_tables WHERE relid = '$t'::regclass});
	is(scalar_query(qq{
		SELECT count(*) = (SELECT count(*) FROM source_writes.batches
		                   WHERE source = '$t'::regclass),
		       count(*) = count(b.batch), count(*) = count(DISTINCT c."\$batch")
		FROM $current c
		LEFT JOIN source_writes.batches b
		  ON b.source = '$t'::regclass AND b.batch = c."\$batch"}),
		't|t|t', "$what: $t: every row's batch is recorded, one row per batch");

	# a batch names as pending only earlier batches, of its source, or
	# batches that never committed
	is(scalar_query(qq{
		SELECT count(*)
		FROM source_writes.batches b, unnest(b.pending_ts, b.pending_xid) AS p(ts, xid)
		WHERE b.source = '$t'::regclass
		  AND (p.ts >= b.ts
		       OR (pg_xact_status(p.xid) IS DISTINCT FROM 'aborted'
		           AND NOT EXISTS (SELECT FROM source_writes.batches o
		                           WHERE o.source = b.source AND o.xid = p.xid
		                             AND o.ts = p.ts)))}),
		'0', "$what: $t: the pending batches named are earlier ones, committed or not at all");

	# as of sampled times, at and just below a batch: one row per batch
	my @ts = split /\n/, scalar_query(qq{
		SELECT ts FROM source_writes.batches WHERE source = '$t'::regclass ORDER BY ts});
	my $since = scalar_query("SELECT since FROM source_writes.frontiers('$t')");
	my (@times, @expected);
	for my $k (0 .. 20)
	{
		my $i = int($k * $#ts / 20);
		push @times, $ts[$i], $ts[$i] - 1;
		push @expected, "$ts[$i]|" . ($i + 1), ($ts[$i] - 1) . "|$i";
	}
	my @keep = grep { $times[$_] >= $since } 0 .. $#times;
	my $sql = join '', map {
		"SET source_writes.as_of = $times[$_]; SELECT $times[$_], count(*) FROM $t;\n"
	} @keep;
	my ($rc, $out, $err) = $node->psql('postgres', $sql);
	is($out . $err, join("\n", @expected[@keep]),
		"$what: $t as of " . scalar(@keep) . ' sampled times: one row per batch up to then');
}

# every read below upper still holds
sub check_reads
{
	my ($what) = @_;
	my @ts = split /\n/, scalar_query(q{
		SELECT ts FROM source_writes.batches WHERE source = 'ev'::regclass ORDER BY ts});
	my @wrong;
	for my $r (@reads)
	{
		my ($time, $count) = @$r;
		# the batches up to $time
		my ($lo, $hi) = (0, scalar @ts);
		while ($lo < $hi)
		{
			my $mid = int(($lo + $hi) / 2);
			if ($ts[$mid] <= $time) { $lo = $mid + 1 } else { $hi = $mid }
		}
		push @wrong, "up to $time: read $count, now $lo" if $lo != $count;
	}
	is(join('; ', @wrong[ 0 .. ($#wrong < 9 ? $#wrong : 9) ]), '',
		"$what: all " . scalar(@reads) . ' reads below upper so far still hold');
}

# the whole state after a restart
sub check_all
{
	my ($what) = @_;
	note("$what: ev has " . batches('ev') . ' batches, ev2 ' . batches('ev2'));
	check_rows($what, 'ev');
	check_rows($what, 'ev2');
	is(scalar_query(q{
		SELECT count(*) FROM (
		  (SELECT * FROM ev WHERE client % 4 = 0 AND client > 0 EXCEPT ALL SELECT * FROM ev2)
		  UNION ALL
		  (SELECT * FROM ev2 EXCEPT ALL SELECT * FROM ev)) d}),
		'0', "$what: the transactions over two sources are in both or in neither");
	is(scalar_query(q{
		SELECT count(*) = (SELECT count(*) FROM source_writes.batches
		                   WHERE source = 'ev2'::regclass)
		       AND bool_and(a.ts = b.ts)
		FROM source_writes.batches a
		JOIN source_writes.batches b ON a.xid = b.xid AND b.source = 'ev2'::regclass
		WHERE a.source = 'ev'::regclass}),
		't', "$what: their two batches share one timestamp");
	check_log($what, $_) for qw(ev ev2);
	check_reads($what);
}

# the number of batches and newest timestamp of each source.  (At
# thousands of commits a second, timestamps run ahead of the clock: after
# a restart, only the batches recovered keep the next ones after them.)
sub last_batches
{
	my ($what) = @_;
	my %last = map {
		$_ => [ split /\|/, scalar_query(qq{
			SELECT count(*) || '|' || coalesce(max(ts), 0)
			FROM source_writes.batches WHERE source = '$_'::regclass}) ]
	} qw(ev ev2);
	note("$what: the newest timestamp is "
		  . scalar_query("SELECT $last{ev}[1] - (extract(epoch FROM clock_timestamp()) * 1000)::bigint")
		  . ' ms ahead of the clock');
	return %last;
}

# the batches since %$before (what a restart found) all come after those
sub check_after
{
	my ($what, $before) = @_;
	for my $t (qw(ev ev2))
	{
		my ($count, $max) = @{ $before->{$t} };
		is(scalar_query(qq{
			SELECT count(*) FILTER (WHERE ts <= $max) = $count AND count(*) > $count
			FROM source_writes.batches WHERE source = '$t'::regclass}),
			't', "$what: $t: the batches since the last restart all come after those before");
	}
}

my %before = last_batches('at the start');
my @victims = ('postmaster', 'backend', 'everything');
for my $round (1 .. 3)
{
	my $victim = $victims[ $round - 1 ];
	my $what = "round $round, kill -9 of " . ($victim eq 'everything'
		? 'the postmaster and its children' : "the $victim");
	my $start = batches('ev');

	my @w = start_writers($round, 1_000_000);
	my @r = map { start_psql("reader$round$_", $reader_gen, $_) } qw(count as_of);
	my $first = 100 * $round;
	wait_for("$what: first batches", [ @w, @r ], sub {
		batches('ev') >= $start + 1000
		  && scalar_query("SELECT count(DISTINCT client) FROM ev WHERE client > $first")
		  == $writers;
	});

	# the NOTIFY writers get stuck in commit behind the blocker
	my $blocker = start_psql("blocker$round", q{
		$SIG{PIPE} = 'DEFAULT';
		print "SET synchronous_commit = remote_write;\n",
		  "BEGIN;\nINSERT INTO blocker VALUES (1);\nNOTIFY sw_slow_commits;\nCOMMIT;\n";
	});
	wait_for("$what: the blocker waits", [ @w, @r, $blocker ], sub {
		scalar_query(q{SELECT count(*) FROM pg_stat_activity
		               WHERE application_name = 'sw_blocker' AND wait_event = 'SyncRep'})
		  eq '1';
	});
	my $stuck_query = q{
		SELECT string_agg(a.backend_xid::text, ' ' ORDER BY a.pid)
		FROM pg_locks l JOIN pg_stat_activity a USING (pid)
		WHERE l.locktype = 'object' AND l.classid = 'pg_database'::regclass
		  AND NOT l.granted AND a.application_name = 'sw_writer'};
	my @stuck;
	wait_for("$what: NOTIFY writers stuck", [ @w, @r ], sub {
		@stuck = split / /, scalar_query($stuck_query);
		return @stuck == $writers / 4;
	});
	my $stuck_at = batches('ev');
	wait_for("$what: batches after the stuck ones", [ @w, @r ],
		sub { batches('ev') >= $stuck_at + 2000 });
	is(scalar_query($stuck_query), "@stuck",
		"$what: 4 writers stuck in commit, the others committed 2000 batches meanwhile");
	is(scalar_query(q{
		SELECT f.upper <= max(b.ts)
		FROM source_writes.frontiers('ev') f, source_writes.batches b
		WHERE b.source = 'ev'::regclass GROUP BY f.upper}),
		't', "$what: upper stays behind the stuck batches");

	my $postmaster = (split /\n/, slurp_file($node->data_dir . '/postmaster.pid'))[0];
	my $from = -s $node->logfile;
	if ($victim eq 'postmaster')
	{
		$node->kill9;
	}
	elsif ($victim eq 'backend')
	{
		my $pid = scalar_query(q{
			SELECT pid FROM pg_stat_activity WHERE application_name = 'sw_writer'
			ORDER BY random() LIMIT 1});
		kill 'KILL', $pid;
	}
	else
	{
		my @children = children($postmaster);
		$node->kill9;
		kill 'KILL', @children;
	}

	# the clients end with their connections (those of a killed
	# postmaster's backends when they notice it)
	my @errors = grep { $_ } map {
		my $e = collect_writer($_, 1);
		$e ? "$_->{name}: $e" : '';
	} @w;
	is("@errors", '', "$what: each writer acknowledged commits, then lost its connection");
	@errors = grep { $_ } map {
		my $e = collect_reader($_);
		$e ? "$_->{name}: $e" : '';
	} @r;
	is("@errors", '', "$what: the readers read below upper until the crash");
	$blocker->{run}->finish;

	if ($victim eq 'backend')
	{
		SwTest::wait_for_restart($node, $from);
	}
	else
	{
		start_again($postmaster);
	}

	check_all($what);
	# The stuck batches are named as pending by the batches after them.  The
	# crash ends them without a commit, but for one thing: a killed
	# postmaster's backends go on alone until they notice, and the blocker,
	# whose wait for the standby ends with the postmaster, gives up the
	# notification lock as it exits; a stuck writer may then commit before
	# it notices too.  Such a batch is in the log as any other (check_all
	# above); a batch that committed without its catalog row would not be.
	my $stuck_xids = qq{
		SELECT DISTINCT p.xid
		FROM source_writes.batches b, unnest(b.pending_xid) AS p(xid)
		WHERE b.source = 'ev'::regclass
		  AND xid(p.xid)::text = ANY ('{@{[ join ',', @stuck ]}}')};
	is(scalar_query("SELECT count(*) FROM ($stuck_xids) s"), scalar(@stuck),
		"$what: the stuck batches are named as pending");
	is(scalar_query(qq{
		SELECT count(*) FROM ($stuck_xids) s
		WHERE pg_xact_status(s.xid) = 'aborted'
		   OR (pg_xact_status(s.xid) = 'committed' AND '$victim' = 'postmaster'
		       AND EXISTS (SELECT FROM source_writes.batches c
		                   WHERE c.source = 'ev'::regclass AND c.xid = s.xid))}),
		scalar(@stuck), "$what: the stuck batches never committed"
		  . ($victim eq 'postmaster' ? ', or did before their backends noticed, with their batch' : ''));
	check_after($what, \%before);
	%before = last_batches($what);

	# commits still work, and the notifier tells of them
	my $listener = $node->background_psql('postgres');
	$listener->query_safe(qq{LISTEN "$channel"});
	insert_acked($round);
	my $upper = scalar_query(q{SELECT upper FROM source_writes.frontiers('ev')});
	ok(wait_notification($listener, $upper), "$what: the notifier announces upper $upper");
	$listener->quit;
}

# after the last crash: concurrent writers all finish, all is there once,
# after what was there
{
	my $what = 'after the crashes';
	my $listener = $node->background_psql('postgres');
	$listener->query_safe(qq{LISTEN "$channel"});
	my @w = start_writers(4, 200);
	my @errors = grep { $_ } map {
		my $e = collect_writer($_, 0);
		$e ? "$_->{name}: $e" : '';
	} @w;
	is("@errors", '', "$what: $writers concurrent writers commit 200 transactions each");
	check_all($what);
	check_after($what, \%before);
	my $upper = scalar_query(q{SELECT upper FROM source_writes.frontiers('ev')});
	ok(wait_notification($listener, $upper), "$what: the notifier announces upper $upper");
	$listener->quit;
}

done_testing();
