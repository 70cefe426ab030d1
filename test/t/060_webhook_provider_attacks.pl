# Webhook signature schemes under attack and under stress, as an outside
# review found them: an unsigned client must not tell a signed table from
# no table, whatever it sends (a content type, a coding or a body size that
# the table refuses); a body nested deeper than the stack allows is the
# client's fault (400) where the idempotency field or a handshake is read
# from it, as where the format reads it; the same delivery sent twice at
# once writes one row; deliveries retried across a kill -9 of the worker
# are each written exactly once.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256 hmac_sha256_hex);
use MIME::Base64 qw(encode_base64 decode_base64);
use HTTP::Tiny;
use IPC::Run;
use Time::HiRes qw(usleep);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('attacks',
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\nrestart_after_crash = on\n");
my $base = "http://127.0.0.1:$port";

sub sql { my ($q, $db) = @_; return $node->safe_psql($db // 'postgres', $q); }

# a request: "status content-type body", exactly as answered
sub call
{
	my ($method, $path, $body, @headers) = @_;
	my $http = HTTP::Tiny->new(timeout => 60);
	my %h = map { my ($n, $v) = split /:\s*/, $_, 2; ($n => $v) } @headers;
	$h{'Content-Type'} //= 'application/json' if defined $body;
	my $res = $http->request($method, "$base$path",
		{ headers => \%h, (defined $body ? (content => $body) : ()) });
	return "$res->{status} " . ($res->{headers}{'content-type'} // '') . " $res->{content}";
}

my $secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
my $key = decode_base64('MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw');
sql(qq{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret '$secret');
	CREATE FOREIGN TABLE std (id text) SERVER hooks
	  OPTIONS (signature_scheme 'standard', max_body_bytes '1kB');
	CREATE FOREIGN TABLE gh (id text) SERVER hooks
	  OPTIONS (signature_scheme 'github', max_body_bytes '1kB');
	CREATE FOREIGN TABLE stripe (id text) SERVER hooks
	  OPTIONS (signature_scheme 'stripe', idempotency_field 'id');
	CREATE FOREIGN TABLE slack (event_id text) SERVER hooks
	  OPTIONS (signature_scheme 'slack');
	CREATE FOREIGN TABLE seq (id text, n int) SERVER hooks OPTIONS (signature_scheme 'github')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/), 'the server listens');
ok($node->poll_query_until('postgres',
	q{SELECT count(*) = 5 FROM source_writes.sources WHERE state = 'listening'}), 'all tables served');

#
# 1. an unsigned request to a signed table is answered as one to no table,
#    whatever else is wrong with it
#
my @unsigned = (
	[ 'a content type the table cannot take', 'x', 'Content-Type: text/xml' ],
	[ 'a coding the server cannot decode', '{}', 'Content-Encoding: br' ],
	[ 'a body that is not what its coding says', 'xx', 'Content-Encoding: gzip' ],
	[ 'a body over max_body_bytes', '{"id": "' . ('a' x 5000) . '"}' ],
	[ 'a well-formed body', '{"id": "x"}' ],
	[ 'a body with the id and timestamp but no signature', '{"id": "x"}',
	  'webhook-id: msg_1', 'webhook-timestamp: ' . time ],
);
for my $table ('std', 'gh')
{
	for my $u (@unsigned)
	{
		my ($what, $body, @headers) = @$u;
		is(call('POST', "/postgres/public/$table", $body, @headers),
			call('POST', '/postgres/public/nothing', $body, @headers),
			"$table, unsigned, $what: the same answer as to no table");
	}
}
is(sql(q{SELECT count(*) FROM std}), '0', 'nothing written');

#
# 2. nested deeper than the stack allows, where the idempotency field or
#    a handshake is looked for: 400, the body's fault
#
my $now = time;
my $deep = '{"id": "d1", "event_id": "d1", "a": ' . ('[' x 200_000) . (']' x 200_000) . '}';
like(call('POST', '/postgres/public/stripe', $deep,
	"Stripe-Signature: t=$now,v1=" . hmac_sha256_hex("$now.$deep", $secret)),
	qr/^400 text\/plain; charset=utf-8 stack depth limit exceeded/,
	'stripe, idempotency_field: a body nested too deeply is a 400');
like(call('POST', '/postgres/public/slack', $deep, "X-Slack-Request-Timestamp: $now",
	'X-Slack-Signature: v0=' . hmac_sha256_hex("v0:$now:$deep", $secret)),
	qr/^400 text\/plain; charset=utf-8 stack depth limit exceeded/,
	'slack, where url_verification is looked for: a 400 too');
unlike(slurp_file($node->logfile), qr/refused with status 500/, 'no 500 in the log');

#
# 3. the same delivery sent several times at once, with the scheme's own
#    delivery header as the key: all 200, one row
#
sub github
{
	my ($body, $delivery) = @_;
	return ('-H', 'X-Hub-Signature-256: sha256=' . hmac_sha256_hex($body, $secret),
		'-H', "X-GitHub-Delivery: $delivery");
}
for my $round (1 .. 3)
{
	my $body = qq({"id": "same$round"});
	my @clients;
	for (1 .. 6)
	{
		my $o = '';
		push @clients, [ IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
			'--data-binary', $body, '-H', 'Content-Type: application/json', github($body, "dl-$round"),
			"$base/postgres/public/gh" ], '>', \$o), \$o ];
	}
	$_->[0]->finish for @clients;
	is(join(',', map { ${ $_->[1] } } @clients), '200,200,200,200,200,200',
		"round $round: six identical deliveries at once: all 200");
}
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM gh}), 'same1,same2,same3', 'each written once');

#
# 4. deliveries retried across a kill -9 of the webhook worker: each
#    written once, none lost
#
my $n = 3000;
my $client = IPC::Run::start([ $^X, '-e', q{
	use HTTP::Tiny; use Digest::SHA qw(hmac_sha256_hex);
	my ($url, $secret, $n) = @ARGV;
	my $http = HTTP::Tiny->new(timeout => 30, keep_alive => 0);
	for my $i (1 .. $n) {
		my $body = qq({"id": "d$i", "n": $i});
		my $tries = 0;
		while (1) {
			my $res = $http->post($url, { content => $body, headers => {
				'Content-Type' => 'application/json',
				'X-Hub-Signature-256' => 'sha256=' . hmac_sha256_hex($body, $secret),
				'X-GitHub-Delivery' => "kill-$i" } });
			last if $res->{status} == 200;
			die "delivery $i: $res->{status} $res->{content}" if ++$tries > 600;
			select(undef, undef, undef, 0.1);
		}
	}
	print "done\n";
}, "$base/postgres/public/seq", $secret, $n ], '>', \my $client_out, '2>', \my $client_err);
ok($node->poll_query_until('postgres', q{SELECT count(*) >= 300 FROM seq}), 'deliveries come in');
my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'seq'::regclass});
my $before = sql(q{SELECT count(*) FROM seq});
my $from = -s $node->logfile;
kill 'KILL', $pid;
note("killed the webhook worker $pid at $before rows or more");
cmp_ok($before, '<', $n - 300, 'the worker was killed in the midst of the deliveries');
SwTest::wait_for_restart($node, $from);
$client->finish;
is($client_out, "done\n", 'the client got a 200 for every delivery, retrying') or diag($client_err);
is(sql(q{SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || min(n) || ' ' || max(n) FROM seq}),
	"$n $n 1 $n", 'each delivery written exactly once');

done_testing();
