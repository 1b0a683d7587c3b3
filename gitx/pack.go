package gitx

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// packStore holds the blobs a diff made of a work tree: the packs of its
// directory (an objects directory git is pointed at), and the packs it
// writes as the diff goes: one for all small blobs, one for each large
// one. A pack is one file where loose objects would be one per blob
// (creating a file is what costs on most file systems), and it is written
// here, not by git, so that git never reads a path of the work tree.
type packStore struct {
	dir    string // objects/pack
	format objectFormat
	have   map[string]bool

	small  *packFile    // the small blobs' pack, once there is one
	zstore *zlib.Writer // stores every blob (see stored)
	buf    []byte       // copies every blob: one buffer, not one a blob
}

// maxPacks is how many packs a store keeps: past that, a diff starts it
// afresh (its blobs are made again as needed), so that git never has to
// search many.
const maxPacks = 64

// openPackStore reads which objects the packs in objects/pack hold.
func openPackStore(objects string, format objectFormat) (*packStore, error) {
	s := &packStore{dir: filepath.Join(objects, "pack"), format: format, have: map[string]bool{}}
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return nil, err
	}
	idx, _ := filepath.Glob(filepath.Join(s.dir, "pack-*.idx"))
	if len(idx) > maxPacks {
		for _, p := range idx {
			os.Remove(strings.TrimSuffix(p, ".idx") + ".pack")
			os.Remove(p)
		}
		idx = nil
	}
	for _, p := range idx {
		ids, err := readIdx(p, len(format.new().Sum(nil)))
		if err != nil {
			// A damaged pack (a crash while one was written is not: its
			// index is renamed last) is dropped with its index.
			os.Remove(strings.TrimSuffix(p, ".idx") + ".pack")
			os.Remove(p)
			continue
		}
		for _, id := range ids {
			s.have[id] = true
		}
	}
	return s, nil
}

// readIdx lists the object ids a version 2 pack index holds.
func readIdx(p string, size int) ([]string, error) {
	b, err := os.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if len(b) < 8+256*4 || !bytes.Equal(b[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, fmt.Errorf("%s: not a version 2 pack index", p)
	}
	n := int(binary.BigEndian.Uint32(b[8+255*4:]))
	ids := b[8+256*4:]
	if len(ids) < n*size {
		return nil, fmt.Errorf("%s: truncated", p)
	}
	out := make([]string, n)
	for i := range out {
		out[i] = hex.EncodeToString(ids[i*size : (i+1)*size])
	}
	return out, nil
}

func (s *packStore) has(oid string) bool { return s.have[oid] }

// add writes a small blob, b, whose id is oid.
func (s *packStore) add(oid string, b []byte) error {
	if s.small == nil {
		p, err := newPackFile(s.dir, s.format, -1)
		if err != nil {
			return err
		}
		s.small = p
	}
	id, err := s.small.add(bytes.NewReader(b), int64(len(b)), s.stored(), s.buffer())
	if err != nil {
		return err
	}
	if hex.EncodeToString(id) != oid {
		return errChanged
	}
	s.have[oid] = true
	return nil
}

// stored is the zlib writer of every blob the store writes: one that
// stores, not deflates. A diff's blobs are written once and read by git
// at every diff of the run: inflating deflated blobs was a quarter of
// git's work rendering a thousand changed files (BenchmarkChangeSet),
// and deflating them costs paddock more than their bytes cost a disk of
// its own (the store lives as long as its run's cache).
func (s *packStore) stored() *zlib.Writer {
	if s.zstore == nil {
		s.zstore, _ = zlib.NewWriterLevel(io.Discard, zlib.NoCompression)
	}
	return s.zstore
}

// addLarge writes size bytes of r, a large blob, in a pack of its own
// (whose header can then be written first, and its checksum as it goes:
// the blob is read once), stored rather than deflated, which costs more
// than its bytes on a disk of paddock's. want, if not empty, is the id the
// bytes must hash to. It returns the blob's id.
func (s *packStore) addLarge(r io.Reader, size int64, want string) (string, error) {
	p, err := newPackFile(s.dir, s.format, 1)
	if err != nil {
		return "", err
	}
	defer p.abort()
	id, err := p.add(r, size, s.stored(), s.buffer())
	if err != nil {
		return "", err
	}
	oid := hex.EncodeToString(id)
	if want != "" && oid != want {
		return "", errChanged
	}
	if !s.have[oid] {
		if err := p.finish(); err != nil {
			return "", err
		}
		s.have[oid] = true
	}
	return oid, nil
}

func (s *packStore) buffer() []byte {
	if s.buf == nil {
		s.buf = make([]byte, 64<<10)
	}
	return s.buf
}

// finish completes the small blobs' pack.
func (s *packStore) finish() error {
	if s.small == nil {
		return nil
	}
	err := s.small.finish()
	s.small = nil
	return err
}

// abort drops the small blobs' pack if it is not finished.
func (s *packStore) abort() {
	if s.small != nil {
		s.small.abort()
	}
}

// packFile is a pack being written. Its checksum is computed as it is
// written when its object count is known at the start; otherwise the
// count is written last and the file read again for it.
type packFile struct {
	dir     string
	format  objectFormat
	f       *os.File
	w       *bufio.Writer
	sum     hash.Hash // nil: the count is not known yet
	off     int64
	entries []packEntry
}

type packEntry struct {
	oid []byte
	off int64
	crc uint32
}

func newPackFile(dir string, format objectFormat, count int) (*packFile, error) {
	f, err := os.CreateTemp(dir, "tmp_pack_")
	if err != nil {
		return nil, err
	}
	p := &packFile{dir: dir, format: format, f: f, off: 12}
	var out io.Writer = f
	hdr := []byte{'P', 'A', 'C', 'K', 0, 0, 0, 2, 0, 0, 0, 0}
	if count >= 0 {
		binary.BigEndian.PutUint32(hdr[8:], uint32(count))
		p.sum = format.new()
		out = io.MultiWriter(f, p.sum)
	}
	p.w = bufio.NewWriterSize(out, 256<<10)
	if _, err := p.w.Write(hdr); err != nil {
		p.abort()
		return nil, err
	}
	return p, nil
}

// add writes size bytes of r as a blob through zw, copying with buf, and
// returns its id.
func (p *packFile) add(r io.Reader, size int64, zw *zlib.Writer, buf []byte) ([]byte, error) {
	crc := crc32.NewIEEE()
	cw := &countingWriter{w: io.MultiWriter(p.w, crc)}
	// The entry's header: type 3 (blob) and the size, seven bits a byte.
	hdr := []byte{byte(3<<4 | size&0x0f)}
	for n := size >> 4; n > 0; n >>= 7 {
		hdr[len(hdr)-1] |= 0x80
		hdr = append(hdr, byte(n&0x7f))
	}
	cw.Write(hdr)
	zw.Reset(cw)
	hh := p.format.new()
	fmt.Fprintf(hh, "blob %d\x00", size)
	n, err := io.CopyBuffer(io.MultiWriter(zw, hh), io.LimitReader(r, size+1), buf)
	if err == nil && n != size {
		err = errChanged
	}
	if err = errors.Join(err, zw.Close(), cw.err); err != nil {
		return nil, err
	}
	id := hh.Sum(nil)
	p.entries = append(p.entries, packEntry{oid: id, off: p.off, crc: crc.Sum32()})
	p.off += cw.n
	return id, nil
}

type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	if err != nil && c.err == nil {
		c.err = err
	}
	return n, err
}

