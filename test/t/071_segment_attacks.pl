# Segments under attack.  A rolled-up batch keeps its transaction:
# blame() answers the same before and after the rollup.  Hostile rows of
# source_writes.batch_segments (a superuser can write them): a reader errors, it never crashes or reads past its arrays.  A
# segment whose batch_from is far below its batch_to once made the
# lookup of a batch id overflow (id - batch_from) and index its array of
# ids far out of bounds (a crash); one whose bounds are out of order was
# read as if its batches were not there.
use strict;
use warnings;

use IPC::Run;
use Math::BigInt;
use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('segattack', conf => q{
source_writes.compaction_interval = 0
source_writes.segment_batches = 2
source_writes.segment_delay = 0
restart_after_crash = off
});
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int) SERVER k OPTIONS (topic 't');
	-- batch ids near 2^62, where id - batch_from can overflow
	SELECT setval('source_writes.batch_ids', 4611686018427387904);
});
$node->safe_psql('postgres', "INSERT INTO t VALUES ($_)") for 1 .. 5;
my $blame = q{SELECT string_agg((data).id || ' ' || coalesce(xid::text, 'none'), ','
	ORDER BY (data).id) FROM source_writes.blame(NULL::t)};
my $blamed = $node->safe_psql('postgres', $blame);
like($blamed, qr/^1 \d+,2 \d+,3 \d+,4 \d+,5 \d+$/, 'blame() names the transactions');
# and transactions far apart, as a restored dump's rows may name (the
# deltas do not fit the packed form's short runs): the first two batches
is($node->safe_psql('postgres', q{
	UPDATE source_writes.batches b SET xid = x.xid::xid8
	FROM (VALUES (1, '9223372036854775807'), (2, '3')) x(id, xid)
	WHERE b.source = 't'::regclass AND b.batch =
	  (SELECT batch FROM source_writes.batches WHERE source = 't'::regclass
	   ORDER BY ts OFFSET x.id - 1 LIMIT 1)}), '', 'transactions far apart');
$blamed = $node->safe_psql('postgres', $blame);
like($blamed, qr/^1 9223372036854775807,2 3,3 \d+,4 \d+,5 \d+$/,
	'blame() names them');
$node->safe_psql('postgres', "SELECT source_writes.compact('t')");
is($node->safe_psql('postgres', $blame), $blamed,
	'blame() names the same transactions once they are rolled up');
my ($from, $to, $n) = split /\|/, $node->safe_psql('postgres', q{
	SELECT batch_from, batch_to, nbatches FROM source_writes.batch_segments
	WHERE source = 't'::regclass ORDER BY ts_to LIMIT 1});
is($n, 2, 'a segment of two batches');
my $before = $node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM t');
is($before, '1,2,3,4,5', 'read through the segments');

# an unsigned varint, as segments.c writes them, in hex
sub varint
{
	my $v = Math::BigInt->new(shift);
	my $hex = '';
	while ($v >= 128)
	{
		$hex .= sprintf('%02x', ($v % 128)->numify | 0x80);
		$v = $v / 128;
	}
	return $hex . sprintf('%02x', $v->numify);
}

# a packed segment of ids [$lo, $hi], both at ts_from, of kind 0
sub packed
{
	my ($lo, $hi) = @_;
	my $delta = Math::BigInt->new($hi) - Math::BigInt->new($lo);
	$delta += Math::BigInt->new(2)**64 if $delta < 0;
	return '\x01' . varint(0) . varint(1) . varint($delta) . varint(1)
	  . '0000' . varint(0) . varint(2);
}

# Segments packed as older versions wrote them are read as they were:
# the first segment of t, packed again by hand in format 2 (no chunks),
# and in format 1 (no transactions: its batches name none).
sub zigzag
{
	my $v = Math::BigInt->new(shift);
	my $two64 = Math::BigInt->new(2)**64;
	$v %= $two64;
	$v -= $two64 if $v >= Math::BigInt->new(2)**63;
	return $v >= 0 ? $v * 2 : -$v * 2 - 1;
}
my ($sfrom, $sto, $tsfrom, $tsto) = split /\|/, $node->safe_psql('postgres', q{
	SELECT batch_from, batch_to, ts_from, ts_to FROM source_writes.batch_segments
	WHERE source = 't'::regclass ORDER BY ts_to LIMIT 1});
