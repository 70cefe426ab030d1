/*-------------------------------------------------------------------------
 *
 * moves.c
 *		  Moving a source table with its log: the SQL functions export()
 *		  and import()
 *
 * export() writes a source's retained log (its batches, and its rows with
 * the batches that added and retracted them and where they came from),
 * its frontiers, its Kafka offsets and its deliveries' idempotency keys as
 * lines of JSON, in the format of doc/moves.md; COPY streams them.
 * import() reads such lines from a table into an empty source of the same
 * columns: new batch ids, the same timestamps.  A fenced export marks the
 * source moved, so that it takes no more writes.  See doc/internals.md,
 * "Reading the log" (Functions).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/moves.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"

#include "fdw/fdw.h"
#include "log/log.h"
#include "options/options.h"

/*
 * the version of the format that export() writes, and the latest that
 * import() reads (it reads versions 1 and 2 too)
 */
#define SW_EXPORT_FORMAT	"source_writes export"
#define SW_EXPORT_VERSION	3

/*
 * export() puts rows in a line until it would be longer than this: lines
 * of COPY and of a table cost per line, and a line of a table longer than
 * about 2 kB is compressed (TOAST_TUPLE_THRESHOLD)
 */
#define SW_EXPORT_LINE_BYTES	1900

/* ---------------------------------------------------------------------
 * export()
 * ---------------------------------------------------------------------
 */

/* what export() is writing */
typedef struct Export
{
	Tuplestorestate *store;		/* where lines go, until the rows' */
	TupleDesc	store_desc;
	StringInfoData line;
	TupleDesc	desc;			/* the table's */
	FmgrInfo   *out;			/* its columns' output functions */
	bool		raw;			/* rows carry their raw messages */
	int64		nbatches;
	int64		nrows;
	int64		nprogress;
	int64		ndeliveries;
} Export;

/*
 * One line of the export: into the store while there is one (the header
 * and the batches), else left in ex->line for the caller to return
 */
static void
put_line(Export *ex)
{
	Datum		value;
	bool		isnull = false;

	if (ex->store == NULL)
		return;
	value = PointerGetDatum(cstring_to_text_with_len(ex->line.data, ex->line.len));
	tuplestore_putvalues(ex->store, ex->store_desc, &value, &isnull);
	pfree(DatumGetPointer(value));
	resetStringInfo(&ex->line);
}

/* "name": value, for numbers */
static void
put_int(StringInfo s, const char *name, int64 value, bool isnull)
{
	char		digits[MAXINT8LEN + 1];

	appendStringInfoString(s, ", \"");
	appendStringInfoString(s, name);
	appendStringInfoString(s, "\": ");
	if (isnull)
		appendBinaryStringInfo(s, "null", 4);
	else
		appendBinaryStringInfo(s, digits, pg_lltoa(value, digits));
}

/*
 * A value as a JSON string: as escape_json() writes it, and at once when
 * it has nothing to escape (most values)
 */
static void
put_json_string(StringInfo s, const char *value)
{
	const unsigned char *p = (const unsigned char *) value;

	while (*p >= 0x20 && *p != '"' && *p != '\\')
		p++;
	if (*p != '\0')
	{
		escape_json(s, value);
		return;
	}
	enlargeStringInfo(s, (p - (const unsigned char *) value) + 2);
	s->data[s->len++] = '"';
	memcpy(s->data + s->len, value, p - (const unsigned char *) value);
	s->len += p - (const unsigned char *) value;
	s->data[s->len++] = '"';
	s->data[s->len] = '\0';
}

/*
 * The names of the columns as a row line of format version 1 has them,
 * each with what comes before it: {"a": "1", "b": null}.  import()
 * compares them as they are.
 */
static StringInfoData *
column_keys(TupleDesc desc)
{
	StringInfoData *keys = palloc0(sizeof(StringInfoData) * Max(desc->natts, 1));
	bool		first = true;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		initStringInfo(&keys[i]);
		if (!first)
			appendStringInfoString(&keys[i], ", ");
		escape_json(&keys[i], NameStr(att->attname));
		appendStringInfoString(&keys[i], ": ");
		first = false;
	}
	return keys;
}

/* "name": "value", for strings */
static void
put_string(StringInfo s, const char *name, const char *value)
{
	appendStringInfo(s, ", \"%s\": ", name);
	if (value == NULL)
		appendStringInfoString(s, "null");
	else
		escape_json(s, value);
}

/* the header: what the export is of */
static void
put_header(Export *ex, Relation ftrel, const SwSource *source,
		   const SwFrontiers *frontiers)
{
	StringInfo	s = &ex->line;
	bool		first = true;

	appendStringInfo(s, "{\"format\": \"%s\", \"version\": %d", SW_EXPORT_FORMAT,
					 SW_EXPORT_VERSION);
	put_string(s, "kind", source->kind == SW_KIND_WEBHOOK ? "webhook" : "kafka");
	put_string(s, "table", RelationGetRelationName(ftrel));
	put_int(s, "since", frontiers->since, false);
	put_int(s, "upper", frontiers->upper, false);
	appendStringInfo(s, ", \"raw\": %s", ex->raw ? "true" : "false");
	appendStringInfoString(s, ", \"columns\": [");
	for (int i = 0; i < ex->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ex->desc, i);

		if (att->attisdropped)
			continue;
		appendStringInfoString(s, first ? "[" : ", [");
		escape_json(s, NameStr(att->attname));
		appendStringInfoString(s, ", ");
		escape_json(s, format_type_with_typemod(att->atttypid, att->atttypmod));
		appendStringInfoChar(s, ']');
		first = false;
	}
	appendStringInfoString(s, "]}");
	put_line(ex);
}

/* a batch: its id in the export, its timestamp, origin and role */
static void
put_batch(Export *ex, const SwBatch *batch)
{
	StringInfo	s = &ex->line;

	appendStringInfo(s, "{\"batch\": " INT64_FORMAT, batch->batch);
	put_int(s, "ts", batch->ts, false);
	put_string(s, "origin", sw_origin_name(batch->origin));
	put_string(s, "role", NameStr(batch->role));
	appendStringInfoChar(s, '}');
	put_line(ex);
	ex->nbatches++;
}

/* a batch of a segment (sw_segments_each()) */
static void
put_segment_batch(const SwBatch *batch, void *arg)
{
	put_batch((Export *) arg, batch);
}

/* a number, or null, as an element of a row line */
static void
put_elem_int(StringInfo s, int64 value, bool isnull)
{
	char		digits[MAXINT8LEN + 1];

	if (isnull)
		appendBinaryStringInfo(s, "null", 4);
	else
		appendBinaryStringInfo(s, digits, pg_lltoa(value, digits));
}

/* bytes as a JSON string of hex digits, two a byte */
static void
put_hex(StringInfo s, bytea *b)
{
	size_t		len = VARSIZE_ANY_EXHDR(b);

	enlargeStringInfo(s, 2 * len + 2);
	s->data[s->len++] = '"';
	s->len += hex_encode(VARDATA_ANY(b), len, s->data + s->len);
	s->data[s->len++] = '"';
	s->data[s->len] = '\0';
}

/*
 * The headers of a raw message: an array of their names (text[]) or of
 * their values (bytea[]), as a JSON array of strings, or of hex digits
 * and nulls
 */
static void
put_raw_array(StringInfo s, ArrayType *array)
{
	Oid			type = ARR_ELEMTYPE(array);
	Datum	   *elems;
	bool	   *nulls;
	int			n;

	deconstruct_array(array, type, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	appendStringInfoChar(s, '[');
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoChar(s, ',');
		if (nulls[i])
			appendBinaryStringInfo(s, "null", 4);
		else if (type == BYTEAOID)
			put_hex(s, DatumGetByteaPP(elems[i]));
		else
			put_json_string(s, TextDatumGetCString(elems[i]));
	}
	appendStringInfoChar(s, ']');
}

/*
 * The raw message a row version keeps (retain_raw), after its columns in
 * an export that carries them, as its storage holds it: "$key" and
 * "$value" in hex, "$timestamp", "$header_names" and "$header_values" as
 * arrays; null where the row keeps none, or where its storage has no such
 * column (a webhook source's keeps "$value" only)
 */
static void
put_raw(StringInfo s, TupleTableSlot *hidden, const SwLayout *layout)
{
	for (int i = 0; i < SW_NUM_RAW; i++)
	{
		bool		null;
		Datum		d = sw_meta_value(hidden, layout->raw[i], &null);

		appendStringInfoChar(s, ',');
		if (null)
			appendBinaryStringInfo(s, "null", 4);
		else if (i == SW_RAW_KEY || i == SW_RAW_VALUE)
			put_hex(s, DatumGetByteaPP(d));
		else if (i == SW_RAW_TIMESTAMP)
			put_elem_int(s, DatumGetInt64(d), false);
		else
			put_raw_array(s, DatumGetArrayTypeP(d));
	}
}

/*
 * A row version into s, as a JSON array (format version 3): the batches
 * that added it (null: before since) and retracted it (null: it is
 * current), its partition and offset, its delivery, then its columns in
 * the header's order, each as its type's text, and where the export
 * carries raw messages the row's (put_raw()).  A line holds rows
 * (export_next()).
 */
