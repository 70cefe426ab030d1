# Versions of a source table (option version_of) on an ingesting cluster:
# a new version has the messages the broker has already dropped and the
# people's edits, with the same timestamps, origins, roles and positions;
# it goes on from the old table's offsets with no gap and no repeat, also
# when messages come while it is created; carry_edits 'false' on an upsert
# source gives what the stream says; the names swap in one transaction; a
# kill -9 during a creation leaves no half version; a dump restores a
# version with its own log; dropping the old table leaves the new alone.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'orders:2', 'kv:1', 'kv2:1', 'st:1', 'big:1' ]);
my $node = SwTest::node('main', conf => "restart_after_crash = on\nmax_worker_processes = 24\n");

sub sql { return $node->safe_psql($_[1] // 'postgres', $_[0]); }

sub message
{
	my ($id, $pad) = @_;
	return qq(\t{"id": $id, "item": "i$id", "amount": "$id.5", "note": "n$id")
	  . ($pad ? qq(, "pad": "$pad") : '') . '}';
}
sub produce { SwTest::produce($broker, 'orders', map { message($_) } @_); }

# messages to one partition of orders (kcat's partitioner keeps messages
# without a key on one partition for a while: these must fill both)
my $files = PostgreSQL::Test::Utils::tempdir();
sub produce_to
{
	my ($part, @lines) = @_;
	open(my $fh, '>', "$files/messages") or die "cannot write $files/messages: $!";
	print $fh map { "$_\n" } @lines;
	close $fh;
	my ($out, $err) = run_command([ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'orders',
		'-p', $part, '-K', "\t", '-Z', '-l', "$files/messages" ]);
	die "kcat: $err" if $err ne '';
}

# a producer in the background: messages first .. first + 10 * chunks - 1,
# ten to a kcat
sub producer
{
	my ($first, $chunks) = @_;
	return IPC::Run::start([ 'bash', '-c', join('; ',
		map { my $s = $first + 10 * $_;
			qq(for i in \$(seq $s @{[$s + 9]}); do printf '\\t{"id": %d, "item": "i%d", "amount": "%d.5"}\\n' \$i \$i \$i; done)
			  . qq( | kcat -P -b $broker->{bootstrap} -t orders -K '\\t' -Z) } 0 .. $chunks - 1) ]);
}

# Every message of the topic once in a table, from offset 0 to where its
# stored offsets are (its history's versions written by the stream): the
# partitions where that does not hold, with what the table has, and how
# many partitions it has offsets of.
sub offsets
{
	my ($table, $db) = @_;
	return sql(qq{
	SELECT coalesce(string_agg(format('%s: %s versions, %s offsets, %s..%s, next %s',
	                                  pr.part, h.n, h.d, h.lo, h.hi, pr.next_offset), '; '), 'each once')
	FROM source_writes.progress pr
	LEFT JOIN (SELECT "partition" p, count(*) n, count(DISTINCT "offset") d,
	                  min("offset") lo, max("offset") hi
	           FROM source_writes.history(NULL::$table) WHERE origin = 'kafka' GROUP BY 1) h
	  ON h.p = pr.part
	WHERE pr.source = '$table'::regclass
	  AND (h.p IS NULL OR h.n <> h.d OR h.d <> pr.next_offset OR h.lo <> 0
	       OR h.hi <> pr.next_offset - 1)}, $db)
	  . ' in ' . sql(qq{SELECT count(*) FROM source_writes.progress WHERE source = '$table'::regclass}, $db)
	  . ' partitions';
}

# the stream's rows of a table with where they came from
sub stream_rows
{
	my ($table, $db) = @_;
	return sql(qq{SELECT string_agg(format('%s/%s %s %s', "partition", "offset", (data).id, (data).item),
	                                 ',' ORDER BY "partition", "offset")
	              FROM source_writes.blame(NULL::$table) WHERE "offset" IS NOT NULL}, $db);
}

sql(qq{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE ROLE editor;
	CREATE FOREIGN TABLE orders (id int, item text, amount text, note text) SERVER k
	  OPTIONS (topic 'orders');
	GRANT SELECT, INSERT, UPDATE, DELETE ON orders TO editor;
	CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
	                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
	RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C});

#
# 1. The broker has dropped the oldest messages; the new version has them,
# and the people's edits, with the same log
#
produce_to(0, map { message($_) } 1 .. 10);
produce_to(1, map { message($_) } 11 .. 20);
sql(q{SELECT source_writes.wait_for('orders')});
sql(q{SET ROLE editor;
	UPDATE orders SET amount = '99' WHERE id = 3;
	DELETE FROM orders WHERE id = 4;
	INSERT INTO orders VALUES (1001, 'typed', '7.25', 'by hand');
	INSERT INTO orders VALUES (1002, 'bad', 'n/a', 'by hand')});
# the mock broker keeps about 5 MiB a partition: 100 messages of 100 kB
# in each partition push the first ones out
my $pad = 'x' x 100_000;
# (ingested as they come: the table loses none)
for my $chunk (0 .. 19)
{
	produce_to($chunk % 2, map { message($_, $pad) } 21 + 10 * $chunk .. 30 + 10 * $chunk);
	sql(q{SELECT source_writes.wait_for('orders')});
}
is(sql(q{SELECT count(*) FROM orders}), 20 - 1 + 2 + 200, 'the old table has every message');
is(sql(q{SELECT sum(lost) FROM source_writes.progress WHERE source = 'orders'::regclass}), '0',
	'and lost none');
my ($kc) = run_command([ 'kcat', '-C', '-b', $broker->{bootstrap}, '-t', 'orders', '-o', 'beginning',
	'-e', '-q', '-f', '%p %o %s\n' ]);
my (%first, @early);
for (split /\n/, $kc)
{
	my ($p, $o, $id) = /^(\d+) (\d+) .*"id": (\d+)/ or next;
	$first{$p} = $o if !defined $first{$p} || $o < $first{$p};
	push @early, $id if $id <= 20;
}
ok(keys %first == 2 && (grep { $_ > 0 } values %first) == 2,
	'the broker has dropped the first messages of both partitions')
  or diag(explain \%first);
is("@early", '', 'none of messages 1 to 20 is left in the topic');

# most of the old log rolled up into segments of the batch catalog
is(sql(q{SET source_writes.segment_batches = 4; SET source_writes.segment_delay = 0;
	SELECT source_writes.compact('orders') >= 0;
	SELECT count(*) > 0 FROM source_writes.batch_segments WHERE source = 'orders'::regclass}),
	"t\nt", 'the old table has segments');

# v2: id bigint, amount numeric, a new column with a default, note dropped
sql(q{CREATE FOREIGN TABLE orders_v2 (id bigint, item text, amount numeric(8,2),
	  currency text DEFAULT 'EUR') SERVER k OPTIONS (topic 'orders', version_of 'orders')});
is(sql(q{SELECT string_agg(id || ' ' || amount || ' ' || currency, ', ' ORDER BY id)
	FROM orders_v2 WHERE id <= 5 OR id > 1000}),
	'1 1.50 EUR, 2 2.50 EUR, 3 99.00 EUR, 5 5.50 EUR, 1001 7.25 EUR',
	'v2 has the dropped messages, with the edits, in its own columns');
is(sql(q{SELECT count(*), count(DISTINCT id) FROM orders_v2}), '220|220',
	'v2 has every row of the old table that its types take');
is(sql(q{SELECT role || ' ' || edit || ' ' || ("row"->>'id') FROM source_writes.uncarried_edits
	WHERE source = 'orders_v2'::regclass}), 'editor insert 1002',
	'the row its types refuse is reported');
my $blame = q{SELECT string_agg(format('%s %s %s %s/%s %s %s', ts, origin, role, "partition", "offset",
	(data).id, (data).item), E'\n' ORDER BY ts, (data).id) FROM source_writes.blame(NULL::TABLE)
	WHERE (data).id <> 1002};
my $history = q{SELECT string_agg(format('%s %s %s %s %s %s %s/%s %s %s', valid_from, valid_to, origin,
	role, retracted_origin, retracted_role, "partition", "offset", (data).id, (data).item), E'\n'
	ORDER BY valid_from, (data).id, valid_to) FROM source_writes.history(NULL::TABLE) WHERE (data).id <> 1002};
is(sql($blame =~ s/TABLE/orders_v2/r), sql($blame =~ s/TABLE/orders/r),
	'blame(): the same timestamps, origins, roles and positions');
is(sql($history =~ s/TABLE/orders_v2/r), sql($history =~ s/TABLE/orders/r),
	'history(): the same versions, retractions included');
my $updates = q{SELECT string_agg(format('%s %s %s %s %s', ts, diff, origin, (data).id, (data).item), E'\n'
	ORDER BY ts, diff, (data).id) FROM source_writes.updates(NULL::TABLE) WHERE (data).id <> 1002};
is(sql($updates =~ s/TABLE/orders_v2/r), sql($updates =~ s/TABLE/orders/r), 'updates(): the same log');
my $middle = sql(q{SELECT ts FROM source_writes.blame(NULL::orders) WHERE (data).id = 1001});
is(sql(qq{SET source_writes.as_of = '$middle';
	SELECT string_agg(id || ' ' || item, ',' ORDER BY id) FROM orders_v2}),
	sql(qq{SET source_writes.as_of = '$middle';
	SELECT string_agg(id || ' ' || item, ',' ORDER BY id) FROM orders WHERE id <= 1001}),
	'read as of a person\'s insert, the same rows');
like(sql(qq{SET source_writes.as_of = '$middle'; SELECT string_agg(id::text, ',' ORDER BY id) FROM orders_v2}),
	qr/^1,2,3,5,6,.*,19,20,1001$/, 'those of that time');
like(sql($history =~ s/TABLE/orders_v2/r), qr/^\d+ \d+ kafka \S+ user editor \d\/\d+ 3 i3$/m,
	'the edit of a dropped message is there');
is(sql(q{SELECT count(*) FROM source_writes.batches b1 JOIN source_writes.batches b2 USING (batch)
	WHERE b1.source = 'orders'::regclass AND b2.source = 'orders_v2'::regclass}), '0',
	'with batch ids of its own');
is(sql(q{SELECT string_agg(part || ':' || next_offset, ' ' ORDER BY part) FROM source_writes.progress
	WHERE source = 'orders_v2'::regclass}),
	sql(q{SELECT string_agg(part || ':' || next_offset, ' ' ORDER BY part) FROM source_writes.progress
	WHERE source = 'orders'::regclass}), 'and the old table\'s offsets');

#
# 2. No gap, no repeat: a version made while messages come, and committed
# after the old table ingested more
#
my $producer = producer(2001, 30);
my $session = $node->background_psql('postgres');
$session->query_safe(q{BEGIN;
	CREATE FOREIGN TABLE orders_v3 (id int, item text, amount text) SERVER k
	  OPTIONS (topic 'orders', version_of 'orders')});
produce(3001 .. 3050);
sql(q{SELECT source_writes.wait_for('orders')});
$session->query_safe('COMMIT');
$session->quit;
$producer->finish;
produce(3051 .. 3060);
sql(q{SELECT source_writes.wait_for('orders'), source_writes.wait_for('orders_v2'),
	source_writes.wait_for('orders_v3')});
is(offsets('orders'), 'each once in 2 partitions', 'v1: every offset once');
is(offsets('orders_v2'), 'each once in 2 partitions', 'v2: every offset once, while both ingest');
is(offsets('orders_v3'), 'each once in 2 partitions',
	'v3, made while messages came: every offset once');
is(sql(q{SELECT count(*) FROM orders_v3 WHERE id BETWEEN 2001 AND 3060}), '360',
	'v3 has the messages of the time it was made');
my $stream = stream_rows('orders');
is(stream_rows('orders_v2'), $stream, 'v1 and v2 hold the same stream rows');
is(stream_rows('orders_v3'), $stream, 'v1 and v3 hold the same stream rows');
is(sql(q{SELECT count(*) FROM source_writes.blame(NULL::orders) b1
	JOIN source_writes.blame(NULL::orders_v3) b3 ON (b1.data).id = (b3.data).id
	WHERE (b1.data).id BETWEEN 3001 AND 3050 AND b1.ts <> b3.ts}), '50',
	'what the old table ingested after the version\'s copy, the version ingested itself');

#
# 3. carry_edits 'false' on an upsert source: what the stream says
#
sub kv { SwTest::produce($broker, 'kv', @_); }
sql(q{CREATE FOREIGN TABLE kv (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
	GRANT SELECT, INSERT, UPDATE, DELETE ON kv TO editor});
kv(qq(a\t{"v": "a1"}), qq(b\t{"v": "b1"}), qq(c\t{"v": "c1"}), qq(d\t{"v": "d1"}));
sql(q{SELECT source_writes.wait_for('kv')});
sql(q{SET ROLE editor;
	UPDATE kv SET v = 'a by hand' WHERE k = 'a';
	DELETE FROM kv WHERE k = 'b';
	INSERT INTO kv VALUES ('z', 'typed');
	UPDATE kv SET v = 'c by hand' WHERE k = 'c';
	UPDATE kv SET v = 'd by hand' WHERE k = 'd'});
kv(qq(a\t{"v": "a2"}), qq(d\t));
sql(q{SELECT source_writes.wait_for('kv')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv}), 'a=a2,c=c by hand,z=typed',
	'the old table: the stream and the people');
sql(q{CREATE FOREIGN TABLE kv_raw (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv', carry_edits 'false')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv_raw}), 'a=a2,b=b1,c=c1',
	'without edits: what the stream says');
is(sql(q{SELECT string_agg(DISTINCT origin, ',') FROM source_writes.batches
	WHERE source = 'kv_raw'::regclass}), 'kafka', 'no batch of a person');
is(sql(q{SELECT string_agg(format('%s %s', (data).v, coalesce(retracted_origin, '-')), ', '
	ORDER BY valid_from) FROM source_writes.history(NULL::kv_raw) WHERE (data).k = 'a'}),
	'a1 kafka, a2 -', 'key a: the stream\'s next message replaced the row a person had updated');
my $negative = q{SELECT count(*) FROM (SELECT data::text, sum(diff) OVER (PARTITION BY data::text
	ORDER BY ts, diff DESC ROWS UNBOUNDED PRECEDING) n FROM source_writes.updates(NULL::%s)) r
	WHERE n < 0 OR n > 1};
is(sql(sprintf($negative, 'kv_raw')), '0', 'no negative multiplicity, no row twice');
is(sql(q{SELECT string_agg(format('%s %s', (data).v, coalesce(retracted_origin, '-')), ', '
	ORDER BY valid_from) FROM source_writes.history(NULL::kv_raw) WHERE (data).k = 'd'}),
	'd1 kafka', 'key d: the tombstone after a person\'s edit retracts the stream\'s row');
sql(q{CREATE FOREIGN TABLE kv_v2 (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv_v2}),
	sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv}), 'with edits: the old table\'s rows');
is(sql(sprintf($negative, 'kv_v2')), '0', 'no negative multiplicity there either');
kv(qq(b\t{"v": "b2"}), qq(c\t{"v": "c2"}), qq(e\t{"v": "e1"}));
sql(q{SELECT source_writes.wait_for('kv'), source_writes.wait_for('kv_raw'), source_writes.wait_for('kv_v2')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv_raw}), 'a=a2,b=b2,c=c2,e=e1',
	'it goes on with the stream');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv_v2}), 'a=a2,b=b2,c=c2,e=e1,z=typed',
	'so does the version with the edits');
