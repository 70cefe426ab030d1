# A backend's memory stays bounded whatever the number of rows it writes to
# or reads from a source table: COPY, INSERT ... SELECT and a multi-row
# INSERT ... VALUES into a source table, updates() over a long log,
# SELECT ... FOR UPDATE of every row and ALTER ... ADD COLUMN with a
# volatile default (which gives every row a value) peak within 1.5 times
# the same work on a plain table.
#
# The peak is the backend's VmHWM (peak resident set), read from
# /proc/self/status by the backend itself right after the statement, each
# in a fresh connection.  Shared buffers are small, so that the shared
# memory a backend touches does not hide what it allocates; JIT and
# parallel query are off, so that both sides do the same work in the one
# process that is measured.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

if (!-r '/proc/self/status')
{
	plan skip_all => 'no /proc/self/status to read the peak memory from';
}

my $node = SwTest::node('memory', conf => q{
shared_buffers = 16MB
work_mem = 4MB
jit = off
max_parallel_workers_per_gather = 0
max_wal_size = 2GB
autovacuum = off
});
$node->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
});

# the peak RSS, in kB, of a fresh backend that ran $sql
sub peak_kb
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres', qq{
		$sql;
		SELECT (regexp_match(pg_read_file('/proc/self/status'), 'VmHWM:\\s+(\\d+) kB'))[1];
	});
	my @lines = split /\n/, $out;
	die "no VmHWM in: $out" unless @lines && $lines[-1] =~ /^\d+$/;
	return $lines[-1];
}

# the peak RSS of a fresh backend that ran $sql, less the shared memory it
# touched (which stays in its RSS): for work that touches all of shared
# buffers on one side and stays in a ring of them on the other
sub peak_private_kb
{
	my ($sql) = @_;
	my $out = $node->safe_psql('postgres', qq{
		$sql;
		SELECT (regexp_match(s, 'VmHWM:\\s+(\\d+) kB'))[1]::int
		       - (regexp_match(s, 'RssShmem:\\s+(\\d+) kB'))[1]::int
		FROM pg_read_file('/proc/self/status') s;
	});
	my @lines = split /\n/, $out;
	die "no VmHWM in: $out" unless @lines && $lines[-1] =~ /^\d+$/;
	return $lines[-1];
}

# measure $what on the plain and the source table, note both, and check
# the source's peak against 1.5 times the plain one's ($peak: how to
# measure, peak_kb by default)
sub compare
{
	my ($what, $plain_sql, $source_sql, $check, $peak) = @_;
	$peak //= \&peak_kb;
	my $plain = $peak->($plain_sql);
	my $source = $peak->($source_sql);
	my $figures = sprintf('%s: peak RSS %.1f MB on a plain table, %.1f MB on a source table (%.2fx)',
		$what, $plain / 1024, $source / 1024, $source / $plain);

	$check->() if $check;
	cmp_ok($source, '<=', 1.5 * $plain,
		"$what: a source table's peak memory is within 1.5x of a plain table's")
	  ? note($figures)
	  : diag($figures);
}

my $columns = 'id bigint, kind text, payload text';
my $rows = q{SELECT i, 'kind ' || i % 10, md5(i::text) || to_char(i, 'FM00000000')
	FROM generate_series(1, %d) i};
for my $t (qw(copy ins vals))
{
	$node->safe_psql('postgres', qq{
		CREATE TABLE plain_$t ($columns);
		CREATE FOREIGN TABLE src_$t ($columns) SERVER k OPTIONS (topic 'src_$t');
	});
}

# COPY FROM a server-side file of 1M rows (payload 40 bytes)
my $file = PostgreSQL::Test::Utils::tempdir() . '/rows.copy';
$node->safe_psql('postgres', sprintf("COPY (%s) TO '%s'", sprintf($rows, 1_000_000), $file));
compare('COPY of 1M rows',
	"COPY plain_copy FROM '$file'", "COPY src_copy FROM '$file'",
	sub {
		is($node->safe_psql('postgres',
				'SELECT count(*), count(DISTINCT id), sum(length(payload)) FROM src_copy'),
			'1000000|1000000|40000000', 'COPY wrote every row to the source table');
	});

