/*-------------------------------------------------------------------------
 *
 * indexes.c
 *		  Indexes on source tables: CREATE INDEX and REINDEX TABLE, and the
 *		  schema of the indexes
 *
 * See doc/internals.md, "Storage layout" (Indexes).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/indexes.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_tablespace.h"
#include "commands/cluster.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "fmgr.h"
#include "commands/tablecmds.h"
#include "commands/tablespace.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parse_utilcmd.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "fdw/fdw.h"
#include "log/log.h"

static object_access_hook_type prev_object_access = NULL;
static ProcessUtility_hook_type prev_process_utility = NULL;

/* true while the ProcessUtility hook makes an index on a source table */
static bool creating_index = false;

/* the indexes the object access hook moved in this session, newest first */
#define SW_MOVED_KEPT	64
static List *moved_here = NIL;

/*
 * The relation an index made in this command indexes: its pg_index row is
 * not visible to the catalog snapshot yet.
 */
static Oid
new_index_heap(Oid indexid)
{
	Relation	rel = table_open(IndexRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			heapid = InvalidOid;

	ScanKeyInit(&key, Anum_pg_index_indexrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(indexid));
	scan = systable_beginscan(rel, IndexRelidIndexId, true, SnapshotSelf, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		heapid = ((Form_pg_index) GETSTRUCT(tuple))->indrelid;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return heapid;
}

/*
 * The source table whose current heap this is, or InvalidOid.  While
 * pg_upgrade restores the schema, the catalog rows and dependencies that
 * say so are not there yet: the heap's comment says it.
 */
static Oid
heap_source(Oid heapid)
{
	Oid			relid = sw_storage_source_of_current(heapid);

	if (!OidIsValid(relid) && IsBinaryUpgrade)
		relid = sw_storage_marked_source(heapid);
	return relid;
}

/*
 * object_access_hook: an index made on the current heap of a source table
 * goes to the table's schema as soon as index_create() has written its
 * catalog rows, before it is built.  Every path that makes one passes here:
 * CREATE INDEX on the table (below), REINDEX CONCURRENTLY (its copy),
 * ALTER ... TYPE (the rebuilt index), pg_restore (the dump names the
 * heap).  Our own key index stays beside the heap.
 */
static void
indexes_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					  int subId, void *arg)
{
	Relation	index;
	char		relkind;
	Oid			heapid;
	Oid			relid;

	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	if (access != OAT_POST_CREATE || classId != RelationRelationId || subId != 0)
		return;

	/* the new relation is in the relcache, not yet in the syscache */
	index = RelationIdGetRelation(objectId);
	if (index == NULL)
		return;
	relkind = index->rd_rel->relkind;
	RelationClose(index);
	if (relkind != RELKIND_INDEX || !sw_catalog_exists())
		return;

	heapid = new_index_heap(objectId);
	if (!OidIsValid(heapid))
		return;
	relid = heap_source(heapid);
	if (!OidIsValid(relid))
		return;
	/* make the index's catalog rows visible, as index_create() does next */
	CommandCounterIncrement();
	sw_storage_place_index(relid, heapid, objectId);

	{
		MemoryContext old = MemoryContextSwitchTo(TopMemoryContext);

		moved_here = lcons_oid(objectId, moved_here);
		if (list_length(moved_here) > SW_MOVED_KEPT)
			moved_here = list_truncate(moved_here, SW_MOVED_KEPT);
		MemoryContextSwitchTo(old);
	}
}

/*
 * pg_dump names an index in its table's schema, which for an index of a
 * source table is the internal schema of the heap, not the schema the
 * index is in: its COMMENT ON INDEX and ALTER INDEX in a dump name
 * "source_writes_internal.<name>".  The schema of the index of a source
 * table of that name: the only one, or else the one this session moved
 * (a restore creates an index, then comments on it).  InvalidOid if none,
 * or more than one.
 */
static Oid
moved_index_schema(const char *name)
{
	Oid			internal = get_namespace_oid(SW_INTERNAL_SCHEMA, true);
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	NameData	relname;
	Oid			only = InvalidOid;
	Oid			mine = InvalidOid;
	int			n = 0;

	if (!OidIsValid(internal) || OidIsValid(get_relname_relid(name, internal)))
		return InvalidOid;
	namestrcpy(&relname, name);
	rel = table_open(RelationRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_class_relname, BTEqualStrategyNumber,
				F_NAMEEQ, NameGetDatum(&relname));
	scan = systable_beginscan(rel, ClassNameNspIndexId, true, NULL, 1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);
		Oid			heapid;

		if (form->relkind != RELKIND_INDEX || form->relnamespace == internal)
			continue;
		heapid = IndexGetRelation(form->oid, true);
		if (!OidIsValid(heapid) || !OidIsValid(heap_source(heapid)))
			continue;
		n++;
		only = form->relnamespace;
		if (list_member_oid(moved_here, form->oid))
			mine = form->relnamespace;
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return n == 1 ? only : mine;
}

/*
 * A COMMENT ON INDEX or ALTER INDEX of a dump, which names an index of a
 * source table in the internal schema, made to name it where it is; NULL
 * for any other statement.  The statement then runs with its usual checks.
 */
static Node *
redirect_dumped_index(Node *parsetree)
{
	if (IsA(parsetree, CommentStmt) &&
		((CommentStmt *) parsetree)->objtype == OBJECT_INDEX)
	{
		CommentStmt *stmt = (CommentStmt *) parsetree;
		List	   *names = (List *) stmt->object;
		Oid			nsp;

		if (list_length(names) != 2 ||
			strcmp(strVal(linitial(names)), SW_INTERNAL_SCHEMA) != 0)
			return NULL;
		nsp = moved_index_schema(strVal(lsecond(names)));
		if (!OidIsValid(nsp))
			return NULL;
		stmt = copyObject(stmt);
		stmt->object = (Node *) list_make2(makeString(get_namespace_name(nsp)),
										   makeString(strVal(lsecond(names))));
		return (Node *) stmt;
	}
	if (IsA(parsetree, AlterTableStmt) &&
		((AlterTableStmt *) parsetree)->objtype == OBJECT_INDEX)
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		Oid			nsp;

		if (stmt->relation->schemaname == NULL ||
			strcmp(stmt->relation->schemaname, SW_INTERNAL_SCHEMA) != 0 ||
			stmt->relation->catalogname != NULL)
			return NULL;
		nsp = moved_index_schema(stmt->relation->relname);
		if (!OidIsValid(nsp))
			return NULL;
		stmt = copyObject(stmt);
		stmt->relation->schemaname = get_namespace_name(nsp);
		return (Node *) stmt;
	}
	return NULL;
}

