# Without shared_preload_libraries the extension still works for DDL and
# reads, and says, with a hint, that nothing will be ingested.
use strict;
use warnings;

use PostgreSQL::Test::Utils;
use Test::More;
use SwTest;

my $hint = qr/HINT:  Add source_writes to shared_preload_libraries in postgresql\.conf and restart the server to start the workers\./;

my $plain = SwTest::node('plain', preload => 0, no_extension => 1);

my ($ret, $stdout, $stderr) = $plain->psql('postgres', 'CREATE EXTENSION source_writes');
is($ret, 0, 'CREATE EXTENSION works without preloading');
like($stderr, qr/WARNING:  source_writes is not loaded through shared_preload_libraries/,
	'CREATE EXTENSION warns');
like($stderr, $hint, 'the warning hints how to enable the workers');

($ret, $stdout, $stderr) = $plain->psql('postgres',
	"CREATE SERVER k FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers 'localhost:9092')");
is($ret, 0, 'CREATE SERVER works');
like($stderr, $hint, 'CREATE SERVER warns');

($ret, $stdout, $stderr) = $plain->psql('postgres',
	"CREATE FOREIGN TABLE events (id int, note text) SERVER k OPTIONS (topic 'events')");
is($ret, 0, 'CREATE FOREIGN TABLE works');
like($stderr, $hint, 'CREATE FOREIGN TABLE warns');

# the table has its storage and can be written and read, without further
# warnings
is($plain->safe_psql('postgres', 'SELECT count(*) FROM source_writes.source_tables'),
	'1', 'catalog row created');
$plain->safe_psql('postgres', q{INSERT INTO events VALUES (1, 'x')});
($ret, $stdout, $stderr) = $plain->psql('postgres', 'SELECT id, note FROM events');
is($stdout, '1|x', 'rows can be read');
is($stderr, '', 'reading does not warn');

($ret, $stdout, $stderr) = $plain->psql('postgres', 'ALTER FOREIGN TABLE events ADD COLUMN n int');
is($stderr, '', 'ALTER does not warn');

# CREATE INDEX first thing in a session: PostgreSQL takes it as one on a
# foreign table before the library is loaded; the command says so, and
# works when run again in the session
($ret, $stdout, $stderr) = $plain->psql('postgres', q{
	CREATE INDEX events_id ON events (id);
	CREATE INDEX events_id ON events (id);
	SELECT schemaname || '.' || indexname FROM source_writes.indexes},
	on_error_stop => 0);
like($stderr, qr/ERROR:  source_writes was not loaded when this command began\n.*\n.*HINT:  Run the command again: the library is loaded now/,
	'CREATE INDEX first in a session says to run it again');
is($stdout, 'public.events_id', 'run again, it works');
# a restore makes indexes on the hidden heaps, and they go to their tables'
# schemas
my $heap = $plain->safe_psql('postgres', 'SELECT current_rel FROM source_writes.source_tables');
$plain->safe_psql('postgres', "CREATE INDEX events_note ON $heap (note)");
is($plain->safe_psql('postgres', q{SELECT 'events_note'::regclass::text}), 'events_note',
	'an index made on the hidden heap in a new session goes to the table\'s schema');

# with the library preloaded nothing warns
my $preloaded = SwTest::node('preloaded', no_extension => 1);
($ret, $stdout, $stderr) = $preloaded->psql('postgres', q{
	CREATE EXTENSION source_writes;
	CREATE SERVER k FOREIGN DATA WRAPPER source_writes OPTIONS (type 'kafka', brokers 'localhost:9092');
	CREATE FOREIGN TABLE events (id int) SERVER k OPTIONS (topic 'events');
});
is($ret, 0, 'DDL works when preloaded');
is($stderr, '', 'and does not warn');

done_testing();
