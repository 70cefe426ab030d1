/*-------------------------------------------------------------------------
 *
 * layout.c
 *		  Where a source table's columns are in its hidden relations, and
 *		  reading their rows
 *
 * See doc/internals.md, "Storage layout".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/layout.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "log/log.h"

/*
 * The type a hidden relation stores a column of the foreign table as: a
 * domain's base type (and its typmod), else the column's own type.
 */
Oid
sw_hidden_type(Form_pg_attribute fatt, int32 *typmod)
{
	*typmod = fatt->atttypmod;
	return getBaseTypeAndTypmod(fatt->atttypid, typmod);
}

/* the names of the raw message's columns, by SwRawColumn */
const char *const sw_raw_names[SW_NUM_RAW] = {
	SW_META_RAW_KEY, SW_META_RAW_VALUE, SW_META_RAW_TIMESTAMP,
	SW_META_RAW_HEADER_NAMES, SW_META_RAW_HEADER_VALUES
};

/*
 * Where a hidden relation's own columns are, by their names: the others
 * are the foreign table's, in order.  False if it lacks "$batch", or has
 * our columns in more runs than a relation can have.
 */
bool
sw_find_layout(TupleDesc hdesc, SwLayout *layout)
{
	AttrNumber	columns = 0;	/* the table's columns so far */

	memset(layout, 0, sizeof(SwLayout));
	for (int i = 0; i < hdesc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(hdesc, i);
		const char *name = NameStr(att->attname);
		AttrNumber *ours = NULL;

		if (!att->attisdropped && name[0] == '$')
		{
			if (strcmp(name, SW_META_BATCH) == 0)
				ours = &layout->batch;
			else if (strcmp(name, SW_META_RETRACTED) == 0)
				ours = &layout->retracted;
			else if (strcmp(name, SW_META_PART) == 0)
				ours = &layout->part;
			else if (strcmp(name, SW_META_POS) == 0)
				ours = &layout->pos;
			else if (strcmp(name, SW_META_DELIVERY) == 0)
				ours = &layout->delivery;
			else
			{
				for (int r = 0; r < SW_NUM_RAW; r++)
					if (strcmp(name, sw_raw_names[r]) == 0)
						ours = &layout->raw[r];
			}
		}
		if (ours == NULL)
		{
			columns++;
			continue;
		}
		*ours = att->attnum;
		layout->nmeta++;
		if (layout->nruns > 0 &&
			layout->runs[layout->nruns - 1].before == columns + 1)
			layout->runs[layout->nruns - 1].length++;
		else if (layout->nruns == SW_LAYOUT_RUNS)
			return false;
		else
		{
			layout->runs[layout->nruns].before = columns + 1;
			layout->runs[layout->nruns].length = 1;
			layout->nruns++;
		}
	}
	return layout->batch != InvalidAttrNumber;
}

/*
 * Where a hidden relation's own columns are, and whether it holds the
 * foreign table's columns where and as it should (their names too, if
 * asked).  When not, *column names the first column whose type differs,
 * if that is the difference.
 */
bool
sw_check_layout(Relation ftrel, Relation hidden, SwLayout *layout, bool names,
				const char **column)
{
	TupleDesc	fdesc = RelationGetDescr(ftrel);
	TupleDesc	hdesc = RelationGetDescr(hidden);

	*column = NULL;
	if (!sw_find_layout(hdesc, layout) ||
		hdesc->natts != fdesc->natts + layout->nmeta)
		return false;

	for (int k = 1; k <= fdesc->natts; k++)
	{
		Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
		Form_pg_attribute hatt = TupleDescAttr(hdesc, sw_hidden_attnum(layout, k) - 1);
		int32		typmod;

		if (fatt->attisdropped != hatt->attisdropped)
			return false;
		if (fatt->attisdropped)
			continue;
		if (sw_hidden_type(fatt, &typmod) != hatt->atttypid ||
			typmod != hatt->atttypmod ||
			fatt->attcollation != hatt->attcollation)
		{
			*column = NameStr(fatt->attname);
			return false;
		}
		if (names && strcmp(NameStr(fatt->attname), NameStr(hatt->attname)) != 0)
			return false;
	}
	return true;
}

/* a checked layout, cached per backend until either relation changes */
typedef struct SwLayoutEntry
{
	Oid			key[2];			/* the foreign table, the hidden relation */
	SwLayout	layout;
} SwLayoutEntry;

static HTAB *layout_cache = NULL;

/*
 * A relcache invalidation of a foreign table or a hidden relation (any
 * DDL on it) drops the layouts checked with it; one of everything drops
 * them all.
 */
static void
layout_cache_callback(Datum arg, Oid relid)
{
	HASH_SEQ_STATUS status;
	SwLayoutEntry *entry;

	hash_seq_init(&status, layout_cache);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (!OidIsValid(relid) || entry->key[0] == relid || entry->key[1] == relid)
			hash_search(layout_cache, entry->key, HASH_REMOVE, NULL);
}

