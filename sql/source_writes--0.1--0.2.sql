/* source_writes--0.1--0.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION source_writes UPDATE TO '0.2'" to load this file. \quit
