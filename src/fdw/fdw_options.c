/*-------------------------------------------------------------------------
 *
 * fdw_options.c
 *		  Validation of the options of source_writes servers, user mappings,
 *		  source tables and their columns
 *
 * Options are checked twice.  The FDW validator sees one object's options
 * alone: it checks names and values, and for servers everything, since a
 * server's options say its kind.  A table's or a column's options only make
 * full sense next to the server's kind and the table's columns, so
 * sw_source_table() checks them all together; the DDL event trigger runs it
 * at the end of every command that creates or alters a source table.
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
#include "parser/parse_coerce.h"
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

#define SW_ANY_KIND		(SW_KIND_KAFKA | SW_KIND_WEBHOOK)

/* servers and user mappings set librdkafka properties under this prefix */
#define RDKAFKA_PREFIX		"rdkafka."

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
} SwOption;

static void check_nonempty(const char *option, const char *value);
static void check_topic(const char *option, const char *value);
static void check_start_offset(const char *option, const char *value);
static void check_key_list(const char *option, const char *value);
static void check_interval(const char *option, const char *value);
static void check_byte_size(const char *option, const char *value);
static void check_workers(const char *option, const char *value);
static void check_http_token(const char *option, const char *value);
static void rdkafka_bad_value(DefElem *def, const char *value, bool show_value,
							  const char *detail, const char *hint) pg_attribute_noreturn();
static void rethrow_hiding_statement(MemoryContext cxt) pg_attribute_noreturn();

static const char *const server_types[] = {"kafka", "webhook", NULL};
static const char *const kafka_formats[] = {"json", "text", "bytes", "csv", NULL};
static const char *const webhook_formats[] = {"json", "json_array", "text", "bytes", NULL};
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
	{"format", ForeignTableRelationId, SW_KIND_KAFKA, kafka_formats, NULL},
	{"format", ForeignTableRelationId, SW_KIND_WEBHOOK, webhook_formats, NULL},
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

/*
 * librdkafka properties that source_writes sets itself.
 */
static const char *const rdkafka_managed[] = {
	"bootstrap.servers", "metadata.broker.list", "group.id",
	"enable.auto.commit", "enable.auto.offset.store", "enable.partition.eof",
	"auto.offset.reset", "client.id", "isolation.level", NULL
};

/*
 * librdkafka properties that load code into the process or run a program:
 * refused for everyone, superusers included.  Names beginning with
 * "plugin." or "ssl.engine." and names ending in ".engine.location" are
 * refused as well (see rdkafka_refused_name()).
 */
static const char *const rdkafka_refused[] = {
	"plugin.library.paths", "sasl.kerberos.kinit.cmd",
	"ssl.engine.location", "ssl.engine.id", "ssl_engine_callback_data",
	"ssl.providers", NULL
};

/* how the value of an allowed librdkafka property is checked */
typedef enum RdkType
{
	RDK_BOOL,					/* true or false, in any case */
	RDK_INT,					/* a decimal integer in min..max */
	RDK_ENUM,					/* one of choices, in any case */
	RDK_ENUM_EXACT,				/* one of choices, exactly */
	RDK_STRING,					/* any non-empty string */
	RDK_PATH					/* an absolute path, or choices[0] */
} RdkType;

/* user mappings only, and the value is never shown */
#define RDK_CREDENTIAL		0x01
/* only a superuser may set it; every RDK_PATH property has this flag */
#define RDK_SUPERUSER		0x02

/*
 * One librdkafka property that servers and user mappings may set as
 * "rdkafka.<name>".  Types, ranges and choices are librdkafka 2.0.2's;
 * the validator never calls librdkafka, so it has no side effects.
 */
typedef struct RdkProperty
{
	const char *name;
	RdkType		type;
	int			flags;
	int64		min;			/* RDK_INT */
	int64		max;			/* RDK_INT */
	const char *const *choices; /* RDK_ENUM*; for RDK_PATH, one special
								 * value that is not a path, or NULL */
	int64		user_max;		/* RDK_INT: the most a role that is not a
								 * superuser may set; 0: max */
	const char *const *superuser_choices;	/* RDK_ENUM*: choices that only a
											 * superuser may set, or NULL */
} RdkProperty;

