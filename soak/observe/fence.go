package observe

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"karvi-edda-temporal/soak"
)

// fenceStopped is how a worker's fence says it stopped a conductor (its
// log message starts so whatever follows).
const fenceStopped = "fence: stopped"

// ReadFenceStops reads a worker's log (slog's text format, one record a
// line) and returns the conductors its fence said it stopped. host names
// the worker for evidence. A missing log has none.
func ReadFenceStops(path, host string) ([]soak.FenceStop, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read worker log: %w", err)
	}
	defer f.Close()
	var out []soak.FenceStop
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Bytes()
		if !bytes.Contains(line, []byte(fenceStopped)) {
			continue
		}
		kv := parseLogfmt(string(line))
		if !strings.HasPrefix(kv["msg"], fenceStopped) {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, kv["time"])
		h := host
		if kv["host"] != "" {
			h = kv["host"]
		}
		out = append(out, soak.FenceStop{At: at, Host: h, Task: kv["task"], Plan: kv["plan"], Why: kv["why"], Line: string(line)})
	}
	if err := sc.Err(); err != nil {
		return out, fmt.Errorf("read worker log %s: %w", path, err)
	}
	return out, nil
}

// parseLogfmt splits a slog text line into its keys and values: key=value
// pairs, a value either bare (up to the next space) or Go-quoted. A word
// without '=' is skipped.
func parseLogfmt(line string) map[string]string {
	out := map[string]string{}
	i := 0
	for i < len(line) {
		if line[i] == ' ' {
			i++
			continue
		}
		k := i
		for i < len(line) && line[i] != '=' && line[i] != ' ' {
			i++
		}
		if i >= len(line) || line[i] == ' ' {
			continue
		}
		key := line[k:i]
		i++ // '='
		if i < len(line) && line[i] == '"' {
			q, err := strconv.QuotedPrefix(line[i:])
			if err != nil {
				out[key] = line[i+1:]
				break
			}
			out[key], _ = strconv.Unquote(q)
			i += len(q)
			continue
		}
		v := i
		for i < len(line) && line[i] != ' ' {
			i++
		}
		out[key] = line[v:i]
	}
	return out
}
