# Kafka rows keep what a person's rows keep.  The worker fires the table's
# triggers enabled REPLICA or ALWAYS (not ordinary ones), as logical
# replication's apply does, as the table's owner, restricted: BEFORE row
# triggers change or skip rows, AFTER row triggers see them written,
# statement triggers fire once per batch; on an upsert source a message
# is an INSERT or an UPDATE of its key's row, a tombstone a DELETE, and
# every message of a batch fires them (none is merged away).  An error a
# trigger raises keeps its message as an error at once in classes 22 and
# 23; other errors fail the batch, three times, before the message is
# kept.  A source that is a partition keeps its bounds; an upsert message
# whose key and value disagree, or whose key cannot give every key
# column, is an error, so that the tombstone of each row written deletes
# it; a database whose default isolation is serializable does not change
# how the worker writes.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $broker = SwTest::broker(topics => [ 'ev:2', 'kv:1', 'pp:1', 'nk:1', 'orders:1', 'counts:1', 'ser:1' ]);
my $bootstrap = $broker->{bootstrap};
my $node = SwTest::node('triggers', conf => "max_worker_processes = 16\n");

sub produce { SwTest::produce($broker, @_); }
sub sql { return $node->safe_psql('postgres', $_[0]); }

sql(qq{CREATE SERVER k FOREIGN DATA WRAPPER source_writes
	OPTIONS (type 'kafka', brokers '$bootstrap');
	CREATE ROLE alice;
	GRANT USAGE ON FOREIGN SERVER k TO alice;
	CREATE SCHEMA a AUTHORIZATION alice});

# alice's tables and trigger function: each firing noted with its event,
# role, search_path and transaction; BEFORE row triggers skip 'skip',
# turn 'upper' into 'UPPER', append '!' to 'once', refuse 'reject' (23514)
# and fail on 'boom'
sql(q{SET ROLE alice;
CREATE TABLE a.fired (n serial, tg text, event text, who text, path text, xid bigint,
	id text, v text);
CREATE FUNCTION a.note() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
	nid text;
	nv text;
BEGIN
	IF TG_LEVEL = 'ROW' AND TG_OP = 'DELETE' THEN
		nid := OLD.id; nv := OLD.v;
	ELSIF TG_LEVEL = 'ROW' AND TG_OP = 'UPDATE' THEN
		nid := NEW.id; nv := OLD.v || ' -> ' || NEW.v;
	ELSIF TG_LEVEL = 'ROW' THEN
		nid := NEW.id; nv := NEW.v;
	END IF;
	INSERT INTO a.fired (tg, event, who, path, xid, id, v)
	VALUES (TG_NAME, TG_WHEN || ' ' || TG_OP || ' ' || TG_LEVEL, current_user,
		current_setting('search_path'), txid_current(), nid, nv);
	IF TG_LEVEL = 'STATEMENT' THEN
		RETURN NULL;
	ELSIF TG_OP = 'DELETE' THEN
		RETURN OLD;
	ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'skip' THEN
		RETURN NULL;
	ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'upper' THEN
		NEW.v := 'UPPER';
	ELSIF TG_WHEN = 'BEFORE' AND NEW.v LIKE 'once%' THEN
		NEW.v := NEW.v || '!';
	ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'reject' THEN
		RAISE EXCEPTION 'rejected by the trigger' USING ERRCODE = 'check_violation';
	ELSIF TG_WHEN = 'BEFORE' AND NEW.v = 'boom' THEN
		RAISE EXCEPTION 'the trigger failed';
	END IF;
	RETURN NEW;
END $$;
CREATE FOREIGN TABLE a.ev (id text, v text) SERVER k OPTIONS (topic 'ev');
CREATE TRIGGER b_replica BEFORE INSERT ON a.ev FOR EACH ROW EXECUTE FUNCTION a.note();
CREATE TRIGGER a_always AFTER INSERT ON a.ev FOR EACH ROW EXECUTE FUNCTION a.note();
CREATE TRIGGER s_before BEFORE INSERT ON a.ev FOR EACH STATEMENT EXECUTE FUNCTION a.note();
CREATE TRIGGER s_after AFTER INSERT ON a.ev FOR EACH STATEMENT EXECUTE FUNCTION a.note();
CREATE TRIGGER ordinary BEFORE INSERT ON a.ev FOR EACH ROW EXECUTE FUNCTION a.note();
ALTER FOREIGN TABLE a.ev ENABLE REPLICA TRIGGER b_replica;
ALTER FOREIGN TABLE a.ev ENABLE ALWAYS TRIGGER a_always;
ALTER FOREIGN TABLE a.ev ENABLE ALWAYS TRIGGER s_before;
ALTER FOREIGN TABLE a.ev ENABLE REPLICA TRIGGER s_after});

