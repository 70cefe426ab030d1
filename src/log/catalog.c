/*-------------------------------------------------------------------------
 *
 * catalog.c
 *		  The extension's catalog: which tables are sources, their frontiers
 *		  and their batches
 *
 * See doc/internals.md, "The catalog".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/catalog.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/sequence.h"
#include "executor/tuptable.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "parser/parse_func.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/procarray.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/xid8.h"

#include "log/log.h"

/* columns of source_writes.batches */
#define Anum_b_source		1
#define Anum_b_batch		2
#define Anum_b_ts			3
#define Anum_b_origin		4
#define Anum_b_role			5
#define Anum_b_xid			6
#define Anum_b_pending_ts	7
#define Anum_b_pending_xid	8
#define Anum_b_current_file 9
#define Anum_b_current_blocks 10
#define Anum_b_history_file 11
#define Anum_b_history_blocks 12
#define Natts_b				12

/* where a batch row keeps its blocks of the current heap and the history */
static const AttrNumber Anum_b_file[2] = {
	[SW_CURRENT_HEAP] = Anum_b_current_file,
	[SW_HISTORY_HEAP] = Anum_b_history_file
};
static const AttrNumber Anum_b_blocks[2] = {
	[SW_CURRENT_HEAP] = Anum_b_current_blocks,
	[SW_HISTORY_HEAP] = Anum_b_history_blocks
};

/* columns of source_writes.batch_segments (from 0.3 on) */
#define Anum_s_source		1
#define Anum_s_ts_from		2
#define Anum_s_ts_to		3
#define Anum_s_batch_from	4
#define Anum_s_batch_to		5
#define Anum_s_nbatches		6
#define Anum_s_origins		7
#define Anum_s_roles		8
#define Anum_s_batches		9
#define Anum_s_xid			10
#define Anum_s_current_file 11
#define Anum_s_current_blocks 12
#define Anum_s_history_file 13
#define Anum_s_history_blocks 14
#define Anum_s_current_chunks 15
#define Natts_s				15

/* where a segment row keeps the blocks of its batches, by SwHeap */
static const AttrNumber Anum_s_file[2] = {
	[SW_CURRENT_HEAP] = Anum_s_current_file,
	[SW_HISTORY_HEAP] = Anum_s_history_file
};
static const AttrNumber Anum_s_blocks[2] = {
	[SW_CURRENT_HEAP] = Anum_s_current_blocks,
	[SW_HISTORY_HEAP] = Anum_s_history_blocks
};

/* the most ranges of blocks a segment keeps for each heap */
#define SW_SEGMENT_RANGES	64

/*
 * A segment's current_chunks: for each SW_SEGMENT_CHUNK of its batches in
 * timestamp order, the newest timestamp among them, how many ranges of
 * blocks of the current heap they wrote, and those ranges, at most
 * SW_CHUNK_RANGES [from, to) pairs (0 where fewer): SW_CHUNK_WIDTH values.
 * Readers take the chunks as they come, of any size: segments rolled up
 * by earlier builds have chunks of 256 batches.  (A window of a few
 * batches reads the blocks of 64 batches, about what 10 batch rows of
 * their own would name; the array, 3 kB for 4096 batches, compresses to
 * about what 256 did uncompressed.)
 */
#define SW_SEGMENT_CHUNK	64
#define SW_CHUNK_RANGES		2
#define SW_CHUNK_WIDTH		(2 + 2 * SW_CHUNK_RANGES)

/* columns of source_writes.progress */
#define Anum_p_source		1
#define Anum_p_part			2
#define Anum_p_next_offset	3
#define Anum_p_topic		4	/* from 0.2 on, like the ones below */
#define Anum_p_cluster_id	5
#define Anum_p_lost			6
#define Anum_p_stopped		7
#define Natts_p				7

/* the lock tag's objsubid: writers' stamping, compaction */
#define SW_LOCK_STAMP		0
#define SW_LOCK_COMPACT		1

static const char *const origin_names[] = {
	[SW_ORIGIN_USER] = "user",
	[SW_ORIGIN_KAFKA] = "kafka",
	[SW_ORIGIN_WEBHOOK] = "webhook",
	[SW_ORIGIN_SYSTEM] = "system"
};

/* OIDs of the extension's catalog objects, once resolved */
typedef struct SwCatalogOids
{
	bool		valid;
	Oid			source_tables;
	Oid			source_tables_pkey;
	Oid			batches;
	Oid			batches_ts;		/* index on (source, ts) */
	Oid			segments;		/* batch_segments, from 0.3 on: not required */
	Oid			segments_ts;	/* index on (source, ts_to) */
	Oid			progress;
	Oid			progress_pkey;
	Oid			errors;
	Oid			errors_source;	/* index on (source, partition, "offset") */
	Oid			deliveries;
	Oid			deliveries_pkey;	/* on (source, key) */
	Oid			deliveries_ts;	/* on (source, ts) */
	Oid			uncarried;		/* uncarried_edits, from 0.3 on: not required */
	Oid			uncarried_source;	/* index on (source) */
	Oid			avro_schemas;	/* from 0.3 on, so not required */
	Oid			avro_schemas_pkey;	/* on (server, id) */
	Oid			batch_ids;		/* sequence of batch ids */
	Oid			fdw_handler;
} SwCatalogOids;

static SwCatalogOids oids;

/* the cache of SwSource, by the foreign table's OID */
typedef struct SwSourceEntry
{
	Oid			relid;			/* hash key */
	bool		valid;
	SwSource	source;
} SwSourceEntry;

static HTAB *source_cache = NULL;
static bool callback_registered = false;

/*
 * A relcache invalidation of a source table, or of one of its hidden heaps
 * (an index made or dropped there), drops its cache entry; one of the catalog
 * (the extension was dropped or recreated), or of everything, drops them
 * all.  There are few entries: looking at each is cheap.
 */
static void
invalidate_callback(Datum arg, Oid relid)
{
	bool		all = !OidIsValid(relid) || relid == oids.source_tables ||
		relid == oids.batches;
	HASH_SEQ_STATUS status;
	SwSourceEntry *entry;

	if (all)
		oids.valid = false;
	if (source_cache == NULL)
		return;
	hash_seq_init(&status, source_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (all || entry->relid == relid || entry->source.current_rel == relid ||
			entry->source.history_rel == relid)
			entry->valid = false;
}

/*
 * The OID of an object of ours in schema source_writes, InvalidOid if it
 * is missing or not a member of the extension (a schema of that name made
 * by somebody else is not trusted).
 */
static Oid
member_relation(Oid extension, Oid nsp, const char *name)
{
	Oid			relid = get_relname_relid(name, nsp);

	if (!OidIsValid(relid) ||
		getExtensionOfObject(RelationRelationId, relid) != extension)
		return InvalidOid;
	return relid;
}

/* the OID of an index of ours on one of our member tables */
static Oid
member_index(Oid table, Oid nsp, const char *name)
{
	Oid			index = get_relname_relid(name, nsp);

	if (!OidIsValid(index) || !OidIsValid(table) ||
		IndexGetRelation(index, true) != table)
		return InvalidOid;
	return index;
}

/*
 * Resolve the catalog's OIDs; false when the extension is not installed
 * (or is being dropped).
 */
static bool
resolve_catalog(void)
{
	Oid			extension;
	Oid			nsp;
	Oid			handler;

	if (oids.valid)
		return true;
	if (!callback_registered)
	{
		CacheRegisterRelcacheCallback(invalidate_callback, (Datum) 0);
		callback_registered = true;
	}

	extension = get_extension_oid("source_writes", true);
	nsp = get_namespace_oid(SW_SCHEMA, true);
	if (!OidIsValid(extension) || !OidIsValid(nsp))
		return false;

	oids.source_tables = member_relation(extension, nsp, "source_tables");
	oids.source_tables_pkey = member_index(oids.source_tables, nsp, "source_tables_pkey");
	oids.batches = member_relation(extension, nsp, "batches");
	oids.batches_ts = member_index(oids.batches, nsp, "batches_source_ts");
	oids.batch_ids = member_relation(extension, nsp, "batch_ids");
	oids.segments = member_relation(extension, nsp, "batch_segments");
	oids.segments_ts = member_index(oids.segments, nsp, "batch_segments_source_ts");
	if (!OidIsValid(oids.segments_ts))
		oids.segments = InvalidOid;
	oids.progress = member_relation(extension, nsp, "progress");
	oids.progress_pkey = member_index(oids.progress, nsp, "progress_pkey");
	oids.errors = member_relation(extension, nsp, "errors");
	oids.errors_source = member_index(oids.errors, nsp, "errors_source");
	oids.deliveries = member_relation(extension, nsp, "deliveries");
	oids.deliveries_pkey = member_index(oids.deliveries, nsp, "deliveries_pkey");
	oids.deliveries_ts = member_index(oids.deliveries, nsp, "deliveries_source_ts");
	oids.uncarried = member_relation(extension, nsp, "uncarried_edits");
	oids.uncarried_source = member_index(oids.uncarried, nsp, "uncarried_edits_source");
	if (!OidIsValid(oids.uncarried_source))
		oids.uncarried = InvalidOid;
	oids.avro_schemas = member_relation(extension, nsp, "avro_schemas");
	oids.avro_schemas_pkey = member_index(oids.avro_schemas, nsp, "avro_schemas_pkey");
	handler = LookupFuncName(list_make2(makeString(SW_SCHEMA),
										makeString("fdw_handler")),
							 0, NULL, true);
	oids.fdw_handler =
		OidIsValid(handler) &&
		getExtensionOfObject(ProcedureRelationId, handler) == extension
		? handler : InvalidOid;

	oids.valid = OidIsValid(oids.source_tables) &&
		OidIsValid(oids.source_tables_pkey) &&
		OidIsValid(oids.batches) &&
		OidIsValid(oids.batches_ts) && OidIsValid(oids.batch_ids) &&
		OidIsValid(oids.progress) && OidIsValid(oids.progress_pkey) &&
		OidIsValid(oids.errors) && OidIsValid(oids.errors_source) &&
		OidIsValid(oids.deliveries) && OidIsValid(oids.deliveries_pkey) &&
		OidIsValid(oids.deliveries_ts) &&
		OidIsValid(oids.fdw_handler);
	return oids.valid;
}

static void
require_catalog(void)
{
	if (!resolve_catalog())
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"source_writes\" is not installed in this database"),
				 errhint("Run CREATE EXTENSION source_writes.")));
}

/*
 * Is the catalog there?  (It is not while the extension is being dropped.)
 */
bool
sw_catalog_exists(void)
{
	return resolve_catalog();
}

/*
 * The OID of source_writes.source_tables.
 */
Oid
sw_catalog_table_oid(void)
{
	require_catalog();
	return oids.source_tables;
}

/*
 * The table of kept errors, and its index on (source, partition, "offset").
 */
Oid
sw_catalog_errors_oid(Oid *index)
{
	require_catalog();
	*index = oids.errors_source;
	return oids.errors;
}

/*
 * The table of webhook deliveries' idempotency keys, and its indexes on
 * (source, key) and (source, ts).
 */
Oid
sw_catalog_deliveries_oid(Oid *key_index, Oid *ts_index)
{
	require_catalog();
	*key_index = oids.deliveries_pkey;
	*ts_index = oids.deliveries_ts;
	return oids.deliveries;
}

/*
 * The table of the Avro schemas fetched from registries, and its index on
 * (server, id); InvalidOid in a database not updated to 0.3 yet.
 */
Oid
sw_catalog_avro_schemas_oid(Oid *pkey)
{
	require_catalog();
	*pkey = oids.avro_schemas_pkey;
	return OidIsValid(oids.avro_schemas_pkey) ? oids.avro_schemas : InvalidOid;
}

/*
 * Is this server one of ours, i.e. does its wrapper use our handler?
 */
bool
sw_is_source_server(Oid serverid)
{
	ForeignServer *server;

	if (!resolve_catalog())
		return false;
	server = GetForeignServer(serverid);
	return GetForeignDataWrapper(server->fdwid)->fdwhandler == oids.fdw_handler;
}

/*
 * Is this relation a source table: a foreign table on one of our servers?
 */
bool
sw_is_source_table(Oid relid)
{
	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		return false;
	return sw_is_source_server(GetForeignServerIdByRelId(relid));
}

