# How Kafka batches are made: an upsert batch keeps only the last message
# of each key, which must come out as if every message had been written in
# turn; and a source whose option workers shares its partitions out over
# several workers is ingested exactly once, started once, waited for as one
# source, through a kill -9 and a change of the number of workers.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);
use SwTest;

my $broker = SwTest::broker(topics => [ 'keyed:2', 'shared:8', 'big:1', 'bad:1', 'gone:1', 'mk:1', 'rt:1', 'dl:2', 'wide:4', 'late:1', 'px:1', 'ax:1' ]);
my $bootstrap = $broker->{bootstrap};
my $node = SwTest::node('batches',
	conf => "restart_after_crash = on\nmax_worker_processes = 18\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

# produce lines "key<TAB>value" to a topic; an empty key or value is none
sub produce { SwTest::produce($broker, @_); }

sub sql
{
	return $node->safe_psql('postgres', $_[0]);
}

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$bootstrap')});

#
# 1. Upsert batches merge by key
#
# 3000 messages over 7 keys, produced before the source exists, so that they
# come in few batches: values, tombstones, and messages that do not decode
# (which must be kept as errors, and leave their key as it was).  Messages
# of a key share a partition, in order.
my (@lines, %expected, $bad);
for my $i (1 .. 3000)
{
	my $key = 'k' . ($i % 7);
	if ($i % 50 == 0)
	{
		push @lines, "$key\t{\"v\": ";
		$bad++;
	}
	elsif ($i % 97 == 0)
	{
		push @lines, "$key\t";
		delete $expected{$key};
	}
	else
	{
		push @lines, "$key\t{\"v\": $i}";
		$expected{$key} = $i;
	}
}
produce('keyed', @lines);
sql(q{CREATE FOREIGN TABLE keyed (k text OPTIONS (source 'key'), v int)
	SERVER k OPTIONS (topic 'keyed', envelope 'upsert', key 'k')});
sql(q{SELECT source_writes.wait_for('keyed')});

my $want = join(',', map { "$_=$expected{$_}" } sort keys %expected);
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM keyed}), $want,
	'each key holds its last message, or nothing after a tombstone');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'keyed'::regclass}), $bad,
	'every message that does not decode is kept, also those a later message of its key replaces');
is(sql(q{SELECT sum(next_offset) FROM source_writes.progress WHERE source = 'keyed'::regclass}),
	'3000', 'every offset is consumed');
is(sql(q{SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM source_writes.updates(NULL::keyed)
	  WHERE diff > 0 GROUP BY ts, (data).k) r}), '1',
	'a batch adds at most one row for a key: the rows later messages replace never appear');
is(sql(q{SELECT bool_and(n >= 0) FROM (SELECT sum(diff) OVER (PARTITION BY data ORDER BY ts) AS n
	FROM source_writes.updates(NULL::keyed)) r}), 't', 'no multiplicity below zero');

# a user's edits, then a batch with several messages for the edited keys
sql(q{UPDATE keyed SET v = -1 WHERE k = 'k1'; DELETE FROM keyed WHERE k = 'k2';
	UPDATE keyed SET v = -3 WHERE k = 'k3'});
produce('keyed', "k1\t", "k1\t{\"v\": 5001}", "k2\t{\"v\": 5002}", "k2\t{\"v\": 5003}",
	"k3\t{\"v\": 5004}", "k3\t", "k4\t{\"v\": ", "k4\t{\"v\": 5005}", "k5\t{\"v\": 5006}", "k5\t{\"v\": ");
sql(q{SELECT source_writes.wait_for('keyed')});
$expected{k1} = 5001;
$expected{k2} = 5003;
delete $expected{k3};
$expected{k4} = 5005;
$expected{k5} = 5006;
$want = join(',', map { "$_=$expected{$_}" } sort keys %expected);
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM keyed}), $want,
	'after edits: the last message of a key replaces the edit, brings a deleted key back, or deletes it');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'keyed'::regclass}), $bad + 2,
	'the bad messages of the batch are kept, before or after a good one');
is(sql(q{SELECT string_agg(origin || ':' || n || ':' || v, ',' ORDER BY origin, n, v)
	FROM (SELECT origin, (data).v AS v, sum(diff) AS n FROM source_writes.updates(NULL::keyed)
	  WHERE ts > (SELECT max(ts) FROM source_writes.updates(NULL::keyed) WHERE origin = 'user')
	    AND (data).k IN ('k1', 'k2', 'k3')
	  GROUP BY origin, data HAVING sum(diff) <> 0) r}),
	'kafka:-1:-3,kafka:-1:-1,kafka:1:5001,kafka:1:5003',
	'the log since the edits: the edited rows retracted by ingestion, each key\'s last row added');

