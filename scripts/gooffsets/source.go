package main

import (
	"fmt"
	"go/ast"
	"go/constant"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// runtimeSource is what a release's runtime package says in its source: its
// integer constants and its [...]string tables keyed by them.
type runtimeSource struct {
	dir    string
	consts map[string]int64
	order  map[string][]string // the constants of a type, by value ("waitReason")
	arrays map[string]*ast.CompositeLit
}

// readSource parses GOROOT/src/runtime (not its tests; files for other
// systems too: the tables we want are in runtime2.go and traceback.go).
func readSource(goroot string) (*runtimeSource, error) {
	dir := filepath.Join(goroot, "src", "runtime")
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("%s: no Go sources (%v)", dir, err)
	}
	s := &runtimeSource{dir: dir, consts: map[string]int64{}, order: map[string][]string{},
		arrays: map[string]*ast.CompositeLit{}}
	fset := token.NewFileSet()
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			switch gd.Tok {
			case token.CONST:
				s.constBlock(gd)
			case token.VAR:
				for _, spec := range gd.Specs {
					vs := spec.(*ast.ValueSpec)
					if len(vs.Names) == 1 && len(vs.Values) == 1 {
						if cl, ok := vs.Values[0].(*ast.CompositeLit); ok {
							s.arrays[vs.Names[0].Name] = cl
						}
					}
				}
			}
		}
	}
	return s, nil
}

// constBlock evaluates a const block's integer constants as the compiler
// would: iota, implicit repetition of the last expression and type, and
// arithmetic on constants seen before.
func (s *runtimeSource) constBlock(gd *ast.GenDecl) {
	var last []ast.Expr
	var lastType string
	for iota, spec := range gd.Specs {
		vs := spec.(*ast.ValueSpec)
		if len(vs.Values) > 0 {
			last = vs.Values
			lastType = ""
			if id, ok := vs.Type.(*ast.Ident); ok {
				lastType = id.Name
			}
		}
		for i, n := range vs.Names {
			if i >= len(last) || n.Name == "_" {
				continue
			}
			v, ok := s.eval(last[i], int64(iota))
			if !ok {
				continue
			}
			s.consts[n.Name] = v
			if lastType != "" {
				s.order[lastType] = append(s.order[lastType], n.Name)
			}
		}
	}
}

func (s *runtimeSource) eval(e ast.Expr, iota int64) (int64, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind != token.INT {
			return 0, false
		}
		v, err := strconv.ParseInt(e.Value, 0, 64)
		return v, err == nil
	case *ast.Ident:
		if e.Name == "iota" {
			return iota, true
		}
		v, ok := s.consts[e.Name]
		return v, ok
	case *ast.ParenExpr:
		return s.eval(e.X, iota)
	case *ast.BinaryExpr:
		x, ok1 := s.eval(e.X, iota)
		y, ok2 := s.eval(e.Y, iota)
		if !ok1 || !ok2 {
			return 0, false
		}
		if e.Op == token.SHL || e.Op == token.SHR {
			r := constant.Shift(constant.MakeInt64(x), e.Op, uint(y))
			return constant.Int64Val(r)
		}
		r := constant.BinaryOp(constant.MakeInt64(x), e.Op, constant.MakeInt64(y))
		if r.Kind() != constant.Int {
			return 0, false
		}
		return constant.Int64Val(r)
	}
	return 0, false
}

// stringTable is a [...]string{ConstName: "text", ...} variable as a slice
// indexed by the constants' values ("" where the source names none).
func (s *runtimeSource) stringTable(name string) ([]string, error) {
	cl := s.arrays[name]
	if cl == nil {
		return nil, fmt.Errorf("%s: no var %s", s.dir, name)
	}
	var out []string
	for i, elt := range cl.Elts {
		idx, val := int64(i), elt
		if kv, ok := elt.(*ast.KeyValueExpr); ok {
			v, ok := s.eval(kv.Key, 0)
			if !ok {
				return nil, fmt.Errorf("%s: %s: cannot evaluate key %v", s.dir, name, kv.Key)
			}
			idx, val = v, kv.Value
		}
		lit, ok := val.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return nil, fmt.Errorf("%s: %s[%d] is not a string literal", s.dir, name, idx)
		}
		str, err := strconv.Unquote(lit.Value)
		if err != nil {
			return nil, err
		}
		for int64(len(out)) <= idx {
			out = append(out, "")
		}
		out[idx] = str
	}
	return out, nil
}

// version is the release named by GOROOT/VERSION ("go1.26.10").
func goRootVersion(goroot string) string {
	b, err := os.ReadFile(filepath.Join(goroot, "VERSION"))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}
