/* The ELF symbol reader and module table, on this very binary (a fixture
 * with .symtab), on libc, and on hostile images. */
#include <elf.h>
#include <errno.h>
#include <unistd.h>

#include "ptrace/space/elf.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/proc/proc.h"
#include "tests/harness.h"

__attribute__((noinline)) int fixture_symbol_target(int x);
__attribute__((noinline)) int fixture_symbol_target(int x)
{
	__asm__ volatile("" : "+r"(x));
	return x * 3 + 1;
}

struct self {
	struct pt_maps *maps;
	struct pt_mem *mem;
	struct pt_modules *mods;
};

static void self_open(struct self *s)
{
	ASSERT_OK(pt_proc_read_maps(getpid(), &s->maps));
	ASSERT_OK(pt_mem_new(&s->mem, getpid(), NULL));
	pt_mem_set_maps(s->mem, s->maps);
	ASSERT_OK(pt_modules_new(&s->mods, getpid(), s->mem, NULL));
}

TEST(symbolize_own_function)
{
	struct self s;
	uint64_t a = (uint64_t)(uintptr_t)&fixture_symbol_target;
	struct pt_module *mod;

	self_open(&s);
	mod = pt_modules_find(s.mods, s.maps, a + 3);
	ASSERT(mod != NULL);
	ASSERT(mod->elf_ok);
	ASSERT(mod->eh_hdr != 0 && mod->eh_count > 10);
	ASSERT_EQ(strlen(mod->build_id), 40);
	ASSERT_STR_EQ(pt_module_symbol(s.mods, mod, a + 3), "fixture_symbol_target");
	ASSERT_STR_EQ(mod->sym_source, "file");
	pt_modules_free(s.mods);
	pt_mem_free(s.mem);
	pt_maps_free(s.maps);
}

TEST(symbolize_libc_exported_and_local)
{
	struct self s;
	uint64_t a = (uint64_t)(uintptr_t)&getpid;
	struct pt_module *mod;
	const char *name;

	self_open(&s);
	mod = pt_modules_find(s.mods, s.maps, a);
	ASSERT(mod != NULL);
	ASSERT(strstr(mod->path, "libc.so"));
	name = pt_module_symbol(s.mods, mod, a);
	ASSERT(name && strstr(name, "getpid"));
	/* Debian's libc has only .dynsym; with libc6-dbg the debug file found by
	 * build-id supplies the local symbols. */
	if (strcmp(mod->sym_source, "debug"))
		SKIP("no debug file for libc build-id %s (install libc6-dbg)", mod->build_id);
	pt_modules_free(s.mods);
	pt_mem_free(s.mem);
	pt_maps_free(s.maps);
}