/*
 * Does role roleid hold every privilege in mode on source table relid?  If
 * not, raise the usual "permission denied" error; or, with missing_ok,
 * return false, as also when the table is gone.
 */
bool
sw_check_source_privilege(Oid relid, Oid roleid, AclMode mode, bool missing_ok)
{
	bool		missing = false;

	if (pg_class_aclmask_ext(relid, roleid, mode, ACLMASK_ALL,
							 missing_ok ? &missing : NULL) == mode && !missing)
		return true;
	if (!missing_ok)
		aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	return false;
}

/*
 * Does the MVCC snapshot see a tuple that a systable scan begun with
 * SnapshotAny returned?  Testing visibility here, instead of handing the
 * snapshot to the scan, keeps the scan from taking SSI predicate locks.
 */
static bool
tuple_visible(SysScanDesc scan, HeapTuple tuple, Snapshot snapshot)
{
	Buffer		buffer = ((BufferHeapTupleTableSlot *) scan->slot)->buffer;
	bool		visible;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	visible = HeapTupleSatisfiesVisibility(tuple, snapshot, buffer);
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	return visible;
}

/* the next tuple of such a scan that the MVCC snapshot sees */
static HeapTuple
next_visible(SysScanDesc scan, Snapshot snapshot)
{
	HeapTuple	tuple;

	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		if (tuple_visible(scan, tuple, snapshot))
			return tuple;
	return NULL;
}

/* the same, for a scan begun with systable_beginscan_ordered(), backwards */
static HeapTuple
next_visible_backward(SysScanDesc scan, Snapshot snapshot)
{
	HeapTuple	tuple;

	while (HeapTupleIsValid(tuple = systable_getnext_ordered(scan, BackwardScanDirection)))
	{
		CHECK_FOR_INTERRUPTS();
		if (tuple_visible(scan, tuple, snapshot))
			return tuple;
	}
	return NULL;
}

/*
 * Begin a scan of source_tables for one relid: with SnapshotAny when the
 * caller checks an MVCC snapshot itself, or with the given snapshot.
 */
static SysScanDesc
begin_row_scan(Relation rel, Oid relid, Snapshot snapshot, ScanKey key)
{
	ScanKeyInit(key, Anum_st_relid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	return systable_beginscan(rel, oids.source_tables_pkey, true,
							  IsMVCCSnapshot(snapshot) ? SnapshotAny : snapshot,
							  1, key);
}

static HeapTuple
next_row(SysScanDesc scan, Snapshot snapshot)
{
	return IsMVCCSnapshot(snapshot) ? next_visible(scan, snapshot)
		: systable_getnext(scan);
}

static void
row_source(HeapTuple tuple, TupleDesc desc, SwSource *source,
		   SwFrontiers *frontiers)
{
	Datum		values[Natts_st];
	bool		nulls[Natts_st];

	heap_deform_tuple(tuple, desc, values, nulls);
	if (source)
	{
		source->relid = DatumGetObjectId(values[Anum_st_relid - 1]);
		source->kind = strcmp(TextDatumGetCString(values[Anum_st_kind - 1]),
							  "webhook") == 0 ? SW_KIND_WEBHOOK : SW_KIND_KAFKA;
		source->current_rel = DatumGetObjectId(values[Anum_st_current_rel - 1]);
		source->history_rel = DatumGetObjectId(values[Anum_st_history_rel - 1]);
		source->key_index = InvalidOid;
		source->moved = desc->natts >= Anum_st_moved && !nulls[Anum_st_moved - 1] &&
			DatumGetBool(values[Anum_st_moved - 1]);
	}
	if (frontiers)
	{
		frontiers->upper = DatumGetInt64(values[Anum_st_upper - 1]);
		frontiers->since = DatumGetInt64(values[Anum_st_since - 1]);
		frontiers->retain = DatumGetInt64(values[Anum_st_retain - 1]);
	}
}

/*
 * Read the catalog row of a source with the snapshot; false if there is
 * none.
 */
static bool
read_row(Oid relid, Snapshot snapshot, SwSource *source, SwFrontiers *frontiers)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	bool		found = false;

	if (!resolve_catalog())
		return false;
	rel = table_open(oids.source_tables, AccessShareLock);
	scan = begin_row_scan(rel, relid, snapshot, &key);
	tuple = next_row(scan, snapshot);
	if (HeapTupleIsValid(tuple))
	{
		row_source(tuple, RelationGetDescr(rel), source, frontiers);
		found = true;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The name of the unique index on the key of an upsert source, beside its
 * current heap.
 */
void
sw_key_index_name(const char *current_name, char *name)
{
	sw_meta_index_name(current_name, SW_KEY_INDEX_SUFFIX, name);
}

/*
 * The name of an index we make beside a hidden relation.
 */
void
sw_meta_index_name(const char *hidden_name, const char *suffix, char *name)
{
	snprintf(name, NAMEDATALEN, "%s_%s", hidden_name, suffix);
}

/*
 * The OID of an index beside a hidden relation, by the name we gave it;
 * InvalidOid if there is none (no key, or storage made before we made such
 * indexes).
 */
static Oid
meta_index(Oid hidden, const char *suffix)
{
	char	   *hidden_name = get_rel_name(hidden);
	char		name[NAMEDATALEN];
	Oid			index;

	if (hidden_name == NULL)
		return InvalidOid;
	sw_meta_index_name(hidden_name, suffix, name);
	index = get_relname_relid(name, get_rel_namespace(hidden));
	if (!OidIsValid(index) || IndexGetRelation(index, true) != hidden)
		return InvalidOid;
	return index;
}

/*
 * What never changes about a source table while it exists, from the cache
 * or the catalog; false if it has no catalog row.  The caller holds a lock
 * on the table, so that invalidations of its row (a restore swapping its
 * storage) have been taken in before the cache is consulted.  The key
 * index changes with the table's options, and is made or dropped in its
 * current heap, whose invalidation drops the entry.
 */
bool
sw_source_lookup(Oid relid, SwSource *source)
{
	SwSourceEntry *entry;
	Snapshot	snapshot;
	bool		found;

	if (!resolve_catalog())
		return false;
	if (source_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(SwSourceEntry);
		ctl.hcxt = CacheMemoryContext;
		source_cache = hash_create("source_writes sources", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	entry = hash_search(source_cache, &relid, HASH_FIND, NULL);
	if (entry && entry->valid)
	{
		*source = entry->source;
		return true;
	}

	/*
	 * A fresh catalog snapshot sees the row of a table created just now too,
	 * and can be taken in parallel workers.
	 */
	snapshot = RegisterSnapshot(GetCatalogSnapshot(oids.source_tables));
	found = read_row(relid, snapshot, source, NULL);
	UnregisterSnapshot(snapshot);
	if (!found)
		return false;
	source->key_index = meta_index(source->current_rel, SW_KEY_INDEX_SUFFIX);

	entry = hash_search(source_cache, &relid, HASH_ENTER, &found);
	entry->source = *source;
	entry->valid = true;
	return true;
}

/*
 * The immutable facts of a source table, or an error if it has no storage
 * (it was created while our event triggers could not run).
 */
void
sw_source_require(Oid relid, SwSource *source)
{
	if (!sw_source_lookup(relid, source))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_TABLE_NOT_FOUND),
				 errmsg("source table \"%s\" has no storage", get_rel_name(relid)),
				 errdetail("The extension's event triggers create the storage. They did not run for this table, or ran with check_function_bodies off, as in a restore, which brings the storage with the extension's catalog."),
				 errhint("Any ALTER FOREIGN TABLE on it, with the event triggers enabled and check_function_bodies on, creates new, empty storage.")));
}

/*
 * The source that relid names, in *source, for a function that was given
 * it; if it names none, an error (with a hint that says what a source
 * table is, if hint).
 */
void
sw_source_resolve(Oid relid, SwSource *source, bool hint)
{
	if (!sw_source_lookup(relid, source))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", get_rel_name(relid)),
				 hint ? errhint("Source tables are foreign tables on a source_writes server.") : 0));
}

/*
 * Is a source of one of kinds (SwKind bits)?  If not: false with detail
 * NULL, else an error that it is not a source of that kind, with detail.
 */
bool
sw_source_check_kind(const SwSource *source, int kinds, const char *detail)
{
	if (source->kind & kinds)
		return true;
	if (detail)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source table \"%s\" is not a %s source",
						get_rel_name(source->relid),
						kinds == SW_KIND_KAFKA ? "Kafka" : "webhook"),
				 errdetail_internal("%s", detail)));
	return false;
}

static int
compare_sources(const ListCell *a, const ListCell *b)
{
	Oid			ra = ((SwSource *) lfirst(a))->relid;
	Oid			rb = ((SwSource *) lfirst(b))->relid;

	return ra < rb ? -1 : (ra > rb ? 1 : 0);
}

/*
 * The sources of one server (or all, for InvalidOid), as SwSource
 * pointers in OID order, as of the latest snapshot.
 */
List *
sw_catalog_sources(Oid serverid)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Snapshot	snapshot;
	List	   *result = NIL;

	if (!resolve_catalog())
		return NIL;

	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rel = table_open(oids.source_tables, AccessShareLock);
	scan = systable_beginscan(rel, InvalidOid, false, SnapshotAny, 0, NULL);
	while (HeapTupleIsValid(tuple = next_visible(scan, snapshot)))
	{
		SwSource   *source = palloc(sizeof(SwSource));

		CHECK_FOR_INTERRUPTS();
		row_source(tuple, RelationGetDescr(rel), source, NULL);
		if (!OidIsValid(serverid) ||
			(get_rel_relkind(source->relid) == RELKIND_FOREIGN_TABLE &&
			 GetForeignServerIdByRelId(source->relid) == serverid))
			result = lappend(result, source);
		else
			pfree(source);
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	UnregisterSnapshot(snapshot);
	list_sort(result, compare_sources);
	return result;
}

/*
 * The sources whose kind is one of kinds (SwKind bits), as SwSource
 * pointers in OID order, as of the latest snapshot; none if the catalog is
 * not there.
 */
List *
sw_catalog_sources_of_kind(int kinds)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, sw_catalog_sources(InvalidOid))
	{
		SwSource   *source = lfirst(lc);

		if (source->kind & kinds)
			result = lappend(result, source);
	}
	return result;
}

/*
 * The OIDs of the sources of one of kinds (SwKind bits), in OID order, in
 * the caller's memory context: listed in the open transaction, or, when
 * none is open, in one of their own with a snapshot.  None if the
 * extension is not in the database.
 */
List *
sw_catalog_source_relids(int kinds)
{
	MemoryContext cxt = CurrentMemoryContext;
	bool		own = !IsTransactionState();
	List	   *result = NIL;
	ListCell   *lc;

	if (own)
	{
		SetCurrentStatementStartTimestamp();
		StartTransactionCommand();
		PushActiveSnapshot(GetTransactionSnapshot());
	}
	foreach(lc, sw_catalog_sources_of_kind(kinds))
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		result = lappend_oid(result, ((SwSource *) lfirst(lc))->relid);
		MemoryContextSwitchTo(old);
	}
	if (own)
	{
		PopActiveSnapshot();
		CommitTransactionCommand();
		MemoryContextSwitchTo(cxt);
	}
	return result;
}

/*
 * Is a transaction so old that it ended before any snapshot that can still
 * exist was taken?  Running transactions and the xmin of snapshots are
 * never 2^31 transactions behind the next id (wraparound protection), so
 * for anything newer, 32-bit transaction ids compare soundly.
 */
static bool
xid_is_ancient(FullTransactionId fxid)
{
	uint64		next = U64FromFullTransactionId(ReadNextFullTransactionId());

	return next - U64FromFullTransactionId(fxid) >= ((uint64) 1 << 31);
}

/*
 * Does an MVCC snapshot miss the batch of a transaction that was still
 * committing when a batch it sees was stamped?  It does if it takes the
 * transaction for running, unless that aborted: then there is no batch.
 */
static bool
snapshot_misses(Snapshot snapshot, FullTransactionId fxid)
{
	TransactionId xid = XidFromFullTransactionId(fxid);

	if (xid_is_ancient(fxid) || TransactionIdPrecedes(xid, snapshot->xmin) ||
		!XidInMVCCSnapshot(xid, snapshot))
		return false;
	return TransactionIdIsInProgress(xid) || TransactionIdDidCommit(xid);
}

