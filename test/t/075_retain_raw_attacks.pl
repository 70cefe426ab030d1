# retain_raw under attack (an outside review), on a cluster that ingests.
# A webhook request's secrets (its signature, a bearer token, the signing
# secret itself) are nowhere in the bytes of the source's storage (its
# heaps, their TOAST, after an edit moved a row into the history) nor in
# the WAL, while each row keeps its piece of the body; Kafka messages of
# hundreds of kB, many to a batch, are kept byte for byte by the worker
# and survive a person's UPDATE and DELETE.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use Digest::SHA qw(hmac_sha256_hex);
use SwTest;

my $broker = SwTest::broker(topics => ['wide:1']);
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $node = SwTest::node('retain_raw_attacks',
	conf => "source_writes.webhook_listen = '127.0.0.1:$port'\n");
my $base = "http://127.0.0.1:$port/postgres/public";
my $dir = PostgreSQL::Test::Utils::tempdir();

sub sql { return $node->safe_psql('postgres', $_[0]); }

sub post { my ($table, @rest) = @_; return SwTest::post("$base/$table", @rest); }

# the bytes of every file of a relation (all its segments and forks)
sub relation_bytes
{
	my ($rel) = @_;
	my $path = $node->data_dir . '/' . sql(qq{SELECT pg_relation_filepath('$rel')});
	my $bytes = '';
	for my $file (glob("$path $path.* ${path}_*"))
	{
		$bytes .= slurp_file($file);
	}
	return $bytes;
}

my $secret = 'whsec-topsecret-signing-key';
my $token = 'tok-XYZZY-9f8e7d6c5b4a';
sql(qq{CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR CURRENT_USER SERVER hooks OPTIONS (secret '$secret');
	CREATE FOREIGN TABLE signed (id int, note text) SERVER hooks
	  OPTIONS (signature_header 'X-Sig', retain_raw 'true');
	CREATE FOREIGN TABLE gh (id int, note text) SERVER hooks
	  OPTIONS (signature_scheme 'github', format 'json_array', retain_raw 'true')});
ok($node->poll_query_until('postgres', q{SELECT count(*) = 2 FROM source_writes.sources
	WHERE kind = 'webhook' AND state = 'listening'}), 'the webhook server listens');

# a signed NDJSON delivery with a bearer token; a GitHub delivery, whose
# signature and delivery id are headers
my $body = qq({"id": 1, "note": "a"}\n{"id": 2, "note": "b"}\n);
my $sig = hmac_sha256_hex($body, $secret);
is(post('signed', $body, "X-Sig: $sig", "Authorization: Bearer $token",
		'Content-Type: application/x-ndjson'), '200 2 rows', 'a signed delivery');
my $gbody = q([{"id": 3, "note": "c"}, {"id": 4, "note": "d"}]);
my $gsig = hmac_sha256_hex($gbody, $secret);
is(post('gh', $gbody, "X-Hub-Signature-256: sha256=$gsig", 'X-GitHub-Delivery: gd-1',
		'X-GitHub-Event: push', "Authorization: token $token", 'Content-Type: application/json'),
	'200 2 rows', 'a GitHub delivery');
is(sql(q{SELECT string_agg((data).id || ' ' || convert_from(value, 'UTF8') || ' '
		|| coalesce(delivery, '-'), E'\n' ORDER BY (data).id)
		FROM (SELECT data::text::signed AS data, value, delivery
		      FROM source_writes.raw_messages(NULL::signed)
		      UNION ALL SELECT data::text::signed, value, delivery
		      FROM source_writes.raw_messages(NULL::gh)) r}),
	qq(1 {"id": 1, "note": "a"} -\n2 {"id": 2, "note": "b"} -\n3 {"id": 3, "note": "c"} gd-1\n4 {"id": 4, "note": "d"} gd-1),
	'each row keeps its piece of the body (and the delivery id as its key)');