#
# 1. An append source: which triggers fire, as whom, how often
#
my @msgs = map { my $v = $_ % 10 == 3 ? 'skip' : $_ % 10 == 7 ? 'upper' : "m$_";
	"k$_\t{\"id\": \"$_\", \"v\": \"$v\"}" } 1 .. 200;
produce('ev', @msgs);
sql(q{SELECT source_writes.wait_for('a.ev')});
is(sql(q{SELECT count(*), count(*) FILTER (WHERE v = 'UPPER'), count(*) FILTER (WHERE v = 'skip')
	FROM a.ev}), '180|20|0', 'BEFORE row triggers change rows and skip them');
is(sql(q{SELECT string_agg(tg || ' ' || n, ', ' ORDER BY tg)
	FROM (SELECT tg, count(*) n FROM a.fired GROUP BY tg) f}),
	'a_always 180, b_replica 200, s_after ' . sql(q{SELECT count(*) FROM a.fired WHERE tg = 's_after'})
	. ', s_before ' . sql(q{SELECT count(*) FROM a.fired WHERE tg = 's_after'}),
	'REPLICA and ALWAYS triggers fire for Kafka rows, the ordinary one does not');
is(sql(q{SELECT string_agg(DISTINCT who || ' / ' || path, ',') FROM a.fired}),
	'alice / pg_catalog, pg_temp', 'as the owner, with the search_path of the owner\'s code');
is(sql(q{SELECT count(*) FROM (SELECT xid FROM a.fired GROUP BY xid
	HAVING count(*) FILTER (WHERE tg = 's_before') <> 1
	    OR count(*) FILTER (WHERE tg = 's_after') <> 1) b}), '0',
	'statement triggers fire once in each batch that fires row triggers');
is(sql(q{SELECT count(*) FROM a.fired f JOIN a.ev e USING (id)
	WHERE f.tg = 'a_always' AND f.v IS DISTINCT FROM e.v}), '0',
	'AFTER row triggers see the row as written');
is(sql(q{SELECT string_agg(DISTINCT origin || ':' || role, ',') FROM source_writes.updates(NULL::a.ev)}),
	'kafka:alice', 'the log has the rows as the triggers left them, by the owner');
sql(q{TRUNCATE a.fired; INSERT INTO a.ev VALUES ('u1', 'by a person')});
is(sql(q{SELECT string_agg(tg, ',' ORDER BY n) FROM a.fired}), 's_before,ordinary,a_always',
	'a person\'s INSERT fires the ordinary and ALWAYS triggers, not the REPLICA ones');

# errors in triggers: 23514 keeps the message at once; a RAISE fails the
# batch, which is tried again, until the message is kept after three.  The
# messages of a chunk that failed are written again one at a time: the
# triggers fire on each message's row, not on what they made of it when
# the chunk failed
sql(q{TRUNCATE a.fired});
produce('ev', "r0\t{\"id\": \"r0\", \"v\": \"once\"}",
	"r1\t{\"id\": \"r1\", \"v\": \"reject\"}", "r2\t{\"id\": \"r2\", \"v\": \"boom\"}",
	"r3\t{\"id\": \"r3\", \"v\": \"after\"}");
