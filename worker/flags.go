package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"karvi-edda-temporal/activities"
	"karvi-edda-temporal/api/account"
	"karvi-edda-temporal/api/intake"
	"karvi-edda-temporal/api/task"
	"karvi-edda-temporal/intake"
	"karvi-edda-temporal/internal/fleet"
	"karvi-edda-temporal/internal/karvi"
	"karvi-edda-temporal/internal/temporalconn"
	"karvi-edda-temporal/internal/timescale"
	"karvi-edda-temporal/stalls"
)

type config struct {
	conn                           temporalconn.Flags
	workRoot, conductor, templates string
	sinkKind, sinkDir, karviURL    string
	karviRateLimit                 rateLimit
	stopGrace                      time.Duration
	tailLinger, tailPoll           time.Duration
	tailHeartbeat                  time.Duration
	registerSearchAttrs            bool
	maxActivities                  int
	codecAddr                      string
	pprofAddr                      string
	eventsDir                      string
	metricsAddr                    string
	host                           string
	intakeKarvi                    bool
	intakeHint                     string
	intakePoll                     time.Duration
	notifyURL, notifyDeadLetter    string
	limitPatterns                  string
	stallAfter                     time.Duration
	onStall                        string
	// account: the agent account of the tasks that name none (and no
	// slot pool); "" for one per task queue, accountNone for none
	// (workerAccount).
	account string
	// timeScale divides the default of every period of the worker and of
	// the workflows it starts (internal/timescale); periods set by their
	// own flag are used as given.
	timeScale timescale.Scale
}

// flagEnv names the environment variable of every worker flag but the
// connection's (-address, -namespace, -task-queue), which temporalconn
// resolves together with the temporal CLI's profile. A flag on the command
// line wins over its variable, the variable over the default.
var flagEnv = []struct{ flag, env string }{
	{"work-root", "KARVI_EDDA_WORK_ROOT"},
	{"conductor", "EDDA_BIN"},
	{"templates", "KARVI_EDDA_TEMPLATES"},
	{"sink", "KARVI_EDDA_SINK"},
	{"sink-dir", "KARVI_EDDA_SINK_DIR"},
	{"karvi-url", "KARVI_URL"},
	{"karvi-rate-limit", "KARVI_RATE_LIMIT"},
	{"stop-grace", "KARVI_EDDA_STOP_GRACE"},
	{"tail-linger", "KARVI_EDDA_TAIL_LINGER"},
	{"tail-poll", "KARVI_EDDA_TAIL_POLL"},
	{"tail-heartbeat", "KARVI_EDDA_TAIL_HEARTBEAT"},
	{"max-activities", "KARVI_EDDA_MAX_ACTIVITIES"},
	{"register-search-attributes", "KARVI_EDDA_REGISTER_SEARCH_ATTRIBUTES"},
	{"codec-addr", "KARVI_EDDA_CODEC_ADDR"},
	{"pprof-addr", "KARVI_EDDA_PPROF_ADDR"},
	{"events-dir", "KARVI_EDDA_EVENTS_DIR"},
	{"metrics-addr", "KARVI_EDDA_METRICS_ADDR"},
	{"host", "KARVI_EDDA_HOST"},
	{"intake-karvi", "KARVI_EDDA_INTAKE_KARVI"},
	{"intake-runtime-hint", "KARVI_EDDA_INTAKE_RUNTIME_HINT"},
	{"intake-poll", "KARVI_EDDA_INTAKE_POLL"},
	{"notify-url", "KARVI_EDDA_NOTIFY_URL"},
	{"notify-dead-letter", "KARVI_EDDA_NOTIFY_DEAD_LETTER"},
	{"limit-patterns", "KARVI_EDDA_LIMIT_PATTERNS"},
	{"stall-after", "KARVI_EDDA_STALL_AFTER"},
	{"on-stall", "KARVI_EDDA_ON_STALL"},
	{"account", "KARVI_EDDA_ACCOUNT"},
	{"time-scale", timescale.Env},
}

const usageHeader = `worker: runs TaskWorkflow and its activities on a Temporal task queue.

Usage: worker [flags]

Every flag can be set by the environment variable in its description; the
flag wins. TLS, API keys and profiles are read the way the temporal CLI reads
them: TEMPORAL_API_KEY, TEMPORAL_TLS_*, TEMPORAL_CONFIG_FILE, TEMPORAL_PROFILE
(README, "Configuration"). Payload encryption: KARVI_TEMPORAL_CODEC_KEY.

Flags:
`

