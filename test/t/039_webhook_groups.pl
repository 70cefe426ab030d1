# Groups of webhook requests.  Requests that come while a group is written
# join it, within source_writes.webhook_join_time: one transaction, one
# timestamp; they see what committed before they came, and a catalog
# change ends the joining.  The requests of a group to one table are
# written together, their rows many to a multi-insert: a request that
# fails among them fails alone (it is answered with its error, the others
# are written again one at a time, each once), and every refusal is
# logged once.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes;
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
# requests here hold the worker on purpose: no time limit at first; they
# may join a group for a minute; and at DEBUG1 the log says when a table's
# requests are written again one at a time
my $node = SwTest::node('groups', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "source_writes.webhook_request_timeout = 0\n"
	. "source_writes.webhook_join_time = '1min'\n"
	. "log_min_messages = debug1\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# start a client posting a request; returns a sub that waits for it and
# gives "status text"
sub start_post
{
	my ($path, $body, @headers) = @_;
	my $o = '';
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '--data-binary', $body,
		(map { ('-H', $_) } ('Content-Type: application/json', @headers)), "$base$path" ], '>', \$o);
	return sub {
		$h->finish;
		(my $out = $o) =~ s/\n//g;
		my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
		return "$status $text";
	};
}

# wait until the worker sleeps in a request's code
sub wait_for_sleep
{
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'}),
		'the worker is busy with a slow request');
}

# wait until the worker sleeps in a request's code, in a group of n
sub sleeping_in
{
	my ($n) = @_;
	my $writing = "writing $n webhook request" . ($n == 1 ? '' : 's');
	ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'
		AND query = '$writing'}), "the worker is busy in a group of $n");
}

# start a request to table slow (its default sleeps), and wait until it
# holds the worker; returns its id (in the table) and the sub that waits
# for its answer
my $holds = 0;
sub hold
{
	$holds++;
	my $slow = start_post('/public/slow', qq({"id": $holds}));
	wait_for_sleep();
	return ($holds, $slow);
}

# hold the worker, then start the posts given (each [path, body,
# headers...]) while it is held; returns the answers, in the order given
sub posts_while_held
{
	my (@posts) = @_;
	my ($id, $slow) = hold();
	# a moment between them, so that they reach the server in this order
	# (which request of a key comes first matters)
	my @waits = map { Time::HiRes::usleep(50_000); start_post(@$_) } @posts;
	is($slow->(), '200 1 row', 'the slow request is written');
	return map { $_->() } @waits;
}

# the transaction that wrote a table's row of an id (its batch's)
sub xid_of
{
	my ($table, $id) = @_;
	return sql("SELECT xid FROM source_writes.batches WHERE source = '$table'::regclass
		AND ts = (SELECT ts FROM source_writes.updates(NULL::$table) WHERE (data).id::text = '$id')");
}

# how many times the server's log says a request to path was refused with
# status since offset
sub refusals
{
	my ($offset, $path, $status) = @_;
	my @lines = grep { /request to \Q$path\E refused with status $status\b/ }
	  split /\n/, slurp_file($node->logfile, $offset);
	diag("refused $status: $_") for @lines > 1 ? @lines : ();
	return scalar @lines;
}

# how many times since offset the requests to a table were written again
# one at a time
sub rewrites
{
	my ($offset, $table) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my @lines = $log =~ /requests to table "\Q$table\E" are written again one at a time/g;
	return scalar @lines;
}

sub set_join_time
{
	my ($value) = @_;
	$node->append_conf('postgresql.conf', "source_writes.webhook_join_time = '$value'\n");
	$node->reload;
	ok($node->poll_query_until('postgres',
		"SELECT current_setting('source_writes.webhook_join_time') = '$value'"),
		"webhook_join_time is $value");
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE ev (id text, n int) SERVER hooks
	  OPTIONS (format 'json', idempotency_header 'Idempotency-Key');
	CREATE FOREIGN TABLE slow (id int, w text DEFAULT pg_catalog.pg_sleep(1)::text)
	  SERVER hooks OPTIONS (format 'json')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');

# requests that come while a group is written join it: one transaction
is(join(' | ', posts_while_held([ '/public/ev', '{"id": "a1", "n": 1}' ],
		[ '/public/ev', '{"id": "a2", "n": 2}' ], [ '/public/ev', '{"id": "a3", "n": 3}' ])),
	'200 1 row | 200 1 row | 200 1 row', 'three requests while the worker is held: 200 each');
is(join(',', map { xid_of('ev', "a$_") eq xid_of('slow', $holds) ? 'same' : 'other' } 1 .. 3),
	'same,same,same', 'they joined the slow request\'s group: one transaction');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM ev}), 'a1:1,a2:2,a3:3',
	'each written once');

