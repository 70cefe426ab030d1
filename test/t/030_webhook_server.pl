# The webhook server: POST /<database>/<schema>/<table> appends the body to
# a webhook source table, in the table's format, and answers after the
# commit; bad bodies get 400 and leave nothing behind; what is not a
# webhook source gets 404; other methods 405.  Posted rows are edited like
# any others, and concurrent clients all get their rows, once.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Socket::INET;
use Digest::SHA qw(hmac_sha256 hmac_sha256_hex);
use MIME::Base64 qw(encode_base64 decode_base64);
use Time::HiRes qw(usleep);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
# (requests here hold the worker on purpose: no time limit)
my $node = SwTest::node('webhook', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "source_writes.webhook_request_timeout = 0\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST (or another method) with curl: "status body"
sub request
{
	my ($method, $path, $body, @headers) = @_;
	my @cmd = ('curl', '-s', '-X', $method, '-o', '-', '-w', ' %{http_code}', "$base$path");
	push @cmd, '--data-binary', $body if defined $body;
	push @headers, 'Content-Type: application/json' unless grep { /^content-type:/i } @headers;
	push @cmd, map { ('-H', $_) } @headers;
	my ($out, $err) = run_command(\@cmd);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id text, amount numeric, body jsonb OPTIONS (source 'body'),
	  received timestamptz OPTIONS (source 'received_at'), ua text OPTIONS (header 'User-Agent'),
	  hs jsonb OPTIONS (source 'headers'))
	  SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE items (sku text, n int) SERVER hooks OPTIONS (format 'json_array');
	CREATE FOREIGN TABLE notes (note text) SERVER hooks OPTIONS (format 'text');
	CREATE FOREIGN TABLE raw (data bytea) SERVER hooks OPTIONS (format 'bytes');
	CREATE TABLE plain (id text)});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the launcher starts the webhook server once there are webhook sources');

# formats
is(request('POST', '/public/pay', '{"id": "p1", "amount": 12.50}', 'User-Agent: tester'),
	'200 1 row', 'json: an object is a row');
is(sql(q{SELECT id || ' ' || amount || ' ' || ua || ' ' || (body->>'id') || ' ' ||
	(received BETWEEN now() - interval '1 minute' AND now()) || ' ' ||
	(hs @> '[{"User-Agent": "tester"}]') FROM pay}), 'p1 12.50 tester p1 true true',
	'with its body, headers and arrival time');
is(request('POST', '/public/pay', qq({"id": "p2", "amount": 1}\n\n{"id": "p3", "amount": 2}\n)),
	'200 2 rows', 'json: NDJSON is a row a line');
is(request('POST', '/public/pay', "{\n  \"id\": \"p4\",\n  \"amount\": 4\n}"), '200 1 row',
	'json: an object over several lines is one row');
like(request('POST', '/public/pay', qq({"id": "p5", "amount": 5}\n{"id": "p6", "amount": "x"})),
	qr/^400 invalid input syntax for type numeric: "x" \(column "amount" of source table "pay", field "amount"; line 2 of the body\)$/,
	'a bad value: 400, saying which line and which column');
like(slurp_file($node->logfile), qr{request to /postgres/public/pay refused with status 400$}m,
	'the server log names the table and the status');
unlike(slurp_file($node->logfile), qr/numeric: "x"/, 'but not what the client sent');
like(request('POST', '/public/pay', qq({"id": "p7", "amount": ]})),
	qr/^400 invalid JSON in message value at byte \d+/, 'bad JSON: 400, saying where');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM pay}), 'p1,p2,p3,p4',
	'a refused request leaves nothing behind');
is(request('POST', '/public/items', '[{"sku": "a", "n": 1}, {"sku": "b", "n": 2}, {"sku": "c"}]'),
	'200 3 rows', 'json_array: an element is a row');
like(request('POST', '/public/items', '{"sku": "a"}'), qr/^400 the body is not a JSON array/,
	'json_array: another body is refused');
is(request('POST', '/public/items', '[{"sku": "a"}, '),
	'400 invalid JSON in the body at byte 16: The input string ended unexpectedly. (the body)',
	'json_array: a broken array is refused, saying where');
is(request('POST', '/public/items', '[{"sku": "a"} x]'),
	'400 invalid JSON in the body at byte 15: Token "x" is invalid. (the body)',
	'or where it broke inside');
# nested deeper than the stack allows: the body's fault too, whoever parses it
is(request('POST', '/public/items', '[' x 50000 . ']' x 50000),
	'400 stack depth limit exceeded (the body)', 'json_array: a body nested too deeply is refused');
