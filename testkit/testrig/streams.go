package testrig

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"karvi-edda-temporal/canonical"
)

// StreamProblems replays every stream file (run-*.jsonl) in dir through the
// project's own transition table (canonical.Stream) and returns one line
// per problem: a line that does not parse or validate, or a warning (a
// change the table does not allow, a state_change that stays put, a
// degraded enum). A missing directory has no streams and no problems.
func StreamProblems(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "run-*.jsonl"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var problems []string
	for _, path := range files {
		data, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var s canonical.Stream
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
		for n := 1; sc.Scan(); n++ {
			where := fmt.Sprintf("%s:%d", filepath.Base(path), n)
			ev, err := canonical.Parse(sc.Bytes())
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
				continue
			}
			_, warns, err := s.Validate(ev)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: %v", where, err))
			}
			for _, w := range warns {
				problems = append(problems, fmt.Sprintf("%s: %s", where, w))
			}
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	return problems, nil
}
