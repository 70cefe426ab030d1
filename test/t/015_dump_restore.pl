# pg_dump and pg_restore bring source tables back whole: contents, the
# whole log, the past as of each time, frontiers, options, owners and
# privileges, the key of an upsert source.  The restored catalog rows
# adopt the restored hidden relations, so that nothing is left over, and
# edits go on after the old upper, with batch ids the restored sequence has
# not given out; DDL and DROP work on the restored sources.  This holds for
# a custom-format dump with pg_restore (plain, parallel, in one
# transaction) and a plain dump run by psql, into a new cluster (other
# OIDs) as into the original one; and for a source whose format depends on
# its column options, which pg_dump sets after creating the table.
use strict;
use warnings;

use IPC::Run;
use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $src = SwTest::node('src');
my $me = $src->safe_psql('postgres', 'SELECT current_user');

# a table created, written and dropped first: the OIDs of the source
# cluster are not those a restore gets
$src->safe_psql('postgres', q{
	CREATE ROLE alice;		-- a writer with GRANTs
	CREATE ROLE bob;		-- owns the upsert source
	CREATE DOMAIN posint AS integer CHECK (VALUE > 0);
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE USER MAPPING FOR alice SERVER k
	  OPTIONS ("rdkafka.sasl.username" 'alice', "rdkafka.sasl.password" 'pw');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE USER MAPPING FOR PUBLIC SERVER hooks OPTIONS (secret 'whsec_test');
	GRANT USAGE ON FOREIGN SERVER k TO bob;

	CREATE FOREIGN TABLE scratch (id int, note text) SERVER k OPTIONS (topic 'scratch');
	INSERT INTO scratch VALUES (1, 'gone');
	DROP FOREIGN TABLE scratch;

	CREATE FOREIGN TABLE ev (
	    id     int,
	    kind   text,
	    amount numeric OPTIONS (field 'total'),
	    gone   text,
	    qty    posint,
	    at     timestamptz OPTIONS (source 'timestamp')
	) SERVER k OPTIONS (topic 'events', format 'json');
	CREATE FOREIGN TABLE u (region text, k int, v text) SERVER k
	  OPTIONS (topic 'u', envelope 'upsert', key 'region, k');
	ALTER FOREIGN TABLE u OWNER TO bob;
	CREATE SCHEMA "Hooks";
	CREATE FOREIGN TABLE "Hooks".payments (
	    id       text,
	    amount   numeric,
	    body     jsonb       OPTIONS (source 'body'),
	    received timestamptz OPTIONS (source 'received_at')
	) SERVER hooks OPTIONS (format 'json', signature_header 'X-Signature');
	GRANT USAGE ON SCHEMA "Hooks" TO alice;
	GRANT SELECT, INSERT, UPDATE, DELETE ON ev, u, "Hooks".payments TO alice;
});

# a value that is stored out of line, in the TOAST relation of the storage
my $toasted = q{(SELECT string_agg(md5(g::text || 'x'), '') FROM generate_series(1, 300) g)};