/*
 * What a worker's librdkafka may hold in memory, set by a role that is not
 * a superuser: prefetched messages (queued.max.messages.kbytes, and
 * queued.min.messages, whose count bounds their overhead) and one fetch
 * per broker (fetch.max.bytes, and the most a partition gives to it).
 * The largest response it accepts stays at most librdkafka's default (a
 * fetch may exceed fetch.max.bytes by a record batch).  Superusers may go
 * further.
 */
#define RDK_USER_QUEUE_KBYTES	8192
#define RDK_USER_QUEUE_MESSAGES	100000
#define RDK_USER_FETCH_BYTES	8388608
#define RDK_USER_RECEIVE_BYTES	100000000

static const char *const rdk_security_protocols[] = {"plaintext", "ssl", "sasl_plaintext", "sasl_ssl", NULL};
static const char *const rdk_sasl_mechanisms[] = {"GSSAPI", "PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", NULL};
/* Kerberos authenticates with the database server's own credentials */
static const char *const rdk_sasl_superuser_mechanisms[] = {"GSSAPI", NULL};
static const char *const rdk_endpoint_algorithms[] = {"none", "https", NULL};
static const char *const rdk_address_families[] = {"any", "v4", "v6", NULL};
static const char *const rdk_ca_special[] = {"probe", NULL};