static void
put_row(Export *ex, StringInfo s, TupleTableSlot *hidden, const SwLayout *layout,
		const SwLogRow *row, Datum *values, bool *isnull)
{
	bool		null;
	Datum		d;

	appendStringInfoChar(s, '[');
	put_elem_int(s, row->added_batch ? row->added_batch->batch : 0,
				 row->added != SW_LOG_IN || row->added_batch == NULL);
	appendStringInfoChar(s, ',');
	put_elem_int(s, row->retracted_batch ? row->retracted_batch->batch : 0,
				 row->retracted != SW_LOG_IN || row->retracted_batch == NULL);
	appendStringInfoChar(s, ',');
	d = sw_meta_value(hidden, layout->part, &null);
	put_elem_int(s, null ? 0 : DatumGetInt32(d), null);
	appendStringInfoChar(s, ',');
	d = sw_meta_value(hidden, layout->pos, &null);
	put_elem_int(s, null ? 0 : DatumGetInt64(d), null);
	appendStringInfoChar(s, ',');
	d = sw_meta_value(hidden, layout->delivery, &null);
	if (null)
		appendBinaryStringInfo(s, "null", 4);
	else
		put_json_string(s, TextDatumGetCString(d));

	slot_getallattrs(hidden);
	sw_from_hidden(layout, ex->desc->natts, hidden->tts_values, hidden->tts_isnull,
				   values, isnull);
	for (int i = 0; i < ex->desc->natts; i++)
	{
		if (TupleDescAttr(ex->desc, i)->attisdropped)
			continue;
		appendStringInfoChar(s, ',');
		if (isnull[i])
			appendBinaryStringInfo(s, "null", 4);
		else
			put_json_string(s, OutputFunctionCall(&ex->out[i], values[i]));
	}
	if (ex->raw)
		put_raw(s, hidden, layout);
	appendStringInfoChar(s, ']');
	ex->nrows++;
}

/* where a Kafka source's partitions go on */
static void
put_progress(Export *ex, const SwProgress *p)
{
	StringInfo	s = &ex->line;

	appendStringInfo(s, "{\"progress\": %d", p->part);
	put_int(s, "next_offset", p->next_offset, false);
	put_string(s, "topic", p->topic);
	put_string(s, "cluster_id", p->cluster_id);
	put_int(s, "lost", p->lost, false);
	put_string(s, "stopped", p->stopped);
	appendStringInfoChar(s, '}');
	put_line(ex);
	ex->nprogress++;
}

/* a kept idempotency key of a webhook source */
static void
put_delivery(Export *ex, const SwDelivery *d)
{
	StringInfo	s = &ex->line;

	appendStringInfoString(s, "{\"delivery\": ");
	escape_json(s, d->key);
	put_int(s, "ts", d->ts, false);
	appendStringInfoString(s, ", \"body_sha256\": \"");
	for (int i = 0; i < PG_SHA256_DIGEST_LENGTH; i++)
		appendStringInfo(s, "%02x", d->body_sha256[i]);
	appendStringInfoChar(s, '"');
	put_int(s, "rows", d->rows, false);
	appendStringInfoChar(s, '}');
	put_line(ex);
	ex->ndeliveries++;
}

/* where export() is, between the calls that return its lines */
typedef enum ExportPhase
{
	EXPORT_HEAD,				/* the header and the batches, from the store */
	EXPORT_ROWS,				/* the row versions, from the log */
	EXPORT_TAIL,				/* the progress or the deliveries */
	EXPORT_END,					/* the end */
	EXPORT_DONE
} ExportPhase;

/* what export() keeps between its calls */
typedef struct ExportState
{
	Export		ex;
	ExportPhase phase;
	bool		fence;
	SwSource	source;
	Relation	ftrel;
	Relation	current;
	Relation	history;
	Snapshot	snapshot;
	SwBatchMap *map;
	SwLogScan	ls;
	bool		scanning;		/* ls is open */
	TupleTableSlot *store_slot;
	List	   *tail;			/* SwProgress or SwDelivery */
	ListCell   *next;
	StringInfoData row;			/* a row that did not fit in the last line */
	bool		rows_read;		/* the scan of the log is at its end */
	Datum	   *values;
	bool	   *isnull;
	MemoryContext row_cxt;
	ExprContext *econtext;
} ExportState;

/* close the scan of the log, and its tables */
static void
export_end_scan(ExportState *st)
{
	if (!st->scanning)
		return;
	sw_log_end_scan(&st->ls);
	table_close(st->history, AccessShareLock);
	table_close(st->current, AccessShareLock);
	st->scanning = false;
}

/*
 * What export() holds, let go when the query stops reading it before its
 * end (a LIMIT), or at its end
 */
static void
export_release(ExportState *st)
{
	if (st->phase == EXPORT_DONE)
		return;
	export_end_scan(st);
	if (st->ex.store)
		tuplestore_end(st->ex.store);
	st->ex.store = NULL;
	UnregisterSnapshot(st->snapshot);
	relation_close(st->ftrel, NoLock);
	st->phase = EXPORT_DONE;
}

/* the query's shutdown of export() (RegisterExprContextCallback()) */
static void
export_shutdown(Datum arg)
{
	export_release((ExportState *) DatumGetPointer(arg));
}

/*
 * The first call of export(): check, lock, take the snapshot, write the
 * header and the batches into a store, and begin the scan of the log
 */
