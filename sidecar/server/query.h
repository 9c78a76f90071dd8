/* Go's net/http/pprof parameter rules, in one place: query decoding, CPU
 * seconds, debug, hz, symbolz address lists, and our pid= rule. Pure
 * functions of their input (sc_query_pid also reads /proc): any thread. */
#ifndef SC_QUERY_H
#define SC_QUERY_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Value of `key` in a raw query string, percent-decoded ('+' is a space)
 * into out. Returns 1 if present, 0 if absent, -E2BIG if the value does not
 * fit in len bytes with its NUL, -EINVAL if it decodes to a NUL. The first
 * occurrence wins, as Go's url.Values.Get. */
int sc_query_get(const char *query, const char *key, char *out, size_t len);

/* Go's rules for /debug/pprof/profile?seconds= (strconv.ParseInt): missing,
 * unparsable or <= 0 gives 30; larger than INT32_MAX gives INT32_MAX.
 * Returns the seconds (never an error). */
int sc_parse_profile_seconds(const char *query);

/* ?seconds= of a named profile (Go's delta rule, strconv.ParseInt): 0 when
 * absent, the value when a positive integer (capped at INT32_MAX), -EINVAL
 * otherwise ("invalid value for \"seconds\" - must be a positive integer"). */
int sc_query_delta_seconds(const char *query);

/* ?seconds= of the trace (Go's strconv.ParseFloat): missing, unparsable or
 * <= 0 gives 1. Returns the seconds. */
double sc_query_trace_seconds(const char *query);

/* Go's strconv.Atoi for ?debug=: the value, or 0 when it is missing or
 * unparsable (Go ignores the parse error). Never an error. */
int64_t sc_query_debug(const char *query);

/* ?format= of a profile with stacks, for people without Go: */
enum sc_format {
	SC_FORMAT_PPROF = 0,     /* absent: Go's own (pprof, or debug=N's text) */
	SC_FORMAT_FLAMEGRAPH,    /* one self-contained interactive HTML page */
	SC_FORMAT_SPEEDSCOPE,    /* speedscope's JSON file format */
	SC_FORMAT_COLLAPSED,     /* folded stacks, "a;b;c N" lines */
};
#define SC_FORMATS "flamegraph, speedscope or collapsed"
/* 0 and *out (SC_FORMAT_PPROF when absent), or -1 for any other value. A
 * format asked for wins over debug= (sc_query_debug says 0 then). */
int sc_query_format(const char *query, enum sc_format *out);

/* ?hz=, our extension of the CPU profile: an integer 1..1000, or `dflt`
 * when absent. Returns 0 with *out set, or -EINVAL for any other value. */
int sc_query_hz(const char *query, int dflt, int *out);

/* ?pid=, which every endpoint takes to look at another process of the pod:
 * `dflt` when absent. Returns 0 with *out set, or a negative errno with a
 * one-line message for the client in msg: -EINVAL (answer 400: not a
 * positive integer, podprof itself, a kernel thread) or -ESRCH (answer
 * 404: no such live process). Reads /proc/<pid>/stat. */
int sc_query_pid(const char *query, pid_t dflt, pid_t *out, char *msg, size_t len);

/* Parses pprof's symbolz request ("0x401000+0x420000", each word as Go's
 * strconv.ParseUint(word, 0, 64)). Returns the count of addresses stored
 * in out, -E2BIG past max, or -EINVAL on a malformed word. */
int sc_parse_symbol_addrs(const char *s, size_t len, uint64_t *out, size_t max);

#endif
