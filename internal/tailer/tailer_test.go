package tailer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func appendTo(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, path string, c Cursor, opts Options) Batch {
	t.Helper()
	b, err := Read(path, c, opts)
	if err != nil {
		t.Fatalf("Read(%+v): %v", c, err)
	}
	return b
}

func texts(b Batch) []string {
	var out []string
	for _, l := range b.Lines {
		if l.TooLong {
			out = append(out, fmt.Sprintf("<toolong@%d+%d>", l.Offset, l.Length))
			continue
		}
		out = append(out, string(l.Data))
	}
	return out
}

func wantLines(t *testing.T, b Batch, want ...string) {
	t.Helper()
	got := texts(b)
	if strings.Join(got, "|") != strings.Join(want, "|") || len(got) != len(want) {
		t.Fatalf("lines = %q, want %q", got, want)
	}
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

func TestPartialLineCompletedLater(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, `{"seq":0}`+"\n"+`{"seq":1,"ty`)

	b := mustRead(t, p, Cursor{}, Options{})
	wantLines(t, b, `{"seq":0}`)
	if b.Next.Offset != 10 || b.More || b.Truncated || b.Missing {
		t.Fatalf("after first read: %+v", b)
	}

	// Nothing new is complete: the cursor must not move.
	b2 := mustRead(t, p, b.Next, Options{})
	wantLines(t, b2)
	if b2.Next != b.Next {
		t.Fatalf("cursor moved over a partial line: %+v -> %+v", b.Next, b2.Next)
	}

	appendTo(t, p, `pe":"x"}`+"\n")
	b3 := mustRead(t, p, b2.Next, Options{})
	wantLines(t, b3, `{"seq":1,"type":"x"}`)
	if l := b3.Lines[0]; l.Offset != 10 || l.Length != 20 || l.Gen != 0 {
		t.Fatalf("line position = %+v", l)
	}
	if b3.Next.Offset != 31 {
		t.Fatalf("next offset = %d, want 31", b3.Next.Offset)
	}
}

func TestManyLinesOneBatchAndEmptyLines(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	var want []string
	var sb strings.Builder
	for i := range 500 {
		s := fmt.Sprintf(`{"seq":%d}`, i)
		if i == 7 {
			s = "" // an empty line is still a line; the caller judges it
		}
		want = append(want, s)
		sb.WriteString(s + "\n")
	}
	appendTo(t, p, sb.String())
	b := mustRead(t, p, Cursor{}, Options{})
	wantLines(t, b, want...)
	if b.Lines[7].Data == nil || len(b.Lines[7].Data) != 0 {
		t.Fatalf("empty line data = %#v, want non-nil empty", b.Lines[7].Data)
	}
	if b.Next.Offset != int64(sb.Len()) || b.More {
		t.Fatalf("next = %+v more=%v, want offset %d", b.Next, b.More, sb.Len())
	}
	// Appending to one line's Data must not clobber the next line.
	_ = append(b.Lines[0].Data, 'X')
	if string(b.Lines[1].Data) != `{"seq":1}` {
		t.Fatalf("line 1 clobbered: %q", b.Lines[1].Data)
	}
}

func TestMaxBytesChunking(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	var sb strings.Builder
	for i := range 100 {
		fmt.Fprintf(&sb, "%099d\n", i) // 100 bytes per line with '\n'
	}
	appendTo(t, p, sb.String())

	var c Cursor
	seen := 0
	calls := 0
	for {
		calls++
		if calls > 100 {
			t.Fatal("no convergence")
		}
		b := mustRead(t, p, c, Options{MaxBytes: 1000})
		size := 0
		for _, l := range b.Lines {
			size += len(l.Data) + 1
			if want := fmt.Sprintf("%099d", seen); string(l.Data) != want {
				t.Fatalf("line %d = %q", seen, l.Data)
			}
			if l.Offset != int64(seen*100) {
				t.Fatalf("line %d offset %d", seen, l.Offset)
			}
			seen++
		}
		if size > 1000 {
			t.Fatalf("batch of %d bytes exceeds MaxBytes", size)
		}
		c = b.Next
		if !b.More {
			break
		}
		if len(b.Lines) == 0 {
			t.Fatal("More without progress")
		}
	}
	if seen != 100 || calls != 10 {
		t.Fatalf("saw %d lines in %d calls, want 100 in 10", seen, calls)
	}
}

