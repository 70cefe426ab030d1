/*-------------------------------------------------------------------------
 *
 * ingest.c
 *		  Writing messages into a source: decoded, checked, kept as errors
 *		  when they cannot be, and consumed exactly once
 *
 * See doc/internals.md, "Writing and the stamping protocol" (Ingestion).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/ingest.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "storage/lmgr.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "ingest/ingest.h"
#include "log/log.h"

/* messages decoded in one subtransaction, then written */
#define SW_INGEST_CHUNK		1000

/*
 * A batch is full with this many messages; one that merges by key, when
 * the messages it keeps take this much memory.
 */
#define SW_INGEST_BATCH_MESSAGES	50000
#define SW_INGEST_MERGE_BYTES	(48 * 1024 * 1024)

/*
 * A message whose decoding or writing fails with an error that is not its
 * fault (a lock timeout, say) fails the batch; if it fails this many times
 * in a row, it is kept as an error all the same.
 */
#define SW_INGEST_MAX_FAILURES	3

/* columns of source_writes.errors */
#define Anum_e_source		1
#define Anum_e_ts			2
#define Anum_e_partition	3
#define Anum_e_offset		4
#define Anum_e_key			5
#define Anum_e_value		6
#define Anum_e_error		7
#define Anum_e_timestamp	8
#define Anum_e_header_names 9
#define Anum_e_header_values 10
#define Natts_e				10

/*
 * An upsert batch's last message of a key, copied, to be decoded again and
 * written when the batch ends.  Keeping the message rather than its row
 * takes less memory, and keeps what to store if the row cannot be written.
 */
typedef struct SwLastMessage
{
	uint32		hash;			/* its key's hash, and its key (in the hash */
	MinimalTuple key;			/* table): the order keys are written in */
	SwMessage	msg;			/* its bytes follow, in the same allocation */
} SwLastMessage;

struct SwIngest
{
	Oid			relid;
	SwOrigin	origin;
	SwSourceTable *st;			/* the table's options, when created */
	SwDecoder  *decoder;
	TupleDesc	desc;			/* the table's rows */
	TupleTableSlot *slots[SW_INGEST_CHUNK]; /* a chunk's rows, made as needed */
	int			nslots;
	MemoryContext cxt;			/* the ingestion's own: what it was made in */
	MemoryContext chunk_cxt;	/* what decoding a chunk allocates */
	MemoryContext raw_cxt;		/* retain_raw: the raw message of the row
								 * being written */
	BulkInsertState bistate;	/* for appends, across batches */
	MemoryContext bistate_cxt;	/* ... and all it holds */

	/* upsert sources whose key types can be hashed: merging by key */
	int			nkey;			/* 0: rows are written as they come */
	bool		merging;		/* ... and this batch merges them: no row
								 * trigger needs every message */
	AttrNumber *key_cols;		/* the key's columns, in the table's rows */
	TupleTableSlot *key_slot;	/* a row's key alone */
	Oid		   *key_eqfuncs;
	FmgrInfo   *key_hashfuncs;
	FmgrInfo   *key_cmpfuncs;	/* btree comparisons */
	Oid		   *key_collations;
	TupleTableSlot *key_a;		/* two keys to compare */
	TupleTableSlot *key_b;
	MemoryContext merge_cxt;	/* the batch's hash table and pending messages */

	/* the current batch */
	Relation	ftrel;
	SwWriter   *writer;
	Oid			log_role;		/* the role the log names, if not the owner */
	int			nmessages;		/* buffered, not decoded yet */
	const SwMessage *messages[SW_INGEST_CHUNK];
	int64		added;			/* messages */
	int64		written;
	int64		kept;
	TupleHashTable keys;		/* upsert: key -> index into pending */
	SwLastMessage **pending;		/* the keys' last messages, in the order the
								 * keys first came */
	int			npending;
	int			maxpending;

	/* the last message that failed a batch with an error not its own */
	uint64		batch;			/* batches begun */
	int32		failing_partition;
	int64		failing_offset;
	uint64		failing_batch;	/* the last batch it failed */
	int			failures;		/* how many batches in a row */

	/* what errors of the hidden relations are said of, for the batch */
	MemoryContext names_cxt;
	SwHiddenNames names;
};

static void prepare_merge(SwIngest *ing);

/*
 * A new bulk-insert state for the ingestion's appends, in its own memory
 * context, in place of the one there was (whose buffer pin, if it held
 * one, an abort has released).
 */
static void
new_bulk_state(SwIngest *ing)
{
	MemoryContext old;

	MemoryContextReset(ing->bistate_cxt);
	old = MemoryContextSwitchTo(ing->bistate_cxt);
	ing->bistate = GetBulkInsertState();
	MemoryContextSwitchTo(old);
}

/*
 * Prepare to ingest messages into a source table, for any number of
 * batches, in the current memory context: its options, decoder and slots,
 * as they are now (a worker whose table changes starts again).
 */
SwIngest *
sw_ingest_create(Relation ftrel, SwOrigin origin)
{
	SwIngest   *ing = palloc0(sizeof(SwIngest));

	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;

	ing->relid = RelationGetRelid(ftrel);
	ing->origin = origin;
	ing->st = sw_source_table(ftrel);

	/*
	 * Preparing the decoder can run the owner's code (a default's immutable
	 * functions are folded): as the owner, restricted, as when decoding.
	 */
	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(ftrel->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();
	sw_writer_safe_search_path();
	ing->decoder = sw_decoder_create(ftrel, ing->st);
	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);

	ing->desc = CreateTupleDescCopy(RelationGetDescr(ftrel));
	ing->cxt = CurrentMemoryContext;
	ing->slots[0] = MakeSingleTupleTableSlot(ing->desc, &TTSOpsVirtual);
	ing->nslots = 1;
	ing->bistate_cxt = AllocSetContextCreate(CurrentMemoryContext,
											 "source_writes bulk insert",
											 ALLOCSET_SMALL_SIZES);
	new_bulk_state(ing);
	ing->chunk_cxt = AllocSetContextCreate(CurrentMemoryContext,
										   "source_writes ingestion chunk",
										   ALLOCSET_DEFAULT_SIZES);
	if (ing->st->retain_raw)
		ing->raw_cxt = AllocSetContextCreate(CurrentMemoryContext,
											 "source_writes raw message",
											 ALLOCSET_DEFAULT_SIZES);
	if (ing->st->upsert)
		prepare_merge(ing);
	return ing;
}

/*
 * Make the chunk's slots up to the i-th, if they are not yet: a chunk of
 * a message (a webhook request, say) needs one, not SW_INGEST_CHUNK.
 */
static inline void
need_slot(SwIngest *ing, int i)
{
	if (i >= ing->nslots)
	{
		MemoryContext old = MemoryContextSwitchTo(ing->cxt);

		while (ing->nslots <= i)
			ing->slots[ing->nslots++] = MakeSingleTupleTableSlot(ing->desc, &TTSOpsVirtual);
		MemoryContextSwitchTo(old);
	}
}

/*
 * Upsert sources: prepare to merge a batch's rows by key, with the hash
 * functions that go with the equality of the key's index (its columns'
 * default btree operator classes).  A key with a type that has none is not
 * merged: its rows are written as they come.
 */
