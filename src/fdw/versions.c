/*-------------------------------------------------------------------------
 *
 * versions.c
 *		  A new version of a source table (option version_of): the log,
 *		  offsets and keys of the table it is a version of, copied into it
 *		  as it is created
 *
 * CREATE FOREIGN TABLE orders_v2 (...) SERVER ... OPTIONS (version_of
 * 'orders') makes a table that starts where orders is: its batches with
 * their timestamps, origins and roles (new ids), its rows with their
 * columns mapped by name (cast as INSERT casts; a new column decoded from
 * the message the row keeps, or its default; generated columns computed
 * again), its Kafka offsets, webhook keys and kept errors.  Its worker
 * then goes on from those offsets, beside the old table's.  With
 * carry_edits 'false' the people's (and DDL's) batches stay behind, and
 * the rows they retracted are current again until the stream replaces
 * them.  See doc/versions.md, and doc/internals.md, "Reading the log".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/versions.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "commands/defrem.h"
#include "commands/tablecmds.h"
#include "common/hashfn.h"
#include "executor/executor.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "rewrite/rewriteHandler.h"
#include "tcop/deparse_utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "fdw/fdw.h"
#include "ingest/ingest.h"
#include "log/log.h"
#include "options/options.h"

/* a batch of the old table, and its id in the new one */
typedef struct VersionBatch
{
	int64		old;			/* hash key: its id in the old table */
	int64		batch;			/* its id in the new one; 0: left behind */
	int64		ts;
	SwOrigin	origin;
} VersionBatch;

/*
 * carry_edits 'false', upsert sources: a key whose stream row a person
 * (or DDL) retracted, and the stream's batches that wrote the key, by
 * timestamp: the first after the person's retracts that row instead.
 */
typedef struct KeyWrites
{
	char	   *key;			/* hash key: the key columns' text */
	int			n;
	int			max;
	int64	   *ts;
	int64	   *batch;			/* their ids in the new version */
} KeyWrites;

/* a version being made */
typedef struct Version
{
	Relation	old;
	Relation	new;
	SwSource	oldsrc;
	SwSource	newsrc;
	SwSourceTable *oldst;
	SwSourceTable *newst;
	bool		carry;
	Snapshot	snapshot;
	SwBatchMap *map;
	HTAB	   *batches;		/* VersionBatch by the old id */
	int64		folded;			/* the id of rows added before since */
	int64		since;			/* ... and when they were at the latest */

	/* the columns: each new one from an old one of its name, or a default */
	TupleDesc	olddesc;
	TupleDesc	newdesc;
	AttrNumber *from;			/* per new column: the old one, or 0 */
	ExprState **cast;			/* ... the cast of its value; NULL: none */
	ExprState **defaults;		/* ... a new column's default; NULL: none */
	ExprState **generated;		/* ... a generated column's expression */
	bool	   *domain;			/* ... copied uncast, of a domain with
								 * constraints (see check_domains()) */
	void	  **domain_extra;	/* ... and domain_check()'s cache */
	List	  **valid_checks;	/* ... and its validated CHECKs, prepared */
	List	  **check_names;	/* ... and their names */
	MemoryContext domain_cxt;	/* ... and its memory */
	bool		any_domain;		/* is any column so? */
	bool		check_row;		/* check the row being copied so? */
	bool		past_row;		/* is it retracted in the new version? */
	TupleTableSlot *newslot;	/* the new row, for generated columns */
	TupleDesc	jsondesc;		/* the old columns the new table has, as
								 * reports show the old row */
	AttrNumber *jsonatts;
	int			njson;
	bool		fallible;		/* may a cast fail (not only relabel)? */
	bool		new_columns;	/* has the new table columns the old has not? */
	EState	   *estate;
	ExprContext *econtext;
	Datum	   *oldvalues;
	bool	   *oldnulls;
	Datum	   *newvalues;
	bool	   *newnulls;

	/* carry_edits 'false' on an upsert source: the old table's key */
	int			nkeys;
	AttrNumber *keyatts;
	FmgrInfo   *keyout;
	HTAB	   *keys;			/* KeyWrites */
	MemoryContext keys_cxt;		/* ... and their memory */

	/* decoding again the messages rows keep (retain_raw) */
	SwDecoder  *decoder;
	TupleTableSlot *decoded;	/* a virtual slot of the new table */

	SwLoader   *loader;
	TupleTableSlot *hidden;		/* the old row being copied */
	const SwLayout *layout;		/* ... its heap's layout */
	bool		has_msg;		/* ... and whether it keeps its message: */
	SwMessage	msg;
	SwMessage  *decode_msg;		/* the message its new columns come from */
	bool		use_decoded;	/* ... decoded into decoded */

	/*
	 * the messages of rows that a person changed (which keep none, but
	 * their position), from the rows they replaced, by position
	 */
	HTAB	   *originals;
	MemoryContext originals_cxt;
	int64		nuncarried;
	int64		nerrors;		/* rows of the stream kept as errors */
	int64		npast;			/* ... and past versions left out */
} Version;

/* ---------------------------------------------------------------------
 * The options at ALTER
 * ---------------------------------------------------------------------
 */

/*
 * version_of and carry_edits act once, as the table is created: an ALTER
 * FOREIGN TABLE that adds or sets them is refused (dropping them is not).
 */
void
sw_version_check_alter(CollectedCommand *command)
{
	ListCell   *lc;

	if (command == NULL || command->type != SCT_AlterTable)
		return;
	foreach(lc, command->d.alterTable.subcmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) ((CollectedATSubcmd *) lfirst(lc))->parsetree;
		ListCell   *oc;

		if (!IsA(cmd, AlterTableCmd) || cmd->subtype != AT_GenericOptions)
			continue;
		foreach(oc, (List *) cmd->def)
		{
			DefElem    *def = lfirst(oc);

			if (def->defaction != DEFELEM_DROP &&
				(strcmp(def->defname, "version_of") == 0 ||
				 strcmp(def->defname, "carry_edits") == 0))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("option \"%s\" can only be given to CREATE FOREIGN TABLE",
								def->defname),
						 errdetail("A new version gets the log of the table it is a version of as it is created."),
						 errhint("Create a new source table with OPTIONS (version_of '...').")));
		}
	}
}

/* ---------------------------------------------------------------------
 * The columns
 * ---------------------------------------------------------------------
 */

/*
 * How each column of the new table is made: from the old table's column
 * of its name, cast as INSERT casts it (or, where only an explicit cast
 * exists, as CAST does) if its type differs; a column the old table has
 * not gets its default, or NULL (checked against its domain, as ALTER
 * TABLE ... ADD COLUMN does); a generated column is computed again.
 */
