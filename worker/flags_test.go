package main

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/internal/temporalconn"
)

func getenv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

func TestDefaults(t *testing.T) {
	c, err := parseFlags(nil, getenv(nil))
	require.NoError(t, err)
	require.Equal(t, config{
		conn:     temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue},
		workRoot: ".run/work", conductor: "edda", sinkKind: "file", sinkDir: ".run/briefs",
		karviURL: "http://localhost:3461", karviRateLimit: 120, stopGrace: 10 * time.Second,
		tailLinger: 5 * time.Millisecond, tailPoll: 250 * time.Millisecond, tailHeartbeat: time.Minute, registerSearchAttrs: true,
		maxActivities: 5000, intakeHint: "edda", intakePoll: 10 * time.Second,
		stallAfter: 15 * time.Minute, onStall: "warn", timeScale: 1,
	}, c)
	// No -account: one account per task queue.
	require.Equal(t, "default.karvi-edda", workerAccount(c, "karvi-edda"))
	c, err = parseFlags([]string{"-account", "none"}, getenv(nil))
	require.NoError(t, err)
	require.Empty(t, workerAccount(c, "karvi-edda"), "none: each task pauses alone")
	c, err = parseFlags([]string{"-account", "team-a", "-task-queue", "q2"}, getenv(nil))
	require.NoError(t, err)
	require.Equal(t, "team-a", workerAccount(c, "q2"))
}

// Every flag has a variable; the variable beats the default, the flag beats
// the variable.
func TestEnvironmentThenFlags(t *testing.T) {
	env := map[string]string{
		"KARVI_EDDA_WORK_ROOT":                  "/env/work",
		"EDDA_BIN":                              "/env/edda",
		"KARVI_EDDA_TEMPLATES":                  "/env/templates",
		"KARVI_EDDA_SINK":                       "karvi",
		"KARVI_EDDA_SINK_DIR":                   "/env/briefs",
		"KARVI_URL":                             "http://karvi.env:1",
		"KARVI_RATE_LIMIT":                      "off",
		"KARVI_EDDA_STOP_GRACE":                 "3s",
		"KARVI_EDDA_TAIL_LINGER":                "1ms",
		"KARVI_EDDA_TAIL_POLL":                  "2s",
		"KARVI_EDDA_MAX_ACTIVITIES":             "700",
		"KARVI_EDDA_REGISTER_SEARCH_ATTRIBUTES": "false",
		"KARVI_EDDA_CODEC_ADDR":                 "127.0.0.1:1",
		"KARVI_EDDA_PPROF_ADDR":                 "127.0.0.1:2",
		"KARVI_EDDA_EVENTS_DIR":                 "/env/events",
		"KARVI_EDDA_METRICS_ADDR":               "127.0.0.1:5",
		"KARVI_EDDA_HOST":                       "env-host",
		"KARVI_EDDA_INTAKE_KARVI":               "true",
		"KARVI_EDDA_INTAKE_RUNTIME_HINT":        "env-hint",
		"KARVI_EDDA_INTAKE_POLL":                "7s",
		"KARVI_EDDA_NOTIFY_URL":                 "http://127.0.0.1:9/hook",
		"KARVI_EDDA_NOTIFY_DEAD_LETTER":         "/env/dead.jsonl",
		"KARVI_EDDA_LIMIT_PATTERNS":             "/env/limits.yaml",
		"KARVI_EDDA_STALL_AFTER":                "20m",
		"KARVI_EDDA_ON_STALL":                   "abort",
		"KARVI_EDDA_ACCOUNT":                    "env-account",
		"KARVI_EDDA_TAIL_HEARTBEAT":             "45s",
		"KARVI_EDDA_TIME_SCALE":                 "60",
	}
	flags := 0
	for _, d := range workerFlags {
		if d.name != "" {
			flags++
		}
	}
	require.Len(t, env, flags, "one variable per flag")
	fromEnv := config{
		conn:     temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue},
		workRoot: "/env/work", conductor: "/env/edda", templates: "/env/templates",
		sinkKind: "karvi", sinkDir: "/env/briefs", karviURL: "http://karvi.env:1", karviRateLimit: 0,
		stopGrace: 3 * time.Second, tailLinger: time.Millisecond, tailPoll: 2 * time.Second, tailHeartbeat: 45 * time.Second,
		maxActivities: 700, registerSearchAttrs: false, codecAddr: "127.0.0.1:1", pprofAddr: "127.0.0.1:2",
		eventsDir:   "/env/events",
		metricsAddr: "127.0.0.1:5",
		host:        "env-host",
		intakeKarvi: true, intakeHint: "env-hint", intakePoll: 7 * time.Second,
		notifyURL: "http://127.0.0.1:9/hook", notifyDeadLetter: "/env/dead.jsonl", limitPatterns: "/env/limits.yaml",
		stallAfter: 20 * time.Minute, onStall: "abort", account: "env-account", timeScale: 60,
	}
	c, err := parseFlags(nil, getenv(env))
	require.NoError(t, err)
	require.Equal(t, fromEnv, c)

	c, err = parseFlags([]string{
		"-work-root", "/flag/work", "-conductor", "/flag/edda", "-templates", "/flag/templates",
		"-sink", "file", "-sink-dir", "/flag/briefs", "-karvi-url", "http://karvi.flag:1", "-karvi-rate-limit", "300",
		"-stop-grace", "4s", "-tail-linger", "2ms", "-tail-poll", "3s", "-tail-heartbeat", "90s", "-max-activities", "900",
		"-register-search-attributes=true", "-codec-addr", "127.0.0.1:3", "-pprof-addr", "127.0.0.1:4",
		"-events-dir", "/flag/events",
		"-metrics-addr", "127.0.0.1:6",
		"-host", "flag-host",
		"-sink", "karvi", "-intake-karvi=true", "-intake-runtime-hint", "flag-hint", "-intake-poll", "8s",
		"-notify-url", "https://hooks.example/x", "-notify-dead-letter", "/flag/dead.jsonl", "-limit-patterns", "/flag/limits.yaml",
		"-stall-after", "0", "-on-stall", "redispatch", "-account", "flag-account", "-time-scale", "2.5",
		"-address", "flag:7233", "-namespace", "flag-ns", "-task-queue", "flag-q",
	}, getenv(env))
	require.NoError(t, err)
	require.Equal(t, config{
		conn: temporalconn.Flags{Address: "flag:7233", Namespace: "flag-ns", TaskQueue: "flag-q",
			DefaultTaskQueue: taskapi.DefaultTaskQueue},
		workRoot: "/flag/work", conductor: "/flag/edda", templates: "/flag/templates",
		sinkKind: "karvi", sinkDir: "/flag/briefs", karviURL: "http://karvi.flag:1", karviRateLimit: 300,
		stopGrace: 4 * time.Second, tailLinger: 2 * time.Millisecond, tailPoll: 3 * time.Second, tailHeartbeat: 90 * time.Second,
		maxActivities: 900, registerSearchAttrs: true, codecAddr: "127.0.0.1:3", pprofAddr: "127.0.0.1:4",
		eventsDir:   "/flag/events",
		metricsAddr: "127.0.0.1:6",
		host:        "flag-host",
		intakeKarvi: true, intakeHint: "flag-hint", intakePoll: 8 * time.Second,
		notifyURL: "https://hooks.example/x", notifyDeadLetter: "/flag/dead.jsonl", limitPatterns: "/flag/limits.yaml",
		stallAfter: 0, onStall: "redispatch", account: "flag-account", timeScale: 2.5,
	}, c)
}

