/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		  Event triggers that keep source tables' storage in step with DDL
 *
 * See doc/internals.md, "Storage layout" (Event triggers).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "tcop/deparse_utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "fdw/fdw.h"
#include "log/log.h"
#include "workers/workers.h"

typedef struct DdlObject
{
	Oid			classid;
	Oid			objid;
	char	   *tag;			/* command tag or object type */
	CollectedCommand *command;	/* ddl_command_end: what the command did */
} DdlObject;

/*
 * Run a query over one of the event trigger functions and return its
 * (classid, objid, tag[, command]) rows, copied out of SPI's memory, with
 * a search_path that holds nothing but the system catalogs.
 */
static List *
collect_objects(const char *query, bool with_command)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *result = NIL;
	int			nestlevel = NewGUCNestLevel();

	(void) set_config_option("search_path", "pg_catalog, pg_temp",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	SPI_connect();
	if (SPI_execute(query, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: %s", query);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(caller);
		DdlObject  *obj = palloc0(sizeof(DdlObject));

		obj->classid = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
		obj->objid = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
		obj->tag = SPI_getvalue(row, desc, 3);
		if (with_command)
			obj->command = (CollectedCommand *)
				DatumGetPointer(SPI_getbinval(row, desc, 4, &isnull));
		result = lappend(result, obj);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	AtEOXact_GUC(true, nestlevel);
	return result;
}

/*
 * The names of the columns whose type an ALTER TABLE command changed.
 */
static List *
retyped_columns(CollectedCommand *command)
{
	List	   *names = NIL;
	ListCell   *lc;

	if (command == NULL || command->type != SCT_AlterTable)
		return NIL;
	foreach(lc, command->d.alterTable.subcmds)
	{
		CollectedATSubcmd *sub = lfirst(lc);
		AlterTableCmd *cmd = (AlterTableCmd *) sub->parsetree;

		if (IsA(cmd, AlterTableCmd) && cmd->subtype == AT_AlterColumnType)
			names = lappend(names, makeString(cmd->name));
	}
	return names;
}

/*
 * Can an ALTER TABLE command make rows a source table has break its
 * constraints: a constraint added or validated, NOT NULL set, a column
 * added?  Then its current rows are checked, as a plain table's would be.
 */
static bool
checks_rows(CollectedCommand *command)
{
	ListCell   *lc;

	if (command == NULL || command->type != SCT_AlterTable)
		return false;
	foreach(lc, command->d.alterTable.subcmds)
	{
		AlterTableCmd *cmd = (AlterTableCmd *) ((CollectedATSubcmd *) lfirst(lc))->parsetree;

		if (!IsA(cmd, AlterTableCmd))
			continue;
		switch (cmd->subtype)
		{
			case AT_AddConstraint:
			case AT_AddConstraintRecurse:
			case AT_ReAddConstraint:
			case AT_ValidateConstraint:
			case AT_ValidateConstraintRecurse:
			case AT_SetNotNull:
			case AT_AddColumn:
			case AT_AddColumnRecurse:
				return true;
			default:
				break;
		}
	}
	return false;
}

/*
 * Does an ALTER DOMAIN command ask for the domain to hold for rows stored
 * now: a new, validated constraint, NOT NULL, or VALIDATE CONSTRAINT?
 */
static bool
domain_checks_rows(CollectedCommand *command)
{
	AlterDomainStmt *stmt;

	if (command == NULL || command->type != SCT_Simple ||
		!IsA(command->parsetree, AlterDomainStmt))
		return false;
	stmt = (AlterDomainStmt *) command->parsetree;
	switch (stmt->subtype)
	{
		case 'C':
			return IsA(stmt->def, Constraint) &&
				!((Constraint *) stmt->def)->skip_validation;
		case 'O':
		case 'V':
			return true;
	}
	return false;
}

/*
 * Source tables cannot be temporary: their log, progress and hidden heaps
 * are the extension's catalog rows and permanent relations, which a
 * session's end would not take with it (it fires no event trigger), and
 * the workers cannot see a session's temporary tables.
 */
static void
check_not_temporary(Oid relid)
{
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("source tables cannot be temporary"),
				 errdetail("Table \"%s\" is in a temporary schema: its log would outlive the session, and the background workers could not ingest it.",
						   get_rel_name(relid)),
				 errhint("Create it in a permanent schema.")));
}

/*
 * A server's type cannot change under its source tables.
 */
static void
check_server(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);
	SwKind		kind = sw_server_kind(server);
	ListCell   *lc;

	foreach(lc, sw_catalog_sources(serverid))
	{
		SwSource   *source = lfirst(lc);

		if (source->kind != kind)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change the type of server \"%s\" from %s to %s",
							server->servername, sw_kind_name(source->kind),
							sw_kind_name(kind)),
					 errdetail("Source table \"%s\" uses the server.",
							   get_rel_name(source->relid)),
					 errhint("Create a new server instead.")));
	}
}

static void
check_user_mapping(Oid umid)
{
	HeapTuple	tuple = SearchSysCache1(USERMAPPINGOID, ObjectIdGetDatum(umid));
	Form_pg_user_mapping form;
	UserMapping *mapping;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for user mapping %u", umid);
	form = (Form_pg_user_mapping) GETSTRUCT(tuple);
	if (sw_is_source_server(form->umserver))
	{
		mapping = GetUserMapping(form->umuser, form->umserver);
		sw_check_user_mapping(mapping, GetForeignServer(form->umserver));
	}
	ReleaseSysCache(tuple);
}