#
# 2. A source whose partitions three workers share
#
produce('shared', map { "s$_\t{\"id\": $_}" } 1 .. 1000);
sql(q{CREATE FOREIGN TABLE shared (id int, p int OPTIONS (source 'partition'),
	o bigint OPTIONS (source 'offset'))
	SERVER k OPTIONS (topic 'shared', workers '3', start_offset 'latest')});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 8 AND count(DISTINCT partition) = 8 AND count(DISTINCT worker_pid) = 3
	FROM source_writes.partitions WHERE source = 'shared'::regclass}),
	'three workers share the eight partitions');
is(sql(q{SELECT count(*), sum(next_offset) FROM source_writes.progress
	WHERE source = 'shared'::regclass}), '8|1000',
	'start_offset latest is applied once, for all the workers: the messages before are skipped');
is(sql(q{SELECT count(*), min(state), max(state) FROM source_writes.sources
	WHERE source = 'shared'::regclass}), '1|running|running', 'the source shows as one');

# once a first batch is in, kill -9 a worker: returns whether ingestion
# was still under way
sub kill_a_worker_mid_stream
{
	my ($all) = @_;
	my $n = 0;
	for (1 .. 6000)
	{
		$n = sql('SELECT count(*) FROM shared');
		last if $n > 0;
		usleep(2_000);
	}
	my $pid = sql(q{SELECT max(worker_pid) FROM source_writes.partitions
		WHERE source = 'shared'::regclass});
	kill 'KILL', $pid;
	note("killed worker $pid at $n of $all rows");
	$node->poll_query_until('postgres', qq{
		SELECT count(DISTINCT worker_pid) > 0 AND bool_and(worker_pid <> $pid)
		FROM source_writes.partitions WHERE source = 'shared'::regclass})
	  or die 'the workers did not come back';
	return $n < $all;
}

# every message once: ids, and each partition's offsets without gap or repeat
sub check_exactly_once
{
	my ($first, $last, $what) = @_;
	my $n = $last - $first + 1;
	is(sql(q{SELECT count(*), count(DISTINCT id), min(id), max(id), count(DISTINCT (p, o)) FROM shared}),
		"$n|$n|$first|$last|$n", "$what: each message once");
	is(sql(q{SELECT count(*) FROM (SELECT p FROM shared GROUP BY p
		  HAVING max(o) - min(o) + 1 <> count(*)) gaps}), '0',
		"$what: no gap and no repeat in any partition");
	is(sql(q{SELECT sum(next_offset) FROM source_writes.progress WHERE source = 'shared'::regclass}),
		1000 + $n, "$what: the stored progress is past every message");
}

# enough messages for several batches per worker, produced while we watch
{
	my $file = "$dir/shared";
	open(my $fh, '>', $file) or die;
	print $fh map { "s$_\t{\"id\": $_}\n" } 1001 .. 301000;
	close $fh;
	my $kcat = IPC::Run::start(
		[ 'kcat', '-P', '-b', $bootstrap, '-t', 'shared', '-K', "\t", '-l', $file ]);
	ok(kill_a_worker_mid_stream(300000), 'a worker was killed while the source was being ingested');
	$kcat->finish or die 'kcat failed';
}
is(sql(q{SELECT source_writes.wait_for('shared', '120 s')}), '', 'wait_for waits for all the workers');
check_exactly_once(1001, 301000, 'three workers, one killed');

# two workers now: the partitions are shared out anew
sql(q{ALTER FOREIGN TABLE shared OPTIONS (SET workers '2')});
ok($node->poll_query_until('postgres', q{
	SELECT count(*) = 8 AND count(DISTINCT worker_pid) = 2
	FROM source_writes.partitions WHERE source = 'shared'::regclass}),
	'after ALTER, two workers share the partitions');
produce('shared', map { "s$_\t{\"id\": $_}" } 301001 .. 311000);
sql(q{SELECT source_writes.wait_for('shared', '120 s')});
check_exactly_once(1001, 311000, 'two workers');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'shared'::regclass}), '0',
	'no message was kept as an error');

#
# 3. Bad input through the broker: a message of 50 MB, binary garbage, a
# header that is not UTF-8; each is kept with the reason, and the good
# message after them goes in
#
# (the embedded broker keeps about 5 MB a partition: the message of 50 MB
# has a topic of its own, or the next message would push it out)
sql(q{CREATE FOREIGN TABLE big (id int, v varchar(10)) SERVER k OPTIONS (topic 'big')});
sql(q{CREATE FOREIGN TABLE bad (id int, v varchar(10), h jsonb OPTIONS (source 'headers'))
	SERVER k OPTIONS (topic 'bad')});
