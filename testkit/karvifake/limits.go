package karvifake

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
)

// bucket is karvi's rate limiter's bucket for one client address: capacity
// tokens, refilled continuously over a minute (at the fake's time scale),
// one per request.
type bucket struct {
	tokens float64
	last   time.Time
}

// refill is how many tokens a second a bucket of capacity gets back: all
// of them over a minute at the fake's time scale.
func (s *Server) refill(capacity float64) float64 {
	return capacity / s.opts.TimeScale.Of(time.Minute).Seconds()
}

// take refills b up to now and takes a token when one is there.
func (b *bucket) take(now time.Time, capacity, refill float64) bool {
	b.tokens = math.Min(capacity, b.tokens+now.Sub(b.last).Seconds()*refill)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}

// rateLimited answers 429 as karvi does when the client's bucket is empty;
// it counts every request it looks at.
func (s *Server) rateLimited(w http.ResponseWriter, r *http.Request) bool {
	limit := s.opts.RateLimit
	s.mu.Lock()
	s.requests++
	route, taskID := routeOf(r)
	if limit < 0 {
		s.countRoute(route, taskID)
		s.mu.Unlock()
		return false
	}
	ip, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		ip = r.RemoteAddr
	}
	now := time.Now()
	capacity := float64(limit)
	refill := s.refill(capacity)
	b, ok := s.buckets[ip]
	if !ok {
		b = &bucket{tokens: capacity, last: now}
		s.buckets[ip] = b
	}
	if b.take(now, capacity, refill) {
		s.countRoute(route, taskID)
		remaining := math.Floor(b.tokens)
		s.mu.Unlock()
		w.Header().Set("X-RateLimit-Limit", fmt.Sprint(limit))
		w.Header().Set("X-RateLimit-Remaining", fmt.Sprint(remaining))
		return false
	}
	// Whole seconds, as karvi sends them: at a time scale the wait is
	// still a second at least.
	retry := int(math.Ceil((1 - b.tokens) / refill))
	s.refused++
	s.countRoute("429 "+route, taskID)
	s.mu.Unlock()
	w.Header().Set("X-RateLimit-Limit", fmt.Sprint(limit))
	w.Header().Set("X-RateLimit-Remaining", "0")
	w.Header().Set("Retry-After", fmt.Sprint(retry))
	w.Header().Set("X-RateLimit-Reset", fmt.Sprint(retry))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{
		"error":      "rate_limit_exceeded",
		"retryAfter": retry,
		"message":    fmt.Sprintf("Rate limit exceeded. Try again in %ds", retry),
	})
	return true
}

// Stats are what the fake counted: every request but /health and the
// fake's own routes, and the 429 refusals among them; Routes breaks the
// requests down by route ("PATCH /api/brief/:id", "GET /api/tasks", ...),
// the refusals under "429 " and their route.
type Stats struct {
	Requests, Refused int
	Routes            map[string]int
}

// Stats returns the counts so far.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Stats{Requests: s.requests, Refused: s.refused, Routes: maps.Clone(s.routes[""])}
}

// TaskStats returns the counts of the requests that named task id in
// their path (board reads, which name no task, are not among them).
func (s *Server) TaskStats(id string) Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := Stats{Routes: maps.Clone(s.routes[id])}
	if st.Routes == nil {
		st.Routes = map[string]int{}
	}
	for r, n := range st.Routes {
		if strings.HasPrefix(r, "429 ") {
			st.Refused += n
		} else {
			st.Requests += n
		}
	}
	return st
}

// countRoute counts one request under route, in total and for taskID.
// Callers hold s.mu.
func (s *Server) countRoute(route, taskID string) {
	if s.routes == nil {
		s.routes = map[string]map[string]int{}
	}
	inc := func(k string) {
		if s.routes[k] == nil {
			s.routes[k] = map[string]int{}
		}
		s.routes[k][route]++
	}
	inc("")
	if taskID != "" {
		inc(taskID)
	}
}

