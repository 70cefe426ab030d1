/*-------------------------------------------------------------------------
 *
 * decode_avro.c
 *		  The format avro: message values in the Confluent wire format (a
 *		  magic byte 0, a 4-byte schema id, the Avro binary body), read with
 *		  Apache Avro C against the writer's schema from the registry
 *
 * Built into source_writes_avro.so, the only library linked with Avro C,
 * which processes load when they first decode an Avro message (the Kafka
 * workers); decode.c reaches it through avro_format.c.  The schemas are
 * fetched by the Kafka worker (src/kafka/registry.c) before a batch
 * begins, and kept here.  See doc/internals.md, "Writing and the stamping
 * protocol" (Decoding).
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/ingest/decode_avro.c
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <avro.h>

#include "catalog/pg_type.h"
#include "common/int.h"
#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/float.h"
#include "utils/hsearch.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"

#include "ingest/avro.h"
#include "ingest/decode.h"
#include "log/log.h"

PG_MODULE_MAGIC;

/*
 * How long the registry's refusal of an id (it did not know it, answered
 * no schema) stands before the id's next messages make it asked again
 */
#define SW_AVRO_REFUSAL_MS		30000

/* the most schemas kept at once; the least used go first */
#define SW_AVRO_KEPT_SCHEMAS	1024

/*
 * The most digits of a decimal read: numeric's typmods take no more, and
 * a decimal's conversion costs the square of its length
 */
#define SW_AVRO_MAX_PRECISION	1000

/*
 * The most types a schema may have once its named types are written out
 * where they are used (Avro C makes a value for each), and the most values
 * a message may make
 */
#define SW_AVRO_MAX_TYPES		50000
#define SW_AVRO_MAX_VALUES(len)	(1000000 + 8 * (int64) (len))

/* no Avro type: a name that is not a primitive type's */
#define SW_AVRO_NONE	((avro_type_t) -1)

/* microseconds from the Unix epoch to PostgreSQL's */
#define SW_EPOCH_DIFF_USECS \
	((int64) (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE) * USECS_PER_DAY)

/* the logical types, as the schema names them */
typedef enum Logical
{
	LT_NONE,
	LT_DATE,
	LT_TIME_MILLIS,
	LT_TIME_MICROS,
	LT_TIMESTAMP_MILLIS,
	LT_TIMESTAMP_MICROS,
	LT_LOCAL_TIMESTAMP_MILLIS,
	LT_LOCAL_TIMESTAMP_MICROS,
	LT_DECIMAL,
	LT_UUID,
	LT_MICRO_DURATION			/* Debezium's MicroDuration: no Avro type */
} Logical;

/*
 * A schema as we read its JSON, beside Avro C's: what Avro C does not keep
 * (logical types, a decimal's scale), in the same shape, so that the two
 * are walked together: a record's fields, a union's branches in order, an
 * array's items or a map's values as the one child.
 */
typedef struct SchemaNode
{
	avro_type_t type;
	Logical		logical;
	int			scale;			/* LT_DECIMAL */
	int			precision;		/* LT_DECIMAL, at most SW_AVRO_MAX_PRECISION */
	int			nchildren;
	struct SchemaNode **children;
	const char *name;			/* a named type's full name */
	bool		open;			/* a record whose fields are being read */
	int64		expanded;		/* expanded_size(), once counted */
} SchemaNode;

/* a writer's schema, by its registry's server and id */
typedef struct SchemaKey
{
	Oid			serverid;
	int32		id;
} SchemaKey;

typedef struct SchemaEntry
{
	SchemaKey	key;
	bool		usable;			/* else why holds why it is not */
	char	   *why;
	avro_schema_t schema;
	avro_value_iface_t *iface;
	avro_value_t value;			/* read into, message after message */
	SchemaNode *root;
	MemoryContext cxt;			/* of root and why */
	uint64		used;			/* when it was last used, for eviction */
	TimestampTz ask_again;		/* a refusal of the registry's: until when */
} SchemaEntry;

static HTAB *schemas = NULL;
static uint64 uses = 0;

/* a decoder's state (SwDecoder.format_state) */
typedef struct AvroState
{
	/* envelope 'debezium': which parts of an event its columns take */
	bool		want_before;
	bool		want_source;
	/* the event being decoded: its after image, if it has one */
	avro_value_t after;
	SchemaNode *after_node;
} AvroState;

/* the reader, set to each message in turn */
static avro_reader_t reader = NULL;

/* ---------------------------------------------------------------------
 * Schemas
 * ---------------------------------------------------------------------
 */

/* the named types of a schema being read, by full name */
typedef struct Names
{
	List	   *names;
	List	   *nodes;
	const char *why;			/* why the schema is refused, if it is */
} Names;

static SchemaNode *read_node(JsonbValue *v, const char *ns, Names *names);

/* a string field of a JSON object, or NULL */
static char *
object_string(JsonbContainer *obj, const char *key)
{
	JsonbValue	v;

	if (getKeyJsonValueFromContainer(obj, key, strlen(key), &v) == NULL ||
		v.type != jbvString)
		return NULL;
	return pnstrdup(v.val.string.val, v.val.string.len);
}

/* a primitive type by its name, or SW_AVRO_NONE */
static avro_type_t
primitive_type(const char *name)
{
	static const struct
	{
		const char *name;
		avro_type_t type;
	}			primitives[] = {
		{"null", AVRO_NULL}, {"boolean", AVRO_BOOLEAN}, {"int", AVRO_INT32},
		{"long", AVRO_INT64}, {"float", AVRO_FLOAT}, {"double", AVRO_DOUBLE},
		{"bytes", AVRO_BYTES}, {"string", AVRO_STRING},
	};

	for (int i = 0; i < lengthof(primitives); i++)
		if (strcmp(primitives[i].name, name) == 0)
			return primitives[i].type;
	return SW_AVRO_NONE;
}

/* a named type's full name, in namespace ns */
static const char *
full_name(const char *name, const char *ns)
{
	if (strchr(name, '.') || ns == NULL || ns[0] == '\0')
		return pstrdup(name);
	return psprintf("%s.%s", ns, name);
}

/* a reference to a named type defined before */
static SchemaNode *
named_node(const char *name, const char *ns, Names *names)
{
	const char *full = full_name(name, ns);
	ListCell   *n;
	ListCell   *lc;

	forboth(n, names->names, lc, names->nodes)
	{
		SchemaNode *node = lfirst(lc);

		if (strcmp(lfirst(n), full) != 0 && strcmp(lfirst(n), name) != 0)
			continue;
		/* a type within itself: a message could nest it without end */
		if (node->open)
		{
			names->why = "it is recursive, which this release does not read";
			return NULL;
		}
		return node;
	}
	return NULL;
}

/*
 * Debezium's own time types, which Kafka Connect's Avro converter writes
 * without a logicalType, naming them in "connect.name": their values are
 * those of Avro's logical types of the same units (a Timestamp is the
 * local date and time, with no time zone); a MicroDuration, which no Avro
 * type has, is an interval of its microseconds (Debezium counts a month as
 * 30.4375 days).
 */
