# pg_upgrade of a cluster that preloads the library: the workers stay out of
# its way, and the sources come through whole: contents, log, frontiers,
# the key of an upsert source, and the internal dependencies of their hidden
# relations, which pg_upgrade does not carry (the upgraded cluster records
# them again), so that dropping a hidden relation is refused as before.
# Edits go on after it, later in time, and dropping a source afterwards
# leaves nothing of it behind.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $old = SwTest::node('old');
$old->safe_psql('postgres', q{
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE t (id int, note text) SERVER k OPTIONS (topic 't');
	CREATE FOREIGN TABLE u (k int, v text) SERVER k
	  OPTIONS (topic 'u', envelope 'upsert', key 'k');
	CREATE ROLE alice;
	GRANT SELECT, INSERT, UPDATE, DELETE ON t, u TO alice;
	CREATE INDEX t_note ON t (note);
	COMMENT ON INDEX t_note IS 'by note';
	CREATE INDEX ON u (v);
});

# several batches, by two roles, one of them over both sources
$old->safe_psql('postgres', $_) for (
	q{INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 20) g},
	q{INSERT INTO u SELECT g, 'v' || g FROM generate_series(1, 10) g},
	q{UPDATE t SET note = note || ' fixed' WHERE id % 5 = 0},
	q{DELETE FROM t WHERE id > 17},
	q{SET ROLE alice; BEGIN;
	  INSERT INTO t VALUES (100, 'by alice');
	  UPDATE u SET v = 'alice' WHERE k <= 3;
	  COMMIT},
	q{DELETE FROM u WHERE k = 10},
	q{SET ROLE alice; UPDATE u SET k = 11 WHERE k = 9});

# what the upgrade must keep, per source
my %queries = (
	contents => {
		t => 'SELECT * FROM t ORDER BY id',
		u => 'SELECT * FROM u ORDER BY k'
	},
	log => {
		map {
			$_ => "SELECT ts, diff, origin, role, data
			       FROM source_writes.updates(NULL::$_) ORDER BY ts, diff, data"
		} qw(t u)
	},
	frontiers => { map { $_ => "SELECT * FROM source_writes.frontiers('$_')" } qw(t u) },
	batches => {
		map {
			$_ => "SELECT batch, ts, origin, role FROM source_writes.batches
			       WHERE source = '$_'::regclass ORDER BY batch"
		} qw(t u)
	});
my %before;
for my $what (keys %queries)
{
	for my $source (qw(t u))
	{
		$before{$what}{$source} = $old->safe_psql('postgres', $queries{$what}{$source});
		die "nothing to compare: $what of $source" if $before{$what}{$source} eq '';
	}
}
is($old->safe_psql('postgres',
		q{SELECT count(DISTINCT ts) FROM source_writes.batches WHERE source = 't'::regclass}),
	'4', 'the log of t has several batches');
like($before{log}{t}, qr/\|alice\|/, 'some by another role');

# the internal dependencies of the hidden relations on their tables
my $depends_query = q{
	SELECT count(*) FROM pg_depend d JOIN source_writes.source_tables s
	  ON d.objid IN (s.current_rel, s.history_rel)
	WHERE d.classid = 'pg_class'::regclass AND d.refclassid = 'pg_class'::regclass
	  AND d.refobjid = s.relid AND d.deptype = 'i'};
is($old->safe_psql('postgres', $depends_query), '4',
	'before the upgrade, each hidden relation depends on its table');
my $current_t_query = q{SELECT current_rel FROM source_writes.source_tables WHERE relid = 't'::regclass};
my ($ret, $stdout, $stderr);
my $current_t = $old->safe_psql('postgres', $current_t_query);
($ret, $stdout, $stderr) = $old->psql('postgres', "DROP TABLE $current_t");
like($stderr, qr/cannot drop table \Q$current_t\E because foreign table t requires it/,
	'and DROP TABLE of one is refused');

# the relations of the internal schema, as one line
my $internal_query = q{
	SELECT string_agg(relname, ',' ORDER BY relname) FROM pg_class
	WHERE relnamespace = 'source_writes_internal'::regnamespace};
# t's rows in the extension's catalog
my $catalog_query = q{
	SELECT (SELECT count(*) FROM source_writes.source_tables WHERE relid::oid = %1$s)
	       || '|' ||
	       (SELECT count(*) FROM source_writes.batches WHERE source = %1$s)};