static void
map_columns(Version *v)
{
	int			natts = v->newdesc->natts;
	int			njson = 0;

	v->from = palloc0(sizeof(AttrNumber) * Max(natts, 1));
	v->cast = palloc0(sizeof(ExprState *) * Max(natts, 1));
	v->defaults = palloc0(sizeof(ExprState *) * Max(natts, 1));
	v->generated = palloc0(sizeof(ExprState *) * Max(natts, 1));
	v->domain = palloc0(sizeof(bool) * Max(natts, 1));
	v->domain_extra = palloc0(sizeof(void *) * Max(natts, 1));
	v->valid_checks = palloc0(sizeof(List *) * Max(natts, 1));
	v->check_names = palloc0(sizeof(List *) * Max(natts, 1));
	v->domain_cxt = CurrentMemoryContext;
	v->jsonatts = palloc0(sizeof(AttrNumber) * Max(natts, 1));
	v->estate = CreateExecutorState();
	v->econtext = GetPerTupleExprContext(v->estate);
	for (int i = 0; i < natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(v->newdesc, i);
		AttrNumber	from;
		Form_pg_attribute oldatt;

		if (att->attisdropped)
			continue;
		from = get_attnum(RelationGetRelid(v->old), NameStr(att->attname));
		if (from > 0)
			v->jsonatts[njson++] = from;
		if (att->attgenerated)
		{
			v->generated[i] = ExecPrepareExpr((Expr *) build_column_default(v->new, i + 1),
											  v->estate);
			continue;
		}
		if (from <= 0)
		{
			Node	   *def = build_column_default(v->new, i + 1);

			if (def == NULL && DomainHasConstraints(att->atttypid))
			{
				int32		basetypmod = att->atttypmod;
				Oid			basetype = getBaseTypeAndTypmod(att->atttypid, &basetypmod);

				def = coerce_to_target_type(NULL,
											(Node *) makeNullConst(basetype, basetypmod,
																   att->attcollation),
											basetype, att->atttypid, att->atttypmod,
											COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
			}
			v->new_columns = true;
			if (def)
				v->defaults[i] = ExecPrepareExpr((Expr *) def, v->estate);
			continue;
		}
		v->from[i] = from;
		oldatt = TupleDescAttr(v->olddesc, from - 1);
		if (oldatt->atttypid != att->atttypid || oldatt->atttypmod != att->atttypmod)
		{
			CaseTestExpr *value = makeNode(CaseTestExpr);
			Node	   *cast;

			value->typeId = oldatt->atttypid;
			value->typeMod = oldatt->atttypmod;
			value->collation = oldatt->attcollation;
			cast = coerce_to_target_type(NULL, (Node *) value, oldatt->atttypid,
										 att->atttypid, att->atttypmod,
										 COERCION_ASSIGNMENT, COERCE_IMPLICIT_CAST, -1);
			if (cast == NULL)
				cast = coerce_to_target_type(NULL, (Node *) value, oldatt->atttypid,
											 att->atttypid, att->atttypmod,
											 COERCION_EXPLICIT, COERCE_EXPLICIT_CAST, -1);
			if (cast == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of source table \"%s\" is of type %s, which cannot be cast to type %s",
								NameStr(att->attname), RelationGetRelationName(v->old),
								format_type_with_typemod(oldatt->atttypid, oldatt->atttypmod),
								format_type_with_typemod(att->atttypid, att->atttypmod)),
						 errhint("Give the new version's column a type that the old one's casts to, or another name.")));
			assign_expr_collations(NULL, cast);
			v->cast[i] = ExecPrepareExpr((Expr *) cast, v->estate);
			if (!IsA(cast, RelabelType))
				v->fallible = true;
		}
		else if (DomainHasConstraints(att->atttypid))
		{
			bool		notnull;

			v->domain[i] = v->any_domain = true;
			v->valid_checks[i] = sw_domain_checks(att->atttypid, v->estate, &notnull,
												  &v->check_names[i]);
		}
	}
	v->newslot = MakeSingleTupleTableSlot(v->newdesc, &TTSOpsVirtual);

	/* what the reports show of an old row: only what the new table has */
	v->jsondesc = CreateTemplateTupleDesc(Max(njson, 1));
	for (int k = 0; k < njson; k++)
	{
		Form_pg_attribute oldatt = TupleDescAttr(v->olddesc, v->jsonatts[k] - 1);

		TupleDescInitEntry(v->jsondesc, k + 1, NameStr(oldatt->attname),
						   oldatt->atttypid, oldatt->atttypmod, 0);
	}
	if (njson == 0)
		TupleDescInitEntry(v->jsondesc, 1, "?column?", INT4OID, -1, 0);
	v->jsondesc = BlessTupleDesc(v->jsondesc);
	v->njson = njson;
}

/* the old row, read into oldvalues */
static void
read_old_row(Version *v)
{
	slot_getallattrs(v->hidden);
	sw_from_hidden(v->layout, v->olddesc->natts, v->hidden->tts_values,
				   v->hidden->tts_isnull, v->oldvalues, v->oldnulls);
}

/*
 * The new row's columns that the old table has, from the old row's (a
 * cast may raise an error); with uncast_nulls, a NULL stays NULL without
 * its cast.
 */
static void
cast_old_row(Version *v, bool uncast_nulls)
{
	ResetExprContext(v->econtext);
	for (int i = 0; i < v->newdesc->natts; i++)
	{
		AttrNumber	from = v->from[i];

		v->newvalues[i] = (Datum) 0;
		v->newnulls[i] = true;
		if (from == 0 || (uncast_nulls && v->oldnulls[from - 1]))
			continue;
		if (v->cast[i] == NULL)
		{
			v->newvalues[i] = v->oldvalues[from - 1];
			v->newnulls[i] = v->oldnulls[from - 1];
		}
		else
		{
			v->econtext->caseValue_datum = v->oldvalues[from - 1];
			v->econtext->caseValue_isNull = v->oldnulls[from - 1];
			v->newvalues[i] = ExecEvalExpr(v->cast[i], v->econtext, &v->newnulls[i]);
		}
	}
}

