/*-------------------------------------------------------------------------
 *
 * storage.c
 *		  The hidden relations that hold a source table's rows, and keeping
 *		  them in step with the foreign table
 *
 * Each source table has two heaps in schema source_writes_internal, named
 * after the foreign table's OID so that renaming or moving the table needs
 * no change:
 *
 *		current_<oid>	the table's columns, "$batch", later columns
 *		history_<oid>	the table's columns, "$batch", "$retracted", later columns
 *
 * They have the same owner as the foreign table and depend on it
 * internally, like a table's TOAST relation: dropping the foreign table
 * (directly, with its server, schema or the extension) drops them, and they
 * cannot be dropped alone.
 *
 * The foreign table's columns are mirrored attnum by attnum, dropped ones
 * included: the columns it had when it was created come first, so that a
 * hidden tuple can be read with the foreign table's own descriptor (the
 * scan hands the heap tuple over without copying); our own columns follow;
 * columns added later come after them (see SwLayout).  sw_storage_sync()
 * restores that after any DDL by comparing the two descriptors: a new
 * attnum is an added column, a dropped one a drop, a different name a
 * rename and a different type a conversion of the stored rows.  Because it
 * compares states rather than replaying commands, one function serves
 * CREATE, every form of ALTER and inherited changes alike, and running it
 * twice changes nothing.
 *
 * IDENTIFICATION
 *		  src/storage.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/heap.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "catalog/toasting.h"
#include "commands/event_trigger.h"
#include "commands/defrem.h"
#include "commands/tablecmds.h"
#include "tcop/utility.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_coerce.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "source_writes.h"

static Oid	create_hidden_relation(Relation ftrel, const char *prefix, int nmeta);
static void sync_hidden_relation(Relation ftrel, Oid hiddenid);
static void follow_key_renames(Relation ftrel, Oid hiddenid);
static void sync_key_index(Relation ftrel, Oid current_rel, SwSourceTable *st);

/*
 * Make the hidden relations and the catalog row of a source table match
 * the foreign table, creating them if it is new.  Called at the end of any
 * command that created or altered the table; errors abort the command, so
 * nothing half-done remains.
 */
void
sw_storage_sync(Oid relid)
{
	Relation	ftrel = relation_open(relid, AccessExclusiveLock);
	SwCatalogEntry entry;
	SwSourceTable *st;
	bool		exists = sw_catalog_lookup(relid, &entry);

	if (exists)
		follow_key_renames(ftrel, entry.current_rel);

	/* every option and column must make sense before anything is stored */
	st = sw_source_table(ftrel);

	if (!exists)
	{
		entry.relid = relid;
		entry.kind = st->kind;
		entry.current_rel = create_hidden_relation(ftrel, "current", SW_CURRENT_META);
		entry.history_rel = create_hidden_relation(ftrel, "history", SW_HISTORY_META);
		/* nothing is written before creation: both start now */
		entry.upper = entry.since = sw_now_ms();
		sw_catalog_insert(&entry);
		CommandCounterIncrement();
	}
	else if (entry.kind != st->kind)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot turn %s source table \"%s\" into a %s source table",
						sw_kind_name(entry.kind), RelationGetRelationName(ftrel),
						sw_kind_name(st->kind)),
				 errdetail("The type of a source's server cannot change while it has source tables."),
				 errhint("Create a new server of the other type and new source tables on it.")));

	sync_hidden_relation(ftrel, entry.current_rel);
	sync_hidden_relation(ftrel, entry.history_rel);
	sync_key_index(ftrel, entry.current_rel, st);

	relation_close(ftrel, NoLock);
}

/*
 * Forget a dropped source table.  Its hidden relations went with it through
 * their internal dependency; its catalog row and batches are left.
 */
void
sw_storage_forget(Oid relid)
{
	sw_catalog_delete(relid);
	sw_catalog_delete_batches(relid);
}

/*
 * The name of the unique index on the key of an upsert source.
 */
static void
key_index_name(Oid current_rel, char *name)
{
	snprintf(name, NAMEDATALEN, "%s_key", get_rel_name(current_rel));
}

/*
 * The unique index on the key columns of an upsert source, or InvalidOid.
 */