is(request('POST', '/public/pay', '[' x 50000 . "\n" . ']' x 50000),
	'400 stack depth limit exceeded (the body)', 'json: so is one over several lines');
is(request('POST', '/public/notes', "any text\nat all"), '200 1 row', 'text');
is(request('POST', '/public/raw', "\x01\x02bytes"), '200 1 row', 'bytes');
is(sql(q{SELECT (SELECT string_agg(sku || coalesce(n::text, '-'), ',' ORDER BY sku) FROM items) || ' ' ||
	(SELECT encode(data, 'hex') FROM raw)}), 'a1,b2,c- 01026279746573', 'each as posted');
is(sql(q{SELECT note FROM notes}), "any text\nat all", 'text whole');

# addresses
my $not_found = '404 no webhook source table at this address';
is(request('POST', '/public/nope', '{}'), $not_found, 'a table that does not exist: 404');
is(request('POST', '/public/plain', '{}'), $not_found, 'a plain table: the same 404');
{
	my ($o) = run_command([ 'curl', '-s', '-w', ' %{http_code}', '--data-binary', '{}',
		"http://127.0.0.1:$port/template1/public/pay" ]);
	is($o, "no webhook source table at this address\n 404", 'the path of another database: 404');
}
is(request('POST', '/public/pay/extra', '{}'), $not_found, 'a longer path: 404');
like(request('GET', '/public/pay'), qr/^405 /, 'GET: 405');
my ($out) = run_command([ 'curl', '-s', '-i', '-X', 'DELETE', "$base/public/pay" ]);
like($out, qr/^Allow: POST\r?$/m, 'with an Allow header');
sql(q{CREATE SCHEMA "s p"; CREATE FOREIGN TABLE "s p"."Odd/Name" (v text) SERVER hooks OPTIONS (format 'text')});
is(request('POST', '/s%20p/Odd%2FName', 'odd'), '200 1 row', 'names are percent-decoded, as PostgreSQL spells them');
sql(q{ALTER FOREIGN TABLE notes RENAME TO notes2});
is(request('POST', '/public/notes', 'x'), $not_found, 'a renamed table: not at its old address');
is(request('POST', '/public/notes2', 'x'), '200 1 row', 'but at its new one');

# edits
sql(q{DELETE FROM pay WHERE id = 'p2'});
is(request('POST', '/public/pay', '{"id": "p2", "amount": 1}'), '200 1 row', 'a deleted row posted again');
is(sql(q{SELECT count(*) FROM pay WHERE id = 'p2'}), '1', 'is there again');
is(sql(q{SELECT string_agg(origin || diff, ',' ORDER BY ts, diff) FROM source_writes.updates(NULL::pay)
	WHERE (data).id = 'p2'}), 'webhook1,user-1,webhook1', 'the log shows who wrote what');

# concurrent clients: every request answered 200 is there once
my @clients;
for my $c (1 .. 16)
{
	my @cmd = ('curl');
	push @cmd, ('-s', '-o', '/dev/null', '-w', '%{http_code}\n', '-X', 'POST',
		'-H', 'Content-Type: application/json', '--data-binary',
		qq({"id": "c$c-$_", "amount": $_}), "$base/public/pay", '--next')
	  for 1 .. 20;
	pop @cmd;
	my $stdout = '';
	push @clients, [ IPC::Run::start(\@cmd, '>', \$stdout), \$stdout ];
}
my $ok = 0;
for my $client (@clients)
{
	$client->[0]->finish;
	$ok += () = ${ $client->[1] } =~ /^200$/mg;
}
is($ok, 320, '16 concurrent clients: 320 requests answered 200');
is(sql(q{SELECT count(*), count(DISTINCT id) FROM pay WHERE id LIKE 'c%'}), '320|320',
	'each of them there once');

# the worker reports its activity as any session does (while it runs: it
# has not exited since it started): autovacuum sees the inserts
ok($node->poll_query_until('postgres', q{SELECT s.n_tup_ins > 0 AND s.n_tup_ins >= (SELECT count(*) FROM pay)
	FROM pg_stat_all_tables s
	WHERE s.relid = (SELECT current_rel FROM source_writes.source_tables WHERE relid = 'pay'::regclass)}),
	'the statistics count the rows the worker inserted');