is(sql(q{SELECT count(*) - count(DISTINCT k) FROM kv_raw}), '0', 'every key once');
is(sql(sprintf($negative, 'kv_raw')), '0', 'still no negative multiplicity');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv}), 'a=a2,b=b2,c=c2,e=e1,z=typed',
	'and the old table too');

# a tombstone for a key whose row a person had deleted, or moved to
# another key, finds no row in the old table, and leaves a no-op row in
# its log (a trace that no reader shows): without edits, the stream's row
# of that key is retracted by it, as a table that reads the whole topic
# afresh has none; the trace goes along with the versions of the version
# and with an export
sql(q{CREATE FOREIGN TABLE kv2 (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k');
	GRANT SELECT, INSERT, UPDATE, DELETE ON kv2 TO editor});
SwTest::produce($broker, 'kv2', qq(g\t{"v": "g1"}), qq(h\t{"v": "h1"}), qq(i\t{"v": "i1"}));
sql(q{SELECT source_writes.wait_for('kv2')});
sql(q{SET ROLE editor; DELETE FROM kv2 WHERE k = 'g'; UPDATE kv2 SET k = 'hh' WHERE k = 'h'});
SwTest::produce($broker, 'kv2', qq(g\t), qq(h\t));
sql(q{SELECT source_writes.wait_for('kv2')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2}), 'hh=h1,i=i1',
	'kv2: the tombstones found nothing to delete');
