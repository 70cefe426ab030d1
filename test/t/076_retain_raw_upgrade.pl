# pg_upgrade of a source that keeps raw messages (an outside review of
# retain_raw): the option turned on after a column was added (our columns
# in two runs), a column dropped (pg_upgrade keeps dropped columns, so
# attnums stay), an index on a column after the raw run, messages big
# enough for TOAST, rows edited.  After the upgrade the messages are byte
# for byte the same, the index finds its rows, the log is the same, a
# person's UPDATE keeps no message (the row it replaces keeps it in the
# history) and a version decodes a new column from the kept messages,
# also for the rows people changed.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $old = SwTest::node('old');
$old->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int, gone text, v text) SERVER k OPTIONS (topic 't');
	ALTER FOREIGN TABLE t ADD COLUMN a int DEFAULT 5;
	ALTER FOREIGN TABLE t OPTIONS (ADD retain_raw 'true');
	ALTER FOREIGN TABLE t ADD COLUMN b text, DROP COLUMN gone;
	CREATE INDEX t_b ON t (b);
	CREATE FUNCTION noise(n int, seed int) RETURNS text LANGUAGE sql AS $$
	  SELECT string_agg(md5((seed * 100000 + g)::text), '') FROM generate_series(1, n / 32) g $$;
	-- messages as the worker would have ingested them: kept errors retried
	INSERT INTO source_writes.errors (source, ts, partition, "offset", key, value, error,
	                                  "timestamp", header_names, header_values)
	SELECT 't', 0, 0, g, convert_to('k' || g, 'UTF8'),
	       convert_to(format('{"id": %s, "v": "v%s", "b": "b%s", "extra": "%s"}', g, g, g,
	                         noise(64000, g)), 'UTF8'),
	       'kept by the test', 1700000000000 + g, ARRAY['h'], ARRAY[convert_to(noise(3200, -g), 'UTF8')]
	FROM generate_series(1, 8) g;
	SELECT source_writes.retry_errors('t');
	UPDATE t SET v = 'edited' WHERE id <= 2;
	DELETE FROM t WHERE id = 8;
	INSERT INTO t (id, v, b) VALUES (9, 'typed', 'b9')});

my %queries = (
	messages => q{SELECT (data).id, valid_to IS NULL, md5(key), md5(value), "timestamp",
		header_names, md5(header_values[1]), "offset", data
		FROM source_writes.raw_messages(NULL::t) ORDER BY valid_from, (data).id},
	log => q{SELECT ts, diff, origin, data FROM source_writes.updates(NULL::t)
		ORDER BY ts, diff, data},
	contents => q{SELECT * FROM t ORDER BY id});
my %before = map { $_ => $old->safe_psql('postgres', $queries{$_}) } keys %queries;
is(scalar(() = $before{messages} =~ /^/mg), 8,
	'eight row versions keep their messages (the people\'s rows none)');
$old->stop;

my $new = SwTest::node('new', start => 0);
chdir PostgreSQL::Test::Utils::tempdir() or die "chdir: $!";
command_ok(
	[
		$new->config_data('--bindir') . '/pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $old->config_data('--bindir'), '-B', $new->config_data('--bindir'),
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	'pg_upgrade succeeds');
my @logs = glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log');
if (@logs)
{
	note "=== $_\n" . slurp_file($_) for @logs;
	die 'pg_upgrade failed';
}
$new->start;
sub sql { return $new->safe_psql('postgres', $_[0]); }

is(sql($queries{$_}), $before{$_}, "the same $_ after the upgrade") for sort keys %queries;
is(sql(q{SET enable_seqscan = off; SELECT id || ' ' || v FROM t WHERE b = 'b3'}), '3 v3',
	'the index on a column after the raw run finds its row');
sql(q{UPDATE t SET a = 50 WHERE id = 3});
is(sql(q{SELECT count(*) FROM source_writes.raw_messages(NULL::t)
		WHERE valid_to IS NULL AND (data).id = 3}) . ' '
	. sql(q{SELECT bool_and(position(noise(64000, 3) IN convert_from(value, 'UTF8')) > 0)
		FROM source_writes.raw_messages(NULL::t) WHERE valid_to IS NOT NULL AND (data).id = 3}),
	'0 t', 'an UPDATE after it keeps no message; the row it replaces keeps its own');
sql(q{CREATE FOREIGN TABLE t_v2 (id int, v text, a int, b text, extra text) SERVER k
	OPTIONS (topic 't', version_of 't', retain_raw 'true')});
is(sql(q{SELECT string_agg(id || ':' || v || ':' || a || ':' || coalesce(md5(extra) = md5(noise(64000, id)), false),
		',' ORDER BY id) FROM t_v2}),
	'1:edited:5:true,2:edited:5:true,3:v3:50:true,4:v4:5:true,5:v5:5:true,6:v6:5:true,'
	. '7:v7:5:true,9:typed:5:false',
	'a version decodes its new column from the upgraded messages');

done_testing();
