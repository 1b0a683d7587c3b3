package sqlite_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/sqlite"
	"github.com/paddock-dev/paddock/storetest"
)

func open(t *testing.T, dir string) paddock.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) { storetest.Run(t, open) }

func TestWALAndSchema(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir).(*sqlite.Store)
	defer s.Close()
	if v, err := s.SchemaVersion(context.Background()); err != nil || v != 15 {
		t.Fatalf("schema version = %d, %v", v, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.db-wal")); err != nil {
		t.Fatalf("no WAL file: %v", err)
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir).(*sqlite.Store)
	s.Update(context.Background(), func(paddock.Tx) error { return nil })
	s.Close()
	// Pretend a newer paddock migrated this database.
	db, err := sql.Open("sqlite", filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec("PRAGMA user_version = 99"); err != nil {
		t.Fatal(err)
	}
	db.Close()
	_, err = sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("open of a newer schema: %v", err)
	}
}

func TestUnwritableDirectory(t *testing.T) {
	_, err := sqlite.Open(context.Background(), "/proc/paddock-no/state.db")
	if err == nil {
		t.Fatal("open in an impossible directory succeeded")
	}
}
