package chdb

import (
	"fmt"
	"github.com/rdmawatch/rdmawatch/schemas/ddl"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/ClickHouse/clickhouse-go/v2/lib/driver"
)

// The queries people run during a postmortem or for capacity planning,
// shipped with the binary (`rdmawatch query NAME`) and readable as plain SQL
// in queries/. Each file starts with header comments:
//
//	-- question: the question the query answers (required)
//	-- needs: node             flags that must be given
//	-- filters: ...            how the filters apply, when not obvious
//
// Parameters are bound client-side (the native protocol on 18.16 has no
// server-side parameters): @from and @to (unix seconds, Int64), @node,
// @device (String, ” = any), @port (0 = any) and @limit.
//
// The files are schemas/ddl.Queries.
var queryFS = ddl.Queries

// Query is one shipped query.
type Query struct {
	Name     string   // file name without .sql
	Question string   // what it answers
	Needs    []string // parameters that must be set
	Filters  string   // how the filters apply
	SQL      string   // the statement, comments removed
	// Params are the parameters the statement reads (@node -> "node"),
	// sorted: a filter flag whose parameter is not among them would be
	// ignored, so `rdmawatch query` refuses it by name instead.
	Params []string
}

// Takes reports whether the statement reads parameter name (@name).
func (q Query) Takes(name string) bool {
	i := sort.SearchStrings(q.Params, name)
	return i < len(q.Params) && q.Params[i] == name
}

var paramRE = regexp.MustCompile(`@([A-Za-z_][A-Za-z0-9_]*)`)

// Queries returns the shipped queries sorted by name.
func Queries() ([]Query, error) {
	entries, err := fs.ReadDir(queryFS, "queries")
	if err != nil {
		return nil, fmt.Errorf("queries: %w", err)
	}
	var out []Query
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".sql") {
			continue
		}
		data, err := fs.ReadFile(queryFS, path.Join("queries", e.Name()))
		if err != nil {
			return nil, fmt.Errorf("queries: %w", err)
		}
		q, err := parseQuery(strings.TrimSuffix(e.Name(), ".sql"), string(data))
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// QueryByName returns the shipped query NAME.
func QueryByName(name string) (Query, error) {
	qs, err := Queries()
	if err != nil {
		return Query{}, err
	}
	names := make([]string, len(qs))
	for i, q := range qs {
		if q.Name == name {
			return q, nil
		}
		names[i] = q.Name
	}
	return Query{}, fmt.Errorf("no query %q: the shipped queries are %s", name, strings.Join(names, ", "))
}

func parseQuery(name, text string) (Query, error) {
	q := Query{Name: name}
	var body strings.Builder
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if c, ok := strings.CutPrefix(trimmed, "--"); ok {
			c = strings.TrimSpace(c)
			switch {
			case strings.HasPrefix(c, "question:"):
				q.Question = strings.TrimSpace(strings.TrimPrefix(c, "question:"))
			case strings.HasPrefix(c, "needs:"):
				q.Needs = strings.Fields(strings.ReplaceAll(strings.TrimPrefix(c, "needs:"), ",", " "))
			case strings.HasPrefix(c, "filters:"):
				q.Filters = strings.TrimSpace(strings.TrimPrefix(c, "filters:"))
			}
			continue
		}
		if trimmed == "" {
			continue
		}
		body.WriteString(line)
		body.WriteByte('\n')
	}
	q.SQL = strings.TrimSuffix(strings.TrimSpace(body.String()), ";")
	seen := map[string]bool{}
	for _, m := range paramRE.FindAllStringSubmatch(q.SQL, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			q.Params = append(q.Params, m[1])
		}
	}
	sort.Strings(q.Params)
	switch {
	case q.Question == "":
		return Query{}, fmt.Errorf("query %s.sql: no \"-- question:\" header", name)
	case q.SQL == "":
		return Query{}, fmt.Errorf("query %s.sql: no statement", name)
	case strings.Contains(q.SQL, ";"):
		return Query{}, fmt.Errorf("query %s.sql: more than one statement", name)
	}
	return q, nil
}

func namedArg(name string, v any) driver.NamedValue { return driver.NamedValue{Name: name, Value: v} }
