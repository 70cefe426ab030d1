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
#include "port/pg_bitutils.h"
#include "utils/memutils.h"

#include "log/log.h"

/*
 * The version of the packed form, its first byte.  Version 1 had no
 * section of transactions: its batches read as of no transaction.
 * Version 2 had no chunks: its batches are unpacked all at once.
 */
#define SW_SEGMENT_FORMAT	3

/* the batches of a chunk of a packed segment, which a reader unpacks alone */
#define SW_PACK_CHUNK		256

/* how many segments a reader keeps open at once */
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
 * Put a chunk of m batches: the deltas of their ids from id_base (runs of
 * equal deltas), of their timestamps from ts_base (zigzag varints), runs
 * of their kinds, and a byte that says how the runs of their transactions
 * follow (0 for none, else 1 + the zigzag delta from the transaction
 * before, from xid_base).  Returns the last transaction, or xid_base.
 */
static uint64
put_chunk(StringInfo buf, int m, const int64 *ids, const int64 *ts,
		  const uint16 *kinds, const uint64 *xids, int64 id_base,
		  int64 ts_base, uint64 xid_base, uint64 *values)
{
	int64		prev;
	uint64		prev_xid = xid_base;
	bool		short_runs = true;

	prev = id_base;
	for (int i = 0; i < m; i++)
	{
		values[i] = (uint64) (ids[i] - prev);
		prev = ids[i];
	}
	put_runs(buf, m, values);

	prev = ts_base;
	for (int i = 0; i < m; i++)
	{
		put_varint(buf, zigzag(ts[i] - prev));
		prev = ts[i];
	}

	for (int i = 0; i < m; i++)
		values[i] = kinds[i];
	put_runs(buf, m, values);

	for (int i = 0; i < m; i++)
	{
		if (xids[i] == 0)
			values[i] = 0;
		else
		{
			values[i] = zigzag((int64) (xids[i] - prev_xid)) + 1;
			prev_xid = xids[i];
		}
		if (values[i] >= (UINT64CONST(1) << 63))
			short_runs = false;
	}
	appendStringInfoCharMacro(buf, (char) (short_runs ? SW_XIDS_SHORT : SW_XIDS_RUNS));
	if (short_runs)
		put_short_runs(buf, m, values);
	else
		put_runs(buf, m, values);
	return prev_xid;
}

/*
 * Pack the batches of a segment, sorted by id (distinct), in chunks of
 * SW_PACK_CHUNK batches (the last may have fewer) that a reader can
 * unpack alone: a reader of a few batches unpacks the chunk that holds
 * them, not the whole segment.  After the format byte and the chunks'
 * size, an index says, for each chunk, what it starts from (but the
 * first, which starts from the segment's first id and first timestamp,
 * and from no transaction): the id and the timestamp of the batch before
 * it, as offsets from the segment's first ones, and the transaction
 * before it, as the zigzag delta from the previous chunk's; then the
 * length of its bytes.  The chunks follow, each as put_chunk() puts it.
 * A source whose batches follow each other in the sequence costs about a
 * byte a batch for its timestamps, and up to one more for its
 * transactions (those blame() and history() report, kept as the batch
 * rows had them): next to nothing when they follow each other too; the
 * index about 10 bytes a chunk.
 */
bytea *
sw_segment_pack(int n, const int64 *ids, const int64 *ts, const uint16 *kinds,
				const uint64 *xids, int64 batch_from, int64 ts_from)
{
	StringInfoData buf;
	StringInfoData chunks;
	uint64	   *values = palloc(sizeof(uint64) * SW_PACK_CHUNK);
	uint64		xid_base = 0;
	uint64		prev_base = 0;

	initStringInfo(&buf);
	initStringInfo(&chunks);
	appendBinaryStringInfo(&buf, "    ", VARHDRSZ);
	appendStringInfoCharMacro(&buf, (char) SW_SEGMENT_FORMAT);
	put_varint(&buf, SW_PACK_CHUNK);

	for (int first = 0; first < n; first += SW_PACK_CHUNK)
	{
		int			m = Min(SW_PACK_CHUNK, n - first);
		int			start = chunks.len;

#ifdef USE_ASSERT_CHECKING
		for (int i = first; i < first + m; i++)
			Assert(i == 0 ? ids[i] == batch_from : ids[i] > ids[i - 1]);
#endif
		if (first > 0)
		{
			put_varint(&buf, (uint64) ids[first - 1] - (uint64) batch_from);
			put_varint(&buf, (uint64) ts[first - 1] - (uint64) ts_from);
			put_varint(&buf, zigzag((int64) (xid_base - prev_base)));
		}
		prev_base = xid_base;
		xid_base = put_chunk(&chunks, m, ids + first, ts + first, kinds + first,
							 xids + first,
							 first > 0 ? ids[first - 1] : batch_from,
							 first > 0 ? ts[first - 1] : ts_from,
							 xid_base, values);
		put_varint(&buf, chunks.len - start);
	}
	appendBinaryStringInfo(&buf, chunks.data, chunks.len);

	pfree(values);
	pfree(chunks.data);
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
 * Read the format and the index of a segment's packed batches (of a
 * segment of n batches, whose bounds were checked) into seg, in the
 * current memory context: a segment of format 1 or 2 is one chunk.
 */