static const RdkProperty rdkafka_properties[] = {
	/* security protocol and SASL */
	{"security.protocol", RDK_ENUM, 0, 0, 0, rdk_security_protocols},
	{"sasl.mechanism", RDK_ENUM_EXACT, 0, 0, 0, rdk_sasl_mechanisms, 0, rdk_sasl_superuser_mechanisms},
	{"sasl.mechanisms", RDK_ENUM_EXACT, 0, 0, 0, rdk_sasl_mechanisms, 0, rdk_sasl_superuser_mechanisms},
	{"sasl.username", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"sasl.password", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"sasl.oauthbearer.config", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"enable.sasl.oauthbearer.unsecure.jwt", RDK_BOOL, 0, 0, 0, NULL},
	{"sasl.kerberos.service.name", RDK_STRING, 0, 0, 0, NULL},
	/* picks from the server's own Kerberos keys; goes into the kinit command */
	{"sasl.kerberos.principal", RDK_STRING, RDK_SUPERUSER, 0, 0, NULL},
	{"sasl.kerberos.keytab", RDK_PATH, RDK_SUPERUSER, 0, 0, NULL},
	{"sasl.kerberos.min.time.before.relogin", RDK_INT, 0, 0, 86400000, NULL},
	/* TLS */
	{"ssl.ca.location", RDK_PATH, RDK_SUPERUSER, 0, 0, rdk_ca_special},
	{"ssl.ca.pem", RDK_STRING, 0, 0, 0, NULL},
	{"ssl.certificate.location", RDK_PATH, RDK_SUPERUSER, 0, 0, NULL},
	{"ssl.certificate.pem", RDK_STRING, 0, 0, 0, NULL},
	{"ssl.key.location", RDK_PATH, RDK_SUPERUSER, 0, 0, NULL},
	{"ssl.key.pem", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"ssl.key.password", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"ssl.crl.location", RDK_PATH, RDK_SUPERUSER, 0, 0, NULL},
	{"ssl.keystore.location", RDK_PATH, RDK_SUPERUSER, 0, 0, NULL},
	{"ssl.keystore.password", RDK_STRING, RDK_CREDENTIAL, 0, 0, NULL},
	{"ssl.cipher.suites", RDK_STRING, 0, 0, 0, NULL},
	{"ssl.curves.list", RDK_STRING, 0, 0, 0, NULL},
	{"ssl.sigalgs.list", RDK_STRING, 0, 0, 0, NULL},
	{"enable.ssl.certificate.verification", RDK_BOOL, 0, 0, 0, NULL},
	{"ssl.endpoint.identification.algorithm", RDK_ENUM, 0, 0, 0, rdk_endpoint_algorithms},
	/* connections */
	{"client.rack", RDK_STRING, 0, 0, 0, NULL},
	{"broker.address.family", RDK_ENUM, 0, 0, 0, rdk_address_families},
	{"broker.address.ttl", RDK_INT, 0, 0, 86400000, NULL},
	{"socket.timeout.ms", RDK_INT, 0, 10, 300000, NULL},
	{"socket.connection.setup.timeout.ms", RDK_INT, 0, 1000, 2147483647, NULL},
	{"socket.keepalive.enable", RDK_BOOL, 0, 0, 0, NULL},
	{"socket.nagle.disable", RDK_BOOL, 0, 0, 0, NULL},
	{"socket.send.buffer.bytes", RDK_INT, 0, 0, 100000000, NULL},
	{"socket.receive.buffer.bytes", RDK_INT, 0, 0, 100000000, NULL},
	{"socket.max.fails", RDK_INT, 0, 0, 1000000, NULL},
	{"connections.max.idle.ms", RDK_INT, 0, 0, 2147483647, NULL},
	{"reconnect.backoff.ms", RDK_INT, 0, 0, 3600000, NULL},
	{"reconnect.backoff.max.ms", RDK_INT, 0, 0, 3600000, NULL},
	{"api.version.request", RDK_BOOL, 0, 0, 0, NULL},
	{"api.version.request.timeout.ms", RDK_INT, 0, 1, 300000, NULL},
	{"api.version.fallback.ms", RDK_INT, 0, 0, 604800000, NULL},
	{"broker.version.fallback", RDK_STRING, 0, 0, 0, NULL},
	/* metadata */
	{"metadata.max.age.ms", RDK_INT, 0, 1, 86400000, NULL},
	{"topic.metadata.refresh.interval.ms", RDK_INT, 0, -1, 3600000, NULL},
	{"topic.metadata.refresh.fast.interval.ms", RDK_INT, 0, 1, 60000, NULL},
	{"topic.metadata.refresh.sparse", RDK_BOOL, 0, 0, 0, NULL},
	{"topic.metadata.propagation.max.ms", RDK_INT, 0, 0, 3600000, NULL},
	/* fetching */
	{"fetch.wait.max.ms", RDK_INT, 0, 0, 300000, NULL},
	{"fetch.min.bytes", RDK_INT, 0, 1, 100000000, NULL},
	{"fetch.max.bytes", RDK_INT, 0, 0, 2147483135, NULL, RDK_USER_FETCH_BYTES},
	{"fetch.message.max.bytes", RDK_INT, 0, 1, 1000000000, NULL, RDK_USER_FETCH_BYTES},
	{"max.partition.fetch.bytes", RDK_INT, 0, 1, 1000000000, NULL, RDK_USER_FETCH_BYTES},
	{"fetch.error.backoff.ms", RDK_INT, 0, 0, 300000, NULL},
	{"receive.message.max.bytes", RDK_INT, 0, 1000, 2147483647, NULL, RDK_USER_RECEIVE_BYTES},
	{"queued.min.messages", RDK_INT, 0, 1, 10000000, NULL, RDK_USER_QUEUE_MESSAGES},
	{"queued.max.messages.kbytes", RDK_INT, 0, 1, 2097151, NULL, RDK_USER_QUEUE_KBYTES},
	{"check.crcs", RDK_BOOL, 0, 0, 0, NULL},
	{NULL, RDK_STRING, 0, 0, 0, NULL}
};

static bool
in_list(const char *const *list, const char *value)
{
	for (; *list; list++)
		if (strcmp(*list, value) == 0)
			return true;
	return false;
}