func TestBadValuesNameTheirSource(t *testing.T) {
	cases := []struct {
		args []string
		env  map[string]string
		want []string
	}{
		{env: map[string]string{"KARVI_EDDA_STOP_GRACE": "10"}, want: []string{`KARVI_EDDA_STOP_GRACE="10"`, "duration", "-stop-grace"}},
		{env: map[string]string{"KARVI_EDDA_TAIL_POLL": "soon"}, want: []string{"KARVI_EDDA_TAIL_POLL", "duration"}},
		{env: map[string]string{"KARVI_EDDA_REGISTER_SEARCH_ATTRIBUTES": "nah"}, want: []string{"KARVI_EDDA_REGISTER_SEARCH_ATTRIBUTES", "true or false"}},
		{env: map[string]string{"KARVI_EDDA_SINK": "s3"}, want: []string{"KARVI_EDDA_SINK", `"s3"`}},
		{args: []string{"-tail-linger", "x"}, want: []string{"-tail-linger"}},
		{args: []string{"-no-such-flag"}, want: []string{"-no-such-flag"}},
		{args: []string{"stray"}, want: []string{`"stray"`, "only flags"}},
		{env: map[string]string{"KARVI_EDDA_HOST": "h@2"}, want: []string{"KARVI_EDDA_HOST", `"h@2"`}},
		{env: map[string]string{"KARVI_EDDA_INTAKE_KARVI": "true"}, want: []string{"-intake-karvi", "needs -sink karvi"}},
		{args: []string{"-intake-poll", "10ms"}, want: []string{"-intake-poll", "between 1s and 1h", "10ms"}},
		{env: map[string]string{"KARVI_EDDA_ON_STALL": "kill"}, want: []string{"-on-stall (KARVI_EDDA_ON_STALL)", `"kill": want warn, redispatch or abort`}},
		{args: []string{"-stall-after", "100ms"}, want: []string{"-stall-after (KARVI_EDDA_STALL_AFTER)", "100ms", "0 to watch for none"}},
		{env: map[string]string{"KARVI_EDDA_ACCOUNT": "my team"}, want: []string{"-account (KARVI_EDDA_ACCOUNT)", `"my team"`}},
		{env: map[string]string{"KARVI_EDDA_TIME_SCALE": "0.5"}, want: []string{`KARVI_EDDA_TIME_SCALE="0.5"`, "a number of at least 1", "-time-scale"}},
		{args: []string{"-time-scale", "fast"}, want: []string{"-time-scale", `"fast"`}},
		{env: map[string]string{"KARVI_RATE_LIMIT": "fast"}, want: []string{`KARVI_RATE_LIMIT="fast"`, "off or a number of requests a minute", "-karvi-rate-limit"}},
	}
	for _, c := range cases {
		_, err := parseFlags(c.args, getenv(c.env))
		require.Error(t, err, "%v %v", c.args, c.env)
		for _, w := range c.want {
			require.ErrorContains(t, err, w)
		}
	}
	// A variable is not even read when its flag is given.
	_, err := parseFlags([]string{"-stop-grace", "1s"}, getenv(map[string]string{"KARVI_EDDA_STOP_GRACE": "bad"}))
	require.NoError(t, err)
}

