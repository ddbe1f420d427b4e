package temporalconn

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/internal/codec"
)

// mapEnv is an environment that holds only what a test puts in it, so the
// developer's own TEMPORAL_* variables and profile file stay out.
type mapEnv map[string]string

func (m mapEnv) Environ() []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

func (m mapEnv) LookupEnv(k string) (string, bool) {
	v, ok := m[k]
	return v, ok
}

// isolated is an environment whose profile file is path, which need not
// exist.
func isolated(path string, kv ...string) mapEnv {
	env := mapEnv{"TEMPORAL_CONFIG_FILE": path}
	for i := 0; i+1 < len(kv); i += 2 {
		env[kv[i]] = kv[i+1]
	}
	return env
}

func writeProfile(t *testing.T, toml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "temporal.toml")
	require.NoError(t, os.WriteFile(path, []byte(toml), 0o600))
	return path
}

const profiles = `
[profile.default]
address = "profile-default:7233"
namespace = "profile-ns"

[profile.cloud]
address = "cloud.example:7233"
namespace = "cloud-ns"
api_key = "cloud-key"

[profile.mtls]
address = "mtls.example:7233"
[profile.mtls.tls]
server_name = "mtls.internal"
`

func TestPrecedenceFlagsOverEnvOverProfileOverDefaults(t *testing.T) {
	file := writeProfile(t, profiles)
	missing := filepath.Join(t.TempDir(), "none.toml")
	cases := []struct {
		name                string
		flags               Flags
		env                 mapEnv
		addr, ns, queue     string
		configFile, profile string
	}{
		{name: "nothing configured", env: isolated(missing),
			addr: DefaultAddress, ns: DefaultNamespace, queue: "built-in", profile: "default"},
		{name: "environment", env: isolated(missing, "TEMPORAL_ADDRESS", "env:1", "TEMPORAL_NAMESPACE", "env-ns", EnvTaskQueue, "env-q"),
			addr: "env:1", ns: "env-ns", queue: "env-q", profile: "default"},
		{name: "default profile", env: isolated(file),
			addr: "profile-default:7233", ns: "profile-ns", queue: "built-in", configFile: file, profile: "default"},
		{name: "environment over profile", env: isolated(file, "TEMPORAL_ADDRESS", "env:1"),
			addr: "env:1", ns: "profile-ns", queue: "built-in", configFile: file, profile: "default"},
		{name: "flags over environment and profile",
			flags: Flags{Address: "flag:1", Namespace: "flag-ns", TaskQueue: "flag-q"},
			env:   isolated(file, "TEMPORAL_ADDRESS", "env:1", "TEMPORAL_NAMESPACE", "env-ns", EnvTaskQueue, "env-q"),
			addr:  "flag:1", ns: "flag-ns", queue: "flag-q", configFile: file, profile: "default"},
		{name: "TEMPORAL_PROFILE picks the profile", env: isolated(file, "TEMPORAL_PROFILE", "cloud"),
			addr: "cloud.example:7233", ns: "cloud-ns", queue: "built-in", configFile: file, profile: "cloud"},
		{name: "an empty variable falls back to the default", env: isolated(file, "TEMPORAL_ADDRESS", ""),
			addr: DefaultAddress, ns: "profile-ns", queue: "built-in", configFile: file, profile: "default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.flags.DefaultTaskQueue = "built-in"
			cfg, err := load(c.flags, c.env, nil)
			require.NoError(t, err)
			require.Equal(t, c.addr, cfg.Options.HostPort)
			require.Equal(t, c.ns, cfg.Options.Namespace)
			require.Equal(t, c.queue, cfg.TaskQueue)
			require.Equal(t, c.configFile, cfg.ConfigFile)
			require.Equal(t, c.profile, cfg.Profile)
			require.Nil(t, cfg.Options.DataConverter, "no codec key, the SDK's default converter")
		})
	}
}

func TestTLSAndCredentials(t *testing.T) {
	file := writeProfile(t, profiles)
	missing := filepath.Join(t.TempDir(), "none.toml")

	cfg, err := load(Flags{}, isolated(missing), nil)
	require.NoError(t, err)
	require.False(t, cfg.TLS(), "plain connection unless something asks for TLS")
	require.Nil(t, cfg.Options.Credentials)

	// An API key turns TLS on (Temporal Cloud), unless TLS is turned off.
	cfg, err = load(Flags{}, isolated(file, "TEMPORAL_PROFILE", "cloud"), nil)
	require.NoError(t, err)
	require.True(t, cfg.TLS())
	require.NotNil(t, cfg.Options.Credentials)
	cfg, err = load(Flags{}, isolated(file, "TEMPORAL_PROFILE", "cloud", "TEMPORAL_TLS", "false"), nil)
	require.NoError(t, err)
	require.False(t, cfg.TLS())
	require.NotNil(t, cfg.Options.Credentials)
	cfg, err = load(Flags{}, isolated(missing, "TEMPORAL_API_KEY", "k"), nil)
	require.NoError(t, err)
	require.True(t, cfg.TLS())

	// -address replaces the address only: the profile's TLS stays.
	cfg, err = load(Flags{Address: "127.0.0.1:9"}, isolated(file, "TEMPORAL_PROFILE", "mtls"), nil)
	require.NoError(t, err)
	require.Equal(t, "127.0.0.1:9", cfg.Options.HostPort)
	require.True(t, cfg.TLS())
	require.Equal(t, "mtls.internal", cfg.Options.ConnectionOptions.TLS.ServerName)

	// TLS settings from the environment alone.
	cfg, err = load(Flags{}, isolated(missing, "TEMPORAL_TLS_SERVER_NAME", "env.internal"), nil)
	require.NoError(t, err)
	require.True(t, cfg.TLS())
	require.Equal(t, "env.internal", cfg.Options.ConnectionOptions.TLS.ServerName)
	cfg, err = load(Flags{}, isolated(missing, "TEMPORAL_TLS", "TRUE"), nil)
	require.NoError(t, err)
	require.True(t, cfg.TLS())

	// gRPC headers from the environment.
	cfg, err = load(Flags{}, isolated(missing, "TEMPORAL_GRPC_META_X_TENANT", "t1"), nil)
	require.NoError(t, err)
	require.NotNil(t, cfg.Options.HeadersProvider)
	h, err := cfg.Options.HeadersProvider.GetHeaders(t.Context())
	require.NoError(t, err)
	require.Equal(t, map[string]string{"x-tenant": "t1"}, h)
}

