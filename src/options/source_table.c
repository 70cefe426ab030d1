/*-------------------------------------------------------------------------
 *
 * source_table.c
 *		  What the options of a source table, its columns and its server
 *		  say, read into an SwSourceTable for storage, the decoder, the
 *		  workers and the webhook worker
 *
 * See doc/internals.md, "Storage layout" (Options).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/options/source_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "options/options_int.h"
#include "webhook/signature.h"

/*
 * The kind a server's options declare.  Options were validated when the
 * server was created, so anything but "webhook" is Kafka.
 */
SwKind
sw_server_kind(ForeignServer *server)
{
	ListCell   *lc;

	foreach(lc, server->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "type") == 0)
			return strcmp(defGetString(def), "webhook") == 0
				? SW_KIND_WEBHOOK : SW_KIND_KAFKA;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
			 errmsg("server \"%s\" has no option \"type\"", server->servername)));
	return SW_KIND_KAFKA;		/* keep compiler quiet */
}

/*
 * The column types a metadata source can fill, or NULL for "any type".
 */
static const Oid *
source_types(SwColumnSource source)
{
	static const Oid int_types[] = {INT4OID, INT8OID, InvalidOid};
	static const Oid bigint_types[] = {INT8OID, InvalidOid};
	static const Oid time_types[] = {TIMESTAMPTZOID, InvalidOid};
	static const Oid raw_types[] = {TEXTOID, BYTEAOID, JSONOID, JSONBOID, InvalidOid};
	static const Oid json_types[] = {JSONBOID, JSONOID, InvalidOid};
	static const Oid text_types[] = {TEXTOID, InvalidOid};
	static const Oid header_types[] = {TEXTOID, BYTEAOID, InvalidOid};
	static const Oid ts_ms_types[] = {INT8OID, TIMESTAMPTZOID, InvalidOid};

	switch (source)
	{
		case SW_COLUMN_DATA:
			return NULL;
		case SW_COLUMN_HEADER:
			return header_types;
		case SW_COLUMN_PARTITION:
			return int_types;
		case SW_COLUMN_OFFSET:
			return bigint_types;
		case SW_COLUMN_TIMESTAMP:
		case SW_COLUMN_RECEIVED_AT:
			return time_types;
		case SW_COLUMN_KEY:
		case SW_COLUMN_BODY:
			return raw_types;
		case SW_COLUMN_HEADERS:
			return json_types;
		case SW_COLUMN_TOPIC:
		case SW_COLUMN_OP:
			return text_types;
		case SW_COLUMN_BEFORE:
		case SW_COLUMN_SOURCE:
			return json_types;
		case SW_COLUMN_TS_MS:
			return ts_ms_types;
	}
	return NULL;
}

/* the metadata source that a value of column option source names */
static SwColumnSource
parse_column_source(const char *value)
{
	static const struct
	{
		const char *name;
		SwColumnSource source;
	}			names[] = {
		{"partition", SW_COLUMN_PARTITION},
		{"offset", SW_COLUMN_OFFSET},
		{"timestamp", SW_COLUMN_TIMESTAMP},
		{"key", SW_COLUMN_KEY},
		{"headers", SW_COLUMN_HEADERS},
		{"topic", SW_COLUMN_TOPIC},
		{"body", SW_COLUMN_BODY},
		{"received_at", SW_COLUMN_RECEIVED_AT},
		{"op", SW_COLUMN_OP},
		{"before", SW_COLUMN_BEFORE},
		{"source", SW_COLUMN_SOURCE},
		{"ts_ms", SW_COLUMN_TS_MS},
	};

	for (int i = 0; i < lengthof(names); i++)
		if (strcmp(names[i].name, value) == 0)
			return names[i].source;
	elog(ERROR, "unrecognized column source \"%s\"", value);
	return SW_COLUMN_DATA;		/* keep compiler quiet */
}

/*
 * Read and check a column's options and type.
 */
