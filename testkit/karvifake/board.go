package karvifake

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"karvi-edda-temporal/internal/jsonmerge"
)

// boardState is what the board routes add to the tasks: the controls, the
// participants, the projects and the live feed's clients.
type boardState struct {
	controls     map[string]any
	participants []any
	projects     []map[string]any
	projectSeq   int
	feeds        int           // open feed connections
	heartbeat    time.Duration // between feed comments; karvi's 30 s
}

// MaxFeeds is karvi's limit of live feed clients.
const MaxFeeds = 50

var (
	cancelRoute  = regexp.MustCompile(`^/api/tasks/([^/]+)/cancel$`)
	projectRoute = regexp.MustCompile(`^/api/projects/([^/]+)/(pause|resume)$`)
)

// projectFields are the task fields POST /api/projects keeps, as karvi's
// project route copies them.
var projectFields = []string{"description", "assignee", "spec", "skill", "estimate", "target_repo", "runtimeHint", "modelHint", "scope"}

func copyFields(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// bumpLocked counts a board write without recording it: karvi's
// _version goes up and the live feed sends the board. The caller holds s.mu.
func (s *Server) bumpLocked() {
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
}

// SetControls merges controls into the board's (karvi's POST /api/controls).
func (s *Server) SetControls(c map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.board.controls == nil {
		s.board.controls = map[string]any{}
	}
	for k, v := range c {
		s.board.controls[k] = v
	}
	s.bumpLocked()
}

// SetParticipants replaces the board's participants ({id, type}).
func (s *Server) SetParticipants(p ...map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.board.participants = nil
	for _, x := range p {
		s.board.participants = append(s.board.participants, x)
	}
	s.bumpLocked()
}

// SetFeedHeartbeat sets how often the live feed sends its comment
// (karvi: 30 s), so a test need not wait that long.
func (s *Server) SetFeedHeartbeat(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.board.heartbeat = d
}

// Feeds is the number of open live feed connections.
func (s *Server) Feeds() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.board.feeds
}

// Version is the board's _version.
func (s *Server) Version() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.version
}

// boardLocked renders the whole board as GET /api/board and the feed's
// board events carry it. The caller holds s.mu.
func (s *Server) boardLocked() map[string]any {
	tasks := make([]any, 0, len(s.order))
	for _, id := range s.order {
		tasks = append(tasks, s.tasks[id].render())
	}
	projects := make([]any, 0, len(s.board.projects))
	for _, p := range s.board.projects {
		projects = append(projects, p)
	}
	b := map[string]any{
		"_version":     s.version,
		"taskPlan":     map[string]any{"goal": "", "phase": "executing", "tasks": tasks},
		"projects":     projects,
		"participants": append([]any{}, s.board.participants...),
		"signals":      []any{},
	}
	if s.board.controls != nil {
		b["controls"] = s.board.controls
	}
	return b
}

// serveBoard handles the routes of the board, the feed, projects and
// cancel; it reports whether it answered.
func (s *Server) serveBoard(w http.ResponseWriter, r *http.Request, path, role string) bool {
	switch {
	case r.Method == http.MethodGet && path == "/api/board":
		s.mu.Lock()
		out, err := json.Marshal(s.boardLocked())
		s.mu.Unlock()
		if err != nil {
			writeJSON(w, http.StatusInternalServerError, map[string]any{"error": err.Error()})
			return true
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(out)
	case r.Method == http.MethodGet && path == "/api/events":
		s.serveFeed(w, r)
	case r.Method == http.MethodGet && path == "/api/projects":
		s.mu.Lock()
		out, _ := json.Marshal(s.boardLocked()["projects"])
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(out)
	case r.Method == http.MethodPost && path == "/api/projects":
		if requireRole(w, role, "operator") {
			return true
		}
		s.createProject(w, r)
	case r.Method == http.MethodPost && projectRoute.MatchString(path):
		if requireRole(w, role, "operator") {
			return true
		}
		m := projectRoute.FindStringSubmatch(path)
		s.pauseProject(w, m[1], m[2])
	case r.Method == http.MethodPost && cancelRoute.MatchString(path):
		if requireRole(w, role, "operator") {
			return true
		}
		id, err := url.PathUnescape(cancelRoute.FindStringSubmatch(path)[1])
		if err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "URI malformed"})
			return true
		}
		p, _, ok := s.decodePayload(w, r)
		if !ok {
			return true
		}
		if err := s.SetStatus(id, "cancelled", jsString(p["reason"])); err != nil {
			code := http.StatusBadRequest
			if strings.Contains(err.Error(), "not found") {
				code = http.StatusNotFound
			}
			writeJSON(w, code, map[string]any{"error": strings.TrimPrefix(err.Error(), "karvifake: ")})
			return true
		}
		writeJSON(w, http.StatusOK, map[string]any{"ok": true})
	default:
		return false
	}
	return true
}

