# librdkafka is not loaded into backends that only read or edit source
# tables, nor into the launcher: source_writes.so is not linked with it, and
# neither a session that creates, writes and reads a kafka source nor the
# launcher has it mapped.  (Of what librdkafka pulls in, libssl, libsasl2,
# libzstd and liblz4 are linked by postgres itself, so librdkafka is the
# library to look for.)
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

done_testing();