// -time-scale divides the defaults of the worker's periods; a period set
// by its flag or variable is used as given.
func TestTimeScaleScalesTheDefaultPeriods(t *testing.T) {
	c, err := parseFlags([]string{"-time-scale", "60"}, getenv(nil))
	require.NoError(t, err)
	require.EqualValues(t, 60, c.timeScale)
	require.Equal(t, 10*time.Second/60, c.stopGrace)
	require.Equal(t, 10*time.Second/60, c.intakePoll)
	require.Equal(t, 15*time.Second, c.stallAfter)
	// The tail heartbeats every second: its timeout keeps room for a few.
	require.Equal(t, 5*time.Second, c.tailHeartbeat)
	// Not periods of the runtime's model: a tail's poll and linger.
	require.Equal(t, 250*time.Millisecond, c.tailPoll)
	require.Equal(t, 5*time.Millisecond, c.tailLinger)

	c, err = parseFlags([]string{"-intake-poll", "3s", "-stall-after", "0"},
		getenv(map[string]string{"KARVI_EDDA_TIME_SCALE": "10", "KARVI_EDDA_STOP_GRACE": "2s", "KARVI_EDDA_TAIL_HEARTBEAT": "20s"}))
	require.NoError(t, err)
	require.EqualValues(t, 10, c.timeScale)
	require.Equal(t, 3*time.Second, c.intakePoll)
	require.Equal(t, time.Duration(0), c.stallAfter)
	require.Equal(t, 2*time.Second, c.stopGrace)
	require.Equal(t, 20*time.Second, c.tailHeartbeat)

	c, err = parseFlags([]string{"-time-scale", "600"}, getenv(nil))
	require.NoError(t, err)
	require.Equal(t, 10*time.Second/600, c.intakePoll, "a scaled default is not held to the bounds of a given one")
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"-h", "-help", "--help"} {
		_, err := parseFlags([]string{arg}, getenv(nil))
		require.ErrorIs(t, err, flag.ErrHelp)
	}
	var out bytes.Buffer
	printUsage(&out)
	for _, d := range workerFlags {
		if d.name != "" {
			require.Contains(t, out.String(), "-"+d.name)
			require.Contains(t, out.String(), "(env "+d.env+")")
		} else {
			require.Contains(t, out.String(), "  "+d.env+"\n", "-h names the variables read from the environment only")
		}
	}
}

