# Idempotency keys: with idempotency_header set, a delivery whose key was
# written before writes nothing and gets the first one's answer, also when
# the repeats arrive at the same moment; a key that came with another body
# is refused; keys are kept while the history reaches back to them.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Digest::SHA qw(hmac_sha256_hex);
use SwTest;

my $port = PostgreSQL::Test::Cluster::get_free_port();
# (requests here hold the worker on purpose: no time limit)
my $node = SwTest::node('idempotency', conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n"
	. "source_writes.webhook_request_timeout = 0\n");
my $base = "http://127.0.0.1:$port/postgres";

sub sql { return $node->safe_psql('postgres', $_[0]); }

# POST with curl: "status body"
sub post
{
	my ($path, $body, @headers) = @_;
	my @cmd = ('curl', '-s', '-o', '-', '-w', ' %{http_code}', '--data-binary', $body,
		'-H', 'Content-Type: application/json', (map { ('-H', $_) } @headers), "$base$path");
	my ($out) = run_command(\@cmd);
	$out =~ s/\n//g;
	my ($text, $status) = $out =~ /^(.*) (\d+)$/s;
	return "$status $text";
}

# start n clients posting the same request at once; returns a sub that
# waits for them and gives their statuses, sorted
sub post_together
{
	my ($n, $path, $body, @headers) = @_;
	my @clients;
	for (1 .. $n)
	{
		my $o = '';
		push @clients, [ IPC::Run::start([ 'curl', '-s', '-o', '/dev/null', '-w', '%{http_code}',
			'--data-binary', $body, '-H', 'Content-Type: application/json',
			(map { ('-H', $_) } @headers), "$base$path" ], '>', \$o), \$o ];
	}
	return sub {
		$_->[0]->finish for @clients;
		return join(',', sort map { ${ $_->[1] } } @clients);
	};
}

sql(q{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE ev (id text, n int) SERVER hooks
	  OPTIONS (format 'json', idempotency_header 'Idempotency-Key');
	CREATE FOREIGN TABLE ev2 (id text, n int) SERVER hooks
	  OPTIONS (format 'json', idempotency_header 'Idempotency-Key')});
ok($node->wait_for_log(qr/webhook server listening on 127\.0\.0\.1:$port/),
	'the webhook server listens');

# a repeat writes nothing and gets the first answer
is(post('/public/ev', qq({"id": "a", "n": 1}\n{"id": "b", "n": 2}), 'Idempotency-Key: k1'), '200 2 rows',
	'a first delivery with a key is written');
is(post('/public/ev', qq({"id": "a", "n": 1}\n{"id": "b", "n": 2}), 'idempotency-key: k1'), '200 2 rows',
	'its repeat (the header in any case) gets the same answer');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev}), 'a,b', 'and writes nothing');
is(sql(q{SELECT count(*) FROM source_writes.updates(NULL::ev)}), '2', 'not even in the log');
is(post('/public/ev', '{"id": "c", "n": 3}', 'Idempotency-Key: k1'),
	'422 this idempotency key came before with another body', 'the key with another body: 422');
is(post('/public/ev2', qq({"id": "a", "n": 1}\n{"id": "b", "n": 2}), 'Idempotency-Key: k1'), '200 2 rows',
	'keys are per table');
is(post('/public/ev', '{"id": "d", "n": 4}'), '200 1 row', 'a delivery without the header is written');
is(post('/public/ev', '{"id": "d", "n": 4}'), '200 1 row', 'every time');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev}), 'a,b,d,d', 'twice');

# keys that cannot be taken
like(post('/public/ev', '{"id": "e"}', 'Idempotency-Key;'),
	qr/^400 the idempotency key in header "Idempotency-Key" must be 1 to 255 bytes of text$/, 'an empty key: 400');
like(post('/public/ev', '{"id": "e"}', 'Idempotency-Key: ' . ('k' x 256)), qr/^400 /, 'a key of 256 bytes: 400');
is(post('/public/ev', '{"id": "e"}', 'Idempotency-Key: ' . ('k' x 255)), '200 1 row', 'one of 255: taken');
like(post('/public/ev', '{"id": "f"}', "Idempotency-Key: \xff\xfe"), qr/^400 /, 'a key that is not UTF-8: 400');

# a delivery that fails keeps no key: it can be sent again
like(post('/public/ev', '{"id": "g", "n": "x"}', 'Idempotency-Key: k2'), qr/^400 invalid input syntax/,
	'a bad body with a key: 400');
like(post('/public/ev', '{"id": "g", "n": "x"}', 'Idempotency-Key: k2'), qr/^400 invalid input syntax/,
	'sent again, it is tried again');
is(post('/public/ev', '{"id": "g", "n": 7}', 'Idempotency-Key: k2'), '200 1 row',
	'the key of a failed delivery is free for its fix');

# edits: a repeat of a delivery whose row was deleted stays a repeat
sql(q{DELETE FROM ev WHERE id = 'g'});
is(post('/public/ev', '{"id": "g", "n": 7}', 'Idempotency-Key: k2'), '200 1 row', 'a repeat after a delete: 200');
is(sql(q{SELECT count(*) FROM ev WHERE id = 'g'}), '0', 'and the deleted row stays deleted');

# repeats that arrive at the same moment: written once.  A slow request
# holds the worker while they queue, so that they are written together
sql(q{CREATE FOREIGN TABLE slow (id int, w text DEFAULT pg_catalog.pg_sleep(1)::text)
	SERVER hooks OPTIONS (format 'json')});