// routeOf names r's route with the task id in it replaced by :id, and
// returns that id ("" for a route without one).
func routeOf(r *http.Request) (string, string) {
	path := r.URL.EscapedPath()
	for _, re := range []*regexp.Regexp{briefRoute, statusRoute, updateRoute, taskRoute} {
		if m := re.FindStringSubmatch(path); m != nil {
			id, err := url.PathUnescape(m[1])
			if err != nil {
				id = m[1]
			}
			return r.Method + " " + strings.Replace(path, m[1], ":id", 1), id
		}
	}
	return r.Method + " " + path, ""
}

// conflict is one injected version conflict.
type conflict struct {
	route  string // "status", "update", "brief" or "" for any write
	taskID string // "" for any task
	left   int    // matching writes still to let through before it
	status int    // 400 (the board routes) or 503 (code VERSION_CONFLICT)
}

// Conflict arms a version conflict, as when another writer (karvi's own
// review process) changed the board between karvi's read and its write: the
// Nth matching write from now is answered with it and has no effect.
type Conflict struct {
	// Route is "status" (POST /api/tasks/:id/status), "update", "brief"
	// (PATCH/PUT /api/brief/:id), or "" for any write.
	Route string
	// TaskID limits it to one task ("" = any).
	TaskID string
	// Nth is which matching write gets it, 1 for the next.
	Nth int
	// Status is 400 with "Version conflict: expected N, got M" (the
	// default, as karvi's task routes answer) or 503 with code
	// VERSION_CONFLICT (as some of its routes do).
	Status int
}

// InjectConflict arms c.
func (s *Server) InjectConflict(c Conflict) error {
	switch c.Route {
	case "", "status", "update", "brief":
	default:
		return fmt.Errorf("karvifake: conflict route %q: want status, update, brief or empty", c.Route)
	}
	if c.Nth < 1 {
		return errors.New("karvifake: conflict Nth must be at least 1")
	}
	if c.Status == 0 {
		c.Status = http.StatusBadRequest
	}
	if c.Status != http.StatusBadRequest && c.Status != http.StatusServiceUnavailable {
		return fmt.Errorf("karvifake: conflict status %d: want 400 or 503", c.Status)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conflicts = append(s.conflicts, conflict{route: c.Route, taskID: c.TaskID, left: c.Nth - 1, status: c.Status})
	return nil
}

// conflictLocked answers an injected conflict for this write if one is
// due; the caller holds s.mu.
func (s *Server) conflictLocked(w http.ResponseWriter, route, taskID string) bool {
	fire := -1
	for i := range s.conflicts {
		c := &s.conflicts[i]
		if (c.route != "" && c.route != route) || (c.taskID != "" && c.taskID != taskID) {
			continue
		}
		if c.left > 0 {
			c.left--
			continue
		}
		if fire < 0 {
			fire = i
		}
	}
	if fire < 0 {
		return false
	}
	c := s.conflicts[fire]
	s.conflicts = append(s.conflicts[:fire], s.conflicts[fire+1:]...)
	v := s.version
	if c.status == http.StatusServiceUnavailable {
		writeJSON(w, c.status, map[string]any{"error": "Service temporarily unavailable", "code": "VERSION_CONFLICT"})
	} else {
		writeJSON(w, c.status, map[string]any{"error": fmt.Sprintf("Version conflict: expected %d, got %d", v, v+1)})
	}
	return true
}

// DeleteTask removes a task as karvi does on DELETE /api/tasks/:id and by
// itself for old tasks (cancelled after an hour, blocked after six,
// approved after a day): its brief routes then answer 404 "no brief for
// this task", its status routes 404 "Task X not found". It reports whether
// the task existed.
func (s *Server) DeleteTask(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.tasks[id]; !ok {
		return false
	}
	delete(s.tasks, id)
	for i, o := range s.order {
		if o == id {
			s.order = append(s.order[:i], s.order[i+1:]...)
			break
		}
	}
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
	return true
}

// SetStatus moves a task as a person would on the board (karvi's Cancel
// button, POST /api/tasks/:id/status), through karvi's transition table.
func (s *Server) SetStatus(id, status, reason string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.tasks[id]
	if !ok {
		return fmt.Errorf("karvifake: Task %s not found", id)
	}
	if err := s.applyStatus(t, status, reason); err != nil {
		return err
	}
	s.version++
	close(s.changed)
	s.changed = make(chan struct{})
	return nil
}