static Logical
debezium_type(JsonbContainer *obj, avro_type_t type)
{
	char	   *name = object_string(obj, "connect.name");

	if (name == NULL || strncmp(name, "io.debezium.time.", 17) != 0)
		return LT_NONE;
	name += 17;
	if (type == AVRO_INT32)
	{
		if (strcmp(name, "Date") == 0)
			return LT_DATE;
		if (strcmp(name, "Time") == 0)
			return LT_TIME_MILLIS;
	}
	if (type == AVRO_INT64)
	{
		if (strcmp(name, "MicroTime") == 0)
			return LT_TIME_MICROS;
		if (strcmp(name, "Timestamp") == 0)
			return LT_LOCAL_TIMESTAMP_MILLIS;
		if (strcmp(name, "MicroTimestamp") == 0)
			return LT_LOCAL_TIMESTAMP_MICROS;
		if (strcmp(name, "MicroDuration") == 0)
			return LT_MICRO_DURATION;
	}
	return LT_NONE;
}

/* the logical type of a schema object, checked against its type */
static Logical
logical_type(JsonbContainer *obj, avro_type_t type, int *scale, int *precision)
{
	char	   *logical = object_string(obj, "logicalType");
	JsonbValue	v;

	if (logical == NULL)
		return debezium_type(obj, type);
	if (strcmp(logical, "decimal") == 0 &&
		(type == AVRO_BYTES || type == AVRO_FIXED))
	{
		bool		error = false;

		/* (precision is required; a decimal without one has the most) */
		*precision = SW_AVRO_MAX_PRECISION;
		if (getKeyJsonValueFromContainer(obj, "precision", 9, &v) && v.type == jbvNumeric)
		{
			int32		p = numeric_int4_opt_error(v.val.numeric, &error);

			if (!error && p > 0 && p < SW_AVRO_MAX_PRECISION)
				*precision = p;
		}
		*scale = 0;
		if (getKeyJsonValueFromContainer(obj, "scale", 5, &v) && v.type == jbvNumeric)
			*scale = DatumGetInt32(DirectFunctionCall1(numeric_int4,
													   NumericGetDatum(v.val.numeric)));
		return *scale >= 0 && *scale <= NUMERIC_MAX_DISPLAY_SCALE ? LT_DECIMAL : LT_NONE;
	}
	if (type == AVRO_INT32)
	{
		if (strcmp(logical, "date") == 0)
			return LT_DATE;
		if (strcmp(logical, "time-millis") == 0)
			return LT_TIME_MILLIS;
	}
	if (type == AVRO_INT64)
	{
		if (strcmp(logical, "time-micros") == 0)
			return LT_TIME_MICROS;
		if (strcmp(logical, "timestamp-millis") == 0)
			return LT_TIMESTAMP_MILLIS;
		if (strcmp(logical, "timestamp-micros") == 0)
			return LT_TIMESTAMP_MICROS;
		if (strcmp(logical, "local-timestamp-millis") == 0)
			return LT_LOCAL_TIMESTAMP_MILLIS;
		if (strcmp(logical, "local-timestamp-micros") == 0)
			return LT_LOCAL_TIMESTAMP_MICROS;
	}
	if (type == AVRO_STRING && strcmp(logical, "uuid") == 0)
		return LT_UUID;
	/* one it does not know, or on another type: the type as it is */
	return LT_NONE;
}

/*
 * How many types a type is once its named types are written out where
 * they are used (up to SW_AVRO_MAX_TYPES + 1): a named type used twice in
 * each of 30 nested ones is a billion, in a schema of 2 kB.
 */
static int64
expanded_size(SchemaNode *node)
{
	check_stack_depth();
	if (node->expanded == 0)
	{
		int64		n = 1;

		for (int i = 0; i < node->nchildren && n <= SW_AVRO_MAX_TYPES; i++)
			n += expanded_size(node->children[i]);
		node->expanded = Min(n, SW_AVRO_MAX_TYPES + 1);
	}
	return node->expanded;
}

/*
 * Whether a value of a type takes no bytes in Avro's binary encoding:
 * null, a record of such fields only.
 */
static bool
zero_width(SchemaNode *node, int depth)
{
	if (node->type == AVRO_NULL)
		return true;
	if (node->type != AVRO_RECORD || node->open || depth > 64)
		return false;
	for (int i = 0; i < node->nchildren; i++)
		if (node->children[i] == NULL || !zero_width(node->children[i], depth + 1))
			return false;
	return true;
}

/* a schema object ({"type": ...}) */
static SchemaNode *
read_object(JsonbContainer *obj, const char *ns, Names *names)
{
	JsonbValue	t;
	char	   *type;
	SchemaNode *node;

	if (getKeyJsonValueFromContainer(obj, "type", 4, &t) == NULL)
		return NULL;
	if (t.type != jbvString)
		return read_node(&t, ns, names);	/* {"type": {...}} or a union */
	type = pnstrdup(t.val.string.val, t.val.string.len);

	node = palloc0(sizeof(SchemaNode));
	node->type = primitive_type(type);
	if (node->type != SW_AVRO_NONE)
	{
		node->logical = logical_type(obj, node->type, &node->scale, &node->precision);
		return node;
	}
	if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0 ||
		strcmp(type, "enum") == 0 || strcmp(type, "fixed") == 0)
	{
		char	   *name = object_string(obj, "name");
		char	   *own_ns = object_string(obj, "namespace");

		if (name == NULL)
			return NULL;
		if (own_ns)
			ns = own_ns;
		node->name = full_name(name, ns);
		if (strchr(name, '.'))
			ns = pnstrdup(name, strrchr(name, '.') - name);
		names->names = lappend(names->names, (void *) node->name);
		names->nodes = lappend(names->nodes, node);
	}
	if (strcmp(type, "record") == 0 || strcmp(type, "error") == 0)
	{
		JsonbValue	fields;

		node->type = AVRO_RECORD;
		if (getKeyJsonValueFromContainer(obj, "fields", 6, &fields) == NULL ||
			fields.type != jbvBinary)
			return NULL;
		node->nchildren = JsonContainerSize(fields.val.binary.data);
		node->children = palloc0(sizeof(SchemaNode *) * Max(node->nchildren, 1));
		node->open = true;
		for (int i = 0; i < node->nchildren; i++)
		{
			JsonbValue *f = getIthJsonbValueFromContainer(fields.val.binary.data, i);
			JsonbValue	ft;

			if (f == NULL || f->type != jbvBinary ||
				getKeyJsonValueFromContainer(f->val.binary.data, "type", 4, &ft) == NULL ||
				(node->children[i] = read_node(&ft, ns, names)) == NULL)
				return NULL;
		}
		node->open = false;
	}
	else if (strcmp(type, "enum") == 0)
		node->type = AVRO_ENUM;
	else if (strcmp(type, "fixed") == 0)
	{
		node->type = AVRO_FIXED;
		node->logical = logical_type(obj, AVRO_FIXED, &node->scale, &node->precision);
	}
	else if (strcmp(type, "array") == 0 || strcmp(type, "map") == 0)
	{
		JsonbValue	child;
		bool		array = strcmp(type, "array") == 0;

		node->type = array ? AVRO_ARRAY : AVRO_MAP;
		node->nchildren = 1;
		node->children = palloc(sizeof(SchemaNode *));
		if (getKeyJsonValueFromContainer(obj, array ? "items" : "values",
										 array ? 5 : 6, &child) == NULL ||
			(node->children[0] = read_node(&child, ns, names)) == NULL)
			return NULL;
		if (expanded_size(node->children[0]) > SW_AVRO_MAX_TYPES)
		{
			names->why = "it has more than " CppAsString2(SW_AVRO_MAX_TYPES) " types once its named types are written out";
			return NULL;
		}

		/*
		 * Items that take no bytes: a few bytes of a message could count
		 * billions of them, each of which Avro C would make.  (A map's
		 * entries have keys, which take a byte at least.)
		 */
		if (array && zero_width(node->children[0], 0))
		{
			names->why = "it has an array of items that take no bytes";
			return NULL;
		}
	}
	else
	{
		/* a named type given as {"type": "Name"} */
		return named_node(type, ns, names);
	}
	return node;
}

