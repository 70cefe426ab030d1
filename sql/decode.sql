--
-- The decoder: one message (value, key, metadata) into a row of a source
-- table, as the Kafka worker, retry_errors() and the webhook worker decode
-- them.  test_decode() keeps a table's decoder for the session, as a worker
-- does, so each message below also shows that the ones before it, failed
-- or not, left the decoder fit for the next.  Errors name the column (and
-- field) whose value was wrong, never the whole message.
--
CREATE FUNCTION test_decode(src anyelement, value bytea, key bytea DEFAULT NULL,
                            part int DEFAULT 0, "offset" bigint DEFAULT 0,
                            ts timestamptz DEFAULT NULL, headers bytea[] DEFAULT NULL,
                            tombstone boolean DEFAULT false)
RETURNS anyelement AS 'source_writes_test', 'source_writes_test_decode' LANGUAGE C;

CREATE SERVER decode_kafka FOREIGN DATA WRAPPER source_writes
  OPTIONS (type 'kafka', brokers 'localhost:9092');
CREATE SERVER decode_hooks FOREIGN DATA WRAPPER source_writes OPTIONS (type 'webhook');
CREATE SCHEMA dec;
SET search_path = dec, public;
SET timezone = 'UTC';

--
-- json
--
CREATE FOREIGN TABLE j (
  id      int,
  id_text text OPTIONS (field 'id'),
  name    varchar(5),
  amount  numeric OPTIONS (field 'total'),
  at      timestamptz,
  ok      boolean,
  tags    text[],
  status  text DEFAULT 'new',
  doc     jsonb,
  raw     json
) SERVER decode_kafka OPTIONS (topic 'j');

-- fields fill the columns of their name, or whose field option names them
-- (one field may fill several); values go through the types' input
-- functions; other fields are ignored; a missing field gives the column's
-- DEFAULT, or NULL
SELECT * FROM test_decode(NULL::j,
  '{"id": 1, "name": "ann", "total": 12.50, "at": "2024-05-01T10:00:00Z",
    "ok": true, "tags": "{a,b}", "extra": [1, {"x": 2}], "more": null}');
-- JSON null is NULL, not the default; a field named like a column that
-- reads another field is ignored; of a field given twice, the last counts
SELECT * FROM test_decode(NULL::j,
  '{"id": 7, "status": null, "amount": 5, "total": 7e2, "ok": false, "id": 2}');
-- strings are de-escaped
SELECT name, status FROM test_decode(NULL::j,
  convert_to('{"name": "a\"\u00e9\\", "status": "tab\there\nnewline \ud83d\ude00"}', 'UTF8'));