static void
prepare_merge(SwIngest *ing)
{
	int			nkey = list_length(ing->st->key);
	AttrNumber *cols = palloc(sizeof(AttrNumber) * nkey);
	Oid		   *eqops = palloc(sizeof(Oid) * nkey);
	Oid		   *collations = palloc(sizeof(Oid) * nkey);
	FmgrInfo   *cmpfuncs = palloc(sizeof(FmgrInfo) * nkey);
	TupleDesc	key_desc = CreateTemplateTupleDesc(nkey);
	ListCell   *lc;
	int			k = 0;

	foreach(lc, ing->st->key)
	{
		const char *name = lfirst(lc);
		Form_pg_attribute att = NULL;
		TypeCacheEntry *type;
		Oid			lhs;
		Oid			rhs;

		for (int i = 0; i < ing->desc->natts; i++)
		{
			Form_pg_attribute a = TupleDescAttr(ing->desc, i);

			if (!a->attisdropped && strcmp(NameStr(a->attname), name) == 0)
				att = a;
		}
		if (att == NULL)
			elog(ERROR, "key column \"%s\" of source table \"%s\" does not exist",
				 name, get_rel_name(ing->relid));

		/*
		 * The typcache knows whether an array, a record or a range can be
		 * hashed (their elements can); the operator's hash functions say
		 * which ones go with its equality.
		 */
		type = lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR | TYPECACHE_HASH_PROC |
								 TYPECACHE_CMP_PROC_FINFO);
		if (!OidIsValid(type->eq_opr) || !OidIsValid(type->hash_proc) ||
			!OidIsValid(type->cmp_proc) ||
			!get_op_hash_functions(type->eq_opr, &lhs, &rhs) || lhs != rhs)
		{
			elog(DEBUG1, "source table \"%s\" does not merge its batches by key: the type of key column \"%s\" cannot be hashed",
				 get_rel_name(ing->relid), name);
			pfree(cols);
			pfree(eqops);
			pfree(collations);
			pfree(cmpfuncs);
			FreeTupleDesc(key_desc);
			return;
		}
		cols[k] = att->attnum;
		eqops[k] = type->eq_opr;
		fmgr_info_copy(&cmpfuncs[k], &type->cmp_proc_finfo, CurrentMemoryContext);
		collations[k] = att->attcollation;
		TupleDescInitEntry(key_desc, k + 1, NameStr(att->attname),
						   att->atttypid, att->atttypmod, 0);
		TupleDescInitEntryCollation(key_desc, k + 1, att->attcollation);
		k++;
	}

	execTuplesHashPrepare(nkey, eqops, &ing->key_eqfuncs, &ing->key_hashfuncs);
	ing->nkey = nkey;
	ing->key_cols = cols;
	ing->key_collations = collations;
	ing->key_cmpfuncs = cmpfuncs;
	ing->key_slot = MakeSingleTupleTableSlot(key_desc, &TTSOpsVirtual);
	ing->key_a = MakeSingleTupleTableSlot(key_desc, &TTSOpsMinimalTuple);
	ing->key_b = MakeSingleTupleTableSlot(key_desc, &TTSOpsMinimalTuple);
	ing->merge_cxt = AllocSetContextCreate(CurrentMemoryContext,
										   "source_writes upsert batch",
										   ALLOCSET_DEFAULT_SIZES);
}

/*
 * Start a batch in the current transaction: the caller has opened the
 * table (RowExclusiveLock) and has an active snapshot.
 */
void
sw_ingest_begin(SwIngest *ing, Relation ftrel)
{
	SwSource	source;
	MemoryContext old;

	Assert(RelationGetRelid(ftrel) == ing->relid);
	ing->ftrel = ftrel;
	if (ing->names_cxt == NULL)
		ing->names_cxt = AllocSetContextCreate(ing->cxt, "source_writes ingestion names",
											   ALLOCSET_SMALL_SIZES);
	MemoryContextReset(ing->names_cxt);
	old = MemoryContextSwitchTo(ing->names_cxt);
	sw_source_require(ing->relid, &source);
	sw_storage_hidden_names(ftrel, &source, &ing->names);
	MemoryContextSwitchTo(old);
	ing->writer = sw_writer_open(ftrel, ing->origin, ftrel->rd_rel->relowner, NULL);
	if (OidIsValid(ing->log_role))
		sw_writer_log_as(ing->writer, ing->log_role);
	sw_writer_use_bulk_state(ing->writer, ing->bistate);
	sw_writer_allow_subtransactions(ing->writer);
	ing->merging = ing->nkey > 0 && !sw_writer_fires_row_triggers(ing->writer);
	ing->nmessages = 0;
	ing->added = 0;
	ing->written = 0;
	ing->kept = 0;
	ing->batch++;
}

/* bytes as a bytea, in the current memory context */
static Datum
bytea_of(const char *bytes, size_t len)
{
	bytea	   *b = palloc(VARHDRSZ + len);

	SET_VARSIZE(b, VARHDRSZ + len);
	if (len > 0)
		memcpy(VARDATA(b), bytes, len);
	return PointerGetDatum(b);
}

/*
 * A message as it came, as source_writes.errors and the columns of retain_raw
 * keep it, by SwRawColumn: its key and value (NULL: none), its timestamp
 * (-1: none) and its headers, names and values (NULL: no headers; a null
 * value is NULL in the array).  In the current memory context.
 */
void
sw_raw_columns(const SwMessage *msg, Datum *values, bool *nulls)
{
	nulls[SW_RAW_KEY] = msg->key == NULL;
	values[SW_RAW_KEY] = msg->key ? bytea_of(msg->key, msg->key_len) : (Datum) 0;
	nulls[SW_RAW_VALUE] = msg->value == NULL;
	values[SW_RAW_VALUE] = msg->value ? bytea_of(msg->value, msg->value_len) : (Datum) 0;
	values[SW_RAW_TIMESTAMP] = Int64GetDatum(msg->timestamp_ms);
	nulls[SW_RAW_TIMESTAMP] = false;
	if (msg->nheaders == 0)
	{
		values[SW_RAW_HEADER_NAMES] = values[SW_RAW_HEADER_VALUES] = (Datum) 0;
		nulls[SW_RAW_HEADER_NAMES] = nulls[SW_RAW_HEADER_VALUES] = true;
	}
	else
	{
		Datum	   *names = palloc(sizeof(Datum) * msg->nheaders);
		Datum	   *hvalues = palloc(sizeof(Datum) * msg->nheaders);
		bool	   *hnulls = palloc(sizeof(bool) * msg->nheaders);
		int			dims[1] = {msg->nheaders};
		int			lbs[1] = {1};

		for (int i = 0; i < msg->nheaders; i++)
		{
			const SwHeader *h = &msg->headers[i];

			names[i] = CStringGetTextDatum(h->name);
			hnulls[i] = h->value == NULL;
			hvalues[i] = h->value ? bytea_of(h->value, h->len) : (Datum) 0;
		}
		values[SW_RAW_HEADER_NAMES] = PointerGetDatum(
			construct_array(names, msg->nheaders, TEXTOID, -1, false, TYPALIGN_INT));
		values[SW_RAW_HEADER_VALUES] = PointerGetDatum(
			construct_md_array(hvalues, hnulls, 1, dims, lbs, BYTEAOID, -1, false,
							   TYPALIGN_INT));
		nulls[SW_RAW_HEADER_NAMES] = nulls[SW_RAW_HEADER_VALUES] = false;
	}
}