Oid
sw_storage_key_index(Oid current_rel)
{
	char		name[NAMEDATALEN];

	key_index_name(current_rel, name);
	return get_relname_relid(name, get_rel_namespace(current_rel));
}

/* error context while the key index of an upsert source is built */
static void
key_index_error_callback(void *arg)
{
	errcontext("while making the key of upsert source \"%s\"", (const char *) arg);
}

/*
 * Upsert sources keep a unique index on their key columns in the current
 * heap.  Make it match the options: build it, rebuild it when the key
 * changed, drop it when the envelope is no longer 'upsert'.  Like the
 * hidden relations, it is made without privilege checks on the internal
 * schema.
 */
static void
sync_key_index(Relation ftrel, Oid current_rel, SwSourceTable *st)
{
	Oid			existing = sw_storage_key_index(current_rel);
	int			nkeys = list_length(st->key);
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * Max(nkeys, 1));
	Relation	current;
	IndexInfo  *info;
	Oid		   *collations;
	Oid		   *opclasses;
	int16	   *coloptions;
	List	   *colnames = NIL;
	char		name[NAMEDATALEN];
	ErrorContextCallback errcallback;
	int			k = 0;
	SwLayout	layout;
	ListCell   *lc;

	current = table_open(current_rel, ShareLock);
	sw_layout(current, &layout);
	foreach(lc, st->key)
		for (int i = 0; i < st->ncolumns; i++)
			if (strcmp(st->columns[i].name, lfirst(lc)) == 0)
				attnums[k++] = sw_hidden_attnum(&layout, st->columns[i].attnum);

	if (OidIsValid(existing))
	{
		HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(existing));
		Form_pg_index index;
		bool		same;
		ObjectAddress addr;

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for index %u", existing);
		index = (Form_pg_index) GETSTRUCT(tuple);
		same = st->upsert && index->indnkeyatts == nkeys &&
			memcmp(index->indkey.values, attnums, sizeof(AttrNumber) * nkeys) == 0;
		ReleaseSysCache(tuple);
		if (same)
		{
			table_close(current, NoLock);
			return;
		}
		ObjectAddressSet(addr, RelationRelationId, existing);
		performDeletion(&addr, DROP_RESTRICT, PERFORM_DELETION_INTERNAL);
		CommandCounterIncrement();
	}
	if (!st->upsert)
	{
		table_close(current, NoLock);
		return;
	}

	info = makeIndexInfo(nkeys, nkeys, BTREE_AM_OID, NIL, NIL,
						 true, false, true, false);
	collations = palloc(sizeof(Oid) * nkeys);
	opclasses = palloc(sizeof(Oid) * nkeys);
	coloptions = palloc0(sizeof(int16) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(current), attnums[i] - 1);

		info->ii_IndexAttrNumbers[i] = attnums[i];
		collations[i] = att->attcollation;
		opclasses[i] = GetDefaultOpClass(att->atttypid, BTREE_AM_OID);
		if (!OidIsValid(opclasses[i]))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("key column \"%s\" of source table \"%s\" has type %s, which cannot be a key",
							NameStr(att->attname), RelationGetRelationName(ftrel),
							format_type_be(att->atttypid)),
					 errhint("Key columns need a type with a default btree operator class, such as text, integer or jsonb.")));
		colnames = lappend(colnames, NameStr(att->attname));
	}

	errcallback.callback = key_index_error_callback;
	errcallback.arg = RelationGetRelationName(ftrel);
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	key_index_name(current_rel, name);
	index_create(current, name, InvalidOid, InvalidOid, InvalidOid, InvalidOid,
				 info, colnames, BTREE_AM_OID, current->rd_rel->reltablespace,
				 collations, opclasses, coloptions, (Datum) 0,
				 0, 0, true, true, NULL);

	error_context_stack = errcallback.previous;
	table_close(current, NoLock);
	CommandCounterIncrement();
}

/*
 * Create a hidden relation: the foreign table's columns, then ours.  A
 * column the table has already dropped gets a placeholder, which the
 * caller's sync drops again so that the attnums line up.
 */
