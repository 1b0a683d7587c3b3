package tools

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// InboxDir is where inbound files land, relative to the workspace root.
const InboxDir = ".paddock/inbox"

// InboxLimits bound what may be delivered.
type InboxLimits struct {
	MaxFile  int64    // largest single file
	MaxTotal int64    // the inbox's total size per run
	Allow    []string // MIME types, as sniffed from the content
}

// DefaultInboxLimits: 10 MiB a file, 100 MiB a run, text, images and PDF.
var DefaultInboxLimits = InboxLimits{
	MaxFile:  10 << 20,
	MaxTotal: 100 << 20,
	Allow:    []string{"text/plain", "image/png", "image/jpeg", "image/gif", "image/webp", "application/pdf"},
}

// Deliver writes body into the inbox under name's base name. The type is
// decided by sniffing the content, never by the name. Over a limit nothing
// is written and the error has code too_large.
func Deliver(r *confine.Root, name string, body io.Reader, lim InboxLimits) (*paddock.InboxResult, error) {
	base := path.Base(strings.ReplaceAll(name, "\\", "/"))
	if name == "" || base == "." || base == "/" || base == ".." || strings.HasPrefix(base, ".") ||
		strings.ContainsAny(base, "\x00") || len(base) > 255 || confine.IsDotGit(base) {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "inbox: %q is not an acceptable file name (a plain name, not starting with '.')", name)
	}
	data, err := io.ReadAll(io.LimitReader(body, lim.MaxFile+1))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, tooLarge("the file is larger than %d bytes", lim.MaxFile)
		}
		return nil, paddock.Errorf(paddock.CodeBadRequest, "inbox: reading the upload failed")
	}
	if int64(len(data)) > lim.MaxFile {
		return nil, tooLarge("the file is larger than %d bytes", lim.MaxFile)
	}
	mime := http.DetectContentType(data)
	kind, _, _ := strings.Cut(mime, ";")
	allowed := false
	for _, a := range lim.Allow {
		allowed = allowed || a == kind
	}
	if !allowed {
		return nil, paddock.Errorf(paddock.CodeBadRequest, "inbox: content of type %s is not accepted (accepted: %s)", kind, strings.Join(lim.Allow, ", ")).
			WithDetail("mime", kind)
	}
	used := int64(0)
	if err := r.MkdirAll(confine.Trusted(InboxDir)); err != nil {
		return nil, err
	}
	fs.WalkDir(r.OS().FS(), InboxDir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				used += fi.Size()
			}
		}
		return nil
	})
	if used+int64(len(data)) > lim.MaxTotal {
		return nil, tooLarge("the inbox quota of %d bytes would be exceeded (%d used)", lim.MaxTotal, used)
	}
	target := path.Join(InboxDir, base)
	ext := path.Ext(base)
	for i := 1; ; i++ {
		if _, err := r.Lstat(confine.Trusted(target)); err != nil {
			break
		}
		target = path.Join(InboxDir, fmt.Sprintf("%s-%d%s", strings.TrimSuffix(base, ext), i, ext))
	}
	if _, err := r.WriteFile(confine.Trusted(target), data, nil); err != nil {
		return nil, err
	}
	return &paddock.InboxResult{Path: target, Size: int64(len(data)), MIME: kind}, nil
}

func tooLarge(format string, args ...any) error {
	return paddock.Errorf(paddock.CodeTooLarge, "inbox: "+format+"; nothing was written", args...)
}