# signatures: HMAC-SHA256 of the raw body with the secret of the owner's
# user mapping; without the header what an address with no table gets
# (404), wrong 403, and nothing written
sql(q{CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret 'whsec-3141');
	CREATE FOREIGN TABLE signed (id text) SERVER hooks
	  OPTIONS (format 'json', signature_header 'X-Signature', signature_prefix 'sha256=');
	CREATE FOREIGN TABLE signed64 (id text) SERVER hooks
	  OPTIONS (format 'json', signature_header 'X-Hub-Signature', signature_encoding 'base64')});
my $signed_from = -s $node->logfile;	# (the statement above is logged)
my $body = '{"id": "s1"}';
my $hex = hmac_sha256_hex($body, 'whsec-3141');
is(request('POST', '/public/signed', $body), '404 no webhook source table at this address',
	'no signature: 404, as to no table');
is(request('POST', '/public/signed', $body, "X-Signature: sha256=" . hmac_sha256_hex($body, 'guess')),
	'403 the signature in header "X-Signature" does not match the body', 'a wrong signature: 403');
is(request('POST', '/public/signed', '{"id": "s2"}', "X-Signature: sha256=$hex"),
	'403 the signature in header "X-Signature" does not match the body', 'a signature of another body: 403');
is(request('POST', '/public/signed', $body, "X-Signature: $hex"),
	'403 the signature in header "X-Signature" does not begin with "sha256="', 'without the prefix: 403');
is(request('POST', '/public/signed', $body, "X-Signature: sha256=zz"),
	'403 the signature in header "X-Signature" does not match the body', 'not hex: 403');
is(sql(q{SELECT count(*) FROM signed}), '0', 'refused requests wrote nothing');
is(request('POST', '/public/signed', $body, "x-signature: sha256=$hex"), '200 1 row',
	'the right signature (the header in any case): 200');
my $b64 = encode_base64(hmac_sha256('{"id": "s3"}', 'whsec-3141'), '');
is(request('POST', '/public/signed64', '{"id": "s3"}', "X-Hub-Signature: $b64"), '200 1 row',
	'base64 signatures');
is(request('POST', '/public/signed64', '{"id": "s4"}', "X-Hub-Signature: $b64"),
	'403 the signature in header "X-Hub-Signature" does not match the body', 'checked too');
is(sql(q{SELECT string_agg(id, ',') FROM (SELECT id FROM signed UNION ALL SELECT id FROM signed64) t}),
	's1,s3', 'only the signed requests are in');
unlike(substr(slurp_file($node->logfile), $signed_from), qr/whsec-3141/,
	'the server logs nothing of the secret');

# named schemes (signature_scheme): Stripe's "t=<ts>,v1=<hex>" of
# "<ts>.<body>", refused 401 outside the replay window (5 min), 400 when
# malformed or repeated; either of secret and previous_secret is taken.
# Standard Webhooks with the svix- header names, with the base64 key after
# whsec_ (a server of its own, for a mapping of its own).
sql(q{CREATE FOREIGN TABLE stripe (id text) SERVER hooks OPTIONS (format 'json', signature_scheme 'stripe');
	CREATE SERVER hooks_std FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks_std
	  OPTIONS (secret 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
	CREATE FOREIGN TABLE svix (id text) SERVER hooks_std OPTIONS (format 'json', signature_scheme 'standard')});
sub stripe_sig
{
	my ($t, $b, $secret) = @_;
	return "Stripe-Signature: t=$t,v1=" . hmac_sha256_hex("$t.$b", $secret);
}
my $now = time();
is(request('POST', '/public/stripe', '{"id": "e1"}', stripe_sig($now, '{"id": "e1"}', 'whsec-3141')),
	'200 1 row', 'stripe: a signed request: 200');
is(request('POST', '/public/stripe', '{"id": "e2"}', stripe_sig($now - 400, '{"id": "e2"}', 'whsec-3141')),
	'401 the timestamp of the request\'s stripe signature is outside the window of signature_tolerance',
	'stripe: an old one: 401');
is(request('POST', '/public/stripe', '{"id": "e3"}', stripe_sig($now + 400, '{"id": "e3"}', 'whsec-3141')),
	'401 the timestamp of the request\'s stripe signature is outside the window of signature_tolerance',
	'stripe: one from the future: 401');
is(request('POST', '/public/stripe', '{"id": "e4"}', stripe_sig($now, '{"id": "e4"}', 'guess')),
	'403 the request\'s stripe signature does not match', 'stripe: a wrong secret: 403');
is(request('POST', '/public/stripe', '{"id": "e5"}', "Stripe-Signature: t=soon,v1=00"),
	'400 the request\'s stripe signature headers cannot be read', 'stripe: a malformed header: 400');
is(request('POST', '/public/stripe', '{"id": "e6"}', stripe_sig($now, '{"id": "e6"}', 'whsec-3141'),
		stripe_sig($now, '{"id": "e6"}', 'whsec-3141')),
	'400 a header of the request\'s stripe signature came more than once', 'stripe: a repeated header: 400');
is(request('POST', '/public/stripe', '{"id": "e7"}'), '404 no webhook source table at this address',
	'stripe: no signature: 404, as to no table');
sql(q{ALTER USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (ADD previous_secret 'whsec-2718')});
is(request('POST', '/public/stripe', '{"id": "e8"}', stripe_sig($now, '{"id": "e8"}', 'whsec-2718')),
	'200 1 row', 'stripe: signed with previous_secret: 200');
sql(q{ALTER USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (DROP previous_secret)});
{
	my $t = time();
	my $b = '{"id": "x1"}';
	my $sig = encode_base64(hmac_sha256("msg_1.$t.$b", decode_base64('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw')), '');
	is(request('POST', '/public/svix', $b, 'svix-id: msg_1', "svix-timestamp: $t", "svix-signature: v1,$sig"),
		'200 1 row', 'standard with the svix- names: 200');
	is(request('POST', '/public/svix', $b, 'svix-id: msg_2', "svix-timestamp: $t", "svix-signature: v1,$sig"),
		'403 the request\'s standard signature does not match', 'standard: another id: 403');
}
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM (SELECT id FROM stripe UNION ALL SELECT id FROM svix) t}),
	'e1,e8,x1', 'only the signed requests in the window are in');