# INSERT ... SELECT of 1M rows
compare('INSERT ... SELECT of 1M rows',
	'INSERT INTO plain_ins ' . sprintf($rows, 1_000_000),
	'INSERT INTO src_ins ' . sprintf($rows, 1_000_000),
	sub {
		is($node->safe_psql('postgres', 'SELECT count(*), count(DISTINCT id) FROM src_ins'),
			'1000000|1000000', 'INSERT ... SELECT wrote every row to the source table');
	});

# one INSERT ... VALUES of 50k rows of 6.4 kB each.  The payload is computed
# by a volatile function as the rows are inserted, so that the rows are
# not constants of the plan: the statement's parse tree and plan (the same
# for both tables) are then small next to what 50k rows would cost if a
# row's memory were kept.
$node->safe_psql('postgres', q{
	CREATE FUNCTION pad(i int) RETURNS text LANGUAGE plpgsql VOLATILE
	  AS $$BEGIN RETURN repeat(md5(i::text), 200); END$$;
});
my $values = join(',', map { "($_, 'kind', pad($_))" } 1 .. 50_000);
compare('INSERT ... VALUES of 50k rows of 6.4 kB',
	"INSERT INTO plain_vals VALUES $values",
	"INSERT INTO src_vals VALUES $values",
	sub {
		is($node->safe_psql('postgres',
				'SELECT count(*), count(DISTINCT id), sum(length(payload)) FROM src_vals'),
			'50000|50000|320000000', 'INSERT ... VALUES wrote every row to the source table');
	});

# updates() over 1M updates (600k rows inserted, 400k of them deleted):
# it sorts them with work_mem, as sorting 1M rows of a plain table does.
$node->safe_psql('postgres', qq{
	CREATE FOREIGN TABLE src_log ($columns) SERVER k OPTIONS (topic 'src_log');
	INSERT INTO src_log } . sprintf($rows, 600_000) . q{;
	DELETE FROM src_log WHERE id <= 400000;
	CREATE TABLE plain_log AS SELECT * FROM src_log;
	INSERT INTO plain_log } . sprintf($rows, 400_000) . q{;
	INSERT INTO plain_log } . sprintf($rows, 400_000) . q{;
	VACUUM ANALYZE plain_log;
});
compare('updates() over 1M updates',
	q{SELECT count(*) FROM (SELECT * FROM plain_log ORDER BY id DESC, payload OFFSET 0) s},
	q{SELECT count(*) FROM source_writes.updates(NULL::src_log)},
	sub {
		is($node->safe_psql('postgres', q{
			SELECT count(*), sum(diff), count(DISTINCT ts)
			FROM source_writes.updates(NULL::src_log)}),
			'1000000|200000|2', 'updates() returns the 1M updates of 2 batches');
		is($node->safe_psql('postgres', 'SELECT count(*) FROM plain_log'), '1000000',
			'the plain table sorted has as many rows');
	});

# SELECT ... FOR UPDATE locks 1M rows, one at a time
compare('SELECT ... FOR UPDATE of 1M rows',
	'SELECT count(*) FROM (SELECT * FROM plain_ins FOR UPDATE) s',
	'SELECT count(*) FROM (SELECT * FROM src_ins FOR UPDATE) s');

# ADD COLUMN with a volatile default: a plain table is rewritten (through a
# ring of a few shared buffers), a source's 1M rows are each given a value
# and written again (through all of them): private memory is compared
compare('ALTER ... ADD COLUMN DEFAULT random() of 1M rows',
	'ALTER TABLE plain_ins ADD COLUMN r float8 DEFAULT random()',
	'ALTER FOREIGN TABLE src_ins ADD COLUMN r float8 DEFAULT random()',
	sub {
		is($node->safe_psql('postgres',
				'SELECT count(*), count(DISTINCT r) > 999000 FROM src_ins'),
			'1000000|t', 'ADD COLUMN gave every row of the source a value');
	},
	\&peak_private_kb);

done_testing();
