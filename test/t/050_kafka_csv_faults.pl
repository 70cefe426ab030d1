# CSV messages, with quotes, commas and line breaks in their fields, are
# ingested exactly once through faults: a batch that fails after it wrote
# rows (a statement trigger, ENABLE ALWAYS, that raises once) is tried again
# with a new bulk-insert state, and a kill -9 of the worker mid-batch (its
# rows written, its statement trigger asleep) restarts everything.  In the end each message is a row once, or an error
# once for the records that are not valid.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $messages = 40_000;
my $broker = SwTest::broker(topics => ['csv:4']);
my $node = SwTest::node('csv_faults', conf => "restart_after_crash = on\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE s (id int, name text, note text,
	  p int OPTIONS (source 'partition'), o bigint OPTIONS (source 'offset'))
	  SERVER k OPTIONS (topic 'csv', format 'csv');
	CREATE SEQUENCE statements;
	CREATE TABLE slow (on_purpose bool);
	INSERT INTO slow VALUES (false);
	CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS \$\$
	BEGIN
	  IF nextval('public.statements') = 3 THEN
	    RAISE EXCEPTION 'a batch fails once, on purpose';
	  END IF;
	  IF (SELECT on_purpose FROM public.slow) THEN
	    PERFORM pg_sleep(60);
	  END IF;
	  RETURN NULL;
	END \$\$;
	CREATE TRIGGER fail_once AFTER INSERT ON s FOR EACH STATEMENT EXECUTE FUNCTION fail_once();
	ALTER FOREIGN TABLE s ENABLE ALWAYS TRIGGER fail_once;
});

# messages first .. last, keyed so that they spread over the partitions
# and separated by a byte that CSV does not use; every 1000th is not a
# valid record
sub produce
{
	my ($first, $last) = @_;
	my $file = "$dir/messages";
	open(my $fh, '>', $file) or die;
	for my $id ($first .. $last)
	{
		my $value = $id % 1000 == 0
		  ? "$id,\"an open quote,"
		  : "$id,\"name $id, \"\"quoted\"\"\",\"line one\r\nline two of $id\"";
		print $fh "k$id\t$value\x1e";
	}
	close $fh;
	my ($out, $err) = run_command(
		[ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'csv', '-K', '\t', '-D', '\x1e', '-l', $file ]);
	die "kcat: $err" if $err ne '';
}

sub count_rows
{
	return sql('SELECT count(*) FROM s');
}

# the first half: a batch fails once after it wrote rows
produce(1, $messages / 2);
is(sql(q{SELECT source_writes.wait_for('s', '120 s')}), '', 'the first half is ingested');
like(slurp_file($node->logfile), qr/a batch fails once, on purpose/, 'a batch failed once, and was tried again');

# the second half: kill -9 of the worker mid-batch, its rows written and
# not committed (its statement trigger sleeps)
sql(q{UPDATE slow SET on_purpose = true});
my $before = count_rows();
produce($messages / 2 + 1, $messages);
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes kafka worker' AND wait_event = 'PgSleep'}),
	'a batch of the second half is written, and not committed');
is(count_rows(), $before, '(none of it visible)');
my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 's'::regclass});
sql(q{UPDATE slow SET on_purpose = false});
kill 'KILL', $pid;
ok($node->poll_query_until('postgres', qq{
	SELECT worker_pid IS NOT NULL AND worker_pid <> $pid FROM source_writes.sources
	WHERE source = 's'::regclass}), 'the server and the worker are back');
is(sql(q{SELECT source_writes.wait_for('s', '120 s')}), '', 'the second half is ingested');
like(slurp_file($node->logfile), qr/kafka worker.*terminated by signal 9/, 'the log shows the killed worker');

my $bad = $messages / 1000;
my $good = $messages - $bad;
is(sql(q{SELECT count(*), count(DISTINCT id), count(DISTINCT (p, o)) FROM s}), "$good|$good|$good",
	"$good rows, each message once");
is(sql(q{SELECT count(*) FROM s WHERE name <> 'name ' || id || ', "quoted"'
	OR note <> E'line one\r\nline two of ' || id}), '0', 'each with its fields whole');
is(sql(q{SELECT count(*), count(DISTINCT (partition, "offset")) FROM source_writes.errors
	WHERE source = 's'::regclass AND error LIKE '%unterminated CSV quoted field%'}), "$bad|$bad",
	"$bad invalid records, each an error once");
is(sql(q{SELECT sum(next_offset) FROM source_writes.progress WHERE source = 's'::regclass}),
	$messages, 'the stored progress is past every message');

done_testing();
