/*-------------------------------------------------------------------------
 *
 * options_int.h
 *		  What the two files of src/options share: the value parsers of
 *		  option_table.c that source_table.c reads options with
 *
 * See doc/internals.md, "Source files".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/options/options_int.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_OPTIONS_INT_H
#define SW_OPTIONS_INT_H

#include "options/options.h"

/* default webhook body limit */
#define SW_DEFAULT_MAX_BODY (1024 * 1024)

/* option_table.c */
extern const char *const sw_envelopes[];
extern const char *const sw_key_formats[];
extern void sw_check_http_token(const char *option, const char *value);
extern List *sw_parse_key_list(const char *option, const char *value);
extern bool sw_parse_interval_ms(const char *value, int64 *ms);
extern int	sw_parse_byte_size(const char *option, const char *value);
extern int	sw_parse_workers(const char *option, const char *value);

#endif							/* SW_OPTIONS_INT_H */
