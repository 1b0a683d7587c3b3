// Package client is the typed Go client of paddock's /v1 API, used by the
// CLI and by orchestrators. Errors from the daemon come back as
// *paddock.Error with the daemon's code and public message; a daemon that
// cannot be reached gives an error for which Unreachable is true.
package client

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/paddock-dev/paddock"
)

// Client talks to one daemon. It is paddock.Service over the API.
type Client struct {
	base  string
	token string
	agent bool // calls made for a run's agent (ForAgent)
	http  *http.Client
}

var _ paddock.Service = (*Client)(nil)

// Unix returns a client for the daemon listening on the unix socket at path.
func Unix(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}
	return &Client{base: "http://paddock", http: &http.Client{Transport: tr}}
}

// TCP returns a client for a daemon on a loopback address such as
// 127.0.0.1:7070, authenticating with token.
func TCP(addr, token string) *Client {
	return &Client{base: "http://" + addr, token: token, http: &http.Client{}}
}

// unreachableError wraps a failure to reach the daemon at all.
type unreachableError struct{ err error }

func (e *unreachableError) Error() string { return "paddock daemon unreachable: " + e.err.Error() }
func (e *unreachableError) Unwrap() error { return e.err }

// transportError says what failed on the way to or from the daemon: the
// request (what), and the cause without the URL the http package repeats.
// It carries no "paddock:" prefix: whoever prints it adds its own.
func transportError(what string, err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return fmt.Errorf("%s: the daemon closed the connection without finishing its answer (did it stop? see its log): %w", what, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// Unreachable reports whether err means no daemon answered (nothing listens
// on the socket or port).
func Unreachable(err error) bool {
	var u *unreachableError
	return errors.As(err, &u)
}

type envelope struct {
	OK    bool            `json:"ok"`
	Data  json.RawMessage `json:"data"`
	Error *paddock.Error  `json:"error"`
}

func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		if err := notUTF8(in); err != nil {
			return err
		}
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
		return c.doRaw(ctx, method, path, body, "application/json", out)
	}
	return c.doRaw(ctx, method, path, nil, "", out)
}

func (c *Client) doRaw(ctx context.Context, method, path string, body io.Reader, contentType string, out any) error {
	resp, err := c.send(ctx, method, path, body, contentType)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return fmt.Errorf("%s %s: status %d with an unreadable answer: %w", method, path, resp.StatusCode, err)
	}
	if !env.OK {
		return fmt.Errorf("%s %s: status %d without an error", method, path, resp.StatusCode)
	}
	if out != nil {
		if err := json.Unmarshal(env.Data, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

// send makes a request and returns a successful answer for its caller to
// read; an answer that is not a success is decoded into its error.
func (c *Client) send(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &unreachableError{err}
		}
		return nil, transportError(method+" "+strings.TrimSuffix(path, "?"), err)
	}
	if resp.StatusCode < 300 {
		return resp, nil
	}
	defer resp.Body.Close()
	var env envelope
	if err := json.NewDecoder(resp.Body).Decode(&env); err != nil {
		return nil, fmt.Errorf("%s %s: status %d with an unreadable answer: %w", method, path, resp.StatusCode, err)
	}
	if env.Error == nil {
		return nil, fmt.Errorf("%s %s: status %d without an error", method, path, resp.StatusCode)
	}
	return nil, env.Error
}

// Health checks that the daemon answers.
func (c *Client) Health(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil)
}

// Status describes the daemon.
func (c *Client) Status(ctx context.Context) (*paddock.DaemonStatus, error) {
	var s paddock.DaemonStatus
	return &s, c.do(ctx, http.MethodGet, "/v1/status", nil, &s)
}

// Doctor asks the daemon what it can enforce on this machine, probed in its
// own process (the one that builds every sandbox).
func (c *Client) Doctor(ctx context.Context) (*paddock.DoctorReport, error) {
	var d paddock.DoctorReport
	return &d, c.do(ctx, http.MethodGet, "/v1/doctor", nil, &d)
}

