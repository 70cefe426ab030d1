# The webhook server against what HTTP clients may do: a table's
# max_body_bytes answered 413 before the body is read (the client never
# sends it), malformed requests, oversized headers, slow clients, idle
# connections, clients that leave mid-body or while their request is
# written, and a shutdown while requests wait.  After each, the same worker
# still serves, a normal post gets 200, and the broken requests wrote
# nothing.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use IO::Select;
use IO::Socket::INET;
use Time::HiRes qw(time usleep);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
# (requests here hold the worker on purpose: no time limit; and the log is
# read for refusals after the first of a table each minute, at DEBUG1)
my $node = SwTest::node('webhook_http', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "source_writes.webhook_request_timeout = 0\nlog_min_messages = debug1\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

$SIG{PIPE} = 'IGNORE';		# writes to connections the server closed fail

# POST with curl: "status body", the body without its newline
sub post
{
	my ($path, $body, @headers) = @_;
	my @cmd = ('curl', '-s', '-o', '-', '-w', ' %{http_code}', "$base$path",
		'--data-binary', $body);
	push @headers, 'Content-Type: application/json' unless grep { /^content-type:/i } @headers;
	push @cmd, map { ('-H', $_) } @headers;
	my ($out) = run_command(\@cmd);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sub connect_server
{
	my $sock = IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port, Proto => 'tcp')
	  or die "cannot connect to the webhook server: $!";
	return $sock;
}

# write all of $data unless the server closes the connection first (or
# $timeout passes); returns how many bytes went
sub send_bytes
{
	my ($sock, $data, $timeout) = @_;
	my $sel = IO::Select->new($sock);
	my $deadline = time + ($timeout // 10);
	my $sent = 0;
	while ($sent < length $data && time < $deadline)
	{
		next unless $sel->can_write($deadline - time);
		my $n = syswrite($sock, $data, 65536, $sent);
		last unless defined $n;
		$sent += $n;
	}
	return $sent;
}

# What the server answers on a connection within $timeout seconds: (the
# answer as "status body", the body without its newline, or '' if none;
# whether the server closed the connection)
sub answer_of
{
	my ($sock, $timeout) = @_;
	my $sel = IO::Select->new($sock);
	my $deadline = time + ($timeout // 10);
	my $buf = '';
	my $closed = 0;
	while (time < $deadline)
	{
		last unless $sel->can_read($deadline - time);
		my $n = sysread($sock, $buf, 65536, length $buf);
		if (!$n)
		{
			$closed = 1;
			last;
		}
		if ($buf =~ /^(.*?\r\n)\r\n/s)
		{
			my ($head, $start) = ($1, length($1) + 2);
			my ($len) = $head =~ /^Content-Length: *(\d+)\r$/mi;
			last if defined $len && length($buf) - $start >= $len;
		}
	}
	return ('', $closed) unless $buf =~ m{^HTTP/1\.\d (\d+) [^\r]*\r\n.*?\r\n\r\n(.*)$}s;
	my ($status, $body) = ($1, $2);
	$body =~ s/\n$//;
	return ("$status $body", $closed);
}

# send raw bytes on a new connection: what the server answers
sub raw
{
	my ($data, $timeout) = @_;
	my $sock = connect_server();
	send_bytes($sock, $data);
	my ($answer) = answer_of($sock, $timeout);
	close $sock;
	return $answer;
}

sub worker_pid
{
	return sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});
}

my $ok_posts = 0;

# after an attack: the same worker serves, a post gets 200, and no row of
# a broken request (ids beginning with "bad") is anywhere
sub still_serving
{
	my ($what, $pid) = @_;
	$ok_posts++;
	is(worker_pid(), $pid, "$what: the same worker serves");
	is(post('/public/pay', qq({"id": "ok$ok_posts"})), '200 1 row', "$what: a post gets 200");
	is(sql(q{SELECT (SELECT count(*) FROM pay WHERE id LIKE 'bad%') +
		(SELECT count(*) FROM small WHERE v LIKE 'bad%')}), '0', "$what: the broken requests wrote nothing");
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id text) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE small (v text) SERVER hooks OPTIONS (format 'text', max_body_bytes '100');
	CREATE FOREIGN TABLE sleepy (id int, w text DEFAULT pg_catalog.pg_sleep(1)::text)
	  SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE sleepier (id int, w text DEFAULT pg_catalog.pg_sleep(30)::text)
	  SERVER hooks OPTIONS (format 'json');
	CREATE TABLE plain (v text)});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
