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

	"karvi-edda-temporal/internal/timescale"
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

	// rateLimit is requests a minute (0 = off) for New to set up gate;
	// scale the time scale its minute lasts at.
	rateLimit int
	scale     timescale.Scale
	// gate is shared by every client of BaseURL in this process: the rate
	// limit, karvi's Retry-After and the board snapshot (gate.go, board.go).
	gate *gate
}

// Option configures New.
type Option func(*Client)

// WithHTTPClient uses hc instead of a default client with DefaultTimeout.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) { c.HTTP = hc }
}

// WithRateLimit sets how many requests a minute the clients of this karvi
// address may send together, as karvi's KARVI_RATE_LIMIT (RateLimitOff for
// none). The default is DefaultRateLimit, karvi's own default. Every client
// of one address in the process shares one limit; the last setting wins.
func WithRateLimit(perMinute int) Option {
	return func(c *Client) { c.rateLimit = max(perMinute, 0) }
}

// WithTimeScale makes the minute of the rate limit last a minute at the
// time scale s (internal/timescale): at 60 the clients send their
// requests a minute each second, as a karvi (or fake) at the same scale
// admits them. Like the limit itself, it is shared by every client of the
// address.
func WithTimeScale(s timescale.Scale) Option {
	return func(c *Client) { c.scale = s }
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

		rateLimit: DefaultRateLimit,
	}
	for _, o := range opts {
		o(c)
	}
	if c.HTTP == nil {
		c.HTTP = newHTTPClient()
	}
	c.gate = gateFor(c.BaseURL, c.rateLimit, c.scale)
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
	return c.taskWrite(ctx, op, taskID, "/api/tasks/"+taskID+"/status", body)
}

// taskWrite posts a task write and keeps karvi's answer (the task as it now
// is) in the shared board snapshot.
func (c *Client) taskWrite(ctx context.Context, op, taskID, path string, body []byte) error {
	sentAt := time.Now()
	answer, err := c.do(ctx, op, http.MethodPost, path, body)
	if err != nil {
		if IsNotFound(err) || IsIllegalTransition(err) {
			c.gate.board.forget(taskID)
		}
		return err
	}
	c.gate.board.wrote(taskID, answer, sentAt)
	return nil
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
	return c.taskWrite(ctx, op, taskID, "/api/tasks/"+taskID+"/update", body)
}

// GetTask returns one task from karvi's task list (GET /api/tasks; karvi
// has no per-task read). The read is shared: see BoardMaxAge. A task that is
// not listed fails with KindNotFound.
func (c *Client) GetTask(ctx context.Context, taskID string) (Task, error) {
	return c.getTask(ctx, taskID, false)
}

// GetTaskFresh is GetTask from a list read that began after the call (it
// may still be shared with other callers that asked meanwhile).
func (c *Client) GetTaskFresh(ctx context.Context, taskID string) (Task, error) {
	return c.getTask(ctx, taskID, true)
}

func (c *Client) getTask(ctx context.Context, taskID string, fresh bool) (Task, error) {
	op := "GET /api/tasks (" + taskID + ")"
	if err := checkID(op, taskID); err != nil {
		return Task{}, err
	}
	b := &c.gate.board
	if !fresh {
		if t, ok := b.lookup(taskID, time.Now()); ok {
			return t, nil
		}
	}
	asked := time.Now()
	for {
		if _, err := c.sharedList(ctx, op); err != nil {
			return Task{}, err
		}
		b.mu.Lock()
		at, tasks := b.at, b.tasks
		e, ok := tasks[taskID]
		b.mu.Unlock()
		if fresh && at.Before(asked) {
			continue // joined a read sent before the call: read once more
		}
		if !ok {
			return Task{}, &Error{Op: op, Kind: KindNotFound, Message: fmt.Sprintf("Task %s not found", taskID)}
		}
		return e.task, nil
	}
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

// conflictRetries is how often do sends a write again at once after karvi
// answered a version conflict (another writer changed the board between its
// read and its write; the request had no effect).
const conflictRetries = 3

// do sends a request and returns the body of a 2xx answer. It waits for
// its turn under the shared rate limit first; a 429 (nothing was done)
// pauses every client of this karvi for its Retry-After and is sent again,
// for as long as ctx allows; a version conflict is sent again a few times
// before it is returned (retryable).
func (c *Client) do(ctx context.Context, op, method, path string, body []byte) (json.RawMessage, error) {
	urgent := !(method == http.MethodPatch || method == http.MethodPut) || isUrgent(ctx)
	conflicts := 0
	for {
		if err := c.gate.wait(ctx, op, urgent); err != nil {
			return nil, err
		}
		data, hdr, err := c.send(ctx, op, method, path, body)
		var ke *Error
		if err == nil || !errors.As(err, &ke) {
			return data, err
		}
		switch {
		case ke.Status == http.StatusTooManyRequests:
			c.gate.pause(retryAfter(hdr, time.Now()))
		case ke.Kind == KindConflict && conflicts < conflictRetries:
			conflicts++
			t := time.NewTimer(time.Duration(conflicts*conflicts) * 50 * time.Millisecond)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, err
			case <-t.C:
			}
		default:
			return nil, err
		}
	}
}

// send makes one HTTP attempt.
func (c *Client) send(ctx context.Context, op, method, path string, body []byte) (json.RawMessage, http.Header, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.BaseURL+path, rd)
	if err != nil {
		return nil, nil, &Error{Op: op, Kind: KindBadRequest, Message: c.scrub("build request: " + err.Error())}
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	c.gate.sent.Add(1)
	c.gate.sentAt(time.Now())
	resp, err := c.HTTP.Do(req)
	if err != nil {
		// Transport failures (refused, reset, timeout, cancelled context)
		// are all worth another attempt; the caller's context decides when
		// to stop. The url.Error text carries only BaseURL and path.
		return nil, nil, &Error{Op: op, Kind: KindTransient, Message: c.scrub(err.Error()), Err: c.scrubErr(err)}
	}
	defer resp.Body.Close()
	data, rerr := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if rerr != nil {
			return nil, nil, &Error{Op: op, Status: resp.StatusCode, Kind: KindTransient, Message: c.scrub("read answer: " + rerr.Error()), Err: c.scrubErr(rerr)}
		}
		if len(data) > maxResponse {
			return nil, nil, &Error{Op: op, Status: resp.StatusCode, Kind: KindBadRequest, Message: fmt.Sprintf("answer larger than %d bytes", maxResponse)}
		}
		return json.RawMessage(data), resp.Header, nil
	}
	msg := c.scrub(errorText(data))
	if msg == "" {
		msg = http.StatusText(resp.StatusCode)
	}
	kind := classify(resp.StatusCode, msg)
	if errorCode(data) == versionConflictCode {
		kind = KindConflict
	}
	return nil, resp.Header, &Error{Op: op, Status: resp.StatusCode, Kind: kind, Message: msg}
}

// errorCode is the "code" field of karvi's JSON error answer, if any.
func errorCode(body []byte) string {
	var e struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &e)
	return e.Code
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
