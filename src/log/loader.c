/*-------------------------------------------------------------------------
 *
 * loader.c
 *		  Row versions written straight into a source's hidden heaps, with
 *		  the batches that added and retracted them, as COPY writes rows
 *
 * import() and a table version's first copy (version_of) write a whole
 * log at once: its rows go into the current heap and the history in
 * multi-inserts, their index entries after each, with the batch ids and
 * positions the caller gives.  See doc/internals.md, "Storage layout".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/loader.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/rel.h"

#include "log/log.h"

/* rows held for table_multi_insert(), at most: as COPY holds them */
#define SW_LOADER_SLOTS	1000
#define SW_LOADER_BYTES	65535

/* one hidden heap being written */
typedef struct LoaderHeap
{
	ResultRelInfo *rri;
	SwLayout	layout;
	TupleTableSlot **slots;		/* rows not yet inserted */
	int64	   *tags;			/* the caller's tag of each */
	int			nslots;
	int			nslots_made;
	Size		bytes;
	BulkInsertState bistate;
} LoaderHeap;

struct SwLoader
{
	Relation	ftrel;
	MemoryContext cxt;
	EState	   *estate;
	LoaderHeap	heaps[2];		/* current, history */
	int64		tag;			/* the row whose index entries are inserted */
	int64		rows;
};

/* open a hidden heap and its indexes for writing rows */
static void
open_heap(SwLoader *ld, LoaderHeap *h, Oid relid)
{
	Relation	rel = table_open(relid, RowExclusiveLock);

	sw_storage_layout(ld->ftrel, rel, &h->layout);
	h->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(h->rri, rel, 0, NULL, 0);
	ExecOpenIndices(h->rri, false);
	h->slots = palloc0(sizeof(TupleTableSlot *) * SW_LOADER_SLOTS);
	h->tags = palloc0(sizeof(int64) * SW_LOADER_SLOTS);
	h->bistate = GetBulkInsertState();
}

/*
 * Begin writing the hidden heaps of a source (locked by the caller against
 * other writers), in the current transaction and memory context.
 */
SwLoader *
sw_loader_open(Relation ftrel, const SwSource *source)
{
	SwLoader   *ld = palloc0(sizeof(SwLoader));

	ld->ftrel = ftrel;
	ld->cxt = CurrentMemoryContext;
	ld->estate = CreateExecutorState();
	ld->estate->es_output_cid = GetCurrentCommandId(true);
	open_heap(ld, &ld->heaps[SW_CURRENT_HEAP], source->current_rel);
	open_heap(ld, &ld->heaps[SW_HISTORY_HEAP], source->history_rel);
	return ld;
}

/*
 * Insert the rows held for a hidden heap, and then their index entries,
 * as COPY does (CopyMultiInsertBufferFlush()).
 */
static void
flush_heap(SwLoader *ld, LoaderHeap *h)
{
	if (h->nslots == 0)
		return;
	table_multi_insert(h->rri->ri_RelationDesc, h->slots, h->nslots,
					   ld->estate->es_output_cid, 0, h->bistate);
	for (int i = 0; i < h->nslots; i++)
	{
		if (h->rri->ri_NumIndices > 0)
		{
			ld->tag = h->tags[i];
			list_free(ExecInsertIndexTuples(h->rri, h->slots[i], ld->estate,
											false, false, NULL, NIL));
			ResetPerTupleExprContext(ld->estate);
		}
		ExecClearTuple(h->slots[i]);
	}
	ld->tag = 0;
	h->nslots = 0;
	h->bytes = 0;
}

/*
 * A row version to write, from the table's columns (values and isnull, of
 * the foreign table's natts), added by batch added and retracted by batch
 * retracted (0: current, into the current heap), from where pos says.
 * tag is the caller's, for its error context (sw_loader_tag()) while the
 * row's index entries are inserted; not 0.
 */
void
sw_loader_add(SwLoader *ld, const Datum *values, const bool *isnull,
			  int64 added, int64 retracted, const SwPosition *pos, int64 tag)
{
	LoaderHeap *h = &ld->heaps[retracted ? SW_HISTORY_HEAP : SW_CURRENT_HEAP];
	const SwLayout *layout = &h->layout;
	TupleTableSlot *slot;

	if (h->nslots == h->nslots_made)
	{
		MemoryContext old = MemoryContextSwitchTo(ld->cxt);

		h->slots[h->nslots_made++] = table_slot_create(h->rri->ri_RelationDesc, NULL);
		MemoryContextSwitchTo(old);
	}
	slot = h->slots[h->nslots];
	ExecClearTuple(slot);
	for (int i = 0; i < slot->tts_tupleDescriptor->natts; i++)
		slot->tts_isnull[i] = true;
	sw_to_hidden(layout, RelationGetDescr(ld->ftrel)->natts, values, isnull,
				 slot->tts_values, slot->tts_isnull);
	slot->tts_values[layout->batch - 1] = Int64GetDatum(added);
	slot->tts_isnull[layout->batch - 1] = false;
	if (retracted)
	{
		slot->tts_values[layout->retracted - 1] = Int64GetDatum(retracted);
		slot->tts_isnull[layout->retracted - 1] = false;
	}
	if (pos && pos->known)
	{
		if (layout->part)
		{
			slot->tts_values[layout->part - 1] = Int32GetDatum(pos->part);
			slot->tts_isnull[layout->part - 1] = false;
		}
		if (layout->pos)
		{
			slot->tts_values[layout->pos - 1] = Int64GetDatum(pos->pos);
			slot->tts_isnull[layout->pos - 1] = false;
		}
	}
	if (pos && pos->delivery && layout->delivery)
	{
		slot->tts_values[layout->delivery - 1] = CStringGetTextDatum(pos->delivery);
		slot->tts_isnull[layout->delivery - 1] = false;
	}
	if (pos && pos->raw_kept)
		for (int i = 0; i < SW_NUM_RAW; i++)
			if (layout->raw[i] && !pos->raw_null[i])
			{
				slot->tts_values[layout->raw[i] - 1] = pos->raw[i];
				slot->tts_isnull[layout->raw[i] - 1] = false;
			}
	ExecStoreVirtualTuple(slot);
	ExecMaterializeSlot(slot);	/* the values are the caller's */
	h->tags[h->nslots++] = tag;
	h->bytes += ExecFetchSlotHeapTuple(slot, false, NULL)->t_len;
	ld->rows++;
	if (h->nslots == SW_LOADER_SLOTS || h->bytes >= SW_LOADER_BYTES)
		flush_heap(ld, h);
}

/*
 * The tag of the row whose index entries are being inserted (an error of a
 * unique index is that row's), or 0.
 */
int64
sw_loader_tag(SwLoader *ld)
{
	return ld->tag;
}

/*
 * Write what is held, close the heaps, and return how many rows were
 * written.
 */
int64
sw_loader_close(SwLoader *ld)
{
	int64		rows = ld->rows;

	for (int i = 0; i < 2; i++)
	{
		LoaderHeap *h = &ld->heaps[i];

		flush_heap(ld, h);
		FreeBulkInsertState(h->bistate);
		for (int s = 0; s < h->nslots_made; s++)
			ExecDropSingleTupleTableSlot(h->slots[s]);
		ExecCloseIndices(h->rri);
		table_close(h->rri->ri_RelationDesc, NoLock);
	}
	FreeExecutorState(ld->estate);
	pfree(ld);
	return rows;
}