/*
 * Check the new row's columns that are copied without a cast against
 * their domains (NOT NULL, CHECK), as INSERT's cast to a domain checks a
 * value.  Only a row that the new version has current and the old table
 * has not needs it, one of the stream that a person or DDL retracted
 * (carry_edits 'false'): it may be from before ALTER ... ADD COLUMN, with
 * NULL there, which must pass every constraint, as ALTER ... ADD COLUMN's
 * NULL must.  A value the row held passed its domain as it was written,
 * but not a CHECK that ALTER DOMAIN added later, which checks current rows
 * only: it must pass those that are validated, not one added NOT VALID,
 * which leaves a plain table's values of then alone (and INSERT ... SELECT
 * copies them).  The old table's current rows passed the same domains as
 * they were written, and again at ALTER DOMAIN, and a history row keeps
 * what it had.
 */
static void
check_domains(Version *v)
{
	ListCell   *lc;
	ListCell   *nc;

	for (int i = 0; i < v->newdesc->natts; i++)
	{
		Oid			typid = TupleDescAttr(v->newdesc, i)->atttypid;

		if (!v->domain[i])
			continue;
		if (v->newnulls[i])
		{
			domain_check(v->newvalues[i], true, typid,
						 &v->domain_extra[i], v->domain_cxt);
			continue;
		}
		v->econtext->domainValue_datum = v->newvalues[i];
		v->econtext->domainValue_isNull = false;
		forboth(lc, v->valid_checks[i], nc, v->check_names[i])
			if (!ExecCheck(lfirst(lc), v->econtext))
				ereport(ERROR,
						(errcode(ERRCODE_CHECK_VIOLATION),
						 errmsg("value for domain %s violates check constraint \"%s\"",
								format_type_be(typid), (char *) lfirst(nc)),
						 errdomainconstraint(typid, lfirst(nc))));
	}
}

/*
 * The new row's columns that the old table has (see cast_old_row()),
 * checked against their domains if check_row says so.  A row of the
 * history keeps its NULLs uncast, as the old table's history keeps them
 * where a domain refuses NULL now (a column added later), and as import()
 * takes them.
 */
static void
make_new_row(Version *v)
{
	cast_old_row(v, v->past_row);
	if (v->check_row)
		check_domains(v);
}

/*
 * ... and the others: its new columns from its message, decoded
 * (use_decoded), or their defaults, and then its generated columns, from
 * the row, as INSERT computes them.  An error here is the new table's
 * (a default or a domain that refuses), and refuses the version, as it
 * would refuse ALTER TABLE ... ADD COLUMN.
 */
static void
complete_new_row(Version *v)
{
	bool		any_generated = false;

	for (int i = 0; i < v->newdesc->natts; i++)
	{
		if (v->from[i] != 0 || TupleDescAttr(v->newdesc, i)->attisdropped)
			continue;
		if (v->generated[i])
			any_generated = true;
		else if (v->use_decoded)
		{
			v->newvalues[i] = v->decoded->tts_values[i];
			v->newnulls[i] = v->decoded->tts_isnull[i];
		}
		else if (v->defaults[i])
			v->newvalues[i] = ExecEvalExpr(v->defaults[i], v->econtext, &v->newnulls[i]);
	}
	if (!any_generated)
		return;
	ExecClearTuple(v->newslot);
	memcpy(v->newslot->tts_values, v->newvalues, sizeof(Datum) * v->newdesc->natts);
	memcpy(v->newslot->tts_isnull, v->newnulls, sizeof(bool) * v->newdesc->natts);
	ExecStoreVirtualTuple(v->newslot);
	v->econtext->ecxt_scantuple = v->newslot;
	for (int i = 0; i < v->newdesc->natts; i++)
		if (v->generated[i])
			v->newvalues[i] = ExecEvalExpr(v->generated[i], v->econtext, &v->newnulls[i]);
}

/*
 * Run fn on the row in a subtransaction: false, with the error, if it
 * raised one that is the row's (a value a new type refuses, a message the
 * new options cannot decode: see sw_error_may_be_kept()), so that the row
 * is left behind and reported rather than the version refused; other
 * errors are raised.
 */
static bool
run_safely(Version *v, void (*fn) (Version *v), ErrorData **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool done = true;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(v);
		sw_release_sub(cxt, owner);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		sw_roll_back_sub(cxt, owner);
		if (!sw_error_may_be_kept(edata))
			ReThrowError(edata);
		*error = edata;
		done = false;
	}
	PG_END_TRY();
	return done;
}

/*
 * Decode the message the old row came from (decode_msg: the one it keeps,
 * with retain_raw, or that of the row a person changed into it) by the
 * new version's options, for its new columns (run safely: if they cannot
 * decode it, the new columns get their defaults).
 */
static void
decode_message(Version *v)
{
	sw_decode(v->decoder, v->decode_msg, v->decoded);
	slot_getallattrs(v->decoded);
}

/* ---------------------------------------------------------------------
 * Edits that do not come along
 * ---------------------------------------------------------------------
 */

/* columns of source_writes.uncarried_edits */
#define Anum_u_source		1
#define Anum_u_version_of	2
#define Anum_u_ts			3
#define Anum_u_role			4
#define Anum_u_edit			5
#define Anum_u_row			6
#define Anum_u_reason		7
#define Natts_u				7

/*
 * The old row as JSON, as reports show it: its columns that the new table
 * has (whoever reads the new version need not see the others).
 */
static char *
old_row_json(Version *v)
{
	Datum	   *values = palloc0(sizeof(Datum) * Max(v->njson, 1));
	bool	   *nulls = palloc0(sizeof(bool) * Max(v->njson, 1));
	HeapTuple	row;

	if (v->njson == 0)
		nulls[0] = true;
	for (int k = 0; k < v->njson; k++)
	{
		values[k] = v->oldvalues[v->jsonatts[k] - 1];
		nulls[k] = v->oldnulls[v->jsonatts[k] - 1];
	}
	row = heap_form_tuple(v->jsondesc, values, nulls);
	return text_to_cstring(DatumGetTextPP(DirectFunctionCall1(row_to_json,
															  heap_copy_tuple_as_datum(row, v->jsondesc))));
}

/*
 * Report an edit of the old table that the new version does not carry
 * (source_writes.uncarried_edits): the insert or delete of the old row
 * being copied, by batch b (NULL: one folded, before since), and why.
 * Written directly, as the catalog is.
 */
