# A dump of a database that holds versions (option version_of) restores
# each version's own log and copies nothing: pg_restore and psql of a
# plain dump bring back the same updates(), history(), batches, offsets,
# kept errors and uncarried edits, once; a version whose old table was
# dropped before the dump comes back too, and in the restored database the
# options still act only at CREATE.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('versions');

$node->safe_psql('postgres', q{
	CREATE FUNCTION test_write(source regclass, origin text, op text, rows anyarray,
	                           part int DEFAULT NULL, first_offset bigint DEFAULT NULL)
	RETURNS bigint AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE kv (k int, v text) SERVER k
	  OPTIONS (topic 'kv', envelope 'upsert', key 'k');
	CREATE FOREIGN TABLE o (id int, amount text) SERVER k OPTIONS (topic 'o');
	CREATE FOREIGN TABLE gone (id int) SERVER k OPTIONS (topic 'gone');
});
$node->safe_psql('postgres', $_) for (
	q{SELECT test_write('kv', 'kafka', 'upsert',
	    ARRAY[ROW(1, 'a'), ROW(2, 'b'), ROW(3, 'c')]::kv[], 0, 0)},
	q{UPDATE kv SET v = 'by hand' WHERE k = 1},
	q{DELETE FROM kv WHERE k = 2},
	q{SELECT test_write('kv', 'kafka', 'upsert', ARRAY[ROW(1, 'a2')]::kv[], 0, 3)},
	q{SELECT test_write('o', 'kafka', 'append',
	    ARRAY[ROW(1, '1.5'), ROW(2, 'oops'), ROW(5, 'bad')]::o[], 0, 0)},
	q{INSERT INTO o VALUES (3, 'n/a')},
	q{UPDATE o SET amount = '2' WHERE id = 2},
	q{SELECT test_write('gone', 'kafka', 'append', ARRAY[ROW(1), ROW(2)]::gone[], 0, 0)},
	q{CREATE FOREIGN TABLE kv_v2 (k int, v text) SERVER k
	    OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv')},
	q{CREATE FOREIGN TABLE kv_raw (k int, v text) SERVER k
	    OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv',
	             carry_edits 'false')},
	q{CREATE FOREIGN TABLE o_v2 (id int, amount numeric) SERVER k
	    OPTIONS (topic 'o', version_of 'o')},
	q{CREATE FOREIGN TABLE gone_v2 (id bigint) SERVER k
	    OPTIONS (topic 'gone', version_of 'gone')},
	# each version goes on as a table of its own before the dump
	q{UPDATE kv_raw SET v = 'raw by hand' WHERE k = 3},
	q{INSERT INTO o_v2 VALUES (4, 4.5)},
	q{DROP FOREIGN TABLE gone});

is($node->safe_psql('postgres',
	"SELECT count(*) FROM source_writes.uncarried_edits WHERE source = 'o_v2'::regclass"),
	'2', 'o_v2 reports the edits it does not carry');
is($node->safe_psql('postgres',
	"SELECT count(*) FROM source_writes.errors WHERE source = 'o_v2'::regclass"),
	'1', 'o_v2 keeps the current message its columns do not take (not the one a person fixed)');

# what must come back, per version
my %queries = (
	contents => sub { "SELECT t::text FROM $_[0] t ORDER BY 1" },
	updates => sub {
		"SELECT ts, diff, origin, data::text FROM source_writes.updates(NULL::$_[0]) ORDER BY 1, 2, 3, 4"
	},
	history => sub {
		"SELECT valid_from, valid_to, origin, role, retracted_origin, \"partition\", \"offset\", data::text
		 FROM source_writes.history(NULL::$_[0]) ORDER BY 1, 2, 3, 4, 5, 6, 7, 8"
	},
	batches => sub {
		"SELECT ts, origin, role FROM source_writes.batches WHERE source = '$_[0]'::regclass ORDER BY 1"
	},
	frontiers => sub { "SELECT since, upper FROM source_writes.frontiers('$_[0]')" },
	progress => sub {
		"SELECT part, next_offset FROM source_writes.progress WHERE source = '$_[0]'::regclass ORDER BY 1"
	},
	errors => sub {
		"SELECT \"partition\", \"offset\", error FROM source_writes.errors
		 WHERE source = '$_[0]'::regclass ORDER BY 1, 2"
	},
	uncarried => sub {
		"SELECT ts, role, edit, \"row\"::text, reason FROM source_writes.uncarried_edits
		 WHERE source = '$_[0]'::regclass ORDER BY 1, 3, 4"
	},
	# sorted: a restore may give them in another order
	ftoptions => sub {
		"SELECT array_agg(o ORDER BY o) FROM pg_foreign_table, unnest(ftoptions) o
		 WHERE ftrelid = '$_[0]'::regclass"
	});
my @versions = qw(kv kv_v2 kv_raw o o_v2 gone_v2);
my %before;
for my $t (@versions)
{
	$before{$t}{$_} = $node->safe_psql('postgres', $queries{$_}->($t)) for keys %queries;
}

my $dir = PostgreSQL::Test::Utils::tempdir();
SwTest::run_client('pg_dump -Fc', 'pg_dump', '-Fc', '-f', "$dir/db.dump", $node->connstr('postgres'));
SwTest::run_client('pg_dump -Fp', 'pg_dump', '-Fp', '-f', "$dir/db.sql", $node->connstr('postgres'));

$node->safe_psql('postgres', 'CREATE DATABASE r1');
SwTest::run_client('pg_restore', 'pg_restore', '-d', $node->connstr('r1'), "$dir/db.dump");
$node->safe_psql('postgres', 'CREATE DATABASE r2');
SwTest::run_client('psql of the plain dump', 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-d', $node->connstr('r2'), '-f', "$dir/db.sql");

for my $db (qw(r1 r2))
{
	for my $t (@versions)
	{
		for my $q (sort keys %queries)
		{
			is($node->safe_psql($db, $queries{$q}->($t)), $before{$t}{$q},
				"$db: $t has its own $q back, copied from nothing");
		}
	}

	# the options act once: still refused after a restore
	my ($ret, $stdout, $stderr) = $node->psql($db,
		"ALTER FOREIGN TABLE kv_v2 OPTIONS (SET version_of 'o')");
	isnt($ret, 0, "$db: SET version_of is refused");
	like($stderr, qr/option "version_of" can only be given to CREATE FOREIGN TABLE/,
		"$db: ... with its message");

	# and a new version of a restored table copies its restored log
	$node->safe_psql($db, q{CREATE FOREIGN TABLE kv_v3 (k int, v text) SERVER k
		OPTIONS (topic 'kv', envelope 'upsert', key 'k', version_of 'kv_v2')});
	is($node->safe_psql($db, $queries{updates}->('kv_v3')), $before{kv_v2}{updates},
		"$db: a version of a restored version has its log");
}

done_testing();