/*
 * The source table a statement names, or InvalidOid: a first look, without
 * a lock; the caller looks again with one.
 */
static Oid
named_source(RangeVar *relation)
{
	Oid			relid;

	if (relation == NULL || !sw_catalog_exists())
		return InvalidOid;
	relid = RangeVarGetRelid(relation, NoLock, true);
	if (!OidIsValid(relid) || !sw_is_source_table(relid))
		return InvalidOid;
	return relid;
}

/*
 * The names of an index's columns, as DefineIndex() chooses them
 * (ChooseIndexColumnNames() in indexcmds.c).
 */
static List *
index_column_names(List *elems)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, elems)
	{
		IndexElem  *ielem = (IndexElem *) lfirst(lc);
		const char *origname;
		const char *curname;
		char		buf[NAMEDATALEN];

		if (ielem->indexcolname)
			origname = ielem->indexcolname;
		else if (ielem->name)
			origname = ielem->name;
		else
			origname = "expr";
		curname = origname;
		for (int i = 1;; i++)
		{
			ListCell   *lc2;
			char		nbuf[32];
			int			nlen;

			foreach(lc2, result)
			{
				if (strcmp(curname, (char *) lfirst(lc2)) == 0)
					break;
			}
			if (lc2 == NULL)
				break;
			sprintf(nbuf, "%d", i);
			nlen = pg_mbcliplen(origname, strlen(origname),
								NAMEDATALEN - 1 - strlen(nbuf));
			memcpy(buf, origname, nlen);
			strcpy(buf + nlen, nbuf);
			curname = buf;
		}
		result = lappend(result, pstrdup(curname));
	}
	return result;
}