TEST(symtab_respects_sizes)
{
	struct pt_symtab st = { 0 };
	uint64_t start;
	/* A fake .symtab: f at 0x1000 (size 0x10), g at 0x1100 (size 0x20),
	 * alias G (weak) at 0x1100. */
	struct {
		Elf64_Ehdr eh;
		Elf64_Shdr sh[4];
		Elf64_Sym sym[4];
		char str[16];
		char shstr[32];
	} img;

	memset(&img, 0, sizeof(img));
	memcpy(img.eh.e_ident, ELFMAG, SELFMAG);
	img.eh.e_ident[EI_CLASS] = ELFCLASS64;
	img.eh.e_ident[EI_DATA] = ELFDATA2LSB;
	img.eh.e_shoff = offsetof(__typeof__(img), sh);
	img.eh.e_shentsize = sizeof(Elf64_Shdr);
	img.eh.e_shnum = 4;
	img.eh.e_shstrndx = 3;
	memcpy(img.shstr, "\0.symtab\0.strtab\0.shstrtab", 26);
	img.sh[1] = (Elf64_Shdr){ .sh_name = 1, .sh_type = SHT_SYMTAB, .sh_offset = offsetof(__typeof__(img), sym),
				  .sh_size = sizeof(img.sym), .sh_link = 2, .sh_entsize = sizeof(Elf64_Sym) };
	img.sh[2] = (Elf64_Shdr){ .sh_name = 9, .sh_type = SHT_STRTAB, .sh_offset = offsetof(__typeof__(img), str),
				  .sh_size = sizeof(img.str) };
	img.sh[3] = (Elf64_Shdr){ .sh_name = 17, .sh_type = SHT_STRTAB, .sh_offset = offsetof(__typeof__(img), shstr),
				  .sh_size = sizeof(img.shstr) };
	memcpy(img.str, "\0f\0g\0G\0", 7);
	img.sym[1] = (Elf64_Sym){ .st_name = 1, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = 1,
				  .st_value = 0x1000, .st_size = 0x10 };
	img.sym[2] = (Elf64_Sym){ .st_name = 5, .st_info = ELF64_ST_INFO(STB_WEAK, STT_FUNC), .st_shndx = 1,
				  .st_value = 0x1100, .st_size = 0x20 };
	img.sym[3] = (Elf64_Sym){ .st_name = 3, .st_info = ELF64_ST_INFO(STB_GLOBAL, STT_FUNC), .st_shndx = 1,
				  .st_value = 0x1100, .st_size = 0x20 };
	struct pt_elf e;

	ASSERT_OK(pt_elf_open(&e, &img, sizeof(img)));
	ASSERT_EQ(pt_elf_add_symbols(&e, &st), 3);
	ASSERT_OK(pt_symtab_finish(&st));
	ASSERT_STR_EQ(pt_symtab_lookup(&st, 0x1000, &start), "f");
	ASSERT_STR_EQ(pt_symtab_lookup(&st, 0x100f, NULL), "f");
	/* Past f's size: never stretched to the nearest symbol. */
	ASSERT(pt_symtab_lookup(&st, 0x1010, NULL) == NULL);
	ASSERT(pt_symtab_lookup(&st, 0x10ff, NULL) == NULL);
	/* The global alias wins over the weak one. */
	ASSERT_STR_EQ(pt_symtab_lookup(&st, 0x111f, &start), "g");
	ASSERT_U64_EQ(start, 0x1100);
	ASSERT(pt_symtab_lookup(&st, 0x1120, NULL) == NULL);
	ASSERT(pt_symtab_lookup(&st, 0xfff, NULL) == NULL);
	pt_symtab_free(&st);

	/* Hostile variants: names out of range, section table out of bounds. */
	img.sym[1].st_name = 9999;
	img.sh[2].sh_size = 3;   /* "g" and "G" now point past the table */
	ASSERT_OK(pt_elf_open(&e, &img, sizeof(img)));
	ASSERT_EQ(pt_elf_add_symbols(&e, &st), 0);
	pt_symtab_free(&st);
	img.eh.e_shoff = 1u << 30;
	ASSERT_OK(pt_elf_open(&e, &img, sizeof(img)));
	ASSERT_EQ(pt_elf_add_symbols(&e, &st), 0);
	pt_symtab_free(&st);
}

TEST(elf_rejects_garbage)
{
	uint8_t junk[256];
	struct pt_elf e;
	struct pt_symtab st = { 0 };
	char id[81];

	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 37 + 11);
	ASSERT_EQ(pt_elf_open(&e, junk, sizeof(junk)), -ENOEXEC);
	ASSERT_EQ(pt_elf_open(&e, junk, 4), -ENOEXEC);
	/* A valid header whose program headers point far away. */
	memset(junk, 0, sizeof(junk));
	memcpy(junk, ELFMAG, SELFMAG);
	junk[EI_CLASS] = ELFCLASS64;
	junk[EI_DATA] = ELFDATA2LSB;
	((Elf64_Ehdr *)junk)->e_phoff = 0xffffffffffff0000ull;
	((Elf64_Ehdr *)junk)->e_phnum = 100;
	((Elf64_Ehdr *)junk)->e_phentsize = sizeof(Elf64_Phdr);
	ASSERT_OK(pt_elf_open(&e, junk, sizeof(junk)));
	ASSERT_EQ(pt_elf_build_id(&e, id, sizeof(id)), -ENOENT);
	ASSERT_EQ(pt_elf_add_symbols(&e, &st), 0);
	ASSERT_EQ(pt_elf_add_dynamic_symbols(junk, sizeof(junk), 0x1000, 0, &st), -ENOEXEC);
	pt_symtab_free(&st);
}

TEST(minidebuginfo_symbols)
{
	char self[4096], path[4200];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	struct pt_symtab st = { 0 };
	struct pt_elf e;
	const uint8_t *img;
	FILE *f;
	long len;
	uint8_t *buf;
	int found_hot = 0, found_level = 0;

	ASSERT(n > 0);
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(path, sizeof(path), "%s/fixtures/busy-minidebug", self);
	f = fopen(path, "rb");
	if (!f)
		FAIL_AT("%s not built (make fixtures)", path);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	buf = malloc((size_t)len);
	ASSERT_EQ(fread(buf, 1, (size_t)len, f), len);
	fclose(f);
	img = buf;
	ASSERT_OK(pt_elf_open(&e, img, (size_t)len));
	ASSERT(pt_elf_add_symbols(&e, &st) > 0);
	ASSERT_OK(pt_symtab_finish(&st));
	for (size_t i = 0; i < st.n; i++) {
		found_hot |= !strcmp(st.names + st.v[i].name, "hot_a");
		found_level |= !strcmp(st.names + st.v[i].name, "level3");
	}
	ASSERT(found_hot && found_level);
	pt_symtab_free(&st);
	free(buf);
}