-- field names are de-escaped too; "\u0000" and lone surrogates are refused
-- only where they would have to become text
SELECT id, status FROM test_decode(NULL::j,
  convert_to('{"i\u0064": 8, "a\"b\\": 1, "ignored": "\u0000",
               "nested": {"x\u0000": "\ud83d"}, "st\\atus": 0, "status": "s"}', 'UTF8'));
SELECT * FROM test_decode(NULL::j, convert_to('{"id": 1, "name": "\ud83d"}', 'UTF8'));
SELECT * FROM test_decode(NULL::j, convert_to('{"id": 1, "n\u0000me": "x"}', 'UTF8'));
-- json and jsonb take a nested value as its raw text, and a scalar as JSON
-- (a string keeps its quotes and escapes); JSON null is NULL
SELECT doc, raw FROM test_decode(NULL::j,
  '{"doc": {"b": [1, 2], "a": "x"}, "raw": {"b":  [1,2] , "a": "x"}}');
SELECT doc, raw FROM test_decode(NULL::j, convert_to('{"doc": "a\tb", "raw": 12.50}', 'UTF8'));
SELECT doc, raw FROM test_decode(NULL::j, '{"doc": [true, null], "raw": false}');
SELECT doc IS NULL AS doc_null, raw IS NULL AS raw_null
FROM test_decode(NULL::j, '{"doc": null, "raw": null}');
SELECT * FROM test_decode(NULL::j, '{}');

-- values the column's type does not take, typmod included
SELECT * FROM test_decode(NULL::j, '{"id": 2, "name": "too long"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::j, '{"id": "two"}');
SELECT * FROM test_decode(NULL::j, '{"total": "lots"}');
SELECT * FROM test_decode(NULL::j, '{"ok": 2}');
SELECT * FROM test_decode(NULL::j, '{"id": 99999999999}');
-- a nested object or array only for json and jsonb columns
SELECT * FROM test_decode(NULL::j, '{"id": 3, "tags": ["a", "b"]}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::j, '{"id": {"n": 3}}');

-- broken JSON: where it broke, and what the parser expected
SELECT * FROM test_decode(NULL::j, '{"id": 1, "name": }');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::j, '{"id": 1');
SELECT * FROM test_decode(NULL::j, '{"id": 1} x');
SELECT * FROM test_decode(NULL::j, '{"id": 1, "name": tru}');
SELECT * FROM test_decode(NULL::j, '');
SELECT * FROM test_decode(NULL::j, convert_to('{"name": "a\qb"}', 'UTF8'));
-- a long bad token is quoted only in part
SELECT * FROM test_decode(NULL::j, convert_to('{"id": 1, "name": "' || repeat('x', 500), 'UTF8'));
-- a message that is not an object
SELECT * FROM test_decode(NULL::j, '[{"id": 1}]');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::j, '"id"');
SELECT * FROM test_decode(NULL::j, '7');
SELECT * FROM test_decode(NULL::j, 'null');
-- bytes that are not UTF-8, and NUL bytes, wherever they are
SELECT * FROM test_decode(NULL::j, '\x7b226e616d65223a202261ff227d');  -- {"name": "a\377"}
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::j, '\x7b7d00');  -- {}\0
SELECT * FROM test_decode(NULL::j, '\x7b22e282');  -- {" and a cut character
-- \u0000 cannot be text
SELECT * FROM test_decode(NULL::j, convert_to('{"name": "a\u0000"}', 'UTF8'));
-- no value (a tombstone) for a source that is not upsert
SELECT * FROM test_decode(NULL::j, NULL);
\echo :LAST_ERROR_SQLSTATE
-- a long string with escapes
SELECT id, length(status), replace(left(status, 4), E'\n', '|') AS starts FROM test_decode(NULL::j,
  convert_to('{"id": 4, "status": "' || repeat('a\n', 600000) || '"}', 'UTF8'));
-- after all these errors, the decoder goes on
SELECT id, name FROM test_decode(NULL::j, '{"id": 5, "name": "five"}');
-- and follows the table's changes
ALTER FOREIGN TABLE j ADD COLUMN added int DEFAULT 1;
SELECT id, added FROM test_decode(NULL::j, '{"id": 6}');
SELECT id, added FROM test_decode(NULL::j, '{"id": 6, "added": 2}');

-- defaults are evaluated per message; domains hold, for missing fields
-- and metadata too; stored generated columns are left to the writer
CREATE SEQUENCE s;
CREATE DOMAIN positive AS int CHECK (VALUE > 0);
CREATE DOMAIN positive8 AS bigint CHECK (VALUE > 0);
CREATE DOMAIN required AS text NOT NULL;
CREATE FOREIGN TABLE d (
  n     bigint DEFAULT nextval('s'),
  p     positive,
  r     required DEFAULT 'r',
  q     required,
  twice bigint GENERATED ALWAYS AS (n * 2) STORED,
  off   positive8 OPTIONS (source 'offset')
) SERVER decode_kafka OPTIONS (topic 'd');
SELECT * FROM test_decode(NULL::d, '{"p": 1, "q": "a"}', "offset" => 5);
SELECT * FROM test_decode(NULL::d, '{"p": 1, "q": "b", "twice": 5}', "offset" => 6);
SELECT * FROM test_decode(NULL::d, '{"n": 10, "p": 1, "q": "c", "r": "given"}', "offset" => 7);
SELECT * FROM test_decode(NULL::d, '{"p": 0, "q": "a"}', "offset" => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::d, '{"p": 1, "q": "a", "r": null}', "offset" => 5);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::d, '{"p": 1}', "offset" => 5);
SELECT * FROM test_decode(NULL::d, '{"p": 1, "q": "a"}', "offset" => 0);