sql(q{CREATE FOREIGN TABLE kv2_raw (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k', version_of 'kv2', carry_edits 'false')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_raw}), 'i=i1',
	'without edits: keys the stream deleted after a person did stay deleted');
sql(q{CREATE FOREIGN TABLE kv2_fresh (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k')});
sql(q{SELECT source_writes.wait_for('kv2_fresh')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_fresh}), 'i=i1',
	'a table that reads the whole topic afresh has only the key the stream kept');
is(sql(q{SELECT count(*) FROM source_writes.updates(NULL::kv2) WHERE (data).k IN ('g', 'h')}), '4',
	'the old table\'s log shows no change for the tombstones');
sql(q{CREATE FOREIGN TABLE kv2_raw2 (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k', version_of 'kv2_raw', carry_edits 'false');
	CREATE FOREIGN TABLE kv2_all (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k', version_of 'kv2');
	CREATE FOREIGN TABLE kv2_all_raw (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k', version_of 'kv2_all', carry_edits 'false')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_raw2}), 'i=i1',
	'a version without edits of the version without edits agrees');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_all}), 'hh=h1,i=i1',
	'a version with the edits has them');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_all_raw}), 'i=i1',
	'and its version without edits knows of the tombstones');
sql(q{CREATE TABLE kv2_lines AS SELECT * FROM source_writes.export('kv2');
	CREATE FOREIGN TABLE kv2_moved (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k');
	SELECT source_writes.import('kv2_moved', 'kv2_lines');
	CREATE FOREIGN TABLE kv2_moved_raw (k text OPTIONS (source 'key'), v text) SERVER k
	  OPTIONS (topic 'kv2', envelope 'upsert', key 'k', version_of 'kv2_moved', carry_edits 'false')});
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_moved}), 'hh=h1,i=i1',
	'an import has the edits');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv2_moved_raw}), 'i=i1',
	'and so does the version without edits of the import');
