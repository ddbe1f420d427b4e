package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"time"

	"karvi-edda-temporal/internal/jsonmerge"
	"karvi-edda-temporal/internal/karvi"
)

// File names inside a task's directory.
const (
	BriefFile   = "brief.json"
	PatchesFile = "patches.jsonl"
	StatusFile  = "status.json"
)

// File is the embedded sink: <dir>/<taskID>/{brief.json, patches.jsonl,
// status.json}. brief.json and status.json are replaced atomically (temp
// file, fsync, rename), so a reader never sees a torn file. patches.jsonl
// is append-only and is an audit of what arrived, not of what is: a
// retried PATCH appears twice there while brief.json, being a merge, is the
// same after one application or two.
//
// Writes to one task are serialised within the process. Two processes
// writing the same task directory are not supported (one workflow owns a
// task, and its activities do not overlap).
type File struct {
	dir string
	now func() time.Time

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// FileOption configures NewFile.
type FileOption func(*File)

// WithClock sets the clock used for meta.updatedAt, patch receipt times and
// status history entries without an AskedAt (default time.Now).
func WithClock(now func() time.Time) FileOption {
	return func(f *File) { f.now = now }
}

// NewFile returns a file sink rooted at dir, creating dir if needed.
func NewFile(dir string, opts ...FileOption) (*File, error) {
	if dir == "" {
		return nil, errors.New("file sink: empty directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("file sink: create %s: %w", dir, err)
	}
	f := &File{dir: dir, now: time.Now, locks: map[string]*sync.Mutex{}}
	for _, o := range opts {
		o(f)
	}
	return f, nil
}

// Dir is the sink's root directory.
func (f *File) Dir() string { return f.dir }

// TaskDir is the directory holding taskID's files (not validated).
func (f *File) TaskDir(taskID string) string { return filepath.Join(f.dir, taskID) }

func (f *File) lock(taskID string) func() {
	f.mu.Lock()
	l, ok := f.locks[taskID]
	if !ok {
		l = &sync.Mutex{}
		f.locks[taskID] = l
	}
	f.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// PatchRecord is one line of patches.jsonl.
type PatchRecord struct {
	ReceivedAt string          `json:"receivedAt"`
	Body       json.RawMessage `json:"body"`
}

// PatchBrief merges body into brief.json by karvi's rules (objects merge,
// arrays and scalars replace, null is stored), stamps meta as karvi does,
// and appends body to patches.jsonl. Unlike karvi, a missing brief is
// created: the file sink has no separate PUT step.
func (f *File) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	const op = "file sink PATCH brief"
	if err := checkTaskID(op, taskID); err != nil {
		return err
	}
	patch, err := jsonmerge.DecodeObject(body)
	if err != nil {
		return badRequest(op, "task %s: %v", taskID, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	received := f.now()
	unlock := f.lock(taskID)
	defer unlock()

	tdir := f.TaskDir(taskID)
	if err := os.MkdirAll(tdir, 0o755); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	brief, err := f.readBrief(taskID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	merged := jsonmerge.Merge(brief, patch)
	jsonmerge.StampMeta(merged, taskID, received)
	if err := writeJSONAtomic(filepath.Join(tdir, BriefFile), merged); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, body); err != nil {
		compact.Reset()
		compact.WriteString("{}") // an empty body decoded as {}
	}
	line, err := json.Marshal(PatchRecord{ReceivedAt: received.UTC().Format(time.RFC3339Nano), Body: compact.Bytes()})
	if err != nil {
		return fmt.Errorf("%s %s: encode audit line: %w", op, taskID, err)
	}
	if err := appendLine(filepath.Join(tdir, PatchesFile), line); err != nil {
		return fmt.Errorf("%s %s: brief written, audit append failed: %w", op, taskID, err)
	}
	return nil
}

// CurrentBrief is Brief, for the Sink interface.
func (f *File) CurrentBrief(_ context.Context, taskID string) (map[string]any, error) {
	return f.Brief(taskID)
}

// Brief returns the task's brief.json, or nil when it does not exist.
func (f *File) Brief(taskID string) (map[string]any, error) {
	if err := checkTaskID("file sink read brief", taskID); err != nil {
		return nil, err
	}
	unlock := f.lock(taskID)
	defer unlock()
	if _, err := os.Stat(filepath.Join(f.TaskDir(taskID), BriefFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return f.readBrief(taskID)
}

func (f *File) readBrief(taskID string) (map[string]any, error) {
	raw, err := os.ReadFile(filepath.Join(f.TaskDir(taskID), BriefFile))
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]any{}, nil
	}
	if err != nil {
		return nil, err
	}
	m, err := jsonmerge.DecodeObject(raw)
	if err != nil {
		return nil, fmt.Errorf("%s is corrupt: %w", BriefFile, err)
	}
	return m, nil
}

// TaskStatus is the content of status.json.
type TaskStatus struct {
	Status string `json:"status"`
	// Blocker is null unless the task is blocked with a reason.
	Blocker  *Blocker      `json:"blocker"`
	Dispatch *Dispatch     `json:"dispatch,omitempty"`
	History  []StatusEntry `json:"history"`
}

// Blocker is task.blocker.
type Blocker struct {
	Reason  string `json:"reason"`
	AskedAt string `json:"askedAt"`
}

// Dispatch is the task's dispatch record: state, plan and lastError
// (docs/contract.md §7.4).
type Dispatch struct {
	State     string  `json:"state"`
	PlanID    string  `json:"planId,omitempty"`
	PlanName  string  `json:"planName,omitempty"`
	LastError *string `json:"lastError"`
}

// StatusEntry is one status change; a change that karvi makes through
// intermediate statuses (dispatched -> in_progress -> completed) has one
// entry per step.
type StatusEntry struct {
	At     string `json:"at"`
	From   string `json:"from,omitempty"`
	Status string `json:"status"`
	Reason string `json:"reason,omitempty"`
}

// SetStatus records u in status.json. The first status recorded for a task
// is taken as given; later ones must be reachable by karvi's legal
// transitions (karvi.PathTo), and every intermediate step is recorded. A
// status the task already has, with the same blocker and dispatch, writes
// nothing.
func (f *File) SetStatus(ctx context.Context, taskID string, u StatusUpdate) error {
	const op = "file sink set status"
	if err := checkTaskID(op, taskID); err != nil {
		return err
	}
	if err := checkUpdate(op, u); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	unlock := f.lock(taskID)
	defer unlock()

	cur, err := f.readStatus(taskID)
	if err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	next := cur
	next.History = append([]StatusEntry(nil), cur.History...)
	at := u.AskedAt
	if at == "" {
		at = jsonmerge.FormatTime(f.now())
	}

	var path []string
	if cur.Status == "" {
		path = []string{u.Status}
	} else if path, err = karvi.PathTo(cur.Status, u.Status); err != nil {
		return err
	}
	prev := cur.Status
	for i, st := range path {
		e := StatusEntry{At: at, From: prev, Status: st}
		if i == len(path)-1 && st == "blocked" {
			e.Reason = u.Reason
		}
		next.History = append(next.History, e)
		prev = st
	}
	next.Status = u.Status

	// Blocker: karvi sets it on blocked with a reason and clears it on any
	// other status; blocked without a reason keeps what was there.
	switch {
	case u.Status != "blocked":
		next.Blocker = nil
	case u.Reason != "" && (cur.Blocker == nil || cur.Blocker.Reason != u.Reason || len(path) > 0):
		next.Blocker = &Blocker{Reason: u.Reason, AskedAt: at}
	}
	if u.DispatchState != "" {
		d := &Dispatch{State: u.DispatchState, PlanID: u.PlanID, PlanName: u.PlanName}
		if u.LastError != "" {
			le := u.LastError
			d.LastError = &le
		}
		next.Dispatch = d
	}
	if len(path) == 0 && reflect.DeepEqual(next.Blocker, cur.Blocker) && reflect.DeepEqual(next.Dispatch, cur.Dispatch) {
		return nil
	}
	if err := os.MkdirAll(f.TaskDir(taskID), 0o755); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	if err := writeJSONAtomic(filepath.Join(f.TaskDir(taskID), StatusFile), next); err != nil {
		return fmt.Errorf("%s %s: %w", op, taskID, err)
	}
	return nil
}

// Status returns the task's status.json (zero TaskStatus when absent).
func (f *File) Status(taskID string) (TaskStatus, error) {
	if err := checkTaskID("file sink read status", taskID); err != nil {
		return TaskStatus{}, err
	}
	unlock := f.lock(taskID)
	defer unlock()
	return f.readStatus(taskID)
}

func (f *File) readStatus(taskID string) (TaskStatus, error) {
	var st TaskStatus
	raw, err := os.ReadFile(filepath.Join(f.TaskDir(taskID), StatusFile))
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return st, err
	}
	if err := json.Unmarshal(raw, &st); err != nil {
		return st, fmt.Errorf("%s is corrupt: %w", StatusFile, err)
	}
	return st, nil
}

// writeJSONAtomic replaces path with v's JSON: write a temp file in the same
// directory, fsync it, rename it over path.
func writeJSONAtomic(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", filepath.Base(path), err)
	}
	data = append(data, '\n')
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("create temp file for %s: %w", filepath.Base(path), err)
	}
	tmpName := tmp.Name()
	defer func() {
		if tmpName != "" {
			_ = os.Remove(tmpName)
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("write temp file for %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return fmt.Errorf("sync temp file for %s: %w", filepath.Base(path), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("close temp file for %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(tmpName, 0o644); err != nil {
		return fmt.Errorf("chmod temp file for %s: %w", filepath.Base(path), err)
	}
	if err := os.Rename(tmpName, path); err != nil {
		return fmt.Errorf("replace %s: %w", filepath.Base(path), err)
	}
	tmpName = ""
	return nil
}

// appendLine appends one line with a single write, so concurrent readers
// see whole lines (O_APPEND) and a crash loses at most the last one.
func appendLine(path string, line []byte) error {
	fh, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	if _, err := fh.Write(append(line, '\n')); err != nil {
		_ = fh.Close()
		return err
	}
	return fh.Close()
}
