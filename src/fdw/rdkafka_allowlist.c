/*-------------------------------------------------------------------------
 *
 * rdkafka_allowlist.c
 *		  The librdkafka properties that Kafka servers and user mappings may
 *		  set, and the checks of their values
 *
 * See doc/internals.md, "Storage layout" (Options).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/rdkafka_allowlist.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "common/int.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"

#include "fdw/rdkafka_allowlist.h"

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
void
sw_rdkafka_check_property(DefElem *def, Oid context)
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
				 : errhint("The librdkafka properties that source_writes accepts are listed in its doc/reference.md.")));
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
 * Whether librdkafka property "name" may hold a secret: a credential of
 * the allowlist, or a property whose name says it is one, even if it is
 * not allowed.
 */
bool
sw_rdkafka_may_be_secret(const char *name)
{
	const RdkProperty *prop = rdkafka_lookup(name);

	return (prop && (prop->flags & RDK_CREDENTIAL)) ||
		strstr(name, "password") || strstr(name, "secret");
}