my $pid = worker_pid();
my $not_found = '404 no webhook source table at this address';
my $too_large = '413 the body is larger than this table takes';

# ---------------------------------------------------------------------
# max_body_bytes: 413 before the body is read

my $head = "POST /postgres/public/small HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n";
is(raw("${head}Content-Length: 10000000\r\n\r\n"), $too_large,
	'10 MB announced to a table that takes 100 bytes: 413, though the client sent none of it');
is(raw("${head}Content-Length: 101\r\n\r\n"), $too_large, 'one byte over: 413 before the body');
like(slurp_file($node->logfile),
	qr{request to /postgres/public/small refused with status 413\n.*DETAIL:  The body announced is over the table's max_body_bytes; it was not read\.}m,
	'the server log names the table and the status');
is(raw("${head}Content-Length: 100\r\n\r\n" . ('x' x 100)), '200 1 row', 'up to the limit: 200');
{
	# with Expect: 100-continue curl waits for the server's word before it sends
	my $file = PostgreSQL::Test::Utils::tempdir() . '/big';
	open(my $fh, '>', $file) or die;
	print $fh 'bad' x 3_000_000;
	close $fh;
	my ($out) = run_command([ 'curl', '-s', '-o', '-', '-w', ' %{http_code} %{size_upload}',
		'-H', 'Content-Type: text/plain', '-H', 'Expect: 100-continue', '--expect100-timeout', '60',
		'--data-binary', "\@$file", "$base/public/small" ]);
	is($out, "the body is larger than this table takes\n 413 0",
		'curl with 9 MB and Expect: 100-continue: 413, and it uploaded nothing');
}
is(raw("POST /postgres/public/small HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
	  . "Transfer-Encoding: chunked\r\n\r\n32\r\n" . ('x' x 50) . "\r\n0\r\n\r\n"), '200 1 row',
	'a chunked body under the limit: 200');
{
	# a chunked body going over: the connection is closed as it does, before
	# the body ends (no answer can be sent in the middle of a body)
	my $sock = connect_server();
	my $t0 = time;
	send_bytes($sock, "POST /postgres/public/small HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\n"
		  . "Transfer-Encoding: chunked\r\n\r\n32\r\n" . ('b' x 50) . "\r\nc8\r\n" . ('b' x 200) . "\r\n");
	my ($answer, $closed) = answer_of($sock, 20);
	ok($closed && $answer eq '', 'a chunked body that goes over: the connection is closed, with no 200');
	cmp_ok(time - $t0, '<', 10, 'at once, while the client has not ended its body');
	close $sock;
}
like(slurp_file($node->logfile),
	qr{DETAIL:  The body, of unknown length, grew over the table's max_body_bytes; its connection was closed\.}m,
	'the server log says so');

# what is not a webhook source: the same 404 as ever, before the body too
is(raw("POST /postgres/public/nope HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n"), $not_found,
	'a body announced to a table that does not exist: 404 without it');
is(raw("POST /postgres/public/plain HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n"), $not_found,
	'to a plain table: the same 404');
is(raw("POST /postgres/public/plain HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"), $not_found,
	'a chunked body to a plain table: the same 404');
is(post('/public/nope', '{"id": "bad"}'), $not_found, 'with curl, a table that does not exist: 404');
is(post('/public/plain', '{"id": "bad"}'), $not_found, 'a plain table: the same');
is(post('/public/sm%61ll', 'bad' x 40, 'Content-Type: text/plain'), $too_large,
	'a table\'s address percent-encoded otherwise: its limit too');

# the server's map of limits may be stale: it never refuses from it alone
sql(q{ALTER FOREIGN TABLE small OPTIONS (SET max_body_bytes '1000')});
is(raw("${head}Content-Length: 500\r\n\r\n" . ('y' x 500)), '200 1 row',
	'a limit raised just now: the body it takes is read and written');
is(raw("${head}Transfer-Encoding: chunked\r\n\r\n32\r\n" . ('z' x 50) . "\r\n1c2\r\n" . ('z' x 450)
	  . "\r\n0\r\n\r\n"), '200 1 row', 'also a chunked one');
sql(q{ALTER FOREIGN TABLE small OPTIONS (SET max_body_bytes '100')});
is(raw("${head}Content-Length: 500\r\n\r\n" . ('bad' x 166) . 'xx'), $too_large,
	'a limit lowered just now: 413');
sql(q{CREATE FOREIGN TABLE fresh (v text) SERVER hooks OPTIONS (format 'text', max_body_bytes '10')});
is(raw("POST /postgres/public/fresh HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"),
	'200 1 row', 'a table made just now: its posts are written');
is(raw("POST /postgres/public/fresh HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"), $too_large,
	'and its limit holds');
sql(q{ALTER FOREIGN TABLE fresh RENAME TO fresher});
is(raw("POST /postgres/public/fresh HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n0123456789"),
	$not_found, 'renamed just now: not at its old address');
is(raw("POST /postgres/public/fresher HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n"), $too_large,
	'its limit at its new one');
is(sql(q{SELECT string_agg(length(v)::text, ',' ORDER BY length(v)) FROM small}), '50,100,500,500',
	'the posts over the limit wrote nothing, those under it are there');
is(sql(q{SELECT v FROM fresher}), '0123456789', 'the new table has its row');
still_serving('over the limits', $pid);

# ---------------------------------------------------------------------
# malformed HTTP: libmicrohttpd answers or closes, nothing is written

my $body = '{"id": "bad"}';
my $len = length $body;
my %malformed = (
	'a garbage request line' => ["\x01\x02\x03 garbage\r\n\r\n", qr/^(400 .*|)$/],
	'a request line without a path' => ["POST\r\nContent-Length: $len\r\n\r\n$body", qr/^(400 .*|)$/],
	'an HTTP/0.9 request' => ["POST /postgres/public/pay\r\n\r\n$body", qr/^(400 .*|505 .*|)$/],
	'HTTP/2.0 in the request line' => ["POST /postgres/public/pay HTTP/2.0\r\nContent-Length: $len\r\n\r\n$body",
		qr/^(505 .*|)$/],
	'a Content-Length that is no number' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n$body", qr/^400 /],
	'a negative Content-Length' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n$body", qr/^400 /],
	'a Content-Length over 2^64' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n$body",
		qr/^413 /],
	'two different Content-Lengths' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: $len\r\n\r\n$body",
		qr/^(400 .*|)$/],
	'a chunk size that is no number' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n$body\r\n0\r\n\r\n",
		qr/^400 /],
	'a chunk longer than it says' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n$body\r\n0\r\n\r\n",
		qr/^400 /],
	'a chunk size over 2^64' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nfffffffffffffffffffff\r\n$body\r\n0\r\n\r\n",
		qr/^413 /],
	# libmicrohttpd 0.9 reads the path and header values up to a NUL: the
	# request is taken as cut there (counted below), or refused
	'a NUL in the request line' => [
		"POST /postgres/public/pay\0bad HTTP/1.1\r\nHost: x\r\nContent-Length: 14\r\n\r\n{\"id\": \"nul1\"}",
		qr/^(400 .*|200 1 row)$/],
	'a NUL in a header' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nX-A: a\0b\r\nContent-Length: 14\r\n\r\n{\"id\": \"nul2\"}",
		qr/^(400 .*|200 1 row)$/],
	'a NUL in the body' => ["POST /postgres/public/small HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\nbad\0bad",
		qr/^400 invalid byte sequence/],
	'a header line without a colon' => [
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nno colon here\r\nContent-Length: $len\r\n\r\n$body",
		qr/^400 /],
	'a header line of spaces before the headers end' => [
		"POST /postgres/public/pay HTTP/1.1\r\n \r\nContent-Length: $len\r\n\r\n$body", qr/^(400 .*|)$/],
	'bare LF line ends and a body shorter than announced, then EOF' => [
		"POST /postgres/public/pay HTTP/1.1\nHost: x\nContent-Length: 100\n\n$body", qr/^$/],
);
my $taken = 0;
for my $what (sort keys %malformed)
{
	my ($data, $expected) = @{ $malformed{$what} };
	my $sock = connect_server();
	send_bytes($sock, $data);
	shutdown($sock, 1) if $what =~ /EOF/;
	my ($answer, $closed) = answer_of($sock, 10);
	close $sock;
	note("$what: " . ($answer eq '' ? 'closed, no answer' : $answer));
	like($answer, $expected, "$what: " . ($answer eq '' ? 'closed, no answer' : substr($answer, 0, 3)));
	$taken++ if $answer eq '200 1 row';
}
is(sql(q{SELECT count(*) FROM pay WHERE id IN ('nul1', 'nul2')}), $taken,
	'a request with a NUL has a row only if it was answered 200');
