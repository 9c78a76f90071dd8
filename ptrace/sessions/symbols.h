/* The symbol lookup session (see symbols.c). Sampler thread. */
#ifndef PT_SESSION_SYMBOLS_H
#define PT_SESSION_SYMBOLS_H

#include "ptrace/sampler/session.h"

/* Symbol lookup of addrs. Result: names. Needs no attach. */
extern const struct pt_session_kind pt_kind_symbols;

#endif
