package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/paddock-dev/paddock"
)

// TestUnreachableSaysSo: a call that failed because the store could not
// be reached says so to the client (the message of an internal error is
// shown); an answer of the store's, a caller's end or a paddock error
// stays what it was.
func TestUnreachableSaysSo(t *testing.T) {
	lost := []error{
		fmt.Errorf("postgres: begin: %w", &pgconn.PgError{Code: "57P01", Message: "terminating connection due to administrator command"}),
		fmt.Errorf("postgres: commit: %w", io.ErrUnexpectedEOF),
		errors.New("conn closed"),
	}
	for _, err := range lost {
		got := unreachable("n1", err, "nothing was written")
		var pe *paddock.Error
		if !errors.As(got, &pe) || pe.Code != paddock.CodeInternal || !strings.Contains(pe.Message, "node n1 cannot reach the shared store") ||
			!strings.Contains(pe.Message, "nothing was written") || !errors.Is(got, err) {
			t.Errorf("%v: got %v", err, got)
		}
	}
	kept := []error{
		&pgconn.PgError{Code: "23505", Message: "duplicate key"},
		context.Canceled,
		fmt.Errorf("read: %w", context.DeadlineExceeded),
		&paddock.Error{Code: paddock.CodeNodeLost, Message: "lost", Err: io.EOF},
	}
	for _, err := range kept {
		if got := unreachable("n1", err, ""); got != err {
			t.Errorf("%v became %v", err, got)
		}
	}
}