my $slow = post_together(1, '/public/slow', '{"id": 1}');
ok($node->poll_query_until('postgres', q{SELECT count(*) = 1 FROM pg_stat_activity
	WHERE backend_type = 'source_writes webhook server' AND wait_event = 'PgSleep'}),
	'the worker is busy with a slow request');
my @together = map { post_together(10, '/public/ev', qq({"id": "t$_", "n": $_}), "Idempotency-Key: t$_") } 1 .. 3;
my @other = map { post_together(10, '/public/ev2', qq({"id": "u$_"}), "Idempotency-Key: u$_") } 1 .. 2;
is($slow->(), '200', 'the slow request is written');
is(join(' ', map { $_->() } @together, @other), join(' ', (join(',', ('200') x 10)) x 5),
	'50 deliveries of 5 keys at once: all 200');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev WHERE id LIKE 't%'}), 't1,t2,t3',
	'each key written once');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM ev2 WHERE id LIKE 'u%'}), 'u1,u2',
	'in each table');

# a key is taken without the whitespace (spaces, tabs) at either end of
# its header, as HTTP takes field values: these are one key
sql(q{CREATE FOREIGN TABLE trimmed (id text) SERVER hooks
	OPTIONS (format 'json', idempotency_header 'Idempotency-Key')});
is(post('/public/trimmed', '{"id": "t"}', 'Idempotency-Key: a'), '200 1 row', 'a key "a"');
is(post('/public/trimmed', '{"id": "t"}', 'Idempotency-Key:   a'), '200 1 row', 'the key "  a": its repeat');
is(post('/public/trimmed', '{"id": "t"}', "Idempotency-Key: a \t "), '200 1 row', 'the key "a \t ": its repeat');
is(post('/public/trimmed', '{"id": "t2"}', "Idempotency-Key: \t a  "), '422 this idempotency key came before with another body',
	'"\t a  " with another body: 422');
is(sql(q{SELECT count(*) FROM trimmed}), '1', 'written once');
is(sql(q{SELECT string_agg(format('%L', key), ',') FROM source_writes.deliveries WHERE source = 'trimmed'::regclass}),
	"'a'", 'kept as "a"');
is(post('/public/trimmed', '{"id": "t4"}', 'Idempotency-Key: b  '), '200 1 row', 'a key "b  " first');
is(post('/public/trimmed', '{"id": "t4"}', 'Idempotency-Key: b'), '200 1 row', 'then "b": its repeat');
is(sql(q{SELECT string_agg(id, ',' ORDER BY id) FROM trimmed}), 't,t4', 'written once too');

# the same key from many clients, without anything to hold the worker
my $many = post_together(32, '/public/ev', '{"id": "m"}', 'Idempotency-Key: m');
is($many->(), join(',', ('200') x 32), '32 clients with one key: all 200');
is(sql(q{SELECT count(*) FROM ev WHERE id = 'm'}), '1', 'one row');

# signatures are checked first: a repeat without one is not told the answer
sql(q{CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret 'whsec-9');
	CREATE FOREIGN TABLE signed (id text) SERVER hooks
	  OPTIONS (format 'json', signature_header 'X-Signature', idempotency_header 'Idempotency-Key')});
my $body = '{"id": "s1"}';
is(post('/public/signed', $body, 'X-Signature: ' . hmac_sha256_hex($body, 'whsec-9'), 'Idempotency-Key: s'),
	'200 1 row', 'a signed delivery with a key');
like(post('/public/signed', $body, 'Idempotency-Key: s'), qr/^404 /, 'its repeat unsigned: 404, as to no table');
like(post('/public/signed', $body, 'X-Signature: 00', 'Idempotency-Key: s'), qr/^403 /,
	'wrongly signed: 403');

# the keys are nobody's to read but the extension's
sql(q{CREATE ROLE reader; GRANT SELECT ON ev TO reader});
my ($rc, $out, $err) = $node->psql('postgres',
	q{SET ROLE reader; SELECT key FROM source_writes.deliveries});
like($err, qr/permission denied for table deliveries/, 'a role that reads the table cannot read its keys');

# kept while the history reaches back to them
sql(q{CREATE FOREIGN TABLE brief (id text) SERVER hooks
	OPTIONS (format 'json', idempotency_header 'Idempotency-Key', retain_history '0')});
is(post('/public/brief', '{"id": "r"}', 'Idempotency-Key: r'), '200 1 row', 'a delivery to a table that keeps no history');
is(post('/public/brief', '{"id": "r"}', 'Idempotency-Key: r'), '200 1 row', 'its repeat');
is(sql(q{SELECT count(*) FROM brief}), '1', 'is a repeat');
sql(q{INSERT INTO brief VALUES ('later')});
sql(q{SELECT source_writes.compact('brief')});
is(sql(q{SELECT count(*) FROM source_writes.deliveries WHERE source = 'brief'::regclass}), '0',
	'compaction forgets the keys received before since');
is(sql(q{SELECT count(*) FROM source_writes.deliveries WHERE source = 'ev'::regclass}), '7',
	'but not those of a table that keeps its history');
is(post('/public/brief', '{"id": "r"}', 'Idempotency-Key: r'), '200 1 row', 'the forgotten key sent again');
is(sql(q{SELECT count(*) FROM brief WHERE id = 'r'}), '2', 'is written again');

# dropped with the table
my $ev = sql(q{SELECT 'ev'::regclass::oid});
sql(q{DROP FOREIGN TABLE ev});
is(sql(qq{SELECT count(*) FROM source_writes.deliveries WHERE source::oid = $ev}), '0',
	'a dropped table leaves no keys');

done_testing();
