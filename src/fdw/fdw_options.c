/*-------------------------------------------------------------------------
 *
 * fdw_options.c
 *		  Validation of the options of source_writes servers, user mappings,
 *		  source tables and their columns
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

#include <ctype.h>

#include "access/reloptions.h"
#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_type.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "fdw/fdw.h"
#include "fdw/options.h"
#include "ingest/ingest.h"

#define SW_ANY_KIND		(SW_KIND_KAFKA | SW_KIND_WEBHOOK)

/* default webhook body limit */
#define SW_DEFAULT_MAX_BODY (1024 * 1024)

typedef void (*SwValueCheck) (const char *option, const char *value);

/*
 * Describes one option: where it may appear, for which kinds of sources,
 * and what values it takes (a list of choices, or a check function).
 */
typedef struct SwOption
{
	const char *name;
	Oid			context;		/* OID of the catalog holding the object */
	int			kinds;			/* SwKind bits the option is valid for */
	const char *const *choices; /* NULL-terminated, or NULL */
	SwValueCheck check;			/* for free-form values, or NULL; may quote
								 * the value in errors, so options of user
								 * mappings use only check_nonempty */
	const char *const *(*choices_of) (int kinds);	/* or the choices, for
													 * the option's kinds */
} SwOption;

static void check_topic(const char *option, const char *value);
static void check_start_offset(const char *option, const char *value);
static void check_key_list(const char *option, const char *value);
static void check_interval(const char *option, const char *value);
static void check_byte_size(const char *option, const char *value);
static void check_workers(const char *option, const char *value);
static void check_http_token(const char *option, const char *value);
static void rethrow_hiding_statement(MemoryContext cxt) pg_attribute_noreturn();

static const char *const server_types[] = {"kafka", "webhook", NULL};
static const char *const envelopes[] = {"none", "upsert", NULL};
static const char *const encodings[] = {"hex", "base64", NULL};
static const char *const kafka_sources[] = {"partition", "offset", "timestamp", "key", "headers", "topic", NULL};
static const char *const webhook_sources[] = {"body", "headers", "received_at", NULL};

static const SwOption sw_options[] = {
	/* servers */
	{"type", ForeignServerRelationId, SW_ANY_KIND, server_types, NULL},
	{"brokers", ForeignServerRelationId, SW_KIND_KAFKA, NULL, check_nonempty},
	/* user mappings */
	{"secret", UserMappingRelationId, SW_KIND_WEBHOOK, NULL, check_nonempty},
	/* source tables */
	{"topic", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_topic},
	{"format", ForeignTableRelationId, SW_KIND_KAFKA, NULL, NULL, sw_format_names},
	{"format", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, NULL, sw_format_names},
	{"envelope", ForeignTableRelationId, SW_KIND_KAFKA, envelopes, NULL},
	{"key", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_key_list},
	{"start_offset", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_start_offset},
	{"workers", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_workers},
	{"retain_history", ForeignTableRelationId, SW_ANY_KIND, NULL, check_interval},
	{"max_body_bytes", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_byte_size},
	{"signature_header", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_http_token},
	{"signature_encoding", ForeignTableRelationId, SW_KIND_WEBHOOK, encodings, NULL},
	{"signature_prefix", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_nonempty},
	{"idempotency_header", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_http_token},
	/* columns */
	{"source", AttributeRelationId, SW_KIND_KAFKA, kafka_sources, NULL},
	{"source", AttributeRelationId, SW_KIND_WEBHOOK, webhook_sources, NULL},
	{"header", AttributeRelationId, SW_ANY_KIND, NULL, check_nonempty},
	{"field", AttributeRelationId, SW_ANY_KIND, NULL, check_nonempty},
	{NULL, InvalidOid, 0, NULL, NULL}
};

const char *
sw_kind_name(SwKind kind)
{
	return kind == SW_KIND_KAFKA ? "Kafka" : "webhook";
}

static const char *
context_name(Oid context)
{
	switch (context)
	{
		case ForeignServerRelationId:
			return "servers";
		case UserMappingRelationId:
			return "user mappings";
		case ForeignTableRelationId:
			return "source tables";
		case AttributeRelationId:
			return "columns";
	}
	return "objects";
}

/* the choices an option takes, or NULL */
static const char *const *
option_choices(const SwOption *opt)
{
	return opt->choices_of ? opt->choices_of(opt->kinds) : opt->choices;
}

/*
 * The names of the options valid in a context for the given kinds, joined
 * for a hint.  The rdkafka prefix is shown where it applies.
 */
