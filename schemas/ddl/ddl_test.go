package ddl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rdmawatch/rdmawatch/schemas"
	"github.com/rdmawatch/rdmawatch/schemas/ddl"
)

// TestDictionaryMigrationNamesEveryID: migration 0014 names the counter ids
// in the tables (extra_name, flagged_name, delta_name, counter_dictionary).
// Its name list must be the wire's dictionary exactly, in id order; a
// dictionary that grows after it shipped needs a new migration like it.
func TestDictionaryMigrationNamesEveryID(t *testing.T) {
	b, err := ddl.Migrations.ReadFile("migrations/0014_counter_dictionary_names.sql")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, schemas.CounterIDs)
	sources := make([]string, schemas.CounterIDs)
	for i := range schemas.CounterIDs {
		id := schemas.CounterID(i)
		names[i] = "'" + id.Name() + "'"
		sources[i] = fmt.Sprint(int(id.Source()))
	}
	sql := string(b)
	list := "[" + strings.Join(names, ", ") + "]"
	if n := strings.Count(sql, list); n != 4 {
		t.Errorf("0014 holds the dictionary's %d names %d times, want 4 (three ALIAS columns and the view)", schemas.CounterIDs, n)
	}
	if !strings.Contains(sql, fmt.Sprintf("range(%d) AS i, [%s] AS s", schemas.CounterIDs, strings.Join(sources, ", "))) {
		t.Errorf("0014's counter_dictionary view does not list the dictionary's %d ids and sources", schemas.CounterIDs)
	}
}
