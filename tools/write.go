package tools

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"io/fs"
	"strconv"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// MaxFileSize is the largest file write and edit handle.
const MaxFileSize = 64 << 20

func init() {
	register(&Tool{
		Name: "write",
		Description: "Write a whole file, creating missing parent directories. The file is replaced atomically; " +
			"an existing file keeps its mode unless mode is given. Text goes in content (UTF-8); bytes that are " +
			"not UTF-8 go in content_base64 instead. A path ending in / names a directory and is refused.",
		Writes: true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","description":"path of a file relative to the workspace root"},
			"content":{"type":"string","description":"the file's text; give this or content_base64"},
			"content_base64":{"type":"string","contentEncoding":"base64","description":"the file's bytes, base64 (standard alphabet, padded); for content that is not UTF-8"},
			"mode":{"type":"string","pattern":"^0?[0-7]{3}$","description":"permission bits in octal, such as 0755"}}}`),
		run: runWrite,
	})
	register(&Tool{
		Name: "edit",
		Description: "Replace exact text in a file. Each edit's old_string must occur exactly once unless replace_all " +
			"is set. Several edits apply in order, all or none.",
		Writes: true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","description":"path of a file relative to the workspace root"},
			"old_string":{"type":"string","description":"the exact text to replace; it must occur once unless replace_all"},
			"new_string":{"type":"string","description":"the text to put in its place"},
			"replace_all":{"type":"boolean","description":"replace every occurrence of old_string"},
			"edits":{"type":"array","description":"several edits, applied in order, all or none (instead of old_string and new_string)","items":{"type":"object","additionalProperties":false,"required":["old_string","new_string"],
				"properties":{"old_string":{"type":"string","description":"the exact text to replace; it must occur once unless replace_all"},"new_string":{"type":"string","description":"the text to put in its place"},"replace_all":{"type":"boolean","description":"replace every occurrence of old_string"}}}}}}`),
		run: runEdit,
	})
	register(&Tool{
		Name:        "move",
		Description: "Move or rename a file or directory inside the workspace.",
		Writes:      true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["from","to"],"properties":{
			"from":{"type":"string","description":"the path to move, relative to the workspace root"},
			"to":{"type":"string","description":"its new path, relative to the workspace root (missing parent directories are made)"},
			"overwrite":{"type":"boolean","description":"replace what is at to; without it an existing target is refused"}}}`),
		run: runMove,
	})
	register(&Tool{
		Name:        "delete",
		Description: "Delete a file, a symbolic link, or a directory (a non-empty one only with recursive).",
		Writes:      true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","description":"the path to delete, relative to the workspace root"},
			"recursive":{"type":"boolean","description":"delete a non-empty directory with everything in it"}}}`),
		run: runDelete,
	})
}

// WriteResult is the answer of write and edit.
type WriteResult struct {
	Path         string `json:"path"`
	Bytes        int    `json:"bytes"`
	Created      bool   `json:"created,omitempty"`
	Replacements int    `json:"replacements,omitempty"`
}

func runWrite(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path    string  `json:"path"`
		Content *string `json:"content"`
		Base64  *string `json:"content_base64"`
		Mode    string  `json:"mode"`
	}
	if err := Decode("write", raw, &a); err != nil {
		return nil, 0, err
	}
	var data []byte
	switch {
	case a.Content != nil && a.Base64 != nil:
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: give content or content_base64, not both")
	case a.Content != nil:
		data = []byte(*a.Content)
	case a.Base64 != nil:
		if base64.StdEncoding.DecodedLen(len(*a.Base64)) > MaxFileSize+2 {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: content is larger than %d bytes", MaxFileSize)
		}
		b, err := base64.StdEncoding.Strict().DecodeString(*a.Base64)
		if err != nil {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: content_base64 is not base64 (standard alphabet, padded): %v", err).
				WithDetail("key", "content_base64")
		}
		data = b
	default:
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: content (text) or content_base64 (bytes) is required; it may be empty")
	}
	if len(data) > MaxFileSize {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: content is larger than %d bytes", MaxFileSize)
	}
	var mode *fs.FileMode
	if a.Mode != "" {
		m, err := strconv.ParseUint(a.Mode, 8, 32)
		if err != nil || m > 0o777 {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: mode %q must be octal permission bits such as 0644 (no setuid, setgid or sticky)", a.Mode)
		}
		perm := fs.FileMode(m)
		mode = &perm
	}
	at, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	created, err := r.WriteFile(at, data, mode)
	if err != nil {
		return nil, 0, err
	}
	return &WriteResult{Path: a.Path, Bytes: len(data), Created: created}, int64(len(data)), nil
}