// AddProject declares a project.
func (c *Client) AddProject(ctx context.Context, req paddock.AddProjectRequest) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, http.MethodPost, "/v1/projects", req, &p)
}

// Projects lists the projects.
func (c *Client) Projects(ctx context.Context) ([]*paddock.Project, error) {
	var ps []*paddock.Project
	return ps, c.do(ctx, http.MethodGet, "/v1/projects", nil, &ps)
}

// Project returns one project.
func (c *Client) Project(ctx context.Context, name string) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, http.MethodGet, "/v1/projects/"+url.PathEscape(name), nil, &p)
}

// SetProject changes a project's settings; those req leaves out keep their values.
func (c *Client) SetProject(ctx context.Context, name string, req paddock.SetProjectRequest) (*paddock.Project, error) {
	var p paddock.Project
	return &p, c.do(ctx, http.MethodPatch, "/v1/projects/"+url.PathEscape(name), req, &p)
}

// RemoveProject forgets a project.
func (c *Client) RemoveProject(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/projects/"+url.PathEscape(name), nil, nil)
}

// Unlock force-releases a project's lock.
func (c *Client) Unlock(ctx context.Context, name string, force bool) (*paddock.UnlockResult, error) {
	var res paddock.UnlockResult
	return &res, c.do(ctx, http.MethodPost, "/v1/projects/"+url.PathEscape(name)+"/unlock", paddock.UnlockRequest{Force: force}, &res)
}

// Create makes a run and its workspace.
func (c *Client) Create(ctx context.Context, req paddock.CreateRunRequest) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, http.MethodPost, "/v1/runs", req, &r)
}

// Runs lists runs, of one project if f.Project is set, removed ones too
// if f.Removed.
func (c *Client) Runs(ctx context.Context, f paddock.RunFilter) ([]*paddock.Run, error) {
	q := url.Values{}
	if f.Project != "" {
		q.Set("project", f.Project)
	}
	if f.Removed {
		q.Set("all", "true")
	}
	var rs []*paddock.Run
	return rs, c.do(ctx, http.MethodGet, "/v1/runs?"+q.Encode(), nil, &rs)
}

// Run returns one run.
func (c *Client) Run(ctx context.Context, id string) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id), nil, &r)
}

func (c *Client) runAction(ctx context.Context, id, action string, in any) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/"+action, in, &r)
}

// Retain keeps a run's workspace for good.
func (c *Client) Retain(ctx context.Context, id string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "retain", nil)
}

// Review makes (or finds) the review run of run id's submitted change set.
func (c *Client) Review(ctx context.Context, id, agent string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "review", paddock.ReviewRequest{Agent: agent})
}

// Fork freezes overlay run id's files into a layer and makes req.Count
// runs stacked on it.
func (c *Client) Fork(ctx context.Context, id string, req paddock.ForkRequest) (*paddock.ForkResult, error) {
	var res paddock.ForkResult
	return &res, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/fork", req, &res)
}

// StartFlow starts a workflow's flow.
func (c *Client) StartFlow(ctx context.Context, req paddock.StartFlowRequest) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, http.MethodPost, "/v1/flows", req, &f)
}

// Flows lists a project's flows (all, if project is empty).
func (c *Client) Flows(ctx context.Context, project string) ([]*paddock.Flow, error) {
	var fs []*paddock.Flow
	q := ""
	if project != "" {
		q = "?project=" + url.QueryEscape(project)
	}
	return fs, c.do(ctx, http.MethodGet, "/v1/flows"+q, nil, &fs)
}

// Flow returns a flow, with its log.
func (c *Client) Flow(ctx context.Context, id string) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, http.MethodGet, "/v1/flows/"+url.PathEscape(id), nil, &f)
}

// PickEvent takes an event from run id's menu.
func (c *Client) PickEvent(ctx context.Context, id, event string, req paddock.MenuEventRequest) (*paddock.Flow, error) {
	var f paddock.Flow
	return &f, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/menu/"+url.PathEscape(event), req, &f)
}

