//go:build !linux

package durable

import (
	"errors"
	"fmt"
)

// syncfs has no equivalent elsewhere that waits for the writes (sync(2)
// only schedules them on most systems): SyncFS says so rather than
// promise what it cannot.
func syncfs(int) error {
	return fmt.Errorf("syncfs needs Linux: %w", errors.ErrUnsupported)
}
