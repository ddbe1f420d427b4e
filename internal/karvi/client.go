package karvi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// DefaultTimeout bounds one request when the caller's HTTP client has none.
const DefaultTimeout = 30 * time.Second

// maxResponse bounds how much of an answer is read: a brief or the task
// list (karvi's own request limit is 1 MiB; its task list can be larger).
const maxResponse = 32 << 20

// idPattern is karvi's brief route id pattern [\w-]+; task ids outside it
// cannot have a brief, so the client refuses them everywhere.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,256}$`)

// Client talks to one karvi server. The zero value is not usable; use New.
type Client struct {
	// BaseURL is karvi's root, e.g. http://127.0.0.1:3461.
	BaseURL string
	// Token is KARVI_API_TOKEN, sent as a bearer token; never logged and
	// scrubbed from error text.
	Token string
	// HTTP sends the requests.
	HTTP *http.Client
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient uses hc instead of a default client with DefaultTimeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.HTTP = hc }
}

// WithTimeout sets the per-request timeout of the default HTTP client.
func WithTimeout(d time.Duration) Option {
	return func(c *Client) {
		if c.HTTP != nil {
			hc := *c.HTTP
			hc.Timeout = d
			c.HTTP = &hc
		}
	}
}

// New validates baseURL (http or https, a host, no credentials, query or
// fragment) and returns a client. token may be empty when karvi runs
// without auth.
func New(baseURL, token string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("karvi base URL: %w", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("karvi base URL %q: scheme must be http or https", u.Redacted())
	case u.Host == "":
		return nil, fmt.Errorf("karvi base URL %q: no host", u.Redacted())
	case u.User != nil:
		return nil, fmt.Errorf("karvi base URL %q: credentials belong in the token, not the URL", u.Redacted())
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("karvi base URL %q: must not carry a query or fragment", u.Redacted())
	}
	if strings.ContainsAny(token, "\r\n") {
		return nil, errors.New("karvi token contains a line break")
	}
	c := &Client{
		BaseURL: strings.TrimRight(u.String(), "/"),
		Token:   token,
		HTTP:    newHTTPClient(),
	}
	for _, o := range opts {
		o(c)
	}
	if c.HTTP == nil {
		c.HTTP = newHTTPClient()
	}
	return c, nil
}

// idleConnsPerHost keeps connections to karvi open for reuse. Every running
// task PATCHes its brief as its events come, so one worker talks to karvi
// from hundreds of goroutines at once; Go's default of 2 idle connections
// per host would open and close a connection for nearly every PATCH.
const idleConnsPerHost = 256

func newHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConnsPerHost = idleConnsPerHost
	t.MaxIdleConns = idleConnsPerHost
	return &http.Client{Timeout: DefaultTimeout, Transport: t}
}

// String keeps the token out of %v and %+v output.
func (c Client) String() string {
	tok := "none"
	if c.Token != "" {
		tok = "[redacted]"
	}
	return fmt.Sprintf("karvi.Client{BaseURL: %s, Token: %s}", c.BaseURL, tok)
}

// GoString keeps the token out of %#v output.
func (c Client) GoString() string { return c.String() }

// PatchBrief deep-merges body into the task's brief (PATCH /api/brief/:id).
// karvi replaces arrays and scalars and stores null; see internal/jsonmerge.
func (c *Client) PatchBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	return c.briefWrite(ctx, http.MethodPatch, taskID, body)
}

// PutBrief replaces the task's brief (PUT /api/brief/:id). It creates the
// brief file when the task has a briefPath.
func (c *Client) PutBrief(ctx context.Context, taskID string, body json.RawMessage) error {
	return c.briefWrite(ctx, http.MethodPut, taskID, body)
}

func (c *Client) briefWrite(ctx context.Context, method, taskID string, body json.RawMessage) error {
	op := method + " /api/brief/" + taskID
	if err := checkID(op, taskID); err != nil {
		return err
	}
	if !isJSONObject(body) {
		return &Error{Op: op, Kind: KindBadRequest, Message: "brief body must be a JSON object"}
	}
	_, err := c.do(ctx, op, method, "/api/brief/"+taskID, body)
	return err
}

// GetBrief returns the task's brief as karvi stores it.
func (c *Client) GetBrief(ctx context.Context, taskID string) (json.RawMessage, error) {
	op := "GET /api/brief/" + taskID
	if err := checkID(op, taskID); err != nil {
		return nil, err
	}
	return c.do(ctx, op, http.MethodGet, "/api/brief/"+taskID, nil)
}

// SetTaskStatus moves the task to status (POST /api/tasks/:id/status).
// karvi sets task.blocker {reason, askedAt} when status is blocked and reason
// is not empty, and clears the blocker for any other status. An illegal
// transition fails with KindIllegalTransition and karvi's message.
func (c *Client) SetTaskStatus(ctx context.Context, taskID, status, reason string) error {
	op := "POST /api/tasks/" + taskID + "/status"
	if err := checkID(op, taskID); err != nil {
		return err
	}
	payload := map[string]string{"status": status}
	if reason != "" {
		payload["reason"] = reason
	}
	body, err := json.Marshal(payload)
	if err != nil {
		return &Error{Op: op, Kind: KindBadRequest, Message: "encode body: " + err.Error()}
	}
	_, err = c.do(ctx, op, http.MethodPost, "/api/tasks/"+taskID+"/status", body)
	return err
}

// UpdateFields are the keys karvi's POST /api/tasks/:id/update acts on. It
// ignores any other key (apart from copying the payload into task.history).
var UpdateFields = []string{"status", "result", "childSessionKey", "blocker"}

