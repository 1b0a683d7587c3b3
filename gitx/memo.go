package gitx

import (
	"container/list"
	"sync"
)

// memo keeps what a diff parsed of a file it reads again on every call
// (a run's stat cache, a base's listing), for the next call to take as
// it is: a value kept is never changed, and concurrent diffs share it.
// It holds at most limit entries of those values in all, the least
// recently used going first, and one value larger than that not at all.
type memo[T any] struct {
	mu    sync.Mutex
	limit int
	total int
	items map[string]*list.Element
	order list.List // front: the most recently used
}

type memoItem[T any] struct {
	key string
	// id is the stat data of the file the value was parsed from (paddock
	// replaces such a file by a rename, which gives it a new inode); zero
	// for a key that names its content.
	id   fileStat
	size int
	val  T
}

func newMemo[T any](limit int) *memo[T] {
	return &memo[T]{limit: limit, items: map[string]*list.Element{}}
}

// get returns the value kept under key if it was parsed from the file
// whose identity is id.
func (m *memo[T]) get(key string, id fileStat) (T, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		it := el.Value.(*memoItem[T])
		if it.id == id {
			m.order.MoveToFront(el)
			return it.val, true
		}
	}
	var zero T
	return zero, false
}

// put keeps val, of size entries, under key. Each value counts one entry
// more than it holds: empty ones are kept in bounds too.
func (m *memo[T]) put(key string, id fileStat, size int, val T) {
	size++
	m.mu.Lock()
	defer m.mu.Unlock()
	if el, ok := m.items[key]; ok {
		m.total -= el.Value.(*memoItem[T]).size
		m.order.Remove(el)
		delete(m.items, key)
	}
	if size > m.limit {
		return
	}
	m.items[key] = m.order.PushFront(&memoItem[T]{key: key, id: id, size: size, val: val})
	m.total += size
	for m.total > m.limit {
		el := m.order.Back()
		it := el.Value.(*memoItem[T])
		m.order.Remove(el)
		delete(m.items, it.key)
		m.total -= it.size
	}
}

// The memos of this process. Parsed, a stat cache of 12,000 entries takes
// 3 MB and a listing 1-2 MB: each memo holds 60,000 entries at most (five
// such runs, or one of 50,000 files; some 25 MB in all), and spares a
// change set of a 12,000-file clone 10-15 ms of parsing.
const memoEntries = 60_000

var (
	statMemo = newMemo[map[string]cached](memoEntries)
	treeMemo = newMemo[*baseTree](memoEntries)
	// namesMemo keeps RevTree.Names' answers for a full commit id: each
	// directory's names (nil where the commit has no such directory).
	namesMemo = newMemo[[]string](memoEntries)
)