# a table written in two rounds of one group: its first request holds the
# worker (a domain check that naps), the others join
sql(q{CREATE FUNCTION public.nap(text) RETURNS boolean LANGUAGE sql
	  AS $$ SELECT $1 <> 'nap' OR pg_catalog.pg_sleep(1)::text = '' $$;
	CREATE DOMAIN napper AS text CHECK (public.nap(VALUE));
	CREATE FOREIGN TABLE twice (id text, w public.napper) SERVER hooks OPTIONS (format 'json')});
my $first = start_post('/public/twice', '{"id": "t1", "w": "nap"}');
wait_for_sleep();
my @joined = map { start_post('/public/twice', qq({"id": "t$_", "w": "awake"})) } 2 .. 3;
is(join(' | ', map { $_->() } $first, @joined), '200 1 row | 200 1 row | 200 1 row',
	'a request that holds the worker and two that join it, to the same table: 200 each');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM twice}), 't1,t2,t3', 'each written once');
is(sql(q{SELECT count(DISTINCT ts) FROM source_writes.updates(NULL::twice)}), '1', 'in one batch');

# a request that joins sees what committed before it came: a domain's
# check that reads a table
sql(q{CREATE TABLE allowed (id text);
	CREATE FUNCTION public.is_allowed(text) RETURNS boolean STABLE LANGUAGE sql
	  AS $$ SELECT EXISTS (SELECT 1 FROM public.allowed WHERE id = $1) $$;
	CREATE DOMAIN allowed_id AS text CHECK (public.is_allowed(VALUE));
	CREATE FOREIGN TABLE gated (id public.allowed_id) SERVER hooks OPTIONS (format 'json')});
# (a request to a table the server's map of addresses does not know yet
# waits for the worker to look, between groups: this one makes it known)
like(start_post('/public/gated', '{"id": "g0"}')->(), qr/^400 value for domain public.allowed_id violates/,
	'an id that is not allowed: 400');
my ($held, $slow) = hold();
sql(q{INSERT INTO allowed VALUES ('g1')});
my $gated = start_post('/public/gated', '{"id": "g1"}');
is($slow->(), '200 1 row', 'the slow request is written');
is($gated->(), '200 1 row', 'a request checked against a row committed before it was sent: 200');
is(xid_of('gated', 'g1'), xid_of('slow', $held), 'it joined the slow request\'s group');

# a catalog change ends the joining: a request sent after an EXECUTE was
# revoked does not run the function with the right it had
sql(q{CREATE ROLE hookowner;
	GRANT USAGE ON FOREIGN SERVER hooks TO hookowner;
	CREATE FUNCTION public.stamp() RETURNS text LANGUAGE sql AS $$ SELECT 'stamped' $$;
	CREATE FOREIGN TABLE stamped (id text, s text DEFAULT public.stamp())
	  SERVER hooks OPTIONS (format 'json');
	ALTER FOREIGN TABLE stamped OWNER TO hookowner});