static ExportState *
export_begin(FunctionCallInfo fcinfo, Oid relid, bool fence)
{
	ExportState *st = palloc0(sizeof(ExportState));
	Export	   *ex = &st->ex;
	SwFrontiers frontiers;
	HASH_SEQ_STATUS status;
	SwBatch    *batch;

	/*
	 * SELECT on the table itself, not on its columns only: the export has
	 * the raw messages that rows keep (retain_raw), which hold what their
	 * producers sent, as raw_messages() needs
	 */
	(void) sw_check_source_privilege(relid, GetUserId(), ACL_SELECT, false);
	sw_source_resolve(relid, &st->source, true);
	if (fence)
	{
		if (!pg_class_ownercheck(relid, GetUserId()))
			aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
						   get_rel_name(relid));
		PreventCommandIfReadOnly("export(..., fence => true)");
		if (st->source.moved)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("source table \"%s\" was moved already", get_rel_name(relid))));

		/*
		 * A write of our own transaction, before the export or in the same
		 * statement, would commit a batch after the snapshot (its timestamp
		 * is the commit's) into a fenced table: DML holds RowExclusiveLock
		 * from its parse on.
		 */
		if (sw_transaction_writes(relid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("cannot fence source table \"%s\" in a transaction that writes to it",
							get_rel_name(relid)),
					 errdetail("Its writes would commit after the export was read."),
					 errhint("Export with fence in a transaction of its own.")));
	}
	st->fence = fence;

	/* fenced: no writer is in, none gets in until the commit */
	st->ftrel = relation_open(relid, fence ? ShareRowExclusiveLock : AccessShareLock);
	st->snapshot = fence ? RegisterSnapshot(GetLatestSnapshot()) :
		RegisterSnapshot(GetActiveSnapshot());
	if (!sw_catalog_frontiers(relid, st->snapshot, &frontiers))
		elog(ERROR, "source table \"%s\" has no catalog row", RelationGetRelationName(st->ftrel));

	initStringInfo(&ex->line);
	ex->desc = RelationGetDescr(st->ftrel);
	/* what retain_raw kept, also after it was turned off */
	ex->raw = sw_storage_raw_columns(&st->source) > 0;
	ex->out = palloc0(sizeof(FmgrInfo) * Max(ex->desc->natts, 1));
	for (int i = 0; i < ex->desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(ex->desc, i);
		Oid			func;
		bool		varlena;

		if (att->attisdropped)
			continue;
		getTypeOutputInfo(att->atttypid, &func, &varlena);
		fmgr_info(func, &ex->out[i]);
	}
	st->values = palloc(sizeof(Datum) * Max(ex->desc->natts, 1));
	st->isnull = palloc(sizeof(bool) * Max(ex->desc->natts, 1));
	initStringInfo(&st->row);
	ex->store_desc = CreateTemplateTupleDesc(1);
	TupleDescInitEntry(ex->store_desc, (AttrNumber) 1, "line", TEXTOID, -1, 0);
	ex->store = tuplestore_begin_heap(false, false, work_mem);
	st->store_slot = MakeSingleTupleTableSlot(ex->store_desc, &TTSOpsMinimalTuple);

	/*
	 * The batches of the retained log.  Without a fence, a batch that the
	 * snapshot sees may have come after one that it misses, still
	 * committing, and whose timestamp is the upper: the export's upper is
	 * after every batch it has, as its import's will be.
	 */
	st->map = sw_log_batches(relid, PG_INT64_MIN, PG_INT64_MAX, st->snapshot);
	hash_seq_init(&status, st->map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
		frontiers.upper = Max(frontiers.upper, batch->ts + 1);
	put_header(ex, st->ftrel, &st->source, &frontiers);
	hash_seq_init(&status, st->map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
		put_batch(ex, batch);
	/* those rolled up into segments (older than the rows') */
	sw_segments_each(st->map->segments, put_segment_batch, ex);

	/* the row versions in it, read a call at a time */
	st->row_cxt = AllocSetContextCreate(CurrentMemoryContext, "source_writes export",
										ALLOCSET_DEFAULT_SIZES);
	st->current = table_open(st->source.current_rel, AccessShareLock);
	st->history = table_open(st->source.history_rel, AccessShareLock);
	sw_log_begin_scan(&st->ls, st->ftrel, st->current, st->history, st->snapshot, st->map);
	st->ls.keep_noop = true;	/* the traces of tombstones go along */
	st->scanning = true;
	st->phase = EXPORT_HEAD;
	return st;
}

/*
 * The next line of export() into st->ex.line, or false when all are
 * written
 */
static bool
export_next(ExportState *st)
{
	Export	   *ex = &st->ex;
	TupleTableSlot *hidden;
	const SwLayout *layout;
	SwLogRow	row;
	Oid			relid = RelationGetRelid(st->ftrel);

	resetStringInfo(&ex->line);
	switch (st->phase)
	{
		case EXPORT_HEAD:
			if (tuplestore_gettupleslot(ex->store, true, false, st->store_slot))
			{
				bool		isnull;
				text	   *t = DatumGetTextPP(slot_getattr(st->store_slot, 1, &isnull));

				appendBinaryStringInfo(&ex->line, VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
				return true;
			}
			ExecDropSingleTupleTableSlot(st->store_slot);
			tuplestore_end(ex->store);
			ex->store = NULL;
			st->phase = EXPORT_ROWS;
			/* FALLTHROUGH */
		case EXPORT_ROWS:
			/* rows, as many as fit in a line, and the one that did not first */
			if (st->row.len > 0)
			{
				appendStringInfoChar(&ex->line, '[');
				appendBinaryStringInfo(&ex->line, st->row.data, st->row.len);
				resetStringInfo(&st->row);
			}
			while (!st->rows_read)
			{
				MemoryContext old;

				if ((hidden = sw_log_next(&st->ls, &layout, &row)) == NULL)
				{
					st->rows_read = true;
					break;
				}
				/* retracted before since (compaction's to delete), or not stamped */
				if (row.retracted == SW_LOG_BEFORE || row.added == SW_LOG_LATER)
					continue;
				old = MemoryContextSwitchTo(st->row_cxt);
				put_row(ex, &st->row, hidden, layout, &row, st->values, st->isnull);
				MemoryContextSwitchTo(old);
				MemoryContextReset(st->row_cxt);
				if (ex->line.len > 0 &&
					ex->line.len + st->row.len + 2 > SW_EXPORT_LINE_BYTES)
				{
					appendStringInfoChar(&ex->line, ']');
					return true;	/* st->row goes first in the next line */
				}
				appendStringInfoChar(&ex->line, ex->line.len > 0 ? ',' : '[');
				appendBinaryStringInfo(&ex->line, st->row.data, st->row.len);
				resetStringInfo(&st->row);
			}
			if (ex->line.len > 0)
			{
				appendStringInfoChar(&ex->line, ']');
				return true;
			}
			export_end_scan(st);

			/* where ingestion goes on, and what it must not write again */
			st->tail = st->source.kind == SW_KIND_KAFKA ?
				sw_catalog_progress_at(relid, st->snapshot) :
				sw_deliveries_of(relid, st->snapshot);
			st->next = list_head(st->tail);
			st->phase = EXPORT_TAIL;
			/* FALLTHROUGH */
		case EXPORT_TAIL:
			if (st->next != NULL)
			{
				if (st->source.kind == SW_KIND_KAFKA)
					put_progress(ex, lfirst(st->next));
				else
					put_delivery(ex, lfirst(st->next));
				st->next = lnext(st->tail, st->next);
				return true;
			}
			st->phase = EXPORT_END;
			/* FALLTHROUGH */
		case EXPORT_END:
			appendStringInfoString(&ex->line, "{\"end\": true");
			put_int(&ex->line, "batches", ex->nbatches, false);
			put_int(&ex->line, "rows", ex->nrows, false);
			put_int(&ex->line, "progress", ex->nprogress, false);
			put_int(&ex->line, "deliveries", ex->ndeliveries, false);
			appendStringInfoChar(&ex->line, '}');

			/* later writes of this statement and transaction see the fence too */
			if (st->fence)
			{
				sw_catalog_set_moved(relid);
				CommandCounterIncrement();
			}
			export_release(st);
			return true;
		case EXPORT_DONE:
			break;
	}
	return false;
}

PG_FUNCTION_INFO_V1(source_writes_export);

/*
 * export(source regclass, fence boolean DEFAULT false) -> SETOF text
 *
 * The retained log of a source, its frontiers, offsets and idempotency
 * keys, as lines of the format of doc/moves.md: a header, the batches,
 * the row versions, the progress of partitions, the deliveries' keys, and
 * an end that counts them (an export without it was cut short).  It needs
 * the right to read the table.  With fence, which needs its ownership, the
 * source is marked moved as the caller's transaction commits: writers wait
 * for the export, and from then on are refused.  The export then reads
 * with a snapshot taken once every writer is out, so that it has every
 * batch the source will ever have.
 *
 * It returns a line a call: called in a query's select list (SELECT
 * export(...)), the rows stream out as the log is read.  The fence is set
 * when the end is written.
 */
Datum
source_writes_export(PG_FUNCTION_ARGS)
{
	FuncCallContext *funcctx;
	ExportState *st;

	if (SRF_IS_FIRSTCALL())
	{
		Oid			relid = PG_ARGISNULL(0) ? InvalidOid : PG_GETARG_OID(0);
		bool		fence = !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
		ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
		MemoryContext old;

		funcctx = SRF_FIRSTCALL_INIT();
		/* a NULL source: no lines, as functions of a NULL table return NULL */
		if (!OidIsValid(relid))
			SRF_RETURN_DONE(funcctx);
		if (rsinfo == NULL || !IsA(rsinfo, ReturnSetInfo) ||
			(rsinfo->allowedModes & SFRM_ValuePerCall) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("set-valued function called in context that cannot accept a set")));
		old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		st = export_begin(fcinfo, relid, fence);
		MemoryContextSwitchTo(old);
		st->econtext = rsinfo->econtext;
		RegisterExprContextCallback(st->econtext, export_shutdown, PointerGetDatum(st));
		funcctx->user_fctx = st;
	}
	funcctx = SRF_PERCALL_SETUP();
	st = funcctx->user_fctx;
	if (st != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(funcctx->multi_call_memory_ctx);
		bool		more = export_next(st);

		MemoryContextSwitchTo(old);
		if (more)
			SRF_RETURN_NEXT(funcctx,
							PointerGetDatum(cstring_to_text_with_len(st->ex.line.data,
																	 st->ex.line.len)));
		UnregisterExprContextCallback(st->econtext, export_shutdown, PointerGetDatum(st));
	}
	SRF_RETURN_DONE(funcctx);
}

/* ---------------------------------------------------------------------
 * import()
 * ---------------------------------------------------------------------
 */

/* an exported batch, by its id in the export */
typedef struct ImportedBatch
{
	int64		exported;		/* hash key */
	int64		batch;			/* its id here */
	int64		ts;
	SwOrigin	origin;
} ImportedBatch;

/* what import() is reading, and writing */
typedef struct Import
{
	Relation	ftrel;
	SwSource	source;
	MemoryContext cxt;			/* the function's */
	Oid			lines_relid;
	const char *lines;			/* the table of lines, as named */
	bool		direct;			/* read lines with a scan of its heap, not SPI */
	Jsonb	   *header;
	Jsonb	   *end;
	int64		version;		/* the header's format version */
	bool		raw;			/* its rows carry raw messages (version 3) */
	bool		keep_raw;		/* ... and the table keeps them (retain_raw) */
	bool		noop_rows;		/* it may have no-op rows (store_row()) */
	int64		since;
	int64		upper;
	bool		ready;			/* the header is read and checked */
	int64		deferred;		/* the first line left to a second pass, or 0 */
	HTAB	   *batches;
	ImportedBatch *last_batch;	/* the last a row named (scan_batch()) */
	int64		folded;			/* the id of rows added before since */
	int64		nrows;
	int64		nprogress;
	int64		ndeliveries;
	int64		line;			/* the line being read, from 1 */
	List	   *parts;			/* the partitions whose progress was read */

	/* writing the rows */
	SwLoader   *loader;
	FmgrInfo   *in;				/* the table's columns' input functions */
	Oid		   *ioparams;
	Datum	   *values;
	bool	   *isnull;
	char	  **texts;			/* a row's columns as text */
	StringInfoData *keys;		/* the columns' names in a row line (version 1) */
	int			ncolumns;		/* the header's columns */
	int		   *order;			/* the table's column of each of the header's */
} Import;

/* the export is not one import() takes: say where */
static void
bad_export(Import *im, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("the export in \"%s\" cannot be imported", im->lines),
			 im->line > 0 ? errdetail("At line %lld: %s", (long long) im->line, detail) :
			 errdetail("%s", detail)));
}

/* a field of a JSON object, or NULL if it has none (or a JSON null) */
static JsonbValue *
field(Jsonb *j, const char *name, JsonbValue *v)
{
	if (!JB_ROOT_IS_OBJECT(j) ||
		getKeyJsonValueFromContainer(&j->root, name, strlen(name), v) == NULL ||
		v->type == jbvNull)
		return NULL;
	return v;
}

/*
 * A JSON value that must be an integer of 64 bits (a fraction is not
 * rounded, nor a number out of range cut); name says which, in errors
 */
static void
value_int(Import *im, JsonbValue *v, const char *name, int64 *value)
{
	char	   *text;
	char	   *end;

	if (v->type != jbvNumeric)
		bad_export(im, psprintf("\"%s\" is not a number.", name));
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	errno = 0;
	*value = strtoi64(text, &end, 10);
	if (errno != 0 || end == text || *end != '\0')
		bad_export(im, psprintf("\"%s\" is %s, not an integer of 64 bits.", name, text));
}

/* the same, for an integer of 32 bits that is not negative */
static void
value_int32(Import *im, JsonbValue *jv, const char *name, int32 *value)
{
	int64		v;

	value_int(im, jv, name, &v);
	if (v < 0 || v > PG_INT32_MAX)
		bad_export(im, psprintf("\"%s\" is " INT64_FORMAT ", out of range.", name, v));
	*value = (int32) v;
}

/* a number field that must be an integer of 64 bits: false if it has none */
static bool
int_field(Import *im, Jsonb *j, const char *name, int64 *value)
{
	JsonbValue	v;

	if (field(j, name, &v) == NULL)
		return false;
	value_int(im, &v, name, value);
	return true;
}

/* the same, for an integer of 32 bits that is not negative */
static bool
int32_field(Import *im, Jsonb *j, const char *name, int32 *value)
{
	JsonbValue	v;

	if (field(j, name, &v) == NULL)
		return false;
	value_int32(im, &v, name, value);
	return true;
}

/* where import() is, for the errors of input functions and indexes */
static void
import_context(void *arg)
{
	Import	   *im = arg;
	int64		line = im->loader && sw_loader_tag(im->loader) ?
		sw_loader_tag(im->loader) : im->line;

	if (line > 0)
		errcontext("line %lld of the export in \"%s\"", (long long) line, im->lines);
}

