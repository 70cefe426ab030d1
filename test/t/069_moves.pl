# Moving sources to another cluster with their logs: export() piped into
# import() with psql, as doc/moves.md shows.  The moved sources have the
# same log (updates()), frontiers, positions and kept keys; the Kafka
# source goes on from the exported offsets exactly once, also when the
# move is made while messages come; a webhook delivery repeated after the
# move writes nothing; the old sources are fenced.  Bad exports are
# refused and write nothing.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;
use JSON::PP;

my $broker = SwTest::broker(topics => [ 'ev:2' ]);
my $port_a = PostgreSQL::Test::Cluster::get_free_port();
my $a = SwTest::node('from', conf => "source_writes.webhook_listen = '127.0.0.1:$port_a'\n");
my $port_b = PostgreSQL::Test::Cluster::get_free_port();
my $b = SwTest::node('to', conf => "source_writes.webhook_listen = '127.0.0.1:$port_b'\n");

sub sql_a { return $a->safe_psql('postgres', $_[0]); }
sub sql_b { return $b->safe_psql('postgres', $_[0]); }

sub post
{
	my ($port, $key, $body) = @_;
	my ($out) = run_command([ 'curl', '-s', '-X', 'POST', '-o', '-', '-w', ' %{http_code}',
		"http://127.0.0.1:$port/postgres/public/pay", '--data-binary', $body,
		'-H', 'Content-Type: application/json', '-H', "Idempotency-Key: $key" ]);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sub produce { SwTest::produce($broker, 'ev', map { qq(\t{"id": $_, "v": "e$_"}) } @_); }

my $servers = qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE ROLE editor;
	CREATE DOMAIN positive AS int CHECK (VALUE > 0)};
my %create = (
	odd => q{CREATE FOREIGN TABLE odd (id positive, a int[], b bytea, j json, jb jsonb, t text,
	  n numeric(10,2), at timestamptz) SERVER hooks; CREATE INDEX odd_t ON odd (t)},
	ev => q{CREATE FOREIGN TABLE ev (id int, v text) SERVER k OPTIONS (topic 'ev')},
	pay => q{CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks
	  OPTIONS (idempotency_header 'Idempotency-Key')});
sql_a($servers);
sql_a("$create{ev}; $create{pay}; GRANT SELECT, INSERT, UPDATE, DELETE ON ev, pay TO editor");
sql_a("$create{odd}; " . <<'SQL');
INSERT INTO odd VALUES (1, '{1,NULL,3}', '\x00ff5c', '{"a": "\\"}', '{"b": [1, null]}',
  E'back\\slash\nnew\tline \u00fc "q" \\N \u0001', 1.5, '2020-01-01 00:00:00+00'),
  (2, NULL, NULL, NULL, NULL, NULL, NULL, NULL),
  (3, '{}', '\x', '[]', 'null', '', 0, 'infinity');
UPDATE odd SET t = 'second' WHERE id = 2;
DELETE FROM odd WHERE id = 3;
UPDATE odd SET n = 2.25 WHERE id = 1;
SQL

