package tools

import (
	"context"
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
			"an existing file keeps its mode unless mode is given.",
		Writes: true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path","content"],"properties":{
			"path":{"type":"string"},
			"content":{"type":"string"},
			"mode":{"type":"string","pattern":"^0?[0-7]{3}$","description":"permission bits in octal, such as 0755"}}}`),
		run: runWrite,
	})
	register(&Tool{
		Name: "edit",
		Description: "Replace exact text in a file. Each edit's old_string must occur exactly once unless replace_all " +
			"is set. Several edits apply in order, all or none.",
		Writes: true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string"},
			"old_string":{"type":"string"},
			"new_string":{"type":"string"},
			"replace_all":{"type":"boolean"},
			"edits":{"type":"array","items":{"type":"object","additionalProperties":false,"required":["old_string","new_string"],
				"properties":{"old_string":{"type":"string"},"new_string":{"type":"string"},"replace_all":{"type":"boolean"}}}}}}`),
		run: runEdit,
	})
	register(&Tool{
		Name:        "move",
		Description: "Move or rename a file or directory inside the workspace.",
		Writes:      true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["from","to"],"properties":{
			"from":{"type":"string"},"to":{"type":"string"},"overwrite":{"type":"boolean"}}}`),
		run: runMove,
	})
	register(&Tool{
		Name:        "delete",
		Description: "Delete a file, a symbolic link, or a directory (a non-empty one only with recursive).",
		Writes:      true,
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string"},"recursive":{"type":"boolean"}}}`),
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
		Mode    string  `json:"mode"`
	}
	if err := decode("write", raw, &a); err != nil {
		return nil, 0, err
	}
	if a.Content == nil {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "write: content is required (it may be empty)")
	}
	if len(*a.Content) > MaxFileSize {
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
	rel, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	created, err := r.WriteFile(a.Path, rel, []byte(*a.Content), mode)
	if err != nil {
		return nil, 0, err
	}
	return &WriteResult{Path: a.Path, Bytes: len(*a.Content), Created: created}, int64(len(*a.Content)), nil
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
	if err := decode("edit", raw, &a); err != nil {
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
	rel, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	if err := r.CheckWrite(a.Path, rel); err != nil {
		return nil, 0, err
	}
	f, fi, err := r.OpenRead(a.Path, rel)
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
	if _, err := r.WriteFile(a.Path, rel, []byte(text), nil); err != nil {
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
	if err := decode("move", raw, &a); err != nil {
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
	if err := r.Rename(a.From, from, a.To, to, a.Overwrite); err != nil {
		return nil, 0, err
	}
	return map[string]string{"from": a.From, "to": a.To}, 0, nil
}

func runDelete(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a struct {
		Path      string `json:"path"`
		Recursive bool   `json:"recursive"`
	}
	if err := decode("delete", raw, &a); err != nil {
		return nil, 0, err
	}
	rel, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	if err := r.Remove(a.Path, rel, a.Recursive); err != nil {
		return nil, 0, err
	}
	return map[string]string{"deleted": a.Path}, 0, nil
}
