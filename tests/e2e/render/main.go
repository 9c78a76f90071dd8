// Command render renders a Helm chart the way `helm template` does, for the
// features podprof's chart uses, without helm (Debian ships none): Go's
// text/template with the sprig functions (helm's own engine), helm's own
// functions (include, tpl, required, toYaml, fromYaml, toJson, fromJson,
// lookup), values.yaml merged with -f files and --set, .Values .Release .Chart
// .Template .Capabilities, missingkey=zero and "<no value>" removed as helm
// does, and values checked against values.schema.json first (the JSON Schema
// keywords the chart's schema uses; any other keyword is an error, so the
// schema cannot outgrow what is checked here).
//
// Build (GOPATH mode, Debian's Go sources):
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o render ./tests/e2e/render
//
// Usage:
//
//	render [-f values.yaml]... [--set a.b=c]... [--name RELEASE] [--namespace NS] [--notes] [--json] CHART_DIR
//
// Prints the manifests ("---\n# Source: CHART/templates/FILE\n..." as helm
// template does), or with --notes the rendered NOTES.txt, or with --json each
// manifest as one line of JSON (for the tests' checks of its structure). Exits 1 with helm's
// messages on a schema violation, a required value, fail, or a template error.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"github.com/Masterminds/sprig"
	"github.com/ghodss/yaml"
)

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(s string) error { *m = append(*m, s); return nil }

// Chart is helm's chart.Metadata, the fields templates read as .Chart.X.
type Chart struct {
	APIVersion  string            `json:"apiVersion"`
	Name        string            `json:"name"`
	Version     string            `json:"version"`
	AppVersion  string            `json:"appVersion"`
	Description string            `json:"description"`
	Type        string            `json:"type"`
	Keywords    []string          `json:"keywords"`
	Home        string            `json:"home"`
	KubeVersion string            `json:"kubeVersion"`
	Annotations map[string]string `json:"annotations"`
}

func main() {
	var valueFiles, sets multiFlag
	name := flag.String("name", "release-name", "release name (.Release.Name)")
	namespace := flag.String("namespace", "default", "release namespace (.Release.Namespace)")
	notes := flag.Bool("notes", false, "print the rendered NOTES.txt instead of the manifests")
	asJSON := flag.Bool("json", false, "print each manifest as one line of JSON")
	flag.Var(&valueFiles, "f", "values file (repeatable; later ones win)")
	flag.Var(&sets, "set", "KEY=VALUE with dotted keys (repeatable; after -f files)")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: render [-f values.yaml]... [--set k=v]... [--name N] [--namespace NS] [--notes] [--json] CHART_DIR")
		os.Exit(2)
	}
	out, err := run(flag.Arg(0), valueFiles, sets, *name, *namespace, *notes)
	if err == nil && *asJSON && !*notes {
		out, err = jsonLines(out)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
	os.Stdout.WriteString(out)
}

func run(dir string, valueFiles, sets []string, name, namespace string, notes bool) (string, error) {
	var chart Chart
	if err := readYAML(filepath.Join(dir, "Chart.yaml"), &chart); err != nil {
		return "", err
	}
	if chart.Name == "" || chart.Version == "" {
		return "", fmt.Errorf("Chart.yaml: name and version are required")
	}
	values := map[string]interface{}{}
	if err := readYAML(filepath.Join(dir, "values.yaml"), &values); err != nil {
		return "", err
	}
	for _, f := range valueFiles {
		user := map[string]interface{}{}
		if err := readYAML(f, &user); err != nil {
			return "", err
		}
		values = coalesce(values, user)
	}
	for _, s := range sets {
		user, err := parseSet(s)
		if err != nil {
			return "", err
		}
		values = coalesce(values, user)
	}
	values = dropNulls(values)
	if err := validateValues(dir, chart.Name, values); err != nil {
		return "", err
	}
	top := map[string]interface{}{
		"Values": values,
		"Chart":  chart,
		"Release": map[string]interface{}{
			"Name": name, "Namespace": namespace, "Service": "Helm",
			"IsInstall": true, "IsUpgrade": false, "Revision": 1,
		},
		"Capabilities": map[string]interface{}{
			"KubeVersion": map[string]interface{}{"Version": "v1.30.0", "Major": "1", "Minor": "30", "GitVersion": "v1.30.0"},
			"HelmVersion": map[string]interface{}{"Version": "v3.15.0"},
		},
		"Files": map[string]interface{}{},
	}
	return render(dir, chart.Name, top, notes)
}

