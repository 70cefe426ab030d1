# An Avro source whose writers used 1,000 schema versions: the worker
# fetches each once, keeps at most the 1024 most recently used, and stays
# under 100 MB of resident memory; every message is a row.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $versions = 1000;
my $broker = SwTest::broker(topics => [ 'many:1' ]);
my $registry = SwTest::registry();
my $node = SwTest::node('avro_memory');

sub sql { return $node->safe_psql('postgres', $_[0]); }

# each version a record with one more field, the id first; a message of
# each, whose body is the id alone (zigzag varint) and then one int per
# extra field
my @lines;
for my $v (1 .. $versions)
{
	my $fields = join(', ', '{"name": "id", "type": "int"}',
		map { qq({"name": "f$_", "type": "int"}) } 1 .. ($v % 20));
	my $id = SwTest::registry_register($registry, 'many-value',
		qq({"type": "record", "name": "r$v", "fields": [$fields]}));
	my $zigzag = '';
	my $n = $v * 2;
	while ($n >= 0x80) { $zigzag .= sprintf('%02x', ($n & 0x7f) | 0x80); $n >>= 7; }
	$zigzag .= sprintf('%02x', $n);
	push @lines, sprintf('00%08x', $id) . $zigzag . ('00' x ($v % 20));
}
SwTest::produce_avro($broker, undef, 'many', raw_hex => 1, records => \@lines);

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$broker->{bootstrap}', schema_registry '$registry->{url}');
	CREATE FOREIGN TABLE many (id int, f1 int DEFAULT -1) SERVER k OPTIONS (topic 'many', format 'avro')});
is(sql(q{SELECT source_writes.wait_for('many', '5 min')}), '', "$versions schema versions");
is(sql(q{SELECT count(*), count(DISTINCT id), min(id), max(id) FROM many}), "$versions|$versions|1|$versions",
	'every message is a row');
is(sql(q{SELECT count(*) FROM many WHERE f1 = CASE WHEN id % 20 >= 1 THEN 0 ELSE -1 END}), $versions,
	'each decoded with its own version: a field, or the default where the version has none');
is(SwTest::registry_stats($registry)->{schema_ids}, $versions, 'each version fetched once');

my $pid = sql(q{SELECT worker_pid FROM source_writes.sources WHERE source = 'many'::regclass});
my $status = slurp_file("/proc/$pid/status");
my ($rss) = $status =~ /^VmRSS:\s+(\d+) kB/m;
cmp_ok($rss, '<', 100 * 1024, "the worker's resident memory stays under 100 MB ($rss kB)");
is(sql(q{SELECT count(*) FROM source_writes.avro_schemas}), $versions, 'the schemas are kept for sessions');

done_testing();
