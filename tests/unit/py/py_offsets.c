/* Prints, from one CPython release's own headers (3.11 or 3.12, built with
 * Py_BUILD_CORE for the internal ones), every offset ptrace/runtimes/python/interp.c's
 * layout table holds for that release, one "name value" per line. The unit
 * test python_layout_matches_headers compares them with the table, so a
 * wrong number fails a test. Built by the Makefile where the headers are
 * installed (py311-offsets, py312-offsets); not part of podprof. */
#define Py_BUILD_CORE 1
#include <Python.h>
#include <internal/pycore_frame.h>
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#define P(name, v) printf("%s %zu\n", name, (size_t)(v))

int main(void)
{
	P("version", PY_VERSION_HEX);
	P("rt_interp_head", offsetof(_PyRuntimeState, interpreters.head));
	P("is_next", offsetof(PyInterpreterState, next));
	P("is_threads_head", offsetof(PyInterpreterState, threads.head));
	P("ts_next", offsetof(PyThreadState, next));
	P("ts_native_tid", offsetof(PyThreadState, native_thread_id));
	P("ts_cframe", offsetof(PyThreadState, cframe));
	P("ts_chunk", offsetof(PyThreadState, datastack_chunk));
	P("ts_top", offsetof(PyThreadState, datastack_top));
	P("ts_limit", offsetof(PyThreadState, datastack_limit));
	P("ts_size", sizeof(PyThreadState));
	P("cf_current_frame", offsetof(_PyCFrame, current_frame));
	P("cf_previous", offsetof(_PyCFrame, previous));
	P("fr_code", offsetof(_PyInterpreterFrame, f_code));
	P("fr_previous", offsetof(_PyInterpreterFrame, previous));
	P("fr_prev_instr", offsetof(_PyInterpreterFrame, prev_instr));
#if PY_VERSION_HEX < 0x030c0000
	P("fr_is_entry", offsetof(_PyInterpreterFrame, is_entry));
	P("owner_cstack", 0xff);   /* none: 3.11 marks entries by is_entry */
#else
	P("fr_is_entry", 0);   /* none: 3.12 marks entries by a frame on the C stack */
	P("owner_cstack", FRAME_OWNED_BY_CSTACK);
#endif
	P("fr_owner", offsetof(_PyInterpreterFrame, owner));
	P("fr_size", offsetof(_PyInterpreterFrame, localsplus));
	P("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("co_filename", offsetof(PyCodeObject, co_filename));
	P("co_name", offsetof(PyCodeObject, co_name));
	P("co_qualname", offsetof(PyCodeObject, co_qualname));
	P("co_linetable", offsetof(PyCodeObject, co_linetable));
	P("co_code", offsetof(PyCodeObject, co_code_adaptive));
	P("str_length", offsetof(PyASCIIObject, length));
	P("str_state", offsetof(PyASCIIObject, state));
	P("str_ascii_data", sizeof(PyASCIIObject));
	P("str_compact_data", sizeof(PyCompactUnicodeObject));
	P("bytes_size", offsetof(PyVarObject, ob_size));
	P("bytes_data", offsetof(PyBytesObject, ob_sval));
	P("chunk_data", offsetof(_PyStackChunk, data));
	return 0;
}