// serveFeed is karvi's GET /api/events: `connected`, then the whole board
// as a `board` event after every write, and a heartbeat comment. Writes
// that come faster than the client reads are coalesced (each board event
// carries the whole board anyway). No event ids: nothing to resume from.
func (s *Server) serveFeed(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	if s.board.feeds >= MaxFeeds {
		s.mu.Unlock()
		writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": "too_many_sse_connections", "message": fmt.Sprintf("SSE connection limit reached (%d)", MaxFeeds)})
		return
	}
	s.board.feeds++
	beat := s.board.heartbeat
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.board.feeds--
		s.mu.Unlock()
	}()
	if beat <= 0 {
		beat = 30 * time.Second
	}
	fl, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(http.StatusOK)
	send := func(format string, args ...any) bool {
		if _, err := fmt.Fprintf(w, format, args...); err != nil {
			return false
		}
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	// Every write after the connected event is sent.
	s.mu.Lock()
	ch := s.changed
	s.mu.Unlock()
	now, _ := json.Marshal(map[string]any{"ts": jsonmerge.FormatTime(s.opts.Now())})
	if !send("event: connected\ndata: %s\n\n", now) {
		return
	}
	tick := time.NewTicker(beat)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-tick.C:
			if !send(": heartbeat\n\n") {
				return
			}
		case <-ch:
			s.mu.Lock()
			ch = s.changed
			data, err := json.Marshal(s.boardLocked())
			s.mu.Unlock()
			if err != nil || !send("event: board\ndata: %s\n\n", data) {
				return
			}
		}
	}
}

// createProject is karvi's POST /api/projects: its tasks keep their
// runtimeHint (POST /api/tasks drops it); a task without dependencies is
// created dispatched, one with dependencies pending; a project entity
// exists only when the post has a repo.
func (s *Server) createProject(w http.ResponseWriter, r *http.Request) {
	p, _, ok := s.decodePayload(w, r)
	if !ok {
		return
	}
	title, _ := p["title"].(string)
	if title == "" {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "title is required"})
		return
	}
	raw, _ := p["tasks"].([]any)
	if len(raw) == 0 {
		writeJSON(w, http.StatusBadRequest, map[string]any{"error": "tasks array is required and must not be empty"})
		return
	}
	seen := map[string]bool{}
	var tasks []map[string]any
	for _, x := range raw {
		t, _ := x.(map[string]any)
		id, _ := t["id"].(string)
		if t == nil || !idPattern.MatchString(id) {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": fmt.Sprintf("task id %v: must match [A-Za-z0-9_-]+ in this fake", t["id"])})
			return
		}
		if seen[id] {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "duplicate task id: " + id})
			return
		}
		seen[id] = true
		tasks = append(tasks, t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	now := jsonmerge.FormatTime(s.opts.Now())
	projectID := ""
	if repo, _ := p["repo"].(string); repo != "" {
		s.board.projectSeq++
		// karvi's ids are unique (helpers.uid): so are these, across fakes.
		projectID = fmt.Sprintf("PROJ-%s%d", strconv.FormatInt(time.Now().UnixNano()%(1<<40), 36), s.board.projectSeq)
	}
	var ids []any
	for _, t := range tasks {
		id := t["id"].(string)
		ids = append(ids, id)
		if old, exists := s.tasks[id]; exists {
			if projectID != "" {
				old.fields = setField(old.fields, "projectId", projectID)
			}
			continue
		}
		deps, _ := t["depends"].([]any)
		status := "dispatched"
		if len(deps) > 0 {
			status = "pending"
		}
		nt := &task{id: id, status: status, fields: map[string]any{"depends": append([]any{}, deps...), "assignee": nil}}
		nt.title, _ = t["title"].(string)
		for _, k := range projectFields {
			if v, ok := t[k]; ok {
				nt.fields[k] = v
			}
		}
		if projectID != "" {
			nt.fields["projectId"] = projectID
		}
		nt.history = []any{map[string]any{"ts": now, "status": status, "reason": "project_created"}}
		s.tasks[id] = nt
		s.order = append(s.order, id)
	}
	result := map[string]any{"ok": true, "title": title, "taskCount": len(tasks)}
	if projectID != "" {
		concurrency := 3
		if c, ok := p["concurrency"].(float64); ok && c > 0 {
			concurrency = int(c)
		}
		trigger, _ := p["completionTrigger"].(string)
		if trigger == "" {
			trigger = "pr_merged"
		}
		proj := map[string]any{"id": projectID, "title": title, "repo": p["repo"], "status": "executing",
			"concurrency": concurrency, "completionTrigger": trigger, "taskIds": ids, "createdAt": now}
		s.board.projects = append(s.board.projects, proj)
		result["project"] = proj
	}
	s.bumpLocked()
	writeJSON(w, http.StatusCreated, result)
}

func setField(m map[string]any, k string, v any) map[string]any {
	if m == nil {
		m = map[string]any{}
	}
	m[k] = v
	return m
}

// pauseProject is karvi's POST /api/projects/:id/pause|resume: it sets the
// project's status and writes no history.
func (s *Server) pauseProject(w http.ResponseWriter, id, what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.board.projects {
		if p["id"] != id {
			continue
		}
		if p["status"] == "done" {
			writeJSON(w, http.StatusBadRequest, map[string]any{"error": "cannot " + what + " a completed project"})
			return
		}
		p["status"] = map[string]string{"pause": "paused", "resume": "executing"}[what]
		s.bumpLocked()
		writeJSON(w, http.StatusOK, map[string]any{"ok": true, "project": p})
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]any{"error": "project not found"})
}

// ProjectIDs lists the projects' ids in creation order.
func (s *Server) ProjectIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.board.projects {
		out = append(out, p["id"].(string))
	}
	sort.Strings(out)
	return out
}
