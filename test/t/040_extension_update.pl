# ALTER EXTENSION source_writes UPDATE on a live database: a database that
# has used version 0.1 (sources of both kinds, rows, edits, the log) is
# updated while the workers run.  Afterwards its extension is object for
# object what CREATE EXTENSION makes today, and its sources keep their rows
# and their log, and take edits as before.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $node = SwTest::node('main', no_extension => 1);

# Every object of the extension, one line each with what defines it, in an
# order that does not depend on OIDs.
my $definition_query = q{
	WITH members AS (
		SELECT d.classid, d.objid, d.objsubid
		FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
		WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
		  AND e.extname = 'source_writes')
	SELECT pg_describe_object(m.classid, m.objid, m.objsubid) || E'\n' ||
	  coalesce(CASE m.classid
		WHEN 'pg_proc'::regclass THEN
		  pg_get_functiondef(m.objid) || ' acl ' ||
		  coalesce((SELECT proacl::text FROM pg_proc WHERE oid = m.objid), '-')
		WHEN 'pg_class'::regclass THEN (
		  SELECT c.relkind::text || ' acl ' || coalesce(c.relacl::text, '-') ||
		    ' rls ' || c.relrowsecurity || ' options ' ||
		    coalesce(c.reloptions::text, '-') || E'\n' ||
		    coalesce((SELECT string_agg(a.attname || ' ' ||
		                format_type(a.atttypid, a.atttypmod) ||
		                CASE WHEN a.attnotnull THEN ' not null' ELSE '' END ||
		                coalesce(' default ' || pg_get_expr(ad.adbin, ad.adrelid), '') ||
		                coalesce(' collate ' || co.collname, ''),
		                E'\n' ORDER BY a.attnum)
		              FROM pg_attribute a
		              LEFT JOIN pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
		              LEFT JOIN pg_collation co ON co.oid = a.attcollation
		                AND a.attcollation <> 'default'::regcollation
		              WHERE a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped), '') ||
		    E'\n' ||
		    coalesce((SELECT string_agg(con.conname || ' ' || pg_get_constraintdef(con.oid),
		                E'\n' ORDER BY con.conname)
		              FROM pg_constraint con WHERE con.conrelid = c.oid), '') || E'\n' ||
		    coalesce((SELECT string_agg(pg_get_indexdef(i.indexrelid), E'\n'
		                ORDER BY pg_get_indexdef(i.indexrelid))
		              FROM pg_index i WHERE i.indrelid = c.oid), '') || E'\n' ||
		    coalesce((SELECT string_agg(pg_get_triggerdef(t.oid), E'\n'
		                ORDER BY t.tgname)
		              FROM pg_trigger t WHERE t.tgrelid = c.oid AND NOT t.tgisinternal), '') ||
		    E'\n' ||
		    coalesce((SELECT string_agg(p.polname || ' ' || p.polcmd::text || ' ' ||
		                p.polroles::text || ' ' || coalesce(pg_get_expr(p.polqual, p.polrelid), '') ||
		                ' ' || coalesce(pg_get_expr(p.polwithcheck, p.polrelid), ''),
		                E'\n' ORDER BY p.polname)
		              FROM pg_policy p WHERE p.polrelid = c.oid), '') || E'\n' ||
		    CASE WHEN c.relkind = 'v' THEN pg_get_viewdef(c.oid) ELSE '' END ||
		    CASE WHEN c.relkind = 'S' THEN (
		      SELECT s.seqtypid::regtype || ' ' || s.seqstart || ' ' || s.seqincrement ||
		             ' ' || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcache || ' ' || s.seqcycle
		      FROM pg_sequence s WHERE s.seqrelid = c.oid) ELSE '' END
		  FROM pg_class c WHERE c.oid = m.objid)
		WHEN 'pg_namespace'::regclass THEN (
		  SELECT 'acl ' || coalesce(n.nspacl::text, '-')
		  FROM pg_namespace n WHERE n.oid = m.objid)
		WHEN 'pg_event_trigger'::regclass THEN (
		  SELECT e.evtevent || ' ' || e.evtfoid::regproc || ' ' || e.evtenabled::text ||
		         ' ' || coalesce(e.evttags::text, '-')
		  FROM pg_event_trigger e WHERE e.oid = m.objid)
		WHEN 'pg_foreign_data_wrapper'::regclass THEN (
		  SELECT w.fdwhandler::regproc || ' ' || w.fdwvalidator::regproc || ' ' ||
		         coalesce(w.fdwacl::text, '-') || ' ' || coalesce(w.fdwoptions::text, '-')
		  FROM pg_foreign_data_wrapper w WHERE w.oid = m.objid)
		WHEN 'pg_type'::regclass THEN (
		  SELECT format_type(t.oid, NULL) || ' ' || t.typtype::text
		  FROM pg_type t WHERE t.oid = m.objid)
		ELSE '' END, '?') || E'\n' ||
	  'comment ' || coalesce(obj_description(m.objid, m.classid::regclass::name), '-')
	FROM members m
	ORDER BY 1};

