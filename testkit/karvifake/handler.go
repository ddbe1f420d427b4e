package karvifake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"

	"karvi-edda-temporal/internal/jsonmerge"
	"karvi-edda-temporal/internal/karvi"
)

var (
	briefRoute  = regexp.MustCompile(`^/api/brief/([A-Za-z0-9_-]+)$`)
	statusRoute = regexp.MustCompile(`^/api/tasks/([^/]+)/status$`)
	updateRoute = regexp.MustCompile(`^/api/tasks/([^/]+)/update$`)
	taskRoute   = regexp.MustCompile(`^/api/tasks/([^/]+)$`)
	writesRoute = regexp.MustCompile(`^/_fake/writes/([A-Za-z0-9_-]*)$`)
)

// roles ranks karvi's roles (rbac.js ROLE_LEVEL).
var roles = map[string]int{"viewer": 1, "operator": 2, "admin": 3}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()

	s.mu.Lock()
	latency := s.latency
	s.mu.Unlock()
	if latency > 0 {
		t := time.NewTimer(latency)
		select {
		case <-r.Context().Done():
			t.Stop()
			return
		case <-t.C:
		}
	}

	// karvi matches most routes on req.url, query string included, so
	// /api/brief/T5?x falls through to its static 404; /health and the
	// auth gate look at the path alone.
	path := r.URL.EscapedPath()
	full := path
	if r.URL.RawQuery != "" {
		full += "?" + r.URL.RawQuery
	}

	if r.Method == http.MethodGet && path == "/health" {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "boardType": "task-engine"})
		return
	}
	if m := writesRoute.FindStringSubmatch(path); m != nil && r.Method == http.MethodGet {
		writeJSON(w, http.StatusOK, s.Writes(m[1]))
		return
	}

	// karvi's rate limit comes before everything but /health, auth
	// included.
	if s.rateLimited(w, r) {
		return
	}
	isAPI := strings.HasPrefix(path, "/api/")
	isWrite := r.Method == http.MethodPatch || r.Method == http.MethodPut || r.Method == http.MethodPost
	if isAPI && isWrite && s.takeFailure(w) {
		return
	}
	role, ok := s.authenticate(r, isAPI)
	if !ok {
		writeJSON(w, http.StatusUnauthorized, map[string]any{"error": "unauthorized"})
		return
	}

	if isAPI && s.serveBoard(w, r, path, role) {
		return
	}
	switch {
	case briefRoute.MatchString(full) && (r.Method == http.MethodGet || r.Method == http.MethodPatch || r.Method == http.MethodPut):
		id := briefRoute.FindStringSubmatch(full)[1]
		if r.Method == http.MethodGet {
			s.getBrief(w, id)
			return
		}
		if requireRole(w, role, "operator") {
			return
		}
		s.writeBrief(w, r, id, at)
	case r.Method == http.MethodPost && statusRoute.MatchString(full):
		if requireRole(w, role, "operator") {
			return
		}
		s.setStatus(w, r, statusRoute.FindStringSubmatch(full)[1], at)
	case r.Method == http.MethodPost && updateRoute.MatchString(full):
		if requireRole(w, role, "operator") {
			return
		}
		s.update(w, r, updateRoute.FindStringSubmatch(full)[1], at)
	case r.Method == http.MethodDelete && taskRoute.MatchString(full):
		if requireRole(w, role, "operator") {
			return
		}
		id, err := url.PathUnescape(taskRoute.FindStringSubmatch(full)[1])
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "URI malformed"})
			return
		}
		s.mu.Lock()
		t, ok := s.tasks[id]
		final := ""
		if ok {
			final = t.status
		}
		s.mu.Unlock()
		if !ok || !s.DeleteTask(id) {
			writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("Task %s not found", id)})
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"removed": id, "finalStatus": final})
	case r.Method == http.MethodGet && strings.HasPrefix(full, "/api/tasks"):
		// karvi answers any GET under /api/tasks (but a few sub-resources
		// this fake does not have) with the whole taskPlan.
		s.listTasks(w)
	default:
		// karvi falls through to its static file server.
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "Not found")
	}
}

// takeFailure answers with an injected failure if one is pending.
func (s *Server) takeFailure(w http.ResponseWriter) bool {
	s.mu.Lock()
	if s.failN <= 0 {
		s.mu.Unlock()
		return false
	}
	s.failN--
	code := s.failCode
	s.mu.Unlock()
	writeJSON(w, code, map[string]any{"error": "injected failure"})
	return true
}