my @sxids = split /\n/, $node->safe_psql('postgres', qq{
	SELECT xid FROM source_writes.blame(NULL::t) WHERE ts IN ($tsfrom, $tsto) ORDER BY ts});
is(scalar(@sxids), 2, 'the batches of the first segment');
my $ids = varint(0) . varint(1) . varint(Math::BigInt->new($sto) - $sfrom) . varint(1);
my $tss = varint(0) . varint(zigzag(Math::BigInt->new($tsto) - $tsfrom));
my $kinds = varint(0) . varint(2);
# the transactions: 1 + zigzag delta, as runs (format byte 0)
my $x1 = zigzag($sxids[0]) + 1;
my $x2 = zigzag(Math::BigInt->new($sxids[1]) - $sxids[0]) + 1;
my $v2 = '\x02' . $ids . $tss . $kinds . '00' . varint($x1) . varint(1)
  . varint($x2) . varint(1);
my $v1 = '\x01' . $ids . $tss . $kinds;
my $first_segment = q{source = 't'::regclass AND ts_to =
	(SELECT min(ts_to) FROM source_writes.batch_segments WHERE source = 't'::regclass)};
my $packed_now = $node->safe_psql('postgres',
	"SELECT batches FROM source_writes.batch_segments WHERE $first_segment");
like($packed_now, qr/^\\x03/, 'segments are packed in format 3');
$node->safe_psql('postgres',
	"UPDATE source_writes.batch_segments SET batches = '$v2' WHERE $first_segment");
is($node->safe_psql('postgres', $blame), $blamed, 'a segment of format 2 reads the same');
is($node->safe_psql('postgres', 'SELECT string_agg(id::text, \',\' ORDER BY id) FROM t'),
	'1,2,3,4,5', 'and its rows are there');
$node->safe_psql('postgres',
	"UPDATE source_writes.batch_segments SET batches = '$v1' WHERE $first_segment");
(my $blamed1 = $blamed) =~ s/^1 \d+,2 \d+/1 none,2 none/;
is($node->safe_psql('postgres', $blame), $blamed1,
	'a segment of format 1 reads the same, without transactions');
$node->safe_psql('postgres',
	"UPDATE source_writes.batch_segments SET batches = '$packed_now' WHERE $first_segment");
is($node->safe_psql('postgres', $blame), $blamed, 'format 3 again');

# Hostile chunks (format 3) of that segment: a reader errors.
my $chunk = $ids . $tss . $kinds . '01' . varint(1) . varint(2);
for my $bad (
	[ 'chunks of no batches', '\x03' . varint(0) . varint(length($chunk) / 2) . $chunk ],
	[ 'a chunk longer than the bytes',
	  '\x03' . varint(256) . varint(length($chunk) / 2 + 1) . $chunk ],
	[ 'a chunk shorter than its batches',
	  '\x03' . varint(256) . varint(length($chunk) / 2 - 1) . $chunk ],
	[ 'a second chunk starting past batch_to',
	  '\x03' . varint(1) . varint(1) . varint(Math::BigInt->new($sto) - $sfrom + 1)
	  . varint(0) . varint(0) . varint(1) . '00' . '00' ],
	[ 'a second chunk whose ids pass batch_to',
	  '\x03' . varint(1) . varint(7) . varint(Math::BigInt->new($sto) - $sfrom)
	  . varint(0) . varint(0) . varint(7)
	  . varint(0) . varint(1) . varint(0) . varint(0) . varint(1) . '0106'
	  . varint(1) . varint(1) . varint(0) . varint(0) . varint(1) . '0106' ])
{
	my ($name, $bytes) = @$bad;
	$node->safe_psql('postgres',
		"UPDATE source_writes.batch_segments SET batches = '$bytes' WHERE $first_segment");
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT count(*) FROM source_writes.blame(NULL::t)");
	isnt($ret, 0, "$name: the reader fails");
	like($err, qr/segment of source_writes.batch_segments is corrupt/, "$name: as corrupt");
}
$node->safe_psql('postgres',
	"UPDATE source_writes.batch_segments SET batches = '$packed_now' WHERE $first_segment");
