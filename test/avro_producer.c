/*-------------------------------------------------------------------------
 *
 * avro_producer.c
 *		  Produce Avro messages in the Confluent wire format, for the tests
 *
 * The Avro sources read messages framed as a schema registry's serializers
 * frame them (see doc/internals.md): a magic byte 0, the writer schema's id
 * in the registry (4 bytes, big-endian), then the record in Avro's binary
 * encoding.  This program makes such messages with Apache Avro C and
 * produces them with librdkafka:
 *
 *		avro_producer --brokers B --topic T --registry URL --schema FILE
 *			[--user U --password P | --token T] [--cacert FILE]
 *			[--subject S] [--key-schema FILE [--key-subject S]]
 *			[--schema-id N] [--key-schema-id N] [--raw-key] [--raw-hex]
 *			[--partition N]
 *
 * It registers the schema under subject T-value (and the key schema under
 * T-key), unless --schema-id (--key-schema-id) gives the id to frame with,
 * and prints "value_schema_id=N" (and "key_schema_id=N").  Then it reads
 * stdin, one message a line: the value in Avro's JSON encoding (a union as
 * {"type name": value}, or null; bytes and fixed as strings of code points
 * 0-255), or, with a key (--key-schema, --key-schema-id or --raw-key),
 * KEY<TAB>VALUE, the key in Avro's JSON encoding, or as is with --raw-key.
 * An empty value is a tombstone, an empty key none.  With --raw-hex, a
 * value is the whole message value in hex, produced as is (bad framing,
 * truncated bodies).  At the end it prints "produced=N".
 *
 * As a convenience beyond Avro's JSON encoding, a union's value may be
 * given bare when its JSON type picks a branch (a string for ["null",
 * "string"]), a missing record field whose type takes null is null, and
 * floats and doubles take "NaN", "Infinity" and "-Infinity".
 *
 * IDENTIFICATION
 *		  test/avro_producer.c
 *
 *-------------------------------------------------------------------------
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <avro.h>
#include <curl/curl.h>
#include <jansson.h>
#include <librdkafka/rdkafka.h>

/* what the command line says */
static const char *brokers;
static const char *topic;
static const char *registry;
static const char *user;
static const char *password;
static const char *token;
static const char *cacert;
static const char *subject;
static const char *key_subject;
static const char *schema_file;
static const char *key_schema_file;
static long schema_id = -1;
static long key_schema_id = -1;
static bool raw_key;
static bool raw_hex;
static int	partition = RD_KAFKA_PARTITION_UA;

static int	delivery_failures;
static long line_number;

/*
 * Print an error (with the input line, if reading stdin) and exit 1.
 */
