# Raw messages (retain_raw): rows that the workers ingest keep the Kafka
# message (key, value, timestamp, headers) or the piece of the webhook body
# they came from, exactly as sent, through edits into the history, until
# compaction deletes them with their rows; ALTER turns it on and off on a
# live table; raw_messages() reads them, for whoever reads the rows.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use SwTest;
use JSON::PP;

my $broker = SwTest::broker(topics => [ 'ev:2', 'bin:1', 'live:1', 'kv:1' ]);
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('retain_raw',
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\nmax_worker_processes = 24\n");
my $base = "http://127.0.0.1:$port/postgres/public";
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub post { my ($table, @rest) = @_; return SwTest::post("$base/$table", @rest); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE ev (id int, v text, ts timestamptz OPTIONS (source 'timestamp'))
	  SERVER k OPTIONS (topic 'ev', retain_raw 'true');
	CREATE FOREIGN TABLE bin (b bytea) SERVER k
	  OPTIONS (topic 'bin', format 'bytes', retain_raw 'true');
	CREATE FOREIGN TABLE live (id int) SERVER k OPTIONS (topic 'live');
	CREATE FOREIGN TABLE kv (k int, v text) SERVER k
	  OPTIONS (topic 'kv', envelope 'upsert', key 'k', retain_raw 'true');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks
	  OPTIONS (idempotency_header 'Idempotency-Key', retain_raw 'true');
	CREATE FOREIGN TABLE arr (id int) SERVER hooks OPTIONS (format 'json_array', retain_raw 'true');
	CREATE ROLE reader;
	CREATE ROLE one_column;
	GRANT SELECT ON ev, pay TO reader;
	GRANT SELECT (id) ON ev, pay TO one_column});

# Kafka: a null key, headers (one without a value, one not UTF-8, a name
# twice), the broker's timestamp
SwTest::produce_bytes($broker, 'ev', '{"id": 1, "v": "one"}', '-H', 'trace=abc', '-H', 'novalue',
	'-H', "bin=\xff\xfe", '-H', 'trace=second');
SwTest::produce_bytes($broker, 'ev', '{"id": 2, "v": "two"}', '-k', "key\x01two");
SwTest::produce_bytes($broker, 'ev', '{"id": 3, "v": "three"}', '-k', '');
sql(q{SELECT source_writes.wait_for('ev')});
is(sql(q{SELECT string_agg(concat_ws(' ', (data).id, coalesce('x' || encode(key, 'hex'), 'null'),
		convert_from(value, 'UTF8'), "timestamp" = (extract(epoch FROM (data).ts) * 1000)::bigint,
		coalesce(header_names::text, 'none'), coalesce(header_values::text, 'none')), E'\n'
		ORDER BY (data).id) FROM source_writes.raw_messages(NULL::ev)}),
	qq(1 null {"id": 1, "v": "one"} t {trace,novalue,bin,trace} {"\\\\x616263",NULL,"\\\\xfffe","\\\\x7365636f6e64"}\n)
	. qq(2 x6b65790174776f {"id": 2, "v": "two"} t none none\n)
	. qq(3 x {"id": 3, "v": "three"} t none none),
	'each row keeps its message: key (none, or empty), value, timestamp and headers as sent');
is(sql(q{SELECT count(*) FROM source_writes.raw_messages(NULL::ev) r
		JOIN source_writes.blame(NULL::ev) b ON b.data = r.data
		WHERE (r."partition", r."offset") = (b."partition", b."offset")}), '3',
	'... with its partition and offset');

# a binary value, every byte
my $bytes = join('', map { chr($_) } 0 .. 255) x 4;
SwTest::produce_bytes($broker, 'bin', $bytes, '-k', "\xfe\xff");
sql(q{SELECT source_writes.wait_for('bin')});
is(sql(q{SELECT length(value) || ' ' || (value = (data).b) || ' '
		|| (value = (SELECT string_agg(set_byte('\x00'::bytea, 0, g % 256), ''::bytea ORDER BY g)
		             FROM generate_series(0, 1023) g)) || ' ' || encode(key, 'hex')
		FROM source_writes.raw_messages(NULL::bin)}),
	'1024 true true feff', 'a binary value and key, byte for byte');