# a history on the old cluster: messages, deliveries, people's edits
for my $chunk (0 .. 3)
{
	produce(25 * $chunk + 1 .. 25 * $chunk + 25);
	sql_a(q{SELECT source_writes.wait_for('ev')});
}
ok($a->poll_query_until('postgres', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'the old webhook server listens');
is(post($port_a, "k$_", qq({"id": $_, "note": "n$_"})), '200 1 row', "delivery k$_") for 1 .. 5;
sql_a(q{SET ROLE editor;
	UPDATE ev SET v = 'fixed' WHERE id = 7;
	DELETE FROM ev WHERE id = 8;
	INSERT INTO ev VALUES (1000, 'typed');
	UPDATE pay SET note = 'fixed' WHERE id = 2});

# most of the old log rolled up into segments of the batch catalog
is(sql_a(q{SET source_writes.segment_batches = 2; SET source_writes.segment_delay = 0;
	SELECT source_writes.compact('ev') >= 0, source_writes.compact('pay') >= 0;
	SELECT count(*) > 0 FROM source_writes.batch_segments WHERE source = 'ev'::regclass}),
	"t|t\nt", 'the old Kafka source has segments');

# the log of a source, as text, to compare across clusters
my $log = q{SELECT string_agg(ts || ' ' || diff || ' ' || origin || ' ' || coalesce(role::text, '-')
	|| ' ' || data::text, E'\n' ORDER BY ts, diff, data::text) FROM source_writes.updates(NULL::%s)};
my $blame = q{SELECT string_agg(coalesce(ts::text, '-') || ' ' || origin || ' ' || coalesce("partition"::text, '-')
	|| ' ' || coalesce("offset"::text, '-') || ' ' || coalesce(delivery, '-') || ' '
	|| coalesce(received_at::text, '-') || ' ' || data::text, E'\n' ORDER BY data::text)
	FROM source_writes.blame(NULL::%s)};
my $frontiers = q{SELECT since || ' ' || upper FROM source_writes.frontiers('%s')};

# the move, messages coming meanwhile: the new table is created in the
# transaction that imports into it, so that its worker starts from the
# imported offsets
sql_b($servers);
my $producer = IPC::Run::start([ 'bash', '-c', join('; ',
	map { my $s = 100 + 10 * $_ + 1;
		qq(for i in \$(seq $s @{[$s + 9]}); do printf '\\t{"id": %d, "v": "e%d"}\\n' \$i \$i; done)
		  . qq( | kcat -P -b $broker->{bootstrap} -t ev -K '\\t' -Z) } 0 .. 19) ]);
sub move
{
	my ($table) = @_;
	my $pipe = sprintf(q{psql -X -d '%s' -c "\\copy (SELECT source_writes.export('%s', fence => true)) TO STDOUT" | psql -X -At -1 -v ON_ERROR_STOP=1 -d '%s' -c "%s" -c "CREATE TEMP TABLE lines (line text)" -c "\\copy lines FROM STDIN" -c "SELECT 'imported ' || source_writes.import('%s', 'lines')" -c "SELECT 'frontiers ' || since || ' ' || upper FROM source_writes.frontiers('%s')" -c "%s"},
		$a->connstr('postgres'), $table, $b->connstr('postgres'), $create{$table}, $table, $table,
		"SELECT 'progress ' || coalesce(string_agg(part || ':' || next_offset || ':' || topic, ' ' ORDER BY part), '') FROM source_writes.progress");
	my ($out, $err) = run_command([ 'bash', '-c', "set -o pipefail; $pipe" ]);
	return ($out, $err);
}
my ($out, $err) = move('ev');
like($out, qr/^imported \d+$/m, 'the Kafka source moves through a pipe') or diag($err);
my ($ev_frontiers) = $out =~ /^frontiers (.*)$/m;
my ($ev_progress) = $out =~ /^progress (.*)$/m;
$producer->finish;
($out, $err) = move('pay');
like($out, qr/^imported 6$/m, 'so does the webhook source: five deliveries, one edited')
  or diag($err);
my ($pay_frontiers) = $out =~ /^frontiers (.*)$/m;
($out, $err) = move('odd');
like($out, qr/^imported 5$/m, 'values of many types move through the pipe') or diag($err);
is(sql_b(sprintf($log, 'odd')), sql_a(sprintf($log, 'odd')), 'odd: updates() is the same');
is(sql_b(q{SET enable_seqscan = off; SELECT id FROM odd WHERE t = 'second'}), '2',
	'its index has the imported rows');

# the same log, frontiers, positions and keys on the new cluster (the
# Kafka source's up to the move: it goes on ingesting)
my $upper = sql_a(q{SELECT upper FROM source_writes.frontiers('ev')});
is($ev_frontiers, sql_a(sprintf($frontiers, 'ev')), 'ev: frontiers are the same');
is($pay_frontiers, sql_a(sprintf($frontiers, 'pay')), 'pay: frontiers are the same');
is(sql_b(sprintf($log, 'pay')), sql_a(sprintf($log, 'pay')), 'pay: updates() is the same');
is(sql_b(sprintf($blame, 'pay')), sql_a(sprintf($blame, 'pay')), 'pay: blame() is the same');
(my $ev_log = sprintf($log, 'ev')) =~ s/\(NULL::ev\)/(NULL::ev, until => $upper)/;
is(sql_b($ev_log), sql_a($ev_log), 'ev: updates() is the same');
(my $ev_blame = sprintf($blame, 'ev')) =~ s/$/ WHERE ts < $upper/;
is(sql_b($ev_blame), sql_a($ev_blame), 'ev: blame() is the same');
is($ev_progress, sql_a(q{SELECT string_agg(part || ':' || next_offset || ':' || topic, ' ' ORDER BY part)
		FROM source_writes.progress}), 'ev: the offsets are the same');

# the old sources are fenced
my ($rc, $stdout, $stderr) = $a->psql('postgres', q{INSERT INTO ev VALUES (2000, 'late')});
like($stderr, qr/source table "ev" was moved/, 'the old Kafka source refuses edits');
is(sql_a(q{SELECT state FROM source_writes.sources WHERE source = 'ev'::regclass}), 'moved',
	'and says it moved');
ok($a->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE backend_type LIKE 'source_writes kafka%'}), 'its worker stops');
is(post($port_a, 'k9', '{"id": 9}'), '410 the table was moved: send to its new address',
	'the old webhook source writes no delivery: 410');
