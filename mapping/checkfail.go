package mapping

import (
	"fmt"
	"regexp"
	"strings"
)

// eddaExit is how edda 0.3 reports a failed cmd_succeeds check: "exit N:"
// followed by the command's (masked) stderr.
var eddaExit = regexp.MustCompile(`(?s)^exit (-?\d+):?\s*(.*)$`)

// DescribeCheckFailure names the command of a failed cmd_succeeds check
// ("cmd `cargo test` exited 1", the wording of the brief and lastError),
// because edda's own text ("exit 1:") tells a person reading the karvi board
// nothing (docs/contract.md §4.4). A leading "check failed: " is kept; any
// other message is returned unchanged.
func DescribeCheckFailure(c Check, message string) string {
	if c.Type != CheckCmdSucceeds || c.Cmd == "" {
		return message
	}
	prefix, body := "", strings.TrimSpace(message)
	if rest, ok := strings.CutPrefix(body, "check failed: "); ok {
		prefix, body = "check failed: ", rest
	}
	m := eddaExit.FindStringSubmatch(body)
	if m == nil {
		return message
	}
	out := fmt.Sprintf("%scmd `%s` exited %s", prefix, c.Cmd, m[1])
	if detail := strings.TrimSpace(m[2]); detail != "" {
		out += ": " + detail
	}
	return out
}

// FailedCheck is the check a failure of this phase refers to: the one at
// index when edda recorded it, else the phase's only cmd_succeeds check.
func (p Phase) FailedCheck(index *int) (Check, bool) {
	if index != nil {
		if *index >= 0 && *index < len(p.Check) {
			return p.Check[*index], true
		}
		return Check{}, false
	}
	var found Check
	n := 0
	for _, c := range p.Check {
		if c.Type == CheckCmdSucceeds {
			found = c
			n++
		}
	}
	return found, n == 1
}