# before the upgrade, dropping a source leaves nothing of it
my $internal = $old->safe_psql('postgres', $internal_query);
$old->safe_psql('postgres', q{
	CREATE FOREIGN TABLE scratch (id int) SERVER k OPTIONS (topic 'scratch');
	INSERT INTO scratch VALUES (1);
});
my $scratch = $old->safe_psql('postgres', q{SELECT 'scratch'::regclass::oid});
$old->safe_psql('postgres', 'DROP FOREIGN TABLE scratch');
is($old->safe_psql('postgres', $internal_query), $internal,
	'before the upgrade, DROP FOREIGN TABLE removes the hidden relations');
is($old->safe_psql('postgres', sprintf($catalog_query, $scratch)), '0|0',
	'and the catalog rows');

$old->stop;

# the new cluster preloads the library too: its launcher must not start
# while pg_upgrade restores the schema
my $new = SwTest::node('new', start => 0);
my $oldbindir = $old->config_data('--bindir');
my $newbindir = $new->config_data('--bindir');

# pg_upgrade writes files into its current directory; copy mode is its
# default in PostgreSQL 15
chdir PostgreSQL::Test::Utils::tempdir() or die "chdir: $!";
command_ok(
	[
		"$newbindir/pg_upgrade", '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $oldbindir, '-B', $newbindir,
		'-s', $new->host, '-p', $old->port, '-P', $new->port
	],
	'pg_upgrade succeeds with the library preloaded');
# its logs stay in the new cluster when it fails
my @logs = glob($new->data_dir . '/pg_upgrade_output.d/*/log/*.log');
if (@logs)
{
	note "=== $_\n" . slurp_file($_) for @logs;
	die 'pg_upgrade failed';
}

$new->start;
ok($new->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity WHERE backend_type = 'source_writes launcher'}),
	'the launcher runs in the upgraded cluster');

ok($new->poll_query_until('postgres', "SELECT ($depends_query) = 4"),
	'the upgraded cluster has the internal dependencies again');
# pg_upgrade makes the users' indexes beside the hidden heaps, whose
# tables it has not given back yet: they go back to their tables' schemas
is($new->safe_psql('postgres', q{
		SELECT string_agg(c.oid::regclass || ' ' || coalesce(obj_description(c.oid, 'pg_class'), '-'),
		                  ',' ORDER BY c.relname)
		FROM source_writes.indexes i JOIN pg_class c ON c.relname = i.indexname
		WHERE i.indexname !~ '^current_'}),
	't_note by note,u_v_idx -', 'the users\' indexes are in their tables\' schemas again');
is($new->safe_psql('postgres', q{
		SET enable_seqscan = off;
		SELECT format('SELECT count(*) FROM %s WHERE note = ''row 3''', current_rel)
		FROM source_writes.source_tables WHERE relid = 't'::regclass
		\gexec}),
	'1', 'and find the rows');
$current_t = $new->safe_psql('postgres', $current_t_query);
($ret, $stdout, $stderr) = $new->psql('postgres', "DROP TABLE $current_t");
like($stderr, qr/cannot drop table \Q$current_t\E because foreign table t requires it/,
	'DROP TABLE of a hidden relation is refused');
($ret, $stdout, $stderr) = $new->psql('postgres',
	"DROP TABLE source_writes_internal.$_") for split /,/, $new->safe_psql('postgres', $internal_query);
is($new->safe_psql('postgres', $internal_query), $internal, 'of every one');

# without its dependency, as pg_upgrade leaves a hidden relation until the
# cluster records them again, DROP TABLE of it is refused all the same
$new->safe_psql('postgres', qq{SET allow_system_table_mods = on;
	DELETE FROM pg_depend WHERE classid = 'pg_class'::regclass AND objid = '$current_t'::regclass});
is($new->safe_psql('postgres', $depends_query), '3', 'a dependency gone');
($ret, $stdout, $stderr) = $new->psql('postgres', "DROP TABLE $current_t");
like($stderr, qr/cannot drop table \Q$current_t\E because foreign table t requires it/,
	'DROP TABLE of its hidden relation is refused');
