package codec

import (
	"net/http"
	"os"
	"slices"
	"strings"

	"go.temporal.io/sdk/converter"
)

// EnvCORSOrigins lists the browser origins (comma-separated) allowed to call
// the codec endpoint; see OriginsFromEnv.
const EnvCORSOrigins = "KARVI_TEMPORAL_CODEC_CORS_ORIGINS"

// DefaultOrigins are the origins of the local dev server's Web UI
// (temporal server start-dev --ui-ip 127.0.0.1, port 8233).
var DefaultOrigins = []string{"http://localhost:8233", "http://127.0.0.1:8233"}

// maxBody bounds one request. Temporal limits a payload to a few MB; a batch
// of them still fits.
const maxBody = 16 << 20

// HandlerOptions configures NewHandler.
type HandlerOptions struct {
	// Origins allowed to call from a browser (the Web UI's origin, e.g.
	// "http://localhost:8233"). Empty: DefaultOrigins. "*" allows any origin;
	// only for a codec server that holds no real key.
	Origins []string
	// Namespaces, when not empty, restricts the endpoint to requests whose
	// X-Namespace header (sent by the Web UI and the CLI) is in the list.
	Namespaces []string
}

// OriginsFromEnv returns the origins in EnvCORSOrigins, or DefaultOrigins.
func OriginsFromEnv() []string {
	var out []string
	for _, o := range strings.Split(os.Getenv(EnvCORSOrigins), ",") {
		if o = strings.TrimSpace(o); o != "" {
			out = append(out, strings.TrimRight(o, "/"))
		}
	}
	if len(out) == 0 {
		return slices.Clone(DefaultOrigins)
	}
	return out
}

// Handler is the remote codec endpoint for the Web UI ("Codec Server" setting)
// and the temporal CLI (--codec-endpoint): POST <prefix>/encode and
// <prefix>/decode with a Payloads message as protobuf JSON, answered the
// same way. CORS admits DefaultOrigins; use NewHandler for others.
func Handler(k *Keys) http.Handler { return NewHandler(k, HandlerOptions{}) }

// NewHandler is Handler with options.
func NewHandler(k *Keys, opts HandlerOptions) http.Handler {
	origins := opts.Origins
	if len(origins) == 0 {
		origins = DefaultOrigins
	}
	return &corsHandler{
		inner:      converter.NewPayloadCodecHTTPHandler(NewCodec(k)),
		origins:    slices.Clone(origins),
		namespaces: slices.Clone(opts.Namespaces),
	}
}

type corsHandler struct {
	inner      http.Handler
	origins    []string
	namespaces []string
}

func (h *corsHandler) allowedOrigin(origin string) bool {
	return origin != "" && (slices.Contains(h.origins, "*") || slices.Contains(h.origins, origin))
}

func (h *corsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if h.allowedOrigin(origin) {
		// The Web UI sends its access token when "pass access token" is on,
		// hence credentials and the Authorization header.
		hdr.Set("Access-Control-Allow-Origin", origin)
		hdr.Set("Access-Control-Allow-Credentials", "true")
		hdr.Set("Access-Control-Allow-Methods", "POST, OPTIONS")
		hdr.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Namespace")
		hdr.Set("Access-Control-Max-Age", "600")
	}
	// A browser on another origin is refused outright rather than served an
	// answer it cannot read; clients without Origin (the CLI, the SDK's
	// remote codec) are not browsers and pass.
	if origin != "" && !h.allowedOrigin(origin) {
		http.Error(w, "origin "+origin+" is not allowed; add it to "+EnvCORSOrigins, http.StatusForbidden)
		return
	}
	if r.Method == http.MethodOptions {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	if len(h.namespaces) > 0 {
		ns := r.Header.Get("X-Namespace")
		if !slices.Contains(h.namespaces, ns) {
			http.Error(w, "namespace "+quote(ns)+" is not served by this codec endpoint", http.StatusForbidden)
			return
		}
	}
	if r.Body != nil {
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	}
	h.inner.ServeHTTP(w, r)
}

func quote(s string) string {
	if s == "" {
		return "(none: set the X-Namespace header)"
	}
	return `"` + s + `"`
}