PG_FUNCTION_INFO_V1(source_writes_ddl_command_end);

/*
 * Event trigger at ddl_command_end.
 */
Datum
source_writes_ddl_command_end(PG_FUNCTION_ARGS)
{
	List	   *objects;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "not fired by event trigger manager");

	objects = collect_objects("SELECT classid, objid, command_tag, command "
							  "FROM pg_catalog.pg_event_trigger_ddl_commands()",
							  true);
	foreach(lc, objects)
	{
		DdlObject  *obj = lfirst(lc);

		switch (obj->classid)
		{
			case RelationRelationId:
				{
					/* a change to a parent reaches its inheriting tables */
					List	   *rels = find_all_inheritors(obj->objid, NoLock, NULL);
					List	   *retyped = retyped_columns(obj->command);
					bool		check = checks_rows(obj->command);
					ListCell   *rc;

					foreach(rc, rels)
					{
						if (!sw_is_source_table(lfirst_oid(rc)))
							continue;
						check_not_temporary(lfirst_oid(rc));
						sw_storage_fill_added(lfirst_oid(rc),
											  sw_storage_sync(lfirst_oid(rc), retyped));
						if (check)
						{
							Relation	ftrel = relation_open(lfirst_oid(rc), AccessShareLock);

							sw_constraints_check(ftrel);
							relation_close(ftrel, NoLock);
						}
						if (strcmp(obj->tag, "CREATE FOREIGN TABLE") == 0)
						{
							SwSource	source;

							if (!sw_source_lookup(lfirst_oid(rc), &source))
								ereport(NOTICE,
										(errmsg("source table \"%s\" gets its storage from a restore",
												get_rel_name(lfirst_oid(rc))),
										 errdetail("With check_function_bodies off, as in a restore, a new source table gets no storage until the restore brings it."),
										 errhint("Outside a restore, run ALTER FOREIGN TABLE on it with check_function_bodies on to give it new, empty storage.")));
							else if (lfirst_oid(rc) == obj->objid)
								sw_version_create(obj->objid);
							sw_warn_if_not_preloaded();
							/* the launcher serves the database, if it did not */
							sw_database_sources_changed();
						}
						else if (lfirst_oid(rc) == obj->objid)
							sw_version_check_alter(obj->command);
					}
					break;
				}
			case TypeRelationId:
				if (domain_checks_rows(obj->command))
					sw_domain_altered(obj->objid);
				break;
			case ForeignServerRelationId:
				if (sw_is_source_server(obj->objid))
				{
					check_server(obj->objid);
					if (strcmp(obj->tag, "CREATE SERVER") == 0)
						sw_warn_if_not_preloaded();
				}
				break;
			case UserMappingRelationId:
				check_user_mapping(obj->objid);
				break;
		}
	}
	PG_RETURN_NULL();
}

/*
 * Refuse the drop of hidden relations (given with their identities) whose
 * table stays, as their internal dependency on it would have refused it
 * (pg_upgrade does not carry those: see sw_storage_restore_dependencies()).
 */
static void
refuse_hidden_drops(List *dropped)
{
	List	   *sources = sw_catalog_sources(InvalidOid);
	ListCell   *lc;
	ListCell   *ls;

	foreach(lc, dropped)
	{
		DdlObject  *obj = lfirst(lc);

		foreach(ls, sources)
		{
			SwSource   *source = lfirst(ls);
			char	   *table;

			if ((obj->objid != source->current_rel && obj->objid != source->history_rel) ||
				!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(source->relid)))
				continue;
			table = quote_qualified_identifier(RelationIsVisible(source->relid) ? NULL :
											   get_namespace_name(get_rel_namespace(source->relid)),
											   get_rel_name(source->relid));
			ereport(ERROR,
					(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
					 errmsg("cannot drop table %s because foreign table %s requires it",
							obj->tag, table),
					 errhint("You can drop foreign table %s instead.", table)));
		}
	}
}

PG_FUNCTION_INFO_V1(source_writes_sql_drop);

/*
 * Event trigger at sql_drop.
 */
Datum
source_writes_sql_drop(PG_FUNCTION_ARGS)
{
	List	   *objects;
	ListCell   *lc;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		elog(ERROR, "not fired by event trigger manager");

	/* while the extension itself is dropped, its catalog goes too */
	if (!sw_catalog_exists())
		PG_RETURN_NULL();

	/* a hidden relation goes with its table only */
	objects = collect_objects("SELECT classid, objid, object_identity "
							  "FROM pg_catalog.pg_event_trigger_dropped_objects() "
							  "WHERE object_type = 'table' "
							  "AND schema_name = '" SW_INTERNAL_SCHEMA "'",
							  false);
	if (objects != NIL)
		refuse_hidden_drops(objects);

	objects = collect_objects("SELECT classid, objid, object_type "
							  "FROM pg_catalog.pg_event_trigger_dropped_objects()",
							  false);
	foreach(lc, objects)
	{
		DdlObject  *obj = lfirst(lc);

		if (obj->classid == RelationRelationId &&
			strcmp(obj->tag, "foreign table") == 0)
		{
			sw_storage_forget(obj->objid);
			sw_webhook_forget_counts(obj->objid);
		}
	}
	PG_RETURN_NULL();
}