/* a string field, or NULL */
static char *
text_field(Import *im, Jsonb *j, const char *name)
{
	JsonbValue	v;

	if (field(j, name, &v) == NULL)
		return NULL;
	if (v.type != jbvString)
		bad_export(im, psprintf("\"%s\" is not a string.", name));
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/*
 * How the lines are read.  A plain table (the temporary table of a move)
 * that no row-level security policy applies to is read with a scan of its
 * heap, in its physical order, the same in both passes: the caller needs
 * SELECT on it, or on its first column, which is all that is read.  Any
 * other relation (a view, a foreign table) is read through SPI, with the
 * checks of a query, and twice (see read_first()).
 */
static void
choose_reader(Import *im)
{
	Relation	rel = table_open(im->lines_relid, AccessShareLock);

	/* a table with children is read with them, by a query */
	im->direct = rel->rd_rel->relkind == RELKIND_RELATION &&
		rel->rd_rel->relam == HEAP_TABLE_AM_OID &&
		!rel->rd_rel->relhassubclass &&
		check_enable_rls(im->lines_relid, InvalidOid, true) == RLS_NONE;
	if (im->direct)
	{
		TupleDesc	desc = RelationGetDescr(rel);
		AttrNumber	first = InvalidAttrNumber;

		/* as a query naming it would: the schema's USAGE, then SELECT */
		if (pg_namespace_aclcheck(RelationGetNamespace(rel), GetUserId(),
								  ACL_USAGE) != ACLCHECK_OK)
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_SCHEMA,
						   get_namespace_name(RelationGetNamespace(rel)));
		for (int i = 0; i < desc->natts && first == InvalidAttrNumber; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				first = i + 1;
		if (pg_class_aclcheck(im->lines_relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK &&
			(first == InvalidAttrNumber ||
			 pg_attribute_aclcheck(im->lines_relid, first, GetUserId(), ACL_SELECT) != ACLCHECK_OK))
			aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, RelationGetRelationName(rel));
	}
	table_close(rel, AccessShareLock);
	if (!im->direct)
		im->deferred = 1;		/* its order may change between passes */
}

/*
 * Read the lines: run fn on each, in the order the table gives them, with
 * its number in im->line
 */
static void
read_lines(Import *im, void (*fn) (Import *im, text *line))
{
	MemoryContext line_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "source_writes import line",
												   ALLOCSET_DEFAULT_SIZES);
	MemoryContext old;

	im->line = 0;
	if (im->direct)
	{
		Relation	rel = table_open(im->lines_relid, AccessShareLock);
		TupleDesc	desc = RelationGetDescr(rel);
		AttrNumber	first = InvalidAttrNumber;
		TableScanDesc scan;
		HeapTuple	tuple;

		for (int i = 0; i < desc->natts && first == InvalidAttrNumber; i++)
			if (!TupleDescAttr(desc, i)->attisdropped)
				first = i + 1;
		if (first == InvalidAttrNumber ||
			getBaseType(TupleDescAttr(desc, first - 1)->atttypid) != TEXTOID)
			bad_export(im, "The lines must be the table's first column, of type text.");
		/* no synchronized scan: each pass reads from the first block */
		scan = table_beginscan_strat(rel, GetActiveSnapshot(), 0, NULL, true, false);
		while ((tuple = heap_getnext(scan, ForwardScanDirection)) != NULL)
		{
			bool		isnull;
			Datum		d = heap_getattr(tuple, first, desc, &isnull);

			CHECK_FOR_INTERRUPTS();
			im->line++;
			if (isnull)
				continue;
			old = MemoryContextSwitchTo(line_cxt);
			fn(im, DatumGetTextPP(d));
			MemoryContextSwitchTo(old);
			MemoryContextReset(line_cxt);
		}
		table_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	else
	{
		Portal		portal;

		if (SPI_connect() != SPI_OK_CONNECT)
			elog(ERROR, "SPI_connect failed");
		portal = SPI_cursor_open_with_args(NULL, psprintf("SELECT * FROM %s", im->lines),
										   0, NULL, NULL, NULL, true, 0);
		for (;;)
		{
			SPI_cursor_fetch(portal, true, 1000);
			if (SPI_processed == 0)
				break;
			if (SPI_tuptable->tupdesc->natts < 1 ||
				getBaseType(TupleDescAttr(SPI_tuptable->tupdesc, 0)->atttypid) != TEXTOID)
				bad_export(im, "The lines must be the table's first column, of type text.");
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				bool		isnull;
				Datum		d = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1,
											  &isnull);

				CHECK_FOR_INTERRUPTS();
				im->line++;
				if (isnull)
					continue;
				old = MemoryContextSwitchTo(line_cxt);
				fn(im, DatumGetTextPP(d));
				MemoryContextSwitchTo(old);
				MemoryContextReset(line_cxt);
			}
			SPI_freetuptable(SPI_tuptable);
		}
		SPI_cursor_close(portal);
		SPI_finish();
	}
	im->line = 0;
	MemoryContextDelete(line_cxt);
}

/* a line as JSON: an object, or an array (rows of format version 2 or 3) */
static Jsonb *
line_jsonb(Import *im, text *line)
{
	Jsonb	   *j = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
													   CStringGetDatum(text_to_cstring(line))));

	if (JB_ROOT_IS_SCALAR(j) || (!JB_ROOT_IS_OBJECT(j) && !JB_ROOT_IS_ARRAY(j)))
		bad_export(im, "A line is a JSON object, or an array for a row.");
	return j;
}

/* is a line read as jsonb a row? */
static bool
is_row(Jsonb *j)
{
	JsonbValue	v;

	return JB_ROOT_IS_ARRAY(j) || field(j, "row", &v) != NULL;
}

/*
 * Does a line begin as export() begins a row, of format version 2 (an
 * array) or 1?  Such lines are read by read_row_fast(), or left alone
 * until a row may be read; any other line is read as jsonb, rows too.
 */
static bool
row_prefix(text *line)
{
	static const char prefix[] = "{\"row\": true, ";

	return (VARSIZE_ANY_EXHDR(line) > 0 && *VARDATA_ANY(line) == '[') ||
		(VARSIZE_ANY_EXHDR(line) > sizeof(prefix) - 1 &&
		 memcmp(VARDATA_ANY(line), prefix, sizeof(prefix) - 1) == 0);
}

/*
 * The export's columns must be the table's, by name and type, each once;
 * im->order gets the table's column of each
 */
static void
check_columns(Import *im)
{
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	JsonbValue	v;
	JsonbIterator *it;
	JsonbIteratorToken tok;
	int			n = 0;
	int			live = 0;
	bool	   *seen = palloc0(sizeof(bool) * Max(desc->natts, 1));

	if (field(im->header, "columns", &v) == NULL || v.type != jbvBinary)
		bad_export(im, "The header has no \"columns\".");
	for (int i = 0; i < desc->natts; i++)
		live += !TupleDescAttr(desc, i)->attisdropped;
	im->order = palloc0(sizeof(int) * Max(live, 1));
	it = JsonbIteratorInit(v.val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		Jsonb	   *pair;
		JsonbValue	name;
		JsonbValue	type;
		char	   *colname;
		AttrNumber	attnum;
		Form_pg_attribute att;

		if (tok != WJB_ELEM)
			continue;
		if (v.type != jbvBinary)
			bad_export(im, "A column of the header is not a [name, type] pair.");
		pair = JsonbValueToJsonb(&v);
		if (!JB_ROOT_IS_ARRAY(pair) || JB_ROOT_COUNT(pair) != 2 ||
			getIthJsonbValueFromContainer(&pair->root, 0)->type != jbvString ||
			getIthJsonbValueFromContainer(&pair->root, 1)->type != jbvString)
			bad_export(im, "A column of the header is not a [name, type] pair.");
		name = *getIthJsonbValueFromContainer(&pair->root, 0);
		type = *getIthJsonbValueFromContainer(&pair->root, 1);
		colname = pnstrdup(name.val.string.val, name.val.string.len);
		attnum = get_attnum(RelationGetRelid(im->ftrel), colname);
		if (attnum <= 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("the export has a column \"%s\" that source table \"%s\" has not",
							colname, RelationGetRelationName(im->ftrel)),
					 errhint("Import into a table of the same columns as the one exported.")));
		att = TupleDescAttr(desc, attnum - 1);
		if (strlen(format_type_with_typemod(att->atttypid, att->atttypmod)) != type.val.string.len ||
			strncmp(format_type_with_typemod(att->atttypid, att->atttypmod),
					type.val.string.val, type.val.string.len) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of the export is of type %s, but of type %s in source table \"%s\"",
							colname, pnstrdup(type.val.string.val, type.val.string.len),
							format_type_with_typemod(att->atttypid, att->atttypmod),
							RelationGetRelationName(im->ftrel)),
					 errhint("Import into a table of the same columns as the one exported.")));
		if (seen[attnum - 1])
			bad_export(im, psprintf("The header has column \"%s\" twice.", colname));
		seen[attnum - 1] = true;
		if (n < live)
			im->order[n] = attnum - 1;
		n++;
	}
	if (n != live)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("source table \"%s\" has columns that the export has not",
						RelationGetRelationName(im->ftrel)),
				 errhint("Import into a table of the same columns as the one exported.")));
	im->ncolumns = n;
}

/*
 * The header, once read: what the export is (its format and version, its
 * kind, its columns, its range) must be what the table takes.  Then the
 * rows can be written.
 */