sql(q{SELECT source_writes.wait_for('a.ev', '60 s')});
is(sql(q{SELECT string_agg(convert_from(key, 'UTF8') || ': ' || split_part(error, ' (', 1), ', '
	ORDER BY key) FROM source_writes.errors WHERE source = 'a.ev'::regclass}),
	'r1: rejected by the trigger, r2: the trigger failed', 'trigger errors keep their messages');
is(sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM a.ev WHERE id LIKE 'r%'}),
	'r0=once!,r3=after', 'the messages beside them are ingested, changed once by the trigger');
my @failed = slurp_file($node->logfile) =~ /ERROR:  the trigger failed/g;
is(scalar(@failed), 2, 'the RAISE failed two batches before its message was kept, in the third');

#
# 2. An upsert source: INSERT, UPDATE and DELETE triggers; every message of a
# batch fires them, none is merged away
#
sql(q{SET ROLE alice;
CREATE FOREIGN TABLE a.kv (id text OPTIONS (source 'key'), v text)
	SERVER k OPTIONS (topic 'kv', envelope 'upsert', key 'id');
CREATE TRIGGER b_row BEFORE INSERT OR UPDATE OR DELETE ON a.kv FOR EACH ROW EXECUTE FUNCTION a.note();
CREATE TRIGGER a_row AFTER INSERT OR UPDATE OR DELETE ON a.kv FOR EACH ROW EXECUTE FUNCTION a.note();
ALTER FOREIGN TABLE a.kv ENABLE ALWAYS TRIGGER b_row;
ALTER FOREIGN TABLE a.kv ENABLE REPLICA TRIGGER a_row;
TRUNCATE a.fired});
produce('kv', "a\t{\"v\": \"1\"}", "b\t{\"v\": \"skip\"}", "a\t{\"v\": \"2\"}", "a\t{\"v\": \"upper\"}",
	"c\t{\"v\": \"3\"}", "c\t");
sql(q{SELECT source_writes.wait_for('a.kv')});
is(sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM a.kv}), 'a=UPPER',
	'the last message of each key, as the triggers left it');
is(sql(q{SELECT string_agg(event || ' ' || id || ' ' || v, '; ' ORDER BY n) FROM a.fired
	WHERE tg = 'a_row'}),
	'AFTER INSERT ROW a 1; AFTER UPDATE ROW a 1 -> 2; AFTER UPDATE ROW a 2 -> UPPER; '
	. 'AFTER INSERT ROW c 3; AFTER DELETE ROW c 3',
	'each message fires its triggers: INSERT, UPDATE of the key\'s row, DELETE for a tombstone');
sql(q{UPDATE a.kv SET v = 'by a person' WHERE id = 'a'; TRUNCATE a.fired});
produce('kv', "a\t{\"v\": \"4\"}");
sql(q{SELECT source_writes.wait_for('a.kv')});
is(sql(q{SELECT string_agg(event || ' ' || id || ' ' || v, '; ' ORDER BY n) FROM a.fired}),
	'BEFORE UPDATE ROW a by a person -> 4; AFTER UPDATE ROW a by a person -> 4',
	'an overwrite of a person\'s edit is an UPDATE of it');
# a chunk that a trigger's error fails is written again a message at a
# time: the BEFORE triggers change each row once, as an INSERT and as an
# UPDATE
produce('kv', "a\t{\"v\": \"once a\"}", "d\t{\"v\": \"once d\"}", "e\t{\"v\": \"reject\"}");
sql(q{SELECT source_writes.wait_for('a.kv')});
is(sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM a.kv}), 'a=once a!,d=once d!',
	'an upsert\'s row is changed once by the trigger when its chunk is written again');
is(sql(q{SELECT count(*) FROM source_writes.errors WHERE source = 'a.kv'::regclass}), '1',
	'the message refused is kept');