my $batches_ev = sql_a(q{SELECT count(*) FROM source_writes.batches WHERE source = 'ev'::regclass});
($rc, $stdout, $stderr) = $a->psql('postgres', q{SELECT source_writes.reset_offsets('ev', 'earliest')});
like($stderr, qr/source table "ev" was moved/, 'reset_offsets() of the old Kafka source is refused');
is(sql_a(q{SELECT count(*) FROM source_writes.batches WHERE source = 'ev'::regclass}), $batches_ev,
	'and writes no batch');

# a fence in a transaction that writes to the table would lose its writes
sql_a(q{CREATE FOREIGN TABLE f (id int) SERVER hooks; INSERT INTO f VALUES (1);
	CREATE FUNCTION f_insert() RETURNS int LANGUAGE plpgsql
	  AS 'BEGIN INSERT INTO f VALUES (4); RETURN 4; END'});
($rc, $stdout, $stderr) = $a->psql('postgres', q{BEGIN; INSERT INTO f VALUES (2);
	SELECT count(*) FROM source_writes.export('f', fence => true); COMMIT});
like($stderr, qr/cannot fence source table "f" in a transaction that writes to it/,
	'a fence after a write of its transaction is refused');
($rc, $stdout, $stderr) = $a->psql('postgres', q{WITH e AS (SELECT count(*) FROM
	source_writes.export('f', fence => true)), i AS (INSERT INTO f VALUES (3) RETURNING id)
	SELECT (SELECT count FROM e), (SELECT id FROM i)});
like($stderr, qr/cannot fence source table "f" in a transaction that writes to it/,
	'so is one in a statement that writes to it');
($rc, $stdout, $stderr) = $a->psql('postgres', q{SELECT n, f_insert() FROM
	(SELECT count(*) n FROM source_writes.export('f', fence => true) OFFSET 0) e});
like($stderr, qr/source table "f" was moved/, 'a write after the fence in its statement is refused');
is(sql_a(q{SELECT string_agg(id::text, ',') FROM f}) . ' '
	. sql_a(q{SELECT count(*) FROM source_writes.batches WHERE source = 'f'::regclass}), '1 1',
	'none of them wrote');

# the new Kafka source goes on from the exported offsets, exactly once
produce(1001 .. 1010);
ok($b->poll_query_until('postgres', q{SELECT count(*) FILTER (WHERE id > 1000) = 10 FROM ev}),
	'the new source ingests what came after the move');