// finish completes the pack and its index and puts them where git finds
// them, the index last (git reads a pack only through its index).
func (p *packFile) finish() (err error) {
	defer func() {
		if err != nil {
			p.abort()
		}
	}()
	if err := p.w.Flush(); err != nil {
		return err
	}
	sum := p.format.new()
	if p.sum != nil {
		sum = p.sum
	} else {
		var count [4]byte
		binary.BigEndian.PutUint32(count[:], uint32(len(p.entries)))
		if _, err := p.f.WriteAt(count[:], 8); err != nil {
			return err
		}
		if _, err := p.f.Seek(0, io.SeekStart); err != nil {
			return err
		}
		if _, err := io.Copy(sum, p.f); err != nil {
			return err
		}
	}
	trailer := sum.Sum(nil)
	if _, err := p.f.Write(trailer); err != nil {
		return err
	}
	if err := p.f.Close(); err != nil {
		return err
	}
	name := filepath.Join(p.dir, "pack-"+hex.EncodeToString(trailer))
	tmpIdx := p.f.Name() + ".idx"
	if err := os.WriteFile(tmpIdx, p.index(trailer), 0o600); err != nil {
		return err
	}
	defer os.Remove(tmpIdx)
	if err := os.Rename(p.f.Name(), name+".pack"); err != nil {
		return err
	}
	p.f = nil
	return os.Rename(tmpIdx, name+".idx")
}

// index is the version 2 index of the pack whose checksum is trailer.
func (p *packFile) index(trailer []byte) []byte {
	sort.Slice(p.entries, func(i, j int) bool { return bytes.Compare(p.entries[i].oid, p.entries[j].oid) < 0 })
	var b bytes.Buffer
	b.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	var fan [256]uint32
	for _, e := range p.entries {
		fan[e.oid[0]]++
	}
	var n uint32
	for i := range fan {
		n += fan[i]
		binary.Write(&b, binary.BigEndian, n)
	}
	for _, e := range p.entries {
		b.Write(e.oid)
	}
	for _, e := range p.entries {
		binary.Write(&b, binary.BigEndian, e.crc)
	}
	var large []int64
	for _, e := range p.entries {
		if e.off < 1<<31 {
			binary.Write(&b, binary.BigEndian, uint32(e.off))
			continue
		}
		binary.Write(&b, binary.BigEndian, uint32(1<<31|len(large)))
		large = append(large, e.off)
	}
	for _, off := range large {
		binary.Write(&b, binary.BigEndian, uint64(off))
	}
	b.Write(trailer)
	h := p.format.new()
	h.Write(b.Bytes())
	b.Write(h.Sum(nil))
	return b.Bytes()
}

// abort drops the pack if it is not finished.
func (p *packFile) abort() {
	if p.f != nil {
		p.f.Close()
		os.Remove(p.f.Name())
		p.f = nil
	}
}