# batches by two roles, updates and deletes, columns added and dropped,
# retention that moves since, compaction
$src->safe_psql('postgres', $_) for (
	q{INSERT INTO ev SELECT g, 'k' || g % 3, g * 1.5, 'gone ' || g, g,
	    '2026-01-01 00:00+00'::timestamptz + g * interval '1 hour'
	  FROM generate_series(1, 20) g},
	q{INSERT INTO u SELECT r, g, 'v' || g
	  FROM unnest(ARRAY['eu', 'us']) r, generate_series(1, 5) g},
	q{INSERT INTO "Hooks".payments VALUES
	    ('p1', 10, '{"n": 1}', '2026-01-01 00:00+00'),
	    ('p2', 20, '{"n": 2}', '2026-01-02 00:00+00'),
	    ('p3', 30, '{"n": 3}', '2026-01-03 00:00+00')},
	q{UPDATE ev SET amount = amount + 1 WHERE id % 4 = 0},
	q{DELETE FROM ev WHERE id > 18},
	q{SET ROLE alice; UPDATE u SET v = 'by alice' WHERE k <= 2},
	q{SET ROLE alice; DELETE FROM "Hooks".payments WHERE id = 'p2'},
	q{ALTER FOREIGN TABLE ev ADD COLUMN note text},
	qq{UPDATE ev SET note = $toasted WHERE id = 5},
	q{INSERT INTO ev (id, kind, qty, note) VALUES (60, 'late', 6, 'added later')},
	q{ALTER FOREIGN TABLE ev DROP COLUMN gone},
	q{UPDATE ev SET note = 'after the drop' WHERE id = 6},
	# since moves to the upper of the next batch; compaction deletes the
	# history no readable time needs; then history is kept again
	q{ALTER FOREIGN TABLE ev OPTIONS (ADD retain_history '0')},
	q{UPDATE ev SET kind = 'before since' WHERE id = 7},
	q{ALTER FOREIGN TABLE ev OPTIONS (SET retain_history '100 years')},
	# one transaction, two roles: two batches at one timestamp (kept
	# by compaction: after since)
	q{BEGIN;
	  INSERT INTO ev (id, kind, qty) VALUES (50, 'mine', 5);
	  SET ROLE alice;
	  DELETE FROM ev WHERE id = 3;
	  COMMIT},
	q{UPDATE ev SET kind = 'kept' WHERE id IN (8, 9)},
	qq{UPDATE ev SET note = 'again ' || $toasted WHERE id = 5},
	q{DELETE FROM ev WHERE id = 10},
	q{SET ROLE alice; UPDATE ev SET qty = 99 WHERE id = 11},
	q{SET ROLE alice; UPDATE u SET k = 9 WHERE region = 'us' AND k = 5},
	q{DELETE FROM u WHERE region = 'eu' AND k = 4},
	q{UPDATE "Hooks".payments SET amount = 31 WHERE id = 'p3'});
ok($src->safe_psql('postgres', q{SELECT source_writes.compact('ev')}) > 0,
	'compaction deleted history before since');

# indexes of the users', in the tables' schemas, one on a column added
# later and one with a comment
$src->safe_psql('postgres', q{
	CREATE INDEX ev_kind ON ev (kind) WHERE qty > 0;
	COMMENT ON INDEX ev_kind IS 'by kind';
	CREATE INDEX ON ev (length(note));
	CREATE UNIQUE INDEX ON u (v, region, k);
	CREATE INDEX by_amount ON "Hooks".payments USING brin (amount);
	COMMENT ON INDEX "Hooks".by_amount IS 'by amount'});

my @sources = ('ev', 'u', '"Hooks".payments');
my %as_of_times;

# what a restore must bring back, per source (options in order: pg_dump
# sorts them)
my %queries = (
	contents => sub { "SELECT t::text FROM $_[0] t ORDER BY 1" },
	log => sub {
		"SELECT ts, diff, origin, role, data::text
		 FROM source_writes.updates(NULL::$_[0]) ORDER BY ts, diff, data::text";
	},
	batches => sub {
		"SELECT batch, ts, origin, role FROM source_writes.batches
		 WHERE source = '$_[0]'::regclass ORDER BY batch";
	},
	frontiers => sub { "SELECT since, upper FROM source_writes.frontiers('$_[0]')" },
	ftoptions => sub {
		"SELECT srvname, (SELECT array_agg(o ORDER BY o) FROM unnest(ftoptions) o) FROM pg_foreign_table JOIN pg_foreign_server s
		 ON s.oid = ftserver WHERE ftrelid = '$_[0]'::regclass";
	},
	columns => sub {
		"SELECT attname, format_type(atttypid, atttypmod), (SELECT array_agg(o ORDER BY o) FROM unnest(attfdwoptions) o)
		 FROM pg_attribute WHERE attrelid = '$_[0]'::regclass
		   AND attnum > 0 AND NOT attisdropped ORDER BY attnum";
	},
	owner => sub { "SELECT relowner::regrole, relacl FROM pg_class WHERE oid = '$_[0]'::regclass" },
	as_of => sub {
		# the contents as of since and as of each later batch of the original
		join '', map {
			"SET source_writes.as_of = $_; SELECT '$_: ' || count(*) || ' rows, '
			 || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) FROM $_[0] t;"
		} @{ $as_of_times{ $_[0] } };
	});
