/*-------------------------------------------------------------------------
 *
 * option_table.c
 *		  The options of source_writes servers, user mappings, source tables
 *		  and columns: where each may appear, the checks of their values,
 *		  and the formats option format names
 *
 * See doc/internals.md, "Storage layout" (Options).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/options/option_table.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <ctype.h>

#include "catalog/pg_attribute.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datetime.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "options/options_int.h"
#include "webhook/signature.h"

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
static void check_boolean(const char *option, const char *value);
static void check_byte_size(const char *option, const char *value);
static void check_workers(const char *option, const char *value);
static void check_secret(const char *option, const char *value);
static void check_registry_url(const char *option, const char *value);
static void check_superuser_file(const char *option, const char *value);

const char *const sw_server_types[] = {"kafka", "webhook", NULL};
const char *const sw_envelopes[] = {"none", "upsert", "debezium", NULL};
/* in the order of SwKeyFormat */
const char *const sw_key_formats[] = {"json", "text", "bytes", "avro", NULL};
static const char *const encodings[] = {"hex", "base64", NULL};
static const char *const kafka_sources[] = {"partition", "offset", "timestamp", "key", "headers", "topic",
"op", "before", "source", "ts_ms", NULL};
static const char *const webhook_sources[] = {"body", "headers", "received_at", NULL};

static const SwOption sw_options[] = {
	/* servers */
	{"type", ForeignServerRelationId, SW_ANY_KIND, sw_server_types, NULL},
	{"brokers", ForeignServerRelationId, SW_KIND_KAFKA, NULL, check_nonempty},
	{"schema_registry", ForeignServerRelationId, SW_KIND_KAFKA, NULL, check_registry_url},
	{"schema_registry_ca", ForeignServerRelationId, SW_KIND_KAFKA, NULL, check_superuser_file},
	/* user mappings */
	{"secret", UserMappingRelationId, SW_KIND_WEBHOOK, NULL, check_secret},
	{"previous_secret", UserMappingRelationId, SW_KIND_WEBHOOK, NULL, check_secret},
	{"verify_token", UserMappingRelationId, SW_KIND_WEBHOOK, NULL, check_nonempty},
	{"schema_registry_user", UserMappingRelationId, SW_KIND_KAFKA, NULL, check_nonempty},
	{"schema_registry_password", UserMappingRelationId, SW_KIND_KAFKA, NULL, check_nonempty},
	{"schema_registry_token", UserMappingRelationId, SW_KIND_KAFKA, NULL, check_nonempty},
	/* source tables */
	{"topic", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_topic},
	{"format", ForeignTableRelationId, SW_KIND_KAFKA, NULL, NULL, sw_format_names},
	{"format", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, NULL, sw_format_names},
	{"envelope", ForeignTableRelationId, SW_KIND_KAFKA, sw_envelopes, NULL},
	{"key_format", ForeignTableRelationId, SW_KIND_KAFKA, sw_key_formats, NULL},
	{"key", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_key_list},
	{"start_offset", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_start_offset},
	{"workers", ForeignTableRelationId, SW_KIND_KAFKA, NULL, check_workers},
	{"retain_history", ForeignTableRelationId, SW_ANY_KIND, NULL, check_interval},
	{"version_of", ForeignTableRelationId, SW_ANY_KIND, NULL, check_nonempty},
	{"carry_edits", ForeignTableRelationId, SW_ANY_KIND, NULL, check_boolean},
	{"retain_raw", ForeignTableRelationId, SW_ANY_KIND, NULL, check_boolean},
	{"max_body_bytes", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_byte_size},
	{"signature_scheme", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, NULL, sw_signature_scheme_names},
	{"signature_tolerance", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_interval},
	{"signature_header", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, sw_check_http_token},
	{"signature_encoding", ForeignTableRelationId, SW_KIND_WEBHOOK, encodings, NULL},
	{"signature_prefix", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_nonempty},
	{"idempotency_header", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, sw_check_http_token},
	{"idempotency_field", ForeignTableRelationId, SW_KIND_WEBHOOK, NULL, check_nonempty},
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
void
sw_check_option(DefElem *def, Oid context, int kinds)
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
 * A boolean, as PostgreSQL reads one (true, off, yes, 0, ...).
 */
static void
check_boolean(const char *option, const char *value)
{
	bool		result;

	if (!parse_bool(value, &result))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Valid values are true and false.")));
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
List *
sw_parse_key_list(const char *option, const char *value)
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
	(void) sw_parse_key_list(option, value);
}

/*
 * Parse an interval written as PostgreSQL reads intervals ('7 days',
 * '36 hours', 'P1D', '0') into milliseconds, without throwing; months count
 * as 30 days.  Returns false for anything that is not a valid interval.
 */
bool
sw_parse_interval_ms(const char *value, int64 *ms)
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

	if (!sw_parse_interval_ms(value, &ms))
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

int
sw_parse_byte_size(const char *option, const char *value)
{
	int			bytes;
	const char *hintmsg = NULL;

	/* at most 1GB, the most a value of PostgreSQL's holds; no body is held whole beyond 64MB */
	if (!parse_int(value, &bytes, GUC_UNIT_BYTE, &hintmsg) ||
		bytes < 1 || bytes > 1024 * 1024 * 1024)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give a size between 1 byte and 1GB, e.g. '65536' or '10MB'.")));
	return bytes;
}

static void
check_byte_size(const char *option, const char *value)
{
	(void) sw_parse_byte_size(option, value);
}

/* how many workers ingest a Kafka source, its partitions shared out */
int
sw_parse_workers(const char *option, const char *value)
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
	(void) sw_parse_workers(option, value);
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

void
sw_check_http_token(const char *option, const char *value)
{
	if (!is_http_token(value))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("HTTP header names consist of letters, digits and !#$%%&'*+-.^_`|~.")));
}