func TestLineLongerThanMaxBytesIsDeliveredAlone(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	big := strings.Repeat("b", 5000)
	appendTo(t, p, big+"\nsmall\n")
	b := mustRead(t, p, Cursor{}, Options{MaxBytes: 1000, MaxLine: 10000})
	wantLines(t, b, big)
	if !b.More {
		t.Fatal("More not set although a line is pending")
	}
	b = mustRead(t, p, b.Next, Options{MaxBytes: 1000, MaxLine: 10000})
	wantLines(t, b, "small")
	if b.More {
		t.Fatal("More set at end of file")
	}
}

func TestMissingThenCreated(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "not", "yet")
	p := filepath.Join(dir, "events.jsonl")
	c := Cursor{Gen: 2, Offset: 0}
	b := mustRead(t, p, c, Options{})
	if !b.Missing || len(b.Lines) != 0 || b.Next != c {
		t.Fatalf("missing file: %+v", b)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	appendTo(t, p, "a\n")
	b = mustRead(t, p, b.Next, Options{})
	wantLines(t, b, "a")
	if b.Missing || b.Truncated || b.Next.Gen != 2 || b.Next.Ino != inode(t, p) {
		t.Fatalf("after creation: %+v", b)
	}
}

func TestTruncationRestartsWithNewGeneration(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "one\ntwo\nthree\n")
	b := mustRead(t, p, Cursor{}, Options{})
	wantLines(t, b, "one", "two", "three")

	if err := os.Truncate(p, 0); err != nil {
		t.Fatal(err)
	}
	appendTo(t, p, "new\n")
	b = mustRead(t, p, b.Next, Options{})
	wantLines(t, b, "new")
	if !b.Truncated || b.Next.Gen != 1 || b.Next.Offset != 4 || b.Lines[0].Gen != 1 || b.Lines[0].Offset != 0 {
		t.Fatalf("after truncation: %+v", b)
	}
}

func TestRewriteInPlaceCaughtByFingerprint(t *testing.T) {
	// Same inode, and the new content is longer than the old offset, so
	// neither the inode nor the size shows the rewrite: only the head does.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, `{"ts":"2026-01-01T00:00:00Z"}`+"\n")
	b := mustRead(t, p, Cursor{}, Options{})
	ino := inode(t, p)
	if err := os.WriteFile(p, []byte(`{"ts":"2026-01-02T00:00:00Z","x":1}`+"\n"+"second\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if inode(t, p) != ino {
		t.Skip("filesystem changed the inode on rewrite; covered by the replacement test")
	}
	b = mustRead(t, p, b.Next, Options{})
	if !b.Truncated || b.Next.Gen != 1 {
		t.Fatalf("in-place rewrite not detected: %+v", b)
	}
	wantLines(t, b, `{"ts":"2026-01-02T00:00:00Z","x":1}`, "second")
}

func TestReplacedByNewInode(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	appendTo(t, p, "old-1\nold-2\n")
	b := mustRead(t, p, Cursor{}, Options{})
	oldIno := b.Next.Ino

	// Create the replacement before the original goes away, so it cannot
	// get the old inode number back.
	tmp := filepath.Join(dir, "events.jsonl.new")
	appendTo(t, tmp, "fresh-1\nfresh-2\nfresh-3\n")
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
	if inode(t, p) == oldIno {
		t.Fatal("test setup: replacement kept the inode")
	}
	b = mustRead(t, p, b.Next, Options{})
	wantLines(t, b, "fresh-1", "fresh-2", "fresh-3")
	if !b.Truncated || b.Next.Gen != 1 || b.Next.Ino == oldIno {
		t.Fatalf("replacement: %+v", b)
	}
}

func TestDeletedAndNotRecreated(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "a\n")
	b := mustRead(t, p, Cursor{}, Options{})
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	b2 := mustRead(t, p, b.Next, Options{})
	if !b2.Missing || b2.Next != b.Next || len(b2.Lines) != 0 {
		t.Fatalf("deleted file: %+v", b2)
	}
}

