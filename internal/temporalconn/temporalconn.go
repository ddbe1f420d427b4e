package temporalconn

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/contrib/envconfig"
	"go.temporal.io/sdk/log"

	"karvi-edda-temporal/internal/codec"
)

// Defaults when neither a flag, the environment nor a profile says otherwise.
const (
	DefaultAddress   = "127.0.0.1:7233"
	DefaultNamespace = "default"
)

// EnvTaskQueue names the task queue when -task-queue is not given.
const EnvTaskQueue = "KARVI_EDDA_TASK_QUEUE"

// Flags are what the command line says (an empty field was not given),
// and the caller's default task queue.
type Flags struct {
	Address   string
	Namespace string
	TaskQueue string
	// DefaultTaskQueue is the queue when neither -task-queue nor
	// KARVI_EDDA_TASK_QUEUE names one.
	DefaultTaskQueue string
}

// Register adds -address, -namespace and -task-queue to fs. The same Flags
// may be registered on several flag sets (a command's global flags and its
// subcommand's): registering never resets a value, and the last one given
// wins.
func (f *Flags) Register(fs *flag.FlagSet) {
	fs.Func("address", "the Temporal frontend, `host:port` (default: $TEMPORAL_ADDRESS, else the profile's, else "+DefaultAddress+")", setString(&f.Address))
	fs.Func("namespace", "the Temporal `namespace` (default: $TEMPORAL_NAMESPACE, else the profile's, else "+DefaultNamespace+")", setString(&f.Namespace))
	fs.Func("task-queue", "the task `queue` (default: $"+EnvTaskQueue+", else "+f.DefaultTaskQueue+")", setString(&f.TaskQueue))
}

func setString(p *string) func(string) error {
	return func(s string) error { *p = s; return nil }
}

// Config is a resolved connection.
type Config struct {
	// Options are ready for client.Dial: address, namespace, TLS,
	// credentials, gRPC headers and the codec's data converter. The logger
	// is Dial's argument.
	Options   client.Options
	TaskQueue string
	// Keys are the payload codec's keys; nil when the codec is off.
	Keys *codec.Keys
	// ConfigFile is the profile file that was read, empty when there was
	// none; Profile is the profile used from it.
	ConfigFile, Profile string
	// lookedAt is where the profile file was looked for.
	lookedAt string
}

// Load resolves the connection from the profile file, the environment and
// f, in that order of increasing precedence (see the package comment).
func Load(f Flags) (Config, error) {
	keys, err := codec.KeysFromEnv()
	if err != nil {
		return Config{}, err
	}
	return load(f, envconfig.EnvLookupOS, keys)
}

func load(f Flags, env envconfig.EnvLookup, keys *codec.Keys) (Config, error) {
	// envconfig ignores a boolean it cannot read, which would leave TLS in
	// a state nobody asked for; a typo should be an error instead.
	for _, name := range []string{"TEMPORAL_TLS", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"} {
		if v, ok := env.LookupEnv(name); ok && v != "" {
			switch strings.ToLower(v) {
			case "1", "0", "true", "false":
			default:
				return Config{}, fmt.Errorf("%s=%q: want true, false, 1 or 0", name, v)
			}
		}
	}
	c := Config{Keys: keys}
	c.lookedAt, c.Profile = profileSource(env)
	if c.lookedAt != "" {
		if _, err := os.Stat(c.lookedAt); err == nil {
			c.ConfigFile = c.lookedAt
		}
	}
	opts, err := envconfig.LoadClientOptions(envconfig.LoadClientOptionsRequest{EnvLookup: env})
	if err != nil {
		return Config{}, fmt.Errorf("connection settings for Temporal from %s: %w", c.source(), err)
	}
	if f.Address != "" {
		opts.HostPort = f.Address
	}
	if opts.HostPort == "" {
		opts.HostPort = DefaultAddress
	}
	if f.Namespace != "" {
		opts.Namespace = f.Namespace
	}
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if keys != nil {
		opts.DataConverter = codec.DataConverter(keys)
	}
	c.Options = opts

	c.TaskQueue = f.TaskQueue
	if c.TaskQueue == "" {
		c.TaskQueue, _ = env.LookupEnv(EnvTaskQueue)
	}
	if c.TaskQueue == "" {
		c.TaskQueue = f.DefaultTaskQueue
	}
	return c, nil
}

// profileSource names the file and profile envconfig reads, picked the way
// it picks them.
func profileSource(env envconfig.EnvLookup) (file, profile string) {
	file, _ = env.LookupEnv("TEMPORAL_CONFIG_FILE")
	if file == "" {
		file = envconfig.DefaultConfigFilePath()
	}
	profile, _ = env.LookupEnv("TEMPORAL_PROFILE")
	if profile == "" {
		profile = envconfig.DefaultConfigFileProfile
	}
	return file, profile
}

// source says where the settings came from, for error messages.
func (c Config) source() string {
	switch {
	case c.ConfigFile != "":
		return fmt.Sprintf("profile %q of %s and the environment", c.Profile, c.ConfigFile)
	case c.lookedAt != "":
		return fmt.Sprintf("the environment, no profile file at %s", c.lookedAt)
	default:
		return "the environment"
	}
}

// TLS reports whether the connection uses TLS.
func (c Config) TLS() bool {
	return c.Options.ConnectionOptions.TLS != nil && !c.Options.ConnectionOptions.TLSDisabled
}

// LogValue shows where a process connects without its secrets.
func (c Config) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("address", c.Options.HostPort),
		slog.String("namespace", c.Options.Namespace),
		slog.String("taskQueue", c.TaskQueue),
		slog.Bool("tls", c.TLS()),
		slog.Bool("apiKey", c.Options.Credentials != nil),
		slog.Bool("codec", c.Keys != nil),
	}
	if c.ConfigFile != "" {
		attrs = append(attrs, slog.String("profile", c.Profile), slog.String("configFile", c.ConfigFile))
	}
	return slog.GroupValue(attrs...)
}

// Dial connects, and fails if the server does not answer (a wrong address,
// a TLS problem, a bad API key) within ctx.
func (c Config) Dial(ctx context.Context, logger log.Logger) (client.Client, error) {
	opts := c.Options
	opts.Logger = logger
	cl, err := client.DialContext(ctx, opts)
	if err != nil {
		tls := "no TLS"
		if c.TLS() {
			tls = "TLS"
		}
		return nil, fmt.Errorf("connect to Temporal at %s (namespace %s, %s; settings from %s): %w",
			opts.HostPort, opts.Namespace, tls, c.source(), err)
	}
	return cl, nil
}