// authenticate returns the caller's role ("" when auth is off) and whether
// the request may proceed. Like karvi, only /api/ paths need a token.
func (s *Server) authenticate(r *http.Request, isAPI bool) (string, bool) {
	o := s.opts
	if o.Token == "" && o.OperatorToken == "" && o.ViewerToken == "" {
		return "", true
	}
	if !isAPI {
		return "", true
	}
	var provided string
	h := r.Header.Get("Authorization")
	switch {
	case r.URL.Path == "/api/events":
		// karvi reads the feed's token from the query only.
		provided = r.URL.Query().Get("token")
	case len(h) > 7 && strings.EqualFold(h[:6], "bearer") && (h[6] == ' ' || h[6] == '\t'):
		provided = strings.TrimLeft(h[7:], " \t")
	}
	switch {
	case provided == "":
		return "", false
	case o.Token != "" && provided == o.Token:
		return "admin", true
	case o.OperatorToken != "" && provided == o.OperatorToken:
		return "operator", true
	case o.ViewerToken != "" && provided == o.ViewerToken:
		return "viewer", true
	}
	return "", false
}

// requireRole answers 403 as karvi's requireRole does when role is below
// min; with auth off (role "") everything passes.
func requireRole(w http.ResponseWriter, role, min string) bool {
	if role == "" || roles[role] >= roles[min] {
		return false
	}
	writeJSON(w, http.StatusForbidden, map[string]any{"error": "forbidden", "requiredRole": min, "currentRole": role})
	return true
}

// readBody reads a request body under the size limit; karvi answers 413
// beyond it.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.opts.MaxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			writeJSON(w, http.StatusRequestEntityTooLarge, map[string]any{"error": "Payload too large"})
		} else {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "read body: " + err.Error()})
		}
		return nil, false
	}
	return body, true
}

func (s *Server) getBrief(w http.ResponseWriter, id string) {
	s.mu.Lock()
	t, ok := s.tasks[id]
	var brief []byte
	if ok && t.briefPath != "" && t.brief != nil {
		brief, _ = json.Marshal(t.brief)
	}
	s.mu.Unlock()
	if brief == nil {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no brief for this task"})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(brief)
}

func (s *Server) writeBrief(w http.ResponseWriter, r *http.Request, id string, at time.Time) {
	body, ok := s.readBody(w, r)
	if !ok {
		return
	}
	doc, err := jsonmerge.DecodeObject(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": bodyError(body, err)})
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok || t.briefPath == "" || (r.Method == http.MethodPatch && t.brief == nil) {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": "no brief for this task"})
		return
	}
	if s.conflictLocked(w, "brief", id) {
		return
	}
	if r.Method == http.MethodPatch {
		doc = jsonmerge.Merge(t.brief, doc)
	}
	jsonmerge.StampMeta(doc, id, s.opts.Now())
	t.brief = doc
	s.record(Write{Method: r.Method, Path: r.URL.Path, TaskID: id, Body: body, At: at})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "taskId": id})
}

// bodyError words a body refusal the way karvi does where it can.
func bodyError(body []byte, err error) string {
	if errors.Is(err, jsonmerge.ErrNotObject) {
		if strings.TrimSpace(string(body)) == "null" {
			return "Cannot convert undefined or null to object"
		}
		return err.Error()
	}
	return "Invalid JSON body"
}

// decodePayload parses a task route body as karvi does (JSON.parse of
// `body || '{}'`), answering 400 itself on failure.
func (s *Server) decodePayload(w http.ResponseWriter, r *http.Request) (map[string]any, []byte, bool) {
	body, ok := s.readBody(w, r)
	if !ok {
		return nil, nil, false
	}
	p, err := jsonmerge.DecodeObject(body)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": bodyError(body, err)})
		return nil, nil, false
	}
	return p, body, true
}

func invalidStatus(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, map[string]any{
		"error": "Invalid status. Must be one of: " + strings.Join(karvi.Statuses, ", "),
	})
}

func (s *Server) setStatus(w http.ResponseWriter, r *http.Request, rawID string, at time.Time) {
	id, err := url.PathUnescape(rawID)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "URI malformed"})
		return
	}
	p, body, ok := s.decodePayload(w, r)
	if !ok {
		return
	}
	newStatus := strings.TrimSpace(jsString(p["status"]))
	if !karvi.ValidStatus(newStatus) {
		invalidStatus(w)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("Task %s not found", id)})
		return
	}
	if !karvi.CanTransition(t.status, newStatus) {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": karvi.IllegalTransitionError("", t.status, newStatus).Message})
		return
	}
	if s.conflictLocked(w, "status", id) {
		return
	}
	if err := s.applyStatus(t, newStatus, p["reason"]); err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": err.Error()})
		return
	}
	s.record(Write{Method: r.Method, Path: r.URL.Path, TaskID: id, Body: body, At: at})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "task": t.render()})
}