is(sql_b(q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || count(*) FILTER (WHERE id BETWEEN 1 AND 300)
		FROM ev WHERE id <> 1000}),
	'309 309 299', 'each message once, before, during and after the move (8 deleted, 1000 typed)');
is(sql_b(q{SELECT v FROM ev WHERE id = 7}), 'fixed', "a person's edit moved with the log");

# an export without fence reads the offsets with the rows' snapshot: a
# batch that commits while it runs is in neither
sql_a(q{CREATE FOREIGN TABLE ev2 (id int, v text) SERVER k OPTIONS (topic 'ev')});
ok($a->poll_query_until('postgres', q{SELECT count(*) = 310 FROM ev2}), 'a second source reads the topic');
my $reader = $a->background_psql('postgres');
$reader->query_safe(q{BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM ev2});
produce(2001 .. 2005);
ok($a->poll_query_until('postgres', q{SELECT count(*) = 315 FROM ev2}), 'which goes on ingesting');
is($reader->query_safe(q{SELECT sum((e::jsonb->>'next_offset')::bigint) || ' '
		|| coalesce(sum(jsonb_array_length(e::jsonb)) FILTER (WHERE jsonb_typeof(e::jsonb) = 'array'), 0)
		FROM source_writes.export('ev2') e}),
	$reader->query_safe(q{SELECT sum(next_offset) || ' ' || (SELECT count(*) FROM ev2)
		FROM source_writes.progress WHERE source = 'ev2'::regclass}),
	"an export's offsets are those of its rows");
$reader->query_safe('COMMIT');
$reader->quit;
sql_b(q{GRANT SELECT, INSERT, UPDATE, DELETE ON ev, pay TO editor});

