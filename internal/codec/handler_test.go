package codec

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

func serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h) // listens on 127.0.0.1
	t.Cleanup(srv.Close)
	if !strings.HasPrefix(srv.URL, "http://127.0.0.1:") {
		t.Fatalf("test server not on 127.0.0.1: %s", srv.URL)
	}
	return srv
}

// TestHandlerWithSDKRemoteCodec speaks to the endpoint with the SDK's own
// client side of the protocol, the one the CLI and the Web UI mirror.
func TestHandlerWithSDKRemoteCodec(t *testing.T) {
	keys := mustKeys(t, key(t, "k1"))
	srv := serve(t, Handler(keys))
	remote := converter.NewRemotePayloadCodec(converter.RemotePayloadCodecOptions{
		Endpoint: srv.URL + "/default",
		ModifyRequest: func(r *http.Request) error {
			r.Header.Set("X-Namespace", "default")
			return nil
		},
	})
	local := NewCodec(keys)
	in := payloads(t)

	enc, err := remote.Encode(in)
	if err != nil {
		t.Fatalf("remote encode: %v", err)
	}
	dec, err := local.Decode(enc)
	if err != nil {
		t.Fatalf("local decode of remote encode: %v", err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Fatalf("payload %d differs", i)
		}
	}

	enc, err = local.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	dec, err = remote.Decode(enc)
	if err != nil {
		t.Fatalf("remote decode: %v", err)
	}
	for i := range in {
		if !proto.Equal(dec[i], in[i]) {
			t.Fatalf("payload %d differs after remote decode", i)
		}
	}
}

func post(t *testing.T, url string, body []byte, hdr map[string]string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestHandlerRawProtocol(t *testing.T) {
	keys := mustKeys(t, key(t, "k1"))
	srv := serve(t, NewHandler(keys, HandlerOptions{Origins: []string{"http://ui.local:8080"}, Namespaces: []string{"karvi"}}))
	body, err := protojson.Marshal(&commonpb.Payloads{Payloads: payloads(t)})
	if err != nil {
		t.Fatal(err)
	}
	hdr := map[string]string{"X-Namespace": "karvi", "Origin": "http://ui.local:8080"}

	resp, encBody := post(t, srv.URL+"/encode", body, hdr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("encode: %d %s", resp.StatusCode, encBody)
	}
	if got := resp.Header.Get("Access-Control-Allow-Origin"); got != "http://ui.local:8080" {
		t.Fatalf("CORS origin header %q", got)
	}
	if bytes.Contains(encBody, []byte("do-not-leak")) {
		t.Fatal("encode answer holds plaintext")
	}
	var encoded commonpb.Payloads
	if err := protojson.Unmarshal(encBody, &encoded); err != nil {
		t.Fatalf("encode answer is not Payloads JSON: %v", err)
	}

	resp, decBody := post(t, srv.URL+"/decode", encBody, hdr)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("decode: %d %s", resp.StatusCode, decBody)
	}
	var decoded commonpb.Payloads
	if err := protojson.Unmarshal(decBody, &decoded); err != nil {
		t.Fatal(err)
	}
	want := payloads(t)
	for i := range want {
		if !proto.Equal(decoded.Payloads[i], want[i]) {
			t.Fatalf("payload %d differs", i)
		}
	}

	// Wrong namespace, missing namespace, foreign origin, bad body, wrong key.
	for name, h := range map[string]map[string]string{
		"other namespace": {"X-Namespace": "other"},
		"no namespace":    {},
		"foreign origin":  {"X-Namespace": "karvi", "Origin": "http://evil.local"},
	} {
		if resp, b := post(t, srv.URL+"/decode", encBody, h); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: status %d %s", name, resp.StatusCode, b)
		}
	}
	if resp, _ := post(t, srv.URL+"/decode", []byte("{not json"), hdr); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("bad body: status %d", resp.StatusCode)
	}
	other := serve(t, Handler(mustKeys(t, key(t, "k9"))))
	resp, b := post(t, other.URL+"/decode", encBody, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "unknown encryption key id") {
		t.Errorf("unknown key: %d %s", resp.StatusCode, b)
	}
}

func TestHandlerCORSPreflight(t *testing.T) {
	srv := serve(t, Handler(mustKeys(t, key(t, "k1"))))
	req, _ := http.NewRequest(http.MethodOptions, srv.URL+"/decode", nil)
	req.Header.Set("Origin", "http://localhost:8233")
	req.Header.Set("Access-Control-Request-Method", "POST")
	req.Header.Set("Access-Control-Request-Headers", "content-type,x-namespace")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("preflight status %d", resp.StatusCode)
	}
	h := resp.Header
	if h.Get("Access-Control-Allow-Origin") != "http://localhost:8233" ||
		!strings.Contains(h.Get("Access-Control-Allow-Headers"), "X-Namespace") ||
		!strings.Contains(h.Get("Access-Control-Allow-Methods"), "POST") ||
		h.Get("Access-Control-Allow-Credentials") != "true" {
		t.Fatalf("preflight headers: %v", h)
	}

	req.Header.Set("Origin", "http://elsewhere:1")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("foreign preflight: %d %v", resp.StatusCode, resp.Header)
	}

	resp, err = http.Get(srv.URL + "/decode")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("GET: status %d", resp.StatusCode)
	}
}

func TestOriginsFromEnv(t *testing.T) {
	t.Setenv(EnvCORSOrigins, "")
	if got := OriginsFromEnv(); strings.Join(got, ",") != strings.Join(DefaultOrigins, ",") {
		t.Fatalf("default: %v", got)
	}
	t.Setenv(EnvCORSOrigins, " https://ui.example/ , http://localhost:8080")
	if got := OriginsFromEnv(); strings.Join(got, ",") != "https://ui.example,http://localhost:8080" {
		t.Fatalf("env: %v", got)
	}
}