/*
 * The name PostgreSQL gives an index of a plain table of this name, in this
 * schema, on these columns (ChooseIndexName() and ChooseIndexNameAddition()
 * in indexcmds.c, for CREATE INDEX).
 */
static char *
default_index_name(const char *tabname, Oid nsp, List *colnames)
{
	char		buf[NAMEDATALEN * 2];
	int			buflen = 0;
	ListCell   *lc;

	buf[0] = '\0';
	foreach(lc, colnames)
	{
		const char *name = (const char *) lfirst(lc);

		if (buflen > 0)
			buf[buflen++] = '_';
		strlcpy(buf + buflen, name, NAMEDATALEN);
		buflen += strlen(buf + buflen);
		if (buflen >= NAMEDATALEN)
			break;
	}
	return ChooseRelationName(tabname, buf, "idx", nsp, false);
}

/*
 * A column an index names must be a column of the source table (and not
 * one of the heap's own, such as "$batch"): PostgreSQL's error otherwise.
 */
static void
check_column_named(Oid relid, const char *name)
{
	HeapTuple	tuple = SearchSysCacheAttName(relid, name);

	if (!HeapTupleIsValid(tuple))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" does not exist", name)));
	ReleaseSysCache(tuple);
}

/* what to_heap_vars() maps columns with */
typedef struct HeapVarsContext
{
	Relation	ftrel;
	Relation	heap;
	const SwLayout *layout;
} HeapVarsContext;

static Node *
to_heap_vars_mutator(Node *node, HeapVarsContext *cxt)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) copyObject(node);

		if (var->varlevelsup != 0 || var->varattno < 0)
			return (Node *) var;
		if (var->varattno == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot use a whole-row reference in an index of source table \"%s\"",
							RelationGetRelationName(cxt->ftrel))));
		var->varattno = sw_hidden_attnum(cxt->layout, var->varattno);
		var->varattnosyn = var->varattno;
		/* a domain's values are stored as its base type's */
		var->vartype = TupleDescAttr(RelationGetDescr(cxt->heap), var->varattno - 1)->atttypid;
		var->vartypmod = TupleDescAttr(RelationGetDescr(cxt->heap), var->varattno - 1)->atttypmod;
		return (Node *) var;
	}
	if (IsA(node, RelabelType))
	{
		/* a domain's value taken as its base type: now a no-op */
		RelabelType *relabel = (RelabelType *) expression_tree_mutator(node,
																	   to_heap_vars_mutator,
																	   (void *) cxt);

		if (IsA(relabel->arg, Var) &&
			exprType((Node *) relabel->arg) == relabel->resulttype &&
			exprTypmod((Node *) relabel->arg) == relabel->resulttypmod &&
			exprCollation((Node *) relabel->arg) == relabel->resultcollid)
			return (Node *) relabel->arg;
		return (Node *) relabel;
	}
	return expression_tree_mutator(node, to_heap_vars_mutator, (void *) cxt);
}

/*
 * Expressions and predicates were analysed against the source table: give
 * their columns the attnums (SwLayout) and the types they have in the heap.
 */
static Node *
to_heap_vars(Node *node, Relation ftrel, Relation heap, const SwLayout *layout)
{
	HeapVarsContext cxt = {ftrel, heap, layout};

	return to_heap_vars_mutator(node, &cxt);
}

/*
 * CREATE INDEX on a source table: checked as DefineIndex() checks it on a
 * plain table (owner, CREATE on the table's schema and on the tablespace,
 * the name in the table's schema), then made by DefineIndex() on the
 * current heap, without its privilege checks on the closed internal schema;
 * the object access hook moves it to the table's schema.  CONCURRENTLY
 * keeps DefineIndex()'s transactions.
 */
