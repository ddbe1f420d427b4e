package runact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
)

// statusDoc is a run's status.json as last written, split so that a patch
// replaces task entries without decoding the rest: each entry (and each
// top-level field) as the file holds it, keys sorted. Each task's lines of
// the file are kept too, so a write of a large run copies its unchanged
// entries instead of encoding and indenting them again: at 10,000 tasks a
// write was 42 ms of the worker's time when the file was encoded whole,
// and every write of the run waits for the one before.
type statusDoc struct {
	writer string
	seq    int
	top    map[string]json.RawMessage
	// tasks is nil for a document whose tasks are null.
	tasks map[string]json.RawMessage
	// lines holds each task's text in the file: its key and its entry,
	// indented at the depth of an entry; ids is the tasks' ids, sorted.
	lines map[string][]byte
	ids   []string
}

// canonicalJSON re-encodes a JSON value with its object keys sorted, as the
// file has always been written.
func canonicalJSON(raw json.RawMessage) (json.RawMessage, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// splitStatus reads a whole document.
func splitStatus(doc json.RawMessage) (*statusDoc, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(doc, &top); err != nil {
		return nil, err
	}
	if top == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	var tasks map[string]json.RawMessage
	if raw, ok := top["tasks"]; ok {
		if err := json.Unmarshal(raw, &tasks); err != nil {
			return nil, fmt.Errorf("tasks: %w", err)
		}
	} else {
		tasks = map[string]json.RawMessage{}
	}
	p, err := preparePatch(top, tasks)
	if err != nil {
		return nil, err
	}
	d := &statusDoc{lines: map[string][]byte{}}
	if tasks != nil {
		d.tasks = map[string]json.RawMessage{}
	}
	d.apply(p, "", 0)
	return d, nil
}

// patch is a change of a document, checked and encoded: every top-level
// field but the tasks, and the task entries that changed.
type patch struct {
	top   map[string]json.RawMessage
	tasks map[string]taskEntry
}

type taskEntry struct {
	canon json.RawMessage
	line  []byte
}

// preparePatch checks and encodes a change; nothing is applied, so a
// change that is not JSON leaves the document as it was.
func preparePatch(top map[string]json.RawMessage, tasks map[string]json.RawMessage) (patch, error) {
	p := patch{top: make(map[string]json.RawMessage, len(top)), tasks: make(map[string]taskEntry, len(tasks))}
	for k, raw := range top {
		if k == "tasks" {
			continue
		}
		c, err := canonicalJSON(raw)
		if err != nil {
			return patch{}, fmt.Errorf("%s: %w", k, err)
		}
		p.top[k] = c
	}
	for id, raw := range tasks {
		c, err := canonicalJSON(raw)
		if err != nil {
			return patch{}, fmt.Errorf("task %s: %w", id, err)
		}
		key, err := json.Marshal(id)
		if err != nil {
			return patch{}, fmt.Errorf("task %s: %w", id, err)
		}
		var line bytes.Buffer
		line.Grow(len(key) + 2 + 2*len(c))
		line.Write(key)
		line.WriteString(": ")
		if err := json.Indent(&line, c, entryIndent, "  "); err != nil {
			return patch{}, fmt.Errorf("task %s: %w", id, err)
		}
		p.tasks[id] = taskEntry{canon: c, line: line.Bytes()}
	}
	return p, nil
}

// entryIndent is the indentation of a task's entry in the file: inside
// the document and inside its tasks.
const entryIndent = "    "

// apply makes the document the patch's, as write seq of writer, and
// returns what undoes it.
func (d *statusDoc) apply(p patch, writer string, seq int) (undo func()) {
	oldTop, oldWriter, oldSeq, oldIDs, wasNull := d.top, d.writer, d.seq, d.ids, d.tasks == nil
	type was struct {
		canon json.RawMessage
		line  []byte
		had   bool
	}
	before := make(map[string]was, len(p.tasks))
	d.top, d.writer, d.seq = p.top, writer, seq
	for id, e := range p.tasks {
		c, had := d.tasks[id]
		before[id] = was{canon: c, line: d.lines[id], had: had}
		if !had {
			d.ids = nil // sorted again at the next render
		}
		if d.tasks == nil {
			d.tasks = map[string]json.RawMessage{}
		}
		d.tasks[id] = e.canon
		d.lines[id] = e.line
	}
	return func() {
		d.top, d.writer, d.seq, d.ids = oldTop, oldWriter, oldSeq, oldIDs
		for id, w := range before {
			if !w.had {
				delete(d.tasks, id)
				delete(d.lines, id)
				continue
			}
			d.tasks[id], d.lines[id] = w.canon, w.line
		}
		if wasNull {
			d.tasks = nil
		}
	}
}

// render is the file: indented, keys sorted, a newline at the end, byte
// for byte what json.MarshalIndent of the whole document gives.
func (d *statusDoc) render() ([]byte, error) {
	keys := make([]string, 0, len(d.top)+1)
	size := 64
	for k, v := range d.top {
		keys = append(keys, k)
		size += len(k) + 2*len(v)
	}
	keys = append(keys, "tasks")
	slices.Sort(keys)
	if d.ids == nil && len(d.tasks) > 0 {
		d.ids = make([]string, 0, len(d.tasks))
		for id := range d.tasks {
			d.ids = append(d.ids, id)
		}
		slices.Sort(d.ids)
	}
	for _, id := range d.ids {
		size += len(d.lines[id]) + 8
	}
	var b bytes.Buffer
	b.Grow(size)
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString("\n  ")
		key, err := json.Marshal(k)
		if err != nil {
			return nil, err
		}
		b.Write(key)
		b.WriteString(": ")
		if k != "tasks" {
			if err := json.Indent(&b, d.top[k], "  ", "  "); err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			continue
		}
		switch {
		case d.tasks == nil:
			b.WriteString("null")
		case len(d.tasks) == 0:
			b.WriteString("{}")
		default:
			b.WriteByte('{')
			for j, id := range d.ids {
				if j > 0 {
					b.WriteByte(',')
				}
				b.WriteString("\n" + entryIndent)
				b.Write(d.lines[id])
			}
			b.WriteString("\n  }")
		}
	}
	b.WriteString("\n}\n")
	return b.Bytes(), nil
}
