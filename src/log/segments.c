/*-------------------------------------------------------------------------
 *
 * segments.c
 *		  Batches rolled up into segments: their packed form, and looking a
 *		  batch up among the segments a reader loaded
 *
 * See doc/internals.md, "The catalog" (Segments).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/segments.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/int.h"
#include "miscadmin.h"
#include "utils/memutils.h"

#include "log/log.h"

/*
 * The version of the packed form, its first byte.  Version 1 had no
 * section of transactions: its batches read as of no transaction.
 */
#define SW_SEGMENT_FORMAT	2

/* how many segments a reader keeps unpacked at once */
#define SW_SEGMENT_CACHE	8

/* an unsigned varint: 7 bits a byte, low bits first */
static void
put_varint(StringInfo buf, uint64 v)
{
	while (v >= 0x80)
	{
		appendStringInfoCharMacro(buf, (char) ((v & 0x7f) | 0x80));
		v >>= 7;
	}
	appendStringInfoCharMacro(buf, (char) v);
}

static inline uint64
zigzag(int64 v)
{
	return ((uint64) v << 1) ^ (uint64) (v >> 63);
}

static inline int64
unzigzag(uint64 v)
{
	return (int64) (v >> 1) ^ -(int64) (v & 1);
}

/* the reader of a packed segment */
typedef struct Unpacker
{
	const uint8 *p;
	const uint8 *end;
} Unpacker;

static pg_attribute_noreturn() void
corrupt(void)
{
	ereport(ERROR,
			(errcode(ERRCODE_DATA_CORRUPTED),
			 errmsg("a segment of source_writes.batch_segments is corrupt")));
}

static uint64
get_varint(Unpacker *u)
{
	uint64		v = 0;

	for (int shift = 0; shift < 64; shift += 7)
	{
		uint8		b;

		if (u->p >= u->end)
			corrupt();
		b = *u->p++;
		v |= (uint64) (b & 0x7f) << shift;
		if ((b & 0x80) == 0)
			return v;
	}
	corrupt();
}

/* put runs of equal values: (value, length) pairs */
static void
put_runs(StringInfo buf, int n, const uint64 *values)
{
	for (int i = 0; i < n;)
	{
		int			j = i + 1;

		while (j < n && values[j] == values[i])
			j++;
		put_varint(buf, values[i]);
		put_varint(buf, j - i);
		i = j;
	}
}

/* how the section of transactions is written: put_runs(), or short runs */
#define SW_XIDS_RUNS		0
#define SW_XIDS_SHORT		1

/*
 * Put runs of equal values below 2^63, each as one varint of the value
 * shifted left, its low bit set if the run's length (above 1) follows:
 * a byte for a value below 64 alone, as most transaction deltas are.
 */
static void
put_short_runs(StringInfo buf, int n, const uint64 *values)
{
	for (int i = 0; i < n;)
	{
		int			j = i + 1;

		while (j < n && values[j] == values[i])
			j++;
		put_varint(buf, (values[i] << 1) | (j - i > 1 ? 1 : 0));
		if (j - i > 1)
			put_varint(buf, j - i);
		i = j;
	}
}

/*
 * Pack the batches of a segment, sorted by id (distinct), as the deltas
 * of their ids (runs of equal deltas), of their timestamps in id order
 * (zigzag varints), runs of their kinds (indexes into the segment's
 * dictionary of origin and role) and of their transactions (0 for none,
 * else 1 + the zigzag delta from the transaction before; a byte says how
 * these runs are written), in four sections one after the other.  The
 * ids and timestamps start from the segment's first id and first
 * timestamp, the transactions from 0.  A source whose batches follow each
 * other in the sequence costs about a byte a batch for its timestamps,
 * and up to one more for its transactions (those blame() and history()
 * report, kept as the batch rows had them): next to nothing when they
 * follow each other too.
 */
