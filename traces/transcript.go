package traces

import (
	"bytes"
	"encoding/json"
	"strings"
	"time"
)

// Transcript is what one phase attempt's agent transcript tells a trace:
// edda keeps the agent's Claude Code stream-json, one file per phase
// attempt (transcripts/<phase>-<session8>.jsonl). Stream-json carries no
// clock of its own; a line with a "timestamp" (RFC 3339, as Claude Code's
// session files and the simulator write) gives its time, and the others
// are placed between their neighbours (Place).
type Transcript struct {
	Session string
	Model   string
	Turns   []Turn
	Tools   []ToolCall
	Result  *Result
	Limits  []RateLimit
	// Lines counts the lines read, Malformed those that were no JSON object.
	Lines, Malformed int
	// times holds each line's own timestamp, zero when it had none.
	times []time.Time
}

// Turn is one assistant message: a model call.
type Turn struct {
	// Line is the transcript line that began it, Last the last of its lines
	// (Claude Code writes one line per content block of a message).
	Line, Last   int
	MessageID    string
	Model        string
	InputTokens  int64
	OutputTokens int64
	// Text is the start of the message's text, ToolCalls how many tool
	// calls it made.
	Text      string
	ToolCalls int
	// Stop is the model's stop reason.
	Stop string
}

// ToolCall is a tool_use and the tool_result that answered it.
type ToolCall struct {
	ID, Name string
	// Line is where the call was made; ResultLine where its result came,
	// -1 when none came (the agent was stopped).
	Line, ResultLine int
	Input            string
	Output           string
	IsError          bool
}

// Result is the agent's closing line.
type Result struct {
	Line           int
	Subtype        string
	IsError        bool
	CostUSD        *float64
	InputTokens    int64
	OutputTokens   int64
	NumTurns       int
	APIErrorStatus int
	Text           string
}

// RateLimit is a rate_limit_event line.
type RateLimit struct {
	Line     int
	Status   string
	Type     string
	ResetsAt int64
}

// maxText bounds the text a span keeps of a message, a tool's input or
// output.
const maxText = 256

type tLine struct {
	Type      string          `json:"type"`
	Subtype   string          `json:"subtype"`
	Session   string          `json:"session_id"`
	Model     string          `json:"model"`
	Timestamp string          `json:"timestamp"`
	Message   json.RawMessage `json:"message"`
	// result
	IsError        bool     `json:"is_error"`
	TotalCostUSD   *float64 `json:"total_cost_usd"`
	Usage          *tUsage  `json:"usage"`
	NumTurns       int      `json:"num_turns"`
	APIErrorStatus int      `json:"api_error_status"`
	Result         any      `json:"result"`
	// rate_limit_event
	RateLimitInfo *struct {
		Status        string `json:"status"`
		ResetsAt      int64  `json:"resetsAt"`
		RateLimitType string `json:"rateLimitType"`
	} `json:"rate_limit_info"`
}

type tUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// input is every token the model read: fresh, cached and written to cache
// (the GenAI conventions count them all as input).
func (u *tUsage) input() int64 {
	return u.InputTokens + u.CacheCreationInputTokens + u.CacheReadInputTokens
}

type tMessage struct {
	ID         string          `json:"id"`
	Model      string          `json:"model"`
	Content    json.RawMessage `json:"content"`
	Usage      *tUsage         `json:"usage"`
	StopReason string          `json:"stop_reason"`
}

type tBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

// ParseTranscript reads a transcript's lines. It never fails: a line that
// is not what it expects is counted and passed over, as a tail must.
func ParseTranscript(lines [][]byte) Transcript {
	var t Transcript
	tools := map[string]int{} // tool_use id -> index in t.Tools
	for i, raw := range lines {
		t.Lines++
		t.times = append(t.times, time.Time{})
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 {
			continue
		}
		var l tLine
		if raw[0] != '{' || json.Unmarshal(raw, &l) != nil {
			t.Malformed++
			continue
		}
		if ts, err := time.Parse(time.RFC3339Nano, l.Timestamp); err == nil {
			t.times[i] = ts
		}
		if t.Session == "" && l.Session != "" {
			t.Session = clip(l.Session)
		}
		switch l.Type {
		case "system":
			if l.Model != "" && t.Model == "" {
				t.Model = clip(l.Model)
			}
		case "assistant":
			t.assistant(i, l.Message, tools)
		case "user":
			t.user(i, l.Message, tools)
		case "result":
			r := &Result{Line: i, Subtype: clip(l.Subtype), IsError: l.IsError, CostUSD: l.TotalCostUSD,
				NumTurns: l.NumTurns, APIErrorStatus: l.APIErrorStatus}
			if l.Usage != nil {
				r.InputTokens, r.OutputTokens = l.Usage.input(), l.Usage.OutputTokens
			}
			if s, ok := l.Result.(string); ok {
				r.Text = clip(s)
			}
			t.Result = r
		case "rate_limit_event":
			if l.RateLimitInfo != nil {
				t.Limits = append(t.Limits, RateLimit{Line: i, Status: clip(l.RateLimitInfo.Status),
					Type: clip(l.RateLimitInfo.RateLimitType), ResetsAt: l.RateLimitInfo.ResetsAt})
			}
		}
	}
	return t
}