# a person's edit moves rows into the history, messages with them
sql(q{UPDATE signed SET note = 'A' WHERE id = 1; DELETE FROM gh WHERE id = 3; CHECKPOINT});
my @rels = split /\n/, sql(q{SELECT r FROM source_writes.source_tables s,
	LATERAL (VALUES (s.current_rel), (s.history_rel)) h(rel),
	LATERAL (SELECT h.rel::regclass::text UNION ALL
	         SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = h.rel
	         AND reltoastrelid <> 0) x(r)
	WHERE s.relid IN ('signed'::regclass, 'gh'::regclass) ORDER BY 1});
cmp_ok(scalar(@rels), '>=', 8, 'the heaps and their TOAST relations');
my $stored = join('', map { relation_bytes($_) } @rels);
like($stored, qr/"note": "b"/, 'the bodies are in the storage');
unlike($stored, qr/\Q$sig\E/, 'no signature in the storage');
unlike($stored, qr/\Q$gsig\E/, 'no GitHub signature in the storage');
unlike($stored, qr/\Q$token\E/, 'no bearer token in the storage');
unlike($stored, qr/\Q$secret\E/, 'no signing secret in the storage');
unlike($stored, qr/X-GitHub-Event|X-Hub-Signature/i, 'no header name in the storage');
my $wal = join('', map { slurp_file($_) } glob($node->data_dir . '/pg_wal/0*'));
like($wal, qr/"note": "b"/, 'the bodies are in the WAL');
unlike($wal, qr/\Q$sig\E|\Q$gsig\E|\Q$token\E/, 'no signature or token in the WAL');

# Kafka: messages of 150 to 300 kB, many to a batch, each kept byte for
# byte, with their key and headers, through a person's UPDATE and DELETE
# (under 5 MB in all: the mock broker drops the oldest beyond that)
sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '$broker->{bootstrap}');
	CREATE FOREIGN TABLE wide (id int, n int) SERVER k OPTIONS (topic 'wide', retain_raw 'true')});
my %sums;
for my $i (1 .. 12)
{
	my $pad = join('', map { sprintf('%08x', ($i * 7919 + $_) * 2654435761 % 4294967296) }
		1 .. (150_000 + ($i % 4) * 50_000) / 8);
	my $value = qq({"id": $i, "n": $i, "pad": "$pad"});
	my $file = "$dir/value";
	open(my $fh, '>:raw', $file) or die;
	print $fh $value;
	close $fh;
	my ($out, $err) = run_command([ 'kcat', '-P', '-b', $broker->{bootstrap}, '-t', 'wide',
		'-k', "key$i", '-H', "h=$i", $file ]);
	die "kcat: $err" if $err ne '';
	$sums{$i} = Digest::SHA::sha256_hex($value);
}
sql(q{SELECT source_writes.wait_for('wide', '120 s')});
sql(q{UPDATE wide SET n = -n WHERE id % 3 = 0; DELETE FROM wide WHERE id % 5 = 0});
my %got = map { split / / } split /\n/, sql(q{SELECT (data).id || ':' || (valid_to IS NULL) || ' '
	|| encode(sha256(value), 'hex') || ':' || convert_from(key, 'UTF8') || ':'
	|| convert_from(header_values[1], 'UTF8')
	FROM source_writes.raw_messages(NULL::wide)});
my @wrong;
for my $i (1 .. 12)
{
	my @versions = grep { /^$i:/ } keys %got;
	# one version keeps it: the current row, or the history's (an UPDATE's
	# row is a person's, which keeps none)
	my $want = 1;
	push @wrong, "$i: " . scalar(@versions) . " versions" if @versions != $want;
	push @wrong, "$i: $_ $got{$_}" for grep { $got{$_} ne "$sums{$i}:key$i:$i" } @versions;
}
is(join("\n", @wrong), '', 'every row version keeps its message byte for byte');
is(sql(q{SELECT count(*) || ' ' || sum(n) FROM wide}), '10 ' . (78 - (5 + 10) - 2 * (3 + 6 + 9 + 12)),
	'the rows are right');

done_testing();