my $garbage = join('', map { chr(($_ * 37 + 11) % 256) } 1 .. 3000) =~ s/\n//gr;
for my $m ([ 'big', '{"id": 1, "v": "' . ('x' x (50 * 1024 * 1024)) . '"}', '-X', 'message.max.bytes=60000000' ],
	[ 'bad', $garbage ],
	[ 'bad', '{"id": 3, "v": "header"}', '-H', "trace=\xff\xfe" ])
{
	my ($topic, $value, @options) = @$m;
	my $file = "$dir/value";
	open(my $fh, '>', $file) or die;
	print $fh $value;
	close $fh;
	my ($out, $err) = run_command([ 'kcat', '-P', '-b', $bootstrap, '-t', $topic, @options, $file ]);
	die "kcat: $err" if $err ne '';
}
produce('bad', "\t{\"id\": 4, \"v\": \"fine\"}");
sql(q{SELECT source_writes.wait_for('big', '120 s')});
sql(q{SELECT source_writes.wait_for('bad', '120 s')});
is(sql(q{SELECT count(*) FROM big}) . ',' . sql(q{SELECT string_agg(id || ':' || v, ',') FROM bad}),
	'0,4:fine', 'the good message is in, none of the bad ones');
is(sql(q{SELECT string_agg(source || ':' || "offset" || ':' || length(value) || ':' ||
	  CASE WHEN error LIKE want || '%' THEN 'ok' ELSE error END, ',' ORDER BY source::text, "offset")
	FROM source_writes.errors e
	JOIN (VALUES ('big', 0, 'value too long for type character varying(10)'),
	             ('bad', 0, 'invalid byte sequence for encoding "UTF8"'),
	             ('bad', 1, 'invalid byte sequence for encoding "UTF8"')) w(s, o, want)
	  ON e.source = w.s::regclass AND e."offset" = w.o}),
	'bad:0:' . length($garbage) . ':ok,bad:1:24:ok,big:0:' . (50 * 1024 * 1024 + 18) . ':ok',
	'the message of 50 MB, the garbage and the header that is not UTF-8 are kept whole, with the reason');
is(sql(q{SELECT string_agg(next_offset::text, ',' ORDER BY source::text) FROM source_writes.progress
	WHERE source IN ('big'::regclass, 'bad'::regclass)}), '3,1', 'their offsets are consumed');
is(sql(q{SELECT string_agg(state, ',') FROM source_writes.sources
	WHERE source IN ('big'::regclass, 'bad'::regclass)}), 'running,running',
	'and the sources go on');

#
# 4. Messages the brokers delete before the source gets to them (retention)
# are reported, and their offsets consumed: the source does not wait for
# them for ever
#
sql(q{CREATE FOREIGN TABLE gone (v text) SERVER k OPTIONS (topic 'gone', format 'text')});
produce('gone', "\tfirst");
sql(q{SELECT source_writes.wait_for('gone')});
{
	# hold the worker back (a lock on the table's hidden heap) while three
	# messages of 4 MB come: the embedded broker keeps about 5 MB
	my $lock = $node->background_psql('postgres');
	$lock->query_safe(q{BEGIN; SELECT current_rel FROM source_writes.source_tables
		WHERE relid = 'gone'::regclass \gset
		LOCK TABLE :current_rel IN SHARE MODE});
	for my $m ('a' .. 'c')
	{
		my $file = "$dir/value";
		open(my $fh, '>', $file) or die;
		print $fh $m x (4 * 1024 * 1024);
		close $fh;
		my ($out, $err) = run_command([ 'kcat', '-P', '-b', $bootstrap, '-t', 'gone',
			'-X', 'message.max.bytes=10000000', $file ]);
		die "kcat: $err" if $err ne '';
	}
	$lock->query_safe('COMMIT');
	$lock->quit;
}
is(sql(q{SELECT source_writes.wait_for('gone', '60 s')}), '', 'the source catches up');
is(sql(q{SELECT next_offset FROM source_writes.progress WHERE source = 'gone'::regclass}), '4',
	'past the deleted messages');
my $deleted = sql(q{SELECT 4 - count(*) FROM gone});
note("$deleted messages were deleted before they were ingested");
cmp_ok($deleted, '>', 0, 'the broker deleted some');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'gone'::regclass}),
	qr/^the brokers deleted offsets \d+ to \d+ of partition 0 before they were ingested$/,
	'the source says so');