static void
load_column(SwSourceTable *st, Relation rel, Form_pg_attribute att,
			SwColumn *col)
{
	List	   *options = GetForeignColumnOptions(RelationGetRelid(rel), att->attnum);
	ListCell   *lc;
	const char *source_name = NULL;
	const Oid  *types;
	Oid			basetype = getBaseType(att->atttypid);

	col->attnum = att->attnum;
	col->name = pstrdup(NameStr(att->attname));
	col->typid = att->atttypid;
	col->source = SW_COLUMN_DATA;

	if (col->name[0] == '$')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NAME),
				 errmsg("column name \"%s\" is reserved", col->name),
				 errdetail("Names that begin with \"$\" are reserved for source_writes' own columns.")));

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		sw_check_option(def, AttributeRelationId, st->kind);
		if (strcmp(def->defname, "source") == 0)
		{
			source_name = defGetString(def);
			col->source = parse_column_source(source_name);
		}
		else if (strcmp(def->defname, "header") == 0)
		{
			col->header = defGetString(def);
			col->source = SW_COLUMN_HEADER;
			if (st->kind == SW_KIND_WEBHOOK)
				sw_check_http_token(def->defname, col->header);
		}
		else if (strcmp(def->defname, "field") == 0)
			col->field = defGetString(def);
	}

	if (col->field && !st->format->takes_fields)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("column option \"field\" is only valid for JSON formats"),
				 errdetail("Column \"%s\" of source table \"%s\" names a field, but the table's format is not JSON.",
						   col->name, RelationGetRelationName(rel)),
				 errhint("Valid options for this column are: source, header.")));

	types = source_types(col->source);
	if (types)
	{
		bool		ok = false;
		StringInfoData names;

		initStringInfo(&names);
		for (const Oid *t = types; OidIsValid(*t); t++)
		{
			if (*t == basetype)
				ok = true;
			appendStringInfo(&names, "%s%s", names.len > 0 ? ", " : "",
							 format_type_be(*t));
		}
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
					 errmsg("column \"%s\" of source table \"%s\" cannot have type %s",
							col->name, RelationGetRelationName(rel),
							format_type_be(att->atttypid)),
					 source_name
					 ? errdetail("The column takes its value from the %s source \"%s\".",
								 sw_kind_name(st->kind), source_name)
					 : errdetail("The column takes its value from the header \"%s\".",
								 col->header),
					 errhint("Valid types for this column are: %s.", names.data)));
	}
}

/*
 * Check the key option against the columns and the envelope.
 */
static void
check_key(SwSourceTable *st, Relation rel)
{
	ListCell   *lc;

	if (st->upsert && st->key == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"key\" is required when envelope is '%s'",
						st->debezium ? "debezium" : "upsert"),
				 errhint("Name the key columns, e.g. OPTIONS (envelope '%s', key 'id').",
						 st->debezium ? "debezium" : "upsert")));
	if (!st->upsert && st->key != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"key\" is only valid when envelope is 'upsert'"),
				 errhint("Valid values for \"envelope\" are: %s.", join_list(sw_envelopes))));

	foreach(lc, st->key)
	{
		const char *name = lfirst(lc);
		bool		found = false;

		for (int i = 0; i < st->ncolumns; i++)
			if (strcmp(st->columns[i].name, name) == 0)
				found = true;
		if (!found)
		{
			StringInfoData columns;

			initStringInfo(&columns);
			for (int i = 0; i < st->ncolumns; i++)
				appendStringInfo(&columns, "%s%s", i > 0 ? ", " : "",
								 quote_identifier(st->columns[i].name));
			ereport(ERROR,
					(errcode(ERRCODE_FDW_COLUMN_NAME_NOT_FOUND),
					 errmsg("column \"%s\" named in option \"key\" does not exist", name),
					 errdetail("Source table \"%s\" has no column \"%s\".",
							   RelationGetRelationName(rel), name),
					 errhint("Valid columns are: %s.", columns.data)));
		}
	}
}

/*
 * The value of one option of a foreign table, read from its catalog row
 * alone (no lock); NULL if it is not set.  *exists says whether the table
 * does.
 */