# the same for the whole database
my %global = (
	servers => "SELECT srvname, srvowner::regrole, (SELECT array_agg(o ORDER BY o) FROM unnest(srvoptions) o) FROM pg_foreign_server ORDER BY 1",
	mappings => "SELECT srvname, usename, (SELECT array_agg(o ORDER BY o) FROM unnest(umoptions) o) FROM pg_user_mappings ORDER BY 1, 2",
	sequence => q{SELECT pg_sequence_last_value(to_regclass('source_writes.batch_ids'))},
	catalog => 'SELECT relid::text, kind, since, upper FROM source_writes.source_tables ORDER BY 1',
	# the users' indexes, in their tables' schemas, with their comments
	indexes => q{
		SELECT i.schemaname, i.tablename, i.indexname, i.indexdef, c.relnamespace::regnamespace,
		       c.relowner::regrole, obj_description(c.oid, 'pg_class')
		FROM source_writes.indexes i
		JOIN pg_class c ON c.relname = i.indexname
		WHERE c.relnamespace <> 'source_writes_internal'::regnamespace
		ORDER BY 1, 2, 3});

# the output of a query, or its error
sub result
{
	my ($node, $db, $sql) = @_;
	my ($ret, $stdout, $stderr) = $node->psql($db, $sql, on_error_stop => 1);
	return $ret == 0 ? $stdout : "failed: $stderr";
}

sub record_state
{
	my ($node, $db) = @_;
	my %state;
	for my $what (keys %queries)
	{
		$state{$what}{$_} = result($node, $db, $queries{$what}->($_)) for @sources;
	}
	$state{global}{$_} = result($node, $db, $global{$_}) for keys %global;
	return \%state;
}

for my $source (@sources)
{
	my ($since, $upper) = split /\|/,
	  $src->safe_psql('postgres', "SELECT since, upper FROM source_writes.frontiers('$source')");
	$as_of_times{$source} = [ $since, split /\n/, $src->safe_psql('postgres', qq{
		SELECT DISTINCT ts FROM source_writes.batches
		WHERE source = '$source'::regclass AND ts >= $since AND ts < $upper ORDER BY ts}) ];
}
my $before = record_state($src, 'postgres');
for my $what (keys %queries)
{
	die "nothing to compare: $what of $_"
	  for grep { $before->{$what}{$_} =~ /^(failed: .*)?$/s } @sources;
}
my %oid_before = map { $_ => $src->safe_psql('postgres', "SELECT '$_'::regclass::oid") } @sources;
my %upper_before = map { $_ => (split /\|/, $before->{frontiers}{$_})[1] } @sources;
my $max_batch_before = $src->safe_psql('postgres', 'SELECT max(batch) FROM source_writes.batches');

# the state is worth comparing: history, two roles, one transaction with
# two batches, since moved, a TOASTed value, a key
like($before->{log}{ev}, qr/\|-1\|user\|alice\|/, 'ev: the log has retractions by alice');
like($before->{log}{ev}, qr/\|-1\|user\|\Q$me\E\|/, 'and by the superuser');
like($before->{log}{u}, qr/\|alice\|/, 'u: the log has edits by alice');
is($src->safe_psql('postgres', q{
		SELECT count(*) FROM (SELECT ts FROM source_writes.batches
		                      WHERE source = 'ev'::regclass GROUP BY ts HAVING count(*) = 2) t}),
	'1', 'ev: one transaction wrote two batches, one per role');
is($src->safe_psql('postgres', q{
		SELECT (SELECT since FROM source_writes.frontiers('ev'))
		       > (SELECT min(ts) FROM source_writes.batches WHERE source = 'ev'::regclass)}),
	't', 'ev: since is past its first batches');
my $toast_query = q{
	SELECT count(*) FROM pg_class c JOIN source_writes.source_tables s
	  ON c.oid IN (s.current_rel, s.history_rel)
	WHERE s.relid = 'ev'::regclass AND c.reltoastrelid <> 0
	  AND pg_relation_size(c.reltoastrelid) > 0};
is($src->safe_psql('postgres', $toast_query), '2',
	'ev: both hidden relations hold TOASTed values');

my $dir = PostgreSQL::Test::Utils::tempdir();

SwTest::run_client('pg_dump -Fc', 'pg_dump', '-Fc', '-f', "$dir/db.dump", $src->connstr('postgres'));
SwTest::run_client('pg_dump -Fp', 'pg_dump', '-Fp', '-f', "$dir/db.sql", $src->connstr('postgres'));

# a new cluster, with the library preloaded and the roles; the extension
# comes with the dump
my $new = SwTest::node('new', no_extension => 1);
$new->safe_psql('postgres', 'CREATE ROLE alice; CREATE ROLE bob');