/*
 * Read one schema (a JSON value: a type's name, a schema object or a
 * union's array) into a node; NULL for what Avro C would not take either.
 */
static SchemaNode *
read_node(JsonbValue *v, const char *ns, Names *names)
{
	check_stack_depth();
	if (v->type == jbvString)
	{
		char	   *name = pnstrdup(v->val.string.val, v->val.string.len);
		SchemaNode *node;

		if (primitive_type(name) == SW_AVRO_NONE)
			return named_node(name, ns, names);
		node = palloc0(sizeof(SchemaNode));
		node->type = primitive_type(name);
		return node;
	}
	if (v->type != jbvBinary)
		return NULL;
	if (JsonContainerIsArray(v->val.binary.data))
	{
		SchemaNode *node = palloc0(sizeof(SchemaNode));

		node->type = AVRO_UNION;
		node->nchildren = JsonContainerSize(v->val.binary.data);
		node->children = palloc0(sizeof(SchemaNode *) * Max(node->nchildren, 1));
		for (int i = 0; i < node->nchildren; i++)
		{
			JsonbValue *b = getIthJsonbValueFromContainer(v->val.binary.data, i);

			if (b == NULL || (node->children[i] = read_node(b, ns, names)) == NULL)
				return NULL;
		}
		return node;
	}
	return read_object(v->val.binary.data, ns, names);
}

/*
 * Read a schema's JSON with PostgreSQL's parser into our nodes, in the
 * current memory context.  An ERROR for JSON that is not valid.
 */
static SchemaNode *
read_schema(const char *json, const char **why)
{
	MemoryContext parse_cxt = AllocSetContextCreate(CurrentMemoryContext,
													"source_writes Avro schema text",
													ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(parse_cxt);
	Jsonb	   *jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(json)));
	JsonbValue	v;
	Names		names = {NIL, NIL, NULL};
	SchemaNode *root;

	/*
	 * The parsed JSON goes once the nodes are made: a schema's docs can
	 * weigh megabytes, and the nodes copy the little they need.
	 */
	MemoryContextSwitchTo(old);

	if (JB_ROOT_IS_SCALAR(jb))
		root = read_node(getIthJsonbValueFromContainer(&jb->root, 0), NULL, &names);
	else
	{
		v.type = jbvBinary;
		v.val.binary.data = &jb->root;
		v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
		root = read_node(&v, NULL, &names);
	}
	if (root && expanded_size(root) > SW_AVRO_MAX_TYPES)
	{
		names.why = "it has more than " CppAsString2(SW_AVRO_MAX_TYPES) " types once its named types are written out";
		root = NULL;
	}
	*why = names.why;
	MemoryContextDelete(parse_cxt);
	return root;
}

/* let go of what a schema entry holds */
static void
free_entry(SchemaEntry *e)
{
	if (e->usable)
	{
		avro_value_decref(&e->value);
		avro_value_iface_decref(e->iface);
		avro_schema_decref(e->schema);
	}
	if (e->cxt)
		MemoryContextDelete(e->cxt);
	e->usable = false;
	e->cxt = NULL;
}

/* the schemas' table, made on first use; its least used entry goes when full */
static SchemaEntry *
enter_schema(Oid serverid, int32 id)
{
	SchemaKey	key = {serverid, id};
	SchemaEntry *e;
	bool		found;

	if (schemas == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(SchemaKey);
		ctl.entrysize = sizeof(SchemaEntry);
		ctl.hcxt = TopMemoryContext;
		schemas = hash_create("source_writes Avro schemas", 64, &ctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	e = hash_search(schemas, &key, HASH_FIND, &found);
	if (found)
		free_entry(e);
	else if (hash_get_num_entries(schemas) >= SW_AVRO_KEPT_SCHEMAS)
	{
		HASH_SEQ_STATUS seq;
		SchemaEntry *s;
		SchemaEntry *oldest = NULL;

		hash_seq_init(&seq, schemas);
		while ((s = hash_seq_search(&seq)) != NULL)
			if (oldest == NULL || s->used < oldest->used)
				oldest = s;
		free_entry(oldest);
		(void) hash_search(schemas, &oldest->key, HASH_REMOVE, NULL);
	}
	if (!found)
		e = hash_search(schemas, &key, HASH_ENTER, NULL);
	e->usable = false;
	e->why = NULL;
	e->cxt = NULL;
	e->root = NULL;
	e->used = ++uses;
	e->ask_again = 0;
	return e;
}

/*
 * Keep the writer's schema of id in the registry of server serverid, as
 * the registry gave it (JSON text of len bytes): parsed by Avro C and by
 * us.  Returns NULL, or why it cannot be used (the messages written with
 * it are then kept as errors that say so).
 */
const char *
sw_avro_schema_add(Oid serverid, int32 id, const char *json, size_t len)
{
	SchemaEntry *e = enter_schema(serverid, id);
	MemoryContext old;
	char	   *text;
	SchemaNode *volatile root = NULL;
	const char *why = NULL;

	e->cxt = AllocSetContextCreate(TopMemoryContext, "source_writes Avro schema",
								   ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(e->cxt);
	text = pnstrdup(json, len);
	PG_TRY();
	{
		root = read_schema(text, &why);
	}
	PG_CATCH();
	{
		FlushErrorState();
		root = NULL;
	}
	PG_END_TRY();
	MemoryContextSwitchTo(old);

	if (root == NULL)
		e->why = MemoryContextStrdup(e->cxt, why ? why : "it is not a valid Avro schema");
	else if (avro_schema_from_json_length(text, len, &e->schema) != 0)
		e->why = MemoryContextStrdup(e->cxt,
									 psprintf("Avro C refuses it: %s", avro_strerror()));
	else if ((e->iface = avro_generic_class_from_schema(e->schema)) == NULL ||
			 avro_generic_value_new(e->iface, &e->value) != 0)
	{
		e->why = MemoryContextStrdup(e->cxt,
									 psprintf("Avro C cannot read with it: %s", avro_strerror()));
		if (e->iface)
			avro_value_iface_decref(e->iface);
		avro_schema_decref(e->schema);
	}
	else
	{
		e->root = root;
		e->usable = true;
	}
	pfree(text);
	return e->why;
}

/*
 * Keep that the schema of id cannot be had (the registry does not know
 * it, or answered what is no schema): why says so.  For a while only: a
 * registry may answer so for a time (a replica behind, a proxy's page),
 * and an id, once given, names one schema for good.
 */
void
sw_avro_schema_refuse(Oid serverid, int32 id, const char *why)
{
	SchemaEntry *e = enter_schema(serverid, id);

	e->cxt = AllocSetContextCreate(TopMemoryContext, "source_writes Avro schema",
								   ALLOCSET_SMALL_SIZES);
	e->why = MemoryContextStrdup(e->cxt, why);
	e->ask_again = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), SW_AVRO_REFUSAL_MS);
}

/*
 * Whether the schema of id is kept, usable or not; if it is, it counts as
 * used now: the messages asked about are decoded next, and the schemas
 * fetched for others of them must not push it out.
 */
bool
sw_avro_schema_known(Oid serverid, int32 id)
{
	SchemaKey	key = {serverid, id};
	SchemaEntry *e = schemas ? hash_search(schemas, &key, HASH_FIND, NULL) : NULL;

	if (e == NULL)
		return false;
	if (e->ask_again != 0 && GetCurrentTimestamp() >= e->ask_again)
		return false;			/* a refusal of the registry's, that stood long enough */
	e->used = ++uses;
	return true;
}

/* ---------------------------------------------------------------------
 * Values
 * ---------------------------------------------------------------------
 */

static void render_json(DecodeRun *r, StringInfo buf, avro_value_t *v, SchemaNode *node);

/* an Avro C call that failed: the message is not what its schema says */
static void
avro_failed(DecodeRun *r, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid Avro data: %s", what),
			 errdetail("Apache Avro C says: %s", avro_strerror())));
}