sql(q{DROP SERVER hooks_std CASCADE});

# what a table takes: its max_body_bytes, and content types its format can
# take (none given is taken)
sql(q{CREATE FOREIGN TABLE small (v text) SERVER hooks OPTIONS (format 'text', max_body_bytes '16')});
is(request('POST', '/public/small', 'x' x 17, 'Content-Type: text/plain'),
	'413 the body is larger than this table takes', 'over max_body_bytes: 413');
is(request('POST', '/public/small', 'x' x 16, 'Content-Type: text/plain'), '200 1 row', 'up to it: 200');
is(request('POST', '/public/pay', '{"id": "t1"}', 'Content-Type: image/png'),
	'415 this table cannot take content type "image/png"', 'json and an image: 415');
is(request('POST', '/public/pay', '{"id": "t2"}', 'Content-Type: application/x-www-form-urlencoded'),
	'415 this table cannot take content type "application/x-www-form-urlencoded"',
	'json and a form: 415');
is(request('POST', '/public/pay', qq({"id": "t3"}\n{"id": "t4"}), 'Content-Type: application/x-ndjson'),
	'200 2 rows', 'json and NDJSON: 200');
is(request('POST', '/public/raw', 'x', 'Content-Type: image/png'), '200 1 row', 'bytes take anything');
{
	my ($o) = run_command([ 'curl', '-s', '-w', ' %{http_code}', '--data-binary', '{"id": "t5"}',
		'-H', 'Content-Type:', "$base/public/pay" ]);
	is($o, "1 row\n 200", 'no content type: taken');
}
is(request('POST', '/public/pay', '{"id": "t6"}', 'Content-Type: '), '200 1 row', 'an empty content type: taken');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM pay WHERE id LIKE 't%'}), 't3,t4,t5,t6',
	'refused requests wrote nothing');

# more requests in flight than the server takes: 429, and nothing written.
# The first request holds the worker until the test lets it go: 63 more
# queue behind it, and the rest are answered 429 at once.
sql(q{CREATE TABLE go (ok bool);
	CREATE FUNCTION public.held() RETURNS text LANGUAGE plpgsql AS $$
	BEGIN
		WHILE NOT EXISTS (SELECT FROM public.go) LOOP PERFORM pg_catalog.pg_sleep(0.01); END LOOP;
		RETURN 'let go';
	END $$;
	CREATE FOREIGN TABLE slow (id int, w text DEFAULT public.held()) SERVER hooks OPTIONS (format 'json')});
my $answers = PostgreSQL::Test::Utils::tempdir();
sub post_slow
{
	my ($i) = @_;
	return IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
		'-H', 'Content-Type: application/json', '--data-binary', qq({"id": $i}), "$base/public/slow" ],
		'>', "$answers/$i");
}
sub answered
{
	my ($code) = @_;
	return scalar grep { -s "$answers/$_" && slurp_file("$answers/$_") eq $code } 1 .. 100;
}
my @slow = (post_slow(1));
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'}),
	'the first request holds the worker');