static char *
valid_option_names(Oid context, int kinds)
{
	StringInfoData buf;
	const SwOption *opt;

	initStringInfo(&buf);
	for (opt = sw_options; opt->name; opt++)
	{
		const SwOption *prev;
		bool		seen = false;

		if (opt->context != context || (opt->kinds & kinds) == 0)
			continue;
		for (prev = sw_options; prev < opt; prev++)
			if (prev->context == context && (prev->kinds & kinds) != 0 &&
				strcmp(prev->name, opt->name) == 0)
				seen = true;
		if (!seen)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", opt->name);
	}
	if ((context == ForeignServerRelationId || context == UserMappingRelationId) &&
		(kinds & SW_KIND_KAFKA))
		appendStringInfo(&buf, "%s" RDKAFKA_PREFIX "<librdkafka property>",
						 buf.len > 0 ? ", " : "");
	return buf.data;
}

/*
 * The choices an option takes for the given kinds, joined for a hint; when
 * they differ by kind, each list is labelled with its kind.
 */
static char *
valid_choices(const char *name, Oid context, int kinds)
{
	StringInfoData buf;
	const SwOption *opt;
	int			nlists = 0;

	for (opt = sw_options; opt->name; opt++)
		if (opt->context == context && (opt->kinds & kinds) != 0 &&
			strcmp(opt->name, name) == 0 && option_choices(opt) != NULL)
			nlists++;

	initStringInfo(&buf);
	for (opt = sw_options; opt->name; opt++)
	{
		if (opt->context != context || (opt->kinds & kinds) == 0 ||
			strcmp(opt->name, name) != 0 || option_choices(opt) == NULL)
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, "; ");
		appendStringInfoString(&buf, join_list(option_choices(opt)));
		if (nlists > 1)
			appendStringInfo(&buf, " (%s)", sw_kind_name(opt->kinds & kinds));
	}
	return buf.data;
}

/*
 * Check one option by name and value against the table, for the given
 * kinds: in the validator all kinds, once the kind is known just that one.
 */
static void
check_option(DefElem *def, Oid context, int kinds)
{
	const char *value = defGetString(def);
	const SwOption *opt;
	bool		known = false;
	bool		known_other_kind = false;
	bool		value_ok = false;
	SwValueCheck check = NULL;

	if ((context == ForeignServerRelationId || context == UserMappingRelationId) &&
		strncmp(def->defname, RDKAFKA_PREFIX, strlen(RDKAFKA_PREFIX)) == 0)
	{
		if (!(kinds & SW_KIND_KAFKA))
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("option \"%s\" is not valid for %s %s",
							def->defname, sw_kind_name(kinds), context_name(context)),
					 errhint("Valid options for %s %s are: %s.",
							 sw_kind_name(kinds), context_name(context),
							 valid_option_names(context, kinds))));
		return;					/* see sw_rdkafka_check_property() */
	}

	for (opt = sw_options; opt->name; opt++)
	{
		if (opt->context != context || strcmp(opt->name, def->defname) != 0)
			continue;
		if ((opt->kinds & kinds) == 0)
		{
			known_other_kind = true;
			continue;
		}
		known = true;
		if (option_choices(opt) && in_list(option_choices(opt), value))
			value_ok = true;
		if (opt->check)
			check = opt->check;
	}

	if (!known && known_other_kind)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"%s\" is not valid for %s %s",
						def->defname, sw_kind_name(kinds), context_name(context)),
				 errhint("Valid options for %s %s are: %s.",
						 sw_kind_name(kinds), context_name(context),
						 valid_option_names(context, kinds))));
	if (!known)
	{
		char	   *names = valid_option_names(context, kinds);

		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", def->defname),
				 names[0]
				 ? errhint("Valid options in this context are: %s.", names)
				 : errhint("There are no valid options in this context.")));
	}

	if (check)
		check(def->defname, value);
	else if (!value_ok)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 context == UserMappingRelationId
				 ? errmsg("invalid value for option \"%s\"", def->defname)
				 : errmsg("invalid value for option \"%s\": \"%s\"",
						  def->defname, value),
				 errhint("Valid values are: %s.",
						 valid_choices(def->defname, context, kinds))));
}

/*
 * Kafka topic names: 1 to 249 of [a-zA-Z0-9._-], not "." or "..".
 */
static void
check_topic(const char *option, const char *value)
{
	size_t		len = strlen(value);

	if (len == 0 || len > 249 ||
		strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") != len ||
		strcmp(value, ".") == 0 || strcmp(value, "..") == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Kafka topic names have 1 to 249 characters of a-z, A-Z, 0-9, \".\", \"_\" and \"-\".")));
}