like(start_post('/public/stamped', '{"id": "s1"}')->(), qr/^200 /, 'the owner may run the default');
($held, $slow) = hold();
sql(q{REVOKE EXECUTE ON FUNCTION public.stamp() FROM PUBLIC});
my $after = start_post('/public/stamped', '{"id": "s2"}');
is($slow->(), '200 1 row', 'the slow request is written');
like($after->(), qr/^500 /, 'a request sent after the revoke: 500, as alone');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM stamped}), 's1', 'and not written');

# changes to other tables (which VACUUM, ANALYZE and temporary tables make
# all the time) do not end the joining; a change to a source does
sql(q{CREATE TABLE unrelated (i int); INSERT INTO unrelated VALUES (1)});
($held, $slow) = hold();
sql(q{ANALYZE unrelated; CREATE TEMP TABLE scratch (i int); ALTER TABLE unrelated ADD COLUMN j int});
my $joiner = start_post('/public/ev', '{"id": "u1", "n": 1}');
is($slow->(), '200 1 row', 'the slow request is written');
is($joiner->(), '200 1 row', 'a request sent after changes to other tables: 200');
is(xid_of('ev', 'u1'), xid_of('slow', $held), 'it joined the slow request\'s group');
($held, $slow) = hold();
sql(q{GRANT SELECT ON ev TO hookowner});
$joiner = start_post('/public/ev', '{"id": "u2", "n": 2}');
is($slow->(), '200 1 row', 'the slow request is written');
is($joiner->(), '200 1 row', 'a request sent after a GRANT on its table: 200');
isnt(xid_of('ev', 'u2'), xid_of('slow', $held), 'in a group of its own');

# a table dropped and made again while groups are written: a request sent
# while it is gone gets 404, and one sent once it is back is written to
# the new one (the first is not taken into the group being written, which
# resolved addresses before the drop; the second is not taken into the
# group that resolved the first)
sql(q{CREATE FOREIGN TABLE ghost (id text) SERVER hooks OPTIONS (format 'json')});
($held, $slow) = hold();
sql(q{DROP FOREIGN TABLE ghost});
my $gone = start_post('/public/ghost', '{"id": "h1"}');
my $slow2 = start_post('/public/slow', qq({"id": @{[ ++$holds ]}}));
is($slow->(), '200 1 row', 'the slow request is written');
wait_for_sleep();
sql(q{CREATE FOREIGN TABLE ghost (id text) SERVER hooks OPTIONS (format 'json')});
my $back = start_post('/public/ghost', '{"id": "h2"}');
is($slow2->(), '200 1 row', 'and a second one');
like($gone->(), qr/^404 /, 'the request sent while the table was gone: 404');
is($back->(), '200 1 row', 'the request sent once it is back: 200');
is(sql(q{SELECT string_agg(id, ',') FROM ghost}), 'h2', 'written to the new table');

# an address whose table was locked in one round of a group is looked up
# again in the next: a request sent once the lock is gone is written
sql(q{CREATE FOREIGN TABLE slower (id text, w text DEFAULT pg_catalog.pg_sleep(2)::text)
	  SERVER hooks OPTIONS (format 'json')});
like(start_post('/public/slower', '{"id": "w0"}')->(), qr/^200 /, 'a table that sleeps longer');
my $heap = sql(q{SELECT current_rel FROM source_writes.source_tables WHERE relid = 'ev'::regclass});
my $locker = $node->background_psql('postgres');
my $w1 = start_post('/public/slower', '{"id": "w1"}');
sleeping_in(1);
$locker->query_safe("BEGIN; LOCK TABLE $heap IN ACCESS EXCLUSIVE MODE");
my $locked = start_post('/public/ev', '{"id": "l1", "n": 1}');
Time::HiRes::usleep(50_000);
my $w2 = start_post('/public/slower', '{"id": "w2"}');
sleeping_in(3);
$locker->query_safe('COMMIT');
$locker->quit;
my $unlocked = start_post('/public/ev', '{"id": "l2", "n": 2}');
is($w1->() . ' | ' . $w2->(), '200 1 row | 200 1 row', 'the slow requests are written');
like($locked->(), qr/^503 /, 'a request sent while its table was locked: 503');
is($unlocked->(), '200 1 row', 'one sent once the lock was gone: 200');
is(xid_of('ev', 'l2'), xid_of('slower', 'w1'), 'in the same group');