# the new webhook source keeps the keys
ok($b->poll_query_until('postgres', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'the new webhook server listens');
is(post($port_b, 'k3', '{"id": 3, "note": "n3"}'), '200 1 row', 'a delivery repeated after the move');
is(post($port_b, 'k6', '{"id": 6, "note": "n6"}'), '200 1 row', 'a new delivery');
is(sql_b(q{SELECT string_agg(id || note, ',' ORDER BY id) FROM pay}), '1n1,2fixed,3n3,4n4,5n5,6n6',
	'the repeated delivery wrote nothing');

# bad exports: refused, nothing written
sql_a(q{CREATE FOREIGN TABLE other (id int) SERVER hooks;
	INSERT INTO other VALUES (1)});
sql_b(q{CREATE FOREIGN TABLE other (id int) SERVER hooks;
	CREATE FOREIGN TABLE wide (id int, extra text) SERVER hooks;
	CREATE FOREIGN TABLE kev (id int) SERVER k OPTIONS (topic 'nothing');
	CREATE TABLE lines (line text)});
my $export = sql_a(q{SELECT string_agg(e, E'\n') FROM source_writes.export('other') e});
my @lines = split /\n/, $export;
sub import_lines
{
	my ($table, @l) = @_;
	$b->safe_psql('postgres', 'TRUNCATE lines');
	$b->safe_psql('postgres', "INSERT INTO lines VALUES " . join(', ', map { "(\$j\$$_\$j\$)" } @l))
	  if @l;
	my ($rc, $out, $err) = $b->psql('postgres', "SELECT source_writes.import('$table', 'lines')");
	return $err;
}
like(import_lines('other', @lines[ 0 .. $#lines - 1 ]), qr/It has no end: it was cut short/,
	'an export without its end');
like(import_lines('other', grep { !/^\[/ } @lines), qr/Its end counts 1 rows, and it has 0/,
	'an export that lost a row');
(my $future = $lines[0]) =~ s/"version": 3/"version": 99/;
like(import_lines('other', $future, @lines[ 1 .. $#lines ]), qr/of format version 99/,
	'a format version from the future');
like(import_lines('wide', @lines), qr/source table "wide" has columns that the export has not/,
	'an export of another shape');
like(import_lines('kev', @lines), qr/the export is of a webhook source, and "kev" is a kafka source/,
	'an export of another kind');
like(import_lines('pay', @lines), qr/source table "pay" is not empty/, 'a table that is not empty');
like(import_lines('other', 'not json'), qr/invalid input syntax for type json/, 'lines that are not JSON');

# crafted exports: refused with what is wrong, and where; rows of format
# version 2 (arrays) and of version 1 (objects)
my ($header) = grep { /"format"/ } @lines;
my ($upper_other) = $header =~ /"upper": (\d+)/;
(my $header1 = $header) =~ s/"version": 3/"version": 1/;
my @two = (map { sprintf('{"batch": %d, "ts": %d, "origin": "user", "role": "postgres"}', $_, $upper_other - 3 + $_) } 1, 2);
sub crafted
{
	my (@rows) = @_;
	return import_lines('other', ($rows[0] =~ /^\[/ ? $header : $header1), @two, @rows,
		sprintf('{"end": true, "batches": 2, "rows": %d, "progress": 0, "deliveries": 0}', scalar @rows));
}
like(crafted('[[2,1,null,null,null,"1"]]'),
	qr/A row is retracted by a batch that is not later than the one that added it/,
	'a row retracted before it was added');
like(crafted('[[1, 1, null, null, null, "1"]]'), qr/A row is retracted by a batch that is not later/,
	'a row retracted by the batch that added it, spaced');
like(crafted('[[1,null,null,null,null]]'), qr/A row has 5 values, and not 6/, 'a row without its column');
like(crafted('[[1,null,null,null,null,"1","2"]]'), qr/A row has 7 values, and not 6/, 'a row with a column too many');
like(crafted('[[1.5,null,null,null,null,"1"]]'), qr/"added" is 1.5, not an integer of 64 bits/,
	'a batch id that is not an integer');
like(crafted('[[3,null,null,null,null,"1"]]'), qr/A row names batch 3, which it has not/,
	'a batch that the export has not');
like(crafted('[[1,null,99999999999,5,null,"1"]]'), qr/"part" is 99999999999, out of range/,
	'a partition out of range');
like(crafted('[[1,null,0,null,null,"1"]]'), qr/A row has a "part" without a "pos", or a "pos" without a "part"/,
	'a partition without a position');
like(crafted('[[1,null,null,null,null,1]]'), qr/Column "id" of a row is not a string/,
	'a value that is not a string');
like(crafted('[1,null,null,null,null,"1"]'), qr/A line of rows of format version 3 is an array of arrays/,
	'a row not in a line of rows');
like(crafted('[[1,null,null,null,null,"1"],[3,null,null,null,null,"2"]]'), qr/A row names batch 3, which it has not/,
	'a line of rows, one naming a batch that the export has not');
like(crafted('[[1,null,null,null,null,"x1"]]'),
	qr/invalid input syntax for type integer: "x1"\nCONTEXT:  line 4 of the export in "public.lines"/,
	'a column that its type does not take, with the line');
like(import_lines('other', $header, @two, '{"row": true, "added": 1, "data": {"id": "1"}}',
		'{"end": true, "batches": 2, "rows": 1, "progress": 0, "deliveries": 0}'),
	qr/A row of format version 3 is an array/, 'a row of version 1 in an export of version 3');
like(crafted('{"row": true, "added": 1, "retracted": null, "part": null, "pos": null, "delivery": null, "data": {"id": "1"}}', '[[1,null,null,null,null,"1"]]'),
	qr/At line 5: A row of format version 1 is an object/, 'a row of version 2 in an export of version 1');
like(crafted('{"row": true, "added": 2, "retracted": 1, "data": {"id": "1"}}'),
	qr/A row is retracted by a batch that is not later than the one that added it/,
	'version 1: a row retracted before it was added');
like(crafted('{"row": true, "added": 1, "retracted": 1, "data": {"id": "1"}}'),
	qr/A row is retracted by a batch that is not later/, 'version 1: a row retracted by the batch that added it');
like(crafted('{"row": true, "added": 1, "data": ["1"]}'), qr/A row has its columns in an object "data"/,
	'version 1: a row whose columns are not an object');
like(crafted('{"row": true, "added": 1, "data": {"other": "1"}}'), qr/A row has no column "id"/,
	'version 1: a row without a column');
like(crafted('{"row": true, "added": 1.5, "data": {"id": "1"}}'), qr/"added" is 1.5, not an integer of 64 bits/,
	'version 1: a batch id that is not an integer');
like(crafted('{"row": true, "added": 1e30, "data": {"id": "1"}}'), qr/"added" is 1\d{30}, not an integer of 64 bits/,
	'version 1: a batch id out of range');
like(crafted('{"row": true, "added": 1, "part": 99999999999, "data": {"id": "1"}}'),
	qr/"part" is 99999999999, out of range/, 'version 1: a partition out of range');
like(crafted('{"row": true, "added": 1, "data": {"id": "x1"}}'),
	qr/invalid input syntax for type integer: "x1"\nCONTEXT:  line 4 of the export in "public.lines"/,
	'version 1: a column that its type does not take, with the line');
like(import_lines('other', $header, '{"batch": 1, "ts": 9223372036854775807, "origin": "user", "role": "postgres"}',
		'{"end": true, "batches": 1, "rows": 0, "progress": 0, "deliveries": 0}'),
	qr/A batch has a "ts" of 9223372036854775807, not before its "upper"/, 'a batch after the upper');
my $kafka_header = '{"format": "source_writes export", "version": 1, "kind": "kafka", "table": "kev", '
  . '"since": 1, "upper": 2, "columns": [["id", "integer"]]}';
my $kafka_end = '{"end": true, "batches": 0, "rows": 0, "progress": 2, "deliveries": 0}';
like(import_lines('kev', $kafka_header, '{"progress": 0, "next_offset": 5, "topic": "nothing"}',
		'{"progress": 0, "next_offset": 7, "topic": "nothing"}', $kafka_end),
	qr/Partition 0 is there twice/, 'a partition twice');
like(import_lines('kev', $kafka_header, '{"progress": 0, "next_offset": 5}',
		'{"progress": 1, "next_offset": 7, "topic": "nothing"}', $kafka_end),
	qr/A partition's progress has a "next_offset" and a "topic"/, 'a partition without its topic');
is(sql_b(q{SELECT count(*) FROM source_writes.progress WHERE source = 'kev'::regclass}), '0',
	'no offsets were written');
sql_b(q{CREATE FOREIGN TABLE kup (id int) SERVER k OPTIONS (topic 'nothing', key 'id', envelope 'upsert')});
(my $kup_header = $kafka_header) =~ s/"kev"/"kup"/;
like(import_lines('kup', $kup_header, '{"batch": 1, "ts": 1, "origin": "kafka", "role": "postgres"}',
		map({ qq({"row": true, "added": 1, "retracted": null, "part": 0, "pos": $_, "delivery": null, "data": {"id": "7"}}) } 1, 2),
		'{"end": true, "batches": 1, "rows": 2, "progress": 0, "deliveries": 0}'),
	qr/duplicate key value violates unique constraint.*\n.*\nCONTEXT:  line 4 of the export/,
	'a key twice in an upsert source, with the line');
is(sql_b(q{SELECT count(*) FROM kup}), '0', 'which has no rows');

is(sql_b(q{SELECT count(*) FROM other}) . ' ' . sql_b(q{SELECT count(*) FROM source_writes.batches
		WHERE source IN ('other'::regclass, 'wide'::regclass)}), '0 0', 'none wrote anything');
is(sql_b(q{SELECT count(*) FROM source_writes.export(NULL)}), '0', 'the export of NULL is empty');
is(import_lines('other', reverse @lines), '', 'the lines in any order');
is(sql_b(q{SELECT id FROM other}), '1', 'are imported');

# rows before the batches they name: read in a second pass
my @odd = split /\n/, sql_a(q{SELECT string_agg(e, E'\n') FROM source_writes.export('odd') e});
my @odd_rows = grep { /^\[/ } @odd;
my @odd_rest = grep { !/^\[/ } @odd;
sql_b(q{CREATE FOREIGN TABLE odd2 (id positive, a int[], b bytea, j json, jb jsonb, t text,
	n numeric(10,2), at timestamptz) SERVER hooks});
is(import_lines('odd2', $odd_rest[0], $odd_rows[0], @odd_rest[ 1 .. $#odd_rest ], @odd_rows[ 1 .. $#odd_rows ]),
	'', 'a row before the batches');
is(sql_b(sprintf($log, 'odd2')), sql_a(sprintf($log, 'odd')), 'the same log');

# an export of format version 1 (rows as objects, with their columns by
# name) is still read, as export() wrote it and in any other form
sub v1_row
{
	my ($row, $names, $data_first) = @_;
	my $j = JSON::PP->new->utf8->allow_nonref;
	my @v = @$row;
	my $num = sub { defined $_[0] ? $_[0] : 'null' };
	my @data = map { $j->encode($names->[$_]) . ': ' . $j->encode($v[ 5 + $_ ]) } 0 .. $#$names;
	my $fields = sprintf('"row": true, "added": %s, "retracted": %s, "part": %s, "pos": %s, "delivery": %s',
		$num->($v[0]), $num->($v[1]), $num->($v[2]), $num->($v[3]), $j->encode($v[4]));
	return $data_first ? sprintf('{"data": {%s}, %s}', join(', ', reverse @data), $fields)
	  : sprintf('{%s, "data": {%s}}', $fields, join(', ', @data));
}
my @names = map { $_->[0] } @{ JSON::PP->new->utf8->decode($odd_rest[0])->{columns} };
(my $odd_header1 = $odd_rest[0]) =~ s/"version": 3/"version": 1/;
# the last row in another form, read as jsonb
my @odd_each = map { @{ JSON::PP->new->utf8->decode($_) } } @odd_rows;
my @v1 = ($odd_header1, @odd_rest[ 1 .. $#odd_rest - 1 ], (map { v1_row($_, \@names) } @odd_each[ 0 .. $#odd_each - 1 ]),
	v1_row($odd_each[-1], \@names, 1), $odd_rest[-1]);
sql_b(q{CREATE FOREIGN TABLE odd1 (id positive, a int[], b bytea, j json, jb jsonb, t text,
	n numeric(10,2), at timestamptz) SERVER hooks});
is(import_lines('odd1', @v1), '', 'an export of format version 1');
is(sql_b(sprintf($log, 'odd1')), sql_a(sprintf($log, 'odd')), 'has the same log');

# the lines are read with the caller's rights: SELECT on them; a view of
# them is read with a query
sql_b(q{CREATE ROLE mover; CREATE FOREIGN TABLE other2 (id int) SERVER hooks;
	ALTER FOREIGN TABLE other2 OWNER TO mover; GRANT USAGE ON SCHEMA source_writes TO mover});
sql_b(q{TRUNCATE lines; INSERT INTO lines VALUES } . join(', ', map { "(\$j\$$_\$j\$)" } @lines));
($rc, $stdout, $stderr) = $b->psql('postgres', q{SET ROLE mover; SELECT source_writes.import('other2', 'lines')});
like($stderr, qr/permission denied for table lines/, 'import() needs SELECT on the lines');
is(sql_b(q{CREATE VIEW lines_view AS SELECT line FROM lines; GRANT SELECT ON lines_view TO mover;
	SET ROLE mover; SELECT source_writes.import('other2', 'lines_view')}), '1', 'a view of them is read');
is(sql_b(q{SELECT id FROM other2}), '1', 'and imported');

done_testing();
