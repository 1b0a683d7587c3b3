package apply

import (
	"errors"
	"os"

	"github.com/paddock-dev/paddock"
)

var errTooLarge = errors.New("too large")

type limitWriter struct {
	buf []byte
	max int64
}

func (l *limitWriter) Write(p []byte) (int, error) {
	if int64(len(l.buf)+len(p)) > l.max {
		return 0, errTooLarge
	}
	l.buf = append(l.buf, p...)
	return len(p), nil
}

// fileMode is the permission a git mode asks for.
func fileMode(gitMode string) os.FileMode {
	if gitMode == "100755" {
		return 0o755
	}
	return 0o644
}

func internal(msg string, err error) error {
	return &paddock.Error{Code: paddock.CodeInternal, Message: msg, Err: err}
}