is($node->safe_psql('postgres', $blame), $blamed, 'read again once repaired');

# A segment of several chunks (of 256 batches), of a source whose batch
# ids do not follow each other (another source's batches come between):
# windows of one batch, blame() and reads as of a time answer the same
# before and after the rollup.
$node->safe_psql('postgres', q{
	CREATE FOREIGN TABLE w (id int) SERVER k OPTIONS (topic 'w');
	CREATE FOREIGN TABLE x (id int) SERVER k OPTIONS (topic 'x');
	CREATE PROCEDURE fill_wx(k int) LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN 1..k LOOP
	    INSERT INTO w VALUES (i);
	    COMMIT;
	    IF i % 3 = 0 THEN INSERT INTO x VALUES (i); COMMIT; END IF;
	  END LOOP;
	END $$;
	CALL fill_wx(600);
	DELETE FROM w WHERE id % 7 = 0;
});
my $w_answers = q{
	SELECT md5(string_agg(b.ts || ':' || u.n, ',' ORDER BY b.ts))
	  || ' ' || (SELECT md5(string_agg(ts || ':' || xid || ':' || (data).id, ','
	                                  ORDER BY (data).id))
	             FROM source_writes.blame(NULL::w))
	  || ' ' || (SELECT md5(string_agg(ts || ':' || diff || ':' || (data).id, ','
	                                  ORDER BY ts, (data).id))
	             FROM source_writes.updates(NULL::w))
	FROM (SELECT DISTINCT ts FROM source_writes.updates(NULL::w)) b,
	LATERAL (SELECT string_agg(diff || ':' || (data).id, ',' ORDER BY (data).id) AS n
	         FROM source_writes.updates(NULL::w, b.ts, b.ts + 1)) u};
my $w_before = $node->safe_psql('postgres', $w_answers);
my @w_times = split /\n/, $node->safe_psql('postgres', q{
	SELECT ts FROM (SELECT DISTINCT ts FROM source_writes.updates(NULL::w)) t
	WHERE random() < 0.05 ORDER BY ts});
my $as_of = join '', map { "SET source_writes.as_of = $_; SELECT count(*), sum(id) FROM w;\n" } @w_times;
my $as_of_before = $node->safe_psql('postgres', $as_of);
$node->safe_psql('postgres', q{
	SET source_writes.segment_batches = 600;
	SELECT source_writes.compact('w')});
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments
	WHERE source = 'w'::regclass AND nbatches = 600}), '1',
	'a segment of 600 batches, in 3 chunks');
is($node->safe_psql('postgres', $w_answers), $w_before,
	'windows, blame() and updates() read the same from its chunks');
is($node->safe_psql('postgres', $as_of), $as_of_before,
	'reads as of times in it read the same');

# A batch whose id is lower than those of the batches stamped before it
# (its transaction wrote first and committed last): a segment's chunks
# of 64 batches are in timestamp order, and updates() of a window at
# its timestamp reads the blocks of the chunks that reach the window.
# Rows of 3000 bytes, two a block, so that chunks have blocks apart.
$node->safe_psql('postgres', q{
	CREATE FOREIGN TABLE u (id int, pad text) SERVER k OPTIONS (topic 'u');
	CREATE PROCEDURE fill(first int, k int) LANGUAGE plpgsql AS $$
	BEGIN
	  FOR i IN first..first + k - 1 LOOP
	    INSERT INTO u VALUES (i, repeat('x', 3000));
	    COMMIT;
	  END LOOP;
	END $$;
});
my ($in, $out, $err) = ('', '', '');
my $h = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "BEGIN; INSERT INTO u VALUES (0, repeat('a', 3000)); SELECT 'written';\n";
$h->pump until $out =~ /written/;
$node->safe_psql('postgres', 'CALL fill(1, 300)');
$in .= "COMMIT; SELECT 'committed';\n";
$h->pump until $out =~ /committed/;
$in .= "\\q\n";
$h->finish;
$node->safe_psql('postgres', 'CALL fill(301, 400)');
my $ts0 = $node->safe_psql('postgres', q{
	SELECT ts FROM source_writes.blame(NULL::u) WHERE (data).id = 0});
my $window = qq{SELECT string_agg((data).id::text, ',')
	FROM source_writes.updates(NULL::u, $ts0, $ts0 + 1)};