--
-- metadata columns
--
CREATE FOREIGN TABLE m (
  v      text,
  part   int         OPTIONS (source 'partition'),
  part8  bigint      OPTIONS (source 'partition'),
  off    bigint      OPTIONS (source 'offset'),
  ts     timestamptz OPTIONS (source 'timestamp'),
  k      text        OPTIONS (source 'key'),
  kb     bytea       OPTIONS (source 'key'),
  kj     jsonb       OPTIONS (source 'key'),
  hs     jsonb       OPTIONS (source 'headers'),
  hsj    json        OPTIONS (source 'headers'),
  topic  text        OPTIONS (source 'topic'),
  trace  text        OPTIONS (header 'trace'),
  traceb bytea       OPTIONS (header 'trace')
) SERVER decode_kafka OPTIONS (topic 'metadata', format 'text');
\x on
-- headers: all of them, in order, duplicates and null values kept; one
-- header's column takes the last of that name
SELECT * FROM test_decode(NULL::m, 'hello', key => '{"k": 1}', part => 3,
  "offset" => 1234567890123, ts => '2024-05-01 10:00:00.123+00',
  headers => ARRAY['trace', 'abc', 'other', NULL, 'trace', 'xyz', 'q"uote', E'\\x0a']::bytea[]);
-- no key, no timestamp, no headers
SELECT * FROM test_decode(NULL::m, 'x');
-- timestamps before 1970, and milliseconds rounded down
SELECT ts FROM test_decode(NULL::m, 'x', ts => '1969-07-20 20:17:40.1239+00');
\x off
-- a key for a jsonb column must be JSON; a key or a header for a text
-- column must be UTF-8 (a bytea column takes any bytes)
SELECT * FROM test_decode(NULL::m, 'x', key => 'not json');
SELECT * FROM test_decode(NULL::m, 'x', key => '\x22ff22');
SELECT * FROM test_decode(NULL::m, 'x', headers => ARRAY['trace', '\xff']::bytea[]);
SELECT * FROM test_decode(NULL::m, 'x', headers => ARRAY['bin', '\x6100']::bytea[]);
SELECT * FROM test_decode(NULL::m, 'x', headers => ARRAY['\xff', 'x']::bytea[]);
CREATE FOREIGN TABLE h (
  v   text,
  bin bytea OPTIONS (header 'bin'),
  "Bin" text OPTIONS (header 'Bin')
) SERVER decode_kafka OPTIONS (topic 'h', format 'text');
-- Kafka header names are case sensitive
SELECT * FROM test_decode(NULL::h, 'x', headers => ARRAY['bin', '\x00ff', 'Bin', 'B']::bytea[]);

--
-- text and bytes
--
-- text: the whole value, through the input function
SELECT v, length(v) FROM test_decode(NULL::m, convert_to(E'line one\nline "two", with \\ and , ', 'UTF8'));
SELECT v IS NULL AS no_value FROM test_decode(NULL::m, NULL);
SELECT * FROM test_decode(NULL::m, '\x61ff');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::m, '\x610062');
CREATE FOREIGN TABLE t3 (line varchar(3)) SERVER decode_kafka OPTIONS (topic 't3', format 'text');
SELECT * FROM test_decode(NULL::t3, 'abc');
SELECT * FROM test_decode(NULL::t3, 'abcd');
-- bytes: the whole value, raw
CREATE FOREIGN TABLE b (payload bytea, k bytea OPTIONS (source 'key'))
  SERVER decode_kafka OPTIONS (topic 'b', format 'bytes');
SELECT * FROM test_decode(NULL::b, '\x00ff7b0a', key => '\x01');
SELECT * FROM test_decode(NULL::b, '');
SELECT * FROM test_decode(NULL::b, NULL);