# a fresh installation of the default version, to compare with
$node->safe_psql('postgres', 'CREATE DATABASE fresh');
$node->safe_psql('fresh', 'CREATE EXTENSION source_writes');
my $default_version = $node->safe_psql('fresh',
	q{SELECT extversion FROM pg_extension WHERE extname = 'source_writes'});
my $fresh = $node->safe_psql('fresh', $definition_query);
isnt($default_version, '0.1', 'the default version is a later one');
like($fresh, qr/function source_writes\.updates/, 'the definitions name the functions');

# a database that has used 0.1
$node->safe_psql('postgres', q{
	CREATE EXTENSION source_writes VERSION '0.1';
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	  OPTIONS (type 'kafka', brokers '127.0.0.1:1');
	CREATE SERVER hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
	CREATE FOREIGN TABLE t (id int, note text) SERVER hooks;
	CREATE FOREIGN TABLE u (k int, v text) SERVER k
	  OPTIONS (topic 'u', envelope 'upsert', key 'k');
	CREATE ROLE alice;
	GRANT SELECT, INSERT, UPDATE, DELETE ON t, u TO alice;
	-- where the worker of u would have got (its brokers are not there)
	INSERT INTO source_writes.progress VALUES ('u', 0, 42), ('u', 1, 7);
});
# librdkafka's buffers, which version 0.1 let any role with USAGE on a
# server raise to gigabytes in its user mapping (made here by a superuser:
# 0.2 refuses them to others), and isolation.level, which 0.1 accepted
# (written into the catalog: 0.2 refuses it to everyone)
$node->safe_psql('postgres', q{
	GRANT USAGE ON FOREIGN SERVER k TO alice;
	CREATE USER MAPPING FOR alice SERVER k OPTIONS (
	  "rdkafka.queued.max.messages.kbytes" '2097151', "rdkafka.fetch.wait.max.ms" '50');
	CREATE USER MAPPING FOR CURRENT_USER SERVER k
	  OPTIONS ("rdkafka.queued.max.messages.kbytes" '65536');
	CREATE SERVER ka FOREIGN DATA WRAPPER source_writes OPTIONS (
	  type 'kafka', brokers '127.0.0.1:1', "rdkafka.fetch.max.bytes" '1000000000');
	ALTER SERVER ka OWNER TO alice;
	CREATE USER MAPPING FOR PUBLIC SERVER ka OPTIONS (
	  "rdkafka.queued.min.messages" '10000000', "rdkafka.queued.max.messages.kbytes" '8192');
	UPDATE pg_user_mapping
	  SET umoptions = umoptions || '{rdkafka.isolation.level=read_uncommitted}'
	  WHERE umuser = 'alice'::regrole;
});
$node->safe_psql('postgres', $_) for (
	q{INSERT INTO t SELECT g, 'row ' || g FROM generate_series(1, 20) g},
	q{INSERT INTO u SELECT g, 'v' || g FROM generate_series(1, 10) g},
	q{UPDATE t SET note = note || ' fixed' WHERE id % 5 = 0},
	q{DELETE FROM t WHERE id > 17},
	q{SET ROLE alice; UPDATE u SET v = 'alice' WHERE k <= 3},
	q{DELETE FROM u WHERE k = 10});
is($node->safe_psql('postgres',
		q{SELECT extversion FROM pg_extension WHERE extname = 'source_writes'}),
	'0.1', 'the database runs 0.1');

# 0.1 took temporary source tables, whose catalog rows stayed when their
# session ended (the library refuses them now: the rows they left are made
# here by hand, for a temporary table that is gone)
my $gone = $node->safe_psql('postgres', q{
	CREATE TEMPORARY TABLE scratch (id int); SELECT 'scratch'::regclass::oid});
