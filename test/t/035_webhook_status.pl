# Webhook sources in the source_writes.sources view: the server's state,
# the requests answered 200 (accepted) and otherwise (refused) for each
# table, and the last refusal; a server that cannot listen says why.  A
# server that shuts down answers what it holds 503, and loses nothing it
# answered 200.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IO::Socket::INET;
use IPC::Run;
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('sources_view', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST with curl to a port: the status
sub post_to
{
	my ($to, $path, $body, @headers) = @_;
	my ($out) = run_command([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
		'--data-binary', $body, '-H', 'Content-Type: application/json',
		(map { ('-H', $_) } @headers), "http://127.0.0.1:$to/postgres$path" ]);
	return $out;
}
sub post { return post_to($port, @_); }

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id text, amount numeric) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE other (id text) SERVER hooks OPTIONS (format 'json');
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '127.0.0.1:1');
	CREATE FOREIGN TABLE topic (v text) SERVER k OPTIONS (topic 't', format 'text')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
my $pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});

is(sql(q{SELECT state, accepted, refused, last_error IS NULL, worker_pid = } . $pid .
	q{ FROM source_writes.sources WHERE source = 'pay'::regclass}), 'listening|0|0|t|t',
	'a webhook source: listening, with the server\'s pid, nothing answered yet');

is(post('/public/pay', '{"id": "a", "amount": 1}'), '200', 'a post');
is(post('/public/pay', qq({"id": "b", "amount": 2}\n{"id": "c", "amount": 3})), '200', 'another');
is(post('/public/pay', '{"id": "d", "amount": "x"}'), '400', 'a bad value');
is(post('/public/pay', 'x' x 10, 'Content-Type: image/png'), '415', 'a bad content type');
is(post('/public/other', '{"id": "o"}'), '200', 'a post to another table');
sql(q{CREATE FOREIGN TABLE small (v text) SERVER hooks OPTIONS (format 'text', max_body_bytes '16')});
is(post('/public/small', 'x' x 100, 'Content-Type: text/plain'), '413', 'a body over the limit, refused before it is read');
is(sql(q{SELECT accepted, refused, last_error FROM source_writes.sources WHERE source = 'small'::regclass}),
	'0|1|413 the body is larger than this table takes', 'is counted too');
is(post('/public/nope', '{"id": "n"}'), '404', 'a post to no table');

is(sql(q{SELECT accepted, refused, last_error FROM source_writes.sources WHERE source = 'pay'::regclass}),
	'2|2|415 this table cannot take content type "image/png"',
	'requests are counted per table, with the last refusal');
is(sql(q{SELECT accepted, refused, last_error IS NULL FROM source_writes.sources
	WHERE source = 'other'::regclass}), '1|0|t', 'each table its own');
is(sql(q{SELECT kind, accepted IS NULL, refused IS NULL FROM source_writes.sources
	WHERE source = 'topic'::regclass}), 'kafka|t|t', 'a Kafka source has no request counts');

# the view shows a role the tables it may read
sql(q{CREATE ROLE reader; GRANT SELECT ON other TO reader});
is($node->safe_psql('postgres', q{SET ROLE reader;
	SELECT string_agg(source::text || ' ' || accepted, ',') FROM source_writes.sources}),
	'other 1', 'a role sees the counts of the tables it may read only');

# a server that cannot listen says why (a reload to an address that is
# taken keeps the old one: a start shows it)
my $holder = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => 0, Listen => 1, ReuseAddr => 0)
  or die "listen: $!";
