package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"karvi-edda-temporal/soak"
)

// hookLine is a line of the webhook receiver's JSONL file. The receiver
// writes at least the delivery's id and either its body or a digest of it;
// the other fields are read from the body when the line lacks them.
type hookLine struct {
	At      time.Time       `json:"at"`
	ID      string          `json:"id"`
	Kind    string          `json:"kind"`
	Task    string          `json:"task"`
	Run     string          `json:"run"`
	Time    string          `json:"time"`
	Digest  string          `json:"digest"`
	BodySHA string          `json:"bodySha"`
	Body    json.RawMessage `json:"body"`
}

// hookBody is the part of a delivery's body (internal/notify.Event) the
// checks read.
type hookBody struct {
	ID     string          `json:"id"`
	Kind   string          `json:"kind"`
	Time   json.RawMessage `json:"time"`
	TaskID string          `json:"task_id"`
	RunID  string          `json:"run_id"`
}

// WebhookLine is what a receiver appends for one delivery: when it came,
// the delivery id (the X-Karvi-Edda-Delivery header) and the exact body.
func WebhookLine(at time.Time, id string, body []byte) ([]byte, error) {
	sum := sha256.Sum256(body)
	l := hookLine{At: at, ID: id, Digest: hex.EncodeToString(sum[:])}
	if json.Valid(body) {
		l.Body = body
	}
	var b hookBody
	if json.Unmarshal(body, &b) == nil {
		l.Kind, l.Task, l.Run = b.Kind, b.TaskID, b.RunID
		_ = json.Unmarshal(b.Time, &l.Time)
	}
	return json.Marshal(l)
}

// ReadWebhooks reads a receiver's JSONL file: one delivery a line, as
// WebhookLine writes it (or any line with an id and a body or a digest).
func ReadWebhooks(path string) ([]soak.Webhook, error) {
	var out []soak.Webhook
	err := readJSONL(path, func(n int, line []byte, last bool) error {
		var l hookLine
		if err := json.Unmarshal(line, &l); err != nil {
			if last {
				return nil
			}
			return fmt.Errorf("%s:%d: %w", path, n, err)
		}
		if len(l.Body) > 0 {
			var b hookBody
			if err := json.Unmarshal(l.Body, &b); err == nil {
				if l.ID == "" {
					l.ID = b.ID
				}
				l.Kind, l.Task, l.Run = or(l.Kind, b.Kind), or(l.Task, b.TaskID), or(l.Run, b.RunID)
				if l.Time == "" {
					_ = json.Unmarshal(b.Time, &l.Time)
				}
			}
		}
		digest := or(l.Digest, l.BodySHA)
		if d, ok := eventDigest(l.Body); ok {
			digest = d
		}
		if l.ID == "" || digest == "" {
			return fmt.Errorf("%s:%d: a delivery without an id or a body", path, n)
		}
		out = append(out, soak.Webhook{At: l.At, ID: l.ID, Kind: l.Kind, Task: l.Task, Run: l.Run, Time: l.Time, Digest: digest})
		return nil
	})
	return out, err
}

// eventDigest is a hash of what a delivery's body says of its event,
// leaving out when and from which host it was sent and, for a pause, the
// time it runs until (the later of the reset and the decision's now). A
// worker that dies after its local activity queued a notification, before
// its workflow task was recorded, leaves the task to run again on another
// host: the notification goes out again with the same id (the workflow's
// count has not moved), a later time, the other host and an until of that
// later time. That is the same event, the one a receiver skips by its id,
// not another event under a used id.
func eventDigest(body json.RawMessage) (string, bool) {
	var ev map[string]any
	if len(body) == 0 || json.Unmarshal(body, &ev) != nil {
		return "", false
	}
	delete(ev, "time")
	delete(ev, "host")
	if d, ok := ev["details"].(map[string]any); ok {
		delete(d, "until")
	}
	b, err := json.Marshal(ev) // map keys sorted: the same event, the same bytes
	if err != nil {
		return "", false
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), true
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