type edit struct {
	Old        *string `json:"old_string"`
	New        *string `json:"new_string"`
	ReplaceAll bool    `json:"replace_all"`
}

func runEdit(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path       string  `json:"path"`
		Old        *string `json:"old_string"`
		New        *string `json:"new_string"`
		ReplaceAll bool    `json:"replace_all"`
		Edits      []edit  `json:"edits"`
	}
	if err := Decode("edit", raw, &a); err != nil {
		return nil, 0, err
	}
	edits := a.Edits
	if a.Old != nil || a.New != nil {
		if len(edits) > 0 {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "edit: give either old_string/new_string or edits, not both")
		}
		edits = []edit{{Old: a.Old, New: a.New, ReplaceAll: a.ReplaceAll}}
	}
	if len(edits) == 0 {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "edit: nothing to do; give old_string and new_string")
	}
	at, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	if err := r.CheckWrite(at); err != nil {
		return nil, 0, err
	}
	f, fi, err := r.OpenRead(at)
	if err != nil {
		return nil, 0, err
	}
	if fi.Size() > MaxFileSize {
		f.Close()
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "edit: the file is larger than %d bytes", MaxFileSize)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return nil, 0, paddock.Errorf(paddock.CodeInternal, "edit: read failed")
	}
	text := string(b)
	total := 0
	for i, e := range edits {
		if e.Old == nil || e.New == nil || *e.Old == "" {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "edit %d: old_string must be non-empty and new_string given", i+1)
		}
		if *e.Old == *e.New {
			return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "edit %d: old_string and new_string are the same", i+1)
		}
		n := strings.Count(text, *e.Old)
		switch {
		case n == 0:
			return nil, 0, confine.Refuse(paddock.CodeBadRequest, "no_match", a.Path,
				"edit "+strconv.Itoa(i+1)+": old_string does not occur in the file; nothing was changed",
				"read the file and copy the text exactly, whitespace included")
		case n > 1 && !e.ReplaceAll:
			return nil, 0, confine.Refuse(paddock.CodeBadRequest, "ambiguous", a.Path,
				"edit "+strconv.Itoa(i+1)+": old_string occurs "+strconv.Itoa(n)+" times; nothing was changed",
				"add surrounding text to make it unique, or set replace_all").WithDetail("matches", n)
		}
		text = strings.ReplaceAll(text, *e.Old, *e.New)
		total += n
	}
	if _, err := r.WriteFile(at, []byte(text), nil); err != nil {
		return nil, 0, err
	}
	return &WriteResult{Path: a.Path, Bytes: len(text), Replacements: total}, int64(len(text)), nil
}

func runMove(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		From      string `json:"from"`
		To        string `json:"to"`
		Overwrite bool   `json:"overwrite"`
	}
	if err := Decode("move", raw, &a); err != nil {
		return nil, 0, err
	}
	from, err := r.Rel(a.From)
	if err != nil {
		return nil, 0, err
	}
	to, err := r.Rel(a.To)
	if err != nil {
		return nil, 0, err
	}
	if err := r.Rename(from, to, a.Overwrite); err != nil {
		return nil, 0, err
	}
	return map[string]string{"from": a.From, "to": a.To}, 0, nil
}

func runDelete(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := Decode("delete", raw, &a); err != nil {
		return nil, 0, err
	}
	at, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	if err := r.Remove(at, a.Recursive); err != nil {
		return nil, 0, err
	}
	return map[string]string{"deleted": a.Path}, 0, nil
}
