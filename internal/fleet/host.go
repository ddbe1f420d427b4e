package fleet

import (
	"fmt"
	"os"
	"regexp"
)

// hostName is what a host may be called: it becomes part of a task queue
// name and of log lines, so it is one short token without the queue
// separator, spaces or path characters.
var hostName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// CheckHost reports whether name can name a host.
func CheckHost(name string) error {
	if !hostName.MatchString(name) {
		return fmt.Errorf("host name %q: want 1 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// DefaultHost is the machine's hostname, when it can name a host.
func DefaultHost() (string, error) {
	name, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("read the hostname (set a host name instead): %w", err)
	}
	if err := CheckHost(name); err != nil {
		return "", fmt.Errorf("the hostname cannot name this host (set one instead): %w", err)
	}
	return name, nil
}

// Queue is the task queue of one host: where the activities of the
// conductors it started are sent, and which only its workers poll.
func Queue(shared, host string) string { return shared + "@" + host }