my $taken = $holder->sockport;
$node->stop;
$node->append_conf('postgresql.conf', "source_writes.webhook_listen = '127.0.0.1:$taken'\n");
$node->start;
ok($node->poll_query_until('postgres', q{SELECT state = 'cannot start' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'a server that cannot listen: cannot start');
like(sql(q{SELECT last_error FROM source_writes.sources WHERE source = 'pay'::regclass}),
	qr/127\.0\.0\.1:$taken/, 'with the reason as the last error');
is(sql(q{SELECT count(*) FROM source_writes.sources WHERE kind = 'webhook' AND worker_pid IS NOT NULL}), '0',
	'and no worker');
close $holder;
ok($node->poll_query_until('postgres', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}, 't'), 'listening once the address is free');
is(sql(q{SELECT accepted, refused, last_error IS NULL FROM source_writes.sources
	WHERE source = 'pay'::regclass}), '0|0|t', 'counted anew since the server started');
is(post_to($taken, '/public/pay', '{"id": "e", "amount": 5}'), '200', 'a post');
$pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
sql("SELECT pg_terminate_backend($pid)");
ok($node->poll_query_until('postgres', qq{SELECT state = 'listening' AND worker_pid <> $pid
	FROM source_writes.sources WHERE source = 'pay'::regclass}), 'a new worker listens');
is(sql(q{SELECT accepted FROM source_writes.sources WHERE source = 'pay'::regclass}), '1',
	'the counts outlive the worker');

# one table does not hold up the others: a request that takes longer than
# source_writes.webhook_request_timeout is answered 503 and writes nothing,
# and a table that DDL holds is not waited for
$node->append_conf('postgresql.conf', "source_writes.webhook_request_timeout = '300ms'\n");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT current_setting('source_writes.webhook_request_timeout') = '300ms'}),
	'a request timeout of 300 ms');
sql(q{CREATE FOREIGN TABLE sleepy (id int, w text DEFAULT pg_catalog.pg_sleep(30)::text)
	SERVER hooks OPTIONS (format 'json')});
my $t0 = time();
my ($sleepy_answer) = run_command([ 'curl', '-s', '-w', ' %{http_code}', '--data-binary', '{"id": 1}',
	'-H', 'Content-Type: application/json', "http://127.0.0.1:$taken/postgres/public/sleepy" ]);
is($sleepy_answer, "the request took longer than the server gives one; send it again\n 503",
	'a request to a table whose default sleeps: 503');
cmp_ok(time() - $t0, '<', 10, 'long before the default would have woken');
is(sql(q{SELECT count(*) FROM sleepy}), '0', 'and nothing written');
like(slurp_file($node->logfile), qr{request to /postgres/public/sleepy refused with status 503: it took longer than source_writes.webhook_request_timeout},
	'the log says why');
is(post_to($taken, '/public/pay', '{"id": "after-sleepy", "amount": 1}'), '200', 'the worker goes on');

# code that catches the cancel does not get past the limit, nor does an
# immutable default computed when the table is prepared; an error of the
# table's code that looks like the server's own fails its request only
sql(q{CREATE FUNCTION public.stubborn() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		BEGIN PERFORM pg_catalog.pg_sleep(0.6); EXCEPTION WHEN query_canceled THEN NULL; END;
		RETURN 'caught';
	END $$;
	CREATE FUNCTION public.slow_imm() RETURNS text IMMUTABLE LANGUAGE plpgsql AS $$
	BEGIN PERFORM pg_catalog.pg_sleep(30); RETURN 'late'; END $$;
	CREATE FUNCTION public.fake() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'not really' USING ERRCODE = 'admin_shutdown'; END $$;
	CREATE FOREIGN TABLE stub (id int, w text DEFAULT public.stubborn()) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE imm (id int, w text DEFAULT public.slow_imm()) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE fakes (id int, w text DEFAULT public.fake()) SERVER hooks OPTIONS (format 'json')});
is(post_to($taken, '/public/stub', '{"id": 1}'), '503', 'a default that catches the cancel: 503');
is(sql(q{SELECT count(*) FROM stub}), '0', 'and nothing written');
sql(q{CREATE FUNCTION public.obstinate() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		LOOP
			BEGIN PERFORM pg_catalog.pg_sleep(1); EXCEPTION WHEN query_canceled THEN NULL; END;
		END LOOP;
	END $$;
	CREATE FOREIGN TABLE obstinate (id int, w text DEFAULT public.obstinate()) SERVER hooks OPTIONS (format 'json')});
$pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
$t0 = time();
is(post_to($taken, '/public/obstinate', '{"id": 1}'), '503', 'a default that catches every cancel: 503');
cmp_ok(time() - $t0, '<', 10, 'after a few cancels');
is(sql(q{SELECT count(*) FROM obstinate}), '0', 'nothing written');
ok($node->poll_query_until('postgres', qq{SELECT state = 'listening' AND worker_pid <> $pid
	FROM source_writes.sources WHERE source = 'pay'::regclass}), 'the worker it ended is started again');