static char *
join_list(const char *const *list)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (; *list; list++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *list);
	return buf.data;
}

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
			strcmp(opt->name, name) == 0 && opt->choices != NULL)
			nlists++;

	initStringInfo(&buf);
	for (opt = sw_options; opt->name; opt++)
	{
		if (opt->context != context || (opt->kinds & kinds) == 0 ||
			strcmp(opt->name, name) != 0 || opt->choices == NULL)
			continue;
		if (buf.len > 0)
			appendStringInfoString(&buf, "; ");
		appendStringInfoString(&buf, join_list(opt->choices));
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
		return;					/* see check_rdkafka_property() */
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
		if (opt->choices && in_list(opt->choices, value))
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

static void
check_nonempty(const char *option, const char *value)
{
	if (value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not be empty", option),
				 errhint("Give a value, or drop the option.")));
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
 * Whether librdkafka property "name" is one that loads code into the
 * process or runs a program, and so is refused outright.
 */
static bool
rdkafka_refused_name(const char *name)
{
	const char *suffix = ".engine.location";
	size_t		len = strlen(name);

	return in_list(rdkafka_refused, name) ||
		strncmp(name, "plugin.", strlen("plugin.")) == 0 ||
		strncmp(name, "ssl.engine.", strlen("ssl.engine.")) == 0 ||
		(len >= strlen(suffix) && strcmp(name + len - strlen(suffix), suffix) == 0);
}

/*
 * The allowlist entry of a librdkafka property, or NULL.
 */
static const RdkProperty *
rdkafka_lookup(const char *name)
{
	const RdkProperty *prop;

	for (prop = rdkafka_properties; prop->name; prop++)
		if (strcmp(prop->name, name) == 0)
			return prop;
	return NULL;
}

/*
 * The allowed librdkafka properties that share the first component of an
 * unknown one ("fetch." for "fetch.wait.max.mss"), joined for a hint, or ""
 * if there are none.  Credentials are left out of the list for servers.
 */
static char *
rdkafka_similar_names(const char *name, Oid context)
{
	const char *dot = strchr(name, '.');
	StringInfoData buf;
	const RdkProperty *prop;

	initStringInfo(&buf);
	if (dot != NULL)
	{
		size_t		prefix = dot - name + 1;

		for (prop = rdkafka_properties; prop->name; prop++)
		{
			if (strncmp(prop->name, name, prefix) != 0 ||
				(context == ForeignServerRelationId &&
				 (prop->flags & RDK_CREDENTIAL)))
				continue;
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
							 prop->name);
		}
	}
	return buf.data;
}

/*
 * Parse a decimal integer strictly: an optional "-", then digits.  Returns
 * false for anything else, or for a value out of int64's range.
 */
static bool
parse_decimal(const char *value, int64 *result)
{
	const char *p = value;
	bool		negative = false;
	int64		n = 0;

	if (*p == '-')
	{
		negative = true;
		p++;
	}
	if (*p == '\0')
		return false;
	for (; *p; p++)
	{
		if (*p < '0' || *p > '9')
			return false;
		if (pg_mul_s64_overflow(n, 10, &n) ||
			pg_add_s64_overflow(n, *p - '0', &n))
			return false;
	}
	*result = negative ? -n : n;
	return true;
}

static bool
in_list_nocase(const char *const *list, const char *value)
{
	for (; *list; list++)
		if (pg_strcasecmp(*list, value) == 0)
			return true;
	return false;
}

/*
 * Report an invalid value of a librdkafka property.  The value is shown
 * only if it may be: never for credentials, nor anything in a user mapping.
 */
static void
rdkafka_bad_value(DefElem *def, const char *value, bool show_value,
				  const char *detail, const char *hint)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 show_value
			 ? errmsg("invalid value for option \"%s\": \"%s\"", def->defname, value)
			 : errmsg("invalid value for option \"%s\"", def->defname),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("%s", hint)));
}

/*
 * Check a librdkafka property ("rdkafka.<name>") of a server or a user
 * mapping against the allowlist above: its name, who may set it, where it
 * may appear, and its value.  Nothing here calls librdkafka, so checking an
 * option cannot load a library, run a program or open a file.
 */