/*
 * Did the transaction a batch row names write the row?  Not if the row was
 * restored from a dump: then the transaction ids it holds, and where it
 * says it wrote rows, mean nothing in this cluster.  The tuple's xmin is
 * made full against the next transaction id, as a transaction still
 * recent is; an older row compares unequal, and is taken for restored,
 * which costs a reader some precision, never correctness.
 */
static bool
row_is_own(HeapTuple tuple, Datum xid)
{
	FullTransactionId next = ReadNextFullTransactionId();
	TransactionId xmin = HeapTupleHeaderGetRawXmin(tuple->t_data);
	uint32		epoch = EpochFromFullTransactionId(next);

	if (xmin > XidFromFullTransactionId(next) && epoch > 0)
		epoch--;
	return FullTransactionIdEquals(FullTransactionIdFromEpochAndXid(epoch, xmin),
								   DatumGetFullTransactionId(xid));
}

/*
 * The batches that a batch row names as pending, in the caller's memory
 * context; returns how many.  A restored row names none that matter: every
 * batch it names committed before the dump was taken, or never did.
 */
static int
row_pending(TupleDesc desc, HeapTuple tuple, SwPending **pending)
{
	Datum		values[Natts_b];
	bool		nulls[Natts_b];
	Datum	   *ts;
	Datum	   *xids;
	int			n;
	int			nxids;

	heap_deform_tuple(tuple, desc, values, nulls);
	*pending = NULL;
	if (nulls[Anum_b_pending_ts - 1] || nulls[Anum_b_pending_xid - 1] ||
		!row_is_own(tuple, values[Anum_b_xid - 1]))
		return 0;
	deconstruct_array(DatumGetArrayTypeP(values[Anum_b_pending_ts - 1]),
					  INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &ts, NULL, &n);
	deconstruct_array(DatumGetArrayTypeP(values[Anum_b_pending_xid - 1]),
					  XID8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &xids, NULL, &nxids);
	if (n != nxids)
		elog(ERROR, "batch row of source table %u has %d pending timestamps and %d transactions",
			 DatumGetObjectId(values[Anum_b_source - 1]), n, nxids);
	*pending = palloc(sizeof(SwPending) * Max(n, 1));
	for (int i = 0; i < n; i++)
	{
		(*pending)[i].ts = DatumGetInt64(ts[i]);
		(*pending)[i].xid = DatumGetFullTransactionId(xids[i]);
	}
	return n;
}

static void
add_pending(SwStampState *state, int64 ts, FullTransactionId xid)
{
	if (state->npending == state->maxpending)
	{
		state->maxpending *= 2;
		state->pending = repalloc(state->pending,
								  sizeof(SwPending) * state->maxpending);
	}
	state->pending[state->npending].ts = ts;
	state->pending[state->npending].xid = xid;
	state->npending++;
}

/*
 * Begin a scan of the batches of a source with ts < before, newest first
 * (read it with systable_getnext_ordered(), backwards).  With SnapshotAny,
 * the caller tests visibility (next_visible_backward()).
 */
static SysScanDesc
begin_batches_backward(Relation rel, Relation index, Oid relid, int64 before,
					   Snapshot snapshot, ScanKey keys)
{
	ScanKeyInit(&keys[0], Anum_b_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_b_ts, BTLessStrategyNumber, F_INT8LT,
				Int64GetDatum(before));
	return systable_beginscan_ordered(rel, index, snapshot, 2, keys);
}

/*
 * The newest timestamp among the batches of a source that have not
 * aborted, and the batches still committing: what the controller needs
 * to stamp the next batch, under the source's stamp lock.  The batches are
 * read newest first with a dirty snapshot, which sees the batches of
 * transactions still running: those above the newest committed batch are
 * committing, and below it, only the batches that it names as pending can
 * still be.  The state's array of pending batches, if it has one, is kept
 * (and grown as needed).  Returns false if the source has no batch.
 */
bool
sw_catalog_stamp_state(Oid relid, SwStampState *state)
{
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData keys[2];
	SnapshotData dirty;
	HeapTuple	tuple;

	require_catalog();
	state->top = 0;
	state->npending = 0;
	if (state->pending == NULL)
	{
		state->maxpending = 8;
		state->pending = palloc(sizeof(SwPending) * state->maxpending);
	}

	InitDirtySnapshot(dirty);
	rel = table_open(oids.batches, AccessShareLock);
	index = index_open(oids.batches_ts, AccessShareLock);
	scan = begin_batches_backward(rel, index, relid, PG_INT64_MAX, &dirty, keys);
	while (HeapTupleIsValid(tuple = systable_getnext_ordered(scan, BackwardScanDirection)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		bool		isnull;
		int64		ts = DatumGetInt64(heap_getattr(tuple, Anum_b_ts, desc, &isnull));
		SwPending  *pending;
		int			n;

		if (state->top == 0)
			state->top = ts;
		if (TransactionIdIsValid(dirty.xmin))
		{
			add_pending(state, ts,
						DatumGetFullTransactionId(heap_getattr(tuple, Anum_b_xid,
															   desc, &isnull)));
			continue;
		}

		/* the newest committed batch */
		n = row_pending(desc, tuple, &pending);
		for (int i = 0; i < n; i++)
			if (!xid_is_ancient(pending[i].xid) &&
				TransactionIdIsInProgress(XidFromFullTransactionId(pending[i].xid)))
				add_pending(state, pending[i].ts, pending[i].xid);
		break;
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return state->top != 0 || state->npending != 0;
}

/*
 * The upper of a source as an MVCC snapshot sees it, if it sees a batch:
 * the first timestamp at which it may miss one.  Say the newest batch it
 * sees has timestamp ts.  Every batch before that one either committed
 * before it was stamped, and the snapshot, which sees it committed, sees
 * them too; or it was still committing then, and the batch names it as
 * pending.  So the upper is ts + 1, or the timestamp of the first pending
 * batch that the snapshot misses.
 */
static bool
snapshot_upper(Oid relid, Snapshot snapshot, int64 *upper)
{
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tuple;

	rel = table_open(oids.batches, AccessShareLock);
	index = index_open(oids.batches_ts, AccessShareLock);
	scan = begin_batches_backward(rel, index, relid, PG_INT64_MAX, SnapshotAny, keys);
	tuple = next_visible_backward(scan, snapshot);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;
		SwPending  *pending;
		int			n;

		*upper = DatumGetInt64(heap_getattr(tuple, Anum_b_ts,
											RelationGetDescr(rel), &isnull)) + 1;
		n = row_pending(RelationGetDescr(rel), tuple, &pending);
		for (int i = 0; i < n; i++)
			if (pending[i].ts < *upper && snapshot_misses(snapshot, pending[i].xid))
				*upper = pending[i].ts;
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return HeapTupleIsValid(tuple);
}

/*
 * The since that retention allows once upper has moved: it follows
 * upper - retain_history and never goes back.
 */
int64
sw_retained_since(int64 since, int64 upper, int64 retain_ms)
{
	if (retain_ms < 0 || upper - retain_ms <= since)
		return since;
	return upper - retain_ms;
}

/*
 * The frontiers of a source as an MVCC snapshot sees them: its upper
 * (from the batches), and its since, which follows upper - retain and
 * never falls behind the since stored in its row; false if it has no
 * catalog row.
 */
bool
sw_catalog_frontiers(Oid relid, Snapshot snapshot, SwFrontiers *frontiers)
{
	int64		upper;

	Assert(IsMVCCSnapshot(snapshot));
	if (!read_row(relid, snapshot, NULL, frontiers))
		return false;
	if (snapshot_upper(relid, snapshot, &upper))
		frontiers->upper = Max(upper, frontiers->since);
	frontiers->since = sw_retained_since(frontiers->since, frontiers->upper,
										 frontiers->retain);
	return true;
}

/*
 * Take the lock that serialises the stamping of batches of one source, and
 * anything else that must not run while a batch is stamped (dropping the
 * source).  It is a lock on the source as an object of our catalog, not on
 * the foreign table, so it conflicts with nothing but itself.  Writers
 * release it as soon as they have stamped (sw_catalog_unlock_source());
 * others keep it until the end of the transaction.
 */
void
sw_catalog_lock_source(Oid relid)
{
	require_catalog();
	LockDatabaseObject(oids.source_tables, relid, SW_LOCK_STAMP, ExclusiveLock);
}

void
sw_catalog_unlock_source(Oid relid)
{
	UnlockDatabaseObject(oids.source_tables, relid, SW_LOCK_STAMP, ExclusiveLock);
}

/*
 * Take the lock that serialises compactions of one source until the end
 * of the transaction, or report that another holds it when not waiting.
 * Writers never take it.
 */
bool
sw_catalog_lock_compaction(Oid relid, bool wait)
{
	require_catalog();
	if (wait)
	{
		LockDatabaseObject(oids.source_tables, relid, SW_LOCK_COMPACT, ExclusiveLock);
		return true;
	}
	return ConditionalLockDatabaseObject(oids.source_tables, relid,
										 SW_LOCK_COMPACT, ExclusiveLock);
}

/*
 * The latest version of the catalog row of a source, read with
 * SnapshotSelf, which takes no SSI predicate locks: its stored frontiers
 * (the upper it started with, and the since that compaction and changes
 * of retain_history last stored).  False if the source has no catalog row
 * (it was dropped).
 */
bool
sw_catalog_stored_frontiers(Oid relid, SwFrontiers *frontiers)
{
	return read_row(relid, SnapshotSelf, NULL, frontiers);
}

/*
 * Store a source's since, and the retention it follows from now on.  Only
 * compaction and changes of the table (which conflict with compaction
 * through the table's lock) do, so the row found with SnapshotSelf is its
 * latest version and nobody else is updating it; it is updated in place of
 * that version, the way PostgreSQL updates its own catalogs, whatever the
 * caller's isolation level.
 */
void
sw_catalog_set_since(Oid relid, int64 since, int64 retain)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Datum		values[Natts_st] = {0};
	bool		nulls[Natts_st] = {0};
	bool		replace[Natts_st] = {0};

	require_catalog();
	rel = table_open(oids.source_tables, RowExclusiveLock);
	scan = begin_row_scan(rel, relid, SnapshotSelf, &key);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "source table %u has no catalog row", relid);

	values[Anum_st_since - 1] = Int64GetDatum(since);
	values[Anum_st_retain - 1] = Int64GetDatum(retain);
	replace[Anum_st_since - 1] = replace[Anum_st_retain - 1] = true;
	tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
	CatalogTupleUpdate(rel, &tuple->t_self, tuple);

	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/* insert a row, of values and nulls, into a table of the catalog */
static void
insert_row(Oid table, Datum *values, bool *nulls)
{
	Relation	rel = table_open(table, RowExclusiveLock);
	HeapTuple	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);

	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
}

/*
 * Add the catalog row of a new source table.
 */
void
sw_catalog_insert(const SwSource *source, const SwFrontiers *frontiers)
{
	Datum		values[Natts_st];
	bool		nulls[Natts_st] = {0};

	require_catalog();
	values[Anum_st_relid - 1] = ObjectIdGetDatum(source->relid);
	values[Anum_st_kind - 1] =
		CStringGetTextDatum(source->kind == SW_KIND_WEBHOOK ? "webhook" : "kafka");
	values[Anum_st_current_rel - 1] = ObjectIdGetDatum(source->current_rel);
	values[Anum_st_history_rel - 1] = ObjectIdGetDatum(source->history_rel);
	values[Anum_st_upper - 1] = Int64GetDatum(frontiers->upper);
	values[Anum_st_since - 1] = Int64GetDatum(frontiers->since);
	values[Anum_st_retain - 1] = Int64GetDatum(frontiers->retain);
	values[Anum_st_moved - 1] = BoolGetDatum(false);
	insert_row(oids.source_tables, values, nulls);
}

/*
 * Fence a source that moved: from the commit on, it takes no writes (see
 * sw_writer_open()).  Every backend reads it again: the table's relcache
 * entry is invalidated.
 */