# a. pg_restore of the custom-format dump
$new->safe_psql('postgres', 'CREATE DATABASE r1');
SwTest::run_client('pg_restore into a new cluster', 'pg_restore', '-d', $new->connstr('r1'), "$dir/db.dump");
# b. psql running the plain dump
$new->safe_psql('postgres', 'CREATE DATABASE r2');
SwTest::run_client('psql of the plain dump into a new cluster',
	'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', $new->connstr('r2'), '-f', "$dir/db.sql");
# c. more restores into the same cluster, in parallel and in one
# transaction, and a restore into the original cluster, beside the
# original database
$new->safe_psql('postgres', 'CREATE DATABASE r3');
SwTest::run_client('parallel pg_restore into the same cluster again',
	'pg_restore', '-j', '2', '-d', $new->connstr('r3'), "$dir/db.dump");
$new->safe_psql('postgres', 'CREATE DATABASE r4');
SwTest::run_client('pg_restore in a single transaction into the same cluster again',
	'pg_restore', '--single-transaction', '-d', $new->connstr('r4'), "$dir/db.dump");
$src->safe_psql('postgres', 'CREATE DATABASE copy');
SwTest::run_client('pg_restore into the original cluster',
	'pg_restore', '-d', $src->connstr('copy'), "$dir/db.dump");