--
-- csv: one record of the data columns in table order, by COPY's rules
--
CREATE FOREIGN TABLE c (
  id   int,
  off  bigint OPTIONS (source 'offset'),
  name text,
  note text,
  at   timestamptz
) SERVER decode_kafka OPTIONS (topic 'c', format 'csv');
SELECT * FROM test_decode(NULL::c, '1,ann,,2024-05-01 10:00:00+00', "offset" => 7);
-- quotes, embedded separators, quotes and line breaks; an unquoted empty
-- field is NULL, a quoted one an empty string
SELECT * FROM test_decode(NULL::c, convert_to(E'2,"Smith, Ann","say ""hi""\nbye",', 'UTF8'));
SELECT id, name = '' AS name_empty, note IS NULL AS note_null
FROM test_decode(NULL::c, '3,"",,');
-- a line break may end the record
SELECT id, name FROM test_decode(NULL::c, convert_to(E'4,d,,\r\n', 'UTF8'));
SELECT id, name FROM test_decode(NULL::c, convert_to(E'5,"e\r\nf",,\n', 'UTF8'));
-- too many fields, too few, two records, none, an open quote
SELECT * FROM test_decode(NULL::c, '6,f,,,extra');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::c, '6,f');
SELECT * FROM test_decode(NULL::c, convert_to(E'6,f,,\n7,g,,', 'UTF8'));
SELECT * FROM test_decode(NULL::c, '');
SELECT * FROM test_decode(NULL::c, '6,"f,,');
-- values the types do not take, bytes that are not UTF-8, no value
SELECT * FROM test_decode(NULL::c, 'six,f,,');
\echo :LAST_ERROR_SQLSTATE
-- a field the type does not take comes before a missing one, as in COPY
SELECT * FROM test_decode(NULL::c, 'six');
\echo :LAST_ERROR_SQLSTATE
CREATE TABLE c_plain (id int, name text, note text, at timestamptz);
COPY c_plain FROM STDIN (FORMAT csv);
six
\.
DROP TABLE c_plain;
SELECT * FROM test_decode(NULL::c, '6,f,,yesterday noon');
SELECT * FROM test_decode(NULL::c, '\x362c66ff2c2c');  -- 6,f\377,,
SELECT * FROM test_decode(NULL::c, NULL);
-- and good records again: nothing of the failed ones is left over
SELECT * FROM test_decode(NULL::c, '8,h,"x,y",');
SELECT * FROM test_decode(NULL::c, convert_to(E'9,i,,\n', 'UTF8'));
-- long records: COPY reads them in pieces; buffers that one grew shrink
-- back for the next
SELECT id, length(name) FROM test_decode(NULL::c,
  convert_to('10,' || repeat('x', 200000) || ',,', 'UTF8'));
SELECT id, length(name), left(name, 4) FROM test_decode(NULL::c,
  convert_to('11,"' || repeat('y""', 500000) || '",,', 'UTF8'));