func TestBadSettingsAreErrorsNamingTheirSource(t *testing.T) {
	file := writeProfile(t, profiles)
	missing := filepath.Join(t.TempDir(), "none.toml")
	broken := writeProfile(t, "[profile.default\naddress = ")
	cases := []struct {
		name string
		env  mapEnv
		want []string
	}{
		{"unreadable boolean", isolated(missing, "TEMPORAL_TLS", "yes"), []string{"TEMPORAL_TLS=\"yes\"", "true, false, 1 or 0"}},
		{"unreadable host verification", isolated(missing, "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "off"), []string{"TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"}},
		{"profile not in the file", isolated(file, "TEMPORAL_PROFILE", "nope"), []string{"nope", file}},
		{"profile but no file", isolated(missing, "TEMPORAL_PROFILE", "cloud"), []string{"cloud", "the environment, no profile file at " + missing}},
		{"file that is not TOML", isolated(broken), []string{broken, "parsing"}},
		{"CA that does not exist", isolated(missing, "TEMPORAL_TLS_SERVER_CA_CERT_PATH", "/no/such/ca.pem"), []string{"/no/such/ca.pem"}},
		{"client cert without key", isolated(missing, "TEMPORAL_TLS_CLIENT_CERT_PATH", "/x/cert.pem"), []string{"client cert or key"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := load(Flags{}, c.env, nil)
			require.Error(t, err)
			for _, w := range c.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}

func TestCodecIsApplied(t *testing.T) {
	k, err := codec.ParseKey("k1:" + strings.Repeat("ab", codec.KeySize))
	require.NoError(t, err)
	keys, err := codec.NewKeys(k)
	require.NoError(t, err)
	cfg, err := load(Flags{}, isolated(filepath.Join(t.TempDir(), "none.toml")), keys)
	require.NoError(t, err)
	require.Same(t, keys, cfg.Keys)
	p, err := cfg.Options.DataConverter.ToPayload("plain secret")
	require.NoError(t, err)
	require.NotContains(t, string(p.GetData()), "plain secret")
	var back string
	require.NoError(t, cfg.Options.DataConverter.FromPayload(p, &back))
	require.Equal(t, "plain secret", back)
}

// Load reads the codec key from the process environment, and a bad key
// stops it with the variable named.
func TestLoadReadsTheCodecKeyFromTheEnvironment(t *testing.T) {
	t.Setenv("TEMPORAL_CONFIG_FILE", filepath.Join(t.TempDir(), "none.toml"))
	t.Setenv(codec.EnvKey, "not-a-key")
	_, err := Load(Flags{})
	require.ErrorContains(t, err, codec.EnvKey)

	t.Setenv(codec.EnvKey, strings.Repeat("cd", codec.KeySize))
	cfg, err := Load(Flags{})
	require.NoError(t, err)
	require.NotNil(t, cfg.Keys)
	require.NotNil(t, cfg.Options.DataConverter)
}

func TestLogValueHidesTheAPIKey(t *testing.T) {
	file := writeProfile(t, profiles)
	cfg, err := load(Flags{}, isolated(file, "TEMPORAL_PROFILE", "cloud"), nil)
	require.NoError(t, err)
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "temporal", cfg)
	require.NotContains(t, buf.String(), "cloud-key")
	for _, want := range []string{"temporal.address=cloud.example:7233", "temporal.tls=true", "temporal.apiKey=true", "temporal.profile=cloud"} {
		require.Contains(t, buf.String(), want)
	}
}

// A command's global flags and its subcommand's share one Flags: a later
// registration keeps what was parsed, and the last value given wins.
func TestRegisterOnTwoFlagSets(t *testing.T) {
	var f Flags
	global := flag.NewFlagSet("g", flag.ContinueOnError)
	f.Register(global)
	require.NoError(t, global.Parse([]string{"-address", "a:1", "-namespace", "ns", "cmd"}))
	sub := flag.NewFlagSet("cmd", flag.ContinueOnError)
	f.Register(sub)
	require.NoError(t, sub.Parse([]string{"-address", "b:2", "-task-queue", "q", "arg"}))
	require.Equal(t, Flags{Address: "b:2", Namespace: "ns", TaskQueue: "q"}, f)
}
