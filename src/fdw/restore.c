/*-------------------------------------------------------------------------
 *
 * restore.c
 *		  The trigger on the catalog that gives a source table its storage
 *		  back after pg_restore
 *
 * See doc/internals.md, "Storage layout" (Restore).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/restore.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "commands/comment.h"
#include "commands/trigger.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "log/log.h"
#include "workers/workers.h"

PG_FUNCTION_INFO_V1(source_writes_restore_catalog_row);

/*
 * BEFORE INSERT trigger on source_writes.source_tables: a row inserted by
 * SQL (our own code inserts with CatalogTupleInsert, which fires no
 * triggers) is a row restored from a dump, naming hidden relations that
 * were restored from the same dump.  The source table was created earlier
 * in the restore, with no storage, or with fresh, empty storage; adopt the
 * restored relations, so that its rows and log come back, and drop the
 * fresh ones.  A row for a table that is not a source table is dropped
 * with a warning.
 */
Datum
source_writes_restore_catalog_row(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	tuple;
	TupleDesc	desc;
	Datum		values[Natts_st];
	bool		nulls[Natts_st];
	Oid			relid;
	Oid			restored[2];
	SwSource	fresh;
	Relation	ftrel;

	if (!CALLED_AS_TRIGGER(fcinfo) ||
		!TRIGGER_FIRED_BEFORE(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event) ||
		!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event) ||
		RelationGetRelid(trigdata->tg_relation) != sw_catalog_table_oid())
		elog(ERROR, "source_writes_restore_catalog_row: not fired by a row insert into the catalog");

	tuple = trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);
	heap_deform_tuple(tuple, desc, values, nulls);
	relid = DatumGetObjectId(values[Anum_st_relid - 1]);
	restored[0] = DatumGetObjectId(values[Anum_st_current_rel - 1]);
	restored[1] = DatumGetObjectId(values[Anum_st_history_rel - 1]);

	if (!sw_is_source_table(relid))
	{
		ereport(WARNING,
				(errmsg("skipping a restored catalog row of source_writes for relation %u, which is not a source table",
						relid),
				 errdetail("The row names a table that is not in the restored database, or not on a source_writes server.")));
		return PointerGetDatum(NULL);
	}

	ftrel = relation_open(relid, AccessExclusiveLock);
	sw_catalog_lock_source(relid);
	for (int i = 0; i < 2; i++)
	{
		Relation	hidden;
		SwLayout	layout;

		if (get_rel_relkind(restored[i]) != RELKIND_RELATION ||
			get_rel_namespace(restored[i]) != get_namespace_oid(SW_INTERNAL_SCHEMA, false))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("catalog row of source table \"%s\" names a relation that is not its storage",
							RelationGetRelationName(ftrel)),
					 errhint("Restore the tables of schema \"%s\" together with the extension's catalog.",
							 SW_INTERNAL_SCHEMA)));
		hidden = table_open(restored[i], AccessExclusiveLock);
		sw_storage_layout(ftrel, hidden, &layout);
		if ((layout.retracted != InvalidAttrNumber) != (i == 1))
			elog(ERROR, "restored storage of source table \"%s\" has the wrong columns",
				 RelationGetRelationName(ftrel));
		table_close(hidden, NoLock);
	}

	/* the fresh storage made when the table was created goes */
	if (sw_source_lookup(relid, &fresh))
	{
		for (int i = 0; i < 2; i++)
		{
			Oid			old = i == 0 ? fresh.current_rel : fresh.history_rel;
			ObjectAddress addr;

			if (old == restored[0] || old == restored[1])
				continue;
			deleteDependencyRecordsForClass(RelationRelationId, old,
											RelationRelationId, DEPENDENCY_INTERNAL);
			CommandCounterIncrement();
			ObjectAddressSet(addr, RelationRelationId, old);
			performDeletion(&addr, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
		}
		/* not its batches: they may have been restored already */
		sw_catalog_delete_row(relid);
		CommandCounterIncrement();
	}

	sw_storage_depend(relid, restored[0]);
	sw_storage_depend(relid, restored[1]);
	if (GetComment(restored[0], RelationRelationId, 0) != NULL)
		sw_storage_mark_current(relid, restored[0]);
	sw_storage_place_indexes(relid, restored[0], false);
	CacheInvalidateRelcacheByRelid(relid);

	/* nothing is ingested before the rest of the restore came */
	sw_database_restorer();
	sw_database_sources_changed();
	relation_close(ftrel, NoLock);
	return PointerGetDatum(tuple);
}