SELECT id, name FROM test_decode(NULL::c, '12,z,,');
-- as COPY does: a quoted part may begin and end inside a field, and a lone
-- CR ends a record; a line of \. (which ends COPY's data) is data
SELECT id, name, note, at IS NULL AS at_null
FROM test_decode(NULL::c, convert_to(E'13,a"b,c"d,"x"y,\r', 'UTF8'));
SELECT id, name FROM test_decode(NULL::c, convert_to('14,\.,,', 'UTF8'));
SELECT * FROM test_decode(NULL::c, convert_to(E'15,f,,\n\\.\n', 'UTF8'));

--
-- upsert sources: the message key names the row, as Kafka's log compaction
-- takes it.  Key columns that are data columns come from the message key:
-- a JSON object gives them by field (or the column's field option), as the
-- value does; another key gives the value of the one such column: a JSON
-- scalar its value (a string de-escaped, a number as written), anything
-- else its bytes as text.  A message value that gives a key column must
-- give the same value, by the key type's equality; one that leaves it out
-- (or null) takes the key's; a tombstone gives only the key.  A NULL key
-- column is an error.
--
CREATE FOREIGN TABLE kv (
  id     int OPTIONS (field 'Id'),
  region text,
  v      text DEFAULT 'dflt'
) SERVER decode_kafka OPTIONS (topic 'kv', envelope 'upsert', key 'region, id');
SELECT * FROM test_decode(NULL::kv, '{"Id": 1, "region": "eu", "v": "x"}',
                          key => '{"region": "eu", "Id": 1}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 1, "v": "x"}', key => '{"region": "eu", "Id": 1}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 1, "region": null}', key => '{"region": "eu", "Id": 1}');
SELECT * FROM test_decode(NULL::kv, NULL, key => '{"region": "eu", "Id": 1, "v": {"not": "read"}}',
                          tombstone => true);
-- a key column the value leaves out takes the key's value, not its default,
-- and the NOT NULL of its domain holds the key's value
CREATE FOREIGN TABLE kdef (k int DEFAULT 7, v text) SERVER decode_kafka
  OPTIONS (topic 'kdef', envelope 'upsert', key 'k');
CREATE FOREIGN TABLE kdom (k required, v text) SERVER decode_kafka
  OPTIONS (topic 'kdom', envelope 'upsert', key 'k');
SELECT * FROM test_decode(NULL::kdef, '{"v": "x"}', key => '42');
SELECT * FROM test_decode(NULL::kdom, '{"v": "x"}', key => 'k42');
SELECT * FROM test_decode(NULL::kdom, '{"k": "k42", "v": "x"}', key => 'k42');
SELECT * FROM test_decode(NULL::kdef, '{"k": 7, "v": "x"}', key => '42');
SELECT * FROM test_decode(NULL::kdom, '{"v": "x"}');
DROP FOREIGN TABLE kdef, kdom;
SELECT * FROM test_decode(NULL::kv, NULL, key => '{"Id": 1}', tombstone => true);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::kv, NULL, tombstone => true);
SELECT * FROM test_decode(NULL::kv, NULL, key => '[1, "eu"]', tombstone => true);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::kv, NULL, key => '{"Id": "one", "region": "eu"}', tombstone => true);
SELECT * FROM test_decode(NULL::kv, NULL, key => '{"Id": 1, "region": "eu"', tombstone => true);
SELECT * FROM test_decode(NULL::kv, NULL, key => '{"Id": 2, "region": "us"}', tombstone => true);
-- a message with a value: its key must give each key column, the same
-- value as the value's, by the key type's equality (the key's other fields
-- are not read); a key that is not an object cannot give two columns
SELECT * FROM test_decode(NULL::kv, '{"Id": 1, "region": "eu", "v": "x"}',
                          key => '{"region": "eu", "Id": "01", "v": "other"}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"Id": 3, "region": "eu"}');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => ' {"region": "us", "Id": 4}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"Id": null, "region": "eu"}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"Id": "four"}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"Id": 4');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"region": "eu"}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '{"customer": 7}');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => 'partition-key-7');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '"eu"');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}', key => '[3, "eu"]');
SELECT * FROM test_decode(NULL::kv, '{"Id": 4, "region": "eu"}');
\echo :LAST_ERROR_SQLSTATE
CREATE FOREIGN TABLE amounts (k numeric, v text)
  SERVER decode_kafka OPTIONS (topic 'amounts', envelope 'upsert', key 'k');
SELECT * FROM test_decode(NULL::amounts, '{"k": 1.0, "v": "x"}', key => '{"k": 1.00}');
SELECT * FROM test_decode(NULL::amounts, '{"k": 1.0, "v": "x"}', key => '{"k": 1.01}');
SELECT * FROM test_decode(NULL::amounts, '{"k": 1.0, "v": "x"}', key => '1.00');
SELECT * FROM test_decode(NULL::amounts, '{"k": 1.0, "v": "x"}', key => '1.01');
SELECT * FROM test_decode(NULL::amounts, NULL, key => '1.00', tombstone => true);
-- one key column: a plain string, a JSON string, a JSON number
CREATE FOREIGN TABLE orders (id text, n int)
  SERVER decode_kafka OPTIONS (topic 'orders', envelope 'upsert', key 'id');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 1}', key => 'order-7');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 2}', key => '"order-7"');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 3}', key => convert_to(' "order-\u0037" ', 'UTF8'));
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 4}', key => '{"id": "order-7"}');
SELECT * FROM test_decode(NULL::orders, '{"id": "[1, 2]", "n": 5}', key => '[1, 2]');
SELECT * FROM test_decode(NULL::orders, convert_to('{"id": "\"x", "n": 6}', 'UTF8'), key => convert_to('"x', 'UTF8'));
SELECT * FROM test_decode(NULL::orders, '{"id": "7", "n": 7}', key => '7');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 8}', key => 'order-8');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 9}', key => 'order-7 ');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 10}', key => '"order-8"');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 11}', key => 'null');
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 12}');
SELECT * FROM test_decode(NULL::orders, '{"id": "order-7", "n": 13}', key => '\x6f72ff');
SELECT * FROM test_decode(NULL::orders, NULL, key => 'order-7', tombstone => true);
SELECT * FROM test_decode(NULL::orders, NULL, key => '"order-7"', tombstone => true);
SELECT * FROM test_decode(NULL::orders, NULL, key => '{"id": "order-7"}', tombstone => true);
SELECT * FROM test_decode(NULL::orders, NULL, key => '7', tombstone => true);
SELECT * FROM test_decode(NULL::orders, NULL, key => 'null', tombstone => true);
CREATE FOREIGN TABLE counts (
  n int OPTIONS (field 'N'),
  p int OPTIONS (source 'partition'),
  v text
) SERVER decode_kafka OPTIONS (topic 'counts', envelope 'upsert', key 'p, n');
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => '42', part => 2);
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => '"42"');
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => '{"N": 42}');
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => '43');
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => '4.2e1');
SELECT * FROM test_decode(NULL::counts, '{"N": 42, "v": "x"}', key => 'forty-two');
SELECT * FROM test_decode(NULL::counts, NULL, key => '42', part => 2, tombstone => true);
-- a json or jsonb key column takes a key that is not an object as JSON
CREATE FOREIGN TABLE docs (k jsonb, v text)
  SERVER decode_kafka OPTIONS (topic 'docs', envelope 'upsert', key 'k');