static void
check_header(Import *im)
{
	char	   *kind;
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	MemoryContext old = MemoryContextSwitchTo(im->cxt);

	if ((kind = text_field(im, im->header, "format")) == NULL ||
		strcmp(kind, SW_EXPORT_FORMAT) != 0)
		bad_export(im, "Its header is not that of an export of source_writes.");
	if (!int_field(im, im->header, "version", &im->version) ||
		im->version > SW_EXPORT_VERSION || im->version < 1)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the export in \"%s\" is of format version " INT64_FORMAT,
						im->lines, im->version),
				 errdetail("This version of source_writes imports format versions 1 to %d.",
						   SW_EXPORT_VERSION),
				 errhint("Import it with the version of source_writes that exported it, or a later one.")));

	/*
	 * Rows carry their raw messages from version 3 on, where the header
	 * says so; a table keeps them where its own option says so (a table
	 * without retain_raw leaves them behind, as its worker would)
	 */
	if (im->version >= 3)
	{
		JsonbValue	v;

		if (field(im->header, "raw", &v) == NULL || v.type != jbvBool)
			bad_export(im, "Its header has no \"raw\" of true or false.");
		im->raw = v.val.boolean;
	}
	im->keep_raw = im->raw && sw_source_table(im->ftrel)->retain_raw;

	/*
	 * A row that one batch added and retracted is the trace of a tombstone
	 * that found no row (writer.c): only a stream's batch in a source with a
	 * key makes them, and only exports of version 3 on have them
	 */
	im->noop_rows = im->version >= 3 && sw_source_table(im->ftrel)->key != NIL;
	kind = text_field(im, im->header, "kind");
	if (kind == NULL ||
		strcmp(kind, im->source.kind == SW_KIND_WEBHOOK ? "webhook" : "kafka") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("the export is of a %s source, and \"%s\" is a %s source",
						kind ? kind : "unknown", RelationGetRelationName(im->ftrel),
						im->source.kind == SW_KIND_WEBHOOK ? "webhook" : "kafka")));
	check_columns(im);
	if (!int_field(im, im->header, "since", &im->since) ||
		!int_field(im, im->header, "upper", &im->upper))
		bad_export(im, "Its header has no \"since\" or no \"upper\".");

	/* what writing the rows takes */
	im->in = palloc0(sizeof(FmgrInfo) * Max(desc->natts, 1));
	im->ioparams = palloc0(sizeof(Oid) * Max(desc->natts, 1));
	im->values = palloc(sizeof(Datum) * Max(desc->natts, 1));
	im->isnull = palloc(sizeof(bool) * Max(desc->natts, 1));
	im->texts = palloc0(sizeof(char *) * Max(desc->natts, 1));
	im->keys = column_keys(desc);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Oid			func;

		if (att->attisdropped)
			continue;
		getTypeInputInfo(att->atttypid, &func, &im->ioparams[i]);
		fmgr_info_cxt(func, &im->in[i], im->cxt);
	}
	im->folded = sw_catalog_new_batch_id();
	im->loader = sw_loader_open(im->ftrel, &im->source);
	im->ready = true;
	MemoryContextSwitchTo(old);
}

/* a batch, which gets an id here */
static void
read_batch(Import *im, Jsonb *j, int64 id)
{
	int64		ts;
	char	   *origin;
	char	   *role;
	SwBatch		batch = {0};
	SwBlockRanges unknown[2];
	ImportedBatch *ib;
	bool		found;

	if (!int_field(im, j, "ts", &ts) || (origin = text_field(im, j, "origin")) == NULL)
		bad_export(im, "A batch has a \"ts\" and an \"origin\".");
	if (im->ready && ts >= im->upper)
		bad_export(im, psprintf("A batch has a \"ts\" of " INT64_FORMAT ", not before its \"upper\", " INT64_FORMAT ".",
								ts, im->upper));
	role = text_field(im, j, "role");
	ib = hash_search(im->batches, &id, HASH_ENTER, &found);
	if (found)
		bad_export(im, psprintf("Batch " INT64_FORMAT " is there twice.", id));
	ib->batch = sw_catalog_new_batch_id();
	ib->ts = ts;
	batch.batch = ib->batch;
	batch.ts = ts;
	batch.origin = ib->origin = sw_origin_of(origin);
	namestrcpy(&batch.role, role ? role : "");
	/* where its rows are is not known: readers read the whole table */
	unknown[0].n = unknown[1].n = -1;
	sw_catalog_insert_batch(RelationGetRelid(im->ftrel), &batch, 0, NULL, unknown);
}

/* a row's batch, by its id in the export, or NULL */
static ImportedBatch *
imported_batch(Import *im, JsonbValue *v, const char *name)
{
	int64		id;
	ImportedBatch *ib;

	if (v == NULL || v->type == jbvNull)
		return NULL;
	value_int(im, v, name, &id);
	ib = hash_search(im->batches, &id, HASH_FIND, NULL);
	if (ib == NULL)
		bad_export(im, psprintf("A row names batch " INT64_FORMAT ", which it has not.", id));
	return ib;
}

/* a partition's progress (Kafka), or a delivery's key (webhooks) */
static void
read_other(Import *im, Jsonb *j)
{
	JsonbValue	v;

	if (field(j, "progress", &v))
	{
		SwProgress	p = {0};
		MemoryContext old;

		if (im->source.kind != SW_KIND_KAFKA)
			bad_export(im, "Only Kafka sources have offsets.");
		if (!int32_field(im, j, "progress", &p.part) ||
			!int_field(im, j, "next_offset", &p.next_offset) ||
			(p.topic = text_field(im, j, "topic")) == NULL)
			bad_export(im, "A partition's progress has a \"next_offset\" and a \"topic\".");
		if (list_member_int(im->parts, p.part))
			bad_export(im, psprintf("Partition %d is there twice.", p.part));
		old = MemoryContextSwitchTo(im->cxt);
		im->parts = lappend_int(im->parts, p.part);
		MemoryContextSwitchTo(old);
		p.cluster_id = text_field(im, j, "cluster_id");
		(void) int_field(im, j, "lost", &p.lost);
		p.stopped = text_field(im, j, "stopped");
		sw_catalog_start_progress(RelationGetRelid(im->ftrel), p.part, p.next_offset,
								  p.topic, p.cluster_id);
		(void) sw_catalog_set_progress(RelationGetRelid(im->ftrel), &p);
		im->nprogress++;
		return;
	}
	if (field(j, "delivery", &v))
	{
		char	   *key = text_field(im, j, "delivery");
		char	   *hex = text_field(im, j, "body_sha256");
		uint8		hash[PG_SHA256_DIGEST_LENGTH];
		int64		ts;
		int32		rows;

		if (im->source.kind != SW_KIND_WEBHOOK)
			bad_export(im, "Only webhook sources keep deliveries' keys.");
		if (!int_field(im, j, "ts", &ts) || !int32_field(im, j, "rows", &rows) ||
			hex == NULL || strlen(hex) != 2 * PG_SHA256_DIGEST_LENGTH ||
			hex_decode(hex, 2 * PG_SHA256_DIGEST_LENGTH, (char *) hash) != PG_SHA256_DIGEST_LENGTH)
			bad_export(im, "A delivery has a \"ts\", \"rows\" and a \"body_sha256\" of 64 hex digits.");
		sw_delivery_insert(RelationGetRelid(im->ftrel), key, ts, hash, rows);
		im->ndeliveries++;
		return;
	}
	bad_export(im, "A line is none of an export's: a header, a batch, rows, a partition's progress, a delivery's key or the end.");
}

/* a row line, as read from jsonb or by read_row_fast() */
typedef struct RowLine
{
	ImportedBatch *added;		/* NULL: before since (folded) */
	ImportedBatch *retracted;	/* NULL: current */
	bool		has_part;
	int32		part;
	bool		has_pos;
	int64		pos;
	char	   *delivery;
	char	  **texts;			/* each column's text, NULL for null */
	Datum		raw[SW_NUM_RAW];	/* its raw message, in an export that */
	bool		raw_null[SW_NUM_RAW];	/* carries them (by SwRawColumn) */
} RowLine;

/* the fields of a row's raw message, by SwRawColumn, in errors */
static const char *const raw_fields[SW_NUM_RAW] = {
	"key", "value", "timestamp", "header_names", "header_values"
};

/*
 * A bytea of hex digits, two a byte (either case), into *out, in the
 * current memory context: false if they are not
 */
static bool
hex_bytea(const char *hex, size_t len, Datum *out)
{
	bytea	   *b;

	if (len % 2 != 0)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isxdigit((unsigned char) hex[i]))
			return false;
	b = palloc(VARHDRSZ + len / 2);
	SET_VARSIZE(b, VARHDRSZ + hex_decode(hex, len, VARDATA(b)));
	*out = PointerGetDatum(b);
	return true;
}

/*
 * The array of a raw message's header names (text[]) or values (bytea[])
 * from its elements, in the current memory context
 */
static Datum
raw_array(Datum *elems, bool *nulls, int n, bool bytes)
{
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Oid			type = bytes ? BYTEAOID : TEXTOID;

	if (n == 0)
		return PointerGetDatum(construct_empty_array(type));
	return PointerGetDatum(construct_md_array(elems, nulls, 1, dims, lbs, type, -1, false,
											  TYPALIGN_INT));
}

/* how many elements an array of raw_array() has (an empty one, no dims) */
static int
raw_array_length(Datum array)
{
	ArrayType  *a = DatumGetArrayTypeP(array);

	return ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a));
}

/*
 * The raw message of a row must be one that a source of the table's kind
 * keeps: a webhook source's, a piece of a body ("value") only; a Kafka
 * source's, with its "timestamp" (-1: the message had none), which a row
 * that keeps none has not, and with as many header names as values.  A
 * row that a person's batch added keeps none (the writer gives a person's
 * rows none, UPDATEs included), as raw_messages() says.  Is there one?
 */