// UpdateTask posts fields to /api/tasks/:id/update. Only UpdateFields are
// accepted; anything else is refused with KindBadRequest before sending,
// because karvi would drop it silently. Note that karvi skips falsy values,
// and that a status here is checked against the same transition table but,
// unlike SetTaskStatus, does not clear an old blocker.
func (c *Client) UpdateTask(ctx context.Context, taskID string, fields map[string]any) error {
	op := "POST /api/tasks/" + taskID + "/update"
	if err := checkID(op, taskID); err != nil {
		return err
	}
	for k := range fields {
		if !isUpdateField(k) {
			return &Error{Op: op, Kind: KindBadRequest,
				Message: fmt.Sprintf("karvi's update endpoint ignores field %q (it accepts %s)", k, strings.Join(UpdateFields, ", "))}
		}
	}
	body, err := json.Marshal(fields)
	if err != nil {
		return &Error{Op: op, Kind: KindBadRequest, Message: "encode body: " + err.Error()}
	}
	_, err = c.do(ctx, op, http.MethodPost, "/api/tasks/"+taskID+"/update", body)
	return err
}

// GetTask returns one task from karvi's task list (GET /api/tasks; karvi
// has no per-task read). A task that is not listed fails with KindNotFound.
func (c *Client) GetTask(ctx context.Context, taskID string) (Task, error) {
	op := "GET /api/tasks (" + taskID + ")"
	if err := checkID(op, taskID); err != nil {
		return Task{}, err
	}
	tasks, err := c.listTasks(ctx, op)
	if err != nil {
		return Task{}, err
	}
	for _, t := range tasks {
		if t.ID == taskID {
			return t, nil
		}
	}
	return Task{}, &Error{Op: op, Kind: KindNotFound, Message: fmt.Sprintf("Task %s not found", taskID)}
}

// ListTasks returns every task in karvi's task plan.
func (c *Client) ListTasks(ctx context.Context) ([]Task, error) {
	return c.listTasks(ctx, "GET /api/tasks")
}

func (c *Client) listTasks(ctx context.Context, op string) ([]Task, error) {
	raw, err := c.do(ctx, op, http.MethodGet, "/api/tasks", nil)
	if err != nil {
		return nil, err
	}
	var plan struct {
		Tasks []Task `json:"tasks"`
	}
	if err := json.Unmarshal(raw, &plan); err != nil {
		// A proxy page or a different server: not karvi, and not going to
		// turn into karvi on retry.
		return nil, &Error{Op: op, Status: http.StatusOK, Kind: KindBadRequest, Message: "task list is not karvi's taskPlan JSON: " + err.Error()}
	}
	return plan.Tasks, nil
}

// do sends one request and returns the body of a 2xx answer.
func (c *Client) do(ctx context.Context, op, method, path string, body []byte) (json.RawMessage, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, &Error{Op: op, Kind: KindBadRequest, Message: c.scrub("build request: " + err.Error())}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// Transport failures (refused, reset, timeout, cancelled context)
		// are all worth another attempt; the caller's context decides when
		// to stop. The url.Error text carries only BaseURL and path.
		return nil, &Error{Op: op, Kind: KindTransient, Message: c.scrub(err.Error()), Err: c.scrubErr(err)}
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if rerr != nil {
			return nil, &Error{Op: op, Status: resp.StatusCode, Kind: KindTransient, Message: c.scrub("read answer: " + rerr.Error()), Err: c.scrubErr(rerr)}
		}
		if len(data) > maxResponse {
			return nil, &Error{Op: op, Status: resp.StatusCode, Kind: KindBadRequest, Message: fmt.Sprintf("answer larger than %d bytes", maxResponse)}
		}
		return json.RawMessage(data), nil
	}
	msg := c.scrub(errorText(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	return nil, &Error{Op: op, Status: resp.StatusCode, Kind: classify(resp.StatusCode, msg), Message: msg}
}

// errorText extracts karvi's error text from an answer body: the "error"
// field of its JSON (with "message" appended when karvi gives both, as for
// 413 and 429), else the start of the body.
func errorText(body []byte) string {
	var e struct {
		Error   any    `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error != nil {
		var s string
		switch v := e.Error.(type) {
		case string:
			s = v
		default:
			b, _ := json.Marshal(v)
			s = string(b)
		}
		if e.Message != "" && e.Message != s {
			s += " (" + e.Message + ")"
		}
		return s
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// scrub removes the token from text that may reach logs or history.
func (c *Client) scrub(s string) string {
	if c.Token == "" {
		return s
	}
	return strings.ReplaceAll(s, c.Token, "[redacted]")
}

// scrubErr keeps the error chain (for errors.Is on context and net errors)
// unless its text would leak the token, which no transport error should.
func (c *Client) scrubErr(err error) error {
	if c.Token != "" && strings.Contains(err.Error(), c.Token) {
		return errors.New(c.scrub(err.Error()))
	}
	return err
}

func checkID(op, id string) error {
	if !idPattern.MatchString(id) {
		return &Error{Op: op, Kind: KindBadRequest, Message: fmt.Sprintf("task id %q does not match karvi's [A-Za-z0-9_-]+", id)}
	}
	return nil
}

func isUpdateField(k string) bool {
	for _, f := range UpdateFields {
		if f == k {
			return true
		}
	}
	return false
}

// isJSONObject reports whether b is one valid JSON object. A brief PATCH
// carries the whole log (tens of KB), so this validates without decoding
// into a map: decoding was half of the worker's CPU at high event rates.
func isJSONObject(b []byte) bool {
	trimmed := bytes.TrimLeft(b, " \t\r\n")
	return len(trimmed) > 0 && trimmed[0] == '{' && json.Valid(b)
}