$node->safe_psql('postgres', qq{
	SET session_replication_role = replica;	-- past the trigger that restores storage
	INSERT INTO source_writes.source_tables
	  SELECT $gone, 'webhook', current_rel, history_rel, upper, since, retain
	  FROM source_writes.source_tables WHERE relid = 't'::regclass;
	INSERT INTO source_writes.batches (source, batch, ts, origin, role, xid)
	  VALUES ($gone, nextval('source_writes.batch_ids'), 1, 'user', current_user,
	          pg_current_xact_id())});
my $orphans = q{SELECT (SELECT count(*) FROM source_writes.source_tables s
	WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.relid)) || ',' ||
	(SELECT count(*) FROM source_writes.batches b
	WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = b.source))};
is($node->safe_psql('postgres', $orphans), '1,1',
	'rows left by a temporary source table of 0.1');

my %queries = (
	't rows' => 'SELECT * FROM t ORDER BY id',
	'u rows' => 'SELECT * FROM u ORDER BY k',
	't log' => q{SELECT ts, diff, origin, role, data
	             FROM source_writes.updates(NULL::t) ORDER BY ts, diff, data},
	'u log' => q{SELECT ts, diff, origin, role, data
	             FROM source_writes.updates(NULL::u) ORDER BY ts, diff, data},
	'frontiers' => q{SELECT source_writes.frontiers('t'), source_writes.frontiers('u')});
my %before = map { $_ => $node->safe_psql('postgres', $queries{$_}) } keys %queries;

my ($update_stdout, $update_stderr);
$node->psql('postgres', 'ALTER EXTENSION source_writes UPDATE',
	stdout => \$update_stdout, stderr => \$update_stderr, on_error_die => 1);
is($node->safe_psql('postgres',
		q{SELECT extversion FROM pg_extension WHERE extname = 'source_writes'}),
	$default_version, 'updated to the default version');

is($node->safe_psql('postgres', $orphans), '0,0',
	'the update removes the rows temporary source tables left');

# object for object what a fresh installation has
my $updated = $node->safe_psql('postgres', $definition_query);
is($updated, $fresh, 'the updated extension is defined as a fresh one');

# the sources kept what they had
for my $what (sort keys %queries)
{
	is($node->safe_psql('postgres', $queries{$what}), $before{$what},
		"$what unchanged by the update");
}

# stored offsets are positions in the topic the table names, in a cluster
# the worker learns when it next reaches the brokers
is($node->safe_psql('postgres', q{
		SELECT string_agg(concat_ws(' ', part, next_offset, topic,
		                            coalesce(cluster_id, '?'), lost,
		                            coalesce(stopped, 'following')), ', ' ORDER BY part)
		FROM source_writes.progress WHERE source = 'u'::regclass}),
	'0 42 u ? 0 following, 1 7 u ? 0 following',
	'progress rows of 0.1 name their topic after the update');

# the buffers are capped where a role that is not a superuser could have
# raised them, with a warning; isolation.level is gone
is($node->safe_psql('postgres', q{
		SELECT string_agg(m, E'\n' ORDER BY m)
		FROM (SELECT concat_ws(' ', srvname,
		                       CASE WHEN usename = current_user THEN 'superuser' ELSE usename END,
		                       coalesce(umoptions::text, '-')) AS m
		      FROM pg_user_mappings WHERE srvname IN ('k', 'ka')) ms}),
	"k alice {rdkafka.fetch.wait.max.ms=50}\n"
	  . "k superuser {rdkafka.queued.max.messages.kbytes=65536}\n"
	  . "ka public {rdkafka.queued.max.messages.kbytes=8192}",
	'user mappings of roles that are not superusers keep to the caps');
is($node->safe_psql('postgres', q{SELECT srvoptions FROM pg_foreign_server WHERE srvname = 'ka'}),
	'{type=kafka,brokers=127.0.0.1:1}', 'and so do the servers they own');
like($update_stderr,
	qr/WARNING:  dropped options rdkafka\.queued\.max\.messages\.kbytes of user mapping for alice on server k: above the caps/,
	'the update says what it dropped');

# and take edits as before, in the same log
$node->safe_psql('postgres', q{
	SET ROLE alice;
	BEGIN;
	INSERT INTO t VALUES (100, 'after the update');
	UPDATE u SET v = 'after' WHERE k = 1;
	DELETE FROM t WHERE id = 1;
	COMMIT});
