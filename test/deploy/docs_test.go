package deploy

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/processor"
	_ "github.com/rdmawatch/rdmawatch/processor/detect/all" // every detector registers itself
	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/trace"
)

// plannedMarker in a table row says the field or type is part of the
// contract but not in the code yet. A planned row must not exist in the code
// (then the marker is stale) and a row without it must.
const plannedMarker = "(planned)"

func root(t *testing.T) string {
	t.Helper()
	r, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func readDoc(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root(t), "docs", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// section returns the text from the heading line equal to heading up to the
// next heading of the same or a higher level.
func section(t *testing.T, doc, heading string) string {
	t.Helper()
	level := strings.IndexByte(heading, ' ')
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		if l != heading {
			continue
		}
		var out []string
		for _, m := range lines[i+1:] {
			if h := strings.IndexByte(m, ' '); strings.HasPrefix(m, "#") && h > 0 && h <= level && strings.Trim(m[:h], "#") == "" {
				break
			}
			out = append(out, m)
		}
		return strings.Join(out, "\n")
	}
	t.Fatalf("heading %q not found", heading)
	return ""
}

// tableRow is a Markdown table row: its cells, trimmed.
type tableRow []string

// tableRows returns the body rows of the first Markdown table in text.
func tableRows(t *testing.T, text string) []tableRow {
	t.Helper()
	var rows []tableRow
	in := false
	for _, l := range strings.Split(text, "\n") {
		if !strings.HasPrefix(l, "|") {
			if in {
				break
			}
			continue
		}
		if !in {
			in = true
			continue // header
		}
		if strings.HasPrefix(l, "|---") || strings.HasPrefix(l, "| ---") {
			continue
		}
		cells := strings.Split(strings.Trim(l, "|"), " | ")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		rows = append(rows, cells)
	}
	if len(rows) == 0 {
		t.Fatal("no table found")
	}
	return rows
}

var codeSpan = regexp.MustCompile("`([^`]+)`")

// names returns every code span of a cell: "`a`, `b`" gives a and b.
func names(cell string) []string {
	var out []string
	for _, m := range codeSpan.FindAllStringSubmatch(cell, -1) {
		out = append(out, m[1])
	}
	return out
}

// jsonFields lists the JSON names of a struct's fields.
func jsonFields(v any) map[string]bool {
	out := map[string]bool{}
	rt := reflect.TypeOf(v)
	for i := 0; i < rt.NumField(); i++ {
		name, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" {
			continue
		}
		out[name] = true
	}
	return out
}

// checkFieldTable compares a documented field table with a struct's JSON
// fields, both ways. allowedAbsent names documented fields the struct may
// lack for a stated reason; should the struct gain one, the test says to
// update the docs and this list.
func checkFieldTable(t *testing.T, rows []tableRow, v any, allowedAbsent map[string]string) {
	t.Helper()
	code := jsonFields(v)
	documented := map[string]bool{}
	for _, r := range rows {
		for _, name := range names(r[0]) {
			documented[name] = true
			planned := strings.Contains(strings.Join(r, " "), plannedMarker)
			why, allowed := allowedAbsent[name]
			switch {
			case code[name] && planned:
				t.Errorf("field %q is in %T now: drop %s from its row", name, v, plannedMarker)
			case code[name] && allowed:
				t.Errorf("field %q is in %T now (%s no longer holds): update the docs and this test", name, v, why)
			case !code[name] && !planned && !allowed:
				t.Errorf("documented field %q is not a JSON field of %T", name, v)
			}
		}
	}
	for name := range code {
		if !documented[name] {
			t.Errorf("JSON field %q of %T is not documented", name, v)
		}
	}
}

func TestDocsEventFieldsMatchSchema(t *testing.T) {
	doc := readDoc(t, "formats.md")
	rows := tableRows(t, section(t, doc, "### Event fields"))
	checkFieldTable(t, rows, schemas.Event{}, nil)

	// The nested objects of pfc_storm: every JSON field of Origin and
	// Affected is named, quoted, in its row.
	for _, c := range []struct {
		field string
		v     any
	}{{"origin", schemas.Origin{}}, {"affected", schemas.Affected{}}, {"subject", schemas.Subject{}}} {
		var row string
		for _, r := range rows {
			if len(names(r[0])) > 0 && names(r[0])[0] == c.field {
				row = strings.Join(r, " ")
			}
		}
		for name := range jsonFields(c.v) {
			if !strings.Contains(row, `"`+name+`"`) {
				t.Errorf("field %q of %T is not listed in the %q row", name, c.v, c.field)
			}
		}
	}
}

func TestDocsTraceAndLabelFieldsMatchCode(t *testing.T) {
	doc := readDoc(t, "formats.md")
	rows := tableRows(t, section(t, doc, "### `\"kind\": \"sample\"`"))
	checkFieldTable(t, rows, trace.Line{}, nil)
	labels := tableRows(t, section(t, doc, "## Labels format v1"))
	checkFieldTable(t, labels, schemas.Label{}, nil)
}