static char *
table_option_value(Oid relid, const char *name, bool *exists)
{
	HeapTuple	tuple = SearchSysCache1(FOREIGNTABLEREL, ObjectIdGetDatum(relid));
	Datum		datum;
	bool		isnull;
	char	   *value = NULL;
	ListCell   *lc;

	*exists = HeapTupleIsValid(tuple);
	if (!*exists)
		return NULL;
	datum = SysCacheGetAttr(FOREIGNTABLEREL, tuple, Anum_pg_foreign_table_ftoptions,
							&isnull);
	if (!isnull)
		foreach(lc, untransformRelOptions(datum))
		{
			DefElem    *def = lfirst(lc);

			if (strcmp(def->defname, name) == 0)
				value = defGetString(def);
		}
	ReleaseSysCache(tuple);
	return value;
}

/*
 * How many workers ingest a Kafka source table (its option workers); 0 if
 * the table is gone.  Read from the catalog row alone, for the launcher.
 */
int
sw_source_workers(Oid relid)
{
	bool		exists;
	char	   *value = table_option_value(relid, "workers", &exists);

	if (!exists)
		return 0;
	return value ? sw_parse_workers("workers", value) : 1;
}

/*
 * The max_body_bytes of a webhook source table; 0 if the table is gone.
 * Read from the catalog row alone, without a lock, for the webhook
 * server's map of limits.
 */
int
sw_source_max_body_bytes(Oid relid)
{
	bool		exists;
	char	   *value = table_option_value(relid, "max_body_bytes", &exists);

	if (!exists)
		return 0;
	return value ? sw_parse_byte_size("max_body_bytes", value) : SW_DEFAULT_MAX_BODY;
}

/*
 * The signature headers of a webhook source table, as sw_signature_headers()
 * tells them (its scheme's, several separated by commas for standard, or
 * its signature_header); NULL if it has none or is gone.  Read from the
 * catalog row alone, as sw_source_max_body_bytes.
 */
char *
sw_source_signature_header(Oid relid)
{
	bool		exists;
	char	   *name = table_option_value(relid, "signature_scheme", &exists);
	const SwSignatureScheme *scheme = name ? sw_signature_scheme_named(name) : NULL;

	/* a list of names for standard, which takes webhook- or svix- ones */
	if (scheme && scheme->header)
		return pstrdup(scheme->header);
	return table_option_value(relid, "signature_header", &exists);
}

/*
 * The names of the signature schemes, joined for a hint.
 */
static char *
scheme_list(void)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *const *n = sw_signature_scheme_names(0); *n; n++)
		appendStringInfo(&buf, "%s%s", buf.len ? ", " : "", *n);
	return buf.data;
}

/*
 * Check that a source table's signature options go together: hmac and
 * token need signature_header, only hmac takes signature_encoding and
 * signature_prefix, the other schemes name their own headers, and only a
 * scheme that signs a timestamp takes signature_tolerance.
 */
static void
check_signature_options(SwSourceTable *st, bool has_encoding_options,
						bool has_tolerance)
{
	const SwSignatureScheme *scheme;
	bool		is_hmac;
	bool		is_token;

	if (st->signature_scheme == NULL)
	{
		if (has_tolerance)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("option \"signature_tolerance\" needs option \"signature_scheme\""),
					 errhint("Name a scheme that signs a timestamp: stripe, standard, slack, twitch, paddle or zoom.")));
		return;
	}
	scheme = sw_signature_scheme_named(st->signature_scheme);
	is_hmac = strcmp(scheme->name, "hmac") == 0;
	is_token = strcmp(scheme->name, "token") == 0;
	if ((is_hmac || is_token) && st->signature_header == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("signature scheme \"%s\" needs option \"signature_header\"", scheme->name),
				 errhint("Name the header that carries the %s, e.g. OPTIONS (signature_header '%s').",
						 is_token ? "token" : "signature",
						 is_token ? "Authorization" : "X-Signature")));
	if (!is_hmac && has_encoding_options)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("options \"signature_encoding\" and \"signature_prefix\" go only with signature scheme \"hmac\""),
				 errhint("The signature schemes are %s; each but hmac and token reads the headers its provider sends.",
						 scheme_list())));
	if (!is_hmac && !is_token && st->signature_header)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("signature scheme \"%s\" takes no option \"signature_header\"", scheme->name),
				 errhint("The signature schemes are %s; each but hmac and token reads the headers its provider sends.",
						 scheme_list())));
	if (has_tolerance && scheme->tolerance_s == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("signature scheme \"%s\" signs no timestamp, so it takes no option \"signature_tolerance\"", scheme->name),
				 errhint("The schemes that sign a timestamp are stripe, standard, slack, twitch, paddle and zoom.")));
}