/*
 * Keep a message of a source that could not be decoded (or a row a new
 * version could not take) in source_writes.errors, with the reason.
 * Written directly, as the catalog is: the owner we run as need not have
 * any privilege on it.
 */
void
sw_keep_error(Oid relid, const SwMessage *msg, const char *error)
{
	Oid			index;
	Relation	rel = table_open(sw_catalog_errors_oid(&index), RowExclusiveLock);
	Datum		values[Natts_e];
	bool		nulls[Natts_e] = {0};
	Datum		raw[SW_NUM_RAW];
	bool		raw_nulls[SW_NUM_RAW];
	HeapTuple	tuple;

	values[Anum_e_source - 1] = ObjectIdGetDatum(relid);
	values[Anum_e_ts - 1] = Int64GetDatum(sw_now_ms());
	values[Anum_e_partition - 1] = Int32GetDatum(msg->partition);
	values[Anum_e_offset - 1] = Int64GetDatum(msg->offset);
	nulls[Anum_e_partition - 1] = nulls[Anum_e_offset - 1] = msg->offset < 0;
	sw_raw_columns(msg, raw, raw_nulls);
	values[Anum_e_key - 1] = raw[SW_RAW_KEY];
	nulls[Anum_e_key - 1] = raw_nulls[SW_RAW_KEY];
	values[Anum_e_value - 1] = raw[SW_RAW_VALUE];
	nulls[Anum_e_value - 1] = raw_nulls[SW_RAW_VALUE];
	values[Anum_e_error - 1] = CStringGetTextDatum(error);
	values[Anum_e_timestamp - 1] = raw[SW_RAW_TIMESTAMP];
	nulls[Anum_e_timestamp - 1] = msg->timestamp_ms < 0;
	values[Anum_e_header_names - 1] = raw[SW_RAW_HEADER_NAMES];
	nulls[Anum_e_header_names - 1] = raw_nulls[SW_RAW_HEADER_NAMES];
	values[Anum_e_header_values - 1] = raw[SW_RAW_HEADER_VALUES];
	nulls[Anum_e_header_values - 1] = raw_nulls[SW_RAW_HEADER_VALUES];

	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
}

/* ... one of a batch being ingested */
static void
keep_error(SwIngest *ing, const SwMessage *msg, const char *error)
{
	sw_keep_error(ing->relid, msg, error);
	ing->kept++;
}

/* what a user needs to fix a message: the error, where (CONTEXT), detail */
char *
sw_error_text(ErrorData *edata)
{
	char	   *error = edata->context
		? psprintf("%s (%s)", edata->message, edata->context)
		: pstrdup(edata->message);

	if (edata->detail)
		error = psprintf("%s: %s", error, edata->detail);
	return error;
}

/*
 * May a message be kept as an error for this one, rather than the batch
 * fail and be tried again?  Not for errors that come and go with time or
 * other sessions, nor for cancellations.
 */
bool
sw_error_may_be_kept(ErrorData *edata)
{
	if (edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE)
		return false;			/* maybe the owner's, revoked from it */
	switch (ERRCODE_TO_CATEGORY(edata->sqlerrcode))
	{
		case ERRCODE_TRANSACTION_ROLLBACK:	/* serialization, deadlock */
		case ERRCODE_INSUFFICIENT_RESOURCES:	/* disk full, out of memory */
		case ERRCODE_OPERATOR_INTERVENTION: /* cancelled, shutting down */
		case ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE:	/* lock not available */
		case ERRCODE_SYSTEM_ERROR:
		case ERRCODE_INTERNAL_ERROR:
			return false;
		default:
			return true;
	}
}

/*
 * Is this message a tombstone of an upsert source, or (envelope
 * 'debezium') a delete event?  Either deletes its key's row.
 */
static inline bool
is_tombstone(SwIngest *ing, const SwMessage *msg)
{
	if (!ing->st->upsert)
		return false;
	if (msg->value == NULL)
		return true;
	if (!ing->st->debezium)
		return false;
	/* the op as sw_ingest_add() read it, else read now */
	if (msg->op)
		return msg->op == 'd';
	return sw_decoder_event_op(ing->decoder, msg) == 'd';
}

/*
 * In the PG_CATCH of a subtransaction the ingestion began in memory context
 * cxt and resource owner owner: roll the subtransaction back (and what the
 * writer did in it, if writing) and return the error, copied into cxt.
 */
static ErrorData *
roll_back_sub(SwIngest *ing, MemoryContext cxt, ResourceOwner owner, bool writing)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	sw_storage_rename_error(edata, &ing->names);
	if (writing)
		sw_writer_sub_end(ing->writer, false);
	sw_roll_back_sub(cxt, owner);
	if (!writing)
		sw_writer_reset_checks(ing->writer);
	return edata;
}

/* is the error a cancellation, or a shutdown? */
static inline bool
is_interruption(ErrorData *edata)
{
	return ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_OPERATOR_INTERVENTION;
}

/*
 * May a message be kept as an error for this one?  Yes if the error is the
 * message's (see sw_error_may_be_kept()); of an error that a trigger raised
 * (in_trigger), only one of classes 22 and 23 (data exceptions, integrity
 * constraints) plainly is: a trigger's code does more than look at the row
 * (it writes other tables, it calls out), and what else fails in it may
 * pass.  Errors of the server's state (resources, a lock not available,
 * I/O, serialization, cancellation) never are.  Others, such as an
 * internal error that an input function or a constraint's code raises for
 * one message, a privilege the owner lacks (revoked, or one that a value
 * needs: a regclass in a schema it may not use), or a trigger's RAISE,
 * are, once the message has failed that many batches in a row: it must
 * not stop its partition for ever.
 */