static void
uncarried(Version *v, const SwBatch *b, const char *edit, const char *reason)
{
	Oid			table = sw_catalog_uncarried_oid();
	Relation	rel;
	Datum		values[Natts_u];
	bool		nulls[Natts_u] = {0};
	HeapTuple	tuple;

	if (!OidIsValid(table))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a version that does not carry every edit needs source_writes 0.3"),
				 errhint("Update the extension: ALTER EXTENSION source_writes UPDATE.")));
	values[Anum_u_source - 1] = ObjectIdGetDatum(RelationGetRelid(v->new));
	values[Anum_u_version_of - 1] =
		CStringGetTextDatum(quote_qualified_identifier(get_namespace_name(RelationGetNamespace(v->old)),
													   RelationGetRelationName(v->old)));
	values[Anum_u_ts - 1] = Int64GetDatum(b ? b->ts : v->since);
	values[Anum_u_role - 1] = b ? NameGetDatum(&b->role) : DirectFunctionCall1(namein, CStringGetDatum(""));
	values[Anum_u_edit - 1] = CStringGetTextDatum(edit);
	values[Anum_u_row - 1] = DirectFunctionCall1(jsonb_in, CStringGetDatum(old_row_json(v)));
	values[Anum_u_reason - 1] = CStringGetTextDatum(reason);
	rel = table_open(table, RowExclusiveLock);
	tuple = heap_form_tuple(RelationGetDescr(rel), values, nulls);
	CatalogTupleInsert(rel, tuple);
	heap_freetuple(tuple);
	table_close(rel, RowExclusiveLock);
	v->nuncarried++;
}

/* ---------------------------------------------------------------------
 * Keys (carry_edits 'false' on upsert sources)
 * ---------------------------------------------------------------------
 */

static uint32
key_hash(const void *key, Size keysize)
{
	const char *s = *(char *const *) key;

	return hash_bytes((const unsigned char *) s, strlen(s));
}

static int
key_match(const void *a, const void *b, Size keysize)
{
	return strcmp(*(char *const *) a, *(char *const *) b);
}

/* the old row's key, as text (old row read) */
static char *
row_key(Version *v)
{
	StringInfoData s;

	initStringInfo(&s);
	for (int k = 0; k < v->nkeys; k++)
	{
		AttrNumber	a = v->keyatts[k];

		/* each column's length first: no two keys make the same text */
		if (v->oldnulls[a - 1])
			appendStringInfoString(&s, "n;");
		else
		{
			char	   *t = OutputFunctionCall(&v->keyout[k], v->oldvalues[a - 1]);

			appendStringInfo(&s, "%zu:%s;", strlen(t), t);
		}
	}
	return s.data;
}

/* the old table's key columns, for carry_edits 'false' on an upsert source */
static void
prepare_keys(Version *v)
{
	HASHCTL		ctl;
	ListCell   *lc;
	int			k = 0;

	v->nkeys = list_length(v->oldst->key);
	v->keyatts = palloc(sizeof(AttrNumber) * Max(v->nkeys, 1));
	v->keyout = palloc(sizeof(FmgrInfo) * Max(v->nkeys, 1));
	foreach(lc, v->oldst->key)
	{
		AttrNumber	a = get_attnum(RelationGetRelid(v->old), (char *) lfirst(lc));
		Oid			func;
		bool		varlena;

		if (a <= 0)
			elog(ERROR, "key column \"%s\" of source table \"%s\" does not exist",
				 (char *) lfirst(lc), RelationGetRelationName(v->old));
		v->keyatts[k] = a;
		getTypeOutputInfo(TupleDescAttr(v->olddesc, a - 1)->atttypid, &func, &varlena);
		fmgr_info(func, &v->keyout[k]);
		k++;
	}
	ctl.keysize = sizeof(char *);
	ctl.entrysize = sizeof(KeyWrites);
	ctl.hash = key_hash;
	ctl.match = key_match;
	ctl.hcxt = v->keys_cxt = CurrentMemoryContext;
	v->keys = hash_create("source_writes version keys", 64, &ctl,
						  HASH_ELEM | HASH_FUNCTION | HASH_COMPARE | HASH_CONTEXT);
}

/* ---------------------------------------------------------------------
 * The copy
 * ---------------------------------------------------------------------
 */

/* a batch of the old table (its batches, then its segments') */
static void
add_batch(const SwBatch *batch, void *arg)
{
	Version    *v = arg;
	VersionBatch *vb;
	bool		found;

	vb = hash_search(v->batches, &batch->batch, HASH_ENTER, &found);
	if (found)
		return;
	vb->ts = batch->ts;
	vb->origin = batch->origin;
	vb->batch = 0;
	/* without edits, only the stream's own batches come along */
	if (v->carry || batch->origin == SW_ORIGIN_KAFKA || batch->origin == SW_ORIGIN_WEBHOOK)
	{
		SwBatch		copy = *batch;
		SwBlockRanges unknown[2];

		vb->batch = copy.batch = sw_catalog_new_batch_id();
		unknown[0].n = unknown[1].n = -1;
		sw_catalog_insert_batch(RelationGetRelid(v->new), &copy, 0, NULL, unknown);
	}
}

/*
 * Rows added before since are dated at the oldest batch a table has (the
 * folded batch of readers, see provenance.c): without edits, the old
 * table's may be a person's or DDL's, which stays behind, and the rows
 * would be dated at the version's first batch of the stream, after since,
 * or at none.  The version takes that time as a batch of the system, of
 * the transaction that makes it, with no row.
 */
static void
keep_oldest_time(Version *v)
{
	HASH_SEQ_STATUS status;
	VersionBatch *vb;
	VersionBatch *oldest = NULL;
	SwBatch		batch = {0};
	SwBlockRanges none[2];

	hash_seq_init(&status, v->batches);
	while ((vb = hash_seq_search(&status)) != NULL)
		if (oldest == NULL || vb->ts < oldest->ts)
			oldest = vb;
	if (oldest == NULL || oldest->batch != 0)
		return;
	batch.batch = sw_catalog_new_batch_id();
	batch.ts = oldest->ts;
	batch.origin = SW_ORIGIN_SYSTEM;
	namestrcpy(&batch.role, GetUserNameFromId(GetUserId(), false));
	memset(none, 0, sizeof(none));	/* it wrote no row */
	sw_catalog_insert_batch(RelationGetRelid(v->new), &batch, 0, NULL, none);
}

/* a batch of a row, by its id in the old table */
static VersionBatch *
version_batch(Version *v, const SwBatch *batch)
{
	VersionBatch *vb = hash_search(v->batches, &batch->batch, HASH_FIND, NULL);

	if (vb == NULL)
		elog(ERROR, "batch " INT64_FORMAT " of source table \"%s\" is not in its log",
			 batch->batch, RelationGetRelationName(v->old));
	return vb;
}

/* is a batch the stream's (not a person's, not DDL's)? */
static inline bool
of_stream(const VersionBatch *b)
{
	return b->origin == SW_ORIGIN_KAFKA || b->origin == SW_ORIGIN_WEBHOOK;
}

/*
 * Where the old row came from: its message's partition and offset (a
 * webhook row's place in its body and request), if it has them.
 */