// TestDocsEventTypesMatchRegistry checks the types table against the
// processor registry: every registered detector is documented as shipped,
// and every type documented as shipped is registered.
func TestDocsEventTypesMatchRegistry(t *testing.T) {
	doc := readDoc(t, "formats.md")
	rows := tableRows(t, section(t, doc, "## Event types by layer"))
	layers := map[string]bool{schemas.LayerPhysical: true, schemas.LayerLinkNetwork: true, schemas.LayerTransport: true, schemas.LayerApplication: true}
	shipped := map[string]bool{}
	for _, r := range rows {
		if len(r) < 3 {
			t.Fatalf("row %q: want layer | type | shipped | ...", r)
		}
		if !layers[r[0]] {
			t.Errorf("row %q: layer %q is not one of the four layers", r, r[0])
		}
		for _, typ := range names(r[1]) {
			switch r[2] {
			case "yes":
				shipped[typ] = true
			case "planned":
			default:
				t.Errorf("type %q: shipped column %q, want yes or planned", typ, r[2])
			}
		}
	}
	registered := processor.Registered()
	if len(registered) == 0 {
		t.Fatal("the processor registry is empty")
	}
	for _, name := range registered {
		if !shipped[name] {
			t.Errorf("detector %q is registered but not documented as shipped in docs/formats.md", name)
		}
	}
	reg := map[string]bool{}
	for _, name := range registered {
		reg[name] = true
	}
	for name := range shipped {
		if !reg[name] {
			t.Errorf("type %q is documented as shipped but no detector registers it", name)
		}
	}
}

func TestDocsStreamsMatchSchema(t *testing.T) {
	doc := readDoc(t, "streams-and-tables.md")
	want := []string{
		schemas.HeaderDeadReason, schemas.HeaderDeadRole, schemas.HeaderDeadSubject,
		schemas.HeaderDeadStream, schemas.HeaderDeadStreamSeq, schemas.HeaderDeadDelivered,
		schemas.DeadLetterAllFilter, schemas.CountersAllFilter, schemas.EventsAllFilter, schemas.InventoryAllFilter,
	}
	streams := schemas.Streams(schemas.StreamOptions{})
	if len(streams) == 0 {
		t.Fatal("schemas.Streams is empty")
	}
	for _, s := range streams {
		want = append(want, s.Name)
		want = append(want, s.Subjects...)
	}
	for _, w := range want {
		if !strings.Contains(doc, "`"+w+"`") {
			t.Errorf("docs/streams-and-tables.md does not name `%s`", w)
		}
	}
	// The dead-letter subject's shape, from the code.
	got := strings.NewReplacer("ROLE", "<role>", "STREAM", "<stream>").Replace(schemas.DeadLetterSubject("ROLE", "STREAM"))
	if !strings.Contains(doc, "`"+got+"`") {
		t.Errorf("docs/streams-and-tables.md does not give the dead-letter subject as `%s`", got)
	}
}

var ddlName = regexp.MustCompile(`(?i)CREATE\s+(?:TABLE|VIEW|MATERIALIZED\s+VIEW)\s+IF\s+NOT\s+EXISTS\s+([a-z0-9_]+)`)

// migrationObjects lists the tables and views the migrations create, and
// schema_migrations, which Migrate creates itself.
func migrationObjects(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(root(t), "schemas", "ddl", "migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no migrations found: %v", err)
	}
	out := map[string]bool{"schema_migrations": true}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ddlName.FindAllStringSubmatch(string(b), -1) {
			out[m[1]] = true
		}
	}
	return out
}

func TestDocsTablesMatchMigrations(t *testing.T) {
	doc := readDoc(t, "streams-and-tables.md")
	tables := section(t, doc, "## ClickHouse tables")
	objects := migrationObjects(t)
	if len(objects) < 5 {
		t.Fatalf("only %d tables and views found in the migrations: the pattern is broken", len(objects))
	}
	for name := range objects {
		if !strings.Contains(tables, "`"+name+"`") {
			t.Errorf("table or view %q (schemas/ddl/migrations) is not in the tables reference", name)
		}
	}
	// And the other way: every name in the first column of the reference's
	// tables exists.
	for _, part := range strings.Split(tables, "\n\n") {
		if !strings.HasPrefix(strings.TrimSpace(part), "|") {
			continue
		}
		for _, r := range tableRows(t, part) {
			for _, name := range names(r[0]) {
				if !objects[name] {
					t.Errorf("the tables reference names %q, which no migration creates", name)
				}
			}
		}
	}
}

var (
	mdLink  = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	slugDel = regexp.MustCompile(`[^a-z0-9 _-]`)
)

// anchors returns the GitHub-style anchors of a Markdown file's headings.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	inCode := false
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "```") {
			inCode = !inCode
		}
		if inCode || !strings.HasPrefix(l, "#") {
			continue
		}
		h := strings.ToLower(strings.TrimSpace(strings.TrimLeft(l, "#")))
		out[strings.ReplaceAll(slugDel.ReplaceAllString(h, ""), " ", "-")] = true
	}
	return out
}

// TestDocsLinksResolve checks every relative link in docs/ reaches a file
// of the repository, and its #anchor a heading there.
func TestDocsLinksResolve(t *testing.T) {
	r := root(t)
	files, _ := filepath.Glob(filepath.Join(r, "docs", "*.md"))
	if len(files) < 5 {
		t.Fatalf("docs/ holds %d Markdown files, want formats, streams-and-tables, architecture, guarantees, deploying", len(files))
	}
	sort.Strings(files)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range mdLink.FindAllStringSubmatch(string(b), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				t.Errorf("%s: link %q leaves the repository", filepath.Base(f), target)
				continue
			}
			path, anchor, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if rel, err := filepath.Rel(r, dest); err != nil || strings.HasPrefix(rel, "..") {
					t.Errorf("%s: link %q leaves the repository", filepath.Base(f), target)
					continue
				}
			}
			db, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", filepath.Base(f), target, err)
				continue
			}
			if anchor != "" && !anchors(string(db))[anchor] {
				t.Errorf("%s: link %q: no heading with anchor #%s", filepath.Base(f), target, anchor)
			}
		}
	}
}
