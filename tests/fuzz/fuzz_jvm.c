/* libFuzzer harness: the JVM reader's decoders of what a JVM's memory
 * holds (ptrace/runtimes/jvm/): UNSIGNED5 numbers, compressed line number
 * tables, class names, Java strings. The first byte chooses the release's
 * excluded byte, the bci asked for and the string's coder. */
#include <stdint.h>
#include <string.h>

#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/threads.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char out[256];
	size_t i = 0;
	uint32_t v;
	int ux, bci, start, line;

	if (size < 1)
		return 0;
	ux = data[0] & 1;
	bci = (data[0] & 0x80) ? -1 : data[0] >> 1;
	data++;
	size--;
	while (i < size && !pt_jvm_u5(data, size, &i, ux, &v))
		;
	if (i > size)
		__builtin_trap();
	line = pt_jvm_line_of(data, size, ux, bci, &start);
	if (line < -1 || start < 0)
		__builtin_trap();
	if (pt_jvm_class_name((const char *)data, size, out, sizeof(out)) >= sizeof(out) ||
	    strlen(out) >= sizeof(out))
		__builtin_trap();
	if (pt_jvm_string_utf8(data, size, ux, out, sizeof(out)) >= (int)sizeof(out) ||
	    strlen(out) >= sizeof(out))
		__builtin_trap();
	return 0;
}
