# Webhook bodies sent with a Content-Encoding: gzip and deflate are decoded
# before the signature check and the table's format, and max_body_bytes is
# on the decoded bytes (a zip bomb is answered 413 without being decoded
# past the limit); a corrupt body is 400, another coding 415, and neither
# writes anything.  A request relayed to another database's worker is
# decoded there.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::MD5;
use Digest::SHA qw(hmac_sha256_hex);
use IO::Compress::Gzip qw(gzip $GzipError);
use IO::Compress::Deflate qw(deflate $DeflateError);
use IO::Compress::RawDeflate qw(rawdeflate $RawDeflateError);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('webhook_coding', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port/postgres";
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST bytes with curl (from a file, as they are): "status body", the body
# without its newline
my $files = 0;
sub post
{
	my ($path, $body, @headers) = @_;
	my $file = "$dir/body" . $files++;
	open(my $fh, '>:raw', $file) or die "cannot write $file: $!";
	print $fh $body;
	close($fh);
	my @cmd = ('curl', '-s', '-o', '-', '-w', ' %{http_code}', "$base$path",
		'--data-binary', "\@$file");
	push @headers, 'Content-Type: application/json' unless grep { /^content-type:/i } @headers;
	push @cmd, map { ('-H', $_) } @headers;
	my ($out) = run_command(\@cmd);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

sub gz { my $out; gzip(\$_[0] => \$out) or die $GzipError; return $out; }
sub zl { my $out; deflate(\$_[0] => \$out) or die $DeflateError; return $out; }
sub raw_deflate { my $out; rawdeflate(\$_[0] => \$out) or die $RawDeflateError; return $out; }

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE events (id text) SERVER hooks OPTIONS (format 'json');
	CREATE FOREIGN TABLE small (id text) SERVER hooks OPTIONS (format 'json', max_body_bytes '1000');
	CREATE FOREIGN TABLE huge (id text) SERVER hooks OPTIONS (format 'json', max_body_bytes '512MB');
	CREATE FOREIGN TABLE raw (data bytea) SERVER hooks OPTIONS (format 'bytes');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret 'whsec-2718');
	CREATE FOREIGN TABLE signed (id text) SERVER hooks
	  OPTIONS (format 'json', signature_header 'X-Hub-Signature-256', signature_prefix 'sha256=')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');
my $pid = sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'});

# gzip and deflate (zlib's format, and a raw deflate stream, as some send)
is(post('/public/events', gz('{"id": "g1"}'), 'Content-Encoding: gzip'), '200 1 row', 'gzip: 200');
is(post('/public/events', gz('{"id": "g2"}'), 'Content-Encoding: x-gzip'), '200 1 row', 'x-gzip: 200');
is(post('/public/events', zl('{"id": "d1"}'), 'Content-Encoding: deflate'), '200 1 row', 'deflate: 200');
is(post('/public/events', raw_deflate('{"id": "d2"}'), 'Content-Encoding: Deflate'), '200 1 row',
	'raw deflate, the coding in any case: 200');
is(post('/public/events', gz('{"id": "g3"}') . gz(' '), 'Content-Encoding: gzip'), '200 1 row',
	'two gzip members: 200');
is(post('/public/events', '{"id": "i1"}', 'Content-Encoding: identity'), '200 1 row', 'identity: 200');
is(sql(q{SELECT string_agg(id, ' ' ORDER BY id) FROM events}), 'd1 d2 g1 g2 g3 i1',
	'the decoded bodies are written');

# what is not taken writes nothing
my $gz = gz('{"id": "bad1"}');
is(post('/public/events', substr($gz, 0, length($gz) - 6), 'Content-Encoding: gzip'),
	'400 the body is not valid gzip data', 'a gzip body cut short: 400');
is(post('/public/events', substr($gz, 0, 12) . 'garbage' . substr($gz, 19), 'Content-Encoding: gzip'),
	'400 the body is not valid gzip data', 'a corrupt gzip body: 400');
is(post('/public/events', '{"id": "bad2"}', 'Content-Encoding: gzip'),
	'400 the body is not valid gzip data', 'a body that is not gzip at all: 400');
is(post('/public/events', $gz . 'trailing', 'Content-Encoding: gzip'),
	'400 the body is not valid gzip data', 'bytes after the gzip data: 400');
is(post('/public/events', 'nonsense', 'Content-Encoding: deflate'),
	'400 the body is not valid deflate data', 'a corrupt deflate body: 400');
is(post('/public/events', '{"id": "bad3"}', 'Content-Encoding: br'),
	'415 this server cannot decode content encoding "br"', 'another coding: 415');
is(post('/public/events', gz(zl('{"id": "bad4"}')), 'Content-Encoding: deflate, gzip'),
	'415 this server cannot decode content encoding "gzip"', 'two codings: 415');
is(post('/public/events', gz('{"id": "bad5"}'), 'Content-Encoding: gzip', 'Content-Encoding: gzip'),
	'415 this server cannot decode content encoding "gzip"', 'gzip in two headers: 415');
is(sql(q{SELECT count(*) FROM events WHERE id LIKE 'bad%'}), '0', 'the refused bodies wrote nothing');
ok($node->log_contains(qr{webhook request to /postgres/public/events refused with status 400}),
	'a refused body is logged');

# max_body_bytes is on the decoded body
my $fits = '{"id": "fits", "pad": "' . ('x' x 900) . '"}';
is(post('/public/small', gz($fits), 'Content-Encoding: gzip'), '200 1 row',
	'a body that decodes to less than max_body_bytes: 200');
my $over = '{"id": "bad6", "pad": "' . ('x' x 1000) . '"}';
ok(length(gz($over)) < 1000, 'a body under max_body_bytes, coded');
is(post('/public/small', gz($over), 'Content-Encoding: gzip'),
	'413 the body is larger than this table takes', 'that decodes to more: 413');
# a bomb: 64 MB of zeros in about 64 kB, to a table that takes 1 MB
my $bomb = gz('{"id": "bad7", "pad": "' . ("0" x (64 * 1024 * 1024)) . '"}');
ok(length($bomb) < 1024 * 1024, 'the bomb is under the default max_body_bytes');
is(post('/public/events', $bomb, 'Content-Encoding: gzip'),
	'413 the body is larger than this table takes', 'a zip bomb: 413');
is(post('/public/events', zl('{"id": "bad8", "pad": "' . ("0" x (64 * 1024 * 1024)) . '"}'),
	'Content-Encoding: deflate'),
	'413 the body is larger than this table takes', 'a deflate bomb: 413');
is(post('/public/huge', $bomb, 'Content-Encoding: gzip'),
	'413 the body is larger than this table takes',
	'a bomb to a table that takes 512 MB: 413 past 64 MB, as any body');
is(sql(q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes webhook server'}),
	$pid, 'the same worker serves');
is(post('/public/events', gz('{"id": "after"}'), 'Content-Encoding: gzip'), '200 1 row',
	'and takes the next gzip body');
is(sql(q{SELECT (SELECT count(*) FROM events WHERE id LIKE 'bad%') +
	(SELECT count(*) FROM small WHERE id LIKE 'bad%') +
	(SELECT count(*) FROM huge)}), '0', 'the bombs wrote nothing');

# the signature is over the decoded body, as GitHub and Stripe sign it
my $body = '{"id": "s1"}';
my $sig = 'X-Hub-Signature-256: sha256=' . hmac_sha256_hex($body, 'whsec-2718');
is(post('/public/signed', gz($body), 'Content-Encoding: gzip', $sig), '200 1 row',
	'a gzip body signed as decoded: 200');
my $coded = gz('{"id": "bad9"}');
is(post('/public/signed', $coded, 'Content-Encoding: gzip',
		'X-Hub-Signature-256: sha256=' . hmac_sha256_hex($coded, 'whsec-2718')),
	'403 the signature in header "X-Hub-Signature-256" does not match the body',
	'a signature of the coded bytes: 403');
is(sql(q{SELECT string_agg(id, ' ') FROM signed}), 's1', 'only the first is written');

# a bytes table gets the decoded bytes
my $bin = join('', map { chr($_ % 256) } 0 .. 999);
is(post('/public/raw', gz($bin), 'Content-Encoding: gzip', 'Content-Type: application/octet-stream'),
	'200 1 row', 'binary gzip to a bytes table: 200');
is(sql(q{SELECT length(data) || ' ' || md5(data) FROM raw}),
	'1000 ' . Digest::MD5::md5_hex($bin), 'it holds the decoded bytes');

# a request to another database's table is relayed as it came, and
# decoded by the worker that writes it
sql(q{CREATE DATABASE w1});
$node->safe_psql('w1', q{CREATE EXTENSION source_writes;
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE pay (id text) SERVER hooks OPTIONS (format 'json', max_body_bytes '1000')});
ok($node->poll_query_until('w1', q{SELECT state = 'listening' FROM source_writes.sources
	WHERE source = 'pay'::regclass}), 'a table of another database is served');
$base = "http://127.0.0.1:$port/w1";
is(post('/public/pay', gz('{"id": "w1"}'), 'Content-Encoding: gzip'), '200 1 row',
	'a gzip body to another database: 200');
is(post('/public/pay', gz($over), 'Content-Encoding: gzip'),
	'413 the body is larger than this table takes', 'one that decodes past its limit: 413');
is(post('/public/pay', '{"id": "bad10"}', 'Content-Encoding: gzip'),
	'400 the body is not valid gzip data', 'one that is not gzip: 400');
is($node->safe_psql('w1', q{SELECT string_agg(id, ' ') FROM pay}), 'w1', 'only the first is written');

$node->stop;
done_testing();