static bool
check_raw(Import *im, RowLine *r)
{
	SwRawColumn marker = im->source.kind == SW_KIND_WEBHOOK ? SW_RAW_VALUE : SW_RAW_TIMESTAMP;
	bool		kept = !r->raw_null[marker];

	for (int i = 0; i < SW_NUM_RAW; i++)
	{
		if (r->raw_null[i])
			continue;
		if (!sw_raw_column_of(im->source.kind, i))
			bad_export(im, psprintf("A row of a webhook source keeps the \"value\" of its message only, and this one has a \"%s\".",
									raw_fields[i]));
		if (!kept)
			bad_export(im, "A row keeps a message's key, value or headers without its \"timestamp\".");
	}
	if (kept && r->added && r->added->origin == SW_ORIGIN_USER)
		bad_export(im, "A row added by a batch of origin \"user\" keeps a message, and a person's rows keep none.");
	if (kept && !r->raw_null[SW_RAW_TIMESTAMP] && DatumGetInt64(r->raw[SW_RAW_TIMESTAMP]) < -1)
		bad_export(im, psprintf("The \"timestamp\" of a row's message is " INT64_FORMAT ", and not a time in ms since 1970, or -1 for none.",
								DatumGetInt64(r->raw[SW_RAW_TIMESTAMP])));
	if (r->raw_null[SW_RAW_HEADER_NAMES] != r->raw_null[SW_RAW_HEADER_VALUES] ||
		(!r->raw_null[SW_RAW_HEADER_NAMES] &&
		 raw_array_length(r->raw[SW_RAW_HEADER_NAMES]) !=
		 raw_array_length(r->raw[SW_RAW_HEADER_VALUES])))
		bad_export(im, "A row's message has as many header names as header values.");
	return kept;
}

/*
 * A row version: into the current heap or the history, with its batches
 * (by their ids here), where it came from, its columns, and its raw
 * message where the export carries it and the table keeps it.
 */
static void
store_row(Import *im, RowLine *r)
{
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	SwPosition	pos = {0};

	/* but a tombstone's no-op row, which its (stream's) batch added and retracted */
	if (r->added && r->retracted && r->retracted->ts <= r->added->ts &&
		!(r->retracted == r->added && im->noop_rows &&
		  (r->added->origin == SW_ORIGIN_KAFKA || r->added->origin == SW_ORIGIN_WEBHOOK)))
		bad_export(im, "A row is retracted by a batch that is not later than the one that added it.");
	if (r->has_part != r->has_pos)
		bad_export(im, "A row has a \"part\" without a \"pos\", or a \"pos\" without a \"part\".");
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		im->isnull[i] = true;
		im->values[i] = (Datum) 0;

		/*
		 * A NULL of a history row stays NULL, unread, as a version copies it:
		 * the past keeps what it had, where the column's domain may refuse
		 * NULL now (a column added later, which the history rows do not
		 * have; the columns of a no-op row but its key).
		 */
		if (att->attisdropped || (r->retracted && r->texts[i] == NULL))
			continue;
		im->values[i] = InputFunctionCall(&im->in[i], r->texts[i], im->ioparams[i],
										  att->atttypmod);
		im->isnull[i] = r->texts[i] == NULL;
	}
	pos.known = r->has_part;
	pos.part = r->part;
	pos.pos = r->pos;
	pos.delivery = r->delivery;
	if (im->raw && check_raw(im, r) && im->keep_raw)
	{
		pos.raw_kept = true;
		memcpy(pos.raw, r->raw, sizeof(pos.raw));
		memcpy(pos.raw_null, r->raw_null, sizeof(pos.raw_null));
	}
	sw_loader_add(im->loader, im->values, im->isnull,
				  r->added ? r->added->batch : im->folded,
				  r->retracted ? r->retracted->batch : 0, &pos, im->line);
	im->nrows++;
}

/* a row line of format version 1 read as jsonb: any order of fields */
static void
read_row_object(Import *im, Jsonb *j)
{
	JsonbValue	v;
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	RowLine		r = {0};
	JsonbContainer *data;

	r.texts = im->texts;
	r.added = imported_batch(im, field(j, "added", &v), "added");
	r.retracted = imported_batch(im, field(j, "retracted", &v), "retracted");
	if (field(j, "data", &v) == NULL || v.type != jbvBinary ||
		!JsonContainerIsObject(v.val.binary.data))
		bad_export(im, "A row has its columns in an object \"data\".");
	data = v.val.binary.data;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		const char *name = NameStr(att->attname);

		r.texts[i] = NULL;
		if (att->attisdropped)
			continue;
		if (getKeyJsonValueFromContainer(data, name, strlen(name), &v) == NULL)
			bad_export(im, psprintf("A row has no column \"%s\".", name));
		if (v.type != jbvNull)
		{
			if (v.type != jbvString)
				bad_export(im, psprintf("Column \"%s\" of a row is not a string.", name));
			r.texts[i] = pnstrdup(v.val.string.val, v.val.string.len);
		}
	}
	r.has_part = int32_field(im, j, "part", &r.part);
	r.has_pos = int_field(im, j, "pos", &r.pos);
	r.delivery = text_field(im, j, "delivery");
	store_row(im, &r);
}

/*
 * A field of a row's raw message read as jsonb (by SwRawColumn) into r,
 * with clear errors
 */
static void
read_raw_field(Import *im, JsonbValue *v, SwRawColumn i, RowLine *r)
{
	r->raw[i] = (Datum) 0;
	r->raw_null[i] = v->type == jbvNull;
	if (r->raw_null[i])
		return;
	if (i == SW_RAW_TIMESTAMP)
	{
		int64		ts;

		value_int(im, v, "timestamp", &ts);
		r->raw[i] = Int64GetDatum(ts);
	}
	else if (i == SW_RAW_KEY || i == SW_RAW_VALUE)
	{
		if (v->type != jbvString ||
			!hex_bytea(v->val.string.val, v->val.string.len, &r->raw[i]))
			bad_export(im, psprintf("The \"%s\" of a row's message is not a string of hex digits.",
									raw_fields[i]));
	}
	else
	{
		JsonbContainer *c;
		bool		bytes = i == SW_RAW_HEADER_VALUES;
		int			n;
		Datum	   *elems;
		bool	   *nulls;

		if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
			bad_export(im, psprintf("The \"%s\" of a row's message is not an array.",
									raw_fields[i]));
		c = v->val.binary.data;
		n = JsonContainerSize(c);
		elems = palloc0(sizeof(Datum) * Max(n, 1));
		nulls = palloc0(sizeof(bool) * Max(n, 1));
		for (int k = 0; k < n; k++)
		{
			JsonbValue *e = getIthJsonbValueFromContainer(c, k);

			nulls[k] = e->type == jbvNull;
			if (nulls[k] && bytes)
				continue;
			if (e->type != jbvString ||
				(bytes && !hex_bytea(e->val.string.val, e->val.string.len, &elems[k])))
				bad_export(im, psprintf(bytes ? "The \"%s\" of a row's message are not strings of hex digits, or nulls." :
										"The \"%s\" of a row's message are not strings.",
										raw_fields[i]));
			if (!bytes)
				elems[k] = PointerGetDatum(cstring_to_text_with_len(e->val.string.val,
																	e->val.string.len));
		}
		r->raw[i] = raw_array(elems, nulls, n, bytes);
	}
}

/*
 * A row of format version 2 or 3 read as jsonb: [added, retracted, part,
 * pos, delivery, each column in the header's order, and in an export that
 * carries raw messages, the five fields of the row's], with clear errors
 */
static void
read_row_array(Import *im, JsonbContainer *c)
{
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	RowLine		r = {0};
	JsonbValue *v;
	int			n = JsonContainerSize(c);
	int			want = 5 + im->ncolumns + (im->raw ? SW_NUM_RAW : 0);

	if (n != want)
		bad_export(im, psprintf(im->raw ?
								"A row has %d values, and not %d: its batches, \"part\", \"pos\", \"delivery\", a value for each of the %d columns and the 5 fields of its raw message." :
								"A row has %d values, and not %d: its batches, \"part\", \"pos\", \"delivery\" and a value for each of the %d columns.",
								n, want, im->ncolumns));
	r.texts = im->texts;
	r.added = imported_batch(im, getIthJsonbValueFromContainer(c, 0), "added");
	r.retracted = imported_batch(im, getIthJsonbValueFromContainer(c, 1), "retracted");
	v = getIthJsonbValueFromContainer(c, 2);
	if ((r.has_part = v->type != jbvNull))
		value_int32(im, v, "part", &r.part);
	v = getIthJsonbValueFromContainer(c, 3);
	if ((r.has_pos = v->type != jbvNull))
		value_int(im, v, "pos", &r.pos);
	v = getIthJsonbValueFromContainer(c, 4);
	if (v->type != jbvNull)
	{
		if (v->type != jbvString)
			bad_export(im, "\"delivery\" is not a string.");
		r.delivery = pnstrdup(v->val.string.val, v->val.string.len);
	}
	for (int i = 0; i < desc->natts; i++)
		r.texts[i] = NULL;
	for (int k = 0; k < im->ncolumns; k++)
	{
		int			i = im->order[k];

		v = getIthJsonbValueFromContainer(c, 5 + k);
		if (v->type == jbvNull)
			continue;
		if (v->type != jbvString)
			bad_export(im, psprintf("Column \"%s\" of a row is not a string.",
									NameStr(TupleDescAttr(desc, i)->attname)));
		r.texts[i] = pnstrdup(v->val.string.val, v->val.string.len);
	}
	if (im->raw)
		for (int i = 0; i < SW_NUM_RAW; i++)
			read_raw_field(im, getIthJsonbValueFromContainer(c, 5 + im->ncolumns + i), i, &r);
	store_row(im, &r);
}

/*
 * A row line read as jsonb, of the export's format version: an array of
 * rows in version 2, a row object in version 1
 */