static Oid
create_hidden_relation(Relation ftrel, const char *prefix, int nmeta)
{
	Oid			nsp = get_namespace_oid(SW_INTERNAL_SCHEMA, false);
	TupleDesc	ftdesc = RelationGetDescr(ftrel);
	TupleDesc	desc = CreateTemplateTupleDesc(ftdesc->natts + nmeta);
	char		relname[NAMEDATALEN];
	Oid			relid;
	ObjectAddress hidden;
	ObjectAddress table;

	snprintf(relname, sizeof(relname), "%s_%u", prefix, RelationGetRelid(ftrel));

	for (int k = 1; k <= ftdesc->natts; k++)
	{
		Form_pg_attribute att = TupleDescAttr(ftdesc, k - 1);

		if (att->attisdropped)
			TupleDescInitEntry(desc, k, psprintf("$dropped_%d", k), INT4OID, -1, 0);
		else
		{
			TupleDescInitEntry(desc, k, NameStr(att->attname), att->atttypid,
							   att->atttypmod, att->attndims);
			TupleDescInitEntryCollation(desc, k, att->attcollation);
		}
	}
	TupleDescInitEntry(desc, ftdesc->natts + 1, SW_META_BATCH, INT8OID, -1, 0);
	if (nmeta > 1)
		TupleDescInitEntry(desc, ftdesc->natts + 2, SW_META_RETRACTED, INT8OID, -1, 0);
	for (int i = 0; i < nmeta; i++)
		TupleDescAttr(desc, ftdesc->natts + i)->attnotnull = true;

	/*
	 * Like a TOAST table: no privilege checks on the internal schema, no
	 * default privileges, and the owner of the table it belongs to.
	 */
	relid = heap_create_with_catalog(relname, nsp, InvalidOid,
									 InvalidOid, InvalidOid, InvalidOid,
									 ftrel->rd_rel->relowner,
									 HEAP_TABLE_AM_OID,
									 desc, NIL,
									 RELKIND_RELATION,
									 RELPERSISTENCE_PERMANENT,
									 false, false,
									 ONCOMMIT_NOOP,
									 (Datum) 0,
									 false, /* use_user_acl */
									 true,	/* allow_system_table_mods */
									 true,	/* is_internal */
									 InvalidOid,
									 NULL);

	ObjectAddressSet(hidden, RelationRelationId, relid);
	ObjectAddressSet(table, RelationRelationId, RelationGetRelid(ftrel));
	recordDependencyOn(&hidden, &table, DEPENDENCY_INTERNAL);

	CommandCounterIncrement();
	NewRelationCreateToastTable(relid, (Datum) 0);
	CommandCounterIncrement();
	return relid;
}

/*
 * Where a hidden relation's own columns are.
 */
void
sw_layout(Relation hidden, SwLayout *layout)
{
	TupleDesc	desc = RelationGetDescr(hidden);

	layout->meta = InvalidAttrNumber;
	layout->nmeta = 0;
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		if (strcmp(NameStr(att->attname), SW_META_BATCH) == 0)
			layout->meta = att->attnum;
		if (strcmp(NameStr(att->attname), SW_META_BATCH) == 0 ||
			strcmp(NameStr(att->attname), SW_META_RETRACTED) == 0)
			layout->nmeta++;
	}
	if (layout->meta == InvalidAttrNumber)
		elog(ERROR, "hidden relation \"%s\" has no column \"%s\"",
			 RelationGetRelationName(hidden), SW_META_BATCH);
}

/*
 * Copy the values of a row of the foreign table (natts attributes) into
 * their places in a hidden row; our own columns are the caller's.
 */
void
sw_to_hidden(const SwLayout *layout, int natts, const Datum *values,
			 const bool *isnull, Datum *hvalues, bool *hisnull)
{
	int			before = Min(natts, layout->meta - 1);

	memcpy(hvalues, values, before * sizeof(Datum));
	memcpy(hisnull, isnull, before * sizeof(bool));
	if (natts > before)
	{
		memcpy(hvalues + before + layout->nmeta, values + before,
			   (natts - before) * sizeof(Datum));
		memcpy(hisnull + before + layout->nmeta, isnull + before,
			   (natts - before) * sizeof(bool));
	}
}

/*
 * The opposite: a row of the foreign table from a hidden row.
 */