/*
 * Where a hidden relation's own columns are, after checking that the
 * relation holds the foreign table's columns where and as it should.  A
 * relation out of step (DDL ran while the event triggers could not) is an
 * error: reading its tuples with the table's descriptor would be wrong or
 * unsafe.  The check is made once per backend until either relation
 * changes: each statement that reads or writes a source asks.
 */
void
sw_storage_layout(Relation ftrel, Relation hidden, SwLayout *layout)
{
	const char *column;
	Oid			key[2] = {RelationGetRelid(ftrel), RelationGetRelid(hidden)};
	SwLayoutEntry *entry;

	if (layout_cache == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(key);
		ctl.entrysize = sizeof(SwLayoutEntry);
		ctl.hcxt = CacheMemoryContext;
		layout_cache = hash_create("source_writes layouts", 64, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		CacheRegisterRelcacheCallback(layout_cache_callback, (Datum) 0);
	}
	entry = hash_search(layout_cache, key, HASH_FIND, NULL);
	if (entry)
	{
		*layout = entry->layout;
		return;
	}

	if (!sw_check_layout(ftrel, hidden, layout, false, &column))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("the storage of source table \"%s\" is out of step with the table",
						RelationGetRelationName(ftrel)),
				 column
				 ? errdetail("The type of column \"%s\" was changed while the extension's event triggers could not run.", column)
				 : errdetail("The table was altered while the extension's event triggers could not run."),
				 errhint("Run any ALTER FOREIGN TABLE on \"%s\" with event triggers enabled (not under session_replication_role = replica), e.g. the same command again; it brings the storage in step.",
						 RelationGetRelationName(ftrel))));
	entry = hash_search(layout_cache, key, HASH_ENTER, NULL);
	entry->layout = *layout;
}

/*
 * Copy the values of a row of the foreign table (natts attributes) into
 * their places in a hidden row, or (to_hidden false) the opposite: the
 * table's columns between the runs of ours, a stretch at a time.
 */
static inline void
copy_columns(const SwLayout *layout, int natts, bool to_hidden,
			 const Datum *from_values, const bool *from_isnull,
			 Datum *to_values, bool *to_isnull)
{
	int			done = 0;		/* the table's columns copied */
	int			skipped = 0;	/* ours passed */

	for (int i = 0; i <= layout->nruns && done < natts; i++)
	{
		int			upto = i < layout->nruns ? Min(natts, layout->runs[i].before - 1) : natts;
		int			n = upto - done;
		int			t = done;	/* where the stretch is in the table */
		int			h = done + skipped; /* ... and in the hidden row */

		if (n > 0)
		{
			memcpy(to_values + (to_hidden ? h : t), from_values + (to_hidden ? t : h),
				   n * sizeof(Datum));
			memcpy(to_isnull + (to_hidden ? h : t), from_isnull + (to_hidden ? t : h),
				   n * sizeof(bool));
			done = upto;
		}
		if (i < layout->nruns)
			skipped += layout->runs[i].length;
	}
}

/*
 * Copy the values of a row of the foreign table (natts attributes) into
 * their places in a hidden row; our own columns are the caller's.
 */
void
sw_to_hidden(const SwLayout *layout, int natts, const Datum *values,
			 const bool *isnull, Datum *hvalues, bool *hisnull)
{
	copy_columns(layout, natts, true, values, isnull, hvalues, hisnull);
}

/*
 * The opposite: a row of the foreign table from a hidden row.
 */
void
sw_from_hidden(const SwLayout *layout, int natts, const Datum *hvalues,
			   const bool *hisnull, Datum *values, bool *isnull)
{
	copy_columns(layout, natts, false, hvalues, hisnull, values, isnull);
}

/*
 * Begin a scan of a hidden heap's rows as they are now, as DDL that checks
 * or changes them needs them: under the latest snapshot, so that rows
 * committed since the command's snapshot count too (the table is locked
 * against writers meanwhile).
 */
void
sw_rows_begin(SwRowScan *rs, Relation hidden)
{
	rs->snapshot = RegisterSnapshot(GetLatestSnapshot());
	rs->scan = table_beginscan(hidden, rs->snapshot, 0, NULL);
	rs->slot = table_slot_create(hidden, NULL);
}

/*
 * The next row, or NULL at the end; the slot holds it until the next call.
 */
TupleTableSlot *
sw_rows_next(SwRowScan *rs)
{
	CHECK_FOR_INTERRUPTS();
	if (!table_scan_getnextslot(rs->scan, ForwardScanDirection, rs->slot))
		return NULL;
	return rs->slot;
}

/*
 * End the scan, and let go of its snapshot.
 */
void
sw_rows_end(SwRowScan *rs)
{
	ExecDropSingleTupleTableSlot(rs->slot);
	table_endscan(rs->scan);
	UnregisterSnapshot(rs->snapshot);
}