is($node->safe_psql('postgres', $window), '0', 'the window has the late batch');
$node->safe_psql('postgres', q{
	SET source_writes.segment_batches = 512;
	SELECT source_writes.compact('u')});
is($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments s
	WHERE source = 'u'::regclass AND ts_from < } . $ts0 . q{ AND ts_to > } . $ts0),
	'1', 'rolled up into a segment around it');
is($node->safe_psql('postgres', $window), '0',
	'the window has the late batch once rolled up');

# A REPEATABLE READ reader whose snapshot was taken before a rollup reads
# after it commits: the rolled-up batches were settled for its snapshot
# too, and it still sees them as rows; its answers do not change, and a
# new snapshot gives the same ones from the segment.
$node->safe_psql('postgres', q{
	CREATE FOREIGN TABLE v (id int) SERVER k OPTIONS (topic 'v');
	CREATE FUNCTION v_answers() RETURNS text LANGUAGE sql AS $$
	  SELECT coalesce(string_agg(ts || ':' || diff || ':' || (data).id, ','
	                             ORDER BY ts, (data).id), '')
	  FROM source_writes.updates(NULL::v)
	$$;
});
$node->safe_psql('postgres', "INSERT INTO v VALUES ($_)") for 1 .. 6;
$node->safe_psql('postgres', 'DELETE FROM v WHERE id = 2');
my $expected = $node->safe_psql('postgres', 'SELECT v_answers()');
($in, $out, $err) = ('', '', '');
$h = IPC::Run::start(
	[ 'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', '-d', $node->connstr('postgres'), '-f', '-' ],
	'<', \$in, '>', \$out, '2>', \$err);
$in .= "BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 'first ' || v_answers();\n";
$h->pump until $out =~ /first .*\n/;
like($out, qr/^first \Q$expected\E$/m, 'the reader reads before the rollup');
$node->safe_psql('postgres', "SELECT source_writes.compact('v')");
ok($node->safe_psql('postgres', q{
	SELECT count(*) FROM source_writes.batch_segments WHERE source = 'v'::regclass}) > 0,
	'rolled up while the reader runs');
$in .= "SELECT 'second ' || v_answers(); COMMIT;\n";
$h->pump until $out =~ /second .*\n/;
like($out, qr/^second \Q$expected\E$/m, 'the reader reads the same after the rollup');
$in .= "\\q\n";
$h->finish;
is($node->safe_psql('postgres', 'SELECT v_answers()'), $expected,
	'a new snapshot reads the same from the segments');

# each hostile segment replaces the first; a reader must not crash, and
# must error on bounds out of order.  (Bounds in order whose ids are not
# the batches' are consistent: those batches are then taken for folded.)
my @attacks = (
	[ 'batch_from far below batch_to (id - batch_from overflows)', 0,
	  -Math::BigInt->new(2)**62 - Math::BigInt->new(2)**41, $to ],
	[ 'batch_from the lowest bigint', 0,
	  Math::BigInt->new(-2)**63, $to ],
	[ 'batch_from above batch_to', 1, $to, $from ],
);
for my $a (@attacks)
{
	my ($name, $corrupt, $lo, $hi) = @$a;
	my $bytes = packed($lo, $hi);
	$node->safe_psql('postgres', qq{
		UPDATE source_writes.batch_segments SET batch_from = $lo, batch_to = $hi,
		  batches = '$bytes'
		WHERE source = 't'::regclass AND ts_to =
		  (SELECT min(ts_to) FROM source_writes.batch_segments
		   WHERE source = 't'::regclass);});
	my ($ret, $out, $err) = $node->psql('postgres',
		"SELECT count(*) FROM source_writes.updates(NULL::t)");
	unlike($err, qr/terminated abnormally/, "$name: the reader does not crash");
	if ($corrupt)
	{
		isnt($ret, 0, "$name: the reader fails");
		like($err, qr/segment of source_writes.batch_segments is corrupt/,
			"$name: as corrupt");
	}
	is($node->safe_psql('postgres', 'SELECT 1'), '1', "$name: the server runs on");
}
ok(!grep(/terminated by signal/, slurp_file($node->logfile)),
	'no backend crashed');

done_testing();
