package redact

import "bytes"

// Detector tells whether a stream of bytes holds a declared secret in any
// of its forms, wherever the stream's writes cut it, in bounded memory: for
// data that is scanned rather than shown (the content a binary patch
// encodes).
type Detector struct {
	r     *Redactor
	tail  []byte // the last bytes written, as long as the longest form less one
	keep  int
	found bool
}

// NewDetector returns a Detector for r's declared secrets.
func (r *Redactor) NewDetector() *Detector {
	d := &Detector{r: r}
	if r != nil {
		for _, p := range r.pairs {
			d.keep = max(d.keep, len(p.find)-1)
		}
	}
	return d
}

// Write scans p, as the continuation of what was written before.
func (d *Detector) Write(p []byte) (int, error) {
	if d.found || d.r == nil || len(d.r.pairs) == 0 {
		return len(p), nil
	}
	buf := append(d.tail, p...)
	for _, pr := range d.r.pairs {
		if bytes.Contains(buf, pr.find) {
			d.found = true
			return len(p), nil
		}
	}
	if len(buf) > d.keep {
		buf = buf[len(buf)-d.keep:]
	}
	d.tail = append(d.tail[:0], buf...)
	return len(p), nil
}

// Break says that what comes next does not continue what came before (a
// secret cannot straddle the break).
func (d *Detector) Break() { d.tail = d.tail[:0] }

// Found reports whether a declared secret was seen.
func (d *Detector) Found() bool { return d.found }