func (t *Transcript) assistant(i int, raw json.RawMessage, tools map[string]int) {
	var m tMessage
	if json.Unmarshal(raw, &m) != nil {
		t.Malformed++
		return
	}
	var blocks []tBlock
	_ = json.Unmarshal(m.Content, &blocks)
	// Claude Code writes a message's content blocks as lines of their own,
	// each with the message's id: they make one turn.
	var turn *Turn
	if n := len(t.Turns); n > 0 && m.ID != "" && t.Turns[n-1].MessageID == m.ID {
		turn = &t.Turns[n-1]
	} else {
		t.Turns = append(t.Turns, Turn{Line: i, MessageID: clip(m.ID)})
		turn = &t.Turns[len(t.Turns)-1]
	}
	turn.Last = i
	if m.Model != "" {
		turn.Model = clip(m.Model)
	}
	if m.Usage != nil {
		turn.InputTokens, turn.OutputTokens = m.Usage.input(), m.Usage.OutputTokens
	}
	if m.StopReason != "" {
		turn.Stop = clip(m.StopReason)
	}
	for _, b := range blocks {
		switch b.Type {
		case "text":
			if turn.Text == "" {
				turn.Text = clip(b.Text)
			}
		case "tool_use":
			turn.ToolCalls++
			id := b.ID
			if _, seen := tools[id]; seen || id == "" {
				continue // a call without an id, or told twice, has no span of its own
			}
			tools[id] = len(t.Tools)
			t.Tools = append(t.Tools, ToolCall{ID: clip(id), Name: clip(b.Name), Line: i, ResultLine: -1,
				Input: clip(string(b.Input))})
		}
	}
}

func (t *Transcript) user(i int, raw json.RawMessage, tools map[string]int) {
	var m tMessage
	if json.Unmarshal(raw, &m) != nil {
		return
	}
	var blocks []tBlock
	if json.Unmarshal(m.Content, &blocks) != nil {
		return // a plain prompt
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			continue
		}
		k, ok := tools[b.ToolUseID]
		if !ok || t.Tools[k].ResultLine >= 0 {
			continue
		}
		tc := &t.Tools[k]
		tc.ResultLine, tc.IsError, tc.Output = i, b.IsError, clip(contentText(b.Content))
	}
}

// contentText is a tool result's content as text: a string, or the texts
// of its blocks.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []tBlock
	if json.Unmarshal(raw, &blocks) == nil {
		var b strings.Builder
		for _, x := range blocks {
			if x.Text != "" {
				if b.Len() > 0 {
					b.WriteByte('\n')
				}
				b.WriteString(x.Text)
			}
			if b.Len() > maxText {
				break
			}
		}
		return b.String()
	}
	return ""
}

// clip bounds a text a span keeps, at a rune boundary, valid UTF-8.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= maxText {
		return s
	}
	cut := maxText
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// Place gives every line a time within [start, end]: its own timestamp
// when it has one (kept within the bounds), else a time between the
// nearest lines that have one, in proportion to its place among the lines.
// Lines without any timestamp spread evenly over the phase.
func (t *Transcript) Place(start, end time.Time) []time.Time {
	n := len(t.times)
	out := make([]time.Time, n)
	if end.Before(start) {
		end = start
	}
	clamp := func(x time.Time) time.Time {
		if x.Before(start) {
			return start
		}
		if x.After(end) {
			return end
		}
		return x
	}
	// Anchors: the phase's start before line 0, its end after line n-1.
	prevI, prevT := -1, start
	for i := 0; i <= n; i++ {
		var at time.Time
		if i < n {
			if t.times[i].IsZero() {
				continue
			}
			at = clamp(t.times[i])
			if at.Before(prevT) {
				at = prevT // lines are in order; a clock that went back does not reorder them
			}
		} else {
			at = end
			if at.Before(prevT) {
				at = prevT
			}
		}
		gap := at.Sub(prevT)
		for k := prevI + 1; k < i; k++ {
			out[k] = prevT.Add(time.Duration(int64(gap) * int64(k-prevI) / int64(i-prevI)))
		}
		if i < n {
			out[i] = at
		}
		prevI, prevT = i, at
	}
	return out
}