/* a union's branch, and its node; the value itself for other types */
static void
resolve_union(DecodeRun *r, avro_value_t *v, SchemaNode **node, avro_value_t *out)
{
	*out = *v;
	while (avro_value_get_type(out) == AVRO_UNION)
	{
		int			disc;
		avro_value_t branch;

		if (avro_value_get_discriminant(out, &disc) != 0 ||
			avro_value_get_current_branch(out, &branch) != 0)
			avro_failed(r, "a union without a branch");
		*node = (*node && (*node)->type == AVRO_UNION && disc < (*node)->nchildren) ?
			(*node)->children[disc] : NULL;
		*out = branch;
	}
	/* our reading of the schema is only trusted where it agrees with Avro C's */
	if (*node && (*node)->type != avro_value_get_type(out))
		*node = NULL;
}

/*
 * The unscaled two's-complement big-endian integer of a decimal, as text;
 * an error if it has more bytes than its precision needs (beyond those
 * that only extend its sign, as a fixed's may).
 */
static char *
decimal_text(const uint8 *bytes, size_t len, int scale, int precision)
{
	Numeric		n;
	Numeric		base;
	bool		negative = len > 0 && (bytes[0] & 0x80);
	size_t		most = ((size_t) precision * 3322 / 1000 + 2 + 7) / 8;

	while (len > 1 && bytes[0] == (negative ? 0xff : 0x00) &&
		   ((bytes[1] & 0x80) != 0) == negative)
	{
		bytes++;
		len--;
	}
	if (len > most)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("decimal of %zu bytes is longer than its precision of %d digits allows", len, precision)));

	/* up to 8 bytes: an int64, and the point put in its digits */
	if (len >= 1 && len <= 8)
	{
		int64		v = (int8) bytes[0];	/* sign-extended */
		char		digits[32];
		char	   *d = digits;
		int			ndigits;
		StringInfoData buf;

		for (size_t i = 1; i < len; i++)
			v = (int64) ((uint64) v << 8) | bytes[i];
		snprintf(digits, sizeof(digits), INT64_FORMAT, v);
		initStringInfo(&buf);
		if (*d == '-')
			appendStringInfoChar(&buf, *d++);
		ndigits = strlen(d);
		if (scale == 0)
			appendStringInfoString(&buf, d);
		else if (ndigits > scale)
			appendStringInfo(&buf, "%.*s.%s", ndigits - scale, d, d + ndigits - scale);
		else
		{
			appendStringInfoString(&buf, "0.");
			for (int i = ndigits; i < scale; i++)
				appendStringInfoChar(&buf, '0');
			appendStringInfoString(&buf, d);
		}
		return buf.data;
	}

	n = int64_to_numeric(0);
	base = int64_to_numeric(256);

	for (size_t i = 0; i < len; i++)
	{
		uint8		b = negative ? (uint8) ~bytes[i] : bytes[i];

		n = DatumGetNumeric(DirectFunctionCall2(numeric_mul, NumericGetDatum(n),
												NumericGetDatum(base)));
		n = DatumGetNumeric(DirectFunctionCall2(numeric_add, NumericGetDatum(n),
												NumericGetDatum(int64_to_numeric(b))));
	}
	if (negative)				/* -(~x + 1) */
		n = DatumGetNumeric(DirectFunctionCall1(numeric_uminus,
												DirectFunctionCall2(numeric_add, NumericGetDatum(n),
																	NumericGetDatum(int64_to_numeric(1)))));
	if (scale > 0)
	{
		Numeric		divisor = DatumGetNumeric(DirectFunctionCall2(numeric_power,
																  NumericGetDatum(int64_to_numeric(10)),
																  NumericGetDatum(int64_to_numeric(scale))));

		n = DatumGetNumeric(DirectFunctionCall2(numeric_div, NumericGetDatum(n),
												NumericGetDatum(divisor)));
		n = DatumGetNumeric(DirectFunctionCall2(numeric_round, NumericGetDatum(n),
												Int32GetDatum(scale)));
	}
	return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(n)));
}

/* microseconds since the Unix epoch as PostgreSQL's, range-checked */
static int64
epoch_usecs(int64 v, int64 per_unit)
{
	int64		usecs;

	if (pg_mul_s64_overflow(v, per_unit, &usecs) ||
		pg_sub_s64_overflow(usecs, SW_EPOCH_DIFF_USECS, &usecs) ||
		!IS_VALID_TIMESTAMP(usecs))
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("timestamp out of range: " INT64_FORMAT " %s since the Unix epoch",
						v, per_unit == 1000 ? "ms" : "µs")));
	return usecs;
}

/* a time of day in microseconds as text, range-checked (v in unit) */
static char *
time_text(int64 usecs, int64 v, const char *unit)
{
	if (usecs < 0 || usecs > USECS_PER_DAY)
		ereport(ERROR,
				(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
				 errmsg("time out of range: " INT64_FORMAT " %s since midnight", v, unit)));
	return DatumGetCString(DirectFunctionCall1(time_out, TimeADTGetDatum(usecs)));
}

/*
 * A scalar (anything but a record, an array or a map) as text, as its
 * logical type says: a date, time or timestamp in ISO form, a decimal as
 * a number; NULL for null.  *quote is set for what is a string in JSON.
 */
