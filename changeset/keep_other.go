//go:build !linux

package changeset

import "os"

// replaceKept puts file at kept.
func replaceKept(file, kept string) error { return os.Rename(file, kept) }
