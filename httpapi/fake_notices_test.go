package httpapi

import (
	"context"
	"encoding/json"
	"time"

	"github.com/paddock-dev/paddock"
)

// fakeNotices serves the notices of the fake state; WaitNotices waits
// for the next one.
type fakeNotices struct{ *fakeState }

var _ Notices = fakeNotices{}

func (f fakeNotices) WaitNotices(ctx context.Context, after int64, limit int) ([]*paddock.Notice, error) {
	if err := f.record(ctx, "WaitNotices", after, limit); err != nil {
		return nil, err
	}
	for {
		f.mu.Lock()
		var out []*paddock.Notice
		for _, n := range f.notices {
			if n.ID > after && len(out) < limit {
				out = append(out, n)
			}
		}
		ch := f.appended
		f.mu.Unlock()
		if len(out) > 0 {
			return out, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, nil
		}
	}
}

// notice adds a notice of type typ on run (the next id) and wakes the
// waiters.
func (f *fakeState) notice(run, typ string, data string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.notices = append(f.notices, &paddock.Notice{ID: int64(len(f.notices) + 1), Type: typ, RunID: run, Seq: int64(len(f.notices) + 10),
		Time: time.Now().UTC(), Project: "app", Data: json.RawMessage(data)})
	close(f.appended)
	f.appended = make(chan struct{})
}