sql(q{DROP FOREIGN TABLE kv2, kv2_raw, kv2_fresh, kv2_raw2, kv2_all, kv2_all_raw, kv2_moved,
	kv2_moved_raw; DROP TABLE kv2_lines});

# the edits of the transaction that makes the version, made before it
sql(q{CREATE FOREIGN TABLE st (id int, v text) SERVER k OPTIONS (topic 'st')});
SwTest::produce($broker, 'st', map { qq(\t{"id": $_, "v": "s$_"}) } 1 .. 3);
sql(q{SELECT source_writes.wait_for('st')});
my ($rc, $out, $err) = $node->psql('postgres', q{BEGIN;
	UPDATE st SET v = 'same transaction' WHERE id = 1;
	INSERT INTO st VALUES (9, 'typed');
	CREATE FOREIGN TABLE st_v2 (id int, v text) SERVER k OPTIONS (topic 'st', version_of 'st');
	COMMIT});
my $st_v2 = sql(q{SELECT count(*) FROM pg_class WHERE relname = 'st_v2'}) eq '0' ? 'refused'
	: sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM st_v2});
my $st = sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM st});
is($st_v2, 'refused', 'a version made after edits in its transaction is refused')
  or diag("st_v2: $st_v2; st: $st");
like($err, qr/cannot make a version of source table "st" in a transaction that writes to it/,
	'with an error that says why');
