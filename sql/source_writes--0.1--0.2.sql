/* source_writes--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION source_writes UPDATE TO '0.2'" to load this file. \quit

-- Temporary source tables are refused from 0.2 on.  Under 0.1 they could
-- be made, and the end of their session dropped the table and its hidden
-- heaps but left its rows in the catalog (a table made later with the same
-- OID would have found them).  Those rows go.
DELETE FROM source_writes.batches b
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = b.source);
DELETE FROM source_writes.progress p
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = p.source);
DELETE FROM source_writes.errors e
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = e.source);
DELETE FROM source_writes.deliveries d
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = d.source);
DELETE FROM source_writes.source_tables s
  WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid = s.relid);