still_serving('malformed requests', $pid);

# ---------------------------------------------------------------------
# oversized headers: libmicrohttpd keeps a request's line and headers in
# 32 kB of its own and answers 431 (414 for the request line) beyond

is(substr(raw("POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nX-Big: " . ('a' x 1_000_000)
	  . "\r\nContent-Length: $len\r\n\r\n$body"), 0, 4), '431 ', 'a 1 MB header: 431');
is(substr(raw("POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\n" . join('', map { "X-H$_: v\r\n" } 1 .. 10000)
	  . "Content-Length: $len\r\n\r\n$body"), 0, 4), '431 ', '10,000 headers: 431');
is(substr(raw("POST /postgres/public/" . ('p' x 100_000) . " HTTP/1.1\r\nHost: x\r\nContent-Length: $len\r\n\r\n$body"),
	0, 4), '414 ', 'a request line of 100 kB: 414');
is(post('/public/pay', '{"id": "many"}', map { "X-H$_: v" } 1 .. 300), '200 1 row',
	'300 small headers fit: 200');
is(post('/public/pay', '{"id": "long"}', 'X-Long: ' . ('a' x 16_000)), '200 1 row',
	'a 16 kB header fits: 200');
still_serving('oversized headers', $pid);

# ---------------------------------------------------------------------
# slow clients: 8 connections send their posts a byte at a time while
# other clients' posts are answered at once