// docs/configuration.md lists every flag with its variable, the
// connection's (written by hand, shared with the starter) too, and the
// variables only the environment sets.
func TestConfigurationDocListsEveryFlagAndVariable(t *testing.T) {
	data, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	doc := string(data)
	rows := map[string]string{} // flag -> env column
	for _, line := range strings.Split(doc, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) < 4 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`-") {
			continue
		}
		rows[strings.Trim(strings.TrimSpace(cells[1]), "`-")] = strings.Trim(strings.TrimSpace(cells[2]), "`")
	}
	env := map[string]string{"address": "TEMPORAL_ADDRESS", "namespace": "TEMPORAL_NAMESPACE", "task-queue": temporalconn.EnvTaskQueue}
	for _, d := range workerFlags {
		env[d.name] = d.env
	}
	var c config
	newFlagSet(&c).VisitAll(func(f *flag.Flag) {
		require.Contains(t, rows, f.Name, "docs/configuration.md lacks -%s", f.Name)
		require.Equal(t, env[f.Name], rows[f.Name], "docs/configuration.md's variable for -%s", f.Name)
	})
	for _, v := range []string{"TEMPORAL_API_KEY", "TEMPORAL_CONFIG_FILE", "TEMPORAL_PROFILE",
		"TEMPORAL_TLS_SERVER_CA_CERT_PATH", "TEMPORAL_TLS_CLIENT_CERT_PATH", "TEMPORAL_TLS_SERVER_NAME",
		"KARVI_TEMPORAL_CODEC_KEY", "KARVI_API_TOKEN"} {
		require.Contains(t, doc, v)
	}
}

// A webhook without its secret, or a bad pattern file, stops the worker
// with an error that names the setting.
func TestPauseSettingsRefuseBadValues(t *testing.T) {
	_, _, err := newNotifier(config{notifyURL: "http://127.0.0.1:9/hook"}, t.TempDir(), getenv(nil), nil)
	require.ErrorContains(t, err, "KARVI_EDDA_NOTIFY_SECRET")
	n, closeN, err := newNotifier(config{notifyURL: "http://127.0.0.1:9/hook"}, t.TempDir(),
		getenv(map[string]string{"KARVI_EDDA_NOTIFY_SECRET": "s3cret"}), slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.NotNil(t, n)
	closeN()

	bad := filepath.Join(t.TempDir(), "limits.yaml")
	require.NoError(t, os.WriteFile(bad, []byte("patterns:\n  - name: broad\n    match: 'rate ?limit'\n"), 0o644))
	_, err = limitDetector(config{limitPatterns: bad})
	require.ErrorContains(t, err, "-limit-patterns")
	require.ErrorContains(t, err, "broad")
	d, err := limitDetector(config{})
	require.NoError(t, err)
	require.NotNil(t, d)
}

// The intake a worker starts runs at the worker's time scale, with the
// poll the flags resolved; at real time its input is as it always was.
func TestIntakeInputCarriesTheTimeScale(t *testing.T) {
	c, err := parseFlags([]string{"-sink", "karvi", "-intake-karvi"}, getenv(nil))
	require.NoError(t, err)
	require.Equal(t, intakeapi.Input{BoardURL: "http://localhost:3461", RuntimeHint: "edda", TaskQueue: "q", Poll: 10 * time.Second},
		intakeInput(c, "q"))
	c, err = parseFlags([]string{"-sink", "karvi", "-intake-karvi", "-time-scale", "60"}, getenv(nil))
	require.NoError(t, err)
	require.Equal(t, intakeapi.Input{BoardURL: "http://localhost:3461", RuntimeHint: "edda", TaskQueue: "q",
		Poll: 10 * time.Second / 60, TimeScale: 60}, intakeInput(c, "q"))
}

var update = flag.Bool("update", false, "rewrite the generated worker flag table of docs/configuration.md")

// docs/configuration.md's worker table is made from workerFlags: it fails
// here when either changed without the other. -update writes it anew.
func TestConfigurationDocMatchesTheFlags(t *testing.T) {
	const path = "../docs/configuration.md"
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	doc := string(data)
	begin, end := strings.Index(doc, flagTableBegin), strings.Index(doc, flagTableEnd)
	require.True(t, begin >= 0 && end > begin, "%s lacks the markers of the generated worker flag table:\n%s\n%s", path, flagTableBegin, flagTableEnd)
	want := doc[:begin+len(flagTableBegin)] + "\n" + flagsMarkdown() + doc[end:]
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(want), 0o644))
		return
	}
	if want != doc {
		wl, dl := strings.Split(want, "\n"), strings.Split(doc, "\n")
		i := 0
		for i < len(wl) && i < len(dl) && wl[i] == dl[i] {
			i++
		}
		line := func(ls []string) string {
			if i < len(ls) {
				return ls[i]
			}
			return "(the end)"
		}
		t.Fatalf("%s does not say what workerFlags declare (line %d):\n  the file: %s\n  the flags: %s\nrun `go test ./worker -run TestConfigurationDocMatchesTheFlags -update`",
			path, i+1, line(dl), line(wl))
	}
}
