# The outside review of moves with raw messages (export() format version
# 3, retain_raw): messages of every byte move byte for byte, whichever way
# import() reads their lines (as export() wrote them, or as jsonb), current
# and history rows, also with retain_raw turned on, off and on again, and
# come out of an export of the import as they went in; crafted exports are
# refused with their line and write nothing, and a person's row gets no
# message.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;
use JSON::PP;
use Digest::MD5;

my $broker = SwTest::broker(topics => [ 'w:1', 'r:1', 'h:1' ]);
my $node = SwTest::node('review_raw');
my $json = JSON::PP->new->utf8->canonical;

sub sql { return $node->safe_psql('postgres', $_[0]); }
sub moved { return $node->safe_psql('moved', $_[0]); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE w (b bytea) SERVER k
	  OPTIONS (topic 'w', format 'bytes', retain_raw 'true');
	CREATE FOREIGN TABLE r (id int) SERVER k OPTIONS (topic 'r');
	CREATE DATABASE moved});
moved(qq{CREATE EXTENSION source_writes;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE TABLE lines (line text);
	CREATE VIEW lines_view AS SELECT line FROM lines});

# NUL bytes and bytes that are not UTF-8 in the key, the value and the
# headers' values; a header without a value and one with an empty value;
# header names that JSON escapes (a quote, a backslash, a tab, a control
# character); an empty key and none
# (kcat takes keys and headers as arguments, which end at a NUL byte: the
# crafted exports below have those)
SwTest::produce_bytes($broker, 'w', "\x00\xff\xc3\x28\x00end", '-k', "\xfe\xff\x01",
	'-H', "plain=\xff\xc3\x28", '-H', 'novalue', '-H', 'empty=',
	'-H', "q\"b\\t\t=v", '-H', "ctl\x01=\x01");
SwTest::produce_bytes($broker, 'w', 'emptykey', '-k', '');
SwTest::produce_bytes($broker, 'w', 'nokey');
sql(q{SELECT source_writes.wait_for('w')});
sql(q{INSERT INTO w VALUES ('\x0102'); UPDATE w SET b = '\x6e6f6b6579ff' WHERE b = 'nokey'});

my $raw_of = q{SELECT string_agg(concat_ws(' ', valid_from, coalesce(valid_to::text, '-'),
	"partition", "offset", coalesce('x' || encode(key, 'hex'), 'null'),
	coalesce('x' || encode(value, 'hex'), 'null'), coalesce("timestamp"::text, 'null'),
	coalesce(header_names::text, 'none'), coalesce(header_values::text, 'none'), data),
	E'\n' ORDER BY valid_from, data::text) FROM source_writes.raw_messages(NULL::%s)};
my $log_of = q{SELECT string_agg(concat_ws(' ', ts, diff, origin, role, data), E'\n'
	ORDER BY ts, data::text, diff) FROM source_writes.updates(NULL::%s)};