static void
read_row(Import *im, Jsonb *j)
{
	if (JB_ROOT_IS_ARRAY(j))
	{
		int			n = JB_ROOT_COUNT(j);

		if (im->version < 2)
			bad_export(im, "A row of format version 1 is an object.");
		for (int k = 0; k < n; k++)
		{
			JsonbValue *v = getIthJsonbValueFromContainer(&j->root, k);

			if (v->type != jbvBinary || !JsonContainerIsArray(v->val.binary.data))
				bad_export(im, psprintf("A line of rows of format version " INT64_FORMAT " is an array of arrays.",
										im->version));
			read_row_array(im, v->val.binary.data);
		}
	}
	else
	{
		if (im->version >= 2)
			bad_export(im, psprintf("A row of format version " INT64_FORMAT " is an array, in an array of rows.",
									im->version));
		read_row_object(im, j);
	}
}

/* where read_row_fast() is in a line */
typedef struct LineScan
{
	char	   *p;
	char	   *end;
} LineScan;

/* the line goes on with these bytes: skip them */
static bool
scan_literal(LineScan *sc, const char *lit, int len)
{
	if (sc->end - sc->p < len || memcmp(sc->p, lit, len) != 0)
		return false;
	sc->p += len;
	return true;
}

#define SCAN_LITERAL(sc, lit) scan_literal((sc), (lit), sizeof(lit) - 1)

/* null, or a plain integer of 64 bits (*isnull says which) */
static bool
scan_int(LineScan *sc, int64 *value, bool *isnull)
{
	bool		neg = false;
	uint64		v = 0;
	char	   *start;

	*isnull = SCAN_LITERAL(sc, "null");
	if (*isnull)
		return true;
	if (sc->p < sc->end && *sc->p == '-')
	{
		neg = true;
		sc->p++;
	}
	start = sc->p;
	while (sc->p < sc->end && *sc->p >= '0' && *sc->p <= '9')
	{
		if (sc->p - start >= 18)
			return false;		/* more than export() writes: jsonb's */
		v = v * 10 + (*sc->p++ - '0');
	}
	if (sc->p == start || (*start == '0' && sc->p - start > 1))
		return false;
	*value = neg ? -(int64) v : (int64) v;
	return true;
}

/*
 * null (*text NULL), or a JSON string, unescaped into line memory.  False
 * for what escape_json() writes rarely (\u: control characters), and for
 * what it never writes (raw control characters): jsonb reads those.
 */
static bool
scan_string(LineScan *sc, char **text)
{
	char	   *start;
	char	   *out;

	*text = NULL;
	if (SCAN_LITERAL(sc, "null"))
		return true;
	if (sc->p >= sc->end || *sc->p != '"')
		return false;
	start = ++sc->p;
	while (sc->p < sc->end && *sc->p != '"' && *sc->p != '\\' &&
		   (unsigned char) *sc->p >= 0x20)
		sc->p++;
	if (sc->p < sc->end && *sc->p == '"')
	{
		*text = pnstrdup(start, sc->p - start);
		sc->p++;
		return true;
	}

	/* escapes: copy what came before, then go on a byte at a time */
	*text = out = palloc(sc->end - start + 1);
	memcpy(out, start, sc->p - start);
	out += sc->p - start;
	while (sc->p < sc->end && *sc->p != '"')
	{
		char		c = *sc->p++;

		if ((unsigned char) c < 0x20)
			return false;
		if (c == '\\')
		{
			if (sc->p >= sc->end)
				return false;
			switch (*sc->p++)
			{
				case '"':
					c = '"';
					break;
				case '\\':
					c = '\\';
					break;
				case '/':
					c = '/';
					break;
				case 'b':
					c = '\b';
					break;
				case 'f':
					c = '\f';
					break;
				case 'n':
					c = '\n';
					break;
				case 'r':
					c = '\r';
					break;
				case 't':
					c = '\t';
					break;
				default:
					return false;
			}
		}
		*out++ = c;
	}
	if (sc->p >= sc->end)
		return false;
	*out = '\0';
	sc->p++;
	return true;
}

/* a batch id of a row line (NULL: null), which must be in the export */
static bool
scan_batch(Import *im, LineScan *sc, ImportedBatch **ib)
{
	int64		id;
	bool		isnull;

	*ib = NULL;
	if (!scan_int(sc, &id, &isnull))
		return false;
	if (isnull)
		return true;
	/* rows come in runs of one batch: look up a new one only */
	if (im->last_batch == NULL || im->last_batch->exported != id)
		im->last_batch = hash_search(im->batches, &id, HASH_FIND, NULL);
	*ib = im->last_batch;
	return *ib != NULL;
}

/* a string of hex digits as a bytea, into line memory */
static bool
scan_hex(LineScan *sc, Datum *out)
{
	char	   *start;

	if (!SCAN_LITERAL(sc, "\""))
		return false;
	start = sc->p;
	while (sc->p < sc->end && *sc->p != '"')
		sc->p++;
	if (sc->p >= sc->end || !hex_bytea(start, sc->p - start, out))
		return false;
	sc->p++;
	return true;
}

/*
 * The header names (strings) or values (hex digits, or nulls) of a raw
 * message, as an array into line memory
 */
static bool
scan_raw_array(LineScan *sc, bool bytes, Datum *out)
{
	int			n = 0;
	int			size = 8;
	Datum	   *elems = palloc(sizeof(Datum) * size);
	bool	   *nulls = palloc(sizeof(bool) * size);

	if (!SCAN_LITERAL(sc, "["))
		return false;
	if (!SCAN_LITERAL(sc, "]"))
	{
		do
		{
			if (n == size)
			{
				size *= 2;
				elems = repalloc(elems, sizeof(Datum) * size);
				nulls = repalloc(nulls, sizeof(bool) * size);
			}
			elems[n] = (Datum) 0;
			nulls[n] = bytes && SCAN_LITERAL(sc, "null");
			if (!nulls[n])
			{
				char	   *name;

				if (bytes ? !scan_hex(sc, &elems[n]) : (!scan_string(sc, &name) || name == NULL))
					return false;
				if (!bytes)
					elems[n] = CStringGetTextDatum(name);
			}
			n++;
		} while (SCAN_LITERAL(sc, ","));
		if (!SCAN_LITERAL(sc, "]"))
			return false;
	}
	*out = raw_array(elems, nulls, n, bytes);
	return true;
}

/* the five fields of a row's raw message, each after a comma, into r */
static bool
scan_raw(LineScan *sc, RowLine *r)
{
	for (int i = 0; i < SW_NUM_RAW; i++)
	{
		bool		isnull;
		int64		ts;

		if (!SCAN_LITERAL(sc, ","))
			return false;
		r->raw[i] = (Datum) 0;
		r->raw_null[i] = SCAN_LITERAL(sc, "null");
		if (r->raw_null[i])
			continue;
		if (i == SW_RAW_TIMESTAMP)
		{
			if (!scan_int(sc, &ts, &isnull))
				return false;
			r->raw[i] = Int64GetDatum(ts);
		}
		else if (i == SW_RAW_KEY || i == SW_RAW_VALUE)
		{
			if (!scan_hex(sc, &r->raw[i]))
				return false;
		}
		else if (!scan_raw_array(sc, i == SW_RAW_HEADER_VALUES, &r->raw[i]))
			return false;
	}
	return true;
}

/*
 * What a row has before its values, in either format: the batches that
 * added and retracted it, its partition, position and delivery, each
 * after the bytes that lead[] gives for it, into r
 */
static bool
scan_row_head(Import *im, LineScan *sc, RowLine *r, const char *const lead[5])
{
	int64		part;
	bool		isnull;

	if (!scan_literal(sc, lead[0], strlen(lead[0])) ||
		!scan_batch(im, sc, &r->added) ||
		!scan_literal(sc, lead[1], strlen(lead[1])) ||
		!scan_batch(im, sc, &r->retracted) ||
		!scan_literal(sc, lead[2], strlen(lead[2])) ||
		!scan_int(sc, &part, &isnull) ||
		(!isnull && (part < 0 || part > PG_INT32_MAX)))
		return false;
	r->has_part = !isnull;
	r->part = (int32) part;
	if (!scan_literal(sc, lead[3], strlen(lead[3])) || !scan_int(sc, &r->pos, &isnull))
		return false;
	r->has_pos = !isnull;
	return scan_literal(sc, lead[4], strlen(lead[4])) && scan_string(sc, &r->delivery);
}

/*
 * A row of a line of format version 2 or 3 exactly as export() writes it,
 * into r (its texts in line memory)
 */
static bool
scan_row_array(Import *im, LineScan *sc, RowLine *r)
{
	static const char *const lead[5] = {"[", ",", ",", ",", ","};

	if (!scan_row_head(im, sc, r, lead))
		return false;
	for (int k = 0; k < im->ncolumns; k++)
		if (!SCAN_LITERAL(sc, ",") || !scan_string(sc, &r->texts[im->order[k]]))
			return false;
	if (im->raw && !scan_raw(sc, r))
		return false;
	return SCAN_LITERAL(sc, "]");
}

/*
 * A row of format version 1 exactly as export() wrote it (its fields in
 * its order, its columns in the table's), into r
 */
static bool
scan_row_object(Import *im, LineScan *sc, RowLine *r)
{
	static const char *const lead[5] = {
		"{\"row\": true, \"added\": ", ", \"retracted\": ", ", \"part\": ",
		", \"pos\": ", ", \"delivery\": "
	};
	TupleDesc	desc = RelationGetDescr(im->ftrel);

	if (!scan_row_head(im, sc, r, lead) || !SCAN_LITERAL(sc, ", \"data\": {"))
		return false;
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped)
			continue;
		if (!scan_literal(sc, im->keys[i].data, im->keys[i].len) ||
			!scan_string(sc, &r->texts[i]))
			return false;
	}
	return SCAN_LITERAL(sc, "}}");
}

