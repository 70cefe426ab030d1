/*-------------------------------------------------------------------------
 *
 * offsets.c
 *		  reset_offsets(): say where a Kafka source goes on ingesting
 *
 * See doc/internals.md, "Workers and processes" (Kafka workers).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/offsets.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "log/log.h"
#include "options/options.h"

PG_FUNCTION_INFO_V1(source_writes_reset_offsets);

/* the offset a partition goes on at: one named, or the choice for all */
static int64
offset_for(List *named, bool latest, int32 partition)
{
	ListCell   *lc;

	foreach(lc, named)
		if (((SwStartOffset *) lfirst(lc))->partition == partition)
			return ((SwStartOffset *) lfirst(lc))->offset;
	return latest ? SW_OFFSET_LATEST : SW_OFFSET_EARLIEST;
}

/*
 * reset_offsets(source regclass, offsets text): where each partition of a
 * Kafka source goes on, as the option start_offset says it: 'earliest',
 * 'latest', or offsets of partitions, '0:1200, 1:800' (the partitions not
 * named go on at the earliest).  The partitions the source has not seen
 * yet start as partitions found later do, at the earliest.  It needs the
 * ownership of the table, as changing its options does.  The table is
 * locked against writers until the commit: a batch that is committing
 * meanwhile commits first.
 */
Datum
source_writes_reset_offsets(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	char	   *value = text_to_cstring(PG_GETARG_TEXT_PP(1));
	SwSource	source;
	Relation	ftrel;
	SwSourceTable *st;
	List	   *named;
	List	   *stored;
	bool		latest;
	ListCell   *lc;
	SwBlockRanges *blocks;

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	sw_source_resolve(relid, &source, true);
	(void) sw_source_check_kind(&source, SW_KIND_KAFKA, "Only Kafka sources have offsets.");
	PreventCommandIfReadOnly("reset_offsets()");
	named = sw_parse_start_offset("offsets", value, &latest);

	/* keep the workers' batches out until we commit */
	ftrel = relation_open(relid, ShareRowExclusiveLock);

	/* a moved source commits no batch, and its offsets are the new one's */
	sw_source_resolve(relid, &source, true);
	if (source.moved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" was moved", RelationGetRelationName(ftrel)),
				 errdetail("Its log was exported with source_writes.export(..., fence => true): it takes no more writes."),
				 errhint("Reset the offsets of the source table it was imported into.")));
	st = sw_source_table(ftrel);
	if (!sw_catalog_progress_has_identity())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the catalog of extension \"source_writes\" is out of date"),
				 errhint("Run ALTER EXTENSION source_writes UPDATE.")));
	sw_catalog_lock_progress(relid);

	stored = sw_catalog_progress(relid);
	foreach(lc, stored)
	{
		SwProgress *p = lfirst(lc);

		p->next_offset = offset_for(named, latest, p->part);
		p->topic = st->topic;
		p->cluster_id = NULL;	/* the brokers' when the worker starts */
		p->stopped = NULL;
		sw_catalog_set_progress(relid, p);
	}
	foreach(lc, named)
	{
		SwStartOffset *so = lfirst(lc);

		sw_catalog_start_progress(relid, so->partition, so->offset, st->topic, NULL);
	}

	/* the log says who moved the offsets, and when: a batch without rows */
	(void) sw_controller_batch(relid, SW_ORIGIN_SYSTEM, &blocks);

	/* at the commit, the worker looks at its offsets again */
	CacheInvalidateRelcacheByRelid(relid);
	relation_close(ftrel, NoLock);
	PG_RETURN_VOID();
}
