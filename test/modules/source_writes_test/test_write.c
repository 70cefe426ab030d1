/*-------------------------------------------------------------------------
 *
 * test_write.c
 *		  A door to the writer for tests: write rows as a worker would
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  test/modules/source_writes_test/test_write.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "log/log.h"

PG_FUNCTION_INFO_V1(source_writes_test_write);

static SwOrigin
origin_of(const char *name)
{
	for (int i = 0; i < SW_NUM_ORIGINS; i++)
		if (strcmp(name, sw_origin_name(i)) == 0)
			return i;
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("unknown origin \"%s\"", name),
			 errhint("Origins are user, kafka, webhook and system.")));
	return SW_ORIGIN_USER;		/* keep compiler quiet */
}

/*
 * source_writes_test_write
 *
 * Writes rows into a source through a writer of the given origin, as the
 * table's owner, as a worker would.  A test creates it; only superusers may
 * call it, whoever it is granted to:
 *
 *		CREATE FUNCTION test_write(source regclass, origin text, op text,
 *								   rows anyarray) RETURNS bigint
 *		AS 'source_writes_test', 'source_writes_test_write' LANGUAGE C;
 *
 * op is 'insert' (one row at a time), 'append' (buffered), 'upsert' or
 * 'tombstone'; rows are rows of the table's type.  It returns how many rows
 * it wrote (for tombstones: how many keys had a row).  With two more
 * arguments, partition int and first_offset bigint, the rows are the
 * messages at offsets first_offset, first_offset + 1, ... of a partition,
 * which the batch consumes (sw_writer_consumed()), and each row keeps its
 * message's position.
 */
Datum
source_writes_test_write(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	SwOrigin	origin = origin_of(text_to_cstring(PG_GETARG_TEXT_PP(1)));
	char	   *op = text_to_cstring(PG_GETARG_TEXT_PP(2));
	ArrayType  *rows = PG_GETARG_ARRAYTYPE_P(3);
	Relation	ftrel;
	SwWriter   *writer;
	TupleTableSlot *slot;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int64		written = 0;
	bool		positions = PG_NARGS() > 4 && !PG_ARGISNULL(4) && !PG_ARGISNULL(5);

	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("only superusers may write to source tables through source_writes_test_write()"),
				 errdetail("It writes as the table's owner, with any origin, as the workers do.")));
	if (!sw_is_source_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", get_rel_name(relid))));
	ftrel = table_open(relid, RowExclusiveLock);
	if (ARR_ELEMTYPE(rows) != ftrel->rd_rel->reltype)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("rows must be of the type of \"%s\"",
						RelationGetRelationName(ftrel))));
	deconstruct_array(rows, ARR_ELEMTYPE(rows), -1, false, TYPALIGN_DOUBLE,
					  &elems, &nulls, &n);

	/* users write as themselves, workers as the table's owner */
	writer = sw_writer_open(ftrel, origin,
							origin == SW_ORIGIN_USER ? GetUserId() : ftrel->rd_rel->relowner,
							NULL);
	slot = MakeSingleTupleTableSlot(RelationGetDescr(ftrel), &TTSOpsHeapTuple);
	for (int i = 0; i < n; i++)
	{
		HeapTupleData tuple;

		if (nulls[i])
			continue;
		tuple.t_len = HeapTupleHeaderGetDatumLength(DatumGetHeapTupleHeader(elems[i]));
		tuple.t_data = DatumGetHeapTupleHeader(elems[i]);
		ItemPointerSetInvalid(&tuple.t_self);
		tuple.t_tableOid = relid;
		ExecStoreHeapTuple(&tuple, slot, false);
		if (positions)
		{
			SwPosition	position = {true, PG_GETARG_INT32(4), PG_GETARG_INT64(5) + i, NULL};

			sw_writer_set_position(writer, &position);
		}

		if (strcmp(op, "tombstone") == 0)
		{
			written += sw_writer_tombstone(writer, slot);
			continue;
		}
		sw_writer_check_constraints(writer, slot);
		if (strcmp(op, "insert") == 0)
			sw_writer_insert(writer, slot);
		else if (strcmp(op, "append") == 0)
			sw_writer_append(writer, slot);
		else if (strcmp(op, "upsert") == 0)
			sw_writer_upsert(writer, slot);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown operation \"%s\"", op),
					 errhint("Operations are insert, append, upsert and tombstone.")));
		written++;
	}
	ExecDropSingleTupleTableSlot(slot);
	if (positions)
		sw_writer_consumed(writer, PG_GETARG_INT32(4), PG_GETARG_INT64(5),
						   PG_GETARG_INT64(5) + n);
	sw_writer_close(writer);
	table_close(ftrel, NoLock);
	PG_RETURN_INT64(written);
}
