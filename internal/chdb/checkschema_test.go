package chdb_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rdmawatch/rdmawatch/internal/chdb"
	"github.com/rdmawatch/rdmawatch/internal/chdb/chtest"
	"github.com/rdmawatch/rdmawatch/internal/testwait"
)

// CheckSchema tells a role without DDL rights whether an admin migrated the
// database, and names what is missing.
func TestCheckSchema(t *testing.T) {
	t.Parallel()
	dsn := chtest.NewDatabase(t, chtest.DSN(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn := chtest.Open(t, dsn)

	err := chdb.CheckSchema(ctx, conn)
	if !errors.Is(err, chdb.ErrSchemaNotReady) || !strings.Contains(err.Error(), "rdmawatch migrate") {
		t.Fatalf("empty database: CheckSchema = %v, want ErrSchemaNotReady naming `rdmawatch migrate`", err)
	}
	if _, err := chdb.Migrate(ctx, conn); err != nil {
		t.Fatal(err)
	}
	if err := chdb.CheckSchema(ctx, conn); err != nil {
		t.Fatalf("migrated database: %v", err)
	}
	// Forget a step, as a database migrated by an older release would be.
	if err := conn.Exec(ctx, "ALTER TABLE schema_migrations DELETE WHERE version = 5"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, 10*time.Second, "CheckSchema to name the forgotten step", func() error {
		err := chdb.CheckSchema(ctx, conn)
		if !errors.Is(err, chdb.ErrSchemaNotReady) || !strings.Contains(err.Error(), "0005_rollups.sql") {
			return fmt.Errorf("without 0005: CheckSchema = %v, want it named", err)
		}
		return nil
	})
}

// Two `rdmawatch migrate` started together on a fresh database both
// succeed, and leave the schema one run would.
func TestMigrateConcurrently(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	refDB := chtest.NewDatabase(t, chtest.DSN(t))
	ref := chtest.Open(t, refDB)
	if _, err := chdb.Migrate(ctx, ref); err != nil {
		t.Fatal(err)
	}
	want := strings.ReplaceAll(schemaText(ctx, t, ref), dbOf(refDB), "DB")

	for round := range 3 {
		dsn := chtest.NewDatabase(t, chtest.DSN(t))
		const n = 4
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			c := chtest.Open(t, dsn)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = chdb.Migrate(ctx, c)
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Fatalf("round %d: migrator %d of %d: %v", round, i, n, err)
			}
		}
		conn := chtest.Open(t, dsn)
		if err := chdb.CheckSchema(ctx, conn); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if got := strings.ReplaceAll(schemaText(ctx, t, conn), dbOf(dsn), "DB"); got != want {
			t.Fatalf("round %d: schema after concurrent migrations\n%s\nwant\n%s", round, got, want)
		}
	}
}

func dbOf(dsn string) string { return dsn[strings.LastIndexByte(dsn, '/')+1:] }