bytea *
sw_segment_pack(int n, const int64 *ids, const int64 *ts, const uint16 *kinds,
				const uint64 *xids, int64 batch_from, int64 ts_from)
{
	StringInfoData buf;
	uint64	   *values = palloc(sizeof(uint64) * Max(n, 1));
	int64		prev;
	bool		short_runs = true;

	initStringInfo(&buf);
	appendBinaryStringInfo(&buf, "    ", VARHDRSZ);
	appendStringInfoCharMacro(&buf, (char) SW_SEGMENT_FORMAT);

	prev = batch_from;
	for (int i = 0; i < n; i++)
	{
		Assert(i == 0 ? ids[i] == batch_from : ids[i] > ids[i - 1]);
		values[i] = (uint64) (ids[i] - prev);
		prev = ids[i];
	}
	put_runs(&buf, n, values);

	prev = ts_from;
	for (int i = 0; i < n; i++)
	{
		put_varint(&buf, zigzag(ts[i] - prev));
		prev = ts[i];
	}

	for (int i = 0; i < n; i++)
		values[i] = kinds[i];
	put_runs(&buf, n, values);

	prev = 0;
	for (int i = 0; i < n; i++)
	{
		if (xids[i] == 0)
			values[i] = 0;
		else
		{
			values[i] = zigzag((int64) (xids[i] - (uint64) prev)) + 1;
			prev = (int64) xids[i];
		}
		if (values[i] >= (UINT64CONST(1) << 63))
			short_runs = false;
	}
	appendStringInfoCharMacro(&buf, (char) (short_runs ? SW_XIDS_SHORT : SW_XIDS_RUNS));
	if (short_runs)
		put_short_runs(&buf, n, values);
	else
		put_runs(&buf, n, values);

	pfree(values);
	SET_VARSIZE(buf.data, buf.len);
	return (bytea *) buf.data;
}

/*
 * Check the bounds of a segment row (a superuser may have written them):
 * some batches, ids and timestamps in order, and room between its lowest
 * and highest id for its n distinct ids.  Readers then compute offsets
 * from batch_from without overflow.
 */
void
sw_segment_check(int n, int64 batch_from, int64 batch_to, int64 ts_from,
				 int64 ts_to)
{
	if (n <= 0 || batch_from > batch_to || ts_from > ts_to ||
		(uint64) batch_to - (uint64) batch_from < (uint64) (n - 1))
		corrupt();
}

/*
 * Unpack a segment of n batches into arrays of n: its ids (ascending),
 * timestamps, kinds and full transaction ids (0 for none), each checked
 * against the segment's bounds.
 */
void
sw_segment_unpack(const bytea *packed, int n, int64 batch_from, int64 batch_to,
				  int64 ts_from, int64 ts_to, int nkinds,
				  int64 *ids, int64 *ts, uint16 *kinds, uint64 *xids)
{
	Unpacker	u;
	int64		prev;
	uint8		format;
	uint8		xids_form = SW_XIDS_RUNS;
	uint64		prev_xid = 0;

	sw_segment_check(n, batch_from, batch_to, ts_from, ts_to);
	u.p = (const uint8 *) VARDATA_ANY(packed);
	u.end = u.p + VARSIZE_ANY_EXHDR(packed);
	if (u.p >= u.end)
		corrupt();
	format = *u.p++;
	if (format != 1 && format != SW_SEGMENT_FORMAT)
		corrupt();

	/* runs of id deltas, straight into the ids; prev stays <= batch_to */
	prev = batch_from;
	for (int i = 0; i < n;)
	{
		uint64		delta = get_varint(&u);
		uint64		len = get_varint(&u);

		if (len == 0 || len > (uint64) (n - i) ||
			(delta == 0 && (i > 0 || len > 1)) ||
			(delta > 0 && ((uint64) batch_to - (uint64) prev) / delta < len))
			corrupt();
		while (len-- > 0)
		{
			prev = (int64) ((uint64) prev + delta);
			ids[i++] = prev;
		}
	}
	if (n > 0 && (ids[0] != batch_from || ids[n - 1] != batch_to))
		corrupt();

	prev = ts_from;
	for (int i = 0; i < n; i++)
	{
		if (pg_add_s64_overflow(prev, unzigzag(get_varint(&u)), &ts[i]) ||
			ts[i] < ts_from || ts[i] > ts_to)
			corrupt();
		prev = ts[i];
	}

	for (int i = 0; i < n;)
	{
		uint64		kind = get_varint(&u);
		uint64		len = get_varint(&u);

		if (len == 0 || len > (uint64) (n - i) || kind >= (uint64) nkinds)
			corrupt();
		while (len-- > 0)
			kinds[i++] = (uint16) kind;
	}

	if (format != 1)
	{
		if (u.p >= u.end)
			corrupt();
		xids_form = *u.p++;
		if (xids_form != SW_XIDS_RUNS && xids_form != SW_XIDS_SHORT)
			corrupt();
	}
	for (int i = 0; i < n;)
	{
		uint64		v = 0;
		uint64		len = (uint64) n;

		if (format != 1 && xids_form == SW_XIDS_RUNS)
		{
			v = get_varint(&u);
			len = get_varint(&u);
		}
		else if (format != 1)
		{
			v = get_varint(&u);
			len = (v & 1) ? get_varint(&u) : 1;
			if ((v & 1) && len < 2)
				corrupt();
			v >>= 1;
		}

		if (len == 0 || len > (uint64) (n - i))
			corrupt();
		while (len-- > 0)
		{
			if (v != 0)
				prev_xid += (uint64) unzigzag(v - 1);
			xids[i++] = v == 0 ? 0 : prev_xid;
		}
	}
	if (u.p != u.end)
		corrupt();
}