{
	my @slow = map { connect_server() } 1 .. 8;
	my @requests = map {
		my $b = qq({"id": "drip$_"});
		"POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		  . "Content-Length: " . length($b) . "\r\n\r\n$b"
	} 1 .. 8;
	my $longest = 0;
	my @answers;
	my $max_latency = 0;
	my $fast_ok = 0;
	$longest = length($_) > $longest ? length($_) : $longest for @requests;
	for my $at (0 .. $longest - 1)
	{
		for my $i (0 .. 7)
		{
			send_bytes($slow[$i], substr($requests[$i], $at, 1)) if $at < length $requests[$i];
		}
		usleep(10_000);			# the clients' pace
		if ($at % 10 == 5)
		{
			my $t0 = time;
			$fast_ok++ if post('/public/pay', qq({"id": "fast$at"})) eq '200 1 row';
			my $latency = time - $t0;
			$max_latency = $latency if $latency > $max_latency;
		}
	}
	my $fast = int(($longest - 6) / 10) + 1;
	is($fast_ok, $fast, "$fast posts while 8 clients dribble theirs: all 200");
	note("slowest of them: ${max_latency}s");
	cmp_ok($max_latency, '<', 2, 'each answered at once');
	@answers = map { (answer_of($_, 30))[0] } @slow;
	close $_ for @slow;
	is(join(',', @answers), join(',', ('200 1 row') x 8), 'the dribbled posts, once complete: 200 each');
	is(sql(q{SELECT count(*), count(DISTINCT id) FROM pay WHERE id LIKE 'drip%'}), '8|8', 'and written once');
}
still_serving('slow clients', $pid);