# Check a restored database: it holds what the original held, nothing of
# the storage is left over, edits go on, drops leave nothing.
sub check_restored
{
	my ($node, $db, $label) = @_;
	my $after = record_state($node, $db);

	for my $source (@sources)
	{
		isnt(result($node, $db, "SELECT '$source'::regclass::oid"), $oid_before{$source},
			"$label: $source has another OID than in the original");
		is($after->{$_}{$source}, $before->{$_}{$source}, "$label: $source has the same $_")
		  for sort keys %queries;
	}
	is($after->{global}{$_}, $before->{global}{$_}, "$label: the same $_")
	  for sort keys %global;
	is(result($node, $db, $toast_query), '2', "$label: ev still has TOASTed values");

	# one catalog row per source table, and nothing else
	is(result($node, $db, q{
			SELECT string_agg(relid::text, ',' ORDER BY relid::text) FROM source_writes.source_tables}),
		'"Hooks".payments,ev,u', "$label: the catalog has one row per source table");
	is(result($node, $db, q{
			SELECT string_agg(c.oid::regclass::text, ',' ORDER BY c.oid::regclass::text)
			FROM pg_class c JOIN pg_foreign_table f ON f.ftrelid = c.oid}),
		'"Hooks".payments,ev,u', "$label: and there are no other foreign tables");

	# every relation of the internal schema is a hidden relation of a
	# source, or an index of one; each source has its two
	is(result($node, $db, q{
			SELECT string_agg(relname, ',') FROM pg_class c
			WHERE relnamespace = 'source_writes_internal'::regnamespace
			  AND NOT EXISTS (SELECT FROM source_writes.source_tables s
			                  WHERE c.oid IN (s.current_rel, s.history_rel))
			  AND NOT EXISTS (SELECT FROM pg_index i JOIN source_writes.source_tables s
			                    ON i.indrelid IN (s.current_rel, s.history_rel)
			                  WHERE i.indexrelid = c.oid)}),
		'', "$label: no relation in source_writes_internal is an orphan");
	is(result($node, $db, q{
			SELECT string_agg(s.relid::text || ':' || c.relkind::text || ':'
			                  || (c.relowner = f.relowner) || ':'
			                  || (SELECT count(*) FROM pg_depend d
			                      WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
			                        AND d.refobjid = s.relid AND d.deptype = 'i'),
			                  ',' ORDER BY s.relid::text, c.relname)
			FROM source_writes.source_tables s
			JOIN pg_class f ON f.oid = s.relid
			JOIN pg_class c ON c.oid IN (s.current_rel, s.history_rel)}),
		join(',', map { ("$_:r:true:1") x 2 } '"Hooks".payments', 'ev', 'u'),
		"$label: each source has two hidden heaps, owned by its owner, that depend on it");
	is(result($node, $db, q{
			SELECT count(*) FROM pg_class
			WHERE relnamespace = 'source_writes_internal'::regnamespace}),
		'7', "$label: six hidden heaps and one key index, no more");
	is(result($node, $db, q{
			SELECT string_agg(i.indexrelid::regclass::text || ' ' || (i.indrelid = s.current_rel),
			                  ',' ORDER BY i.indexrelid::regclass::text)
			FROM pg_index i JOIN source_writes.source_tables s
			  ON i.indrelid IN (s.current_rel, s.history_rel)
			WHERE s.relid = 'ev'::regclass}),
		'ev_kind true,ev_length_idx true', "$label: ev's indexes are on its current heap");
	is(result($node, $db, q{
			SET enable_seqscan = off;
			SELECT format('SELECT count(*) FROM %s WHERE kind = ''kept'' AND qty > 0', current_rel)
			FROM source_writes.source_tables WHERE relid = 'ev'::regclass
			\gexec}),
		'2', "$label: ev's rows are found through its index");
	is(result($node, $db, q{
			SELECT pg_get_indexdef(i.indexrelid) LIKE '%UNIQUE%(region, k)'
			FROM pg_index i JOIN source_writes.source_tables s ON i.indrelid = s.current_rel
			JOIN pg_class c ON c.oid = i.indexrelid
			WHERE s.relid = 'u'::regclass AND i.indisunique
			  AND c.relnamespace = 'source_writes_internal'::regnamespace}),
		't', "$label: u has its unique key index on (region, k)");
	my ($ret, $stdout, $stderr) = $node->psql($db, q{INSERT INTO u VALUES ('us', 1, 'again')});
	like($stderr, qr/duplicate key value violates the key of upsert source "u"/,
		"$label: the key of u holds");

	# new edits: by both roles, in batches after the old upper, with ids the
	# original did not give out, and in the log
	is(result($node, $db, $_), '', "$label: an edit works") for (
		q{INSERT INTO ev (id, kind, qty, note) VALUES (70, 'restored', 7, 'new')},
		q{UPDATE ev SET kind = 'changed' WHERE id = 1},
		q{SET ROLE alice; DELETE FROM ev WHERE id = 2},
		q{BEGIN;
		  UPDATE u SET v = 'after' WHERE region = 'eu' AND k = 1;
		  SET ROLE alice;
		  INSERT INTO u VALUES ('eu', 4, 'back');
		  COMMIT},
		q{SET ROLE alice; DELETE FROM "Hooks".payments WHERE id = 'p1'});
	is(result($node, $db, qq{
			SELECT string_agg(diff || ':' || role || ':' || (data).id || ':' || (data).kind,
			                  ',' ORDER BY ts, diff, data::text)
			FROM source_writes.updates(NULL::ev, since => $upper_before{ev})}),
		"1:$me:70:restored,-1:$me:1:k1,1:$me:1:changed,-1:alice:2:k2",
		"$label: ev: the log from the old upper on holds the new edits");
	is(result($node, $db, qq{
			SELECT string_agg(diff || ':' || role || ':' || (data).region || (data).k || ':' || (data).v,
			                  ',' ORDER BY ts, diff, data::text)
			FROM source_writes.updates(NULL::u, since => $upper_before{u})}),
		"-1:$me:eu1:by alice,1:$me:eu1:after,1:alice:eu4:back",
		"$label: u: the log from the old upper on holds the new edits, one batch per role");
	is(result($node, $db, qq{
			SELECT string_agg(diff || ':' || role || ':' || (data).id, ',')
			FROM source_writes.updates(NULL::"Hooks".payments, since => $upper_before{'"Hooks".payments'})}),
		'-1:alice:p1', "$label: payments: the log from the old upper on holds the new edit");
	my %new_batches = (ev => 3, u => 2, '"Hooks".payments' => 1);
	for my $source (@sources)
	{
		my $restored = join ',', map { (split /\|/)[0] } split /\n/, $before->{batches}{$source};
		is(result($node, $db, qq{
				SELECT count(*) || '|' || count(*) FILTER (WHERE ts >= $upper_before{$source})
				       || '|' || count(*) FILTER (WHERE batch > $max_batch_before)
				FROM source_writes.batches
				WHERE source = '$source'::regclass AND batch NOT IN ($restored)}),
			join('|', ($new_batches{$source}) x 3),
			"$label: $source: its new batches are at or after the old upper, with ids not given out before");
		is(result($node, $db,
				"SELECT upper > $upper_before{$source} FROM source_writes.frontiers('$source')"),
			't', "$label: $source: the upper moved on");
	}

	# DDL goes on: the restored storage follows an added column and a
	# renamed key column
	is(result($node, $db, q{
			ALTER FOREIGN TABLE ev ADD COLUMN extra int;
			UPDATE ev SET extra = 1 WHERE id = 70;
			ALTER FOREIGN TABLE u RENAME COLUMN k TO kk;
			SELECT (SELECT t::text FROM ev t WHERE id = 70)
			       || ' ' || ('key=region, kk' = ANY (ftoptions))
			FROM pg_foreign_table WHERE ftrelid = 'u'::regclass}),
		'(70,restored,,7,,new,1) true', "$label: ALTER FOREIGN TABLE works on restored sources");
	($ret, $stdout, $stderr) = $node->psql($db, q{INSERT INTO u VALUES ('us', 1, 'again')});
	like($stderr, qr/duplicate key value violates the key of upsert source "u"/,
		"$label: the key of u holds after the rename");

	# dropping the sources leaves nothing of them
	my $storage = result($node, $db, q{
		SELECT string_agg(c.oid::text, ',') FROM pg_class c, source_writes.source_tables s
		WHERE c.oid IN (s.current_rel, s.history_rel)
		   OR c.oid IN (SELECT reltoastrelid FROM pg_class
		                WHERE oid IN (s.current_rel, s.history_rel))
		   OR c.oid IN (SELECT indexrelid FROM pg_index
		                WHERE indrelid IN (s.current_rel, s.history_rel))});
	is(result($node, $db, 'DROP FOREIGN TABLE ev, u, "Hooks".payments'), '',
		"$label: the sources can be dropped");
	is(result($node, $db, "SELECT count(*) FROM pg_class WHERE oid IN ($storage)"), '0',
		"$label: DROP FOREIGN TABLE drops the hidden relations, their TOAST and the key index");
	is(result($node, $db, q{
			SELECT (SELECT count(*) FROM pg_class
			        WHERE relnamespace = 'source_writes_internal'::regnamespace)
			       || '|' || (SELECT count(*) FROM source_writes.source_tables)
			       || '|' || (SELECT count(*) FROM source_writes.batches)}),
		'0|0|0', "$label: and leaves nothing in source_writes_internal or the catalog");
}