sql(q{DROP FOREIGN TABLE IF EXISTS st_v2; DROP FOREIGN TABLE st});

#
# 4. The names swap in one transaction while both ingest
#
$producer = producer(4001, 20);
sql(q{BEGIN;
	ALTER FOREIGN TABLE orders RENAME TO orders_v1;
	ALTER FOREIGN TABLE orders_v2 RENAME TO orders;
	COMMIT});
$producer->finish;
produce(4201 .. 4210);
sql(q{SELECT source_writes.wait_for('orders'), source_writes.wait_for('orders_v1')});
is(sql(q{SELECT count(*) FROM orders WHERE id BETWEEN 4001 AND 4210}), '210',
	'the renamed v2 goes on ingesting');
is(sql(q{SELECT count(*) FROM orders_v1 WHERE id BETWEEN 4001 AND 4210}), '210',
	'so does the renamed v1');
is(sql(q{SELECT currency FROM orders WHERE id = 4210}), 'EUR', 'orders is v2 now');
is(offsets('orders'), 'each once in 2 partitions', 'orders: every offset once');
is(offsets('orders_v1'), 'each once in 2 partitions', 'orders_v1: every offset once');
is(stream_rows('orders'), stream_rows('orders_v1'), 'the same stream rows');

#
# 5. kill -9 in the middle of a version's creation
#
sql(q{CREATE FOREIGN TABLE big (id int, v text) SERVER k OPTIONS (topic 'big');
	SELECT test_write('big', 'kafka', 'append',
	  (SELECT array_agg(ROW(g, g::text)::big) FROM generate_series(1, 200000) g), 0, 0);
	-- (rows as if from offsets the topic has not: it goes on at its start)
	SELECT source_writes.reset_offsets('big', 'earliest');
	-- a row a person added, after the others, that the version does not take
	INSERT INTO big VALUES (0, 'typed')});