void
sw_from_hidden(const SwLayout *layout, int natts, const Datum *hvalues,
			   const bool *hisnull, Datum *values, bool *isnull)
{
	int			before = Min(natts, layout->meta - 1);

	memcpy(values, hvalues, before * sizeof(Datum));
	memcpy(isnull, hisnull, before * sizeof(bool));
	if (natts > before)
	{
		memcpy(values + before, hvalues + before + layout->nmeta,
			   (natts - before) * sizeof(Datum));
		memcpy(isnull + before, hisnull + before + layout->nmeta,
			   (natts - before) * sizeof(bool));
	}
}

/*
 * Rename a column of a hidden relation in the catalog, as renameatt() does,
 * without looking the relation up by name (the internal schema is closed to
 * the users on whose behalf this runs).
 */
static void
rename_hidden_column(Oid relid, AttrNumber attnum, const char *newname)
{
	Relation	attrel = table_open(AttributeRelationId, RowExclusiveLock);
	HeapTuple	tuple = SearchSysCacheCopyAttNum(relid, attnum);

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for attribute %d of relation %u",
			 attnum, relid);
	namestrcpy(&((Form_pg_attribute) GETSTRUCT(tuple))->attname, newname);
	CatalogTupleUpdate(attrel, &tuple->t_self, tuple);
	InvokeObjectPostAlterHook(RelationRelationId, relid, attnum);
	heap_freetuple(tuple);
	table_close(attrel, RowExclusiveLock);
}

static AlterTableCmd *
make_alter_cmd(AlterTableType subtype, const char *name, Node *def)
{
	AlterTableCmd *cmd = makeNode(AlterTableCmd);

	cmd->subtype = subtype;
	cmd->name = pstrdup(name);
	cmd->def = def;
	cmd->behavior = DROP_RESTRICT;
	return cmd;
}

/*
 * ALTER COLUMN TYPE ... USING col::type: the stored values follow the new
 * type through an explicit cast, after checking that there is one.
 */
static AlterTableCmd *
make_type_change(Relation ftrel, Form_pg_attribute fatt, Form_pg_attribute hatt)
{
	ColumnDef  *def;
	TypeCast   *cast = makeNode(TypeCast);
	ColumnRef  *ref = makeNode(ColumnRef);
	Oid			from = hatt->atttypid;
	Oid			to = fatt->atttypid;

	if (!can_coerce_type(1, &from, &to, COERCION_EXPLICIT))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("cannot change the type of column \"%s\" of source table \"%s\" from %s to %s",
						NameStr(fatt->attname), RelationGetRelationName(ftrel),
						format_type_be(from), format_type_be(to)),
				 errdetail("The stored rows cannot be converted: there is no cast from %s to %s.",
						   format_type_be(from), format_type_be(to)),
				 errhint("Add a column of the new type, fill it with UPDATE, and drop the old column.")));

	ref->fields = list_make1(makeString(pstrdup(NameStr(fatt->attname))));
	ref->location = -1;
	cast->arg = (Node *) ref;
	cast->typeName = makeTypeNameFromOid(to, fatt->atttypmod);
	cast->location = -1;

	def = makeColumnDef(NameStr(fatt->attname), to, fatt->atttypmod,
						fatt->attcollation);
	def->raw_default = (Node *) cast;
	return make_alter_cmd(AT_AlterColumnType, NameStr(fatt->attname), (Node *) def);
}

/* error context while the stored rows of a source table are rewritten */
static void
conversion_error_callback(void *arg)
{
	errcontext("while converting the stored rows of source table \"%s\"",
			   (const char *) arg);
}

/*
 * Run ALTER TABLE subcommands on a hidden relation as its owner (the
 * owner of the source table), so that casts and domain checks run with
 * that user's rights and not with the rights of whoever holds ours.  The
 * relation is given by OID, so no lookup in the closed internal schema is
 * needed, and event triggers do not collect these internal subcommands.
 */