static void
check_rdkafka_property(DefElem *def, Oid context)
{
	const char *name = def->defname + strlen(RDKAFKA_PREFIX);
	const char *value = defGetString(def);
	const RdkProperty *prop;
	bool		show_value;
	char	   *similar;

	if (in_list(rdkafka_managed, name))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("librdkafka property \"%s\" is set by source_writes", name),
				 strcmp(name, "isolation.level") == 0
				 ? errhint("Ingestion reads committed messages only (read_committed): those of aborted transactions never land.")
				 : errhint("Use the server option \"brokers\" for the broker list; source_writes manages offsets and groups itself.")));
	if (rdkafka_refused_name(name))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("librdkafka property \"%s\" is not allowed", name),
				 errdetail("It makes librdkafka load a library or run a program on the database server.")));

	prop = rdkafka_lookup(name);
	if (prop == NULL)
	{
		similar = rdkafka_similar_names(name, context);
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("invalid option \"%s\"", def->defname),
				 errdetail("source_writes does not accept librdkafka property \"%s\".", name),
				 similar[0]
				 ? errhint("Valid properties beginning with \"%.*s\" are: %s.",
						   (int) (strchr(name, '.') - name + 1), name, similar)
				 : errhint("The librdkafka properties that source_writes accepts are listed in its README.")));
	}

	if (context == ForeignServerRelationId && (prop->flags & RDK_CREDENTIAL))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
				 errmsg("librdkafka property \"%s\" holds a credential and is not allowed in server options", name),
				 errhint("Set it in a user mapping: CREATE USER MAPPING FOR ... SERVER ... OPTIONS (\"%s\" '...').",
						 def->defname)));

	/*
	 * As postgres_fdw does for sslcert and sslkey: only a superuser may set
	 * these, or change a server or user mapping on which one is set.  We
	 * see the object's options after the change, so dropping one is allowed.
	 */
	if (((prop->flags & RDK_SUPERUSER) || prop->type == RDK_PATH) &&
		!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("option \"%s\" may only be set by a superuser", def->defname),
				 prop->type == RDK_PATH
				 ? errdetail("It names a file that would be read with the database server's privileges.")
				 : errdetail("It chooses credentials of the database server's operating system user."),
				 context == UserMappingRelationId
				 ? errhint("User mappings with the \"%s\" option set may only be created or modified by a superuser.",
						   def->defname)
				 : errhint("Servers with the \"%s\" option set may only be created or modified by a superuser.",
						   def->defname)));

	check_nonempty(def->defname, value);

	show_value = context != UserMappingRelationId &&
		!(prop->flags & RDK_CREDENTIAL);

	switch (prop->type)
	{
		case RDK_BOOL:
			if (pg_strcasecmp(value, "true") != 0 &&
				pg_strcasecmp(value, "false") != 0)
				rdkafka_bad_value(def, value, show_value, NULL,
								  "Valid values are: true, false.");
			break;
		case RDK_INT:
			{
				int64		n;
				const char *digits = value[0] == '-' ? value + 1 : value;

				if (!parse_decimal(value, &n) || n < prop->min || n > prop->max)
					rdkafka_bad_value(def, value, show_value, NULL,
									  psprintf("Give an integer between " INT64_FORMAT " and " INT64_FORMAT ".",
											   prop->min, prop->max));
				if (digits[0] == '0' && digits[1] != '\0')
					rdkafka_bad_value(def, value, show_value,
									  "librdkafka would read a number with a leading zero as octal.",
									  "Write the number without leading zeros.");
				if (prop->user_max > 0 && n > prop->user_max && !superuser())
					ereport(ERROR,
							(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
							 errmsg("option \"%s\" may only be set above " INT64_FORMAT " by a superuser",
									def->defname, prop->user_max),
							 errdetail("It lets the worker hold more memory."),
							 context == UserMappingRelationId
							 ? errhint("User mappings with a larger \"%s\" may only be created or modified by a superuser.",
									   def->defname)
							 : errhint("Servers with a larger \"%s\" may only be created or modified by a superuser.",
									   def->defname)));
			}
			break;
		case RDK_ENUM:
		case RDK_ENUM_EXACT:
			if (prop->type == RDK_ENUM
				? !in_list_nocase(prop->choices, value)
				: !in_list(prop->choices, value))
				rdkafka_bad_value(def, value, show_value, NULL,
								  psprintf("Valid values are: %s.",
										   join_list(prop->choices)));
			if (prop->superuser_choices && in_list(prop->superuser_choices, value) &&
				!superuser())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("option \"%s\" may only be set to %s by a superuser",
								def->defname, join_list(prop->superuser_choices)),
						 errdetail("The worker would authenticate with the database server's own Kerberos credentials."),
						 context == UserMappingRelationId
						 ? errhint("User mappings with such a \"%s\" may only be created or modified by a superuser.",
								   def->defname)
						 : errhint("Servers with such a \"%s\" may only be created or modified by a superuser.",
								   def->defname)));
			break;
		case RDK_STRING:
			break;
		case RDK_PATH:
			if (value[0] != '/' &&
				!(prop->choices && in_list(prop->choices, value)))
				rdkafka_bad_value(def, value, show_value, NULL,
								  prop->choices
								  ? psprintf("Give an absolute path on the database server, or \"%s\".",
											 prop->choices[0])
								  : "Give an absolute path on the database server.");
			break;
	}
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
			check_rdkafka_property(def, ForeignServerRelationId);
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
		const char *name;
		const RdkProperty *prop;

		if (strncmp(def->defname, RDKAFKA_PREFIX, strlen(RDKAFKA_PREFIX)) != 0)
			continue;
		name = def->defname + strlen(RDKAFKA_PREFIX);
		prop = rdkafka_lookup(name);
		if ((prop && (prop->flags & RDK_CREDENTIAL)) ||
			strstr(name, "password") || strstr(name, "secret"))
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
			check_rdkafka_property(def, catalog);
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

	if (col->field && st->format != SW_FORMAT_JSON &&
		st->format != SW_FORMAT_JSON_ARRAY)
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

