/* Prints, from one CPython release's own headers (3.13, 3.14 or 3.15,
 * built with Py_BUILD_CORE for the internal ones), one "name value" per
 * line: where its _Py_DebugOffsets keeps each value podprof reads
 * ("table:<field>", the offset in the table), the table's size, and what
 * those values are in that release ("<layout field> <offset>": where its
 * structures keep what podprof reads, and the facts podprof takes from
 * outside the table). The unit tests python_tables_match_headers and
 * python_tables_of_real_interpreters hold ptrace/runtimes/python/offsets.c
 * to them. Built by the Makefile where the headers are (py313-debugoffsets
 * ...); not part of podprof. */
#define Py_BUILD_CORE 1
#include <Python.h>
#if PY_VERSION_HEX >= 0x030e0000
#include <internal/pycore_debug_offsets.h>
#include <internal/pycore_interpframe_structs.h>
#include <internal/pycore_tstate.h>
#else
#include <internal/pycore_frame.h>
#endif
#include <internal/pycore_interp.h>
#include <internal/pycore_runtime.h>
#include <stddef.h>
#include <stdio.h>

#define P(name, v) printf("%s %zu\n", name, (size_t)(v))
#define T(field) P("table:" #field, offsetof(_Py_DebugOffsets, field))

int main(void)
{
	P("version", PY_VERSION_HEX);
	P("table_size", sizeof(_Py_DebugOffsets));
	T(runtime_state.size);
	T(runtime_state.interpreters_head);
	T(interpreter_state.size);
	T(interpreter_state.next);
	T(interpreter_state.threads_head);
	T(thread_state.size);
	T(thread_state.next);
	T(thread_state.current_frame);
#if PY_VERSION_HEX >= 0x030f0000
	T(thread_state.base_frame);
#endif
	T(thread_state.native_thread_id);
	T(thread_state.datastack_chunk);
	T(interpreter_frame.size);
	T(interpreter_frame.previous);
	T(interpreter_frame.executable);
	T(interpreter_frame.instr_ptr);
	T(interpreter_frame.owner);
	T(code_object.size);
	T(code_object.filename);
	T(code_object.name);
	T(code_object.qualname);
	T(code_object.linetable);
	T(code_object.firstlineno);
	T(code_object.co_code_adaptive);
	T(pyobject.ob_type);
	T(bytes_object.size);
	T(bytes_object.ob_size);
	T(bytes_object.ob_sval);
	T(unicode_object.size);
	T(unicode_object.state);
	T(unicode_object.length);
	T(unicode_object.asciiobject_size);
#if PY_VERSION_HEX >= 0x030f0000
	T(unicode_object.compactunicodeobject_size);
#endif
	/* The structures themselves. */
	P("rt_interp_head", offsetof(_PyRuntimeState, interpreters.head));
	P("is_next", offsetof(PyInterpreterState, next));
	P("is_threads_head", offsetof(PyInterpreterState, threads.head));
	P("ts_next", offsetof(PyThreadState, next));
	P("ts_native_tid", offsetof(PyThreadState, native_thread_id));
	P("ts_current_frame", offsetof(PyThreadState, current_frame));
#if PY_VERSION_HEX >= 0x030f0000
	P("ts_base_frame", offsetof(PyThreadState, base_frame));
#else
	P("ts_base_frame", 0);   /* none before 3.15 */
#endif
	P("ts_chunk", offsetof(PyThreadState, datastack_chunk));
	P("ts_top", offsetof(PyThreadState, datastack_top));
	P("ts_limit", offsetof(PyThreadState, datastack_limit));
	P("fr_code", offsetof(_PyInterpreterFrame, f_executable));
	P("fr_previous", offsetof(_PyInterpreterFrame, previous));
	P("fr_prev_instr", offsetof(_PyInterpreterFrame, instr_ptr));
	P("fr_owner", offsetof(_PyInterpreterFrame, owner));
	/* The owner of the frame each eval call puts on the C stack, and the
	 * largest owner value: podprof takes any owner from the first as a
	 * marker, so every Python function's frame's must be below it. */
#if PY_VERSION_HEX >= 0x030e0000
	P("owner_cstack", FRAME_OWNED_BY_INTERPRETER);
#else
	P("owner_cstack", FRAME_OWNED_BY_CSTACK);
#endif
	P("owner_below", FRAME_OWNED_BY_FRAME_OBJECT + 1);
	P("co_firstlineno", offsetof(PyCodeObject, co_firstlineno));
	P("co_filename", offsetof(PyCodeObject, co_filename));
	P("co_name", offsetof(PyCodeObject, co_name));
	P("co_qualname", offsetof(PyCodeObject, co_qualname));
	P("co_linetable", offsetof(PyCodeObject, co_linetable));
	P("co_code", offsetof(PyCodeObject, co_code_adaptive));
	P("ob_type", offsetof(PyObject, ob_type));
	P("str_length", offsetof(PyASCIIObject, length));
	P("str_state", offsetof(PyASCIIObject, state));
	P("str_ascii_data", sizeof(PyASCIIObject));
	P("str_compact_data", sizeof(PyCompactUnicodeObject));
	P("bytes_size", offsetof(PyBytesObject, ob_base.ob_size));
	P("bytes_data", offsetof(PyBytesObject, ob_sval));
	P("chunk_data", offsetof(_PyStackChunk, data));
	return 0;
}