static void
read_index(SwSegment *seg, const bytea *packed)
{
	Unpacker	u;
	const uint8 *start;
	uint64		chunk_batches;
	uint64		offset;
	uint64		xid_base = 0;
	int			n = seg->nbatches;

	u.p = start = (const uint8 *) VARDATA_ANY(packed);
	u.end = u.p + VARSIZE_ANY_EXHDR(packed);
	if (u.p >= u.end)
		corrupt();
	seg->format = *u.p++;
	if (seg->format != 1 && seg->format != 2 && seg->format != SW_SEGMENT_FORMAT)
		corrupt();
	if (seg->format != SW_SEGMENT_FORMAT)
	{
		seg->chunk_batches = n;
		seg->nchunks = 1;
		seg->chunks = palloc(sizeof(SwPackedChunk));
		seg->chunks[0].offset = u.p - start;
		seg->chunks[0].len = u.end - u.p;
		seg->chunks[0].id_base = seg->batch_from;
		seg->chunks[0].ts_base = seg->ts_from;
		seg->chunks[0].xid_base = 0;
		return;
	}

	chunk_batches = get_varint(&u);
	if (chunk_batches == 0)
		corrupt();
	seg->chunk_batches = (int) Min(chunk_batches, (uint64) n);
	seg->nchunks = (n + seg->chunk_batches - 1) / seg->chunk_batches;
	/* every chunk takes a byte of the index at least */
	if (seg->nchunks > u.end - u.p)
		corrupt();
	seg->chunks = palloc(sizeof(SwPackedChunk) * seg->nchunks);
	offset = 0;
	for (int c = 0; c < seg->nchunks; c++)
	{
		SwPackedChunk *ch = &seg->chunks[c];
		uint64		len;

		ch->id_base = seg->batch_from;
		ch->ts_base = seg->ts_from;
		if (c > 0)
		{
			uint64		id_off = get_varint(&u);
			uint64		ts_off = get_varint(&u);

			if (id_off > (uint64) seg->batch_to - (uint64) seg->batch_from ||
				ts_off > (uint64) seg->ts_to - (uint64) seg->ts_from)
				corrupt();
			ch->id_base = (int64) ((uint64) seg->batch_from + id_off);
			ch->ts_base = (int64) ((uint64) seg->ts_from + ts_off);
			/* each chunk begins after the one before */
			if (ch->id_base <= seg->chunks[c - 1].id_base)
				corrupt();
			xid_base += (uint64) unzigzag(get_varint(&u));
		}
		ch->xid_base = xid_base;
		len = get_varint(&u);
		if (len > (uint64) (u.end - u.p) || offset > (uint64) (u.end - u.p) - len)
			corrupt();
		ch->offset = (int32) offset;	/* from the first chunk, for now */
		ch->len = (int32) len;
		offset += len;
	}
	/* the chunks follow the index, and end the bytes */
	if (offset != (uint64) (u.end - u.p))
		corrupt();
	for (int c = 0; c < seg->nchunks; c++)
		seg->chunks[c].offset += u.p - start;
}

/*
 * Unpack chunk c of a segment whose index was read from packed into the
 * arrays given (of the segment's nbatches), each value checked against
 * the segment's bounds.
 */