/* whether a server has an option */
static bool
server_has_option(ForeignServer *server, const char *name)
{
	ListCell   *lc;

	foreach(lc, server->options)
		if (strcmp(((DefElem *) lfirst(lc))->defname, name) == 0)
			return true;
	return false;
}

/*
 * envelope 'debezium' reads change events in the formats that have them
 * (json and avro), and only it has the columns of an event's envelope.
 */
static void
check_envelope(SwSourceTable *st)
{
	if (st->debezium && st->format->read_event == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("envelope 'debezium' takes format 'json' or 'avro'"),
				 errhint("Debezium writes its change events in JSON or in Avro.")));
	for (int i = 0; i < st->ncolumns; i++)
	{
		SwColumnSource source = st->columns[i].source;

		if (!st->debezium &&
			(source == SW_COLUMN_OP || source == SW_COLUMN_BEFORE ||
			 source == SW_COLUMN_SOURCE || source == SW_COLUMN_TS_MS))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("column \"%s\" takes a part of a change event, which only envelope 'debezium' has",
							st->columns[i].name),
					 errhint("Sources op, before, source and ts_ms need OPTIONS (envelope 'debezium').")));
	}
}

/*
 * Read the options of a source table, its server and its columns, check
 * them all together, and return what they say.
 */