check_restored($new, 'r1', 'pg_restore');
check_restored($new, 'r2', 'plain dump');
check_restored($new, 'r3', 'parallel pg_restore');
check_restored($new, 'r4', 'pg_restore --single-transaction');
check_restored($src, 'copy', 'restore into the original cluster');

# the original database was left alone
my $still = record_state($src, 'postgres');
is_deeply($still, $before, 'the original database is unchanged');

# A source whose format needs its column options.  pg_dump restores those
# with ALTER FOREIGN TABLE after CREATE FOREIGN TABLE, so the table is
# first created without them; the restore must still bring it back, and
# with it the other sources of the database.
$src->safe_psql('postgres', 'CREATE DATABASE fmt');
$src->safe_psql('fmt', q{
	CREATE EXTENSION source_writes;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE lines (line text, part int OPTIONS (source 'partition'))
	  SERVER k OPTIONS (topic 'lines', format 'text');
	CREATE FOREIGN TABLE other (id int) SERVER k OPTIONS (topic 'other');
	INSERT INTO lines VALUES ('one', 0), ('two', 1);
	DELETE FROM lines WHERE line = 'one';
	INSERT INTO other VALUES (1);
});
my %fmt_log = map {
	$_ => "SELECT diff, data::text FROM source_writes.updates(NULL::$_) ORDER BY ts, diff, data::text"
} qw(lines other);
my %fmt_before = map { $_ => $src->safe_psql('fmt', $fmt_log{$_}) } qw(lines other);
SwTest::run_client('pg_dump of a text-format source', 'pg_dump', '-Fc', '-f', "$dir/fmt.dump",
	$src->connstr('fmt'));
$new->safe_psql('postgres', 'CREATE DATABASE fmt');
SwTest::run_client('pg_restore of a text-format source with a metadata column',
	'pg_restore', '-d', $new->connstr('fmt'), "$dir/fmt.dump");
is(result($new, 'fmt', $fmt_log{$_}), $fmt_before{$_}, "$_: the log is restored")
  for qw(lines other);

done_testing();
