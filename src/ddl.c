/*-------------------------------------------------------------------------
 *
 * ddl.c
 *		  Event triggers that keep source tables' storage in step with DDL
 *
 * The extension installs two event triggers.  At ddl_command_end, every
 * source table a command created or altered is synced with its hidden
 * relations (storage.c), servers and user mappings are checked against
 * their kind, and creating a server or a source table reminds the user
 * when the workers cannot run.  At sql_drop, dropped source tables lose their catalog row.
 * Event triggers fire whether or not the library is preloaded, and they run
 * inside the command's transaction, so a failure undoes the whole command.
 *
 * IDENTIFICATION
 *		  src/ddl.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_user_mapping.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "foreign/fdwapi.h"
#include "foreign/foreign.h"
#include "parser/parse_func.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "source_writes.h"

typedef struct DdlObject
{
	Oid			classid;
	Oid			objid;
	char	   *tag;
} DdlObject;

/*
 * Run a query over one of the event trigger functions and return its
 * (classid, objid, tag) rows, copied out of SPI's memory.
 */
static List *
collect_objects(const char *query)
{
	MemoryContext caller = CurrentMemoryContext;
	List	   *result = NIL;

	SPI_connect();
	if (SPI_execute(query, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "SPI_execute failed: %s", query);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	row = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		MemoryContext old = MemoryContextSwitchTo(caller);
		DdlObject  *obj = palloc(sizeof(DdlObject));

		obj->classid = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
		obj->objid = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
		obj->tag = SPI_getvalue(row, desc, 3);
		result = lappend(result, obj);
		MemoryContextSwitchTo(old);
	}
	SPI_finish();
	return result;
}

/*
 * Is this server one of ours, i.e. does its wrapper use our handler?  The
 * handler is looked up by name so that no other wrapper's library gets
 * loaded just to ask.
 */
bool
sw_is_source_server(Oid serverid)
{
	ForeignServer *server = GetForeignServer(serverid);
	ForeignDataWrapper *fdw = GetForeignDataWrapper(server->fdwid);
	Oid			handler;

	handler = LookupFuncName(list_make2(makeString(SW_SCHEMA),
										makeString("fdw_handler")),
							 0, NULL, true);
	return OidIsValid(handler) && fdw->fdwhandler == handler;
}

bool
sw_is_source_table(Oid relid)
{
	if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
		return false;
	return sw_is_source_server(GetForeignServerIdByRelId(relid));
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

	foreach(lc, sw_catalog_sources_of_server(serverid))
	{
		SwCatalogEntry *entry = lfirst(lc);

		if (entry->kind != kind)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot change the type of server \"%s\" from %s to %s",
							server->servername, sw_kind_name(entry->kind),
							sw_kind_name(kind)),
					 errdetail("Source table \"%s\" uses the server.",
							   get_rel_name(entry->relid)),
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

	objects = collect_objects("SELECT classid, objid, command_tag "
							  "FROM pg_catalog.pg_event_trigger_ddl_commands() "
							  "WHERE NOT in_extension");
	foreach(lc, objects)
	{
		DdlObject  *obj = lfirst(lc);

		switch (obj->classid)
		{
			case RelationRelationId:
				{
					/* a change to a parent reaches its inheriting tables */
					List	   *rels = find_all_inheritors(obj->objid, NoLock, NULL);
					ListCell   *rc;

					foreach(rc, rels)
					{
						if (!sw_is_source_table(lfirst_oid(rc)))
							continue;
						sw_storage_sync(lfirst_oid(rc));
						if (strcmp(obj->tag, "CREATE FOREIGN TABLE") == 0)
							sw_warn_if_not_preloaded();
					}
					break;
				}
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

	objects = collect_objects("SELECT classid, objid, object_type "
							  "FROM pg_catalog.pg_event_trigger_dropped_objects() "
							  "WHERE object_type = 'foreign table'");
	foreach(lc, objects)
		sw_storage_forget(((DdlObject *) lfirst(lc))->objid);
	PG_RETURN_NULL();
}