static void
die(const char *fmt,...)
{
	va_list		ap;

	fprintf(stderr, "avro_producer: ");
	if (line_number > 0)
		fprintf(stderr, "line %ld: ", line_number);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

/*
 * A schema id from the command line: 0 to 2^32 - 1, as the framing holds
 * (ids the registry never gave are for the tests of bad messages).
 */
static long
parse_id(const char *text)
{
	char	   *end;
	long long	id;

	errno = 0;
	id = strtoll(text, &end, 10);
	if (*text == '\0' || *end != '\0' || errno || id < 0 || id > UINT32_MAX)
		die("not a schema id: \"%s\"", text);
	return (long) id;
}

static void
usage(void)
{
	fprintf(stderr,
			"Usage: avro_producer --brokers B --topic T [--registry URL]\n"
			"         --schema FILE [--subject S] [--schema-id N]\n"
			"         [--key-schema FILE] [--key-subject S] [--key-schema-id N]\n"
			"         [--raw-key] [--raw-hex] [--partition N]\n"
			"         [--user U --password P | --token T] [--cacert FILE]\n"
			"Reads one message a line from stdin: VALUE, or KEY<TAB>VALUE with a key.\n");
	exit(2);
}

/* The whole of a file, or die. */
static char *
read_file(const char *path)
{
	FILE	   *f = fopen(path, "rb");
	char	   *text;
	long		size;

	if (f == NULL || fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0)
		die("cannot read %s: %s", path, strerror(errno));
	rewind(f);
	text = malloc(size + 1);
	if (text == NULL || fread(text, 1, size, f) != (size_t) size)
		die("cannot read %s", path);
	text[size] = '\0';
	fclose(f);
	return text;
}

/* an answer of the registry, gathered by curl */
typedef struct Answer
{
	char	   *data;
	size_t		len;
} Answer;

static size_t
gather(char *ptr, size_t size, size_t nmemb, void *arg)
{
	Answer	   *a = arg;
	size_t		n = size * nmemb;

	a->data = realloc(a->data, a->len + n + 1);
	if (a->data == NULL)
		die("out of memory");
	memcpy(a->data + a->len, ptr, n);
	a->len += n;
	a->data[a->len] = '\0';
	return n;
}

/*
 * Register a schema (its JSON text) under a subject of the registry, with
 * libcurl; returns its id, or dies saying what the registry answered.
 */
static long
register_schema(const char *subj, const char *schema_text)
{
	CURL	   *curl = curl_easy_init();
	struct curl_slist *headers = NULL;
	char	   *escaped;
	char	   *url;
	char	   *body;
	char		errbuf[CURL_ERROR_SIZE] = "";
	Answer		answer = {NULL, 0};
	CURLcode	rc;
	long		status = 0;
	json_t	   *result;
	json_t	   *id;
	long		value;

	if (curl == NULL)
		die("cannot start libcurl");
	escaped = curl_easy_escape(curl, subj, 0);
	url = malloc(strlen(registry) + strlen(escaped) + 32);
	/* the registry's URL, without a slash at its end */
	sprintf(url, "%.*s/subjects/%s/versions",
			(int) (strlen(registry) - (registry[strlen(registry) - 1] == '/')),
			registry, escaped);
	body = json_dumps(json_pack("{s:s,s:s}", "schema", schema_text,
								"schemaType", "AVRO"), JSON_COMPACT);

	headers = curl_slist_append(headers,
								"Content-Type: application/vnd.schemaregistry.v1+json");
	headers = curl_slist_append(headers,
								"Accept: application/vnd.schemaregistry.v1+json, application/json");
	if (token)
	{
		char	   *h = malloc(strlen(token) + 32);

		sprintf(h, "Authorization: Bearer %s", token);
		headers = curl_slist_append(headers, h);
		free(h);
	}
	curl_easy_setopt(curl, CURLOPT_URL, url);
	curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
	curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, gather);
	curl_easy_setopt(curl, CURLOPT_WRITEDATA, &answer);
	curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
	curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(curl, CURLOPT_TIMEOUT, 60L);
	if (user)
	{
		curl_easy_setopt(curl, CURLOPT_HTTPAUTH, (long) CURLAUTH_BASIC);
		curl_easy_setopt(curl, CURLOPT_USERNAME, user);
		curl_easy_setopt(curl, CURLOPT_PASSWORD, password);
	}
	if (cacert)
		curl_easy_setopt(curl, CURLOPT_CAINFO, cacert);

	rc = curl_easy_perform(curl);
	if (rc != CURLE_OK)
		die("cannot register a schema under subject \"%s\" at %s: %s",
			subj, url, errbuf[0] ? errbuf : curl_easy_strerror(rc));
	curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
	result = json_loadb(answer.data ? answer.data : "", answer.len, 0, NULL);
	id = json_object_get(result, "id");
	if (status != 200 || !json_is_integer(id))
		die("the registry answered %ld to the schema of subject \"%s\": %s",
			status, subj, answer.data ? answer.data : "");
	value = (long) json_integer_value(id);

	json_decref(result);
	free(answer.data);
	free(body);
	free(url);
	curl_free(escaped);
	curl_slist_free_all(headers);
	curl_easy_cleanup(curl);
	return value;
}