static bool
row_where(Version *v, int32 *part, int64 *pos)
{
	bool		part_null;
	bool		pos_null;
	Datum		d1 = sw_meta_value(v->hidden, v->layout->part, &part_null);
	Datum		d2 = sw_meta_value(v->hidden, v->layout->pos, &pos_null);

	if (part_null || pos_null)
		return false;
	*part = DatumGetInt32(d1);
	*pos = DatumGetInt64(d2);
	return true;
}

/*
 * The batch that added a row, as the version counts it: NULL for one
 * folded, and also for one that a batch left behind (a person's or DDL's,
 * without edits) added before since, which counts as a folded batch's:
 * the rows that batch replaced may be gone already (see copy_row()).
 * Every pass must judge a row alike, or a key that a person retracted is
 * found by one and not by another.
 */
static VersionBatch *
row_added_by(Version *v, const SwLogRow *row)
{
	VersionBatch *added;

	if (row->added != SW_LOG_IN)
		return NULL;
	added = version_batch(v, row->added_batch);
	if (added->batch == 0 && added->ts < v->since)
		return NULL;
	return added;
}

/*
 * Is the old row the stream's?  By the batch that added it, or, for a row
 * added before since (whose batch is folded), by its position: a person's
 * new row has none.  (Storage made before positions were kept says
 * nothing: such a row counts as the stream's.)
 */
static bool
row_of_stream(Version *v, const VersionBatch *added)
{
	int32		part;
	int64		pos;

	if (added)
		return of_stream(added);
	return v->layout->part == InvalidAttrNumber || row_where(v, &part, &pos);
}

/* where a row of the old table is, in the error context of the copy */
static void
version_context(void *arg)
{
	Version    *v = arg;
	int32		part;
	int64		pos;

	if (v->hidden == NULL || v->layout == NULL || v->layout->part == InvalidAttrNumber)
		return;
	if (!row_where(v, &part, &pos))
		errcontext("copying a row of source table \"%s\" added by a person",
				   RelationGetRelationName(v->old));
	else if (v->oldsrc.kind == SW_KIND_KAFKA)
		errcontext("copying a row of source table \"%s\" from partition %d, offset " INT64_FORMAT,
				   RelationGetRelationName(v->old), part, pos);
	else
		errcontext("copying a row of source table \"%s\" from request " INT64_FORMAT ", row %d",
				   RelationGetRelationName(v->old), pos, part + 1);
}

/*
 * One pass over the old table's rows in the log, calling fn with each row
 * version that the version has (not retracted before since, committed),
 * and, with noop, its no-op rows, the traces of tombstones that found no
 * row (see sw_log_row()).
 */
static void
each_row(Version *v, void (*fn) (Version *v, const SwLogRow *row), bool noop)
{
	SwLogScan	ls;
	Relation	current = table_open(v->oldsrc.current_rel, AccessShareLock);
	Relation	history = table_open(v->oldsrc.history_rel, AccessShareLock);
	MemoryContext row_cxt = AllocSetContextCreate(CurrentMemoryContext,
												  "source_writes version row",
												  ALLOCSET_DEFAULT_SIZES);
	SwLogRow	row;

	sw_log_begin_scan(&ls, v->old, current, history, v->snapshot, v->map);
	ls.keep_noop = noop;
	while ((v->hidden = sw_log_next(&ls, &v->layout, &row)) != NULL)
	{
		MemoryContext old;

		if (row.retracted == SW_LOG_BEFORE || row.added == SW_LOG_LATER)
			continue;
		old = MemoryContextSwitchTo(row_cxt);
		fn(v, &row);
		MemoryContextSwitchTo(old);
		MemoryContextReset(row_cxt);
	}
	v->hidden = NULL;
	v->layout = NULL;
	sw_log_end_scan(&ls);
	table_close(history, AccessShareLock);
	table_close(current, AccessShareLock);
	MemoryContextDelete(row_cxt);
}

/* pass 1 of carry_edits 'false' on an upsert: the keys a person retracted */
static void
find_retracted_keys(Version *v, const SwLogRow *row)
{
	char	   *key;
	KeyWrites  *kw;
	bool		found;

	if (row->added == SW_LOG_LATER || row->retracted != SW_LOG_IN ||
		!row_of_stream(v, row_added_by(v, row)) ||
		of_stream(version_batch(v, row->retracted_batch)))
		return;
	read_old_row(v);
	key = row_key(v);
	kw = hash_search(v->keys, &key, HASH_FIND, NULL);
	if (kw)
		return;
	key = MemoryContextStrdup(v->keys_cxt, key);
	kw = hash_search(v->keys, &key, HASH_ENTER, &found);
	kw->key = key;
	kw->n = kw->max = 0;
	kw->ts = kw->batch = NULL;
}

/* add a write of the stream to a key */
static void
add_key_write(Version *v, KeyWrites *kw, const VersionBatch *b)
{
	if (kw->n == kw->max)
	{
		MemoryContext cxt = v->keys_cxt;

		kw->max = Max(8, kw->max * 2);
		kw->ts = kw->ts ? repalloc(kw->ts, sizeof(int64) * kw->max) :
			MemoryContextAlloc(cxt, sizeof(int64) * kw->max);
		kw->batch = kw->batch ? repalloc(kw->batch, sizeof(int64) * kw->max) :
			MemoryContextAlloc(cxt, sizeof(int64) * kw->max);
	}
	kw->ts[kw->n] = b->ts;
	kw->batch[kw->n] = b->batch;
	kw->n++;
}

/*
 * pass 2: the stream's writes of those keys: rows it added or retracted,
 * and its tombstones that found no row (no-op rows)
 */
static void
find_key_writes(Version *v, const SwLogRow *row)
{
	VersionBatch *added = row->added == SW_LOG_IN ? version_batch(v, row->added_batch) : NULL;
	VersionBatch *retracted = row->retracted == SW_LOG_IN ?
		version_batch(v, row->retracted_batch) : NULL;
	char	   *key;
	KeyWrites  *kw;

	if (!(added && of_stream(added)) && !(retracted && of_stream(retracted)))
		return;
	read_old_row(v);
	key = row_key(v);
	kw = hash_search(v->keys, &key, HASH_FIND, NULL);
	if (kw == NULL)
		return;
	if (added && of_stream(added))
		add_key_write(v, kw, added);
	if (retracted && of_stream(retracted))
		add_key_write(v, kw, retracted);
}