/* ---------------------------------------------------------------------
 * Formats
 * ---------------------------------------------------------------------
 */

/* the formats of messages, as the decoder lists them (sw_set_formats) */
static const SwFormatOps *const *formats = NULL;
static int	nformats = 0;

/*
 * Take the decoder's table of formats, in the order their names are listed
 * in hints: the values option format takes.  Called from _PG_init, so that
 * options are read above the decoder, which implements the formats.
 */
void
sw_set_formats(const SwFormatOps *const *list, int n)
{
	formats = list;
	nformats = n;
}

/*
 * The format that option format's value names, NULL if none.
 */
const SwFormatOps *
sw_format_lookup(const char *name)
{
	for (int i = 0; i < nformats; i++)
		if (strcmp(formats[i]->name, name) == 0)
			return formats[i];
	return NULL;
}

/*
 * The names of the formats that sources of the given kinds take,
 * NULL-terminated, in the current memory context.
 */
const char *const *
sw_format_names(int kinds)
{
	const char **names = palloc(sizeof(char *) * (nformats + 1));
	int			n = 0;

	for (int i = 0; i < nformats; i++)
		if (formats[i]->kinds & kinds)
			names[n++] = formats[i]->name;
	names[n] = NULL;
	return names;
}

/*
 * A secret of a user mapping: not empty, and one that begins "whsec_"
 * (a Standard Webhooks secret) is base64 after it, as scheme standard
 * decodes it.  The value is never quoted: it is a secret.
 */
static void
check_secret(const char *option, const char *value)
{
	char		key[256];

	check_nonempty(option, value);
	if (strncmp(value, "whsec_", 6) == 0 &&
		sw_standard_key(value, key, sizeof(key)) <= 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" begins with \"whsec_\" but is not base64 after it", option),
				 errhint("Copy the secret exactly as the sender shows it: \"whsec_\" and the base64 of the key.")));
}

/*
 * A schema registry's address: an http or https URL, nothing else that
 * libcurl could reach (file://, ...).
 */
static void
check_registry_url(const char *option, const char *value)
{
	const char *host;

	if (pg_strncasecmp(value, "http://", 7) != 0 &&
		pg_strncasecmp(value, "https://", 8) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": \"%s\"", option, value),
				 errhint("Give the registry's http:// or https:// URL, e.g. 'http://registry:8081'.")));

	/*
	 * Credentials before the host (http://user:password@host) would be
	 * read by every role: a server's options are not secret.  (The value
	 * is not repeated in the error, which the server logs.)
	 */
	host = strstr(value, "://") + 3;
	if (memchr(host, '@', strcspn(host, "/?#")) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("invalid value for option \"%s\": a URL with credentials", option),
				 errdetail("Every role can read a server's options."),
				 errhint("Give the credentials in the user mapping, with options \"schema_registry_user\" and \"schema_registry_password\".")));
}

/*
 * A file the workers read (a CA bundle): only a superuser may name one,
 * as postgres_fdw lets only a superuser name sslcert; an absolute path.
 */
static void
check_superuser_file(const char *option, const char *value)
{
	if (!superuser())
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("option \"%s\" may only be set by a superuser", option),
				 errdetail("It names a file that would be read with the database server's privileges."),
				 errhint("Servers with the \"%s\" option set may only be created or modified by a superuser.",
						 option)));
	if (!is_absolute_path(value))
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must be an absolute path", option)));
}