# ---------------------------------------------------------------------
# idle connections: 100 open sockets and 10 with half a request line

{
	my $opened = time;
	my @idle = map { connect_server() } 1 .. 100;
	my @half = map { my $s = connect_server(); send_bytes($s, "POST /postgres/pu"); $s } 1 .. 10;
	my $ok = 0;
	for my $i (1 .. 10)
	{
		$ok++ if post('/public/pay', qq({"id": "idle$i"})) eq '200 1 row';
	}
	is($ok, 10, 'with 110 idle connections open, 10 posts: 200 each');
	my ($answer, $closed) = answer_of($idle[0], 0.2);
	ok(!$closed, 'the idle connections are kept (for 5 s)');

	# past 128 from one address, a new connection closes the one of the
	# address that has waited longest (a reverse proxy is not locked out)
	push @idle, map { connect_server() } 1 .. 18;
	is(post('/public/pay', '{"id": "the-129th"}'), '200 1 row', 'a 129th connection from the address: 200');
	($answer, $closed) = answer_of($idle[0], 1);
	my $after = time - $opened;
	ok($closed && $answer eq '' && $after < 4.5,
		'and the one that waited longest is closed for it, unanswered (before its 5 s)');
	note("closed after ${after}s");
	($answer, $closed) = answer_of($idle[1], 0.2);
	ok(!$closed, 'the others are kept');
	close $_ for @idle, @half;
	my $posted;
	for (1 .. 100)
	{
		$posted = post('/public/pay', '{"id": "after-idle"}');
		last unless $posted =~ /^000/;
		usleep(100_000);
	}
	is($posted, '200 1 row', 'once they are closed, posts are taken again');
}
still_serving('idle connections', $pid);

# ---------------------------------------------------------------------
# clients that leave: in the middle of a body, while their table's limit
# is looked at, and while their request is written

for my $i (1 .. 20)
{
	my $sock = connect_server();
	send_bytes($sock, "POST /postgres/public/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 200\r\n\r\n"
		  . qq({"id": "bad$i", "pad": ") . ('x' x 50));
	close $sock;
	$sock = connect_server();
	send_bytes($sock, "POST /postgres/public/small HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
		  . "a\r\nbad$i");
	close $sock;
}
still_serving('clients leaving mid-body', $pid);

{
	# a post to sleepy keeps the worker busy for a second: requests that come
	# meanwhile wait, and their clients leave
	my $out = '';
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}', '-H',
		'Content-Type: application/json', '--data-binary', '{"id": 0}', "$base/public/sleepy" ], '>', \$out);
	ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE pid = $pid AND state = 'active'}), 'the worker writes a slow request');
	my @leaving;
	for my $i (1 .. 3)
	{
		# complete requests, written while their clients are gone
		my $b = qq({"id": $i});
		my $s = connect_server();
		send_bytes($s, "POST /postgres/public/sleepy HTTP/1.1\r\nHost: x\r\nContent-Length: "
			  . length($b) . "\r\n\r\n$b");
		push @leaving, $s;
		# headers waiting for a look at their limit
		$s = connect_server();
		send_bytes($s, "${head}Content-Length: 5000\r\n\r\n");
		push @leaving, $s;
		$s = connect_server();
		send_bytes($s, "POST /postgres/public/nope HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n");
		push @leaving, $s;
	}
	# the server's thread has read them once it answers this one
	is(raw("GET /postgres/public/pay HTTP/1.1\r\nHost: x\r\n\r\n"), '405 only POST is allowed',
		'the server reads on meanwhile');
	close $_ for @leaving;
	$h->finish;
	is($out, '200', 'the slow request: 200');
	ok($node->poll_query_until('postgres', q{SELECT count(*) = 4 FROM sleepy}),
		'the complete requests whose clients left are written');
	is(sql(q{SELECT count(DISTINCT id) FROM sleepy}), '4', 'each once');
}
still_serving('clients leaving while they wait', $pid);