// applyStatus moves t to newStatus as karvi's status route does; the
// caller holds s.mu.
func (s *Server) applyStatus(t *task, newStatus string, reason any) error {
	old := t.status
	if !karvi.CanTransition(old, newStatus) {
		return errors.New(karvi.IllegalTransitionError("", old, newStatus).Message)
	}
	now := jsonmerge.FormatTime(s.opts.Now())
	t.status = newStatus
	entry := map[string]any{"ts": now, "status": newStatus, "from": old, "by": "human"}
	if newStatus == "cancelled" && truthy(reason) {
		entry["reason"] = reason
	}
	t.history = append(t.history, entry)
	switch newStatus {
	case "in_progress":
		if t.startedAt == "" {
			t.startedAt = now
		}
		zero := 0
		t.reviewAttempts = &zero
	case "completed", "cancelled":
		t.completedAt = now
	}
	if newStatus == "blocked" && truthy(reason) {
		t.blocker = map[string]any{"reason": reason, "askedAt": now}
		t.blockerSet = true
	}
	if newStatus != "blocked" {
		t.blocker, t.blockerSet = nil, true
	}
	return nil
}

func (s *Server) update(w http.ResponseWriter, r *http.Request, rawID string, at time.Time) {
	id, err := url.PathUnescape(rawID)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "URI malformed"})
		return
	}
	p, body, ok := s.decodePayload(w, r)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]any{"error": fmt.Sprintf("Task %s not found", id)})
		return
	}
	next := t.status
	if truthy(p["status"]) {
		next = strings.TrimSpace(jsString(p["status"]))
		if !karvi.ValidStatus(next) {
			invalidStatus(w)
			return
		}
		if !karvi.CanTransition(t.status, next) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": karvi.IllegalTransitionError("", t.status, next).Message})
			return
		}
	}
	if s.conflictLocked(w, "update", id) {
		return
	}
	now := jsonmerge.FormatTime(s.opts.Now())
	t.status = next
	if truthy(p["result"]) {
		t.result = p["result"]
	}
	if truthy(p["childSessionKey"]) {
		t.childSessionKey = p["childSessionKey"]
	}
	if truthy(p["blocker"]) {
		t.blocker, t.blockerSet = p["blocker"], true
	}
	t.history = append(t.history, map[string]any{"ts": now, "status": t.status, "update": p})
	if t.status == "in_progress" {
		if t.startedAt == "" {
			t.startedAt = now
		}
		zero := 0
		t.reviewAttempts = &zero
	}
	if t.status == "completed" {
		t.completedAt = now
	}
	if jsString(p["status"]) == "blocked" && !truthy(p["blocker"]) {
		t.blocker = map[string]any{"reason": "Unknown block", "askedAt": now}
		t.blockerSet = true
	}
	s.record(Write{Method: r.Method, Path: r.URL.Path, TaskID: id, Body: body, At: at})
	writeJSON(w, http.StatusOK, map[string]any{"ok": true, "task": t.render()})
}

func (s *Server) listTasks(w http.ResponseWriter) {
	s.mu.Lock()
	tasks := make([]any, 0, len(s.order))
	for _, id := range s.order {
		tasks = append(tasks, s.tasks[id].render())
	}
	plan := map[string]any{"goal": "", "phase": "executing", "tasks": tasks}
	out, err := json.Marshal(plan)
	s.mu.Unlock()
	if err != nil {
		writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		code, b = http.StatusInternalServerError, []byte(`{"error":"encode answer"}`)
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// jsString is JavaScript's String(x || ”) for decoded JSON values.
func jsString(v any) string {
	if !truthy(v) {
		return ""
	}
	switch t := v.(type) {
	case string:
		return t
	case bool:
		return "true"
	case float64:
		return fmt.Sprint(t)
	default:
		// String([..]) or String({..}): never a valid status anyway.
		return fmt.Sprintf("%v", t)
	}
}

// truthy is JavaScript truthiness for decoded JSON values.
func truthy(v any) bool {
	switch t := v.(type) {
	case nil:
		return false
	case bool:
		return t
	case float64:
		return t != 0 && !math.IsNaN(t)
	case string:
		return t != ""
	default:
		return true
	}
}