// jsonLines turns rendered manifests into one line of JSON each (comments
// and empty documents dropped).
func jsonLines(manifests string) (string, error) {
	var out strings.Builder
	for _, doc := range strings.Split("\n"+manifests, "\n---") {
		j, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return "", err
		}
		if s := string(j); s != "null" && s != "" {
			out.WriteString(s + "\n")
		}
	}
	return out.String(), nil
}

func readYAML(file string, v interface{}) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %v", file, err)
	}
	return nil
}

// coalesce merges user values over chart defaults as helm does: maps merge
// key by key, anything else replaces; a null keeps its key until dropNulls
// (helm deletes a default when the user sets it to null).
func coalesce(dst, src map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range dst {
		out[k] = v
	}
	for k, v := range src {
		dm, dok := out[k].(map[string]interface{})
		sm, sok := v.(map[string]interface{})
		if dok && sok {
			out[k] = coalesce(dm, sm)
		} else {
			out[k] = v
		}
	}
	return out
}

func dropNulls(m map[string]interface{}) map[string]interface{} {
	for k, v := range m {
		if v == nil {
			delete(m, k)
		} else if sub, ok := v.(map[string]interface{}); ok {
			m[k] = dropNulls(sub)
		}
	}
	return m
}

// parseSet reads one --set argument: comma-separated KEY=VALUE pairs with
// dotted keys; values typed as helm's strvals types them (integers, true,
// false, null, else a string). Lists ({a,b}) and indexes (a[0]) are not
// supported: use -f.
func parseSet(s string) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	for _, pair := range splitUnescaped(s, ',') {
		eq := strings.IndexByte(pair, '=')
		if eq <= 0 {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE", pair)
		}
		key, raw := pair[:eq], strings.ReplaceAll(pair[eq+1:], `\,`, ",")
		if strings.ContainsAny(key, "[]") || strings.HasPrefix(raw, "{") {
			return nil, fmt.Errorf("--set %q: lists are not supported by this renderer; use -f", pair)
		}
		var val interface{} = raw
		switch {
		case raw == "true":
			val = true
		case raw == "false":
			val = false
		case raw == "null":
			val = nil
		default:
			if i, err := strconv.ParseInt(raw, 10, 64); err == nil && (raw == "0" || !strings.HasPrefix(raw, "0")) {
				val = i
			}
		}
		parts := strings.Split(key, ".")
		m := out
		for _, p := range parts[:len(parts)-1] {
			sub, ok := m[p].(map[string]interface{})
			if !ok {
				sub = map[string]interface{}{}
				m[p] = sub
			}
			m = sub
		}
		m[parts[len(parts)-1]] = val
	}
	// Through JSON, so numbers are float64 as in values read from YAML.
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	res := map[string]interface{}{}
	return res, json.Unmarshal(b, &res)
}

func splitUnescaped(s string, sep byte) []string {
	var parts []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' {
			i++
			continue
		}
		if s[i] == sep {
			parts = append(parts, s[start:i])
			start = i + 1
		}
	}
	return append(parts, s[start:])
}