# a reload that moves the server while a group is written: the group
# takes no more requests (none may be in hand when the server restarts),
# and is answered; a request that came meanwhile is answered 503 as the
# server moves, and the server answers at its new address
my $port2 = PostgreSQL::Test::Cluster::get_free_port();
my $offset = -s $node->logfile;
my $w3 = start_post('/public/slower', '{"id": "w3"}');
sleeping_in(1);
$node->append_conf('postgresql.conf', "source_writes.webhook_listen = '127.0.0.1:$port2'\n");
$node->reload;
ok($node->wait_for_log(qr/parameter "source_writes.webhook_listen" changed/, $offset),
	'the reload is read');
my $queued = start_post('/public/ev', '{"id": "m1", "n": 1}');
is($w3->(), '200 1 row', 'the slow request is written');
like($queued->(), qr/^503 /, 'a request sent after the reload: 503, as the server moves');
ok($node->wait_for_log(qr/moves from 127\.0\.0\.1:$port to 127\.0\.0\.1:$port2/, $offset),
	'the server moved');
is(sql(q{SELECT count(*) FROM ev WHERE id = 'm1'}), '0', 'that request is not written');
$base = "http://127.0.0.1:$port2/postgres";
is(start_post('/public/ev', '{"id": "m2", "n": 2}')->(), '200 1 row', 'it answers at its new address');
unlike(slurp_file($node->logfile, $offset), qr/terminated by signal/, 'and nothing crashed');

# past webhook_join_time, requests wait for the next group
set_join_time('10ms');
is(join(' | ', posts_while_held([ '/public/ev', '{"id": "j1", "n": 1}' ])), '200 1 row',
	'a request while the worker is held: 200');
isnt(xid_of('ev', 'j1'), xid_of('slow', $holds), 'in a group of its own');

# a bad request among good ones to the same table fails alone; a request
# refused by its checks (a content type the table cannot take) and a
# repeated delivery are answered as they would be alone; each refusal is
# logged once, though the good requests are written twice (once together,
# rolled back when the bad one failed, then one at a time)
$offset = -s $node->logfile;
my @answers = posts_while_held(
	[ '/public/ev', '{"id": "b1", "n": 1}', 'Idempotency-Key: b1' ],
	[ '/public/ev', '{"id": "b2", "n": 2}', 'Content-Type: application/xml' ],
	[ '/public/ev', '{"id": "b3", "n": "three"}' ],
	[ '/public/ev', '{"id": "b4", "n": 4}' ],
	[ '/public/ev', '{"id": "b1", "n": 1}', 'Idempotency-Key: b1' ]);
is($answers[0], '200 1 row', 'a good request: 200');
like($answers[1], qr/^415 this table cannot take content type "application\/xml"$/,
	'one its checks refuse: 415');