/*
 * carry_edits 'false': the batch that retracts, in the new version, a row
 * of the stream that a person retracted at ts: on an upsert source the
 * stream's first later write of its key, else none (0: it is current).
 * A write of the same transaction (ts is one per transaction) is later:
 * until the person retracted the row, the stream's writes of its key
 * would have retracted it themselves (an upsert replaces the key's row,
 * a tombstone deletes it), and a tombstone after it found no row.
 */
static int64
stream_retraction(Version *v, int64 ts)
{
	char	   *key;
	KeyWrites  *kw;
	int64		best = 0;
	int64		best_ts = PG_INT64_MAX;

	if (v->keys == NULL)
		return 0;
	key = row_key(v);
	kw = hash_search(v->keys, &key, HASH_FIND, NULL);
	if (kw == NULL)
		return 0;
	for (int i = 0; i < kw->n; i++)
		if (kw->ts[i] >= ts && kw->ts[i] < best_ts)
		{
			best_ts = kw->ts[i];
			best = kw->batch[i];
		}
	return best;
}

/* the old row's position (and raw message, if it keeps one), for the new one */
static void
old_position(Version *v, SwPosition *pos)
{
	bool		isnull;
	Datum		d;

	memset(pos, 0, sizeof(SwPosition));
	pos->known = row_where(v, &pos->part, &pos->pos);
	d = sw_meta_value(v->hidden, v->layout->delivery, &isnull);
	if (!isnull)
		pos->delivery = TextDatumGetCString(d);
	if (v->has_msg)
	{
		pos->raw_kept = true;
		for (int i = 0; i < SW_NUM_RAW; i++)
		{
			pos->raw_null[i] = true;
			if (v->layout->raw[i])
				pos->raw[i] = slot_getattr(v->hidden, v->layout->raw[i], &pos->raw_null[i]);
		}
	}
}

/*
 * A row of the stream that the new columns do not take: kept as an error
 * of the new version, as a message it could not decode would be: the
 * message itself if the row keeps it (retry_errors() decodes it again),
 * else where it came from, and the old row as JSON in the reason.
 */
static void
keep_error(Version *v, const char *reason)
{
	SwPosition	pos;
	SwMessage	msg = {0};

	if (v->has_msg)
	{
		sw_keep_error(RelationGetRelid(v->new), &v->msg, reason);
		v->nerrors++;
		return;
	}
	old_position(v, &pos);
	msg.partition = -1;
	msg.offset = -1;
	msg.timestamp_ms = -1;
	if (pos.known && v->oldsrc.kind == SW_KIND_KAFKA)
	{
		msg.partition = pos.part;
		msg.offset = pos.pos;
	}
	sw_keep_error(RelationGetRelid(v->new), &msg,
				  psprintf("%s: the row was %s", reason, old_row_json(v)));
	v->nerrors++;
}

/* a position of a row: a Kafka partition and offset, a webhook row's place */
typedef struct OriginalKey
{
	int64		pos;
	int32		part;
} OriginalKey;

/* the message of the rows at a position, once found */
typedef struct Original
{
	OriginalKey key;
	SwMessage  *msg;			/* NULL: not found (yet) */
} Original;

/* the old row's position as a key, if it has one */
static bool
row_position(Version *v, OriginalKey *key)
{
	memset(key, 0, sizeof(OriginalKey));
	return row_where(v, &key->part, &key->pos);
}

/*
 * Pass 1 of new columns from kept messages: the positions of rows that
 * keep no message but have a position (a person changed them).
 */
static void
find_changed_rows(Version *v, const SwLogRow *row)
{
	SwMessage	msg;
	OriginalKey key;
	bool		found;
	Original   *o;

	if (!row_position(v, &key) || sw_raw_message(v->layout, v->hidden, &msg))
		return;
	o = hash_search(v->originals, &key, HASH_ENTER, &found);
	if (!found)
		o->msg = NULL;
}

/* a copy of a message, in memory of cxt */
static SwMessage *
copy_message(MemoryContext cxt, const SwMessage *from)
{
	MemoryContext old = MemoryContextSwitchTo(cxt);
	SwMessage  *m = palloc(sizeof(SwMessage));
	SwHeader   *headers = palloc0(sizeof(SwHeader) * Max(from->nheaders, 1));

	*m = *from;
	m->value = from->value ? pnstrdup(from->value, from->value_len) : NULL;
	m->key = from->key ? pnstrdup(from->key, from->key_len) : NULL;
	m->delivery = from->delivery ? pstrdup(from->delivery) : NULL;
	for (int i = 0; i < from->nheaders; i++)
	{
		headers[i].name = pstrdup(from->headers[i].name);
		headers[i].value = from->headers[i].value ?
			pnstrdup(from->headers[i].value, from->headers[i].len) : NULL;
		headers[i].len = from->headers[i].len;
	}
	m->headers = headers;
	MemoryContextSwitchTo(old);
	return m;
}

/* pass 2: the messages that the rows at those positions keep */
static void
find_original_messages(Version *v, const SwLogRow *row)
{
	SwMessage	msg;
	OriginalKey key;
	Original   *o;

	if (!row_position(v, &key))
		return;
	o = hash_search(v->originals, &key, HASH_FIND, NULL);
	if (o == NULL || o->msg != NULL || !sw_raw_message(v->layout, v->hidden, &msg))
		return;
	o->msg = copy_message(v->originals_cxt, &msg);
}

/* the message of the row a person changed into the old row, or NULL */
static SwMessage *
original_message(Version *v)
{
	OriginalKey key;
	Original   *o;

	if (v->originals == NULL || !row_position(v, &key))
		return NULL;
	o = hash_search(v->originals, &key, HASH_FIND, NULL);
	return o ? o->msg : NULL;
}

/*
 * The new row of a no-op row: its key, cast, and the other columns NULL
 * (they are NULL in the old one, and are not cast: a domain could refuse
 * NULL, or a default be made).
 */
static void
make_noop_row(Version *v)
{
	cast_old_row(v, true);
}

/*
 * A no-op row of the old table (a tombstone that found no row): the same
 * in the new one, added and retracted by the new id of its batch, so that
 * a version of the version knows the stream wrote its key then.  Only its
 * key: a key the new type does not take leaves it behind, as the rows of
 * that key are.
 */
static void
copy_noop(Version *v, const SwLogRow *row)
{
	VersionBatch *b;
	ErrorData  *error = NULL;
	SwPosition	pos;

	if (row->added != SW_LOG_IN)
		return;
	b = version_batch(v, row->added_batch);
	if (b->batch == 0)
		return;					/* a person's batch, left behind */
	read_old_row(v);
	if (!v->fallible)
		make_noop_row(v);
	else if (!run_safely(v, make_noop_row, &error))
		return;
	v->has_msg = sw_raw_message(v->layout, v->hidden, &v->msg);
	old_position(v, &pos);
	sw_loader_add(v->loader, v->newvalues, v->newnulls, b->batch, b->batch, &pos, 1);
}