static char *
scalar_text(DecodeRun *r, avro_value_t *v, SchemaNode *node, bool *quote)
{
	Logical		logical = node ? node->logical : LT_NONE;
	const void *buf;
	size_t		size;
	const char *s;
	int32		i32;
	int64		i64;
	float		f;
	double		d;
	int			b;

	*quote = true;
	switch (avro_value_get_type(v))
	{
		case AVRO_NULL:
			return NULL;
		case AVRO_BOOLEAN:
			avro_value_get_boolean(v, &b);
			*quote = false;
			return pstrdup(b ? "true" : "false");
		case AVRO_INT32:
			avro_value_get_int(v, &i32);
			if (logical == LT_DATE)
			{
				/* (in 64 bits: the difference of epochs overflows near INT_MIN) */
				int64		days = (int64) i32 - (POSTGRES_EPOCH_JDATE - UNIX_EPOCH_JDATE);

				if (!IS_VALID_DATE(days))
					ereport(ERROR,
							(errcode(ERRCODE_DATETIME_VALUE_OUT_OF_RANGE),
							 errmsg("date out of range: %d days since the Unix epoch", i32)));
				return DatumGetCString(DirectFunctionCall1(date_out,
														   DateADTGetDatum((DateADT) days)));
			}
			if (logical == LT_TIME_MILLIS)
				return time_text((int64) i32 * 1000, i32, "ms");
			*quote = false;
			return psprintf("%d", i32);
		case AVRO_INT64:
			avro_value_get_long(v, &i64);
			switch (logical)
			{
				case LT_TIME_MICROS:
					return time_text(i64, i64, "µs");
				case LT_TIMESTAMP_MILLIS:
				case LT_TIMESTAMP_MICROS:
					return DatumGetCString(DirectFunctionCall1(timestamptz_out,
															   TimestampTzGetDatum(epoch_usecs(i64, logical == LT_TIMESTAMP_MILLIS ? 1000 : 1))));
				case LT_LOCAL_TIMESTAMP_MILLIS:
				case LT_LOCAL_TIMESTAMP_MICROS:
					return DatumGetCString(DirectFunctionCall1(timestamp_out,
															   TimestampGetDatum(epoch_usecs(i64, logical == LT_LOCAL_TIMESTAMP_MILLIS ? 1000 : 1))));
				case LT_MICRO_DURATION:
					{
						/* its months and days already in microseconds */
						Interval   *span = palloc0(sizeof(Interval));

						span->time = i64;
						return DatumGetCString(DirectFunctionCall1(interval_out,
																   IntervalPGetDatum(span)));
					}
				default:
					*quote = false;
					return psprintf(INT64_FORMAT, i64);
			}
		case AVRO_FLOAT:
			avro_value_get_float(v, &f);
			*quote = isnan(f) || isinf(f);
			return DatumGetCString(DirectFunctionCall1(float4out, Float4GetDatum(f)));
		case AVRO_DOUBLE:
			avro_value_get_double(v, &d);
			*quote = isnan(d) || isinf(d);
			return float8out_internal(d);
		case AVRO_STRING:
			avro_value_get_string(v, &s, &size);
			/* the size counts the NUL Avro C adds */
			return sw_make_cstring(r, s, size > 0 ? size - 1 : 0);
		case AVRO_BYTES:
		case AVRO_FIXED:
			if (avro_value_get_type(v) == AVRO_BYTES)
				avro_value_get_bytes(v, &buf, &size);
			else
				avro_value_get_fixed(v, &buf, &size);
			if (logical == LT_DECIMAL)
			{
				*quote = false;
				return decimal_text(buf, size, node->scale, node->precision);
			}
			{
				StringInfoData hex;

				initStringInfo(&hex);
				appendStringInfoString(&hex, "\\x");
				enlargeStringInfo(&hex, size * 2);
				hex.len += hex_encode(buf, size, hex.data + hex.len);
				hex.data[hex.len] = '\0';
				return hex.data;
			}
		case AVRO_ENUM:
			{
				avro_value_get_enum(v, &b);
				if (b < 0 || b >= avro_schema_enum_number_of_symbols(avro_value_get_schema(v)))
					avro_failed(r, "an enum's index out of range");
				s = avro_schema_enum_get(avro_value_get_schema(v), b);
				if (s == NULL)
					avro_failed(r, "an enum's index out of range");
				return pstrdup(s);
			}
		default:
			break;
	}
	return NULL;					/* records, arrays, maps: not scalars */
}

/*
 * A value as JSON a user can query: records and maps as objects, arrays as
 * arrays, a union as its branch's value, logical types as scalar_text
 * gives them, bytes as "\x..." strings.
 */
static void
render_json(DecodeRun *r, StringInfo buf, avro_value_t *value, SchemaNode *node)
{
	avro_value_t v;
	size_t		n;

	check_stack_depth();
	resolve_union(r, value, &node, &v);
	switch (avro_value_get_type(&v))
	{
		case AVRO_RECORD:
		case AVRO_MAP:
			avro_value_get_size(&v, &n);
			appendStringInfoChar(buf, '{');
			for (size_t i = 0; i < n; i++)
			{
				avro_value_t child;
				const char *name;

				if (avro_value_get_by_index(&v, i, &child, &name) != 0)
					avro_failed(r, "a record or map without its element");
				if (i > 0)
					appendStringInfoString(buf, ", ");
				/* a map's keys are the message's strings: checked as its values */
				if (avro_value_get_type(&v) == AVRO_MAP)
					name = sw_make_cstring(r, name, strlen(name));
				escape_json(buf, name);
				appendStringInfoString(buf, ": ");
				render_json(r, buf, &child,
							node == NULL ? NULL :
							node->type == AVRO_MAP ? node->children[0] :
							i < (size_t) node->nchildren ? node->children[i] : NULL);
			}
			appendStringInfoChar(buf, '}');
			return;
		case AVRO_ARRAY:
			avro_value_get_size(&v, &n);
			appendStringInfoChar(buf, '[');
			for (size_t i = 0; i < n; i++)
			{
				avro_value_t child;

				if (avro_value_get_by_index(&v, i, &child, NULL) != 0)
					avro_failed(r, "an array without its element");
				if (i > 0)
					appendStringInfoString(buf, ", ");
				render_json(r, buf, &child, node ? node->children[0] : NULL);
			}
			appendStringInfoChar(buf, ']');
			return;
		default:
			{
				bool		quote;
				char	   *s = scalar_text(r, &v, node, &quote);

				if (s == NULL)
					appendStringInfoString(buf, "null");
				else if (quote)
					escape_json(buf, s);
				else
					appendStringInfoString(buf, s);
			}
	}
}

/*
 * The common cases without text in between: an int or long into an
 * integer column (range-checked as int8 to int4 casts are), a double or
 * float into float8, a string into text.  False for the others.
 */
static bool
fill_directly(DecodeRun *r, DecColumn *c, avro_value_t *v, avro_type_t type,
			  SchemaNode *node)
{
	int32		i32;
	int64		i64;
	double		d;
	float		f;
	const char *s;
	size_t		size;

	if (node && node->logical != LT_NONE)
		return false;
	switch (type)
	{
		case AVRO_INT32:
		case AVRO_INT64:
			if (type == AVRO_INT32)
			{
				avro_value_get_int(v, &i32);
				i64 = i32;
			}
			else
				avro_value_get_long(v, &i64);
			if (c->basetype == INT8OID)
				store_datum(r, c, Int64GetDatum(i64), false);
			else if (c->basetype == INT4OID && i64 >= PG_INT32_MIN && i64 <= PG_INT32_MAX)
				store_datum(r, c, Int32GetDatum((int32) i64), false);
			else if (c->basetype == INT2OID && i64 >= PG_INT16_MIN && i64 <= PG_INT16_MAX)
				store_datum(r, c, Int16GetDatum((int16) i64), false);
			else
				return false;	/* the input function says what is wrong */
			return true;
		case AVRO_DOUBLE:
		case AVRO_FLOAT:
			if (c->basetype != FLOAT8OID)
				return false;
			if (type == AVRO_DOUBLE)
				avro_value_get_double(v, &d);
			else
			{
				avro_value_get_float(v, &f);
				d = f;
			}
			store_datum(r, c, Float8GetDatum(d), false);
			return true;
		case AVRO_STRING:
			if (c->basetype != TEXTOID)
				return false;
			avro_value_get_string(v, &s, &size);
			size = size > 0 ? size - 1 : 0;
			sw_verify_text(r, s, size);
			store_datum(r, c, PointerGetDatum(cstring_to_text_with_len(s, size)), false);
			return true;
		default:
			return false;
	}
}