/*
 * Where a Kafka source starts: 'earliest', 'latest', or offsets of
 * partitions, "0:1200, 1:800" (partitions not named start at the
 * earliest).  Returns the named offsets as a list of SwStartOffset, NIL
 * for earliest; sets *latest.
 */
List *
sw_parse_start_offset(const char *option, const char *value, bool *latest)
{
	List	   *result = NIL;
	const char *p = value;

	*latest = strcmp(value, "latest") == 0;
	if (*latest || strcmp(value, "earliest") == 0)
		return NIL;
	for (;;)
	{
		SwStartOffset *start = palloc(sizeof(SwStartOffset));
		char	   *end;
		long		part;
		long long	offset;
		ListCell   *lc;

		while (*p == ' ')
			p++;
		errno = 0;
		part = strtol(p, &end, 10);
		if (end == p || *end != ':' || errno != 0 || part < 0 || part > PG_INT32_MAX ||
			!isdigit((unsigned char) *p))
			break;
		p = end + 1;
		offset = strtoll(p, &end, 10);
		if (end == p || errno != 0 || !isdigit((unsigned char) *p))
			break;
		start->partition = (int32) part;
		start->offset = (int64) offset;
		foreach(lc, result)
			if (((SwStartOffset *) lfirst(lc))->partition == start->partition)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
						 errdetail("Partition %d is named twice.", start->partition)));
		result = lappend(result, start);
		p = end;
		while (*p == ' ')
			p++;
		if (*p == '\0')
			return result;
		if (*p != ',')
			break;
		p++;
	}
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
			 errhint("Valid values are \"earliest\", \"latest\" and offsets of partitions, such as '0:1200, 1:800'.")));
	return NIL;					/* keep compiler quiet */
}

static void
check_start_offset(const char *option, const char *value)
{
	bool		latest;

	(void) sw_parse_start_offset(option, value, &latest);
}

/*
 * A list of column names, written as in SQL: "id" or "region, id".
 * Returns the names.
 */
static List *
parse_key_list(const char *option, const char *value)
{
	List	   *names;
	ListCell   *lc;

	if (!SplitIdentifierString(pstrdup(value), ',', &names) || names == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give a comma-separated list of column names, e.g. 'id' or 'region, id'.")));

	foreach(lc, names)
	{
		ListCell   *lc2;

		for_each_cell(lc2, names, lnext(names, lc))
			if (strcmp(lfirst(lc), lfirst(lc2)) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
						 errmsg("column \"%s\" appears more than once in option \"%s\"",
								(char *) lfirst(lc), option),
						 errhint("Name each key column once.")));
	}
	return names;
}

static void
check_key_list(const char *option, const char *value)
{
	(void) parse_key_list(option, value);
}

/*
 * Parse an interval written as PostgreSQL reads intervals ('7 days',
 * '36 hours', 'P1D', '0') into milliseconds, without throwing; months count
 * as 30 days.  Returns false for anything that is not a valid interval.
 */
static bool
parse_interval_ms(const char *value, int64 *ms)
{
	char		workbuf[256];
	char	   *field[MAXDATEFIELDS];
	int			ftype[MAXDATEFIELDS];
	int			nf;
	int			dtype;
	int			dterr;
	struct pg_itm_in tt;
	Interval	itv;
	int64		result;

	dterr = ParseDateTime(value, workbuf, sizeof(workbuf), field, ftype,
						  MAXDATEFIELDS, &nf);
	if (dterr == 0)
		dterr = DecodeInterval(field, ftype, nf, INTERVAL_FULL_RANGE,
							   &dtype, &tt);
	if (dterr == DTERR_BAD_FORMAT)
		dterr = DecodeISO8601Interval(unconstify(char *, value), &dtype, &tt);
	if (dterr != 0 || dtype != DTK_DELTA || itmin2interval(&tt, &itv) != 0)
		return false;

	result = itv.time / 1000;
	if (pg_add_s64_overflow(result, (int64) itv.day * SW_MSECS_PER_DAY, &result) ||
		pg_add_s64_overflow(result,
							(int64) itv.month * DAYS_PER_MONTH * SW_MSECS_PER_DAY,
							&result))
		return false;
	*ms = result;
	return true;
}

static void
check_interval(const char *option, const char *value)
{
	int64		ms;

	if (!parse_interval_ms(value, &ms))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give an interval, e.g. '7 days', '12 hours' or '0'.")));
	if (ms < 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not be negative", option),
				 errhint("Give an interval of zero or more, e.g. '7 days' or '0'.")));
}

static int
parse_byte_size(const char *option, const char *value)
{
	int			bytes;
	const char *hintmsg = NULL;

	if (!parse_int(value, &bytes, GUC_UNIT_BYTE, &hintmsg) ||
		bytes < 1 || bytes > (int) MaxAllocSize)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give a size between 1 byte and 1GB, e.g. '65536' or '10MB'.")));
	return bytes;
}

