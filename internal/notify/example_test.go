package notify_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"karvi-edda-temporal/internal/notify"
)

// A receiver checks the signature over the raw body, then acts on each
// delivery id once.
func ExampleVerifySignature() {
	secret := []byte("shared-secret")
	var (
		mu   sync.Mutex
		seen = map[string]bool{}
	)
	hook := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if err != nil {
			http.Error(w, "cannot read", http.StatusBadRequest)
			return
		}
		if err := notify.VerifySignature(secret, body, r.Header.Get(notify.HeaderSignature)); err != nil {
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		id := r.Header.Get(notify.HeaderDelivery)
		mu.Lock()
		dup := seen[id]
		seen[id] = true
		mu.Unlock()
		if !dup {
			fmt.Println("acting on", r.Header.Get(notify.HeaderEvent), id)
		}
		w.WriteHeader(http.StatusNoContent)
	})

	body := `{"id":"ev-1","version":1,"kind":"paused","time":"2026-03-10T14:00:00Z"}`
	for _, sig := range []string{notify.Sign(secret, []byte(body)), notify.Sign(secret, []byte(body)), "sha256=00"} {
		req := httptest.NewRequest(http.MethodPost, "/hook", strings.NewReader(body))
		req.Header.Set(notify.HeaderSignature, sig)
		req.Header.Set(notify.HeaderDelivery, "ev-1")
		req.Header.Set(notify.HeaderEvent, "paused")
		rec := httptest.NewRecorder()
		hook.ServeHTTP(rec, req)
		fmt.Println(rec.Code)
	}
	// Output:
	// acting on paused ev-1
	// 204
	// 204
	// 401
}