static ObjectAddress
create_index(IndexStmt *stmt, const char *queryString, bool isTopLevel)
{
	LOCKMODE	lockmode;
	Oid			relid;
	Oid			nsp;
	Relation	ftrel;
	Relation	heap;
	SwSource	source;
	SwLayout	layout;
	AclResult	aclresult;
	Oid			tablespace;
	ListCell   *lc;
	char	   *name;

	if (stmt->concurrent)
		PreventInTransactionBlock(isTopLevel, "CREATE INDEX CONCURRENTLY");
	lockmode = stmt->concurrent ? ShareUpdateExclusiveLock : ShareLock;
	relid = RangeVarGetRelidExtended(stmt->relation, lockmode, 0,
									 RangeVarCallbackOwnsRelation, NULL);
	if (!sw_is_source_table(relid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("relation \"%s\" changed while the index was being made",
						stmt->relation->relname)));
	sw_source_require(relid, &source);

	/* expressions and the predicate see the source table's columns only */
	stmt = transformIndexStmt(relid, stmt, queryString);
	foreach(lc, list_concat_copy(stmt->indexParams, stmt->indexIncludingParams))
	{
		IndexElem  *ielem = (IndexElem *) lfirst(lc);

		if (ielem->name)
			check_column_named(relid, ielem->name);
	}

	ftrel = relation_open(relid, NoLock);
	nsp = RelationGetNamespace(ftrel);
	aclresult = pg_namespace_aclcheck(nsp, GetUserId(), ACL_CREATE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_SCHEMA, get_namespace_name(nsp));
	if (stmt->tableSpace)
		tablespace = get_tablespace_oid(stmt->tableSpace, false);
	else
		tablespace = GetDefaultTablespace(RELPERSISTENCE_PERMANENT, false);
	if (OidIsValid(tablespace) && tablespace != MyDatabaseTableSpace)
	{
		aclresult = pg_tablespace_aclcheck(tablespace, GetUserId(), ACL_CREATE);
		if (aclresult != ACLCHECK_OK)
			aclcheck_error(aclresult, OBJECT_TABLESPACE,
						   get_tablespace_name(tablespace));
	}

	/* the name, chosen and judged in the table's schema */
	if (stmt->idxname == NULL)
		stmt->idxname = default_index_name(RelationGetRelationName(ftrel), nsp,
										   index_column_names(list_concat_copy(stmt->indexParams,
																			   stmt->indexIncludingParams)));
	name = stmt->idxname;
	if (OidIsValid(get_relname_relid(name, nsp)))
	{
		if (stmt->if_not_exists)
		{
			ereport(NOTICE,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("relation \"%s\" already exists, skipping", name)));
			relation_close(ftrel, NoLock);
			return InvalidObjectAddress;
		}
		ereport(ERROR,
				(errcode(ERRCODE_DUPLICATE_TABLE),
				 errmsg("relation \"%s\" already exists", name)));
	}
	if (sw_storage_reserved_index_name(source.current_rel, name))
		ereport(ERROR,
				(errcode(ERRCODE_RESERVED_NAME),
				 errmsg("index name \"%s\" is reserved for the key of source table \"%s\"",
						name, RelationGetRelationName(ftrel))));

	/* the lock DefineIndex() takes next */
	heap = table_open(source.current_rel, lockmode);
	sw_storage_layout(ftrel, heap, &layout);
	foreach(lc, stmt->indexParams)
	{
		IndexElem  *ielem = (IndexElem *) lfirst(lc);

		ielem->expr = to_heap_vars(ielem->expr, ftrel, heap, &layout);
	}
	stmt->whereClause = to_heap_vars(stmt->whereClause, ftrel, heap, &layout);
	table_close(heap, NoLock);
	relation_close(ftrel, NoLock);

	return DefineIndex(source.current_rel, stmt, InvalidOid, InvalidOid,
					   InvalidOid, false, false, true, false, false);
}

/*
 * REINDEX TABLE on a source table: its current heap's indexes, with a plain
 * table's rules (the owner).  CONCURRENTLY reindexes each index by name, as
 * REINDEX INDEX CONCURRENTLY would, each in its own transactions.
 */