void
sw_catalog_set_moved(Oid relid)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	Datum		values[Natts_st] = {0};
	bool		nulls[Natts_st] = {0};
	bool		replace[Natts_st] = {0};

	require_catalog();
	rel = table_open(oids.source_tables, RowExclusiveLock);
	if (RelationGetDescr(rel)->natts < Anum_st_moved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the catalog of extension \"source_writes\" is out of date"),
				 errhint("Run ALTER EXTENSION source_writes UPDATE.")));
	scan = begin_row_scan(rel, relid, SnapshotSelf, &key);
	tuple = systable_getnext(scan);
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "source table %u has no catalog row", relid);
	values[Anum_st_moved - 1] = BoolGetDatum(true);
	replace[Anum_st_moved - 1] = true;
	tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
	CatalogTupleUpdate(rel, &tuple->t_self, tuple);
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
	CacheInvalidateRelcacheByRelid(relid);
}

/*
 * Delete the rows of one of our catalog tables whose first column is the
 * given OID.
 */
static void
delete_rows(Oid table, Oid index, Oid key)
{
	Relation	rel = table_open(table, RowExclusiveLock);
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;

	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(key));
	scan = systable_beginscan(rel, index, true, SnapshotSelf, 1, &skey);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		CHECK_FOR_INTERRUPTS();
		CatalogTupleDelete(rel, &tuple->t_self);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * Remove the catalog row and batches of a dropped source table, if there
 * are any; nothing when the extension itself is being dropped.  Under the
 * source's lock, so that no writer stamps it meanwhile.  (Dropping the
 * table invalidated its cache entries already.)
 */
void
sw_catalog_delete(Oid relid)
{
	StaticAssertStmt(Anum_st_relid == 1 && Anum_b_source == 1 && Anum_p_source == 1,
					 "the catalog tables are keyed by their first column");

	if (!resolve_catalog())
		return;
	sw_catalog_lock_source(relid);
	delete_rows(oids.source_tables, oids.source_tables_pkey, relid);
	delete_rows(oids.batches, oids.batches_ts, relid);
	if (OidIsValid(oids.segments))
		delete_rows(oids.segments, oids.segments_ts, relid);
	delete_rows(oids.progress, oids.progress_pkey, relid);
	delete_rows(oids.errors, oids.errors_source, relid);
	delete_rows(oids.deliveries, oids.deliveries_pkey, relid);
	if (OidIsValid(oids.uncarried))
		delete_rows(oids.uncarried, oids.uncarried_source, relid);
}

/*
 * Copy the kept errors of source from, as snapshot sees them, to source
 * to (a new version of it: its retry_errors() decodes them with its own
 * columns).
 */
void
sw_catalog_copy_errors(Oid from, Oid to, Snapshot snapshot)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData skey;
	HeapTuple	tuple;
	Datum		values[1] = {ObjectIdGetDatum(to)};
	bool		nulls[1] = {false};
	int			columns[1] = {1};	/* source */

	require_catalog();
	rel = table_open(oids.errors, RowExclusiveLock);
	ScanKeyInit(&skey, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(from));
	scan = systable_beginscan(rel, oids.errors_source, true, snapshot, 1, &skey);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		HeapTuple	copy;

		CHECK_FOR_INTERRUPTS();
		copy = heap_modify_tuple_by_cols(tuple, RelationGetDescr(rel), 1, columns,
										 values, nulls);
		CatalogTupleInsert(rel, copy);
		heap_freetuple(copy);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * The table of edits that a new version could not carry, and its index on
 * (source); InvalidOid before 0.3.
 */
Oid
sw_catalog_uncarried_oid(void)
{
	require_catalog();
	return oids.uncarried;
}

/*
 * Remove only the catalog row of a source, keeping its batches (a row
 * restored from a dump replaces it).
 */
void
sw_catalog_delete_row(Oid relid)
{
	require_catalog();
	delete_rows(oids.source_tables, oids.source_tables_pkey, relid);
	CacheInvalidateRelcacheByRelid(relid);
}

/*
 * A new batch id.  Ids come from a sequence, so they are never reused,
 * not after a crash and not after a dump is restored; they say nothing
 * about order (the batch's timestamp does).
 */
int64
sw_catalog_new_batch_id(void)
{
	require_catalog();
	return nextval_internal(oids.batch_ids, false);
}

/*
 * Add a block that a batch wrote a row into to its ranges: it extends or
 * falls in a range, starts a new one, or, when there are as many as can be
 * kept, widens the range nearest to it.
 */
void
sw_block_ranges_add(SwBlockRanges *ranges, Oid file, BlockNumber block)
{
	int			nearest = 0;
	BlockNumber gap = InvalidBlockNumber;

	if (ranges->n < 0)
		return;
	if (ranges->n == 0)
		ranges->file = file;
	else if (ranges->file != file)
	{
		ranges->n = -1;			/* the heap was rewritten */
		return;
	}
	for (int i = ranges->n - 1; i >= 0; i--)
	{
		BlockNumber d;

		if (block >= ranges->from[i] && block < ranges->to[i])
			return;
		if (block == ranges->to[i])
		{
			ranges->to[i]++;
			return;
		}
		d = block < ranges->from[i] ? ranges->from[i] - block : block - ranges->to[i];
		if (d < gap)
		{
			gap = d;
			nearest = i;
		}
	}
	if (ranges->n < SW_MAX_BLOCK_RANGES)
	{
		ranges->from[ranges->n] = block;
		ranges->to[ranges->n] = block + 1;
		ranges->n++;
	}
	else if (block < ranges->from[nearest])
		ranges->from[nearest] = block;
	else
		ranges->to[nearest] = block + 1;
}

/*
 * Put where a batch wrote rows of a hidden heap into its catalog row:
 * both columns null if it is not known; an empty array (and no file) if
 * the batch wrote none.
 */