/*
 * A set of segments a reader loaded, in its memory context.
 */
SwSegmentSet *
sw_segments_create(void)
{
	SwSegmentSet *set = palloc0(sizeof(SwSegmentSet));

	set->cxt = CurrentMemoryContext;
	set->max = 8;
	set->segs = palloc(sizeof(SwSegment) * set->max);
	set->last = -1;
	return set;
}

/*
 * Add a loaded segment (its packed batches and dictionary already in the
 * set's memory context).
 */
SwSegment *
sw_segments_add(SwSegmentSet *set)
{
	SwSegment  *seg;

	if (set->n == set->max)
	{
		set->max *= 2;
		set->segs = repalloc(set->segs, sizeof(SwSegment) * set->max);
	}
	seg = &set->segs[set->n++];
	memset(seg, 0, sizeof(SwSegment));
	return seg;
}

static int
compare_segments(const void *a, const void *b)
{
	const SwSegment *x = a;
	const SwSegment *y = b;

	return x->batch_from < y->batch_from ? -1 : (x->batch_from > y->batch_from ? 1 : 0);
}

/*
 * Done adding: sort the segments by their first id, for lookups.  Batch
 * ids and timestamps do not follow the same order exactly, so the id
 * ranges of segments may overlap a little: each also knows the highest id
 * of the segments before it, to know how far back to look.
 */
void
sw_segments_finish(SwSegmentSet *set)
{
	int64		max_to = PG_INT64_MIN;

	qsort(set->segs, set->n, sizeof(SwSegment), compare_segments);
	for (int i = 0; i < set->n; i++)
	{
		max_to = Max(max_to, set->segs[i].batch_to);
		set->segs[i].max_to = max_to;
	}
}

/*
 * Unpack a segment, making room among those unpacked if need be.  Its
 * packed batches are read from its row then: the reader's snapshot, which
 * saw the row, still runs, so the row is still there.
 */
static void
unpack(SwSegmentSet *set, SwSegment *seg)
{
	MemoryContext old;
	bytea	   *packed;

	if (set->nunpacked == SW_SEGMENT_CACHE)
	{
		SwSegment  *victim = NULL;

		for (int i = 0; i < set->n; i++)
			if (set->segs[i].ids != NULL &&
				(victim == NULL || set->segs[i].used < victim->used))
				victim = &set->segs[i];
		pfree(victim->ids);
		pfree(victim->ts);
		pfree(victim->kinds);
		pfree(victim->xids);
		victim->ids = victim->ts = NULL;
		victim->kinds = NULL;
		victim->xids = NULL;
		set->nunpacked--;
	}
	old = MemoryContextSwitchTo(set->cxt);
	seg->ids = palloc(sizeof(int64) * Max(seg->nbatches, 1));
	seg->ts = palloc(sizeof(int64) * Max(seg->nbatches, 1));
	seg->kinds = palloc(sizeof(uint16) * Max(seg->nbatches, 1));
	seg->xids = palloc(sizeof(uint64) * Max(seg->nbatches, 1));
	MemoryContextSwitchTo(old);
	packed = sw_catalog_segment_packed(&seg->tid);
	sw_segment_unpack(packed, seg->nbatches, seg->batch_from, seg->batch_to,
					  seg->ts_from, seg->ts_to, seg->nkinds,
					  seg->ids, seg->ts, seg->kinds, seg->xids);
	pfree(packed);
	set->nunpacked++;
}