func newFlagSet(c *config) *flag.FlagSet {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	// Errors and help are printed once, by main.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c.conn.Register(fs)
	fs.StringVar(&c.workRoot, "work-root", ".run/work", "directory holding every task's workspace and run records")
	fs.StringVar(&c.conductor, "conductor", "edda", "the edda binary, or the simulator")
	fs.StringVar(&c.templates, "templates", "", "directory of operator plan templates, one YAML per skill")
	fs.StringVar(&c.sinkKind, "sink", "file", "where briefs and task status go: file or karvi")
	fs.StringVar(&c.sinkDir, "sink-dir", ".run/briefs", "directory of the file sink")
	fs.StringVar(&c.karviURL, "karvi-url", "http://localhost:3461", "karvi base URL for the karvi sink; the token comes only from KARVI_API_TOKEN")
	c.karviRateLimit = karvi.DefaultRateLimit
	fs.Var(&c.karviRateLimit, "karvi-rate-limit", "requests a `minute` the worker sends to karvi, all tasks together, or off: karvi's own KARVI_RATE_LIMIT (default 120); the worker keeps under it and waits out a 429's Retry-After")
	fs.DurationVar(&c.stopGrace, "stop-grace", 10*time.Second, "time a stopped conductor gets between TERM and KILL")
	fs.DurationVar(&c.tailLinger, "tail-linger", 5*time.Millisecond, "workflows started by an earlier version only: how long their tail keeps collecting after the first new line, to batch bursts")
	fs.DurationVar(&c.tailPoll, "tail-poll", 250*time.Millisecond, "fallback poll interval of the event-log tail")
	fs.DurationVar(&c.tailHeartbeat, "tail-heartbeat", activities.DefaultTailHeartbeat, "heartbeat timeout of a running task's delivering tail: how long a killed worker's tasks wait before another worker delivers for them; their heartbeats are a running task's only server cost between phase boundaries")
	fs.IntVar(&c.maxActivities, "max-activities", 5000, "activities this worker runs at once; every running task holds one (its delivering tail), so this bounds the tasks one worker carries")
	fs.BoolVar(&c.registerSearchAttrs, "register-search-attributes", true, "add the workflow's search attributes to the namespace if missing")
	fs.StringVar(&c.codecAddr, "codec-addr", "", "serve the payload codec endpoint for the Web UI and CLI on this `address` (127.0.0.1:port); needs KARVI_TEMPORAL_CODEC_KEY")
	fs.StringVar(&c.pprofAddr, "pprof-addr", "", "serve net/http/pprof on this loopback `address` (127.0.0.1:port), for profiling")
	fs.StringVar(&c.eventsDir, "events-dir", "", "`directory` of the tasks' canonical event streams, one <run_id>.jsonl per task (default <work-root>/events)")
	fs.StringVar(&c.metricsAddr, "metrics-addr", "", "serve Prometheus metrics on /metrics at this loopback `address` (127.0.0.1:port): the SDK's and the worker's own")
	fs.StringVar(&c.host, "host", "", "`name` of this worker's machine in a fleet: it also polls <task-queue>@<name>, where the activities of the conductors it starts go (default the hostname)")
	fs.BoolVar(&c.intakeKarvi, "intake-karvi", false, "follow the karvi board at -karvi-url and run the tasks it routes here by themselves (needs -sink karvi; docs/intake.md)")
	fs.StringVar(&c.intakeHint, "intake-runtime-hint", intake.DefaultRuntimeHint, "the runtimeHint of the karvi tasks the intake takes")
	fs.DurationVar(&c.intakePoll, "intake-poll", intakeapi.DefaultPoll, "how often the intake reads karvi's board again besides its live feed (karvi's review writes without an event)")
	fs.StringVar(&c.notifyURL, "notify-url", "", "http(s) `URL` of a webhook told when a task pauses, resumes or ends blocked, a host is lost, a run ends (signed with KARVI_EDDA_NOTIFY_SECRET, which it needs); empty for none")
	fs.StringVar(&c.notifyDeadLetter, "notify-dead-letter", "", "JSONL `file` keeping the notifications the webhook did not take (default <work-root>/notify-dead-letter.jsonl)")
	fs.StringVar(&c.limitPatterns, "limit-patterns", "", "YAML `file` of usage-limit message patterns of your own, tried before the built-in ones (docs/pauses.md)")
	fs.DurationVar(&c.stallAfter, "stall-after", stalls.DefaultAfter, "a phase with no event and no agent transcript line for this long has stalled, when its dispatch sets no stallAfterSec; applies only to phases whose timeout is longer; 0 watches for none (docs/stalls.md)")
	fs.StringVar(&c.onStall, "on-stall", string(stalls.Warn), "what follows a stall when the dispatch sets no onStall: warn (report only), redispatch (attempt n+1) or abort")
	fs.StringVar(&c.account, "account", "", "the agent `account` of the tasks that name no account and no slot pool: they pause together when one meets a usage limit; none: each pauses alone (default default.<task-queue>, one per task queue; docs/pauses.md)")
	c.timeScale = timescale.One
	fs.Var(&c.timeScale, "time-scale", "how many times faster than real time every period runs, for tests and soaks: at 60 a minute lasts a second (the fence sweep, heartbeats and graces, stall thresholds, the intake poll, pauses, the karvi rate limit's minute, the workflows' waits; docs/timescale.md); a period set by its own flag is used as given; 1 is real time")
	for _, fe := range flagEnv {
		f := fs.Lookup(fe.flag)
		f.Usage += " (env " + fe.env + ")"
	}
	return fs
}

