/*-------------------------------------------------------------------------
 *
 * options.h
 *		  What the two files that check options share: fdw_options.c (the
 *		  options of servers, user mappings, source tables and columns) and
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

/* rdkafka_allowlist.c */
extern void sw_rdkafka_check_property(DefElem *def, Oid context);
extern bool sw_rdkafka_may_be_secret(const char *name);

#endif							/* SW_FDW_PRIVATE_OPTIONS_H */