my $catalog = q{SELECT (SELECT count(*) FROM source_writes.source_tables) || ' '
	|| (SELECT count(*) FROM source_writes.batches) || ' '
	|| (SELECT count(*) FROM source_writes.progress) || ' '
	|| (SELECT count(*) FROM source_writes.uncarried_edits) || ' '
	|| (SELECT count(*) FROM pg_class WHERE relnamespace = (SELECT relnamespace FROM pg_class
	    WHERE oid = (SELECT current_rel FROM source_writes.source_tables LIMIT 1)))};
my $big_v2 = q{CREATE FOREIGN TABLE big_v2 (id bigint, v int, n int DEFAULT 7) SERVER k
	  OPTIONS (topic 'big', version_of 'big')};
my $sum = 100000 * 200001;
# The creation is killed where it waits for a lock held here: the old
# table's history (it has written its batches, and opened the rows), then
# the report of what is not carried (it has loaded the rows before the
# person's, the last)
for my $stage ([ 'the old table\'s history', q{SELECT format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE',
	  history_rel) FROM source_writes.source_tables WHERE relid = 'big'::regclass \gexec},
	  q{SELECT history_rel FROM source_writes.source_tables WHERE relid = 'big'::regclass} ],
	[ 'the report of the edits not carried',
	  q{LOCK TABLE source_writes.uncarried_edits IN ACCESS EXCLUSIVE MODE},
	  q{SELECT 'source_writes.uncarried_edits'::regclass} ])
{
	my ($what, $lock, $relation) = @$stage;
	my $before = sql($catalog);
	my $locker = $node->background_psql('postgres');
	$locker->query_safe("BEGIN; $lock");
	my $creator = $node->background_psql('postgres', on_error_stop => 0);
	my $creator_pid = $creator->query_safe('SELECT pg_backend_pid()');
	$creator->query_until(qr/started/, "\\echo started\n$big_v2;\n");
	ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_locks
		WHERE pid = $creator_pid AND NOT granted AND relation = ($relation)}),
		"the creation is under way: it waits for $what");
	my $from = -s $node->logfile;
	kill 'KILL', $creator_pid;
	SwTest::wait_for_restart($node, $from);
	eval { $creator->quit };
	eval { $locker->quit };
	is(sql(q{SELECT count(*) FROM pg_class WHERE relname = 'big_v2'}), '0',
		'after the crash: no version');
	is(sql($catalog), $before,
		'no catalog row, progress row, report or hidden relation of it');
	is(sql(q{SELECT (SELECT count(*) FROM source_writes.batches b
		  WHERE NOT EXISTS (SELECT FROM pg_class WHERE oid = b.source))
		+ (SELECT count(*) FROM source_writes.progress p
		  WHERE NOT EXISTS (SELECT FROM pg_class WHERE oid = p.source))}), '0',
		'nothing of a table that is not there');
}
SwTest::produce($broker, 'big', map { qq(\t{"id": $_, "v": "$_"}) } 300001 .. 300005);
sql(q{SELECT source_writes.wait_for('big')});
is(sql(q{SELECT count(*), sum(id) FROM big}), '200006|' . ($sum + 1500015),
	'the old table is whole, and ingests');