/*
 * Debezium's VariableScaleDecimal, which its PostgreSQL connector writes
 * for a numeric without a scale in its default decimal.handling.mode: a
 * record of the scale and the unscaled value's bytes, as the number's
 * text; NULL if the record is not one.
 */
static char *
variable_scale_decimal(avro_value_t *v, SchemaNode *node)
{
	avro_value_t scale;
	avro_value_t value;
	size_t		index;
	int32		s;
	const void *buf;
	size_t		size;

	if (node == NULL || node->name == NULL ||
		strcmp(node->name, "io.debezium.data.VariableScaleDecimal") != 0 ||
		avro_value_get_by_name(v, "scale", &scale, &index) != 0 ||
		avro_value_get_by_name(v, "value", &value, &index) != 0 ||
		avro_value_get_type(&scale) != AVRO_INT32 ||
		avro_value_get_type(&value) != AVRO_BYTES)
		return NULL;
	avro_value_get_int(&scale, &s);
	if (s < 0 || s > NUMERIC_MAX_DISPLAY_SCALE)
		ereport(ERROR,
				(errcode(ERRCODE_NUMERIC_VALUE_OUT_OF_RANGE),
				 errmsg("VariableScaleDecimal of scale %d is out of range", s),
				 errdetail("A numeric's scale is between 0 and %d.", NUMERIC_MAX_DISPLAY_SCALE)));
	avro_value_get_bytes(&value, &buf, &size);
	return decimal_text(buf, size, s, NUMERIC_MAX_PRECISION);
}

/*
 * Fill a column from a field's value: null as NULL; Debezium's
 * VariableScaleDecimal as its number; a record, array or map as JSON;
 * bytes and fixed into bytea as they are; a timestamp into a timestamptz
 * as it is; anything else as text through the column's input function
 * (its errors name the column and the field).
 */
static void
fill_column(DecodeRun *r, DecColumn *c, avro_value_t *value, SchemaNode *node)
{
	avro_value_t v;
	avro_type_t type;
	bool		quote;
	char	   *s;

	resolve_union(r, value, &node, &v);
	type = avro_value_get_type(&v);
	if (type == AVRO_RECORD && !c->is_json &&
		(s = variable_scale_decimal(&v, node)) != NULL)
	{
		store_text(r, c, s);
		return;
	}
	if (type == AVRO_RECORD || type == AVRO_ARRAY || type == AVRO_MAP ||
		(c->is_json && type != AVRO_NULL))
	{
		StringInfoData buf;

		initStringInfo(&buf);
		render_json(r, &buf, &v, node);
		store_text(r, c, buf.data);
		return;
	}
	if (c->is_bytea && (type == AVRO_BYTES || type == AVRO_FIXED) &&
		!(node && node->logical == LT_DECIMAL))
	{
		const void *buf;
		size_t		size;

		if (type == AVRO_BYTES)
			avro_value_get_bytes(&v, &buf, &size);
		else
			avro_value_get_fixed(&v, &buf, &size);
		sw_store_raw(r, c, buf, size);
		return;
	}
	if (c->basetype == TIMESTAMPTZOID && type == AVRO_INT64 && node &&
		(node->logical == LT_TIMESTAMP_MILLIS || node->logical == LT_TIMESTAMP_MICROS))
	{
		int64		i64;

		avro_value_get_long(&v, &i64);
		store_datum(r, c, TimestampTzGetDatum(epoch_usecs(i64, node->logical == LT_TIMESTAMP_MILLIS ? 1000 : 1)),
					false);
		return;
	}
	if (fill_directly(r, c, &v, type, node))
		return;
	s = scalar_text(r, &v, node, &quote);
	store_text(r, c, s);
}

/*
 * Fill the data columns from a record's fields, by name (or option
 * field): a field the writer's schema lacks gives its column's default,
 * and fields no column names are left.  node is the record's, or NULL.
 */
static void
fill_record(DecodeRun *r, avro_value_t *record, SchemaNode *node)
{
	SwDecoder  *d = r->d;

	for (int i = 0; i < d->ndata; i++)
	{
		DecColumn  *c = &d->cols[d->data[i]];
		avro_value_t field;
		size_t		index;

		r->col = c;
		r->field = c->field;
		r->field_len = strlen(c->field);
		if (avro_value_get_by_name(record, c->field, &field, &index) != 0)
			sw_fill_default(r, c);
		else
			fill_column(r, c, &field,
						node && index < (size_t) node->nchildren ? node->children[index] : NULL);
		r->col = NULL;
		r->field = NULL;
	}
}

/* a body being checked before Avro C reads it */
typedef struct BodyCheck
{
	const uint8 *p;
	const uint8 *end;
	const uint8 *start;
	int32		id;
	const char *part;			/* "value" or "key" */
	int64		values;			/* the values Avro C will make, so far */
	int64		most_values;
	bool		quiet;			/* a body that does not match is no error... */
	bool		failed;			/* ... but this, and the walk stops */
} BodyCheck;

/*
 * The body is not what its schema says: where, and why.  Quietly, the
 * check fails and reads no further (each function returns at once).
 */
static void
body_invalid(BodyCheck *b, const char *why)
{
	if (b->quiet)
	{
		b->failed = true;
		b->p = b->end;
		return;
	}
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
			 errmsg("invalid Avro data: the message %s does not match its schema of id %d",
					b->part, b->id),
			 errdetail("At byte %d of the body: %s.", (int) (b->p - b->start), why)));
}

/* a zigzag varint of the body, as Avro C reads one */
static int64
body_long(BodyCheck *b)
{
	uint64		value = 0;

	for (int shift = 0; shift < 70; shift += 7)
	{
		uint8		byte;

		if (b->p >= b->end)
		{
			body_invalid(b, "it ends within a number");
			return 0;
		}
		byte = *b->p++;
		value |= (uint64) (byte & 0x7f) << shift;
		if ((byte & 0x80) == 0)
			return (int64) ((value >> 1) ^ -(value & 1));
	}
	body_invalid(b, "a number is longer than 10 bytes");
	return 0;					/* keep the compiler quiet */
}

/* skip n bytes of the body */
static void
body_skip(BodyCheck *b, int64 n, const char *what)
{
	if (b->failed)
		return;
	if (n < 0)
		body_invalid(b, psprintf("%s has a negative length", what));
	else if (n > b->end - b->p)
		body_invalid(b, psprintf("%s is longer than the rest of the message", what));
	else
		b->p += n;
}

/*
 * A count of items in an array or map block, each of which takes a byte
 * at least (arrays of items that take none are refused with their
 * schema; a map's keys take one): no more than the bytes left.
 */
static int64
body_block(BodyCheck *b, const char *what)
{
	int64		count = body_long(b);

	if (count < 0)
	{
		if (count == PG_INT64_MIN)
		{
			body_invalid(b, psprintf("%s block has a count out of range", what));
			return 0;
		}
		count = -count;
		(void) body_long(b);	/* the block's size in bytes */
	}
	if (count > b->end - b->p)
	{
		body_invalid(b, psprintf("%s block counts more items than the message has bytes", what));
		return 0;
	}
	return count;
}