static bool
may_keep_message(SwIngest *ing, const SwMessage *msg, ErrorData *edata,
				 bool in_trigger)
{
	int			category = ERRCODE_TO_CATEGORY(edata->sqlerrcode);

	if (in_trigger ? (category == ERRCODE_DATA_EXCEPTION ||
					  category == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
		: sw_error_may_be_kept(edata))
		return true;
	switch (ERRCODE_TO_CATEGORY(edata->sqlerrcode))
	{
		case ERRCODE_TRANSACTION_ROLLBACK:
		case ERRCODE_INSUFFICIENT_RESOURCES:
		case ERRCODE_OPERATOR_INTERVENTION:
		case ERRCODE_SYSTEM_ERROR:
			return false;
	}
	if (edata->sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE || msg->offset < 0)
		return false;
	if (msg->partition != ing->failing_partition || msg->offset != ing->failing_offset)
	{
		ing->failing_partition = msg->partition;
		ing->failing_offset = msg->offset;
		ing->failures = 0;
	}
	if (ing->failing_batch != ing->batch)
	{
		ing->failing_batch = ing->batch;	/* once a batch */
		ing->failures++;
	}
	return ing->failures >= SW_INGEST_MAX_FAILURES;
}

/*
 * Decode the messages [from, n) of the chunk into their slots, until one
 * fails: returns its index (n if none did), with its error in *error.
 * Errors that are not the message's fault (see may_keep_message()) are
 * raised again.
 */
static int
decode_run(SwIngest *ing, int from, int n, char **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile int i = from;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(ing->chunk_cxt);
	PG_TRY();
	{
		for (; i < n; i++)
		{
			const SwMessage *msg = ing->messages[i];
			TupleTableSlot *slot = ing->slots[i];

			CHECK_FOR_INTERRUPTS();
			if (is_tombstone(ing, msg))
				sw_decode_key(ing->decoder, msg, slot);
			else
			{
				sw_decode(ing->decoder, msg, slot);
				sw_writer_complete_row(ing->writer, slot);
			}
		}
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		ErrorData  *edata = roll_back_sub(ing, cxt, owner, false);

		if (i >= n || !may_keep_message(ing, ing->messages[i], edata, false))
			ReThrowError(edata);

		*error = sw_error_text(edata);
		FreeErrorData(edata);
	}
	PG_END_TRY();
	return i;
}

/*
 * Write the row of a decoded message: append it, or, on an upsert source,
 * make it its key's current row, or retract its key's current row.  A row
 * that a BEFORE trigger skips is not written (nor counted).
 */
static void
write_row(SwIngest *ing, const SwMessage *msg, TupleTableSlot *slot)
{
	SwPosition	position = {0};
	bool		written;

	/* where the row comes from, kept with it */
	if (msg->request != 0)
	{
		position.known = true;
		position.part = msg->piece;
		position.pos = msg->request;
		position.delivery = msg->delivery;
	}
	else if (msg->offset >= 0)
	{
		position.known = true;
		position.part = msg->partition;
		position.pos = msg->offset;
	}

	/*
	 * ... and with retain_raw, the message as it came: a webhook's piece of
	 * the body only (its request's headers carry signatures and tokens, and
	 * its arrival is in "$pos"), never NULL in a row that keeps it.  Made
	 * afresh for each row: the writer copies it into the row it writes.
	 */
	if (ing->st->retain_raw)
	{
		MemoryContext old;

		MemoryContextReset(ing->raw_cxt);
		old = MemoryContextSwitchTo(ing->raw_cxt);
		position.raw_kept = true;
		if (ing->st->kind == SW_KIND_WEBHOOK)
		{
			memset(position.raw_null, true, sizeof(position.raw_null));
			position.raw[SW_RAW_VALUE] = bytea_of(msg->value, msg->value ? msg->value_len : 0);
			position.raw_null[SW_RAW_VALUE] = false;
		}
		else
			sw_raw_columns(msg, position.raw, position.raw_null);
		MemoryContextSwitchTo(old);
	}
	sw_writer_set_position(ing->writer, &position);

	if (!ing->st->upsert)
		written = sw_writer_append(ing->writer, slot);
	else if (is_tombstone(ing, msg))
	{
		(void) sw_writer_tombstone(ing->writer, slot);
		written = true;
	}
	else
		written = sw_writer_upsert(ing->writer, slot);
	if (written)
		ing->written++;
}

/*
 * Write the decoded rows [from, to) of the chunk (all but those done) in a
 * subtransaction: true if it committed.  If it fails and holds one
 * message, that message is kept as an error (a row the heap or an index
 * refuses, say): a message that cannot be written must not stop the ones
 * after it.  Errors that a retry may cure (a lock timeout, a full disk, a
 * serialization failure) fail the batch instead, unless the message has
 * failed it too often (see may_keep_message()).
 */
static bool
write_run(SwIngest *ing, int from, int to, bool *done)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	int64		written = ing->written;
	bool		ok = true;

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		for (int i = from; i < to; i++)
			if (!done[i])
				write_row(ing, ing->messages[i], ing->slots[i]);
		sw_writer_sub_end(ing->writer, true);
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		bool		in_trigger = sw_writer_failed_in_trigger(ing->writer);
		ErrorData  *edata = roll_back_sub(ing, cxt, owner, true);

		ing->written = written;
		if (is_interruption(edata))
			ReThrowError(edata);
		if (to - from == 1)
		{
			if (!may_keep_message(ing, ing->messages[from], edata, in_trigger))
				ReThrowError(edata);
			keep_error(ing, ing->messages[from], sw_error_text(edata));
			done[from] = true;
		}
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * A copy of a message in the batch's merge memory, in one allocation.
 */
static SwLastMessage *
copy_message(SwIngest *ing, const SwMessage *msg)
{
	Size		size = MAXALIGN(sizeof(SwLastMessage)) +
		sizeof(SwHeader) * msg->nheaders + msg->key_len + msg->value_len;
	SwLastMessage  *p;
	SwHeader   *headers;
	char	   *bytes;

	for (int i = 0; i < msg->nheaders; i++)
		size += strlen(msg->headers[i].name) + 1 + msg->headers[i].len;
	p = MemoryContextAlloc(ing->merge_cxt, size);
	p->msg = *msg;
	headers = (SwHeader *) ((char *) p + MAXALIGN(sizeof(SwLastMessage)));
	bytes = (char *) (headers + msg->nheaders);
	for (int i = 0; i < msg->nheaders; i++)
	{
		size_t		len = strlen(msg->headers[i].name) + 1;

		headers[i] = msg->headers[i];
		headers[i].name = memcpy(bytes, msg->headers[i].name, len);
		bytes += len;
		if (msg->headers[i].value)
		{
			headers[i].value = memcpy(bytes, msg->headers[i].value, msg->headers[i].len);
			bytes += msg->headers[i].len;
		}
	}
	p->msg.headers = msg->nheaders > 0 ? headers : NULL;
	if (msg->key)
	{
		p->msg.key = memcpy(bytes, msg->key, msg->key_len);
		bytes += msg->key_len;
	}
	if (msg->value)
		p->msg.value = memcpy(bytes, msg->value, msg->value_len);
	return p;
}

/*
 * Upsert sources: take the decoded rows of the chunk that have a whole key
 * out of it (done), keeping each one's message as its key's last one of the
 * batch.  Rows with a null key stay, to be refused when written.
 */
static void
merge_rows(SwIngest *ing, int n, bool *done)
{
	TupleTableSlot *key_slot = ing->key_slot;

	if (ing->keys == NULL)
	{
		AttrNumber *cols = MemoryContextAlloc(ing->merge_cxt, sizeof(AttrNumber) * ing->nkey);

		for (int k = 0; k < ing->nkey; k++)
			cols[k] = k + 1;
		ing->keys = BuildTupleHashTableExt(NULL, key_slot->tts_tupleDescriptor,
										   ing->nkey, cols, ing->key_eqfuncs,
										   ing->key_hashfuncs, ing->key_collations,
										   1024, 0, ing->merge_cxt, ing->merge_cxt,
										   ing->chunk_cxt, false);
	}

	for (int i = 0; i < n; i++)
	{
		TupleHashEntry entry;
		bool		isnew;
		bool		whole = true;
		uint32		hash;
		int			at;

		if (done[i])
			continue;
		ExecClearTuple(key_slot);
		for (int k = 0; k < ing->nkey; k++)
		{
			key_slot->tts_values[k] = slot_getattr(ing->slots[i], ing->key_cols[k],
												   &key_slot->tts_isnull[k]);
			whole &= !key_slot->tts_isnull[k];
		}
		if (!whole)
			continue;
		ExecStoreVirtualTuple(key_slot);

		entry = LookupTupleHashEntry(ing->keys, key_slot, &isnew, &hash);
		if (isnew)
		{
			if (ing->npending == ing->maxpending)
			{
				ing->maxpending = Max(1024, ing->maxpending * 2);
				ing->pending = ing->pending == NULL
					? MemoryContextAlloc(ing->merge_cxt, sizeof(SwLastMessage *) * ing->maxpending)
					: repalloc(ing->pending, sizeof(SwLastMessage *) * ing->maxpending);
			}
			at = ing->npending++;
			entry->additional = (void *) (intptr_t) at;
		}
		else
		{
			/* a later message of the key replaces the earlier one */
			at = (int) (intptr_t) entry->additional;
			pfree(ing->pending[at]);
		}
		ing->pending[at] = copy_message(ing, ing->messages[i]);
		ing->pending[at]->hash = hash;
		ing->pending[at]->key = entry->firstTuple;
		done[i] = true;
	}
}

/*
 * Decode the buffered messages into their slots, keeping those that fail as
 * errors (done).
 */
static void
decode_chunk(SwIngest *ing, bool *done)
{
	int			i = 0;

	while (i < ing->nmessages)
	{
		char	   *error = NULL;

		i = decode_run(ing, i, ing->nmessages, &error);
		if (i < ing->nmessages)
		{
			keep_error(ing, ing->messages[i], error);
			done[i] = true;
			i++;
		}
	}
}

/* forget the buffered messages and their rows */
static void
clear_chunk(SwIngest *ing)
{
	for (int i = 0; i < ing->nmessages; i++)
		ExecClearTuple(ing->slots[i]);
	MemoryContextReset(ing->chunk_cxt);
	ing->nmessages = 0;
}

/*
 * Decode the buffered messages, keeping those that fail as errors; then
 * write their rows, or on an upsert source merge them by key (merge), to
 * be written at the end of the batch.
 */
static void
flush_chunk(SwIngest *ing, bool merge)
{
	int			n = ing->nmessages;
	bool		done[SW_INGEST_CHUNK] = {0};
	int			i;

	if (n == 0)
		return;
	decode_chunk(ing, done);
	if (merge && ing->merging)
		merge_rows(ing, n, done);

	/* write them all; if that fails, one at a time, to keep the culprit */
	for (i = 0; i < n && done[i]; i++)
		;
	if (i < n && !write_run(ing, 0, n, done))
		for (i = 0; i < n; i++)
			if (!done[i])
				(void) write_run(ing, i, i + 1, done);
	clear_chunk(ing);
}

/*
 * The order keys are written in: by their hashes, then (the rare keys that
 * share one) by the keys themselves, with their btree comparisons.
 */
static int
pending_cmp(const void *a, const void *b, void *arg)
{
	const SwLastMessage *pa = *(SwLastMessage *const *) a;
	const SwLastMessage *pb = *(SwLastMessage *const *) b;
	SwIngest   *ing = arg;

	if (pa->hash != pb->hash)
		return pa->hash < pb->hash ? -1 : 1;
	ExecStoreMinimalTuple(pa->key, ing->key_a, false);
	ExecStoreMinimalTuple(pb->key, ing->key_b, false);
	for (int k = 0; k < ing->nkey; k++)
	{
		bool		isnull;
		Datum		va = slot_getattr(ing->key_a, k + 1, &isnull);
		Datum		vb = slot_getattr(ing->key_b, k + 1, &isnull);
		int32		cmp = DatumGetInt32(FunctionCall2Coll(&ing->key_cmpfuncs[k],
														  ing->key_collations[k],
														  va, vb));

		if (cmp != 0)
			return cmp < 0 ? -1 : 1;
	}
	return 0;
}

/* buffer the pending messages from *next on, a chunk of them */
static void
buffer_pending(SwIngest *ing, int *next)
{
	while (ing->nmessages < SW_INGEST_CHUNK && *next < ing->npending)
	{
		need_slot(ing, ing->nmessages);
		ing->messages[ing->nmessages++] = &ing->pending[(*next)++]->msg;
	}
}

/*
 * Upsert sources, at the end of a batch: write the last message of each
 * key, decoding it again.  They are written in the order of their keys'
 * hashes, so that workers that share keys (from different partitions)
 * take them in the same order and do not deadlock; and all in one
 * subtransaction (a sub-XID per chunk would soon overflow the snapshots of
 * other sessions).  If that fails, they are written again a chunk at a
 * time, to keep the culprit as an error.
 */
static void
write_pending(SwIngest *ing)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	int64		written = ing->written;
	int64		kept = ing->kept;
	bool		ok = true;
	int			next = 0;

	if (ing->npending == 0)
		return;
	qsort_arg(ing->pending, ing->npending, sizeof(SwLastMessage *), pending_cmp, ing);
	ExecClearTuple(ing->key_a);
	ExecClearTuple(ing->key_b);

	BeginInternalSubTransaction(NULL);
	PG_TRY();
	{
		while (next < ing->npending)
		{
			bool		done[SW_INGEST_CHUNK] = {0};

			buffer_pending(ing, &next);
			decode_chunk(ing, done);
			for (int i = 0; i < ing->nmessages; i++)
				if (!done[i])
					write_row(ing, ing->messages[i], ing->slots[i]);
			clear_chunk(ing);
		}
		sw_writer_sub_end(ing->writer, true);
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		ErrorData  *edata = roll_back_sub(ing, cxt, owner, true);

		clear_chunk(ing);
		ing->written = written;
		ing->kept = kept;
		if (is_interruption(edata))
			ReThrowError(edata);
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();

	for (next = 0; !ok && next < ing->npending;)
	{
		buffer_pending(ing, &next);
		flush_chunk(ing, false);
	}
}

/* forget the batch's merged keys */
static void
reset_merge(SwIngest *ing)
{
	if (ing->merge_cxt == NULL)
		return;
	MemoryContextReset(ing->merge_cxt);
	ing->keys = NULL;
	ing->pending = NULL;
	ing->npending = 0;
	ing->maxpending = 0;
}

/*
 * Should the batch end?  When it has SW_INGEST_BATCH_MESSAGES messages; or,
 * if it merges them by key, when the messages it keeps take
 * SW_INGEST_MERGE_BYTES.
 */
bool
sw_ingest_full(SwIngest *ing)
{
	if (!ing->merging)
		return ing->added >= SW_INGEST_BATCH_MESSAGES;
	return MemoryContextMemAllocated(ing->merge_cxt, true) >= SW_INGEST_MERGE_BYTES;
}

/*
 * envelope 'debezium': a truncate event, in its place among the batch's
 * messages.  Those before it are decoded and merged (or written); what is
 * merged and not written yet is forgotten, and every current row is
 * retracted, those written earlier in the batch too; the messages after
 * it are the table's rows from then on.  Other writers of the table wait
 * (people's edits could not be retracted under them otherwise), as for a
 * TRUNCATE; readers do not.
 */
static void
truncate_for_event(SwIngest *ing)
{
	flush_chunk(ing, true);
	reset_merge(ing);
	LockRelationOid(ing->st->relid, ExclusiveLock);
	CommandCounterIncrement();	/* the rows the batch wrote, seen */
	sw_writer_truncate(ing->writer);
}

/*
 * Add a message to the batch.  Its memory must live until the next
 * sw_ingest_consumed() or sw_ingest_end(), which write what is buffered.
 * For envelope 'debezium', its op is read here, once (msg->op).
 */
void
sw_ingest_add(SwIngest *ing, SwMessage *msg)
{
	if (ing->st->debezium)
	{
		msg->op = sw_decoder_event_op(ing->decoder, msg);
		if (msg->op == 't')
		{
			truncate_for_event(ing);
			ing->added++;
			return;
		}
	}
	need_slot(ing, ing->nmessages);
	ing->messages[ing->nmessages++] = msg;
	ing->added++;
	if (ing->nmessages == SW_INGEST_CHUNK)
		flush_chunk(ing, true);
}

/*
 * Decode and write (or merge) what is buffered: the caller is about to free
 * the messages it added.
 */
void
sw_ingest_flush(SwIngest *ing)
{
	flush_chunk(ing, true);
}

/*
 * Decode a message and write its row now, raising the first error: for
 * webhooks, whose caller answers a request that fails with the error,
 * having written nothing of it.
 */
void
sw_ingest_write(SwIngest *ing, const SwMessage *msg)
{
	MemoryContext old = MemoryContextSwitchTo(ing->chunk_cxt);

	sw_decode(ing->decoder, msg, ing->slots[0]);
	sw_writer_complete_row(ing->writer, ing->slots[0]);
	write_row(ing, msg, ing->slots[0]);
	MemoryContextSwitchTo(old);
	ExecClearTuple(ing->slots[0]);
	MemoryContextReset(ing->chunk_cxt);
}

/*
 * The rows written in the current batch so far (those that triggers
 * skipped aside): a caller that counts a request's rows takes the
 * difference.
 */
int64
sw_ingest_written(SwIngest *ing)
{
	return ing->written;
}

/*
 * After sw_ingest_write() raised an error: whether decoding the message
 * raised it, where (the decoder's context line), and whether reading the
 * message did (its parts, its values), not a default.
 */
bool
sw_ingest_decode_failed(SwIngest *ing, const char **where, bool *in_message)
{
	return sw_decoder_failed(ing->decoder, where, in_message);
}

/*
 * End a subtransaction of the caller's in which it wrote with
 * sw_ingest_write() (a webhook request's): write the rows it buffered, if
 * it commits; else drop them, and forget what was prepared in it.  Called
 * before the subtransaction ends.
 */
void
sw_ingest_sub_end(SwIngest *ing, bool commit)
{
	sw_writer_sub_end(ing->writer, commit);
	if (!commit)
	{
		sw_writer_reset_checks(ing->writer);
		ExecClearTuple(ing->slots[0]);
		MemoryContextReset(ing->chunk_cxt);
	}
}

/*
 * After an error in sw_ingest_write(): was it raised while rows that were
 * buffered before, maybe of earlier messages, were being written?  Then it
 * is not the message's own.
 */
bool
sw_ingest_failed_flushing(SwIngest *ing)
{
	return ing->writer != NULL && sw_writer_failed_flushing(ing->writer);
}

/*
 * The batch consumes the offsets [from, to) of a partition: when it is
 * stamped, the stored progress must be at from, and moves to to (see
 * sw_writer_consumed()); lost of them were deleted by the brokers before
 * they could be read.
 */
void
sw_ingest_consumed(SwIngest *ing, int32 part, int64 from, int64 to, int64 lost)
{
	flush_chunk(ing, true);
	sw_writer_consumed_lost(ing->writer, part, from, to, lost);
}

/*
 * Write what is buffered and close the batch's writer; the caller commits.
 * Returns the rows written, and in *kept the messages kept as errors.
 */
int64
sw_ingest_end(SwIngest *ing, int64 *kept)
{
	flush_chunk(ing, true);
	write_pending(ing);
	reset_merge(ing);
	sw_writer_close(ing->writer);
	ing->writer = NULL;
	ing->ftrel = NULL;
	*kept = ing->kept;
	ing->failures = 0;			/* whatever failed before went through */
	return ing->written;
}

/*
 * Forget the batch after its transaction aborted: the writer went with it,
 * and so did the bulk-insert state's pin on its current buffer.  That
 * state still names the buffer, which FreeBulkInsertState() would unpin
 * once more: it goes with its memory instead, and a new one is made.
 */
void
sw_ingest_abort(SwIngest *ing)
{
	ing->writer = NULL;
	ing->ftrel = NULL;
	ing->nmessages = 0;
	new_bulk_state(ing);
	for (int i = 0; i < ing->nslots; i++)
		ExecClearTuple(ing->slots[i]);
	MemoryContextReset(ing->chunk_cxt);
	reset_merge(ing);
}

/*
 * The source's options, as the ingestion took them.
 */
const SwSourceTable *
sw_ingest_source_table(SwIngest *ing)
{
	return ing->st;
}

/* a kept error, read back to decode again */
typedef struct SwKeptError
{
	HeapTuple	tuple;			/* its row */
	SwMessage	msg;
} SwKeptError;

/* the bytes of a bytea datum, and their length */
static const char *
bytes_of(Datum d, size_t *len)
{
	bytea	   *b = DatumGetByteaPP(d);

	*len = VARSIZE_ANY_EXHDR(b);
	return VARDATA_ANY(b);
}

/* a message's headers from the arrays of their names and values */
static void
headers_of(Datum names_array, Datum values_array, SwMessage *m)
{
	Datum	   *names;
	Datum	   *hvalues;
	bool	   *hnulls;
	int			nnames;
	int			nvalues;
	SwHeader   *headers;

	deconstruct_array(DatumGetArrayTypeP(names_array),
					  TEXTOID, -1, false, TYPALIGN_INT, &names, NULL, &nnames);
	deconstruct_array(DatumGetArrayTypeP(values_array),
					  BYTEAOID, -1, false, TYPALIGN_INT, &hvalues, &hnulls, &nvalues);
	headers = palloc0(sizeof(SwHeader) * Max(nnames, 1));
	for (int i = 0; i < nnames && i < nvalues; i++)
	{
		headers[i].name = TextDatumGetCString(names[i]);
		if (!hnulls[i])
			headers[i].value = bytes_of(hvalues[i], &headers[i].len);
	}
	m->headers = headers;
	m->nheaders = Min(nnames, nvalues);
}

/*
 * The message a hidden row of a source with retain_raw came from, as it
 * came, into *msg: a Kafka message's key, value, timestamp and headers,
 * with its partition and offset ("$part", "$pos"); a webhook delivery's
 * piece of the body as the value, with its request, the piece's place in
 * the body and the delivery's idempotency key ("$pos", "$part",
 * "$delivery"), its arrival (timestamp_ms) that of the request's id, and
 * no headers (they are not kept).  topic is NULL (the caller knows it).
 * False, with *msg cleared, where the row keeps none: a person's row, or
 * one written while retain_raw was off.  What *msg points to is in the
 * current memory context, or in the slot's tuple, as long as it holds it.
 */
bool
sw_raw_message(const SwLayout *layout, TupleTableSlot *hidden, SwMessage *msg)
{
	bool		webhook = layout->raw[SW_RAW_TIMESTAMP] == InvalidAttrNumber;
	AttrNumber	marker = layout->raw[webhook ? SW_RAW_VALUE : SW_RAW_TIMESTAMP];
	Datum		d;
	bool		isnull;

	memset(msg, 0, sizeof(SwMessage));
	msg->partition = -1;
	msg->offset = -1;
	msg->timestamp_ms = -1;
	if (marker == InvalidAttrNumber)
		return false;
	(void) slot_getattr(hidden, marker, &isnull);
	if (isnull)
		return false;

	if (webhook)
	{
		msg->value = bytes_of(slot_getattr(hidden, layout->raw[SW_RAW_VALUE], &isnull),
							  &msg->value_len);
		d = slot_getattr(hidden, layout->pos, &isnull);
		if (!isnull)
		{
			msg->request = DatumGetInt64(d);
			msg->timestamp_ms = msg->request / 1000;
		}
		d = slot_getattr(hidden, layout->part, &isnull);
		if (!isnull)
			msg->piece = DatumGetInt32(d);
		if (layout->delivery != InvalidAttrNumber)
		{
			d = slot_getattr(hidden, layout->delivery, &isnull);
			if (!isnull)
				msg->delivery = TextDatumGetCString(d);
		}
		return true;
	}

	d = slot_getattr(hidden, layout->raw[SW_RAW_KEY], &isnull);
	if (!isnull)
		msg->key = bytes_of(d, &msg->key_len);
	d = slot_getattr(hidden, layout->raw[SW_RAW_VALUE], &isnull);
	if (!isnull)
		msg->value = bytes_of(d, &msg->value_len);
	msg->timestamp_ms = DatumGetInt64(slot_getattr(hidden, layout->raw[SW_RAW_TIMESTAMP],
												   &isnull));
	if (layout->raw[SW_RAW_HEADER_NAMES] != InvalidAttrNumber &&
		layout->raw[SW_RAW_HEADER_VALUES] != InvalidAttrNumber)
	{
		bool		values_null;
		Datum		names = slot_getattr(hidden, layout->raw[SW_RAW_HEADER_NAMES], &isnull);
		Datum		values = slot_getattr(hidden, layout->raw[SW_RAW_HEADER_VALUES],
										  &values_null);

		if (!isnull && !values_null)
			headers_of(names, values, msg);
	}
	if (layout->part != InvalidAttrNumber && layout->pos != InvalidAttrNumber)
	{
		bool		pos_null;
		Datum		part = slot_getattr(hidden, layout->part, &isnull);
		Datum		pos = slot_getattr(hidden, layout->pos, &pos_null);

		if (!isnull && !pos_null)
		{
			msg->partition = DatumGetInt32(part);
			msg->offset = DatumGetInt64(pos);
		}
	}
	return true;
}

/*
 * The next kept error of a source from scan (oldest partition and offset
 * first), begun in scan_cxt, as the message it was, in the current memory
 * context; false after the last.
 */
static bool
next_kept_error(SysScanDesc scan, MemoryContext scan_cxt, Relation rel,
				SwIngest *ing, SwKeptError *e)
{
	HeapTuple	tuple;
	Datum		values[Natts_e];
	bool		nulls[Natts_e];
	SwMessage  *m = &e->msg;
	MemoryContext cxt;

	/* the scan's own state (dead entries it meets) lives as long as it */
	cxt = MemoryContextSwitchTo(scan_cxt);
	tuple = systable_getnext_ordered(scan, ForwardScanDirection);
	MemoryContextSwitchTo(cxt);
	if (!HeapTupleIsValid(tuple))
		return false;
	memset(e, 0, sizeof(SwKeptError));
	/* the copy: the scan's buffer is not ours for long */
	e->tuple = heap_copytuple(tuple);
	heap_deform_tuple(e->tuple, RelationGetDescr(rel), values, nulls);
	m->partition = nulls[Anum_e_partition - 1] ? -1 : DatumGetInt32(values[Anum_e_partition - 1]);
	m->offset = nulls[Anum_e_offset - 1] ? -1 : DatumGetInt64(values[Anum_e_offset - 1]);
	if (!nulls[Anum_e_key - 1])
		m->key = bytes_of(values[Anum_e_key - 1], &m->key_len);
	if (!nulls[Anum_e_value - 1])
		m->value = bytes_of(values[Anum_e_value - 1], &m->value_len);
	m->timestamp_ms = nulls[Anum_e_timestamp - 1] ? -1 : DatumGetInt64(values[Anum_e_timestamp - 1]);
	m->topic = ing->st->topic;
	if (!nulls[Anum_e_header_names - 1] && !nulls[Anum_e_header_values - 1])
		headers_of(values[Anum_e_header_names - 1],
				   values[Anum_e_header_values - 1], m);
	return true;
}

/*
 * Make a source's ingestion again, in the current memory context, after a
 * function or a role its code uses changed: it carries over how often the
 * same message failed its batches, which the old one counted.
 */
SwIngest *
sw_ingest_remake(SwIngest *old, Relation ftrel)
{
	SwIngest   *ing = sw_ingest_create(ftrel, old->origin);

	ing->batch = old->batch;
	ing->failing_partition = old->failing_partition;
	ing->failing_offset = old->failing_offset;
	ing->failing_batch = old->failing_batch;
	ing->failures = old->failures;
	return ing;
}

/* what became of a kept error that retry_errors() tried again */
typedef enum SwRetried
{
	SW_RETRY_MOVED,				/* its row was written, the error deleted */
	SW_RETRY_FAILED,			/* it fails again (*error says why) */
	SW_RETRY_GONE				/* somebody deleted or changed it meanwhile */
} SwRetried;

/*
 * retry_errors() meets a kept error that another session deleted or
 * changed after the caller's snapshot (result, of table_tuple_delete() or
 * table_tuple_update()): as DELETE and UPDATE would, under REPEATABLE READ
 * and SERIALIZABLE that is a serialization failure; under READ COMMITTED
 * the error is left to them (deleted, or retried by them).
 */
static SwRetried
error_gone(TM_Result result)
{
	switch (result)
	{
		case TM_Updated:
		case TM_Deleted:
			if (IsolationUsesXactSnapshot())
				ereport(ERROR,
						(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
						 errmsg("could not serialize access due to concurrent %s",
								result == TM_Deleted ? "delete" : "update")));
			return SW_RETRY_GONE;
		case TM_SelfModified:
			return SW_RETRY_GONE;	/* the table's code, just now */
		default:
			elog(ERROR, "unexpected result %u for a kept error", result);
	}
	return SW_RETRY_GONE;		/* keep compiler quiet */
}

/*
 * retry_errors(): decode a kept error again and write its row, deleting
 * the error, in a subtransaction.  If the message fails again with an
 * error of its own (see may_keep_message(): decoding, the table's
 * constraints, its triggers), nothing of it is written and *error says
 * why; other errors are raised.
 */
static SwRetried
retry_one(SwIngest *ing, Relation rel, SwKeptError *e, char **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile SwRetried retried = SW_RETRY_MOVED;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(ing->chunk_cxt);
	PG_TRY();
	{
		TupleTableSlot *slot = ing->slots[0];
		TM_FailureData tmfd;
		TM_Result	result;

		if (is_tombstone(ing, &e->msg))
			sw_decode_key(ing->decoder, &e->msg, slot);
		else
		{
			sw_decode(ing->decoder, &e->msg, slot);
			sw_writer_complete_row(ing->writer, slot);
		}
		/* it decodes: it leaves the errors, unless somebody took it */
		result = table_tuple_delete(rel, &e->tuple->t_self, GetCurrentCommandId(true),
									GetActiveSnapshot(), InvalidSnapshot, true,
									&tmfd, false);
		if (result == TM_Ok)
			write_row(ing, &e->msg, slot);
		else
			retried = error_gone(result);
		sw_writer_sub_end(ing->writer, true);
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		bool		in_trigger = sw_writer_failed_in_trigger(ing->writer);
		ErrorData  *edata = roll_back_sub(ing, cxt, owner, true);

		sw_writer_reset_checks(ing->writer);
		if (!may_keep_message(ing, &e->msg, edata, in_trigger))
			ReThrowError(edata);
		*error = sw_error_text(edata);
		FreeErrorData(edata);
		retried = SW_RETRY_FAILED;
	}
	PG_END_TRY();
	return retried;
}

PG_FUNCTION_INFO_V1(source_writes_retry_errors);

/*
 * source_writes.retry_errors(source): decode the kept errors of a source
 * again, after its table was fixed, and move those that now decode into
 * it, as a batch of the source's origin, written as the table's owner (its
 * code runs as the owner, as in the workers) and logged as the caller's;
 * those that still fail stay, with the new reason.  Takes SELECT, INSERT
 * and DELETE on the table; retries of one source run one at a time.
 * Returns how many moved.
 */
Datum
source_writes_retry_errors(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	SwSource	source;
	Relation	ftrel;
	Relation	rel;
	Oid			index;
	SwIngest   *ing;
	SysScanDesc scan;
	ScanKeyData key;
	SwKeptError kept;
	MemoryContext error_cxt;
	MemoryContext old_cxt;
	EState	   *estate;
	ResultRelInfo *errors_rri;
	TupleTableSlot *errors_slot;
	int64		moved = 0;
	int64		kept_again;

	sw_source_resolve(relid, &source, false);
	/* it reads the kept payloads, writes rows and deletes errors */
	(void) sw_check_source_privilege(relid, GetUserId(),
									 ACL_SELECT | ACL_INSERT | ACL_DELETE, false);
	PreventCommandIfReadOnly("retry_errors()");

	/* one retry of a source at a time; writers go on */
	ftrel = table_open(relid, RowExclusiveLock);
	LockRelationOid(relid, ShareUpdateExclusiveLock);
	ing = sw_ingest_create(ftrel, source.kind == SW_KIND_KAFKA
						   ? SW_ORIGIN_KAFKA : SW_ORIGIN_WEBHOOK);
	ing->log_role = GetUserId();
	sw_ingest_begin(ing, ftrel);

	/*
	 * Each error is read, retried and deleted or updated in turn, in memory
	 * of its own.  The scan's snapshot, the query's, does not see the
	 * versions the updates make, nor the rows they write.  An error that
	 * still fails is updated as UPDATE would update it (its indexes too).
	 */
	rel = table_open(sw_catalog_errors_oid(&index), RowExclusiveLock);
	estate = CreateExecutorState();
	errors_rri = makeNode(ResultRelInfo);
	InitResultRelInfo(errors_rri, rel, 0, NULL, 0);
	ExecOpenIndices(errors_rri, false);
	errors_slot = MakeSingleTupleTableSlot(RelationGetDescr(rel), &TTSOpsHeapTuple);
	ScanKeyInit(&key, Anum_e_source, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan_ordered(rel, index_open(index, AccessShareLock),
									  GetActiveSnapshot(), 1, &key);
	error_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes kept error",
									  ALLOCSET_DEFAULT_SIZES);
	old_cxt = MemoryContextSwitchTo(error_cxt);
	while (next_kept_error(scan, old_cxt, rel, ing, &kept))
	{
		SwKeptError *e = &kept;
		char	   *error = NULL;

		CHECK_FOR_INTERRUPTS();
		ing->messages[0] = &e->msg;
		switch (retry_one(ing, rel, e, &error))
		{
			case SW_RETRY_MOVED:
				moved++;
				break;
			case SW_RETRY_GONE:
				break;
			case SW_RETRY_FAILED:
				{
					/* it still fails: say why now */
					Datum		values[Natts_e] = {0};
					bool		nulls[Natts_e] = {0};
					bool		replace[Natts_e] = {0};
					TM_FailureData tmfd;
					LockTupleMode lockmode;
					bool		update_indexes;
					TM_Result	result;

					values[Anum_e_error - 1] = CStringGetTextDatum(error);
					replace[Anum_e_error - 1] = true;
					ExecStoreHeapTuple(heap_modify_tuple(e->tuple, RelationGetDescr(rel),
														 values, nulls, replace),
									   errors_slot, true);
					result = table_tuple_update(rel, &e->tuple->t_self, errors_slot,
												GetCurrentCommandId(true),
												GetActiveSnapshot(), InvalidSnapshot,
												true, &tmfd, &lockmode, &update_indexes);
					if (result != TM_Ok)
						(void) error_gone(result);
					else if (update_indexes)
						(void) ExecInsertIndexTuples(errors_rri, errors_slot, estate,
													 true, false, NULL, NIL);
					ExecClearTuple(errors_slot);
					ResetPerTupleExprContext(estate);
					break;
				}
		}
		ExecClearTuple(ing->slots[0]);
		MemoryContextReset(ing->chunk_cxt);
		CommandCounterIncrement();
		MemoryContextSwitchTo(old_cxt);
		MemoryContextReset(error_cxt);
		MemoryContextSwitchTo(error_cxt);
	}
	MemoryContextSwitchTo(old_cxt);
	MemoryContextDelete(error_cxt);
	index_close(scan->irel, AccessShareLock);
	systable_endscan_ordered(scan);
	ExecDropSingleTupleTableSlot(errors_slot);
	ExecCloseIndices(errors_rri);
	FreeExecutorState(estate);
	table_close(rel, RowExclusiveLock);
	(void) sw_ingest_end(ing, &kept_again);
	table_close(ftrel, NoLock);
	PG_RETURN_INT64(moved);
}