push @slow, post_slow($_) for 2 .. 100;
# the refused are answered at once, while the others wait for the worker
for (1 .. 1200)
{
	last if answered('429') >= 36;
	usleep(50_000);
}
is(answered('429'), 36, 'past 64 in flight: 429 at once');
is(answered('200'), 0, 'while the 64 in flight wait');
sql(q{INSERT INTO go VALUES (true)});
$_->finish for @slow;
is(answered('200'), 64, 'once let go, the 64 in flight: 200');
is(answered('429'), 36, 'and the others were refused');
is(sql(q{SELECT count(*) FROM slow}), '64', 'one row for each 200, none for a 429');

# what clients are told: about their data, and nothing of the server's
sql(q{CREATE FUNCTION public.gone() RETURNS int LANGUAGE sql AS 'SELECT 1';
	CREATE FOREIGN TABLE chk (n int CHECK (n > 0), who text DEFAULT current_user,
	  dir text DEFAULT current_setting('data_directory')) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE broken (n int, m int DEFAULT public.gone()) SERVER hooks OPTIONS (format 'json');
	DROP FUNCTION public.gone() CASCADE});
my $answer = request('POST', '/public/chk', '{"n": -1}');
like($answer, qr/^400 new row for relation .* violates check constraint/, 'a CHECK that fails: 400');
unlike($answer, qr/Failing row|data|sw_test|postgres/i, 'without the row\'s other values');
like(request('POST', '/public/pay', ''), qr/^400 the body is empty/, 'an empty json body: 400');

# the server's own failures: a generic 500, the reason in the server log
sql(q{CREATE FUNCTION public.fails() RETURNS int LANGUAGE plpgsql AS $$
	BEGIN RAISE EXCEPTION 'secret reason' USING ERRCODE = 'feature_not_supported'; END $$;
	CREATE FOREIGN TABLE failing (n int CHECK (public.fails() > 0)) SERVER hooks OPTIONS (format 'json')});
is(request('POST', '/public/failing', '{"n": 1}'),
	'500 the server failed to write the request; its log says why', 'an error of the server: 500, nothing more');
like(slurp_file($node->logfile), qr/request to \/postgres\/public\/failing refused with status 500: secret reason/,
	'the log names the table, the status and the reason');

# 413 at once, from Content-Length
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "connect: $!";
	print $sock "POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n";
	my $line = <$sock>;
	like($line, qr{^HTTP/1\.1 413 }, 'a body announced over 64 MB: 413 before it is sent');
	close $sock;
}

# settings of the database do not reach the worker
my $worker = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
sql(q{ALTER DATABASE postgres SET source_writes.as_of = '1'});
sql(q{ALTER DATABASE postgres SET default_transaction_read_only = on});
sql("SELECT pg_terminate_backend($worker)");
ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND pid <> $worker}), 'the worker is started again');
ok($node->poll_query_until('postgres', q{SELECT 1}, '1'), 'the server answers');
my $posted;
for (1 .. 100)
{
	$posted = request('POST', '/public/notes2', 'with database settings');
	last if $posted !~ /^(503|000)/;
	usleep(100_000);
}
is($posted, '200 1 row', 'ALTER DATABASE ... SET as_of or read only does not stop it');
$node->safe_psql('postgres', q{SET default_transaction_read_only = off; ALTER DATABASE postgres RESET ALL});

# a reload after the database's catalog entry changed
my $from = -s $node->logfile;
sql(q{ALTER DATABASE postgres CONNECTION LIMIT 50});
is(request('POST', '/x', 'x'), $not_found, 'a malformed path: 404');
sql(q{SELECT pg_reload_conf()});
is(request('POST', '/public/notes2', 'after reload'), '200 1 row', 'after a reload it still writes');
unlike(substr(slurp_file($node->logfile), $from), qr/terminated by signal/, 'and nothing crashed');

# a launcher that restarts does not start a second server
$worker = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
my $launcher = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'});
$from = -s $node->logfile;
sql("SELECT pg_terminate_backend($launcher)");
ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes launcher' AND pid <> $launcher}), 'the launcher is back');
# the new launcher supervises every second: watch a few of its rounds
for (1 .. 3)
{
	usleep(1_000_000);
	is(sql(q{SELECT string_agg(pid::text, ',') FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server'}), $worker, 'the same single webhook server');
}
unlike(substr(slurp_file($node->logfile), $from), qr/webhook server cannot start/, 'no second one tried to listen');

# the server leaves with the last webhook source
sql(q{DROP SERVER hooks CASCADE});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 0 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server'}), 'the server stops with the last webhook source');

done_testing();