/*
 * A line of rows exactly as export() writes it, of the header's format
 * version (from version 2 an array of rows, each an array; in version 1 a
 * row object), read without making jsonb: the bulk of an import.  The
 * whole line is read before any of its rows is written: false, having
 * written nothing, for any other line (or one that names a batch not read
 * yet), which read_row() reads as jsonb, or says what is wrong with.
 */
static bool
read_row_fast(Import *im, text *line)
{
	TupleDesc	desc = RelationGetDescr(im->ftrel);
	LineScan	sc;
	RowLine    *rows;
	int			n = 0;
	int			size = 32;
	bool		array;

	sc.p = VARDATA_ANY(line);
	sc.end = sc.p + VARSIZE_ANY_EXHDR(line);
	array = sc.p < sc.end && *sc.p == '[';
	if (array != (im->version >= 2))
		return false;
	if (array && !SCAN_LITERAL(&sc, "["))
		return false;
	rows = palloc(sizeof(RowLine) * size);
	do
	{
		RowLine    *r;

		if (n == size)
		{
			size *= 2;
			rows = repalloc(rows, sizeof(RowLine) * size);
		}
		r = &rows[n++];
		memset(r, 0, sizeof(RowLine));
		r->texts = palloc0(sizeof(char *) * Max(desc->natts, 1));
		if (!(array ? scan_row_array(im, &sc, r) : scan_row_object(im, &sc, r)))
			return false;
	} while (array && SCAN_LITERAL(&sc, ","));
	if ((array && !SCAN_LITERAL(&sc, "]")) || sc.p != sc.end)
		return false;
	for (int k = 0; k < n; k++)
		store_row(im, &rows[k]);
	return true;
}

/* from this line on, rows, offsets and keys are read in a second pass */
static void
defer(Import *im)
{
	if (im->deferred == 0)
		im->deferred = im->line;
}

/*
 * Pass 1: the header (checked at once), the end, and the batches, which
 * get ids here.  Rows, offsets and keys are read here too, as long as the
 * lines come in export()'s order (the header first, then the batches, and
 * rows that name only batches read before them): from the first line that
 * does not, they are left to pass 2 (read_second()).  When the lines are
 * not read with a scan of their heap, all of them are (choose_reader()).
 */
static void
read_first(Import *im, text *line)
{
	Jsonb	   *j;
	JsonbValue	v;
	int64		id;

	if (row_prefix(line))
	{
		if (!im->ready || im->deferred || !read_row_fast(im, line))
			defer(im);
		return;
	}
	j = line_jsonb(im, line);
	if (is_row(j))
	{
		defer(im);
		return;
	}
	if (field(j, "format", &v) || field(j, "end", &v))
	{
		Jsonb	  **kept = field(j, "format", &v) ? &im->header : &im->end;
		MemoryContext old;

		if (*kept)
			bad_export(im, kept == &im->header ? "It has two headers." : "It has two ends.");
		old = MemoryContextSwitchTo(im->cxt);
		*kept = DatumGetJsonbPCopy(JsonbPGetDatum(j));
		MemoryContextSwitchTo(old);
		if (kept == &im->header)
			check_header(im);
		return;
	}
	if (int_field(im, j, "batch", &id))
	{
		read_batch(im, j, id);
		return;
	}
	if (!im->ready || im->deferred)
		defer(im);
	else
		read_other(im, j);
}

/* pass 2: the rows, the progress of partitions, the deliveries' keys */
static void
read_second(Import *im, text *line)
{
	Jsonb	   *j;
	JsonbValue	v;

	if (im->line < im->deferred)
		return;					/* read in pass 1 */
	if (row_prefix(line) && read_row_fast(im, line))
		return;
	j = line_jsonb(im, line);
	if (is_row(j))
		read_row(im, j);
	else if (!field(j, "format", &v) && !field(j, "end", &v) && !field(j, "batch", &v))
		read_other(im, j);
}

/* a count of the end must be what was read */
static void
check_count(Import *im, const char *name, int64 read)
{
	int64		said;

	if (!int_field(im, im->end, name, &said) || said != read)
		bad_export(im, psprintf("Its end counts " INT64_FORMAT " %s, and it has " INT64_FORMAT ".",
								said, name, read));
}

/* is a source empty of rows, batches, offsets and keys? */
static bool
source_is_empty(Import *im, Snapshot snapshot)
{
	Oid			relid = RelationGetRelid(im->ftrel);
	bool		empty = true;
	SwBatchMap *map = sw_log_batches(relid, PG_INT64_MIN, PG_INT64_MAX, snapshot);

	empty = hash_get_num_entries(map->batches) == 0 &&
		(map->segments == NULL || map->segments->n == 0) &&
		sw_catalog_progress(relid) == NIL &&
		sw_deliveries_of(relid, snapshot) == NIL;
	for (int i = 0; i < 2 && empty; i++)
	{
		Relation	rel = table_open(i == 0 ? im->source.current_rel : im->source.history_rel,
									 AccessShareLock);
		TableScanDesc scan = table_beginscan(rel, snapshot, 0, NULL);
		TupleTableSlot *slot = table_slot_create(rel, NULL);

		empty = !table_scan_getnextslot(scan, ForwardScanDirection, slot);
		ExecDropSingleTupleTableSlot(slot);
		table_endscan(scan);
		table_close(rel, AccessShareLock);
	}
	return empty;
}

/* the caller's transaction writes to the source being imported into */
static void
writes_during_import(Oid relid)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("cannot import into source table \"%s\" in a transaction that writes to it",
					get_rel_name(relid)),
			 errdetail("Its writes would commit rows that the export has not."),
			 errhint("Import in a transaction of its own, from lines whose reading writes nothing.")));
}

PG_FUNCTION_INFO_V1(source_writes_import);

/*
 * import(source regclass, lines regclass) -> bigint
 *
 * Load an export (the lines of export(), in the first column of the table
 * lines, in any order) into a source table that is empty: no rows, no
 * batches, no offsets, no kept keys, and of the same columns.  The batches
 * keep their timestamps, origins and roles and get new ids; the rows keep
 * their batches and where they came from; the Kafka offsets and webhook
 * keys are kept, so that ingestion goes on exactly once; the table's since
 * is the export's.  It needs the ownership of the table, and writers wait
 * until the caller's transaction ends.  An export cut short (without its
 * end, or with fewer lines than the end counts), of another format version
 * or of other columns is refused, and nothing is written (the caller's
 * transaction fails).  Lines in export()'s order are read once; others
 * twice.  Returns the rows imported.
 */
Datum
source_writes_import(PG_FUNCTION_ARGS)
{
	Oid			relid = PG_GETARG_OID(0);
	Oid			lines = PG_GETARG_OID(1);
	Import		im = {0};
	HASHCTL		ctl;
	ErrorContextCallback context;
	HASH_SEQ_STATUS status;
	ImportedBatch *ib;
	Snapshot	snapshot;
	SwFrontiers frontiers;

	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(get_rel_relkind(relid)),
					   get_rel_name(relid));
	sw_source_resolve(relid, &im.source, true);
	PreventCommandIfReadOnly("import()");
	if (im.source.moved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" was moved", get_rel_name(relid)),
				 errhint("Import into a new source table.")));
	im.cxt = CurrentMemoryContext;
	im.lines_relid = lines;
	im.lines = get_rel_name(lines) ? quote_qualified_identifier(get_namespace_name(get_rel_namespace(lines)),
																get_rel_name(lines)) : NULL;
	if (im.lines == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", lines)));
	choose_reader(&im);

	/*
	 * Keep writers out until we commit, and find the table empty.  Our own
	 * transaction may still write it (code of a view of the lines, say):
	 * such a write would commit rows the export has not, so a transaction
	 * that writes to the table, before or during the import, is refused.
	 */
	if (sw_transaction_writes(relid))
		writes_during_import(relid);
	im.ftrel = relation_open(relid, ShareRowExclusiveLock);
	snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!source_is_empty(&im, snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" is not empty", get_rel_name(relid)),
				 errdetail("An export is imported into a source table without rows, batches, offsets or kept idempotency keys."),
				 errhint("Create a new source table of the same columns, and import into it.")));
	UnregisterSnapshot(snapshot);

	/* pass 1: the header, the end, the batches, and what comes in order */
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(ImportedBatch);
	ctl.hcxt = CurrentMemoryContext;
	im.batches = hash_create("source_writes imported batches", 1024, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	context.callback = import_context;
	context.arg = &im;
	context.previous = error_context_stack;
	error_context_stack = &context;
	read_lines(&im, read_first);
	if (im.header == NULL)
		bad_export(&im, "It has no header: it is not an export of source_writes.");
	if (im.end == NULL)
		bad_export(&im, "It has no end: it was cut short.");
	check_count(&im, "batches", hash_get_num_entries(im.batches));
	hash_seq_init(&status, im.batches);
	while ((ib = hash_seq_search(&status)) != NULL)
		if (ib->ts >= im.upper)
		{
			hash_seq_term(&status);
			bad_export(&im, psprintf("A batch has a \"ts\" of " INT64_FORMAT ", not before its \"upper\", " INT64_FORMAT ".",
									 ib->ts, im.upper));
		}

	/* pass 2: the rows, offsets and keys from the first line not in order */
	if (im.deferred)
		read_lines(&im, read_second);
	if (sw_transaction_writes(relid))
		writes_during_import(relid);
	(void) sw_loader_close(im.loader);
	im.loader = NULL;
	error_context_stack = context.previous;
	check_count(&im, "rows", im.nrows);
	check_count(&im, "progress", im.nprogress);
	check_count(&im, "deliveries", im.ndeliveries);

	/* readable from the export's since, with the table's retention */
	if (sw_catalog_stored_frontiers(relid, &frontiers) && im.since < frontiers.since)
		sw_catalog_set_since(relid, im.since, frontiers.retain);
	CommandCounterIncrement();
	CacheInvalidateRelcacheByRelid(relid);
	relation_close(im.ftrel, NoLock);
	PG_RETURN_INT64(im.nrows);
}
