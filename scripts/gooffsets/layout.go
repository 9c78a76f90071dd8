package main

import (
	"debug/dwarf"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"strings"
)

// binLayout is what one Go binary's DWARF says about its runtime.
type binLayout struct {
	path    string
	file    *elf.File
	data    *dwarf.Data
	types   map[string]dwarf.Offset // named types
	vars    map[string]*dwarf.Entry // package-level variables
	missing []string                // what a column asked for and DWARF lacks
}

func readLayout(path string) (*binLayout, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	d, err := f.DWARF()
	if err != nil {
		return nil, fmt.Errorf("%s: no DWARF (built with -ldflags=-w, or stripped?): %v", path, err)
	}
	b := &binLayout{path: path, file: f, data: d, types: map[string]dwarf.Offset{}, vars: map[string]*dwarf.Entry{}}
	r := d.Reader()
	for {
		e, err := r.Next()
		if err != nil {
			return nil, fmt.Errorf("%s: DWARF: %v", path, err)
		}
		if e == nil {
			break
		}
		name, _ := e.Val(dwarf.AttrName).(string)
		switch e.Tag {
		case dwarf.TagStructType, dwarf.TagTypedef, dwarf.TagBaseType, dwarf.TagPointerType:
			if _, seen := b.types[name]; name != "" && !seen {
				b.types[name] = e.Offset
			}
		case dwarf.TagVariable:
			if strings.Contains(name, ".") && b.vars[name] == nil {
				b.vars[name] = e
			}
		}
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagStructType {
			r.SkipChildren() // locals and members are found through their parents
		}
	}
	return b, nil
}

// typ resolves a named type, through typedefs.
func (b *binLayout) typ(name string) dwarf.Type {
	off, ok := b.types[name]
	if !ok {
		return nil
	}
	t, err := b.data.Type(off)
	if err != nil {
		return nil
	}
	return resolve(t)
}

func resolve(t dwarf.Type) dwarf.Type {
	for {
		td, ok := t.(*dwarf.TypedefType)
		if !ok {
			return t
		}
		t = td.Type
	}
}

// field follows a dotted path of members from a named struct type: its
// offset from the start of the struct and its type, or ok false.
func (b *binLayout) field(strct, path string) (off int64, t dwarf.Type, ok bool) {
	t = b.typ(strct)
	if t == nil {
		return 0, nil, false
	}
	if path == "" {
		return 0, t, true
	}
	for _, name := range strings.Split(path, ".") {
		st, isStruct := resolve(t).(*dwarf.StructType)
		if !isStruct {
			return 0, nil, false
		}
		found := false
		for _, f := range st.Field {
			if f.Name == name {
				off += f.ByteOffset
				t = f.Type
				found = true
				break
			}
		}
		if !found {
			return 0, nil, false
		}
	}
	return off, t, true
}

// offset and size of strct.path, -1 when the release has no such member;
// a missing struct (not merely a member) is worth a word on stderr.
func (b *binLayout) offset(strct, path string) int64 {
	off, _, ok := b.field(strct, path)
	if !ok {
		b.note(strct, path)
		return -1
	}
	return off
}

func (b *binLayout) size(strct, path string) int64 {
	_, t, ok := b.field(strct, path)
	if !ok {
		b.note(strct, path)
		return -1
	}
	return t.Size()
}

func (b *binLayout) note(strct, path string) {
	if b.typ(strct) == nil {
		b.missing = append(b.missing, strct)
	} else {
		b.missing = append(b.missing, strct+"."+path)
	}
}

// varAddr is a package variable's address from its DW_AT_location
// (DW_OP_addr), or 0 when DWARF has no such variable.
func (b *binLayout) varAddr(name string) uint64 {
	e := b.vars[name]
	if e == nil {
		return 0
	}
	loc, _ := e.Val(dwarf.AttrLocation).([]byte)
	if len(loc) != 9 || loc[0] != 0x03 { // DW_OP_addr
		return 0
	}
	return binary.LittleEndian.Uint64(loc[1:])
}

func (b *binLayout) varType(name string) dwarf.Type {
	e := b.vars[name]
	if e == nil {
		return nil
	}
	off, ok := e.Val(dwarf.AttrType).(dwarf.Offset)
	if !ok {
		return nil
	}
	t, err := b.data.Type(off)
	if err != nil {
		return nil
	}
	return t
}

// read reads n bytes of the program's initialised data at a virtual address.
func (b *binLayout) read(addr uint64, n int) ([]byte, error) {
	for _, p := range b.file.Progs {
		if p.Type == elf.PT_LOAD && addr >= p.Vaddr && addr+uint64(n) <= p.Vaddr+p.Filesz {
			buf := make([]byte, n)
			_, err := p.ReadAt(buf, int64(addr-p.Vaddr))
			return buf, err
		}
	}
	return nil, fmt.Errorf("0x%x+%d is not in the file's initialised data", addr, n)
}

// stringArray reads a package variable of type [N]string from the binary:
// the strings the runtime itself holds, to check the source's against.
func (b *binLayout) stringArray(name string) ([]string, error) {
	addr, t := b.varAddr(name), b.varType(name)
	if addr == 0 || t == nil {
		return nil, fmt.Errorf("%s is not in DWARF", name)
	}
	n := int(t.Size() / 16)
	hdrs, err := b.read(addr, n*16)
	if err != nil {
		return nil, err
	}
	out := make([]string, n)
	for i := range out {
		p := binary.LittleEndian.Uint64(hdrs[i*16:])
		l := binary.LittleEndian.Uint64(hdrs[i*16+8:])
		if l == 0 {
			continue
		}
		if l > 1<<12 {
			return nil, fmt.Errorf("%s[%d]: length %d", name, i, l)
		}
		s, err := b.read(p, int(l))
		if err != nil {
			return nil, fmt.Errorf("%s[%d]: %v", name, i, err)
		}
		out[i] = string(s)
	}
	return out, nil
}

// labelList finds, in runtime/pprof's labelMap (what g.labels points to),
// a slice member named list or List (1.24 on, labelMap embeds a LabelSet or a
// label.Set that holds it): its offset and its element's size; -1, -1 when
// labelMap is not a struct (a map[string]string up to 1.23).
func (b *binLayout) labelList() (off, elem int64) {
	st, ok := b.typ("runtime/pprof.labelMap").(*dwarf.StructType)
	if !ok {
		return -1, -1
	}
	var find func(st *dwarf.StructType, base int64, depth int) (int64, int64)
	find = func(st *dwarf.StructType, base int64, depth int) (int64, int64) {
		for _, f := range st.Field {
			inner, ok := resolve(f.Type).(*dwarf.StructType)
			if !ok {
				continue
			}
			if strings.EqualFold(f.Name, "list") && strings.HasPrefix(inner.StructName, "[]") && len(inner.Field) == 3 {
				if p, ok := resolve(inner.Field[0].Type).(*dwarf.PtrType); ok {
					return base + f.ByteOffset, p.Type.Size()
				}
			}
			if depth < 3 {
				if o, e := find(inner, base+f.ByteOffset, depth+1); o >= 0 {
					return o, e
				}
			}
		}
		return -1, -1
	}
	off, elem = find(st, 0, 0)
	if off < 0 {
		b.missing = append(b.missing, "a list in runtime/pprof.labelMap")
	}
	return off, elem
}