static void
alter_hidden_relation(Relation ftrel, Oid hiddenid, List *cmds)
{
	AlterTableStmt *stmt;
	AlterTableUtilityContext context = {0};
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	ErrorContextCallback errcallback;

	if (cmds == NIL)
		return;

	stmt = makeNode(AlterTableStmt);
	stmt->relation = makeRangeVar(SW_INTERNAL_SCHEMA, get_rel_name(hiddenid), -1);
	stmt->relation->inh = false;
	stmt->cmds = cmds;
	stmt->objtype = OBJECT_TABLE;
	context.relid = hiddenid;
	context.queryString = "";

	errcallback.callback = conversion_error_callback;
	errcallback.arg = RelationGetRelationName(ftrel);
	errcallback.previous = error_context_stack;
	error_context_stack = &errcallback;

	GetUserIdAndSecContext(&save_userid, &save_sec_context);
	SetUserIdAndSecContext(ftrel->rd_rel->relowner,
						   save_sec_context | SECURITY_LOCAL_USERID_CHANGE |
						   SECURITY_RESTRICTED_OPERATION);
	save_nestlevel = NewGUCNestLevel();

	EventTriggerInhibitCommandCollection();
	AlterTable(stmt, AccessExclusiveLock, &context);
	EventTriggerUndoInhibitCommandCollection();

	AtEOXact_GUC(false, save_nestlevel);
	SetUserIdAndSecContext(save_userid, save_sec_context);
	error_context_stack = errcallback.previous;

	CommandCounterIncrement();
}

/*
 * Bring one hidden relation in step with the foreign table: owner, then
 * names, then added, converted and dropped columns.
 */
static void
sync_hidden_relation(Relation ftrel, Oid hiddenid)
{
	TupleDesc	fdesc = RelationGetDescr(ftrel);
	Relation	hidden = table_open(hiddenid, AccessExclusiveLock);
	TupleDesc	hdesc;
	SwLayout	layout;
	List	   *cmds = NIL;
	List	   *placeholders = NIL;
	bool		renamed = false;

	if (hidden->rd_rel->relowner != ftrel->rd_rel->relowner)
	{
		ATExecChangeOwner(hiddenid, ftrel->rd_rel->relowner, true,
						  AccessExclusiveLock);
		CommandCounterIncrement();
	}

	/* renames are catalog updates; do them first so later steps see them */
	sw_layout(hidden, &layout);
	hdesc = RelationGetDescr(hidden);
	for (int k = 1; k <= fdesc->natts && sw_hidden_attnum(&layout, k) <= hdesc->natts; k++)
	{
		Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
		Form_pg_attribute hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);

		if (!fatt->attisdropped && !hatt->attisdropped &&
			strcmp(NameStr(fatt->attname), NameStr(hatt->attname)) != 0)
		{
			rename_hidden_column(hiddenid, hatt->attnum, NameStr(fatt->attname));
			renamed = true;
		}
	}
	if (renamed)
		CommandCounterIncrement();

	hdesc = RelationGetDescr(hidden);
	for (int k = 1; k <= fdesc->natts; k++)
	{
		Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
		Form_pg_attribute hatt;

		if (sw_hidden_attnum(&layout, k) > hdesc->natts)
		{
			/*
			 * New attnum.  A column added and dropped before we saw it still
			 * takes its attnum: add a placeholder and drop it again.
			 */
			if (fatt->attisdropped)
			{
				char	   *name = psprintf("$dropped_%d", k);

				cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, name,
													(Node *) makeColumnDef(name, INT4OID, -1, InvalidOid)));
				placeholders = lappend(placeholders,
									   make_alter_cmd(AT_DropColumn, name, NULL));
			}
			else
				cmds = lappend(cmds, make_alter_cmd(AT_AddColumn, NameStr(fatt->attname),
													(Node *) makeColumnDef(NameStr(fatt->attname),
																		   fatt->atttypid,
																		   fatt->atttypmod,
																		   fatt->attcollation)));
			continue;
		}

		hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);
		if (fatt->attisdropped && !hatt->attisdropped)
			cmds = lappend(cmds, make_alter_cmd(AT_DropColumn, NameStr(hatt->attname), NULL));
		else if (!fatt->attisdropped && hatt->attisdropped)
			elog(ERROR, "hidden relation \"%s\" is out of step with source table \"%s\" at column %d",
				 RelationGetRelationName(hidden), RelationGetRelationName(ftrel), k);
		else if (!fatt->attisdropped &&
				 (fatt->atttypid != hatt->atttypid ||
				  fatt->atttypmod != hatt->atttypmod ||
				  fatt->attcollation != hatt->attcollation))
			cmds = lappend(cmds, make_type_change(ftrel, fatt, hatt));
	}
	if (hdesc->natts > fdesc->natts + layout.nmeta)
		elog(ERROR, "hidden relation \"%s\" has more columns than source table \"%s\"",
			 RelationGetRelationName(hidden), RelationGetRelationName(ftrel));

	table_close(hidden, NoLock);

	/* placeholders are dropped in a second pass: ALTER drops before adds */
	alter_hidden_relation(ftrel, hiddenid, cmds);
	alter_hidden_relation(ftrel, hiddenid, placeholders);
}

