package paddock

import "testing"

func TestNoticeOf(t *testing.T) {
	for _, c := range []struct {
		typ, data, want string
		ok              bool
	}{
		{EventSubmitted, `{"hash":"h"}`, EventSubmitted, true},
		{EventJobInterrupted, ``, EventJobInterrupted, true},
		{EventToolCall, `{}`, "", false},
		{EventUndone, `{}`, "", false},
		{TransitionEvent, `{"from":"active","to":"rejected"}`, NoticeRunRejected, true},
		{TransitionEvent, `{"from":"ready","to":"active"}`, "", false},
		{NoticeRunRejected, `{}`, "", false}, // only a transition is a rejection
	} {
		got, ok := NoticeOf(c.typ, []byte(c.data))
		if got != c.want || ok != c.ok {
			t.Errorf("NoticeOf(%s, %s) = %q, %v; want %q, %v", c.typ, c.data, got, ok, c.want, c.ok)
		}
	}
}
