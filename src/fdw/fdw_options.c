/*-------------------------------------------------------------------------
 *
 * fdw_options.c
 *		  The validator of the options of source_writes servers, user
 *		  mappings, source tables and their columns, over the table of
 *		  options in src/options
 *
 * See doc/internals.md, "Storage layout" (Options).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/fdw_options.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "utils/memutils.h"

#include "fdw/fdw.h"
#include "fdw/rdkafka_allowlist.h"

static void rethrow_hiding_statement(MemoryContext cxt) pg_attribute_noreturn();

/*
 * Validate the options of a server as a whole: they declare its kind.
 */
static void
check_server_options(List *options)
{
	ListCell   *lc;
	int			kind = 0;
	bool		has_brokers = false;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		sw_check_option(def, ForeignServerRelationId, SW_ANY_KIND);
		if (strcmp(def->defname, "type") == 0)
			kind = strcmp(defGetString(def), "kafka") == 0
				? SW_KIND_KAFKA : SW_KIND_WEBHOOK;
	}
	if (kind == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"type\" is required for source_writes servers"),
				 errhint("Valid values are: %s.", join_list(sw_server_types))));

	/* with the kind known, check again for it */
	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		sw_check_option(def, ForeignServerRelationId, kind);
		if (strcmp(def->defname, "brokers") == 0)
			has_brokers = true;
		else if (strncmp(def->defname, RDKAFKA_PREFIX, strlen(RDKAFKA_PREFIX)) == 0)
			sw_rdkafka_check_property(def, ForeignServerRelationId);
	}
	if (kind == SW_KIND_KAFKA && !has_brokers)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"brokers\" is required for Kafka servers"),
				 errhint("Give the bootstrap brokers, e.g. OPTIONS (type 'kafka', brokers 'localhost:9092').")));
}

/*
 * Whether a list of options may hold a secret: any librdkafka credential,
 * or a property whose name says it is one, even if it is not allowed.
 */
static bool
has_credential(List *options)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strncmp(def->defname, RDKAFKA_PREFIX, strlen(RDKAFKA_PREFIX)) == 0 &&
			sw_rdkafka_may_be_secret(def->defname + strlen(RDKAFKA_PREFIX)))
			return true;
	}
	return false;
}

/*
 * Rethrow the error being handled, keeping the statement that caused it
 * out of the server log (log_min_error_statement): the statement may carry
 * secrets, such as the options of a user mapping.  The error's own text
 * never shows them.  cxt is the memory context from before PG_TRY.
 */
static void
rethrow_hiding_statement(MemoryContext cxt)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	FlushErrorState();
	edata->hide_stmt = true;
	ReThrowError(edata);
}

/*
 * The validator's work, for one object's options.
 */
static void
validate_options(List *options, Oid catalog)
{
	ListCell   *lc;

	if (catalog == ForeignServerRelationId)
	{
		check_server_options(options);
		return;
	}

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		sw_check_option(def, catalog, SW_ANY_KIND);
		if (catalog == UserMappingRelationId &&
			strncmp(def->defname, RDKAFKA_PREFIX, strlen(RDKAFKA_PREFIX)) == 0)
			sw_rdkafka_check_property(def, catalog);
	}

	if (catalog == AttributeRelationId)
	{
		int			given = 0;

		foreach(lc, options)
			given++;
		if (given > 1)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("a column takes at most one of the options \"source\", \"header\" and \"field\""),
					 errhint("Use \"source\" for metadata, \"header\" for one header, or \"field\" for a JSON field.")));
	}
}

/*
 * Validate the generic options given to a FOREIGN DATA WRAPPER, SERVER,
 * USER MAPPING or FOREIGN TABLE that uses source_writes, or to a column.
 * What needs the server's kind or the table's columns is checked again by
 * sw_source_table() at the end of the command.
 *
 * PUBLIC may call this function directly, so it must not have side effects
 * whatever the options say.
 */
PG_FUNCTION_INFO_V1(source_writes_fdw_validator);

Datum
source_writes_fdw_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		validate_options(options, catalog);
	}
	PG_CATCH();
	{
		if (catalog == UserMappingRelationId || has_credential(options))
			rethrow_hiding_statement(cxt);
		PG_RE_THROW();
	}
	PG_END_TRY();

	PG_RETURN_VOID();
}

/*
 * Check the options of a user mapping against its server's kind.  As in
 * the validator, a failure keeps the statement out of the server log.
 */
void
sw_check_user_mapping(UserMapping *mapping, ForeignServer *server)
{
	SwKind		kind = sw_server_kind(server);
	MemoryContext cxt = CurrentMemoryContext;

	PG_TRY();
	{
		ListCell   *lc;

		foreach(lc, mapping->options)
			sw_check_option((DefElem *) lfirst(lc), UserMappingRelationId, kind);
	}
	PG_CATCH();
	{
		rethrow_hiding_statement(cxt);
	}
	PG_END_TRY();
}