/*
 * The "key" option names columns.  When one of them was renamed, rewrite
 * the option to the new name, as an index would follow; when one was
 * dropped, refuse.  The hidden relation still has the old names.
 */
static void
follow_key_renames(Relation ftrel, Oid hiddenid)
{
	ForeignTable *table = GetForeignTable(RelationGetRelid(ftrel));
	TupleDesc	fdesc = RelationGetDescr(ftrel);
	Relation	hidden;
	TupleDesc	hdesc;
	SwLayout	layout;
	DefElem    *keydef = NULL;
	List	   *names;
	ListCell   *lc;
	StringInfoData newkey;
	bool		changed = false;

	foreach(lc, table->options)
		if (strcmp(((DefElem *) lfirst(lc))->defname, "key") == 0)
			keydef = lfirst(lc);
	if (keydef == NULL ||
		!SplitIdentifierString(pstrdup(defGetString(keydef)), ',', &names))
		return;					/* no key, or sw_source_table() will complain */

	hidden = table_open(hiddenid, AccessShareLock);
	hdesc = RelationGetDescr(hidden);
	sw_layout(hidden, &layout);
	initStringInfo(&newkey);
	foreach(lc, names)
	{
		const char *name = lfirst(lc);

		for (int k = 1; k <= fdesc->natts && sw_hidden_attnum(&layout, k) <= hdesc->natts; k++)
		{
			Form_pg_attribute fatt = TupleDescAttr(fdesc, k - 1);
			Form_pg_attribute hatt = TupleDescAttr(hdesc, sw_hidden_attnum(&layout, k) - 1);

			if (hatt->attisdropped || strcmp(NameStr(hatt->attname), name) != 0)
				continue;
			if (fatt->attisdropped)
				ereport(ERROR,
						(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
						 errmsg("cannot drop column \"%s\" of source table \"%s\"",
								name, RelationGetRelationName(ftrel)),
						 errdetail("The column is part of the table's option \"key\"."),
						 errhint("Change the option \"key\" first.")));
			if (strcmp(NameStr(fatt->attname), name) != 0)
			{
				name = NameStr(fatt->attname);
				changed = true;
			}
		}
		appendStringInfo(&newkey, "%s%s", newkey.len > 0 ? ", " : "",
						 quote_identifier(name));
	}
	table_close(hidden, AccessShareLock);

	if (changed)
	{
		Relation	ftcat = table_open(ForeignTableRelationId, RowExclusiveLock);
		HeapTuple	tuple = SearchSysCacheCopy1(FOREIGNTABLEREL,
												ObjectIdGetDatum(RelationGetRelid(ftrel)));
		ArrayBuildState *astate = NULL;
		Datum		values[Natts_pg_foreign_table] = {0};
		bool		nulls[Natts_pg_foreign_table] = {0};
		bool		replace[Natts_pg_foreign_table] = {0};
		HeapTuple	newtuple;

		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for foreign table %u",
				 RelationGetRelid(ftrel));
		foreach(lc, table->options)
		{
			DefElem    *def = lfirst(lc);
			const char *value = def == keydef ? newkey.data : defGetString(def);

			astate = accumArrayResult(astate,
									  CStringGetTextDatum(psprintf("%s=%s", def->defname, value)),
									  false, TEXTOID, CurrentMemoryContext);
		}
		values[Anum_pg_foreign_table_ftoptions - 1] =
			makeArrayResult(astate, CurrentMemoryContext);
		replace[Anum_pg_foreign_table_ftoptions - 1] = true;
		newtuple = heap_modify_tuple(tuple, RelationGetDescr(ftcat), values,
									 nulls, replace);
		CatalogTupleUpdate(ftcat, &newtuple->t_self, newtuple);
		table_close(ftcat, RowExclusiveLock);
		CommandCounterIncrement();
	}
}