/* A schema with its links followed. */
static avro_schema_t
resolve(avro_schema_t schema)
{
	while (is_avro_link(schema))
		schema = avro_schema_link_target(schema);
	return schema;
}

/*
 * The name that Avro's JSON encoding of a union gives to a branch: the
 * full name of a named type, else the type's name.
 */
static const char *
branch_name(avro_schema_t branch, char *buf, size_t size)
{
	branch = resolve(branch);
	switch (avro_typeof(branch))
	{
		case AVRO_STRING:
			return "string";
		case AVRO_BYTES:
			return "bytes";
		case AVRO_INT32:
			return "int";
		case AVRO_INT64:
			return "long";
		case AVRO_FLOAT:
			return "float";
		case AVRO_DOUBLE:
			return "double";
		case AVRO_BOOLEAN:
			return "boolean";
		case AVRO_NULL:
			return "null";
		case AVRO_ARRAY:
			return "array";
		case AVRO_MAP:
			return "map";
		default:
			{
				const char *space = avro_schema_namespace(branch);

				if (space && *space)
					snprintf(buf, size, "%s.%s", space,
							 avro_schema_name(branch));
				else
					snprintf(buf, size, "%s", avro_schema_name(branch));
				return buf;
			}
	}
}

/*
 * Whether a bare JSON value fits a branch's type (for unions given
 * without their wrapper).
 */
static bool
fits(avro_schema_t branch, json_t *j)
{
	switch (avro_typeof(resolve(branch)))
	{
		case AVRO_STRING:
		case AVRO_BYTES:
		case AVRO_ENUM:
		case AVRO_FIXED:
			return json_is_string(j);
		case AVRO_INT32:
		case AVRO_INT64:
			return json_is_integer(j);
		case AVRO_FLOAT:
		case AVRO_DOUBLE:
			return json_is_number(j);
		case AVRO_BOOLEAN:
			return json_is_boolean(j);
		case AVRO_NULL:
			return json_is_null(j);
		case AVRO_ARRAY:
			return json_is_array(j);
		case AVRO_MAP:
		case AVRO_RECORD:
			return json_is_object(j);
		default:
			return false;
	}
}

/*
 * The bytes of a JSON string of code points 0-255 (Avro's JSON encoding of
 * bytes and fixed), in a new buffer; *len is their number.
 */