// parseFlags reads the command line, then fills every flag it did not set
// from its environment variable through the flag's own parser, so a bad
// value is reported the same way, naming the variable.
func parseFlags(args []string, getenv func(string) string) (config, error) {
	c := config{conn: temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}}
	fs := newFlagSet(&c)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q: the worker takes only flags", fs.Arg(0))
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	for _, fe := range flagEnv {
		v := getenv(fe.env)
		if given[fe.flag] || v == "" {
			continue
		}
		if err := fs.Set(fe.flag, v); err != nil {
			return c, fmt.Errorf("%s=%q: want %s (it sets -%s)", fe.env, v, want(fs.Lookup(fe.flag)), fe.flag)
		}
		given[fe.flag] = true
	}
	if c.sinkKind != "file" && c.sinkKind != "karvi" {
		return c, fmt.Errorf("-sink (KARVI_EDDA_SINK) must be file or karvi, got %q", c.sinkKind)
	}
	if c.intakeKarvi && c.sinkKind != "karvi" {
		return c, fmt.Errorf("-intake-karvi (KARVI_EDDA_INTAKE_KARVI) needs -sink karvi (KARVI_EDDA_SINK): the tasks it takes report their status to the board")
	}
	if c.intakePoll < time.Second || c.intakePoll > time.Hour {
		return c, fmt.Errorf("-intake-poll (KARVI_EDDA_INTAKE_POLL) must be between 1s and 1h, got %s: each poll reads karvi's whole board", c.intakePoll)
	}
	if c.intakeKarvi && c.intakeHint == "" {
		return c, fmt.Errorf("-intake-runtime-hint (KARVI_EDDA_INTAKE_RUNTIME_HINT) must not be empty")
	}
	if _, err := stalls.ParseAction(c.onStall); err != nil {
		return c, fmt.Errorf("-on-stall (KARVI_EDDA_ON_STALL): %w", err)
	}
	if c.stallAfter != 0 && c.stallAfter < stalls.MinAfter {
		return c, fmt.Errorf("-stall-after (KARVI_EDDA_STALL_AFTER) %s: want at least %s, or 0 to watch for none", c.stallAfter, stalls.MinAfter)
	}
	if c.account != "" && c.account != accountNone {
		if err := accountapi.ValidName(c.account); err != nil {
			return c, fmt.Errorf("-account (KARVI_EDDA_ACCOUNT): %w", err)
		}
	}
	if c.host != "" {
		if err := fleet.CheckHost(c.host); err != nil {
			return c, fmt.Errorf("-host (KARVI_EDDA_HOST): %w", err)
		}
	}
	c.scaleDefaults(given)
	return c, nil
}

// scaleDefaults divides the default of each period flag not given by the
// time scale; the bounds above hold for a period an operator chose, not
// for a scaled default.
func (c *config) scaleDefaults(given map[string]bool) {
	for _, p := range []struct {
		flag string
		d    *time.Duration
		min  time.Duration
	}{
		{flag: "stop-grace", d: &c.stopGrace},
		{flag: "intake-poll", d: &c.intakePoll},
		{flag: "stall-after", d: &c.stallAfter},
		// The tail heartbeats every HeartbeatEvery: a timeout of a few of
		// them keeps a slow heartbeat from failing a live delivery.
		{flag: "tail-heartbeat", d: &c.tailHeartbeat, min: activities.MinScaledTailHeartbeat},
	} {
		if !given[p.flag] {
			*p.d = max(c.timeScale.Of(*p.d), p.min)
		}
	}
}

// accountNone is the -account of a worker whose tasks that name no
// account each pause alone.
const accountNone = "none"

// workerAccount is the agent account of the tasks the worker claims a host
// for that name none: -account, by default one per task queue; "" for
// none. queue is the worker's task queue, as the connection resolved it.
func workerAccount(c config, queue string) string {
	switch c.account {
	case accountNone:
		return ""
	case "":
		return accountapi.QueueAccount(queue)
	}
	return c.account
}

// want describes the values a flag takes, for an error about its variable.
func want(f *flag.Flag) string {
	switch f.Value.(flag.Getter).Get().(type) {
	case time.Duration:
		return "a duration such as 10s or 250ms"
	case bool:
		return "true or false"
	case rateLimit:
		return "off or a number of requests a minute"
	case timescale.Scale:
		return "a number of at least 1, such as 60 for a minute that lasts a second"
	}
	return "a valid value"
}

func printUsage(w io.Writer) {
	c := config{conn: temporalconn.Flags{DefaultTaskQueue: taskapi.DefaultTaskQueue}}
	fs := newFlagSet(&c)
	fs.SetOutput(w)
	fmt.Fprint(w, usageHeader)
	fs.PrintDefaults()
}

// rateLimit is -karvi-rate-limit: requests a minute, karvi.RateLimitOff
// for none, written as karvi's KARVI_RATE_LIMIT is.
type rateLimit int

func (r *rateLimit) String() string {
	if r == nil || int(*r) == karvi.RateLimitOff {
		return "off"
	}
	return strconv.Itoa(int(*r))
}

func (r *rateLimit) Set(v string) error {
	n, err := karvi.ParseRateLimit(v)
	if err != nil {
		return err
	}
	*r = rateLimit(n)
	return nil
}

func (r *rateLimit) Get() any { return *r }