#
# 3. A source that is a partition keeps its bounds
#
sql(q{CREATE TABLE pp (id int, v text) PARTITION BY RANGE (id);
	CREATE TABLE pp_low PARTITION OF pp FOR VALUES FROM (0) TO (100);
	CREATE FOREIGN TABLE pp_k PARTITION OF pp FOR VALUES FROM (200) TO (300)
	  SERVER k OPTIONS (topic 'pp')});
produce('pp', "\t{\"id\": 5, \"v\": \"low\"}", "\t{\"id\": null, \"v\": \"null\"}",
	"\t{\"id\": 250, \"v\": \"in\"}");
sql(q{SELECT source_writes.wait_for('pp_k')});
is(sql(q{SELECT string_agg(id || ':' || v, ',') FROM pp}), '250:in', 'rows within the bounds are ingested');
is(sql(q{SELECT count(*) FROM pp WHERE id = 5}), '0', 'a pruned query finds no row outside them');
is(sql(q{SELECT string_agg(error, ' | ' ORDER BY "offset") FROM source_writes.errors
	WHERE source = 'pp_k'::regclass}),
	'new row for relation "pp_k" violates partition constraint: Failing row contains (5, low). | '
	. 'new row for relation "pp_k" violates partition constraint: Failing row contains (null, null).',
	'the others are kept as errors, with PostgreSQL\'s message');

#
# 4. The message key names an upsert row, as Kafka's log compaction takes
# it: key columns from the value come from the message key too, a JSON
# object by field or, for one key column, a key that is not an object as
# its value.  A message whose key and value disagree, or whose key cannot
# give every key column, is an error; the tombstone of each row written
# deletes it.
#
sql(q{CREATE FOREIGN TABLE knk (k numeric, f float8, v text)
	SERVER k OPTIONS (topic 'nk', envelope 'upsert', key 'k, f')});
produce('nk', "{\"k\": 3, \"f\": 1}\t{\"k\": 4, \"f\": 1, \"v\": \"key-value-mismatch\"}",
	"{\"k\": 3.0, \"f\": 1}\t{\"k\": 3, \"f\": 1, \"v\": \"agrees\"}",
	"x\t{\"k\": 5, \"f\": 1, \"v\": \"key not an object\"}",
	"5\t{\"k\": 5, \"f\": 1, \"v\": \"a number key\"}");
sql(q{SELECT source_writes.wait_for('knk')});
is(sql(q{SELECT string_agg(k || '/' || f || '=' || v, ',' ORDER BY k) FROM knk}),
	'3/1=agrees', 'of a key of two columns, only the message whose key object agrees is written');
is(sql(q{SELECT string_agg(rtrim(substring(error FROM '^[^(:]*')), ' | ' ORDER BY "offset")
	FROM source_writes.errors WHERE source = 'knk'::regclass}),
	'message key and value disagree on key column "k" of upsert source table "knk" | '
	. 'message key gives no value for key column "k" of upsert source table "knk" | '
	. 'message key gives no value for key column "k" of upsert source table "knk"',
	'a key that disagrees, or that is not an object, is kept as an error, saying why');
like(sql(q{SELECT error FROM source_writes.errors WHERE source = 'knk'::regclass AND "offset" = 3}),
	qr/: The message key is a JSON number, not a JSON object, and the table has 2 key columns/,
	'... and which key it was');
produce('nk', "{\"k\": 3, \"f\": 1}\t");
sql(q{SELECT source_writes.wait_for('knk')});
is(sql(q{SELECT count(*) FROM knk}), '0', 'its key\'s tombstone deletes what the key wrote');

# one key column: a plain string, a JSON string, a JSON number
sql(q{CREATE FOREIGN TABLE orders (id text, v text)
	  SERVER k OPTIONS (topic 'orders', envelope 'upsert', key 'id');
	CREATE FOREIGN TABLE counts (n int, v text)
	  SERVER k OPTIONS (topic 'counts', envelope 'upsert', key 'n')});