/* the index of a batch in an unpacked segment, -1 if it is not there */
static int
find_in(SwSegmentSet *set, SwSegment *seg, int64 id)
{
	int			lo = 0;
	int			hi;

	if (seg->ids == NULL)
		unpack(set, seg);
	seg->used = ++set->clock;

	/*
	 * The ids of a source alone in its database follow each other.  The
	 * caller checked id >= batch_from, so the unsigned difference is exact.
	 */
	if ((uint64) id - (uint64) seg->batch_from < (uint64) seg->nbatches &&
		seg->ids[id - seg->batch_from] == id)
		return (int) (id - seg->batch_from);
	hi = seg->nbatches - 1;
	while (lo <= hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (seg->ids[mid] == id)
			return mid;
		if (seg->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

/*
 * Find a batch among the segments: fills *batch (id, ts, origin, role)
 * and returns true, or returns false.  The rows of a hidden heap come
 * mostly in the order their batches were written, so the segment of the
 * last batch found is tried first.
 */
bool
sw_segments_find(SwSegmentSet *set, int64 id, SwBatch *batch)
{
	SwSegment  *seg = NULL;
	int			k = -1;
	int			lo;
	int			hi;

	if (set == NULL || set->n == 0)
		return false;
	if (set->last >= 0)
	{
		seg = &set->segs[set->last];
		if (id >= seg->batch_from && id <= seg->batch_to)
			k = find_in(set, seg, id);
	}
	if (k < 0)
	{
		/* the last segment whose first id is at or below id */
		lo = 0;
		hi = set->n - 1;
		while (lo < hi)
		{
			int			mid = lo + (hi - lo + 1) / 2;

			if (set->segs[mid].batch_from <= id)
				lo = mid;
			else
				hi = mid - 1;
		}
		for (int i = lo; i >= 0 && set->segs[i].max_to >= id; i--)
		{
			seg = &set->segs[i];
			if (i == set->last || id < seg->batch_from || id > seg->batch_to)
				continue;
			k = find_in(set, seg, id);
			if (k >= 0)
			{
				set->last = i;
				break;
			}
		}
	}
	if (k < 0)
		return false;
	batch->batch = id;
	batch->ts = seg->ts[k];
	batch->origin = seg->origins[seg->kinds[k]];
	memcpy(&batch->role, &seg->roles[seg->kinds[k]], sizeof(NameData));
	batch->xid = FullTransactionIdFromU64(seg->xids[k]);
	return true;
}

/*
 * Call fn for every batch of the segments, a segment at a time (export()).
 */
void
sw_segments_each(SwSegmentSet *set, void (*fn) (const SwBatch *batch, void *arg),
				 void *arg)
{
	for (int i = 0; set != NULL && i < set->n; i++)
	{
		SwSegment  *seg = &set->segs[i];

		if (seg->ids == NULL)
			unpack(set, seg);
		seg->used = ++set->clock;
		for (int k = 0; k < seg->nbatches; k++)
		{
			SwBatch		batch = {0};

			CHECK_FOR_INTERRUPTS();
			batch.batch = seg->ids[k];
			batch.ts = seg->ts[k];
			batch.origin = seg->origins[seg->kinds[k]];
			memcpy(&batch.role, &seg->roles[seg->kinds[k]], sizeof(NameData));
			batch.xid = FullTransactionIdFromU64(seg->xids[k]);
			fn(&batch, arg);
		}
	}
}

/*
 * The oldest timestamp at or after from among the segments' batches,
 * PG_INT64_MAX if none.
 */
int64
sw_segments_oldest(SwSegmentSet *set, int64 from)
{
	int64		oldest = PG_INT64_MAX;

	if (set == NULL)
		return oldest;
	for (int i = 0; i < set->n; i++)
	{
		SwSegment  *seg = &set->segs[i];

		if (seg->ts_to < from || seg->ts_from >= oldest)
			continue;
		if (seg->ts_from >= from)
			oldest = seg->ts_from;
		else
		{
			if (seg->ids == NULL)
				unpack(set, seg);
			for (int j = 0; j < seg->nbatches; j++)
				if (seg->ts[j] >= from)
					oldest = Min(oldest, seg->ts[j]);
		}
	}
	return oldest;
}
