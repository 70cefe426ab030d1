--
-- CREATE EXTENSION: what it installs, its settings
--
CREATE EXTENSION source_writes;

-- the wrapper, its handler and validator, the catalog and the event triggers
SELECT pg_describe_object(classid, objid, objsubid) AS member
FROM pg_depend
WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
  AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'source_writes')
ORDER BY 1;

SELECT fdwname, fdwhandler::regproc, fdwvalidator::regproc
FROM pg_foreign_data_wrapper WHERE fdwname = 'source_writes';

SELECT evtname, evtevent, evtenabled FROM pg_event_trigger ORDER BY 1;

-- the extension's objects are not relocatable
ALTER EXTENSION source_writes SET SCHEMA public;

-- the internal schema is closed to everybody but the owners of its tables;
-- the catalog can be read by all
SELECT has_schema_privilege('public', 'source_writes_internal', 'USAGE') AS internal_usage,
       has_schema_privilege('public', 'source_writes', 'USAGE') AS schema_usage,
       has_table_privilege('public', 'source_writes.source_tables', 'SELECT') AS catalog_select,
       has_table_privilege('public', 'source_writes.source_tables', 'INSERT') AS catalog_insert;

-- settings (the test instance sets source_writes.database)
SHOW source_writes.database;
SHOW source_writes.webhook_listen;
SELECT name, context, boot_val FROM pg_settings
WHERE name LIKE 'source_writes.%' ORDER BY 1;

-- they belong in postgresql.conf (read at start and on reload)
SET source_writes.database = 'postgres';
\echo :LAST_ERROR_SQLSTATE

-- the prefix is reserved: a misspelt setting is an error, not a placeholder
SET source_writes.databse = 'postgres';
\echo :LAST_ERROR_SQLSTATE
