/*-------------------------------------------------------------------------
 *
 * options.h
 *		  What the files that check options share: fdw_options.c (the
 *		  options of servers, user mappings, source tables and columns),
 *		  source_table.c (what a source table's options say) and
 *		  rdkafka_allowlist.c (the librdkafka properties they may set)
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/fdw/options.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_FDW_PRIVATE_OPTIONS_H
#define SW_FDW_PRIVATE_OPTIONS_H

#include "lib/stringinfo.h"
#include "nodes/parsenodes.h"

/* servers and user mappings set librdkafka properties under this prefix */
#define RDKAFKA_PREFIX		"rdkafka."

/* options valid for both kinds of sources */
#define SW_ANY_KIND		(SW_KIND_KAFKA | SW_KIND_WEBHOOK)

/* default webhook body limit */
#define SW_DEFAULT_MAX_BODY (1024 * 1024)

/* whether value is one of a NULL-terminated list */
static inline bool
in_list(const char *const *list, const char *value)
{
	for (; *list; list++)
		if (strcmp(*list, value) == 0)
			return true;
	return false;
}

/* the list joined with ", ", for a hint */
static inline char *
join_list(const char *const *list)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (; *list; list++)
		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", *list);
	return buf.data;
}

/* an option whose value must not be empty (an SwValueCheck) */
static inline void
check_nonempty(const char *option, const char *value)
{
	if (value[0] == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
				 errmsg("option \"%s\" must not be empty", option),
				 errhint("Give a value, or drop the option.")));
}

/* fdw_options.c */
extern const char *const sw_envelopes[];
extern void sw_check_option(DefElem *def, Oid context, int kinds);
extern void sw_check_http_token(const char *option, const char *value);
extern List *sw_parse_key_list(const char *option, const char *value);
extern bool sw_parse_interval_ms(const char *value, int64 *ms);
extern int	sw_parse_byte_size(const char *option, const char *value);
extern int	sw_parse_workers(const char *option, const char *value);

/* rdkafka_allowlist.c */
extern void sw_rdkafka_check_property(DefElem *def, Oid context);
extern bool sw_rdkafka_may_be_secret(const char *name);

#endif							/* SW_FDW_PRIVATE_OPTIONS_H */