/* pass 3: write a row version of the old table into the new one */
static void
copy_row(Version *v, const SwLogRow *row)
{
	VersionBatch *added = row_added_by(v, row);
	VersionBatch *retracted = row->retracted == SW_LOG_IN ?
		version_batch(v, row->retracted_batch) : NULL;
	int64		added_id;
	int64		retracted_id;
	SwPosition	pos;
	bool		made = true;
	ErrorData  *error = NULL;

	/*
	 * Before since, the log still has what compaction has not deleted yet:
	 * a row retracted then is a row of no readable time, and one added then
	 * by a batch that stays behind (a person's or DDL's, without edits)
	 * counts as a folded batch's, the stream's by its position, since the
	 * rows that batch replaced may be gone already (row_added_by()).
	 */
	if (retracted && retracted->ts < v->since)
		return;
	added_id = added ? added->batch : v->folded;
	retracted_id = retracted ? retracted->batch : 0;

	if (row->noop)
	{
		copy_noop(v, row);
		return;
	}
	/* a row a person added stays behind without edits */
	if ((added && added->batch == 0) || (!v->carry && !row_of_stream(v, added)))
		return;
	read_old_row(v);
	if (retracted && retracted->batch == 0)
		retracted_id = stream_retraction(v, retracted->ts);
	/* current again: its values may be from before a domain's column */
	v->check_row = v->any_domain && retracted && retracted->batch == 0 &&
		retracted_id == 0;
	v->past_row = retracted_id != 0;

	/*
	 * a row that keeps its message gets its new columns from it; one that
	 * a person changed, from that of the row it replaced
	 */
	v->has_msg = sw_raw_message(v->layout, v->hidden, &v->msg);
	v->decode_msg = v->has_msg ? &v->msg : original_message(v);
	v->use_decoded = false;
	if (v->decode_msg && v->new_columns)
	{
		v->decode_msg->topic = v->newst->topic;
		if (v->newst->debezium)
			v->decode_msg->op = sw_decoder_event_op(v->decoder, v->decode_msg);
		v->use_decoded = run_safely(v, decode_message, &error);
	}
	if (v->fallible || v->check_row)
		made = run_safely(v, make_new_row, &error);
	else
		make_new_row(v);
	if (!made)
	{
		if (row_of_stream(v, added) && retracted_id == 0)
			keep_error(v, sw_error_text(error));
		else if (row_of_stream(v, added))
			v->npast++;			/* a past version: not the present's error */
		else
			uncarried(v, row->added == SW_LOG_IN ? row->added_batch : NULL, "insert",
					  error->message);
		if (retracted && retracted->batch != 0 && !of_stream(retracted))
			uncarried(v, row->retracted_batch, "delete",
					  "the row it deletes is not in the new version");
		return;
	}
	complete_new_row(v);
	old_position(v, &pos);
	sw_loader_add(v->loader, v->newvalues, v->newnulls, added_id, retracted_id, &pos, 1);
}

/* where the old table's ingestion is: its offsets, or its webhook keys */
static void
copy_progress(Version *v)
{
	Oid			relid = RelationGetRelid(v->new);
	ListCell   *lc;

	if (v->oldsrc.kind == SW_KIND_KAFKA)
		foreach(lc, sw_catalog_progress_at(RelationGetRelid(v->old), v->snapshot))
		{
			SwProgress *p = lfirst(lc);

			sw_catalog_start_progress(relid, p->part, p->next_offset, p->topic, p->cluster_id);
			(void) sw_catalog_set_progress(relid, p);
		}
	else
		foreach(lc, sw_deliveries_of(RelationGetRelid(v->old), v->snapshot))
		{
			SwDelivery *d = lfirst(lc);

			sw_delivery_insert(relid, d->key, d->ts, d->body_sha256, d->rows);
		}
	sw_catalog_copy_errors(RelationGetRelid(v->old), relid, v->snapshot);
}

/* do two key lists (of column names) name the same columns, in any order? */
static bool
same_key(List *a, List *b)
{
	ListCell   *lc;

	if (list_length(a) != list_length(b))
		return false;
	foreach(lc, a)
	{
		ListCell   *lc2;
		bool		found = false;

		foreach(lc2, b)
			found |= strcmp((char *) lfirst(lc), (char *) lfirst(lc2)) == 0;
		if (!found)
			return false;
	}
	return true;
}

/*
 * The old table that option version_of names, opened and checked: a
 * source table of the same kind (and topic) that the caller owns, not the
 * new one, not moved.
 */
static void
open_old_table(Version *v, const SwSourceTable *st)
{
	Oid			relid;

	/* the owner's only: no lock is taken on another role's table */
	relid = RangeVarGetRelidExtended(makeRangeVarFromNameList(stringToQualifiedNameList(st->version_of)),
									 AccessShareLock, 0, RangeVarCallbackOwnsRelation, NULL);
	if (relid == RelationGetRelid(v->new))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source table \"%s\" cannot be a version of itself",
						RelationGetRelationName(v->new))));
	if (!sw_source_lookup(relid, &v->oldsrc))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a source table", st->version_of),
				 errhint("Option version_of names the source table that the new one is a version of.")));
	if (v->oldsrc.moved)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source table \"%s\" was moved", get_rel_name(relid)),
				 errhint("Make the version of the table it was moved to.")));
	/*
	 * A write of this transaction to the old table is not in its log until
	 * the commit stamps it (as for a fenced export): the copy would miss it.
	 */
	if (sw_transaction_writes(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot make a version of source table \"%s\" in a transaction that writes to it",
						get_rel_name(relid)),
				 errdetail("Its writes are not in its log until the transaction commits."),
				 errhint("Make the version in a transaction of its own, or after the writes commit.")));
	v->old = relation_open(relid, NoLock);
	v->oldst = sw_source_table(v->old);
	if (v->oldst->kind != st->kind)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("source table \"%s\" is a %s source, and \"%s\" a %s source",
						RelationGetRelationName(v->old), sw_kind_name(v->oldst->kind),
						RelationGetRelationName(v->new), sw_kind_name(st->kind)),
				 errhint("A version is of the same kind as the table it is a version of.")));
	if (v->oldst->upsert != st->upsert || v->oldst->debezium != st->debezium ||
		!same_key(v->oldst->key, st->key))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source table \"%s\" has another envelope or key than \"%s\"",
						RelationGetRelationName(v->new), RelationGetRelationName(v->old)),
				 errdetail("Rows that are one row each in the old table could be rows of one key in the new one."),
				 errhint("Give the new version the options envelope and key of the table it is a version of.")));
	if (st->kind == SW_KIND_KAFKA && strcmp(v->oldst->topic, st->topic) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("source table \"%s\" reads topic \"%s\", and \"%s\" topic \"%s\"",
						RelationGetRelationName(v->old), v->oldst->topic,
						RelationGetRelationName(v->new), st->topic),
				 errdetail("A version goes on from the offsets of the table it is a version of, in its topic."),
				 errhint("Give the new version the same topic.")));
}

