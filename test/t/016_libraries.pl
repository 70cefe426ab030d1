# librdkafka is not loaded into backends that only read or edit source
# tables, nor into the launcher: source_writes.so is not linked with it, and
# neither a session that creates, writes and reads a kafka source nor the
# launcher has it mapped.  (Of what librdkafka pulls in, libssl, libsasl2,
# libzstd and liblz4 are linked by postgres itself, so librdkafka is the
# library to look for.)
#
# The libraries are built as PostgreSQL 16 builds modules, with hidden
# symbols: source_writes.so exports what the server calls and exactly the
# functions and settings that its other libraries (the Kafka and webhook
# workers', the Avro decoder's, the tests' module) call, and they load.
# Neither Apache Avro C nor libcurl is mapped into those backends either.  It has neither the
# tests' doors nor the benchmarks' switch.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

plan skip_all => 'no /proc/self/maps' unless -r '/proc/self/maps';

my $node = SwTest::node('libraries');
my $so = $node->config_data('--pkglibdir') . '/source_writes.so';

# 1. the installed library does not depend on librdkafka
my $ldd = `ldd '$so' 2>&1`;
is($?, 0, "ldd $so runs") or diag($ldd);
unlike($ldd, qr/librdkafka/, 'source_writes.so is not linked with librdkafka');
unlike($ldd, qr/libmicrohttpd/, 'nor with libmicrohttpd, which only the webhook server loads');
unlike($ldd, qr/libavro/, 'nor with Apache Avro C, which only processes that decode Avro load');
unlike($ldd, qr/libcurl/, 'nor with libcurl, which only the Kafka workers load');

# the files mapped into server process $pid (it runs as our OS user, so
# we may read its maps), one each
sub mapped_files
{
	my ($pid) = @_;
	open(my $fh, '<', "/proc/$pid/maps") or die "cannot read /proc/$pid/maps: $!";
	my %files = map { m{\s(/\S+)$} ? ($1 => 1) : () } <$fh>;
	close $fh;
	return sort keys %files;
}

# check that process $pid has source_writes.so and no librdkafka mapped
sub check_maps
{
	my ($who, $pid) = @_;
	is((stat "/proc/$pid")[4], $<, "$who runs as our OS user, so we can read its maps");
	my @files = mapped_files($pid);
	ok((grep { m{/source_writes\.so$} } @files), "$who (pid $pid) has source_writes.so mapped");
	my @rdkafka = grep { /librdkafka/ } @files;
	ok(!@rdkafka, "$who has no librdkafka mapped") or diag("mapped: @rdkafka");
	my @microhttpd = grep { /libmicrohttpd/ } @files;
	ok(!@microhttpd, "$who has no libmicrohttpd mapped") or diag("mapped: @microhttpd");
	my @others = grep { /libavro|libcurl/ } @files;
	ok(!@others, "$who has neither Avro C nor libcurl mapped") or diag("mapped: @others");
}

# 2. a session that creates a kafka source, edits and reads it, and stays
# open while its maps are read
my $session = $node->background_psql('postgres');
my $pid = $session->query_safe(q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int, v text) SERVER k OPTIONS (topic 't');
	INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 10) g;
	UPDATE t SET v = 'updated' WHERE id <= 5;
	DELETE FROM t WHERE id > 8;
	SELECT pg_backend_pid();
});
is($session->query_safe(q{SELECT count(*), count(*) FILTER (WHERE v = 'updated') FROM t}),
	'8|5', 'the session inserted, updated, deleted and read rows of the source');
check_maps('the editing backend', $pid);
$session->quit;

# 3. the launcher background worker
ok($node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'the launcher runs');
check_maps('the launcher', $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}));

# 4. what the libraries export and import
my $libdir = $node->config_data('--pkglibdir');
my %lib = (
	main => "$libdir/source_writes.so",
	kafka => "$libdir/source_writes_kafka.so",
	webhook => "$libdir/source_writes_webhook.so",
	avro => "$libdir/source_writes_avro.so",
	test => "$libdir/source_writes_test.so");

# the symbols that nm lists with OPTIONS for FILE
sub symbols
{
	my ($options, $file) = @_;
	my @lines = `nm $options '$file'`;
	die "nm $options $file failed" if $?;
	return sort map { (split ' ')[-1] } @lines;
}

my @exported = symbols('-D --defined-only', $lib{main});
my @unexpected = grep { !/^(Pg_magic_func|_PG_init|pg_finfo_source_writes_\w+|source_writes_\w+|sw_\w+)$/ }
  @exported;
is("@unexpected", '', 'source_writes.so exports what the server calls, and sw_ symbols');
my %imported;
for my $client (qw(kafka webhook avro test))
{
	$imported{$_} = 1 for grep { /^sw_/ } symbols('-D --undefined-only', $lib{$client});
	# (the Avro library's are found with load_external_function())
	my @own = grep { !/^(Pg_magic_func|pg_finfo_source_writes_\w+|source_writes_\w+)$/ }
	  grep { $client ne 'avro' || !/^sw_avro_\w+$/ }
	  symbols('-D --defined-only', $lib{$client});
	is("@own", '', "the $client library exports only what the server calls");
}
like(`ldd '$lib{avro}' 2>&1`, qr/libavro/, 'the Avro library is linked with Apache Avro C');
like(`ldd '$lib{kafka}' 2>&1`, qr/libcurl/, 'the Kafka library with libcurl');
my %api = map { $_ => 1 } grep { /^sw_/ } @exported;
is(join(' ', grep { !$api{$_} } sort keys %imported), '',
	'every sw_ symbol that the other libraries call is exported (PGDLLEXPORT)');
is(join(' ', grep { !$imported{$_} } sort keys %api), '',
	'and no other: the rest of source_writes.so is hidden');
cmp_ok(scalar(keys %api), '>', 20, 'the libraries call into source_writes.so');

# each library loads, its calls into source_writes.so resolved
for my $client (qw(kafka webhook avro test))
{
	my $name = $lib{$client} =~ s{.*/(.*)\.so$}{$1}r;
	my ($rc, $out, $err) = $node->psql('postgres', "LOAD '$name'");
	is($rc, 0, "LOAD '$name' succeeds") or diag($err);
}

# no door of the tests, nor the benchmarks' switch, in a release library
ok(!(grep { /source_writes_test_/ } @exported), 'source_writes.so has no test door');
my ($rc, $out, $err) = $node->psql('postgres', q{
	CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray)
	RETURNS bigint AS 'source_writes', 'source_writes_test_write' LANGUAGE C});
like($err, qr/could not find function "source_writes_test_write" in file/,
	'a superuser cannot make a function of one');
for my $file ($lib{main}, $lib{webhook})
{
	ok(index(slurp_file($file), 'bench_discard') < 0, "$file has no benchmark switch");
}

done_testing();
