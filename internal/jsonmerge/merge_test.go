package jsonmerge

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"
)

func obj(t *testing.T, s string) map[string]any {
	t.Helper()
	m, err := DecodeObject([]byte(s))
	if err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func TestMerge(t *testing.T) {
	cases := []struct {
		name, dst, patch, want string
	}{
		{"empty patch keeps dst", `{"a":1}`, `{}`, `{"a":1}`},
		{"new key added", `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
		{"scalar replaces scalar", `{"a":1}`, `{"a":"x"}`, `{"a":"x"}`},
		{"nested objects merge", `{"p":{"x":{"s":"running","n":1}}}`, `{"p":{"x":{"s":"passed"},"y":{"s":"running"}}}`,
			`{"p":{"x":{"s":"passed","n":1},"y":{"s":"running"}}}`},
		{"array replaces array whole", `{"log":[1,2,3]}`, `{"log":[4]}`, `{"log":[4]}`},
		{"empty array replaces", `{"log":[1]}`, `{"log":[]}`, `{"log":[]}`},
		{"null is stored not deleted", `{"a":1,"b":2}`, `{"a":null}`, `{"a":null,"b":2}`},
		{"nested null stored", `{"c":{"t":1,"u":2}}`, `{"c":{"t":null}}`, `{"c":{"t":null,"u":2}}`},
		{"object replaces scalar", `{"a":1}`, `{"a":{"b":2}}`, `{"a":{"b":2}}`},
		{"object replaces array", `{"a":[1]}`, `{"a":{"b":2}}`, `{"a":{"b":2}}`},
		{"array replaces object", `{"a":{"b":2}}`, `{"a":[1]}`, `{"a":[1]}`},
		{"scalar replaces object", `{"a":{"b":2}}`, `{"a":5}`, `{"a":5}`},
		{"object replaces null", `{"a":null}`, `{"a":{"b":null}}`, `{"a":{"b":null}}`},
		{"null replaces object", `{"a":{"b":2}}`, `{"a":null}`, `{"a":null}`},
		{"deep three levels", `{"a":{"b":{"c":1,"d":2}}}`, `{"a":{"b":{"c":9}}}`, `{"a":{"b":{"c":9,"d":2}}}`},
		{"empty object patch merges to same", `{"a":{"b":1}}`, `{"a":{}}`, `{"a":{"b":1}}`},
		{"empty object onto missing key", `{}`, `{"a":{}}`, `{"a":{}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dst, patch, want := obj(t, tc.dst), obj(t, tc.patch), obj(t, tc.want)
			dstBefore := CloneObject(dst)
			patchBefore := CloneObject(patch)
			got := Merge(dst, patch)
			if !reflect.DeepEqual(got, want) {
				g, _ := json.Marshal(got)
				t.Fatalf("Merge(%s, %s) = %s, want %s", tc.dst, tc.patch, g, tc.want)
			}
			if !reflect.DeepEqual(dst, dstBefore) || !reflect.DeepEqual(patch, patchBefore) {
				t.Fatal("Merge modified its arguments")
			}
			// Applying the same patch again changes nothing: retried PATCHes are harmless.
			if again := Merge(got, patch); !reflect.DeepEqual(again, want) {
				t.Fatalf("second application changed the result: %v", again)
			}
		})
	}
}

func TestMergeResultDoesNotAliasPatch(t *testing.T) {
	patch := obj(t, `{"log":[{"a":1}],"o":{"x":1}}`)
	got := Merge(map[string]any{}, patch)
	got["log"].([]any)[0].(map[string]any)["a"] = 2.0
	got["o"].(map[string]any)["x"] = 2.0
	if patch["log"].([]any)[0].(map[string]any)["a"] != 1.0 || patch["o"].(map[string]any)["x"] != 1.0 {
		t.Fatal("mutating the merge result changed the patch")
	}
}

func TestDecodeObject(t *testing.T) {
	if m, err := DecodeObject(nil); err != nil || len(m) != 0 {
		t.Fatalf("empty body: %v %v, want {}", m, err)
	}
	if m, err := DecodeObject([]byte("  \n")); err != nil || len(m) != 0 {
		t.Fatalf("blank body: %v %v, want {}", m, err)
	}
	for _, bad := range []string{`null`, `[1]`, `"s"`, `5`, `true`} {
		if _, err := DecodeObject([]byte(bad)); !errors.Is(err, ErrNotObject) {
			t.Errorf("DecodeObject(%s) err = %v, want ErrNotObject", bad, err)
		}
	}
	for _, bad := range []string{`{`, `{"a":1} {"b":2}`, `{"a":}`} {
		if _, err := DecodeObject([]byte(bad)); err == nil || errors.Is(err, ErrNotObject) {
			t.Errorf("DecodeObject(%s) err = %v, want a syntax error", bad, err)
		}
	}
}

func TestStampMeta(t *testing.T) {
	now := time.Date(2026, 2, 28, 3, 5, 0, 123456789, time.FixedZone("x", 3600))
	cases := []struct{ name, in, want string }{
		{"no meta", `{"a":1}`,
			`{"a":1,"meta":{"updatedAt":"2026-02-28T02:05:00.123Z","boardType":"brief","version":1,"taskId":"T5"}}`},
		{"keeps boardType, version and extra keys; overrides taskId", `{"meta":{"boardType":"x","version":3,"runtime":"edda","taskId":"OTHER"}}`,
			`{"meta":{"updatedAt":"2026-02-28T02:05:00.123Z","boardType":"x","version":3,"runtime":"edda","taskId":"T5"}}`},
		{"falsy values defaulted", `{"meta":{"boardType":"","version":0}}`,
			`{"meta":{"updatedAt":"2026-02-28T02:05:00.123Z","boardType":"brief","version":1,"taskId":"T5"}}`},
		{"null meta", `{"meta":null}`,
			`{"meta":{"updatedAt":"2026-02-28T02:05:00.123Z","boardType":"brief","version":1,"taskId":"T5"}}`},
		{"null version", `{"meta":{"version":null,"boardType":false}}`,
			`{"meta":{"updatedAt":"2026-02-28T02:05:00.123Z","boardType":"brief","version":1,"taskId":"T5"}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			doc := obj(t, tc.in)
			StampMeta(doc, "T5", now)
			if want := obj(t, tc.want); !reflect.DeepEqual(doc, want) {
				g, _ := json.Marshal(doc)
				t.Fatalf("got %s, want %s", g, tc.want)
			}
		})
	}
}

func TestFormatTimeMatchesToISOString(t *testing.T) {
	got := FormatTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	if got != "2026-01-02T03:04:05.000Z" {
		t.Fatalf("FormatTime = %q", got)
	}
}