static void
reindex_table(ParseState *pstate, ReindexStmt *stmt, bool isTopLevel)
{
	bool		concurrently = false;
	bool		verbose = false;
	char	   *tablespacename = NULL;
	ReindexParams params = {0};
	Oid			relid;
	SwSource	source;
	ListCell   *lc;

	foreach(lc, stmt->params)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "verbose") == 0)
			verbose = defGetBoolean(opt);
		else if (strcmp(opt->defname, "concurrently") == 0)
			concurrently = defGetBoolean(opt);
		else if (strcmp(opt->defname, "tablespace") == 0)
			tablespacename = defGetString(opt);
		else
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("unrecognized REINDEX option \"%s\"", opt->defname),
					 parser_errposition(pstate, opt->location)));
	}
	if (concurrently)
		PreventInTransactionBlock(isTopLevel, "REINDEX CONCURRENTLY");

	relid = RangeVarGetRelidExtended(stmt->relation,
									 concurrently ? ShareUpdateExclusiveLock : ShareLock,
									 0, RangeVarCallbackOwnsRelation, NULL);
	sw_source_require(relid, &source);

	params.options = (verbose ? REINDEXOPT_VERBOSE : 0) | REINDEXOPT_REPORT_PROGRESS;
	if (tablespacename != NULL)
	{
		AclResult	aclresult;

		params.tablespaceOid = get_tablespace_oid(tablespacename, false);
		if (params.tablespaceOid != MyDatabaseTableSpace)
		{
			aclresult = pg_tablespace_aclcheck(params.tablespaceOid, GetUserId(), ACL_CREATE);
			if (aclresult != ACLCHECK_OK)
				aclcheck_error(aclresult, OBJECT_TABLESPACE, tablespacename);
		}
		if (params.tablespaceOid == GLOBALTABLESPACE_OID)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot move non-shared relation to tablespace \"%s\"",
							tablespacename)));
	}

	if (!concurrently)
	{
		if (!reindex_relation(source.current_rel,
							  REINDEX_REL_PROCESS_TOAST | REINDEX_REL_CHECK_CONSTRAINTS,
							  &params))
			ereport(NOTICE,
					(errmsg("table \"%s\" has no indexes to reindex",
							stmt->relation->relname)));
		return;
	}
	else
	{
		Relation	heap = table_open(source.current_rel, ShareUpdateExclusiveLock);
		List	   *indexes = RelationGetIndexList(heap);
		List	   *names = NIL;

		table_close(heap, NoLock);
		foreach(lc, indexes)
		{
			Oid			indexid = lfirst_oid(lc);
			Oid			nsp = get_rel_namespace(indexid);

			/* the key index is out of the user's reach by name */
			if (pg_namespace_aclcheck(nsp, GetUserId(), ACL_USAGE) != ACLCHECK_OK)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot reindex the key of upsert source \"%s\" concurrently",
								stmt->relation->relname),
						 errhint("Use REINDEX TABLE without CONCURRENTLY, or REINDEX INDEX CONCURRENTLY on each index that source_writes.indexes lists in the table's schema.")));
			names = lappend(names, makeRangeVar(get_namespace_name(nsp),
												get_rel_name(indexid), -1));
		}
		if (names == NIL)
		{
			ereport(NOTICE,
					(errmsg("table \"%s\" has no indexes that can be reindexed concurrently",
							stmt->relation->relname)));
			return;
		}
		foreach(lc, names)
		{
			ReindexStmt *each = makeNode(ReindexStmt);

			each->kind = REINDEX_OBJECT_INDEX;
			each->relation = lfirst(lc);
			each->params = stmt->params;
			/* the one before left a transaction without a snapshot */
			if (!ActiveSnapshotSet())
				PushActiveSnapshot(GetTransactionSnapshot());
			ExecReindex(pstate, each, isTopLevel);
		}
	}
}

/*
 * CLUSTER on a source table: its current heap, ordered by one of the
 * table's indexes (USING, which marks it as the table's clustered index,
 * as for a plain table) or by the one marked before, with a plain table's
 * rules (the owner).  The heap is rewritten and its indexes rebuilt as
 * CLUSTER does a table's.  The key index of an upsert source is named in
 * the heap's schema.
 */