produce('orders', "order-7\t{\"id\": \"order-7\", \"v\": \"plain string key\"}",
	"\"order-8\"\t{\"id\": \"order-8\", \"v\": \"JSON string key\"}",
	"order-9\t{\"id\": \"order-10\", \"v\": \"disagrees\"}",
	"order-11\t{\"id\": \"order-11\", \"v\": \"written, then deleted in its batch\"}",
	"\"order-11\"\t");
produce('counts', "42\t{\"n\": 42, \"v\": \"number key\"}", "43\t{\"n\": 44, \"v\": \"disagrees\"}",
	"{\"n\": 45}\t{\"n\": 45, \"v\": \"object key\"}");
sql(q{SELECT source_writes.wait_for('orders')});
sql(q{SELECT source_writes.wait_for('counts')});
is(sql(q{SELECT string_agg(id || '=' || v, ',' ORDER BY id) FROM orders}),
	'order-7=plain string key,order-8=JSON string key',
	'a plain string key and a JSON string key give the key column their value');
is(sql(q{SELECT string_agg(n || '=' || v, ',' ORDER BY n) FROM counts}),
	'42=number key,45=object key', 'a JSON number key gives an int key column its value');
is(sql(q{SELECT string_agg(error, ' | ' ORDER BY source::text) FROM source_writes.errors
	WHERE source IN ('orders'::regclass, 'counts'::regclass)}),
	'message key and value disagree on key column "n" of upsert source table "counts" '
	. '(column "n" of source table "counts", message key): The message key gives \'43\', the value \'44\'. | '
	. 'message key and value disagree on key column "id" of upsert source table "orders" '
	. '(column "id" of source table "orders", message key): The message key gives \'order-9\', the value \'order-10\'.',
	'a scalar key that disagrees with the value is kept as an error, with both keys');
is(sql(q{SELECT source_writes.retry_errors('orders')}), '0', 'retry_errors() decodes it the same way');
produce('orders', "order-7\t", "\"order-8\"\t", "order-10\t");
produce('counts', "42\t", "{\"n\": 45}\t");
sql(q{SELECT source_writes.wait_for('orders')});
sql(q{SELECT source_writes.wait_for('counts')});
is(sql(q{SELECT count(*) FROM orders}) . ',' . sql(q{SELECT count(*) FROM counts}), '0,0',
	'the tombstone of each row written deletes it');
is(sql(q{SELECT count(*) FROM source_writes.errors
	WHERE source IN ('orders'::regclass, 'counts'::regclass)}), '2', 'and none of them is an error');

#
# 5. A database and a role (the worker's) whose default isolation is
# serializable: the worker's transactions run at READ COMMITTED all the
# same
#
sql(q{ALTER DATABASE postgres SET default_transaction_isolation = 'serializable';
	ALTER ROLE CURRENT_USER SET default_transaction_isolation = 'serializable'});
sql(q{CREATE FOREIGN TABLE ser (k text OPTIONS (source 'key'), v int,
	iso text DEFAULT current_setting('transaction_isolation'))
	SERVER k OPTIONS (topic 'ser', envelope 'upsert', key 'k')});
produce('ser', map { "k" . ($_ % 5) . "\t{\"v\": $_}" } 1 .. 50);
sql(q{SELECT source_writes.wait_for('ser')});
sql(q{UPDATE ser SET v = -1});
produce('ser', map { "k" . ($_ % 5) . "\t{\"v\": $_}" } 51 .. 100);
sql(q{SELECT source_writes.wait_for('ser')});
is(sql(q{SELECT string_agg(k || '=' || v || ' ' || iso, ',' ORDER BY k) FROM ser}),
	'k0=100 read committed,k1=96 read committed,k2=97 read committed,k3=98 read committed,k4=99 read committed',
	'an upsert source ingests at READ COMMITTED');
is(sql(q{SELECT state, last_error IS NULL OR last_error = '' FROM source_writes.sources
	WHERE source = 'ser'::regclass}), 'running|t', 'with no error');
sql(q{ALTER DATABASE postgres RESET default_transaction_isolation;
	ALTER ROLE CURRENT_USER RESET default_transaction_isolation});

done_testing();
