/*-------------------------------------------------------------------------
 *
 * constraints.c
 *		  Constraints over the current rows of source tables: the tables'
 *		  own, and their columns' domains
 *
 * See doc/internals.md, "Storage layout".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/log/constraints.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/dependency.h"
#include "catalog/indexing.h"
#include "catalog/pg_constraint.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/optimizer.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "log/log.h"

/*
 * Is type the domain, or a domain based on it?
 */
static bool
based_on(Oid type, Oid domain)
{
	while (get_typtype(type) == TYPTYPE_DOMAIN)
	{
		HeapTuple	tuple;

		if (type == domain)
			return true;
		tuple = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
		if (!HeapTupleIsValid(tuple))
			elog(ERROR, "cache lookup failed for type %u", type);
		type = ((Form_pg_type) GETSTRUCT(tuple))->typbasetype;
		ReleaseSysCache(tuple);
	}
	return false;
}

/*
 * Check the current rows' values of a column against the domain it now
 * has, as converting a plain table's column to a domain would.
 */
void
sw_domain_check_values(Relation current, AttrNumber hattnum, Oid domain)
{
	SwRowScan	rs;
	TupleTableSlot *slot;
	void	   *extra = NULL;

	sw_rows_begin(&rs, current);
	while ((slot = sw_rows_next(&rs)) != NULL)
	{
		bool		isnull;
		Datum		value = slot_getattr(slot, hattnum, &isnull);

		domain_check(value, isnull, domain, &extra, CurrentMemoryContext);
	}
	sw_rows_end(&rs);
}

/*
 * A domain's constraints that hold for the rows of a plain table: its
 * validated CHECK constraints and NOT NULL, and those of the domains it is
 * based on.  The CHECK expressions are prepared for evaluation in estate;
 * their names go into *names, if given, in the same order.
 */
List *
sw_domain_checks(Oid domain, EState *estate, bool *notnull, List **names)
{
	List	   *checks = NIL;
	Relation	conrel = table_open(ConstraintRelationId, AccessShareLock);

	*notnull = false;
	for (Oid type = domain; get_typtype(type) == TYPTYPE_DOMAIN;)
	{
		HeapTuple	typtup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(type));
		Form_pg_type typform;
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tuple;

		if (!HeapTupleIsValid(typtup))
			elog(ERROR, "cache lookup failed for type %u", type);
		typform = (Form_pg_type) GETSTRUCT(typtup);
		*notnull |= typform->typnotnull;

		ScanKeyInit(&key, Anum_pg_constraint_contypid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(type));
		scan = systable_beginscan(conrel, ConstraintTypidIndexId, true, NULL, 1, &key);
		while (HeapTupleIsValid(tuple = systable_getnext(scan)))
		{
			Form_pg_constraint con = (Form_pg_constraint) GETSTRUCT(tuple);
			bool		isnull;
			Datum		bin;
			Expr	   *expr;

			if (con->contype != CONSTRAINT_CHECK || !con->convalidated)
				continue;
			bin = SysCacheGetAttr(CONSTROID, tuple, Anum_pg_constraint_conbin, &isnull);
			if (isnull)
				elog(ERROR, "domain constraint \"%s\" has no expression",
					 NameStr(con->conname));
			expr = expression_planner((Expr *) stringToNode(TextDatumGetCString(bin)));
			checks = lappend(checks, ExecPrepareExpr(expr, estate));
			if (names)
				*names = lappend(*names, pstrdup(NameStr(con->conname)));
		}
		systable_endscan(scan);
		type = typform->typbasetype;
		ReleaseSysCache(typtup);
	}
	table_close(conrel, AccessShareLock);
	return checks;
}

/*
 * Check the current rows of source table column k against the constraints
 * of its domain that a plain table's rows must meet, with the errors a
 * plain table gives.
 */
static void
check_column_rows(Relation ftrel, const SwSource *source, AttrNumber k)
{
	Form_pg_attribute fatt = TupleDescAttr(RelationGetDescr(ftrel), k - 1);
	EState	   *estate = CreateExecutorState();
	ExprContext *econtext = GetPerTupleExprContext(estate);
	bool		notnull;
	List	   *checks = sw_domain_checks(fatt->atttypid, estate, &notnull, NULL);
	Relation	current = table_open(source->current_rel, ShareLock);
	SwRowScan	rs;
	TupleTableSlot *slot;
	SwLayout	layout;

	sw_storage_layout(ftrel, current, &layout);
	sw_rows_begin(&rs, current);
	while ((slot = sw_rows_next(&rs)) != NULL)
	{
		ListCell   *lc;

		econtext->domainValue_datum =
			slot_getattr(slot, sw_hidden_attnum(&layout, k),
						 &econtext->domainValue_isNull);
		if (notnull && econtext->domainValue_isNull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("column \"%s\" of table \"%s\" contains null values",
							NameStr(fatt->attname), RelationGetRelationName(ftrel))));
		foreach(lc, checks)
			if (!ExecCheck(lfirst(lc), econtext))
				ereport(ERROR,
						(errcode(ERRCODE_CHECK_VIOLATION),
						 errmsg("column \"%s\" of table \"%s\" contains values that violate the new constraint",
								NameStr(fatt->attname), RelationGetRelationName(ftrel))));
		ResetExprContext(econtext);
	}
	sw_rows_end(&rs);
	table_close(current, NoLock);
	FreeExecutorState(estate);
}