like($answers[2], qr/^400 invalid input syntax for type integer: "three" \(column "n"/,
	'the bad one: 400, where it broke');
is($answers[3], '200 1 row', 'the good one after it: 200');
is($answers[4], '200 1 row', 'a repeat of the first: its answer');
is(sql(q{SELECT string_agg(id || ':' || n, ',' ORDER BY id) FROM ev WHERE id LIKE 'b%'}), 'b1:1,b4:4',
	'the good requests are written, each once, and nothing of the others');
is(sql(q{SELECT count(*) FROM source_writes.updates(NULL::ev) WHERE (data).id LIKE 'b%'}), '2',
	'nor anything of them in the log');
$node->wait_for_log(qr/request to \/postgres\/public\/ev refused with status 400/, $offset);
is(refusals($offset, '/postgres/public/ev', 400), 1, 'the bad request is logged once');
is(refusals($offset, '/postgres/public/ev', 415), 1, 'and the refused one once');
is(rewrites($offset, 'ev'), 1, 'they were written together, then again one at a time');

# the table's next requests are written one at a time for a while: the
# same answers
$offset = -s $node->logfile;
@answers = posts_while_held([ '/public/ev', '{"id": "c1", "n": "one"}' ],
	[ '/public/ev', '{"id": "c2", "n": 2}' ], [ '/public/ev', '{"id": "c3", "n": 3}' ]);
like($answers[0], qr/^400 invalid input syntax/, 'again a bad request: 400');
is("$answers[1] | $answers[2]", '200 1 row | 200 1 row', 'and the good ones 200');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev WHERE id LIKE 'c%'}), 'c2,c3', 'written once');
$node->wait_for_log(qr/request to \/postgres\/public\/ev refused with status 400/, $offset);
is(refusals($offset, '/postgres/public/ev', 400), 1, 'logged once');
is(rewrites($offset, 'ev'), 0, 'written one at a time at once, not together first');

# a group written together whose requests all pass: a refusal is logged
# once, and a repeat of a key written in the same run is a repeat
$offset = -s $node->logfile;
sql(q{CREATE FOREIGN TABLE ev2 (id text) SERVER hooks
	OPTIONS (format 'json', idempotency_header 'Idempotency-Key')});
@answers = posts_while_held([ '/public/ev2', '{"id": "d1"}', 'Content-Type: image/png' ],
	[ '/public/ev2', qq({"id": "d2"}\n{"id": "d3"}), 'Idempotency-Key: d' ],
	[ '/public/ev2', qq({"id": "d2"}\n{"id": "d3"}), 'Idempotency-Key: d' ],
	[ '/public/ev2', '{"id": "d4"}', 'Idempotency-Key: d' ]);
like($answers[0], qr/^415 /, 'a refused request: 415');
is("$answers[1] | $answers[2]", '200 2 rows | 200 2 rows', 'a delivery and its repeat: 200, its answer');
like($answers[3], qr/^422 /, 'the key with another body: 422');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev2}), 'd2,d3', 'the delivery is written once');
$node->wait_for_log(qr/request to \/postgres\/public\/ev2 refused with status 415/, $offset);
is(refusals($offset, '/postgres/public/ev2', 415), 1, 'the refusal is logged once');
is(refusals($offset, '/postgres/public/ev2', 422), 1, 'and the conflict once');
is(rewrites($offset, 'ev2'), 0, 'nothing was written again');

