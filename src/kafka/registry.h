/*-------------------------------------------------------------------------
 *
 * registry.h
 *		  The Kafka worker's schema registry client (registry.c)
 *
 * See doc/internals.md, "Workers and processes".
 *
 * Copyright (c) 2026, source_writes developers
 *
 * IDENTIFICATION
 *		  src/kafka/registry.h
 *
 *-------------------------------------------------------------------------
 */
#ifndef SW_KAFKA_REGISTRY_H
#define SW_KAFKA_REGISTRY_H

#include "foreign/foreign.h"
#include "nodes/pg_list.h"

extern void sw_registry_init(ForeignServer *server, List *mapping);
extern bool sw_registry_missing(int n, const char *const *values, const size_t *lens);
extern bool sw_registry_resolve(int n, const char *const *values, const size_t *lens,
								const char **state, char **error);

#endif							/* SW_KAFKA_REGISTRY_H */
