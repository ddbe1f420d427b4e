package karvi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// GetBoard returns karvi's whole board document (GET /api/board) as karvi
// serves it: `_version`, `taskPlan`, `controls`, `participants`,
// `projects` and whatever else karvi keeps. It is the document every
// `board` event of the live feed carries. GET /api/tasks answers only the
// task plan, without the version, the controls or the projects.
func (c *Client) GetBoard(ctx context.Context) (json.RawMessage, error) {
	return c.do(ctx, "GET /api/board", http.MethodGet, "/api/board", nil)
}

// FeedEvent is one server-sent event of karvi's live feed.
type FeedEvent struct {
	// Name is the event's name (connected, board, brief, ...).
	Name string
	// Data is the event's data lines joined by newlines.
	Data []byte
}

// feedConnectTimeout bounds the wait for the feed's answer headers; the
// stream itself has no deadline (karvi sends a comment every 30 s).
const feedConnectTimeout = 30 * time.Second

// FollowEvents connects to karvi's live feed (GET /api/events) and calls
// fn for every event, in order, until ctx ends, the connection fails, or
// fn returns an error (which FollowEvents then returns). karvi takes the
// feed's token only as a query parameter. The feed has no event ids: a
// caller that reconnects cannot resume and must read the board again.
// A refused connection is an *Error classified as the other requests
// are (401/403 KindUnauthorized, 429 KindTransient, ...).
func (c *Client) FollowEvents(ctx context.Context, fn func(FeedEvent) error) error {
	const op = "GET /api/events"
	if err := c.gate.wait(ctx, op, true); err != nil {
		return err
	}
	target := c.BaseURL + "/api/events"
	if c.Token != "" {
		target += "?token=" + url.QueryEscape(c.Token)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodGet, target, nil)
	if err != nil {
		return &Error{Op: op, Kind: KindBadRequest, Message: c.scrub("build request: " + err.Error())}
	}
	req.Header.Set("Accept", "text/event-stream")
	// The client's own timeout would cut the stream: use its transport
	// without one, and bound only the wait for the headers.
	hc := &http.Client{Transport: c.HTTP.Transport}
	timer := time.AfterFunc(feedConnectTimeout, cancel)
	c.gate.sent.Add(1)
	resp, err := hc.Do(req)
	timer.Stop()
	if err != nil {
		return &Error{Op: op, Kind: KindTransient, Message: c.scrub(err.Error()), Err: c.scrubErr(err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		msg := c.scrub(errorText(data))
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		if resp.StatusCode == http.StatusTooManyRequests {
			c.gate.pause(retryAfter(resp.Header, time.Now()))
		}
		return &Error{Op: op, Status: resp.StatusCode, Kind: classify(resp.StatusCode, msg), Message: msg}
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		return &Error{Op: op, Status: resp.StatusCode, Kind: KindBadRequest, Message: fmt.Sprintf("not a live feed: Content-Type %q", ct)}
	}
	err = readEvents(resp.Body, fn)
	var fe fnError
	if errors.As(err, &fe) {
		return fe.err
	}
	if ctx.Err() != nil {
		return &Error{Op: op, Kind: KindTransient, Message: "feed closed: " + ctx.Err().Error(), Err: ctx.Err()}
	}
	return &Error{Op: op, Kind: KindTransient, Message: c.scrub("feed: " + err.Error()), Err: c.scrubErr(err)}
}

// fnError carries the callback's error out of readEvents unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// readEvents parses a text/event-stream body: `event:` and `data:` lines,
// a blank line ending an event, `:` comments ignored. An event larger than
// maxResponse is an error. The stream ending is io.ErrUnexpectedEOF.
func readEvents(body io.Reader, fn func(FeedEvent) error) error {
	rd := bufio.NewReaderSize(body, 64<<10)
	var name string
	var data bytes.Buffer
	hasData := false
	for {
		line, err := readLine(rd)
		if err != nil {
			if err == io.EOF {
				return io.ErrUnexpectedEOF
			}
			return err
		}
		switch {
		case len(line) == 0:
			if hasData || name != "" {
				ev := FeedEvent{Name: name, Data: append([]byte(nil), data.Bytes()...)}
				if ev.Name == "" {
					ev.Name = "message"
				}
				if err := fn(ev); err != nil {
					return fnError{err}
				}
			}
			name, hasData = "", false
			data.Reset()
		case line[0] == ':':
		default:
			field, value, _ := bytes.Cut(line, []byte(":"))
			value = bytes.TrimPrefix(value, []byte(" "))
			switch string(field) {
			case "event":
				name = string(value)
			case "data":
				if hasData {
					data.WriteByte('\n')
				}
				data.Write(value)
				hasData = true
				if data.Len() > maxResponse {
					return fmt.Errorf("event larger than %d bytes", maxResponse)
				}
			}
		}
	}
}

// readLine returns one line without its line ending, however long (up to
// maxResponse).
func readLine(rd *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		chunk, err := rd.ReadSlice('\n')
		line = append(line, chunk...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxResponse {
				return nil, fmt.Errorf("line larger than %d bytes", maxResponse)
			}
			continue
		}
		if err != nil {
			return nil, err
		}
		line = bytes.TrimSuffix(line, []byte("\n"))
		return bytes.TrimSuffix(line, []byte("\r")), nil
	}
}