static void
unpack_chunk(const SwSegment *seg, const bytea *packed, int c, int64 *ids,
			 int64 *ts, uint16 *kinds, uint64 *xids)
{
	const SwPackedChunk *ch = &seg->chunks[c];
	int			first = c * seg->chunk_batches;
	int			m = Min(seg->chunk_batches, seg->nbatches - first);
	int64		batch_to = seg->batch_to;
	Unpacker	u;
	int64		prev;
	uint8		xids_form = SW_XIDS_RUNS;
	uint64		prev_xid = ch->xid_base;

	u.p = (const uint8 *) VARDATA_ANY(packed) + ch->offset;
	u.end = u.p + ch->len;
	ids += first;
	ts += first;
	kinds += first;
	xids += first;

	/*
	 * runs of id deltas, straight into the ids; prev stays <= batch_to.  Only
	 * the first batch of the segment is its first id, a delta of 0.
	 */
	prev = ch->id_base;
	for (int i = 0; i < m;)
	{
		uint64		delta = get_varint(&u);
		uint64		len = get_varint(&u);

		if (len == 0 || len > (uint64) (m - i) ||
			(delta == 0 && (c > 0 || i > 0 || len > 1)) ||
			(delta > 0 && ((uint64) batch_to - (uint64) prev) / delta < len))
			corrupt();
		while (len-- > 0)
		{
			prev = (int64) ((uint64) prev + delta);
			ids[i++] = prev;
		}
	}
	/* ... and ends where the next begins, as the packer writes them */
	if ((c == 0 && ids[0] != seg->batch_from) ||
		(c == seg->nchunks - 1 && ids[m - 1] != batch_to) ||
		(c < seg->nchunks - 1 && ids[m - 1] != seg->chunks[c + 1].id_base))
		corrupt();

	prev = ch->ts_base;
	for (int i = 0; i < m; i++)
	{
		if (pg_add_s64_overflow(prev, unzigzag(get_varint(&u)), &ts[i]) ||
			ts[i] < seg->ts_from || ts[i] > seg->ts_to)
			corrupt();
		prev = ts[i];
	}

	for (int i = 0; i < m;)
	{
		uint64		kind = get_varint(&u);
		uint64		len = get_varint(&u);

		if (len == 0 || len > (uint64) (m - i) || kind >= (uint64) seg->nkinds)
			corrupt();
		while (len-- > 0)
			kinds[i++] = (uint16) kind;
	}

	if (seg->format != 1)
	{
		if (u.p >= u.end)
			corrupt();
		xids_form = *u.p++;
		if (xids_form != SW_XIDS_RUNS && xids_form != SW_XIDS_SHORT)
			corrupt();
	}
	for (int i = 0; i < m;)
	{
		uint64		v = 0;
		uint64		len = (uint64) m;

		if (seg->format != 1 && xids_form == SW_XIDS_RUNS)
		{
			v = get_varint(&u);
			len = get_varint(&u);
		}
		else if (seg->format != 1)
		{
			v = get_varint(&u);
			len = (v & 1) ? get_varint(&u) : 1;
			if ((v & 1) && len < 2)
				corrupt();
			v >>= 1;
		}

		if (len == 0 || len > (uint64) (m - i))
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
 * Unpack a segment of n batches into arrays of n: its ids (ascending),
 * timestamps, kinds and full transaction ids (0 for none), each checked
 * against the segment's bounds.  Reads every format.
 */
void
sw_segment_unpack(const bytea *packed, int n, int64 batch_from, int64 batch_to,
				  int64 ts_from, int64 ts_to, int nkinds,
				  int64 *ids, int64 *ts, uint16 *kinds, uint64 *xids)
{
	SwSegment	seg = {0};

	sw_segment_check(n, batch_from, batch_to, ts_from, ts_to);
	seg.nbatches = n;
	seg.batch_from = batch_from;
	seg.batch_to = batch_to;
	seg.ts_from = ts_from;
	seg.ts_to = ts_to;
	seg.nkinds = nkinds;
	read_index(&seg, packed);
	for (int c = 0; c < seg.nchunks; c++)
		unpack_chunk(&seg, packed, c, ids, ts, kinds, xids);
	pfree(seg.chunks);
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
 * Open a segment: read its packed batches and their index, and make room
 * for its batches, which its chunks are unpacked into as they are needed;
 * close the one looked in longest ago if as many are open as a reader
 * keeps.  Its packed batches are read from its row then: the reader's
 * snapshot, which saw the row, still runs, so the row is still there.
 */
static void
open_segment(SwSegmentSet *set, SwSegment *seg)
{
	MemoryContext old;
	int			n = Max(seg->nbatches, 1);

	if (set->nopen == SW_SEGMENT_CACHE)
	{
		SwSegment  *victim = NULL;

		for (int i = 0; i < set->n; i++)
			if (set->segs[i].packed != NULL &&
				(victim == NULL || set->segs[i].used < victim->used))
				victim = &set->segs[i];
		pfree(victim->packed);
		pfree(victim->chunks);
		pfree(victim->unpacked);
		pfree(victim->ids);
		pfree(victim->ts);
		pfree(victim->kinds);
		pfree(victim->xids);
		victim->packed = NULL;
		victim->chunks = NULL;
		victim->unpacked = NULL;
		victim->ids = victim->ts = NULL;
		victim->kinds = NULL;
		victim->xids = NULL;
		set->nopen--;
	}
	old = MemoryContextSwitchTo(set->cxt);
	seg->packed = sw_catalog_segment_packed(&seg->tid);
	read_index(seg, seg->packed);
	seg->unpacked = palloc0(sizeof(bool) * seg->nchunks);
	seg->nunpacked = 0;
	seg->chunk_shift = -1;
	if ((seg->chunk_batches & (seg->chunk_batches - 1)) == 0)
		seg->chunk_shift = pg_rightmost_one_pos32(seg->chunk_batches);
	seg->ids = palloc(sizeof(int64) * n);
	seg->ts = palloc(sizeof(int64) * n);
	seg->kinds = palloc(sizeof(uint16) * n);
	seg->xids = palloc(sizeof(uint64) * n);
	MemoryContextSwitchTo(old);
	set->nopen++;
}

/* make sure chunk c of an open segment is unpacked */
static inline void
need_chunk(SwSegment *seg, int c)
{
	if (!seg->unpacked[c])
	{
		unpack_chunk(seg, seg->packed, c, seg->ids, seg->ts, seg->kinds,
					 seg->xids);
		seg->unpacked[c] = true;
		seg->nunpacked++;
	}
}

/* open a segment if it is not, and unpack all its chunks */
static void
need_all(SwSegmentSet *set, SwSegment *seg)
{
	if (seg->packed == NULL)
		open_segment(set, seg);
	seg->used = ++set->clock;
	for (int c = 0; c < seg->nchunks; c++)
		need_chunk(seg, c);
}

/*
 * The index of a batch in a segment, -1 if it is not there: only the
 * chunk that would hold it is unpacked.
 */
static int
find_in(SwSegmentSet *set, SwSegment *seg, int64 id)
{
	uint64		k;
	int			lo = 0;
	int			hi;

	if (seg->packed == NULL)
		open_segment(set, seg);
	seg->used = ++set->clock;

	/*
	 * The ids of a source alone in its database follow each other.  The
	 * caller checked id >= batch_from, so the unsigned difference is exact.
	 */
	k = (uint64) id - (uint64) seg->batch_from;
	if (k < (uint64) seg->nbatches)
	{
		/* a reader of every row looks up every batch: no division then */
		if (seg->nunpacked < seg->nchunks)
			need_chunk(seg, seg->chunk_shift >= 0 ? (int) (k >> seg->chunk_shift)
					   : (int) k / seg->chunk_batches);
		if (seg->ids[k] == id)
			return (int) k;
	}

	/* the last chunk whose ids begin at or below id */
	hi = seg->nchunks - 1;
	while (lo < hi)
	{
		int			mid = lo + (hi - lo + 1) / 2;

		if (seg->chunks[mid].id_base < id)
			lo = mid;
		else
			hi = mid - 1;
	}
	need_chunk(seg, lo);
	hi = Min(seg->nbatches, (lo + 1) * seg->chunk_batches) - 1;
	lo = lo * seg->chunk_batches;
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

		need_all(set, seg);
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
			need_all(set, seg);
			for (int j = 0; j < seg->nbatches; j++)
				if (seg->ts[j] >= from)
					oldest = Min(oldest, seg->ts[j]);
		}
	}
	return oldest;
}