# an upsert source: a key's row keeps its last message, headers too (a
# batch merges a key's messages and writes the last), its earlier rows
# keep theirs in the history
SwTest::produce_bytes($broker, 'kv', '{"k": 1, "v": "a"}', '-k', '{"k": 1}', '-H', 'n=1');
sql(q{SELECT source_writes.wait_for('kv')});
SwTest::produce($broker, 'kv', qq({"k": 1}\t{"k": 1, "v": "b"}));
SwTest::produce_bytes($broker, 'kv', '{"k": 1, "v": "c"}', '-k', '{"k": 1}', '-H', 'n=3');
sql(q{SELECT source_writes.wait_for('kv')});
is(sql(q{SELECT string_agg(concat_ws(' ', (data).v, convert_from(value, 'UTF8'), "offset",
		coalesce(header_names::text, '-'), coalesce(header_values::text, '-'), valid_to IS NULL),
		E'\n' ORDER BY valid_from) FROM source_writes.raw_messages(NULL::kv) r
		WHERE valid_to IS NULL OR "offset" = 0}),
	qq(a {"k": 1, "v": "a"} 0 {n} {"\\\\x31"} f\nc {"k": 1, "v": "c"} 2 {n} {"\\\\x33"} t),
	"an upserted key's row keeps its last message");

# people's edits: their rows keep none; the rows they retract keep theirs
sql(q{UPDATE ev SET v = 'ONE' WHERE id = 1; DELETE FROM ev WHERE id = 2;
	INSERT INTO ev (id, v) VALUES (4, 'typed')});
is(sql(q{SELECT string_agg((data).id || ':' || (data).v || ':' || (valid_to IS NULL), ','
		ORDER BY (data).id) FROM source_writes.raw_messages(NULL::ev)}),
	'1:one:false,2:two:false,3:three:true', 'history rows keep their messages, people\'s rows none');

# webhooks: each row keeps its piece of the body, exactly; the request's
# headers are not kept
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM source_writes.sources
	WHERE kind = 'webhook' AND state = 'listening'}), 'the webhook server listens');
my $before = time();
is(post('pay', qq({"id": 1, "note": "a"}\n{"id":2,"note":"b\\u00e9"}\n  {"id": 3, "note": "c"}  \n),
	'Content-Type: application/x-ndjson', 'Idempotency-Key: d-1', 'Authorization: Bearer s3cret'),
	'200 3 rows', 'a delivery of three rows');
my $after = time();
is(sql(q{SELECT string_agg((data).id || ' [' || convert_from(value, 'UTF8') || '] ' || delivery || ' '
		|| (key IS NULL AND header_names IS NULL AND header_values IS NULL AND "timestamp" IS NULL),
		E'\n' ORDER BY (data).id) FROM source_writes.raw_messages(NULL::pay)}),
	qq(1 [{"id": 1, "note": "a"}] d-1 true\n2 [{"id":2,"note":"b\\u00e9"}] d-1 true\n3 [  {"id": 3, "note": "c"}  ] d-1 true),
	'each row keeps its line of the body, and no header');
is(sql(qq{SELECT count(*) FROM source_writes.raw_messages(NULL::pay)
		WHERE extract(epoch FROM received_at) BETWEEN $before - 1 AND $after + 1}), '3',
	'... and when it came');
my ($heap) = sql(q{SELECT current_rel FROM source_writes.source_tables WHERE relid = 'pay'::regclass});
is(sql(qq{SELECT count(*) FROM $heap WHERE convert_from("\$value", 'UTF8') LIKE '%s3cret%'}), '0',
	'the token in a header is nowhere in the storage');
is(post('arr', q([{"id": 1}, {"id": [2]}]), 'Content-Type: application/json'),
	'400 cannot convert a JSON array to type integer (column "id" of source table "arr", field "id"; element 2 of the body)',
	'a body that fails writes nothing');
is(post('arr', q([{"id": 1},{"id":  2}]), 'Content-Type: application/json'), '200 2 rows',
	'a JSON array');
is(sql(q{SELECT string_agg(convert_from(value, 'UTF8'), '|' ORDER BY (data).id)
		FROM source_writes.raw_messages(NULL::arr)}),
	'{"id": 1}|{"id":  2}', 'each row keeps its element');

