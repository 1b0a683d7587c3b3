package tools

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/confine"
)

// Read limits.
const (
	DefaultMaxBytes = 256 << 10
	MaxMaxBytes     = 4 << 20
	sniffLen        = 8000 // what git reads to decide a file is binary
)

type readArgs struct {
	Path       string `json:"path"`
	Offset     int    `json:"offset"`
	Limit      int    `json:"limit"`
	ByteOffset *int64 `json:"byte_offset"`
	ByteLimit  int64  `json:"byte_limit"`
	MaxBytes   int    `json:"max_bytes"`
}

// ReadResult is the answer of read.
type ReadResult struct {
	Path     string `json:"path"`
	Size     int64  `json:"size"`
	Binary   bool   `json:"binary"`
	Encoding string `json:"encoding,omitempty"` // utf-8, or base64 for bytes that are not UTF-8
	Content  string `json:"content"`
	// Line mode: the lines returned, 1-based and inclusive.
	StartLine int `json:"start_line,omitempty"`
	EndLine   int `json:"end_line,omitempty"`
	// Byte mode: the byte range returned.
	ByteOffset *int64 `json:"byte_offset,omitempty"`
	ByteEnd    *int64 `json:"byte_end,omitempty"`
	Truncated  bool   `json:"truncated"`
	Note       string `json:"note,omitempty"`
}

func init() {
	register(&Tool{
		Name: "read",
		Description: "Read a file of the workspace: by lines (offset, limit) or by bytes (byte_offset, byte_limit). " +
			"At most max_bytes are returned; a cut answer says truncated and how to go on. The answer's encoding " +
			"says how content is carried: utf-8 (text), or base64 for binary files and for lines that are not " +
			"valid UTF-8 (decode it to get the bytes exactly; write them back with content_base64). " +
			"A path ending in / names a directory and is refused.",
		Schema: schema(`{"type":"object","additionalProperties":false,"required":["path"],"properties":{
			"path":{"type":"string","description":"path relative to the workspace root"},
			"offset":{"type":"integer","minimum":0,"description":"first line to return, 1-based"},
			"limit":{"type":"integer","minimum":0,"description":"most lines to return"},
			"byte_offset":{"type":"integer","minimum":0,"description":"read bytes from here instead of lines"},
			"byte_limit":{"type":"integer","minimum":0,"description":"most bytes to return in byte mode"},
			"max_bytes":{"type":"integer","minimum":1,"maximum":4194304,"description":"cap on the answer's content (default 262144)"}}}`),
		run: runRead,
	})
}

func runRead(ctx context.Context, r *confine.Root, raw json.RawMessage) (any, int64, error) {
	var a readArgs
	if err := Decode("read", raw, &a); err != nil {
		return nil, 0, err
	}
	if a.Offset < 0 || a.Limit < 0 || a.ByteLimit < 0 || a.MaxBytes < 0 || a.MaxBytes > MaxMaxBytes ||
		(a.ByteOffset != nil && *a.ByteOffset < 0) {
		return nil, 0, paddock.Errorf(paddock.CodeBadRequest, "read: offsets and limits must be non-negative, max_bytes at most %d", MaxMaxBytes)
	}
	if a.MaxBytes == 0 {
		a.MaxBytes = DefaultMaxBytes
	}
	at, err := r.Rel(a.Path)
	if err != nil {
		return nil, 0, err
	}
	f, fi, err := r.OpenRead(at)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	res := &ReadResult{Path: a.Path, Size: fi.Size()}
	br := bufio.NewReaderSize(f, 64<<10)
	head, _ := br.Peek(sniffLen)
	res.Binary = isBinary(head)

	if a.ByteOffset != nil || res.Binary {
		off := int64(0)
		if a.ByteOffset != nil {
			off = *a.ByteOffset
		} else if a.Offset > 0 || a.Limit > 0 {
			return nil, 0, confine.Refuse(paddock.CodeBadRequest, "binary", a.Path, "the file is binary; it has no lines",
				"read it by bytes with byte_offset and byte_limit")
		}
		n := int64(a.MaxBytes)
		if a.ByteLimit > 0 && a.ByteLimit < n {
			n = a.ByteLimit
		}
		buf := make([]byte, n)
		got, err := f.ReadAt(buf, off)
		if err != nil && err != io.EOF {
			return nil, 0, paddock.Errorf(paddock.CodeInternal, "read failed")
		}
		buf = buf[:got]
		end := off + int64(got)
		res.ByteOffset, res.ByteEnd = &off, &end
		if res.Binary || !utf8.Valid(buf) {
			res.Encoding, res.Content = "base64", base64.StdEncoding.EncodeToString(buf)
		} else {
			res.Encoding, res.Content = "utf-8", string(buf)
		}
		if end < fi.Size() && (a.ByteLimit == 0 || int64(got) < a.ByteLimit) {
			res.Truncated = true
			res.Note = fmt.Sprintf("[truncated: bytes %d-%d of %d returned; continue with byte_offset %d]", off, end, fi.Size(), end)
		}
		return res, int64(got), nil
	}

	start := max(a.Offset, 1)
	res.Encoding = "utf-8"
	var out []byte
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if len(b) == 0 && err != nil {
			break
		}
		if line >= start {
			if a.Limit > 0 && line >= start+a.Limit {
				break
			}
			if len(out)+len(b) > a.MaxBytes {
				res.Truncated = true
				res.Note = fmt.Sprintf("[truncated at %d bytes: lines %d-%d returned; continue with offset %d]", a.MaxBytes, start, line-1, line)
				break
			}
			out = append(out, b...)
			res.EndLine = line
		}
		if err != nil {
			break
		}
	}
	if res.EndLine > 0 {
		res.StartLine = start
	}
	// Past the sample a text file may still hold bytes that are not UTF-8:
	// JSON would carry them as U+FFFD, and an agent writing the text back
	// would change them. Such lines come as base64, exactly.
	if utf8.Valid(out) {
		res.Content = string(out)
	} else {
		res.Encoding, res.Content = "base64", base64.StdEncoding.EncodeToString(out)
	}
	return res, int64(len(out)), nil
}

// isBinary applies git's rule: a NUL in the first 8000 bytes; plus text that
// is not UTF-8 (ignoring a rune cut at the end of the sample).
func isBinary(head []byte) bool {
	for _, c := range head {
		if c == 0 {
			return true
		}
	}
	for i := 0; i < len(head); {
		r, n := utf8.DecodeRune(head[i:])
		if r == utf8.RuneError && n == 1 {
			return len(head)-i >= utf8.UTFMax
		}
		i += n
	}
	return false
}