/*
 * Walk a body as Avro C will read it against its schema, checking the
 * lengths, counts and union branches that Avro C takes on trust (Apache
 * Avro C 1.11.1 writes before its buffer for a negative length).
 */
static void
check_body(BodyCheck *b, avro_schema_t schema)
{
	if (b->failed)
		return;
	if (b->quiet && stack_is_too_deep())
	{
		body_invalid(b, "it nests too deep");
		return;
	}
	check_stack_depth();
	CHECK_FOR_INTERRUPTS();
	if (++b->values > b->most_values)
	{
		body_invalid(b, psprintf("it makes more than " INT64_FORMAT " values", b->most_values));
		return;
	}
	if (is_avro_link(schema))
		schema = avro_schema_link_target(schema);
	switch (avro_typeof(schema))
	{
		case AVRO_NULL:
			break;
		case AVRO_BOOLEAN:
			body_skip(b, 1, "a boolean");
			break;
		case AVRO_INT32:
		case AVRO_INT64:
			(void) body_long(b);
			break;
		case AVRO_ENUM:
			{
				/* (Avro C's avro_schema_enum_get() gives garbage for others) */
				int64		index = body_long(b);

				if (index < 0 || index >= avro_schema_enum_number_of_symbols(schema))
					body_invalid(b, psprintf("an enum's index " INT64_FORMAT " is out of range", index));
				break;
			}
		case AVRO_FLOAT:
			body_skip(b, 4, "a float");
			break;
		case AVRO_DOUBLE:
			body_skip(b, 8, "a double");
			break;
		case AVRO_STRING:
			body_skip(b, body_long(b), "a string");
			break;
		case AVRO_BYTES:
			body_skip(b, body_long(b), "a bytes value");
			break;
		case AVRO_FIXED:
			body_skip(b, avro_schema_fixed_size(schema), "a fixed value");
			break;
		case AVRO_RECORD:
			for (size_t i = 0; i < avro_schema_record_size(schema) && !b->failed; i++)
				check_body(b, avro_schema_record_field_get_by_index(schema, i));
			break;
		case AVRO_ARRAY:
		case AVRO_MAP:
			{
				bool		map = avro_typeof(schema) == AVRO_MAP;
				avro_schema_t child = map ? avro_schema_map_values(schema) :
					avro_schema_array_items(schema);
				int64		count;

				while ((count = body_block(b, map ? "a map" : "an array")) != 0)
					for (int64 i = 0; i < count && !b->failed; i++)
					{
						if (map)
							body_skip(b, body_long(b), "a map's key");
						check_body(b, child);
					}
				break;
			}
		case AVRO_UNION:
			{
				int64		branch = body_long(b);

				if (b->failed)
					break;
				if (branch < 0 || branch >= (int64) avro_schema_union_size(schema))
					body_invalid(b, psprintf("a union's branch " INT64_FORMAT " is out of range", branch));
				else
					check_body(b, avro_schema_union_branch(schema, (int) branch));
				break;
			}
		default:
			body_invalid(b, "its schema has a type Avro C does not read");
	}
}

/* a reader, made once, set to each message in turn */
static avro_reader_t
the_reader(void)
{
	if (reader == NULL)
	{
		reader = avro_reader_memory("", 0);
		if (reader == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_OUT_OF_MEMORY),
					 errmsg("out of memory"),
					 errdetail("Apache Avro C could not make a reader.")));
	}
	return reader;
}

/*
 * Prepare a decoder for format avro: for envelope 'debezium', which of a
 * change event's parts its columns take.
 */
void
sw_avro_prepare(SwDecoder *d)
{
	AvroState  *state = MemoryContextAllocZero(d->cxt, sizeof(AvroState));

	for (int i = 0; i < d->ncols; i++)
	{
		if (d->cols[i].source == SW_COLUMN_BEFORE)
			state->want_before = true;
		if (d->cols[i].source == SW_COLUMN_SOURCE)
			state->want_source = true;
	}
	d->format_state = state;
	(void) the_reader();
}

/*
 * A writer's schema by id: kept here, or fetched by a worker and kept in
 * source_writes.avro_schemas for sessions (retry_errors()); NULL if
 * neither has it.
 */
static SchemaEntry *
find_schema(SwDecoder *d, int32 id)
{
	SchemaKey	key;
	SchemaEntry *e;

	key.serverid = d->serverid;
	key.id = id;
	e = schemas ? hash_search(schemas, &key, HASH_FIND, NULL) : NULL;
	if (e == NULL && d->registry)
	{
		char	   *json = sw_avro_schema_stored(d->serverid, d->registry, id);

		if (json)
		{
			(void) sw_avro_schema_add(d->serverid, id, json, strlen(json));
			e = hash_search(schemas, &key, HASH_FIND, NULL);
		}
	}
	return e;
}

/*
 * Read a message value or key in the Confluent wire format: its writer's
 * schema by id (kept here, or by a worker in source_writes.avro_schemas),
 * and its body into the schema's value, which is returned.
 */
static SchemaEntry *
read_message(DecodeRun *r, const char *data, size_t len)
{
	const char *part = r->in_key ? "key" : "value";
	SchemaEntry *e;
	int32		id;

	r->in_part = true;
	if (data == NULL || len < 5)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("Avro message %s of %zu bytes is shorter than the Confluent wire format's header",
						part, data ? len : 0),
				 errdetail("A message begins with a magic byte 0 and a 4-byte schema id.")));
	if (!sw_avro_wire_id(data, len, &id))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("Avro message %s begins with magic byte %d, not 0", part, (uint8) data[0]),
				 errdetail("A message in the Confluent wire format begins with a magic byte 0 and a 4-byte schema id.")));
	e = find_schema(r->d, id);
	if (e == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("the schema of id %d has not been fetched from the schema registry", id),
				 errdetail("Only the source's Kafka worker fetches schemas, before it decodes their messages.")));
	if (!e->usable)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the schema of id %d in the schema registry cannot be used: %s", id, e->why)));
	e->used = ++uses;

	/* what Avro C would take on trust, first */
	{
		BodyCheck	b = {(const uint8 *) data + 5, (const uint8 *) data + len,
		(const uint8 *) data + 5, id, part, 0, SW_AVRO_MAX_VALUES(len), false, false};

		check_body(&b, e->schema);
	}

	avro_value_reset(&e->value);
	avro_set_error("%s", "");	/* Avro C adds to what it said last */
	avro_reader_memory_set_source(the_reader(), data + 5, (int64) len - 5);
	if (avro_value_read(reader, &e->value) != 0)
		avro_failed(r, psprintf("the message %s does not match its schema of id %d", part, id));
	r->in_part = false;
	return e;
}

/*
 * Decode an Avro message value: its record's fields into the data columns
 * by name (or option field); a field the writer's schema lacks gives its
 * column's default, and fields no column names are left.
 */
void
sw_avro_decode(DecodeRun *r, const char *value, size_t len)
{
	SchemaEntry *e = read_message(r, value, len);

	if (e->root->type != AVRO_RECORD)
	{
		r->in_part = true;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the schema of id %d of the message value is not a record", e->key.id),
				 errdetail("A value's fields fill the table's columns: its writer's schema must be a record.")));
	}
	fill_record(r, &e->value, e->root);
}