static SwFormat
parse_format(const char *value)
{
	if (strcmp(value, "json") == 0)
		return SW_FORMAT_JSON;
	if (strcmp(value, "json_array") == 0)
		return SW_FORMAT_JSON_ARRAY;
	if (strcmp(value, "text") == 0)
		return SW_FORMAT_TEXT;
	if (strcmp(value, "bytes") == 0)
		return SW_FORMAT_BYTES;
	return SW_FORMAT_CSV;
}

/*
 * Check that the data columns (those filled from the value or body) fit
 * the format: 'text' and 'bytes' fill exactly one column of their type.
 */
static void
check_data_columns(SwSourceTable *st, Relation rel)
{
	StringInfoData names;
	int			ndata = 0;
	SwColumn   *data = NULL;
	const char *format;
	const char *type;
	bool		ok;

	if (st->format != SW_FORMAT_TEXT && st->format != SW_FORMAT_BYTES)
		return;

	initStringInfo(&names);
	for (int i = 0; i < st->ncolumns; i++)
	{
		if (st->columns[i].source != SW_COLUMN_DATA)
			continue;
		data = &st->columns[i];
		ndata++;
		appendStringInfo(&names, "%s%s", names.len > 0 ? ", " : "",
						 quote_identifier(data->name));
	}

	if (st->format == SW_FORMAT_TEXT)
	{
		format = "text";
		type = "text";
		ok = ndata == 1 &&
			TypeCategory(getBaseType(data->typid)) == TYPCATEGORY_STRING;
	}
	else
	{
		format = "bytes";
		type = "bytea";
		ok = ndata == 1 && getBaseType(data->typid) == BYTEAOID;
	}

	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_COLUMN_NUMBER),
				 errmsg("format \"%s\" needs exactly one %s column besides metadata columns",
						format, type),
				 ndata == 0
				 ? errdetail("Source table \"%s\" has no data column.",
							 RelationGetRelationName(rel))
				 : errdetail_plural("Source table \"%s\" has %d data column: %s.",
									"Source table \"%s\" has %d data columns: %s.",
									ndata, RelationGetRelationName(rel), ndata,
									names.data),
				 errhint("Mark the other columns as metadata with OPTIONS (source '...') or OPTIONS (header '...').")));
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
	st->format = SW_FORMAT_JSON;
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
			st->format = parse_format(value);
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
	if (check_function_bodies)
		check_data_columns(st, rel);
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