/*
 * Make a new source table (created by this transaction, with new, empty
 * storage) a version of the one its option version_of names: copy that
 * one's retained log, as a snapshot taken now sees it, its offsets or
 * webhook keys, and its kept errors.  The old table goes on as it was.
 */
void
sw_version_create(Oid relid)
{
	Version		v = {0};
	SwSourceTable *st;
	HASHCTL		ctl;
	SwFrontiers frontiers;
	SwFrontiers stored;
	Oid			oldid;
	HASH_SEQ_STATUS status;
	SwBatch    *batch;
	ErrorContextCallback context;

	v.new = relation_open(relid, AccessExclusiveLock);
	st = sw_source_table(v.new);
	if (st->version_of == NULL)
	{
		if (st->carry_edits_given)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"carry_edits\" is only valid with option \"version_of\""),
					 errhint("It says whether a new version of a source table gets the edits of the one it is a version of.")));
		relation_close(v.new, NoLock);
		return;
	}
	sw_source_resolve(relid, &v.newsrc, true);
	open_old_table(&v, st);
	oldid = RelationGetRelid(v.old);
	v.newst = st;
	v.carry = st->carry_edits;
	v.decoder = sw_decoder_create(v.new, st);
	v.decoded = MakeSingleTupleTableSlot(RelationGetDescr(v.new), &TTSOpsVirtual);
	v.olddesc = RelationGetDescr(v.old);
	v.newdesc = RelationGetDescr(v.new);
	v.oldvalues = palloc(sizeof(Datum) * Max(v.olddesc->natts, 1));
	v.oldnulls = palloc(sizeof(bool) * Max(v.olddesc->natts, 1));
	v.newvalues = palloc(sizeof(Datum) * Max(v.newdesc->natts, 1));
	v.newnulls = palloc(sizeof(bool) * Max(v.newdesc->natts, 1));
	map_columns(&v);

	/* one snapshot: the rows, batches and offsets hold together */
	v.snapshot = RegisterSnapshot(GetLatestSnapshot());
	if (!sw_catalog_frontiers(oldid, v.snapshot, &frontiers))
		elog(ERROR, "source table \"%s\" has no catalog row", get_rel_name(oldid));
	v.map = sw_log_batches(oldid, PG_INT64_MIN, PG_INT64_MAX, v.snapshot);

	/* the batches, with new ids (those left behind, without) */
	ctl.keysize = sizeof(int64);
	ctl.entrysize = sizeof(VersionBatch);
	ctl.hcxt = CurrentMemoryContext;
	v.batches = hash_create("source_writes version batches", 1024, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	hash_seq_init(&status, v.map->batches);
	while ((batch = hash_seq_search(&status)) != NULL)
		add_batch(batch, &v);
	sw_segments_each(v.map->segments, add_batch, &v);
	if (!v.carry)
		keep_oldest_time(&v);
	v.folded = sw_catalog_new_batch_id();
	v.since = frontiers.since;

	/* the rows */
	context.callback = version_context;
	context.arg = &v;
	context.previous = error_context_stack;
	error_context_stack = &context;
	if (!v.carry && v.oldst->upsert && v.oldst->key != NIL)
	{
		prepare_keys(&v);
		each_row(&v, find_retracted_keys, false);
		if (hash_get_num_entries(v.keys) > 0)
			each_row(&v, find_key_writes, true);
		else
			v.keys = NULL;
	}
	if (v.new_columns && sw_storage_raw_columns(&v.oldsrc) > 0)
	{
		ctl.keysize = sizeof(OriginalKey);
		ctl.entrysize = sizeof(Original);
		ctl.hcxt = v.originals_cxt = CurrentMemoryContext;
		v.originals = hash_create("source_writes version messages", 64, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
		each_row(&v, find_changed_rows, false);
		if (hash_get_num_entries(v.originals) > 0)
			each_row(&v, find_original_messages, false);
		else
			v.originals = NULL;
	}
	v.loader = sw_loader_open(v.new, &v.newsrc);
	each_row(&v, copy_row, true);
	(void) sw_loader_close(v.loader);
	error_context_stack = context.previous;

	copy_progress(&v);
	if (sw_catalog_stored_frontiers(relid, &stored) && frontiers.since < stored.since)
		sw_catalog_set_since(relid, frontiers.since, stored.retain);
	UnregisterSnapshot(v.snapshot);
	ExecDropSingleTupleTableSlot(v.decoded);
	ExecDropSingleTupleTableSlot(v.newslot);
	FreeExecutorState(v.estate);
	CommandCounterIncrement();

	/* the new table's constraints hold for what it has now */
	sw_constraints_check(v.new);
	if (v.nerrors > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld row of source table \"%s\" is not in \"%s\": its columns do not take it",
							   "%lld rows of source table \"%s\" are not in \"%s\": its columns do not take them",
							   v.nerrors, (long long) v.nerrors, RelationGetRelationName(v.old),
						RelationGetRelationName(v.new)),
				 errhint("See source_writes.errors.")));
	if (v.npast > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld past version of a row of source table \"%s\" is not in the history of \"%s\": its columns do not take it",
							   "%lld past versions of rows of source table \"%s\" are not in the history of \"%s\": its columns do not take them",
							   v.npast, (long long) v.npast, RelationGetRelationName(v.old),
							   RelationGetRelationName(v.new))));
	if (v.nuncarried > 0)
		ereport(NOTICE,
				(errmsg_plural("%lld edit of source table \"%s\" is not carried to \"%s\"",
							   "%lld edits of source table \"%s\" are not carried to \"%s\"",
							   v.nuncarried, (long long) v.nuncarried, RelationGetRelationName(v.old),
						RelationGetRelationName(v.new)),
				 errhint("See source_writes.uncarried_edits.")));
	CacheInvalidateRelcacheByRelid(relid);
	relation_close(v.old, NoLock);
	relation_close(v.new, NoLock);
}