# ---------------------------------------------------------------------
# a shutdown while requests wait: 503 for those written and those
# waiting for a look at their limit, and nothing left suspended

{
	my $out = '';
	my $from = -s $node->logfile;
	my $h = IPC::Run::start([ 'curl', '-s', '-o', '-', '-w', ' %{http_code}', '-H',
		'Content-Type: application/json', '--data-binary', '{"id": 100}', "$base/public/sleepier" ], '>', \$out);
	ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE pid = $pid AND state = 'active'}), 'the worker writes a slow request');
	my $waiting = connect_server();
	send_bytes($waiting, "${head}Content-Length: 5000\r\n\r\n");
	is(raw("GET /postgres/public/pay HTTP/1.1\r\nHost: x\r\n\r\n"), '405 only POST is allowed',
		'(the server has read it)');
	sql("SELECT pg_terminate_backend($pid)");
	my ($answer) = answer_of($waiting, 30);
	is($answer, '503 the server is shutting down', 'headers waiting for a look at their limit: 503');
	close $waiting;
	$h->finish;
	$out =~ s/\n//;
	is($out, 'the server is shutting down 503', 'the request being written: 503');
	is(sql(q{SELECT count(*) FROM sleepier}), '0', 'and not written');
	ok($node->poll_query_until('postgres', qq{SELECT count(*) = 1 FROM pg_stat_activity
		WHERE backend_type = 'source_writes webhook server' AND pid <> $pid}), 'the worker is started again');
	$pid = worker_pid();
	my $posted = '';
	for (1 .. 100)
	{
		$posted = post('/public/pay', '{"id": "after"}');
		last if $posted !~ /^(503|000)/;
		usleep(100_000);
	}
	is($posted, '200 1 row', 'and serves');
	unlike(substr(slurp_file($node->logfile), $from), qr/terminated by signal|PANIC|suspended connections/,
		'nothing crashed');
}
still_serving('a shutdown', $pid);

# ---------------------------------------------------------------------
# in-flight accounting: after all of it, 60 requests at once, more than
# one group, are taken (each would be 429 past 64 in flight)

{
	sql(q{CREATE FOREIGN TABLE paced (id int, w text DEFAULT pg_catalog.pg_sleep(0.02)::text)
		SERVER hooks OPTIONS (format 'json')});
	my @clients;
	for my $i (1 .. 60)
	{
		my $o = '';
		push @clients, [ IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
			'-H', 'Content-Type: application/json', '--data-binary', qq({"id": $i}), "$base/public/paced" ],
			'>', \$o), \$o ];
	}
	my %codes;
	for my $c (@clients)
	{
		$c->[0]->finish;
		$codes{ ${ $c->[1] } }++;
	}
	note('60 requests at once: ' . join(', ', map { "$_: $codes{$_}" } sort keys %codes));
	is($codes{200} // 0, 60, '60 requests at once: 200 each, no 429');
	is(sql(q{SELECT count(*) FROM paced}), '60', 'all written');
}
still_serving('the end', $pid);
unlike(slurp_file($node->logfile), qr/terminated by signal|PANIC/, 'nothing crashed');

done_testing();