// render parses every file under templates/ into one template set (so
// defines are shared, as in helm), executes each non-partial file (names not
// starting with "_"), and prints the non-empty results sorted by path.
func render(dir, chartName string, top map[string]interface{}, notes bool) (string, error) {
	tdir := filepath.Join(dir, "templates")
	var files []string
	err := filepath.Walk(tdir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if !info.IsDir() {
			files = append(files, p)
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(files)
	t := template.New("gotpl")
	t.Option("missingkey=zero")
	includedNames := map[string]int{}
	funcs := funcMap(t, includedNames)
	t.Funcs(funcs)
	names := map[string]string{}
	for _, f := range files {
		rel, _ := filepath.Rel(tdir, f)
		tname := path.Join(chartName, "templates", filepath.ToSlash(rel))
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if _, err := t.New(tname).Parse(string(b)); err != nil {
			return "", fmt.Errorf("parse error at (%s): %v", tname, cleanErr(err))
		}
		names[tname] = f
	}
	var keys []string
	for k := range names {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out strings.Builder
	for _, tname := range keys {
		base := path.Base(tname)
		isNotes := base == "NOTES.txt"
		if strings.HasPrefix(base, "_") || isNotes != notes {
			continue
		}
		data := map[string]interface{}{}
		for k, v := range top {
			data[k] = v
		}
		data["Template"] = map[string]interface{}{"Name": tname, "BasePath": path.Join(chartName, "templates")}
		var buf bytes.Buffer
		if err := t.ExecuteTemplate(&buf, tname, data); err != nil {
			return "", cleanErr(err)
		}
		s := strings.ReplaceAll(buf.String(), "<no value>", "")
		if notes {
			out.WriteString(s)
			continue
		}
		if strings.TrimSpace(s) == "" {
			continue
		}
		// helm install/upgrade reject a manifest that is not YAML: so do we.
		for i, doc := range strings.Split(s, "\n---") {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			var obj map[string]interface{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				return "", fmt.Errorf("YAML parse error on %s (document %d): %v", tname, i+1, err)
			}
		}
		fmt.Fprintf(&out, "---\n# Source: %s\n%s\n", tname, strings.TrimSpace(s))
	}
	return out.String(), nil
}

// cleanErr shortens text/template errors the way helm reports them: the
// message given to required or fail, with its template and position.
func cleanErr(err error) error {
	var ee template.ExecError
	if !errors.As(err, &ee) {
		return err
	}
	tokens := strings.SplitN(err.Error(), ": ", 3)
	if len(tokens) != 3 {
		return err
	}
	if m := regexp.MustCompile(`(?s)^.*error calling \w+: (.*)$`).FindStringSubmatch(tokens[2]); m != nil {
		return fmt.Errorf("execution error at (%s): %s", tokens[1], m[1])
	}
	return err
}

// funcMap is helm's: sprig's text functions without env and expandenv, plus
// helm's own.
func funcMap(t *template.Template, includedNames map[string]int) template.FuncMap {
	f := sprig.TxtFuncMap()
	delete(f, "env")
	delete(f, "expandenv")
	const recursionMaxNums = 1000
	f["include"] = func(name string, data interface{}) (string, error) {
		var buf strings.Builder
		if v, ok := includedNames[name]; ok && v > recursionMaxNums {
			return "", fmt.Errorf("rendering template has a nested reference name: %s: unable to execute template", name)
		}
		includedNames[name]++
		err := t.ExecuteTemplate(&buf, name, data)
		includedNames[name]--
		return buf.String(), err
	}
	f["tpl"] = func(tpl string, vals interface{}) (string, error) {
		clone, err := t.Clone()
		if err != nil {
			return "", err
		}
		clone.Option("missingkey=zero")
		if _, err := clone.New("tpl").Parse(tpl); err != nil {
			return "", fmt.Errorf("cannot parse template %q: %v", tpl, err)
		}
		var buf strings.Builder
		if err := clone.ExecuteTemplate(&buf, "tpl", vals); err != nil {
			return "", fmt.Errorf("error during tpl function execution for %q: %v", tpl, err)
		}
		return strings.ReplaceAll(buf.String(), "<no value>", ""), nil
	}
	f["required"] = func(warn string, val interface{}) (interface{}, error) {
		if val == nil {
			return val, errors.New(warn)
		}
		if s, ok := val.(string); ok && s == "" {
			return val, errors.New(warn)
		}
		return val, nil
	}
	f["toYaml"] = func(v interface{}) string {
		b, err := yaml.Marshal(v)
		if err != nil {
			return ""
		}
		return strings.TrimSuffix(string(b), "\n")
	}
	f["fromYaml"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := yaml.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	f["toJson"] = func(v interface{}) string {
		b, err := json.Marshal(v)
		if err != nil {
			return ""
		}
		return string(b)
	}
	f["fromJson"] = func(s string) map[string]interface{} {
		m := map[string]interface{}{}
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			m["Error"] = err.Error()
		}
		return m
	}
	// helm template has no cluster: lookup finds nothing.
	f["lookup"] = func(apiversion, kind, namespace, name string) (map[string]interface{}, error) {
		return map[string]interface{}{}, nil
	}
	return f
}

// ---- values.schema.json ----------------------------------------------------

// validateValues checks values against the chart's values.schema.json, if
// any, and reports every violation as helm does:
//
//	values don't meet the specifications of the schema(s) in the following chart(s):
//	podprof:
//	- hz: Must be less than or equal to 1000
func validateValues(dir, chartName string, values map[string]interface{}) error {
	b, err := os.ReadFile(filepath.Join(dir, "values.schema.json"))
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	var schema map[string]interface{}
	if err := json.Unmarshal(b, &schema); err != nil {
		return fmt.Errorf("values.schema.json: %v", err)
	}
	// Values as JSON sees them (helm converts them before validating).
	jb, err := json.Marshal(values)
	if err != nil {
		return err
	}
	var doc interface{}
	if err := json.Unmarshal(jb, &doc); err != nil {
		return err
	}
	v := &validator{root: schema}
	v.check(schema, doc, "")
	if v.schemaErr != nil {
		return v.schemaErr
	}
	if len(v.errs) == 0 {
		return nil
	}
	var msg strings.Builder
	fmt.Fprintf(&msg, "values don't meet the specifications of the schema(s) in the following chart(s):\n%s:\n", chartName)
	for _, e := range v.errs {
		fmt.Fprintf(&msg, "- %s\n", e)
	}
	return errors.New(strings.TrimSuffix(msg.String(), "\n"))
}

type validator struct {
	root      map[string]interface{}
	errs      []string
	schemaErr error
}

// The keywords checked; annotations are accepted and ignored. Anything else
// in the schema is an error: a keyword nobody checks must not look checked.
var checkedKeywords = map[string]bool{
	"type": true, "properties": true, "additionalProperties": true, "required": true,
	"enum": true, "minimum": true, "maximum": true, "minLength": true, "maxLength": true,
	"pattern": true, "items": true, "$ref": true, "minItems": true, "maxItems": true,
}
var annotationKeywords = map[string]bool{
	"$schema": true, "$id": true, "$comment": true, "title": true, "description": true,
	"default": true, "examples": true, "definitions": true,
}

func field(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

func join(p, k string) string {
	if p == "" {
		return k
	}
	return p + "." + k
}

func (v *validator) fail(p, format string, args ...interface{}) {
	v.errs = append(v.errs, field(p)+": "+fmt.Sprintf(format, args...))
}

func (v *validator) check(s map[string]interface{}, doc interface{}, p string) {
	for k := range s {
		if !checkedKeywords[k] && !annotationKeywords[k] && v.schemaErr == nil {
			v.schemaErr = fmt.Errorf("values.schema.json: keyword %q (at %s) is not supported by tests/e2e/render", k, field(p))
		}
	}
	if ref, ok := s["$ref"].(string); ok {
		target, err := v.resolve(ref)
		if err != nil {
			v.schemaErr = err
			return
		}
		v.check(target, doc, p)
	}
	if t, ok := s["type"]; ok && !typeMatches(t, doc) {
		v.fail(p, "Invalid type. Expected: %s, given: %s", typeNames(t), jsonType(doc))
		return
	}
	if enum, ok := s["enum"].([]interface{}); ok {
		found := false
		for _, e := range enum {
			if jsonEqual(e, doc) {
				found = true
			}
		}
		if !found {
			var allowed []string
			for _, e := range enum {
				b, _ := json.Marshal(e)
				allowed = append(allowed, string(b))
			}
			v.fail(p, "%s must be one of the following: %s", lastName(p), strings.Join(allowed, ", "))
		}
	}
	switch d := doc.(type) {
	case float64:
		if m, ok := s["minimum"].(float64); ok && d < m {
			v.fail(p, "Must be greater than or equal to %s", num(m))
		}
		if m, ok := s["maximum"].(float64); ok && d > m {
			v.fail(p, "Must be less than or equal to %s", num(m))
		}
	case string:
		n := len([]rune(d))
		if m, ok := s["minLength"].(float64); ok && float64(n) < m {
			v.fail(p, "String length must be greater than or equal to %s", num(m))
		}
		if m, ok := s["maxLength"].(float64); ok && float64(n) > m {
			v.fail(p, "String length must be less than or equal to %s", num(m))
		}
		if pat, ok := s["pattern"].(string); ok {
			re, err := regexp.Compile(pat)
			if err != nil {
				v.schemaErr = fmt.Errorf("values.schema.json: pattern %q: %v", pat, err)
				return
			}
			if !re.MatchString(d) {
				v.fail(p, "Does not match pattern '%s'", pat)
			}
		}
	case []interface{}:
		if m, ok := s["minItems"].(float64); ok && float64(len(d)) < m {
			v.fail(p, "Array must have at least %s items", num(m))
		}
		if m, ok := s["maxItems"].(float64); ok && float64(len(d)) > m {
			v.fail(p, "Array must have at most %s items", num(m))
		}
		if items, ok := s["items"].(map[string]interface{}); ok {
			for i, e := range d {
				v.check(items, e, fmt.Sprintf("%s.%d", field(p), i))
			}
		}
	case map[string]interface{}:
		if req, ok := s["required"].([]interface{}); ok {
			for _, r := range req {
				if name, _ := r.(string); name != "" {
					if _, present := d[name]; !present {
						v.fail(p, "%s is required", name)
					}
				}
			}
		}
		props, _ := s["properties"].(map[string]interface{})
		keys := make([]string, 0, len(d))
		for k := range d {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if ps, ok := props[k].(map[string]interface{}); ok {
				v.check(ps, d[k], join(p, k))
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					v.fail(p, "Additional property %s is not allowed", k)
				}
			case map[string]interface{}:
				v.check(ap, d[k], join(p, k))
			}
		}
	}
}

func (v *validator) resolve(ref string) (map[string]interface{}, error) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, fmt.Errorf("values.schema.json: $ref %q: only local references (#/...) are supported", ref)
	}
	var cur interface{} = v.root
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]interface{})
		if !ok {
			return nil, fmt.Errorf("values.schema.json: $ref %q does not resolve", ref)
		}
		cur = m[part]
	}
	m, ok := cur.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("values.schema.json: $ref %q does not resolve", ref)
	}
	return m, nil
}

func lastName(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[i+1:]
	}
	return field(p)
}

func num(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

func jsonType(d interface{}) string {
	switch x := d.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case float64:
		if x == math.Trunc(x) {
			return "integer"
		}
		return "number"
	case string:
		return "string"
	case []interface{}:
		return "array"
	case map[string]interface{}:
		return "object"
	}
	return fmt.Sprintf("%T", d)
}

func typeMatches(t interface{}, d interface{}) bool {
	switch tt := t.(type) {
	case string:
		got := jsonType(d)
		return got == tt || (tt == "number" && got == "integer")
	case []interface{}:
		for _, x := range tt {
			if typeMatches(x, d) {
				return true
			}
		}
	}
	return false
}

func typeNames(t interface{}) string {
	switch tt := t.(type) {
	case string:
		return tt
	case []interface{}:
		var s []string
		for _, x := range tt {
			s = append(s, fmt.Sprint(x))
		}
		return strings.Join(s, "/")
	}
	return fmt.Sprint(t)
}

func jsonEqual(a, b interface{}) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}