is(post_to($taken, '/public/pay', '{"id": "after-obstinate", "amount": 1}'), '200', 'and writes');
$t0 = time();
is(post_to($taken, '/public/imm', '{"id": 1}'), '503', 'an immutable default that sleeps: 503');
cmp_ok(time() - $t0, '<', 10, 'long before it would have woken');
my @together = map {
	my $o = '';
	[ IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '--data-binary', $_->[1],
		'-H', 'Content-Type: application/json', "http://127.0.0.1:$taken/postgres/public/$_->[0]" ],
		'>', \$o), \$o ] } (['fakes', '{"id": 1}'], ['pay', '{"id": "beside-fake", "amount": 1}']);
$_->[0]->finish for @together;
is(join(',', map { ${ $_->[1] } } @together), '503,200',
	'an error of class 57 raised by a table\'s code fails its own request only');
is($node->safe_psql('postgres', q{SELECT count(*) FROM pay WHERE id = 'beside-fake'}), '1', 'the other is written');

my $ddl = $node->background_psql('postgres', on_error_stop => 1);
my $heap = sql(q{SELECT current_rel FROM source_writes.source_tables WHERE relid = 'pay'::regclass});
$ddl->query_safe(qq{BEGIN; LOCK TABLE $heap IN ACCESS EXCLUSIVE MODE});
$t0 = time();
is(post_to($taken, '/public/pay', '{"id": "locked-heap", "amount": 1}'), '503',
	'a table whose storage is locked (VACUUM FULL): 503');
cmp_ok(time() - $t0, '<', 4, 'at once, not after the lock timeout');
$ddl->query_safe(q{COMMIT});

$ddl->query_safe(q{BEGIN; ALTER FOREIGN TABLE other ADD COLUMN extra int});
$t0 = time();
my ($altered) = run_command([ 'curl', '-s', '-w', ' %{http_code}', '--data-binary', '{"id": "o2"}',
	'-H', 'Content-Type: application/json', "http://127.0.0.1:$taken/postgres/public/other" ]);
is($altered, "the table is being altered; send it again\n 503", 'a table under an open ALTER: 503');
cmp_ok(time() - $t0, '<', 4, 'at once, not after the lock timeout');
is(post_to($taken, '/public/pay', '{"id": "during-alter", "amount": 1}'), '200', 'other tables are written meanwhile');
$ddl->query_safe(q{COMMIT});
is(post_to($taken, '/public/other', '{"id": "o3"}'), '200', 'once the ALTER commits, the table is written');

# a table renamed while its name is resolved: the old address is 404
$ddl->query_safe(q{BEGIN; ALTER FOREIGN TABLE other RENAME TO renamed});
is(post_to($taken, '/public/other', '{"id": "o4"}'), '503', 'a table being renamed: 503');
$ddl->query_safe(q{COMMIT});
$ddl->quit;
is(post_to($taken, '/public/other', '{"id": "o5"}'), '404', 'renamed: its old address is 404');
is(post_to($taken, '/public/renamed', '{"id": "o6"}'), '200', 'and its new one is written');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM renamed}), 'o,o3,o6', 'with nothing of the refused requests');

# a shutdown while requests are being written: they get 503, and what got
# 200 is there (without a time limit, which the slow requests would reach).  The first request holds the worker while the others queue;
# they are written together next, and the server stops while they are.
$node->append_conf('postgresql.conf', "source_writes.webhook_request_timeout = 0\n");
$node->reload;
ok($node->poll_query_until('postgres', q{SELECT current_setting('source_writes.webhook_request_timeout') = '0'}),
	'no request timeout');
sql(q{CREATE FOREIGN TABLE slow (id int, w text DEFAULT pg_catalog.pg_sleep(0.5)::text)
	SERVER hooks OPTIONS (format 'json')});
my @clients;
for my $i (1 .. 8)
{
	my $o = '';
	push @clients, [ IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
		'-H', 'Content-Type: application/json', '--data-binary', qq({"id": $i}),
		"http://127.0.0.1:$taken/postgres/public/slow" ], '>', \$o), \$o ];
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'}),
		'the worker is writing the first request') if $i == 1;
}
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND query = 'writing 7 webhook requests'
	AND wait_event = 'PgSleep'}), 'then the seven others, together');
$node->stop('fast');
my @codes = map { $_->[0]->finish; ${ $_->[1] } } @clients;
is(join(',', @codes), '200,503,503,503,503,503,503,503',
	'a fast shutdown answers the requests being written 503');
$node->start;
is(sql(q{SELECT string_agg(id::text, ',') FROM slow}), '1',
	'after a restart, the row of the 200 is there, and none of a 503');

done_testing();
