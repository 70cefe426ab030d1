# The owner's code that ingestion runs (defaults, CHECK constraints) runs
# as the owner, never as the superuser the worker connects as; a CHECK that
# fails while it is prepared is not skipped afterwards; retry_errors()
# takes SELECT, INSERT and DELETE, and moves each kept error once, as
# itself, even when the errors outnumber shared buffers, in memory that
# does not grow with them.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'esc:1', 'esc2:1', 'chk:1', 'ret:1', 'big:1', 'granted:1', 'checked:1' ]);
my $bootstrap = $broker->{bootstrap};
my $node = SwTest::node('owner_code', conf => "max_worker_processes = 24\nshared_buffers = 1MB\n");
my $dir = PostgreSQL::Test::Utils::tempdir();

sub produce { SwTest::produce($broker, @_); }

sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$bootstrap');
	CREATE ROLE attacker LOGIN; GRANT USAGE ON FOREIGN SERVER k TO attacker;
	GRANT CREATE ON SCHEMA public TO attacker});

# an immutable function in a default is folded when the decoder is made:
# as the owner, so it cannot make its owner a superuser
$node->safe_psql('postgres', q{
CREATE FUNCTION public.doit() RETURNS int LANGUAGE plpgsql VOLATILE AS $$
BEGIN
  IF (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user) THEN
    EXECUTE 'ALTER ROLE attacker SUPERUSER';
  END IF;
  RETURN 1;
END $$;
CREATE FUNCTION public.evil() RETURNS int LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN RETURN public.doit(); END $$;
CREATE FOREIGN TABLE public.esc (id int, x int DEFAULT public.evil())
  SERVER k OPTIONS (topic 'esc');
CREATE FOREIGN TABLE public.esc2 (id int, p int OPTIONS (source 'partition') DEFAULT public.evil())
  SERVER k OPTIONS (topic 'esc2', format 'csv');
}, extra_params => [ '-U', 'attacker' ]);
produce('esc', "a\t{\"id\": 1}");
produce('esc2', "a\t1");
sql(q{SELECT source_writes.wait_for('esc'); SELECT source_writes.wait_for('esc2')});
is(sql(q{SELECT count(*) FROM esc}) + sql(q{SELECT count(*) FROM esc2}), 2, 'both sources ingested');
is(sql(q{SELECT rolsuper FROM pg_roles WHERE rolname = 'attacker'}), 'f',
	'the owner\'s default ran as the owner, not as a superuser (json and csv)');

# a CHECK whose preparation fails once (an immutable function folded) is
# prepared again for the next row, not skipped
sql(q{CREATE SEQUENCE public.calls;
CREATE FUNCTION public.boom(int) RETURNS bool LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
  IF pg_catalog.nextval('public.calls') = 1 THEN RAISE EXCEPTION 'boom while prepared'; END IF;
  RETURN true;
END $$;
CREATE FOREIGN TABLE chk (id int CHECK (id > 0), b int CHECK (public.boom(1) AND b > 0))
  SERVER k OPTIONS (topic 'chk')});
produce('chk', "a\t{\"id\": 1, \"b\": 1}", "b\t{\"id\": -5, \"b\": -5}", "c\t{\"id\": 3, \"b\": 3}");
sql(q{SELECT source_writes.wait_for('chk')});
is(sql(q{SELECT count(*) FROM chk WHERE id < 0 OR b < 0}), '0', 'no row that breaks a CHECK is written');
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM chk}), '3', 'the good row after them is');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'chk'::regclass}), '2',
	'the others are kept as errors');

# a message whose row cannot be written (its key is too big for the key's
# index) is kept as an error; the ones after it go on
sql(q{CREATE FOREIGN TABLE big (k text, v int) SERVER k OPTIONS (topic 'big', envelope 'upsert', key 'k')});
my @chars = ('a' .. 'z', 'A' .. 'Z', '0' .. '9');
my $huge = join('', map { $chars[ int(rand(@chars)) ] } 1 .. 20000);
produce('big', "small\t{\"k\": \"small\", \"v\": 1}", "$huge\t{\"k\": \"$huge\", \"v\": 2}",
	"after\t{\"k\": \"after\", \"v\": 3}");
is(sql(q{SELECT source_writes.wait_for('big', '60 s')}), '', 'a row that cannot be written does not stop the source');
is(sql(q{SELECT string_agg(k || '=' || v, ',' ORDER BY k) FROM big}), 'after=3,small=1', 'the others are in');
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'big'::regclass}),
	qr/index row/, 'it is kept as an error, with the reason');

# retry_errors(): the privileges it takes, and 20000 errors over 1 MB of
# shared buffers, each moved once, as itself, in memory that does not grow
# with them (26 MB of payloads; the backend's peak grows by less than 8 MB)
my $n = 20000;
sql(qq{CREATE FOREIGN TABLE ret (id int, pad text) SERVER k OPTIONS (topic 'ret');
	CREATE ROLE deleter LOGIN; GRANT DELETE ON ret TO deleter;
	CREATE ROLE inserter LOGIN; GRANT SELECT, INSERT ON ret TO inserter;
	INSERT INTO source_writes.errors (source, ts, partition, "offset", value, error)
	SELECT 'ret'::regclass, 0, 0, g,
	       convert_to('{"id": ' || g || ', "pad": "' || repeat('x', 1300) || '"}', 'UTF8'), 'e'
	FROM generate_series(1, $n) g});