func TestOverlongCompleteLineSkipped(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	appendTo(t, p, "ok1\n"+strings.Repeat("x", 50)+"\nok2\n")
	b := mustRead(t, p, Cursor{}, Options{MaxLine: 10})
	wantLines(t, b, "ok1", "<toolong@4+50>", "ok2")
	if b.Lines[1].Data != nil {
		t.Fatal("TooLong line carries data")
	}
	if b.Next.Offset != 4+51+4 {
		t.Fatalf("next offset %d", b.Next.Offset)
	}
}

func TestOverlongLineStillBeingWritten(t *testing.T) {
	p := filepath.Join(t.TempDir(), "events.jsonl")
	opts := Options{MaxLine: 100, MaxBytes: 64}
	appendTo(t, p, "ok1\n"+strings.Repeat("y", 150)) // unterminated, already > MaxLine

	b := mustRead(t, p, Cursor{}, opts)
	wantLines(t, b, "ok1")
	if !b.More {
		t.Fatalf("budget spent on ok1 but More unset: %+v", b)
	}
	b = mustRead(t, p, b.Next, opts)
	wantLines(t, b)
	if !b.Next.Skipping || b.Next.SkipFrom != 4 || b.Next.Offset != 154 {
		t.Fatalf("expected to be skipping from 4 up to 154: %+v", b.Next)
	}

	// The cursor state must survive the workflow history.
	raw, err := json.Marshal(b.Next)
	if err != nil {
		t.Fatal(err)
	}
	var c Cursor
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}

	appendTo(t, p, strings.Repeat("y", 1000))
	b = mustRead(t, p, c, opts)
	wantLines(t, b)
	if !b.Next.Skipping || b.Next.Offset != 1154 {
		t.Fatalf("still skipping: %+v", b.Next)
	}

	appendTo(t, p, "yy\nafter\n")
	b = mustRead(t, p, b.Next, opts)
	wantLines(t, b, "<toolong@4+1152>", "after")
	if b.Next.Skipping || b.Next.Offset != 1163 {
		t.Fatalf("after the long line: %+v", b.Next)
	}
}

func TestOverlongLineAloneDoesNotBlock(t *testing.T) {
	// The very first line is overlong and unterminated, larger than the
	// read window: progress must still be made on every call.
	p := filepath.Join(t.TempDir(), "events.jsonl")
	opts := Options{MaxLine: 10, MaxBytes: 8}
	appendTo(t, p, strings.Repeat("z", 30))
	b := mustRead(t, p, Cursor{}, opts)
	if !b.Next.Skipping || b.Next.Offset != 30 {
		t.Fatalf("no progress on an overlong first line: %+v", b.Next)
	}
	appendTo(t, p, "\nnext\n")
	b = mustRead(t, p, b.Next, opts)
	wantLines(t, b, "<toolong@0+30>", "next")
}

func TestCursorJSONRoundTrip(t *testing.T) {
	c := Cursor{Gen: 3, Offset: 1 << 40, Ino: 1<<53 - 1, HeadLen: 256, HeadSum: 0xfedcba98, Skipping: true, SkipFrom: 1 << 39}
	raw, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	var back Cursor
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if back != c {
		t.Fatalf("round trip: %+v -> %s -> %+v", c, raw, back)
	}
	var zero Cursor
	raw, _ = json.Marshal(Cursor{})
	if err := json.Unmarshal(raw, &zero); err != nil || zero != (Cursor{}) {
		t.Fatalf("zero cursor round trip: %s %+v %v", raw, zero, err)
	}
}

func TestInvalidInputsAreErrors(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "events.jsonl")
	appendTo(t, p, "a\n")
	for _, c := range []Cursor{{Offset: -1}, {Gen: -1}, {Offset: 2, HeadLen: 3}, {Offset: 2, Skipping: true, SkipFrom: 5}} {
		if b, err := Read(p, c, Options{}); err == nil {
			t.Errorf("cursor %+v accepted: %+v", c, b)
		} else if b.Next != c {
			t.Errorf("cursor changed on error: %+v", b.Next)
		}
	}
	if _, err := Read(dir, Cursor{}, Options{}); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory as log: err = %v", err)
	}
}