is($node->safe_psql('postgres', q{
		SELECT string_agg(diff || ' ' || origin || ' ' || role || ' ' || data::text, ', '
		                  ORDER BY diff, data::text)
		FROM source_writes.updates(NULL::t)
		WHERE ts = (SELECT max(ts) FROM source_writes.updates(NULL::t))}),
	'-1 user alice (1,"row 1"), 1 user alice (100,"after the update")',
	'an edit after the update is one batch of the log');
is($node->safe_psql('postgres', q{SELECT v FROM u WHERE k = 1}), 'after',
	'the upsert source takes updates');

# 0.3: indexes on the sources that 0.1 made, listed with the key of u
$node->safe_psql('postgres', q{
	CREATE INDEX t_note ON t (note);
	CREATE UNIQUE INDEX ON u (v, k)});
is($node->safe_psql('postgres', q{
		SELECT string_agg(schemaname || '.' || tablename || ' '
		                  || regexp_replace(indexname, '^current_\d+_[0-9a-f]+_key$', 'KEY')
		                  || ': ' || regexp_replace(indexdef, 'current_\d+_[0-9a-f]+_key', 'KEY'),
		                  E'\n' ORDER BY indexdef)
		FROM source_writes.indexes}),
	"public.t t_note: CREATE INDEX t_note ON public.t USING btree (note)\n"
	  . "public.u KEY: CREATE UNIQUE INDEX KEY ON public.u USING btree (k)\n"
	  . "public.u u_v_k_idx: CREATE UNIQUE INDEX u_v_k_idx ON public.u USING btree (v, k)",
	'indexes on the sources of 0.1, in source_writes.indexes');
is($node->safe_psql('postgres', q{
		SET enable_seqscan = off;
		SET enable_bitmapscan = off;
		SELECT format('SELECT string_agg(id::text, '','' ORDER BY id) FROM %s
		               WHERE note IN (''row 2'', ''after the update'')', current_rel)
		FROM source_writes.source_tables WHERE relid = 't'::regclass
		\gexec}),
	'2,100', 'rows written before and after the update are in the index');
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM source_writes.sources WHERE source IN ('t'::regclass, 'u'::regclass)}),
	'2', 'both sources are in the sources view');

# 0.3: rows keep where they came from (test 068 has storage made before
# 0.3).  Rows written before and after the update are edited, retracted
# and given new columns, and the log stays whole
is($node->safe_psql('postgres', q{
		SELECT string_agg(attname, ',' ORDER BY attname) FROM pg_attribute
		WHERE attrelid = (SELECT history_rel FROM source_writes.source_tables
		                  WHERE relid = 't'::regclass) AND attnum > 0}),
	'$batch,$delivery,$part,$pos,$retracted,id,note',
	'the history heap of a source of 0.1 has the columns of 0.3');
$node->safe_psql('postgres', q{
	SET ROLE alice;
	UPDATE t SET note = note || ' again' WHERE id IN (2, 100);
	DELETE FROM t WHERE id = 3;
	RESET ROLE;
	ALTER FOREIGN TABLE t ADD COLUMN extra text DEFAULT 'x';
	SET ROLE alice;
	UPDATE t SET note = 'last' WHERE id IN (2, 4);
	INSERT INTO t VALUES (101, 'new', 'y')});
is($node->safe_psql('postgres', q{
		SELECT string_agg(id || ' ' || note || ' ' || extra, ', ' ORDER BY id) FROM t
		WHERE id IN (2, 3, 4, 100, 101)}),
	'2 last x, 4 last x, 100 after the update again x, 101 new y',
	'edits of rows written before and after the update, and a column added after it');
is($node->safe_psql('postgres', q{
		SELECT count(*) FROM (SELECT data, sum(diff) FROM source_writes.updates(NULL::t)
		GROUP BY data HAVING sum(diff) NOT IN (0, 1)) bad}),
	'0', 'the log holds no negative or doubled multiplicity');
is($node->safe_psql('postgres', q{
		SELECT string_agg(coalesce(valid_to::text <> '', false) || ' ' || (data).note,
		                  ', ' ORDER BY valid_from, valid_to NULLS LAST)
		FROM source_writes.history(NULL::t) WHERE (data).id = 2}),
	'true row 2, true row 2 again, true row 2 again, false last',
	'history() has each version of a row, across the update and the new column');

done_testing();