for my $role ('deleter', 'inserter')
{
	my ($ret, $out, $err) = $node->psql('postgres', q{SELECT source_writes.retry_errors('ret')},
		extra_params => [ '-U', $role ]);
	like($err, qr/permission denied/, "retry_errors refuses $role");
}
{
	my $session = $node->background_psql('postgres');
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	my $peak = sub {
		my $status = slurp_file("/proc/$pid/status");
		$status =~ /^VmHWM:\s+(\d+) kB/m or die "no VmHWM for $pid";
		return $1;
	};
	$session->query_safe(q{SELECT count(*) FROM source_writes.sources});
	my $before = $peak->();
	is($session->query_safe(q{SELECT source_writes.retry_errors('ret')}), $n, "all $n errors move");
	my $grown = $peak->() - $before;
	note("the backend's peak memory grew by $grown kB");
	cmp_ok($grown, '<', 8 * 1024, 'in memory that does not grow with the errors');
	$session->quit;
}
is(sql(q{SELECT count(*), count(DISTINCT id), min(id), max(id), bool_and(length(pad) = 1300) FROM ret}),
	"$n|$n|1|$n|t", 'each kept error moved once, as itself');

# kept errors whose index entries point to dead rows (errors deleted, not
# vacuumed yet): the retry passes them
sql(q{ALTER TABLE source_writes.errors SET (autovacuum_enabled = off);
	INSERT INTO source_writes.errors (source, ts, partition, "offset", value, error)
	SELECT 'ret'::regclass, 0, 1, g, convert_to('{"id": ' || (100000 + g) || '}', 'UTF8'), 'e'
	FROM generate_series(1, 3000) g;
	DELETE FROM source_writes.errors WHERE source = 'ret'::regclass AND "offset" % 3 <> 0});
is(sql(q{SELECT source_writes.retry_errors('ret')}), '1000', 'the errors left among deleted ones move');
is(sql(q{SELECT count(*), min(id), max(id) FROM ret WHERE id > 100000}), '1000|100003|103000',
	'each once');
sql(q{ALTER TABLE source_writes.errors RESET (autovacuum_enabled)});
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'ret'::regclass}), '0',
	'and left the errors');

# a privilege revoked from the owner holds for the next batch, though the
# worker keeps what it prepared for the table between batches: the source
# waits, its messages kept in the topic, until the owner has it again
sql(q{CREATE ROLE alice; CREATE ROLE bob; GRANT USAGE ON FOREIGN SERVER k TO alice;
	GRANT CREATE ON SCHEMA public TO alice, bob;
	SET ROLE bob;
	CREATE FUNCTION public.bobs_fn() RETURNS text LANGUAGE sql AS $$ SELECT 'bobs' $$;
	REVOKE EXECUTE ON FUNCTION public.bobs_fn() FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION public.bobs_fn() TO alice;
	SET ROLE alice;
	CREATE FOREIGN TABLE granted (id int, v text DEFAULT public.bobs_fn())
	  SERVER k OPTIONS (topic 'granted')});
produce('granted', "a\t{\"id\": 1}");
sql(q{SELECT source_writes.wait_for('granted')});
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM granted}), '1:bobs', 'a row with bob\'s function');
sql(q{SET ROLE bob; REVOKE EXECUTE ON FUNCTION public.bobs_fn() FROM alice});
produce('granted', "b\t{\"id\": 2}");
ok($node->poll_query_until('postgres', q{SELECT last_error LIKE '%permission denied for function bobs_fn%'
	FROM source_writes.sources WHERE source = 'granted'::regclass}), 'after bob revoked it: refused, saying why');
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM granted}), '1:bobs', 'nothing written after the revoke');
sql(q{SET ROLE bob; GRANT EXECUTE ON FUNCTION public.bobs_fn() TO alice});
sql(q{SELECT source_writes.wait_for('granted', '60 s')});
is(sql(q{SELECT string_agg(id || ':' || v, ',' ORDER BY id) FROM granted}), '1:bobs,2:bobs',
	'granted again: the message is written, once');

# the same for a function that runs later, in a domain's check: a lost
# privilege may not be the message's fault, which fails its batch (tried
# again) rather than being kept as an error at once
sql(q{SET ROLE bob;
	CREATE FUNCTION public.bobs_check(int) RETURNS bool LANGUAGE plpgsql AS $$ BEGIN RETURN $1 > 0; END $$;
	REVOKE EXECUTE ON FUNCTION public.bobs_check(int) FROM PUBLIC;
	GRANT EXECUTE ON FUNCTION public.bobs_check(int) TO alice;
	SET ROLE alice;
	CREATE DOMAIN public.positive AS int CHECK (public.bobs_check(VALUE));
	CREATE FOREIGN TABLE checked (id public.positive) SERVER k OPTIONS (topic 'checked')});
produce('checked', "a\t{\"id\": 1}");
sql(q{SELECT source_writes.wait_for('checked')});
is(sql(q{SELECT string_agg(id::text, ',') FROM checked}), '1', 'a row checked by bob\'s function');
sql(q{SET ROLE bob; REVOKE EXECUTE ON FUNCTION public.bobs_check(int) FROM alice});
produce('checked', "b\t{\"id\": 2}");
ok($node->poll_query_until('postgres', q{SELECT last_error LIKE '%permission denied for function bobs_check%'
	FROM source_writes.sources WHERE source = 'checked'::regclass}), 'after bob revoked it: refused, saying why');
is(sql(q{SELECT count(*) FROM checked}) . ' ' . sql(q{SELECT count(*) FROM source_writes.errors
	WHERE source = 'checked'::regclass}), '1 0', 'nothing written, and the message not kept as an error yet');
sql(q{SET ROLE bob; GRANT EXECUTE ON FUNCTION public.bobs_check(int) TO alice});
sql(q{SELECT source_writes.wait_for('checked', '60 s')});
is(sql(q{SELECT string_agg(id::text, ',' ORDER BY id) FROM checked}), '1,2',
	'granted again: the message is written, once');

done_testing();