static void
cluster_table(ParseState *pstate, ClusterStmt *stmt)
{
	ClusterParams params = {0};
	bool		verbose = false;
	Oid			relid;
	Oid			indexid = InvalidOid;
	SwSource	source;
	ListCell   *lc;

	foreach(lc, stmt->params)
	{
		DefElem    *opt = (DefElem *) lfirst(lc);

		if (strcmp(opt->defname, "verbose") == 0)
			verbose = defGetBoolean(opt);
		else
			ereport(ERROR,
					(errcode(ERRCODE_SYNTAX_ERROR),
					 errmsg("unrecognized CLUSTER option \"%s\"", opt->defname),
					 parser_errposition(pstate, opt->location)));
	}
	params.options = verbose ? CLUOPT_VERBOSE : 0;

	relid = RangeVarGetRelidExtended(stmt->relation, AccessExclusiveLock, 0,
									 RangeVarCallbackOwnsRelation, NULL);
	sw_source_require(relid, &source);

	if (stmt->indexname != NULL)
	{
		indexid = get_relname_relid(stmt->indexname, get_rel_namespace(relid));
		if (!OidIsValid(indexid))
			indexid = get_relname_relid(stmt->indexname,
										get_rel_namespace(source.current_rel));
		if (!OidIsValid(indexid) || IndexGetRelation(indexid, true) != source.current_rel)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("index \"%s\" for table \"%s\" does not exist",
							stmt->indexname, stmt->relation->relname)));
	}
	else
	{
		Relation	heap = table_open(source.current_rel, AccessExclusiveLock);

		foreach(lc, RelationGetIndexList(heap))
		{
			HeapTuple	tuple = SearchSysCache1(INDEXRELID,
												ObjectIdGetDatum(lfirst_oid(lc)));

			if (!HeapTupleIsValid(tuple))
				elog(ERROR, "cache lookup failed for index %u", lfirst_oid(lc));
			if (((Form_pg_index) GETSTRUCT(tuple))->indisclustered)
				indexid = lfirst_oid(lc);
			ReleaseSysCache(tuple);
		}
		table_close(heap, NoLock);
		if (!OidIsValid(indexid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_OBJECT),
					 errmsg("there is no previously clustered index for table \"%s\"",
							stmt->relation->relname)));
	}
	cluster_rel(source.current_rel, indexid, &params);
}

/*
 * ProcessUtility hook: CREATE INDEX, REINDEX TABLE and CLUSTER on a source
 * table, which PostgreSQL refuses on a foreign table; CREATE INDEX with the
 * event triggers that ProcessUtilitySlow() fires around it.
 */