like(slurp_file($node->logfile), qr/WARNING:  the brokers deleted offsets \d+ to \d+ of partition 0 of topic "gone" before source table "gone" ingested them/,
	'and so does the server log');
is(sql(q{SELECT lost FROM source_writes.partitions WHERE source = 'gone'::regclass}), $deleted,
	'the partitions view counts the offsets lost');
is(sql(q{SELECT lost FROM source_writes.progress WHERE source = 'gone'::regclass}), $deleted,
	'and keeps the count with the offset');

#
# 5. Keys and failures
#
# a key whose type has an equality but whose elements cannot be hashed: the
# source writes its messages one by one
produce('mk', "{\"k\": \"{1.50}\"}\t{\"k\": \"{1.50}\", \"v\": 1}",
	"{\"k\": \"{1.50}\"}\t{\"k\": \"{1.50}\", \"v\": 2}",
	"{\"k\": \"{2.50}\"}\t{\"k\": \"{2.50}\", \"v\": 3}");
sql(q{CREATE FOREIGN TABLE mk (k money[], v int)
	SERVER k OPTIONS (topic 'mk', envelope 'upsert', key 'k')});
sql(q{SELECT source_writes.wait_for('mk')});
is(sql(q{SELECT string_agg(k::text || '=' || v, ',' ORDER BY v) FROM mk}), '{$1.50}=2,{$2.50}=3',
	'a key type that cannot be hashed (money[]) is ingested, without merging');

# retry_errors() when the owner's code fails with an error that is not the
# message's: the error reaches the caller, whose session goes on
sql(q{CREATE TABLE flag (busy bool); INSERT INTO flag VALUES (false);
	CREATE FUNCTION public.ok(v int) RETURNS bool LANGUAGE plpgsql AS $$
	BEGIN
		IF v = 13 AND (SELECT bool_or(busy) FROM public.flag) THEN
			RAISE EXCEPTION 'busy' USING ERRCODE = 'lock_not_available';
		END IF;
		RETURN v <> 13;
	END $$;
	CREATE FOREIGN TABLE rt (v int CHECK (public.ok(v))) SERVER k OPTIONS (topic 'rt')});
produce('rt', "\t{\"v\": 13}", "\t{\"v\": 1}");
sql(q{SELECT source_writes.wait_for('rt')});
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'rt'::regclass}), '1',
	'the message that breaks the CHECK is kept');
sql(q{UPDATE flag SET busy = true});
my ($ret, $out, $err) = $node->psql('postgres', q{
	DO $$
	BEGIN
		BEGIN
			PERFORM source_writes.retry_errors('rt');
		EXCEPTION WHEN lock_not_available THEN
			RAISE NOTICE 'caught';
		END;
		INSERT INTO public.flag VALUES (NULL);
	END $$;
	SELECT 'after';});
is($out, 'after', 'a PL/pgSQL block that catches the error of retry_errors() goes on');
like($err, qr/NOTICE:  caught/, 'the error is the owner code\'s');
is(sql(q{SELECT count(*) FROM flag WHERE busy IS NULL}), '1', 'what the block wrote after it is committed');
($ret, $out, $err) = $node->psql('postgres', q{SELECT source_writes.retry_errors('rt')});
like($err, qr/ERROR:  busy/, 'uncaught, the error reaches the caller');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'rt'::regclass
	  AND error LIKE 'new row for relation%violates check constraint%'}), '1',
	'and the message stays kept, with its first reason');

# owner code that fails for a message with an error not the message's: a
# serialization failure (the server's state) fails the batch as often as
# it comes, and the message goes in once it passes; an internal error
# fails three batches in a row, then the message is kept
sql(q{CREATE SEQUENCE public.calls;
	CREATE FUNCTION public.chk(v int, lo int, hi int) RETURNS bool LANGUAGE plpgsql AS $$
	DECLARE n bigint;
	BEGIN
		IF v = 13 THEN
			n := nextval('public.calls');
			IF n BETWEEN lo AND hi THEN
				RAISE EXCEPTION 'transient failure, call %', n USING ERRCODE = 'serialization_failure';
			END IF;
		ELSIF v = 666 THEN
			RAISE EXCEPTION 'a bug' USING ERRCODE = 'internal_error';
		END IF;
		RETURN true;
	END $$;
	CREATE FOREIGN TABLE px (id int, v int CHECK (public.chk(v, 2, 5)))
	  SERVER k OPTIONS (topic 'px', envelope 'upsert', key 'id');
	CREATE FOREIGN TABLE ax (id int, v int CHECK (public.chk(v, 0, 0))) SERVER k OPTIONS (topic 'ax')});