static unsigned char *
code_points(json_t *j, const char *path, size_t *len)
{
	const unsigned char *s = (const unsigned char *) json_string_value(j);
	size_t		n = json_string_length(j);
	unsigned char *out = malloc(n + 1);
	size_t		o = 0;

	for (size_t i = 0; i < n; i++)
	{
		if (s[i] < 0x80)
			out[o++] = s[i];
		else if ((s[i] & 0xE0) == 0xC0 && i + 1 < n && s[i] <= 0xC3)
		{
			out[o++] = (unsigned char) (((s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F));
			i++;
		}
		else
			die("%s: bytes must be a string of code points 0 to 255", path);
	}
	*len = o;
	return out;
}

/* Die on an Avro C error. */
static void
check(int rc, const char *path)
{
	if (rc != 0)
		die("%s: %s", path, avro_strerror());
}

static void encode(avro_value_t *v, json_t *j, const char *path);

/*
 * Fill a union's value: null, {"branch": value}, or a bare value that fits
 * a branch.
 */
static void
encode_union(avro_value_t *v, avro_schema_t schema, json_t *j,
			 const char *path)
{
	size_t		n = avro_schema_union_size(schema);
	avro_value_t branch;
	char		buf[512];

	if (json_is_object(j) && json_object_size(j) == 1)
	{
		const char *key = json_object_iter_key(json_object_iter(j));

		for (size_t i = 0; i < n; i++)
		{
			avro_schema_t b = avro_schema_union_branch(schema, i);
			const char *name = branch_name(b, buf, sizeof(buf));
			const char *bare = strrchr(name, '.');

			if (strcmp(key, name) == 0 || (bare && strcmp(key, bare + 1) == 0))
			{
				check(avro_value_set_branch(v, (int) i, &branch), path);
				encode(&branch, json_object_get(j, key), path);
				return;
			}
		}
	}
	for (size_t i = 0; i < n; i++)
	{
		if (fits(avro_schema_union_branch(schema, i), j))
		{
			check(avro_value_set_branch(v, (int) i, &branch), path);
			encode(&branch, j, path);
			return;
		}
	}
	die("%s: the value fits no branch of the union", path);
}

/*
 * Fill an Avro value from its JSON encoding, walking the value's schema
 * and the JSON value together; path names where we are, for errors.
 */
static void
encode(avro_value_t *v, json_t *j, const char *path)
{
	avro_schema_t schema = resolve(avro_value_get_schema(v));
	char		sub[4096];

	switch (avro_typeof(schema))
	{
		case AVRO_NULL:
			if (!json_is_null(j))
				die("%s: expected null", path);
			check(avro_value_set_null(v), path);
			break;
		case AVRO_BOOLEAN:
			if (!json_is_boolean(j))
				die("%s: expected a boolean", path);
			check(avro_value_set_boolean(v, json_is_true(j)), path);
			break;
		case AVRO_INT32:
			if (!json_is_integer(j) || json_integer_value(j) < INT32_MIN ||
				json_integer_value(j) > INT32_MAX)
				die("%s: expected an int", path);
			check(avro_value_set_int(v, (int32_t) json_integer_value(j)), path);
			break;
		case AVRO_INT64:
			if (!json_is_integer(j))
				die("%s: expected a long", path);
			check(avro_value_set_long(v, (int64_t) json_integer_value(j)), path);
			break;
		case AVRO_FLOAT:
		case AVRO_DOUBLE:
			{
				double		d;

				if (json_is_number(j))
					d = json_number_value(j);
				else if (json_is_string(j) &&
						 strcmp(json_string_value(j), "NaN") == 0)
					d = NAN;
				else if (json_is_string(j) &&
						 strcmp(json_string_value(j), "Infinity") == 0)
					d = INFINITY;
				else if (json_is_string(j) &&
						 strcmp(json_string_value(j), "-Infinity") == 0)
					d = -INFINITY;
				else
					die("%s: expected a number", path);
				if (avro_typeof(schema) == AVRO_FLOAT)
					check(avro_value_set_float(v, (float) d), path);
				else
					check(avro_value_set_double(v, d), path);
				break;
			}
		case AVRO_STRING:
			if (!json_is_string(j))
				die("%s: expected a string", path);
			/* Avro C counts the terminating zero in a string's size */
			check(avro_value_set_string_len(v, json_string_value(j),
											json_string_length(j) + 1), path);
			break;
		case AVRO_BYTES:
		case AVRO_FIXED:
			{
				unsigned char *bytes;
				size_t		len;

				if (!json_is_string(j))
					die("%s: expected a string of bytes", path);
				bytes = code_points(j, path, &len);
				if (avro_typeof(schema) == AVRO_BYTES)
					check(avro_value_set_bytes(v, bytes, len), path);
				else
					check(avro_value_set_fixed(v, bytes, len), path);
				free(bytes);
				break;
			}
		case AVRO_ENUM:
			{
				int			symbol;

				if (!json_is_string(j))
					die("%s: expected an enum symbol", path);
				symbol = avro_schema_enum_get_by_name(schema,
													  json_string_value(j));
				if (symbol < 0)
					die("%s: \"%s\" is not a symbol of the enum", path,
						json_string_value(j));
				check(avro_value_set_enum(v, symbol), path);
				break;
			}
		case AVRO_ARRAY:
			{
				size_t		i;
				json_t	   *item;

				if (!json_is_array(j))
					die("%s: expected an array", path);
				json_array_foreach(j, i, item)
				{
					avro_value_t child;

					snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
					check(avro_value_append(v, &child, NULL), sub);
					encode(&child, item, sub);
				}
				break;
			}
		case AVRO_MAP:
			{
				const char *key;
				json_t	   *item;

				if (!json_is_object(j))
					die("%s: expected an object (a map)", path);
				json_object_foreach(j, key, item)
				{
					avro_value_t child;

					snprintf(sub, sizeof(sub), "%s[\"%s\"]", path, key);
					check(avro_value_add(v, key, &child, NULL, NULL), sub);
					encode(&child, item, sub);
				}
				break;
			}
		case AVRO_UNION:
			encode_union(v, schema, j, path);
			break;
		case AVRO_RECORD:
			{
				size_t		n;
				const char *key;
				json_t	   *item;

				if (!json_is_object(j))
					die("%s: expected an object (a record)", path);
				json_object_foreach(j, key, item)
				{
					if (avro_schema_record_field_get_index(schema, key) < 0)
						die("%s: the record has no field \"%s\"", path, key);
				}
				check(avro_value_get_size(v, &n), path);
				for (size_t i = 0; i < n; i++)
				{
					avro_value_t child;
					const char *name;
					json_t	   *field;

					check(avro_value_get_by_index(v, i, &child, &name), path);
					snprintf(sub, sizeof(sub), "%s.%s", path, name);
					field = json_object_get(j, name);
					if (field == NULL)
					{
						avro_schema_t t = resolve(avro_value_get_schema(&child));
						bool		nullable = is_avro_null(t);

						for (size_t b = 0; is_avro_union(t) && !nullable &&
							 b < avro_schema_union_size(t); b++)
							nullable = is_avro_null(resolve(avro_schema_union_branch(t, b)));
						if (!nullable)
							die("%s: missing field", sub);
						field = json_null();
					}
					encode(&child, field, sub);
				}
				break;
			}
		default:
			die("%s: a type this program cannot write", path);
	}
}

/* a schema, its generic value class, and its id in the registry */
typedef struct Writer
{
	avro_schema_t schema;
	avro_value_iface_t *iface;
	long		id;
} Writer;

/*
 * Parse a schema file and get its id: the one given, or the registry's.
 */
static void
writer_init(Writer *w, const char *file, const char *subj, long id)
{
	char	   *text = read_file(file);

	if (avro_schema_from_json_length(text, strlen(text), &w->schema) != 0)
		die("%s: not an Avro schema: %s", file, avro_strerror());
	w->iface = avro_generic_class_from_schema(w->schema);
	if (w->iface == NULL)
		die("%s: %s", file, avro_strerror());
	if (id >= 0)
		w->id = id;
	else if (registry == NULL)
		die("--registry is needed to register %s", file);
	else
		w->id = register_schema(subj, text);
	free(text);
}

/*
 * The message that carries a JSON-encoded record: the Confluent framing
 * (magic 0, the id big-endian) then the Avro binary encoding.
 */
static unsigned char *
frame(Writer *w, const char *json_text, size_t *len, const char *what)
{
	json_error_t error;
	json_t	   *j = json_loads(json_text, JSON_DECODE_ANY | JSON_ALLOW_NUL, &error);
	avro_value_t value;
	avro_writer_t writer;
	size_t		size;
	unsigned char *buf;

	if (j == NULL)
		die("the %s is not JSON: %s", what, error.text);
	if (avro_generic_value_new(w->iface, &value) != 0)
		die("%s", avro_strerror());
	encode(&value, j, what);
	check(avro_value_sizeof(&value, &size), what);
	buf = malloc(size + 5);
	buf[0] = 0;
	buf[1] = (unsigned char) (w->id >> 24);
	buf[2] = (unsigned char) (w->id >> 16);
	buf[3] = (unsigned char) (w->id >> 8);
	buf[4] = (unsigned char) w->id;
	writer = avro_writer_memory((char *) buf + 5, (int64_t) size);
	check(avro_value_write(writer, &value), what);
	avro_writer_free(writer);
	avro_value_decref(&value);
	json_decref(j);
	*len = size + 5;
	return buf;
}

/* The bytes of a hex string (whitespace ignored), or die. */
static unsigned char *
unhex(const char *text, size_t *len)
{
	unsigned char *out = malloc(strlen(text) / 2 + 1);
	size_t		n = 0;
	int			half = -1;

	for (const char *p = text; *p; p++)
	{
		int			digit;

		if (*p == ' ' || *p == '\t' || *p == '\r')
			continue;
		if (*p >= '0' && *p <= '9')
			digit = *p - '0';
		else if (*p >= 'a' && *p <= 'f')
			digit = *p - 'a' + 10;
		else if (*p >= 'A' && *p <= 'F')
			digit = *p - 'A' + 10;
		else
			die("not a hex digit: '%c'", *p);
		if (half < 0)
			half = digit;
		else
		{
			out[n++] = (unsigned char) (half << 4 | digit);
			half = -1;
		}
	}
	if (half >= 0)
		die("an odd number of hex digits");
	*len = n;
	return out;
}

/* librdkafka's delivery reports: count the failures. */
static void
delivered(rd_kafka_t *rk, const rd_kafka_message_t *msg, void *opaque)
{
	(void) rk;
	(void) opaque;
	if (msg->err)
	{
		fprintf(stderr, "avro_producer: a message was not delivered: %s\n",
				rd_kafka_err2str(msg->err));
		delivery_failures++;
	}
}

/*
 * Produce one message, waiting while librdkafka's queue is full.
 */
static void
produce(rd_kafka_t *rk, void *key, size_t keylen, void *value, size_t len)
{
	for (;;)
	{
		rd_kafka_resp_err_t err;

		err = rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic),
								RD_KAFKA_V_PARTITION(partition),
								RD_KAFKA_V_KEY(key, keylen),
								RD_KAFKA_V_VALUE(value, len),
								RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
								RD_KAFKA_V_END);
		if (err == RD_KAFKA_RESP_ERR__QUEUE_FULL)
		{
			rd_kafka_poll(rk, 100);
			continue;
		}
		if (err)
			die("cannot produce: %s", rd_kafka_err2str(err));
		rd_kafka_poll(rk, 0);
		return;
	}
}