static void
indexes_process_utility(PlannedStmt *pstmt, const char *queryString,
						bool readOnlyTree, ProcessUtilityContext context,
						ParamListInfo params, QueryEnvironment *queryEnv,
						DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;
	bool		isTopLevel = (context == PROCESS_UTILITY_TOPLEVEL);
	bool		isCompleteQuery = (context != PROCESS_UTILITY_SUBCOMMAND);
	bool		needCleanup;
	bool		ours = false;
	Node	   *redirected;

	if ((redirected = redirect_dumped_index(parsetree)) != NULL)
	{
		pstmt = copyObject(pstmt);
		pstmt->utilityStmt = redirected;
		parsetree = redirected;
	}

	if (IsA(parsetree, IndexStmt))
		ours = OidIsValid(named_source(((IndexStmt *) parsetree)->relation));
	else if (IsA(parsetree, ReindexStmt) &&
			 ((ReindexStmt *) parsetree)->kind == REINDEX_OBJECT_TABLE)
		ours = OidIsValid(named_source(((ReindexStmt *) parsetree)->relation));
	else if (IsA(parsetree, ClusterStmt))
		ours = OidIsValid(named_source(((ClusterStmt *) parsetree)->relation));

	if (!ours)
	{
		if (prev_process_utility)
			prev_process_utility(pstmt, queryString, readOnlyTree, context,
								 params, queryEnv, dest, qc);
		else
			standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
									params, queryEnv, dest, qc);
		return;
	}

	/*
	 * What standard_ProcessUtility() checks first: CREATE INDEX is refused
	 * in a read-only transaction, REINDEX only on a standby, and both in
	 * parallel mode.
	 */
	if (XactReadOnly || IsInParallelMode())
	{
		const char *tag = IsA(parsetree, IndexStmt) ? "CREATE INDEX" : "REINDEX";

		if (IsA(parsetree, IndexStmt))
			PreventCommandIfReadOnly(tag);
		PreventCommandIfParallelMode(tag);
		PreventCommandDuringRecovery(tag);
	}

	if (readOnlyTree)
		parsetree = copyObject(parsetree);

	if (IsA(parsetree, ClusterStmt))
	{
		ParseState *pstate = make_parsestate(NULL);

		pstate->p_sourcetext = queryString;
		pstate->p_queryEnv = queryEnv;
		cluster_table(pstate, (ClusterStmt *) parsetree);
		free_parsestate(pstate);
		return;
	}
	if (IsA(parsetree, ReindexStmt))
	{
		ParseState *pstate = make_parsestate(NULL);

		pstate->p_sourcetext = queryString;
		pstate->p_queryEnv = queryEnv;
		reindex_table(pstate, (ReindexStmt *) parsetree, isTopLevel);
		free_parsestate(pstate);
		return;
	}

	/* as ProcessUtilitySlow() does for CREATE INDEX */
	needCleanup = isCompleteQuery && EventTriggerBeginCompleteQuery();
	creating_index = true;
	PG_TRY();
	{
		ObjectAddress address;

		if (isCompleteQuery)
			EventTriggerDDLCommandStart(parsetree);
		EventTriggerAlterTableStart(parsetree);
		address = create_index((IndexStmt *) parsetree, queryString, isTopLevel);
		EventTriggerCollectSimpleCommand(address, InvalidObjectAddress, parsetree);
		EventTriggerAlterTableEnd();
		if (isCompleteQuery)
		{
			EventTriggerSQLDrop(parsetree);
			EventTriggerDDLCommandEnd(parsetree);
		}
	}
	PG_FINALLY();
	{
		creating_index = false;
		if (needCleanup)
			EventTriggerEndCompleteQuery();
	}
	PG_END_TRY();
}

PG_FUNCTION_INFO_V1(source_writes_ddl_command_start);

/*
 * Event trigger at ddl_command_start of CREATE INDEX.  In a session that
 * had not loaded the library, calling it loads it: the hooks are there for
 * what the command does next (an index a restore makes on a hidden heap
 * goes to its table's schema), but PostgreSQL has already taken a CREATE
 * INDEX on a source table as one on a foreign table, which it refuses.
 * Say so, and that the command works now.
 */
Datum
source_writes_ddl_command_start(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	IndexStmt  *stmt;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "not fired by event trigger manager");
	trigdata = (EventTriggerData *) fcinfo->context;
	if (creating_index || !IsA(trigdata->parsetree, IndexStmt))
		PG_RETURN_NULL();
	stmt = (IndexStmt *) trigdata->parsetree;
	if (OidIsValid(named_source(stmt->relation)))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("source_writes was not loaded when this command began"),
				 errdetail("Without shared_preload_libraries, a session loads source_writes when it first uses it, and PostgreSQL took this CREATE INDEX on source table \"%s\" as one on a foreign table.",
						   stmt->relation->relname),
				 errhint("Run the command again: the library is loaded now.  Add source_writes to shared_preload_libraries to load it in every session.")));
	PG_RETURN_NULL();
}

/*
 * Install the hooks; from _PG_init, whether or not the library is
 * preloaded.
 */
void
sw_indexes_install_hooks(void)
{
	prev_object_access = object_access_hook;
	object_access_hook = indexes_object_access;
	prev_process_utility = ProcessUtility_hook;
	ProcessUtility_hook = indexes_process_utility;
}