produce('px', "1\t{\"id\": 1, \"v\": 13}");
produce('ax', "\t{\"id\": 1, \"v\": 666}", "\t{\"id\": 2, \"v\": 1}");
sql(q{SELECT source_writes.wait_for('px', '60 s')});
sql(q{SELECT source_writes.wait_for('ax', '60 s')});
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM px}) . ' '
	. sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'px'::regclass}), '1:13 0',
	'a message that meets serialization failures goes in once they pass, and is never kept');
cmp_ok(sql(q{SELECT last_value FROM public.calls}), '>=', 6, 'after the failures');
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM ax}) . ' '
	. sql(q{SELECT string_agg(split_part(error, ' (', 1), ',') FROM source_writes.errors
	  WHERE source = 'ax'::regclass}),
	'2:1 a bug', 'a message that meets an internal error three batches in a row is kept, and the next goes in');
my $failed_batches = () = slurp_file($node->logfile) =~ /ERROR:  a bug/g;
is($failed_batches, 2, 'the first two batches failed, the third kept it');

# two workers of an upsert source whose key comes from the value: the same
# keys in both partitions, in opposite orders; they write them in one order
for my $part (0, 1)
{
	my @ids = $part == 0 ? (1 .. 20000) : reverse(1 .. 20000);
	my $file = "$dir/dl$part";
	open(my $fh, '>', $file) or die;
	print $fh map { "$_\t{\"id\": $_, \"v\": $part}\n" } @ids;
	close $fh;
	my ($o, $e) = run_command(
		[ 'kcat', '-P', '-b', $bootstrap, '-t', 'dl', '-p', $part, '-K', "\t", '-l', $file ]);
	die "kcat: $e" if $e ne '';
}
sql(q{CREATE FOREIGN TABLE dl (id int, v int)
	SERVER k OPTIONS (topic 'dl', envelope 'upsert', key 'id', workers '2')});
sql(q{SELECT source_writes.wait_for('dl', '60 s')});
is(sql(q{SELECT count(*) FROM dl}), '20000', 'every key is in once');
unlike(slurp_file($node->logfile), qr/deadlock detected/,
	'the workers of one source do not deadlock each other');

# a source with more workers than there are free slots says so; the
# launcher warns once, and does not stop
sql(q{CREATE FOREIGN TABLE wide (id int) SERVER k OPTIONS (topic 'wide', workers '16')});
ok($node->poll_query_until('postgres', q{
	SELECT state = 'waiting for a background worker' FROM source_writes.sources
	WHERE source = 'wide'::regclass}), 'a source short of worker processes says so');
sql(q{ALTER FOREIGN TABLE wide OPTIONS (SET workers '1')});
produce('wide', "\t{\"id\": 1}");
is(sql(q{SELECT source_writes.wait_for('wide', '60 s')}), '', 'with one worker it runs');
is(sql(q{SELECT count(*) FROM dl}) . ',' . sql(q{SELECT count(*) FROM wide}), '20000,1',
	'and the other sources were not disturbed');

# a role with USAGE on the server alone wants more workers than there are
# slots (max_worker_processes + 64): the launcher warns, once a source,
# and goes on
sql(q{CREATE ROLE alice LOGIN; GRANT USAGE ON FOREIGN SERVER k TO alice;
	GRANT CREATE ON SCHEMA public TO alice});
my $log_from = -s $node->logfile;
for my $i (1 .. 5)
{
	$node->safe_psql('postgres', qq{CREATE FOREIGN TABLE crowd$i (v text) SERVER k
		OPTIONS (topic 'crowd$i', format 'text', workers '16')}, extra_params => [ '-U', 'alice' ]);
}
ok($node->wait_for_log(qr/WARNING:  no worker slot is free for source table "crowd\d"/),
	'the launcher warns that a source has no slot');
sql(q{DROP FOREIGN TABLE crowd1, crowd2, crowd3, crowd4, crowd5});
sql(q{CREATE FOREIGN TABLE late (v text) SERVER k OPTIONS (topic 'late', format 'text')});
produce('late', "\tlate");
is(sql(q{SELECT source_writes.wait_for('late', '60 s')}) . sql(q{SELECT v FROM late}), 'late',
	'the launcher goes on: a new source is ingested');
my $log = substr(slurp_file($node->logfile), $log_from);
my %warnings;
$warnings{$1}++ while $log =~ /no worker slot is free for source table "(crowd\d)"/g;
ok(!grep({ $_ > 1 } values %warnings), 'each source short of slots is warned about once');
unlike($log, qr/terminated by signal|server process .* was terminated/, 'no process crashed');

done_testing();