like(sql(sprintf($raw_of, 'w')), qr/\{plain,novalue,empty,"q\\"b\\\\t\t",ctl\x01\}/,
	'the messages are kept as sent') or diag(sql(sprintf($raw_of, 'w')));

sub export_of
{
	my ($table) = @_;
	return split /\n/, sql(qq{SELECT string_agg(e, E'\\n') FROM source_writes.export('$table') e});
}

# create a table and import lines (through a table or a view) in one
# transaction: the error, or ''
sub move_into
{
	my ($create, $table, $from, @lines) = @_;
	moved('TRUNCATE lines');
	moved('INSERT INTO lines VALUES ' . join(', ', map { "(\$j\$$_\$j\$)" } @lines));
	my ($ret, $out, $err) = $node->psql('moved',
		"SET client_min_messages = warning; BEGIN; DROP FOREIGN TABLE IF EXISTS $table; $create; "
		. "SELECT source_writes.import('$table', '$from'); COMMIT");
	return $err;
}

# the lines of rows as jsonb writes them, with spaces: import() reads them
# as jsonb, not as export() writes them
sub spaced
{
	return map { /^\[/ ? do { (my $l = $_) =~ s/,/, /g; $l } : $_ } @_;
}

my @w = export_of('w');
my $w_create = q{CREATE FOREIGN TABLE w (b bytea) SERVER k
	OPTIONS (topic 'w', format 'bytes', retain_raw 'true')};
for my $how ([ 'as written', 'lines', @w ], [ 'through a view', 'lines_view', @w ],
	[ 'as jsonb', 'lines', spaced(@w) ])
{
	my ($name, $from, @lines) = @$how;
	is(move_into($w_create, 'w', $from, @lines), '', "moved, lines read $name");
	is(moved(sprintf($raw_of, 'w')), sql(sprintf($raw_of, 'w')),
		"$name: every byte of the messages, current and history");
	is(moved(sprintf($log_of, 'w')), sql(sprintf($log_of, 'w')), "$name: the same log");
}

# crafted exports.  The rows of w: [added, retracted, part, pos, delivery,
# b, key, value, timestamp, header_names, header_values]
my %origin = map { /^\{"batch": (\d+), "ts": \d+, "origin": "(\w+)"/ ? ($1 => $2) : () } @w;
my $row_line = (grep { $w[$_] =~ /^\[/ } 0 .. $#w)[0] + 1;
# the lines of w with a change to each row; $_[1] says whether it was
# added by a person
sub w_with
{
	my ($change) = @_;
	return map {
		my $l = $_;
		if ($l =~ /^\[/)
		{
			my $rows = $json->decode($l);
			$change->($_, defined $_->[0] && $origin{ $_->[0] } eq 'user') for @$rows;
			$l = $json->encode($rows);
		}
		$l;
	} @w;
}
# lines that import() must refuse, read either way: the error names the
# line (1: the header)
sub refused
{
	my ($name, $line, $error, @lines) = @_;
	for my $how ([ 'as written', @lines ], [ 'as jsonb', spaced(@lines) ])
	{
		my ($as, @l) = @$how;
		moved('DROP FOREIGN TABLE IF EXISTS w');
		like(move_into($w_create, 'w', 'lines', @l),
			qr/the export in "public.lines" cannot be imported\nDETAIL:  At line $line: $error/,
			"$name ($as): refused with its line");
		is(moved(q{SELECT count(*) FROM pg_class WHERE relname = 'w'}), '0', "$name ($as): nothing written");
	}
}
# a person's row (origin "user") keeps no message: none is given to one
my @persons = w_with(sub { @{ $_[0] }[ 6 .. 10 ] = (undef, '00', 5, undef, undef)
	if $_[1] && !defined $_[0][7] });
isnt(kept(@persons), kept(@w), "(a person's row is given a message)");
refused("a message on a person's row", $row_line,
	qr/A row added by a batch of origin "user" keeps a message, and a person's rows keep none/, @persons);
refused('a key that is a number', $row_line, qr/The "key" of a row's message is not a string of hex digits/,
	w_with(sub { $_[0][6] = 12 if defined $_[0][8] }));
refused('hex digits of odd length', $row_line, qr/The "key" of a row's message is not a string of hex digits/,
	w_with(sub { $_[0][6] = '0' if defined $_[0][8] }));
refused('hex digits with a space', $row_line, qr/The "value" of a row's message is not a string of hex digits/,
	w_with(sub { $_[0][7] = '00 11' if defined $_[0][8] }));
refused('a timestamp that is a string', $row_line, qr/"timestamp" is not a number/,
	w_with(sub { $_[0][8] = '5' if defined $_[0][8] }));
refused('a timestamp with a fraction', $row_line, qr/"timestamp" is 1\.5, not an integer of 64 bits/,
	w_with(sub { $_[0][8] = 1.5 if defined $_[0][8] }));
refused('a timestamp out of range', $row_line, qr/"timestamp" is 9223372036854775808, not an integer of 64 bits/,
	map { s/,(\d{13}),/,9223372036854775808,/gr } @w);
refused('header names in an object', $row_line, qr/The "header_names" of a row's message is not an array/,
	w_with(sub { @{ $_[0] }[ 9, 10 ] = ({ a => 'b' }, ['00']) if defined $_[0][8] }));
refused('a null header name', $row_line, qr/The "header_names" of a row's message are not strings/,
	w_with(sub { @{ $_[0] }[ 9, 10 ] = ([undef], ['00']) if defined $_[0][8] }));
refused('a header value that is an array', $row_line, qr/The "header_values" of a row's message are not strings of hex digits, or nulls/,
	w_with(sub { @{ $_[0] }[ 9, 10 ] = (['a'], [['00']]) if defined $_[0][8] }));
refused('a message on some rows only', $row_line, qr/A row has 6 values, and not 11/,
	w_with(sub { splice(@{ $_[0] }, 6) if $_[1] }));
refused('"raw" a string', 1, qr/Its header has no "raw" of true or false/,
	map { s/"raw": true/"raw": "true"/r } @w);

# what the rows of an export keep, batches and positions left out: each
# row's values and message, in order
sub kept
{
	return join("\n", sort map { map { $json->encode([ @$_[ 5 .. $#$_ ] ]) } @{ $json->decode($_) } }
		grep { /^\[/ } @_);
}
sub export_of_moved
{
	my ($table) = @_;
	return split /\n/, moved(qq{SELECT string_agg(e, E'\\n') FROM source_writes.export('$table') e});
}

# the timestamps a message may have (-1, none, 0, the greatest), NUL bytes
# in keys and header values, an empty key, an empty array of headers: an
# import exported again gives them as they were
my $n = 0;
my @crafted = w_with(sub {
	return unless defined $_[0][8];
	@{ $_[0] }[ 6 .. 10 ] = $n == 0 ? ('0000fe00', '00', -1, [ 'a', "\x{e9}\t\"", '' ], [ '00ff00', undef, '' ])
	  : $n == 1 ? ('', '', 0, [], [])
	  : (undef, undef, 9223372036854775807, undef, undef);
	$n++;
});
is($n, 3, '(three rows with a message)');
for my $how ([ 'as written', @crafted ], [ 'as jsonb', spaced(@crafted) ])
{
	my ($as, @l) = @$how;
	is(move_into($w_create, 'w', 'lines', @l), '', "crafted messages ($as)");
	is(kept(export_of_moved('w')), kept(@crafted), "... exported again as they came ($as)");
}

# a message of 1.5 MB: alone in a line of 3 MB, read either way
my $big = join('', map { sprintf('%02x', ($_ * 7 + 3) % 256) } 0 .. 1_572_863);
my @bigw = w_with(sub { $_[0][7] = $big if defined $_[0][8] });
for my $how ([ 'as written', @bigw ], [ 'as jsonb', spaced(@bigw) ])
{
	my ($as, @l) = @$how;
	is(move_into($w_create, 'w', 'lines', @l), '', "a message of 1.5 MB ($as)");
	is(moved(q{SELECT string_agg(DISTINCT length(value) || ' ' || md5(value), ',')
			FROM source_writes.raw_messages(NULL::w) WHERE key IS DISTINCT FROM '\x'}),
		'1572864 ' . Digest::MD5::md5_hex(pack('H*', $big)), "... byte for byte ($as)");
	is(kept(export_of_moved('w')), kept(@bigw), "... exported again as it came ($as)");
}

# a header that claims format version 2 with rows of version 3: refused;
# the messages of an export of version 2 that says "raw" are not read
my @v2 = map { s/"version": 3/"version": 2/r } @w;
refused('an export of version 2 with messages', $row_line, qr/A row has 11 values, and not 6/, @v2);
my @v2plain = map { /^\[/ ? $json->encode([ map { [ @$_[ 0 .. 5 ] ] } @{ $json->decode($_) } ]) : $_ } @v2;
is(move_into($w_create, 'w', 'lines', @v2plain), '', 'an export of version 2 that says "raw"');
is(moved(q{SELECT count(*) FROM source_writes.raw_messages(NULL::w)}) . ' '
	. moved(sprintf($log_of, 'w')), '0 ' . sql(sprintf($log_of, 'w')), '... has the log and no message');

# the moves of the first part, exported again: the same rows and messages
for my $how ([ 'as written', 'lines', @w ], [ 'as jsonb', 'lines', spaced(@w) ])
{
	my ($as, $from, @l) = @$how;
	move_into($w_create, 'w', $from, @l);
	is(kept(export_of_moved('w')), kept(@w), "exported again, the same ($as)");
}

# retain_raw on, off and on again, with columns added and dropped between:
# the raw columns in a run of their own, rows of each time current and in
# the history, and rows that the system rewrote; into a table that has
# them in its first run
my $cols = q{SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute WHERE attrelid =
	(SELECT history_rel FROM source_writes.source_tables WHERE relid = 'r'::regclass) AND attnum > 0 AND NOT attisdropped};
SwTest::produce_bytes($broker, 'r', '{"id": 1}', '-k', 'a');
sql(q{SELECT source_writes.wait_for('r')});
sql(q{ALTER FOREIGN TABLE r ADD COLUMN x int; ALTER FOREIGN TABLE r OPTIONS (ADD retain_raw 'true')});
SwTest::produce_bytes($broker, 'r', '{"id": 2, "x": 2}', '-k', 'b', '-H', 'h=2');
sql(q{SELECT source_writes.wait_for('r')});
sql(q{ALTER FOREIGN TABLE r ADD COLUMN y int; ALTER FOREIGN TABLE r OPTIONS (SET retain_raw 'false')});
SwTest::produce_bytes($broker, 'r', '{"id": 3, "y": 3}', '-k', 'c');
sql(q{SELECT source_writes.wait_for('r')});
sql(q{ALTER FOREIGN TABLE r DROP COLUMN x; ALTER FOREIGN TABLE r OPTIONS (SET retain_raw 'true')});
SwTest::produce_bytes($broker, 'r', '{"id": 4, "y": 4}', '-k', 'd', '-H', 'h=4');
sql(q{SELECT source_writes.wait_for('r')});
sql(q{UPDATE r SET y = 20 WHERE id = 2; UPDATE r SET y = 40 WHERE id = 4; DELETE FROM r WHERE id = 1});
# a column with a default: the system rewrites the current rows, and a
# row that keeps a message keeps it (origin "system")
SwTest::produce_bytes($broker, 'r', '{"id": 5, "y": 5}', '-k', 'e');
sql(q{SELECT source_writes.wait_for('r')});
sql(q{ALTER FOREIGN TABLE r ADD COLUMN z int DEFAULT 7});
is(sql($cols), 'id,$part,$pos,$batch,$retracted,$key,$value,$timestamp,$header_names,$header_values,y,z',
	'(the raw columns in a run of their own)');
is(sql(q{SELECT string_agg((m.data).id || ' ' || origin, ',' ORDER BY m.valid_from)
		FROM source_writes.raw_messages(NULL::r) m JOIN source_writes.history(NULL::r) h
		ON h.valid_from = m.valid_from AND h.data::text = m.data::text}),
	'2 kafka,4 kafka,5 kafka,5 system', '(the rows ingested while it was on keep their messages)');
my @r = export_of('r');
for my $how ([ 'as written', @r ], [ 'as jsonb', spaced(@r) ])
{
	my ($as, @l) = @$how;
	is(move_into(q{CREATE FOREIGN TABLE r (id int, y int, z int) SERVER k OPTIONS (topic 'r', retain_raw 'true')},
		'r', 'lines', @l), '', "retain_raw on, off and on: moved ($as)");
	is(moved(sprintf($raw_of, 'r')), sql(sprintf($raw_of, 'r')), "... the same messages ($as)");
	is(moved(sprintf($log_of, 'r')), sql(sprintf($log_of, 'r')), "... the same log ($as)");
}

# a view of the lines whose code turns retain_raw on in the table being
# imported (import() read the option with the header), or adds a column
# to it: refused by PostgreSQL, the table is in use
moved(q~CREATE FUNCTION flip(text, text) RETURNS text LANGUAGE plpgsql AS $$BEGIN
	  IF $1 LIKE '[[%' THEN EXECUTE $2; END IF;
	  RETURN $1; END$$;
	CREATE VIEW turned_on AS
	  SELECT flip(line, $$ALTER FOREIGN TABLE w OPTIONS (ADD retain_raw 'true')$$) AS line FROM lines;
	CREATE VIEW added AS SELECT flip(line, 'ALTER FOREIGN TABLE w ADD COLUMN extra int') AS line FROM lines~);
for my $how ([ 'retain_raw turned on', 'turned_on',
		q{CREATE FOREIGN TABLE w (b bytea) SERVER k OPTIONS (topic 'w', format 'bytes')} ],
	[ 'a column added', 'added', $w_create ])
{
	my ($name, $view, $create) = @$how;
	moved('DROP FOREIGN TABLE IF EXISTS w');
	like(move_into($create, 'w', $view, @w), qr/cannot ALTER TABLE "w" because it is being used by active queries/,
		"$name while the lines are read: refused");
	is(moved(q{SELECT count(*) FROM pg_class WHERE relname = 'w'}), '0', "$name: nothing written");
}
# a header name that is not UTF-8 (Kafka's protocol says it is, but a
# producer can send any bytes): each byte that is not part of a character
# becomes U+FFFD, in the header column, the raw message and the kept
# error alike, so that COPY of an export, and pg_dump, read it back
# (each Kafka source has a worker: the tables above make room)
sql('DROP FOREIGN TABLE w, r');
moved('DROP FOREIGN TABLE IF EXISTS w, r');
sql(q{CREATE FOREIGN TABLE h (b bytea) SERVER k
	  OPTIONS (topic 'h', format 'bytes', retain_raw 'true');
	CREATE FOREIGN TABLE h_hs (b bytea, hs jsonb OPTIONS (source 'headers')) SERVER k
	  OPTIONS (topic 'h', format 'bytes');
	CREATE FOREIGN TABLE h_err (n int, hs jsonb OPTIONS (source 'headers')) SERVER k
	  OPTIONS (topic 'h', format 'json', retain_raw 'true')});
SwTest::produce_bytes($broker, 'h', 'v', '-H', "a\xff\xfeb=1", '-H', "\xc3\xa9t\xc3=2");
sql(q{SELECT source_writes.wait_for('h'), source_writes.wait_for('h_hs'), source_writes.wait_for('h_err')});
my $r = "\xef\xbf\xbd";	# U+FFFD, as psql's bytes
is(sql(q{SELECT hs::text FROM h_hs}), qq([{"a$r${r}b": "1"}, {"\xc3\xa9t$r": "2"}]),
	'a header name that is not UTF-8: its bad bytes are U+FFFD in the header column');
is(sql(q{SELECT header_names::text FROM source_writes.raw_messages(NULL::h)}),
	qq({a$r${r}b,\xc3\xa9t$r}), '... and in the raw message');
is(sql(q{SELECT header_names::text FROM source_writes.errors WHERE source = 'h_err'::regclass}),
	qq({a$r${r}b,\xc3\xa9t$r}), '... and in the error kept of a message that is not JSON');
my $export_file = PostgreSQL::Test::Utils::tempdir() . '/h.export';
sql(qq{COPY (SELECT source_writes.export('h')) TO '$export_file'});
moved(qq{TRUNCATE lines; COPY lines FROM '$export_file';
	CREATE FOREIGN TABLE h (b bytea) SERVER k
	  OPTIONS (topic 'h', format 'bytes', retain_raw 'true');
	SELECT source_writes.import('h', 'lines')});
isnt(sql(sprintf($raw_of, 'h')), '', '(which has the message)');
is(moved(sprintf($raw_of, 'h')), sql(sprintf($raw_of, 'h')), '... and its export goes through COPY and moves');

done_testing();