/*
 * Decode an upsert message's key of key_format avro into the key columns
 * that are data columns (d->seen marks those it filled): a record by
 * field, another value into the one such column if there is one.  Returns
 * whether the key is a record.
 */
bool
sw_avro_decode_key(DecodeRun *r, const char *key, size_t len)
{
	SwDecoder  *d = r->d;
	SchemaEntry *e = read_message(r, key, len);

	r->in_key = true;
	if (e->root->type != AVRO_RECORD)
	{
		if (d->ndatakey == 1)
		{
			r->col = &d->cols[d->datakey];
			fill_column(r, r->col, &e->value, e->root);
			d->seen[d->datakey] = true;
			r->col = NULL;
		}
		return false;
	}
	for (int k = 0; k < d->nkey; k++)
	{
		DecColumn  *c = &d->cols[d->key[k]];
		avro_value_t field;
		size_t		index;

		if (c->source != SW_COLUMN_DATA)
			continue;
		r->col = c;
		r->field = c->field;
		r->field_len = strlen(c->field);
		if (avro_value_get_by_name(&e->value, c->field, &field, &index) == 0)
		{
			fill_column(r, c, &field,
						index < (size_t) e->root->nchildren ? e->root->children[index] : NULL);
			d->seen[d->key[k]] = true;
		}
		r->col = NULL;
		r->field = NULL;
	}
	return true;
}

/* ---------------------------------------------------------------------
 * Debezium's change events (envelope 'debezium'), records of op, before,
 * after, source, ts_ms (and transaction), by name
 * ---------------------------------------------------------------------
 */

/*
 * The op of a change event's value, as sw_ingest_add() reads it, outside
 * the subtransactions that keep a message's errors, so never an error for
 * what the message holds: the whole body is checked quietly, as
 * read_message() checks it, then the record's fields before "op" are
 * walked again and the op is read.  Its one letter, '?' if it has none
 * that is one letter, '\0' if the value cannot be read here (not in the
 * wire format, its schema unknown or unusable, the body not what its
 * schema says): decoding it says why.  (A body that does not match its
 * schema after the op is no truncate or delete either: a 't' is taken as
 * it comes and a 'd' deletes its key, neither decoded later.)
 */
char
sw_avro_event_op(SwDecoder *d, const char *value, size_t len)
{
	SchemaEntry *e;
	avro_schema_t schema;
	BodyCheck	b = {0};
	int32		id;
	int			op;
	int64		n;

	if (!sw_avro_wire_id(value, len, &id) || (e = find_schema(d, id)) == NULL ||
		!e->usable || !is_avro_record(e->schema))
		return '\0';
	b.p = b.start = (const uint8 *) value + 5;
	b.end = (const uint8 *) value + len;
	b.id = id;
	b.part = "value";
	b.most_values = SW_AVRO_MAX_VALUES(len);
	b.quiet = true;
	check_body(&b, e->schema);
	if (b.failed)
		return '\0';
	op = avro_schema_record_field_get_index(e->schema, "op");
	if (op < 0)
		return '?';
	/* the body matches: to the op again */
	b.p = b.start;
	b.values = 0;
	for (int i = 0; i < op; i++)
		check_body(&b, avro_schema_record_field_get_by_index(e->schema, i));

	schema = avro_schema_record_field_get_by_index(e->schema, op);
	if (is_avro_link(schema))
		schema = avro_schema_link_target(schema);
	if (!b.failed && is_avro_union(schema))
	{
		int64		branch = body_long(&b);

		if (b.failed || branch < 0 || branch >= (int64) avro_schema_union_size(schema))
			return '\0';
		schema = avro_schema_union_branch(schema, (int) branch);
	}
	if (b.failed)
		return '\0';
	if (!is_avro_string(schema))
		return '?';
	n = body_long(&b);
	if (b.failed || n < 0 || n > b.end - b.p)
		return '\0';
	return n == 1 && b.p[0] != '\0' ? (char) b.p[0] : '?';
}

/*
 * A field of an event's record, through its union: false if the record
 * has none of that name.
 */
static bool
event_field(DecodeRun *r, SchemaEntry *e, const char *name, avro_value_t *v,
			SchemaNode **node)
{
	avro_value_t field;
	size_t		index;

	if (avro_value_get_by_name(&e->value, name, &field, &index) != 0)
		return false;
	*node = index < (size_t) e->root->nchildren ? e->root->children[index] : NULL;
	resolve_union(r, &field, node, v);
	return true;
}

/* a part of an event as JSON, for the columns of sources before and source */
static void
event_part_json(DecodeRun *r, SchemaEntry *e, const char *name, SwSpan *span)
{
	avro_value_t v;
	SchemaNode *node;
	StringInfoData buf;

	if (!event_field(r, e, name, &v, &node))
		return;
	span->isnull = avro_value_get_type(&v) == AVRO_NULL;
	initStringInfo(&buf);
	render_json(r, &buf, &v, node);
	span->data = buf.data;
	span->len = buf.len;
}

/*
 * Read a change event into r->env: its op (and its JSON, for an error
 * that names it), the before image and the source as JSON if columns take
 * them, ts_ms as digits, and whether it has an after image, which
 * sw_avro_decode_after() then reads.  It is an error if its schema is not
 * a record.
 */
bool
sw_avro_read_event(DecodeRun *r, const char *value, size_t len)
{
	AvroState  *state = r->d->format_state;
	SchemaEntry *e = read_message(r, value, len);
	SwEnvelope *env = &r->env;
	avro_value_t v;
	SchemaNode *node;

	r->in_part = true;
	if (e->root->type != AVRO_RECORD)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the schema of id %d of the Debezium change event is not a record", e->key.id),
				 errdetail("An event is a record of op, before, after, source and ts_ms.")));
	memset(env, 0, sizeof(SwEnvelope));

	event_part_json(r, e, "op", &env->op_json);
	if (event_field(r, e, "op", &v, &node) && avro_value_get_type(&v) == AVRO_STRING)
	{
		const char *op;
		size_t		size;		/* with its terminating NUL */

		avro_value_get_string(&v, &op, &size);
		if (size == 2 && op[0] != '\0')
			env->op = op[0];
	}
	if (state->want_before)
		event_part_json(r, e, "before", &env->before);
	if (state->want_source)
		event_part_json(r, e, "source", &env->source);
	event_part_json(r, e, "ts_ms", &env->ts_ms);
	if (event_field(r, e, "after", &state->after, &state->after_node))
	{
		env->after.data = "";
		env->after.isnull = avro_value_get_type(&state->after) == AVRO_NULL;
	}
	r->in_part = false;
	return true;
}

/*
 * Fill the data columns from the after image of the change event that
 * sw_avro_read_event() read: a record, by field.
 */
void
sw_avro_decode_after(DecodeRun *r)
{
	AvroState  *state = r->d->format_state;

	if (avro_value_get_type(&state->after) != AVRO_RECORD)
	{
		r->in_part = true;
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_BINARY_REPRESENTATION),
				 errmsg("the after image of the Debezium change event is not a record"),
				 errdetail("Its fields fill the table's columns.")));
	}
	fill_record(r, &state->after, state->after_node);
}