// Reject discards a run's result.
func (c *Client) Reject(ctx context.Context, id string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "reject", nil)
}

// Checkpoint records a run's workspace state and detaches its session.
func (c *Client) Checkpoint(ctx context.Context, id, reason string) (*paddock.Run, error) {
	return c.runAction(ctx, id, "checkpoint", paddock.CheckpointRequest{Reason: reason})
}

// Resume attaches a session to a run again.
func (c *Client) Resume(ctx context.Context, id string) (*paddock.ResumeResult, error) {
	var res paddock.ResumeResult
	return &res, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/resume", nil, &res)
}

// Remove deletes a run's workspace and hides the run.
func (c *Client) Remove(ctx context.Context, id string) (*paddock.Run, error) {
	var r paddock.Run
	return &r, c.do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(id), nil, &r)
}

// Events returns up to limit events after seq after.
func (c *Client) Events(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	return c.events(ctx, id, after, limit, 0)
}

// maxWait is the longest the daemon holds an events request (httpapi.MaxWait).
const maxWait = 60 * time.Second

// WaitEvents is Events, but when there are none yet it waits for the next
// until ctx ends, then returns what there is (possibly nothing). The daemon
// holds each request up to a minute; WaitEvents asks again until ctx ends.
func (c *Client) WaitEvents(ctx context.Context, id string, after int64, limit int) ([]*paddock.Event, error) {
	for {
		wait := maxWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		if wait <= 0 || ctx.Err() != nil {
			return nil, nil
		}
		evs, err := c.events(ctx, id, after, limit, wait)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, nil // ctx ended while the daemon waited: nothing came
		case err != nil || len(evs) > 0:
			return evs, err
		}
	}
}

// events asks for events; with wait > 0 an empty answer is held by the
// daemon until an event arrives or wait passes.
func (c *Client) events(ctx context.Context, id string, after int64, limit int, wait time.Duration) ([]*paddock.Event, error) {
	q := url.Values{"after": {strconv.FormatInt(after, 10)}}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	if wait > 0 {
		q.Set("wait", wait.String())
	}
	var evs []*paddock.Event
	return evs, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/events?"+q.Encode(), nil, &evs)
}

// GC reconciles records and disk; with dryRun it only reports.
func (c *Client) GC(ctx context.Context, dryRun bool) ([]paddock.Finding, error) {
	var f []paddock.Finding
	return f, c.do(ctx, http.MethodPost, "/v1/gc", paddock.GCRequest{DryRun: dryRun}, &f)
}

// Tools lists the working tools a run is offered, with their JSON schemas.
func (c *Client) Tools(ctx context.Context, id string) ([]ToolInfo, error) {
	var ts []ToolInfo
	return ts, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/tools", nil, &ts)
}