# who may read the rows reads the messages; SELECT on one column is not enough
is(sql(q{SET ROLE reader; SELECT count(*) FROM source_writes.raw_messages(NULL::pay)}), '3',
	'a reader reads them');
my ($ret, $out, $err) = $node->psql('postgres',
	q{SET ROLE one_column; SELECT count(*) FROM source_writes.raw_messages(NULL::pay)});
like($err, qr/permission denied for foreign table pay/, 'SELECT on one column does not read them');

# ALTER on a live table: rows before have none, rows after keep theirs;
# turned off, rows after keep none, and the columns stay
SwTest::produce($broker, 'live', map { "\t{\"id\": $_}" } 1 .. 5);
sql(q{SELECT source_writes.wait_for('live')});
my $columns = q{SELECT count(*) FROM pg_attribute WHERE attrelid =
	(SELECT current_rel FROM source_writes.source_tables WHERE relid = 'live'::regclass)
	AND attnum > 0 AND NOT attisdropped};
is(sql($columns), '4', 'a table without the option: no column more');
sql(q{ALTER FOREIGN TABLE live OPTIONS (ADD retain_raw 'true')});
is(sql($columns), '9', 'turned on: the columns of the raw message');
SwTest::produce($broker, 'live', map { "k$_\t{\"id\": $_}" } 6 .. 10);
sql(q{SELECT source_writes.wait_for('live')});
sql(q{ALTER FOREIGN TABLE live OPTIONS (SET retain_raw 'false')});
SwTest::produce($broker, 'live', map { "k$_\t{\"id\": $_}" } 11 .. 15);
sql(q{SELECT source_writes.wait_for('live')});
is(sql(q{SELECT count(*) FROM live}) . ' '
	. sql(q{SELECT string_agg((data).id || ':' || convert_from(key, 'UTF8'), ',' ORDER BY (data).id)
		FROM source_writes.raw_messages(NULL::live)}),
	'15 6:k6,7:k7,8:k8,9:k9,10:k10', 'only the rows ingested while it was on keep their messages');
is(sql($columns), '9', 'turned off, the columns stay');

# a move carries the raw messages (format version 3): imported into a
# table with retain_raw in another database, each row version keeps its
# message as it was, current and history, and a row that kept none keeps
# none; a version of the imported table decodes new columns from them; a
# table without retain_raw, or an export without them, keeps none
sql(q{CREATE DATABASE moved});
sub moved { return $node->safe_psql('moved', $_[0]); }
moved(qq{CREATE EXTENSION source_writes;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE TABLE lines (line text)});
sub export_of
{
	my ($table) = @_;
	return split /\n/, sql(qq{SELECT string_agg(e, E'\\n') FROM source_writes.export('$table') e});
}
# create a table and import lines into it in one transaction: the error, or ''
sub move_into
{
	my ($create, $table, @lines) = @_;
	moved('TRUNCATE lines');
	moved('INSERT INTO lines VALUES ' . join(', ', map { "(\$j\$$_\$j\$)" } @lines));
	my ($ret, $out, $err) = $node->psql('moved',
		"BEGIN; $create; SELECT source_writes.import('$table', 'lines'); COMMIT");
	return $err;
}
my $raw_of = q{SELECT string_agg(concat_ws(' ', valid_from, coalesce(valid_to::text, '-'),
	"partition", "offset", delivery, received_at, coalesce('x' || encode(key, 'hex'), 'null'),
	coalesce('x' || encode(value, 'hex'), 'null'), coalesce("timestamp"::text, 'null'),
	coalesce(header_names::text, 'none'), coalesce(header_values::text, 'none'), data),
	E'\n' ORDER BY valid_from, data::text) FROM source_writes.raw_messages(NULL::%s)};
my $log_of = q{SELECT string_agg(concat_ws(' ', ts, diff, origin, role, data), E'\n'
	ORDER BY ts, data::text, diff) FROM source_writes.updates(NULL::%s)};
my $ev_create = q{CREATE FOREIGN TABLE %s (id int, v text, ts timestamptz OPTIONS (source 'timestamp'))
	SERVER k OPTIONS (topic 'ev'%s)};