int
main(int argc, char **argv)
{
	static const struct option options[] = {
		{"brokers", required_argument, NULL, 'b'},
		{"topic", required_argument, NULL, 't'},
		{"registry", required_argument, NULL, 'r'},
		{"user", required_argument, NULL, 'u'},
		{"password", required_argument, NULL, 'w'},
		{"token", required_argument, NULL, 'T'},
		{"cacert", required_argument, NULL, 'C'},
		{"subject", required_argument, NULL, 's'},
		{"key-subject", required_argument, NULL, 'S'},
		{"schema", required_argument, NULL, 'f'},
		{"key-schema", required_argument, NULL, 'k'},
		{"schema-id", required_argument, NULL, 'i'},
		{"key-schema-id", required_argument, NULL, 'I'},
		{"raw-key", no_argument, NULL, 'K'},
		{"raw-hex", no_argument, NULL, 'x'},
		{"partition", required_argument, NULL, 'p'},
		{NULL, 0, NULL, 0}
	};
	int			c;
	Writer		value_writer = {0};
	Writer		key_writer = {0};
	bool		has_key;
	char		errstr[512];
	rd_kafka_conf_t *conf;
	rd_kafka_t *rk;
	char	   *line = NULL;
	size_t		cap = 0;
	ssize_t		got;
	long		produced = 0;
	char	   *default_subject;
	char	   *default_key_subject;

	while ((c = getopt_long(argc, argv, "", options, NULL)) != -1)
	{
		switch (c)
		{
			case 'b':
				brokers = optarg;
				break;
			case 't':
				topic = optarg;
				break;
			case 'r':
				registry = optarg;
				break;
			case 'u':
				user = optarg;
				break;
			case 'w':
				password = optarg;
				break;
			case 'T':
				token = optarg;
				break;
			case 'C':
				cacert = optarg;
				break;
			case 's':
				subject = optarg;
				break;
			case 'S':
				key_subject = optarg;
				break;
			case 'f':
				schema_file = optarg;
				break;
			case 'k':
				key_schema_file = optarg;
				break;
			case 'i':
				schema_id = parse_id(optarg);
				break;
			case 'I':
				key_schema_id = parse_id(optarg);
				break;
			case 'K':
				raw_key = true;
				break;
			case 'x':
				raw_hex = true;
				break;
			case 'p':
				partition = atoi(optarg);
				break;
			default:
				usage();
		}
	}
	if (optind != argc || brokers == NULL || topic == NULL ||
		(registry && *registry == '\0') ||
		(schema_file == NULL && !raw_hex) ||
		(user == NULL) != (password == NULL) || (user && token) ||
		(raw_key && key_schema_file) ||
		(key_schema_id >= 0 && key_schema_file == NULL))
		usage();
	has_key = raw_key || key_schema_file;

	default_subject = malloc(strlen(topic) + 8);
	sprintf(default_subject, "%s-value", topic);
	default_key_subject = malloc(strlen(topic) + 8);
	sprintf(default_key_subject, "%s-key", topic);
	curl_global_init(CURL_GLOBAL_DEFAULT);
	if (key_schema_file)
	{
		writer_init(&key_writer, key_schema_file,
					key_subject ? key_subject : default_key_subject,
					key_schema_id);
		printf("key_schema_id=%ld\n", key_writer.id);
	}
	if (schema_file && !raw_hex)
	{
		writer_init(&value_writer, schema_file,
					subject ? subject : default_subject, schema_id);
		printf("value_schema_id=%ld\n", value_writer.id);
	}
	fflush(stdout);

	conf = rd_kafka_conf_new();
	if (rd_kafka_conf_set(conf, "bootstrap.servers", brokers, errstr,
						  sizeof(errstr)) != RD_KAFKA_CONF_OK ||
		rd_kafka_conf_set(conf, "linger.ms", "5", errstr,
						  sizeof(errstr)) != RD_KAFKA_CONF_OK)
		die("%s", errstr);
	rd_kafka_conf_set_dr_msg_cb(conf, delivered);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, errstr, sizeof(errstr));
	if (rk == NULL)
		die("cannot make a producer: %s", errstr);

	while ((got = getline(&line, &cap, stdin)) >= 0)
	{
		char	   *value_text = line;
		unsigned char *key = NULL;
		size_t		keylen = 0;
		unsigned char *value = NULL;
		size_t		len = 0;

		line_number++;
		if (got > 0 && line[got - 1] == '\n')
			line[--got] = '\0';
		if (has_key)
		{
			char	   *tab = strchr(line, '\t');

			if (tab == NULL)
				die("expected KEY<TAB>VALUE");
			*tab = '\0';
			value_text = tab + 1;
			if (*line == '\0')
				;
			else if (raw_key)
			{
				key = (unsigned char *) strdup(line);
				keylen = strlen(line);
			}
			else
				key = frame(&key_writer, line, &keylen, "key");
		}
		if (*value_text == '\0')
			;
		else if (raw_hex)
			value = unhex(value_text, &len);
		else
			value = frame(&value_writer, value_text, &len, "value");
		produce(rk, key, keylen, value, len);
		produced++;
		free(key);
		free(value);
	}
	line_number = 0;
	if (ferror(stdin))
		die("cannot read stdin: %s", strerror(errno));

	rd_kafka_flush(rk, 60000);
	if (rd_kafka_outq_len(rk) > 0)
		die("%d messages were not delivered in 60 s", rd_kafka_outq_len(rk));
	if (delivery_failures > 0)
		die("%d messages were not delivered", delivery_failures);
	rd_kafka_destroy(rk);
	printf("produced=%ld\n", produced);
	return 0;
}