// ToolInfo describes one working tool.
type ToolInfo struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"input_schema"`
	Writes      bool            `json:"writes"`
}

// CallTool runs a working tool in a run's workspace; args is its JSON object
// of arguments. The result is the tool's structured answer.
func (c *Client) CallTool(ctx context.Context, id, name string, args any) (json.RawMessage, error) {
	var out json.RawMessage
	return out, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/tools/"+url.PathEscape(name), args, &out)
}

// Deliver uploads a file into a run's inbox (.paddock/inbox/ of its workspace).
func (c *Client) Deliver(ctx context.Context, id, name string, body io.Reader) (*paddock.InboxResult, error) {
	var res paddock.InboxResult
	return &res, c.doRaw(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/inbox?name="+url.QueryEscape(name), body, "application/octet-stream", &res)
}

// Exec runs a command in a run's workspace, confined, and returns its result.
func (c *Client) Exec(ctx context.Context, id string, req paddock.ExecRequest) (*paddock.ExecResult, error) {
	var res paddock.ExecResult
	return &res, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/exec", req, &res)
}

// ExecStream runs a command like Exec, writing its output to stdout and
// stderr as it comes; the result it returns has no output of its own.
func (c *Client) ExecStream(ctx context.Context, id string, req paddock.ExecRequest, stdout, stderr io.Writer) (*paddock.ExecResult, error) {
	if err := notUTF8(req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/runs/"+url.PathEscape(id)+"/exec/stream", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	c.authorize(hreq)
	resp, err := c.http.Do(hreq)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &unreachableError{err}
		}
		return nil, transportError("exec", err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "application/x-ndjson" {
		var env envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error == nil {
			return nil, fmt.Errorf("exec: status %d", resp.StatusCode)
		}
		return nil, env.Error
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var line struct {
			Stream string              `json:"stream"`
			Data   []byte              `json:"data"`
			Result *paddock.ExecResult `json:"result"`
			Error  *paddock.Error      `json:"error"`
		}
		if err := dec.Decode(&line); err != nil {
			return nil, transportError("exec: the stream ended early", err)
		}
		switch {
		case line.Error != nil:
			return nil, line.Error
		case line.Result != nil:
			return line.Result, nil
		case line.Stream == "stdout" && stdout != nil:
			stdout.Write(line.Data)
		case line.Stream == "stderr" && stderr != nil:
			stderr.Write(line.Data)
		}
	}
}

// ExecAttach runs a command like ExecStream, attached (POST
// /v1/runs/{id}/exec/attach, an HTTP/1.1 upgrade): streams.Stdin is sent
// as it is read, its end as the end of stdin, and streams.Resize's sizes
// as the terminal's when req asks for one (req.Terminal). It returns when
// the daemon sends the result; a read of streams.Stdin that blocks is the
// caller's to end. Ending ctx drops the connection, which ends the command.
func (c *Client) ExecAttach(ctx context.Context, id string, req paddock.ExecRequest, streams paddock.ExecIO) (*paddock.ExecResult, error) {
	if err := notUTF8(req); err != nil {
		return nil, err
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/v1/runs/"+url.PathEscape(id)+"/exec/attach", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Connection", "Upgrade")
	hreq.Header.Set("Upgrade", paddock.AttachProtocol)
	c.authorize(hreq)
	resp, err := c.http.Do(hreq)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return nil, &unreachableError{err}
		}
		return nil, transportError("exec", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		var env envelope
		if err := json.NewDecoder(resp.Body).Decode(&env); err != nil || env.Error == nil {
			return nil, fmt.Errorf("exec: status %d", resp.StatusCode)
		}
		return nil, env.Error
	}
	conn, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		resp.Body.Close()
		return nil, fmt.Errorf("exec: the connection was not switched over")
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	var mu sync.Mutex
	send := func(kind byte, p []byte) error {
		mu.Lock()
		defer mu.Unlock()
		return paddock.WriteFrame(conn, kind, p)
	}
	done := make(chan struct{})
	defer close(done)
	if streams.Stdin != nil {
		go func() {
			buf := make([]byte, 32<<10)
			for {
				n, err := streams.Stdin.Read(buf)
				if n > 0 && send(paddock.FrameStdin, buf[:n]) != nil {
					return
				}
				if err != nil {
					if err == io.EOF {
						send(paddock.FrameEOF, nil)
					}
					return
				}
			}
		}()
	}
	if streams.Resize != nil {
		go func() {
			for {
				select {
				case sz, ok := <-streams.Resize:
					if !ok {
						return
					}
					b, _ := json.Marshal(sz)
					if send(paddock.FrameResize, b) != nil {
						return
					}
				case <-done:
					return
				}
			}
		}()
	}
	for {
		kind, p, err := paddock.ReadFrame(conn, paddock.MaxFrame)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, transportError("exec: the stream ended early", err)
		}
		switch kind {
		case paddock.FrameStdout:
			if streams.Stdout != nil {
				streams.Stdout.Write(p)
			}
		case paddock.FrameStderr:
			if streams.Stderr != nil {
				streams.Stderr.Write(p)
			}
		case paddock.FrameResult:
			var end paddock.AttachEnd
			if err := json.Unmarshal(p, &end); err != nil {
				return nil, fmt.Errorf("exec: an unreadable result: %w", err)
			}
			if end.Error != nil {
				return nil, end.Error
			}
			if end.Result == nil {
				return nil, fmt.Errorf("exec: the daemon ended without a result")
			}
			return end.Result, nil
		}
	}
}

// Follow streams a run's events from after seq after to fn, over SSE, until
// ctx ends or fn returns an error. It reconnects on its own where it left
// off (Last-Event-ID), so fn sees every event once, in order.
func (c *Client) Follow(ctx context.Context, id string, after int64, fn func(*paddock.Event) error) error {
	for ctx.Err() == nil {
		err := c.follow(ctx, id, &after, fn)
		var pe *paddock.Error
		var stop stopError
		switch {
		case errors.As(err, &stop):
			return stop.err
		case errors.As(err, &pe), ctx.Err() != nil:
			return err
		}
		select { // the connection dropped: reconnect
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return ctx.Err()
}

// stopError carries the error fn returned, to end Follow with it.
type stopError struct{ err error }

func (e stopError) Error() string { return e.err.Error() }

func (c *Client) follow(ctx context.Context, id string, after *int64, fn func(*paddock.Event) error) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/runs/"+url.PathEscape(id)+"/events/stream", nil)
	if err != nil {
		return err
	}
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	req.Header.Set("Accept", "text/event-stream")
	c.authorize(req)
	resp, err := c.http.Do(req)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED) {
			return &unreachableError{err}
		}
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var env envelope
		if json.NewDecoder(resp.Body).Decode(&env) == nil && env.Error != nil {
			return env.Error
		}
		return fmt.Errorf("events: status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data[:0], line[6:]...)
		case len(line) == 0 && len(data) > 0:
			var e paddock.Event
			if err := json.Unmarshal(data, &e); err != nil {
				return fmt.Errorf("events: %w", err)
			}
			data = data[:0]
			if e.Seq <= *after {
				continue // already seen
			}
			if err := fn(&e); err != nil {
				return stopError{err}
			}
			*after = e.Seq
		}
	}
	return sc.Err()
}

// ChangeSet computes a run's change set now.
func (c *Client) ChangeSet(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	var cs paddock.ChangeSet
	return &cs, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/changeset", nil, &cs)
}

// ChangeSetDiff opens the whole diff of a run's change set, as the daemon
// streams it: the one with hash, or, with no hash, the change set as it is
// now. It returns the change set's hash; the caller closes the reader.
func (c *Client) ChangeSetDiff(ctx context.Context, id, hash string) (io.ReadCloser, string, error) {
	path := "/v1/runs/" + url.PathEscape(id) + "/changeset/diff"
	if hash != "" {
		path += "?hash=" + url.QueryEscape(hash)
	}
	resp, err := c.send(ctx, http.MethodGet, path, nil, "")
	if err != nil {
		return nil, "", err
	}
	return resp.Body, resp.Header.Get(paddock.ChangeSetHashHeader), nil
}

// CopyDiff streams the diff ChangeSetDiff opens to w, and returns the
// change set's hash.
func (c *Client) CopyDiff(ctx context.Context, id, hash string, w io.Writer) (string, error) {
	d, h, err := c.ChangeSetDiff(ctx, id, hash)
	if err != nil {
		return "", err
	}
	defer d.Close()
	if _, err := io.Copy(w, d); err != nil {
		return "", fmt.Errorf("reading the diff: %w", err)
	}
	return h, nil
}

// Submit freezes a run's change set as it is now.
func (c *Client) Submit(ctx context.Context, id string) (*paddock.ChangeSet, error) {
	var cs paddock.ChangeSet
	return &cs, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/submit", nil, &cs)
}

// SubmitExpecting freezes a run's change set only if its hash is still
// hash, the one reviewed; a workspace changed since gives a conflict.
func (c *Client) SubmitExpecting(ctx context.Context, id, hash string) (*paddock.ChangeSet, error) {
	var cs paddock.ChangeSet
	return &cs, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/submit", paddock.SubmitRequest{ExpectHash: hash}, &cs)
}

// Approve approves the frozen change set with this hash.
func (c *Client) Approve(ctx context.Context, id, hash string) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/approve", paddock.ApproveRequest{Hash: hash}, &s)
}

// Apply commits the approved change set to a new branch of the project.
func (c *Client) Apply(ctx context.Context, id string, req paddock.ApplyRequest) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/apply", req, &s)
}

// Undo reverses an apply into the working tree.
func (c *Client) Undo(ctx context.Context, id string) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/undo", nil, &s)
}

// authorize sets what a request says of its caller.
func (c *Client) authorize(req *http.Request) {
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.agent {
		req.Header.Set(paddock.AgentHeader, "1")
	}
}

// ForAgent returns a copy of c whose calls are made for a run's agent (as
// paddock mcp makes them): a run a daemon restart checkpointed is resumed
// by the agent's next call.
func (c *Client) ForAgent() *Client {
	cp := *c
	cp.agent = true
	return &cp
}

// WithToken returns a copy of c that authenticates with token (a run's
// token from Bootstrap, or the daemon's).
func (c *Client) WithToken(token string) *Client {
	cp := *c
	cp.token = token
	return &cp
}

// Bootstrap binds a new run to an agent and a task, and returns its token.
func (c *Client) Bootstrap(ctx context.Context, req paddock.BootstrapRequest) (*paddock.BootstrapResult, error) {
	var res paddock.BootstrapResult
	return &res, c.do(ctx, http.MethodPost, "/v1/bootstrap", req, &res)
}

// Artifact returns one of a run's artifacts.
func (c *Client) Artifact(ctx context.Context, id, kind string) (*paddock.Artifact, error) {
	var a paddock.Artifact
	return &a, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/artifacts/"+url.PathEscape(kind), nil, &a)
}

// StartJob starts a job in a run.
func (c *Client) StartJob(ctx context.Context, id string, req paddock.StartJobRequest) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/jobs", req, &j)
}

// Job returns a job's status.
func (c *Client) Job(ctx context.Context, id, job string) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/jobs/"+url.PathEscape(job), nil, &j)
}

// CancelJob cancels a running job.
func (c *Client) CancelJob(ctx context.Context, id, job string) (*paddock.Job, error) {
	var j paddock.Job
	return &j, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/jobs/"+url.PathEscape(job)+"/cancel", nil, &j)
}

// Jobs lists a run's jobs, newest first.
func (c *Client) Jobs(ctx context.Context, id string) ([]*paddock.Job, error) {
	var js []*paddock.Job
	return js, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/jobs", nil, &js)
}

// OpenAPI returns the daemon's OpenAPI 3 document of its API, as served.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, "/v1/openapi.json", nil, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(io.LimitReader(resp.Body, 16<<20))
}

// WithObserver returns a copy of c that calls see with every request it
// sends, before sending it: for tests that check which routes a script
// used, and for tracing.
func (c *Client) WithObserver(see func(*http.Request)) *Client {
	cp := *c
	h := *c.http
	next := h.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	h.Transport = observer{see: see, next: next}
	cp.http = &h
	return &cp
}

type observer struct {
	see  func(*http.Request)
	next http.RoundTripper
}

func (o observer) RoundTrip(r *http.Request) (*http.Response, error) {
	o.see(r)
	return o.next.RoundTrip(r)
}

func runPath(id string, rest ...string) string {
	p := "/v1/runs/" + url.PathEscape(id)
	for _, r := range rest {
		p += "/" + url.PathEscape(r)
	}
	return p
}

// AddAgent stores an agent definition (its TOML), replacing one of its name.
func (c *Client) AddAgent(ctx context.Context, req paddock.AddAgentRequest) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	return &a, c.do(ctx, http.MethodPost, "/v1/agents", req, &a)
}

// Agents lists the built-in and stored agent definitions.
func (c *Client) Agents(ctx context.Context) ([]*paddock.AgentRecord, error) {
	var as []*paddock.AgentRecord
	return as, c.do(ctx, http.MethodGet, "/v1/agents", nil, &as)
}

// Agent returns an agent definition by name.
func (c *Client) Agent(ctx context.Context, name string) (*paddock.AgentRecord, error) {
	var a paddock.AgentRecord
	return &a, c.do(ctx, http.MethodGet, "/v1/agents/"+url.PathEscape(name), nil, &a)
}

// RemoveAgent removes a stored definition; runs made with it keep theirs.
func (c *Client) RemoveAgent(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, "/v1/agents/"+url.PathEscape(name), nil, nil)
}

// Capabilities says what a run may do now.
func (c *Client) Capabilities(ctx context.Context, id string) (*paddock.Capabilities, error) {
	var caps paddock.Capabilities
	return &caps, c.do(ctx, http.MethodGet, runPath(id, "capabilities"), nil, &caps)
}

// RequestAccess files a request for more than the run's definition grants.
func (c *Client) RequestAccess(ctx context.Context, id string, in paddock.AccessRequestInput) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, http.MethodPost, runPath(id, "requests"), in, &q)
}

// AccessRequests lists a run's access requests, oldest first.
func (c *Client) AccessRequests(ctx context.Context, id string) ([]*paddock.AccessRequest, error) {
	var qs []*paddock.AccessRequest
	return qs, c.do(ctx, http.MethodGet, runPath(id, "requests"), nil, &qs)
}

// Grant grants a run's pending access request (operator credentials only).
func (c *Client) Grant(ctx context.Context, id, req, note string) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, http.MethodPost, runPath(id, "requests", req, "grant"), paddock.DecideRequest{Note: note}, &q)
}

// Deny denies a run's pending access request (operator credentials only).
func (c *Client) Deny(ctx context.Context, id, req, note string) (*paddock.AccessRequest, error) {
	var q paddock.AccessRequest
	return &q, c.do(ctx, http.MethodPost, runPath(id, "requests", req, "deny"), paddock.DecideRequest{Note: note}, &q)
}

// Verify runs the project manifest's checks in the run.
func (c *Client) Verify(ctx context.Context, id string, req paddock.VerifyRequest) (*paddock.VerifyResult, error) {
	var v paddock.VerifyResult
	return &v, c.do(ctx, http.MethodPost, runPath(id, "verify"), req, &v)
}

// ProjectManifest returns what verify runs in a new run of the project.
func (c *Client) ProjectManifest(ctx context.Context, name string) (json.RawMessage, error) {
	var raw json.RawMessage
	return raw, c.do(ctx, http.MethodGet, "/v1/projects/"+url.PathEscape(name)+"/manifest", nil, &raw)
}

// MCP returns the URL of run id's MCP endpoint (streamable HTTP) and an
// http.Client that reaches it as c does: the same connection (the unix
// socket, or TCP), c's credentials. Give both to an MCP client's
// streamable HTTP transport.
func (c *Client) MCP(id string) (string, *http.Client) {
	h := *c.http
	next := h.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	h.Transport = authorizer{c: c, next: next}
	return c.base + runPath(id, "mcp"), &h
}

type authorizer struct {
	c    *Client
	next http.RoundTripper
}

func (a authorizer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	a.c.authorize(r)
	return a.next.RoundTrip(r)
}

// UILogin asks for a one-time login URL to the review page.
func (c *Client) UILogin(ctx context.Context) (*paddock.UILogin, error) {
	var l paddock.UILogin
	return &l, c.do(ctx, http.MethodPost, "/v1/ui/login", nil, &l)
}

// Bundle streams run id's signed bundle to w.
func (c *Client) Bundle(ctx context.Context, id string, w io.Writer) error {
	resp, err := c.send(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/bundle", nil, "")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("reading the bundle: %w", err)
	}
	return nil
}

// BundleKey returns the public key the daemon signs bundles with.
func (c *Client) BundleKey(ctx context.Context) (*paddock.BundleKey, error) {
	var k paddock.BundleKey
	return &k, c.do(ctx, http.MethodGet, "/v1/bundle-key", nil, &k)
}

// Import restores a run from the bundle body holds.
func (c *Client) Import(ctx context.Context, req paddock.ImportRequest, body io.Reader) (*paddock.ImportResult, error) {
	q := url.Values{}
	if req.Project != "" {
		q.Set("project", req.Project)
	}
	if req.Kind != "" {
		q.Set("kind", req.Kind)
	}
	for _, k := range req.Trust {
		q.Add("trust", k)
	}
	if req.Untrusted {
		q.Set("untrusted", "true")
	}
	var res paddock.ImportResult
	return &res, c.doRaw(ctx, http.MethodPost, "/v1/import?"+q.Encode(), body, "application/vnd.paddock.bundle+tar", &res)
}

// QueueAdd puts an approved run in its project's merge queue.
func (c *Client) QueueAdd(ctx context.Context, id string, req paddock.QueueAddRequest) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/queue", req, &e)
}

// Queue lists the merge queue (of project, if named; finished entries too if all).
func (c *Client) Queue(ctx context.Context, project string, all bool) ([]*paddock.QueueEntry, error) {
	q := url.Values{}
	if project != "" {
		q.Set("project", project)
	}
	if all {
		q.Set("all", "true")
	}
	var es []*paddock.QueueEntry
	return es, c.do(ctx, http.MethodGet, "/v1/queue?"+q.Encode(), nil, &es)
}

// QueueEntry returns a run's newest queue entry.
func (c *Client) QueueEntry(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, http.MethodGet, "/v1/runs/"+url.PathEscape(id)+"/queue", nil, &e)
}

// QueueRemove takes a run out of the merge queue.
func (c *Client) QueueRemove(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, http.MethodDelete, "/v1/runs/"+url.PathEscape(id)+"/queue", nil, &e)
}

// QueueUndo moves back the branch a queued run landed on.
func (c *Client) QueueUndo(ctx context.Context, id string) (*paddock.QueueEntry, error) {
	var e paddock.QueueEntry
	return &e, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/queue/undo", nil, &e)
}

// ApproveHunks approves only these hunks of the submitted change set hash.
func (c *Client) ApproveHunks(ctx context.Context, id, hash string, hunks []int) (*paddock.Submission, error) {
	var s paddock.Submission
	return &s, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/approve", paddock.ApproveRequest{Hash: hash, Hunks: hunks}, &s)
}

// Blame says which calls wrote each hunk of a run's change set (the
// submitted one with hash, or the live one when hash is empty).
func (c *Client) Blame(ctx context.Context, id, hash string) (*paddock.Blame, error) {
	path := "/v1/runs/" + url.PathEscape(id) + "/changeset/blame"
	if hash != "" {
		path += "?hash=" + url.QueryEscape(hash)
	}
	var b paddock.Blame
	return &b, c.do(ctx, http.MethodGet, path, nil, &b)
}

// Nodes lists the nodes that share the daemon's store (unsupported on a
// daemon of its own).
func (c *Client) Nodes(ctx context.Context) ([]paddock.Node, error) {
	var out []paddock.Node
	return out, c.do(ctx, http.MethodGet, "/v1/nodes", nil, &out)
}

// Adopt restores a lost node's run on the node the client talks to, from
// its checkpoint in the shared store, and takes over its interrupted job.
func (c *Client) Adopt(ctx context.Context, id string) (*paddock.AdoptResult, error) {
	var res paddock.AdoptResult
	return &res, c.do(ctx, http.MethodPost, "/v1/runs/"+url.PathEscape(id)+"/adopt", nil, &res)
}

// ProjectCheckout says how many uncommitted changes the project's checkout
// holds, as the daemon reads it (a new run does not start with them).
func (c *Client) ProjectCheckout(ctx context.Context, name string) (*paddock.CheckoutStatus, error) {
	var s paddock.CheckoutStatus
	return &s, c.do(ctx, http.MethodGet, "/v1/projects/"+url.PathEscape(name)+"/checkout", nil, &s)
}