my @ev = export_of('ev');
like($ev[0], qr/^\{"format": "source_writes export", "version": 3, .*"raw": true, /,
	'an export of a table that keeps raw messages is of format version 3, with them');
is(move_into(sprintf($ev_create, 'ev', ", retain_raw 'true'"), 'ev', @ev), '',
	'a Kafka source with raw messages moves');
is($node->safe_psql('moved', sprintf($raw_of, 'ev')), sql(sprintf($raw_of, 'ev')),
	'its rows keep their messages, byte for byte, current and history');
like(sql(sprintf($raw_of, 'ev')), qr/xfffe"/, '(headers and all)');
is($node->safe_psql('moved', sprintf($log_of, 'ev')), sql(sprintf($log_of, 'ev')), '... and the same log');
is($node->safe_psql('moved', q{SELECT count(*) FILTER (WHERE valid_to IS NULL) || ' '
		|| count(*) FROM source_writes.history(NULL::ev) h WHERE NOT EXISTS
		(SELECT FROM source_writes.raw_messages(NULL::ev) r WHERE r.valid_from = h.valid_from
		 AND r.data::text = h.data::text)}), '2 2', "the people's rows keep none");
my @pay = export_of('pay');
is(move_into(q{CREATE FOREIGN TABLE pay (id int, note text) SERVER hooks
		OPTIONS (idempotency_header 'Idempotency-Key', retain_raw 'true')}, 'pay', @pay), '',
	'a webhook source with raw messages moves');
is($node->safe_psql('moved', sprintf($raw_of, 'pay')), sql(sprintf($raw_of, 'pay')),
	'its rows keep their pieces of the body');
my @live = export_of('live');
like($live[0], qr/"raw": true/, 'retain_raw turned off: the messages kept are exported');
is(move_into(q{CREATE FOREIGN TABLE live (id int) SERVER k OPTIONS (topic 'live');
		ALTER FOREIGN TABLE live ADD COLUMN more int;
		ALTER FOREIGN TABLE live OPTIONS (ADD retain_raw 'true');
		ALTER FOREIGN TABLE live DROP COLUMN more}, 'live', @live), '',
	'into a table whose raw columns are in a run of their own');
is($node->safe_psql('moved', sprintf($raw_of, 'live')), sql(sprintf($raw_of, 'live')),
	'the rows that kept a message keep it, the others none');

my @bin = export_of('bin');
is(move_into(q{CREATE FOREIGN TABLE bin (b bytea) SERVER k
		OPTIONS (topic 'bin', format 'bytes', retain_raw 'true')}, 'bin', @bin), '',
	'a message longer than a line of the export moves');
is($node->safe_psql('moved', sprintf($raw_of, 'bin')), sql(sprintf($raw_of, 'bin')),
	'... every byte of it');

# a version of the moved table decodes new columns from the messages
moved(q{CREATE FOREIGN TABLE ev_v2 (id int, v text, ts timestamptz OPTIONS (source 'timestamp'),
	k bytea OPTIONS (source 'key'), trace bytea OPTIONS (header 'trace'))
	SERVER k OPTIONS (topic 'ev', version_of 'ev')});
is($node->safe_psql('moved', q{SELECT string_agg(concat_ws(':', (data).id, valid_to IS NULL,
		coalesce(encode((data).k, 'hex'), 'null'), coalesce(encode((data).trace, 'hex'), 'null')),
		',' ORDER BY valid_from, (data).id) FROM source_writes.history(NULL::ev_v2)}),
	'1:f:null:7365636f6e64,2:f:6b65790174776f:null,3:t::null,'
	. '1:t:null:7365636f6e64,4:t:null:null',
	'a version of the moved table decodes its key and headers');

# into a table without retain_raw: the messages are left behind
is(move_into(sprintf($ev_create, 'ev_plain', ''), 'ev_plain', @ev), '',
	'into a table without retain_raw');
is($node->safe_psql('moved', sprintf($log_of, 'ev_plain')), sql(sprintf($log_of, 'ev')),
	'it has the log');
is($node->safe_psql('moved', q{SELECT count(*) FROM pg_attribute WHERE attrelid IN
		(SELECT history_rel FROM source_writes.source_tables WHERE relid = 'ev_plain'::regclass)
		AND attname LIKE '$%'}) . ' '
	. $node->safe_psql('moved', q{SELECT count(*) FROM source_writes.raw_messages(NULL::ev_plain)}),
	'4 0', 'and no message');

# an export of format version 2 (without the messages) into a table with
# retain_raw: its rows keep none
my $json = JSON::PP->new->utf8->canonical;
my @ev2 = map {
	my $l = $_;
	if ($l =~ /^\[/)
	{
		$l = $json->encode([ map { [ @$_[ 0 .. $#$_ - 5 ] ] } @{ $json->decode($l) } ]);
	}
	elsif ($l =~ /"format"/)
	{
		$l =~ s/"version": 3/"version": 2/ or die;
		$l =~ s/, "raw": true// or die;
	}
	$l;
} @ev;
is(move_into(sprintf($ev_create, 'ev2', ", retain_raw 'true'"), 'ev2', @ev2), '',
	'an export of format version 2');
is($node->safe_psql('moved', sprintf($log_of, 'ev2')) . ' '
	. $node->safe_psql('moved', q{SELECT count(*) FROM source_writes.raw_messages(NULL::ev2)}),
	sql(sprintf($log_of, 'ev')) . ' 0', 'has the log, and no message');

# who may read the messages: SELECT on the table, not on its columns
like(($node->psql('postgres', q{SET ROLE one_column; SELECT count(*) FROM source_writes.export('pay')}))[2],
	qr/permission denied for foreign table pay/, 'SELECT on a column does not export');
like(sql(q{SET ROLE reader; SELECT e FROM source_writes.export('pay') e LIMIT 1}), qr/"raw": true/,
	'SELECT on the table exports the messages');

# bad raw messages: refused with the line, nothing written
moved(q{CREATE FOREIGN TABLE badw (id int, note text) SERVER hooks OPTIONS (retain_raw 'true')});
my ($pay_rows) = grep { /^\[/ } @pay;
my $pay_row_line = (grep { $pay[$_] =~ /^\[/ } 0 .. $#pay)[0] + 1;
sub pay_with
{
	my ($change) = @_;
	my $rows = $json->decode($pay_rows);
	$change->($rows->[0]);
	return map { /^\[/ ? $json->encode($rows) : $_ } @pay;
}
my $ev_row_line = (grep { $ev[$_] =~ /^\[/ } 0 .. $#ev)[0] + 1;
sub ev_with
{
	my ($change) = @_;
	my $done;
	return map {
		my $l = $_;
		if (!$done && $l =~ /^\[/)
		{
			my $rows = $json->decode($l);
			$change->($rows->[0]);
			$l = $json->encode($rows);
			$done = 1;
		}
		$l;
	} @ev;
}
# the rows of ev: [added, retracted, part, pos, delivery, id, v, ts, key,
# value, timestamp, header_names, header_values]; of pay: [..., id, note,
# key, value, timestamp, header_names, header_values]
my @bad = (
	[ 'a row without its message', pay_with(sub { splice(@{ $_[0] }, -5) }),
	  qr/At line $pay_row_line: A row has 7 values, and not 12: .* and the 5 fields of its raw message/ ],
	[ 'a row with a field too many', pay_with(sub { push @{ $_[0] }, undef }),
	  qr/At line $pay_row_line: A row has 13 values, and not 12/ ],
	[ 'a value not in hex', pay_with(sub { $_[0][8] = 'zz' }),
	  qr/At line $pay_row_line: The "value" of a row's message is not a string of hex digits/ ],
	[ 'an odd number of hex digits', pay_with(sub { $_[0][8] = 'abc' }),
	  qr/The "value" of a row's message is not a string of hex digits/ ],
	[ 'a key in a webhook row', pay_with(sub { $_[0][7] = '00' }),
	  qr/A row of a webhook source keeps the "value" of its message only, and this one has a "key"/ ],
	[ 'a key without a timestamp', ev_with(sub { $_[0][8] = '01'; $_[0][10] = undef }),
	  qr/At line $ev_row_line: A row keeps a message's key, value or headers without its "timestamp"/ ],
	[ 'header names without values', ev_with(sub { @{ $_[0] }[ 10 .. 12 ] = (1, ['a'], undef) }),
	  qr/A row's message has as many header names as header values/ ],
	[ 'more header names than values', ev_with(sub { @{ $_[0] }[ 10 .. 12 ] = (1, ['a', 'b'], ['00']) }),
	  qr/A row's message has as many header names as header values/ ],
	[ 'a header name that is not a string', ev_with(sub { @{ $_[0] }[ 10 .. 12 ] = (1, [1], ['00']) }),
	  qr/The "header_names" of a row's message are not strings/ ],
	[ 'a header value that is not in hex', ev_with(sub { @{ $_[0] }[ 10 .. 12 ] = (1, ['a'], ['x']) }),
	  qr/The "header_values" of a row's message are not strings of hex digits, or nulls/ ],
	[ 'a timestamp that is not one', ev_with(sub { $_[0][10] = -5 }),
	  qr/The "timestamp" of a row's message is -5/ ],
	[ 'a header without "raw"', (map { my $l = $_; $l =~ s/, "raw": true//; $l } @ev),
	  qr/Its header has no "raw" of true or false/ ]);
my $ev_bad = sprintf($ev_create, 'bad', ", retain_raw 'true'");
for my $bad (@bad)
{
	my ($name, @l) = @$bad;
	my $error = pop @l;
	my $webhook = $l[0] =~ /"kind": "webhook"/;
	like(move_into($webhook ? 'SELECT' : $ev_bad, $webhook ? 'badw' : 'bad', @l),
		qr/the export in "public.lines" cannot be imported.*$error/s, $name);
	is($node->safe_psql('moved', $webhook ? q{SELECT count(*) FROM source_writes.updates(NULL::badw)}
			: q{SELECT count(*) FROM pg_class WHERE relname = 'bad'}), '0',
		"$name: nothing written");
}
# the same lines as they were are taken
is(move_into($ev_bad, 'bad', ev_with(sub { })), '', 'the lines re-encoded are taken');
is($node->safe_psql('moved', sprintf($raw_of, 'bad')), sql(sprintf($raw_of, 'ev')), '... as they were');

# compaction past retain_history deletes the history, messages with it
sql(q{UPDATE ev SET v = 'THREE' WHERE id = 3});
is(sql(q{SELECT count(*) FROM source_writes.raw_messages(NULL::ev) WHERE valid_to IS NOT NULL}),
	'3', 'three retracted rows keep their messages');
sql(q{ALTER FOREIGN TABLE ev OPTIONS (ADD retain_history '0')});
cmp_ok(sql(q{SELECT source_writes.compact('ev')}), '>=', 3, 'compaction deletes the history');
my ($history) = sql(q{SELECT history_rel FROM source_writes.source_tables WHERE relid = 'ev'::regclass});
is(sql(qq{SELECT count(*) FROM $history}) . ' '
	. sql(q{SELECT count(*) FROM source_writes.raw_messages(NULL::ev)}), '0 0',
	'no message is left with them');

# storage made before positions were kept (a dump of 0.2, restored and
# altered in the restore's transaction), given a column, then retain_raw:
# our columns in three runs, between the table's; its rows are ingested,
# edited, retracted and read
sql(q{CREATE DATABASE old; CREATE DATABASE restored});
$node->safe_psql('old', q{
	CREATE EXTENSION source_writes;
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE t (id int, note text) SERVER hooks;
	INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 3) g});
my $dump = "$dir/old.sql";
SwTest::run_client('pg_dump of a source', 'pg_dump', '-Fp', '-f', $dump, $node->connstr('old'));
# take the columns of 0.3 out of its storage, as a dump of 0.2 has it
my @lines = split /\n/, slurp_file($dump), -1;
my $cut;
for my $line (@lines)
{
	$line =~ s/^    "\$(part|pos|delivery)" (integer|bigint|text)( COLLATE pg_catalog\."C")?,$/--/;
	if ($line =~ /^COPY source_writes_internal\.\w+ \((.*)\) FROM stdin;$/)
	{
		my @cols = split /, /, $1;
		$cut = { map { $_ => 1 } grep { $cols[$_] =~ /^"\$(part|pos|delivery)"$/ } 0 .. $#cols };
		$line =~ s/\(.*\)/'(' . join(', ', map { $cols[$_] } grep { !$cut->{$_} } 0 .. $#cols) . ')'/e;
		next;
	}
	if ($cut && $line eq '\.') { $cut = undef; next; }
	next unless $cut;
	my @fields = split /\t/, $line, -1;
	$line = join("\t", map { $fields[$_] } grep { !$cut->{$_} } 0 .. $#fields);
}
PostgreSQL::Test::Utils::append_to_file("$dump.old", join("\n", @lines));
SwTest::run_client('psql of the dump of old storage', 'psql', '-X', '-q', '-1',
	'-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('restored'), '-f', "$dump.old",
	'-c', q{ALTER FOREIGN TABLE public.t ADD COLUMN extra text DEFAULT 'x'});
sub restored { return $node->safe_psql('restored', $_[0]); }
restored(q{ALTER FOREIGN TABLE t ADD COLUMN more int;
	ALTER FOREIGN TABLE t OPTIONS (ADD retain_raw 'true')});
is(restored(q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute
		WHERE attrelid = (SELECT history_rel FROM source_writes.source_tables) AND attnum > 0}),
	'id,note,$batch,$retracted,extra,$part,$pos,$delivery,more,$value',
	'our columns in three runs');
ok($node->poll_query_until('restored', q{SELECT count(*) = 1 FROM source_writes.sources
	WHERE state = 'listening'}), 'the webhook server listens for the restored table');
my ($status) = run_command([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'POST',
	"http://127.0.0.1:$port/restored/public/t", '-H', 'Content-Type: application/json',
	'--data-binary', '{"id": 4, "note": "posted", "extra": "e", "more": 40}' ]);
is($status, '200', 'a delivery to it');
restored(q{UPDATE t SET note = 'edited' WHERE id IN (1, 4); DELETE FROM t WHERE id = 2;
	ALTER FOREIGN TABLE t ADD COLUMN last int DEFAULT 1});
# (concat_ws() leaves NULLs out)
is(restored(q{SELECT string_agg(concat_ws(':', id, note, extra, more, last), ',' ORDER BY id) FROM t}),
	'1:edited:x:1,3:row 3:x:1,4:edited:e:40:1', 'its rows are read');
is(restored(q{SELECT string_agg(concat_ws(' ', (data).id, (data).note, (data).more, (data).last,
		convert_from(value, 'UTF8'), valid_to IS NULL), ',' ORDER BY valid_from)
		FROM source_writes.raw_messages(NULL::t)}),
	'4 posted 40 {"id": 4, "note": "posted", "extra": "e", "more": 40} f',
	'the posted row keeps its body in the history');
is(restored(q{SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::t)
		GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}), '0',
	'the log holds no negative or doubled multiplicity');

# a move of it: the messages go with their rows, from our columns in
# three runs into a table that has them in one
my @t = split /\n/, restored(q{SELECT string_agg(e, E'\n') FROM source_writes.export('t') e});
is(move_into(q{CREATE FOREIGN TABLE t (id int, note text, extra text, more int, last int) SERVER hooks
		OPTIONS (retain_raw 'true')}, 't', @t), '', 'a move of a table whose columns are in three runs');
my $history_of_t = q{SELECT string_agg(concat_ws(' ', valid_from, valid_to, origin, data), ','
	ORDER BY valid_from, data::text) FROM source_writes.history(NULL::t)};
is($node->safe_psql('moved', sprintf($raw_of, 't')) . ' ' . $node->safe_psql('moved', $history_of_t),
	restored(sprintf($raw_of, 't')) . ' ' . restored($history_of_t), '... the same messages and log');
like($node->safe_psql('moved', sprintf($raw_of, 't')), qr/posted/, '(the posted row\'s)');

# a dump keeps the raw messages: restored, they are read as they were
my $raw_of_t = q{SELECT string_agg(concat_ws(' ', valid_to IS NULL, (data).id, encode(value, 'hex')),
	',' ORDER BY valid_from) FROM source_writes.raw_messages(NULL::t)};
my $before_dump = restored($raw_of_t);
sql(q{CREATE DATABASE again});
SwTest::run_client('pg_dump of the source with raw messages', 'pg_dump', '-Fc', '-f', "$dir/raw.dump",
	$node->connstr('restored'));
SwTest::run_client('pg_restore of it', 'pg_restore', '-d', $node->connstr('again'), "$dir/raw.dump");
is($node->safe_psql('again', $raw_of_t), $before_dump, 'a restored source keeps its raw messages');
is($node->safe_psql('again', q{SELECT ftoptions FROM pg_foreign_table}), '{retain_raw=true}',
	'... and its option');

done_testing();