static void
check_byte_size(const char *option, const char *value)
{
	(void) parse_byte_size(option, value);
}

/* how many workers ingest a Kafka source, its partitions shared out */
static int
parse_workers(const char *option, const char *value)
{
	char	   *end;
	long		workers;

	errno = 0;
	workers = strtol(value, &end, 10);
	if (errno != 0 || end == value || *end != '\0' || !isdigit((unsigned char) *value) ||
		workers < 1 || workers > SW_MAX_SOURCE_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give a number of workers between 1 and %d.", SW_MAX_SOURCE_WORKERS)));
	return (int) workers;
}

static void
check_workers(const char *option, const char *value)
{
	(void) parse_workers(option, value);
}

/*
 * HTTP header names are RFC 9110 tokens.
 */
static bool
is_http_token(const char *value)
{
	size_t		len = strlen(value);

	return len > 0 &&
		strspn(value, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
			   "0123456789!#$%&'*+-.^_`|~") == len;
}

static void
check_http_token(const char *option, const char *value)
{
	if (!is_http_token(value))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("HTTP header names consist of letters, digits and !#$%%&'*+-.^_`|~.")));
}

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

		check_option(def, ForeignServerRelationId, SW_ANY_KIND);
		if (strcmp(def->defname, "type") == 0)
			kind = strcmp(defGetString(def), "kafka") == 0
				? SW_KIND_KAFKA : SW_KIND_WEBHOOK;
	}
	if (kind == 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"type\" is required for source_writes servers"),
				 errhint("Valid values are: %s.", join_list(server_types))));

	/* with the kind known, check again for it */
	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		check_option(def, ForeignServerRelationId, kind);
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

		check_option(def, catalog, SW_ANY_KIND);
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
			check_option((DefElem *) lfirst(lc), UserMappingRelationId, kind);
	}
	PG_CATCH();
	{
		rethrow_hiding_statement(cxt);
	}
	PG_END_TRY();
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
			return text_types;
	}
	return NULL;
}

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

		check_option(def, AttributeRelationId, st->kind);
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
				check_http_token(def->defname, col->header);
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
				 errmsg("option \"key\" is required when envelope is 'upsert'"),
				 errhint("Name the key columns, e.g. OPTIONS (envelope 'upsert', key 'id').")));
	if (!st->upsert && st->key != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("option \"key\" is only valid when envelope is 'upsert'"),
				 errhint("Valid values for \"envelope\" are: %s.", join_list(envelopes))));

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
	return value ? parse_workers("workers", value) : 1;
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
	return value ? parse_byte_size("max_body_bytes", value) : SW_DEFAULT_MAX_BODY;
}

/*
 * The signature_header of a webhook source table; NULL if it has none or
 * is gone.  Read from the catalog row alone, as sw_source_max_body_bytes.
 */
char *
sw_source_signature_header(Oid relid)
{
	bool		exists;

	return table_option_value(relid, "signature_header", &exists);
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
	ListCell   *lc;

	st->relid = relid;
	st->serverid = server->serverid;
	st->kind = sw_server_kind(server);
	st->format = sw_format_lookup("json");
	st->retain_history_ms = -1;
	st->max_body_bytes = SW_DEFAULT_MAX_BODY;
	st->workers = 1;

	foreach(lc, table->options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);
		char	   *value = defGetString(def);

		check_option(def, ForeignTableRelationId, st->kind);

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
			st->upsert = strcmp(value, "upsert") == 0;
		else if (strcmp(def->defname, "key") == 0)
			st->key = parse_key_list(def->defname, value);
		else if (strcmp(def->defname, "start_offset") == 0)
			st->start_offsets = sw_parse_start_offset(def->defname, value,
													  &st->start_latest);
		else if (strcmp(def->defname, "workers") == 0)
			st->workers = parse_workers(def->defname, value);
		else if (strcmp(def->defname, "retain_history") == 0)
			(void) parse_interval_ms(value, &st->retain_history_ms);
		else if (strcmp(def->defname, "max_body_bytes") == 0)
			st->max_body_bytes = parse_byte_size(def->defname, value);
		else if (strcmp(def->defname, "signature_header") == 0)
			st->signature_header = value;
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
	}

	if (st->kind == SW_KIND_KAFKA && !has_topic)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("option \"topic\" is required for Kafka source tables"),
				 errhint("Name the topic to ingest, e.g. OPTIONS (topic 'orders').")));
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
			!parse_interval_ms(defGetString(def), &ms))
			ms = -1;
	}
	return ms;
}