SwSourceTable *
sw_source_table(Relation rel)
{
	Oid			relid = RelationGetRelid(rel);
	ForeignTable *table = GetForeignTable(relid);
	ForeignServer *server = GetForeignServer(table->serverid);
	TupleDesc	desc = RelationGetDescr(rel);
	SwSourceTable *st = palloc0(sizeof(SwSourceTable));
	bool		has_topic = false;
	bool		has_signature_options = false;
	bool		has_tolerance = false;
	bool		has_key_format = false;
	bool		has_carry_edits = false;
	ListCell   *lc;

	st->relid = relid;
	st->serverid = server->serverid;
	st->kind = sw_server_kind(server);
	st->format = sw_format_lookup("json");
	st->retain_history_ms = -1;
	st->carry_edits = true;
	st->max_body_bytes = SW_DEFAULT_MAX_BODY;
	st->workers = 1;
	st->signature_tolerance_ms = -1;

	foreach(lc, table->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		char	   *value = defGetString(def);

		sw_check_option(def, ForeignTableRelationId, st->kind);

		if (strcmp(def->defname, "topic") == 0)
		{
			st->topic = value;
			has_topic = true;
		}
		else if (strcmp(def->defname, "format") == 0)
		{
			st->format = sw_format_lookup(value);
			if (st->format == NULL)
				elog(ERROR, "unrecognized format \"%s\"", value);
		}
		else if (strcmp(def->defname, "envelope") == 0)
		{
			st->upsert = strcmp(value, "upsert") == 0 || strcmp(value, "debezium") == 0;
			st->debezium = strcmp(value, "debezium") == 0;
		}
		else if (strcmp(def->defname, "key_format") == 0)
		{
			for (int f = 0; sw_key_formats[f]; f++)
				if (strcmp(value, sw_key_formats[f]) == 0)
					st->key_format = (SwKeyFormat) f;
			has_key_format = true;
		}
		else if (strcmp(def->defname, "key") == 0)
			st->key = sw_parse_key_list(def->defname, value);
		else if (strcmp(def->defname, "start_offset") == 0)
			st->start_offsets = sw_parse_start_offset(def->defname, value,
													  &st->start_latest);
		else if (strcmp(def->defname, "workers") == 0)
			st->workers = sw_parse_workers(def->defname, value);
		else if (strcmp(def->defname, "retain_history") == 0)
			(void) sw_parse_interval_ms(value, &st->retain_history_ms);
		else if (strcmp(def->defname, "version_of") == 0)
			st->version_of = value;
		else if (strcmp(def->defname, "carry_edits") == 0)
		{
			(void) parse_bool(value, &st->carry_edits);
			has_carry_edits = true;
		}
		else if (strcmp(def->defname, "retain_raw") == 0)
			(void) parse_bool(value, &st->retain_raw);
		else if (strcmp(def->defname, "max_body_bytes") == 0)
			st->max_body_bytes = sw_parse_byte_size(def->defname, value);
		else if (strcmp(def->defname, "signature_header") == 0)
			st->signature_header = value;
		else if (strcmp(def->defname, "signature_scheme") == 0)
			st->signature_scheme = value;
		else if (strcmp(def->defname, "signature_tolerance") == 0)
		{
			(void) sw_parse_interval_ms(value, &st->signature_tolerance_ms);
			has_tolerance = true;
		}
		else if (strcmp(def->defname, "signature_encoding") == 0)
		{
			st->signature_base64 = strcmp(value, "base64") == 0;
			has_signature_options = true;
		}
		else if (strcmp(def->defname, "signature_prefix") == 0)
		{
			st->signature_prefix = value;
			has_signature_options = true;
		}
		else if (strcmp(def->defname, "idempotency_header") == 0)
			st->idempotency_header = value;
		else if (strcmp(def->defname, "idempotency_field") == 0)
			st->idempotency_field = value;
	}

	if (st->kind == SW_KIND_KAFKA && !has_topic)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"topic\" is required for Kafka source tables"),
				 errhint("Name the topic to ingest, e.g. OPTIONS (topic 'orders').")));
	check_signature_options(st, has_signature_options, has_tolerance);
	if (has_key_format && !st->upsert)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"key_format\" is only valid when envelope is 'upsert'"),
				 errhint("Without it, message keys are read only by a column with OPTIONS (source 'key'), as they are.")));
	if (st->key_format == SW_KEY_AVRO && !server_has_option(server, "schema_registry"))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("key_format \"avro\" needs server option \"schema_registry\""),
				 errhint("Name the schema registry the writers use, e.g. ALTER SERVER ... OPTIONS (ADD schema_registry 'http://registry:8081').")));
	st->carry_edits_given = has_carry_edits;
	if (st->idempotency_header && st->idempotency_field)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("options \"idempotency_header\" and \"idempotency_field\" cannot both be given"),
				 errhint("A request's idempotency key comes from one place: a header, or a field of its JSON body.")));
	if (has_signature_options && st->signature_header == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("options \"signature_encoding\" and \"signature_prefix\" need option \"signature_header\""),
				 errhint("Name the header that carries the signature, e.g. OPTIONS (signature_header 'X-Signature').")));

	st->columns = palloc0(sizeof(SwColumn) * desc->natts);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (att->attisdropped)
			continue;
		load_column(st, rel, att, &st->columns[st->ncolumns++]);
	}
	if (st->ncolumns == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NUMBER),
				 errmsg("source table \"%s\" has no columns", RelationGetRelationName(rel)),
				 errhint("Add the columns the source fills.")));
	check_envelope(st);

	/*
	 * pg_dump creates a foreign table first and gives its columns their
	 * options later, one ALTER at a time, with check_function_bodies off,
	 * as for the bodies of functions: then the data columns are not
	 * counted, since which columns are data columns is not settled yet.
	 */
	if (check_function_bodies && st->format->check_columns)
		st->format->check_columns(st, rel);
	check_key(st, rel);
	return st;
}

/*
 * The retain_history of a source table in ms, or -1 to keep all history;
 * reads only the table's options, for the controller's hot path.
 */
int64
sw_retention_ms(Oid relid)
{
	ListCell   *lc;
	int64		ms = -1;

	foreach(lc, GetForeignTable(relid)->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, "retain_history") == 0 &&
			!sw_parse_interval_ms(defGetString(def), &ms))
			ms = -1;
	}
	return ms;
}