SELECT * FROM test_decode(NULL::docs, '{"k": "a", "v": "x"}', key => '"a"');
SELECT * FROM test_decode(NULL::docs, '{"k": [1, 2], "v": "x"}', key => '[1,2]');
SELECT * FROM test_decode(NULL::docs, '{"k": "a", "v": "x"}', key => 'a');
SELECT * FROM test_decode(NULL::docs, NULL, key => '"a"', tombstone => true);

CREATE FOREIGN TABLE prices (
  sku   text OPTIONS (source 'key'),
  price numeric
) SERVER decode_kafka OPTIONS (topic 'prices', envelope 'upsert', key 'sku');
SELECT * FROM test_decode(NULL::prices, '{"price": 9.5}', key => 'a-1');
SELECT * FROM test_decode(NULL::prices, '{"price": 9.5}');
SELECT * FROM test_decode(NULL::prices, NULL, key => 'a-1', tombstone => true);
SELECT * FROM test_decode(NULL::prices, NULL, tombstone => true);
-- tombstones are for upsert sources only
SELECT * FROM test_decode(NULL::j, NULL, key => '{"id": 1}', tombstone => true);

--
-- webhooks: the body, the arrival time, headers in any case
--
CREATE FOREIGN TABLE hook (
  id       text,
  body     jsonb       OPTIONS (source 'body'),
  raw      bytea       OPTIONS (source 'body'),
  received timestamptz OPTIONS (source 'received_at'),
  sig      text        OPTIONS (header 'X-Signature'),
  hs       jsonb       OPTIONS (source 'headers')
) SERVER decode_hooks OPTIONS (format 'json');
\x on
SELECT * FROM test_decode(NULL::hook, '{"id": "evt_1", "n": 2}', ts => '2024-05-01 10:00:00+00',
  headers => ARRAY['x-signature', 'abc', 'Content-Type', 'application/json']::bytea[]);
\x off

--
-- the door: superusers only, rows of source tables only
--
CREATE ROLE regress_decode_user;
GRANT USAGE ON SCHEMA dec TO regress_decode_user;
SET ROLE regress_decode_user;
SELECT * FROM test_decode(NULL::j, '{"id": 1}');
RESET ROLE;
CREATE TABLE plain (id int);
SELECT * FROM test_decode(NULL::plain, '{"id": 1}');
SELECT test_decode(NULL::int, '{"id": 1}');

RESET search_path;
DROP SCHEMA dec CASCADE;
DROP SERVER decode_kafka CASCADE;
DROP SERVER decode_hooks CASCADE;
DROP FUNCTION test_decode(anyelement, bytea, bytea, int, bigint, timestamptz, bytea[], boolean);
DROP ROLE regress_decode_user;