$new->restart;
ok($new->poll_query_until('postgres', "SELECT ($depends_query) = 4"),
	'the cluster records it again when it starts');

for my $what (qw(contents log frontiers batches))
{
	for my $source (qw(t u))
	{
		is($new->safe_psql('postgres', $queries{$what}{$source}), $before{$what}{$source},
			"$source: the same $what after the upgrade");
	}
}

# edits go on, in batches later than the old upper
my %old_upper = map { $_ => (split /\|/, $before{frontiers}{$_})[1] } qw(t u);
my %new_batches = (t => 3, u => 2);
$new->safe_psql('postgres', $_) for (
	q{INSERT INTO t VALUES (200, 'after')},
	q{UPDATE t SET note = 'changed' WHERE id = 1},
	q{SET ROLE alice; DELETE FROM t WHERE id = 2},
	q{INSERT INTO u VALUES (20, 'after')},
	q{UPDATE u SET v = 'changed' WHERE k = 1});
is($new->safe_psql('postgres', 'SELECT id, note FROM t WHERE id IN (1, 2, 200) ORDER BY id'),
	"1|changed\n200|after", 't: the edits are there');
my $me = $new->safe_psql('postgres', 'SELECT current_user');
is($new->safe_psql('postgres', qq{
		SELECT string_agg(diff || ':' || role || ':' || (data).id, ',' ORDER BY ts, diff, data)
		FROM source_writes.updates(NULL::t, since => $old_upper{t})}),
	"1:$me:200,-1:$me:1,1:$me:1,-1:alice:2",
	't: the log from the old upper on holds exactly the new edits');
for my $source (qw(t u))
{
	my $old_count = () = $before{batches}{$source} =~ /^/mg;
	is($new->safe_psql('postgres', qq{
			SELECT count(*) - $old_count || '|' || count(*) FILTER (WHERE ts > $old_upper{$source})
			FROM source_writes.batches WHERE source = '$source'::regclass}),
		"$new_batches{$source}|$new_batches{$source}",
		"$source: each new batch has a timestamp greater than the old upper");
	ok($new->safe_psql('postgres', "SELECT upper FROM source_writes.frontiers('$source')")
		  > $old_upper{$source}, "$source: the upper moves on");
}
is($new->safe_psql('postgres', 'SELECT k, v FROM u WHERE k IN (1, 20) ORDER BY k'),
	"1|changed\n20|after", 'u: the edits are there');
($ret, $stdout, $stderr) = $new->psql('postgres', q{INSERT INTO u VALUES (2, 'again')});
like($stderr, qr/duplicate key value violates the key of upsert source "u"/,
	'u: its key still holds');

# dropping t leaves nothing of it: compare the internal schema before and
# after, and look for its catalog rows
my $t_oid = $new->safe_psql('postgres', q{SELECT 't'::regclass::oid});
my $internal_before = $new->safe_psql('postgres', $internal_query);
my %of_t = map { $_ => 1 } split /\n/, $new->safe_psql('postgres', q{
	SELECT c.relname FROM source_writes.source_tables s, pg_class c
	WHERE s.relid = 't'::regclass
	  AND (c.oid IN (s.current_rel, s.history_rel)
	       OR c.oid IN (SELECT indexrelid FROM pg_index
	                    WHERE indrelid IN (s.current_rel, s.history_rel)))});
die 't has no hidden relations' unless %of_t;
# (they go with it through internal dependencies)
note 'internal dependencies of the hidden relations of t: ',
  $new->safe_psql('postgres', q{
	SELECT count(*) FROM pg_depend d JOIN source_writes.source_tables s
	  ON d.objid IN (s.current_rel, s.history_rel)
	WHERE d.classid = 'pg_class'::regclass AND d.refobjid = s.relid
	  AND d.deptype = 'i' AND s.relid = 't'::regclass});
$new->safe_psql('postgres', 'DROP FOREIGN TABLE t');
is($new->safe_psql('postgres', $internal_query),
	join(',', grep { !$of_t{$_} } split /,/, $internal_before),
	'after the upgrade, DROP FOREIGN TABLE t leaves none of its relations in source_writes_internal');
is($new->safe_psql('postgres', sprintf($catalog_query, $t_oid)), '0|0',
	'and no row for it in source_tables or batches');

done_testing();