# requests to a table made just now wait for the worker to look at it
# (the server's map of addresses does not know it yet), which it does
# between groups: those sent while it is held are looked at together, and
# then read and queued as they complete, a small body before a large one
# that came after it: each is written and answered once, whole
my $large = PostgreSQL::Test::Utils::tempdir() . '/large';
for my $i (1 .. 12)
{
	open(my $fh, '>', "$large$i") or die "cannot write $large$i: $!";
	print $fh qq({"id": $i, "note": ") . ('x' x 4_000_000) . '"}';
	close($fh);
}
for my $t (1 .. 3)
{
	sql("CREATE FOREIGN TABLE fresh$t (id int, note text) SERVER hooks
		OPTIONS (format 'json', max_body_bytes '16MB')");
	my @answers = posts_while_held(map { [ "/public/fresh$t", $_ % 2 ? qq({"id": $_}) : "\@$large$_" ] } 1 .. 12);
	is(join(',', @answers), join(',', ('200 1 row') x 12),
		"12 requests at once to table fresh$t, new, half of them of 4 MB: 200 each");
	is(sql("SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || sum(length(note)) FROM fresh$t"),
		'12 12 24000000', 'each written once, whole');
}

# rows that fail when the buffered rows are written, maybe with another
# request's: no one request is blamed, and each fails or passes alone.
# Three rows of 500 columns that are too big once toasted fill most of the
# buffer; a small row of another request fills it.
srand(1);
sub word { return join('', map { ('a' .. 'z', 'A' .. 'Z', 0 .. 9)[ int(rand(62)) ] } 1 .. $_[0]); }
sub wide_row { return '{' . join(', ', map { qq("c$_": ") . word(40) . '"' } 1 .. 500) . '}'; }
sql('CREATE FOREIGN TABLE wide (' . join(', ', map { "c$_ text" } 1 .. 500)
	  . q{) SERVER hooks OPTIONS (format 'json')});
$offset = -s $node->logfile;
@answers = posts_while_held([ '/public/wide', join("\n", map { wide_row() } 1 .. 3) ],
	[ '/public/wide', '{"c1": "' . ('x' x 5000) . '", "c2": "small"}' ]);
like($answers[0], qr/^500 /, 'rows too big: 500');
is($answers[1], '200 1 row', 'the small row of the other request: 200');
is(sql(q{SELECT string_agg(c2, ',') FROM wide}), 'small', 'is written');
$node->wait_for_log(qr/request to \/postgres\/public\/wide refused with status 500/, $offset);
is(refusals($offset, '/postgres/public/wide', 500), 1, 'only the big rows\' request is refused');

# a default's sequence: the good requests written before the bad one took
# numbers that were rolled back with them, as rolled-back inserts do; each
# row is there once
sql(q{CREATE SEQUENCE numbers;
	CREATE FOREIGN TABLE numbered (id text, k bigint DEFAULT pg_catalog.nextval('public.numbers'))
	  SERVER hooks OPTIONS (format 'json')});
@answers = posts_while_held([ '/public/numbered', '{"id": "e1"}' ],
	[ '/public/numbered', '{"id": "e2", "k": "x"}' ], [ '/public/numbered', '{"id": "e3"}' ]);
is("$answers[0] | $answers[2]", '200 1 row | 200 1 row', 'good requests to a table with a sequence: 200');
like($answers[1], qr/^400 /, 'the bad one: 400');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) || ' ' || count(DISTINCT k) FROM numbered}), 'e1,e3 2',
	'each row once, with a number of its own');

# a request that runs out of time among others fails alone: 503
$node->append_conf('postgresql.conf', "source_writes.webhook_request_timeout = '1s'\n");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT current_setting('source_writes.webhook_request_timeout') = '1s'}),
	'a request timeout of 1 s');
sql(q{CREATE FUNCTION public.long_nap(text) RETURNS boolean LANGUAGE sql
	  AS $$ SELECT $1 <> 'nap' OR pg_catalog.pg_sleep(30)::text = '' $$;
	CREATE DOMAIN long_napper AS text CHECK (public.long_nap(VALUE));
	CREATE FOREIGN TABLE naps (id text, w public.long_napper) SERVER hooks OPTIONS (format 'json');
	ALTER FOREIGN TABLE slow ALTER COLUMN w SET DEFAULT pg_catalog.pg_sleep(0.5)::text});
$offset = -s $node->logfile;
@answers = posts_while_held([ '/public/naps', '{"id": "f1", "w": "awake"}' ],
	[ '/public/naps', '{"id": "f2", "w": "nap"}' ], [ '/public/naps', '{"id": "f3", "w": "awake"}' ]);
is("$answers[0] | $answers[2]", '200 1 row | 200 1 row', 'the others: 200');
like($answers[1], qr/^503 the request took longer than the server gives one/, 'the one that sleeps: 503');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM naps}), 'f1,f3', 'written once each');
$node->wait_for_log(qr/request to \/postgres\/public\/naps refused with status 503/, $offset);
is(refusals($offset, '/postgres/public/naps', 503), 1, 'the time out is logged once');
is(rewrites($offset, 'naps'), 1, 'the others were written again');

done_testing();