/*
 * Add to *columns the source table columns whose type is the domain or a
 * domain based on it, as pairs of relid and attnum, from pg_depend (as
 * get_rels_with_domain() in typecmds.c finds them), so that only the
 * tables that have such columns need to be locked.
 */
static void
source_columns_of(Oid domain, List **columns)
{
	Relation	depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyData keys[2];
	SysScanDesc scan;
	HeapTuple	tuple;

	ScanKeyInit(&keys[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(TypeRelationId));
	ScanKeyInit(&keys[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(domain));
	scan = systable_beginscan(depend, DependReferenceIndexId, true, NULL, 2, keys);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

		if (dep->classid == TypeRelationId &&
			get_typtype(dep->objid) == TYPTYPE_DOMAIN)
			source_columns_of(dep->objid, columns);
		else if (dep->classid == RelationRelationId && dep->objsubid > 0 &&
				 sw_is_source_table(dep->objid))
			*columns = lappend(*columns, list_make2_oid(dep->objid, dep->objsubid));
	}
	systable_endscan(scan);
	table_close(depend, AccessShareLock);
}

/*
 * After ALTER DOMAIN, check the current rows of every source table column
 * whose type is the domain, or a domain based on it.  Only those tables
 * are locked, SHARE, as PostgreSQL locks a table whose column it checks.
 * Runs as the user who altered the domain, as PostgreSQL's own check does.
 */
void
sw_domain_altered(Oid domain)
{
	List	   *columns = NIL;
	ListCell   *lc;

	source_columns_of(domain, &columns);
	foreach(lc, columns)
	{
		Oid			relid = linitial_oid(lfirst(lc));
		AttrNumber	attnum = lsecond_oid(lfirst(lc));
		SwSource	source;
		Relation	ftrel;

		ftrel = try_relation_open(relid, ShareLock);
		if (ftrel == NULL)
			continue;
		/* the column may have been dropped, or changed type, meanwhile */
		if (attnum <= RelationGetDescr(ftrel)->natts &&
			!TupleDescAttr(RelationGetDescr(ftrel), attnum - 1)->attisdropped &&
			based_on(TupleDescAttr(RelationGetDescr(ftrel), attnum - 1)->atttypid, domain) &&
			sw_source_lookup(relid, &source))
			check_column_rows(ftrel, &source, attnum);
		relation_close(ftrel, NoLock);
	}
}

/*
 * Check the current rows of a source table against its validated CHECK
 * constraints and its NOT NULL columns, with the errors ALTER TABLE gives
 * for a plain table's rows.  The caller holds the table locked.
 */
void
sw_constraints_check(Relation ftrel)
{
	TupleDesc	desc = RelationGetDescr(ftrel);
	TupleConstr *constr = desc->constr;
	SwSource	source;
	EState	   *estate;
	ExprContext *econtext;
	List	   *checks = NIL;
	List	   *names = NIL;
	Relation	current;
	SwRowScan	rs;
	TupleTableSlot *hidden;
	TupleTableSlot *row;
	SwLayout	layout;

	if (constr == NULL || (!constr->has_not_null && constr->num_check == 0))
		return;
	/* a table that a restore created has no storage yet, and no rows */
	if (!sw_source_lookup(RelationGetRelid(ftrel), &source))
		return;

	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	for (int i = 0; i < constr->num_check; i++)
	{
		Expr	   *expr;

		if (!constr->check[i].ccvalid)
			continue;
		expr = expression_planner((Expr *) stringToNode(constr->check[i].ccbin));
		checks = lappend(checks, ExecPrepareExpr(expr, estate));
		names = lappend(names, constr->check[i].ccname);
	}

	current = table_open(source.current_rel, AccessShareLock);
	sw_storage_layout(ftrel, current, &layout);
	sw_rows_begin(&rs, current);
	row = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	while ((hidden = sw_rows_next(&rs)) != NULL)
	{
		ListCell   *lc;
		ListCell   *nc;

		ExecClearTuple(row);
		slot_getallattrs(hidden);
		sw_from_hidden(&layout, desc->natts, hidden->tts_values,
					   hidden->tts_isnull, row->tts_values, row->tts_isnull);
		ExecStoreVirtualTuple(row);

		for (int k = 0; k < desc->natts && constr->has_not_null; k++)
			if (TupleDescAttr(desc, k)->attnotnull &&
				!TupleDescAttr(desc, k)->attisdropped && row->tts_isnull[k])
				ereport(ERROR,
						(errcode(ERRCODE_NOT_NULL_VIOLATION),
						 errmsg("column \"%s\" of relation \"%s\" contains null values",
								NameStr(TupleDescAttr(desc, k)->attname),
								RelationGetRelationName(ftrel)),
						 errtablecol(ftrel, k + 1)));

		econtext->ecxt_scantuple = row;
		forboth(lc, checks, nc, names)
			if (!ExecCheck(lfirst(lc), econtext))
				ereport(ERROR,
						(errcode(ERRCODE_CHECK_VIOLATION),
						 errmsg("check constraint \"%s\" of relation \"%s\" is violated by some row",
								(char *) lfirst(nc), RelationGetRelationName(ftrel)),
						 errtableconstraint(ftrel, lfirst(nc))));
		ResetExprContext(econtext);
	}
	ExecDropSingleTupleTableSlot(row);
	sw_rows_end(&rs);
	table_close(current, AccessShareLock);
	FreeExecutorState(estate);
}
