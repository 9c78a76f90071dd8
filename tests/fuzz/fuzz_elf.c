/* libFuzzer harness: the ELF reader on arbitrary bytes, both as a file image
 * (section headers, .symtab/.dynsym, notes, .gnu_debugdata) and as an image
 * copied from target memory (PT_DYNAMIC -> .dynsym). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/space/elf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_symtab st = { 0 };
	struct pt_elf e;
	char id[81];
	uint8_t *copy;

	/* An aligned private copy, as a mapped file or a memory read would be. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	if (pt_elf_open(&e, copy, size) == 0) {
		pt_elf_build_id(&e, id, sizeof(id));
		pt_elf_add_symbols(&e, &st);
	}
	pt_elf_add_dynamic_symbols(copy, size, 0x7f0000000000ull, 0, &st);
	pt_elf_add_dynamic_symbols(copy, size, 0x1000, 0x1000, &st);
	pt_elf_scan_notes(copy, size, id, sizeof(id));
	if (pt_symtab_finish(&st) == 0)
		for (uint64_t a = 0; a < 0x4000; a += 0x101)
			pt_symtab_lookup(&st, a, NULL);
	pt_symtab_free(&st);
	free(copy);
	return 0;
}