static void
set_blocks(Datum *values, bool *nulls, SwHeap heap, const SwBlockRanges *blocks)
{
	int			file = Anum_b_file[heap] - 1;
	int			ranges = Anum_b_blocks[heap] - 1;
	Datum		r[2 * SW_MAX_BLOCK_RANGES];

	if (blocks->n < 0)
	{
		nulls[file] = nulls[ranges] = true;
		return;
	}
	for (int i = 0; i < blocks->n; i++)
	{
		r[2 * i] = Int64GetDatum(blocks->from[i]);
		r[2 * i + 1] = Int64GetDatum(blocks->to[i]);
	}
	nulls[file] = blocks->n == 0;
	values[file] = ObjectIdGetDatum(blocks->file);
	values[ranges] = PointerGetDatum(
		construct_array(r, 2 * blocks->n, INT8OID, sizeof(int64),
						FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

/*
 * Record a batch of a source, stamped by the current (top) transaction
 * (or, a batch copied from another source's log, by the transaction its
 * xid names), with the batches that were still committing when it was stamped and
 * where it wrote current rows and history rows.
 */
void
sw_catalog_insert_batch(Oid relid, const SwBatch *batch,
						int npending, const SwPending *pending,
						const SwBlockRanges blocks[2])
{
	Datum		values[Natts_b];
	bool		nulls[Natts_b] = {0};

	require_catalog();
	values[Anum_b_source - 1] = ObjectIdGetDatum(relid);
	values[Anum_b_batch - 1] = Int64GetDatum(batch->batch);
	values[Anum_b_ts - 1] = Int64GetDatum(batch->ts);
	values[Anum_b_origin - 1] = CStringGetTextDatum(origin_names[batch->origin]);
	values[Anum_b_role - 1] = NameGetDatum(&batch->role);
	values[Anum_b_xid - 1] = FullTransactionIdGetDatum(FullTransactionIdIsValid(batch->xid) ?
													   batch->xid : GetTopFullTransactionId());
	if (npending == 0)
		nulls[Anum_b_pending_ts - 1] = nulls[Anum_b_pending_xid - 1] = true;
	else
	{
		Datum	   *ts = palloc(sizeof(Datum) * npending);
		Datum	   *xids = palloc(sizeof(Datum) * npending);

		for (int i = 0; i < npending; i++)
		{
			ts[i] = Int64GetDatum(pending[i].ts);
			xids[i] = FullTransactionIdGetDatum(pending[i].xid);
		}
		values[Anum_b_pending_ts - 1] = PointerGetDatum(
			construct_array(ts, npending, INT8OID, sizeof(int64),
							FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
		values[Anum_b_pending_xid - 1] = PointerGetDatum(
			construct_array(xids, npending, XID8OID, sizeof(int64),
							FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
	set_blocks(values, nulls, SW_CURRENT_HEAP, &blocks[SW_CURRENT_HEAP]);
	set_blocks(values, nulls, SW_HISTORY_HEAP, &blocks[SW_HISTORY_HEAP]);
	insert_row(oids.batches, values, nulls);
}

/*
 * Does source_writes.progress have the columns of version 0.2 (what a
 * partition's offset is a position in, why it is not followed, what was
 * lost)?  Until ALTER EXTENSION ... UPDATE, a library of 0.2 finds the
 * columns of 0.1, and keeps to them.
 */
static bool
progress_has_identity(Relation rel)
{
	return RelationGetDescr(rel)->natts >= Anum_p_stopped;
}

bool
sw_catalog_progress_has_identity(void)
{
	Relation	rel;
	bool		result;

	require_catalog();
	rel = table_open(oids.progress, AccessShareLock);
	result = progress_has_identity(rel);
	table_close(rel, AccessShareLock);
	return result;
}

/* a text column of a progress row, NULL or a copy */
static char *
text_or_null(Datum value, bool isnull)
{
	return isnull ? NULL : TextDatumGetCString(value);
}

/* a progress row as a SwProgress, in the current memory context */
static SwProgress *
progress_from_tuple(Relation rel, HeapTuple tuple)
{
	Datum		values[Natts_p];
	bool		nulls[Natts_p];
	SwProgress *p = palloc0(sizeof(SwProgress));

	Assert(RelationGetDescr(rel)->natts <= Natts_p);
	heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
	p->part = DatumGetInt32(values[Anum_p_part - 1]);
	p->next_offset = DatumGetInt64(values[Anum_p_next_offset - 1]);
	if (progress_has_identity(rel))
	{
		p->topic = text_or_null(values[Anum_p_topic - 1], nulls[Anum_p_topic - 1]);
		p->cluster_id = text_or_null(values[Anum_p_cluster_id - 1],
									 nulls[Anum_p_cluster_id - 1]);
		p->lost = DatumGetInt64(values[Anum_p_lost - 1]);
		p->stopped = text_or_null(values[Anum_p_stopped - 1],
								  nulls[Anum_p_stopped - 1]);
	}
	return p;
}

/*
 * A new progress row: a partition, its next offset and what it is a
 * position in (NULLs: not known yet); nothing lost, not stopped.
 */
static HeapTuple
progress_tuple(Relation rel, Oid relid, int32 part, int64 next_offset,
			   const char *topic, const char *cluster_id)
{
	Datum		values[Natts_p] = {0};
	bool		nulls[Natts_p] = {0};

	values[Anum_p_source - 1] = ObjectIdGetDatum(relid);
	values[Anum_p_part - 1] = Int32GetDatum(part);
	values[Anum_p_next_offset - 1] = Int64GetDatum(next_offset);
	if (progress_has_identity(rel))
	{
		nulls[Anum_p_topic - 1] = topic == NULL;
		if (topic)
			values[Anum_p_topic - 1] = CStringGetTextDatum(topic);
		nulls[Anum_p_cluster_id - 1] = cluster_id == NULL;
		if (cluster_id)
			values[Anum_p_cluster_id - 1] = CStringGetTextDatum(cluster_id);
		values[Anum_p_lost - 1] = Int64GetDatum(0);
		nulls[Anum_p_stopped - 1] = true;
	}
	return heap_form_tuple(RelationGetDescr(rel), values, nulls);
}

/* start a scan of the progress row of a partition, with a snapshot */
static SysScanDesc
scan_progress_row(Relation rel, Oid relid, int32 part, Snapshot snapshot)
{
	ScanKeyData keys[2];

	ScanKeyInit(&keys[0], Anum_p_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_p_part, BTEqualStrategyNumber, F_INT4EQ,
				Int32GetDatum(part));
	return systable_beginscan(rel, oids.progress_pkey, true, snapshot, 2, keys);
}

/*
 * Move the progress of a partition of a source from the offset a batch
 * started at to the one after its last, and count the offsets among them
 * that the brokers had deleted before they could be ingested (lost): a
 * compare-and-set, run by the controller under the source's stamp lock
 * when it stamps the batch.  The row is read with a dirty snapshot, so
 * that a batch of another writer stamped and still committing counts: its
 * offsets are taken.  A partition without a row starts at any offset.
 * Any mismatch is an error that rolls the batch back: its offsets were
 * consumed by another writer, or moved by reset_offsets().
 */
void
sw_catalog_advance_progress(Oid relid, int32 part, int64 from, int64 to, int64 lost)
{
	Relation	rel;
	SysScanDesc scan;
	SnapshotData dirty;
	HeapTuple	tuple;

	require_catalog();
	InitDirtySnapshot(dirty);
	rel = table_open(oids.progress, RowExclusiveLock);
	scan = scan_progress_row(rel, relid, part, &dirty);
	tuple = systable_getnext(scan);

	if (HeapTupleIsValid(tuple))
	{
		bool		committing = TransactionIdIsValid(dirty.xmin) ||
			TransactionIdIsValid(dirty.xmax);
		SwProgress *stored = progress_from_tuple(rel, tuple);
		Datum		values[Natts_p] = {0};
		bool		nulls[Natts_p] = {0};
		bool		replace[Natts_p] = {0};

		if (committing || stored->next_offset != from)
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("offsets of partition %d of source table \"%s\" were consumed by another writer",
							part, get_rel_name(relid)),
					 committing
					 ? errdetail("Another batch that consumed the partition is committing.")
					 : errdetail("The batch starts at offset " INT64_FORMAT ", but the partition's next offset is " INT64_FORMAT ".",
								 from, stored->next_offset),
					 errhint("Resume from the offsets stored in source_writes.progress.")));
		values[Anum_p_next_offset - 1] = Int64GetDatum(to);
		replace[Anum_p_next_offset - 1] = true;
		if (lost > 0 && progress_has_identity(rel))
		{
			values[Anum_p_lost - 1] = Int64GetDatum(stored->lost + lost);
			replace[Anum_p_lost - 1] = true;
		}
		tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
		CatalogTupleUpdate(rel, &tuple->t_self, tuple);
	}
	else
	{
		tuple = progress_tuple(rel, relid, part, to, NULL, NULL);
		if (lost > 0 && progress_has_identity(rel))
		{
			Datum		values[Natts_p] = {0};
			bool		nulls[Natts_p] = {0};
			bool		replace[Natts_p] = {0};

			values[Anum_p_lost - 1] = Int64GetDatum(lost);
			replace[Anum_p_lost - 1] = true;
			tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
		}
		CatalogTupleInsert(rel, tuple);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * The stored progress of each partition of a source, as a list of
 * SwProgress in the caller's memory context, read with a fresh snapshot.
 */
List *
sw_catalog_progress(Oid relid)
{
	Snapshot	snapshot = RegisterSnapshot(GetLatestSnapshot());
	List	   *result = sw_catalog_progress_at(relid, snapshot);

	UnregisterSnapshot(snapshot);
	return result;
}

/*
 * The same, read with a given snapshot: export() reads the offsets with
 * the rows that they are the offsets of.
 */
List *
sw_catalog_progress_at(Oid relid, Snapshot snapshot)
{
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	List	   *result = NIL;

	require_catalog();
	rel = table_open(oids.progress, AccessShareLock);
	ScanKeyInit(&key, Anum_p_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, oids.progress_pkey, true, snapshot, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		result = lappend(result, progress_from_tuple(rel, tuple));
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return result;
}

/*
 * Let the workers of a source store where its new partitions start one at
 * a time, until the end of the transaction: a lock on an object of our own
 * catalog, which no user command takes (reset_offsets() takes it too).
 */
void
sw_catalog_lock_progress(Oid relid)
{
	require_catalog();
	LockDatabaseObject(oids.progress, relid, 0, ExclusiveLock);
}

/*
 * Store where a partition that has no progress yet starts, without a
 * batch, and what the offset is a position in (NULLs: not known); a no-op
 * if it has some (another writer was first: its wins, and the caller
 * reads it again).
 */
void
sw_catalog_start_progress(Oid relid, int32 part, int64 next_offset,
						  const char *topic, const char *cluster_id)
{
	Relation	rel;
	SysScanDesc scan;
	SnapshotData dirty;

	require_catalog();
	InitDirtySnapshot(dirty);
	rel = table_open(oids.progress, RowExclusiveLock);
	scan = scan_progress_row(rel, relid, part, &dirty);
	if (!HeapTupleIsValid(systable_getnext(scan)))
	{
		HeapTuple	tuple = progress_tuple(rel, relid, part, next_offset,
										   topic, cluster_id);

		CatalogTupleInsert(rel, tuple);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
}

/*
 * Store a partition's next offset, what it is a position in and why it is
 * not followed (p->stopped; NULL: it is), keeping the count of what was
 * lost; under the progress lock (sw_catalog_lock_progress()).  Does
 * nothing where the catalog has no such columns (0.1's) but move the
 * offset.  False if the partition has no row.
 */
bool
sw_catalog_set_progress(Oid relid, const SwProgress *p)
{
	Relation	rel;
	SysScanDesc scan;
	HeapTuple	tuple;
	Snapshot	snapshot;
	bool		found;

	require_catalog();
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	rel = table_open(oids.progress, RowExclusiveLock);
	scan = scan_progress_row(rel, relid, p->part, snapshot);
	tuple = systable_getnext(scan);
	found = HeapTupleIsValid(tuple);
	if (found)
	{
		Datum		values[Natts_p] = {0};
		bool		nulls[Natts_p] = {0};
		bool		replace[Natts_p] = {0};

		values[Anum_p_next_offset - 1] = Int64GetDatum(p->next_offset);
		replace[Anum_p_next_offset - 1] = true;
		if (progress_has_identity(rel))
		{
			const char *texts[3] = {p->topic, p->cluster_id, p->stopped};
			const AttrNumber attnums[3] = {Anum_p_topic, Anum_p_cluster_id, Anum_p_stopped};

			for (int i = 0; i < 3; i++)
			{
				nulls[attnums[i] - 1] = texts[i] == NULL;
				if (texts[i])
					values[attnums[i] - 1] = CStringGetTextDatum(texts[i]);
				replace[attnums[i] - 1] = true;
			}
		}
		tuple = heap_modify_tuple(tuple, RelationGetDescr(rel), values, nulls, replace);
		CatalogTupleUpdate(rel, &tuple->t_self, tuple);
	}
	systable_endscan(scan);
	table_close(rel, RowExclusiveLock);
	UnregisterSnapshot(snapshot);
	return found;
}

/*
 * Forget the progress of every partition of a source: it starts again as
 * the first time, at its start_offset.  Under the progress lock.
 */
void
sw_catalog_delete_progress(Oid relid)
{
	require_catalog();
	delete_rows(oids.progress, oids.progress_pkey, relid);
}

static SwOrigin
parse_origin(const char *name)
{
	for (int i = 0; i < lengthof(origin_names); i++)
		if (strcmp(name, origin_names[i]) == 0)
			return i;
	elog(ERROR, "unknown batch origin \"%s\"", name);
	return SW_ORIGIN_USER;		/* keep compiler quiet */
}

/* an origin by its name, as the log names it */
SwOrigin
sw_origin_of(const char *name)
{
	return parse_origin(name);
}

/*
 * Start gathering where batches wrote rows in a hidden heap: nothing yet,
 * known.
 */
void
sw_written_blocks_init(SwWrittenBlocks *written)
{
	written->known = true;
	written->file = InvalidOid;
	written->npairs = 0;
	written->maxpairs = 64;
	written->pairs = palloc(sizeof(BlockNumber) * 2 * written->maxpairs);
}

/*
 * Add where a batch wrote rows in a hidden heap to what was gathered.
 */
void
sw_written_blocks_add(SwWrittenBlocks *written, const SwBlockRanges *ranges)
{
	if (!written->known)
		return;
	if (ranges->n < 0 ||
		(ranges->n > 0 && OidIsValid(written->file) && written->file != ranges->file))
	{
		written->known = false;
		return;
	}
	if (ranges->n > 0)
		written->file = ranges->file;
	for (int i = 0; i < ranges->n; i++)
	{
		if (written->npairs == written->maxpairs)
		{
			written->maxpairs *= 2;
			written->pairs = repalloc(written->pairs,
									  sizeof(BlockNumber) * 2 * written->maxpairs);
		}
		written->pairs[2 * written->npairs] = ranges->from[i];
		written->pairs[2 * written->npairs + 1] = ranges->to[i];
		written->npairs++;
	}
}

/*
 * Add where a catalog row (of a batch, or of a segment, whose columns file
 * and blocks are given) says its batches wrote rows in a hidden heap to
 * what was gathered; a row that does not say, or was restored from a dump
 * (own is false: the blocks were another heap's), makes it unknown.  A
 * batch row has at most SW_MAX_BLOCK_RANGES ranges, a segment row more.
 */
static void
add_blocks(SwWrittenBlocks *written, AttrNumber file_att, AttrNumber blocks_att,
		   Datum *values, bool *nulls, bool own)
{
	int			file = file_att - 1;
	int			blocks = blocks_att - 1;
	ArrayType  *array;
	Datum	   *r;
	int			n;

	if (!written->known)
		return;
	if (nulls[blocks] || !own)
	{
		written->known = false;
		return;
	}
	array = DatumGetArrayTypeP(values[blocks]);
	deconstruct_array(array, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
					  TYPALIGN_DOUBLE, &r, NULL, &n);
	if (n % 2 != 0 || (n > 0 && nulls[file]) ||
		(n > 0 && OidIsValid(written->file) &&
		 written->file != DatumGetObjectId(values[file])))
		written->known = false;
	else
	{
		if (n > 0)
			written->file = DatumGetObjectId(values[file]);
		if (written->npairs + n / 2 > written->maxpairs)
		{
			written->maxpairs = Max(2 * written->maxpairs, written->npairs + n / 2);
			written->pairs = repalloc(written->pairs,
									  sizeof(BlockNumber) * 2 * written->maxpairs);
		}
		for (int i = 0; i < n; i++)
			written->pairs[2 * written->npairs + i] = (BlockNumber) DatumGetInt64(r[i]);
		written->npairs += n / 2;
	}
	pfree(r);
	if ((Pointer) array != DatumGetPointer(values[blocks]))
		pfree(array);
}

/* the same, of a batch row */
static void
add_row_blocks(SwWrittenBlocks *written, SwHeap heap, Datum *values, bool *nulls,
			   bool own)
{
	add_blocks(written, Anum_b_file[heap], Anum_b_blocks[heap], values, nulls,
			   own);
}

/*
 * Add where the chunks of a segment row (see SW_SEGMENT_CHUNK) that hold
 * batches with timestamps in [from_ts, until) wrote rows in the current
 * heap to what was gathered.  A chunk's batches have timestamps from the
 * newest of the chunk before (or the segment's ts_from) to its own newest.
 */
static void
add_chunk_blocks(SwWrittenBlocks *written, Datum *values, bool *nulls,
				 int64 ts_from, int64 from_ts, int64 until)
{
	Datum	   *c;
	int			n;
	int64		lo = ts_from;

	if (!written->known)
		return;
	deconstruct_array(DatumGetArrayTypeP(values[Anum_s_current_chunks - 1]),
					  INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE,
					  &c, NULL, &n);
	if (n % SW_CHUNK_WIDTH != 0)
	{
		written->known = false;
		return;
	}
	for (int k = 0; k < n / SW_CHUNK_WIDTH; k++)
	{
		Datum	   *chunk = &c[k * SW_CHUNK_WIDTH];
		int64		hi = DatumGetInt64(chunk[0]);
		int64		m = DatumGetInt64(chunk[1]);

		if (hi >= from_ts && lo < until)
		{
			if (m < 0 || m > SW_CHUNK_RANGES ||
				(m > 0 && (nulls[Anum_s_current_file - 1] ||
						   (OidIsValid(written->file) &&
							written->file != DatumGetObjectId(values[Anum_s_current_file - 1])))))
			{
				written->known = false;
				return;
			}
			if (m > 0)
				written->file = DatumGetObjectId(values[Anum_s_current_file - 1]);
			if (written->npairs + m > written->maxpairs)
			{
				written->maxpairs = Max(2 * written->maxpairs, written->npairs + m);
				written->pairs = repalloc(written->pairs,
										  sizeof(BlockNumber) * 2 * written->maxpairs);
			}
			for (int i = 0; i < 2 * m; i++)
				written->pairs[2 * written->npairs + i] =
					(BlockNumber) DatumGetInt64(chunk[2 + i]);
			written->npairs += m;
		}
		lo = hi;
	}
	pfree(c);
}

/*
 * Load the segments of a source that the MVCC snapshot sees and that hold
 * batches with ts >= from_ts into a set, in the caller's memory context:
 * their bounds and dictionaries; their packed batches are read and
 * unpacked only when a batch is looked up in them; and, if written is not
 * NULL, add where they wrote rows, as sw_catalog_load_batches() does;
 * those that begin before load_until.  NULL if there are none.
 */
static SwSegmentSet *
load_segments(Oid relid, int64 from_ts, Snapshot snapshot, int64 current_until,
			  SwWrittenBlocks written[2], int64 load_until)
{
	SwSegmentSet *set = NULL;
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tuple;

	if (!OidIsValid(oids.segments))
		return NULL;
	rel = table_open(oids.segments, AccessShareLock);
	ScanKeyInit(&keys[0], Anum_s_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_s_ts_to, BTGreaterEqualStrategyNumber, F_INT8GE,
				Int64GetDatum(from_ts));
	scan = systable_beginscan(rel, oids.segments_ts, true, SnapshotAny, 2, keys);
	while (HeapTupleIsValid(tuple = next_visible(scan, snapshot)))
	{
		Datum		values[Natts_s];
		bool		nulls[Natts_s];
		SwSegment  *seg;
		Datum	   *origins;
		Datum	   *roles;
		int			norigins;
		int			nroles;

		CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		/* in order of ts_to, and so of ts_from: the ranges are disjoint */
		if (DatumGetInt64(values[Anum_s_ts_from - 1]) >= load_until)
			break;
		if (set == NULL)
			set = sw_segments_create();
		seg = sw_segments_add(set);
		seg->ts_from = DatumGetInt64(values[Anum_s_ts_from - 1]);
		seg->ts_to = DatumGetInt64(values[Anum_s_ts_to - 1]);
		seg->batch_from = DatumGetInt64(values[Anum_s_batch_from - 1]);
		seg->batch_to = DatumGetInt64(values[Anum_s_batch_to - 1]);
		seg->nbatches = DatumGetInt32(values[Anum_s_nbatches - 1]);
		deconstruct_array(DatumGetArrayTypeP(values[Anum_s_origins - 1]),
						  TEXTOID, -1, false, TYPALIGN_INT,
						  &origins, NULL, &norigins);
		deconstruct_array(DatumGetArrayTypeP(values[Anum_s_roles - 1]),
						  NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR,
						  &roles, NULL, &nroles);
		if (norigins != nroles || norigins == 0 || norigins > PG_UINT16_MAX ||
			seg->nbatches <= 0)
			elog(ERROR, "segment of source table %u has %d origins, %d roles and %d batches",
				 relid, norigins, nroles, seg->nbatches);
		sw_segment_check(seg->nbatches, seg->batch_from, seg->batch_to,
						 seg->ts_from, seg->ts_to);
		seg->nkinds = norigins;
		seg->origins = palloc(sizeof(SwOrigin) * norigins);
		seg->roles = palloc(sizeof(NameData) * norigins);
		for (int i = 0; i < norigins; i++)
		{
			seg->origins[i] = parse_origin(TextDatumGetCString(origins[i]));
			namestrcpy(&seg->roles[i], NameStr(*DatumGetName(roles[i])));
		}
		seg->tid = tuple->t_self;
		if (written)
		{
			bool		own = row_is_own(tuple, values[Anum_s_xid - 1]);

			/* of a segment that reaches past the range, its chunks' blocks */
			if (seg->ts_from < current_until &&
				(seg->ts_from < from_ts || seg->ts_to >= current_until) &&
				own && !nulls[Anum_s_current_blocks - 1] &&
				!nulls[Anum_s_current_chunks - 1])
				add_chunk_blocks(&written[SW_CURRENT_HEAP], values, nulls,
								 seg->ts_from, from_ts, current_until);
			else if (seg->ts_from < current_until)
				add_blocks(&written[SW_CURRENT_HEAP], Anum_s_file[SW_CURRENT_HEAP],
						   Anum_s_blocks[SW_CURRENT_HEAP], values, nulls, own);
			add_blocks(&written[SW_HISTORY_HEAP], Anum_s_file[SW_HISTORY_HEAP],
					   Anum_s_blocks[SW_HISTORY_HEAP], values, nulls, own);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (set)
		sw_segments_finish(set);
	return set;
}

/*
 * The packed batches of the segment row at tid, which a reader's snapshot
 * that still runs saw (so it cannot have been pruned), in the caller's
 * memory context.
 */
bytea *
sw_catalog_segment_packed(ItemPointer tid)
{
	Relation	rel = table_open(oids.segments, AccessShareLock);
	HeapTupleData tuple;
	Buffer		buffer;
	bool		isnull;
	bytea	   *packed;

	tuple.t_self = *tid;
	if (!heap_fetch(rel, SnapshotAny, &tuple, &buffer, false))
		elog(ERROR, "segment row (%u,%u) of source_writes.batch_segments is gone",
			 ItemPointerGetBlockNumber(tid), ItemPointerGetOffsetNumber(tid));
	packed = DatumGetByteaPCopy(heap_getattr(&tuple, Anum_s_batches,
											 RelationGetDescr(rel), &isnull));
	ReleaseBuffer(buffer);
	table_close(rel, AccessShareLock);
	return packed;
}

/*
 * The committed batches of a source with ts >= from_ts that the MVCC
 * snapshot sees, as a hash table from batch id to SwBatch in the caller's
 * memory context, of those that have their own rows, and (*segments) a set
 * of the segments that hold the others, NULL if none (their bounds and
 * dictionaries: their packed batches are read when needed); and, if written is
 * not NULL, where they wrote rows: in the current heap, those before
 * current_until; in the history, all.  (A segment may also hold batches
 * before from_ts: a lookup tells by their timestamps.)  Only the batches
 * before load_until, and the segments that begin before it, are loaded:
 * PG_INT64_MAX for all.
 */
HTAB *
sw_catalog_load_batches(Oid relid, int64 from_ts, Snapshot snapshot,
						int64 current_until, SwWrittenBlocks written[2],
						SwSegmentSet **segments, int64 load_until)
{
	Relation	rel;
	HASHCTL		ctl;
	HTAB	   *batches;
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tuple;

	Assert(IsMVCCSnapshot(snapshot));
	require_catalog();

	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(SwBatch);
	ctl.hcxt = CurrentMemoryContext;
	batches = hash_create("source_writes batches", 256, &ctl,
						  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);

	rel = table_open(oids.batches, AccessShareLock);
	ScanKeyInit(&keys[0], Anum_b_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_b_ts, BTGreaterEqualStrategyNumber, F_INT8GE,
				Int64GetDatum(from_ts));
	ScanKeyInit(&keys[2], Anum_b_ts, BTLessStrategyNumber, F_INT8LT,
				Int64GetDatum(load_until));
	scan = systable_beginscan(rel, oids.batches_ts, true, SnapshotAny,
							  load_until == PG_INT64_MAX ? 2 : 3, keys);
	while (HeapTupleIsValid(tuple = next_visible(scan, snapshot)))
	{
		Datum		values[Natts_b];
		bool		nulls[Natts_b];
		int64		id;
		SwBatch    *batch;

		CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tuple, RelationGetDescr(rel), values, nulls);
		id = DatumGetInt64(values[Anum_b_batch - 1]);
		batch = hash_search(batches, &id, HASH_ENTER, NULL);
		batch->ts = DatumGetInt64(values[Anum_b_ts - 1]);
		batch->origin = parse_origin(TextDatumGetCString(values[Anum_b_origin - 1]));
		namestrcpy(&batch->role, NameStr(*DatumGetName(values[Anum_b_role - 1])));
		batch->xid = DatumGetFullTransactionId(values[Anum_b_xid - 1]);
		if (written)
		{
			bool		own = row_is_own(tuple, values[Anum_b_xid - 1]);

			if (batch->ts < current_until)
				add_row_blocks(&written[SW_CURRENT_HEAP], SW_CURRENT_HEAP,
							   values, nulls, own);
			add_row_blocks(&written[SW_HISTORY_HEAP], SW_HISTORY_HEAP,
						   values, nulls, own);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	*segments = load_segments(relid, from_ts, snapshot, current_until, written,
							  load_until);
	return batches;
}

/*
 * A row of source_writes.batch_segments, as compaction reads it: a copy of
 * the tuple, its bounds and, once unpacked, its batches.
 */
typedef struct SegmentRow
{
	HeapTuple	tuple;
	int64		ts_from;
	int64		ts_to;
	int64		batch_from;
	int64		batch_to;
	int			nbatches;
	int			nkinds;
	int64	   *ids;			/* NULL until unpacked */
	int64	   *ts;
	uint16	   *kinds;
	uint64	   *xids;
} SegmentRow;

/*
 * The segments of a source with batches before a time, that the MVCC
 * snapshot sees, oldest first, as SegmentRows in the caller's memory
 * context (not unpacked).  Segments cover disjoint ranges of timestamps,
 * so these are those whose ts_from is before it.
 */
static List *
segments_before(Oid relid, int64 before, Snapshot snapshot)
{
	List	   *segs = NIL;
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;

	if (!OidIsValid(oids.segments))
		return NIL;
	rel = table_open(oids.segments, AccessShareLock);
	index = index_open(oids.segments_ts, AccessShareLock);
	ScanKeyInit(&key, Anum_s_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan_ordered(rel, index, SnapshotAny, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		TupleDesc	desc = RelationGetDescr(rel);
		SegmentRow *seg;
		bool		isnull;
		ArrayType  *origins;

		CHECK_FOR_INTERRUPTS();
		if (!tuple_visible(scan, tuple, snapshot))
			continue;
		if (DatumGetInt64(heap_getattr(tuple, Anum_s_ts_from, desc, &isnull)) >= before)
			break;
		seg = palloc0(sizeof(SegmentRow));
		seg->tuple = heap_copytuple(tuple);
		seg->ts_from = DatumGetInt64(heap_getattr(tuple, Anum_s_ts_from, desc, &isnull));
		seg->ts_to = DatumGetInt64(heap_getattr(tuple, Anum_s_ts_to, desc, &isnull));
		seg->batch_from = DatumGetInt64(heap_getattr(tuple, Anum_s_batch_from, desc, &isnull));
		seg->batch_to = DatumGetInt64(heap_getattr(tuple, Anum_s_batch_to, desc, &isnull));
		seg->nbatches = DatumGetInt32(heap_getattr(tuple, Anum_s_nbatches, desc, &isnull));
		origins = DatumGetArrayTypeP(heap_getattr(tuple, Anum_s_origins, desc, &isnull));
		seg->nkinds = ArrayGetNItems(ARR_NDIM(origins), ARR_DIMS(origins));
		sw_segment_check(seg->nbatches, seg->batch_from, seg->batch_to,
						 seg->ts_from, seg->ts_to);
		segs = lappend(segs, seg);
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return segs;
}

/* unpack the batches of a SegmentRow */
static void
unpack_segment_row(SegmentRow *seg)
{
	bool		isnull;
	Relation	rel;
	bytea	   *packed;

	if (seg->ids != NULL)
		return;
	rel = table_open(oids.segments, AccessShareLock);
	packed = DatumGetByteaPP(heap_getattr(seg->tuple, Anum_s_batches,
										  RelationGetDescr(rel), &isnull));
	table_close(rel, AccessShareLock);
	if (seg->nbatches <= 0)
		elog(ERROR, "a segment of source_writes.batch_segments has no batches");
	seg->ids = palloc(sizeof(int64) * seg->nbatches);
	seg->ts = palloc(sizeof(int64) * seg->nbatches);
	seg->kinds = palloc(sizeof(uint16) * seg->nbatches);
	seg->xids = palloc(sizeof(uint64) * seg->nbatches);
	sw_segment_unpack(packed, seg->nbatches, seg->batch_from, seg->batch_to,
					  seg->ts_from, seg->ts_to, seg->nkinds,
					  seg->ids, seg->ts, seg->kinds, seg->xids);
}

/* delete a catalog row that compaction read with its snapshot */
static void
delete_compacted(Relation rel, ItemPointer tid, Snapshot snapshot, Oid relid)
{
	TM_FailureData tmfd;

	/* an earlier compaction in this same command may have deleted it */
	switch (table_tuple_delete(rel, tid, GetCurrentCommandId(true), snapshot,
							   InvalidSnapshot, true, &tmfd, false))
	{
		case TM_Ok:
		case TM_SelfModified:
			break;
		default:
			elog(ERROR, "could not fold a batch of source table %u", relid);
	}
}

/*
 * Fold the batches of a source's segments before since, as
 * sw_catalog_fold_batches() folds its batch rows: only the newest batches
 * before since are kept, if no batch row before since was (row_kept).
 * Segments are older than every batch row, so when a row was kept, every
 * segment before since goes; if not, the newest segment that reaches
 * before since keeps its newest batches before since (it is written again
 * without the others) and the older ones go.  Returns how many batches it
 * deleted.
 */
static int64
fold_segments(Oid relid, int64 since, Snapshot snapshot, bool row_kept)
{
	List	   *segs = segments_before(relid, since, snapshot);
	Relation	rel;
	int64		n = 0;
	ListCell   *lc;

	if (segs == NIL)
		return 0;
	rel = table_open(oids.segments, RowExclusiveLock);
	foreach(lc, segs)
	{
		SegmentRow *seg = lfirst(lc);
		bool		last = lnext(segs, lc) == NULL;
		int64		keep_ts = PG_INT64_MIN;
		int			kept = 0;
		int64	   *ids;
		int64	   *ts;
		uint16	   *kinds;
		uint64	   *xids;
		Datum		values[Natts_s];
		bool		nulls[Natts_s];
		HeapTuple	tuple;

		CHECK_FOR_INTERRUPTS();
		if ((!last || row_kept) && seg->ts_to < since)
		{
			delete_compacted(rel, &seg->tuple->t_self, snapshot, relid);
			n += seg->nbatches;
			continue;
		}

		/* the newest segment before since: keep its batches from since on */
		unpack_segment_row(seg);
		ids = palloc(sizeof(int64) * seg->nbatches);
		ts = palloc(sizeof(int64) * seg->nbatches);
		kinds = palloc(sizeof(uint16) * seg->nbatches);
		xids = palloc(sizeof(uint64) * seg->nbatches);
		if (!row_kept)
			for (int i = 0; i < seg->nbatches; i++)
				if (seg->ts[i] < since && seg->ts[i] > keep_ts)
					keep_ts = seg->ts[i];
		for (int i = 0; i < seg->nbatches; i++)
			if (seg->ts[i] >= since || seg->ts[i] == keep_ts)
			{
				ids[kept] = seg->ids[i];
				ts[kept] = seg->ts[i];
				kinds[kept] = seg->kinds[i];
				xids[kept] = seg->xids[i];
				kept++;
			}
		if (kept == seg->nbatches)
			continue;
		delete_compacted(rel, &seg->tuple->t_self, snapshot, relid);
		n += seg->nbatches - kept;
		if (kept == 0)
			continue;

		heap_deform_tuple(seg->tuple, RelationGetDescr(rel), values, nulls);
		values[Anum_s_ts_to - 1] = Int64GetDatum(seg->ts_to);
		values[Anum_s_batch_from - 1] = Int64GetDatum(ids[0]);
		values[Anum_s_batch_to - 1] = Int64GetDatum(ids[kept - 1]);
		values[Anum_s_nbatches - 1] = Int32GetDatum(kept);
		{
			int64		ts_from = ts[0];

			for (int i = 1; i < kept; i++)
				ts_from = Min(ts_from, ts[i]);
			values[Anum_s_ts_from - 1] = Int64GetDatum(ts_from);
			values[Anum_s_batches - 1] = PointerGetDatum(
				sw_segment_pack(kept, ids, ts, kinds, xids, ids[0], ts_from));
		}
		/* the blocks stay those of all of them: more, never fewer */
		if (row_is_own(seg->tuple, values[Anum_s_xid - 1]))
			values[Anum_s_xid - 1] = FullTransactionIdGetDatum(GetTopFullTransactionId());
		tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
		CatalogTupleInsert(rel, tuple);
		heap_freetuple(tuple);
	}
	table_close(rel, RowExclusiveLock);
	return n;
}

/* a batch row that a rollup takes */
typedef struct RollItem
{
	ItemPointerData tid;
	int64		id;
	int64		ts;
	uint16		kind;
	uint64		xid;			/* its transaction, as the row has it */
	SwBlockRanges blocks[2];
} RollItem;

static int
compare_items(const void *a, const void *b)
{
	const RollItem *x = a;
	const RollItem *y = b;

	return x->id < y->id ? -1 : (x->id > y->id ? 1 : 0);
}

/*
 * Is a batch row settled: inserted by a transaction that committed before
 * every snapshot anyone holds or will take (its xmin precedes the horizon),
 * and not deleted?  Then every snapshot sees it, as it would see its batch
 * in a segment.  *dead tells a row that no snapshot taken from now on
 * sees (aborted, or deleted by a committed fold or rollup, or by ours).
 */
static bool
batch_settled(SysScanDesc scan, HeapTuple tuple, TransactionId horizon, bool *dead)
{
	Buffer		buffer = ((BufferHeapTupleTableSlot *) scan->slot)->buffer;
	HTSV_Result result;

	LockBuffer(buffer, BUFFER_LOCK_SHARE);
	result = HeapTupleSatisfiesVacuum(tuple, horizon, buffer);
	LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
	/* rolled up or folded already, earlier in this transaction */
	*dead = result == HEAPTUPLE_DEAD || result == HEAPTUPLE_RECENTLY_DEAD ||
		(result == HEAPTUPLE_DELETE_IN_PROGRESS &&
		 TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(tuple->t_data)));
	return result == HEAPTUPLE_LIVE &&
		TransactionIdPrecedes(HeapTupleHeaderGetXmin(tuple->t_data), horizon);
}

/*
 * Turn a batch row's blocks of a heap into ranges, n -1 when not known.
 */
static void
row_ranges(Datum *values, bool *nulls, SwHeap heap, bool own, SwBlockRanges *ranges)
{
	SwWrittenBlocks written;

	sw_written_blocks_init(&written);
	add_row_blocks(&written, heap, values, nulls, own);
	ranges->n = -1;
	if (written.known && written.npairs <= SW_MAX_BLOCK_RANGES)
	{
		ranges->file = written.file;
		ranges->n = written.npairs;
		for (int i = 0; i < written.npairs; i++)
		{
			ranges->from[i] = written.pairs[2 * i];
			ranges->to[i] = written.pairs[2 * i + 1];
		}
	}
	pfree(written.pairs);
}

static int
compare_pairs(const void *a, const void *b)
{
	BlockNumber x = *(const BlockNumber *) a;
	BlockNumber y = *(const BlockNumber *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

static int
compare_gaps(const void *a, const void *b)
{
	BlockNumber x = *(const BlockNumber *) a;
	BlockNumber y = *(const BlockNumber *) b;

	return x < y ? -1 : (x > y ? 1 : 0);
}

/*
 * Sort [from, to) pairs of blocks and merge them where they overlap or
 * touch, and where there are more than max, across the smallest gaps, so
 * that they name more blocks, never fewer; returns how many are left.
 */
static int
merge_ranges(BlockNumber *p, int npairs, int max)
{
	int			m = 0;
	BlockNumber threshold = 0;

	qsort(p, npairs, 2 * sizeof(BlockNumber), compare_pairs);
	for (int i = 0; i < npairs; i++)
	{
		if (m > 0 && p[2 * i] <= p[2 * m - 1])
			p[2 * m - 1] = Max(p[2 * m - 1], p[2 * i + 1]);
		else
		{
			p[2 * m] = p[2 * i];
			p[2 * m + 1] = p[2 * i + 1];
			m++;
		}
	}
	if (m > max)
	{
		BlockNumber *gaps = palloc(sizeof(BlockNumber) * (m - 1));
		int			k = 0;

		for (int i = 1; i < m; i++)
			gaps[i - 1] = p[2 * i] - p[2 * i - 1];
		qsort(gaps, m - 1, sizeof(BlockNumber), compare_gaps);
		threshold = gaps[m - max - 1];
		for (int i = 0; i < m; i++)
		{
			if (k > 0 && p[2 * i] - p[2 * k - 1] <= threshold)
				p[2 * k - 1] = p[2 * i + 1];
			else
			{
				p[2 * k] = p[2 * i];
				p[2 * k + 1] = p[2 * i + 1];
				k++;
			}
		}
		m = k;
		pfree(gaps);
	}
	return m;
}

/*
 * Put where a rollup's batches wrote rows of a heap into a segment row:
 * their ranges merged into at most SW_SEGMENT_RANGES; both columns null if
 * it is not known.  Of the current heap, also where each chunk of
 * SW_SEGMENT_CHUNK batches in timestamp order (items are in that order)
 * wrote, in at most SW_CHUNK_RANGES ranges, after the newest timestamp of
 * the chunk (see Anum_s_current_chunks), so that a reader of a few batches
 * reads the blocks of their chunks, not of the whole segment.
 */
static void
set_segment_blocks(Datum *values, bool *nulls, SwHeap heap,
				   const RollItem *items, int n)
{
	SwWrittenBlocks written;
	BlockNumber *p;
	int			m;
	Datum	   *r;

	sw_written_blocks_init(&written);
	for (int i = 0; i < n; i++)
		sw_written_blocks_add(&written, &items[i].blocks[heap]);
	if (heap == SW_CURRENT_HEAP)
		nulls[Anum_s_current_chunks - 1] = true;
	if (!written.known)
	{
		nulls[Anum_s_file[heap] - 1] = nulls[Anum_s_blocks[heap] - 1] = true;
		return;
	}
	p = written.pairs;
	m = merge_ranges(p, written.npairs, SW_SEGMENT_RANGES);
	r = palloc(sizeof(Datum) * Max(2 * m, 1));
	for (int i = 0; i < 2 * m; i++)
		r[i] = Int64GetDatum(p[i]);
	nulls[Anum_s_file[heap] - 1] = m == 0;
	values[Anum_s_file[heap] - 1] = ObjectIdGetDatum(written.file);
	values[Anum_s_blocks[heap] - 1] = PointerGetDatum(
		construct_array(r, 2 * m, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
						TYPALIGN_DOUBLE));

	if (heap == SW_CURRENT_HEAP)
	{
		int			nchunks = (n + SW_SEGMENT_CHUNK - 1) / SW_SEGMENT_CHUNK;
		Datum	   *c = palloc0(sizeof(Datum) * nchunks * SW_CHUNK_WIDTH);

		for (int k = 0; k < nchunks; k++)
		{
			int			end = Min(n, (k + 1) * SW_SEGMENT_CHUNK);
			Datum	   *chunk = &c[k * SW_CHUNK_WIDTH];

			written.npairs = 0;
			for (int i = k * SW_SEGMENT_CHUNK; i < end; i++)
				sw_written_blocks_add(&written, &items[i].blocks[heap]);
			m = merge_ranges(written.pairs, written.npairs, SW_CHUNK_RANGES);
			chunk[0] = Int64GetDatum(items[end - 1].ts);
			chunk[1] = Int64GetDatum(m);
			for (int i = 0; i < SW_CHUNK_WIDTH - 2; i++)
				chunk[2 + i] = Int64GetDatum(i < 2 * m ? written.pairs[i] : 0);
		}
		nulls[Anum_s_current_chunks - 1] = false;
		values[Anum_s_current_chunks - 1] = PointerGetDatum(
			construct_array(c, nchunks * SW_CHUNK_WIDTH, INT8OID, sizeof(int64),
							FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
	}
}

/*
 * The newest timestamp in the segments of a source, as its compaction
 * (holding the lock) sees them: committed, or made or deleted by itself;
 * PG_INT64_MIN if there are none.
 */
static int64
newest_segment_ts(Oid relid)
{
	Relation	rel = table_open(oids.segments, AccessShareLock);
	Relation	index = index_open(oids.segments_ts, AccessShareLock);
	SysScanDesc scan;
	ScanKeyData key;
	HeapTuple	tuple;
	int64		newest = PG_INT64_MIN;

	ScanKeyInit(&key, Anum_s_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan_ordered(rel, index, SnapshotSelf, 1, &key);
	tuple = systable_getnext_ordered(scan, BackwardScanDirection);
	if (HeapTupleIsValid(tuple))
	{
		bool		isnull;

		newest = DatumGetInt64(heap_getattr(tuple, Anum_s_ts_to,
											RelationGetDescr(rel), &isnull));
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	return newest;
}

/*
 * Roll the oldest segment_batches batch rows of a source up into one
 * segment, if that many are settled (see batch_settled()), delay_ms older
 * than its newest batch, and older than a settled batch row that stays: the newest batches stay rows, so that
 * every snapshot, old or new, finds its upper in the rows (snapshot_upper()
 * reads the newest batch a snapshot sees, and what it names as pending)
 * and the controller its stamp state.  Batches of one timestamp go
 * together.  The caller holds the source's compaction lock.  Returns how
 * many batches were rolled up: 0 when there were too few.
 */
int
sw_catalog_roll_up(Oid relid, int segment_batches, int64 delay_ms)
{
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData keys[3];
	HeapTuple	tuple;
	TransactionId horizon;
	int64		cutoff = PG_INT64_MIN;
	int64		newest = PG_INT64_MIN;
	int64		stop_ts = PG_INT64_MAX;
	RollItem   *items;
	RollItem   *byid;
	int			n = 0;
	int			nkinds = 0;
	SwOrigin   *kind_origins;
	NameData   *kind_roles;
	int64	   *ids;
	int64	   *ts;
	uint16	   *kinds;
	uint64	   *xids;
	int64		ts_from;
	int64		ts_to;
	Datum		values[Natts_s];
	bool		nulls[Natts_s] = {0};
	Datum	   *d;

	require_catalog();
	if (!OidIsValid(oids.segments) || segment_batches < 1)
		return 0;
	rel = table_open(oids.batches, RowExclusiveLock);
	index = index_open(oids.batches_ts, AccessShareLock);
	horizon = GetOldestNonRemovableTransactionId(rel);

	/*
	 * The newest settled batch row: it and those after it stay, and so do
	 * those less than delay_ms older than the newest batch.
	 */
	scan = begin_batches_backward(rel, index, relid, PG_INT64_MAX, SnapshotAny, keys);
	while (HeapTupleIsValid(tuple = systable_getnext_ordered(scan, BackwardScanDirection)))
	{
		bool		dead;
		bool		settled = batch_settled(scan, tuple, horizon, &dead);
		bool		isnull;
		int64		ts = DatumGetInt64(heap_getattr(tuple, Anum_b_ts,
													RelationGetDescr(rel), &isnull));

		CHECK_FOR_INTERRUPTS();
		if (dead)
			continue;
		if (newest == PG_INT64_MIN)
			newest = ts;
		if (settled)
		{
			cutoff = Min(ts, newest - delay_ms);
			break;
		}
	}
	systable_endscan_ordered(scan);

	/*
	 * The oldest before it, while they are settled, after the newest
	 * segment: the rows it and those before it took may not have been
	 * vacuumed away yet.
	 */
	items = palloc(sizeof(RollItem) * (segment_batches + 1));
	kind_origins = palloc(sizeof(SwOrigin) * (segment_batches + 1));
	kind_roles = palloc(sizeof(NameData) * (segment_batches + 1));
	ScanKeyInit(&keys[0], Anum_b_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	ScanKeyInit(&keys[1], Anum_b_ts, BTLessStrategyNumber, F_INT8LT,
				Int64GetDatum(cutoff));
	ScanKeyInit(&keys[2], Anum_b_ts, BTGreaterStrategyNumber, F_INT8GT,
				Int64GetDatum(newest_segment_ts(relid)));
	scan = systable_beginscan_ordered(rel, index, SnapshotAny, 3, keys);
	while (cutoff != PG_INT64_MIN &&
		   HeapTupleIsValid(tuple = systable_getnext_ordered(scan, ForwardScanDirection)))
	{
		Datum		bvalues[Natts_b];
		bool		bnulls[Natts_b];
		bool		dead;
		bool		own;
		RollItem   *item;
		SwOrigin	origin;
		Name		role;
		int			k;

		CHECK_FOR_INTERRUPTS();
		if (!batch_settled(scan, tuple, horizon, &dead))
		{
			bool		isnull;

			if (dead)
				continue;
			stop_ts = DatumGetInt64(heap_getattr(tuple, Anum_b_ts,
												 RelationGetDescr(rel), &isnull));
			break;
		}
		heap_deform_tuple(tuple, RelationGetDescr(rel), bvalues, bnulls);
		if (n == segment_batches)
		{
			stop_ts = DatumGetInt64(bvalues[Anum_b_ts - 1]);
			break;
		}
		item = &items[n++];
		item->tid = tuple->t_self;
		item->id = DatumGetInt64(bvalues[Anum_b_batch - 1]);
		item->ts = DatumGetInt64(bvalues[Anum_b_ts - 1]);
		item->xid = U64FromFullTransactionId(DatumGetFullTransactionId(bvalues[Anum_b_xid - 1]));
		own = row_is_own(tuple, bvalues[Anum_b_xid - 1]);
		row_ranges(bvalues, bnulls, SW_CURRENT_HEAP, own, &item->blocks[SW_CURRENT_HEAP]);
		row_ranges(bvalues, bnulls, SW_HISTORY_HEAP, own, &item->blocks[SW_HISTORY_HEAP]);
		origin = parse_origin(TextDatumGetCString(bvalues[Anum_b_origin - 1]));
		role = DatumGetName(bvalues[Anum_b_role - 1]);
		for (k = nkinds - 1; k >= 0; k--)
			if (kind_origins[k] == origin &&
				strcmp(NameStr(kind_roles[k]), NameStr(*role)) == 0)
				break;
		if (k < 0)
		{
			k = nkinds++;
			kind_origins[k] = origin;
			namestrcpy(&kind_roles[k], NameStr(*role));
		}
		item->kind = (uint16) k;
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);

	/* a segment is full or not made; it ends before the first batch left */
	if (n < segment_batches)
		n = 0;
	while (n > 0 && items[n - 1].ts >= stop_ts)
		n--;
	if (n == 0)
	{
		table_close(rel, RowExclusiveLock);
		return 0;
	}
	ts_from = items[0].ts;
	ts_to = items[n - 1].ts;

	/*
	 * By id, for lookups: a copy, for items stay in timestamp order for
	 * the chunks of set_segment_blocks() (ids do not follow timestamps: a
	 * transaction takes its batch id when it first writes, its timestamp
	 * when it commits).
	 */
	byid = palloc(sizeof(RollItem) * n);
	memcpy(byid, items, sizeof(RollItem) * n);
	qsort(byid, n, sizeof(RollItem), compare_items);
	ids = palloc(sizeof(int64) * n);
	ts = palloc(sizeof(int64) * n);
	kinds = palloc(sizeof(uint16) * n);
	xids = palloc(sizeof(uint64) * n);
	for (int i = 0; i < n; i++)
	{
		if (i > 0 && byid[i].id == byid[i - 1].id)
			elog(ERROR, "source table %u has two batches " INT64_FORMAT,
				 relid, byid[i].id);
		ids[i] = byid[i].id;
		ts[i] = byid[i].ts;
		kinds[i] = byid[i].kind;
		xids[i] = byid[i].xid;
	}

	values[Anum_s_source - 1] = ObjectIdGetDatum(relid);
	values[Anum_s_ts_from - 1] = Int64GetDatum(ts_from);
	values[Anum_s_ts_to - 1] = Int64GetDatum(ts_to);
	values[Anum_s_batch_from - 1] = Int64GetDatum(ids[0]);
	values[Anum_s_batch_to - 1] = Int64GetDatum(ids[n - 1]);
	values[Anum_s_nbatches - 1] = Int32GetDatum(n);
	d = palloc(sizeof(Datum) * nkinds);
	for (int k = 0; k < nkinds; k++)
		d[k] = CStringGetTextDatum(origin_names[kind_origins[k]]);
	values[Anum_s_origins - 1] = PointerGetDatum(
		construct_array(d, nkinds, TEXTOID, -1, false, TYPALIGN_INT));
	for (int k = 0; k < nkinds; k++)
		d[k] = NameGetDatum(&kind_roles[k]);
	values[Anum_s_roles - 1] = PointerGetDatum(
		construct_array(d, nkinds, NAMEOID, NAMEDATALEN, false, TYPALIGN_CHAR));
	values[Anum_s_batches - 1] = PointerGetDatum(
		sw_segment_pack(n, ids, ts, kinds, xids, ids[0], ts_from));
	values[Anum_s_xid - 1] = FullTransactionIdGetDatum(GetTopFullTransactionId());
	set_segment_blocks(values, nulls, SW_CURRENT_HEAP, items, n);
	set_segment_blocks(values, nulls, SW_HISTORY_HEAP, items, n);
	insert_row(oids.segments, values, nulls);

	for (int i = 0; i < n; i++)
		CatalogTupleDelete(rel, &items[i].tid);
	table_close(rel, RowExclusiveLock);
	return n;
}

/*
 * How many batches of a source before a time the snapshot sees, counting
 * no further than limit.
 */
int
sw_catalog_count_batches_before(Oid relid, int64 before, Snapshot snapshot,
								int limit)
{
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData keys[2];
	int			n = 0;

	require_catalog();
	rel = table_open(oids.batches, AccessShareLock);
	index = index_open(oids.batches_ts, AccessShareLock);
	scan = begin_batches_backward(rel, index, relid, before, SnapshotAny, keys);
	while (n < limit && HeapTupleIsValid(next_visible_backward(scan, snapshot)))
		n++;
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, AccessShareLock);
	if (n < limit)
	{
		List	   *segs = segments_before(relid, before, snapshot);
		ListCell   *lc;

		foreach(lc, segs)
		{
			SegmentRow *seg = lfirst(lc);

			if (n >= limit)
				break;
			if (seg->ts_to < before)
			{
				n += seg->nbatches;
				continue;
			}
			unpack_segment_row(seg);
			for (int i = 0; i < seg->nbatches; i++)
				if (seg->ts[i] < before)
					n++;
		}
		n = Min(n, limit);
	}
	return n;
}

/*
 * Fold the batches of a source before since into the newest of them (the
 * newest timestamp's: a transaction that wrote as two roles has two): the
 * others are deleted, so that the batches kept are those of the retained
 * history, and those of one more timestamp, whether they are batch rows or
 * in segments.  Rows that a deleted batch added are taken for
 * added before since by every reader of the log (see log.c); those it
 * retracted, compaction has deleted.  The caller holds the source's
 * compaction lock and passes the snapshot it compacted with.  Returns how
 * many batches it deleted.
 */
int64
sw_catalog_fold_batches(Oid relid, int64 since, Snapshot snapshot)
{
	Relation	rel;
	Relation	index;
	SysScanDesc scan;
	ScanKeyData keys[2];
	HeapTuple	tuple;
	int64		n = 0;
	bool		newest = true;
	int64		kept = 0;

	require_catalog();
	rel = table_open(oids.batches, RowExclusiveLock);
	index = index_open(oids.batches_ts, AccessShareLock);
	scan = begin_batches_backward(rel, index, relid, since, SnapshotAny, keys);
	while (HeapTupleIsValid(tuple = next_visible_backward(scan, snapshot)))
	{
		TM_FailureData tmfd;
		bool		isnull;
		int64		ts = DatumGetInt64(heap_getattr(tuple, Anum_b_ts,
													RelationGetDescr(rel), &isnull));

		CHECK_FOR_INTERRUPTS();
		if (newest || ts == kept)
		{
			newest = false;
			kept = ts;
			continue;
		}
		/* an earlier compaction in this same command may have folded it */
		switch (table_tuple_delete(rel, &tuple->t_self, GetCurrentCommandId(true),
								   snapshot, InvalidSnapshot, true, &tmfd, false))
		{
			case TM_Ok:
				n++;
				break;
			case TM_SelfModified:
				break;
			default:
				elog(ERROR, "could not fold a batch of source table %u", relid);
		}
	}
	systable_endscan_ordered(scan);
	index_close(index, AccessShareLock);
	table_close(rel, RowExclusiveLock);
	return n + fold_segments(relid, since, snapshot, !newest);
}

const char *
sw_origin_name(SwOrigin origin)
{
	return origin_names[origin];
}
