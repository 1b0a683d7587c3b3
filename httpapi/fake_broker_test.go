package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/paddock-dev/paddock"
	"github.com/paddock-dev/paddock/redact"
	"github.com/paddock-dev/paddock/tools"
)

// fakeBroker runs no command: Exec answers "out", ExecStream writes
// "out" and "err", ExecAttach echoes. Its redactor masks the run's one
// declared secret (fakeState.secret).
type fakeBroker struct{ *fakeState }

var _ Broker = fakeBroker{}

func (f fakeBroker) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	// As the broker: the run is read, then the call's key claimed before
	// any effect (recorded here).
	if f.beforeGate != nil {
		f.beforeGate()
	}
	if err := paddock.AwaitClaim(ctx); err != nil {
		return nil, err
	}
	if err := f.record(ctx, "Exec", id, req.Argv, req.Net); err != nil {
		return nil, err
	}
	if f.afterExec != nil {
		paddock.AfterAnswer(ctx, f.afterExec)
	}
	return &paddock.ExecResult{Stdout: "out"}, nil
}

func (f fakeBroker) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	if err := f.record(ctx, "ExecStream", id, req.Argv, req.Net); err != nil {
		return nil, err
	}
	if f.afterExec != nil {
		paddock.AfterAnswer(ctx, f.afterExec)
	}
	io.WriteString(stdout, "out")
	io.WriteString(stderr, "err")
	return &paddock.ExecResult{Stdout: "out", Stderr: "err"}, nil
}

// ExecAttach echoes: each terminal size it is told, then everything its
// stdin brings, until its end; its exit code is the bytes it read.
func (f fakeBroker) ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	term := "none"
	if req.Terminal != nil {
		term = fmt.Sprintf("%dx%d", req.Terminal.Rows, req.Terminal.Cols)
	}
	if err := f.record(ctx, "ExecAttach", id, req.Argv, req.Net, term); err != nil {
		return nil, err
	}
	if req.Argv[0] == "noread" { // a command busy elsewhere: it reads nothing
		<-ctx.Done()
		f.mu.Lock()
		f.gone[id] = true
		f.mu.Unlock()
		return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
	}
	got := make(chan []byte)
	go func() {
		defer close(got)
		buf := make([]byte, 4096)
		for {
			n, err := streams.Stdin.Read(buf)
			if n > 0 {
				got <- append([]byte(nil), buf[:n]...)
			}
			if err != nil {
				return
			}
		}
	}()
	read := 0
	resize := streams.Resize
	for {
		select {
		case <-ctx.Done():
			f.mu.Lock()
			f.gone[id] = true
			f.mu.Unlock()
			return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
		case sz, ok := <-resize:
			if !ok {
				resize = nil
				continue
			}
			fmt.Fprintf(streams.Stdout, "[size %dx%d]", sz.Rows, sz.Cols)
		case b, ok := <-got:
			if !ok && ctx.Err() != nil { // the client went: both are ready
				f.mu.Lock()
				f.gone[id] = true
				f.mu.Unlock()
				return nil, paddock.Errorf(paddock.CodeConflict, "the client went away")
			}
			if !ok {
				io.WriteString(streams.Stderr, "[eof]")
				return &paddock.ExecResult{ExitCode: read, Stdout: "not streamed again"}, nil
			}
			read += len(b)
			streams.Stdout.Write(b)
		}
	}
}

func (f fakeBroker) Tools(ctx context.Context, id string) ([]*tools.Tool, error) {
	return nil, f.record(ctx, "Tools", id)
}

func (f fakeBroker) CallTool(ctx context.Context, id, name string, args json.RawMessage) (any, error) {
	if err := paddock.AwaitClaim(ctx); err != nil { // as Exec
		return nil, err
	}
	if err := f.record(ctx, "CallTool", id, name, string(args)); err != nil {
		return nil, err
	}
	return map[string]string{"tool": name}, nil
}

func (f fakeBroker) Deliver(ctx context.Context, id, name string, body io.Reader, lim tools.InboxLimits) (*paddock.InboxResult, error) {
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, paddock.Errorf(paddock.CodeTooLarge, "inbox: %v", err)
	}
	return &paddock.InboxResult{}, f.record(ctx, "Deliver", id, name, string(b), lim.MaxFile)
}

func (f fakeBroker) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	return &paddock.Capabilities{Run: id}, f.record(ctx, "Capabilities", id)
}

func (f fakeBroker) RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	return &paddock.AccessRequest{ID: "q-1", RunID: id, Kind: in.Kind, State: paddock.RequestPending}, f.record(ctx, "RequestAccess", id, in.Kind)
}

func (f fakeBroker) AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error) {
	return nil, f.record(ctx, "AccessRequests", id)
}

func (f fakeBroker) DecideAccess(ctx context.Context, id, reqID string, grant bool, by, note string) (*paddock.AccessRequest, error) {
	return &paddock.AccessRequest{ID: reqID, RunID: id}, f.record(ctx, "DecideAccess", id, reqID, grant, by)
}

func (f fakeBroker) Redactor(ctx context.Context, id string) (*redact.Redactor, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.runs[id] == nil {
		return nil, paddock.Errorf(paddock.CodeNotFound, "no run %s", id)
	}
	secrets := map[string]string{}
	if v, ok := f.secret[id]; ok {
		name, value, _ := strings.Cut(v, "=")
		secrets[name] = value
	}
	return redact.New(secrets), nil
}