sql($big_v2);
is(sql(q{SELECT count(*), sum(id), sum(v), min(n) FROM big_v2}),
	'200005|' . ($sum + 1500015) . '|' . ($sum + 1500015) . '|7',
	'made again, the version has it all');
is(sql(q{SELECT "row"->>'v' FROM source_writes.uncarried_edits WHERE source = 'big_v2'::regclass}),
	'typed', 'but the person\'s row its type refuses');
SwTest::produce($broker, 'big', map { qq(\t{"id": $_, "v": "$_"}) } 300006 .. 300007);
sql(q{SELECT source_writes.wait_for('big_v2')});
is(sql(q{SELECT count(*) FROM big_v2 WHERE id > 300000}), '7', 'and goes on ingesting');
sql(q{DROP FOREIGN TABLE big, big_v2});

#
# 7. Dropping the old table while the new one ingests
#
my $kept = $history =~ s/TABLE/orders/r =~ s/<> 1002/< 5000/r;
my $history_before = sql($kept);
$producer = producer(5001, 20);
sql(q{DROP FOREIGN TABLE orders_v1});
$producer->finish;
sql(q{SELECT source_writes.wait_for('orders')});
is(sql(q{SELECT count(*) FROM orders WHERE id BETWEEN 5001 AND 5200}), '200',
	'with the old table dropped, the new one ingests');
is(offsets('orders'), 'each once in 2 partitions', 'every offset once');
is(sql(q{SELECT count(*) FROM orders WHERE id <= 20}), '19', 'it keeps the dropped messages');
is(sql($kept), $history_before, 'and its history as it was');

#
# 6. A dump of versions whose version_of names themselves (after the swap)
# or a dropped table restores them with their own logs, copying nothing
#
sql(q{DROP FOREIGN TABLE kv});
my $dir = PostgreSQL::Test::Utils::tempdir();
SwTest::run_client('pg_dump', 'pg_dump', '-Fc', '-f', "$dir/db.dump", $node->connstr('postgres'));
sql(q{CREATE DATABASE r1});
SwTest::run_client('pg_restore', 'pg_restore', '-d', $node->connstr('r1'), "$dir/db.dump");
# (pg_dump writes options in the order of their names)
my $options = q{SELECT string_agg(relname || ' ' || (SELECT string_agg(o, ',' ORDER BY o)
	FROM unnest(ftoptions) o), '; ' ORDER BY relname) FROM pg_foreign_table JOIN pg_class ON oid = ftrelid};
is(sql($options, 'r1'), sql($options), 'the versions come back with their options');
like(sql($options, 'r1'), qr/^kv_raw .*version_of=kv; kv_v2 .*version_of=kv; orders .*version_of=orders; orders_v3 /,
	'version_of naming a dropped table, and the table itself');
for my $t ('orders', 'orders_v3', 'kv_raw', 'kv_v2')
{
	my $log = q{SELECT string_agg(format('%s %s %s %s', ts, diff, origin, data), E'\n'
		ORDER BY ts, diff, data::text) FROM source_writes.updates(NULL::TABLE)};
	is(sql($log =~ s/TABLE/$t/r, 'r1'), sql($log =~ s/TABLE/$t/r), "$t: restored with its own log");
	is(sql(qq{SELECT count(*) FROM source_writes.batches WHERE source = '$t'::regclass}, 'r1'),
		sql(qq{SELECT count(*) FROM source_writes.batches WHERE source = '$t'::regclass}),
		"$t: and its batches, no more");
}
produce(6001 .. 6010);
kv(qq(f\t{"v": "f1"}));
sql(q{SELECT source_writes.wait_for('orders'), source_writes.wait_for('kv_raw')}, 'r1');
sql(q{SELECT source_writes.wait_for('orders'), source_writes.wait_for('kv_raw')});
is(offsets('orders', 'r1'), 'each once in 2 partitions', 'the restored version ingests, each offset once');
is(stream_rows('orders', 'r1'), stream_rows('orders'), 'the same stream rows as the original');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM kv_raw}, 'r1'),
	'a=a2,b=b2,c=c2,e=e1,f=f1', 'the restored upsert version ingests');

done_testing();
